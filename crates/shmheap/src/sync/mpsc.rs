//! A lock-free intrusive multi-producer, single-consumer queue that can live
//! in shared memory (Vyukov's intrusive MPSC queue, "MCS-style": producers
//! queue up by swapping the tail, as MCS lock contenders do).
//!
//! This is the incoming queue of a VCI: any thread of any rank appends with
//! **one atomic `swap`** on the tail and one release store that links the
//! previous node to the new one; no lock, no retry loop, no allocation. The
//! single consumer (the VCI's progress) takes nodes from the head in the order
//! their producers' swaps took effect, so nodes from one producer come out in
//! the order it pushed them.
//!
//! The queue is *intrusive*: it allocates nothing and stores pointers to the
//! caller's nodes, each of which embeds an [`MpscLink`] as its **first
//! field** of a `#[repr(C)]` struct, so a `*mut MpscLink` returned by
//! [`MpscQueue::pop`] casts back to the node. Across ranks the nodes live in
//! the node segment, which every rank maps at the same address.
//!
//! Between a producer's swap and its link store the queue is briefly
//! *inconsistent*: the new node is the tail but not yet reachable from the
//! head. A consumer that reaches the gap gets [`Pop::Inconsistent`] and tries
//! again later ([`MpscQueue::pop_spin`] does so with backoff). The node about
//! to be returned must have a successor, so the queue keeps a *stub* node of
//! its own that it re-appends when the consumer reaches the last node.
//!
//! The stub lives inside the queue and a null head or tail means "the stub",
//! so all-zero bytes are an empty queue; [`MpscQueue::init`] (re)initialises
//! one in place when its memory is not known to be zero. Once something has
//! been pushed, the queue's address is stored in the queue and in nodes, so
//! it must not move.
//!
//! # Example
//! ```
//! use shmheap::sync::mpsc::{MpscLink, MpscQueue};
//!
//! #[repr(C)]
//! struct Msg {
//!     link: MpscLink, // first field: a `*mut MpscLink` is a `*mut Msg`
//!     value: u32,
//! }
//!
//! let q = MpscQueue::new();
//! let mut a = Msg { link: MpscLink::new(), value: 1 };
//! let mut b = Msg { link: MpscLink::new(), value: 2 };
//! // SAFETY: `a` and `b` outlive their stay in the queue and are not touched
//! // while queued; `q` does not move; every contender is in this process.
//! unsafe {
//!     q.push(&mut a as *mut Msg as *mut MpscLink);
//!     q.push(&mut b as *mut Msg as *mut MpscLink);
//! }
//! let mut got = Vec::new();
//! // SAFETY: this thread is the only consumer.
//! while let Some(p) = unsafe { q.pop_spin() } {
//!     // SAFETY: every node pushed is a `Msg` whose link is its first field.
//!     got.push(unsafe { (*(p as *mut Msg)).value });
//! }
//! assert_eq!(got, [1, 2]);
//! assert!(q.is_empty());
//! ```

use super::atomic::{AtomicPtr, AtomicU32, Ordering};
use super::futex::Backoff;
use std::ptr;

/// The link a node embeds (as the first field of a `#[repr(C)]` struct) to be
/// queued on an [`MpscQueue`].
#[repr(C)]
#[derive(Debug)]
pub struct MpscLink {
    next: AtomicPtr<MpscLink>,
}

impl MpscLink {
    super::shared_const_fn! {
        /// An unlinked link (all-zero bytes are the same).
        pub fn new() -> Self {
            MpscLink {
                next: AtomicPtr::new(ptr::null_mut()),
            }
        }
    }
}

