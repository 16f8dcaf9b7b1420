//! Point-to-point routines of the C interface: blocking, nonblocking,
//! synchronous and ready sends, receives, send-receive (also nonblocking:
//! `MPI_Isendrecv`, one request over a send and a receive), probes and
//! matched probes, `MPI_Get_count`, and the large-count `_c` form of each
//! (one generic body per routine over the count type, `int` or
//! `MPI_Count`: a count that does not fit is `MPI_ERR_COUNT`).
//!
//! Each call checks what is C's alone (count, datatype, buffer: each a
//! clear error with its MPI class), turns MPI's wildcards into the
//! runtime's, and calls `hmpi_core::raw`, which checks ranks and tags,
//! routes the peer and calls the engine on the communicator's context;
//! blocking calls get their statuses back in communicator ranks. A dense
//! datatype's data goes
//! to the engine straight from the program's buffer, so a buffer that
//! `malloc` placed in the shared heap is copied once, by the receiver;
//! other datatypes are packed (see [`crate::datatype`]).
//!
//! Ready mode (`MPI_Rsend`) is the standard send: correct whenever the
//! program's ready precondition holds.
//!
//! In C:
//! ```c
//! MPI_Status st;
//! int n;
//! MPI_Recv(buf, 100, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
//! MPI_Get_count(&st, MPI_INT, &n);   // elements received
//! ```

use crate::abi::{self, Comm, Count, Datatype, Message, MpiStatus, Request};
use crate::coll_large::Int;
use crate::comm::{source_arg, tag_arg, CommEntry, CommRef};
use crate::datatype::{type_any, type_ref, TypeInfo, TypeRef};
use crate::errors::{api, api_comm, err, out, put, MpiError, Res};
use crate::handles::{Table, KIND_MESSAGE};
use crate::request::{
    comm_mpi_status, comm_status_error, empty_status, finished_entry, full, insert, received,
    store_comm_status, store_status, EngineReq, Extra, Place, ReqEntry, Rest, Staged, SENT,
};
use hmpi_core::raw;
use hmpi_core::SimpleCommunicator;
use std::ffi::{c_int, c_void};

/// Whether a call moves no data to or from `MPI_PROC_NULL` with
/// `MPI_DATATYPE_NULL`: a datatype that is never used, which MPI accepts.
#[inline]
fn null_transfer<I: Int>(count: I, dt: Datatype, peer: c_int) -> bool {
    count.wide() == 0 && peer == abi::PROC_NULL && dt == abi::DATATYPE_NULL
}

/// What a send reads.
enum Outgoing {
    /// The program's bytes, in place.
    Direct(&'static [u8]),
    /// A packed copy.
    Packed(Vec<u8>),
}

impl Outgoing {
    fn bytes(&self) -> &[u8] {
        match self {
            Outgoing::Direct(b) => b,
            Outgoing::Packed(v) => v,
        }
    }

    /// The bytes for a request that outlives this call, and the buffer to
    /// keep alive for it.
    fn for_request(self) -> (&'static [u8], Option<Box<[u8]>>) {
        match self {
            Outgoing::Direct(b) => (b, None),
            Outgoing::Packed(v) => {
                let v = v.into_boxed_slice();
                // SAFETY: the vector's heap buffer does not move when the
                // vector does, and the request entry keeps the vector until
                // the engine's request is gone (see `ReqEntry`'s drop order).
                let b = unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) };
                (b, Some(v))
            }
        }
    }
}

/// The data of `count` elements at `buf`; `copy` packs even a dense type.
///
/// # Safety
/// `buf` holds `count` elements of `ty` and stays valid and unchanged
/// until the send completes (MPI's contract).
unsafe fn outgoing<I: Int>(
    buf: *const c_void,
    count: I,
    ty: &TypeInfo,
    copy: bool,
) -> Res<Outgoing> {
    let n = count.to_count("count")?;
    ty.check_buffer(buf, n)?;
    let bytes = ty.bytes(n)?;
    if bytes == 0 {
        return Ok(Outgoing::Direct(&[]));
    }
    match ty.dense_offset() {
        Some(off) if !copy => {
            // SAFETY: the caller's guarantee: `count` dense elements start
            // at `buf + off`.
            Ok(Outgoing::Direct(unsafe {
                std::slice::from_raw_parts(buf.cast::<u8>().wrapping_offset(off), bytes)
            }))
        }
        _ => {
            let mut v = zeroed_bytes(bytes)?;
            // SAFETY: the caller's guarantee.
            unsafe { ty.pack(buf.cast(), n, &mut v) };
            Ok(Outgoing::Packed(v))
        }
    }
}

/// Where a receive lands.
enum Incoming {
    /// The program's buffer, in place (a raw pointer: pending receives
    /// may share memory, as MPI allows).
    Direct(*mut u8, usize),
    /// A staging buffer, unpacked on completion.
    Staged(Staged),
}

impl Incoming {
    /// The bytes the engine writes into.
    fn target(&mut self) -> &'static mut [u8] {
        match self {
            // SAFETY: the program's buffer for this blocking operation
            // (valid, and touched by nobody else, until it completes:
            // MPI's contract).
            Incoming::Direct(p, len) => unsafe { std::slice::from_raw_parts_mut(*p, *len) },
            // SAFETY: the staging vector's heap buffer does not move; it is
            // kept (in `Staged`) until the operation is complete.
            Incoming::Staged(s) => unsafe {
                std::slice::from_raw_parts_mut(s.tmp.as_mut_ptr(), s.tmp.len())
            },
        }
    }

    /// The bytes the engine writes into, as a raw pointer (pending
    /// receives may share memory, as MPI allows).
    fn raw_target(&mut self) -> (*mut u8, usize) {
        match self {
            Incoming::Direct(p, len) => (*p, *len),
            Incoming::Staged(s) => (s.tmp.as_mut_ptr(), s.tmp.len()),
        }
    }

    fn finish(self, bytes: u64) {
        if let Incoming::Staged(s) = self {
            s.finish(bytes);
        }
    }

    fn staged(self) -> Option<Staged> {
        match self {
            Incoming::Staged(s) => Some(s),
            Incoming::Direct(..) => None,
        }
    }
}

