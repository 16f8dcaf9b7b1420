//! Loom models of the lock-free MPSC queue and the MCS lock.
//!
//! The *same source files* as the crate's (`src/sync/mpsc.rs`,
//! `src/sync/mcs.rs`) are compiled here a second time, inside a stand-in for
//! the crate's `sync` module whose `atomic` re-exports loom's atomics and
//! whose `futex` models the kernel: `futex_wait` really blocks (no timeout)
//! until a `futex_wake`, so a lost wake-up shows up as a loom deadlock. The
//! primitives reach atomics and waiting only through `super::atomic` and
//! `super::futex`, which makes this possible without a `--cfg loom` build:
//! the models run in the ordinary `cargo test`.
//!
//! Each model explores every interleaving up to a preemption bound (the
//! number of times the scheduler may switch away from a runnable thread) and
//! checks, besides the assertions, that every access to a loom `UnsafeCell`
//! is ordered by happens-before (the payloads here), i.e. that the
//! primitives' orderings publish what they claim to publish.

use loom::cell::UnsafeCell;
use loom::sync::Arc;

/// Stand-in for `shmheap::sync` over loom's types.
// The included files carry API the models do not exercise.
#[allow(dead_code)]
// Names the directory of the `#[path]` modules inside (`src/sync`).
#[path = "../src/sync"]
mod sync {
    pub mod atomic {
        pub use loom::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
    }

    /// The futex helpers of `src/sync/futex.rs`, with the same signatures,
    /// modelling the kernel with one loom mutex and condition variable.
    pub mod futex {
        use super::atomic::{AtomicU32, Ordering};
        use loom::sync::{Condvar, Mutex};
        use std::time::Duration;

        loom::lazy_static! {
            /// The "kernel": the futex hash bucket lock and its wait queue
            /// (one for all words; a wake-up meant for another word is a
            /// spurious one, which every waiter tolerates).
            static ref KERNEL: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
        }

        /// Sleeps while `*word == expected`, until a wake-up (the timeout is
        /// ignored: a protocol that needs it to make progress deadlocks).
        pub fn futex_wait(word: &AtomicU32, expected: u32, _timeout: Duration) {
            let guard = KERNEL.0.lock().unwrap();
            // SeqCst: the kernel compares under the bucket lock, after a
            // full barrier.
            if word.load(Ordering::SeqCst) == expected {
                drop(KERNEL.1.wait(guard).unwrap());
            }
        }

        /// Wakes the waiters of `word` (and, spuriously, everyone else's).
        pub fn futex_wake(_word: &AtomicU32, _n: i32) {
            let _guard = KERNEL.0.lock().unwrap();
            KERNEL.1.notify_all();
        }

        pub fn wake_all(word: &AtomicU32) {
            futex_wake(word, i32::MAX);
        }

        /// Yields once, then "sleeps" on every later call, so both the
        /// spinning and the sleeping paths of each wait are explored.
        #[derive(Debug, Default)]
        pub struct Backoff {
            step: u32,
        }

        impl Backoff {
            pub const fn new() -> Self {
                Backoff { step: 0 }
            }

            pub fn is_sleeping(&self) -> bool {
                self.step >= 1
            }

            pub fn snooze(&mut self) {
                self.step = self.step.saturating_add(1);
                loom::thread::yield_now();
            }

            pub fn snooze_on(&mut self, word: &AtomicU32, seen: u32) {
                if self.is_sleeping() {
                    futex_wait(word, seen, Duration::from_millis(2));
                    self.step = self.step.saturating_add(1);
                } else {
                    self.snooze();
                }
            }
        }

        pub fn wait_until(word: &AtomicU32, mut cond: impl FnMut(u32) -> bool) -> u32 {
            let mut backoff = Backoff::new();
            loop {
                let v = word.load(Ordering::Acquire);
                if cond(v) {
                    return v;
                }
                backoff.snooze_on(word, v);
            }
        }
    }

    /// As in `src/sync/mod.rs`, minus the `const` (loom's atomics have no
    /// `const` constructors).
    macro_rules! shared_const_fn {
        ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
            $(#[$attr])* $vis fn $($rest)*
        };
    }
    pub(crate) use shared_const_fn;

    #[path = "mcs.rs"]
    pub mod mcs;
    #[path = "mpsc.rs"]
    pub mod mpsc;
}

use sync::mcs::{McsLock, McsNode};
use sync::mpsc::{MpscLink, MpscQueue, Pop};

/// Runs `f` under loom with the given preemption bound, unless the
/// `LOOM_MAX_PREEMPTIONS` environment variable asks for another (the bounds
/// below keep each model to seconds; `LOOM_MAX_PREEMPTIONS=3` explores the
/// MPSC models more deeply in a minute or two).
fn check(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    let start = std::time::Instant::now();
    builder.check(f);
    eprintln!("model explored in {:.2?}", start.elapsed());
}

// ---------------------------------------------------------------- MPSC ----

/// A queued message: the link first, then the payload.
#[repr(C)]
struct Msg {
    link: MpscLink,
    producer: usize,
    /// Written by the producer before the push, read by the consumer after
    /// the pop: loom checks that the queue orders the two.
    seq: UnsafeCell<usize>,
}

