//! Intercommunicators ([`InterCommunicator`], `MPI_Intercomm_create`),
//! the communicator constructor that is collective over a group only
//! ([`create_group`], `MPI_Comm_create_group`) and the nonblocking
//! duplication ([`idup`], `MPI_Comm_idup`).
//!
//! An intercommunicator joins two disjoint groups. A process's rank and
//! size are those of its own (local) group; the ranks that point-to-point
//! operations take and statuses report name the other (remote) group, so
//! it is a [`SimpleCommunicator`] whose rank table maps the remote group
//! ([`SimpleCommunicator::is_inter`] tells the two kinds apart). Beside its
//! own context id (point-to-point in `2k`, its internal messages in
//! `2k + 1`) it keeps two hidden intracommunicators with ids of their own
//! ([`InterPart`]):
//!
//! * the local group's, on which the local halves of its collectives and
//!   its constructors' local steps run;
//! * the merged one, of both groups (the group whose lowest world rank is
//!   lower first), on which the collectives that cross the groups run
//!   through the ordinary engine and the constructors agree.
//!
//! # Construction
//! `MPI_Intercomm_create`: the two local leaders exchange their groups
//! over the peer communicator (point-to-point with the caller's tag, as
//! MPI says), and each leader broadcasts the remote group in its local
//! group. The three context ids are agreed over both groups at once: a
//! local allreduce, the leaders' exchange, and a second local allreduce
//! that spreads the combined value. `dup`, `split`, `create` and `merge`
//! agree over the hidden merged communicator.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! // Alone, only the self communicator's halves exist; see the tests for
//! // several ranks.
//! assert!(!world.is_inter());
//! ```

use crate::comm::{agree_by, ContextId, SimpleCommunicator};
use crate::error::{Error, Result};
use crate::group::{Group, GroupRelation};
use crate::info::Info;
use crate::raw;
use crate::traits::Communicator;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// What an intercommunicator keeps besides its local group.
#[derive(Debug)]
pub struct InterPart {
    /// The remote group (world ranks; "me" is this process).
    pub(crate) remote: Group,
    /// The hidden intracommunicator of the local group.
    pub(crate) local: SimpleCommunicator,
    /// The hidden intracommunicator of both groups, the lower one first.
    pub(crate) merged: SimpleCommunicator,
    /// Whether the local group comes first in `merged`.
    pub(crate) local_first: bool,
}

impl InterPart {
    /// The merged rank of remote rank `r`.
    pub(crate) fn merged_of_remote(&self, r: usize) -> usize {
        if self.local_first {
            self.local.members() as usize + r
        } else {
            r
        }
    }

    /// The merged rank of local rank `r`.
    pub(crate) fn merged_of_local(&self, r: usize) -> usize {
        if self.local_first {
            r
        } else {
            self.remote.size() as usize + r
        }
    }
}

fn min_world(g: &Group) -> i32 {
    g.world_ranks().iter().copied().min().unwrap_or(i32::MAX)
}

/// Builds an intercommunicator of `local` and `remote` from three context
/// ids agreed over both groups.
fn build(ids: [ContextId; 3], local: Group, remote: Group) -> Result<SimpleCommunicator> {
    let [k_inter, k_local, k_merged] = ids;
    if local.size() == 0 || remote.size() == 0 {
        return Err(Error::Internal(
            "an intercommunicator of an empty group".into(),
        ));
    }
    let local_first = min_world(&local) < min_world(&remote);
    let (a, b) = if local_first {
        (&local, &remote)
    } else {
        (&remote, &local)
    };
    let mut all = a.world_ranks().to_vec();
    all.extend_from_slice(b.world_ranks());
    let me = local.world_rank(local.rank().unwrap_or(-1))?;
    let merged = SimpleCommunicator::new(k_merged, Group::from_world_ranks(all, me)?)?;
    let local_comm = SimpleCommunicator::new(k_local, local.clone())?;
    let remote = Group::from_world_ranks(remote.world_ranks().to_vec(), me)?;
    SimpleCommunicator::new_inter(
        k_inter,
        local,
        InterPart {
            remote,
            local: local_comm,
            merged,
            local_first,
        },
    )
}

