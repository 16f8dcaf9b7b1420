//! Fast boxes: per-pair rings of slots for small messages.
//!
//! A message of at most [`FB_PAYLOAD`] bytes (not synchronous), or a given
//! heap block (ownership passing), from rank `s` to a VCI of rank `r` skips
//! the envelope and the queue: the sender writes it into one slot of the
//! ring that `r` keeps for `s`, and the receiver finds it there. Nothing is
//! allocated or freed, and the receiver polls a line that stays in its
//! cache until a sender writes it — the technique MPI libraries'
//! shared-memory transports use for small messages (MPICH's "fast
//! boxes").
//!
//! **Slots.** A slot is [`FB_LINES`] cache lines: the first holds the
//! sequence word, the header (tag, context, length, kind) and the first 40
//! payload bytes, so a message of up to 40 bytes costs the receiver one
//! line; the others hold the rest of the payload. A *plain* slot carries
//! the payload; an *owned* slot carries the address, layout and metadata of
//! a block the sender gave (see [`crate::owned`]), whatever its size.
//!
//! **Order.** Every message from `s` to the VCI — in a slot or an envelope
//! — carries a per-pair sequence number, assigned under the sender's lane
//! lock (`Lane`) in the order the sender hands messages over. The
//! receiver takes them strictly in sequence: slot `seq % FB_SLOTS` holds
//! message `seq` when its `seq` word says so; an envelope with a later
//! number first makes it take the slots before it. They are visible: the
//! sender published them (Release) before it took the lane lock to queue
//! the envelope (lock hand-over), and the receiver's pop of the envelope
//! synchronises with that push.
//!
//! **Credit.** The sender may write message `seq` into its slot only once
//! the receiver has consumed message `seq - FB_SLOTS`, the slot's previous
//! tenant: the receiver publishes the highest number it consumed (Release,
//! after reading the slot), and the sender reads it (Acquire) when half its
//! credit is used, right after a send, and again when the credit it knows
//! of runs out. Without credit the message goes through the queue, so a
//! sender never waits for a slot.
//!
//! # Example
//! ```
//! use vci::fastbox::{FbPair, FB_LINES, FB_PAYLOAD, FB_SLOTS};
//!
//! // A ring is its slots and one line of credit.
//! assert_eq!(std::mem::size_of::<FbPair>(), 64 * (FB_SLOTS * FB_LINES + 1));
//! // Every immediate message of the default configuration fits a slot.
//! assert!(FB_PAYLOAD >= 256);
//! ```

use crate::solo::{Entry, SOLO};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Slots in one pair's ring: enough for the 64-message windows of the
/// OSU bandwidth loops, and the sender reads the receiver's credit line
/// (a cache miss) only once per half ring.
pub const FB_SLOTS: usize = 64;
/// Slots past the one being taken whose first line the receiver asks
/// for in advance.
const FB_READ_AHEAD: u64 = 2;
/// Cache lines per slot.
pub const FB_LINES: usize = 5;
/// Bytes of a slot before its payload: the sequence word and the header.
const FB_HEAD: usize = 24;
/// Largest payload a slot carries (every immediate message of the default
/// configuration fits).
pub const FB_PAYLOAD: usize = FB_LINES * 64 - FB_HEAD;
/// Payload bytes in a slot's first line.
pub const FB_FIRST_LINE: usize = 64 - FB_HEAD;

/// A slot's kind: a payload.
pub(crate) const KIND_PLAIN: u32 = 0;
/// A slot's kind: a given block (its [`OwnedSlot`] record is the payload).
pub(crate) const KIND_OWNED: u32 = 1;
/// [`FbHead::kind`] bits that hold the kind; an owned slot keeps its
/// block's alignment (as a power of two) in the next byte and
/// [`OWNED_META3`].
const KIND_MASK: u32 = 0xff;
const ALIGN_SHIFT: u32 = 8;
/// [`FbHead::kind`] bit of an owned slot: the metadata's last word is not
/// zero and follows in the slot's second line.
const OWNED_META3: u32 = 1 << 16;

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

