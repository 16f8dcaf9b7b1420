//! One rank's arena: spans of 64 KiB pages, per-class central lists, and the
//! remote-free stack through which other ranks return its blocks.
//!
//! ```text
//! arena base
//! | Arena header | page descriptors (one per data page) | data pages … (up to the arena's size) |
//! ```
//!
//! * **Spans.** Data pages are handed out as spans from a break pointer
//!   (`brk`, the papers' per-rank `sbrk`) or from free spans binned by length.
//!   Every page of a live span records its span's first page, kind and class,
//!   so any address inside a block leads to its span in O(1). Freed spans
//!   merge with free neighbours (boundary tags on their first and last
//!   pages); a free span that reaches the break lowers it.
//! * **Classes.** Each size class keeps a list of its spans with free blocks
//!   ("partial" spans) under its own lock. Thread caches take and return
//!   blocks in batches; a span whose blocks all came back is returned to the
//!   span pool unless it is the class's last partial span.
//! * **Backing.** Pages below `backed` have real backing reserved with
//!   `fallocate`; growth reserves in 2 MiB steps (and the descriptors that
//!   describe them), so `ENOSPC` is an allocation error, not a `SIGBUS`.
//! * **Remote frees.** A block freed by another rank is pushed onto this
//!   arena's lock-free stack (one CAS); the owner takes the whole stack with
//!   one swap and frees the blocks locally (on refills, before growing, on
//!   statistics, or when asked).
//!
//! Only the owning rank's threads change the spans and class lists (under
//! the arena's locks); other ranks only push remote frees and read
//! statistics. All of it is `#[repr(C)]` in the shared segment and holds
//! only atomics, plain data, page indices and addresses inside the segment.

use crate::error::Limit;
use crate::segment::Segment;
use crate::size_class::{
    class_size, keep_empty_spans, span_blocks, span_pages, NCLASSES, PAGE, PAGE_SHIFT,
};
use crate::sync::mutex::RawShmMutex;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};

const NIL: u32 = u32::MAX;
const ARENA_MAGIC: u64 = u64::from_le_bytes(*b"HMPIARN1");
/// Bytes at the arena's base reserved for the [`Arena`] header.
const HDR_RESERVED: usize = PAGE;
/// Pages reserved per growth step (2 MiB).
const GROW_PAGES: u32 = 32;
/// Free-span bins: `bins[n]` holds spans of exactly `n` pages for
/// `n < LARGE_BIN`, `bins[LARGE_BIN]` all longer ones.
const LARGE_BIN: usize = 32;

pub(crate) const KIND_UNUSED: u8 = 0;
pub(crate) const KIND_FREE: u8 = 1;
pub(crate) const KIND_CLASS: u8 = 2;
pub(crate) const KIND_HUGE: u8 = 3;

/// What the arena knows about one data page.
///
/// Every field is atomic so that the lock-free readers (free paths reading
/// `kind`/`class`/`head` of a live block's page, statistics) never race with
/// the owner's updates in the language's sense; all accesses are Relaxed
/// because the locks, or the hand-over of the block itself, order them.
#[repr(C)]
pub(crate) struct PageDesc {
    /// First page of the span containing this page (all pages of a live
    /// span; first and last page of a free span).
    head: AtomicU32,
    /// Span length in pages (first page; last page too for free spans).
    npages: AtomicU32,
    kind: AtomicU8,
    class: AtomicU8,
    /// Set once a block of this (single-block or huge) span has been handed
    /// out, so its memory may no longer be zero.
    dirty: AtomicU8,
    /// On its class's partial list.
    listed: AtomicU8,
    /// Blocks of this class span currently handed out.
    used: AtomicU32,
    /// Blocks carved from this span so far.
    bump: AtomicU32,
    next: AtomicU32,
    prev: AtomicU32,
    /// The span's free-block list (address of the first block, 0 = empty).
    free: AtomicU64,
}

