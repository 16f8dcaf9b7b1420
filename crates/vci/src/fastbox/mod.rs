//! Fast boxes: per-pair rings of slots for small messages.
//!
//! A plain message of at most [`FB_SPAN_MAX`] bytes (not synchronous), or a
//! given heap block (ownership passing), from rank `s` to a VCI of rank `r`
//! skips the envelope and the queue: the sender writes it into one slot of
//! the ring that `r` keeps for `s` (a payload longer than [`FB_PAYLOAD`]
//! into up to [`FB_SPAN_SLOTS`] consecutive slots), and the receiver finds
//! it there. Nothing is
//! allocated or freed, and the receiver polls a line that stays in its
//! cache until a sender writes it — the technique MPI libraries'
//! shared-memory transports use for small messages (MPICH's "fast
//! boxes"). Why the slots are laid out and written as they are:
//! docs/performance.md, "Fast-box slots".
//!
//! **Slots.** A slot is [`FB_LINES`] cache lines: the first holds the
//! sequence word, the header (tag, context, length, kind) and the first 40
//! payload bytes; the others hold the rest of the payload. A *plain* slot carries
//! the payload; an *owned* slot carries the address, layout and metadata of
//! a block the sender gave (see [`crate::owned`]), whatever its size.
//!
//! **Spans.** A plain payload of `FB_PAYLOAD < len <= FB_SPAN_MAX` bytes
//! takes `k` consecutive sequence numbers `s..s+k-1` (`k` follows from the
//! length, which the header in slot `s` gives): it fills slot `s`'s
//! payload, then runs on through the *continuation* slots `s+1..s+k-1`,
//! [`FB_CONT`] bytes each — everything but the sequence word, the header's
//! bytes included — wrapping around the ring's end like any numbering.
//! A continuation slot's sequence word is never written: it keeps an older
//! start number, below any number the receiver will expect there, so
//! payload can never be taken for a message. The sender writes the
//! continuation slots first and slot `s`'s sequence word last, as for one
//! slot, and needs credit for `s+k-1`; the receiver, having seen `s`,
//! copies the pieces, expects `s+k` next and hands back all `k` slots at
//! once (it publishes `s+k-1`). The multi-slot code is out of line, so the
//! one-slot send and receive pay one length test each.
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
//! tenant (for a span, the last slot's): the receiver publishes the highest number it consumed (Release,
//! after reading the slot), and the sender reads it (Acquire) when half its
//! credit is used, right after a send, and again when the credit it knows
//! of runs out. Without credit the message goes through the queue (by the
//! protocol its size picks), so a sender never waits for a slot.
//!
//! **Files.** `ring.rs` holds the ring itself (slots, sequence words,
//! credit) and `lane_lock.rs` the lane's spin lock; both reach atomics,
//! cells and the ring size only through this module (`sync`, [`FB_SLOTS`]),
//! so that the loom models in `tests/loom.rs` compile them again against
//! loom. This file holds the owned-slot record, the lane and its guard.
//!
//! # Example
//! ```
//! use vci::fastbox::{FbPair, FB_CONT, FB_LINES, FB_PAYLOAD, FB_SLOTS, FB_SPAN_MAX};
//!
//! // A ring is its slots and one line of credit.
//! assert_eq!(std::mem::size_of::<FbPair>(), 64 * (FB_SLOTS * FB_LINES + 1));
//! // Every immediate message of the default configuration fits a slot.
//! assert!(FB_PAYLOAD >= 256);
//! // Four slots carry a kilobyte and more: the first slot's payload and
//! // three continuation slots' (all but their sequence words).
//! assert_eq!((FB_CONT, FB_SPAN_MAX), (FB_LINES * 64 - 8, FB_PAYLOAD + 3 * FB_CONT));
//! assert!(FB_SPAN_MAX >= 1024);
//! ```

mod lane_lock;
mod ring;

use crate::solo::{Entry, SOLO};
use lane_lock::SpinLock;
use std::cell::UnsafeCell;