fn encode(ranks: &[i32]) -> Vec<u8> {
    ranks.iter().flat_map(|r| r.to_ne_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// [`Error::Comm`] for an endpoints communicator ([`crate::endpoints`]):
/// its endpoints would claim one context id twice in their process.
fn not_endpoints(c: &SimpleCommunicator) -> Result<()> {
    if c.is_endpoints() {
        return Err(Error::Comm {
            reason: "a communicator derived from an endpoints communicator is not supported".into(),
        });
    }
    Ok(())
}

/// `MPI_Intercomm_create`: an intercommunicator between the group of
/// `local` and the group of the process `remote_leader` of `peer`, whose
/// leaders are `local_leader` (a rank of `local`) and `remote_leader` (a
/// rank of `peer`, significant at the local leader only); the leaders
/// talk over `peer` with `tag`. Collective over both groups.
pub fn intercomm_create(
    local: &SimpleCommunicator,
    local_leader: i32,
    peer: Option<&SimpleCommunicator>,
    remote_leader: i32,
    tag: i32,
) -> Result<InterCommunicator> {
    if local.is_inter() {
        return Err(Error::Comm {
            reason: "the local communicator of MPI_Intercomm_create is an intercommunicator".into(),
        });
    }
    not_endpoints(local)?;
    if !(0..local.members()).contains(&local_leader) {
        return Err(Error::Rank {
            rank: local_leader,
            size: local.members(),
        });
    }
    raw::check_send_tag(tag)?;
    let leader = local.my_rank() == local_leader;
    // The leader's link to the other leader.
    let check_peer = || -> Result<&SimpleCommunicator> {
        let p = peer.ok_or_else(|| Error::Comm {
            reason: "the local leader of MPI_Intercomm_create needs a peer communicator".into(),
        })?;
        let w = p.to_world(remote_leader)?;
        if w == raw::PROC_NULL || local.local_world_ranks().contains(&w) {
            return Err(Error::Rank {
                rank: remote_leader,
                size: p.members(),
            });
        }
        Ok(p)
    };
    let ep = crate::environment::endpoint()?;
    let exchange = |p: &SimpleCommunicator, out: &[u8]| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; out.len().max(4 * ep.size() as usize + 8)];
        let mut st = raw::Status::empty();
        raw::sendrecv(
            p,
            out,
            remote_leader,
            tag,
            &mut buf,
            remote_leader,
            tag,
            &mut st,
        )?;
        buf.truncate(st.count as usize);
        Ok(buf)
    };
    // The groups. A leader that fails broadcasts no group, so that its
    // local group fails too instead of waiting.
    let mut remote_bytes = Vec::new();
    let mut failed = None;
    let mut link = None;
    if leader {
        match check_peer().and_then(|p| Ok((p, exchange(p, &encode(local.local_world_ranks()))?))) {
            Ok((p, b)) => (link, remote_bytes) = (Some(p), b),
            Err(e) => failed = Some(e),
        }
    }
    local.bcast_bytes(&mut remote_bytes, local_leader)?;
    if let Some(e) = failed {
        return Err(e);
    }
    if remote_bytes.is_empty() {
        return Err(Error::Comm {
            reason: "the local leader of MPI_Intercomm_create failed".into(),
        });
    }
    let me = local.local_world_ranks()[local.my_rank() as usize];
    let remote = Group::from_world_ranks(decode(&remote_bytes), me)?;
    if remote.size() == 0
        || remote
            .world_ranks()
            .iter()
            .any(|&w| local.local_world_ranks().contains(&w))
    {
        return Err(Error::Group {
            reason: "the groups of an intercommunicator must be disjoint and not empty".into(),
        });
    }
    // The ids, agreed over both groups.
    let agree = || {
        agree_by(|v, op| {
            let here = local.allreduce_u32(v, op)?;
            let mut both = 0;
            if let Some(p) = link {
                let there = exchange(p, &here.to_ne_bytes())?;
                let there = there
                    .get(..4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or_else(|| Error::Internal("short leader message".into()))?;
                both = op(here, there);
            }
            // Spread the leader's value: the others give the identity of
            // `op` (max: 0, min: all ones), which `op` tells apart.
            let ident = if op(0, 1) == 1 { 0 } else { u32::MAX };
            local.allreduce_u32(if leader { both } else { ident }, op)
        })
    };
    let ids = [agree()?, agree()?, agree()?];
    let local_group = local.local_group().clone();
    build(ids, local_group, remote).map(InterCommunicator)
}

/// Three context ids agreed over the merged communicator of `inter`.
fn agree3(inter: &InterPart) -> Result<[ContextId; 3]> {
    let m = &inter.merged;
    Ok([
        m.agree_context_id()?,
        m.agree_context_id()?,
        m.agree_context_id()?,
    ])
}

fn part(c: &SimpleCommunicator) -> Result<&InterPart> {
    c.inter_part().ok_or_else(|| Error::Comm {
        reason: "not an intercommunicator".into(),
    })
}

/// `MPI_Comm_dup` of an intercommunicator.
pub(crate) fn duplicate(c: &SimpleCommunicator) -> Result<SimpleCommunicator> {
    let p = part(c)?;
    let ids = agree3(p)?;
    build(ids, c.local_group().clone(), p.remote.clone())
}

/// `MPI_Comm_split` of an intercommunicator: for each color, the local
/// processes of that color (ordered by key, then rank) with the remote
/// processes of that color; none (`Ok(None)`) where either side has no
/// process of the color, or for `color: None`.
pub(crate) fn split(
    c: &SimpleCommunicator,
    color: Option<u32>,
    key: i32,
) -> Result<Option<SimpleCommunicator>> {
    let p = part(c)?;
    let all = p
        .merged
        .allgather_pairs((color.map_or(-1, i64::from), i64::from(key)))?;
    let ids = agree3(p)?;
    let Some(col) = color else {
        return Ok(None);
    };
    let side = |ranks: &[i32], merged_of: &dyn Fn(usize) -> usize| -> Vec<i32> {
        let mut v: Vec<(i64, usize, i32)> = ranks
            .iter()
            .enumerate()
            .filter_map(|(r, &w)| {
                let (cl, k) = all[merged_of(r)];
                (cl == i64::from(col)).then_some((k, r, w))
            })
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, _, w)| w).collect()
    };
    let local = side(c.local_world_ranks(), &|r| p.merged_of_local(r));
    let remote = side(p.remote.world_ranks(), &|r| p.merged_of_remote(r));
    if local.is_empty() || remote.is_empty() {
        return Ok(None);
    }
    let me = c.local_world_ranks()[c.my_rank() as usize];
    build(
        ids,
        Group::from_world_ranks(local, me)?,
        Group::from_world_ranks(remote, me)?,
    )
    .map(Some)
}

