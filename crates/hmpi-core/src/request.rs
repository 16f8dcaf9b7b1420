//! Nonblocking operations in a scope: [`scope`], [`Scope`], [`Request`]
//! (rsmpi's `request::scope`, shaped like `std::thread::scope`), and sets
//! of requests: [`RequestCollection`] ([`multiple_scope`]) and [`wait_any`].
//!
//! `immediate_send` / `immediate_receive_into` (and the synchronous and
//! matched variants) borrow their buffer for the scope's lifetime `'s` and
//! return a [`Request<'s>`]. Every request started in a scope is completed
//! before [`scope`] returns: the ones waited for or tested to completion by
//! the program, and **every other one** — dropped (dropping a pending
//! request waits), or leaked with `mem::forget` — is waited for at the
//! scope's end. If the scope's closure panics, pending receives are
//! cancelled and the rest waited for before unwinding goes on.
//!
//! # Completion
//! * one request: [`Request::wait`], [`Request::test`] (the status every
//!   time once done), [`Request::cancel`] (a receive that has not matched)
//!   and [`Request::is_cancelled`]; [`WaitGuard`] / [`CancelGuard`] wait
//!   or cancel when dropped;
//! * a set: [`RequestCollection`] (rsmpi's name) takes requests with
//!   [`RequestCollection::add`] and completes them with `wait_any`,
//!   `wait_some`, `wait_all`, `test_any`, `test_some`, `test_all` (MPI's
//!   `MPI_Waitany` … `MPI_Testall`). Each finished request is reported once,
//!   by its index, as a `Result<Status>` of its own: statuses are in the
//!   ranks of the request's communicator, and one failed request (a
//!   truncated receive, say) does not hide the others' outcomes. Waiting
//!   on a set drives the engine's progress for the whole set at once.
//!
//! # Why this is sound
//! The engine's `isend` / `irecv` are `unsafe` because the engine reads or
//! writes the buffer until the request completes, so the request must not
//! be leaked. Here the engine's request never reaches the program: it is
//! moved into the scope's table at once, and the program holds only an
//! index ([`Request`]). Leaking that index leaks nothing that matters. The
//! table lives in the [`Scope`] value owned by [`scope`]'s own stack frame;
//! the program sees only `&'s Scope<'s, 'env>` (it cannot move, forget or
//! drop the scope), and after the closure returns — or panics, caught and
//! resumed afterwards — [`scope`] completes every request left in the
//! table. The buffers are borrowed for `'s`, which the closure's
//! higher-ranked signature (`for<'s>`, bounded only by `'env: 's`) makes
//! outlast the closure and that final completion: they belong to the
//! caller of [`scope`], which cannot touch them before `scope` has
//! returned. `Scope` is invariant in `'s` (so a `&'s Scope<'s, 'env>`
//! cannot be shortened to admit a shorter-lived buffer) and neither `Send`
//! nor `Sync` (it cannot reach another thread). The endpoint the
//! requests borrow is a process-wide static that is never dropped.
//!
//! Set operations lend the engine requests of their members out of the
//! table for the duration of one engine call and put back the ones that
//! are still pending; if that call unwound, the lent requests would be
//! dropped, which waits for them, so no buffer is released early.
//!
//! # Example
//! ```
//! use hmpi_core::request;
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let me = world.this_process();
//! let out = vec![1u64, 2, 3];
//! let mut got = vec![0u64; 3];
//! let mut lost = [0u8; 2];
//! request::scope(|scope| {
//!     let r = world.any_process().immediate_receive_into(scope, &mut got).unwrap();
//!     let s = me.immediate_send_with_tag(scope, &out, 9).unwrap();
//!     let st = r.wait().unwrap();
//!     assert_eq!((st.source_rank(), st.tag(), st.count::<u64>().unwrap()), (0, 9, 3));
//!     s.wait().unwrap();
//!     // Leaked: the scope still completes it before returning.
//!     let r = me.immediate_receive_into_with_tag(scope, &mut lost, 3).unwrap();
//!     std::mem::forget(r);
//!     me.send_with_tag(&[4u8, 5], 3).unwrap();
//! });
//! assert_eq!(got, out);
//! assert_eq!(lost, [4, 5]);
//! ```
//!
//! A set of requests, one of which is cancelled:
//! ```
//! use hmpi_core::request;
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let me = world.this_process();
//! let (a, mut b, mut never) = (7u32, 0u32, 0u32);
//! request::multiple_scope(3, |scope, coll| {
//!     let r = me.immediate_receive_into_with_tag(scope, &mut b, 1).unwrap();
//!     let n = me.immediate_receive_into_with_tag(scope, &mut never, 2).unwrap();
//!     assert!(n.cancel()); // nothing with tag 2 will come
//!     coll.add(r);
//!     coll.add(n);
//!     coll.add(me.immediate_send_with_tag(scope, &a, 1).unwrap());
//!     let mut done = Vec::new();
//!     coll.wait_all(&mut done);
//!     assert_eq!(done.len(), 3);
//!     let (i, st) = &done[1];
//!     assert!(*i == 1 && st.as_ref().unwrap().is_cancelled());
//!     assert_eq!(coll.incomplete(), 0);
//! });
//! assert_eq!((b, never), (7, 0));
//! ```
//!
//! A buffer that does not outlive the scope is rejected at compile time:
//! ```compile_fail,E0597
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! hmpi_core::request::scope(|scope| {
//!     let mut buf = [0u8; 4]; // dies before the scope completes its requests
//!     let r = world.any_process().immediate_receive_into(scope, &mut buf).unwrap();
//!     std::mem::forget(r);
//! });
//! ```
//! and so is touching a buffer while a request in the scope may use it:
//! ```compile_fail,E0502
//! use hmpi_core::traits::*;
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let mut buf = [0u8; 4];
//! hmpi_core::request::scope(|scope| {
//!     let r = world.any_process().immediate_receive_into(scope, &mut buf).unwrap();
//!     std::mem::forget(r);
//!     println!("{}", buf[0]); // the engine may be writing it
//! });
//! ```

use crate::comm::SimpleCommunicator;
use crate::error::{Error, Result};
use crate::point_to_point::{engine_error_in, Status};
use crate::raw;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The engine requests of a scope, by index; `None` for finished slots
/// (and for slots whose request is lent to a set operation).
#[derive(Default, Debug)]
struct Table<'s> {
    slots: Vec<Option<vci::Request<'s>>>,
    free: Vec<usize>,
}

/// The table as a scope holds it: no drop glue (so the scope may be
/// borrowed for its own lifetime `'s`); [`scope`] empties it before
/// returning, on every path.
type Slots<'s> = RefCell<ManuallyDrop<Table<'s>>>;

/// The requests of communicators spanning nodes (feature `mpi`) started
/// in a scope, by index; like [`Slots`], no drop glue ([`scope`] empties
/// it).
#[cfg(feature = "mpi")]
type SpanSlots<'s> = RefCell<ManuallyDrop<Vec<Option<crate::multinode::SpanRequest<'s>>>>>;

/// The owner of the requests started in one [`scope`] (rsmpi's
/// `LocalScope`). Only ever seen as `&'s Scope<'s, 'env>`; `'env` is the
/// lifetime of what the closure borrows, which outlives `'s`.
pub struct Scope<'s, 'env: 's> {
    table: Slots<'s>,
    /// Nonblocking collectives started in the scope (see
    /// [`CollectiveRequest`]).
    colls: CollSlots,
    /// Partitioned receives made in the scope (see
    /// [`crate::partitioned::PartitionedRecv`]): a round in flight is
    /// waited for at the scope's end.
    parts: RefCell<Vec<Arc<crate::partitioned::RecvCore>>>,
    /// Requests of communicators spanning nodes.
    #[cfg(feature = "mpi")]
    spans: SpanSlots<'s>,
    /// Invariance in `'s` and `'env` (see the module docs).
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self
            .table
            .try_borrow()
            .map(|t| t.slots.iter().filter(|s| s.is_some()).count());
        f.debug_struct("Scope").field("pending", &n.ok()).finish()
    }
}