/// `producers` threads push `per_producer` messages each while the model's
/// main thread consumes; every message arrives exactly once, in its
/// producer's order, with its payload published.
fn mpsc_model(producers: usize, per_producer: usize) {
    let queue = Arc::new(MpscQueue::new());
    let threads: Vec<_> = (0..producers)
        .map(|producer| {
            let queue = queue.clone();
            loom::thread::spawn(move || {
                for i in 0..per_producer {
                    let msg = Box::into_raw(Box::new(Msg {
                        link: MpscLink::new(),
                        producer,
                        seq: UnsafeCell::new(usize::MAX),
                    }));
                    // SAFETY: `msg` is a fresh allocation nobody else sees yet.
                    unsafe { (*msg).seq.with_mut(|s| *s = i) };
                    // SAFETY: `msg` is a valid, unqueued `Msg` (link first)
                    // that we no longer touch; the queue sits in its `Arc`.
                    unsafe { queue.push(msg.cast::<MpscLink>()) };
                }
            })
        })
        .collect();

    let total = producers * per_producer;
    let mut next_seq = vec![0usize; producers];
    let mut received = 0;
    while received < total {
        // SAFETY: the main thread is the only consumer; the queue does not
        // move and every node is a live `Msg` until we free it below.
        match unsafe { queue.pop() } {
            Pop::Item(link) => {
                // SAFETY: every node pushed is a boxed `Msg` with its link
                // first; it has left the queue and is ours now.
                let msg = unsafe { Box::from_raw(link.cast::<Msg>()) };
                let seq = msg.seq.with(|s| {
                    // SAFETY: the producer's write happens before the pop
                    // (loom checks it); nobody writes it any more.
                    unsafe { *s }
                });
                assert_eq!(seq, next_seq[msg.producer], "FIFO per producer");
                next_seq[msg.producer] += 1;
                received += 1;
            }
            Pop::Empty | Pop::Inconsistent => loom::thread::yield_now(),
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(next_seq, vec![per_producer; producers]);
    // SAFETY: still the only consumer.
    assert_eq!(unsafe { queue.pop() }, Pop::Empty, "nothing duplicated");
    assert!(queue.is_empty());
}

#[test]
fn loom_mpsc_two_producers_two_items_each() {
    check(2, || mpsc_model(2, 2));
}

#[test]
fn loom_mpsc_three_producers_one_item_each() {
    check(2, || mpsc_model(3, 1));
}

// ----------------------------------------------------------------- MCS ----

struct Guarded {
    lock: McsLock,
    count: UnsafeCell<usize>,
}

// SAFETY: `count` is only accessed while `lock` is held (and loom checks
// that those accesses are ordered).
unsafe impl Sync for Guarded {}
// SAFETY: all fields are sendable; the `UnsafeCell` is guarded as above.
unsafe impl Send for Guarded {}

fn increment_under_lock(shared: &Guarded, node: &McsNode, iters: usize) {
    for _ in 0..iters {
        // SAFETY: all contenders are threads of this model; `node` is used
        // by this thread only, one acquisition at a time, and the guard is
        // dropped.
        let guard = unsafe { shared.lock.lock(node) };
        shared.count.with_mut(|c| {
            // SAFETY: the lock is held; loom reports any unordered access.
            unsafe { *c += 1 }
        });
        drop(guard);
    }
}

/// `threads` threads (the main one included) each take the lock `iters`
/// times and increment a plain counter inside.
fn mcs_model(threads: usize, iters: usize) {
    let shared = Arc::new(Guarded {
        lock: McsLock::new(),
        count: UnsafeCell::new(0),
    });
    let others: Vec<_> = (1..threads)
        .map(|_| {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let node = McsNode::new();
                increment_under_lock(&shared, &node, iters);
            })
        })
        .collect();
    let node = McsNode::new();
    increment_under_lock(&shared, &node, iters);
    for t in others {
        t.join().unwrap();
    }
    assert!(!shared.lock.is_locked());
    // SAFETY: every other thread has been joined.
    let count = shared.count.with(|c| unsafe { *c });
    assert_eq!(count, threads * iters);
}

#[test]
fn loom_mcs_two_threads_twice_each() {
    check(4, || mcs_model(2, 2));
}

#[test]
fn loom_mcs_three_threads() {
    check(3, || mcs_model(3, 1));
}

#[test]
fn loom_mcs_try_lock_against_lock() {
    check(3, || {
        let shared = Arc::new(Guarded {
            lock: McsLock::new(),
            count: UnsafeCell::new(0),
        });
        let t = {
            let shared = shared.clone();
            loom::thread::spawn(move || {
                let node = McsNode::new();
                increment_under_lock(&shared, &node, 1);
            })
        };
        let node = McsNode::new();
        // SAFETY: as in `increment_under_lock`.
        let won = match unsafe { shared.lock.try_lock(&node) } {
            Some(guard) => {
                shared.count.with_mut(|c| {
                    // SAFETY: the lock is held.
                    unsafe { *c += 1 }
                });
                drop(guard);
                1
            }
            None => 0,
        };
        t.join().unwrap();
        // SAFETY: the other thread has been joined.
        assert_eq!(shared.count.with(|c| unsafe { *c }), 1 + won);
        assert!(!shared.lock.is_locked());
    });
}
