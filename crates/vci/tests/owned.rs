//! Ownership passing in the engine across real ranks: given blocks move
//! without a copy, mix with plain messages in MPI order, and nothing leaks.
//!
//! The global allocator is the node heap, so vectors are shared memory and
//! given blocks can be kept as they are (a separate doctest covers a process
//! whose allocator is not the node heap).

use hmpi_core::launch::rank_tests;
use shmheap::ShmHeap;
use std::alloc::Layout;
use vci::{Endpoint, Error, OwnedBlock, SendMode, Status, ANY_SOURCE, ANY_TAG, PROC_NULL};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const ROLES: &[(&str, fn())] = &[
    ("in-place", in_place_rank),
    ("interop", interop_rank),
    ("edges", edges_rank),
    ("fan-in", fan_in_rank),
    ("overflow", overflow_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "given_blocks_move_without_a_copy_and_return_to_their_arena",
        given_blocks_move_without_a_copy_and_return_to_their_arena,
    ),
    (
        "given_and_plain_messages_interoperate_in_order",
        given_and_plain_messages_interoperate_in_order,
    ),
    (
        "alignment_proc_null_self_errors_and_matched_probes",
        alignment_proc_null_self_errors_and_matched_probes,
    ),
    (
        "posted_ownership_receives_from_any_source",
        posted_ownership_receives_from_any_source,
    ),
    (
        "given_blocks_overflowing_the_fast_box_keep_order",
        given_blocks_overflowing_the_fast_box_keep_order,
    ),
];

/// `Endpoint::recv` for these tests: the status, a truncated or failed
/// delivery as an error.
fn recv(ep: &Endpoint, buf: &mut [u8], src: i32, tag: i32, ctx: u32) -> vci::Result<Status> {
    let mut st = Status::empty();
    ep.recv(buf, src, tag, ctx, &mut st)?;
    st.into_result()
}

fn main() {
    rank_tests::main(
        |role| {
            ROLES
                .iter()
                .find(|(name, _)| *name == role)
                .map(|(_, body)| body())
        },
        TESTS,
    );
}

fn run_ok(role: &str, ranks: u32) {
    rank_tests::assert_ran(&rank_tests::launch(role, ranks, &[]), role);
}

fn given_blocks_move_without_a_copy_and_return_to_their_arena() {
    run_ok("in-place", 2);
}

fn given_and_plain_messages_interoperate_in_order() {
    run_ok("interop", 2);
}

fn alignment_proc_null_self_errors_and_matched_probes() {
    run_ok("edges", 2);
}

fn posted_ownership_receives_from_any_source() {
    run_ok("fan-in", 4);
}

fn given_blocks_overflowing_the_fast_box_keep_order() {
    run_ok("overflow", 2);
}

// ------------------------------------------------------------- helpers

fn pattern(len: usize, seed: u64) -> Vec<u64> {
    (0..len as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed)
        .collect()
}

fn in_use(rank: u32) -> u64 {
    shmheap::stats(rank).expect("stats").in_use_bytes() as u64
}

/// Rank `me`'s arena use once the engine's private lists have reached
/// their working size (one receive posted and matched, one sent) and
/// blocks freed by other ranks are back.
fn baseline(ep: &Endpoint) -> u64 {
    let me = ep.rank();
    let peer = (me + 1) % ep.size();
    let from = (me + ep.size() - 1) % ep.size();
    let mut b = [0u8; 1];
    // A receive posted before its message, and messages that wait for
    // their receive, so both lists have grown.
    // SAFETY: waited for below; `b` is not touched until then.
    let r = unsafe { ep.irecv(b.as_mut_ptr(), b.len(), from, 98, 0) }.expect("warm-up receive");
    ep.barrier();
    ep.send(&[0], peer, 98, 0, SendMode::Standard)
        .expect("warm-up send");
    r.wait().expect("warm-up receive");
    ep.send(&[0], peer, 97, 0, SendMode::Standard)
        .expect("warm-up send");
    ep.send(&[0], peer, 96, 0, SendMode::Standard)
        .expect("warm-up send");
    ep.barrier();
    // Taking the second first moves the first to the unexpected list.
    recv(ep, &mut [0u8; 1], from, 96, 0).expect("warm-up receive");
    recv(ep, &mut [0u8; 1], from, 97, 0).expect("warm-up receive");
    ep.barrier();
    shmheap::drain_remote_frees();
    shmheap::flush_thread_cache();
    in_use(me as u32)
}

