//! Ownership passing across real ranks started by the launcher.
//!
//! `harness = false` with hmpi-core's `rank_tests` harness: run plainly,
//! this binary runs the tests below one after another; each launches ranks
//! that re-execute it with `HMPI_TEST_ROLE` naming the rank side. The
//! global allocator is the node heap, so given blocks move by pointer; the
//! tests check that (the taken block lies in the giver's arena, and the
//! engine counts zero-copy receives) as well as every byte of data.

use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use opi::collective::{all_to_all_give, Gather, Scatter};
use opi::fusion::{node_rank, Counter, NodeArray, NodeShared, Signal};
use opi::pool::{self, Policy};
use opi::prelude::*;
use shmheap::ShmHeap;
use std::sync::atomic::{AtomicU64, Ordering};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// A rank's side of a test; it finalizes by dropping the universe.
type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[
    ("types", types_rank),
    ("sizes", sizes_rank),
    ("cycles", cycles_rank),
    ("mismatch", mismatch_rank),
    ("private", private_rank),
    ("interop", interop_rank),
    ("nonblocking", nonblocking_rank),
    ("threads", threads_rank),
    ("collectives", collectives_rank),
    ("fusion", fusion_rank),
    ("ring", ring_rank),
    ("errors", errors_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "every_type_moves_between_two_and_four_ranks",
        every_type_moves_between_two_and_four_ranks,
    ),
    (
        "sizes_from_0_bytes_to_64_mib_move_without_copy",
        sizes_from_0_bytes_to_64_mib_move_without_copy,
    ),
    (
        "ownership_cycles_leave_arenas_at_baseline_freeing_rank_policy",
        ownership_cycles_freeing_rank_policy,
    ),
    (
        "ownership_cycles_leave_arenas_at_baseline_allocating_rank_policy",
        ownership_cycles_allocating_rank_policy,
    ),
    (
        "type_mismatch_is_an_error_and_leaks_nothing",
        type_mismatch_is_an_error_and_leaks_nothing,
    ),
    (
        "values_holding_private_memory_are_moved_into_the_node_heap",
        values_holding_private_memory_are_moved_into_the_node_heap,
    ),
    (
        "interop_with_two_sided_send_and_receive",
        interop_with_two_sided_send_and_receive,
    ),
    (
        "nonblocking_gives_and_takes_mix_with_two_sided_requests",
        nonblocking_gives_and_takes_mix_with_two_sided_requests,
    ),
    (
        "four_threads_per_rank_both_pool_policies",
        four_threads_per_rank_both_pool_policies,
    ),
    (
        "scatter_gather_all_to_all_by_ownership",
        scatter_gather_all_to_all_by_ownership,
    ),
    (
        "node_shared_values_signals_and_counters",
        node_shared_values_signals_and_counters,
    ),
    (
        "more_ranks_than_cores_ring_of_gives",
        more_ranks_than_cores_ring_of_gives,
    ),
    (
        "errors_for_bad_input_return_the_value",
        errors_for_bad_input_return_the_value,
    ),
];

// ---------------------------------------------------------------- parent

/// Values allocated before `init`, i.e. before the process attached to the
/// node heap: private memory (the allocator forwards to the system one).
struct Early {
    vec: Vec<u64>,
    // A box holding a vector: the deep case under test.
    #[allow(clippy::box_collection)]
    boxed_vec: Box<Vec<u32>>,
    strings: Vec<String>,
}

static mut EARLY: Option<Early> = None;

fn main() {
    rank_tests::main(
        |role| {
            let (_, body) = ROLES.iter().find(|(name, _)| *name == role)?;
            if role == "private" {
                let e = Early {
                    vec: (0..1000).collect(),
                    boxed_vec: Box::new((0..5000).collect()),
                    strings: (0..10).map(|i| format!("string {i}")).collect(),
                };
                assert!(!shmheap::is_shared(e.vec.as_ptr()));
                // SAFETY: set once on the main thread before any reader.
                unsafe { EARLY = Some(e) };
            }
            if let Ok(p) = std::env::var("TEST_POLICY") {
                pool::set_policy(if p == "allocating" {
                    Policy::AllocatingRank
                } else {
                    Policy::FreeingRank
                });
            }
            let universe = hmpi_core::init().expect("init");
            body(universe);
            Some(())
        },
        TESTS,
    );
}

fn run_ok(role: &str, ranks: u32) {
    rank_tests::assert_ran(&rank_tests::launch(role, ranks, &[]), role);
}

fn run_env(role: &str, ranks: u32, env: &[(&str, String)]) {
    rank_tests::assert_ran(&rank_tests::launch(role, ranks, env), role);
}

