//! The global address space across real ranks (1 to 4, more ranks than
//! cores): put/get of many sizes between every pair of units against a
//! model, in team allocations and in the local pools; non-blocking,
//! strided and datatype'd transfers; atomics from every unit at once;
//! overlapping non-blocking puts to one target; collective allocation and
//! free in teams and sub-teams with segment ids never reused; bad input;
//! a GUPS run against a serial replay; a 3D heat stencil on a
//! `GlobalArray` against a serial computation.

use hmpi_core::datatype::{Datatype, Equivalence, UserDatatype};
use hmpi_core::launch::rank_tests;
use hmpi_core::op::SystemOperation;
use hmpi_core::traits::*;
use hmpi_core::{Group, SimpleCommunicator};
use pgas::{testall, waitall, Distribution, Error, GlobalArray, GlobalPtr, Gptr, Pgas};
use std::collections::HashSet;

/// Byte `i` of what origin `o` puts into target `t` in round `k`.
fn pattern(o: usize, t: usize, k: usize, i: usize) -> u8 {
    (o * 31 + t * 17 + k * 7 + i * 13 + i / 251) as u8
}

fn pack(g: Gptr) -> [u64; 2] {
    [
        u64::from(g.unit) | u64::from(g.segment) << 32 | u64::from(g.flags) << 48,
        g.offset,
    ]
}

fn unpack(w: &[u64]) -> Gptr {
    Gptr {
        unit: w[0] as u32,
        segment: (w[0] >> 32) as u16,
        flags: (w[0] >> 48) as u16,
        offset: w[1],
    }
}

/// Every unit's `g`, in unit order.
fn gather_gptrs(world: &SimpleCommunicator, g: Gptr) -> Vec<Gptr> {
    let mut all = vec![0u64; 2 * world.size() as usize];
    world.all_gather_into(&pack(g)[..], &mut all[..]).unwrap();
    all.chunks_exact(2).map(unpack).collect()
}

const SIZES: [usize; 16] = [
    1, 2, 3, 7, 8, 15, 16, 63, 64, 65, 255, 1024, 4095, 4096, 4097, 65536,
];
/// Bytes of one origin's slot at a target (room for the largest size and
/// a misalignment).
const SLOT: usize = 65536 + 64;

/// Puts of every size from every unit into a slot of every unit, each
/// checked with gets from every unit and with the local view; once in a
/// team allocation, once in the local pools.
fn putget(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let me = pg.myid() as usize;
    let all = pg.team_all().clone();
    let seg = pg.team_memalloc_aligned(&all, (n * SLOT) as u64).unwrap();
    let pool = pg.memalloc((n * SLOT) as u64).unwrap();
    let pools = gather_gptrs(world, pool);
    for (round, bases) in [
        (0..n).map(|t| seg.at_unit(t as u32)).collect::<Vec<_>>(),
        pools,
    ]
    .into_iter()
    .enumerate()
    {
        for (k, &s) in SIZES.iter().enumerate() {
            let k = k + round * 100;
            let mis = k % 7;
            for (t, &base) in bases.iter().enumerate() {
                let data: Vec<u8> = (0..s).map(|i| pattern(me, t, k, i)).collect();
                let g = GlobalPtr::<u8>::from_raw(base)
                    .add(me * SLOT + mis)
                    .unwrap();
                pg.put(g, &data).unwrap();
            }
            all.barrier().unwrap();
            // Every unit reads every slot of every unit.
            for (t, &base) in bases.iter().enumerate() {
                for o in 0..n {
                    let g = GlobalPtr::<u8>::from_raw(base).add(o * SLOT + mis).unwrap();
                    let mut back = vec![0u8; s];
                    pg.get(g, &mut back).unwrap();
                    for (i, &b) in back.iter().enumerate() {
                        assert_eq!(
                            b,
                            pattern(o, t, k, i),
                            "round {round} size {s} {o}->{t} byte {i}"
                        );
                    }
                    if t == me {
                        // The local view of the same bytes.
                        let p = pg.local_addr(g.raw(), s as u64).unwrap();
                        // SAFETY: nobody writes the slots until the
                        // barrier below.
                        let local = unsafe { std::slice::from_raw_parts(p, s) };
                        assert_eq!(local, &back[..]);
                    }
                }
            }
            all.barrier().unwrap();
        }
    }
    // Typed, non-blocking, strided and datatype'd, of u64, between every
    // pair: origin o writes row o of a 4 x n*8 matrix at every target.
    let m =
        GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, (n * 64 * 8) as u64).unwrap());
    let val = |o: usize, t: usize, i: usize| (o * 1_000_000 + t * 1000 + i) as u64;
    {
        let rows: Vec<Vec<u64>> = (0..n)
            .map(|t| (0..8).map(|i| val(me, t, i)).collect())
            .collect();
        let mut handles = Vec::new();
        for (t, row) in rows.iter().enumerate() {
            let g = m.at_unit(t as u32).add(me * 8).unwrap();
            handles.push(pg.put_nb(g, row).unwrap());
        }
        assert!(testall(&mut handles).unwrap());
        waitall(handles).unwrap();
    }
    all.barrier().unwrap();
    for t in 0..n {
        let mut got = vec![0u64; n * 8];
        let h = pg.get_nb(m.at_unit(t as u32), &mut got).unwrap();
        assert_eq!(h.target(), m.at_unit(t as u32).raw());
        h.wait().unwrap();
        for o in 0..n {
            for i in 0..8 {
                assert_eq!(got[o * 8 + i], val(o, t, i));
            }
        }
        // Column 3 of the n x 8 matrix: strided.
        let mut col = vec![0u64; n];
        pg.get_strided(m.at_unit(t as u32).add(3).unwrap(), &mut col, 1, 8)
            .unwrap();
        assert_eq!(col, (0..n).map(|o| val(o, t, 3)).collect::<Vec<_>>());
        // The same with a datatype: a vector of blocks of 2, stride 8.
        let dt: Datatype = UserDatatype::vector(n, 2, 8, &u64::equivalent_datatype())
            .unwrap()
            .into();
        let mut pairs = vec![0u64; 2 * n];
        pg.get_datatype(
            m.at_unit(t as u32).add(5).unwrap().raw(),
            &mut pairs,
            1,
            &dt,
        )
        .unwrap();
        for o in 0..n {
            assert_eq!(pairs[2 * o], val(o, t, 5));
            assert_eq!(pairs[2 * o + 1], val(o, t, 6));
        }
    }
    all.barrier().unwrap();
    // Strided puts: unit me writes column me (mod 8) of every target's
    // second matrix half.
    let half = m.add(n * 8 * 4).unwrap();
    let colv: Vec<u64> = (0..n).map(|r| 7_000 + (me * 10 + r) as u64).collect();
    for t in 0..n {
        pg.put_strided(half.at_unit(t as u32).add(me % 8).unwrap(), &colv, 1, 8)
            .unwrap();
    }
    all.barrier().unwrap();
    let mut mine = vec![0u64; n * 8];
    pg.get(half.at_unit(me as u32), &mut mine).unwrap();
    for o in 0..n.min(8) {
        for r in 0..n {
            assert_eq!(mine[r * 8 + o], 7_000 + (o * 10 + r) as u64);
        }
    }
    // The datatype'd put: pairs into column pairs.
    let dt: Datatype = UserDatatype::vector(2, 1, 3, &u64::equivalent_datatype())
        .unwrap()
        .into();
    pg.put_datatype(m.at_unit(me as u32).raw(), &[11u64, 22], 1, &dt)
        .unwrap();
    let mut back = [0u64; 4];
    pg.get(m.at_unit(me as u32), &mut back).unwrap();
    assert_eq!([back[0], back[3]], [11, 22]);
    all.barrier().unwrap();
    pg.team_memfree(m.raw()).unwrap();
    pg.team_memfree(seg).unwrap();
    pg.memfree(pool).unwrap();
}

