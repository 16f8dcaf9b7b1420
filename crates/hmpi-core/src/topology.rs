//! Process topologies (rsmpi's `mpi::topology`): Cartesian grids, graphs
//! and distributed graphs attached to communicators, and the queries MPI
//! defines on them.
//!
//! A topology is a description of who neighbours whom; it is kept beside
//! the communicator it was created with ([`SimpleCommunicator::topology`])
//! and travels with its duplicates (a split or a subgroup does not keep
//! it). The neighbourhood collectives
//! ([`crate::collective::NeighborCollectives`]) exchange data along it.
//!
//! * [`dims_create`]: MPI's balanced factorisation of a process count;
//! * Cartesian: [`TopologyCommunicator::create_cartesian_communicator`]
//!   and [`CartesianCommunicator`] (`num_dimensions`, `get_layout`,
//!   `rank_to_coordinates`, `coordinates_to_rank`, `shift`, `subgroup`);
//! * graph: [`TopologyCommunicator::create_graph_communicator`], queried
//!   through [`Topology`];
//! * distributed graph:
//!   [`TopologyCommunicator::create_dist_graph_communicator`] (edges
//!   given by any process: they are exchanged so that every process learns
//!   its own) and
//!   [`TopologyCommunicator::create_dist_graph_communicator_adjacent`].
//!
//! Reordering is allowed by MPI, never required: every constructor keeps
//! the order of the old communicator's ranks.
//!
//! # Example
//! ```
//! use hmpi_core::topology::{dims_create, TopologyCommunicator};
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let mut dims = [0, 0];
//! dims_create(world.size(), &mut dims).unwrap();
//! let grid = world
//!     .create_cartesian_communicator(&dims, &[true, false], false)
//!     .unwrap()
//!     .expect("every rank fits the grid");
//! let me = grid.get_layout();
//! assert_eq!(grid.coordinates_to_rank(&me.coords).unwrap(), grid.rank());
//! let (from, to) = grid.shift(0, 1).unwrap();
//! assert!(from.is_some() && to.is_some()); // dimension 0 is periodic
//! ```

use crate::collective::{CommunicatorCollectives, PartitionMut};
use crate::comm::{Communicator, SimpleCommunicator};
use crate::error::{Error, Result};
use std::sync::Arc;

/// `MPI_PROC_NULL`: no process (a Cartesian neighbour off the edge).
pub use vci::PROC_NULL;

/// What kind of topology a communicator has (`MPI_Topo_test`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyKind {
    /// `MPI_CART`.
    Cartesian,
    /// `MPI_GRAPH`.
    Graph,
    /// `MPI_DIST_GRAPH`.
    DistributedGraph,
}

/// A topology attached to a communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// A grid of `dims[0] × dims[1] × …` processes, rank-major (the last
    /// dimension varies fastest), periodic where `periods` says.
    Cartesian {
        /// Extent of each dimension.
        dims: Vec<i32>,
        /// Whether each dimension wraps around.
        periods: Vec<bool>,
    },
    /// A graph known to every process: the neighbours of node `i` are
    /// `edges[index[i-1]..index[i]]` (`index[-1]` being 0).
    Graph {
        /// Cumulative neighbour counts (`MPI_Graph_create`'s `index`).
        index: Vec<i32>,
        /// The neighbour lists, one after the other.
        edges: Vec<i32>,
    },
    /// A distributed graph: each process knows its own in- and
    /// out-neighbours.
    DistGraph(DistGraph),
}

/// This process's part of a distributed graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistGraph {
    sources: Vec<i32>,
    source_weights: Vec<i32>,
    destinations: Vec<i32>,
    destination_weights: Vec<i32>,
    weighted: bool,
    /// For in-edge `m`: the position of the same edge in its source's
    /// destination list (what the source's neighbourhood collectives send
    /// along it).
    pairing: Vec<usize>,
}

impl DistGraph {
    /// The in-neighbours, in the order of the receive blocks of the
    /// neighbourhood collectives.
    pub fn sources(&self) -> &[i32] {
        &self.sources
    }
    /// The out-neighbours, in the order of the send blocks.
    pub fn destinations(&self) -> &[i32] {
        &self.destinations
    }
    /// The in-edges' weights (empty when unweighted).
    pub fn source_weights(&self) -> &[i32] {
        &self.source_weights
    }
    /// The out-edges' weights (empty when unweighted).
    pub fn destination_weights(&self) -> &[i32] {
        &self.destination_weights
    }
    /// Whether the graph was created with weights (`MPI_UNWEIGHTED` not
    /// given).
    pub fn is_weighted(&self) -> bool {
        self.weighted
    }
}

/// Who a process exchanges with in a neighbourhood collective: receive
/// block `m` comes from `sources[m]` (`PROC_NULL`: nobody, the block is
/// left as it is), which sends it as its send block `pairing[m]`; send
/// block `k` goes to `destinations[k]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighborhood {
    /// In-neighbours, by receive block.
    pub sources: Vec<i32>,
    /// Out-neighbours, by send block.
    pub destinations: Vec<i32>,
    /// For receive block `m`: the send block of `sources[m]` it is.
    pub pairing: Vec<usize>,
}

