//! The raw tier: MPI's point-to-point semantics on byte buffers, the one
//! layer that the typed API ([`crate::point_to_point`], [`crate::request`]),
//! ownership passing and the C interface all call.
//!
//! Given a communicator, communicator ranks, tags (with the runtime's
//! wildcards [`ANY_SOURCE`] and [`ANY_TAG`]) and bytes, a function here
//!
//! 1. checks the arguments, each with one function used everywhere:
//!    [`check_send_tag`], [`check_recv_tag`] (wildcards only on receives),
//!    [`route`] and [`route_source`] (a rank in range, `PROC_NULL`, and
//!    `ANY_SOURCE` only on receives);
//! 2. routes the peer ([`Route`]): every send, receive and probe goes
//!    through [`route`] / [`route_source`], the one place that decides where
//!    a message goes (today always this node's engine, or nowhere for
//!    `PROC_NULL`);
//! 3. calls the engine on the communicator's context word for the peer and
//!    tag ([`SimpleCommunicator::send_context`],
//!    [`SimpleCommunicator::recv_context`]): its context, on the VCI its
//!    hints or streams pick ([`crate::hints`]).
//!
//! The starts that write their request into a caller's table
//! ([`isend_or_in`], [`irecv_raw_or_in`]) take a [`Target`] checked
//! beforehand ([`send_target`], [`recv_target`]) and return the engine's
//! own result.
//!
//! Statuses of blocking receives, probes and matched receives come back
//! with communicator ranks. A request's status is the engine's (world
//! ranks) until it is completed; [`source_in`] names its source in the
//! communicator (the typed [`crate::Status`] and the C interface do that on
//! completion).
//!
//! Functions that start a request take raw memory or borrowed bytes and
//! are `unsafe`: the request must be completed or dropped, never leaked
//! (see each function's `# Safety`). The engine's request types, status,
//! matched messages and set functions are re-exported here, so that layers
//! above need no other crate.
//!
//! # Example
//! ```
//! use hmpi_core::raw;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! raw::send(&world, b"hi", 0, 3).unwrap();
//! let mut buf = [0u8; 8];
//! let mut st = raw::Status::empty();
//! raw::recv_with_status(&world, &mut buf, raw::ANY_SOURCE, raw::ANY_TAG, &mut st).unwrap();
//! assert_eq!((st.source, st.tag, st.count, &buf[..2]), (0, 3, 2, &b"hi"[..]));
//! assert!(raw::send(&world, b"x", 7, 0).is_err()); // Error::Rank
//! assert!(raw::send(&world, b"x", 0, raw::ANY_TAG).is_err()); // Error::Tag
//! ```

use crate::comm::SimpleCommunicator;
use crate::environment::endpoint;
use crate::error::{Error, Result};
use vci::SendMode::{Standard, Synchronous};

/// The engine's error (what its requests' completions report).
pub use vci::Error as EngineError;
/// The engine's result.
pub use vci::Result as EngineResult;
pub use vci::{
    test_all, test_any, test_some, wait_all, wait_all_in_place, wait_any, wait_some, Message,
    OwnedBlock, Request, Start, Status, StatusError,
};
pub use vci::{ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

/// Where a message to or from a communicator rank goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A process of this node, by world rank (the engine's rank).
    Local(i32),
    /// Any process (a receive from `ANY_SOURCE`).
    Any,
    /// Nowhere: `PROC_NULL` (a send completes at once, a receive gets an
    /// empty status).
    Null,
}

impl Route {
    /// The rank the engine takes for this route.
    #[inline(always)]
    pub fn engine_rank(self) -> i32 {
        match self {
            Route::Local(w) => w,
            Route::Any => ANY_SOURCE,
            Route::Null => PROC_NULL,
        }
    }
}

/// The route of destination `rank` of `comm`: a member's world rank, or
/// nowhere for `PROC_NULL`; [`Error::Rank`] otherwise (`ANY_SOURCE`
/// included).
#[inline(always)]
pub fn route(comm: &SimpleCommunicator, rank: i32) -> Result<Route> {
    // A communicator spanning nodes (feature `mpi`) routes in the typed
    // API; its node part's engine ranks are not its ranks.
    #[cfg(feature = "mpi")]
    if comm.spans_nodes() {
        return Err(comm.no_span_form("the raw tier"));
    }
    if rank == PROC_NULL {
        return Ok(Route::Null);
    }
    if comm.is_identity() {
        // The world and its duplicates: no table to read.
        if (0..comm.members()).contains(&rank) {
            return Ok(Route::Local(rank));
        }
    } else if let Some(&w) = usize::try_from(rank)
        .ok()
        .and_then(|r| comm.world_ranks().get(r))
    {
        return Ok(Route::Local(w));
    }
    Err(bad_rank(comm, rank))
}

