//! The collective engine on bytes, across real ranks: every algorithm at
//! inline and large sizes, buffers in the node heap and outside it,
//! against a serial computation of the expected result.

use hmpi_core::collective::{Coll, Combine};
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use shmheap::ShmHeap;
use std::alloc::{GlobalAlloc, Layout, System};

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Sum of `f64`s.
struct SumF64;
impl Combine for SumF64 {
    fn element_size(&self) -> usize {
        8
    }
    fn apply(&self, input: &[u8], inout: &mut [u8]) {
        for (o, i) in inout.chunks_exact_mut(8).zip(input.chunks_exact(8)) {
            let s = f64::from_ne_bytes(i.try_into().unwrap())
                + f64::from_ne_bytes((&*o).try_into().unwrap());
            o.copy_from_slice(&s.to_ne_bytes());
        }
    }
}

/// A non-commutative operation on `u64` pairs: affine maps composed,
/// `(a, b) ∘ (c, d) = (a·c, a·d + b)` (mod 2^64).
struct Compose;
impl Combine for Compose {
    fn element_size(&self) -> usize {
        16
    }
    fn apply(&self, input: &[u8], inout: &mut [u8]) {
        for (o, i) in inout.chunks_exact_mut(16).zip(input.chunks_exact(16)) {
            let g =
                |s: &[u8], k: usize| u64::from_ne_bytes(s[8 * k..8 * k + 8].try_into().unwrap());
            let (a, b, c, d) = (g(i, 0), g(i, 1), g(o, 0), g(o, 1));
            o[..8].copy_from_slice(&a.wrapping_mul(c).to_ne_bytes());
            o[8..].copy_from_slice(&a.wrapping_mul(d).wrapping_add(b).to_ne_bytes());
        }
    }
}

fn compose(x: (u64, u64), y: (u64, u64)) -> (u64, u64) {
    (
        x.0.wrapping_mul(y.0),
        x.0.wrapping_mul(y.1).wrapping_add(x.1),
    )
}

/// A buffer of `n` bytes in the node heap (`private`: from the system
/// allocator, which the others cannot read).
struct Buf {
    p: *mut u8,
    n: usize,
    private: bool,
}

impl Buf {
    fn new(n: usize, private: bool) -> Buf {
        let l = Layout::from_size_align(n.max(1), 16).unwrap();
        // SAFETY: a non-zero layout.
        let p = unsafe {
            if private {
                System.alloc_zeroed(l)
            } else {
                ALLOC.alloc_zeroed(l)
            }
        };
        assert!(!p.is_null());
        Buf { p, n, private }
    }
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `n` bytes of ours.
        unsafe { std::slice::from_raw_parts_mut(self.p, self.n) }
    }
    fn f64s(&mut self) -> &mut [f64] {
        // SAFETY: 16-aligned, n/8 elements.
        unsafe { std::slice::from_raw_parts_mut(self.p.cast(), self.n / 8) }
    }
    fn u64s(&mut self) -> &mut [u64] {
        // SAFETY: as for f64s.
        unsafe { std::slice::from_raw_parts_mut(self.p.cast(), self.n / 8) }
    }
}

// SAFETY: a `Buf` owns its memory alone; moving it to another thread (a
// collective's future may be polled by any thread) moves that ownership.
unsafe impl Send for Buf {}

impl Drop for Buf {
    fn drop(&mut self) {
        let l = Layout::from_size_align(self.n.max(1), 16).unwrap();
        // SAFETY: allocated with this layout by the same allocator.
        unsafe {
            if self.private {
                System.dealloc(self.p, l)
            } else {
                ALLOC.dealloc(self.p, l)
            }
        }
    }
}

fn val(rank: usize, i: usize) -> f64 {
    // Values whose sum depends on the order of addition.
    ((rank * 7919 + i * 104729) % 1000) as f64 * 1e-3 + (rank as f64) * 1e10
}

const COUNTS: &[usize] = &[0, 1, 3, 124, 125, 1000, 100_003];