/// Gives `v` with its address in `meta[0]` and `seed` in `meta[1]`.
fn give(ep: &Endpoint, v: Vec<u64>, seed: u64, dest: i32, tag: i32) {
    let mut block = OwnedBlock::from_vec(v);
    block.meta = [block.ptr.as_ptr() as u64, seed, 0, 0];
    // SAFETY: the block owns the vector's allocation, given up here.
    unsafe { ep.isend_owned(block, dest, tag, 0) }
        .expect("give")
        .wait()
        .expect("a give completes at once");
}

fn take_vec(block: OwnedBlock) -> Vec<u64> {
    // SAFETY: a block of the global allocator holding u64s.
    unsafe { block.into_vec::<u64>() }.expect("a u64 layout")
}

// ------------------------------------------------------------- in place

const LENS: &[usize] = &[0, 1, 7, 32, 1000, 1 << 17, 2 << 20];

fn in_place_rank() {
    let ep = Endpoint::new().expect("endpoint");
    let me = ep.rank();
    ep.barrier();
    let base = baseline(&ep);
    if me == 0 {
        for (i, &n) in LENS.iter().enumerate() {
            give(&ep, pattern(n, i as u64), i as u64, 1, i as i32);
        }
        // Rank 1 has freed every block: they come back to this arena.
        recv(&ep, &mut [0u8; 1], 1, 99, 0).expect("done");
        shmheap::drain_remote_frees();
        shmheap::flush_thread_cache();
        assert_eq!(in_use(0), base, "given blocks return to the giver's arena");
        let s = ep.stats();
        assert_eq!(s.sent_owned, LENS.len() as u64);
    } else {
        for (i, &n) in LENS.iter().enumerate() {
            let (b, st) = ep.recv_owned(8, 0, i as i32, 0).expect("take");
            assert!(b.given);
            assert_eq!((st.source, st.tag, st.count), (0, i as i32, 8 * n as u64));
            assert_eq!(b.meta[1], i as u64);
            if n > 0 {
                assert_eq!(
                    b.ptr.as_ptr() as u64,
                    b.meta[0],
                    "the pointer moved, no copy"
                );
                assert_eq!(shmheap::owner_of(b.ptr.as_ptr()), Some(0));
            }
            assert_eq!(take_vec(b), pattern(n, i as u64));
        }
        let s = ep.stats();
        assert_eq!(s.recv_owned, LENS.len() as u64);
        assert_eq!(
            s.owned_in_place,
            LENS.iter().filter(|&&n| n > 0).count() as u64
        );
        assert_eq!(
            s.owned_copied,
            LENS.iter().filter(|&&n| n == 0).count() as u64
        );
        ep.send(&[1], 0, 99, 0, SendMode::Standard).expect("done");
    }
    ep.barrier();
}

// ------------------------------------------------------------- interop

/// One message of the interop sequence: given, or a plain send of a heap
/// vector, of a stack array, or of an empty buffer.
#[derive(Clone, Copy)]
enum Kind {
    Given(usize),
    PlainHeap(usize),
    PlainStack,
    PlainEmpty,
}

const SEQ: &[Kind] = &[
    Kind::Given(3),
    Kind::PlainHeap(40),
    Kind::Given(100_000),
    Kind::PlainStack,
    Kind::Given(0),
    Kind::PlainEmpty,
    Kind::PlainHeap(300_000),
    Kind::Given(5),
];

