//! Random sequences of collectives, checked against serial computations.
//!
//! Every rank draws the same sequences from a shared seed (proptest
//! strategies run with a seeded `TestRng`): per case, a list of
//! collectives, each with its kind, root, count (0, small, or more than
//! the 1056-byte inline size of one contribution), datatype (three
//! predefined ones and a strided derived one whose gaps must stay
//! untouched), operation, `MPI_IN_PLACE` or not, communicator (the world
//! or a duplicate) and blocking or started. Started ones are completed at
//! the end of the case in an order of each rank's own; blocking ones run
//! while earlier ones are still in flight. Each result is compared with
//! the serial computation.
//!
//! The driver launches 2, 3 and 4 ranks (more ranks than cores), and 4
//! ranks in two pretended cache domains (`HMPI_COLL_DOMAINS=2`: the
//! hierarchical broadcast and allreduce). A case
//! that fails prints the seed, the case number and the collective, so that
//! `HMPI_COLL_PROPTEST_SEED=<seed>` replays it (the ranks are separate
//! processes, so proptest cannot shrink the case). The default run draws
//! `HMPI_COLL_PROPTEST_CASES` = 200 cases per launch; more with the
//! variable. `HMPI_COLL_PROPTEST_TRACE` set makes every rank print each
//! step to stderr (to see where a job hangs).

#![allow(clippy::needless_range_loop)] // index loops mirror the serial definitions

use hmpi_core::collective::raw::{self, Buf, CollRequest, Mode};
use hmpi_core::datatype::{BasicType, Datatype, UserDatatype};
use hmpi_core::launch::rank_tests;
use hmpi_core::op::{Operation, SystemOperation};
use hmpi_core::prelude::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const SEED_VAR: &str = "HMPI_COLL_PROPTEST_SEED";
const CASES_VAR: &str = "HMPI_COLL_PROPTEST_CASES";
/// Set: every rank prints each case before it runs it (to stderr).
const TRACE_VAR: &str = "HMPI_COLL_PROPTEST_TRACE";
/// What a buffer holds before the collective: bytes never written stay so.
const FILL: u8 = 0xEE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Scatter,
    Allgather,
    Alltoall,
    ReduceScatterBlock,
    Scan,
    Exscan,
    Gatherv,
    Allgatherv,
}

const KINDS: &[Kind] = &[
    Kind::Barrier,
    Kind::Bcast,
    Kind::Reduce,
    Kind::Allreduce,
    Kind::Gather,
    Kind::Scatter,
    Kind::Allgather,
    Kind::Alltoall,
    Kind::ReduceScatterBlock,
    Kind::Scan,
    Kind::Exscan,
    Kind::Gatherv,
    Kind::Allgatherv,
];

/// The element types: scalars of one kind at byte offsets in an extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    I32,
    F64,
    U8,
    /// `MPI_Type_vector(2, 1, 2, MPI_INT)`: ints 0 and 2 of 3.
    StridedI32,
}

const TYS: &[Ty] = &[Ty::I32, Ty::F64, Ty::U8, Ty::StridedI32];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    I32,
    F64,
    U8,
}

impl Ty {
    fn datatype(self) -> Datatype {
        match self {
            Ty::I32 => Datatype::basic(BasicType::I32),
            Ty::F64 => Datatype::basic(BasicType::F64),
            Ty::U8 => Datatype::basic(BasicType::U8),
            Ty::StridedI32 => UserDatatype::vector(2, 1, 2, &Datatype::basic(BasicType::I32))
                .expect("vector type")
                .into(),
        }
    }
    fn extent(self) -> usize {
        match self {
            Ty::I32 => 4,
            Ty::F64 => 8,
            Ty::U8 => 1,
            Ty::StridedI32 => 12,
        }
    }
    fn scalar(self) -> Scalar {
        match self {
            Ty::I32 | Ty::StridedI32 => Scalar::I32,
            Ty::F64 => Scalar::F64,
            Ty::U8 => Scalar::U8,
        }
    }
    /// Byte offsets of the scalars of one element.
    fn slots(self) -> &'static [usize] {
        match self {
            Ty::StridedI32 => &[0, 8],
            _ => &[0],
        }
    }
}

