//! Requests of the C interface: the engine's requests ([`raw::Request`]) behind
//! `MPI_Request` handles, and the routines that complete them (wait, test,
//! their `all`/`any`/`some` forms, cancel, free) or look at them without
//! freeing them (`MPI_Request_get_status` and MPI 5.0's `_all`, `_any` and
//! `_some` forms).
//!
//! A request entry keeps what the operation needs until it completes: the
//! engine's request (borrowing the program's buffer, which MPI says stays
//! valid until completion), the packed copy of a non-dense send, the
//! staging buffer of a non-dense receive (unpacked into the program's
//! buffer when the receive completes), and the communicator (for the
//! status's source rank and for the error handler).
//!
//! Waiting marks the entries busy where they are (or takes them out of the
//! table, their slots reserved), so no lock is held while the engine makes
//! progress, and other threads keep using their own requests. Sets go to
//! the engine's request sets ([`raw::wait_any`], …) so one progress pass
//! serves every request of the set. A request freed with `MPI_Request_free` while pending is kept on a
//! side list and completed later (its receive still lands in the buffer).
//!
//! In C:
//! ```c
//! MPI_Request r[2];
//! MPI_Irecv(in, n, MPI_INT, left, 0, MPI_COMM_WORLD, &r[0]);
//! MPI_Isend(out, n, MPI_INT, right, 0, MPI_COMM_WORLD, &r[1]);
//! MPI_Waitall(2, r, MPI_STATUSES_IGNORE);   // r[0] == r[1] == MPI_REQUEST_NULL
//! ```

