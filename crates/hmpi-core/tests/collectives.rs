//! The typed collectives across real ranks (1 to 7, more ranks than
//! cores), on the world, a duplicate and a split communicator: every
//! collective with several element types (one a derived struct), every
//! root, counts from 0 to 1 MiB, against a serial computation.

#![allow(clippy::needless_range_loop)] // index loops mirror the serial definitions

use hmpi_core::datatype::Equivalence;
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

#[derive(Clone, Copy, Debug, Default, PartialEq, Equivalence)]
#[equivalence(crate = "hmpi_core")]
#[repr(C)]
struct Pair {
    a: i32,
    b: f32,
}

/// An affine map x -> m x + c (wrapping): composition is associative and
/// not commutative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Equivalence)]
#[equivalence(crate = "hmpi_core")]
#[repr(C)]
struct Affine {
    m: u64,
    c: u64,
}

impl Affine {
    /// `self` after `inner`: x -> self(inner(x)).
    fn after(self, inner: Affine) -> Affine {
        Affine {
            m: self.m.wrapping_mul(inner.m),
            c: self.m.wrapping_mul(inner.c).wrapping_add(self.c),
        }
    }
}

/// Element `i` of rank `r`'s contribution (exact in f64 sums).
fn v(r: usize, i: usize) -> f64 {
    ((r * 131 + i * 7) % 97) as f64 + r as f64 * 0.5
}

const COUNTS: &[usize] = &[0, 1, 7, 1000, 1 << 17];