fn every_type_moves_between_two_and_four_ranks() {
    run_ok("types", 2);
    run_ok("types", 4);
}

fn sizes_from_0_bytes_to_64_mib_move_without_copy() {
    run_ok("sizes", 2);
}

fn ownership_cycles_freeing_rank_policy() {
    run_env("cycles", 2, &[("TEST_POLICY", "freeing".into())]);
    run_env("cycles", 3, &[("TEST_POLICY", "freeing".into())]);
}

fn ownership_cycles_allocating_rank_policy() {
    run_env("cycles", 2, &[("TEST_POLICY", "allocating".into())]);
    run_env("cycles", 3, &[("TEST_POLICY", "allocating".into())]);
}

fn type_mismatch_is_an_error_and_leaks_nothing() {
    run_ok("mismatch", 2);
}

fn values_holding_private_memory_are_moved_into_the_node_heap() {
    run_ok("private", 2);
}

fn interop_with_two_sided_send_and_receive() {
    run_ok("interop", 2);
}

fn nonblocking_gives_and_takes_mix_with_two_sided_requests() {
    run_ok("nonblocking", 2);
    run_ok("nonblocking", 3);
}

fn four_threads_per_rank_both_pool_policies() {
    run_env("threads", 2, &[("TEST_POLICY", "freeing".into())]);
    run_env("threads", 2, &[("TEST_POLICY", "allocating".into())]);
}

fn scatter_gather_all_to_all_by_ownership() {
    run_ok("collectives", 4);
}

fn node_shared_values_signals_and_counters() {
    run_ok("fusion", 4);
}

fn more_ranks_than_cores_ring_of_gives() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    run_ok("ring", (cores + 3).max(5));
}

fn errors_for_bad_input_return_the_value() {
    run_ok("errors", 2);
}

// ---------------------------------------------------------------- helpers

fn stats() -> vci::Stats {
    hmpi_core::environment::endpoint().unwrap().stats()
}

/// Bytes this rank's arena hands out (exact: pending remote frees drained,
/// thread caches not counted).
fn arena_in_use() -> usize {
    shmheap::local_stats().unwrap().in_use_bytes()
}

/// Measures this rank's arena after every rank has settled: a barrier (every
/// rank is done freeing and returning buffers), pools released, two more
/// barriers (so every peer has freed what it held of ours, apart from the
/// last barrier's own envelope).
fn settled_in_use(world: &SimpleCommunicator) -> usize {
    world.barrier().unwrap();
    pool::release();
    world.barrier().unwrap();
    world.barrier().unwrap();
    arena_in_use()
}

/// A few envelopes of the barrier may still be in flight when a rank
/// looks; anything as large as one pool page is a leak.
const SLACK: usize = 4096 - 1;

fn assert_baseline(world: &SimpleCommunicator, base: usize, what: &str) {
    let now = settled_in_use(world);
    assert!(
        now.abs_diff(base) <= SLACK,
        "rank {}: {what}: arena in use {now} bytes, baseline {base}",
        world.rank()
    );
}

#[derive(Transferable, Debug, Clone, PartialEq)]
#[transferable(crate = "opi")]
struct Particle {
    pos: [f64; 3],
    id: u64,
    tags: Vec<u16>,
    name: Option<String>,
}

#[derive(Transferable, Debug, Clone, Copy, PartialEq)]
#[transferable(crate = "opi")]
#[repr(C)]
struct Plain {
    a: u32,
    b: [u16; 2],
}

#[derive(Transferable, Debug, Clone, PartialEq)]
#[transferable(crate = "opi")]
enum Shape {
    Dot,
    Circle(f64),
    Path { points: Vec<(i32, i32)> },
}

#[derive(Transferable, Debug, Clone, Copy, PartialEq)]
#[transferable(crate = "opi")]
struct Unit;

#[derive(Transferable, Debug, Clone, PartialEq)]
#[transferable(crate = "opi")]
struct Pair<T, const N: usize> {
    items: [T; N],
}

fn particle(i: u64) -> Particle {
    Particle {
        pos: [i as f64, 2.0 * i as f64, -(i as f64)],
        id: i,
        tags: (0..i as u16 % 50).collect(),
        name: (i % 2 == 0).then(|| format!("p{i}")),
    }
}

// ---------------------------------------------------------------- roles

