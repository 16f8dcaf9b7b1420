//! The typed runtime across real ranks started by the launcher.
//!
//! This test binary has its own small harness (`harness = false`, as
//! `crates/vci/tests/ranks.rs`): run plainly, it runs the tests below one
//! after another; each launches ranks that re-execute this binary with
//! `HMPI_TEST_ROLE` naming the rank side to run. Its global allocator is the
//! node heap, so `Vec`s are shared memory (single copy) once a rank has
//! attached; arrays on the stack are private (two copy).

use hmpi_core::launch::{rank_tests, JobReport, RankStatus};
use hmpi_core::prelude::*;
use hmpi_core::GroupRelation;
use shmheap::ShmHeap;
use std::time::Duration;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// A rank's side of a test; it finalizes by dropping the universe.
type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[
    ("pingpong", pingpong_rank),
    ("any-source", any_source_rank),
    ("isolation", isolation_rank),
    ("groups", groups_rank),
    ("disjoint", disjoint_rank),
    ("ids", ids_rank),
    ("scope", scope_rank),
    ("threads", threads_rank),
    ("errors", errors_rank),
    ("ring", ring_rank),
    ("abort", abort_rank),
    ("panic", panic_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "typed_pingpong_of_several_types_and_sizes",
        typed_pingpong_of_several_types_and_sizes,
    ),
    (
        "any_source_receive_reports_status",
        any_source_receive_reports_status,
    ),
    (
        "dup_and_split_communicators_isolate_traffic",
        dup_and_split_communicators_isolate_traffic,
    ),
    (
        "group_operations_and_subgroup_communicators",
        group_operations_and_subgroup_communicators,
    ),
    (
        "disjoint_subgroups_make_one_communicator_each",
        disjoint_subgroups_make_one_communicator_each,
    ),
    (
        "context_ids_are_reused_after_free",
        context_ids_are_reused_after_free,
    ),
    (
        "scope_immediate_ops_and_forgotten_requests",
        scope_immediate_ops_and_forgotten_requests,
    ),
    (
        "four_threads_per_rank_on_separate_and_shared_communicators",
        four_threads_per_rank_on_separate_and_shared_communicators,
    ),
    (
        "errors_for_bad_input_and_use_after_finalize",
        errors_for_bad_input_and_use_after_finalize,
    ),
    (
        "five_ranks_on_two_cores_ring_split_dup",
        five_ranks_on_two_cores_ring_split_dup,
    ),
    (
        "abort_ends_the_job_with_its_code",
        abort_ends_the_job_with_its_code,
    ),
    (
        "a_panicking_rank_does_not_hang_in_finalize",
        a_panicking_rank_does_not_hang_in_finalize,
    ),
];

// ---------------------------------------------------------------- parent

fn main() {
    rank_tests::main(
        |role| {
            let (_, body) = ROLES.iter().find(|(name, _)| *name == role)?;
            let universe = hmpi_core::init().expect("init");
            body(universe); // finalizes
            assert!(hmpi_core::is_finalized());
            Some(())
        },
        TESTS,
    );
}

fn launch(role: &str, ranks: u32) -> JobReport {
    rank_tests::launch(role, ranks, &[])
}

fn run_ok(role: &str, ranks: u32) {
    rank_tests::assert_ran(&launch(role, ranks), role);
}

fn typed_pingpong_of_several_types_and_sizes() {
    run_ok("pingpong", 2);
}

fn any_source_receive_reports_status() {
    run_ok("any-source", 4);
}

fn dup_and_split_communicators_isolate_traffic() {
    run_ok("isolation", 4);
}

fn group_operations_and_subgroup_communicators() {
    run_ok("groups", 4);
}

fn disjoint_subgroups_make_one_communicator_each() {
    run_ok("disjoint", 4);
}

fn context_ids_are_reused_after_free() {
    run_ok("ids", 3);
}

fn scope_immediate_ops_and_forgotten_requests() {
    run_ok("scope", 2);
}

fn four_threads_per_rank_on_separate_and_shared_communicators() {
    run_ok("threads", 2);
}

