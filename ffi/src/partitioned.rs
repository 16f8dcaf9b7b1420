//! Partitioned communication of the C interface (MPI 4.0 §4.2):
//! `MPI_Psend_init`, `MPI_Precv_init` (and their `_c` forms),
//! `MPI_Pready`, `MPI_Pready_range`, `MPI_Pready_list`, `MPI_Parrived`.
//!
//! The semantics are `hmpi_core::partitioned`'s ([`SendCore`],
//! [`RecvCore`]): matching at the first start, in the order of the `_init`
//! calls, a partition copied into the
//! receiver's buffer as soon as it is ready and the receiver has started,
//! `MPI_Parrived` reading one arrival counter. Here the arguments are
//! checked and turned into the core's terms: `partitions × count` elements
//! of the datatype, each partition `count` elements; a datatype that is
//! one run of bytes is copied as bytes, any other is packed partition by
//! partition on the way out and unpacked on arrival.
//!
//! The request is a persistent request of [`crate::persistent`]'s kind, so
//! `MPI_Start`, `MPI_Startall`, the wait and test family,
//! `MPI_Request_get_status` and `MPI_Request_free` take it like any other.
//! `MPI_Pready` and `MPI_Parrived` find it in a table of their own, without
//! the request's lock, so that threads mark partitions ready while another
//! one waits. Freeing an active partitioned request waits for its round
//! first (the peer depends on it); a send with partitions not yet marked
//! ready is refused instead (`MPI_ERR_REQUEST`: it could never complete). `MPI_Cancel` refuses it
//! (`MPI_ERR_REQUEST`). The info argument is accepted and not used.
//! Errors go to the request's communicator's handler (to
//! `MPI_COMM_SELF`'s when the handle is not a partitioned request).
//!
//! In C:
//! ```c
//! MPI_Psend_init(buf, 8, 1024, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
//! MPI_Start(&r);
//! #pragma omp parallel for
//! for (int p = 0; p < 8; p++) { fill(buf + p * 1024); MPI_Pready(p, r); }
//! MPI_Wait(&r, MPI_STATUS_IGNORE);
//! ```

use crate::abi::{self, Comm, Count, Datatype, Info, MpiStatus, Request};
use crate::comm::{hold_comm, tag_arg, CommRef};
use crate::datatype::{hold, release_held, type_ref};
use crate::errors::{api, api_comm, err, out, MpiError, Res};
use hmpi_core::partitioned::{PartLayout, RecvCore, SendCore};
use hmpi_core::raw;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, RwLock, Weak};

/// One side of a partitioned operation.
#[derive(Clone)]
pub(crate) enum Side {
    Send(Arc<SendCore>),
    Recv(Arc<RecvCore>),
}

/// A partitioned request: its side, and the handles it holds.
pub(crate) struct Part {
    side: Side,
    comm: CommRef,
}

/// The partitioned requests by handle, for `MPI_Pready` and
/// `MPI_Parrived` (weak: the request table owns them).
type Index = HashMap<usize, (Weak<SendCore>, Weak<RecvCore>, CommRef)>;

fn index() -> &'static RwLock<Index> {
    static I: std::sync::OnceLock<RwLock<Index>> = std::sync::OnceLock::new();
    I.get_or_init(|| RwLock::new(HashMap::new()))
}

/// The live side behind handle `h`, and its communicator.
fn side_of(h: Request) -> Res<(Side, CommRef)> {
    let i = index().read().unwrap_or_else(|p| p.into_inner());
    let found = i.get(&h.0).and_then(|(s, r, c)| {
        let side = match (s.upgrade(), r.upgrade()) {
            (Some(s), _) => Side::Send(s),
            (_, Some(r)) => Side::Recv(r),
            _ => return None,
        };
        Some((side, c.clone()))
    });
    found.ok_or_else(|| {
        MpiError::new(
            abi::ERR_REQUEST,
            format!("{:#x} is not a partitioned request", h.0),
        )
    })
}

fn core<T>(r: hmpi_core::Result<T>, comm: &CommRef) -> Res<T> {
    r.map_err(|e| MpiError::from(e).on(comm))
}

impl Part {
    pub(crate) fn is_active(&self) -> bool {
        match &self.side {
            Side::Send(s) => s.is_active(),
            Side::Recv(r) => r.is_active(),
        }
    }

    pub(crate) fn start(&mut self) -> Res {
        let r = match &self.side {
            Side::Send(s) => s.start(),
            Side::Recv(r) => r.start(),
        };
        core(r, &self.comm)
    }

