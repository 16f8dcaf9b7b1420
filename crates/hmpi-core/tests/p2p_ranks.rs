//! The typed point-to-point calls beyond plain send and receive, across
//! real ranks: synchronous and ready sends, send-receive, matched probes
//! (also with four threads taking messages of the same sources), request
//! collections with mixed sends and receives, cancellation, and the errors
//! of each.
//!
//! A `harness = false` binary on `hmpi_core::launch::rank_tests`, as
//! `runtime_ranks.rs`: run plainly it runs the tests one after another,
//! each launching ranks that re-execute this binary in a role. Its global
//! allocator is the node heap, so `Vec`s are shared memory (single copy);
//! arrays on the stack are private.

use hmpi_core::environment::endpoint;
use hmpi_core::launch::rank_tests;
use hmpi_core::point_to_point::{
    send_receive, send_receive_into, send_receive_into_with_tags, send_receive_replace_into,
    send_receive_replace_into_with_tags, send_receive_with_tags,
};
use hmpi_core::prelude::*;
use hmpi_core::request::{multiple_scope, wait_any, CancelGuard, WaitGuard};
use shmheap::ShmHeap;
use std::collections::BTreeSet;
use std::time::Duration;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// A rank's side of a test; it finalizes by dropping the universe.
type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[
    ("ssend", ssend_rank),
    ("sendrecv", sendrecv_rank),
    ("mprobe", mprobe_rank),
    ("mprobe-threads", mprobe_threads_rank),
    ("sets", sets_rank),
    ("cancel", cancel_rank),
    ("errors", errors_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "synchronous_sends_complete_only_when_matched",
        synchronous_sends_complete_only_when_matched,
    ),
    (
        "send_receive_towards_each_other_does_not_deadlock",
        send_receive_towards_each_other_does_not_deadlock,
    ),
    (
        "matched_probe_and_matched_receives",
        matched_probe_and_matched_receives,
    ),
    (
        "four_threads_take_each_message_exactly_once_with_mprobe",
        four_threads_take_each_message_exactly_once_with_mprobe,
    ),
    (
        "request_collections_with_mixed_sends_and_receives",
        request_collections_with_mixed_sends_and_receives,
    ),
    ("cancel_and_guards", cancel_and_guards),
    (
        "errors_of_the_new_calls_and_after_finalize",
        errors_of_the_new_calls_and_after_finalize,
    ),
];

fn main() {
    rank_tests::main(
        |role| {
            let (_, body) = ROLES.iter().find(|(name, _)| *name == role)?;
            let universe = hmpi_core::init().expect("init");
            body(universe); // finalizes
            Some(())
        },
        TESTS,
    );
}

fn run_ok(role: &str, ranks: u32) {
    rank_tests::assert_ran(&rank_tests::launch(role, ranks, &[]), role);
}

fn synchronous_sends_complete_only_when_matched() {
    run_ok("ssend", 2);
}

fn send_receive_towards_each_other_does_not_deadlock() {
    run_ok("sendrecv", 4);
}

fn matched_probe_and_matched_receives() {
    run_ok("mprobe", 3);
}

fn four_threads_take_each_message_exactly_once_with_mprobe() {
    run_ok("mprobe-threads", 3);
}

fn request_collections_with_mixed_sends_and_receives() {
    run_ok("sets", 4);
}

fn cancel_and_guards() {
    run_ok("cancel", 2);
}

fn errors_of_the_new_calls_and_after_finalize() {
    run_ok("errors", 2);
}

// ---------------------------------------------------------------- helpers

/// A deterministic byte string for message `k` of `n` bytes.
fn pattern(k: u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9e37_79b9) ^ k.wrapping_mul(131)) as u8)
        .collect()
}

fn sent_synchronous() -> u64 {
    endpoint().unwrap().stats().sent_synchronous
}

// ---------------------------------------------------------------- ranks

