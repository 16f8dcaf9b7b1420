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
//! 20      protocol u16 Protocol (immediate, single copy, two copy,
//!                      kernel assisted, owned)
//! 22      flags u16    FLAG_SYNC: synchronous send (the sender waits for
//!                      `completion` whatever the protocol); FLAG_SYN: a
//!                      SynCopy line follows the header
//! 24      len u64      payload length in bytes
//! 32      data u64     address of the payload (sender's heap buffer for
//!                      single copy, bounce buffer for two copy, the
//!                      sender's private buffer in *its* address space for
//!                      kernel assisted; 0 inline)
//! 40      reply u64    heap address of the sender's VciShared (doorbell)
//! 48      completion   AtomicU32: 0 pending, 1 done (single copy, kernel
//!                      assisted, and every synchronous send)
//! 52      alloc_len    bytes of this envelope's allocation
//! 56      seq u64      the message's number in its (sender, VCI) pair,
//!                      shared with the fast boxes (see [`crate::fastbox`])
//! 64      inline payload (immediate protocol), rounded up to 64 bytes,
//!         or the SynCopy line (single copy), or the OwnedInfo record
//!         (ownership passing: the given block's layout and metadata)
//! ```
//!
//! **Synergistic copy.** A single-copy envelope carries a second cache line,
//! `SynCopy` (see `synergistic`), through which receiver and
//! sender copy the payload together.
//!
//! **Ownership passing.** An owned envelope's `data` is a node-heap block
//! that the sender gave up; its layout and 32 bytes of metadata follow the
//! header (`OwnedInfo`). The receiver either keeps the block (the pointer
//! moves, nothing is copied) or copies out of it and frees it.
//!
//! Who frees what: the receiver frees immediate, two-copy and owned
//! envelopes (and the bounce buffer) after copying — a cross-rank free, which returns the
//! memory to the sender's arena — unless the send is synchronous. Every
//! other envelope (single copy, kernel assisted, synchronous) belongs to the
//! sender again once the receiver has stored `completion = 1` (Release):
//! the receiver touches it no more, the sender sees the store (Acquire),
//! and frees it (with its bounce buffer, if any).
//!
//! # Example
//! ```
//! use vci::envelope::{Envelope, Protocol, HEADER_LEN};
//!
//! assert_eq!(std::mem::size_of::<Envelope>(), HEADER_LEN);
//! assert_eq!(std::mem::align_of::<Envelope>(), 64);
//! assert_eq!(Protocol::from_u32(Protocol::SingleCopy as u32), Some(Protocol::SingleCopy));
//! ```

use crate::synergistic::SynCopy;
use crate::two_copy::bounce_layout;
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
    /// The sender's buffer is private: the receiver reads it straight from
    /// the sender's address space with `process_vm_readv` (one copy); the
    /// send completes when the receiver says so.
    KernelAssisted = 4,
    /// Ownership passing: `data` is a node-heap block the sender gave up
    /// (an `OwnedInfo` record with its layout and metadata is inline);
    /// the receiver takes the block itself, or copies out of it and frees
    /// it. The send completes at once.
    Owned = 5,
}

impl Protocol {
    /// The protocol stored as `v`, if any.
    pub fn from_u32(v: u32) -> Option<Protocol> {
        match v {
            1 => Some(Protocol::Immediate),
            2 => Some(Protocol::SingleCopy),
            3 => Some(Protocol::TwoCopy),
            4 => Some(Protocol::KernelAssisted),
            5 => Some(Protocol::Owned),
            _ => None,
        }
    }
}

/// Completion word: the receiver has not finished with the envelope.
const PENDING: u32 = 0;
/// Completion word: the receiver has copied the payload and let go.
const DONE: u32 = 1;

/// Envelope flag: a synchronous send; the receiver stores completion after
/// matching (and copying) whatever the protocol, and the sender frees.
pub(crate) const FLAG_SYNC: u16 = 1;
/// Envelope flag: a `SynCopy` line follows the header.
pub(crate) const FLAG_SYN: u16 = 2;

