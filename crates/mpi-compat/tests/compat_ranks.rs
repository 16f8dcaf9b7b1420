//! The compatibility face across real ranks, for what rsmpi's examples do
//! not cover: MPI errors abort the job with the MPI error text (rsmpi's
//! `MPI_ERRORS_ARE_FATAL`), user operations on `DynBuffer`s, the
//! nonblocking reductions and scans, request collections with their data,
//! communicator comparison and subgroup communicators, the derive,
//! buffered sends (and a message too large for the buffer), the
//! nonblocking all-to-all with varying counts, attributes replaced,
//! duplicated and dropped, padded and strided data packed around blocking
//! operations (and refused by nonblocking ones), C-style reduction
//! functions.
//!
//! A `harness = false` binary on `hmpi_core::launch::rank_tests`: run
//! plainly it runs the tests one after another, each launching ranks that
//! re-execute this binary in a role.

use hmpi_core::launch::rank_tests;
use mpi::collective::{SystemOperation, UserOperation};
use mpi::topology::{Color, CommunicatorRelation};
use mpi::traits::*;

fn errors_abort_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    if world.rank() == 0 {
        // A rank outside the communicator: MPI_ERR_RANK, fatal.
        world.process_at_rank(world.size()).send(&1u8);
        println!("unreachable: the send returned");
    }
    // The others wait to be ended by the launcher.
    world.barrier();
}

fn errors_abort_with_the_mpi_text() {
    let report = rank_tests::launch("errors", 2, &[]);
    assert!(!report.success(), "{}", rank_tests::describe(&report));
    let r0 = &report.ranks[0];
    let err = String::from_utf8_lossy(&r0.stderr);
    let out = String::from_utf8_lossy(&r0.stdout);
    assert!(
        err.contains("MPI error: invalid rank 2"),
        "{}",
        rank_tests::describe(&report)
    );
    assert!(
        !out.contains("unreachable"),
        "{}",
        rank_tests::describe(&report)
    );
    assert_ne!(report.exit_code(), 0);
}

fn reductions_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());

    // A user operation on DynBuffers, commutative and not.
    let add = UserOperation::commutative(|x, y| {
        let x: &[i32] = x.downcast().unwrap();
        let y: &mut [i32] = y.downcast().unwrap();
        for (a, b) in x.iter().zip(y) {
            *b += a;
        }
    });
    let mut sum = [0i32; 3];
    world.all_reduce_into(&[rank, 2 * rank, 1][..], &mut sum[..], &add);
    let t = size * (size - 1) / 2;
    assert_eq!(sum, [t, 2 * t, size]);
    // Keeps the left operand: the result is rank 0's value everywhere.
    let first = UserOperation::associative(|x, y| {
        let x: &[i64] = x.downcast().unwrap();
        let y: &mut [i64] = y.downcast().unwrap();
        y.copy_from_slice(x);
    });
    let mut got = -1i64;
    world.all_reduce_into(&(i64::from(rank) + 10), &mut got, &first);
    assert_eq!(got, 10);
    // A downcast to the wrong type is refused.
    let wrong = UserOperation::commutative(|x, y| {
        assert!(x.downcast::<f64>().is_none());
        assert!(y.is::<u16>());
    });
    let mut w = 0u16;
    world.all_reduce_into(&1u16, &mut w, &wrong);

    // Nonblocking reductions and scans in a scope.
    let mine = rank + 1;
    let (mut r, mut s, mut e, mut root_sum) = (0, 0, 0, 0);
    mpi::request::scope(|scope| {
        let a = world.immediate_all_reduce_into(scope, &mine, &mut r, SystemOperation::sum());
        let b = world.immediate_scan_into(scope, &mine, &mut s, SystemOperation::sum());
        let c = world.immediate_exclusive_scan_into(scope, &mine, &mut e, SystemOperation::sum());
        let root = world.process_at_rank(0);
        let d = if rank == 0 {
            root.immediate_reduce_into_root(scope, &mine, &mut root_sum, SystemOperation::max())
                .wait()
        } else {
            root.immediate_reduce_into(scope, &mine, SystemOperation::max())
                .wait()
        };
        // A collective's status is empty.
        assert_eq!(
            d.source_rank(),
            mpi::topology::Rank::from(hmpi_core::ANY_SOURCE)
        );
        assert_eq!(*a.wait_for_data(), size * (size + 1) / 2);
        b.wait_without_status();
        c.wait();
    });
    assert_eq!(r, size * (size + 1) / 2);
    assert_eq!(s, (rank + 1) * (rank + 2) / 2);
    // A barrier needs no scope; test() hands it back until all arrived.
    let mut b = world.immediate_barrier();
    loop {
        match b.test() {
            Ok(st) => {
                assert_eq!(st.tag(), hmpi_core::ANY_TAG);
                break;
            }
            Err(back) => b = back,
        }
    }
    world.immediate_barrier().wait();
    if rank > 0 {
        assert_eq!(e, rank * (rank + 1) / 2);
        assert_eq!(root_sum, 0);
    } else {
        assert_eq!(root_sum, size);
    }
}

