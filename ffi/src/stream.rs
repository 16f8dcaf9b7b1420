//! Explicit streams with MPICH's signatures (`MPIX_Stream`, declared in
//! `mpi.h` beside the standard ABI): `MPIX_Stream_create` reserves a VCI
//! of this rank for the calling thread, `MPIX_Stream_comm_create` makes a
//! communicator bound to the members' streams, `MPIX_Stream_free` gives
//! the stream back (its communicators keep the VCI until they are freed).
//! The semantics are hmpi-core's ([`hmpi_core::stream`]): a program with
//! `N` streams per rank runs with `HMPI_VCIS` ≥ `N + 1`.
//!
//! ```c
//! MPIX_Stream s;
//! MPIX_Stream_create(MPI_INFO_NULL, &s);
//! MPI_Comm c;
//! MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &c);  /* collective */
//! MPI_Send(buf, n, MPI_BYTE, peer, 0, c);          /* on the stream's VCIs */
//! MPI_Comm_free(&c);
//! MPIX_Stream_free(&s);
//! ```
//!
//! A stream handle is used by one thread at a time: a second thread that
//! passes it while `MPIX_Stream_comm_create` runs gets `MPI_ERR_ARG`.
//!
//! Thread endpoints, with the MPI Forum proposal's signature:
//! `MPIX_Comm_create_endpoints(parent, my_num_ep, info, handles)` is
//! collective over `parent` and writes `my_num_ep` communicator handles,
//! one per endpoint of this process, each an ordinary `MPI_Comm` whose
//! `MPI_Comm_rank` is the endpoint's rank (ranks ordered by parent rank,
//! then by endpoint index) and which every point-to-point and collective
//! routine takes; each is freed with `MPI_Comm_free`. The semantics are
//! hmpi-core's ([`hmpi_core::endpoints`]): `my_num_ep` endpoints need
//! `my_num_ep` VCIs of this rank (`HMPI_VCIS` ≥ `my_num_ep + 1` gives each
//! one of its own, VCI 0 serves one if needed).
//!
//! ```c
//! MPI_Comm ep[4];
//! MPIX_Comm_create_endpoints(MPI_COMM_WORLD, 4, MPI_INFO_NULL, ep);
//! /* thread i: */ MPI_Comm_rank(ep[i], &r); MPI_Send(..., ep[i]); MPI_Comm_free(&ep[i]);
//! ```

use crate::abi::{self, Comm, Info as InfoH};
use crate::comm::store_comm;
use crate::errors::{api, api_comm, err, out, MpiError};
use crate::handles::{Miss, Table};
use hmpi_core::stream::{comm_on, Stream};
use std::ffi::c_int;

/// `MPIX_Stream`: a handle of the C interface (a pointer-sized integer).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamH(pub usize);

/// `MPIX_STREAM_NULL`.
pub const STREAM_NULL: StreamH = StreamH(0);

/// The kind tag of stream handles (see [`crate::handles`]), far from the
/// standard kinds.
const KIND_STREAM: usize = 0x30;

static STREAMS: Table<Stream> = Table::new(KIND_STREAM);

fn bad(h: StreamH, why: Miss) -> MpiError {
    match why {
        Miss::Busy => MpiError::new(
            abi::ERR_ARG,
            format!("stream {:#x} is in use by another thread", h.0),
        ),
        Miss::Unknown => MpiError::new(
            abi::ERR_ARG,
            format!(
                "{:#x} is not a stream (freed, or another kind of handle)",
                h.0
            ),
        ),
    }
}

mpi_fn! {
    /// Reserves a VCI of this rank for a new stream (`MPIX_Stream_create`).
    /// Info keys `type` and `value` (MPICH's GPU streams) are refused;
    /// others are ignored.
    fn MPIX_Stream_create / PMPIX_Stream_create(info: InfoH, stream: *mut StreamH) -> c_int {
        api("MPIX_Stream_create", || {
            let p = out(stream, "stream")?;
            let hints = crate::info::hints_of(info)?;
            if let Some(t) = hints.get("type") {
                return err(
                    abi::ERR_INFO_VALUE,
                    format!("type={t}: only host streams (no type key) are supported"),
                );
            }
            let s = Stream::new()?;
            let h = STREAMS
                .insert(s)
                .ok_or_else(|| MpiError::new(abi::ERR_NO_MEM, "too many streams"))?;
            // SAFETY: checked non-null; the caller's handle pointer.
            unsafe { p.write(StreamH(h)) };
            Ok(())
        })
    }

    /// Frees a stream; `*stream` becomes `MPIX_STREAM_NULL`
    /// (`MPIX_Stream_free`). Communicators bound to it keep its VCI until
    /// they are freed.
    fn MPIX_Stream_free / PMPIX_Stream_free(stream: *mut StreamH) -> c_int {
        api("MPIX_Stream_free", || {
            let p = out(stream, "stream")?;
            // SAFETY: checked non-null; the caller's handle.
            let h = unsafe { p.read() };
            if h == STREAM_NULL {
                return err(abi::ERR_ARG, "MPIX_STREAM_NULL is not a stream");
            }
            STREAMS.remove(h.0).map_err(|m| bad(h, m))?;
            // SAFETY: as above.
            unsafe { p.write(STREAM_NULL) };
            Ok(())
        })
    }

    /// A duplicate of `comm` bound to its members' streams, this rank's
    /// being `stream` (`MPIX_STREAM_NULL`: none), as
    /// `MPIX_Stream_comm_create`. Collective over `comm`.
    fn MPIX_Stream_comm_create / PMPIX_Stream_comm_create(comm: Comm, stream: StreamH, newcomm: *mut Comm) -> c_int {
        api_comm("MPIX_Stream_comm_create", comm, |c| {
            out(newcomm, "newcomm")?;
            let made = if stream == STREAM_NULL {
                comm_on(&c.comm, None)
            } else {
                let s = STREAMS.checkout(stream.0).map_err(|m| bad(stream, m))?;
                let r = comm_on(&c.comm, Some(&s));
                STREAMS.checkin(stream.0, s);
                r
            };
            let d = made?;
            // SAFETY: checked non-null.
            unsafe { store_comm(c, Some(d), newcomm) }
        })
    }

    /// Creates `my_num_ep` endpoints of this process in a new communicator
    /// of every member's endpoints and writes one handle per endpoint to
    /// `out_comm_handles` (`MPIX_Comm_create_endpoints`). Collective over
    /// `parent`; a count out of range (here `MPI_ERR_ARG`, elsewhere
    /// `MPI_ERR_COMM`) or too few VCIs fails on every member. Info keys
    /// are ignored.
    fn MPIX_Comm_create_endpoints / PMPIX_Comm_create_endpoints(parent: Comm, my_num_ep: c_int, info: InfoH, out_comm_handles: *mut Comm) -> c_int {
        api_comm("MPIX_Comm_create_endpoints", parent, |c| {
            let handles = out(out_comm_handles, "out_comm_handles")?;
            crate::info::hints_of(info)?;
            // A negative count is out of range like 0: reported by the
            // collective call, so that no member waits for this one.
            let n = usize::try_from(my_num_ep).unwrap_or(0);
            let eps = c.comm.create_endpoints(n)?;
            for (i, e) in eps.into_iter().enumerate() {
                // SAFETY: checked non-null; the caller's array holds
                // `my_num_ep` handles (the proposal's contract), and
                // `i < my_num_ep`.
                unsafe { store_comm(c, Some(e.into_comm()), handles.add(i))? };
            }
            Ok(())
        })
    }
}