/// The route of source `rank` of `comm`: as [`route`], and `ANY_SOURCE`
/// passes.
#[inline(always)]
pub fn route_source(comm: &SimpleCommunicator, rank: i32) -> Result<Route> {
    if rank == ANY_SOURCE {
        #[cfg(feature = "mpi")]
        if comm.spans_nodes() {
            return Err(comm.no_span_form("the raw tier"));
        }
        return Ok(Route::Any);
    }
    route(comm, rank)
}

#[cold]
#[inline(never)]
fn bad_rank(comm: &SimpleCommunicator, rank: i32) -> Error {
    Error::Rank {
        rank,
        size: comm.members(),
    }
}

/// A send's tag: `0..=TAG_UB` ([`Error::Tag`] otherwise, `ANY_TAG`
/// included).
#[inline(always)]
pub fn check_send_tag(tag: i32) -> Result<i32> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(tag)
    } else {
        Err(Error::Tag { tag })
    }
}

/// A receive's tag: as [`check_send_tag`], and `ANY_TAG` passes.
#[inline(always)]
pub fn check_recv_tag(tag: i32) -> Result<i32> {
    if tag == ANY_TAG {
        Ok(tag)
    } else {
        check_send_tag(tag)
    }
}

/// The communicator rank of the source of an engine status of `comm`
/// (a world rank): `PROC_NULL` passes; `-1` for a process outside the
/// communicator (which no message of its context comes from).
#[inline(always)]
pub fn source_in(comm: &SimpleCommunicator, world: i32) -> i32 {
    comm.rank_of_world(world).unwrap_or(-1)
}

/// An engine error of an operation on `comm`, a failed process named by
/// its rank in `comm` (see [`Error::ProcFailed`]).
#[cold]
pub(crate) fn failed_in(comm: &SimpleCommunicator, e: vci::Error) -> Error {
    Error::from(e).in_comm(|world| comm.rank_of_world(world))
}

/// Names the source of `st` in `comm` (see [`source_in`]).
#[inline(always)]
fn to_comm_ranks(comm: &SimpleCommunicator, st: &mut Status) {
    if !comm.is_identity() {
        st.source = source_in(comm, st.source);
    }
}

/// Which of a communicator's two engine contexts a message travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Point-to-point messages ([`SimpleCommunicator::context`]).
    PointToPoint,
    /// Collectives' messages ([`SimpleCommunicator::internal_context`]),
    /// never matched by point-to-point receives.
    Internal,
}

impl Traffic {
    /// The context word of a send to `dest` with `tag` (point-to-point
    /// messages on the VCI the communicator's mapping picks).
    #[inline(always)]
    fn send_context(self, comm: &SimpleCommunicator, dest: i32, tag: i32) -> u32 {
        match self {
            Traffic::PointToPoint => comm.send_context(dest, tag),
            Traffic::Internal => comm.internal_send_context(dest),
        }
    }

    /// The context word of a receive from `source` with `tag`.
    #[inline(always)]
    fn recv_context(self, comm: &SimpleCommunicator, source: i32, tag: i32) -> Result<u32> {
        match self {
            Traffic::PointToPoint => comm.recv_context(source, tag),
            Traffic::Internal => Ok(comm.internal_recv_context(source)),
        }
    }
}

