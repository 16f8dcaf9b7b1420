//! Nonblocking operations: [`Request`], [`Status`], [`wait_all`].
//!
//! A request borrows its buffer for its whole life (`Request<'a>`), so the
//! borrow checker keeps the buffer alive and untouched while the engine may
//! read or write it. Dropping a pending request waits for it. Waiting drives
//! the VCI's progress (whoever waits makes everybody's messages move), and
//! spins, then yields, then sleeps on the rank's doorbell (see `wait.rs`).
//!
//! Known hole: a request that is leaked (`std::mem::forget`) instead of
//! dropped leaves a pending receive registered with the VCI, which may
//! later write into a buffer that no longer exists (the same problem as
//! pre-1.0 `thread::scoped`). The fix, a scope that owns the requests as in
//! rsmpi's `request::scope` or `std::thread::scope`, is not built yet.
//!
//! # Example
//! ```
//! use vci::{Endpoint, SendMode, ANY_SOURCE, ANY_TAG};
//!
//! let ep = Endpoint::new().unwrap(); // a world of one rank without a launcher
//! let out = *b"hello";
//! let mut inb = [0u8; 5];
//! // SAFETY: both requests are waited for below, never leaked; `inb` is
//! // not touched until then.
//! let r = unsafe { ep.irecv(inb.as_mut_ptr(), inb.len(), ANY_SOURCE, ANY_TAG, 0) }.unwrap();
//! // SAFETY: as above.
//! let s = unsafe { ep.isend(&out, 0, 7, 0, SendMode::Standard) }.unwrap();
//! let st = vci::wait_all(vec![r, s]).unwrap();
//! assert_eq!((st[0].source, st[0].tag, st[0].count), (0, 7, 5));
//! assert_eq!(&inb, b"hello");
//! ```

use crate::endpoint::Endpoint;
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::liveness::Watch;
use crate::matching::Private;
use crate::spread::Spread;
use crate::vci::{PrivateGuard, Vci};
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
    /// The kernel-assisted copy (`process_vm_readv`) failed after the
    /// start-up probe had allowed it; `count` bytes are in the buffer but
    /// their content is unspecified. Later messages from that sender use
    /// two copy.
    Transfer {
        /// The OS error number.
        errno: i32,
    },
    /// An ownership receive needed a fresh block for the payload and the
    /// allocator had none; the message was discarded (nothing leaks).
    Alloc {
        /// The block's size.
        bytes: u64,
    },
    /// The peer failed (its process ended without finalizing) before the
    /// operation could finish: a receive from it (or from any source) was
    /// withdrawn, a send to it abandoned.
    ProcFailed {
        /// The failed peer's rank.
        rank: u32,
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
            Some(StatusError::Transfer { errno }) => Err(Error::Transfer {
                status: self,
                errno,
            }),
            Some(StatusError::Alloc { bytes }) => Err(Error::Alloc {
                status: self,
                bytes,
            }),
            Some(StatusError::ProcFailed { rank }) => Err(Error::ProcFailed { rank }),
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
    Recv(u32),
    /// A receive posted on several VCIs ([`crate::spread`]).
    Spread(Box<Spread>),
}

/// A nonblocking send or receive. `'a` covers the endpoint and the buffer.
#[derive(Debug)]
#[must_use = "a request must be waited for (dropping it waits)"]
pub struct Request<'a> {
    ep: &'a Endpoint,
    /// The VCI the operation belongs to.
    vci: usize,
    state: State,
    /// The VCI's events count when this request last held the VCI lock
    /// ([`NEVER`] before): while it is unchanged and [`Vci::news`] has
    /// nothing, waiting skips the lock.
    seen: u64,
    _buf: PhantomData<&'a mut [u8]>,
}

/// A `seen` no events count equals soon: the first attempt takes the lock.
const NEVER: u64 = u64::MAX;

/// What a pending request depends on, as read from its state without a
/// lock: a peer (a send's destination), a posted receive (whose source is
/// looked up under the VCI lock, and only when a sleeping waiter checks
/// its peers: never on the way into a wait), or nothing.
#[derive(Debug, Clone, Copy)]
enum Depends {
    Peer(i32),
    Recv(u32),
    /// A receive posted on several VCIs: its source and plain context.
    Source(i32, u32),
    Nothing,
}