fn ssend_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    let sizes = [0usize, 8, 300, 70_000, 1 << 20];
    let before = sent_synchronous();
    // Immediate synchronous sends (heap and stack buffers) stay pending
    // until the receiver matches them, which it does only after a "go"
    // that rank 0 sends once it has seen them pending.
    for (round, &n) in sizes.iter().enumerate() {
        let heap = pattern(round as u64, n);
        let stack = [round as u8 + 1; 300];
        let tag = 10 + round as i32;
        if me == 0 {
            request::scope(|scope| {
                let mut s = peer
                    .immediate_synchronous_send_with_tag(scope, &heap[..], tag)
                    .unwrap();
                let mut s2 = peer
                    .immediate_synchronous_send_with_tag(scope, &stack, tag + 100)
                    .unwrap();
                for _ in 0..20 {
                    assert!(s.test().unwrap().is_none(), "ssend of {n} done early");
                    assert!(s2.test().unwrap().is_none());
                }
                std::thread::sleep(Duration::from_millis(20));
                assert!(s.test().unwrap().is_none(), "ssend of {n} done early");
                assert!(!s.is_complete());
                peer.send_with_tag(&(round as u64), 1).unwrap(); // go
                let st = s.wait().unwrap();
                assert_eq!((st.source_rank(), st.tag()), (1, tag));
                s2.wait().unwrap();
            });
        } else {
            let (r, _) = peer.receive_with_tag::<u64>(1).unwrap();
            assert_eq!(r, round as u64);
            let (v, st) = peer.receive_vec_with_tag::<u8>(tag).unwrap();
            assert_eq!((v, st.source_rank()), (heap, 0));
            let (a, _) = peer.receive_with_tag::<[u8; 300]>(tag + 100).unwrap();
            assert_eq!(a, stack);
        }
    }
    // Blocking synchronous sends one way after the other, then immediate
    // ones both ways at once with blocking receives (two blocking
    // synchronous sends towards each other would wait for ever, as in MPI).
    for &n in &sizes {
        let v = pattern(n as u64, n);
        if me == 0 {
            peer.synchronous_send_with_tag(&v, 2).unwrap();
            let (w, _) = peer.receive_vec_with_tag::<u8>(3).unwrap();
            assert_eq!(w, v);
        } else {
            let (w, _) = peer.receive_vec_with_tag::<u8>(2).unwrap();
            assert_eq!(w, v);
            peer.synchronous_send_with_tag(&w[..], 3).unwrap();
        }
        let x = n as u32 + me as u32;
        request::scope(|scope| {
            let s = peer.immediate_synchronous_send(scope, &x).unwrap();
            let (y, st) = peer.receive::<u32>().unwrap();
            assert_eq!(
                (y, st.source_rank(), st.tag()),
                (n as u32 + 1 - me as u32, 1 - me, 0)
            );
            s.wait().unwrap();
        });
    }
    // A synchronous send to oneself completes when another thread
    // receives it.
    let self_msg = pattern(7, 100_000);
    std::thread::scope(|ts| {
        let w = &world;
        let h = ts.spawn(move || w.this_process().receive_vec_with_tag::<u8>(4).unwrap());
        world
            .this_process()
            .synchronous_send_with_tag(&self_msg, 4)
            .unwrap();
        assert_eq!(h.join().unwrap().0, self_msg);
    });
    // Ready sends go out in standard mode: the receive is posted first
    // here, as ready mode requires.
    let mut got = vec![0u64; 1000];
    let out: Vec<u64> = (0..1000).map(|i| i * 3 + me as u64).collect();
    request::scope(|scope| {
        let r = peer
            .immediate_receive_into_with_tag(scope, &mut got, 6)
            .unwrap();
        peer.send_with_tag(&0u8, 5).unwrap(); // "posted"
        peer.receive_with_tag::<u8>(5).unwrap();
        if me == 0 {
            peer.ready_send_with_tag(&out, 6).unwrap();
        } else {
            peer.immediate_ready_send_with_tag(scope, &out, 6)
                .unwrap()
                .wait()
                .unwrap();
        }
        assert_eq!(r.wait().unwrap().count::<u64>().unwrap(), 1000);
    });
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &x)| x == i as u64 * 3 + 1 - me as u64));
    // Every synchronous send above went through the engine's synchronous
    // path: rank 0 started 2 per round + 2 per size + 1 to itself, rank 1
    // 2 per size + 1.
    let n = sizes.len() as u64;
    let expected = if me == 0 {
        2 * n + 2 * n + 1
    } else {
        2 * n + 1
    };
    assert_eq!(sent_synchronous() - before, expected);
    world.barrier().unwrap();
}

