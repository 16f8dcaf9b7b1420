//! rsmpi's `mpi::datatype`: which Rust types travel ([`Equivalence`]),
//! datatypes ([`DatatypeRef`], [`UserDatatype`],
//! [`UncommittedUserDatatype`]), buffers ([`Buffer`], [`BufferMut`] and
//! their parts [`Pointer`], [`Collection`], [`AsDatatype`]), views,
//! untyped buffers and partitions.
//!
//! The datatypes are hmpi-core's ([`hmpi_core::datatype::Datatype`]);
//! this module gives them rsmpi's types and traits. A buffer is a pointer,
//! a count and a datatype, as in rsmpi. hmpi-core's typed operations take
//! a buffer's bytes: a buffer whose datatype is one run of bytes from its
//! pointer (every predefined type, arrays and structs without padding) is
//! handed over as it lies ([`Dense`]); any other (a struct with padding,
//! a strided [`View`], a struct type listing its fields out of order) is
//! packed into a contiguous copy before a blocking operation and unpacked
//! after it ([`SendBuf`], [`RecvBuf`]). Nonblocking operations take the
//! first kind only: a buffer that needs packing aborts with a message.

use std::any::TypeId;
use std::collections::HashMap;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

use hmpi_core::datatype::{BasicType, Datatype as CoreType, UserDatatype as CoreUserType};

use crate::{check, fatal, Address, Count};

pub use crate::collective::{Partition, PartitionMut};

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{
        AsDatatype, Buffer, BufferMut, Collection, Datatype, Equivalence, Pointer, PointerMut,
        UncommittedDatatype,
    };
}

// ------------------------------------------------------------ datatypes

/// Something that describes a datatype, committed or not (rsmpi's
/// `UncommittedDatatype`).
pub trait UncommittedDatatype {
    /// hmpi-core's datatype (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_datatype(&self) -> &CoreType;

    /// `MPI_Type_dup`.
    fn dup(&self) -> UserDatatype {
        UserDatatype(CoreUserType::dup(self.core_datatype()).into())
    }
}

/// A committed datatype, which operations take (rsmpi's `Datatype`).
pub trait Datatype: UncommittedDatatype {}

impl<D: UncommittedDatatype + ?Sized> UncommittedDatatype for &D {
    fn core_datatype(&self) -> &CoreType {
        (**self).core_datatype()
    }
}

impl<D: Datatype + ?Sized> Datatype for &D {}

/// A datatype borrowed for `'a` (rsmpi's `DatatypeRef`): what
/// [`Equivalence::equivalent_datatype`] gives for the predefined types
/// (`'static`) and [`UserDatatype::as_ref`] for a user type.
#[derive(Copy, Clone, Debug)]
pub struct DatatypeRef<'a>(&'a CoreType);

/// A predefined datatype (rsmpi's `SystemDatatype`).
pub type SystemDatatype = DatatypeRef<'static>;

impl UncommittedDatatype for DatatypeRef<'_> {
    fn core_datatype(&self) -> &CoreType {
        self.0
    }
}

impl Datatype for DatatypeRef<'_> {}

impl<'a> From<&'a UserDatatype> for DatatypeRef<'a> {
    fn from(t: &'a UserDatatype) -> Self {
        DatatypeRef(&t.0)
    }
}

/// A datatype not committed yet, borrowed (rsmpi's
/// `UncommittedDatatypeRef`): a building block of other datatypes.
#[derive(Copy, Clone, Debug)]
pub struct UncommittedDatatypeRef<'a>(&'a CoreType);

impl UncommittedDatatype for UncommittedDatatypeRef<'_> {
    fn core_datatype(&self) -> &CoreType {
        self.0
    }
}

impl<'a> From<DatatypeRef<'a>> for UncommittedDatatypeRef<'a> {
    fn from(t: DatatypeRef<'a>) -> Self {
        UncommittedDatatypeRef(t.0)
    }
}

impl<'a> From<&'a UserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(t: &'a UserDatatype) -> Self {
        UncommittedDatatypeRef(&t.0)
    }
}

impl<'a> From<&'a UncommittedUserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(t: &'a UncommittedUserDatatype) -> Self {
        UncommittedDatatypeRef(&t.0)
    }
}

/// A count or length that must not be negative.
pub(crate) fn len(n: Count, what: &str) -> usize {
    usize::try_from(n).unwrap_or_else(|_| {
        fatal(&hmpi_core::Error::Arg {
            reason: format!("{what} must not be negative, not {n}"),
        })
    })
}

fn lens(v: &[Count], what: &str) -> Vec<usize> {
    v.iter().map(|&n| len(n, what)).collect()
}

