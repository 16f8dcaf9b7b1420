//! Collectives of the C interface: blocking (`MPI_Bcast` … `MPI_Exscan`),
//! nonblocking (`MPI_I…`) and persistent (`MPI_…_init`, started with
//! `MPI_Start`), all through `hmpi_core::collective::raw`.
//!
//! Each routine converts its C arguments (handles, `MPI_IN_PLACE`, count
//! arrays) into a *plan*: a closure that runs or starts the collective on
//! the runtime. A blocking call runs it at once; a nonblocking call starts
//! it and stores its request under an `MPI_Request` handle of this
//! module's own kind; a persistent call stores the plan, and each
//! `MPI_Start` starts it again. `MPI_Wait`, `MPI_Test` and their array
//! forms, `MPI_Request_get_status` and `MPI_Request_free` recognise these
//! handles and come here. Persistent point-to-point requests
//! ([`crate::persistent`]) are handles of this kind too, so one
//! `MPI_Startall` starts both.
//!
//! A nonblocking collective publishes its contribution when it starts (so
//! the other ranks can go on), and moves on whenever one of its requests
//! is tested or waited for, or another collective runs on its
//! communicator.
//!
//! In C:
//! ```c
//! double local = 1.0, sum;
//! MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
//! MPI_Request r;
//! MPI_Ibcast(buf, n, MPI_INT, 0, MPI_COMM_WORLD, &r);
//! MPI_Wait(&r, MPI_STATUS_IGNORE);
//! ```

use crate::abi::{self, Aint, Comm, Count, Datatype, Info, MpiStatus, Op, Request};
use crate::coll_large::{scaled, times, Int};
use crate::comm::CommRef;
use crate::datatype::type_ref;
use crate::errors::{api_comm, err, out, MpiError, Res};
use crate::grequest::GreqRef;
use crate::handles::{Table, KIND_COLL};
use crate::op::op_ref;
use crate::persistent::P2p;
use crate::request::{null_status, store_status};
use hmpi_core::collective::raw::{self as craw, Buf, CollRequest, Mode};
use hmpi_core::datatype::Datatype as CoreType;
use hmpi_core::op::Operation;
use hmpi_core::traits::Communicator;
use hmpi_core::SimpleCommunicator;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// `MPI_IN_PLACE`.
const IN_PLACE: usize = 1;

type Outcome = hmpi_core::Result<Option<CollRequest>>;

/// How a persistent collective starts again.
type Plan = Box<dyn Fn(Mode) -> Outcome + Send>;

/// A nonblocking or persistent collective behind an `MPI_Request`.
struct Entry {
    comm: CommRef,
    /// Persistent: how to start it.
    plan: Option<Plan>,
    /// The collective in flight (none: inactive, or finished).
    active: Option<CollRequest>,
    /// A persistent point-to-point operation instead of a collective
    /// (see [`crate::persistent`]).
    p2p: Option<P2p>,
    /// A generalized request instead (see [`crate::grequest`]).
    greq: Option<GreqRef>,
}

static COLLS: Table<Arc<Mutex<Entry>>> = Table::new(KIND_COLL);

fn lock(e: &Mutex<Entry>) -> std::sync::MutexGuard<'_, Entry> {
    e.lock().unwrap_or_else(|p| p.into_inner())
}

/// A request that is complete already (the request-based one-sided
/// operations, `MPI_Rput` …, finish at their call): `MPI_Wait` and its kin
/// return at once and free it, with an empty status.
pub fn completed(comm: CommRef) -> Res<Request> {
    let e = Entry {
        comm,
        plan: None,
        active: None,
        p2p: None,
        greq: None,
    };
    COLLS
        .insert(Arc::new(Mutex::new(e)))
        .map(Request)
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many requests"))
}

/// Whether `h` is a collective's request (of this module's kind).
#[inline]
pub fn is_coll(h: Request) -> bool {
    h.0 >> crate::handles::KIND_SHIFT == KIND_COLL
}

fn entry(h: Request) -> Res<Arc<Mutex<Entry>>> {
    COLLS.get(h.0).map_err(|_| {
        MpiError::new(
            abi::ERR_REQUEST,
            format!(
                "{:#x} is not a request (freed, or another kind of handle)",
                h.0
            ),
        )
    })
}

/// How a routine runs its plan.
#[derive(Clone, Copy)]
pub(crate) enum How {
    Block,
    Start(*mut Request),
    Init(*mut Request),
}

pub(crate) fn run<F>(c: &CommRef, how: How, plan: F) -> Res
where
    F: Fn(Mode) -> Outcome + Send + 'static,
{
    match how {
        How::Block => {
            crate::request::poll_detached();
            plan(Mode::Block)?;
            Ok(())
        }
        How::Start(req) => {
            let p = out(req, "request")?;
            let active = plan(Mode::Start)?;
            store(p, c, None, active)
        }
        How::Init(req) => {
            let p = out(req, "request")?;
            store(p, c, Some(Box::new(plan)), None)
        }
    }
}

fn store(p: *mut Request, c: &CommRef, plan: Option<Plan>, active: Option<CollRequest>) -> Res {
    let e = Arc::new(Mutex::new(Entry {
        comm: c.clone(),
        plan,
        active,
        p2p: None,
        greq: None,
    }));
    let h = COLLS
        .insert(e)
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many collective requests"))?;
    // SAFETY: checked non-null; the caller's request variable.
    unsafe { p.write(Request(h)) };
    Ok(())
}

/// Stores an inactive persistent point-to-point operation under a
/// request handle of this module's kind, so that `MPI_Start`, `MPI_Startall`
/// and the completion routines treat it as a persistent collective.
pub(crate) fn store_persistent(c: &CommRef, op: P2p) -> Res<Request> {
    let e = Arc::new(Mutex::new(Entry {
        comm: c.clone(),
        plan: None,
        active: None,
        p2p: Some(op),
        greq: None,
    }));
    COLLS
        .insert(e)
        .map(Request)
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many persistent requests"))
}

