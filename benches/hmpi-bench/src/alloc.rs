//! Workload family `alloc`: the node heap's allocator against glibc and
//! mimalloc, in the same run.
//!
//! * **`alloc-free`** (1 and 2 threads): each thread allocates a batch of 64
//!   blocks of the size (touching one byte of each), then frees them in
//!   allocation order, over and over. Value: million alloc+free pairs per
//!   second, summed over the threads, which start together and run at the
//!   same time.
//! * **`cross-free`** (2 threads): one side allocates and passes the blocks
//!   through a single-producer/single-consumer [`Ring`], the other frees
//!   them. Value: million frees per second. Backends `shmheap`, `glibc` and
//!   `mimalloc` run the two sides as threads of one process;
//!   `shmheap-xrank` runs them as two ranks (processes) started through the
//!   launcher, so that every free is a remote free: it goes onto rank 0's
//!   remote-free stack and rank 0's allocator reclaims it when it refills.
//!
//! Every allocator is called directly (`libc::malloc`/`free`, mimalloc's and
//! [`ShmHeap`]'s `GlobalAlloc` methods with a 16-byte-aligned layout); the
//! program's own global allocator is switched to the system one
//! ([`crate::system_allocator`]) before anything attaches to a node heap,
//! so that the benchmark's bookkeeping never touches the allocators it
//! measures. Each point runs a
//! warm-up repetition and then `--reps` measured ones of `--ms` each; the
//! in-process backends take turns within every repetition, so that a busy
//! machine disturbs them alike. Worker threads are pinned to distinct CPUs
//! when there are enough; the two ranks are bound to cores by the launcher.
//!
//! Built without the default feature `mimalloc`, the workload measures
//! shmheap and glibc only, and the mimalloc columns say "not measured".
//!
//! A repetition during which another process took a measuring thread's CPU
//! (involuntary context switches, and thread CPU time more than
//! [`MAX_LOST`] short of the wall time) is run again, at most
//! [`MAX_REDO`] times, keeping the least disturbed attempt: the machines
//! this runs on are small and shared. (Not when there are fewer CPUs than
//! measuring threads or ranks: then they disturb each other by design.)
//!
//! glibc raises its mmap and trim thresholds the first time a large mapped
//! block is freed, which makes its numbers for mid-sized blocks depend on
//! what ran before. The benchmark triggers that adaptation once at start
//! (`malloc` + `free` of the largest size, at least 1 MiB), so that every
//! glibc point sees the steady state of a program that has used large
//! blocks, whatever the order or the `--sizes`.
//!
//! The cross-rank ring lives in the node heap: rank 0 allocates it with
//! [`ShmHeap`] and publishes its address in registry slot [`RING_SLOT`];
//! rank 1 looks it up there.

use crate::report::{self, fmt_size, Sample};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use hmpi::ShmHeap;
#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// The `alloc` workload family.
pub const WORKLOAD: Workload = Workload {
    name: "alloc",
    about: "allocator throughput: shmheap vs glibc vs mimalloc (alloc-free, cross-free)",
    run,
    worker: Some((WORKER, worker)),
};

/// Name of the hidden worker (`hmpi-bench --worker cross-free …`).
const WORKER: &str = "cross-free";
/// Registry slot in which rank 0 of a `cross-free` worker job publishes the
/// address of its [`Ring`].
pub const RING_SLOT: usize = 8;
/// Blocks per batch in `alloc-free`.
const BATCH: usize = 64;
/// Alignment of every layout.
const ALIGN: usize = 16;
/// Unit of every sample.
const UNIT: &str = "Mpairs/s";
/// Largest size accepted (64 blocks × 2 threads stay below 2 GiB).
const MAX_SIZE: usize = 16 << 20;
/// Slots in the ring (a power of two).
const RING_CAP: usize = 1024;
/// Bytes the producer may have in flight in the ring.
const IN_FLIGHT_BYTES: usize = 32 << 20;
/// Prefix of the line with which rank 0 of a worker job reports.
const RESULT_TAG: &str = "hmpi-bench-result";
/// Largest share of a repetition's wall time that a measuring thread may
/// have lost to other processes before the repetition is run again.
const MAX_LOST: f64 = 0.05;
/// How often a disturbed repetition is run again.
const MAX_REDO: usize = 2;

/// How often a disturbed repetition of `threads` measuring threads (or
/// ranks) is run again: [`MAX_REDO`], or 0 when they cannot each have a CPU.
fn redo_limit(threads: usize) -> usize {
    if allowed_cpus().len() >= threads {
        MAX_REDO
    } else {
        0
    }
}

const DEFAULT_REPS: usize = 5;
const DEFAULT_MS: u64 = 100;
const QUICK_REPS: usize = 2;
const QUICK_MS: u64 = 20;
const QUICK_SIZES: [usize; 4] = [16, 1 << 10, 64 << 10, 1 << 20];
const DEFAULT_SIZES: (usize, usize) = (16, 1 << 20);

const ALLOC_FREE: &str = "alloc-free";
const CROSS_FREE: &str = "cross-free";
const XRANK: &str = "shmheap-xrank";

// ---------------------------------------------------------------------------
// The allocators under test.

/// An in-process allocator under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    ShmHeap,
    Glibc,
    #[cfg(feature = "mimalloc")]
    Mimalloc,
}

impl Backend {
    #[cfg(feature = "mimalloc")]
    const ALL: [Backend; 3] = [Backend::ShmHeap, Backend::Glibc, Backend::Mimalloc];
    #[cfg(not(feature = "mimalloc"))]
    const ALL: [Backend; 2] = [Backend::ShmHeap, Backend::Glibc];

    fn name(self) -> &'static str {
        match self {
            Backend::ShmHeap => "shmheap",
            Backend::Glibc => "glibc",
            #[cfg(feature = "mimalloc")]
            Backend::Mimalloc => "mimalloc",
        }
    }
}