/// Sends `buf` to `dest` with `tag` and returns when `buf` may be reused
/// (`MPI_Send`; `sync`: `MPI_Ssend`, once the receiver has matched it).
#[inline]
pub fn send_mode(
    comm: &SimpleCommunicator,
    buf: &[u8],
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<()> {
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    let ep = endpoint()?;
    let ctx = comm.send_context(dest, tag);
    let r = match sync {
        false => ep.send(buf, to.engine_rank(), tag, ctx, Standard),
        true => ep.send(buf, to.engine_rank(), tag, ctx, Synchronous),
    };
    r.map_err(|e| failed_in(comm, e))
}

/// [`send_mode`] in standard mode (`MPI_Send`).
#[inline]
pub fn send(comm: &SimpleCommunicator, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
    send_mode(comm, buf, dest, tag, false)
}

/// A blocking send of `buf` in `comm`'s context for `traffic` (the
/// collectives' messages of layers above).
pub fn send_on(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    buf: &[u8],
    dest: i32,
    tag: i32,
) -> Result<()> {
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    endpoint()?
        .send(
            buf,
            to.engine_rank(),
            tag,
            traffic.send_context(comm, dest, tag),
            Standard,
        )
        .map_err(|e| failed_in(comm, e))
}

/// A blocking receive into `buf` in `comm`'s context for `traffic`; the
/// status in communicator ranks (a truncation is its error).
pub fn recv_on(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    buf: &mut [u8],
    source: i32,
    tag: i32,
) -> Result<Status> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = traffic.recv_context(comm, source, tag)?;
    let mut st = Status::empty();
    endpoint()?
        .recv(buf, from.engine_rank(), tag, ctx, &mut st)
        .map_err(|e| failed_in(comm, e))?;
    to_comm_ranks(comm, &mut st);
    Ok(st)
}

/// Starts sending `buf` to `dest` with `tag` (`MPI_Isend`; `sync`:
/// `MPI_Issend`).
///
/// # Safety
/// The request must be completed (waited for, tested to completion) or
/// dropped (which waits), never leaked: the receiver may read `buf` until
/// then.
#[inline]
pub unsafe fn isend<'a>(
    comm: &SimpleCommunicator,
    buf: &'a [u8],
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<Request<'a>> {
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    let ep = endpoint()?;
    let ctx = comm.send_context(dest, tag);
    // SAFETY: the caller's guarantee.
    let r = unsafe {
        match sync {
            false => ep.isend(buf, to.engine_rank(), tag, ctx, Standard),
            true => ep.isend(buf, to.engine_rank(), tag, ctx, Synchronous),
        }
    };
    r.map_err(Into::into)
}

/// One operation's peer and tag, checked and routed, with the engine and
/// context it goes to: what [`send_target`] and [`recv_target`] make and
/// [`isend_or_in`] and [`irecv_raw_or_in`] take. Checking first lets a
/// caller with a fast path of its own see the engine's answer exactly as
/// the engine gives it (no result rebuilt around its status).
#[derive(Debug, Clone, Copy)]
pub struct Target {
    ep: &'static vci::Endpoint,
    rank: i32,
    tag: i32,
    context: u32,
}

/// The target of a send to `dest` of `comm` with `tag` (checked as by
/// [`route`] and [`check_send_tag`]).
#[inline(always)]
pub fn send_target(comm: &SimpleCommunicator, dest: i32, tag: i32) -> Result<Target> {
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    Ok(Target {
        ep: endpoint()?,
        rank: to.engine_rank(),
        tag,
        context: comm.send_context(dest, tag),
    })
}

/// The target of a receive from `source` of `comm` (or `ANY_SOURCE`)
/// with `tag` (or `ANY_TAG`), checked as by [`route_source`] and
/// [`check_recv_tag`].
#[inline(always)]
pub fn recv_target(comm: &SimpleCommunicator, source: i32, tag: i32) -> Result<Target> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    Ok(Target {
        ep: endpoint()?,
        rank: from.engine_rank(),
        tag,
        context: comm.recv_context(source, tag)?,
    })
}

/// [`isend`] in standard mode to a [`send_target`], for a layer that keeps
/// its requests in a table of its own: a send that finished as it started
/// returns its status and leaves no request; one that waits asks `place`
/// for a slot and the engine writes its request there ([`Start`]).
///
/// # Safety
/// As for [`isend`]; a place `place` returns is valid for a write of a
/// request, and the request written there is completed or dropped like
/// one [`isend`] returns.
#[inline(always)]
pub unsafe fn isend_or_in<'a>(
    to: Target,
    place: impl FnOnce() -> Option<*mut Request<'a>>,
    buf: &'a [u8],
) -> EngineResult<Start> {
    // SAFETY: the caller's guarantee.
    unsafe { to.ep.isend_or_in(place, buf, to.rank, to.tag, to.context) }
}