/// Every supported type, given along a ring and taken from the previous
/// rank, checked value by value.
fn types_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let next = w.process_at_rank((me + 1) % n);
    let prev = w.process_at_rank((me + n - 1) % n);
    let s = me as u64;
    next.give(Box::new(s)).unwrap();
    next.give(Box::new(Plain {
        a: me as u32,
        b: [1, 2],
    }))
    .unwrap();
    next.give(Box::new((7u8, s as u32, true, 'x'))).unwrap();
    next.give(Box::new(Some(s as u32))).unwrap();
    next.give(Box::new(Unit)).unwrap();
    next.give(Box::new(())).unwrap();
    next.give(Box::new([s; 33])).unwrap();
    next.give(Box::new(particle(s + 10))).unwrap();
    next.give(Box::new(Shape::Path {
        points: vec![(1, 2), (3, s as i32)],
    }))
    .unwrap();
    next.give(Box::new(Shape::Circle(0.5))).unwrap();
    next.give(Box::new(Shape::Dot)).unwrap();
    next.give(Box::new(Pair::<u8, 3> { items: [1, 2, 3] }))
        .unwrap();
    next.give((0..100u32).map(|i| i * s as u32).collect::<Vec<_>>())
        .unwrap();
    next.give(vec![Unit; 17]).unwrap();
    next.give(Vec::<u64>::new()).unwrap();
    next.give((0..20).map(particle).collect::<Vec<_>>())
        .unwrap();
    next.give(vec![vec![s as u8; 3]; 4]).unwrap();
    next.give(vec![1.5f32; 9].into_boxed_slice()).unwrap();
    next.give(format!("from rank {me} ✓")).unwrap();
    next.give(String::new()).unwrap();
    next.give(OpiBuf::from_slice(&[s, s + 1, s + 2]).unwrap())
        .unwrap();
    next.give(Box::new(vec![String::from("a"), String::from("bc")]))
        .unwrap();

    let p = (me + n - 1) % n;
    let ps = p as u64;
    assert_eq!(*prev.take::<u64>().unwrap(), ps);
    assert_eq!(
        *prev.take::<Plain>().unwrap(),
        Plain {
            a: p as u32,
            b: [1, 2]
        }
    );
    assert_eq!(
        *prev.take::<(u8, u32, bool, char)>().unwrap(),
        (7, p as u32, true, 'x')
    );
    assert_eq!(*prev.take::<Option<u32>>().unwrap(), Some(p as u32));
    assert_eq!(*prev.take::<Unit>().unwrap(), Unit);
    prev.take::<()>().unwrap();
    assert_eq!(*prev.take::<[u64; 33]>().unwrap(), [ps; 33]);
    let got = prev.take::<Particle>().unwrap();
    assert_eq!(*got, particle(ps + 10));
    assert!(got.check_shared());
    assert_eq!(
        *prev.take::<Shape>().unwrap(),
        Shape::Path {
            points: vec![(1, 2), (3, p)]
        }
    );
    assert_eq!(*prev.take::<Shape>().unwrap(), Shape::Circle(0.5));
    assert_eq!(*prev.take::<Shape>().unwrap(), Shape::Dot);
    assert_eq!(prev.take::<Pair<u8, 3>>().unwrap().items, [1, 2, 3]);
    let v = prev.take_vec::<u32>().unwrap();
    assert_eq!(v, (0..100u32).map(|i| i * p as u32).collect::<Vec<_>>());
    assert_eq!(shmheap::owner_of(v.as_ptr()), Some(p as u32), "zero copy");
    assert_eq!(prev.take_vec::<Unit>().unwrap().len(), 17);
    assert!(prev.take_vec::<u64>().unwrap().is_empty());
    assert_eq!(
        prev.take_vec::<Particle>().unwrap(),
        (0..20).map(particle).collect::<Vec<_>>()
    );
    assert_eq!(
        prev.take_vec::<Vec<u8>>().unwrap(),
        vec![vec![p as u8; 3]; 4]
    );
    assert_eq!(&*prev.take_boxed_slice::<f32>().unwrap(), &[1.5f32; 9][..]);
    assert_eq!(prev.take_string().unwrap(), format!("from rank {p} ✓"));
    assert_eq!(prev.take_string().unwrap(), "");
    assert_eq!(&prev.take_buf::<u64>().unwrap()[..], &[ps, ps + 1, ps + 2]);
    assert_eq!(
        *prev.take::<Vec<String>>().unwrap(),
        vec![String::from("a"), String::from("bc")]
    );
    // Only the five zero-sized values (no block to move: `Unit`, `()`,
    // `Vec<Unit>`, the empty Vec and String) went the copy path.
    let st = stats();
    assert_eq!(st.owned_copied, 5, "{st:?}");
    assert_eq!(st.owned_in_place, 17, "{st:?}");
    drop(u);
}

