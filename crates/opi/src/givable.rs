//! What can be given and taken: [`Givable`] (`Box<T>`, `Vec<T>`,
//! `Box<[T]>`, `String` and [`OpiBuf<T>`]) and how each travels as one
//! heap block with 32 bytes of metadata.
//!
//! # The metadata (`OwnedBlock::meta`)
//! ```text
//! meta[0]  MAGIC (bits 63..16) | kind << 8 | flags     (kind: BOX 1, SEQ 2, STR 3, RAW 4;
//!                                                       flag DEEP 1: the value owns blocks)
//! meta[1]  fingerprint of the element type (BOX, SEQ), or the giver's datatype code (RAW)
//! meta[2]  element count (SEQ), 1 (BOX), bytes (STR, RAW)
//! meta[3]  0
//! ```
//! `Vec<T>`, `Box<[T]>` and `OpiBuf<T>` are all "sequences of `T`" and take
//! each other's messages. A message from a plain send (all-zero metadata)
//! or a raw block (kind RAW, from the C interface) can be taken as a type
//! whose values are their bytes ([`Transferable::PLAIN`]) — one value, or
//! a sequence whose element size divides the length — and as a `String` if
//! it is UTF-8.
//!
//! On a mismatch the taker gets [`Error::Type`] and the block is freed. A
//! mismatched *deep* value (one that owns heap blocks, flag DEEP) cannot be
//! dropped without its type, so the blocks it owns stay allocated; the error
//! says so. (Within one program a mismatch is a bug, not a condition to
//! recover from.)

use crate::pool::OpiBuf;
use crate::transfer::{fingerprint, global_is_node_heap, Transferable};
use hmpi_core::raw::OwnedBlock;
use hmpi_core::Error;
use std::alloc::Layout;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ptr::NonNull;

/// Upper 48 bits of `meta[0]` on every block given through this crate.
pub const MAGIC: u64 = 0x4f50_4931_0000_0000 | (0x7e55 << 16);
/// Mask of the magic bits.
const MAGIC_MASK: u64 = !0xffff;
/// `meta[0]` kind: one boxed value.
pub const KIND_BOX: u64 = 1;
/// `meta[0]` kind: a sequence of values (`Vec`, `Box<[T]>`, `OpiBuf`).
pub const KIND_SEQ: u64 = 2;
/// `meta[0]` kind: a `String`.
pub const KIND_STR: u64 = 3;
/// `meta[0]` kind: raw bytes (the C interface's `OPI_Give`).
pub const KIND_RAW: u64 = 4;
/// `meta[0]` flag: the value owns heap blocks besides the given one.
pub const FLAG_DEEP: u64 = 1;

/// The `meta` of a given block.
pub const fn meta(kind: u64, deep: bool, code: u64, count: u64) -> [u64; 4] {
    [MAGIC | kind << 8 | deep as u64, code, count, 0]
}

/// What the metadata of a received block says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Bytes: a plain send, a raw block, or a block of unknown origin.
    Bytes,
    /// A value given through this crate.
    Given {
        /// `KIND_*`.
        kind: u64,
        /// Whether it owns further heap blocks.
        deep: bool,
        /// The element fingerprint (BOX, SEQ).
        fingerprint: u64,
        /// Element count (SEQ), 1 (BOX), bytes (STR).
        count: u64,
    },
}

/// Reads the metadata of a received block.
pub fn origin(b: &OwnedBlock) -> Origin {
    let m = b.meta;
    if !b.given || m[0] & MAGIC_MASK != MAGIC {
        return Origin::Bytes;
    }
    match (m[0] >> 8) & 0xff {
        KIND_RAW => Origin::Bytes,
        kind => Origin::Given {
            kind,
            deep: m[0] & FLAG_DEEP != 0,
            fingerprint: m[1],
            count: m[2],
        },
    }
}

fn kind_name(kind: u64) -> &'static str {
    match kind {
        KIND_BOX => "a boxed value",
        KIND_SEQ => "a sequence (Vec, Box<[T]>, OpiBuf)",
        KIND_STR => "a String",
        _ => "an unknown kind of value",
    }
}