/// The receive target of `count` elements at `buf`.
///
/// # Safety
/// `buf` holds `count` elements of `ty` and stays valid until the receive
/// completes (MPI's contract).
unsafe fn incoming<I: Int>(buf: *mut c_void, count: I, ty: &TypeRef) -> Res<Incoming> {
    let n = count.to_count("count")?;
    ty.check_buffer(buf, n)?;
    let bytes = ty.bytes(n)?;
    if bytes == 0 {
        return Ok(Incoming::Direct(std::ptr::NonNull::dangling().as_ptr(), 0));
    }
    match ty.dense_offset() {
        Some(off) => Ok(Incoming::Direct(
            buf.cast::<u8>().wrapping_offset(off),
            bytes,
        )),
        None => Ok(Incoming::Staged(Staged {
            tmp: zeroed_bytes(bytes)?,
            dst: buf.cast(),
            count: n,
            ty: ty.clone(),
        })),
    }
}

/// `n` zero bytes for packing, or `MPI_ERR_NO_MEM` (never an abort)
/// when they cannot be had.
fn zeroed_bytes(n: usize) -> Res<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        MpiError::new(
            abi::ERR_NO_MEM,
            format!("cannot allocate {n} bytes to pack a non-contiguous datatype"),
        )
    })?;
    v.resize(n, 0);
    Ok(v)
}

/// The data of a send of `count` elements of `dt` to `dest` with `tag`
/// (see [`outgoing`]; nothing for [`null_transfer`]). The destination and
/// the tag are checked first: a send that is refused packs nothing.
///
/// # Safety
/// As for [`outgoing`].
unsafe fn outgoing_of<I: Int>(
    comm: &SimpleCommunicator,
    buf: *const c_void,
    count: I,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
) -> Res<Outgoing> {
    raw::send_target(comm, dest, tag)?;
    if null_transfer(count, dt, dest) {
        return Ok(Outgoing::Direct(&[]));
    }
    let ty = type_ref(dt)?;
    // SAFETY: the caller's guarantee.
    unsafe { outgoing(buf, count, &ty, false) }
}

/// The target of a receive of `count` elements of `dt` from `source` with
/// `tag` (see [`incoming`]; nothing for [`null_transfer`]). The source and
/// the tag are checked first: a refused receive stages nothing.
///
/// # Safety
/// As for [`incoming`].
unsafe fn incoming_of<I: Int>(
    comm: &SimpleCommunicator,
    buf: *mut c_void,
    count: I,
    dt: Datatype,
    source: c_int,
    tag: c_int,
) -> Res<Incoming> {
    raw::recv_target(comm, source_arg(source), tag_arg(tag))?;
    if null_transfer(count, dt, source) {
        return Ok(Incoming::Direct(std::ptr::NonNull::dangling().as_ptr(), 0));
    }
    let ty = type_ref(dt)?;
    // SAFETY: the caller's guarantee.
    unsafe { incoming(buf, count, &ty) }
}

/// Stores the status of a finished blocking receive (communicator ranks
/// already); its error, if it failed.
///
/// # Safety
/// `status`, if not null, is valid for a write of a status.
unsafe fn finish_status(st: &raw::Status, comm: &CommRef, status: *mut MpiStatus) -> Res {
    let s = comm_mpi_status(st);
    // SAFETY: the caller's guarantee.
    unsafe { store_status(status, s) };
    if s.error != abi::SUCCESS {
        return Err(comm_status_error(st, comm));
    }
    Ok(())
}

/// The common case of C's own arguments, checked without building error
/// values: a predefined communicator, a predefined dense datatype, a
/// valid count and buffer (the bytes out). Ranks and tags are
/// `hmpi_core::raw`'s to check. `None`: take the full path, which checks
/// everything again and reports what is wrong.
#[inline]
fn fast_args(
    comm: Comm,
    dt: Datatype,
    buf: *const c_void,
    count: c_int,
) -> Option<(&'static CommEntry, usize)> {
    let c = crate::comm::predefined_comm(comm)?;
    let size = crate::datatype::dense_predefined_size(dt)?;
    let n = usize::try_from(count).ok()?;
    let bytes = n.checked_mul(size)?;
    if bytes > 0 && buf.is_null() {
        return None;
    }
    Some((c, bytes))
}

/// A byte slice of the program's buffer (empty for zero bytes).
///
/// # Safety
/// `buf` holds `bytes` readable bytes when `bytes > 0`.
#[inline]
unsafe fn bytes_at<'a>(buf: *const c_void, bytes: usize) -> &'a [u8] {
    if bytes == 0 {
        &[]
    } else {
        // SAFETY: the caller's guarantee.
        unsafe { std::slice::from_raw_parts(buf.cast(), bytes) }
    }
}