fn displs(v: &[Count]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

/// The derived type constructors, shared by [`UserDatatype`] and
/// [`UncommittedUserDatatype`] (hmpi-core's types need no commit).
macro_rules! constructors {
    ($t:ident) => {
        impl $t {
            /// `MPI_Type_contiguous`.
            pub fn contiguous<D: UncommittedDatatype + ?Sized>(count: Count, oldtype: &D) -> Self {
                $t(check(CoreUserType::contiguous(
                    len(count, "count"),
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_vector` (stride in elements).
            pub fn vector<D: UncommittedDatatype + ?Sized>(
                count: Count,
                blocklength: Count,
                stride: Count,
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::vector(
                    len(count, "count"),
                    len(blocklength, "blocklength"),
                    stride as isize,
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_create_hvector` (stride in bytes).
            pub fn heterogeneous_vector<D: UncommittedDatatype + ?Sized>(
                count: Count,
                blocklength: Count,
                stride: Address,
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::heterogeneous_vector(
                    len(count, "count"),
                    len(blocklength, "blocklength"),
                    stride,
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_indexed` (displacements in elements).
            pub fn indexed<D: UncommittedDatatype + ?Sized>(
                blocklengths: &[Count],
                displacements: &[Count],
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::indexed(
                    &lens(blocklengths, "a blocklength"),
                    &displs(displacements),
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_create_hindexed` (displacements in bytes).
            pub fn heterogeneous_indexed<D: UncommittedDatatype + ?Sized>(
                blocklengths: &[Count],
                displacements: &[Address],
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::heterogeneous_indexed(
                    &lens(blocklengths, "a blocklength"),
                    displacements,
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_create_indexed_block` (displacements in elements).
            pub fn indexed_block<D: UncommittedDatatype + ?Sized>(
                blocklength: Count,
                displacements: &[Count],
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::indexed_block(
                    len(blocklength, "blocklength"),
                    &displs(displacements),
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_create_hindexed_block` (displacements in bytes).
            pub fn heterogeneous_indexed_block<D: UncommittedDatatype + ?Sized>(
                blocklength: Count,
                displacements: &[Address],
                oldtype: &D,
            ) -> Self {
                $t(check(CoreUserType::heterogeneous_indexed_block(
                    len(blocklength, "blocklength"),
                    displacements,
                    oldtype.core_datatype(),
                ))
                .into())
            }

            /// `MPI_Type_create_struct`.
            pub fn structured<D: UncommittedDatatype>(
                blocklengths: &[Count],
                displacements: &[Address],
                types: &[D],
            ) -> Self {
                let types: Vec<&CoreType> = types.iter().map(|t| t.core_datatype()).collect();
                $t(check(CoreUserType::structured(
                    &lens(blocklengths, "a blocklength"),
                    displacements,
                    &types,
                ))
                .into())
            }
        }

        impl UncommittedDatatype for $t {
            fn core_datatype(&self) -> &CoreType {
                &self.0
            }
        }
    };
}

/// A derived datatype (rsmpi's `UserDatatype`).
#[derive(Clone, Debug)]
pub struct UserDatatype(CoreType);

constructors!(UserDatatype);

impl UserDatatype {
    /// The datatype, borrowed.
    pub fn as_ref(&self) -> DatatypeRef<'_> {
        DatatypeRef(&self.0)
    }
}

impl Datatype for UserDatatype {}

/// A derived datatype not committed yet, a building block of others
/// (rsmpi's `UncommittedUserDatatype`). hmpi's datatypes need no commit:
/// [`UncommittedUserDatatype::commit`] only changes the Rust type.
#[derive(Clone, Debug)]
pub struct UncommittedUserDatatype(CoreType);

constructors!(UncommittedUserDatatype);

impl UncommittedUserDatatype {
    /// `MPI_Type_commit`: the datatype, usable in operations.
    pub fn commit(self) -> UserDatatype {
        UserDatatype(self.0)
    }

    /// The datatype, borrowed.
    pub fn as_ref(&self) -> UncommittedDatatypeRef<'_> {
        UncommittedDatatypeRef(&self.0)
    }
}

// ---------------------------------------------------------- equivalence

/// A Rust type with an MPI datatype that describes its memory (rsmpi's
/// `Equivalence`): the predefined numbers, `bool`, the complex numbers of
/// `num-complex` (feature `complex`), and what `#[derive(Equivalence)]` or
/// a hand-written `impl` makes.
///
/// # Safety
/// The datatype must describe bytes of the value only (its type map
/// inside `size_of::<Self>()` bytes from the value's address), and every
/// pattern of those bytes that the datatype may receive must leave a valid
/// value: the data of another process's value of the same type. (As in
/// rsmpi, a message of other bytes into a `bool` is undefined behaviour.)
pub unsafe trait Equivalence {
    /// The type of the datatype ([`DatatypeRef`] or [`UserDatatype`]).
    type Out: Datatype;
    /// The datatype of one value.
    fn equivalent_datatype() -> Self::Out;
    /// Whether the datatype is known, without looking at it, to be one run
    /// of `size_of::<Self>()` bytes from the value's address: set by this
    /// crate for the predefined types, so that their buffers skip the
    /// layout check (not part of rsmpi's API).
    #[doc(hidden)]
    const IS_PLAIN: bool = false;
}

macro_rules! equivalent_system_datatype {
    ($($t:ty => $b:ident),* $(,)?) => {
        $(
            // SAFETY: the basic type has the Rust type's size and layout
            // (hmpi-core checks its table against the Rust types), and a
            // value of it received from another process is valid.
            unsafe impl Equivalence for $t {
                type Out = SystemDatatype;
                const IS_PLAIN: bool = true;
                fn equivalent_datatype() -> SystemDatatype {
                    static T: OnceLock<CoreType> = OnceLock::new();
                    DatatypeRef(T.get_or_init(|| CoreType::basic(BasicType::$b)))
                }
            }
        )*
    };
}

equivalent_system_datatype!(
    bool => Bool,
    f32 => F32, f64 => F64,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
);

#[cfg(target_pointer_width = "64")]
equivalent_system_datatype!(usize => U64, isize => I64);
#[cfg(target_pointer_width = "32")]
equivalent_system_datatype!(usize => U32, isize => I32);

#[cfg(feature = "complex")]
equivalent_system_datatype!(
    num_complex::Complex32 => ComplexF32,
    num_complex::Complex64 => ComplexF64,
);

// ----------------------------------------------------------- buffers

/// The address of a buffer's data (rsmpi's `Pointer`).
///
/// # Safety
/// The pointer must lead to the data its [`Collection::count`] elements of
/// its [`AsDatatype`] describe, readable while the buffer is borrowed.
pub unsafe trait Pointer {
    /// The address.
    fn pointer(&self) -> *const c_void;
}

/// The address of a buffer's data, for writing (rsmpi's `PointerMut`).
///
/// # Safety
/// As [`Pointer`], writable while the buffer is borrowed exclusively.
pub unsafe trait PointerMut {
    /// The address.
    fn pointer_mut(&mut self) -> *mut c_void;
}

/// A number of elements (rsmpi's `Collection`).
///
/// # Safety
/// The count must not exceed the elements of the buffer's memory.
pub unsafe trait Collection {
    /// How many elements.
    fn count(&self) -> Count;
}

/// The datatype of a buffer's elements (rsmpi's `AsDatatype`).
///
/// # Safety
/// The datatype must describe the buffer's memory ([`Equivalence`]).
pub unsafe trait AsDatatype {
    /// The type of the datatype.
    type Out: Datatype;
    /// The datatype of one element.
    fn as_datatype(&self) -> Self::Out;
    /// The bytes of the buffer's data when they are known, without looking
    /// at the datatype, to be one run from its pointer (buffers of the
    /// predefined types); `None` otherwise (not part of rsmpi's API).
    #[doc(hidden)]
    fn plain_len(&self) -> Option<usize> {
        None
    }
}

/// Something to send from: a pointer, a count and a datatype (rsmpi's
/// `Buffer`).
///
/// # Safety
/// The three describe readable memory of the value.
pub unsafe trait Buffer: Pointer + Collection + AsDatatype {}

/// Something to receive into (rsmpi's `BufferMut`).
///
/// # Safety
/// The three describe writable memory of the value, and any data of the
/// datatype leave valid values.
pub unsafe trait BufferMut: PointerMut + Collection + AsDatatype {}

/// A slice length as a count (rsmpi's `Count`); a longer slice aborts.
fn count_of(n: usize) -> Count {
    Count::try_from(n).unwrap_or_else(|_| {
        fatal(&hmpi_core::Error::Arg {
            reason: format!("a buffer of {n} elements is longer than an MPI count"),
        })
    })
}

// SAFETY: one value at its own address.
unsafe impl<T: Equivalence> Pointer for T {
    fn pointer(&self) -> *const c_void {
        (self as *const T).cast()
    }
}
// SAFETY: one value at its own address, borrowed exclusively.
unsafe impl<T: Equivalence> PointerMut for T {
    fn pointer_mut(&mut self) -> *mut c_void {
        (self as *mut T).cast()
    }
}
// SAFETY: one value.
unsafe impl<T: Equivalence> Collection for T {
    fn count(&self) -> Count {
        1
    }
}
// SAFETY: `T`'s datatype describes a `T` (`Equivalence`).
unsafe impl<T: Equivalence> AsDatatype for T {
    type Out = T::Out;
    fn as_datatype(&self) -> T::Out {
        T::equivalent_datatype()
    }
    fn plain_len(&self) -> Option<usize> {
        T::IS_PLAIN.then_some(std::mem::size_of::<T>())
    }
}
// SAFETY: as the parts above.
unsafe impl<T: Equivalence> Buffer for T {}
// SAFETY: as the parts above.
unsafe impl<T: Equivalence> BufferMut for T {}

macro_rules! sequence_buffer {
    ($([$($g:tt)*] $t:ty),* $(,)?) => {
        $(
            // SAFETY: the elements lie at the slice's pointer, one
            // `size_of::<T>()` apart (arrays have no gaps between elements).
            unsafe impl<$($g)*> Pointer for $t {
                fn pointer(&self) -> *const c_void {
                    self.as_ptr().cast()
                }
            }
            // SAFETY: as above, borrowed exclusively.
            unsafe impl<$($g)*> PointerMut for $t {
                fn pointer_mut(&mut self) -> *mut c_void {
                    self.as_mut_ptr().cast()
                }
            }
            // SAFETY: the number of elements.
            unsafe impl<$($g)*> Collection for $t {
                fn count(&self) -> Count {
                    count_of(self.len())
                }
            }
            // SAFETY: `T`'s datatype describes each element; arrays of
            // elements are `T`-extent apart when the datatype's extent is
            // `T`'s size, which a type that describes `T` has.
            unsafe impl<$($g)*> AsDatatype for $t {
                type Out = T::Out;
                fn as_datatype(&self) -> T::Out {
                    T::equivalent_datatype()
                }
                fn plain_len(&self) -> Option<usize> {
                    T::IS_PLAIN.then(|| std::mem::size_of_val(&self[..]))
                }
            }
            // SAFETY: as the parts above.
            unsafe impl<$($g)*> Buffer for $t {}
            // SAFETY: as the parts above.
            unsafe impl<$($g)*> BufferMut for $t {}
        )*
    };
}

sequence_buffer!(
    [T: Equivalence] [T],
    [T: Equivalence] Vec<T>,
    [T: Equivalence, const D: usize] [T; D],
);

// ------------------------------------------------- buffers for hmpi-core

/// Bytes of `count` elements of `dt` from the element 0 at `ptr`, when they
/// are one run starting there: `Some(bytes)`; `None` if the data must be
/// packed.
fn dense_len(dt: &CoreType, count: Count) -> Option<usize> {
    let n = len(count, "count");
    (dt.dense_offset() == Some(0)).then(|| n.saturating_mul(dt.size()))
}

/// The bytes of `b`'s data if they are one run from its pointer.
fn run_len<B: ?Sized + AsDatatype + Collection>(b: &B) -> Option<usize> {
    b.plain_len()
        .or_else(|| dense_len(b.as_datatype().core_datatype(), b.count()))
}

/// A buffer whose datatype is one run of bytes from its pointer, as
/// hmpi-core's typed operations take it (the same memory, seen through
/// hmpi-core's buffer traits).
#[repr(transparent)]
pub(crate) struct Dense<B: ?Sized>(B);

/// The message for a nonblocking operation on a buffer that needs packing.
fn not_dense() -> ! {
    fatal(&hmpi_core::Error::Type {
        reason: "hmpi-mpi packs a buffer whose datatype has gaps or reorders its data \
                 (a padded struct, a strided view) for blocking operations only; \
                 give a nonblocking one a buffer whose datatype is one run of bytes"
            .into(),
    })
}

impl<B: ?Sized + Buffer> Dense<B> {
    /// `b` as hmpi-core's buffer; aborts if its datatype is not one run of
    /// bytes from its pointer.
    pub(crate) fn of(b: &B) -> &Dense<B> {
        if run_len(b).is_none() {
            not_dense()
        }
        // SAFETY: `Dense` is a transparent wrapper of `B`.
        unsafe { &*(b as *const B as *const Dense<B>) }
    }
}

impl<B: ?Sized + BufferMut> Dense<B> {
    /// `b` as hmpi-core's buffer for writing; aborts if its datatype is not
    /// one run of bytes from its pointer.
    pub(crate) fn of_mut(b: &mut B) -> &mut Dense<B> {
        if run_len(b).is_none() {
            not_dense()
        }
        // SAFETY: `Dense` is a transparent wrapper of `B`; the exclusive
        // borrow is carried over.
        unsafe { &mut *(b as *mut B as *mut Dense<B>) }
    }
}

impl<B: ?Sized + Buffer> hmpi_core::datatype::Buffer for Dense<B> {
    fn as_bytes(&self) -> &[u8] {
        let n = run_len(&self.0).unwrap_or(0);
        if n == 0 {
            return &[];
        }
        // SAFETY: the datatype is one run of `n` bytes of data from the
        // buffer's pointer (checked when the `Dense` was made, and the
        // buffer is borrowed since), readable (`Buffer`) and initialised
        // (data of the type, no gaps).
        unsafe { std::slice::from_raw_parts(self.0.pointer().cast::<u8>(), n) }
    }
    fn element_size(&self) -> usize {
        self.0.as_datatype().core_datatype().size()
    }
    fn element_datatype(&self) -> CoreType {
        self.0.as_datatype().core_datatype().clone()
    }
    fn element_datatype_ref(&self) -> std::borrow::Cow<'static, CoreType> {
        self.0.as_datatype().core_datatype().to_static()
    }
}

impl<B: ?Sized + BufferMut> hmpi_core::datatype::BufferMut for Dense<B> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        let n = run_len(&self.0).unwrap_or(0);
        if n == 0 {
            return &mut [];
        }
        // SAFETY: as in `as_bytes`, writable and borrowed exclusively
        // (`BufferMut`); any data of the type leave valid values.
        unsafe { std::slice::from_raw_parts_mut(self.0.pointer_mut().cast::<u8>(), n) }
    }
    fn element_size(&self) -> usize {
        self.0.as_datatype().core_datatype().size()
    }
    fn element_datatype(&self) -> CoreType {
        self.0.as_datatype().core_datatype().clone()
    }
    fn element_datatype_ref(&self) -> std::borrow::Cow<'static, CoreType> {
        self.0.as_datatype().core_datatype().to_static()
    }
}

/// Packs `count` elements of `dt` at `ptr`.
///
/// # Safety
/// `ptr` leads to `count` readable elements of `dt`.
unsafe fn pack_at(ptr: *const c_void, count: Count, dt: &CoreType) -> Vec<u8> {
    let n = len(count, "count");
    let mut out = vec![0u8; check(dt.packed_size(n))];
    // SAFETY: the caller's guarantee.
    check(unsafe { dt.pack_raw(ptr.cast(), n, &mut out) });
    out
}

/// The bytes of `b`'s data packed (`MPI_Pack_size` of its elements).
pub(crate) fn packed_len<B: ?Sized + Buffer>(b: &B) -> usize {
    check(
        b.as_datatype()
            .core_datatype()
            .packed_size(len(b.count(), "count")),
    )
}

/// Packs `b`'s data into the start of `out` (`MPI_Pack`); the bytes
/// written.
pub(crate) fn pack_buf<B: ?Sized + Buffer>(b: &B, out: &mut [u8]) -> usize {
    let dt = b.as_datatype();
    // SAFETY: `Buffer`: the pointer leads to `count` readable elements.
    check(unsafe {
        dt.core_datatype()
            .pack_raw(b.pointer().cast(), len(b.count(), "count"), out)
    })
}

/// Unpacks `data` into `b`'s elements (`MPI_Unpack`; as far as the data
/// go); the bytes read.
pub(crate) fn unpack_buf<B: ?Sized + BufferMut>(data: &[u8], b: &mut B) -> usize {
    let count = len(b.count(), "count");
    let dt = b.as_datatype();
    let ptr = b.pointer_mut();
    // SAFETY: `BufferMut`: the pointer leads to `count` writable elements,
    // borrowed exclusively.
    check(unsafe { dt.core_datatype().unpack_raw(data, ptr.cast(), count) })
}

/// A send buffer as hmpi-core's blocking operations take it: the buffer
/// itself, or a packed copy of its data (sent as bytes).
pub(crate) enum SendBuf<'a, B: ?Sized> {
    Dense(&'a Dense<B>),
    Packed(Vec<u8>),
}

/// `b` for a blocking send.
pub(crate) fn send_buf<B: ?Sized + Buffer>(b: &B) -> SendBuf<'_, B> {
    if run_len(b).is_some() {
        return SendBuf::Dense(Dense::of(b));
    }
    let dt = b.as_datatype();
    // SAFETY: `Buffer`: the pointer leads to `count` readable elements.
    SendBuf::Packed(unsafe { pack_at(b.pointer(), b.count(), dt.core_datatype()) })
}

impl<B: ?Sized + Buffer> hmpi_core::datatype::Buffer for SendBuf<'_, B> {
    fn as_bytes(&self) -> &[u8] {
        match self {
            SendBuf::Dense(d) => d.as_bytes(),
            SendBuf::Packed(v) => v,
        }
    }
    fn element_size(&self) -> usize {
        match self {
            SendBuf::Dense(d) => d.element_size(),
            SendBuf::Packed(_) => 1,
        }
    }
    fn element_datatype(&self) -> CoreType {
        match self {
            SendBuf::Dense(d) => d.element_datatype(),
            SendBuf::Packed(_) => u8::equivalent_datatype().0.clone(),
        }
    }
    fn element_datatype_ref(&self) -> std::borrow::Cow<'static, CoreType> {
        match self {
            SendBuf::Dense(d) => d.element_datatype_ref(),
            SendBuf::Packed(_) => u8::equivalent_datatype().0.to_static(),
        }
    }
}

