//! Many threads per rank across real ranks: communicator hints that spread
//! one communicator's traffic over VCIs (the per-VCI statistics show
//! which VCIs carried it) while keeping the order MPI promises for the
//! receives the hints allow; wildcards the hints rule out are errors;
//! without hints, order holds with many VCIs; streams used from several
//! threads at once; the synchronous-send scenario that deadlocks with
//! per-VCI progress alone; four threads per rank on two cores.

use hmpi_core::environment::endpoint;
use hmpi_core::hints::{CommHints, TagBits};
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::raw;
use hmpi_core::stream::Stream;
use hmpi_core::Info;
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Messages per (source, tag).
const PER_TAG: u32 = 5;
/// Tags of the spreading test: 4 sender × 4 receiver thread indices.
const TAGS: i32 = 16;

fn vcis() -> usize {
    endpoint().unwrap().vci_count()
}

/// Messages received so far on each VCI of this rank.
fn received_per_vci() -> Vec<u64> {
    let ep = endpoint().unwrap();
    (0..ep.vci_count())
        .map(|v| ep.vci_stats(v).unwrap().received())
        .collect()
}

/// How many VCIs received something between two snapshots.
fn vcis_used(before: &[u64], after: &[u64]) -> usize {
    before.iter().zip(after).filter(|(b, a)| a > b).count()
}

fn payload(src: i32, tag: i32, i: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src.to_le_bytes());
    b[4..8].copy_from_slice(&tag.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

/// The hint sets of the spreading test, with how many of rank 0's four
/// VCIs carry the traffic of two senders over 16 tags.
fn hint_cases() -> Vec<(&'static str, CommHints, usize)> {
    let d = CommHints::default();
    let bits = CommHints {
        tag_bits_send: Some(TagBits { lo: 0, len: 2 }),
        tag_bits_recv: Some(TagBits { lo: 2, len: 2 }),
        ..d
    };
    vec![
        ("none", d, 1),
        // One sending thread per rank: its messages take its one VCI
        // (and keep their order there); several threads: `overtake_rank`.
        (
            "allow_overtaking",
            CommHints {
                allow_overtaking: true,
                ..d
            },
            1,
        ),
        (
            "exact_length",
            CommHints {
                exact_length: true,
                ..d
            },
            1,
        ),
        (
            "no_any_source",
            CommHints {
                no_any_source: true,
                ..d
            },
            2,
        ),
        (
            "no_any_tag",
            CommHints {
                no_any_tag: true,
                ..d
            },
            4,
        ),
        (
            "both",
            CommHints {
                no_any_source: true,
                no_any_tag: true,
                ..d
            },
            4,
        ),
        ("tag_bits", bits, 4),
    ]
}

/// Ranks 1 and 2 send `PER_TAG` numbered messages on each of 16 tags to
/// rank 0, which receives them by source and tag (or from `ANY_SOURCE`
/// where the hints allow it) and checks their order; then the VCIs that
/// carried them.
fn spread_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    assert_eq!((world.size(), vcis()), (3, 4));
    for (name, hints, want) in hint_cases() {
        let c = world.dup_with_hints(&hints).unwrap();
        assert_eq!(c.hints(), hints, "{name}");
        c.barrier().unwrap();
        if me == 0 {
            let before = received_per_vci();
            let mut next = [[0u32; TAGS as usize]; 3];
            let mut buf = [0u8; 12];
            for tag in 0..TAGS {
                for k in 0..2 * PER_TAG {
                    // From ANY_SOURCE where allowed, else alternately.
                    let src = if hints.no_any_source {
                        1 + (k % 2) as i32
                    } else {
                        ANY_SOURCE
                    };
                    let mut st = raw::Status::empty();
                    raw::recv_with_status(&c, &mut buf, src, tag, &mut st).unwrap();
                    let s = st.source;
                    let n = &mut next[s as usize][tag as usize];
                    assert_eq!(buf, payload(s, tag, *n), "{name}: order of ({s}, {tag})");
                    *n += 1;
                }
            }
            let after = received_per_vci();
            assert_eq!(
                vcis_used(&before, &after),
                want,
                "{name}: {before:?} {after:?}"
            );
            // The wildcards the hints rule out are errors, not mismatches.
            let any_src = raw::iprobe(&c, ANY_SOURCE, 0);
            let any_tag = raw::iprobe(&c, 1, ANY_TAG);
            if hints.no_any_source {
                assert!(matches!(any_src, Err(Error::Arg { .. })), "{name}");
                let mut st = raw::Status::empty();
                let r = raw::recv_with_status(&c, &mut buf, ANY_SOURCE, 0, &mut st);
                assert!(matches!(r, Err(Error::Arg { .. })), "{name}");
            } else {
                assert!(matches!(any_src, Ok(None)), "{name}");
            }
            if hints.no_any_tag || hints.tag_bits_send.is_some() {
                assert!(matches!(any_tag, Err(Error::Arg { .. })), "{name}");
            } else {
                assert!(matches!(any_tag, Ok(None)), "{name}");
            }
            assert!(matches!(raw::iprobe(&c, 1, 3), Ok(None)));
        } else {
            for tag in 0..TAGS {
                for i in 0..PER_TAG {
                    raw::send(&c, &payload(me, tag, i), 0, tag).unwrap();
                }
            }
            // The allowed wildcard on the sender side: a message to self.
            if !hints.no_any_source && !hints.no_any_tag && hints.tag_bits_send.is_none() {
                raw::send(&c, b"self", me, 9).unwrap();
                let mut b = [0u8; 4];
                let mut st = raw::Status::empty();
                raw::recv_with_status(&c, &mut b, ANY_SOURCE, ANY_TAG, &mut st).unwrap();
                assert_eq!((st.source, st.tag, &b), (me, 9, b"self"));
            }
        }
        c.barrier().unwrap();
    }
    // Hints through the info keys: malformed values are errors, and
    // what is in effect is what `info` reports.
    let c = world.duplicate().unwrap();
    let mut i = Info::new();
    i.set("mpi_assert_no_any_tag", "TRUE").unwrap();
    c.set_info(&i).unwrap();
    assert_eq!(c.info().get("mpi_assert_no_any_tag"), Some("true"));
    assert!(c.hints().no_any_tag);
    let mut bad = Info::new();
    bad.set("hmpi_vci_tag_bits_send", "29:2").unwrap();
    assert!(matches!(c.set_info(&bad), Err(Error::InfoValue { .. })));
    assert_eq!(c.info().get("hmpi_vci_tag_bits_send"), None);
    let d = c.duplicate().unwrap();
    assert!(d.hints().no_any_tag, "a duplicate keeps the hints");
    let s = world
        .split_with_hints(
            Some(0),
            0,
            &CommHints {
                no_any_source: true,
                ..CommHints::default()
            },
        )
        .unwrap()
        .unwrap();
    assert!(s.hints().no_any_source);
    world.barrier().unwrap();
}