/// `MPI_Comm_create` of an intercommunicator: `group` is a subgroup of
/// the local group (the same on every local process); the result joins
/// it with the subgroup the remote processes gave, `None` on processes
/// outside it or when either subgroup is empty.
pub(crate) fn create(c: &SimpleCommunicator, group: &Group) -> Result<Option<SimpleCommunicator>> {
    for &w in group.world_ranks() {
        if !c.local_world_ranks().contains(&w) {
            return Err(Error::Group {
                reason: format!("world rank {w} is not in the local group"),
            });
        }
    }
    let me = c.local_world_ranks()[c.my_rank() as usize];
    let pos = group.world_ranks().iter().position(|&w| w == me);
    split(c, pos.map(|_| 0), pos.map_or(0, |p| p as i32))
}

/// `MPI_Intercomm_merge`: an intracommunicator of both groups, the group
/// whose processes pass `high: false` first (the lower group first when
/// both pass the same). Every process of one group must pass the same
/// `high` ([`Error::Arg`] otherwise, on every process).
pub fn merge(c: &SimpleCommunicator, high: bool) -> Result<SimpleCommunicator> {
    let p = part(c)?;
    let all = p.merged.allgather_pairs((i64::from(high), 0))?;
    let id = p.merged.agree_context_id()?;
    let nl = c.members() as usize;
    let local_high: Vec<i64> = (0..nl).map(|r| all[p.merged_of_local(r)].0).collect();
    let remote_high: Vec<i64> = (0..p.remote.size() as usize)
        .map(|r| all[p.merged_of_remote(r)].0)
        .collect();
    let uniform = |v: &[i64]| v.windows(2).all(|w| w[0] == w[1]);
    if !uniform(&local_high) || !uniform(&remote_high) {
        return Err(Error::Arg {
            reason: "MPI_Intercomm_merge: the processes of one group passed different high \
                     flags"
                .into(),
        });
    }
    let local_first = if local_high[0] == remote_high[0] {
        p.local_first
    } else {
        local_high[0] == 0
    };
    let (a, b) = if local_first {
        (c.local_world_ranks(), p.remote.world_ranks())
    } else {
        (p.remote.world_ranks(), c.local_world_ranks())
    };
    let mut all_w = a.to_vec();
    all_w.extend_from_slice(b);
    let me = c.local_world_ranks()[c.my_rank() as usize];
    SimpleCommunicator::new(id, Group::from_world_ranks(all_w, me)?)
}

