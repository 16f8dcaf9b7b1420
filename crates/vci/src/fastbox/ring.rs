//! The fast-box ring: its slots, the sequence words that publish them and
//! the receiver's credit that hands them back (the protocol is described in
//! the parent module).
//!
//! This file reaches atomics, the payload cells and its ring size only
//! through its parent (`super::sync`, `super::FB_SLOTS`), so that the loom
//! models in `tests/loom.rs` can compile it a second time against loom's
//! types and a smaller ring.

use super::sync::{AtomicU64, Ordering, UnsafeCell};
use super::FB_SLOTS;

/// Slots past the one being taken whose first line the receiver asks
/// for in advance (see docs/performance.md, "Fast-box slots").
const FB_READ_AHEAD: u64 = 2;
/// Cache lines per slot.
pub const FB_LINES: usize = 5;
/// Bytes of a slot before its payload: the sequence word and the header.
pub(super) const FB_HEAD: usize = 24;
/// Largest payload a slot carries (every immediate message of the default
/// configuration fits).
pub const FB_PAYLOAD: usize = FB_LINES * 64 - FB_HEAD;
/// Payload bytes in a slot's first line.
pub const FB_FIRST_LINE: usize = 64 - FB_HEAD;

/// A slot's kind: a payload.
pub(crate) const KIND_PLAIN: u32 = 0;
/// A slot's kind: a given block (its [`super::OwnedSlot`] record is the payload).
pub(crate) const KIND_OWNED: u32 = 1;
/// [`FbHead::kind`] bits that hold the kind; an owned slot keeps its
/// block's alignment (as a power of two) in the next byte and
/// [`OWNED_META3`].
pub(super) const KIND_MASK: u32 = 0xff;
pub(super) const ALIGN_SHIFT: u32 = 8;
/// [`FbHead::kind`] bit of an owned slot: the metadata's last word is not
/// zero and follows in the slot's second line.
pub(super) const OWNED_META3: u32 = 1 << 16;

/// A slot's header (written by the sender before it publishes the
/// sequence number, read by the receiver after).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FbHead {
    pub tag: i32,
    pub context: u32,
    /// The message's length: the payload's, or the given block's.
    pub len: u32,
    /// [`KIND_PLAIN`], or [`KIND_OWNED`] with the record's bits (see
    /// [`OwnedSlot::encode`]).
    pub kind: u32,
}

impl FbHead {
    /// Whether the slot carries a given block.
    pub(crate) fn is_owned(&self) -> bool {
        self.kind & KIND_MASK == KIND_OWNED
    }
}

/// Most bytes an owned slot's record takes: the address, the size and
/// the metadata's four words.
pub(crate) const OWNED_RECORD: usize = 48;

/// What a fast-box message puts into its slot after the header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SlotData<'a> {
    /// A plain payload, copied from the sender's buffer.
    Bytes(&'a [u8]),
    /// An owned record ([`super::OwnedSlot::encode`]): its first `n`
    /// words, each stored as it is (see docs/performance.md, "Store
    /// forwarding").
    Words(&'a [u64; OWNED_RECORD / 8], usize),
}

/// Payload bytes a [`Small`] keeps inline (an owned record, or a plain
/// payload this short); longer payloads go to the heap.
const SMALL_INLINE: usize = OWNED_RECORD;

/// A fast-box message copied out of its slot (what the unexpected list
/// keeps until a receive takes it). Short payloads and owned records stay
/// inline, so the list's entries stay small.
#[derive(Debug)]
pub(crate) struct Small {
    pub head: FbHead,
    data: SmallData,
}

#[derive(Debug)]
enum SmallData {
    /// The first [`Small::bytes`] bytes are the payload.
    Inline([u8; SMALL_INLINE]),
    Heap(Box<[u8]>),
}

impl Small {
    /// How many payload bytes the slot carried.
    pub(super) fn bytes(head: &FbHead) -> usize {
        match (head.is_owned(), head.kind & OWNED_META3 != 0) {
            (true, true) => OWNED_RECORD,
            (true, false) => OWNED_RECORD - 8,
            (false, _) => (head.len as usize).min(FB_PAYLOAD),
        }
    }

    /// The payload (plain) or the record's bytes (owned).
    pub(crate) fn data(&self) -> &[u8] {
        match &self.data {
            SmallData::Inline(b) => &b[..Small::bytes(&self.head)],
            SmallData::Heap(b) => b,
        }
    }
}

/// One slot: [`FB_LINES`] cache lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct FbSlot {
    /// The sequence number of the message in the slot (0: never used).
    pub(super) seq: AtomicU64,
    pub(super) head: UnsafeCell<FbHead>,
    pub(super) data: UnsafeCell<[u8; FB_PAYLOAD]>,
}