impl Depends {
    /// The peers to watch: the destination, the receive's source (the
    /// senders of its context for a wildcard), none once the receive
    /// matched.
    fn watch(self, ep: &Endpoint, v: usize) -> Watch {
        match self {
            Depends::Peer(rank) => u32::try_from(rank).map_or(Watch::Nothing, Watch::Rank),
            Depends::Recv(id) => {
                let vci = ep.vci_at(v);
                let p = vci.lock();
                match p.posted.iter().find(|&&(_, x)| x == id) {
                    Some((key, _)) => Watch::source(key.source, key.context),
                    // Matched: it finishes without its peer.
                    None => Watch::Nothing,
                }
            }
            Depends::Source(source, context) => Watch::source(source, context),
            Depends::Nothing => Watch::Nothing,
        }
    }
}

impl<'a> Request<'a> {
    #[inline(always)]
    pub(crate) fn complete(ep: &'a Endpoint, vci: usize, status: Status) -> Self {
        Request {
            ep,
            vci,
            state: State::Complete(status),
            seen: NEVER,
            _buf: PhantomData,
        }
    }

    pub(crate) fn send(
        ep: &'a Endpoint,
        vci: usize,
        env: NonNull<Envelope>,
        status: Status,
    ) -> Self {
        Request {
            ep,
            vci,
            state: State::Send { env, status },
            seen: NEVER,
            _buf: PhantomData,
        }
    }

    /// The request of a posted receive: finished if it matched at once,
    /// else waiting under its id.
    #[inline(always)]
    pub(crate) fn posted(ep: &'a Endpoint, vci: usize, posted: crate::vci::Posted) -> Self {
        match posted {
            crate::vci::Posted::Matched(st) => Request::complete(ep, vci, st),
            crate::vci::Posted::Waiting(id, ()) => Request::recv(ep, vci, id),
            crate::vci::Posted::NoPlace(never) => match never {},
        }
    }

    #[inline(always)]
    pub(crate) fn recv(ep: &'a Endpoint, vci: usize, id: u32) -> Self {
        Request {
            ep,
            vci,
            state: State::Recv(id),
            seen: NEVER,
            _buf: PhantomData,
        }
    }

    /// The request of a receive posted on several VCIs (waiting on VCI
    /// `vci`, its first).
    pub(crate) fn spread(ep: &'a Endpoint, vci: usize, spread: Spread) -> Self {
        Request {
            ep,
            vci,
            state: State::Spread(Box::new(spread)),
            seen: NEVER,
            _buf: PhantomData,
        }
    }

    /// Whether this is a pending receive posted on several VCIs.
    #[inline(always)]
    fn is_spread(&self) -> bool {
        matches!(self.state, State::Spread(_))
    }

    /// One attempt of a receive posted on several VCIs (no VCI lock
    /// held): progresses its VCIs until one of its parts has matched,
    /// then withdraws them all and completes.
    #[cold]
    fn attempt_spread(&mut self) -> Option<Status> {
        let State::Spread(s) = &self.state else {
            return None;
        };
        let st = match s.progress(self.ep) {
            crate::spread::OPEN => return None,
            won => s.finish(self.ep, won),
        };
        self.state = State::Complete(st);
        Some(st)
    }

    /// A pending send whose receiver asked for help with a synergistic
    /// copy: copy blocks (without the VCI lock).
    fn help(&self) {
        if let State::Send { env, .. } = self.state {
            // SAFETY: the envelope stays allocated until this request frees
            // it (in `poll`, in this thread).
            let Some(syn) = (unsafe { Envelope::syn(env) }) else {
                return;
            };
            // SAFETY: as above.
            let src = unsafe { env.as_ref() }.data() as *const u8;
            // SAFETY: `src` is our send buffer, borrowed by this request
            // and unchanged while it is pending; the envelope is not
            // complete (the receiver completes only after every claimed
            // block is finished).
            let blocks = unsafe { syn.copy_blocks(src) };
            self.ep.vci_at(self.vci).count_sender_blocks(blocks);
        }
    }

