//! The raw tier of the collectives: buffers as (address, count, datatype),
//! the form the C library marshals its arguments into and the typed API
//! builds from slices.
//!
//! Each function checks its arguments (root, counts, datatypes, the
//! operation against the datatype), turns the buffers into bytes (a dense
//! datatype's bytes in place, any other datatype packed into a
//! contiguous copy and unpacked on arrival), and hands the bytes to the
//! engine. [`Mode`] says whether the call runs the collective to its end
//! or starts it and returns its [`CollRequest`]. A communicator of one
//! member needs no engine: its collectives are local copies.
//!
//! `send: None` is `MPI_IN_PLACE` where MPI allows it.

use super::{Coll, Combine, Op};
use crate::comm::SimpleCommunicator;
use crate::datatype::{BasicType, Datatype};
use crate::error::{Error, Result};
use crate::op::{reduce_local_raw, Operation, SystemOperation};
use crate::traits::Communicator;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Whether a call runs its collective to the end or starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Blocking: return when this member's part is complete.
    Block,
    /// Nonblocking: return a request at once.
    Start,
}

/// A nonblocking collective (`MPI_I…`): test or wait for it. Dropping it
/// unfinished waits for it (the others depend on this member's part).
#[derive(Debug)]
pub struct CollRequest {
    comm: SimpleCommunicator,
    state: ReqState,
}

#[derive(Debug)]
enum ReqState {
    Running(Arc<Op>),
    Done(Option<Result<()>>),
    /// A collective of a communicator spanning nodes, running on its
    /// progress thread (`multinode::typed::start`).
    #[cfg(feature = "mpi")]
    Span(crate::multinode::CollRequest<()>),
}

impl CollRequest {
    fn done(comm: &SimpleCommunicator, r: Result<()>) -> CollRequest {
        CollRequest {
            comm: comm.clone(),
            state: ReqState::Done(Some(r)),
        }
    }

    /// Waits until the collective is complete here.
    pub fn wait(mut self) -> Result<()> {
        self.wait_mut()
    }

    /// A collective of a spanning communicator started on its progress
    /// thread, as a request of `comm`.
    #[cfg(feature = "mpi")]
    pub(crate) fn spanning(
        comm: &SimpleCommunicator,
        r: crate::multinode::CollRequest<()>,
    ) -> CollRequest {
        CollRequest {
            comm: comm.clone(),
            state: ReqState::Span(r),
        }
    }

    /// [`CollRequest::wait`] without consuming the request (later calls
    /// return `Ok`).
    pub fn wait_mut(&mut self) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let ReqState::Span(_) = self.state {
            if let ReqState::Span(r) = std::mem::replace(&mut self.state, ReqState::Done(None)) {
                return r.wait();
            }
        }
        let r = match &self.state {
            ReqState::Running(op) => match self.comm.coll()? {
                // Other communicators' collectives may need this process
                // to move on before the members this one waits for can
                // finish it (MPI's progress rule): no parking then.
                Some(c) if super::others_in_flight(&self.comm) => {
                    let mut backoff = shmheap::sync::futex::Backoff::new();
                    let mut naps = 0u32;
                    loop {
                        if let Some(r) = c.test(op) {
                            break r;
                        }
                        super::progress_in_flight();
                        backoff.snooze();
                        // Once sleeping, now and then: has a member failed
                        // (then `op` ends with that error)?
                        if backoff.is_sleeping() {
                            naps = naps.wrapping_add(1);
                            if naps % 256 == 0 && c.check_failed().is_some() {
                                if let Some(r) = c.test(op) {
                                    break r;
                                }
                            }
                        }
                    }
                }
                Some(c) => c.wait(op),
                None => Ok(()),
            },
            ReqState::Done(_) => Ok(()),
            #[cfg(feature = "mpi")]
            ReqState::Span(_) => Ok(()), // taken above
        };
        match std::mem::replace(&mut self.state, ReqState::Done(None)) {
            ReqState::Done(Some(prev)) => prev,
            _ => r,
        }
    }

    /// Whether the collective is complete here: its result the first time.
    pub fn test(&mut self) -> Option<Result<()>> {
        match &mut self.state {
            ReqState::Done(r) => Some(r.take().unwrap_or(Ok(()))),
            ReqState::Running(op) => {
                let r = match self.comm.coll() {
                    Ok(Some(c)) => c.test(op)?,
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                };
                self.state = ReqState::Done(None);
                Some(r)
            }
            #[cfg(feature = "mpi")]
            ReqState::Span(r) => {
                if !r.test() {
                    return None;
                }
                match std::mem::replace(&mut self.state, ReqState::Done(None)) {
                    ReqState::Span(r) => Some(r.wait()),
                    _ => Some(Ok(())),
                }
            }
        }
    }

    /// Moves the collectives in flight on its communicator on, and says
    /// whether this one has finished (its result stays for
    /// [`CollRequest::test`] or [`CollRequest::wait`]).
    pub fn poll(&mut self) -> bool {
        match &mut self.state {
            ReqState::Running(op) => {
                if !op.is_finished() {
                    if let Ok(Some(c)) = self.comm.coll() {
                        c.progress();
                    }
                }
            }
            // Its progress thread moves it on; this only looks.
            #[cfg(feature = "mpi")]
            ReqState::Span(r) => {
                r.test();
            }
            ReqState::Done(_) => {}
        }
        self.is_finished()
    }

    /// Whether it has finished (without moving anything on).
    pub fn is_finished(&self) -> bool {
        match &self.state {
            ReqState::Done(_) => true,
            ReqState::Running(op) => op.is_finished(),
            #[cfg(feature = "mpi")]
            ReqState::Span(r) => r.is_done(),
        }
    }
}

impl Drop for CollRequest {
    /// Waits for a collective still running: the other members need this
    /// one's part, and a spanning one's progress thread may still write
    /// into the buffers the request was started on.
    fn drop(&mut self) {
        if !matches!(self.state, ReqState::Done(_)) {
            let _ = self.wait_mut();
        }
    }
}

