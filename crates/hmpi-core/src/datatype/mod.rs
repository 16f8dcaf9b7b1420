//! Datatypes: which Rust types travel as messages ([`Equivalence`], plain
//! old data, and the buffer traits [`Buffer`] / [`BufferMut`] built on it),
//! and the MPI datatype engine ([`Datatype`], the derived type constructors
//! of [`UserDatatype`], packing) that the typed API, the reductions of
//! [`crate::op`] and the C library share.
//!
//! A message is the bytes of its values. A type may be sent and received
//! when its bytes say everything about it and any bytes make a valid value:
//! integers, floats, arrays of them, and user `#[repr(C)]` structs without
//! padding made of such fields (`#[derive(Equivalence)]` checks that at
//! compile time). `bool` and `char` are not `Equivalence` (not every byte
//! pattern is a valid `bool` or `char`), nor are references, pointers or
//! tuples (tuples may have padding and have no fixed layout).
//!
//! * [`typemap`]: [`BasicType`], [`Datatype`] (size, bounds, extent, true
//!   bounds, alignment, blocks, density, basic element type) and
//!   [`UserDatatype`]'s constructors;
//! * [`pack`](mod@pack): packing and unpacking, safe over slices and raw
//!   for the C library;
//! * [`external`]: packing in the `"external32"` representation;
//! * [`contents`]: how each type was built (envelope and contents), and
//!   the predefined types chosen by Fortran kind or by size;
//! * distributed arrays ([`UserDatatype::darray`]).
//!
//! # Example
//! ```
//! use hmpi_core::datatype::{Buffer, Equivalence};
//!
//! #[derive(Clone, Copy, Default, Equivalence)]
//! #[equivalence(crate = "hmpi_core")]
//! #[repr(C)]
//! struct Particle {
//!     pos: [f64; 3],
//!     id: u64,
//! }
//!
//! let ps = [Particle::default(); 4];
//! assert_eq!(ps[..].as_bytes().len(), 4 * 32);
//! assert_eq!(7u32.as_bytes(), &7u32.to_ne_bytes());
//! let t = Particle::equivalent_datatype();
//! assert_eq!((t.size(), t.extent(), t.blocks()), (32, 32, &[(0, 32)][..]));
//! ```

pub mod contents;
mod darray;
pub mod external;
pub mod pack;
pub mod typemap;

pub use contents::{
    match_size, Combiner, Constructor, Contents, Distribution, Envelope, TypeClass,
};
pub use hmpi_derive::Equivalence;
pub use typemap::{BasicType, Block, Datatype, Order, UserDatatype, MAX_BLOCKS};

use std::borrow::Cow;
use std::mem::size_of_val;

/// A plain-old-data type that can be sent as its bytes and received from
/// any bytes, with the MPI datatype that describes it (rsmpi's
/// `Equivalence`).
///
/// `#[derive(Equivalence)]` implements it for a `#[repr(C)]` struct whose
/// fields are `Equivalence` and that has no padding (a struct with padding
/// does not compile); its datatype is a struct datatype of the fields'.
///
/// # Safety
/// Implement it only for `Copy` types that
/// * have no padding bytes and no uninitialised bytes (so their bytes may
///   be read as `u8`);
/// * are valid for every byte pattern (so received bytes make a value);
/// * hold no pointers or references (another process's addresses mean
///   nothing, and lifetimes do not cross processes).
///
/// A struct with padding is refused at compile time:
/// ```compile_fail
/// #[derive(Clone, Copy, hmpi_core::datatype::Equivalence)]
/// #[equivalence(crate = "hmpi_core")]
/// #[repr(C)]
/// struct Padded {
///     a: u8, // 3 bytes of padding follow
///     b: u32,
/// }
/// ```
/// and so is a struct without `#[repr(C)]`, or with a field that is not
/// `Equivalence`:
/// ```compile_fail
/// #[derive(Clone, Copy, hmpi_core::datatype::Equivalence)]
/// #[equivalence(crate = "hmpi_core")]
/// #[repr(C)]
/// struct Flag {
///     on: bool,
/// }
/// ```
///
/// [`Equivalence::equivalent_datatype`] must describe the type's layout
/// (size, extent and blocks); the default, the value's bytes as
/// `MPI_BYTE`s, always does.
pub unsafe trait Equivalence: Copy + 'static {
    /// The datatype of one value: a predefined type for the primitives,
    /// a contiguous type for arrays, a struct type for derived structs.
    fn equivalent_datatype() -> Datatype {
        let bytes = Datatype::basic(BasicType::Byte);
        UserDatatype::contiguous(std::mem::size_of::<Self>(), &bytes)
            .map(Datatype::from)
            .unwrap_or(bytes)
    }

    /// [`Equivalence::equivalent_datatype`], borrowed from the process's
    /// table when it is predefined: no reference count changes (two atomic
    /// read-modify-writes on a call's path otherwise).
    fn equivalent_datatype_ref() -> Cow<'static, Datatype> {
        Cow::Owned(Self::equivalent_datatype())
    }
}

