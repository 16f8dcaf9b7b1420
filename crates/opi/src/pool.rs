//! Buffer pools and the pooled buffer [`OpiBuf<T>`] (the papers' `OPI_Alloc`
//! / `OPI_Free`, `notes.md` §4).
//!
//! Ownership passing turns communication into a stream of buffers that are
//! allocated, filled, given, taken, read and freed — often by another rank
//! than the one that allocated them. A pool keeps freed buffers for reuse:
//!
//! * sizes are rounded up to whole pages ([`PAGE`] bytes), so buffers of
//!   similar sizes are interchangeable;
//! * the free list is kept in most-recently-used order and searched from
//!   the most recent end for the **first fit**: a buffer at least as large
//!   as the request (and at most [`MAX_WASTE`] times as large, so that a
//!   64 MiB buffer is not spent on an 8-byte request) with enough
//!   alignment;
//! * when a list holds more than [`max_blocks`] buffers the least recently
//!   used ones go back to the heap, down to three quarters of the limit
//!   (`HMPI_OPI_POOL_MAX`, default 64).
//!
//! Two policies decide where a freed buffer goes ([`Policy`],
//! `HMPI_OPI_POOL_POLICY=freeing|allocating`):
//!
//! * [`Policy::FreeingRank`] (default): to the pool of the rank — in fact of
//!   the thread — that frees it. No lock and no atomic operation: each
//!   thread has its own list. Buffers migrate to the ranks that receive
//!   more than they send; the trim bounds that.
//! * [`Policy::AllocatingRank`]: back to the pool of the rank whose arena
//!   holds it. A rank's own buffers go to the freeing thread's list; another
//!   rank's are pushed on that rank's return stack in the node heap (one
//!   compare-and-swap, no lock); the owner takes the whole stack with one
//!   swap when its list has no fit. The stack's address is published in
//!   registry slot [`POOL_SLOT`].
//!
//! [`stats`] reports the calling thread's counters; [`release`] empties its
//! list (and, for the allocating-rank policy, the rank's return stack) back
//! to the heap.
//!
//! # Example
//! ```
//! use opi::OpiBuf;
//!
//! let mut b = OpiBuf::<f64>::with_capacity(100).unwrap();
//! assert!(b.capacity() >= 512); // 100 × 8 bytes rounded up to a 4 KiB page
//! b.extend_from_slice(&[1.0, 2.0]);
//! b.push(3.0);
//! assert_eq!(&b[..], &[1.0, 2.0, 3.0]);
//! let p = b.as_ptr();
//! drop(b); // back to this thread's pool
//! let c = OpiBuf::<u8>::with_capacity(10).unwrap();
//! assert_eq!(c.as_ptr() as usize, p as usize); // the same buffer, reused
//! assert!(opi::pool::stats().hits >= 1);
//! ```

use crate::error::heap_error;
use hmpi_core::Error;
use std::alloc::Layout;
use std::cell::RefCell;
use std::fmt;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Buffer sizes are rounded up to multiples of this (the OS page).
pub const PAGE: usize = 4096;
/// A free buffer more than this many times the (rounded) request is not
/// used for it.
pub const MAX_WASTE: usize = 4;
/// Default of [`max_blocks`].
pub const DEFAULT_MAX_BLOCKS: usize = 64;
/// Registry slot (`shmheap::Segment::publish`) where a rank publishes its
/// return stack for the allocating-rank policy. OPI owns slots 48..=51.
pub const POOL_SLOT: usize = 48;
/// Variable selecting the policy: `freeing` or `allocating`.
pub const POLICY_VAR: &str = "HMPI_OPI_POOL_POLICY";
/// Variable setting [`max_blocks`].
pub const MAX_VAR: &str = "HMPI_OPI_POOL_MAX";

const _: () = assert!(POOL_SLOT < shmheap::segment::REGISTRY_SLOTS);

/// Where freed buffers go (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// To the freeing thread's list (no synchronisation).
    FreeingRank,
    /// Back to the rank whose arena holds the buffer.
    AllocatingRank,
}