fn reductions_run_on_three_ranks() {
    rank_tests::assert_ran(&rank_tests::launch("reductions", 3, &[]), "reductions");
}

fn collection_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    let out: Vec<[u32; 2]> = (0..16).map(|i| [rank as u32, i]).collect();
    let mut inb = [[0u32; 2]; 16];
    mpi::request::multiple_scope(32, |scope, coll| {
        for (i, x) in out.iter().enumerate() {
            coll.add(next.immediate_send_with_tag(scope, x, i as i32));
        }
        for (i, y) in inb.iter_mut().enumerate() {
            coll.add(prev.immediate_receive_into_with_tag(scope, y, i as i32));
        }
        let mut done = Vec::new();
        coll.wait_all(&mut done);
        assert_eq!(done.len(), 32);
        assert_eq!(coll.incomplete(), 0);
        for (i, st, data) in done {
            if i >= 16 {
                // A receive: its data is what arrived, from the previous rank.
                assert_eq!(st.source_rank(), (rank + size - 1) % size);
                assert_eq!(data[1] as usize, i - 16);
            }
        }
    });
    for (i, y) in inb.iter().enumerate() {
        assert_eq!(*y, [((rank + size - 1) % size) as u32, i as u32]);
    }
    // A collection mixing a receive, nonblocking reduction and scan, and a
    // send: each reported once, with its index and data.
    let (mine, mut from_prev, mut sum, mut upto) = (rank, -1i32, 0i32, 0i32);
    mpi::request::multiple_scope(4, |scope, coll| {
        let r = coll.add(prev.immediate_receive_into_with_tag(scope, &mut from_prev, 50));
        let a = coll.add(world.immediate_all_reduce_into(
            scope,
            &mine,
            &mut sum,
            SystemOperation::sum(),
        ));
        let b =
            coll.add(world.immediate_scan_into(scope, &mine, &mut upto, SystemOperation::sum()));
        assert_eq!((r, a, b), (0, 1, 2));
        assert_eq!(coll.len(), 3);
        let first = coll.test_any().map(|(i, _, _)| i);
        let mut seen: Vec<usize> = first.into_iter().collect();
        coll.add(next.immediate_send_with_tag(scope, &mine, 50));
        while let Some((i, st, d)) = coll.wait_any() {
            if i == r {
                assert_eq!(
                    (*d, st.source_rank()),
                    ((rank + size - 1) % size, (rank + size - 1) % size)
                );
            }
            if i == a {
                assert_eq!(*d, size * (size - 1) / 2);
            }
            if i == b {
                assert_eq!(*d, rank * (rank + 1) / 2);
            }
            seen.push(i);
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3]);
        assert_eq!(coll.incomplete(), 0);
        let mut rest = Vec::new();
        assert!(coll.test_all(&mut rest));
        assert!(rest.is_empty());
    });
    // A future dropped before any message matched is cancelled, not
    // waited for; one with a message gives it, in the order sent.
    drop(world.any_process().immediate_receive_with_tag::<u64>(99));
    #[derive(Equivalence, PartialEq, Debug)]
    struct Triple([u16; 3]);
    let f = world.this_process().immediate_receive_with_tag::<Triple>(5);
    world.this_process().send_with_tag(&[1u16, 2, 3], 5);
    let (v, st) = f.get();
    assert_eq!(
        (v, st.tag(), st.source_rank()),
        (Triple([1, 2, 3]), 5, rank)
    );
    // test() hands the request back until it is done.
    let x = 7u64;
    let mut y = 0u64;
    mpi::request::scope(|scope| {
        let mut r = world.this_process().immediate_receive_into(scope, &mut y);
        r = match r.test() {
            Ok(_) => panic!("nothing was sent yet"),
            Err(r) => r,
        };
        world.this_process().send(&x);
        loop {
            match r.test() {
                Ok(st) => {
                    assert_eq!(st.count(u64::equivalent_datatype()), 1);
                    break;
                }
                Err(back) => r = back,
            }
        }
    });
    assert_eq!(y, 7);
}

