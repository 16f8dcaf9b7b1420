//! Which values may change owner between ranks: the marker trait
//! [`Transferable`], its implementations for the standard types, and the
//! type fingerprint that travels with every given value.
//!
//! A value given to another rank of the node is used there as it is, so
//! everything it points to must be readable there at the same address, and
//! freeable there: every heap block it owns must lie in the node heap.
//! Transferable are
//!
//! * the primitives (integers, floats, `bool`, `char`, `()`), arrays,
//!   tuples up to twelve elements and `Option` of transferable types;
//! * `Box<T>`, `Vec<T>`, `Box<[T]>` and `String` of transferable types (their
//!   heap blocks are checked, and moved into the node heap if they are not
//!   there, see [`Transferable::make_shared`]);
//! * user structs and enums through `#[derive(Transferable)]`.
//!
//! Never transferable: references (the value would borrow memory of the
//! sender's), raw pointers and function pointers (they may point to private
//! memory or code, which is mapped at different addresses in each rank),
//! trait objects (their vtable is code), `Rc` (its count is not atomic),
//! and anything else that is not implemented here. The trait is `unsafe` to
//! implement by hand: an implementation promises the above.
//!
//! # Fingerprint
//! [`fingerprint::<T>()`](fingerprint) mixes `T`'s [`Transferable::TYPE_HASH`] (an
//! FNV-1a hash of its name, computed at compile time) with its size and
//! alignment. `take::<T>` compares it with the one the giver sent and
//! returns [`hmpi_core::Error::Type`] on a mismatch. It identifies types
//! within one program (the same binary in every rank), which is what the
//! launcher runs.
//!
//! # Example
//! ```
//! use opi::Transferable;
//!
//! #[derive(Transferable, Clone, Copy)]
//! #[transferable(crate = "opi")]
//! #[repr(C)]
//! struct Cell { pos: [f64; 3], id: u64 }
//!
//! #[derive(Transferable)]
//! #[transferable(crate = "opi")]
//! enum Shape { Dot, Path(Vec<(f32, f32)>) }
//!
//! assert!(Cell::PLAIN && Cell::FLAT);
//! assert!(!<Vec<u8>>::FLAT && !Shape::PLAIN);
//! assert_ne!(opi::fingerprint::<Cell>(), opi::fingerprint::<[f64; 4]>());
//! assert_eq!(opi::fingerprint::<u32>(), opi::fingerprint::<u32>());
//! assert_ne!(opi::fingerprint::<u32>(), opi::fingerprint::<i32>());
//! ```
//!
//! A struct holding something that is not transferable does not derive:
//! ```compile_fail,E0277
//! #[derive(opi::Transferable)]
//! #[transferable(crate = "opi")]
//! struct Shared { count: std::rc::Rc<u32> }
//! ```
//! ```compile_fail,E0277
//! #[derive(opi::Transferable)]
//! #[transferable(crate = "opi")]
//! struct Pointer { p: *const u8 }
//! ```
//! ```compile_fail
//! #[derive(opi::Transferable)]
//! #[transferable(crate = "opi")]
//! struct Borrowed<'a> { s: &'a [u8] }
//! ```

use hmpi_core::Error;
use std::alloc::Layout;

/// Values that may change owner between the ranks of one node (see the
/// module docs).
///
/// # Safety
/// An implementation promises that a value of the type, once every heap
/// block it owns is in the node heap ([`Transferable::check_shared`] is
/// true), is valid in another process of the same program mapped at the
/// same node-heap address — it holds no reference, raw or function pointer,
/// trait object, non-atomic shared count or other pointer to memory private
/// to a process — and that it may be dropped there. `FLAT` may be true only
/// if the value owns no heap memory, and `PLAIN` only if, moreover, it has
/// no padding and every bit pattern of its size is a valid value.
pub unsafe trait Transferable: Sized + Send + 'static {
    /// Hash of the type's name and its parameters (see [`type_hash`] and
    /// [`hash_combine`]); [`fingerprint`] adds size and alignment.
    const TYPE_HASH: u64;
    /// The value owns no heap memory: its bytes are all of it.
    const FLAT: bool;
    /// Flat, no padding, every bit pattern a valid value: the value is just
    /// its bytes, so it can be sent to and received from plain two-sided
    /// messages.
    const PLAIN: bool;

    /// Whether every heap block the value owns (recursively) lies in the
    /// node heap. Always true for flat values.
    fn check_shared(&self) -> bool;

    /// Moves every heap block the value owns (recursively) that is not in
    /// the node heap into it: a fresh block of the global allocator, which
    /// must be `shmheap::ShmHeap` (else [`Error::Type`] with the reason;
    /// the value is left as it was, or with some parts moved).
    fn make_shared(&mut self) -> Result<(), Error>;
}

