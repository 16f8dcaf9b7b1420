//! Communicators: [`SimpleCommunicator`] and the [`Communicator`] trait
//! (rsmpi's names), with duplication and splitting. A communicator keeps
//! the hints set on it ([`SimpleCommunicator::info`]); an
//! intercommunicator ([`crate::intercomm`]) is a `SimpleCommunicator`
//! too, whose point-to-point ranks name its remote group
//! ([`SimpleCommunicator::is_inter`]).
//!
//! A communicator is a [`Group`] (its members, by communicator rank) and a
//! **context id** `k`: its point-to-point messages travel in engine context
//! `2k`, its internal collective traffic (the agreements below, barriers)
//! in `2k + 1`, so neither can match the other's or another communicator's
//! receives. Every send and receive translates communicator ranks to world
//! ranks and back.
//!
//! # Context ids
//! The world is `k = 0`, the self communicator `k = 1` (it only talks to
//! itself, so every process may use the same id). A new communicator's id
//! is agreed over its parent without any central server:
//!
//! 1. each rank proposes its lowest id not in use by any communicator it
//!    belongs to (a process-wide set);
//! 2. an allreduce-max over the parent (engine send/recv on the parent's
//!    internal context) picks the largest proposal;
//! 3. each rank tries to claim that id in its set (another thread of the
//!    process may have claimed it meanwhile, for another communicator);
//!    an allreduce-min of the outcomes tells whether every rank did;
//! 4. if not, the claims are released and the agreement repeats above the
//!    failed id.
//!
//! So the id is the same on every member, and distinct from the id of
//! every other communicator of every member — the only property matching
//! needs. An id goes back to its process's set when the last clone of the
//! communicator is dropped (`MPI_Comm_free`), so the set holds only the
//! ids of live communicators and a proposal costs as much however many
//! communicators were made before. `split` agrees one id for all colors:
//! the resulting communicators have disjoint members.
//!
//! # Across nodes
//! With feature `mpi`, under an MPI launcher, the world spans every node:
//! the communicator then carries a
//! [`SpanningCommunicator`](crate::multinode::SpanningCommunicator)
//! ([`SimpleCommunicator::spanning`]) and its own fields describe its node
//! part. [`Communicator::rank`], [`Communicator::size`], `barrier`,
//! `duplicate` and `split` (and the typed point-to-point and collectives)
//! go through the spanning communicator; `split_shared` gives the node
//! part as a node-local communicator. Without the feature there is no
//! such field and no branch.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let dup = world.duplicate().unwrap();
//! assert_eq!((dup.rank(), dup.size()), (world.rank(), world.size()));
//! // A message on `dup` is not seen on `world`.
//! dup.this_process().send_with_tag(&5u32, 7).unwrap();
//! assert!(world.any_process().immediate_probe().unwrap().is_none());
//! let (x, st) = dup.any_process().receive::<u32>().unwrap();
//! assert_eq!((x, st.tag()), (5, 7));
//! let half = world.split(Some(world.rank() as u32 % 2), 0).unwrap().unwrap();
//! assert_eq!(half.size(), 1);
//! assert!(world.split(None, 0).unwrap().is_none()); // MPI_UNDEFINED
//! ```

use crate::environment::endpoint;
use crate::error::{Error, Result};
use crate::group::Group;
use crate::info::Info;
use crate::point_to_point::{AnyProcess, Process};
use crate::raw::{self, Traffic};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// `MPI_MAX_OBJECT_NAME`: a communicator's name has fewer bytes
/// ([`SimpleCommunicator::set_name`]).
pub const MAX_OBJECT_NAME: usize = 128;

/// The world's context id.
const WORLD_ID: u32 = 0;
/// The self communicator's context id.
const SELF_ID: u32 = 1;
/// The largest context id: `2k + 1` must fit in the engine's context
/// word, whose top bits may name a VCI (`vci::endpoint::on_vci`).
const MAX_ID: u32 = vci::endpoint::CONTEXT_MAX / 2;

/// Tags of the internal collectives (on a communicator's internal context).
const TAG_REDUCE: i32 = 1;
const TAG_BCAST: i32 = 2;
const TAG_GATHER: i32 = 3;
const TAG_GATHER_BCAST: i32 = 4;
const TAG_COLL_SETUP: i32 = 5;
const TAG_BCAST_LEN: i32 = 6;
const TAG_BCAST_DATA: i32 = 7;

/// Context ids claimed by communicators this process belongs to (besides
/// the world's and self's), each with the number of its holders (more
/// than one for the endpoints of an endpoints communicator,
/// [`crate::endpoints`]).
static CLAIMED: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

fn claimed() -> std::sync::MutexGuard<'static, BTreeMap<u32, usize>> {
    // A panic while holding the lock cannot leave the set inconsistent
    // (single insert/remove/count change), so a poisoned lock is still
    // usable.
    CLAIMED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lowest context id at or above `floor` not claimed here.
fn lowest_free(floor: u32) -> u32 {
    let set = claimed();
    let mut k = floor.max(SELF_ID + 1);
    while set.contains_key(&k) {
        k += 1;
    }
    k
}

/// A context id claimed in this process's set (see the module docs),
/// released when its last holder drops it; the world's and self's are not
/// in the set.
#[derive(Debug)]
pub(crate) struct ContextId(u32);

impl ContextId {
    /// One more holder of this id (another endpoint of the same
    /// communicator in this process): the id stays claimed until every
    /// holder is dropped.
    pub(crate) fn share(&self) -> ContextId {
        if self.0 > SELF_ID {
            *claimed().entry(self.0).or_insert(0) += 1;
        }
        ContextId(self.0)
    }
}

impl Drop for ContextId {
    fn drop(&mut self) {
        if self.0 > SELF_ID {
            let mut set = claimed();
            if let Some(n) = set.get_mut(&self.0) {
                *n -= 1;
                if *n == 0 {
                    set.remove(&self.0);
                }
            }
        }
    }
}

