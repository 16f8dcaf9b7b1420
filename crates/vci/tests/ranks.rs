//! The engine across real ranks started by the launcher.
//!
//! This test binary has its own small harness (`harness = false`, as the
//! root crate's `tests/heap_ranks.rs`): run plainly, it runs the tests below
//! one after another; each launches ranks that re-execute this binary with
//! `HMPI_TEST_ROLE` naming the rank side to run (and `HMPI_TEST_PLAN` for
//! generated programs). Its global allocator is the node heap, so `Vec`s
//! are shared memory (single copy) once a rank has attached; stack, static
//! and `System` buffers are private (two copy).

use hmpi_core::launch::rank_tests;
use proptest::prelude::*;
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;
use vci::{Endpoint, Error, SendMode, Status, StatusError, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const PLAN: &str = "HMPI_TEST_PLAN";
/// Default largest immediate payload.
const EAGER: usize = vci::config::DEFAULT_EAGER_MAX;

const ROLES: &[(&str, fn())] = &[
    ("pingpong-heap", pingpong_heap_rank),
    ("pingpong-private", pingpong_private_rank),
    ("semantics", semantics_rank),
    ("model", model_rank),
    ("ring", ring_rank),
    ("threads", threads_rank),
    ("ssend", ssend_rank),
    ("request-sets", request_sets_rank),
    ("mprobe", mprobe_rank),
    ("synergistic", synergistic_rank),
    ("fastbox-order", fastbox_order_rank),
    ("fastbox-unexpected", fastbox_unexpected_rank),
    ("fastbox-posted", fastbox_posted_rank),
    ("every-vci", every_vci_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "pingpong_every_size_heap_buffers_single_copy",
        pingpong_every_size_heap_buffers_single_copy,
    ),
    (
        "pingpong_every_size_private_buffers_kernel_assisted",
        pingpong_every_size_private_buffers_kernel_assisted,
    ),
    (
        "pingpong_every_size_private_buffers_two_copy",
        pingpong_every_size_private_buffers_two_copy,
    ),
    ("matching_semantics", matching_semantics),
    (
        "fast_boxes_and_queues_keep_each_senders_order",
        fast_boxes_and_queues_keep_each_senders_order,
    ),
    (
        "fast_box_messages_wait_on_the_unexpected_list_intact",
        fast_box_messages_wait_on_the_unexpected_list_intact,
    ),
    (
        "fast_box_messages_left_in_their_slots_meet_posted_receives",
        fast_box_messages_left_in_their_slots_meet_posted_receives,
    ),
    (
        "model_random_programs_with_two_vcis",
        model_random_programs_with_two_vcis,
    ),
    (
        "model_random_programs_without_fast_boxes",
        model_random_programs_without_fast_boxes,
    ),
    (
        "ssend_deadlock_scenario_with_a_vci_per_context",
        ssend_deadlock_scenario_with_a_vci_per_context,
    ),
    (
        "threads_and_request_sets_across_four_vcis",
        threads_and_request_sets_across_four_vcis,
    ),
    (
        "model_random_programs_match_the_reference",
        model_random_programs_match_the_reference,
    ),
    (
        "more_ranks_than_cores_ring_and_all_to_all",
        more_ranks_than_cores_ring_and_all_to_all,
    ),
    (
        "pingpong_heap_with_eager_max_4k",
        pingpong_heap_with_eager_max_4k,
    ),
    (
        "threads_of_two_ranks_share_one_vci",
        threads_of_two_ranks_share_one_vci,
    ),
    (
        "ssend_completes_after_match_and_two_context_threads_do_not_deadlock",
        ssend_completes_after_match_and_two_context_threads_do_not_deadlock,
    ),
    (
        "request_sets_wait_and_test_any_some_all",
        request_sets_wait_and_test_any_some_all,
    ),
    (
        "mprobe_threads_receive_each_message_once",
        mprobe_threads_receive_each_message_once,
    ),
    (
        "synergistic_large_messages_and_sender_helps",
        synergistic_large_messages_and_sender_helps,
    ),
    ("synergistic_with_4k_blocks", synergistic_with_4k_blocks),
    (
        "real_locks_pingpong_order_threads_and_mprobe",
        real_locks_pingpong_order_threads_and_mprobe,
    ),
    (
        "receives_on_every_vci_take_each_message_once",
        receives_on_every_vci_take_each_message_once,
    ),
];

// ---------------------------------------------------------------- parent

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

fn run_ok(role: &str, ranks: u32, env: &[(&str, String)]) {
    rank_tests::assert_ran(&rank_tests::launch(role, ranks, env), role);
}

fn pingpong_every_size_heap_buffers_single_copy() {
    run_ok("pingpong-heap", 2, &[]);
}

fn pingpong_heap_with_eager_max_4k() {
    run_ok(
        "pingpong-heap",
        2,
        &[(vci::config::EAGER_MAX_VAR, "4K".to_string())],
    );
}

fn threads_of_two_ranks_share_one_vci() {
    run_ok("threads", 2, &[]);
}

fn pingpong_every_size_private_buffers_kernel_assisted() {
    let report = rank_tests::launch("pingpong-private", 2, &[]);
    assert!(report.success(), "{}", rank_tests::describe(&report));
    // On Linux as one user without a seccomp filter this is kernel
    // assisted; say so when the machine does not allow it.
    for r in &report.ranks {
        let out = String::from_utf8_lossy(&r.stdout);
        if out.contains("not permitted") {
            println!(
                "(rank {}: CMA not permitted, two copy checked instead)",
                r.rank
            );
        }
    }
}

fn ssend_completes_after_match_and_two_context_threads_do_not_deadlock() {
    run_ok("ssend", 2, &[]);
}

fn fast_boxes_and_queues_keep_each_senders_order() {
    run_ok("fastbox-order", 2, &[]);
}

fn fast_box_messages_wait_on_the_unexpected_list_intact() {
    run_ok("fastbox-unexpected", 2, &[]);
}

fn fast_box_messages_left_in_their_slots_meet_posted_receives() {
    run_ok("fastbox-posted", 3, &[]);
}

fn ssend_deadlock_scenario_with_a_vci_per_context() {
    run_ok("ssend", 2, &[(vci::config::VCIS_VAR, "2".into())]);
}

/// Real locks from the start (`HMPI_SOLO=0`); every other test runs in
/// solo mode, the default (the creating thread's locks without locked
/// instructions, ended for good when other threads communicate).
fn real_locks_pingpong_order_threads_and_mprobe() {
    let real = [(vci::config::SOLO_VAR, "0".to_string())];
    for role in [
        "pingpong-heap",
        "fastbox-order",
        "ssend",
        "threads",
        "mprobe",
    ] {
        run_ok(role, 2, &real);
    }
}

/// Senders spread over VCIs by thread, receives and probes on every VCI
/// (`on_every_vci`), with 4 VCIs, solo mode and real locks, and with one
/// VCI (where the words fall back to the plain context's).
fn receives_on_every_vci_take_each_message_once() {
    for (vcis, solo) in [("4", "1"), ("4", "0"), ("3", "1"), ("1", "1")] {
        run_ok(
            "every-vci",
            2,
            &[
                (vci::config::VCIS_VAR, vcis.to_string()),
                (vci::config::SOLO_VAR, solo.to_string()),
            ],
        );
    }
}

fn threads_and_request_sets_across_four_vcis() {
    let four = [(vci::config::VCIS_VAR, "4".to_string())];
    run_ok("threads", 2, &four);
    run_ok("request-sets", 2, &four);
    run_ok("mprobe", 2, &four);
}

fn request_sets_wait_and_test_any_some_all() {
    run_ok("request-sets", 2, &[]);
}

fn mprobe_threads_receive_each_message_once() {
    run_ok("mprobe", 2, &[]);
}

fn synergistic_large_messages_and_sender_helps() {
    let report = rank_tests::launch("synergistic", 2, &[]);
    assert!(report.success(), "{}", rank_tests::describe(&report));
    for r in &report.ranks {
        for line in String::from_utf8_lossy(&r.stdout).lines() {
            if line.starts_with("synergistic:") {
                println!("    {line}");
            }
        }
    }
}

fn synergistic_with_4k_blocks() {
    run_ok(
        "synergistic",
        2,
        &[(vci::config::SYNERGISTIC_BLOCK_VAR, "4K".to_string())],
    );
}

fn pingpong_every_size_private_buffers_two_copy() {
    run_ok(
        "pingpong-private",
        2,
        &[(vci::config::CMA_VAR, "0".to_string())],
    );
}

fn matching_semantics() {
    run_ok("semantics", 3, &[]);
}

fn more_ranks_than_cores_ring_and_all_to_all() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    run_ok("ring", (cores + 3).max(5), &[]);
}

// ---------------------------------------------------------------- helpers

/// `Endpoint::isend` for these tests.
fn isend<'a>(
    ep: &'a Endpoint,
    buf: &'a [u8],
    dest: i32,
    tag: i32,
    ctx: u32,
) -> vci::Result<vci::Request<'a>> {
    // SAFETY: every request in these tests is waited for, tested to
    // completion or dropped; none is leaked.
    unsafe { ep.isend(buf, dest, tag, ctx, SendMode::Standard) }
}

/// `Endpoint::isend` in synchronous mode for these tests.
fn issend_t<'a>(
    ep: &'a Endpoint,
    buf: &'a [u8],
    dest: i32,
    tag: i32,
    ctx: u32,
) -> vci::Result<vci::Request<'a>> {
    // SAFETY: as for `isend`.
    unsafe { ep.isend(buf, dest, tag, ctx, SendMode::Synchronous) }
}

/// `Endpoint::isend_or_in` for these tests, in context 0.
fn isend_in<'a>(
    ep: &'a Endpoint,
    place: Option<*mut vci::Request<'a>>,
    buf: &'a [u8],
    dest: i32,
    tag: i32,
) -> vci::Result<vci::Start> {
    // SAFETY: a place given here is storage for a request that the test
    // waits for once the engine has written it.
    unsafe { ep.isend_or_in(|| place, buf, dest, tag, 0) }
}

/// `Endpoint::irecv_raw_or_in` for these tests, in context 0.
fn irecv_in<'a>(
    ep: &'a Endpoint,
    place: Option<*mut vci::Request<'a>>,
    buf: *mut u8,
    len: usize,
    src: i32,
    tag: i32,
) -> vci::Result<vci::Start> {
    // SAFETY: as for `isend_in`; `buf` is a live vector of `len` bytes
    // that the test leaves alone until the request is waited for.
    unsafe { ep.irecv_raw_or_in(|| place, buf, len, src, tag, 0) }
}

/// `Endpoint::irecv` for these tests.
fn irecv<'a>(
    ep: &'a Endpoint,
    buf: &'a mut [u8],
    src: i32,
    tag: i32,
    ctx: u32,
) -> vci::Result<vci::Request<'a>> {
    // SAFETY: as for `isend`; `buf` is borrowed for the request's
    // lifetime, so nothing else touches it until the request ends.
    unsafe { ep.irecv(buf.as_mut_ptr(), buf.len(), src, tag, ctx) }
}

/// `Endpoint::recv` for these tests: the status, a truncated or failed
/// delivery as an error.
fn recv(ep: &Endpoint, buf: &mut [u8], src: i32, tag: i32, ctx: u32) -> vci::Result<Status> {
    let mut st = Status::empty();
    ep.recv(buf, src, tag, ctx, &mut st)?;
    st.into_result()
}