pub(crate) use ring::{FbHead, LaneState, SlotData, Small, KIND_OWNED, KIND_PLAIN, OWNED_RECORD};
pub use ring::{
    FbPair, FbSlot, FB_CONT, FB_FIRST_LINE, FB_LINES, FB_PAYLOAD, FB_SPAN_MAX, FB_SPAN_SLOTS,
};
use ring::{ALIGN_SHIFT, FB_HEAD, KIND_MASK, OWNED_META3};

/// What the ring (`ring.rs`) and the lane's spin lock (`lane_lock.rs`)
/// synchronise with: the standard atomics, hints and cell. The loom models
/// (`tests/loom.rs`) compile those two files again inside a stand-in whose
/// `sync` is loom's.
mod sync {
    pub(crate) use std::cell::UnsafeCell;
    pub(crate) use std::hint::spin_loop;
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    pub(crate) use std::thread::yield_now;
}

/// Slots in one pair's ring (see docs/performance.md, "Fast-box slots").
pub const FB_SLOTS: usize = 64;

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

const _: () = assert!(OWNED_RECORD <= FB_PAYLOAD);
/// What of a record fits the slot's first line: all but the metadata's
/// last word (which the layers above leave zero).
const _: () = assert!(OWNED_RECORD - 8 == FB_FIRST_LINE);

impl OwnedSlot {
    /// The record as header kind bits and payload words (the first `n` of
    /// the array): the block's address, its size and the first three
    /// metadata words fill the slot's first line, the alignment goes into
    /// the kind bits, and the metadata's last word, unless it is zero,
    /// into the second line.
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

impl Small {
    /// The given block's record, for an owned message.
    pub(crate) fn owned(&self) -> Option<OwnedSlot> {
        self.head
            .is_owned()
            .then(|| OwnedSlot::decode(self.head.kind, self.data()))
    }
}

const _: () = assert!(std::mem::size_of::<FbSlot>() == FB_LINES * 64);
const _: () = assert!(std::mem::offset_of!(FbSlot, data) == FB_HEAD);
// A slot's payload words are aligned (an owned record is stored a word at
// a time).
const _: () = assert!(FB_HEAD % 8 == 0);

/// A sender's lane to one destination VCI: its lock orders the messages
/// to that VCI (fast box or queue) and guards the sequence numbers.
///
/// A spin lock released by a plain store (`lane_lock.rs`; why: see
/// docs/performance.md, "Locked instructions"); its holder only numbers a
/// message and writes a slot or links an envelope. In solo mode (see
/// `solo`) the owner thread takes it without touching the spin lock.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Lane {
    locked: SpinLock,
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
            locked: SpinLock::new(),
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
        self.locked.lock();
        LaneGuard {
            lane: self,
            solo: false,
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
            self.lane.locked.unlock();
        }
    }
}

impl FbPair {
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
}

#[cfg(test)]
mod tests {
    use super::ring::{copy_slot_payload, copy_small};
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

    /// A payload of `len` bytes for message `m`.
    fn bytes_of(m: usize, len: usize) -> Vec<u8> {
        (0..len).map(|k| (k * 13 + m * 7 + 1) as u8).collect()
    }

