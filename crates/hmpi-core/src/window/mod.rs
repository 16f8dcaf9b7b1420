//! One-sided communication: windows, and put, get and atomics into them
//! that never wait for the target (`MPI_Win_*`, `MPI_Put` …
//! `MPI_Compare_and_swap`).
//!
//! Every rank of a node maps the node heap at the same address, so a
//! target's window memory in the heap is plain memory of the origin: a
//! put is a copy into it, a get a copy out of it, an accumulate an atomic
//! read-modify-write on it. Memory outside the heap (a stack, a static,
//! memory from before the heap existed) is reached with
//! `process_vm_writev` / `process_vm_readv` in the target's address space
//! (`remote`). Neither needs the target to call the library: an origin
//! whose target computes is never held up by it (notes §5).
//!
//! * [`Win`] is the raw tier, on addresses and datatypes, shared by the
//!   typed API and the C library: creation ([`Win::create`],
//!   [`Win::allocate`], [`Win::allocate_shared`] with
//!   [`Win::shared_query`], [`Win::create_dynamic`] with
//!   [`Win::attach`] / [`Win::detach`]), attributes, operations and
//!   synchronisation.
//! * [`Window`] is the typed API: a window of `T`, epochs as guards
//!   ([`Window::fence`], [`Window::lock`], [`Window::lock_all`],
//!   [`Window::start`], [`Window::post`]) that carry the operations, so an
//!   operation outside an epoch does not compile; under `lock_all` the
//!   request-based forms ([`Immediate`]) in a [`crate::request::scope`].
//!
//! # Memory model and completion
//!
//! The model is unified ([`Model::Unified`]): the window is the memory
//! itself. Every operation has completed, at the origin and at the
//! target, when its call returns (the request of `rput` … is complete at
//! once), so `flush` and its kin only check the epoch: the store-to-load
//! order MPI's completion implies is kept by the next operation of the
//! thread that reads window memory (a fence owed by its puts and
//! accumulates, see `ops`). A small dense put or get is one copy of
//! registers after the checks; a large contiguous
//! put or get within the node heap is shared between the caller and the
//! process's copy agents ([`crate::copy_agent`]), and returns when every
//! part of it is in place.
//!
//! # Synchronisation, without the target
//!
//! Everything lives in a block in the node heap (`shared`):
//! * **fence**: a barrier of the window's members, with full memory
//!   ordering;
//! * **lock / unlock**: a reader-writer lock word per target, taken by
//!   the origin at `lock` (spin, yield, then sleep); `lock_all` takes each
//!   shared; `MPI_MODE_NOCHECK` skips the words;
//! * **post / start / complete / wait / test**: per-pair counters; an
//!   origin's first operation to a target waits for that target's post
//!   (not the `start` call), `complete` publishes one counter per target
//!   of the group whether it received anything or not, and `wait` waits
//!   for the counters of the posted group.
//!
//! # Accumulates
//!
//! Element-wise atomic as MPI requires: on heap memory, 4- and 8-byte
//! elements (integers, floats, logicals) use hardware atomics (fetch-and-op
//! where one exists, a compare-and-swap loop otherwise); everything else
//! (other sizes, pair types, memory outside the heap) takes the lock
//! stripes of the cache lines it touches, so accumulates on disjoint
//! targets rarely serialise. Which way a location goes depends only on the
//! location and its element type, so every origin takes the same way.
//!
//! # Shared windows
//!
//! [`Win::allocate_shared`] gives one contiguous segment of the node heap,
//! member `r`'s part right after member `r - 1`'s (the
//! `alloc_shared_noncontig` hint is not needed: the segment is one
//! allocation and the parts are not padded).
//!
//! # Hints (info keys)
//!
//! [`Win::set_info`] (`MPI_Win_set_info`, and the info of the creating
//! call in C) reads `no_locks`: `true` makes `lock` and `lock_all` an
//! [`Error::RmaSync`] (the program promised not to call them). The other
//! keys of MPI's list change nothing here and [`Win::info`] reports what
//! is in effect whatever was asked: `accumulate_ordering` is
//! `rar,raw,war,waw` (every accumulate is complete at its call, so all
//! orders hold), `accumulate_ops` `same_op_no_op`, `same_disp_unit`
//! whether every member's unit is the same, and for shared windows
//! `alloc_shared_noncontig` `false` (the parts are contiguous).
//!
//! # Example
//! ```
//! use hmpi_core::window::{LockType, Window};
//!
//! let universe = hmpi_core::init().unwrap();
//! let world = universe.world();
//! let win = Window::<u64>::allocate(&world, 4).unwrap();
//! {
//!     let epoch = win.lock(0, LockType::Exclusive).unwrap();
//!     epoch.put(&[1, 2, 3], 1).unwrap();
//!     let mut back = [0u64; 4];
//!     epoch.get(&mut back, 0).unwrap();
//!     assert_eq!(back, [0, 1, 2, 3]);
//!     epoch.unlock().unwrap();
//! }
//! win.free().unwrap();
//! ```

/// The info keys of windows ([`Win::set_info`], [`Win::info`]).
pub mod hint {
    /// `true`: the program never locks the window.
    pub const NO_LOCKS: &str = "no_locks";
    /// The orders accumulates keep (always all of them here).
    pub const ACCUMULATE_ORDERING: &str = "accumulate_ordering";
    /// Which operations accumulates to one location mix.
    pub const ACCUMULATE_OPS: &str = "accumulate_ops";
    /// Whether every member has the same displacement unit.
    pub const SAME_DISP_UNIT: &str = "same_disp_unit";
    /// Whether a shared window's parts may be apart.
    pub const ALLOC_SHARED_NONCONTIG: &str = "alloc_shared_noncontig";
}