use crate::abi::{self, Count, Datatype, MpiStatus, Request};
use crate::coll;
use crate::comm::CommRef;
use crate::datatype::TypeRef;
use crate::errors::{api, api_active, err, out, put, MpiError, Res};
use crate::handles::{reserved, Miss, SlotTable, Vacant, KIND_REQUEST};
use hmpi_core::raw;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// An engine request that may move between threads.
pub struct EngineReq(pub raw::Request<'static>);

// SAFETY: a request is its endpoint (a process-wide static, `Sync`), an
// envelope in the node heap or a receive id of the VCI (both usable from
// any thread under the VCI's lock), and the buffer it borrows from the
// program (whose validity MPI leaves to the program until completion).
unsafe impl Send for EngineReq {}

/// A receive staged through a contiguous buffer: unpacked on completion.
pub struct Staged {
    pub tmp: Vec<u8>,
    pub dst: *mut u8,
    pub count: usize,
    pub ty: TypeRef,
}

impl Staged {
    /// Unpacks the `bytes` received.
    pub fn finish(self, bytes: u64) {
        let n = (bytes as usize).min(self.tmp.len());
        // SAFETY: `dst` holds `count` elements of `ty` (MPI's contract for
        // the receive buffer, valid until completion, which is now).
        unsafe { self.ty.unpack(&self.tmp[..n], self.dst, self.count) };
    }
}

/// An `OPI_Itake`: the engine fills `slot`; on completion the block goes to
/// the program's pointer variable `dst` (if it holds at most `max` bytes).
pub struct Taken {
    pub slot: Box<Option<opi::raw::OwnedBlock>>,
    pub dst: *mut *mut u8,
    pub max: usize,
}

/// What a request rarely needs beside its communicator (boxed, so that
/// the common request stays small).
pub enum Extra {
    /// A non-dense receive, unpacked into the program's buffer on
    /// completion.
    Staged(Staged),
    /// The packed data of a non-dense send, kept until the send completes.
    Packed(Box<[u8]>),
    /// Where an `OPI_Itake` puts its block.
    Taken(Taken),
}

/// What a request keeps beside the engine's request (two words: entries
/// move in and out of the request table; the rare parts are boxed).
pub struct Rest {
    pub comm: CommRef,
    pub extra: Option<Box<Extra>>,
}

impl Rest {
    /// Nothing but the communicator.
    #[inline]
    pub fn plain(comm: CommRef) -> Rest {
        Rest { comm, extra: None }
    }

    /// The communicator and, if any, what else the request needs.
    pub fn with(comm: CommRef, extra: Option<Extra>) -> Rest {
        Rest {
            comm,
            extra: extra.map(Box::new),
        }
    }

    /// Whether completing the request is more than dropping this: a
    /// receive to unpack or a block to hand over.
    #[inline]
    fn completes_into_program(&self) -> bool {
        matches!(
            self.extra.as_deref(),
            Some(Extra::Staged(_) | Extra::Taken(_))
        )
    }

    /// Unpacks a staged receive of `bytes` now (for a status asked for
    /// before the request is freed); the request keeps the rest.
    fn unpack_early(&mut self, bytes: u64) {
        if let Some(Extra::Staged(_)) = self.extra.as_deref() {
            if let Some(Extra::Staged(s)) = self.extra.take().map(|b| *b) {
                s.finish(bytes);
            }
        }
    }
}

// SAFETY: a staged receive's `dst` is the program's receive buffer and a
// take's `dst` its pointer variable, which MPI lets any thread complete
// the operation into; everything else is Send.
unsafe impl Send for Rest {}

impl Rest {
    /// Unpacks a staged receive, hands over a taken block, and translates
    /// the engine's status; the error message of a failed take.
    fn complete_msg(self, st: raw::Status) -> (MpiStatus, c_int, Option<String>) {
        let (mut s, mut code) = to_mpi_status(&st, &self.comm);
        let mut msg = None;
        match self.extra.map(|b| *b) {
            None | Some(Extra::Packed(_)) => {}
            Some(Extra::Staged(staged)) => staged.finish(st.count),
            Some(Extra::Taken(t)) => {
                let got = match &*t.slot {
                    Some(b) => crate::opi::accept(b, t.max),
                    None => Ok(std::ptr::null_mut()),
                };
                let p = match got {
                    Ok(p) => p,
                    Err((c, m)) => {
                        if code == abi::SUCCESS {
                            (code, s.error, msg) = (c, c, Some(m));
                        }
                        std::ptr::null_mut()
                    }
                };
                // SAFETY: the program's pointer variable, valid until the
                // take completes (OPI_Itake's contract), which is now.
                unsafe { t.dst.write(p) };
            }
        }
        (s, code, msg)
    }

    /// [`Rest::complete_msg`] without the message.
    fn complete(self, st: raw::Status) -> (MpiStatus, c_int) {
        let (s, code, _) = self.complete_msg(st);
        (s, code)
    }

    /// [`Rest::complete`], the status stored, and an error for a failure.
    ///
    /// # Safety
    /// `status`, if not null, is valid for a write of a status.
    unsafe fn finish_into(self, st: raw::Status, status: *mut MpiStatus) -> Res {
        let comm = self.comm.clone();
        let (s, code, msg) = self.complete_msg(st);
        // SAFETY: the caller's guarantee.
        unsafe { store_status(status, s) };
        if code != abi::SUCCESS {
            return Err(match msg {
                Some(m) => MpiError::new(code, m).on(&comm),
                None => status_error(&st, &comm),
            });
        }
        Ok(())
    }
}

/// One request. Field order is drop order: the engine's request goes
/// first, before the buffers it may still point into.
pub struct ReqEntry {
    pub req: EngineReq,
    pub rest: Rest,
}

/// An MPI status (and its error code) from a request's status, whose
/// source is a world rank: named in `comm` here.
#[inline]
pub fn to_mpi_status(st: &raw::Status, comm: &CommRef) -> (MpiStatus, c_int) {
    let s = status_from(st, comm_source(comm, st.source));
    (s, s.error)
}

/// The communicator rank of a request's source (a world rank):
/// `MPI_UNDEFINED` for a process outside the communicator.
#[inline(always)]
fn comm_source(comm: &CommRef, world: i32) -> c_int {
    comm.comm.rank_of_world(world).unwrap_or(abi::UNDEFINED)
}

/// An MPI status from a status whose source is a communicator rank
/// already (what `hmpi_core::raw`'s blocking calls return).
#[inline(always)]
pub fn comm_mpi_status(st: &raw::Status) -> MpiStatus {
    status_from(st, st.source)
}

/// The MPI status of a status whose sender is `source` in the
/// communicator (`MPI_PROC_NULL`'s: source `MPI_PROC_NULL`, tag
/// `MPI_ANY_TAG`).
#[inline(always)]
fn status_from(st: &raw::Status, source: c_int) -> MpiStatus {
    if st.source == raw::PROC_NULL {
        MpiStatus {
            source: abi::PROC_NULL,
            tag: abi::ANY_TAG,
            ..mpi_status(st, 0)
        }
    } else {
        mpi_status(st, source)
    }
}

/// The MPI status of an engine status whose sender is `source` in the
/// communicator.
#[inline(always)]
fn mpi_status(st: &raw::Status, source: c_int) -> MpiStatus {
    let code = match st.error {
        None => abi::SUCCESS,
        Some(raw::StatusError::Truncate { .. }) => abi::ERR_TRUNCATE,
        Some(raw::StatusError::Transfer { .. }) => abi::ERR_OTHER,
        Some(raw::StatusError::Alloc { .. }) => abi::ERR_NO_MEM,
        Some(raw::StatusError::ProcFailed { .. }) => abi::ERR_PROC_ABORTED,
    };
    MpiStatus {
        source,
        tag: st.tag,
        error: code,
        internal: [
            st.count as u32 as c_int,
            (st.count >> 32) as u32 as c_int,
            c_int::from(st.cancelled),
            0,
            0,
        ],
    }
}

/// The error of a failed request's status (source a world rank).
pub fn status_error(st: &raw::Status, comm: &CommRef) -> MpiError {
    status_error_from(st, comm, comm_source(comm, st.source))
}

/// The error of a failed status whose source is a communicator rank
/// already (a blocking call's).
pub fn comm_status_error(st: &raw::Status, comm: &CommRef) -> MpiError {
    status_error_from(st, comm, st.source)
}

fn status_error_from(st: &raw::Status, comm: &CommRef, source: c_int) -> MpiError {
    let msg = match st.error {
        Some(raw::StatusError::Truncate { message_len }) => format!(
            "message truncated: {message_len} bytes from rank {source} (tag {}) into a buffer of {}",
            st.tag, st.count
        ),
        Some(raw::StatusError::Transfer { errno }) => format!(
            "reading the message from rank {source} failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
        Some(raw::StatusError::Alloc { bytes }) => {
            format!("no memory for a block of {bytes} bytes from rank {source}")
        }
        Some(raw::StatusError::ProcFailed { rank }) => {
            let world = i32::try_from(rank).unwrap_or(i32::MAX);
            format!(
                "rank {} of the communicator (rank {world} of the job) ended without \
                 finalizing; this operation needs it",
                comm_source(comm, world)
            )
        }
        None => "no error".into(),
    };
    MpiError::new(status_from(st, source).error, msg).on(comm)
}

/// MPI's empty status: what completing `MPI_REQUEST_NULL` or an
/// inactive request gives (source `MPI_ANY_SOURCE`, tag `MPI_ANY_TAG`,
/// no error, no data).
pub fn null_status() -> MpiStatus {
    MpiStatus {
        source: abi::ANY_SOURCE,
        tag: abi::ANY_TAG,
        error: abi::SUCCESS,
        internal: [0; 5],
    }
}

/// The status of an operation on `MPI_PROC_NULL`, which completed at
/// once (source `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, no data).
pub fn empty_status() -> MpiStatus {
    MpiStatus {
        source: abi::PROC_NULL,
        tag: abi::ANY_TAG,
        error: abi::SUCCESS,
        internal: [0; 5],
    }
}

/// The status a status accessor reads (`MPI_ERR_ARG` for a null pointer).
///
/// # Safety
/// `p`, if not null, points to a status valid for the returned lifetime.
unsafe fn status_ref<'a>(p: *const MpiStatus) -> Res<&'a MpiStatus> {
    if p.is_null() {
        return err(abi::ERR_ARG, "status is a null pointer");
    }
    // SAFETY: non-null, and valid by the caller's guarantee.
    Ok(unsafe { &*p })
}

/// [`store_status`] of a request's status on `comm` (source a world
/// rank), converted only if the program wants it (its error code is the
/// caller's business).
///
/// # Safety
/// `p`, if not null, is valid for a write of a status.
#[inline]
pub unsafe fn store_engine_status(p: *mut MpiStatus, st: &raw::Status, comm: &CommRef) {
    if !p.is_null() {
        // SAFETY: the caller's guarantee; not null.
        unsafe { p.write(to_mpi_status(st, comm).0) };
    }
}

/// [`store_status`] of a blocking call's status (source a communicator
/// rank already), converted only if the program wants it.
///
/// # Safety
/// `p`, if not null, is valid for a write of a status.
#[inline(always)]
pub unsafe fn store_comm_status(p: *mut MpiStatus, st: &raw::Status) {
    if !p.is_null() {
        // SAFETY: the caller's guarantee; not null.
        unsafe { p.write(comm_mpi_status(st)) };
    }
}

/// Writes a status unless the program passed `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `p`, if not null, is valid for a write of a status.
#[inline]
pub unsafe fn store_status(p: *mut MpiStatus, s: MpiStatus) {
    if !p.is_null() {
        // SAFETY: the caller's guarantee.
        unsafe { p.write(s) };
    }
}

/// The engine's status out of a completion result (errors carry it).
pub fn engine_status(r: raw::EngineResult<raw::Status>) -> Res<raw::Status> {
    match r {
        Ok(s) => Ok(s),
        Err(raw::EngineError::Truncate { status, .. })
        | Err(raw::EngineError::Transfer { status, .. })
        | Err(raw::EngineError::Alloc { status, .. }) => Ok(status),
        Err(e) => Err(e.into()),
    }
}

/// The status of a finished request (as [`engine_status`] makes it from
/// its wait), looked up without waiting when the engine knows it.
#[inline]
fn finished_status(req: EngineReq) -> Res<raw::Status> {
    match req.0.finished() {
        Some(st) => Ok(st),
        None => engine_status(req.0.wait()),
    }
}

static REQUESTS: SlotTable<ReqEntry> = SlotTable::new(KIND_REQUEST);

/// The handle of every send that finished as it started (an immediate or
/// fast-box message, a send to `MPI_PROC_NULL`): it takes no slot, and
/// completing it only writes `MPI_REQUEST_NULL`. MPI leaves a send's
/// status undefined but for its error and cancelled flag (here: success,
/// not cancelled), so these sends can share one handle, as MPICH's
/// finished sends share one request object.
pub const SENT: Request = Request(reserved(KIND_REQUEST));

/// The top six bits of a [`received`] handle (a value no handle table,
/// predefined handle or user-space pointer has).
const RECEIVED_MARK: usize = 0b10_1101 << 58;
const RECEIVED_MASK: usize = 0b11_1111 << 58;
/// Bits of a received handle for the count, the tag and the source (the
/// payload, at the bottom), and for the check of the payload (above it).
const COUNT_BITS: u32 = 14;
const TAG_BITS: u32 = 20;
const SOURCE_BITS: u32 = 10;
const PAYLOAD_BITS: u32 = COUNT_BITS + TAG_BITS + SOURCE_BITS;
const CHECK_BITS: u32 = 58 - PAYLOAD_BITS;
const PAYLOAD_MASK: usize = (1 << PAYLOAD_BITS) - 1;
const _: () = assert!(CHECK_BITS >= 14);

/// The check of a received handle's payload: the top bits of a
/// multiplicative hash, which depend on every payload bit, flipped by a
/// constant so that the mark alone (all other bits clear) is not a valid
/// handle. A multiply, a shift and an exclusive or on the paths that make
/// and decode these handles.
#[inline(always)]
const fn received_check(payload: usize) -> usize {
    ((payload as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as usize >> (64 - CHECK_BITS)) ^ 0x2a5a
}

/// The handle of a receive on `MPI_COMM_WORLD` that finished as it was
/// posted (it matched a message that had arrived): its status is the
/// handle itself, so it takes no table slot, and completing it only
/// decodes it, as a [`SENT`] handle's completion does. `None` when the
/// status does not fit (an error, a count from 16 KiB, a tag from 2^20, a
/// source rank from 1024): such a receive gets a slot.
///
/// The handle carries a check of its status, so a value that merely
/// looks like one (the right top bits) is not taken for a finished
/// receive: it fails the check and is an invalid request (a random value
/// passes with probability 2^-(6 + CHECK_BITS)).
#[inline(always)]
pub fn received(st: &raw::Status) -> Option<Request> {
    let fits = st.error.is_none()
        && !st.cancelled
        && st.count < 1 << COUNT_BITS
        && (0..1 << SOURCE_BITS).contains(&st.source)
        && (0..1 << TAG_BITS).contains(&st.tag);
    let payload = (st.source as usize) << (COUNT_BITS + TAG_BITS)
        | (st.tag as usize) << COUNT_BITS
        | st.count as usize;
    fits.then_some(Request(
        RECEIVED_MARK | received_check(payload) << PAYLOAD_BITS | payload,
    ))
}

/// Whether `h` is a [`received`] handle: its mark and its check.
#[inline(always)]
fn is_received(h: usize) -> bool {
    h & RECEIVED_MASK == RECEIVED_MARK
        && (h & !RECEIVED_MASK) >> PAYLOAD_BITS == received_check(h & PAYLOAD_MASK)
}

/// The status of a request that finished without a table slot: a
/// [`received`] handle's (a world rank is the world communicator's rank),
/// or a [`SENT`] handle's empty one.
#[inline(always)]
fn finished_handle(h: Request) -> Option<raw::Status> {
    if is_received(h.0) {
        let field = |shift: u32, bits: u32| (h.0 >> shift) & ((1 << bits) - 1);
        return Some(raw::Status {
            source: field(COUNT_BITS + TAG_BITS, SOURCE_BITS) as i32,
            tag: field(COUNT_BITS, TAG_BITS) as i32,
            count: field(0, COUNT_BITS) as u64,
            error: None,
            cancelled: false,
        });
    }
    (h == SENT).then(raw::Status::empty)
}

/// Whether `h` has no table entry: `MPI_REQUEST_NULL`, or a request that
/// finished without one.
#[inline(always)]
fn entryless(h: usize) -> bool {
    h == abi::REQUEST_NULL.0 || h == SENT.0 || is_received(h)
}

/// The MPI status a request that finished without a table slot leaves.
#[inline(always)]
fn finished_mpi_status(st: &raw::Status) -> MpiStatus {
    comm_mpi_status(st)
}

/// The MPI status of a handle without a table entry: the status a request
/// that finished without a slot carries, or the empty one of
/// `MPI_REQUEST_NULL`.
#[inline(always)]
fn entryless_status(h: Request) -> MpiStatus {
    finished_handle(h).map_or_else(null_status, |st| finished_mpi_status(&st))
}

/// The communicator of requests that finished without a table slot: the
/// world (an error before `MPI_Init` and after `MPI_Finalize`).
fn finished_parts() -> Res<CommRef> {
    crate::comm::comm_ref(abi::COMM_WORLD)
}

/// The entry of a request that has finished with `st` on `comm` (what a
/// request that finished without a table slot stands for, on the world).
pub fn finished_entry(comm: CommRef, st: raw::Status) -> Res<ReqEntry> {
    Ok(ReqEntry {
        req: EngineReq(raw::finished_request(st)?),
        rest: Rest::plain(comm),
    })
}

/// Takes the entry of `h` out of the table, leaving its slot busy (see
/// [`SlotTable::checkout`]); a request that finished without a slot
/// ([`SENT`], [`received`]) gives an entry of its own, and checking it
/// back in or releasing it does nothing.
fn checkout(h: Request) -> Res<ReqEntry> {
    if let Some(st) = finished_handle(h) {
        return finished_entry(finished_parts()?, st);
    }
    REQUESTS.checkout(h.0).map_err(|m| miss(m, h))
}

/// Stores a request and returns its handle.
#[inline]
pub fn insert(e: ReqEntry) -> Res<Request> {
    poll_detached();
    match REQUESTS.insert(e) {
        Ok(h) => Ok(Request(h)),
        Err(e) => Err(table_full(e)),
    }
}

/// A table slot for a request the engine writes in place (see
/// [`raw::irecv_raw_or_in`] and [`raw::isend_or_in`]):
/// taken only when the engine asks for it (a request that waits), then
/// made live beside the rest of the entry. Dropped unpublished, the slot
/// goes back to the table.
#[derive(Default)]
pub struct Place(Option<Vacant<'static, ReqEntry>>);

impl Place {
    /// Takes a free slot and says where the engine writes its request;
    /// `None` if the table is full.
    #[inline(always)]
    pub fn take(&mut self) -> Option<*mut raw::Request<'static>> {
        poll_detached();
        let slot = self.0.insert(REQUESTS.vacant()?);
        let p = slot.as_ptr();
        // SAFETY: a field of the slot's storage; no reference is made.
        Some(unsafe { std::ptr::addr_of_mut!((*p).req.0) })
    }

    /// Puts `rest` beside the request the engine wrote into the slot and
    /// makes the entry live: its handle.
    ///
    /// # Safety
    ///
    /// The engine wrote a request where [`Place::take`] said.
    #[inline(always)]
    pub unsafe fn publish(self, rest: Rest) -> Request {
        let slot = self
            .0
            .expect("the engine wrote its request into the slot it took");
        let p = slot.as_ptr();
        // SAFETY: a field of the slot's storage, not yet written; with the
        // request written (the caller's promise) the entry is whole.
        unsafe {
            std::ptr::addr_of_mut!((*p).rest).write(rest);
            Request(slot.fill())
        }
    }
}

/// The error of a full request table, for an entry that did not fit: a
/// receive that has not matched is cancelled (no message is consumed),
/// then the entry is dropped, which waits for a send the engine still
/// uses.
#[cold]
fn table_full(mut e: ReqEntry) -> MpiError {
    e.req.0.cancel();
    drop(e);
    full()
}

/// The error of a full request table.
#[cold]
pub fn full() -> MpiError {
    MpiError::new(abi::ERR_NO_MEM, "too many pending requests")
}

fn miss(m: Miss, h: Request) -> MpiError {
    match m {
        Miss::Busy => MpiError::new(
            abi::ERR_REQUEST,
            format!("request {:#x} is being completed by another call", h.0),
        ),
        Miss::Unknown => MpiError::new(
            abi::ERR_REQUEST,
            format!(
                "{:#x} is not a request (completed, freed, or another kind of handle)",
                h.0
            ),
        ),
    }
}

// -------------------------------------------------------- freed requests

/// Requests freed while pending, and how many there are.
static DETACHED: Mutex<Vec<ReqEntry>> = Mutex::new(Vec::new());
static N_DETACHED: AtomicUsize = AtomicUsize::new(0);

fn finish_detached(e: ReqEntry) {
    let ReqEntry { req, rest } = e;
    if let Ok(st) = engine_status(req.0.wait()) {
        rest.complete(st);
    }
}

/// Completes what it can of the requests freed while pending (a load
/// when there are none, on every request's way in and out).
#[inline]
pub fn poll_detached() {
    // Relaxed: a hint; the list itself is under its lock.
    if N_DETACHED.load(Ordering::Relaxed) != 0 {
        poll_detached_list();
    }
}

#[cold]
fn poll_detached_list() {
    let Ok(mut list) = DETACHED.try_lock() else {
        return;
    };
    let mut i = 0;
    while i < list.len() {
        if matches!(list[i].req.0.test(), Ok(None)) {
            i += 1;
        } else {
            finish_detached(list.swap_remove(i));
        }
    }
    // Relaxed: as above.
    N_DETACHED.store(list.len(), Ordering::Relaxed);
}

/// Waits for every request freed while pending (from `MPI_Finalize`).
pub fn wait_detached() {
    let list = std::mem::take(&mut *DETACHED.lock().unwrap_or_else(|p| p.into_inner()));
    // Relaxed: as above.
    N_DETACHED.store(0, Ordering::Relaxed);
    list.into_iter().for_each(finish_detached);
}

// ---------------------------------------------------------------- sets

/// Reads `count` request handles.
///
/// # Safety
/// `reqs` is valid for `count` handles when not null.
unsafe fn handles<'a>(count: c_int, reqs: *mut Request) -> Res<&'a mut [Request]> {
    let n = usize::try_from(count)
        .map_err(|_| MpiError::new(abi::ERR_COUNT, format!("negative count {count}")))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if reqs.is_null() {
        return err(abi::ERR_ARG, "the request array is a null pointer");
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { std::slice::from_raw_parts_mut(reqs, n) })
}

/// A set of requests taken out of the table: the engine's requests (as
/// the engine's set functions want them) and the rest, by position;
/// `None` for `MPI_REQUEST_NULL`. Dropping it puts back what did not
/// complete and frees the slots of what did, under one lock.
struct Set<'h> {
    hs: &'h mut [Request],
    reqs: Vec<Option<raw::Request<'static>>>,
    rests: Vec<Option<Rest>>,
    /// Handles of the completed requests (their slots to free).
    done: Vec<usize>,
}

impl<'h> Set<'h> {
    fn checkout(hs: &'h mut [Request]) -> Res<Self> {
        poll_detached();
        // SAFETY: `Request` is a `repr(transparent)` usize.
        let raw: &[usize] = unsafe { std::slice::from_raw_parts(hs.as_ptr().cast(), hs.len()) };
        // A request that finished without a slot takes part like any
        // finished request.
        let parts = match raw.iter().any(|&h| finished_handle(Request(h)).is_some()) {
            true => Some(finished_parts()?),
            false => None,
        };
        let entries = REQUESTS
            .checkout_many(raw, entryless)
            .map_err(|(i, m)| miss(m, hs[i]))?;
        let mut reqs = Vec::with_capacity(hs.len());
        let mut rests = Vec::with_capacity(hs.len());
        for (e, &h) in entries.into_iter().zip(raw) {
            let e = match (e, &parts, finished_handle(Request(h))) {
                (None, Some(world), Some(st)) => Some(finished_entry(world.clone(), st)?),
                (e, _, _) => e,
            };
            let (r, rest) = e.map(|ReqEntry { req, rest }| (req.0, rest)).unzip();
            reqs.push(r);
            rests.push(rest);
        }
        Ok(Set {
            hs,
            reqs,
            rests,
            done: Vec::new(),
        })
    }

    fn all_null(&self) -> bool {
        self.rests.iter().all(Option::is_none)
    }

    /// Completes position `i` (its engine request already gone): its slot
    /// is freed when the set is dropped, the handle becomes
    /// `MPI_REQUEST_NULL`, a staged receive is unpacked.
    fn finish(&mut self, i: usize, st: raw::Status) -> (MpiStatus, c_int, Option<CommRef>) {
        match self.rests[i].take() {
            Some(rest) => {
                self.done.push(self.hs[i].0);
                self.hs[i] = abi::REQUEST_NULL;
                let comm = rest.comm.clone();
                let (s, code) = rest.complete(st);
                (s, code, Some(comm))
            }
            None => (null_status(), abi::SUCCESS, None),
        }
    }

    /// Takes position `i` out of the set as finished (for `Waitany` /
    /// `Testany`, which complete it after the set is settled).
    fn take_finished(&mut self, i: usize) -> Option<Rest> {
        let rest = self.rests[i].take();
        if rest.is_some() {
            self.done.push(self.hs[i].0);
            self.hs[i] = abi::REQUEST_NULL;
        }
        rest
    }
}

impl Drop for Set<'_> {
    fn drop(&mut self) {
        let mut reqs = std::mem::take(&mut self.reqs);
        let mut back = Vec::new();
        for (i, rest) in std::mem::take(&mut self.rests).into_iter().enumerate() {
            let Some(rest) = rest else { continue };
            match reqs.get_mut(i).and_then(Option::take) {
                Some(r) => back.push((
                    self.hs[i].0,
                    ReqEntry {
                        req: EngineReq(r),
                        rest,
                    },
                )),
                // Consumed by the engine's set function without a status.
                None => self.done.push(self.hs[i].0),
            }
        }
        REQUESTS.settle(back, &self.done);
    }
}

/// Writes status `i` of an array unless it is `MPI_STATUSES_IGNORE`.
///
/// # Safety
/// `statuses`, if not null, holds at least `i + 1` statuses.
unsafe fn store_at(statuses: *mut MpiStatus, i: usize, s: MpiStatus) {
    if !statuses.is_null() {
        // SAFETY: the caller's guarantee.
        unsafe { statuses.add(i).write(s) };
    }
}

fn in_status_error(failed: usize, comm: Option<CommRef>) -> MpiError {
    let e = MpiError::new(
        abi::ERR_IN_STATUS,
        format!("{failed} of the requests failed (see their statuses)"),
    );
    match comm {
        Some(c) => e.on(&c),
        None => e,
    }
}

/// Completes the `(position, status)` pairs of a set and writes them as
/// `MPI_Waitsome`/`MPI_Testsome` do.
///
/// # Safety
/// `indices` and `statuses` (unless ignored) hold `set.hs.len()` entries.
unsafe fn finish_some(
    set: &mut Set<'_>,
    done: Vec<(usize, raw::Status)>,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> Res {
    if !done.is_empty() {
        out(indices, "array_of_indices")?;
    }
    let (mut failed, mut on) = (0, None);
    for (k, &(i, st)) in done.iter().enumerate() {
        let (s, code, comm) = set.finish(i, st);
        if code != abi::SUCCESS {
            failed += 1;
            on = on.or(comm);
        }
        // SAFETY: the caller's guarantee.
        unsafe {
            indices.add(k).write(i as c_int);
            store_at(statuses, k, s);
        }
    }
    // SAFETY: checked non-null by the callers.
    unsafe { outcount.write(done.len() as c_int) };
    if failed > 0 {
        return Err(in_status_error(failed, on));
    }
    Ok(())
}

/// `MPI_Request_get_status`: whether `request` finished (then its status
/// is written), without freeing it.
///
/// # Safety
/// `flag` and `status` are null or valid for a write.
unsafe fn get_status(request: Request, flag: *mut c_int, status: *mut MpiStatus) -> Res {
    out(flag, "flag")?;
    if request == abi::REQUEST_NULL {
        // SAFETY: the caller's pointers.
        unsafe {
            flag.write(1);
            store_status(status, null_status());
        }
        return Ok(());
    }
    if let Some(g) = coll::greq_of(request) {
        // A generalized request's status is its query_fn's.
        // SAFETY: the caller's status pointer.
        let done = unsafe { g.peek(status) }?;
        // SAFETY: checked non-null.
        unsafe { flag.write(c_int::from(done)) };
        return Ok(());
    }
    if coll::is_coll(request) {
        let done = coll::is_done(request)?;
        // SAFETY: the caller's pointers.
        unsafe {
            flag.write(c_int::from(done));
            if done {
                store_status(status, null_status());
            }
        }
        return Ok(());
    }
    let ReqEntry { mut req, mut rest } = checkout(request)?;
    let r = req.0.test();
    let st = match r {
        Ok(None) => None,
        Ok(Some(st)) => Some(st),
        Err(e) => Some(engine_status(Err(e)).unwrap_or(raw::Status::empty())),
    };
    if let Some(st) = st {
        // The data lands now; the status stays for later calls.
        rest.unpack_early(st.count);
        let (s, _) = to_mpi_status(&st, &rest.comm);
        // SAFETY: the caller's status pointer.
        unsafe { store_status(status, s) };
    }
    REQUESTS.checkin(request.0, ReqEntry { req, rest });
    // SAFETY: checked non-null.
    unsafe { flag.write(c_int::from(st.is_some())) };
    Ok(())
}

/// Whether `h` finished, its status written (unless `status` is null),
/// without freeing it; a null or inactive request has finished, with the
/// empty status.
fn peek(h: Request, status: *mut MpiStatus) -> Res<bool> {
    if idle(h) {
        // SAFETY: the caller's status pointer (MPI's contract).
        unsafe { store_status(status, null_status()) };
        return Ok(true);
    }
    let mut flag: c_int = 0;
    // SAFETY: `flag` is ours; `status` the caller's.
    unsafe { get_status(h, &mut flag, status) }?;
    Ok(flag != 0)
}

/// `MPI_REQUEST_NULL` or an inactive persistent request: the `any` and
/// `some` forms skip it.
fn idle(h: Request) -> bool {
    h == abi::REQUEST_NULL || coll::inactive(h)
}

// ---------------------------------------------------------------- routines

mpi_fn! {
    /// Waits for a request; `*request` becomes `MPI_REQUEST_NULL`.
    fn MPI_Wait / PMPI_Wait(request: *mut Request, status: *mut MpiStatus) -> c_int {
        api_active("MPI_Wait", || {
            let p = out(request, "request")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if h == abi::REQUEST_NULL {
                // SAFETY: the caller's status pointer.
                unsafe { store_status(status, null_status()) };
                return Ok(());
            }
            if let Some(st) = finished_handle(h) {
                // SAFETY: the caller's pointers.
                unsafe {
                    p.write(abi::REQUEST_NULL);
                    store_status(status, finished_mpi_status(&st));
                }
                return Ok(());
            }
            if coll::is_coll(h) {
                // SAFETY: the caller's pointers.
                return unsafe { coll::complete(p, status, true) }.map(drop);
            }
            // The request is waited for where it is, its slot marked busy
            // (no lock is held meanwhile), and its status read there (see
            // `raw::Request::wait_in_place`); waiting frees the slot
            // whatever the outcome.
            let mut entry = REQUESTS.lock(h.0).map_err(|m| miss(m, h))?;
            // SAFETY: as above.
            unsafe { p.write(abi::REQUEST_NULL) };
            let e = entry.get_mut();
            let st = e.req.0.wait_in_place();
            // The common case: received whole (or sent), nothing to unpack
            // or hand over.
            if st.error.is_none() && !e.rest.completes_into_program() {
                // SAFETY: the caller's status pointer.
                unsafe { store_engine_status(status, st, &e.rest.comm) };
                entry.drop_here();
                return Ok(());
            }
            let st = *st;
            let ReqEntry { req, rest } = entry.take();
            drop(req);
            // SAFETY: the caller's status pointer.
            unsafe { rest.finish_into(st, status) }
        })
    }

    /// Whether a request has finished (then it is freed, as by `MPI_Wait`).
    fn MPI_Test / PMPI_Test(request: *mut Request, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        api_active("MPI_Test", || {
            let p = out(request, "request")?;
            out(flag, "flag")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if h == abi::REQUEST_NULL {
                // SAFETY: the caller's pointers.
                unsafe {
                    flag.write(1);
                    store_status(status, null_status());
                }
                return Ok(());
            }
            if let Some(st) = finished_handle(h) {
                // SAFETY: the caller's pointers.
                unsafe {
                    p.write(abi::REQUEST_NULL);
                    flag.write(1);
                    store_status(status, finished_mpi_status(&st));
                }
                return Ok(());
            }
            if coll::is_coll(h) {
                // SAFETY: the caller's pointers.
                let done = unsafe { coll::complete(p, status, false) }?;
                // SAFETY: checked non-null.
                unsafe { flag.write(c_int::from(done)) };
                return Ok(());
            }
            poll_detached();
            let ReqEntry { mut req, rest } = REQUESTS.checkout(h.0).map_err(|m| miss(m, h))?;
            let st = match req.0.test() {
                Ok(None) => {
                    REQUESTS.checkin(h.0, ReqEntry { req, rest });
                    // SAFETY: checked non-null.
                    unsafe { flag.write(0) };
                    return Ok(());
                }
                Ok(Some(st)) => Ok(st),
                Err(e) => engine_status(Err(e)),
            };
            drop(req);
            REQUESTS.release(h.0);
            // SAFETY: the caller's pointers.
            unsafe {
                p.write(abi::REQUEST_NULL);
                flag.write(1);
            }
            let st = st.map_err(|x| x.on(&rest.comm))?;
            // SAFETY: the caller's status pointer.
            unsafe { rest.finish_into(st, status) }
        })
    }

    /// Waits for every request of the array.
    fn MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut Request, statuses: *mut MpiStatus) -> c_int {
        api_active("MPI_Waitall", || {
            // SAFETY: `requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                return unsafe { coll::mixed(hs, statuses, coll::Set::All, true) }.map(drop);
            }
            poll_detached();
            // Most windows of small messages finished as they started: no
            // request has a table entry, and each handle holds its status.
            if hs.iter().all(|h| entryless(h.0)) {
                for (i, h) in hs.iter_mut().enumerate() {
                    if !statuses.is_null() {
                        // SAFETY: `statuses` holds `count` statuses (MPI's
                        // contract), and it is not null.
                        unsafe { statuses.add(i).write(entryless_status(*h)) };
                    }
                    *h = abi::REQUEST_NULL;
                }
                return Ok(());
            }
            // SAFETY: `Request` is a `repr(transparent)` usize; `raw` is
            // used before `hs` is written, and not after.
            let raw: &[usize] = unsafe { std::slice::from_raw_parts(hs.as_ptr().cast(), hs.len()) };
            // All or nothing: every entry is marked busy where it is (a
            // null handle and a request that finished without a slot have
            // none).
            let mut busy = REQUESTS
                .lock_many(raw, entryless)
                .map_err(|(i, m)| miss(m, hs[i]))?;
            {
                // The engine waits for them together, in place (in order,
                // collecting the finished ones after each under one lock).
                let mut reqs: Vec<&mut raw::Request<'static>> = Vec::with_capacity(busy.len());
                reqs.extend(busy.iter_mut().flatten().map(|b| &mut b.get_mut().req.0));
                raw::wait_all_in_place(&mut reqs);
            }
            let (mut failed, mut on, mut other) = (0, None, None);
            let mut freed = REQUESTS.free_batch();
            for (i, b) in busy.into_iter().enumerate() {
                // Each request is finished: its status is there; its slot
                // is freed as it leaves.
                let (s, code, comm) = match b {
                    None => {
                        if !statuses.is_null() {
                            // SAFETY: as for `store_at` below.
                            unsafe { statuses.add(i).write(entryless_status(hs[i])) };
                        }
                        hs[i] = abi::REQUEST_NULL;
                        continue;
                    }
                    Some(mut b) => {
                        hs[i] = abi::REQUEST_NULL;
                        // The common case, decided in place: finished
                        // without error, nothing to unpack or hand over,
                        // statuses ignored; the entry is dropped where it is.
                        let e = b.get_mut();
                        if statuses.is_null()
                            && !e.rest.completes_into_program()
                            && e.req.0.finished().is_some_and(|st| st.error.is_none())
                        {
                            b.drop_into(&mut freed);
                            continue;
                        }
                        let ReqEntry { req, rest } = b.take_into(&mut freed);
                        let comm = rest.comm.clone();
                        match finished_status(req) {
                            Ok(st) => {
                                let (s, code) = rest.complete(st);
                                (s, code, Some(comm))
                            }
                            Err(e) => {
                                other.get_or_insert(e);
                                (empty_status(), abi::ERR_INTERN, Some(comm))
                            }
                        }
                    }
                };
                if code != abi::SUCCESS {
                    failed += 1;
                    on = on.or(comm);
                }
                // SAFETY: `statuses` holds `count` statuses (MPI's contract).
                unsafe { store_at(statuses, i, s) };
            }
            if let Some(e) = other {
                return Err(e);
            }
            if failed > 0 {
                return Err(in_status_error(failed, on));
            }
            Ok(())
        })
    }

    /// Waits for one request of the array; its index (`MPI_UNDEFINED` if
    /// every entry is `MPI_REQUEST_NULL`).
    fn MPI_Waitany / PMPI_Waitany(count: c_int, requests: *mut Request, index: *mut c_int, status: *mut MpiStatus) -> c_int {
        api_active("MPI_Waitany", || {
            out(index, "index")?;
            // SAFETY: `requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                let (_, first) = unsafe { coll::mixed(hs, status, coll::Set::Any, true) }?;
                // SAFETY: checked non-null.
                unsafe { index.write(first.map_or(abi::UNDEFINED, |i| i as c_int)) };
                return Ok(());
            }
            let mut set = Set::checkout(hs)?;
            let Some((i, st)) = raw::wait_any(&mut set.reqs) else {
                // SAFETY: the caller's pointers.
                unsafe {
                    index.write(abi::UNDEFINED);
                    store_status(status, null_status());
                }
                return Ok(());
            };
            let rest = set.take_finished(i);
            drop(set);
            // SAFETY: checked non-null.
            unsafe { index.write(i as c_int) };
            match rest {
                // SAFETY: the caller's status pointer.
                Some(rest) => unsafe { rest.finish_into(st, status) },
                None => Ok(()),
            }
        })
    }

    /// Waits until some requests finished; their indices.
    fn MPI_Waitsome / PMPI_Waitsome(
        incount: c_int,
        requests: *mut Request,
        outcount: *mut c_int,
        indices: *mut c_int,
        statuses: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Waitsome", || {
            out(outcount, "outcount")?;
            // SAFETY: `requests` holds `incount` handles (MPI's contract).
            let hs = unsafe { handles(incount, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                return unsafe { coll::some(hs, outcount, indices, statuses, true) };
            }
            let mut set = Set::checkout(hs)?;
            if set.all_null() {
                // SAFETY: checked non-null.
                unsafe { outcount.write(abi::UNDEFINED) };
                return Ok(());
            }
            let done = raw::wait_some(&mut set.reqs);
            // SAFETY: MPI's contract for the arrays.
            unsafe { finish_some(&mut set, done, outcount, indices, statuses) }
        })
    }

    /// Whether every request finished (then all are freed).
    fn MPI_Testall / PMPI_Testall(count: c_int, requests: *mut Request, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        api_active("MPI_Testall", || {
            out(flag, "flag")?;
            // SAFETY: `requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                let (all, _) = unsafe { coll::mixed(hs, statuses, coll::Set::All, false) }?;
                // SAFETY: checked non-null.
                unsafe { flag.write(c_int::from(all)) };
                return Ok(());
            }
            let mut set = Set::checkout(hs)?;
            let sts = match raw::test_all(&mut set.reqs) {
                Ok(None) => {
                    // SAFETY: checked non-null.
                    unsafe { flag.write(0) };
                    return Ok(());
                }
                Ok(Some(s)) | Err(raw::EngineError::InStatus(s)) => s,
                Err(e) => return Err(e.into()),
            };
            // SAFETY: checked non-null.
            unsafe { flag.write(1) };
            let (mut failed, mut on) = (0, None);
            for (i, st) in sts.into_iter().enumerate() {
                let (s, code, comm) = set.finish(i, st);
                if code != abi::SUCCESS {
                    failed += 1;
                    on = on.or(comm);
                }
                // SAFETY: `statuses` holds `count` statuses (MPI's contract).
                unsafe { store_at(statuses, i, s) };
            }
            if failed > 0 {
                return Err(in_status_error(failed, on));
            }
            Ok(())
        })
    }

    /// Whether one request finished (then it is freed); its index.
    fn MPI_Testany / PMPI_Testany(
        count: c_int,
        requests: *mut Request,
        index: *mut c_int,
        flag: *mut c_int,
        status: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Testany", || {
            out(index, "index")?;
            out(flag, "flag")?;
            // SAFETY: `requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                let (done, first) = unsafe { coll::mixed(hs, status, coll::Set::Any, false) }?;
                // SAFETY: checked non-null.
                unsafe {
                    index.write(first.map_or(abi::UNDEFINED, |i| i as c_int));
                    flag.write(c_int::from(done));
                }
                return Ok(());
            }
            let mut set = Set::checkout(hs)?;
            let all_null = set.all_null();
            let Some((i, st)) = raw::test_any(&mut set.reqs) else {
                // SAFETY: the caller's pointers.
                unsafe {
                    index.write(abi::UNDEFINED);
                    flag.write(c_int::from(all_null));
                    if all_null {
                        store_status(status, null_status());
                    }
                }
                return Ok(());
            };
            let rest = set.take_finished(i);
            drop(set);
            // SAFETY: checked non-null.
            unsafe {
                index.write(i as c_int);
                flag.write(1);
            }
            match rest {
                // SAFETY: the caller's status pointer.
                Some(rest) => unsafe { rest.finish_into(st, status) },
                None => Ok(()),
            }
        })
    }

    /// The requests that finished (they are freed); their indices.
    fn MPI_Testsome / PMPI_Testsome(
        incount: c_int,
        requests: *mut Request,
        outcount: *mut c_int,
        indices: *mut c_int,
        statuses: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Testsome", || {
            out(outcount, "outcount")?;
            // SAFETY: `requests` holds `incount` handles (MPI's contract).
            let hs = unsafe { handles(incount, requests) }?;
            if hs.iter().any(|&h| coll::is_coll(h)) {
                // SAFETY: MPI's contract for the arrays.
                return unsafe { coll::some(hs, outcount, indices, statuses, false) };
            }
            let mut set = Set::checkout(hs)?;
            if set.all_null() {
                // SAFETY: checked non-null.
                unsafe { outcount.write(abi::UNDEFINED) };
                return Ok(());
            }
            let done = raw::test_some(&mut set.reqs);
            // SAFETY: MPI's contract for the arrays.
            unsafe { finish_some(&mut set, done, outcount, indices, statuses) }
        })
    }

    /// Whether a request finished, without freeing it.
    fn MPI_Request_get_status / PMPI_Request_get_status(request: Request, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: the caller's pointers.
        api_active("MPI_Request_get_status", || unsafe { get_status(request, flag, status) })
    }

    /// Whether every request of the array finished (then their statuses),
    /// freeing none (MPI 5.0).
    fn MPI_Request_get_status_all / PMPI_Request_get_status_all(
        count: c_int,
        array_of_requests: *const Request,
        flag: *mut c_int,
        array_of_statuses: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Request_get_status_all", || {
            out(flag, "flag")?;
            // SAFETY: `array_of_requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, array_of_requests.cast_mut()) }?;
            for &h in hs.iter() {
                if !peek(h, std::ptr::null_mut())? {
                    // SAFETY: checked non-null.
                    unsafe { flag.write(0) };
                    return Ok(());
                }
            }
            for (i, &h) in hs.iter().enumerate() {
                let at = if array_of_statuses.is_null() {
                    std::ptr::null_mut()
                } else {
                    // SAFETY: the array holds `count` statuses (MPI's contract).
                    unsafe { array_of_statuses.add(i) }
                };
                peek(h, at)?;
            }
            // SAFETY: checked non-null.
            unsafe { flag.write(1) };
            Ok(())
        })
    }

    /// Whether one request of the array finished (its index and status),
    /// freeing none (MPI 5.0); `MPI_UNDEFINED` and a true flag when every
    /// entry is null or inactive.
    fn MPI_Request_get_status_any / PMPI_Request_get_status_any(
        count: c_int,
        array_of_requests: *const Request,
        indx: *mut c_int,
        flag: *mut c_int,
        status: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Request_get_status_any", || {
            out(indx, "index")?;
            out(flag, "flag")?;
            // SAFETY: `array_of_requests` holds `count` handles (MPI's contract).
            let hs = unsafe { handles(count, array_of_requests.cast_mut()) }?;
            let mut all_null = true;
            for (i, &h) in hs.iter().enumerate() {
                if idle(h) {
                    continue;
                }
                all_null = false;
                if peek(h, status)? {
                    // SAFETY: checked non-null.
                    unsafe {
                        indx.write(i as c_int);
                        flag.write(1);
                    }
                    return Ok(());
                }
            }
            // SAFETY: checked non-null; the caller's status pointer.
            unsafe {
                indx.write(abi::UNDEFINED);
                flag.write(c_int::from(all_null));
                if all_null {
                    store_status(status, null_status());
                }
            }
            Ok(())
        })
    }

    /// The requests of the array that finished (their indices and
    /// statuses), freeing none (MPI 5.0); `MPI_UNDEFINED` when every entry
    /// is null or inactive.
    fn MPI_Request_get_status_some / PMPI_Request_get_status_some(
        incount: c_int,
        array_of_requests: *const Request,
        outcount: *mut c_int,
        array_of_indices: *mut c_int,
        array_of_statuses: *mut MpiStatus,
    ) -> c_int {
        api_active("MPI_Request_get_status_some", || {
            out(outcount, "outcount")?;
            // SAFETY: `array_of_requests` holds `incount` handles (MPI's contract).
            let hs = unsafe { handles(incount, array_of_requests.cast_mut()) }?;
            let (mut all_null, mut n) = (true, 0usize);
            for (i, &h) in hs.iter().enumerate() {
                if idle(h) {
                    continue;
                }
                all_null = false;
                let at = if array_of_statuses.is_null() {
                    std::ptr::null_mut()
                } else {
                    // SAFETY: the array holds room for every request (MPI's
                    // contract).
                    unsafe { array_of_statuses.add(n) }
                };
                if peek(h, at)? {
                    out(array_of_indices, "array_of_indices")?;
                    // SAFETY: as above.
                    unsafe { array_of_indices.add(n).write(i as c_int) };
                    n += 1;
                }
            }
            let v = if all_null { abi::UNDEFINED } else { n as c_int };
            // SAFETY: checked non-null.
            unsafe { outcount.write(v) };
            Ok(())
        })
    }

    /// Cancels a receive that has not matched yet (a send is not
    /// cancelled); the request must still be completed.
    fn MPI_Cancel / PMPI_Cancel(request: *mut Request) -> c_int {
        api_active("MPI_Cancel", || {
            let p = out(request, "request")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if coll::is_coll(h) {
                return coll::cancel(h);
            }
            let ReqEntry { mut req, rest } = checkout(h)?;
            req.0.cancel();
            REQUESTS.checkin(h.0, ReqEntry { req, rest });
            Ok(())
        })
    }

    /// Frees a request; a pending one completes later on its own.
    fn MPI_Request_free / PMPI_Request_free(request: *mut Request) -> c_int {
        api_active("MPI_Request_free", || {
            let p = out(request, "request")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if coll::is_coll(h) {
                // SAFETY: checked non-null; the caller's handle.
                return unsafe { coll::free(p) };
            }
            let mut e = checkout(h)?;
            REQUESTS.release(h.0);
            // SAFETY: as above.
            unsafe { p.write(abi::REQUEST_NULL) };
            if matches!(e.req.0.test(), Ok(None)) {
                DETACHED.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                // Relaxed: a hint (see poll_detached).
                N_DETACHED.fetch_add(1, Ordering::Relaxed);
            } else {
                finish_detached(e);
            }
            Ok(())
        })
    }

    /// Whether the request of a status was cancelled.
    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
        api("MPI_Test_cancelled", || {
            if status.is_null() {
                return err(abi::ERR_ARG, "status is a null pointer");
            }
            // SAFETY: checked non-null; the caller's status.
            let c = unsafe { (*status).internal[2] };
            // SAFETY: the caller's int pointer.
            unsafe { put(flag, "flag", c_int::from(c != 0)) }
        })
    }

    /// The source field of a status.
    fn MPI_Status_get_source / PMPI_Status_get_source(status: *const MpiStatus, source: *mut c_int) -> c_int {
        api("MPI_Status_get_source", || {
            // SAFETY: the caller's status, checked non-null.
            let v = unsafe { status_ref(status)?.source };
            // SAFETY: the caller's int pointer.
            unsafe { put(source, "source", v) }
        })
    }

    /// The tag field of a status.
    fn MPI_Status_get_tag / PMPI_Status_get_tag(status: *const MpiStatus, tag: *mut c_int) -> c_int {
        api("MPI_Status_get_tag", || {
            // SAFETY: the caller's status, checked non-null.
            let v = unsafe { status_ref(status)?.tag };
            // SAFETY: the caller's int pointer.
            unsafe { put(tag, "tag", v) }
        })
    }

    /// The error field of a status.
    fn MPI_Status_get_error / PMPI_Status_get_error(status: *const MpiStatus, error: *mut c_int) -> c_int {
        api("MPI_Status_get_error", || {
            // SAFETY: the caller's status, checked non-null.
            let v = unsafe { status_ref(status)?.error };
            // SAFETY: the caller's int pointer.
            unsafe { put(error, "error", v) }
        })
    }

    /// Sets the source field of a status.
    fn MPI_Status_set_source / PMPI_Status_set_source(status: *mut MpiStatus, source: c_int) -> c_int {
        api("MPI_Status_set_source", || {
            let p = out(status, "status")?;
            // SAFETY: checked non-null; the caller's status.
            unsafe { (*p).source = source };
            Ok(())
        })
    }

    /// Sets the tag field of a status.
    fn MPI_Status_set_tag / PMPI_Status_set_tag(status: *mut MpiStatus, tag: c_int) -> c_int {
        api("MPI_Status_set_tag", || {
            let p = out(status, "status")?;
            // SAFETY: checked non-null; the caller's status.
            unsafe { (*p).tag = tag };
            Ok(())
        })
    }

    /// Sets the error field of a status.
    fn MPI_Status_set_error / PMPI_Status_set_error(status: *mut MpiStatus, error: c_int) -> c_int {
        api("MPI_Status_set_error", || {
            let p = out(status, "status")?;
            // SAFETY: checked non-null; the caller's status.
            unsafe { (*p).error = error };
            Ok(())
        })
    }

    /// Marks a status cancelled or not (what `MPI_Test_cancelled` reads).
    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
        api("MPI_Status_set_cancelled", || {
            let p = out(status, "status")?;
            // SAFETY: checked non-null; the caller's status.
            unsafe { (*p).internal[2] = c_int::from(flag != 0) };
            Ok(())
        })
    }

    /// Basic elements of `datatype` in a status's message
    /// (`MPI_UNDEFINED` if they are not whole, or do not fit an `int`).
    fn MPI_Get_elements / PMPI_Get_elements(status: *const MpiStatus, datatype: Datatype, count: *mut c_int) -> c_int {
        // SAFETY: the caller's pointers.
        api("MPI_Get_elements", || unsafe { get_elements(status, datatype, count) })
    }

    /// [`MPI_Get_elements`] as an `MPI_Count`.
    fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MpiStatus, datatype: Datatype, count: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        api("MPI_Get_elements_c", || unsafe { get_elements(status, datatype, count) })
    }

    /// [`MPI_Get_elements_c`] by its MPI 3 name.
    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MpiStatus, datatype: Datatype, count: *mut Count) -> c_int {
        // SAFETY: the caller's pointers.
        api("MPI_Get_elements_x", || unsafe { get_elements(status, datatype, count) })
    }

    /// Sets a status's length to `count` basic elements of `datatype`
    /// (what `MPI_Get_elements` and `MPI_Get_count` then read).
    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MpiStatus, datatype: Datatype, count: c_int) -> c_int {
        // SAFETY: the caller's status pointer.
        api("MPI_Status_set_elements", || unsafe { set_elements(status, datatype, count) })
    }

    /// [`MPI_Status_set_elements`] with a large count.
    fn MPI_Status_set_elements_c / PMPI_Status_set_elements_c(status: *mut MpiStatus, datatype: Datatype, count: Count) -> c_int {
        // SAFETY: the caller's status pointer.
        api("MPI_Status_set_elements_c", || unsafe { set_elements(status, datatype, count) })
    }

    /// [`MPI_Status_set_elements_c`] by its MPI 3 name.
    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MpiStatus, datatype: Datatype, count: Count) -> c_int {
        // SAFETY: the caller's status pointer.
        api("MPI_Status_set_elements_x", || unsafe { set_elements(status, datatype, count) })
    }
}

