//! Thread endpoints across real ranks: ranks with different endpoint
//! counts, each endpoint in a thread of its own; point-to-point between
//! endpoints of different ranks and of one rank (blocking, nonblocking,
//! probes, `ANY_SOURCE`/`ANY_TAG` with MPI's order per sender); every
//! collective the endpoints communicator offers over all endpoints; four
//! endpoints per rank on two cores (oversubscribed) streaming windows of
//! messages; the errors of a bad count, of too few VCIs and of a derived
//! communicator.

use hmpi_core::endpoints::Endpoint;
use hmpi_core::environment::endpoint;
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Messages each endpoint sends to endpoint 0 in the wildcard test.
const PER_SENDER: u32 = 6;

/// The endpoint count of parent rank `r` in the mixed test.
fn count_of(r: i32) -> usize {
    r as usize + 1
}

/// A message naming its sender, its tag and its number.
fn payload(src: i32, tag: i32, i: u32) -> [u32; 3] {
    [src as u32, tag as u32, i]
}

/// Everything one endpoint of the mixed test does (`n` endpoints in all).
fn mixed_endpoint(e: Endpoint, n: i32) {
    let (me, size) = (e.rank(), e.size());
    assert_eq!(size, n);
    // Ring, blocking: to the next endpoint, from the previous one (often
    // an endpoint of the same process).
    let (next, prev) = ((me + 1) % size, (me + size - 1) % size);
    let mut got = [0u32; 3];
    let out = payload(me, 9, 0);
    hmpi_core::request::scope(|scope| {
        let s = e
            .process_at_rank(next)
            .immediate_send_with_tag(scope, &out, 9)
            .unwrap();
        let st = e
            .process_at_rank(prev)
            .receive_into_with_tag(&mut got, 9)
            .unwrap();
        assert_eq!(
            (got, st.source_rank(), st.tag()),
            (payload(prev, 9, 0), prev, 9)
        );
        s.wait().unwrap();
    });
    // Nonblocking receive posted before the message exists, probe first
    // on the other side.
    hmpi_core::request::scope(|scope| {
        let r = e
            .process_at_rank(prev)
            .immediate_receive_into_with_tag(scope, &mut got, 11)
            .unwrap();
        e.barrier().unwrap();
        e.process_at_rank(next)
            .send_with_tag(&payload(me, 11, 1), 11)
            .unwrap();
        let st = r.wait().unwrap();
        assert_eq!(st.source_rank(), prev);
    });
    assert_eq!(got, payload(prev, 11, 1));
    // Wildcards: every endpoint sends numbered messages with tag 20, then
    // with tag 21, to endpoint 0, which takes the first kind from
    // ANY_SOURCE with tag 20 (the 21s may be there already), the second
    // by probing ANY_SOURCE and ANY_TAG first, and checks that each
    // sender's arrive in order.
    if me == 0 {
        let mut next_of = vec![[0u32; 2]; size as usize];
        let per_tag = (size - 1) as u32 * PER_SENDER;
        for k in 0..2 * per_tag {
            let st = if k < per_tag {
                e.any_process().receive_into_with_tag(&mut got, 20).unwrap()
            } else {
                // The probe and the receive agree on the message.
                let pst = e.any_process().probe_with_tag(ANY_TAG).unwrap();
                let st = e
                    .process_at_rank(pst.source_rank())
                    .receive_into_with_tag(&mut got, pst.tag())
                    .unwrap();
                assert_eq!((st.source_rank(), st.tag()), (pst.source_rank(), 21));
                st
            };
            let (s, t) = (st.source_rank(), st.tag());
            assert!((1..size).contains(&s), "source {s}");
            let n = &mut next_of[s as usize][(t - 20) as usize];
            assert_eq!(got, payload(s, t, *n), "order of ({s}, {t})");
            *n += 1;
        }
        assert!(next_of[1..].iter().all(|c| *c == [PER_SENDER; 2]));
        assert!(e.any_process().immediate_probe().unwrap().is_none());
    } else {
        for t in [20, 21] {
            for i in 0..PER_SENDER {
                e.process_at_rank(0)
                    .send_with_tag(&payload(me, t, i), t)
                    .unwrap();
            }
        }
    }
    // Collectives over every endpoint.
    e.barrier().unwrap();
    let mut sum = 0u64;
    e.all_reduce_into(&(me as u64 + 1), &mut sum, SystemOperation::sum())
        .unwrap();
    assert_eq!(sum, (n as u64) * (n as u64 + 1) / 2);
    let root = size - 1;
    let mut b = if me == root { [7u64, 8, 9] } else { [0; 3] };
    e.process_at_rank(root).broadcast_into(&mut b).unwrap();
    assert_eq!(b, [7, 8, 9]);
    let mut all = vec![0i32; size as usize];
    e.all_gather_into(&me, &mut all[..]).unwrap();
    assert_eq!(all, (0..size).collect::<Vec<_>>());
    if me == 0 {
        let mut g = vec![0i32; size as usize];
        e.this_process()
            .gather_into_root(&(me * 10), &mut g[..])
            .unwrap();
        assert_eq!(g, (0..size).map(|r| r * 10).collect::<Vec<_>>());
        let mut m = 0i32;
        e.this_process()
            .reduce_into_root(&me, &mut m, SystemOperation::max())
            .unwrap();
        assert_eq!(m, size - 1);
    } else {
        e.process_at_rank(0).gather_into(&(me * 10)).unwrap();
        e.process_at_rank(0)
            .reduce_into(&me, SystemOperation::max())
            .unwrap();
    }
    // A nonblocking collective too.
    let mut s2 = 0i64;
    hmpi_core::request::scope(|scope| {
        e.immediate_all_reduce_into(scope, &1i64, &mut s2, SystemOperation::sum())
            .unwrap()
            .wait()
            .unwrap();
    });
    assert_eq!(s2, n as i64);
}

