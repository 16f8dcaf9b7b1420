//! Process topologies and neighbourhood collectives across real ranks (1
//! to 6, more ranks than cores): a 2-D halo exchange with
//! `neighbor_all_to_all_into` checked against the same exchange by
//! point-to-point, on periodic and non-periodic grids, from heap and
//! stack buffers; the gather and varcount forms; sub-grids; distributed
//! graphs; errors.

#![allow(clippy::needless_range_loop)] // index loops mirror the definitions

use hmpi_core::collective::PartitionMut;
use hmpi_core::launch::rank_tests;
use hmpi_core::prelude::*;
use hmpi_core::topology::{dims_create, CartesianCommunicator, TopologyCommunicator, TopologyKind};
use shmheap::ShmHeap;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Element `i` of the halo that rank `r` sends in direction `k`.
fn halo(r: i32, k: usize, i: usize) -> f64 {
    f64::from(r) * 1000.0 + k as f64 * 100.0 + i as f64 + 0.25
}

const UNTOUCHED: f64 = -1.0;

/// The halo exchange by point-to-point: per dimension, block `2d + 1` up
/// and block `2d` down, received into blocks `2d` (from below) and
/// `2d + 1` (from above); tags tell the two directions apart when both
/// neighbours are the same process.
fn reference(grid: &CartesianCommunicator, send: &[f64], len: usize) -> Vec<f64> {
    let mut out = vec![UNTOUCHED; 4 * len];
    for d in 0..2 {
        let (below, above) = grid.shift(d, 1).unwrap();
        let p = |r: Option<i32>| grid.process_at_rank(r.unwrap_or(PROC_NULL));
        let b = 2 * d as usize;
        let (lo, hi) = out.split_at_mut((b + 1) * len);
        send_receive_into_with_tags(
            &send[(b + 1) * len..(b + 2) * len],
            &p(above),
            10 + b as i32,
            &mut lo[b * len..],
            &p(below),
            10 + b as i32,
        )
        .unwrap();
        send_receive_into_with_tags(
            &send[b * len..(b + 1) * len],
            &p(below),
            11 + b as i32,
            &mut hi[..len],
            &p(above),
            11 + b as i32,
        )
        .unwrap();
    }
    out
}