/// Receives into `buf` a message from `source` (or `ANY_SOURCE`) with
/// `tag` (or `ANY_TAG`), its status written to `status` in communicator
/// ranks, where it stays (`MPI_Recv`). A truncated message is not an
/// error here: the status records it (`status.error`); the `Result` is
/// for bad arguments.
#[inline(always)]
pub fn recv_with_status(
    comm: &SimpleCommunicator,
    buf: &mut [u8],
    source: i32,
    tag: i32,
    status: &mut Status,
) -> Result<()> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let ep = endpoint()?;
    ep.recv(buf, from.engine_rank(), tag, ctx, status)
        .map_err(|e| failed_in(comm, e))?;
    to_comm_ranks(comm, status);
    Ok(())
}

/// Starts receiving into `buf` (`MPI_Irecv`).
///
/// # Safety
/// As for [`isend`]: the request must be completed or dropped, never
/// leaked (the engine writes into `buf` until then).
#[inline]
pub unsafe fn irecv<'a>(
    comm: &SimpleCommunicator,
    buf: &'a mut [u8],
    source: i32,
    tag: i32,
) -> Result<Request<'a>> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let ep = endpoint()?;
    // SAFETY: the caller's guarantee.
    unsafe { ep.irecv(buf.as_mut_ptr(), buf.len(), from.engine_rank(), tag, ctx) }
        .map_err(Into::into)
}

/// Starts receiving into the `len` bytes at `buf` (memory no Rust
/// reference describes, as `MPI_Irecv` takes it; pending receives may
/// share it).
///
/// # Safety
/// `buf` is non-null and valid for writes of `len` bytes until the
/// request completes or is cancelled, touched by nothing but the engine
/// meanwhile; the request must be completed or dropped, never leaked.
#[inline]
pub unsafe fn irecv_raw<'a>(
    comm: &SimpleCommunicator,
    buf: *mut u8,
    len: usize,
    source: i32,
    tag: i32,
) -> Result<Request<'a>> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let ep = endpoint()?;
    // SAFETY: the caller's guarantee.
    unsafe { ep.irecv(buf, len, from.engine_rank(), tag, ctx) }.map_err(Into::into)
}

/// [`irecv_raw`] from a [`recv_target`], for a layer that keeps its
/// requests in a table of its own: a receive that matched at once returns
/// its status (world ranks, as every request's) and leaves no request;
/// one that waits asks `place` for a slot and the engine writes its
/// request there ([`Start`]).
///
/// # Safety
/// As for [`irecv_raw`]; a place `place` returns is valid for a write of
/// a request, and the request written there is completed or dropped like
/// one [`irecv_raw`] returns.
#[inline(always)]
pub unsafe fn irecv_raw_or_in<'a>(
    from: Target,
    place: impl FnOnce() -> Option<*mut Request<'a>>,
    buf: *mut u8,
    len: usize,
) -> EngineResult<Start> {
    // SAFETY: the caller's guarantee.
    unsafe {
        from.ep
            .irecv_raw_or_in(place, buf, len, from.rank, from.tag, from.context)
    }
}

/// Sends `out` to `dest` and receives into `buf` from `source`, the
/// receive's status in `status` in communicator ranks (`MPI_Sendrecv`):
/// the send starts first and completes before this returns, so processes
/// that call this towards each other do not deadlock. The `Result` is
/// for bad arguments and a failed send; a truncated receive is in the
/// status.
#[allow(clippy::too_many_arguments)]
pub fn sendrecv(
    comm: &SimpleCommunicator,
    out: &[u8],
    dest: i32,
    sendtag: i32,
    buf: &mut [u8],
    source: i32,
    recvtag: i32,
    status: &mut Status,
) -> Result<()> {
    let stag = check_send_tag(sendtag)?;
    let rtag = check_recv_tag(recvtag)?;
    let to = route(comm, dest)?;
    let from = route_source(comm, source)?;
    let rctx = comm.recv_context(source, rtag)?;
    let ep = endpoint()?;
    let sctx = comm.send_context(dest, stag);
    // SAFETY: waited for below, or dropped (which waits) on an early
    // return, within this call, while `out` is borrowed.
    let s = unsafe { ep.isend(out, to.engine_rank(), stag, sctx, Standard) }?;
    ep.recv(buf, from.engine_rank(), rtag, rctx, status)
        .map_err(|e| failed_in(comm, e))?;
    to_comm_ranks(comm, status);
    s.wait().map_err(|e| failed_in(comm, e))?;
    Ok(())
}

