//! Which Rust types travel as messages: [`Equivalence`] (plain old data) and
//! the buffer traits [`Buffer`] / [`BufferMut`] built on it.
//!
//! A message is the bytes of its values. A type may be sent and received
//! when its bytes say everything about it and any bytes make a valid value:
//! integers, floats, arrays of them, and user `#[repr(C)]` structs without
//! padding made of such fields. `bool` and `char` are not `Equivalence`
//! (not every byte pattern is a valid `bool` or `char`), nor are references,
//! pointers or tuples (tuples may have padding and have no fixed layout).
//!
//! # Example
//! ```
//! use hmpi_core::datatype::{Buffer, Equivalence};
//!
//! #[derive(Clone, Copy, Default)]
//! #[repr(C)]
//! struct Particle {
//!     pos: [f64; 3],
//!     id: u64,
//! }
//! // SAFETY: repr(C), no padding (4 × 8 bytes), every byte pattern is a
//! // valid value, no pointers.
//! unsafe impl Equivalence for Particle {}
//!
//! let ps = [Particle::default(); 4];
//! assert_eq!(ps[..].as_bytes().len(), 4 * 32);
//! assert_eq!(7u32.as_bytes(), &7u32.to_ne_bytes());
//! ```

use std::mem::size_of_val;

/// A plain-old-data type that can be sent as its bytes and received from
/// any bytes (rsmpi's `Equivalence`, without derived MPI datatypes).
///
/// # Safety
/// Implement it only for `Copy` types that
/// * have no padding bytes and no uninitialised bytes (so their bytes may
///   be read as `u8`);
/// * are valid for every byte pattern (so received bytes make a value);
/// * hold no pointers or references (another process's addresses mean
///   nothing, and lifetimes do not cross processes).
pub unsafe trait Equivalence: Copy + 'static {}

macro_rules! equivalence {
    ($($t:ty)*) => {
        $(
            // SAFETY: a primitive number type: no padding, every bit
            // pattern is a valid value, no pointers.
            unsafe impl Equivalence for $t {}
        )*
    };
}

equivalence!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64);

// SAFETY: an array of N elements without padding has no padding (arrays
// have none between elements), and is valid for every byte pattern when
// its elements are.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {}

/// Something whose bytes can be sent: one value, a slice or a `Vec` of
/// [`Equivalence`] values.
pub trait Buffer {
    /// The buffer's bytes.
    fn as_bytes(&self) -> &[u8];
    /// The size of one element in bytes.
    fn element_size(&self) -> usize;
}

/// Something whose bytes can be overwritten by a receive.
pub trait BufferMut {
    /// The buffer's bytes, for writing.
    fn as_bytes_mut(&mut self) -> &mut [u8];
    /// The size of one element in bytes.
    fn element_size(&self) -> usize;
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
}

impl<T: Equivalence> Buffer for [T] {
    fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

impl<T: Equivalence> Buffer for Vec<T> {
    fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

impl<T: Equivalence> BufferMut for T {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(std::slice::from_mut(self))
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

impl<T: Equivalence> BufferMut for [T] {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
    }
}

impl<T: Equivalence> BufferMut for Vec<T> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
    fn element_size(&self) -> usize {
        std::mem::size_of::<T>()
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
}
