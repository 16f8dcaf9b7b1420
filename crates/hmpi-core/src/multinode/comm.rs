//! [`SpanningCommunicator`]: a communicator whose members may sit on
//! different nodes, and its point-to-point operations — the routing point
//! between the shared heap and MPI.
//!
//! Each spanning communicator holds two communicators over the same
//! members in the same rank order: a node-local hmpi
//! [`SimpleCommunicator`] with the members on this node (ordered by their
//! spanning rank) and an MPI communicator with every member. A send to a
//! member of this node goes through the heap, one to another node through
//! MPI; each pair of processes uses one of the two, never both, so MPI's
//! non-overtaking rule per pair holds because each path keeps it.
//!
//! # Receives from `ANY_SOURCE`
//! A wildcard receive cannot be posted in two engines at once (both could
//! match). It is kept in the communicator's queue of waiting receives
//! instead, and each test alternates a matched probe on the node
//! (`improbe` on the heap) and MPI's `MPI_Improbe`, receiving whatever
//! matched. A receive posted while an earlier waiting receive could
//! match the same messages (same or wildcard source, same or wildcard tag)
//! waits behind it in the queue, so receives still match in the order they
//! were posted; one that cannot conflict is posted at once.

use super::mpi::{MpiStatus, RawComm, RawRequest};
use crate::comm::{Communicator, SimpleCommunicator};
use crate::error::{Error, Result};
use crate::raw::{self, Status, ANY_SOURCE, ANY_TAG, PROC_NULL};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A communicator spanning nodes (see the module docs). Cloning shares it.
#[derive(Clone)]
pub struct SpanningCommunicator {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for SpanningCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanningCommunicator")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.size)
            .field("nodes", &self.inner.node_members.len())
            .finish()
    }
}

pub(super) struct Inner {
    pub rank: i32,
    pub size: i32,
    /// Per member: its MPI world rank (what groups name it by).
    pub job_of: Vec<i32>,
    /// Per member: its node, numbered within this communicator in the
    /// order of the nodes' lowest ranks.
    pub node_of: Vec<u32>,
    /// Per member: its rank in `local`, or -1 on another node.
    pub local_of: Vec<i32>,
    /// Per rank of `local`: the member's rank here.
    pub local_members: Vec<i32>,
    /// Per node: its members, ascending (the first is its leader).
    pub node_members: Vec<Vec<i32>>,
    /// This process's node.
    pub my_node: usize,
    /// Whether every node's members are consecutive ranks.
    pub contiguous: bool,
    /// The largest tag both paths accept.
    pub tag_ub: i32,
    /// Point-to-point among this node's members.
    pub local: SimpleCommunicator,
    /// The node-local phases of the collectives.
    pub coll_local: SimpleCommunicator,
    /// Point-to-point with every member, through MPI.
    pub remote: RawComm,
    /// The leaders of the nodes, in node order (on leaders only).
    pub leaders: Option<RawComm>,
    /// Receives waiting for their turn (see the module docs).
    queue: Mutex<VecDeque<Arc<Mutex<Waiting>>>>,
    /// The queue's length, stored under its lock after each change: lets
    /// a blocking receive see an empty queue without taking the lock.
    queued: AtomicUsize,
    /// The progress thread of the nonblocking collectives, started by the
    /// first one.
    pub progress: OnceLock<super::icoll::Progress>,
    /// This member's lane: the members with its index on every node, in
    /// node order (made by the first large allreduce that uses it).
    pub lane: OnceLock<RawComm>,
    /// The private duplicate for the collective traffic of the layers
    /// above point-to-point (`SpanningCommunicator::internal`).
    pub internal: OnceLock<SpanningCommunicator>,
}

/// Where a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// On this node: its rank in `local`.
    Local(i32),
    /// On another node: its rank in `remote` (= its rank here).
    Remote(i32),
    /// Any member (a receive from `ANY_SOURCE`).
    Any,
    /// `PROC_NULL`.
    Null,
}

impl SpanningCommunicator {
    /// The communicator of every process of the job (MPI's world order).
    pub(super) fn world() -> Result<SpanningCommunicator> {
        let local = SimpleCommunicator::node_world()?.duplicate()?;
        let remote = RawComm::world()?.dup()?;
        Self::assemble(local, remote)
    }