/// FNV-1a offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a hash of a type's name (use the full path, e.g.
/// `concat!(module_path!(), "::Name")`), for [`Transferable::TYPE_HASH`].
pub const fn type_hash(name: &str) -> u64 {
    let b = name.as_bytes();
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// Mixes `parts` into `h` (FNV-1a over their bytes): the hash of a generic
/// type from its name's hash and its parameters'.
pub const fn hash_combine(mut h: u64, parts: &[u64]) -> u64 {
    let mut i = 0;
    while i < parts.len() {
        let mut k = 0;
        while k < 8 {
            h ^= (parts[i] >> (8 * k)) & 0xff;
            h = h.wrapping_mul(FNV_PRIME);
            k += 1;
        }
        i += 1;
    }
    h
}

/// The fingerprint of `T` that travels with a given value: its
/// [`Transferable::TYPE_HASH`], size and alignment, mixed. Never 0.
pub const fn fingerprint<T: Transferable>() -> u64 {
    let h = hash_combine(
        T::TYPE_HASH,
        &[
            std::mem::size_of::<T>() as u64,
            std::mem::align_of::<T>() as u64,
        ],
    );
    if h == 0 {
        1
    } else {
        h
    }
}

/// Whether this process's global allocator serves from the node heap
/// (`#[global_allocator] static A: shmheap::ShmHeap`), which deep values
/// need on both sides: checked once, after the process attached.
pub fn global_is_node_heap() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    /// 0 unknown, 1 no, 2 yes.
    static ANSWER: AtomicU8 = AtomicU8::new(0);
    // Relaxed: the answer is a pure function of the program; racing
    // threads compute the same value.
    match ANSWER.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            if !shmheap::is_attached() {
                return false; // do not cache: attach may come later
            }
            let probe = Box::new(0u64);
            let yes = shmheap::is_shared(&*probe as *const u64);
            ANSWER.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// The error of [`Transferable::make_shared`] without a node-heap global
/// allocator.
pub(crate) fn not_node_heap(what: &str) -> Error {
    Error::Type {
        reason: format!(
            "{what} owns heap memory outside the node heap, and this program's global \
             allocator is not shmheap::ShmHeap, so it cannot be moved there: giving a value \
             that owns heap blocks needs `#[global_allocator] static A: shmheap::ShmHeap` \
             (and an initialized runtime)"
        ),
    }
}

/// Whether the block of a `Layout::array`/`Layout::new`-sized allocation at
/// `p` needs no move (zero-sized, or in the node heap).
#[inline]
pub(crate) fn block_is_shared(p: *const u8, bytes: usize) -> bool {
    bytes == 0 || shmheap::is_shared(p)
}

macro_rules! plain_types {
    ($($t:ty),*) => {$(
        // SAFETY: a number: no pointer, no padding, every bit pattern valid.
        unsafe impl Transferable for $t {
            const TYPE_HASH: u64 = type_hash(stringify!($t));
            const FLAT: bool = true;
            const PLAIN: bool = true;
            #[inline]
            fn check_shared(&self) -> bool { true }
            #[inline]
            fn make_shared(&mut self) -> Result<(), Error> { Ok(()) }
        }
    )*};
}

plain_types!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    ()
);

macro_rules! flat_types {
    ($($t:ty),*) => {$(
        // SAFETY: no pointer; not every bit pattern is valid, so not plain.
        unsafe impl Transferable for $t {
            const TYPE_HASH: u64 = type_hash(stringify!($t));
            const FLAT: bool = true;
            const PLAIN: bool = false;
            #[inline]
            fn check_shared(&self) -> bool { true }
            #[inline]
            fn make_shared(&mut self) -> Result<(), Error> { Ok(()) }
        }
    )*};
}

flat_types!(bool, char);