fn topo_err(reason: impl Into<String>) -> Error {
    Error::Topology {
        reason: reason.into(),
    }
}

fn dims_err(reason: impl Into<String>) -> Error {
    Error::Dims {
        reason: reason.into(),
    }
}

fn arg_err(reason: impl Into<String>) -> Error {
    Error::Arg {
        reason: reason.into(),
    }
}

// ------------------------------------------------------------ dims_create

/// Fills the zero entries of `dims` so that the product of all entries is
/// `nnodes`, as balanced as possible and in non-increasing order
/// (`MPI_Dims_create`); non-zero entries are kept. [`Error::Dims`] for a
/// negative entry or when the fixed entries do not divide `nnodes`;
/// [`Error::Arg`] for `nnodes < 1`.
///
/// ```
/// let mut d = [0, 0];
/// hmpi_core::topology::dims_create(6, &mut d).unwrap();
/// assert_eq!(d, [3, 2]);
/// let mut d = [0, 3, 0];
/// hmpi_core::topology::dims_create(6, &mut d).unwrap();
/// assert_eq!(d, [2, 3, 1]);
/// assert!(hmpi_core::topology::dims_create(7, &mut [0, 3, 0]).is_err());
/// ```
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> Result<()> {
    if nnodes < 1 {
        return Err(arg_err(format!(
            "dims_create for {nnodes} processes (must be at least 1)"
        )));
    }
    let mut fixed: i64 = 1;
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 {
            return Err(dims_err(format!("dims[{i}] = {d} is negative")));
        }
        if d > 0 {
            fixed = fixed.saturating_mul(i64::from(d));
        }
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    if i64::from(nnodes) % fixed != 0 {
        return Err(dims_err(format!(
            "the fixed dimensions (product {fixed}) do not divide {nnodes} processes"
        )));
    }
    let rest = (i64::from(nnodes) / fixed) as u64;
    if free == 0 {
        return if rest == 1 {
            Ok(())
        } else {
            Err(dims_err(format!(
                "the dimensions (product {fixed}) do not make {nnodes} processes"
            )))
        };
    }
    let best = balanced(rest, free);
    let mut it = best.into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        *d = it.next().unwrap_or(1) as i32;
    }
    Ok(())
}

/// The `k` factors of `n`, non-increasing, whose largest minus smallest is
/// least (then whose largest is least).
fn balanced(n: u64, k: usize) -> Vec<u64> {
    /// Best so far: (spread, largest, factors).
    type Best = Option<(u64, u64, Vec<u64>)>;
    fn search(divs: &[u64], n: u64, k: usize, cap: u64, cur: &mut Vec<u64>, best: &mut Best) {
        if k == 1 {
            if n <= cap {
                cur.push(n);
                let key = (cur[0] - n, cur[0]);
                if best.as_ref().is_none_or(|b| key < (b.0, b.1)) {
                    *best = Some((key.0, key.1, cur.clone()));
                }
                cur.pop();
            }
            return;
        }
        // The next factor `d` divides `n`, is at most `cap`, and leaves a
        // rest that `k - 1` factors of at most `d` can make: `d^k >= n`.
        for &d in divs.iter().filter(|&&d| d <= cap && n % d == 0) {
            if (d as u128).pow(k as u32) < n as u128 {
                break;
            }
            cur.push(d);
            search(divs, n / d, k - 1, d, cur, best);
            cur.pop();
        }
    }
    let mut divs: Vec<u64> = (1..)
        .take_while(|&i| i * i <= n)
        .filter(|&i| n % i == 0)
        .flat_map(|i| [i, n / i])
        .collect();
    divs.sort_unstable_by(|a, b| b.cmp(a));
    divs.dedup();
    let mut best = None;
    search(&divs, n, k, n, &mut Vec::with_capacity(k), &mut best);
    best.map_or_else(|| vec![1; k], |b| b.2)
}

// ------------------------------------------------------------ Cartesian

/// Coordinates of `rank` in a grid of `dims` (the last dimension varies
/// fastest).
fn coords_in(dims: &[i32], rank: i32) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    let mut r = rank;
    for (i, &d) in dims.iter().enumerate().rev() {
        c[i] = r % d.max(1);
        r /= d.max(1);
    }
    c
}

fn grid_size(dims: &[i32]) -> i64 {
    dims.iter().map(|&d| i64::from(d)).product()
}

/// The rank at `coords` (periodic dimensions wrap; others must be in
/// range).
fn rank_in(dims: &[i32], periods: &[bool], coords: &[i32]) -> Result<i32> {
    if coords.len() != dims.len() {
        return Err(arg_err(format!(
            "{} coordinates for a grid of {} dimensions",
            coords.len(),
            dims.len()
        )));
    }
    let mut r: i64 = 0;
    for (i, ((&c, &d), &p)) in coords.iter().zip(dims).zip(periods).enumerate() {
        let c = if p {
            c.rem_euclid(d)
        } else if (0..d).contains(&c) {
            c
        } else {
            return Err(arg_err(format!(
                "coordinate {c} of non-periodic dimension {i} is outside 0..{d}"
            )));
        };
        r = r * i64::from(d) + i64::from(c);
    }
    Ok(r as i32)
}