/// Frees a received block that will not be used (an error path), and
/// returns the error for a type mismatch.
///
/// # Safety
/// The block is owned by the caller (a block of the global allocator, or
/// of size 0) and not used afterwards.
unsafe fn reject(b: OwnedBlock, want: &str, why: String) -> Error {
    let o = origin(&b);
    // SAFETY: the caller's contract.
    unsafe { b.free() };
    let leak = match o {
        Origin::Given { deep: true, .. } => {
            " (it owned further heap blocks, which stay allocated: they cannot be \
             dropped without their type)"
        }
        _ => "",
    };
    Error::Type {
        reason: format!("take of {want}: {why}{leak}"),
    }
}

/// A value the ownership of which can be given to another rank
/// (`give`/`take`): `Box<T>`, `Vec<T>`, `Box<[T]>`, `String`, [`OpiBuf<T>`]
/// for `T: Transferable`. Sealed: the conversions to and from blocks are
/// this crate's.
pub trait Givable: sealed::Sealed + Sized + Send + 'static {
    /// The alignment a received block must have.
    #[doc(hidden)]
    const ALIGN: usize;

    /// Whether a value owns further heap blocks (its block's `meta` flag
    /// DEEP): such a value stays on its node.
    #[doc(hidden)]
    const DEEP: bool;

    /// The value as a block of the global allocator with its metadata,
    /// every heap block it owns moved into the node heap first; on error
    /// the value back.
    #[doc(hidden)]
    fn into_block(self) -> Result<OwnedBlock, (Self, Error)>;

    /// The value a received block holds. By reference, so that the
    /// fields are read where the engine wrote them (see `take_engine`).
    ///
    /// # Safety
    /// The block is the caller's, received from the engine (a block of this
    /// process's global allocator aligned to `ALIGN`, or of size 0), and
    /// not used afterwards: the value, or the error, has taken it over.
    #[doc(hidden)]
    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error>;

    /// The value back from a block that [`Givable::into_block`] made and
    /// nobody received (a give that failed).
    ///
    /// # Safety
    /// `b` is exactly what `into_block` returned, and is not used again.
    #[doc(hidden)]
    unsafe fn restore(b: OwnedBlock) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for Box<T> {}
    impl<T> Sealed for Vec<T> {}
    impl<T> Sealed for Box<[T]> {}
    impl Sealed for String {}
    impl<T> Sealed for super::OpiBuf<T> {}
}

/// Makes the heap blocks `v` owns shared, if any; the error for the giver.
fn share_inner<T: Transferable>(v: &mut T) -> Result<(), Error> {
    if T::FLAT || v.check_shared() {
        Ok(())
    } else {
        v.make_shared()
    }
}

fn array_layout<T>(n: usize) -> Layout {
    Layout::array::<T>(n).expect("an allocation that exists has a valid layout")
}

impl<T: Transferable> Givable for Box<T> {
    const ALIGN: usize = align_of::<T>();
    const DEEP: bool = !T::FLAT;