fn errors_for_bad_input_and_use_after_finalize() {
    run_ok("errors", 2);
}

fn five_ranks_on_two_cores_ring_split_dup() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    run_ok("ring", (cores + 3).max(5));
}

fn abort_ends_the_job_with_its_code() {
    let report = launch("abort", 3);
    assert!(!report.success(), "{}", rank_tests::describe(&report));
    assert!(!report.timed_out, "{}", rank_tests::describe(&report));
    assert_eq!(
        report.first_failure,
        Some(1),
        "{}",
        rank_tests::describe(&report)
    );
    assert_eq!(report.ranks[1].status, RankStatus::Exited(3));
    // The others were blocked in a receive: the launcher ended them.
    assert_eq!(report.ranks[0].status, RankStatus::Killed);
    assert_eq!(report.exit_code(), 3);
}

fn a_panicking_rank_does_not_hang_in_finalize() {
    let report = launch("panic", 2);
    assert!(
        !report.success() && !report.timed_out,
        "{}",
        rank_tests::describe(&report)
    );
    assert_eq!(
        report.first_failure,
        Some(0),
        "{}",
        rank_tests::describe(&report)
    );
    assert_eq!(report.ranks[1].status, RankStatus::Killed);
    assert!(
        report.elapsed < Duration::from_secs(20),
        "{:?}",
        report.elapsed
    );
}

// ---------------------------------------------------------------- ranks

/// A deterministic value for element `i` of a message.
fn val(seed: u64, i: usize) -> u64 {
    (seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(17)
}

fn pingpong_rank(u: Universe) {
    let world = u.world();
    assert_eq!(world.size(), 2);
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    let sizes = [0usize, 1, 3, 31, 32, 33, 255, 4096, 65_537, 1 << 20];
    for (round, &n) in sizes.iter().enumerate() {
        let seed = round as u64;
        let bytes: Vec<u8> = (0..n).map(|i| val(seed, i) as u8).collect();
        let ints: Vec<i32> = (0..n).map(|i| val(seed, i) as i32).collect();
        let floats: Vec<f64> = (0..n).map(|i| val(seed, i) as f64 * 0.5).collect();
        let quads: Vec<[u64; 4]> = (0..n / 4).map(|i| [val(seed, i); 4]).collect();
        let wide: Vec<u128> = (0..n / 8).map(|i| u128::from(val(seed, i)) << 64).collect();
        if me == 0 {
            peer.send(&bytes).unwrap();
            peer.send_with_tag(&ints[..], 1).unwrap();
            peer.send_with_tag(&floats, 2).unwrap();
            peer.send_with_tag(&quads[..], 3).unwrap();
            peer.send_with_tag(&wide, 4).unwrap();
            let (back, st) = peer.receive_vec::<f64>().unwrap();
            assert_eq!(back, floats);
            assert_eq!((st.source_rank(), st.count::<f64>().unwrap()), (1, n));
        } else {
            let (b, st) = peer.receive_vec::<u8>().unwrap();
            assert_eq!((b, st.tag()), (bytes, 0));
            let mut i = vec![0i32; n];
            let st = peer.receive_into_with_tag(&mut i[..], 1).unwrap();
            assert_eq!((i, st.count::<i32>().unwrap()), (ints, n));
            let (f, _) = peer.receive_vec_with_tag::<f64>(2).unwrap();
            assert_eq!(f, floats);
            let (q, _) = peer.receive_vec_with_tag::<[u64; 4]>(3).unwrap();
            assert_eq!(q, quads);
            let mut w = vec![0u128; n / 8];
            peer.receive_into_with_tag(&mut w, 4).unwrap();
            assert_eq!(w, wide);
            peer.send(&f).unwrap();
        }
    }
    // Single values, and arrays on the stack (private memory: two copy).
    for k in 0..20u64 {
        if me == 0 {
            peer.send(&k).unwrap();
            peer.send(&[k as f32; 100]).unwrap();
            let (x, st) = peer.receive::<u64>().unwrap();
            assert_eq!((x, st.source_rank()), (k * 2, 1));
        } else {
            let (x, _) = peer.receive::<u64>().unwrap();
            let (a, _) = peer.receive::<[f32; 100]>().unwrap();
            assert_eq!(a, [k as f32; 100]);
            peer.send(&(x * 2)).unwrap();
        }
    }
}

fn any_source_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    if me == 0 {
        let mut seen = vec![false; n as usize];
        for _ in 1..n {
            let (v, st) = world.any_process().receive::<[i64; 3]>().unwrap();
            let r = st.source_rank();
            assert_eq!(v, [r as i64, 10 * r as i64, -1]);
            assert_eq!(st.tag(), 100 + r);
            assert_eq!(st.count::<i64>().unwrap(), 3);
            assert_eq!(st.byte_count(), 24);
            assert!(!seen[r as usize]);
            seen[r as usize] = true;
        }
        world.barrier().unwrap(); // the messages below come after it
                                  // ANY_SOURCE with a given tag.
        let (v, st) = world.any_process().receive_with_tag::<u8>(7).unwrap();
        assert_eq!((v, st.source_rank()), (7, n - 1));
        // Probe, then receive a Vec from whoever sent.
        let st = world.any_process().probe_with_tag(8).unwrap();
        assert_eq!((st.source_rank(), st.count::<u16>().unwrap()), (1, 5));
        let (v, _) = world.any_process().receive_vec_with_tag::<u16>(8).unwrap();
        assert_eq!(v, vec![1, 2, 3, 4, 5]);
    } else {
        world
            .process_at_rank(0)
            .send_with_tag(&[me as i64, 10 * me as i64, -1], 100 + me)
            .unwrap();
        world.barrier().unwrap();
        if me == n - 1 {
            world.process_at_rank(0).send_with_tag(&7u8, 7).unwrap();
        }
        if me == 1 {
            world
                .process_at_rank(0)
                .send_with_tag(&vec![1u16, 2, 3, 4, 5], 8)
                .unwrap();
        }
    }
    world.barrier().unwrap();
}

