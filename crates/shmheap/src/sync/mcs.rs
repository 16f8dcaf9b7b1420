//! A process-shared FIFO queue lock (Mellor-Crummey and Scott).
//!
//! Each contender brings a queue node ([`McsNode`]) and appends it to the
//! lock's queue with one atomic `swap` on the tail. It then waits on a word of
//! *its own* node until the predecessor hands the lock over, so waiters do not
//! all hammer one cache line, and the lock is granted strictly in arrival
//! order: no rank or thread can starve another. The multi-VCI design takes
//! one of these per stream.
//!
//! Waiting spins, then yields, then sleeps on the futex of the node's
//! `locked` word (see [`super::futex`]); a waiter about to sleep marks the
//! word, and only then does the releasing side pay for a `FUTEX_WAKE`.
//!
//! The lock and every node live in memory that all contenders see at the
//! same address: the node segment when ranks share the lock, or any memory
//! (the stack, say) when all contenders are threads of one process. Both
//! structures are `#[repr(C)]`, hold only atomics and pointers to nodes, and
//! all-zero bytes are an unlocked lock and an idle node.
//!
//! # Example
//! ```
//! use shmheap::sync::mcs::{McsLock, McsNode};
//!
//! let lock = McsLock::new();
//! let node = McsNode::new();
//! // SAFETY: every contender is a thread of this process, so a node on the
//! // stack is visible to all of them; the guard is dropped, not leaked.
//! let guard = unsafe { lock.lock(&node) };
//! assert!(lock.is_locked());
//! let other = McsNode::new();
//! // SAFETY: as above.
//! assert!(unsafe { lock.try_lock(&other) }.is_none());
//! drop(guard);
//! assert!(!lock.is_locked());
//! ```

use super::atomic::{AtomicPtr, AtomicU32, Ordering};
use super::futex::{futex_wake, Backoff};
use std::ptr;

/// The node's owner holds the lock (also the idle state of a fresh node).
const GRANTED: u32 = 0;
/// The node's owner waits and is spinning or yielding.
const WAITING: u32 = 1;
/// The node's owner waits and may be asleep on the futex of `locked`.
const SLEEPING: u32 = 2;

/// A FIFO queue lock that can live in shared memory.
///
/// It protects no data of its own; pair it with the data it guards.
#[repr(C)]
#[derive(Debug)]
pub struct McsLock {
    /// The last node in the queue, null when the lock is free.
    tail: AtomicPtr<McsNode>,
}

/// One contender's place in an [`McsLock`]'s queue.
///
/// Cache-line aligned, so that a waiter spinning on its own node does not
/// share a line with anybody else's. A node can be reused for any number of
/// lock acquisitions, one at a time.
///
/// Padded by hand, not with crossbeam's `CachePadded`: nodes live in shared
/// memory, so the layout must be `#[repr(C)]` and the same in every rank;
/// `CachePadded` is 128-byte aligned on x86_64 and has no `#[repr(C)]`
/// guarantee.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct McsNode {
    /// The successor in the queue, linked by the successor itself.
    next: AtomicPtr<McsNode>,
    /// [`GRANTED`] once the predecessor handed the lock over.
    locked: AtomicU32,
}

/// Holds an [`McsLock`] until dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct McsGuard<'a> {
    lock: &'a McsLock,
    node: &'a McsNode,
}

impl McsNode {
    super::shared_const_fn! {
        /// An idle node (all-zero bytes are the same).
        pub fn new() -> Self {
            McsNode {
                next: AtomicPtr::new(ptr::null_mut()),
                locked: AtomicU32::new(GRANTED),
            }
        }
    }
}

impl Default for McsNode {
    fn default() -> Self {
        Self::new()
    }
}

impl McsLock {
    super::shared_const_fn! {
        /// An unlocked lock (all-zero bytes are the same, so a lock in freshly
        /// created shared memory needs no initialisation).
        pub fn new() -> Self {
            McsLock {
                tail: AtomicPtr::new(ptr::null_mut()),
            }
        }
    }

    /// Takes the lock, queueing `node` behind the current holder and any
    /// earlier waiters; returns once every earlier contender has released it.
    ///
    /// # Safety
    ///
    /// 1. `node` lives in memory that every contender of this lock can read
    ///    and write at the same address: the node segment when other
    ///    processes take the lock, any memory when all contenders are threads
    ///    of this process. (Another process writes the hand-off into it.)
    /// 2. `node` is not queued on any lock at the time of the call (it is not
    ///    used by a live [`McsGuard`] or a concurrent `lock`/`try_lock`).
    /// 3. The guard is dropped, not leaked: `node` stays valid and unmoved
    ///    until the guard drops (the borrow enforces this for the guard's
    ///    lifetime), and a leaked guard leaves the node in the queue, where a
    ///    later contender writes into it.
    pub unsafe fn lock<'a>(&'a self, node: &'a McsNode) -> McsGuard<'a> {
        let me = node as *const McsNode as *mut McsNode;
        // Relaxed (both): the node is not yet visible to anyone; the AcqRel
        // swap below publishes these stores to the successor and predecessor.
        node.next.store(ptr::null_mut(), Ordering::Relaxed);
        node.locked.store(WAITING, Ordering::Relaxed);
        // SYNC POINT: AcqRel. Release publishes our node's initial state to
        // the contender that swaps after us (it writes our `next`, and must
        // not be overwritten by our null store). Acquire pairs with the
        // predecessor's Release swap (so its node is initialised before we
        // link into it) or, on null, with the last holder's Release CAS in
        // `unlock` (so its critical section is visible to ours).
        let pred = self.tail.swap(me, Ordering::AcqRel);
        if pred.is_null() {
            return McsGuard { lock: self, node };
        }
        // SAFETY: `pred` was the tail, so its owner is queued and cannot
        // release its node before handing the lock to us, which needs this
        // link (see `unlock`); it lives in memory we can see (caller's
        // contract 1, shared by all contenders).
        let pred = unsafe { &*pred };
        // SYNC POINT: Release pairs with the predecessor's Acquire load of
        // `next` in `unlock`: our `locked = WAITING` store is ordered before
        // its hand-off, which therefore cannot be overwritten.
        pred.next.store(me, Ordering::Release);
        Self::wait_for_hand_off(node);
        McsGuard { lock: self, node }
    }