/// Stores a generalized request (`MPI_Grequest_start`) under a request
/// handle of this module's kind, so that the completion routines take it.
pub(crate) fn store_greq(c: CommRef, g: GreqRef) -> Res<Request> {
    let e = Arc::new(Mutex::new(Entry {
        comm: c,
        plan: None,
        active: None,
        p2p: None,
        greq: Some(g),
    }));
    COLLS
        .insert(e)
        .map(Request)
        .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many requests"))
}

/// The generalized request behind `h`, if it is one.
pub(crate) fn greq_of(h: Request) -> Option<GreqRef> {
    if !is_coll(h) {
        return None;
    }
    let e = COLLS.get(h.0).ok()?;
    let g = lock(&e).greq.clone();
    g
}

/// Drops the handle of a generalized request that was freed before it
/// completed (from `MPI_Grequest_complete`).
pub(crate) fn forget(h: Request) {
    let _ = COLLS.remove(h.0);
}

/// Starts a persistent collective or point-to-point operation (`MPI_Start`
/// on one of these handles).
pub fn start(h: Request) -> Res {
    let e = entry(h)?;
    let mut e = lock(&e);
    if let Some(op) = e.p2p.as_mut() {
        if op.is_active() {
            return err(
                abi::ERR_REQUEST,
                "MPI_Start on a persistent request that is still active",
            );
        }
        return op.start();
    }
    let Some(plan) = &e.plan else {
        return err(
            abi::ERR_REQUEST,
            "MPI_Start on a request that is not persistent",
        );
    };
    if e.active.is_some() {
        return err(
            abi::ERR_REQUEST,
            "MPI_Start on a persistent request that is still active",
        );
    }
    let comm = e.comm.clone();
    e.active = plan(Mode::Start).map_err(|x| MpiError::from(x).on(&comm))?;
    Ok(())
}

/// Completes `*p` (waiting if `wait`, else only if it has finished):
/// `Ok(true)` when it has, with the status written and the handle freed
/// (a persistent one stays, inactive).
///
/// # Safety
/// `p` and `status` are the caller's valid pointers (`status` may be
/// `MPI_STATUS_IGNORE`).
pub unsafe fn complete(p: *mut Request, status: *mut MpiStatus, wait: bool) -> Res<bool> {
    // SAFETY: the caller's pointer.
    let h = unsafe { p.read() };
    let e = entry(h)?;
    let mut g = lock(&e);
    if let Some(gr) = g.greq.clone() {
        // Not under the entry's lock: MPI_Grequest_complete takes it.
        drop(g);
        // SAFETY: the caller's status pointer.
        let Some(r) = (unsafe { gr.complete(status, wait) }) else {
            return Ok(false);
        };
        let _ = COLLS.remove(h.0);
        // SAFETY: the caller's pointer.
        unsafe { p.write(abi::REQUEST_NULL) };
        return r.map(|()| true);
    }
    if let Some(op) = g.p2p.as_mut() {
        // SAFETY: the caller's status pointer.
        let done = unsafe { op.complete(status, wait) };
        if op.is_oneshot() && !matches!(done, Ok(false)) {
            // An MPI_Isendrecv: freed with its completion.
            drop(g);
            let _ = COLLS.remove(h.0);
            // SAFETY: the caller's pointer.
            unsafe { p.write(abi::REQUEST_NULL) };
        }
        return done;
    }
    let comm = g.comm.clone();
    let r = match g.active.as_mut() {
        None => Ok(()),
        Some(req) if wait => req.wait_mut(),
        Some(req) => match req.test() {
            None => return Ok(false),
            Some(r) => r,
        },
    };
    g.active = None;
    let persistent = g.plan.is_some();
    drop(g);
    if !persistent {
        let _ = COLLS.remove(h.0);
        // SAFETY: the caller's pointer.
        unsafe { p.write(abi::REQUEST_NULL) };
    }
    // SAFETY: the caller's status pointer.
    unsafe { store_status(status, null_status()) };
    r.map_err(|x| MpiError::from(x).on(&comm))?;
    Ok(true)
}

/// Whether the collective of `h` has finished, without completing it
/// (`MPI_Request_get_status`).
pub fn is_done(h: Request) -> Res<bool> {
    let e = entry(h)?;
    let mut g = lock(&e);
    if let Some(gr) = g.greq.as_ref() {
        return Ok(gr.is_finished());
    }
    if let Some(op) = g.p2p.as_ref() {
        return op.is_done();
    }
    Ok(match g.active.as_mut() {
        None => true,
        Some(req) => req.poll(),
    })
}

/// Whether `h` is an inactive persistent request (never started, or
/// completed since): the `any` and `some` completions skip it, as they skip
/// `MPI_REQUEST_NULL`.
pub(crate) fn inactive(h: Request) -> bool {
    if !is_coll(h) {
        return false;
    }
    let Ok(e) = entry(h) else {
        return false;
    };
    let g = lock(&e);
    match g.p2p.as_ref() {
        Some(op) => !op.is_active(),
        None => g.plan.is_some() && g.active.is_none(),
    }
}