fn collections_carry_their_data() {
    rank_tests::assert_ran(&rank_tests::launch("collection", 3, &[]), "collection");
}

/// rsmpi's derive, through `mpi::traits` only, on a struct without
/// `#[repr(C)]`.
#[derive(mpi::traits::Equivalence, Clone, Copy, Debug, PartialEq, Default)]
struct Particle {
    pos: [f64; 3],
    id: u32,
    charge: f32,
}

fn derived_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let me = Particle {
        pos: [rank as f64; 3],
        id: rank as u32,
        charge: -1.5,
    };
    let mut all = vec![Particle::default(); size as usize];
    world.all_gather_into(&me, &mut all[..]);
    for (r, p) in all.iter().enumerate() {
        assert_eq!(
            *p,
            Particle {
                pos: [r as f64; 3],
                id: r as u32,
                charge: -1.5
            }
        );
    }
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    let (got, _) = mpi::point_to_point::send_receive::<Particle, _, _, _>(&me, &next, &prev);
    assert_eq!(got.id as i32, (rank + size - 1) % size);
    // The datatype is a struct of the fields, 32 bytes of data.
    assert_eq!(world.pack_size(1, &Particle::equivalent_datatype()), 32);
}

fn derived_structs_travel() {
    rank_tests::assert_ran(&rank_tests::launch("derived", 3, &[]), "derived");
}

/// A struct with padding and a `bool`, not `Copy`: its data are packed.
#[derive(mpi::traits::Equivalence, Debug, PartialEq, Default, Clone)]
struct Padded {
    flag: bool,
    x: f64,
    tag: (u8, u16),
}

fn padded(r: i32) -> Padded {
    Padded {
        flag: r % 2 == 0,
        x: f64::from(r) + 0.5,
        tag: (r as u8, 300 + r as u16),
    }
}

fn packed_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    // 1 + 8 + 1 + 2 bytes of data in a 24-byte struct.
    assert_eq!(world.pack_size(1, &Padded::equivalent_datatype()), 12);

    // Point to point: one value, a vector, a future, a matched receive.
    let (got, st) =
        mpi::point_to_point::send_receive::<Padded, _, _, _>(&padded(rank), &next, &prev);
    assert_eq!(
        (got, st.count(Padded::equivalent_datatype())),
        (padded(prev.rank()), 1)
    );
    let mine: Vec<Padded> = (0..3).map(|i| padded(rank * 10 + i)).collect();
    next.send_with_tag(&mine[..], 7);
    let (v, _) = prev.receive_vec_with_tag::<Padded>(7);
    assert_eq!(
        v,
        (0..3)
            .map(|i| padded(prev.rank() * 10 + i))
            .collect::<Vec<_>>()
    );
    let f = world.this_process().immediate_receive_with_tag::<Padded>(8);
    world.this_process().send_with_tag(&padded(rank), 8);
    assert_eq!(f.get().0, padded(rank));
    let mut into = vec![Padded::default(); 3];
    next.send_with_tag(&mine[..], 9);
    let st = prev.receive_into_with_tag(&mut into[..], 9);
    assert_eq!(
        (into[2].clone(), st.count(Padded::equivalent_datatype())),
        (padded(prev.rank() * 10 + 2), 3)
    );

    // Collectives: gather at the root, broadcast from it.
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut all = vec![Padded::default(); size as usize];
        root.gather_into_root(&padded(rank), &mut all[..]);
        assert_eq!(all, (0..size).map(padded).collect::<Vec<_>>());
    } else {
        root.gather_into(&padded(rank));
    }
    let mut b = if rank == 0 {
        padded(42)
    } else {
        Padded::default()
    };
    root.broadcast_into(&mut b);
    assert_eq!(b, padded(42));

    // A strided view: every other element of 8, packed into 4.
    let every_other = mpi::datatype::UserDatatype::vector(4, 1, 2, &i32::equivalent_datatype());
    let src: Vec<i32> = (0..8).map(|i| rank * 100 + i).collect();
    let mut dst = [-1i32; 4];
    {
        // SAFETY: one vector element reaches i32s 0..7 of the 8 in `src`.
        let v = unsafe { mpi::datatype::View::with_count_and_datatype(&src[..], 1, &every_other) };
        mpi::point_to_point::send_receive_into(&v, &next, &mut dst[..], &prev);
    }
    let p = prev.rank() * 100;
    assert_eq!(dst, [p, p + 2, p + 4, p + 6]);
}