mod ops;
mod remote;
mod shared;
mod typed;

pub use typed::{
    Access, AccessEpoch, ExposureEpoch, Fence, Immediate, LockAll, LockEpoch, RmaRequest, Window,
};

use crate::comm::{Communicator, SimpleCommunicator};
use crate::copy_agent;
use crate::error::{Error, Result};
use crate::group::Group;
use crate::info::Info;
use crate::traits::CommunicatorCollectives;
use shared::Block;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Assertions of the synchronisation calls (`MPI_MODE_*`, with the values
/// of the standard ABI). Every one is accepted; `NOCHECK` skips the lock
/// word of `lock` / `lock_all` and the wait for the post of `start`.
pub mod assert {
    /// `MPI_MODE_NOCHECK`: no conflicting lock / the matching post has
    /// already happened.
    pub const NOCHECK: i32 = 1024;
    /// `MPI_MODE_NOPRECEDE`: the fence closes no epoch with operations.
    pub const NOPRECEDE: i32 = 2048;
    /// `MPI_MODE_NOPUT`: the window is not updated by puts or
    /// accumulates in the coming epoch.
    pub const NOPUT: i32 = 4096;
    /// `MPI_MODE_NOSTORE`: the window was not stored to locally since the
    /// last synchronisation.
    pub const NOSTORE: i32 = 8192;
    /// `MPI_MODE_NOSUCCEED`: no epoch follows the fence.
    pub const NOSUCCEED: i32 = 16384;
    /// Every assertion bit.
    pub const ALL: i32 = NOCHECK | NOPRECEDE | NOPUT | NOSTORE | NOSUCCEED;
}

/// How a window's memory came to be (`MPI_WIN_CREATE_FLAVOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `MPI_WIN_FLAVOR_CREATE`: the caller's memory.
    Create,
    /// `MPI_WIN_FLAVOR_ALLOCATE`: allocated by the library in the heap.
    Allocate,
    /// `MPI_WIN_FLAVOR_DYNAMIC`: memory attached later.
    Dynamic,
    /// `MPI_WIN_FLAVOR_SHARED`: one segment for direct load/store.
    Shared,
}

/// The memory model (`MPI_WIN_MODEL`): always unified here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// `MPI_WIN_UNIFIED`: public and private copies are the same memory.
    Unified,
}

/// The kind of a passive-target lock (`MPI_LOCK_EXCLUSIVE` /
/// `MPI_LOCK_SHARED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockType {
    /// One origin at a time.
    Exclusive,
    /// Any number of origins at once.
    Shared,
}

/// What an origin knows of a member's window memory.
#[derive(Debug, Clone, Copy)]
struct Peer {
    /// The memory's address in the member's address space.
    base: u64,
    /// Its length in bytes.
    size: u64,
    /// The displacement unit in bytes.
    disp_unit: u64,
    /// The member's process id (for memory outside the heap).
    pid: u32,
    /// Whether the memory lies in the node heap.
    heap: bool,
}

/// An open passive-target lock.
#[derive(Debug, Clone, Copy)]
struct Held {
    kind: LockType,
    /// `MPI_MODE_NOCHECK`: the lock word was not taken.
    nocheck: bool,
}

/// The epochs open at this process (MPI's per-process epoch state).
#[derive(Debug, Default)]
struct Epochs {
    /// A fence opened an epoch (and no `NOSUCCEED` closed it).
    fence: bool,
    /// Locks held, per target.
    locks: Vec<Option<Held>>,
    /// How many entries of `locks` are `Some`.
    nlocks: usize,
    /// `lock_all` is on (with `NOCHECK` or not).
    lock_all: Option<bool>,
    /// The access group of `start`: targets, and whether their post has
    /// been seen.
    access: Option<Vec<(u32, bool)>>,
    /// The exposure group of `post`.
    exposure: Option<Vec<u32>>,
    /// Access epochs started at each target (the count its posts must
    /// reach).
    starts: Vec<u32>,
    /// Exposure epochs posted to each origin (the count its completes
    /// must reach).
    posts: Vec<u32>,
}