fn sendrecv_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let right = world.process_at_rank((me + 1) % n);
    let left = world.process_at_rank((me + n - 1) % n);
    // Everyone sends 1 MiB from the heap to the right and receives from the
    // left at once: a send-then-receive would wait for a receiver that is
    // itself sending; the posted receive avoids that.
    for round in 0..5u64 {
        let out: Vec<u64> = (0..1 << 17).map(|i| i * 7 + me as u64 + round).collect();
        let mut inb = vec![0u64; 1 << 17];
        let st = send_receive_into_with_tags(&out, &right, 3, &mut inb[..], &left, 3).unwrap();
        let l = (me + n - 1) % n;
        assert_eq!(
            (st.source_rank(), st.tag(), st.count::<u64>().unwrap()),
            (l, 3, 1 << 17)
        );
        assert!(inb
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u64 * 7 + l as u64 + round));
    }
    // One value, from any source and any tag.
    // (A wildcard tag here could take the left neighbour's next message,
    // which it may send as soon as it has this one's.)
    let (x, st) = send_receive_with_tags::<u64, _, _, _>(
        &(me as u64 * 10),
        &left,
        7,
        &world.any_process(),
        7,
    )
    .unwrap();
    let r = (me + 1) % n;
    assert_eq!((x, st.source_rank(), st.tag()), (r as u64 * 10, r, 7));
    let (y, _) = send_receive::<[i32; 3], _, _, _>(&[me; 3], &right, &left).unwrap();
    assert_eq!(y, [(me + n - 1) % n; 3]);
    // Stack buffers, send_receive_into.
    let mut small = [0u16; 40];
    send_receive_into(&[me as u16; 40], &left, &mut small, &right).unwrap();
    assert_eq!(small, [((me + 1) % n) as u16; 40]);
    // Replace: the buffer goes right, the left one's comes in.
    let mut v: Vec<i32> = vec![me; 50_000];
    let st = send_receive_replace_into(&mut v, &right, &left).unwrap();
    assert_eq!(st.source_rank(), (me + n - 1) % n);
    assert!(v.iter().all(|&x| x == (me + n - 1) % n));
    let mut a = [me as u8; 9];
    send_receive_replace_into_with_tags(&mut a, &left, 11, &right, 11).unwrap();
    assert_eq!(a, [((me + 1) % n) as u8; 9]);
    // PROC_NULL on either side: that side is skipped.
    let null = world.process_at_rank(PROC_NULL);
    let mut keep = [5u8; 4];
    let st = send_receive_replace_into(&mut keep, &null, &null).unwrap();
    assert_eq!(
        (keep, st.source_rank(), st.byte_count()),
        ([5; 4], PROC_NULL, 0)
    );
    let mut got = [0u8; 2];
    send_receive_into(&[1u8, 2], &null, &mut got, &null).unwrap();
    // Only sending (to the right) and only receiving (from the left).
    let st = send_receive_into_with_tags(&[me as u8, 1], &right, 12, &mut got, &null, 0).unwrap();
    assert_eq!(st.source_rank(), PROC_NULL);
    let st = send_receive_into_with_tags(&[0u8; 0], &null, 0, &mut got, &left, 12).unwrap();
    assert_eq!((got, st.byte_count()), ([((me + n - 1) % n) as u8, 1], 2));
    // On a communicator whose ranks are the reverse of the world's: the
    // status speaks its ranks.
    let rev = world.split(Some(0), -me).unwrap().unwrap();
    assert_eq!(rev.rank(), n - 1 - me);
    let rr = rev.rank();
    let (v, st) = send_receive::<i32, _, _, _>(
        &rr,
        &rev.process_at_rank((rr + 1) % n),
        &rev.process_at_rank((rr + n - 1) % n),
    )
    .unwrap();
    assert_eq!((v, st.source_rank()), ((rr + n - 1) % n, (rr + n - 1) % n));
    // The blocking calls and the probes on both kinds of communicator: the
    // world's ranks are world ranks (they pass unchanged), `rev`'s are not
    // (they go through its tables).
    for c in [&world, &rev] {
        let cr = c.rank();
        let prev = (cr + n - 1) % n;
        c.process_at_rank((cr + 1) % n)
            .send_with_tag(&cr, 21)
            .unwrap();
        let st = c.process_at_rank(prev).probe_with_tag(21).unwrap();
        assert_eq!((st.source_rank(), st.tag()), (prev, 21));
        let st = c.any_process().immediate_probe_with_tag(21).unwrap();
        assert_eq!(st.map(|s| s.source_rank()), Some(prev));
        let (v, st) = c.any_process().receive_with_tag::<i32>(21).unwrap();
        assert_eq!((v, st.source_rank()), (prev, prev));
        assert!(matches!(
            c.process_at_rank(n).send(&1u8),
            Err(Error::Rank { rank, .. }) if rank == n
        ));
    }
    // Errors: found before anything starts, so nothing is left behind.
    assert!(matches!(
        send_receive_into(&1u8, &world.process_at_rank(n), &mut got, &left),
        Err(Error::Rank { .. })
    ));
    assert!(matches!(
        send_receive_into(&1u8, &right, &mut got, &world.process_at_rank(-9)),
        Err(Error::Rank { rank: -9, .. })
    ));
    assert!(matches!(
        send_receive_into_with_tags(&1u8, &right, ANY_TAG, &mut got, &left, 0),
        Err(Error::Tag { tag: ANY_TAG })
    ));
    assert!(matches!(
        send_receive_into_with_tags(&1u8, &right, 0, &mut got, &left, -7),
        Err(Error::Tag { tag: -7 })
    ));
    // A longer message than the buffer: truncation, the prefix delivered.
    let mut two = [0u32; 2];
    match send_receive_into_with_tags(&[9u32; 5], &right, 13, &mut two, &left, 13) {
        Err(Error::Truncate {
            status,
            message_len,
        }) => {
            assert_eq!((message_len, status.source_rank()), (20, (me + n - 1) % n));
            assert_eq!(two, [9, 9]);
        }
        other => panic!("{other:?}"),
    }
    // A value of the wrong size: a count error.
    assert!(matches!(
        send_receive_with_tags::<u64, _, _, _>(&1u32, &right, 14, &left, 14),
        Err(Error::Count { bytes: 4, .. })
    ));
    world.barrier().unwrap();
    assert!(world.any_process().immediate_probe().unwrap().is_none());
    world.barrier().unwrap();
}