/// Runs `f` with a scope for nonblocking operations, and completes every
/// request started in it before returning (see the module docs). A panic
/// of `f` is resumed after the requests were completed (pending receives
/// cancelled).
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> R,
{
    let scope = Scope {
        table: RefCell::new(ManuallyDrop::new(Table::default())),
        colls: RefCell::new(Vec::new()),
        parts: RefCell::new(Vec::new()),
        #[cfg(feature = "mpi")]
        spans: RefCell::new(ManuallyDrop::new(Vec::new())),
        _scope: PhantomData,
        _env: PhantomData,
    };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    scope.complete_all(result.is_err());
    match result {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// rsmpi's `multiple_scope`: [`scope`] with an empty [`RequestCollection`]
/// (room for `reserve` requests) beside it. Requests left in the
/// collection when `f` returns are waited for (dropping a collection drops
/// its requests, and dropping a request waits).
pub fn multiple_scope<'env, F, R>(reserve: usize, f: F) -> R
where
    F: for<'s> FnOnce(&'s Scope<'s, 'env>, &mut RequestCollection<'s>) -> R,
{
    scope(|s| {
        let mut coll = RequestCollection::with_capacity(reserve);
        f(s, &mut coll)
    })
}

impl<'s> Scope<'s, '_> {
    /// Completes every request left in the table (the program dropped or
    /// leaked its handle, or is unwinding): cancels pending receives first
    /// if `cancel`, then waits.
    fn complete_all(&self, cancel: bool) {
        // Collectives first: the other members wait for this one's part,
        // and a collective cannot be cancelled.
        let colls = std::mem::take(&mut *self.colls.borrow_mut());
        for c in colls.into_iter().flatten() {
            let _ = c.wait();
        }
        // Partitioned receives: their senders write into the scope's
        // buffers until the round completes.
        let parts = std::mem::take(&mut *self.parts.borrow_mut());
        for p in parts {
            let _ = p.wait();
        }
        #[cfg(feature = "mpi")]
        {
            let spans = std::mem::take(&mut **self.spans.borrow_mut());
            for mut r in spans.into_iter().flatten() {
                if cancel {
                    let _ = r.cancel();
                }
                drop(r); // waits
            }
        }
        let t = std::mem::take(&mut **self.table.borrow_mut());
        for mut r in t.slots.into_iter().flatten() {
            if cancel {
                // A receive nobody will ever match would hang the unwinding.
                r.cancel();
            }
            drop(r); // waits
        }
    }

    /// Puts an engine request into the table (statuses translated with
    /// `from_world`, as [`SimpleCommunicator::status_ranks`] gives it). One
    /// that finished as it started (a send through a fast box, a receive
    /// whose message was there) skips the table: its status is all there is
    /// left of it.
    pub(crate) fn insert(
        &'s self,
        r: vci::Request<'s>,
        from_world: Option<&Arc<[i32]>>,
    ) -> Request<'s> {
        let from_world = from_world.cloned();
        if let Some(st) = r.finished() {
            // Finished: dropping the engine request does not wait.
            return Request {
                table: &self.table,
                #[cfg(feature = "mpi")]
                spans: &self.spans,
                state: State::Done(st),
                from_world,
                cancelled: Cell::new(false),
            };
        }
        let mut t = self.table.borrow_mut();
        let index = match t.free.pop() {
            Some(i) => {
                t.slots[i] = Some(r);
                i
            }
            None => {
                t.slots.push(Some(r));
                t.slots.len() - 1
            }
        };
        Request {
            table: &self.table,
            #[cfg(feature = "mpi")]
            spans: &self.spans,
            state: State::Pending(index),
            from_world,
            cancelled: Cell::new(false),
        }
    }

    /// A request that finished as it started, with status `st` (in the
    /// communicator's ranks).
    #[cfg(feature = "mpi")]
    pub(crate) fn finished(&'s self, st: vci::Status) -> Request<'s> {
        Request {
            table: &self.table,
            spans: &self.spans,
            state: State::Done(st),
            from_world: None,
            cancelled: Cell::new(false),
        }
    }

    /// Puts a request of a communicator spanning nodes into the scope
    /// (its statuses are in that communicator's ranks already).
    #[cfg(feature = "mpi")]
    fn insert_span(&'s self, r: crate::multinode::SpanRequest<'s>) -> Request<'s> {
        let mut t = self.spans.borrow_mut();
        let index = match t.iter().position(Option::is_none) {
            Some(i) => {
                t[i] = Some(r);
                i
            }
            None => {
                t.push(Some(r));
                t.len() - 1
            }
        };
        Request {
            table: &self.table,
            spans: &self.spans,
            state: State::Span(index),
            from_world: None,
            cancelled: Cell::new(false),
        }
    }

    /// Puts an engine request that a layer above the engine started (an
    /// ownership-passing receive, say) into this scope, which completes it
    /// before the scope ends like every other request; statuses come back
    /// in `comm`'s ranks. The engine request borrows what it uses for `'s`,
    /// so the scope ends only after it is complete.
    pub fn adopt(&'s self, r: vci::Request<'s>, comm: &SimpleCommunicator) -> Request<'s> {
        self.insert(r, comm.status_table())
    }

    /// Starts a send of `buf` to communicator rank `dest` of `comm`
    /// (synchronous if `sync`: the request completes only once the
    /// receiver has matched the message).
    pub(crate) fn start_send(
        &'s self,
        comm: &SimpleCommunicator,
        buf: &'s [u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<Request<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            // SAFETY: as below: the request is owned by the scope's table
            // of spanning requests and completed before the scope (and so
            // the borrow of `buf`) ends.
            let r = unsafe { s.isend(buf, dest, tag, sync) }?;
            return Ok(self.insert_span(r));
        }
        // SAFETY: the engine's request is moved into this scope's table
        // right away and never handed to the program; it leaves the table
        // only to be completed (wait, a completing test, drop, which waits,
        // or a set operation, which puts it back or completes it), and
        // `scope` completes whatever is left before it returns (also when
        // `f` panics), while `buf` (borrowed for 's, which lasts until
        // then) is still alive. See the module docs.
        let r = unsafe { raw::isend(comm, buf, dest, tag, sync) }?;
        Ok(self.insert(r, comm.status_table()))
    }

    /// Starts a receive into `buf` from communicator rank `source` of
    /// `comm` (or `ANY_SOURCE`).
    pub(crate) fn start_receive(
        &'s self,
        comm: &SimpleCommunicator,
        buf: &'s mut [u8],
        source: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            // SAFETY: as in `start_send`.
            let r = unsafe { s.irecv(buf, source, tag) }?;
            return Ok(self.insert_span(r));
        }
        // SAFETY: as in `start_send`: the request is owned by the scope's
        // table and completed before the scope (and so the borrow of `buf`)
        // ends, however the program treats the returned handle.
        let r = unsafe { raw::irecv(comm, buf, source, tag) }?;
        Ok(self.insert(r, comm.status_table()))
    }
}