impl FbSlot {
    /// An empty slot (what all-zero bytes are).
    fn new() -> FbSlot {
        FbSlot {
            seq: AtomicU64::new(0),
            head: UnsafeCell::new(FbHead {
                tag: 0,
                context: 0,
                len: 0,
                kind: KIND_PLAIN,
            }),
            data: UnsafeCell::new([0; FB_PAYLOAD]),
        }
    }
}

/// The ring a receiver keeps for one sender, and the receiver's credit.
#[repr(C)]
#[derive(Debug)]
pub struct FbPair {
    slots: [FbSlot; FB_SLOTS],
    /// The highest sequence number the receiver has consumed (its own
    /// line: written by the receiver, read by the sender now and then).
    consumed: Consumed,
}

#[repr(C, align(64))]
#[derive(Debug)]
struct Consumed(AtomicU64);

// SAFETY: the slot headers and payloads are written only by the sender
// that holds the lane lock and has credit for the slot, and read only by
// the receiver after it saw the slot's sequence word (Acquire) and before it
// publishes its credit (Release): the accesses never overlap (see the
// module docs).
unsafe impl Sync for FbPair {}

/// The sender's state for one destination VCI, under its lane lock.
#[derive(Debug)]
pub(crate) struct LaneState {
    /// The next sequence number (the first message is 1).
    pub next: u64,
    /// The receiver's credit as last read.
    credit: u64,
    /// Plain messages sent through the fast box (a statistic).
    pub fastbox_sent: u64,
    /// Given blocks sent through the fast box (a statistic).
    pub owned_sent: u64,
    /// Messages queued as envelopes, by protocol (`Protocol as usize - 1`;
    /// a statistic).
    pub queued: [u64; 5],
    /// Synchronous sends among them (a statistic).
    pub synchronous: u64,
}

impl LaneState {
    /// A lane that has sent nothing (the first message is number 1) and
    /// knows of no credit.
    pub(crate) fn new() -> LaneState {
        LaneState {
            next: 1,
            credit: 0,
            fastbox_sent: 0,
            owned_sent: 0,
            queued: [0; 5],
            synchronous: 0,
        }
    }
}

impl FbPair {
    /// A ring with every slot empty and no credit used: what all-zero bytes
    /// are, which is how the engine creates rings in the node heap. Built
    /// field by field where zeroed memory is not an option (the loom models
    /// in `tests/loom.rs`).
    #[allow(dead_code)]
    pub(crate) fn new() -> FbPair {
        FbPair {
            slots: std::array::from_fn(|_| FbSlot::new()),
            consumed: Consumed(AtomicU64::new(0)),
        }
    }

    pub(super) fn slot(&self, seq: u64) -> &FbSlot {
        &self.slots[(seq % FB_SLOTS as u64) as usize]
    }