/// The neighbour `disp` steps along dimension `dim` from `coords`, or
/// `PROC_NULL` off the edge of a non-periodic dimension.
fn neighbour(dims: &[i32], periods: &[bool], coords: &[i32], dim: usize, disp: i64) -> i32 {
    let d = i64::from(dims[dim]);
    let c = i64::from(coords[dim]) + disp;
    let c = if periods[dim] {
        c.rem_euclid(d)
    } else if (0..d).contains(&c) {
        c
    } else {
        return PROC_NULL;
    };
    let mut at = coords.to_vec();
    at[dim] = c as i32;
    rank_in(dims, periods, &at).unwrap_or(PROC_NULL)
}

impl Topology {
    /// The kind of this topology.
    pub fn kind(&self) -> TopologyKind {
        match self {
            Topology::Cartesian { .. } => TopologyKind::Cartesian,
            Topology::Graph { .. } => TopologyKind::Graph,
            Topology::DistGraph(_) => TopologyKind::DistributedGraph,
        }
    }

    fn cart(&self) -> Result<(&[i32], &[bool])> {
        match self {
            Topology::Cartesian { dims, periods } => Ok((dims, periods)),
            _ => Err(topo_err("the communicator has no Cartesian topology")),
        }
    }

    fn graph(&self) -> Result<(&[i32], &[i32])> {
        match self {
            Topology::Graph { index, edges } => Ok((index, edges)),
            _ => Err(topo_err("the communicator has no graph topology")),
        }
    }

    /// The distributed-graph part (`MPI_Dist_graph_neighbors`);
    /// [`Error::Topology`] for another kind.
    pub fn dist_graph(&self) -> Result<&DistGraph> {
        match self {
            Topology::DistGraph(g) => Ok(g),
            _ => Err(topo_err(
                "the communicator has no distributed graph topology",
            )),
        }
    }

    /// A Cartesian topology's dimensions and periods (`MPI_Cart_get`
    /// without the coordinates).
    pub fn cartesian_dims(&self) -> Result<(&[i32], &[bool])> {
        self.cart()
    }

    /// The coordinates of `rank` in a Cartesian topology of a communicator
    /// of `size` processes (`MPI_Cart_coords`).
    pub fn coordinates_of(&self, rank: i32, size: i32) -> Result<Vec<i32>> {
        let (dims, _) = self.cart()?;
        if !(0..size).contains(&rank) {
            return Err(Error::Rank { rank, size });
        }
        Ok(coords_in(dims, rank))
    }

    /// The rank at `coords` (`MPI_Cart_rank`): periodic dimensions wrap,
    /// [`Error::Arg`] off a non-periodic one.
    pub fn rank_at(&self, coords: &[i32]) -> Result<i32> {
        let (dims, periods) = self.cart()?;
        rank_in(dims, periods, coords)
    }

    /// `(source, destination)` of a shift by `disp` along dimension `dim`
    /// for the process of rank `rank` (`MPI_Cart_shift`); `PROC_NULL` off
    /// the edge of a non-periodic dimension.
    pub fn shift_of(&self, rank: i32, dim: i32, disp: i32) -> Result<(i32, i32)> {
        let (dims, periods) = self.cart()?;
        let d = usize::try_from(dim)
            .ok()
            .filter(|&d| d < dims.len())
            .ok_or_else(|| {
                arg_err(format!(
                    "direction {dim} of a grid of {} dimensions",
                    dims.len()
                ))
            })?;
        let c = coords_in(dims, rank);
        Ok((
            neighbour(dims, periods, &c, d, -i64::from(disp)),
            neighbour(dims, periods, &c, d, i64::from(disp)),
        ))
    }

    /// A graph topology's `index` and `edges` (`MPI_Graph_get`).
    pub fn graph_parts(&self) -> Result<(&[i32], &[i32])> {
        self.graph()
    }

    /// The neighbours of `rank` in a graph topology
    /// (`MPI_Graph_neighbors`); [`Error::Rank`] outside the graph.
    pub fn graph_neighbors(&self, rank: i32) -> Result<&[i32]> {
        let (index, edges) = self.graph()?;
        let n = index.len() as i32;
        if !(0..n).contains(&rank) {
            return Err(Error::Rank { rank, size: n });
        }
        let lo = if rank == 0 {
            0
        } else {
            index[rank as usize - 1] as usize
        };
        Ok(&edges[lo..index[rank as usize] as usize])
    }