/// Every unit hammers counters at every unit at once.
fn atomics(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let me = pg.myid();
    let all = pg.team_all().clone();
    // [counter u64, xor u64, lock u64, swap u64, sum f64 (as u64 slots)]
    let c = GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, 64).unwrap());
    const K: usize = 200;
    let mut fetched = Vec::new();
    for i in 0..K {
        for t in 0..n {
            let g = c.at_unit(t as u32);
            fetched.push(pg.fetch_add(g, 1).unwrap());
            pg.fetch_op(
                g.add(1).unwrap(),
                (me as u64 + 1) << (i % 60),
                SystemOperation::BitwiseXor,
            )
            .unwrap();
            // A spin lock by compare-and-swap guarding a plain
            // read-modify-write of slot 4.
            let lockp = g.add(2).unwrap();
            while pg.compare_and_swap(lockp, u64::from(me) + 1, 0).unwrap() != 0 {
                std::thread::yield_now();
            }
            let v = pg.get_value(g.add(4).unwrap()).unwrap();
            pg.put_value(g.add(4).unwrap(), v + 3).unwrap();
            assert_eq!(pg.swap(lockp, 0).unwrap(), u64::from(me) + 1);
            pg.accumulate(g.add(5).unwrap(), &[2, 5], SystemOperation::Sum)
                .unwrap();
        }
    }
    // Window accumulates and global-pointer atomics on one element mix:
    // even units add through the window, odd ones with fetch_add. (A
    // segment spanning nodes has no node window to offer: its atomics are
    // all MPI's.)
    let dt = u64::equivalent_datatype();
    for _ in 0..K {
        let g = c.at_unit(0).add(7).unwrap();
        if me % 2 == 0 {
            pg.with_window(g.raw(), 8, |win, rank, disp| {
                // SAFETY: one u64 readable at the origin.
                unsafe {
                    win.accumulate(
                        (&3u64 as *const u64).cast(),
                        1,
                        &dt,
                        rank,
                        disp,
                        1,
                        &dt,
                        SystemOperation::Sum,
                    )
                }
            })
            .or_else(|e| match e {
                Error::Elsewhere { .. } => pg.fetch_add(g, 3).map(drop),
                e => Err(e),
            })
            .unwrap();
        } else {
            pg.fetch_add(g, 3).unwrap();
        }
    }
    pg.quiet().unwrap();
    all.barrier().unwrap();
    let mixed = pg.atomic_load(c.at_unit(0).add(7).unwrap()).unwrap();
    assert_eq!(mixed, 3 * (n * K) as u64);
    // Every unit's fetches at unit t are distinct and together 0..n*K.
    let mut firsts = vec![0u64; K * n * n];
    world
        .all_gather_into(&fetched[..], &mut firsts[..])
        .unwrap();
    for t in 0..n {
        let at_t: HashSet<u64> = (0..n * K)
            .map(|j| firsts[(j / K) * K * n + (j % K) * n + t])
            .collect();
        assert_eq!(at_t.len(), n * K, "fetch_add returned a value twice at {t}");
        assert!(at_t.iter().all(|&v| v < (n * K) as u64));
    }
    let mut xor = 0u64;
    for u in 0..n as u64 {
        for i in 0..K {
            xor ^= (u + 1) << (i % 60);
        }
    }
    for t in 0..n {
        let g = c.at_unit(t as u32);
        assert_eq!(pg.atomic_load(g).unwrap(), (n * K) as u64);
        assert_eq!(pg.atomic_load(g.add(1).unwrap()).unwrap(), xor);
        assert_eq!(pg.get_value(g.add(2).unwrap()).unwrap(), 0);
        assert_eq!(pg.get_value(g.add(4).unwrap()).unwrap(), 3 * (n * K) as u64);
        let mut s = [0u64; 2];
        pg.get(g.add(5).unwrap(), &mut s).unwrap();
        assert_eq!(s, [2 * (n * K) as u64, 5 * (n * K) as u64]);
    }
    // Floating-point atomics in the local pool of unit 0.
    let f = if me == 0 {
        pg.memalloc(8).unwrap()
    } else {
        Gptr::NULL
    };
    let f = GlobalPtr::<f64>::from_raw(gather_gptrs(world, f)[0]);
    all.barrier().unwrap();
    for _ in 0..K {
        pg.fetch_op(f, 0.5, SystemOperation::Sum).unwrap();
    }
    all.barrier().unwrap();
    assert_eq!(pg.atomic_load(f).unwrap(), 0.5 * (n * K) as f64);
    all.barrier().unwrap();
    if me == 0 {
        pg.memfree(f.raw()).unwrap();
    }
    pg.team_memfree(c.raw()).unwrap();
}

