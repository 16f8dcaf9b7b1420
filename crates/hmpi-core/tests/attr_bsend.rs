//! Attributes, buffered sends and persistent requests from Rust, across
//! real ranks: a ring of
//! buffered sends that all leave before any receive is posted, the
//! capacity given back as messages go, a message that does not fit
//! (`Error::Buffer`), detach waiting for what is in flight; attribute keys
//! with copy and delete callbacks on communicators, copied to a duplicate
//! and deleted with it; a ring of persistent sends and receives restarted
//! 1000 times, a synchronous one, and starting an active request.
//!
//! A `harness = false` binary on `hmpi_core::launch::rank_tests`, as
//! `p2p_ranks.rs`.

use hmpi_core::attr::{self, Copy, Delete, Kind};
use hmpi_core::buffered::{self, BSEND_OVERHEAD};
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::Error;
use shmheap::ShmHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

type Body = fn(Universe);

const ROLES: &[(&str, Body)] = &[
    ("bsend", bsend_rank),
    ("attr", attr_rank),
    ("persistent", persistent_rank),
];

const TESTS: &[(&str, fn())] = &[
    (
        "buffered_sends_leave_before_receives_within_capacity",
        buffered_sends_leave_before_receives_within_capacity,
    ),
    (
        "attribute_callbacks_on_duplicate_and_drop",
        attribute_callbacks_on_duplicate_and_drop,
    ),
    (
        "persistent_ring_restarted_a_thousand_times",
        persistent_ring_restarted_a_thousand_times,
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

fn buffered_sends_leave_before_receives_within_capacity() {
    // 1 rank: a process sending to itself; 5: more ranks than cores.
    for ranks in [1, 3, 5] {
        run_ok("bsend", ranks);
    }
}

fn attribute_callbacks_on_duplicate_and_drop() {
    run_ok("attr", 2);
}

fn persistent_ring_restarted_a_thousand_times() {
    for ranks in [1, 2, 5] {
        run_ok("persistent", ranks);
    }
}

fn persistent_rank(u: Universe) {
    use hmpi_core::persistent::{PersistentRecv, PersistentSend};
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let out: Vec<u32> = (0..256).map(|i| me as u32 * 1_000_000 + i).collect();
    let mut inbox = vec![0u32; 256];
    hmpi_core::request::scope(|scope| {
        let mut send = PersistentSend::new(scope, &world, &out[..], right, 3).unwrap();
        let mut recv = PersistentRecv::new(scope, &world, &mut inbox[..], left, 3).unwrap();
        for round in 0..1000 {
            recv.buffer().unwrap().fill(0);
            recv.start().unwrap();
            assert!(matches!(recv.start(), Err(Error::Arg { .. })));
            assert!(matches!(recv.buffer(), Err(Error::Arg { .. })));
            send.start().unwrap();
            let st = if round % 2 == 0 {
                loop {
                    if let Some(st) = recv.test().unwrap() {
                        break st;
                    }
                }
            } else {
                recv.wait().unwrap()
            };
            send.wait().unwrap();
            assert!(!recv.is_active() && !send.is_active());
            assert_eq!((st.source_rank(), st.tag()), (left, 3));
            assert_eq!(st.count::<u32>().unwrap(), 256);
            let b = recv.buffer().unwrap();
            for (i, w) in b.chunks_exact(4).enumerate() {
                let x = u32::from_ne_bytes(w.try_into().unwrap());
                assert_eq!(x, left as u32 * 1_000_000 + i as u32);
            }
        }
    });
    let (first, rest) = inbox.split_at_mut(8);
    hmpi_core::request::scope(|scope| {
        // Synchronous mode, and an inactive request's wait returning at once.
        let mut s = PersistentSend::new_synchronous(scope, &world, &out[..8], right, 4).unwrap();
        let mut r = PersistentRecv::new(scope, &world, &mut first[..], left, 4).unwrap();
        for _ in 0..10 {
            r.start().unwrap();
            s.start().unwrap();
            s.wait().unwrap();
            assert_eq!(r.wait().unwrap().source_rank(), left);
        }
        r.wait().unwrap();
        assert!(matches!(
            PersistentSend::new(scope, &world, &out[..], n, 0),
            Err(Error::Rank { .. })
        ));
        // A request leaked while active: the scope completes its start.
        let mut leaked = PersistentRecv::new(scope, &world, &mut rest[..8], left, 5).unwrap();
        leaked.start().unwrap();
        std::mem::forget(leaked);
        PersistentSend::new(scope, &world, &out[..8], right, 5)
            .and_then(|mut s| {
                s.start()?;
                s.wait()
            })
            .unwrap();
    });
    assert_eq!(
        &inbox[8..16],
        &(0..8)
            .map(|i| left as u32 * 1_000_000 + i)
            .collect::<Vec<_>>()[..]
    );
    world.barrier().unwrap();
}

const MSGS: usize = 6;
const LEN: usize = 20_000;

fn bsend_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    let right = world.process_at_rank((me + 1) % n);
    let left_rank = (me + n - 1) % n;
    let left = world.process_at_rank(left_rank);
    assert!(matches!(
        right.buffered_send(&1u32),
        Err(Error::Buffer { .. })
    ));
    let mut space = vec![0u8; MSGS * (LEN + BSEND_OVERHEAD)];
    // SAFETY: `space` outlives the attachment (detached below).
    unsafe { buffered::attach(space.as_mut_ptr(), space.len()) }.unwrap();
    for round in 0..10u8 {
        for m in 0..MSGS {
            let msg: Vec<u8> = (0..LEN)
                .map(|i| (i as u8) ^ round ^ (m as u8) ^ me as u8)
                .collect();
            right.buffered_send_with_tag(&msg[..], m as i32).unwrap();
        }
        if round == 0 {
            let (cap, used) = buffered::in_use().unwrap();
            assert_eq!(cap, space.len());
            assert!(used <= cap);
        }
        world.barrier().unwrap();
        for m in (0..MSGS).rev() {
            let mut got = vec![0u8; LEN];
            let st = left.receive_into_with_tag(&mut got[..], m as i32).unwrap();
            assert_eq!(st.source_rank(), left_rank);
            let from = left_rank as u8;
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i as u8) ^ round ^ (m as u8) ^ from));
        }
        world.barrier().unwrap();
    }
    // More than the whole buffer.
    let big = vec![0u8; space.len()];
    assert!(matches!(
        right.buffered_send(&big[..]),
        Err(Error::Buffer { .. })
    ));
    // Detach waits for a message in flight, received meanwhile.
    right.buffered_send_with_tag(&[7u8; LEN][..], 99).unwrap();
    let mut got = vec![0u8; LEN];
    left.receive_into_with_tag(&mut got[..], 99).unwrap();
    assert!(got.iter().all(|&b| b == 7));
    let (base, size) = buffered::detach().unwrap();
    assert_eq!((base, size), (space.as_mut_ptr(), space.len()));
    assert_eq!(buffered::in_use(), None);
    world.barrier().unwrap();
}