    /// The neighbourhood of `rank` for the neighbourhood collectives (MPI's
    /// order: for a grid, per dimension the process below, then above;
    /// for a graph, its neighbour list; for a distributed graph, its
    /// sources and destinations).
    pub fn neighborhood(&self, rank: i32) -> Result<Neighborhood> {
        match self {
            Topology::Cartesian { dims, periods } => {
                let c = coords_in(dims, rank);
                let mut around = Vec::with_capacity(2 * dims.len());
                let mut pairing = Vec::with_capacity(2 * dims.len());
                for d in 0..dims.len() {
                    around.push(neighbour(dims, periods, &c, d, -1));
                    around.push(neighbour(dims, periods, &c, d, 1));
                    // The process below sends this one its "above" block,
                    // the one above its "below" block: the pairing is by
                    // direction, which keeps it right when both are the
                    // same process (a periodic dimension of 1 or 2).
                    pairing.push(2 * d + 1);
                    pairing.push(2 * d);
                }
                Ok(Neighborhood {
                    sources: around.clone(),
                    destinations: around,
                    pairing,
                })
            }
            Topology::Graph { index, .. } => {
                // Checked over the whole graph, which every process knows,
                // so that all refuse an asymmetric one together (a process
                // going on alone would wait for the others forever).
                for i in 0..index.len() as i32 {
                    let ns = self.graph_neighbors(i)?;
                    for &s in ns {
                        let there = self.graph_neighbors(s)?.iter().filter(|&&x| x == i);
                        if ns.iter().filter(|&&x| x == s).count() != there.count() {
                            return Err(topo_err(format!(
                                "the graph is not symmetric: node {i} lists node {s} \
                                 a different number of times than {s} lists {i}"
                            )));
                        }
                    }
                }
                let mine = self.graph_neighbors(rank)?.to_vec();
                let mut pairing = Vec::with_capacity(mine.len());
                for (m, &s) in mine.iter().enumerate() {
                    // The t-th edge from `s` to here pairs with the t-th
                    // edge from here to `s` in `s`'s list.
                    let t = mine[..m].iter().filter(|&&x| x == s).count();
                    let theirs = self.graph_neighbors(s)?;
                    let k = theirs
                        .iter()
                        .enumerate()
                        .filter(|&(_, &x)| x == rank)
                        .nth(t)
                        .map(|(k, _)| k)
                        .ok_or_else(|| {
                            topo_err(format!(
                                "the graph is not symmetric: {s} is a neighbour of {rank} \
                                 but not the other way round, as often"
                            ))
                        })?;
                    pairing.push(k);
                }
                Ok(Neighborhood {
                    sources: mine.clone(),
                    destinations: mine,
                    pairing,
                })
            }
            Topology::DistGraph(g) => Ok(Neighborhood {
                sources: g.sources.clone(),
                destinations: g.destinations.clone(),
                pairing: g.pairing.clone(),
            }),
        }
    }
}

/// A graph topology's checks: `index` non-decreasing from 0, edges naming
/// nodes of the graph. The same on every process, so an error is
/// everybody's.
fn check_graph(index: &[i32], edges: &[i32]) -> Result<()> {
    let mut prev = 0;
    for (i, &x) in index.iter().enumerate() {
        if x < prev {
            return Err(arg_err(format!(
                "index[{i}] = {x} is below the previous entry {prev}"
            )));
        }
        prev = x;
    }
    if prev as usize != edges.len() {
        return Err(arg_err(format!(
            "the index ends at {prev} but {} edges are given",
            edges.len()
        )));
    }
    let n = index.len() as i32;
    for (i, &e) in edges.iter().enumerate() {
        if !(0..n).contains(&e) {
            return Err(arg_err(format!(
                "edges[{i}] = {e} is not a node of a graph of {n}"
            )));
        }
    }
    Ok(())
}

/// The rank of this process in a new communicator of the first `n`
/// members of `comm` (`MPI_Cart_map` / `MPI_Graph_map` without
/// reordering): its rank if below `n`, else `None` (`MPI_UNDEFINED`).
pub fn map_rank(comm: &SimpleCommunicator, n: i64) -> Result<Option<i32>> {
    intra(comm)?;
    if n > i64::from(comm.size()) {
        return Err(arg_err(format!(
            "a topology of {n} processes on a communicator of {}",
            comm.size()
        )));
    }
    Ok((i64::from(comm.rank()) < n).then_some(comm.rank()))
}

/// `MPI_Cart_map`: checks `dims` as `MPI_Cart_create` does.
pub fn cart_map(comm: &SimpleCommunicator, dims: &[i32], periods: &[bool]) -> Result<Option<i32>> {
    check_cart(comm, dims, periods)?;
    map_rank(comm, grid_size(dims))
}

/// `MPI_Graph_map`: checks the graph as `MPI_Graph_create` does.
pub fn graph_map(comm: &SimpleCommunicator, index: &[i32], edges: &[i32]) -> Result<Option<i32>> {
    check_graph(index, edges)?;
    map_rank(comm, index.len() as i64)
}

/// `comm` if it is an intracommunicator: a topology is made over one group
/// ([`Error::Comm`] for an intercommunicator, as MPI's topology
/// constructors and mappers say).
fn intra(comm: &SimpleCommunicator) -> Result<&SimpleCommunicator> {
    if comm.is_inter() {
        return Err(Error::Comm {
            reason: "a topology needs an intracommunicator, not an intercommunicator".into(),
        });
    }
    Ok(comm)
}