/// Bytes of one basic element of `datatype`: `None` for a type without
/// data; `MPI_ERR_TYPE` for one that mixes basic types (a struct of an
/// `int` and a `double`), whose elements this library does not count.
fn basic_size(datatype: Datatype) -> Res<Option<usize>> {
    let ty = crate::datatype::type_any(datatype)?;
    if ty.size == 0 {
        return Ok(None);
    }
    match ty.ty.basic_type() {
        Some(b) => Ok(Some(hmpi_core::datatype::Datatype::basic(b).size())),
        None => err(
            abi::ERR_TYPE,
            "the datatype mixes basic types: its basic elements are not counted",
        ),
    }
}

/// The byte length a status holds.
fn status_bytes(st: &MpiStatus) -> u64 {
    u64::from(st.internal[0] as u32) | u64::from(st.internal[1] as u32) << 32
}

/// An output count of type `I` (`int` or `MPI_Count`): `MPI_UNDEFINED`
/// when the value is undefined or does not fit.
trait OutCount: Sized {
    fn from_elements(n: Option<u64>) -> Self;
}

impl OutCount for c_int {
    fn from_elements(n: Option<u64>) -> Self {
        n.and_then(|n| c_int::try_from(n).ok())
            .unwrap_or(abi::UNDEFINED)
    }
}