fn interop_rank() {
    let ep = Endpoint::new().expect("endpoint");
    let me = ep.rank();
    ep.barrier();
    let base = baseline(&ep);
    if me == 0 {
        // Twice: once taken, once received plainly. Same tag: order counts.
        for round in 0..2u64 {
            for (i, k) in SEQ.iter().enumerate() {
                let seed = round * 100 + i as u64;
                match *k {
                    Kind::Given(n) => give(&ep, pattern(n, seed), seed, 1, 5),
                    Kind::PlainHeap(n) => {
                        let v = pattern(n, seed);
                        // SAFETY: u64s are plain bytes.
                        let bytes =
                            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), 8 * n) };
                        ep.send(bytes, 1, 5, 0, SendMode::Standard).expect("send");
                    }
                    Kind::PlainStack => {
                        let a = [seed as u8; 24];
                        ep.send(&a, 1, 5, 0, SendMode::Standard).expect("send");
                    }
                    Kind::PlainEmpty => ep.send(&[], 1, 5, 0, SendMode::Standard).expect("send"),
                }
            }
        }
        // A given block received into a short buffer: truncated, and freed.
        give(&ep, pattern(64, 7), 7, 1, 6);
        recv(&ep, &mut [0u8; 1], 1, 99, 0).expect("done");
        shmheap::drain_remote_frees();
        shmheap::flush_thread_cache();
        assert_eq!(in_use(0), base, "nothing leaks on either path");
    } else {
        // Round 0: every message taken as a block.
        for (i, k) in SEQ.iter().enumerate() {
            let seed = i as u64;
            let (b, st) = ep.recv_owned(8, 0, 5, 0).expect("take");
            match *k {
                Kind::Given(n) => {
                    assert!(b.given && b.meta[1] == seed, "message {i} in order");
                    assert_eq!(take_vec(b), pattern(n, seed));
                }
                Kind::PlainHeap(n) => {
                    assert!(!b.given && b.meta == [0; 4], "message {i} in order");
                    assert_eq!(st.count, 8 * n as u64);
                    assert_eq!(take_vec(b), pattern(n, seed));
                }
                Kind::PlainStack => {
                    assert!(!b.given);
                    // SAFETY: the block holds `len` initialised bytes.
                    let got = unsafe { std::slice::from_raw_parts(b.ptr.as_ptr(), b.len) };
                    assert_eq!(got, &[seed as u8; 24]);
                    // SAFETY: ours.
                    unsafe { b.free() };
                }
                Kind::PlainEmpty => {
                    assert!(!b.given && b.len == 0 && st.count == 0);
                    // SAFETY: ours (empty: nothing to free).
                    unsafe { b.free() };
                }
            }
        }
        // Round 1: every message received into a buffer.
        let mut buf = vec![0u8; 8 << 20];
        for (i, k) in SEQ.iter().enumerate() {
            let seed = 100 + i as u64;
            let st = recv(&ep, &mut buf, 0, 5, 0).expect("plain receive");
            let got = &buf[..st.count as usize];
            match *k {
                Kind::Given(n) | Kind::PlainHeap(n) => {
                    let want = pattern(n, seed);
                    // SAFETY: u64s are plain bytes.
                    let want =
                        unsafe { std::slice::from_raw_parts(want.as_ptr().cast::<u8>(), 8 * n) };
                    assert_eq!(got, want, "message {i}");
                }
                Kind::PlainStack => assert_eq!(got, &[seed as u8; 24]),
                Kind::PlainEmpty => assert!(got.is_empty()),
            }
        }
        let mut small = [0u8; 16];
        match recv(&ep, &mut small, 0, 6, 0) {
            Err(Error::Truncate {
                status,
                message_len,
            }) => {
                assert_eq!((status.count, message_len), (16, 512));
                let want = pattern(2, 7);
                assert_eq!(small[..8], want[0].to_ne_bytes());
                assert_eq!(small[8..], want[1].to_ne_bytes());
            }
            other => panic!("expected a truncation, got {other:?}"),
        }
        ep.send(&[1], 0, 99, 0, SendMode::Standard).expect("done");
    }
    ep.barrier();
}