    /// Builds the tables from the two communicators (collective over
    /// every member).
    fn assemble(local: SimpleCommunicator, remote: RawComm) -> Result<SpanningCommunicator> {
        let layout = super::layout().ok_or(Error::NotInitialized)?;
        let (rank, size) = (remote.rank()?, remote.size()?);
        // Per member: its node and node-local rank, and its MPI world rank.
        let me = (i64::from(layout.node) << 32) | i64::from(local.rank());
        let mine = [me.to_le_bytes(), i64::from(layout.world_rank).to_le_bytes()].concat();
        let words: Vec<i64> = remote
            .allgather_fixed(&mine)?
            .chunks_exact(8)
            .map(|w| i64::from_le_bytes(w.try_into().unwrap_or_default()))
            .collect();
        let all: Vec<i64> = words.iter().step_by(2).copied().collect();
        let job_of: Vec<i32> = words.iter().skip(1).step_by(2).map(|&j| j as i32).collect();
        let mut node_ids: Vec<u32> = Vec::new();
        let mut node_of = Vec::with_capacity(all.len());
        let mut node_members: Vec<Vec<i32>> = Vec::new();
        let mut local_of = vec![-1; all.len()];
        let mut local_members = vec![-1; local.size() as usize];
        for (r, &v) in all.iter().enumerate() {
            let (global_node, lrank) = ((v >> 32) as u32, (v & 0xffff_ffff) as i32);
            let n = match node_ids.iter().position(|&g| g == global_node) {
                Some(n) => n,
                None => {
                    node_ids.push(global_node);
                    node_members.push(Vec::new());
                    node_ids.len() - 1
                }
            };
            node_of.push(n as u32);
            node_members[n].push(r as i32);
            if global_node == layout.node {
                let slot = usize::try_from(lrank)
                    .ok()
                    .and_then(|l| local_members.get_mut(l))
                    .ok_or_else(|| Error::Internal("node-local rank out of range".into()))?;
                *slot = r as i32;
                local_of[r] = lrank;
            }
        }
        if local_members.contains(&-1) {
            return Err(Error::Internal(
                "the node-local communicator and MPI's disagree on this node's members".into(),
            ));
        }
        let my_node = node_of[rank as usize] as usize;
        let contiguous = node_members
            .iter()
            .all(|m| m.windows(2).all(|w| w[1] == w[0] + 1));
        let leader = node_members[my_node][0] == rank;
        let leaders = remote.split(leader.then_some(0), rank)?;
        let coll_local = local.duplicate()?;
        let tag_ub = raw::TAG_UB.min(remote.tag_ub()?);
        Ok(SpanningCommunicator {
            inner: Arc::new(Inner {
                rank,
                size,
                job_of,
                node_of,
                local_of,
                local_members,
                node_members,
                my_node,
                contiguous,
                tag_ub,
                local,
                coll_local,
                remote,
                leaders,
                queue: Mutex::new(VecDeque::new()),
                queued: AtomicUsize::new(0),
                progress: OnceLock::new(),
                lane: OnceLock::new(),
                internal: OnceLock::new(),
            }),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> i32 {
        self.inner.rank
    }

    /// The number of members.
    pub fn size(&self) -> i32 {
        self.inner.size
    }

    /// The number of nodes the members sit on.
    pub fn nodes(&self) -> usize {
        self.inner.node_members.len()
    }

    /// The node of member `rank` (numbered within this communicator).
    pub fn node_of(&self, rank: i32) -> Result<u32> {
        self.check_rank(rank)?;
        Ok(self.inner.node_of[rank as usize])
    }

    /// Whether member `rank` shares this process's node heap.
    pub fn is_local(&self, rank: i32) -> Result<bool> {
        self.check_rank(rank)?;
        Ok(self.inner.local_of[rank as usize] >= 0)
    }

    /// Member `rank`'s rank in [`SpanningCommunicator::node_comm`], if it
    /// is on this node.
    pub fn node_comm_rank(&self, rank: i32) -> Option<i32> {
        let l = *self.inner.local_of.get(usize::try_from(rank).ok()?)?;
        (l >= 0).then_some(l)
    }

    /// The node-local hmpi communicator of this node's members (ordered
    /// by their rank here).
    pub fn node_comm(&self) -> &SimpleCommunicator {
        &self.inner.local
    }

    /// The largest tag this communicator accepts (hmpi's and MPI's bound).
    pub fn tag_ub(&self) -> i32 {
        self.inner.tag_ub
    }

    /// A copy with its own message space (`MPI_Comm_dup`; collective).
    pub fn duplicate(&self) -> Result<SpanningCommunicator> {
        let local = self.inner.local.duplicate()?;
        let remote = self.inner.remote.dup()?;
        Self::assemble(local, remote)
    }

    /// The communicator's private duplicate for the collective traffic of
    /// the layers above point-to-point (the blocking neighbourhood
    /// collectives, opi's collectives by ownership: the raw tier's
    /// `Traffic::Internal`), made by the first of them — collective, as
    /// they are — so that their messages never meet the caller's.
    pub(crate) fn internal(&self) -> Result<&SpanningCommunicator> {
        if let Some(c) = self.inner.internal.get() {
            return Ok(c);
        }
        let d = self.duplicate()?;
        // Collectives on one communicator are never concurrent (MPI's
        // rule), so nobody set it meanwhile; `get_or_init` keeps the
        // first in any case.
        Ok(self.inner.internal.get_or_init(|| d))
    }

    /// Where a give or take of `traffic` with `tag` goes: point-to-point
    /// on this communicator, the layers' collective traffic on its private
    /// duplicate with the tag folded there ([`Self::internal_tag`]).
    pub(crate) fn for_traffic(&self, traffic: raw::Traffic, tag: i32) -> Result<(&Self, i32)> {
        match traffic {
            raw::Traffic::PointToPoint => Ok((self, tag)),
            raw::Traffic::Internal => Ok((self.internal()?, self.internal_tag(tag))),
        }
    }

    /// `tag` of the layers' collective traffic (`Traffic::Internal`) as a
    /// tag of the private duplicate ([`SpanningCommunicator::internal`]):
    /// taken modulo the largest tag + 1, since their tags (opi's lie far
    /// above the users' range on the node) may exceed what the MPI
    /// accepts (MPICH: 2^28 - 1). Only these collectives use the
    /// duplicate, one at a time, each matching its own messages before
    /// the next starts, so two of them on one tag cannot meet.
    pub(crate) fn internal_tag(&self, tag: i32) -> i32 {
        let ub = i64::from(self.inner.tag_ub);
        if tag <= self.inner.tag_ub || ub < 0 {
            return tag;
        }
        (i64::from(tag) % (ub + 1)) as i32
    }

    /// The members of the same `color`, ordered by `key` then rank
    /// (`MPI_Comm_split`; `None`: `MPI_UNDEFINED`, no communicator).
    /// Collective over every member.
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<SpanningCommunicator>> {
        let mpi_color = match color {
            None => None,
            Some(c) => Some(i32::try_from(c).map_err(|_| Error::Arg {
                reason: format!("split color {c} is larger than MPI allows ({})", i32::MAX),
            })?),
        };
        let local = self.inner.local.split(color, key)?;
        let remote = self.inner.remote.split(mpi_color, key)?;
        match (local, remote) {
            (Some(l), Some(r)) => Self::assemble(l, r).map(Some),
            (None, None) => Ok(None),
            _ => Err(Error::Internal(
                "the node-local and MPI splits disagree".into(),
            )),
        }
    }

    /// The communicator's group (`MPI_Comm_group`): its members by MPI
    /// world rank.
    pub fn group(&self) -> crate::Group {
        let i = &self.inner;
        crate::Group::of(i.job_of.clone(), i.job_of[i.rank as usize])
    }

    /// The color and key of the split that makes a communicator of
    /// `group` (members named by MPI world rank; see
    /// [`crate::Group`]'s `split_args`).
    pub(crate) fn subgroup_split_args(&self, group: &crate::Group) -> Result<(Option<u32>, i32)> {
        let i = &self.inner;
        let rank_of: std::collections::HashMap<i32, i32> = i
            .job_of
            .iter()
            .enumerate()
            .map(|(r, &j)| (j, r as i32))
            .collect();
        group.split_args(i.job_of[i.rank as usize], |j| rank_of.get(&j).copied())
    }

    fn check_rank(&self, rank: i32) -> Result<()> {
        if (0..self.inner.size).contains(&rank) {
            Ok(())
        } else {
            Err(Error::Rank {
                rank,
                size: self.inner.size,
            })
        }
    }

    /// [`Error::Finalized`] (or [`Error::NotInitialized`]) when the
    /// runtime is not active: MPI must not be called after finalize.
    pub(super) fn active(&self) -> Result<()> {
        crate::environment::endpoint().map(|_| ())
    }

    fn route(&self, rank: i32, wildcard: bool) -> Result<Route> {
        self.active()?;
        if rank == PROC_NULL {
            return Ok(Route::Null);
        }
        if wildcard && rank == ANY_SOURCE {
            return Ok(Route::Any);
        }
        self.check_rank(rank)?;
        Ok(match self.inner.local_of[rank as usize] {
            l if l >= 0 => Route::Local(l),
            _ => Route::Remote(rank),
        })
    }

    fn check_tag(&self, tag: i32, wildcard: bool) -> Result<i32> {
        if (0..=self.inner.tag_ub).contains(&tag) || (wildcard && tag == ANY_TAG) {
            Ok(tag)
        } else {
            Err(Error::Tag { tag })
        }
    }

    /// Sends `buf` to `dest` with `tag` (`MPI_Send`).
    pub fn send(&self, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
        self.send_mode(buf, dest, tag, false)
    }

    /// Sends `buf` and returns once `dest` has matched it (`MPI_Ssend`).
    pub fn ssend(&self, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
        self.send_mode(buf, dest, tag, true)
    }

    fn send_mode(&self, buf: &[u8], dest: i32, tag: i32, sync: bool) -> Result<()> {
        let tag = self.check_tag(tag, false)?;
        match self.route(dest, false)? {
            Route::Local(l) => raw::send_mode(&self.inner.local, buf, l, tag, sync),
            // Blocking in MPI unless a serialising lock would be held
            // meanwhile (then the send is started and tested, letting
            // other threads call MPI between tests).
            Route::Remote(r) if super::mpi::thread_multiple() => {
                self.inner.remote.send(buf, r, tag, sync)
            }
            Route::Remote(r) => {
                // SAFETY: the request is completed before `buf`'s borrow
                // ends (waited for below; an error of the wait leaves
                // nothing pending, as MPI_Test completes it).
                let mut req = unsafe { self.inner.remote.isend(buf, r, tag, sync) }?;
                req.wait_polling().map(drop)
            }
            _ => Ok(()),
        }
    }

    /// Receives into `buf` from `source` (or `ANY_SOURCE`) with `tag` (or
    /// `ANY_TAG`); the status names the source by its rank here. A message
    /// longer than `buf` leaves its head in `buf` and the truncation in
    /// the status (`error`: [`raw::StatusError::Truncate`]). From another
    /// node through a receive posted in MPI, what MPI delivers of the
    /// head and tells of the length depends on the MPI: the status's
    /// `count` says how much is in `buf` (the whole buffer under Open MPI,
    /// nothing under MPICH) and `message_len` is exact under Open MPI (and
    /// for long messages under MPICH), else the least it can be (the
    /// buffer's length + 1).
    pub fn recv(&self, buf: &mut [u8], source: i32, tag: i32) -> Result<Status> {
        // From another node while no receive waits in the queue: only MPI
        // can bring the message, so the receive blocks in MPI (`MPI_Recv`
        // spares the request `MPI_Irecv` and `MPI_Test` allocate and free
        // per message). Not under a serialising lock, which a thread
        // blocked in MPI would hold. The queue is checked without being
        // held: a receive queued meanwhile by another thread is concurrent
        // with this one, so either may match first.
        // From this node, likewise, the node's engine receives it, as a
        // receive on the node's own communicator (no request, no
        // communicator reference taken).
        if source >= 0 {
            match self.route(source, false)? {
                Route::Remote(r) if super::mpi::thread_multiple() => {
                    let tag = self.check_tag(tag, true)?;
                    if self.nothing_queued() {
                        return Ok(remote_status(&self.inner.remote.recv(buf, r, tag)?));
                    }
                }
                Route::Local(l) => {
                    let tag = self.check_tag(tag, true)?;
                    if self.nothing_queued() {
                        let mut st = Status::empty();
                        raw::recv_with_status(&self.inner.local, buf, l, tag, &mut st)?;
                        if st.source >= 0 {
                            st.source = source;
                        }
                        return Ok(st);
                    }
                }
                _ => {}
            }
        }
        self.recv_by_request(buf, source, tag)
    }

    /// Whether no receive waits in the queue (read without its lock: see
    /// [`SpanningCommunicator::recv`]).
    #[inline(always)]
    fn nothing_queued(&self) -> bool {
        // Acquire: pairs with the Release store of a push made before this
        // call (on this thread, or on another that synchronised with it),
        // so such a receive is seen.
        self.inner.queued.load(Ordering::Acquire) == 0
    }

    /// [`SpanningCommunicator::recv`] through a request: every receive
    /// but one from a given member with nothing queued. Out of line, so that
    /// the path to `MPI_Recv` does not carry this one's frame.
    #[inline(never)]
    fn recv_by_request(&self, buf: &mut [u8], source: i32, tag: i32) -> Result<Status> {
        // SAFETY: the request is waited for before `buf`'s borrow ends.
        let req = unsafe { self.irecv(buf, source, tag) }?;
        req.wait()
    }

    /// The status of a matching message once there is one (`MPI_Probe`).
    pub fn probe(&self, source: i32, tag: i32) -> Result<Status> {
        loop {
            if let Some(st) = self.iprobe(source, tag)? {
                return Ok(st);
            }
            std::thread::yield_now();
        }
    }

    /// The status of a matching message if there is one (`MPI_Iprobe`).
    pub fn iprobe(&self, source: i32, tag: i32) -> Result<Option<Status>> {
        let tag = self.check_tag(tag, true)?;
        let route = self.route(source, true)?;
        if route == Route::Null {
            return Ok(Some(Status::empty()));
        }
        if matches!(route, Route::Local(_) | Route::Any) {
            let l = match route {
                Route::Local(l) => l,
                _ => ANY_SOURCE,
            };
            if let Some(mut st) = raw::iprobe(&self.inner.local, l, tag)? {
                st.source = self.inner.local_members[st.source as usize];
                return Ok(Some(st));
            }
        }
        if matches!(route, Route::Remote(_) | Route::Any) {
            let r = match route {
                Route::Remote(r) => r,
                _ => ANY_SOURCE,
            };
            if let Some(st) = self.inner.remote.iprobe(r, tag)? {
                return Ok(Some(remote_status(&st)));
            }
        }
        Ok(None)
    }

    /// Starts sending `buf` to `dest` (`MPI_Isend`; `sync`: `MPI_Issend`).
    ///
    /// # Safety
    /// The request must be completed or dropped (which waits), never
    /// leaked: the engines read `buf` until then.
    #[inline]
    pub unsafe fn isend<'a>(
        &self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<SpanRequest<'a>> {
        if let Some(Route::Remote(r)) = self.send_route(dest, tag, buf.len()) {
            // SAFETY: the caller completes or drops the request; the
            // length fits.
            let (rc, r) = unsafe { self.inner.remote.start_send(buf, r, tag, sync) };
            return match rc {
                0 => Ok(SpanRequest::remote(r)),
                _ => Err(super::mpi::failed(rc, "Isend")),
            };
        }
        // SAFETY: the caller's contract.
        unsafe { self.isend_routed(buf, dest, tag, sync) }
    }

    /// [`SpanningCommunicator::isend`] that keeps the request at the end
    /// of `reqs`, as `MPI_Isend` writes into an array of requests: for a
    /// window of sends. A request to another node is built there, where
    /// one returned and then pushed would be copied right after its
    /// stores, which stalls the processor on every message (see
    /// docs/performance.md, "Store forwarding").
    ///
    /// # Safety
    /// As for [`SpanningCommunicator::isend`]: every request of `reqs` is
    /// completed or dropped (which waits), never leaked.
    #[inline]
    pub unsafe fn isend_into<'a>(
        &self,
        reqs: &mut Vec<SpanRequest<'a>>,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<()> {
        match self.send_route(dest, tag, buf.len()) {
            Some(Route::Remote(r)) => {
                // SAFETY: the caller completes or drops the request; the
                // length fits.
                let (rc, r) = unsafe { self.inner.remote.start_send(buf, r, tag, sync) };
                if rc != 0 {
                    return Err(super::mpi::failed(rc, "Isend"));
                }
                // Pushed here, not through a value shared with the general
                // path below: the compiler would build that one in a
                // temporary and copy it.
                reqs.push(SpanRequest::remote(r));
                return Ok(());
            }
            // A standard send to this node that finishes as it starts (a
            // small message) leaves a status made of what is known here,
            // the node engine's request never built: what was left to
            // copy.
            Some(Route::Local(l)) if !sync => {
                if let Ok(to) = raw::send_target(&self.inner.local, l, tag) {
                    // SAFETY: the caller's contract; with no place given, a
                    // send that would wait does not start (`NoPlace`).
                    match unsafe { raw::isend_or_in(to, || None, buf) } {
                        Ok(raw::Start::Finished(_)) => {
                            reqs.push(SpanRequest {
                                comm: None,
                                state: State::Done(Status {
                                    source: dest,
                                    tag,
                                    count: buf.len() as u64,
                                    error: None,
                                    cancelled: false,
                                }),
                                _buf: PhantomData,
                            });
                            return Ok(());
                        }
                        Ok(_) => {}
                        Err(e) => return Err(raw::failed_in(&self.inner.local, e)),
                    }
                }
            }
            _ => {}
        }
        // SAFETY: the caller's contract.
        reqs.push(unsafe { self.isend_routed(buf, dest, tag, sync) }?);
        Ok(())
    }

    /// The route of a send of `len` bytes to `dest` with `tag` on the
    /// message path, when every check passes (runtime active, member rank,
    /// tag, a length MPI can count): `None` for anything else (`PROC_NULL`,
    /// a bad argument), which the general path
    /// ([`SpanningCommunicator::isend_routed`]) takes and reports. Builds
    /// no `Result` (see `RawComm::start_send`).
    #[inline(always)]
    fn send_route(&self, dest: i32, tag: i32, len: usize) -> Option<Route> {
        let i = &*self.inner;
        let l = *i.local_of.get(usize::try_from(dest).ok()?)?;
        let ok = (0..=i.tag_ub).contains(&tag)
            && len <= std::ffi::c_int::MAX as usize
            && crate::environment::endpoint().is_ok();
        ok.then_some(if l >= 0 {
            Route::Local(l)
        } else {
            Route::Remote(dest)
        })
    }

    /// [`SpanningCommunicator::isend`] on the general path: checks with
    /// their errors, this node's engine, `PROC_NULL`.
    #[inline(never)]
    unsafe fn isend_routed<'a>(
        &self,
        buf: &'a [u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<SpanRequest<'a>> {
        let tag = self.check_tag(tag, false)?;
        let state = match self.route(dest, false)? {
            Route::Local(l) => {
                // SAFETY: the caller completes or drops the request.
                let r = unsafe { raw::isend(&self.inner.local, buf, l, tag, sync) }?;
                State::Local(r)
            }
            Route::Remote(r) => {
                // SAFETY: as above.
                let r = unsafe { self.inner.remote.isend(buf, r, tag, sync) }?;
                State::Remote(r)
            }
            _ => State::Done(null_status()),
        };
        Ok(self.request(state))
    }

    /// Starts receiving into `buf` (`MPI_Irecv`).
    ///
    /// # Safety
    /// As for [`SpanningCommunicator::isend`]: the engines write into `buf`
    /// until the request completes.
    pub unsafe fn irecv<'a>(
        &self,
        buf: &'a mut [u8],
        source: i32,
        tag: i32,
    ) -> Result<SpanRequest<'a>> {
        let tag = self.check_tag(tag, true)?;
        let route = self.route(source, true)?;
        if route == Route::Null {
            return Ok(self.request(State::Done(null_status())));
        }
        // A receive from a known source while no receive waits in the
        // queue: nothing earlier can conflict, so it is posted in its
        // engine at once, as `progress_queue` would, without a queue entry
        // (no allocation or second lock per message on the common path).
        // The queue's lock is held while posting so that no wildcard
        // receive slips in between the check and the post.
        if let Route::Local(l) = route {
            let q = self.queue();
            if q.is_empty() {
                // SAFETY: the caller keeps `buf` until the request
                // completes (this function's contract).
                let r = unsafe { raw::irecv(&self.inner.local, buf, l, tag) }?;
                drop(q);
                return Ok(self.request(State::Local(r)));
            }
        } else if let Route::Remote(r) = route {
            let q = self.queue();
            if q.is_empty() {
                // SAFETY: as above.
                let r = unsafe { self.inner.remote.irecv(buf.as_mut_ptr(), buf.len(), r, tag) }?;
                drop(q);
                return Ok(self.request(State::Remote(r)));
            }
        }
        let w = Arc::new(Mutex::new(Waiting {
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            route,
            tag,
            state: WaitState::Waiting,
        }));
        {
            let mut q = self.queue();
            q.push_back(Arc::clone(&w));
            self.inner.queued.store(q.len(), Ordering::Release);
        }
        let mut req = self.request(State::Queued(w));
        self.inner.progress_queue()?;
        req.take_posted();
        Ok(req)
    }

    /// Gives `block` to `dest` with `tag` (ownership passing): a peer on
    /// this node receives the block itself (its address travels, nothing
    /// is copied); a peer on another node receives its bytes through MPI
    /// and the block is freed here (send + free). Its `meta` words travel
    /// only on the node. On error the block is still the caller's.
    ///
    /// # Safety
    /// `block` is a block of the global allocator with its layout (or of
    /// size 0), owned by the caller and given up on success.
    pub unsafe fn give(&self, block: raw::OwnedBlock, dest: i32, tag: i32) -> Result<()> {
        let tag = self.check_tag(tag, false)?;
        let to = match self.route(dest, false)? {
            Route::Local(l) => l,
            Route::Remote(r) => {
                // SAFETY: the block stays allocated until the send
                // completes (`finish_gives` frees it then).
                let req = unsafe { self.isend_block(&block, r, tag) }?;
                gives().push((req, block));
                finish_gives(false)?;
                return Ok(());
            }
            _ => PROC_NULL,
        };
        // SAFETY: the caller's contract is `raw::give`'s.
        unsafe {
            raw::give(
                &self.inner.local,
                raw::Traffic::PointToPoint,
                block,
                to,
                tag,
            )
        }
    }

    /// Takes the next message from `source` with `tag` (or `ANY_TAG`) as a
    /// block aligned to `align` (ownership passing): from this node, the
    /// sender's block itself when it gave one; from another node, a fresh
    /// block of the message's length that the message is received into
    /// (allocate + receive). A receive from `ANY_SOURCE` or `PROC_NULL` is
    /// [`Error::Rank`]. Receives posted earlier that could match the same
    /// messages are served first.
    pub fn take(&self, align: usize, source: i32, tag: i32) -> Result<(raw::OwnedBlock, Status)> {
        let tag = self.check_tag(tag, true)?;
        let route = self.route(source, false)?;
        if !align.is_power_of_two() {
            return Err(Error::Arg {
                reason: format!("take: alignment {align} is not a power of two"),
            });
        }
        // Wait until no earlier receive could take this message.
        loop {
            finish_gives(false)?;
            self.inner.progress_queue()?;
            let q = self.queue();
            let busy = q.iter().any(|w| {
                let w = w.lock().unwrap_or_else(|p| p.into_inner());
                matches!(w.state, WaitState::Waiting) && overlaps(w.route, w.tag, route, tag)
            });
            drop(q);
            if !busy {
                break;
            }
            std::thread::yield_now();
        }
        match route {
            Route::Local(l) => {
                let mut out = None;
                let mut st = Status::empty();
                raw::recv_owned_into(
                    &self.inner.local,
                    raw::Traffic::PointToPoint,
                    &mut out,
                    align,
                    l,
                    tag,
                    &mut st,
                )?;
                st.source = source;
                let block =
                    out.ok_or_else(|| Error::Internal("take: the engine gave no block".into()))?;
                Ok((block, st))
            }
            Route::Remote(r) => {
                let (msg, st) = loop {
                    if let Some(found) = self.inner.remote.improbe(r, tag)? {
                        break found;
                    }
                    finish_gives(false)?;
                    std::thread::yield_now();
                };
                let block = recv_block(msg, &st, align)?;
                Ok((block, remote_status(&st)))
            }
            _ => Err(Error::Rank {
                rank: source,
                size: self.inner.size,
            }),
        }
    }

    /// [`give`](Self::give) as a request: on this node the engine's give
    /// of the block itself (complete at once); to another node MPI's send
    /// of its bytes (`MPI_Isend`), the request completing, and the block
    /// being freed, when the send has (send + free).
    ///
    /// # Safety
    /// As [`give`](Self::give).
    pub unsafe fn igive(
        &self,
        block: raw::OwnedBlock,
        dest: i32,
        tag: i32,
    ) -> Result<SpanRequest<'static>> {
        let tag = self.check_tag(tag, false)?;
        let to = match self.route(dest, false)? {
            Route::Local(l) => l,
            Route::Remote(r) => {
                // SAFETY: the block stays allocated (in the request's
                // state) until the send completes.
                let req = unsafe { self.isend_block(&block, r, tag) }?;
                return Ok(self.request(State::Give(req, block)));
            }
            _ => PROC_NULL,
        };
        // SAFETY: the caller's contract is `raw::igive`'s.
        let r = unsafe {
            raw::igive(
                &self.inner.local,
                raw::Traffic::PointToPoint,
                block,
                to,
                tag,
            )
        }?;
        Ok(self.request(State::Local(r)))
    }

    /// [`take`](Self::take) as a request, the block into `*out` when it
    /// completes: from this node the sender's block itself, from another
    /// node a fresh block of the message's length received into once the
    /// message has matched (allocate + receive, moved on by the request's
    /// tests). Receives waiting in the queue when it starts that could
    /// match the same messages are served first. `ANY_SOURCE` and
    /// `PROC_NULL` are [`Error::Rank`].
    ///
    /// # Safety
    /// `out` stays valid and untouched by anyone else until the request
    /// has completed, and the request is completed or dropped, never
    /// leaked.
    pub unsafe fn itake<'a>(
        &self,
        out: &'a mut Option<raw::OwnedBlock>,
        align: usize,
        source: i32,
        tag: i32,
    ) -> Result<SpanRequest<'a>> {
        let tag = self.check_tag(tag, true)?;
        let route = self.route(source, false)?;
        if !matches!(route, Route::Local(_) | Route::Remote(_)) {
            return Err(Error::Rank {
                rank: source,
                size: self.inner.size,
            });
        }
        if !align.is_power_of_two() {
            return Err(Error::Arg {
                reason: format!("take: alignment {align} is not a power of two"),
            });
        }
        *out = None;
        let before = self
            .queue()
            .iter()
            .filter(|w| {
                let w = w.lock().unwrap_or_else(|p| p.into_inner());
                matches!(w.state, WaitState::Waiting) && overlaps(w.route, w.tag, route, tag)
            })
            .cloned()
            .collect();
        let mut req = self.request(State::Take(Taking {
            out,
            align,
            source,
            route,
            tag,
            before,
        }));
        req.step_take()?;
        Ok(req)
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<Arc<Mutex<Waiting>>>> {
        self.inner.queue()
    }

    /// Starts the MPI send of a given block's bytes to `remote` (a give
    /// to another node: the bytes travel, the block is freed after).
    ///
    /// # Safety
    /// `block` is a block of the global allocator holding `block.len`
    /// initialised bytes (a given block, owned by the caller), and it stays
    /// allocated and unchanged until the returned request completes.
    unsafe fn isend_block(
        &self,
        block: &raw::OwnedBlock,
        remote: i32,
        tag: i32,
    ) -> Result<RawRequest> {
        // SAFETY: `block.ptr` holds `block.len` initialised bytes (the
        // caller's contract; a given block's length is within its layout).
        let bytes = unsafe { std::slice::from_raw_parts(block.ptr.as_ptr(), block.len) };
        // SAFETY: `bytes` outlives the request (the caller's contract).
        unsafe { self.inner.remote.isend(bytes, remote, tag, false) }
    }

    fn request<'a>(&self, state: State<'a>) -> SpanRequest<'a> {
        let comm = match state {
            State::Remote(_) | State::Done(_) => None,
            _ => Some(Arc::clone(&self.inner)),
        };
        SpanRequest {
            comm,
            state,
            _buf: PhantomData,
        }
    }
}