/// `MPI_Request_free` on a collective's request: an active one is
/// completed first (the other ranks depend on this one's part). A
/// persistent point-to-point operation that refuses to be freed (see
/// `persistent::P2p::release`) keeps its request and handle.
///
/// # Safety
/// `p` is the caller's valid handle pointer.
pub unsafe fn free(p: *mut Request) -> Res {
    // SAFETY: the caller's pointer, checked non-null by the caller.
    let h = unsafe { p.read() };
    let e = entry(h)?;
    let greq = lock(&e).greq.clone();
    if let Some(gr) = greq {
        // SAFETY: as above.
        unsafe { p.write(abi::REQUEST_NULL) };
        // The call that runs free_fn drops the handle (this one, or
        // MPI_Grequest_complete's).
        return match gr.free() {
            Some(r) => {
                let _ = COLLS.remove(h.0);
                r
            }
            None => Ok(()),
        };
    }
    let active = {
        let mut g = lock(&e);
        if let Some(op) = g.p2p.as_mut() {
            op.release()?;
        }
        g.active.take()
    };
    if let Some(mut req) = active {
        let _ = req.wait_mut();
    }
    let _ = COLLS.remove(h.0);
    // SAFETY: as above.
    unsafe { p.write(abi::REQUEST_NULL) };
    Ok(())
}

/// `MPI_Cancel` on a request of this module's kind: an active persistent
/// receive is cancelled (a send is not, as `MPI_Cancel` of a nonblocking
/// send); a collective cannot be.
pub fn cancel(h: Request) -> Res {
    let e = entry(h)?;
    let mut g = lock(&e);
    if let Some(gr) = g.greq.clone() {
        drop(g);
        return gr.cancel();
    }
    match g.p2p.as_mut() {
        Some(op) => op.cancel(),
        None => err(
            abi::ERR_REQUEST,
            "a collective's request cannot be cancelled",
        ),
    }
}

// ---------------------------------------------------------------- arguments

/// The datatype behind handle `t`.
pub(crate) fn dtype(t: Datatype) -> Res<CoreType> {
    Ok(type_ref(t)?.ty.clone())
}

fn count(c: impl Int, what: &str) -> Res<usize> {
    c.to_count(what)
}

