//! rsmpi's `mpi::request`: nonblocking operations, their scopes and
//! request collections.
//!
//! A scope is hmpi-core's [`LocalScope`]: every request started in it is
//! complete when [`scope`] returns. A [`Request`] keeps the buffer it was
//! started with (rsmpi's `D`), handed back by [`Request::wait_for_data`]
//! and the collection's `wait_*`/`test_*` once the operation is complete.
//! Two differences from rsmpi: dropping an unfinished request waits for it
//! (rsmpi panics), and of the operations in `StaticScope` (requests not
//! tied to a scope) only those that borrow nothing are there.

use std::marker::PhantomData;

use hmpi_core::request as core;

use crate::point_to_point::Status;

pub use hmpi_core::request::Scope as LocalScope;

/// rsmpi's scope of requests that live for the whole program: only those
/// that borrow nothing start in it here (`immediate_barrier()`); the
/// others need a [`scope`].
#[derive(Copy, Clone, Debug)]
pub struct StaticScope;

/// A scope that requests can be started in (rsmpi's `Scope`): the
/// `&LocalScope` that [`scope`] hands to its closure.
pub trait Scope<'a>: Copy {
    /// Calls `f` with hmpi-core's scope (not part of rsmpi's API).
    #[doc(hidden)]
    fn with_core<R>(self, f: impl for<'e> FnOnce(&'a LocalScope<'a, 'e>) -> R) -> R;
}

impl<'a, 'e> Scope<'a> for &'a LocalScope<'a, 'e> {
    fn with_core<R>(self, f: impl for<'x> FnOnce(&'a LocalScope<'a, 'x>) -> R) -> R {
        f(self)
    }
}

/// Runs `f` with a scope; every request started in it is complete when
/// `scope` returns.
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'s> FnOnce(&'s LocalScope<'s, 'env>) -> R,
{
    core::scope(f)
}

/// [`scope`] with an empty [`RequestCollection`] (room for `reserve`
/// requests) beside it.
pub fn multiple_scope<'env, F, R, D: ?Sized + 'env>(reserve: usize, f: F) -> R
where
    F: for<'s> FnOnce(&'s LocalScope<'s, 'env>, &mut RequestCollection<'s, D>) -> R,
{
    core::scope(|s| {
        let mut coll = RequestCollection::with_capacity(reserve);
        f(s, &mut coll)
    })
}

/// The operation behind a [`Request`].
#[derive(Debug)]
pub(crate) enum Op<'a> {
    /// A point-to-point operation.
    P2p(core::Request<'a>),
    /// A nonblocking collective in a scope.
    Coll(core::CollectiveRequest<'a>),
    /// A nonblocking collective that borrows nothing (a barrier), owned
    /// by the request; `None` if it completed when started.
    Owned(Option<hmpi_core::collective::CollRequest>),
    /// An operation complete when it was started (a buffered send, whose
    /// copy is made at once).
    Done,
}

impl<'a> From<core::Request<'a>> for Op<'a> {
    fn from(r: core::Request<'a>) -> Self {
        Op::P2p(r)
    }
}

impl<'a> From<core::CollectiveRequest<'a>> for Op<'a> {
    fn from(r: core::CollectiveRequest<'a>) -> Self {
        Op::Coll(r)
    }
}

/// Starts in `scope` an operation that writes into `out`: `view` turns
/// the buffer into the form hmpi-core takes, `start` starts the operation
/// on it (aborting, as rsmpi does, if hmpi-core refuses). The request
/// hands `out` back only once the operation is complete.
pub(crate) fn start_into<'a, D, V, T, Sc>(
    scope: Sc,
    out: &'a mut D,
    view: impl FnOnce(&'a mut D) -> &'a mut V,
    start: impl for<'e> FnOnce(&'a LocalScope<'a, 'e>, &'a mut V) -> hmpi_core::Result<T>,
) -> Request<'a, D, Sc>
where
    D: ?Sized,
    V: ?Sized + 'a,
    T: Into<Op<'a>>,
    Sc: Scope<'a>,
{
    let data: *mut D = out;
    // SAFETY: `data` was just made from `out`, borrowed for `'a`; the
    // reference made here from it is the only one that reaches the buffer
    // until the request completes, and the request reads through `data`
    // only after that (see `Request::data`).
    let v = view(unsafe { &mut *data });
    let op = scope.with_core(|s| crate::check(start(s, v)));
    Request::new(op.into(), data)
}