fn halo_rank(u: Universe) {
    let world = u.world();
    let mut dims = [0, 0];
    dims_create(world.size(), &mut dims).unwrap();
    for periodic in [true, false] {
        let grid = world
            .create_cartesian_communicator(&dims, &[periodic, periodic], true)
            .unwrap()
            .expect("every rank is in the grid");
        assert_eq!(grid.topology_kind(), Some(TopologyKind::Cartesian));
        let layout = grid.get_layout();
        assert_eq!(layout.dims, dims);
        assert_eq!(
            grid.coordinates_to_rank(&layout.coords).unwrap(),
            grid.rank()
        );
        assert_eq!(
            grid.rank_to_coordinates(grid.rank()).unwrap(),
            layout.coords
        );
        for len in [0usize, 1, 5, 200, 40_000] {
            let me = grid.rank();
            let send: Vec<f64> = (0..4 * len)
                .map(|x| halo(me, x / len.max(1), x % len.max(1)))
                .collect();
            let want = reference(&grid, &send, len);
            // Heap buffers (read in place by the neighbours).
            let mut got = vec![UNTOUCHED; 4 * len];
            grid.neighbor_all_to_all_into(&send[..], &mut got[..])
                .unwrap();
            assert_eq!(got, want, "heap halo, len {len}, periodic {periodic}");
            // Blocks of PROC_NULL neighbours stay as they were.
            for (m, s) in [grid.shift(0, 1).unwrap(), grid.shift(1, 1).unwrap()]
                .into_iter()
                .flat_map(|(a, b)| [a, b])
                .enumerate()
            {
                if s.is_none() {
                    assert!(got[m * len..(m + 1) * len].iter().all(|&x| x == UNTOUCHED));
                }
            }
            // Nonblocking, two in flight at once, completed out of order.
            let mut got2 = vec![UNTOUCHED; 4 * len];
            let mine = [me; 1];
            let mut ranks = [-5i32; 4];
            request::scope(|sc| {
                let a = grid
                    .immediate_neighbor_all_to_all_into(sc, &send[..], &mut got2[..])
                    .unwrap();
                let b = grid
                    .immediate_neighbor_all_gather_into(sc, &mine[..], &mut ranks[..])
                    .unwrap();
                b.wait().unwrap();
                a.wait().unwrap();
            });
            assert_eq!(got2, want, "immediate halo, len {len}");
            for (m, s) in [grid.shift(0, 1).unwrap(), grid.shift(1, 1).unwrap()]
                .into_iter()
                .flat_map(|(a, b)| [a, b])
                .enumerate()
            {
                assert_eq!(ranks[m], s.unwrap_or(-5));
            }
            if len <= 5 {
                // Stack buffers (staged in the heap by the sender).
                let mut s = [0.0f64; 20];
                s[..4 * len].copy_from_slice(&send);
                let mut r = [UNTOUCHED; 20];
                grid.neighbor_all_to_all_into(&s[..4 * len], &mut r[..4 * len])
                    .unwrap();
                assert_eq!(&r[..4 * len], &want[..], "stack halo, len {len}");
            }
        }
        // allgather: every neighbour's rank, UNTOUCHED off the edges.
        let mut g = [-5i32; 8];
        grid.neighbor_all_gather_into(&[grid.rank(), 7][..], &mut g[..])
            .unwrap();
        for (m, s) in [grid.shift(0, 1).unwrap(), grid.shift(1, 1).unwrap()]
            .into_iter()
            .flat_map(|(a, b)| [a, b])
            .enumerate()
        {
            let want = s.map_or([-5, -5], |r| [r, 7]);
            assert_eq!(g[2 * m..2 * m + 2], want);
        }
        // varcount: block m at 3m, m + 1 elements; gaps untouched.
        let counts = [1, 2, 3, 4];
        let displs = [0, 3, 6, 9];
        let mut v = [-5i32; 13];
        {
            let mut p = PartitionMut::new(&mut v[..], &counts[..], &displs[..]);
            let mine = [grid.rank(); 4];
            // Every rank sends 1..=4 elements as its neighbours expect:
            // allgatherv needs equal blocks from all, so use alltoallv.
            let sc = [2, 1, 4, 3]; // block k as its receiver expects it (pairing)
            let sd = [0, 0, 0, 0];
            let part = Partition::new(&mine[..], &sc[..], &sd[..]);
            grid.neighbor_all_to_all_varcount_into(&part, &mut p)
                .unwrap();
        }
        for (m, s) in [grid.shift(0, 1).unwrap(), grid.shift(1, 1).unwrap()]
            .into_iter()
            .flat_map(|(a, b)| [a, b])
            .enumerate()
        {
            for i in 0..3 {
                let want = match s {
                    Some(r) if i <= m => r,
                    _ => -5,
                };
                assert_eq!(v[3 * m + i], want, "alltoallv block {m} element {i}");
            }
        }
        // The rows of the grid.
        let rows = grid.subgroup(&[false, true]).unwrap();
        assert_eq!(rows.size(), dims[1]);
        assert_eq!(rows.rank(), layout.coords[1]);
        assert_eq!(rows.num_dimensions(), 1);
        let d = grid.duplicate().unwrap();
        assert_eq!(d.topology_kind(), Some(TopologyKind::Cartesian));
        let s = grid.split(Some(0), 0).unwrap().unwrap();
        assert_eq!(s.topology_kind(), None);
        assert!(matches!(
            s.neighbor_all_gather_into(&[1][..], &mut [0][..]),
            Err(Error::Topology { .. })
        ));
    }
    assert!(matches!(
        world.neighbor_all_to_all_into(&[1.0][..], &mut [0.0][..]),
        Err(Error::Topology { .. })
    ));
    assert!(matches!(
        world.create_cartesian_communicator(&[world.size() + 1], &[false], false),
        Err(Error::Topology { .. })
    ));
    assert!(matches!(
        world.create_cartesian_communicator(&[0], &[false], false),
        Err(Error::Dims { .. })
    ));
}