/// 0: not read yet, 1: freeing, 2: allocating.
static POLICY: AtomicU8 = AtomicU8::new(0);
/// 0: not read yet; else the limit + 1.
static MAX_BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// The policy in force (from `HMPI_OPI_POOL_POLICY` until
/// [`set_policy`] is called). An unknown value of the variable is reported
/// once on stderr and the default used.
#[inline(always)]
pub fn policy() -> Policy {
    // Relaxed: a configuration word; nothing else is published with it.
    match POLICY.load(Ordering::Relaxed) {
        1 => Policy::FreeingRank,
        2 => Policy::AllocatingRank,
        _ => policy_from_env(),
    }
}

/// Writes a warning line with one `write(2)`: `eprintln!` writes each
/// formatted piece on its own, and every rank warns at once, so the pieces
/// of different ranks' lines would interleave.
#[cold]
fn warn(line: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

#[cold]
fn policy_from_env() -> Policy {
    let p = match std::env::var(POLICY_VAR).as_deref() {
        Err(_) | Ok("") | Ok("freeing") => Policy::FreeingRank,
        Ok("allocating") => Policy::AllocatingRank,
        Ok(other) => {
            warn(&format!(
                "hmpi: {POLICY_VAR}={other:?} is not 'freeing' or 'allocating'; using 'freeing'\n"
            ));
            Policy::FreeingRank
        }
    };
    set_policy(p);
    p
}

/// Chooses the policy for every later free in this process. Buffers already
/// in a list stay there.
pub fn set_policy(p: Policy) {
    let v = match p {
        Policy::FreeingRank => 1,
        Policy::AllocatingRank => 2,
    };
    // Relaxed: see `policy`.
    POLICY.store(v, Ordering::Relaxed);
}

/// How many free buffers a thread's list keeps before the least recently
/// used go back to the heap (`HMPI_OPI_POOL_MAX`, default 64).
#[inline(always)]
pub fn max_blocks() -> usize {
    // Relaxed: see `policy`.
    match MAX_BLOCKS.load(Ordering::Relaxed) {
        0 => max_blocks_from_env(),
        n => n - 1,
    }
}

#[cold]
fn max_blocks_from_env() -> usize {
    let n = match std::env::var(MAX_VAR) {
        Ok(s) => s.trim().parse::<usize>().unwrap_or_else(|_| {
            warn(&format!(
                "hmpi: {MAX_VAR}={s:?} is not a number; using {DEFAULT_MAX_BLOCKS}\n"
            ));
            DEFAULT_MAX_BLOCKS
        }),
        Err(_) => DEFAULT_MAX_BLOCKS,
    };
    set_max_blocks(n);
    n
}

/// Sets [`max_blocks`] for this process (0: keep nothing).
pub fn set_max_blocks(n: usize) {
    // Relaxed: see `policy`.
    MAX_BLOCKS.store(n.saturating_add(1).max(1), Ordering::Relaxed);
}

/// Counters of one thread's pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Allocations served from the list.
    pub hits: u64,
    /// Allocations that went to the heap.
    pub misses: u64,
    /// Buffers put on this thread's list.
    pub frees_local: u64,
    /// Buffers pushed back to the rank that allocated them.
    pub frees_returned: u64,
    /// Buffers taken from this rank's return stack.
    pub reclaimed: u64,
    /// Buffers given back to the heap (trim, release).
    pub trimmed: u64,
    /// Buffers in the list now.
    pub cached_blocks: u64,
    /// Bytes in the list now.
    pub cached_bytes: u64,
}

/// A free buffer.
#[derive(Clone, Copy)]
struct Entry {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// One thread's list, most recently used at the back.
///
/// No drop glue (the list is `ManuallyDrop`), so that the thread-local
/// needs no lazy registration and its access inlines to a plain
/// thread-local load; [`Cleanup`] empties it when the thread exits.
struct LocalPool {
    free: ManuallyDrop<Vec<Entry>>,
    stats: PoolStats,
    /// Whether this thread's [`Cleanup`] is registered.
    registered: bool,
    /// The thread is exiting and the list was emptied: frees go straight
    /// to the heap.
    dead: bool,
}

impl LocalPool {
    const fn new() -> Self {
        LocalPool {
            free: ManuallyDrop::new(Vec::new()),
            registered: false,
            dead: false,
            stats: PoolStats {
                hits: 0,
                misses: 0,
                frees_local: 0,
                frees_returned: 0,
                reclaimed: 0,
                trimmed: 0,
                cached_blocks: 0,
                cached_bytes: 0,
            },
        }
    }