    fn into_block(mut self) -> Result<OwnedBlock, (Self, Error)> {
        if let Err(e) = share_inner(&mut *self) {
            return Err((self, e));
        }
        let ptr = Box::into_raw(self).cast::<u8>();
        Ok(OwnedBlock {
            ptr: NonNull::new(ptr).expect("a box is non-null"),
            layout: Layout::new::<T>(),
            len: size_of::<T>(),
            meta: meta(KIND_BOX, !T::FLAT, fingerprint::<T>(), 1),
            given: true,
        })
    }

    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error> {
        let want = || format!("Box<{}>", std::any::type_name::<T>());
        match origin(b) {
            Origin::Given {
                kind: KIND_BOX,
                fingerprint: f,
                ..
            } if f == fingerprint::<T>() => {}
            Origin::Given {
                kind: KIND_BOX,
                fingerprint: f,
                ..
            } => {
                let why = format!(
                    "the message holds a boxed value of another type (fingerprint {f:#018x}, \
                     expected {:#018x})",
                    fingerprint::<T>()
                );
                // SAFETY: the caller's contract.
                return Err(unsafe { reject(*b, &want(), why) });
            }
            Origin::Given { kind, .. } => {
                let why = format!("the message holds {}", kind_name(kind));
                // SAFETY: the caller's contract.
                return Err(unsafe { reject(*b, &want(), why) });
            }
            Origin::Bytes if !T::PLAIN => {
                let why = format!(
                    "a message of plain bytes ({} bytes, from a plain send or a raw block) can \
                     only be taken as a type whose values are their bytes",
                    b.len
                );
                // SAFETY: the caller's contract.
                return Err(unsafe { reject(*b, &want(), why) });
            }
            Origin::Bytes => {}
        }
        if b.len != size_of::<T>() {
            let (bytes, element_size) = (b.len as u64, size_of::<T>());
            // SAFETY: the caller's contract.
            unsafe { b.free() };
            return Err(Error::Count {
                bytes,
                element_size,
                expected: Some(1),
            });
        }
        if !T::FLAT && !global_is_node_heap() {
            let why =
                "a value that owns heap blocks needs the node heap as global allocator".to_string();
            // SAFETY: the caller's contract.
            return Err(unsafe { reject(*b, &want(), why) });
        }
        let p = b.ptr.as_ptr().cast::<T>();
        if b.layout == Layout::new::<T>() {
            // SAFETY: a block of the global allocator with T's layout (or a
            // dangling aligned pointer for a zero-sized T) holding a valid
            // T: the giver's value (same fingerprint) or the bytes of a
            // plain type. Ours (caller's contract).
            Ok(unsafe { Box::from_raw(p) })
        } else {
            // SAFETY: aligned for T (ALIGN) and `len == size_of::<T>()`
            // valid bytes; the block is freed without dropping the value,
            // which moved into the new box.
            unsafe {
                let v = std::ptr::read(p);
                b.free();
                Ok(Box::new(v))
            }
        }
    }

    unsafe fn restore(b: OwnedBlock) -> Self {
        // SAFETY: `into_block` made the block from `Box::into_raw`.
        unsafe { Box::from_raw(b.ptr.as_ptr().cast::<T>()) }
    }
}