fn check_cart(comm: &SimpleCommunicator, dims: &[i32], periods: &[bool]) -> Result<()> {
    if dims.len() != periods.len() {
        return Err(arg_err(format!(
            "{} dimensions but {} periods",
            dims.len(),
            periods.len()
        )));
    }
    for (i, &d) in dims.iter().enumerate() {
        if d <= 0 {
            return Err(dims_err(format!("dims[{i}] = {d} (must be at least 1)")));
        }
    }
    let n = grid_size(dims);
    if n > i64::from(comm.size()) {
        return Err(topo_err(format!(
            "a grid of {n} processes on a communicator of {}",
            comm.size()
        )));
    }
    Ok(())
}

/// The members of `comm` below `n` in a new communicator (the others get
/// `None`).
fn first_members(comm: &SimpleCommunicator, n: i64) -> Result<Option<SimpleCommunicator>> {
    let color = (i64::from(comm.rank()) < n).then_some(0);
    comm.split(color, comm.rank())
}

/// Every member's list of `i32`s, by rank (collective).
fn all_lists(comm: &SimpleCommunicator, mine: &[i32]) -> Result<Vec<Vec<i32>>> {
    let n = comm.size() as usize;
    let len = i32::try_from(mine.len()).map_err(|_| arg_err("too many edges"))?;
    let mut lens = vec![0i32; n];
    comm.all_gather_into(&len, &mut lens[..])?;
    let mut displs = Vec::with_capacity(n);
    let mut total = 0i32;
    for &l in &lens {
        displs.push(total);
        total = total
            .checked_add(l)
            .ok_or_else(|| arg_err("too many edges in the graph"))?;
    }
    let mut all = vec![0i32; total as usize];
    {
        let mut p = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
        comm.all_gather_varcount_into(mine, &mut p)?;
    }
    Ok(lens
        .iter()
        .zip(&displs)
        .map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec())
        .collect())
}

/// [`Error::Rank`] for a rank outside `0..size`.
fn check_ranks(ranks: &[i32], size: i32) -> Result<()> {
    match ranks.iter().find(|&&r| !(0..size).contains(&r)) {
        Some(&rank) => Err(Error::Rank { rank, size }),
        None => Ok(()),
    }
}

fn check_weights(what: &str, w: Option<&[i32]>, n: usize) -> Result<()> {
    if let Some(w) = w {
        if w.len() != n {
            return Err(arg_err(format!("{} {what} weights for {n} edges", w.len())));
        }
        if let Some(&x) = w.iter().find(|&&x| x < 0) {
            return Err(arg_err(format!("negative {what} weight {x}")));
        }
    }
    Ok(())
}

/// A Cartesian communicator (rsmpi's `CartesianCommunicator`): a
/// communicator whose topology is a grid.
#[derive(Debug, Clone)]
pub struct CartesianCommunicator(SimpleCommunicator);

/// The layout of a Cartesian communicator as seen by one process
/// (`MPI_Cart_get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartesianLayout {
    /// Extent of each dimension.
    pub dims: Vec<i32>,
    /// Whether each dimension is periodic.
    pub periods: Vec<bool>,
    /// This process's coordinates.
    pub coords: Vec<i32>,
}

impl Communicator for CartesianCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        &self.0
    }
}

impl CartesianCommunicator {
    /// The communicator as a Cartesian one, if its topology is a grid.
    pub fn from_communicator(comm: SimpleCommunicator) -> Option<CartesianCommunicator> {
        matches!(comm.topology().as_deref(), Some(Topology::Cartesian { .. }))
            .then_some(CartesianCommunicator(comm))
    }

    /// The plain communicator underneath.
    pub fn into_communicator(self) -> SimpleCommunicator {
        self.0
    }

    fn topo(&self) -> Result<Arc<Topology>> {
        self.0
            .topology()
            .ok_or_else(|| topo_err("the communicator lost its topology"))
    }