impl Inner {
    fn queue(&self) -> MutexGuard<'_, VecDeque<Arc<Mutex<Waiting>>>> {
        // A panic while holding the lock leaves the queue consistent (one
        // push or pop at a time).
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the queue of waiting receives on (see the module docs): in
    /// posting order, each receive that no earlier waiting one could
    /// conflict with is posted (one peer) or tried (`ANY_SOURCE`).
    fn progress_queue(&self) -> Result<()> {
        let mut q = self.queue();
        let mut blocked: Vec<(Route, i32)> = Vec::new();
        let mut i = 0;
        while i < q.len() {
            let entry = Arc::clone(&q[i]);
            let mut w = entry.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(w.state, WaitState::Waiting) {
                q.remove(i);
                self.queued.store(q.len(), Ordering::Release);
                continue;
            }
            if blocked.iter().any(|&(r, t)| overlaps(r, t, w.route, w.tag)) {
                blocked.push((w.route, w.tag));
                i += 1;
                continue;
            }
            let (route, tag) = (w.route, w.tag);
            let done = match w.route {
                Route::Local(l) => {
                    // SAFETY: the buffer stays valid until the request
                    // that owns this entry completes (irecv's contract);
                    // the posted request moves into that request.
                    let r = unsafe { raw::irecv_raw(&self.local, w.buf, w.len, l, w.tag) }?;
                    w.state = WaitState::Posted(Posted::Local(r));
                    true
                }
                Route::Remote(r) => {
                    // SAFETY: as above.
                    let r = unsafe { self.remote.irecv(w.buf, w.len, r, w.tag) }?;
                    w.state = WaitState::Posted(Posted::Remote(r));
                    true
                }
                Route::Any => match self.try_wildcard(&w)? {
                    Some(st) => {
                        w.state = WaitState::Done(st);
                        true
                    }
                    None => false,
                },
                Route::Null => true,
            };
            drop(w);
            if done {
                q.remove(i);
                self.queued.store(q.len(), Ordering::Release);
            } else {
                blocked.push((route, tag));
                i += 1;
            }
        }
        Ok(())
    }

