//! Waiting: how a thread waits for a request, a message or a probe.
//!
//! A waiter polls back to back for a short while, yields a few times, then
//! announces itself on its rank's doorbell ([`crate::doorbell`]), keeps
//! looking for a moment ([`LINGER`]), and sleeps on the futex while the
//! doorbell's sequence number is unchanged (at most [`MAX_SLEEP`] at a
//! time). While it waits it now and then sweeps the process's other VCIs
//! ([`Endpoint::sweep`]: progress on those whose lock is free), so a
//! request never starves behind a VCI nobody waits on.
//!
//! Between sleeps, every [`NAPS_PER_CHECK`]th time, a waiter asks whether
//! a peer it depends on has failed ([`crate::liveness`]); if one has (and
//! one more look finds nothing), the wait ends with that rank, so a dead
//! peer is an error, not a wait forever. The check lives only here, in the
//! slow path: the spinning and the message path never pay for it.

use crate::doorbell::{LINGER, MAX_SLEEP};
use crate::endpoint::Endpoint;
use crate::liveness::Watch;
use crate::vci::VciShared;
use shmheap::sync::futex::futex_wait;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// Empty attempts between sweeps (and full attempts) while spinning.
const SWEEP_EVERY: u32 = 64;
/// Doorbell sleeps (each at most `MAX_SLEEP`) between two checks for
/// failed peers: a dead peer is noticed within a few tens of milliseconds
/// at the cost of a system call or two per check.
const NAPS_PER_CHECK: u32 = 8;

impl VciShared {
    /// Waits until `attempt` returns a value: spins, yields, then sleeps on
    /// this (the rank's) doorbell; `sweep` runs after repeated empty
    /// attempts, and before every sleep. `attempt(full)` may skip work it
    /// knows to be useless (a lock-free check for news, [`Vci::news`])
    /// unless `full` is set: every [`SWEEP_EVERY`]th attempt and the
    /// attempt before a sleep are full.
    ///
    /// While sleeping, `failed` is asked now and then for a failed peer
    /// the wait depends on; when it names one and a last full attempt
    /// finds nothing, the wait ends with `Err(rank)`.
    pub(crate) fn wait_until<R>(
        &self,
        mut attempt: impl FnMut(bool) -> Option<R>,
        mut sweep: impl FnMut(),
        mut failed: impl FnMut() -> Option<u32>,
    ) -> Result<R, u32> {
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
                return Ok(r);
            }
            empty += 1;
            if yielding {
                std::thread::yield_now();
                yields += 1;
            } else if empty % SWEEP_EVERY == 0 {
                sweep();
                crate::idle::run();
                // The clock is read now and then, not on every attempt.
                // With more runnable threads than CPUs the spinning ends
                // at once: the thread we wait for may need this CPU (see
                // docs/performance.md, "Waiting").
                let now = Instant::now();
                yielding =
                    now >= *spin_until.get_or_insert(now + SPIN) || shmheap::load::oversubscribed();
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
        let mut naps = 0u32;
        let r = loop {
            if let Some(r) = attempt(true) {
                break Ok(r);
            }
            if Instant::now() >= linger_until {
                // SYNC POINT: Acquire pairs with the ringer's Release
                // increment: an event rung after this read wakes the futex
                // (or changes `seq` first, and the futex does not sleep);
                // one rung before it is visible to the attempt below.
                let seq = bell.seq.load(Ordering::Acquire);
                if let Some(r) = attempt(true) {
                    break Ok(r);
                }
                futex_wait(&bell.seq, seq, MAX_SLEEP);
                sweep();
                crate::idle::run();
                naps += 1;
                if naps % NAPS_PER_CHECK == 0 {
                    if let Some(rank) = failed() {
                        // What the peer sent before it ended counts: one
                        // last look.
                        break attempt(true).ok_or(rank);
                    }
                }
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
    /// `Err(rank)` if a peer that `watch` names failed meanwhile.
    pub(crate) fn wait_on<R>(
        &self,
        v: usize,
        watch: Watch,
        attempt: impl FnMut(bool) -> Option<R>,
    ) -> Result<R, u32> {
        self.wait_on_failing(v, attempt, || self.liveness().check(watch))
    }

    /// [`Endpoint::wait_on`] for waits that decide themselves whether
    /// they depend on a failed peer (a set of requests, any of which may
    /// finish it): `failed` names one, or says `None`.
    pub(crate) fn wait_on_failing<R>(
        &self,
        v: usize,
        attempt: impl FnMut(bool) -> Option<R>,
        failed: impl FnMut() -> Option<u32>,
    ) -> Result<R, u32> {
        self.bell().wait_until(attempt, || self.sweep(v), failed)
    }
}
