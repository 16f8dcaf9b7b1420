//! Fast boxes: per-pair rings of cache-line slots for tiny messages.
//!
//! A message of at most [`FB_PAYLOAD`] bytes (not synchronous) from rank `s`
//! to a VCI of rank `r` skips the envelope and the queue: the sender writes
//! it into one 64-byte slot of the ring that `r` keeps for `s`, and the
//! receiver's progress finds it there. One cache line carries the whole
//! message, nothing is allocated or freed, and the receiver polls a line
//! that stays in its cache until a sender writes it — the technique MPI
//! libraries' shared-memory transports use for small messages (MPICH's
//! "fast boxes").
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
//! after reading the slot), and the sender reads it (Acquire) only when its
//! cached value no longer allows the next slot. Without credit the message
//! goes through the queue, so a sender never waits for a slot.
//!
//! # Example
//! ```
//! use vci::fastbox::{FbPair, FB_PAYLOAD, FB_SLOTS};
//!
//! // One slot is one cache line; the header leaves this much payload.
//! assert_eq!(std::mem::size_of::<FbPair>(), 64 * (FB_SLOTS + 1));
//! assert_eq!(FB_PAYLOAD, 44);
//! ```

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Slots in one pair's ring.
pub const FB_SLOTS: usize = 16;
/// Largest payload a slot carries.
pub const FB_PAYLOAD: usize = 44;

/// What a slot holds besides its sequence word (written by the sender
/// before it publishes the sequence number, read by the receiver after).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct FbBody {
    pub tag: i32,
    pub context: u32,
    pub len: u32,
    pub data: [u8; FB_PAYLOAD],
}

/// One slot: a cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct FbSlot {
    /// The sequence number of the message in the slot (0: never used).
    seq: AtomicU64,
    body: UnsafeCell<FbBody>,
}

const _: () = assert!(std::mem::size_of::<FbSlot>() == 64);

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

// SAFETY: the slot bodies are written only by the sender that holds the
// lane lock and has credit for the slot, and read only by the receiver
// after it saw the slot's sequence word (Acquire) and before it publishes
// its credit (Release): the accesses never overlap (see the module docs).
unsafe impl Sync for FbPair {}

/// The sender's state for one destination VCI, under its lane lock.
#[derive(Debug)]
pub(crate) struct LaneState {
    /// The next sequence number (the first message is 1).
    pub next: u64,
    /// The receiver's credit as last read.
    credit: u64,
    /// Messages sent through the fast box (a statistic).
    pub fastbox_sent: u64,
}

/// A sender's lane to one destination VCI: its lock orders the messages
/// to that VCI (fast box or queue) and guards the sequence numbers.
///
/// A spin lock released by a plain store: its holder only numbers a
/// message and writes a slot or links an envelope, so waiting is short,
/// and the release costs no locked instruction (which would stall until the
/// slot's cache line arrived).
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Lane {
    locked: AtomicBool,
    state: UnsafeCell<LaneState>,
}

// SAFETY: `state` is only reached through a `LaneGuard`, which exists for
// one thread at a time (the `locked` flag).
unsafe impl Sync for Lane {}

/// The held lane lock.
pub(crate) struct LaneGuard<'a> {
    lane: &'a Lane,
}

impl Lane {
    pub(crate) fn new() -> Lane {
        Lane {
            locked: AtomicBool::new(false),
            state: UnsafeCell::new(LaneState {
                next: 1,
                credit: 0,
                fastbox_sent: 0,
            }),
        }
    }

    pub(crate) fn lock(&self) -> LaneGuard<'_> {
        let mut spins = 0u32;
        loop {
            // SYNC POINT: Acquire pairs with the Release store in
            // `LaneGuard::drop`: the previous holder's updates of the state
            // (and its slot writes and queue pushes) are visible.
            if !self.locked.swap(true, Ordering::Acquire) {
                return LaneGuard { lane: self };
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
    fn drop(&mut self) {
        // SYNC POINT: Release pairs with the Acquire swap in `Lane::lock`.
        self.lane.locked.store(false, Ordering::Release);
    }
}

impl FbPair {
    /// Writes message `lane.next` into its slot if the receiver has
    /// consumed the slot's previous tenant; returns whether it did (and
    /// then advances `lane.next`).
    pub(crate) fn try_send(
        &self,
        lane: &mut LaneState,
        tag: i32,
        context: u32,
        buf: &[u8],
    ) -> bool {
        debug_assert!(buf.len() <= FB_PAYLOAD);
        let seq = lane.next;
        if seq > lane.credit + FB_SLOTS as u64 {
            // SYNC POINT: Acquire pairs with the receiver's Release store in
            // `take`: its reads of the slot's previous tenant are done
            // before we overwrite the slot.
            lane.credit = self.consumed.0.load(Ordering::Acquire);
            if seq > lane.credit + FB_SLOTS as u64 {
                return false;
            }
        }
        let slot = &self.slots[(seq % FB_SLOTS as u64) as usize];
        let mut body = FbBody {
            tag,
            context,
            len: buf.len() as u32,
            data: [0; FB_PAYLOAD],
        };
        body.data[..buf.len()].copy_from_slice(buf);
        // SAFETY: we hold the lane lock (the only writer for this pair) and
        // have credit: the receiver finished reading this slot and will not
        // read it again before we publish `seq` below.
        unsafe { slot.body.get().write(body) };
        // SYNC POINT: Release pairs with the receiver's Acquire load in
        // `take`: the body is visible when the sequence number is.
        slot.seq.store(seq, Ordering::Release);
        lane.next = seq + 1;
        lane.fastbox_sent += 1;
        true
    }

    /// Takes message `seq` from its slot if it is there (the receiver,
    /// under its VCI lock, with `seq` the next number it expects).
    pub(crate) fn take(&self, seq: u64) -> Option<FbBody> {
        let slot = &self.slots[(seq % FB_SLOTS as u64) as usize];
        // SYNC POINT: Acquire pairs with the Release store in `try_send`:
        // the body written before it is visible.
        if slot.seq.load(Ordering::Acquire) != seq {
            return None;
        }
        // SAFETY: the sender published `seq` (Acquire above) and will not
        // write the slot again before we publish our credit below.
        let body = unsafe { slot.body.get().read() };
        self.consumed(seq);
        Some(body)
    }

    /// Publishes that every message up to `seq` was consumed.
    pub(crate) fn consumed(&self, seq: u64) {
        // SYNC POINT: Release pairs with the Acquire load in `try_send`: our
        // reads of the slots up to `seq` happen before the sender reuses
        // them.
        self.consumed.0.store(seq, Ordering::Release);
    }
}
