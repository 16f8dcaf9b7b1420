//! A barrier for the ranks (or threads) of one node, in shared memory.
//!
//! A counter of arrivals and a generation number. The last to arrive resets
//! the counter and bumps the generation; the others wait for the generation
//! to change (spin, yield, then sleep on the futex). Reusable at once: a
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
use super::futex::{wait_until, wake_all};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

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