fn endpoint() -> Endpoint {
    Endpoint::new().expect("endpoint")
}

fn byte(i: usize, seed: usize) -> u8 {
    (i.wrapping_mul(131).wrapping_add(seed.wrapping_mul(7919)) % 251) as u8
}

fn fill(buf: &mut [u8], seed: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = byte(i, seed);
    }
}

fn check(buf: &[u8], seed: usize, what: &str) {
    if let Some(i) = (0..buf.len()).find(|&i| buf[i] != byte(i, seed)) {
        panic!(
            "{what}: byte {i} of {} is {}, expected {}",
            buf.len(),
            buf[i],
            byte(i, seed)
        );
    }
}

/// Every size from 0 to 16 MiB: powers of two and one either side.
fn sizes() -> Vec<usize> {
    let mut s = BTreeSet::from([0usize, 1, 2, 3]);
    for k in 2..=24 {
        let p = 1usize << k;
        s.insert(p - 1);
        s.insert(p);
        if k < 24 {
            s.insert(p + 1);
        }
    }
    s.into_iter().collect()
}

/// A buffer in private memory (the system allocator), never in the heap.
struct PrivBuf {
    p: *mut u8,
    len: usize,
}

impl PrivBuf {
    fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len.max(1), 64).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { System.alloc_zeroed(layout) };
        assert!(!p.is_null());
        assert!(!shmheap::is_shared(p));
        PrivBuf { p, len }
    }

    fn get(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes allocated above, uniquely borrowed through
        // `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.p, self.len) }
    }

    fn view(&self) -> &[u8] {
        // SAFETY: `len` bytes allocated above, shared through `&self`.
        unsafe { std::slice::from_raw_parts(self.p, self.len) }
    }
}

impl Drop for PrivBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len.max(1), 64).unwrap();
        // SAFETY: allocated with this layout by `new`.
        unsafe { System.dealloc(self.p, layout) };
    }
}

fn heap_in_use() -> u64 {
    shmheap::flush_thread_cache();
    shmheap::local_stats().expect("stats").in_use_bytes() as u64
}

// ------------------------------------------------------------ ping-pong

fn pingpong_heap_rank() {
    let ep = endpoint();
    assert_eq!(ep.size(), 2);
    let me = ep.rank();
    let peer = 1 - me;
    let sizes = sizes();
    warm_up(&ep, peer);
    let mut in_use = Vec::with_capacity(2);
    for _round in 0..2 {
        for &n in &sizes {
            let tag = (n % 1000) as i32;
            let mut out = vec![0u8; n];
            let mut inb = vec![0u8; n];
            assert!(n == 0 || shmheap::is_shared(out.as_ptr()));
            if me == 0 {
                fill(&mut out, n);
                ep.send(&out, peer, tag, 0, SendMode::Standard).unwrap();
                let st = recv(&ep, &mut inb, peer, tag, 0).unwrap();
                assert_eq!((st.source, st.tag, st.count), (peer, tag, n as u64));
                check(&inb, n + 1, "pong");
            } else {
                let st = recv(&ep, &mut inb, peer, tag, 0).unwrap();
                assert_eq!((st.source, st.tag, st.count), (peer, tag, n as u64));
                check(&inb, n, "ping");
                fill(&mut out, n + 1);
                ep.send(&out, peer, tag, 0, SendMode::Standard).unwrap();
            }
        }
        ep.barrier();
        in_use.push(heap_in_use());
    }
    // Every envelope went back to its arena: a second round leaks nothing.
    assert_eq!(in_use[0], in_use[1], "heap usage after round 1 and 2");
    // Two rounds, and the warm-up's 32 immediate messages each way.
    let eager = ep.config().eager_max;
    let expected_eager = std::env::var(vci::config::EAGER_MAX_VAR).map_or(EAGER, |_| 4096);
    assert_eq!(eager, expected_eager);
    // Up to the eager limit inline, and up to the fast box's longest
    // message through its slots (a ping-pong always finds credit).
    let inline = eager.max(fast_box_max(&ep));
    let small = sizes.iter().filter(|&&n| n <= inline).count() as u64 * 2 + 32;
    let large = sizes.len() as u64 * 2 + 32 - small;
    let s = ep.stats();
    assert_eq!(s.sent_immediate, small, "{s:?}");
    assert_eq!(s.sent_single_copy, large, "{s:?}");
    assert_eq!(s.sent_two_copy, 0, "{s:?}");
    assert_eq!(s.recv_immediate, small, "{s:?}");
    assert_eq!(s.recv_single_copy, large, "{s:?}");
    assert_eq!(s.recv_two_copy, 0, "{s:?}");
    ep.barrier();
}

/// Grows the VCI's unexpected and posted lists (and the receive table) to
/// 16 entries, so that their capacity stays put while heap usage is
/// compared (how often each list is used in a ping-pong depends on timing).
fn warm_up(ep: &Endpoint, peer: i32) {
    const K: usize = 16;
    let b = [1u8; 8];
    for _ in 0..K {
        ep.send(&b, peer, 999, 0, SendMode::Standard).unwrap();
    }
    ep.barrier();
    let mut inb = [[0u8; 8]; K];
    for x in inb.iter_mut() {
        recv(ep, x, peer, 999, 0).unwrap();
    }
    let reqs: Vec<_> = inb
        .iter_mut()
        .map(|x| irecv(ep, x, peer, 998, 0).unwrap())
        .collect();
    ep.barrier();
    for _ in 0..K {
        ep.send(&b, peer, 998, 0, SendMode::Standard).unwrap();
    }
    ep.wait_all(reqs).unwrap();
    ep.barrier();
}

/// A static (private, read-only) message.
static STATIC_MSG: [u8; 3000] = {
    let mut a = [0u8; 3000];
    let mut i = 0;
    while i < a.len() {
        a[i] = ((i * 131 + 5 * 7919) % 251) as u8;
        i += 1;
    }
    a
};

fn pingpong_private_rank() {
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    let sizes = sizes();
    const STACK: usize = 64 << 10;
    for &n in &sizes {
        let tag = 7;
        // Up to 64 KiB + 1 on the stack, larger in private memory.
        let mut stack_out = [0u8; STACK + 1];
        let mut stack_in = [0u8; STACK + 1];
        let (mut po, mut pi) = (PrivBuf::new(n), PrivBuf::new(n));
        let (out, inb): (&mut [u8], &mut [u8]) = if n <= STACK + 1 {
            (&mut stack_out[..n], &mut stack_in[..n])
        } else {
            (po.get(), pi.get())
        };
        if me == 0 {
            fill(out, n);
            ep.send(out, peer, tag, 0, SendMode::Standard).unwrap();
            let st = recv(&ep, inb, peer, tag, 0).unwrap();
            assert_eq!(st.count, n as u64);
            check(inb, n + 1, "pong");
        } else {
            let st = recv(&ep, inb, peer, tag, 0).unwrap();
            assert_eq!(st.count, n as u64);
            check(inb, n, "ping");
            fill(out, n + 1);
            ep.send(out, peer, tag, 0, SendMode::Standard).unwrap();
        }
    }
    // A static buffer: private as well.
    if me == 0 {
        assert!(!shmheap::is_shared(STATIC_MSG.as_ptr()));
        ep.send(&STATIC_MSG, peer, 8, 0, SendMode::Standard)
            .unwrap();
    } else {
        let mut v = vec![0u8; STATIC_MSG.len()];
        recv(&ep, &mut v, peer, 8, 0).unwrap();
        check(&v, 5, "static");
    }
    let inline = EAGER.max(fast_box_max(&ep));
    let small = sizes.iter().filter(|&&n| n <= inline).count() as u64;
    let large = sizes.len() as u64 - small;
    let s = ep.stats();
    let (st, rt) = if me == 0 { (1, 0) } else { (0, 1) };
    assert_eq!(s.sent_immediate, small, "{s:?}");
    assert_eq!(s.sent_single_copy, 0, "{s:?}");
    assert_eq!(s.recv_immediate, small, "{s:?}");
    let cma_off = std::env::var(vci::config::CMA_VAR).is_ok_and(|v| v == "0");
    // Both directions decide alike (same uid, same settings).
    let cma = ep.kernel_assisted_to(peer);
    assert!(!(cma_off && cma));
    if cma {
        assert_eq!(s.sent_kernel_assisted, large + st, "{s:?}");
        assert_eq!(s.kernel_assisted, large + rt, "{s:?}");
        assert_eq!((s.sent_two_copy, s.recv_two_copy), (0, 0), "{s:?}");
    } else {
        if !cma_off {
            println!("note: process_vm_readv is not permitted between ranks here");
        }
        assert_eq!(s.sent_two_copy, large + st, "{s:?}");
        assert_eq!(s.recv_two_copy, large + rt, "{s:?}");
        assert_eq!((s.sent_kernel_assisted, s.kernel_assisted), (0, 0), "{s:?}");
    }
    ep.barrier();
}

/// The longest message the fast boxes carry (0 if they are off).
fn fast_box_max(ep: &Endpoint) -> usize {
    if ep.config().fastbox {
        vci::fastbox::FB_SPAN_MAX
    } else {
        0
    }
}

// ------------------------------------------------------------ semantics

/// Message `i` of a stream: its number in the first 4 bytes, then a pattern.
fn numbered(i: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(4)];
    fill(&mut v, i);
    v[..4].copy_from_slice(&(i as u32).to_le_bytes());
    v
}

fn number_of(v: &[u8]) -> usize {
    u32::from_le_bytes(v[..4].try_into().unwrap()) as usize
}

