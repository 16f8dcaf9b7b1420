//! OPI for C: `OPI_Alloc`, `OPI_Free`, `OPI_Give`, `OPI_Igive`,
//! `OPI_Take`, `OPI_Itake` (`include/opi.h`), thin wrappers over the `opi`
//! crate's untyped core ([`opi::raw`]).
//!
//! The program keeps only a pointer; [`opi::raw::block_at`] finds the rest
//! of its node-heap block (any block of the heap: from `OPI_Alloc`,
//! `OPI_Take` or `malloc`). Giving a buffer hands its address to the
//! receiver; taking one returns a block that the taker owns (the giver's
//! very block when both sides use the node heap). Give and free set the
//! program's pointer to NULL; a failed give leaves it, and the buffer, to
//! the program. Only dense datatypes may travel by ownership: `count`
//! elements are the first `count * size` bytes of the buffer.
//!
//! In C:
//! ```c
//! double *buf;
//! OPI_Alloc(&buf, n * sizeof *buf);
//! fill(buf, n);
//! OPI_Give(&buf, n, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);   // buf == NULL now
//! // on rank 1:
//! double *got;
//! OPI_Take(&got, n, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
//! use(got);
//! OPI_Free(&got);
//! ```

use crate::abi::{self, Comm, Datatype, MpiStatus, Request};
use crate::comm::{source_arg, tag_arg, CommEntry};
use crate::datatype::{bytes_of, count_arg, dense_predefined_size, type_ref};
use crate::errors::{api, api_comm, err, out, MpiError, Res};
use crate::request::{empty_status, insert, store_status, EngineReq, Extra, ReqEntry, Rest, Taken};
use hmpi_core::raw as checks;
use opi::raw::{self, OwnedBlock};
use std::ffi::{c_int, c_void};

/// The program's pointer variable behind a `void *ptr` argument.
fn slot(ptr: *mut c_void) -> Res<*mut *mut u8> {
    out(ptr.cast::<*mut u8>(), "ptr")
}

/// Bytes of `count` elements of `dt`, which must be a dense type: a
/// predefined type's size from the message path's table (one load, where
/// looking up the type's description costs some 60 instructions before a
/// give can start), any other type's from its description.
fn dense_bytes(count: c_int, dt: Datatype) -> Res<usize> {
    if let Some(size) = dense_predefined_size(dt) {
        return bytes_of(count_arg(count)?, size);
    }
    let ty = type_ref(dt)?;
    if ty.dense_offset() != Some(0) {
        return err(
            abi::ERR_TYPE,
            "ownership passing needs a dense datatype (no gaps, lower bound 0)",
        );
    }
    ty.bytes(count_arg(count)?)
}

/// The node-heap block the program's pointer names, for a give of
/// `bytes` bytes.
///
/// # Safety
/// `p` is null or the start of a live heap block the caller owns.
unsafe fn given_block(p: *mut u8, bytes: usize) -> Res<OwnedBlock> {
    if p.is_null() {
        return err(abi::ERR_BUFFER, "the pointer to give is NULL");
    }
    // SAFETY: the caller's guarantee.
    let Some(mut b) = (unsafe { raw::block_at(p) }) else {
        return err(
            abi::ERR_BUFFER,
            format!("{p:p} is not a buffer of the node heap (OPI_Alloc, OPI_Take or malloc)"),
        );
    };
    if bytes > b.len {
        return err(
            abi::ERR_COUNT,
            format!("{bytes} bytes do not fit the {}-byte buffer", b.len),
        );
    }
    b.len = bytes;
    Ok(b)
}