    fn dims_periods(&self) -> (Vec<i32>, Vec<bool>) {
        match self.0.topology().as_deref() {
            Some(Topology::Cartesian { dims, periods }) => (dims.clone(), periods.clone()),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// The number of dimensions (`MPI_Cartdim_get`).
    pub fn num_dimensions(&self) -> i32 {
        self.dims_periods().0.len() as i32
    }

    /// Dimensions, periods and this process's coordinates
    /// (`MPI_Cart_get`).
    pub fn get_layout(&self) -> CartesianLayout {
        let (dims, periods) = self.dims_periods();
        let coords = coords_in(&dims, self.rank());
        CartesianLayout {
            dims,
            periods,
            coords,
        }
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`); [`Error::Rank`]
    /// outside the communicator.
    pub fn rank_to_coordinates(&self, rank: i32) -> Result<Vec<i32>> {
        self.topo()?.coordinates_of(rank, self.size())
    }

    /// The rank at `coords` (`MPI_Cart_rank`): periodic dimensions wrap;
    /// [`Error::Arg`] for a coordinate off a non-periodic dimension or
    /// the wrong number of coordinates.
    pub fn coordinates_to_rank(&self, coords: &[i32]) -> Result<i32> {
        self.topo()?.rank_at(coords)
    }

    /// The ranks `displacement` steps below and above this process along
    /// `dimension` (`MPI_Cart_shift`: the source and destination of a
    /// shift); `None` off the edge of a non-periodic dimension.
    /// [`Error::Arg`] for a dimension that does not exist.
    pub fn shift(&self, dimension: i32, displacement: i32) -> Result<(Option<i32>, Option<i32>)> {
        let (s, d) = self
            .topo()?
            .shift_of(self.rank(), dimension, displacement)?;
        let some = |r: i32| (r != PROC_NULL).then_some(r);
        Ok((some(s), some(d)))
    }

    /// The sub-grid of the dimensions where `retain` is true, through this
    /// process (`MPI_Cart_sub`). Collective.
    pub fn subgroup(&self, retain: &[bool]) -> Result<CartesianCommunicator> {
        let (dims, periods) = self.dims_periods();
        if retain.len() != dims.len() {
            return Err(arg_err(format!(
                "{} flags for a grid of {} dimensions",
                retain.len(),
                dims.len()
            )));
        }
        let coords = coords_in(&dims, self.rank());
        // The color numbers the coordinates of the dropped dimensions; the
        // kept ones keep their order through the key (the rank).
        let mut color: u64 = 0;
        for (i, &d) in dims.iter().enumerate() {
            if !retain[i] {
                color = color * d as u64 + coords[i] as u64;
            }
        }
        let color = u32::try_from(color).map_err(|_| arg_err("grid too large"))?;
        let sub = self
            .0
            .split(Some(color), self.rank())?
            .ok_or_else(|| Error::Internal("cart sub gave no communicator".into()))?;
        let keep = |v: &[i32]| -> Vec<i32> {
            v.iter()
                .zip(retain)
                .filter(|(_, &k)| k)
                .map(|(&x, _)| x)
                .collect()
        };
        let p: Vec<bool> = periods
            .iter()
            .zip(retain)
            .filter(|(_, &k)| k)
            .map(|(&x, _)| x)
            .collect();
        sub.set_topology(Topology::Cartesian {
            dims: keep(&dims),
            periods: p,
        });
        Ok(CartesianCommunicator(sub))
    }
}

/// Creating topologies (rsmpi's names where it has them): implemented for
/// every communicator; bring it into scope with `use
/// hmpi_core::traits::*`.
pub trait TopologyCommunicator: Communicator {
    /// A communicator whose topology is a grid of `dims`, periodic where
    /// `periodic` says, made of the first `dims[0] × dims[1] × …` members
    /// in rank order (`reorder` is allowed, not needed: the order is
    /// kept); `None` on the other members (`MPI_Cart_create`).
    /// [`Error::Dims`] for an extent below 1, [`Error::Topology`] for a
    /// grid larger than the communicator, [`Error::Arg`] when the slices'
    /// lengths differ. Collective.
    fn create_cartesian_communicator(
        &self,
        dims: &[i32],
        periodic: &[bool],
        reorder: bool,
    ) -> Result<Option<CartesianCommunicator>> {
        let _ = reorder;
        let c = intra(self.as_simple())?;
        check_cart(c, dims, periodic)?;
        let Some(new) = first_members(c, grid_size(dims))? else {
            return Ok(None);
        };
        new.set_topology(Topology::Cartesian {
            dims: dims.to_vec(),
            periods: periodic.to_vec(),
        });
        Ok(Some(CartesianCommunicator(new)))
    }

    /// A communicator whose topology is the graph of `index` and `edges`
    /// (`MPI_Graph_create`), made of the first `index.len()` members (the
    /// others get `None`). [`Error::Arg`] for an index that decreases or
    /// an edge to a node outside the graph, or a graph larger than the
    /// communicator. Collective.
    fn create_graph_communicator(
        &self,
        index: &[i32],
        edges: &[i32],
        reorder: bool,
    ) -> Result<Option<SimpleCommunicator>> {
        let _ = reorder;
        let c = intra(self.as_simple())?;
        check_graph(index, edges)?;
        if index.len() as i64 > i64::from(c.size()) {
            return Err(arg_err(format!(
                "a graph of {} nodes on a communicator of {}",
                index.len(),
                c.size()
            )));
        }
        let Some(new) = first_members(c, index.len() as i64)? else {
            return Ok(None);
        };
        new.set_topology(Topology::Graph {
            index: index.to_vec(),
            edges: edges.to_vec(),
        });
        Ok(Some(new))
    }

    /// A distributed graph communicator of every member, whose edges any
    /// process may give (`MPI_Dist_graph_create`): for each `i`, edges
    /// from `sources[i]` to the next `degrees[i]` entries of
    /// `destinations` (with those entries of `weights`, or `None` for
    /// `MPI_UNWEIGHTED`). The edges are exchanged so that every process
    /// learns its own; a process's in- and out-edges are ordered by the
    /// rank that gave them, then by their place in its lists.
    /// [`Error::Rank`] for a rank outside the communicator,
    /// [`Error::Arg`] for inconsistent counts or negative weights.
    /// Collective.
    fn create_dist_graph_communicator(
        &self,
        sources: &[i32],
        degrees: &[i32],
        destinations: &[i32],
        weights: Option<&[i32]>,
        reorder: bool,
    ) -> Result<SimpleCommunicator> {
        let _ = reorder;
        let c = intra(self.as_simple())?;
        let size = c.size();
        if sources.len() != degrees.len() {
            return Err(arg_err(format!(
                "{} sources but {} degrees",
                sources.len(),
                degrees.len()
            )));
        }
        let mut total = 0usize;
        for &d in degrees {
            total += usize::try_from(d).map_err(|_| arg_err(format!("negative degree {d}")))?;
        }
        if total != destinations.len() {
            return Err(arg_err(format!(
                "the degrees add up to {total} but {} destinations are given",
                destinations.len()
            )));
        }
        check_ranks(sources, size)?;
        check_ranks(destinations, size)?;
        check_weights("edge", weights, total)?;
        // Every process's edges as (source, destination, weight) triples.
        let mut mine = Vec::with_capacity(1 + 3 * total);
        mine.push(i32::from(weights.is_some()));
        let mut at = 0;
        for (&s, &d) in sources.iter().zip(degrees) {
            for j in at..at + d as usize {
                mine.extend([s, destinations[j], weights.map_or(1, |w| w[j])]);
            }
            at += d as usize;
        }
        let new = c.duplicate()?;
        let all = all_lists(&new, &mine)?;
        let weighted = all.iter().any(|l| l.first() == Some(&1));
        let me = new.rank();
        let edges: Vec<(i32, i32, i32)> = all
            .iter()
            .flat_map(|l| l.get(1..).unwrap_or(&[]).chunks_exact(3))
            .map(|e| (e[0], e[1], e[2]))
            .collect();
        let mut g = DistGraph {
            sources: Vec::new(),
            source_weights: Vec::new(),
            destinations: Vec::new(),
            destination_weights: Vec::new(),
            weighted,
            pairing: Vec::new(),
        };
        // Position of each edge in its source's out-list.
        let mut out_pos = vec![0usize; size as usize];
        for &(s, d, w) in &edges {
            // Every process checked the ranks of the edges it gave.
            let Some(pos) = usize::try_from(s).ok().and_then(|s| out_pos.get_mut(s)) else {
                return Err(Error::Internal(format!("an exchanged edge from rank {s}")));
            };
            let k = *pos;
            *pos += 1;
            if s == me {
                g.destinations.push(d);
                if weighted {
                    g.destination_weights.push(w);
                }
            }
            if d == me {
                g.sources.push(s);
                g.pairing.push(k);
                if weighted {
                    g.source_weights.push(w);
                }
            }
        }
        new.set_topology(Topology::DistGraph(g));
        Ok(new)
    }

    /// A distributed graph communicator of every member where each process
    /// gives its own in- and out-neighbours
    /// (`MPI_Dist_graph_create_adjacent`), with weights or `None`
    /// (`MPI_UNWEIGHTED`). The `t`-th edge from `s` in this process's
    /// sources is the `t`-th edge to this process in `s`'s destinations;
    /// [`Error::Topology`] (on every process) if the lists do not agree.
    /// Collective.
    fn create_dist_graph_communicator_adjacent(
        &self,
        sources: &[i32],
        source_weights: Option<&[i32]>,
        destinations: &[i32],
        destination_weights: Option<&[i32]>,
        reorder: bool,
    ) -> Result<SimpleCommunicator> {
        let _ = reorder;
        let c = intra(self.as_simple())?;
        let size = c.size();
        check_ranks(sources, size)?;
        check_ranks(destinations, size)?;
        check_weights("source", source_weights, sources.len())?;
        check_weights("destination", destination_weights, destinations.len())?;
        if source_weights.is_some() != destination_weights.is_some() {
            return Err(arg_err(
                "weights for one direction only (both or neither may be MPI_UNWEIGHTED)",
            ));
        }
        let new = c.duplicate()?;
        // Every process's lists: [in-degree, sources…, destinations…].
        let mut mine = Vec::with_capacity(1 + sources.len() + destinations.len());
        mine.push(sources.len() as i32);
        mine.extend_from_slice(sources);
        mine.extend_from_slice(destinations);
        let all = all_lists(&new, &mine)?;
        let split = |l: &[i32]| -> (Vec<i32>, Vec<i32>) {
            let k = l.first().copied().unwrap_or(0).max(0) as usize;
            let rest = l.get(1..).unwrap_or(&[]);
            let k = k.min(rest.len());
            (rest[..k].to_vec(), rest[k..].to_vec())
        };
        let lists: Vec<(Vec<i32>, Vec<i32>)> = all.iter().map(|l| split(l)).collect();
        // The same check on every process, so that all fail together:
        // each edge is listed as often by its source as by its
        // destination.
        let of = |r: i32| {
            usize::try_from(r)
                .ok()
                .and_then(|r| lists.get(r))
                .ok_or_else(|| Error::Internal(format!("an exchanged list names rank {r}")))
        };
        for (p, (ins, outs)) in lists.iter().enumerate() {
            let p = p as i32;
            for &s in ins {
                let want = ins.iter().filter(|&&x| x == s).count();
                let have = of(s)?.1.iter().filter(|&&x| x == p).count();
                if want != have {
                    return Err(topo_err(format!(
                        "process {p} lists {want} edges from {s}, which lists {have} to it"
                    )));
                }
            }
            for &d in outs {
                let want = outs.iter().filter(|&&x| x == d).count();
                let have = of(d)?.0.iter().filter(|&&x| x == p).count();
                if want != have {
                    return Err(topo_err(format!(
                        "process {p} lists {want} edges to {d}, which lists {have} from it"
                    )));
                }
            }
        }
        let me = new.rank();
        let mut pairing = Vec::with_capacity(sources.len());
        for (m, &s) in sources.iter().enumerate() {
            let t = sources[..m].iter().filter(|&&x| x == s).count();
            let k = of(s)?
                .1
                .iter()
                .enumerate()
                .filter(|&(_, &x)| x == me)
                .nth(t)
                .map(|(k, _)| k)
                .ok_or_else(|| topo_err("inconsistent graph"))?;
            pairing.push(k);
        }
        new.set_topology(Topology::DistGraph(DistGraph {
            sources: sources.to_vec(),
            source_weights: source_weights.map(<[i32]>::to_vec).unwrap_or_default(),
            destinations: destinations.to_vec(),
            destination_weights: destination_weights.map(<[i32]>::to_vec).unwrap_or_default(),
            weighted: source_weights.is_some(),
            pairing,
        }));
        Ok(new)
    }

    /// The kind of this communicator's topology (`MPI_Topo_test`), `None`
    /// without one.
    fn topology_kind(&self) -> Option<TopologyKind> {
        self.as_simple().topology().map(|t| t.kind())
    }
}

impl<C: Communicator + ?Sized> TopologyCommunicator for C {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_create_follows_mpi_examples() {
        let run = |n, d: &[i32]| {
            let mut d = d.to_vec();
            dims_create(n, &mut d).map(|()| d)
        };
        assert_eq!(run(6, &[0, 0]).unwrap(), [3, 2]);
        assert_eq!(run(7, &[0, 0]).unwrap(), [7, 1]);
        assert_eq!(run(6, &[0, 3, 0]).unwrap(), [2, 3, 1]);
        assert!(matches!(run(7, &[0, 3, 0]), Err(Error::Dims { .. })));
        assert_eq!(run(12, &[0, 0, 0]).unwrap(), [3, 2, 2]);
        assert_eq!(run(16, &[0, 0]).unwrap(), [4, 4]);
        assert_eq!(run(1, &[0, 0, 0]).unwrap(), [1, 1, 1]);
        assert_eq!(run(24, &[0, 0, 0]).unwrap(), [4, 3, 2]);
        assert_eq!(run(5, &[]).map_err(drop), Err(()));
        assert_eq!(run(1, &[]).unwrap(), Vec::<i32>::new());
        assert!(matches!(run(4, &[-1, 0]), Err(Error::Dims { .. })));
        assert!(matches!(run(0, &[0]), Err(Error::Arg { .. })));
    }

    #[test]
    fn cartesian_ranks_coords_and_shifts() {
        let t = Topology::Cartesian {
            dims: vec![2, 3],
            periods: vec![true, false],
        };
        assert_eq!(t.coordinates_of(4, 6).unwrap(), [1, 1]);
        assert!(matches!(t.coordinates_of(6, 6), Err(Error::Rank { .. })));
        assert_eq!(t.rank_at(&[1, 2]).unwrap(), 5);
        assert_eq!(t.rank_at(&[-1, 2]).unwrap(), 5); // periodic wrap
        assert!(matches!(t.rank_at(&[0, 3]), Err(Error::Arg { .. })));
        assert_eq!(t.shift_of(0, 0, 1).unwrap(), (3, 3));
        assert_eq!(t.shift_of(0, 1, 1).unwrap(), (PROC_NULL, 1));
        assert_eq!(t.shift_of(2, 1, 1).unwrap(), (1, PROC_NULL));
        assert_eq!(t.shift_of(2, 1, -2).unwrap(), (PROC_NULL, 0));
        assert!(matches!(t.shift_of(0, 2, 1), Err(Error::Arg { .. })));
        let n = t.neighborhood(0).unwrap();
        assert_eq!(n.sources, [3, 3, PROC_NULL, 1]);
        assert_eq!(n.pairing, [1, 0, 3, 2]);
    }

    #[test]
    fn graph_neighbours_and_pairing() {
        // 0 - 1 twice, 1 - 2 once.
        let t = Topology::Graph {
            index: vec![2, 5, 6],
            edges: vec![1, 1, 0, 2, 0, 1],
        };
        assert_eq!(t.graph_neighbors(1).unwrap(), [0, 2, 0]);
        let n = t.neighborhood(1).unwrap();
        assert_eq!(n.pairing, [0, 0, 1]);
        assert!(matches!(t.graph_neighbors(3), Err(Error::Rank { .. })));
        let bad = Topology::Graph {
            index: vec![1, 1],
            edges: vec![1],
        };
        assert!(matches!(bad.neighborhood(0), Err(Error::Topology { .. })));
        assert!(check_graph(&[1, 0], &[1]).is_err());
        assert!(check_graph(&[1], &[3]).is_err());
    }
}
