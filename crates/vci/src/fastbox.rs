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

/// Slots in one pair's ring: enough for the 64-message windows of the
/// OSU bandwidth loops, and the sender reads the receiver's credit line
/// (a cache miss) only once per half ring.
pub const FB_SLOTS: usize = 64;
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
    /// The destination's ring for this process (`None`: it has no fast
    /// boxes).
    ring: Option<&'static FbPair>,
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
    pub(crate) fn new(ring: Option<&'static FbPair>) -> Lane {
        Lane {
            locked: AtomicBool::new(false),
            ring,
            state: UnsafeCell::new(LaneState {
                next: 1,
                credit: 0,
                fastbox_sent: 0,
            }),
        }
    }

    /// The destination's ring for this process, if it has fast boxes.
    pub(crate) fn ring(&self) -> Option<&'static FbPair> {
        self.ring
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
        let body = slot.body.get();
        // SAFETY: we hold the lane lock (the only writer for this pair) and
        // have credit: the receiver finished reading this slot and will not
        // read it again before we publish `seq` below. `buf` fits the data
        // (checked by the caller) and is not the slot. Bytes of `data`
        // past `len` keep whatever they held: nobody reads them.
        unsafe {
            (*body).tag = tag;
            (*body).context = context;
            (*body).len = buf.len() as u32;
            let data = std::ptr::addr_of_mut!((*body).data).cast::<u8>();
            copy_small(buf.as_ptr(), data, buf.len().min(FB_PAYLOAD));
        }
        // SYNC POINT: Release pairs with the receiver's Acquire load in
        // `take`: the body is visible when the sequence number is.
        slot.seq.store(seq, Ordering::Release);
        lane.next = seq + 1;
        if seq - lane.credit == FB_SLOTS as u64 / 2 {
            // Half the credit is used: refresh it now, after the message
            // is on its way, rather than on a later send's path.
            // SYNC POINT: Acquire, as above.
            lane.credit = self.consumed.0.load(Ordering::Acquire);
        }
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

    /// Takes message `seq` straight into `buf` (`cap` bytes) if it is in
    /// its slot and `wanted(tag, context)` says yes (the receiver, under its
    /// VCI lock, with `seq` the next number it expects); returns its tag
    /// and length. A message that is not wanted stays in its slot.
    ///
    /// # Safety
    ///
    /// `buf` is valid for writes of `cap` bytes and is not a slot.
    pub(crate) unsafe fn take_into(
        &self,
        seq: u64,
        wanted: impl FnOnce(i32, u32) -> bool,
        buf: *mut u8,
        cap: usize,
    ) -> Option<(i32, usize)> {
        let slot = &self.slots[(seq % FB_SLOTS as u64) as usize];
        // SYNC POINT: Acquire pairs with the Release store in `try_send`:
        // the body written before it is visible.
        if slot.seq.load(Ordering::Acquire) != seq {
            return None;
        }
        let body = slot.body.get();
        // SAFETY: the sender published `seq` (Acquire above) and will not
        // write the slot again before we publish our credit below; the
        // fields are plain data.
        let (tag, context, len) = unsafe { ((*body).tag, (*body).context, (*body).len as usize) };
        if !wanted(tag, context) {
            return None;
        }
        // SAFETY: as above for the slot; `len <= FB_PAYLOAD` (the sender's
        // check), and `buf` holds `cap` bytes (caller's contract) and is
        // not this slot.
        unsafe {
            let data = std::ptr::addr_of!((*body).data).cast::<u8>();
            copy_small(data, buf, len.min(cap).min(FB_PAYLOAD));
        }
        self.consumed(seq);
        Some((tag, len))
    }

    /// Whether message `seq` seems to be in its slot (a lock-free hint for
    /// waiters; [`FbPair::take`] is what takes it).
    pub(crate) fn ready(&self, seq: u64) -> bool {
        // Relaxed: a hint only; `take` reads the word again with Acquire.
        self.slots[(seq % FB_SLOTS as u64) as usize]
            .seq
            .load(Ordering::Relaxed)
            == seq
    }

    /// Publishes that every message up to `seq` was consumed.
    pub(crate) fn consumed(&self, seq: u64) {
        // SYNC POINT: Release pairs with the Acquire load in `try_send`: our
        // reads of the slots up to `seq` happen before the sender reuses
        // them.
        self.consumed.0.store(seq, Ordering::Release);
    }
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
    use super::copy_small;

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
}