    /// A send the receiver has finished with completes without the VCI
    /// lock.
    fn poll_send(state: &mut State) -> Option<Status> {
        let State::Send { env, status } = *state else {
            return None;
        };
        // SAFETY: the envelope stays allocated until we free it here.
        if !unsafe { env.as_ref() }.is_complete() {
            return None;
        }
        // SAFETY: the receiver completed the envelope and will not touch it
        // again; it is no longer queued.
        unsafe { Envelope::destroy(env) };
        *state = State::Complete(status);
        Some(status)
    }

    /// One check under the VCI lock (progress already ran).
    fn poll(state: &mut State, vci: &Vci, p: &mut Private) -> Option<Status> {
        let st = match *state {
            State::Complete(st) => return Some(st),
            State::Send { .. } => return Self::poll_send(state),
            State::Recv(id) => vci.take_recv(p, id)?,
            // Finished by `attempt_spread`, which takes its VCIs' locks
            // one by one (never under another's).
            State::Spread(_) => return None,
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
        match self.attempt(true) {
            Some(st) => st.into_result().map(Some),
            None => {
                // A program that only tests (MPI_Test in a loop) never
                // sleeps in a wait, where peers are checked: every
                // `TESTS_PER_CHECK`-th unfinished test of this thread
                // checks the peers this request depends on instead.
                if unfinished_test_due() {
                    let watch = self.depends().watch(self.ep, self.vci);
                    if let Some(rank) = self.ep.liveness().check(watch) {
                        self.abandon(rank);
                        if let State::Complete(st) = self.state {
                            return st.into_result().map(Some);
                        }
                    }
                }
                Ok(None)
            }
        }
    }

    /// One attempt: help; a finished send completes at once; then, if
    /// `full` or the VCI has news, progress and poll under the VCI lock.
    fn attempt(&mut self, full: bool) -> Option<Status> {
        self.help();
        if let Some(st) = Self::poll_send(&mut self.state) {
            return Some(st);
        }
        if self.is_spread() {
            return self.attempt_spread();
        }
        let vci = self.ep.vci_at(self.vci);
        if !full && !vci.news(self.seen) {
            return None;
        }
        let mut guard = vci.lock();
        vci.progress(&mut guard);
        let st = Self::poll(&mut self.state, vci, &mut guard);
        self.seen = vci.events(&guard);
        st
    }

    #[inline(always)]
    fn wait_status(&mut self) -> Status {
        *self.wait_in_place()
    }

    /// Waits until the request has finished and returns its status where
    /// the request keeps it, a truncation or failed delivery included (in
    /// `error`). For callers that often ignore the status: they read the
    /// fields they need through the reference instead of copying the whole
    /// status (see docs/performance.md, "Store forwarding").
    #[inline]
    pub fn wait_in_place(&mut self) -> &Status {
        if !self.is_complete() {
            self.wait_pending();
        }
        match &self.state {
            State::Complete(st) => st,
            _ => unreachable!("an attempt that returns a status completes the request"),
        }
    }

    /// [`Request::wait_in_place`]'s loop for a request that is not known
    /// to be finished: out of line, so that waiting for a request that
    /// finished as it started (a small send, a receive that matched at
    /// once) is a look at its state where the caller is.
    #[inline(never)]
    fn wait_pending(&mut self) {
        let (ep, v) = (self.ep, self.vci);
        // The loop carries only "done"; the status stays in the state
        // the attempt completed (see docs/performance.md, "Store
        // forwarding").
        while !self.is_complete() {
            // What the request depends on is looked up only when a
            // sleeping waiter checks its peers, never on the way in.
            let depends = self.depends();
            let live = ep.liveness();
            let waited = ep.wait_on_failing(
                v,
                |full| self.attempt(full).map(drop),
                || live.check(depends.watch(ep, v)),
            );
            if let Err(rank) = waited {
                self.abandon(rank);
            }
        }
    }

    /// Waits until the request has finished; a truncated receive is
    /// [`Error::Truncate`] (the buffer holds what fitted).
    #[inline]
    pub fn wait(mut self) -> Result<Status> {
        self.wait_status().into_result()
    }

    /// Cancels a receive that has not matched a message yet; it then
    /// completes with `cancelled` set. Returns whether it was cancelled (a
    /// send, or a receive that already matched, is not).
    pub fn cancel(&mut self) -> bool {
        match &self.state {
            State::Recv(id) => self.ep.vci_at(self.vci).cancel_recv(*id),
            State::Spread(s) => {
                if !s.cancel() {
                    return false;
                }
                let st = s.finish(self.ep, crate::spread::CANCELLED);
                self.state = State::Complete(st);
                true
            }
            _ => false,
        }
    }

    /// What this request depends on, read without a lock (see
    /// [`Depends::watch`]).
    fn depends(&self) -> Depends {
        match self.state {
            State::Complete(_) => Depends::Nothing,
            State::Send { status, .. } => Depends::Peer(status.source),
            State::Recv(id) => Depends::Recv(id),
            State::Spread(ref s) => Depends::Source(s.source, s.context),
        }
    }

    /// Ends the request because peer `rank`, which it depends on, failed:
    /// a receive that has not matched is withdrawn, a send abandoned (its
    /// envelope stays with the dead receiver, never freed: nobody may
    /// touch it again). Its status then records the failure. A receive
    /// that matched meanwhile is left to finish.
    fn abandon(&mut self, rank: u32) {
        let failed = StatusError::ProcFailed { rank };
        match &self.state {
            State::Complete(_) => {}
            State::Spread(s) => {
                if s.cancel() {
                    let mut st = s.finish(self.ep, crate::spread::CANCELLED);
                    st.cancelled = false;
                    st.source = rank as i32;
                    st.error = Some(failed);
                    self.state = State::Complete(st);
                }
            }
            &State::Send { mut status, .. } => {
                status.error = Some(failed);
                status.count = 0;
                self.state = State::Complete(status);
            }
            &State::Recv(id) => {
                let vci = self.ep.vci_at(self.vci);
                if vci.cancel_recv(id) {
                    let mut g = vci.lock();
                    // Frees the slot: the request will not collect it.
                    let _ = vci.take_recv(&mut g, id);
                    let mut st = Status::empty();
                    st.source = rank as i32;
                    st.error = Some(failed);
                    self.state = State::Complete(st);
                }
            }
        }
    }

    /// Whether the request is known to have finished (no progress is made).
    #[inline(always)]
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete(_))
    }
}

