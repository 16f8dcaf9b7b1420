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
/// Bytes of the sequence word, which only a message's first slot writes.
const FB_SEQ: usize = 8;
/// Payload bytes a continuation slot carries: all of it but its sequence
/// word (its header bytes included).
pub const FB_CONT: usize = FB_LINES * 64 - FB_SEQ;
/// Most consecutive slots one plain message takes (the ring's size if it
/// is smaller, as in the loom models). Why four: docs/performance.md,
/// "Fast-box slots".
pub const FB_SPAN_SLOTS: usize = if FB_SLOTS < 4 { FB_SLOTS } else { 4 };
/// Largest plain payload the ring carries: a first slot's and the
/// continuation slots' of the longest span.
pub const FB_SPAN_MAX: usize = FB_PAYLOAD + (FB_SPAN_SLOTS - 1) * FB_CONT;

/// How many consecutive slots a plain payload of `len` bytes takes.
#[inline(always)]
pub(crate) fn span(len: usize) -> u64 {
    if len <= FB_PAYLOAD {
        1
    } else {
        1 + (len - FB_PAYLOAD).div_ceil(FB_CONT) as u64
    }
}

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

    /// How many sequence numbers (consecutive slots) the message takes:
    /// one for an owned record, [`span`] of the length for a payload.
    #[inline(always)]
    pub(crate) fn slots(&self) -> u64 {
        if self.len as usize <= FB_PAYLOAD || self.is_owned() {
            1
        } else {
            span(self.len as usize)
        }
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
            (false, _) => (head.len as usize).min(FB_SPAN_MAX),
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

/// Bytes of a slot's header, which a continuation slot fills with payload.
const HEAD_BYTES: usize = std::mem::size_of::<FbHead>();
const _: () = assert!(FB_SEQ + HEAD_BYTES == FB_HEAD);

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
    /// Writes `n <= FB_CONT` payload bytes from `src` as a continuation
    /// slot carries them: into the header's bytes, then the data's (never
    /// into the sequence word).
    ///
    /// # Safety
    ///
    /// The caller may write the slot (the lane lock and credit for it);
    /// `src` is valid for reads of `n` bytes and is not the slot.
    #[inline(always)]
    unsafe fn write_cont(&self, src: *const u8, n: usize) {
        debug_assert!(n <= FB_CONT);
        let h = n.min(HEAD_BYTES);
        // SAFETY: the caller's contract; the header cell holds HEAD_BYTES
        // bytes, any of which make a valid header, and the data cell the
        // remaining `n - h <= FB_PAYLOAD`.
        unsafe {
            copy_small(src, self.head.get().cast::<u8>(), h);
            if n > h {
                std::ptr::copy_nonoverlapping(src.add(h), self.data.get().cast::<u8>(), n - h);
            }
        }
    }

    /// Reads `n <= FB_CONT` payload bytes of a continuation slot into
    /// `dst` (the order [`FbSlot::write_cont`] wrote them in).
    ///
    /// # Safety
    ///
    /// The caller may read the slot (its message's first slot was
    /// published, Acquire, and the credit not yet handed back); `dst` is
    /// valid for writes of `n` bytes and is not the slot.
    #[inline(always)]
    unsafe fn read_cont(&self, dst: *mut u8, n: usize) {
        debug_assert!(n <= FB_CONT);
        let h = n.min(HEAD_BYTES);
        // SAFETY: as in `write_cont`, reading.
        unsafe {
            copy_small(self.head.get().cast::<u8>(), dst, h);
            if n > h {
                std::ptr::copy_nonoverlapping(self.data.get().cast::<u8>(), dst.add(h), n - h);
            }
        }
    }

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

    /// Whether the sender may write slots up to number `last`: the
    /// receiver has consumed the previous tenant of each (as last read,
    /// or read again now when that is not enough).
    #[inline(always)]
    fn credit_for(&self, lane: &mut LaneState, last: u64) -> bool {
        if last > lane.credit + FB_SLOTS as u64 {
            // SYNC POINT: Acquire pairs with the receiver's Release store
            // in `consumed`: its reads of the slots' previous tenants are
            // done before we overwrite them.
            lane.credit = self.consumed.0.load(Ordering::Acquire);
            return last <= lane.credit + FB_SLOTS as u64;
        }
        true
    }

    /// Writes message `lane.next` — header `head`, then `data` (a payload
    /// of at most [`FB_PAYLOAD`] bytes, or an owned record) — into its slot
    /// if the receiver has consumed the slot's previous tenant; returns
    /// whether it did (and then advances `lane.next`).
    // Always inlined: see docs/performance.md, "Store forwarding".
    #[inline(always)]
    pub(crate) fn try_send(&self, lane: &mut LaneState, head: FbHead, data: SlotData<'_>) -> bool {
        let seq = lane.next;
        if !self.credit_for(lane, seq) {
            return false;
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

    /// Writes plain message `lane.next`, whose payload `bytes` is longer
    /// than [`FB_PAYLOAD`] and at most [`FB_SPAN_MAX`] bytes, into
    /// [`span`]`(len)` consecutive slots if the receiver has consumed the
    /// last one's previous tenant; returns whether it did (and then
    /// advances `lane.next` past them). The header goes into the first
    /// slot, the payload through its data and on through the continuation
    /// slots, whose sequence words stay as they were (see the parent
    /// module). Out of line: the one-slot send stays short.
    #[cold]
    #[inline(never)]
    pub(crate) fn try_send_span(&self, lane: &mut LaneState, head: FbHead, bytes: &[u8]) -> bool {
        let n = bytes.len();
        debug_assert!(head.kind == KIND_PLAIN && head.len as usize == n);
        if n <= FB_PAYLOAD || n > FB_SPAN_MAX {
            return false;
        }
        let seq = lane.next;
        let last = seq + span(n) - 1;
        if !self.credit_for(lane, last) {
            return false;
        }
        let slot = self.slot(seq);
        // SAFETY: as in `try_send`, for each of the slots `seq..=last` (we
        // have credit up to `last`); `bytes` holds `n` bytes, of which the
        // first slot takes FB_PAYLOAD and each continuation slot at most
        // FB_CONT, `n <= FB_SPAN_MAX` bytes in `span(n)` slots.
        //
        // The continuation slots and the first slot's lines past its
        // first are written first, the first line (header, payload head)
        // last and then `seq`, as in `try_send`.
        unsafe {
            let src = bytes.as_ptr();
            let mut off = FB_PAYLOAD;
            let mut next = seq + 1;
            while off < n {
                let piece = (n - off).min(FB_CONT);
                self.slot(next).write_cont(src.add(off), piece);
                off += piece;
                next += 1;
            }
            let dst = slot.data.get().cast::<u8>();
            std::ptr::copy_nonoverlapping(
                src.add(FB_FIRST_LINE),
                dst.add(FB_FIRST_LINE),
                FB_PAYLOAD - FB_FIRST_LINE,
            );
            slot.head.get().write(head);
            copy_small(src, dst, FB_FIRST_LINE);
        }
        // SYNC POINT: Release pairs with the receiver's Acquire load in
        // `head`: the header and every slot's payload are visible when the
        // sequence number is.
        slot.seq.store(seq, Ordering::Release);
        lane.next = last + 1;
        let half = lane.credit + FB_SLOTS as u64 / 2;
        if seq <= half && half <= last {
            // Half the credit is used, as in `try_send`.
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
        // This slot's lines only: a longer message's continuation slots
        // are read in order as they are copied.
        let n = Small::bytes(&head).min(FB_PAYLOAD);
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
        } else if n <= FB_PAYLOAD {
            // SAFETY: as above; `n <= FB_PAYLOAD`: the payload lies in
            // this slot.
            SmallData::Heap(unsafe { std::slice::from_raw_parts(src, n) }.into())
        } else {
            let mut b = vec![0u8; n].into_boxed_slice();
            // SAFETY: as above for the message's slots; `b` holds `n`
            // bytes, `n <= FB_SPAN_MAX` (`Small::bytes`) and at most the
            // payload's length.
            unsafe { self.copy_span(seq, b.as_mut_ptr(), n) };
            SmallData::Heap(b)
        };
        self.consumed(seq + head.slots() - 1);
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
        if head.len as usize > FB_PAYLOAD {
            // SAFETY: the caller's contract.
            return unsafe { self.take_span_into(seq, head, buf, n) };
        }
        let slot = self.slot(seq);
        // SAFETY: as in `head` for the slot; `n <= len <= FB_PAYLOAD`, and
        // `buf` holds `n` bytes (caller's contract).
        unsafe { copy_slot_payload(slot.data.get().cast::<u8>(), buf, n.min(FB_PAYLOAD)) };
        self.consumed(seq);
    }

    /// [`FbPair::take_into`] for a payload that spans several slots (out
    /// of line: the one-slot receive stays short).
    ///
    /// # Safety
    ///
    /// As for [`FbPair::take_into`].
    #[cold]
    #[inline(never)]
    unsafe fn take_span_into(&self, seq: u64, head: FbHead, buf: *mut u8, n: usize) {
        // SAFETY: the caller's contract; `n <= len` (at most FB_SPAN_MAX,
        // or the sender would not have used the slots).
        unsafe { self.copy_span(seq, buf, n.min(head.len as usize).min(FB_SPAN_MAX)) };
        self.consumed(seq + head.slots() - 1);
    }

    /// Copies the first `n` bytes of the payload of message `seq`, which
    /// starts in its slot and runs on through the continuation slots
    /// `seq + 1, …` (wrapping around the ring's end), to `dst`.
    ///
    /// # Safety
    ///
    /// The sender published `seq` (the caller saw it with Acquire) and the
    /// payload holds at least `n <= FB_SPAN_MAX` bytes; `dst` is valid for
    /// writes of `n` bytes and is not a slot.
    #[inline(never)]
    unsafe fn copy_span(&self, seq: u64, dst: *mut u8, n: usize) {
        debug_assert!(n <= FB_SPAN_MAX);
        let first = n.min(FB_PAYLOAD);
        // SAFETY: as in `head` for slot `seq`; `first <= FB_PAYLOAD`.
        unsafe { copy_slot_payload(self.slot(seq).data.get().cast::<u8>(), dst, first) };
        let mut off = first;
        let mut next = seq + 1;
        while off < n {
            let piece = (n - off).min(FB_CONT);
            // SAFETY: slot `next` is one of the message's continuation
            // slots (`off < n <= len`), written before `seq` was published
            // and not written again before we publish our credit; `dst`
            // holds `n >= off + piece` bytes.
            unsafe { self.slot(next).read_cont(dst.add(off), piece) };
            off += piece;
            next += 1;
        }
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
