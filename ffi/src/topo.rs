//! Process topologies and neighbourhood collectives of the C interface:
//! `MPI_Dims_create`, `MPI_Cart_*`, `MPI_Graph_*`, `MPI_Dist_graph_*`,
//! `MPI_Topo_test`, and `MPI_Neighbor_allgather(v)` /
//! `MPI_Neighbor_alltoall(v,w)` in their blocking, nonblocking
//! (`MPI_Ineighbor_*`) and persistent (`MPI_Neighbor_*_init`) forms, each
//! also with large counts (`_c`: `MPI_Count` counts, `MPI_Aint`
//! displacements).
//!
//! Everything here marshals: the topologies are `hmpi_core::topology`'s,
//! kept with the runtime's communicator, and the neighbourhood
//! collectives are `hmpi_core::collective::neighbor`'s. Their requests
//! are the collectives' kind (see [`crate::coll`]), so `MPI_Wait`,
//! `MPI_Test` and `MPI_Start` work on them.
//!
//! In C:
//! ```c
//! int dims[2] = {0, 0}, periods[2] = {1, 1};
//! MPI_Dims_create(size, 2, dims);
//! MPI_Comm grid;
//! MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
//! double halo_out[4], halo_in[4];
//! MPI_Neighbor_alltoall(halo_out, 1, MPI_DOUBLE, halo_in, 1, MPI_DOUBLE, grid);
//! ```