/// Agrees on a context id free on every process that `allreduce` spans
/// and claims it there (see the module docs); `allreduce(v, op)` combines
/// one value of every such process with `op`.
pub(crate) fn agree_by(
    mut allreduce: impl FnMut(u32, fn(u32, u32) -> u32) -> Result<u32>,
) -> Result<ContextId> {
    let mut floor = 0;
    loop {
        let proposal = lowest_free(floor);
        let k = allreduce(proposal, u32::max)?;
        if k > MAX_ID {
            return Err(Error::Comm {
                reason: "no context id left".into(),
            });
        }
        // The guard of the set is released at the end of this
        // statement, before a failed claim (`None`) could be dropped.
        let inserted = {
            let mut set = claimed();
            let free = !set.contains_key(&k);
            if free {
                set.insert(k, 1);
            }
            free
        };
        let mine = inserted.then(|| ContextId(k));
        // A failed agreement drops (releases) this rank's claim.
        if allreduce(u32::from(mine.is_some()), u32::min)? == 1 {
            if let Some(id) = mine {
                return Ok(id);
            }
        }
        floor = k + 1;
    }
}

#[derive(Debug)]
struct Inner {
    /// Context id `k` (engine contexts `2k` and `2k + 1`).
    id: ContextId,
    group: Group,
    /// This process's rank in the communicator.
    rank: i32,
    /// Communicator rank of each world rank, `-1` for non-members.
    from_world: Arc<[i32]>,
    /// Communicator rank `r` is world rank `r` for every member (the world
    /// and its duplicates): ranks pass between the two unchanged, so the
    /// message path reads no table.
    identity: bool,
    /// The shared state of its collectives, set up at the first one
    /// (absent for a communicator of one).
    coll: OnceLock<crate::collective::Coll>,
    /// Its process topology, if it was created with one (kept by
    /// duplicates).
    topology: OnceLock<Arc<crate::topology::Topology>>,
    /// The hints set on it (`MPI_Comm_set_info`, `*_with_info`).
    info: Mutex<Info>,
    /// The VCI mapping its hints (or streams) put in effect
    /// ([`crate::hints`]).
    vci_map: crate::hints::VciMap,
    /// What an intercommunicator has besides its local group (`None` for
    /// an intracommunicator).
    inter: Option<Arc<crate::intercomm::InterPart>>,
    /// The attributes attached to it ([`crate::attr`]).
    attrs: crate::attr::Attributes,
    /// Its own buffer for buffered sends, if attached ([`crate::buffered`]).
    bsend: crate::buffered::Pool,
    /// The name [`SimpleCommunicator::set_name`] gave it (`None`: the
    /// predefined name, or none).
    name: Mutex<Option<String>>,
    /// For one endpoint of an endpoints communicator, the map of its
    /// members to processes and VCIs ([`crate::endpoints`]).
    endpoints: Option<crate::endpoints::EpPart>,
}

impl Inner {
    /// A communicator's state with its own parts (context, group, rank,
    /// world-rank table) and everything else fresh: no collective state,
    /// topology, hints, attributes, buffer or name; an intracommunicator
    /// of processes (the callers of intercommunicators and endpoints set
    /// `inter` / `endpoints` over it).
    fn fresh(
        id: ContextId,
        group: Group,
        rank: i32,
        from_world: Arc<[i32]>,
        identity: bool,
    ) -> Inner {
        Inner {
            id,
            identity,
            group,
            rank,
            from_world,
            coll: OnceLock::new(),
            topology: OnceLock::new(),
            info: Mutex::new(Info::new()),
            vci_map: Default::default(),
            inter: None,
            attrs: crate::attr::Attributes::new(),
            bsend: crate::buffered::Pool::new(),
            name: Mutex::new(None),
            endpoints: None,
        }
    }
}

/// Whether every member's communicator rank is its world rank.
fn is_identity(group: &Group) -> bool {
    group
        .world_ranks()
        .iter()
        .enumerate()
        .all(|(i, &w)| usize::try_from(w) == Ok(i))
}

/// A communicator (`MPI_Comm`, rsmpi's `SimpleCommunicator`): cheap to
/// clone (clones share the context), `Send + Sync` (threads may use one
/// communicator concurrently, with distinct tags or sources).
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    inner: Arc<Inner>,
    /// With feature `mpi`, under an MPI launcher: the communicator that
    /// spans nodes which this one is ([`crate::multinode`]); `inner` is
    /// then its node part. The typed API's entry points consult it first
    /// (one predictable branch); `None` for every node-local communicator.
    #[cfg(feature = "mpi")]
    span: Option<crate::multinode::SpanningCommunicator>,
}

impl SimpleCommunicator {
    /// The node-local communicator of `inner`.
    #[inline]
    fn of(inner: Arc<Inner>) -> SimpleCommunicator {
        SimpleCommunicator {
            inner,
            #[cfg(feature = "mpi")]
            span: None,
        }
    }

    /// The communicator of the typed API that is `span` (feature `mpi`):
    /// its node part is `span`'s node-local communicator.
    #[cfg(feature = "mpi")]
    pub(crate) fn spanning_nodes(
        span: crate::multinode::SpanningCommunicator,
    ) -> SimpleCommunicator {
        SimpleCommunicator {
            inner: Arc::clone(&span.node_comm().inner),
            span: Some(span),
        }
    }

    /// The communicator spanning nodes that this one is, if it is one
    /// (feature `mpi`, under an MPI launcher: [`crate::Universe::world`]
    /// and what is split or duplicated from it); `None` for a node-local
    /// communicator.
    #[cfg(feature = "mpi")]
    #[inline(always)]
    pub fn spanning(&self) -> Option<&crate::multinode::SpanningCommunicator> {
        self.span.as_ref()
    }