macro_rules! equivalence {
    ($($t:ty => $b:ident),* $(,)?) => {
        $(
            // SAFETY: a primitive number type: no padding, every bit
            // pattern is a valid value, no pointers; the basic type has
            // its size and alignment (a test checks).
            unsafe impl Equivalence for $t {
                fn equivalent_datatype() -> Datatype {
                    Datatype::basic(BasicType::$b)
                }
                fn equivalent_datatype_ref() -> Cow<'static, Datatype> {
                    Cow::Borrowed(Datatype::basic_static(BasicType::$b))
                }
            }
        )*
    };
}

#[cfg(target_pointer_width = "64")]
equivalence!(usize => U64, isize => I64);
#[cfg(target_pointer_width = "32")]
equivalence!(usize => U32, isize => I32);

equivalence!(
    u8 => U8, u16 => U16, u32 => U32, u64 => U64, u128 => U128,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64, i128 => I128,
    f32 => F32, f64 => F64,
);

// SAFETY: an array of N elements without padding has no padding (arrays
// have none between elements), and is valid for every byte pattern when
// its elements are; its datatype is N contiguous elements.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {
    fn equivalent_datatype() -> Datatype {
        let t = T::equivalent_datatype();
        UserDatatype::contiguous(N, &t)
            .map(Datatype::from)
            // N values of T exist in memory, so their size cannot overflow.
            .unwrap_or(t)
    }
}

/// Something whose bytes can be sent: one value, a slice or a `Vec` of
/// [`Equivalence`] values.
pub trait Buffer {
    /// The buffer's bytes.
    fn as_bytes(&self) -> &[u8];
    /// The size of one element in bytes.
    fn element_size(&self) -> usize;
    /// The datatype of one element.
    fn element_datatype(&self) -> Datatype;
    /// [`Buffer::element_datatype`], borrowed when it is predefined (no
    /// reference count changes).
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        Cow::Owned(self.element_datatype())
    }
}

/// Something whose bytes can be overwritten by a receive.
pub trait BufferMut {
    /// The buffer's bytes, for writing.
    fn as_bytes_mut(&mut self) -> &mut [u8];
    /// The size of one element in bytes.
    fn element_size(&self) -> usize;
    /// The datatype of one element.
    fn element_datatype(&self) -> Datatype;
    /// [`BufferMut::element_datatype`], borrowed when it is predefined (no
    /// reference count changes).
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        Cow::Owned(self.element_datatype())
    }
}

/// The bytes of a slice of plain old data.
pub(crate) fn bytes_of<T: Equivalence>(s: &[T]) -> &[u8] {
    // SAFETY: `T: Equivalence` has no padding or uninitialised bytes, so
    // all `size_of_val(s)` bytes are initialised and may be read as `u8`
    // (alignment 1); the borrow keeps `s` alive and shared.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), size_of_val(s)) }
}

/// The bytes of a slice of plain old data, for writing.
pub(crate) fn bytes_of_mut<T: Equivalence>(s: &mut [T]) -> &mut [u8] {
    let len = size_of_val(s);
    // SAFETY: as in `bytes_of`; moreover every byte pattern is a valid `T`,
    // so writing any bytes leaves valid values; the exclusive borrow of `s`
    // is carried over to the result.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), len) }
}