impl<'s> Scope<'s, '_> {
    /// Gives `block` to communicator rank `dest` of `comm` with `tag` as a
    /// request of this scope (ownership passing, `OPI_Igive`): on the node
    /// the block itself, complete at once ([`raw::igive`]); on a
    /// communicator spanning nodes (feature `mpi`), to another node MPI's
    /// send of its bytes, complete (and the block freed) when the send
    /// has. On error the block is still the caller's.
    ///
    /// # Safety
    /// As [`raw::give`]: `block` is a block of the global allocator with
    /// its layout (or of size 0), owned by the caller, given up on
    /// success.
    pub unsafe fn start_give(
        &'s self,
        comm: &SimpleCommunicator,
        traffic: raw::Traffic,
        block: raw::OwnedBlock,
        dest: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            if !matches!(traffic, raw::Traffic::PointToPoint) {
                return Err(comm.no_span_form("ownership passing in a collective"));
            }
            // SAFETY: the caller's guarantee is the spanning give's; the
            // request is owned by the scope's table and completed before
            // the scope ends.
            let r = unsafe { s.igive(block, dest, tag) }?;
            return Ok(self.insert_span(r));
        }
        // SAFETY: the caller's guarantee.
        let r = unsafe { raw::igive(comm, traffic, block, dest, tag) }?;
        Ok(self.insert(r, comm.status_table()))
    }

    /// Starts taking a block (aligned to `align`) from communicator rank
    /// `source` of `comm` with `tag` into `out`, as a request of this
    /// scope (`OPI_Itake`): on the node the sender's block itself; on a
    /// communicator spanning nodes (feature `mpi`), from another node a
    /// fresh block of the message's length (allocate + receive), without
    /// `meta` words; `ANY_SOURCE` is then refused ([`Error::Rank`]).
    pub fn start_take(
        &'s self,
        comm: &SimpleCommunicator,
        out: &'s mut Option<raw::OwnedBlock>,
        align: usize,
        source: i32,
        tag: i32,
    ) -> Result<Request<'s>> {
        #[cfg(feature = "mpi")]
        if let Some(s) = comm.spanning() {
            // SAFETY: `out` is borrowed for the scope, whose table of
            // spanning requests owns the request and completes it before
            // the scope (and so the borrow) ends.
            let r = unsafe { s.itake(out, align, source, tag) }?;
            return Ok(self.insert_span(r));
        }
        // SAFETY: as in `start_receive`: the request is owned by the
        // scope's table and completed before the scope (and so the borrow
        // of `out`) ends, however the program treats the returned handle.
        let r = unsafe { raw::irecv_owned(comm, out, align, source, tag) }?;
        Ok(self.insert(r, comm.status_table()))
    }

    /// Keeps a partitioned receive whose buffer is borrowed for `'s`, so
    /// that the scope's end waits for a round of it in flight.
    pub(crate) fn keep_partitioned(&'s self, r: Arc<crate::partitioned::RecvCore>) {
        let mut v = self.parts.borrow_mut();
        // Forget the ones only the scope holds and that are inactive.
        v.retain(|p| Arc::strong_count(p) > 1 || p.is_active());
        v.push(r);
    }
}