fn mprobe_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let zero = world.process_at_rank(0);
    if me != 0 {
        let p = me as u32;
        zero.send_with_tag(&[p; 3], 1).unwrap();
        zero.send_with_tag(&pattern(u64::from(p), 200_000), 2)
            .unwrap();
        zero.send_with_tag(&(p as u64), 3).unwrap();
        zero.send_with_tag(&[p; 10], 4).unwrap(); // 40 bytes
        zero.send_with_tag(&7u32, 5).unwrap();
        zero.send_with_tag(&[p as u16; 33], 6).unwrap();
        zero.send_with_tag(&vec![p as u64; 1000], 7).unwrap();
        world.barrier().unwrap();
        // Discarded by a dropped Message: the synchronous send completes.
        zero.synchronous_send_with_tag(&[1u8; 5000], 8).unwrap();
        zero.send_with_tag(&(p + 100), 9).unwrap();
        world.barrier().unwrap();
        return;
    }
    let any = world.any_process();
    assert!(any.immediate_matched_probe_with_tag(99).unwrap().is_none());
    for src in [1, 2] {
        let from = world.process_at_rank(src);
        let p = src as u32;
        // Into a buffer of its own, exactly.
        let (m, st) = from.matched_probe_with_tag(1).unwrap();
        assert_eq!(
            (st.source_rank(), st.tag(), st.count::<u32>().unwrap()),
            (src, 1, 3)
        );
        assert_eq!(m.status(), st);
        assert!(!m.is_no_proc());
        // Nobody else can match it now.
        assert!(from.immediate_probe_with_tag(1).unwrap().is_none());
        let mut a = [0u32; 3];
        let st2 = m.matched_receive_into(&mut a).unwrap();
        assert_eq!((a, st2.byte_count()), ([p; 3], 12));
        // A Vec of its length (single copy, synergistic size).
        let (m, st) = from.matched_probe_with_tag(2).unwrap();
        assert_eq!(st.byte_count(), 200_000);
        let (v, _) = m.matched_receive_vec::<u8>().unwrap();
        assert_eq!(v, pattern(u64::from(p), 200_000));
        // One value.
        let (x, st) = from
            .matched_probe_with_tag(3)
            .unwrap()
            .0
            .matched_receive::<u64>()
            .unwrap();
        assert_eq!((x, st.tag()), (u64::from(p), 3));
        // Truncation: the prefix is delivered.
        let (m, _) = from.matched_probe_with_tag(4).unwrap();
        let mut short = [0u32; 4];
        match m.matched_receive_into(&mut short) {
            Err(Error::Truncate {
                status,
                message_len,
            }) => assert_eq!(
                (message_len, status.source_rank(), short),
                (40, src, [p; 4])
            ),
            other => panic!("{other:?}"),
        }
        // Count mismatch: 4 bytes are not a u64.
        let (m, _) = from.matched_probe_with_tag(5).unwrap();
        assert!(matches!(
            m.matched_receive::<u64>(),
            Err(Error::Count { bytes: 4, .. })
        ));
        // rsmpi's form on the pair; 66 bytes are not a whole number of u32s.
        assert!(matches!(
            from.matched_probe_with_tag(6)
                .unwrap()
                .matched_receive_vec::<u32>(),
            Err(Error::Count { bytes: 66, .. })
        ));
    }
    // Wildcards: the two tag-7 messages, from whoever, through
    // immediate matched probes and immediate matched receives.
    let mut seen = BTreeSet::new();
    let mut bufs = [vec![0u64; 1000], vec![0u64; 1000]];
    request::scope(|scope| {
        let mut reqs = Vec::new();
        for buf in bufs.iter_mut() {
            let (m, st) = loop {
                if let Some(found) = any.immediate_matched_probe().unwrap() {
                    break found;
                }
            };
            assert_eq!(st.tag(), 7);
            assert!(seen.insert(st.source_rank()));
            reqs.push(
                m.immediate_matched_receive_into(scope, &mut buf[..])
                    .unwrap(),
            );
        }
        for r in reqs {
            let st = r.wait().unwrap();
            assert_eq!(st.count::<u64>().unwrap(), 1000);
        }
    });
    let mut srcs: Vec<u64> = bufs.iter().map(|b| b[0]).collect();
    srcs.sort_unstable();
    assert_eq!(srcs, [1, 2]);
    assert!(bufs.iter().all(|b| b.iter().all(|&x| x == b[0])));
    // PROC_NULL: the no-process message.
    let (m, st) = world.process_at_rank(PROC_NULL).matched_probe().unwrap();
    assert!(m.is_no_proc());
    assert_eq!(st.source_rank(), PROC_NULL);
    let mut none = [3u8; 2];
    let st = m.matched_receive_into(&mut none).unwrap();
    assert_eq!((none, st.byte_count()), ([3, 3], 0));
    world.barrier().unwrap();
    // Dropping a Message discards the message; its synchronous sender
    // completes, and the next message is received as usual.
    for _ in 0..2 {
        let (m, st) = any.matched_probe_with_tag(8).unwrap();
        assert_eq!(st.byte_count(), 5000);
        drop(m);
    }
    let mut got: Vec<u32> = (0..2)
        .map(|_| any.receive_with_tag::<u32>(9).unwrap().0)
        .collect();
    got.sort_unstable();
    assert_eq!(got, [101, 102]);
    world.barrier().unwrap();
    assert!(any.immediate_probe().unwrap().is_none());
}