/// Message `n` of the overtaking test: its length and its bytes.
fn overtake_len(n: u32) -> usize {
    [4, 12, 200, 3000, 70_000][n as usize % 5]
}

fn overtake_msg(n: u32) -> Vec<u8> {
    let mut v: Vec<u8> = (0..overtake_len(n))
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(n) as u8)
        .collect();
    v[..4].copy_from_slice(&n.to_le_bytes());
    v
}

/// Four threads of rank 0 send on one communicator with
/// `mpi_assert_allow_overtaking`, all with the same tag (standard,
/// nonblocking and synchronous sends; fast box, inline and single copy);
/// three threads of rank 1 receive them with blocking receives from
/// `ANY_SOURCE`/`ANY_TAG`, windows of nonblocking receives and matched
/// probes. Every message arrives exactly once and intact, and with four
/// VCIs the four sending threads' messages arrive on four VCIs (with
/// one, on it). Then both ranks receive before a synchronous send to
/// each other (posted on every VCI, so no deadlock), and the wildcard a
/// no-wildcard hint rules out stays an error beside overtaking.
fn overtake_rank(u: Universe) {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let world = u.world();
    let me = world.rank();
    let peer = 1 - me;
    let c = world
        .dup_with_hints(&CommHints {
            allow_overtaking: true,
            ..CommHints::default()
        })
        .unwrap();
    assert!(c.hints().allow_overtaking);
    assert_eq!(c.info().get("mpi_assert_allow_overtaking"), Some("true"));
    const SENDERS: u32 = 4;
    const M: u32 = 200;
    const TOTAL: u32 = SENDERS * M;
    let before = received_per_vci();
    if me == 0 {
        std::thread::scope(|sc| {
            for t in 0..SENDERS {
                let c = &c;
                sc.spawn(move || {
                    for i in 0..M {
                        let n = t * M + i;
                        let m = overtake_msg(n);
                        match i % 4 {
                            0 => {
                                // SAFETY: waited for at once, while `m` lives.
                                let r = unsafe { raw::isend(c, &m, peer, 7, false) }.unwrap();
                                r.wait().unwrap();
                            }
                            1 => raw::send_mode(c, &m, peer, 7, true).unwrap(),
                            _ => raw::send(c, &m, peer, 7).unwrap(),
                        }
                    }
                });
            }
        });
    } else {
        let claimed = AtomicU32::new(0);
        let got: Vec<Vec<u32>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    let (c, claimed) = (&c, &claimed);
                    sc.spawn(move || {
                        let mut mine = Vec::new();
                        let mut check = |buf: &[u8], st: &raw::Status| {
                            let n = u32::from_le_bytes(buf[..4].try_into().unwrap());
                            assert_eq!((st.source, st.tag), (0, 7));
                            assert_eq!(st.count as usize, overtake_len(n));
                            assert_eq!(&buf[..overtake_len(n)], &overtake_msg(n)[..], "{n}");
                            mine.push(n);
                        };
                        loop {
                            let k = claimed.fetch_add(4, Relaxed);
                            if k >= TOTAL {
                                break mine;
                            }
                            let want = 4.min(TOTAL - k) as usize;
                            match r {
                                0 => {
                                    for j in 0..want {
                                        let mut b = vec![0u8; 70_000];
                                        let mut st = raw::Status::empty();
                                        let (src, tag) = match j % 2 {
                                            0 => (ANY_SOURCE, ANY_TAG),
                                            _ => (0, 7),
                                        };
                                        raw::recv_with_status(c, &mut b, src, tag, &mut st)
                                            .unwrap();
                                        check(&b, &st);
                                    }
                                }
                                1 => {
                                    let mut bufs = vec![vec![0u8; 70_000]; want];
                                    let reqs: Vec<_> = bufs
                                        .iter_mut()
                                        .map(|b| {
                                            // SAFETY: waited for below,
                                            // while `bufs` lives.
                                            unsafe { raw::irecv(c, b, ANY_SOURCE, 7) }.unwrap()
                                        })
                                        .collect();
                                    let sts: Vec<_> =
                                        reqs.into_iter().map(|q| q.wait().unwrap()).collect();
                                    for (b, st) in bufs.iter().zip(&sts) {
                                        check(b, st);
                                    }
                                }
                                _ => {
                                    for _ in 0..want {
                                        let (msg, st) = raw::mprobe(c, 0, ANY_TAG).unwrap();
                                        let mut b = vec![0u8; st.count as usize];
                                        let st2 = raw::mrecv(c, msg, &mut b).unwrap();
                                        assert_eq!(st2.count, st.count);
                                        check(&b, &st);
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = got.concat();
        all.sort_unstable();
        assert_eq!(all, (0..TOTAL).collect::<Vec<_>>(), "each message once");
        let after = received_per_vci();
        let used = vcis_used(&before, &after);
        println!(
            "overtaking: {used} of {} VCIs carried {TOTAL} messages",
            vcis()
        );
        assert_eq!(used, vcis().min(SENDERS as usize), "{before:?} {after:?}");
        assert!(matches!(raw::iprobe(&c, ANY_SOURCE, ANY_TAG), Ok(None)));
    }
    c.barrier().unwrap();
    // A receive before a synchronous send towards each other, from two
    // threads per rank: each receive is posted (on every VCI) before its
    // thread's send waits for its own match.
    std::thread::scope(|sc| {
        for t in 0..2 {
            let c = &c;
            sc.spawn(move || {
                let mut b = vec![0u8; 3000];
                // SAFETY: waited for below, while `b` lives.
                let r = unsafe { raw::irecv(c, &mut b, peer, 20 + t) }.unwrap();
                raw::send_mode(c, &overtake_msg(3 + 5 * t as u32), peer, 20 + t, true).unwrap();
                let st = r.wait().unwrap();
                assert_eq!((st.tag, st.count), (20 + t, 3000));
                assert_eq!(b, overtake_msg(3 + 5 * t as u32));
            });
        }
    });
    c.barrier().unwrap();
    let strict = world
        .dup_with_hints(&CommHints {
            allow_overtaking: true,
            no_any_source: true,
            ..CommHints::default()
        })
        .unwrap();
    assert!(matches!(
        raw::iprobe(&strict, ANY_SOURCE, 0),
        Err(Error::Arg { .. })
    ));
    assert!(matches!(raw::iprobe(&strict, peer, ANY_TAG), Ok(None)));
    world.barrier().unwrap();
}

/// Without hints, with four VCIs: every sender's messages in order on
/// three communicators at once, received with wildcards.
fn order_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let comms: Vec<_> = (0..3).map(|_| world.duplicate().unwrap()).collect();
    const M: u32 = 300;
    let before = received_per_vci();
    if me == 0 {
        let mut next = vec![[0u32; 3]; n as usize];
        let mut buf = [0u8; 12];
        for _ in 0..M * (n as u32 - 1) {
            for (k, c) in comms.iter().enumerate() {
                let mut st = raw::Status::empty();
                raw::recv_with_status(c, &mut buf, ANY_SOURCE, ANY_TAG, &mut st).unwrap();
                let s = st.source as usize;
                assert_eq!(buf, payload(st.source, st.tag, next[s][k]));
                assert_eq!(st.tag, (next[s][k] % 7) as i32);
                next[s][k] += 1;
            }
        }
    } else {
        for i in 0..M {
            for c in &comms {
                let tag = (i % 7) as i32;
                raw::send(c, &payload(me, tag, i), 0, tag).unwrap();
            }
        }
    }
    if me == 0 {
        // Consecutive communicators travel on different VCIs (their
        // point-to-point contexts are 2k: a mapping by `context % n`
        // would have left the odd VCIs to collectives alone).
        let used = vcis_used(&before, &received_per_vci());
        assert_eq!(used, 3.min(vcis()), "VCIs that carried 3 communicators");
    }
    world.barrier().unwrap();
}

/// Three streams per rank, each moved to a thread of its own, which
/// exchanges numbered messages with its partner thread of the other
/// rank; the stream VCIs carry the traffic. Then the reservation limits.
fn streams_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = 1 - me;
    assert_eq!(vcis(), 4);
    let streams: Vec<Stream> = (0..3).map(|_| u.stream().unwrap()).collect();
    let mut got: Vec<usize> = streams.iter().map(Stream::vci).collect();
    got.sort();
    assert_eq!(got, [1, 2, 3]);
    assert!(matches!(u.stream(), Err(Error::Comm { .. })));
    let comms: Vec<_> = streams.iter().map(|s| s.comm(&world).unwrap()).collect();
    let before = received_per_vci();
    const M: u32 = 2000;
    std::thread::scope(|sc| {
        for (t, c) in comms.into_iter().enumerate() {
            sc.spawn(move || {
                let tag = t as i32;
                let mut buf = [0u8; 12];
                for i in 0..M {
                    if (me + i as i32) % 2 == 0 {
                        raw::send(&c, &payload(me, tag, i), peer, tag).unwrap();
                    } else {
                        let mut st = raw::Status::empty();
                        raw::recv_with_status(&c, &mut buf, ANY_SOURCE, ANY_TAG, &mut st).unwrap();
                        assert_eq!(buf, payload(peer, tag, i), "stream {t}");
                    }
                }
                // A window of nonblocking sends, received in order.
                let out: Vec<[u8; 12]> = (0..64).map(|i| payload(me, tag, i)).collect();
                // SAFETY: every request is waited for below, while `out`
                // lives.
                let reqs: Vec<_> = out
                    .iter()
                    .map(|b| unsafe { raw::isend(&c, b, peer, tag, false) }.unwrap())
                    .collect();
                for i in 0..64 {
                    let mut st = raw::Status::empty();
                    raw::recv_with_status(&c, &mut buf, peer, tag, &mut st).unwrap();
                    assert_eq!(buf, payload(peer, tag, i));
                }
                for r in reqs {
                    r.wait().unwrap();
                }
            });
        }
    });
    let after = received_per_vci();
    for v in 1..4 {
        assert!(
            after[v] - before[v] >= u64::from(M / 2),
            "VCI {v}: {before:?} {after:?}"
        );
    }
    world.barrier().unwrap();
    drop(streams);
    // The comms are gone, so are the streams: every VCI is free again.
    let again: Vec<Stream> = (0..3).map(|_| Stream::new().unwrap()).collect();
    drop(again);
    world.barrier().unwrap();
}

/// Design notes §6: rank 0 synchronous-sends on communicator A, then on
/// B; rank 1's two threads each block in a receive on one of them, B's
/// first. With per-VCI progress alone (A and B on different VCIs) this
/// deadlocks; the global sweep keeps it impossible. On plain duplicates,
/// on hinted communicators and on stream communicators.
fn deadlock_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let hints = CommHints {
        no_any_source: true,
        no_any_tag: true,
        ..CommHints::default()
    };
    for kind in 0..3 {
        let (_s, a, b) = match kind {
            0 => (None, world.duplicate().unwrap(), world.duplicate().unwrap()),
            1 => (
                None,
                world.dup_with_hints(&hints).unwrap(),
                world.dup_with_hints(&hints).unwrap(),
            ),
            _ => {
                let s = [u.stream().unwrap(), u.stream().unwrap()];
                let a = hmpi_core::stream::comm_on(&world, Some(&s[0])).unwrap();
                let b = hmpi_core::stream::comm_on(&world, Some(&s[1])).unwrap();
                (Some(s), a, b)
            }
        };
        for n in [8usize, 3000, 100_000] {
            if me == 0 {
                let x = vec![7u8; n];
                raw::send_mode(&a, &x, 1, 1, true).unwrap();
                raw::send_mode(&b, &x, 1, 2, true).unwrap();
            } else {
                std::thread::scope(|sc| {
                    let tb = sc.spawn(|| {
                        let mut y = vec![0u8; n];
                        let mut st = raw::Status::empty();
                        raw::recv_with_status(&b, &mut y, 0, 2, &mut st).unwrap();
                        assert_eq!(st.count, n as u64);
                    });
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    let mut y = vec![0u8; n];
                    let mut st = raw::Status::empty();
                    raw::recv_with_status(&a, &mut y, 0, 1, &mut st).unwrap();
                    tb.join().unwrap();
                });
            }
        }
        world.barrier().unwrap();
    }
}

/// Four threads per rank on a tag-bit communicator: thread `i` streams
/// windows of nonblocking sends to thread `i` of the other rank (tag =
/// sender index | receiver index << 2), which receives them in order.
fn threads_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = 1 - me;
    let c = world
        .dup_with_hints(&CommHints {
            no_any_source: true,
            tag_bits_send: Some(TagBits { lo: 0, len: 2 }),
            tag_bits_recv: Some(TagBits { lo: 2, len: 2 }),
            ..CommHints::default()
        })
        .unwrap();
    const ROUNDS: u32 = 50;
    const WINDOW: u32 = 64;
    std::thread::scope(|sc| {
        for t in 0..4i32 {
            let c = &c;
            sc.spawn(move || {
                let tag = t | t << 2;
                let mut buf = [0u8; 12];
                for r in 0..ROUNDS {
                    let out: Vec<[u8; 12]> = (0..WINDOW)
                        .map(|i| payload(me, tag, r * WINDOW + i))
                        .collect();
                    // SAFETY: waited for below, while `out` lives.
                    let reqs: Vec<_> = out
                        .iter()
                        .map(|b| unsafe { raw::isend(c, b, peer, tag, false) }.unwrap())
                        .collect();
                    for i in 0..WINDOW {
                        let mut st = raw::Status::empty();
                        raw::recv_with_status(c, &mut buf, peer, tag, &mut st).unwrap();
                        assert_eq!(buf, payload(peer, tag, r * WINDOW + i));
                    }
                    for q in reqs {
                        q.wait().unwrap();
                    }
                }
            });
        }
    });
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
                "spread" => spread_rank(u),
                "order" => order_rank(u),
                "streams" => streams_rank(u),
                "deadlock" => deadlock_rank(u),
                "threads" => threads_rank(u),
                "overtake" => overtake_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[
            ("each_hint_changes_the_mapping_and_keeps_order", || {
                let r = rank_tests::launch("spread", 3, &env("4"));
                rank_tests::assert_ran(&r, "spread");
            }),
            ("without_hints_order_holds_with_four_and_eight_vcis", || {
                for (n, v) in [(2, "4"), (3, "4"), (3, "8")] {
                    let r = rank_tests::launch("order", n, &env(v));
                    rank_tests::assert_ran(&r, "order");
                }
            }),
            (
                "allow_overtaking_spreads_threads_and_receives_each_once",
                || {
                    for v in ["4", "3", "1"] {
                        let r = rank_tests::launch("overtake", 2, &env(v));
                        rank_tests::assert_ran(&r, "overtake");
                    }
                },
            ),
            ("streams_from_several_threads_at_once", || {
                let r = rank_tests::launch("streams", 2, &env("4"));
                rank_tests::assert_ran(&r, "streams");
            }),
            ("ssend_on_two_communicators_does_not_deadlock", || {
                // A and B on different VCIs (and streams need VCIs).
                let r = rank_tests::launch("deadlock", 2, &env("4"));
                rank_tests::assert_ran(&r, "deadlock");
            }),
            ("four_threads_per_rank_on_two_cores", || {
                for v in ["1", "4"] {
                    let r = rank_tests::launch("threads", 2, &env(v));
                    rank_tests::assert_ran(&r, "threads");
                }
            }),
        ],
    );
}
