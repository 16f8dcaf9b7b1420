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
//! * Send modes: standard ([`Destination::send`]), synchronous
//!   ([`Destination::synchronous_send`]: returns once the receiver has
//!   matched the message), ready ([`Destination::ready_send`], sent in
//!   standard mode), each also `immediate_*` in a
//!   [`request::scope`](crate::request::scope). Buffered mode
//!   (`MPI_Bsend`) is not there: it needs a user-attached buffer
//!   (`MPI_Buffer_attach`) and an engine send that copies the payload out
//!   whatever its size, neither of which exists yet; a standard send of up
//!   to the engine's inline limit already completes at once.
//! * Matched probe: [`Source::matched_probe`] takes a message off the
//!   matching lists as a [`Message`] that only its holder receives
//!   ([`Message::matched_receive_into`], [`Message::matched_receive`],
//!   [`Message::matched_receive_vec`],
//!   [`Message::immediate_matched_receive_into`]), so threads that receive
//!   from the same source cannot take each other's messages.
//! * Send and receive in one call: [`send_receive`], [`send_receive_into`],
//!   [`send_receive_replace_into`] and their `_with_tags` forms (MPI's
//!   `MPI_Sendrecv`, `MPI_Sendrecv_replace`): the receive is posted before
//!   the send starts, so processes that call them towards each other do
//!   not deadlock.
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
//!
//! // A matched probe: the message is this thread's alone.
//! me.send_with_tag(&[1u32, 2, 3][..], 5).unwrap();
//! let (msg, st) = world.any_process().matched_probe_with_tag(5).unwrap();
//! assert_eq!(st.count::<u32>().unwrap(), 3);
//! assert!(world.any_process().immediate_probe().unwrap().is_none());
//! let (v, _) = msg.matched_receive_vec::<u32>().unwrap();
//! assert_eq!(v, [1, 2, 3]);
//!
//! // Send to and receive from oneself in one call.
//! use hmpi_core::point_to_point::send_receive;
//! let (y, _) = send_receive::<u64, _, _, _>(&9u64, &me, &me).unwrap();
//! assert_eq!(y, 9);
//! ```

use crate::comm::SimpleCommunicator;
use crate::datatype::{zeroed, zeroed_vec, Buffer, BufferMut, Datatype, Equivalence};
use crate::error::{Error, Result};
use crate::raw;
use crate::request::{Request, Scope};
use vci::{ANY_SOURCE, ANY_TAG};

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
    #[inline]
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

/// Checks that a received message was exactly one `T` (a zero-byte
/// message is one value of a zero-sized `T`).
fn exactly_one<T>(st: &Status) -> Result<()> {
    if std::mem::size_of::<T>() == 0 && st.bytes == 0 {
        return Ok(());
    }
    elements::<T>(st.bytes, Some(1)).map(drop)
}

/// [`Error::Type`] for a zero-sized element type, whose count cannot be
/// derived from a length.
fn check_sized<T>() -> Result<()> {
    elements::<T>(0, None).map(drop)
}

/// Translates an engine error, with statuses in communicator ranks
/// (`from_world`: see [`SimpleCommunicator::world_to_comm`]).
pub fn engine_error(e: vci::Error, from_world: &[i32]) -> Error {
    engine_error_in(e, Some(from_world))
}

/// [`engine_error`] with a table as [`SimpleCommunicator::status_ranks`]
/// gives it (`None`: the ranks are world ranks).
pub(crate) fn engine_error_in(e: vci::Error, from_world: Option<&[i32]>) -> Error {
    match e {
        vci::Error::Truncate {
            status,
            message_len,
        } => Error::Truncate {
            status: Status::from_engine(status, from_world),
            message_len,
        },
        e => Error::from(e).in_comm(|world| match from_world {
            Some(t) => usize::try_from(world).ok().and_then(|w| t.get(w).copied()),
            None => Some(world),
        }),
    }
}