/// Sizes 0 B – 64 MiB, `Vec<u8>` and `OpiBuf<u64>`, ping-pong with every
/// byte checked; the taken block is the giver's.
fn sizes_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let peer = w.process_at_rank(1 - me);
    let mut sizes = vec![0usize, 1, 7, 8, 64, 255, 256, 4095, 4096, 65537];
    let mut s = 1 << 17;
    while s <= 64 << 20 {
        sizes.push(s);
        sizes.push(s + 3);
        s <<= 2;
    }
    sizes.push(64 << 20);
    let fill = |n: usize, seed: usize| -> Vec<u8> {
        (0..n).map(|i| (i.wrapping_mul(31) ^ seed) as u8).collect()
    };
    for &n in &sizes {
        if me == 0 {
            let v = fill(n, n);
            let addr = v.as_ptr() as usize;
            peer.give(v).unwrap();
            let back = peer.take_vec::<u8>().unwrap();
            assert_eq!(back.len(), n);
            assert!(back == fill(n, n + 1), "size {n}");
            if n > 0 {
                assert_eq!(shmheap::owner_of(back.as_ptr()), Some(1), "size {n}");
            }
            // The peer gave back a fresh vector; ours came and went.
            let _ = addr;
        } else {
            let v = peer.take_vec::<u8>().unwrap();
            assert_eq!(v.len(), n);
            assert!(v == fill(n, n), "size {n}");
            if n > 0 {
                assert_eq!(shmheap::owner_of(v.as_ptr()), Some(0), "size {n}");
            }
            drop(v);
            peer.give(fill(n, n + 1)).unwrap();
        }
        // Pooled buffers of u64: the same block comes back.
        let words = n / 8;
        if me == 0 {
            let mut b = OpiBuf::<u64>::with_capacity(words).unwrap();
            b.extend((0..words as u64).map(|i| i ^ 0x5555));
            let addr = b.as_ptr() as usize;
            peer.give(b).unwrap();
            let b = peer.take_buf::<u64>().unwrap();
            assert_eq!(b.len(), words);
            assert!(b
                .iter()
                .enumerate()
                .all(|(i, &x)| x == !(i as u64 ^ 0x5555)));
            if words > 0 {
                assert_eq!(b.as_ptr() as usize, addr, "the very same block");
            }
        } else {
            let mut b = peer.take_buf::<u64>().unwrap();
            for x in b.iter_mut() {
                *x = !*x;
            }
            peer.give(b).unwrap();
        }
    }
    // Zero-sized payloads have no block (the empty Vec, and the OpiBufs of
    // 0, 1 and 7 bytes, which hold no whole u64): the engine's copy path,
    // of nothing. Every other message moved by pointer.
    let st = stats();
    assert_eq!(st.owned_copied, 4, "{st:?}");
    assert_eq!(st.owned_in_place, 2 * sizes.len() as u64 - 4, "{st:?}");
    drop(u);
}

/// 10^5 give/take/free cycles of pooled buffers and vectors between rank
/// pairs, then every arena back at its baseline.
fn cycles_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let next = w.process_at_rank((me + 1) % n);
    let prev = w.process_at_rank((me + n - 1) % n);
    let cycles: usize = std::env::var("OPI_TEST_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    // Warm up the runtime's own structures, then measure.
    next.give(vec![0u8; 10]).unwrap();
    prev.take_vec::<u8>().unwrap();
    let base = settled_in_use(&w);
    let sizes = [8usize, 100, 4096, 5000, 40_000, 1 << 20];
    for i in 0..cycles {
        let size = sizes[i % sizes.len()];
        let mut b = OpiBuf::<u8>::with_capacity(size).unwrap();
        b.resize(size.min(64), (i % 251) as u8);
        next.give_with_tag(b, 1).unwrap();
        let got = prev.take_buf_with_tag::<u8>(1).unwrap();
        assert!(got.iter().all(|&x| x == (i % 251) as u8), "cycle {i}");
        drop(got); // free: to a pool
        if i % 10 == 0 {
            next.give_with_tag(vec![i as u32; size / 4], 2).unwrap();
            let v = prev.take_vec_with_tag::<u32>(2).unwrap();
            assert_eq!(v.len(), size / 4);
        }
    }
    let ps = pool::stats();
    assert!(ps.hits > cycles as u64 / 2, "{ps:?}");
    match pool::policy() {
        Policy::FreeingRank => assert_eq!(ps.frees_returned, 0, "{ps:?}"),
        Policy::AllocatingRank => {
            assert!(ps.frees_returned > 0 && ps.reclaimed > 0, "{ps:?}")
        }
    }
    assert_baseline(&w, base, "after the cycles");
    // One thread communicated: its locks are still biased to it (solo
    // mode, the default), where the kernel allows it. A runtime thread
    // that communicated behind the program's back would have ended it.
    let ep = hmpi_core::environment::endpoint().unwrap();
    assert_eq!(
        ep.solo(),
        ep.config().solo && vci::solo_supported(),
        "solo mode after a single-threaded run"
    );
    drop(u);
}