// Padded by hand, not with crossbeam's `CachePadded`: this struct lives in
// the node segment, whose layout is fixed (`#[repr(C)]`, the header's
// version, size assertions), and `CachePadded` is 128-byte aligned on
// x86_64 and has no `#[repr(C)]` guarantee.
#[repr(C, align(64))]
struct ClassCentral {
    lock: RawShmMutex,
    /// First partial span (page index) or NIL.
    partial: AtomicU32,
    /// Partial spans with no block handed out.
    empty: AtomicU32,
    /// Blocks handed out (to users or thread caches).
    out_blocks: AtomicU64,
}

// Padded by hand for the same reason as `ClassCentral`.
#[repr(C, align(64))]
struct RemoteFrees {
    /// Top of the stack of freed blocks (address; the link is the block's
    /// first word), 0 when empty.
    head: AtomicU64,
    count: AtomicU64,
}

/// One rank's arena header, at the arena's base address.
#[repr(C)]
pub struct Arena {
    magic: AtomicU64,
    rank: u32,
    page_count: u32,
    data_start: u64,
    descs: u64,
    span_lock: RawShmMutex,
    /// First page never handed out as part of a span.
    brk: AtomicU32,
    /// Pages with reserved backing.
    backed: AtomicU32,
    /// Pages at or above this have never been handed out (they are zero).
    hwm: AtomicU32,
    huge_bytes: AtomicU64,
    bins: [AtomicU32; LARGE_BIN + 1],
    remote: RemoteFrees,
    classes: [ClassCentral; NCLASSES],
}

const _: () = assert!(std::mem::size_of::<Arena>() <= HDR_RESERVED);
const _: () = assert!(std::mem::size_of::<PageDesc>() == 40);

/// A snapshot of one arena's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// The arena's local rank.
    pub rank: u32,
    /// Bytes handed out by the arena: in use by the program, or cached by
    /// the owner's threads for reuse (block sizes, not request sizes).
    pub allocated_bytes: usize,
    /// Of those, bytes sitting in this process's thread caches (only known
    /// for the calling process's own arena; 0 for others).
    pub cached_bytes: usize,
    /// Blocks freed by other ranks that the owner has not reclaimed yet.
    pub pending_remote_frees: usize,
    /// Bytes of data pages handed out as spans (the break).
    pub span_bytes: usize,
    /// Bytes with reserved backing in the segment file.
    pub backed_bytes: usize,
    /// Virtual size of the arena's data area.
    pub capacity_bytes: usize,
}

impl ArenaStats {
    /// Bytes the program holds: allocated minus what the thread caches keep.
    pub fn in_use_bytes(&self) -> usize {
        self.allocated_bytes - self.cached_bytes
    }
}

/// A block chain handed between the arena and a thread cache: linked
/// through each block's first word.
pub(crate) struct Chain {
    pub head: usize,
    pub count: usize,
}

/// Reads the link word of a free block.
///
/// # Safety
/// `block` must be the address of a free block of at least 8 bytes that the
/// caller may read (it holds the block through a lock or exclusive list).
#[inline]
pub(crate) unsafe fn next_of(block: usize) -> usize {
    // SAFETY: per the contract, `block` is a readable, 8-byte aligned free
    // block.
    unsafe { (block as *const u64).read() as usize }
}

/// Writes the link word of a free block.
///
/// # Safety
/// As for [`next_of`], with write access.
#[inline]
pub(crate) unsafe fn set_next(block: usize, next: usize) {
    // SAFETY: per the contract.
    unsafe { (block as *mut u64).write(next as u64) }
}

