//! A barrier for the ranks (or threads) of one node, in shared memory.
//!
//! A counter of arrivals and a generation number. The last to arrive resets
//! the counter and bumps the generation; the others wait for the generation
//! to change (spin, yield, then sleep on the futex; [`NodeBarrier::wait_or`]
//! also asks now and then whether a party has ended). Reusable at once: a
//! party that leaves and re-enters cannot confuse the counter, because the
//! reset is ordered before the generation bump it waits for.
//!
//! # Example
//! ```
//! use shmheap::sync::barrier::NodeBarrier;
//! use std::sync::Arc;
//!
//! let b = Arc::new(NodeBarrier::new());
//! let t = { let b = b.clone(); std::thread::spawn(move || b.wait(2)) };
//! b.wait(2);
//! t.join().unwrap();
//! ```

use super::atomic::{AtomicU32, Ordering};
use super::futex::{wait_until, wake_all, Backoff};

/// A reusable barrier for a fixed number of parties.
#[repr(C)]
#[derive(Debug, Default)]
pub struct NodeBarrier {
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl NodeBarrier {
    /// A barrier nobody has reached (all-zero bytes are the same).
    pub const fn new() -> Self {
        NodeBarrier {
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
        }
    }

    /// Blocks until `parties` callers (including this one) have called
    /// `wait` for this generation. All parties must pass the same number.
    pub fn wait(&self, parties: u32) {
        if parties <= 1 {
            return;
        }
        // SYNC POINT: Acquire pairs with the previous generation's Release
        // bump, so our arrival below follows that generation's counter reset.
        let generation = self.generation.load(Ordering::Acquire);
        // SYNC POINT: AcqRel: Release publishes what this party wrote before
        // the barrier to the last arriver, Acquire lets the last arriver see
        // everyone's writes before it bumps the generation.
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == parties {
            // Relaxed: ordered before the Release bump below, which every
            // party acquires before it can arrive at the next generation.
            self.arrived.store(0, Ordering::Relaxed);
            // SYNC POINT: Release pairs with the waiters' Acquire in
            // `wait_until`: they see every write made before the barrier.
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            wake_all(&self.generation);
        } else {
            wait_until(&self.generation, |g| g != generation);
        }
    }

    /// [`NodeBarrier::wait`] for parties that may end before they arrive:
    /// while it sleeps, this party asks `gone` now and then (never while
    /// it spins) for a party that has ended; when `gone` names one and the
    /// barrier still has not opened, the wait ends with `Err` of it. The
    /// barrier is unusable after that (the job has failed).
    pub fn wait_or<T>(&self, parties: u32, mut gone: impl FnMut() -> Option<T>) -> Result<(), T> {
        /// Sleeps between two questions.
        const NAPS_PER_CHECK: u32 = 8;
        if parties <= 1 {
            return Ok(());
        }
        // SYNC POINT: as in `wait`.
        let generation = self.generation.load(Ordering::Acquire);
        // SYNC POINT: as in `wait`.
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == parties {
            // Relaxed, then SYNC POINT (Release): as in `wait`.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            wake_all(&self.generation);
            return Ok(());
        }
        let mut backoff = Backoff::new();
        let mut naps = 0u32;
        loop {
            // SYNC POINT: Acquire pairs with the last arriver's Release
            // bump, as `wait_until` in `wait` does.
            let g = self.generation.load(Ordering::Acquire);
            if g != generation {
                return Ok(());
            }
            if backoff.is_sleeping() {
                naps = naps.wrapping_add(1);
                if naps % NAPS_PER_CHECK == 0 {
                    if let Some(who) = gone() {
                        // SYNC POINT: as above; one last look.
                        if self.generation.load(Ordering::Acquire) != generation {
                            return Ok(());
                        }
                        return Err(who);
                    }
                }
            }
            backoff.snooze_on(&self.generation, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn a_waiter_gives_up_on_a_party_that_is_gone_and_not_before() {
        let b = NodeBarrier::new();
        let mut asked = 0;
        let r = b.wait_or(2, || {
            asked += 1;
            (asked == 2).then_some(7)
        });
        assert_eq!((r, asked), (Err(7), 2));
        // Alone, it never asks.
        assert_eq!(
            NodeBarrier::new().wait_or(1, || -> Option<()> { panic!() }),
            Ok(())
        );
    }

    #[test]
    fn phases_do_not_mix() {
        let b = Arc::new(NodeBarrier::new());
        let counter = Arc::new(AtomicUsize::new(0));
        let n = 4;
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (b, counter) = (b.clone(), counter.clone());
                std::thread::spawn(move || {
                    for phase in 0..200 {
                        counter.fetch_add(1, Ordering::Relaxed);
                        b.wait(n as u32);
                        assert_eq!(counter.load(Ordering::Relaxed), (phase + 1) * n);
                        b.wait(n as u32);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