fn semantics_rank() {
    let ep = endpoint();
    let me = ep.rank();
    assert_eq!(ep.size(), 3);
    assert!(matches!(Endpoint::new(), Err(Error::AlreadyInitialized)));

    // 1. Non-overtaking across protocols: one (source, tag) stream of
    //    immediate, single-copy and two-copy messages arrives in order.
    const N: usize = 150;
    let len_of = |i: usize| [8, 100, 1000, 40_000, 256, 257][i % 6];
    if me == 0 {
        let heap: Vec<Vec<u8>> = (0..N).map(|i| numbered(i, len_of(i))).collect();
        let mut private: Vec<PrivBuf> = (0..N).map(|i| PrivBuf::new(len_of(i))).collect();
        for (i, p) in private.iter_mut().enumerate() {
            p.get().copy_from_slice(&heap[i]);
        }
        let reqs: Vec<_> = (0..N)
            .map(|i| {
                // Every third message from private memory.
                let buf: &[u8] = if i % 3 == 2 {
                    private[i].view()
                } else {
                    &heap[i]
                };
                isend(&ep, buf, 1, 5, 0).unwrap()
            })
            .collect();
        ep.wait_all(reqs).unwrap();
    } else if me == 1 {
        let mut buf = vec![0u8; 40_000];
        for i in 0..N {
            let st = recv(&ep, &mut buf, 0, 5, 0).unwrap();
            let n = st.count as usize;
            assert_eq!(n, len_of(i));
            assert_eq!(number_of(&buf[..n]), i, "message order");
            assert_eq!(&buf[4..n], &numbered(i, n)[4..]);
        }
        let s = ep.stats();
        assert!(
            s.recv_immediate > 0
                && s.recv_single_copy > 0
                && (s.recv_two_copy > 0 || s.kernel_assisted > 0),
            "{s:?}"
        );
    }
    ep.barrier();

    // 2. Wildcards, tags out of order, contexts.
    if me == 0 {
        for (tag, i) in [(1, 0), (2, 1), (3, 2), (10, 3), (11, 4), (12, 5)] {
            ep.send(&numbered(i, 8), 1, tag, 0, SendMode::Standard)
                .unwrap();
        }
        ep.send(&numbered(6, 8), 1, 7, 1, SendMode::Standard)
            .unwrap();
        ep.send(&numbered(7, 8), 1, 7, 0, SendMode::Standard)
            .unwrap();
    } else if me == 1 {
        let mut b = [0u8; 8];
        for (tag, i) in [(1, 0), (2, 1), (3, 2)] {
            let st = recv(&ep, &mut b, ANY_SOURCE, ANY_TAG, 0).unwrap();
            assert_eq!((st.source, st.tag, number_of(&b)), (0, tag, i));
        }
        let st = recv(&ep, &mut b, 0, 12, 0).unwrap();
        assert_eq!((st.tag, number_of(&b)), (12, 5));
        let st = recv(&ep, &mut b, 0, ANY_TAG, 0).unwrap();
        assert_eq!((st.tag, number_of(&b)), (10, 3));
        let st = recv(&ep, &mut b, ANY_SOURCE, 11, 0).unwrap();
        assert_eq!((st.tag, number_of(&b)), (11, 4));
        // Tag 7 in context 0 skips the earlier tag 7 of context 1.
        let st = recv(&ep, &mut b, ANY_SOURCE, 7, 0).unwrap();
        assert_eq!((st.tag, number_of(&b)), (7, 7));
        let st = recv(&ep, &mut b, ANY_SOURCE, ANY_TAG, 1).unwrap();
        assert_eq!((st.tag, number_of(&b)), (7, 6));
    }
    ep.barrier();

    // 3. Posted receives match in posting order. Rank 2 sends only after
    //    rank 0's messages are queued (rank 0 tells it to), so the arrival
    //    order at rank 1 is known.
    if me == 1 {
        let mut bufs = [[0u8; 8]; 5];
        let [a, b, c, d, e] = &mut bufs;
        let ra = irecv(&ep, a, ANY_SOURCE, ANY_TAG, 0).unwrap();
        let rb = irecv(&ep, b, 0, 21, 0).unwrap();
        let rc = irecv(&ep, c, 0, ANY_TAG, 0).unwrap();
        let rd = irecv(&ep, d, ANY_SOURCE, 40, 0).unwrap();
        let re = irecv(&ep, e, ANY_SOURCE, 40, 0).unwrap();
        ep.barrier();
        let st = ep.wait_all([ra, rb, rc, rd, re]).unwrap();
        assert_eq!((st[0].tag, number_of(&bufs[0])), (21, 0));
        assert_eq!((st[1].tag, number_of(&bufs[1])), (21, 1));
        assert_eq!((st[2].tag, number_of(&bufs[2])), (22, 2));
        assert_eq!((st[3].source, st[3].tag, number_of(&bufs[3])), (0, 40, 3));
        assert_eq!((st[4].source, st[4].tag, number_of(&bufs[4])), (2, 40, 4));
        assert!(ep.stats().matched_posted >= 5);
    } else {
        ep.barrier();
        if me == 0 {
            for (tag, i) in [(21, 0), (21, 1), (22, 2), (40, 3)] {
                ep.send(&numbered(i, 8), 1, tag, 0, SendMode::Standard)
                    .unwrap();
            }
            ep.send(&[], 2, 41, 0, SendMode::Standard).unwrap();
        } else {
            recv(&ep, &mut [], 0, 41, 0).unwrap();
            ep.send(&numbered(4, 8), 1, 40, 0, SendMode::Standard)
                .unwrap();
        }
    }
    ep.barrier();

    // 4. Probe, then receive what it announced.
    if me == 0 {
        assert_eq!(ep.iprobe(ANY_SOURCE, 30, 0).unwrap(), None);
        ep.send(&numbered(30, 5000), 2, 30, 0, SendMode::Standard)
            .unwrap();
    } else if me == 2 {
        let st = ep.probe(ANY_SOURCE, ANY_TAG, 0).unwrap();
        assert_eq!((st.source, st.tag, st.count), (0, 30, 5000));
        assert_eq!(ep.iprobe(0, 30, 0).unwrap(), Some(st));
        assert_eq!(ep.iprobe(0, 31, 0).unwrap(), None);
        assert_eq!(ep.iprobe(0, 30, 1).unwrap(), None);
        let mut v = vec![0u8; st.count as usize];
        recv(&ep, &mut v, st.source, st.tag, 0).unwrap();
        assert_eq!(v, numbered(30, 5000));
        assert_eq!(ep.iprobe(ANY_SOURCE, ANY_TAG, 0).unwrap(), None);
    }
    ep.barrier();

    // 5. Truncation: an error that still delivers the prefix, for every
    //    protocol; the sender completes normally.
    if me == 0 {
        let big = numbered(1, 1000);
        let mut private = PrivBuf::new(5000);
        private.get().copy_from_slice(&numbered(2, 5000));
        ep.send(&numbered(0, 100), 1, 50, 0, SendMode::Standard)
            .unwrap();
        ep.send(&big, 1, 50, 0, SendMode::Standard).unwrap();
        ep.send(private.view(), 1, 50, 0, SendMode::Standard)
            .unwrap();
        ep.send(&numbered(3, 100), 1, 50, 0, SendMode::Standard)
            .unwrap();
    } else if me == 1 {
        for (i, len) in [(0, 100u64), (1, 1000), (2, 5000)] {
            let mut b = [0u8; 10];
            match recv(&ep, &mut b, 0, 50, 0) {
                Err(Error::Truncate {
                    status,
                    message_len,
                }) => {
                    assert_eq!((status.count, message_len), (10, len));
                    assert_eq!(
                        status.error,
                        Some(StatusError::Truncate { message_len: len })
                    );
                    assert_eq!(&b[..], &numbered(i, len as usize)[..10]);
                }
                other => panic!("expected truncation, got {other:?}"),
            }
        }
        // `Endpoint::recv` itself: received, the truncation in the status.
        let mut b = [0u8; 10];
        let mut st = Status::empty();
        ep.recv(&mut b, 0, 50, 0, &mut st).unwrap();
        assert_eq!((st.source, st.tag, st.count), (0, 50, 10));
        assert_eq!(st.error, Some(StatusError::Truncate { message_len: 100 }));
        assert_eq!(&b[..], &numbered(3, 100)[..10]);
    }
    ep.barrier();
    // wait_all reports it in the statuses.
    if me == 1 {
        let mut b = [0u8; 4];
        let r = irecv(&ep, &mut b, 0, 51, 0).unwrap();
        ep.barrier();
        match ep.wait_all([r]) {
            Err(Error::InStatus(st)) => assert_eq!((st[0].count, st[0].source), (4, 0)),
            other => panic!("expected InStatus, got {other:?}"),
        }
    } else {
        ep.barrier();
        if me == 0 {
            ep.send(&numbered(3, 20), 1, 51, 0, SendMode::Standard)
                .unwrap();
        }
    }
    ep.barrier();

    // 6. PROC_NULL.
    let mut b = [9u8; 4];
    let st = recv(&ep, &mut b, PROC_NULL, 3, 0).unwrap();
    assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
    assert_eq!(b, [9; 4]);
    let st = isend(&ep, &b, PROC_NULL, 3, 0).unwrap().wait().unwrap();
    assert_eq!((st.source, st.tag, st.count), (PROC_NULL, ANY_TAG, 0));
    assert_eq!(ep.probe(PROC_NULL, ANY_TAG, 0).unwrap().source, PROC_NULL);

    // 7. Sends to self, every protocol, received before the sends are
    //    waited for; and zero-byte messages to the next rank.
    {
        let small = numbered(0, 100);
        let heap = numbered(1, 100_000);
        let mut private = PrivBuf::new(100_000);
        private.get().copy_from_slice(&numbered(2, 100_000));
        let r0 = isend(&ep, &small, me, 60, 0).unwrap();
        let r1 = isend(&ep, &heap, me, 60, 0).unwrap();
        let r2 = isend(&ep, private.view(), me, 60, 0).unwrap();
        let z = isend(&ep, &[], (me + 1) % 3, 61, 0).unwrap();
        let mut v = vec![0u8; 100_000];
        for (i, len) in [(0, 100), (1, 100_000), (2, 100_000)] {
            let st = recv(&ep, &mut v, me, 60, 0).unwrap();
            assert_eq!(st.count, len as u64);
            assert_eq!(&v[..len], &numbered(i, len)[..]);
        }
        let st = recv(&ep, &mut [], (me + 2) % 3, 61, 0).unwrap();
        assert_eq!((st.count, st.source), (0, (me + 2) % 3));
        ep.wait_all([r0, r1, r2, z]).unwrap();
    }
    ep.barrier();

    // 8. Cancel a pending receive; the message it would have matched goes
    //    to the next receive. A matched receive cannot be cancelled.
    if me == 1 {
        let mut b1 = [0u8; 8];
        let mut r = irecv(&ep, &mut b1, 0, 99, 0).unwrap();
        assert!(r.cancel());
        let st = r.wait().unwrap();
        assert!(st.cancelled);
        ep.barrier();
        let mut b2 = [0u8; 8];
        let mut r = irecv(&ep, &mut b2, 0, 99, 0).unwrap();
        let st = loop {
            if let Some(st) = r.test().unwrap() {
                break st;
            }
            std::thread::yield_now();
        };
        assert!(!st.cancelled);
        assert!(!r.cancel());
        assert_eq!(r.test().unwrap(), Some(st));
        drop(r);
        assert_eq!(number_of(&b2), 99);
    } else {
        ep.barrier();
        if me == 0 {
            ep.send(&numbered(99, 8), 1, 99, 0, SendMode::Standard)
                .unwrap();
        }
    }
    ep.barrier();

    // 9. Bad arguments are errors, not panics.
    let b = [0u8; 4];
    let mut m = [0u8; 4];
    assert!(matches!(
        isend(&ep, &b, 3, 0, 0),
        Err(Error::Rank { rank: 3, size: 3 })
    ));
    assert!(matches!(isend(&ep, &b, -7, 0, 0), Err(Error::Rank { .. })));
    assert!(matches!(
        isend(&ep, &b, ANY_SOURCE, 0, 0),
        Err(Error::Rank { .. })
    ));
    assert!(matches!(
        isend(&ep, &b, 0, ANY_TAG, 0),
        Err(Error::Tag { tag: ANY_TAG })
    ));
    assert!(matches!(isend(&ep, &b, 0, -5, 0), Err(Error::Tag { .. })));
    assert!(matches!(
        isend(&ep, &b, 0, TAG_UB + 1, 0),
        Err(Error::Tag { .. })
    ));
    assert!(matches!(
        irecv(&ep, &mut m, 5, 0, 0),
        Err(Error::Rank { .. })
    ));
    assert!(matches!(
        irecv(&ep, &mut m, 0, -9, 0),
        Err(Error::Tag { .. })
    ));
    assert!(matches!(
        ep.iprobe(0, TAG_UB + 1, 0),
        Err(Error::Tag { .. })
    ));
    // TAG_UB itself is valid.
    let r = isend(&ep, &b, me, TAG_UB, 0).unwrap();
    recv(&ep, &mut m, me, TAG_UB, 0).unwrap();
    r.wait().unwrap();
    ep.barrier();

    in_place_starts(&ep);
}