/// `n` integers at `p` (a count or displacement array: `int`, `MPI_Count`
/// or `MPI_Aint`), checked.
///
/// # Safety
/// `p` holds `n` integers (MPI's contract) or is null (an error).
unsafe fn ints<I: Int>(p: *const I, n: usize, what: &str) -> Res<Vec<I>> {
    if p.is_null() {
        return err(abi::ERR_ARG, format!("{what} is a null pointer"));
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// # Safety
/// As [`ints`].
unsafe fn counts<I: Int>(p: *const I, n: usize, what: &str) -> Res<Vec<usize>> {
    // SAFETY: the caller's guarantee.
    unsafe { ints(p, n, what) }?
        .into_iter()
        .map(|c| count(c, what))
        .collect()
}

/// # Safety
/// As [`ints`].
unsafe fn displs<I: Int>(p: *const I, n: usize, what: &str) -> Res<Vec<usize>> {
    // SAFETY: the caller's guarantee.
    unsafe { ints(p, n, what) }?
        .into_iter()
        .map(|d| {
            usize::try_from(d.to_disp(what)?).map_err(|_| {
                MpiError::new(abi::ERR_ARG, format!("negative {what} {d} (not supported)"))
            })
        })
        .collect()
}

/// Checks that `n` elements of `dt` fit the address space in bytes, so
/// that a count too large is an error on every rank, even where the
/// collective moves nothing (one rank, or a side that is not read).
fn sized(n: usize, dt: &CoreType) -> Res<usize> {
    dt.packed_size(n)?;
    Ok(n)
}

/// [`sized`] for every count of a piece list (one datatype for all, or
/// one each).
fn all_sized(counts: &[usize], dts: &[CoreType]) -> Res {
    for (&n, dt) in counts.iter().zip(dts.iter().cycle()) {
        sized(n, dt)?;
    }
    Ok(())
}

/// The number of pieces a collective exchanges: one per process of the
/// group the data comes from or goes to (the remote group of an
/// intercommunicator).
fn size_of(comm: &SimpleCommunicator) -> usize {
    comm.peers() as usize
}

/// The number of processes of the local group (the blocks of a
/// reduce_scatter).
fn local_size_of(comm: &SimpleCommunicator) -> usize {
    comm.size() as usize
}

/// Whether this process is a rooted collective's root (`MPI_ROOT` on an
/// intercommunicator).
fn is_root(comm: &SimpleCommunicator, root: c_int) -> bool {
    if comm.is_inter() {
        root == abi::ROOT
    } else {
        comm.rank() == root
    }
}

// ---------------------------------------------------------------- families

fn barrier(c: &CommRef, how: How) -> Res {
    let comm = c.comm.clone();
    run(c, how, move |m| craw::barrier(&comm, m))
}

fn bcast(c: &CommRef, buf: *mut c_void, n: impl Int, t: Datatype, root: c_int, how: How) -> Res {
    let (comm, dt, buf) = (c.comm.clone(), dtype(t)?, buf as usize);
    let n = sized(count(n, "count")?, &dt)?;
    run(c, how, move |m| {
        // SAFETY: MPI's contract for the buffer, until completion.
        unsafe { craw::bcast(&comm, buf as *mut u8, n, &dt, root, m) }
    })
}

#[allow(clippy::too_many_arguments)]
fn reduce(
    c: &CommRef,
    send: *const c_void,
    recv: *mut c_void,
    n: impl Int,
    t: Datatype,
    op: Op,
    root: Option<c_int>,
    how: How,
) -> Res {
    let (comm, dt) = (c.comm.clone(), dtype(t)?);
    let n = sized(count(n, "count")?, &dt)?;
    let op: Operation = op_ref(op)?;
    let (send, recv) = (send as usize, recv as usize);
    run(c, how, move |m| {
        let s = (send != IN_PLACE).then_some(send as *const u8);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe { craw::reduce(&comm, s, recv as *mut u8, n, &dt, &op, root, m) }
    })
}

#[allow(clippy::too_many_arguments)]
fn scan(
    c: &CommRef,
    send: *const c_void,
    recv: *mut c_void,
    n: impl Int,
    t: Datatype,
    op: Op,
    exclusive: bool,
    how: How,
) -> Res {
    let (comm, dt) = (c.comm.clone(), dtype(t)?);
    let n = sized(count(n, "count")?, &dt)?;
    let op: Operation = op_ref(op)?;
    let (send, recv) = (send as usize, recv as usize);
    run(c, how, move |m| {
        let s = (send != IN_PLACE).then_some(send as *const u8);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe { craw::scan(&comm, s, recv as *mut u8, n, &dt, &op, exclusive, m) }
    })
}

/// The receive side of a gather or allgather, read where it is significant.
struct Pieces {
    counts: Vec<usize>,
    displs: Vec<usize>,
    dt: CoreType,
}

impl Pieces {
    /// No pieces: what a rank other than the root passes.
    fn none() -> Pieces {
        Pieces {
            counts: Vec::new(),
            displs: Vec::new(),
            dt: CoreType::basic(hmpi_core::datatype::BasicType::Byte),
        }
    }
}

/// A send (or receive) side as the raw tier takes it.
fn buf_of(side: &Option<(usize, usize, CoreType)>) -> Option<Buf<'_>> {
    side.as_ref().map(|(a, n, t)| Buf {
        ptr: *a as *const u8,
        count: *n,
        dt: t,
    })
}

fn even(n: usize, per: impl Int, t: Datatype) -> Res<Pieces> {
    let dt = dtype(t)?;
    let per = sized(count(per, "receive count")?, &dt)?;
    Ok(Pieces {
        counts: vec![per; n],
        displs: (0..n)
            .map(|r| times(r, per, "receive buffer"))
            .collect::<Res<_>>()?,
        dt,
    })
}

/// # Safety
/// `counts`/`displs` hold one int per rank.
unsafe fn varying<I: Int, D: Int>(n: usize, c: *const I, d: *const D, t: Datatype) -> Res<Pieces> {
    let p = Pieces {
        // SAFETY: the caller's guarantee.
        counts: unsafe { counts(c, n, "receive counts") }?,
        // SAFETY: as above.
        displs: unsafe { displs(d, n, "displacements") }?,
        dt: dtype(t)?,
    };
    all_sized(&p.counts, std::slice::from_ref(&p.dt))?;
    Ok(p)
}

/// A send side: `None` for `MPI_IN_PLACE`.
fn send_side(
    send: *const c_void,
    n: impl Int,
    t: Datatype,
) -> Res<Option<(usize, usize, CoreType)>> {
    if send as usize == IN_PLACE {
        return Ok(None);
    }
    let dt = dtype(t)?;
    let n = sized(count(n, "send count")?, &dt)?;
    Ok(Some((send as usize, n, dt)))
}

fn gather(
    c: &CommRef,
    send: Option<(usize, usize, CoreType)>,
    recv: *mut c_void,
    p: Option<Pieces>,
    root: c_int,
    how: How,
) -> Res {
    let (comm, recv) = (c.comm.clone(), recv as usize);
    let p = p.unwrap_or_else(Pieces::none);
    run(c, how, move |m| {
        let s = buf_of(&send);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe {
            craw::gatherv(
                &comm,
                s,
                recv as *mut u8,
                &p.counts,
                &p.displs,
                &p.dt,
                root,
                m,
            )
        }
    })
}

fn scatter(
    c: &CommRef,
    send: *const c_void,
    p: Option<Pieces>,
    recv: Option<(usize, usize, CoreType)>,
    root: c_int,
    how: How,
) -> Res {
    let (comm, send) = (c.comm.clone(), send as usize);
    let p = p.unwrap_or_else(Pieces::none);
    run(c, how, move |m| {
        let r = buf_of(&recv);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe {
            craw::scatterv(
                &comm,
                send as *const u8,
                &p.counts,
                &p.displs,
                &p.dt,
                r,
                root,
                m,
            )
        }
    })
}

fn allgather(
    c: &CommRef,
    send: Option<(usize, usize, CoreType)>,
    recv: *mut c_void,
    p: Pieces,
    how: How,
) -> Res {
    let (comm, recv) = (c.comm.clone(), recv as usize);
    run(c, how, move |m| {
        let s = buf_of(&send);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe { craw::allgatherv(&comm, s, recv as *mut u8, &p.counts, &p.displs, &p.dt, m) }
    })
}

/// One side of an all-to-all: counts, byte displacements, datatypes.
struct Side {
    counts: Vec<usize>,
    displs: Vec<isize>,
    dts: Vec<CoreType>,
}

fn side_even(n: usize, per: impl Int, t: Datatype) -> Res<Side> {
    let dt = dtype(t)?;
    let per = sized(count(per, "count")?, &dt)?;
    let ext = dt.extent();
    let displs = (0..n)
        .map(|r| {
            let d = times(r, per, "buffer")?;
            let d = isize::try_from(d).map_err(|_| {
                MpiError::new(
                    abi::ERR_COUNT,
                    format!("piece {r} of {per} elements is out of reach"),
                )
            })?;
            scaled(d, ext, "displacement")
        })
        .collect::<Res<_>>()?;
    Ok(Side {
        counts: vec![per; n],
        displs,
        dts: vec![dt; n],
    })
}

/// # Safety
/// `c`/`d` hold one int per rank.
unsafe fn side_v<I: Int, D: Int>(n: usize, c: *const I, d: *const D, t: Datatype) -> Res<Side> {
    let dt = dtype(t)?;
    let ext = dt.extent();
    let s = Side {
        // SAFETY: the caller's guarantee.
        counts: unsafe { counts(c, n, "counts") }?,
        // SAFETY: as above.
        displs: unsafe { ints(d, n, "displacements") }?
            .into_iter()
            .map(|x| scaled(x.to_disp("displacement")?, ext, "displacement"))
            .collect::<Res<_>>()?,
        dts: vec![dt; n],
    };
    all_sized(&s.counts, &s.dts)?;
    Ok(s)
}

/// # Safety
/// `c`/`d`/`t` hold one entry per rank.
unsafe fn side_w<I: Int, D: Int>(
    n: usize,
    c: *const I,
    d: *const D,
    t: *const Datatype,
) -> Res<Side> {
    if t.is_null() {
        return err(abi::ERR_ARG, "datatypes is a null pointer");
    }
    // SAFETY: the caller's guarantee.
    let ts = unsafe { std::slice::from_raw_parts(t, n) };
    let s = Side {
        // SAFETY: the caller's guarantee.
        counts: unsafe { counts(c, n, "counts") }?,
        // SAFETY: as above.
        displs: unsafe { ints(d, n, "displacements") }?
            .into_iter()
            .map(|x| x.to_disp("displacement"))
            .collect::<Res<_>>()?,
        dts: ts.iter().map(|&t| dtype(t)).collect::<Res<_>>()?,
    };
    all_sized(&s.counts, &s.dts)?;
    Ok(s)
}

fn alltoall(
    c: &CommRef,
    send: *const c_void,
    s: Option<Side>,
    recv: *mut c_void,
    r: Side,
    how: How,
) -> Res {
    let (comm, send, recv) = (c.comm.clone(), send as usize, recv as usize);
    let s = s.unwrap_or(Side {
        counts: Vec::new(),
        displs: Vec::new(),
        dts: Vec::new(),
    });
    run(c, how, move |m| {
        let sd: Vec<&CoreType> = s.dts.iter().collect();
        let rd: Vec<&CoreType> = r.dts.iter().collect();
        let sp = (send != IN_PLACE).then_some(send as *const u8);
        let (sc, sdi, sdt) = if sp.is_some() {
            (&s.counts[..], &s.displs[..], &sd[..])
        } else {
            (&r.counts[..], &r.displs[..], &rd[..])
        };
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe {
            craw::alltoallw(
                &comm,
                sp,
                sc,
                sdi,
                sdt,
                recv as *mut u8,
                &r.counts,
                &r.displs,
                &rd,
                m,
            )
        }
    })
}

fn reduce_scatter(
    c: &CommRef,
    send: *const c_void,
    recv: *mut c_void,
    counts: Vec<usize>,
    t: Datatype,
    op: Op,
    how: How,
) -> Res {
    let (comm, dt) = (c.comm.clone(), dtype(t)?);
    all_sized(&counts, std::slice::from_ref(&dt))?;
    let op: Operation = op_ref(op)?;
    let (send, recv) = (send as usize, recv as usize);
    run(c, how, move |m| {
        let s = (send != IN_PLACE).then_some(send as *const u8);
        // SAFETY: MPI's contract for the buffers, until completion.
        unsafe { craw::reduce_scatter(&comm, s, recv as *mut u8, &counts, &dt, &op, m) }
    })
}

// ---------------------------------------------------------------- routines

/// Defines the blocking, nonblocking and persistent C routines of one
/// collective from one body: `$how` is `How::Block`, `How::Start(request)`
/// or `How::Init(request)`. With a `large` line and a second parameter
/// list it also defines the large-count forms (`MPI_X_c`, `MPI_IX_c`,
/// `MPI_X_init_c`) from the same body, whose count and displacement
/// helpers take any [`Int`].
macro_rules! collective {
    (
        $(#[doc = $doc:expr])*
        $name:ident / $pname:ident, $iname:ident / $piname:ident, $init:ident / $pinit:ident,
        ( $($arg:ident : $ty:ty),* ),
        large $lname:ident / $lpname:ident, $liname:ident / $lpiname:ident,
        $linit:ident / $lpinit:ident, ( $($larg:ident : $lty:ty),* ),
        $comm:ident, |$c:ident, $how:ident| $body:expr
    ) => {
        collective! {
            $(#[doc = $doc])*
            $name / $pname, $iname / $piname, $init / $pinit,
            ( $($arg: $ty),* ), $comm, |$c, $how| $body
        }
        collective! {
            $(#[doc = $doc])*
            ///
            /// Large-count form: `MPI_Count` counts, `MPI_Aint` displacements.
            $lname / $lpname, $liname / $lpiname, $linit / $lpinit,
            ( $($larg: $lty),* ), $comm, |$c, $how| $body
        }
    };
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

collective! {
    /// Blocks until every process of `comm` has called it.
    MPI_Barrier / PMPI_Barrier, MPI_Ibarrier / PMPI_Ibarrier, MPI_Barrier_init / PMPI_Barrier_init,
    (comm: Comm), comm, |c, how| barrier(c, how)
}

collective! {
    /// The root's buffer to every process.
    MPI_Bcast / PMPI_Bcast, MPI_Ibcast / PMPI_Ibcast, MPI_Bcast_init / PMPI_Bcast_init,
    (buffer: *mut c_void, count: c_int, datatype: Datatype, root: c_int, comm: Comm),
    large MPI_Bcast_c / PMPI_Bcast_c, MPI_Ibcast_c / PMPI_Ibcast_c,
    MPI_Bcast_init_c / PMPI_Bcast_init_c,
    (buffer: *mut c_void, count: Count, datatype: Datatype, root: c_int, comm: Comm),
    comm,
    |c, how| bcast(c, buffer, count, datatype, root, how)
}

collective! {
    /// The reduction of every process's buffer, in rank order, at the root.
    MPI_Reduce / PMPI_Reduce, MPI_Ireduce / PMPI_Ireduce, MPI_Reduce_init / PMPI_Reduce_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, root: c_int, comm: Comm),
    large MPI_Reduce_c / PMPI_Reduce_c, MPI_Ireduce_c / PMPI_Ireduce_c,
    MPI_Reduce_init_c / PMPI_Reduce_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, root: c_int, comm: Comm),
    comm, |c, how| reduce(c, sendbuf, recvbuf, count, datatype, op, Some(root), how)
}

collective! {
    /// The reduction of every process's buffer, in rank order, everywhere.
    MPI_Allreduce / PMPI_Allreduce, MPI_Iallreduce / PMPI_Iallreduce, MPI_Allreduce_init / PMPI_Allreduce_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm),
    large MPI_Allreduce_c / PMPI_Allreduce_c, MPI_Iallreduce_c / PMPI_Iallreduce_c,
    MPI_Allreduce_init_c / PMPI_Allreduce_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm),
    comm, |c, how| reduce(c, sendbuf, recvbuf, count, datatype, op, None, how)
}

collective! {
    /// The inclusive prefix reduction.
    MPI_Scan / PMPI_Scan, MPI_Iscan / PMPI_Iscan, MPI_Scan_init / PMPI_Scan_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm),
    large MPI_Scan_c / PMPI_Scan_c, MPI_Iscan_c / PMPI_Iscan_c,
    MPI_Scan_init_c / PMPI_Scan_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm),
    comm, |c, how| scan(c, sendbuf, recvbuf, count, datatype, op, false, how)
}