    /// Completes the round in flight (waiting if `wait`): `Ok(true)` with
    /// its status written once it has finished (or none was active).
    ///
    /// # Safety
    /// `status` is a status or `MPI_STATUS_IGNORE`.
    pub(crate) unsafe fn complete(&mut self, status: *mut MpiStatus, wait: bool) -> Res<bool> {
        let r = match (&self.side, wait) {
            (Side::Send(s), true) => s.wait().map(Some),
            (Side::Send(s), false) => s.test(),
            (Side::Recv(r), true) => r.wait().map(Some),
            (Side::Recv(r), false) => r.test(),
        };
        let Some(st) = core(r, &self.comm)? else {
            return Ok(false);
        };
        if st.source_rank() == raw::PROC_NULL {
            // SAFETY: the caller's status pointer.
            unsafe { crate::request::store_status(status, crate::request::empty_status()) };
        } else {
            let mut s = raw::Status::empty();
            s.source = st.source_rank();
            s.tag = st.tag();
            s.count = st.byte_count();
            // SAFETY: as above.
            unsafe { crate::request::store_comm_status(status, &s) };
        }
        Ok(true)
    }

    pub(crate) fn is_done(&self) -> Res<bool> {
        // A round in flight is done when a test would complete it; the
        // test completes it only through `complete`, so look, don't touch.
        Ok(!self.is_active() || self.ready_to_complete())
    }

    fn ready_to_complete(&self) -> bool {
        match &self.side {
            Side::Send(s) => s.is_done(),
            Side::Recv(r) => r.is_done(),
        }
    }

    /// `MPI_Request_free`: a round in flight is waited for first. A send
    /// whose round still has partitions not marked ready could never
    /// complete (nobody can mark them once the handle is gone; MPI calls
    /// freeing an active partitioned request erroneous): refused with
    /// `MPI_ERR_REQUEST`, the request kept.
    pub(crate) fn release(&mut self) -> Res {
        if !self.is_active() {
            return Ok(());
        }
        if let Side::Send(s) = &self.side {
            if !s.all_ready() {
                return err(
                    abi::ERR_REQUEST,
                    "freeing an active partitioned send whose partitions are not all \
                     marked ready: its round could never complete",
                );
            }
        }
        // SAFETY: a null status is MPI_STATUS_IGNORE.
        unsafe { self.complete(std::ptr::null_mut(), true) }.map(drop)
    }

    pub(crate) fn cancel(&mut self) -> Res {
        err(
            abi::ERR_REQUEST,
            "a partitioned request cannot be cancelled",
        )
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if let Side::Send(s) = &self.side {
            // The program may free the buffer once the request is gone.
            s.close();
        }
    }
}

/// Checks an `_init` call's arguments, makes the side and stores the
/// request.
///
/// # Safety
/// `request` is valid for a write when not null; the buffer is as MPI
/// requires for the request's lifetime.
#[allow(clippy::too_many_arguments)]
unsafe fn init<I: crate::coll_large::Int>(
    func: &'static str,
    send: bool,
    buf: *const c_void,
    partitions: c_int,
    count: I,
    datatype: Datatype,
    peer: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    api_comm(func, comm, |c| {
        let p = out(request, "request")?;
        if partitions < 1 {
            return err(
                abi::ERR_ARG,
                format!("{partitions} partitions (at least one is needed)"),
            );
        }
        let n = count.to_count("count")?;
        let ty = type_ref(datatype)?;
        let parts = partitions as usize;
        let all = n
            .checked_mul(parts)
            .ok_or_else(|| MpiError::new(abi::ERR_COUNT, "partitions × count overflows"))?;
        ty.check_buffer(buf, all)?;
        let part_bytes = ty.bytes(n)?;
        ty.bytes(all)?;
        let (base, layout) = match ty.dense_offset() {
            Some(off) => (
                (buf as usize).wrapping_add(off as usize) as *mut u8,
                PartLayout::Bytes,
            ),
            None => (
                buf as *mut u8,
                PartLayout::Typed {
                    ty: ty.ty.clone(),
                    count: n,
                },
            ),
        };
        if peer == abi::ANY_SOURCE {
            return err(
                abi::ERR_RANK,
                "MPI_ANY_SOURCE is not allowed in partitioned communication",
            );
        }
        if tag == abi::ANY_TAG {
            return err(
                abi::ERR_TAG,
                "MPI_ANY_TAG is not allowed in partitioned communication",
            );
        }
        let tag = tag_arg(tag);
        let side = if send {
            // SAFETY: MPI's contract: the buffer holds the partitions while
            // the request exists and a ready partition is not changed
            // before its round completes.
            let s = unsafe { SendCore::new(&c.comm, base, layout, parts, part_bytes, peer, tag) };
            Side::Send(core(s, c)?)
        } else {
            // SAFETY: MPI's contract: the buffer is writable while the
            // request exists and untouched during a round except for
            // reading partitions that have arrived.
            let r = unsafe { RecvCore::new(&c.comm, base, layout, parts, part_bytes, peer, tag) };
            Side::Recv(Arc::new(core(r, c)?))
        };
        let datatype = hold(datatype)?;
        let held = match hold_comm(c) {
            Ok(h) => h,
            Err(e) => {
                release_held(datatype);
                return Err(e);
            }
        };
        let part = Part {
            side: side.clone(),
            comm: c.clone(),
        };
        let op = crate::persistent::P2p::partitioned(part, datatype, held);
        let h = crate::coll::store_persistent(c, op)?;
        let weak = match &side {
            Side::Send(s) => (Arc::downgrade(s), Weak::new()),
            Side::Recv(r) => (Weak::new(), Arc::downgrade(r)),
        };
        {
            let mut i = index().write().unwrap_or_else(|p| p.into_inner());
            // Handles of freed requests go (their sides are gone).
            i.retain(|_, (s, r, _)| s.strong_count() + r.strong_count() > 0);
            i.insert(h.0, (weak.0, weak.1, c.clone()));
        }
        // SAFETY: checked non-null above.
        unsafe { p.write(h) };
        Ok(())
    })
}

