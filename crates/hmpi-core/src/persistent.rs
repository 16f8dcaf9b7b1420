//! Persistent point-to-point requests from Rust (`MPI_Send_init`,
//! `MPI_Ssend_init`, `MPI_Recv_init` with `MPI_Start`): an operation set
//! up once — communicator, peer, tag and buffer, checked then — and
//! started again and again, each start an ordinary nonblocking send or
//! receive of the engine.
//!
//! [`PersistentSend`] borrows its buffer for as long as it exists, so the
//! program cannot change the data of a send in flight; [`PersistentRecv`]
//! holds its buffer mutably and lends it back ([`PersistentRecv::buffer`])
//! only while inactive, so nothing reads a receive in flight. Starting an
//! active request is [`Error::Arg`]. Dropping an active request waits for
//! it (a send's receiver may still be reading). The C library's
//! `MPI_Send_init` family has requests of its own that start the C
//! nonblocking calls (datatypes included).
//!
//! ```no_run
//! use hmpi_core::persistent::{PersistentRecv, PersistentSend};
//! use hmpi_core::traits::*;
//! let universe = hmpi_core::initialize().unwrap();
//! let world = universe.world();
//! let (me, n) = (world.rank(), world.size());
//! let out = [me as u8; 4];
//! let mut inbox = [0u8; 4];
//! let mut send = PersistentSend::new(&world, &out[..], (me + 1) % n, 0).unwrap();
//! let mut recv = PersistentRecv::new(&world, &mut inbox[..], (me + n - 1) % n, 0).unwrap();
//! for _ in 0..100 {
//!     recv.start().unwrap();
//!     send.start().unwrap();
//!     send.wait().unwrap();
//!     recv.wait().unwrap();
//! }
//! assert_eq!(recv.buffer().unwrap()[0], ((me + n - 1) % n) as u8);
//! ```

use crate::comm::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut};
use crate::error::{Error, Result};
use crate::point_to_point::Status;
use crate::raw;

/// The status of a finished engine request, in `comm`'s ranks.
fn outcome(comm: &SimpleCommunicator, r: raw::EngineResult<raw::Status>) -> Result<Status> {
    let mut st = r.and_then(|st| st.into_result())?;
    st.source = raw::source_in(comm, st.source);
    Ok(Status::from_engine(st, None))
}

/// The status of an inactive request's completion.
fn empty() -> Status {
    Status::from_engine(raw::Status::empty(), None)
}

fn active_error(what: &str) -> Error {
    Error::Arg {
        reason: format!("{what} on a persistent request that is still active"),
    }
}

/// A persistent standard or synchronous send of a borrowed buffer.
pub struct PersistentSend<'b> {
    comm: SimpleCommunicator,
    buf: &'b [u8],
    dest: i32,
    tag: i32,
    sync: bool,
    active: Option<raw::Request<'b>>,
}

impl<'b> PersistentSend<'b> {
    /// A persistent standard-mode send of `buf` to `dest` with `tag`
    /// (`MPI_Send_init`), inactive; `dest` and `tag` are checked now.
    pub fn new<B: Buffer + ?Sized>(
        comm: &SimpleCommunicator,
        buf: &'b B,
        dest: i32,
        tag: i32,
    ) -> Result<Self> {
        raw::send_target(comm, dest, tag)?;
        Ok(PersistentSend {
            comm: comm.clone(),
            buf: buf.as_bytes(),
            dest,
            tag,
            sync: false,
            active: None,
        })
    }

    /// [`PersistentSend::new`] in synchronous mode (`MPI_Ssend_init`):
    /// each start completes once the receiver has matched it.
    pub fn new_synchronous<B: Buffer + ?Sized>(
        comm: &SimpleCommunicator,
        buf: &'b B,
        dest: i32,
        tag: i32,
    ) -> Result<Self> {
        let mut s = PersistentSend::new(comm, buf, dest, tag)?;
        s.sync = true;
        Ok(s)
    }