fn packed_data_travel() {
    rank_tests::assert_ran(&rank_tests::launch("packed", 3, &[]), "packed");
}

fn nonblocking_packed_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let v = padded(1);
    mpi::request::scope(|scope| {
        // Needs packing: refused with a message, the job ends.
        let _r = world.this_process().immediate_send(scope, &v);
        println!("unreachable: the send started");
    });
}

fn nonblocking_operations_refuse_data_that_need_packing() {
    let report = rank_tests::launch("nonblocking_packed", 1, &[]);
    assert!(!report.success(), "{}", rank_tests::describe(&report));
    let err = String::from_utf8_lossy(&report.ranks[0].stderr);
    let out = String::from_utf8_lossy(&report.ranks[0].stdout);
    assert!(
        err.contains("packs a buffer whose datatype has gaps") && !out.contains("unreachable"),
        "{}",
        rank_tests::describe(&report)
    );
}

/// A C-style reduction function: the element-wise maximum of `u64`s,
/// checking the datatype it is handed.
unsafe extern "C" fn c_max(
    invec: *mut std::ffi::c_void,
    inoutvec: *mut std::ffi::c_void,
    len: *mut std::ffi::c_int,
    datatype: *mut mpi::ffi::MPI_Datatype,
) {
    // SAFETY: hmpi-mpi hands `*len` aligned `u64`s in each vector and a
    // handle to their datatype.
    unsafe {
        assert_eq!(mpi::ffi::datatype_of(*datatype).size(), 8);
        let x = std::slice::from_raw_parts(invec as *const u64, *len as usize);
        let y = std::slice::from_raw_parts_mut(inoutvec as *mut u64, *len as usize);
        for (a, b) in x.iter().zip(y) {
            *b = (*b).max(*a);
        }
    }
}

fn c_operation_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank() as u64, world.size() as u64);
    // SAFETY: `c_max` reads and writes `*len` u64s, what it is used on.
    let op = unsafe { mpi::collective::UnsafeUserOperation::commutative(c_max) };
    let mut m = [0u64; 2];
    world.all_reduce_into(&[rank, 100 - rank][..], &mut m[..], &op);
    assert_eq!(m, [size - 1, 100]);
    let mut n = [0u64; 2];
    let x = [rank * 2, 7];
    mpi::request::scope(|scope| {
        world
            .immediate_all_reduce_into(scope, &x[..], &mut n[..], &op)
            .wait();
    });
    assert_eq!(n, [2 * (size - 1), 7]);
}

fn c_operations_reduce() {
    rank_tests::assert_ran(&rank_tests::launch("c_operation", 3, &[]), "c_operation");
}

fn communicators_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let dup = world.duplicate();
    assert_eq!(world.compare(&world), CommunicatorRelation::Identical);
    assert_eq!(world.compare(&dup), CommunicatorRelation::Congruent);
    let rev = world
        .split_by_color_with_key(Color::with_value(0), -world.rank())
        .unwrap();
    let expect = if world.size() > 1 {
        CommunicatorRelation::Similar
    } else {
        CommunicatorRelation::Congruent
    };
    assert_eq!(world.compare(&rev), expect);
    let half = world
        .split_by_color(Color::with_value(world.rank() % 2))
        .unwrap();
    assert_eq!(world.compare(&half), CommunicatorRelation::Unequal);
    // A subgroup communicator: created by its members only.
    let evens: Vec<i32> = (0..world.size()).step_by(2).collect();
    let g = world.group().include(&evens);
    let sub = world.split_by_subgroup(&g);
    assert_eq!(sub.is_some(), world.rank() % 2 == 0);
    if let Some(c) = sub {
        assert_eq!(c.size(), evens.len() as i32);
        assert_eq!(c.rank(), world.rank() / 2);
        c.barrier();
    }
    // Packing round trip, with an offset.
    let v = [1.5f64, -2.0, 4.25];
    let mut buf = vec![0u8; 8 + world.pack_size(3, &f64::equivalent_datatype()) as usize];
    let end = world.pack_into(&v[..], &mut buf, 8);
    assert_eq!(end as usize, buf.len());
    let mut back = [0f64; 3];
    // SAFETY: the buffer holds three packed f64s from position 8.
    let at = unsafe { world.unpack_into(&buf, &mut back[..], 8) };
    assert_eq!((back, at), (v, end));
    world.barrier();
}

