//! Loom models of the fast-box ring and of the lane's spin lock.
//!
//! The *same source files* as the crate's (`src/fastbox/ring.rs`,
//! `src/fastbox/lane_lock.rs`) are compiled here a second time, inside a
//! stand-in for the crate's `fastbox` module whose `sync` gives loom's
//! atomics, hints and cell (two of them wrapped, see there), and whose
//! `FB_SLOTS` makes the ring two slots long, so that a few messages already
//! wrap around it and run out of credit (and a message spans at most both
//! slots, starting in the last and running on into the first). The two files reach atomics, cells and the ring size only
//! through `super`, which makes this possible without a `--cfg loom` build:
//! the models run in the ordinary `cargo test`, as those of `shmheap`'s
//! queue and MCS lock do.
//!
//! Each model explores every interleaving up to a preemption bound and
//! checks, besides its assertions, that every access to a slot's header and
//! payload (loom `UnsafeCell`s) is ordered by happens-before: that the
//! sequence word publishes the slot to the receiver and the credit hands it
//! back to the sender.

use loom::cell::UnsafeCell;
use loom::sync::Arc;

/// Stand-in for `vci::fastbox` over loom's types.
// The included files carry API the models do not exercise.
#[allow(dead_code)]
// Names the directory of the `#[path]` modules inside (`src/fastbox`).
#[path = "../src/fastbox"]
mod fastbox {
    /// A two-slot ring: the third message of a stream needs the credit
    /// for the first.
    pub const FB_SLOTS: usize = 2;

    pub mod sync {
        pub use loom::hint::spin_loop;
        pub use loom::sync::atomic::{AtomicU64, Ordering};
        pub use loom::thread::yield_now;

        /// Loom's `UnsafeCell` behind the standard one's API (the ring
        /// takes raw pointers with `get`, as its production code does).
        ///
        /// `get` records an access at the moment the pointer is taken, as
        /// a write (stricter than a read: two unordered reads would be
        /// reported too, and the ring has none). The ring's accesses
        /// through a pointer end before its next atomic operation, which
        /// is the next point where loom may switch threads, so for the
        /// model they happen at that moment.
        #[derive(Debug)]
        pub struct UnsafeCell<T>(loom::cell::UnsafeCell<T>);

        impl<T> UnsafeCell<T> {
            pub fn new(value: T) -> Self {
                UnsafeCell(loom::cell::UnsafeCell::new(value))
            }

            pub fn get(&self) -> *mut T {
                self.0.with_mut(|p| p)
            }
        }

        /// Loom's `AtomicBool`, except that a swap that changes nothing
        /// stores nothing.
        ///
        /// Loom orders concurrent stores only partially and does not model
        /// that a store eventually becomes visible. A spin lock's waiter
        /// whose swap failed has itself stored `true` (a swap always
        /// writes) concurrently with the holder's later release store, and
        /// loom may let the waiter's loads return that `true` in every
        /// iteration: the model never ends. A swap of `true` that finds
        /// `true` stores the value the location already holds; leaving that
        /// store out changes no value any thread can read and no
        /// synchronisation (it carries no Release), so the lock's ordering
        /// and exclusion are checked as they are.
        #[derive(Debug)]
        pub struct AtomicBool(loom::sync::atomic::AtomicBool);

        impl AtomicBool {
            pub fn new(v: bool) -> Self {
                AtomicBool(loom::sync::atomic::AtomicBool::new(v))
            }

            pub fn load(&self, order: Ordering) -> bool {
                self.0.load(order)
            }

            pub fn store(&self, v: bool, order: Ordering) {
                self.0.store(v, order);
            }

            pub fn swap(&self, v: bool, order: Ordering) -> bool {
                // The failure ordering: the load part of `order`.
                let failure = match order {
                    Ordering::AcqRel => Ordering::Acquire,
                    Ordering::Release => Ordering::Relaxed,
                    o => o,
                };
                match self.0.compare_exchange(!v, v, order, failure) {
                    Ok(old) | Err(old) => old,
                }
            }
        }
    }

    #[path = "lane_lock.rs"]
    pub mod lane_lock;
    #[path = "ring.rs"]
    pub mod ring;
}

use fastbox::lane_lock::SpinLock;
use fastbox::ring::{
    FbHead, FbPair, LaneState, SlotData, FB_FIRST_LINE, FB_PAYLOAD, FB_SPAN_MAX, FB_SPAN_SLOTS,
    KIND_PLAIN,
};

/// Runs `f` under loom with the given preemption bound, unless the
/// `LOOM_MAX_PREEMPTIONS` environment variable asks for another. A spin
/// lock's waiter spins up to 128 times before it yields, and each spin is
/// a branch of the execution: the branch limit is raised to let it.
fn check(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    builder.max_branches = builder.max_branches.max(20_000);
    let start = std::time::Instant::now();
    builder.check(f);
    eprintln!("model explored in {:.2?}", start.elapsed());
}