fn engine_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let coll: &Coll = world.coll().unwrap().expect("more than one rank");
    for private in [false, true] {
        for &count in COUNTS {
            let len = count * 8;
            // bcast from every root
            for root in 0..n {
                let mut b = Buf::new(len, private);
                if me == root {
                    for (i, x) in b.f64s().iter_mut().enumerate() {
                        *x = val(root, i);
                    }
                }
                // SAFETY: `len` bytes of ours.
                unsafe { coll.bcast(b.p, len, root as u32) }.unwrap();
                assert!(
                    b.f64s().iter().enumerate().all(|(i, &x)| x == val(root, i)),
                    "bcast"
                );
            }
            // allreduce and reduce: rank-order sums, bit for bit
            let expect: Vec<f64> = (0..count)
                .map(|i| {
                    let mut acc = val(n - 1, i);
                    for r in (0..n - 1).rev() {
                        acc += val(r, i);
                    }
                    acc
                })
                .collect();
            let mut s = Buf::new(len, private);
            for (i, x) in s.f64s().iter_mut().enumerate() {
                *x = val(me, i);
            }
            let mut r = Buf::new(len, private);
            // SAFETY: `len` bytes each.
            unsafe { coll.reduce(s.p, r.p, count, &SumF64, None) }.unwrap();
            assert_eq!(r.f64s(), &expect[..], "allreduce {count}");
            // in place
            let mut ip = Buf::new(len, private);
            ip.bytes().copy_from_slice(s.bytes());
            // SAFETY: as above.
            unsafe { coll.reduce(ip.p, ip.p, count, &SumF64, None) }.unwrap();
            assert_eq!(ip.f64s(), &expect[..], "allreduce in place {count}");
            for root in 0..n {
                let mut r = Buf::new(len, private);
                // SAFETY: as above.
                unsafe { coll.reduce(s.p, r.p, count, &SumF64, Some(root as u32)) }.unwrap();
                if me == root {
                    assert_eq!(r.f64s(), &expect[..], "reduce {count} root {root}");
                }
            }
            // scan and exscan
            let mut r = Buf::new(len, private);
            // SAFETY: as above.
            unsafe { coll.scan(s.p, r.p, count, &SumF64, false) }.unwrap();
            for i in 0..count {
                let mut acc = val(me, i);
                for k in (0..me).rev() {
                    acc += val(k, i);
                }
                assert_eq!(r.f64s()[i], acc, "scan");
            }
            if me > 0 {
                // SAFETY: as above.
                unsafe { coll.scan(s.p, r.p, count, &SumF64, true) }.unwrap();
                for i in 0..count {
                    let mut acc = val(me - 1, i);
                    for k in (0..me - 1).rev() {
                        acc += val(k, i);
                    }
                    assert_eq!(r.f64s()[i], acc, "exscan");
                }
            } else {
                // SAFETY: as above.
                unsafe { coll.scan(s.p, r.p, count, &SumF64, true) }.unwrap();
            }
            // gather / allgather / scatter / alltoall of `count` f64 per rank
            let displs: Vec<usize> = (0..n).map(|r| r * len).collect();
            let counts = vec![len; n];
            let mut all = Buf::new(len * n, private);
            for root in 0..n {
                // SAFETY: `all` holds n·len bytes.
                unsafe { coll.gatherv(s.p, len, all.p, &counts, &displs, root as u32) }.unwrap();
                if me == root {
                    for r in 0..n {
                        for i in 0..count {
                            assert_eq!(all.f64s()[r * count + i], val(r, i), "gather");
                        }
                    }
                }
            }
            let mut all = Buf::new(len * n, private);
            // SAFETY: as above.
            unsafe { coll.allgatherv(s.p, len, all.p, &counts, &displs) }.unwrap();
            for r in 0..n {
                for i in 0..count {
                    assert_eq!(all.f64s()[r * count + i], val(r, i), "allgather");
                }
            }
            for root in 0..n {
                let mut src = Buf::new(len * n, private);
                for (i, x) in src.f64s().iter_mut().enumerate() {
                    *x = val(root, i);
                }
                let mut piece = Buf::new(len, private);
                // SAFETY: as above.
                unsafe { coll.scatterv(src.p, &counts, &displs, piece.p, len, root as u32) }
                    .unwrap();
                for i in 0..count {
                    assert_eq!(piece.f64s()[i], val(root, me * count + i), "scatter");
                }
            }
            let mut src = Buf::new(len * n, private);
            for (i, x) in src.f64s().iter_mut().enumerate() {
                *x = val(me, i);
            }
            let mut dst = Buf::new(len * n, private);
            // SAFETY: as above.
            unsafe { coll.alltoallv(src.p, &counts, &displs, dst.p, &counts, &displs) }.unwrap();
            for s in 0..n {
                for i in 0..count {
                    assert_eq!(
                        dst.f64s()[s * count + i],
                        val(s, me * count + i),
                        "alltoall"
                    );
                }
            }
            // reduce-scatter with uneven blocks: rank r gets count + r elements
            let rc: Vec<usize> = (0..n).map(|r| count + r).collect();
            let total: usize = rc.iter().sum();
            let mut rs = Buf::new(total * 8, private);
            for (i, x) in rs.f64s().iter_mut().enumerate() {
                *x = val(me, i);
            }
            let mut out = Buf::new(rc[me] * 8, private);
            // SAFETY: sizes as the counts say.
            unsafe { coll.reduce_scatter(rs.p, out.p, &rc, &SumF64) }.unwrap();
            let lo: usize = rc[..me].iter().sum();
            for i in 0..rc[me] {
                let mut acc = val(n - 1, lo + i);
                for r in (0..n - 1).rev() {
                    acc += val(r, lo + i);
                }
                assert_eq!(out.f64s()[i], acc, "reduce_scatter");
            }
            coll.barrier().unwrap();
        }
        // A non-commutative operation, small and large.
        for count in [1usize, 61, 20_000] {
            let mut s = Buf::new(count * 16, private);
            for (i, x) in s.u64s().chunks_exact_mut(2).enumerate() {
                x[0] = (me * 31 + i) as u64 | 1;
                x[1] = (me * 17 + i * 3) as u64;
            }
            let mut r = Buf::new(count * 16, private);
            // SAFETY: `count` 16-byte elements each.
            unsafe { coll.reduce(s.p, r.p, count, &Compose, None) }.unwrap();
            for i in 0..count {
                let el = |k: usize| ((k * 31 + i) as u64 | 1, (k * 17 + i * 3) as u64);
                let mut acc = el(n - 1);
                for k in (0..n - 1).rev() {
                    acc = compose(el(k), acc);
                }
                assert_eq!(
                    (r.u64s()[2 * i], r.u64s()[2 * i + 1]),
                    acc,
                    "compose {count}"
                );
            }
        }
    }
    // Many barriers in a row keep the members in step.
    for _ in 0..2000 {
        coll.barrier().unwrap();
    }
}

