//! The allocator's front end: [`ShmHeap`] as `#[global_allocator]`, attach,
//! and queries by address.
//!
//! Until the process attaches to a node heap ([`attach`] or
//! [`attach_from_env`]) every request goes to the system allocator; after
//! that every request of any size is served from the rank's own arena, and
//! frees are routed by address: system memory to the system allocator, the
//! rank's own blocks to its thread cache or arena, another rank's blocks to
//! that rank's remote-free stack.
//!
//! # Example
//! ```
//! use shmheap::ShmHeap;
//! use std::alloc::{GlobalAlloc, Layout};
//!
//! // In a program: `#[global_allocator] static A: ShmHeap = ShmHeap::new();`
//! let heap = ShmHeap::new();
//! shmheap::attach_from_env().unwrap(); // a world of one rank without a launcher
//! let layout = Layout::from_size_align(100, 8).unwrap();
//! let p = unsafe { heap.alloc(layout) };
//! assert!(shmheap::is_shared(p));
//! assert_eq!(shmheap::owner_of(p), Some(0));
//! unsafe { heap.dealloc(p, layout) };
//! ```

use crate::arena::{Arena, ArenaStats, KIND_CLASS, KIND_HUGE};
use crate::env;
use crate::error::{Error, Exhausted, Limit, Result};
use crate::segment::{self, Segment, SegmentFile, SegmentSpec};
use crate::size_class::{class_for, class_size, MAX_CLASS_SIZE, NCLASSES};
use crate::tcache;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Classes from here on have one block per span and track whether their
/// memory was ever handed out, so zeroed allocation can skip `memset`.
const FIRST_SINGLE_CLASS: usize = {
    let mut c = 0;
    while c < NCLASSES && crate::size_class::span_blocks(c) > 1 {
        c += 1;
    }
    c
};

/// Blocks from this size on take the dirty-span check on zeroed allocation.
const _: () = assert!(class_size(FIRST_SINGLE_CLASS) > 128 << 10);

static OWN: AtomicPtr<Arena> = AtomicPtr::new(ptr::null_mut());

/// This process's own arena, once attached.
#[inline]
pub(crate) fn own_arena() -> Option<&'static Arena> {
    // SYNC POINT: Acquire pairs with the Release store in `attach`, so the
    // arena's initialisation is visible.
    let a = OWN.load(Ordering::Acquire);
    // SAFETY: a non-null OWN points to the initialised arena of this
    // process, inside a segment that stays mapped until the process exits.
    (!a.is_null()).then(|| unsafe { &*a })
}

/// Attaches this process to the node heap at `path` as local rank
/// `local_rank` of `local_size`, and initialises its arena. From then on
/// [`ShmHeap`] serves from the arena.
pub fn attach(path: &Path, local_rank: u32, local_size: u32) -> Result<Segment> {
    let seg = Segment::attach(path, local_rank, local_size)?;
    // SAFETY: the segment is attached in this process as `local_rank`, and
    // no block of this arena exists yet.
    let arena = unsafe { Arena::init(&seg, local_rank) }
        .map_err(|l| Error::Exhausted(seg.exhausted(0, l)))?;
    // SYNC POINT: Release publishes the initialised arena to `own_arena`.
    OWN.store(arena as *const Arena as *mut Arena, Ordering::Release);
    Segment::publish_current(&seg);
    Ok(seg)
}