/// The record an owned slot carries: the given block and what travels
/// with it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnedSlot {
    /// The block's address in the node heap (0 for an empty block).
    pub addr: u64,
    /// Its allocation layout and metadata.
    pub info: crate::envelope::OwnedInfo,
}

/// Most bytes an owned slot's record takes: the address, the size and
/// the metadata's four words.
pub(crate) const OWNED_RECORD: usize = 48;
const _: () = assert!(OWNED_RECORD <= FB_PAYLOAD);
/// What of a record fits the slot's first line: all but the metadata's
/// last word (which the layers above leave zero).
const _: () = assert!(OWNED_RECORD - 8 == FB_FIRST_LINE);

impl OwnedSlot {
    /// The record as header kind bits and payload words (the first `n` of
    /// the array): the block's address, its size and the first three
    /// metadata words fill the slot's first line, the alignment goes into
    /// the kind bits, and the metadata's last word, unless it is zero,
    /// into the second line. So a given block usually costs the receiver
    /// one line, as a tiny message does.
    #[inline(always)]
    pub(crate) fn encode(&self) -> (u32, [u64; OWNED_RECORD / 8], usize) {
        let m = self.info.meta;
        let words = [self.addr, self.info.size, m[0], m[1], m[2], m[3]];
        debug_assert!(self.info.align.is_power_of_two());
        let mut kind = KIND_OWNED | (self.info.align.trailing_zeros() << ALIGN_SHIFT);
        let n = if m[3] == 0 {
            OWNED_RECORD / 8 - 1
        } else {
            kind |= OWNED_META3;
            OWNED_RECORD / 8
        };
        (kind, words, n)
    }

    /// Decodes what [`OwnedSlot::encode`] made (`b` holds its bytes).
    pub(crate) fn decode(kind: u32, b: &[u8]) -> OwnedSlot {
        let word = |i: usize| {
            b.get(8 * i..8 * i + 8)
                .map_or(0, |c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        };
        OwnedSlot::from_words(kind, std::array::from_fn(word))
    }

    /// The record from header kind bits and the record's words (the last
    /// is read only if the kind says it was written).
    #[inline(always)]
    fn from_words(kind: u32, w: [u64; OWNED_RECORD / 8]) -> OwnedSlot {
        let m3 = if kind & OWNED_META3 != 0 { w[5] } else { 0 };
        OwnedSlot {
            addr: w[0],
            info: crate::envelope::OwnedInfo {
                size: w[1],
                align: 1 << ((kind >> ALIGN_SHIFT) & KIND_MASK),
                meta: [w[2], w[3], w[4], m3],
            },
        }
    }
}

/// What a fast-box message puts into its slot after the header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SlotData<'a> {
    /// A plain payload, copied from the sender's buffer.
    Bytes(&'a [u8]),
    /// An owned record ([`OwnedSlot::encode`]): its first `n` words, each
    /// stored as it is. (Copied through a byte buffer, the record was
    /// read back with wide loads right after narrow stores had filled the
    /// buffer, which store forwarding cannot serve: a stall on every give,
    /// just before the message is published.)
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
    fn bytes(head: &FbHead) -> usize {
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

    /// The given block's record, for an owned message.
    pub(crate) fn owned(&self) -> Option<OwnedSlot> {
        self.head
            .is_owned()
            .then(|| OwnedSlot::decode(self.head.kind, self.data()))
    }
}

/// One slot: [`FB_LINES`] cache lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct FbSlot {
    /// The sequence number of the message in the slot (0: never used).
    seq: AtomicU64,
    head: UnsafeCell<FbHead>,
    data: UnsafeCell<[u8; FB_PAYLOAD]>,
}

const _: () = assert!(std::mem::size_of::<FbSlot>() == FB_LINES * 64);
const _: () = assert!(std::mem::offset_of!(FbSlot, data) == FB_HEAD);
// A slot's payload words are aligned (an owned record is stored a word at
// a time).
const _: () = assert!(FB_HEAD % 8 == 0);

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

/// A sender's lane to one destination VCI: its lock orders the messages
/// to that VCI (fast box or queue) and guards the sequence numbers.
///
/// A spin lock released by a plain store: its holder only numbers a
/// message and writes a slot or links an envelope, so waiting is short,
/// and the release costs no locked instruction (which would stall until the
/// slot's cache line arrived). In solo mode (see `solo`) the
/// owner thread takes it without any locked instruction at all.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Lane {
    locked: AtomicBool,
    /// The destination's ring for this process (`None`: it has no fast
    /// boxes).
    ring: Option<&'static FbPair>,
    state: UnsafeCell<LaneState>,
}