/// A receive buffer as hmpi-core's blocking operations take it: the
/// buffer itself, or a staging area for its packed data, unpacked into it
/// by [`RecvBuf::finish`].
pub(crate) enum RecvBuf<'a, B: ?Sized> {
    Dense(&'a mut Dense<B>),
    Staged(&'a mut B, Vec<u8>),
}

/// `b` for a blocking receive.
pub(crate) fn recv_buf<B: ?Sized + BufferMut>(b: &mut B) -> RecvBuf<'_, B> {
    let n = match run_len(b) {
        Some(_) => None,
        None => Some(check(
            b.as_datatype()
                .core_datatype()
                .packed_size(len(b.count(), "count")),
        )),
    };
    match n {
        None => RecvBuf::Dense(Dense::of_mut(b)),
        Some(n) => RecvBuf::Staged(b, vec![0u8; n]),
    }
}

/// `b` for a blocking operation that sends its data and receives into it
/// (a broadcast): as [`recv_buf`], the staging area holding the packed
/// data.
pub(crate) fn inout_buf<B: ?Sized + BufferMut>(b: &mut B) -> RecvBuf<'_, B> {
    let mut r = recv_buf(b);
    if let RecvBuf::Staged(b, v) = &mut r {
        let count = len(b.count(), "count");
        let dt = b.as_datatype();
        let ptr = b.pointer_mut();
        // SAFETY: `BufferMut`: the pointer leads to `count` elements of the
        // datatype, readable too.
        check(unsafe {
            dt.core_datatype()
                .pack_raw(ptr.cast_const().cast(), count, v)
        });
    }
    r
}