fn check_comm(c: &SimpleCommunicator) {
    let (me, n) = (c.rank() as usize, c.size() as usize);
    for &count in COUNTS {
        let mine: Vec<f64> = (0..count).map(|i| v(me, i)).collect();
        // allreduce: sum in rank order, max, min
        let mut out = vec![0.0; count];
        c.all_reduce_into(&mine[..], &mut out[..], SystemOperation::sum())
            .unwrap();
        for i in 0..count {
            let mut acc = v(n - 1, i);
            for r in (0..n - 1).rev() {
                acc += v(r, i);
            }
            assert_eq!(out[i], acc, "allreduce sum n={n} count={count} i={i}");
        }
        c.all_reduce_into(&mine[..], &mut out[..], SystemOperation::max())
            .unwrap();
        assert!((0..count).all(|i| out[i] == (0..n).map(|r| v(r, i)).fold(f64::MIN, f64::max)));
        // integer ops
        let ints: Vec<i64> = (0..count).map(|i| (me * 3 + i) as i64).collect();
        let mut io = vec![0i64; count];
        c.all_reduce_into(&ints[..], &mut io[..], SystemOperation::bitwise_xor())
            .unwrap();
        assert!((0..count).all(|i| io[i] == (0..n).fold(0i64, |a, r| a ^ (r * 3 + i) as i64)));
        c.all_reduce_into(&ints[..], &mut io[..], SystemOperation::product())
            .unwrap();
        assert!((0..count)
            .all(|i| io[i] == (0..n).fold(1i64, |a, r| a.wrapping_mul((r * 3 + i) as i64))));
        // reduce, bcast, gather, scatter at every root
        for root in 0..n {
            let rp = c.process_at_rank(root as i32);
            if me == root {
                let mut res = vec![0.0; count];
                rp.reduce_into_root(&mine[..], &mut res[..], SystemOperation::min())
                    .unwrap();
                assert!(
                    (0..count).all(|i| res[i] == (0..n).map(|r| v(r, i)).fold(f64::MAX, f64::min))
                );
            } else {
                rp.reduce_into(&mine[..], SystemOperation::min()).unwrap();
            }
            let mut b: Vec<f64> = if me == root {
                mine.clone()
            } else {
                vec![-1.0; count]
            };
            rp.broadcast_into(&mut b[..]).unwrap();
            assert!((0..count).all(|i| b[i] == v(root, i)), "bcast");
            if count <= 1000 {
                if me == root {
                    let mut all = vec![0.0; count * n];
                    rp.gather_into_root(&mine[..], &mut all[..]).unwrap();
                    assert!(
                        (0..n * count).all(|k| all[k] == v(k / count.max(1), k % count.max(1))),
                        "gather"
                    );
                    let src: Vec<f64> = (0..n * count).map(|k| k as f64).collect();
                    let mut piece = vec![0.0; count];
                    rp.scatter_into_root(&src[..], &mut piece[..]).unwrap();
                    assert!((0..count).all(|i| piece[i] == (me * count + i) as f64));
                } else {
                    rp.gather_into(&mine[..]).unwrap();
                    let mut piece = vec![0.0; count];
                    rp.scatter_into(&mut piece[..]).unwrap();
                    assert!(
                        (0..count).all(|i| piece[i] == (me * count + i) as f64),
                        "scatter"
                    );
                }
            }
        }
        if count <= 1000 {
            // allgather, alltoall
            let mut all = vec![0.0; count * n];
            c.all_gather_into(&mine[..], &mut all[..]).unwrap();
            assert!(
                (0..n * count).all(|k| all[k] == v(k / count.max(1), k % count.max(1))),
                "allgather"
            );
            let src: Vec<f64> = (0..n * count).map(|k| (me * 100_000 + k) as f64).collect();
            let mut dst = vec![0.0; n * count];
            c.all_to_all_into(&src[..], &mut dst[..]).unwrap();
            for s in 0..n {
                for i in 0..count {
                    assert_eq!(
                        dst[s * count + i],
                        (s * 100_000 + me * count + i) as f64,
                        "alltoall"
                    );
                }
            }
            // reduce_scatter_block, scan, exscan
            let big: Vec<f64> = (0..n * count).map(|k| v(me, k)).collect();
            let mut blk = vec![0.0; count];
            c.reduce_scatter_block_into(&big[..], &mut blk[..], SystemOperation::sum())
                .unwrap();
            for i in 0..count {
                let k = me * count + i;
                let mut acc = v(n - 1, k);
                for r in (0..n - 1).rev() {
                    acc += v(r, k);
                }
                assert_eq!(blk[i], acc, "reduce_scatter_block");
            }
            let mut sc = vec![0.0; count];
            c.scan_into(&mine[..], &mut sc[..], SystemOperation::sum())
                .unwrap();
            for i in 0..count {
                let mut acc = v(me, i);
                for r in (0..me).rev() {
                    acc += v(r, i);
                }
                assert_eq!(sc[i], acc, "scan");
            }
            let mut ex = vec![-7.0; count];
            c.exclusive_scan_into(&mine[..], &mut ex[..], SystemOperation::sum())
                .unwrap();
            for i in 0..count {
                if me == 0 {
                    assert_eq!(ex[i], -7.0, "exscan leaves rank 0's buffer");
                } else {
                    let mut acc = v(me - 1, i);
                    for r in (0..me - 1).rev() {
                        acc += v(r, i);
                    }
                    assert_eq!(ex[i], acc, "exscan");
                }
            }
        }
    }
    // Variable counts: rank r contributes r + 1 elements.
    let mine: Vec<i32> = (0..=me).map(|i| (me * 10 + i) as i32).collect();
    let counts: Vec<i32> = (0..n).map(|r| r as i32 + 1).collect();
    let displs: Vec<i32> = (0..n).map(|r| (r * (r + 1) / 2) as i32).collect();
    let total = n * (n + 1) / 2;
    let expect: Vec<i32> = (0..n)
        .flat_map(|r| (0..=r).map(move |i| (r * 10 + i) as i32))
        .collect();
    let mut all = vec![0i32; total];
    c.all_gather_varcount_into(
        &mine[..],
        &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
    )
    .unwrap();
    assert_eq!(all, expect, "allgatherv");
    for root in 0..n {
        let rp = c.process_at_rank(root as i32);
        if me == root {
            let mut all = vec![0i32; total];
            rp.gather_varcount_into_root(
                &mine[..],
                &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]),
            )
            .unwrap();
            assert_eq!(all, expect, "gatherv");
            let mut piece = vec![0i32; me + 1];
            rp.scatter_varcount_into_root(
                &Partition::new(&expect[..], &counts[..], &displs[..]),
                &mut piece[..],
            )
            .unwrap();
            assert_eq!(piece, mine, "scatterv root");
        } else {
            rp.gather_varcount_into(&mine[..]).unwrap();
            let mut piece = vec![0i32; me + 1];
            rp.scatter_varcount_into(&mut piece[..]).unwrap();
            assert_eq!(piece, mine, "scatterv");
        }
    }
    // A derived struct type through the collectives.
    let p = Pair {
        a: me as i32,
        b: me as f32 * 0.25,
    };
    let mut ps = vec![Pair::default(); n];
    c.all_gather_into(&p, &mut ps[..]).unwrap();
    assert!(ps.iter().enumerate().all(|(r, q)| *q
        == Pair {
            a: r as i32,
            b: r as f32 * 0.25
        }));
    assert_eq!(Pair::equivalent_datatype().size(), 8);
    // Errors, not panics, and nothing left half done.
    let mut small = [0.0f64; 1];
    assert!(c
        .all_reduce_into(&[1.0f64, 2.0][..], &mut small[..], SystemOperation::sum())
        .is_err());
    let mut x = 0.0f64;
    assert!(c
        .all_reduce_into(&1.0f64, &mut x, SystemOperation::bitwise_and())
        .is_err());
    assert!(matches!(
        c.process_at_rank(n as i32).broadcast_into(&mut x),
        Err(Error::Root { .. })
    ));
    c.barrier().unwrap();
}

