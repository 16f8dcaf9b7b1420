//! A virtual communication interface (VCI): one independent message stream
//! of a rank.
//!
//! A VCI has two parts:
//!
//! * [`VciShared`], in the owning rank's arena, its address published in the
//!   registry slot [`crate::slots::vci_slot`]`(index)`: the incoming queue
//!   (a lock-free [`MpscQueue`] of envelopes; a sender appends with one
//!   atomic swap), one fast-box ring per sender (see [`crate::fastbox`]),
//!   and a *doorbell*, the futex word waiting threads sleep on (the rank's
//!   VCI 0 holds the one doorbell of the rank);
//! * [`Vci`], private to the owning process: the matching lists and receive
//!   slots (the `matching` module) behind a `std::sync::Mutex` (the VCI lock
//!   for the rank's threads), and the per-protocol counters.
//!
//! Progress runs under the lock: it takes what has arrived, in each
//! sender's order (the queue in FIFO order, each envelope after the fast-box
//! messages its sender numbered before it, then the fast boxes); each
//! message matches the earliest matching posted receive, or is appended to
//! the unexpected list. A new receive first takes what has arrived, then
//! matches the earliest matching unexpected message, or is appended to the
//! posted list. So "no unexpected message matches a posted receive" holds
//! after every step, and matching follows MPI's rules (non-overtaking per
//! source, tag and context; receives in posting order).
//!
//! Doorbell: whoever makes something happen that a waiter of this rank may
//! wait for (a sender after queueing an envelope or filling a fast-box
//! slot, a receiver after completing an envelope this rank waits for, or
//! after asking this rank for help with a synergistic copy) increments
//! `seq` and, if a waiter announced itself in `sleepers`, wakes the futex.
//! A waiter polls back to back for a few microseconds, yields a few times,
//! then announces itself, reads `seq`, polls once more, and sleeps only
//! while `seq` is unchanged (bounded by a short timeout). While it waits it
//! now and then sweeps the process's other VCIs (progress on those whose
//! lock is free), so a request never starves behind a VCI nobody waits on.
//!
//! # Example
//! ```
//! use vci::vci::VciShared;
//!
//! // The shared part is cache-line aligned and starts with the queue.
//! assert_eq!(std::mem::align_of::<VciShared>(), 64);
//! assert_eq!(std::mem::size_of::<VciShared>() % 64, 0);
//! ```

use crate::envelope::{Envelope, OwnedInfo, Protocol};
use crate::fastbox::{FbHead, FbPair, Small, KIND_PLAIN};
use crate::matching::{Arrival, Carrier, Key, Private, RecvSlot, RecvState, Target};
use crate::owned::OwnedBlock;
use crate::request::{Status, StatusError};
use crate::solo::{Entry, SOLO};
use shmheap::sync::futex::{futex_wait, wake_all};
use shmheap::sync::mpsc::{MpscLink, MpscQueue, Pop};
use shmheap::sync::mutex::{RawShmMutex, RawShmMutexGuard};
use shmheap::ShmHeap;
use std::alloc::GlobalAlloc;
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Magic number of an initialised [`VciShared`] ("VCI1").
pub const VCI_MAGIC: u32 = 0x5643_4931;
/// Empty attempts between sweeps (and full attempts) while spinning.
const SWEEP_EVERY: u32 = 64;
/// How long a waiter that announced itself keeps looking before it sleeps
/// (see `Doorbell::ring`).
const LINGER: Duration = Duration::from_micros(5);
/// Longest doorbell sleep before a waiter polls again.
const MAX_SLEEP: Duration = Duration::from_millis(2);

/// The doorbell: a sequence number waiters sleep on, and how many may sleep.
#[repr(C, align(64))]
#[derive(Debug)]
struct Doorbell {
    seq: AtomicU32,
    sleepers: AtomicU32,
}

impl Doorbell {
    /// Wakes the owner's sleeping waiters, if any, after the caller made
    /// an event they may wait for (a queued envelope, a filled fast-box
    /// slot, a completion store). While nobody sleeps this is one load: no
    /// write, so a stream of messages does not bounce this line between
    /// senders, and no fence, so a sender's stores to the slots it fills
    /// stay in flight together.
    ///
    /// Without a fence our event (a store) may still be on its way when
    /// this load runs, so a waiter that announces itself at that moment
    /// could be missed here while it also misses the event. The waiter
    /// covers that window: after announcing itself it keeps looking for
    /// [`LINGER`] before it sleeps — far longer than a store takes to
    /// become visible (a core's store buffer drains in well under a
    /// microsecond, and before the core is descheduled) — and it never
    /// sleeps longer than [`MAX_SLEEP`] at a time.
    fn ring(&self) {
        // Relaxed: see above; the waiter's fence orders its side.
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            // SYNC POINT: Release pairs with the waiter's Acquire load of
            // `seq`: a waiter that reads the new value sees our event. The
            // futex compares `seq`, so a waiter that read the old value
            // either sleeps and is woken below or does not sleep.
            self.seq.fetch_add(1, Ordering::Release);
            wake_all(&self.seq);
        }
    }
}

/// The part of a VCI that other ranks use, in the owner's arena.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct VciShared {
    incoming: MpscQueue,
    bell: Doorbell,
    magic: u32,
    owner: u32,
    index: u32,
    /// The owner's process id (kernel-assisted copies read from it).
    pid: u32,
    /// Heap address of `ranks` bytes in the owner's arena: entry `s` is
    /// `CMA_YES` if the owner can read rank `s`'s memory with
    /// `process_vm_readv`, `CMA_NO` if not, 0 before it tried
    /// (0 if there is no table).
    cma_from: u64,
    /// Number of entries of `cma_from` and `fastbox`.
    ranks: u32,
    /// Heap address of `ranks` [`FbPair`]s in the owner's arena: entry `s`
    /// is the fast-box ring of sender `s` (0 if there is none).
    fastbox: u64,
    /// How many VCIs the owner has (the same in every rank).
    vcis: u32,
}

/// CMA table entry: the owner can read that rank's memory.
pub(crate) const CMA_YES: u8 = 1;
/// CMA table entry: it cannot (for good).
pub(crate) const CMA_NO: u8 = 2;

impl VciShared {
    /// A fresh shared part of VCI `index` of rank `owner`.
    pub(crate) const fn new(owner: u32, index: u32) -> Self {
        VciShared {
            incoming: MpscQueue::new(),
            bell: Doorbell {
                seq: AtomicU32::new(0),
                sleepers: AtomicU32::new(0),
            },
            magic: VCI_MAGIC,
            owner,
            index,
            pid: 0,
            cma_from: 0,
            ranks: 0,
            fastbox: 0,
            vcis: 0,
        }
    }

    /// Sets the owner's pid, its CMA table and its fast-box rings (before
    /// publication).
    pub(crate) fn set_tables(&mut self, pid: u32, cma: u64, fastbox: u64, ranks: u32, vcis: u32) {
        self.pid = pid;
        self.cma_from = cma;
        self.fastbox = fastbox;
        self.vcis = vcis;
        self.ranks = ranks;
    }