impl<B: ?Sized + BufferMut> RecvBuf<'_, B> {
    /// Unpacks the first `bytes` bytes received (all with `None`) into
    /// the buffer, if they were staged.
    pub(crate) fn finish(self, bytes: Option<usize>) {
        if let RecvBuf::Staged(b, v) = self {
            let data = &v[..bytes.unwrap_or(v.len()).min(v.len())];
            let count = len(b.count(), "count");
            let dt = b.as_datatype();
            let ptr = b.pointer_mut();
            // SAFETY: `BufferMut`: the pointer leads to `count` writable
            // elements of the datatype, borrowed exclusively.
            check(unsafe { dt.core_datatype().unpack_raw(data, ptr.cast(), count) });
        }
    }
}

impl<B: ?Sized + BufferMut> hmpi_core::datatype::BufferMut for RecvBuf<'_, B> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            RecvBuf::Dense(d) => d.as_bytes_mut(),
            RecvBuf::Staged(_, v) => v,
        }
    }
    fn element_size(&self) -> usize {
        match self {
            RecvBuf::Dense(d) => d.element_size(),
            RecvBuf::Staged(..) => 1,
        }
    }
    fn element_datatype(&self) -> CoreType {
        match self {
            RecvBuf::Dense(d) => d.element_datatype(),
            RecvBuf::Staged(..) => u8::equivalent_datatype().0.clone(),
        }
    }
    fn element_datatype_ref(&self) -> std::borrow::Cow<'static, CoreType> {
        match self {
            RecvBuf::Dense(d) => d.element_datatype_ref(),
            RecvBuf::Staged(..) => u8::equivalent_datatype().0.to_static(),
        }
    }
}