    /// First fit from the most recent end.
    #[inline(always)]
    fn find(&mut self, bytes: usize, align: usize) -> Option<Entry> {
        let fits = |e: &Entry| {
            e.layout.size() >= bytes
                && e.layout.size() <= bytes.saturating_mul(MAX_WASTE)
                && e.layout.align() >= align
        };
        // The most recently freed buffer usually fits: take it without a
        // search.
        let e = match self.free.last() {
            Some(e) if fits(e) => self.free.pop()?,
            _ => {
                let i = self.free.iter().rposition(fits)?;
                self.free.remove(i)
            }
        };
        self.stats.hits += 1;
        Some(e)
    }

    #[inline(always)]
    fn put(&mut self, e: Entry) -> bool {
        if self.dead {
            return false;
        }
        if !self.registered {
            self.registered = true;
            register_cleanup();
        }
        self.free.push(e);
        self.stats.frees_local += 1;
        let max = max_blocks();
        if self.free.len() > max {
            // Trim in batches (down to three quarters of the limit), so
            // that a list at its limit does not trim on every free.
            self.trim(max - max / 4);
        }
        true
    }

    /// Gives the least recently used buffers back to the heap until `keep`
    /// are left.
    #[cold]
    fn trim(&mut self, keep: usize) {
        let n = self.free.len().saturating_sub(keep);
        for e in self.free.drain(..n) {
            self.stats.trimmed += 1;
            // SAFETY: a free buffer of the global allocator with this
            // layout, owned by the list.
            unsafe { std::alloc::dealloc(e.ptr.as_ptr(), e.layout) };
        }
    }

    fn stats(&self) -> PoolStats {
        PoolStats {
            cached_blocks: self.free.len() as u64,
            cached_bytes: self.free.iter().map(|e| e.layout.size() as u64).sum(),
            ..self.stats
        }
    }
}

thread_local! {
    static POOL: RefCell<LocalPool> = const { RefCell::new(LocalPool::new()) };
    static CLEANUP: Cleanup = const { Cleanup };
}

/// Empties this thread's list when the thread exits (a thread-local with a
/// destructor, registered by the first buffer put on the list).
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        with_pool(|p| {
            p.trim(0);
            p.dead = true;
            // The list's own memory; the empty list left behind owns none,
            // and `dead` keeps it empty.
            drop(std::mem::take(&mut *p.free));
        });
    }
}

#[cold]
#[inline(never)]
fn register_cleanup() {
    // Touching it registers its destructor; if the thread is already
    // exiting there is nothing to register (the list is emptied then by
    // `dead`-checks: frees go to the heap).
    let _ = CLEANUP.try_with(|_| ());
}

/// Runs `f` on this thread's list; `None` while the thread is exiting.
#[inline(always)]
fn with_pool<R>(f: impl FnOnce(&mut LocalPool) -> R) -> Option<R> {
    POOL.try_with(|p| p.try_borrow_mut().ok().map(|mut p| f(&mut p)))
        .ok()
        .flatten()
}

/// The layout of a pool buffer for `bytes` bytes aligned to `align`.
#[inline(always)]
pub fn pool_layout(bytes: usize, align: usize) -> Result<Layout, Error> {
    const _: () = assert!(PAGE.is_power_of_two());
    let rounded = match bytes.max(1).checked_add(PAGE - 1) {
        Some(x) => x & !(PAGE - 1),
        None => return Err(too_large(bytes)),
    };
    Layout::from_size_align(rounded, align).map_err(|_| too_large(bytes))
}

#[cold]
fn too_large(bytes: usize) -> Error {
    Error::Count {
        bytes: bytes as u64,
        element_size: 1,
        expected: None,
    }
}