/// A partition number.
fn partition(i: c_int) -> Res<usize> {
    usize::try_from(i).map_err(|_| MpiError::new(abi::ERR_ARG, format!("partition {i}")))
}

/// The send side behind `h` (`MPI_ERR_REQUEST` for a receive).
fn send_side(h: Request) -> Res<(Arc<SendCore>, CommRef)> {
    match side_of(h)? {
        (Side::Send(s), c) => Ok((s, c)),
        (Side::Recv(_), c) => {
            Err(MpiError::new(abi::ERR_REQUEST, "a partitioned receive has no Pready").on(&c))
        }
    }
}

mpi_fn! {
    /// Creates a partitioned send of `partitions` partitions of `count`
    /// elements each (started by `MPI_Start`).
    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let _ = info;
        // SAFETY: MPI's contract for the buffer and the request pointer.
        unsafe { init("MPI_Psend_init", true, buf, partitions, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Psend_init`] with a large count.
    fn MPI_Psend_init_c / PMPI_Psend_init_c(buf: *const c_void, partitions: c_int, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let _ = info;
        // SAFETY: as above.
        unsafe { init("MPI_Psend_init_c", true, buf, partitions, count, datatype, dest, tag, comm, request) }
    }

    /// Creates a partitioned receive.
    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: c_int, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let _ = info;
        // SAFETY: as above.
        unsafe { init("MPI_Precv_init", false, buf, partitions, count, datatype, source, tag, comm, request) }
    }

    /// [`MPI_Precv_init`] with a large count.
    fn MPI_Precv_init_c / PMPI_Precv_init_c(buf: *mut c_void, partitions: c_int, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let _ = info;
        // SAFETY: as above.
        unsafe { init("MPI_Precv_init_c", false, buf, partitions, count, datatype, source, tag, comm, request) }
    }

    /// Marks one partition of an active partitioned send ready.
    fn MPI_Pready / PMPI_Pready(partition_: c_int, request: Request) -> c_int {
        api("MPI_Pready", || {
            let (s, c) = send_side(request)?;
            let i = partition(partition_).map_err(|e| e.on(&c))?;
            core(s.pready(i), &c)
        })
    }

    /// Marks partitions `low..=high` ready.
    fn MPI_Pready_range / PMPI_Pready_range(partition_low: c_int, partition_high: c_int, request: Request) -> c_int {
        api("MPI_Pready_range", || {
            let (s, c) = send_side(request)?;
            let lo = partition(partition_low).map_err(|e| e.on(&c))?;
            let hi = partition(partition_high).map_err(|e| e.on(&c))?;
            core(s.pready_range(lo, hi), &c)
        })
    }

    /// Marks the partitions of a list ready.
    fn MPI_Pready_list / PMPI_Pready_list(length: c_int, array_of_partitions: *const c_int, request: Request) -> c_int {
        api("MPI_Pready_list", || {
            let (s, c) = send_side(request)?;
            let n = usize::try_from(length)
                .map_err(|_| MpiError::new(abi::ERR_ARG, format!("list length {length}")).on(&c))?;
            if n > 0 && array_of_partitions.is_null() {
                return Err(MpiError::new(abi::ERR_ARG, "array_of_partitions is a null pointer").on(&c));
            }
            let list = if n == 0 {
                Vec::new()
            } else {
                // SAFETY: MPI's contract: `length` partition numbers.
                unsafe { std::slice::from_raw_parts(array_of_partitions, n) }
                    .iter()
                    .map(|&i| partition(i))
                    .collect::<Res<Vec<usize>>>()
                    .map_err(|e| e.on(&c))?
            };
            core(s.pready_list(&list), &c)
        })
    }

    /// Whether a partition of a partitioned receive has arrived.
    fn MPI_Parrived / PMPI_Parrived(request: Request, partition_: c_int, flag: *mut c_int) -> c_int {
        api("MPI_Parrived", || {
            let f = out(flag, "flag")?;
            if request == abi::REQUEST_NULL {
                // SAFETY: checked non-null.
                unsafe { f.write(1) };
                return Ok(());
            }
            let (r, c) = match side_of(request)? {
                (Side::Recv(r), c) => (r, c),
                (Side::Send(_), c) => {
                    return Err(MpiError::new(abi::ERR_REQUEST, "MPI_Parrived on a partitioned send").on(&c));
                }
            };
            let i = partition(partition_).map_err(|e| e.on(&c))?;
            let got = core(r.parrived(i), &c)?;
            // SAFETY: checked non-null.
            unsafe { f.write(c_int::from(got)) };
            Ok(())
        })
    }
}