// SAFETY: N values of T side by side: valid wherever T is; no padding
// between array elements, so plain if T is.
unsafe impl<T: Transferable, const N: usize> Transferable for [T; N] {
    const TYPE_HASH: u64 = hash_combine(type_hash("[T; N]"), &[T::TYPE_HASH, N as u64]);
    const FLAT: bool = T::FLAT;
    const PLAIN: bool = T::PLAIN;
    fn check_shared(&self) -> bool {
        T::FLAT || self.iter().all(T::check_shared)
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        if T::FLAT {
            return Ok(());
        }
        self.iter_mut().try_for_each(T::make_shared)
    }
}

// SAFETY: `Some(T)` or `None`: valid wherever T is. Not plain (the
// discriminant has invalid patterns).
unsafe impl<T: Transferable> Transferable for Option<T> {
    const TYPE_HASH: u64 = hash_combine(type_hash("Option"), &[T::TYPE_HASH]);
    const FLAT: bool = T::FLAT;
    const PLAIN: bool = false;
    fn check_shared(&self) -> bool {
        self.as_ref().is_none_or(T::check_shared)
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        match self {
            Some(x) => x.make_shared(),
            None => Ok(()),
        }
    }
}

macro_rules! tuples {
    ($( ($($n:tt $t:ident),+) )*) => {$(
        // SAFETY: the elements side by side: valid wherever each is; plain
        // only if each is plain and there is no padding.
        unsafe impl<$($t: Transferable),+> Transferable for ($($t,)+) {
            const TYPE_HASH: u64 = hash_combine(type_hash("(tuple)"), &[$($t::TYPE_HASH),+]);
            const FLAT: bool = true $(&& $t::FLAT)+;
            const PLAIN: bool = true $(&& $t::PLAIN)+
                && std::mem::size_of::<Self>() == 0 $(+ std::mem::size_of::<$t>())+;
            fn check_shared(&self) -> bool {
                true $(&& self.$n.check_shared())+
            }
            fn make_shared(&mut self) -> Result<(), Error> {
                $(self.$n.make_shared()?;)+
                Ok(())
            }
        }
    )*};
}

tuples! {
    (0 A)
    (0 A, 1 B)
    (0 A, 1 B, 2 C)
    (0 A, 1 B, 2 C, 3 D)
    (0 A, 1 B, 2 C, 3 D, 4 E)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H, 8 I, 9 J, 10 K, 11 L)
}

// SAFETY: a heap block holding a T; `check_shared` requires the block in
// the node heap (or zero-sized) and T's own blocks too, and `make_shared`
// moves them there; freeing through the global allocator works in any rank
// when that is the node heap (frees are routed to the owning arena).
unsafe impl<T: Transferable> Transferable for Box<T> {
    const TYPE_HASH: u64 = hash_combine(type_hash("Box"), &[T::TYPE_HASH]);
    const FLAT: bool = false;
    const PLAIN: bool = false;
    fn check_shared(&self) -> bool {
        let p = &**self as *const T as *const u8;
        block_is_shared(p, std::mem::size_of::<T>()) && (**self).check_shared()
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        (**self).make_shared()?;
        let p = &**self as *const T as *const u8;
        if block_is_shared(p, std::mem::size_of::<T>()) {
            return Ok(());
        }
        if !global_is_node_heap() {
            return Err(not_node_heap("a Box"));
        }
        // SAFETY: the value is moved out bit by bit and the old box's block
        // is then freed without dropping it (so it is dropped once, from the
        // new box). Nothing between can unwind: `Box::new` aborts on
        // allocation failure.
        unsafe {
            let value = std::ptr::read(&**self);
            let old = std::mem::replace(self, Box::new(value));
            std::alloc::dealloc(Box::into_raw(old).cast::<u8>(), Layout::new::<T>());
        }
        Ok(())
    }
}

/// Moves `v`'s buffer into the node heap if it is not there.
fn vec_make_shared<T: Transferable>(v: &mut Vec<T>, what: &str) -> Result<(), Error> {
    if !T::FLAT {
        v.iter_mut().try_for_each(T::make_shared)?;
    }
    if block_is_shared(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>()) {
        return Ok(());
    }
    if !global_is_node_heap() {
        return Err(not_node_heap(what));
    }
    let mut fresh = Vec::with_capacity(v.len());
    fresh.append(v); // moves the elements; the old buffer is freed below
    *v = fresh;
    Ok(())
}