// ------------------------------------------------------------- edges

fn edges_rank() {
    let ep = Endpoint::new().expect("endpoint");
    let me = ep.rank();
    let base = baseline(&ep);

    // Giving to PROC_NULL frees the block; receiving from it is empty.
    give(&ep, pattern(10, 1), 1, PROC_NULL, 0);
    let (b, st) = ep.recv_owned(16, PROC_NULL, 0, 0).expect("proc null");
    assert_eq!(
        (st.source, st.tag, st.count, b.len),
        (PROC_NULL, ANY_TAG, 0, 0)
    );
    assert_eq!(b.ptr.as_ptr() as usize % 16, 0);

    // Errors leave the block with the caller.
    let block = OwnedBlock::from_vec(pattern(4, 2));
    // SAFETY: the block stays ours on error (the API's promise), freed below.
    let e = unsafe { ep.isend_owned(block, 1 - me, -5, 0) }.unwrap_err();
    assert!(matches!(e, Error::Tag { tag: -5 }));
    // SAFETY: as above.
    let e = unsafe { ep.isend_owned(block, 7, 0, 0) }.unwrap_err();
    assert!(matches!(e, Error::Rank { rank: 7, .. }));
    let mut bad = block;
    bad.len = bad.layout.size() + 1;
    // SAFETY: rejected before anything is touched.
    let e = unsafe { ep.isend_owned(bad, 1 - me, 0, 0) }.unwrap_err();
    assert!(matches!(e, Error::Block { .. }));
    assert_eq!(take_vec(block), pattern(4, 2));
    assert!(matches!(
        ep.recv_owned(3, 0, 0, 0),
        Err(Error::Block { .. })
    ));

    // To oneself, in place.
    give(&ep, pattern(50, 3), 3, me, 1);
    let (b, _) = ep.recv_owned(8, me, 1, 0).expect("self");
    assert_eq!(b.ptr.as_ptr() as u64, b.meta[0]);
    assert_eq!(take_vec(b), pattern(50, 3));

    // A receive that needs more alignment than the block has: a copy.
    let v = pattern(1000, 4);
    let addr = v.as_ptr() as usize;
    give(&ep, v, 4, me, 2);
    // Twice the address's own alignment: more than the block has.
    let align = (addr & addr.wrapping_neg()) << 1;
    let (b, _) = ep.recv_owned(align, me, 2, 0).expect("aligned");
    assert!(b.given && b.meta[1] == 4 && b.ptr.as_ptr() as usize % align == 0);
    assert_ne!(b.ptr.as_ptr() as u64, b.meta[0]);
    assert_eq!(b.layout, Layout::from_size_align(8000, align).unwrap());
    // SAFETY: the copy holds 1000 initialised u64s.
    let got = unsafe { std::slice::from_raw_parts(b.ptr.as_ptr().cast::<u64>(), 1000) };
    assert_eq!(got, pattern(1000, 4));
    // SAFETY: ours.
    unsafe { b.free() };

    // Matched probes: received as a block, or dropped (which frees it).
    give(&ep, pattern(20, 5), 5, me, 3);
    give(&ep, pattern(30, 6), 6, me, 4);
    let (m, st) = ep.mprobe(me, 3, 0).expect("mprobe");
    assert_eq!(st.count, 160);
    let (b, _) = m.recv_owned(8).expect("mrecv owned");
    assert_eq!(take_vec(b), pattern(20, 5));
    let (m, _) = ep.mprobe(ANY_SOURCE, 4, 0).expect("mprobe");
    drop(m);

    let s = ep.stats();
    assert_eq!(s.owned_copied, 1, "only the over-aligned receive copied");
    shmheap::drain_remote_frees();
    shmheap::flush_thread_cache();
    assert_eq!(in_use(me as u32), base, "no block leaks");
    ep.barrier();
}

// ------------------------------------------------------------- fan-in