/// fetch_add of one element type from every unit into one element at
/// every unit, `k` times each; the element ends at `n * k * step` (wrapping
/// for the narrow types, as the hardware and the lock stripes both do).
fn atomic_sizes_of<T>(pg: &Pgas, step: T, k: usize, total: impl Fn(usize) -> T)
where
    T: Equivalence + PartialEq + std::fmt::Debug + Default,
{
    let n = pg.size() as usize;
    let all = pg.team_all().clone();
    let size = std::mem::size_of::<T>() as u64;
    // Two elements: the counter after one untouched neighbour, so a wide
    // write into the wrong place shows.
    let g = GlobalPtr::<T>::from_raw(pg.team_memalloc_aligned(&all, 2 * size).unwrap());
    for _ in 0..k {
        for t in 0..n {
            pg.fetch_add(g.at_unit(t as u32).add(1).unwrap(), step)
                .unwrap();
        }
    }
    all.barrier().unwrap();
    for t in 0..n {
        let mut back = [T::default(), T::default()];
        pg.get(g.at_unit(t as u32), &mut back).unwrap();
        assert_eq!(back[0], T::default(), "{}", std::any::type_name::<T>());
        assert_eq!(back[1], total(n * k), "{}", std::any::type_name::<T>());
    }
    all.barrier().unwrap();
    pg.team_memfree(g.raw()).unwrap();
}

/// Whether some unit is on another node (its pool has no address here).
fn spans_nodes(pg: &Pgas) -> bool {
    (0..pg.size()).any(|unit| {
        let pool = Gptr {
            unit,
            segment: 0,
            flags: 0,
            offset: 0,
        };
        matches!(pg.local_addr(pool, 0), Err(Error::Elsewhere { .. }))
    })
}

/// Atomics of every element size: 1, 2, 4, 8 and 16 bytes (8 across
/// nodes), integer and floating point.
fn atomic_sizes(world: &SimpleCommunicator, pg: &Pgas) {
    const K: usize = 150;
    atomic_sizes_of(pg, 3u8, K, |m| (3 * m) as u8);
    atomic_sizes_of(pg, 3u16, K, |m| (3 * m) as u16);
    atomic_sizes_of(pg, 3i32, K, |m| (3 * m) as i32);
    atomic_sizes_of(pg, 3u64, K, |m| (3 * m) as u64);
    if spans_nodes(pg) {
        // MPI has no 16-byte number: across nodes they are refused.
        let all = pg.team_all().clone();
        let g = GlobalPtr::<u128>::from_raw(pg.team_memalloc_aligned(&all, 16).unwrap());
        assert!(matches!(
            pg.fetch_add(g, 1),
            Err(Error::Runtime(hmpi_core::Error::Type { .. }))
        ));
        all.barrier().unwrap();
        pg.team_memfree(g.raw()).unwrap();
    } else {
        atomic_sizes_of(pg, 3u128 << 70, K, |m| (3 * m as u128) << 70);
    }
    atomic_sizes_of(pg, 0.25f32, K, |m| 0.25 * m as f32);
    atomic_sizes_of(pg, 0.5f64, K, |m| 0.5 * m as f64);
    world.barrier().unwrap();
}