/// Elements of `datatype` in the message of `status`: `None` if its bytes
/// are not a whole number of them (`MPI_UNDEFINED`), 0 for a zero-sized
/// type.
///
/// # Safety
/// `status`, if not null, points to a status.
unsafe fn status_elements(status: *const MpiStatus, datatype: Datatype) -> Res<Option<u64>> {
    if status.is_null() {
        return err(
            abi::ERR_ARG,
            "status is a null pointer (MPI_STATUS_IGNORE?)",
        );
    }
    let ty = type_any(datatype)?;
    // SAFETY: checked non-null; the caller's status.
    let st = unsafe { status.read() };
    let bytes = u64::from(st.internal[0] as u32) | u64::from(st.internal[1] as u32) << 32;
    let size = ty.size as u64;
    Ok(match size {
        0 => Some(0),
        _ => (bytes % size == 0).then_some(bytes / size),
    })
}

/// `MPI_Send`'s fast path; `None` to take the full path.
///
/// # Safety
/// MPI's contract for the buffer.
#[inline]
unsafe fn send_fast(
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
) -> Option<c_int> {
    let (c, bytes) = fast_args(comm, dt, buf, count)?;
    // SAFETY: the caller's guarantee.
    let data = unsafe { bytes_at(buf, bytes) };
    // An error is found before anything is sent: the full path reports it.
    raw::send(&c.comm, data, dest, tag).ok()?;
    Some(abi::SUCCESS)
}