collective! {
    /// The exclusive prefix reduction (rank 0's buffer is left as it is).
    MPI_Exscan / PMPI_Exscan, MPI_Iexscan / PMPI_Iexscan, MPI_Exscan_init / PMPI_Exscan_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype, op: Op, comm: Comm),
    large MPI_Exscan_c / PMPI_Exscan_c, MPI_Iexscan_c / PMPI_Iexscan_c,
    MPI_Exscan_init_c / PMPI_Exscan_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm),
    comm, |c, how| scan(c, sendbuf, recvbuf, count, datatype, op, true, how)
}

collective! {
    /// Every process's buffer, in rank order, at the root.
    MPI_Gather / PMPI_Gather, MPI_Igather / PMPI_Igather, MPI_Gather_init / PMPI_Gather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm),
    large MPI_Gather_c / PMPI_Gather_c, MPI_Igather_c / PMPI_Igather_c,
    MPI_Gather_init_c / PMPI_Gather_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm),
    comm, |c, how| {
        let root_here = is_root(&c.comm, root);
        let send = send_side(sendbuf, sendcount, sendtype)?;
        let p = if root_here { Some(even(size_of(&c.comm), recvcount, recvtype)?) } else { None };
        gather(c, send, recvbuf, p, root, how)
    }
}

