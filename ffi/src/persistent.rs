//! Persistent point-to-point requests of the C interface: `MPI_Send_init`,
//! `MPI_Ssend_init`, `MPI_Rsend_init`, `MPI_Bsend_init`, `MPI_Recv_init`
//! and their large-count `_c` forms.
//!
//! An `_init` call checks its arguments once (communicator, count,
//! datatype, peer and tag, the latter two by `hmpi_core::raw` as every
//! send and receive) and stores the operation, inactive, under an
//! `MPI_Request` handle of the persistent kind that the persistent
//! collectives use (see [`crate::coll`]), so `MPI_Start` and
//! `MPI_Startall` start either, in one array. Each start issues the
//! nonblocking operation (`MPI_Isend`, `MPI_Issend`, `MPI_Ibsend`,
//! `MPI_Irecv`) with the
//! stored arguments; `MPI_Wait`, `MPI_Test` and their array forms complete
//! it with its full status (source, tag, count of a receive) and leave the
//! request inactive, ready to start again; `MPI_Request_free` frees it (an
//! active one completes on its own afterwards, as a freed nonblocking
//! request does). The request holds its communicator and datatype by
//! handles of its own, so the program may free its handles first (the
//! communicator's attributes are deleted then, as `MPI_Comm_free` does).
//!
//! Ready mode (`MPI_Rsend_init`) is the standard send, as for `MPI_Rsend`.
//! Partitioned requests ([`crate::partitioned`]) are stored as these are,
//! and their starts and completions go to the partitioned operation; so is
//! an `MPI_Isendrecv` (one-shot: a send and a receive completed together,
//! the handle freed with its completion).
//!
//! In C:
//! ```c
//! MPI_Request r[2];
//! MPI_Recv_init(in, n, MPI_INT, left, 0, MPI_COMM_WORLD, &r[0]);
//! MPI_Send_init(out, n, MPI_INT, right, 0, MPI_COMM_WORLD, &r[1]);
//! for (int it = 0; it < 100; it++) {
//!     MPI_Startall(2, r);
//!     MPI_Waitall(2, r, MPI_STATUSES_IGNORE);   // r[i] stay valid, inactive
//! }
//! MPI_Request_free(&r[0]);
//! MPI_Request_free(&r[1]);
//! ```

use crate::abi::{self, Comm, Count, Datatype, MpiStatus, Request};
use crate::coll_large::Int;
use crate::comm::{hold_comm, release_held_comm, source_arg, tag_arg};
use crate::datatype::{hold, release_held, type_ref};
use crate::errors::{api_comm, err, out, Res};
use hmpi_core::raw;
use std::ffi::{c_int, c_void};

/// Which nonblocking operation a start issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `MPI_Isend` (standard and ready mode).
    Send,
    /// `MPI_Issend`.
    Ssend,
    /// `MPI_Irecv`.
    Recv,
    /// `MPI_Ibsend` (see [`crate::buffered`]).
    Bsend,
}

/// A persistent point-to-point operation: its arguments, and the
/// nonblocking request of the start in flight (`MPI_REQUEST_NULL` while
/// inactive).
pub(crate) struct P2p {
    op: Op,
    /// The buffer's address (MPI's contract keeps it valid while the
    /// request exists).
    buf: usize,
    /// Elements (an `int` count widened: one start routine for both forms).
    count: Count,
    datatype: Datatype,
    peer: c_int,
    tag: c_int,
    comm: Comm,
    /// The nonblocking request of the current start.
    inner: Request,
    /// A partitioned operation instead (see [`crate::partitioned`]).
    part: Option<crate::partitioned::Part>,
    /// A one-shot `MPI_Isendrecv` instead: its send and its receive.
    pair: Option<Pair>,
}

/// The two nonblocking requests of an `MPI_Isendrecv` (or
/// `MPI_Isendrecv_replace`), and the receive's status once it has
/// completed.
pub(crate) struct Pair {
    pub(crate) send: Request,
    pub(crate) recv: Request,
    pub(crate) status: MpiStatus,
}

impl Drop for Pair {
    /// Requests still active complete on their own.
    fn drop(&mut self) {
        self.release();
    }
}

