//! Per-thread caches of free blocks: the allocator's lock-free fast path.
//!
//! Each thread keeps, per size class, a LIFO list of free blocks of its
//! rank's arena, linked through the blocks' first words. Allocation pops,
//! freeing pushes; only a thread whose list is empty (or over capacity)
//! takes the class lock, to move a batch of blocks at once. Blocks freed by
//! one thread of a rank may be reused by another thread of the same rank:
//! the caches belong to the rank, not to a thread's blocks.
//!
//! A thread's cache lives in thread-local storage without a destructor of
//! its own; a separate guard with a destructor flushes it when the thread
//! exits. The guard is registered on the thread's first allocation, and the
//! cache's state makes every allocation that happens while registering (the
//! C runtime may allocate) or after the flush take the uncached path, so the
//! allocator never re-enters its own cache. A cache that is not live is
//! always empty, so the allocation fast path needs no state check.

use crate::arena::{next_of, set_next, Arena, Chain};
use crate::error::Limit;
use crate::size_class::{cache_capacity, class_size, refill_count, NCLASSES};
use crate::sync::mutex::RawShmMutex;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering::Relaxed};

const UNINIT: u8 = 0;
const REGISTERING: u8 = 1;
const LIVE: u8 = 2;
const DEAD: u8 = 3;

struct Bin {
    head: usize,
    /// Refills since the last flush: each consecutive refill takes twice as
    /// many blocks (up to half the capacity), so a thread that keeps
    /// running dry takes few trips to the class lock, while one that needs
    /// a single large block takes one.
    streak: u8,
    /// Blocks on the list. Written by the owning thread only (load + store,
    /// no read-modify-write, so it costs what a plain field costs); read by
    /// statistics from other threads under the registry lock.
    count: AtomicU32,
}

/// One thread's cached blocks.
pub(crate) struct ThreadCache {
    bins: [Bin; NCLASSES],
    state: u8,
    /// The next cache in the process's registry (guarded by `REGISTRY_LOCK`).
    next: AtomicPtr<ThreadCache>,
}