// ------------------------------------------------------------ fast box ----

/// Payload length: past the slot's first line, so both parts of a slot's
/// payload (written in two steps, the first line last) are checked.
const LEN: usize = FB_FIRST_LINE + 8;

/// Message `i`'s payload: every byte says which message it belongs to.
fn payload(i: u64) -> [u8; LEN] {
    std::array::from_fn(|k| (i as usize * 31 + k) as u8)
}

/// One sender writes `messages` messages into a fresh ring (retrying while
/// it has no credit, where the engine would queue an envelope instead)
/// while the model's main thread receives them in sequence, alternately
/// copied out of the slot (`take`) and straight into a buffer
/// (`take_into`). Every message arrives once, in order, whole; the ring is
/// empty afterwards.
fn ring_model(messages: u64) {
    let ring = Arc::new(FbPair::new());
    let sender = {
        let ring = ring.clone();
        loom::thread::spawn(move || {
            let mut lane = LaneState::new();
            for i in 1..=messages {
                let head = FbHead {
                    tag: i as i32,
                    context: 7,
                    len: LEN as u32,
                    kind: KIND_PLAIN,
                };
                let bytes = payload(i);
                while !ring.try_send(&mut lane, head, SlotData::Bytes(&bytes)) {
                    loom::thread::yield_now();
                }
                assert_eq!(lane.next, i + 1, "numbered in order");
            }
        })
    };
    let mut seq = 1;
    while seq <= messages {
        let Some(head) = ring.head(seq) else {
            loom::thread::yield_now();
            continue;
        };
        assert_eq!(head.tag, seq as i32, "FIFO: message {seq} is next");
        assert_eq!((head.context, head.len as usize), (7, LEN));
        if seq % 2 == 1 {
            let small = ring.take(seq, head);
            assert_eq!(small.data(), &payload(seq)[..], "payload published");
        } else {
            let mut buf = [0u8; LEN];
            // SAFETY: `buf` holds LEN bytes and is not a slot.
            unsafe { ring.take_into(seq, head, buf.as_mut_ptr(), LEN) };
            assert_eq!(buf, payload(seq), "payload published");
        }
        seq += 1;
    }
    sender.join().unwrap();
    // Nothing duplicated, nothing more: the next number is in no slot.
    assert_eq!(ring.head(messages + 1), None);
    assert!(!ring.ready(messages + 1));
}

#[test]
fn loom_fastbox_two_messages() {
    check(3, || ring_model(2));
}

#[test]
fn loom_fastbox_wraps_around_on_credit() {
    // Four messages in two slots: the third and fourth reuse the first
    // two's slots once the receiver has handed them back.
    check(3, || ring_model(4));
}

/// Without credit the sender refuses rather than overwrite: a stream of
/// `FB_SLOTS + 1` messages that nobody receives leaves the first
/// `FB_SLOTS` in place and the last one unsent; taking one makes room.
#[test]
fn loom_fastbox_refuses_without_credit() {
    check(2, || {
        let ring = Arc::new(FbPair::new());
        let head = |i: u64| FbHead {
            tag: i as i32,
            context: 0,
            len: LEN as u32,
            kind: KIND_PLAIN,
        };
        let mut lane = LaneState::new();
        for i in 1..=fastbox::FB_SLOTS as u64 {
            assert!(ring.try_send(&mut lane, head(i), SlotData::Bytes(&payload(i))));
        }
        let last = fastbox::FB_SLOTS as u64 + 1;
        assert!(!ring.try_send(&mut lane, head(last), SlotData::Bytes(&payload(last))));
        let receiver = {
            let ring = ring.clone();
            loom::thread::spawn(move || {
                let h = ring.head(1).expect("sent before the spawn");
                assert_eq!(ring.take(1, h).data(), &payload(1)[..]);
            })
        };
        // The sender retries while the receiver hands the slot back.
        while !ring.try_send(&mut lane, head(last), SlotData::Bytes(&payload(last))) {
            loom::thread::yield_now();
        }
        receiver.join().unwrap();
        let h = ring.head(last).expect("sent");
        assert_eq!(h.tag, last as i32);
        assert_eq!(ring.take(last, h).data(), &payload(last)[..]);
    });
}

/// A payload that takes both slots of the two-slot ring: the first
/// slot's data, then the continuation slot's header bytes and some of its
/// data.
const SPAN_LEN: usize = FB_PAYLOAD + 40;

/// Message `i`'s payload of `len` bytes.
fn payload_of(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i as usize * 17 + k) as u8).collect()
}