/// Nonblocking collectives started in one order, completed in another,
/// with point-to-point traffic on the same communicator in between.
fn nonblocking_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let coll = world.coll().unwrap().expect("more than one rank");
    for round in 0..50usize {
        let count = if round % 2 == 0 { 10 } else { 50_000 };
        let s: Vec<f64> = (0..count).map(|i| val(me, i + round)).collect();
        let mut r = vec![0.0f64; count];
        let mut b = vec![0u64; 40];
        if me == round % n {
            b.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (round * 1000 + i) as u64);
        }
        // SAFETY: the buffers outlive the operations, which are all
        // finished below.
        let red = unsafe {
            coll.start(coll.ireduce(
                s.as_ptr().cast(),
                r.as_mut_ptr().cast(),
                count,
                &SumF64,
                None,
            ))
        };
        // SAFETY: as above.
        let bc = unsafe { coll.start(coll.ibcast(b.as_mut_ptr().cast(), 320, (round % n) as u32)) };
        // SAFETY: as above.
        let bar = unsafe { coll.start(coll.ibarrier()) };
        // A ring exchange while all three are pending.
        let next = world.process_at_rank(((me + 1) % n) as i32);
        let prev = world.process_at_rank(((me + n - 1) % n) as i32);
        hmpi_core::request::scope(|sc| {
            let req = next.immediate_send(sc, &round).unwrap();
            let (got, _) = prev.receive::<usize>().unwrap();
            assert_eq!(got, round);
            req.wait().unwrap();
        });
        // Test out of order, then finish in reverse, with a blocking
        // collective in between.
        let _ = coll.test(&bar);
        let _ = coll.test(&red);
        if round % 3 == 0 {
            coll.barrier().unwrap();
        }
        coll.wait(&bar).unwrap();
        coll.wait(&bc).unwrap();
        coll.wait(&red).unwrap();
        assert!(coll.test(&red).is_some(), "a finished op stays finished");
        for (i, x) in r.iter().enumerate() {
            let mut acc = val(n - 1, i + round);
            for k in (0..n - 1).rev() {
                acc += val(k, i + round);
            }
            assert_eq!(*x, acc, "ireduce round {round}");
        }
        assert!(
            b.iter()
                .enumerate()
                .all(|(i, &x)| x == (round * 1000 + i) as u64),
            "ibcast"
        );
    }
}

