//! Typed point-to-point: [`Process`] (a peer: sends and receives),
//! [`AnyProcess`] (receives from `ANY_SOURCE`), [`Status`], and the traits
//! [`Destination`] / [`Source`] that carry the operations (rsmpi's names).
//!
//! Values are sent as their bytes (see [`crate::datatype`]). The default
//! tag of a send is 0; receives without `_with_tag` take any tag. Ranks are
//! communicator ranks (translated to world ranks for the engine and back in
//! every [`Status`]). A bad rank or tag, or a message whose length does not
//! fit the receive, is an error value, never a panic.
//!
//! # Example
//! ```
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let me = world.this_process();
//! me.send(&[1.5f64, 2.5]).unwrap(); // one value of type [f64; 2]
//! me.send_with_tag(&vec![7u16; 3], 4).unwrap(); // a Vec, tag 4
//! let (x, st) = world.any_process().receive::<[f64; 2]>().unwrap();
//! assert_eq!((x, st.source_rank(), st.tag()), ([1.5, 2.5], 0, 0));
//! let (v, st) = me.receive_vec::<u16>().unwrap();
//! assert_eq!((v, st.count::<u16>().unwrap()), (vec![7; 3], 3));
//! assert!(world.process_at_rank(5).send(&1u8).is_err()); // Error::Rank
//! assert!(me.send_with_tag(&1u8, -3).is_err()); // Error::Tag
//! ```

use crate::comm::SimpleCommunicator;
use crate::datatype::{zeroed, Buffer, BufferMut, Equivalence};
use crate::environment::endpoint;
use crate::error::{Error, Result};
use crate::request::{Request, Scope};
use vci::{ANY_SOURCE, ANY_TAG, TAG_UB};

/// The outcome of a receive or probe (`MPI_Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: i32,
    tag: i32,
    bytes: u64,
    cancelled: bool,
}

impl Status {
    /// Translates an engine status; `from_world` maps world ranks to
    /// communicator ranks (`None`: keep world ranks).
    pub fn from_engine(st: vci::Status, from_world: Option<&[i32]>) -> Status {
        let source = match from_world {
            Some(t) if st.source >= 0 => t.get(st.source as usize).copied().unwrap_or(-1),
            _ => st.source,
        };
        Status {
            source,
            tag: st.tag,
            bytes: st.count,
            cancelled: st.cancelled,
        }
    }

    /// The sender's rank in the communicator (`PROC_NULL` for a receive
    /// from `PROC_NULL`; for a send, the destination).
    pub fn source_rank(&self) -> i32 {
        self.source
    }

    /// The message's tag (`ANY_TAG` for `PROC_NULL`).
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// The message's length in bytes.
    pub fn byte_count(&self) -> u64 {
        self.bytes
    }

    /// The number of `T` elements in the message; [`Error::Count`] if the
    /// length is not a whole number of them ([`Error::Type`] for a
    /// zero-sized `T`).
    pub fn count<T: Equivalence>(&self) -> Result<usize> {
        elements::<T>(self.bytes, None)
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}

/// The number of `T`s in `bytes`, checked against `expected`.
fn elements<T>(bytes: u64, expected: Option<u64>) -> Result<usize> {
    let size = std::mem::size_of::<T>();
    if size == 0 {
        return Err(Error::Type {
            reason: "a zero-sized type has no element count".into(),
        });
    }
    let n = bytes / size as u64;
    if bytes % size as u64 != 0 || expected.is_some_and(|e| e != n) {
        return Err(Error::Count {
            bytes,
            element_size: size,
            expected,
        });
    }
    usize::try_from(n).map_err(|_| Error::Count {
        bytes,
        element_size: size,
        expected,
    })
}

/// Translates an engine error, with statuses in communicator ranks
/// (`from_world`: see [`SimpleCommunicator::world_to_comm`]).
pub fn engine_error(e: vci::Error, from_world: &[i32]) -> Error {
    match e {
        vci::Error::Truncate {
            status,
            message_len,
        } => Error::Truncate {
            status: Status::from_engine(status, Some(from_world)),
            message_len,
        },
        e => e.into(),
    }
}

pub(crate) fn check_send_tag(tag: i32) -> Result<()> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(())
    } else {
        Err(Error::Tag { tag })
    }
}

pub(crate) fn check_recv_tag(tag: i32) -> Result<()> {
    if tag == ANY_TAG {
        Ok(())
    } else {
        check_send_tag(tag)
    }
}