/// Each origin issues overlapping non-blocking puts to one target and
/// waits for them together: the later put wins where they overlap.
fn overlap(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let me = pg.myid() as usize;
    let all = pg.team_all().clone();
    let g = GlobalPtr::<u32>::from_raw(
        pg.team_memalloc_aligned(&all, (n * 4 * 300) as u64)
            .unwrap(),
    );
    let slot = g.at_unit(0).add(me * 300).unwrap();
    let a: Vec<u32> = (0..200).map(|i| (me * 10_000 + i) as u32).collect();
    let b: Vec<u32> = (0..200).map(|i| (me * 10_000 + 5000 + i) as u32).collect();
    let c: Vec<u32> = vec![u32::MAX - me as u32; 50];
    for round in 0..20 {
        let hs = vec![
            pg.put_nb(slot, &a).unwrap(),
            pg.put_nb(slot.add(100).unwrap(), &b).unwrap(),
            pg.put_nb(slot.add(120 + round).unwrap(), &c).unwrap(),
        ];
        waitall(hs).unwrap();
        let mut back = vec![0u32; 300];
        pg.get(slot, &mut back).unwrap();
        for (i, &v) in back.iter().enumerate() {
            let want = if (120 + round..170 + round).contains(&i) {
                u32::MAX - me as u32
            } else if i >= 100 {
                (me * 10_000 + 5000 + i - 100) as u32
            } else {
                (me * 10_000 + i) as u32
            };
            assert_eq!(v, want, "round {round} element {i}");
        }
    }
    world.barrier().unwrap();
    pg.team_memfree(g.raw()).unwrap();
}

/// Collective allocation and free in the team of all, in sub-teams made
/// from groups and from communicators, and in teams of teams: segment ids
/// increase and are never reused, team ids are unique, a destroyed team's
/// slot comes back with a new id.
fn alloc(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size();
    let me = pg.myid();
    let all = pg.team_all().clone();
    assert_eq!(
        (all.id(), all.index(), all.myid(), all.size()),
        (0, 0, me, n)
    );
    let mut seen: Vec<u16> = Vec::new();
    let note = |g: Gptr, seen: &mut Vec<u16>| {
        assert!(
            seen.iter().all(|&s| s < g.segment),
            "segment {} reused or not increasing: {seen:?}",
            g.segment
        );
        seen.push(g.segment);
    };
    // Sub-teams: even and odd units (from groups), and a team from a
    // communicator of the lower half.
    let evens: Vec<i32> = (0..n as i32).filter(|u| u % 2 == 0).collect();
    let odds: Vec<i32> = (0..n as i32).filter(|u| u % 2 == 1).collect();
    let mine = if me % 2 == 0 { &evens } else { &odds };
    let group = Group::from_world_ranks(mine.clone(), me as i32).unwrap();
    let parity = pg.team_create(&all, &group).unwrap().expect("a member");
    assert_eq!(parity.size() as usize, mine.len());
    assert_eq!(parity.unit_to_world(parity.myid()).unwrap(), me);
    assert_eq!(parity.world_to_unit(me).unwrap(), parity.myid());
    assert!(parity.unit_to_world(parity.size()).is_err());
    let lower_comm = world
        .split_by_color(Some(u32::from(me < n.div_ceil(2))))
        .unwrap()
        .unwrap();
    let half = pg.team_from_comm(&lower_comm).unwrap();
    // Team ids: the job's, never reused; all different.
    let ids = [parity.id(), half.id()];
    let mut all_ids = vec![0u64; 2 * n as usize];
    world.all_gather_into(&ids[..], &mut all_ids[..]).unwrap();
    for u in 0..n as usize {
        for v in 0..n as usize {
            let same_parity = u % 2 == v % 2;
            assert_eq!(all_ids[2 * u] == all_ids[2 * v], same_parity);
            let nh = (n as usize).div_ceil(2);
            assert_eq!(
                all_ids[2 * u + 1] == all_ids[2 * v + 1],
                (u < nh) == (v < nh)
            );
        }
        assert_ne!(all_ids[2 * u], 0);
        assert_ne!(all_ids[2 * u], all_ids[2 * u + 1]);
    }
    assert_eq!(pg.team_by_id(parity.id()).unwrap().index(), parity.index());
    assert_eq!(pg.team_by_index(half.index()).unwrap().id(), half.id());
    // A team of a team: the first unit of each parity team alone.
    let first = Group::from_world_ranks(vec![parity.units()[0] as i32], me as i32).unwrap();
    let solo = pg.team_create(&parity, &first).unwrap();
    assert_eq!(solo.is_some(), parity.myid() == 0);

    for round in 0..12u64 {
        // Allocations in every team, interleaved; each written and read by
        // every member.
        let ga = pg.team_memalloc_aligned(&all, 64).unwrap();
        note(ga, &mut seen);
        let gp = pg
            .team_memalloc_aligned(&parity, 8 * u64::from(parity.size()))
            .unwrap();
        note(gp, &mut seen);
        assert_eq!(gp.flags, parity.index());
        assert_eq!(gp.unit, parity.units()[0]);
        let gh = pg.team_memalloc_aligned(&half, 16).unwrap();
        note(gh, &mut seen);
        let gs = solo
            .as_ref()
            .map(|s| pg.team_memalloc_aligned(s, 8).unwrap());
        if let Some(g) = gs {
            note(g, &mut seen);
        }
        // Every parity member writes its slot at every member.
        for &u in parity.units() {
            let g = GlobalPtr::<u64>::from_raw(gp.at_unit(u))
                .add(parity.myid() as usize)
                .unwrap();
            pg.put_value(g, round * 100 + u64::from(me)).unwrap();
        }
        // A unit of the other parity is outside the segment's team.
        let other = me ^ 1;
        if other < n {
            let e = pg.put_value(GlobalPtr::<u64>::from_raw(gp.at_unit(other)), 1);
            assert!(
                matches!(e, Err(Error::Unit { unit, .. }) if unit == other),
                "{e:?}"
            );
        }
        parity.barrier().unwrap();
        let mut got = vec![0u64; parity.size() as usize];
        pg.get(GlobalPtr::from_raw(gp.at_unit(me)), &mut got)
            .unwrap();
        let want: Vec<u64> = parity
            .units()
            .iter()
            .map(|&u| round * 100 + u64::from(u))
            .collect();
        assert_eq!(got, want);
        assert_eq!(pg.segment_team(gp).unwrap().id(), parity.id());
        assert_eq!(
            pg.segment_size(gp.at_unit(me)).unwrap(),
            8 * u64::from(parity.size())
        );
        // Free in a different order than allocated.
        if let (Some(s), Some(g)) = (&solo, gs) {
            assert!(
                pg.team_destroy(s).is_err(),
                "a team with a segment was destroyed"
            );
            pg.team_memfree(g).unwrap();
        }
        pg.team_memfree(gh).unwrap();
        pg.team_memfree(ga).unwrap();
        pg.team_memfree(gp).unwrap();
        // Freed: a clear error, not a crash.
        for g in [ga, gp, gh] {
            let e = pg.get_value(GlobalPtr::<u8>::from_raw(g.at_unit(me)));
            assert!(
                matches!(e, Err(Error::FreedSegment { segment }) if segment == g.segment),
                "{e:?}"
            );
            assert!(matches!(
                pg.team_memfree(g),
                Err(Error::FreedSegment { .. })
            ));
        }
    }
    // Segment ids agree within teams: every unit's last id of the team of
    // all is the same.
    // Destroy and remake: the index comes back, the id does not.
    let old = (half.id(), half.index());
    pg.team_destroy(&half).unwrap();
    assert!(half.barrier().is_err());
    assert!(pg.team_memalloc_aligned(&half, 8).is_err());
    let again = pg.team_from_comm(&lower_comm).unwrap();
    assert_eq!(again.index(), old.1);
    assert!(again.id() > old.0);
    let g = pg.team_memalloc_aligned(&again, 8).unwrap();
    note(g, &mut seen);
    pg.team_memfree(g).unwrap();
    if let Some(s) = solo {
        pg.team_destroy(&s).unwrap();
    }
    pg.team_destroy(&again).unwrap();
    pg.team_destroy(&parity).unwrap();
    assert!(pg.team_destroy(&all).is_err());
    // Collectives on a team.
    let mut x = [u64::from(me)];
    let mut s = [0u64];
    all.all_reduce_into(&x[..], &mut s[..], SystemOperation::Sum)
        .unwrap();
    assert_eq!(s[0], u64::from(n * (n - 1) / 2));
    if me == n - 1 {
        x[0] = 99;
    }
    all.broadcast_into(n - 1, &mut x[..]).unwrap();
    assert_eq!(x[0], 99);
    assert!(all.broadcast_into(n, &mut x[..]).is_err());
    let mut everyone = vec![0u32; n as usize];
    all.all_gather_into(&me, &mut everyone[..]).unwrap();
    assert_eq!(everyone, (0..n).collect::<Vec<_>>());
}

