//! Sessions across real ranks: the runtime held by sessions alone and
//! together with the world model, communicators and intercommunicators
//! made from the process sets' groups, and the session buffer.
//!
//! Its own small harness (`harness = false`, as `runtime_ranks.rs`): each
//! test launches ranks that re-execute this binary with `HMPI_TEST_ROLE`.

use hmpi_core::buffered;
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::session::Session;
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const TESTS: &[(&str, fn())] = &[
    (
        "sessions_alone_hold_and_end_the_runtime",
        sessions_alone_hold_and_end_the_runtime,
    ),
    (
        "a_session_outlives_the_world_model",
        a_session_outlives_the_world_model,
    ),
    (
        "threads_open_sessions_and_make_communicators_at_once",
        threads_open_sessions_and_make_communicators_at_once,
    ),
];

fn main() {
    rank_tests::main(
        |role| {
            match role {
                "alone" => alone_rank(),
                "mixed" => mixed_rank(),
                "threads" => threads_rank(),
                _ => return None,
            }
            Some(())
        },
        TESTS,
    );
}

fn sessions_alone_hold_and_end_the_runtime() {
    // 3 ranks: more than cores.
    for ranks in [1, 2, 3] {
        rank_tests::assert_ran(&rank_tests::launch("alone", ranks, &[]), "alone");
    }
}

fn a_session_outlives_the_world_model() {
    for ranks in [1, 3] {
        rank_tests::assert_ran(&rank_tests::launch("mixed", ranks, &[]), "mixed");
    }
}

fn threads_open_sessions_and_make_communicators_at_once() {
    for ranks in [2, 3] {
        rank_tests::assert_ran(&rank_tests::launch("threads", ranks, &[]), "threads");
    }
}

/// The sum of the ranks over `c`, and a ring exchange on it.
fn exercise(c: &SimpleCommunicator) {
    let (r, n) = (c.rank(), c.size());
    let mut sum = [0i32];
    c.all_reduce_into(&[r][..], &mut sum[..], SystemOperation::sum())
        .unwrap();
    assert_eq!(sum[0], n * (n - 1) / 2);
    let next = c.process_at_rank((r + 1) % n);
    let prev = c.process_at_rank((r + n - 1) % n);
    let token = [r; 4]; // outlives the scope
    request::scope(|scope| {
        let s = next.immediate_send(scope, &token).unwrap();
        let (got, _) = prev.receive::<[i32; 4]>().unwrap();
        assert_eq!(got, [(r + n - 1) % n; 4]);
        s.wait().unwrap();
    });
    c.barrier().unwrap();
}

fn alone_rank() {
    assert!(!hmpi_core::is_initialized());
    let s = Session::init().unwrap();
    let other = Session::init().unwrap();
    assert!(hmpi_core::is_initialized());
    let g = s.group_from_pset("mpi://WORLD").unwrap();
    let n = s.pset_size("mpi://WORLD").unwrap();
    assert_eq!(g.size(), n);
    assert_eq!(s.pset_size("mpi://SELF").unwrap(), 1);
    assert!(matches!(
        s.group_from_pset("mpi://nodes"),
        Err(Error::Arg { .. })
    ));
    let c = s.comm_from_group(&g, "test.world").unwrap();
    assert_eq!((c.rank(), c.size()), (g.rank().unwrap(), n));
    exercise(&c);
    // The other session ends; this one keeps the runtime.
    other.finalize().unwrap();
    assert!(hmpi_core::is_initialized());
    exercise(&c);
    let me = s.group_from_pset("mpi://SELF").unwrap();
    exercise(&s.comm_from_group(&me, "test.self").unwrap());

    // An intercommunicator of the even and the odd ranks.
    let r = c.rank();
    if n >= 2 {
        let evens: Vec<i32> = (0..n).filter(|x| x % 2 == 0).collect();
        let odds: Vec<i32> = (0..n).filter(|x| x % 2 == 1).collect();
        let (even, odd) = (g.include(&evens).unwrap(), g.include(&odds).unwrap());
        let (mine, theirs) = if r % 2 == 0 {
            (&even, &odd)
        } else {
            (&odd, &even)
        };
        let ic = s
            .intercomm_from_groups(mine, 0, theirs, 0, "test.inter")
            .unwrap();
        assert_eq!(ic.remote_size(), theirs.size());
        let merged = ic.merge(r % 2 == 1).unwrap();
        assert_eq!(merged.size(), n);
        exercise(&merged);
        assert!(s
            .intercomm_from_groups(&g, 0, &g, 0, "test.overlap")
            .is_err());
    }

    // The session buffer serves the communicators of its groups.
    assert!(matches!(
        buffered::bsend(&c, &[1u8; 8], r, 7),
        Err(Error::Buffer { .. })
    ));
    let mut space = vec![0u8; 64 + buffered::BSEND_OVERHEAD];
    // SAFETY: `space` outlives the attachment (detached below).
    unsafe { s.attach_buffer(space.as_mut_ptr(), space.len()) }.unwrap();
    buffered::bsend(&c, &[r as u8; 8], r, 7).unwrap();
    s.flush_buffer().unwrap();
    let (got, _) = c.process_at_rank(r).receive_with_tag::<[u8; 8]>(7).unwrap();
    assert_eq!(got, [r as u8; 8]);
    let (base, len) = s.detach_buffer().unwrap();
    assert_eq!((base, len), (space.as_mut_ptr(), space.len()));

    s.finalize().unwrap();
    assert!(hmpi_core::is_finalized());
    // The runtime does not start twice.
    assert!(matches!(Session::init(), Err(Error::Finalized)));
    assert!(matches!(hmpi_core::init(), Err(Error::Finalized)));
}

fn mixed_rank() {
    let s = Session::init().unwrap();
    let u = hmpi_core::init().unwrap();
    assert!(matches!(hmpi_core::init(), Err(Error::AlreadyInitialized)));
    exercise(&u.world());
    u.finalize().unwrap();
    assert!(hmpi_core::environment::world_finalized());
    assert!(hmpi_core::is_initialized());
    let g = s.group_from_pset("mpi://WORLD").unwrap();
    exercise(&s.comm_from_group(&g, "test.after-finalize").unwrap());
    drop(s); // the last holder: ends the runtime
    assert!(hmpi_core::is_finalized());
    assert!(matches!(hmpi_core::init(), Err(Error::Finalized)));
}

fn threads_rank() {
    // Four threads open the runtime at once (one of them starts it, the
    // others join), each makes a communicator of the world with a tag of
    // its own and uses it while the others do the same.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let s = Session::init().unwrap();
                let g = s.group_from_pset("mpi://WORLD").unwrap();
                let c = s.comm_from_group(&g, &format!("test.thread.{t}")).unwrap();
                for _ in 0..20 {
                    exercise(&c);
                }
                s
            })
        })
        .collect();
    let sessions: Vec<Session> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(hmpi_core::is_initialized());
    for s in sessions {
        s.finalize().unwrap();
    }
    assert!(hmpi_core::is_finalized());
}