/// A message envelope in the sender's arena (see the module docs).
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Envelope {
    link: MpscLink,
    source: u32,
    tag: i32,
    context: u32,
    protocol: u16,
    flags: u16,
    len: u64,
    data: u64,
    reply: u64,
    completion: AtomicU32,
    alloc_len: u32,
    seq: u64,
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
    /// `FLAG_SYNC` and/or `FLAG_SYN`.
    pub flags: u16,
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
        Protocol::from_u32(self.protocol as u32).unwrap_or(Protocol::Immediate)
    }

    pub(crate) fn data(&self) -> u64 {
        self.data
    }

    pub(crate) fn reply(&self) -> u64 {
        self.reply
    }

    /// Whether the send is synchronous.
    pub(crate) fn is_sync(&self) -> bool {
        self.flags & FLAG_SYNC != 0
    }

    /// The message's number in its (sender, VCI) pair.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Numbers the message (before it is queued).
    pub(crate) fn set_seq(this: NonNull<Envelope>, seq: u64) {
        // SAFETY: the envelope is the sender's alone until it is queued
        // (`create` returned it and it was not pushed yet).
        unsafe { (*this.as_ptr()).seq = seq };
    }

    /// The envelope's synergistic-copy line, if it has one.
    ///
    /// # Safety
    ///
    /// `this` is a live envelope from [`Envelope::create`] and stays
    /// allocated for `'e` (the sender before it frees it, the receiver
    /// before it completes it).
    pub(crate) unsafe fn syn<'e>(this: NonNull<Envelope>) -> Option<&'e SynCopy> {
        // SAFETY: the header is valid (caller's contract).
        let env = unsafe { this.as_ref() };
        if env.flags & FLAG_SYN == 0 {
            return None;
        }
        // SAFETY: with FLAG_SYN, `create` wrote a SynCopy right after the
        // header, 64-byte aligned, inside the allocation, which lives for
        // 'e (caller's contract).
        Some(unsafe { &*Self::inline_ptr(this).cast::<SynCopy>() })
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
    #[inline(always)]
    pub(crate) fn create(h: Header, inline: &[u8]) -> shmheap::Result<NonNull<Envelope>> {
        let ext = if h.flags & FLAG_SYN != 0 {
            std::mem::size_of::<SynCopy>()
        } else {
            0
        };
        let alloc_len = HEADER_LEN + inline.len().div_ceil(LINE) * LINE + ext;
        let p = ShmHeap
            .try_alloc(Self::layout(alloc_len))?
            .cast::<Envelope>();
        let env = Envelope {
            link: MpscLink::new(),
            source: h.source,
            tag: h.tag,
            context: h.context,
            protocol: h.protocol as u16,
            len: h.len,
            data: h.data,
            reply: h.reply,
            completion: AtomicU32::new(PENDING),
            alloc_len: alloc_len as u32,
            flags: h.flags,
            seq: 0,
        };
        // SAFETY: `p` is a fresh, 64-byte aligned block of `alloc_len`
        // bytes: room for the header and, after it, `inline.len()` bytes;
        // the inline source is a distinct (borrowed) buffer.
        unsafe {
            p.as_ptr().write(env);
            ptr::copy_nonoverlapping(inline.as_ptr(), Self::inline_ptr(p), inline.len());
        }
        if ext != 0 {
            debug_assert!(inline.is_empty());
            // SAFETY: the SynCopy line follows the header inside the
            // allocation (`ext` bytes reserved above), 64-byte aligned.
            unsafe { Self::inline_ptr(p).cast::<SynCopy>().write(SynCopy::new()) };
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

/// The inline record of an owned envelope: the given block's allocation
/// layout and the metadata that travels with it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnedInfo {
    /// The block's allocation size (0: no block, `data` is 0).
    pub size: u64,
    /// The block's allocation alignment.
    pub align: u64,
    /// Uninterpreted metadata (see [`crate::OwnedBlock::meta`]).
    pub meta: [u64; 4],
}

const _: () = assert!(std::mem::size_of::<OwnedInfo>() <= LINE);

impl OwnedInfo {
    /// The given block's allocation layout.
    pub(crate) fn layout(&self) -> Layout {
        Layout::from_size_align(self.size as usize, self.align as usize)
            .expect("the sender sent a valid layout")
    }

    /// The record's bytes, for [`Envelope::create`].
    pub(crate) fn to_bytes(self) -> [u8; std::mem::size_of::<OwnedInfo>()] {
        let mut b = [0u8; std::mem::size_of::<OwnedInfo>()];
        let words = [
            self.size,
            self.align,
            self.meta[0],
            self.meta[1],
            self.meta[2],
            self.meta[3],
        ];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        b
    }

    /// Reads the record of an owned envelope.
    ///
    /// # Safety
    ///
    /// `env` is a live envelope whose protocol is [`Protocol::Owned`].
    pub(crate) unsafe fn read(env: NonNull<Envelope>) -> OwnedInfo {
        // SAFETY: an owned envelope was created with this record as its
        // inline payload (`create` copied `to_bytes`), 64-byte aligned;
        // `read_unaligned` needs no alignment anyway.
        unsafe { ptr::read_unaligned(Envelope::inline_ptr(env).cast::<OwnedInfo>()) }
    }
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
        assert_eq!(offset_of!(Envelope, flags), 22);
        assert_eq!(offset_of!(Envelope, seq), 56);
        for p in [
            Protocol::Immediate,
            Protocol::SingleCopy,
            Protocol::TwoCopy,
            Protocol::KernelAssisted,
            Protocol::Owned,
        ] {
            assert_eq!(Protocol::from_u32(p as u32), Some(p));
        }
        assert_eq!(Protocol::from_u32(0), None);
    }
}
