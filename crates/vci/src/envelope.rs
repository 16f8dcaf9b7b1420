//! The message envelope: what a send puts on the destination VCI's incoming
//! queue.
//!
//! An envelope lives in the **sender's arena** of the node heap (so every
//! rank sees it at the same address) and holds only plain data, one atomic
//! and addresses inside the heap — never a pointer to a rank's private
//! memory. Its first 64 bytes are the header below; an immediate message's
//! payload follows inline, so the receiver's one cache miss on the envelope
//! brings the data too.
//!
//! ```text
//! offset  field        meaning
//!  0      link         MpscLink: the incoming queue's intrusive link
//!  8      source u32   sender's rank
//! 12      tag i32      message tag (0..=TAG_UB)
//! 16      context u32  communicator context id
//! 20      protocol u32 Protocol (immediate, single copy, two copy)
//! 24      len u64      payload length in bytes
//! 32      data u64     heap address of the payload (sender's buffer for
//!                      single copy, bounce buffer for two copy; 0 inline)
//! 40      reply u64    heap address of the sender's VciShared (doorbell)
//! 48      completion   AtomicU32: 0 pending, 1 done (single copy only)
//! 52      alloc_len    bytes of this envelope's allocation
//! 64      inline payload (immediate protocol), rounded up to 64 bytes
//! ```
//!
//! Who frees what: the receiver frees immediate and two-copy envelopes (and
//! the bounce buffer) after copying — a cross-rank free, which returns the
//! memory to the sender's arena. A single-copy envelope belongs to the
//! sender again once the receiver has stored `completion = 1` (Release):
//! the receiver touches it no more, the sender sees the store (Acquire),
//! and frees it.
//!
//! # Example
//! ```
//! use vci::envelope::{Envelope, Protocol, HEADER_LEN};
//!
//! assert_eq!(std::mem::size_of::<Envelope>(), HEADER_LEN);
//! assert_eq!(std::mem::align_of::<Envelope>(), 64);
//! assert_eq!(Protocol::from_u32(Protocol::SingleCopy as u32), Some(Protocol::SingleCopy));
//! ```

use shmheap::sync::mpsc::MpscLink;
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of the envelope header; the inline payload starts here.
pub const HEADER_LEN: usize = 64;
/// The cache line size envelopes are aligned and rounded to.
pub const LINE: usize = 64;

/// How a message's payload travels.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Inline in the envelope; the send completes at once.
    Immediate = 1,
    /// The receiver copies straight from the sender's heap buffer; the send
    /// completes when the receiver says so.
    SingleCopy = 2,
    /// The sender's buffer is private: the sender copies it into a heap
    /// bounce buffer that the envelope owns; the send completes at once.
    TwoCopy = 3,
}

impl Protocol {
    /// The protocol stored as `v`, if any.
    pub fn from_u32(v: u32) -> Option<Protocol> {
        match v {
            1 => Some(Protocol::Immediate),
            2 => Some(Protocol::SingleCopy),
            3 => Some(Protocol::TwoCopy),
            _ => None,
        }
    }
}

/// Completion word: the receiver has not finished with the envelope.
const PENDING: u32 = 0;
/// Completion word: the receiver has copied the payload and let go.
const DONE: u32 = 1;

/// A message envelope in the sender's arena (see the module docs).
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Envelope {
    link: MpscLink,
    source: u32,
    tag: i32,
    context: u32,
    protocol: u32,
    len: u64,
    data: u64,
    reply: u64,
    completion: AtomicU32,
    alloc_len: u32,
}

const _: () = assert!(std::mem::size_of::<Envelope>() == HEADER_LEN);
const _: () = assert!(std::mem::offset_of!(Envelope, link) == 0);

/// The matching key and routing data of a new envelope.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub source: u32,
    pub tag: i32,
    pub context: u32,
    pub protocol: Protocol,
    pub len: u64,
    /// Heap address of the payload (0 for immediate).
    pub data: u64,
    /// Heap address of the sender's `VciShared`.
    pub reply: u64,
}

impl Envelope {
    /// The sender's rank.
    pub fn source(&self) -> u32 {
        self.source
    }

    /// The message tag.
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// The communicator context id.
    pub fn context(&self) -> u32 {
        self.context
    }

    /// The payload length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The protocol (the envelope was written by this crate, so it is valid).
    pub fn protocol(&self) -> Protocol {
        Protocol::from_u32(self.protocol).unwrap_or(Protocol::Immediate)
    }

