//! rsmpi's `mpi::point_to_point`: sends, receives and probes through a
//! [`Process`] or [`AnyProcess`], and
//! combined send-receive.

use std::fmt;

use hmpi_core::point_to_point as core;
use hmpi_core::traits::{Destination as CoreDestination, Source as CoreSource};

use crate::datatype::{
    inout_buf, packed_size_of, recv_buf, send_buf, value_from, vec_from, Buffer, BufferMut,
    Datatype, Dense, Equivalence,
};
use crate::request::{start_from, start_into, Op, Request, Scope};
use crate::topology::{AnyProcess, Process, Rank};
use crate::{check, Count, Tag};

/// The traits of this module (in `mpi::traits`).
pub mod traits {
    pub use super::{Destination, MatchedReceiveVec, Source};
}

/// MPI's `MPI_UNDEFINED` (a count that is not a whole number of elements).
pub const UNDEFINED: Count = -32766;

/// What a receive or probe found (rsmpi's `Status`); a collective's status
/// is empty (any source, any tag, no data).
#[derive(Copy, Clone)]
pub struct Status(Option<hmpi_core::Status>);

impl Status {
    pub(crate) fn from_core(st: hmpi_core::Status) -> Status {
        Status(Some(st))
    }

    pub(crate) fn empty() -> Status {
        Status(None)
    }

    /// The rank of the message's sender.
    pub fn source_rank(&self) -> Rank {
        self.0.map_or(hmpi_core::ANY_SOURCE, |s| s.source_rank())
    }

    /// The message's tag.
    pub fn tag(&self) -> Tag {
        self.0.map_or(hmpi_core::ANY_TAG, |s| s.tag())
    }

    /// The number of elements of datatype `d` in the message
    /// (`MPI_Get_count`): [`UNDEFINED`] if not a whole number.
    pub fn count<D: Datatype>(&self, d: D) -> Count {
        let bytes = self.0.map_or(0, |s| s.byte_count());
        let size = d.core_datatype().size() as u64;
        if size == 0 {
            return 0;
        }
        if bytes % size != 0 {
            return UNDEFINED;
        }
        Count::try_from(bytes / size).unwrap_or(UNDEFINED)
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Status")
            .field("source", &self.source_rank())
            .field("tag", &self.tag())
            .finish()
    }
}

/// A message taken by a matched probe, to be received with one of its
/// methods (rsmpi's `Message`).
#[derive(Debug)]
pub struct Message(core::Message);

impl Message {
    /// Whether the message is from `PROC_NULL`.
    pub fn is_no_proc(&self) -> bool {
        self.0.is_no_proc()
    }

    /// Receives the message: exactly one `Msg`.
    pub fn matched_receive<Msg: Equivalence>(self) -> (Msg, Status) {
        let msg = self.0;
        receive_value(|b| msg.matched_receive_into(b))
    }

    /// Receives the message into `buf`.
    pub fn matched_receive_into<Buf: ?Sized + BufferMut>(self, buf: &mut Buf) -> Status {
        let mut r = recv_buf(buf);
        let st = check(self.0.matched_receive_into(&mut r));
        r.finish(Some(st.byte_count() as usize));
        Status::from_core(st)
    }

    /// Receives the message into `buf` in `scope`.
    pub fn immediate_matched_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut + 'a>(
        self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        let msg = self.0;
        start_into(scope, buf, Dense::of_mut, |s, buf| {
            msg.immediate_matched_receive_into(s, buf)
        })
    }
}

/// Receiving a matched message as a `Vec` (rsmpi's `MatchedReceiveVec`).
pub trait MatchedReceiveVec {
    /// Receives the message as a `Vec<Msg>`.
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let n = self.0 .0.status().byte_count() as usize;
        let mut v = vec![0u8; n];
        let st = check(self.0 .0.matched_receive_into(&mut v[..]));
        (
            vec_from(&v[..st.byte_count() as usize]),
            Status::from_core(st),
        )
    }
}