/// How two communicators compare (`MPI_Comm_compare`): `Identical` for
/// the same context, `Congruent` for the same groups in the same order
/// (local and remote, for intercommunicators), `Similar` for the same
/// members in another order, `Unequal` otherwise (an intercommunicator
/// and an intracommunicator are always unequal).
pub fn compare(a: &SimpleCommunicator, b: &SimpleCommunicator) -> CommRelation {
    if a.same_as(b) || a.context_id() == b.context_id() && a.is_inter() == b.is_inter() {
        return CommRelation::Identical;
    }
    let rel = |x: GroupRelation, y: GroupRelation| match (x, y) {
        (GroupRelation::Identical, GroupRelation::Identical) => CommRelation::Congruent,
        (GroupRelation::Unequal, _) | (_, GroupRelation::Unequal) => CommRelation::Unequal,
        _ => CommRelation::Similar,
    };
    match (a.inter_part(), b.inter_part()) {
        (None, None) => rel(a.group().compare(&b.group()), GroupRelation::Identical),
        (Some(pa), Some(pb)) => rel(a.group().compare(&b.group()), pa.remote.compare(&pb.remote)),
        _ => CommRelation::Unequal,
    }
}

/// The result of [`compare`] (`MPI_IDENT`, `MPI_CONGRUENT`, `MPI_SIMILAR`,
/// `MPI_UNEQUAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommRelation {
    /// The same communicator (context).
    Identical,
    /// The same groups in the same order, another context.
    Congruent,
    /// The same members in another order.
    Similar,
    /// Different members.
    Unequal,
}

/// `MPI_Comm_create_group`: a communicator of the members of `group` (a
/// subgroup of `comm`'s group), collective over `group`'s members only;
/// `tag` tells apart concurrent calls on one communicator. The others do
/// not call it.
pub fn create_group(
    comm: &SimpleCommunicator,
    group: &Group,
    tag: i32,
) -> Result<SimpleCommunicator> {
    if comm.is_inter() {
        return Err(Error::Comm {
            reason: "MPI_Comm_create_group takes an intracommunicator".into(),
        });
    }
    not_endpoints(comm)?;
    raw::check_send_tag(tag)?;
    // The members' communicator ranks, in the group's order.
    let mut ranks = Vec::with_capacity(group.size() as usize);
    for &w in group.world_ranks() {
        match comm.world_to_comm().get(w as usize).copied() {
            Some(r) if r >= 0 => ranks.push(r),
            _ => {
                return Err(Error::Group {
                    reason: format!("world rank {w} is not in the communicator"),
                })
            }
        }
    }
    let me = comm.my_rank();
    let Some(pos) = ranks.iter().position(|&r| r == me) else {
        return Err(Error::Group {
            reason: "MPI_Comm_create_group called by a process outside the group".into(),
        });
    };
    // Messages on the communicator's internal context with tags above the
    // internal collectives' (the caller's tag spread over the rest).
    let span = raw::TAG_UB - TAG_GROUP_BASE;
    let t = TAG_GROUP_BASE + tag % span;
    let id = agree_by(|v, op| {
        if pos == 0 {
            let mut acc = v;
            for &r in &ranks[1..] {
                let mut b = [0u8; 4];
                comm.recv_internal(&mut b, r, t)?;
                acc = op(acc, u32::from_ne_bytes(b));
            }
            for &r in &ranks[1..] {
                comm.send_internal(&acc.to_ne_bytes(), r, t)?;
            }
            Ok(acc)
        } else {
            comm.send_internal(&v.to_ne_bytes(), ranks[0], t)?;
            let mut b = [0u8; 4];
            comm.recv_internal(&mut b, ranks[0], t)?;
            Ok(u32::from_ne_bytes(b))
        }
    })?;
    let me_w = comm.local_world_ranks()[me as usize];
    SimpleCommunicator::new(
        id,
        Group::from_world_ranks(group.world_ranks().to_vec(), me_w)?,
    )
}

