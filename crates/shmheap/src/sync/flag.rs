//! Flags and counters in shared memory that ranks and threads can wait on.
//!
//! * [`Flag`]: a boolean event. One side [`set`](Flag::set)s it (release),
//!   any number of waiters [`wait`](Flag::wait) for it (acquire); it can be
//!   [`clear`](Flag::clear)ed and reused. Completion of a request and the
//!   post/start/complete/wait steps of one-sided epochs are flags.
//! * [`Counter`]: a 64-bit monotone counter that waiters watch reach a
//!   threshold (arrivals, completed operations, bytes delivered).
//!
//! Waiting spins, then yields, then sleeps on a futex (see [`super::futex`]).
//! A waiter that is about to sleep leaves a mark in the word it sleeps on, so
//! the setting side enters the kernel only when somebody may be asleep: an
//! uncontended `set` or `add` is one atomic operation.
//!
//! Both are `#[repr(C)]`, hold only atomics, and all-zero bytes are a clear
//! flag and a zero counter.
//!
//! # Example
//! ```
//! use shmheap::sync::flag::{Counter, Flag};
//! use std::sync::Arc;
//!
//! let done = Arc::new((Flag::new(), Counter::new()));
//! let worker = {
//!     let done = done.clone();
//!     std::thread::spawn(move || {
//!         for _ in 0..3 {
//!             done.1.add(1);
//!         }
//!         done.0.set();
//!     })
//! };
//! done.0.wait();
//! assert_eq!(done.1.wait_until_at_least(3), 3);
//! worker.join().unwrap();
//! ```

use super::atomic::{AtomicU32, AtomicU64, Ordering};
use super::futex::{wake_all, Backoff};

/// [`Flag`] state: not set, nobody asleep.
const CLEAR: u32 = 0;
/// [`Flag`] state: set.
const SET: u32 = 1;
/// [`Flag`] state: not set, and a waiter may be asleep on the word.
const CLEAR_SLEEPERS: u32 = 2;

/// A boolean event that can be waited on, in shared memory.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Flag {
    word: AtomicU32,
}

impl Flag {
    /// A clear flag (all-zero bytes are the same).
    pub const fn new() -> Self {
        Flag {
            word: AtomicU32::new(CLEAR),
        }
    }

    /// Sets the flag and wakes every waiter. Whatever this thread wrote
    /// before is visible to a waiter once its `wait` or `is_set` sees the
    /// flag set.
    pub fn set(&self) {
        // SYNC POINT: Release pairs with the Acquire loads in `is_set` and
        // `wait`: writes before `set` happen before the waiter's return.
        if self.word.swap(SET, Ordering::Release) == CLEAR_SLEEPERS {
            wake_all(&self.word);
        }
    }

    /// Clears the flag if it is set (a clear flag stays as it is, including
    /// its mark of sleeping waiters).
    pub fn clear(&self) {
        // SYNC POINT: Release on success: what this thread did while the flag
        // was set (typically reading what the setter published) happens
        // before anything a party does after it sees the flag clear with an
        // Acquire load (`is_set` returning false). Relaxed on failure: the
        // flag was already clear, we wrote nothing.
        let _ = self
            .word
            .compare_exchange(SET, CLEAR, Ordering::Release, Ordering::Relaxed);
    }

    /// True if the flag is set.
    pub fn is_set(&self) -> bool {
        // SYNC POINT: Acquire pairs with the Release swap in `set`.
        self.word.load(Ordering::Acquire) == SET
    }

    /// Blocks until the flag is set (returns at once if it is). A flag that
    /// is set and cleared again before this waiter looks may go unnoticed;
    /// use a [`Counter`] when every event must be seen.
    pub fn wait(&self) {
        let mut backoff = Backoff::new();
        loop {
            // SYNC POINT: Acquire pairs with the Release swap in `set`.
            let v = self.word.load(Ordering::Acquire);
            if v == SET {
                return;
            }
            if !backoff.is_sleeping() {
                backoff.snooze();
                continue;
            }
            // Mark the word before sleeping on it, so `set` wakes us.
            // Relaxed: the mark carries no data; the set is read by the
            // Acquire load above.
            if v == CLEAR
                && self
                    .word
                    .compare_exchange(CLEAR, CLEAR_SLEEPERS, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            // Returns at once unless the word still holds the mark.
            backoff.snooze_on(&self.word, CLEAR_SLEEPERS);
        }
    }
}

/// Bit 0 of [`Counter::seq`]: a waiter may be asleep on `seq`.
const SEQ_SLEEPERS: u32 = 1;
/// What [`Counter::add`] adds to `seq` (bits 1.. count the additions).
const SEQ_STEP: u32 = 2;

/// A monotone 64-bit counter that can be waited on, in shared memory.
///
/// Futexes are 32-bit, so waiters sleep on a separate sequence word that
/// every [`add`](Counter::add) bumps after the value.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Counter {
    value: AtomicU64,
    /// Bits 1.. count additions (wrapping); bit 0 marks sleeping waiters.
    seq: AtomicU32,
}