fn typed_rank(u: Universe) {
    let world = u.world();
    check_comm(&world);
    let dup = world.duplicate().unwrap();
    check_comm(&dup);
    let half = world
        .split(Some(world.rank() as u32 % 2), -world.rank())
        .unwrap()
        .unwrap();
    check_comm(&half);
    // Collectives on different communicators interleaved.
    let mut a = 0u64;
    let mut b = 0u64;
    dup.all_reduce_into(&1u64, &mut a, SystemOperation::sum())
        .unwrap();
    half.all_reduce_into(&1u64, &mut b, SystemOperation::sum())
        .unwrap();
    assert_eq!((a, b), (world.size() as u64, half.size() as u64));
}

/// Nonblocking collectives in a scope: overlapped with each other and with
/// point-to-point traffic on the same communicator, completed in another
/// order than started, one left to the scope's end.
fn immediate_rank(u: Universe) {
    use hmpi_core::collective::{ImmediateCollectives, ImmediateRoot};
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    for round in 0..20usize {
        let count = if round % 2 == 0 { 5 } else { 40_000 };
        let mine: Vec<f64> = (0..count).map(|i| v(me, i + round)).collect();
        let mut sum = vec![0.0; count];
        let mut b = vec![0u64; 50];
        let root = round % n;
        if me == root {
            b.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (round * 1000 + i) as u64);
        }
        let mut all = vec![0u32; n];
        let mut red = vec![0.0; count];
        let me32 = me as u32;
        request::scope(|scope| {
            let r1 = world
                .immediate_all_reduce_into(scope, &mine[..], &mut sum[..], SystemOperation::sum())
                .unwrap();
            let r2 = world
                .process_at_rank(root as i32)
                .immediate_broadcast_into(scope, &mut b[..])
                .unwrap();
            let r3 = world.immediate_barrier(scope).unwrap();
            let r4 = world
                .immediate_all_gather_into(scope, &me32, &mut all[..])
                .unwrap();
            let rp = world.process_at_rank(root as i32);
            let r5 = if me == root {
                rp.immediate_reduce_into_root(
                    scope,
                    &mine[..],
                    &mut red[..],
                    SystemOperation::max(),
                )
                .unwrap()
            } else {
                rp.immediate_reduce_into(scope, &mine[..], SystemOperation::max())
                    .unwrap()
            };
            // Point-to-point on the same communicator meanwhile.
            let next = world.process_at_rank(((me + 1) % n) as i32);
            let prev = world.process_at_rank(((me + n - 1) % n) as i32);
            let s = next.immediate_send(scope, &round).unwrap();
            let (got, _) = prev.receive::<usize>().unwrap();
            assert_eq!(got, round);
            s.wait().unwrap();
            r3.wait().unwrap();
            r2.wait().unwrap();
            let mut r4 = r4;
            while r4.test().is_none() {}
            r1.wait().unwrap();
            if round % 3 == 0 {
                std::mem::forget(r5); // the scope's end completes it
            } else {
                r5.wait().unwrap();
            }
        });
        for (i, x) in sum.iter().enumerate() {
            let mut acc = v(n - 1, i + round);
            for r in (0..n - 1).rev() {
                acc += v(r, i + round);
            }
            assert_eq!(*x, acc, "immediate allreduce");
        }
        assert!(b
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (round * 1000 + i) as u64));
        assert_eq!(all, (0..n as u32).collect::<Vec<_>>());
        if me == root {
            assert!((0..count)
                .all(|i| red[i] == (0..n).map(|r| v(r, i + round)).fold(f64::MIN, f64::max)));
        }
    }
}