/// A received message of `bytes` bytes as exactly one `T` (as rsmpi's
/// `receive`): the packed data unpacked into a value; a message of
/// another size aborts.
pub(crate) fn value_from<T: Equivalence>(data: &[u8]) -> T {
    let dt = T::equivalent_datatype();
    let dt = dt.core_datatype();
    let want = check(dt.packed_size(1));
    if data.len() != want {
        fatal(&hmpi_core::Error::Count {
            bytes: data.len() as u64,
            element_size: want,
            expected: Some(want as u64),
        });
    }
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: the datatype describes bytes of a `T` (`Equivalence`),
    // inside `v`'s memory, which is writable.
    check(unsafe { dt.unpack_raw(data, v.as_mut_ptr().cast(), 1) });
    // SAFETY: the data of a `T` sent by another process were written over
    // zeroed memory (`Equivalence`: they make a valid value).
    unsafe { v.assume_init() }
}

/// Received data as `T`s (the elements the bytes fill; a partial last
/// element aborts).
pub(crate) fn vec_from<T: Equivalence>(data: &[u8]) -> Vec<T> {
    let dt = T::equivalent_datatype();
    let dt = dt.core_datatype();
    let size = dt.size();
    let n = data.len().checked_div(size).unwrap_or(0);
    if size != 0 && data.len() % size != 0 {
        fatal(&hmpi_core::Error::Count {
            bytes: data.len() as u64,
            element_size: size,
            expected: None,
        });
    }
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the capacity holds `n` values of `T`; zeroing it first makes
    // every byte the unpack leaves alone initialised.
    unsafe { std::ptr::write_bytes(v.as_mut_ptr(), 0, n) };
    // SAFETY: `n` elements of the datatype, each inside its `T`, in the
    // vector's writable capacity.
    check(unsafe { dt.unpack_raw(data, v.as_mut_ptr().cast(), n) });
    // SAFETY: the `n` values are initialised with another process's data
    // of `T`s (valid, `Equivalence`).
    unsafe { v.set_len(n) };
    v
}

