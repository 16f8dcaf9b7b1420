//! Explicit streams (MPICH's `MPIX_Stream`): a VCI of this rank reserved
//! for one thread, and communicators bound to it.
//!
//! [`Stream::new`] (or [`Universe::stream`]) reserves one of this rank's
//! VCIs 1 to `HMPI_VCIS − 1` that no other stream holds (VCI 0 keeps the
//! rank's doorbell and the world's traffic); without a free one it is
//! [`Error::Comm`], so a program with `N` streams per rank runs with
//! `HMPI_VCIS` ≥ `N + 1`. [`Stream::comm`] (collective over its parent,
//! like `MPIX_Stream_comm_create`) duplicates the parent and binds the
//! duplicate to the streams of its members: a message to member `r`
//! travels on `r`'s stream VCI, every receive and probe of this rank on
//! its own. A member that gives no stream ([`comm_on`] with `None`,
//! `MPIX_STREAM_NULL`) takes part with the VCI the duplicate's context
//! would use. Wildcards work as on any communicator (every message to this
//! rank arrives on its stream VCI); hints do not change the mapping of a
//! stream communicator.
//!
//! What a stream buys: the thread that owns it is the only one that takes
//! its VCI's lock (receives, progress) and the lanes towards its peers'
//! stream VCIs (sends), so those locks are never contended — one
//! uncontended atomic exchange each, nobody waits. While the thread is the
//! only one of the process that communicates at all, no lock is taken
//! (solo mode, see `vci::solo`). The locks stay real, though: a waiter on
//! another VCI may sweep the stream's VCI with a try-lock so that nothing
//! starves. Other communicators whose context falls on the same VCI
//! (`(context / 2) % HMPI_VCIS`) share it, which stays correct but
//! contends.
//!
//! [`StreamComm`] is `Send` but not `Sync`: the type says that one thread
//! at a time uses it (moving it to another thread is fine). Cloning the
//! inner [`SimpleCommunicator`] (through `Deref`) escapes that, and is
//! still correct, since the locks are real.
//!
//! # Example
//! ```
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! // With one VCI per rank (the default) there is none to reserve.
//! if hmpi_core::environment::endpoint().unwrap().vci_count() == 1 {
//!     assert!(universe.stream().is_err());
//! }
//! ```

use crate::comm::{Communicator, SimpleCommunicator};
use crate::environment::{endpoint, Universe};
use crate::error::{Error, Result};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// This rank's VCIs that streams hold (bit `v`).
static RESERVED: Mutex<u32> = Mutex::new(0);