    /// Whether this communicator spans nodes (always `false` without
    /// feature `mpi`): its node part alone is what the raw tier, the
    /// C interface and the layers without a spanning form see, and they
    /// refuse it.
    #[inline(always)]
    pub fn spans_nodes(&self) -> bool {
        #[cfg(feature = "mpi")]
        {
            self.span.is_some()
        }
        #[cfg(not(feature = "mpi"))]
        {
            false
        }
    }

    /// Whether communicator rank `rank` shares this process's heap: `false`
    /// only for a member of a communicator spanning nodes that sits on
    /// another node (a block's address means nothing there). `true` for
    /// every rank of a node-local communicator, and for ranks outside the
    /// communicator (the operation that uses them reports those).
    #[inline]
    pub fn shares_heap_with(&self, rank: i32) -> bool {
        #[cfg(feature = "mpi")]
        if let Some(s) = &self.span {
            return s.is_local(rank).unwrap_or(true);
        }
        let _ = rank;
        true
    }

    /// [`Error::Comm`] for an operation that has no form spanning nodes
    /// yet, on a communicator that spans nodes.
    #[cold]
    pub(crate) fn no_span_form(&self, what: &str) -> Error {
        Error::Comm {
            reason: format!(
                "{what} is not available on a communicator spanning nodes \
                 (see docs/multinode.md); use a node-local communicator \
                 (split_shared)"
            ),
        }
    }

    /// A new intracommunicator over the same members (the spanning one's
    /// duplicate for a communicator spanning nodes), without the topology
    /// and hints [`Communicator::duplicate`] copies.
    fn duplicate_intra(&self) -> Result<SimpleCommunicator> {
        #[cfg(feature = "mpi")]
        if let Some(s) = &self.span {
            return Ok(SimpleCommunicator::spanning_nodes(s.duplicate()?));
        }
        SimpleCommunicator::new(self.agree_context_id()?, self.inner.group.clone())
    }

    pub(crate) fn new(id: ContextId, group: Group) -> Result<SimpleCommunicator> {
        let ep = endpoint()?;
        let rank = group.rank().ok_or_else(|| {
            Error::Internal("a communicator built on a process outside its group".into())
        })?;
        let mut from_world = vec![-1; ep.size() as usize];
        for (i, &w) in group.world_ranks().iter().enumerate() {
            let slot = from_world.get_mut(w as usize).ok_or_else(|| Error::Rank {
                rank: w,
                size: ep.size(),
            })?;
            *slot = i as i32;
        }
        let is_world = id.0 == WORLD_ID;
        let identity = is_identity(&group);
        let c = SimpleCommunicator::of(Arc::new(Inner::fresh(
            id,
            group,
            rank,
            from_world.into(),
            identity,
        )));
        c.tell_senders(ep);
        // Every member is in this constructor (the world's is set up by
        // `init`, the one call every rank makes).
        if !is_world {
            c.prepare_collectives();
        }
        Ok(c)
    }

    /// Sets up the shared state of its collectives now, while every
    /// member is in a collective call, so that a nonblocking collective
    /// that is a communicator's first never waits for rank 0 to arrive
    /// (rank 0 would be free to block first on something that needs the
    /// others). A failure here is not the constructor's (rank 0's arena
    /// may be full): the state stays unset, and the first collective sets
    /// it up then and reports what fails.
    pub(crate) fn prepare_collectives(&self) {
        if self.is_inter() || self.inner.group.size() <= 1 || self.inner.coll.get().is_some() {
            return;
        }
        if let Ok(c) = crate::collective::setup(self, TAG_COLL_SETUP) {
            let _ = self.inner.coll.set(c);
        }
    }

    /// An intercommunicator on context id `id`: this process's rank and
    /// size are its local group's, point-to-point ranks name `remote`'s
    /// members (through `from_world`, the table of the remote group).
    pub(crate) fn new_inter(
        id: ContextId,
        local: Group,
        part: crate::intercomm::InterPart,
    ) -> Result<SimpleCommunicator> {
        let ep = endpoint()?;
        let rank = local.rank().ok_or_else(|| {
            Error::Internal("an intercommunicator built on a process outside its group".into())
        })?;
        let mut from_world = vec![-1; ep.size() as usize];
        for (i, &w) in part.remote.world_ranks().iter().enumerate() {
            let slot = from_world.get_mut(w as usize).ok_or_else(|| Error::Rank {
                rank: w,
                size: ep.size(),
            })?;
            *slot = i as i32;
        }
        let c = SimpleCommunicator::of(Arc::new(Inner {
            inter: Some(Arc::new(part)),
            ..Inner::fresh(id, local, rank, from_world.into(), false)
        }));
        c.tell_senders(ep);
        Ok(c)
    }

    /// One endpoint of an endpoints communicator on context id `id`: its
    /// rank `rank`, the world rank of the process of each member in
    /// `world` (a process appears once per endpoint), `from_world` the
    /// table from the sources that statuses name to ranks, and `part` the
    /// map to the members' VCIs ([`crate::endpoints`]). Its collective
    /// state is set up by the caller (`prepare_collectives`, once every
    /// endpoint of the process exists) or else at the first collective.
    pub(crate) fn new_endpoint(
        id: ContextId,
        world: Vec<i32>,
        rank: i32,
        from_world: Arc<[i32]>,
        part: crate::endpoints::EpPart,
    ) -> Result<SimpleCommunicator> {
        let ep = endpoint()?;
        let me = usize::try_from(rank)
            .ok()
            .and_then(|r| world.get(r).copied())
            .ok_or_else(|| Error::Internal(format!("endpoint rank {rank} out of range")))?;
        let group = Group::with_repeats(world, me);
        let c = SimpleCommunicator::of(Arc::new(Inner {
            endpoints: Some(part),
            ..Inner::fresh(id, group, rank, from_world, false)
        }));
        c.tell_senders(ep);
        Ok(c)
    }

    /// Whether this is an endpoint of an endpoints communicator
    /// ([`crate::endpoints`]): several of its ranks may live in one
    /// process.
    #[inline]
    pub fn is_endpoints(&self) -> bool {
        self.inner.endpoints.is_some()
    }