/// Takes slot `index`'s engine request out of the table and frees the slot.
fn take<'s>(table: &Slots<'s>, index: usize) -> Option<vci::Request<'s>> {
    let mut t = table.borrow_mut();
    let r = t.slots.get_mut(index)?.take()?;
    t.free.push(index);
    Some(r)
}

/// The engine's outcome of a finished request as one status: an error the
/// engine reports (truncation, a failed kernel-assisted copy) is recorded
/// in the status it carries.
fn raw_status(r: vci::Result<vci::Status>) -> Result<vci::Status> {
    match r {
        Ok(st) => Ok(st),
        Err(vci::Error::Truncate { status, .. }) | Err(vci::Error::Transfer { status, .. }) => {
            Ok(status)
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// The engine request is in the scope's table at this index (or lent
    /// to a set operation in progress).
    Pending(usize),
    /// Finished with this engine status (in world ranks, with its error).
    Done(vci::Status),
    /// A request of a communicator spanning nodes, in the scope's table of
    /// those at this index.
    #[cfg(feature = "mpi")]
    Span(usize),
    /// Its engine request vanished from the table (a broken invariant,
    /// reported as [`Error::Internal`]).
    Lost,
}

/// The collectives of a scope: no lifetime in them (their buffers'
/// lifetime is the scope's, which the scope's end enforces).
type CollSlots = RefCell<Vec<Option<crate::collective::CollRequest>>>;

impl<'s> Scope<'s, '_> {
    /// Keeps a started collective in the scope, which completes it at its
    /// end if the program does not.
    pub(crate) fn insert_collective(
        &'s self,
        r: crate::collective::CollRequest,
    ) -> CollectiveRequest<'s> {
        let mut v = self.colls.borrow_mut();
        v.push(Some(r));
        CollectiveRequest {
            colls: &self.colls,
            index: v.len() - 1,
        }
    }
}