impl Scalar {
    fn put(self, b: &mut [u8], v: i64) {
        match self {
            Scalar::I32 => b[..4].copy_from_slice(&(v as i32).to_ne_bytes()),
            Scalar::F64 => b[..8].copy_from_slice(&(v as f64).to_ne_bytes()),
            Scalar::U8 => b[0] = v as u8,
        }
    }
    fn get(self, b: &[u8]) -> i64 {
        match self {
            Scalar::I32 => i32::from_ne_bytes(b[..4].try_into().unwrap()) as i64,
            Scalar::F64 => f64::from_ne_bytes(b[..8].try_into().unwrap()) as i64,
            Scalar::U8 => b[0] as i64,
        }
    }
    /// The value `v` as this scalar stores it.
    fn norm(self, v: i64) -> i64 {
        match self {
            Scalar::I32 => v as i32 as i64,
            Scalar::F64 => v,
            Scalar::U8 => v as u8 as i64,
        }
    }
    fn combine(self, op: SystemOperation, a: i64, b: i64) -> i64 {
        let r = match op {
            SystemOperation::Sum => match self {
                Scalar::I32 => (a as i32).wrapping_add(b as i32) as i64,
                Scalar::U8 => (a as u8).wrapping_add(b as u8) as i64,
                Scalar::F64 => a + b,
            },
            SystemOperation::Max => a.max(b),
            SystemOperation::Min => a.min(b),
            SystemOperation::BitwiseXor => a ^ b,
            other => panic!("no serial form of {other:?}"),
        };
        self.norm(r)
    }
}

/// One collective of a case.
#[derive(Clone, Copy, Debug)]
struct Step {
    kind: Kind,
    root: usize,
    count: usize,
    ty: Ty,
    op: SystemOperation,
    in_place: bool,
    started: bool,
    dup: bool,
}

fn step() -> impl Strategy<Value = Step> {
    let count = prop_oneof![Just(0usize), 1usize..16, 250usize..1300];
    (
        0..KINDS.len(),
        0usize..64,
        count,
        0..TYS.len(),
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(k, root, count, t, o, in_place, started, dup)| {
            let ty = TYS[t];
            let op = match o {
                0 => SystemOperation::Sum,
                1 => SystemOperation::Max,
                2 => SystemOperation::Min,
                // no bitwise operation on floats
                _ if ty == Ty::F64 => SystemOperation::Sum,
                _ => SystemOperation::BitwiseXor,
            };
            Step {
                kind: KINDS[k],
                root,
                count,
                ty,
                op,
                in_place,
                started,
                dup,
            }
        })
}

/// Scalar `s` of element `i` of rank `r`'s data in case `case`, step `k`.
fn val(case: usize, k: usize, r: usize, i: usize, s: usize) -> i64 {
    let mut h =
        (case as u64) << 48 ^ (k as u64) << 36 ^ (r as u64) << 28 ^ (i as u64) << 2 ^ s as u64;
    h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 29;
    (h % 2001) as i64 - 1000
}

/// A buffer of `n` elements of `ty` (8-byte aligned), all bytes `FILL`.
fn buffer(ty: Ty, n: usize) -> Vec<u64> {
    vec![u64::from_ne_bytes([FILL; 8]); (n * ty.extent()).div_ceil(8).max(1)]
}

fn bytes(b: &[u64]) -> &[u8] {
    // SAFETY: any u64 is 8 initialised bytes; the slice covers them.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len() * 8) }
}

fn bytes_mut(b: &mut [u64]) -> &mut [u8] {
    // SAFETY: as in `bytes`, borrowed mutably.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast(), b.len() * 8) }
}

/// Writes element `at` of `b` from `f(slot)`.
fn put(ty: Ty, b: &mut [u64], at: usize, f: impl Fn(usize) -> i64) {
    let e = at * ty.extent();
    for (s, &off) in ty.slots().iter().enumerate() {
        ty.scalar().put(&mut bytes_mut(b)[e + off..], f(s));
    }
}

fn get(ty: Ty, b: &[u64], at: usize, s: usize) -> i64 {
    ty.scalar()
        .get(&bytes(b)[at * ty.extent() + ty.slots()[s]..])
}

/// The gap bytes of elements `0..n` (what the strided type skips) still
/// hold `FILL`.
fn gaps_untouched(ty: Ty, b: &[u64], n: usize) -> bool {
    ty != Ty::StridedI32
        || (0..n).all(|e| bytes(b)[e * 12 + 4..e * 12 + 8].iter().all(|&x| x == FILL))
}

/// The check of a collective's result, given its buffers.
type Check = Box<dyn Fn(&[Vec<u64>])>;

/// A started collective with the buffers it uses and its check.
struct Pending {
    req: CollRequest,
    bufs: Vec<Vec<u64>>,
    check: Check,
}