/// Allocates a buffer of at least `bytes` bytes aligned to `align` (a power
/// of two) from this thread's pool, else from the global allocator
/// (`OPI_Alloc`). The buffer's contents are unspecified.
#[inline(always)]
pub fn alloc(bytes: usize, align: usize) -> Result<(NonNull<u8>, Layout), Error> {
    let layout = pool_layout(bytes, align)?;
    match with_pool(|p| p.find(layout.size(), align)) {
        Some(Some(e)) => Ok((e.ptr, e.layout)),
        _ => alloc_slow(layout),
    }
}

/// An allocation the thread's list could not serve: this rank's returned
/// buffers (allocating-rank policy), else the global allocator.
#[cold]
#[inline(never)]
fn alloc_slow(layout: Layout) -> Result<(NonNull<u8>, Layout), Error> {
    let allocating = policy() == Policy::AllocatingRank;
    if allocating {
        let hit = with_pool(|p| {
            if reclaim(p) > 0 {
                p.find(layout.size(), layout.align())
            } else {
                None
            }
        });
        if let Some(Some(e)) = hit {
            return Ok((e.ptr, e.layout));
        }
        // Published before this buffer can reach another rank, so that
        // rank can return it.
        own_stack();
    }
    with_pool(|p| p.stats.misses += 1);
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    match NonNull::new(p) {
        Some(p) => Ok((p, layout)),
        None => Err(heap_error(layout)),
    }
}

/// Returns a buffer to the pool the policy chooses (`OPI_Free`).
///
/// # Safety
/// `ptr` was allocated by the global allocator with `layout` (any block of
/// it, not only one from [`alloc`]), is owned by the caller and not used
/// afterwards. A zero-sized layout is ignored.
#[inline(always)]
pub unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
    if layout.size() == 0 {
        return;
    }
    let e = Entry { ptr, layout };
    if policy() == Policy::AllocatingRank
        && layout.size() >= size_of::<Link>()
        && ptr.as_ptr() as usize % std::mem::align_of::<Link>() == 0
    {
        if let Some(stack) = foreign_stack(ptr) {
            // SAFETY: the buffer is ours to give away (caller's contract)
            // and large enough for the link.
            unsafe { stack.push(e) };
            with_pool(|p| p.stats.frees_returned += 1);
            return;
        }
    }
    if with_pool(|p| p.put(e)) != Some(true) {
        // The thread is exiting: straight back to the heap.
        // SAFETY: the caller's contract.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
    }
}

/// This thread's pool counters.
pub fn stats() -> PoolStats {
    with_pool(|p| p.stats()).unwrap_or_default()
}

/// Gives every buffer in this thread's list — and, under the
/// allocating-rank policy, on this rank's return stack — back to the heap.
pub fn release() {
    with_pool(|p| {
        reclaim(p);
        p.trim(0);
    });
}

// ---------------------------------------------------------------------------
// The allocating-rank policy: a return stack per rank in the node heap.

/// The header a returned buffer carries in its first bytes while it is on
/// a return stack.
#[repr(C)]
struct Link {
    /// The next buffer's address (0: end).
    next: u64,
    size: u64,
    align: u64,
}

/// A rank's return stack: a lock-free stack of buffers that other ranks
/// freed (a Treiber stack whose only pop takes everything, so there is no
/// ABA). Lives in the owner's arena, found through registry slot
/// [`POOL_SLOT`].
#[repr(C, align(64))]
struct ReturnStack {
    /// The top buffer's address (0: empty).
    head: AtomicU64,
}