/// One sender writes messages of the given lengths (two-slot spans and
/// one-slot messages) into the two-slot ring, retrying without credit,
/// while the main thread receives them: a span that starts in the ring's
/// last slot runs on across the ring's end into its first, and a span
/// needs the credit for its last slot, not only its first. Every payload
/// arrives whole (alternately copied out and taken into a buffer), the
/// receiver's expected number steps by each message's slots, and every
/// access to the slots' cells is ordered.
fn span_model(lens: &'static [usize]) {
    assert_eq!((FB_SPAN_SLOTS, FB_SPAN_MAX >= SPAN_LEN), (2, true));
    let ring = Arc::new(FbPair::new());
    let sender = {
        let ring = ring.clone();
        loom::thread::spawn(move || {
            let mut lane = LaneState::new();
            for (i, &len) in (1..).zip(lens) {
                let head = FbHead {
                    tag: i as i32,
                    context: 5,
                    len: len as u32,
                    kind: KIND_PLAIN,
                };
                let bytes = payload_of(i, len);
                let first = lane.next;
                loop {
                    let sent = if len > FB_PAYLOAD {
                        ring.try_send_span(&mut lane, head, &bytes)
                    } else {
                        ring.try_send(&mut lane, head, SlotData::Bytes(&bytes))
                    };
                    if sent {
                        break;
                    }
                    loom::thread::yield_now();
                }
                assert_eq!(lane.next, first + head.slots(), "numbered by slots");
            }
        })
    };
    let mut seq = 1;
    for (i, &len) in (1..).zip(lens) {
        let head = loop {
            match ring.head(seq) {
                Some(h) => break h,
                None => loom::thread::yield_now(),
            }
        };
        assert_eq!((head.tag, head.len as usize), (i as i32, len));
        assert_eq!(head.slots(), if len > FB_PAYLOAD { 2 } else { 1 });
        if i % 2 == 1 {
            assert_eq!(ring.take(seq, head).data(), &payload_of(i, len)[..]);
        } else {
            let mut buf = vec![0u8; len];
            // SAFETY: `buf` holds `len` bytes and is not a slot.
            unsafe { ring.take_into(seq, head, buf.as_mut_ptr(), len) };
            assert_eq!(buf, payload_of(i, len));
        }
        seq += head.slots();
    }
    sender.join().unwrap();
    // Nothing more: the next numbers are in no slot (the continuation
    // slots' sequence words were never written).
    assert!(!ring.ready(seq) && !ring.ready(seq + 1));
}

#[test]
fn loom_fastbox_span_crosses_the_end() {
    // Numbers 1 and 2: the ring's last slot, then its first.
    check(3, || span_model(&[SPAN_LEN]));
}

#[test]
fn loom_fastbox_spans_wait_for_credit_of_their_last_slot() {
    // The span across the end (1–2), a one-slot message (3, in slot 1),
    // then a span (4–5) whose first slot is free once the first span is
    // consumed but whose last slot is message 3's.
    check(3, || span_model(&[SPAN_LEN, LEN, SPAN_LEN]));
}

// ----------------------------------------------------------- lane lock ----

struct Guarded {
    lock: SpinLock,
    count: UnsafeCell<usize>,
}

// SAFETY: `count` is only accessed while `lock` is held (and loom checks
// that those accesses are ordered).
unsafe impl Sync for Guarded {}
// SAFETY: all fields are sendable; the `UnsafeCell` is guarded as above.
unsafe impl Send for Guarded {}

fn increment_under_lock(shared: &Guarded, iters: usize) {
    for _ in 0..iters {
        shared.lock.lock();
        shared.count.with_mut(|c| {
            // SAFETY: the lock is held; loom reports any unordered access.
            unsafe { *c += 1 }
        });
        shared.lock.unlock();
    }
}

/// `threads` threads (the main one included) each take the lock `iters`
/// times and increment a plain counter inside: mutual exclusion, and each
/// holder sees its predecessors' writes.
fn lane_lock_model(threads: usize, iters: usize) {
    let shared = Arc::new(Guarded {
        lock: SpinLock::new(),
        count: UnsafeCell::new(0),
    });
    let others: Vec<_> = (1..threads)
        .map(|_| {
            let shared = shared.clone();
            loom::thread::spawn(move || increment_under_lock(&shared, iters))
        })
        .collect();
    increment_under_lock(&shared, iters);
    for t in others {
        t.join().unwrap();
    }
    // SAFETY: every other thread has been joined.
    let count = shared.count.with(|c| unsafe { *c });
    assert_eq!(count, threads * iters);
}

#[test]
fn loom_lane_lock_two_threads_twice_each() {
    check(4, || lane_lock_model(2, 2));
}

#[test]
fn loom_lane_lock_three_threads() {
    check(1, || lane_lock_model(3, 1));
}