    /// The fast-box ring this VCI keeps for messages from `sender`.
    pub(crate) fn fastbox_from(&self, sender: u32) -> Option<&'static FbPair> {
        if self.fastbox == 0 || sender >= self.ranks {
            return None;
        }
        // SAFETY: the rings, `ranks` FbPairs in the owner's arena, were
        // allocated (zeroed: every slot empty) before publication and are
        // never freed; FbPair is Sync (its module's protocol).
        Some(unsafe { &*(self.fastbox as *const FbPair).add(sender as usize) })
    }

    /// How many VCIs the owner has.
    pub(crate) fn vcis(&self) -> u32 {
        self.vcis
    }

    /// The owner's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The magic number's address (what peers read to probe CMA).
    pub(crate) fn magic_addr(&self) -> u64 {
        &self.magic as *const u32 as u64
    }

    fn cma_entry(&self, rank: u32) -> Option<&AtomicU8> {
        if self.cma_from == 0 || rank >= self.ranks {
            return None;
        }
        // SAFETY: the table holds `ranks` AtomicU8 in the owner's arena,
        // allocated before publication and never freed.
        Some(unsafe { &*(self.cma_from as *const AtomicU8).add(rank as usize) })
    }

    /// Whether the owner can read rank `rank`'s memory (as far as it knows).
    pub(crate) fn can_read_rank(&self, rank: u32) -> bool {
        // SYNC POINT: Acquire pairs with the Release store in
        // `set_can_read`; the entry carries no data, the ordering only
        // keeps the answer consistent with the probe that produced it.
        self.cma_entry(rank)
            .is_some_and(|e| e.load(Ordering::Acquire) == CMA_YES)
    }

    /// Records whether the owner (the caller) can read rank `rank`.
    pub(crate) fn set_can_read(&self, rank: u32, yes: bool) {
        if let Some(e) = self.cma_entry(rank) {
            // SYNC POINT: Release pairs with the Acquire in `can_read_rank`.
            e.store(if yes { CMA_YES } else { CMA_NO }, Ordering::Release);
        }
    }

    /// Whether this looks like VCI `index` of rank `owner`.
    pub(crate) fn is_valid(&self, owner: u32, index: u32) -> bool {
        self.magic == VCI_MAGIC && self.owner == owner && self.index == index
    }

    /// Queues `env` for this VCI's owner (without ringing its doorbell).
    ///
    /// # Safety
    ///
    /// `env` is a fresh envelope from [`Envelope::create`], in the node heap,
    /// numbered, not queued anywhere; it belongs to the consumer from now on
    /// (it may be completed or freed at any time after the push).
    pub(crate) unsafe fn push(&self, env: NonNull<Envelope>) {
        // SAFETY: the envelope's first field is its MpscLink (repr(C),
        // asserted in envelope.rs); it lives in the node heap, mapped at the
        // same address everywhere; the queue is in the owner's arena and
        // never moves (contract of `push`), and the envelope is ours until
        // the owner pops it (caller's contract).
        unsafe { self.incoming.push(env.as_ptr().cast::<MpscLink>()) };
    }

    /// Rings this VCI's doorbell: something its owner may wait for
    /// happened (a message arrived, a send of its owner finished).
    pub(crate) fn ring(&self) {
        self.bell.ring();
    }
}

/// Counters per protocol, readable by tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages sent with the immediate protocol.
    pub sent_immediate: u64,
    /// Messages sent with the single-copy protocol.
    pub sent_single_copy: u64,
    /// Messages sent with the two-copy (bounce buffer) protocol.
    pub sent_two_copy: u64,
    /// Messages received with the immediate protocol.
    pub recv_immediate: u64,
    /// Messages received with the single-copy protocol.
    pub recv_single_copy: u64,
    /// Messages received with the two-copy protocol.
    pub recv_two_copy: u64,
    /// Messages that matched a posted receive on arrival.
    pub matched_posted: u64,
    /// Receives that matched a message from the unexpected list.
    pub matched_unexpected: u64,
    /// Messages sent with the kernel-assisted single copy.
    pub sent_kernel_assisted: u64,
    /// Messages received with the kernel-assisted single copy
    /// (`process_vm_readv`).
    pub kernel_assisted: u64,
    /// Synchronous sends (`issend`/`ssend`) started.
    pub sent_synchronous: u64,
    /// Single-copy messages received with the synergistic copy.
    pub synergistic: u64,
    /// Blocks of synergistic copies this rank copied as the receiver.
    pub synergistic_receiver_blocks: u64,
    /// Blocks of synergistic copies this rank copied as the sender (while
    /// testing or waiting on the send).
    pub synergistic_sender_blocks: u64,
    /// Messages that left the unexpected list through a matched probe.
    pub matched_probe: u64,
    /// Blocks given with [`crate::Endpoint::isend_owned`].
    pub sent_owned: u64,
    /// Given blocks received (by any kind of receive).
    pub recv_owned: u64,
    /// Ownership receives that took the sender's block itself (no copy).
    pub owned_in_place: u64,
    /// Ownership receives that copied the payload into a fresh block (a
    /// plain send, or a block that could not be kept as it was).
    pub owned_copied: u64,
    /// Immediate messages sent through a fast box (also counted in
    /// `sent_immediate`).
    pub sent_fastbox: u64,
    /// Immediate messages received from a fast box (also counted in
    /// `recv_immediate`).
    pub recv_fastbox: u64,
}