impl OutCount for Count {
    fn from_elements(n: Option<u64>) -> Self {
        n.and_then(|n| Count::try_from(n).ok())
            .unwrap_or(Count::from(abi::UNDEFINED))
    }
}

/// `MPI_Get_elements` for any output count type.
///
/// # Safety
/// `status` points to a status or is null (an error); `count` is valid for
/// a write or null (an error).
unsafe fn get_elements<O: OutCount>(
    status: *const MpiStatus,
    datatype: Datatype,
    count: *mut O,
) -> Res {
    if status.is_null() {
        return err(
            abi::ERR_ARG,
            "status is a null pointer (MPI_STATUS_IGNORE?)",
        );
    }
    let size = basic_size(datatype)?;
    // SAFETY: checked non-null; the caller's status.
    let bytes = status_bytes(unsafe { &*status });
    let n = match size {
        None => Some(0),
        Some(b) => (bytes % b as u64 == 0).then_some(bytes / b as u64),
    };
    // SAFETY: the caller's pointer (checked by `put`).
    unsafe { put(count, "count", O::from_elements(n)) }
}

/// `MPI_Status_set_elements` for any count type.
///
/// # Safety
/// `status` is valid for a write or null (an error).
unsafe fn set_elements<I: crate::coll_large::Int>(
    status: *mut MpiStatus,
    datatype: Datatype,
    count: I,
) -> Res {
    let p = out(status, "status")?;
    let n = count.to_count("count")?;
    let bytes = match basic_size(datatype)? {
        None => 0,
        Some(b) => n.checked_mul(b).ok_or_else(|| {
            MpiError::new(
                abi::ERR_COUNT,
                format!("{n} elements of {b} bytes overflow a status"),
            )
        })? as u64,
    };
    // SAFETY: checked non-null; the caller's status.
    unsafe {
        (*p).internal[0] = bytes as u32 as c_int;
        (*p).internal[1] = (bytes >> 32) as u32 as c_int;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(source: i32, tag: i32, count: u64) -> raw::Status {
        raw::Status {
            source,
            tag,
            count,
            error: None,
            cancelled: false,
        }
    }

    #[test]
    fn a_received_handle_carries_its_status() {
        for (source, tag, count) in [(0, 0, 0), (3, 77, 4096), (1023, (1 << 20) - 1, 16383)] {
            let h = received(&status(source, tag, count)).expect("fits");
            assert!(entryless(h.0));
            let st = finished_handle(h).expect("decodes");
            assert_eq!((st.source, st.tag, st.count), (source, tag, count));
        }
        // What does not fit gets a table slot.
        assert!(received(&status(1024, 0, 0)).is_none());
        assert!(received(&status(0, 1 << 20, 0)).is_none());
        assert!(received(&status(0, 0, 1 << 14)).is_none());
    }

    #[test]
    fn a_value_with_the_mark_alone_is_not_a_finished_receive() {
        // The mark alone, and values that flip one bit of a genuine
        // handle: none decodes.
        assert!(finished_handle(Request(RECEIVED_MARK)).is_none());
        let good = received(&status(5, 9, 100)).expect("fits").0;
        for bit in 0..58 {
            let forged = good ^ (1 << bit);
            assert!(finished_handle(Request(forged)).is_none(), "bit {bit}");
            assert!(!entryless(forged), "bit {bit}");
        }
        let mut accepted = 0;
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..100_000 {
            // xorshift: garbage below the mark.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let h = RECEIVED_MARK | (x as usize & !RECEIVED_MASK);
            accepted += usize::from(finished_handle(Request(h)).is_some());
        }
        // 2^-14 of random payloads pass the check: a handful at most.
        assert!(
            accepted <= 30,
            "{accepted} of 100000 forged handles accepted"
        );
    }
}
