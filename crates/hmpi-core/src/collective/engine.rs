//! The collective algorithms on bytes, over one communicator's shared
//! block (see [`super::shared`]).
//!
//! Every algorithm is flat: each member publishes what it contributes in
//! its own slot (inline when it is small, else the address of its buffer
//! in the node heap) and reads what it needs straight from the others'
//! slots or buffers. So each byte is copied once, from where it is to
//! where it is wanted, and a member waits only on words that one other
//! member writes — no locks, no message queues.
//!
//! * Small contributions (up to [`INLINE`] bytes) are copied into the
//!   slot, so the caller may return (and reuse its buffer) as soon as it
//!   has read what it needs.
//! * Larger ones are read in place: the owner waits, before it returns,
//!   until every reader is `done`. A buffer outside the node heap (the
//!   stack, a static, memory from before the heap) is first copied into a
//!   staging buffer in the heap.
//! * Reductions combine in rank order, whatever the size: every element
//!   is `in_0 op (in_1 op (… op in_{n-1}))`, so results are the same on
//!   every member and in every run, and non-commutative operations get
//!   MPI's order. Large vectors are split into one slice per member; each
//!   member reduces its slice straight from the others' buffers, then (for
//!   allreduce) copies the others' slices from their results.
//!
//! Every algorithm is written once, as a future: its waits are the
//! points where it cannot go on until another member has published
//! something. A blocking call runs it to the end at once ([`block_on`],
//! which sleeps on the word the algorithm waits for); a nonblocking call
//! keeps it in its request and moves it on whenever the request is tested
//! or waited for. The epoch is taken when the call is made, so nonblocking
//! collectives keep the order in which they were started, whatever order
//! they are completed in.
//!
//! A member that ends without finalizing cannot hang the others: a wait
//! that has gone to sleep checks now and then whether any member has
//! failed (never on the fast path; so does a test, every few thousandth
//! time it finds the collective unfinished), and if one has, the collective ends
//! with [`Error::ProcFailed`] naming it, as do every collective in flight
//! and every later one on the communicator (its members' epochs no longer
//! agree; the communicator is good for freeing only). Buffers of a failed
//! collective are undefined, as MPI leaves them.
//!
//! Callers (the typed API, the C library) check arguments first; these
//! functions trust them.

use super::shared::{phase_of, Block, SeqWord, INLINE, PHASES};
use crate::error::{Error, Result};
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

/// How a reduction combines elements.
pub trait Combine: Sync {
    /// Bytes of one element (the slices given to [`Combine::apply`] hold
    /// whole elements).
    fn element_size(&self) -> usize;
    /// `inout[i] = input[i] op inout[i]` for every element; `input` and
    /// `inout` do not overlap.
    fn apply(&self, input: &[u8], inout: &mut [u8]);
}

// ------------------------------------------------------------- waiting

thread_local! {
    /// The word (and epoch) the last poll of an algorithm stopped at, for
    /// [`block_on`] to sleep on.
    static PARKED: Cell<Option<(*const SeqWord, u32)>> = const { Cell::new(None) };
}

/// A wait for `word` to reach epoch `e`.
struct Until<'a> {
    word: &'a SeqWord,
    e: u32,
}

impl Future for Until<'_> {
    type Output = ();
    #[inline]
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.word.is_at(self.e) {
            Poll::Ready(())
        } else {
            PARKED.with(|p| p.set(Some((self.word, self.e))));
            Poll::Pending
        }
    }
}

#[inline]
fn until(word: &SeqWord, e: u32) -> Until<'_> {
    Until { word, e }
}

/// A wait for this process's own counter `word` to reach epoch `e` (an
/// earlier collective in flight finishing): nothing to sleep on, the
/// progress pass that polls the earlier one first moves it.
struct LocalUntil<'a> {
    word: &'a AtomicU32,
    e: u32,
}

impl Future for LocalUntil<'_> {
    type Output = ();
    #[inline]
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        // Relaxed: the counter is this process's own (see `Coll::finish`).
        if reached(self.word.load(Ordering::Relaxed), self.e) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Whether epoch `v` is at or past `e` (wrapping, 31 bits).
#[inline]
fn reached(v: u32, e: u32) -> bool {
    v.wrapping_sub(e) & EPOCHS < 1 << 30
}

/// Runs a collective of `coll` to its end: polls it, and while it waits,
/// waits on the word it stopped at (spin, yield, then sleep). Ends with
/// [`Error::ProcFailed`] if a member of the communicator ended without
/// finalizing meanwhile (see [`Coll::member_failed`]).
pub fn block_on<T>(coll: &Coll, f: impl Future<Output = Result<T>>) -> Result<T> {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        match PARKED.with(Cell::take) {
            // SAFETY: the word belongs to a block the pending future holds
            // (through its collective state), so it is live here.
            Some((w, e)) => unsafe { &*w }.wait(e, || coll.member_failed())?,
            // Waiting on this member's own earlier epochs, which only a
            // failed collective leaves unfinished.
            None => {
                if let Some(err) = coll.failure() {
                    return Err(err);
                }
            }
        }
    }
}

/// Polls a collective once: `Some` when it has finished.
pub fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Option<F::Output> {
    poll_parked(f).0
}

/// Polls once; when the future is still waiting, also says for what.
fn poll_parked<F: Future + ?Sized>(
    f: Pin<&mut F>,
) -> (Option<F::Output>, Option<(*const SeqWord, u32)>) {
    let mut cx = Context::from_waker(Waker::noop());
    let r = f.poll(&mut cx);
    let parked = PARKED.with(Cell::take);
    match r {
        Poll::Ready(v) => (Some(v), None),
        Poll::Pending => (None, parked),
    }
}

/// A collective that a nonblocking call started, kept by its
/// communicator's state until it finishes.
pub struct Op {
    state: Mutex<OpState>,
}

enum OpState {
    Running(Pin<Box<dyn Future<Output = Result<()>> + Send>>),
    Finished(Option<Result<()>>),
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_finished() {
            "Op(finished)"
        } else {
            "Op(running)"
        })
    }
}

impl Op {
    fn lock(&self) -> std::sync::MutexGuard<'_, OpState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the collective has finished (its result may already have
    /// been taken).
    pub fn is_finished(&self) -> bool {
        matches!(*self.lock(), OpState::Finished(_))
    }

    /// The result, once (later calls: `Ok`).
    fn take_result(&self) -> Option<Result<()>> {
        match &mut *self.lock() {
            OpState::Finished(r) => Some(r.take().unwrap_or(Ok(()))),
            OpState::Running(_) => None,
        }
    }
}

// ------------------------------------------------------------- staging

/// A buffer in this rank's arena of the node heap, for contributions whose
/// own memory the others cannot read.
#[derive(Debug, Default)]
struct Staging {
    ptr: usize,
    cap: usize,
}

const STAGING_ALIGN: usize = 64;

impl Staging {
    /// At least `len` bytes of heap memory (kept for the next call).
    fn get(&mut self, len: usize) -> Result<usize> {
        if len > self.cap {
            self.release();
            let cap = len.next_power_of_two().max(4096);
            let l = Layout::from_size_align(cap, STAGING_ALIGN)
                .map_err(|e| Error::Internal(e.to_string()))?;
            self.ptr = shmheap::ShmHeap::new().try_alloc(l)?.as_ptr() as usize;
            self.cap = cap;
        }
        Ok(self.ptr)
    }

    fn release(&mut self) {
        if self.cap > 0 {
            if let Ok(l) = Layout::from_size_align(self.cap, STAGING_ALIGN) {
                // SAFETY: allocated by `ShmHeap` with this layout in `get`.
                unsafe { shmheap::ShmHeap::new().dealloc(self.ptr as *mut u8, l) };
            }
            self.cap = 0;
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.release();
    }
}

/// Staging buffers borrowed from a [`Coll`] for one collective, returned
/// when it ends (an overlapping nonblocking collective gets its own).
struct Borrowed<'a> {
    coll: &'a Coll,
    bufs: [Staging; 2],
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        let mut kept = self.coll.staging();
        for (k, b) in kept.iter_mut().zip(&mut self.bufs) {
            if b.cap > k.cap {
                std::mem::swap(k, b);
            }
        }
    }
}