impl Pair {
    /// Tests (or waits for, if `wait`) both requests; `Ok(true)` once both
    /// have completed, the receive's status written.
    ///
    /// # Safety
    /// `status` is a status or `MPI_STATUS_IGNORE`.
    unsafe fn complete(&mut self, status: *mut MpiStatus, wait: bool) -> Res<bool> {
        let mut backoff = shmheap::sync::futex::Backoff::new();
        loop {
            let mut flag: c_int = 1;
            if self.send != abi::REQUEST_NULL {
                // SAFETY: our live request; a null status is ignored.
                let code = unsafe {
                    crate::request::PMPI_Test(&mut self.send, &mut flag, std::ptr::null_mut())
                };
                if code != abi::SUCCESS {
                    self.release();
                    return err(code, "the send of MPI_Isendrecv failed");
                }
            }
            if self.recv != abi::REQUEST_NULL {
                let mut f: c_int = 1;
                // SAFETY: our live request and status.
                let code =
                    unsafe { crate::request::PMPI_Test(&mut self.recv, &mut f, &mut self.status) };
                if code != abi::SUCCESS {
                    self.release();
                    // SAFETY: the caller's status pointer.
                    unsafe { crate::request::store_status(status, self.status) };
                    return err(code, "the receive of MPI_Isendrecv failed (see its status)");
                }
            }
            if self.send == abi::REQUEST_NULL && self.recv == abi::REQUEST_NULL {
                // SAFETY: the caller's status pointer.
                unsafe { crate::request::store_status(status, self.status) };
                return Ok(true);
            }
            if !wait {
                return Ok(false);
            }
            backoff.snooze();
        }
    }

    /// Lets both requests complete on their own (`MPI_Request_free`).
    fn release(&mut self) {
        for r in [&mut self.send, &mut self.recv] {
            if *r != abi::REQUEST_NULL {
                // SAFETY: our live request.
                let _ = unsafe { crate::request::PMPI_Request_free(r) };
                *r = abi::REQUEST_NULL;
            }
        }
    }
}

impl P2p {
    /// A partitioned operation (holding `datatype` and `comm`, handles of
    /// its own) stored with the persistent ones.
    pub(crate) fn partitioned(
        part: crate::partitioned::Part,
        datatype: Datatype,
        comm: Comm,
    ) -> P2p {
        P2p {
            op: Op::Send,
            buf: 0,
            count: 0,
            datatype,
            peer: abi::PROC_NULL,
            tag: 0,
            comm,
            inner: abi::REQUEST_NULL,
            part: Some(part),
            pair: None,
        }
    }

    /// A one-shot `MPI_Isendrecv` of two started requests (holding
    /// `comm`, a handle of its own).
    pub(crate) fn pair(send: Request, recv: Request, comm: Comm) -> P2p {
        P2p {
            op: Op::Send,
            buf: 0,
            count: 0,
            datatype: abi::DATATYPE_NULL,
            peer: abi::PROC_NULL,
            tag: 0,
            comm,
            inner: abi::REQUEST_NULL,
            part: None,
            pair: Some(Pair {
                send,
                recv,
                status: crate::request::empty_status(),
            }),
        }
    }

    /// Whether this is a one-shot request (freed when it completes).
    pub(crate) fn is_oneshot(&self) -> bool {
        self.pair.is_some()
    }

    /// Whether a start is in flight (not yet completed).
    pub(crate) fn is_active(&self) -> bool {
        if let Some(p) = &self.part {
            return p.is_active();
        }
        if let Some(p) = &self.pair {
            return p.send != abi::REQUEST_NULL || p.recv != abi::REQUEST_NULL;
        }
        self.inner != abi::REQUEST_NULL
    }

    /// Starts the operation again (`MPI_Start`); the caller checked it is
    /// inactive.
    pub(crate) fn start(&mut self) -> Res {
        if let Some(p) = &mut self.part {
            return p.start();
        }
        if self.pair.is_some() {
            return err(
                abi::ERR_REQUEST,
                "MPI_Start on a request that is not persistent (MPI_Isendrecv)",
            );
        }
        let mut r = abi::REQUEST_NULL;
        let (b, n, t, p, tag, c) = (
            self.buf as *mut c_void,
            self.count,
            self.datatype,
            self.peer,
            self.tag,
            self.comm,
        );
        // SAFETY: the arguments were checked at the `_init` call; MPI's
        // contract keeps the buffer valid while the request exists and
        // unchanged (a send) or untouched (a receive) while it is active;
        // `r` is ours.
        let code = unsafe {
            match self.op {
                Op::Send => crate::p2p::PMPI_Isend_c(b, n, t, p, tag, c, &mut r),
                Op::Ssend => crate::p2p::PMPI_Issend_c(b, n, t, p, tag, c, &mut r),
                Op::Recv => crate::p2p::PMPI_Irecv_c(b, n, t, p, tag, c, &mut r),
                Op::Bsend => crate::buffered::PMPI_Ibsend_c(b, n, t, p, tag, c, &mut r),
            }
        };
        if code != abi::SUCCESS {
            return err(code, "MPI_Start: the persistent operation failed to start");
        }
        self.inner = r;
        Ok(())
    }

