//! The doorbell: how a rank's waiting threads sleep and who wakes them.
//!
//! Each rank has one doorbell, in its VCI 0's shared part
//! ([`crate::vci::VciShared`]). Whoever makes something happen that a
//! waiter of this rank may wait for — a sender after queueing an envelope
//! or filling a fast-box slot, a receiver after completing an envelope this
//! rank waits for, or after asking this rank for help with a synergistic
//! copy — rings it: if a waiter announced itself in `sleepers`, it
//! increments `seq` and wakes the futex. A waiter ([`crate::wait`]) polls,
//! yields, then announces itself, reads `seq`, polls once more, and sleeps
//! only while `seq` is unchanged, for at most [`MAX_SLEEP`].

use shmheap::sync::futex::wake_all;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How long a waiter that announced itself keeps looking before it sleeps
/// (see `Doorbell::ring`).
pub(crate) const LINGER: Duration = Duration::from_micros(5);
/// Longest doorbell sleep before a waiter polls again.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(2);

/// The doorbell: a sequence number waiters sleep on, and how many may sleep.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Doorbell {
    pub(crate) seq: AtomicU32,
    pub(crate) sleepers: AtomicU32,
}

impl Doorbell {
    /// Wakes the owner's sleeping waiters, if any, after the caller made
    /// an event they may wait for (a queued envelope, a filled fast-box
    /// slot, a completion store). While nobody sleeps this is one load,
    /// with no write and no fence (see docs/performance.md, "Waiting").
    ///
    /// Without a fence our event (a store) may still be on its way when
    /// this load runs, so a waiter that announces itself at that moment
    /// could be missed here while it also misses the event. The waiter
    /// covers that window: after announcing itself it keeps looking for
    /// [`LINGER`] before it sleeps — far longer than a store takes to
    /// become visible (which it does before the core is descheduled) — and
    /// it never sleeps longer than [`MAX_SLEEP`] at a time.
    pub(crate) fn ring(&self) {
        // Relaxed: see above; the waiter's fence orders its side.
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            // SYNC POINT: Release pairs with the waiter's Acquire load of
            // `seq`: a waiter that reads the new value sees our event. The
            // futex compares `seq`, so a waiter that read the old value
            // either sleeps and is woken below or does not sleep.
            self.seq.fetch_add(1, Ordering::Release);
            wake_all(&self.seq);
        }
    }
}