/// An allocator called directly, without the global-allocator indirection.
trait RawAlloc: Sync {
    /// Allocates a block for `layout`, or returns null.
    ///
    /// # Safety
    /// `layout` has a non-zero size.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8;

    /// Frees a block.
    ///
    /// # Safety
    /// `p` came from `alloc` of this allocator (in any thread, or for
    /// [`ShmHeap`] in any rank of the node) with `layout`, and is freed once.
    unsafe fn free(&self, p: *mut u8, layout: Layout);
}

/// glibc's `malloc`/`free`, called directly.
struct Glibc;

impl RawAlloc for Glibc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: malloc has no preconditions; glibc aligns to 16 bytes on
        // 64-bit targets, which is `ALIGN`.
        unsafe { libc::malloc(layout.size()) as *mut u8 }
    }

    #[inline]
    unsafe fn free(&self, p: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a block from `malloc`, freed once.
        unsafe { libc::free(p as *mut libc::c_void) }
    }
}

/// A `GlobalAlloc` called directly.
struct Via<A>(A);

impl<A: GlobalAlloc + Sync> RawAlloc for Via<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees a non-zero size.
        unsafe { self.0.alloc(layout) }
    }

    #[inline]
    unsafe fn free(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a live block of this allocator made
        // with `layout`.
        unsafe { self.0.dealloc(p, layout) }
    }
}

fn layout_for(size: usize) -> Layout {
    Layout::from_size_align(size, ALIGN).expect("sizes are checked to be at most MAX_SIZE")
}

// ---------------------------------------------------------------------------
// Timing a thread, and noticing when others took its CPU.

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is valid.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Involuntary context switches of the calling thread so far.
fn involuntary_switches() -> i64 {
    // SAFETY: all-zero bytes are a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return 0;
    }
    ru.ru_nivcsw as i64
}

/// Started on a thread to time its part of a round.
struct Stopwatch {
    wall: Instant,
    cpu: Duration,
    switches: i64,
}

impl Stopwatch {
    fn start() -> Self {
        Stopwatch {
            switches: involuntary_switches(),
            cpu: thread_cpu_time(),
            wall: Instant::now(),
        }
    }

    fn stop(&self) -> Span {
        let wall = self.wall.elapsed();
        let cpu = thread_cpu_time().saturating_sub(self.cpu);
        let preempted = involuntary_switches() > self.switches;
        let lost = if preempted && !wall.is_zero() {
            (1.0 - cpu.as_secs_f64() / wall.as_secs_f64()).max(0.0)
        } else {
            0.0
        };
        Span { wall, lost }
    }
}

/// How long a thread's part of a round took, and which share of that time
/// other processes had its CPU (0 when it was never preempted).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    wall: Duration,
    lost: f64,
}

// ---------------------------------------------------------------------------
// alloc-free

/// Allocates and frees batches of `layout` until `stop`; returns the pairs.
fn alloc_free_loop<A: RawAlloc>(a: &A, layout: Layout, stop: &AtomicBool) -> Result<u64, String> {
    let mut blocks = [std::ptr::null_mut::<u8>(); BATCH];
    let mut pairs = 0u64;
    loop {
        for i in 0..BATCH {
            // SAFETY: sizes are at least 1 byte.
            let p = black_box(unsafe { a.alloc(layout) });
            if p.is_null() {
                for &q in &blocks[..i] {
                    // SAFETY: blocks allocated above in this batch, freed once.
                    unsafe { a.free(q, layout) };
                }
                return Err(format!("allocation of {} bytes failed", layout.size()));
            }
            // SAFETY: `p` is a fresh block of at least one byte.
            unsafe { p.write_volatile(1) };
            blocks[i] = p;
        }
        for &p in &blocks {
            // SAFETY: each block was allocated in this batch and is freed once.
            unsafe { a.free(p, layout) };
        }
        pairs += BATCH as u64;
        // Relaxed: only a stop request, no data travels with it.
        if stop.load(Ordering::Relaxed) {
            return Ok(pairs);
        }
    }
}

fn alloc_free(backend: Backend, size: usize, stop: &AtomicBool) -> Result<u64, String> {
    let layout = layout_for(size);
    match backend {
        Backend::ShmHeap => alloc_free_loop(&Via(ShmHeap::new()), layout, stop),
        Backend::Glibc => alloc_free_loop(&Glibc, layout, stop),
        #[cfg(feature = "mimalloc")]
        Backend::Mimalloc => alloc_free_loop(&Via(MiMalloc), layout, stop),
    }
}

// ---------------------------------------------------------------------------
// The single-producer/single-consumer ring.

/// One cache line of its own (no false sharing between the two sides).
#[repr(C, align(64))]
struct Padded<T>(T);

/// The consumer's report of one round (for the cross-rank case).
#[repr(C)]
struct RoundReport {
    /// Rounds the consumer has finished.
    done: AtomicU64,
    /// Blocks it freed in the last round.
    frees: AtomicU64,
    /// Nanoseconds the last round took on its side.
    nanos: AtomicU64,
    /// Share of them it lost to other processes, in millionths.
    lost_ppm: AtomicU64,
    /// The producer's decision after a round: `round << 1 | another`
    /// (whether another round follows).
    decision: AtomicU64,
    /// Set by the producer when it gives up (allocation failure), before it
    /// pushes the end-of-round mark, so the consumer stops too.
    abort: AtomicU64,
}