/// Receives exactly one `Msg` through `recv`, which receives into bytes
/// (the packed data of one `Msg`; a longer message is truncation, a
/// shorter one aborts).
fn receive_value<Msg: Equivalence>(
    recv: impl FnOnce(&mut [u8]) -> hmpi_core::Result<hmpi_core::Status>,
) -> (Msg, Status) {
    let mut v = vec![0u8; packed_size_of::<Msg>(1)];
    let st = check(recv(&mut v));
    (
        value_from(&v[..st.byte_count() as usize]),
        Status::from_core(st),
    )
}

fn probed((m, st): (core::Message, hmpi_core::Status)) -> (Message, Status) {
    (Message(m), Status::from_core(st))
}

/// Something to receive from (rsmpi's `Source`): a [`Process`] or
/// [`AnyProcess`].
pub trait Source {
    /// hmpi-core's source (not part of rsmpi's API).
    #[doc(hidden)]
    type CoreSource: core::Source;

    /// The source as hmpi-core's (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_source(&self) -> &Self::CoreSource;

    /// The rank received from (`ANY_SOURCE` for any process).
    fn source_rank(&self) -> Rank {
        CoreSource::source_rank(self.core_source())
    }

    /// Blocks until a message with `tag` is there.
    fn probe_with_tag(&self, tag: Tag) -> Status {
        Status::from_core(check(CoreSource::probe_with_tag(self.core_source(), tag)))
    }

    /// Blocks until a message is there.
    fn probe(&self) -> Status {
        Status::from_core(check(CoreSource::probe(self.core_source())))
    }

    /// Takes the next message with `tag` for a later receive.
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        probed(check(CoreSource::matched_probe_with_tag(
            self.core_source(),
            tag,
        )))
    }

    /// Takes the next message for a later receive.
    fn matched_probe(&self) -> (Message, Status) {
        probed(check(CoreSource::matched_probe(self.core_source())))
    }

    /// Receives exactly one `Msg` with `tag`.
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        let src = self.core_source();
        receive_value(|b| CoreSource::receive_into_with_tag(src, b, tag))
    }

    /// Receives exactly one `Msg`.
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        self.receive_with_tag(hmpi_core::ANY_TAG)
    }

    /// Receives a message with `tag` into `buf`.
    fn receive_into_with_tag<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf, tag: Tag) -> Status {
        let mut r = recv_buf(buf);
        let st = check(CoreSource::receive_into_with_tag(
            self.core_source(),
            &mut r,
            tag,
        ));
        r.finish(Some(st.byte_count() as usize));
        Status::from_core(st)
    }

    /// Receives a message into `buf`.
    fn receive_into<Buf: ?Sized + BufferMut>(&self, buf: &mut Buf) -> Status {
        self.receive_into_with_tag(buf, hmpi_core::ANY_TAG)
    }

    /// Receives a message with `tag` as a `Vec`.
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        let (m, _) = self.matched_probe_with_tag(tag);
        (m, Status::empty()).matched_receive_vec()
    }

    /// Receives a message as a `Vec`.
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        self.receive_vec_with_tag(hmpi_core::ANY_TAG)
    }

    /// Starts a receive with `tag` into `buf` in `scope`.
    fn immediate_receive_into_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut + 'a>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let src = self.core_source();
        start_into(scope, buf, Dense::of_mut, |s, buf| {
            CoreSource::immediate_receive_into_with_tag(src, s, buf, tag)
        })
    }

    /// Starts a receive into `buf` in `scope`.
    fn immediate_receive_into<'a, Sc: Scope<'a>, Buf: ?Sized + BufferMut + 'a>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_receive_into_with_tag(scope, buf, hmpi_core::ANY_TAG)
    }

    /// Starts a receive of one `Msg` with `tag` that is not tied to a
    /// scope: the returned future owns its buffer.
    fn immediate_receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> ReceiveFuture<Msg> {
        ReceiveFuture::start(self.core_source(), tag)
    }

    /// [`Source::immediate_receive_with_tag`] with any tag.
    fn immediate_receive<Msg: Equivalence>(&self) -> ReceiveFuture<Msg> {
        self.immediate_receive_with_tag(hmpi_core::ANY_TAG)
    }

    /// The status of a message with `tag` if one is there.
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        check(CoreSource::immediate_probe_with_tag(
            self.core_source(),
            tag,
        ))
        .map(Status::from_core)
    }

    /// The status of a message if one is there.
    fn immediate_probe(&self) -> Option<Status> {
        check(CoreSource::immediate_probe(self.core_source())).map(Status::from_core)
    }

    /// Takes a message with `tag` if one is there.
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        check(CoreSource::immediate_matched_probe_with_tag(
            self.core_source(),
            tag,
        ))
        .map(probed)
    }

    /// Takes a message if one is there.
    fn immediate_matched_probe(&self) -> Option<(Message, Status)> {
        check(CoreSource::immediate_matched_probe(self.core_source())).map(probed)
    }
}