fn communicators_compare_split_and_pack() {
    rank_tests::assert_ran(
        &rank_tests::launch("communicators", 4, &[]),
        "communicators",
    );
}

fn buffered_rank() {
    let mut universe = mpi::initialize().unwrap();
    assert_eq!(universe.buffer_size(), 0);
    // Room for two messages of 64 u32s and their overhead.
    universe.set_buffer_size(2 * (256 + 512));
    assert_eq!(universe.buffer_size(), 2 * (256 + 512));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    // Every rank sends before any receives: buffered sends return at once.
    let out: Vec<u32> = (0..64).map(|i| rank as u32 * 100 + i).collect();
    next.buffered_send_with_tag(&out[..], 3);
    let mut got = vec![0u32; 64];
    mpi::request::scope(|scope| {
        // Complete when it starts: wait_any finds it first.
        let mut reqs = vec![
            prev.immediate_receive_into_with_tag(scope, &mut got[..], 4),
            next.immediate_buffered_send_with_tag(scope, &out[..], 4),
        ];
        let (i, _) = mpi::request::wait_any(&mut reqs).unwrap();
        assert_eq!(i, 1);
        reqs.pop().unwrap().wait();
    });
    let from = (rank + size - 1) % size;
    let expect: Vec<u32> = (0..64).map(|i| from as u32 * 100 + i).collect();
    assert_eq!(got, expect);
    let (first, st) = prev.receive_vec_with_tag::<u32>(3);
    assert_eq!((first, st.source_rank()), (expect, from));
    // Detaching waits for the messages to go; then another buffer.
    universe.detach_buffer();
    assert_eq!(universe.buffer_size(), 0);
    universe.set_buffer_size(100);
    world.barrier();
    if rank == 0 {
        // More than the buffer holds: MPI_ERR_BUFFER, fatal.
        world.this_process().buffered_send(&[0u8; 1000][..]);
        println!("unreachable: the buffered send returned");
    }
    world.barrier();
}

fn buffered_sends_return_at_once_within_the_buffer() {
    let report = rank_tests::launch("buffered", 3, &[]);
    assert!(!report.success(), "{}", rank_tests::describe(&report));
    let r0 = &report.ranks[0];
    let err = String::from_utf8_lossy(&r0.stderr);
    let out = String::from_utf8_lossy(&r0.stdout);
    // No rank failed an assertion before: rank 0 got as far as the
    // oversized send, which aborted the job.
    for r in &report.ranks {
        assert!(
            !String::from_utf8_lossy(&r.stderr).contains("panicked"),
            "{}",
            rank_tests::describe(&report)
        );
    }
    assert!(
        err.contains("MPI error: invalid buffer"),
        "{}",
        rank_tests::describe(&report)
    );
    assert!(
        !out.contains("unreachable"),
        "{}",
        rank_tests::describe(&report)
    );
}

fn varcount_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    // Rank r sends j + 1 values r * 10 + j to rank j.
    let send_counts: Vec<i32> = (0..size).map(|j| j + 1).collect();
    let send_displs: Vec<i32> = (0..size).map(|j| j * (j + 1) / 2).collect();
    let out: Vec<i32> = (0..size)
        .flat_map(|j| std::iter::repeat_n(rank * 10 + j, (j + 1) as usize))
        .collect();
    let recv_counts = vec![rank + 1; size as usize];
    let recv_displs: Vec<i32> = (0..size).map(|i| i * (rank + 1)).collect();
    let mut got = vec![-1i32; (size * (rank + 1)) as usize];
    {
        let send = mpi::datatype::Partition::new(&out[..], send_counts, &send_displs[..]);
        let mut recv =
            mpi::datatype::PartitionMut::new(&mut got[..], recv_counts, &recv_displs[..]);
        mpi::request::scope(|scope| {
            world
                .immediate_all_to_all_varcount_into(scope, &send, &mut recv)
                .wait();
        });
    }
    for i in 0..size {
        for k in 0..=rank {
            assert_eq!(got[(i * (rank + 1) + k) as usize], i * 10 + rank);
        }
    }
}

fn immediate_all_to_all_varcount_delivers() {
    rank_tests::assert_ran(&rank_tests::launch("varcount", 3, &[]), "varcount");
}