/// A bounded single-producer/single-consumer queue of non-zero `u64`s
/// (block addresses; 0 marks the end of a round), usable across processes.
///
/// It lives in memory both sides see — a `Box` for two threads, the node
/// heap for two ranks — and holds only atomics, so all-zero bytes are an
/// empty ring. `head` and `tail` grow without wrapping (2^64 items never
/// happen); slot `i % RING_CAP` holds item `i`.
#[repr(C)]
pub struct Ring {
    /// Items pushed so far (written by the producer only).
    head: Padded<AtomicU64>,
    /// Items popped so far (written by the consumer only).
    tail: Padded<AtomicU64>,
    report: Padded<RoundReport>,
    slots: [AtomicU64; RING_CAP],
}

impl Ring {
    fn new() -> Self {
        Ring {
            head: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            report: Padded(RoundReport {
                done: AtomicU64::new(0),
                frees: AtomicU64::new(0),
                nanos: AtomicU64::new(0),
                lost_ppm: AtomicU64::new(0),
                decision: AtomicU64::new(0),
                abort: AtomicU64::new(0),
            }),
            slots: [const { AtomicU64::new(0) }; RING_CAP],
        }
    }

    /// Records the consumer's result of round `round` (counted from 1).
    fn report_round(&self, round: u64, frees: u64, span: Span) {
        let r = &self.report.0;
        // Relaxed: published by the Release store of `done` below.
        r.frees.store(frees, Ordering::Relaxed);
        r.nanos
            .store(span.wall.as_nanos() as u64, Ordering::Relaxed);
        r.lost_ppm
            .store((span.lost * 1e6) as u64, Ordering::Relaxed);
        // SYNC POINT: Release pairs with the Acquire in `wait_report`: the
        // producer that sees `done == round` sees this round's numbers.
        r.done.store(round, Ordering::Release);
    }

    /// Waits for the consumer's report of round `round`: (frees, its span).
    fn wait_report(&self, round: u64) -> (u64, Span) {
        let r = &self.report.0;
        let mut w = Waiter::new();
        // SYNC POINT: Acquire pairs with the Release in `report_round`.
        while r.done.load(Ordering::Acquire) < round {
            w.wait();
        }
        (
            r.frees.load(Ordering::Relaxed),
            Span {
                wall: Duration::from_nanos(r.nanos.load(Ordering::Relaxed)),
                lost: r.lost_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            },
        )
    }

    /// The producer's decision after round `round`: another one or not.
    fn decide(&self, round: u64, more: bool) {
        // SYNC POINT: Release pairs with the Acquire in `wait_decision`.
        self.report
            .0
            .decision
            .store(round << 1 | more as u64, Ordering::Release);
    }

    /// Waits for the producer's decision after round `round`.
    fn wait_decision(&self, round: u64) -> bool {
        let mut w = Waiter::new();
        loop {
            // SYNC POINT: Acquire pairs with the Release in `decide`.
            let d = self.report.0.decision.load(Ordering::Acquire);
            if d >> 1 == round {
                return d & 1 == 1;
            }
            w.wait();
        }
    }

    fn set_abort(&self) {
        // Relaxed: published by the producer's next Release push (the
        // end-of-round mark), which the consumer acquires before it looks.
        self.report.0.abort.store(1, Ordering::Relaxed);
    }

    fn aborted(&self) -> bool {
        // Relaxed: read after the Acquire pop of the end-of-round mark.
        self.report.0.abort.load(Ordering::Relaxed) != 0
    }
}

/// Waiting in the ring: spin briefly, then yield the core (so that it works
/// with more ranks or threads than cores).
struct Waiter {
    step: u32,
}

impl Waiter {
    const SPINS: u32 = 100;

    fn new() -> Self {
        Waiter { step: 0 }
    }

    fn wait(&mut self) {
        if self.step < Self::SPINS {
            for _ in 0..(1u32 << (self.step / 16).min(5)) {
                std::hint::spin_loop();
            }
            self.step += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// The producer's side of a [`Ring`].
struct Producer<'a> {
    ring: &'a Ring,
    head: u64,
    /// Last value seen of the consumer's `tail` (refreshed only when the
    /// ring looks full, so the producer rarely touches the consumer's line).
    tail: u64,
    /// Items the producer may have in flight (≤ `RING_CAP`).
    limit: u64,
}

impl<'a> Producer<'a> {
    fn new(ring: &'a Ring, limit: usize) -> Self {
        Producer {
            ring,
            // Relaxed: only this side writes `head`.
            head: ring.head.0.load(Ordering::Relaxed),
            // SYNC POINT: Acquire pairs with the consumer's Release store of
            // `tail`: the slots below it are no longer read.
            tail: ring.tail.0.load(Ordering::Acquire),
            limit: limit.clamp(1, RING_CAP) as u64,
        }
    }

    #[inline]
    fn push(&mut self, v: u64) {
        if self.head - self.tail >= self.limit {
            let mut w = Waiter::new();
            loop {
                // SYNC POINT: Acquire pairs with the consumer's Release store
                // of `tail`: it has read the slots we are about to reuse.
                self.tail = self.ring.tail.0.load(Ordering::Acquire);
                if self.head - self.tail < self.limit {
                    break;
                }
                w.wait();
            }
        }
        // Relaxed: published by the Release store of `head` below.
        self.ring.slots[self.head as usize % RING_CAP].store(v, Ordering::Relaxed);
        self.head += 1;
        // SYNC POINT: Release pairs with the consumer's Acquire load of
        // `head`: the slot, and everything written before it (the block's
        // contents and the allocator's bookkeeping of it), is visible.
        self.ring.head.0.store(self.head, Ordering::Release);
    }
}

/// The consumer's side of a [`Ring`].
struct Consumer<'a> {
    ring: &'a Ring,
    tail: u64,
    /// Last value seen of the producer's `head`.
    head: u64,
}

impl<'a> Consumer<'a> {
    fn new(ring: &'a Ring) -> Self {
        Consumer {
            ring,
            // Relaxed: only this side writes `tail`.
            tail: ring.tail.0.load(Ordering::Relaxed),
            // SYNC POINT: Acquire pairs with the producer's Release store.
            head: ring.head.0.load(Ordering::Acquire),
        }
    }

