//! A virtual communication interface (VCI): one independent message stream
//! of a rank.
//!
//! A VCI has two parts:
//!
//! * [`VciShared`], in the owning rank's arena, its address published in the
//!   registry slot [`crate::slots::vci_slot`]`(index)`: the incoming queue
//!   (a lock-free [`MpscQueue`] of envelopes; a sender appends with one
//!   atomic swap), one fast-box ring per sender (see [`crate::fastbox`]),
//!   the CMA table (see [`crate::kernel_assisted`]) and a *doorbell*, the
//!   futex word waiting threads sleep on (the rank's VCI 0 holds the one
//!   doorbell of the rank; see `doorbell`);
//! * [`Vci`], private to the owning process: the matching lists and receive
//!   slots (the `matching` module) behind the VCI lock — a process-private
//!   [`RawShmMutex`], bypassed in solo mode (see `solo`) — and the
//!   per-protocol counters (see `stats`).
//!
//! This module holds the two structures and the VCI lock. What the engine
//! does with them lives with its concept:
//!
//! * `progress`: taking what has arrived (the incoming queue in
//!   FIFO order, each envelope after the fast-box messages its sender
//!   numbered before it, then the fast boxes) and matching it against the
//!   posted receives; the sweep of a process's other VCIs;
//! * `post`: posting receives, blocking receive attempts,
//!   cancelling, probes;
//! * `deliver`: moving a matched message's data, by protocol
//!   (`immediate`, `single_copy`, `synergistic`,
//!   [`crate::kernel_assisted`], `two_copy`, [`crate::owned`]);
//! * `wait`: waiting (spin, yield, sleep on the doorbell).
//!
//! Matching follows MPI's rules (non-overtaking per source, tag and
//! context; receives in posting order): each arriving message matches the
//! earliest matching posted receive or is appended to the unexpected list,
//! and a new receive first matches the earliest matching unexpected
//! message, so "no unexpected message matches a posted receive" holds
//! after every step.
//!
//! # Example
//! ```
//! use vci::vci::VciShared;
//!
//! // The shared part is cache-line aligned and starts with the queue.
//! assert_eq!(std::mem::align_of::<VciShared>(), 64);
//! assert_eq!(std::mem::size_of::<VciShared>() % 64, 0);
//! // So is the private part: threads on different VCIs share no line.
//! assert_eq!(std::mem::align_of::<vci::vci::Vci>(), 64);
//! assert_eq!(std::mem::size_of::<vci::vci::Vci>() % 64, 0);
//! ```

use crate::doorbell::Doorbell;
use crate::envelope::Envelope;
use crate::fastbox::FbPair;
use crate::matching::Private;
use crate::solo::{Entry, SOLO};
use crate::stats::Counters;
use shmheap::sync::mpsc::{MpscLink, MpscQueue};
use shmheap::sync::mutex::{RawShmMutex, RawShmMutexGuard};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

pub(crate) use crate::post::Posted;
pub use crate::stats::Stats;

/// Magic number of an initialised [`VciShared`] ("VCI1").
pub const VCI_MAGIC: u32 = 0x5643_4931;

/// The part of a VCI that other ranks use, in the owner's arena.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct VciShared {
    pub(crate) incoming: MpscQueue,
    pub(crate) bell: Doorbell,
    magic: u32,
    owner: u32,
    index: u32,
    /// The owner's process id (kernel-assisted copies read from it).
    pid: u32,
    /// Heap address of `ranks` bytes in the owner's arena: entry `s` is
    /// `CMA_YES` if the owner can read rank `s`'s memory with
    /// `process_vm_readv`, `CMA_NO` if not, 0 before it tried
    /// (0 if there is no table).
    pub(crate) cma_from: u64,
    /// Number of entries of `cma_from` and `fastbox`.
    pub(crate) ranks: u32,
    /// Heap address of `ranks` [`FbPair`]s in the owner's arena: entry `s`
    /// is the fast-box ring of sender `s` (0 if there is none).
    fastbox: u64,
    /// How many VCIs the owner has (the same in every rank).
    vcis: u32,
}

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

/// The VCI lock and the private part it guards: a futex mutex (one CAS to
/// take it, one swap to release it), bypassed in solo mode (see
/// `solo`), without poisoning — a panic while it
/// is held leaves the lists consistent, since each step moves one element.
#[derive(Debug)]
pub(crate) struct Locked {
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
    pub(crate) fn try_lock(&self) -> Option<PrivateGuard<'_>> {
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

/// A counter on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct PaddedU64(pub(crate) AtomicU64);

/// One VCI of this process: the shared part and the locked private part.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Vci {
    pub(crate) shared: &'static VciShared,
    pub(crate) private: Locked,
    /// Progress events: advanced under the lock whenever progress took a
    /// message or a receive changed state, so that a thread waiting
    /// without the lock ([`Vci::news`]) knows when to look again.
    pub(crate) events: PaddedU64,
    /// Per sender: the sequence number of the next message to take.
    /// Written under the lock only; read without it by [`Vci::news`].
    pub(crate) expected: Box<[AtomicU64]>,
    /// The fast-box rings this VCI keeps, by sender (empty without fast
    /// boxes).
    pub(crate) rings: &'static [FbPair],
    pub(crate) stats: Counters,
    /// Smallest synergistically copied message (bytes).
    pub(crate) syn_min: u64,
    /// Whether this process's global allocator is the node heap, so that a
    /// given block can be handed to the receiver as it is.
    pub(crate) keep_given: bool,
    /// The number of ranks (senders).
    ranks: u32,
    /// Synergistic block size (bytes).
    pub(crate) syn_block: u64,
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
}
