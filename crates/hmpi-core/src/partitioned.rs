//! Partitioned point-to-point communication (MPI 4.0 §4.2:
//! `MPI_Psend_init`, `MPI_Precv_init`, `MPI_Pready`, `MPI_Pready_range`,
//! `MPI_Pready_list`, `MPI_Parrived`): one message filled and consumed in
//! partitions, typically by many threads, started and completed like a
//! persistent request.
//!
//! # How it uses the shared heap
//! At its first start a receive allocates a **channel** in its rank's
//! arena: a header, one arrival counter per receive partition and, when the
//! receive buffer itself is not in the node heap (or the datatype is not
//! one run of bytes), a staging area. It sends the channel's address once
//! to the sender, in the communicator's internal context (never matched by
//! point-to-point receives), with the tag, its byte total and its place
//! among the partitioned receives this process made for that sender,
//! communicator and tag. The sender's first start takes the message of the
//! same place (the `k`th partitioned send to a rank, communicator and tag
//! matches the `k`th partitioned receive made there for it: the order of
//! the initialization calls, as MPI specifies, however the starts are
//! ordered) and checks that both sides move the same number of bytes; the
//! partition counts may differ.
//!
//! From then on no message travels: when a send partition is ready
//! ([`SendCore::pready`], from any thread) and the receiver has started the
//! same round, the thread that marked it copies it straight into the
//! receiver's buffer (or the staging area) and adds the bytes it wrote to
//! the arrival counter of every receive partition it overlaps. A receive
//! partition has arrived in round `k` once its counter reaches `k` times its
//! size ([`RecvCore::parrived`] reads one counter), and a round of the
//! receive completes when all of them have. Partitions marked ready before
//! the receiver started the round are copied by the next call on the send
//! (another `pready`, a test or the wait) or by any partitioned test, wait
//! or unsuccessful `parrived` of this process, which sweeps its sends in
//! flight: a rank that waits for its own partitioned receive first still
//! sends.
//!
//! # Orderings
//! * the receiver's start stores its round number with Release; a sender
//!   copies only after reading that number with Acquire, so the receiver's
//!   reads of the previous round's data happen before the new writes;
//! * a send partition's ready mark is a Release store after the program's
//!   writes to it; the thread that copies it reads the mark with Acquire;
//! * a copy is published by a Release `fetch_add` on the arrival counters;
//!   the receiver reads them with Acquire before it reads the data (the
//!   `fetch_add`s form one release sequence, so the last value read carries
//!   every copy before it).
//!
//! The channel is reference counted (both sides hold it) and freed by the
//! side that lets go of it last, wherever that is.
//!
//! # Rust API
//! [`PartitionedSend`] hands out its partitions as disjoint `&mut` slices
//! ([`PartitionedSend::partitions_mut`]), one [`Partition`] each, which
//! threads fill and mark ready ([`Partition::ready`], or by dropping it).
//! [`PartitionedRecv`] borrows its buffer for a [`Scope`], which waits for a
//! round in flight at its end, so the sender never writes into memory the
//! program got back; [`PartitionedRecv::arrived`] polls one partition.
//!
//! ```no_run
//! use hmpi_core::partitioned::{PartitionedRecv, PartitionedSend};
//! use hmpi_core::traits::*;
//! let universe = hmpi_core::initialize().unwrap();
//! let world = universe.world();
//! if world.rank() == 0 {
//!     let mut data = vec![0u8; 4096];
//!     let mut send = PartitionedSend::new(&world, &mut data[..], 4, 1, 7).unwrap();
//!     send.start().unwrap();
//!     std::thread::scope(|s| {
//!         for mut p in send.partitions_mut().unwrap() {
//!             s.spawn(move || {
//!                 let i = p.index() as u8;
//!                 p.fill(i); // then ready when dropped
//!             });
//!         }
//!     });
//!     send.wait().unwrap();
//! } else if world.rank() == 1 {
//!     let mut inbox = vec![0u8; 4096];
//!     hmpi_core::request::scope(|scope| {
//!         let mut recv = PartitionedRecv::new(scope, &world, &mut inbox[..], 2, 0, 7).unwrap();
//!         recv.start().unwrap();
//!         while !recv.arrived(0).unwrap() {}
//!         recv.wait().unwrap();
//!     });
//!     assert_eq!(inbox[4095], 3);
//! }
//! ```

use crate::comm::SimpleCommunicator;
use crate::datatype::{BufferMut, Datatype};
use crate::environment::endpoint;
use crate::error::{Error, Result};
use crate::point_to_point::Status;
use crate::raw::{self, Route, Traffic};
use crate::request::Scope;
use shmheap::sync::futex::Backoff;
use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

/// The internal-context tag of the message that introduces a receive's
/// channel to its sender (the collectives' internal tags are small).
const HELLO_TAG: i32 = vci::TAG_UB;

/// Words of the introduction: tag, channel address, byte total, place.
const HELLO_WORDS: usize = 4;

/// The start of a channel in the node heap; `parts` arrival counters
/// follow it, then the staging area (if any).
#[repr(C)]
struct Header {
    /// Holders (2: the receive and its sender); the last one frees it.
    refs: AtomicU32,
    /// Set by the sender when the byte totals differ.
    failed: AtomicU32,
    /// The receiver's rounds started.
    round: AtomicU64,
    /// Bytes of the allocation (to free it).
    bytes: u64,
    /// Where the sender writes (the receive buffer or the staging area).
    data: u64,
    /// Bytes of one message.
    total: u64,
    /// Receive partitions (arrival counters).
    parts: u64,
    /// Bytes of one receive partition.
    part_bytes: u64,
}