fn mprobe_threads_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    // Ranks 1 and 2 send PER messages each to rank 0, tags cycling through
    // 0..3, of varied sizes (the first two words say source and number);
    // four threads of rank 0 each take PER / 2 of them with matched probes
    // and wildcards, in four ways.
    const PER: u64 = 400;
    if me != 0 {
        let zero = world.process_at_rank(0);
        for k in 0..PER {
            let len = 2 + (k as usize * 37) % 3000;
            let mut v = vec![k ^ 0xabcd; len];
            v[0] = me as u64;
            v[1] = k;
            if k % 5 == 0 {
                zero.synchronous_send_with_tag(&v, (k % 3) as i32).unwrap();
            } else {
                zero.send_with_tag(&v, (k % 3) as i32).unwrap();
            }
        }
        world.barrier().unwrap();
        return;
    }
    let taken: Vec<Vec<(u64, u64)>> = std::thread::scope(|ts| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let world = &world;
                ts.spawn(move || {
                    let any = world.any_process();
                    let mut mine = Vec::new();
                    for _ in 0..PER / 2 {
                        let (v, st): (Vec<u64>, Status) = match t {
                            0 => any.matched_probe().unwrap().matched_receive_vec().unwrap(),
                            1 => any.receive_vec().unwrap(),
                            2 => loop {
                                if let Some((m, _)) = any.immediate_matched_probe().unwrap() {
                                    break m.matched_receive_vec().unwrap();
                                }
                                std::thread::yield_now();
                            },
                            _ => {
                                let (m, st) = any.matched_probe().unwrap();
                                let mut buf = vec![0u64; st.count::<u64>().unwrap()];
                                let st2 = m.matched_receive_into(&mut buf[..]).unwrap();
                                assert_eq!(st, st2);
                                (buf, st2)
                            }
                        };
                        let (src, k) = (v[0], v[1]);
                        assert_eq!(st.source_rank() as u64, src);
                        assert_eq!(st.tag() as u64, k % 3);
                        assert_eq!(v.len(), 2 + (k as usize * 37) % 3000);
                        assert!(v[2..].iter().all(|&x| x == k ^ 0xabcd));
                        mine.push((src, k));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Each thread saw each source's messages in the order sent (a matched
    // probe takes the earliest match); together they saw every message
    // exactly once.
    for mine in &taken {
        for src in [1, 2] {
            let ks: Vec<u64> = mine.iter().filter(|m| m.0 == src).map(|m| m.1).collect();
            assert!(ks.windows(2).all(|w| w[0] < w[1]), "out of order: {ks:?}");
        }
    }
    let all: BTreeSet<(u64, u64)> = taken.iter().flatten().copied().collect();
    assert_eq!(all.len(), taken.iter().map(Vec::len).sum::<usize>());
    let want: BTreeSet<(u64, u64)> = [1, 2]
        .into_iter()
        .flat_map(|s| (0..PER).map(move |k| (s, k)))
        .collect();
    assert_eq!(all, want);
    world.barrier().unwrap();
    assert!(world.any_process().immediate_probe().unwrap().is_none());
}

fn sets_rank(u: Universe) {
    let world = u.world();
    let n = world.size();
    // Communicator ranks are the reverse of world ranks: statuses must
    // speak the communicator's.
    let comm = world.split(Some(0), -world.rank()).unwrap().unwrap();
    let me = comm.rank();
    assert_eq!(me, n - 1 - world.rank());
    let outs: Vec<Vec<u32>> = (0..n)
        .map(|r| (0..(r as u32 + 1) * 5000).map(|i| i ^ me as u32).collect())
        .collect();
    let mut ins: Vec<Vec<u32>> = (0..n)
        .map(|r| vec![0; (me as usize + 1) * 5000 + usize::from(r == me)])
        .collect();
    let mut stack_in = [0u8; 16];
    let stack_out = [me as u8; 16];
    let mut never = [0u8; 4];
    let mut seen = BTreeSet::new();
    multiple_scope(3 * n as usize, |scope, coll| {
        // index 2k: receive from k; 2k+1: send to k (one of them to self).
        for (k, buf) in ins.iter_mut().enumerate() {
            let p = comm.process_at_rank(k as i32);
            assert_eq!(
                coll.add(
                    p.immediate_receive_into_with_tag(scope, &mut buf[..], 1)
                        .unwrap()
                ),
                2 * k
            );
            let s = if k % 2 == 0 {
                p.immediate_send_with_tag(scope, &outs[k], 1)
            } else {
                p.immediate_synchronous_send_with_tag(scope, &outs[k], 1)
            };
            assert_eq!(coll.add(s.unwrap()), 2 * k + 1);
        }
        let base = coll.len();
        // A stack receive and send with the right neighbour.
        let right = comm.process_at_rank((me + 1) % n);
        let left = comm.process_at_rank((me + n - 1) % n);
        coll.add(
            left.immediate_receive_into_with_tag(scope, &mut stack_in, 2)
                .unwrap(),
        );
        coll.add(right.immediate_send_with_tag(scope, &stack_out, 2).unwrap());
        // A receive nobody sends to: cancelled, and still reported.
        let nv = coll.add(
            comm.any_process()
                .immediate_receive_into_with_tag(scope, &mut never, 3)
                .unwrap(),
        );
        assert!(coll.cancel(nv));
        assert!(coll.get(nv).unwrap().is_cancelled());
        assert_eq!(coll.incomplete(), base + 3);
        let mut result = Vec::new();
        let mut check = |i: usize, res: Result<Status>| {
            assert!(seen.insert(i), "index {i} reported twice");
            let st = res.unwrap_or_else(|e| panic!("request {i}: {e}"));
            if i == nv {
                assert!(st.is_cancelled());
            } else if i < base && i % 2 == 0 {
                let k = (i / 2) as i32;
                assert_eq!((st.source_rank(), st.tag()), (k, 1));
                assert_eq!(st.count::<u32>().unwrap(), (me as usize + 1) * 5000);
            } else if i == base {
                assert_eq!((st.source_rank(), st.byte_count()), ((me + n - 1) % n, 16));
            } else {
                assert!(!st.is_cancelled());
            }
        };
        // A few of each kind of completion, then the rest.
        loop {
            if let Some((i, res)) = coll.test_any() {
                check(i, res);
                break;
            }
        }
        coll.wait_some(&mut result);
        assert!(!result.is_empty());
        for (i, res) in result.drain(..) {
            check(i, res);
        }
        if let Some((i, res)) = coll.wait_any() {
            check(i, res);
        }
        coll.test_some(&mut result);
        for (i, res) in result.drain(..) {
            check(i, res);
        }
        coll.wait_all(&mut result);
        for (i, res) in result.drain(..) {
            check(i, res);
        }
        assert_eq!(coll.incomplete(), 0);
        assert!(coll.wait_any().is_none());
        assert!(coll.test_any().is_none());
        assert!(coll.test_all(&mut result) && result.is_empty());
    });
    assert_eq!(seen.len(), 2 * n as usize + 3);
    for (k, buf) in ins.iter().enumerate() {
        let want = (me as usize + 1) * 5000;
        assert!(buf[..want]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u32 ^ k as u32));
    }
    assert_eq!(stack_in, [((me + n - 1) % n) as u8; 16]);
    assert_eq!(never, [0; 4]);
    comm.barrier().unwrap();

    // Errors per request: rank 0 of the communicator receives from every
    // other rank into a buffer that is too short for rank 1's message; the
    // other requests of the set are unaffected. test_all says false while
    // a receive waits for a message that is sent only after a "go".
    if me == 0 {
        let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; 100]).collect();
        let mut late = [0u8; 8];
        multiple_scope(n as usize, |scope, coll| {
            for (k, b) in bufs.iter_mut().enumerate().skip(1) {
                coll.add(
                    comm.process_at_rank(k as i32)
                        .immediate_receive_into_with_tag(scope, &mut b[..], 4)
                        .unwrap(),
                );
            }
            let li = coll.add(
                comm.process_at_rank(1)
                    .immediate_receive_into_with_tag(scope, &mut late, 5)
                    .unwrap(),
            );
            let mut result = Vec::new();
            for _ in 0..50 {
                assert!(!coll.test_all(&mut result));
                assert!(result.is_empty());
            }
            assert!(coll.get(li).is_some_and(|r| !r.is_complete()));
            comm.process_at_rank(1).send_with_tag(&0u8, 6).unwrap(); // go
            while !coll.test_all(&mut result) {}
            assert_eq!(result.len(), n as usize);
            for (i, res) in result.drain(..) {
                let k = i as i32 + 1;
                match res {
                    Err(Error::Truncate {
                        status,
                        message_len,
                    }) => {
                        assert_eq!((k, status.source_rank(), message_len), (1, 1, 150));
                    }
                    Ok(st) if i == li => assert_eq!((st.source_rank(), st.tag()), (1, 5)),
                    Ok(st) => assert_eq!((st.source_rank(), st.byte_count()), (k, 50)),
                    Err(e) => panic!("request {i}: {e}"),
                }
            }
        });
        assert_eq!(bufs[1], vec![1u8; 100]);
        assert!(bufs[2..]
            .iter()
            .all(|b| b[..50].iter().all(|&x| x == b[0]) && b[0] > 1));
        assert_eq!(late, [9; 8]);
    } else {
        let zero = comm.process_at_rank(0);
        let len = if me == 1 { 150 } else { 50 };
        zero.send_with_tag(&vec![me as u8; len], 4).unwrap();
        if me == 1 {
            zero.receive_with_tag::<u8>(6).unwrap();
            zero.send_with_tag(&[9u8; 8], 5).unwrap();
        }
    }
    comm.barrier().unwrap();

    // rsmpi's free wait_any over a Vec, and a request finished before it
    // joins a collection.
    let right = comm.process_at_rank((me + 1) % n);
    let left = comm.process_at_rank((me + n - 1) % n);
    let mut a = [0u64; 4];
    let mut b = 0u64;
    let x = [me as u64; 4];
    request::scope(|scope| {
        let mut reqs = vec![
            left.immediate_receive_into_with_tag(scope, &mut a, 7)
                .unwrap(),
            right.immediate_send_with_tag(scope, &x, 7).unwrap(),
        ];
        let mut idx = Vec::new();
        while let Some((i, res)) = wait_any(&mut reqs) {
            res.unwrap();
            idx.push(i);
        }
        assert_eq!(idx.len(), 2);
        assert!(idx == [0, 0] || idx == [1, 0], "{idx:?}");
        let mut r = right
            .immediate_receive_into_with_tag(scope, &mut b, 8)
            .unwrap();
        left.send_with_tag(&(me as u64 + 50), 8).unwrap();
        while r.test().unwrap().is_none() {}
        let mut coll = RequestCollection::new();
        coll.add(r);
        let (i, res) = coll.test_any().unwrap();
        assert_eq!((i, res.unwrap().source_rank()), (0, (me + 1) % n));
        assert!(!coll.is_empty() && coll.incomplete() == 0);
    });
    assert_eq!(
        (a, b),
        ([((me + n - 1) % n) as u64; 4], ((me + 1) % n) as u64 + 50)
    );
    comm.barrier().unwrap();
}