/// The nonblocking gathers, scatters and variable-count collectives in a
/// scope, several in flight at once, completed in reverse order or left
/// to the scope's end, at every root, on the world and a split
/// communicator.
fn immediate_pieces_rank(u: Universe) {
    use hmpi_core::collective::{ImmediateCollectives, ImmediateRoot};
    let world = u.world();
    let half = world
        .split(Some(world.rank() as u32 % 2), world.rank())
        .unwrap()
        .unwrap();
    for c in [&world, &half] {
        let (me, n) = (c.rank() as usize, c.size() as usize);
        // Rank r's piece has r + 1 + extra elements; at the receiver the
        // pieces lie in reverse rank order with a gap of one element.
        for extra in [0usize, 200] {
            let len = |r: usize| r + 1 + extra;
            let mut displs = vec![0i32; n];
            let mut total = 0usize;
            for r in (0..n).rev() {
                displs[r] = total as i32;
                total += len(r) + 1;
            }
            let counts: Vec<i32> = (0..n).map(|r| len(r) as i32).collect();
            let elem = |r: usize, i: usize| (r * 10_000 + i) as u64;
            let mine: Vec<u64> = (0..len(me)).map(|i| elem(me, i)).collect();
            let even: Vec<u64> = (0..extra + 1).map(|i| elem(me, i)).collect();
            for root in 0..n {
                let rp = c.process_at_rank(root as i32);
                let at_root = me == root;
                let mut gathered = vec![0u64; n * (extra + 1)];
                let mut gathered_v = vec![u64::MAX; total];
                let scatter_src: Vec<u64> = (0..n * (extra + 1)).map(|k| k as u64 * 3).collect();
                let mut scattered = vec![0u64; extra + 1];
                let mut scattered_v = vec![0u64; len(me)];
                let mut everywhere = vec![u64::MAX; total];
                let mut source_v = vec![u64::MAX; total];
                for r in 0..n {
                    for i in 0..len(r) {
                        source_v[displs[r] as usize + i] = elem(r, i) + 7;
                    }
                }
                let mut gv = PartitionMut::new(&mut gathered_v[..], &counts[..], &displs[..]);
                let sv = Partition::new(&source_v[..], &counts[..], &displs[..]);
                let mut ev = PartitionMut::new(&mut everywhere[..], &counts[..], &displs[..]);
                request::scope(|scope| {
                    let mut reqs = Vec::new();
                    if at_root {
                        reqs.push(
                            rp.immediate_gather_into_root(scope, &even[..], &mut gathered[..])
                                .unwrap(),
                        );
                    } else {
                        reqs.push(rp.immediate_gather_into(scope, &even[..]).unwrap());
                    }
                    if at_root {
                        reqs.push(
                            rp.immediate_gather_varcount_into_root(scope, &mine[..], &mut gv)
                                .unwrap(),
                        );
                    } else {
                        reqs.push(rp.immediate_gather_varcount_into(scope, &mine[..]).unwrap());
                    }
                    if at_root {
                        reqs.push(
                            rp.immediate_scatter_into_root(
                                scope,
                                &scatter_src[..],
                                &mut scattered[..],
                            )
                            .unwrap(),
                        );
                    } else {
                        reqs.push(
                            rp.immediate_scatter_into(scope, &mut scattered[..])
                                .unwrap(),
                        );
                    }
                    if at_root {
                        reqs.push(
                            rp.immediate_scatter_varcount_into_root(
                                scope,
                                &sv,
                                &mut scattered_v[..],
                            )
                            .unwrap(),
                        );
                    } else {
                        reqs.push(
                            rp.immediate_scatter_varcount_into(scope, &mut scattered_v[..])
                                .unwrap(),
                        );
                    }
                    reqs.push(
                        c.immediate_all_gather_varcount_into(scope, &mine[..], &mut ev)
                            .unwrap(),
                    );
                    if root % 2 == 0 {
                        while let Some(r) = reqs.pop() {
                            r.wait().unwrap();
                        }
                    } else {
                        std::mem::forget(reqs); // the scope's end completes them
                    }
                });
                if at_root {
                    for r in 0..n {
                        for i in 0..=extra {
                            assert_eq!(gathered[r * (extra + 1) + i], elem(r, i), "igather");
                        }
                        for i in 0..len(r) {
                            assert_eq!(gathered_v[displs[r] as usize + i], elem(r, i), "igatherv");
                        }
                        assert_eq!(gathered_v[displs[r] as usize + len(r)], u64::MAX, "gap");
                    }
                }
                for i in 0..=extra {
                    assert_eq!(
                        scattered[i],
                        ((me * (extra + 1) + i) * 3) as u64,
                        "iscatter"
                    );
                }
                for i in 0..len(me) {
                    assert_eq!(scattered_v[i], elem(me, i) + 7, "iscatterv");
                }
                for r in 0..n {
                    for i in 0..len(r) {
                        assert_eq!(
                            everywhere[displs[r] as usize + i],
                            elem(r, i),
                            "iallgatherv"
                        );
                    }
                }
            }
            // all-to-all with varying counts: member me sends j + 1 + extra
            // elements to member j, from blocks in reverse order.
            let sc: Vec<i32> = (0..n).map(|j| (j + 1 + extra) as i32).collect();
            let mut sd = vec![0i32; n];
            let mut stot = 0;
            for j in (0..n).rev() {
                sd[j] = stot;
                stot += sc[j];
            }
            let rc: Vec<i32> = vec![(me + 1 + extra) as i32; n];
            let rd: Vec<i32> = (0..n).map(|j| j as i32 * rc[0]).collect();
            let mut src = vec![0u64; stot as usize];
            for j in 0..n {
                for i in 0..sc[j] as usize {
                    src[sd[j] as usize + i] = (me * 1_000_000 + j * 1000 + i) as u64;
                }
            }
            let mut dst = vec![0u64; n * rc[0] as usize];
            let s = Partition::new(&src[..], &sc[..], &sd[..]);
            let mut r = PartitionMut::new(&mut dst[..], &rc[..], &rd[..]);
            request::scope(|scope| {
                let q = c
                    .immediate_all_to_all_varcount_into(scope, &s, &mut r)
                    .unwrap();
                let b = c.immediate_barrier(scope).unwrap();
                b.wait().unwrap();
                q.wait().unwrap();
            });
            for k in 0..n {
                for i in 0..rc[0] as usize {
                    assert_eq!(
                        dst[rd[k] as usize + i],
                        (k * 1_000_000 + me * 1000 + i) as u64,
                        "ialltoallv"
                    );
                }
            }
        }
        // The wrong form for this member is an error value, not a hang.
        let rp = c.process_at_rank(0);
        let mut x = [0u8; 1];
        request::scope(|scope| {
            if me == 0 {
                assert!(rp.immediate_scatter_into(scope, &mut x[..]).is_err());
                assert!(rp.immediate_gather_into(scope, &[1u8][..]).is_err());
            } else {
                assert!(rp
                    .immediate_gather_into_root(scope, &[1u8][..], &mut x[..])
                    .is_err());
            }
        });
    }
}