/// Bad input is an error with a clear message, never a crash.
fn bad(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size();
    let me = pg.myid();
    let all = pg.team_all().clone();
    let g = GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, 32).unwrap());
    let mine = g.at_unit(me);
    // Offsets past the part, at the edge and far away.
    assert!(pg.put(mine.add(3).unwrap(), &[1]).is_ok());
    let e = pg.put(mine.add(3).unwrap(), &[1, 2]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Offset {
                len: 16,
                size: 32,
                offset: 24,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("bytes 24..40"), "{e}");
    assert!(matches!(
        pg.get_value(mine.add(4).unwrap()),
        Err(Error::Offset { .. })
    ));
    assert!(matches!(
        pg.fetch_add(mine.add(1 << 40).unwrap(), 1),
        Err(Error::Offset { .. })
    ));
    // A unit that does not exist.
    let e = pg.get_value(g.at_unit(n + 5)).unwrap_err();
    assert!(
        matches!(e, Error::Unit { unit, .. } if unit == n + 5),
        "{e:?}"
    );
    // A segment nobody made, and a wrong team index.
    let e = pg.get_value(GlobalPtr::<u64>::from_raw(Gptr {
        segment: 4000,
        ..mine.raw()
    }));
    assert!(
        matches!(e, Err(Error::UnknownSegment { segment: 4000 })),
        "{e:?}"
    );
    assert!(pg
        .get_value(GlobalPtr::<u64>::from_raw(Gptr {
            flags: 9,
            ..mine.raw()
        }))
        .is_err());
    // Misaligned local pointers, and reading through one.
    assert!(mine
        .cast::<u8>()
        .add(1)
        .unwrap()
        .cast::<u64>()
        .as_ptr(pg)
        .is_err());
    assert!(mine.as_ptr(pg).is_ok() && mine.is_local(pg));
    // Strided arguments.
    let mut two = [0u64; 2];
    assert!(pg.get_strided(mine, &mut two, 0, 1).is_err());
    assert!(pg.get_strided(mine, &mut two, 2, 1).is_err());
    let mut three = [0u64; 3];
    assert!(pg.get_strided(mine, &mut three, 2, 2).is_err());
    assert!(matches!(
        pg.get_strided(mine, &mut two, 1, 4),
        Err(Error::Offset { .. })
    ));
    // Frees of the wrong kind, of another unit's pool memory.
    assert!(pg.team_memfree(Gptr::NULL).is_err());
    assert!(pg.memfree(mine.raw()).is_err());
    let p = pg.memalloc(100).unwrap();
    assert!(pg.memfree(p.at_unit(me + 1)).is_err());
    assert!(pg
        .memfree(Gptr {
            offset: p.offset + 8,
            ..p
        })
        .is_err());
    pg.memfree(p).unwrap();
    assert!(pg.memfree(p).is_err());
    // The pool is finite.
    assert!(pg.memalloc(pgas::DEFAULT_POOL).is_err());
    assert!(pg.memalloc(u64::MAX).is_err());
    // Different sizes in one symmetric allocation: an error at every unit.
    if n > 1 {
        let e = pg.team_memalloc_aligned(&all, 8 * u64::from(me + 1));
        assert!(matches!(e, Err(Error::Arg { .. })), "{e:?}");
    }
    // A global array: indices past the end.
    let a = GlobalArray::<u32>::new(pg, &all, 10, Distribution::Block).unwrap();
    assert!(a.get(10).is_err() && a.put(10, 1).is_err());
    let mut buf = [0u32; 4];
    assert!(a.get_range(8, &mut buf).is_err());
    assert!(a.owner(usize::MAX).is_err());
    assert!(GlobalArray::<u32>::new(pg, &all, 10, Distribution::BlockCyclic(0)).is_err());
    a.free().unwrap();
    world.barrier().unwrap();
    pg.team_memfree(g.raw()).unwrap();
    // The freed segment, from every kind of call.
    assert!(matches!(
        pg.put_value(mine, 1),
        Err(Error::FreedSegment { .. })
    ));
    assert!(matches!(
        pg.fetch_add(mine, 1),
        Err(Error::FreedSegment { .. })
    ));
    assert!(matches!(
        pg.flush(mine.raw()),
        Err(Error::FreedSegment { .. })
    ));
    assert!(matches!(mine.as_ptr(pg), Err(Error::FreedSegment { .. })));
}