/// A received status as a result: a truncation (or a failed transfer)
/// is the error, its status in communicator ranks like the rest.
#[inline]
fn received(st: raw::Status) -> Result<Status> {
    st.into_result()
        .map(|st| Status::from_engine(st, None))
        .map_err(|e| engine_error_in(e, None))
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

    /// The communicator it is a process of.
    pub fn comm(&self) -> &'a SimpleCommunicator {
        self.comm
    }

    /// Whether it is the calling process (rsmpi's `Process::is_self`);
    /// never for an intercommunicator, whose ranks name the other group.
    pub fn is_self(&self) -> bool {
        !self.comm.is_inter() && self.rank == crate::comm::Communicator::rank(self.comm)
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
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            return received(s.recv(buf.as_bytes_mut(), self.source_rank(), tag)?);
        }
        let mut st = raw::Status::empty();
        raw::recv_with_status(
            self.comm(),
            buf.as_bytes_mut(),
            self.source_rank(),
            tag,
            &mut st,
        )?;
        received(st)
    }

    /// [`Source::receive_into_with_tag`] with any tag.
    fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<Status> {
        self.receive_into_with_tag(buf, ANY_TAG)
    }

    /// Receives up to `count` elements of `datatype` into their places in
    /// `buf` (what rsmpi receives through a `MutView`), from a message
    /// sent with any datatype of the same type signature; bytes of `buf`
    /// outside the datatype are left as they are. A longer message is
    /// [`Error::Truncate`].
    fn receive_into_with_datatype<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        count: usize,
        datatype: &Datatype,
        tag: i32,
    ) -> Result<Status> {
        let bytes = buf.as_bytes_mut();
        datatype.check_reach(bytes.len(), count)?;
        let mut packed = crate::error::zeroed_bytes(datatype.packed_size(count)?)?;
        let st = self.receive_into_with_tag(&mut packed[..], tag)?;
        let got = (st.byte_count() as usize).min(packed.len());
        datatype.unpack(&packed[..got], bytes, count)?;
        Ok(st)
    }

    /// Receives one value of `T` with `tag`; the message must be exactly
    /// one `T` ([`Error::Count`] if shorter, [`Error::Truncate`] if longer).
    fn receive_with_tag<T: Equivalence>(&self, tag: i32) -> Result<(T, Status)> {
        let mut v: T = zeroed();
        let st = self.receive_into_with_tag(&mut v, tag)?;
        exactly_one::<T>(&st)?;
        Ok((v, st))
    }

    /// [`Source::receive_with_tag`] with any tag.
    fn receive<T: Equivalence>(&self) -> Result<(T, Status)> {
        self.receive_with_tag(ANY_TAG)
    }

    /// Receives a message of any length as a `Vec<T>`: a matched probe,
    /// then a receive of that very message (as rsmpi does), so another
    /// thread cannot take it in between. A message that is not a whole
    /// number of `T`s is [`Error::Count`] (and is consumed, as an MPI
    /// receive would consume it); a zero-sized `T` is [`Error::Type`].
    fn receive_vec_with_tag<T: Equivalence>(&self, tag: i32) -> Result<(Vec<T>, Status)> {
        check_sized::<T>()?;
        self.matched_probe_with_tag(tag)?.0.matched_receive_vec()
    }

    /// [`Source::receive_vec_with_tag`] with any tag.
    fn receive_vec<T: Equivalence>(&self) -> Result<(Vec<T>, Status)> {
        self.receive_vec_with_tag(ANY_TAG)
    }

    /// Waits for a message with `tag` and returns its status without
    /// receiving it (`MPI_Probe`).
    fn probe_with_tag(&self, tag: i32) -> Result<Status> {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            return Ok(Status::from_engine(s.probe(self.source_rank(), tag)?, None));
        }
        let st = raw::probe(self.comm(), self.source_rank(), tag)?;
        Ok(Status::from_engine(st, None))
    }

    /// [`Source::probe_with_tag`] with any tag.
    fn probe(&self) -> Result<Status> {
        self.probe_with_tag(ANY_TAG)
    }

    /// The status of a matching message if one is there (`MPI_Iprobe`).
    fn immediate_probe_with_tag(&self, tag: i32) -> Result<Option<Status>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = self.comm().spanning() {
            let st = s.iprobe(self.source_rank(), tag)?;
            return Ok(st.map(|st| Status::from_engine(st, None)));
        }
        let st = raw::iprobe(self.comm(), self.source_rank(), tag)?;
        Ok(st.map(|st| Status::from_engine(st, None)))
    }

    /// [`Source::immediate_probe_with_tag`] with any tag.
    fn immediate_probe(&self) -> Result<Option<Status>> {
        self.immediate_probe_with_tag(ANY_TAG)
    }

    /// Waits for a message with `tag` (or `ANY_TAG`) and takes it off the
    /// matching lists (`MPI_Mprobe`): only the returned [`Message`] can
    /// receive it. The status says its source, tag and length.
    fn matched_probe_with_tag(&self, tag: i32) -> Result<(Message, Status)> {
        let c = self.comm();
        #[cfg(feature = "mpi")]
        if let Some(s) = c.spanning() {
            let (m, st) = s.mprobe(self.source_rank(), tag)?;
            return Ok(Message::new(Matched::Span(m), st, c));
        }
        let (m, st) = raw::mprobe(c, self.source_rank(), tag)?;
        Ok(Message::new(Matched::Node(m), st, c))
    }

    /// [`Source::matched_probe_with_tag`] with any tag.
    fn matched_probe(&self) -> Result<(Message, Status)> {
        self.matched_probe_with_tag(ANY_TAG)
    }

    /// Takes a matching message if one is there (`MPI_Improbe`); `None`
    /// otherwise.
    fn immediate_matched_probe_with_tag(&self, tag: i32) -> Result<Option<(Message, Status)>> {
        let c = self.comm();
        #[cfg(feature = "mpi")]
        if let Some(s) = c.spanning() {
            let found = s.improbe(self.source_rank(), tag)?;
            return Ok(found.map(|(m, st)| Message::new(Matched::Span(m), st, c)));
        }
        let found = raw::improbe(c, self.source_rank(), tag)?;
        Ok(found.map(|(m, st)| Message::new(Matched::Node(m), st, c)))
    }

    /// [`Source::immediate_matched_probe_with_tag`] with any tag.
    fn immediate_matched_probe(&self) -> Result<Option<(Message, Status)>> {
        self.immediate_matched_probe_with_tag(ANY_TAG)
    }

    /// Starts receiving into `buf` (`MPI_Irecv`); the request belongs to
    /// `scope`, which completes it at its end at the latest.
    fn immediate_receive_into_with_tag<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut B,
        tag: i32,
    ) -> Result<Request<'s>> {
        scope.start_receive(self.comm(), buf.as_bytes_mut(), self.source_rank(), tag)
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