/// Starts in `scope` an operation that only reads `input` (aborting, as
/// rsmpi does, if hmpi-core refuses); the request hands `input` back once
/// the operation is complete.
pub(crate) fn start_from<'a, D, T, Sc>(
    scope: Sc,
    input: &'a D,
    start: impl for<'e> FnOnce(&'a LocalScope<'a, 'e>) -> hmpi_core::Result<T>,
) -> Request<'a, D, Sc>
where
    D: ?Sized,
    T: Into<Op<'a>>,
    Sc: Scope<'a>,
{
    let op = scope.with_core(|s| crate::check(start(s)));
    Request::new(op.into(), input)
}

/// A nonblocking operation started in scope `S` on data `D` (rsmpi's
/// `Request`).
#[must_use = "a request should be completed (dropping it waits)"]
#[derive(Debug)]
pub struct Request<'a, D: ?Sized, S = StaticScope> {
    op: Option<Op<'a>>,
    /// The buffer the operation reads or writes; only handed out as a
    /// shared reference once the operation is complete.
    data: *const D,
    _marker: PhantomData<(&'a D, S)>,
}

impl<'a, D: ?Sized, S> Request<'a, D, S> {
    /// A request for `op` on `data` (valid for `'a`).
    pub(crate) fn new(op: Op<'a>, data: *const D) -> Self {
        Request {
            op: Some(op),
            data,
            _marker: PhantomData,
        }
    }

    fn take(&mut self) -> Op<'a> {
        // Every method that takes the operation consumes the request or
        // puts it back before returning.
        match self.op.take() {
            Some(op) => op,
            None => crate::fatal(&"the request was already completed"),
        }
    }

    /// The data, once the operation is complete.
    fn data(&self) -> &'a D {
        // SAFETY: `data` came from a reference valid for `'a` that the
        // request was started with; the operation is complete (every
        // caller completed it), so nothing writes through the engine's
        // borrow of the buffer any more, and the program cannot reach the
        // buffer mutably while the request (`&'a`) borrows it.
        unsafe { &*self.data }
    }

    /// Waits for the operation and returns its status.
    pub fn wait(mut self) -> Status {
        complete(self.take())
    }

    /// Waits for the operation.
    pub fn wait_without_status(self) {
        let _ = self.wait();
    }

    /// Waits for the operation and returns its buffer.
    pub fn wait_for_data(mut self) -> &'a D {
        let _ = complete(self.take());
        self.data()
    }

    /// The status if the operation is complete, else the request back.
    pub fn test(mut self) -> Result<Status, Self> {
        let op = self.take();
        match test_op(op) {
            Ok(st) => Ok(st),
            Err(op) => {
                self.op = Some(op);
                Err(self)
            }
        }
    }

    /// The status and buffer if the operation is complete, else the
    /// request back.
    pub fn test_with_data(mut self) -> Result<(Status, &'a D), Self> {
        let op = self.take();
        match test_op(op) {
            Ok(st) => Ok((st, self.data())),
            Err(op) => {
                self.op = Some(op);
                Err(self)
            }
        }
    }

    /// Asks for the operation to be cancelled (a receive that has not
    /// matched is; sends and collectives are not); it must still be
    /// completed.
    pub fn cancel(&self) {
        if let Some(Op::P2p(r)) = &self.op {
            let _ = r.cancel();
        }
    }
}

impl<D: ?Sized, S> Drop for Request<'_, D, S> {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            let _ = complete(op);
        }
    }
}

/// Waits for `op`; an error aborts.
fn complete(op: Op<'_>) -> Status {
    match op {
        Op::P2p(r) => Status::from_core(crate::check(r.wait())),
        Op::Coll(r) => {
            crate::check(r.wait());
            Status::empty()
        }
        Op::Owned(r) => {
            if let Some(r) = r {
                crate::check(r.wait());
            }
            Status::empty()
        }
        Op::Done => Status::empty(),
    }
}

/// Tests `op`: its status if complete, else `op` back.
fn test_op(op: Op<'_>) -> Result<Status, Op<'_>> {
    match op {
        Op::P2p(mut r) => match crate::check(r.test()) {
            Some(st) => Ok(Status::from_core(st)),
            None => Err(Op::P2p(r)),
        },
        Op::Coll(mut r) => match r.test() {
            Some(res) => {
                crate::check(res);
                Ok(Status::empty())
            }
            None => Err(Op::Coll(r)),
        },
        Op::Owned(None) | Op::Done => Ok(Status::empty()),
        Op::Owned(Some(mut r)) => match r.test() {
            Some(res) => {
                crate::check(res);
                Ok(Status::empty())
            }
            None => Err(Op::Owned(Some(r))),
        },
    }
}

/// Waits for the request when dropped (rsmpi's `WaitGuard`).
#[derive(Debug)]
pub struct WaitGuard<'a, D: ?Sized, S = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S> From<Request<'a, D, S>> for WaitGuard<'a, D, S> {
    fn from(r: Request<'a, D, S>) -> Self {
        WaitGuard(Some(r))
    }
}