/// Offset of the arrival counters from the header (one cache line).
const COUNTERS: usize = 64;

/// One side's hold on a channel.
struct Chan(NonNull<Header>);

// SAFETY: the channel lives in the node heap, shared by design; every
// field another thread or process writes is atomic, the rest is written
// before the channel's address is published and never again.
unsafe impl Send for Chan {}
// SAFETY: as for `Send`.
unsafe impl Sync for Chan {}

impl Chan {
    /// A zeroed channel in this rank's arena for a message of `total`
    /// bytes in `parts` partitions; writes go to `direct` or, if `None`,
    /// to a staging area in the channel.
    fn create(total: usize, parts: usize, direct: Option<*mut u8>) -> Result<Chan> {
        let counters = parts
            .checked_mul(8)
            .and_then(|c| c.checked_add(COUNTERS))
            .ok_or_else(too_large)?;
        let staging_at = counters.next_multiple_of(64);
        let bytes = match direct {
            Some(_) => counters,
            None => staging_at.checked_add(total).ok_or_else(too_large)?,
        };
        let layout = Layout::from_size_align(bytes, 64).map_err(|_| too_large())?;
        let p = shmheap::ShmHeap::new().try_alloc_zeroed(layout)?;
        let h = p.cast::<Header>();
        let data = match direct {
            Some(d) => d as usize as u64,
            // SAFETY: inside the allocation.
            None => (unsafe { p.as_ptr().add(staging_at) }) as usize as u64,
        };
        // SAFETY: a fresh, zeroed, 64-aligned block larger than the header;
        // nobody else knows its address yet.
        unsafe {
            h.as_ptr().write(Header {
                refs: AtomicU32::new(2),
                failed: AtomicU32::new(0),
                round: AtomicU64::new(0),
                bytes: bytes as u64,
                data,
                total: total as u64,
                parts: parts as u64,
                part_bytes: (total / parts) as u64,
            })
        };
        Ok(Chan(h))
    }

    /// The channel at `addr` that a receive introduced.
    ///
    /// # Safety
    /// `addr` came from [`Chan::create`] of a receive that counted this
    /// hold in `refs`.
    unsafe fn attach(addr: u64) -> Result<Chan> {
        NonNull::new(addr as usize as *mut Header)
            .filter(|_| shmheap::is_shared(addr as usize as *const u8))
            .map(Chan)
            .ok_or_else(|| Error::Internal(format!("partitioned channel {addr:#x} not shared")))
    }

    fn header(&self) -> &Header {
        // SAFETY: live while any hold (this one) remains.
        unsafe { self.0.as_ref() }
    }

    fn counter(&self, j: usize) -> &AtomicU64 {
        debug_assert!((j as u64) < self.header().parts);
        // SAFETY: `j < parts`: the counter lies inside the allocation,
        // 8-aligned after the 64-byte header line.
        unsafe {
            &*self
                .0
                .as_ptr()
                .cast::<u8>()
                .add(COUNTERS)
                .cast::<AtomicU64>()
                .add(j)
        }
    }

    fn data(&self) -> *mut u8 {
        self.header().data as usize as *mut u8
    }

    fn addr(&self) -> u64 {
        self.0.as_ptr() as usize as u64
    }
}

impl Drop for Chan {
    fn drop(&mut self) {
        let h = self.header();
        // SYNC POINT: AcqRel: Release publishes this side's last accesses;
        // the last holder's Acquire sees the other's before it frees.
        if h.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(l) = Layout::from_size_align(h.bytes as usize, 64) {
                // SAFETY: allocated by `ShmHeap` with this layout in
                // `create`; nobody holds it any more. The heap routes a
                // block freed by another rank to its owner's arena.
                unsafe { shmheap::ShmHeap::new().dealloc(self.0.as_ptr().cast(), l) };
            }
        }
    }
}

fn too_large() -> Error {
    Error::Arg {
        reason: "partitioned message too large".into(),
    }
}

/// How one side's buffer holds its partitions.
#[derive(Debug, Clone)]
pub enum PartLayout {
    /// Plain bytes: partition `i` is bytes `i*len..(i+1)*len`.
    Bytes,
    /// `count` elements of `ty` per partition, partition `i` at
    /// `i * count * extent` (packed on the way: `count * size` bytes).
    Typed {
        /// The datatype.
        ty: Datatype,
        /// Elements per partition.
        count: usize,
    },
}

impl PartLayout {
    /// The address of partition `i` of a buffer at `base` with
    /// `part_bytes` bytes a partition.
    fn at(&self, base: usize, i: usize, part_bytes: usize) -> usize {
        match self {
            PartLayout::Bytes => base.wrapping_add(i * part_bytes),
            PartLayout::Typed { ty, count } => {
                base.wrapping_add((i as isize * *count as isize * ty.extent()) as usize)
            }
        }
    }
}

/// Which partitioned operation of one side a message belongs to:
/// (internal context, the peer's world rank, tag, place).
type Key = (u32, i32, i32, u64);

/// The introductions received and not yet claimed.
type Hellos = HashMap<Key, [u64; HELLO_WORDS]>;

fn hellos() -> &'static Mutex<Hellos> {
    static H: OnceLock<Mutex<Hellos>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The place of a new partitioned send (`send`) or receive for `peer`,
