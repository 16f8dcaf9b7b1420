//! Nonblocking operations: [`Request`], [`Status`], [`wait_all`].
//!
//! A request borrows its buffer for its whole life (`Request<'a>`), so the
//! borrow checker keeps the buffer alive and untouched while the engine may
//! read or write it. Dropping a pending request waits for it. Waiting drives
//! the VCI's progress (whoever waits makes everybody's messages move), and
//! spins, then yields, then sleeps on the VCI's doorbell.
//!
//! Known hole: a request that is leaked (`std::mem::forget`) instead of
//! dropped leaves a pending receive registered with the VCI, which may
//! later write into a buffer that no longer exists (the same problem as
//! pre-1.0 `thread::scoped`). The fix, a scope that owns the requests as in
//! rsmpi's `request::scope` or `std::thread::scope`, is not built yet.
//!
//! # Example
//! ```
//! use vci::{Endpoint, ANY_SOURCE, ANY_TAG};
//!
//! let ep = Endpoint::new().unwrap(); // a world of one rank without a launcher
//! let out = *b"hello";
//! let mut inb = [0u8; 5];
//! // SAFETY: both requests are waited for below, never leaked.
//! let r = unsafe { ep.irecv(&mut inb, ANY_SOURCE, ANY_TAG, 0) }.unwrap();
//! // SAFETY: as above.
//! let s = unsafe { ep.isend(&out, 0, 7, 0) }.unwrap();
//! let st = vci::wait_all(vec![r, s]).unwrap();
//! assert_eq!((st[0].source, st[0].tag, st[0].count), (0, 7, 5));
//! assert_eq!(&inb, b"hello");
//! ```

use crate::endpoint::Endpoint;
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::vci::{Private, Vci};
use crate::{ANY_TAG, PROC_NULL};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// What went wrong with one request, as recorded in its [`Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusError {
    /// The message was longer than the buffer; `count` bytes were delivered.
    Truncate {
        /// The sent message's length.
        message_len: u64,
    },
}

/// The outcome of a finished request (or of a probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank for a receive or probe; the destination for a send;
    /// `PROC_NULL` for an operation on `PROC_NULL`.
    pub source: i32,
    /// The message's tag (`ANY_TAG` for `PROC_NULL`).
    pub tag: i32,
    /// Bytes delivered (receive), sent (send) or waiting (probe).
    pub count: u64,
    /// Truncation, if any.
    pub error: Option<StatusError>,
    /// Whether the request was cancelled before it matched.
    pub cancelled: bool,
}

impl Status {
    /// The status of an operation on `PROC_NULL`, or of a cancelled one.
    pub const fn empty() -> Status {
        Status {
            source: PROC_NULL,
            tag: ANY_TAG,
            count: 0,
            error: None,
            cancelled: false,
        }
    }

    /// `Ok(self)`, or the error it records.
    pub fn into_result(self) -> Result<Status> {
        match self.error {
            None => Ok(self),
            Some(StatusError::Truncate { message_len }) => Err(Error::Truncate {
                status: self,
                message_len,
            }),
        }
    }
}

#[derive(Debug)]
enum State {
    /// Finished; the status is kept for repeated `test`s.
    Complete(Status),
    /// A single-copy send whose receiver has not finished copying.
    Send {
        env: NonNull<Envelope>,
        status: Status,
    },
    /// A receive registered with the VCI under this id.
    Recv(u64),
}

/// A nonblocking send or receive. `'a` covers the endpoint and the buffer.
#[derive(Debug)]
#[must_use = "a request must be waited for (dropping it waits)"]
pub struct Request<'a> {
    ep: &'a Endpoint,
    state: State,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> Request<'a> {
    pub(crate) fn complete(ep: &'a Endpoint, status: Status) -> Self {
        Request {
            ep,
            state: State::Complete(status),
            _buf: PhantomData,
        }
    }

    pub(crate) fn send(ep: &'a Endpoint, env: NonNull<Envelope>, status: Status) -> Self {
        Request {
            ep,
            state: State::Send { env, status },
            _buf: PhantomData,
        }
    }

    pub(crate) fn recv(ep: &'a Endpoint, id: u64) -> Self {
        Request {
            ep,
            state: State::Recv(id),
            _buf: PhantomData,
        }
    }

    /// One check under the VCI lock (progress already ran).
    fn poll(state: &mut State, vci: &Vci, p: &mut Private) -> Option<Status> {
        let st = match *state {
            State::Complete(st) => return Some(st),
            State::Send { env, status } => {
                // SAFETY: the envelope stays allocated until we free it here.
                if !unsafe { env.as_ref() }.is_complete() {
                    return None;
                }
                // SAFETY: the receiver completed the envelope and will not
                // touch it again; it is no longer queued.
                unsafe { Envelope::destroy(env) };
                status
            }
            State::Recv(id) => vci.take_recv(p, id)?,
        };
        *state = State::Complete(st);
        Some(st)
    }

    /// Whether the request has finished (drives progress once). The status
    /// is returned every time once it has.
    pub fn test(&mut self) -> Result<Option<Status>> {
        if let State::Complete(st) = self.state {
            return st.into_result().map(Some);
        }
        let vci = self.ep.vci();
        let mut guard = vci.lock();
        vci.progress(&mut guard);
        match Self::poll(&mut self.state, vci, &mut guard) {
            Some(st) => st.into_result().map(Some),
            None => Ok(None),
        }
    }

    fn wait_status(&mut self) -> Status {
        if let State::Complete(st) = self.state {
            return st;
        }
        let state = &mut self.state;
        self.ep.vci().wait_for(|vci, p| Self::poll(state, vci, p))
    }

    /// Waits until the request has finished; a truncated receive is
    /// [`Error::Truncate`] (the buffer holds what fitted).
    pub fn wait(mut self) -> Result<Status> {
        self.wait_status().into_result()
    }

    /// Cancels a receive that has not matched a message yet; it then
    /// completes with `cancelled` set. Returns whether it was cancelled (a
    /// send, or a receive that already matched, is not).
    pub fn cancel(&mut self) -> bool {
        match self.state {
            State::Recv(id) => self.ep.vci().cancel_recv(id),
            _ => false,
        }
    }

    /// Whether the request is known to have finished (no progress is made).
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete(_))
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // The engine may still use the buffer: wait for it.
        self.wait_status();
    }
}

/// Waits for every request, in order. Returns every status; if any request
/// failed, [`Error::InStatus`] with every status (each with its `error`).
pub fn wait_all<'a>(requests: impl IntoIterator<Item = Request<'a>>) -> Result<Vec<Status>> {
    let st: Vec<Status> = requests.into_iter().map(|mut r| r.wait_status()).collect();
    if st.iter().any(|s| s.error.is_some()) {
        Err(Error::InStatus(st))
    } else {
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_into_result() {
        let ok = Status {
            source: 1,
            tag: 2,
            count: 3,
            error: None,
            cancelled: false,
        };
        assert_eq!(ok.into_result().unwrap(), ok);
        let bad = Status {
            error: Some(StatusError::Truncate { message_len: 9 }),
            ..ok
        };
        match bad.into_result() {
            Err(Error::Truncate {
                status,
                message_len: 9,
            }) => assert_eq!(status, bad),
            other => panic!("{other:?}"),
        }
        assert_eq!(Status::empty().source, PROC_NULL);
        assert_eq!(Status::empty().tag, ANY_TAG);
    }
}