fn cancel_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    // A pending receive is cancelled; its buffer is untouched and its
    // status says so.
    let mut buf = [7u8; 8];
    request::scope(|scope| {
        let r = peer
            .immediate_receive_into_with_tag(scope, &mut buf, 1)
            .unwrap();
        assert!(!r.is_cancelled());
        assert!(r.cancel());
        assert!(r.is_cancelled());
        assert!(!r.cancel()); // once
        let st = r.wait().unwrap();
        assert!(st.is_cancelled());
        assert_eq!((st.source_rank(), st.byte_count()), (PROC_NULL, 0));
    });
    assert_eq!(buf, [7; 8]);
    // Sends are not cancelled; they complete as usual.
    let out = vec![me as u32; 30_000];
    let mut inb = vec![0u32; 30_000];
    request::scope(|scope| {
        let r = peer
            .immediate_receive_into_with_tag(scope, &mut inb, 2)
            .unwrap();
        let s = peer.immediate_send_with_tag(scope, &out, 2).unwrap();
        assert!(!s.cancel());
        assert!(!s.is_cancelled());
        let st = s.wait().unwrap();
        assert!(!st.is_cancelled());
        let mut r = r;
        let st = loop {
            if let Some(st) = r.test().unwrap() {
                break st;
            }
        };
        // Finished: too late to cancel.
        assert!(!r.cancel());
        assert!(!r.is_cancelled() && !st.is_cancelled());
    });
    assert!(inb.iter().all(|&x| x == 1 - me as u32));
    // A receive that matches at once (the message was there before it
    // was posted) is not cancelled.
    if me == 1 {
        peer.send_with_tag(&[3u8; 3], 3).unwrap();
    }
    world.barrier().unwrap();
    if me == 0 {
        let mut got = [0u8; 3];
        request::scope(|scope| {
            let r = peer
                .immediate_receive_into_with_tag(scope, &mut got, 3)
                .unwrap();
            assert!(!r.cancel());
            assert_eq!(r.wait().unwrap().byte_count(), 3);
        });
        assert_eq!(got, [3; 3]);
    }
    // Guards: a CancelGuard'ed receive that never matches returns at once
    // when dropped; a WaitGuard'ed one waits for its message.
    let mut never = [0u8; 1];
    let mut later = [0u8; 1];
    request::scope(|scope| {
        let g = CancelGuard::from(
            peer.immediate_receive_into_with_tag(scope, &mut never, 4)
                .unwrap(),
        );
        drop(g);
        let w = WaitGuard::from(
            peer.immediate_receive_into_with_tag(scope, &mut later, 5)
                .unwrap(),
        );
        peer.send_with_tag(&[me as u8 + 1], 5).unwrap();
        drop(w);
    });
    assert_eq!((never, later), ([0], [2 - me as u8]));
    // A guard converts back into its request.
    let mut again = [0u8; 1];
    request::scope(|scope| {
        let w = WaitGuard::from(
            peer.immediate_receive_into_with_tag(scope, &mut again, 6)
                .unwrap(),
        );
        let r: Request<'_> = w.into();
        assert!(r.cancel());
        assert!(r.wait().unwrap().is_cancelled());
    });
    // A panic while requests are held (not leaked): they are not waited
    // for while unwinding (these receives would never match); the scope
    // cancels them, then the panic goes on.
    let (mut held, mut in_set) = ([0u8; 2], [0u8; 2]);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        request::scope(|scope| {
            let _r = peer
                .immediate_receive_into_with_tag(scope, &mut held, 7)
                .unwrap();
            let mut coll = RequestCollection::new();
            coll.add(
                peer.immediate_receive_into_with_tag(scope, &mut in_set, 8)
                    .unwrap(),
            );
            panic!("a panic inside the scope, on purpose");
        })
    }));
    assert!(caught.is_err());
    assert_eq!((held, in_set), ([0; 2], [0; 2]));
    world.barrier().unwrap();
    assert!(world.any_process().immediate_probe().unwrap().is_none());
}