    /// Writes message `lane.next` — header `head`, then `data` (a payload
    /// of at most [`FB_PAYLOAD`] bytes, or an owned record) — into its slot
    /// if the receiver has consumed the slot's previous tenant; returns
    /// whether it did (and then advances `lane.next`).
    // Always inlined: see docs/performance.md, "Store forwarding".
    #[inline(always)]
    pub(crate) fn try_send(&self, lane: &mut LaneState, head: FbHead, data: SlotData<'_>) -> bool {
        let seq = lane.next;
        if seq > lane.credit + FB_SLOTS as u64 {
            // SYNC POINT: Acquire pairs with the receiver's Release store in
            // `consumed`: its reads of the slot's previous tenant are done
            // before we overwrite the slot.
            lane.credit = self.consumed.0.load(Ordering::Acquire);
            if seq > lane.credit + FB_SLOTS as u64 {
                return false;
            }
        }
        let slot = self.slot(seq);
        // SAFETY: we hold the lane lock (the only writer for this pair) and
        // have credit: the receiver finished reading this slot and will not
        // read it again before we publish `seq` below. The payload is not
        // the slot, and fits it (at most FB_PAYLOAD bytes; a record is at
        // most OWNED_RECORD <= FB_PAYLOAD); the payload starts FB_HEAD = 24
        // bytes into a 64-aligned slot, so its words are aligned. Payload
        // bytes past what we write keep whatever they held: nobody reads
        // them.
        //
        // The first line (header, payload head, then `seq` below) is
        // written last, its stores back to back: see
        // docs/performance.md, "Fast-box slots".
        unsafe {
            let dst = slot.data.get().cast::<u8>();
            match data {
                SlotData::Bytes(bytes) => {
                    debug_assert!(bytes.len() <= FB_PAYLOAD);
                    let n = bytes.len().min(FB_PAYLOAD);
                    if n > FB_FIRST_LINE {
                        let (src, to) = (bytes.as_ptr().add(FB_FIRST_LINE), dst.add(FB_FIRST_LINE));
                        match n - FB_FIRST_LINE {
                            rest @ ..=64 => copy_small(src, to, rest),
                            rest => std::ptr::copy_nonoverlapping(src, to, rest),
                        }
                    }
                    slot.head.get().write(head);
                    copy_small(bytes.as_ptr(), dst, n.min(FB_FIRST_LINE));
                }
                SlotData::Words(w, n) => {
                    debug_assert!(n == OWNED_RECORD / 8 - 1 || n == OWNED_RECORD / 8);
                    // One store a word, written out: a loop over `n`
                    // becomes a call to memcpy, which reads the words
                    // back wide. Word 5 is the one in the second line.
                    let dst = dst.cast::<u64>();
                    if n > 5 {
                        dst.add(5).write(w[5]);
                    }
                    slot.head.get().write(head);
                    dst.write(w[0]);
                    dst.add(1).write(w[1]);
                    dst.add(2).write(w[2]);
                    dst.add(3).write(w[3]);
                    dst.add(4).write(w[4]);
                }
            }
        }
        // SYNC POINT: Release pairs with the receiver's Acquire load in
        // `head`/`take`: the header and payload are visible when the
        // sequence number is.
        slot.seq.store(seq, Ordering::Release);
        lane.next = seq + 1;
        if seq - lane.credit == FB_SLOTS as u64 / 2 {
            // Half the credit is used: refresh it now, after the message
            // is on its way, rather than on a later send's path.
            // SYNC POINT: Acquire, as above.
            lane.credit = self.consumed.0.load(Ordering::Acquire);
        }
        true
    }

    /// The header of message `seq` if it is in its slot (the receiver,
    /// under its VCI lock, with `seq` the next number it expects). The
    /// message stays there until [`FbPair::take`] or
    /// [`FbPair::take_into`].
    #[inline]
    pub(crate) fn head(&self, seq: u64) -> Option<FbHead> {
        let slot = self.slot(seq);
        // SYNC POINT: Acquire pairs with the Release store in `try_send`:
        // the header and payload written before it are visible.
        if slot.seq.load(Ordering::Acquire) != seq {
            return None;
        }
        // SAFETY: the sender published `seq` (Acquire above) and will not
        // write the slot again before we publish our credit.
        let head = unsafe { slot.head.get().read() };
        // The next messages' first lines, and this one's payload lines past
        // the first: see docs/performance.md, "Fast-box slots" (reading
        // ahead).
        for ahead in 1..=FB_READ_AHEAD {
            prefetch_for_read((self.slot(seq + ahead) as *const FbSlot).cast::<u8>());
        }
        let n = Small::bytes(&head);
        if n > FB_FIRST_LINE {
            let base = (slot as *const FbSlot).cast::<u8>();
            for line in 1..(FB_HEAD + n).div_ceil(64) {
                prefetch_for_read(base.wrapping_add(64 * line));
            }
        }
        Some(head)
    }

    /// Takes message `seq`, whose header [`FbPair::head`] returned: copies
    /// it out of the slot and hands the slot back to the sender.
    pub(crate) fn take(&self, seq: u64, head: FbHead) -> Small {
        let src = self.slot(seq).data.get().cast::<u8>();
        let n = Small::bytes(&head);
        let data = if n <= SMALL_INLINE {
            let mut b = [0u8; SMALL_INLINE];
            // SAFETY: as in `head` (the caller saw `seq` there); `n` fits
            // both; the copy is distinct from the slot.
            unsafe { copy_slot_payload(src, b.as_mut_ptr(), n) };
            SmallData::Inline(b)
        } else {
            // SAFETY: as above; `n <= FB_PAYLOAD` (`Small::bytes`).
            SmallData::Heap(unsafe { std::slice::from_raw_parts(src, n) }.into())
        };
        self.consumed(seq);
        Small { head, data }
    }

