//! Thread endpoints: one communicator in which each of a process's
//! threads is a rank of its own (the MPI Forum's endpoints proposal,
//! `MPIX_Comm_create_endpoints`).
//!
//! [`SimpleCommunicator::create_endpoints`]`(n)` is collective over its
//! parent (an intracommunicator); each process asks for its own number
//! `n` (1 to [`MAX_ENDPOINTS`]) and gets `n` [`Endpoint`]s, to hand to
//! `n` threads. The new communicator's ranks are the endpoints, ordered
//! by parent rank, then by endpoint index: parent rank `r`'s endpoints
//! are ranks `base(r) .. base(r) + n(r)`, `base(r)` the sum of the counts
//! of the parent ranks below `r`. An [`Endpoint`] is a communicator like
//! any other (it derefs to its [`SimpleCommunicator`], and implements
//! [`Communicator`], so point-to-point, probes and every collective work
//! on it), whose rank is the endpoint's.
//!
//! # How an endpoint rank is addressed
//! The engine sends to a process and one of its VCIs, and matches by
//! (source process, tag, context word). Each endpoint holds a VCI of its
//! process of its own, reserved as a stream's is ([`crate::stream`]):
//! endpoint rank `e` is (process of `e`, VCI of `e`), and a message to it
//! travels on that VCI. The sender's endpoint index (among its process's
//! endpoints) travels in the context word
//! ([`vci::endpoint::from_sender`]), so
//!
//! * a receive from endpoint rank `s` matches only the words of `s`'s
//!   index from `s`'s process: exactly `s`'s messages;
//! * a receive from `ANY_SOURCE` matches the messages of every sending
//!   endpoint of its context on its VCI, in the order they arrived (MPI's
//!   order: messages of one sender to one receiver never overtake each
//!   other, whatever the wildcards);
//! * a status names the sender as `process + index * SENDER_STRIDE`
//!   ([`vci::endpoint::status_source`]), which the communicator's table
//!   turns into the endpoint rank.
//!
//! The collectives are hmpi-core's own engine ([`crate::collective`]):
//! its block has one slot per member, and a member is an endpoint (each
//! endpoint has its own collective state, set up while the endpoints are
//! created). The few messages that set it up travel between endpoints as
//! point-to-point messages do, on the communicator's internal context.
//!
//! # VCIs
//! A process with `n` endpoints needs `n` VCIs of its own: the free stream
//! VCIs (1 to `HMPI_VCIS − 1`) first, then VCI 0 (shared with the world's
//! traffic: correct, but its lock is contended) for one endpoint if one
//! is missing. So `HMPI_VCIS=n+1` gives every endpoint an uncontended VCI,
//! and a single endpoint works with the default `HMPI_VCIS=1`. With fewer
//! VCIs the creation is [`Error::Comm`] on every process.
//!
//! # Limits
//! Communicator hints do not change the mapping of an endpoints
//! communicator. A communicator derived from one (duplicate, split,
//! create, `create_group`, an intercommunicator, and so a window or a
//! process topology, which duplicate) is [`Error::Comm`]; so is a
//! partitioned operation on one. Its group ([`Communicator::group`]) lists a process
//! once per endpoint.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! // One endpoint per process: enough VCIs even with HMPI_VCIS=1.
//! let mut eps = world.create_endpoints(1).unwrap();
//! let e = eps.pop().unwrap();
//! assert_eq!(e.size(), world.size());
//! std::thread::spawn(move || {
//!     e.this_process().send_with_tag(&7u32, 3).unwrap();
//!     let (x, st) = e.any_process().receive::<u32>().unwrap();
//!     assert_eq!((x, st.source_rank(), st.tag()), (7, e.rank(), 3));
//!     e.barrier().unwrap();
//! })
//! .join()
//! .unwrap();
//! ```

use crate::comm::{Communicator, SimpleCommunicator};
use crate::environment::endpoint;
use crate::error::{Error, Result};
use crate::stream::{self, StreamVci};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use vci::endpoint::{from_sender, on_vci, CONTEXT_MAX, SENDERS, SENDER_STRIDE};