/// Small blocking collectives (the engine's direct path) from every
/// root, through the engine and through the typed API, interleaved with
/// nonblocking ones left in flight across them (so that blocking calls
/// switch between the direct path and the queue behind the collectives in
/// flight): each result against a serial computation in rank order.
fn direct_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let coll = world.coll().unwrap();
    for round in 0..120usize {
        let root = round % n;
        let rp = world.process_at_rank(root as i32);
        // Typed: bcast of 5 u64s, reduce and allreduce of f64s (sum in
        // rank order, so the result shows the order).
        let mut b = [0u64; 5];
        if me == root {
            b.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (round * 100 + i) as u64);
        }
        rp.broadcast_into(&mut b[..]).unwrap();
        assert!(
            b.iter()
                .enumerate()
                .all(|(i, &x)| x == (round * 100 + i) as u64),
            "broadcast_into round {round}"
        );
        let mine = [val(me, round), val(me, round + 1)];
        let serial = |j: usize| {
            let mut acc = val(n - 1, round + j);
            for k in (0..n - 1).rev() {
                acc += val(k, round + j);
            }
            acc
        };
        if me == root {
            let mut out = [0.0f64; 2];
            rp.reduce_into_root(&mine[..], &mut out[..], SystemOperation::sum())
                .unwrap();
            assert_eq!(
                out,
                [serial(0), serial(1)],
                "reduce_into_root round {round}"
            );
        } else {
            rp.reduce_into(&mine[..], SystemOperation::sum()).unwrap();
        }
        let Some(coll) = coll else {
            // One rank: the typed calls above are local copies.
            world.barrier().unwrap();
            continue;
        };
        // A nonblocking allreduce in flight over the next calls, every
        // third round.
        let s: Vec<f64> = (0..3).map(|i| val(me, i + round)).collect();
        let mut r = vec![0.0f64; 3];
        // SAFETY: `s` and `r` outlive the operation, waited for below.
        let pending = (round % 3 == 0).then(|| unsafe {
            coll.start(coll.ireduce(s.as_ptr().cast(), r.as_mut_ptr().cast(), 3, &SumF64, None))
        });
        let mut out = [0.0f64; 2];
        world
            .all_reduce_into(&mine[..], &mut out[..], SystemOperation::sum())
            .unwrap();
        assert_eq!(out, [serial(0), serial(1)], "all_reduce_into round {round}");
        // Engine: a non-commutative allreduce in place.
        let mut m = [me as u64 + 2, (round + me) as u64];
        let p = m.as_mut_ptr().cast::<u8>();
        // SAFETY: 16 bytes of ours, in place.
        unsafe { coll.reduce(p, p, 1, &Compose, None) }.unwrap();
        let mut want = ((n - 1) as u64 + 2, (round + n - 1) as u64);
        for k in (0..n - 1).rev() {
            want = compose((k as u64 + 2, (round + k) as u64), want);
        }
        assert_eq!((m[0], m[1]), want, "allreduce in place round {round}");
        coll.barrier().unwrap();
        if let Some(op) = pending {
            coll.wait(&op).unwrap();
            for (i, x) in r.iter().enumerate() {
                let mut acc = val(n - 1, i + round);
                for k in (0..n - 1).rev() {
                    acc += val(k, i + round);
                }
                assert_eq!(*x, acc, "ireduce round {round}");
            }
        }
    }
}