    /// Takes plain message `seq`, whose header [`FbPair::head`] returned,
    /// straight into `buf`: its first `n` bytes (at most the payload's
    /// length) are copied, and the slot goes back to the sender.
    ///
    /// # Safety
    ///
    /// `buf` is valid for writes of `n` bytes and is not a slot.
    #[inline(always)]
    pub(crate) unsafe fn take_into(&self, seq: u64, head: FbHead, buf: *mut u8, n: usize) {
        debug_assert!(head.kind == KIND_PLAIN && n <= head.len as usize);
        let slot = self.slot(seq);
        // SAFETY: as in `head` for the slot; `n <= len <= FB_PAYLOAD`, and
        // `buf` holds `n` bytes (caller's contract).
        unsafe { copy_slot_payload(slot.data.get().cast::<u8>(), buf, n.min(FB_PAYLOAD)) };
        self.consumed(seq);
    }

    /// Whether message `seq` seems to be in its slot (a lock-free hint for
    /// waiters; [`FbPair::head`] is what looks).
    pub(crate) fn ready(&self, seq: u64) -> bool {
        // Relaxed: a hint only; `head` reads the word again with Acquire.
        self.slot(seq).seq.load(Ordering::Relaxed) == seq
    }

    /// Publishes that every message up to `seq` was consumed.
    pub(crate) fn consumed(&self, seq: u64) {
        // SYNC POINT: Release pairs with the Acquire loads in `try_send`:
        // our reads of the slots up to `seq` happen before the sender
        // reuses them.
        self.consumed.0.store(seq, Ordering::Release);
    }
}

/// Copies `n` bytes out of a slot's payload (`src`, which starts
/// [`FB_HEAD`] bytes into the slot's first line): inline moves up to 64
/// bytes past the first line's part, `memcpy` beyond; a payload that runs
/// from the first line into the second is copied in two parts, so that no
/// move straddles the two lines (see docs/performance.md, "Fast-box
/// slots").
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, and the two
/// ranges do not overlap.
#[inline(always)]
pub(super) unsafe fn copy_slot_payload(src: *const u8, dst: *mut u8, n: usize) {
    if n <= FB_FIRST_LINE {
        // SAFETY: the caller's contract, with `n <= 64`.
        unsafe { copy_small(src, dst, n) }
    } else if n <= FB_FIRST_LINE + 64 {
        // SAFETY: the caller's contract; both parts lie in the first `n`
        // bytes, the second (at most 64 bytes) after the first.
        unsafe {
            copy_small(src, dst, FB_FIRST_LINE);
            copy_small(
                src.add(FB_FIRST_LINE),
                dst.add(FB_FIRST_LINE),
                n - FB_FIRST_LINE,
            );
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }
}

/// Starts moving the cache line at `p` into this core's cache (a hint: it
/// never faults, whatever `p` is).
#[inline(always)]
fn prefetch_for_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch changes no register, flag or memory and never
    // faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Copies `n <= 64` bytes from `src` to `dst` with a few unaligned moves
/// (two that may overlap cover any length in a power-of-two range) rather
/// than a call to `memcpy`.
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, and the two
/// ranges do not overlap.
#[inline(always)]
pub(super) unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!(n <= 64);
    /// Copies `N` bytes at offset 0 and `N` bytes ending at `n`
    /// (`N <= n <= 2N`).
    ///
    /// # Safety
    ///
    /// As for `copy_small`, with `N <= n`.
    #[inline(always)]
    unsafe fn pair<const N: usize>(src: *const u8, dst: *mut u8, n: usize) {
        // SAFETY: `N <= n`, so both N-byte ranges lie in the first `n` bytes
        // of each buffer (caller's contract); unaligned reads and writes of
        // byte arrays.
        unsafe {
            let head = src.cast::<[u8; N]>().read_unaligned();
            let tail = src.add(n - N).cast::<[u8; N]>().read_unaligned();
            dst.cast::<[u8; N]>().write_unaligned(head);
            dst.add(n - N).cast::<[u8; N]>().write_unaligned(tail);
        }
    }
    // SAFETY: each arm meets `pair`'s `N <= n` (and `n <= 2N`), or, for
    // 1–3 bytes, touches only indices below `n`; the caller's contract
    // covers the rest.
    unsafe {
        match n {
            32.. => pair::<32>(src, dst, n),
            16.. => pair::<16>(src, dst, n),
            8.. => pair::<8>(src, dst, n),
            4.. => pair::<4>(src, dst, n),
            0 => {}
            _ => {
                *dst = *src;
                *dst.add(n / 2) = *src.add(n / 2);
                *dst.add(n - 1) = *src.add(n - 1);
            }
        }
    }
}