/// Type mismatches: an error value, the block freed (no leak); a deep
/// mismatch says its inner blocks stay allocated.
fn mismatch_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let peer = w.process_at_rank(1 - me);
    let base = settled_in_use(&w);
    let is_type = |r: Result<()>| match r {
        Err(Error::Type { reason }) => reason,
        other => panic!("expected a type error, got {other:?}"),
    };
    if me == 0 {
        peer.give(vec![1u8; 5000]).unwrap();
        peer.give(Box::new(5u32)).unwrap();
        peer.give(Box::new(5u64)).unwrap();
        peer.give(String::from("text")).unwrap();
        peer.give(OpiBuf::from_slice(&[1.0f64; 100]).unwrap())
            .unwrap();
        peer.give(vec![(1u8, 2u8); 10]).unwrap();
        peer.send(&[1u8, 2, 3][..]).unwrap(); // plain: 3 bytes
        peer.send(&[0xffu8, 0xfe][..]).unwrap(); // not UTF-8
        peer.give(Box::new(vec![9u8; 100_000])).unwrap(); // deep
                                                          // The receiver is done; it sends nothing back.
    } else {
        let r = is_type(peer.take_vec::<u16>().map(drop));
        assert!(r.contains("another element type"), "{r}");
        let r = is_type(peer.take::<i32>().map(drop));
        assert!(r.contains("another type"), "{r}");
        let r = is_type(peer.take_vec::<u64>().map(drop));
        assert!(r.contains("boxed value"), "{r}");
        is_type(peer.take::<u8>().map(drop));
        // A sequence of f64 taken as a Vec of f64 is fine (same kind);
        // as u64 it is not.
        is_type(peer.take_buf::<u64>().map(drop));
        // Tuples are not plain when padded, but (u8, u8) is: still a
        // mismatch against [u8; 2] (another type).
        is_type(peer.take_vec::<[u8; 2]>().map(drop));
        // Plain bytes as u16: 3 bytes is not a whole number of them.
        assert!(matches!(
            peer.take_vec::<u16>(),
            Err(Error::Count { bytes: 3, .. })
        ));
        let r = is_type(peer.take_string().map(drop));
        assert!(r.contains("UTF-8"), "{r}");
        let r = is_type(peer.take::<u64>().map(drop));
        assert!(r.contains("stay allocated"), "{r}");
    }
    // Rank 0's arena keeps the 100 000-byte inner block of the deep value
    // taken with the wrong type (the documented leak); nothing else.
    let now = settled_in_use(&w);
    if me == 0 {
        // The inner block, rounded up to its size class (< 25% more).
        let leaked = now.saturating_sub(base);
        assert!(
            (100_000..125_000 + SLACK).contains(&leaked),
            "leaked {leaked} bytes"
        );
    } else {
        assert!(now.abs_diff(base) <= SLACK, "rank 1: {now} vs {base}");
    }
    drop(u);
}

/// Values whose heap blocks were allocated before the rank attached
/// (private memory): the outer block is copied by the engine, the inner
/// ones are moved into the node heap by `make_shared`.
fn private_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let peer = w.process_at_rank(1 - me);
    // SAFETY: written once before init on this thread, read here only.
    let early = unsafe { (*std::ptr::addr_of_mut!(EARLY)).take() }.unwrap();
    assert!(!early.boxed_vec.check_shared());
    if me == 0 {
        peer.give(early.vec).unwrap();
        peer.give(early.boxed_vec).unwrap();
        peer.give(early.strings).unwrap();
    } else {
        drop(early);
        let v = peer.take_vec::<u64>().unwrap();
        assert_eq!(v, (0..1000).collect::<Vec<u64>>());
        assert!(shmheap::is_shared(v.as_ptr()));
        let b = peer.take::<Vec<u32>>().unwrap();
        assert_eq!(*b, (0..5000).collect::<Vec<u32>>());
        assert!(b.check_shared(), "inner buffer moved into the node heap");
        let s = peer.take_vec::<String>().unwrap();
        assert_eq!(s[9], "string 9");
        assert!(s.check_shared());
    }
    drop(u);
}