    /// One attempt at a wildcard receive: a matched probe on the node,
    /// then MPI's; the message that matched is received into the entry's
    /// buffer.
    fn try_wildcard(&self, w: &Waiting) -> Result<Option<Status>> {
        // SAFETY: the entry's buffer is valid for `len` bytes of writes
        // while the entry waits (irecv's contract), and nothing else
        // touches it meanwhile.
        let buf = unsafe { std::slice::from_raw_parts_mut(w.buf, w.len) };
        if let Some((m, _)) = raw::improbe(&self.local, ANY_SOURCE, w.tag)? {
            let mut st = raw::mrecv(&self.local, m, buf)?;
            st.source = self.local_members[st.source as usize];
            return Ok(Some(st));
        }
        if let Some((m, st)) = self.remote.improbe(ANY_SOURCE, w.tag)? {
            m.recv(buf, st.len)?;
            let mut out = remote_status(&st);
            if st.len > buf.len() {
                out.count = buf.len() as u64;
                out.error = Some(raw::StatusError::Truncate {
                    message_len: st.len as u64,
                });
            }
            return Ok(Some(out));
        }
        Ok(None)
    }
}

/// Allocate + receive: a fresh block of `st.len` bytes aligned to `align`
/// that the matched MPI message `msg` is received into (a take from
/// another node).
fn recv_block(
    msg: super::mpi::RawMessage,
    st: &MpiStatus,
    align: usize,
) -> Result<raw::OwnedBlock> {
    let layout = std::alloc::Layout::from_size_align(st.len, align).map_err(|_| Error::Arg {
        reason: format!("take: {} bytes aligned to {align}", st.len),
    })?;
    let ptr = if st.len == 0 {
        std::ptr::NonNull::new(std::ptr::without_provenance_mut::<u8>(align))
    } else {
        // SAFETY: `layout` has a non-zero size.
        std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) })
    }
    .ok_or(Error::NoMemory { bytes: st.len })?;
    // SAFETY: `ptr` is a fresh allocation of `st.len` bytes (or
    // dangling for 0), written only here.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), st.len) };
    if let Err(e) = msg.recv(buf, st.len) {
        if st.len > 0 {
            // SAFETY: allocated above with `layout`, not shared.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        }
        return Err(e);
    }
    Ok(raw::OwnedBlock {
        ptr,
        layout,
        len: st.len,
        meta: [0; 4],
        given: false,
    })
}