impl Stats {
    /// The sum of two sets of counters (a process's VCIs together).
    pub fn merged(&self, o: &Stats) -> Stats {
        macro_rules! sum {
            ($($f:ident),*) => { Stats { $($f: self.$f + o.$f),* } };
        }
        sum!(
            sent_immediate,
            sent_single_copy,
            sent_two_copy,
            recv_immediate,
            recv_single_copy,
            recv_two_copy,
            matched_posted,
            matched_unexpected,
            sent_kernel_assisted,
            kernel_assisted,
            sent_synchronous,
            synergistic,
            synergistic_receiver_blocks,
            synergistic_sender_blocks,
            matched_probe,
            sent_owned,
            recv_owned,
            owned_in_place,
            owned_copied,
            sent_fastbox,
            recv_fastbox
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    received: [AtomicU64; 5],
    matched_posted: AtomicU64,
    matched_unexpected: AtomicU64,
    synergistic: AtomicU64,
    syn_receiver_blocks: AtomicU64,
    syn_sender_blocks: AtomicU64,
    matched_probe: AtomicU64,
    owned_in_place: AtomicU64,
    owned_copied: AtomicU64,
    recv_fastbox: AtomicU64,
    /// The fast-box receive path's counters, apart: see [`SlotCounters`].
    slot: SlotCounters,
}

/// Counters of messages delivered straight from their fast-box slot
/// ([`Vci::deliver_slot`]), which runs only under the VCI lock: one writer
/// at a time, ordered by the lock, so a plain increment counts exactly and
/// costs no locked instruction on the tiny-message path. Every other
/// writer of the same statistics uses [`Counters`]' own fields (some run
/// without the lock); [`Vci::stats`] adds the two.
#[derive(Debug, Default)]
struct SlotCounters {
    /// Plain payloads (immediate protocol, fast box).
    plain: AtomicU64,
    /// Given blocks.
    owned: AtomicU64,
    /// Given blocks handed over as they are.
    owned_in_place: AtomicU64,
}

/// Counts one under the VCI lock (see [`SlotCounters`]).
fn bump_locked(c: &AtomicU64) {
    // Relaxed load and store: the lock holder is the only writer, and the
    // lock orders successive holders; readers take a snapshot.
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn bump(c: &AtomicU64) {
    // Relaxed: a statistic; read only as a snapshot, orders nothing.
    c.fetch_add(1, Ordering::Relaxed);
}

fn add(c: &AtomicU64, n: u64) {
    // Relaxed: a statistic; read only as a snapshot, orders nothing.
    c.fetch_add(n, Ordering::Relaxed);
}

fn read(c: &AtomicU64) -> u64 {
    // Relaxed: a statistic snapshot.
    c.load(Ordering::Relaxed)
}

/// The VCI lock and the private part it guards: a futex mutex (one CAS to
/// take it, one swap to release it), bypassed in solo mode (see
/// [`crate::solo`]), without poisoning — a panic while it
/// is held leaves the lists consistent, since each step moves one element.
#[derive(Debug)]
struct Locked {
    raw: RawShmMutex,
    private: UnsafeCell<Private>,
}

// SAFETY: `private` is reached only through a `PrivateGuard`, which exists
// while its thread holds `raw` or is inside a solo section (which excludes
// every other thread: see `crate::solo`); `Private` is `Send`.
unsafe impl Sync for Locked {}

impl Locked {
    /// Takes the lock: in solo mode (the owner, alone) without touching
    /// the mutex, else the mutex.
    #[inline(always)]
    fn lock(&self) -> PrivateGuard<'_> {
        let held = match SOLO.enter() {
            Entry::Solo => None,
            Entry::Real => Some(self.raw.lock()),
        };
        PrivateGuard {
            held,
            private: &self.private,
        }
    }

    /// Takes the lock if it is free.
    fn try_lock(&self) -> Option<PrivateGuard<'_>> {
        let held = match SOLO.enter() {
            Entry::Solo => None,
            Entry::Real => Some(self.raw.try_lock()?),
        };
        Some(PrivateGuard {
            held,
            private: &self.private,
        })
    }
}

/// The held VCI lock: derefs to the VCI's private part.
pub(crate) struct PrivateGuard<'a> {
    /// The mutex's guard; `None` in solo mode, where the section ends with
    /// [`crate::solo::Solo::leave`].
    held: Option<RawShmMutexGuard<'a>>,
    private: &'a UnsafeCell<Private>,
}

impl Drop for PrivateGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.held.is_none() {
            SOLO.leave();
        }
        // A held mutex guard unlocks as it drops, after this.
    }
}

impl std::ops::Deref for PrivateGuard<'_> {
    type Target = Private;
    fn deref(&self) -> &Private {
        // SAFETY: we hold the lock, so no `&mut` to the private part exists
        // elsewhere.
        unsafe { &*self.private.get() }
    }
}

impl std::ops::DerefMut for PrivateGuard<'_> {
    fn deref_mut(&mut self) -> &mut Private {
        // SAFETY: we hold the lock, and `&mut self` makes this the only
        // reference through this guard.
        unsafe { &mut *self.private.get() }
    }
}

/// A given block as a receive finds it: in an owned envelope or fast-box
/// slot.
#[derive(Debug, Clone, Copy)]
struct Given {
    /// The block's address in the node heap.
    addr: *mut u8,
    /// Its layout and metadata.
    info: OwnedInfo,
    /// The payload's length.
    len: usize,
}

impl Given {
    /// Takes the block out of an owned envelope and frees the envelope.
    ///
    /// # Safety
    ///
    /// `env` is an owned envelope this VCI popped and has not let go of.
    unsafe fn from_envelope(env: NonNull<Envelope>) -> Given {
        // SAFETY: valid until destroyed below (caller's contract).
        let (addr, len) = unsafe { (env.as_ref().data() as *mut u8, env.as_ref().len() as usize) };
        // SAFETY: an owned envelope (caller's contract).
        let info = unsafe { OwnedInfo::read(env) };
        // SAFETY: an owned envelope is the receiver's to free (never
        // synchronous); `destroy` frees the envelope, not the block.
        unsafe { Envelope::destroy(env) };
        Given { addr, info, len }
    }
}