fn isolation_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let dup = world.duplicate().unwrap();
    assert_ne!(dup.context_id(), world.context_id());
    assert_eq!((dup.rank(), dup.size()), (me, n));
    // Same tag, same peers, on two communicators: each receive gets its
    // own communicator's message, whatever the order.
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    world.process_at_rank(next).send_with_tag(&1u32, 5).unwrap();
    dup.process_at_rank(next).send_with_tag(&2u32, 5).unwrap();
    let (d, _) = dup
        .process_at_rank(prev)
        .receive_with_tag::<u32>(5)
        .unwrap();
    let (w, _) = world.any_process().receive_with_tag::<u32>(5).unwrap();
    assert_eq!((w, d), (1, 2));
    // Split by parity, reversed order within each half.
    let half = world
        .split(Some(me as u32 % 2), -me)
        .unwrap()
        .expect("a color");
    assert_eq!(half.size(), (n + 1 - me % 2) / 2);
    let members: Vec<i32> = (0..n).filter(|r| r % 2 == me % 2).rev().collect();
    assert_eq!(half.group().world_ranks(), &members[..]);
    assert_eq!(
        half.rank(),
        members.iter().position(|&r| r == me).unwrap() as i32
    );
    // Rank 0 of each half sends its world rank to the others with the same
    // tag as on the world; nothing crosses.
    if half.rank() == 0 {
        for r in 1..half.size() {
            half.process_at_rank(r).send_with_tag(&me, 9).unwrap();
        }
    } else {
        let (x, st) = half.any_process().receive_with_tag::<i32>(9).unwrap();
        assert_eq!((x, st.source_rank()), (members[0], 0));
    }
    assert!(world.any_process().immediate_probe().unwrap().is_none());
    // Undefined color, split_shared, self.
    let odd = world
        .split(if me % 2 == 1 { Some(0) } else { None }, 0)
        .unwrap();
    assert_eq!(odd.is_some(), me % 2 == 1);
    let node = world.split_shared(0).unwrap();
    assert_eq!((node.rank(), node.size()), (me, n));
    let node2 = node.dup().unwrap();
    let ids = [
        world.context_id(),
        dup.context_id(),
        half.context_id(),
        node.context_id(),
        node2.context_id(),
    ];
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "context ids {ids:?}");
    let me_comm = SimpleCommunicator::self_comm().unwrap();
    assert_eq!(me_comm.context_id(), u.self_comm().context_id());
    assert_eq!((me_comm.rank(), me_comm.size()), (0, 1));
    me_comm.this_process().send_with_tag(&me, 9).unwrap();
    assert!(world.any_process().immediate_probe().unwrap().is_none());
    let (x, _) = me_comm.any_process().receive::<i32>().unwrap();
    assert_eq!(x, me);
    node2.barrier().unwrap();
}