/// `MPI_Isend`'s fast path; `None` to take the full path.
///
/// # Safety
/// MPI's contract for the buffer; `request` is valid for a write.
#[inline]
unsafe fn isend_fast(
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> Option<c_int> {
    if request.is_null() {
        return None;
    }
    let (c, bytes) = fast_args(comm, dt, buf, count)?;
    // SAFETY: the caller's guarantee; the buffer stays valid until the
    // request completes (MPI's contract).
    let data = unsafe { bytes_at(buf, bytes) };
    // A send that waits for its receiver gets a table slot, and the engine
    // writes its request straight into it (as `MPI_Irecv`'s does); one that
    // finished as it started needs none.
    let mut place = Place::default();
    // Nothing is sent if the destination or tag is bad: the full path
    // finds and reports it.
    let to = raw::send_target(&c.comm, dest, tag).ok()?;
    // SAFETY: the slot holds the request until it completes, by the
    // request routines (or at MPI_Finalize); it is never leaked.
    let h = match unsafe { raw::isend_or_in(to, || place.take(), data) } {
        Ok(raw::Start::Finished(st)) if st.error.is_none() => Ok(SENT),
        Ok(raw::Start::Finished(st)) => finished_entry(CommRef::Static(c), st).and_then(insert),
        // SAFETY: the engine wrote the request there.
        Ok(raw::Start::Written) => Ok(unsafe { place.publish(Rest::plain(CommRef::Static(c))) }),
        Ok(raw::Start::NoPlace) => Err(full()),
        // Nothing was sent: the full path finds and reports it.
        Err(_) => return None,
    };
    Some(match h {
        Ok(h) => {
            // SAFETY: checked non-null.
            unsafe { request.write(h) };
            abi::SUCCESS
        }
        Err(e) => fast_error("MPI_Isend", comm, e),
    })
}

/// `MPI_Send`'s full path: every argument checked, any datatype and
/// communicator. Out of line, so that the fast path's frame stays small.
///
/// # Safety
/// MPI's contract for the buffer.
#[cold]
#[inline(never)]
unsafe fn send_full(
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
) -> c_int {
    // SAFETY: the caller's guarantee.
    api_comm("MPI_Send", comm, |c| unsafe {
        send(c, buf, count, dt, dest, tag, Mode::Standard)
    })
}

/// `MPI_Recv`'s fast path (see [`fast_args`]); `None` to take the full
/// path. Once it has received, it answers whatever the outcome: a message
/// is never received twice.
///
/// # Safety
/// MPI's contract for the buffer; `status`, if not null, is valid for a
/// write of a status.
#[inline]
unsafe fn recv_fast(
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut MpiStatus,
) -> Option<c_int> {
    let (c, bytes) = fast_args(comm, dt, buf, count)?;
    let target: &mut [u8] = if bytes == 0 {
        &mut []
    } else {
        // SAFETY: the program's buffer of `count` elements (MPI's
        // contract), used by this call alone.
        unsafe { std::slice::from_raw_parts_mut(buf.cast(), bytes) }
    };
    // The status stays in this frame, and is read field by field (see
    // `raw::recv_with_status`).
    let mut st = raw::Status::empty();
    match raw::recv_with_status(&c.comm, target, source_arg(source), tag_arg(tag), &mut st) {
        // The common case: received whole.
        Ok(()) if st.error.is_none() => {
            // SAFETY: the caller's status pointer.
            unsafe { store_comm_status(status, &st) };
            Some(abi::SUCCESS)
        }
        // Nothing was received: the full path finds and reports it.
        Err(_) => None,
        // SAFETY: the caller's status pointer.
        Ok(()) => Some(unsafe { recv_done(&st, c, status) }),
    }
}

/// Finishes a fast-path receive that failed (truncated): the status, and
/// an error through the communicator's handler.
///
/// # Safety
/// `status`, if not null, is valid for a write of a status.
#[inline(never)]
unsafe fn recv_done(st: &raw::Status, c: &'static CommEntry, status: *mut MpiStatus) -> c_int {
    let c = CommRef::Static(c);
    // SAFETY: the caller's guarantee for `status`.
    let done = unsafe { finish_status(st, &c, status) };
    match done {
        Ok(()) => abi::SUCCESS,
        Err(e) => crate::errors::raise("MPI_Recv", e.on(&c)),
    }
}

/// `MPI_Recv`'s full path (see [`send_full`]).
///
/// # Safety
/// As for [`recv_fast`].
#[cold]
#[inline(never)]
unsafe fn recv_full(
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: the caller's guarantees.
    api_comm("MPI_Recv", comm, |c| unsafe {
        recv(c, buf, count, dt, source, tag, status)
    })
}

/// Whether a send finished as it started, without error: its request is
/// [`SENT`], not a table entry.
#[inline]
fn finished_send(r: &raw::Request<'_>) -> bool {
    r.finished().is_some_and(|st| st.error.is_none())
}

/// Reports a fast path's error through `comm`'s error handler.
#[cold]
fn fast_error(func: &'static str, comm: Comm, e: MpiError) -> c_int {
    api_comm(func, comm, |_| Err(e))
}

#[derive(Clone, Copy)]
enum Mode {
    Standard,
    Synchronous,
}

/// A blocking send.
///
/// # Safety
/// MPI's contract for the buffer.
unsafe fn send<I: Int>(
    c: &CommEntry,
    buf: *const c_void,
    count: I,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    mode: Mode,
) -> Res {
    // SAFETY: the caller's guarantee.
    let data = unsafe { outgoing_of(&c.comm, buf, count, dt, dest, tag) }?;
    let sync = matches!(mode, Mode::Synchronous);
    raw::send_mode(&c.comm, data.bytes(), dest, tag, sync)?;
    Ok(())
}

/// A nonblocking send.
///
/// # Safety
/// MPI's contract for the buffer (valid and unchanged until completion).
#[allow(clippy::too_many_arguments)]
unsafe fn isend<I: Int>(
    c: &CommRef,
    buf: *const c_void,
    count: I,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    mode: Mode,
    request: *mut Request,
) -> Res {
    out(request, "request")?;
    // SAFETY: the caller's guarantee.
    let data = unsafe { outgoing_of(&c.comm, buf, count, dt, dest, tag) }?;
    let (bytes, packed) = data.for_request();
    let sync = matches!(mode, Mode::Synchronous);
    // SAFETY: the request is stored in the request table and completed by
    // MPI_Wait/MPI_Test/MPI_Request_free (or at MPI_Finalize), never
    // leaked; the buffer stays valid until then (MPI's contract, or the
    // packed copy kept beside the request).
    let r = unsafe { raw::isend(&c.comm, bytes, dest, tag, sync) }?;
    let h = match finished_send(&r) {
        // The engine is done with the data (and its packed copy).
        true => SENT,
        false => insert(ReqEntry {
            req: EngineReq(r),
            rest: Rest::with(c.clone(), packed.map(Extra::Packed)),
        })?,
    };
    // SAFETY: checked non-null above.
    unsafe { request.write(h) };
    Ok(())
}

/// `MPI_Isendrecv` (or, with `replace`, `MPI_Isendrecv_replace`, whose
/// send reads a packed copy of the buffer taken now): a nonblocking send
/// and receive under one request, complete when both are. Both peers and
/// tags are checked before anything starts.
///
/// # Safety
/// MPI's contract for both buffers (valid until completion) and the
/// request pointer.
#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv<I: Int>(
    c: &CommRef,
    sendbuf: *const c_void,
    sendcount: I,
    sendtype: Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: I,
    recvtype: Datatype,
    source: c_int,
    recvtag: c_int,
    replace: bool,
    request: *mut Request,
) -> Res {
    let p = out(request, "request")?;
    raw::send_target(&c.comm, dest, sendtag)?;
    raw::recv_target(&c.comm, source_arg(source), tag_arg(recvtag))?;
    let held = crate::comm::hold_comm(c)?;
    let (mut send, mut recv) = (abi::REQUEST_NULL, abi::REQUEST_NULL);
    // The receive first (its message may be there already), except for
    // the replacing form, whose copy must be taken before the receive can
    // write into the buffer.
    let mut steps = [false, true];
    if replace {
        steps.reverse();
    }
    for is_send in steps {
        let started = match (is_send, replace) {
            // SAFETY: the caller's guarantees; the copy is packed now.
            (true, true) => unsafe {
                isend_copy(c, sendbuf, sendcount, sendtype, dest, sendtag, &mut send)
            },
            // SAFETY: the caller's guarantees for the send buffer.
            (true, false) => unsafe {
                isend(
                    c,
                    sendbuf,
                    sendcount,
                    sendtype,
                    dest,
                    sendtag,
                    Mode::Standard,
                    &mut send,
                )
            },
            // SAFETY: the caller's guarantees for the receive buffer.
            (false, _) => unsafe {
                irecv(c, recvbuf, recvcount, recvtype, source, recvtag, &mut recv)
            },
        };
        if let Err(e) = started {
            for r in [&mut send, &mut recv] {
                if *r != abi::REQUEST_NULL {
                    // SAFETY: our live request; it completes on its own.
                    let _ = unsafe { crate::request::PMPI_Request_free(r) };
                }
            }
            crate::comm::release_held_comm(held);
            return Err(e);
        }
    }
    let h = crate::coll::store_persistent(c, crate::persistent::P2p::pair(send, recv, held))?;
    // SAFETY: checked non-null above.
    unsafe { p.write(h) };
    Ok(())
}