/// The elements of a sequence message: the count, after the checks.
///
/// # Safety
/// As for [`Givable::from_block`]; on error the block is freed.
///
/// Inlined (as is `OpiBuf::from_block`), so that a take reads the few
/// fields it checks where the engine wrote the block instead of copying
/// the block into a call (see docs/performance.md, "Store forwarding").
#[inline(always)]
unsafe fn seq_count<T: Transferable>(
    b: &OwnedBlock,
    want: &dyn Fn() -> String,
) -> Result<usize, Error> {
    let n = match origin(b) {
        Origin::Given {
            kind: KIND_SEQ,
            fingerprint: f,
            count,
            ..
        } if f == fingerprint::<T>() => count,
        Origin::Given {
            kind: KIND_SEQ,
            fingerprint: f,
            ..
        } => {
            let why = format!(
                "the message holds a sequence of another element type (fingerprint \
                 {f:#018x}, expected {:#018x})",
                fingerprint::<T>()
            );
            // SAFETY: the caller's contract.
            return Err(unsafe { reject(*b, &want(), why) });
        }
        Origin::Given { kind, .. } => {
            let why = format!("the message holds {}", kind_name(kind));
            // SAFETY: the caller's contract.
            return Err(unsafe { reject(*b, &want(), why) });
        }
        Origin::Bytes if !T::PLAIN || size_of::<T>() == 0 => {
            let why = format!(
                "a message of plain bytes ({} bytes) can only be taken as a sequence of a \
                 non-zero-sized type whose values are their bytes",
                b.len
            );
            // SAFETY: the caller's contract.
            return Err(unsafe { reject(*b, &want(), why) });
        }
        Origin::Bytes => {
            if b.len % size_of::<T>() != 0 {
                let bytes = b.len as u64;
                // SAFETY: the caller's contract.
                unsafe { b.free() };
                return Err(Error::Count {
                    bytes,
                    element_size: size_of::<T>(),
                    expected: None,
                });
            }
            (b.len / size_of::<T>()) as u64
        }
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n.checked_mul(size_of::<T>()) != Some(b.len) {
        let why = format!(
            "the message's {} bytes do not hold {n} elements of {} bytes",
            b.len,
            size_of::<T>()
        );
        // SAFETY: the caller's contract.
        return Err(unsafe { reject(*b, &want(), why) });
    }
    if !T::FLAT && !global_is_node_heap() {
        let why = "values that own heap blocks need the node heap as global allocator".to_string();
        // SAFETY: the caller's contract.
        return Err(unsafe { reject(*b, &want(), why) });
    }
    Ok(n)
}

/// `n` values of a zero-sized type, owned by the caller now.
///
/// # Safety
/// The caller owned `n` values of `T` (zero-sized), which it hands over.
pub(crate) unsafe fn zst_values<T>(n: usize) -> Vec<T> {
    debug_assert_eq!(size_of::<T>(), 0);
    (0..n)
        // SAFETY: a zero-sized value has no bytes to read; the caller owned
        // `n` of them.
        .map(|_| unsafe { NonNull::<T>::dangling().as_ptr().read() })
        .collect()
}

/// The vector a checked sequence block holds (`n` elements).
///
/// # Safety
/// As for [`Givable::from_block`], after [`seq_count`] returned `n`.
unsafe fn block_to_vec<T>(b: OwnedBlock, n: usize) -> Vec<T> {
    let size = size_of::<T>();
    if size == 0 {
        // SAFETY: nothing to free of a block of zero-sized values (free
        // anything the engine might have allocated anyway).
        unsafe { b.free() };
        // SAFETY: the giver's `n` zero-sized values (same fingerprint).
        return unsafe { zst_values(n) };
    }
    let fits = b.layout.align() == align_of::<T>() && b.layout.size() % size == 0;
    if fits {
        let cap = b.layout.size() / size;
        let p = if cap == 0 {
            NonNull::<T>::dangling().as_ptr()
        } else {
            b.ptr.as_ptr().cast::<T>()
        };
        // SAFETY: a block of the global allocator with the layout of `cap`
        // T's, whose first `n` are valid (the giver's elements, or bytes of
        // a plain T); ours.
        unsafe { Vec::from_raw_parts(p, n, cap) }
    } else {
        let mut v = Vec::with_capacity(n);
        // SAFETY: the block holds `n` valid T's, aligned (ALIGN); they move
        // bit by bit into `v`, then the block is freed without dropping
        // them.
        unsafe {
            std::ptr::copy_nonoverlapping(b.ptr.as_ptr().cast::<T>(), v.as_mut_ptr(), n);
            v.set_len(n);
            b.free();
        }
        v
    }
}

fn vec_into_block<T: Transferable>(v: Vec<T>) -> OwnedBlock {
    let mut v = ManuallyDrop::new(v);
    let (len, cap) = (v.len(), v.capacity());
    let bytes = if size_of::<T>() == 0 { 0 } else { cap };
    OwnedBlock {
        ptr: NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("a vector's pointer is non-null"),
        layout: array_layout::<T>(bytes),
        len: len * size_of::<T>(),
        meta: meta(KIND_SEQ, !T::FLAT, fingerprint::<T>(), len as u64),
        given: true,
    }
}

impl<T: Transferable> Givable for Vec<T> {
    const ALIGN: usize = align_of::<T>();
    const DEEP: bool = !T::FLAT;

    fn into_block(mut self) -> Result<OwnedBlock, (Self, Error)> {
        if !T::FLAT {
            if let Err(e) = self.iter_mut().try_for_each(share_inner) {
                return Err((self, e));
            }
        }
        Ok(vec_into_block(self))
    }

    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error> {
        let want = || format!("Vec<{}>", std::any::type_name::<T>());
        // SAFETY: the caller's contract.
        let n = unsafe { seq_count::<T>(b, &want) }?;
        // SAFETY: checked above.
        Ok(unsafe { block_to_vec(*b, n) })
    }

    unsafe fn restore(b: OwnedBlock) -> Self {
        // SAFETY: `into_block` made the block from this vector: its layout
        // is the vector's and `meta[2]` its length.
        unsafe { block_to_vec(b, b.meta[2] as usize) }
    }
}

impl<T: Transferable> Givable for Box<[T]> {
    const ALIGN: usize = align_of::<T>();
    const DEEP: bool = !T::FLAT;

    fn into_block(self) -> Result<OwnedBlock, (Self, Error)> {
        Vec::from(self)
            .into_block()
            .map_err(|(v, e)| (v.into_boxed_slice(), e))
    }

    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error> {
        // SAFETY: the caller's contract.
        unsafe { Vec::<T>::from_block(b) }.map(Vec::into_boxed_slice)
    }

    unsafe fn restore(b: OwnedBlock) -> Self {
        // SAFETY: the block of a vector made from this boxed slice.
        unsafe { Vec::<T>::restore(b) }.into_boxed_slice()
    }
}

impl Givable for String {
    const ALIGN: usize = 1;
    const DEEP: bool = false;

    fn into_block(self) -> Result<OwnedBlock, (Self, Error)> {
        let n = self.len() as u64;
        let mut b = vec_into_block(self.into_bytes());
        b.meta = meta(KIND_STR, false, 0, n);
        Ok(b)
    }

    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error> {
        let checked = match origin(b) {
            Origin::Given { kind: KIND_STR, .. } => true,
            Origin::Given { kind, .. } => {
                let why = format!("the message holds {}", kind_name(kind));
                // SAFETY: the caller's contract.
                return Err(unsafe { reject(*b, "String", why) });
            }
            Origin::Bytes => false,
        };
        let n = b.len;
        // SAFETY: bytes are plain; the block holds `n` of them.
        let bytes = unsafe { block_to_vec::<u8>(*b, n) };
        if checked {
            // SAFETY: the bytes of a String given by this program.
            return Ok(unsafe { String::from_utf8_unchecked(bytes) });
        }
        String::from_utf8(bytes).map_err(|e| Error::Type {
            reason: format!(
                "take of String: the message's {} bytes are not UTF-8 ({})",
                n,
                e.utf8_error()
            ),
        })
    }

    unsafe fn restore(b: OwnedBlock) -> Self {
        // SAFETY: the bytes of this String, `len` of them.
        unsafe { String::from_utf8_unchecked(block_to_vec::<u8>(b, b.len)) }
    }
}

impl<T: Transferable> Givable for OpiBuf<T> {
    const ALIGN: usize = align_of::<T>();
    const DEEP: bool = !T::FLAT;

    fn into_block(mut self) -> Result<OwnedBlock, (Self, Error)> {
        if !T::FLAT {
            if let Err(e) = self.iter_mut().try_for_each(share_inner) {
                return Err((self, e));
            }
        }
        let (ptr, len, layout) = self.into_raw_parts();
        Ok(OwnedBlock {
            ptr: ptr.cast(),
            layout,
            len: len * size_of::<T>(),
            meta: meta(KIND_SEQ, !T::FLAT, fingerprint::<T>(), len as u64),
            given: true,
        })
    }

    #[inline(always)]
    unsafe fn from_block(b: &OwnedBlock) -> Result<Self, Error> {
        let want = || format!("OpiBuf<{}>", std::any::type_name::<T>());
        // SAFETY: the caller's contract.
        let n = unsafe { seq_count::<T>(b, &want) }?;
        if size_of::<T>() == 0 {
            // SAFETY: checked above.
            let v: Vec<T> = unsafe { block_to_vec(*b, n) };
            return Ok(OpiBuf::from_vec_zst(v));
        }
        // SAFETY: a block of the global allocator (or size 0), aligned for
        // T, whose first `n` elements are valid T's; ours.
        Ok(unsafe { OpiBuf::from_raw_parts(b.ptr.cast(), n, b.layout) })
    }

    unsafe fn restore(b: OwnedBlock) -> Self {
        let n = b.meta[2] as usize;
        if size_of::<T>() == 0 {
            return OpiBuf::from_vec_zst(
                std::iter::repeat_with(|| {
                    // SAFETY: the buffer held `n` zero-sized values, which we
                    // own again; a zero-sized value has no bytes to read.
                    unsafe { std::ptr::NonNull::<T>::dangling().as_ptr().read() }
                })
                .take(n)
                .collect(),
            );
        }
        // SAFETY: the buffer's own parts (`into_raw_parts`).
        unsafe { OpiBuf::from_raw_parts(b.ptr.cast(), n, b.layout) }
    }
}