impl Arena {
    /// Initialises local rank `rank`'s arena in place (called by its owner
    /// on attach) and returns it.
    ///
    /// # Safety
    /// `seg` must be attached in this process, `rank` must be this process's
    /// local rank, and no other process may use the arena before this
    /// returns (nobody can: no block of it exists yet).
    pub(crate) unsafe fn init(seg: &Segment, rank: u32) -> Result<&'static Arena, Limit> {
        let base = seg.arena_base(rank);
        seg.reserve(base, HDR_RESERVED)?;
        let arena_len = seg.arena_len();
        let max_pages = arena_len / PAGE;
        let meta =
            (HDR_RESERVED + max_pages * std::mem::size_of::<PageDesc>()).next_multiple_of(PAGE);
        let page_count = ((arena_len - meta) / PAGE) as u32;
        // SAFETY: the arena's first HDR_RESERVED bytes are mapped, backed
        // and writable, and only this process touches them until the magic
        // is published. Zeroed memory is a valid Arena except for the lists,
        // which are set to NIL below.
        let a: &'static Arena = unsafe { &*(base as *const Arena) };
        if a.magic.load(Acquire) == ARENA_MAGIC {
            return Ok(a); // already initialised (cannot happen: attach is once)
        }
        // SAFETY: as above: exclusive access during initialisation.
        unsafe {
            let w = base as *mut Arena;
            (*w).rank = rank;
            (*w).page_count = page_count;
            (*w).data_start = (base + meta) as u64;
            (*w).descs = (base + HDR_RESERVED) as u64;
        }
        for b in &a.bins {
            b.store(NIL, Relaxed);
        }
        for c in &a.classes {
            c.partial.store(NIL, Relaxed);
        }
        // SYNC POINT: Release publishes the initialised header to anyone
        // who checks the magic with Acquire (remote frees, statistics).
        a.magic.store(ARENA_MAGIC, Release);
        Ok(a)
    }

    /// Local rank `rank`'s arena, if its owner has initialised it.
    pub(crate) fn get(seg: &Segment, rank: u32) -> Option<&'static Arena> {
        // SAFETY: the arena header lies inside the mapped segment. Its
        // first page may not be backed yet if the owner has not attached;
        // reading a hole of a tmpfs file maps the shared zero page (no
        // SIGBUS: only writes need backing), and zero is not the magic.
        let a: &'static Arena = unsafe { &*(seg.arena_base(rank) as *const Arena) };
        (a.magic.load(Acquire) == ARENA_MAGIC).then_some(a)
    }

    #[inline]
    fn desc(&self, page: u32) -> &PageDesc {
        debug_assert!(page < self.page_count);
        // SAFETY: descriptors of pages below `backed` are backed; callers
        // only ask for pages of live or free spans (below `brk` ≤ `backed`)
        // or for the page right above a span, also below `brk` when it is
        // read. The table is inside the arena's metadata area.
        unsafe {
            &*((self.descs as usize + page as usize * std::mem::size_of::<PageDesc>())
                as *const PageDesc)
        }
    }

    #[inline]
    fn page_addr(&self, page: u32) -> usize {
        self.data_start as usize + ((page as usize) << PAGE_SHIFT)
    }

    /// The page holding `addr`, which must lie in this arena's data area.
    #[inline]
    pub(crate) fn page_of(&self, addr: usize) -> u32 {
        debug_assert!(
            addr >= self.data_start as usize,
            "address {addr:#x} is in the arena's metadata"
        );
        ((addr - self.data_start as usize) >> PAGE_SHIFT) as u32
    }

    /// Kind and class of the span holding a live block at `addr`.
    #[inline]
    pub(crate) fn kind_class(&self, addr: usize) -> (u8, usize) {
        let d = self.desc(self.page_of(addr));
        (d.kind.load(Relaxed), d.class.load(Relaxed) as usize)
    }

    /// Usable bytes of the live block at `addr` (from `addr` to the block's end).
    pub(crate) fn usable_size(&self, addr: usize) -> usize {
        let page = self.page_of(addr);
        let d = self.desc(page);
        let head = d.head.load(Relaxed);
        let start = self.page_addr(head);
        match d.kind.load(Relaxed) {
            KIND_CLASS => {
                let size = class_size(d.class.load(Relaxed) as usize);
                let off = addr - start;
                size - off % size
            }
            KIND_HUGE => {
                start + ((self.desc(head).npages.load(Relaxed) as usize) << PAGE_SHIFT) - addr
            }
            _ => 0,
        }
    }

    /// Returns whether the span of the live block at `addr` had handed out
    /// memory before (so it may not be zero) and marks it as used. Only
    /// meaningful for single-block class spans and huge spans.
    pub(crate) fn take_dirty(&self, addr: usize) -> bool {
        let head = self.desc(self.page_of(addr)).head.load(Relaxed);
        self.desc(head).dirty.swap(1, Relaxed) != 0
    }

    // ----- spans (caller holds span_lock) --------------------------------

    fn bin_of(npages: u32) -> usize {
        (npages as usize).min(LARGE_BIN)
    }

    fn bin_insert(&self, page: u32, npages: u32) {
        let bin = &self.bins[Self::bin_of(npages)];
        let first = bin.load(Relaxed);
        let d = self.desc(page);
        d.prev.store(NIL, Relaxed);
        d.next.store(first, Relaxed);
        if first != NIL {
            self.desc(first).prev.store(page, Relaxed);
        }
        bin.store(page, Relaxed);
    }

    fn bin_remove(&self, page: u32, npages: u32) {
        let d = self.desc(page);
        let (prev, next) = (d.prev.load(Relaxed), d.next.load(Relaxed));
        if prev == NIL {
            self.bins[Self::bin_of(npages)].store(next, Relaxed);
        } else {
            self.desc(prev).next.store(next, Relaxed);
        }
        if next != NIL {
            self.desc(next).prev.store(prev, Relaxed);
        }
    }

    /// Marks `[page, page + npages)` as one free span and bins it.
    fn make_free(&self, page: u32, npages: u32) {
        let first = self.desc(page);
        first.kind.store(KIND_FREE, Relaxed);
        first.head.store(page, Relaxed);
        first.npages.store(npages, Relaxed);
        first.dirty.store(1, Relaxed);
        let last = self.desc(page + npages - 1);
        last.kind.store(KIND_FREE, Relaxed);
        last.head.store(page, Relaxed);
        last.npages.store(npages, Relaxed);
        self.bin_insert(page, npages);
    }

    /// Reserves backing so that pages below `end` are backed.
    fn ensure_backed(&self, seg: &Segment, end: u32) -> Result<(), Limit> {
        let backed = self.backed.load(Relaxed);
        if end <= backed {
            return Ok(());
        }
        let chunk = end.max(backed + GROW_PAGES).min(self.page_count);
        let reserve = |to: u32| -> Result<(), Limit> {
            let from_addr = self.page_addr(backed);
            seg.reserve(from_addr, self.page_addr(to) - from_addr)?;
            let dsz = std::mem::size_of::<PageDesc>();
            let d0 = (self.descs as usize + backed as usize * dsz) & !4095;
            let d1 = (self.descs as usize + to as usize * dsz).next_multiple_of(4096);
            seg.reserve(d0, d1.min(self.data_start as usize) - d0)
        };
        match reserve(chunk) {
            Ok(()) => {
                self.backed.store(chunk, Relaxed);
                Ok(())
            }
            Err(Limit::NoSpace) if chunk > end => {
                reserve(end)?;
                self.backed.store(end, Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Takes a span of `npages` pages; returns its first page and whether
    /// its memory may be non-zero. Caller holds `span_lock`.
    fn alloc_span(&self, seg: &Segment, npages: u32) -> Result<(u32, bool), Limit> {
        // Exact bins first, then the large bin (best fit).
        let mut found = NIL;
        for b in Self::bin_of(npages)..LARGE_BIN {
            let p = self.bins[b].load(Relaxed);
            if p != NIL {
                found = p;
                break;
            }
        }
        if found == NIL {
            let mut p = self.bins[LARGE_BIN].load(Relaxed);
            let mut best_len = u32::MAX;
            while p != NIL {
                let len = self.desc(p).npages.load(Relaxed);
                if len >= npages && len < best_len {
                    found = p;
                    best_len = len;
                    if len == npages {
                        break;
                    }
                }
                p = self.desc(p).next.load(Relaxed);
            }
        }
        if found != NIL {
            let len = self.desc(found).npages.load(Relaxed);
            self.bin_remove(found, len);
            if len > npages {
                self.make_free(found + npages, len - npages);
            }
            return Ok((found, true));
        }
        // Nothing free: extend the break.
        let brk = self.brk.load(Relaxed);
        let end = brk as u64 + npages as u64;
        if end > self.page_count as u64 {
            return Err(Limit::ArenaSize(self.page_count as usize * PAGE));
        }
        self.ensure_backed(seg, end as u32)?;
        self.brk.store(end as u32, Relaxed);
        let hwm = self.hwm.load(Relaxed);
        if end as u32 > hwm {
            self.hwm.store(end as u32, Relaxed);
        }
        Ok((brk, brk < hwm))
    }

    /// Returns a span to the pool, merging with free neighbours and
    /// lowering the break when it reaches it. Caller holds `span_lock`.
    fn free_span(&self, page: u32, npages: u32) {
        let (mut start, mut len) = (page, npages);
        let brk = self.brk.load(Relaxed);
        let after = start + len;
        if after < brk {
            let d = self.desc(after);
            if d.kind.load(Relaxed) == KIND_FREE {
                let m = d.npages.load(Relaxed);
                self.bin_remove(after, m);
                len += m;
            }
        }
        if start > 0 {
            let d = self.desc(start - 1);
            if d.kind.load(Relaxed) == KIND_FREE {
                let h = d.head.load(Relaxed);
                let m = self.desc(h).npages.load(Relaxed);
                self.bin_remove(h, m);
                start = h;
                len += m;
            }
        }
        if start + len == brk {
            self.desc(start).kind.store(KIND_UNUSED, Relaxed);
            self.brk.store(start, Relaxed);
        } else {
            self.make_free(start, len);
        }
    }

    /// Labels every page of a new span.
    fn label_span(&self, page: u32, npages: u32, kind: u8, class: u8, dirty: bool) {
        for p in page..page + npages {
            let d = self.desc(p);
            d.head.store(page, Relaxed);
            d.kind.store(kind, Relaxed);
            d.class.store(class, Relaxed);
        }
        let d = self.desc(page);
        d.npages.store(npages, Relaxed);
        d.dirty.store(dirty as u8, Relaxed);
        d.listed.store(0, Relaxed);
        d.used.store(0, Relaxed);
        d.bump.store(0, Relaxed);
        d.free.store(0, Relaxed);
        d.next.store(NIL, Relaxed);
        d.prev.store(NIL, Relaxed);
    }

    /// Takes a span under the span lock.
    fn alloc_span_locked(&self, seg: &Segment, npages: u32) -> Result<(u32, bool), Limit> {
        let _g = self.span_lock.lock();
        self.alloc_span(seg, npages)
    }

    /// Whether other ranks have freed blocks that the owner has not reclaimed.
    pub(crate) fn has_remote_frees(&self) -> bool {
        self.remote.head.load(Relaxed) != 0
    }

    /// Whether `addr` lies in this arena's data area.
    #[inline]
    pub(crate) fn contains(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.data_start as usize) < (self.page_count as usize) << PAGE_SHIFT
    }

    // ----- huge blocks ------------------------------------------------------

    /// Allocates `size` bytes aligned to `align` in a span of its own.
    pub(crate) fn alloc_huge(
        &self,
        seg: &Segment,
        size: usize,
        align: usize,
    ) -> Result<usize, Limit> {
        let extra = align.saturating_sub(PAGE);
        let Some(total) = size
            .checked_add(extra)
            .and_then(|t| t.checked_add(PAGE - 1))
        else {
            return Err(Limit::ArenaSize(self.page_count as usize * PAGE));
        };
        let npages = total >> PAGE_SHIFT;
        if npages > self.page_count as usize {
            return Err(Limit::ArenaSize(self.page_count as usize * PAGE));
        }
        let npages = npages as u32;
        let (page, dirty) = self.alloc_span_locked(seg, npages)?;
        self.label_span(page, npages, KIND_HUGE, 0, dirty);
        self.huge_bytes
            .fetch_add((npages as u64) << PAGE_SHIFT, Relaxed);
        Ok(self.page_addr(page).next_multiple_of(align.max(16)))
    }

    /// Frees the huge block holding `addr`.
    pub(crate) fn free_huge(&self, addr: usize) {
        let head = self.desc(self.page_of(addr)).head.load(Relaxed);
        let npages = self.desc(head).npages.load(Relaxed);
        self.huge_bytes
            .fetch_sub((npages as u64) << PAGE_SHIFT, Relaxed);
        let _g = self.span_lock.lock();
        self.free_span(head, npages);
    }

    /// Tries to grow the huge block at `addr` in place to `new_size` bytes
    /// (from `addr`); succeeds when its span ends at the break and the
    /// arena has room.
    pub(crate) fn grow_huge_in_place(&self, seg: &Segment, addr: usize, new_size: usize) -> bool {
        let head = self.desc(self.page_of(addr)).head.load(Relaxed);
        let _g = self.span_lock.lock();
        let npages = self.desc(head).npages.load(Relaxed);
        let end_page = head + npages;
        if end_page != self.brk.load(Relaxed) {
            return false;
        }
        let need_end = addr + new_size;
        let new_end_page =
            ((need_end - self.data_start as usize).next_multiple_of(PAGE) >> PAGE_SHIFT) as u64;
        if new_end_page > self.page_count as u64 {
            return false;
        }
        let new_end_page = new_end_page as u32;
        if new_end_page <= end_page {
            return true;
        }
        if self.ensure_backed(seg, new_end_page).is_err() {
            return false;
        }
        for p in end_page..new_end_page {
            let d = self.desc(p);
            d.head.store(head, Relaxed);
            d.kind.store(KIND_HUGE, Relaxed);
        }
        self.desc(head).npages.store(new_end_page - head, Relaxed);
        self.brk.store(new_end_page, Relaxed);
        if new_end_page > self.hwm.load(Relaxed) {
            self.hwm.store(new_end_page, Relaxed);
        }
        self.huge_bytes
            .fetch_add(((new_end_page - end_page) as u64) << PAGE_SHIFT, Relaxed);
        true
    }

    // ----- classes ----------------------------------------------------------

    fn partial_push(&self, c: &ClassCentral, page: u32) {
        let d = self.desc(page);
        let first = c.partial.load(Relaxed);
        d.prev.store(NIL, Relaxed);
        d.next.store(first, Relaxed);
        if first != NIL {
            self.desc(first).prev.store(page, Relaxed);
        }
        c.partial.store(page, Relaxed);
        d.listed.store(1, Relaxed);
    }

    fn partial_remove(&self, c: &ClassCentral, page: u32) {
        let d = self.desc(page);
        let (prev, next) = (d.prev.load(Relaxed), d.next.load(Relaxed));
        if prev == NIL {
            c.partial.store(next, Relaxed);
        } else {
            self.desc(prev).next.store(next, Relaxed);
        }
        if next != NIL {
            self.desc(next).prev.store(prev, Relaxed);
        }
        d.listed.store(0, Relaxed);
    }

    /// Takes up to `want` blocks of `class` as a chain (at least one unless
    /// the arena is exhausted).
    pub(crate) fn class_take(
        &self,
        seg: &Segment,
        class: usize,
        want: usize,
    ) -> Result<Chain, Limit> {
        if self.remote.head.load(Relaxed) != 0 {
            self.drain_remote();
        }
        let c = &self.classes[class];
        let size = class_size(class);
        let cap = span_blocks(class) as u32;
        let mut chain = Chain { head: 0, count: 0 };
        let _g = c.lock.lock();
        while chain.count < want {
            let mut page = c.partial.load(Relaxed);
            if page == NIL {
                let npages = span_pages(class) as u32;
                match self.alloc_span_locked(seg, npages) {
                    Ok((p, dirty)) => {
                        self.label_span(p, npages, KIND_CLASS, class as u8, dirty);
                        self.partial_push(c, p);
                        c.empty.store(c.empty.load(Relaxed) + 1, Relaxed);
                        page = p;
                    }
                    Err(e) if chain.count == 0 => return Err(e),
                    Err(_) => break,
                }
            }
            let d = self.desc(page);
            let base = self.page_addr(page);
            let (mut used, mut bump, mut free) = (
                d.used.load(Relaxed),
                d.bump.load(Relaxed),
                d.free.load(Relaxed) as usize,
            );
            if used == 0 {
                // The loop below takes at least one block: no longer empty.
                c.empty.store(c.empty.load(Relaxed) - 1, Relaxed);
            }
            while chain.count < want {
                let block = if free != 0 {
                    let b = free;
                    // SAFETY: `b` is on the span's free list, which only this
                    // class's lock holder touches.
                    free = unsafe { next_of(b) };
                    b
                } else if bump < cap {
                    bump += 1;
                    base + (bump as usize - 1) * size
                } else {
                    break;
                };
                // SAFETY: `block` is a free block of this class that now
                // belongs to the chain only.
                unsafe { set_next(block, chain.head) };
                chain.head = block;
                chain.count += 1;
                used += 1;
            }
            d.used.store(used, Relaxed);
            d.bump.store(bump, Relaxed);
            d.free.store(free as u64, Relaxed);
            if free == 0 && bump == cap {
                self.partial_remove(c, page);
            }
        }
        c.out_blocks.fetch_add(chain.count as u64, Relaxed);
        Ok(chain)
    }

    /// Returns a chain of `class` blocks (linked through their first word).
    pub(crate) fn class_give(&self, class: usize, chain: Chain) {
        let c = &self.classes[class];
        let _g = c.lock.lock();
        let mut block = chain.head;
        let mut n = 0;
        while block != 0 {
            // SAFETY: the chain's blocks are free and owned by the caller,
            // who hands them over here.
            let next = unsafe { next_of(block) };
            self.give_block(class, c, block);
            block = next;
            n += 1;
        }
        debug_assert_eq!(n, chain.count);
        c.out_blocks.fetch_sub(n as u64, Relaxed);
    }

    /// Puts one block back on its span (class lock held). A span that
    /// becomes empty stays with the class while the class keeps fewer than
    /// [`keep_empty_spans`] empty spans; otherwise it returns to the pool.
    fn give_block(&self, class: usize, c: &ClassCentral, block: usize) {
        let page = self.desc(self.page_of(block)).head.load(Relaxed);
        let d = self.desc(page);
        // SAFETY: the block is free and ours; the span's list is guarded by
        // the class lock that the caller holds.
        unsafe { set_next(block, d.free.load(Relaxed) as usize) };
        d.free.store(block as u64, Relaxed);
        let used = d.used.load(Relaxed) - 1;
        d.used.store(used, Relaxed);
        if d.listed.load(Relaxed) == 0 {
            self.partial_push(c, page);
        }
        if used == 0 {
            let empty = c.empty.load(Relaxed) + 1;
            if empty as usize > keep_empty_spans(class) {
                self.partial_remove(c, page);
                let npages = d.npages.load(Relaxed);
                let _g = self.span_lock.lock();
                self.free_span(page, npages);
            } else {
                c.empty.store(empty, Relaxed);
            }
        }
    }

    /// Frees a block of this arena without any thread cache (owner only).
    pub(crate) fn free_local(&self, addr: usize) {
        match self.kind_class(addr) {
            (KIND_CLASS, class) => {
                // SAFETY: the caller gives up the block; it is at least 16 bytes.
                unsafe { set_next(addr, 0) };
                self.class_give(
                    class,
                    Chain {
                        head: addr,
                        count: 1,
                    },
                );
            }
            (KIND_HUGE, _) => self.free_huge(addr),
            (kind, _) => debug_assert!(false, "free of {addr:#x} in a span of kind {kind}"),
        }
    }

    // ----- remote frees -----------------------------------------------------

    /// Returns a block of this arena freed by another rank (any thread of
    /// any rank may call this; lock-free). `addr` must be the start of a
    /// live block of this arena, as for any free. Reads nothing of the
    /// owner's bookkeeping, so a remote free costs the pusher one atomic
    /// count and one CAS on the owner's stack.
    pub(crate) fn remote_push(&self, addr: usize) {
        self.remote.count.fetch_add(1, Relaxed);
        let mut old = self.remote.head.load(Relaxed);
        loop {
            // SAFETY: the caller gives up the block; nobody else reads it
            // until it is published by the CAS below.
            unsafe { set_next(addr, old as usize) };
            // SYNC POINT: Release publishes the link word (and the caller's
            // last writes to the block) to the owner's Acquire swap in
            // `drain_remote`.
            match self
                .remote
                .head
                .compare_exchange_weak(old, addr as u64, Release, Relaxed)
            {
                Ok(_) => return,
                Err(cur) => old = cur,
            }
        }
    }

    /// Reclaims every block other ranks have freed (owner only), handing
    /// each size class its blocks as one chain (one lock per class, not per
    /// block). Returns how many.
    pub(crate) fn drain_remote(&self) -> usize {
        if self.remote.head.load(Relaxed) == 0 {
            return 0;
        }
        // SYNC POINT: Acquire pairs with the pushers' Release CAS, so every
        // link word in the taken stack is visible.
        let mut block = self.remote.head.swap(0, Acquire) as usize;
        let mut chains: [Chain; NCLASSES] = std::array::from_fn(|_| Chain { head: 0, count: 0 });
        let mut n = 0u64;
        while block != 0 {
            // SAFETY: the stack is ours after the swap; each block is free.
            let next = unsafe { next_of(block) };
            match self.kind_class(block) {
                (KIND_CLASS, class) => {
                    let chain = &mut chains[class];
                    // SAFETY: the block is free and ours; relinked into the
                    // class's chain.
                    unsafe { set_next(block, chain.head) };
                    chain.head = block;
                    chain.count += 1;
                }
                (KIND_HUGE, _) => self.free_huge(block),
                (kind, _) => {
                    debug_assert!(false, "remote free of {block:#x} in a span of kind {kind}")
                }
            }
            block = next;
            n += 1;
        }
        for (class, chain) in chains.into_iter().enumerate() {
            if chain.count > 0 {
                self.class_give(class, chain);
            }
        }
        self.remote.count.fetch_sub(n, Relaxed);
        n as usize
    }

    // ----- statistics -------------------------------------------------------

    /// Counters of this arena (`cached_bytes` left at 0).
    pub(crate) fn stats(&self) -> ArenaStats {
        let allocated: u64 = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| c.out_blocks.load(Relaxed) * class_size(i) as u64)
            .sum::<u64>()
            + self.huge_bytes.load(Relaxed);
        ArenaStats {
            rank: self.rank,
            allocated_bytes: allocated as usize,
            cached_bytes: 0,
            pending_remote_frees: self.remote.count.load(Relaxed) as usize,
            span_bytes: (self.brk.load(Relaxed) as usize) << PAGE_SHIFT,
            backed_bytes: (self.backed.load(Relaxed) as usize) << PAGE_SHIFT,
            capacity_bytes: (self.page_count as usize) << PAGE_SHIFT,
        }
    }
}