/// `tag` in `ctx`: how many were made before it.
fn place(ctx: u32, peer: i32, tag: i32, send: bool) -> u64 {
    type Made = HashMap<(u32, i32, i32, bool), u64>;
    static M: OnceLock<Mutex<Made>> = OnceLock::new();
    let mut m = M
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let n = m.entry((ctx, peer, tag, send)).or_insert(0);
    *n += 1;
    *n - 1
}

/// Takes the introduction of the receive at `place` for `peer`, `tag` in
/// `ctx`, receiving what has arrived meanwhile (of any tag and place)
/// into the table.
fn take_hello(ctx: u32, peer: i32, tag: i32, place: u64) -> Result<Option<[u64; HELLO_WORDS]>> {
    let mut t = hellos().lock().unwrap_or_else(|p| p.into_inner());
    let ep = endpoint()?;
    while ep.iprobe(peer, HELLO_TAG, ctx)?.is_some() {
        let mut b = [0u8; HELLO_WORDS * 8];
        let mut st = raw::Status::empty();
        ep.recv(&mut b, peer, HELLO_TAG, ctx, &mut st)?;
        let mut w = [0u64; HELLO_WORDS];
        for (x, c) in w.iter_mut().zip(b.chunks_exact(8)) {
            *x = u64::from_ne_bytes(c.try_into().unwrap_or_default());
        }
        t.insert((ctx, peer, w[0] as i32, w[3]), w);
    }
    Ok(t.remove(&(ctx, peer, tag, place)))
}

/// The sends of this process with a round in flight, which every
/// partitioned wait or test moves on: partitions marked ready before their
/// receiver started are copied even while the program waits for something
/// else (a partitioned receive of its own, say).
fn sweep_list() -> &'static Mutex<Vec<Weak<SendCore>>> {
    static L: Mutex<Vec<Weak<SendCore>>> = Mutex::new(Vec::new());
    &L
}

/// Copies what the sends in flight of this process can copy now.
fn sweep() {
    let live: Vec<Arc<SendCore>> = {
        let mut l = sweep_list().lock().unwrap_or_else(|p| p.into_inner());
        l.retain(|w| w.upgrade().is_some_and(|s| s.is_active()));
        l.iter().filter_map(Weak::upgrade).collect()
    };
    for s in live {
        // Its own wait or test reports its errors.
        let _ = s.progress();
    }
}

/// Checks a partition count and elements-per-partition against a buffer
/// of `len` bytes; bytes of one partition.
fn check_parts(partitions: usize, part_bytes: usize) -> Result<usize> {
    if partitions == 0 {
        return Err(Error::Arg {
            reason: "a partitioned operation needs at least one partition".into(),
        });
    }
    partitions.checked_mul(part_bytes).ok_or_else(too_large)?;
    Ok(part_bytes)
}

fn bad_partition(i: usize, n: usize) -> Error {
    Error::Arg {
        reason: format!("partition {i} of a partitioned request with {n} partitions"),
    }
}

fn inactive(what: &str) -> Error {
    Error::Arg {
        reason: format!("{what} on an inactive partitioned request"),
    }
}

fn active(what: &str) -> Error {
    Error::Arg {
        reason: format!("{what} on a partitioned request that is still active"),
    }
}

fn mismatch(send: u64, recv: u64) -> Error {
    Error::Arg {
        reason: format!(
            "partitioned send of {send} bytes matched a partitioned receive of {recv} bytes"
        ),
    }
}

/// `ProcFailed` if the peer (`rank` in the operation's communicator) has
/// ended without finalizing.
fn peer_check(peer: Route, rank: i32) -> Result<()> {
    if let Route::Local(w) = peer {
        if endpoint()?.peer_failed(w) {
            return Err(Error::ProcFailed { rank, world: w });
        }
    }
    Ok(())
}

/// The sending side of a partitioned operation on raw memory (what
/// `MPI_Psend_init` makes); [`PartitionedSend`] is the safe form.
pub struct SendCore {
    comm: SimpleCommunicator,
    peer: Route,
    dest: i32,
    tag: i32,
    base: usize,
    layout: PartLayout,
    parts: usize,
    part_bytes: usize,
    /// Its place among this process's partitioned sends to `dest`, `tag`.
    place: u64,
    /// The channel once matched.
    chan: OnceLock<Chan>,
    /// Rounds started (0: never).
    round: AtomicU64,
    /// Whether a round is in flight.
    active: AtomicBool,
    /// Per partition: the round in which it was marked ready.
    ready: Box<[AtomicU64]>,
    /// Per partition: the round in which its copy was claimed.
    claimed: Box<[AtomicU64]>,
    /// Partitions of the current round not yet copied.
    left: AtomicUsize,
    /// Whether the buffer may still be read (see [`SendCore::close`]):
    /// every copy holds the read side.
    open: RwLock<bool>,
}

impl std::fmt::Debug for SendCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendCore")
            .field("dest", &self.dest)
            .field("tag", &self.tag)
            .field("partitions", &self.parts)
            .field("round", &self.round.load(Ordering::Relaxed))
            .finish()
    }
}