fn attr_rank(u: Universe) {
    let world = u.world();
    let copies = Arc::new(AtomicUsize::new(0));
    let deletes = Arc::new(AtomicUsize::new(0));
    let (c, d) = (copies.clone(), deletes.clone());
    let key = attr::create_keyval(
        Kind::Comm,
        Copy::Call(Arc::new(move |_, _, v| {
            // Relaxed: counters read on this thread after the calls.
            c.fetch_add(1, Ordering::Relaxed);
            Ok(Some(v * 2))
        })),
        Delete::Call(Arc::new(move |_, _, v| {
            d.fetch_add(v, Ordering::Relaxed);
            Ok(())
        })),
    )
    .unwrap();
    let comm = world.duplicate().unwrap();
    comm.attributes().set(Kind::Comm, 0, key, 5).unwrap();
    let dup = comm.duplicate().unwrap();
    assert_eq!(dup.attributes().get(Kind::Comm, key).unwrap(), None);
    comm.attributes()
        .copy_into(Kind::Comm, 0, dup.attributes())
        .unwrap();
    assert_eq!(copies.load(Ordering::Relaxed), 1);
    assert_eq!(dup.attributes().get(Kind::Comm, key).unwrap(), Some(10));
    // The duplicate works as a communicator, and its attributes go with it.
    let me = dup.rank();
    let peer = dup.process_at_rank(1 - me);
    let (got, _): (i32, _) = hmpi_core::point_to_point::send_receive(&me, &peer, &peer).unwrap();
    assert_eq!(got, 1 - me);
    drop(dup);
    assert_eq!(deletes.load(Ordering::Relaxed), 10);
    comm.attributes().delete_all(Kind::Comm, 0).unwrap();
    assert_eq!(deletes.load(Ordering::Relaxed), 15);
    attr::free_keyval(Kind::Comm, key).unwrap();
    assert!(matches!(
        comm.attributes().get(Kind::Comm, key),
        Err(Error::Keyval { .. })
    ));
    world.barrier().unwrap();
}