/// A gather, then a read of what the others keep, then a barrier that
/// keeps it until every reader is done (how the neighbourhood
/// collectives use the engine): one such pair of epochs, as one future.
/// The barrier's epoch is taken at once, but the barrier is published
/// only once this member has read, after the pair started next may have
/// published its gather: a member publishes its epochs out of order.
///
/// Each member keeps `WORDS` words of `tag` in a heap buffer, gathers the
/// others' addresses, checks their words, and after the barrier writes
/// `POISON` over its own: a member that reads after that sees it.
///
/// # Safety
/// `coll` outlives the future.
unsafe fn gather_read_release(
    coll: &Coll,
    me: usize,
    n: usize,
    tag: u64,
) -> impl std::future::Future<Output = hmpi_core::Result<()>> + Send + '_ {
    const WORDS: usize = 256;
    const POISON: u64 = 0xdead_beef_dead_beef;
    let mut mine = Buf::new(WORDS * 8, false);
    mine.u64s().iter_mut().for_each(|x| *x = tag + me as u64);
    let addr: Box<[u64]> = vec![mine.p as u64].into();
    let mut addrs: Box<[u64]> = vec![0u64; n].into();
    let counts: Box<[usize]> = vec![8; n].into();
    let displs: Box<[usize]> = (0..n).map(|r| 8 * r).collect();
    let at = addrs.as_mut_ptr() as usize;
    // SAFETY: the boxed arrays move into the future and their contents
    // stay put while it lives; both steps take their epochs now.
    let (gather, barrier) = unsafe {
        (
            coll.iallgatherv(
                addr.as_ptr().cast(),
                8,
                at as *mut u8,
                &*std::ptr::from_ref::<[usize]>(&counts),
                &*std::ptr::from_ref::<[usize]>(&displs),
            ),
            coll.ibarrier(),
        )
    };
    async move {
        gather.await?;
        for (r, &a) in addrs.iter().enumerate() {
            // SAFETY: member `r`'s buffer of `WORDS` words, kept until the
            // barrier below has completed everywhere.
            let theirs = unsafe { std::slice::from_raw_parts(a as usize as *const u64, WORDS) };
            let want = tag + r as u64;
            if let Some(bad) = theirs.iter().find(|&&x| x != want) {
                return Err(hmpi_core::Error::Internal(format!(
                    "rank {me} read {bad:#x} from rank {r}'s buffer, not {want:#x} \
                     (released before this rank's read)"
                )));
            }
        }
        let b = barrier.await;
        mine.u64s().iter_mut().for_each(|x| *x = POISON);
        drop((mine, addr, counts, displs));
        b
    }
}