/// The bytes of `count` elements of `T`'s datatype, packed (what a message
/// of them carries).
pub(crate) fn packed_size_of<T: Equivalence>(count: usize) -> usize {
    check(T::equivalent_datatype().core_datatype().packed_size(count))
}

// ------------------------------------------------------------ views

/// A buffer seen as `count` elements of a datatype (rsmpi's `View`).
pub struct View<'d, 'b, D, B: ?Sized> {
    datatype: &'d D,
    count: Count,
    buffer: &'b B,
}

impl<'d, 'b, D: Datatype, B: ?Sized + Pointer> View<'d, 'b, D, B> {
    /// `count` elements of `datatype` at the start of `buffer`.
    ///
    /// # Safety
    /// As in rsmpi: the datatype's `count` elements must lie inside
    /// `buffer` and be data of `B`'s elements.
    pub unsafe fn with_count_and_datatype(buffer: &'b B, count: Count, datatype: &'d D) -> Self {
        let _ = len(count, "count");
        View {
            datatype,
            count,
            buffer,
        }
    }
}

// SAFETY: the caller of `with_count_and_datatype` promised that the
// datatype's elements lie in the buffer.
unsafe impl<D: Datatype, B: ?Sized + Pointer> Pointer for View<'_, '_, D, B> {
    fn pointer(&self) -> *const c_void {
        self.buffer.pointer()
    }
}
// SAFETY: the count given.
unsafe impl<D: Datatype, B: ?Sized> Collection for View<'_, '_, D, B> {
    fn count(&self) -> Count {
        self.count
    }
}
// SAFETY: the datatype given, promised to describe the buffer.
unsafe impl<'d, D: Datatype, B: ?Sized> AsDatatype for View<'d, '_, D, B> {
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}
// SAFETY: as the parts above.
unsafe impl<D: Datatype, B: ?Sized + Pointer> Buffer for View<'_, '_, D, B> {}

/// A buffer seen as `count` elements of a datatype, for receiving (rsmpi's
/// `MutView`).
pub struct MutView<'d, 'b, D, B: ?Sized> {
    datatype: &'d D,
    count: Count,
    buffer: &'b mut B,
}

impl<'d, 'b, D: Datatype, B: ?Sized + PointerMut> MutView<'d, 'b, D, B> {
    /// `count` elements of `datatype` at the start of `buffer`.
    ///
    /// # Safety
    /// As [`View::with_count_and_datatype`]; any data of the datatype
    /// written there must leave valid values of `B`.
    pub unsafe fn with_count_and_datatype(
        buffer: &'b mut B,
        count: Count,
        datatype: &'d D,
    ) -> Self {
        let _ = len(count, "count");
        MutView {
            datatype,
            count,
            buffer,
        }
    }
}

// SAFETY: as for `View`, borrowed exclusively.
unsafe impl<D: Datatype, B: ?Sized + PointerMut> PointerMut for MutView<'_, '_, D, B> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.buffer.pointer_mut()
    }
}
// SAFETY: the count given.
unsafe impl<D: Datatype, B: ?Sized> Collection for MutView<'_, '_, D, B> {
    fn count(&self) -> Count {
        self.count
    }
}
// SAFETY: the datatype given, promised to describe the buffer.
unsafe impl<'d, D: Datatype, B: ?Sized> AsDatatype for MutView<'d, '_, D, B> {
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}
// SAFETY: as the parts above.
unsafe impl<D: Datatype, B: ?Sized + PointerMut> BufferMut for MutView<'_, '_, D, B> {}

// ---------------------------------------------------- untyped buffers

/// Whether data of `datatype` may be seen as `T`s: the same basic type,
/// or (for a derived type) the same size and extent as `T`'s datatype.
fn is_of<T: Equivalence>(datatype: &CoreType) -> bool {
    let t = T::equivalent_datatype();
    let t = t.core_datatype();
    match (t.basic_type(), datatype.basic_type()) {
        (Some(a), Some(b)) => a == b && t.size() == datatype.size(),
        _ => t.size() == datatype.size() && t.extent() == datatype.extent(),
    }
}

/// Whether `len` elements of `T` at `ptr` are aligned and non-empty.
fn aligned<T>(ptr: *const c_void) -> bool {
    std::mem::size_of::<T>() != 0 && (ptr as usize) % std::mem::align_of::<T>() == 0
}

