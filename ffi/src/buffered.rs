//! Buffered sends of the C interface: `MPI_Buffer_attach`,
//! `MPI_Buffer_detach`, `MPI_Buffer_flush`, `MPI_Bsend`, `MPI_Ibsend`,
//! `MPI_Bsend_init` and their large-count forms, through
//! `hmpi_core::buffered` (which keeps the attached buffer's capacity: a
//! message that does not fit is `MPI_ERR_BUFFER`; detaching waits for the
//! buffered messages to go).
//!
//! A non-contiguous datatype is packed first; the buffered copy is of the
//! packed bytes. `MPI_Ibsend` copies as `MPI_Bsend` does, so its request
//! is complete at once. `MPI_Bsend_init` makes a persistent request (see
//! [`crate::persistent`]) whose every start is an `MPI_Ibsend`.
//! A communicator may have a buffer of its own (MPI 4.1:
//! `MPI_Comm_attach_buffer`, `_detach_buffer`, `_flush_buffer`), which its
//! buffered sends use instead of the process's. `MPI_Buffer_iflush` and
//! `MPI_Comm_iflush_buffer` flush at the call and give a request that is
//! complete already (as `MPI_Ibsend`'s); sessions have buffers too
//! ([`crate::session`]).
//! `MPI_BUFFER_AUTOMATIC` is refused with `MPI_ERR_BUFFER`: the program
//! attaches memory of its own.
//!
//! In C:
//! ```c
//! int size = 1000 * sizeof(double) + MPI_BSEND_OVERHEAD;
//! char *space = malloc(size);
//! MPI_Buffer_attach(space, size);
//! MPI_Bsend(data, 1000, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD);   // returns at once
//! MPI_Buffer_detach(&space, &size);   // waits until the message has gone
//! ```

use crate::abi::{self, Comm, Count, Datatype, Request};
use crate::coll_large::Int;
use crate::comm::CommEntry;
use crate::datatype::type_ref;
use crate::errors::{api, api_comm, err, out, MpiError, Res};
use hmpi_core::buffered;
use std::ffi::{c_int, c_void};

/// `MPI_BUFFER_AUTOMATIC`.
const BUFFER_AUTOMATIC: usize = 2;

/// Attaches `size` bytes at `buffer` (to `comm`, or to the process).
fn attach(comm: Option<&CommEntry>, buffer: *mut c_void, size: Count) -> Res {
    if buffer as usize == BUFFER_AUTOMATIC {
        return err(
            abi::ERR_BUFFER,
            "MPI_BUFFER_AUTOMATIC is not supported: attach a buffer of the program's own",
        );
    }
    let n = usize::try_from(size)
        .map_err(|_| MpiError::new(abi::ERR_ARG, format!("negative buffer size {size}")))?;
    if buffer.is_null() && n > 0 {
        return err(abi::ERR_BUFFER, "buffer is a null pointer");
    }
    // SAFETY: MPI's contract: the memory stays valid until detached.
    unsafe {
        match comm {
            Some(c) => buffered::attach_to(&c.comm, buffer.cast(), n),
            None => buffered::attach(buffer.cast(), n),
        }
    }?;
    Ok(())
}

/// Detaches the buffer, writing its address to `*buffer_addr` (a
/// `void **`) and its size through `put`.
fn detach(
    comm: Option<&CommEntry>,
    buffer_addr: *mut c_void,
    put_size: impl FnOnce(usize) -> Res,
) -> Res {
    let p = out(buffer_addr.cast::<*mut c_void>(), "buffer_addr")?;
    let (base, size) = match comm {
        Some(c) => buffered::detach_from(&c.comm),
        None => buffered::detach(),
    }?;
    // SAFETY: checked non-null; `buffer_addr` points to a `void *` (MPI's
    // contract).
    unsafe { p.write(base.cast()) };
    put_size(size)
}