collective! {
    /// Pieces of different lengths at the root.
    MPI_Gatherv / PMPI_Gatherv, MPI_Igatherv / PMPI_Igatherv, MPI_Gatherv_init / PMPI_Gatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, root: c_int, comm: Comm),
    large MPI_Gatherv_c / PMPI_Gatherv_c, MPI_Igatherv_c / PMPI_Igatherv_c,
    MPI_Gatherv_init_c / PMPI_Gatherv_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, root: c_int, comm: Comm),
    comm, |c, how| {
        let root_here = is_root(&c.comm, root);
        let send = send_side(sendbuf, sendcount, sendtype)?;
        // SAFETY: at the root the arrays hold one entry per rank (MPI's contract).
        let p = if root_here { Some(unsafe { varying(size_of(&c.comm), recvcounts, displs, recvtype) }?) } else { None };
        gather(c, send, recvbuf, p, root, how)
    }
}

collective! {
    /// Piece `r` of the root's buffer to process `r`.
    MPI_Scatter / PMPI_Scatter, MPI_Iscatter / PMPI_Iscatter, MPI_Scatter_init / PMPI_Scatter_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm),
    large MPI_Scatter_c / PMPI_Scatter_c, MPI_Iscatter_c / PMPI_Iscatter_c,
    MPI_Scatter_init_c / PMPI_Scatter_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm),
    comm, |c, how| {
        let root_here = is_root(&c.comm, root);
        let p = if root_here { Some(even(size_of(&c.comm), sendcount, sendtype)?) } else { None };
        let recv = send_side(recvbuf, recvcount, recvtype)?;
        scatter(c, sendbuf, p, recv, root, how)
    }
}

collective! {
    /// Pieces of different lengths from the root.
    MPI_Scatterv / PMPI_Scatterv, MPI_Iscatterv / PMPI_Iscatterv, MPI_Scatterv_init / PMPI_Scatterv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Datatype,
     recvbuf: *mut c_void, recvcount: c_int, recvtype: Datatype, root: c_int, comm: Comm),
    large MPI_Scatterv_c / PMPI_Scatterv_c, MPI_Iscatterv_c / PMPI_Iscatterv_c,
    MPI_Scatterv_init_c / PMPI_Scatterv_init_c,
    (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint, sendtype: Datatype,
     recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm),
    comm, |c, how| {
        let root_here = is_root(&c.comm, root);
        // SAFETY: at the root the arrays hold one entry per rank (MPI's contract).
        let p = if root_here { Some(unsafe { varying(size_of(&c.comm), sendcounts, displs, sendtype) }?) } else { None };
        let recv = send_side(recvbuf, recvcount, recvtype)?;
        scatter(c, sendbuf, p, recv, root, how)
    }
}

