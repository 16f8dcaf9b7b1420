//! Messages around the fast box's sizes, across real ranks: every length
//! from 0 to 2100 bytes both ways (one slot, several consecutive slots
//! that may cross the ring's end, envelopes and single copies above),
//! received with wildcards, after probes, and truncated into short
//! buffers; and a stream of 200 such messages sent before any receive is
//! posted, which wait in the slots and on the unexpected list and are
//! received in reverse order.
//!
//! A `harness = false` binary on `hmpi_core::launch::rank_tests`, as
//! `p2p_ranks.rs`. Its global allocator is the node heap, so `Vec`s are
//! shared memory.

use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::request::multiple_scope;
use shmheap::ShmHeap;
use std::time::Duration;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// A rank's side of a test; it finalizes by dropping the universe.
type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[("every-length", every_length_rank), ("stream", stream_rank)];

const TESTS: &[(&str, fn())] = &[
    (
        "every_length_both_ways_with_wildcards_probes_and_truncation",
        every_length_both_ways_with_wildcards_probes_and_truncation,
    ),
    (
        "a_stream_sent_before_its_receives_arrives_whole_in_any_order",
        a_stream_sent_before_its_receives_arrives_whole_in_any_order,
    ),
];

/// Longest message length tried.
const MAX: usize = 2100;

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

fn every_length_both_ways_with_wildcards_probes_and_truncation() {
    run_ok("every-length", 2);
}

fn a_stream_sent_before_its_receives_arrives_whole_in_any_order() {
    run_ok("stream", 2);
}

/// A deterministic byte string for message `k` of `n` bytes.
fn pattern(k: u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9e37_79b9) ^ k.wrapping_mul(131)) as u8)
        .collect()
}

/// Receives message `k` of `len` bytes from `from` (a rank, or any)
/// with `tag` in one of four ways chosen by `k`: exactly, into a buffer
/// one byte longer, after a probe that tells its length, or into a buffer
/// too short (a truncation, the prefix delivered).
fn receive_one<S: Source>(from: &S, src: i32, k: u64, len: usize, tag: i32) {
    let want = pattern(k, len);
    let recv_tag = if k % 2 == 0 { tag } else { ANY_TAG };
    match k % 4 {
        0 => {
            let mut buf = vec![0u8; len];
            let st = from.receive_into_with_tag(&mut buf[..], recv_tag).unwrap();
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (src, tag, len as u64)
            );
            assert!(buf == want, "length {len}");
        }
        1 => {
            let mut buf = vec![0xeeu8; len + 1];
            let st = from.receive_into_with_tag(&mut buf[..], recv_tag).unwrap();
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (src, tag, len as u64)
            );
            assert!(buf[..len] == want[..] && buf[len] == 0xee, "length {len}");
        }
        2 => {
            let st = from.probe_with_tag(recv_tag).unwrap();
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (src, tag, len as u64)
            );
            let mut buf = vec![0u8; st.byte_count() as usize];
            let st = from.receive_into_with_tag(&mut buf[..], recv_tag).unwrap();
            assert_eq!(st.byte_count(), len as u64);
            assert!(buf == want, "length {len}");
        }
        _ => {
            // A third of the message, or nothing of a short one.
            let short = len / 3;
            let mut buf = vec![0xeeu8; short + 1];
            let res = from.receive_into_with_tag(&mut buf[..short], recv_tag);
            if short == len {
                // Nothing to truncate (length 0).
                assert_eq!(res.unwrap().byte_count(), 0);
            } else {
                match res {
                    Err(Error::Truncate {
                        status,
                        message_len,
                    }) => {
                        assert_eq!(
                            (message_len, status.source_rank(), status.tag()),
                            (len as u64, src, tag),
                            "length {len}"
                        );
                    }
                    other => panic!("length {len}: {other:?}"),
                }
            }
            assert!(
                buf[..short] == want[..short] && buf[short] == 0xee,
                "length {len}"
            );
        }
    }
}