/// A give of the buffer the program's pointer variable `ptr` names, its
/// first `count` elements: checks the arguments (the destination and the
/// tag too), gives the block with `send` (`raw::give` or `raw::igive`)
/// and, on success, sets the variable to NULL; on error the buffer is
/// still the program's.
///
/// # Safety
/// `ptr` is valid for a read and a write of a pointer; `send` gives the
/// block up only when it succeeds.
#[inline(always)]
unsafe fn give_with<R>(
    c: &CommEntry,
    ptr: *mut c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    send: impl FnOnce(OwnedBlock) -> hmpi_core::Result<R>,
) -> Res<R> {
    let p = slot(ptr)?;
    let bytes = dense_bytes(count, dt)?;
    checks::route(&c.comm, dest)?;
    checks::check_send_tag(tag)?;
    // SAFETY: checked non-null; the program's pointer variable, which
    // names a buffer the program owns.
    let b = unsafe { given_block(p.read(), bytes) }?;
    let r = send(b)?;
    // SAFETY: checked non-null above; the block is given up.
    unsafe { p.write(std::ptr::null_mut()) };
    Ok(r)
}

/// A taken block for the program: checks that it is flat and fits
/// `max` bytes, else frees it. The pointer to store, or the error.
pub(crate) fn accept(b: &OwnedBlock, max: usize) -> Result<*mut u8, (c_int, String)> {
    if !raw::is_flat(b) {
        // SAFETY: ours, not used again.
        unsafe { raw::free(*b) };
        return Err((
            abi::ERR_TYPE,
            "a value that owns further heap blocks cannot be taken as bytes".into(),
        ));
    }
    if b.len > max {
        let len = b.len;
        // SAFETY: ours, not used again.
        unsafe { raw::free(*b) };
        return Err((
            abi::ERR_TRUNCATE,
            format!("a {len}-byte buffer where at most {max} bytes were expected"),
        ));
    }
    Ok(b.ptr.as_ptr())
}

/// A buffer of `len` bytes from this rank's pool, stored in `*ptr`.
///
/// # Safety
/// `ptr` is the address of a pointer variable.
#[no_mangle]
pub unsafe extern "C" fn OPI_Alloc(ptr: *mut c_void, len: usize) -> c_int {
    api("OPI_Alloc", || {
        let p = slot(ptr)?;
        let b = raw::alloc(len)?;
        // SAFETY: checked non-null; the program's pointer variable.
        unsafe { p.write(b.ptr.as_ptr()) };
        Ok(())
    })
}

/// Returns `*ptr`'s buffer to the pool; `*ptr` becomes NULL (NULL: nothing
/// to do).
///
/// # Safety
/// `ptr` is the address of a pointer variable holding NULL or a buffer
/// from `OPI_Alloc`, `OPI_Take` or `malloc` that the caller owns.
#[no_mangle]
pub unsafe extern "C" fn OPI_Free(ptr: *mut c_void) -> c_int {
    api("OPI_Free", || {
        let p = slot(ptr)?;
        // SAFETY: checked non-null.
        let b = unsafe { p.read() };
        if b.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's guarantee: a live heap block it owns.
        let Some(block) = (unsafe { raw::block_at(b) }) else {
            return err(
                abi::ERR_BUFFER,
                format!("{b:p} is not a buffer of the node heap"),
            );
        };
        // SAFETY: the caller's block, given up now.
        unsafe {
            raw::free(block);
            p.write(std::ptr::null_mut());
        }
        Ok(())
    })
}

/// Gives `*ptr`'s buffer (`count` elements of `datatype`) to `dest`;
/// `*ptr` becomes NULL.
///
/// # Safety
/// `ptr` is the address of a pointer variable holding a buffer the caller
/// owns (from `OPI_Alloc`, `OPI_Take` or `malloc`).
#[no_mangle]
pub unsafe extern "C" fn OPI_Give(
    ptr: *mut c_void,
    count: c_int,
    datatype: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
) -> c_int {
    api_comm("OPI_Give", comm, |c| {
        // SAFETY: the caller's guarantee; `raw::give` gives the block up
        // only on success, and then `give_with` clears the pointer.
        unsafe {
            give_with(c, ptr, count, datatype, dest, tag, |b| {
                raw::give(b, &c.comm, dest, tag, datatype.0 as u64)
            })
        }
    })
}