/// Drops of [`Counted`] values (the test compares their fields, never
/// makes temporary ones).
static DROPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An attribute cloned into duplicates, counting its drops.
#[derive(Clone, Debug, PartialEq)]
struct Counted(u32);

impl Drop for Counted {
    fn drop(&mut self) {
        // Relaxed: a counter read on the same thread.
        DROPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl mpi::attribute::CommAttribute for Counted {
    const CLONE_ON_DUP: bool = true;
}

/// An attribute not carried into duplicates.
#[derive(Clone, Debug, PartialEq)]
struct Local(&'static str);

impl mpi::attribute::CommAttribute for Local {}

fn drops() -> usize {
    // Relaxed: see `Counted::drop`.
    DROPS.load(std::sync::atomic::Ordering::Relaxed)
}

fn attributes_rank() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let mut comm = world.duplicate();
    assert!(comm.get_attr::<Counted>().is_none());
    comm.set_attr(Counted(1));
    comm.set_attr(Local("here"));
    // Another handle's reference outlives a replacement through this one:
    // the replaced value is kept until the communicator goes.
    let other = universe.world();
    let mut w = universe.world();
    w.set_attr(Counted(7));
    let seen = other.get_attr::<Counted>().unwrap();
    w.set_attr(Counted(8));
    assert_eq!(seen.0, 7);
    assert_eq!(other.get_attr::<Counted>().map(|c| c.0), Some(8));
    assert_eq!(drops(), 0);
    // A duplicate gets a clone of Counted, not Local.
    let dup = comm.duplicate();
    assert_eq!(dup.get_attr::<Counted>().map(|c| c.0), Some(1));
    assert_eq!(dup.get_attr::<Local>(), None);
    assert_eq!(comm.get_attr::<Local>(), Some(&Local("here")));
    drop(dup);
    assert_eq!(drops(), 1);
    // Replaced, then the communicator dropped: both values go.
    comm.set_attr(Counted(2));
    assert_eq!(comm.get_attr::<Counted>().map(|c| c.0), Some(2));
    assert_eq!(drops(), 1);
    drop(comm);
    assert_eq!(drops(), 3);
    // Through `dyn Communicator`.
    let mut c = world
        .split_by_color(mpi::topology::Color::with_value(0))
        .unwrap();
    let d: &mut dyn Communicator = &mut c;
    d.set_attr(Local("dyn"));
    assert_eq!(d.get_attr::<Local>(), Some(&Local("dyn")));
    world.barrier();
}

fn attributes_are_kept_cloned_and_dropped() {
    rank_tests::assert_ran(&rank_tests::launch("attributes", 2, &[]), "attributes");
}

fn main() {
    let roles: &[(&str, fn())] = &[
        ("errors", errors_abort_rank),
        ("reductions", reductions_rank),
        ("collection", collection_rank),
        ("communicators", communicators_rank),
        ("derived", derived_rank),
        ("buffered", buffered_rank),
        ("varcount", varcount_rank),
        ("attributes", attributes_rank),
        ("packed", packed_rank),
        ("nonblocking_packed", nonblocking_packed_rank),
        ("c_operation", c_operation_rank),
    ];
    rank_tests::main(
        |role| roles.iter().find(|(n, _)| *n == role).map(|(_, f)| f()),
        &[
            (
                "errors_abort_with_the_mpi_text",
                errors_abort_with_the_mpi_text,
            ),
            (
                "reductions_run_on_three_ranks",
                reductions_run_on_three_ranks,
            ),
            ("collections_carry_their_data", collections_carry_their_data),
            (
                "communicators_compare_split_and_pack",
                communicators_compare_split_and_pack,
            ),
            ("derived_structs_travel", derived_structs_travel),
            (
                "buffered_sends_return_at_once_within_the_buffer",
                buffered_sends_return_at_once_within_the_buffer,
            ),
            (
                "immediate_all_to_all_varcount_delivers",
                immediate_all_to_all_varcount_delivers,
            ),
            (
                "attributes_are_kept_cloned_and_dropped",
                attributes_are_kept_cloned_and_dropped,
            ),
            ("packed_data_travel", packed_data_travel),
            (
                "nonblocking_operations_refuse_data_that_need_packing",
                nonblocking_operations_refuse_data_that_need_packing,
            ),
            ("c_operations_reduce", c_operations_reduce),
        ],
    );
}