/// Gives to other nodes whose sends are still in flight, with the blocks
/// they send from (freed when the send completes): a give completes at
/// once, as on the node.
static GIVES: Mutex<Vec<(RawRequest, raw::OwnedBlock)>> = Mutex::new(Vec::new());

fn gives() -> MutexGuard<'static, Vec<(RawRequest, raw::OwnedBlock)>> {
    // A panic while holding the lock leaves the list consistent (one push
    // or removal at a time).
    GIVES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Frees the blocks of the gives whose sends have completed; with `all`,
/// waits for every one (before MPI is finalized).
pub(super) fn finish_gives(all: bool) -> Result<()> {
    loop {
        let mut g = gives();
        let mut i = 0;
        while i < g.len() {
            if g[i].0.test()?.is_some() {
                let (_, block) = g.swap_remove(i);
                // SAFETY: the block was given up by its owner and its send
                // has completed: nothing uses it any more.
                unsafe { block.free() };
            } else {
                i += 1;
            }
        }
        if !all || g.is_empty() {
            return Ok(());
        }
        drop(g);
        std::thread::yield_now();
    }
}

/// Whether two receives could match the same message.
fn overlaps(r1: Route, t1: i32, r2: Route, t2: i32) -> bool {
    let src = r1 == Route::Any || r2 == Route::Any || r1 == r2;
    let tag = t1 == ANY_TAG || t2 == ANY_TAG || t1 == t2;
    src && tag
}

