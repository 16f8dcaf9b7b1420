//! A small process-shared mutex for the allocator's internal state.
//!
//! Drepper's three-state futex mutex ("Futexes Are Tricky", mutex 3): 0 =
//! unlocked, 1 = locked, 2 = locked with possible sleepers. Uncontended lock
//! and unlock are one atomic operation each; only a contended unlock enters
//! the kernel. It contains one `AtomicU32` and nothing else, so it can live in
//! the shared segment and be taken by any thread of any rank.
//!
//! This lock is not fair. Where FIFO order between ranks matters, use the MCS
//! lock in [`super::mcs`].
//!
//! # Example
//! ```
//! use shmheap::sync::mutex::RawShmMutex;
//!
//! let m = RawShmMutex::new();
//! {
//!     let _g = m.lock();
//!     // critical section
//! }
//! assert!(m.try_lock().is_some());
//! ```

use super::futex::{futex_wait, futex_wake, Backoff};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A process-shared mutual-exclusion lock with no protected data of its own.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RawShmMutex {
    state: AtomicU32,
}

/// Holds a [`RawShmMutex`] until dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct RawShmMutexGuard<'a> {
    mutex: &'a RawShmMutex,
}

impl RawShmMutex {
    /// An unlocked mutex (all-zero bytes are also an unlocked mutex, so one in
    /// freshly created shared memory needs no initialisation).
    pub const fn new() -> Self {
        RawShmMutex {
            state: AtomicU32::new(UNLOCKED),
        }
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<RawShmMutexGuard<'_>> {
        // SYNC POINT: Acquire pairs with the Release in `unlock`, so the
        // previous holder's writes are visible inside the critical section.
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| RawShmMutexGuard { mutex: self })
    }

    /// Takes the lock, spinning briefly, then sleeping on the futex.
    pub fn lock(&self) -> RawShmMutexGuard<'_> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.lock_contended();
        RawShmMutexGuard { mutex: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut backoff = Backoff::new();
        // Spin and yield while the holder is likely to release soon.
        while !backoff.is_sleeping() {
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            backoff.snooze();
        }
        // Sleep. Marking the word CONTENDED makes the holder's unlock wake us;
        // once we took the lock through this path we keep the CONTENDED mark,
        // because other sleepers may exist (the price is one spare wake).
        // SYNC POINT: Acquire as in `try_lock`.
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            futex_wait(&self.state, CONTENDED, Duration::from_millis(100));
        }
    }

    fn unlock(&self) {
        // SYNC POINT: Release publishes the critical section's writes to the
        // next holder's Acquire.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            futex_wake(&self.state, 1);
        }
    }

    /// True if some thread holds the lock (a snapshot, for diagnostics).
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}

impl Drop for RawShmMutexGuard<'_> {
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_across_threads() {
        struct Shared {
            m: RawShmMutex,
            v: std::cell::UnsafeCell<u64>,
        }
        // SAFETY: `v` is only accessed while `m` is held.
        unsafe impl Sync for Shared {}
        let s = Arc::new(Shared {
            m: RawShmMutex::new(),
            v: std::cell::UnsafeCell::new(0),
        });
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let _g = s.m.lock();
                        // SAFETY: the lock is held, so no other thread accesses `v`.
                        unsafe { *s.v.get() += 1 };
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let _g = s.m.lock();
        // SAFETY: the lock is held and all writers have joined.
        assert_eq!(unsafe { *s.v.get() }, 80_000);
    }

    #[test]
    fn try_lock_fails_while_held() {
        let m = RawShmMutex::new();
        let g = m.lock();
        assert!(m.try_lock().is_none());
        assert!(m.is_locked());
        drop(g);
        assert!(m.try_lock().is_some());
    }
}
