//! Per-thread caches of free blocks: the allocator's lock-free fast path.
//!
//! Each thread keeps, per size class, a LIFO list of free blocks of its
//! rank's arena, linked through the blocks' first words. Allocation pops,
//! freeing pushes; only a thread whose list is empty (or over capacity)
//! takes the class lock, to move half a capacity's worth of blocks at once.
//! Blocks freed by one thread of a rank may be reused by another thread of
//! the same rank: the caches belong to the rank, not to a thread's blocks.
//!
//! A thread's cache lives in thread-local storage without a destructor of
//! its own; a separate guard with a destructor flushes it when the thread
//! exits. The guard is registered on the thread's first allocation, and a
//! state word makes every allocation that happens while registering (the C
//! runtime may allocate) or after the flush take the uncached path, so the
//! allocator never re-enters its own cache.

use crate::arena::{next_of, set_next, Arena, Chain};
use crate::error::Limit;
use crate::size_class::{cache_capacity, class_size, NCLASSES};
use crate::sync::mutex::RawShmMutex;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::Relaxed};

const UNINIT: u8 = 0;
const REGISTERING: u8 = 1;
const LIVE: u8 = 2;
const DEAD: u8 = 3;

#[derive(Clone, Copy)]
struct Bin {
    head: usize,
    count: u32,
}

/// One thread's cached blocks.
pub(crate) struct ThreadCache {
    bins: [Bin; NCLASSES],
    /// Bytes in the bins; written by the owning thread only (load + store,
    /// no read-modify-write), read by statistics under the registry lock.
    cached: AtomicUsize,
    /// The next cache in the process's registry (guarded by `REGISTRY`).
    next: AtomicPtr<ThreadCache>,
}