fn errors_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    let bad = world.process_at_rank(2);
    assert!(matches!(
        bad.synchronous_send(&1u8),
        Err(Error::Rank { rank: 2, size: 2 })
    ));
    assert!(matches!(
        peer.synchronous_send_with_tag(&1u8, -1),
        Err(Error::Tag { tag: -1 })
    ));
    assert!(matches!(
        peer.ready_send_with_tag(&1u8, TAG_UB + 1),
        Err(Error::Tag { .. })
    ));
    assert!(matches!(
        bad.matched_probe(),
        Err(Error::Rank { rank: 2, .. })
    ));
    assert!(matches!(
        peer.matched_probe_with_tag(-4),
        Err(Error::Tag { tag: -4 })
    ));
    assert!(matches!(
        world.process_at_rank(-1).immediate_matched_probe(),
        Err(Error::Rank { rank: -1, .. })
    ));
    assert!(matches!(
        peer.receive_vec::<[u8; 0]>(),
        Err(Error::Type { .. })
    ));
    let x = 5u8;
    request::scope(|scope| {
        assert!(matches!(
            bad.immediate_synchronous_send(scope, &x),
            Err(Error::Rank { .. })
        ));
        assert!(matches!(
            peer.immediate_synchronous_send_with_tag(scope, &x, ANY_TAG),
            Err(Error::Tag { .. })
        ));
        assert!(matches!(
            peer.immediate_ready_send_with_tag(scope, &x, -2),
            Err(Error::Tag { .. })
        ));
    });
    // PROC_NULL: synchronous sends complete at once.
    world
        .process_at_rank(PROC_NULL)
        .synchronous_send(&1u8)
        .unwrap();
    world.barrier().unwrap();
    let dup = world.dup().unwrap();
    u.finalize().unwrap();
    assert!(matches!(peer.synchronous_send(&1u8), Err(Error::Finalized)));
    assert!(matches!(
        dup.any_process().matched_probe(),
        Err(Error::Finalized)
    ));
    assert!(matches!(
        dup.any_process().immediate_matched_probe(),
        Err(Error::Finalized)
    ));
    let mut b = [0u8; 1];
    assert!(matches!(
        send_receive_into(&1u8, &peer, &mut b, &peer),
        Err(Error::Finalized)
    ));
    request::scope(|scope| {
        assert!(matches!(
            peer.immediate_synchronous_send(scope, &x),
            Err(Error::Finalized)
        ));
    });
}