/// The first internal tag of [`create_group`]'s messages.
const TAG_GROUP_BASE: i32 = 64;

/// An intercommunicator (rsmpi's `InterCommunicator`): a
/// [`SimpleCommunicator`] whose point-to-point ranks name the remote
/// group. Its [`Communicator`] methods (`rank`, `size`, `group`) are the
/// local group's; `duplicate` and `split` give intercommunicators (as
/// [`SimpleCommunicator`]s; [`InterCommunicator::from_simple`] wraps one
/// again).
#[derive(Debug, Clone)]
pub struct InterCommunicator(SimpleCommunicator);

impl InterCommunicator {
    /// Wraps an intercommunicator (`None` for an intracommunicator).
    pub fn from_simple(c: SimpleCommunicator) -> Option<InterCommunicator> {
        c.is_inter().then_some(InterCommunicator(c))
    }

    /// The communicator underneath (for the raw tier and the collectives).
    pub fn into_simple(self) -> SimpleCommunicator {
        self.0
    }

    /// The size of the remote group (`MPI_Comm_remote_size`).
    pub fn remote_size(&self) -> i32 {
        self.0.world_ranks().len() as i32
    }

    /// The remote group (`MPI_Comm_remote_group`).
    pub fn remote_group(&self) -> Group {
        remote_group(&self.0).unwrap_or_else(|_| Group::empty(0))
    }

    /// An intracommunicator of both groups (`MPI_Intercomm_merge`; see
    /// [`merge`]).
    pub fn merge(&self, high: bool) -> Result<SimpleCommunicator> {
        merge(&self.0, high)
    }
}

impl Communicator for InterCommunicator {
    fn as_simple(&self) -> &SimpleCommunicator {
        &self.0
    }
}

/// The remote group of an intercommunicator ([`Error::Comm`] for an
/// intracommunicator), named as [`crate::group`] says.
pub fn remote_group(c: &SimpleCommunicator) -> Result<Group> {
    part(c).map(|p| crate::group::shown(&p.remote))
}

// ------------------------------------------------------------ idup

/// The tag (internal context of the communicator duplicated) of the
/// message with which a started duplication says it is done.
const TAG_IDUP_DONE: i32 = 63;

/// A duplication to run: the work and what to do with its result.
type Job = Box<dyn FnOnce() + Send>;

/// The duplications started on one communicator, run in the order they
/// were started by one thread of this process.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Jobs queued or running.
    pending: usize,
    /// Whether a thread runs this queue.
    running: bool,
}

#[derive(Default)]
struct Worker {
    queue: Mutex<Queue>,
    idle: Condvar,
}

/// The queues by the context id of the communicator whose agreements
/// they run.
static WORKERS: Mutex<BTreeMap<u32, Arc<Worker>>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// Whether this thread runs duplications (which must not wait for
    /// their own queue).
    static IN_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn workers() -> MutexGuard<'static, BTreeMap<u32, Arc<Worker>>> {
    // Every change is one insert or remove: a poisoned lock is consistent.
    WORKERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn queue(w: &Worker) -> MutexGuard<'_, Queue> {
    w.queue.lock().unwrap_or_else(|p| p.into_inner())
}