/// A peer process of a communicator: the target of sends, the source of
/// receives (rsmpi's `Process`).
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    comm: &'a SimpleCommunicator,
    rank: i32,
}

impl<'a> Process<'a> {
    pub(crate) fn new(comm: &'a SimpleCommunicator, rank: i32) -> Self {
        Process { comm, rank }
    }

    /// The process's rank in the communicator.
    pub fn rank(&self) -> i32 {
        self.rank
    }
}

/// Every process of a communicator, as the source of a receive
/// (`ANY_SOURCE`; rsmpi's `AnyProcess`).
#[derive(Debug, Clone, Copy)]
pub struct AnyProcess<'a> {
    comm: &'a SimpleCommunicator,
}

impl<'a> AnyProcess<'a> {
    pub(crate) fn new(comm: &'a SimpleCommunicator) -> Self {
        AnyProcess { comm }
    }
}

/// Operations that receive from a source ([`Process`] or [`AnyProcess`]).
pub trait Source {
    /// The communicator.
    fn comm(&self) -> &SimpleCommunicator;
    /// The source's communicator rank, or `ANY_SOURCE`.
    fn source_rank(&self) -> i32;

    /// Receives into `buf` a message with `tag` (or `ANY_TAG`). A message
    /// longer than `buf` is [`Error::Truncate`] (the prefix is delivered);
    /// a shorter one is fine (see [`Status::byte_count`]).
    fn receive_into_with_tag<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        tag: i32,
    ) -> Result<Status> {
        check_recv_tag(tag)?;
        let c = self.comm();
        let ep = endpoint()?;
        let src = c.source_to_world(self.source_rank())?;
        let st = ep
            .recv(buf.as_bytes_mut(), src, tag, c.context())
            .map_err(|e| engine_error(e, c.world_to_comm()))?;
        Ok(Status::from_engine(st, Some(c.world_to_comm())))
    }

    /// [`Source::receive_into_with_tag`] with any tag.
    fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<Status> {
        self.receive_into_with_tag(buf, ANY_TAG)
    }

    /// Receives one value of `T` with `tag`; the message must be exactly
    /// one `T` ([`Error::Count`] if shorter, [`Error::Truncate`] if longer).
    fn receive_with_tag<T: Equivalence>(&self, tag: i32) -> Result<(T, Status)> {
        let mut v: T = zeroed();
        let st = self.receive_into_with_tag(&mut v, tag)?;
        elements::<T>(st.bytes, Some(1)).or_else(|e| {
            // Zero-sized T: a zero-byte message is one value.
            if std::mem::size_of::<T>() == 0 && st.bytes == 0 {
                Ok(1)
            } else {
                Err(e)
            }
        })?;
        Ok((v, st))
    }

    /// [`Source::receive_with_tag`] with any tag.
    fn receive<T: Equivalence>(&self) -> Result<(T, Status)> {
        self.receive_with_tag(ANY_TAG)
    }

    /// Receives a message of any length as a `Vec<T>` (probes for its
    /// length, then receives that very source and tag).
    ///
    /// With several threads receiving from the same communicator with
    /// wildcards, another thread may take the probed message first (as
    /// with `MPI_Probe`); this receive then takes the next match and fails
    /// with [`Error::Truncate`] if that one is longer.
    fn receive_vec_with_tag<T: Equivalence>(&self, tag: i32) -> Result<(Vec<T>, Status)> {
        let st = self.probe_with_tag(tag)?;
        let n = elements::<T>(st.bytes, None)?;
        let mut v: Vec<T> = vec![zeroed(); n];
        // The probed message's own source and tag (PROC_NULL and ANY_TAG
        // for a probe of PROC_NULL, which then receives nothing).
        let st = self
            .comm()
            .process_at_rank_raw(st.source)
            .receive_into_with_tag(&mut v[..], st.tag)?;
        let got = elements::<T>(st.bytes, None)?;
        v.truncate(got);
        Ok((v, st))
    }

    /// [`Source::receive_vec_with_tag`] with any tag.
    fn receive_vec<T: Equivalence>(&self) -> Result<(Vec<T>, Status)> {
        self.receive_vec_with_tag(ANY_TAG)
    }

    /// Waits for a message with `tag` and returns its status without
    /// receiving it (`MPI_Probe`).
    fn probe_with_tag(&self, tag: i32) -> Result<Status> {
        check_recv_tag(tag)?;
        let c = self.comm();
        let ep = endpoint()?;
        let src = c.source_to_world(self.source_rank())?;
        let st = ep.probe(src, tag, c.context())?;
        Ok(Status::from_engine(st, Some(c.world_to_comm())))
    }

    /// [`Source::probe_with_tag`] with any tag.
    fn probe(&self) -> Result<Status> {
        self.probe_with_tag(ANY_TAG)
    }

    /// The status of a matching message if one is there (`MPI_Iprobe`).
    fn immediate_probe_with_tag(&self, tag: i32) -> Result<Option<Status>> {
        check_recv_tag(tag)?;
        let c = self.comm();
        let ep = endpoint()?;
        let src = c.source_to_world(self.source_rank())?;
        let st = ep.iprobe(src, tag, c.context())?;
        Ok(st.map(|st| Status::from_engine(st, Some(c.world_to_comm()))))
    }

    /// [`Source::immediate_probe_with_tag`] with any tag.
    fn immediate_probe(&self) -> Result<Option<Status>> {
        self.immediate_probe_with_tag(ANY_TAG)
    }

    /// Starts receiving into `buf` (`MPI_Irecv`); the request belongs to
    /// `scope`, which completes it at its end at the latest.
    fn immediate_receive_into_with_tag<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut B,
        tag: i32,
    ) -> Result<Request<'s>> {
        check_recv_tag(tag)?;
        let c = self.comm();
        let src = c.source_to_world(self.source_rank())?;
        scope.start_receive(buf.as_bytes_mut(), src, tag, c.context(), c.world_to_comm())
    }

    /// [`Source::immediate_receive_into_with_tag`] with any tag.
    fn immediate_receive_into<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut B,
    ) -> Result<Request<'s>> {
        self.immediate_receive_into_with_tag(scope, buf, ANY_TAG)
    }
}