/// A nonblocking standard send of a packed copy of the data (kept with
/// the request), so that the buffer may change at once.
///
/// # Safety
/// MPI's contract for the buffer (read now) and the request pointer.
unsafe fn isend_copy<I: Int>(
    c: &CommRef,
    buf: *const c_void,
    count: I,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    request: *mut Request,
) -> Res {
    out(request, "request")?;
    raw::send_target(&c.comm, dest, tag)?;
    let data = if null_transfer(count, dt, dest) {
        Outgoing::Direct(&[])
    } else {
        let ty = type_ref(dt)?;
        // SAFETY: the caller's guarantee.
        unsafe { outgoing(buf, count, &ty, true) }?
    };
    let (bytes, packed) = data.for_request();
    // SAFETY: as in `isend`: the request is stored and completed by the
    // request routines, never leaked; the packed copy is kept beside it.
    let r = unsafe { raw::isend(&c.comm, bytes, dest, tag, false) }?;
    let h = match finished_send(&r) {
        true => SENT,
        false => insert(ReqEntry {
            req: EngineReq(r),
            rest: Rest::with(c.clone(), packed.map(Extra::Packed)),
        })?,
    };
    // SAFETY: checked non-null above.
    unsafe { request.write(h) };
    Ok(())
}

/// Message handles of matched probes.
struct MsgEntry {
    msg: raw::Message<'static>,
    comm: CommRef,
}

static MESSAGES: Table<MsgEntry> = Table::new(KIND_MESSAGE);

/// Takes the message of a handle for a receive (`None`: `MPI_MESSAGE_NO_PROC`).
///
/// # Safety
/// `message` is valid for a read and a write when not null.
unsafe fn take_message(message: *mut Message) -> Res<Option<MsgEntry>> {
    let p = out(message, "message")?;
    // SAFETY: checked non-null; the caller's handle.
    let h = unsafe { p.read() };
    let m = match h {
        abi::MESSAGE_NO_PROC => None,
        abi::MESSAGE_NULL => return err(abi::ERR_REQUEST, "MPI_MESSAGE_NULL is not a message"),
        _ => Some(MESSAGES.remove(h.0).map_err(|_| {
            MpiError::new(
                abi::ERR_REQUEST,
                format!("{:#x} is not a message (received already?)", h.0),
            )
        })?),
    };
    // SAFETY: as above.
    unsafe { p.write(abi::MESSAGE_NULL) };
    Ok(m)
}

/// Stores a matched probe's message and writes its handle.
///
/// # Safety
/// `message` is valid for a write.
unsafe fn store_message(msg: raw::Message<'static>, comm: &CommRef, message: *mut Message) -> Res {
    let h = if msg.is_no_proc() {
        abi::MESSAGE_NO_PROC
    } else {
        Message(
            MESSAGES
                .insert(MsgEntry {
                    msg,
                    comm: comm.clone(),
                })
                .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many matched messages"))?,
        )
    };
    // SAFETY: the caller's guarantee.
    unsafe { message.write(h) };
    Ok(())
}

/// `MPI_Irecv` the general way: every argument checked, any communicator
/// and datatype.
///
/// # Safety
/// MPI's contract for the buffer and the request pointer.
unsafe fn irecv_full(
    buf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: MPI's contract for the buffer and the request pointer.
    api_comm("MPI_Irecv", comm, |c| unsafe {
        irecv(c, buf, count, datatype, source, tag, request)
    })
}

/// A nonblocking receive, any count type.
///
/// # Safety
/// MPI's contract for the buffer and the request pointer.
unsafe fn irecv<I: Int>(
    c: &CommRef,
    buf: *mut c_void,
    count: I,
    datatype: Datatype,
    source: c_int,
    tag: c_int,
    request: *mut Request,
) -> Res {
    out(request, "request")?;
    // SAFETY: MPI's contract for the buffer.
    let mut inc = unsafe { incoming_of(&c.comm, buf, count, datatype, source, tag) }?;
    let (at, len) = inc.raw_target();
    // SAFETY: the request is stored and completed by the request
    // routines (or at MPI_Finalize), never leaked; the target stays
    // valid until then (the program's buffer by MPI's contract, or
    // the staging buffer kept beside the request).
    let r = unsafe { raw::irecv_raw(&c.comm, at, len, source_arg(source), tag_arg(tag)) }?;
    let h = insert(ReqEntry {
        req: EngineReq(r),
        rest: Rest::with(c.clone(), inc.staged().map(Extra::Staged)),
    })?;
    // SAFETY: checked non-null above.
    unsafe { request.write(h) };
    Ok(())
}

/// A blocking receive, any count type.
///
/// # Safety
/// MPI's contract for the buffer; `status`, if not null, is valid for a
/// write of a status.
unsafe fn recv<I: Int>(
    c: &CommRef,
    buf: *mut c_void,
    count: I,
    dt: Datatype,
    source: c_int,
    tag: c_int,
    status: *mut MpiStatus,
) -> Res {
    // SAFETY: MPI's contract for the buffer.
    let mut inc = unsafe { incoming_of(&c.comm, buf, count, dt, source, tag) }?;
    let mut st = raw::Status::empty();
    raw::recv_with_status(
        &c.comm,
        inc.target(),
        source_arg(source),
        tag_arg(tag),
        &mut st,
    )?;
    inc.finish(st.count);
    // SAFETY: the caller's status pointer.
    unsafe { finish_status(&st, c, status) }
}