/// The most endpoints one process may create in one call (the sender
/// indexes a context word tells apart, and at most one per VCI).
pub const MAX_ENDPOINTS: usize = {
    let a = SENDERS as usize;
    let b = vci::slots::MAX_VCIS;
    if a < b {
        a
    } else {
        b
    }
};

/// Every endpoint's VCI and index among its process's endpoints, by
/// endpoint rank.
#[derive(Debug)]
struct Table {
    vci: Box<[u8]>,
    index: Box<[u8]>,
}

/// What one endpoint's communicator knows of the endpoints: the bits its
/// messages' context words carry, its own VCI and index, and the
/// reservation of its VCI (none for VCI 0).
///
/// A word is a context (which has no VCI or sender bits of its own) with
/// bits computed here once: the VCI and the sender index of
/// [`on_vci`] and [`from_sender`] are each message's whole cost of being
/// on an endpoint.
#[derive(Debug)]
pub(crate) struct EpPart {
    /// By endpoint rank: the bits of a send to it (its VCI, this index).
    send: Box<[u32]>,
    /// By endpoint rank: the bits of a receive from it (this VCI, its
    /// index).
    recv: Box<[u32]>,
    /// The bits of a receive from `ANY_SOURCE` (this VCI, index 0).
    any: u32,
    vci: usize,
    index: u32,
    _hold: Option<Arc<StreamVci>>,
}

impl EpPart {
    fn new(table: &Table, vci: usize, index: u32, hold: Option<Arc<StreamVci>>) -> EpPart {
        EpPart {
            send: table
                .vci
                .iter()
                .map(|&v| on_vci(from_sender(0, index), usize::from(v)))
                .collect(),
            recv: table
                .index
                .iter()
                .map(|&j| on_vci(from_sender(0, u32::from(j)), vci))
                .collect(),
            any: on_vci(0, vci),
            vci,
            index,
            _hold: hold,
        }
    }

    /// The context word of a send of this endpoint to endpoint rank
    /// `dest` in context `ctx`: on `dest`'s VCI, naming this endpoint's
    /// index. `PROC_NULL` (the engine sends nowhere): `ctx`.
    #[inline]
    pub(crate) fn send_word(&self, ctx: u32, dest: i32) -> u32 {
        // A negative rank is far out of range as a usize.
        match self.send.get(dest as usize) {
            Some(&b) => with_bits(ctx, b),
            None => ctx,
        }
    }

    /// The context word of a receive or probe of this endpoint from
    /// endpoint rank `source` in context `ctx`: on this endpoint's VCI,
    /// naming `source`'s index; for `ANY_SOURCE` (or `PROC_NULL`) index 0,
    /// which matches every index (see the module docs).
    #[inline]
    pub(crate) fn recv_word(&self, ctx: u32, source: i32) -> u32 {
        with_bits(ctx, *self.recv.get(source as usize).unwrap_or(&self.any))
    }
}

/// Context `ctx` with VCI and sender `bits` computed once (an endpoint's
/// or a stream member's), as `on_vci(from_sender(ctx, ..), ..)` would
/// make it: a context has no such bits of its own.
#[inline(always)]
pub(crate) fn with_bits(ctx: u32, bits: u32) -> u32 {
    debug_assert_eq!(ctx & CONTEXT_MAX, ctx, "a context with bits");
    ctx | bits
}

/// One endpoint of an endpoints communicator, for one thread: `Send`, not
/// `Sync` (the type says that one thread at a time uses it, which is what
/// keeps its VCI's lock uncontended). Derefs to its [`SimpleCommunicator`]
/// and implements [`Communicator`], so every operation of a communicator
/// is there; [`Communicator::rank`] is the endpoint's rank.
#[derive(Debug)]
pub struct Endpoint {
    comm: SimpleCommunicator,
    _one_thread: PhantomData<Cell<()>>,
}