impl SendCore {
    /// A partitioned send (`MPI_Psend_init`) of `partitions` partitions of
    /// `part_bytes` bytes each, read from `base` as `layout` says, to
    /// `dest` with `tag`; inactive. `dest` (a rank or `PROC_NULL`), `tag`
    /// and the partition count are checked now.
    ///
    /// # Safety
    /// Every partition is readable at `base` as `layout` describes while
    /// the object exists, and the program does not change a partition
    /// between marking it ready and the completion of its round.
    pub unsafe fn new(
        comm: &SimpleCommunicator,
        base: *const u8,
        layout: PartLayout,
        partitions: usize,
        part_bytes: usize,
        dest: i32,
        tag: i32,
    ) -> Result<Arc<SendCore>> {
        not_endpoints(comm)?;
        raw::check_send_tag(tag)?;
        let peer = raw::route(comm, dest)?;
        let part_bytes = check_parts(partitions, part_bytes)?;
        let place = match peer {
            Route::Local(w) => place(comm.internal_context(), w, tag, true),
            _ => 0,
        };
        Ok(Arc::new(SendCore {
            place,
            comm: comm.clone(),
            peer,
            dest,
            tag,
            base: base as usize,
            layout,
            parts: partitions,
            part_bytes,
            chan: OnceLock::new(),
            round: AtomicU64::new(0),
            active: AtomicBool::new(false),
            ready: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
            claimed: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
            left: AtomicUsize::new(0),
            open: RwLock::new(true),
        }))
    }

    /// Stops every further read of the buffer (its owner lets go of it),
    /// waiting for a copy in progress on another thread.
    pub fn close(&self) {
        *self.open.write().unwrap_or_else(|p| p.into_inner()) = false;
    }

    /// Partitions.
    pub fn partitions(&self) -> usize {
        self.parts
    }

    /// Whether a round is in flight.
    pub fn is_active(&self) -> bool {
        // Relaxed: the program's own state, changed by its start and
        // completion calls, which it orders itself.
        self.active.load(Ordering::Relaxed)
    }

    /// Whether every partition of the round in flight has been marked
    /// ready: only then can the round complete without more calls.
    pub fn all_ready(&self) -> bool {
        // Relaxed: see `start`; a mark made by another thread that this
        // one has not synchronised with may be missed, which only makes
        // the answer "not yet".
        let r = self.round.load(Ordering::Relaxed);
        self.ready.iter().all(|f| f.load(Ordering::Relaxed) == r)
    }

    /// Starts a round (`MPI_Start`).
    pub fn start(self: &Arc<Self>) -> Result<()> {
        if self.is_active() {
            return Err(active("start"));
        }
        if let Route::Local(_) = self.peer {
            let mut l = sweep_list().lock().unwrap_or_else(|p| p.into_inner());
            l.retain(|w| w.upgrade().is_some_and(|s| s.is_active()));
            l.push(Arc::downgrade(self));
        }
        self.left.store(self.parts, Ordering::Relaxed);
        // Relaxed: only the starting thread changes `round`; threads that
        // mark partitions learn of the start from the program's own
        // synchronisation (they are handed the request after the start).
        self.round.fetch_add(1, Ordering::Relaxed);
        self.active.store(true, Ordering::Relaxed);
        self.progress()?;
        Ok(())
    }

    /// Marks partition `i` ready (`MPI_Pready`), copying it at once if the
    /// receiver is ready for it.
    pub fn pready(&self, i: usize) -> Result<()> {
        self.mark(i)?;
        self.progress()
    }

    /// Marks partitions `lo..=hi` ready (`MPI_Pready_range`).
    pub fn pready_range(&self, lo: usize, hi: usize) -> Result<()> {
        if lo > hi || hi >= self.parts {
            return Err(Error::Arg {
                reason: format!(
                    "partition range {lo}..={hi} of a partitioned request with {} partitions",
                    self.parts
                ),
            });
        }
        for i in lo..=hi {
            self.mark(i)?;
        }
        self.progress()
    }

    /// Marks the partitions of `list` ready (`MPI_Pready_list`).
    pub fn pready_list(&self, list: &[usize]) -> Result<()> {
        if let Some(&i) = list.iter().find(|&&i| i >= self.parts) {
            return Err(bad_partition(i, self.parts));
        }
        for &i in list {
            self.mark(i)?;
        }
        self.progress()
    }

    fn mark(&self, i: usize) -> Result<()> {
        if !self.is_active() {
            return Err(inactive("marking a partition ready"));
        }
        let Some(flag) = self.ready.get(i) else {
            return Err(bad_partition(i, self.parts));
        };
        // Relaxed: see `start`.
        let r = self.round.load(Ordering::Relaxed);
        // SYNC POINT: Release publishes the program's writes to the
        // partition to whichever thread copies it (Acquire in `progress`).
        if flag.swap(r, Ordering::Release) == r {
            return Err(Error::Arg {
                reason: format!("partition {i} is marked ready twice in one round"),
            });
        }
        Ok(())
    }