/// Runs one step: blocking (checked at once) or started (pushed).
fn run(case: usize, k: usize, st: Step, c: &SimpleCommunicator, pending: &mut Vec<Pending>) {
    let (me, n) = (c.rank() as usize, c.size() as usize);
    let Step {
        kind,
        count,
        ty,
        op,
        ..
    } = st;
    let root = st.root % n;
    let dt = ty.datatype();
    let sc = ty.scalar();
    let nslots = ty.slots().len();
    let mode = if st.started { Mode::Start } else { Mode::Block };
    let oper: Operation = op.into();
    let what = format!("case {case} step {k} on rank {me}/{n}: {st:?}");
    // `mine(i, s)`: this rank's element i; `of(r, i, s)`: rank r's.
    let of = move |r: usize, i: usize, s: usize| sc.norm(val(case, k, r, i, s));
    let fold = move |i: usize, s: usize, ranks: std::ops::Range<usize>| {
        ranks
            .map(|r| of(r, i, s))
            .reduce(|a, b| sc.combine(op, a, b))
    };
    let mut bufs: Vec<Vec<u64>> = Vec::new();
    let check: Check;
    let in_place = st.in_place;
    // (Every raw call below:) the buffers hold the elements the
    // counts say and stay alive (moved into `Pending` with the request,
    // their heap blocks unmoved) until the collective completes.
    let r = match kind {
        Kind::Barrier => {
            check = Box::new(|_| {});
            raw::barrier(c, mode)
        }
        Kind::Bcast => {
            let mut b = buffer(ty, count);
            if me == root {
                (0..count).for_each(|i| put(ty, &mut b, i, |s| of(root, i, s)));
            }
            bufs.push(b);
            let w = what.clone();
            check = Box::new(move |bs| {
                for i in 0..count {
                    for s in 0..nslots {
                        assert_eq!(get(ty, &bs[0], i, s), of(root, i, s), "{w}: element {i}");
                    }
                }
                assert!(gaps_untouched(ty, &bs[0], count), "{w}: gaps");
            });
            let p = bytes_mut(&mut bufs[0]).as_mut_ptr();
            // SAFETY: as said above the match.
            unsafe { raw::bcast(c, p, count, &dt, root as i32, mode) }
        }
        Kind::Reduce | Kind::Allreduce | Kind::Scan | Kind::Exscan => {
            let all = kind == Kind::Allreduce;
            let is_scan = matches!(kind, Kind::Scan | Kind::Exscan);
            let wants = all || is_scan || me == root;
            // In place only where MPI allows it: at a reduce's root,
            // everywhere for the others.
            let in_place = in_place && wants;
            let mut s = buffer(ty, count);
            let mut r = buffer(ty, count);
            let target = if in_place { &mut r } else { &mut s };
            (0..count).for_each(|i| put(ty, target, i, |x| of(me, i, x)));
            bufs.push(s);
            bufs.push(r);
            let w = what.clone();
            check = Box::new(move |bs| {
                if !wants {
                    return;
                }
                let ranks = match kind {
                    Kind::Scan => 0..me + 1,
                    Kind::Exscan => 0..me,
                    _ => 0..n,
                };
                if kind == Kind::Exscan && me == 0 {
                    return; // undefined in MPI
                }
                for i in 0..count {
                    for x in 0..nslots {
                        let want = fold(i, x, ranks.clone()).expect("a rank");
                        assert_eq!(get(ty, &bs[1], i, x), want, "{w}: element {i}");
                    }
                }
                assert!(gaps_untouched(ty, &bs[1], count), "{w}: gaps");
            });
            let sp = (!in_place).then(|| bytes(&bufs[0]).as_ptr());
            let rp = bytes_mut(&mut bufs[1]).as_mut_ptr();
            match kind {
                // SAFETY: as said above the match.
                Kind::Scan | Kind::Exscan => unsafe {
                    raw::scan(c, sp, rp, count, &dt, &oper, kind == Kind::Exscan, mode)
                },
                _ => {
                    let root = (!all).then_some(root as i32);
                    // SAFETY: as said above the match.
                    unsafe { raw::reduce(c, sp, rp, count, &dt, &oper, root, mode) }
                }
            }
        }
        Kind::Gather | Kind::Gatherv | Kind::Allgather | Kind::Allgatherv => {
            let everywhere = matches!(kind, Kind::Allgather | Kind::Allgatherv);
            let var = matches!(kind, Kind::Gatherv | Kind::Allgatherv);
            // Variable counts: rank r has count + r elements (none if the
            // count is 0); the pieces lie in reverse rank order, one
            // element apart.
            let counts: Vec<usize> = (0..n)
                .map(|r| if var && count > 0 { count + r } else { count })
                .collect();
            let mut displs = vec![0usize; n];
            let mut total = 0;
            let order: Vec<usize> = if var {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            for &r in &order {
                displs[r] = total;
                total += counts[r] + usize::from(var);
            }
            let receives = everywhere || me == root;
            let in_place = in_place && receives;
            let mine = counts[me];
            let mut s = buffer(ty, mine);
            let mut r = buffer(ty, total);
            if in_place {
                (0..mine).for_each(|i| put(ty, &mut r, displs[me] + i, |x| of(me, i, x)));
            } else {
                (0..mine).for_each(|i| put(ty, &mut s, i, |x| of(me, i, x)));
            }
            bufs.push(s);
            bufs.push(r);
            let (cs, ds) = (counts.clone(), displs.clone());
            let w = what.clone();
            check = Box::new(move |bs| {
                if !receives {
                    return;
                }
                for q in 0..n {
                    for i in 0..cs[q] {
                        for x in 0..nslots {
                            assert_eq!(
                                get(ty, &bs[1], ds[q] + i, x),
                                of(q, i, x),
                                "{w}: piece {q} element {i}"
                            );
                        }
                    }
                }
                assert!(gaps_untouched(ty, &bs[1], total), "{w}: gaps");
            });
            let send = (!in_place).then(|| Buf {
                ptr: bytes(&bufs[0]).as_ptr(),
                count: mine,
                dt: &dt,
            });
            let rp = bytes_mut(&mut bufs[1]).as_mut_ptr();
            if everywhere {
                // SAFETY: as said above the match.
                unsafe { raw::allgatherv(c, send, rp, &counts, &displs, &dt, mode) }
            } else if me == root {
                // SAFETY: as said above the match.
                unsafe { raw::gatherv(c, send, rp, &counts, &displs, &dt, root as i32, mode) }
            } else {
                // SAFETY: as said above the match.
                unsafe {
                    raw::gatherv(
                        c,
                        send,
                        std::ptr::null_mut(),
                        &[],
                        &[],
                        &dt,
                        root as i32,
                        mode,
                    )
                }
            }
        }
        Kind::Scatter => {
            let in_place = in_place && me == root;
            let mut s = buffer(ty, n * count);
            if me == root {
                (0..n * count).for_each(|i| put(ty, &mut s, i, |x| of(root, i, x)));
            }
            bufs.push(s);
            bufs.push(buffer(ty, count));
            let w = what.clone();
            check = Box::new(move |bs| {
                if in_place {
                    return; // the root's piece stays in its send buffer
                }
                for i in 0..count {
                    for x in 0..nslots {
                        assert_eq!(
                            get(ty, &bs[1], i, x),
                            of(root, me * count + i, x),
                            "{w}: element {i}"
                        );
                    }
                }
                assert!(gaps_untouched(ty, &bs[1], count), "{w}: gaps");
            });
            let recv = (!in_place).then(|| Buf {
                ptr: bytes_mut(&mut bufs[1]).as_mut_ptr().cast_const(),
                count,
                dt: &dt,
            });
            let (counts, displs): (Vec<usize>, Vec<usize>) = if me == root {
                (vec![count; n], (0..n).map(|r| r * count).collect())
            } else {
                (Vec::new(), Vec::new())
            };
            let sp = bytes(&bufs[0]).as_ptr();
            // SAFETY: as said above the match.
            unsafe { raw::scatterv(c, sp, &counts, &displs, &dt, recv, root as i32, mode) }
        }
        Kind::Alltoall => {
            let mut s = buffer(ty, n * count);
            let mut r = buffer(ty, n * count);
            let target = if in_place { &mut r } else { &mut s };
            (0..n * count).for_each(|i| put(ty, target, i, |x| of(me, i, x)));
            bufs.push(s);
            bufs.push(r);
            let w = what.clone();
            check = Box::new(move |bs| {
                for q in 0..n {
                    for i in 0..count {
                        for x in 0..nslots {
                            assert_eq!(
                                get(ty, &bs[1], q * count + i, x),
                                of(q, me * count + i, x),
                                "{w}: from {q} element {i}"
                            );
                        }
                    }
                }
                assert!(gaps_untouched(ty, &bs[1], n * count), "{w}: gaps");
            });
            let ext = ty.extent() as isize;
            let counts = vec![count; n];
            let displs: Vec<isize> = (0..n).map(|r| (r * count) as isize * ext).collect();
            let dts = vec![&dt; n];
            let sp = (!in_place).then(|| bytes(&bufs[0]).as_ptr());
            let rp = bytes_mut(&mut bufs[1]).as_mut_ptr();
            // SAFETY: as said above the match.
            unsafe {
                raw::alltoallw(
                    c, sp, &counts, &displs, &dts, rp, &counts, &displs, &dts, mode,
                )
            }
        }
        Kind::ReduceScatterBlock => {
            let mut s = buffer(ty, n * count);
            let mut r = buffer(ty, if in_place { n * count } else { count });
            let target = if in_place { &mut r } else { &mut s };
            (0..n * count).for_each(|i| put(ty, target, i, |x| of(me, i, x)));
            bufs.push(s);
            bufs.push(r);
            let w = what.clone();
            check = Box::new(move |bs| {
                for i in 0..count {
                    for x in 0..nslots {
                        let want = fold(me * count + i, x, 0..n).expect("a rank");
                        assert_eq!(get(ty, &bs[1], i, x), want, "{w}: element {i}");
                    }
                }
            });
            let sp = (!in_place).then(|| bytes(&bufs[0]).as_ptr());
            let rp = bytes_mut(&mut bufs[1]).as_mut_ptr();
            // SAFETY: as said above the match.
            unsafe { raw::reduce_scatter(c, sp, rp, &vec![count; n], &dt, &oper, mode) }
        }
    };
    match r.unwrap_or_else(|e| panic!("{what}: {e}")) {
        Some(req) => pending.push(Pending { req, bufs, check }),
        None => check(&bufs),
    }
}

/// One rank: the cases of the shared seed.
fn rank(u: Universe) {
    let world = u.world();
    let dup = world.duplicate().unwrap();
    let seed: u64 = std::env::var(SEED_VAR).unwrap().parse().unwrap();
    let cases: usize = std::env::var(CASES_VAR).unwrap().parse().unwrap();
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    );
    let steps = prop::collection::vec(step(), 1..10);
    let me = world.rank() as u64;
    let trace = std::env::var_os(TRACE_VAR).is_some();
    for case in 0..cases {
        let seq = steps.new_tree(&mut runner).expect("a case").current();
        let mut pending = Vec::new();
        for (k, &st) in seq.iter().enumerate() {
            if trace {
                eprintln!("case {case} step {k}: {st:?}");
            }
            let c = if st.dup { &dup } else { &world };
            run(case, k, st, c, &mut pending);
            if trace {
                eprintln!("case {case} step {k} returned");
            }
        }
        // Complete the started ones in an order of this rank's own.
        let mut order: Vec<usize> = (0..pending.len()).collect();
        let mut h = seed ^ (case as u64) << 20 ^ me << 40;
        for i in (1..order.len()).rev() {
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
            order.swap(i, (h >> 33) as usize % (i + 1));
        }
        let mut slots: Vec<Option<Pending>> = pending.into_iter().map(Some).collect();
        for i in order {
            let p = slots[i].take().expect("each once");
            if trace {
                eprintln!("case {case}: waiting for step {i}");
            }
            p.req
                .wait()
                .unwrap_or_else(|e| panic!("case {case}: wait: {e}"));
            (p.check)(&p.bufs);
        }
    }
    println!("seed {seed}: {cases} cases passed");
}