fn dist_graph_rank(u: Universe) {
    let world = u.world();
    let (me, n) = (world.rank(), world.size());
    // A directed ring: in from me-1 (weight 1) and me+2 (weight 2), out to
    // me+1 (weight 1) and me-2 (weight 2).
    let g = world
        .create_dist_graph_communicator_adjacent(
            &[(me + n - 1) % n, (me + 2) % n],
            Some(&[1, 2]),
            &[(me + 1) % n, (me + 2 * n - 2) % n],
            Some(&[1, 2]),
            false,
        )
        .unwrap();
    let t = g.topology().unwrap();
    let dg = t.dist_graph().unwrap();
    assert!(dg.is_weighted());
    let send: Vec<i32> = dg
        .destinations()
        .iter()
        .zip(dg.destination_weights())
        .map(|(&d, &w)| me * 10000 + d * 100 + w)
        .collect();
    let mut got = [0i32; 2];
    g.neighbor_all_to_all_into(&send[..], &mut got[..]).unwrap();
    for m in 0..2 {
        assert_eq!(
            got[m],
            dg.sources()[m] * 10000 + me * 100 + dg.source_weights()[m]
        );
    }
    // The general form: every process gives edges me -> me+1 (weight 3)
    // and me+1 -> me (weight 4).
    let g = world
        .create_dist_graph_communicator(
            &[me, (me + 1) % n],
            &[1, 1],
            &[(me + 1) % n, me],
            Some(&[3, 4]),
            false,
        )
        .unwrap();
    let t = g.topology().unwrap();
    let dg = t.dist_graph().unwrap();
    assert_eq!((dg.sources().len(), dg.destinations().len()), (2, 2));
    let send: Vec<i32> = dg
        .destinations()
        .iter()
        .zip(dg.destination_weights())
        .map(|(&d, &w)| me * 10000 + d * 100 + w)
        .collect();
    let mut got = [0i32; 2];
    g.neighbor_all_to_all_into(&send[..], &mut got[..]).unwrap();
    for m in 0..2 {
        assert_eq!(
            got[m],
            dg.sources()[m] * 10000 + me * 100 + dg.source_weights()[m]
        );
    }
    assert!(matches!(
        world.create_dist_graph_communicator_adjacent(&[n], None, &[], None, false),
        Err(Error::Rank { .. })
    ));
    if n >= 2 {
        // Rank 0 lists an edge to 1 that 1 does not list: every process
        // refuses the graph (none waits for the others).
        let outs: &[i32] = if me == 0 { &[1] } else { &[] };
        assert!(matches!(
            world.create_dist_graph_communicator_adjacent(&[], None, outs, None, false),
            Err(Error::Topology { .. })
        ));
        world.barrier().unwrap();
    }
}

fn main() {
    rank_tests::main(
        |role| {
            let u = hmpi_core::init().expect("init");
            match role {
                "halo" => halo_rank(u),
                "dist_graph" => dist_graph_rank(u),
                _ => return None,
            }
            Some(())
        },
        &[
            ("halo_exchange_matches_point_to_point", || {
                for n in 1..=6 {
                    let r = rank_tests::launch("halo", n, &[]);
                    rank_tests::assert_ran(&r, "halo");
                }
            }),
            ("distributed_graphs_pair_their_edges", || {
                for n in [1, 2, 3, 5] {
                    let r = rank_tests::launch("dist_graph", n, &[]);
                    rank_tests::assert_ran(&r, "dist_graph");
                }
            }),
        ],
    );
}
