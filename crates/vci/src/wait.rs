//! Waiting: how a thread waits for a request, a message or a probe.
//!
//! A waiter polls back to back for a short while, yields a few times, then
//! announces itself on its rank's doorbell ([`crate::doorbell`]), keeps
//! looking for a moment ([`LINGER`]), and sleeps on the futex while the
//! doorbell's sequence number is unchanged (at most [`MAX_SLEEP`] at a
//! time). While it waits it now and then sweeps the process's other VCIs
//! ([`Endpoint::sweep`]: progress on those whose lock is free), so a
//! request never starves behind a VCI nobody waits on.

use crate::doorbell::{LINGER, MAX_SLEEP};
use crate::endpoint::Endpoint;
use crate::vci::VciShared;
use shmheap::sync::futex::futex_wait;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// Empty attempts between sweeps (and full attempts) while spinning.
const SWEEP_EVERY: u32 = 64;

impl VciShared {
    /// Waits until `attempt` returns a value: spins, yields, then sleeps on
    /// this (the rank's) doorbell; `sweep` runs after repeated empty
    /// attempts, and before every sleep. `attempt(full)` may skip work it
    /// knows to be useless (a lock-free check for news, [`Vci::news`])
    /// unless `full` is set: every [`SWEEP_EVERY`]th attempt and the
    /// attempt before a sleep are full.
    pub(crate) fn wait_until<R>(
        &self,
        mut attempt: impl FnMut(bool) -> Option<R>,
        mut sweep: impl FnMut(),
    ) -> R {
        /// How long to poll back to back before yielding (see
        /// docs/performance.md, "Waiting").
        const SPIN: Duration = Duration::from_micros(20);
        /// Yields before sleeping.
        const YIELDS: u32 = 16;
        /// Attempts made back to back before the spinning slows down with
        /// `pause` (see docs/performance.md, "Waiting").
        const HOT: u32 = 256;
        let bell = &self.bell;
        let mut empty = 0u32;
        let mut spin_until: Option<Instant> = None;
        let mut yielding = false;
        let mut yields = 0u32;
        while yields < YIELDS {
            if let Some(r) = attempt(empty % SWEEP_EVERY == 0) {
                return r;
            }
            empty += 1;
            if yielding {
                std::thread::yield_now();
                yields += 1;
            } else if empty % SWEEP_EVERY == 0 {
                sweep();
                crate::idle::run();
                // The clock is read now and then, not on every attempt.
                let now = Instant::now();
                yielding = now >= *spin_until.get_or_insert(now + SPIN);
            } else if empty > HOT {
                std::hint::spin_loop();
            }
        }
        // Sleep: announce ourselves, linger (see `Doorbell::ring`), then
        // sleep on the doorbell until rung or for at most MAX_SLEEP, and
        // look again.
        sweep();
        crate::idle::run();
        // Relaxed increment, then SYNC POINT: the SeqCst fence makes the
        // announcement visible before anything we read below, so a ringer
        // whose event we miss sees us (up to the store-visibility window
        // that the linger covers).
        bell.sleepers.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let linger_until = Instant::now() + LINGER;
        let r = loop {
            if let Some(r) = attempt(true) {
                break r;
            }
            if Instant::now() >= linger_until {
                // SYNC POINT: Acquire pairs with the ringer's Release
                // increment: an event rung after this read wakes the futex
                // (or changes `seq` first, and the futex does not sleep);
                // one rung before it is visible to the attempt below.
                let seq = bell.seq.load(Ordering::Acquire);
                if let Some(r) = attempt(true) {
                    break r;
                }
                futex_wait(&bell.seq, seq, MAX_SLEEP);
                sweep();
                crate::idle::run();
            } else {
                std::hint::spin_loop();
            }
        };
        // Relaxed: only a hint to ringers; a stale non-zero value costs one
        // needless wake-up.
        bell.sleepers.fetch_sub(1, Ordering::Relaxed);
        r
    }
}

impl Endpoint {
    /// Waits until `attempt` returns a value (see
    /// [`VciShared::wait_until`]); a waiter on VCI `v` sweeps the others.
    pub(crate) fn wait_on<R>(&self, v: usize, attempt: impl FnMut(bool) -> Option<R>) -> R {
        self.bell().wait_until(attempt, || self.sweep(v))
    }
}