/// Requests written in place (as the C library's request table has
/// them): a start that finishes at once needs no place; one that waits
/// writes its request where the place says; one without a place starts
/// nothing.
fn in_place_starts(ep: &Endpoint) {
    const T: i32 = 900;
    const BIG: usize = 2 * vci::fastbox::FB_SPAN_MAX;
    let me = ep.rank();
    if me == 0 {
        let small = numbered(0, 8);
        // Above the immediate limit and the fast box's and in the heap:
        // the receiver reads it, so the send waits for it.
        let (kept, dropped) = (numbered(1, BIG), numbered(2, BIG));
        let st = isend_in(ep, None, &small, 1, T).unwrap();
        assert!(
            matches!(st, vci::Start::Finished(s) if s.source == 1 && s.tag == T && s.count == 8),
            "{st:?}"
        );
        assert_eq!(
            isend_in(ep, None, &dropped, 1, T).unwrap(),
            vci::Start::NoPlace
        );
        assert!(matches!(
            isend_in(ep, None, &dropped, 1, -1),
            Err(Error::Tag { tag: -1 })
        ));
        assert!(matches!(
            isend_in(ep, None, &dropped, 7, T),
            Err(Error::Rank { .. })
        ));
        let mut slot = std::mem::MaybeUninit::<vci::Request<'_>>::uninit();
        let st = isend_in(ep, Some(slot.as_mut_ptr()), &kept, 1, T).unwrap();
        assert_eq!(st, vci::Start::Written);
        // SAFETY: the engine wrote the request there.
        let st = unsafe { slot.assume_init() }.wait().unwrap();
        assert_eq!((st.source, st.tag, st.count), (1, T, BIG as u64));
    } else if me == 1 {
        let mut buf = vec![0u8; BIG];
        let st = recv(ep, &mut buf, 0, T, 0).unwrap();
        assert_eq!((st.count, number_of(&buf[..8])), (8, 0));
        // The send that had no place was never sent: the next one is the
        // one that had.
        let st = recv(ep, &mut buf, 0, T, 0).unwrap();
        assert_eq!(st.count as usize, BIG);
        assert_eq!(buf, numbered(1, BIG));

        // Receives: without a place, one whose message is not there posts
        // nothing; with one, it waits in place.
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let st = irecv_in(ep, None, ptr, len, me, T + 1).unwrap();
        assert_eq!(st, vci::Start::NoPlace);
        let mut slot = std::mem::MaybeUninit::<vci::Request<'_>>::uninit();
        let st = irecv_in(ep, Some(slot.as_mut_ptr()), ptr, len, me, T + 1).unwrap();
        assert_eq!(st, vci::Start::Written);
        // Had the first start posted a receive, this message would go to
        // it and the request below would never finish.
        ep.send(&numbered(3, 16), me, T + 1, 0, SendMode::Standard)
            .unwrap();
        // SAFETY: the engine wrote the request there.
        let st = unsafe { slot.assume_init() }.wait().unwrap();
        assert_eq!((st.count, number_of(&buf[..16])), (16, 3));
        // Without a place, a receive whose message is there finishes.
        ep.send(&numbered(4, 16), me, T + 1, 0, SendMode::Standard)
            .unwrap();
        let st = irecv_in(ep, None, ptr, len, me, T + 1).unwrap();
        assert!(
            matches!(st, vci::Start::Finished(s) if s.count == 16),
            "{st:?}"
        );
        assert_eq!(number_of(&buf[..16]), 4);
    }
    ep.barrier();
    assert_eq!(
        ep.iprobe(ANY_SOURCE, ANY_TAG, 0).unwrap(),
        None,
        "nothing left over"
    );
}

// ------------------------------------------------------------ ring

fn ring_rank() {
    let ep = endpoint();
    let (me, n) = (ep.rank(), ep.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    for it in 0..300usize {
        let len = [4, 17, 300, 4096, 70_000][it % 5];
        let out = numbered(it * 100 + me as usize, len);
        let s = isend(&ep, &out, right, it as i32, 0).unwrap();
        let mut inb = vec![0u8; len];
        let st = recv(&ep, &mut inb, left, it as i32, 0).unwrap();
        assert_eq!(number_of(&inb), it * 100 + left as usize);
        assert_eq!(&inb[4..], &numbered(it * 100 + left as usize, len)[4..]);
        assert_eq!(st.count as usize, len);
        s.wait().unwrap();
    }
    // All to all with ANY_SOURCE: every rank gets one message from each.
    for round in 0..20usize {
        let outs: Vec<Vec<u8>> = (0..n)
            .map(|d| numbered(me as usize * 1000 + d as usize, 2000 + round))
            .collect();
        let reqs: Vec<_> = (0..n)
            .map(|d| isend(&ep, &outs[d as usize], d, 1000 + round as i32, 0).unwrap())
            .collect();
        let mut seen = BTreeSet::new();
        let mut inb = vec![0u8; 4000];
        for _ in 0..n {
            let st = recv(&ep, &mut inb, ANY_SOURCE, 1000 + round as i32, 0).unwrap();
            assert_eq!(number_of(&inb), st.source as usize * 1000 + me as usize);
            assert!(seen.insert(st.source));
        }
        ep.wait_all(reqs).unwrap();
    }
    ep.barrier();
}

/// Threads of one rank use the endpoint at once: thread `t` of each rank
/// exchanges messages with thread `t` of the other on tag `t`, some from
/// a shared receive with ANY_TAG in context 1.
fn threads_rank() {
    fn assert_sync<T: Send + Sync>(_: &T) {}
    let ep = endpoint();
    assert_sync(&ep);
    let me = ep.rank();
    let peer = 1 - me;
    // The creating thread alone: its locks are biased to it (solo mode)
    // unless HMPI_SOLO=0, if the kernel has membarrier.
    let out = numbered(me as usize, 8);
    let mut inb = vec![0u8; 8];
    let s = isend(&ep, &out, peer, 99, 0).unwrap();
    recv(&ep, &mut inb, peer, 99, 0).unwrap();
    s.wait().unwrap();
    assert_eq!(inb, numbered(peer as usize, 8));
    let solo_here = vci::solo_supported() && vci::Config::from_env().expect("config").solo;
    assert_eq!(
        ep.solo(),
        solo_here,
        "solo mode after one thread communicated"
    );
    const THREADS: usize = 3;
    const ITERS: usize = 200;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let ep = &ep;
            s.spawn(move || {
                for it in 0..ITERS {
                    let len = [8, 300, 5000][(it + t) % 3];
                    let id = (t * 1000 + it) * 2 + me as usize;
                    let out = numbered(id, len);
                    let s = isend(ep, &out, peer, t as i32, 0).unwrap();
                    let mut inb = vec![0u8; len];
                    let st = recv(ep, &mut inb, peer, t as i32, 0).unwrap();
                    assert_eq!(st.tag, t as i32);
                    let want = (t * 1000 + it) * 2 + peer as usize;
                    assert_eq!(inb, numbered(want, len), "thread {t} iteration {it}");
                    s.wait().unwrap();
                }
            });
        }
    });
    // Other threads communicated: every lock is real from now on.
    assert!(!ep.solo(), "solo mode outlived other threads' messages");
    ep.barrier();
}

// ------------------------------------------------------------ synchronous send

/// `issend` completes only once the receiver has matched, for every
/// protocol; then the deadlock scenario of the design notes §6.
fn ssend_rank() {
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    // Sizes: immediate, single copy (heap), private (kernel assisted or
    // two copy), and a synergistic one.
    let sizes = [8usize, 5000, 5000, 200_000];
    for (k, &n) in sizes.iter().enumerate() {
        let private = k == 2;
        let tag = 100 + k as i32;
        if me == 0 {
            let heap = numbered(k, n);
            let mut pb = PrivBuf::new(n);
            pb.get().copy_from_slice(&heap);
            let buf: &[u8] = if private { pb.view() } else { &heap };
            let mut r = issend_t(&ep, buf, peer, tag, 0).unwrap();
            // The receiver does not receive before the barrier: the
            // request must stay pending however long we drive progress.
            for _ in 0..50 {
                assert!(r.test().unwrap().is_none(), "size {n} completed unmatched");
                std::thread::sleep(Duration::from_micros(200));
            }
            ep.barrier();
            let st = r.wait().unwrap();
            assert_eq!((st.source, st.tag, st.count), (peer, tag, n as u64));
        } else {
            ep.barrier();
            let mut inb = vec![0u8; n];
            let st = recv(&ep, &mut inb, peer, tag, 0).unwrap();
            assert_eq!(st.count, n as u64);
            assert_eq!(inb, numbered(k, n));
        }
    }
    // A synchronous send that the receiver truncates still completes.
    if me == 0 {
        ep.send(&numbered(9, 1000), peer, 120, 0, SendMode::Synchronous)
            .unwrap();
    } else {
        let mut small = [0u8; 10];
        assert!(matches!(
            recv(&ep, &mut small, peer, 120, 0),
            Err(Error::Truncate { .. })
        ));
    }
    // Synchronous send to PROC_NULL completes; bad tags are errors.
    assert!(ep
        .send(b"x", PROC_NULL, 1, 0, SendMode::Synchronous)
        .is_ok());
    assert!(matches!(
        ep.send(b"x", peer, -5, 0, SendMode::Synchronous),
        Err(Error::Tag { .. })
    ));
    ep.barrier();

    // Design notes §6: rank 0 ssends on context A, then on context B;
    // rank 1's two threads each block in `recv` on one context, B's thread
    // first. With per-VCI progress only, this deadlocks.
    const A: u32 = 11;
    const B: u32 = 12;
    for (round, &n) in [8usize, 3000, 100_000].iter().enumerate() {
        if me == 0 {
            let a = numbered(round * 2, n);
            let b = numbered(round * 2 + 1, n);
            ep.send(&a, peer, 1, A, SendMode::Synchronous).unwrap();
            ep.send(&b, peer, 1, B, SendMode::Synchronous).unwrap();
        } else {
            std::thread::scope(|s| {
                let ep = &ep;
                let tb = s.spawn(move || {
                    let mut inb = vec![0u8; n];
                    recv(ep, &mut inb, 0, 1, B).unwrap();
                    assert_eq!(inb, numbered(round * 2 + 1, n));
                });
                std::thread::sleep(Duration::from_millis(5));
                let ta = s.spawn(move || {
                    let mut inb = vec![0u8; n];
                    recv(ep, &mut inb, 0, 1, A).unwrap();
                    assert_eq!(inb, numbered(round * 2, n));
                });
                ta.join().unwrap();
                tb.join().unwrap();
            });
        }
        ep.barrier();
    }
    let s = ep.stats();
    if me == 0 {
        assert_eq!(s.sent_synchronous, sizes.len() as u64 + 1 + 6, "{s:?}");
    }
    ep.barrier();
}

// ------------------------------------------------------------ request sets