collective! {
    /// Every process's buffer, in rank order, everywhere.
    MPI_Allgather / PMPI_Allgather, MPI_Iallgather / PMPI_Iallgather, MPI_Allgather_init / PMPI_Allgather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, comm: Comm),
    large MPI_Allgather_c / PMPI_Allgather_c, MPI_Iallgather_c / PMPI_Iallgather_c,
    MPI_Allgather_init_c / PMPI_Allgather_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let send = send_side(sendbuf, sendcount, sendtype)?;
        let p = even(size_of(&c.comm), recvcount, recvtype)?;
        allgather(c, send, recvbuf, p, how)
    }
}

collective! {
    /// Pieces of different lengths everywhere.
    MPI_Allgatherv / PMPI_Allgatherv, MPI_Iallgatherv / PMPI_Iallgatherv, MPI_Allgatherv_init / PMPI_Allgatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const c_int, displs: *const c_int, recvtype: Datatype, comm: Comm),
    large MPI_Allgatherv_c / PMPI_Allgatherv_c, MPI_Iallgatherv_c / PMPI_Iallgatherv_c,
    MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let send = send_side(sendbuf, sendcount, sendtype)?;
        // SAFETY: the arrays hold one entry per rank (MPI's contract).
        let p = unsafe { varying(size_of(&c.comm), recvcounts, displs, recvtype) }?;
        allgather(c, send, recvbuf, p, how)
    }
}

collective! {
    /// Piece `r` of every buffer to process `r`.
    MPI_Alltoall / PMPI_Alltoall, MPI_Ialltoall / PMPI_Ialltoall, MPI_Alltoall_init / PMPI_Alltoall_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: Datatype, comm: Comm),
    large MPI_Alltoall_c / PMPI_Alltoall_c, MPI_Ialltoall_c / PMPI_Ialltoall_c,
    MPI_Alltoall_init_c / PMPI_Alltoall_init_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let n = size_of(&c.comm);
        let s = if sendbuf as usize == IN_PLACE { None } else { Some(side_even(n, sendcount, sendtype)?) };
        let r = side_even(n, recvcount, recvtype)?;
        alltoall(c, sendbuf, s, recvbuf, r, how)
    }
}

collective! {
    /// Pieces of different lengths from every process to every process.
    MPI_Alltoallv / PMPI_Alltoallv, MPI_Ialltoallv / PMPI_Ialltoallv, MPI_Alltoallv_init / PMPI_Alltoallv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Datatype,
     recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Datatype, comm: Comm),
    large MPI_Alltoallv_c / PMPI_Alltoallv_c, MPI_Ialltoallv_c / PMPI_Ialltoallv_c,
    MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm),
    comm, |c, how| {
        let n = size_of(&c.comm);
        // SAFETY: the arrays hold one entry per rank (MPI's contract).
        let s = if sendbuf as usize == IN_PLACE { None } else { Some(unsafe { side_v(n, sendcounts, sdispls, sendtype) }?) };
        // SAFETY: as above.
        let r = unsafe { side_v(n, recvcounts, rdispls, recvtype) }?;
        alltoall(c, sendbuf, s, recvbuf, r, how)
    }
}

collective! {
    /// Pieces of different lengths and datatypes (byte displacements).
    MPI_Alltoallw / PMPI_Alltoallw, MPI_Ialltoallw / PMPI_Ialltoallw, MPI_Alltoallw_init / PMPI_Alltoallw_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Datatype,
     recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Datatype, comm: Comm),
    large MPI_Alltoallw_c / PMPI_Alltoallw_c, MPI_Ialltoallw_c / PMPI_Ialltoallw_c,
    MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm),
    comm, |c, how| {
        let n = size_of(&c.comm);
        // SAFETY: the arrays hold one entry per rank (MPI's contract).
        let s = if sendbuf as usize == IN_PLACE { None } else { Some(unsafe { side_w(n, sendcounts, sdispls, sendtypes) }?) };
        // SAFETY: as above.
        let r = unsafe { side_w(n, recvcounts, rdispls, recvtypes) }?;
        alltoall(c, sendbuf, s, recvbuf, r, how)
    }
}

collective! {
    /// Block `r` of the reduction to process `r` (`recvcounts[r]` elements).
    MPI_Reduce_scatter / PMPI_Reduce_scatter, MPI_Ireduce_scatter / PMPI_Ireduce_scatter, MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Datatype, op: Op, comm: Comm),
    large MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c, MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c,
    MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: Datatype, op: Op, comm: Comm),
    comm, |c, how| {
        // SAFETY: the array holds one count per rank (MPI's contract).
        let n = unsafe { counts(recvcounts, local_size_of(&c.comm), "receive counts") }?;
        reduce_scatter(c, sendbuf, recvbuf, n, datatype, op, how)
    }
}

collective! {
    /// Block `r` of the reduction to process `r` (`recvcount` elements each).
    MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block, MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Datatype, op: Op, comm: Comm),
    large MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c, MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c,
    MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Datatype, op: Op, comm: Comm),
    comm, |c, how| {
        let n = vec![count(recvcount, "receive count")?; local_size_of(&c.comm)];
        reduce_scatter(c, sendbuf, recvbuf, n, datatype, op, how)
    }
}

mpi_fn! {
    /// Starts a persistent request (of a persistent collective or
    /// point-to-point operation).
    fn MPI_Start / PMPI_Start(request: *mut Request) -> c_int {
        crate::errors::api_active("MPI_Start", || {
            let p = out(request, "request")?;
            // SAFETY: checked non-null; the caller's handle.
            start_one(unsafe { p.read() })
        })
    }

    /// Starts every request of the array (in order).
    fn MPI_Startall / PMPI_Startall(count: c_int, array_of_requests: *mut Request) -> c_int {
        crate::errors::api_active("MPI_Startall", || {
            let n = usize::try_from(count)
                .map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {count}")))?;
            if n == 0 {
                return Ok(());
            }
            let p = out(array_of_requests, "array_of_requests")?;
            // SAFETY: the caller's array of `count` handles (MPI's contract).
            let hs = unsafe { std::slice::from_raw_parts(p, n) };
            hs.iter().try_for_each(|&h| start_one(h))
        })
    }
}