/// `GlobalArray` indexing against a plain vector: ranges that cross
/// blocks and units, written by one unit and read by all, in block and
/// block-cyclic distributions of several lengths; local views, owners,
/// local-to-global indices, and another unit's element through a local
/// reference.
fn array(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let me = pg.myid() as usize;
    let all = pg.team_all().clone();
    for len in [0usize, 1, 5, 37, 100] {
        for dist in [
            Distribution::Block,
            Distribution::BlockCyclic(1),
            Distribution::BlockCyclic(3),
            Distribution::BlockCyclic(16),
        ] {
            let a = GlobalArray::<i64>::new(pg, &all, len, dist).unwrap();
            assert_eq!(
                (a.len(), a.is_empty(), a.distribution()),
                (len, len == 0, dist)
            );
            let total: usize = (0..n as u32).map(|u| a.local_len_of(u)).sum();
            assert_eq!(total, len);
            assert_eq!(a.local_len(), a.local_len_of(me as u32));
            let mut model = vec![0i64; len];
            // Unit r % n writes range r of a few ranges, all units check.
            let first = len.min(1);
            let ranges = [
                (0, len),
                (len / 3, len / 2),
                (first, len.saturating_sub(1).max(first)),
            ];
            for (r, &(lo, hi)) in ranges.iter().enumerate() {
                let vals: Vec<i64> = (lo..hi).map(|i| (r * 1000 + i) as i64 - 50).collect();
                if r % n == me {
                    a.put_range(lo, &vals).unwrap();
                }
                model[lo..hi].copy_from_slice(&vals);
                a.barrier().unwrap();
                let mut got = vec![0i64; len];
                a.get_range(0, &mut got).unwrap();
                assert_eq!(got, model, "len {len} {dist:?} range {r}");
                for i in (0..len).step_by(7) {
                    assert_eq!(a.get(i).unwrap(), model[i]);
                }
                a.barrier().unwrap();
            }
            // The local view and the index maps agree with the model.
            // SAFETY: nobody writes the array until the next barrier.
            let local = unsafe { a.local() };
            for (l, &v) in local.iter().enumerate() {
                let i = a.local_to_global(l).unwrap();
                assert_eq!(v, model[i]);
                assert_eq!(a.owner(i).unwrap(), (me as u32, l));
            }
            assert!(a.local_to_global(a.local_len()).is_err());
            if len > 0 {
                // The last element, wherever it is, read through a local
                // reference (the node heap is mapped here).
                let g = a.gptr(len - 1).unwrap();
                // SAFETY: nobody writes the array until the barrier.
                match unsafe { g.as_ref(pg) } {
                    Ok(v) => assert_eq!(*v, model[len - 1]),
                    // On another node: no address here, a get instead.
                    Err(Error::Elsewhere { .. }) => {
                        assert_eq!(pg.get_value(g).unwrap(), model[len - 1])
                    }
                    Err(e) => panic!("{e}"),
                }
                assert_eq!(g.is_local(pg), a.owner(len - 1).unwrap().0 as usize == me);
            }
            a.barrier().unwrap();
            // Each unit writes its own part through the local view.
            // SAFETY: between two barriers nobody else touches it.
            for (i, v) in unsafe { a.local_mut() }.iter_mut().enumerate() {
                *v = -(i as i64);
            }
            a.barrier().unwrap();
            for i in 0..len {
                let (u, l) = a.owner(i).unwrap();
                assert!((u as usize) < n);
                assert_eq!(a.get(i).unwrap(), -(l as i64));
            }
            a.barrier().unwrap();
            a.free().unwrap();
        }
    }
    world.barrier().unwrap();
}