/// The communicator whose internal agreements a duplication of `c` runs
/// on (an intercommunicator's merged one).
fn agreeing(c: &SimpleCommunicator) -> &SimpleCommunicator {
    c.inter_part().map_or(c, |p| &p.merged)
}

/// Waits until the duplications started on `c` by this process have
/// agreed, so that a blocking constructor's agreement on `c` comes after
/// theirs, as on every other process.
pub(crate) fn wait_started(c: &SimpleCommunicator) {
    if IN_WORKER.with(|f| f.get()) {
        return;
    }
    let Some(w) = workers().get(&c.context_id()).cloned() else {
        return;
    };
    let mut q = queue(&w);
    while q.pending > 0 {
        q = w.idle.wait(q).unwrap_or_else(|p| p.into_inner());
    }
}

/// Runs the jobs of `w` until none is left.
fn run_queue(key: u32, w: Arc<Worker>) {
    IN_WORKER.with(|f| f.set(true));
    loop {
        let job = {
            let mut q = queue(&w);
            match q.jobs.pop_front() {
                Some(j) => j,
                None => {
                    q.running = false;
                    drop(q);
                    // Forget an idle queue (a new one is made when needed);
                    // under the map's lock, so no job can slip in between.
                    let mut m = workers();
                    let q = queue(&w);
                    if q.pending == 0 && !q.running {
                        if let Some(cur) = m.get(&key) {
                            if Arc::ptr_eq(cur, &w) {
                                m.remove(&key);
                            }
                        }
                    }
                    return;
                }
            }
        };
        job();
        let mut q = queue(&w);
        q.pending -= 1;
        if q.pending == 0 {
            w.idle.notify_all();
        }
    }
}

/// `MPI_Comm_idup` / `MPI_Comm_idup_with_info`: starts duplicating `c`
/// (with the hints of `hints`, or `c`'s own) and returns at once. The
/// agreement runs on a thread of this process, after the duplications
/// started on `c` before (every process starts them in the same order,
/// MPI's rule for collectives on one communicator); a blocking
/// constructor on `c` waits for them. When it is over, `done` gets the
/// new communicator (or the error), and then the returned request — a
/// receive of the engine, completed by the wait and test family like any
/// other — completes.
pub fn idup(
    c: &SimpleCommunicator,
    hints: Option<Info>,
    done: impl FnOnce(Result<SimpleCommunicator>) + Send + 'static,
) -> Result<raw::Request<'static>> {
    not_endpoints(c)?;
    let ep = crate::environment::endpoint()?;
    let me = c.local_world_ranks()[c.my_rank() as usize];
    let ctx = c.internal_context();
    // Posted now, so that the completions (from this process, in queue
    // order) match the requests in the order they were started.
    // SAFETY: a receive of zero bytes writes nothing.
    let mut req = unsafe {
        ep.irecv(
            std::ptr::NonNull::<u8>::dangling().as_ptr(),
            0,
            me,
            TAG_IDUP_DONE,
            ctx,
        )?
    };
    let parent = c.clone();
    let job: Job = Box::new(move || {
        let r = parent.duplicate().inspect(|d| {
            if let Some(h) = &hints {
                d.replace_info(h);
            }
        });
        done(r);
        // The request learns it: a message of no bytes to this process.
        let _ = ep.send(&[], me, TAG_IDUP_DONE, ctx, vci::SendMode::Standard);
    });
    let key = agreeing(c).context_id();
    let mut m = workers();
    let w = m.entry(key).or_default().clone();
    let mut q = queue(&w);
    q.jobs.push_back(job);
    q.pending += 1;
    if !q.running {
        let w2 = w.clone();
        let spawned = std::thread::Builder::new()
            .name("hmpi-idup".into())
            .spawn(move || run_queue(key, w2));
        if let Err(e) = spawned {
            // Nothing runs the queue: take the job and the receive back.
            q.jobs.pop_back();
            q.pending -= 1;
            req.cancel();
            return Err(Error::Internal(format!("cannot start a thread: {e}")));
        }
        q.running = true;
    }
    drop(q);
    drop(m);
    Ok(req)
}