/// Nonblocking collectives on two communicators, waited for in opposite
/// orders on even and odd ranks: waiting for one must keep the other
/// moving (MPI's progress rule), or each rank sleeps until the other
/// moves.
fn cross_waits_rank(u: Universe) {
    use hmpi_core::collective::ImmediateCollectives;
    let world = u.world();
    let dup = world.duplicate().unwrap();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    for round in 0..10usize {
        let count = 20_000 + round;
        let mine: Vec<f64> = (0..count).map(|i| v(me, i + round)).collect();
        let mut sum = vec![0.0; count];
        let src: Vec<u32> = (0..n * count)
            .map(|i| (me * 1_000_000 + i) as u32)
            .collect();
        let mut dst = vec![0u32; n * count];
        request::scope(|scope| {
            let a = world
                .immediate_all_reduce_into(scope, &mine[..], &mut sum[..], SystemOperation::sum())
                .unwrap();
            let b = dup
                .immediate_all_to_all_into(scope, &src[..], &mut dst[..])
                .unwrap();
            if me % 2 == 0 {
                a.wait().unwrap();
                b.wait().unwrap();
            } else {
                b.wait().unwrap();
                a.wait().unwrap();
            }
        });
        for i in 0..count {
            let mut acc = v(n - 1, i + round);
            for r in (0..n - 1).rev() {
                acc += v(r, i + round);
            }
            assert_eq!(sum[i], acc, "allreduce element {i}");
        }
        for k in 0..n {
            for i in 0..count {
                assert_eq!(dst[k * count + i], (k * 1_000_000 + me * count + i) as u32);
            }
        }
    }
}

