//! Persistent point-to-point requests from Rust (`MPI_Send_init`,
//! `MPI_Ssend_init`, `MPI_Recv_init` with `MPI_Start`): an operation set
//! up once — communicator, peer, tag and buffer, checked then — and
//! started again and again, each start an ordinary nonblocking send or
//! receive of the engine.
//!
//! [`PersistentSend`] borrows its buffer for as long as it exists, so the
//! program cannot change the data of a send in flight; [`PersistentRecv`]
//! holds its buffer mutably and lends it back ([`PersistentRecv::buffer`])
//! only while inactive, so nothing reads a receive in flight. Each start
//! belongs to the [`crate::request::scope`] the request was made in, which
//! completes it at its end at the latest, so even a request the program
//! leaks (`std::mem::forget`) never outlives the buffers. Starting an
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
//! hmpi_core::request::scope(|scope| {
//!     let mut send = PersistentSend::new(scope, &world, &out[..], (me + 1) % n, 0).unwrap();
//!     let mut recv =
//!         PersistentRecv::new(scope, &world, &mut inbox[..], (me + n - 1) % n, 0).unwrap();
//!     for _ in 0..100 {
//!         recv.start().unwrap();
//!         send.start().unwrap();
//!         send.wait().unwrap();
//!         recv.wait().unwrap();
//!     }
//!     assert_eq!(recv.buffer().unwrap()[0], ((me + n - 1) % n) as u8);
//! });
//! ```

use crate::comm::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut};
use crate::error::{Error, Result};
use crate::point_to_point::Status;
use crate::raw;
use crate::request::{Request, Scope};

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
pub struct PersistentSend<'s, 'env> {
    scope: &'s Scope<'s, 'env>,
    comm: SimpleCommunicator,
    buf: &'s [u8],
    dest: i32,
    tag: i32,
    sync: bool,
    active: Option<Request<'s>>,
}

impl<'s, 'env> PersistentSend<'s, 'env> {
    /// A persistent standard-mode send of `buf` to `dest` with `tag`
    /// (`MPI_Send_init`), inactive; `dest` and `tag` are checked now.
    pub fn new<B: Buffer + ?Sized>(
        scope: &'s Scope<'s, 'env>,
        comm: &SimpleCommunicator,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Self> {
        raw::send_target(comm, dest, tag)?;
        Ok(PersistentSend {
            scope,
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
        scope: &'s Scope<'s, 'env>,
        comm: &SimpleCommunicator,
        buf: &'s B,
        dest: i32,
        tag: i32,
    ) -> Result<Self> {
        let mut s = PersistentSend::new(scope, comm, buf, dest, tag)?;
        s.sync = true;
        Ok(s)
    }

    /// Starts the send (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(active_error("start"));
        }
        // SAFETY: the request goes into the scope, which completes it at
        // its end at the latest (even if `self` is leaked); `buf` is
        // borrowed for the scope's `'s`.
        let r = unsafe { raw::isend(&self.comm, self.buf, self.dest, self.tag, self.sync) }?;
        self.active = Some(self.scope.adopt(r, &self.comm));
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
            Some(r) => r.wait(),
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
                done
            }
        }
    }
}

impl Drop for PersistentSend<'_, '_> {
    fn drop(&mut self) {
        let _ = self.wait();
    }
}

/// A persistent receive into a buffer it holds.
pub struct PersistentRecv<'s, 'env> {
    scope: &'s Scope<'s, 'env>,
    comm: SimpleCommunicator,
    buf: &'s mut [u8],
    source: i32,
    tag: i32,
    active: Option<Request<'s>>,
}

impl<'s, 'env> PersistentRecv<'s, 'env> {
    /// A persistent receive into `buf` from `source` (or
    /// [`crate::ANY_SOURCE`]) with `tag` (or [`crate::ANY_TAG`])
    /// (`MPI_Recv_init`), inactive; `source` and `tag` are checked now.
    pub fn new<B: BufferMut + ?Sized>(
        scope: &'s Scope<'s, 'env>,
        comm: &SimpleCommunicator,
        buf: &'s mut B,
        source: i32,
        tag: i32,
    ) -> Result<Self> {
        raw::recv_target(comm, source, tag)?;
        Ok(PersistentRecv {
            scope,
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
        // SAFETY: `buf` is held mutably by `self` for the scope's `'s` and
        // lent out only while no start is in flight (`buffer`), so only the
        // engine touches it until the request completes; the request goes
        // into the scope, which completes it at its end at the latest (even
        // if `self` is leaked, when `buf`'s borrow still holds).
        let r = unsafe { raw::irecv_raw(&self.comm, at, len, self.source, self.tag) }?;
        self.active = Some(self.scope.adopt(r, &self.comm));
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
            Some(r) => r.wait(),
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
                done
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

impl Drop for PersistentRecv<'_, '_> {
    fn drop(&mut self) {
        let _ = self.wait();
    }
}