    /// Matches the receive once, and copies every ready partition the
    /// receiver can take now.
    fn progress(&self) -> Result<()> {
        let open = self.open.read().unwrap_or_else(|p| p.into_inner());
        if !*open {
            return Ok(());
        }
        let Route::Local(peer) = self.peer else {
            // PROC_NULL: nothing to copy; a ready partition is done.
            self.settle_null();
            return Ok(());
        };
        let chan = match self.chan.get() {
            Some(c) => c,
            None => {
                let Some(w) = take_hello(self.comm.internal_context(), peer, self.tag, self.place)?
                else {
                    return Ok(());
                };
                // SAFETY: the receive that sent this introduction counted
                // our hold in `refs` and lets go only of its own.
                let c = unsafe { Chan::attach(w[1]) }?;
                let total = self.parts as u64 * self.part_bytes as u64;
                if c.header().total != total {
                    // Relaxed: the flag alone is the message; the receiver
                    // reads nothing else because of it.
                    c.header().failed.store(1, Ordering::Relaxed);
                }
                // Another thread may have matched at the same time: only
                // one of them took the introduction (under the table's
                // lock), so the set cannot fail.
                let _ = self.chan.set(c);
                self.chan
                    .get()
                    .ok_or_else(|| Error::Internal("partitioned channel lost".into()))?
            }
        };
        let h = chan.header();
        let total = self.parts as u64 * self.part_bytes as u64;
        if h.total != total {
            return Err(mismatch(total, h.total));
        }
        // Relaxed: see `start`.
        let r = self.round.load(Ordering::Relaxed);
        // SYNC POINT: Acquire pairs with the receiver's Release store at
        // its start: its reads of the last round are over before we write.
        if h.round.load(Ordering::Acquire) < r {
            return Ok(());
        }
        for i in 0..self.parts {
            // SYNC POINT: Acquire pairs with the Release of `mark`.
            if self.ready[i].load(Ordering::Acquire) != r {
                continue;
            }
            // Relaxed: the claim only decides who copies; the data's
            // visibility comes from `ready` above.
            if self.claimed[i]
                .compare_exchange(r - 1, r, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            self.copy(chan, i)?;
            // SYNC POINT: Release: the copy (and the counters) happen
            // before the completion that reads `left` with Acquire.
            self.left.fetch_sub(1, Ordering::Release);
        }
        Ok(())
    }

    fn settle_null(&self) {
        let r = self.round.load(Ordering::Relaxed);
        for i in 0..self.parts {
            if self.ready[i].load(Ordering::Acquire) == r
                && self.claimed[i]
                    .compare_exchange(r - 1, r, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                self.left.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Copies partition `i` into the channel and counts its bytes.
    fn copy(&self, chan: &Chan, i: usize) -> Result<()> {
        let h = chan.header();
        let (a, b) = (i * self.part_bytes, (i + 1) * self.part_bytes);
        if a == b {
            return Ok(());
        }
        // SAFETY: bytes `a..b` of the channel's destination are ours to
        // write in this round (the receiver started it and reads them only
        // after the counters say so); the partition is readable (the
        // constructor's contract) and not changed while ready.
        unsafe {
            let dst = chan.data().add(a);
            let src = self.layout.at(self.base, i, self.part_bytes);
            match &self.layout {
                PartLayout::Bytes => {
                    std::ptr::copy_nonoverlapping(src as *const u8, dst, self.part_bytes)
                }
                PartLayout::Typed { ty, count } => {
                    let out = std::slice::from_raw_parts_mut(dst, self.part_bytes);
                    ty.pack_raw(src as *const u8, *count, out)?;
                }
            }
        }
        let rs = h.part_bytes as usize;
        let mut j = a / rs;
        while j * rs < b {
            let lo = a.max(j * rs);
            let hi = b.min((j + 1) * rs);
            // SYNC POINT: Release publishes the bytes just copied to the
            // receiver's Acquire load of this counter.
            chan.counter(j)
                .fetch_add((hi - lo) as u64, Ordering::Release);
            j += 1;
        }
        Ok(())
    }

    /// Whether every partition of the round in flight has been copied
    /// (copying what it can first), without completing the round
    /// (`MPI_Request_get_status`); true when inactive.
    pub fn is_done(&self) -> bool {
        if !self.is_active() {
            return true;
        }
        let _ = self.progress();
        // SYNC POINT: Acquire pairs with the Release decrements.
        self.left.load(Ordering::Acquire) == 0
    }

    /// Whether the round in flight has finished (`MPI_Test`): its status
    /// once, and the request is inactive; `None` while partitions remain.
    pub fn test(&self) -> Result<Option<Status>> {
        if !self.is_active() {
            return Ok(Some(Status::from_engine(raw::Status::empty(), None)));
        }
        self.progress()?;
        // SYNC POINT: Acquire pairs with the Release decrements: every
        // copy is done before the program reuses the buffer.
        if self.left.load(Ordering::Acquire) != 0 {
            peer_check(self.peer, self.dest)?;
            sweep();
            return Ok(None);
        }
        self.active.store(false, Ordering::Relaxed);
        Ok(Some(self.status()))
    }

    fn status(&self) -> Status {
        let mut st = raw::Status::empty();
        if self.peer != Route::Null {
            st.source = self.dest;
            st.tag = self.tag;
            st.count = (self.parts * self.part_bytes) as u64;
        }
        Status::from_engine(st, None)
    }

    /// Waits for the round in flight (`MPI_Wait`).
    pub fn wait(&self) -> Result<Status> {
        let mut b = Backoff::new();
        loop {
            match self.test() {
                Ok(Some(st)) => return Ok(st),
                Ok(None) => b.snooze(),
                Err(e) => {
                    self.active.store(false, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
    }
}

/// The receiving side of a partitioned operation on raw memory (what
/// `MPI_Precv_init` makes); [`PartitionedRecv`] is the safe form.
pub struct RecvCore {
    comm: SimpleCommunicator,
    peer: Route,
    source: i32,
    tag: i32,
    base: usize,
    layout: PartLayout,
    parts: usize,
    part_bytes: usize,
    /// Its place among this process's partitioned receives from
    /// `source`, `tag`.
    place: u64,
    chan: OnceLock<Chan>,
    /// Whether the sender writes straight into the buffer (it is in the
    /// node heap and holds plain bytes); otherwise into a staging area.
    direct: bool,
    /// Rounds started.
    round: AtomicU64,
    active: AtomicBool,
    /// Staged: per partition, the round whose copy out was claimed, and
    /// the round whose copy out is done.
    out_claimed: Box<[AtomicU64]>,
    out_done: Box<[AtomicU64]>,
}

impl std::fmt::Debug for RecvCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvCore")
            .field("source", &self.source)
            .field("tag", &self.tag)
            .field("partitions", &self.parts)
            .field("round", &self.round.load(Ordering::Relaxed))
            .finish()
    }
}

impl RecvCore {
    /// A partitioned receive (`MPI_Precv_init`) of `partitions` partitions
    /// of `part_bytes` bytes each into `base` as `layout` says, from
    /// `source` (a rank or `PROC_NULL`; no wildcard) with `tag` (no
    /// wildcard); inactive.
    ///
    /// # Safety
    /// Every partition is writable at `base` as `layout` describes while
    /// the object exists (and while a round of it is in flight, even after
    /// it is dropped), and the program does not access the buffer during
    /// a round except partitions that have arrived, which it only reads.
    pub unsafe fn new(
        comm: &SimpleCommunicator,
        base: *mut u8,
        layout: PartLayout,
        partitions: usize,
        part_bytes: usize,
        source: i32,
        tag: i32,
    ) -> Result<RecvCore> {
        not_endpoints(comm)?;
        raw::check_send_tag(tag)?;
        let peer = raw::route(comm, source)?;
        let part_bytes = check_parts(partitions, part_bytes)?;
        let total = partitions * part_bytes;
        let direct = matches!(layout, PartLayout::Bytes)
            && total > 0
            && shmheap::is_shared(base)
            && shmheap::is_shared(base.wrapping_add(total - 1));
        let place = match peer {
            Route::Local(w) => place(comm.internal_context(), w, tag, false),
            _ => 0,
        };
        Ok(RecvCore {
            place,
            comm: comm.clone(),
            peer,
            source,
            tag,
            base: base as usize,
            layout,
            parts: partitions,
            part_bytes,
            chan: OnceLock::new(),
            direct,
            round: AtomicU64::new(0),
            active: AtomicBool::new(false),
            out_claimed: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
            out_done: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Partitions.
    pub fn partitions(&self) -> usize {
        self.parts
    }

    /// Whether a round is in flight.
    pub fn is_active(&self) -> bool {
        // Relaxed: see `SendCore::is_active`.
        self.active.load(Ordering::Relaxed)
    }

    /// Starts a round (`MPI_Start`); the first one introduces the channel
    /// to the sender.
    pub fn start(&self) -> Result<()> {
        if self.is_active() {
            return Err(active("start"));
        }
        let r = self.round.load(Ordering::Relaxed) + 1;
        if let Route::Local(_) = self.peer {
            let chan = match self.chan.get() {
                Some(c) => c,
                None => {
                    let total = self.parts * self.part_bytes;
                    let direct = self.direct.then_some(self.base as *mut u8);
                    let c = Chan::create(total, self.parts, direct)?;
                    let hello: Vec<u8> = [self.tag as u64, c.addr(), total as u64, self.place]
                        .iter()
                        .flat_map(|w| w.to_ne_bytes())
                        .collect();
                    // The message orders the channel's initialisation
                    // before the sender's first look at it.
                    raw::send_on(
                        &self.comm,
                        Traffic::Internal,
                        &hello,
                        self.source,
                        HELLO_TAG,
                    )?;
                    let _ = self.chan.set(c);
                    self.chan
                        .get()
                        .ok_or_else(|| Error::Internal("partitioned channel lost".into()))?
                }
            };
            // SYNC POINT: Release pairs with the sender's Acquire: our
            // reads of the previous round come before its new writes.
            chan.header().round.store(r, Ordering::Release);
        }
        self.round.store(r, Ordering::Relaxed);
        self.active.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether partition `i` has arrived in the round in flight
    /// (`MPI_Parrived`); an inactive request has all of them.
    pub fn parrived(&self, i: usize) -> Result<bool> {
        if i >= self.parts {
            return Err(bad_partition(i, self.parts));
        }
        if !self.is_active() {
            return Ok(true);
        }
        let got = self.arrived(i)?;
        if !got {
            sweep();
        }
        Ok(got)
    }

    fn arrived(&self, i: usize) -> Result<bool> {
        let Some(chan) = self.chan.get() else {
            return Ok(true); // PROC_NULL
        };
        let h = chan.header();
        // Relaxed: the flag alone is the message.
        if h.failed.load(Ordering::Relaxed) != 0 {
            return Err(Error::Arg {
                reason: format!(
                    "partitioned receive of {} bytes matched a partitioned send of another size",
                    h.total
                ),
            });
        }
        let r = self.round.load(Ordering::Relaxed);
        // SYNC POINT: Acquire pairs with the sender's Release `fetch_add`s:
        // the partition's bytes are in place when the counter says so.
        if chan.counter(i).load(Ordering::Acquire) < r * self.part_bytes as u64 {
            return Ok(false);
        }
        if self.direct {
            return Ok(true);
        }
        // SYNC POINT: Acquire pairs with the Release below: the copy out
        // another thread made is visible.
        if self.out_done[i].load(Ordering::Acquire) == r {
            return Ok(true);
        }
        // Relaxed: the claim only decides who copies.
        if self.out_claimed[i]
            .compare_exchange(r - 1, r, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Ok(false); // another thread is copying it out
        }
        let at = self.layout.at(self.base, i, self.part_bytes);
        // SAFETY: the staged bytes of partition `i` are complete (the
        // counter above) and no longer written this round; the buffer is
        // writable (the constructor's contract).
        unsafe {
            let src = chan.data().add(i * self.part_bytes);
            let data = std::slice::from_raw_parts(src, self.part_bytes);
            match &self.layout {
                PartLayout::Bytes => {
                    std::ptr::copy_nonoverlapping(src, at as *mut u8, self.part_bytes)
                }
                PartLayout::Typed { ty, count } => {
                    ty.unpack_raw(data, at as *mut u8, *count)?;
                }
            }
        }
        // SYNC POINT: Release publishes the copy out (Acquire above).
        self.out_done[i].store(r, Ordering::Release);
        Ok(true)
    }

    /// Whether every partition of the round in flight has arrived, without
    /// completing the round (`MPI_Request_get_status`); true when inactive.
    pub fn is_done(&self) -> bool {
        let done = !self.is_active() || (0..self.parts).all(|i| self.arrived(i).unwrap_or(true));
        if !done {
            sweep();
        }
        done
    }

    /// Whether the round in flight has finished (`MPI_Test`).
    pub fn test(&self) -> Result<Option<Status>> {
        if !self.is_active() {
            return Ok(Some(Status::from_engine(raw::Status::empty(), None)));
        }
        for i in 0..self.parts {
            if !self.arrived(i)? {
                peer_check(self.peer, self.source)?;
                sweep();
                return Ok(None);
            }
        }
        self.active.store(false, Ordering::Relaxed);
        let mut st = raw::Status::empty();
        if self.peer != Route::Null {
            st.source = self.source;
            st.tag = self.tag;
            st.count = (self.parts * self.part_bytes) as u64;
        }
        Ok(Some(Status::from_engine(st, None)))
    }

    /// Waits for the round in flight (`MPI_Wait`).
    pub fn wait(&self) -> Result<Status> {
        let mut b = Backoff::new();
        loop {
            match self.test() {
                Ok(Some(st)) => return Ok(st),
                Ok(None) => b.snooze(),
                Err(e) => {
                    self.active.store(false, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
    }
}

/// A partitioned send of a buffer it borrows mutably: threads fill
/// partitions through [`PartitionedSend::partitions_mut`].
pub struct PartitionedSend<'b> {
    core: Arc<SendCore>,
    _buf: PhantomData<&'b mut [u8]>,
}

impl std::fmt::Debug for PartitionedSend<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl<'b> PartitionedSend<'b> {
    /// A partitioned send of `buf` in `partitions` equal partitions to
    /// `dest` with `tag`, inactive (`MPI_Psend_init`); the buffer's length
    /// must be a multiple of `partitions` ([`Error::Arg`] otherwise).
    pub fn new<B: BufferMut + ?Sized>(
        comm: &SimpleCommunicator,
        buf: &'b mut B,
        partitions: usize,
        dest: i32,
        tag: i32,
    ) -> Result<Self> {
        let buf = buf.as_bytes_mut();
        let part = equal_parts(buf.len(), partitions)?;
        // SAFETY: `buf` is borrowed mutably for `'b`, which `self` lives
        // in; its bytes are read only by calls on `self` (or on partitions
        // that borrow it) and only once ready, when no `&mut` to them is
        // left (see `partitions_mut`).
        let core = unsafe {
            SendCore::new(
                comm,
                buf.as_mut_ptr(),
                PartLayout::Bytes,
                partitions,
                part,
                dest,
                tag,
            )
        }?;
        Ok(PartitionedSend {
            core,
            _buf: PhantomData,
        })
    }

    /// Starts a round (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        self.core.start()
    }

    /// Whether a round is in flight.
    pub fn is_active(&self) -> bool {
        self.core.is_active()
    }

    /// The partitions of the round in flight that are not ready yet, each a
    /// disjoint `&mut` slice to hand to a thread; each marks itself ready
    /// with [`Partition::ready`] or when dropped.
    pub fn partitions_mut(&mut self) -> Result<Vec<Partition<'_>>> {
        if !self.is_active() {
            return Err(inactive("taking partitions"));
        }
        let r = self.core.round.load(Ordering::Relaxed);
        let core: &SendCore = &self.core;
        Ok((0..core.parts)
            // Relaxed: our own marks (this thread, or handles that were
            // dropped before `&mut self` was available again).
            .filter(|&i| core.ready[i].load(Ordering::Relaxed) != r)
            .map(|i| {
                let at = core.base + i * core.part_bytes;
                // SAFETY: partition `i` of the borrowed buffer, disjoint
                // from the others handed out; the library does not read it
                // until it is marked ready, which consumes or drops this
                // handle.
                let data =
                    unsafe { std::slice::from_raw_parts_mut(at as *mut u8, core.part_bytes) };
                Partition {
                    core,
                    index: i,
                    data,
                    done: false,
                }
            })
            .collect())
    }

    /// Marks partition `i` ready (`MPI_Pready`) without a handle (its data
    /// written before the round started or before its handle was dropped).
    pub fn ready(&mut self, i: usize) -> Result<()> {
        self.core.pready(i)
    }

    /// Marks partitions `lo..=hi` ready (`MPI_Pready_range`).
    pub fn ready_range(&mut self, lo: usize, hi: usize) -> Result<()> {
        self.core.pready_range(lo, hi)
    }

    /// Marks the partitions of `list` ready (`MPI_Pready_list`).
    pub fn ready_list(&mut self, list: &[usize]) -> Result<()> {
        self.core.pready_list(list)
    }

    /// Whether the round in flight has finished (`MPI_Test`).
    pub fn test(&mut self) -> Result<Option<Status>> {
        self.core.test()
    }

    /// Waits for the round in flight: every partition must be marked ready
    /// (`MPI_Wait`).
    pub fn wait(&mut self) -> Result<Status> {
        self.core.wait()
    }

    /// The buffer, while no round is in flight.
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        if self.is_active() {
            return Err(active("reading the buffer"));
        }
        // SAFETY: the borrowed buffer, nothing else uses while inactive.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(
                self.core.base as *mut u8,
                self.core.parts * self.core.part_bytes,
            )
        })
    }
}

fn equal_parts(len: usize, partitions: usize) -> Result<usize> {
    if partitions == 0 || len % partitions != 0 {
        return Err(Error::Arg {
            reason: format!("a buffer of {len} bytes in {partitions} equal partitions"),
        });
    }
    Ok(len / partitions)
}

/// One partition of a [`PartitionedSend`]'s round: a `&mut` slice (through
/// `Deref`) that marks itself ready when dropped, or with
/// [`Partition::ready`].
pub struct Partition<'a> {
    core: &'a SendCore,
    index: usize,
    data: &'a mut [u8],
    done: bool,
}

impl std::fmt::Debug for Partition<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("index", &self.index)
            .field("len", &self.data.len())
            .finish()
    }
}

impl Partition<'_> {
    /// Which partition this is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Marks the partition ready (`MPI_Pready`), copying it to the
    /// receiver if it is ready for it.
    pub fn ready(mut self) -> Result<()> {
        self.done = true;
        self.core.pready(self.index)
    }
}

impl std::ops::Deref for Partition<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data
    }
}

impl std::ops::DerefMut for Partition<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.data
    }
}