/// Starts moving the cache line at `p` into this core's cache, ready to be
/// written (a hint: it never faults, whatever `p` is).
#[inline(always)]
fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` changes no register, flag or memory and never
    // faults, whatever the address; processors without it execute its
    // encoding (0F 0D /1) as a no-op.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The status of a delivery of `n` of a message's `len` bytes (truncated
/// if `n < len`).
fn delivered(key: Key, len: usize, n: usize) -> Status {
    Status {
        source: key.source,
        tag: key.tag,
        count: n as u64,
        error: (n < len).then_some(StatusError::Truncate {
            message_len: len as u64,
        }),
        cancelled: false,
    }
}

/// What [`Vci::post_recv`] made of a receive.
pub(crate) enum Posted<P = (), E = std::convert::Infallible> {
    /// It matched an unexpected message and is finished: its status.
    Matched(Status),
    /// It waits for a message under this id, with the place its caller
    /// gave for its request.
    Waiting(u32, P),
    /// It would have waited, but its caller had no place for its request
    /// (why): it was not posted.
    NoPlace(E),
}

/// A counter on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug, Default)]
struct PaddedU64(AtomicU64);

/// One VCI of this process: the shared part and the locked private part.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Vci {
    shared: &'static VciShared,
    private: Locked,
    /// Progress events: advanced under the lock whenever progress took a
    /// message or a receive changed state, so that a thread waiting
    /// without the lock ([`Vci::news`]) knows when to look again.
    events: PaddedU64,
    /// Per sender: the sequence number of the next message to take.
    /// Written under the lock only; read without it by [`Vci::news`].
    expected: Box<[AtomicU64]>,
    /// The fast-box rings this VCI keeps, by sender (empty without fast
    /// boxes).
    rings: &'static [FbPair],
    stats: Counters,
    /// Smallest synergistically copied message (bytes).
    syn_min: u64,
    /// Whether this process's global allocator is the node heap, so that a
    /// given block can be handed to the receiver as it is.
    keep_given: bool,
    /// The number of ranks (senders).
    ranks: u32,
    /// Synergistic block size (bytes).
    syn_block: u64,
}

impl Vci {
    /// A VCI around its (published) shared part.
    pub(crate) fn new(
        shared: &'static VciShared,
        config: &crate::Config,
        keep_given: bool,
    ) -> Self {
        let rings = if shared.fastbox == 0 {
            &[][..]
        } else {
            // SAFETY: the rings, `ranks` FbPairs in the owner's arena, were
            // allocated (zeroed: every slot empty) before publication and
            // are never freed; FbPair is Sync (its module's protocol).
            unsafe {
                std::slice::from_raw_parts(shared.fastbox as *const FbPair, shared.ranks as usize)
            }
        };
        Vci {
            shared,
            private: Locked {
                raw: RawShmMutex::new(),
                private: UnsafeCell::new(Private::default()),
            },
            events: PaddedU64::default(),
            expected: (0..shared.ranks).map(|_| AtomicU64::new(1)).collect(),
            rings,
            ranks: shared.ranks,
            stats: Counters::default(),
            // At least two blocks: with one, the sender's help only makes
            // the receiver wait for a copy made from the other core.
            syn_min: (config.synergistic_min as u64).max(2 * config.synergistic_block as u64),
            keep_given,
            syn_block: config.synergistic_block as u64,
        }
    }

    /// The shared part.
    pub(crate) fn shared(&self) -> &'static VciShared {
        self.shared
    }

    /// Takes the VCI lock.
    pub(crate) fn lock(&self) -> PrivateGuard<'_> {
        self.private.lock()
    }

    /// Counts blocks of a synergistic copy this rank copied as the sender.
    pub(crate) fn count_sender_blocks(&self, n: u64) {
        if n > 0 {
            add(&self.stats.syn_sender_blocks, n);
        }
    }

    /// A snapshot of this VCI's counters: what it received and matched.
    /// Sends are counted by the endpoint's lanes; [`Endpoint::stats`] adds
    /// both.
    ///
    /// [`Endpoint::stats`]: crate::Endpoint::stats
    pub fn stats(&self) -> Stats {
        let s = &self.stats;
        Stats {
            // Sends are counted per lane (`Endpoint::stats`).
            sent_immediate: 0,
            sent_single_copy: 0,
            sent_two_copy: 0,
            recv_immediate: read(&s.received[0]) + read(&s.slot.plain),
            recv_single_copy: read(&s.received[1]),
            recv_two_copy: read(&s.received[2]),
            matched_posted: read(&s.matched_posted),
            matched_unexpected: read(&s.matched_unexpected),
            sent_kernel_assisted: 0,
            kernel_assisted: read(&s.received[3]),
            sent_synchronous: 0,
            synergistic: read(&s.synergistic),
            synergistic_receiver_blocks: read(&s.syn_receiver_blocks),
            synergistic_sender_blocks: read(&s.syn_sender_blocks),
            matched_probe: read(&s.matched_probe),
            sent_owned: 0,
            recv_owned: read(&s.received[4]) + read(&s.slot.owned),
            owned_in_place: read(&s.owned_in_place) + read(&s.slot.owned_in_place),
            owned_copied: read(&s.owned_copied),
            sent_fastbox: 0,
            recv_fastbox: read(&s.recv_fastbox) + read(&s.slot.plain),
        }
    }

    /// Takes what posted receives need, in order per sender: the whole
    /// incoming queue, then messages from the senders' fast boxes while a
    /// receive is posted. Each message matches the earliest matching posted
    /// receive or joins the unexpected list.
    ///
    /// Fast-box messages that no posted receive waits for stay in their
    /// slots, where a later receive takes them directly
    /// ([`Vci::post_recv`]). Moving them to the unexpected list as they
    /// arrive costs a second copy each, and a receiver that drains a stream
    /// keeps pace with its sender, reading every slot as it is written:
    /// each message then costs a cache-line round trip instead of a read
    /// of a line that arrived while earlier ones were handled. A sender
    /// whose fast box is full queues envelopes instead, and an envelope
    /// brings its sender's earlier fast-box messages along
    /// ([`Vci::catch_up`]), so nothing waits there unseen for long.
    pub(crate) fn progress(&self, p: &mut Private) {
        self.progress_with(p, false);
    }

    /// Takes every message that has arrived: [`Vci::progress`], but
    /// emptying every fast box. For receives and probes that are not
    /// posted (a blocking receive, a probe), which must see all of them.
    pub(crate) fn progress_all(&self, p: &mut Private) {
        self.progress_with(p, true);
    }

    fn progress_with(&self, p: &mut Private, all: bool) {
        let mut took = false;
        // Empty or Inconsistent (a sender is between its swap and its link;
        // it rings the doorbell after linking, so a waiter polls again) end
        // the loop.
        while let Pop::Item(node) = self.pop(p) {
            took = true;
            let env = NonNull::new(node.cast::<Envelope>()).expect("queued nodes are non-null");
            // SAFETY: a popped envelope is valid and ours until delivered.
            let (source, seq) = unsafe { (env.as_ref().source(), env.as_ref().seq()) };
            // Messages the sender put in its fast box before this one come
            // first (they are visible: see `crate::fastbox`).
            self.catch_up(p, source, seq);
            // SAFETY: popped from our queue, valid.
            self.arrive(p, unsafe { Arrival::envelope(env) });
            if let Some(e) = self.expected.get(source as usize) {
                // Relaxed: written only under the lock (which we hold);
                // lock-free readers take it as a hint (see `news`).
                e.store(seq + 1, Ordering::Relaxed);
            }
            if let Some(fb) = self.rings.get(source as usize) {
                fb.consumed(seq);
            }
        }
        // In rank order, whether the pass is full or lazy: a program that
        // orders two senders' messages through a third message (which MPI
        // does not promise to honour) sees them matched in that order
        // whenever both have arrived. In a lazy pass a sender further down
        // waits at most a fast box's worth of messages: a full box sends
        // it to the queue, whose envelope brings its box along.
        for (source, fb) in self.rings.iter().enumerate() {
            while (all || !p.posted.is_empty()) && self.take_small(p, fb, source as u32) {
                took = true;
            }
        }
        if took {
            self.note_event(p);
        }
    }

    /// Advances the events count (under the lock: `_locked`).
    pub(crate) fn note_event(&self, _locked: &mut Private) {
        // Relaxed load: only lock holders write the count, and we hold the
        // lock. SYNC POINT: the Release store pairs with the Acquire load
        // in `news`: a waiter that sees the new count sees the matching
        // state (expected numbers, finished receives) we changed before.
        let n = self.events.0.load(Ordering::Relaxed);
        self.events.0.store(n.wrapping_add(1), Ordering::Release);
    }

    /// The events count as of now (read under the lock: `_locked`).
    pub(crate) fn events(&self, _locked: &Private) -> u64 {
        // Relaxed: only lock holders write it, and we hold the lock.
        self.events.0.load(Ordering::Relaxed)
    }

    /// Whether a locked attempt might find something new since the caller
    /// last held the lock and saw the events count `seen`: another thread
    /// progressed (the count moved), an envelope is queued, or a sender's
    /// next fast-box message is in its slot. Reads no lock and writes
    /// nothing, so a waiter can ask in a tight loop while the lines it
    /// reads stay in its cache until a sender writes them.
    ///
    /// A hint: it may say yes for nothing (a message another thread is
    /// taking right now), and it may miss a message only while another
    /// thread's progress is under way, which then moves the count; waiters
    /// still take the lock now and then, and always before they sleep.
    pub(crate) fn news(&self, seen: u64) -> bool {
        // SYNC POINT: Acquire pairs with the Release store in `note_event`.
        if self.events.0.load(Ordering::Acquire) != seen {
            return true;
        }
        if !self.shared.incoming.is_empty() {
            return true;
        }
        self.rings.iter().zip(self.expected.iter()).any(|(fb, e)| {
            // Relaxed: a hint; the count above says it is what we left.
            fb.ready(e.load(Ordering::Relaxed))
        })
    }

    /// Pops the incoming queue (`_locked` proves the VCI lock is held).
    fn pop(&self, _locked: &mut Private) -> Pop {
        // SAFETY: the VCI lock is held (we were given its `Private`), which
        // makes us the only consumer; the queue never moves and queued
        // envelopes stay valid until popped (their senders' contract).
        unsafe { self.shared.incoming.pop() }
    }

    /// Takes `source`'s fast-box messages numbered before `seq`.
    fn catch_up(&self, p: &mut Private, source: u32, seq: u64) {
        let Some(fb) = self.rings.get(source as usize) else {
            return;
        };
        // Relaxed: written only under the lock, which we hold.
        while self.expected[source as usize].load(Ordering::Relaxed) < seq {
            // Published before the envelope was queued, so visible; a stale
            // read can only be momentary.
            if !self.take_small(p, fb, source) {
                std::hint::spin_loop();
            }
        }
    }

    /// Takes the next message from `source`'s fast box `fb`, if it is there.
    fn take_small(&self, p: &mut Private, fb: &FbPair, source: u32) -> bool {
        let e = &self.expected[source as usize];
        // Relaxed (load and store): written only under the lock, which we
        // hold; lock-free readers take it as a hint (see `news`).
        let seq = e.load(Ordering::Relaxed);
        let Some(head) = fb.head(seq) else {
            return false;
        };
        let key = Key {
            source: source as i32,
            tag: head.tag,
            context: head.context,
        };
        match p.match_posted(&key) {
            Some(id) => {
                bump(&self.stats.matched_posted);
                let slot = p.slot_mut(id).expect("posted receives have slots");
                let mut st = Status::empty();
                // SAFETY: `head` came from this slot; the receive slot's
                // target is borrowed by its live request.
                unsafe { self.deliver_slot(fb, seq, head, key, slot.target, &mut st) };
                slot.state = RecvState::Done(st);
            }
            None => p
                .unexpected
                .push_back(Arrival::small(source, fb.take(seq, head))),
        }
        e.store(seq + 1, Ordering::Relaxed);
        true
    }

    /// Delivers fast-box message `seq` (header `head`, key `key`) straight
    /// from its slot to `target` — a plain payload into a buffer, a given
    /// block's record — hands the slot back to the sender, and writes the
    /// status to `out` (in place: see [`Vci::recv_now`]).
    ///
    /// # Safety
    ///
    /// `head` is what [`FbPair::head`] returned for `seq` under the VCI
    /// lock, and nothing took the message since; the target is valid (see
    /// [`Vci::deliver`]).
    ///
    /// A plain payload into a buffer (what a small receive is) is copied
    /// here, inline in the receive; the other cases are out of line.
    #[inline(always)]
    unsafe fn deliver_slot(
        &self,
        fb: &FbPair,
        seq: u64,
        head: FbHead,
        key: Key,
        target: Target,
        out: &mut Status,
    ) {
        match target {
            Target::Buffer { buf, cap } if head.kind == KIND_PLAIN => {
                let (len, n) = (head.len as usize, (head.len as usize).min(cap));
                // SAFETY: `buf` holds `cap >= n` bytes (caller's contract).
                unsafe { fb.take_into(seq, head, buf, n) };
                bump_locked(&self.stats.slot.plain);
                *out = delivered(key, len, n);
            }
            // SAFETY: the caller's contract.
            _ => *out = unsafe { self.deliver_slot_other(fb, seq, head, key, target) },
        }
    }

    /// [`Vci::deliver_slot`] for a given block's record, or a plain
    /// payload to a target that is not a buffer.
    ///
    /// # Safety
    ///
    /// As for [`Vci::deliver_slot`].
    #[inline(never)]
    unsafe fn deliver_slot_other(
        &self,
        fb: &FbPair,
        seq: u64,
        head: FbHead,
        key: Key,
        target: Target,
    ) -> Status {
        if head.is_owned() {
            let rec = fb.take_owned(seq, head);
            let given = Given {
                addr: rec.addr as *mut u8,
                info: rec.info,
                len: head.len as usize,
            };
            // SAFETY: the given block is ours now (the sender gave it up);
            // the target is valid (caller's contract); we hold the VCI lock
            // (caller's contract).
            unsafe { self.deliver_given(key, given, target, true) }
        } else {
            let a = Arrival::small(key.source as u32, fb.take(seq, head));
            // SAFETY: the arrival is ours (just taken); the target is valid
            // (caller's contract).
            unsafe { self.deliver(a, target) }
        }
    }

    /// A message has arrived: delivers it to the earliest matching posted
    /// receive, or appends it to the unexpected list.
    fn arrive(&self, p: &mut Private, a: Arrival) {
        match p.match_posted(&a.key) {
            Some(id) => {
                bump(&self.stats.matched_posted);
                let slot = p.slot_mut(id).expect("posted receives have slots");
                // SAFETY: the arrival is ours; the slot's target is borrowed
                // by its live request.
                slot.state = RecvState::Done(unsafe { self.deliver(a, slot.target) });
            }
            None => p.unexpected.push_back(a),
        }
    }

    /// Delivers arrival `a` to `target` and lets go of it.
    ///
    /// # Safety
    ///
    /// `a` came from this VCI's progress and was not delivered yet; the
    /// target is valid: a buffer for `cap` bytes of writes (and not
    /// otherwise in use), or an `out` location valid for a write.
    pub(crate) unsafe fn deliver(&self, a: Arrival, target: Target) -> Status {
        match a.carrier {
            Carrier::Envelope(env) => {
                // SAFETY: the arrival's envelope is ours until we let go.
                if unsafe { env.as_ref() }.protocol() == Protocol::Owned {
                    // SAFETY: an owned envelope, ours (caller's contract).
                    let given = unsafe { Given::from_envelope(env) };
                    // SAFETY: the caller's contract.
                    return unsafe { self.deliver_given(a.key, given, target, false) };
                }
                match target {
                    // SAFETY: the caller's contract.
                    Target::Buffer { buf, cap } => unsafe { self.deliver_into(env, buf, cap) },
                    Target::Owned { out, align } => {
                        let len = a.len as usize;
                        // SAFETY: the caller's contract; a fresh block holds
                        // `len` writable bytes.
                        let (block, st) = self.fresh_block(len, align, [0; 4], false, |b| unsafe {
                            self.deliver_into(env, b, len)
                        });
                        // SAFETY: `out` is valid for a write (caller's
                        // contract).
                        unsafe { out.write(block) };
                        st
                    }
                }
            }
            Carrier::Small(small) => match small.owned() {
                Some(rec) => {
                    let given = Given {
                        addr: rec.addr as *mut u8,
                        info: rec.info,
                        len: small.head.len as usize,
                    };
                    // SAFETY: the given block is ours now (the sender gave
                    // it up); the caller's contract for the target.
                    unsafe { self.deliver_given(a.key, given, target, false) }
                }
                // SAFETY: the caller's contract.
                None => unsafe { self.deliver_small(a.key, &small, target) },
            },
        }
    }

    /// A fresh block of `len` bytes aligned to `align` filled by `fill`
    /// (which returns the delivery's status), or, if there is no memory,
    /// `fill` with an empty buffer (to discard the message) and an
    /// allocation error.
    fn fresh_block(
        &self,
        len: usize,
        align: usize,
        meta: [u64; 4],
        given: bool,
        fill: impl FnOnce(*mut u8) -> Status,
    ) -> (Option<OwnedBlock>, Status) {
        match OwnedBlock::fresh(len, align, meta, given) {
            Some(block) => {
                bump(&self.stats.owned_copied);
                (Some(block), fill(block.ptr.as_ptr()))
            }
            None => {
                let mut st = fill(NonNull::dangling().as_ptr());
                st.count = 0;
                st.error = Some(StatusError::Alloc { bytes: len as u64 });
                (None, st)
            }
        }
    }

    /// Delivers a plain fast-box message.
    ///
    /// # Safety
    ///
    /// The target is valid (see [`Vci::deliver`]).
    unsafe fn deliver_small(&self, key: Key, small: &Small, target: Target) -> Status {
        let data = small.data();
        let copy = |buf: *mut u8, cap: usize| {
            let n = data.len().min(cap);
            // SAFETY: `data` holds `n` bytes; `buf` is valid for `cap >= n`
            // bytes (caller's contract) and distinct from our copy.
            unsafe { ptr::copy_nonoverlapping(data.as_ptr(), buf, n) };
            bump(&self.stats.received[Protocol::Immediate as usize - 1]);
            bump(&self.stats.recv_fastbox);
            delivered(key, data.len(), n)
        };
        match target {
            Target::Buffer { buf, cap } => copy(buf, cap),
            Target::Owned { out, align } => {
                let (block, st) =
                    self.fresh_block(data.len(), align, [0; 4], false, |b| copy(b, data.len()));
                // SAFETY: `out` is valid for a write (caller's contract).
                unsafe { out.write(block) };
                st
            }
        }
    }

    /// Delivers a given block (from an owned envelope or fast-box slot): an
    /// ownership receive keeps it as it is when this process's allocator
    /// can free it and it is aligned enough, else gets a copy in a fresh
    /// block; a plain receive gets a copy of its payload. A block not kept
    /// is freed.
    ///
    /// # Safety
    ///
    /// The given block is ours (the sender gave it up); the target is
    /// valid (see [`Vci::deliver`]); with `locked`, the caller holds the
    /// VCI lock (the statistics go to [`SlotCounters`]).
    #[inline(always)]
    unsafe fn deliver_given(&self, key: Key, g: Given, target: Target, locked: bool) -> Status {
        // The block's first line is most likely in the giver's cache: start
        // fetching it now, for whoever touches the data next.
        prefetch_for_write(g.addr);
        let count = |shared: &AtomicU64, slot: &AtomicU64| {
            if locked {
                bump_locked(slot);
            } else {
                bump(shared);
            }
        };
        count(
            &self.stats.received[Protocol::Owned as usize - 1],
            &self.stats.slot.owned,
        );
        let layout = g.info.layout();
        let free_block = || {
            if layout.size() > 0 {
                // SAFETY: the given block is ours (caller's contract), in the
                // node heap, and `ShmHeap` frees any rank's block there.
                unsafe { ShmHeap.dealloc(g.addr, layout) };
            }
        };
        let copy = |buf: *mut u8, cap: usize| {
            let n = g.len.min(cap);
            if n > 0 {
                // SAFETY: the block holds `len >= n` bytes; `buf` is valid
                // for `cap >= n` bytes and is not the block.
                unsafe { ptr::copy_nonoverlapping(g.addr.cast_const(), buf, n) };
            }
            delivered(key, g.len, n)
        };
        match target {
            Target::Buffer { buf, cap } => {
                let st = copy(buf, cap);
                free_block();
                st
            }
            Target::Owned { out, align } => {
                let (block, st) = if layout.size() > 0
                    && self.keep_given
                    && g.addr as usize & (align - 1) == 0
                {
                    count(&self.stats.owned_in_place, &self.stats.slot.owned_in_place);
                    let block = OwnedBlock {
                        ptr: NonNull::new(g.addr).expect("a given block of size > 0 is not null"),
                        layout,
                        len: g.len,
                        meta: g.info.meta,
                        given: true,
                    };
                    (Some(block), delivered(key, g.len, g.len))
                } else {
                    let r = self.fresh_block(g.len, align, g.info.meta, true, |b| copy(b, g.len));
                    free_block();
                    r
                };
                // SAFETY: `out` is valid for a write (caller's contract).
                unsafe { out.write(block) };
                st
            }
        }
    }

    /// Copies `env`'s payload into `buf` (`cap` bytes) and lets go of `env`.
    ///
    /// # Safety
    ///
    /// `env` is an envelope this VCI popped and has not let go of, not an
    /// owned one (those go through [`Vci::deliver_given`]); `buf` is valid
    /// for `cap` bytes of writes (and not otherwise in use).
    pub(crate) unsafe fn deliver_into(
        &self,
        env: NonNull<Envelope>,
        buf: *mut u8,
        cap: usize,
    ) -> Status {
        // SAFETY: valid until we let go below (caller's contract).
        let e = unsafe { env.as_ref() };
        let len = e.len();
        let n = (len.min(cap as u64)) as usize;
        let proto = e.protocol();
        let mut error = (len > n as u64).then_some(StatusError::Truncate { message_len: len });
        if n > 0 {
            match proto {
                Protocol::KernelAssisted => {
                    // SAFETY: `buf` is valid for `cap >= n` bytes (caller's
                    // contract); the source is the sender's buffer in its
                    // address space, borrowed by its pending request until
                    // we complete the envelope.
                    // SAFETY: `reply` is the sender's VciShared, never freed.
                    let pid = unsafe { &*(e.reply() as *const VciShared) }.pid();
                    // SAFETY: as said above.
                    if let Err(err) = unsafe { crate::cma::read(pid, e.data(), buf, n) } {
                        // The probe at start-up said yes; the kernel now says
                        // no (the sender changed credentials, or died).
                        // Use two copy for this sender from now on and
                        // report the failure in the receive's status.
                        self.shared.set_can_read(e.source(), false);
                        error = Some(StatusError::Transfer {
                            errno: err.raw_os_error().unwrap_or(0),
                        });
                    }
                }
                Protocol::SingleCopy
                    if n as u64 >= self.syn_min
                        && shmheap::is_shared(buf)
                        // SAFETY: `n - 1 < cap`: inside the buffer.
                        && shmheap::is_shared(unsafe { buf.add(n - 1) }) =>
                {
                    // SAFETY: the envelope is ours until we complete it
                    // below, after the copy.
                    let syn = unsafe { Envelope::syn(env) };
                    match syn {
                        Some(syn) => {
                            syn.ask_for_help(
                                buf,
                                n as u64,
                                crate::config::synergistic_block(n as u64, self.syn_block),
                            );
                            // The sender may sleep in `wait`: wake it so it
                            // helps.
                            // SAFETY: `reply` is the sender's VciShared,
                            // never freed.
                            unsafe { &*(e.reply() as *const VciShared) }.ring();
                            // SAFETY: the payload is the sender's heap
                            // buffer, valid until we complete; the buffer
                            // stays alive until `wait_finished` returns.
                            let blocks = unsafe { syn.copy_blocks(e.data() as *const u8) };
                            syn.wait_finished();
                            bump(&self.stats.synergistic);
                            add(&self.stats.syn_receiver_blocks, blocks);
                        }
                        // SAFETY: as below.
                        None => unsafe { ptr::copy_nonoverlapping(e.data() as *const u8, buf, n) },
                    }
                }
                Protocol::Immediate
                | Protocol::SingleCopy
                | Protocol::TwoCopy
                | Protocol::Owned => {
                    let src: *const u8 = match proto {
                        Protocol::Immediate => Envelope::inline_ptr(env),
                        _ => e.data() as *const u8,
                    };
                    // SAFETY: `src` holds `len >= n` bytes: the inline area,
                    // the sender's heap buffer (borrowed by its pending
                    // request until we complete the envelope) or the
                    // envelope's bounce buffer; `buf` is valid for `cap >= n`
                    // bytes and is a distinct buffer (a receive buffer is
                    // borrowed mutably by its request).
                    unsafe { ptr::copy_nonoverlapping(src, buf, n) };
                }
            }
        }
        bump(&self.stats.received[proto as usize - 1]);
        let status = Status {
            source: e.source() as i32,
            tag: e.tag(),
            count: n as u64,
            error,
            cancelled: false,
        };
        let sender_frees =
            e.is_sync() || matches!(proto, Protocol::SingleCopy | Protocol::KernelAssisted);
        if sender_frees {
            let reply = e.reply() as *const VciShared;
            e.complete();
            // From here on the sender may free the envelope.
            // SAFETY: `reply` is the sender's VciShared, which lives in its
            // arena for the rest of the job (never freed).
            unsafe { &*reply }.ring();
        } else {
            // SAFETY: the envelope (and bounce buffer) is ours alone: the
            // sender let go of it when it queued it (not synchronous).
            unsafe { Envelope::destroy(env) };
        }
        status
    }

    /// Posts a receive; matches the earliest matching unexpected message
    /// first. A receive that matched is finished at once (its status);
    /// otherwise `place` is asked (under the lock, before the receive is
    /// posted) where its request will live, and it waits under an id
    /// unless there is no place.
    ///
    /// # Safety
    ///
    /// The target is valid (a buffer for `cap` bytes of writes, or an `out`
    /// location for a write) until the call returns a status, or until
    /// the waiting receive's slot is collected by [`Vci::take_recv`] (done
    /// or cancelled).
    #[inline]
    pub(crate) unsafe fn post_recv<P, E>(
        &self,
        target: Target,
        source: i32,
        tag: i32,
        context: u32,
        place: impl FnOnce() -> Result<P, E>,
    ) -> Posted<P, E> {
        let key = Key {
            source,
            tag,
            context,
        };
        let mut guard = self.lock();
        let p = &mut *guard;
        // What has arrived first: the unexpected list holds a prefix of
        // each sender's messages (progress takes them in sequence), so a
        // match there is the earliest one from its sender, and the
        // messages still in the fast boxes can wait for the next
        // progress. Only without a match does progress run now.
        let mut matched = p.match_unexpected(&key);
        if matched.is_none() && !p.posted.is_empty() {
            // Receives posted before this one come first: serve them with
            // what has arrived (which may leave a match for this one).
            self.progress(p);
            matched = p.match_unexpected(&key);
        }
        if matched.is_none() && p.posted.is_empty() {
            // Nothing unexpected matches and no receive posted before
            // this one could claim it: the next message of a named source,
            // if it waits in its fast box and matches, goes straight from
            // its slot (as a blocking receive's does), not through the
            // unexpected list.
            let mut st = Status::empty();
            // SAFETY: the target is valid (caller's contract).
            if unsafe { self.take_direct(p, key, target, &mut st) } {
                return Posted::Matched(st);
            }
            // Any source, or the next message does not match: look at
            // everything that has arrived.
            self.progress_all(p);
            matched = p.match_unexpected(&key);
        }
        if let Some(a) = matched {
            bump(&self.stats.matched_unexpected);
            // No slot: the request is finished before anyone sees it, so
            // completing it later needs neither the lock nor a lookup.
            // SAFETY: the arrival is ours (taken off the unexpected list);
            // the target is valid (caller's contract).
            return Posted::Matched(unsafe { self.deliver(a, target) });
        }
        let at = match place() {
            Ok(at) => at,
            Err(e) => return Posted::NoPlace(e),
        };
        let id = p.insert(RecvSlot {
            target,
            state: RecvState::Posted,
        });
        p.posted.push_back((key, id));
        Posted::Waiting(id, at)
    }

    /// One attempt of a blocking receive (under the lock): delivers the
    /// earliest message matching `key` that has arrived to `target`,
    /// writes its status to `out` and returns `true`; `false` (and `out`
    /// as it was) if none has arrived. The status is written in place
    /// because a status returned through `Option` and the waiting loop
    /// was written field by field, then read back wide: store forwarding
    /// cannot serve that, and the load waited just when the message had
    /// arrived.
    ///
    /// A blocking receive is not posted: between its attempts, messages
    /// that other threads' progress takes go to their posted receives
    /// first, else to the unexpected list, where the next attempt finds
    /// them. (Concurrent receives of several threads have no order in
    /// MPI, which also promises no fairness between them.) When no
    /// receive is posted and nothing unexpected matches, the next message
    /// of a named source that waits in its fast box and matches is the
    /// earliest match: it is delivered straight from the slot.
    ///
    /// # Safety
    ///
    /// The target is valid (see [`Vci::deliver`]) for the duration of the
    /// call.
    pub(crate) unsafe fn recv_now(
        &self,
        p: &mut Private,
        key: Key,
        target: Target,
        out: &mut Status,
    ) -> bool {
        if p.posted.is_empty() && !p.unexpected.iter().any(|a| key.matches(&a.key)) {
            // SAFETY: the caller's contract.
            if unsafe { self.take_direct(p, key, target, out) } {
                return true;
            }
        }
        self.progress_all(p);
        let Some(a) = p.match_unexpected(&key) else {
            return false;
        };
        bump(&self.stats.matched_unexpected);
        // SAFETY: the arrival is ours (taken off the unexpected list); the
        // target is valid (caller's contract).
        *out = unsafe { self.deliver(a, target) };
        true
    }

    /// Whether the next message of `key.source` waits in its fast box and
    /// matches `key`; if so, it is delivered to `target` (a plain one into
    /// a buffer straight from its slot) and its status written to `out`.
    /// The caller made sure that nothing posted or unexpected comes first.
    ///
    /// # Safety
    ///
    /// As for [`Vci::recv_now`].
    #[inline(always)]
    unsafe fn take_direct(
        &self,
        p: &mut Private,
        key: Key,
        target: Target,
        out: &mut Status,
    ) -> bool {
        let Ok(source) = usize::try_from(key.source) else {
            return false;
        };
        let Some(fb) = self.rings.get(source) else {
            return false;
        };
        let e = &self.expected[source];
        // Relaxed: written only under the lock, which we hold.
        let seq = e.load(Ordering::Relaxed);
        let Some(head) = fb.head(seq) else {
            return false;
        };
        let found = Key {
            source: key.source,
            tag: head.tag,
            context: head.context,
        };
        if !key.matches(&found) {
            return false;
        }
        // SAFETY: `head` came from this slot just now, under the lock; the
        // target is valid (caller's contract).
        unsafe { self.deliver_slot(fb, seq, head, found, target, out) };
        // Relaxed: as above; lock-free readers take it as a hint.
        e.store(seq + 1, Ordering::Relaxed);
        self.note_event(p);
        true
    }

    /// The status of receive `id` if it is finished (done or cancelled),
    /// forgetting it; `None` while it is posted.
    pub(crate) fn take_recv(&self, p: &mut Private, id: u32) -> Option<Status> {
        match p.slot_mut(id).map(|s| &s.state) {
            Some(RecvState::Posted) => None,
            Some(RecvState::Done(_)) => match p.remove(id).map(|s| s.state) {
                Some(RecvState::Done(st)) => Some(st),
                _ => None,
            },
            // Unknown ids do not exist: requests collect their slot once.
            None => Some(Status::empty()),
        }
    }

    /// Cancels receive `id` if it has not matched yet. Returns whether it
    /// was cancelled.
    pub(crate) fn cancel_recv(&self, id: u32) -> bool {
        let mut guard = self.lock();
        let p = &mut *guard;
        self.progress(p);
        let Some(i) = p.posted.iter().position(|&(_, x)| x == id) else {
            return false;
        };
        p.posted.remove(i);
        self.note_event(p);
        if let Some(slot) = p.slot_mut(id) {
            let mut st = Status::empty();
            st.cancelled = true;
            slot.state = RecvState::Done(st);
        }
        true
    }

    /// The status of the earliest unexpected message matching the key,
    /// after taking what has arrived.
    pub(crate) fn iprobe(&self, p: &mut Private, key: Key) -> Option<Status> {
        self.progress_all(p);
        p.unexpected
            .iter()
            .find(|a| key.matches(&a.key))
            .map(Arrival::status)
    }

    /// Removes the earliest unexpected message matching the key (after
    /// taking what has arrived) and returns it with its status: a matched
    /// probe. The arrival is the caller's, to pass to [`Vci::deliver`]
    /// exactly once.
    pub(crate) fn take_unexpected(&self, p: &mut Private, key: Key) -> Option<(Arrival, Status)> {
        self.progress_all(p);
        let a = p.match_unexpected(&key)?;
        bump(&self.stats.matched_probe);
        let st = a.status();
        Some((a, st))
    }

    /// Tries to progress this VCI without waiting for its lock (a sweep by
    /// a thread that waits on another VCI). Returns whether it did.
    pub(crate) fn try_progress(&self) -> bool {
        match self.private.try_lock() {
            Some(mut g) => {
                self.progress(&mut g);
                true
            }
            None => false,
        }
    }
}

impl VciShared {
    /// Waits until `attempt` returns a value: spins, yields, then sleeps on
    /// this (the rank's) doorbell; `sweep` runs after repeated empty
    /// attempts, and before every sleep. `attempt(full)` may skip work it
    /// knows to be useless (a lock-free check for news, [`Vci::news`])
    /// unless `full` is set: every [`SWEEP_EVERY`]th attempt and the
    /// attempt before a sleep are full.
    pub(crate) fn wait_until<R>(
        &self,
        mut attempt: impl FnMut(bool) -> Option<R>,
        mut sweep: impl FnMut(),
    ) -> R {
        /// How long to poll back to back before yielding: long enough for
        /// a peer on another core to answer, short enough not to hold a
        /// core that a peer needs when ranks outnumber cores.
        const SPIN: Duration = Duration::from_micros(20);
        /// Yields before sleeping.
        const YIELDS: u32 = 16;
        /// Attempts made back to back before the spinning slows down with
        /// `pause` (which takes tens of nanoseconds on some processors, as
        /// long as a whole attempt: spinning without it first answers a
        /// quick peer sooner).
        const HOT: u32 = 256;
        let bell = &self.bell;
        let mut empty = 0u32;
        let mut spin_until: Option<Instant> = None;
        let mut yielding = false;
        let mut yields = 0u32;
        while yields < YIELDS {
            if let Some(r) = attempt(empty % SWEEP_EVERY == 0) {
                return r;
            }
            empty += 1;
            if yielding {
                std::thread::yield_now();
                yields += 1;
            } else if empty % SWEEP_EVERY == 0 {
                sweep();
                // The clock is read now and then, not on every attempt.
                let now = Instant::now();
                yielding = now >= *spin_until.get_or_insert(now + SPIN);
            } else if empty > HOT {
                std::hint::spin_loop();
            }
        }
        // Sleep: announce ourselves, linger (see `Doorbell::ring`), then
        // sleep on the doorbell until rung or for at most MAX_SLEEP, and
        // look again.
        sweep();
        // Relaxed increment, then SYNC POINT: the SeqCst fence makes the
        // announcement visible before anything we read below, so a ringer
        // whose event we miss sees us (up to the store-visibility window
        // that the linger covers).
        bell.sleepers.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let linger_until = Instant::now() + LINGER;
        let r = loop {
            if let Some(r) = attempt(true) {
                break r;
            }
            if Instant::now() >= linger_until {
                // SYNC POINT: Acquire pairs with the ringer's Release
                // increment: an event rung after this read wakes the futex
                // (or changes `seq` first, and the futex does not sleep);
                // one rung before it is visible to the attempt below.
                let seq = bell.seq.load(Ordering::Acquire);
                if let Some(r) = attempt(true) {
                    break r;
                }
                futex_wait(&bell.seq, seq, MAX_SLEEP);
                sweep();
            } else {
                std::hint::spin_loop();
            }
        };
        // Relaxed: only a hint to ringers; a stale non-zero value costs one
        // needless wake-up.
        bell.sleepers.fetch_sub(1, Ordering::Relaxed);
        r
    }
}