/// Starts a standard (`sync` false) or synchronous send of `bytes` to `d`
/// in `scope`.
fn start_in_scope<'s, D: Destination + ?Sized>(
    d: &D,
    scope: &'s Scope<'s, '_>,
    bytes: &'s [u8],
    tag: i32,
    sync: bool,
) -> Result<Request<'s>> {
    scope.start_send(d.comm(), bytes, d.destination_rank(), tag, sync)
}

/// A blocking send of `bytes` (synchronous if `sync`): through the
/// communicator spanning nodes if it is one, else the raw tier.
#[inline]
fn send_bytes(
    comm: &SimpleCommunicator,
    bytes: &[u8],
    dest: i32,
    tag: i32,
    sync: bool,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if let Some(s) = comm.spanning() {
        return if sync {
            s.ssend(bytes, dest, tag)
        } else {
            s.send(bytes, dest, tag)
        };
    }
    raw::send_mode(comm, bytes, dest, tag, sync)
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
        send_bytes(
            self.comm(),
            buf.as_bytes(),
            self.destination_rank(),
            tag,
            false,
        )
    }

    /// [`Destination::send_with_tag`] with tag 0.
    fn send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag` in synchronous mode (`MPI_Ssend`): returns
    /// once the receiver has matched the message (and copied it), whatever
    /// its size. A synchronous send to this very process returns only if
    /// another thread receives it.
    fn synchronous_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: i32) -> Result<()> {
        send_bytes(
            self.comm(),
            buf.as_bytes(),
            self.destination_rank(),
            tag,
            true,
        )
    }

    /// Sends `count` elements of `datatype` laid out in `buf` (what rsmpi
    /// sends through a `View`): the datatype's bytes straight from `buf`
    /// when they are one run, else packed first. `buf` must hold what
    /// the elements reach ([`Error::Buffer`] otherwise). The receiver may
    /// use any datatype with the same type signature (a C rank its own
    /// `MPI_Type_*` description).
    fn send_with_datatype<B: Buffer + ?Sized>(
        &self,
        buf: &B,
        count: usize,
        datatype: &Datatype,
        tag: i32,
    ) -> Result<()> {
        let bytes = buf.as_bytes();
        datatype.check_reach(bytes.len(), count)?;
        let n = datatype.packed_size(count)?;
        match datatype.dense_offset() {
            Some(off) if n > 0 => {
                let at = usize::try_from(off).unwrap_or(0);
                send_bytes(
                    self.comm(),
                    &bytes[at..at + n],
                    self.destination_rank(),
                    tag,
                    false,
                )
            }
            _ => {
                let mut packed = crate::error::zeroed_bytes(n)?;
                datatype.pack(bytes, count, &mut packed)?;
                send_bytes(self.comm(), &packed, self.destination_rank(), tag, false)
            }
        }
    }

    /// [`Destination::synchronous_send_with_tag`] with tag 0.
    fn synchronous_send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.synchronous_send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag` in ready mode (`MPI_Rsend`). Ready mode lets
    /// an implementation assume that the matching receive is posted; hmpi
    /// sends in standard mode, which the standard allows, so a ready send
    /// whose receive is not posted yet is delivered normally rather than
    /// reported.
    fn ready_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: i32) -> Result<()> {
        self.send_with_tag(buf, tag)
    }

    /// [`Destination::ready_send_with_tag`] with tag 0.
    fn ready_send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.ready_send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag` in buffered mode (`MPI_Bsend`): copies it
    /// and returns, whatever the receiver does, within the capacity of the
    /// buffer attached with [`crate::buffered::attach`] ([`Error::Buffer`]
    /// when it does not fit or none is attached).
    fn buffered_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: i32) -> Result<()> {
        crate::buffered::bsend(self.comm(), buf.as_bytes(), self.destination_rank(), tag)
    }

    /// [`Destination::buffered_send_with_tag`] with tag 0.
    fn buffered_send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.buffered_send_with_tag(buf, 0)
    }

    /// Starts sending `buf` (`MPI_Isend`); the request belongs to `scope`,
    /// which completes it at its end at the latest.
    fn immediate_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
        tag: i32,
    ) -> Result<Request<'s>> {
        start_in_scope(self, scope, buf.as_bytes(), tag, false)
    }

    /// [`Destination::immediate_send_with_tag`] with tag 0.
    fn immediate_send<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
    ) -> Result<Request<'s>> {
        self.immediate_send_with_tag(scope, buf, 0)
    }

    /// Starts a synchronous send (`MPI_Issend`): the request completes
    /// once the receiver has matched the message.
    fn immediate_synchronous_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
        tag: i32,
    ) -> Result<Request<'s>> {
        start_in_scope(self, scope, buf.as_bytes(), tag, true)
    }

    /// [`Destination::immediate_synchronous_send_with_tag`] with tag 0.
    fn immediate_synchronous_send<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
    ) -> Result<Request<'s>> {
        self.immediate_synchronous_send_with_tag(scope, buf, 0)
    }

    /// Starts a ready-mode send (`MPI_Irsend`), sent in standard mode (see
    /// [`Destination::ready_send_with_tag`]).
    fn immediate_ready_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
        tag: i32,
    ) -> Result<Request<'s>> {
        self.immediate_send_with_tag(scope, buf, tag)
    }

    /// [`Destination::immediate_ready_send_with_tag`] with tag 0.
    fn immediate_ready_send<'s, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s B,
    ) -> Result<Request<'s>> {
        self.immediate_ready_send_with_tag(scope, buf, 0)
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

/// A message taken off the matching lists by a matched probe
/// ([`Source::matched_probe`]; MPI's `MPI_Message`), to be received
/// exactly once through this handle.
///
/// Receiving copies at once (the message is already in this process's
/// hands). Dropping a `Message` without receiving it discards the payload
/// and lets the sender's request complete (rsmpi panics instead). It may be
/// sent to another thread.
#[derive(Debug)]
#[must_use = "a matched message is lost for every other receive; dropping it discards it"]
pub struct Message {
    inner: Matched,
    status: Status,
    comm: SimpleCommunicator,
}

/// The message a matched probe took: the engine's, or (feature `mpi`) one
/// of a communicator spanning nodes.
#[derive(Debug)]
enum Matched {
    Node(vci::Message<'static>),
    #[cfg(feature = "mpi")]
    Span(crate::multinode::SpanMessage),
}

impl Message {
    /// A matched message of `comm` and its status (communicator ranks).
    fn new(inner: Matched, st: raw::Status, comm: &SimpleCommunicator) -> (Message, Status) {
        let status = Status::from_engine(st, None);
        let m = Message {
            inner,
            status,
            comm: comm.clone(),
        };
        (m, status)
    }

    /// The probe's status: source, tag and length of the message.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether this is the empty message of a probe on `PROC_NULL`
    /// (`MPI_MESSAGE_NO_PROC`): receiving it delivers nothing.
    pub fn is_no_proc(&self) -> bool {
        match &self.inner {
            Matched::Node(m) => m.is_no_proc(),
            #[cfg(feature = "mpi")]
            Matched::Span(m) => m.is_no_proc(),
        }
    }

    /// Receives the message into `buf` (`MPI_Mrecv`). A message longer
    /// than `buf` is [`Error::Truncate`] (the prefix is delivered).
    pub fn matched_receive_into<B: BufferMut + ?Sized>(self, buf: &mut B) -> Result<Status> {
        match self.inner {
            Matched::Node(m) => received(raw::mrecv(&self.comm, m, buf.as_bytes_mut())?),
            #[cfg(feature = "mpi")]
            Matched::Span(m) => received(m.recv(buf.as_bytes_mut())?),
        }
    }

    /// Receives the message as one value of `T`; it must be exactly one
    /// ([`Error::Count`] if shorter, [`Error::Truncate`] if longer).
    pub fn matched_receive<T: Equivalence>(self) -> Result<(T, Status)> {
        let mut v: T = zeroed();
        let st = self.matched_receive_into(&mut v)?;
        exactly_one::<T>(&st)?;
        Ok((v, st))
    }

    /// Receives the message as a `Vec<T>` of its length. A length that is
    /// not a whole number of `T`s is [`Error::Count`] (the message is
    /// discarded); a zero-sized `T` is [`Error::Type`].
    pub fn matched_receive_vec<T: Equivalence>(self) -> Result<(Vec<T>, Status)> {
        let n = elements::<T>(self.status.bytes, None)?;
        let mut v: Vec<T> = zeroed_vec(n);
        let st = self.matched_receive_into(&mut v[..])?;
        Ok((v, st))
    }

    /// Receives the message into `buf` as a request of `scope`
    /// (`MPI_Imrecv`). The copy happens in this call, so the request is
    /// complete at once; its status (or truncation error) comes from
    /// waiting or testing it, as for any request.
    pub fn immediate_matched_receive_into<'s, B: BufferMut + ?Sized>(
        self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut B,
    ) -> Result<Request<'s>> {
        #[cfg(not(feature = "mpi"))]
        let Matched::Node(m) = self.inner;
        #[cfg(feature = "mpi")]
        let m = match self.inner {
            Matched::Node(m) => m,
            // The copy happens here too: the request is complete at once.
            Matched::Span(m) => {
                let st = m.recv(buf.as_bytes_mut())?;
                return Ok(scope.finished(st));
            }
        };
        let table = self.comm.status_table().cloned();
        let r = m
            .imrecv(buf.as_bytes_mut())
            .map_err(|e| engine_error_in(e, table.as_deref()))?;
        Ok(scope.insert(r, table.as_ref()))
    }
}

/// rsmpi's way to receive a matched probe's message as a `Vec`:
/// `source.matched_probe()?.matched_receive_vec::<T>()` on the
/// `(Message, Status)` pair (see [`Message::matched_receive_vec`]).
pub trait MatchedReceiveVec {
    /// Receives the message as a `Vec<T>` of its length.
    fn matched_receive_vec<T: Equivalence>(self) -> Result<(Vec<T>, Status)>;
}

impl MatchedReceiveVec for (Message, Status) {
    fn matched_receive_vec<T: Equivalence>(self) -> Result<(Vec<T>, Status)> {
        self.0.matched_receive_vec()
    }
}

/// Sends and receives without blocking on either alone: the core of the
/// `send_receive` family. On one communicator, [`raw::sendrecv`]; on two,
/// the receive is posted, then the send made, then the receive waited
/// for. Errors about ranks and tags are found before anything starts.
#[allow(clippy::too_many_arguments)]
fn exchange<D: Destination + ?Sized, S: Source + ?Sized>(
    msg: &[u8],
    destination: &D,
    sendtag: i32,
    buf: &mut [u8],
    source: &S,
    receivetag: i32,
) -> Result<Status> {
    let (dc, sc) = (destination.comm(), source.comm());
    #[cfg(feature = "mpi")]
    if let Some(s) = sc.spanning() {
        // The receive is posted first, then the send made (through
        // whichever path its communicator takes), then the receive waited
        // for.
        // SAFETY: the request is completed before this function returns
        // on every path (waited for below, or cancelled and dropped —
        // dropping waits — if the send fails); `buf` outlives it.
        let mut r = unsafe { s.irecv(buf, source.source_rank(), receivetag) }?;
        let dest = destination.destination_rank();
        if let Err(e) = send_bytes(dc, msg, dest, sendtag, false) {
            let _ = r.cancel();
            drop(r);
            return Err(e);
        }
        return received(r.wait()?);
    }
    if (std::ptr::eq(dc, sc) || dc.context() == sc.context()) && !dc.spans_nodes() {
        let mut st = raw::Status::empty();
        raw::sendrecv(
            dc,
            msg,
            destination.destination_rank(),
            sendtag,
            buf,
            source.source_rank(),
            receivetag,
            &mut st,
        )?;
        return received(st);
    }
    // Two communicators: the receive is posted first on its own, then the
    // send, then the receive is waited for.
    raw::check_send_tag(sendtag)?;
    if !dc.spans_nodes() {
        raw::route(dc, destination.destination_rank())?;
    }
    // SAFETY: the request is completed before this function returns, on
    // every path (waited for below, or cancelled and dropped — dropping
    // waits — if the send fails); it is never leaked, and `buf` outlives it.
    let mut r = unsafe { raw::irecv(sc, buf, source.source_rank(), receivetag) }?;
    if let Err(e) = send_bytes(dc, msg, destination.destination_rank(), sendtag, false) {
        r.cancel();
        drop(r);
        return Err(e);
    }
    let fw = sc.world_to_comm();
    r.wait()
        .map(|st| Status::from_engine(st, Some(fw)))
        .map_err(|e| engine_error(e, fw))
}

/// Sends `msg` to `destination` with `sendtag` and receives into `buf`
/// a message from `source` with `receivetag` (or `ANY_TAG`), as one
/// operation (`MPI_Sendrecv`). The receive is posted first, so processes
/// that call this towards each other at the same time do not deadlock.
/// Returns the receive's status; a longer message is [`Error::Truncate`].
/// `PROC_NULL` on either side skips that side. The send travels on the
/// destination's communicator and the receive on the source's (rsmpi
/// requires them to be the same).
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: i32,
    buf: &mut B,
    source: &S,
    receivetag: i32,
) -> Result<Status>
where
    M: Buffer + ?Sized,
    D: Destination,
    B: BufferMut + ?Sized,
    S: Source,
{
    exchange(
        msg.as_bytes(),
        destination,
        sendtag,
        buf.as_bytes_mut(),
        source,
        receivetag,
    )
}

/// [`send_receive_into_with_tags`] with send tag 0 and any receive tag.
pub fn send_receive_into<M, D, B, S>(
    msg: &M,
    destination: &D,
    buf: &mut B,
    source: &S,
) -> Result<Status>
where
    M: Buffer + ?Sized,
    D: Destination,
    B: BufferMut + ?Sized,
    S: Source,
{
    send_receive_into_with_tags(msg, destination, 0, buf, source, ANY_TAG)
}

/// Sends `msg` and receives one value of `R` (exactly one:
/// [`Error::Count`] / [`Error::Truncate`] otherwise); see
/// [`send_receive_into_with_tags`].
pub fn send_receive_with_tags<R, M, D, S>(
    msg: &M,
    destination: &D,
    sendtag: i32,
    source: &S,
    receivetag: i32,
) -> Result<(R, Status)>
where
    R: Equivalence,
    M: Buffer + ?Sized,
    D: Destination,
    S: Source,
{
    let mut v: R = zeroed();
    let st = send_receive_into_with_tags(msg, destination, sendtag, &mut v, source, receivetag)?;
    exactly_one::<R>(&st)?;
    Ok((v, st))
}

/// [`send_receive_with_tags`] with send tag 0 and any receive tag
/// (rsmpi's `send_receive::<R, _, _, _>(&msg, &destination, &source)`).
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> Result<(R, Status)>
where
    R: Equivalence,
    M: Buffer + ?Sized,
    D: Destination,
    S: Source,
{
    send_receive_with_tags(msg, destination, 0, source, ANY_TAG)
}

/// Sends the contents of `buf` and replaces them with a received message
/// (`MPI_Sendrecv_replace`): the outgoing bytes are copied aside first,
/// then as [`send_receive_into_with_tags`]. A receive from `PROC_NULL`
/// leaves `buf` as it was.
pub fn send_receive_replace_into_with_tags<B, D, S>(
    buf: &mut B,
    destination: &D,
    sendtag: i32,
    source: &S,
    receivetag: i32,
) -> Result<Status>
where
    B: BufferMut + ?Sized,
    D: Destination,
    S: Source,
{
    let bytes = buf.as_bytes_mut();
    let out = bytes.to_vec();
    exchange(&out, destination, sendtag, bytes, source, receivetag)
}

/// [`send_receive_replace_into_with_tags`] with send tag 0 and any
/// receive tag.
pub fn send_receive_replace_into<B, D, S>(
    buf: &mut B,
    destination: &D,
    source: &S,
) -> Result<Status>
where
    B: BufferMut + ?Sized,
    D: Destination,
    S: Source,
{
    send_receive_replace_into_with_tags(buf, destination, 0, source, ANY_TAG)
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
        assert!(raw::check_send_tag(ANY_TAG).is_err());
        assert!(raw::check_recv_tag(ANY_TAG).is_ok());
        assert!(raw::check_send_tag(crate::TAG_UB + 1).is_err());
    }
}