/// Two gather-read-barrier pairs in flight at once (four epochs), the
/// barrier of the first published after the gather of the second: the
/// barrier must not complete anywhere before every member has read. One
/// member starts both and then stays away (its reads of the first wait
/// for its next wait), one starts late, the others wait for the first
/// at once; roles rotate, and the waits go in both orders.
fn deferred_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let coll = world.coll().unwrap().expect("more than one rank");
    for round in 0..2 * n {
        let (reader, late) = (round % n, (round + n - 1) % n);
        let tag = (round as u64 + 1) << 32;
        if me == late {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // SAFETY: `coll` outlives both, waited for below.
        let a = unsafe { coll.start(gather_read_release(coll, me, n, tag)) };
        // SAFETY: as above.
        let b = unsafe { coll.start(gather_read_release(coll, me, n, tag + (1 << 16))) };
        if me == reader {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        if round % 2 == 0 {
            coll.wait(&a).unwrap();
            coll.wait(&b).unwrap();
        } else {
            let _ = coll.test(&b);
            coll.wait(&b).unwrap();
            coll.wait(&a).unwrap();
        }
    }
    coll.barrier().unwrap();
}

/// Large allreduces (which have a middle step, `mid`, per member) in
/// flight at once, the first published late: it is behind a barrier in
/// one future, while the second is published at once. Its middle step
/// must not be taken for the first one's: one member (`slow`) stays
/// away after starting both, one starts late, one (`away`) moves both on
/// for a while and then stays away until the others could have read its
/// slice of the first result. Every result against the serial sum.
fn deferred_allreduce_rank(u: Universe) {
    const COUNT: usize = 4000;
    let world = u.world();
    let (me, n) = (world.rank() as usize, world.size() as usize);
    let coll = world.coll().unwrap().expect("more than one rank");
    let ms = std::time::Duration::from_millis;
    for round in 0..n {
        let (slow, away, late) = (round % n, (round + 1) % n, (round + 2) % n);
        let serial = |k: usize| {
            let mut acc = val(n - 1, k);
            for r in (0..n - 1).rev() {
                acc += val(r, k);
            }
            acc
        };
        let s1: Vec<f64> = (0..COUNT).map(|i| val(me, i + round)).collect();
        let s2: Vec<f64> = (0..COUNT).map(|i| val(me, i + round + 1)).collect();
        let mut r1 = vec![0.0f64; COUNT];
        let mut r2 = vec![0.0f64; COUNT];
        if me == late {
            std::thread::sleep(ms(100));
        }
        let (p1, q1) = (s1.as_ptr().cast::<u8>(), r1.as_mut_ptr().cast::<u8>());
        // SAFETY: the buffers outlive both operations, waited for below.
        let first = unsafe {
            let bar = coll.ibarrier();
            let red = coll.ireduce(p1, q1, COUNT, &SumF64, None);
            coll.start(async move {
                bar.await?;
                red.await
            })
        };
        let (p2, q2) = (s2.as_ptr().cast::<u8>(), r2.as_mut_ptr().cast::<u8>());
        // SAFETY: as above.
        let second = unsafe { coll.start(coll.ireduce(p2, q2, COUNT, &SumF64, None)) };
        if me == slow {
            std::thread::sleep(ms(300));
        } else if me == away {
            let until = std::time::Instant::now() + ms(200);
            while std::time::Instant::now() < until {
                let _ = coll.test(&second);
                std::thread::yield_now();
            }
            std::thread::sleep(ms(400));
        }
        coll.wait(&first).unwrap();
        coll.wait(&second).unwrap();
        for k in 0..COUNT {
            assert_eq!(r1[k], serial(k + round), "first allreduce, element {k}");
            assert_eq!(
                r2[k],
                serial(k + round + 1),
                "second allreduce, element {k}"
            );
        }
    }
    coll.barrier().unwrap();
}

fn run(n: u32) {
    rank_tests::assert_ran(&rank_tests::launch("engine", n, &[]), "engine");
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            match role {
                "engine" => engine_rank(u),
                "nonblocking" => nonblocking_rank(u),
                "direct" => direct_rank(u),
                "deferred" => deferred_rank(u),
                "deferred_allreduce" => deferred_allreduce_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[
            ("engine_two_ranks", || run(2)),
            ("engine_three_ranks", || run(3)),
            ("engine_five_ranks_on_two_cores", || run(5)),
            ("small_blocking_between_nonblocking_every_root", || {
                for n in 1..=5 {
                    let r = rank_tests::launch("direct", n, &[]);
                    rank_tests::assert_ran(&r, "direct");
                }
            }),
            (
                "barrier_waits_for_readers_with_epochs_published_out_of_order",
                || {
                    for n in [3, 5] {
                        let r = rank_tests::launch("deferred", n, &[]);
                        rank_tests::assert_ran(&r, "deferred");
                    }
                },
            ),
            (
                "allreduce_middle_steps_with_epochs_published_out_of_order",
                || {
                    for n in [3, 5] {
                        let r = rank_tests::launch("deferred_allreduce", n, &[]);
                        rank_tests::assert_ran(&r, "deferred_allreduce");
                    }
                },
            ),
            ("nonblocking_out_of_order_with_p2p", || {
                for n in [2, 3, 5] {
                    let r = rank_tests::launch("nonblocking", n, &[]);
                    rank_tests::assert_ran(&r, "nonblocking");
                }
            }),
        ],
    );
}