impl<'a> Request<'a> {
    /// A request of `ep` that has already finished with `status`: for a
    /// layer above that completed an operation without keeping its
    /// request, and hands it to the set functions with the others.
    pub fn finished_with(ep: &'a Endpoint, status: Status) -> Self {
        Request::complete(ep, 0, status)
    }
}

impl Request<'_> {
    /// The status of a request known to be finished (with its error, if
    /// any: what [`Request::wait`] would return in its `Ok` or inside its
    /// `Err`), without making progress; `None` while it is not known to be
    /// finished. For requests that a set wait finished, a look at their
    /// state.
    #[inline]
    pub fn finished(&self) -> Option<Status> {
        match self.state {
            State::Complete(st) => Some(st),
            _ => None,
        }
    }
}

// ------------------------------------------------------------ request sets

/// Copies blocks for every pending send of the set whose receiver asked
/// for help (without the VCI lock).
fn help_set(requests: &[Option<Request<'_>>]) {
    for r in requests.iter().flatten() {
        r.help();
    }
}

/// How many unfinished tests a thread makes between two checks of the
/// peers the tested request depends on (a check reads a pidfd or
/// `/proc`, so it is kept off all but a few of a polling loop's passes).
const TESTS_PER_CHECK: u32 = 4096;

/// Counts an unfinished test of this thread; true on every
/// [`TESTS_PER_CHECK`]-th.
fn unfinished_test_due() -> bool {
    thread_local! {
        static UNFINISHED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    UNFINISHED.with(|n| {
        let k = n.get().wrapping_add(1);
        n.set(k);
        k % TESTS_PER_CHECK == 0
    })
}

/// One pass over the set: helps pending sends and completes finished
/// ones, then progresses each VCI the set uses and polls its requests under
/// that VCI's lock (a run of requests of one VCI takes the lock once) —
/// unless `full` is unset and the VCI has no news for the request. Returns
/// whether any request is finished.
fn poll_set(requests: &mut [Option<Request<'_>>], full: bool) -> bool {
    help_set(requests);
    let mut any = false;
    let mut held: Option<(usize, PrivateGuard<'_>)> = None;
    // A VCI found without news in this pass (its requests were all polled
    // under one lock last time, so they share its events count).
    let mut quiet: Option<usize> = None;
    for r in requests.iter_mut().flatten() {
        if r.is_complete() || Request::poll_send(&mut r.state).is_some() {
            any = true;
            continue;
        }
        if r.is_spread() {
            // Its VCIs' locks are taken one by one, none held meanwhile.
            drop(held.take());
            any |= r.attempt_spread().is_some();
            continue;
        }
        let vci: &Vci = r.ep.vci_at(r.vci);
        if held.as_ref().map(|h| h.0) != Some(r.vci) {
            if !full && (quiet == Some(r.vci) || !vci.news(r.seen)) {
                quiet = Some(r.vci);
                continue;
            }
            drop(held.take());
            let mut g = vci.lock();
            vci.progress(&mut g);
            held = Some((r.vci, g));
        }
        if let Some((_, g)) = held.as_mut() {
            any |= Request::poll(&mut r.state, vci, g).is_some();
            r.seen = vci.events(g);
        }
    }
    any
}

/// An element of a list of requests waited for in order: an owned request
/// (or `None`), or one borrowed in place.
trait RequestSlot<'a> {
    fn request(&mut self) -> Option<&mut Request<'a>>;
}

impl<'a> RequestSlot<'a> for Option<Request<'a>> {
    fn request(&mut self) -> Option<&mut Request<'a>> {
        self.as_mut()
    }
}

impl<'a> RequestSlot<'a> for &mut Request<'a> {
    fn request(&mut self) -> Option<&mut Request<'a>> {
        Some(&mut **self)
    }
}