/// Gives and two-sided messages share the queue and its order; each side
/// may use the other kind (by copying).
fn interop_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let peer = w.process_at_rank(1 - me);
    if me == 0 {
        for i in 0..50u32 {
            if i % 2 == 0 {
                peer.give_with_tag(vec![i; 100], 5).unwrap();
            } else {
                peer.send_with_tag(&vec![i; 100][..], 5).unwrap();
            }
        }
        peer.give(Box::new([1.5f64; 4])).unwrap();
        peer.give(vec![3u8; 1000]).unwrap();
        peer.send(&[9u64; 3][..]).unwrap();
        // A deep value received with a plain receive: its outer bytes.
        peer.give(Box::new(vec![1u8; 10])).unwrap();
    } else {
        // Alternate takes and plain receives: order is the send order.
        for i in 0..50u32 {
            if i % 3 == 0 {
                let (v, st) = peer.receive_vec_with_tag::<u32>(5).unwrap();
                assert_eq!((v, st.tag()), (vec![i; 100], 5));
            } else {
                let v = peer.take_vec_with_tag::<u32>(5).unwrap();
                assert_eq!(v, vec![i; 100]);
            }
        }
        let (x, _) = peer.receive::<[f64; 4]>().unwrap();
        assert_eq!(x, [1.5; 4]);
        let mut buf = vec![0u8; 1000];
        let st = peer.receive_into(&mut buf[..]).unwrap();
        assert_eq!((st.byte_count(), buf), (1000, vec![3u8; 1000]));
        assert_eq!(*peer.take::<[u64; 3]>().unwrap(), [9; 3]);
        let (raw, st) = peer.receive_vec::<u8>().unwrap();
        assert_eq!(st.byte_count() as usize, std::mem::size_of::<Vec<u8>>());
        assert_eq!(raw.len(), std::mem::size_of::<Vec<u8>>());
        let s = stats();
        assert!(s.owned_copied >= 17, "plain sends taken: {s:?}");
    }
    drop(u);
}

/// Immediate gives and takes next to immediate sends and receives in one
/// scope, waited for in mixed order; a forgotten take is completed by the
/// scope.
fn nonblocking_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let next = w.process_at_rank((me + 1) % n);
    let prev = w.process_at_rank((me + n - 1) % n);
    let p = ((me + n - 1) % n) as u64;
    let mut slots: Vec<TakeSlot<Vec<u64>>> = (0..8).map(|_| TakeSlot::new()).collect();
    let mut forgotten = TakeSlot::<Box<u64>>::new();
    let mut plain = vec![0u64; 16];
    let out = [me as u64; 16];
    hmpi_core::request::scope(|scope| {
        let mut reqs = Vec::new();
        for (i, s) in slots.iter_mut().enumerate() {
            reqs.push(prev.immediate_take_with_tag(scope, s, i as i32).unwrap());
        }
        let r = prev
            .immediate_receive_into_with_tag(scope, &mut plain[..], 100)
            .unwrap();
        reqs.push(r);
        let f = prev
            .immediate_take_with_tag(scope, &mut forgotten, 200)
            .unwrap();
        std::mem::forget(f);
        // Gives in reverse tag order: each lands in its own slot.
        for i in (0..8).rev() {
            let v = vec![me as u64 * 100 + i as u64; 1 + i * 1000];
            reqs.push(next.immediate_give_with_tag(scope, v, i as i32).unwrap());
        }
        reqs.push(next.immediate_send_with_tag(scope, &out[..], 100).unwrap());
        next.give_with_tag(Box::new(42u64), 200).unwrap();
        // Wait in a mixed order: even indices first, then odd.
        let mut reqs: Vec<Option<_>> = reqs.into_iter().map(Some).collect();
        for i in (0..reqs.len()).step_by(2).chain((1..reqs.len()).step_by(2)) {
            let mut r = reqs[i].take().unwrap();
            while r.test().unwrap().is_none() {
                std::thread::yield_now();
            }
            r.wait().unwrap();
        }
    });
    for (i, s) in slots.into_iter().enumerate() {
        let v = s.into_inner().unwrap().unwrap();
        assert_eq!(v, vec![p * 100 + i as u64; 1 + i * 1000]);
    }
    assert_eq!(plain, vec![p; 16]);
    assert_eq!(*forgotten.into_inner().unwrap().unwrap(), 42);

    // The typed request sets take them too: a collection of takes, gives,
    // sends and receives, waited for as one.
    let mut boxes: Vec<TakeSlot<Box<[u32; 8]>>> = (0..4).map(|_| TakeSlot::new()).collect();
    let mut inbox = [0u32; 4];
    let outbox = [me as u32; 4];
    hmpi_core::request::scope(|scope| {
        let mut coll = hmpi_core::request::RequestCollection::new();
        for (i, s) in boxes.iter_mut().enumerate() {
            coll.add(
                prev.immediate_take_with_tag(scope, s, 300 + i as i32)
                    .unwrap(),
            );
        }
        coll.add(
            prev.immediate_receive_into_with_tag(scope, &mut inbox, 310)
                .unwrap(),
        );
        for i in 0..4 {
            let b = Box::new([me as u32 + i; 8]);
            coll.add(
                next.immediate_give_with_tag(scope, b, 300 + i as i32)
                    .unwrap(),
            );
        }
        coll.add(next.immediate_send_with_tag(scope, &outbox, 310).unwrap());
        let mut out = Vec::new();
        coll.wait_all(&mut out);
        assert_eq!(out.len(), 10);
        assert!(out.iter().all(|(_, r)| r.is_ok()), "{out:?}");
    });
    for (i, s) in boxes.into_iter().enumerate() {
        assert_eq!(*s.into_inner().unwrap().unwrap(), [p as u32 + i as u32; 8]);
    }
    assert_eq!(inbox, [p as u32; 4]);
    drop(u);
}