/// A buffered send of `count` elements of `datatype` at `buf`.
///
/// # Safety
/// `buf` holds `count` elements of `datatype` (MPI's contract).
unsafe fn bsend<I: Int>(
    c: &CommEntry,
    buf: *const c_void,
    count: I,
    datatype: Datatype,
    dest: c_int,
    tag: c_int,
) -> Res {
    let n = count.to_count("count")?;
    if n == 0 && dest == abi::PROC_NULL && datatype == abi::DATATYPE_NULL {
        return Ok(());
    }
    let ty = type_ref(datatype)?;
    ty.check_buffer(buf, n)?;
    let bytes = ty.bytes(n)?;
    let packed;
    let data: &[u8] = match ty.dense_offset() {
        _ if bytes == 0 => &[],
        // SAFETY: the caller's guarantee: `n` dense elements start at
        // `buf + off`.
        Some(off) => unsafe {
            std::slice::from_raw_parts(buf.cast::<u8>().wrapping_offset(off), bytes)
        },
        None => {
            let mut v = vec![0u8; bytes];
            // SAFETY: the caller's guarantee.
            unsafe { ty.pack(buf.cast(), n, &mut v) };
            packed = v;
            &packed
        }
    };
    buffered::bsend(&c.comm, data, dest, tag)?;
    Ok(())
}

/// `MPI_Ibsend`: the copy is made now, so the request is complete.
///
/// # Safety
/// As for [`bsend`]; `request` is valid for a write when not null.
#[allow(clippy::too_many_arguments)]
unsafe fn ibsend<I: Int>(
    func: &'static str,
    buf: *const c_void,
    count: I,
    datatype: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    api_comm(func, comm, |c| {
        let p = out(request, "request")?;
        // SAFETY: the caller's guarantee.
        unsafe { bsend(c, buf, count, datatype, dest, tag) }?;
        let h = crate::coll::completed(c.clone())?;
        // SAFETY: checked non-null.
        unsafe { p.write(h) };
        Ok(())
    })
}

