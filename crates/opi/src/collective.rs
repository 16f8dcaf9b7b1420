//! Collectives by ownership (the papers' §4.5): one buffer per destination
//! instead of one buffer cut into pieces, so that every piece has exactly
//! one owner at a time and nobody needs a barrier to know when a buffer
//! may be freed.
//!
//! * **scatter**: the root gives `values[i]` to rank `i`
//!   ([`Scatter::scatter_give_root`]), every other rank takes its one
//!   ([`Scatter::scatter_take`]);
//! * **gather**: every rank gives one value ([`Gather::gather_give`]), the
//!   root takes them all as a `Vec` in rank order
//!   ([`Gather::gather_take_root`]);
//! * **all-to-all**: every rank gives `values[j]` to rank `j` and takes one
//!   value from every rank ([`all_to_all_give`]).
//!
//! They run on the communicator's internal context with tags reserved for
//! them ([`TAG_BASE`]..), so they never match user messages or the
//! runtime's other internal traffic. Like MPI collectives, every member
//! calls them in the same order, one at a time per communicator.
//!
//! On a communicator spanning nodes (under `mpirun`, feature `mpi` of
//! `hmpi_core`) they run on its private duplicate: a value given to
//! another node travels as its bytes (send + free) and is taken into a
//! fresh block (allocate + receive), as the point-to-point give and take
//! do; a value that owns further heap blocks is refused there (`Error::Arg`
//! in its [`crate::GiveError`]).
//!
//! # Example
//! ```
//! use opi::prelude::*;
//! use opi::collective::{all_to_all_give, Gather, Scatter};
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let root = world.process_at_rank(0);
//! let n = world.size() as usize;
//! let mine: Box<u32> = if world.rank() == 0 {
//!     root.scatter_give_root((0..n as u32).map(Box::new).collect()).unwrap()
//! } else {
//!     root.scatter_take().unwrap()
//! };
//! assert_eq!(*mine, world.rank() as u32);
//! if world.rank() == 0 {
//!     let all = root.gather_take_root(mine).unwrap();
//!     assert_eq!(all.len(), n);
//! } else {
//!     root.gather_give(mine).unwrap();
//! }
//! let back = all_to_all_give(&world, (0..n).map(|j| vec![j as u8; 3]).collect()).unwrap();
//! assert_eq!(back[0], vec![world.rank() as u8; 3]);
//! ```

use crate::givable::Givable;
use crate::p2p::{give_by, give_now, take_on};
use hmpi_core::point_to_point::Process;
use hmpi_core::raw::{self, Traffic};
use hmpi_core::traits::{Communicator, Destination};
use hmpi_core::{Error, Result, SimpleCommunicator};

/// First internal tag of this crate's collectives (below `TAG_UB`, far
/// above the runtime's own internal tags).
pub const TAG_BASE: i32 = 0x3f4f_5000;
/// Scatter's tag.
pub const TAG_SCATTER: i32 = TAG_BASE + 1;
/// Gather's tag.
pub const TAG_GATHER: i32 = TAG_BASE + 2;
/// All-to-all's tag.
pub const TAG_ALL_TO_ALL: i32 = TAG_BASE + 3;
/// Node-shared values' address broadcast ([`crate::fusion`]).
pub const TAG_NODE_SHARED: i32 = TAG_BASE + 4;

const _: () = assert!(TAG_NODE_SHARED <= hmpi_core::TAG_UB);

fn check_root(p: &Process<'_>, what: &str) -> Result<()> {
    let c = p.comm();
    if p.destination_rank() == c.rank() {
        Ok(())
    } else {
        Err(Error::Comm {
            reason: format!(
                "{what} is the root's side, called on rank {} for root {}",
                c.rank(),
                p.destination_rank()
            ),
        })
    }
}

fn check_not_root(p: &Process<'_>, what: &str) -> Result<()> {
    let c = p.comm();
    let root = p.destination_rank();
    if root != c.rank() {
        if (0..c.size()).contains(&root) {
            Ok(())
        } else {
            Err(Error::Rank {
                rank: root,
                size: c.size(),
            })
        }
    } else {
        Err(Error::Comm {
            reason: format!(
                "{what} is the non-root side, called on the root (rank {})",
                c.rank()
            ),
        })
    }
}

/// [`Error::Arg`], on every member alike and before anything is given,
/// when values that own further heap blocks would have to leave the node
/// (a communicator spanning nodes): a member failing at its first give
/// to another node would leave the others waiting.
fn stays_on_node<V: Givable>(c: &SimpleCommunicator, what: &str) -> Result<()> {
    if V::DEEP && (0..c.size()).any(|r| !c.shares_heap_with(r)) {
        return Err(Error::Arg {
            reason: format!(
                "{what}: {} owns further heap blocks, which cannot leave this node's heap, \
                 and the communicator spans nodes",
                std::any::type_name::<V>()
            ),
        });
    }
    Ok(())
}

