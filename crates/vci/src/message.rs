//! Matched probe: [`Message`], a message taken off the unexpected list by
//! [`Endpoint::improbe`] or [`Endpoint::mprobe`].
//!
//! A plain probe only looks: another thread of the rank may receive the
//! message before the prober does. A matched probe removes the message from
//! the matching lists, so it can only be received through its `Message`
//! handle ([`Message::recv_into`], [`Message::imrecv`]), as MPI's
//! `MPI_Mprobe`/`MPI_Mrecv`.
//!
//! The envelope is already in the receiver's hands, so receiving is one
//! copy without the VCI lock and finishes at once. Dropping a `Message`
//! without receiving it discards the payload (and completes the sender's
//! request), so a sender never waits for a handle that was thrown away.
//!
//! # Example
//! ```
//! use vci::{Endpoint, SendMode, ANY_SOURCE, ANY_TAG};
//!
//! let ep = Endpoint::new().unwrap(); // a world of one
//! ep.send(b"hello", 0, 4, 0, SendMode::Standard).unwrap();
//! let (msg, st) = ep.mprobe(ANY_SOURCE, ANY_TAG, 0).unwrap();
//! assert_eq!((st.tag, st.count), (4, 5));
//! // Nobody else can match it now.
//! assert!(ep.iprobe(ANY_SOURCE, ANY_TAG, 0).unwrap().is_none());
//! let mut buf = vec![0u8; st.count as usize];
//! msg.recv_into(&mut buf).unwrap();
//! assert_eq!(&buf, b"hello");
//! ```

use crate::endpoint::Endpoint;
use crate::error::Result;
use crate::matching::{Arrival, Target};
use crate::request::{Request, Status};
use std::ptr::NonNull;

/// A message taken by a matched probe, to be received exactly once.
#[derive(Debug)]
#[must_use = "a matched message is lost for every other receive; dropping it discards it"]
pub struct Message<'a> {
    ep: &'a Endpoint,
    /// The VCI the message arrived on.
    vci: usize,
    /// `None` for the message of a probe on `PROC_NULL`.
    arrival: Option<Arrival>,
    status: Status,
}

impl<'a> Message<'a> {
    pub(crate) fn new(
        ep: &'a Endpoint,
        vci: usize,
        arrival: Option<Arrival>,
        status: Status,
    ) -> Self {
        Message {
            ep,
            vci,
            arrival,
            status,
        }
    }

    /// The probe's status: source, tag, and the message's length in `count`.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether this is the empty message of a probe on `PROC_NULL` (MPI's
    /// `MPI_MESSAGE_NO_PROC`).
    pub fn is_no_proc(&self) -> bool {
        self.arrival.is_none()
    }

    fn deliver(&mut self, buf: *mut u8, cap: usize) -> Status {
        // SAFETY: `buf` is valid for `cap` bytes (callers).
        unsafe { self.deliver_to(Target::Buffer { buf, cap }) }
    }

    /// Delivers the message to `target` (once; later calls deliver nothing).
    ///
    /// # Safety
    ///
    /// The target is valid as [`crate::vci::Vci::deliver`] requires.
    pub(crate) unsafe fn deliver_to(&mut self, target: Target) -> Status {
        match self.arrival.take() {
            // SAFETY: the arrival left the unexpected list in the matched
            // probe and was delivered by nobody since (`take` above makes
            // this the only time); the target is valid (caller's contract).
            Some(a) => unsafe { self.ep.vci_at(self.vci).deliver(a, target) },
            None => Status::empty(),
        }
    }

    /// Receives the message into `buf`; a longer message is
    /// [`crate::Error::Truncate`] with the prefix delivered.
    pub fn recv_into(mut self, buf: &mut [u8]) -> Result<Status> {
        self.deliver(buf.as_mut_ptr(), buf.len()).into_result()
    }

    /// Receives the message into `buf` as a request (MPI's `MPI_Imrecv`).
    /// The copy happens in this call, so the request is already complete;
    /// it exists for code that treats every receive as a request.
    pub fn imrecv<'b>(mut self, buf: &'b mut [u8]) -> Result<Request<'b>>
    where
        'a: 'b,
    {
        let st = self.deliver(buf.as_mut_ptr(), buf.len());
        Ok(Request::complete(self.ep, self.vci, st))
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        // Discard: zero bytes delivered, the sender's request completes.
        self.deliver(NonNull::dangling().as_ptr(), 0);
    }
}