/// Four threads per rank, each passing buffers to the peer's thread of the
/// same index (distinct tags), with per-thread pools.
fn threads_rank(u: Universe) {
    let w = u.world();
    let me = w.rank();
    let base = settled_in_use(&w);
    let sums: Vec<u64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let w = w.clone();
                s.spawn(move || {
                    let peer = w.process_at_rank(1 - me);
                    let mut sum = 0u64;
                    for i in 0..2000u64 {
                        let mut b = OpiBuf::<u64>::with_capacity(16 + (i as usize % 700)).unwrap();
                        b.extend([t, i, me as u64]);
                        peer.give_with_tag(b, t as i32).unwrap();
                        let got = peer.take_buf_with_tag::<u64>(t as i32).unwrap();
                        assert_eq!(&got[..], &[t, i, 1 - me as u64]);
                        sum += got[1];
                    }
                    // Half the threads empty their pool themselves, the
                    // others leave it to the thread's exit. (Under the
                    // allocating-rank policy freed buffers wait on the
                    // rank's return stack, which a releasing thread may
                    // have emptied into its own list: then this thread's
                    // list can be empty.)
                    if t % 2 == 0 {
                        pool::release();
                    } else if pool::policy() == Policy::FreeingRank {
                        assert!(pool::stats().cached_blocks > 0);
                    }
                    sum
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(sums.iter().all(|&s| s == (0..2000).sum::<u64>()));
    assert_baseline(&w, base, "after the threads");
    drop(u);
}

/// Scatter, gather and all-to-all on four ranks, with other roots too.
fn collectives_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    for root in [0, 2] {
        let rp = w.process_at_rank(root);
        let mine: Vec<u32> = if me == root {
            let vals = (0..n).map(|r| vec![r as u32; 10 + r as usize]).collect();
            rp.scatter_give_root(vals).unwrap()
        } else {
            rp.scatter_take().unwrap()
        };
        assert_eq!(mine, vec![me as u32; 10 + me as usize]);
        let back = Box::new(particle(me as u64));
        if me == root {
            let all = rp.gather_take_root(back).unwrap();
            assert_eq!(all.len(), n as usize);
            for (r, p) in all.iter().enumerate() {
                assert_eq!(**p, particle(r as u64));
            }
        } else {
            rp.gather_give(back).unwrap();
        }
    }
    for round in 0..3u32 {
        let vals = (0..n)
            .map(|j| format!("{me}->{j} round {round}"))
            .collect::<Vec<_>>();
        let got = all_to_all_give(&w, vals).unwrap();
        for (i, s) in got.iter().enumerate() {
            assert_eq!(*s, format!("{i}->{me} round {round}"));
        }
    }
    // Wrong counts are errors, and nothing was given.
    assert!(matches!(
        all_to_all_give(&w, vec![Box::new(1u8)]),
        Err(Error::Count { .. })
    ));
    if me == 0 {
        let rp = w.process_at_rank(0);
        assert!(rp.scatter_give_root(vec![Box::new(1u8)]).is_err());
        assert!(rp.scatter_take::<Box<u8>>().is_err(), "root side only");
    }
    // Point-to-point traffic is untouched by the collectives.
    assert!(w.any_process().immediate_probe().unwrap().is_none());
    drop(u);
}

/// The papers' fusion helpers: a node-shared array of (address, counter)
/// slots, a transpose-style exchange through it, signals and a shared
/// value; the memory is freed once every rank dropped its handle.
fn fusion_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let base = settled_in_use(&w);
    {
        assert_eq!(node_rank(&w, me), Some(me as u32));
        assert_eq!(node_rank(&w, n + 3), None);
        let slots = NodeArray::new(&w, 1, n as usize, |_| {
            (AtomicU64::new(0), Counter::new(), Signal::new())
        })
        .unwrap();
        let total = NodeShared::new(&w, 3, || AtomicU64::new(0)).unwrap();
        // Each rank publishes a buffer: element j is for rank j.
        let data: Vec<u64> = (0..n as u64).map(|j| me as u64 * 1000 + j).collect();
        let mine = &slots[me as usize];
        // Relaxed: published by the counter's add (Release) below.
        mine.0.store(data.as_ptr() as u64, Ordering::Relaxed);
        let epoch = mine.1.add(1);
        // Fused loop: read straight from every rank's buffer.
        let mut got = vec![0u64; n as usize];
        for r in 0..n as usize {
            slots[r].1.wait_until_greater(epoch);
            // Relaxed: ordered by the counter wait (Acquire) above.
            let p = slots[r].0.load(Ordering::Relaxed) as *const u64;
            // SAFETY: rank r published its live vector (in the node heap)
            // before its counter add (Release), which we acquired; it keeps
            // it until the second counter round below.
            got[r] = unsafe { p.add(me as usize).read() };
            // Relaxed: only the sum matters, read after the barrier.
            total.fetch_add(got[r], Ordering::Relaxed);
        }
        assert_eq!(
            got,
            (0..n as u64)
                .map(|r| r * 1000 + me as u64)
                .collect::<Vec<_>>()
        );
        // Second round: nobody reads `data` any more after this.
        let epoch = mine.1.add(1);
        for r in 0..n as usize {
            slots[r].1.wait_until_greater(epoch);
        }
        drop(data);
        // Signals: a token around the ring.
        let next = ((me + 1) % n) as usize;
        if me == 0 {
            slots[next].2.set();
            slots[0].2.wait(true);
        } else {
            slots[me as usize].2.wait(true);
            slots[next].2.set();
        }
        slots[me as usize].2.clear();
        w.barrier().unwrap();
        let expect: u64 = (0..n as u64)
            .flat_map(|r| (0..n as u64).map(move |j| r * 1000 + j))
            .sum();
        // Relaxed: the barrier ordered every rank's additions before this.
        assert_eq!(total.load(Ordering::Relaxed), expect);
    }
    assert_baseline(&w, base, "node-shared memory freed by the last handle");
    drop(u);
}