// SAFETY: `state` is only reached through a `LaneGuard`, which exists for
// one thread at a time (the `locked` flag, or a solo section: see
// `crate::solo`).
unsafe impl Sync for Lane {}

/// The held lane lock.
pub(crate) struct LaneGuard<'a> {
    lane: &'a Lane,
    /// Entered in solo mode (the spin lock untouched).
    solo: bool,
}

impl Lane {
    pub(crate) fn new(ring: Option<&'static FbPair>) -> Lane {
        Lane {
            locked: AtomicBool::new(false),
            ring,
            state: UnsafeCell::new(LaneState::new()),
        }
    }

    /// The destination's ring for this process, if it has fast boxes.
    pub(crate) fn ring(&self) -> Option<&'static FbPair> {
        self.ring
    }

    #[inline(always)]
    pub(crate) fn lock(&self) -> LaneGuard<'_> {
        match SOLO.enter() {
            Entry::Solo => LaneGuard {
                lane: self,
                solo: true,
            },
            Entry::Real => self.lock_real(),
        }
    }

    /// Takes the spin lock itself.
    #[inline]
    fn lock_real(&self) -> LaneGuard<'_> {
        let mut spins = 0u32;
        loop {
            // SYNC POINT: Acquire pairs with the Release store in
            // `LaneGuard::drop`: the previous holder's updates of the state
            // (and its slot writes and queue pushes) are visible.
            if !self.locked.swap(true, Ordering::Acquire) {
                return LaneGuard {
                    lane: self,
                    solo: false,
                };
            }
            // Relaxed: a read-only wait for the flag to clear before the
            // next swap (the swap is what orders).
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 128 {
                    std::hint::spin_loop();
                } else {
                    // The holder may have been preempted (more ranks or
                    // threads than cores).
                    std::thread::yield_now();
                }
            }
        }
    }
}

impl std::ops::Deref for LaneGuard<'_> {
    type Target = LaneState;
    fn deref(&self) -> &LaneState {
        // SAFETY: we hold the lock: no other reference to the state exists.
        unsafe { &*self.lane.state.get() }
    }
}

impl std::ops::DerefMut for LaneGuard<'_> {
    fn deref_mut(&mut self) -> &mut LaneState {
        // SAFETY: as in `deref`, and `&mut self` makes this one unique.
        unsafe { &mut *self.lane.state.get() }
    }
}

impl Drop for LaneGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.solo {
            SOLO.leave();
        } else {
            // SYNC POINT: Release pairs with the Acquire swap in
            // `Lane::lock_real`.
            self.lane.locked.store(false, Ordering::Release);
        }
    }
}

impl FbPair {
    fn slot(&self, seq: u64) -> &FbSlot {
        &self.slots[(seq % FB_SLOTS as u64) as usize]
    }

    /// Writes message `lane.next` — header `head`, then `data` (a payload
    /// of at most [`FB_PAYLOAD`] bytes, or an owned record) — into its slot
    /// if the receiver has consumed the slot's previous tenant; returns
    /// whether it did (and then advances `lane.next`). Inlined, so that
    /// the caller's header and record go from registers into the slot
    /// rather than through memory the copy reads back wide.
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
        // written last, its stores back to back: the receiver polls that
        // line, and a store to it early on lets the receiver take the line
        // back before `seq` is stored, which then waits for the line once
        // more. (The C ping-pong at 128 B: 0.133-0.142 -> 0.111-0.126 us.)
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
        // The next messages' first lines, which a stream of messages has
        // most likely filled already: their transfers overlap this one's
        // handling instead of each waiting for the next look.
        for ahead in 1..=FB_READ_AHEAD {
            prefetch_for_read((self.slot(seq + ahead) as *const FbSlot).cast::<u8>());
        }
        // The payload's lines past the first (which we just read) are in
        // the sender's cache: ask for them all now, so that they travel
        // together rather than one after another as the copy reaches them.
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