impl Default for MpscLink {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`MpscQueue::pop`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pop {
    /// The oldest node; it has left the queue and belongs to the caller.
    Item(*mut MpscLink),
    /// Nothing queued (a snapshot: a producer may push right after).
    Empty,
    /// A producer has swapped the tail but not yet linked its node: the
    /// queue is not empty, but the next node is not reachable yet. Retry
    /// later.
    Inconsistent,
}

/// The consumer's cache line: the head, the stub (which the consumer
/// re-appends) and the debug check for a second consumer. Padded by hand,
/// not with crossbeam's `CachePadded` (128-byte aligned on x86_64, no
/// `#[repr(C)]` guarantee), since the queue lives in shared memory.
#[repr(C, align(64))]
#[derive(Debug)]
struct ConsumerSide {
    /// The next node to return, or the stub; null means the stub.
    head: AtomicPtr<MpscLink>,
    stub: MpscLink,
    /// Non-zero while a `pop` runs (checked in debug builds only; present in
    /// every build so the layout does not depend on the profile).
    popping: AtomicU32,
}

/// The producers' cache line (padded by hand, as `ConsumerSide`).
#[repr(C, align(64))]
#[derive(Debug)]
struct ProducerSide {
    /// The last node pushed; null means the stub.
    tail: AtomicPtr<MpscLink>,
}

/// An intrusive multi-producer, single-consumer FIFO queue for shared memory.
///
/// Producers (any number, any thread of any process that maps the queue) call
/// [`push`](Self::push); exactly one consumer at a time calls
/// [`pop`](Self::pop) / [`pop_spin`](Self::pop_spin).
#[repr(C)]
#[derive(Debug)]
pub struct MpscQueue {
    consumer: ConsumerSide,
    producer: ProducerSide,
}

impl MpscQueue {
    super::shared_const_fn! {
        /// An empty queue (all-zero bytes are the same). It may be moved until
        /// the first push; see [`MpscQueue::init`] for one that is already in
        /// place.
        pub fn new() -> Self {
            MpscQueue {
                consumer: ConsumerSide {
                    head: AtomicPtr::new(ptr::null_mut()),
                    stub: MpscLink::new(),
                    popping: AtomicU32::new(0),
                },
                producer: ProducerSide {
                    tail: AtomicPtr::new(ptr::null_mut()),
                },
            }
        }
    }

    /// Makes the memory at `this` an empty queue, in place.
    ///
    /// Needed only when that memory is not all-zero (freshly mapped or
    /// zero-filled shared memory already is an empty queue). Nodes still
    /// queued are forgotten.
    ///
    /// # Safety
    ///
    /// `this` is valid for writes and aligned, and no other thread or process
    /// uses the queue during the call.
    pub unsafe fn init(this: *mut MpscQueue) {
        // SAFETY: the caller guarantees `this` is writable, aligned and
        // unused; the old value holds only atomics and pointers, so not
        // dropping it leaks nothing.
        unsafe { this.write(MpscQueue::new()) }
    }

    /// The stub's address (what a null head or tail stands for).
    fn stub(&self) -> *mut MpscLink {
        &self.consumer.stub as *const MpscLink as *mut MpscLink
    }

    fn or_stub(&self, p: *mut MpscLink) -> *mut MpscLink {
        if p.is_null() {
            self.stub()
        } else {
            p
        }
    }

    /// Appends `node`. Wait-free: one swap and one store, whatever the other
    /// producers and the consumer are doing.
    ///
    /// # Safety
    ///
    /// 1. `node` points to a valid [`MpscLink`] that is not queued anywhere,
    ///    and it stays valid and untouched by the caller until the consumer
    ///    pops it (it then belongs to the consumer).
    /// 2. `node` and the queue live in memory that the consumer and every
    ///    producer see at the same address (the node segment across
    ///    processes; any memory between threads of one process).
    /// 3. The queue has not moved since it was first pushed to.
    pub unsafe fn push(&self, node: *mut MpscLink) {
        // SAFETY: `node` is valid and ours until it is linked (contract 1).
        let link = unsafe { &*node };
        // Relaxed: the AcqRel swap in `append` publishes it.
        link.next.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: `node` has a null `next` and is ours (contract 1).
        unsafe { self.append(node) }
    }

    /// Appends `node`, whose `next` is already null.
    ///
    /// # Safety
    ///
    /// As for [`push`](Self::push); `node` may also be the stub.
    unsafe fn append(&self, node: *mut MpscLink) {
        // SYNC POINT: AcqRel. Release publishes the node (the caller's payload
        // and its null `next`) to the producer that swaps after us and links
        // into it. Acquire pairs with the Release of the previous swap, so the
        // previous node's null `next` is ordered before our link below.
        let prev = self.or_stub(self.producer.tail.swap(node, Ordering::AcqRel));
        // SAFETY: `prev` (a producer's node or the stub) is in the queue with
        // a null `next` that only we may set: the consumer does not return or
        // re-append a node before its `next` is linked, so it is still valid.
        let prev = unsafe { &*prev };
        // SYNC POINT: Release pairs with the consumer's Acquire load of
        // `next` in `pop`: the node's payload is visible once it is reached.
        prev.next.store(node, Ordering::Release);
    }