impl<'a, D: ?Sized, S> From<WaitGuard<'a, D, S>> for Request<'a, D, S> {
    fn from(mut g: WaitGuard<'a, D, S>) -> Self {
        match g.0.take() {
            Some(r) => r,
            None => crate::fatal(&"an empty WaitGuard"),
        }
    }
}

impl<D: ?Sized, S> Drop for WaitGuard<'_, D, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.wait_without_status();
        }
    }
}

/// Cancels the request, then waits for it, when dropped (rsmpi's
/// `CancelGuard`).
#[derive(Debug)]
pub struct CancelGuard<'a, D: ?Sized, S = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S> From<Request<'a, D, S>> for CancelGuard<'a, D, S> {
    fn from(r: Request<'a, D, S>) -> Self {
        CancelGuard(Some(r))
    }
}

impl<'a, D: ?Sized, S> From<WaitGuard<'a, D, S>> for CancelGuard<'a, D, S> {
    fn from(g: WaitGuard<'a, D, S>) -> Self {
        CancelGuard(Some(Request::from(g)))
    }
}

impl<D: ?Sized, S> Drop for CancelGuard<'_, D, S> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.cancel();
            r.wait_without_status();
        }
    }
}

/// Waits for one of `requests` and removes it: its index (before the
/// removal) and status, `None` if `requests` is empty. The requests are
/// point-to-point ones or buffered sends; a nonblocking collective among
/// them aborts with a message (a [`RequestCollection`] takes those).
pub fn wait_any<'a, D: ?Sized, S>(
    requests: &mut Vec<Request<'a, D, S>>,
) -> Option<(usize, Status)> {
    // A request complete since it started is the one found.
    if let Some(i) = requests.iter().position(|r| matches!(r.op, Some(Op::Done))) {
        drop(requests.remove(i));
        return Some((i, Status::empty()));
    }
    let mut core_reqs = Vec::with_capacity(requests.len());
    for r in requests.iter_mut() {
        match r.take() {
            Op::P2p(c) => core_reqs.push(c),
            Op::Coll(_) | Op::Owned(_) => {
                crate::fatal(&"wait_any: a collective request in the set")
            }
            Op::Done => unreachable!("requests complete when started were found above"),
        }
    }
    let done = core::wait_any(&mut core_reqs);
    // Give the unfinished ones back, in order, without the finished one.
    let finished = done.as_ref().map(|(i, _)| *i);
    let mut back = core_reqs.into_iter();
    let mut kept = Vec::with_capacity(requests.len());
    for (i, mut r) in requests.drain(..).enumerate() {
        if Some(i) == finished {
            // Completed: nothing left to wait for when it is dropped.
            continue;
        }
        if let Some(c) = back.next() {
            r.op = Some(Op::P2p(c));
        }
        kept.push(r);
    }
    *requests = kept;
    done.map(|(i, st)| (i, Status::from_core(crate::check(st))))
}

/// Many requests on data `D`, completed together (rsmpi's
/// `RequestCollection`): point-to-point requests in hmpi-core's
/// collection, the others (nonblocking collectives, buffered sends) beside
/// it, tested in turn.
#[derive(Debug)]
pub struct RequestCollection<'a, D: ?Sized> {
    requests: core::RequestCollection<'a>,
    /// This collection's index of each request of `requests`.
    p2p_index: Vec<usize>,
    /// The other requests with their index: `None` once reported,
    /// `Op::Done` once complete but not reported yet.
    others: Vec<(usize, Option<Op<'a>>)>,
    /// Each request's data, by index.
    data: Vec<*const D>,
    _marker: PhantomData<&'a D>,
}

/// A collection's outcomes.
type Outcomes<'a, D> = Vec<(usize, Status, &'a D)>;

impl<'a, D: ?Sized> RequestCollection<'a, D> {
    /// An empty collection with room for `reserve` requests.
    pub(crate) fn with_capacity(reserve: usize) -> Self {
        RequestCollection {
            requests: core::RequestCollection::with_capacity(reserve),
            p2p_index: Vec::with_capacity(reserve),
            others: Vec::new(),
            data: Vec::with_capacity(reserve),
            _marker: PhantomData,
        }
    }

    /// Adds a request; its index in the collection.
    pub fn add<S>(&mut self, mut req: Request<'a, D, S>) -> usize {
        let i = self.data.len();
        self.data.push(req.data);
        match req.take() {
            Op::P2p(r) => {
                self.requests.add(r);
                self.p2p_index.push(i);
            }
            op => self.others.push((i, Some(op))),
        }
        i
    }