/// Attaches as the launcher told this rank (`HMPI_SHM_NAME`,
/// `HMPI_LOCAL_RANK`, `HMPI_LOCAL_SIZE`); without a launcher, creates a
/// private node heap for a world of one rank.
pub fn attach_from_env() -> Result<Segment> {
    let name = env::read(env::SHM_NAME, "a segment path", |s| Some(s.to_owned()))?;
    match name {
        Some(path) => {
            let rank = env::read(env::LOCAL_RANK, "a rank number", |s| s.parse::<u32>().ok())?;
            let size = env::read(env::LOCAL_SIZE, "a rank count", |s| s.parse::<u32>().ok())?;
            let (Some(rank), Some(size)) = (rank, size) else {
                return Err(Error::Config {
                    var: env::LOCAL_RANK,
                    value: String::new(),
                    reason: format!(
                        "{} is set, so {} and {} must be too",
                        env::SHM_NAME,
                        env::LOCAL_RANK,
                        env::LOCAL_SIZE
                    ),
                });
            };
            let seg = attach(Path::new(&path), rank, size)?;
            keep_from_children(&path);
            Ok(seg)
        }
        None => {
            let spec = SegmentSpec::from_env(1)?;
            let file = SegmentFile::create(&spec, &format!("solo{}", std::process::id()))?;
            attach(file.path(), 0, 1) // the file has no name; the mapping keeps it
        }
    }
}

/// Marks the launcher's descriptor of the segment (`/proc/self/fd/N`, which
/// this process inherited) close-on-exec, so that programs this rank starts
/// cannot reach the segment through it and attach as the same rank. The
/// attach has its own descriptor.
fn keep_from_children(path: &str) {
    let Some(n) = path.strip_prefix("/proc/self/fd/") else {
        return;
    };
    let Ok(n) = n.parse::<std::os::fd::RawFd>() else {
        return;
    };
    // SAFETY: `n` was just opened successfully through its /proc path, so
    // it is an open descriptor; only its close-on-exec flag changes.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
    let _ = nix::fcntl::fcntl(
        fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
}

/// Whether this process is attached to a node heap.
pub fn is_attached() -> bool {
    own_arena().is_some()
}

/// Whether `ptr` points into the node heap (of any rank).
#[inline]
pub fn is_shared<T: ?Sized>(ptr: *const T) -> bool {
    segment::contains(ptr as *const u8 as usize)
}

/// The local rank whose arena holds `ptr`, if it is in the node heap.
pub fn owner_of<T: ?Sized>(ptr: *const T) -> Option<u32> {
    Segment::current()?.owner_of(ptr as *const u8 as usize)
}

fn arena_of(seg: &Segment, addr: usize) -> Option<&'static Arena> {
    let rank = seg.owner_of(addr)?;
    let a = Arena::get(seg, rank)?;
    a.contains(addr).then_some(a)
}

/// Usable bytes of the heap block that starts at `ptr` (at least what was
/// requested), or `None` if `ptr` is not in the node heap.
pub fn usable_size<T: ?Sized>(ptr: *const T) -> Option<usize> {
    let seg = Segment::current()?;
    let addr = ptr as *const u8 as usize;
    arena_of(&seg, addr).map(|a| a.usable_size(addr))
}

/// Counters of local rank `rank`'s arena (`None` if not attached, out of
/// range, or not yet initialised by its owner). For the caller's own arena
/// this first reclaims pending remote frees and counts its thread caches.
pub fn stats(rank: u32) -> Option<ArenaStats> {
    let seg = Segment::current()?;
    if rank >= seg.ranks() {
        return None;
    }
    let a = Arena::get(&seg, rank)?;
    if rank == seg.local_rank() {
        a.drain_remote();
        let mut s = a.stats();
        s.cached_bytes = tcache::cached_bytes();
        Some(s)
    } else {
        Some(a.stats())
    }
}

/// Counters of this process's own arena.
pub fn local_stats() -> Option<ArenaStats> {
    stats(Segment::current()?.local_rank())
}

/// Reclaims the blocks that other ranks have freed into this rank's arena;
/// returns how many. (The allocator also does this by itself whenever it
/// refills a thread cache.)
pub fn drain_remote_frees() -> usize {
    own_arena().map_or(0, |a| a.drain_remote())
}

/// Returns the calling thread's cached blocks to its arena.
pub fn flush_thread_cache() {
    if let Some(a) = own_arena() {
        tcache::flush_current(a);
    }
}

/// A block of `class` from this thread's cache, refilled if empty.
#[inline]
fn cached_alloc(arena: &'static Arena, class: usize) -> Result<usize, Limit> {
    match tcache::alloc_fast(class) {
        0 => tcache::alloc_slow(arena, class),
        b => Ok(b),
    }
}