/// Threads of one unit share the context: fetch_add from several at once.
fn threads(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let all = pg.team_all().clone();
    let c = GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, 8).unwrap());
    const T: usize = 3;
    const K: usize = 300;
    std::thread::scope(|s| {
        for _ in 0..T {
            s.spawn(|| {
                for i in 0..K {
                    pg.fetch_add(c.at_unit((i % n) as u32), 1).unwrap();
                }
            });
        }
    });
    all.barrier().unwrap();
    let total: u64 = (0..n)
        .map(|u| pg.atomic_load(c.at_unit(u as u32)).unwrap())
        .sum();
    assert_eq!(total, (n * T * K) as u64);
    world.barrier().unwrap();
    pg.team_memfree(c.raw()).unwrap();
}

/// A small xorshift generator: the same stream in the unit and in the
/// serial replay.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// GUPS: random XOR updates of a distributed table, atomically, from
/// every unit at once; the table equals a serial replay of every unit's
/// stream.
fn gups(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let me = pg.myid() as usize;
    let all = pg.team_all().clone();
    let size = 1usize << 12;
    let len = size * n;
    const UPDATES: usize = 4000;
    let seed = |u: usize| 0x9E37_79B9_7F4A_7C15u64 ^ ((u as u64 + 1) * 0x1234_5678_9ABC);
    for dist in [Distribution::Block, Distribution::BlockCyclic(64)] {
        let t = GlobalArray::<u64>::new(pg, &all, len, dist).unwrap();
        // SAFETY: each unit initialises its own part; nobody reads or
        // writes the table before the barrier.
        unsafe { t.for_each_local(3, |i, v| *v = i as u64) };
        t.barrier().unwrap();
        let mut s = seed(me);
        for _ in 0..UPDATES {
            let r = xorshift(&mut s);
            let g = t.gptr((r % len as u64) as usize).unwrap();
            pg.fetch_op(g, r, SystemOperation::BitwiseXor).unwrap();
        }
        pg.quiet().unwrap();
        t.barrier().unwrap();
        let mut model: Vec<u64> = (0..len as u64).collect();
        for u in 0..n {
            let mut s = seed(u);
            for _ in 0..UPDATES {
                let r = xorshift(&mut s);
                model[(r % len as u64) as usize] ^= r;
            }
        }
        let mut table = vec![0u64; len];
        t.get_range(0, &mut table).unwrap();
        assert_eq!(table, model, "{dist:?}");
        // The local view agrees with the model.
        // SAFETY: nobody writes the table until the barrier below.
        for (i, &v) in unsafe { t.iter_local() } {
            assert_eq!(v, model[i]);
        }
        assert_eq!(t.local_copy().len(), t.local_len());
        t.barrier().unwrap();
        t.free().unwrap();
    }
    world.barrier().unwrap();
}

const NX: usize = 10;
const NY: usize = 9;
const NZ: usize = 13;
const STEPS: usize = 12;

fn idx(x: usize, y: usize, z: usize) -> usize {
    (z * NY + y) * NX + x
}

fn initial(i: usize) -> f64 {
    let (x, y, z) = (i % NX, (i / NX) % NY, i / (NX * NY));
    if x == 0 || z == NZ - 1 {
        100.0
    } else {
        ((x * 7 + y * 3 + z) % 11) as f64
    }
}

/// One step of the stencil at interior cell (x, y, z) of `u` (any
/// indexing, through `at`).
fn stencil(at: impl Fn(usize, usize, usize) -> f64, x: usize, y: usize, z: usize) -> f64 {
    let c = at(x, y, z);
    let sum = at(x - 1, y, z)
        + at(x + 1, y, z)
        + at(x, y - 1, z)
        + at(x, y + 1, z)
        + at(x, y, z - 1)
        + at(x, y, z + 1);
    c + 0.1 * (sum - 6.0 * c)
}

fn interior(x: usize, y: usize, z: usize) -> bool {
    x > 0 && y > 0 && z > 0 && x < NX - 1 && y < NY - 1 && z < NZ - 1
}

/// A 3D heat stencil on a `GlobalArray` distributed by planes, halo
/// planes fetched from the neighbours with `get_range`; equal, bit for
/// bit, to the serial computation.
fn heat(world: &SimpleCommunicator, pg: &Pgas) {
    let n = pg.size() as usize;
    let all = pg.team_all().clone();
    let plane = NX * NY;
    let planes_per_unit = NZ.div_ceil(n);
    let a = GlobalArray::<f64>::new(
        pg,
        &all,
        NX * NY * NZ,
        Distribution::BlockCyclic(plane * planes_per_unit),
    )
    .unwrap();
    // SAFETY: nobody else touches the local part before the barrier.
    unsafe { a.for_each_local(2, |i, v| *v = initial(i)) };
    a.barrier().unwrap();
    let first = if a.local_len() == 0 {
        0
    } else {
        a.local_to_global(0).unwrap() / plane
    };
    let nplanes = a.local_len() / plane;
    for _ in 0..STEPS {
        // Read phase: the local planes and one halo plane on each side.
        let lo = first.saturating_sub(1);
        let hi = (first + nplanes + 1).min(NZ);
        let mut u = vec![0f64; (hi - lo) * plane];
        if nplanes > 0 {
            a.get_range(lo * plane, &mut u).unwrap();
        }
        let at = |x: usize, y: usize, z: usize| u[idx(x, y, z - lo)];
        let mut next = vec![0f64; nplanes * plane];
        for z in first..first + nplanes {
            for y in 0..NY {
                for x in 0..NX {
                    next[idx(x, y, z - first)] = if interior(x, y, z) {
                        stencil(at, x, y, z)
                    } else {
                        at(x, y, z)
                    };
                }
            }
        }
        a.barrier().unwrap();
        // Write phase: only the local part, nobody reads meanwhile.
        // SAFETY: between two barriers nobody else reads or writes it.
        unsafe { a.local_mut() }.copy_from_slice(&next);
        a.barrier().unwrap();
    }
    // The serial computation.
    let mut s: Vec<f64> = (0..NX * NY * NZ).map(initial).collect();
    for _ in 0..STEPS {
        let mut t = s.clone();
        for z in 0..NZ {
            for y in 0..NY {
                for x in 0..NX {
                    if interior(x, y, z) {
                        t[idx(x, y, z)] = stencil(|x, y, z| s[idx(x, y, z)], x, y, z);
                    }
                }
            }
        }
        s = t;
    }
    let mut got = vec![0f64; NX * NY * NZ];
    a.get_range(0, &mut got).unwrap();
    assert!(
        got.iter().zip(&s).all(|(a, b)| a.to_bits() == b.to_bits()),
        "the stencil differs from the serial one"
    );
    assert!(s.iter().any(|&v| v != 0.0 && v != 100.0));
    a.barrier().unwrap();
    a.free().unwrap();
    world.barrier().unwrap();
}

