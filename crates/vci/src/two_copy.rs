//! The two-copy protocol: through a bounce buffer in the node heap.
//!
//! A send buffer above `eager_max` that is neither in the node heap (single
//! copy, [`crate::single_copy`]) nor readable by the receiver with
//! `process_vm_readv` ([`crate::kernel_assisted`]) is first copied by the
//! sender into a bounce buffer in its arena, whose address the envelope
//! carries; the send is complete at once. The receiver copies out of the
//! bounce buffer and frees it with the envelope ([`Envelope::destroy`]), a
//! cross-rank free back to the sender's arena.

#[cfg(doc)]
use crate::envelope::Envelope;
use crate::envelope::LINE;
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, NonNull};

/// The layout of a bounce buffer of `len` bytes.
pub(crate) fn bounce_layout(len: usize) -> Layout {
    Layout::from_size_align(len, LINE).expect("a slice's length fits a layout")
}

/// A heap copy of `buf` for the two-copy protocol (`buf` is not empty).
pub(crate) fn alloc_bounce(buf: &[u8]) -> shmheap::Result<NonNull<u8>> {
    let p = ShmHeap.try_alloc(bounce_layout(buf.len()))?;
    // SAFETY: fresh block of `buf.len()` bytes, distinct from `buf`.
    unsafe { ptr::copy_nonoverlapping(buf.as_ptr(), p.as_ptr(), buf.len()) };
    Ok(p)
}

/// Frees a bounce buffer that never made it into an envelope.
///
/// # Safety
///
/// `p` came from `alloc_bounce` for `len` bytes and is not used afterwards.
pub(crate) unsafe fn free_bounce(p: NonNull<u8>, len: usize) {
    // SAFETY: allocated with this layout (caller's contract).
    unsafe { ShmHeap.dealloc(p.as_ptr(), bounce_layout(len)) };
}