/// The allocation fast path: a block from this thread's cache for the
/// classes that need no bookkeeping, or 0 (then take [`heap_alloc`]).
#[inline(always)]
fn alloc_fast(size: usize, align: usize) -> usize {
    match class_for(size, align) {
        Some(class) if class < FIRST_SINGLE_CLASS => tcache::alloc_fast(class),
        _ => 0,
    }
}

/// Allocates in the heap (attached case): the block, and whether its
/// memory may be non-zero (only spans of single-block classes and huge
/// spans know that they were never handed out; the answer marks them as
/// handed out now). `Err` carries the limit hit.
fn heap_alloc_block(
    arena: &'static Arena,
    size: usize,
    align: usize,
) -> Result<(usize, bool), Exhausted> {
    let attempt = || -> Result<(usize, bool), Limit> {
        match class_for(size, align) {
            Some(class) if class < FIRST_SINGLE_CLASS => Ok((cached_alloc(arena, class)?, true)),
            Some(class) => {
                let b = cached_alloc(arena, class)?;
                Ok((b, arena.take_dirty(b)))
            }
            None => {
                let b = arena.alloc_huge(&attached(), size, align)?;
                Ok((b, arena.take_dirty(b)))
            }
        }
    };
    match attempt() {
        Ok(r) => Ok(r),
        // Blocks freed by other ranks may make room: reclaim, then retry.
        Err(_) if arena.has_remote_frees() => {
            arena.drain_remote();
            attempt().map_err(|l| attached().exhausted(size, l))
        }
        Err(l) => Err(attached().exhausted(size, l)),
    }
}

/// Allocates in the heap (attached case).
fn heap_alloc(arena: &'static Arena, size: usize, align: usize) -> Result<usize, Exhausted> {
    heap_alloc_block(arena, size, align).map(|(b, _)| b)
}

/// The attached segment; only called where a heap block or arena exists.
pub(crate) fn attached() -> Segment {
    Segment::current().expect("heap memory exists only once the segment is attached")
}

/// Allocates zeroed memory in the heap, skipping `memset` for memory that
/// was never handed out.
fn heap_alloc_zeroed(arena: &'static Arena, size: usize, align: usize) -> Result<usize, Exhausted> {
    let (b, maybe_dirty) = heap_alloc_block(arena, size, align)?;
    if maybe_dirty {
        // SAFETY: `b` is a fresh block of at least `size` bytes.
        unsafe { ptr::write_bytes(b as *mut u8, 0, size) };
    } else {
        // Never handed out: zero except the free-list link word that the
        // allocator itself wrote.
        // SAFETY: blocks are at least 16 bytes.
        unsafe { (b as *mut u64).write(0) };
    }
    Ok(b)
}

/// Frees a block of the caller's own arena that the cache did not take.
#[cold]
#[inline(never)]
fn free_own_slow(own: &'static Arena, kind: u8, class: usize, addr: usize) {
    match kind {
        KIND_CLASS => tcache::free_slow(own, class, addr),
        KIND_HUGE => own.free_huge(addr),
        _ => crate::diag::write_stderr_fmt(format_args!(
            "hmpi: free of {addr:#x}, which is not a live block (page kind {kind})\n"
        )),
    }
}

/// Allocation that missed the fast path; reports exhaustion.
#[cold]
#[inline(never)]
fn alloc_slow(arena: &'static Arena, layout: Layout, zeroed: bool) -> *mut u8 {
    let r = if zeroed {
        heap_alloc_zeroed(arena, layout.size(), layout.align())
    } else {
        heap_alloc(arena, layout.size(), layout.align())
    };
    match r {
        Ok(b) => b as *mut u8,
        Err(e) => {
            report_exhausted(&e);
            ptr::null_mut()
        }
    }
}