fn groups_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let g = world.group();
    assert_eq!((g.size(), g.rank()), (4, Some(me)));
    let low = g.incl(&[0, 1]).unwrap();
    let odd = g.incl(&[3, 1]).unwrap();
    assert_eq!(low.union(&odd).world_ranks(), &[0, 1, 3]);
    assert_eq!(low.intersection(&odd).world_ranks(), &[1]);
    assert_eq!(g.difference(&low).world_ranks(), &[2, 3]);
    assert_eq!(g.excl(&[0, 2]).unwrap().world_ranks(), &[1, 3]);
    assert_eq!(
        odd.translate_ranks(&[0, 1], &g).unwrap(),
        vec![Some(3), Some(1)]
    );
    assert_eq!(
        odd.translate_ranks(&[0, 1], &low).unwrap(),
        vec![None, Some(1)]
    );
    assert_eq!(
        odd.compare(&g.incl(&[1, 3]).unwrap()),
        GroupRelation::Similar
    );
    assert_eq!(odd.rank(), [None, Some(1), None, Some(0)][me as usize]);
    // A communicator of the subgroup, in the subgroup's order.
    let sub = world.split_by_subgroup_collective(&odd).unwrap();
    assert_eq!(sub.is_some(), me % 2 == 1);
    if let Some(sub) = sub {
        assert_eq!(sub.rank(), odd.rank().unwrap());
        let other = sub.process_at_rank(1 - sub.rank());
        other.send(&me).unwrap();
        let (x, st) = other.receive::<i32>().unwrap();
        assert_eq!((x, st.source_rank()), (4 - me, 1 - sub.rank()));
        assert_eq!(sub.group().compare(&odd), GroupRelation::Identical);
    }
    world.barrier().unwrap();
}

/// `MPI_Comm_create` with disjoint groups (MPI 2.2): each process passes
/// its own group; each distinct group becomes a communicator.
fn disjoint_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let g = world.group();
    // {2, 0} for the evens, {3} for rank 3, nothing for rank 1.
    let mine = match me {
        0 | 2 => g.incl(&[2, 0]).unwrap(),
        3 => g.incl(&[3]).unwrap(),
        _ => g.incl(&[]).unwrap(),
    };
    let sub = world.split_by_subgroup_collective(&mine).unwrap();
    assert_eq!(sub.is_some(), me != 1);
    if let Some(sub) = sub {
        assert_eq!(sub.size(), mine.size());
        assert_eq!(sub.rank(), mine.rank().unwrap());
        assert_eq!(sub.group().compare(&mine), GroupRelation::Identical);
        if sub.size() == 2 {
            let other = sub.process_at_rank(1 - sub.rank());
            other.send(&me).unwrap();
            let (x, st) = other.receive::<i32>().unwrap();
            assert_eq!((x, st.source_rank()), (2 - me, 1 - sub.rank()));
        }
    }
    world.barrier().unwrap();
}