    /// Takes the oldest node.
    ///
    /// # Safety
    ///
    /// 1. Only one thread (of one process) consumes at a time: `pop` and
    ///    `pop_spin` never run concurrently with themselves or each other.
    ///    Debug builds panic if they do.
    /// 2. The queue has not moved since it was first pushed to, and every
    ///    queued node is still valid (the contract of [`push`](Self::push)).
    pub unsafe fn pop(&self) -> Pop {
        #[cfg(debug_assertions)]
        let _check = ConsumerCheck::enter(&self.consumer.popping);
        let stub = self.stub();
        // Relaxed: only the consumer writes `head`, and we are the consumer.
        let mut head = self.or_stub(self.consumer.head.load(Ordering::Relaxed));
        // SAFETY: `head` is the stub or a node that is queued and not yet
        // returned, so it is valid (contract 2).
        // SYNC POINT: Acquire pairs with the Release link store in `append`:
        // the linked node's payload and `next` are visible.
        let mut next = unsafe { &*head }.next.load(Ordering::Acquire);
        if head == stub {
            if next.is_null() {
                // Relaxed: only compared with the stub, never dereferenced;
                // an older value than the latest is the snapshot's inherent
                // staleness (a push that happens-before this call is seen).
                let tail = self.or_stub(self.producer.tail.load(Ordering::Relaxed));
                return if tail == stub {
                    Pop::Empty
                } else {
                    Pop::Inconsistent
                };
            }
            // Step over the stub. Relaxed: see the load of `head`.
            self.consumer.head.store(next, Ordering::Relaxed);
            head = next;
            // SAFETY: `head` was linked and not yet returned: valid.
            // SYNC POINT: Acquire, as for the first load of `next`.
            next = unsafe { &*head }.next.load(Ordering::Acquire);
        }
        if !next.is_null() {
            // Relaxed: see the load of `head`.
            self.consumer.head.store(next, Ordering::Relaxed);
            return Pop::Item(head);
        }
        // `head` is the last linked node. Unless it is also the tail (a
        // producer is between its swap and its link), re-append the stub so
        // that `head` gets a successor and can leave.
        // Relaxed: only compared with `head`; we saw (through the Acquire
        // link to `head`) the swap that made `head` the tail, so we read that
        // or a later value.
        if self.producer.tail.load(Ordering::Relaxed) != head {
            return Pop::Inconsistent;
        }
        // Relaxed: published by the AcqRel swap in `append`. Nobody else
        // writes the stub's `next` now: the stub is not in the queue (we
        // stepped over it, after its one linker had linked).
        self.consumer
            .stub
            .next
            .store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the stub is ours to append (not queued, null `next`), and
        // the queue has not moved (contract 2).
        unsafe { self.append(stub) };
        // SAFETY: `head` has not been returned: still valid.
        // SYNC POINT: Acquire, as for the first load of `next`.
        next = unsafe { &*head }.next.load(Ordering::Acquire);
        if next.is_null() {
            // A producer swapped in before our stub and has not linked yet;
            // the stub now waits behind its node.
            return Pop::Inconsistent;
        }
        // Relaxed: see the load of `head`.
        self.consumer.head.store(next, Ordering::Relaxed);
        Pop::Item(head)
    }

    /// Takes the oldest node, waiting out [`Pop::Inconsistent`] (spin, yield,
    /// then short sleeps); `None` when the queue is empty.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop).
    pub unsafe fn pop_spin(&self) -> Option<*mut MpscLink> {
        let mut backoff = Backoff::new();
        loop {
            // SAFETY: the caller upholds `pop`'s contract.
            match unsafe { self.pop() } {
                Pop::Item(node) => return Some(node),
                Pop::Empty => return None,
                Pop::Inconsistent => backoff.snooze(),
            }
        }
    }

    /// True if nothing is queued or being pushed (a snapshot: producers may
    /// push at any time, and a consumer may be halfway through a `pop`).
    pub fn is_empty(&self) -> bool {
        let stub = self.stub();
        // Relaxed (both): a snapshot, compared with the stub and never
        // dereferenced; it orders nothing. The queue holds nothing exactly
        // when the head and the tail are both the stub.
        self.or_stub(self.consumer.head.load(Ordering::Relaxed)) == stub
            && self.or_stub(self.producer.tail.load(Ordering::Relaxed)) == stub
    }
}

impl Default for MpscQueue {
    fn default() -> Self {
        Self::new()
    }
}

/// Panics if a second consumer enters `pop` while one is inside (debug
/// builds).
#[cfg(debug_assertions)]
struct ConsumerCheck<'a>(&'a AtomicU32);

#[cfg(debug_assertions)]
impl<'a> ConsumerCheck<'a> {
    fn enter(popping: &'a AtomicU32) -> Self {
        // Relaxed: a diagnostic; two overlapping pops still meet in the
        // word's modification order, whatever the ordering.
        let was = popping.swap(1, Ordering::Relaxed);
        assert_eq!(was, 0, "MpscQueue: two consumers popped at once");
        ConsumerCheck(popping)
    }
}

#[cfg(debug_assertions)]
impl Drop for ConsumerCheck<'_> {
    fn drop(&mut self) {
        // Relaxed: as in `enter`.
        self.0.store(0, Ordering::Relaxed);
    }
}
