//! Buffered sends (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Buffer_attach`,
//! `MPI_Buffer_detach`): a send that returns at once, its data copied,
//! whatever the receiver does, within the capacity of the buffer the
//! process attached.
//!
//! The process attaches one buffer ([`attach`]), and a communicator may
//! have one of its own (MPI 4.1's `MPI_Comm_attach_buffer`:
//! [`attach_to`]), which its buffered sends use instead, as may a session
//! ([`crate::session::Session::attach_buffer`]), whose buffer the
//! communicators made from its groups use when they have none of their
//! own; each buffered message
//! takes its size plus [`BSEND_OVERHEAD`] bytes of that capacity until the
//! engine has delivered it, and a message that does not fit what is left
//! is [`Error::Buffer`] (`MPI_ERR_BUFFER`), as is a buffered send with no
//! buffer attached. [`detach`] waits until every buffered message has
//! gone, then gives the buffer back.
//!
//! The copy lives in the process's heap (the shared heap under the
//! runtime), so the receiver copies it once, straight from there; the
//! attached memory is the program's bound on what is in flight (as MPI
//! defines it) and is not written. A message leaves as soon as the engine
//! takes it; completed ones give their capacity back whenever a buffered
//! send, [`in_use`] or [`detach`] looks.
//!
//! ```no_run
//! use hmpi_core::buffered;
//! use hmpi_core::traits::*;
//! let universe = hmpi_core::initialize().unwrap();
//! let world = universe.world();
//! let mut space = vec![0u8; 1024 + buffered::BSEND_OVERHEAD];
//! // SAFETY: `space` outlives the attachment (detached below).
//! unsafe { buffered::attach(space.as_mut_ptr(), space.len()) }.unwrap();
//! let me = world.rank();
//! buffered::bsend(&world, &[1u8; 1024], me, 0).unwrap();   // returns at once
//! let mut got = [0u8; 1024];
//! world.process_at_rank(me).receive_into(&mut got[..]).unwrap();
//! buffered::detach().unwrap();
//! ```

use crate::comm::SimpleCommunicator;
use crate::error::{Error, Result};
use crate::raw;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The capacity each buffered message takes besides its data
/// (`MPI_BSEND_OVERHEAD`).
pub const BSEND_OVERHEAD: usize = 512;

/// A message in flight: the engine's request over its copy.
struct Pending {
    /// Declared before `data`: dropped (completed) first.
    req: raw::Request<'static>,
    /// The copy the request reads.
    _data: Box<[u8]>,
    /// The capacity it takes.
    size: usize,
}

// SAFETY: a request is its endpoint (a process-wide static), an envelope
// in the node heap or a receive id of the VCI (both usable from any thread
// under the VCI's lock), and the copy it reads, owned here.
unsafe impl Send for Pending {}

/// The attached buffer and what is in flight.
#[derive(Default)]
struct State {
    /// The attached buffer's address and size.
    attached: Option<(usize, usize)>,
    /// Capacity in use.
    used: usize,
    pending: Vec<Pending>,
}

/// One attached buffer and the messages that take its capacity (the
/// process's, a communicator's or a session's).
#[derive(Default)]
pub struct Pool {
    state: Mutex<State>,
    /// A communicator's: the pool of the session it was made in, used
    /// when this one has no buffer.
    session: OnceLock<Arc<Pool>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state();
        f.debug_struct("Pool")
            .field("attached", &s.attached.map(|(_, n)| n))
            .field("used", &s.used)
            .field("pending", &s.pending.len())
            .finish()
    }
}