/// A freed communicator's context id is agreed again for the next one,
/// so ids stay few however many communicators were made.
fn ids_rank(u: Universe) {
    let world = u.world();
    let first = world.duplicate().unwrap();
    let id = first.context_id();
    drop(first);
    for _ in 0..1000 {
        let d = world.duplicate().unwrap();
        assert_eq!(d.context_id(), id);
    }
    // Live communicators keep distinct ids; freeing one makes its id the
    // next one's.
    let a = world.duplicate().unwrap();
    let b = world.split(Some(0), 0).unwrap().unwrap();
    assert_ne!(a.context_id(), b.context_id());
    let (ida, idb) = (a.context_id(), b.context_id());
    drop(a);
    let c = b.duplicate().unwrap();
    assert!(ida < idb);
    assert_eq!(c.context_id(), ida);
    // Traffic on the reused id is its own.
    let me = world.rank();
    let n = world.size();
    c.process_at_rank((me + 1) % n).send(&me).unwrap();
    assert!(b.any_process().immediate_probe().unwrap().is_none());
    let (x, _) = c
        .process_at_rank((me + n - 1) % n)
        .receive::<i32>()
        .unwrap();
    assert_eq!(x, (me + n - 1) % n);
    world.barrier().unwrap();
}

fn scope_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    // Immediate exchange both ways, heap and stack buffers.
    let out: Vec<u32> = (0..100_000).map(|i| i * 3 + me as u32).collect();
    let mut inb = vec![0u32; 100_000];
    let small_out = [me as u8; 16];
    let mut small_in = [0u8; 16];
    request::scope(|scope| {
        let r1 = peer
            .immediate_receive_into_with_tag(scope, &mut inb, 1)
            .unwrap();
        let mut r2 = peer
            .immediate_receive_into_with_tag(scope, &mut small_in, 2)
            .unwrap();
        let s1 = peer.immediate_send_with_tag(scope, &out, 1).unwrap();
        let s2 = peer.immediate_send_with_tag(scope, &small_out, 2).unwrap();
        let st = loop {
            if let Some(st) = r2.test().unwrap() {
                break st;
            }
        };
        assert_eq!(
            (st.source_rank(), st.tag(), st.byte_count()),
            (1 - me, 2, 16)
        );
        assert_eq!(r2.test().unwrap(), Some(st)); // again, same status
        let st = r1.wait().unwrap();
        assert_eq!(st.count::<u32>().unwrap(), 100_000);
        s1.wait().unwrap();
        drop(s2); // waits
    });
    assert!(inb
        .iter()
        .enumerate()
        .all(|(i, &x)| x == i as u32 * 3 + 1 - me as u32));
    assert_eq!(small_in, [1 - me as u8; 16]);

    // Forgotten requests are completed at the scope's end: rank 0 leaks a
    // pending receive and a pending single-copy send; rank 1 serves them
    // only after a while.
    let big: Vec<u64> = (0..1 << 17).collect();
    let mut got = vec![0u64; 1 << 10];
    let mut got_small = [0u16; 4];
    if me == 0 {
        request::scope(|scope| {
            let r = peer
                .immediate_receive_into_with_tag(scope, &mut got, 5)
                .unwrap();
            std::mem::forget(r);
            let r = peer
                .immediate_receive_into_with_tag(scope, &mut got_small, 6)
                .unwrap();
            std::mem::forget(r);
            let s = peer.immediate_send_with_tag(scope, &big, 7).unwrap();
            std::mem::forget(s);
        });
        // Both receives are done, and the send's buffer may be reused.
        assert!(got.iter().enumerate().all(|(i, &x)| x == 5 * i as u64));
        assert_eq!(got_small, [6; 4]);
    } else {
        std::thread::sleep(Duration::from_millis(200));
        let v: Vec<u64> = (0..1 << 10).map(|i| 5 * i).collect();
        peer.send_with_tag(&v, 5).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        peer.send_with_tag(&[6u16; 4], 6).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let (b, _) = peer.receive_vec_with_tag::<u64>(7).unwrap();
        assert_eq!(b, big);
    }
    // A panic in a scope: the pending receive is cancelled, the panic goes on.
    let mut never = [0u8; 8];
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        request::scope(|scope| {
            let _r = world
                .any_process()
                .immediate_receive_into_with_tag(scope, &mut never, 99);
            std::mem::forget(_r);
            panic!("inside the scope");
        })
    }));
    assert!(caught.is_err());
    world.barrier().unwrap();
}