/// The hierarchical broadcast and allreduce, with the ranks split into
/// pretended domains (`HMPI_COLL_DOMAINS`): every root, in place or not,
/// a non-commutative operation (rank order kept), against the serial
/// computation; the plan is in use afterwards.
fn hier_rank(u: Universe) {
    use hmpi_core::collective::{domains_in_use, Operation, UserOperation};
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let want: usize = std::env::var("HMPI_COLL_DOMAINS").unwrap().parse().unwrap();
    // Affine maps (m, c): x -> m x + c, composed (associative, not
    // commutative): in op inout = in after inout.
    let compose: Operation = UserOperation::typed(false, |x: &[Affine], acc: &mut [Affine]| {
        for (a, x) in acc.iter_mut().zip(x) {
            *a = x.after(*a);
        }
    })
    .into();
    let affine = |r: usize, i: usize| Affine {
        m: (r + 2) as u64,
        c: (r * 10 + i % 10) as u64,
    };
    for &count in &[0usize, 1, 7, 5000, 1 << 16] {
        for root in 0..n {
            let mut b: Vec<u64> = (0..count)
                .map(|i| {
                    if me == root {
                        (root * 7919 + i) as u64
                    } else {
                        0
                    }
                })
                .collect();
            world
                .process_at_rank(root as i32)
                .broadcast_into(&mut b[..])
                .unwrap();
            assert!(b
                .iter()
                .enumerate()
                .all(|(i, &x)| x == (root * 7919 + i) as u64));
        }
        let mine: Vec<f64> = (0..count).map(|i| v(me, i)).collect();
        let mut sum = vec![0.0; count];
        world
            .all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
            .unwrap();
        let maps: Vec<Affine> = (0..count).map(|i| affine(me, i)).collect();
        let mut h = vec![Affine::default(); count];
        world
            .all_reduce_into(&maps[..], &mut h[..], compose.clone())
            .unwrap();
        for i in 0..count {
            // MPI's order: x_0 op (x_1 op (… op x_{n-1})).
            let mut acc = affine(n - 1, i);
            for r in (0..n - 1).rev() {
                acc = affine(r, i).after(acc);
            }
            assert_eq!(
                h[i], acc,
                "non-commutative allreduce, count {count} element {i}"
            );
            let mut s = v(n - 1, i);
            for r in (0..n - 1).rev() {
                s += v(r, i);
            }
            assert_eq!(sum[i], s, "allreduce sum");
        }
    }
    let expect = if want.min(n) >= 2 && want.min(n) < n {
        Some(want.min(n))
    } else {
        None
    };
    assert_eq!(
        domains_in_use(&world),
        expect,
        "the plan of {n} ranks in {want} domains"
    );
}

/// A nonblocking collective moves on while its rank blocks in a
/// point-to-point receive that depends on it: rank 1 starts a broadcast
/// before the root has published (so it is left in flight), then waits
/// for a message the root sends only once its broadcast is complete —
/// which needs rank 1 to have read the root's buffer.
fn progress_rank(u: Universe) {
    use hmpi_core::collective::ImmediateRoot;
    let world = u.world();
    let me = world.rank();
    let mut big = vec![0u8; 1 << 20];
    // The communicator's collective state is set up (a collective itself)
    // before the test proper.
    world.barrier().unwrap();
    if me == 0 {
        big.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i % 251) as u8);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    request::scope(|scope| {
        let r = world
            .process_at_rank(0)
            .immediate_broadcast_into(scope, &mut big[..])
            .unwrap();
        if me == 0 {
            r.wait().unwrap();
            world.process_at_rank(1).send(&7u32).unwrap();
        } else {
            let (x, _) = world.process_at_rank(0).receive::<u32>().unwrap();
            assert_eq!(x, 7);
            r.wait().unwrap();
        }
    });
    assert!(big.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
}

/// The same inputs give the same bits in every run and on every rank.
fn determinism_rank(u: Universe) {
    let world = u.world();
    let me = world.rank() as usize;
    let xs: Vec<f64> = (0..5000)
        .map(|i| 1.0 / ((me * 5000 + i + 1) as f64))
        .collect();
    let mut sum = vec![0.0f64; 5000];
    world
        .all_reduce_into(&xs[..], &mut sum[..], SystemOperation::sum())
        .unwrap();
    let mut all = vec![0.0f64; 5000 * world.size() as usize];
    world.all_gather_into(&sum[..], &mut all[..]).unwrap();
    for chunk in all.chunks(5000) {
        assert!(
            chunk
                .iter()
                .zip(&sum)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "same bits everywhere"
        );
    }
    let h = sum.iter().fold(0u64, |h, x| h.rotate_left(7) ^ x.to_bits());
    println!("digest {h:016x}");
}