/// Parent rank `r` makes `r + 1` endpoints; each runs
/// [`mixed_endpoint`] in a thread of its own.
fn mixed_rank(u: Universe) {
    let world = u.world();
    let r = world.rank();
    let n: i32 = (0..world.size()).map(|q| count_of(q) as i32).sum();
    let eps = world.create_endpoints(count_of(r)).unwrap();
    let base: usize = (0..r).map(count_of).sum();
    let mut vcis: Vec<usize> = Vec::new();
    for (j, e) in eps.iter().enumerate() {
        // Ranks by parent rank, then by endpoint index.
        assert_eq!((e.rank() as usize, e.index()), (base + j, j));
        vcis.push(e.vci());
    }
    // One VCI each.
    let mut sorted = vcis.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), vcis.len());
    std::thread::scope(|sc| {
        for e in eps {
            sc.spawn(move || mixed_endpoint(e, n));
        }
    });
    world.barrier().unwrap();
    // The VCIs went back: the same number of endpoints fits again.
    let again = world.create_endpoints(count_of(r)).unwrap();
    assert_eq!(again.len(), count_of(r));
}

/// Four endpoints per rank, each streaming windows of nonblocking sends
/// to the endpoint of the same index in the other rank and receiving
/// from it (from ANY_SOURCE every other round), then an allreduce; each
/// endpoint's VCI carried its messages (the per-VCI statistics).
fn threads_rank(u: Universe) {
    let world = u.world();
    let eps = world.create_endpoints(4).unwrap();
    const ROUNDS: u32 = 40;
    const WINDOW: u32 = 64;
    let ep = endpoint().unwrap();
    let received = |v: usize| ep.vci_stats(v).unwrap().received();
    let vcis: Vec<usize> = eps.iter().map(|e| e.vci()).collect();
    let before: Vec<u64> = vcis.iter().map(|&v| received(v)).collect();
    std::thread::scope(|sc| {
        for e in eps {
            sc.spawn(move || {
                let me = e.rank();
                let peer = (me + 4) % 8;
                for r in 0..ROUNDS {
                    let out: Vec<[u32; 3]> = (0..WINDOW)
                        .map(|i| payload(me, 5, r * WINDOW + i))
                        .collect();
                    hmpi_core::request::scope(|scope| {
                        let reqs: Vec<_> = out
                            .iter()
                            .map(|b| {
                                e.process_at_rank(peer)
                                    .immediate_send_with_tag(scope, b, 5)
                                    .unwrap()
                            })
                            .collect();
                        let mut got = [0u32; 3];
                        for i in 0..WINDOW {
                            let st = if r % 2 == 0 {
                                e.any_process().receive_into(&mut got).unwrap()
                            } else {
                                e.process_at_rank(peer)
                                    .receive_into_with_tag(&mut got, 5)
                                    .unwrap()
                            };
                            assert_eq!(st.source_rank(), peer);
                            assert_eq!(got, payload(peer, 5, r * WINDOW + i));
                        }
                        for q in reqs {
                            q.wait().unwrap();
                        }
                    });
                }
                let mut s = 0i32;
                e.all_reduce_into(&me, &mut s, SystemOperation::sum())
                    .unwrap();
                assert_eq!(s, 28);
            });
        }
    });
    for (&v, b) in vcis.iter().zip(before) {
        let got = received(v) - b;
        assert!(got >= u64::from(ROUNDS * WINDOW), "VCI {v}: {got} messages");
    }
    world.barrier().unwrap();
}