impl ReturnStack {
    /// Pushes a buffer.
    ///
    /// # Safety
    /// The buffer is owned by the caller, in the node heap, at least
    /// `size_of::<Link>()` bytes and aligned for it, and given up.
    unsafe fn push(&self, e: Entry) {
        let link = e.ptr.as_ptr().cast::<Link>();
        // Relaxed: the CAS below publishes the link with Release.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the buffer is ours and large enough (caller's
            // contract); pool buffers are at least 8-aligned (u64 link).
            unsafe {
                link.write(Link {
                    next: head,
                    size: e.layout.size() as u64,
                    align: e.layout.align() as u64,
                })
            };
            // SYNC POINT: Release pairs with the owner's Acquire swap in
            // `take_all`: the link (and the buffer's last contents, which
            // nobody reads) is visible to the owner. Relaxed on failure: we
            // retry with the value seen.
            match self.head.compare_exchange_weak(
                head,
                link as u64,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Takes every buffer pushed so far.
    fn take_all(&self) -> Vec<Entry> {
        // SYNC POINT: Acquire pairs with the pushers' Release CAS: their
        // links are visible.
        let mut p = self.head.swap(0, Ordering::Acquire);
        let mut out = Vec::new();
        while p != 0 {
            // SAFETY: a buffer pushed by `push`, whose link was written
            // before the Release CAS we acquired; now ours.
            let l = unsafe { (p as *const Link).read() };
            let layout = Layout::from_size_align(l.size as usize, l.align as usize);
            if let (Some(ptr), Ok(layout)) = (NonNull::new(p as *mut u8), layout) {
                out.push(Entry { ptr, layout });
            }
            p = l.next;
        }
        out
    }
}

/// This rank's return stack, created and published on first use.
fn own_stack() -> Option<&'static ReturnStack> {
    static OWN: AtomicU64 = AtomicU64::new(0);
    // SYNC POINT: Acquire pairs with the Release store below (another
    // thread of this process created it).
    let a = OWN.load(Ordering::Acquire);
    if a != 0 {
        // SAFETY: a published, initialised stack in this rank's arena,
        // never freed.
        return Some(unsafe { &*(a as *const ReturnStack) });
    }
    let seg = shmheap::Segment::current()?;
    let p = shmheap::ShmHeap
        .try_alloc(Layout::new::<ReturnStack>())
        .ok()?
        .cast::<ReturnStack>();
    // SAFETY: a fresh block of the right layout.
    unsafe {
        p.as_ptr().write(ReturnStack {
            head: AtomicU64::new(0),
        })
    };
    // SYNC POINT: AcqRel: Release publishes the initialised stack to this
    // process's threads; Acquire sees a racing winner's stack.
    match OWN.compare_exchange(0, p.as_ptr() as u64, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // Release inside `publish`: other ranks see it initialised.
            seg.publish(POOL_SLOT, p.as_ptr() as u64);
            // SAFETY: just initialised; never freed.
            Some(unsafe { &*p.as_ptr() })
        }
        Err(winner) => {
            // SAFETY: ours, never shared.
            unsafe {
                std::alloc::GlobalAlloc::dealloc(
                    &shmheap::ShmHeap,
                    p.as_ptr().cast(),
                    Layout::new::<ReturnStack>(),
                )
            };
            // SAFETY: the winner's stack, initialised, never freed.
            Some(unsafe { &*(winner as *const ReturnStack) })
        }
    }
}

/// The return stack of the rank whose arena holds `ptr`, if that is
/// another rank that has one.
fn foreign_stack(ptr: NonNull<u8>) -> Option<&'static ReturnStack> {
    let seg = shmheap::Segment::current()?;
    let owner = seg.owner_of(ptr.as_ptr() as usize)?;
    if owner == seg.local_rank() {
        return None;
    }
    let a = seg.lookup(owner, POOL_SLOT);
    if a == 0 || shmheap::owner_of(a as *const u8) != Some(owner) {
        return None;
    }
    // SAFETY: the owner published (Release; `lookup` is Acquire) the
    // address of its initialised stack in its own arena, never freed.
    Some(unsafe { &*(a as *const ReturnStack) })
}

/// Moves this rank's returned buffers into `p`; how many.
fn reclaim(p: &mut LocalPool) -> usize {
    let Some(stack) = own_stack() else {
        return 0;
    };
    let got = stack.take_all();
    let n = got.len();
    p.stats.reclaimed += n as u64;
    for e in got {
        if p.put(e) {
            p.stats.frees_local -= 1; // counted as reclaimed, not freed here
        } else {
            // SAFETY: a buffer of the global allocator, ours now.
            unsafe { std::alloc::dealloc(e.ptr.as_ptr(), e.layout) };
        }
    }
    n
}