/// A communicator's first collective is nonblocking, and rank 0 blocks
/// in a receive that needs the others to get past that collective's
/// start: the collective may not wait for rank 0 to arrive.
fn first_nonblocking_rank(u: Universe) {
    let world = u.world();
    let dup = world.duplicate().unwrap();
    let me = world.rank();
    let n = world.size();
    let mut got = vec![0i32; n as usize];
    if me == 0 {
        // Only after a message from every other rank does rank 0 start.
        for r in 1..n {
            let (x, _) = world.process_at_rank(r).receive::<i32>().unwrap();
            assert_eq!(x, r);
        }
        request::scope(|sc| {
            let g = dup
                .immediate_all_gather_into(sc, &me, &mut got[..])
                .unwrap();
            g.wait().unwrap();
        });
    } else {
        request::scope(|sc| {
            let g = dup
                .immediate_all_gather_into(sc, &me, &mut got[..])
                .unwrap();
            world.process_at_rank(0).send(&me).unwrap();
            g.wait().unwrap();
        });
    }
    assert_eq!(got, (0..n).collect::<Vec<_>>());
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            match role {
                "typed" => typed_rank(u),
                "determinism" => determinism_rank(u),
                "immediate" => immediate_rank(u),
                "immediate_pieces" => immediate_pieces_rank(u),
                "cross_waits" => cross_waits_rank(u),
                "hier" => hier_rank(u),
                "progress" => progress_rank(u),
                "first_nonblocking" => first_nonblocking_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[
            ("every_collective_on_one_to_seven_ranks", || {
                for n in [1, 2, 3, 4, 7] {
                    let r = rank_tests::launch("typed", n, &[]);
                    rank_tests::assert_ran(&r, "typed");
                }
            }),
            (
                "a_collective_in_flight_moves_on_during_a_blocking_receive",
                || {
                    let r = rank_tests::launch("progress", 2, &[]);
                    rank_tests::assert_ran(&r, "progress");
                },
            ),
            (
                "a_first_nonblocking_collective_does_not_wait_for_rank_0",
                || {
                    for n in [2, 3, 5] {
                        let r = rank_tests::launch("first_nonblocking", n, &[]);
                        rank_tests::assert_ran(&r, "first_nonblocking");
                    }
                },
            ),
            ("immediate_collectives_in_a_scope_with_p2p", || {
                for n in [1, 2, 3, 5] {
                    let r = rank_tests::launch("immediate", n, &[]);
                    rank_tests::assert_ran(&r, "immediate");
                }
            }),
            (
                "hierarchical_bcast_and_allreduce_with_forced_domains",
                || {
                    for (n, k) in [(4, 2), (5, 2), (6, 3), (3, 3)] {
                        let r =
                            rank_tests::launch("hier", n, &[("HMPI_COLL_DOMAINS", k.to_string())]);
                        rank_tests::assert_ran(&r, "hier");
                    }
                },
            ),
            ("waits_on_two_communicators_in_opposite_orders", || {
                for n in [2, 3, 4] {
                    let r = rank_tests::launch("cross_waits", n, &[]);
                    rank_tests::assert_ran(&r, "cross_waits");
                }
            }),
            ("immediate_gathers_scatters_and_varcounts", || {
                for n in [1, 2, 3, 4] {
                    let r = rank_tests::launch("immediate_pieces", n, &[]);
                    rank_tests::assert_ran(&r, "immediate_pieces");
                }
            }),
            (
                "allreduce_results_are_bit_identical_across_ranks_and_runs",
                || {
                    let digest = |n| {
                        let r = rank_tests::launch("determinism", n, &[]);
                        rank_tests::assert_ran(&r, "determinism");
                        let out = String::from_utf8_lossy(&r.ranks[0].stdout).to_string();
                        out.lines()
                            .find(|l| l.starts_with("digest"))
                            .map(str::to_owned)
                            .expect("digest")
                    };
                    for n in [3, 4] {
                        assert_eq!(digest(n), digest(n), "two runs of {n} ranks");
                    }
                },
            ),
        ],
    );
}
