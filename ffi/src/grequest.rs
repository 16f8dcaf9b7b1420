//! Generalized requests of the C interface: `MPI_Grequest_start` and
//! `MPI_Grequest_complete`, for operations the program runs itself (in
//! another thread, or in its own code) and completes through the usual
//! wait and test routines.
//!
//! A generalized request is a request handle of the collectives' kind
//! ([`crate::coll`]), so `MPI_Wait`, `MPI_Test`, their array forms (mixed
//! with any other requests), `MPI_Request_get_status`, `MPI_Cancel` and
//! `MPI_Request_free` take it like any other. It finishes when the program
//! calls `MPI_Grequest_complete`; completing it then calls the program's
//! `query_fn` to fill the status (its return value, when not
//! `MPI_SUCCESS`, is the error of the completion), then its `free_fn`.
//! `MPI_Request_get_status` calls `query_fn` alone. `MPI_Cancel` calls
//! `cancel_fn` with whether `MPI_Grequest_complete` was called already. A
//! request freed by `MPI_Request_free` before `MPI_Grequest_complete` has
//! its `free_fn` called by `MPI_Grequest_complete`, as MPI says
//! ("whichever happens last"). A null callback does nothing (a null
//! `query_fn` leaves the empty status).
//!
//! In C:
//! ```c
//! int query(void *state, MPI_Status *st) {
//!     MPI_Status_set_elements(st, MPI_INT, *(int *)state);
//!     MPI_Status_set_cancelled(st, 0);
//!     st->MPI_SOURCE = MPI_UNDEFINED; st->MPI_TAG = MPI_UNDEFINED;
//!     return MPI_SUCCESS;
//! }
//! MPI_Request r;
//! MPI_Grequest_start(query, free_fn, cancel_fn, &n, &r);
//! // ... another thread does the work, then MPI_Grequest_complete(r)
//! MPI_Wait(&r, &status);
//! ```