// ------------------------------------------------------------- the state

/// One member's state for one communicator's collectives.
pub struct Coll {
    /// Nonblocking collectives in flight, in the order they were started.
    /// First field: dropped before the block and the staging buffers that
    /// the futures borrow.
    pending: Mutex<Vec<Arc<Op>>>,
    /// `pending.len()`, readable without the lock (blocking collectives
    /// take a shorter way when it is zero).
    npending: AtomicUsize,
    block: Block,
    rank: u32,
    size: u32,
    /// The last epoch taken.
    epoch: AtomicU32,
    /// The latest epoch seen published by each member in each phase (a
    /// cache of their `arrive` words, so that the check at the start of a
    /// collective rarely reads them). Per phase, because a phase's word is
    /// the only thing that orders its epochs: a member publishes `e + 4`
    /// in a phase only after it finished `e`, but it may publish `e + 1`
    /// before `e` (a nonblocking collective whose publication waits for an
    /// earlier step of its own, such as the barrier after a gather in a
    /// neighbourhood collective, while one started after it publishes at
    /// once). A cache of one epoch per member would take `e + 1` seen for
    /// `e` published, and a barrier would pass a member that has not
    /// arrived.
    seen: Box<[[AtomicU32; PHASES as usize]]>,
    /// The latest epoch seen finished by each member (a cache of their
    /// `done` words).
    seen_done: Box<[AtomicU32]>,
    /// The last epoch this member finished (in order).
    finished: AtomicU32,
    /// Staging buffers kept between calls.
    staging: Mutex<[Staging; 2]>,
    /// The world rank of each member, by rank (whose liveness a sleeping
    /// wait checks).
    world: Box<[i32]>,
    /// The first member found failed (its rank here and in the world):
    /// from then on every collective on the communicator fails with it.
    failed: OnceLock<(i32, i32)>,
    /// Tests that found a collective unfinished: every
    /// [`TESTS_PER_CHECK`]th asks whether a member has failed, so that a
    /// program that only tests cannot poll a dead member's collective
    /// forever either.
    unfinished_tests: AtomicU32,
}

/// Unfinished tests between two liveness checks (see `Coll::test`).
const TESTS_PER_CHECK: u32 = 4096;

impl std::fmt::Debug for Coll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coll")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("epoch", &self.epoch)
            .field("in_flight", &self.npending)
            .finish_non_exhaustive()
    }
}

/// The byte range of member `r`'s slice of `count` elements of `es` bytes.
#[inline]
fn slice_of(count: usize, es: usize, size: u32, r: u32) -> (usize, usize) {
    let (n, r) = (size as usize, r as usize);
    let lo = count * r / n;
    let hi = count * (r + 1) / n;
    (lo * es, hi * es)
}

/// Epochs are 31 bits (the top bit of a sequence word is its sleeper mark).
const EPOCHS: u32 = 0x7fff_ffff;

#[inline]
fn at(a: usize) -> *mut u8 {
    a as *mut u8
}

impl Coll {
    /// The state of member `rank` over `block`; `world[r]` is member
    /// `r`'s world rank.
    pub(crate) fn new(block: Block, rank: u32, size: u32, world: &[i32]) -> Coll {
        Coll {
            pending: Mutex::new(Vec::new()),
            npending: AtomicUsize::new(0),
            block,
            rank,
            size,
            epoch: AtomicU32::new(0),
            seen: (0..size)
                .map(|_| std::array::from_fn(|_| AtomicU32::new(0)))
                .collect(),
            seen_done: (0..size).map(|_| AtomicU32::new(0)).collect(),
            finished: AtomicU32::new(0),
            staging: Mutex::new([Staging::default(), Staging::default()]),
            world: world.into(),
            failed: OnceLock::new(),
            unfinished_tests: AtomicU32::new(0),
        }
    }

    /// The error of the member found failed, if one was.
    fn failure(&self) -> Option<Error> {
        self.failed
            .get()
            .map(|&(rank, world)| Error::ProcFailed { rank, world })
    }

    /// Whether a member has ended without finalizing (asked by sleeping
    /// waits only: a system call per member). Any member, not only the
    /// one whose word the wait is on: a member waiting for a dead one
    /// never publishes either, and the waits of a collective chain. Once
    /// one is found, the communicator's collectives fail from then on (its
    /// members' epochs no longer agree).
    pub(crate) fn member_failed(&self) -> Option<Error> {
        if self.failed.get().is_none() {
            let ep = crate::environment::endpoint().ok()?;
            let (r, &w) = self
                .world
                .iter()
                .enumerate()
                .find(|&(r, &w)| r as u32 != self.rank && ep.peer_failed(w))?;
            let _ = self.failed.set((r as i32, w));
        }
        self.failure()
    }

    /// For a wait that polls instead of sleeping on a word (it must move
    /// other communicators' collectives on too): whether a member has
    /// failed; if so every collective in flight ends with the error, which
    /// is returned. A system call per member: call it now and then only.
    pub(crate) fn check_failed(&self) -> Option<Error> {
        let err = self.member_failed()?;
        Some(self.fail_in_flight(err))
    }

    /// Ends every collective in flight with the failure found (their
    /// requests report it); `err` is returned to the caller.
    fn fail_in_flight(&self, err: Error) -> Error {
        let mut list = self.pending_list();
        for op in list.drain(..) {
            let mut st = op.lock();
            if let OpState::Running(_) = &*st {
                *st = OpState::Finished(self.failure().map(Err));
            }
        }
        // Relaxed: as in `start`.
        self.npending.store(0, Ordering::Relaxed);
        err
    }