impl Drop for Partition<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.core.pready(self.index);
        }
    }
}

impl Drop for PartitionedSend<'_> {
    fn drop(&mut self) {
        // Every handle is gone (they borrow `self`), and their marks were
        // made before that.
        if self.is_active() && self.core.all_ready() {
            // The buffer's borrow ends with us: send it all first.
            let _ = self.core.wait();
        }
        // Otherwise a partition was never marked ready and the round
        // cannot complete. Either way nothing reads the buffer after this.
        self.core.close();
    }
}

/// A partitioned receive into a buffer it borrows for a [`Scope`], which
/// waits for a round in flight at its end (the sender may be writing into
/// the buffer until then).
pub struct PartitionedRecv<'s> {
    core: Arc<RecvCore>,
    _buf: PhantomData<&'s mut [u8]>,
}

impl std::fmt::Debug for PartitionedRecv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl<'s> PartitionedRecv<'s> {
    /// A partitioned receive into `buf` in `partitions` equal partitions
    /// from `source` with `tag`, inactive (`MPI_Precv_init`).
    pub fn new<B: BufferMut + ?Sized>(
        scope: &'s Scope<'s, '_>,
        comm: &SimpleCommunicator,
        buf: &'s mut B,
        partitions: usize,
        source: i32,
        tag: i32,
    ) -> Result<Self> {
        let buf = buf.as_bytes_mut();
        let part = equal_parts(buf.len(), partitions)?;
        // SAFETY: `buf` is borrowed mutably for the scope's `'s`; the
        // scope waits for a round in flight at its end (even if `self` is
        // leaked), and the program reaches the bytes only through `self`
        // while inactive or through arrived partitions.
        let core = unsafe {
            RecvCore::new(
                comm,
                buf.as_mut_ptr(),
                PartLayout::Bytes,
                partitions,
                part,
                source,
                tag,
            )
        }?;
        let core = Arc::new(core);
        scope.keep_partitioned(core.clone());
        Ok(PartitionedRecv {
            core,
            _buf: PhantomData,
        })
    }