/// Creates this rank's return stack (so that other ranks can return its
/// buffers) if the allocating-rank policy is in force.
pub(crate) fn prepare() {
    if policy() == Policy::AllocatingRank {
        own_stack();
    }
}

// ---------------------------------------------------------------------------
// OpiBuf

/// A pooled buffer of `T`s: `OPI_Alloc`'s buffer as a growable vector
/// that derefs to a slice, whose memory comes from and goes back to the
/// [pool](self). Give it away with `give` (the pointer moves; nothing is
/// copied) or drop it (back to the pool).
///
/// Capacities are whole pages. Unlike `Vec`, allocation failure is an
/// error value ([`OpiBuf::with_capacity`], [`OpiBuf::try_reserve`]).
pub struct OpiBuf<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The block's layout (size 0: no block).
    layout: Layout,
}

// SAFETY: an OpiBuf owns its elements and its block, like a Vec.
unsafe impl<T: Send> Send for OpiBuf<T> {}
// SAFETY: `&OpiBuf` only gives `&[T]`.
unsafe impl<T: Sync> Sync for OpiBuf<T> {}

impl<T> OpiBuf<T> {
    /// An empty buffer without a block.
    pub const fn new() -> Self {
        OpiBuf {
            ptr: NonNull::dangling(),
            len: 0,
            layout: match Layout::from_size_align(0, align_of::<T>()) {
                Ok(l) => l,
                Err(_) => Layout::new::<()>(),
            },
        }
    }

    /// An empty buffer with room for at least `n` elements (rounded up to
    /// whole pages) from the pool.
    #[inline(always)]
    pub fn with_capacity(n: usize) -> Result<Self, Error> {
        if n == 0 || size_of::<T>() == 0 {
            return Ok(Self::new());
        }
        let bytes = n
            .checked_mul(size_of::<T>())
            .ok_or_else(|| too_large(usize::MAX))?;
        let (p, layout) = alloc(bytes, align_of::<T>())?;
        Ok(OpiBuf {
            ptr: p.cast(),
            len: 0,
            layout,
        })
    }

    /// A buffer holding a copy of `items`.
    pub fn from_slice(items: &[T]) -> Result<Self, Error>
    where
        T: Clone,
    {
        let mut b = Self::with_capacity(items.len())?;
        b.extend_from_slice(items);
        Ok(b)
    }