    #[inline]
    fn pop(&mut self) -> u64 {
        if self.tail == self.head {
            let mut w = Waiter::new();
            loop {
                // SYNC POINT: Acquire pairs with the producer's Release
                // store of `head`: the slots below it are written.
                self.head = self.ring.head.0.load(Ordering::Acquire);
                if self.head != self.tail {
                    break;
                }
                w.wait();
            }
        }
        // Relaxed: ordered by the Acquire load of `head` above.
        let v = self.ring.slots[self.tail as usize % RING_CAP].load(Ordering::Relaxed);
        self.tail += 1;
        // SYNC POINT: Release pairs with the producer's Acquire load of
        // `tail`: we are done with the slot.
        self.ring.tail.0.store(self.tail, Ordering::Release);
        v
    }
}

fn in_flight_limit(size: usize) -> usize {
    (IN_FLIGHT_BYTES / size).clamp(16, RING_CAP)
}

/// Allocates blocks of `layout` and pushes them until `stop`, then pushes
/// the end-of-round mark. Returns the blocks pushed.
fn produce<A: RawAlloc>(
    a: &A,
    ring: &Ring,
    layout: Layout,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let mut tx = Producer::new(ring, in_flight_limit(layout.size()));
    let mut n = 0u64;
    let result = loop {
        // Relaxed: only a stop request.
        if stop.load(Ordering::Relaxed) {
            break Ok(n);
        }
        // SAFETY: sizes are at least 1 byte.
        let p = black_box(unsafe { a.alloc(layout) });
        if p.is_null() {
            ring.set_abort();
            break Err(format!("allocation of {} bytes failed", layout.size()));
        }
        // SAFETY: `p` is a fresh block of at least one byte.
        unsafe { p.write_volatile(1) };
        tx.push(p as u64);
        n += 1;
    };
    tx.push(0);
    result
}

/// Pops blocks of `layout` and frees them until the end-of-round mark.
/// Returns the blocks freed.
fn consume<A: RawAlloc>(a: &A, ring: &Ring, layout: Layout) -> u64 {
    let mut rx = Consumer::new(ring);
    let mut n = 0u64;
    loop {
        let v = rx.pop();
        if v == 0 {
            return n;
        }
        // SAFETY: the producer pushed a live block of this allocator made
        // with `layout` and gave it up; each block is pushed once.
        unsafe { a.free(v as *mut u8, layout) };
        n += 1;
    }
}

// ---------------------------------------------------------------------------
// Threads of one process.

/// Pins the calling thread to `cpu` (best effort: a failure leaves it free).
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` comes from `allowed_cpus`, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

/// What the team's threads do in one round.
#[derive(Debug, Clone, Copy)]
enum Job {
    AllocFree(Backend, usize),
    CrossFree(Backend, usize),
    Quit,
}

/// One thread's result of a round: operations done and the time they took.
type ThreadResult = Result<(u64, Span), String>;

/// The state the team's threads share.
struct Team {
    /// How often a disturbed repetition is run again.
    redo: usize,
    job: Mutex<Job>,
    stop: AtomicBool,
    start: Barrier,
    end: Barrier,
    results: Mutex<Vec<Option<ThreadResult>>>,
    ring: Box<Ring>,
}

impl Team {
    fn worker(&self, index: usize, cpu: Option<usize>) {
        if let Some(cpu) = cpu {
            pin_to(cpu);
        }
        loop {
            self.start.wait();
            let job = *self.job.lock().unwrap_or_else(|e| e.into_inner());
            let clock = Stopwatch::start();
            let r = match job {
                Job::Quit => return,
                Job::AllocFree(b, size) => alloc_free(b, size, &self.stop),
                Job::CrossFree(b, size) if index == 0 => {
                    cross_produce(b, size, &self.ring, &self.stop)
                }
                Job::CrossFree(b, size) => Ok(cross_consume(b, size, &self.ring)),
            };
            let r = r.map(|n| (n, clock.stop()));
            self.results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(r);
            self.end.wait();
        }
    }

    /// Runs one round of `job` for `time`; returns each thread's result.
    fn round(&self, job: Job, time: Duration) -> Vec<ThreadResult> {
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = job;
        // Relaxed: the barrier orders it before the workers' loads.
        self.stop.store(false, Ordering::Relaxed);
        self.start.wait();
        std::thread::sleep(time);
        self.stop.store(true, Ordering::Relaxed);
        self.end.wait();
        self.results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .map(|r| {
                r.take()
                    .unwrap_or_else(|| Err("thread gave no result".into()))
            })
            .collect()
    }
}

fn cross_produce(b: Backend, size: usize, ring: &Ring, stop: &AtomicBool) -> Result<u64, String> {
    let layout = layout_for(size);
    match b {
        Backend::ShmHeap => produce(&Via(ShmHeap::new()), ring, layout, stop),
        Backend::Glibc => produce(&Glibc, ring, layout, stop),
        #[cfg(feature = "mimalloc")]
        Backend::Mimalloc => produce(&Via(MiMalloc), ring, layout, stop),
    }
}

fn cross_consume(b: Backend, size: usize, ring: &Ring) -> u64 {
    let layout = layout_for(size);
    match b {
        Backend::ShmHeap => consume(&Via(ShmHeap::new()), ring, layout),
        Backend::Glibc => consume(&Glibc, ring, layout),
        #[cfg(feature = "mimalloc")]
        Backend::Mimalloc => consume(&Via(MiMalloc), ring, layout),
    }
}

/// Runs `body` with a team of `threads` threads that execute its rounds.
fn with_team<R>(threads: usize, body: impl FnOnce(&Team) -> R) -> R {
    let team = Team {
        redo: redo_limit(threads),
        job: Mutex::new(Job::Quit),
        stop: AtomicBool::new(false),
        start: Barrier::new(threads + 1),
        end: Barrier::new(threads + 1),
        results: Mutex::new(vec![None; threads]),
        ring: Box::new(Ring::new()),
    };
    let cpus = allowed_cpus();
    let pin = cpus.len() >= threads;
    std::thread::scope(|s| {
        for i in 0..threads {
            let team = &team;
            let cpu = if pin { cpus.get(i).copied() } else { None };
            s.spawn(move || team.worker(i, cpu));
        }
        let r = body(&team);
        *team.job.lock().unwrap_or_else(|e| e.into_inner()) = Job::Quit;
        team.start.wait();
        r
    })
}

/// Million operations per second of one thread's result.
fn rate((n, span): (u64, Span)) -> f64 {
    n as f64 / span.wall.as_secs_f64().max(1e-9) / 1e6
}

/// The value of one in-process round (Mpairs/s) and the largest share of
/// time any of its threads lost to other processes.
fn round_value(job: Job, results: &[ThreadResult]) -> Result<(f64, f64), String> {
    let mut lost: f64 = 0.0;
    for r in results {
        match r {
            Ok((_, span)) => lost = lost.max(span.lost),
            Err(e) => return Err(e.clone()),
        }
    }
    let ok = |i: usize| results[i].as_ref().map_err(Clone::clone).copied();
    let value = match job {
        Job::AllocFree(..) => results.iter().flatten().map(|&r| rate(r)).sum(),
        Job::CrossFree(..) => {
            let ((sent, _), (freed, span)) = (ok(0)?, ok(1)?);
            if sent != freed {
                return Err(format!("sent {sent} blocks, freed {freed}"));
            }
            rate((freed, span))
        }
        Job::Quit => 0.0,
    };
    Ok((value, lost))
}

/// Runs one repetition of `job`, again (at most `team.redo` times) while
/// another process disturbs it; returns the least disturbed value and how
/// many attempts were redone.
fn measured_round(team: &Team, job: Job, time: Duration) -> Result<(f64, usize), String> {
    let mut best: Option<(f64, f64)> = None;
    for attempt in 0..=team.redo {
        let (value, lost) = round_value(job, &team.round(job, time))?;
        if best.is_none_or(|(_, l)| lost < l) {
            best = Some((value, lost));
        }
        if lost <= MAX_LOST {
            return Ok((value, attempt));
        }
    }
    Ok((best.map_or(0.0, |b| b.0), team.redo))
}

// ---------------------------------------------------------------------------
// Two ranks.

/// What the parent asks of a `cross-free` worker job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WorkerArgs {
    size: usize,
    reps: usize,
    ms: u64,
    /// How often a disturbed repetition is run again.
    redo: usize,
}

impl WorkerArgs {
    fn to_args(self) -> Vec<String> {
        let mut v = vec!["--worker".to_owned(), WORKER.to_owned()];
        for (flag, n) in [
            ("--size", self.size as u64),
            ("--reps", self.reps as u64),
            ("--ms", self.ms),
            ("--redo", self.redo as u64),
        ] {
            v.push(flag.to_owned());
            v.push(n.to_string());
        }
        v
    }

    /// Parses the arguments after `--worker cross-free`.
    fn parse(args: &[String]) -> Result<WorkerArgs, BenchError> {
        let (mut size, mut reps, mut ms, mut redo) = (None, None, None, None);
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| BenchError::Usage(format!("worker: {flag} needs a value")))?;
            let n: u64 = v
                .parse()
                .map_err(|_| BenchError::Usage(format!("worker: {flag} {v}: not a number")))?;
            match flag.as_str() {
                "--size" => size = Some(n as usize),
                "--reps" => reps = Some(n as usize),
                "--ms" => ms = Some(n),
                "--redo" => redo = Some(n as usize),
                _ => return Err(BenchError::Usage(format!("worker: unknown option {flag}"))),
            }
        }
        match (size, reps, ms, redo) {
            (
                Some(size @ 1..=MAX_SIZE),
                Some(reps @ 1..=1000),
                Some(ms @ 1..=60_000),
                Some(redo @ 0..=MAX_REDO),
            ) => Ok(WorkerArgs {
                size,
                reps,
                ms,
                redo,
            }),
            _ => Err(BenchError::Usage(format!(
                "worker: needs --size (1..16M) --reps (1..1000) --ms (1..60000) --redo (0..{MAX_REDO})"
            ))),
        }
    }
}

/// One rank of the `shmheap-xrank` measurement (started by the launcher):
/// rank 0 allocates, rank 1 frees, through a ring in the node heap. Rank 0
/// prints `hmpi-bench-result size=N redone=K values=v1,v2,…` (Mpairs/s of
/// each measured repetition; K disturbed attempts were run again).
///
/// Each round: both ranks pass the node barrier, rank 0 produces for the
/// round's time while rank 1 frees, rank 1 reports its count, time and lost
/// share in the ring, and rank 0 decides whether another round follows
/// (the next repetition, or the same one again when it was disturbed).
fn worker(args: &[String]) -> Result<(), BenchError> {
    let WorkerArgs {
        size,
        reps,
        ms,
        redo,
    } = WorkerArgs::parse(args)?;
    crate::system_allocator();
    let fail = |what: &str, e: &dyn std::fmt::Display| BenchError::Failed(format!("{what}: {e}"));
    let seg = hmpi::attach_from_env().map_err(|e| fail("attach to the node heap", &e))?;
    if seg.ranks() != 2 {
        return Err(BenchError::Failed(format!(
            "the cross-free worker needs 2 ranks, the node heap has {}",
            seg.ranks()
        )));
    }
    let heap = Via(ShmHeap::new());
    let layout = layout_for(size);
    if seg.local_rank() == 0 {
        let p = ShmHeap::new()
            .try_alloc_zeroed(Layout::new::<Ring>())
            .map_err(|e| fail("allocate the ring", &e))?;
        // SAFETY: a fresh, zeroed, suitably aligned block of the ring's size
        // in the node heap; all-zero bytes are an empty ring (only atomics).
        let ring: &Ring = unsafe { &*(p.as_ptr() as *const Ring) };
        seg.publish(RING_SLOT, p.as_ptr() as u64);
        let mut values = Vec::new();
        let (mut round, mut redone, mut attempt) = (0u64, 0usize, 0usize);
        // The least disturbed attempt of the current repetition: (value, lost).
        let mut best: Option<(f64, f64)> = None;
        let failure = loop {
            round += 1;
            seg.barrier();
            let stop = AtomicBool::new(false);
            let (produced, mine) = std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(ms));
                    stop.store(true, Ordering::Relaxed);
                });
                let clock = Stopwatch::start();
                let r = produce(&heap, ring, layout, &stop);
                (r, clock.stop())
            });
            let (frees, theirs) = ring.wait_report(round);
            let produced = match produced {
                Ok(n) if n == frees => n,
                Ok(n) => break Some(format!("rank 1 freed {frees} blocks, rank 0 sent {n}")),
                Err(e) => break Some(format!("rank 0: {e}")),
            };
            let value = rate((produced, theirs));
            let lost = mine.lost.max(theirs.lost);
            if round > 1 {
                // Round 1 is the warm-up.
                if best.is_none_or(|(_, l)| lost < l) {
                    best = Some((value, lost));
                }
                if lost <= MAX_LOST || attempt >= redo {
                    values.push(best.map_or(value, |b| b.0));
                    best = None;
                    attempt = 0;
                } else {
                    attempt += 1;
                    redone += 1;
                }
            }
            let more = values.len() < reps;
            ring.decide(round, more);
            if !more {
                break None;
            }
        };
        if let Some(e) = failure {
            ring.decide(round, false);
            return Err(BenchError::Failed(e));
        }
        seg.barrier(); // rank 1 is done with the ring
        let values: Vec<String> = values.iter().map(|v| format!("{v:.6}")).collect();
        println!(
            "{RESULT_TAG} size={size} redone={redone} values={}",
            values.join(",")
        );
        // SAFETY: the ring was allocated above with this layout; rank 1 no
        // longer uses it (barrier above).
        unsafe { heap.free(p.as_ptr(), Layout::new::<Ring>()) };
    } else if seg.local_rank() == 1 {
        let addr = seg.wait_lookup(0, RING_SLOT) as usize;
        if hmpi::owner_of(addr as *const u8) != Some(0) || addr % 64 != 0 {
            return Err(BenchError::Failed(format!(
                "registry slot {RING_SLOT} holds {addr:#x}, not a ring in rank 0's arena"
            )));
        }
        // SAFETY: rank 0 published the address of an initialised ring in
        // its arena (checked above), mapped at the same address here; it
        // stays allocated until the final barrier below.
        let ring: &Ring = unsafe { &*(addr as *const Ring) };
        let mut round = 0u64;
        loop {
            round += 1;
            seg.barrier();
            let clock = Stopwatch::start();
            let n = consume(&heap, ring, layout);
            ring.report_round(round, n, clock.stop());
            if ring.aborted() {
                return Ok(()); // rank 0 reports the failure
            }
            if !ring.wait_decision(round) {
                break;
            }
        }
        seg.barrier();
    }
    Ok(())
}

/// Runs the two-rank measurement for `size`; returns the repetitions'
/// values and how many disturbed attempts were run again.
fn measure_xrank(size: usize, reps: usize, ms: u64) -> Result<(Vec<f64>, usize), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let pinned = allowed_cpus().len() >= 2;
    let job = WorkerArgs {
        size,
        reps,
        ms,
        redo: redo_limit(2),
    };
    let attempts = (reps * (job.redo + 1) + 1) as u64;
    let timeout = Duration::from_millis(attempts * (ms + 200) * 2) + Duration::from_secs(60);
    let bind = if pinned { Bind::Core } else { Bind::None };
    let report = Launcher::new(exe, 2)
        .args(job.to_args())
        .bind(bind)
        .capture_output(true)
        .timeout(timeout)
        .run()
        .map_err(|e| format!("launching 2 ranks failed: {e}"))?;
    let describe = || {
        let mut s = String::new();
        for r in &report.ranks {
            let _ = write!(
                s,
                "\n  rank {} {:?}: {}",
                r.rank,
                r.status,
                String::from_utf8_lossy(&r.stderr).trim()
            );
        }
        s
    };
    if !report.success() {
        return Err(format!("the 2-rank job failed:{}", describe()));
    }
    let out = report
        .ranks
        .iter()
        .find(|r| r.rank == 0)
        .map(|r| String::from_utf8_lossy(&r.stdout).into_owned())
        .unwrap_or_default();
    parse_result(&out, size).ok_or_else(|| {
        format!(
            "rank 0 printed no result line for size {size}; its stdout: {:?}{}",
            out.trim(),
            describe()
        )
    })
}

/// Finds `hmpi-bench-result size=<size> redone=<k> values=a,b,…` in `out`.
fn parse_result(out: &str, size: usize) -> Option<(Vec<f64>, usize)> {
    out.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != RESULT_TAG {
            return None;
        }
        let s: usize = words.next()?.strip_prefix("size=")?.parse().ok()?;
        let redone: usize = words.next()?.strip_prefix("redone=")?.parse().ok()?;
        let values = words.next()?.strip_prefix("values=")?;
        let v: Option<Vec<f64>> = values.split(',').map(|x| x.parse().ok()).collect();
        let v = v.filter(|v| !v.is_empty())?;
        (s == size).then_some((v, redone))
    })
}

// ---------------------------------------------------------------------------
// The parent side.

fn sizes(opts: &Options) -> Result<Vec<usize>, BenchError> {
    let (lo, hi) = match opts.sizes {
        Some(r) => r,
        None if opts.quick => return Ok(QUICK_SIZES.to_vec()),
        None => DEFAULT_SIZES,
    };
    if hi > MAX_SIZE {
        return Err(BenchError::Usage(format!(
            "--sizes: alloc measures sizes up to {}, not {}",
            fmt_size(MAX_SIZE),
            hi
        )));
    }
    let v: Vec<usize> = (0..usize::BITS)
        .map(|k| 1usize << k)
        .filter(|&s| s >= lo && s <= hi)
        .collect();
    if v.is_empty() {
        return Err(BenchError::Usage(format!(
            "--sizes: alloc measures powers of two, and there is none from {lo} to {hi}"
        )));
    }
    Ok(v)
}

fn summarize_point(samples: &[Sample], workload: &str, threads: u32, size: usize) -> String {
    let parts: Vec<String> = samples
        .iter()
        .filter(|s| s.workload == workload && s.threads == threads && s.size == size)
        .map(|s| format!("{} {:.2}", s.backend, s.value))
        .collect();
    parts.join(", ")
}

/// glibc's adaptive thresholds: see the module documentation.
fn prime_glibc(largest: usize) {
    let n = largest.max(1 << 20);
    // SAFETY: malloc has no preconditions; the block (or null) is freed once.
    unsafe {
        let p = libc::malloc(n);
        if !p.is_null() {
            (p as *mut u8).write_volatile(1);
        }
        libc::free(p);
    }
}

/// Measures one point (one size, one job kind) of the in-process backends,
/// which take turns within each repetition; returns each backend's values
/// (or error) and the attempts redone.
fn measure_point(
    team: &Team,
    job: impl Fn(Backend) -> Job,
    reps: usize,
    time: Duration,
) -> (Vec<Result<Vec<f64>, String>>, usize) {
    let mut out: Vec<Result<Vec<f64>, String>> = vec![Ok(Vec::new()); Backend::ALL.len()];
    let mut redone = 0;
    for rep in 0..=reps {
        for (bi, &b) in Backend::ALL.iter().enumerate() {
            let Ok(values) = &mut out[bi] else { continue };
            let r = if rep == 0 {
                // The warm-up: its value is not kept, disturbed or not.
                round_value(job(b), &team.round(job(b), time)).map(|(v, _)| (v, 0))
            } else {
                measured_round(team, job(b), time)
            };
            match r {
                Ok((v, redo)) => {
                    redone += redo;
                    if rep > 0 {
                        values.push(v);
                    }
                }
                Err(e) => out[bi] = Err(e),
            }
        }
    }
    (out, redone)
}

fn redone_note(redone: usize) -> String {
    if redone == 0 {
        String::new()
    } else {
        format!(" ({redone} disturbed repetition(s) run again)")
    }
}

fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    crate::system_allocator();
    let sizes = sizes(opts)?;
    let reps = opts
        .reps
        .unwrap_or(if opts.quick { QUICK_REPS } else { DEFAULT_REPS });
    let ms = opts
        .ms
        .unwrap_or(if opts.quick { QUICK_MS } else { DEFAULT_MS });
    let time = Duration::from_millis(ms);
    let _segment = hmpi::attach_from_env().map_err(|e| {
        BenchError::Failed(format!("cannot attach to a node heap for shmheap: {e}"))
    })?;
    prime_glibc(sizes.iter().copied().max().unwrap_or(0));
    let rounds = (reps + 1) * sizes.len();
    progress.line(format_args!(
        "alloc: {} sizes, {reps} reps of {ms} ms (+1 warm-up); about {:.0} s \
         (more if other processes disturb repetitions)",
        sizes.len(),
        (rounds * (3 * 2 + 3 + 1)) as f64 * ms as f64 / 1e3 * 1.1
    ));

    let mut samples = Vec::new();
    let mut failures = Vec::new();
    let mut total_redone = 0;
    let mut fail = |what: String| {
        progress.line(format_args!("FAILED: {what}"));
        failures.push(what);
    };

    // alloc-free: 1 and 2 threads; cross-free: two threads of this process.
    let in_process: [(&str, u32); 3] = [(ALLOC_FREE, 1), (ALLOC_FREE, 2), (CROSS_FREE, 2)];
    for (workload, threads) in in_process {
        with_team(threads as usize, |team| {
            for &size in &sizes {
                let job = |b| {
                    if workload == ALLOC_FREE {
                        Job::AllocFree(b, size)
                    } else {
                        Job::CrossFree(b, size)
                    }
                };
                let (results, redone) = measure_point(team, job, reps, time);
                total_redone += redone;
                for (r, b) in results.into_iter().zip(Backend::ALL) {
                    match r {
                        Ok(values) => samples.extend(Sample::from_reps(
                            workload,
                            b.name(),
                            threads,
                            size,
                            UNIT,
                            &values,
                        )),
                        Err(e) => fail(format!(
                            "{workload} {} threads={threads} size={size}: {e}",
                            b.name()
                        )),
                    }
                }
                progress.line(format_args!(
                    "{workload} threads={threads} size={}: {}{}",
                    fmt_size(size),
                    summarize_point(&samples, workload, threads, size),
                    redone_note(redone)
                ));
            }
        });
    }

    // cross-free across two ranks.
    for &size in &sizes {
        let note = match measure_xrank(size, reps, ms) {
            Ok((v, redone)) => {
                total_redone += redone;
                samples.extend(Sample::from_reps(CROSS_FREE, XRANK, 2, size, UNIT, &v));
                redone_note(redone)
            }
            Err(e) => {
                fail(format!("{CROSS_FREE} {XRANK} size={size}: {e}"));
                String::new()
            }
        };
        progress.line(format_args!(
            "{CROSS_FREE} ranks=2 size={}: {}{note}",
            fmt_size(size),
            report::find(&samples, CROSS_FREE, XRANK, 2, size).map_or_else(
                || "failed".to_owned(),
                |s| format!("{XRANK} {:.2}", s.value)
            )
        ));
    }

    let mut text = render(&samples);
    if total_redone > 0 {
        let _ = writeln!(
            text,
            "{total_redone} repetition(s) were run again because another process took \
             more than {:.0}% of a measuring thread's time",
            MAX_LOST * 100.0
        );
    }
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// Tables and the target summary.
fn render(samples: &[Sample]) -> String {
    let mut out = String::new();
    out += &report::render_table(
        samples,
        ALLOC_FREE,
        &["shmheap", "glibc", "mimalloc"],
        &[("shmheap", "glibc"), ("shmheap", "mimalloc")],
    );
    out += "\n";
    out += &target_summary(samples);
    out += "\n";
    out += &report::render_table(
        samples,
        CROSS_FREE,
        &["shmheap", "glibc", "mimalloc", XRANK],
        &[
            ("shmheap", "glibc"),
            ("shmheap", "mimalloc"),
            (XRANK, "glibc"),
            (XRANK, "mimalloc"),
        ],
    );
    out += "(cross-free: shmheap/glibc/mimalloc = two threads of one process; \
            shmheap-xrank = two ranks, every free a remote free)\n";
    out
}

/// The alloc-free targets: shmheap ≥ 1.0× glibc and ≥ 0.8× mimalloc at
/// every size (and thread count).
fn target_summary(samples: &[Sample]) -> String {
    let mut out = String::new();
    for (peer, target) in [("glibc", 1.0), ("mimalloc", 0.8)] {
        let mut worst: Option<(f64, u32, usize)> = None;
        let mut missed = Vec::new();
        let mut unmeasured = 0;
        for (threads, size) in report::rows(samples, ALLOC_FREE) {
            match report::ratio(samples, ALLOC_FREE, threads, size, "shmheap", peer) {
                Some(r) => {
                    if worst.is_none_or(|(w, _, _)| r < w) {
                        worst = Some((r, threads, size));
                    }
                    if r < target {
                        missed.push(format!("{} ({threads}T: {r:.2}x)", fmt_size(size)));
                    }
                }
                None => unmeasured += 1,
            }
        }
        let Some((w, wt, ws)) = worst else {
            let _ = writeln!(out, "alloc-free shmheap/{peer}: not measured");
            continue;
        };
        let verdict = if missed.is_empty() && unmeasured == 0 {
            "target met".to_owned()
        } else if missed.is_empty() {
            format!("target met where measured ({unmeasured} point(s) not measured)")
        } else {
            format!("target missed at sizes {}", missed.join(", "))
        };
        let _ = writeln!(
            out,
            "alloc-free min shmheap/{peer} = {w:.2}x ({wt} thread(s), {}); target >= {target:.1}x: {verdict}",
            fmt_size(ws)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_passes_values_in_order_between_threads() {
        let ring = Box::new(Ring::new());
        let n = 10 * RING_CAP as u64 + 7;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut tx = Producer::new(&ring, 16);
                for v in 1..=n {
                    tx.push(v);
                }
                tx.push(0);
            });
            let mut rx = Consumer::new(&ring);
            for v in 1..=n {
                assert_eq!(rx.pop(), v);
            }
            assert_eq!(rx.pop(), 0);
        });
    }

    #[test]
    fn result_lines_parse() {
        let out = "noise\nhmpi-bench-result size=64 redone=3 values=1.5,2.5\n";
        assert_eq!(parse_result(out, 64), Some((vec![1.5, 2.5], 3)));
        assert_eq!(parse_result(out, 128), None);
        let bad = "hmpi-bench-result size=64 redone=0 values=x";
        assert_eq!(parse_result(bad, 64), None);
    }

    #[test]
    fn worker_args_round_trip() {
        let job = WorkerArgs {
            size: 4096,
            reps: 3,
            ms: 50,
            redo: 2,
        };
        let args = job.to_args();
        assert_eq!(args[..2], ["--worker", WORKER]);
        assert_eq!(WorkerArgs::parse(&args[2..]).unwrap(), job);
        for bad in [
            "--size 0 --reps 1 --ms 1 --redo 0",
            "--size 16 --reps 1 --ms 1",
            "--size 16 --reps 1 --ms 1 --redo 9",
            "--size x",
        ] {
            let v: Vec<String> = bad.split(' ').map(str::to_owned).collect();
            assert!(WorkerArgs::parse(&v).is_err(), "{bad}");
        }
    }

    #[test]
    fn size_ranges() {
        let o = |sizes| Options {
            sizes: Some(sizes),
            ..Options::default()
        };
        assert_eq!(sizes(&o((16, 64))).unwrap(), vec![16, 32, 64]);
        assert_eq!(sizes(&o((17, 40))).unwrap(), vec![32]);
        assert!(sizes(&o((33, 63))).is_err());
        assert!(sizes(&o((1, 1 << 30))).is_err());
        let d = sizes(&Options::default()).unwrap();
        assert_eq!((d.len(), d[0], d[d.len() - 1]), (17, 16, 1 << 20));
    }

    #[test]
    fn alloc_free_loops_stop() {
        let stop = AtomicBool::new(true);
        for b in Backend::ALL.into_iter().filter(|&b| b != Backend::ShmHeap) {
            assert_eq!(alloc_free(b, 64, &stop), Ok(BATCH as u64));
        }
    }
}