/// Runs or starts `f` on `coll` as `mode` says.
///
/// # Safety
/// With [`Mode::Start`], what `f` borrows stays valid until the request
/// reports the collective finished.
pub(super) unsafe fn exec<'a>(
    comm: &SimpleCommunicator,
    coll: &'a Coll,
    mode: Mode,
    f: impl Future<Output = Result<()>> + Send + 'a,
) -> Result<Option<CollRequest>> {
    match mode {
        Mode::Block => coll.run(f).map(|()| None),
        Mode::Start => {
            // SAFETY: the caller's guarantee.
            let op = unsafe { coll.start(f) };
            if !op.is_finished() {
                super::track(comm);
            }
            Ok(Some(CollRequest {
                comm: comm.clone(),
                state: ReqState::Running(op),
            }))
        }
    }
}

/// The outcome of a call that completed without the engine, as `mode`
/// wants it.
pub(super) fn local(
    comm: &SimpleCommunicator,
    mode: Mode,
    r: Result<()>,
) -> Result<Option<CollRequest>> {
    match mode {
        Mode::Block => r.map(|()| None),
        Mode::Start => Ok(Some(CollRequest::done(comm, r))),
    }
}

/// A null buffer for `count` elements of `dt` that hold data is an error
/// (unless the type's true lower bound makes its elements absolute
/// addresses, as with `MPI_BOTTOM`), checked before any work.
fn check_not_null(p: *const u8, count: usize, dt: &Datatype, what: &str) -> Result<()> {
    if p.is_null() && dt.packed_size(count)? > 0 && dt.true_lower_bound() < 4096 {
        return Err(Error::Buffer {
            reason: format!("the {what} buffer is null for {count} elements"),
        });
    }
    Ok(())
}

fn check_root(comm: &SimpleCommunicator, root: i32) -> Result<u32> {
    if (0..comm.size()).contains(&root) {
        Ok(root as u32)
    } else {
        Err(Error::Root {
            root,
            size: comm.size(),
        })
    }
}

/// The checks a rooted collective with per-member pieces makes before any
/// work: the root, one count and one displacement per member at the root,
/// and `MPI_IN_PLACE` (`in_place`) only there. Returns (root, this rank).
fn rooted(
    comm: &SimpleCommunicator,
    root: i32,
    counts: &[usize],
    displs: &[usize],
    in_place: bool,
    what: &str,
) -> Result<(u32, u32)> {
    let root = check_root(comm, root)?;
    let me = comm.rank() as u32;
    if me == root {
        pieces_per_member(comm, counts, displs, what)?;
    } else if in_place {
        return Err(Error::Arg {
            reason: format!("MPI_IN_PLACE is only for the root of a {what}"),
        });
    }
    Ok((root, me))
}