fn null_status() -> Status {
    Status::empty()
}

/// A status of MPI's as hmpi's: a truncated receive carries
/// [`raw::StatusError::Truncate`], as on the node.
fn remote_status(st: &MpiStatus) -> Status {
    let mut out = Status::empty();
    out.source = st.source;
    out.tag = st.tag;
    out.count = st.len as u64;
    out.cancelled = st.cancelled;
    out.error = st
        .truncated
        .map(|message_len| raw::StatusError::Truncate { message_len });
    out
}

/// A finished node request's outcome as a status: a truncated receive or
/// a failed delivery finishes with its error in the status (as MPI's
/// requests do here); other errors are errors.
fn node_outcome(r: std::result::Result<Status, vci::Error>) -> Result<Status> {
    match r {
        Ok(st) => Ok(st),
        Err(
            vci::Error::Truncate { status, .. }
            | vci::Error::Transfer { status, .. }
            | vci::Error::Alloc { status, .. },
        ) => Ok(status),
        Err(e) => Err(e.into()),
    }
}

/// A receive in the queue.
struct Waiting {
    buf: *mut u8,
    len: usize,
    route: Route,
    tag: i32,
    state: WaitState,
}

// SAFETY: the buffer pointer is only used by the thread that holds the
// entry's lock, under irecv's contract that it stays valid and untouched
// until the request completes.
unsafe impl Send for Waiting {}

enum WaitState {
    Waiting,
    Posted(Posted),
    Done(Status),
    Cancelled,
}