    /// The endpoint map of this communicator, if it is one of an
    /// endpoints communicator.
    pub(crate) fn endpoint_part(&self) -> Option<&crate::endpoints::EpPart> {
        self.inner.endpoints.as_ref()
    }

    /// Tells the engine who may send in this communicator's contexts (its
    /// members; an intercommunicator's remote group), so that a receive
    /// from any source fails only once all of them have failed.
    fn tell_senders(&self, ep: &vci::Endpoint) {
        let senders: Vec<u32> = self.world_ranks().iter().map(|&w| w as u32).collect();
        ep.set_senders(self.context(), &senders);
        ep.set_senders(self.internal_context(), &senders);
    }

    /// Whether this is an intercommunicator (`MPI_Comm_test_inter`).
    #[inline]
    pub fn is_inter(&self) -> bool {
        self.inner.inter.is_some()
    }

    /// The intercommunicator's parts (`None` for an intracommunicator).
    #[inline]
    pub(crate) fn inter_part(&self) -> Option<&crate::intercomm::InterPart> {
        self.inner.inter.as_deref()
    }

    /// The attributes attached to this communicator (shared by its
    /// clones; a duplicate starts with none until
    /// [`crate::attr::Attributes::copy_into`] copies them).
    pub fn attributes(&self) -> &crate::attr::Attributes {
        &self.inner.attrs
    }

    /// The communicator's name (`MPI_Comm_get_name`): what
    /// [`SimpleCommunicator::set_name`] gave this communicator (its
    /// clones share it), else `MPI_COMM_WORLD` for the world,
    /// `MPI_COMM_SELF` for the self communicator and the empty string for
    /// any other (a duplicate does not inherit its parent's name). At most
    /// [`MAX_OBJECT_NAME`]` - 1` bytes.
    ///
    /// ```
    /// use hmpi_core::traits::*;
    ///
    /// let universe = hmpi_core::init().unwrap();
    /// let world = universe.world();
    /// assert_eq!(world.name(), "MPI_COMM_WORLD");
    /// assert_eq!(universe.self_comm().name(), "MPI_COMM_SELF");
    /// let dup = world.duplicate().unwrap();
    /// assert_eq!(dup.name(), "");
    /// dup.set_name("halo").unwrap();
    /// assert_eq!((dup.clone().name(), world.name()), ("halo".into(), "MPI_COMM_WORLD".into()));
    /// let long = "é".repeat(100); // 200 bytes, two per character
    /// world.set_name(&long).unwrap();
    /// assert_eq!(world.name(), "é".repeat(63)); // 126 bytes: < MAX_OBJECT_NAME
    /// assert!(world.set_name("a\0b").is_err());
    /// ```
    pub fn name(&self) -> String {
        let set = self.inner.name.lock().unwrap_or_else(|p| p.into_inner());
        // The world spanning nodes: its node part's context is a duplicate's.
        #[cfg(feature = "mpi")]
        if let (None, Some(s)) = (&*set, &self.span) {
            return if crate::multinode::is_typed_world(s) {
                "MPI_COMM_WORLD".to_owned()
            } else {
                String::new()
            };
        }
        match (&*set, self.inner.id.0) {
            (Some(n), _) => n.clone(),
            (None, WORLD_ID) if !self.is_inter() => "MPI_COMM_WORLD".to_owned(),
            (None, SELF_ID) if !self.is_inter() => "MPI_COMM_SELF".to_owned(),
            (None, _) => String::new(),
        }
    }

    /// Names the communicator (`MPI_Comm_set_name`), locally: other
    /// processes and other communicators keep theirs. A name of
    /// [`MAX_OBJECT_NAME`] bytes or more is cut to the longest prefix of
    /// at most `MAX_OBJECT_NAME - 1` bytes that ends on a character
    /// boundary (MPI truncates). [`Error::Arg`] for a name with a NUL
    /// byte, which C could not read back.
    pub fn set_name(&self, name: &str) -> Result<()> {
        if name.contains('\0') {
            return Err(Error::Arg {
                reason: format!("a communicator name may not hold a NUL byte: {name:?}"),
            });
        }
        let mut end = name.len().min(MAX_OBJECT_NAME - 1);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        *self.inner.name.lock().unwrap_or_else(|p| p.into_inner()) = Some(name[..end].to_owned());
        Ok(())
    }

    /// Its own buffer for buffered sends ([`crate::buffered::attach_to`]).
    pub(crate) fn bsend_pool(&self) -> &crate::buffered::Pool {
        &self.inner.bsend
    }