impl<'c> Source for AnyProcess<'c> {
    type CoreSource = AnyProcess<'c>;
    fn core_source(&self) -> &AnyProcess<'c> {
        self
    }
}

impl<'c> Source for Process<'c> {
    type CoreSource = Process<'c>;
    fn core_source(&self) -> &Process<'c> {
        self
    }
}

/// Something to send to (rsmpi's `Destination`): a [`Process`].
pub trait Destination {
    /// hmpi-core's destination (not part of rsmpi's API).
    #[doc(hidden)]
    type CoreDestination: core::Destination;

    /// The destination as hmpi-core's (not part of rsmpi's API).
    #[doc(hidden)]
    fn core_destination(&self) -> &Self::CoreDestination;

    /// The rank sent to.
    fn destination_rank(&self) -> Rank {
        CoreDestination::destination_rank(self.core_destination())
    }

    /// Sends `buf` with `tag` (standard mode).
    fn send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        check(CoreDestination::send_with_tag(
            self.core_destination(),
            &send_buf(buf),
            tag,
        ))
    }

    /// Sends `buf` with tag 0.
    fn send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag`, returning once the receiver has matched it.
    fn synchronous_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        check(CoreDestination::synchronous_send_with_tag(
            self.core_destination(),
            &send_buf(buf),
            tag,
        ))
    }

    /// Sends `buf` with tag 0, returning once the receiver has matched it.
    fn synchronous_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag` in buffered mode (`MPI_Bsend`): copies it
    /// and returns whatever the receiver does, within the buffer attached
    /// with `Universe::set_buffer_size` (a message that does not fit, or no
    /// buffer, aborts with `MPI_ERR_BUFFER`).
    fn buffered_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        check(CoreDestination::buffered_send_with_tag(
            self.core_destination(),
            &send_buf(buf),
            tag,
        ))
    }

    /// Sends `buf` with tag 0 in buffered mode.
    fn buffered_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        self.buffered_send_with_tag(buf, 0)
    }

    /// Ready-mode send with `tag` (the receive must be posted already).
    ///
    /// # Safety
    /// As in rsmpi: the matching receive must be posted. hmpi delivers the
    /// message in standard mode anyway, so a late receive is not an error.
    unsafe fn ready_send_with_tag<Buf: ?Sized + Buffer>(&self, buf: &Buf, tag: Tag) {
        check(CoreDestination::ready_send_with_tag(
            self.core_destination(),
            &send_buf(buf),
            tag,
        ))
    }

    /// Ready-mode send with tag 0.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn ready_send<Buf: ?Sized + Buffer>(&self, buf: &Buf) {
        // SAFETY: the caller's promise is passed on.
        unsafe { self.ready_send_with_tag(buf, 0) }
    }

    /// Starts a send of `buf` with `tag` in `scope`.
    fn immediate_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let d = self.core_destination();
        start_from(scope, buf, |s| {
            CoreDestination::immediate_send_with_tag(d, s, Dense::of(buf), tag)
        })
    }

    /// Starts a send of `buf` with tag 0 in `scope`.
    fn immediate_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_send_with_tag(scope, buf, 0)
    }

    /// A buffered send of `buf` with `tag` (`MPI_Ibsend`): the copy is
    /// made now, as by [`Destination::buffered_send_with_tag`], so the
    /// request is complete when it is returned (as hmpi's `MPI_Ibsend`).
    fn immediate_buffered_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let _ = scope;
        self.buffered_send_with_tag(buf, tag);
        Request::new(Op::Done, buf)
    }

    /// [`Destination::immediate_buffered_send_with_tag`] with tag 0.
    fn immediate_buffered_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_buffered_send_with_tag(scope, buf, 0)
    }

    /// Starts a synchronous send of `buf` with `tag` in `scope`.
    fn immediate_synchronous_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let d = self.core_destination();
        start_from(scope, buf, |s| {
            CoreDestination::immediate_synchronous_send_with_tag(d, s, Dense::of(buf), tag)
        })
    }

    /// Starts a synchronous send of `buf` with tag 0 in `scope`.
    fn immediate_synchronous_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        self.immediate_synchronous_send_with_tag(scope, buf, 0)
    }

    /// Starts a ready-mode send of `buf` with `tag` in `scope`.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send_with_tag<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc> {
        let d = self.core_destination();
        start_from(scope, buf, |s| {
            CoreDestination::immediate_ready_send_with_tag(d, s, Dense::of(buf), tag)
        })
    }

    /// Starts a ready-mode send of `buf` with tag 0 in `scope`.
    ///
    /// # Safety
    /// See [`Destination::ready_send_with_tag`].
    unsafe fn immediate_ready_send<'a, Sc: Scope<'a>, Buf: ?Sized + Buffer + 'a>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc> {
        // SAFETY: the caller's promise is passed on.
        unsafe { self.immediate_ready_send_with_tag(scope, buf, 0) }
    }
}