/// Elements of some datatype at a pointer (rsmpi's `DynBuffer`): a user
/// operation's input, or a buffer made with [`DynBuffer::from_raw`].
#[derive(Copy, Clone, Debug)]
pub struct DynBuffer<'a> {
    ptr: *const c_void,
    len: Count,
    datatype: DatatypeRef<'a>,
    _data: PhantomData<&'a [u8]>,
}

// SAFETY: it is a shared borrow of data (and of a datatype, `Sync`).
unsafe impl Send for DynBuffer<'_> {}
// SAFETY: as above.
unsafe impl Sync for DynBuffer<'_> {}

impl<'a> DynBuffer<'a> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence + 'static>(buf: &'a [T]) -> Self {
        // The datatype of `T` for the life of the process (one per type).
        let datatype = DatatypeRef(stored::<T>(of::<T>));
        DynBuffer {
            ptr: buf.as_ptr().cast(),
            len: count_of(buf.len()),
            datatype,
            _data: PhantomData,
        }
    }

    /// `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` leads to `len` readable elements of `datatype`, valid for `'a`.
    pub unsafe fn from_raw<T>(ptr: *const T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        let _ = self::len(len, "len");
        DynBuffer {
            ptr: ptr.cast(),
            len,
            datatype,
            _data: PhantomData,
        }
    }

    /// Whether the elements are `T`s.
    pub fn is<T: Equivalence>(&self) -> bool {
        is_of::<T>(self.datatype.0)
    }

    /// The elements as `T`s, `None` if they are not (or not aligned for
    /// `T`).
    pub fn downcast<T: Equivalence>(self) -> Option<&'a [T]> {
        if !self.is::<T>() || !(aligned::<T>(self.ptr) || self.len == 0) {
            return None;
        }
        if self.len == 0 {
            return Some(&[]);
        }
        // SAFETY: `len` elements of `T`'s datatype (checked above) at an
        // aligned pointer, readable for `'a` (`from_raw`'s or the
        // operation's promise); each is a `T`'s data.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.cast::<T>(), self.len as usize) })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the elements.
    pub fn as_ptr(&self) -> *const c_void {
        self.ptr
    }
}

// SAFETY: `from_raw`'s / `new`'s promise.
unsafe impl Pointer for DynBuffer<'_> {
    fn pointer(&self) -> *const c_void {
        self.ptr
    }
}
// SAFETY: as above.
unsafe impl Collection for DynBuffer<'_> {
    fn count(&self) -> Count {
        self.len
    }
}
// SAFETY: as above.
unsafe impl<'a> AsDatatype for DynBuffer<'a> {
    type Out = DatatypeRef<'a>;
    fn as_datatype(&self) -> DatatypeRef<'a> {
        self.datatype
    }
}
// SAFETY: as the parts above.
unsafe impl Buffer for DynBuffer<'_> {}

/// Elements of some datatype at a pointer, for writing (rsmpi's
/// `DynBufferMut`).
#[derive(Debug)]
pub struct DynBufferMut<'a> {
    ptr: *mut c_void,
    len: Count,
    datatype: DatatypeRef<'a>,
    _data: PhantomData<&'a mut [u8]>,
}

// SAFETY: it is an exclusive borrow of data (and a shared one of a
// datatype, `Sync`).
unsafe impl Send for DynBufferMut<'_> {}
// SAFETY: as above.
unsafe impl Sync for DynBufferMut<'_> {}

impl<'a> DynBufferMut<'a> {
    /// The elements of `buf`.
    pub fn new<T: Equivalence + 'static>(buf: &'a mut [T]) -> Self {
        let datatype = DatatypeRef(stored::<T>(of::<T>));
        DynBufferMut {
            ptr: buf.as_mut_ptr().cast(),
            len: count_of(buf.len()),
            datatype,
            _data: PhantomData,
        }
    }

    /// `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` leads to `len` writable elements of `datatype`, valid and
    /// not reached otherwise for `'a`.
    pub unsafe fn from_raw<T>(ptr: *mut T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        let _ = self::len(len, "len");
        DynBufferMut {
            ptr: ptr.cast(),
            len,
            datatype,
            _data: PhantomData,
        }
    }

    /// Whether the elements are `T`s.
    pub fn is<T: Equivalence>(&self) -> bool {
        is_of::<T>(self.datatype.0)
    }

    /// The elements as `T`s, `None` if they are not (or not aligned).
    pub fn downcast<T: Equivalence>(self) -> Option<&'a mut [T]> {
        if !self.is::<T>() || !(aligned::<T>(self.ptr) || self.len == 0) {
            return None;
        }
        if self.len == 0 {
            return Some(&mut []);
        }
        // SAFETY: as in `DynBuffer::downcast`, and the exclusive borrow of
        // the elements is carried over.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<T>(), self.len as usize) })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the elements.
    pub fn as_ptr(&self) -> *const c_void {
        self.ptr
    }

    /// The address of the elements, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.ptr
    }

    /// The same elements, for reading.
    pub fn reborrow(&self) -> DynBuffer<'_> {
        DynBuffer {
            ptr: self.ptr,
            len: self.len,
            datatype: self.datatype,
            _data: PhantomData,
        }
    }
}

// SAFETY: `from_raw`'s / `new`'s promise.
unsafe impl PointerMut for DynBufferMut<'_> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr
    }
}
// SAFETY: as above.
unsafe impl Collection for DynBufferMut<'_> {
    fn count(&self) -> Count {
        self.len
    }
}
// SAFETY: as above.
unsafe impl<'a> AsDatatype for DynBufferMut<'a> {
    type Out = DatatypeRef<'a>;
    fn as_datatype(&self) -> DatatypeRef<'a> {
        self.datatype
    }
}
// SAFETY: as the parts above.
unsafe impl BufferMut for DynBufferMut<'_> {}