fn count_error(got: usize, size: i32) -> Error {
    Error::Count {
        bytes: got as u64,
        element_size: 1,
        expected: Some(size as u64),
    }
}

/// Scatter by ownership, on the root's [`Process`]
/// (`comm.process_at_rank(root)`).
pub trait Scatter {
    /// The root's side: gives `values[i]` to rank `i` (one value per rank,
    /// in rank order) and returns the root's own. [`Error::Count`] if
    /// `values.len()` is not the communicator's size (nothing is given
    /// then).
    fn scatter_give_root<V: Givable>(&self, values: Vec<V>) -> Result<V>;
    /// Every other rank's side: takes its value from the root.
    fn scatter_take<V: Givable>(&self) -> Result<V>;
}

impl Scatter for Process<'_> {
    fn scatter_give_root<V: Givable>(&self, values: Vec<V>) -> Result<V> {
        check_root(self, "scatter_give_root")?;
        let c = self.comm();
        stays_on_node::<V>(c, "scatter")?;
        if values.len() != c.size() as usize {
            return Err(count_error(values.len(), c.size()));
        }
        let me = c.rank() as usize;
        let mut own = None;
        for (i, v) in values.into_iter().enumerate() {
            if i == me {
                own = Some(v);
            } else {
                give_now(c, i as i32, TAG_SCATTER, Traffic::Internal, v)?;
            }
        }
        own.ok_or_else(|| Error::Internal("scatter: the root's own value is missing".into()))
    }

    fn scatter_take<V: Givable>(&self) -> Result<V> {
        check_not_root(self, "scatter_take")?;
        let c = self.comm();
        stays_on_node::<V>(c, "scatter")?;
        take_on(c, self.destination_rank(), TAG_SCATTER, Traffic::Internal).map(|(v, _)| v)
    }
}

/// Gather by ownership, on the root's [`Process`].
pub trait Gather {
    /// Every other rank's side: gives `v` to the root.
    fn gather_give<V: Givable>(&self, v: V) -> Result<()>;
    /// The root's side: takes one value from every other rank and returns
    /// them all in rank order, `mine` at the root's place.
    fn gather_take_root<V: Givable>(&self, mine: V) -> Result<Vec<V>>;
}

impl Gather for Process<'_> {
    fn gather_give<V: Givable>(&self, v: V) -> Result<()> {
        check_not_root(self, "gather_give")?;
        let c = self.comm();
        stays_on_node::<V>(c, "gather")?;
        give_now(c, self.destination_rank(), TAG_GATHER, Traffic::Internal, v)?;
        Ok(())
    }

    fn gather_take_root<V: Givable>(&self, mine: V) -> Result<Vec<V>> {
        check_root(self, "gather_take_root")?;
        let c = self.comm();
        stays_on_node::<V>(c, "gather")?;
        let mut out = Vec::with_capacity(c.size() as usize);
        let mut mine = Some(mine);
        for r in 0..c.size() {
            if r == c.rank() {
                out.extend(mine.take());
            } else {
                out.push(take_on(c, r, TAG_GATHER, Traffic::Internal)?.0);
            }
        }
        Ok(out)
    }
}

/// All-to-all by ownership: gives `values[j]` to rank `j` (one per rank,
/// in rank order) and returns the values taken from every rank, in rank
/// order. Collective. [`Error::Count`] if `values.len()` is not the
/// communicator's size (nothing is given then).
pub fn all_to_all_give<V: Givable, C: Communicator>(comm: &C, values: Vec<V>) -> Result<Vec<V>> {
    let c: &SimpleCommunicator = comm.as_simple();
    if values.len() != c.size() as usize {
        return Err(count_error(values.len(), c.size()));
    }
    stays_on_node::<V>(c, "all_to_all_give")?;
    // Gives on the node complete at once, and to another node (a
    // communicator spanning nodes) they only start (the bytes leave while
    // this rank takes), so giving everything before taking cannot
    // deadlock; a rank's value to itself goes through its own queue too,
    // which keeps the order of takes simple.
    for (j, v) in values.into_iter().enumerate() {
        give_by(
            raw::give_started,
            c,
            j as i32,
            TAG_ALL_TO_ALL,
            Traffic::Internal,
            v,
        )?;
    }
    let got = (0..c.size())
        .map(|r| take_on(c, r, TAG_ALL_TO_ALL, Traffic::Internal).map(|(v, _)| v))
        .collect::<Result<Vec<V>>>();
    // Even when a take failed: the values given away must leave.
    raw::complete_gives()?;
    got
}