fn request_sets_rank() {
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    const N: usize = 8;
    let len_of = |i: usize| [8, 1000, 70_000, 0][i % 4];
    for round in 0..4 {
        if me == 0 {
            let mut bufs: Vec<Vec<u8>> = (0..N).map(|i| vec![0u8; len_of(i)]).collect();
            let mut reqs: Vec<Option<vci::Request<'_>>> = bufs
                .iter_mut()
                .enumerate()
                .map(|(i, b)| Some(irecv(&ep, b, peer, i as i32, 0).unwrap()))
                .collect();
            assert!(vci::test_any(&mut reqs).is_none());
            assert!(vci::test_some(&mut reqs).is_empty());
            assert!(vci::test_all(&mut reqs).unwrap().is_none());
            assert!(reqs.iter().all(Option::is_some));
            ep.barrier();
            let mut done = [false; N];
            let mut left = N;
            while left > 0 {
                let got: Vec<(usize, Status)> = match round {
                    0 => vci::wait_any(&mut reqs).into_iter().collect(),
                    1 => vci::wait_some(&mut reqs),
                    2 => vci::test_any(&mut reqs).into_iter().collect(),
                    _ => vci::test_some(&mut reqs),
                };
                for (i, st) in got {
                    assert!(!done[i], "index {i} reported twice");
                    assert!(reqs[i].is_none());
                    done[i] = true;
                    left -= 1;
                    assert_eq!((st.tag, st.count), (i as i32, len_of(i) as u64));
                }
            }
            assert!(vci::wait_any(&mut reqs).is_none());
            assert!(vci::wait_some(&mut reqs).is_empty());
            assert_eq!(
                vci::test_all(&mut reqs).unwrap(),
                Some(vec![Status::empty(); N])
            );
            drop(reqs);
            for (i, b) in bufs.iter().enumerate() {
                if len_of(i) >= 4 {
                    assert_eq!(number_of(b), i + 100 * round);
                }
            }
        } else {
            ep.barrier();
            // Reverse order, so completion order differs from index order.
            for i in (0..N).rev() {
                ep.send(
                    &numbered(i + 100 * round, len_of(i)),
                    peer,
                    i as i32,
                    0,
                    SendMode::Standard,
                )
                .unwrap();
            }
        }
        ep.barrier();
    }
    // test_all over sends and receives, and a truncation reported in the
    // status of wait_any (the index is not lost).
    if me == 0 {
        let mut small = [0u8; 4];
        let mut big = vec![0u8; 500];
        let out = numbered(7, 300_000);
        let mut reqs = vec![
            Some(irecv(&ep, &mut small, peer, 50, 0).unwrap()),
            Some(irecv(&ep, &mut big, peer, 51, 0).unwrap()),
            Some(isend(&ep, &out, peer, 52, 0).unwrap()),
        ];
        let (i, st) = vci::wait_any(&mut reqs).unwrap();
        assert_eq!(i, 0);
        assert!(matches!(
            st.error,
            Some(StatusError::Truncate { message_len: 64 })
        ));
        assert!(matches!(st.into_result(), Err(Error::Truncate { .. })));
        let st = loop {
            if let Some(st) = vci::test_all(&mut reqs).unwrap() {
                break st;
            }
            std::thread::yield_now();
        };
        assert_eq!(st[0], Status::empty());
        assert_eq!((st[1].tag, st[1].count), (51, 500));
        assert_eq!((st[2].tag, st[2].count), (52, 300_000));
    } else {
        ep.send(&numbered(1, 64), peer, 50, 0, SendMode::Standard)
            .unwrap();
        ep.send(&numbered(2, 500), peer, 51, 0, SendMode::Standard)
            .unwrap();
        let mut inb = vec![0u8; 300_000];
        recv(&ep, &mut inb, peer, 52, 0).unwrap();
        assert_eq!(inb, numbered(7, 300_000));
    }
    ep.barrier();
}

// ------------------------------------------------------------ matched probe