use crate::abi::{self, MpiStatus, Request};
use crate::comm::{CommEntry, CommRef};
use crate::errors::{api, err, Handler, Res};
use crate::request::null_status;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// `MPI_Grequest_query_function`.
pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPI_Grequest_free_function`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The program's part of a generalized request.
struct Callbacks {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra_state: *mut c_void,
}

// SAFETY: `extra_state` is the program's pointer, handed back to its own
// callbacks, which MPI lets any thread call (MPI_THREAD_MULTIPLE is
// provided); nothing here reads through it.
unsafe impl Send for Callbacks {}

/// Where a generalized request is between start and free.
#[derive(Default)]
struct Life {
    /// `MPI_Request_free` was called before `MPI_Grequest_complete`.
    freed: bool,
    /// `free_fn` has run.
    released: bool,
}

/// One generalized request (shared by its table entry and the threads
/// that complete it or wait for it).
pub struct Greq {
    /// `MPI_Grequest_complete` was called.
    complete: AtomicBool,
    life: Mutex<Life>,
    calls: Mutex<Callbacks>,
}

/// A shared generalized request.
pub type GreqRef = Arc<Greq>;

/// A program callback's return value as a result.
fn code(rc: c_int, what: &str) -> Res {
    if rc == abi::SUCCESS {
        Ok(())
    } else {
        err(
            rc,
            format!("the generalized request's {what} returned {rc}"),
        )
    }
}

impl Greq {
    /// Whether `MPI_Grequest_complete` was called.
    pub fn is_finished(&self) -> bool {
        self.is_complete()
    }

    fn is_complete(&self) -> bool {
        // SYNC POINT: Acquire pairs with the Release in `mark_complete`:
        // what the program did before MPI_Grequest_complete is visible to
        // the thread that completes the request.
        self.complete.load(Ordering::Acquire)
    }

    /// `MPI_Grequest_complete`: a freed request is released now. `Some`
    /// when this call released it (then its handle goes), with the outcome
    /// of `free_fn`.
    fn mark_complete(&self) -> Res<Option<Res>> {
        // SYNC POINT: Release pairs with the Acquire in `is_complete`.
        if self.complete.swap(true, Ordering::AcqRel) {
            return err(
                abi::ERR_REQUEST,
                "MPI_Grequest_complete was called already on this request",
            );
        }
        let freed = self.life.lock().unwrap_or_else(|p| p.into_inner()).freed;
        Ok(if freed { self.release() } else { None })
    }

    /// Calls `query_fn` into `st`.
    fn query(&self, st: &mut MpiStatus) -> Res {
        let c = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        *st = null_status();
        match c.query {
            // SAFETY: the program's callback, with its state and a valid
            // status, as MPI specifies.
            Some(f) => code(unsafe { f(c.extra_state, st) }, "query_fn"),
            None => Ok(()),
        }
    }

    /// Calls `free_fn` unless it ran already: `None` then, else its
    /// outcome (exactly one caller gets `Some`, and frees the handle).
    fn release(&self) -> Option<Res> {
        {
            let mut l = self.life.lock().unwrap_or_else(|p| p.into_inner());
            if l.released {
                return None;
            }
            l.released = true;
        }
        let c = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        Some(match c.free {
            // SAFETY: the program's callback with its state.
            Some(f) => code(unsafe { f(c.extra_state) }, "free_fn"),
            None => Ok(()),
        })
    }

    /// Whether the request has finished (`MPI_Request_get_status`): then
    /// `query_fn` fills `status` (when not ignored).
    ///
    /// # Safety
    /// `status` is null or valid for a write.
    pub unsafe fn peek(&self, status: *mut MpiStatus) -> Res<bool> {
        if !self.is_complete() {
            return Ok(false);
        }
        let mut st = null_status();
        let r = self.query(&mut st);
        // SAFETY: the caller's guarantee.
        unsafe { crate::request::store_status(status, st) };
        r.map(|()| true)
    }

    /// Completes the request if it has finished (waiting for
    /// `MPI_Grequest_complete` when `wait`): `None` while it has not,
    /// else the outcome of `query_fn` and `free_fn`, the status written.
    /// The caller frees the handle then.
    ///
    /// # Safety
    /// `status` is null or valid for a write.
    pub unsafe fn complete(&self, status: *mut MpiStatus, wait: bool) -> Option<Res> {
        if !self.is_complete() {
            if !wait {
                return None;
            }
            let mut backoff = shmheap::sync::futex::Backoff::new();
            while !self.is_complete() {
                backoff.snooze();
            }
        }
        let mut st = null_status();
        let q = self.query(&mut st);
        let f = self.release().unwrap_or(Ok(()));
        if let Err(e) = &q {
            st.error = e.class;
        }
        // SAFETY: the caller's guarantee.
        unsafe { crate::request::store_status(status, st) };
        Some(q.and(f))
    }

    /// `MPI_Request_free`: releases a finished request now; one still
    /// running is released by `MPI_Grequest_complete`. `Some` when this
    /// call released it (then its handle goes), with the outcome of
    /// `free_fn`; `None` while `MPI_Grequest_complete` still needs the
    /// handle (or released it meanwhile, and drops it).
    pub fn free(&self) -> Option<Res> {
        if self.is_complete() {
            return self.release();
        }
        self.life.lock().unwrap_or_else(|p| p.into_inner()).freed = true;
        // MPI_Grequest_complete may have come in between: whichever of the
        // two releases it drops the handle.
        if self.is_complete() {
            return self.release();
        }
        None
    }

    /// `MPI_Cancel`: calls `cancel_fn` with whether it has completed.
    pub fn cancel(&self) -> Res {
        let done = c_int::from(self.is_complete());
        let c = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match c.cancel {
            // SAFETY: the program's callback with its state.
            Some(f) => code(unsafe { f(c.extra_state, done) }, "cancel_fn"),
            None => Ok(()),
        }
    }
}

/// The communicator errors of requests without one are raised on:
/// `MPI_COMM_SELF`, or, without `MPI_Init` (sessions only), a self
/// communicator with the initial handler, `MPI_ERRORS_ARE_FATAL`.
pub fn self_ref() -> Res<CommRef> {
    if let Some(c) = crate::comm::predefined_comm(abi::COMM_SELF) {
        return Ok(CommRef::Static(c));
    }
    static SELF_ALONE: OnceLock<CommEntry> = OnceLock::new();
    if let Some(c) = SELF_ALONE.get() {
        return Ok(CommRef::Static(c));
    }
    let me = hmpi_core::SimpleCommunicator::self_comm()?;
    let c = SELF_ALONE.get_or_init(|| {
        CommEntry::new(
            me,
            abi::COMM_SELF,
            Handler::Predefined(abi::ERRORS_ARE_FATAL),
        )
    });
    Ok(CommRef::Static(c))
}

mpi_fn! {
    /// Starts a generalized request: `*request` finishes when the program
    /// calls `MPI_Grequest_complete` on it.
    fn MPI_Grequest_start / PMPI_Grequest_start(
        query_fn: Option<QueryFn>,
        free_fn: Option<FreeFn>,
        cancel_fn: Option<CancelFn>,
        extra_state: *mut c_void,
        request: *mut Request,
    ) -> c_int {
        api("MPI_Grequest_start", || {
            crate::errors::active()?;
            let p = crate::errors::out(request, "request")?;
            let g = Arc::new(Greq {
                complete: AtomicBool::new(false),
                life: Mutex::new(Life::default()),
                calls: Mutex::new(Callbacks {
                    query: query_fn,
                    free: free_fn,
                    cancel: cancel_fn,
                    extra_state,
                }),
            });
            let h = crate::coll::store_greq(self_ref()?, g)?;
            // SAFETY: checked non-null; the caller's request variable.
            unsafe { p.write(h) };
            Ok(())
        })
    }

    /// Tells that the operation of a generalized request has finished.
    fn MPI_Grequest_complete / PMPI_Grequest_complete(request: Request) -> c_int {
        api("MPI_Grequest_complete", || {
            let Some(g) = crate::coll::greq_of(request) else {
                return err(
                    abi::ERR_REQUEST,
                    format!("{:#x} is not a generalized request", request.0),
                );
            };
            match g.mark_complete()? {
                // Freed before: the handle goes now.
                Some(r) => {
                    crate::coll::forget(request);
                    r
                }
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn query_ok(state: *mut c_void, st: *mut MpiStatus) -> c_int {
        // SAFETY: the test's counter and a valid status.
        unsafe {
            *state.cast::<c_int>() += 1;
            (*st).tag = 77;
        }
        abi::SUCCESS
    }

    unsafe extern "C" fn free_count(state: *mut c_void) -> c_int {
        // SAFETY: the test's counter.
        unsafe { *state.cast::<c_int>() += 100 };
        abi::SUCCESS
    }

    unsafe extern "C" fn query_fails(_: *mut c_void, _: *mut MpiStatus) -> c_int {
        abi::ERR_OTHER
    }

    fn greq(query: QueryFn, state: &mut c_int) -> Greq {
        Greq {
            complete: AtomicBool::new(false),
            life: Mutex::new(Life::default()),
            calls: Mutex::new(Callbacks {
                query: Some(query),
                free: Some(free_count),
                cancel: None,
                extra_state: (state as *mut c_int).cast(),
            }),
        }
    }

    #[test]
    fn completes_once_with_the_query_status_then_frees() {
        let mut n: c_int = 0;
        let g = greq(query_ok, &mut n);
        let mut st = null_status();
        // SAFETY: a valid status.
        assert!(unsafe { g.complete(&mut st, false) }.is_none());
        g.mark_complete().unwrap();
        assert!(g.mark_complete().is_err());
        // SAFETY: as above.
        assert!(unsafe { g.peek(&mut st) }.unwrap());
        // SAFETY: as above.
        let r = unsafe { g.complete(&mut st, true) }.unwrap();
        assert!(r.is_ok());
        assert_eq!(st.tag, 77);
        assert_eq!(n, 2 + 100); // two queries, one free
    }

    #[test]
    fn a_failing_query_is_the_error_and_a_freed_request_is_released_on_complete() {
        let mut n: c_int = 0;
        let g = greq(query_fails, &mut n);
        assert!(g.free().is_none());
        assert_eq!(n, 0);
        assert!(matches!(g.mark_complete(), Ok(Some(Ok(())))));
        assert_eq!(n, 100);
        assert!(g.free().is_none()); // released once
        let mut m: c_int = 0;
        let g = greq(query_fails, &mut m);
        g.mark_complete().unwrap();
        let mut st = null_status();
        // SAFETY: a valid status.
        let e = unsafe { g.complete(&mut st, false) }.unwrap().unwrap_err();
        assert_eq!(e.class, abi::ERR_OTHER);
        assert!(e.msg.contains("query_fn returned"));
        assert_eq!(st.error, abi::ERR_OTHER);
        assert_eq!(m, 100);
    }
}