    /// The hints set on this communicator (`MPI_Comm_get_info`): what
    /// `MPI_Comm_set_info` and the `*_with_info` constructors gave it.
    pub fn info(&self) -> Info {
        self.inner
            .info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces every hint of this communicator with those of `info`
    /// (`MPI_Comm_dup_with_info`). The VCI hints ([`crate::hints`]) take
    /// effect; one with a malformed value is dropped (check them first
    /// with [`CommHints::from_info`](crate::hints::CommHints::from_info),
    /// or use [`SimpleCommunicator::set_info`], which reports it).
    pub fn replace_info(&self, info: &Info) {
        let mut mine = self.inner.info.lock().unwrap_or_else(|p| p.into_inner());
        let mut new = info.clone();
        let hints = crate::hints::CommHints::from_info(&new).unwrap_or_else(|_| {
            for k in crate::hints::KEYS {
                let _ = new.delete(k);
            }
            crate::hints::CommHints::default()
        });
        hints.write_into(&mut new);
        self.inner.vci_map.set(&hints);
        *mine = new;
    }

    /// Sets the hints of this communicator (`MPI_Comm_set_info`): keys
    /// of `info` replace those already set, others stay. The VCI hints
    /// ([`crate::hints`]) take effect, and [`SimpleCommunicator::info`]
    /// reports them as they are in effect; a malformed one is
    /// [`Error::InfoValue`] and changes nothing.
    pub fn set_info(&self, info: &Info) -> Result<()> {
        let mut mine = self.inner.info.lock().unwrap_or_else(|p| p.into_inner());
        let mut new = mine.clone();
        for (k, v) in info.iter() {
            new.set(k, v)?;
        }
        let hints = crate::hints::CommHints::from_info(&new)?;
        hints.write_into(&mut new);
        self.inner.vci_map.set(&hints);
        *mine = new;
        Ok(())
    }

    /// The hints of this communicator that the VCI mapping reads.
    pub fn hints(&self) -> crate::hints::CommHints {
        // What `set_info` and `replace_info` stored parses.
        crate::hints::CommHints::from_info(&self.info()).unwrap_or_default()
    }

    /// A duplicate of this communicator with `hints` in effect besides
    /// the hints it inherits (`MPI_Comm_dup_with_info`). Collective; every
    /// member gives the same hints.
    pub fn dup_with_hints(&self, hints: &crate::hints::CommHints) -> Result<SimpleCommunicator> {
        let d = self.duplicate()?;
        d.set_info(&hints.to_info())?;
        Ok(d)
    }

    /// [`Communicator::split`] with `hints` in effect on the parts.
    /// Collective; every member gives the same hints.
    pub fn split_with_hints(
        &self,
        color: Option<u32>,
        key: i32,
        hints: &crate::hints::CommHints,
    ) -> Result<Option<SimpleCommunicator>> {
        let s = self.split(color, key)?;
        if let Some(c) = &s {
            c.set_info(&hints.to_info())?;
        }
        Ok(s)
    }

    /// The engine context word of a point-to-point send of this
    /// communicator to `dest` with `tag`: its context, or, with hints or
    /// streams, that context on the VCI they pick ([`crate::hints`]; with
    /// `mpi_assert_allow_overtaking`, the sending thread's VCI).
    #[inline(always)]
    pub fn send_context(&self, dest: i32, tag: i32) -> u32 {
        let i = &self.inner;
        if let Some(e) = &i.endpoints {
            return e.send_word(self.context(), dest);
        }
        i.vci_map
            .send_word(self.context(), i.id.0, i.rank, dest, tag)
    }

    /// The engine context word of a point-to-point receive or probe of
    /// this communicator from `source` (or `ANY_SOURCE`) with `tag` (or
    /// `ANY_TAG`), as [`SimpleCommunicator::send_context`] (with
    /// `mpi_assert_allow_overtaking`, a word that names every VCI);
    /// [`Error::Arg`] for a wildcard that a hint rules out.
    #[inline(always)]
    pub fn recv_context(&self, source: i32, tag: i32) -> Result<u32> {
        let i = &self.inner;
        if let Some(e) = &i.endpoints {
            return Ok(e.recv_word(self.context(), source));
        }
        i.vci_map
            .recv_word(self.context(), i.id.0, i.rank, source, tag)
    }

    /// The engine context word of an internal (collective) send to
    /// `dest`: [`SimpleCommunicator::internal_context`], on the VCI of
    /// `dest`'s endpoint for an endpoints communicator.
    #[inline]
    pub fn internal_send_context(&self, dest: i32) -> u32 {
        let i = &self.inner;
        match &i.endpoints {
            None => self.internal_context(),
            Some(e) => e.send_word(self.internal_context(), dest),
        }
    }

    /// The engine context word of an internal (collective) receive from
    /// `source`, as [`SimpleCommunicator::internal_send_context`].
    #[inline]
    pub fn internal_recv_context(&self, source: i32) -> u32 {
        let i = &self.inner;
        match &i.endpoints {
            None => self.internal_context(),
            Some(e) => e.recv_word(self.internal_context(), source),
        }
    }

    /// The VCI mapping of this communicator.
    pub(crate) fn vci_map(&self) -> &crate::hints::VciMap {
        &self.inner.vci_map
    }

    fn world_new() -> Result<SimpleCommunicator> {
        // Under an MPI launcher the world spans every node (made at init).
        #[cfg(feature = "mpi")]
        if let Some(w) = crate::multinode::typed_world() {
            endpoint()?;
            return Ok(w);
        }
        SimpleCommunicator::node_world()
    }

    /// This node's world (every rank of the node's heap), whatever the
    /// launcher: [`SimpleCommunicator::world`] without MPI.
    pub(crate) fn node_world() -> Result<SimpleCommunicator> {
        let ep = endpoint()?;
        let g = Group::from_world_ranks((0..ep.size()).collect(), ep.rank())?;
        SimpleCommunicator::new(ContextId(WORLD_ID), g)
    }

    /// The communicator of this process alone (`MPI_COMM_SELF`; rsmpi's
    /// `SimpleCommunicator::self_comm`). [`Error::NotInitialized`] /
    /// [`Error::Finalized`] outside the runtime's life.
    pub fn self_comm() -> Result<SimpleCommunicator> {
        Ok(SimpleCommunicator::self_of(endpoint()?.rank()))
    }

    /// The world communicator (rsmpi's `SimpleCommunicator::world`; also
    /// [`crate::Universe::world`]): every rank of the job, which under an
    /// MPI launcher (feature `mpi`) spans every node, rank `r` being MPI's
    /// world rank `r` ([`crate::multinode`]).
    pub fn world() -> Result<SimpleCommunicator> {
        SimpleCommunicator::world_new()
    }

    pub(crate) fn self_of(me: i32) -> SimpleCommunicator {
        let g = Group::from_world_ranks(vec![me], me).unwrap_or_else(|_| Group::empty(me));
        let mut from_world = vec![-1; me as usize + 1];
        from_world[me as usize] = 0;
        let identity = is_identity(&g);
        SimpleCommunicator::of(Arc::new(Inner::fresh(
            ContextId(SELF_ID),
            g,
            0,
            from_world.into(),
            identity,
        )))
    }

    /// Whether `other` is this very communicator (a clone of it), not
    /// merely one with the same members.
    pub fn same_as(&self, other: &SimpleCommunicator) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub(crate) fn world_rank_of_me(&self) -> i32 {
        self.inner.group.world_ranks()[self.inner.rank as usize]
    }

    /// The engine context of this communicator's point-to-point messages
    /// (for layers built on the engine, such as ownership passing and the C
    /// interface).
    #[inline]
    pub fn context(&self) -> u32 {
        2 * self.inner.id.0
    }

    /// The engine context of this communicator's internal messages
    /// (collectives' traffic; never matched by point-to-point receives).
    pub fn internal_context(&self) -> u32 {
        2 * self.inner.id.0 + 1
    }

    /// The context id `k` of this communicator (see the module docs).
    pub fn context_id(&self) -> u32 {
        self.inner.id.0
    }

    /// This process's rank in the communicator (as
    /// [`Communicator::rank`], without the trait; of its node part for a
    /// communicator spanning nodes).
    #[inline]
    pub fn my_rank(&self) -> i32 {
        self.inner.rank
    }

    /// The number of members (as [`Communicator::size`], without the
    /// trait; of its node part for a communicator spanning nodes).
    #[inline]
    pub fn members(&self) -> i32 {
        self.inner.group.size()
    }

    /// The world rank of each process that point-to-point ranks of this
    /// communicator name, by rank: its members for an intracommunicator,
    /// the remote group's for an intercommunicator.
    #[inline]
    pub fn world_ranks(&self) -> &[i32] {
        match &self.inner.inter {
            None => self.inner.group.world_ranks(),
            Some(p) => p.remote.world_ranks(),
        }
    }

    /// The number of processes that ranks of this communicator name in
    /// point-to-point and in the pieces of a collective: its size, or for
    /// an intercommunicator the remote group's size.
    #[inline]
    pub fn peers(&self) -> i32 {
        self.world_ranks().len() as i32
    }

    /// The world rank of each member of the local group, by rank.
    #[inline]
    pub fn local_world_ranks(&self) -> &[i32] {
        self.inner.group.world_ranks()
    }

    /// Whether every member's communicator rank is its world rank (the
    /// world and its duplicates): ranks pass unchanged.
    #[inline]
    pub fn is_identity(&self) -> bool {
        self.inner.identity
    }

    /// The communicator rank of world rank `world` as a status names it:
    /// `PROC_NULL` passes, `None` for a process outside the communicator.
    #[inline]
    pub fn rank_of_world(&self, world: i32) -> Option<i32> {
        if world == vci::PROC_NULL || self.inner.identity {
            return Some(world);
        }
        usize::try_from(world)
            .ok()
            .and_then(|w| self.inner.from_world.get(w).copied())
            .filter(|&r| r >= 0)
    }

    /// World rank of communicator rank `rank`; `PROC_NULL` passes;
    /// [`Error::Rank`] for a rank outside the communicator (the check of
    /// [`raw::route`]).
    #[inline]
    pub fn to_world(&self, rank: i32) -> Result<i32> {
        raw::route(self, rank).map(raw::Route::engine_rank)
    }

    /// Source of a receive: as [`SimpleCommunicator::to_world`], and
    /// `ANY_SOURCE` passes ([`raw::route_source`]).
    #[inline]
    pub fn source_to_world(&self, rank: i32) -> Result<i32> {
        raw::route_source(self, rank).map(raw::Route::engine_rank)
    }

    /// The table from world ranks to communicator ranks (`-1` for
    /// non-members; for an intercommunicator, remote ranks), as statuses
    /// need it.
    #[inline]
    pub fn world_to_comm(&self) -> &Arc<[i32]> {
        &self.inner.from_world
    }

    /// What [`Status::from_engine`](crate::Status::from_engine) needs to
    /// name a status's source in this communicator: the table of
    /// [`SimpleCommunicator::world_to_comm`], or `None` where communicator
    /// ranks are world ranks (the source stays as it is).
    #[inline]
    pub fn status_ranks(&self) -> Option<&[i32]> {
        self.status_table().map(|t| &**t)
    }

    /// [`SimpleCommunicator::status_ranks`] as the shared table, for
    /// statuses made later (requests keep it).
    #[inline]
    pub(crate) fn status_table(&self) -> Option<&Arc<[i32]>> {
        if self.inner.identity {
            None
        } else {
            Some(&self.inner.from_world)
        }
    }

    /// The collective state of this communicator (`None` for a
    /// communicator of one member, whose collectives are local copies),
    /// set up at the first call: collective over the members, like every
    /// collective.
    pub fn coll(&self) -> Result<Option<&crate::collective::Coll>> {
        if self.is_inter() {
            return Err(Error::Comm {
                reason: "an intercommunicator's collectives run on its hidden \
                         intracommunicators"
                    .into(),
            });
        }
        // Outside the runtime's life a collective is an error, even on a
        // communicator whose state is already set up.
        endpoint()?;
        if self.spans_nodes() {
            return Err(self.no_span_form("this collective"));
        }
        if self.inner.group.size() <= 1 {
            return Ok(None);
        }
        if let Some(c) = self.inner.coll.get() {
            return Ok(Some(c));
        }
        let c = crate::collective::setup(self, TAG_COLL_SETUP)?;
        // Collectives on one communicator are never concurrent (MPI's
        // rule), so nobody else set it meanwhile.
        let _ = self.inner.coll.set(c);
        self.inner
            .coll
            .get()
            .map(Some)
            .ok_or_else(|| Error::Internal("collective state lost".into()))
    }

    /// The process topology attached to this communicator, if any
    /// (see [`crate::topology`]).
    pub fn topology(&self) -> Option<Arc<crate::topology::Topology>> {
        self.inner.topology.get().cloned()
    }

    /// Attaches a topology to a communicator just made (a second call
    /// keeps the first).
    pub(crate) fn set_topology(&self, t: crate::topology::Topology) {
        let _ = self.inner.topology.set(Arc::new(t));
    }

    pub(crate) fn send_internal(&self, buf: &[u8], rank: i32, tag: i32) -> Result<()> {
        raw::send_on(self, Traffic::Internal, buf, rank, tag)
    }

    pub(crate) fn recv_internal(&self, buf: &mut [u8], rank: i32, tag: i32) -> Result<()> {
        let st = raw::recv_on(self, Traffic::Internal, buf, rank, tag)?.into_result()?;
        if st.count != buf.len() as u64 {
            return Err(Error::Internal(format!(
                "internal collective: {} bytes where {} were expected",
                st.count,
                buf.len()
            )));
        }
        Ok(())
    }

    /// Allreduce of one `u32` with `op`, through rank 0 (internal context).
    pub(crate) fn allreduce_u32(&self, v: u32, op: fn(u32, u32) -> u32) -> Result<u32> {
        // Duplications started before on this communicator agree first
        // (they use the same tags).
        crate::intercomm::wait_started(self);
        let (rank, size) = (self.inner.rank, self.inner.group.size());
        if rank == 0 {
            let mut acc = v;
            for r in 1..size {
                let mut b = [0u8; 4];
                self.recv_internal(&mut b, r, TAG_REDUCE)?;
                acc = op(acc, u32::from_ne_bytes(b));
            }
            for r in 1..size {
                self.send_internal(&acc.to_ne_bytes(), r, TAG_BCAST)?;
            }
            Ok(acc)
        } else {
            self.send_internal(&v.to_ne_bytes(), 0, TAG_REDUCE)?;
            let mut b = [0u8; 4];
            self.recv_internal(&mut b, 0, TAG_BCAST)?;
            Ok(u32::from_ne_bytes(b))
        }
    }

    /// Allgather of one `(i64, i64)` per rank, by communicator rank.
    fn allgather_pair(&self, v: (i64, i64)) -> Result<Vec<(i64, i64)>> {
        let (rank, size) = (self.inner.rank, self.inner.group.size());
        let enc = |(a, b): (i64, i64)| {
            let mut x = [0u8; 16];
            x[..8].copy_from_slice(&a.to_ne_bytes());
            x[8..].copy_from_slice(&b.to_ne_bytes());
            x
        };
        let mut all = vec![0u8; 16 * size as usize];
        if rank == 0 {
            all[..16].copy_from_slice(&enc(v));
            for r in 1..size {
                let at = 16 * r as usize;
                self.recv_internal(&mut all[at..at + 16], r, TAG_GATHER)?;
            }
            for r in 1..size {
                self.send_internal(&all, r, TAG_GATHER_BCAST)?;
            }
        } else {
            self.send_internal(&enc(v), 0, TAG_GATHER)?;
            self.recv_internal(&mut all, 0, TAG_GATHER_BCAST)?;
        }
        Ok(all
            .chunks_exact(16)
            .map(|c| {
                let a = i64::from_ne_bytes(c[..8].try_into().unwrap_or_default());
                let b = i64::from_ne_bytes(c[8..].try_into().unwrap_or_default());
                (a, b)
            })
            .collect())
    }

    /// Broadcasts `data` from member `root` to every member (internal
    /// context); the others' `data` is replaced.
    pub(crate) fn bcast_bytes(&self, data: &mut Vec<u8>, root: i32) -> Result<()> {
        if self.inner.rank == root {
            let len = (data.len() as u64).to_ne_bytes();
            for r in (0..self.inner.group.size()).filter(|&r| r != root) {
                self.send_internal(&len, r, TAG_BCAST_LEN)?;
                self.send_internal(data, r, TAG_BCAST_DATA)?;
            }
        } else {
            let mut len = [0u8; 8];
            self.recv_internal(&mut len, root, TAG_BCAST_LEN)?;
            let n = usize::try_from(u64::from_ne_bytes(len))
                .map_err(|_| Error::Internal("broadcast too long".into()))?;
            data.clear();
            data.resize(n, 0);
            self.recv_internal(data, root, TAG_BCAST_DATA)?;
        }
        Ok(())
    }

    /// Agrees on a context id free on every rank of this communicator and
    /// claims it on every rank (see the module docs).
    pub(crate) fn agree_context_id(&self) -> Result<ContextId> {
        if self.is_endpoints() {
            // Two endpoints of one process would claim the same id in
            // the same process's set, and the agreement would never end.
            return Err(Error::Comm {
                reason: "a communicator derived from an endpoints communicator (duplicate, \
                         split, create) is not supported"
                    .into(),
            });
        }
        agree_by(|v, op| self.allreduce_u32(v, op))
    }

    pub(crate) fn local_group(&self) -> &Group {
        &self.inner.group
    }

    /// Allgather of one `(i64, i64)` per member (internal context).
    pub(crate) fn allgather_pairs(&self, v: (i64, i64)) -> Result<Vec<(i64, i64)>> {
        self.allgather_pair(v)
    }

    /// A barrier over this communicator's members (on the shared heap).
    fn barrier_impl(&self) -> Result<()> {
        crate::collective::raw::barrier(self, crate::collective::raw::Mode::Block).map(drop)
    }

    fn split_impl(&self, color: Option<u32>, key: i32) -> Result<Option<SimpleCommunicator>> {
        if self.is_inter() {
            return crate::intercomm::split(self, color, key);
        }
        let mine = (color.map_or(-1, i64::from), i64::from(key));
        let all = self.allgather_pair(mine)?;
        let k = self.agree_context_id()?;
        let Some(c) = color else {
            // Not a member of any part: the id goes back (dropped).
            drop(k);
            return Ok(None);
        };
        let mut members: Vec<(i64, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, &(col, _))| col == i64::from(c))
            .map(|(r, &(_, key))| (key, r))
            .collect();
        members.sort_unstable();
        let world: Vec<i32> = members
            .iter()
            .map(|&(_, r)| self.inner.group.world_ranks()[r])
            .collect();
        let g = Group::from_world_ranks(world, self.world_rank_of_me())?;
        SimpleCommunicator::new(k, g).map(Some)
    }
}