    /// Takes owned message `seq`, whose header [`FbPair::head`] returned:
    /// its record, and the slot goes back to the sender.
    pub(crate) fn take_owned(&self, seq: u64, head: FbHead) -> OwnedSlot {
        debug_assert!(head.is_owned());
        let src = self.slot(seq).data.get().cast::<u8>();
        let n = Small::bytes(&head) / 8;
        // The record's words, straight from the slot (the last one only if
        // the sender wrote it).
        let rec = OwnedSlot::from_words(
            head.kind,
            std::array::from_fn(|i| {
                if i < n {
                    // SAFETY: as in `head` (the caller saw `seq` there); word
                    // `i < n <= OWNED_RECORD / 8` lies in the slot's payload.
                    unsafe { src.add(8 * i).cast::<u64>().read_unaligned() }
                } else {
                    0
                }
            }),
        );
        // The reads above come before the slot goes back (a Release store).
        self.consumed(seq);
        rec
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
/// [`FB_HEAD`] bytes into the slot's first line):
/// inline moves up to 64 bytes past the first line's part (where a call to
/// `memcpy` would cost more than the copy), `memcpy` beyond. A payload that
/// runs from the first line into the second is copied in two parts, so
/// that no move straddles the two lines (a straddling move needs both
/// lines at once, and the second is the one still on its way from the
/// other core).
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, and the two
/// ranges do not overlap.
#[inline(always)]
unsafe fn copy_slot_payload(src: *const u8, dst: *mut u8, n: usize) {
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
/// (two that may overlap cover any length in a power-of-two range), where
/// a call to `memcpy` would cost more than the copy itself.
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, and the two
/// ranges do not overlap.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::OwnedInfo;

    /// A ring as the receiver creates it: all zero.
    fn ring() -> Box<FbPair> {
        let layout = std::alloc::Layout::new::<FbPair>();
        // SAFETY: FbPair is all atomics and plain data, for which all-zero
        // bytes are valid (every slot empty, no credit used); the box frees
        // it with the same layout.
        unsafe { Box::from_raw(std::alloc::alloc_zeroed(layout).cast::<FbPair>()) }
    }

    fn plain(tag: i32, len: usize) -> FbHead {
        FbHead {
            tag,
            context: 3,
            len: len as u32,
            kind: KIND_PLAIN,
        }
    }

    #[test]
    fn owned_records_round_trip() {
        for meta in [[1, 2, 3, 0], [u64::MAX, 0, 7, 9]] {
            for align in [1u64, 8, 4096, 1 << 40] {
                let rec = OwnedSlot {
                    addr: 0x2000_0000_1000,
                    info: OwnedInfo {
                        size: 12345,
                        align,
                        meta,
                    },
                };
                let (kind, words, n) = rec.encode();
                let head = FbHead {
                    tag: 0,
                    context: 0,
                    len: 10,
                    kind,
                };
                assert!(head.is_owned());
                // The last metadata word costs a second line only when set.
                assert_eq!(
                    8 * n,
                    if meta[3] == 0 {
                        FB_FIRST_LINE
                    } else {
                        OWNED_RECORD
                    }
                );
                let bytes: Vec<u8> = words[..n].iter().flat_map(|w| w.to_ne_bytes()).collect();
                assert_eq!(OwnedSlot::decode(kind, &bytes), rec);
            }
        }
    }

    #[test]
    fn slots_in_order_with_credit() {
        let fb = ring();
        let mut lane = LaneState::new();
        // A full ring takes FB_SLOTS messages, then refuses.
        for i in 0..FB_SLOTS {
            let payload = [i as u8; 300];
            let len = i % (FB_PAYLOAD + 1);
            assert!(fb.try_send(
                &mut lane,
                plain(i as i32, len),
                SlotData::Bytes(&payload[..len])
            ));
        }
        assert!(!fb.try_send(&mut lane, plain(0, 1), SlotData::Bytes(&[0])));
        assert_eq!(fb.head(FB_SLOTS as u64 + 1), None);
        for seq in 1..=FB_SLOTS as u64 {
            assert!(fb.ready(seq));
            let h = fb.head(seq).expect("sent");
            let i = seq as usize - 1;
            assert_eq!(h, plain(i as i32, i % (FB_PAYLOAD + 1)));
            if seq % 2 == 0 {
                let small = fb.take(seq, h);
                assert!(small.data().iter().all(|&b| b == i as u8));
                assert_eq!(small.data().len(), h.len as usize);
                assert!(small.owned().is_none());
            } else {
                let mut buf = [0u8; 300];
                // SAFETY: `buf` holds `len` bytes.
                unsafe { fb.take_into(seq, h, buf.as_mut_ptr(), h.len as usize) };
                assert!(buf[..h.len as usize].iter().all(|&b| b == i as u8));
            }
        }
        // Consumed: the ring has room again.
        assert!(fb.try_send(&mut lane, plain(7, 2), SlotData::Bytes(&[1, 2])));
        assert_eq!(fb.head(FB_SLOTS as u64 + 1), Some(plain(7, 2)));
    }

    #[test]
    fn every_length_arrives_whole() {
        // The sender writes a slot's lines out of order (the first line
        // last): every byte of every length lands where it belongs, taken
        // into a buffer and taken as a copy.
        let fb = ring();
        let mut lane = LaneState::new();
        for (seq, len) in (1..).zip(0..=FB_PAYLOAD) {
            let payload: Vec<u8> = (0..len).map(|k| (k * 7 + len) as u8).collect();
            assert!(fb.try_send(&mut lane, plain(1, len), SlotData::Bytes(&payload)));
            let h = fb.head(seq).expect("sent");
            if len % 2 == 0 {
                assert_eq!(fb.take(seq, h).data(), &payload[..]);
            } else {
                let mut buf = vec![0u8; len];
                // SAFETY: `buf` holds `len` bytes.
                unsafe { fb.take_into(seq, h, buf.as_mut_ptr(), len) };
                assert_eq!(buf, payload);
            }
        }
    }

    #[test]
    fn owned_slots() {
        let fb = ring();
        let mut lane = LaneState::new();
        let rec = OwnedSlot {
            addr: 0x1234_5678,
            info: OwnedInfo {
                size: 64,
                align: 16,
                meta: [5, 6, 7, 8],
            },
        };
        let (kind, words, n) = rec.encode();
        let head = FbHead {
            tag: 1,
            context: 2,
            len: 40,
            kind,
        };
        assert!(fb.try_send(&mut lane, head, SlotData::Words(&words, n)));
        assert!(fb.try_send(&mut lane, head, SlotData::Words(&words, n)));
        let h = fb.head(1).expect("sent");
        assert_eq!(fb.take_owned(1, h), rec);
        let h = fb.head(2).expect("sent");
        assert_eq!(fb.take(2, h).owned(), Some(rec));
    }

    #[test]
    fn copy_small_every_length() {
        let src: Vec<u8> = (1..=64).collect();
        for n in 0..=64 {
            let mut dst = [0u8; 66];
            // SAFETY: `src` holds 64 bytes, `dst` 66; distinct buffers.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr().add(1), n) };
            assert_eq!(dst[0], 0, "n = {n}");
            assert_eq!(&dst[1..=n], &src[..n], "n = {n}");
            assert!(dst[n + 1..].iter().all(|&b| b == 0), "n = {n}");
        }
    }

    #[test]
    fn copy_slot_payload_every_length() {
        let src: Vec<u8> = (0..FB_PAYLOAD).map(|i| (i % 251 + 1) as u8).collect();
        for n in 0..=FB_PAYLOAD {
            let mut dst = vec![0u8; FB_PAYLOAD + 2];
            // SAFETY: `src` holds FB_PAYLOAD bytes, `dst` two more; distinct
            // buffers.
            unsafe { copy_slot_payload(src.as_ptr(), dst.as_mut_ptr().add(1), n) };
            assert_eq!(dst[0], 0, "n = {n}");
            assert_eq!(&dst[1..=n], &src[..n], "n = {n}");
            assert!(dst[n + 1..].iter().all(|&b| b == 0), "n = {n}");
        }
    }
}