    /// Spin, yield, then sleep until `node.locked` is [`GRANTED`].
    fn wait_for_hand_off(node: &McsNode) {
        let mut backoff = Backoff::new();
        loop {
            // SYNC POINT: Acquire pairs with the predecessor's Release swap in
            // `unlock`: its critical section happens before ours.
            let v = node.locked.load(Ordering::Acquire);
            if v == GRANTED {
                return;
            }
            if !backoff.is_sleeping() {
                backoff.snooze();
                continue;
            }
            // Announce the sleep so the hand-off wakes us. Relaxed: the mark
            // carries no data; the hand-off is read by the Acquire load above.
            if v == WAITING
                && node
                    .locked
                    .compare_exchange(WAITING, SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue; // granted in the meantime
            }
            // Returns at once unless the word still says SLEEPING.
            backoff.snooze_on(&node.locked, SLEEPING);
        }
    }

    /// Takes the lock if it is free (nobody holds it or waits for it).
    ///
    /// # Safety
    ///
    /// As for [`McsLock::lock`].
    pub unsafe fn try_lock<'a>(&'a self, node: &'a McsNode) -> Option<McsGuard<'a>> {
        // Relaxed: published by the successful CAS below (AcqRel).
        node.next.store(ptr::null_mut(), Ordering::Relaxed);
        let me = node as *const McsNode as *mut McsNode;
        // SYNC POINT: AcqRel on success: Acquire pairs with the last holder's
        // Release CAS in `unlock`; Release publishes our node's null `next`
        // to the contender that queues behind us. Relaxed on failure: we only
        // learn that the lock is taken and touch nothing.
        self.tail
            .compare_exchange(ptr::null_mut(), me, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| McsGuard { lock: self, node })
    }

    /// True if some contender holds the lock or waits for it (a snapshot,
    /// for diagnostics and assertions).
    pub fn is_locked(&self) -> bool {
        // Relaxed: a snapshot that orders nothing; callers must not infer
        // anything about protected data from it.
        !self.tail.load(Ordering::Relaxed).is_null()
    }

    /// Releases the lock held through `node`: hands it to the successor, or
    /// leaves it free when there is none.
    fn unlock(&self, node: &McsNode) {
        let me = node as *const McsNode as *mut McsNode;
        // SYNC POINT: Acquire pairs with the successor's Release link store
        // in `lock`: its `locked = WAITING` is visible before our hand-off.
        let mut next = node.next.load(Ordering::Acquire);
        if next.is_null() {
            // SYNC POINT: Release on success publishes our critical section
            // to the next contender's Acquire swap (or CAS) that reads null.
            // Relaxed on failure: someone has queued behind us; we order
            // against its link store through the Acquire load below.
            if self
                .tail
                .compare_exchange(me, ptr::null_mut(), Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // The classic race: a successor swapped the tail but has not
            // linked itself into our `next` yet. It is a few instructions
            // away (unless preempted), so wait without a futex.
            let mut backoff = Backoff::new();
            loop {
                // SYNC POINT: Acquire, as for the first load of `next`.
                next = node.next.load(Ordering::Acquire);
                if !next.is_null() {
                    break;
                }
                backoff.snooze();
            }
        }
        // SAFETY: `next` is the successor's node. It stays valid at least
        // until the swap below hands it the lock (its owner is waiting for
        // exactly that), and it lives in memory every contender sees (the
        // contract of `lock`).
        let succ = unsafe { &*next };
        // SYNC POINT: Release pairs with the successor's Acquire load in
        // `wait_for_hand_off`: our critical section happens before its own.
        if succ.locked.swap(GRANTED, Ordering::Release) == SLEEPING {
            // The successor may already have taken and released the lock
            // and retired its node: a wake-up on a node that is reused or
            // idle is spurious and harmless (every futex waiter re-checks
            // its word), and `futex_wake` never reads or writes the word.
            futex_wake(&succ.locked, 1);
        }
    }
}

impl Default for McsLock {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for McsGuard<'_> {
    fn drop(&mut self) {
        self.lock.unlock(self.node);
    }
}