    /// A buffer of `n` copies of `x`.
    pub fn from_elem(n: usize, x: T) -> Result<Self, Error>
    where
        T: Clone,
    {
        let mut b = Self::with_capacity(n)?;
        b.resize(n, x);
        Ok(b)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many elements fit without a new block.
    pub fn capacity(&self) -> usize {
        match size_of::<T>() {
            0 => usize::MAX,
            s => self.layout.size() / s,
        }
    }

    /// The block's layout (size 0 if there is none).
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Makes room for `additional` more elements: a larger block from the
    /// pool (the elements move; the old block goes back to the pool).
    pub fn try_reserve(&mut self, additional: usize) -> Result<(), Error> {
        let need = self
            .len
            .checked_add(additional)
            .ok_or_else(|| too_large(usize::MAX))?;
        if need <= self.capacity() {
            return Ok(());
        }
        let want = need.max(self.capacity().saturating_mul(2));
        let bytes = want
            .checked_mul(size_of::<T>())
            .ok_or_else(|| too_large(usize::MAX))?;
        let (p, layout) = alloc(bytes, align_of::<T>())?;
        let p = p.cast::<T>();
        // SAFETY: both blocks hold at least `len` elements' room and are
        // distinct; the elements move bit by bit.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), p.as_ptr(), self.len) };
        let old = std::mem::replace(&mut self.layout, layout);
        let old_ptr = std::mem::replace(&mut self.ptr, p);
        // SAFETY: the old block (if any) is ours and empty now.
        unsafe { free(old_ptr.cast(), old) };
        Ok(())
    }

    /// Appends `x`, growing through the pool if needed (a failed growth
    /// aborts, as `Vec::push` does; use [`OpiBuf::try_reserve`] first to
    /// handle it).
    pub fn push(&mut self, x: T) {
        if self.len == self.capacity() {
            if let Err(e) = self.try_reserve(1) {
                panic!("OpiBuf::push: {e}");
            }
        }
        // SAFETY: room for one more (above), in the block.
        unsafe { self.ptr.as_ptr().add(self.len).write(x) };
        self.len += 1;
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the element at `len` was valid and is no longer counted.
        Some(unsafe { self.ptr.as_ptr().add(self.len).read() })
    }

    /// Appends copies of `items`.
    pub fn extend_from_slice(&mut self, items: &[T])
    where
        T: Clone,
    {
        if let Err(e) = self.try_reserve(items.len()) {
            panic!("OpiBuf::extend_from_slice: {e}");
        }
        for x in items {
            // SAFETY: room reserved above.
            unsafe { self.ptr.as_ptr().add(self.len).write(x.clone()) };
            self.len += 1;
        }
    }

    /// Sets the length to `n`, appending copies of `x` or dropping the
    /// tail.
    pub fn resize(&mut self, n: usize, x: T)
    where
        T: Clone,
    {
        if n <= self.len {
            self.truncate(n);
            return;
        }
        if let Err(e) = self.try_reserve(n - self.len) {
            panic!("OpiBuf::resize: {e}");
        }
        while self.len < n {
            // SAFETY: room reserved above.
            unsafe { self.ptr.as_ptr().add(self.len).write(x.clone()) };
            self.len += 1;
        }
    }

    /// Drops the elements from `n` on.
    pub fn truncate(&mut self, n: usize) {
        while self.len > n {
            drop(self.pop());
        }
    }

    /// Drops every element (the block stays).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// The room past the elements, to fill before [`OpiBuf::set_len`].
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        let n = if size_of::<T>() == 0 {
            0
        } else {
            self.capacity() - self.len
        };
        // SAFETY: the block has room for `capacity` elements; the ones past
        // `len` are uninitialised, which MaybeUninit allows.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(self.len).cast::<MaybeUninit<T>>(),
                n,
            )
        }
    }

    /// Sets the length.
    ///
    /// # Safety
    /// `n <= capacity()`, and the first `n` elements are initialised.
    pub unsafe fn set_len(&mut self, n: usize) {
        self.len = n;
    }

    /// Takes the buffer apart: its pointer, length and block layout. The
    /// caller owns the block (free it with [`free`], or rebuild the buffer
    /// with [`OpiBuf::from_raw_parts`]).
    pub fn into_raw_parts(self) -> (NonNull<T>, usize, Layout) {
        let b = ManuallyDrop::new(self);
        (b.ptr, b.len, b.layout)
    }

    /// Rebuilds a buffer.
    ///
    /// # Safety
    /// `ptr` is a block of the global allocator with `layout` (or dangling
    /// and aligned when `layout.size() == 0`), aligned for `T`, owned by
    /// the caller, and its first `len` elements (which fit the layout) are
    /// initialised.
    pub unsafe fn from_raw_parts(ptr: NonNull<T>, len: usize, layout: Layout) -> Self {
        OpiBuf { ptr, len, layout }
    }

    /// A buffer of zero-sized elements.
    pub(crate) fn from_vec_zst(v: Vec<T>) -> Self {
        debug_assert_eq!(size_of::<T>(), 0);
        let n = v.len();
        std::mem::forget(v); // zero-sized: nothing to free, n values move
        let mut b = Self::new();
        b.len = n;
        b
    }
}

impl<T: crate::Transferable> OpiBuf<T> {
    /// A buffer of `n` zero elements, for types whose values are their
    /// bytes ([`Transferable::PLAIN`](crate::Transferable::PLAIN); else
    /// [`Error::Type`]).
    pub fn zeroed(n: usize) -> Result<Self, Error> {
        if !T::PLAIN {
            return Err(Error::Type {
                reason: format!(
                    "OpiBuf::zeroed: all-zero bytes are not known to be a valid {}",
                    std::any::type_name::<T>()
                ),
            });
        }
        let mut b = Self::with_capacity(n)?;
        // SAFETY: room for `n` (above); zero bytes are a valid plain T.
        unsafe {
            std::ptr::write_bytes(b.ptr.as_ptr(), 0, n);
            b.set_len(n);
        }
        Ok(b)
    }
}