/// One count and one displacement per member.
fn pieces_per_member(
    comm: &SimpleCommunicator,
    counts: &[usize],
    displs: &[usize],
    what: &str,
) -> Result<()> {
    let n = comm.size() as usize;
    if counts.len() != n || displs.len() != n {
        return Err(Error::Arg {
            reason: format!(
                "{what}: {} counts, {} displacements for {n} ranks",
                counts.len(),
                displs.len()
            ),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------- bytes

/// A contribution as bytes: in place for a dense datatype, else packed.
struct Out {
    addr: usize,
    len: usize,
    _packed: Option<Vec<u8>>,
}

/// The bytes of `count` elements of `dt` at `ptr`.
///
/// # Safety
/// `ptr` holds `count` elements of `dt`.
unsafe fn out_bytes(ptr: *const u8, count: usize, dt: &Datatype) -> Result<Out> {
    let len = dt.packed_size(count)?;
    if len == 0 {
        return Ok(Out {
            addr: ptr as usize,
            len,
            _packed: None,
        });
    }
    if let Some(off) = dt.dense_offset() {
        return Ok(Out {
            addr: ptr.wrapping_offset(off) as usize,
            len,
            _packed: None,
        });
    }
    let mut v = vec![0u8; len];
    // SAFETY: the caller's guarantee.
    unsafe { dt.pack_raw(ptr, count, &mut v)? };
    Ok(Out {
        addr: v.as_ptr() as usize,
        len,
        _packed: Some(v),
    })
}

/// Where received bytes land: in place for a dense datatype, else a
/// buffer unpacked by [`In::finish`].
struct In {
    addr: usize,
    len: usize,
    unpack: Option<(Vec<u8>, usize, usize, Datatype)>,
}

/// The landing place of `count` elements of `dt` at `ptr`.
///
/// # Safety
/// `ptr` holds `count` writable elements of `dt`.
unsafe fn in_bytes(ptr: *mut u8, count: usize, dt: &Datatype) -> Result<In> {
    let len = dt.packed_size(count)?;
    if let Some(off) = dt.dense_offset().filter(|_| len > 0) {
        return Ok(In {
            addr: ptr.wrapping_offset(off) as usize,
            len,
            unpack: None,
        });
    }
    let v = vec![0u8; len];
    Ok(In {
        addr: v.as_ptr() as usize,
        len,
        unpack: Some((v, ptr as usize, count, dt.clone())),
    })
}

impl In {
    /// Unpacks what landed, if it was not in place.
    ///
    /// # Safety
    /// As [`in_bytes`]: the buffer is still there.
    unsafe fn finish(self) -> Result<()> {
        if let Some((v, dst, count, dt)) = self.unpack {
            // SAFETY: the caller's guarantee.
            unsafe { dt.unpack_raw(&v, dst as *mut u8, count)? };
        }
        Ok(())
    }
}

/// Byte displacements of pieces of `counts[r]` elements of `dt` at
/// element displacements `displs[r]` of a buffer at `ptr`: in place for
/// a dense type; for another, packed back to back in a landing buffer
/// (returned) whose pieces are unpacked by [`unpack_pieces`].
struct Pieces {
    base: usize,
    counts: Vec<usize>,
    displs: Vec<usize>,
    staged: Option<Vec<u8>>,
}

/// # Safety
/// `ptr` holds, at every `displs[r]` elements of `dt`, `counts[r]`
/// elements (readable, and writable if the pieces are received).
unsafe fn pieces(
    ptr: *const u8,
    counts: &[usize],
    displs: &[usize],
    dt: &Datatype,
    fill: bool,
) -> Result<Pieces> {
    let bytes: Vec<usize> = counts
        .iter()
        .map(|&c| dt.packed_size(c))
        .collect::<Result<_>>()?;
    if let Some(off) = dt.dense_offset() {
        let ext = dt.extent();
        let d = displs
            .iter()
            .map(|&d| {
                isize::try_from(d)
                    .ok()
                    .and_then(|d| d.checked_mul(ext))
                    .and_then(|d| d.checked_add(off))
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(|| Error::Arg {
                        reason: format!("displacement {d} overflows"),
                    })
            })
            .collect::<Result<_>>()?;
        return Ok(Pieces {
            base: ptr as usize,
            counts: bytes,
            displs: d,
            staged: None,
        });
    }
    let total: usize = bytes.iter().sum();
    let mut v = vec![0u8; total];
    let mut at = 0;
    let mut d = Vec::with_capacity(counts.len());
    for (r, &b) in bytes.iter().enumerate() {
        if fill && b > 0 {
            let p = ptr.wrapping_offset(displs[r] as isize * dt.extent());
            // SAFETY: the caller's guarantee for piece `r`.
            unsafe { dt.pack_raw(p, counts[r], &mut v[at..at + b])? };
        }
        d.push(at);
        at += b;
    }
    Ok(Pieces {
        base: v.as_ptr() as usize,
        counts: bytes,
        displs: d,
        staged: Some(v),
    })
}

/// Unpacks staged pieces (`pieces` of a non-dense type) into the buffer.
///
/// # Safety
/// As [`pieces`].
unsafe fn unpack_pieces(
    p: &Pieces,
    ptr: *mut u8,
    counts: &[usize],
    displs: &[usize],
    dt: &Datatype,
) -> Result<()> {
    if let Some(v) = &p.staged {
        for r in 0..counts.len() {
            let dst = ptr.wrapping_offset(displs[r] as isize * dt.extent());
            let at = p.displs[r];
            // SAFETY: the caller's guarantee for piece `r`.
            unsafe { dt.unpack_raw(&v[at..at + p.counts[r]], dst, counts[r])? };
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- ops

/// A reduction operation on a dense datatype, for the engine.
pub(super) struct Reduction {
    dt: ElementType,
    /// The offset of the datatype's bytes from its origin.
    shift: isize,
    op: Operation,
    /// A predefined operation on elements of one predefined type, checked
    /// once when the reduction was made: applied straight to the bytes.
    direct: Option<(SystemOperation, BasicType)>,
    /// Whether `err` holds an error (read without the lock on every
    /// completion).
    failed: AtomicBool,
    err: Mutex<Option<Error>>,
}

/// The datatype of a reduction's elements: kept for an operation that
/// needs it, only its size for a predefined operation on a predefined type
/// (no reference to count, so the call's path has no atomic
/// read-modify-write after the engine published).
enum ElementType {
    Kept(Datatype),
    Size(usize),
}

impl ElementType {
    fn size(&self) -> usize {
        match self {
            ElementType::Kept(dt) => dt.size(),
            ElementType::Size(s) => *s,
        }
    }
}

impl Combine for Reduction {
    fn element_size(&self) -> usize {
        self.dt.size()
    }

    fn apply(&self, input: &[u8], inout: &mut [u8]) {
        if let Some((s, b)) = self.direct {
            // The slices hold whole elements of `b` (the dense bytes of
            // the datatype) and do not overlap (the engine's contract).
            crate::op::apply(s, b, input, inout);
            return;
        }
        let ElementType::Kept(dt) = &self.dt else {
            // Only a reduction with `direct` keeps no datatype.
            return;
        };
        let n = input.len() / dt.size().max(1);
        // SAFETY: both slices hold `n` whole elements of the dense
        // datatype, whose origin is `shift` bytes before them; they do not
        // overlap (the engine's contract).
        let r = unsafe {
            reduce_local_raw(
                input.as_ptr().wrapping_offset(-self.shift),
                inout.as_mut_ptr().wrapping_offset(-self.shift),
                n,
                dt,
                &self.op,
            )
        };
        if let Err(e) = r {
            let mut slot = self.err.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(e);
            // Relaxed: the error itself is handed over under the lock.
            self.failed.store(true, Ordering::Relaxed);
        }
    }
}

impl Reduction {
    pub(super) fn error(&self) -> Option<Error> {
        // Relaxed: set by this process's own threads before the collective
        // completed (which this thread observed); the lock orders the rest.
        if !self.failed.load(Ordering::Relaxed) {
            return None;
        }
        self.err.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// How a reduction of `dt` runs: the datatype the engine's bytes hold
/// (itself when dense, its basic type when packed) and whether buffers
/// must be packed. Checks the operation against the datatype first.
pub(super) fn reduction(dt: &Datatype, op: &Operation) -> Result<(Reduction, bool)> {
    let (edt, packed) = match dt.dense_offset() {
        Some(_) => (std::borrow::Cow::Borrowed(dt), false),
        None => match (op, dt.basic_type()) {
            (Operation::System(_), Some(b)) => (std::borrow::Cow::Owned(Datatype::basic(b)), true),
            _ => {
                return Err(Error::Op {
                    reason: "a reduction over a non-contiguous datatype needs a predefined \
                             operation and elements of one predefined type"
                        .into(),
                })
            }
        },
    };
    let shift = edt.dense_offset().unwrap_or(0);
    let mut direct = None;
    if let Operation::System(sys) = op {
        if !matches!(sys, SystemOperation::Replace | SystemOperation::NoOp) {
            direct = sys.element_type(&edt)?.map(|b| (*sys, b));
        }
    }
    let edt = match direct {
        Some(_) => ElementType::Size(edt.size()),
        None => ElementType::Kept(edt.into_owned()),
    };
    Ok((
        Reduction {
            dt: edt,
            shift,
            op: op.clone(),
            direct,
            failed: AtomicBool::new(false),
            err: Mutex::new(None),
        },
        packed,
    ))
}

// ---------------------------------------------------------------- barrier

/// `MPI_Barrier` / `MPI_Ibarrier`.
pub fn barrier(comm: &SimpleCommunicator, mode: Mode) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        return super::inter::barrier(comm, mode);
    }
    match comm.coll()? {
        None => local(comm, mode, Ok(())),
        Some(c) if mode == Mode::Block => c.barrier().map(|()| None),
        // SAFETY: a barrier borrows nothing but the state.
        Some(c) => unsafe { exec(comm, c, mode, c.ibarrier()) },
    }
}

// ---------------------------------------------------------------- bcast

/// `MPI_Bcast` / `MPI_Ibcast`.
///
/// # Safety
/// `buf` holds `count` elements of `dt` (readable at the root, writable
/// elsewhere) and, with [`Mode::Start`], stays so until the request
/// finishes.
pub unsafe fn bcast(
    comm: &SimpleCommunicator,
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe { super::inter::bcast(comm, buf, count, dt, root, mode) };
    }
    let root = check_root(comm, root)?;
    if mode == Mode::Block {
        if let Some(h) = super::hier::plan(comm)? {
            // SAFETY: the caller's guarantee.
            return unsafe { h.bcast(comm, buf, count, dt, root) }.map(|()| None);
        }
    }
    let Some(c) = comm.coll()? else {
        return local(comm, mode, Ok(()));
    };
    if mode == Mode::Block {
        // Run at once (the engine's direct path when the bytes fit its
        // slot): the buffers stay on this frame.
        if comm.rank() as u32 == root {
            // SAFETY: the caller's guarantee.
            let out = unsafe { out_bytes(buf, count, dt)? };
            // SAFETY: `out` holds `out.len` readable bytes for the call.
            return unsafe { c.bcast(out.addr as *mut u8, out.len, root) }.map(|()| None);
        }
        // SAFETY: the caller's guarantee.
        let land = unsafe { in_bytes(buf, count, dt)? };
        // SAFETY: `land` holds `land.len` writable bytes for the call.
        unsafe { c.bcast(land.addr as *mut u8, land.len, root)? };
        // SAFETY: the caller's guarantee.
        return unsafe { land.finish() }.map(|()| None);
    }
    if comm.rank() as u32 == root {
        // SAFETY: the caller's guarantee.
        let out = unsafe { out_bytes(buf, count, dt)? };
        let f = {
            // SAFETY: `out` is moved into the future below and outlives it.
            let inner = unsafe { c.ibcast(out.addr as *mut u8, out.len, root) };
            async move {
                let _keep = out;
                inner.await
            }
        };
        // SAFETY: the caller's guarantee; the packed copy is owned.
        return unsafe { exec(comm, c, mode, f) };
    }
    // SAFETY: the caller's guarantee.
    let land = unsafe { in_bytes(buf, count, dt)? };
    // SAFETY: `land`'s buffer is moved into the future and outlives it.
    let inner = unsafe { c.ibcast(land.addr as *mut u8, land.len, root) };
    let f = async move {
        inner.await?;
        // SAFETY: the caller's guarantee.
        unsafe { land.finish() }
    };
    // SAFETY: as above.
    unsafe { exec(comm, c, mode, f) }
}

// ---------------------------------------------------------------- reduce

/// `MPI_Reduce` (`root: Some`) and `MPI_Allreduce` (`None`), blocking or
/// started. `send: None` is `MPI_IN_PLACE` (the input is in `recv`; at a
/// reduce's root only).
///
/// # Safety
/// `send` (or `recv` in place) holds `count` elements of `dt`; `recv`
/// holds `count` writable elements where a result is wanted (everywhere
/// for an allreduce, at the root for a reduce); with [`Mode::Start`] all
/// stay valid until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Operation,
    root: Option<i32>,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe { super::inter::reduce(comm, send, recv, count, dt, op, root, mode) };
    }
    let root = root.map(|r| check_root(comm, r)).transpose()?;
    let me = comm.rank() as u32;
    let wants = root.is_none_or(|r| r == me);
    if send.is_none() && !wants {
        return Err(Error::Arg {
            reason: "MPI_IN_PLACE is only for the root of a reduce".into(),
        });
    }
    let (red, packed) = reduction(dt, op)?;
    if root.is_none() && mode == Mode::Block {
        if let Some(h) = super::hier::plan(comm)?.filter(|h| h.reduces(op)) {
            // SAFETY: the caller's guarantee.
            return unsafe { h.allreduce(send, recv, count, dt, op) }.map(|()| None);
        }
    }
    let input = send.unwrap_or(recv.cast_const());
    check_not_null(input, count, dt, "send")?;
    if wants {
        check_not_null(recv, count, dt, "receive")?;
    }
    let Some(c) = comm.coll()? else {
        // One member: the result is its input.
        if let Some(s) = send {
            let n = dt.packed_size(count)?;
            let mut v = crate::error::zeroed_bytes(n)?;
            // SAFETY: the caller's guarantee for both buffers.
            unsafe {
                dt.pack_raw(s, count, &mut v)?;
                dt.unpack_raw(&v, recv, count)?;
            }
        }
        return local(comm, mode, Ok(()));
    };
    // The engine's bytes: in place for a dense type, packed otherwise.
    let (ecount, out, land) = if packed {
        let b = dt
            .basic_type()
            .map(|b| Datatype::basic(b).size())
            .unwrap_or(1);
        let n = dt.packed_size(count)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { out_bytes(input, count, dt)? };
        let land = if wants {
            // SAFETY: the caller's guarantee.
            Some(unsafe { in_bytes(recv, count, dt)? })
        } else {
            None
        };
        (n / b.max(1), out, land)
    } else {
        let shift = red.shift;
        let out = Out {
            addr: input.wrapping_offset(shift) as usize,
            len: dt.packed_size(count)?,
            _packed: None,
        };
        let land = wants.then(|| In {
            addr: recv.wrapping_offset(shift) as usize,
            len: out.len,
            unpack: None,
        });
        (count, out, land)
    };
    let recv_addr = land.as_ref().map_or(0, |l| l.addr);
    // In place, a dense input is the result buffer itself (the engine
    // stages it); a packed one is a copy.
    let send_addr = out.addr;
    let (send_addr, recv_addr) = (send_addr as *const u8, recv_addr as *mut u8);
    if mode == Mode::Block {
        // Run at once (the engine's direct path when the vector fits its
        // slot): the reduction and the buffers stay on this frame.
        // SAFETY: the caller's guarantee for the buffers.
        let res = unsafe { c.reduce(send_addr, recv_addr, ecount, &red, root) };
        return reduction_done(res, &red, out, land).map(|()| None);
    }
    let red = Box::new(red);
    // SAFETY: the boxed reduction and the packed buffers are moved into
    // the future, which outlives the engine's use of them (the heap
    // contents do not move with the box); the caller keeps the rest.
    let f = unsafe {
        let rp: *const Reduction = &*red;
        let inner = c.ireduce(send_addr, recv_addr, ecount, &*rp, root);
        async move {
            let red = red;
            finish_reduction(inner, &red, out, land).await
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

/// The end of a reduction: the engine's part, then the operation's own
/// error if it had one, then the result unpacked if it was staged.
async fn finish_reduction(
    inner: impl Future<Output = Result<()>>,
    red: &Reduction,
    out: Out,
    land: Option<In>,
) -> Result<()> {
    reduction_done(inner.await, red, out, land)
}

/// [`finish_reduction`] once the engine's part has ended with `res`.
fn reduction_done(res: Result<()>, red: &Reduction, out: Out, land: Option<In>) -> Result<()> {
    drop(out);
    let err = red.error();
    res?;
    if let Some(e) = err {
        return Err(e);
    }
    match land {
        // SAFETY: the landing buffer is the caller's, valid until now.
        Some(l) => unsafe { l.finish() },
        None => Ok(()),
    }
}

/// An allreduce of `count` elements of the dense datatype `dt` on the
/// node communicator `comm` in slices, with `middle` run on each member's
/// reduced slice before the members copy each other's
/// ([`Coll::allreduce_sliced`]; the spanning communicators' allreduce
/// across nodes). Blocking; `comm` has at least two members.
///
/// # Safety
/// `send` holds `count` readable elements and `recv` `count` writable
/// ones, not overlapping; `scratch` holds `count` elements' bytes,
/// initialised and writable, and is read by nobody else.
#[cfg(feature = "mpi")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allreduce_sliced<F>(
    comm: &SimpleCommunicator,
    send: *const u8,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Operation,
    scratch: *mut u8,
    middle: F,
) -> Result<()>
where
    F: FnOnce(&[u8], &mut [u8]) -> Result<()> + Send,
{
    let (red, packed) = reduction(dt, op)?;
    if packed || red.shift != 0 {
        return Err(Error::Internal(
            "a sliced allreduce of a datatype that is not dense from its origin".into(),
        ));
    }
    let Some(c) = comm.coll()? else {
        return Err(Error::Internal(
            "a sliced allreduce on a communicator of one member".into(),
        ));
    };
    // SAFETY: the caller's guarantee.
    let res = unsafe { c.allreduce_sliced(send, recv, count, &red, scratch, middle) };
    res?;
    red.error().map_or(Ok(()), Err)
}

/// A boxed slice's contents, borrowed for as long as the box lives
/// (its heap buffer does not move when the box is moved).
///
/// # Safety
/// The returned slice is used only while `b` is alive.
unsafe fn detach<'x, T>(b: &[T]) -> &'x [T] {
    // SAFETY: the caller's guarantee.
    unsafe { &*std::ptr::from_ref::<[T]>(b) }
}

/// A buffer argument as MPI passes it: address, element count, datatype.
#[derive(Debug, Clone, Copy)]
pub struct Buf<'d> {
    /// The buffer's address.
    pub ptr: *const u8,
    /// Elements of `dt` (per member, where the collective says so).
    pub count: usize,
    /// Their datatype.
    pub dt: &'d Datatype,
}

// ---------------------------------------------------------------- gather

/// `MPI_Gatherv` / `MPI_Igatherv` (and `MPI_Gather`, with equal counts
/// and displacements `r × count`). `send: None` is `MPI_IN_PLACE` at the
/// root (its piece is already in `recv`). `recv`, `counts` and `displs`
/// (in elements of `rdt`) are read at the root only.
///
/// # Safety
/// `send` holds its elements; at the root `recv` holds `counts[r]`
/// writable elements of `rdt` at every displacement `displs[r]`; with
/// [`Mode::Start`] all stay valid until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gatherv(
    comm: &SimpleCommunicator,
    send: Option<Buf<'_>>,
    recv: *mut u8,
    counts: &[usize],
    displs: &[usize],
    rdt: &Datatype,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe { super::inter::gatherv(comm, send, recv, counts, displs, rdt, root, mode) };
    }
    let (root, me) = rooted(comm, root, counts, displs, send.is_none(), "gather")?;
    let coll = comm.coll()?;
    if me != root {
        let (Some(s), Some(c)) = (send, coll) else {
            return local(comm, mode, Ok(()));
        };
        // SAFETY: the caller's guarantee.
        let out = unsafe { out_bytes(s.ptr, s.count, s.dt)? };
        // SAFETY: `out` moves into the future with its packed copy.
        let inner = unsafe {
            c.igatherv(
                out.addr as *const u8,
                out.len,
                std::ptr::null_mut(),
                &[],
                &[],
                root,
            )
        };
        let f = async move {
            let _keep = out;
            inner.await
        };
        // SAFETY: the caller's guarantee.
        return unsafe { exec(comm, c, mode, f) };
    }
    // The root: its pieces as bytes, its own piece in place or copied in.
    // SAFETY: the caller's guarantee.
    let p = unsafe { pieces(recv, counts, displs, rdt, send.is_none())? };
    let own = match send {
        None => None,
        // SAFETY: the caller's guarantee.
        Some(s) => Some(unsafe { out_bytes(s.ptr, s.count, s.dt)? }),
    };
    let mine = p.counts[me as usize];
    let (own_addr, own_len) = match &own {
        Some(o) => (o.addr, o.len),
        None => (p.base + p.displs[me as usize], mine),
    };
    if own_len != mine {
        return Err(Error::Arg {
            reason: format!("gather: the root sends {own_len} bytes to itself but expects {mine}"),
        });
    }
    let Some(c) = coll else {
        // SAFETY: the caller's guarantee; both hold `mine` bytes.
        unsafe {
            std::ptr::copy(
                own_addr as *const u8,
                (p.base + p.displs[0]) as *mut u8,
                mine,
            )
        };
        // SAFETY: as above.
        let r = unsafe { unpack_pieces(&p, recv, counts, displs, rdt) };
        return local(comm, mode, r);
    };
    let bc: Box<[usize]> = p.counts.clone().into();
    let bd: Box<[usize]> = p.displs.clone().into();
    let (counts_v, displs_v) = (counts.to_vec(), displs.to_vec());
    let rdt = rdt.clone();
    let recv_addr = recv as usize;
    // SAFETY: the boxed arrays and buffers move into the future; the heap
    // contents the engine borrows stay put while they live.
    let f = unsafe {
        let inner = c.igatherv(
            own_addr as *const u8,
            own_len,
            p.base as *mut u8,
            detach(&bc),
            detach(&bd),
            root,
        );
        async move {
            let _keep = (own, bc, bd);
            inner.await?;
            unpack_pieces(&p, recv_addr as *mut u8, &counts_v, &displs_v, &rdt)
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

// ---------------------------------------------------------------- scatter

/// `MPI_Scatterv` / `MPI_Iscatterv` (and `MPI_Scatter`). `send`,
/// `counts` and `displs` (elements of `sdt`) are read at the root only;
/// `recv: None` is `MPI_IN_PLACE` at the root.
///
/// # Safety
/// At the root `send` holds `counts[r]` elements of `sdt` at every
/// `displs[r]`; `recv` holds its elements; with [`Mode::Start`] all stay
/// valid until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scatterv(
    comm: &SimpleCommunicator,
    send: *const u8,
    counts: &[usize],
    displs: &[usize],
    sdt: &Datatype,
    recv: Option<Buf<'_>>,
    root: i32,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe {
            super::inter::scatterv(comm, send, counts, displs, sdt, recv, root, mode)
        };
    }
    let (root, me) = rooted(comm, root, counts, displs, recv.is_none(), "scatter")?;
    let coll = comm.coll()?;
    if me != root {
        let (Some(r), Some(c)) = (recv, coll) else {
            return local(comm, mode, Ok(()));
        };
        // SAFETY: the caller's guarantee.
        let land = unsafe { in_bytes(r.ptr.cast_mut(), r.count, r.dt)? };
        // SAFETY: `land` moves into the future with its buffer.
        let inner = unsafe {
            c.iscatterv(
                std::ptr::null(),
                &[],
                &[],
                land.addr as *mut u8,
                land.len,
                root,
            )
        };
        let f = async move {
            inner.await?;
            // SAFETY: the caller's guarantee.
            unsafe { land.finish() }
        };
        // SAFETY: the caller's guarantee.
        return unsafe { exec(comm, c, mode, f) };
    }
    // SAFETY: the caller's guarantee.
    let p = unsafe { pieces(send, counts, displs, sdt, true)? };
    let mine = p.counts[me as usize];
    let land = match recv {
        // SAFETY: the caller's guarantee.
        Some(r) => Some(unsafe { in_bytes(r.ptr.cast_mut(), r.count, r.dt)? }),
        None => None,
    };
    let (dst, dst_len) = match &land {
        Some(l) => (l.addr, l.len),
        None => (p.base + p.displs[me as usize], mine),
    };
    if dst_len != mine {
        return Err(Error::Arg {
            reason: format!("scatter: the root sends {mine} bytes to itself but expects {dst_len}"),
        });
    }
    let Some(c) = coll else {
        // SAFETY: both hold `mine` bytes.
        unsafe { std::ptr::copy((p.base + p.displs[0]) as *const u8, dst as *mut u8, mine) };
        // SAFETY: the caller's guarantee.
        let r = land.map_or(Ok(()), |l| unsafe { l.finish() });
        return local(comm, mode, r);
    };
    let bc: Box<[usize]> = p.counts.clone().into();
    let bd: Box<[usize]> = p.displs.clone().into();
    // SAFETY: as in `gatherv`.
    let f = unsafe {
        let inner = c.iscatterv(
            p.base as *const u8,
            detach(&bc),
            detach(&bd),
            dst as *mut u8,
            dst_len,
            root,
        );
        async move {
            let _keep = (p, bc, bd);
            inner.await?;
            land.map_or(Ok(()), |l| l.finish())
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

// ---------------------------------------------------------------- allgather

/// `MPI_Allgatherv` / `MPI_Iallgatherv` (and `MPI_Allgather`). `send:
/// None` is `MPI_IN_PLACE` (this member's piece is already in `recv`).
///
/// # Safety
/// `send` holds its elements; `recv` holds `counts[r]` writable elements
/// of `rdt` at every `displs[r]`; with [`Mode::Start`] all stay valid
/// until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allgatherv(
    comm: &SimpleCommunicator,
    send: Option<Buf<'_>>,
    recv: *mut u8,
    counts: &[usize],
    displs: &[usize],
    rdt: &Datatype,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe { super::inter::allgatherv(comm, send, recv, counts, displs, rdt, mode) };
    }
    let me = comm.rank() as usize;
    pieces_per_member(comm, counts, displs, "allgather")?;
    // SAFETY: the caller's guarantee.
    let p = unsafe { pieces(recv, counts, displs, rdt, send.is_none())? };
    let own = match send {
        None => None,
        // SAFETY: the caller's guarantee.
        Some(s) => Some(unsafe { out_bytes(s.ptr, s.count, s.dt)? }),
    };
    let (own_addr, own_len) = match &own {
        Some(o) => (o.addr, o.len),
        None => (p.base + p.displs[me], p.counts[me]),
    };
    if own_len != p.counts[me] {
        return Err(Error::Arg {
            reason: format!(
                "allgather: this rank sends {own_len} bytes but expects {} from itself",
                p.counts[me]
            ),
        });
    }
    let recv_addr = recv as usize;
    let Some(c) = comm.coll()? else {
        // SAFETY: both hold `own_len` bytes.
        unsafe {
            std::ptr::copy(
                own_addr as *const u8,
                (p.base + p.displs[0]) as *mut u8,
                own_len,
            )
        };
        // SAFETY: the caller's guarantee.
        let r = unsafe { unpack_pieces(&p, recv, counts, displs, rdt) };
        return local(comm, mode, r);
    };
    let bc: Box<[usize]> = p.counts.clone().into();
    let bd: Box<[usize]> = p.displs.clone().into();
    let (counts_v, displs_v, rdt) = (counts.to_vec(), displs.to_vec(), rdt.clone());
    // SAFETY: as in `gatherv`.
    let f = unsafe {
        let inner = c.iallgatherv(
            own_addr as *const u8,
            own_len,
            p.base as *mut u8,
            detach(&bc),
            detach(&bd),
        );
        async move {
            let _keep = (own, bc, bd);
            inner.await?;
            unpack_pieces(&p, recv_addr as *mut u8, &counts_v, &displs_v, &rdt)
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

// ---------------------------------------------------------------- alltoall

/// `MPI_Alltoallw` / `MPI_Ialltoallw`, and through it `MPI_Alltoall(v)`:
/// to member `r` this member sends `scounts[r]` elements of `sdts[r]` at
/// byte displacement `sdispls[r]`, and from member `s` it receives
/// `rcounts[s]` elements of `rdts[s]` at byte displacement `rdispls[s]`.
/// `send: None` is `MPI_IN_PLACE` (the data to send is in `recv`, laid
/// out as the receive arguments say).
///
/// # Safety
/// The buffers hold what the arguments describe; with [`Mode::Start`]
/// they stay valid until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallw(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    scounts: &[usize],
    sdispls: &[isize],
    sdts: &[&Datatype],
    recv: *mut u8,
    rcounts: &[usize],
    rdispls: &[isize],
    rdts: &[&Datatype],
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe {
            super::inter::alltoallw(
                comm, send, scounts, sdispls, sdts, recv, rcounts, rdispls, rdts, mode,
            )
        };
    }
    let n = comm.size() as usize;
    let (send, scounts, sdispls, sdts) = match send {
        Some(s) => (s, scounts, sdispls, sdts),
        None => (recv.cast_const(), rcounts, rdispls, rdts),
    };
    for (what, len) in [
        ("send counts", scounts.len()),
        ("send displacements", sdispls.len()),
        ("send datatypes", sdts.len()),
        ("receive counts", rcounts.len()),
        ("receive displacements", rdispls.len()),
        ("receive datatypes", rdts.len()),
    ] {
        if len != n {
            return Err(Error::Arg {
                reason: format!("all-to-all: {len} {what} for {n} ranks"),
            });
        }
    }
    let in_place = std::ptr::eq(send, recv.cast_const());
    if !in_place {
        if let Some(c) = comm.coll()? {
            // Dense pieces at non-negative places: the engine reads and
            // writes them where they are, no packing.
            if let (Some(sp), Some(rp)) = (
                dense_pieces(scounts, sdispls, sdts)?,
                dense_pieces(rcounts, rdispls, rdts)?,
            ) {
                let [sb, sd, rb, rd] = [sp.0, sp.1, rp.0, rp.1].map(Vec::into_boxed_slice);
                // SAFETY: the boxed arrays move into the future and their
                // heap contents stay put; the caller keeps the buffers.
                let f = unsafe {
                    let inner = c.ialltoallv(
                        send,
                        detach(&sb),
                        detach(&sd),
                        recv,
                        detach(&rb),
                        detach(&rd),
                    );
                    async move {
                        let _keep = (sb, sd, rb, rd);
                        inner.await
                    }
                };
                // SAFETY: the caller's guarantee.
                return unsafe { exec(comm, c, mode, f) };
            }
        }
    }
    // Everything to send, packed back to back (one copy: the pieces are
    // read by their receivers straight from it).
    let mut sb = Vec::with_capacity(n);
    let mut so = Vec::with_capacity(n);
    let mut total = 0usize;
    for r in 0..n {
        let b = sdts[r].packed_size(scounts[r])?;
        so.push(total);
        sb.push(b);
        total = total.checked_add(b).ok_or_else(|| Error::Arg {
            reason: "all-to-all too large".into(),
        })?;
    }
    let mut packed = vec![0u8; total];
    for r in 0..n {
        if sb[r] > 0 {
            // SAFETY: the caller's guarantee for piece `r`.
            unsafe {
                sdts[r].pack_raw(
                    send.wrapping_offset(sdispls[r]),
                    scounts[r],
                    &mut packed[so[r]..so[r] + sb[r]],
                )?
            };
        }
    }
    let mut rb = Vec::with_capacity(n);
    let mut ro = Vec::with_capacity(n);
    let mut rtotal = 0usize;
    for s in 0..n {
        let b = rdts[s].packed_size(rcounts[s])?;
        ro.push(rtotal);
        rb.push(b);
        rtotal = rtotal.checked_add(b).ok_or_else(|| Error::Arg {
            reason: "all-to-all too large".into(),
        })?;
    }
    let landing = vec![0u8; rtotal];
    let rdts: Vec<Datatype> = rdts.iter().map(|d| (*d).clone()).collect();
    let (rcounts_v, rdispls_v) = (rcounts.to_vec(), rdispls.to_vec());
    let recv_addr = recv as usize;
    let unpack = move |landing: &[u8], ro: &[usize], rb: &[usize]| -> Result<()> {
        for s in 0..rb.len() {
            if rb[s] > 0 {
                // SAFETY: the caller's guarantee for piece `s`.
                unsafe {
                    rdts[s].unpack_raw(
                        &landing[ro[s]..ro[s] + rb[s]],
                        (recv_addr as *mut u8).wrapping_offset(rdispls_v[s]),
                        rcounts_v[s],
                    )?
                };
            }
        }
        Ok(())
    };
    let Some(c) = comm.coll()? else {
        let me = comm.rank() as usize;
        if sb[me] != rb[me] {
            return Err(Error::Arg {
                reason: format!(
                    "all-to-all: this rank sends itself {} bytes but expects {}",
                    sb[me], rb[me]
                ),
            });
        }
        let mut landing = landing;
        landing[ro[me]..ro[me] + rb[me]].copy_from_slice(&packed[so[me]..so[me] + sb[me]]);
        return local(comm, mode, unpack(&landing, &ro, &rb));
    };
    let (packed, landing): (Box<[u8]>, Box<[u8]>) = (packed.into(), landing.into());
    let [sb, so, rb, ro] = [sb, so, rb, ro].map(Vec::into_boxed_slice);
    // SAFETY: the boxed buffers and arrays move into the future; their heap
    // contents stay put while they live.
    let f = unsafe {
        let inner = c.ialltoallv(
            packed.as_ptr(),
            detach(&sb),
            detach(&so),
            landing.as_ptr().cast_mut(),
            detach(&rb),
            detach(&ro),
        );
        async move {
            let _keep = (packed, sb, so);
            inner.await?;
            unpack(&landing, &ro, &rb)
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

/// Byte lengths and byte places of pieces of dense datatypes, or `None`
/// when a piece is not one run at a non-negative place.
fn dense_pieces(
    counts: &[usize],
    displs: &[isize],
    dts: &[&Datatype],
) -> Result<Option<(Vec<usize>, Vec<usize>)>> {
    let mut bytes = Vec::with_capacity(counts.len());
    let mut places = Vec::with_capacity(counts.len());
    for ((&c, &d), t) in counts.iter().zip(displs).zip(dts) {
        let Some(off) = t.dense_offset() else {
            return Ok(None);
        };
        let Ok(at) = usize::try_from(d.saturating_add(off)) else {
            return Ok(None);
        };
        bytes.push(t.packed_size(c)?);
        places.push(at);
    }
    Ok(Some((bytes, places)))
}

// ---------------------------------------------------------------- scans

/// `MPI_Scan` / `MPI_Exscan` (`exclusive`) and their nonblocking forms.
/// `send: None` is `MPI_IN_PLACE`.
///
/// # Safety
/// As [`reduce`] for an allreduce.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scan(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Operation,
    exclusive: bool,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        return super::inter::scan();
    }
    let (red, packed) = reduction(dt, op)?;
    let input = send.unwrap_or(recv.cast_const());
    check_not_null(input, count, dt, "send")?;
    check_not_null(recv, count, dt, "receive")?;
    let Some(c) = comm.coll()? else {
        if !exclusive {
            if let Some(s) = send {
                let n = dt.packed_size(count)?;
                let mut v = crate::error::zeroed_bytes(n)?;
                // SAFETY: the caller's guarantee for both buffers.
                unsafe {
                    dt.pack_raw(s, count, &mut v)?;
                    dt.unpack_raw(&v, recv, count)?;
                }
            }
        }
        return local(comm, mode, Ok(()));
    };
    // SAFETY: the caller's guarantee.
    let out = unsafe { out_bytes(input, count, dt)? };
    // SAFETY: the caller's guarantee.
    let land = unsafe { in_bytes(recv, count, dt)? };
    let ecount = out.len / red.dt.size().max(1);
    let _ = packed;
    let red = Box::new(red);
    // SAFETY: as in `reduce`.
    let f = unsafe {
        let rp: *const Reduction = &*red;
        let inner = c.iscan(
            out.addr as *const u8,
            land.addr as *mut u8,
            ecount,
            &*rp,
            exclusive,
        );
        async move {
            let _keep = out;
            let res = inner.await;
            let err = red.error();
            res?;
            if let Some(e) = err {
                return Err(e);
            }
            land.finish()
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}

/// `MPI_Reduce_scatter` / `MPI_Ireduce_scatter` (and `_block`, with equal
/// counts): member `r` receives the reduction of every member's block
/// `r` of `counts[r]` elements. `send: None` is `MPI_IN_PLACE` (the input
/// is in `recv`, which then holds every block).
///
/// # Safety
/// `send` (or `recv` in place) holds the sum of `counts` elements; `recv`
/// holds `counts[rank]` writable elements; with [`Mode::Start`] all stay
/// valid until the request finishes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce_scatter(
    comm: &SimpleCommunicator,
    send: Option<*const u8>,
    recv: *mut u8,
    counts: &[usize],
    dt: &Datatype,
    op: &Operation,
    mode: Mode,
) -> Result<Option<CollRequest>> {
    if comm.is_inter() {
        // SAFETY: the caller's guarantee.
        return unsafe { super::inter::reduce_scatter(comm, send, recv, counts, dt, op, mode) };
    }
    let n = comm.size() as usize;
    if counts.len() != n {
        return Err(Error::Arg {
            reason: format!("reduce_scatter: {} counts for {n} ranks", counts.len()),
        });
    }
    let (red, _) = reduction(dt, op)?;
    let me = comm.rank() as usize;
    let total: usize = counts.iter().sum();
    let input = send.unwrap_or(recv.cast_const());
    // SAFETY: the caller's guarantee.
    let out = unsafe { out_bytes(input, total, dt)? };
    // SAFETY: the caller's guarantee.
    let land = unsafe { in_bytes(recv, counts[me], dt)? };
    // Counts in the engine's elements (the basic type's when packed).
    let per = dt.size() / red.dt.size().max(1);
    let ecounts: Box<[usize]> = counts.iter().map(|&c| c * per).collect();
    let Some(c) = comm.coll()? else {
        // SAFETY: our block is the whole input; `land` holds it.
        unsafe { std::ptr::copy(out.addr as *const u8, land.addr as *mut u8, land.len) };
        // SAFETY: the caller's guarantee.
        return local(comm, mode, unsafe { land.finish() });
    };
    // In place, the result goes to the start of the buffer that holds the
    // input: the engine reads a copy.
    let out = if send.is_none() && out._packed.is_none() {
        let mut v = vec![0u8; out.len];
        // SAFETY: `out` holds `out.len` bytes.
        v.copy_from_slice(unsafe { std::slice::from_raw_parts(out.addr as *const u8, out.len) });
        Out {
            addr: v.as_ptr() as usize,
            len: v.len(),
            _packed: Some(v),
        }
    } else {
        out
    };
    let red = Box::new(red);
    // SAFETY: as in `reduce`.
    let f = unsafe {
        let rp: *const Reduction = &*red;
        let inner = c.ireduce_scatter(
            out.addr as *const u8,
            land.addr as *mut u8,
            detach(&ecounts),
            &*rp,
        );
        async move {
            let _keep = (out, ecounts);
            let res = inner.await;
            let err = red.error();
            res?;
            if let Some(e) = err {
                return Err(e);
            }
            land.finish()
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { exec(comm, c, mode, f) }
}