fn reserved() -> std::sync::MutexGuard<'static, u32> {
    // One word changed per critical section: never left inconsistent.
    RESERVED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A VCI reserved for a stream, given back when the last holder (the
/// stream, its communicators) is dropped.
#[derive(Debug)]
pub(crate) struct StreamVci(usize);

impl Drop for StreamVci {
    fn drop(&mut self) {
        *reserved() &= !(1 << self.0);
    }
}

/// A stream: one VCI of this rank reserved for the thread that uses it
/// (`MPIX_Stream`). `Send`, not `Sync`.
#[derive(Debug)]
pub struct Stream {
    vci: Arc<StreamVci>,
    _one_thread: PhantomData<Cell<()>>,
}

impl Stream {
    /// Reserves a free VCI of this rank (`MPIX_Stream_create`);
    /// [`Error::Comm`] if every VCI but 0 is held by a stream (or
    /// `HMPI_VCIS` is 1).
    pub fn new() -> Result<Stream> {
        let n = endpoint()?.vci_count();
        let mut held = reserved();
        let v = (1..n)
            .find(|v| *held & (1 << v) == 0)
            .ok_or_else(|| Error::Comm {
                reason: format!(
                    "no VCI left for a stream: {n} VCIs per rank, VCI 0 and {} held by streams \
                 (set HMPI_VCIS to one more than the streams a rank uses, at most {})",
                    held.count_ones(),
                    vci::slots::MAX_VCIS
                ),
            })?;
        *held |= 1 << v;
        Ok(Stream {
            vci: Arc::new(StreamVci(v)),
            _one_thread: PhantomData,
        })
    }

    /// The number of the VCI this stream holds.
    pub fn vci(&self) -> usize {
        self.vci.0
    }

    /// A duplicate of `parent` bound to the streams of its members, this
    /// rank's being this one (`MPIX_Stream_comm_create`). Collective over
    /// `parent` (an intracommunicator).
    pub fn comm(&self, parent: &SimpleCommunicator) -> Result<StreamComm> {
        Ok(StreamComm {
            comm: comm_on(parent, Some(self))?,
            _one_thread: PhantomData,
        })
    }
}

/// Reserves up to `n` free VCIs of this rank (as [`Stream::new`] reserves
/// one), lowest first; fewer if fewer are free. Thread endpoints
/// ([`crate::endpoints`]) hold them as streams do.
pub(crate) fn reserve_free(n: usize) -> Result<Vec<Arc<StreamVci>>> {
    let count = endpoint()?.vci_count();
    let mut held = reserved();
    let free: Vec<usize> = (1..count)
        .filter(|v| *held & (1 << v) == 0)
        .take(n)
        .collect();
    for v in &free {
        *held |= 1 << v;
    }
    drop(held);
    Ok(free.into_iter().map(|v| Arc::new(StreamVci(v))).collect())
}

impl StreamVci {
    /// The number of the VCI held.
    pub(crate) fn number(&self) -> usize {
        self.0
    }
}

impl Universe {
    /// A new stream of this rank ([`Stream::new`]).
    pub fn stream(&self) -> Result<Stream> {
        Stream::new()
    }
}

/// A communicator bound to streams ([`Stream::comm`]): `Send`, not `Sync`;
/// derefs to its [`SimpleCommunicator`] for every operation.
#[derive(Debug)]
pub struct StreamComm {
    comm: SimpleCommunicator,
    _one_thread: PhantomData<Cell<()>>,
}

impl std::ops::Deref for StreamComm {
    type Target = SimpleCommunicator;
    fn deref(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl StreamComm {
    /// The VCI that this rank's receives on it use.
    pub fn vci(&self) -> usize {
        stream_vci_of(&self.comm).unwrap_or(0)
    }
}

/// The VCI that `comm`'s receives use on this rank, if it is bound to
/// streams.
pub fn stream_vci_of(comm: &SimpleCommunicator) -> Option<usize> {
    let t = comm.vci_map().stream()?;
    t.get(comm.my_rank() as usize).map(|&v| v as usize)
}

/// A duplicate of `parent` bound to its members' streams, this rank's
/// being `stream` (`None`: the VCI the duplicate's context uses), as
/// `MPIX_Stream_comm_create`. Collective over `parent`; [`Error::Comm`]
/// for an intercommunicator.
pub fn comm_on(parent: &SimpleCommunicator, stream: Option<&Stream>) -> Result<SimpleCommunicator> {
    if parent.is_inter() {
        return Err(Error::Comm {
            reason: "a stream communicator of an intercommunicator".into(),
        });
    }
    let ep = endpoint()?;
    let d = parent.duplicate()?;
    let mine = match stream {
        Some(s) => s.vci(),
        None => ep.vci_of(d.context()),
    };
    let all = d.allgather_pairs((mine as i64, 0))?;
    let table = all
        .iter()
        .map(|&(v, _)| {
            u8::try_from(v)
                .ok()
                .filter(|&v| usize::from(v) < ep.vci_count())
                .ok_or_else(|| Error::Comm {
                    reason: format!(
                        "a member's stream VCI {v} is out of range (HMPI_VCIS differs between ranks?)"
                    ),
                })
        })
        .collect::<Result<Box<[u8]>>>()?;
    d.vci_map()
        .set_stream(table, ep.vci_count(), stream.map(|s| s.vci.clone()))?;
    debug_assert_eq!(d.size(), all.len() as i32);
    Ok(d)
}