    /// Starts `f` as a nonblocking collective: polls it once (so that it
    /// publishes its contribution now if it can) and keeps it with the
    /// others in flight, which every test, wait and later collective on
    /// this communicator moves on.
    ///
    /// # Safety
    /// Everything `f` borrows (buffers, count arrays, the operation) stays
    /// valid until [`Coll::wait`] or [`Coll::test`] has reported it
    /// finished — or until this state is dropped.
    pub unsafe fn start<'a>(&'a self, f: impl Future<Output = Result<()>> + Send + 'a) -> Arc<Op> {
        let b: Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>> = Box::pin(f);
        // SAFETY: only the lifetime changes. The future lives in
        // `self.pending` until it finishes (or `self` drops it first of
        // its fields, while the block and staging it borrows from `self`
        // are alive), and the caller keeps everything else it borrows.
        let b: Pin<Box<dyn Future<Output = Result<()>> + Send + 'static>> =
            unsafe { std::mem::transmute(b) };
        let op = Arc::new(Op {
            state: Mutex::new(OpState::Running(b)),
        });
        {
            let mut list = self.pending_list();
            list.push(op.clone());
            // Relaxed: read by this process's own collective calls, which
            // MPI orders.
            self.npending.store(list.len(), Ordering::Relaxed);
        }
        self.progress();
        op
    }

    fn pending_list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Op>>> {
        // A panic in a poll leaves the list as it was.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves every collective in flight on, in the order they started;
    /// says what the first unfinished one waits for.
    pub(crate) fn progress(&self) -> Option<(*const SeqWord, u32)> {
        let mut list = self.pending_list();
        let mut park = None;
        list.retain(|op| {
            let mut st = op.lock();
            let OpState::Running(f) = &mut *st else {
                return false;
            };
            match poll_parked(f.as_mut()) {
                (Some(r), _) => {
                    *st = OpState::Finished(Some(r));
                    false
                }
                (None, p) => {
                    park = park.or(p);
                    true
                }
            }
        });
        // Relaxed: as in `start`.
        self.npending.store(list.len(), Ordering::Relaxed);
        park
    }

    /// Whether `op` has finished (moving every collective in flight on):
    /// its result the first time it says so.
    pub fn test(&self, op: &Op) -> Option<Result<()>> {
        if !op.is_finished() {
            self.progress();
            if !op.is_finished() {
                // A failure found already, or now and then a check: a
                // test does not pay for the liveness check each time.
                // Relaxed: a counter of this process's own, a hint only.
                let n = self.unfinished_tests.fetch_add(1, Ordering::Relaxed);
                let found = match self.failure() {
                    Some(err) => Some(err),
                    None if n % TESTS_PER_CHECK == TESTS_PER_CHECK - 1 => self.member_failed(),
                    None => None,
                };
                if let Some(err) = found {
                    self.fail_in_flight(err);
                }
            }
        }
        op.take_result()
    }

    /// Waits until `op` has finished, moving every collective in flight
    /// on meanwhile. If a member ends without finalizing meanwhile, every
    /// collective in flight ends with [`Error::ProcFailed`].
    pub fn wait(&self, op: &Op) -> Result<()> {
        loop {
            let park = if op.is_finished() {
                None
            } else {
                self.progress()
            };
            if let Some(r) = op.take_result() {
                return r;
            }
            let failed = match park {
                // SAFETY: the word is in this state's block, alive here.
                // Everything started before the op that waits on it has
                // published, so only other members can move it.
                Some((w, e)) => unsafe { &*w }.wait(e, || self.member_failed()).err(),
                None => self.failure(),
            };
            if let Some(err) = failed {
                let err = self.fail_in_flight(err);
                // `op` was among them unless it finished meanwhile.
                return op.take_result().unwrap_or(Err(err));
            }
        }
    }

    /// Runs a blocking collective: at once when nothing is in flight,
    /// else behind the collectives in flight.
    pub(crate) fn run<'a>(&'a self, f: impl Future<Output = Result<()>> + Send + 'a) -> Result<()> {
        // Relaxed: as in `start`.
        if self.npending.load(Ordering::Relaxed) == 0 {
            return block_on(self, f);
        }
        // SAFETY: `f` borrows only what this call's caller keeps until it
        // returns, and `wait` returns only when `f` has finished.
        let op = unsafe { self.start(f) };
        self.wait(&op)
    }

    /// Whether a blocking call may take the direct path, which waits on
    /// the sequence words itself instead of polling a future: nothing is
    /// in flight and every epoch taken so far is finished, so the call is
    /// this member's only collective step on the communicator.
    #[inline]
    fn direct(&self) -> bool {
        // Relaxed: this process's own counters (see `start`, `finish`).
        self.npending.load(Ordering::Relaxed) == 0
            && self.finished.load(Ordering::Relaxed) == self.epoch.load(Ordering::Relaxed)
    }

    /// [`Coll::begin`] on the direct path: the same waits, on the words
    /// themselves (this member's own earlier epochs are finished).
    #[inline]
    fn begin_now(&self, e: u32) -> Result<()> {
        let prev = e.wrapping_sub(PHASES) & EPOCHS;
        for r in self.others() {
            let seen = &self.seen_done[r as usize];
            // Relaxed: a local cache of epochs already acquired.
            if reached(seen.load(Ordering::Relaxed), prev) {
                continue;
            }
            self.arrived_now(r, e.wrapping_sub(1) & EPOCHS)?;
            // Relaxed: as above.
            if !reached(seen.load(Ordering::Relaxed), prev) {
                let done = &self.block.slot(r).progress.done;
                done.wait(prev, || self.member_failed())?;
                seen.store(done.epoch(), Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// [`Coll::arrived`] on the direct path.
    #[inline]
    fn arrived_now(&self, r: u32, e: u32) -> Result<()> {
        // Relaxed: a local cache of an epoch already acquired.
        if reached(self.seen_in(r, e).load(Ordering::Relaxed), e) {
            return Ok(());
        }
        self.block.slot(r).phase[phase_of(e)]
            .arrive
            .wait(e, || self.member_failed())?;
        self.note_arrival(r, e);
        Ok(())
    }

    /// [`Coll::finish_quietly`] on the direct path (nothing in flight: the
    /// next publication carries it).
    #[inline]
    fn finished_now(&self, e: u32) {
        // Relaxed: this process's own counter (see `finish`).
        self.finished.store(e, Ordering::Relaxed);
    }

    /// How many nonblocking collectives are in flight.
    pub fn in_flight(&self) -> usize {
        // Relaxed: a count kept under the pending list's lock; a stale
        // value only delays forgetting the communicator by one turn.
        self.npending.load(Ordering::Relaxed)
    }

    /// This member's rank and the number of members.
    pub fn rank_and_size(&self) -> (u32, u32) {
        (self.rank, self.size)
    }

    fn staging(&self) -> std::sync::MutexGuard<'_, [Staging; 2]> {
        // A panic while staging leaves only a buffer behind: still usable.
        self.staging.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn borrow_staging(&self) -> Borrowed<'_> {
        let bufs = std::mem::take(&mut *self.staging());
        Borrowed { coll: self, bufs }
    }

    /// Takes the next epoch (when the collective is called, so epochs
    /// follow the calls' order).
    fn next_epoch(&self) -> u32 {
        // Relaxed: the counter is this process's own; collectives on one
        // communicator are called in one order (MPI's rule), not
        // concurrently.
        let e = self.epoch.load(Ordering::Relaxed).wrapping_add(1) & EPOCHS;
        self.epoch.store(e, Ordering::Relaxed);
        e
    }

    /// Waits until every member, this one included, has finished the
    /// epoch that last used the phase epoch `e` uses (`e - PHASES`).
    async fn begin(&self, e: u32) {
        let prev = e.wrapping_sub(PHASES) & EPOCHS;
        LocalUntil {
            word: &self.finished,
            e: prev,
        }
        .await;
        for r in self.others() {
            let seen = &self.seen_done[r as usize];
            // Relaxed: a local cache of epochs already acquired (below and
            // in `arrived`).
            if reached(seen.load(Ordering::Relaxed), prev) {
                continue;
            }
            // Its publication of the epoch before says what it had
            // finished then (enough when nothing of its was in flight)...
            self.arrived(r, e.wrapping_sub(1) & EPOCHS).await;
            if !reached(seen.load(Ordering::Relaxed), prev) {
                // ...else its `done` word, which it publishes whenever
                // nonblocking collectives may finish out of order.
                let done = &self.block.slot(r).progress.done;
                until(done, prev).await;
                seen.store(done.epoch(), Ordering::Relaxed);
            }
        }
    }

    /// Says that this member has finished reading what others published
    /// for epoch `e` (and is done with theirs): in epoch order, so a `done`
    /// word at `e` means every earlier epoch is finished too. Once per
    /// epoch; a second call returns at once.
    async fn finish(&self, e: u32) {
        // Relaxed: this process's own counter (its threads see it under
        // the pending list's lock or in one blocking call).
        if reached(self.finished.load(Ordering::Relaxed), e) {
            return;
        }
        LocalUntil {
            word: &self.finished,
            e: e.wrapping_sub(1) & EPOCHS,
        }
        .await;
        self.block.slot(self.rank).progress.done.publish(e);
        self.finished.store(e, Ordering::Relaxed);
    }

    /// Says that this member has finished epoch `e` where nobody waits
    /// for its `done` word: with nothing in flight, every later publication
    /// carries `e` as finished, which is all the others need. With
    /// nonblocking collectives in flight (which may finish after later
    /// epochs were published) the word is published too.
    async fn finish_quietly(&self, e: u32) {
        // Relaxed: this process's own counter (see `start`).
        if self.npending.load(Ordering::Relaxed) > 0 {
            return self.finish(e).await;
        }
        // Relaxed: this process's own counter (see `finish`).
        if !reached(self.finished.load(Ordering::Relaxed), e) {
            self.finished.store(e, Ordering::Relaxed);
        }
    }

    /// The end of epoch `e`'s collective: finished, with success.
    async fn end(&self, e: u32) -> Result<()> {
        self.finish_quietly(e).await;
        Ok(())
    }

    /// An error if a member among the first `upto` contributed other than
    /// `len` bytes in epoch `e` (after they all arrived).
    fn same_lengths(&self, e: u32, len: usize, upto: u32) -> Option<Error> {
        let mut bad = None;
        for r in (0..upto).filter(|&r| r != self.rank) {
            self.expect(r, e, len, &mut bad);
        }
        bad
    }

    /// The end of epoch `e`'s collective: finished, with `bad` if a member's
    /// contribution did not have the length this one expected.
    async fn end_with(&self, e: u32, bad: Option<Error>) -> Result<()> {
        self.finish_quietly(e).await;
        bad.map_or(Ok(()), Err)
    }

    /// How many of the `want` bytes expected from member `r` in epoch `e`
    /// to read; notes a mismatch in `bad` (counts or datatypes that do not
    /// match across members: MPI leaves it undefined, here it is an error
    /// and nothing is read past what the member published).
    fn expect(&self, r: u32, e: u32, want: usize, bad: &mut Option<Error>) -> usize {
        let got = self.len_of(r, e);
        if got != want && bad.is_none() {
            *bad = Some(Error::Arg {
                reason: format!(
                    "rank {r} contributed {got} bytes to a collective where this rank \
                     expected {want} (counts or datatypes differ between ranks)"
                ),
            });
        }
        got.min(want)
    }

    fn others(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.size).filter(move |&r| r != self.rank)
    }

    /// Waits until member `r` has published epoch `e`.
    #[inline]
    async fn arrived(&self, r: u32, e: u32) {
        // Relaxed: a local cache of an epoch already acquired below.
        if reached(self.seen_in(r, e).load(Ordering::Relaxed), e) {
            return;
        }
        let phase = &self.block.slot(r).phase[phase_of(e)];
        until(&phase.arrive, e).await;
        self.note_arrival(r, e);
    }

    /// The cache of the latest epoch member `r` was seen to publish in
    /// the phase of epoch `e`: at or past `e` means `e` is published (a
    /// phase's epochs are published in order; see `Coll::seen`).
    #[inline]
    fn seen_in(&self, r: u32, e: u32) -> &AtomicU32 {
        &self.seen[r as usize][phase_of(e)]
    }

    /// Remembers that member `r` has published epoch `e` (its `arrive`
    /// word was acquired at `e` by this thread), and what it had finished
    /// then.
    #[inline]
    fn note_arrival(&self, r: u32, e: u32) {
        let phase = &self.block.slot(r).phase[phase_of(e)];
        // Relaxed: a local cache of epochs this thread acquired.
        let seen = self.seen_in(r, e);
        if !reached(seen.load(Ordering::Relaxed), e) {
            seen.store(e, Ordering::Relaxed);
        }
        // Relaxed: written before the `arrive` this thread acquired. What
        // the member had finished then, it has finished now: remember it.
        let f = phase.finished.load(Ordering::Relaxed);
        let known = &self.seen_done[r as usize];
        if !reached(known.load(Ordering::Relaxed), f) {
            known.store(f, Ordering::Relaxed);
        }
    }

    async fn all_arrived(&self, e: u32) {
        for r in self.others() {
            self.arrived(r, e).await;
        }
    }

    /// Publishes this member's contribution for epoch `e`: `len` bytes at
    /// `inline` copied into the slot (when given), two addresses, and the
    /// contribution's length `total`.
    ///
    /// # Safety
    /// `inline` holds `len <= INLINE` readable bytes.
    unsafe fn publish(
        &self,
        e: u32,
        inline: Option<(usize, usize)>,
        ptr: usize,
        ptr2: usize,
        total: usize,
    ) {
        let me = self.rank;
        if let Some((p, len)) = inline {
            debug_assert!(len <= INLINE);
            // SAFETY: the caller's guarantee for the source; the phase is
            // ours to write: every member finished reading it (`begin`).
            unsafe { std::ptr::copy_nonoverlapping(at(p), self.block.inline(me, e), len) };
        }
        let phase = &self.block.slot(me).phase[phase_of(e)];
        // Relaxed: published by the Release in `arrive.publish`.
        phase
            .finished
            .store(self.finished.load(Ordering::Relaxed), Ordering::Relaxed);
        phase.ptr.store(ptr as u64, Ordering::Relaxed);
        phase.ptr2.store(ptr2 as u64, Ordering::Relaxed);
        phase.len.store(total as u64, Ordering::Relaxed);
        phase.arrive.publish(e);
    }

    /// Publishes this member's `len` bytes at `buf` for epoch `e`: inline
    /// when they fit (`None`: the caller may return at once), else by
    /// address — `buf` itself, or a staged copy when the others cannot
    /// read it — and then the staging buffers stay borrowed in the
    /// returned guard until the readers are done.
    ///
    /// # Safety
    /// `buf` holds `len` readable bytes, unchanged until the readers are
    /// done when it is published by address.
    unsafe fn contribute(&self, e: u32, buf: usize, len: usize) -> Result<Option<Borrowed<'_>>> {
        if len <= INLINE {
            // SAFETY: the caller's guarantee.
            unsafe { self.publish(e, Some((buf, len)), 0, 0, len) };
            return Ok(None);
        }
        let mut st = self.borrow_staging();
        // SAFETY: the caller's guarantee.
        let src = unsafe { Self::readable(&mut st.bufs[0], buf, len, true)? };
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, src, 0, len) };
        Ok(Some(st))
    }

    /// Copies every member's piece of epoch `e` to `recv + displs[r]`
    /// (`counts[r]` bytes expected, no more read than it published), this
    /// member's own from `send` (`len` bytes; `copy`, so it may be in
    /// place). Returns a length mismatch, if any, and whether a member
    /// published its piece by address (and so waits for this one's `done`).
    ///
    /// # Safety
    /// `send` holds `len` readable bytes; `recv` is writable at every
    /// `displs[r]` for `counts[r]` bytes; one count and displacement per
    /// member.
    async unsafe fn collect(
        &self,
        e: u32,
        send: usize,
        len: usize,
        recv: usize,
        counts: &[usize],
        displs: &[usize],
    ) -> (Option<Error>, bool) {
        let (mut bad, mut by_address) = (None, false);
        for r in 0..self.size {
            let (n, dst) = (counts[r as usize], recv + displs[r as usize]);
            if r == self.rank {
                // SAFETY: our own piece (the caller's guarantee); `copy`
                // allows in place.
                unsafe { std::ptr::copy(at(send), at(dst), n.min(len)) };
                continue;
            }
            self.arrived(r, e).await;
            let n = self.expect(r, e, n, &mut bad);
            // SAFETY: member `r` published at least `n` bytes; `recv` holds
            // `counts[r] >= n` at `displs[r]` (caller).
            unsafe { std::ptr::copy_nonoverlapping(at(self.data_of(r, e)), at(dst), n) };
            by_address |= self.data_of_ptr(r, e) != 0;
        }
        (bad, by_address)
    }

    /// Member `r`'s data for epoch `e` (after `arrived(r, e)`): its inline
    /// bytes when it published no address.
    fn data_of(&self, r: u32, e: u32) -> usize {
        let phase = &self.block.slot(r).phase[phase_of(e)];
        // Relaxed: ordered by the Acquire in `arrived`.
        match phase.ptr.load(Ordering::Relaxed) {
            0 => self.block.inline(r, e) as usize,
            p => p as usize,
        }
    }

    /// The length member `r` published for epoch `e` (after `arrived`).
    fn len_of(&self, r: u32, e: u32) -> usize {
        let phase = &self.block.slot(r).phase[phase_of(e)];
        // Relaxed: ordered by the Acquire in `arrived`.
        phase.len.load(Ordering::Relaxed) as usize
    }

    /// Member `r`'s second address for epoch `e` (after `arrived(r, e)`).
    fn second_of(&self, r: u32, e: u32) -> usize {
        let phase = &self.block.slot(r).phase[phase_of(e)];
        // Relaxed: ordered by the Acquire in `arrived`.
        phase.ptr2.load(Ordering::Relaxed) as usize
    }

    /// The all-gather half of a sliced allreduce of `count` elements of
    /// `es` bytes in epoch `e`: says that this member's slice of its
    /// result `res` is written (`mid`), then copies every other member's
    /// slice from that member's result (its second address) into `res` as
    /// soon as that member says the same.
    ///
    /// `mid` is one word for every epoch: published in epoch order (as
    /// `done` is), or a later allreduce's middle step would pass for this
    /// one's, and this one's would then move the word back under that
    /// one's readers. So the collectives this member started before are
    /// finished first (its end would wait for them anyway).
    async fn share_slices(&self, e: u32, count: usize, es: usize, res: usize) {
        LocalUntil {
            word: &self.finished,
            e: e.wrapping_sub(1) & EPOCHS,
        }
        .await;
        self.block.slot(self.rank).progress.mid.publish(e);
        for r in self.others() {
            until(&self.block.slot(r).progress.mid, e).await;
            let (lo, hi) = slice_of(count, es, self.size, r);
            let theirs = self.second_of(r, e);
            // SAFETY: member `r` finished its slice of its result (`mid`)
            // and keeps it until we are done; `res` holds `count * es`
            // bytes, this member's own, which nobody else writes.
            unsafe { std::ptr::copy_nonoverlapping(at(theirs + lo), at(res + lo), hi - lo) };
        }
    }

    /// Waits until every other member is done with epoch `e`.
    async fn all_done(&self, e: u32) {
        for r in self.others() {
            until(&self.block.slot(r).progress.done, e).await;
        }
    }

    /// `buf` if the others can read it, else a staged copy of its `len`
    /// bytes (`copy`: copy them in).
    ///
    /// # Safety
    /// `buf` holds `len` readable bytes.
    unsafe fn readable(st: &mut Staging, buf: usize, len: usize, copy: bool) -> Result<usize> {
        if len == 0 || shmheap::is_shared(at(buf)) {
            return Ok(buf);
        }
        let s = st.get(len)?;
        if copy {
            // SAFETY: `buf` is readable (caller), `s` holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(at(buf), at(s), len) };
        }
        Ok(s)
    }

    // --------------------------------------------------------- barrier

    /// Blocks until every member has called it.
    pub fn barrier(&self) -> Result<()> {
        if self.direct() {
            let e = self.next_epoch();
            self.begin_now(e)?;
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, 0, 0, 0) };
            for r in self.others() {
                self.arrived_now(r, e)?;
            }
            self.finished_now(e);
            return Ok(());
        }
        self.run(self.ibarrier())
    }

    /// A barrier as a future (MPI_Ibarrier).
    pub fn ibarrier(&self) -> impl Future<Output = Result<()>> + Send + '_ {
        let e = self.next_epoch();
        async move {
            self.begin(e).await;
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, 0, 0, 0) };
            self.all_arrived(e).await;
            self.end(e).await
        }
    }

    // --------------------------------------------------------- bcast

    /// Broadcasts `len` bytes at `buf` from `root`.
    ///
    /// # Safety
    /// `buf` holds `len` bytes, readable at the root and writable
    /// elsewhere, untouched by others during the call.
    pub unsafe fn bcast(&self, buf: *mut u8, len: usize, root: u32) -> Result<()> {
        if len <= INLINE && self.direct() {
            // SAFETY: the caller's guarantee.
            return unsafe { self.bcast_now(buf as usize, len, root) };
        }
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.ibcast(buf, len, root) })
    }

    /// [`Coll::bcast`] of an inline contribution on the direct path: the
    /// steps of [`Coll::ibcast`] with nothing in flight.
    ///
    /// # Safety
    /// As [`Coll::bcast`]; `len <= INLINE` and [`Coll::direct`] holds.
    unsafe fn bcast_now(&self, buf: usize, len: usize, root: u32) -> Result<()> {
        let e = self.next_epoch();
        self.begin_now(e)?;
        if self.rank == root {
            // SAFETY: `buf` holds `len <= INLINE` readable bytes (caller).
            unsafe { self.publish(e, Some((buf, len)), 0, 0, len) };
            self.finished_now(e);
            return Ok(());
        }
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0, 0) };
        self.arrived_now(root, e)?;
        let mut bad = None;
        let n = self.expect(root, e, len, &mut bad);
        // SAFETY: the root published `n` bytes (inline, or a buffer it
        // keeps until we are done when its length was not ours); `buf`
        // holds `len >= n` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(at(self.data_of(root, e)), at(buf), n) };
        if self.data_of_ptr(root, e) != 0 {
            // The root waits until its buffer is read.
            self.block.slot(self.rank).progress.done.publish(e);
        }
        self.finished_now(e);
        bad.map_or(Ok(()), Err)
    }

    /// [`Coll::bcast`] as a future.
    ///
    /// # Safety
    /// As [`Coll::bcast`], until the future has finished or been dropped
    /// (dropping a started collective leaves the others waiting).
    pub unsafe fn ibcast(
        &self,
        buf: *mut u8,
        len: usize,
        root: u32,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        let e = self.next_epoch();
        let buf = buf as usize;
        async move {
            self.begin(e).await;
            if self.rank == root {
                // SAFETY: `buf` holds `len` bytes (caller).
                if let Some(_staged) = unsafe { self.contribute(e, buf, len)? } {
                    // Read in place: the others say when they are done.
                    self.all_done(e).await;
                }
                return self.end(e).await;
            }
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, 0, 0, 0) };
            self.arrived(root, e).await;
            let src = self.data_of(root, e);
            let mut bad = None;
            let n = self.expect(root, e, len, &mut bad);
            // SAFETY: the root published `n` bytes there (its slot or a
            // buffer it keeps until we are done); `buf` holds `len >= n`.
            unsafe { std::ptr::copy_nonoverlapping(at(src), at(buf), n) };
            if self.data_of_ptr(root, e) != 0 {
                // The root waits until its buffer is read.
                self.finish(e).await;
            }
            self.end_with(e, bad).await
        }
    }

    // --------------------------------------------------------- gather

    /// Gathers at the root: member `r` contributes `len` bytes (its own
    /// length), which the root places at `recv + displs[r]`; `counts[r]`
    /// is member `r`'s length as the root expects it.
    ///
    /// # Safety
    /// `send` holds `len` readable bytes; at the root `recv` is writable at
    /// every `displs[r]` for `counts[r]` bytes (the root's own piece may be
    /// `send` itself: in place), `counts`/`displs` have one entry per
    /// member, and `counts[r]` is member `r`'s `len`.
    pub unsafe fn gatherv(
        &self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &[usize],
        displs: &[usize],
        root: u32,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.igatherv(send, len, recv, counts, displs, root) })
    }

    /// [`Coll::gatherv`] as a future.
    ///
    /// # Safety
    /// As [`Coll::gatherv`], until the future has finished.
    pub unsafe fn igatherv<'a>(
        &'a self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &'a [usize],
        displs: &'a [usize],
        root: u32,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            if self.rank != root {
                // SAFETY: `send` holds `len` bytes (caller).
                if let Some(_staged) = unsafe { self.contribute(e, send, len)? } {
                    // Read in place: the root says when it is done.
                    until(&self.block.slot(root).progress.done, e).await;
                }
                return self.end(e).await;
            }
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, 0, 0, 0) };
            // SAFETY: the caller's guarantee for the root's buffers.
            let (bad, by_address) =
                unsafe { self.collect(e, send, len, recv, counts, displs) }.await;
            if by_address {
                // A member that published its buffer waits until it is read.
                self.finish(e).await;
            }
            self.end_with(e, bad).await
        }
    }

    // --------------------------------------------------------- scatter

    /// Scatters from the root: member `r` receives the `counts[r]` bytes
    /// at `send + displs[r]` of the root's buffer into `recv`, where it
    /// expects `len` bytes. The root publishes where each piece is, so the
    /// others need only their own length.
    ///
    /// # Safety
    /// At the root `send` is readable at every `displs[r]` for `counts[r]`
    /// bytes, `counts`/`displs` have one entry per member, and `recv`
    /// holds `counts[root]` writable bytes (it may be `send +
    /// displs[root]`: in place); elsewhere `recv` holds `len` writable
    /// bytes and `counts`/`displs` are not read.
    pub unsafe fn scatterv(
        &self,
        send: *const u8,
        counts: &[usize],
        displs: &[usize],
        recv: *mut u8,
        len: usize,
        root: u32,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.iscatterv(send, counts, displs, recv, len, root) })
    }

    /// [`Coll::scatterv`] as a future.
    ///
    /// # Safety
    /// As [`Coll::scatterv`], until the future has finished.
    pub unsafe fn iscatterv<'a>(
        &'a self,
        send: *const u8,
        counts: &'a [usize],
        displs: &'a [usize],
        recv: *mut u8,
        len: usize,
        root: u32,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let me = self.rank as usize;
            if self.rank == root {
                let end = counts
                    .iter()
                    .zip(displs)
                    .map(|(&c, &d)| c + d)
                    .max()
                    .unwrap_or(0);
                let mut st = self.borrow_staging();
                let [s0, s1] = &mut st.bufs;
                // SAFETY: the caller's guarantee: `send` readable to `end`.
                let src = unsafe { Self::readable(s0, send, end, true)? };
                // The table of pieces, (displacement, length) per member:
                // inline, or staged for many members.
                let table: Vec<u64> = displs
                    .iter()
                    .zip(counts)
                    .flat_map(|(&d, &c)| [d as u64, c as u64])
                    .collect();
                let tbytes = table.len() * 8;
                if tbytes <= INLINE {
                    // SAFETY: `table` holds `tbytes` bytes.
                    unsafe {
                        self.publish(e, Some((table.as_ptr() as usize, tbytes)), src, 0, end)
                    };
                } else {
                    let t = s1.get(tbytes)?;
                    // SAFETY: `t` holds `tbytes` bytes of ours.
                    unsafe {
                        std::ptr::copy_nonoverlapping(table.as_ptr().cast::<u8>(), at(t), tbytes)
                    };
                    // SAFETY: no inline data.
                    unsafe { self.publish(e, None, src, t, end) };
                }
                // SAFETY: our own piece, possibly in place.
                unsafe { std::ptr::copy(at(send + displs[me]), at(recv), counts[me]) };
                self.all_done(e).await;
                return self.end(e).await;
            }
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, 0, 0, 0) };
            self.arrived(root, e).await;
            let t = self.second_of(root, e);
            let tab = if t == 0 {
                self.block.inline(root, e) as usize
            } else {
                t
            };
            // SAFETY: the root published one (displacement, length) pair per
            // member (unaligned reads of ours).
            let (d, c) = unsafe {
                let p = at(tab).cast::<u64>().add(2 * me);
                (
                    p.read_unaligned() as usize,
                    p.add(1).read_unaligned() as usize,
                )
            };
            let bad = (c != len).then(|| Error::Arg {
                reason: format!(
                    "the root of a scatter sent this rank {c} bytes where it expected {len} \
                     (counts or datatypes differ between ranks)"
                ),
            });
            // SAFETY: the root's buffer holds its piece for us at `d`, `c`
            // bytes, kept until we are done; `recv` holds `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    at(self.data_of_ptr(root, e) + d),
                    at(recv),
                    c.min(len),
                )
            };
            // The root waits until its buffer is read.
            self.finish(e).await;
            self.end_with(e, bad).await
        }
    }

    // --------------------------------------------------------- allgather

    /// Every member gathers every member's bytes: member `r`'s `counts[r]`
    /// bytes go to `recv + displs[r]`; this member contributes `len`.
    ///
    /// # Safety
    /// `send` holds `len` readable bytes (it may be `recv + displs[rank]`:
    /// in place); `recv` is writable at every `displs[r]` for `counts[r]`
    /// bytes; `counts[rank] == len`; the same arrays on every member.
    pub unsafe fn allgatherv(
        &self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.iallgatherv(send, len, recv, counts, displs) })
    }

    /// [`Coll::allgatherv`] as a future.
    ///
    /// # Safety
    /// As [`Coll::allgatherv`], until the future has finished.
    pub unsafe fn iallgatherv<'a>(
        &'a self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &'a [usize],
        displs: &'a [usize],
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let big = counts.iter().any(|&c| c > INLINE);
            // SAFETY: the caller's guarantee; a staged copy is kept until
            // the end of this collective.
            let _staged = unsafe { self.contribute(e, send, len)? };
            // SAFETY: the caller's guarantee.
            let (bad, _) = unsafe { self.collect(e, send, len, recv, counts, displs) }.await;
            self.finish(e).await;
            if big {
                self.all_done(e).await;
            }
            self.end_with(e, bad).await
        }
    }

    // --------------------------------------------------------- alltoall

    /// All-to-all: this member receives, from every member `s`, the bytes
    /// `s` keeps for it at `send_s + sdispls_s[rank]`, `rcounts[s]` of them,
    /// into `recv + rdispls[s]`. Every member publishes its send
    /// displacements so that the others find their pieces.
    ///
    /// # Safety
    /// `send` is readable at every `sdispls[r]` for `scounts[r]` bytes,
    /// `recv` writable at every `rdispls[s]` for `rcounts[s]` bytes, with
    /// `rcounts[s]` equal to member `s`'s `scounts[rank]`; `send` and
    /// `recv` do not overlap.
    pub unsafe fn alltoallv(
        &self,
        send: *const u8,
        scounts: &[usize],
        sdispls: &[usize],
        recv: *mut u8,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.ialltoallv(send, scounts, sdispls, recv, rcounts, rdispls) })
    }

    /// [`Coll::alltoallv`] as a future.
    ///
    /// # Safety
    /// As [`Coll::alltoallv`], until the future has finished.
    pub unsafe fn ialltoallv<'a>(
        &'a self,
        send: *const u8,
        scounts: &'a [usize],
        sdispls: &'a [usize],
        recv: *mut u8,
        rcounts: &'a [usize],
        rdispls: &'a [usize],
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let n = self.size as usize;
            let end = scounts
                .iter()
                .zip(sdispls)
                .map(|(&c, &d)| c + d)
                .max()
                .unwrap_or(0);
            let mut st = self.borrow_staging();
            let [s0, s1] = &mut st.bufs;
            // SAFETY: the caller's guarantee: `send` readable to `end`.
            let src = unsafe { Self::readable(s0, send, end, true)? };
            // The displacements go inline (or, for many members, staged).
            let table: Vec<u64> = sdispls.iter().map(|&d| d as u64).collect();
            let tbytes = n * 8;
            if tbytes <= INLINE {
                // SAFETY: `table` holds `tbytes` bytes.
                unsafe { self.publish(e, Some((table.as_ptr() as usize, tbytes)), src, 0, end) };
            } else {
                let t = s1.get(tbytes)?;
                // SAFETY: `t` holds `tbytes` bytes of ours.
                unsafe {
                    std::ptr::copy_nonoverlapping(table.as_ptr().cast::<u8>(), at(t), tbytes)
                };
                // SAFETY: no inline data.
                unsafe { self.publish(e, None, src, t, end) };
            }
            let me = self.rank as usize;
            let mut bad = None;
            for s in 0..self.size {
                let si = s as usize;
                let dst = recv + rdispls[si];
                if s == self.rank {
                    // SAFETY: our own piece; send and recv do not overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(at(send + sdispls[me]), at(dst), rcounts[si])
                    };
                    continue;
                }
                self.arrived(s, e).await;
                let (buf, t) = (self.data_of_ptr(s, e), self.second_of(s, e));
                let tab = if t == 0 {
                    self.block.inline(s, e) as usize
                } else {
                    t
                };
                // SAFETY: member `s` published `n` displacements (an
                // unaligned read of ours).
                let d = unsafe { at(tab).cast::<u64>().add(me).read_unaligned() } as usize;
                let got = self.len_of(s, e);
                if d + rcounts[si] > got && bad.is_none() {
                    bad = Some(Error::Arg {
                        reason: format!(
                            "rank {s} sent this rank {} bytes in an all-to-all where {} were \
                             expected (counts or datatypes differ between ranks)",
                            got.saturating_sub(d),
                            rcounts[si]
                        ),
                    });
                }
                let n = rcounts[si].min(got.saturating_sub(d));
                // SAFETY: member `s`'s buffer holds `got` bytes (our piece's
                // first `n` at `d`) and is kept until we are done.
                unsafe { std::ptr::copy_nonoverlapping(at(buf + d), at(dst), n) };
            }
            self.finish(e).await;
            self.all_done(e).await;
            self.end_with(e, bad).await
        }
    }

    /// Member `r`'s published address for epoch `e` (after `arrived`).
    fn data_of_ptr(&self, r: u32, e: u32) -> usize {
        let phase = &self.block.slot(r).phase[phase_of(e)];
        // Relaxed: ordered by the Acquire in `arrived`.
        phase.ptr.load(Ordering::Relaxed) as usize
    }

    // --------------------------------------------------------- reductions

    /// Reduces `count` elements of every member's `send` with `op`, in rank
    /// order, into `recv` at `root` (every member's `recv` when `root` is
    /// `None`: allreduce).
    ///
    /// # Safety
    /// `send` holds `count` readable elements (at a root or in allreduce it
    /// may equal `recv`: in place); `recv` holds `count` writable elements
    /// where a result is wanted.
    pub unsafe fn reduce(
        &self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &dyn Combine,
        root: Option<u32>,
    ) -> Result<()> {
        if count.saturating_mul(op.element_size()) <= INLINE && self.direct() {
            // SAFETY: the caller's guarantee.
            return unsafe { self.reduce_now(send as usize, recv as usize, count, op, root) };
        }
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.ireduce(send, recv, count, op, root) })
    }

    /// [`Coll::reduce`] of an inline vector on the direct path: every
    /// member publishes its vector in its slot; those that want the
    /// result combine the slots in rank order (the steps of
    /// [`Coll::ireduce`] for a small vector, with nothing in flight).
    ///
    /// # Safety
    /// As [`Coll::reduce`]; the vector fits inline and [`Coll::direct`]
    /// holds.
    unsafe fn reduce_now(
        &self,
        send: usize,
        recv: usize,
        count: usize,
        op: &dyn Combine,
        root: Option<u32>,
    ) -> Result<()> {
        let e = self.next_epoch();
        self.begin_now(e)?;
        let len = count * op.element_size();
        // SAFETY: `send` holds `len <= INLINE` bytes (caller).
        unsafe { self.publish(e, Some((send, len)), 0, 0, len) };
        let mut bad = None;
        if root.is_none_or(|r| r == self.rank) {
            for r in self.others() {
                self.arrived_now(r, e)?;
            }
            bad = self.same_lengths(e, len, self.size);
            if bad.is_none() {
                let inputs = |r| self.block.inline(r, e) as usize;
                // SAFETY: every slot holds `len` inline bytes for `e`;
                // `recv` holds `len` writable bytes and is not a slot.
                unsafe { combine_into(self.size, inputs, 0, len, recv, op) };
            }
        }
        self.finished_now(e);
        bad.map_or(Ok(()), Err)
    }

    /// [`Coll::reduce`] as a future.
    ///
    /// # Safety
    /// As [`Coll::reduce`], until the future has finished.
    pub unsafe fn ireduce<'a>(
        &'a self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &'a dyn Combine,
        root: Option<u32>,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let es = op.element_size();
            let len = count * es;
            let wants = root.is_none_or(|r| r == self.rank);
            if len <= INLINE {
                // Every member that wants the result reduces the whole
                // vector itself from the others' slots.
                // SAFETY: `send` holds `len` bytes (caller).
                unsafe { self.publish(e, Some((send, len)), 0, 0, len) };
                if wants {
                    self.all_arrived(e).await;
                    let bad = self.same_lengths(e, len, self.size);
                    if bad.is_some() {
                        return self.end_with(e, bad).await;
                    }
                    let inputs = |r| self.block.inline(r, e) as usize;
                    // SAFETY: every slot holds `len` inline bytes for `e`;
                    // `recv` holds `len` writable bytes and is not a slot.
                    unsafe { combine_into(self.size, inputs, 0, len, recv, op) };
                }
                return self.end(e).await;
            }
            let mut st = self.borrow_staging();
            let [s0, s1] = &mut st.bufs;
            // A contribution in place is read by the others while results
            // are written over it: stage it.
            // SAFETY: the caller's guarantee.
            let src = unsafe {
                if send == recv {
                    let s = s0.get(len)?;
                    std::ptr::copy_nonoverlapping(at(send), at(s), len);
                    s
                } else {
                    Self::readable(s0, send, len, true)?
                }
            };
            // Where this member's result goes (if any): the others write
            // (reduce) or read (allreduce) slices of it.
            let res = if wants {
                // SAFETY: the caller's guarantee for `recv`.
                unsafe { Self::readable(s1, recv, len, false)? }
            } else {
                0
            };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src, res, len) };
            self.all_arrived(e).await;
            let bad = self.same_lengths(e, len, self.size);
            // This member's slice, reduced from every member's buffer into
            // the result's slice (the root's, or our own).
            let (lo, hi) = slice_of(count, es, self.size, self.rank);
            let target = match root {
                Some(r) if r != self.rank => self.second_of(r, e),
                _ => res,
            };
            if hi > lo && bad.is_none() {
                let inputs = |r| {
                    if r == self.rank {
                        src
                    } else {
                        self.data_of(r, e)
                    }
                };
                // SAFETY: every input holds `len` bytes; this member alone
                // writes this slice of the target.
                unsafe { combine_into(self.size, inputs, lo, hi, target + lo, op) };
            }
            if root.is_none() {
                self.share_slices(e, count, es, res).await;
            }
            self.finish(e).await;
            self.all_done(e).await;
            if wants && res != recv {
                // SAFETY: the staged result holds `len` bytes; `recv` is ours.
                unsafe { std::ptr::copy_nonoverlapping(at(res), at(recv), len) };
            }
            self.end_with(e, bad).await
        }
    }

    /// Allreduce in slices with a step of the caller's between the two
    /// halves: member `r` reduces slice `r` of every member's `send` (rank
    /// order, as [`Coll::ireduce`]) into `scratch`, hands it to `middle`
    /// with slice `r` of its result to fill (for a spanning communicator:
    /// `MPI_Allreduce` of the slice with the members of the same index on
    /// the other nodes), then copies every other slice from its owner's
    /// result. One epoch: every member's cores and `middle`s work at once
    /// and nobody moves the whole vector alone. Slice `r` is the same byte
    /// range on every communicator of this size for this `count`.
    ///
    /// `middle` gets the combined slice and the slice of the result (both
    /// empty when the member's slice is); an error it returns ends the
    /// call after the others have read this member's slice (which is then
    /// undefined, as MPI leaves a failed collective's buffers).
    ///
    /// # Safety
    /// `send` holds `count` readable elements and `recv` `count` writable
    /// ones, not overlapping; `scratch` holds as many initialised,
    /// writable bytes as the largest slice and is read by nobody else.
    #[cfg(feature = "mpi")]
    pub(crate) unsafe fn allreduce_sliced<F>(
        &self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &dyn Combine,
        scratch: *mut u8,
        middle: F,
    ) -> Result<()>
    where
        F: FnOnce(&[u8], &mut [u8]) -> Result<()> + Send,
    {
        let e = self.next_epoch();
        let (send, recv, scratch) = (send as usize, recv as usize, scratch as usize);
        let f = async move {
            self.begin(e).await;
            let es = op.element_size();
            let len = count * es;
            let mut st = self.borrow_staging();
            let [s0, s1] = &mut st.bufs;
            // SAFETY: the caller's guarantee for both buffers; the result
            // is staged (not copied in) when the others cannot read it.
            let (src, res) = unsafe {
                (
                    Self::readable(s0, send, len, true)?,
                    Self::readable(s1, recv, len, false)?,
                )
            };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src, res, len) };
            self.all_arrived(e).await;
            let bad = self.same_lengths(e, len, self.size);
            let (lo, hi) = slice_of(count, es, self.size, self.rank);
            if bad.is_none() {
                let inputs = |r| {
                    if r == self.rank {
                        src
                    } else {
                        self.data_of(r, e)
                    }
                };
                // SAFETY: every input holds `len` bytes; `scratch` holds
                // the slice (caller) and nobody else reads it.
                unsafe { combine_into(self.size, inputs, lo, hi, scratch, op) };
            }
            // `middle` runs even after a length mismatch (on whatever the
            // scratch holds), so that its peers elsewhere are not left
            // waiting for this member.
            // SAFETY: `scratch` holds the slice's bytes, initialised
            // (caller); `res + lo` is this member's slice of its result,
            // which nobody reads before `mid` says it is written.
            let (part, out) = unsafe {
                (
                    std::slice::from_raw_parts(at(scratch), hi - lo),
                    std::slice::from_raw_parts_mut(at(res + lo), hi - lo),
                )
            };
            let failed = bad.or(middle(part, out).err());
            self.share_slices(e, count, es, res).await;
            self.finish(e).await;
            self.all_done(e).await;
            if res != recv {
                // SAFETY: the staged result holds `len` bytes; `recv` is ours.
                unsafe { std::ptr::copy_nonoverlapping(at(res), at(recv), len) };
            }
            self.end_with(e, failed).await
        };
        self.run(f)
    }

    /// Inclusive (with `exclusive`: exclusive) prefix reduction: member
    /// `r` gets `in_0 op … op in_r` (`… op in_{r-1}`; member 0's `recv` is
    /// left as it is in the exclusive form).
    ///
    /// # Safety
    /// As [`Coll::reduce`] (in place allowed).
    pub unsafe fn scan(
        &self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &dyn Combine,
        exclusive: bool,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.iscan(send, recv, count, op, exclusive) })
    }

    /// [`Coll::scan`] as a future.
    ///
    /// # Safety
    /// As [`Coll::scan`], until the future has finished.
    pub unsafe fn iscan<'a>(
        &'a self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &'a dyn Combine,
        exclusive: bool,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let len = count * op.element_size();
            let big = len > INLINE;
            let mut st = self.borrow_staging();
            if big {
                // Staged always: the others read it while we write `recv`,
                // which may be the same memory.
                let s = st.bufs[0].get(len)?;
                // SAFETY: `send` holds `len` bytes, `s` is ours.
                unsafe { std::ptr::copy_nonoverlapping(at(send), at(s), len) };
                // SAFETY: no inline data.
                unsafe { self.publish(e, None, s, 0, len) };
            } else {
                // SAFETY: `send` holds `len` bytes.
                unsafe { self.publish(e, Some((send, len)), 0, 0, len) };
            }
            let last = if exclusive { self.rank } else { self.rank + 1 };
            for r in 0..last {
                if r != self.rank {
                    self.arrived(r, e).await;
                }
            }
            let bad = self.same_lengths(e, len, last);
            if last > 0 && len > 0 && bad.is_none() {
                let inputs = |r| self.data_of(r, e);
                // SAFETY: each input holds `len` bytes for `e` (our own is
                // the published copy); `recv` is ours.
                unsafe { combine_into(last, inputs, 0, len, recv, op) };
            }
            self.finish(e).await;
            if big {
                self.all_done(e).await;
            }
            self.end_with(e, bad).await
        }
    }

    /// Reduce-scatter: member `r` gets the reduction of every member's
    /// block `r` (`counts[r]` elements, blocks back to back in `send`).
    ///
    /// # Safety
    /// `send` holds the sum of `counts` elements; `recv` holds
    /// `counts[rank]` writable elements and does not overlap `send` unless
    /// it is `send` itself (in place: the result goes to the start).
    pub unsafe fn reduce_scatter(
        &self,
        send: *const u8,
        recv: *mut u8,
        counts: &[usize],
        op: &dyn Combine,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.run(unsafe { self.ireduce_scatter(send, recv, counts, op) })
    }

    /// [`Coll::reduce_scatter`] as a future.
    ///
    /// # Safety
    /// As [`Coll::reduce_scatter`], until the future has finished.
    pub unsafe fn ireduce_scatter<'a>(
        &'a self,
        send: *const u8,
        recv: *mut u8,
        counts: &'a [usize],
        op: &'a dyn Combine,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        let e = self.next_epoch();
        let (send, recv) = (send as usize, recv as usize);
        async move {
            self.begin(e).await;
            let es = op.element_size();
            let total: usize = counts.iter().sum::<usize>() * es;
            let mut st = self.borrow_staging();
            // SAFETY: the caller's guarantee.
            let src = unsafe {
                if send == recv {
                    let s = st.bufs[0].get(total)?;
                    std::ptr::copy_nonoverlapping(at(send), at(s), total);
                    s
                } else {
                    Self::readable(&mut st.bufs[0], send, total, true)?
                }
            };
            let big = total > INLINE;
            if big {
                // SAFETY: no inline data.
                unsafe { self.publish(e, None, src, 0, total) };
            } else {
                // SAFETY: `src` holds `total` bytes.
                unsafe { self.publish(e, Some((src, total)), 0, 0, total) };
            }
            self.all_arrived(e).await;
            let me = self.rank as usize;
            let lo = counts[..me].iter().sum::<usize>() * es;
            let hi = lo + counts[me] * es;
            let inputs = |r| {
                if r == self.rank && big {
                    src
                } else {
                    self.data_of(r, e)
                }
            };
            let bad = self.same_lengths(e, total, self.size);
            if hi > lo && bad.is_none() {
                // SAFETY: each input holds `total` bytes; `recv` holds our
                // block and nobody reads it (staged when in place).
                unsafe { combine_into(self.size, inputs, lo, hi, recv, op) };
            }
            self.finish(e).await;
            if big {
                self.all_done(e).await;
            }
            self.end_with(e, bad).await
        }
    }
}