/// A team allocation freed while another thread of every unit keeps
/// putting into it through the direct path (the free at a different
/// moment each round): every put succeeds or fails with `FreedSegment`,
/// none succeeds once the free has returned, and a new allocation taking
/// the memory back keeps what is written into it.
fn free_under_access(world: &SimpleCommunicator, pg: &Pgas) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let all = pg.team_all().clone();
    let me = pg.myid();
    let n = pg.size();
    for round in 0..20u64 {
        let g = GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, 64).unwrap());
        let target = g.at_unit((me + 1) % n);
        let freed = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut k = 0u64;
                loop {
                    // Acquire: pairs with the Release store after the free.
                    let after = freed.load(Ordering::Acquire);
                    match pg.put_value(target, k) {
                        Ok(()) => assert!(!after, "a put succeeded after the free returned"),
                        Err(Error::FreedSegment { .. }) => break,
                        Err(e) => panic!("unexpected error {e:?}"),
                    }
                    k += 1;
                }
            });
            std::thread::sleep(std::time::Duration::from_micros(50 * round));
            world.barrier().unwrap();
            pg.team_memfree(g.raw()).unwrap();
            // Release: the free happened before the thread's next look.
            freed.store(true, Ordering::Release);
        });
        // The memory a later allocation reuses is not written by the
        // thread any more.
        let h = GlobalPtr::<u64>::from_raw(pg.team_memalloc_aligned(&all, 64).unwrap());
        let mine = h.at_unit(me);
        pg.put_value(mine, 7 + round).unwrap();
        world.barrier().unwrap();
        assert_eq!(pg.get_value(mine).unwrap(), 7 + round);
        world.barrier().unwrap();
        pg.team_memfree(h.raw()).unwrap();
    }
}

fn run(role: &str) -> Option<()> {
    let u = hmpi_core::init().expect("init");
    let world = u.world();
    let pg = Pgas::new(&world).expect("the global address space");
    let f: fn(&SimpleCommunicator, &Pgas) = match role {
        "putget" => putget,
        "atomics" => atomics,
        "atomic_sizes" => atomic_sizes,
        "overlap" => overlap,
        "alloc" => alloc,
        "bad" => bad,
        "gups" => gups,
        "array" => array,
        "threads" => threads,
        "free_under_access" => free_under_access,
        "heat" => heat,
        _ => return None,
    };
    f(&world, &pg);
    // A team allocation left alive is freed by finalize.
    let _left = pg.team_memalloc_aligned(&pg.team_all().clone(), 8).unwrap();
    pg.finalize().expect("finalize");
    Some(())
}

fn each(role: &str, ranks: &[u32]) {
    for &n in ranks {
        let r = rank_tests::launch(role, n, &[]);
        rank_tests::assert_ran(&r, role);
    }
}

fn main() {
    rank_tests::main(
        run,
        &[
            ("put_get_of_many_sizes_between_every_pair", || {
                each("putget", &[1, 2, 3, 4])
            }),
            ("atomics_from_every_unit_at_once", || {
                each("atomics", &[1, 2, 4])
            }),
            ("atomics_of_every_element_size", || {
                each("atomic_sizes", &[1, 2, 3])
            }),
            ("overlapping_non_blocking_puts_to_one_target", || {
                each("overlap", &[2, 4])
            }),
            ("allocation_in_teams_and_sub_teams", || {
                each("alloc", &[1, 2, 3, 4])
            }),
            ("bad_input_is_an_error", || each("bad", &[1, 3])),
            ("global_array_indexing_against_a_vector", || {
                each("array", &[1, 2, 3, 4])
            }),
            ("threads_of_a_unit_share_the_context", || {
                each("threads", &[1, 3])
            }),
            ("a_free_waits_for_accesses_in_flight", || {
                each("free_under_access", &[1, 2, 3])
            }),
            ("gups_equals_a_serial_replay", || each("gups", &[1, 2, 4])),
            ("heat_stencil_equals_the_serial_one", || {
                each("heat", &[1, 2, 3, 4])
            }),
        ],
    );
}