/// A ring of gives with more ranks than cores.
fn ring_rank(u: Universe) {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let next = w.process_at_rank((me + 1) % n);
    let prev = w.process_at_rank((me + n - 1) % n);
    let mut v = if me == 0 { vec![0u64] } else { Vec::new() };
    for lap in 0..20 {
        if me != 0 || lap > 0 {
            v = prev.take_vec::<u64>().unwrap();
            v.push(me as u64);
        }
        next.give(std::mem::take(&mut v)).unwrap();
    }
    if me == 0 {
        let v = prev.take_vec::<u64>().unwrap();
        assert_eq!(v.len(), 1 + 20 * (n as usize - 1) + 19);
    }
    drop(u);
}

/// Bad ranks and tags: the value comes back; takes report errors.
fn errors_rank(u: Universe) {
    let w = u.world();
    let b = Box::new([7u8; 100]);
    let e = w.process_at_rank(9).give(b).unwrap_err();
    assert!(matches!(e.error, Error::Rank { rank: 9, .. }));
    let b = e.into_inner();
    let e = w.process_at_rank(0).give_with_tag(b, -4).unwrap_err();
    assert!(matches!(e.error, Error::Tag { tag: -4 }));
    let v = e.into_inner();
    assert_eq!(*v, [7u8; 100]);
    assert!(matches!(
        w.process_at_rank(5).take::<u8>(),
        Err(Error::Rank { rank: 5, .. })
    ));
    assert!(matches!(
        w.process_at_rank(0).take_with_tag::<u8>(-7),
        Err(Error::Tag { tag: -7 })
    ));
    assert!(matches!(
        w.process_at_rank(hmpi_core::PROC_NULL).take::<u8>(),
        Err(Error::Rank { .. })
    ));
    // A give to PROC_NULL drops the value.
    w.process_at_rank(hmpi_core::PROC_NULL)
        .give(vec![1u8; 10])
        .unwrap();
    // `?` on a give keeps the error, drops the value.
    let f = || -> Result<()> {
        w.process_at_rank(42).give(Box::new(1u8))?;
        Ok(())
    };
    assert!(matches!(f(), Err(Error::Rank { rank: 42, .. })));
    drop(u);
}