// SAFETY: as for Box: the buffer and every element's blocks are checked
// and moved into the node heap.
unsafe impl<T: Transferable> Transferable for Vec<T> {
    const TYPE_HASH: u64 = hash_combine(type_hash("Vec"), &[T::TYPE_HASH]);
    const FLAT: bool = false;
    const PLAIN: bool = false;
    fn check_shared(&self) -> bool {
        block_is_shared(
            self.as_ptr().cast(),
            self.capacity() * std::mem::size_of::<T>(),
        ) && (T::FLAT || self.iter().all(T::check_shared))
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        vec_make_shared(self, "a Vec")
    }
}

// SAFETY: as for Vec.
unsafe impl<T: Transferable> Transferable for Box<[T]> {
    const TYPE_HASH: u64 = hash_combine(type_hash("Box<[T]>"), &[T::TYPE_HASH]);
    const FLAT: bool = false;
    const PLAIN: bool = false;
    fn check_shared(&self) -> bool {
        block_is_shared(self.as_ptr().cast(), std::mem::size_of_val(&**self))
            && (T::FLAT || self.iter().all(T::check_shared))
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        if self.check_shared() {
            return Ok(());
        }
        let mut v = std::mem::take(self).into_vec();
        let r = vec_make_shared(&mut v, "a Box<[T]>");
        *self = v.into_boxed_slice();
        r
    }
}

// SAFETY: a UTF-8 byte buffer: as for Vec<u8>.
unsafe impl Transferable for String {
    const TYPE_HASH: u64 = type_hash("String");
    const FLAT: bool = false;
    const PLAIN: bool = false;
    fn check_shared(&self) -> bool {
        block_is_shared(self.as_ptr(), self.capacity())
    }
    fn make_shared(&mut self) -> Result<(), Error> {
        if self.check_shared() {
            return Ok(());
        }
        if !global_is_node_heap() {
            return Err(not_node_heap("a String"));
        }
        *self = String::from(self.as_str());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_of_standard_types() {
        const { assert!(u64::PLAIN && f32::FLAT && <()>::PLAIN) };
        const { assert!(bool::FLAT && !bool::PLAIN && !char::PLAIN) };
        const { assert!(<[u16; 7]>::PLAIN && !<[bool; 2]>::PLAIN) };
        const { assert!(<(u32, u32)>::PLAIN && !<(u8, u32)>::PLAIN, "padding") };
        const { assert!(<(u8, u32)>::FLAT) };
        const { assert!(!<Option<u32>>::PLAIN && <Option<u32>>::FLAT) };
        const { assert!(!<Box<u8>>::FLAT && !<Vec<u8>>::FLAT && !String::FLAT) };
        const { assert!(!<Option<Vec<u8>>>::FLAT && !<[Vec<u8>; 2]>::FLAT) };
    }

    #[test]
    fn fingerprints_tell_types_apart() {
        let fps = [
            fingerprint::<u8>(),
            fingerprint::<i8>(),
            fingerprint::<u32>(),
            fingerprint::<[u8; 4]>(),
            fingerprint::<[u8; 5]>(),
            fingerprint::<(u8, u8)>(),
            fingerprint::<Vec<u8>>(),
            fingerprint::<Box<[u8]>>(),
            fingerprint::<Option<u8>>(),
            fingerprint::<String>(),
        ];
        for (i, a) in fps.iter().enumerate() {
            for b in &fps[i + 1..] {
                assert_ne!(a, b);
            }
        }
        const F: u64 = fingerprint::<[f64; 3]>(); // const-evaluable
        assert_eq!(F, fingerprint::<[f64; 3]>());
    }

    #[test]
    fn hashes() {
        // FNV-1a reference values.
        assert_eq!(type_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(type_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(hash_combine(1, &[2]), hash_combine(1, &[3]));
    }

    #[test]
    fn private_memory_is_checked() {
        // Not attached here: nothing is in the node heap.
        let b = Box::new(5u32);
        assert!(!b.check_shared());
        let z = Box::new(());
        assert!(z.check_shared(), "zero-sized: no block");
        let v: Vec<u32> = Vec::new();
        assert!(v.check_shared(), "no buffer");
        assert!(!vec![1u8].check_shared());
        assert!(String::new().check_shared());
        assert!(Some(3u8).check_shared());
    }
}