/// Frees a heap address outside the caller's own arena.
#[cold]
fn free_remote(addr: usize) {
    let seg = attached();
    match arena_of(&seg, addr) {
        Some(arena) => arena.remote_push(addr),
        None => crate::diag::write_stderr_fmt(format_args!(
            "hmpi: free of {addr:#x}, which is in the node segment but not in an arena's data\n"
        )),
    }
}

fn report_exhausted(e: &Exhausted) {
    crate::diag::write_stderr_fmt(format_args!("hmpi: {e}\n"));
}

/// The node heap as a Rust allocator.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: shmheap::ShmHeap = shmheap::ShmHeap::new();
/// ```
///
/// Before the process attaches to a node heap it serves from the system
/// allocator. An exhausted arena returns null (Rust then aborts with
/// "memory allocation failed") after printing which limit was hit and the
/// variable that raises it; use [`ShmHeap::try_alloc`] for an error value.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShmHeap;

impl ShmHeap {
    /// The allocator (it has no state of its own: the heap is per process).
    pub const fn new() -> Self {
        ShmHeap
    }

    /// Allocates `layout` in the node heap, or says why it cannot.
    pub fn try_alloc(&self, layout: Layout) -> Result<NonNull<u8>> {
        // Not `ok_or(Error::NotAttached)`: that builds the error on every
        // call and runs `Error`'s drop glue when the arena is there.
        let Some(arena) = own_arena() else {
            return Err(Error::NotAttached);
        };
        let b = heap_alloc(arena, layout.size(), layout.align())?;
        Ok(NonNull::new(b as *mut u8).expect("heap addresses are non-zero"))
    }

    /// Like [`ShmHeap::try_alloc`], zeroed.
    pub fn try_alloc_zeroed(&self, layout: Layout) -> Result<NonNull<u8>> {
        let Some(arena) = own_arena() else {
            return Err(Error::NotAttached);
        };
        let b = heap_alloc_zeroed(arena, layout.size(), layout.align())?;
        Ok(NonNull::new(b as *mut u8).expect("heap addresses are non-zero"))
    }
}

// SAFETY: every block handed out is at least `layout.size()` bytes, aligned
// to `layout.align()` (size classes and huge spans guarantee both), not
// handed out again until freed; frees are routed by address to the
// allocator that made the block; realloc copies min(old, new) bytes.
unsafe impl GlobalAlloc for ShmHeap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match own_arena() {
            Some(arena) => match alloc_fast(layout.size(), layout.align()) {
                0 => alloc_slow(arena, layout, false),
                b => b as *mut u8,
            },
            // SAFETY: forwarding the caller's valid layout.
            None => unsafe { System.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let addr = ptr as usize;
        if let Some(own) = own_arena() {
            if own.contains(addr) {
                let (kind, class) = own.kind_class(addr);
                if kind == KIND_CLASS && tcache::free_fast(class, addr) {
                    return;
                }
                return free_own_slow(own, kind, class, addr);
            }
        }
        if segment::contains(addr) {
            free_remote(addr);
        } else {
            // SAFETY: memory outside the segment came from System.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match own_arena() {
            Some(arena) => alloc_slow(arena, layout, true),
            // SAFETY: forwarding the caller's valid layout.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let addr = ptr as usize;
        if !segment::contains(addr) {
            // SAFETY: memory outside the segment came from System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let seg = attached();
        let Some(arena) = arena_of(&seg, addr) else {
            return ptr::null_mut();
        };
        let usable = arena.usable_size(addr);
        if new_size <= usable && (new_size >= usable / 2 || usable <= 64) {
            return ptr;
        }
        if new_size > usable
            && new_size > MAX_CLASS_SIZE
            && seg.owner_of(addr) == Some(seg.local_rank())
            && arena.kind_class(addr).0 == KIND_HUGE
            && arena.grow_huge_in_place(&seg, addr, new_size)
        {
            return ptr;
        }
        // SAFETY: the caller guarantees new_size is a valid size for the
        // alignment of `layout`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_layout` has non-zero size (GlobalAlloc::realloc's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live and distinct; copying the smaller size.
            unsafe {
                ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}
