//! Partitioned communication across real ranks (more ranks than cores):
//! partitions filled and marked ready by several threads in random order,
//! partition counts that differ between the sides, many rounds of
//! start/wait, `arrived` polling (into heap buffers, which the sender
//! writes directly, and stack buffers, which go through a staging area),
//! matching order of several pairs, and the errors.
//!
//! A `harness = false` binary on `hmpi_core::launch::rank_tests`, as
//! `p2p_ranks.rs`. Its global allocator is the node heap, so `Vec`s are
//! shared memory; arrays on the stack are private.

use hmpi_core::launch::rank_tests;
use hmpi_core::partitioned::{PartitionedRecv, PartitionedSend};
use hmpi_core::prelude::*;
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[
    ("threads", threads_rank),
    ("stack", stack_rank),
    ("order", order_rank),
    ("ring", ring_rank),
    ("errors", errors_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "threads_mark_partitions_ready_in_random_order_over_many_rounds",
        threads_mark_partitions_ready_in_random_order_over_many_rounds,
    ),
    (
        "private_receive_buffers_go_through_staging",
        private_receive_buffers_go_through_staging,
    ),
    (
        "pairs_match_in_the_order_they_were_made",
        pairs_match_in_the_order_they_were_made,
    ),
    (
        "waiting_for_a_receive_moves_own_sends_on",
        waiting_for_a_receive_moves_own_sends_on,
    ),
    (
        "bad_arguments_and_mismatched_sizes",
        bad_arguments_and_mismatched_sizes,
    ),
];