/// Operations that send to a destination ([`Process`]).
pub trait Destination {
    /// The communicator.
    fn comm(&self) -> &SimpleCommunicator;
    /// The destination's communicator rank.
    fn destination_rank(&self) -> i32;

    /// Sends `buf` (a value, slice or `Vec` of [`Equivalence`] values)
    /// with `tag` and waits until the buffer may be reused (`MPI_Send`).
    fn send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: i32) -> Result<()> {
        check_send_tag(tag)?;
        let c = self.comm();
        let ep = endpoint()?;
        let dest = c.to_world(self.destination_rank())?;
        ep.send(buf.as_bytes(), dest, tag, c.context())?;
        Ok(())
    }

    /// [`Destination::send_with_tag`] with tag 0.
    fn send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.send_with_tag(buf, 0)
    }

    /// Starts sending `buf` (`MPI_Isend`); the request belongs to `scope`,
    /// which completes it at its end at the latest.
    fn immediate_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
        tag: i32,
    ) -> Result<Request<'s>> {
        check_send_tag(tag)?;
        let c = self.comm();
        let dest = c.to_world(self.destination_rank())?;
        scope.start_send(buf.as_bytes(), dest, tag, c.context(), c.world_to_comm())
    }

    /// [`Destination::immediate_send_with_tag`] with tag 0.
    fn immediate_send<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
    ) -> Result<Request<'s>> {
        self.immediate_send_with_tag(scope, buf, 0)
    }
}

impl Source for Process<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn source_rank(&self) -> i32 {
        self.rank
    }
}

impl Destination for Process<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn destination_rank(&self) -> i32 {
        self.rank
    }
}

impl Source for AnyProcess<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.comm
    }
    fn source_rank(&self) -> i32 {
        ANY_SOURCE
    }
}

impl SimpleCommunicator {
    pub(crate) fn process_at_rank_raw(&self, rank: i32) -> Process<'_> {
        Process::new(self, rank)
    }
}

/// The status of a finished request whose real status was already
/// reported.
pub(crate) fn empty_status() -> Status {
    Status::from_engine(vci::Status::empty(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_counts() {
        assert_eq!(elements::<u32>(12, None).unwrap(), 3);
        assert!(matches!(
            elements::<u32>(13, None),
            Err(Error::Count {
                bytes: 13,
                element_size: 4,
                expected: None
            })
        ));
        assert!(matches!(
            elements::<u64>(8, Some(2)),
            Err(Error::Count { .. })
        ));
        assert!(matches!(
            elements::<[u8; 0]>(0, None),
            Err(Error::Type { .. })
        ));
        assert!(check_send_tag(ANY_TAG).is_err());
        assert!(check_recv_tag(ANY_TAG).is_ok());
        assert!(check_send_tag(TAG_UB + 1).is_err());
    }
}