/// The status of a message from `source` with `tag` once there is one,
/// not received (`MPI_Probe`); communicator ranks.
pub fn probe(comm: &SimpleCommunicator, source: i32, tag: i32) -> Result<Status> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let mut st = endpoint()?
        .probe(from.engine_rank(), tag, ctx)
        .map_err(|e| failed_in(comm, e))?;
    to_comm_ranks(comm, &mut st);
    Ok(st)
}

/// The status of a matching message if one is there (`MPI_Iprobe`).
pub fn iprobe(comm: &SimpleCommunicator, source: i32, tag: i32) -> Result<Option<Status>> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let st = endpoint()?.iprobe(from.engine_rank(), tag, ctx)?;
    Ok(st.map(|mut st| {
        to_comm_ranks(comm, &mut st);
        st
    }))
}

/// Waits for a matching message and takes it off the matching lists
/// (`MPI_Mprobe`): receive it with [`mrecv`] or [`Message::imrecv`]; its
/// status in communicator ranks.
pub fn mprobe(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
) -> Result<(Message<'static>, Status)> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let (m, mut st) = endpoint()?
        .mprobe(from.engine_rank(), tag, ctx)
        .map_err(|e| failed_in(comm, e))?;
    to_comm_ranks(comm, &mut st);
    Ok((m, st))
}

/// Takes a matching message if one is there (`MPI_Improbe`).
pub fn improbe(
    comm: &SimpleCommunicator,
    source: i32,
    tag: i32,
) -> Result<Option<(Message<'static>, Status)>> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let found = endpoint()?.improbe(from.engine_rank(), tag, ctx)?;
    Ok(found.map(|(m, mut st)| {
        to_comm_ranks(comm, &mut st);
        (m, st)
    }))
}

/// Receives a matched message of `comm` into `buf` (`MPI_Mrecv`); its
/// status in communicator ranks, a truncation as its error.
pub fn mrecv(comm: &SimpleCommunicator, msg: Message<'_>, buf: &mut [u8]) -> Result<Status> {
    let mut st = match msg.recv_into(buf) {
        Ok(st) => st,
        Err(
            vci::Error::Truncate { status, .. }
            | vci::Error::Transfer { status, .. }
            | vci::Error::Alloc { status, .. },
        ) => status,
        Err(e) => return Err(e.into()),
    };
    to_comm_ranks(comm, &mut st);
    Ok(st)
}

/// A request that is finished already, with status `st` (for a layer that
/// keeps finished operations without an engine request, when it must hand
/// one out).
pub fn finished_request(st: Status) -> Result<Request<'static>> {
    Ok(Request::finished_with(endpoint()?, st))
}

// ------------------------------------------------------------ owned blocks

/// Gives `block` to `dest` with `tag` in `comm`'s context for `traffic`
/// (ownership passing), complete at once; on error the block is still
/// the caller's. On a communicator spanning nodes (feature `mpi`), a
/// give goes through
/// [`SpanningCommunicator::give`](crate::multinode::SpanningCommunicator::give)
/// (collective traffic on the communicator's private duplicate): to
/// another node, its bytes are sent and the block freed (its `meta` words
/// stay here), and the give returns once MPI has sent them (as `MPI_Send`
/// does: a large message once its take has begun; see [`give_started`]).
///
/// # Safety
/// `block` is a block of the global allocator with its layout (or of size
/// 0), owned by the caller, given up on success.
pub unsafe fn give(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    block: OwnedBlock,
    dest: i32,
    tag: i32,
) -> Result<()> {
    // SAFETY: the caller's guarantee.
    unsafe { give_in(comm, traffic, block, dest, tag, true) }
}

/// [`give`] that, to another node (a communicator spanning nodes), returns
/// once MPI's send of the bytes has started; the block is freed when it
/// completes, which [`complete_gives`] waits for (and every take and
/// later give moves on). For collectives whose members all give before
/// they take, which blocking gives of large values across nodes would
/// deadlock. On the node it is [`give`].
///
/// # Safety
/// As for [`give`].
pub unsafe fn give_started(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    block: OwnedBlock,
    dest: i32,
    tag: i32,
) -> Result<()> {
    // SAFETY: the caller's guarantee.
    unsafe { give_in(comm, traffic, block, dest, tag, false) }
}

/// Waits until every give of this process to another node has been sent
/// (their blocks freed); nothing to do without feature `mpi`.
pub fn complete_gives() -> Result<()> {
    #[cfg(feature = "mpi")]
    crate::multinode::complete_gives()?;
    Ok(())
}