impl ThreadCache {
    const fn new() -> Self {
        ThreadCache {
            bins: [const {
                Bin {
                    head: 0,
                    streak: 0,
                    count: AtomicU32::new(0),
                }
            }; NCLASSES],
            state: UNINIT,
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

thread_local! {
    static CACHE: UnsafeCell<ThreadCache> = const { UnsafeCell::new(ThreadCache::new()) };
    static GUARD: Guard = const { Guard };
}

/// The process's live thread caches, for statistics.
static REGISTRY_LOCK: RawShmMutex = RawShmMutex::new();
static REGISTRY_HEAD: AtomicPtr<ThreadCache> = AtomicPtr::new(std::ptr::null_mut());

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        CACHE.with(|c| {
            let tc = c.get();
            // SAFETY: the cache is this thread's; no other borrow of it is
            // live while a thread-local destructor runs.
            unsafe { (*tc).state = DEAD };
            unregister(tc);
            if let Some(arena) = crate::heap::own_arena() {
                // SAFETY: as above; with the state DEAD no allocation on
                // this thread touches the cache any more.
                flush_all(arena, unsafe { &mut *tc });
            }
        });
    }
}

fn register(tc: *mut ThreadCache) {
    let _g = REGISTRY_LOCK.lock();
    // SAFETY: `tc` is this thread's cache, alive until its guard runs
    // `unregister`; the links are guarded by the registry lock.
    unsafe { (*tc).next.store(REGISTRY_HEAD.load(Relaxed), Relaxed) };
    REGISTRY_HEAD.store(tc, Relaxed);
}

fn unregister(tc: *mut ThreadCache) {
    let _g = REGISTRY_LOCK.lock();
    let mut link: &AtomicPtr<ThreadCache> = &REGISTRY_HEAD;
    loop {
        let cur = link.load(Relaxed);
        if cur.is_null() {
            return;
        }
        // SAFETY: registered caches stay alive while registered, and the
        // registry lock is held.
        let next = unsafe { &(*cur).next };
        if cur == tc {
            link.store(next.load(Relaxed), Relaxed);
            return;
        }
        link = next;
    }
}

/// Bytes held in the thread caches of this process.
pub(crate) fn cached_bytes() -> usize {
    let _g = REGISTRY_LOCK.lock();
    let mut total = 0;
    let mut cur = REGISTRY_HEAD.load(Relaxed);
    while !cur.is_null() {
        // SAFETY: registered caches are alive while the registry lock is
        // held; only their atomic counts and links are read.
        unsafe {
            for (class, bin) in (*cur).bins.iter().enumerate() {
                total += bin.count.load(Relaxed) as usize * class_size(class);
            }
            cur = (*cur).next.load(Relaxed);
        }
    }
    total
}

/// Runs `f` on this thread's cache.
#[inline(always)]
fn with_cache<R>(f: impl FnOnce(&mut ThreadCache) -> R) -> R {
    CACHE.with(|c| {
        // SAFETY: the cache belongs to this thread, and nothing inside the
        // allocator allocates or frees through the cache while this borrow
        // is live (arena code only takes locks and links blocks), so the
        // mutable borrow is unique.
        f(unsafe { &mut *c.get() })
    })
}

/// Pops a cached block of `class`, or returns 0 (then call [`alloc_slow`]).
#[inline(always)]
pub(crate) fn alloc_fast(class: usize) -> usize {
    with_cache(|tc| {
        let bin = &mut tc.bins[class];
        let b = bin.head;
        if b != 0 {
            // SAFETY: `b` is a free block on this thread's list.
            bin.head = unsafe { next_of(b) };
            bin.count.store(bin.count.load(Relaxed) - 1, Relaxed);
        }
        b
    })
}

/// Allocates one block of `class` when the cache has none: refills the
/// cache from the arena (or takes one block directly if this thread has no
/// usable cache).
#[cold]
#[inline(never)]
pub(crate) fn alloc_slow(arena: &Arena, class: usize) -> Result<usize, Limit> {
    let live = with_cache(|tc| tc.state == LIVE) || start_thread();
    if !live {
        return arena
            .class_take(&crate::heap::attached(), class, 1)
            .map(|c| c.head);
    }
    let b = alloc_fast(class);
    if b != 0 {
        return Ok(b);
    }
    let want = with_cache(|tc| {
        let bin = &mut tc.bins[class];
        let n = (refill_count(class) << bin.streak).min(cache_capacity(class) / 2);
        bin.streak = (bin.streak + 1).min(8);
        n.max(1)
    });
    let chain = arena.class_take(&crate::heap::attached(), class, want)?;
    let first = chain.head;
    // SAFETY: the chain's blocks are ours.
    let rest = unsafe { next_of(first) };
    let n = chain.count - 1;
    if n > 0 {
        with_cache(|tc| {
            let bin = &mut tc.bins[class];
            debug_assert_eq!(bin.head, 0);
            bin.head = rest;
            bin.count.store(n as u32, Relaxed);
        });
    }
    Ok(first)
}

/// Registers this thread's cache; false if the thread cannot have one
/// (it is registering or exiting).
#[cold]
fn start_thread() -> bool {
    let state = with_cache(|tc| tc.state);
    if state != UNINIT {
        return false;
    }
    with_cache(|tc| tc.state = REGISTERING);
    // Touching the guard registers its destructor; allocations made while
    // doing so see REGISTERING and bypass the cache.
    if GUARD.try_with(|_| ()).is_err() {
        with_cache(|tc| tc.state = DEAD);
        return false;
    }
    CACHE.with(|c| register(c.get()));
    with_cache(|tc| tc.state = LIVE);
    true
}

/// Pushes the block at `block` (of `class`, in the caller's own arena) on
/// this thread's cache; false if it must take [`free_slow`] instead.
#[inline(always)]
pub(crate) fn free_fast(class: usize, block: usize) -> bool {
    with_cache(|tc| {
        let live = tc.state == LIVE;
        let bin = &mut tc.bins[class];
        let count = bin.count.load(Relaxed);
        if !live || count as usize >= cache_capacity(class) {
            return false;
        }
        // SAFETY: the caller hands over the block; it becomes a list node.
        unsafe { set_next(block, bin.head) };
        bin.head = block;
        bin.count.store(count + 1, Relaxed);
        true
    })
}

/// Frees a block of `class` when the cache is full or not live: returns
/// half of the cache to the arena first, or frees directly.
#[cold]
#[inline(never)]
pub(crate) fn free_slow(arena: &Arena, class: usize, block: usize) {
    let live = with_cache(|tc| tc.state == LIVE) || start_thread();
    if !live {
        arena.free_local(block);
        return;
    }
    with_cache(|tc| flush_half(arena, tc, class));
    if !free_fast(class, block) {
        arena.free_local(block);
    }
}

fn flush_half(arena: &Arena, tc: &mut ThreadCache, class: usize) {
    let bin = &mut tc.bins[class];
    let count = bin.count.load(Relaxed) as usize;
    let keep = count / 2;
    if count == 0 {
        return;
    }
    // Keep the most recently freed (warmest) blocks, return the rest.
    let give_head = if keep == 0 {
        std::mem::replace(&mut bin.head, 0)
    } else {
        let mut last_kept = bin.head;
        for _ in 1..keep {
            // SAFETY: walking this thread's list within its length.
            last_kept = unsafe { next_of(last_kept) };
        }
        // SAFETY: as above; cutting the list after `keep` blocks.
        let h = unsafe { next_of(last_kept) };
        // SAFETY: as above.
        unsafe { set_next(last_kept, 0) };
        h
    };
    bin.count.store(keep as u32, Relaxed);
    bin.streak = 0;
    arena.class_give(
        class,
        Chain {
            head: give_head,
            count: count - keep,
        },
    );
}

fn flush_all(arena: &Arena, tc: &mut ThreadCache) {
    for (class, bin) in tc.bins.iter_mut().enumerate() {
        let count = bin.count.load(Relaxed) as usize;
        if count > 0 {
            let chain = Chain {
                head: std::mem::replace(&mut bin.head, 0),
                count,
            };
            bin.count.store(0, Relaxed);
            arena.class_give(class, chain);
        }
    }
}

/// Returns every block cached by the calling thread to its arena.
pub(crate) fn flush_current(arena: &Arena) {
    with_cache(|tc| flush_all(arena, tc));
}