/// What every communicator can do (rsmpi's `Communicator` trait; bring it
/// into scope with `use hmpi_core::traits::*`). Implemented by
/// [`SimpleCommunicator`]; a type that wraps one implements
/// [`Communicator::as_simple`] and gets the rest.
pub trait Communicator {
    /// The communicator underneath.
    fn as_simple(&self) -> &SimpleCommunicator;

    /// This process's rank in the communicator.
    #[inline]
    fn rank(&self) -> i32 {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            return s.rank();
        }
        c.inner.rank
    }

    /// The number of processes.
    #[inline]
    fn size(&self) -> i32 {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            return s.size();
        }
        c.inner.group.size()
    }

    /// The communicator's group (`MPI_Comm_group`): its members by world
    /// rank (MPI's world rank under an MPI launcher, see
    /// [`crate::group`]).
    fn group(&self) -> Group {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            return s.group();
        }
        crate::group::shown(&c.inner.group)
    }

    /// The process of rank `rank` (checked when used: a bad rank is
    /// [`Error::Rank`] on the first operation; `PROC_NULL` is allowed).
    fn process_at_rank(&self, rank: i32) -> Process<'_> {
        Process::new(self.as_simple(), rank)
    }

    /// This process, as a peer (messages to self).
    fn this_process(&self) -> Process<'_> {
        Process::new(self.as_simple(), self.rank())
    }

    /// Every process, for receives from `ANY_SOURCE`.
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess::new(self.as_simple())
    }

    /// Blocks until every member has called it (`MPI_Barrier`).
    fn barrier(&self) -> Result<()> {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            return s.barrier();
        }
        c.barrier_impl()
    }

    /// A new communicator with the same group and a new context
    /// (`MPI_Comm_dup`). Collective.
    fn duplicate(&self) -> Result<SimpleCommunicator> {
        let c = self.as_simple();
        let d = if c.is_inter() {
            crate::intercomm::duplicate(c)?
        } else {
            c.duplicate_intra()?
        };
        // A duplicate keeps the topology and the hints (MPI_Comm_dup).
        if let Some(t) = c.inner.topology.get() {
            let _ = d.inner.topology.set(t.clone());
        }
        d.set_info(&c.info())?;
        Ok(d)
    }

    /// [`Communicator::duplicate`] under MPI's short name.
    fn dup(&self) -> Result<SimpleCommunicator> {
        self.duplicate()
    }

    /// Splits into one communicator per color, ranks ordered by `key` then
    /// by rank here (`MPI_Comm_split`). Collective. `color: None`
    /// (`MPI_UNDEFINED`) gets `Ok(None)`.
    fn split(&self, color: Option<u32>, key: i32) -> Result<Option<SimpleCommunicator>> {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            return Ok(s.split(color, key)?.map(SimpleCommunicator::spanning_nodes));
        }
        c.split_impl(color, key)
    }

    /// [`Communicator::split`] with key 0 (rsmpi's name).
    fn split_by_color(&self, color: Option<u32>) -> Result<Option<SimpleCommunicator>> {
        self.split(color, 0)
    }

    /// [`Communicator::split`] (rsmpi's name).
    fn split_by_color_with_key(
        &self,
        color: Option<u32>,
        key: i32,
    ) -> Result<Option<SimpleCommunicator>> {
        self.split(color, key)
    }

    /// The communicator of the processes that share memory with this one
    /// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`): on one node, every
    /// member, ordered by `key` (then by rank here). Collective. On a
    /// communicator spanning nodes, the members on this process's node
    /// (a virtual node under `HMPI_NODES`), as a node-local communicator.
    fn split_shared(&self, key: i32) -> Result<SimpleCommunicator> {
        #[cfg(feature = "mpi")]
        if let Some(s) = &self.as_simple().span {
            // The node part's ranks follow the ranks here.
            return s
                .node_comm()
                .split(Some(0), key)?
                .ok_or_else(|| Error::Internal("split_shared gave no communicator".into()));
        }
        self.split(Some(0), key)?
            .ok_or_else(|| Error::Internal("split_shared gave no communicator".into()))
    }

    /// A communicator of the members of `group` (a subgroup of this
    /// communicator's group), in the group's order; `None` on processes
    /// outside it (`MPI_Comm_create`). Collective over this communicator.
    /// Processes may pass different groups if those are disjoint (MPI
    /// 2.2): each distinct group becomes a communicator of its own, as a
    /// split by color would make it.
    fn split_by_subgroup_collective(&self, group: &Group) -> Result<Option<SimpleCommunicator>> {
        let c = self.as_simple();
        #[cfg(feature = "mpi")]
        if let Some(s) = &c.span {
            let (color, key) = s.subgroup_split_args(group)?;
            return self.split(color, key);
        }
        let group = &crate::group::on_node(group)?;
        if c.is_inter() {
            return crate::intercomm::create(c, group);
        }
        let (color, key) = group.split_args(c.world_rank_of_me(), |w| {
            usize::try_from(w)
                .ok()
                .and_then(|w| c.world_to_comm().get(w).copied())
        })?;
        self.split(color, key)
    }

    /// Ends the whole job with `code` (`MPI_Abort`; see [`crate::abort`]).
    fn abort(&self, code: i32) -> ! {
        crate::environment::abort(code)
    }
}

impl Communicator for SimpleCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A freed id is the next one proposed, so ids do not grow with the
    /// number of communicators made before (the agreement then costs the
    /// same whatever the history).
    #[test]
    fn freed_context_ids_are_reused() {
        // One process: the agreement's allreduce is the value itself.
        let alone = |v: u32, _: fn(u32, u32) -> u32| Ok(v);
        let a = agree_by(alone).unwrap();
        let b = agree_by(alone).unwrap();
        assert_ne!(a.0, b.0);
        let freed = a.0;
        drop(a);
        for _ in 0..1000 {
            let c = agree_by(alone).unwrap();
            assert_eq!(c.0, freed);
        }
        drop(b);
    }
}