impl ThreadCache {
    const fn new() -> Self {
        ThreadCache {
            bins: [Bin { head: 0, count: 0 }; NCLASSES],
            cached: AtomicUsize::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    #[inline]
    fn add_cached(&self, delta: isize) {
        // Relaxed, and not an RMW: only this thread writes the counter.
        self.cached.store(
            self.cached.load(Relaxed).wrapping_add_signed(delta),
            Relaxed,
        );
    }
}

thread_local! {
    static STATE: Cell<u8> = const { Cell::new(UNINIT) };
    static CACHE: UnsafeCell<ThreadCache> = const { UnsafeCell::new(ThreadCache::new()) };
    static GUARD: Guard = const { Guard };
}

/// The process's live thread caches, for statistics.
static REGISTRY_LOCK: RawShmMutex = RawShmMutex::new();
static REGISTRY_HEAD: AtomicPtr<ThreadCache> = AtomicPtr::new(std::ptr::null_mut());

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = STATE.try_with(|s| s.set(DEAD));
        let _ = CACHE.try_with(|c| {
            let tc = c.get();
            unregister(tc);
            if let Some(arena) = crate::heap::own_arena() {
                // SAFETY: the cache is this thread's and the state is DEAD,
                // so no allocation on this thread touches it any more.
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
        // SAFETY: registered caches are alive while the registry lock is held.
        unsafe {
            total += (*cur).cached.load(Relaxed);
            cur = (*cur).next.load(Relaxed);
        }
    }
    total
}

/// Runs `f` with this thread's cache, or returns `None` when the thread
/// must take the uncached path (registering, exiting, or TLS gone).
#[inline]
fn with_cache<R>(f: impl FnOnce(&mut ThreadCache) -> R) -> Option<R> {
    let state = STATE.try_with(|s| s.get()).unwrap_or(DEAD);
    if state != LIVE && (state != UNINIT || !start_thread()) {
        return None;
    }
    CACHE
        .try_with(|c| {
            // SAFETY: the cache belongs to this thread, and nothing inside
            // the allocator allocates or frees through the cache while this
            // borrow is live (arena code only takes locks and links blocks),
            // so the mutable borrow is unique.
            f(unsafe { &mut *c.get() })
        })
        .ok()
}

#[cold]
fn start_thread() -> bool {
    STATE.with(|s| s.set(REGISTERING));
    // Touching the guard registers its destructor; allocations made while
    // doing so see REGISTERING and bypass the cache.
    if GUARD.try_with(|_| ()).is_err() {
        STATE.with(|s| s.set(DEAD));
        return false;
    }
    CACHE.with(|c| register(c.get()));
    STATE.with(|s| s.set(LIVE));
    true
}

/// Allocates one block of `class`.
#[inline]
pub(crate) fn alloc(arena: &Arena, class: usize) -> Result<usize, Limit> {
    with_cache(|tc| {
        let bin = &mut tc.bins[class];
        if bin.head != 0 {
            let b = bin.head;
            // SAFETY: `b` is a free block on this thread's list.
            bin.head = unsafe { next_of(b) };
            bin.count -= 1;
            tc.add_cached(-(class_size(class) as isize));
            Ok(b)
        } else {
            refill(arena, tc, class)
        }
    })
    .unwrap_or_else(|| {
        arena
            .class_take(&crate::heap::attached(), class, 1)
            .map(|c| c.head)
    })
}

#[cold]
fn refill(arena: &Arena, tc: &mut ThreadCache, class: usize) -> Result<usize, Limit> {
    let want = (cache_capacity(class) / 2).max(1);
    let chain = arena.class_take(&crate::heap::attached(), class, want)?;
    let first = chain.head;
    // SAFETY: the chain's blocks are ours.
    let rest = unsafe { next_of(first) };
    let n = chain.count - 1;
    if n > 0 {
        let bin = &mut tc.bins[class];
        debug_assert_eq!(bin.count, 0);
        bin.head = rest;
        bin.count = n as u32;
        tc.add_cached((n * class_size(class)) as isize);
    }
    Ok(first)
}

/// Frees the block at `block` (the start of a block of `class` in `arena`,
/// the caller's own arena).
#[inline]
pub(crate) fn free(arena: &Arena, class: usize, block: usize) {
    let done = with_cache(|tc| {
        let bin = &mut tc.bins[class];
        // SAFETY: the caller hands over the block; it becomes a list node.
        unsafe { set_next(block, bin.head) };
        bin.head = block;
        bin.count += 1;
        let over = bin.count as usize > cache_capacity(class);
        tc.add_cached(class_size(class) as isize);
        if over {
            flush_half(arena, tc, class);
        }
    });
    if done.is_none() {
        arena.free_local(block);
    }
}

#[cold]
fn flush_half(arena: &Arena, tc: &mut ThreadCache, class: usize) {
    let bin = &mut tc.bins[class];
    let keep = bin.count as usize / 2;
    // Keep the most recently freed (warmest) blocks, return the rest.
    let mut last_kept = bin.head;
    for _ in 1..keep {
        // SAFETY: walking this thread's list within its length.
        last_kept = unsafe { next_of(last_kept) };
    }
    let (give_head, give_count) = if keep == 0 {
        let h = bin.head;
        bin.head = 0;
        (h, bin.count as usize)
    } else {
        // SAFETY: as above; cutting the list after `keep` blocks.
        let h = unsafe { next_of(last_kept) };
        // SAFETY: as above.
        unsafe { set_next(last_kept, 0) };
        (h, bin.count as usize - keep)
    };
    bin.count = keep as u32;
    tc.add_cached(-((give_count * class_size(class)) as isize));
    arena.class_give(
        class,
        Chain {
            head: give_head,
            count: give_count,
        },
    );
}

fn flush_all(arena: &Arena, tc: &mut ThreadCache) {
    for class in 0..NCLASSES {
        let bin = &mut tc.bins[class];
        if bin.count > 0 {
            let chain = Chain {
                head: bin.head,
                count: bin.count as usize,
            };
            *bin = Bin { head: 0, count: 0 };
            arena.class_give(class, chain);
        }
    }
    tc.cached.store(0, Relaxed);
}

/// Returns every block cached by the calling thread to its arena.
pub(crate) fn flush_current(arena: &Arena) {
    let _ = with_cache(|tc| flush_all(arena, tc));
}