use crate::abi::{self, Aint, Comm, Count, Datatype, Info, Request};
use crate::coll::{dtype, run, How};
use crate::coll_large::Int;
use crate::comm::{ints, store_comm, CommRef};
use crate::errors::{api, api_comm, err, out, put, MpiError, Res};
use hmpi_core::collective::neighbor::{self, Block};
use hmpi_core::collective::raw::Mode;
use hmpi_core::datatype::Datatype as CoreType;
use hmpi_core::topology::{
    self, CartesianCommunicator, Topology, TopologyCommunicator, TopologyKind,
};
use hmpi_core::traits::Communicator;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// `MPI_CART`, `MPI_GRAPH`, `MPI_DIST_GRAPH` (`MPI_Topo_test`).
const CART: c_int = 211;
const GRAPH: c_int = 212;
const DIST_GRAPH: c_int = 213;
/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY`: sentinel addresses.
const UNWEIGHTED: usize = 10;
const WEIGHTS_EMPTY: usize = 11;
/// `MPI_IN_PLACE` (not allowed in neighbourhood collectives).
const IN_PLACE: usize = 1;

fn topo_of(c: &CommRef) -> Res<Arc<Topology>> {
    c.comm.topology().ok_or_else(|| {
        MpiError::new(
            abi::ERR_TOPOLOGY,
            "the communicator has no process topology",
        )
    })
}

/// `n` ints from C (`n` a count given by the caller).
///
/// # Safety
/// `p` holds `n` ints when not null.
unsafe fn list<'a>(p: *const c_int, n: c_int, what: &str) -> Res<&'a [c_int]> {
    // SAFETY: the caller's guarantee.
    unsafe { ints(p, n, what) }
}

/// Writes `v` (at most `max` of it) to `p`.
///
/// # Safety
/// `p` holds `max` ints when not null.
unsafe fn write_ints(p: *mut c_int, max: c_int, v: &[i32], what: &str) -> Res {
    let max = usize::try_from(max)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative size {max} of {what}")))?;
    let n = v.len().min(max);
    if n == 0 {
        return Ok(());
    }
    let p = out(p, what)?;
    // SAFETY: `p` holds `max >= n` ints (the caller's guarantee).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, n) };
    Ok(())
}

/// Weights from C: `None` for `MPI_UNWEIGHTED`, empty for
/// `MPI_WEIGHTS_EMPTY` (only with no edges).
///
/// # Safety
/// `p` holds `n` ints unless it is null or a sentinel.
unsafe fn weights_arg(p: *const c_int, n: c_int, what: &str) -> Res<Option<Vec<i32>>> {
    match p as usize {
        UNWEIGHTED => Ok(None),
        WEIGHTS_EMPTY if n == 0 => Ok(Some(Vec::new())),
        WEIGHTS_EMPTY => err(
            abi::ERR_ARG,
            format!("MPI_WEIGHTS_EMPTY for {n} {what} (only for none)"),
        ),
        // SAFETY: the caller's guarantee.
        _ => Ok(Some(unsafe { list(p, n, what) }?.to_vec())),
    }
}

fn flags(v: &[c_int]) -> Vec<bool> {
    v.iter().map(|&x| x != 0).collect()
}

fn ndims_arg(ndims: c_int) -> Res<c_int> {
    if ndims < 0 {
        return err(
            abi::ERR_DIMS,
            format!("{ndims} dimensions (must be at least 0)"),
        );
    }
    Ok(ndims)
}

mpi_fn! {
    /// A balanced grid of `nnodes` processes in `ndims` dimensions: the
    /// zero entries of `dims` are filled, the others kept.
    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
        api("MPI_Dims_create", || {
            let n = usize::try_from(ndims_arg(ndims)?).unwrap_or(0);
            if n > 0 {
                out(dims, "dims")?;
            }
            // SAFETY: `dims` holds `ndims` ints (MPI's contract), checked non-null.
            let d = if n == 0 { &mut [][..] } else { unsafe { std::slice::from_raw_parts_mut(dims, n) } };
            let mut v = d.to_vec();
            topology::dims_create(nnodes, &mut v)?;
            d.copy_from_slice(&v);
            Ok(())
        })
    }

    /// A communicator of the first `dims[0] × …` processes of `comm_old`
    /// with a Cartesian topology (`MPI_COMM_NULL` on the others); the
    /// order of the ranks is kept.
    fn MPI_Cart_create / PMPI_Cart_create(comm_old: Comm, ndims: c_int, dims: *const c_int,
        periods: *const c_int, reorder: c_int, comm_cart: *mut Comm) -> c_int {
        api_comm("MPI_Cart_create", comm_old, |c| {
            out(comm_cart, "comm_cart")?;
            let n = ndims_arg(ndims)?;
            // SAFETY: the arrays hold `ndims` ints (MPI's contract).
            let d = unsafe { list(dims, n, "dims") }?;
            // SAFETY: as above.
            let p = flags(unsafe { list(periods, n, "periods") }?);
            let cart = c.comm.create_cartesian_communicator(d, &p, reorder != 0)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, cart.map(CartesianCommunicator::into_communicator), comm_cart) }
        })
    }

    /// The number of dimensions of a Cartesian communicator.
    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: Comm, ndims: *mut c_int) -> c_int {
        api_comm("MPI_Cartdim_get", comm, |c| {
            let t = topo_of(c)?;
            let (d, _) = t.cartesian_dims()?;
            // SAFETY: the caller's int pointer.
            unsafe { put(ndims, "ndims", d.len() as c_int) }
        })
    }

    /// Dimensions, periods and this process's coordinates (at most
    /// `maxdims` of each).
    fn MPI_Cart_get / PMPI_Cart_get(comm: Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int,
        coords: *mut c_int) -> c_int {
        api_comm("MPI_Cart_get", comm, |c| {
            let t = topo_of(c)?;
            let (d, p) = t.cartesian_dims()?;
            let me = t.coordinates_of(c.comm.rank(), c.comm.size())?;
            let p: Vec<i32> = p.iter().map(|&x| i32::from(x)).collect();
            // SAFETY: the arrays hold `maxdims` ints (MPI's contract).
            unsafe {
                write_ints(dims, maxdims, d, "dims")?;
                write_ints(periods, maxdims, &p, "periods")?;
                write_ints(coords, maxdims, &me, "coords")
            }
        })
    }

    /// The coordinates of `rank`.
    fn MPI_Cart_coords / PMPI_Cart_coords(comm: Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
        api_comm("MPI_Cart_coords", comm, |c| {
            let v = topo_of(c)?.coordinates_of(rank, c.comm.size())?;
            // SAFETY: `coords` holds `maxdims` ints (MPI's contract).
            unsafe { write_ints(coords, maxdims, &v, "coords") }
        })
    }

    /// The rank at `coords` (periodic dimensions wrap).
    fn MPI_Cart_rank / PMPI_Cart_rank(comm: Comm, coords: *const c_int, rank: *mut c_int) -> c_int {
        api_comm("MPI_Cart_rank", comm, |c| {
            let t = topo_of(c)?;
            let n = t.cartesian_dims()?.0.len() as c_int;
            // SAFETY: `coords` holds one int per dimension (MPI's contract).
            let v = unsafe { list(coords, n, "coords") }?;
            let r = t.rank_at(v)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(rank, "rank", r) }
        })
    }

    /// The source and destination of a shift by `disp` along `direction`
    /// (`MPI_PROC_NULL` off the edge of a non-periodic dimension).
    fn MPI_Cart_shift / PMPI_Cart_shift(comm: Comm, direction: c_int, disp: c_int,
        rank_source: *mut c_int, rank_dest: *mut c_int) -> c_int {
        api_comm("MPI_Cart_shift", comm, |c| {
            let (s, d) = topo_of(c)?.shift_of(c.comm.rank(), direction, disp)?;
            let conv = |r: i32| if r == topology::PROC_NULL { abi::PROC_NULL } else { r };
            out(rank_dest, "rank_dest")?;
            // SAFETY: the caller's int pointers.
            unsafe {
                put(rank_source, "rank_source", conv(s))?;
                put(rank_dest, "rank_dest", conv(d))
            }
        })
    }

    /// The sub-grid of the dimensions kept by `remain_dims`, through this
    /// process.
    fn MPI_Cart_sub / PMPI_Cart_sub(comm: Comm, remain_dims: *const c_int, newcomm: *mut Comm) -> c_int {
        api_comm("MPI_Cart_sub", comm, |c| {
            out(newcomm, "newcomm")?;
            let cart = CartesianCommunicator::from_communicator(c.comm.clone()).ok_or_else(|| {
                MpiError::new(abi::ERR_TOPOLOGY, "the communicator has no Cartesian topology")
            })?;
            // SAFETY: `remain_dims` holds one int per dimension (MPI's contract).
            let keep = flags(unsafe { list(remain_dims, cart.num_dimensions(), "remain_dims") }?);
            let sub = cart.subgroup(&keep)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(sub.into_communicator()), newcomm) }
        })
    }

    /// This process's rank in a grid made without reordering
    /// (`MPI_UNDEFINED` outside it).
    fn MPI_Cart_map / PMPI_Cart_map(comm: Comm, ndims: c_int, dims: *const c_int,
        periods: *const c_int, newrank: *mut c_int) -> c_int {
        api_comm("MPI_Cart_map", comm, |c| {
            let n = ndims_arg(ndims)?;
            // SAFETY: the arrays hold `ndims` ints (MPI's contract).
            let d = unsafe { list(dims, n, "dims") }?;
            // SAFETY: as above.
            let p = flags(unsafe { list(periods, n, "periods") }?);
            let r = topology::cart_map(&c.comm, d, &p)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(newrank, "newrank", r.unwrap_or(abi::UNDEFINED)) }
        })
    }

    /// A communicator of the first `nnodes` processes with a graph
    /// topology (`MPI_COMM_NULL` on the others).
    fn MPI_Graph_create / PMPI_Graph_create(comm_old: Comm, nnodes: c_int, indx: *const c_int,
        edges: *const c_int, reorder: c_int, comm_graph: *mut Comm) -> c_int {
        api_comm("MPI_Graph_create", comm_old, |c| {
            out(comm_graph, "comm_graph")?;
            // SAFETY: `indx` holds `nnodes` ints (MPI's contract).
            let index = unsafe { list(indx, nnodes, "index") }?;
            let ne = index.last().copied().unwrap_or(0);
            // SAFETY: `edges` holds `index[nnodes-1]` ints (MPI's contract).
            let e = unsafe { list(edges, ne, "edges") }?;
            let g = c.comm.create_graph_communicator(index, e, reorder != 0)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, g, comm_graph) }
        })
    }

    /// The number of nodes and edges of a graph topology.
    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: Comm, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
        api_comm("MPI_Graphdims_get", comm, |c| {
            let t = topo_of(c)?;
            let (i, e) = t.graph_parts()?;
            out(nedges, "nedges")?;
            // SAFETY: the caller's int pointers.
            unsafe {
                put(nnodes, "nnodes", i.len() as c_int)?;
                put(nedges, "nedges", e.len() as c_int)
            }
        })
    }

    /// A graph topology's index and edges (at most `maxindex` / `maxedges`).
    fn MPI_Graph_get / PMPI_Graph_get(comm: Comm, maxindex: c_int, maxedges: c_int, indx: *mut c_int,
        edges: *mut c_int) -> c_int {
        api_comm("MPI_Graph_get", comm, |c| {
            let t = topo_of(c)?;
            let (i, e) = t.graph_parts()?;
            // SAFETY: the arrays hold `maxindex` / `maxedges` ints (MPI's contract).
            unsafe {
                write_ints(indx, maxindex, i, "index")?;
                write_ints(edges, maxedges, e, "edges")
            }
        })
    }

    /// The number of neighbours of `rank` in a graph topology.
    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: Comm, rank: c_int,
        nneighbors: *mut c_int) -> c_int {
        api_comm("MPI_Graph_neighbors_count", comm, |c| {
            let n = topo_of(c)?.graph_neighbors(rank)?.len();
            // SAFETY: the caller's int pointer.
            unsafe { put(nneighbors, "nneighbors", n as c_int) }
        })
    }

    /// The neighbours of `rank` in a graph topology (at most `maxneighbors`).
    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: Comm, rank: c_int, maxneighbors: c_int,
        neighbors: *mut c_int) -> c_int {
        api_comm("MPI_Graph_neighbors", comm, |c| {
            let t = topo_of(c)?;
            let v = t.graph_neighbors(rank)?;
            // SAFETY: `neighbors` holds `maxneighbors` ints (MPI's contract).
            unsafe { write_ints(neighbors, maxneighbors, v, "neighbors") }
        })
    }

    /// This process's rank in a graph made without reordering
    /// (`MPI_UNDEFINED` outside it).
    fn MPI_Graph_map / PMPI_Graph_map(comm: Comm, nnodes: c_int, indx: *const c_int,
        edges: *const c_int, newrank: *mut c_int) -> c_int {
        api_comm("MPI_Graph_map", comm, |c| {
            // SAFETY: `indx` holds `nnodes` ints (MPI's contract).
            let index = unsafe { list(indx, nnodes, "index") }?;
            let ne = index.last().copied().unwrap_or(0);
            // SAFETY: `edges` holds `index[nnodes-1]` ints (MPI's contract).
            let e = unsafe { list(edges, ne, "edges") }?;
            let r = topology::graph_map(&c.comm, index, e)?;
            // SAFETY: the caller's int pointer.
            unsafe { put(newrank, "newrank", r.unwrap_or(abi::UNDEFINED)) }
        })
    }

    /// A distributed graph communicator from edges any process may give.
    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(comm_old: Comm, n: c_int, sources: *const c_int,
        degrees: *const c_int, destinations: *const c_int, weights: *const c_int, _info: Info,
        reorder: c_int, comm_dist_graph: *mut Comm) -> c_int {
        api_comm("MPI_Dist_graph_create", comm_old, |c| {
            out(comm_dist_graph, "comm_dist_graph")?;
            // SAFETY: the arrays hold `n` ints (MPI's contract).
            let s = unsafe { list(sources, n, "sources") }?;
            // SAFETY: as above.
            let d = unsafe { list(degrees, n, "degrees") }?;
            let total: i64 = d.iter().map(|&x| i64::from(x.max(0))).sum();
            let total = c_int::try_from(total)
                .map_err(|_| MpiError::new(abi::ERR_ARG, "too many edges"))?;
            // SAFETY: `destinations` and `weights` hold one int per edge.
            let dst = unsafe { list(destinations, total, "destinations") }?;
            // SAFETY: as above.
            let w = unsafe { weights_arg(weights, total, "edges") }?;
            let g = c.comm.create_dist_graph_communicator(s, d, dst, w.as_deref(), reorder != 0)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(g), comm_dist_graph) }
        })
    }

    /// A distributed graph communicator from each process's own in- and
    /// out-neighbours.
    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm_old: Comm,
        indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int,
        destinations: *const c_int, destweights: *const c_int, _info: Info, reorder: c_int,
        comm_dist_graph: *mut Comm) -> c_int {
        api_comm("MPI_Dist_graph_create_adjacent", comm_old, |c| {
            out(comm_dist_graph, "comm_dist_graph")?;
            // SAFETY: the arrays hold their degree's ints (MPI's contract).
            let s = unsafe { list(sources, indegree, "sources") }?;
            // SAFETY: as above.
            let sw = unsafe { weights_arg(sourceweights, indegree, "sources") }?;
            // SAFETY: as above.
            let d = unsafe { list(destinations, outdegree, "destinations") }?;
            // SAFETY: as above.
            let dw = unsafe { weights_arg(destweights, outdegree, "destinations") }?;
            let g = c.comm.create_dist_graph_communicator_adjacent(
                s, sw.as_deref(), d, dw.as_deref(), reorder != 0)?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(g), comm_dist_graph) }
        })
    }

    /// In- and out-degree of this process in a distributed graph, and
    /// whether it has weights.
    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: Comm,
        indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) -> c_int {
        api_comm("MPI_Dist_graph_neighbors_count", comm, |c| {
            let t = topo_of(c)?;
            let g = t.dist_graph()?;
            out(outdegree, "outdegree")?;
            out(weighted, "weighted")?;
            // SAFETY: the caller's int pointers.
            unsafe {
                put(indegree, "indegree", g.sources().len() as c_int)?;
                put(outdegree, "outdegree", g.destinations().len() as c_int)?;
                put(weighted, "weighted", c_int::from(g.is_weighted()))
            }
        })
    }

    /// This process's in- and out-neighbours (and their weights, unless
    /// the arrays are `MPI_UNWEIGHTED` or the graph has none).
    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: Comm, maxindegree: c_int,
        sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int,
        destinations: *mut c_int, destweights: *mut c_int) -> c_int {
        api_comm("MPI_Dist_graph_neighbors", comm, |c| {
            let t = topo_of(c)?;
            let g = t.dist_graph()?;
            let wants = |p: *mut c_int| !p.is_null() && ![UNWEIGHTED, WEIGHTS_EMPTY].contains(&(p as usize));
            // SAFETY: the arrays hold `maxindegree` / `maxoutdegree` ints
            // (MPI's contract).
            unsafe {
                write_ints(sources, maxindegree, g.sources(), "sources")?;
                write_ints(destinations, maxoutdegree, g.destinations(), "destinations")?;
                if g.is_weighted() && wants(sourceweights) {
                    write_ints(sourceweights, maxindegree, g.source_weights(), "sourceweights")?;
                }
                if g.is_weighted() && wants(destweights) {
                    write_ints(destweights, maxoutdegree, g.destination_weights(), "destweights")?;
                }
            }
            Ok(())
        })
    }

    /// The kind of `comm`'s topology (`MPI_CART`, `MPI_GRAPH`,
    /// `MPI_DIST_GRAPH`, or `MPI_UNDEFINED`).
    fn MPI_Topo_test / PMPI_Topo_test(comm: Comm, status: *mut c_int) -> c_int {
        api_comm("MPI_Topo_test", comm, |c| {
            let k = match c.comm.topology_kind() {
                Some(TopologyKind::Cartesian) => CART,
                Some(TopologyKind::Graph) => GRAPH,
                Some(TopologyKind::DistributedGraph) => DIST_GRAPH,
                None => abi::UNDEFINED,
            };
            // SAFETY: the caller's int pointer.
            unsafe { put(status, "status", k) }
        })
    }
}

// ---------------------------------------------------------------- collectives

/// Blocks as owned data, for a plan that runs again.
struct Blocks(Vec<(usize, isize, CoreType)>);

impl Blocks {
    fn as_blocks(&self) -> Vec<Block<'_>> {
        self.0
            .iter()
            .map(|(count, disp, dt)| Block {
                count: *count,
                disp: *disp,
                dt,
            })
            .collect()
    }
}

/// `n` entries at `p` (a count, displacement or datatype array).
///
/// # Safety
/// `p` holds `n` entries when not null.
unsafe fn entries<'a, T>(p: *const T, n: usize, what: &str) -> Res<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return err(abi::ERR_ARG, format!("{what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// `n` equal blocks of `per` elements of `t`: one after the other
/// (`step`), or all the same buffer.
fn even(n: usize, per: i64, t: Datatype, step: bool) -> Res<Blocks> {
    let per = per.to_count("count")?;
    let dt = dtype(t)?;
    let ext = dt.extent();
    let too_far = || MpiError::new(abi::ERR_COUNT, "the blocks reach beyond any address");
    Ok(Blocks(
        (0..n)
            .map(|k| {
                let d = if step {
                    k.checked_mul(per)
                        .and_then(|e| isize::try_from(e).ok())
                        .and_then(|e| e.checked_mul(ext))
                        .ok_or_else(too_far)?
                } else {
                    0
                };
                Ok((per, d, dt.clone()))
            })
            .collect::<Res<_>>()?,
    ))
}

/// Blocks from count and element-displacement arrays of `n` entries
/// (`int` or `MPI_Count` / `MPI_Aint`).
///
/// # Safety
/// The arrays hold `n` entries.
unsafe fn varying<C, D>(n: usize, c: *const C, d: *const D, t: Datatype) -> Res<Blocks>
where
    C: Copy + Into<i64>,
    D: Copy + TryInto<isize>,
{
    let dt = dtype(t)?;
    let ext = dt.extent();
    // SAFETY: the caller's guarantee.
    let (cs, ds) = unsafe { (entries(c, n, "counts")?, entries(d, n, "displacements")?) };
    Ok(Blocks(
        cs.iter()
            .zip(ds)
            .map(|(&c, &d)| {
                let d: isize = d
                    .try_into()
                    .map_err(|_| MpiError::new(abi::ERR_ARG, "displacement out of range"))?;
                let at = d
                    .checked_mul(ext)
                    .ok_or_else(|| MpiError::new(abi::ERR_ARG, "displacement overflows"))?;
                Ok((i64::to_count(c.into(), "count")?, at, dt.clone()))
            })
            .collect::<Res<_>>()?,
    ))
}

/// Blocks with byte displacements and a datatype each.
///
/// # Safety
/// The arrays hold `n` entries.
unsafe fn with_types<C: Copy + Into<i64>>(
    n: usize,
    c: *const C,
    d: *const Aint,
    t: *const Datatype,
) -> Res<Blocks> {
    // SAFETY: the caller's guarantee.
    let (cs, ds, ts) = unsafe {
        (
            entries(c, n, "counts")?,
            entries(d, n, "displacements")?,
            entries(t, n, "datatypes")?,
        )
    };
    Ok(Blocks(
        cs.iter()
            .zip(ds)
            .zip(ts)
            .map(|((&c, &d), &t)| Ok((i64::to_count(c.into(), "count")?, d, dtype(t)?)))
            .collect::<Res<_>>()?,
    ))
}

/// The (out-degree, in-degree) of this process in `c`'s topology.
fn degrees(c: &CommRef) -> Res<(usize, usize)> {
    Ok(neighbor::degrees(&c.comm)?)
}

fn not_in_place(p: *const c_void, what: &str) -> Res {
    if p as usize == IN_PLACE {
        return err(
            abi::ERR_BUFFER,
            format!("MPI_IN_PLACE as the {what} buffer of a neighbourhood collective"),
        );
    }
    Ok(())
}

/// The lowest address a program's data can have (below: the null page).
const LOWEST_ADDRESS: isize = 4096;

/// `MPI_ERR_BUFFER` for a block of `b` on `buf` whose data would start
/// below [`LOWEST_ADDRESS`]: a null buffer, or `MPI_BOTTOM` with
/// displacements that are no addresses. Checked before anything is read
/// or written.
fn check_blocks(buf: *const c_void, b: &Blocks, what: &str) -> Res {
    for (count, disp, dt) in &b.0 {
        if *count == 0 || dt.size() == 0 {
            continue;
        }
        let low = (buf as isize)
            .checked_add(*disp)
            .and_then(|a| a.checked_add(dt.true_lower_bound()));
        if low.is_none_or(|a| a < LOWEST_ADDRESS) {
            return err(
                abi::ERR_BUFFER,
                format!(
                    "the {what} buffer {buf:p} with displacement {disp} is no address \
                     for {count} elements"
                ),
            );
        }
    }
    Ok(())
}

/// Runs (or starts, or keeps) a neighbourhood all-to-all of `s` and `r`.
fn exchange(
    c: &CommRef,
    send: *const c_void,
    s: Blocks,
    recv: *mut c_void,
    r: Blocks,
    how: How,
) -> Res {
    not_in_place(send, "send")?;
    not_in_place(recv, "receive")?;
    check_blocks(send, &s, "send")?;
    check_blocks(recv, &r, "receive")?;
    let (comm, send, recv) = (c.comm.clone(), send as usize, recv as usize);
    run(c, how, move |m: Mode| {
        let (sb, rb) = (s.as_blocks(), r.as_blocks());
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe {
            neighbor::neighbor_alltoallw(&comm, send as *const u8, &sb, recv as *mut u8, &rb, m)
        }
    })
}

/// Defines the blocking, nonblocking and persistent C routines of one
/// neighbourhood collective from one body.
macro_rules! neighbor_collective {
    (
        $(#[doc = $doc:expr])*
        $name:ident / $pname:ident, $iname:ident / $piname:ident, $init:ident / $pinit:ident,
        ( $($arg:ident : $ty:ty),* ), $comm:ident, |$c:ident, $how:ident| $body:expr
    ) => {
        mpi_fn! {
            $(#[doc = $doc])*
            fn $name / $pname($($arg: $ty),*) -> c_int {
                api_comm(stringify!($name), $comm, |$c| {
                    let $how = How::Block;
                    $body
                })
            }

            $(#[doc = $doc])*
            /// Nonblocking: `request` completes it.
            fn $iname / $piname($($arg: $ty,)* request: *mut Request) -> c_int {
                api_comm(stringify!($iname), $comm, |$c| {
                    let $how = How::Start(request);
                    $body
                })
            }

            $(#[doc = $doc])*
            /// Persistent: `MPI_Start` starts it, `request` completes each start.
            fn $init / $pinit($($arg: $ty,)* _info: Info, request: *mut Request) -> c_int {
                api_comm(stringify!($init), $comm, |$c| {
                    let $how = How::Init(request);
                    $body
                })
            }
        }
    };
}

neighbor_collective! {
    /// This process's buffer to every out-neighbour; one block from each
    /// in-neighbour.
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather, MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather,
    MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount.into(), sendtype, false)?;
        let r = even(indeg, recvcount.into(), recvtype, true)?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// This process's buffer to every out-neighbour; blocks of different
    /// lengths from the in-neighbours.
    MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv,
    MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount.into(), sendtype, false)?;
        // SAFETY: the arrays hold one entry per in-neighbour (MPI's contract).
        let r = unsafe { varying(indeg, recvcounts, displs, recvtype) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// Block `k` to out-neighbour `k`, block `m` from in-neighbour `m`.
    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall, MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall,
    MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount.into(), sendtype, true)?;
        let r = even(indeg, recvcount.into(), recvtype, true)?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// Blocks of different lengths to and from the neighbours.
    MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv,
    MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype,
     recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        // SAFETY: the arrays hold one entry per neighbour (MPI's contract).
        let s = unsafe { varying(outdeg, sendcounts, sdispls, sendtype) }?;
        // SAFETY: as above.
        let r = unsafe { varying(indeg, recvcounts, rdispls, recvtype) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// Blocks of different lengths and datatypes (byte displacements).
    MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw,
    MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const Aint, sendtypes: *const Datatype,
     recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const Aint, recvtypes: *const Datatype,
     comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        // SAFETY: the arrays hold one entry per neighbour (MPI's contract).
        let s = unsafe { with_types(outdeg, sendcounts, sdispls, sendtypes) }?;
        // SAFETY: as above.
        let r = unsafe { with_types(indeg, recvcounts, rdispls, recvtypes) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

// ------------------------------------------------------- large counts

neighbor_collective! {
    /// `MPI_Neighbor_allgather` with `MPI_Count` counts.
    MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c, MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c,
    MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount, sendtype, false)?;
        let r = even(indeg, recvcount, recvtype, true)?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// `MPI_Neighbor_allgatherv` with `MPI_Count` counts and `MPI_Aint`
    /// displacements.
    MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c,
    MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount, sendtype, false)?;
        // SAFETY: the arrays hold one entry per in-neighbour (MPI's contract).
        let r = unsafe { varying(indeg, recvcounts, displs, recvtype) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// `MPI_Neighbor_alltoall` with `MPI_Count` counts.
    MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c, MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c,
    MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        let s = even(outdeg, sendcount, sendtype, true)?;
        let r = even(indeg, recvcount, recvtype, true)?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// `MPI_Neighbor_alltoallv` with `MPI_Count` counts and `MPI_Aint`
    /// displacements.
    MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c,
    MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        // SAFETY: the arrays hold one entry per neighbour (MPI's contract).
        let s = unsafe { varying(outdeg, sendcounts, sdispls, sendtype) }?;
        // SAFETY: as above.
        let r = unsafe { varying(indeg, recvcounts, rdispls, recvtype) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}

neighbor_collective! {
    /// `MPI_Neighbor_alltoallw` with `MPI_Count` counts.
    MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c,
    MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype,
     comm: Comm),
    comm, |c, how| {
        let (outdeg, indeg) = degrees(c)?;
        // SAFETY: the arrays hold one entry per neighbour (MPI's contract).
        let s = unsafe { with_types(outdeg, sendcounts, sdispls, sendtypes) }?;
        // SAFETY: as above.
        let r = unsafe { with_types(indeg, recvcounts, rdispls, recvtypes) }?;
        exchange(c, sendbuf, s, recvbuf, r, how)
    }
}