impl Counter {
    /// A counter at zero (all-zero bytes are the same).
    pub const fn new() -> Self {
        Counter {
            value: AtomicU64::new(0),
            seq: AtomicU32::new(0),
        }
    }

    /// Adds `n` (wrapping) and wakes waiters; returns the new value. Whatever
    /// this thread wrote before is visible to a waiter that sees the new
    /// value.
    pub fn add(&self, n: u64) -> u64 {
        // SYNC POINT: AcqRel. Release pairs with the Acquire loads in `get`
        // and the waits (our earlier writes are visible to whoever sees this
        // value); Acquire chains the earlier adders' writes into ours, so a
        // waiter that sees the total sees every adder's writes.
        let new = self.value.fetch_add(n, Ordering::AcqRel).wrapping_add(n);
        // SYNC POINT: Release pairs with the waiter's Acquire load of `seq`,
        // after which its load of `value` sees this addition.
        let seq = self.seq.fetch_add(SEQ_STEP, Ordering::Release);
        if seq & SEQ_SLEEPERS != 0 {
            // Relaxed: the mark carries no data. A waiter that sets it again
            // after this either sees the bumped `seq` and does not sleep, or
            // sleeps until the next `add`, which sees its mark.
            self.seq.fetch_and(!SEQ_SLEEPERS, Ordering::Relaxed);
            wake_all(&self.seq);
        }
        new
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        // SYNC POINT: Acquire pairs with the AcqRel `fetch_add` in `add`.
        self.value.load(Ordering::Acquire)
    }

    /// Blocks until the value is at least `n`; returns the value seen.
    pub fn wait_until_at_least(&self, n: u64) -> u64 {
        self.wait_for(|v| v >= n)
    }

    /// Blocks until the value is greater than `n`; returns the value seen.
    pub fn wait_until_greater(&self, n: u64) -> u64 {
        self.wait_for(|v| v > n)
    }

    fn wait_for(&self, cond: impl Fn(u64) -> bool) -> u64 {
        let mut backoff = Backoff::new();
        loop {
            // SYNC POINT: Acquire pairs with the Release bump in `add`: an
            // addition counted in `seq` is visible to the load of `value`.
            let seq = self.seq.load(Ordering::Acquire);
            // SYNC POINT: Acquire pairs with the AcqRel `fetch_add` in `add`.
            let v = self.value.load(Ordering::Acquire);
            if cond(v) {
                return v;
            }
            if !backoff.is_sleeping() {
                backoff.snooze();
                continue;
            }
            // Mark `seq` before sleeping on it. If an `add` bumped it since
            // our load above, its value may already satisfy us: look again.
            // Relaxed: the mark carries no data; what matters is that it is
            // an RMW on `seq`, ordered against every bump.
            let now = self.seq.fetch_or(SEQ_SLEEPERS, Ordering::Relaxed);
            if now & !SEQ_SLEEPERS != seq & !SEQ_SLEEPERS {
                continue;
            }
            // Returns at once if `seq` changed (a bump or a cleared mark).
            backoff.snooze_on(&self.seq, seq | SEQ_SLEEPERS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_set_clear_is_set() {
        let f = Flag::new();
        assert!(!f.is_set());
        f.clear();
        assert!(!f.is_set());
        f.set();
        assert!(f.is_set());
        f.wait();
        f.set();
        assert!(f.is_set());
        f.clear();
        assert!(!f.is_set());
    }

    #[test]
    fn counter_adds_and_waits_without_blocking_when_reached() {
        let c = Counter::new();
        assert_eq!(c.get(), 0);
        assert_eq!(c.add(5), 5);
        assert_eq!(c.add(0), 5);
        assert_eq!(c.wait_until_at_least(5), 5);
        assert_eq!(c.wait_until_greater(4), 5);
        assert_eq!(c.add(u64::MAX), 4, "wraps");
    }

    #[test]
    fn all_zero_is_initial_state() {
        // SAFETY: both types hold only atomics, for which zero is valid.
        let (f, c): (Flag, Counter) = unsafe { std::mem::zeroed() };
        assert!(!f.is_set());
        assert_eq!(c.get(), 0);
    }
}