impl<'c> Destination for Process<'c> {
    type CoreDestination = Process<'c>;
    fn core_destination(&self) -> &Process<'c> {
        self
    }
}

/// Sends `msg` to `destination` with `sendtag` and receives one `R` from
/// `source` with `receivetag` (`MPI_Sendrecv`).
pub fn send_receive_with_tags<R, M, D, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> (R, Status)
where
    R: Equivalence,
    M: ?Sized + Buffer,
    D: Destination,
    S: Source,
{
    let msg = send_buf(msg);
    receive_value(|b| {
        core::send_receive_into_with_tags(
            &msg,
            destination.core_destination(),
            sendtag,
            b,
            source.core_source(),
            receivetag,
        )
    })
}

/// [`send_receive_with_tags`] with tag 0 and any tag.
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> (R, Status)
where
    R: Equivalence,
    M: ?Sized + Buffer,
    D: Destination,
    S: Source,
{
    send_receive_with_tags(msg, destination, 0, source, hmpi_core::ANY_TAG)
}

/// Sends `msg` and receives into `buf` (`MPI_Sendrecv`).
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    buf: &mut B,
    source: &S,
    receivetag: Tag,
) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    let mut r = recv_buf(buf);
    let st = check(core::send_receive_into_with_tags(
        &send_buf(msg),
        destination.core_destination(),
        sendtag,
        &mut r,
        source.core_source(),
        receivetag,
    ));
    r.finish(Some(st.byte_count() as usize));
    Status::from_core(st)
}

/// [`send_receive_into_with_tags`] with tag 0 and any tag.
pub fn send_receive_into<M, D, B, S>(msg: &M, destination: &D, buf: &mut B, source: &S) -> Status
where
    M: ?Sized + Buffer,
    D: Destination,
    B: ?Sized + BufferMut,
    S: Source,
{
    send_receive_into_with_tags(msg, destination, 0, buf, source, hmpi_core::ANY_TAG)
}

/// Sends `buf` and receives into it (`MPI_Sendrecv_replace`).
pub fn send_receive_replace_into_with_tags<B, D, S>(
    buf: &mut B,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> Status
where
    B: ?Sized + BufferMut,
    D: Destination,
    S: Source,
{
    let mut r = inout_buf(buf);
    let st = check(core::send_receive_replace_into_with_tags(
        &mut r,
        destination.core_destination(),
        sendtag,
        source.core_source(),
        receivetag,
    ));
    r.finish(Some(st.byte_count() as usize));
    Status::from_core(st)
}

/// [`send_receive_replace_into_with_tags`] with tag 0 and any tag.
pub fn send_receive_replace_into<B, D, S>(buf: &mut B, destination: &D, source: &S) -> Status
where
    B: ?Sized + BufferMut,
    D: Destination,
    S: Source,
{
    send_receive_replace_into_with_tags(buf, destination, 0, source, hmpi_core::ANY_TAG)
}

/// A receive of one `T` started by [`Source::immediate_receive`] (rsmpi's
/// `ReceiveFuture`). It owns the buffer the message arrives in, so it
/// needs no scope: [`ReceiveFuture::get`] waits for the value,
/// [`ReceiveFuture::r#try`] tests. Dropping it cancels the receive if no
/// message matched yet and waits for it; leaking it leaks the buffer with
/// it, so the engine never writes into memory that was given back.
pub struct ReceiveFuture<T> {
    /// The buffer for the packed data of one `T` (a leaked `Box<[u8]>`),
    /// freed when the future is dropped.
    value: *mut [u8],
    req: Option<hmpi_core::raw::Request<'static>>,
    /// The communicator's world-to-communicator rank table, for statuses.
    ranks: Option<Vec<i32>>,
    _value: std::marker::PhantomData<T>,
}

impl<T> fmt::Debug for ReceiveFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiveFuture")
            .field("pending", &self.req.is_some())
            .finish()
    }
}