fn every_length_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    let any = world.any_process();
    let sent_fastbox = || {
        hmpi_core::environment::endpoint()
            .unwrap()
            .stats()
            .sent_fastbox
    };
    let before = sent_fastbox();
    for len in 0..=MAX {
        let tag = (len % 97) as i32;
        // Rank 0 sends message 2·len, rank 1 answers with 2·len + 1;
        // named and any source take turns.
        let (first, second) = (2 * len as u64, 2 * len as u64 + 1);
        if me == 0 {
            peer.send_with_tag(&pattern(first, len)[..], tag).unwrap();
            if len % 2 == 0 {
                receive_one(&any, 1, second, len, tag);
            } else {
                receive_one(&peer, 1, second, len, tag);
            }
        } else {
            if len % 2 == 0 {
                receive_one(&peer, 0, first, len, tag);
            } else {
                receive_one(&any, 0, first, len, tag);
            }
            peer.send_with_tag(&pattern(second, len)[..], tag).unwrap();
        }
    }
    // A ping-pong always finds credit: every message of up to
    // FB_SPAN_MAX bytes went through the fast box, one slot or several.
    assert_eq!(
        sent_fastbox() - before,
        vci::fastbox::FB_SPAN_MAX as u64 + 1
    );
    world.barrier().unwrap();
}

/// Messages in the stream.
const STREAM: usize = 200;

/// Length of stream message `k`: all over 0..=MAX, many of them a few
/// slots long.
fn stream_len(k: usize) -> usize {
    match k % 3 {
        0 => (k * 37) % (MAX + 1),
        1 => 297 + (k * 53) % 936,
        _ => (k * 11) % 297,
    }
}

fn stream_rank(u: Universe) {
    let world = u.world();
    let me = world.rank();
    if me == 0 {
        let to = world.process_at_rank(1);
        let outs: Vec<Vec<u8>> = (0..STREAM)
            .map(|k| pattern(k as u64, stream_len(k)))
            .collect();
        multiple_scope(STREAM, |scope, coll| {
            for (k, out) in outs.iter().enumerate() {
                coll.add(
                    to.immediate_send_with_tag(scope, &out[..], k as i32)
                        .unwrap(),
                );
            }
            let mut done = Vec::new();
            coll.wait_all(&mut done);
            assert_eq!(done.len(), STREAM);
            for (i, res) in done {
                res.unwrap_or_else(|e| panic!("send {i}: {e}"));
            }
        });
    } else {
        // Let the stream arrive before anything is received: the first
        // messages fill the ring, the rest queue behind them.
        std::thread::sleep(Duration::from_millis(200));
        let from = world.process_at_rank(0);
        let any = world.any_process();
        // The last first: every earlier message is taken off its slots
        // onto the unexpected list to reach it.
        for k in (0..STREAM).rev() {
            let len = stream_len(k);
            let tag = k as i32;
            if k % 2 == 0 {
                receive_tagged(&any, 0, k as u64, len, tag);
            } else {
                receive_tagged(&from, 0, k as u64, len, tag);
            }
        }
    }
    world.barrier().unwrap();
}

/// [`receive_one`] with the tag always named (the stream's messages are
/// taken out of order): exactly, after a probe, or truncated.
fn receive_tagged<S: Source>(from: &S, src: i32, k: u64, len: usize, tag: i32) {
    let want = pattern(k, len);
    match k % 3 {
        0 => {
            let mut buf = vec![0u8; len];
            let st = from.receive_into_with_tag(&mut buf[..], tag).unwrap();
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (src, tag, len as u64)
            );
            assert!(buf == want, "message {k}, length {len}");
        }
        1 => {
            let st = from.probe_with_tag(tag).unwrap();
            assert_eq!(
                (st.source_rank(), st.tag(), st.byte_count()),
                (src, tag, len as u64)
            );
            let mut buf = vec![0u8; len];
            from.receive_into_with_tag(&mut buf[..], tag).unwrap();
            assert!(buf == want, "message {k}, length {len}");
        }
        _ => {
            let short = len / 2;
            let mut buf = vec![0u8; short];
            match from.receive_into_with_tag(&mut buf[..], tag) {
                Ok(st) => assert_eq!((len, st.byte_count()), (0, 0)),
                Err(Error::Truncate { message_len, .. }) => {
                    assert_eq!(message_len, len as u64, "message {k}")
                }
                Err(e) => panic!("message {k}: {e}"),
            }
            assert!(buf[..] == want[..short], "message {k}, length {len}");
        }
    }
}
