//! Waiting on a 32-bit word in shared memory: spin, then yield, then sleep.
//!
//! Ranks may outnumber cores (CI machines have two), so a waiter must not
//! burn the core its peer needs. [`Backoff`] spins briefly (see
//! docs/performance.md, "Waiting"), then yields the core, then sleeps in
//! the kernel on a process-shared futex until the word changes or a short
//! timeout passes.
//!
//! The futexes here are *not* `FUTEX_PRIVATE_FLAG`: the word lives in the
//! node's shared segment and the waker is usually another process. The
//! kernel keys such a futex by the backing page, so the same word mapped in
//! two processes is the same futex.
//!
//! # Example
//! ```
//! use shmheap::sync::futex::{wait_until, wake_all};
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! let word = AtomicU32::new(1);
//! // Already true: returns at once.
//! wait_until(&word, |v| v == 1);
//! word.store(2, Ordering::Release);
//! wake_all(&word);
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Spins before the first yield.
const SPIN_LIMIT: u32 = 64;
/// Yields before the first sleep.
const YIELD_LIMIT: u32 = 16;
/// The longest a sleeping waiter stays asleep before it looks again. Wakers
/// always call `wake`, so this bounds only the cost of a missed wake-up
/// (which the protocols below rule out) and of waiting for a peer that does
/// not wake at all (a pure spin-wait counterpart).
const MAX_SLEEP: Duration = Duration::from_millis(2);

/// Sleeps while `*word == expected`, at most `timeout`. Returns early on a
/// wake-up, a signal or a changed value; callers re-check their condition.
/// The thread counts as asleep in the node's runtime meanwhile
/// ([`crate::segment::free_cpus`]).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    crate::segment::asleep(|| futex_wait_uncounted(word, expected, timeout));
}

/// [`futex_wait`] for a helper thread of the runtime (a copy agent), whose
/// sleep says nothing about a rank's core.
pub fn futex_wait_uncounted(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of
    // the call and `ts` outlives it. FUTEX_WAIT only reads the word; any
    // error (EAGAIN when the value already changed, EINTR, ETIMEDOUT) just
    // returns to the caller, which re-checks its condition.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes up to `n` waiters sleeping on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE does not access the word's memory beyond using its
    // address as a key; the pointer is valid for the duration of the call.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n);
    }
}

/// Wakes every waiter sleeping on `word`.
pub fn wake_all(word: &AtomicU32) {
    futex_wake(word, i32::MAX);
}

/// Spin, then yield, then sleep: one step per call to [`Backoff::snooze`].
///
/// Not crossbeam's `Backoff`: that one stops at spin and yield (and leaves
/// blocking to the caller after a few steps), while waits here go on to
/// sleep on a process-shared futex, with their own spin and yield limits;
/// the loom models also replace this type with a model of the same API.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// A fresh backoff that starts by spinning.
    pub const fn new() -> Self {
        Backoff { step: 0 }
    }

    /// True once the spin and yield phases are over: the next wait should
    /// sleep in the kernel.
    pub fn is_sleeping(&self) -> bool {
        self.step >= SPIN_LIMIT + YIELD_LIMIT
    }

    /// Waits a little without a word to sleep on (spin, yield, then sleep
    /// for a short while).
    pub fn snooze(&mut self) {
        if self.step < SPIN_LIMIT {
            for _ in 0..(1u32 << (self.step / 8).min(6)) {
                std::hint::spin_loop();
            }
        } else if self.step < SPIN_LIMIT + YIELD_LIMIT {
            std::thread::yield_now();
        } else {
            crate::segment::asleep(|| std::thread::sleep(Duration::from_micros(50)));
        }
        self.step = self.step.saturating_add(1);
    }

    /// Waits a little for `word` to leave the value `seen`: spins or yields
    /// in the early steps, then sleeps on the futex (bounded by a short
    /// timeout, so a waker that never calls `wake` still lets us re-check).
    pub fn snooze_on(&mut self, word: &AtomicU32, seen: u32) {
        if self.is_sleeping() {
            futex_wait(word, seen, MAX_SLEEP);
            self.step = self.step.saturating_add(1);
        } else {
            self.snooze();
        }
    }
}

/// Blocks until `cond(word)` holds, spinning, then yielding, then sleeping.
///
/// The loads are `Acquire`: whatever the writer published before its
/// `Release` store of the awaited value is visible once this returns.
/// Writers must call [`wake_all`] (or [`futex_wake`]) after changing the
/// word, or sleepers only notice at their timeout.
pub fn wait_until(word: &AtomicU32, mut cond: impl FnMut(u32) -> bool) -> u32 {
    let mut backoff = Backoff::new();
    loop {
        // SYNC POINT: pairs with the writer's Release store of the value
        // that satisfies `cond`.
        let v = word.load(Ordering::Acquire);
        if cond(v) {
            return v;
        }
        backoff.snooze_on(word, v);
    }
}