/// `out = in_0 op (in_1 op (… op in_{n-1}))` over bytes `lo..hi` of the
/// `n` inputs at addresses `input(0..n)`, written to `out` (which holds
/// `hi - lo` bytes).
///
/// # Safety
/// Every input holds at least `hi` readable bytes; `out` holds `hi - lo`
/// writable bytes and overlaps no input.
unsafe fn combine_into(
    n: u32,
    input: impl Fn(u32) -> usize,
    lo: usize,
    hi: usize,
    out: usize,
    op: &dyn Combine,
) {
    if n == 0 {
        return;
    }
    let len = hi - lo;
    // SAFETY: the caller's guarantees.
    unsafe {
        std::ptr::copy_nonoverlapping(at(input(n - 1) + lo), at(out), len);
        let acc = std::slice::from_raw_parts_mut(at(out), len);
        for r in (0..n - 1).rev() {
            op.apply(std::slice::from_raw_parts(at(input(r) + lo), len), acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_vector_at_element_boundaries() {
        for size in 1..8u32 {
            for count in [0usize, 1, 7, 100, 1001] {
                let mut end = 0;
                for r in 0..size {
                    let (lo, hi) = slice_of(count, 8, size, r);
                    assert_eq!(lo, end);
                    assert!(hi >= lo && hi % 8 == 0);
                    end = hi;
                }
                assert_eq!(end, count * 8);
            }
        }
    }

    struct Digits;
    impl Combine for Digits {
        fn element_size(&self) -> usize {
            1
        }
        // A non-commutative operation on digits: out = in * 10 + out
        // (mod 256), which shows the order of combination.
        fn apply(&self, input: &[u8], inout: &mut [u8]) {
            for (o, &i) in inout.iter_mut().zip(input) {
                *o = i.wrapping_mul(10).wrapping_add(*o);
            }
        }
    }

    #[test]
    fn combination_is_in_rank_order() {
        let ins = [[1u8], [2], [3]];
        let mut out = [0u8];
        // SAFETY: one byte in each input and in `out`.
        unsafe {
            combine_into(
                3,
                |r| ins[r as usize].as_ptr() as usize,
                0,
                1,
                out.as_mut_ptr() as usize,
                &Digits,
            )
        };
        // 1 op (2 op 3) = 1*10 + (2*10 + 3) = 33
        assert_eq!(out, [33]);
    }
}