fn main() {
    rank_tests::main(
        |role| {
            if role != "proptest" {
                return None;
            }
            rank(hmpi_core::init().expect("init"));
            Some(())
        },
        &[(
            "random_sequences_of_collectives_match_serial_results",
            || {
                let seed = std::env::var(SEED_VAR).ok().unwrap_or_else(|| {
                    let t = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos() as u64)
                        .unwrap_or(1);
                    t.to_string()
                });
                let cases = std::env::var(CASES_VAR).unwrap_or_else(|_| "200".into());
                // The last launch pretends two cache domains, so that the
                // blocking broadcasts and allreduces go hierarchical.
                for (n, domains) in [(2, None), (3, None), (4, None), (4, Some(2))] {
                    let mut env = vec![(SEED_VAR, seed.clone()), (CASES_VAR, cases.clone())];
                    if let Some(k) = domains {
                        env.push(("HMPI_COLL_DOMAINS", format!("{k}")));
                    }
                    let r = rank_tests::launch("proptest", n, &env);
                    assert!(
                        r.success(),
                        "{n} ranks (domains {domains:?}), {SEED_VAR}={seed}:\n{}",
                        rank_tests::describe(&r)
                    );
                    rank_tests::assert_ran(&r, "proptest");
                }
            },
        )],
    );
}
