//! The lane's spin lock: a flag taken with a swap and released with a
//! plain store (see `Lane` in the parent module for why a spin lock).
//!
//! This file reaches atomics and its waiting hints only through its parent
//! (`super::sync`), so that the loom models in `tests/loom.rs` can compile
//! it a second time against loom's.

use super::sync::{spin_loop, yield_now, AtomicBool, Ordering};

/// A test-and-test-and-set spin lock.
#[repr(transparent)]
#[derive(Debug)]
pub(crate) struct SpinLock {
    locked: AtomicBool,
}

impl SpinLock {
    /// A free lock.
    pub(crate) fn new() -> SpinLock {
        SpinLock {
            locked: AtomicBool::new(false),
        }
    }

    /// Takes the lock: spins while it is held, then yields (the holder may
    /// have been preempted).
    #[inline(always)]
    pub(crate) fn lock(&self) {
        let mut spins = 0u32;
        loop {
            // SYNC POINT: Acquire pairs with the Release store in `unlock`:
            // the previous holder's updates of the state it guards (and,
            // for a lane, its slot writes and queue pushes) are visible.
            if !self.locked.swap(true, Ordering::Acquire) {
                return;
            }
            // Relaxed: a read-only wait for the flag to clear before the
            // next swap (the swap is what orders).
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 128 {
                    spin_loop();
                } else {
                    // The holder may have been preempted (more ranks or
                    // threads than cores).
                    yield_now();
                }
            }
        }
    }

    /// Releases the lock (held by the caller).
    #[inline(always)]
    pub(crate) fn unlock(&self) {
        // SYNC POINT: Release pairs with the Acquire swap in `lock`.
        self.locked.store(false, Ordering::Release);
    }
}