mpi_fn! {
    /// Attaches the buffer that buffered sends take their capacity from.
    fn MPI_Buffer_attach / PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
        api("MPI_Buffer_attach", || attach(None, buffer, Count::from(size)))
    }

    /// [`MPI_Buffer_attach`] with a large size.
    fn MPI_Buffer_attach_c / PMPI_Buffer_attach_c(buffer: *mut c_void, size: Count) -> c_int {
        api("MPI_Buffer_attach_c", || attach(None, buffer, size))
    }

    /// Waits for the buffered messages to go, then detaches the buffer
    /// (its address to `*(void **)buffer_addr`, its size to `*size`).
    fn MPI_Buffer_detach / PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        api("MPI_Buffer_detach", || {
            out(size, "size")?;
            detach(None, buffer_addr, |n| {
                // An int-sized buffer was attached through the int form;
                // a larger one is reported as large as an int can say.
                let n = c_int::try_from(n).unwrap_or(c_int::MAX);
                // SAFETY: checked non-null.
                unsafe { size.write(n) };
                Ok(())
            })
        })
    }

    /// [`MPI_Buffer_detach`] with a large size.
    fn MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut Count) -> c_int {
        api("MPI_Buffer_detach_c", || {
            out(size, "size")?;
            detach(None, buffer_addr, |n| {
                // SAFETY: checked non-null.
                unsafe { size.write(n as Count) };
                Ok(())
            })
        })
    }

    /// Waits until every buffered message has gone (the buffer stays).
    fn MPI_Buffer_flush / PMPI_Buffer_flush() -> c_int {
        api("MPI_Buffer_flush", || Ok(buffered::flush()?))
    }

    /// Attaches a buffer to `comm` (MPI 4.1): its buffered sends take their
    /// capacity from it instead of the process's buffer.
    fn MPI_Comm_attach_buffer / PMPI_Comm_attach_buffer(comm: Comm, buffer: *mut c_void, size: c_int) -> c_int {
        api_comm("MPI_Comm_attach_buffer", comm, |c| attach(Some(c), buffer, Count::from(size)))
    }

    /// [`MPI_Comm_attach_buffer`] with a large size.
    fn MPI_Comm_attach_buffer_c / PMPI_Comm_attach_buffer_c(comm: Comm, buffer: *mut c_void, size: Count) -> c_int {
        api_comm("MPI_Comm_attach_buffer_c", comm, |c| attach(Some(c), buffer, size))
    }

    /// Waits for `comm`'s buffered messages to go, then detaches its buffer.
    fn MPI_Comm_detach_buffer / PMPI_Comm_detach_buffer(comm: Comm, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        api_comm("MPI_Comm_detach_buffer", comm, |c| {
            out(size, "size")?;
            detach(Some(c), buffer_addr, |n| {
                // SAFETY: checked non-null.
                unsafe { size.write(c_int::try_from(n).unwrap_or(c_int::MAX)) };
                Ok(())
            })
        })
    }

    /// [`MPI_Comm_detach_buffer`] with a large size.
    fn MPI_Comm_detach_buffer_c / PMPI_Comm_detach_buffer_c(comm: Comm, buffer_addr: *mut c_void, size: *mut Count) -> c_int {
        api_comm("MPI_Comm_detach_buffer_c", comm, |c| {
            out(size, "size")?;
            detach(Some(c), buffer_addr, |n| {
                // SAFETY: checked non-null.
                unsafe { size.write(n as Count) };
                Ok(())
            })
        })
    }

    /// Waits until `comm`'s buffered messages have gone.
    fn MPI_Comm_flush_buffer / PMPI_Comm_flush_buffer(comm: Comm) -> c_int {
        api_comm("MPI_Comm_flush_buffer", comm, |c| Ok(buffered::flush_comm(&c.comm)?))
    }

    /// [`MPI_Buffer_flush`] as a request (flushed at the call; the request
    /// is complete already).
    fn MPI_Buffer_iflush / PMPI_Buffer_iflush(request: *mut Request) -> c_int {
        api("MPI_Buffer_iflush", || {
            out(request, "request")?;
            buffered::flush()?;
            crate::session::completed_request(request)
        })
    }

    /// [`MPI_Comm_flush_buffer`] as a request (flushed at the call; the
    /// request is complete already).
    fn MPI_Comm_iflush_buffer / PMPI_Comm_iflush_buffer(comm: Comm, request: *mut Request) -> c_int {
        api_comm("MPI_Comm_iflush_buffer", comm, |c| {
            let p = out(request, "request")?;
            buffered::flush_comm(&c.comm)?;
            let r = crate::coll::completed(c.clone())?;
            // SAFETY: checked non-null; the caller's request variable.
            unsafe { p.write(r) };
            Ok(())
        })
    }

    /// Sends in buffered mode: copies the message and returns.
    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Bsend", comm, |c| unsafe { bsend(c, buf, count, datatype, dest, tag) })
    }

    /// [`MPI_Bsend`] with a large count.
    fn MPI_Bsend_c / PMPI_Bsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        // SAFETY: MPI's contract for the buffer.
        api_comm("MPI_Bsend_c", comm, |c| unsafe { bsend(c, buf, count, datatype, dest, tag) })
    }

    /// Starts a buffered send (complete at once: the message is copied).
    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: MPI's contract for the buffer and the request pointer.
        unsafe { ibsend("MPI_Ibsend", buf, count, datatype, dest, tag, comm, request) }
    }

    /// [`MPI_Ibsend`] with a large count.
    fn MPI_Ibsend_c / PMPI_Ibsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        // SAFETY: MPI's contract for the buffer and the request pointer.
        unsafe { ibsend("MPI_Ibsend_c", buf, count, datatype, dest, tag, comm, request) }
    }
}