    #[test]
    fn spans_every_length_across_the_end() {
        // Every length from one slot's payload to the longest span, each
        // message after a one-slot one, so that the spans start at every
        // slot and many of them wrap around the ring's end; taken in
        // turn as a copy, whole into a buffer, and truncated into a
        // shorter buffer (the slots all go back all the same).
        assert_eq!(FB_SPAN_MAX, FB_PAYLOAD + (FB_SPAN_SLOTS - 1) * FB_CONT);
        let fb = ring();
        let mut lane = LaneState::new();
        let mut seq = 1u64;
        let mut wrapped = 0;
        // Under Miri every 7th length (still every span length and many
        // crossings), for time.
        let step = if cfg!(miri) { 7 } else { 1 };
        let lens = (FB_PAYLOAD - 1..=FB_SPAN_MAX + 1).step_by(step);
        for (m, len) in lens.chain([FB_SPAN_MAX, FB_SPAN_MAX + 1]).enumerate() {
            let payload = bytes_of(m, len);
            let h = plain(m as i32, len);
            let sent = if len > FB_PAYLOAD {
                fb.try_send_span(&mut lane, h, &payload)
            } else {
                fb.try_send(&mut lane, h, SlotData::Bytes(&payload))
            };
            if len > FB_SPAN_MAX {
                // Too long for the slots: refused, nothing numbered.
                assert!(!sent);
                assert_eq!(lane.next, seq);
                break;
            }
            assert!(sent, "len {len}");
            let k = ring::span(len);
            assert_eq!(lane.next, seq + k, "len {len}");
            assert_eq!(
                k as usize,
                len.saturating_sub(FB_PAYLOAD).div_ceil(FB_CONT) + 1
            );
            if (seq % FB_SLOTS as u64) + k > FB_SLOTS as u64 {
                wrapped += 1;
            }
            let got = fb.head(seq).expect("sent");
            assert_eq!((got, got.slots()), (h, k));
            match m % 3 {
                0 => assert_eq!(fb.take(seq, got).data(), &payload[..], "len {len}"),
                1 => {
                    let mut buf = vec![0u8; len + 1];
                    // SAFETY: `buf` holds more than `len` bytes.
                    unsafe { fb.take_into(seq, got, buf.as_mut_ptr(), len) };
                    assert_eq!(&buf[..len], &payload[..], "len {len}");
                    assert_eq!(buf[len], 0, "len {len}");
                }
                _ => {
                    let n = len / 3;
                    let mut buf = vec![0u8; n + 1];
                    // SAFETY: `buf` holds more than `n` bytes.
                    unsafe { fb.take_into(seq, got, buf.as_mut_ptr(), n) };
                    assert_eq!(&buf[..n], &payload[..n], "len {len}");
                    assert_eq!(buf[n], 0, "len {len}");
                }
            }
            // The continuation slots' sequence words were never written:
            // none of them says a later number.
            for j in 1..k {
                assert!(!fb.ready(seq + j) && fb.head(seq + j).is_none());
            }
            seq += k;
            // A one-slot message between spans moves their starts.
            let one = bytes_of(m, 5);
            assert!(fb.try_send(&mut lane, plain(-1, 5), SlotData::Bytes(&one)));
            let got = fb.head(seq).expect("sent");
            assert_eq!(fb.take(seq, got).data(), &one[..]);
            seq += 1;
        }
        assert!(
            wrapped >= 10 / step,
            "{wrapped} spans crossed the ring's end"
        );
    }

    #[test]
    fn spans_wait_for_credit_of_their_last_slot() {
        let fb = ring();
        let mut lane = LaneState::new();
        let long = bytes_of(1, FB_SPAN_MAX);
        // Fill all but two slots with one-slot messages.
        let n = FB_SLOTS as u64 - 2;
        for i in 0..n {
            assert!(fb.try_send(&mut lane, plain(i as i32, 1), SlotData::Bytes(&[1])));
        }
        // A span of FB_SPAN_SLOTS > 2 slots has no credit for its last.
        assert!(!fb.try_send_span(&mut lane, plain(9, long.len()), &long));
        assert_eq!(lane.next, n + 1);
        // A two-slot one fits exactly.
        let two = bytes_of(2, FB_PAYLOAD + 1);
        assert!(fb.try_send_span(&mut lane, plain(8, two.len()), &two));
        assert_eq!(lane.next, n + 3);
        // The first message handed back: still no room for the long span.
        let h = fb.head(1).expect("sent");
        fb.take(1, h);
        assert!(!fb.try_send_span(&mut lane, plain(9, long.len()), &long));
        // Taking the rest makes room; the long span wraps around the end.
        for seq in 2..=n {
            let h = fb.head(seq).expect("sent");
            fb.take(seq, h);
        }
        let h = fb.head(n + 1).expect("sent");
        assert_eq!(h.slots(), 2);
        assert_eq!(fb.take(n + 1, h).data(), &two[..]);
        assert!(fb.try_send_span(&mut lane, plain(9, long.len()), &long));
        let h = fb.head(n + 3).expect("sent");
        assert_eq!(fb.take(n + 3, h).data(), &long[..]);
        assert_eq!(lane.next, n + 3 + FB_SPAN_SLOTS as u64);
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