/// A nonblocking collective started in a [`Scope`] (rsmpi's `Request` of
/// an `immediate_*` collective): [`CollectiveRequest::wait`] or
/// [`CollectiveRequest::test`]. Dropping it waits; leaking it is harmless
/// (the scope's end waits).
#[must_use = "a collective should be waited for (dropping it waits)"]
#[derive(Debug)]
pub struct CollectiveRequest<'s> {
    colls: &'s CollSlots,
    index: usize,
}

impl CollectiveRequest<'_> {
    fn take(&self) -> Option<crate::collective::CollRequest> {
        self.colls
            .borrow_mut()
            .get_mut(self.index)
            .and_then(Option::take)
    }

    /// Waits until this member's part of the collective is complete.
    pub fn wait(self) -> Result<()> {
        self.take()
            .map_or(Ok(()), crate::collective::CollRequest::wait)
    }

    /// Whether it is complete (moving the collectives in flight on): its
    /// result the first time, `Some(Ok(()))` after.
    pub fn test(&mut self) -> Option<Result<()>> {
        let mut v = self.colls.borrow_mut();
        let Some(slot) = v.get_mut(self.index) else {
            return Some(Ok(()));
        };
        let r = slot.as_mut().map_or(Some(Ok(())), |c| c.test());
        if r.is_some() {
            *slot = None;
        }
        r
    }
}

impl Drop for CollectiveRequest<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return; // the scope's end completes it
        }
        if let Some(c) = self.take() {
            let _ = c.wait();
        }
    }
}

/// A nonblocking operation started in a [`Scope`]. Dropping a pending
/// request waits for it (unless the thread is panicking: then the scope's
/// end completes it, cancelling a receive); leaking one is harmless (the
/// scope completes it).
#[must_use = "a request should be waited for (dropping it waits)"]
#[derive(Debug)]
pub struct Request<'s> {
    table: &'s Slots<'s>,
    #[cfg(feature = "mpi")]
    spans: &'s SpanSlots<'s>,
    state: State,
    /// The communicator's table for statuses (`None`: world ranks).
    from_world: Option<Arc<[i32]>>,
    /// Set when [`Request::cancel`] cancelled the operation.
    cancelled: Cell<bool>,
}

impl<'s> Request<'s> {
    /// The outcome of a finished request, in the communicator's ranks.
    fn outcome(&self, st: vci::Status) -> Result<Status> {
        st.into_result()
            .map(|st| Status::from_engine(st, self.from_world.as_deref()))
            .map_err(|e| engine_error_in(e, self.from_world.as_deref()))
    }

    /// The outcome of a finished request; `None` while it is pending.
    fn result(&self) -> Option<Result<Status>> {
        match self.state {
            State::Pending(_) => None,
            #[cfg(feature = "mpi")]
            State::Span(_) => None,
            State::Done(st) => Some(self.outcome(st)),
            State::Lost => Some(Err(missing())),
        }
    }

    /// Waits until the operation has finished (`MPI_Wait`). A receive of a
    /// longer message is [`Error::Truncate`] (the buffer holds the prefix).
    pub fn wait(mut self) -> Result<Status> {
        #[cfg(feature = "mpi")]
        if let State::Span(i) = self.state {
            let r = self.spans.borrow_mut().get_mut(i).and_then(Option::take);
            self.state = State::Lost;
            let r = r.ok_or_else(missing)?;
            self.state = State::Done(r.wait()?);
        }
        if let State::Pending(i) = self.state {
            let Some(r) = take(self.table, i) else {
                self.state = State::Lost;
                return Err(missing());
            };
            // The slot is free from here on (another request may take
            // it): this request must never name it again.
            self.state = State::Lost;
            self.state = State::Done(raw_status(r.wait())?);
        }
        self.result().unwrap_or_else(|| Err(missing()))
    }