    /// Starts a round (`MPI_Start`).
    pub fn start(&mut self) -> Result<()> {
        self.core.start()
    }

    /// Whether a round is in flight.
    pub fn is_active(&self) -> bool {
        self.core.is_active()
    }

    /// Whether partition `i` has arrived (`MPI_Parrived`).
    pub fn arrived(&self, i: usize) -> Result<bool> {
        self.core.parrived(i)
    }

    /// Partition `i`'s bytes once it has arrived (`None` before).
    pub fn arrived_data(&self, i: usize) -> Result<Option<&[u8]>> {
        if !self.core.parrived(i)? {
            return Ok(None);
        }
        let at = self.core.base + i * self.core.part_bytes;
        // SAFETY: an arrived partition is not written again this round,
        // and the next round starts only through `&mut self`.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(at as *const u8, self.core.part_bytes)
        }))
    }

    /// Whether the round in flight has finished (`MPI_Test`).
    pub fn test(&mut self) -> Result<Option<Status>> {
        self.core.test()
    }

    /// Waits for the round in flight (`MPI_Wait`).
    pub fn wait(&mut self) -> Result<Status> {
        self.core.wait()
    }

    /// The buffer, while no round is in flight.
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        if self.is_active() {
            return Err(active("reading the buffer"));
        }
        // SAFETY: the borrowed buffer; nobody writes it while inactive.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(
                self.core.base as *mut u8,
                self.core.parts * self.core.part_bytes,
            )
        })
    }
}

impl Drop for PartitionedRecv<'_> {
    fn drop(&mut self) {
        let _ = self.core.wait();
    }
}

/// [`Error::Comm`] for an endpoints communicator ([`crate::endpoints`]):
/// a partitioned operation meets its peer by process, which does not tell
/// the endpoints of one process apart.
fn not_endpoints(comm: &SimpleCommunicator) -> Result<()> {
    if comm.is_endpoints() {
        return Err(Error::Comm {
            reason: "partitioned communication on an endpoints communicator is not supported"
                .into(),
        });
    }
    Ok(())
}