enum Posted {
    Local(raw::Request<'static>),
    Remote(RawRequest),
}

enum State<'a> {
    Local(raw::Request<'a>),
    Remote(RawRequest),
    Queued(Arc<Mutex<Waiting>>),
    /// A give to another node: MPI's send of the block's bytes, and the
    /// block, freed when the send completes.
    Give(RawRequest, raw::OwnedBlock),
    /// A take ([`SpanningCommunicator::itake`]) not yet posted on the node
    /// or, from another node, not yet matched.
    Take(Taking),
    Done(Status),
    Taken,
}

/// The communicator of a request in a state that keeps it.
fn kept(comm: &Option<Arc<Inner>>) -> Result<&Inner> {
    comm.as_deref()
        .ok_or_else(|| Error::Internal("a request lost its communicator".into()))
}

/// A nonblocking take waiting to start or to match.
struct Taking {
    /// Where the block goes (valid for the request's lifetime, under
    /// `itake`'s contract).
    out: *mut Option<raw::OwnedBlock>,
    align: usize,
    source: i32,
    route: Route,
    tag: i32,
    /// The receives waiting in the queue when the take started that could
    /// match its messages: it starts once none of them waits any more.
    before: Vec<Arc<Mutex<Waiting>>>,
}

/// Tests of a request before its wait starts yielding the processor.
pub(super) const SPIN_POLLS: u32 = 2000;

/// A nonblocking operation of a [`SpanningCommunicator`]; completed by
/// [`SpanRequest::test`] / [`SpanRequest::wait`] (dropping it waits).
pub struct SpanRequest<'a> {
    /// The communicator, for the states that go back to it (queued and
    /// taking receives, and the node's requests whose source it
    /// translates); an MPI request needs none, and cloning it for every
    /// message cost two atomic operations of the message rate.
    comm: Option<Arc<Inner>>,
    state: State<'a>,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> SpanRequest<'a> {
    /// A request of MPI's (which needs no communicator).
    #[inline(always)]
    fn remote(r: RawRequest) -> SpanRequest<'a> {
        SpanRequest {
            comm: None,
            state: State::Remote(r),
            _buf: PhantomData,
        }
    }
}

impl std::fmt::Debug for SpanRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self.state {
            State::Local(_) => "node",
            State::Remote(_) => "mpi",
            State::Queued(_) => "queued",
            State::Give(..) => "give",
            State::Take(_) => "take",
            State::Done(_) => "done",
            State::Taken => "taken",
        };
        f.debug_struct("SpanRequest").field("state", &s).finish()
    }
}

impl<'a> SpanRequest<'a> {
    /// Moves a queued receive that has been posted or finished into this
    /// request's own state.
    fn take_posted(&mut self) {
        let State::Queued(w) = &self.state else {
            return;
        };
        let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
        let next = match std::mem::replace(&mut g.state, WaitState::Cancelled) {
            WaitState::Posted(Posted::Local(r)) => State::Local(r),
            WaitState::Posted(Posted::Remote(r)) => State::Remote(r),
            WaitState::Done(st) => State::Done(st),
            WaitState::Cancelled => {
                let mut st = Status::empty();
                st.cancelled = true;
                State::Done(st)
            }
            WaitState::Waiting => {
                g.state = WaitState::Waiting;
                return;
            }
        };
        drop(g);
        self.state = next;
    }

    /// Moves a take ([`State::Take`]) on: once no receive that was
    /// waiting before it could take its message, a take from this node is
    /// posted in the engine (the block itself travels), one from another
    /// node looks for its message (`MPI_Improbe`) and, once it matched,
    /// receives it into a fresh block (allocate + `MPI_Mrecv`).
    fn step_take(&mut self) -> Result<()> {
        let State::Take(t) = &mut self.state else {
            return Ok(());
        };
        finish_gives(false)?;
        let comm = kept(&self.comm)?;
        comm.progress_queue()?;
        t.before.retain(|w| {
            let w = w.lock().unwrap_or_else(|p| p.into_inner());
            matches!(w.state, WaitState::Waiting)
        });
        if !t.before.is_empty() {
            return Ok(());
        }
        let next = match t.route {
            Route::Local(l) => {
                // SAFETY: `out` is valid and untouched by anyone else for
                // the request's lifetime `'a` (`itake`'s contract), which
                // the engine's request takes over.
                let out: &'a mut Option<raw::OwnedBlock> = unsafe { &mut *t.out };
                // SAFETY: the request becomes this one's state, which is
                // completed or dropped (dropping waits), never leaked
                // (`itake`'s contract).
                let r = unsafe { raw::irecv_owned(&comm.local, out, t.align, l, t.tag) }?;
                State::Local(r)
            }
            Route::Remote(r) => {
                let Some((msg, st)) = comm.remote.improbe(r, t.tag)? else {
                    return Ok(());
                };
                let block = recv_block(msg, &st, t.align)?;
                // SAFETY: as above: `out` is this request's to write.
                unsafe { *t.out = Some(block) };
                State::Done(remote_status(&st))
            }
            _ => {
                return Err(Error::Rank {
                    rank: t.source,
                    size: comm.size,
                })
            }
        };
        self.state = next;
        Ok(())
    }

    /// The status once the operation has finished (its source as a rank
    /// of the communicator), else `None`.
    pub fn test(&mut self) -> Result<Option<Status>> {
        if let State::Queued(_) = self.state {
            kept(&self.comm)?.progress_queue()?;
            self.take_posted();
        }
        if let State::Take(_) = self.state {
            if let Err(e) = self.step_take() {
                self.state = State::Taken;
                return Err(e);
            }
        }
        let st = match &mut self.state {
            State::Local(r) => match r.test().transpose().map(node_outcome) {
                None => None,
                Some(Ok(st)) => Some(self.node_status(st)),
                Some(Err(e)) => {
                    self.state = State::Taken;
                    return Err(e);
                }
            },
            State::Remote(r) => match r.test() {
                Ok(x) => x.map(|s| remote_status(&s)),
                Err(e) => {
                    self.state = State::Taken;
                    return Err(e);
                }
            },
            State::Give(r, _) => {
                let done = r.test();
                if !matches!(done, Ok(None)) {
                    // Sent (or failed): the block is MPI's no longer.
                    if let State::Give(_, block) = std::mem::replace(&mut self.state, State::Taken)
                    {
                        // SAFETY: given up by its owner (`igive`), and its
                        // send has finished: nothing uses it any more.
                        unsafe { block.free() };
                    }
                }
                match done {
                    Ok(x) => x.map(|s| remote_status(&s)),
                    Err(e) => return Err(e),
                }
            }
            State::Done(st) => Some(*st),
            State::Queued(_) | State::Take(_) => None,
            State::Taken => {
                return Err(Error::Internal("request completed already".into()));
            }
        };
        if let Some(st) = st {
            self.state = State::Done(st);
        }
        Ok(st)
    }

    /// Waits for the operation to finish; its status.
    #[inline]
    pub fn wait(mut self) -> Result<Status> {
        // A send to another node, the common request of a message window,
        // is waited for here, without the general wait's frame.
        match self.wait_remote_send()? {
            Some(st) => Ok(st),
            None => self.wait_mut(),
        }
    }

    /// A send to another node blocks in MPI (see [`RawRequest::wait_send`]);
    /// its status, or `None` if this request is waited for otherwise.
    #[inline(always)]
    fn wait_remote_send(&mut self) -> Result<Option<Status>> {
        if let State::Remote(r) = &mut self.state {
            if let Some(s) = r.wait_send()? {
                self.state = State::Taken;
                return Ok(Some(remote_status(&s)));
            }
        }
        Ok(None)
    }