/// [`give`], waiting for a give to another node to be sent if `wait`.
///
/// # Safety
/// As for [`give`].
#[inline(always)]
unsafe fn give_in(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    block: OwnedBlock,
    dest: i32,
    tag: i32,
    wait: bool,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if let Some(s) = comm.spanning() {
        let (s, tag) = s.for_traffic(traffic, tag)?;
        // SAFETY: the caller's guarantee is the spanning give's.
        unsafe { s.give(block, dest, tag) }?;
        // To another node the give returns once MPI has sent the bytes (as
        // MPI_Send: a large message once its take has begun).
        if wait && !comm.shares_heap_with(dest) {
            crate::multinode::complete_gives()?;
        }
        return Ok(());
    }
    let _ = wait;
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    let ep = endpoint()?;
    let ctx = traffic.send_context(comm, dest, tag);
    // SAFETY: the caller's guarantee.
    unsafe { ep.give(block, to.engine_rank(), tag, ctx) }.map_err(Into::into)
}

/// [`give`] as a request (complete already).
///
/// # Safety
/// As for [`give`].
pub unsafe fn igive(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    block: OwnedBlock,
    dest: i32,
    tag: i32,
) -> Result<Request<'static>> {
    let tag = check_send_tag(tag)?;
    let to = route(comm, dest)?;
    let ep = endpoint()?;
    let ctx = traffic.send_context(comm, dest, tag);
    // SAFETY: the caller's guarantee.
    unsafe { ep.isend_owned(block, to.engine_rank(), tag, ctx) }.map_err(Into::into)
}

/// Receives a message from `source` with `tag` as a block (aligned to
/// `align`) into `out`, where it stays as the engine wrote it; the status
/// in `status`, in communicator ranks. A receive from `PROC_NULL` is
/// [`Error::Rank`] (it has no block to give). On a communicator spanning
/// nodes (feature `mpi`), a receive goes through
/// [`SpanningCommunicator::take`](crate::multinode::SpanningCommunicator::take)
/// (collective traffic on the communicator's private duplicate):
/// from another node, a fresh block of the message's length, without
/// `meta` words (and `ANY_SOURCE` is refused).
#[inline(always)]
pub fn recv_owned_into(
    comm: &SimpleCommunicator,
    traffic: Traffic,
    out: &mut Option<OwnedBlock>,
    align: usize,
    source: i32,
    tag: i32,
    status: &mut Status,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if let Some(s) = comm.spanning() {
        let (s, folded) = s.for_traffic(traffic, tag)?;
        let (block, mut st) = s.take(align, source, folded)?;
        // The tag the caller asked for, not the duplicate's.
        if tag != ANY_TAG {
            st.tag = tag;
        }
        *out = Some(block);
        *status = st;
        return Ok(());
    }
    let tag = check_recv_tag(tag)?;
    let from = match route_source(comm, source)? {
        Route::Null => return Err(bad_rank(comm, PROC_NULL)),
        r => r,
    };
    let ctx = traffic.recv_context(comm, source, tag)?;
    let ep = endpoint()?;
    *status = ep.recv_owned_into(out, align, from.engine_rank(), tag, ctx)?;
    to_comm_ranks(comm, status);
    Ok(())
}

/// Starts receiving a block into `*out` (aligned to `align`).
///
/// # Safety
/// The request must be completed or dropped, never leaked.
pub unsafe fn irecv_owned<'a>(
    comm: &SimpleCommunicator,
    out: &'a mut Option<OwnedBlock>,
    align: usize,
    source: i32,
    tag: i32,
) -> Result<Request<'a>> {
    let tag = check_recv_tag(tag)?;
    let from = route_source(comm, source)?;
    let ctx = comm.recv_context(source, tag)?;
    let ep = endpoint()?;
    // SAFETY: the caller's guarantee.
    unsafe { ep.irecv_owned(out, align, from.engine_rank(), tag, ctx) }.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        assert_eq!(check_send_tag(5).unwrap(), 5);
        assert!(matches!(check_send_tag(ANY_TAG), Err(Error::Tag { .. })));
        assert!(check_send_tag(TAG_UB + 1).is_err());
        assert!(check_send_tag(-7).is_err());
        assert_eq!(check_recv_tag(ANY_TAG).unwrap(), ANY_TAG);
        assert!(check_recv_tag(-7).is_err());
    }
}