/// The errors, on every rank alike.
fn errors_rank(u: Universe) {
    let world = u.world();
    assert_eq!(endpoint().unwrap().vci_count(), 1);
    // A count out of range on one rank: an argument error there, a
    // communicator error elsewhere, and nobody waits.
    let n = if world.rank() == 0 { 0 } else { 1 };
    match world.create_endpoints(n) {
        Err(Error::Arg { .. }) => assert_eq!(world.rank(), 0),
        Err(Error::Comm { .. }) => assert_ne!(world.rank(), 0),
        other => panic!("{other:?}"),
    }
    // Two endpoints need two VCIs; one VCI per rank here.
    assert!(matches!(world.create_endpoints(2), Err(Error::Comm { .. })));
    // One works (on VCI 0); nothing derives from it.
    let e = world.create_endpoints(1).unwrap().pop().unwrap();
    assert_eq!(
        (e.vci(), e.rank(), e.size()),
        (0, world.rank(), world.size())
    );
    assert!(matches!(e.duplicate(), Err(Error::Comm { .. })));
    assert!(matches!(e.create_endpoints(1), Err(Error::Comm { .. })));
    e.barrier().unwrap();
    world.barrier().unwrap();
}

fn env(vcis: &str) -> Vec<(&'static str, String)> {
    vec![(vci::config::VCIS_VAR, vcis.to_string())]
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            match role {
                "mixed" => mixed_rank(u),
                "threads" => threads_rank(u),
                "errors" => errors_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[
            ("endpoints_of_different_counts_p2p_and_collectives", || {
                // 1 + 2 + 3 endpoints; rank 2 needs three VCIs.
                let r = rank_tests::launch("mixed", 3, &env("3"));
                rank_tests::assert_ran(&r, "mixed");
            }),
            ("four_endpoints_per_rank_on_two_cores", || {
                for v in ["4", "5"] {
                    let r = rank_tests::launch("threads", 2, &env(v));
                    rank_tests::assert_ran(&r, "threads");
                }
            }),
            ("bad_counts_and_derived_communicators_are_errors", || {
                let r = rank_tests::launch("errors", 2, &env("1"));
                rank_tests::assert_ran(&r, "errors");
            }),
        ],
    );
}
