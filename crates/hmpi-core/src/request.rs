//! Nonblocking operations in a scope: [`scope`], [`Scope`], [`Request`]
//! (rsmpi's `request::scope`, shaped like `std::thread::scope`).
//!
//! `immediate_send` / `immediate_receive_into` borrow their buffer for the
//! scope's lifetime `'s` and return a [`Request<'s>`]. Every request started
//! in a scope is completed before [`scope`] returns: the ones waited for or
//! tested to completion by the program, and **every other one** — dropped
//! (dropping a pending request waits), or leaked with `mem::forget` — is
//! waited for at the scope's end. If the scope's closure panics, pending
//! receives are cancelled and the rest waited for before unwinding goes on.
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
use crate::environment::endpoint;
use crate::error::{Error, Result};
use crate::point_to_point::{engine_error, Status};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The engine requests of a scope, by index; `None` for finished slots.
#[derive(Default, Debug)]
struct Table<'s> {
    slots: Vec<Option<vci::Request<'s>>>,
    free: Vec<usize>,
}

/// The table as a scope holds it: no drop glue (so the scope may be
/// borrowed for its own lifetime `'s`); [`scope`] empties it before
/// returning, on every path.
type Slots<'s> = RefCell<ManuallyDrop<Table<'s>>>;

/// The owner of the requests started in one [`scope`] (rsmpi's
/// `LocalScope`). Only ever seen as `&'s Scope<'s, 'env>`; `'env` is the
/// lifetime of what the closure borrows, which outlives `'s`.
pub struct Scope<'s, 'env: 's> {
    table: Slots<'s>,
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

impl<'s> Scope<'s, '_> {
    /// Completes every request left in the table (the program dropped or
    /// leaked its handle, or is unwinding): cancels pending receives first
    /// if `cancel`, then waits.
    fn complete_all(&self, cancel: bool) {
        let t = std::mem::take(&mut **self.table.borrow_mut());
        for mut r in t.slots.into_iter().flatten() {
            if cancel {
                // A receive nobody will ever match would hang the unwinding.
                r.cancel();
            }
            drop(r); // waits
        }
    }

    fn insert(&'s self, r: vci::Request<'s>, from_world: &Arc<[i32]>) -> Request<'s> {
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
            state: State::Pending(index),
            from_world: from_world.clone(),
        }
    }

    /// Puts an engine request that a layer above the engine started (an
    /// ownership-passing receive, say) into this scope, which completes it
    /// before the scope ends like every other request; statuses come back
    /// in `comm`'s ranks. The engine request borrows what it uses for `'s`,
    /// so the scope ends only after it is complete.
    pub fn adopt(&'s self, r: vci::Request<'s>, comm: &SimpleCommunicator) -> Request<'s> {
        self.insert(r, comm.world_to_comm())
    }

    pub(crate) fn start_send(
        &'s self,
        buf: &'s [u8],
        dest: i32,
        tag: i32,
        context: u32,
        from_world: &Arc<[i32]>,
    ) -> Result<Request<'s>> {
        let ep = endpoint()?;
        // SAFETY: the engine's request is moved into this scope's table
        // right away and never handed to the program; it leaves the table
        // only to be completed (wait, a completing test, or drop, which
        // waits), and `scope` completes whatever is left before it returns
        // (also when `f` panics), while `buf` (borrowed for 's, which lasts
        // until then) is still alive. See the module docs.
        let r = unsafe { ep.isend(buf, dest, tag, context) }
            .map_err(|e| engine_error(e, from_world))?;
        Ok(self.insert(r, from_world))
    }

    pub(crate) fn start_receive(
        &'s self,
        buf: &'s mut [u8],
        source: i32,
        tag: i32,
        context: u32,
        from_world: &Arc<[i32]>,
    ) -> Result<Request<'s>> {
        let ep = endpoint()?;
        // SAFETY: as in `start_send`: the request is owned by the scope's
        // table and completed before the scope (and so the borrow of `buf`)
        // ends, however the program treats the returned handle.
        let r = unsafe { ep.irecv(buf, source, tag, context) }
            .map_err(|e| engine_error(e, from_world))?;
        Ok(self.insert(r, from_world))
    }
}

/// Takes slot `index`'s engine request out of the table.
fn take<'s>(table: &Slots<'s>, index: usize) -> Option<vci::Request<'s>> {
    let mut t = table.borrow_mut();
    let r = t.slots.get_mut(index)?.take()?;
    t.free.push(index);
    Some(r)
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// The engine request is in the scope's table at this index.
    Pending(usize),
    /// Finished with this status (or error, reported already).
    Done(Status),
}

/// A nonblocking operation started in a [`Scope`]. Dropping a pending
/// request waits for it; leaking one is harmless (the scope completes it).
#[must_use = "a request should be waited for (dropping it waits)"]
#[derive(Debug)]
pub struct Request<'s> {
    table: &'s Slots<'s>,
    state: State,
    from_world: Arc<[i32]>,
}

impl Request<'_> {
    fn convert(&self, r: vci::Result<vci::Status>) -> Result<Status> {
        r.map(|st| Status::from_engine(st, Some(&self.from_world)))
            .map_err(|e| engine_error(e, &self.from_world))
    }

    /// Waits until the operation has finished (`MPI_Wait`). A receive of a
    /// longer message is [`Error::Truncate`] (the buffer holds the prefix).
    pub fn wait(mut self) -> Result<Status> {
        match self.state {
            State::Done(st) => Ok(st),
            State::Pending(i) => {
                let r = take(self.table, i).ok_or_else(missing)?;
                self.state = State::Done(crate::point_to_point::empty_status());
                let res = r.wait();
                self.convert(res)
            }
        }
    }

    /// Whether the operation has finished (`MPI_Test`; drives progress
    /// once): `Ok(Some(status))` once it has, every time it is asked.
    pub fn test(&mut self) -> Result<Option<Status>> {
        let i = match self.state {
            State::Done(st) => return Ok(Some(st)),
            State::Pending(i) => i,
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
        match res {
            Ok(None) => Ok(None),
            Ok(Some(st)) => {
                drop(take(self.table, i)); // complete: dropping does not wait
                let st = Status::from_engine(st, Some(&self.from_world));
                self.state = State::Done(st);
                Ok(Some(st))
            }
            Err(e) => {
                drop(take(self.table, i));
                self.state = State::Done(crate::point_to_point::empty_status());
                Err(engine_error(e, &self.from_world))
            }
        }
    }

    /// Whether the operation is known to have finished (no progress).
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Done(_))
    }
}

fn missing() -> Error {
    Error::Internal("a request's slot is empty".into())
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let State::Pending(i) = self.state {
            // Dropping the engine request waits for it.
            drop(take(self.table, i));
        }
    }
}