impl<'a> RequestSlot<'a> for Request<'a> {
    fn request(&mut self) -> Option<&mut Request<'a>> {
        Some(self)
    }
}

/// Waits for every request of `set`, in order: for the first unfinished
/// one; each pass that finds it finished also collects, under the same
/// lock, the finished ones right after it ([`poll_run`]).
fn wait_in_order<'a, S: RequestSlot<'a>>(set: &mut [S]) {
    let mut first = 0;
    while let Some(i) =
        (first..set.len()).find(|&i| set[i].request().is_some_and(|r| !r.is_complete()))
    {
        let (ep, v, depends) = set[i]
            .request()
            .map(|r| (r.ep, r.vci, r.depends()))
            .expect("found above");
        let live = ep.liveness();
        let waited = ep.wait_on_failing(
            v,
            |full| {
                poll_run(&mut set[i..], full);
                set[i]
                    .request()
                    .is_some_and(|r| r.is_complete())
                    .then_some(())
            },
            || live.check(depends.watch(ep, v)),
        );
        if let Err(rank) = waited {
            if let Some(r) = set[i].request() {
                r.abandon(rank);
            }
            // Looked at again: a receive that matched meanwhile finishes.
            first = i;
            continue;
        }
        first = i + 1;
    }
}

/// [`poll_set`] for a run of requests that finish in order as a rule: helps
/// pending sends, then progresses the first request's VCI (if `full` or it
/// has news) and polls requests from the first on, under one lock, until
/// one is still pending.
fn poll_run<'a, S: RequestSlot<'a>>(requests: &mut [S], full: bool) {
    for r in requests.iter_mut().filter_map(S::request) {
        r.help();
    }
    let mut held: Option<(usize, PrivateGuard<'a>)> = None;
    for r in requests.iter_mut().filter_map(S::request) {
        if r.is_complete() || Request::poll_send(&mut r.state).is_some() {
            continue;
        }
        if r.is_spread() {
            // Its VCIs' locks are taken one by one, none held meanwhile.
            drop(held.take());
            if r.attempt_spread().is_none() {
                return;
            }
            continue;
        }
        let vci: &Vci = r.ep.vci_at(r.vci);
        if held.as_ref().map(|h| h.0) != Some(r.vci) {
            if held.is_some() || (!full && !vci.news(r.seen)) {
                return;
            }
            let mut g = vci.lock();
            vci.progress(&mut g);
            held = Some((r.vci, g));
        }
        if let Some((_, g)) = held.as_mut() {
            let done = Request::poll(&mut r.state, vci, g).is_some();
            r.seen = vci.events(g);
            if !done {
                return;
            }
        }
    }
}

/// Waits (driving progress; spin, yield, sleep) until a request of the
/// set is finished.
fn wait_set(requests: &mut [Option<Request<'_>>]) {
    let Some(first) = requests.iter().flatten().next() else {
        return;
    };
    let (ep, v) = (first.ep, first.vci);
    if requests.iter().flatten().any(Request::is_complete) {
        return;
    }
    // Any request may finish the wait: it fails only when every one of
    // them depends on a failed peer.
    let depends: Vec<(&Endpoint, usize, Depends)> = requests
        .iter()
        .flatten()
        .map(|r| (r.ep, r.vci, r.depends()))
        .collect();
    let live = ep.liveness();
    let all_failed = || {
        let mut first = None;
        for &(ep, v, d) in &depends {
            first = Some(first.unwrap_or(live.check(d.watch(ep, v))?));
        }
        first
    };
    if ep
        .wait_on_failing(v, |full| poll_set(requests, full).then_some(()), all_failed)
        .is_err()
    {
        for r in requests.iter_mut().flatten() {
            if let Some(rank) = live.check(r.depends().watch(r.ep, r.vci)) {
                r.abandon(rank);
            }
        }
    }
}

/// Takes the finished requests out of the set (leaving `None`), the first
/// one only if `first`.
fn take_finished(requests: &mut [Option<Request<'_>>], first: bool) -> Vec<(usize, Status)> {
    let mut out = Vec::new();
    for (i, slot) in requests.iter_mut().enumerate() {
        if let Some(st) = slot.as_ref().and_then(Request::finished) {
            *slot = None;
            out.push((i, st));
            if first {
                break;
            }
        }
    }
    out
}

/// Waits until one request of the set has finished, takes it out (its
/// entry becomes `None`, as MPI's `MPI_REQUEST_NULL`) and returns its index
/// and status; `None` if every entry is `None` (MPI's `MPI_UNDEFINED`).
///
/// A failed request is reported through its status's `error` (see
/// [`Status::into_result`]), so the index is never lost. Waiting drives
/// progress and spins, yields, then sleeps, as [`Request::wait`].
///
/// # Example
/// ```
/// use vci::SendMode;
///
/// let ep = vci::Endpoint::new().unwrap(); // a world of one
/// let mut a = [0u8; 1];
/// let mut b = [0u8; 1];
/// // SAFETY: the requests are waited for (or dropped) below, never leaked;
/// // `a` and `b` are not touched until then.
/// let mut reqs = unsafe {
///     [
///         Some(ep.irecv(a.as_mut_ptr(), a.len(), 0, 1, 0).unwrap()),
///         Some(ep.irecv(b.as_mut_ptr(), b.len(), 0, 2, 0).unwrap()),
///     ]
/// };
/// ep.send(b"x", 0, 2, 0, SendMode::Standard).unwrap();
/// let (i, st) = vci::wait_any(&mut reqs).unwrap();
/// assert_eq!((i, st.tag), (1, 2));
/// assert!(reqs[1].is_none());
/// ep.send(b"y", 0, 1, 0, SendMode::Standard).unwrap();
/// assert_eq!(vci::wait_any(&mut reqs).unwrap().0, 0);
/// assert!(vci::wait_any(&mut reqs).is_none());
/// ```
pub fn wait_any(requests: &mut [Option<Request<'_>>]) -> Option<(usize, Status)> {
    wait_set(requests);
    take_finished(requests, true).pop()
}

/// Waits until at least one request of the set has finished, takes out
/// every finished one and returns their indices and statuses (in index
/// order); empty if every entry is `None`. Errors are in the statuses, as
/// for [`wait_any`].
pub fn wait_some(requests: &mut [Option<Request<'_>>]) -> Vec<(usize, Status)> {
    wait_set(requests);
    take_finished(requests, false)
}

/// Drives progress once; if one request has finished, takes it out and
/// returns its index and status (the first finished one), else `None`
/// (also when every entry is `None`).
pub fn test_any(requests: &mut [Option<Request<'_>>]) -> Option<(usize, Status)> {
    if !requests.iter().flatten().any(Request::is_complete) {
        poll_set(requests, true);
    }
    take_finished(requests, true).pop()
}

/// Drives progress once; takes out every finished request and returns
/// their indices and statuses (empty if none has finished).
pub fn test_some(requests: &mut [Option<Request<'_>>]) -> Vec<(usize, Status)> {
    poll_set(requests, true);
    take_finished(requests, false)
}

/// Drives progress once; if every request has finished, takes them all out
/// and returns their statuses by index (an entry that was already `None`
/// gets [`Status::empty`]); otherwise `Ok(None)` and the set is left as it
/// was. As [`wait_all`]: if any finished request failed,
/// [`Error::InStatus`] with every status.
pub fn test_all(requests: &mut [Option<Request<'_>>]) -> Result<Option<Vec<Status>>> {
    poll_set(requests, true);
    if !requests.iter().flatten().all(Request::is_complete) {
        return Ok(None);
    }
    let st: Vec<Status> = requests
        .iter_mut()
        .map(|r| {
            r.take()
                .and_then(|r| r.finished())
                .unwrap_or(Status::empty())
        })
        .collect();
    if st.iter().any(|s| s.error.is_some()) {
        Err(Error::InStatus(st))
    } else {
        Ok(Some(st))
    }
}

impl Drop for Request<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.is_complete() {
            // The engine may still use the buffer: wait for it.
            self.wait_status();
        }
    }
}

/// Waits for every request. Returns every status, in the requests' order;
/// if any request failed, [`Error::InStatus`] with every status (each with
/// its `error`). See [`wait_all_statuses`] for how they are waited for.
pub fn wait_all<'a>(requests: impl IntoIterator<Item = Request<'a>>) -> Result<Vec<Status>> {
    let st = wait_all_statuses(requests);
    if st.iter().any(|s| s.error.is_some()) {
        Err(Error::InStatus(st))
    } else {
        Ok(st)
    }
}

/// Waits for every request of `requests`, which stay where they are (the
/// caller's); each is finished afterwards, so its [`Request::wait`]
/// returns its status at once. Waited for as by [`wait_all_statuses`],
/// without moving the requests: for callers that keep them in a table
/// (the C interface's `MPI_Waitall`).
pub fn wait_all_in_place(requests: &mut [&mut Request<'_>]) {
    wait_in_order(requests);
}

/// Waits for every request and returns every status, in the requests'
/// order, failures recorded in their `error` (see [`Status::into_result`]).
/// The requests are waited for in order; each pass that finds the awaited
/// one finished also collects, under the same lock, the finished ones
/// right after it, so a window of messages is polled about once per
/// request rather than once per request and pass.
pub fn wait_all_statuses<'a>(requests: impl IntoIterator<Item = Request<'a>>) -> Vec<Status> {
    // A `Vec` of requests is waited for where it is, and its buffer then
    // holds the statuses (collecting a vector's own iterator, mapped to a
    // type no larger, reuses its allocation): a window of requests costs
    // no copy of them and no second allocation.
    let mut set: Vec<Request<'a>> = requests.into_iter().collect();
    wait_in_order(&mut set);
    set.into_iter()
        .map(|r| r.finished().unwrap_or(Status::empty()))
        .collect()
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