/// `OPI_Give` as a request (complete at once); `*ptr` becomes NULL.
///
/// # Safety
/// As for `OPI_Give`; `request` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn OPI_Igive(
    ptr: *mut c_void,
    count: c_int,
    datatype: Datatype,
    dest: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    api_comm("OPI_Igive", comm, |c| {
        out(request, "request")?;
        // SAFETY: as in `OPI_Give`.
        let r = unsafe {
            give_with(c, ptr, count, datatype, dest, tag, |b| {
                raw::igive(b, &c.comm, dest, tag, datatype.0 as u64)
            })
        }?;
        let h = insert(ReqEntry {
            req: EngineReq(r),
            rest: Rest::plain(c.clone()),
        })?;
        // SAFETY: checked non-null.
        unsafe { request.write(h) };
        Ok(())
    })
}

/// Takes a buffer of at most `count` elements from `source`: `*ptr` is the
/// taken buffer (NULL for `MPI_PROC_NULL` or on error).
///
/// # Safety
/// `ptr` is the address of a pointer variable; `status` is null or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn OPI_Take(
    ptr: *mut c_void,
    count: c_int,
    datatype: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut MpiStatus,
) -> c_int {
    api_comm("OPI_Take", comm, |c| {
        let p = slot(ptr)?;
        let max = dense_bytes(count, datatype)?;
        checks::route_source(&c.comm, source_arg(source))?;
        if source == abi::PROC_NULL {
            // SAFETY: checked non-null; the caller's status pointer.
            unsafe {
                p.write(std::ptr::null_mut());
                store_status(status, empty_status());
            }
            return Ok(());
        }
        // SAFETY: checked non-null.
        unsafe { p.write(std::ptr::null_mut()) };
        // The block stays where the engine wrote it (see `raw::take_into`).
        let mut taken = None;
        let st = raw::take_into(&c.comm, source_arg(source), tag_arg(tag), &mut taken)?;
        let b = taken
            .as_ref()
            .ok_or_else(|| MpiError::new(abi::ERR_INTERN, "a take finished without a block"))?;
        let mut s = MpiStatus {
            source: st.source_rank(),
            tag: st.tag(),
            error: abi::SUCCESS,
            internal: [
                st.byte_count() as u32 as c_int,
                (st.byte_count() >> 32) as u32 as c_int,
                c_int::from(st.is_cancelled()),
                0,
                0,
            ],
        };
        let r = accept(b, max);
        if let Err((code, _)) = &r {
            s.error = *code;
        }
        // SAFETY: the caller's status pointer.
        unsafe { store_status(status, s) };
        let got = r.map_err(|(code, msg)| MpiError::new(code, msg))?;
        // SAFETY: checked non-null.
        unsafe { p.write(got) };
        Ok(())
    })
}

/// `OPI_Take` as a request: `*ptr` is set when it completes.
///
/// # Safety
/// `ptr` is the address of a pointer variable that stays valid until the
/// request completes; `request` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn OPI_Itake(
    ptr: *mut c_void,
    count: c_int,
    datatype: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    api_comm("OPI_Itake", comm, |c| {
        let p = slot(ptr)?;
        out(request, "request")?;
        let max = dense_bytes(count, datatype)?;
        checks::route_source(&c.comm, source_arg(source))?;
        // SAFETY: checked non-null.
        unsafe { p.write(std::ptr::null_mut()) };
        let mut slot_box: Box<Option<OwnedBlock>> = Box::new(None);
        let target: *mut Option<OwnedBlock> = &mut *slot_box;
        // SAFETY: the box is kept beside the request until the request is
        // gone (see `ReqEntry`'s drop order), and its address does not
        // change when the box moves; the request is stored and completed
        // by the request routines, never leaked.
        let r = unsafe { raw::itake(&mut *target, &c.comm, source_arg(source), tag_arg(tag)) }?;
        let h = insert(ReqEntry {
            req: EngineReq(r),
            rest: Rest::with(
                c.clone(),
                Some(Extra::Taken(Taken {
                    slot: slot_box,
                    dst: p,
                    max,
                })),
            ),
        })?;
        // SAFETY: checked non-null.
        unsafe { request.write(h) };
        Ok(())
    })
}