fn threads_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let comms: Vec<SimpleCommunicator> = (0..4).map(|_| world.duplicate().unwrap()).collect();
    let shared = world.duplicate().unwrap();
    const ITERS: u64 = 300;
    let done = std::sync::atomic::AtomicU64::new(0);
    let done = &done;
    let ids = std::thread::scope(|ts| {
        let mut handles = Vec::new();
        for (t, comm) in comms.iter().enumerate() {
            let shared = &shared;
            handles.push(ts.spawn(move || {
                // Four threads agree on context ids at once, each over its
                // own communicator: the ids must still be distinct.
                let comm = comm.dup().unwrap();
                // Separate communicators, the same tag in every thread.
                let peer = comm.process_at_rank(1 - me);
                for i in 0..ITERS {
                    let x = [t as u64, i, me as u64];
                    if me == 0 {
                        peer.send_with_tag(&x, 3).unwrap();
                        let (y, _) = peer.receive_with_tag::<[u64; 3]>(3).unwrap();
                        assert_eq!(y, [t as u64, i, 1]);
                    } else {
                        let (y, _) = peer.receive_with_tag::<[u64; 3]>(3).unwrap();
                        assert_eq!(y, [t as u64, i, 0]);
                        peer.send_with_tag(&x, 3).unwrap();
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // One communicator, a distinct tag per thread, scoped
                // immediate operations.
                let peer = shared.process_at_rank(1 - me);
                let tag = 10 + t as i32;
                for i in 0..ITERS {
                    let out = vec![i * 4 + t as u64; 1 + (i as usize % 70)];
                    let mut inb = vec![0u64; out.len()];
                    request::scope(|scope| {
                        let r = peer
                            .immediate_receive_into_with_tag(scope, &mut inb, tag)
                            .unwrap();
                        let s = peer.immediate_send_with_tag(scope, &out, tag).unwrap();
                        let st = r.wait().unwrap();
                        assert_eq!((st.tag(), st.source_rank()), (tag, 1 - me));
                        s.wait().unwrap();
                    });
                    assert_eq!(inb, out);
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // Kept alive until every thread is done: ids are distinct
                // among live communicators (a freed one's id is reused).
                comm
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(
        done.load(std::sync::atomic::Ordering::Relaxed),
        4 * 2 * ITERS
    );
    println!("threads: {} round trips", 4 * 2 * ITERS);
    let mut all: Vec<u32> = comms.iter().map(|c| c.context_id()).collect();
    all.extend(ids.iter().map(|c| c.context_id()));
    all.extend([world.context_id(), shared.context_id()]);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "context ids {all:?}");
    world.barrier().unwrap();
}

fn errors_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    assert!(matches!(
        world.process_at_rank(2).send(&1u8),
        Err(Error::Rank { rank: 2, size: 2 })
    ));
    assert!(matches!(
        world.process_at_rank(-7).receive::<u8>(),
        Err(Error::Rank { rank: -7, .. })
    ));
    assert!(matches!(
        peer.send_with_tag(&1u8, -1),
        Err(Error::Tag { tag: -1 })
    ));
    assert!(matches!(
        peer.send_with_tag(&1u8, TAG_UB + 1),
        Err(Error::Tag { .. })
    ));
    assert!(matches!(
        peer.receive_with_tag::<u8>(-5),
        Err(Error::Tag { tag: -5 })
    ));
    // PROC_NULL completes at once.
    world.process_at_rank(PROC_NULL).send(&1u8).unwrap();
    let st = world
        .process_at_rank(PROC_NULL)
        .receive_into(&mut [0u8; 4])
        .unwrap();
    assert_eq!((st.source_rank(), st.byte_count()), (PROC_NULL, 0));
    // Counts and truncation.
    if me == 0 {
        peer.send_with_tag(&7u32, 1).unwrap(); // 4 bytes into a u64
        peer.send_with_tag(&[1u8; 7], 2).unwrap(); // 7 bytes into u16s
        peer.send_with_tag(&[2u64; 10], 3).unwrap(); // 80 bytes into 16
    } else {
        assert!(matches!(
            peer.receive_with_tag::<u64>(1),
            Err(Error::Count {
                bytes: 4,
                element_size: 8,
                expected: Some(1)
            })
        ));
        assert!(matches!(
            peer.receive_vec_with_tag::<u16>(2),
            Err(Error::Count {
                bytes: 7,
                element_size: 2,
                expected: None
            })
        ));
        let mut small = [0u64; 2];
        match peer.receive_into_with_tag(&mut small, 3) {
            Err(Error::Truncate {
                status,
                message_len,
            }) => {
                assert_eq!(message_len, 80);
                assert_eq!((status.source_rank(), status.tag()), (0, 3));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(small, [2, 2]);
    }
    // One runtime per process.
    assert!(matches!(hmpi_core::init(), Err(Error::AlreadyInitialized)));
    assert!(hmpi_core::initialize().is_none());
    assert!(!hmpi_core::processor_name().unwrap().is_empty());
    assert!(u.wtime() > 0.0 && hmpi_core::time_resolution() > 0.0);
    world.barrier().unwrap();
    // Use after finalize: errors, not panics.
    let dup = world.dup().unwrap();
    u.finalize().unwrap();
    assert!(hmpi_core::is_finalized() && !hmpi_core::is_initialized());
    assert!(matches!(peer.send(&1u8), Err(Error::Finalized)));
    assert!(matches!(peer.receive::<u8>(), Err(Error::Finalized)));
    assert!(matches!(dup.barrier(), Err(Error::Finalized)));
    assert!(matches!(dup.dup(), Err(Error::Finalized)));
    assert!(matches!(
        world.any_process().immediate_probe(),
        Err(Error::Finalized)
    ));
    let mut b = [0u8; 1];
    request::scope(|scope| {
        assert!(matches!(
            peer.immediate_receive_into(scope, &mut b),
            Err(Error::Finalized)
        ));
    });
    assert!(matches!(hmpi_core::init(), Err(Error::Finalized)));
    // Local queries still answer.
    assert_eq!((dup.rank(), dup.size()), (me, 2));
}

fn ring_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let comm = world.dup().unwrap();
    for round in 0..50u64 {
        let next = comm.process_at_rank((me + 1) % n);
        let prev = comm.process_at_rank((me + n - 1) % n);
        if me == 0 {
            next.send(&vec![round; 100]).unwrap();
            let (v, _) = prev.receive_vec::<u64>().unwrap();
            assert_eq!(v, vec![round + n as u64 - 1; 100]);
        } else {
            let (v, _) = prev.receive_vec::<u64>().unwrap();
            next.send(&v.iter().map(|x| x + 1).collect::<Vec<_>>())
                .unwrap();
        }
    }
    // Split into three colors, then an all-to-all inside each.
    let part = world.split(Some(me as u32 % 3), me).unwrap().unwrap();
    let m = part.size();
    let out: Vec<i32> = (0..m).map(|r| me * 100 + r).collect();
    request::scope(|scope| {
        let mut reqs = Vec::new();
        for r in 0..m {
            reqs.push(
                part.process_at_rank(r)
                    .immediate_send_with_tag(scope, &out[r as usize], 4),
            );
        }
        for r in 0..m {
            let (x, st) = part.process_at_rank(r).receive_with_tag::<i32>(4).unwrap();
            assert_eq!(
                x,
                part.group().world_ranks()[r as usize] * 100 + part.rank()
            );
            assert_eq!(st.source_rank(), r);
        }
        for r in reqs {
            r.unwrap().wait().unwrap();
        }
    });
    comm.barrier().unwrap();
}

fn abort_rank(u: Universe) {
    let world = u.world();
    if world.rank() == 1 {
        std::thread::sleep(Duration::from_millis(100));
        world.abort(3);
    }
    // Never satisfied: the launcher ends this rank.
    let _ = world.any_process().receive::<u8>();
    unreachable!("the receive never completes");
}

fn panic_rank(u: Universe) {
    let world = u.world();
    if world.rank() == 0 {
        // Dropping the universe while unwinding skips the final barrier.
        panic!("rank 0 fails on purpose");
    }
    // Never satisfied: rank 0's failure ends the job.
    let _ = world.any_process().receive::<u8>();
    unreachable!("the receive never completes");
}