impl<T> Default for OpiBuf<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for OpiBuf<T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the first `len` elements are valid and dropped once.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len,
            ))
        };
        // SAFETY: the block is ours and no longer used.
        unsafe { free(self.ptr.cast(), self.layout) };
    }
}

impl<T> Deref for OpiBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements at an aligned, non-null pointer.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for OpiBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and we are the only owner.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: fmt::Debug> fmt::Debug for OpiBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq> PartialEq for OpiBuf<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Clone> Extend<T> for OpiBuf<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for x in iter {
            self.push(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_to_pages() {
        assert_eq!(pool_layout(0, 8).unwrap().size(), PAGE);
        assert_eq!(pool_layout(PAGE, 8).unwrap().size(), PAGE);
        assert_eq!(pool_layout(PAGE + 1, 64).unwrap().size(), 2 * PAGE);
        assert!(pool_layout(usize::MAX, 8).is_err());
    }

    #[test]
    fn first_fit_in_mru_order_and_trim() {
        std::thread::spawn(|| {
            let a = OpiBuf::<u8>::with_capacity(3 * PAGE).unwrap();
            let b = OpiBuf::<u8>::with_capacity(PAGE).unwrap();
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            drop(a);
            drop(b); // most recent
                     // An 8-byte request fits b (1 page) first.
            let c = OpiBuf::<u8>::with_capacity(8).unwrap();
            assert_eq!(c.as_ptr(), pb);
            // A 2-page request skips nothing smaller and takes a.
            let d = OpiBuf::<u8>::with_capacity(2 * PAGE).unwrap();
            assert_eq!(d.as_ptr(), pa);
            drop((c, d));
            // Too wasteful: 3 pages for a 64-byte... 1-page request is fine
            // (3 ≤ 4), but a 64-page buffer is not used for 1 page.
            let big = OpiBuf::<u8>::with_capacity(64 * PAGE).unwrap();
            drop(big);
            let s = stats();
            assert_eq!((s.hits, s.misses), (2, 3));
            release();
            assert_eq!(stats().cached_blocks, 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn trim_keeps_at_most_the_limit() {
        std::thread::spawn(|| {
            let bufs: Vec<_> = (0..max_blocks() + 10)
                .map(|_| OpiBuf::<u64>::with_capacity(1).unwrap())
                .collect();
            drop(bufs);
            let s = stats();
            assert!(s.cached_blocks as usize <= max_blocks());
            assert!(s.cached_blocks as usize >= max_blocks() * 3 / 4);
            assert_eq!(s.trimmed + s.cached_blocks, max_blocks() as u64 + 10);
            release();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn buffer_operations() {
        let mut b = OpiBuf::<String>::new();
        assert!(b.is_empty());
        b.push("a".into());
        b.extend_from_slice(&["b".to_string(), "c".to_string()]);
        assert_eq!(b.len(), 3);
        assert_eq!(b.pop().as_deref(), Some("c"));
        b.resize(4, "x".into());
        assert_eq!(&b[..], &["a", "b", "x", "x"]);
        b.truncate(1);
        assert_eq!(b[0], "a");
        let z = OpiBuf::<u32>::zeroed(1000).unwrap();
        assert!(z.iter().all(|&x| x == 0) && z.len() == 1000);
        assert!(OpiBuf::<bool>::zeroed(3).is_err());
        let mut g = OpiBuf::<u64>::with_capacity(1).unwrap();
        let cap = g.capacity();
        g.extend(0..cap as u64 + 1); // grows to a new block
        assert!(g.capacity() > cap);
        assert_eq!(g.iter().sum::<u64>(), (0..=cap as u64).sum());
        let units = OpiBuf::<()>::from_elem(5, ()).unwrap();
        assert_eq!(units.len(), 5);
    }
}