    /// Whether the operation has finished (`MPI_Test`; drives progress
    /// once): `Ok(Some(status))` once it has, every time it is asked (and a
    /// failed operation's error every time).
    pub fn test(&mut self) -> Result<Option<Status>> {
        #[cfg(feature = "mpi")]
        if let State::Span(i) = self.state {
            let mut t = self.spans.borrow_mut();
            let r = t.get_mut(i).and_then(Option::as_mut).ok_or_else(missing)?;
            let Some(st) = r.test()? else {
                return Ok(None);
            };
            // Finished: dropping it does not wait.
            t[i] = None;
            drop(t);
            self.state = State::Done(st);
            return self.outcome(st).map(Some);
        }
        let State::Pending(i) = self.state else {
            return self.result().transpose();
        };
        let res = {
            let mut t = self.table.borrow_mut();
            let r = t
                .slots
                .get_mut(i)
                .and_then(Option::as_mut)
                .ok_or_else(missing)?;
            r.test()
        };
        let st = match res {
            Ok(None) => return Ok(None),
            Ok(Some(st)) => st,
            Err(e) => raw_status(Err(e))?,
        };
        drop(take(self.table, i)); // complete: dropping does not wait
        self.state = State::Done(st);
        self.outcome(st).map(Some)
    }

    /// Whether the operation is known to have finished (no progress).
    pub fn is_complete(&self) -> bool {
        match self.state {
            State::Pending(_) => false,
            #[cfg(feature = "mpi")]
            State::Span(_) => false,
            _ => true,
        }
    }

    /// Cancels a receive that has not matched a message yet (`MPI_Cancel`):
    /// it then completes at once, with a status whose
    /// [`Status::is_cancelled`] is true. Returns whether it was cancelled.
    /// A send is never cancelled (MPI deprecates cancelling sends; the
    /// engine does not), nor is a receive that has matched already: both
    /// complete as usual.
    pub fn cancel(&self) -> bool {
        #[cfg(feature = "mpi")]
        if let State::Span(i) = self.state {
            let done = match self.spans.borrow_mut().get_mut(i) {
                Some(Some(r)) => r.cancel().unwrap_or(false),
                _ => false,
            };
            if done {
                self.cancelled.set(true);
            }
            return done;
        }
        let State::Pending(i) = self.state else {
            return false;
        };
        let done = match self.table.borrow_mut().slots.get_mut(i) {
            Some(Some(r)) => r.cancel(),
            _ => false,
        };
        if done {
            self.cancelled.set(true);
        }
        done
    }

    /// Whether the operation was cancelled (`MPI_Test_cancelled`): a
    /// [`Request::cancel`] succeeded, or it finished with a cancelled
    /// status.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.get() || matches!(self.state, State::Done(st) if st.cancelled)
    }

    /// Lends the engine request to a set operation (the slot stays
    /// reserved); `None` if it is finished already.
    fn lend(&self) -> Result<Option<vci::Request<'s>>> {
        match self.state {
            State::Done(_) | State::Lost => Ok(None),
            // Not the engine's: the set operations test it themselves.
            #[cfg(feature = "mpi")]
            State::Span(_) => Ok(None),
            State::Pending(i) => {
                let mut t = self.table.borrow_mut();
                let r = t.slots.get_mut(i).and_then(Option::take);
                r.map(Some).ok_or_else(missing)
            }
        }
    }

    /// Takes back a lent engine request that is still pending.
    fn give_back(&self, r: vci::Request<'s>) {
        if let State::Pending(i) = self.state {
            if let Some(slot) = self.table.borrow_mut().slots.get_mut(i) {
                *slot = Some(r);
                return;
            }
        }
        // Unreachable (a lent request's slot exists); dropping waits, so
        // the buffer stays safe either way.
        drop(r);
    }

    /// Records the finish of a lent engine request (the engine took and
    /// completed it) and frees its slot.
    fn finished(&mut self, st: vci::Status) {
        if let State::Pending(i) = self.state {
            self.table.borrow_mut().free.push(i);
        }
        self.state = State::Done(st);
    }
}

fn missing() -> Error {
    Error::Internal("a request's slot is empty".into())
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if let State::Span(i) = self.state {
            if std::thread::panicking() {
                return; // the scope's end cancels and waits
            }
            let r = self.spans.borrow_mut().get_mut(i).and_then(Option::take);
            drop(r); // waits
            return;
        }
        if let State::Pending(i) = self.state {
            if std::thread::panicking() {
                // Leave it to the scope's end, which cancels a pending
                // receive before waiting (a receive nobody will match would
                // hang the unwinding here).
                return;
            }
            // Dropping the engine request waits for it.
            drop(take(self.table, i));
        }
    }
}

/// Waits for the request when dropped, ignoring its outcome (rsmpi's
/// `WaitGuard`; a hmpi [`Request`] already waits when dropped, so this only
/// names the intent).
#[derive(Debug)]
pub struct WaitGuard<'s>(Option<Request<'s>>);

impl<'s> From<Request<'s>> for WaitGuard<'s> {
    fn from(r: Request<'s>) -> Self {
        WaitGuard(Some(r))
    }
}