    /// Completes the start in flight, waiting for it with `wait`:
    /// `Ok(true)` when it has completed (or none was active), its status
    /// written; the request becomes inactive.
    ///
    /// # Safety
    /// `status` is a status or `MPI_STATUS_IGNORE`.
    pub(crate) unsafe fn complete(&mut self, status: *mut MpiStatus, wait: bool) -> Res<bool> {
        if let Some(p) = &mut self.part {
            // SAFETY: the caller's status pointer.
            return unsafe { p.complete(status, wait) };
        }
        if let Some(p) = &mut self.pair {
            // SAFETY: the caller's status pointer.
            return unsafe { p.complete(status, wait) };
        }
        if !self.is_active() {
            // SAFETY: the caller's status pointer.
            unsafe { crate::request::store_status(status, crate::request::null_status()) };
            return Ok(true);
        }
        let mut flag: c_int = 1;
        // SAFETY: `inner` is a live request of ours; the caller's status.
        let code = unsafe {
            if wait {
                crate::request::PMPI_Wait(&mut self.inner, status)
            } else {
                crate::request::PMPI_Test(&mut self.inner, &mut flag, status)
            }
        };
        if code != abi::SUCCESS {
            // Waiting or testing frees the nonblocking request whatever
            // the outcome; this one is inactive again.
            self.inner = abi::REQUEST_NULL;
            return err(code, "the persistent operation failed (see its status)");
        }
        Ok(flag != 0)
    }

    /// Whether the start in flight has finished, without completing it.
    pub(crate) fn is_done(&self) -> Res<bool> {
        if let Some(p) = &self.part {
            return p.is_done();
        }
        if let Some(p) = &self.pair {
            let mut done = true;
            for r in [p.send, p.recv] {
                if r != abi::REQUEST_NULL {
                    let mut flag: c_int = 0;
                    // SAFETY: `flag` is ours; a null status is ignored.
                    let code = unsafe {
                        crate::request::PMPI_Request_get_status(r, &mut flag, std::ptr::null_mut())
                    };
                    if code != abi::SUCCESS {
                        return err(code, "MPI_Isendrecv failed");
                    }
                    done &= flag != 0;
                }
            }
            return Ok(done);
        }
        if !self.is_active() {
            return Ok(true);
        }
        let mut flag: c_int = 0;
        // SAFETY: `flag` is ours; a null status is MPI_STATUS_IGNORE.
        let code = unsafe {
            crate::request::PMPI_Request_get_status(self.inner, &mut flag, std::ptr::null_mut())
        };
        if code != abi::SUCCESS {
            return err(code, "the persistent operation failed");
        }
        Ok(flag != 0)
    }

    /// `MPI_Request_free`: a start in flight is left to complete on its
    /// own (as a freed nonblocking request).
    pub(crate) fn release(&mut self) -> Res {
        if let Some(p) = &mut self.part {
            return p.release();
        }
        if let Some(p) = &mut self.pair {
            p.release();
            return Ok(());
        }
        if !self.is_active() {
            return Ok(());
        }
        // SAFETY: `inner` is a live request of ours.
        let code = unsafe { crate::request::PMPI_Request_free(&mut self.inner) };
        self.inner = abi::REQUEST_NULL;
        if code != abi::SUCCESS {
            return err(code, "freeing the persistent operation failed");
        }
        Ok(())
    }