/// `MPI_Sendrecv`, any count type.
///
/// # Safety
/// MPI's contract for both buffers and the status pointer.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv<I: Int>(
    c: &CommRef,
    sendbuf: *const c_void,
    sendcount: I,
    sendtype: Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: I,
    recvtype: Datatype,
    source: c_int,
    recvtag: c_int,
    status: *mut MpiStatus,
) -> Res {
    // SAFETY: MPI's contract for both buffers.
    let (data, mut inc) = unsafe {
        (
            outgoing_of(&c.comm, sendbuf, sendcount, sendtype, dest, sendtag)?,
            incoming_of(&c.comm, recvbuf, recvcount, recvtype, source, recvtag)?,
        )
    };
    let mut st = raw::Status::empty();
    raw::sendrecv(
        &c.comm,
        data.bytes(),
        dest,
        sendtag,
        inc.target(),
        source_arg(source),
        tag_arg(recvtag),
        &mut st,
    )?;
    inc.finish(st.count);
    // SAFETY: the caller's status pointer.
    unsafe { finish_status(&st, c, status) }
}

/// `MPI_Sendrecv_replace`, any count type.
///
/// # Safety
/// MPI's contract for the buffer and the status pointer.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_replace<I: Int>(
    c: &CommRef,
    buf: *mut c_void,
    count: I,
    datatype: Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    status: *mut MpiStatus,
) -> Res {
    let ty = type_ref(datatype)?;
    // SAFETY: MPI's contract for the buffer; the outgoing data is a copy,
    // so receiving into the buffer cannot disturb it.
    let (data, mut inc) = unsafe { (outgoing(buf, count, &ty, true)?, incoming(buf, count, &ty)?) };
    let mut st = raw::Status::empty();
    raw::sendrecv(
        &c.comm,
        data.bytes(),
        dest,
        sendtag,
        inc.target(),
        source_arg(source),
        tag_arg(recvtag),
        &mut st,
    )?;
    inc.finish(st.count);
    // SAFETY: the caller's status pointer.
    unsafe { finish_status(&st, c, status) }
}

/// `MPI_Mrecv`, any count type.
///
/// # Safety
/// MPI's contract for the buffer, the message and the status pointer.
unsafe fn mrecv<I: Int>(
    buf: *mut c_void,
    count: I,
    datatype: Datatype,
    message: *mut Message,
    status: *mut MpiStatus,
) -> Res {
    let ty = type_ref(datatype)?;
    // SAFETY: MPI's contract for the buffer.
    let mut inc = unsafe { incoming(buf, count, &ty) }?;
    // SAFETY: the caller's handle pointer.
    let Some(m) = unsafe { take_message(message) }? else {
        // SAFETY: the caller's status pointer.
        unsafe { store_status(status, empty_status()) };
        return Ok(());
    };
    let comm = m.comm.clone();
    let st = raw::mrecv(&comm.comm, m.msg, inc.target())?;
    inc.finish(st.count);
    // SAFETY: the caller's status pointer.
    unsafe { finish_status(&st, &comm, status) }
}

/// `MPI_Imrecv`, any count type.
///
/// # Safety
/// MPI's contract for the buffer, the message and the request pointer.
unsafe fn imrecv<I: Int>(
    buf: *mut c_void,
    count: I,
    datatype: Datatype,
    message: *mut Message,
    request: *mut Request,
) -> Res {
    out(request, "request")?;
    let ty = type_ref(datatype)?;
    // SAFETY: MPI's contract for the buffer.
    let mut inc = unsafe { incoming(buf, count, &ty) }?;
    // SAFETY: the caller's handle pointer.
    let (r, comm) = match unsafe { take_message(message) }? {
        Some(m) => (m.msg.imrecv(inc.target())?, m.comm),
        // A receive from MPI_PROC_NULL: complete at once.
        None => (
            raw::finished_request(raw::Status::empty())?,
            crate::comm::comm_ref(abi::COMM_SELF)?,
        ),
    };
    let h = insert(ReqEntry {
        req: EngineReq(r),
        rest: Rest::with(comm, inc.staged().map(Extra::Staged)),
    })?;
    // SAFETY: checked non-null above.
    unsafe { request.write(h) };
    Ok(())
}