impl Pool {
    /// No buffer attached.
    pub const fn new() -> Pool {
        Pool {
            state: Mutex::new(State {
                attached: None,
                used: 0,
                pending: Vec::new(),
            }),
            session: OnceLock::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`attach`] to this pool (a session's).
    ///
    /// # Safety
    /// As for [`attach`], until [`Pool::detach`] returns it.
    pub unsafe fn attach(&self, base: *mut u8, size: usize) -> Result<()> {
        attach_in(self, base, size)
    }

    /// [`detach`] from this pool.
    pub fn detach(&self) -> Result<(*mut u8, usize)> {
        detach_in(self)
    }

    /// [`flush`] of this pool.
    pub fn flush(&self) -> Result<()> {
        drain(self)
    }

    /// Makes `session` the pool this (a communicator's) falls back to.
    pub(crate) fn set_session(&self, session: Arc<Pool>) {
        let _ = self.session.set(session);
    }

    fn is_attached(&self) -> bool {
        self.state().attached.is_some()
    }
}

/// The process's buffer.
static PROCESS: Pool = Pool::new();

/// Gives back the capacity of the messages that have gone.
fn reap(s: &mut State) {
    let mut i = 0;
    while i < s.pending.len() {
        let p = &mut s.pending[i];
        if matches!(p.req.test(), Ok(None)) {
            i += 1;
            continue;
        }
        // Gone (delivered, or failed: a buffered send has no one to
        // report a late failure to, as in MPI).
        let p = s.pending.swap_remove(i);
        s.used -= p.size;
    }
}

/// Attaches `size` bytes at `base` as the process's buffer for buffered
/// sends. One buffer at a time: attaching a second is [`Error::Buffer`].
///
/// # Safety
/// The memory stays valid until [`detach`] returns it (it is not written;
/// see the module documentation).
pub unsafe fn attach(base: *mut u8, size: usize) -> Result<()> {
    attach_in(&PROCESS, base, size)
}

/// [`attach`] for `comm`'s own buffer (`MPI_Comm_attach_buffer`): its
/// buffered sends take their capacity from it instead of the process's.
///
/// # Safety
/// As for [`attach`], until [`detach_from`] returns it.
pub unsafe fn attach_to(comm: &SimpleCommunicator, base: *mut u8, size: usize) -> Result<()> {
    attach_in(comm.bsend_pool(), base, size)
}

fn attach_in(pool: &Pool, base: *mut u8, size: usize) -> Result<()> {
    let mut s = pool.state();
    if let Some((_, n)) = s.attached {
        return Err(Error::Buffer {
            reason: format!("a buffer of {n} bytes is attached already (detach it first)"),
        });
    }
    s.attached = Some((base as usize, size));
    Ok(())
}

/// Waits until every buffered message has gone, then detaches the buffer
/// and returns its address and size; no buffer attached is
/// [`Error::Buffer`].
pub fn detach() -> Result<(*mut u8, usize)> {
    detach_in(&PROCESS)
}

/// [`detach`] for `comm`'s own buffer (`MPI_Comm_detach_buffer`).
pub fn detach_from(comm: &SimpleCommunicator) -> Result<(*mut u8, usize)> {
    detach_in(comm.bsend_pool())
}

fn detach_in(pool: &Pool) -> Result<(*mut u8, usize)> {
    drain(pool)?;
    let (base, size) = pool.state().attached.take().ok_or_else(|| Error::Buffer {
        reason: "no buffer is attached".into(),
    })?;
    Ok((base as *mut u8, size))
}

/// Waits until every message of `pool` has gone.
fn drain(pool: &Pool) -> Result<()> {
    let mut backoff = shmheap::sync::futex::Backoff::new();
    loop {
        {
            let mut s = pool.state();
            reap(&mut s);
            if s.pending.is_empty() {
                return Ok(());
            }
        }
        backoff.snooze();
    }
}

/// Waits until every buffered message of the process's buffer has gone,
/// the buffer staying attached (`MPI_Buffer_flush`).
pub fn flush() -> Result<()> {
    drain(&PROCESS)
}

/// [`flush`] for `comm`'s own buffer (`MPI_Comm_flush_buffer`).
pub fn flush_comm(comm: &SimpleCommunicator) -> Result<()> {
    drain(comm.bsend_pool())
}

/// The process buffer's size and the capacity its messages in flight
/// take now (`None`: no buffer attached).
pub fn in_use() -> Option<(usize, usize)> {
    let mut s = PROCESS.state();
    reap(&mut s);
    s.attached.map(|(_, size)| (size, s.used))
}

/// Sends `buf` to `dest` of `comm` with `tag` in buffered mode
/// (`MPI_Bsend`): copies it and returns; the message goes whatever the
/// receiver does. It takes `buf.len() + BSEND_OVERHEAD` bytes of the
/// attached buffer (`comm`'s own if it has one, else the process's) until
/// it has gone; more than is left is [`Error::Buffer`].
pub fn bsend(comm: &SimpleCommunicator, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
    // Bad ranks and tags are their own errors, before any capacity is
    // looked at.
    raw::send_target(comm, dest, tag)?;
    if dest == raw::PROC_NULL {
        return Ok(());
    }
    let size = buf
        .len()
        .checked_add(BSEND_OVERHEAD)
        .ok_or(Error::TooLarge {
            count: buf.len() as u64,
            element_size: 1,
        })?;
    // The communicator's buffer, else its session's, else the process's.
    let own = comm.bsend_pool();
    let pool = match own.session.get() {
        _ if own.is_attached() => own,
        Some(p) if p.is_attached() => p,
        _ => &PROCESS,
    };
    let mut s = pool.state();
    reap(&mut s);
    let Some((_, cap)) = s.attached else {
        return Err(Error::Buffer {
            reason: "a buffered send with no buffer attached (MPI_Buffer_attach)".into(),
        });
    };
    if size > cap - s.used.min(cap) {
        return Err(Error::Buffer {
            reason: format!(
                "a buffered message of {} bytes takes {size} bytes of the attached buffer; \
                 {} of its {cap} bytes are free",
                buf.len(),
                cap - s.used.min(cap)
            ),
        });
    }
    let data: Box<[u8]> = buf.into();
    // SAFETY: the copy's heap memory does not move when the box does, and
    // the box is kept beside the request (dropped after it) until the
    // request has completed: `reap` drops both together only then, and
    // `detach` waits for that.
    let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(data.as_ptr(), data.len()) };
    // SAFETY: as above; the request is kept until it completes, never
    // leaked.
    let req = unsafe { raw::isend(comm, bytes, dest, tag, false) }?;
    s.used += size;
    s.pending.push(Pending {
        req,
        _data: data,
        size,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_twice_and_detach_without_buffer_are_errors() {
        assert!(matches!(detach(), Err(Error::Buffer { .. })));
        let mut space = vec![0u8; 100];
        // SAFETY: `space` outlives the attachment.
        unsafe { attach(space.as_mut_ptr(), space.len()) }.unwrap();
        // SAFETY: as above.
        let again = unsafe { attach(space.as_mut_ptr(), space.len()) };
        assert!(matches!(again, Err(Error::Buffer { .. })));
        assert_eq!(in_use(), Some((100, 0)));
        let (base, size) = detach().unwrap();
        assert_eq!((base, size), (space.as_mut_ptr(), 100));
        assert_eq!(in_use(), None);
    }
}