/// Memory the window owns and frees with it.
#[derive(Debug)]
struct Owned {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// A window (`MPI_Win`), the raw tier: operations on addresses with
/// datatypes. Free it with [`Win::free`] (collective); dropping it
/// unfreed frees it the same way (and waits for the other members).
#[derive(Debug)]
pub struct Win {
    comm: SimpleCommunicator,
    me: u32,
    peers: Box<[Peer]>,
    block: Block,
    flavor: Flavor,
    /// Memory the window owns: held only to be freed, after the window's
    /// last barrier (fields drop after `Drop::drop`).
    _owned: Option<Owned>,
    name: Mutex<String>,
    epochs: Mutex<Epochs>,
    /// `lock_all` is on: a copy of `epochs.lock_all.is_some()`, written
    /// under `epochs`' mutex, so that the operations and flushes of a
    /// `lock_all` epoch check it without taking the mutex.
    all_locked: AtomicBool,
    /// Per target: this process holds its lock, a copy of
    /// `epochs.locks[r].is_some()` kept as `all_locked` is.
    locked: Box<[AtomicBool]>,
    /// The `no_locks` hint: `lock` and `lock_all` are refused.
    no_locks: AtomicBool,
    /// The process's copy agents, which share large contiguous puts and
    /// gets with the caller.
    agents: &'static copy_agent::Pool,
    freed: bool,
}

// SAFETY: the raw pointers inside (the owned memory) are to node-heap
// memory this window owns; everything mutable is behind a `Mutex` or is
// an atomic of the shared block.
unsafe impl Send for Win {}
// SAFETY: as for `Send`.
unsafe impl Sync for Win {}

fn arg(reason: impl Into<String>) -> Error {
    Error::Arg {
        reason: reason.into(),
    }
}

fn sync_err(reason: impl Into<String>) -> Error {
    Error::RmaSync {
        reason: reason.into(),
    }
}

/// Allocates `size` zeroed bytes in the node heap (at least one, aligned
/// to a cache line).
fn heap_alloc(size: u64) -> Result<Owned> {
    let bytes = usize::try_from(size.max(1)).map_err(|_| arg("window size overflows"))?;
    let layout = Layout::from_size_align(bytes, 64).map_err(|e| arg(e.to_string()))?;
    let ptr = shmheap::ShmHeap::new().try_alloc_zeroed(layout)?;
    Ok(Owned { ptr, layout })
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: allocated by `ShmHeap` with this layout (`heap_alloc`);
        // a window drops it after the barrier of its free, when no member
        // reaches it any more.
        unsafe { shmheap::ShmHeap::new().dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// What this member brings to a new window.
struct Part {
    /// Its memory's address (for a shared window: the offset of its part
    /// in the segment).
    base: u64,
    size: u64,
    disp_unit: u64,
    /// Whether the memory lies in the node heap.
    heap: bool,
    /// Memory the window owns.
    owned: Option<Owned>,
    /// The shared segment's address (rank 0 of a shared window).
    extra: u64,
}

/// [`Error::Comm`] on every member alike for a communicator spanning
/// nodes: a window here names every member's memory by its address in
/// this node's heap, which means nothing on another node (windows across
/// nodes are `multinode::SpanWindow`).
fn node_local(comm: &SimpleCommunicator) -> Result<()> {
    if comm.spans_nodes() {
        return Err(comm.no_span_form("a window of the node's heap (see SpanWindow)"));
    }
    Ok(())
}

fn check_unit(disp_unit: u64) -> Result<()> {
    if disp_unit == 0 {
        return Err(arg("a window's displacement unit must be positive"));
    }
    Ok(())
}

/// The fields every member contributes when a window is made.
const INFO: usize = 8;

impl Win {
    /// The common part of every creation: this member's part (or why it
    /// has none), gathered from every member with the address of the
    /// shared block. Every member takes part even when its own arguments
    /// were bad, so that nobody waits for it; then all fail together.
    fn build(comm: &SimpleCommunicator, part: Result<Part>, flavor: Flavor) -> Result<Win> {
        node_local(comm)?;
        let comm = comm.duplicate()?;
        let n = comm.size() as u32;
        let me = comm.rank() as u32;
        // A bad copy-agent variable fails the window at every member.
        let (agents, part) = match copy_agent::pool() {
            Ok(a) => (Some(a), part),
            Err(e) => (None, Err(e)),
        };
        let (part, mut failure) = match part {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e)),
        };
        let block = if me == 0 && failure.is_none() {
            match Block::create(n) {
                Ok(b) => Some(b),
                Err(e) => {
                    failure = Some(e);
                    None
                }
            }
        } else {
            None
        };
        let p = part.as_ref();
        let mine: [u64; INFO] = [
            p.map_or(0, |p| p.base),
            p.map_or(0, |p| p.size),
            p.map_or(1, |p| p.disp_unit),
            u64::from(std::process::id()),
            u64::from(p.is_some_and(|p| p.heap)),
            block.as_ref().map_or(0, Block::addr),
            p.map_or(0, |p| p.extra),
            u64::from(failure.is_none()),
        ];
        let mut all = vec![0u64; INFO * n as usize];
        comm.all_gather_into(&mine[..], &mut all[..])?;
        if let Some(bad) = all.chunks_exact(INFO).position(|c| c[7] == 0) {
            if let Some(b) = block {
                // SAFETY: nobody attached: every member saw the failure.
                unsafe { b.discard() };
            }
            return Err(failure.unwrap_or_else(|| Error::Win {
                reason: format!("member {bad} could not make its part of the window"),
            }));
        }
        let (Some(part), None, Some(agents)) = (part, failure, agents) else {
            return Err(Error::Internal("a window part vanished".into()));
        };
        let block = match block {
            Some(b) => b,
            // SAFETY: rank 0 created the block before the allgather that
            // carried its address; we attach once.
            None => unsafe { Block::attach(all[5], n)? },
        };
        let seg = all[6];
        let peers = all
            .chunks_exact(INFO)
            .map(|c| Peer {
                base: if flavor == Flavor::Shared {
                    seg + c[0]
                } else {
                    c[0]
                },
                size: c[1],
                disp_unit: c[2],
                pid: c[3] as u32,
                heap: c[4] != 0,
            })
            .collect();
        Ok(Win {
            comm,
            me,
            peers,
            block,
            flavor,
            _owned: part.owned,
            name: Mutex::new(String::new()),
            epochs: Mutex::new(Epochs {
                locks: vec![None; n as usize],
                starts: vec![0; n as usize],
                posts: vec![0; n as usize],
                ..Epochs::default()
            }),
            all_locked: AtomicBool::new(false),
            locked: (0..n).map(|_| AtomicBool::new(false)).collect(),
            no_locks: AtomicBool::new(false),
            agents,
            freed: false,
        })
    }

    /// `MPI_Win_create`: a window over `size` bytes of the caller's memory
    /// at `base` (collective over `comm`). Memory in the node heap is
    /// reached by plain copies, other memory through the kernel. A bad
    /// argument at any member fails the call at every member.
    ///
    /// # Safety
    /// `base` is valid for reads and writes of `size` bytes (by this
    /// process and, through the window, by the others) until the window is
    /// freed.
    pub unsafe fn create(
        comm: &SimpleCommunicator,
        base: *mut u8,
        size: u64,
        disp_unit: u64,
    ) -> Result<Win> {
        let part = (|| {
            check_unit(disp_unit)?;
            if size > 0 && base.is_null() {
                return Err(arg("a window of memory at address 0"));
            }
            let b = base as u64;
            let end = b
                .checked_add(size)
                .ok_or_else(|| arg("the window's memory wraps around the address space"))?;
            let heap = size == 0
                || (shmheap::is_shared(base)
                    && shmheap::is_shared((end - 1) as usize as *const u8));
            Ok(Part {
                base: b,
                size,
                disp_unit,
                heap,
                owned: None,
                extra: 0,
            })
        })();
        Win::build(comm, part, Flavor::Create)
    }

    /// `MPI_Win_allocate`: `size` zeroed bytes of the node heap
    /// (collective; a failure at any member fails it everywhere).
    pub fn allocate(comm: &SimpleCommunicator, size: u64, disp_unit: u64) -> Result<Win> {
        let part = check_unit(disp_unit)
            .and_then(|()| heap_alloc(size))
            .map(|own| Part {
                base: own.ptr.as_ptr() as u64,
                size,
                disp_unit,
                heap: true,
                owned: Some(own),
                extra: 0,
            });
        Win::build(comm, part, Flavor::Allocate)
    }

    /// `MPI_Win_allocate_shared`: one contiguous zeroed segment of the node
    /// heap, this member's `size` bytes right after the previous member's
    /// (collective). [`Win::shared_query`] gives every member's part.
    pub fn allocate_shared(comm: &SimpleCommunicator, size: u64, disp_unit: u64) -> Result<Win> {
        node_local(comm)?;
        let n = comm.size() as usize;
        let ok = check_unit(disp_unit);
        let mut sizes = vec![0u64; 2 * n];
        comm.all_gather_into(&[size, u64::from(ok.is_ok())][..], &mut sizes[..])?;
        ok?;
        if let Some(bad) = sizes.chunks_exact(2).position(|c| c[1] == 0) {
            return Err(Error::Win {
                reason: format!("member {bad} gave a bad argument for the shared window"),
            });
        }
        let sizes: Vec<u64> = sizes.chunks_exact(2).map(|c| c[0]).collect();
        let offset: u64 = sizes[..comm.rank() as usize].iter().sum();
        // Checked at every member alike (the same sizes): all fail or none.
        let total = sizes
            .iter()
            .try_fold(0u64, |a, &s| a.checked_add(s))
            .ok_or_else(|| arg("the shared window's size overflows"))?;
        // Rank 0 allocates; a failure there must reach everybody, so the
        // address (0: failed) goes through the next collective.
        let own = if comm.rank() == 0 {
            Some(heap_alloc(total))
        } else {
            None
        };
        let seg = match &own {
            Some(Ok(o)) => o.ptr.as_ptr() as u64,
            _ => 0,
        };
        let mut segs = vec![0u64; n];
        comm.all_gather_into(&[seg][..], &mut segs[..])?;
        if segs[0] == 0 {
            return match own {
                Some(Err(e)) => Err(e),
                _ => Err(Error::Win {
                    reason: "member 0 could not allocate the shared segment".into(),
                }),
            };
        }
        let part = Part {
            base: offset,
            size,
            disp_unit,
            heap: true,
            owned: own.and_then(Result::ok),
            extra: segs[0],
        };
        Win::build(comm, Ok(part), Flavor::Shared)
    }

    /// `MPI_Win_create_dynamic`: a window without memory; members
    /// [`attach`](Win::attach) regions and origins address them by their
    /// absolute address (displacement unit 1).
    pub fn create_dynamic(comm: &SimpleCommunicator) -> Result<Win> {
        let part = Part {
            base: 0,
            size: 0,
            disp_unit: 1,
            heap: true,
            owned: None,
            extra: 0,
        };
        Win::build(comm, Ok(part), Flavor::Dynamic)
    }

    /// `MPI_Win_attach`: makes `size` bytes at `base` of this process
    /// reachable through a dynamic window. [`Error::RmaFlavor`] on another
    /// flavor; [`Error::RmaAttach`] for a region that overlaps one
    /// attached, or when no slot is left.
    ///
    /// # Safety
    /// The memory stays valid for reads and writes until it is detached.
    pub unsafe fn attach(&self, base: *mut u8, size: u64) -> Result<()> {
        self.need_dynamic("MPI_Win_attach")?;
        if size == 0 {
            return Ok(());
        }
        let b = base as u64;
        let end = b
            .checked_add(size)
            .filter(|_| !base.is_null())
            .ok_or_else(|| Error::RmaAttach {
                reason: format!("{size} bytes at {b:#x} are not a region of memory"),
            })?;
        let head = self.block.head(self.me);
        // The regions are written by this process only (one writer).
        let _g = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        let mut free = None;
        for (i, r) in head.regions.iter().enumerate() {
            // Relaxed: this process is the only writer.
            let (rb, rl) = (
                r.base.load(Ordering::Relaxed),
                r.len.load(Ordering::Relaxed),
            );
            if rl == 0 {
                free.get_or_insert(i);
            } else if b < rb + rl && rb < end {
                return Err(Error::RmaAttach {
                    reason: format!(
                        "[{b:#x}, {end:#x}) overlaps the attached region [{rb:#x}, {:#x})",
                        rb + rl
                    ),
                });
            }
        }
        let i = free.ok_or_else(|| Error::RmaAttach {
            reason: format!("{} regions are attached already", shared::REGIONS),
        })?;
        let r = &head.regions[i];
        // Relaxed: the length published below orders it.
        r.base.store(b, Ordering::Relaxed);
        // SYNC POINT: Release pairs with the origins' Acquire load of the
        // length in `find_region`: they see the base with it.
        r.len.store(size, Ordering::Release);
        Ok(())
    }

    /// `MPI_Win_detach`: the region attached at `base` is no longer
    /// reachable. [`Error::RmaAttach`] if none is attached there.
    pub fn detach(&self, base: *const u8) -> Result<()> {
        self.need_dynamic("MPI_Win_detach")?;
        let b = base as u64;
        let head = self.block.head(self.me);
        let _g = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        for r in &head.regions {
            // Relaxed: this process is the only writer.
            if r.len.load(Ordering::Relaxed) != 0 && r.base.load(Ordering::Relaxed) == b {
                // Release: an origin that still sees the region (a program
                // that detaches during an access, which MPI forbids) reads
                // consistent values.
                r.len.store(0, Ordering::Release);
                return Ok(());
            }
        }
        Err(Error::RmaAttach {
            reason: format!("no region is attached at {b:#x}"),
        })
    }

    fn need_dynamic(&self, what: &str) -> Result<()> {
        if self.flavor != Flavor::Dynamic {
            return Err(Error::RmaFlavor {
                reason: format!(
                    "{what} needs a dynamic window, this one is {:?}",
                    self.flavor
                ),
            });
        }
        Ok(())
    }

    /// `MPI_Win_shared_query`: member `rank`'s part of a shared window as
    /// (size, displacement unit, address here); `PROC_NULL` names the first
    /// member with a part of nonzero size. [`Error::RmaFlavor`] on a window
    /// not made by [`Win::allocate_shared`].
    pub fn shared_query(&self, rank: i32) -> Result<(u64, u64, *mut u8)> {
        if self.flavor != Flavor::Shared {
            return Err(Error::RmaFlavor {
                reason: format!(
                    "MPI_Win_shared_query needs a shared window, this one is {:?}",
                    self.flavor
                ),
            });
        }
        let p = if rank == vci::PROC_NULL {
            self.peers
                .iter()
                .find(|p| p.size > 0)
                .copied()
                .unwrap_or(self.peers[0])
        } else {
            *self.peer(rank)?
        };
        Ok((p.size, p.disp_unit, p.base as usize as *mut u8))
    }

    #[inline]
    fn peer(&self, rank: i32) -> Result<&Peer> {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.peers.get(r))
            .ok_or(Error::Rank {
                rank,
                size: self.peers.len() as i32,
            })
    }