impl<T: Equivalence> ReceiveFuture<T> {
    fn start<S: CoreSource + ?Sized>(source: &S, tag: Tag) -> Self {
        let comm = source.comm();
        let value = Box::into_raw(vec![0u8; packed_size_of::<T>(1)].into_boxed_slice());
        // SAFETY: `value` is valid for writes of its length
        // and reached by nothing but the engine until the request is
        // complete: the future keeps the pointer to itself, completes or
        // cancels the request before it frees the buffer (`Drop`), and if
        // the future is leaked the buffer is leaked with it, so the
        // engine's writes never land in memory that was given back.
        let req = unsafe {
            hmpi_core::raw::irecv_raw(
                comm,
                value.cast::<u8>(),
                value.len(),
                source.source_rank(),
                tag,
            )
        };
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                // SAFETY: no request was started; `value` came from
                // `Box::into_raw` above and is freed once.
                drop(unsafe { Box::from_raw(value) });
                crate::fatal(&e)
            }
        };
        ReceiveFuture {
            value,
            req: Some(req),
            ranks: comm.status_ranks().map(<[i32]>::to_vec),
            _value: std::marker::PhantomData,
        }
    }

    /// The value and status of a completed receive (exactly one `T`, as
    /// a blocking `receive`); an error aborts.
    fn finish(&self, st: hmpi_core::raw::EngineResult<hmpi_core::raw::Status>) -> (T, Status) {
        let st = match st {
            Ok(st) => hmpi_core::Status::from_engine(st, self.ranks.as_deref()),
            Err(e) => match self.ranks.as_deref() {
                Some(r) => crate::fatal(&core::engine_error(e, r)),
                None => crate::fatal(&hmpi_core::Error::from(e)),
            },
        };
        // SAFETY: the request is complete, so the engine no longer
        // touches the buffer, which lives until the future is dropped.
        let data = unsafe { &*self.value };
        let n = (st.byte_count() as usize).min(data.len());
        (value_from(&data[..n]), Status::from_core(st))
    }

    /// Waits for the message.
    pub fn get(mut self) -> (T, Status) {
        match self.req.take() {
            Some(r) => {
                let st = r.wait();
                self.finish(st)
            }
            None => crate::fatal(&"the receive was already completed"),
        }
    }

    /// The message if it arrived, else the future back.
    pub fn r#try(mut self) -> Result<(T, Status), Self> {
        let Some(r) = self.req.as_mut() else {
            crate::fatal(&"the receive was already completed")
        };
        match r.test() {
            Ok(Some(st)) => {
                self.req = None;
                Ok(self.finish(Ok(st)))
            }
            Ok(None) => Err(self),
            Err(e) => {
                self.req = None;
                Ok(self.finish(Err(e)))
            }
        }
    }
}

impl<T> Drop for ReceiveFuture<T> {
    fn drop(&mut self) {
        if let Some(mut r) = self.req.take() {
            // Nothing may write into the buffer once it is freed.
            r.cancel();
            let _ = r.wait();
        }
        // SAFETY: `value` came from `Box::into_raw` in `start` and is
        // freed only here, after the request was completed (above, or by
        // `get` / `try`).
        drop(unsafe { Box::from_raw(self.value) });
    }
}