    pub(crate) fn data(&self) -> u64 {
        self.data
    }

    pub(crate) fn reply(&self) -> u64 {
        self.reply
    }

    /// Whether the receiver has finished with this (single-copy) envelope.
    pub(crate) fn is_complete(&self) -> bool {
        // SYNC POINT: Acquire pairs with the Release store in `complete`:
        // the receiver's reads of the sender's buffer happen before the
        // sender reuses the buffer or frees the envelope.
        self.completion.load(Ordering::Acquire) == DONE
    }

    /// Marks the envelope done. The caller must not touch it afterwards.
    pub(crate) fn complete(&self) {
        // SYNC POINT: Release pairs with the Acquire load in `is_complete`
        // (see there).
        self.completion.store(DONE, Ordering::Release);
    }

    /// The inline payload's first byte.
    pub(crate) fn inline_ptr(this: NonNull<Envelope>) -> *mut u8 {
        // SAFETY: the inline area starts right after the header, inside the
        // envelope's allocation (`alloc_len >= HEADER_LEN`).
        unsafe { this.as_ptr().cast::<u8>().add(HEADER_LEN) }
    }

    fn layout(alloc_len: usize) -> Layout {
        Layout::from_size_align(alloc_len, LINE).expect("envelope sizes are small")
    }

    /// Allocates an envelope in this rank's arena with `inline` copied into
    /// its inline area (empty for other protocols than immediate).
    pub(crate) fn create(h: Header, inline: &[u8]) -> shmheap::Result<NonNull<Envelope>> {
        let alloc_len = HEADER_LEN + inline.len().div_ceil(LINE) * LINE;
        let p = ShmHeap
            .try_alloc(Self::layout(alloc_len))?
            .cast::<Envelope>();
        let env = Envelope {
            link: MpscLink::new(),
            source: h.source,
            tag: h.tag,
            context: h.context,
            protocol: h.protocol as u32,
            len: h.len,
            data: h.data,
            reply: h.reply,
            completion: AtomicU32::new(PENDING),
            alloc_len: alloc_len as u32,
        };
        // SAFETY: `p` is a fresh, 64-byte aligned block of `alloc_len`
        // bytes: room for the header and, after it, `inline.len()` bytes;
        // the inline source is a distinct (borrowed) buffer.
        unsafe {
            p.as_ptr().write(env);
            ptr::copy_nonoverlapping(inline.as_ptr(), Self::inline_ptr(p), inline.len());
        }
        Ok(p)
    }

    /// Frees an envelope (and its bounce buffer for two copy), whichever
    /// rank's arena holds it.
    ///
    /// # Safety
    ///
    /// `this` came from [`Envelope::create`], is not queued, and nobody uses
    /// it (or its bounce buffer) afterwards.
    pub(crate) unsafe fn destroy(this: NonNull<Envelope>) {
        // SAFETY: valid until freed below (caller's contract).
        let env = unsafe { this.as_ref() };
        if env.protocol() == Protocol::TwoCopy && env.len > 0 {
            // SAFETY: the bounce buffer was allocated by `alloc_bounce` with
            // this layout and belongs to the envelope.
            unsafe { ShmHeap.dealloc(env.data as *mut u8, bounce_layout(env.len as usize)) };
        }
        let layout = Self::layout(env.alloc_len as usize);
        // SAFETY: the envelope was allocated with this layout by `create`;
        // frees of another rank's block go to its remote-free list.
        unsafe { ShmHeap.dealloc(this.as_ptr().cast(), layout) };
    }
}

fn bounce_layout(len: usize) -> Layout {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_as_documented() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(Envelope, source), 8);
        assert_eq!(offset_of!(Envelope, tag), 12);
        assert_eq!(offset_of!(Envelope, context), 16);
        assert_eq!(offset_of!(Envelope, protocol), 20);
        assert_eq!(offset_of!(Envelope, len), 24);
        assert_eq!(offset_of!(Envelope, data), 32);
        assert_eq!(offset_of!(Envelope, reply), 40);
        assert_eq!(offset_of!(Envelope, completion), 48);
        assert_eq!(offset_of!(Envelope, alloc_len), 52);
        for p in [Protocol::Immediate, Protocol::SingleCopy, Protocol::TwoCopy] {
            assert_eq!(Protocol::from_u32(p as u32), Some(p));
        }
        assert_eq!(Protocol::from_u32(0), None);
    }
}