impl<T: Equivalence> Buffer for T {
    fn as_bytes(&self) -> &[u8] {
        bytes_of(std::slice::from_ref(self))
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

impl<T: Equivalence> Buffer for [T] {
    fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

impl<T: Equivalence> Buffer for Vec<T> {
    fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

impl<T: Equivalence> BufferMut for T {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(std::slice::from_mut(self))
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

impl<T: Equivalence> BufferMut for [T] {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

impl<T: Equivalence> BufferMut for Vec<T> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn element_datatype(&self) -> Datatype {
        T::equivalent_datatype()
    }
    fn element_datatype_ref(&self) -> Cow<'static, Datatype> {
        T::equivalent_datatype_ref()
    }
}

/// A value of `T` with every byte zero (valid: `T` accepts every pattern).
pub(crate) fn zeroed<T: Equivalence>() -> T {
    // SAFETY: `T: Equivalence` is valid for every byte pattern, all-zero
    // included.
    unsafe { std::mem::zeroed() }
}

/// `n` values of `T`, every byte zero, allocated zeroed (no separate pass
/// over the memory when the allocator hands out fresh pages).
pub(crate) fn zeroed_vec<T: Equivalence>(n: usize) -> Vec<T> {
    let layout = match std::alloc::Layout::array::<T>(n) {
        Ok(l) if l.size() > 0 => l,
        // Nothing to allocate (n == 0 or a zero-sized T), or a length no
        // message can have: the standard path (which reports a capacity
        // overflow as `Vec` always does).
        _ => return vec![zeroed(); n],
    };
    // SAFETY: `layout` has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of
    // `[T; n]` (so with `T`'s alignment and `n * size_of::<T>()` bytes,
    // which is the capacity in bytes), and all its bytes are zero, a valid
    // `T` (`T: Equivalence` accepts every byte pattern): `n` initialised
    // elements.
    unsafe { Vec::from_raw_parts(p.cast::<T>(), n, n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let mut a = [0u16; 3];
        a.as_bytes_mut()
            .copy_from_slice(&[1, 0, 2, 0, 3, 0].map(u8::from_le));
        if cfg!(target_endian = "little") {
            assert_eq!(a, [1, 2, 3]);
        }
        assert_eq!(vec![1.5f64; 2].as_bytes().len(), 16);
        assert_eq!([[1u8; 3]; 2][..].as_bytes(), &[1u8; 6]);
        assert_eq!(zeroed::<[i64; 4]>(), [0; 4]);
        assert_eq!(zeroed_vec::<u32>(1000), vec![0u32; 1000]);
        assert!(zeroed_vec::<f64>(0).is_empty());
        assert_eq!(zeroed_vec::<[u8; 0]>(3).len(), 3);
        assert_eq!(Buffer::element_size(&7i32), 4);
    }

    fn layout_matches<T: Equivalence>() {
        let t = T::equivalent_datatype();
        let n = std::mem::size_of::<T>();
        assert_eq!((t.size(), t.extent() as usize), (n, n));
        assert_eq!(t.alignment(), std::mem::align_of::<T>().min(t.alignment()));
        assert!(t.is_dense() && t.true_lower_bound() == 0);
    }

    #[test]
    fn equivalent_datatypes_describe_the_layout() {
        layout_matches::<u8>();
        layout_matches::<i16>();
        layout_matches::<u32>();
        layout_matches::<i64>();
        layout_matches::<u128>();
        layout_matches::<usize>();
        layout_matches::<f32>();
        layout_matches::<f64>();
        layout_matches::<[f64; 3]>();
        layout_matches::<[[u16; 2]; 5]>();
        layout_matches::<[u8; 0]>();
        assert_eq!(
            i32::equivalent_datatype().basic_type(),
            Some(BasicType::I32)
        );
        assert_eq!(
            <[f32; 4]>::equivalent_datatype().basic_type(),
            Some(BasicType::F32)
        );
        assert_eq!(
            u64::equivalent_datatype().predefined(),
            Some(BasicType::U64)
        );
    }

    #[derive(Clone, Copy, Equivalence)]
    #[equivalence(crate = "crate")]
    #[repr(C)]
    struct Mixed {
        a: [u8; 4],
        b: f32,
        c: i64,
        d: [i16; 4],
    }

    #[derive(Clone, Copy, Equivalence)]
    #[equivalence(crate = "crate")]
    #[repr(C)]
    struct Nested {
        m: Mixed,
        x: [u32; 2],
    }

    #[derive(Clone, Copy, Equivalence)]
    #[equivalence(crate = "crate")]
    #[repr(C, packed)]
    struct Packed(u8, u32, [u16; 3]);

    #[derive(Clone, Copy, Equivalence)]
    #[equivalence(crate = "crate")]
    #[repr(C)]
    struct Unit;

    #[test]
    fn packed_tuple_and_unit_structs() {
        let p = Packed::equivalent_datatype();
        assert_eq!((p.size(), p.extent()), (11, 11));
        assert_eq!(p.blocks(), &[(0, 11)]);
        let v = [Packed(1, 0x0203_0405, [6, 7, 8]); 3];
        let mut out = [0u8; 33];
        p.pack(v[..].as_bytes(), 3, &mut out).unwrap();
        assert_eq!(&out[..], v[..].as_bytes());
        let u = Unit::equivalent_datatype();
        assert_eq!((u.size(), u.extent(), u.blocks().len()), (0, 0, 0));
    }

    #[test]
    fn datatypes_and_operations_cross_threads() {
        fn shared<T: Send + Sync + Clone>() {}
        shared::<Datatype>();
        shared::<UserDatatype>();
        shared::<crate::op::Operation>();
        shared::<crate::op::UserOperation>();
    }

    #[test]
    fn derived_structs_get_struct_datatypes() {
        let t = Mixed::equivalent_datatype();
        assert_eq!((t.size(), t.extent(), t.alignment()), (24, 24, 8));
        assert_eq!(t.blocks(), &[(0, 24)]);
        assert!(t.is_mixed());
        let n = Nested::equivalent_datatype();
        assert_eq!((n.size(), n.extent()), (32, 32));
        layout_matches::<Mixed>();
        layout_matches::<Nested>();
        let v = [Nested {
            m: Mixed {
                a: [1, 2, 3, 4],
                b: 0.5,
                c: -3,
                d: [7; 4],
            },
            x: [9, 10],
        }; 2];
        let mut out = [0u8; 64];
        n.pack(v[..].as_bytes(), 2, &mut out).unwrap();
        assert_eq!(&out[..], v[..].as_bytes());
    }
}