fn start_one(h: Request) -> Res {
    if is_coll(h) {
        return start(h);
    }
    err(
        abi::ERR_REQUEST,
        format!(
            "{:#x} is not a persistent request (MPI_Start takes those of the `_init` routines)",
            h.0
        ),
    )
}

// ---------------------------------------------------------------- request arrays

/// What an array completion waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// Every request (`MPI_Waitall`, `MPI_Testall`).
    All,
    /// One request (`MPI_Waitany`, `MPI_Testany`).
    Any,
}

/// Completes `*p` if it has finished (or waits, with `wait`): a
/// collective's request here, any other through the point-to-point
/// routines. A null handle has finished.
///
/// # Safety
/// `p` is the caller's handle; `status` a status or `MPI_STATUS_IGNORE`.
unsafe fn complete_any(p: *mut Request, status: *mut MpiStatus, wait: bool) -> Res<bool> {
    // SAFETY: the caller's pointer.
    let h = unsafe { p.read() };
    if h == abi::REQUEST_NULL {
        // SAFETY: the caller's status pointer.
        unsafe { store_status(status, null_status()) };
        return Ok(true);
    }
    if is_coll(h) {
        // SAFETY: the caller's pointers.
        return unsafe { complete(p, status, wait) };
    }
    let mut flag: c_int = 1;
    let code = if wait {
        // SAFETY: the caller's pointers.
        unsafe { crate::request::PMPI_Wait(p, status) }
    } else {
        // SAFETY: the caller's pointers; `flag` is ours.
        unsafe { crate::request::PMPI_Test(p, &mut flag, status) }
    };
    if code != abi::SUCCESS {
        return err(code, "a request of the array failed (see its status)");
    }
    Ok(flag != 0)
}

/// Whether `h` has finished, without completing it.
fn finished(h: Request) -> Res<bool> {
    if h == abi::REQUEST_NULL {
        return Ok(true);
    }
    if is_coll(h) {
        return is_done(h);
    }
    let mut flag: c_int = 0;
    // SAFETY: `flag` is ours; a null status is MPI_STATUS_IGNORE.
    let code =
        unsafe { crate::request::PMPI_Request_get_status(h, &mut flag, std::ptr::null_mut()) };
    if code != abi::SUCCESS {
        return err(code, "a request of the array failed");
    }
    Ok(flag != 0)
}

/// `MPI_Waitall`/`Testall` (`Set::All`) and `MPI_Waitany`/`Testany`
/// (`Set::Any`) over an array that holds collectives' requests: whether
/// the set is complete, and for `Any` the index that completed. With
/// `All`, `status` is the array of statuses (or null); with `Any`, the
/// one status.
///
/// # Safety
/// MPI's contract for the arrays.
pub unsafe fn mixed(
    hs: &mut [Request],
    status: *mut MpiStatus,
    set: Set,
    wait: bool,
) -> Res<(bool, Option<usize>)> {
    let at = |i: usize| match set {
        Set::All if !status.is_null() => status.wrapping_add(i),
        Set::All => std::ptr::null_mut(),
        Set::Any => status,
    };
    if set == Set::All {
        if !wait
            && !hs
                .iter()
                .try_fold(true, |all, &h| Ok::<_, MpiError>(all && finished(h)?))?
        {
            return Ok((false, None));
        }
        for (i, h) in hs.iter_mut().enumerate() {
            // SAFETY: the caller's arrays.
            unsafe { complete_any(h, at(i), true) }?;
        }
        return Ok((true, None));
    }
    let mut backoff = shmheap::sync::futex::Backoff::new();
    loop {
        let mut all_null = true;
        for (i, h) in hs.iter_mut().enumerate() {
            if *h == abi::REQUEST_NULL || inactive(*h) {
                continue;
            }
            all_null = false;
            // SAFETY: the caller's arrays.
            if unsafe { complete_any(h, at(i), false) }? {
                return Ok((true, Some(i)));
            }
        }
        if all_null {
            // SAFETY: the caller's status pointer.
            unsafe { store_status(status, null_status()) };
            return Ok((true, None));
        }
        if !wait {
            return Ok((false, None));
        }
        backoff.snooze();
    }
}

/// `MPI_Waitsome` / `MPI_Testsome` over an array that holds collectives'
/// requests.
///
/// # Safety
/// MPI's contract for the arrays.
pub unsafe fn some(
    hs: &mut [Request],
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    wait: bool,
) -> Res {
    let mut backoff = shmheap::sync::futex::Backoff::new();
    loop {
        let (mut all_null, mut n) = (true, 0usize);
        for (i, h) in hs.iter_mut().enumerate() {
            if *h == abi::REQUEST_NULL || inactive(*h) {
                continue;
            }
            all_null = false;
            let st = if statuses.is_null() {
                statuses
            } else {
                statuses.wrapping_add(n)
            };
            // SAFETY: the caller's arrays.
            if unsafe { complete_any(h, st, false) }? {
                out(indices, "indices")?;
                // SAFETY: `indices` holds room for every request (MPI's
                // contract).
                unsafe { indices.add(n).write(i as c_int) };
                n += 1;
            }
        }
        if all_null || n > 0 || !wait {
            let v = if all_null { abi::UNDEFINED } else { n as c_int };
            // SAFETY: checked non-null by the caller.
            unsafe { outcount.write(v) };
            return Ok(());
        }
        backoff.snooze();
    }
}