/// Threads of rank 1 probe the same source at once with matched probes:
/// every message is received exactly once.
fn mprobe_rank() {
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    const M: usize = 600;
    const THREADS: usize = 4;
    let len_of = |i: usize| [4, 300, 5000, 100_000][i % 4];
    // Phase 1: mprobe (blocking), each thread takes M / THREADS messages;
    // phase 2: improbe until every message is taken.
    for phase in 0..2 {
        if me == 0 {
            let msgs: Vec<Vec<u8>> = (0..M).map(|i| numbered(i, len_of(i))).collect();
            let reqs: Vec<_> = msgs
                .iter()
                .enumerate()
                .map(|(i, m)| isend(&ep, m, peer, (i % 7) as i32, 3).unwrap())
                .collect();
            ep.wait_all(reqs).unwrap();
        } else {
            let taken = std::sync::atomic::AtomicUsize::new(0);
            let seen: Vec<Vec<usize>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..THREADS)
                    .map(|_| {
                        let (ep, taken) = (&ep, &taken);
                        s.spawn(move || {
                            let mut mine = Vec::new();
                            loop {
                                let got = if phase == 0 {
                                    if mine.len() == M / THREADS {
                                        break;
                                    }
                                    Some(ep.mprobe(0, ANY_TAG, 3).unwrap())
                                } else {
                                    if taken.load(std::sync::atomic::Ordering::Relaxed) == M {
                                        break;
                                    }
                                    ep.improbe(ANY_SOURCE, ANY_TAG, 3).unwrap()
                                };
                                let Some((msg, st)) = got else {
                                    std::thread::yield_now();
                                    continue;
                                };
                                assert_eq!(msg.status(), st);
                                let mut buf = vec![0u8; st.count as usize];
                                let st2 = if mine.len() % 2 == 0 {
                                    msg.recv_into(&mut buf).unwrap()
                                } else {
                                    msg.imrecv(&mut buf).unwrap().wait().unwrap()
                                };
                                assert_eq!((st2.tag, st2.count), (st.tag, st.count));
                                let i = number_of(&buf);
                                assert_eq!(buf, numbered(i, len_of(i)));
                                assert_eq!(st.tag, (i % 7) as i32);
                                taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                mine.push(i);
                            }
                            mine
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut all: Vec<usize> = seen.concat();
            all.sort_unstable();
            assert_eq!(all, (0..M).collect::<Vec<_>>(), "phase {phase}");
            // Per-thread order follows the sender's order (non-overtaking).
            for t in &seen {
                assert!(t.windows(2).all(|w| w[0] < w[1]), "phase {phase}: {t:?}");
            }
        }
        ep.barrier();
    }
    // A dropped Message discards the payload and completes the send; a
    // matched probe hides the message from plain probes and receives;
    // PROC_NULL gives the no-process message.
    if me == 0 {
        ep.send(&numbered(1, 5000), peer, 9, 4, SendMode::Synchronous)
            .unwrap();
        ep.send(&numbered(2, 8), peer, 9, 4, SendMode::Standard)
            .unwrap();
    } else {
        let (msg, st) = ep.mprobe(peer, 9, 4).unwrap();
        assert_eq!(st.count, 5000);
        drop(msg);
        let mut b = [0u8; 8];
        recv(&ep, &mut b, peer, 9, 4).unwrap();
        assert_eq!(number_of(&b), 2);
        assert!(ep.improbe(peer, 9, 4).unwrap().is_none());
        let (m, st) = ep.mprobe(PROC_NULL, 0, 4).unwrap();
        assert!(m.is_no_proc());
        assert_eq!(m.recv_into(&mut []).unwrap(), st);
        assert!(matches!(ep.improbe(7, 0, 0), Err(Error::Rank { .. })));
    }
    ep.barrier();
    assert!(me == 0 || ep.stats().matched_probe == 2 * M as u64 + 1);
    ep.barrier();
}

// ------------------------------------------------------------ every VCI

/// Receives and probes on every VCI against senders spread by thread:
/// four threads of rank 0 send messages of one tag (immediate, fast box,
/// single copy) on their threads' VCIs; three threads of rank 1 take them
/// with posted receives (a window, wildcards), blocking receives and
/// matched probes. Every message arrives exactly once, intact; several
/// VCIs carried them. Then: receives posted on every VCI before a
/// synchronous send towards each other (no deadlock), a cancelled one, a
/// probe, and a request set mixing such receives with plain ones.
fn every_vci_rank() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    const CTX: u32 = 6;
    const SENDERS: usize = 4;
    const M: usize = 150;
    const RECEIVERS: usize = 3;
    let len_of = |i: usize| [4, 40, 200, 3000, 70_000][i % 5];
    let any = vci::endpoint::on_every_vci(CTX);
    if me == 0 {
        std::thread::scope(|s| {
            for t in 0..SENDERS {
                let ep = &ep;
                s.spawn(move || {
                    let word = ep.thread_vci(CTX);
                    for i in 0..M {
                        let n = t * M + i;
                        let m = numbered(n, len_of(n));
                        if i % 3 == 0 {
                            isend(ep, &m, peer, 7, word).unwrap().wait().unwrap();
                        } else {
                            ep.send(&m, peer, 7, word, SendMode::Standard).unwrap();
                        }
                    }
                });
            }
        });
    } else {
        let taken = AtomicUsize::new(0);
        let seen: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..RECEIVERS)
                .map(|r| {
                    let (ep, taken) = (&ep, &taken);
                    s.spawn(move || {
                        let mut mine = Vec::new();
                        let mut got = |buf: &[u8], st: Status| {
                            let n = number_of(buf);
                            assert_eq!(st.count as usize, len_of(n));
                            assert_eq!(&buf[..len_of(n)], &numbered(n, len_of(n))[..]);
                            assert_eq!((st.source, st.tag), (0, 7));
                            mine.push(n);
                        };
                        let total = SENDERS * M;
                        // Each pass claims the messages it takes first.
                        while taken.load(Relaxed) < total {
                            let want = 4.min(total - taken.fetch_add(4, Relaxed).min(total));
                            if want == 0 {
                                break;
                            }
                            match r {
                                0 => {
                                    let mut bufs = vec![vec![0u8; 70_000]; want];
                                    let reqs: Vec<_> = bufs
                                        .iter_mut()
                                        .enumerate()
                                        .map(|(k, b)| {
                                            let (src, tag) = if k % 2 == 0 {
                                                (ANY_SOURCE, ANY_TAG)
                                            } else {
                                                (0, 7)
                                            };
                                            // SAFETY: waited for below.
                                            unsafe {
                                                ep.irecv(b.as_mut_ptr(), b.len(), src, tag, any)
                                            }
                                            .unwrap()
                                        })
                                        .collect();
                                    let sts = ep.wait_all(reqs).unwrap();
                                    for (b, st) in bufs.iter().zip(sts) {
                                        got(b, st);
                                    }
                                }
                                1 => {
                                    for _ in 0..want {
                                        let mut b = vec![0u8; 70_000];
                                        let st = recv(ep, &mut b, 0, ANY_TAG, any).unwrap();
                                        got(&b, st);
                                    }
                                }
                                _ => {
                                    for k in 0..want {
                                        let (msg, st) = if k % 2 == 0 {
                                            ep.mprobe(ANY_SOURCE, 7, any).unwrap()
                                        } else {
                                            loop {
                                                if let Some(f) = ep.improbe(0, 7, any).unwrap() {
                                                    break f;
                                                }
                                                std::thread::yield_now();
                                            }
                                        };
                                        let mut b = vec![0u8; st.count as usize];
                                        let st2 = msg.recv_into(&mut b).unwrap();
                                        assert_eq!(st2, st);
                                        got(&b, st);
                                    }
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = seen.concat();
        all.sort_unstable();
        assert_eq!(all, (0..SENDERS * M).collect::<Vec<_>>());
        let vcis = ep.vci_count();
        let carried = (0..vcis)
            .filter(|&v| ep.vci_stats(v).unwrap().received() > 0)
            .count();
        println!("every-vci: {vcis} VCIs, {carried} carried messages");
        assert_eq!(
            carried,
            vcis.min(SENDERS),
            "the senders' threads use their own VCIs"
        );
        // Nothing is left posted or unexpected: the stale parts are gone.
        assert!(ep.iprobe(ANY_SOURCE, ANY_TAG, any).unwrap().is_none());
    }
    ep.barrier();
    // Receives posted on every VCI, then synchronous sends towards each
    // other from two threads: each receive is matchable before its
    // thread's send waits for its own match.
    std::thread::scope(|s| {
        for t in 0..2 {
            let ep = &ep;
            s.spawn(move || {
                let mut b = [0u8; 64];
                // SAFETY: waited for below.
                let r = unsafe { ep.irecv(b.as_mut_ptr(), b.len(), peer, 20 + t, any) }.unwrap();
                let m = numbered(t as usize, 64);
                ep.send(&m, peer, 20 + t, ep.thread_vci(CTX), SendMode::Synchronous)
                    .unwrap();
                let st = r.wait().unwrap();
                assert_eq!((st.tag, number_of(&b)), (20 + t, t as usize));
            });
        }
    });
    // A cancelled receive on every VCI; a probe; a set with plain receives.
    let mut b = [0u8; 8];
    // SAFETY: completed below.
    let mut r = unsafe { ep.irecv(b.as_mut_ptr(), b.len(), peer, 999, any) }.unwrap();
    assert!(r.cancel());
    assert!(r.wait().unwrap().cancelled);
    ep.barrier();
    if me == 0 {
        ep.send(
            &numbered(1, 8),
            peer,
            5,
            ep.thread_vci(CTX),
            SendMode::Standard,
        )
        .unwrap();
        ep.send(&numbered(2, 8), peer, 6, CTX, SendMode::Standard)
            .unwrap();
        ep.send(
            &numbered(3, 5000),
            peer,
            8,
            ep.thread_vci(CTX),
            SendMode::Standard,
        )
        .unwrap();
    } else {
        let st = ep.probe(0, 5, any).unwrap();
        assert_eq!((st.tag, st.count), (5, 8));
        let mut b1 = [0u8; 8];
        let mut b2 = [0u8; 8];
        let mut b3 = vec![0u8; 5000];
        // SAFETY: waited for below.
        let mut set = unsafe {
            [
                Some(ep.irecv(b3.as_mut_ptr(), b3.len(), 0, 8, any).unwrap()),
                Some(ep.irecv(b1.as_mut_ptr(), 8, 0, 5, any).unwrap()),
                Some(ep.irecv(b2.as_mut_ptr(), 8, 0, 6, CTX).unwrap()),
            ]
        };
        let mut done = 0;
        while done < 3 {
            done += vci::wait_some(&mut set).len();
        }
        assert_eq!((number_of(&b1), number_of(&b2), number_of(&b3)), (1, 2, 3));
    }
    ep.barrier();
}

// ------------------------------------------------------------ synergistic copy

/// Large heap messages, byte-checked: sizes from 1 to 16 MiB (odd ones
/// too), one truncated; then 20 messages of 16 MiB while the sender waits,
/// so it helps. The receiver prints the block counts.
fn synergistic_rank() {
    let ep = endpoint();
    let me = ep.rank();
    let peer = 1 - me;
    let block = ep.config().synergistic_block;
    let sizes = [1usize << 20, (1 << 20) + 1, 3 << 20 | 17, 8 << 20, 16 << 20];
    let mut want_syn = 0u64;
    for (k, &n) in sizes.iter().enumerate() {
        if me == 0 {
            let mut out = vec![0u8; n];
            fill(&mut out, k);
            ep.send(&out, peer, k as i32, 0, SendMode::Standard)
                .unwrap();
        } else {
            let mut inb = vec![0u8; n];
            let st = recv(&ep, &mut inb, peer, k as i32, 0).unwrap();
            assert_eq!(st.count, n as u64);
            check(&inb, k, "synergistic");
            want_syn += 1;
        }
    }
    // Truncation: the receiver copies only its buffer's length.
    if me == 0 {
        let mut out = vec![0u8; 4 << 20];
        fill(&mut out, 77);
        ep.send(&out, peer, 40, 0, SendMode::Standard).unwrap();
    } else {
        let mut inb = vec![0u8; (2 << 20) + 3];
        let r = recv(&ep, &mut inb, peer, 40, 0);
        assert!(matches!(r, Err(Error::Truncate { message_len, .. }) if message_len == 4 << 20));
        check(&inb, 77, "truncated synergistic");
        want_syn += 1;
    }
    ep.barrier();
    // The sender waits on each send: it sees the help flag and copies.
    // Batches of 20 messages of 16 MiB; should a loaded machine keep the
    // sender off the CPU during a whole batch, up to 4 more batches run
    // before the test gives up.
    const K: usize = 20;
    const BATCHES: usize = 5;
    const BIG: usize = 16 << 20;
    let mut out = vec![0u8; BIG];
    let mut inb = vec![0u8; BIG];
    let mut big_msgs = 0usize;
    for batch in 0..BATCHES {
        for k in 0..K {
            let seed = batch * K + k;
            if me == 0 {
                fill(&mut out[..4096], seed);
                ep.send(&out, peer, 41, 0, SendMode::Standard).unwrap();
            } else {
                recv(&ep, &mut inb, peer, 41, 0).unwrap();
                check(&inb[..4096], seed, "helped");
                want_syn += 1;
            }
        }
        big_msgs += K;
        // Rank 0 tells how many blocks it copied; rank 1 says whether to
        // go on.
        let mut b = [0u8; 8];
        if me == 0 {
            let helped = ep.stats().synergistic_sender_blocks;
            ep.send(&helped.to_le_bytes(), peer, 42, 0, SendMode::Standard)
                .unwrap();
            recv(&ep, &mut b[..1], peer, 43, 0).unwrap();
            if b[0] == 0 {
                break;
            }
        } else {
            recv(&ep, &mut b, peer, 42, 0).unwrap();
            let helped = u64::from_le_bytes(b);
            let s = ep.stats();
            let total: u64 = sizes
                .iter()
                .chain(std::iter::once(&((2 << 20) + 3)))
                .chain(std::iter::repeat_n(&BIG, big_msgs))
                .map(|&n| {
                    let b = vci::config::synergistic_block(n as u64, block as u64);
                    (n as u64).div_ceil(b)
                })
                .sum();
            assert_eq!(s.synergistic, want_syn, "{s:?}");
            assert_eq!(s.synergistic_receiver_blocks + helped, total, "{s:?}");
            let more = helped == 0 && batch + 1 < BATCHES;
            ep.send(&[more as u8], peer, 43, 0, SendMode::Standard)
                .unwrap();
            if !more {
                println!(
                    "synergistic: {} messages, {} blocks of {block} B, {} by the receiver, \
                     {helped} by the sender",
                    s.synergistic, total, s.synergistic_receiver_blocks
                );
                assert!(helped > 0, "the waiting sender never helped: {s:?}");
                break;
            }
        }
    }
    ep.barrier();
}

// ------------------------------------------------------------ model

/// One send of a generated program.
#[derive(Debug, Clone)]
struct Msg {
    src: u32,
    dst: u32,
    tag: i32,
    ctx: u32,
    size: usize,
    /// From private memory (two copy) rather than the heap.
    private: bool,
}

/// One receive of a generated program (`ANY_SOURCE` / `ANY_TAG` allowed).
#[derive(Debug, Clone)]
struct Recv {
    rank: u32,
    src: i32,
    tag: i32,
    ctx: u32,
    cap: usize,
}

const MODEL_RANKS: u32 = 3;
const CONTEXTS: u32 = 2;

fn encode(posted_first: bool, msgs: &[Msg], recvs: &[Recv]) -> String {
    let mut s = format!("{}|", posted_first as u8);
    for m in msgs {
        s += &format!(
            "{},{},{},{},{},{};",
            m.src, m.dst, m.tag, m.ctx, m.size, m.private as u8
        );
    }
    s += "|";
    for r in recvs {
        s += &format!("{},{},{},{},{};", r.rank, r.src, r.tag, r.ctx, r.cap);
    }
    s
}

fn decode(s: &str) -> (bool, Vec<Msg>, Vec<Recv>) {
    let (mode, s) = s.split_once('|').expect("plan");
    let (a, b) = s.split_once('|').expect("plan");
    let nums = |x: &str| -> Vec<i64> { x.split(',').map(|n| n.parse().expect("number")).collect() };
    let msgs = a
        .split(';')
        .filter(|x| !x.is_empty())
        .map(|x| {
            let v = nums(x);
            Msg {
                src: v[0] as u32,
                dst: v[1] as u32,
                tag: v[2] as i32,
                ctx: v[3] as u32,
                size: v[4] as usize,
                private: v[5] != 0,
            }
        })
        .collect();
    let recvs = b
        .split(';')
        .filter(|x| !x.is_empty())
        .map(|x| {
            let v = nums(x);
            Recv {
                rank: v[0] as u32,
                src: v[1] as i32,
                tag: v[2] as i32,
                ctx: v[3] as u32,
                cap: v[4] as usize,
            }
        })
        .collect();
    (mode == "1", msgs, recvs)
}

fn size_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        5 => 8usize..64,
        2 => 240usize..280,
        2 => 1000usize..9000,
    ]
}

fn program_strategy() -> impl Strategy<Value = (bool, Vec<Msg>, Vec<Recv>)> {
    let msg = (
        0..MODEL_RANKS,
        0..MODEL_RANKS,
        0..3i32,
        0..CONTEXTS,
        size_strategy(),
        any::<bool>(),
    )
        .prop_map(|(src, dst, tag, ctx, size, private)| Msg {
            src,
            dst,
            tag,
            ctx,
            size,
            private,
        });
    let src = prop_oneof![2 => Just(ANY_SOURCE), 3 => 0..MODEL_RANKS as i32];
    let tag = prop_oneof![2 => Just(ANY_TAG), 3 => 0..3i32];
    let cap = prop_oneof![4 => Just(10_000usize), 1 => 8usize..300];
    let recv =
        (0..MODEL_RANKS, src, tag, 0..CONTEXTS, cap).prop_map(|(rank, src, tag, ctx, cap)| Recv {
            rank,
            src,
            tag,
            ctx,
            cap,
        });
    (
        any::<bool>(),
        proptest::collection::vec(msg, 0..40),
        proptest::collection::vec(recv, 0..45),
    )
}

fn model_random_programs_match_the_reference() {
    run_model(150, &[]);
}

/// Contexts 0, 1 and 2 on two VCIs per rank: matching per context stays
/// within one VCI, and waiting on one VCI sweeps the other.
fn model_random_programs_with_two_vcis() {
    run_model(60, &[(vci::config::VCIS_VAR, "2".into())]);
}

/// Every message through the queues (no fast boxes).
fn model_random_programs_without_fast_boxes() {
    run_model(60, &[(vci::config::FASTBOX_VAR, "0".into())]);
}

fn run_model(default_cases: u32, env: &[(&str, String)]) {
    let cases = std::env::var("VCI_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cases);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&program_strategy(), |(posted_first, msgs, recvs)| {
            let mut vars = env.to_vec();
            vars.push((PLAN, encode(posted_first, &msgs, &recvs)));
            let report = rank_tests::launch("model", MODEL_RANKS, &vars);
            prop_assert!(report.success(), "{}", rank_tests::describe(&report));
            prop_assert!(report
                .ranks
                .iter()
                .all(|r| String::from_utf8_lossy(&r.stdout).contains("role model done")));
            Ok(())
        })
        .unwrap();
}

/// Whether receive `r` would match message `m`.
fn key_matches(r: &Recv, m: &Msg) -> bool {
    r.ctx == m.ctx
        && (r.src == ANY_SOURCE || r.src as u32 == m.src)
        && (r.tag == ANY_TAG || r.tag == m.tag)
}

/// The rank side of the model test.
///
/// Two modes. *Unexpected first*: every rank posts all its sends
/// (nonblocking), the ranks meet at a barrier (so every message is in its
/// destination's queue), then each rank posts its receives in order.
/// *Posted first*: every rank posts its receives, barrier, posts its sends,
/// barrier. Either way, after the last barrier each receive has matched or
/// never will (no message arrives later): the ones left pending are
/// cancelled, and the messages left over are drained per context with
/// ANY_SOURCE / ANY_TAG receives. The outcome must equal the reference
/// matcher's on some arrival order that keeps each sender's order.
/// Posts one receive per buffer, in order.
fn post_all<'a>(
    ep: &'a Endpoint,
    bufs: &'a mut [Vec<u8>],
    recvs: &[&Recv],
) -> Vec<vci::Request<'a>> {
    bufs.iter_mut()
        .zip(recvs)
        .map(|(b, r)| irecv(ep, b, r.src, r.tag, r.ctx).unwrap())
        .collect()
}

fn model_rank() {
    let ep = endpoint();
    let me = ep.rank() as u32;
    let (posted_first, msgs, recvs) = decode(&std::env::var(PLAN).expect("plan"));
    let payload = |id: usize| numbered(id, msgs[id].size);

    // Sends, in program order.
    let mine: Vec<usize> = (0..msgs.len()).filter(|&i| msgs[i].src == me).collect();
    let heap: Vec<Vec<u8>> = mine.iter().map(|&i| payload(i)).collect();
    let mut private: Vec<PrivBuf> = mine.iter().map(|&i| PrivBuf::new(msgs[i].size)).collect();
    for (k, p) in private.iter_mut().enumerate() {
        p.get().copy_from_slice(&heap[k]);
    }
    let send_all = || -> Vec<vci::Request<'_>> {
        mine.iter()
            .enumerate()
            .map(|(k, &i)| {
                let m = &msgs[i];
                let buf: &[u8] = if m.private {
                    private[k].view()
                } else {
                    &heap[k]
                };
                isend(&ep, buf, m.dst as i32, m.tag, m.ctx).unwrap()
            })
            .collect()
    };
    let my_recvs: Vec<&Recv> = recvs.iter().filter(|r| r.rank == me).collect();
    let mut bufs: Vec<Vec<u8>> = my_recvs.iter().map(|r| vec![0u8; r.cap]).collect();
    let (sends, mut reqs) = if posted_first {
        let reqs = post_all(&ep, &mut bufs, &my_recvs);
        ep.barrier();
        let sends = send_all();
        ep.barrier();
        (sends, reqs)
    } else {
        let sends = send_all();
        ep.barrier();
        (sends, post_all(&ep, &mut bufs, &my_recvs))
    };
    let mut statuses: Vec<Option<Status>> = Vec::new();
    for r in reqs.iter_mut() {
        match r.test() {
            Ok(Some(st)) => statuses.push(Some(st)),
            Err(Error::Truncate { status, .. }) => statuses.push(Some(status)),
            Ok(None) => {
                assert!(r.cancel(), "a pending receive can be cancelled");
                statuses.push(None);
            }
            Err(e) => panic!("receive failed: {e}"),
        }
    }
    for (r, st) in reqs.into_iter().zip(&statuses) {
        let got = match r.wait() {
            Ok(s) => s,
            Err(Error::Truncate { status, .. }) => status,
            Err(e) => panic!("{e}"),
        };
        match st {
            None => assert!(got.cancelled),
            Some(st) => assert_eq!(got, *st),
        }
    }
    // Identify what each receive got.
    let incoming: Vec<usize> = (0..msgs.len()).filter(|&i| msgs[i].dst == me).collect();
    let mut observed: Vec<Option<usize>> = Vec::new();
    for (k, st) in statuses.iter().enumerate() {
        let Some(st) = st else {
            observed.push(None);
            continue;
        };
        let id = number_of(&bufs[k]);
        assert!(
            id < msgs.len() && msgs[id].dst == me,
            "receive {k} got message {id}"
        );
        let m = &msgs[id];
        let n = m.size.min(my_recvs[k].cap);
        assert_eq!(
            (st.source, st.tag, st.count),
            (m.src as i32, m.tag, n as u64)
        );
        assert_eq!(
            st.error,
            (m.size > n).then_some(StatusError::Truncate {
                message_len: m.size as u64
            })
        );
        assert_eq!(&bufs[k][..n], &payload(id)[..n], "payload of message {id}");
        observed.push(Some(id));
    }
    // Drain the leftovers, per context, in arrival order.
    let matched: BTreeSet<usize> = observed.iter().flatten().copied().collect();
    assert_eq!(
        matched.len(),
        observed.iter().flatten().count(),
        "a message matched twice"
    );
    let mut drained: Vec<Vec<usize>> = vec![Vec::new(); CONTEXTS as usize];
    let mut big = vec![0u8; 10_000];
    for ctx in 0..CONTEXTS {
        let left = incoming
            .iter()
            .filter(|&&i| msgs[i].ctx == ctx && !matched.contains(&i))
            .count();
        for _ in 0..left {
            let st = recv(&ep, &mut big, ANY_SOURCE, ANY_TAG, ctx).unwrap();
            let id = number_of(&big);
            assert_eq!(st.count as usize, msgs[id].size);
            assert_eq!(&big[..msgs[id].size], &payload(id)[..]);
            drained[ctx as usize].push(id);
        }
        assert_eq!(ep.iprobe(ANY_SOURCE, ANY_TAG, ctx).unwrap(), None);
    }
    ep.wait_all(sends).unwrap();
    drop(private);

    check_against_reference(
        &msgs,
        &my_recvs,
        &incoming,
        &observed,
        &drained,
        posted_first,
        ep.vci_count() as u32,
    );
    ep.barrier();
}

/// The edges "message a arrived before message b" that the observations
/// imply when the receives were posted after every message had arrived:
/// each receive took the earliest matching message, so its message arrived
/// before every other candidate still unmatched.
fn explain_unexpected_first(
    msgs: &[Msg],
    recvs: &[&Recv],
    incoming: &[usize],
    observed: &[Option<usize>],
) -> Vec<(usize, usize)> {
    let mut edges = Vec::new();
    let mut consumed = BTreeSet::new();
    for (k, r) in recvs.iter().enumerate() {
        match observed[k] {
            Some(m) => {
                assert!(
                    key_matches(r, &msgs[m]),
                    "receive {k} {r:?} got non-matching {m}"
                );
                for &o in incoming {
                    if o != m && !consumed.contains(&o) && key_matches(r, &msgs[o]) {
                        edges.push((m, o));
                    }
                }
                consumed.insert(m);
            }
            None => {
                let cand: Vec<_> = incoming
                    .iter()
                    .filter(|&&o| !consumed.contains(&o) && key_matches(r, &msgs[o]))
                    .collect();
                assert!(
                    cand.is_empty(),
                    "receive {k} {r:?} was left pending but {cand:?} match"
                );
            }
        }
    }
    edges
}

/// The same when every receive was posted before any message arrived: a
/// message took the earliest posted receive that matched it and was still
/// free, so every earlier matching receive was taken by a message that
/// arrived before it.
fn explain_posted_first(
    msgs: &[Msg],
    recvs: &[&Recv],
    incoming: &[usize],
    observed: &[Option<usize>],
) -> Vec<(usize, usize)> {
    let taker: HashMap<usize, usize> = observed
        .iter()
        .enumerate()
        .filter_map(|(k, o)| o.map(|m| (m, k)))
        .collect();
    let mut edges = Vec::new();
    for &m in incoming {
        let limit = match taker.get(&m) {
            Some(&k) => {
                assert!(
                    key_matches(recvs[k], &msgs[m]),
                    "receive {k} {:?} got non-matching {m}",
                    recvs[k]
                );
                k
            }
            None => recvs.len(),
        };
        for (j, r) in recvs[..limit].iter().enumerate() {
            if key_matches(r, &msgs[m]) {
                let Some(first) = observed[j] else {
                    panic!("receive {j} {r:?} was left pending but message {m} matches it");
                };
                edges.push((first, m));
            }
        }
    }
    edges
}

/// What the reference matcher does when messages arrive in `arrival`
/// order: which message each receive gets, and the leftovers in arrival
/// order.
fn reference(
    msgs: &[Msg],
    recvs: &[&Recv],
    arrival: &[usize],
    posted_first: bool,
) -> (Vec<Option<usize>>, Vec<usize>) {
    let mut got = vec![None; recvs.len()];
    let mut unexpected = Vec::new();
    if posted_first {
        // Each arriving message takes the earliest free matching receive.
        for &m in arrival {
            match (0..recvs.len()).find(|&k| got[k].is_none() && key_matches(recvs[k], &msgs[m])) {
                Some(k) => got[k] = Some(m),
                None => unexpected.push(m),
            }
        }
    } else {
        // Each receive takes the earliest matching message.
        unexpected = arrival.to_vec();
        for (k, r) in recvs.iter().enumerate() {
            if let Some(p) = unexpected.iter().position(|&m| key_matches(r, &msgs[m])) {
                got[k] = Some(unexpected.remove(p));
            }
        }
    }
    (got, unexpected)
}

/// Finds an arrival order that explains the observations (arrival order
/// keeps each sender's order on each VCI — context `c` travels on VCI
/// `(c / 2) % vcis`, and MPI orders nothing across communicators; `explain_*` add
/// what the matching implies, the drains add their order), then replays
/// the reference matcher on it and requires the very same outcome.
fn check_against_reference(
    msgs: &[Msg],
    recvs: &[&Recv],
    incoming: &[usize],
    observed: &[Option<usize>],
    drained: &[Vec<usize>],
    posted_first: bool,
    vcis: u32,
) {
    let stream = |m: usize| (msgs[m].src, (msgs[m].ctx / 2) % vcis);
    let mut edges: Vec<(usize, usize)> = Vec::new();
    for (k, &a) in incoming.iter().enumerate() {
        if let Some(&b) = incoming[k + 1..].iter().find(|&&b| stream(b) == stream(a)) {
            edges.push((a, b));
        }
    }
    edges.extend(if posted_first {
        explain_posted_first(msgs, recvs, incoming, observed)
    } else {
        explain_unexpected_first(msgs, recvs, incoming, observed)
    });
    for d in drained {
        for w in d.windows(2) {
            edges.push((w[0], w[1]));
        }
    }
    // Kahn's algorithm over the incoming messages.
    let mut indeg: HashMap<usize, usize> = incoming.iter().map(|&i| (i, 0)).collect();
    let mut out: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(a, b) in &edges {
        *indeg.get_mut(&b).unwrap() += 1;
        out.entry(a).or_default().push(b);
    }
    let mut ready: VecDeque<usize> = incoming.iter().copied().filter(|i| indeg[i] == 0).collect();
    let mut arrival = Vec::new();
    while let Some(a) = ready.pop_front() {
        arrival.push(a);
        for &b in out.get(&a).map(|v| &v[..]).unwrap_or(&[]) {
            let d = indeg.get_mut(&b).unwrap();
            *d -= 1;
            if *d == 0 {
                ready.push_back(b);
            }
        }
    }
    assert_eq!(
        arrival.len(),
        incoming.len(),
        "no arrival order explains the outcome: {observed:?}, drained {drained:?}"
    );
    let (expect, unexpected) = reference(msgs, recvs, &arrival, posted_first);
    assert_eq!(
        &expect, observed,
        "reference matcher on arrival order {arrival:?}"
    );
    for ctx in 0..CONTEXTS {
        let rest: Vec<usize> = unexpected
            .iter()
            .copied()
            .filter(|&m| msgs[m].ctx == ctx)
            .collect();
        assert_eq!(rest, drained[ctx as usize], "leftovers of context {ctx}");
    }
}

// ------------------------------------------------------- fast-box order

/// Sizes around the fast box's boundaries: 40 bytes fit a slot's first
/// line, 48 an unexpected entry inline, 256 is the largest immediate.
const FB_SIZES: [usize; 9] = [8, 40, 41, 48, 49, 200, 256, 0, 100];

fn fastbox_order_rank() {
    let ep = endpoint();
    let me = ep.rank();
    const N: usize = 1000;
    const THREADS: usize = 4;
    if me == 0 {
        // All sent before the receiver looks: the rings fill up, later
        // messages overflow into the queue, and order must hold anyway.
        for i in 0..N {
            let len = FB_SIZES[i % FB_SIZES.len()];
            ep.send(&numbered(i, len)[..len.max(4)], 1, 1, 0, SendMode::Standard)
                .unwrap();
        }
        ep.barrier();
        // Threads race for the lane to rank 1, each in its own tag.
        std::thread::scope(|sc| {
            for t in 0..THREADS {
                let ep = &ep;
                sc.spawn(move || {
                    for i in 0..N / 2 {
                        let len = FB_SIZES[(i + t) % FB_SIZES.len()];
                        ep.send(
                            &numbered(i, len)[..len.max(4)],
                            1,
                            10 + t as i32,
                            0,
                            SendMode::Standard,
                        )
                        .unwrap();
                    }
                });
            }
        });
        let st = ep.stats();
        assert!(st.sent_fastbox > 0, "tiny messages used the fast box");
        assert!(
            st.sent_fastbox < st.sent_immediate,
            "full rings fell back to the queue: {st:?}"
        );
    } else {
        ep.barrier();
        let mut buf = vec![0u8; 256];
        for i in 0..N {
            let st = recv(&ep, &mut buf, 0, 1, 0).unwrap();
            assert_eq!(st.count as usize, FB_SIZES[i % FB_SIZES.len()].max(4));
            assert_eq!(number_of(&buf), i, "message {i} in order");
        }
        let mut next = [0usize; THREADS];
        for _ in 0..THREADS * N / 2 {
            let st = recv(&ep, &mut buf, 0, ANY_TAG, 0).unwrap();
            let t = (st.tag - 10) as usize;
            assert_eq!(number_of(&buf), next[t], "thread {t}'s order");
            next[t] += 1;
        }
        assert!(ep.stats().recv_fastbox > 0);
    }
    ep.barrier();
}

/// Whether `buf` is `numbered(i, buf.len())`.
fn is_numbered(buf: &[u8], i: usize) -> bool {
    buf.len() >= 4 && number_of(buf) == i && buf[4..] == numbered(i, buf.len())[4..]
}

/// Fast-box messages of every boundary size, two tags interleaved, all sent
/// before the receiver looks; the receiver takes one tag first, so the
/// other tag's messages move to the unexpected list (inline up to 48
/// bytes, a heap copy beyond) and are taken from there afterwards, whole
/// and in order; a short buffer truncates one of them.
fn fastbox_unexpected_rank() {
    let ep = endpoint();
    let me = ep.rank();
    const N: usize = 40;
    if me == 0 {
        for i in 0..N {
            let len = FB_SIZES[i % FB_SIZES.len()].max(4);
            ep.send(
                &numbered(i, len),
                1,
                1 + (i % 2) as i32,
                0,
                SendMode::Standard,
            )
            .unwrap();
        }
        ep.barrier();
        assert!(ep.stats().sent_fastbox as usize >= N, "{:?}", ep.stats());
    } else {
        ep.barrier();
        let mut buf = vec![0u8; 256];
        for tag in [2, 1] {
            for i in (0..N).filter(|i| 1 + (i % 2) as i32 == tag) {
                let len = FB_SIZES[i % FB_SIZES.len()].max(4);
                if i == 1 {
                    // A receive shorter than the message: the prefix, and
                    // the truncation reported.
                    let mut short = [0u8; 6];
                    match recv(&ep, &mut short, 0, tag, 0) {
                        Err(Error::Truncate {
                            status,
                            message_len,
                        }) => {
                            assert_eq!((status.count, message_len), (6, len as u64));
                            assert_eq!(short[..], numbered(i, len)[..6]);
                        }
                        other => panic!("message {i}: {other:?}"),
                    }
                    continue;
                }
                let st = recv(&ep, &mut buf, 0, tag, 0).unwrap();
                assert_eq!((st.tag, st.count as usize), (tag, len), "message {i}");
                assert!(
                    is_numbered(&buf[..len], i),
                    "message {i} intact and in order"
                );
            }
        }
        let st = ep.stats();
        assert!(st.recv_fastbox as usize >= N, "{st:?}");
        assert!(st.matched_unexpected > 0, "{st:?}");
    }
    ep.barrier();
}

/// Receives posted against fast-box messages that wait in their slots.
///
/// Phase one: before rank 1 looks, rank 0 sends more than its fast box
/// holds (the rest overflows into the queue) and rank 2 less (all of it
/// waits in the slots). Rank 1 probes for
/// rank 2's stream from any source, then posts a receive for a tag that
/// only every tenth message of rank 0 carries (everything before it must
/// move to the unexpected list), then windows of receives for both
/// streams, named and from any source. Phase two: rank 0 streams windows
/// of 64 while rank 1 posts its receives for them (as `osu_bw` does), and
/// rank 2 sends a second stream that rank 1 takes from any source in
/// between. Every message arrives once, whole, in its sender's order.
fn fastbox_posted_rank() {
    let ep = endpoint();
    let me = ep.rank();
    const N0: usize = 200;
    const N2: usize = 40;
    const WINDOWS: usize = 200;
    const WINDOW: usize = 64;
    const PER_WINDOW: usize = 3;
    let len_of = |i: usize| FB_SIZES[i % FB_SIZES.len()].max(4);
    let tag0 = |i: usize| if i % 10 == 9 { 2 } else { 1 };
    match me {
        0 => {
            for i in 0..N0 {
                ep.send(&numbered(i, len_of(i)), 1, tag0(i), 0, SendMode::Standard)
                    .unwrap();
            }
            ep.barrier();
            ep.barrier();
            let mut ack = [0u8; 4];
            for w in 0..WINDOWS {
                let msgs: Vec<Vec<u8>> = (0..WINDOW)
                    .map(|k| numbered(w * WINDOW + k, 8 + (k % 6) * 8))
                    .collect();
                let reqs: Vec<_> = msgs
                    .iter()
                    .map(|m| isend(&ep, m, 1, 4, 0).unwrap())
                    .collect();
                vci::wait_all(reqs).unwrap();
                recv(&ep, &mut ack, 1, 6, 0).unwrap();
            }
        }
        2 => {
            for i in 0..N2 {
                ep.send(&numbered(i, len_of(i + 3)), 1, 3, 0, SendMode::Standard)
                    .unwrap();
            }
            ep.barrier();
            ep.barrier();
            for i in 0..WINDOWS * PER_WINDOW {
                ep.send(&numbered(i, 8 + i % 40), 1, 5, 0, SendMode::Standard)
                    .unwrap();
            }
        }
        _ => {
            ep.barrier();
            // Rank 2's first message waits in its fast box; a probe from
            // any source finds it there.
            let st = ep
                .iprobe(ANY_SOURCE, 3, 0)
                .unwrap()
                .expect("a probe sees messages left in a fast box");
            assert_eq!((st.source, st.count as usize), (2, len_of(3)));
            // Rank 0's tenth message first: the nine before it go to the
            // unexpected list on the way.
            let mut first = vec![0u8; 256];
            let st = irecv(&ep, &mut first, 0, 2, 0).unwrap().wait().unwrap();
            assert_eq!(st.count as usize, len_of(9));
            assert!(is_numbered(&first[..len_of(9)], 9), "message 9 first");
            let mut want0: VecDeque<usize> = (0..N0).filter(|&i| i != 9).collect();
            let mut next2 = 0;
            while !want0.is_empty() || next2 < N2 {
                let mut bufs = vec![vec![0u8; 256]; 24];
                let (b0, b2) = bufs.split_at_mut(16);
                let mut ids = Vec::new();
                let mut reqs = Vec::new();
                for b in b0.iter_mut() {
                    let Some(i) = want0.pop_front() else { break };
                    ids.push(i);
                    reqs.push(irecv(&ep, b, 0, tag0(i), 0).unwrap());
                }
                let named = reqs.len();
                for b in b2.iter_mut().take(N2 - next2) {
                    reqs.push(irecv(&ep, b, ANY_SOURCE, 3, 0).unwrap());
                }
                let sts = vci::wait_all(reqs).unwrap();
                for (k, st) in sts.iter().enumerate() {
                    let (i, src, tag) = if k < named {
                        (ids[k], 0, tag0(ids[k]))
                    } else {
                        next2 += 1;
                        (next2 - 1, 2, 3)
                    };
                    let len = if src == 0 { len_of(i) } else { len_of(i + 3) };
                    assert_eq!((st.source, st.tag, st.count as usize), (src, tag, len));
                    let b = if k < named {
                        &bufs[k]
                    } else {
                        &bufs[16 + k - named]
                    };
                    assert!(is_numbered(&b[..len], i), "rank {src}'s message {i}");
                }
            }
            ep.barrier();
            let mut next5 = 0;
            for w in 0..WINDOWS {
                let mut bufs = vec![vec![0u8; 64]; WINDOW + PER_WINDOW];
                let (data, other) = bufs.split_at_mut(WINDOW);
                let mut reqs: Vec<_> = data
                    .iter_mut()
                    .map(|b| irecv(&ep, b, 0, 4, 0).unwrap())
                    .collect();
                for b in other.iter_mut() {
                    reqs.push(irecv(&ep, b, ANY_SOURCE, 5, 0).unwrap());
                }
                let sts = vci::wait_all(reqs).unwrap();
                for (k, st) in sts.iter().enumerate() {
                    let (i, len) = if k < WINDOW {
                        (w * WINDOW + k, 8 + (k % 6) * 8)
                    } else {
                        next5 += 1;
                        (next5 - 1, 8 + (next5 - 1) % 40)
                    };
                    assert_eq!(st.count as usize, len, "window {w}, receive {k}");
                    assert!(is_numbered(&bufs[k][..len], i), "window {w}, receive {k}");
                }
                ep.send(&[0u8; 4], 0, 6, 0, SendMode::Standard).unwrap();
            }
        }
    }
    ep.barrier();
}