fn fan_in_rank() {
    let ep = Endpoint::new().expect("endpoint");
    let me = ep.rank();
    let n = ep.size();
    ep.barrier();
    const PER: usize = 50;
    if me == 0 {
        let total = PER * (n as usize - 1);
        let mut outs: Vec<Option<OwnedBlock>> = vec![None; total];
        let mut seen = vec![0u64; n as usize];
        {
            let mut reqs = Vec::with_capacity(total);
            for out in outs.iter_mut() {
                // SAFETY: every request is waited for below.
                reqs.push(unsafe { ep.irecv_owned(out, 8, ANY_SOURCE, ANY_TAG, 0) }.unwrap());
            }
            ep.barrier();
            let st = vci::wait_all(reqs).expect("all taken");
            for s in &st {
                assert!(s.error.is_none());
            }
        }
        for out in outs {
            let b = out.expect("a block");
            let (src, k) = (b.meta[2], b.meta[3]);
            assert_eq!(k, seen[src as usize], "per-source order");
            seen[src as usize] += 1;
            assert_eq!(take_vec(b), pattern(1 + k as usize * 37, src * 1000 + k));
        }
        assert!(seen[1..].iter().all(|&c| c == PER as u64));
    } else {
        ep.barrier();
        for k in 0..PER as u64 {
            let v = pattern(1 + k as usize * 37, me as u64 * 1000 + k);
            let mut block = OwnedBlock::from_vec(v);
            block.meta = [0, 0, me as u64, k];
            // SAFETY: the block owns the vector's allocation, given up.
            unsafe { ep.isend_owned(block, 0, (k % 3) as i32, 0) }
                .expect("give")
                .wait()
                .expect("complete");
        }
    }
    ep.barrier();
}

// ------------------------------------------------------------- overflow

/// Blocks given faster than the taker takes them: the first fill the fast
/// box's ring, the rest travel in envelopes, plain messages are mixed in,
/// and some blocks carry a fourth metadata word (which a slot keeps in its
/// second line). The taker gets every one in order, in place, with its
/// metadata, and the giver's arena is back at its baseline afterwards.
fn overflow_rank() {
    const N: usize = 3 * vci::fastbox::FB_SLOTS;
    let ep = Endpoint::new().expect("endpoint");
    let me = ep.rank();
    let base = baseline(&ep);
    if me == 0 {
        for i in 0..N {
            if i % 5 == 4 {
                ep.send(&(i as u64).to_le_bytes(), 1, 7, 0, SendMode::Standard)
                    .expect("plain");
                continue;
            }
            let mut block = OwnedBlock::from_vec(pattern(1 + i % 9, i as u64));
            block.meta = [block.ptr.as_ptr() as u64, i as u64, 0, (i % 2 * i) as u64];
            // SAFETY: the block owns the vector's allocation, given up here.
            unsafe { ep.isend_owned(block, 1, 7, 0) }
                .expect("give")
                .wait()
                .expect("a give completes at once");
        }
        ep.barrier();
        recv(&ep, &mut [0u8; 1], 1, 99, 0).expect("done");
        shmheap::drain_remote_frees();
        shmheap::flush_thread_cache();
        assert_eq!(in_use(0), base, "given blocks return to the giver's arena");
    } else {
        ep.barrier();
        for i in 0..N {
            let (b, st) = ep.recv_owned(8, 0, 7, 0).expect("take");
            if i % 5 == 4 {
                assert!(!b.given, "message {i} was a plain send");
                assert_eq!(take_vec(b), [i as u64]);
                continue;
            }
            assert!(b.given, "message {i}");
            assert_eq!(st.count, 8 * (1 + i % 9) as u64);
            assert_eq!(
                b.meta[1..],
                [i as u64, 0, (i % 2 * i) as u64],
                "message {i}"
            );
            assert_eq!(
                b.ptr.as_ptr() as u64,
                b.meta[0],
                "message {i} moved, no copy"
            );
            assert_eq!(take_vec(b), pattern(1 + i % 9, i as u64));
        }
        ep.send(&[1], 0, 99, 0, SendMode::Standard).expect("done");
    }
    ep.barrier();
}