    /// Starts the send (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(active_error("start"));
        }
        // SAFETY: the request is kept in `self` and completed by `wait`,
        // `test` or the drop (which waits), never leaked; `buf` is
        // borrowed for `'b`, longer than `self`.
        let r = unsafe { raw::isend(&self.comm, self.buf, self.dest, self.tag, self.sync) }?;
        self.active = Some(r);
        Ok(())
    }

    /// Whether a start is in flight.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Waits for the start in flight (an inactive request returns an
    /// empty status at once); the request becomes inactive.
    pub fn wait(&mut self) -> Result<Status> {
        match self.active.take() {
            None => Ok(empty()),
            Some(r) => outcome(&self.comm, r.wait()),
        }
    }

    /// Whether the start in flight has finished: its status once (the
    /// request becomes inactive), `None` while it runs.
    pub fn test(&mut self) -> Result<Option<Status>> {
        let Some(r) = self.active.as_mut() else {
            return Ok(Some(empty()));
        };
        match r.test() {
            Ok(None) => Ok(None),
            done => {
                self.active = None;
                outcome(
                    &self.comm,
                    done.map(|s| s.unwrap_or_else(raw::Status::empty)),
                )
                .map(Some)
            }
        }
    }
}

impl Drop for PersistentSend<'_> {
    fn drop(&mut self) {
        let _ = self.wait();
    }
}

/// A persistent receive into a buffer it holds.
pub struct PersistentRecv<'b> {
    comm: SimpleCommunicator,
    buf: &'b mut [u8],
    source: i32,
    tag: i32,
    active: Option<raw::Request<'b>>,
}

impl<'b> PersistentRecv<'b> {
    /// A persistent receive into `buf` from `source` (or
    /// [`crate::ANY_SOURCE`]) with `tag` (or [`crate::ANY_TAG`])
    /// (`MPI_Recv_init`), inactive; `source` and `tag` are checked now.
    pub fn new<B: BufferMut + ?Sized>(
        comm: &SimpleCommunicator,
        buf: &'b mut B,
        source: i32,
        tag: i32,
    ) -> Result<Self> {
        raw::recv_target(comm, source, tag)?;
        Ok(PersistentRecv {
            comm: comm.clone(),
            buf: buf.as_bytes_mut(),
            source,
            tag,
            active: None,
        })
    }

    /// Starts the receive (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(active_error("start"));
        }
        let (at, len) = (self.buf.as_mut_ptr(), self.buf.len());
        // SAFETY: `buf` is held mutably by `self` for `'b` and lent out
        // only while no start is in flight (`buffer`), so only the engine
        // touches it until the request completes; the request is kept in
        // `self` and completed by `wait`, `test` or the drop (which
        // waits), never leaked.
        let r = unsafe { raw::irecv_raw(&self.comm, at, len, self.source, self.tag) }?;
        self.active = Some(r);
        Ok(())
    }

    /// Whether a start is in flight.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Waits for the start in flight (an inactive request returns an
    /// empty status at once); a longer message is [`Error::Truncate`].
    pub fn wait(&mut self) -> Result<Status> {
        match self.active.take() {
            None => Ok(empty()),
            Some(r) => outcome(&self.comm, r.wait()),
        }
    }

    /// Whether the start in flight has finished: its status once (the
    /// request becomes inactive), `None` while it runs.
    pub fn test(&mut self) -> Result<Option<Status>> {
        let Some(r) = self.active.as_mut() else {
            return Ok(Some(empty()));
        };
        match r.test() {
            Ok(None) => Ok(None),
            done => {
                self.active = None;
                outcome(
                    &self.comm,
                    done.map(|s| s.unwrap_or_else(raw::Status::empty)),
                )
                .map(Some)
            }
        }
    }

    /// The buffer, while no start is in flight ([`Error::Arg`] otherwise).
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        if self.active.is_some() {
            return Err(active_error("reading the buffer"));
        }
        Ok(self.buf)
    }
}

impl Drop for PersistentRecv<'_> {
    fn drop(&mut self) {
        let _ = self.wait();
    }
}