fn main() {
    rank_tests::main(
        |role| {
            let (_, body) = ROLES.iter().find(|(name, _)| *name == role)?;
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

fn threads_mark_partitions_ready_in_random_order_over_many_rounds() {
    run_ok("threads", 4);
}

fn private_receive_buffers_go_through_staging() {
    run_ok("stack", 2);
}

fn pairs_match_in_the_order_they_were_made() {
    run_ok("order", 2);
}

fn waiting_for_a_receive_moves_own_sends_on() {
    run_ok("ring", 3);
}

fn bad_arguments_and_mismatched_sizes() {
    run_ok("errors", 2);
}

// ---------------------------------------------------------------- helpers

/// The byte at `i` of round `round`'s message.
fn byte(round: u64, i: usize) -> u8 {
    ((i as u64).wrapping_mul(0x9e37_79b9) ^ round.wrapping_mul(131)) as u8
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------- ranks

const ROUNDS: u64 = 60;

/// Even ranks send to the next odd rank: 16 send partitions filled by 4
/// threads in random order, 4 (or 64) receive partitions polled in random
/// order; every byte checked every round.
fn threads_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let len = 64 * 1024;
    if me % 2 == 0 {
        let mut data = vec![0u8; len];
        let mut send = PartitionedSend::new(&world, &mut data[..], 16, me + 1, 5).unwrap();
        let mut rng = Rng(0x1234_5678 + me as u64);
        for round in 0..ROUNDS {
            send.start().unwrap();
            let mut parts = send.partitions_mut().unwrap();
            assert_eq!(parts.len(), 16);
            rng.shuffle(&mut parts);
            let mut per_thread: Vec<Vec<_>> = (0..4).map(|_| Vec::new()).collect();
            for (k, p) in parts.into_iter().enumerate() {
                per_thread[k % 4].push(p);
            }
            std::thread::scope(|s| {
                for mine in per_thread {
                    s.spawn(move || {
                        for mut p in mine {
                            let base = p.index() * p.len();
                            for (k, b) in p.iter_mut().enumerate() {
                                *b = byte(round, base + k);
                            }
                            if p.index() % 2 == 0 {
                                p.ready().unwrap();
                            } // the others are marked ready as dropped
                            std::thread::yield_now();
                        }
                    });
                }
            });
            let st = send.wait().unwrap();
            assert_eq!(st.byte_count(), len as u64);
            // Inactive again: nothing to hand out, the buffer is back.
            assert!(send.partitions_mut().is_err());
            assert_eq!(send.buffer().unwrap()[len - 1], byte(round, len - 1));
        }
    } else {
        let mut inbox = vec![0u8; len];
        let parts = if me == 1 { 4 } else { 64 };
        let mut rng = Rng(0x9abc + me as u64);
        hmpi_core::request::scope(|scope| {
            let mut recv =
                PartitionedRecv::new(scope, &world, &mut inbox[..], parts, me - 1, 5).unwrap();
            let plen = len / parts;
            for round in 0..ROUNDS {
                recv.start().unwrap();
                let mut todo: Vec<usize> = (0..parts).collect();
                rng.shuffle(&mut todo);
                let mut polls = 0u64;
                while !todo.is_empty() {
                    let mut left = Vec::new();
                    for &j in &todo {
                        match recv.arrived_data(j).unwrap() {
                            Some(d) => {
                                for (k, &b) in d.iter().enumerate() {
                                    assert_eq!(b, byte(round, j * plen + k), "round {round}");
                                }
                            }
                            None => left.push(j),
                        }
                    }
                    todo = left;
                    polls += 1;
                    if polls % 64 == 0 {
                        std::thread::yield_now();
                    }
                }
                let st = recv.wait().unwrap();
                assert_eq!((st.source_rank(), st.tag()), (me - 1, 5));
                assert_eq!(st.byte_count(), len as u64);
                let buf = recv.buffer().unwrap();
                for (i, &b) in buf.iter().enumerate() {
                    assert_eq!(b, byte(round, i));
                }
            }
        });
    }
}

/// A receive into a stack array (private memory): the sender stages, the
/// receiver copies out on arrival; 3 send partitions onto 2 receive
/// partitions (boundaries that do not line up), and a test loop instead of
/// a wait.
fn stack_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    const LEN: usize = 3 * 2 * 700;
    if me == 0 {
        let mut data = [0u8; LEN];
        let mut send = PartitionedSend::new(&world, &mut data[..], 3, 1, 9).unwrap();
        for round in 0..ROUNDS {
            send.start().unwrap();
            send.buffer().unwrap_err(); // active
            for p in send.partitions_mut().unwrap() {
                let mut p = p;
                let base = p.index() * p.len();
                for (k, b) in p.iter_mut().enumerate() {
                    *b = byte(round, base + k);
                }
                drop(p);
            }
            while send.test().unwrap().is_none() {
                std::thread::yield_now();
            }
        }
    } else {
        let mut inbox = [0u8; LEN];
        assert!(!shmheap::is_shared(inbox.as_ptr()));
        hmpi_core::request::scope(|scope| {
            let mut recv = PartitionedRecv::new(scope, &world, &mut inbox[..], 2, 0, 9).unwrap();
            for round in 0..ROUNDS {
                recv.start().unwrap();
                while !(recv.arrived(1).unwrap() && recv.arrived(0).unwrap()) {
                    std::thread::yield_now();
                }
                let half = recv.arrived_data(1).unwrap().unwrap();
                assert_eq!(half[0], byte(round, LEN / 2));
                recv.wait().unwrap();
                let buf = recv.buffer().unwrap();
                assert!(buf.iter().enumerate().all(|(i, &b)| b == byte(round, i)));
            }
        });
    }
}

/// Two pairs with the same tag match in the order of their
/// initialization calls, not of their starts (the sender starts its second
/// first); a pair with another tag in between is not disturbed.
fn order_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    if me == 0 {
        let mut a = vec![1u8; 256];
        let mut b = vec![2u8; 256];
        let mut c = vec![3u8; 512];
        let mut sa = PartitionedSend::new(&world, &mut a[..], 2, 1, 4).unwrap();
        let mut sb = PartitionedSend::new(&world, &mut b[..], 4, 1, 4).unwrap();
        let mut sc = PartitionedSend::new(&world, &mut c[..], 1, 1, 8).unwrap();
        // The receiver has started all three (its go message).
        let mut go = [0u8; 1];
        world.process_at_rank(1).receive_into(&mut go[..]).unwrap();
        sc.start().unwrap();
        sb.start().unwrap();
        sa.start().unwrap();
        sc.ready(0).unwrap();
        sa.ready_range(0, 1).unwrap();
        sb.ready_list(&[3, 1, 0, 2]).unwrap();
        sa.wait().unwrap();
        sb.wait().unwrap();
        sc.wait().unwrap();
    } else {
        let mut first = vec![0u8; 256];
        let mut second = vec![0u8; 256];
        let mut other = vec![0u8; 512];
        hmpi_core::request::scope(|scope| {
            let mut r1 = PartitionedRecv::new(scope, &world, &mut first[..], 1, 0, 4).unwrap();
            let mut r2 = PartitionedRecv::new(scope, &world, &mut second[..], 8, 0, 4).unwrap();
            let mut r3 = PartitionedRecv::new(scope, &world, &mut other[..], 2, 0, 8).unwrap();
            r3.start().unwrap();
            r1.start().unwrap();
            r2.start().unwrap();
            world.process_at_rank(0).send(&[1u8][..]).unwrap();
            r1.wait().unwrap();
            r2.wait().unwrap();
            r3.wait().unwrap();
        });
        // The sender made `sa` (1s) first, `sb` (2s) second.
        assert!(first.iter().all(|&x| x == 1));
        assert!(second.iter().all(|&x| x == 2));
        assert!(other.iter().all(|&x| x == 3));
    }
}

/// A ring: every rank marks all of its send ready before its neighbour
/// has started the receive, then waits for its own receive first; only the
/// sweep of sends in flight (inside that wait) copies its partitions.
fn ring_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let mut out = vec![0u8; 4096];
    let mut inbox = vec![0u8; 4096];
    hmpi_core::request::scope(|scope| {
        let mut send = PartitionedSend::new(&world, &mut out[..], 8, (me + 1) % n, 1).unwrap();
        let mut recv =
            PartitionedRecv::new(scope, &world, &mut inbox[..], 2, (me + n - 1) % n, 1).unwrap();
        for round in 0..ROUNDS {
            send.start().unwrap();
            for mut p in send.partitions_mut().unwrap() {
                p.fill((me as u64 * 7 + round) as u8);
            }
            recv.start().unwrap();
            recv.wait().unwrap();
            send.wait().unwrap();
            let want = (((me + n - 1) % n) as u64 * 7 + round) as u8;
            assert!(recv.buffer().unwrap().iter().all(|&b| b == want));
        }
    });
}