impl<'s> From<WaitGuard<'s>> for Request<'s> {
    fn from(mut g: WaitGuard<'s>) -> Self {
        g.0.take().expect("a guard holds its request until dropped")
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            let _ = r.wait();
        }
    }
}

/// Cancels the request (if it is a receive that has not matched), then
/// waits for it, when dropped (rsmpi's `CancelGuard`).
#[derive(Debug)]
pub struct CancelGuard<'s>(Option<Request<'s>>);

impl<'s> From<Request<'s>> for CancelGuard<'s> {
    fn from(r: Request<'s>) -> Self {
        CancelGuard(Some(r))
    }
}

impl<'s> From<WaitGuard<'s>> for CancelGuard<'s> {
    fn from(g: WaitGuard<'s>) -> Self {
        CancelGuard(Some(g.into()))
    }
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.cancel();
            let _ = r.wait();
        }
    }
}

// ------------------------------------------------------------ request sets

/// How a set operation drives the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drive {
    /// Block until one finishes (`wait_any`).
    WaitOne,
    /// Block until at least one finishes, collect every finished one.
    WaitSome,
    /// Drive progress once; collect one finished request.
    TestOne,
    /// Drive progress once; collect every finished request.
    TestSome,
}

/// Drives the engine for the pending requests of `reqs` (lending their
/// engine requests for one engine call) and records in place the ones that
/// finished.
fn drive(reqs: &mut [Option<Request<'_>>], how: Drive) {
    #[cfg(feature = "mpi")]
    if reqs
        .iter()
        .flatten()
        .any(|r| matches!(r.state, State::Span(_)))
    {
        drive_polling(reqs, how);
        return;
    }
    // Only the pending requests go to the engine (with their indices in
    // `reqs`): in a window of small messages most have finished as they
    // started, and lending a slot for each of them on every pass cost more
    // than the waiting.
    let mut at = Vec::new();
    let mut set = Vec::new();
    for (i, slot) in reqs.iter_mut().enumerate() {
        let Some(r) = slot else { continue };
        match r.lend() {
            Ok(Some(l)) => {
                at.push(i);
                set.push(Some(l));
            }
            Ok(None) => {}
            Err(_) => r.state = State::Lost,
        }
    }
    if set.is_empty() {
        return;
    }
    let done: Vec<(usize, vci::Status)> = match how {
        Drive::WaitOne => vci::wait_any(&mut set).into_iter().collect(),
        Drive::WaitSome => vci::wait_some(&mut set),
        Drive::TestOne => vci::test_any(&mut set).into_iter().collect(),
        Drive::TestSome => vci::test_some(&mut set),
    };
    for (&i, lent) in at.iter().zip(set) {
        if let (Some(Some(r)), Some(e)) = (reqs.get(i), lent) {
            r.give_back(e);
        }
    }
    for (k, st) in done {
        if let Some(r) = at.get(k).and_then(|&i| reqs.get_mut(i)?.as_mut()) {
            r.finished(st);
        }
    }
}

/// [`drive`] for a set with requests of communicators spanning nodes
/// (feature `mpi`), which two engines complete: each pending request is
/// tested in turn, until one has finished (or once, for the tests).
#[cfg(feature = "mpi")]
fn drive_polling(reqs: &mut [Option<Request<'_>>], how: Drive) {
    loop {
        let mut any = false;
        for r in reqs.iter_mut().flatten() {
            if !r.is_complete() && r.test().is_err() && !r.is_complete() {
                // An error the request did not record: it is reported as
                // lost rather than waited for forever.
                r.state = State::Lost;
            }
            any |= r.is_complete();
        }
        if any || matches!(how, Drive::TestOne | Drive::TestSome) {
            return;
        }
        std::thread::yield_now();
    }
}

/// Takes the finished requests out of `reqs` (the first only if `one`) and
/// returns their indices and outcomes.
fn take_done(reqs: &mut [Option<Request<'_>>], one: bool, out: &mut Vec<(usize, Result<Status>)>) {
    for (i, slot) in reqs.iter_mut().enumerate() {
        let Some(res) = slot.as_ref().and_then(Request::result) else {
            continue;
        };
        *slot = None; // finished: dropping does not wait
        out.push((i, res));
        if one {
            return;
        }
    }
}

fn any_done(reqs: &[Option<Request<'_>>]) -> bool {
    reqs.iter().flatten().any(Request::is_complete)
}

/// Waits until one request of `reqs` has finished, removes it (as rsmpi's
/// `mpi::request::wait_any`: later requests move down by one) and returns
/// the index it had and its outcome; `None` if `reqs` is empty.
pub fn wait_any<'s>(reqs: &mut Vec<Request<'s>>) -> Option<(usize, Result<Status>)> {
    let mut set: Vec<Option<Request<'s>>> = reqs.drain(..).map(Some).collect();
    let mut out = Vec::with_capacity(1);
    if !any_done(&set) {
        drive(&mut set, Drive::WaitOne);
    }
    take_done(&mut set, true, &mut out);
    reqs.extend(set.into_iter().flatten());
    out.pop()
}

/// A set of requests completed together (rsmpi's `RequestCollection`;
/// MPI's arrays of requests for `MPI_Waitany` and friends).
///
/// [`RequestCollection::add`] gives each request an index (0, 1, …, in
/// order of addition). A request is reported once, when one of the
/// `wait_*` / `test_*` operations sees it finished: as `(index, outcome)`,
/// the outcome being its status in the ranks of its own communicator, or
/// its error. From then on its index is empty (MPI's
/// `MPI_REQUEST_NULL`). The requests of one collection belong to one
/// scope; dropping the collection drops the requests it still holds,
/// which waits for them.
#[derive(Debug, Default)]
pub struct RequestCollection<'s> {
    requests: Vec<Option<Request<'s>>>,
}

/// The outcomes of finished requests by index, as the set operations
/// report them.
pub type Outcomes = Vec<(usize, Result<Status>)>;

impl<'s> RequestCollection<'s> {
    /// An empty collection.
    pub fn new() -> Self {
        RequestCollection {
            requests: Vec::new(),
        }
    }

    /// An empty collection with room for `n` requests.
    pub fn with_capacity(n: usize) -> Self {
        RequestCollection {
            requests: Vec::with_capacity(n),
        }
    }

    /// Adds a request (pending, or finished already: then the next
    /// operation reports it) and returns its index.
    pub fn add(&mut self, req: Request<'s>) -> usize {
        self.requests.push(Some(req));
        self.requests.len() - 1
    }

    /// The number of requests ever added (the indices are `0..len()`).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether no request was ever added.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The number of requests not reported yet.
    pub fn incomplete(&self) -> usize {
        self.requests.iter().flatten().count()
    }

    /// The request at `index`, if it has not been reported yet.
    pub fn get(&self, index: usize) -> Option<&Request<'s>> {
        self.requests.get(index).and_then(Option::as_ref)
    }

    /// Cancels the request at `index` (see [`Request::cancel`]); `false`
    /// if there is none or it cannot be cancelled. It is still reported
    /// by a later `wait_*` / `test_*`, cancelled.
    pub fn cancel(&self, index: usize) -> bool {
        self.get(index).is_some_and(Request::cancel)
    }

    /// Waits until a request has finished and reports it (`MPI_Waitany`);
    /// `None` if every request was reported already.
    pub fn wait_any(&mut self) -> Option<(usize, Result<Status>)> {
        if !any_done(&self.requests) {
            drive(&mut self.requests, Drive::WaitOne);
        }
        let mut out = Vec::with_capacity(1);
        take_done(&mut self.requests, true, &mut out);
        out.pop()
    }

    /// Waits until at least one request has finished and reports every
    /// finished one into `result` (cleared first; by index;
    /// `MPI_Waitsome`). Leaves `result` empty if every request was
    /// reported already.
    pub fn wait_some(&mut self, result: &mut Outcomes) {
        result.clear();
        let how = if any_done(&self.requests) {
            Drive::TestSome
        } else {
            Drive::WaitSome
        };
        drive(&mut self.requests, how);
        take_done(&mut self.requests, false, result);
    }

    /// Waits until every request has finished and reports all those not
    /// reported yet into `result` (cleared first; by index;
    /// `MPI_Waitall`).
    pub fn wait_all(&mut self, result: &mut Outcomes) {
        result.clear();
        while self.requests.iter().flatten().any(|r| !r.is_complete()) {
            drive(&mut self.requests, Drive::WaitSome);
        }
        take_done(&mut self.requests, false, result);
    }

    /// Drives progress once and reports one finished request, if any
    /// (`MPI_Testany`).
    pub fn test_any(&mut self) -> Option<(usize, Result<Status>)> {
        if !any_done(&self.requests) {
            drive(&mut self.requests, Drive::TestOne);
        }
        let mut out = Vec::with_capacity(1);
        take_done(&mut self.requests, true, &mut out);
        out.pop()
    }

    /// Drives progress once and reports every finished request into
    /// `result` (cleared first; by index; `MPI_Testsome`).
    pub fn test_some(&mut self, result: &mut Outcomes) {
        result.clear();
        drive(&mut self.requests, Drive::TestSome);
        take_done(&mut self.requests, false, result);
    }

    /// Drives progress once; if every request not yet reported has
    /// finished, reports them all into `result` (cleared first; by index)
    /// and returns `true`, else reports nothing and returns `false`
    /// (`MPI_Testall`; the requests that did finish are reported later).
    pub fn test_all(&mut self, result: &mut Outcomes) -> bool {
        result.clear();
        drive(&mut self.requests, Drive::TestSome);
        if self.requests.iter().flatten().all(Request::is_complete) {
            take_done(&mut self.requests, false, result);
            true
        } else {
            false
        }
    }
}