mpi_fn! {
    /// Sends and returns when the buffer may be reused.
    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        if let Some(rc) = unsafe { send_fast(buf, count, datatype, dest, tag, comm) } {
            return rc;
        }
        // SAFETY: MPI's contract for the buffer.
        unsafe { send_full(buf, count, datatype, dest, tag, comm) }
    }

    /// Sends and returns once the receiver has matched the message.
    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Ssend", comm, |c| unsafe { send(c, buf, count, datatype, dest, tag, Mode::Synchronous) })
    }

    /// A ready-mode send (the standard send).
    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Rsend", comm, |c| unsafe { send(c, buf, count, datatype, dest, tag, Mode::Standard) })
    }

    /// Receives into `buf`.
    fn MPI_Recv / PMPI_Recv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer and the status pointer.
        if let Some(rc) = unsafe { recv_fast(buf, count, datatype, source, tag, comm, status) } {
            return rc;
        }
        // SAFETY: as above.
        unsafe { recv_full(buf, count, datatype, source, tag, comm, status) }
    }

    /// Starts a send.
    fn MPI_Isend / PMPI_Isend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer and the request pointer.
        if let Some(rc) = unsafe { isend_fast(buf, count, datatype, dest, tag, comm, request) } {
            return rc;
        }
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Isend", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Standard, request) })
    }

    /// Starts a synchronous send.
    fn MPI_Issend / PMPI_Issend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Issend", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Synchronous, request) })
    }

    /// Starts a ready-mode send (the standard send).
    fn MPI_Irsend / PMPI_Irsend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Irsend", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Standard, request) })
    }

    /// Starts a receive.
    fn MPI_Irecv / PMPI_Irecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        if !request.is_null() {
            if let Some((c, bytes)) = fast_args(comm, datatype, buf, count) {
                let at = if bytes == 0 { std::ptr::NonNull::<u8>::dangling().as_ptr() } else { buf.cast() };
                // A receive that waits gets a table slot, and the
                // engine writes its request straight into it; one that
                // matched at once needs none.
                let mut place = Place::default();
                let started = match raw::recv_target(&c.comm, source_arg(source), tag_arg(tag)) {
                    // SAFETY: as in `irecv_full`; the slot holds the
                    // request until it completes.
                    Ok(from) => unsafe { raw::irecv_raw_or_in(from, || place.take(), at, bytes) },
                    // Nothing started: the full path finds and reports it.
                    // SAFETY: MPI's contract for the buffer and the
                    // request pointer.
                    Err(_) => return unsafe { irecv_full(buf, count, datatype, source, tag, comm, request) },
                };
                let h = match started {
                    Ok(raw::Start::Finished(st)) => match received(&st).filter(|_| comm == abi::COMM_WORLD) {
                        Some(h) => Ok(h),
                        None => finished_entry(CommRef::Static(c), st).and_then(insert),
                    },
                    // SAFETY: the engine wrote the request there.
                    Ok(raw::Start::Written) => Ok(unsafe { place.publish(Rest::plain(CommRef::Static(c))) }),
                    Ok(raw::Start::NoPlace) => Err(full()),
                    // Nothing started: the full path finds and reports it.
                    // SAFETY: MPI's contract for the buffer and the
                    // request pointer.
                    Err(_) => return unsafe { irecv_full(buf, count, datatype, source, tag, comm, request) },
                };
                return match h {
                    Ok(h) => {
                        // SAFETY: checked non-null.
                        unsafe { request.write(h) };
                        abi::SUCCESS
                    }
                    Err(e) => fast_error("MPI_Irecv", comm, e),
                };
            }
        }
        // SAFETY: MPI's contract for the buffer and the request pointer.
        unsafe { irecv_full(buf, count, datatype, source, tag, comm, request) }
    }

    /// Sends one message and receives another.
    fn MPI_Sendrecv / PMPI_Sendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for both buffers and the status pointer.
        api_comm("MPI_Sendrecv", comm, |c| unsafe {
            sendrecv(c, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, status)
        })
    }

    /// Sends the buffer's contents and receives into the same buffer.
    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer and the status pointer.
        api_comm("MPI_Sendrecv_replace", comm, |c| unsafe {
            sendrecv_replace(c, buf, count, datatype, dest, sendtag, source, recvtag, status)
        })
    }

    /// Waits for a matching message and returns its status (not received).
    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        api_comm("MPI_Probe", comm, |c| {
            let st = raw::probe(&c.comm, source_arg(source), tag_arg(tag))?;
            // SAFETY: the caller's status pointer.
            unsafe { store_comm_status(status, &st) };
            Ok(())
        })
    }

    /// Whether a matching message is there; its status if so.
    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: Comm, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        api_comm("MPI_Iprobe", comm, |c| {
            out(flag, "flag")?;
            let st = raw::iprobe(&c.comm, source_arg(source), tag_arg(tag))?;
            // SAFETY: checked non-null; the caller's status pointer.
            unsafe {
                flag.write(c_int::from(st.is_some()));
                if let Some(st) = st {
                    store_comm_status(status, &st);
                }
            }
            Ok(())
        })
    }

    /// Waits for a matching message and takes it off the matching lists.
    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: Comm, message: *mut Message, status: *mut MpiStatus) -> c_int {
        api_comm("MPI_Mprobe", comm, |c| {
            out(message, "message")?;
            let (msg, st) = raw::mprobe(&c.comm, source_arg(source), tag_arg(tag))?;
            // SAFETY: checked non-null; the caller's status pointer.
            unsafe {
                store_message(msg, c, message)?;
                store_comm_status(status, &st);
            }
            Ok(())
        })
    }

    /// Takes a matching message off the matching lists if there is one.
    fn MPI_Improbe / PMPI_Improbe(
        source: c_int,
        tag: c_int,
        comm: Comm,
        flag: *mut c_int,
        message: *mut Message,
        status: *mut MpiStatus,
    ) -> c_int {
        api_comm("MPI_Improbe", comm, |c| {
            out(flag, "flag")?;
            out(message, "message")?;
            let found = raw::improbe(&c.comm, source_arg(source), tag_arg(tag))?;
            // SAFETY: checked non-null; the caller's status pointer.
            unsafe {
                flag.write(c_int::from(found.is_some()));
                if let Some((msg, st)) = found {
                    store_message(msg, c, message)?;
                    store_comm_status(status, &st);
                }
            }
            Ok(())
        })
    }

    /// Receives a matched message; `*message` becomes `MPI_MESSAGE_NULL`.
    fn MPI_Mrecv / PMPI_Mrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        message: *mut Message,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer, message and status.
        api("MPI_Mrecv", || unsafe { mrecv(buf, count, datatype, message, status) })
    }

    /// Receives a matched message as a request (complete at once).
    fn MPI_Imrecv / PMPI_Imrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        message: *mut Message,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer, message and request.
        api("MPI_Imrecv", || unsafe { imrecv(buf, count, datatype, message, request) })
    }

    /// Starts a send and a receive under one request (complete when both
    /// are).
    fn MPI_Isendrecv / PMPI_Isendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: MPI's contract for both buffers and the request pointer.
        api_comm("MPI_Isendrecv", comm, |c| unsafe {
            isendrecv(c, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, false, request)
        })
    }

    /// [`MPI_Isendrecv`] with large counts.
    fn MPI_Isendrecv_c / PMPI_Isendrecv_c(
        sendbuf: *const c_void,
        sendcount: Count,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: Count,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: as above.
        api_comm("MPI_Isendrecv_c", comm, |c| unsafe {
            isendrecv(c, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, false, request)
        })
    }

    /// Starts sending the buffer's contents and receiving into it.
    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: as above (the send reads a copy taken now).
        api_comm("MPI_Isendrecv_replace", comm, |c| unsafe {
            isendrecv(c, buf, count, datatype, dest, sendtag, buf, count, datatype, source, recvtag, true, request)
        })
    }

    /// [`MPI_Isendrecv_replace`] with a large count.
    fn MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(
        buf: *mut c_void,
        count: Count,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int {
        // SAFETY: as above.
        api_comm("MPI_Isendrecv_replace_c", comm, |c| unsafe {
            isendrecv(c, buf, count, datatype, dest, sendtag, buf, count, datatype, source, recvtag, true, request)
        })
    }

    /// [`MPI_Send`] with a large count.
    fn MPI_Send_c / PMPI_Send_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Send_c", comm, |c| unsafe { send(c, buf, count, datatype, dest, tag, Mode::Standard) })
    }

    /// [`MPI_Ssend`] with a large count.
    fn MPI_Ssend_c / PMPI_Ssend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Ssend_c", comm, |c| unsafe { send(c, buf, count, datatype, dest, tag, Mode::Synchronous) })
    }

    /// [`MPI_Rsend`] with a large count.
    fn MPI_Rsend_c / PMPI_Rsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Rsend_c", comm, |c| unsafe { send(c, buf, count, datatype, dest, tag, Mode::Standard) })
    }

    /// [`MPI_Recv`] with a large count.
    fn MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        // SAFETY: MPI's contract for the buffer and the status pointer.
        api_comm("MPI_Recv_c", comm, |c| unsafe { recv(c, buf, count, datatype, source, tag, status) })
    }

    /// [`MPI_Isend`] with a large count.
    fn MPI_Isend_c / PMPI_Isend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: MPI's contract for the buffer and the request pointer.
        api_comm("MPI_Isend_c", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Standard, request) })
    }

    /// [`MPI_Issend`] with a large count.
    fn MPI_Issend_c / PMPI_Issend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        api_comm("MPI_Issend_c", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Synchronous, request) })
    }

    /// [`MPI_Irsend`] with a large count.
    fn MPI_Irsend_c / PMPI_Irsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        api_comm("MPI_Irsend_c", comm, |c| unsafe { isend(c, buf, count, datatype, dest, tag, Mode::Standard, request) })
    }

    /// [`MPI_Irecv`] with a large count.
    fn MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        api_comm("MPI_Irecv_c", comm, |c| unsafe { irecv(c, buf, count, datatype, source, tag, request) })
    }

    /// [`MPI_Sendrecv`] with large counts.
    fn MPI_Sendrecv_c / PMPI_Sendrecv_c(
        sendbuf: *const c_void,
        sendcount: Count,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: Count,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for both buffers and the status pointer.
        api_comm("MPI_Sendrecv_c", comm, |c| unsafe {
            sendrecv(c, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, status)
        })
    }

    /// [`MPI_Sendrecv_replace`] with a large count.
    fn MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(
        buf: *mut c_void,
        count: Count,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int {
        // SAFETY: MPI's contract for the buffer and the status pointer.
        api_comm("MPI_Sendrecv_replace_c", comm, |c| unsafe {
            sendrecv_replace(c, buf, count, datatype, dest, sendtag, source, recvtag, status)
        })
    }

    /// [`MPI_Mrecv`] with a large count.
    fn MPI_Mrecv_c / PMPI_Mrecv_c(buf: *mut c_void, count: Count, datatype: Datatype, message: *mut Message, status: *mut MpiStatus) -> c_int {
        // SAFETY: MPI's contract for the buffer, message and status.
        api("MPI_Mrecv_c", || unsafe { mrecv(buf, count, datatype, message, status) })
    }

    /// [`MPI_Imrecv`] with a large count.
    fn MPI_Imrecv_c / PMPI_Imrecv_c(buf: *mut c_void, count: Count, datatype: Datatype, message: *mut Message, request: *mut Request) -> c_int {
        // SAFETY: MPI's contract for the buffer, message and request.
        api("MPI_Imrecv_c", || unsafe { imrecv(buf, count, datatype, message, request) })
    }

    /// Elements of `datatype` in a status's message (`MPI_UNDEFINED` if
    /// its bytes are not a whole number of them).
    fn MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, datatype: Datatype, count: *mut c_int) -> c_int {
        api("MPI_Get_count", || {
            // SAFETY: the caller's status pointer.
            let n = unsafe { status_elements(status, datatype) }?
                .and_then(|n| c_int::try_from(n).ok())
                .unwrap_or(abi::UNDEFINED);
            // SAFETY: the caller's int pointer.
            unsafe { put(count, "count", n) }
        })
    }

    /// Elements of `datatype` in a status's message, as `MPI_Count`
    /// (`MPI_UNDEFINED` if its bytes are not a whole number of them).
    fn MPI_Get_count_c / PMPI_Get_count_c(status: *const MpiStatus, datatype: Datatype, count: *mut Count) -> c_int {
        api("MPI_Get_count_c", || {
            // SAFETY: the caller's status pointer.
            let n = unsafe { status_elements(status, datatype) }?
                .and_then(|n| Count::try_from(n).ok())
                .unwrap_or(Count::from(abi::UNDEFINED));
            // SAFETY: the caller's pointer.
            unsafe { put(count, "count", n) }
        })
    }
}