fn errors_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = 1 - me;
    let mut v = [0u8; 64];
    // Arguments checked when made.
    for (parts, dest, tag) in [(0, peer, 0), (3, peer, 0), (4, 7, 0), (4, peer, -5)] {
        assert!(PartitionedSend::new(&world, &mut v[..], parts, dest, tag).is_err());
    }
    assert!(matches!(
        PartitionedSend::new(&world, &mut v[..], 4, hmpi_core::ANY_SOURCE, 0),
        Err(Error::Rank { .. })
    ));
    hmpi_core::request::scope(|scope| {
        assert!(matches!(
            PartitionedRecv::new(scope, &world, &mut v[..], 4, hmpi_core::ANY_SOURCE, 0),
            Err(Error::Rank { .. })
        ));
    });
    hmpi_core::request::scope(|scope| {
        assert!(matches!(
            PartitionedRecv::new(scope, &world, &mut v[..], 4, peer, ANY_TAG),
            Err(Error::Tag { .. })
        ));
    });
    // Marking or taking partitions of an inactive send; wrong indices;
    // twice in one round; starting twice.
    {
        let mut s = PartitionedSend::new(&world, &mut v[..], 4, PROC_NULL, 0).unwrap();
        assert!(s.ready(0).is_err());
        assert!(s.partitions_mut().is_err());
        assert!(s.wait().is_ok()); // inactive: at once
        s.start().unwrap();
        assert!(s.start().is_err());
        assert!(s.ready(4).is_err());
        assert!(s.ready_range(2, 1).is_err());
        assert!(s.ready_range(0, 4).is_err());
        assert!(s.ready_list(&[0, 9]).is_err());
        s.ready(1).unwrap();
        assert!(s.ready(1).is_err());
        assert_eq!(s.partitions_mut().unwrap().len(), 3); // dropped: ready
        let st = s.wait().unwrap();
        assert_eq!(st.source_rank(), PROC_NULL);
    }
    let mut w = vec![0u8; 64];
    hmpi_core::request::scope(|scope| {
        let mut r = PartitionedRecv::new(scope, &world, &mut w[..], 4, PROC_NULL, 0).unwrap();
        assert!(r.arrived(4).is_err());
        r.start().unwrap();
        assert!(r.start().is_err());
        assert!(r.buffer().is_err());
        assert!(r.arrived(3).unwrap());
        assert_eq!(r.wait().unwrap().source_rank(), PROC_NULL);
    });
    // A send of 64 bytes matched with a receive of 128: both fail.
    if me == 0 {
        let mut s = PartitionedSend::new(&world, &mut v[..], 2, 1, 3).unwrap();
        let _ = s.start(); // may see the mismatch already
        let _ = s.ready_range(0, 1);
        assert!(matches!(s.wait(), Err(Error::Arg { .. })));
        assert!(!s.is_active());
    } else {
        w = vec![0u8; 128];
        hmpi_core::request::scope(|scope| {
            let mut r = PartitionedRecv::new(scope, &world, &mut w[..], 2, 0, 3).unwrap();
            r.start().unwrap();
            assert!(matches!(r.wait(), Err(Error::Arg { .. })));
        });
    }
    world.barrier().unwrap();
}