/// A user operation's arguments: `len` bytes of data of `datatype` as
/// [`DynBuffer`] / [`DynBufferMut`] (whole elements).
pub(crate) fn dyn_pair<'a>(
    input: &'a [u8],
    inout: &'a mut [u8],
    datatype: &'a CoreType,
) -> (DynBuffer<'a>, DynBufferMut<'a>) {
    let size = datatype.size().max(1);
    (
        DynBuffer {
            ptr: input.as_ptr().cast(),
            len: count_of(input.len() / size),
            datatype: DatatypeRef(datatype),
            _data: PhantomData,
        },
        DynBufferMut {
            ptr: inout.as_mut_ptr().cast(),
            len: count_of(inout.len() / size),
            datatype: DatatypeRef(datatype),
            _data: PhantomData,
        },
    )
}

// ------------------------------------------------------ derived types

/// The datatypes `#[derive(Equivalence)]` made, one per type, kept for
/// the life of the process (as rsmpi's derive keeps its `DatatypeRef`).
static STORED: OnceLock<Mutex<HashMap<TypeId, &'static CoreType>>> = OnceLock::new();

/// The datatype kept for `T`, made by `make` the first time.
#[doc(hidden)]
pub fn stored<T: ?Sized + 'static>(make: impl FnOnce() -> CoreType) -> &'static CoreType {
    let map = STORED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&t) = map
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&TypeId::of::<T>())
    {
        return t;
    }
    // Made without the lock held: `make` builds the fields' datatypes,
    // which may be kept here too.
    let made = make();
    let kept: &'static CoreType = map
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(TypeId::of::<T>())
        .or_insert_with(|| Box::leak(Box::new(made)));
    kept
}

/// Whether a datatype was kept for `T` already.
fn is_stored<T: ?Sized + 'static>() -> bool {
    STORED.get().is_some_and(|m| {
        m.lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&TypeId::of::<T>())
    })
}

/// A struct datatype of `size` bytes: `types[i]` at `offsets[i]`.
#[doc(hidden)]
pub fn structure(size: usize, offsets: &[isize], types: &[CoreType]) -> CoreType {
    let lengths = vec![1usize; types.len()];
    let t = check(CoreUserType::structured(&lengths, offsets, types));
    check(CoreUserType::resized(&t.into(), 0, size as isize)).into()
}

/// `n` contiguous elements of `t` (an array field).
#[doc(hidden)]
pub fn array(n: usize, t: &CoreType) -> CoreType {
    check(CoreUserType::contiguous(n, t)).into()
}

/// The datatype of `T` (a field of a derived struct).
#[doc(hidden)]
pub fn of<T: Equivalence>() -> CoreType {
    T::equivalent_datatype().core_datatype().clone()
}

/// What `#[derive(Equivalence)]` gives: the datatype kept for `T`, made
/// by `make` the first time, which must be (as rsmpi checks) while MPI is
/// initialized and, unless the threading level is `Multiple`, on the
/// thread that initialized it: otherwise this panics with rsmpi's reason.
#[doc(hidden)]
pub fn derived<T: ?Sized + 'static>(
    type_name: &str,
    make: impl FnOnce() -> CoreType,
) -> DatatypeRef<'static> {
    if !is_stored::<T>() {
        crate::environment::check_derive_state(type_name);
    }
    DatatypeRef(stored::<T>(make))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_buffers_are_plain_and_views_pack() {
        let v = [1i32, 2, 3, 4, 5, 6];
        assert_eq!(run_len(&v[..]), Some(24));
        assert_eq!(run_len(&7u16), Some(2));
        assert!(matches!(send_buf(&v[..]), SendBuf::Dense(_)));

        // Every other element: packed into half the bytes, unpacked back
        // into the gaps' places only.
        let t = UserDatatype::vector(3, 1, 2, &i32::equivalent_datatype());
        // SAFETY: one vector element reaches i32s 0..5 of the 6 in `v`.
        let view = unsafe { View::with_count_and_datatype(&v[..], 1, &t) };
        assert_eq!(run_len(&view), None);
        let SendBuf::Packed(p) = send_buf(&view) else {
            panic!("a strided view is packed");
        };
        assert_eq!(p.len(), 12);
        let mut back = [0i32; 6];
        {
            // SAFETY: as above, in `back`.
            let mut mv = unsafe { MutView::with_count_and_datatype(&mut back[..], 1, &t) };
            assert_eq!(unpack_buf(&p, &mut mv), 12);
        }
        assert_eq!(back, [1, 0, 3, 0, 5, 0]);
    }

    #[test]
    fn values_come_from_packed_data_of_their_size() {
        let data = 5u64.to_ne_bytes();
        assert_eq!(value_from::<u64>(&data), 5);
        let two = [true, false];
        let mut out = vec![0u8; 2];
        assert_eq!(pack_buf(&two[..], &mut out), 2);
        assert_eq!(vec_from::<bool>(&out), vec![true, false]);
        assert_eq!(packed_size_of::<f64>(3), 24);
    }

    #[test]
    fn user_datatypes_need_no_commit() {
        let u = UncommittedUserDatatype::contiguous(4, &u8::equivalent_datatype());
        let s = UserDatatype::structured(
            &[1, 1],
            &[0, 4],
            &[
                u.as_ref(),
                UncommittedDatatypeRef::from(u32::equivalent_datatype()),
            ],
        );
        assert_eq!(s.as_ref().core_datatype().size(), 8);
        let c = u.commit();
        assert_eq!(c.dup().core_datatype().size(), 4);
    }
}