    fn wait_mut(&mut self) -> Result<Status> {
        // On an MPI request, spins on tests first (a message from another
        // node often arrives within a few polls, and giving up the
        // processor costs a time slice on a busy machine), then yields
        // between tests so that more ranks than cores still progress.
        if let Some(st) = self.wait_remote_send()? {
            return Ok(st);
        }
        let mut polls = 0u32;
        loop {
            // A request of the node's engine (a receive out of the queue
            // included, once posted) waits as the engine's own do:
            // spinning, then yielding, then sleeping on the doorbell, where
            // a yield on every test gave the processor away on each look
            // (on a busy machine, a time slice per message).
            if let State::Local(r) = &mut self.state {
                let st = node_outcome(r.wait_in_place().into_result());
                self.state = State::Taken;
                return st.map(|st| self.node_status(st));
            }
            if let Some(st) = self.test()? {
                self.state = State::Taken;
                return Ok(st);
            }
            // Only MPI's requests spin: the engine's own node-local ones
            // are the peer's to complete, which may need this processor.
            if polls < SPIN_POLLS && matches!(self.state, State::Remote(_) | State::Give(..)) {
                polls += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// A status of the node's engine with its source as a rank of this
    /// communicator.
    fn node_status(&self, mut st: Status) -> Status {
        if let (true, Some(c)) = (st.source >= 0, &self.comm) {
            let l = raw::source_in(&c.local, st.source);
            st.source = usize::try_from(l)
                .ok()
                .and_then(|l| c.local_members.get(l).copied())
                .unwrap_or(-1);
        }
        st
    }

    /// Cancels a receive that has not matched yet (`MPI_Cancel`); it then
    /// completes with `cancelled` in its status. Returns whether a cancel
    /// was requested (sends are not cancelled).
    pub fn cancel(&mut self) -> Result<bool> {
        match &mut self.state {
            State::Local(r) => Ok(r.cancel()),
            State::Remote(r) => {
                r.cancel()?;
                Ok(true)
            }
            State::Queued(w) => {
                let mut g = w.lock().unwrap_or_else(|p| p.into_inner());
                if matches!(g.state, WaitState::Waiting) {
                    g.state = WaitState::Cancelled;
                    drop(g);
                    self.take_posted();
                    return Ok(true);
                }
                drop(g);
                self.take_posted();
                self.cancel()
            }
            State::Take(_) => {
                let mut st = Status::empty();
                st.cancelled = true;
                self.state = State::Done(st);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl Drop for SpanRequest<'_> {
    fn drop(&mut self) {
        if matches!(self.state, State::Taken | State::Done(_)) {
            return;
        }
        if std::thread::panicking() {
            // Withdraw what can be withdrawn; the job is ending.
            let _ = self.cancel();
        }
        let _ = self.wait_mut();
    }
}

/// A message taken off the matching lists by
/// [`SpanningCommunicator::improbe`] (`MPI_Improbe`'s `MPI_Message`), to
/// be received exactly once ([`SpanMessage::recv`]): from this node an
/// engine message, from another node MPI's. Dropping it unreceived
/// discards it.
#[derive(Debug)]
pub struct SpanMessage {
    kind: Matched,
    /// Its source (rank in the communicator), tag and length.
    source: i32,
    tag: i32,
    len: usize,
}

#[derive(Debug)]
enum Matched {
    Local(raw::Message<'static>, SimpleCommunicator),
    Remote(super::mpi::RawMessage),
    /// A probe of `PROC_NULL` (`MPI_MESSAGE_NO_PROC`).
    Null,
}

impl SpanMessage {
    /// Whether this is the empty message of a probe of `PROC_NULL`.
    pub fn is_no_proc(&self) -> bool {
        matches!(self.kind, Matched::Null)
    }

    /// Receives the message into `buf` (`MPI_Mrecv`); its status names the
    /// source by its rank in the communicator. A longer message leaves its
    /// head in `buf` and the truncation in the status.
    pub fn recv(self, buf: &mut [u8]) -> Result<Status> {
        match self.kind {
            Matched::Null => Ok(null_status()),
            Matched::Local(m, local) => {
                let mut st = raw::mrecv(&local, m, buf)?;
                st.source = self.source;
                Ok(st)
            }
            Matched::Remote(m) => {
                m.recv(buf, self.len)?;
                let mut st = Status::empty();
                st.source = self.source;
                st.tag = self.tag;
                st.count = self.len.min(buf.len()) as u64;
                if self.len > buf.len() {
                    st.error = Some(raw::StatusError::Truncate {
                        message_len: self.len as u64,
                    });
                }
                Ok(st)
            }
        }
    }
}

impl SpanningCommunicator {
    /// Takes a matching message off the matching lists if there is one
    /// (`MPI_Improbe`): on the node first, then through MPI; only the
    /// returned [`SpanMessage`] receives it. Receives posted earlier that
    /// could match it are served first (the queue moves on before the
    /// probe, and a probe that an earlier waiting receive overlaps finds
    /// nothing yet).
    pub fn improbe(&self, source: i32, tag: i32) -> Result<Option<(SpanMessage, Status)>> {
        let tag = self.check_tag(tag, true)?;
        let route = self.route(source, true)?;
        if route == Route::Null {
            let m = SpanMessage {
                kind: Matched::Null,
                source: PROC_NULL,
                tag: ANY_TAG,
                len: 0,
            };
            return Ok(Some((m, null_status())));
        }
        self.inner.progress_queue()?;
        {
            let q = self.queue();
            let busy = q.iter().any(|w| {
                let w = w.lock().unwrap_or_else(|p| p.into_inner());
                matches!(w.state, WaitState::Waiting) && overlaps(w.route, w.tag, route, tag)
            });
            if busy {
                return Ok(None);
            }
        }
        if let Route::Local(_) | Route::Any = route {
            let l = match route {
                Route::Local(l) => l,
                _ => ANY_SOURCE,
            };
            if let Some((m, mut st)) = raw::improbe(&self.inner.local, l, tag)? {
                st.source = self.inner.local_members[st.source as usize];
                let m = SpanMessage {
                    kind: Matched::Local(m, self.inner.local.clone()),
                    source: st.source,
                    tag: st.tag,
                    len: st.count as usize,
                };
                return Ok(Some((m, st)));
            }
        }
        if let Route::Remote(_) | Route::Any = route {
            let r = match route {
                Route::Remote(r) => r,
                _ => ANY_SOURCE,
            };
            if let Some((m, st)) = self.inner.remote.improbe(r, tag)? {
                let st = remote_status(&st);
                let m = SpanMessage {
                    kind: Matched::Remote(m),
                    source: st.source,
                    tag: st.tag,
                    len: st.count as usize,
                };
                return Ok(Some((m, st)));
            }
        }
        Ok(None)
    }

    /// Waits for a matching message and takes it (`MPI_Mprobe`; see
    /// [`SpanningCommunicator::improbe`]).
    pub fn mprobe(&self, source: i32, tag: i32) -> Result<(SpanMessage, Status)> {
        loop {
            if let Some(found) = self.improbe(source, tag)? {
                return Ok(found);
            }
            std::thread::yield_now();
        }
    }
}