    /// How many requests have not been reported complete.
    pub fn incomplete(&self) -> usize {
        self.requests.incomplete() + self.others.iter().filter(|(_, o)| o.is_some()).count()
    }

    /// The number of requests added.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether no request was added.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Request `i`'s data.
    fn data_of(&self, i: usize) -> &'a D {
        // SAFETY: as in `Request::data`: request `i` is complete, and its
        // buffer was borrowed for `'a` when it was started.
        unsafe { &*self.data[i] }
    }

    fn outcome(
        &self,
        (k, st): (usize, hmpi_core::Result<hmpi_core::Status>),
    ) -> (usize, Status, &'a D) {
        let i = self.p2p_index[k];
        (i, Status::from_core(crate::check(st)), self.data_of(i))
    }

    fn outcomes(
        &self,
        got: Vec<(usize, hmpi_core::Result<hmpi_core::Status>)>,
        out: &mut Outcomes<'a, D>,
    ) {
        out.extend(got.into_iter().map(|o| self.outcome(o)));
    }

    /// Whether some request other than point-to-point is not reported.
    fn others_pending(&self) -> bool {
        self.others.iter().any(|(_, o)| o.is_some())
    }

    /// Tests the other requests, marking the complete ones `Op::Done`;
    /// whether all are complete.
    fn test_others(&mut self) -> bool {
        let mut all = true;
        for (_, slot) in &mut self.others {
            if let Some(op) = slot.take() {
                *slot = Some(match test_op(op) {
                    Ok(_) => Op::Done,
                    Err(op) => {
                        all = false;
                        op
                    }
                });
            }
        }
        all
    }

    /// Reports the other requests that are complete (at most `max`).
    fn report_others(&mut self, max: usize, out: &mut Outcomes<'a, D>) {
        let mut n = 0;
        for k in 0..self.others.len() {
            if n == max {
                break;
            }
            if matches!(self.others[k].1, Some(Op::Done)) {
                self.others[k].1 = None;
                let i = self.others[k].0;
                out.push((i, Status::empty(), self.data_of(i)));
                n += 1;
            }
        }
    }

    /// Waits for one request: its index, status and data; `None` if every
    /// request was reported already.
    pub fn wait_any(&mut self) -> Option<(usize, Status, &'a D)> {
        loop {
            if let Some(o) = self.test_any() {
                return Some(o);
            }
            if self.incomplete() == 0 {
                return None;
            }
            if !self.others_pending() {
                return self.requests.wait_any().map(|o| self.outcome(o));
            }
            std::thread::yield_now();
        }
    }

    /// Waits for at least one request; `result` gets every request
    /// complete now (empty if none was left).
    pub fn wait_some(&mut self, result: &mut Outcomes<'a, D>) {
        loop {
            self.test_some(result);
            if !result.is_empty() || self.incomplete() == 0 {
                return;
            }
            if !self.others_pending() {
                let mut got = Vec::new();
                self.requests.wait_some(&mut got);
                self.outcomes(got, result);
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Waits for every request.
    pub fn wait_all(&mut self, result: &mut Outcomes<'a, D>) {
        result.clear();
        for k in 0..self.others.len() {
            if let Some(op) = self.others[k].1.take() {
                let st = complete(op);
                let i = self.others[k].0;
                result.push((i, st, self.data_of(i)));
            }
        }
        let mut got = Vec::new();
        self.requests.wait_all(&mut got);
        self.outcomes(got, result);
    }

    /// One complete request, if any.
    pub fn test_any(&mut self) -> Option<(usize, Status, &'a D)> {
        self.test_others();
        let mut out = Vec::with_capacity(1);
        self.report_others(1, &mut out);
        if let Some(o) = out.pop() {
            return Some(o);
        }
        self.requests.test_any().map(|o| self.outcome(o))
    }

    /// Every request complete now.
    pub fn test_some(&mut self, result: &mut Outcomes<'a, D>) {
        result.clear();
        self.test_others();
        self.report_others(usize::MAX, result);
        let mut got = Vec::new();
        self.requests.test_some(&mut got);
        self.outcomes(got, result);
    }

    /// Whether every request is complete; `result` gets them all if so
    /// (else nothing is reported).
    pub fn test_all(&mut self, result: &mut Outcomes<'a, D>) -> bool {
        result.clear();
        if !self.test_others() {
            return false;
        }
        let mut got = Vec::new();
        if !self.requests.test_all(&mut got) {
            return false;
        }
        self.report_others(usize::MAX, result);
        self.outcomes(got, result);
        true
    }
}