    // ------------------------------------------------------------ attributes

    /// `MPI_WIN_BASE`: this member's window memory (null for a dynamic
    /// window).
    pub fn base(&self) -> *mut u8 {
        self.peers[self.me as usize].base as usize as *mut u8
    }

    /// `MPI_WIN_SIZE`: its length in bytes.
    pub fn size(&self) -> u64 {
        self.peers[self.me as usize].size
    }

    /// `MPI_WIN_DISP_UNIT`.
    pub fn disp_unit(&self) -> u64 {
        self.peers[self.me as usize].disp_unit
    }

    /// `MPI_WIN_CREATE_FLAVOR`.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// `MPI_WIN_MODEL`.
    pub fn model(&self) -> Model {
        Model::Unified
    }

    /// `MPI_Win_get_group`: the window's members.
    pub fn group(&self) -> Group {
        self.comm.group()
    }

    /// This process's rank in the window's group.
    pub fn rank(&self) -> i32 {
        self.me as i32
    }

    /// The number of members.
    pub fn members(&self) -> i32 {
        self.peers.len() as i32
    }

    /// The window's communicator (a duplicate of the one it was made on).
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// `MPI_Win_get_name` (empty until set).
    pub fn name(&self) -> String {
        self.name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `MPI_Win_set_name`.
    pub fn set_name(&self, name: &str) {
        *self.name.lock().unwrap_or_else(|p| p.into_inner()) = name.to_owned();
    }

    /// `MPI_Win_set_info` (and the info of a creating call): reads the
    /// hints this library uses (see the module's "Hints"); keys it does
    /// not use, and values other than `true` / `false` for `no_locks`,
    /// are ignored as MPI allows. [`Error::RmaSync`] when `no_locks` is
    /// set to `true` while this process holds a lock of the window.
    pub fn set_info(&self, info: &Info) -> Result<()> {
        let no_locks = match info.get(hint::NO_LOCKS).map(str::trim) {
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            _ => return Ok(()),
        };
        let e = self.epochs();
        if no_locks && (e.nlocks > 0 || e.lock_all.is_some()) {
            return Err(sync_err(
                "MPI_Win_set_info: no_locks set to true while a lock is held",
            ));
        }
        // Relaxed: read by `lock` and `lock_all` of this process, after
        // this call (program order) or racing it (erroneous in MPI).
        self.no_locks.store(no_locks, Ordering::Relaxed);
        Ok(())
    }

    /// `MPI_Win_get_info`: the hints in effect (see the module's "Hints").
    pub fn info(&self) -> Info {
        let mut i = Info::new();
        let units = self.peers.iter().map(|p| p.disp_unit);
        let same_unit = units.clone().min() == units.max();
        let flag = |b: bool| if b { "true" } else { "false" };
        // Relaxed: as in `set_info`.
        let no_locks = self.no_locks.load(Ordering::Relaxed);
        let mut pairs = vec![
            (hint::NO_LOCKS, flag(no_locks)),
            (hint::ACCUMULATE_ORDERING, "rar,raw,war,waw"),
            (hint::ACCUMULATE_OPS, "same_op_no_op"),
            (hint::SAME_DISP_UNIT, flag(same_unit)),
        ];
        if self.flavor == Flavor::Shared {
            pairs.push((hint::ALLOC_SHARED_NONCONTIG, "false"));
        }
        for (k, v) in pairs {
            // The keys and values are short constants within MPI's limits.
            let _ = i.set(k, v);
        }
        i
    }

    /// [`Error::RmaSync`] if the `no_locks` hint is on.
    fn check_locks_allowed(&self, what: &str) -> Result<()> {
        // Relaxed: as in `set_info`.
        if self.no_locks.load(Ordering::Relaxed) {
            return Err(sync_err(format!(
                "{what} on a window whose no_locks hint is true"
            )));
        }
        Ok(())
    }

    /// Member `rank`'s user flag word in the window's shared block (a
    /// word any member may read and write without the owner, for
    /// signalling beside the window's memory).
    pub fn flag(&self, rank: i32) -> Result<&AtomicU64> {
        self.peer(rank)?;
        Ok(&self.block.head(rank as u32).flag)
    }

    // --------------------------------------------------------------- freeing

    /// `MPI_Win_free` (collective): [`Error::RmaSync`] while a lock or a
    /// post/start epoch is open at this process.
    pub fn free(mut self) -> Result<()> {
        self.check_quiet("MPI_Win_free")?;
        self.freed = true;
        fence(Ordering::SeqCst);
        self.comm.barrier()
    }

    /// Whether [`Win::free`] may be called now ([`Error::RmaSync`] while
    /// a lock or a post/start epoch is open at this process).
    pub fn check_free(&self) -> Result<()> {
        self.check_quiet("MPI_Win_free")
    }

    fn check_quiet(&self, what: &str) -> Result<()> {
        let e = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        if e.nlocks > 0 || e.lock_all.is_some() || e.access.is_some() || e.exposure.is_some() {
            return Err(sync_err(format!(
                "{what} while a lock or a post/start epoch is open"
            )));
        }
        Ok(())
    }

    // ------------------------------------------------------------ epochs

    fn epochs(&self) -> std::sync::MutexGuard<'_, Epochs> {
        self.epochs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_assert(a: i32) -> Result<()> {
        if a & !assert::ALL != 0 {
            return Err(arg(format!(
                "{a:#x} is not a combination of MPI_MODE_* assertions"
            )));
        }
        Ok(())
    }

    /// `MPI_Win_fence` (collective): completes the epoch before it (every
    /// operation has already completed; the barrier orders them before
    /// everybody's next accesses) and opens the next unless `assert` has
    /// `NOSUCCEED`. [`Error::RmaSync`] during a lock or post/start epoch.
    pub fn fence(&self, assert_: i32) -> Result<()> {
        Win::check_assert(assert_)?;
        self.check_quiet("MPI_Win_fence")?;
        // SeqCst: this process's stores to its window and its operations
        // happen before the barrier's publication (which releases them).
        fence(Ordering::SeqCst);
        self.comm.barrier()?;
        fence(Ordering::SeqCst);
        self.epochs().fence = assert_ & assert::NOSUCCEED == 0;
        Ok(())
    }

    /// `MPI_Win_lock`: opens a passive-target epoch at `rank`, taking its
    /// lock word (not with `NOCHECK`). [`Error::RmaSync`] if this process
    /// already has a lock on `rank`, `lock_all`, or an active-target epoch.
    pub fn lock(&self, kind: LockType, rank: i32, assert_: i32) -> Result<()> {
        Win::check_assert(assert_)?;
        if rank == vci::PROC_NULL {
            return Ok(());
        }
        self.peer(rank)?;
        self.check_locks_allowed("MPI_Win_lock")?;
        let nocheck = assert_ & assert::NOCHECK != 0;
        {
            let mut e = self.epochs();
            if e.lock_all.is_some() || e.access.is_some() {
                return Err(sync_err(format!(
                    "MPI_Win_lock on rank {rank} during another access epoch"
                )));
            }
            // A fence without NOSUCCEED leaves an epoch open that may hold
            // no operations: a lock ends it (as the peers' libraries do).
            e.fence = false;
            if e.locks[rank as usize].is_some() {
                return Err(sync_err(format!("rank {rank} is locked already")));
            }
            e.locks[rank as usize] = Some(Held { kind, nocheck });
            e.nlocks += 1;
            // Relaxed: as `all_locked` in `lock_all`.
            self.locked[rank as usize].store(true, Ordering::Relaxed);
        }
        if !nocheck {
            shared::lock(
                &self.block.head(rank as u32).lock,
                kind == LockType::Exclusive,
            );
        }
        Ok(())
    }

    /// `MPI_Win_unlock`: closes the epoch at `rank` (its operations are
    /// complete) and releases its lock word. [`Error::RmaSync`] without a
    /// lock on `rank`.
    pub fn unlock(&self, rank: i32) -> Result<()> {
        if rank == vci::PROC_NULL {
            return Ok(());
        }
        self.peer(rank)?;
        let held = {
            let mut e = self.epochs();
            let h = e.locks[rank as usize]
                .take()
                .ok_or_else(|| sync_err(format!("MPI_Win_unlock: rank {rank} is not locked")))?;
            e.nlocks -= 1;
            // Relaxed: as `all_locked` in `lock_all`.
            self.locked[rank as usize].store(false, Ordering::Relaxed);
            h
        };
        if held.nocheck {
            // SeqCst: the epoch's accesses happen before whatever this
            // process does next (an unlock releases them to the target's
            // later readers through their own synchronisation).
            fence(Ordering::SeqCst);
        } else {
            shared::unlock(
                &self.block.head(rank as u32).lock,
                held.kind == LockType::Exclusive,
            );
        }
        Ok(())
    }

    /// `MPI_Win_lock_all`: a shared lock on every member.
    pub fn lock_all(&self, assert_: i32) -> Result<()> {
        Win::check_assert(assert_)?;
        self.check_locks_allowed("MPI_Win_lock_all")?;
        let nocheck = assert_ & assert::NOCHECK != 0;
        {
            let mut e = self.epochs();
            if e.lock_all.is_some() || e.nlocks > 0 || e.access.is_some() {
                return Err(sync_err("MPI_Win_lock_all during another access epoch"));
            }
            e.fence = false;
            e.lock_all = Some(nocheck);
            // Relaxed: the flag only spares this process's own threads the
            // mutex; it is written under the mutex, and a thread that
            // races an operation with the unlock is erroneous in MPI.
            self.all_locked.store(true, Ordering::Relaxed);
        }
        if !nocheck {
            for r in 0..self.peers.len() as u32 {
                shared::lock(&self.block.head(r).lock, false);
            }
        }
        Ok(())
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(&self) -> Result<()> {
        let nocheck = {
            let mut e = self.epochs();
            let nocheck = e
                .lock_all
                .take()
                .ok_or_else(|| sync_err("MPI_Win_unlock_all without MPI_Win_lock_all"))?;
            // Relaxed: as in `lock_all`.
            self.all_locked.store(false, Ordering::Relaxed);
            nocheck
        };
        if nocheck {
            // SeqCst: as in `unlock`.
            fence(Ordering::SeqCst);
        } else {
            for r in 0..self.peers.len() as u32 {
                shared::unlock(&self.block.head(r).lock, false);
            }
        }
        Ok(())
    }

    #[inline]
    fn check_passive(&self, rank: i32, what: &str) -> Result<()> {
        if rank == vci::PROC_NULL {
            return Ok(());
        }
        self.peer(rank)?;
        if self.lock_held(rank as u32) {
            return Ok(());
        }
        let e = self.epochs();
        if e.lock_all.is_none() && e.locks[rank as usize].is_none() {
            return Err(sync_err(format!("{what}: rank {rank} is not locked")));
        }
        Ok(())
    }

    /// `MPI_Win_flush` / `MPI_Win_flush_local`: the operations to `rank`
    /// are complete (they are at their calls). No fence: the one order a
    /// completed put still needs, before this thread's later reads of
    /// window memory, is kept by those reads (see `ops`).
    #[inline]
    pub fn flush(&self, rank: i32) -> Result<()> {
        self.check_passive(rank, "MPI_Win_flush")?;
        store_order();
        Ok(())
    }

    /// `MPI_Win_flush_all` / `MPI_Win_flush_local_all`.
    pub fn flush_all(&self) -> Result<()> {
        // Relaxed: see the field.
        if !self.all_locked.load(Ordering::Relaxed) {
            let e = self.epochs();
            if e.lock_all.is_none() && e.nlocks == 0 {
                return Err(sync_err("MPI_Win_flush_all outside a passive-target epoch"));
            }
        }
        // No fence on x86-64: as in `flush`.
        store_order();
        Ok(())
    }

    /// `MPI_Win_sync`: the window's memory and its public copy agree (one
    /// and the same in the unified model): a full memory barrier.
    pub fn sync(&self) -> Result<()> {
        // SeqCst: orders this process's loads and stores to the window
        // around the call, as MPI_Win_sync promises.
        fence(Ordering::SeqCst);
        ops::fenced();
        Ok(())
    }

    fn group_ranks(&self, group: &Group, what: &str) -> Result<Vec<u32>> {
        let mine = self.comm.group();
        let mut v = Vec::with_capacity(group.size() as usize);
        for r in 0..group.size() {
            match group.translate_rank(r, &mine)? {
                Some(w) => v.push(w as u32),
                None => {
                    return Err(Error::Group {
                        reason: format!(
                            "{what}: member {r} of the group is not in the window's group"
                        ),
                    })
                }
            }
        }
        Ok(v)
    }

    /// `MPI_Win_post`: opens an exposure epoch to the origins of `group`
    /// (announced through the counters; returns at once).
    pub fn post(&self, group: &Group, assert_: i32) -> Result<()> {
        Win::check_assert(assert_)?;
        let origins = self.group_ranks(group, "MPI_Win_post")?;
        let mut e = self.epochs();
        if e.exposure.is_some() {
            return Err(sync_err("MPI_Win_post during an exposure epoch"));
        }
        // SeqCst: this process's stores to its window happen before the
        // publications below (which release them).
        fence(Ordering::SeqCst);
        for &o in &origins {
            e.posts[o as usize] = e.posts[o as usize].wrapping_add(1);
            shared::publish(self.block.post(self.me, o), e.posts[o as usize]);
        }
        e.exposure = Some(origins);
        Ok(())
    }

    /// `MPI_Win_start`: opens an access epoch to the targets of `group`.
    /// Returns at once; an operation to a target waits for its post (the
    /// first one only), unless `assert` has `NOCHECK`.
    pub fn start(&self, group: &Group, assert_: i32) -> Result<()> {
        Win::check_assert(assert_)?;
        let targets = self.group_ranks(group, "MPI_Win_start")?;
        let nocheck = assert_ & assert::NOCHECK != 0;
        let mut e = self.epochs();
        if e.access.is_some() || e.lock_all.is_some() || e.nlocks > 0 {
            return Err(sync_err("MPI_Win_start during another access epoch"));
        }
        e.fence = false;
        let mut acc = Vec::with_capacity(targets.len());
        for &t in &targets {
            e.starts[t as usize] = e.starts[t as usize].wrapping_add(1);
            acc.push((t, nocheck));
        }
        e.access = Some(acc);
        Ok(())
    }

    /// `MPI_Win_complete`: closes the access epoch; every target of the
    /// group learns it, whether it received an operation or not.
    pub fn complete(&self) -> Result<()> {
        let mut e = self.epochs();
        let acc = e
            .access
            .take()
            .ok_or_else(|| sync_err("MPI_Win_complete without MPI_Win_start"))?;
        // The publications below are Release: the epoch's operations
        // happen before the target's return from wait.
        for (t, _) in acc {
            shared::publish(self.block.complete(self.me, t), e.starts[t as usize]);
        }
        Ok(())
    }

    /// `MPI_Win_wait`: waits until every origin of the posted group has
    /// completed, and closes the exposure epoch.
    pub fn wait(&self) -> Result<()> {
        let (origins, posts) = {
            let e = self.epochs();
            let o = e
                .exposure
                .clone()
                .ok_or_else(|| sync_err("MPI_Win_wait without MPI_Win_post"))?;
            (o, e.posts.clone())
        };
        for &o in &origins {
            shared::reach(self.block.complete(o, self.me), posts[o as usize]);
        }
        self.epochs().exposure = None;
        Ok(())
    }

    /// `MPI_Win_test`: whether every origin of the posted group has
    /// completed (then the exposure epoch is closed, as by `wait`).
    pub fn test(&self) -> Result<bool> {
        let mut e = self.epochs();
        let origins = e
            .exposure
            .as_ref()
            .ok_or_else(|| sync_err("MPI_Win_test without MPI_Win_post"))?;
        let done = origins
            .iter()
            .all(|&o| shared::reached(self.block.complete(o, self.me), e.posts[o as usize]));
        if done {
            e.exposure = None;
        }
        Ok(done)
    }

    /// Checks that this process may access `rank` now; in a post/start
    /// epoch, waits for the target's post the first time.
    /// Whether this process holds `rank`'s lock or `lock_all`, without
    /// the mutex (`rank` is a member).
    #[inline]
    fn lock_held(&self, rank: u32) -> bool {
        // Relaxed: see the fields; set flags are this process's epochs.
        self.all_locked.load(Ordering::Relaxed)
            || self.locked[rank as usize].load(Ordering::Relaxed)
    }

    #[inline]
    fn check_access(&self, rank: u32, what: &str) -> Result<()> {
        if self.lock_held(rank) {
            return Ok(());
        }
        self.check_access_epochs(rank, what)
    }

    /// [`Win::check_access`] outside a lock: the epochs under the mutex.
    #[cold]
    fn check_access_epochs(&self, rank: u32, what: &str) -> Result<()> {
        let mut e = self.epochs();
        if e.fence || e.lock_all.is_some() || e.locks[rank as usize].is_some() {
            return Ok(());
        }
        let start = e.starts[rank as usize];
        let Some(acc) = e.access.as_mut() else {
            return Err(sync_err(format!(
                "{what} to rank {rank} outside an access epoch"
            )));
        };
        let Some(entry) = acc.iter_mut().find(|(t, _)| *t == rank) else {
            return Err(sync_err(format!(
                "{what} to rank {rank}, which is not in the group of MPI_Win_start"
            )));
        };
        if !entry.1 {
            shared::reach(self.block.post(rank, self.me), start);
            entry.1 = true;
        }
        Ok(())
    }
}

impl Drop for Win {
    fn drop(&mut self) {
        if !self.freed {
            // Collective, as MPI_Win_free: nobody may still reach the
            // memory when it goes back to the heap (with `owned`, after
            // this).
            fence(Ordering::SeqCst);
            let _ = self.comm.barrier();
        }
    }
}

/// What `flush` owes the stores of the operations it completes besides the
/// store-to-load order that `ops` keeps: their order before this thread's
/// later stores (a put after the flush, a message). x86-64 keeps stores in
/// order by itself (TSO), so there it is nothing; elsewhere a release fence.
#[inline(always)]
fn store_order() {
    #[cfg(not(target_arch = "x86_64"))]
    // Release: the completed operations' stores come before every later
    // store of this thread, as on x86-64 without a fence.
    std::sync::atomic::fence(Ordering::Release);
}