impl std::ops::Deref for Endpoint {
    type Target = SimpleCommunicator;
    fn deref(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl Communicator for Endpoint {
    fn as_simple(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl Endpoint {
    /// The number of the VCI of this process that carries this endpoint's
    /// receives.
    pub fn vci(&self) -> usize {
        self.comm.endpoint_part().map_or(0, |p| p.vci)
    }

    /// This endpoint's index among its process's endpoints (its position
    /// in the vector [`SimpleCommunicator::create_endpoints`] returned).
    pub fn index(&self) -> usize {
        self.comm.endpoint_part().map_or(0, |p| p.index as usize)
    }

    /// The communicator itself, for a layer that hands it out as a handle
    /// of its own (the C interface: an `MPI_Comm` per endpoint). Cloning
    /// or sharing it between threads stays correct (the locks are real),
    /// only slower.
    pub fn into_comm(self) -> SimpleCommunicator {
        self.comm
    }
}

impl SimpleCommunicator {
    /// Creates `n` endpoints of this process in a new communicator whose
    /// ranks are the endpoints of every member (`MPIX_Comm_create_endpoints`;
    /// see [`crate::endpoints`]). Collective over this communicator (an
    /// intracommunicator); each member gives its own `n`, 1 to
    /// [`MAX_ENDPOINTS`]. Endpoint `i` of the result has rank
    /// `base + i`, `base` the number of endpoints of the members of lower
    /// rank.
    ///
    /// Errors, on every member alike (nobody is left waiting):
    /// [`Error::Arg`] for an `n` out of range here, [`Error::Comm`] for one
    /// out of range elsewhere, for too few free VCIs on some member (set
    /// `HMPI_VCIS` to at least `n + 1`), for an intercommunicator or an
    /// endpoints communicator as parent.
    pub fn create_endpoints(&self, n: usize) -> Result<Vec<Endpoint>> {
        create(self, n)
    }
}

/// Packs up to [`MAX_ENDPOINTS`] VCI numbers, four bits each.
fn pack(vcis: &[usize]) -> i64 {
    vcis.iter()
        .enumerate()
        .fold(0, |a, (i, &v)| a | ((v as i64 & 0xf) << (4 * i)))
}

/// The VCI of endpoint `j` in a word of [`pack`].
fn unpack(packed: i64, j: usize) -> usize {
    ((packed >> (4 * j)) & 0xf) as usize
}

fn create(parent: &SimpleCommunicator, n: usize) -> Result<Vec<Endpoint>> {
    if parent.is_inter() || parent.is_endpoints() {
        // Every member sees the same kind of parent: nobody waits.
        return Err(Error::Comm {
            reason: "endpoints of an intercommunicator or of an endpoints communicator".into(),
        });
    }
    let ep = endpoint()?;
    // Communicators whose nonblocking collectives have finished are
    // forgotten, so that the VCIs of endpoints dropped since are free.
    crate::collective::progress_in_flight();
    let in_range = (1..=MAX_ENDPOINTS).contains(&n);
    let held = if in_range {
        stream::reserve_free(n)?
    } else {
        Vec::new()
    };
    let mut vcis: Vec<usize> = held.iter().map(|h| h.number()).collect();
    if in_range && vcis.len() + 1 == n {
        // One missing: VCI 0, shared with the world's traffic.
        vcis.push(0);
    }
    let ready = in_range && vcis.len() == n;
    let mine = (if ready { n as i64 } else { -1 }, pack(&vcis));
    let all = parent.allgather_pairs(mine)?;
    if !in_range {
        return Err(Error::Arg {
            reason: format!("{n} endpoints: a process creates 1 to {MAX_ENDPOINTS}"),
        });
    }
    if !ready {
        return Err(Error::Comm {
            reason: format!(
                "{n} endpoints need {n} VCIs of this process; {} VCIs per rank, {} free \
                 besides VCI 0 (set HMPI_VCIS to at least {n}, better {}, at most {})",
                ep.vci_count(),
                held.len(),
                n + 1,
                vci::slots::MAX_VCIS
            ),
        });
    }
    if let Some(r) = all.iter().position(|&(c, _)| c < 0) {
        return Err(Error::Comm {
            reason: format!(
                "rank {r} of the parent could not create its endpoints (a count out of range, \
                 or too few VCIs)"
            ),
        });
    }
    let id = parent.agree_context_id()?;
    let parent_world = parent.world_ranks();
    let total: usize = all.iter().map(|&(c, _)| c as usize).sum();
    let mut world = Vec::with_capacity(total);
    let mut vci_of = Vec::with_capacity(total);
    let mut index = Vec::with_capacity(total);
    for (r, &(c, packed)) in all.iter().enumerate() {
        for j in 0..c as usize {
            let v = unpack(packed, j);
            if v >= ep.vci_count() {
                return Err(Error::Comm {
                    reason: format!(
                        "parent rank {r}'s endpoint {j} is on VCI {v}, out of range here \
                         (HMPI_VCIS differs between ranks?)"
                    ),
                });
            }
            world.push(parent_world[r]);
            vci_of.push(v as u8);
            index.push(j as u8);
        }
    }
    let most = all.iter().map(|&(c, _)| c as usize).max().unwrap_or(1);
    let stride = SENDER_STRIDE as usize;
    let mut from_world = vec![-1i32; (most - 1) * stride + ep.size() as usize];
    for (e, (&w, &j)) in world.iter().zip(&index).enumerate() {
        let at = w as usize + usize::from(j) * stride;
        let slot = from_world.get_mut(at).ok_or_else(|| Error::Rank {
            rank: w,
            size: ep.size(),
        })?;
        *slot = e as i32;
    }
    let from_world: Arc<[i32]> = from_world.into();
    let table = Table {
        vci: vci_of.into(),
        index: index.into(),
    };
    let me = parent.my_rank() as usize;
    let base: usize = all[..me].iter().map(|&(c, _)| c as usize).sum();
    let mut ids: Vec<_> = (1..n).map(|_| id.share()).collect();
    ids.insert(0, id);
    let mut holds = held.into_iter();
    let mut eps = Vec::with_capacity(n);
    for (j, id) in ids.into_iter().enumerate() {
        // The reserved VCIs come first; VCI 0, if used, is not held.
        let part = EpPart::new(&table, vcis[j], j as u32, holds.next());
        let c = SimpleCommunicator::new_endpoint(
            id,
            world.clone(),
            (base + j) as i32,
            from_world.clone(),
            part,
        )?;
        eps.push(Endpoint {
            comm: c,
            _one_thread: PhantomData,
        });
    }
    // Every process is here: set up each endpoint's collective state now
    // (rank 0 sends its block's address to every other endpoint, each
    // endpoint of a process receives its own in turn), so that a first
    // collective, nonblocking or not, needs no messages.
    for e in &eps {
        e.comm.prepare_collectives();
    }
    Ok(eps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing() {
        let v = [3, 0, 7, 1, 2, 5, 4, 6];
        let p = pack(&v);
        for (j, &x) in v.iter().enumerate() {
            assert_eq!(unpack(p, j), x);
        }
        assert!(p >= 0);
    }

    #[test]
    fn words_of_endpoints() {
        // Two processes: ranks 0, 1 in process A (VCIs 1, 2), rank 2 in B
        // (VCI 0).
        let table = Table {
            vci: vec![1, 2, 0].into(),
            index: vec![0, 1, 0].into(),
        };
        let part = |vci, index| EpPart::new(&table, vci, index, None);
        let (a1, b0) = (part(2, 1), part(0, 0));
        // A message from rank 1 to rank 2 meets rank 2's receive from
        // rank 1, not its receive from rank 0; ANY_SOURCE's word is the
        // plain one on rank 2's VCI.
        let w = a1.send_word(10, 2);
        assert_eq!(w, b0.recv_word(10, 1));
        assert_ne!(w, b0.recv_word(10, 0));
        assert_eq!(b0.recv_word(10, vci::ANY_SOURCE), on_vci(10, 0));
        assert_eq!(vci::endpoint::sender_of(w), 1);
        assert_eq!(a1.send_word(10, vci::PROC_NULL), 10);
    }
}