    /// `MPI_Cancel` on an active persistent receive.
    pub(crate) fn cancel(&mut self) -> Res {
        if let Some(p) = &mut self.part {
            return p.cancel();
        }
        if let Some(p) = &mut self.pair {
            // The receive may be cancelled, as MPI_Cancel of an MPI_Irecv.
            if p.recv == abi::REQUEST_NULL {
                return err(abi::ERR_REQUEST, "MPI_Cancel on a completed MPI_Isendrecv");
            }
            // SAFETY: our live request.
            let code = unsafe { crate::request::PMPI_Cancel(&mut p.recv) };
            if code != abi::SUCCESS {
                return err(code, "cancelling the receive of MPI_Isendrecv failed");
            }
            return Ok(());
        }
        if !self.is_active() {
            return err(
                abi::ERR_REQUEST,
                "MPI_Cancel on an inactive persistent request",
            );
        }
        // SAFETY: `inner` is a live request of ours.
        let code = unsafe { crate::request::PMPI_Cancel(&mut self.inner) };
        if code != abi::SUCCESS {
            return err(code, "cancelling the persistent operation failed");
        }
        Ok(())
    }
}

impl Drop for P2p {
    /// The request's own datatype and communicator handles go with it.
    fn drop(&mut self) {
        release_held(self.datatype);
        release_held_comm(self.comm);
    }
}

/// Checks an `_init` call's arguments and stores the inactive request.
///
/// # Safety
/// `request` is valid for a write when not null.
#[allow(clippy::too_many_arguments)]
unsafe fn init<I: Int>(
    func: &'static str,
    op: Op,
    buf: *const c_void,
    count: I,
    datatype: Datatype,
    peer: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    api_comm(func, comm, |c| {
        let p = out(request, "request")?;
        let n = count.to_count("count")?;
        // MPI_PROC_NULL with MPI_DATATYPE_NULL and no elements moves
        // nothing: the datatype is never used.
        let null = n == 0 && peer == abi::PROC_NULL && datatype == abi::DATATYPE_NULL;
        if !null {
            let ty = type_ref(datatype)?;
            ty.check_buffer(buf, n)?;
        }
        match op {
            Op::Recv => raw::recv_target(&c.comm, source_arg(peer), tag_arg(tag)).map(drop)?,
            Op::Send | Op::Ssend | Op::Bsend => raw::send_target(&c.comm, peer, tag).map(drop)?,
        }
        // The program may free its datatype and communicator handles
        // before the request.
        let datatype = if null { datatype } else { hold(datatype)? };
        let comm = match hold_comm(c) {
            Ok(h) => h,
            Err(e) => {
                release_held(datatype);
                return Err(e);
            }
        };
        let e = P2p {
            op,
            buf: buf as usize,
            count: n as Count,
            datatype,
            peer,
            tag,
            comm,
            inner: abi::REQUEST_NULL,
            part: None,
            pair: None,
        };
        let h = crate::coll::store_persistent(c, e)?;
        // SAFETY: checked non-null above.
        unsafe { p.write(h) };
        Ok(())
    })
}

mpi_fn! {
    /// Creates a persistent standard-mode send (started by `MPI_Start`).
    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: MPI's contract for the buffer and the request pointer.
        unsafe { init("MPI_Send_init", Op::Send, buf, count, datatype, dest, tag, comm, request) }
    }

    /// Creates a persistent synchronous send.
    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Ssend_init", Op::Ssend, buf, count, datatype, dest, tag, comm, request) }
    }

    /// Creates a persistent ready-mode send (the standard send).
    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Rsend_init", Op::Send, buf, count, datatype, dest, tag, comm, request) }
    }

    /// Creates a persistent buffered send (each start an `MPI_Ibsend`).
    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Bsend_init", Op::Bsend, buf, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Bsend_init`] with a large count.
    fn MPI_Bsend_init_c / PMPI_Bsend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Bsend_init_c", Op::Bsend, buf, count, datatype, dest, tag, comm, request) }
    }

    /// Creates a persistent receive.
    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Recv_init", Op::Recv, buf, count, datatype, source, tag, comm, request) }
    }

    /// [`MPI_Send_init`] with a large count.
    fn MPI_Send_init_c / PMPI_Send_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Send_init_c", Op::Send, buf, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Ssend_init`] with a large count.
    fn MPI_Ssend_init_c / PMPI_Ssend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Ssend_init_c", Op::Ssend, buf, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Rsend_init`] with a large count.
    fn MPI_Rsend_init_c / PMPI_Rsend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Rsend_init_c", Op::Send, buf, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Recv_init`] with a large count.
    fn MPI_Recv_init_c / PMPI_Recv_init_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { init("MPI_Recv_init_c", Op::Recv, buf, count, datatype, source, tag, comm, request) }
    }
}
