//! The shared state of one window: a block in the node heap that every
//! member maps at the same address, holding everything the members
//! synchronise on, so that no synchronisation needs the target's progress.
//!
//! ```text
//! header (64 B): refs | size
//! stripes:       STRIPES lock words (accumulates on memory without hardware atomics)
//! row of rank r: lock word (own line) | flag word (own line)
//!                | dynamic regions (REGIONS × base, len)
//!                | post[n]     (u32 each: posts by r to every origin)
//!                | complete[n] (u32 each: completes by r to every target)
//! ```
//!
//! * The **lock word** of a target is a reader-writer lock for
//!   `MPI_Win_lock`: [`EXCLUSIVE`] when one origin holds it exclusively,
//!   else the number of shared holders; [`WAITERS`] marks a sleeper to
//!   wake. Origins take and release it with atomic read-modify-writes
//!   while the target computes.
//! * The **post / complete counters** carry post-start-complete-wait
//!   (notes §5): `post[t][o]` counts the exposure epochs `t` has opened to
//!   `o`, `complete[o][t]` the access epochs `o` has closed at `t`. Each
//!   counter has one writer (the row's owner), so a row is written by one
//!   rank only; an origin waits for `post[t][me]` to reach the number of
//!   its own starts, a target for `complete[o][me]` to reach the number of
//!   its posts.
//! * The **flag word** is free for the user of the window's layer (tests
//!   use it to check who ran when); the **regions** list what a dynamic
//!   window's owner has attached.
//! * The **stripes** serialise accumulates that cannot use a hardware
//!   atomic: an operation takes the stripes of the cache lines it touches,
//!   in increasing order (so two operations never deadlock), and disjoint
//!   targets mostly take different stripes.
//!
//! The block is allocated (zeroed) by the window's rank 0 and freed by the
//! last member to let go of it (a reference count in the header).

use crate::error::{Error, Result};
use shmheap::sync::futex::{wake_all, Backoff};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The lock word's exclusive bit.
pub(crate) const EXCLUSIVE: u32 = 1 << 31;
/// The lock word's "somebody sleeps on me" bit.
pub(crate) const WAITERS: u32 = 1 << 30;
/// The lock word's count of shared holders.
const SHARED: u32 = WAITERS - 1;
/// Lock words for accumulates without hardware atomics.
pub(crate) const STRIPES: usize = 1024;
/// Regions a dynamic window's member can have attached at once.
pub(crate) const REGIONS: usize = 64;
/// A cache line.
const LINE: usize = 64;

/// The block's header.
#[repr(C, align(64))]
struct Header {
    /// Members still holding the block; the one that brings it to zero
    /// frees it.
    refs: AtomicU32,
    /// Number of rows (checked by every member when it attaches).
    size: u32,
}

/// One attached region of a dynamic window (`len == 0`: the slot is free).
#[repr(C)]
pub(crate) struct Region {
    pub(crate) base: AtomicU64,
    pub(crate) len: AtomicU64,
}

/// The fixed part of a member's row.
#[repr(C, align(64))]
pub(crate) struct RowHead {
    /// The reader-writer lock of `MPI_Win_lock` on this member.
    pub(crate) lock: AtomicU32,
    _pad: [u8; LINE - 4],
    /// A word for the window's user (see the module docs).
    pub(crate) flag: AtomicU64,
    _pad2: [u8; LINE - 8],
    /// Attached regions (dynamic windows).
    pub(crate) regions: [Region; REGIONS],
}

const _: () = assert!(std::mem::size_of::<Header>() == LINE);
const _: () = assert!(std::mem::size_of::<RowHead>() % LINE == 0);

/// The bytes of `n` u32 counters, rounded up to whole lines.
const fn counters_bytes(n: usize) -> usize {
    (n * 4).div_ceil(LINE) * LINE
}

/// The bytes of one row for `n` members.
const fn row_bytes(n: usize) -> usize {
    std::mem::size_of::<RowHead>() + 2 * counters_bytes(n)
}

/// The bytes of the stripes.
const STRIPE_BYTES: usize = STRIPES * 4;

fn layout(size: u32) -> Result<Layout> {
    let bytes = row_bytes(size as usize)
        .checked_mul(size as usize)
        .and_then(|b| b.checked_add(std::mem::size_of::<Header>() + STRIPE_BYTES))
        .ok_or_else(|| Error::Internal("window block size overflows".into()))?;
    Layout::from_size_align(bytes, LINE).map_err(|e| Error::Internal(e.to_string()))
}

/// A member's view of the window's block.
#[derive(Debug)]
pub(crate) struct Block {
    base: NonNull<Header>,
    size: u32,
}

// SAFETY: the block lives in the node heap, mapped while the runtime is up;
// every field reached through `Block` after creation is an atomic.
unsafe impl Send for Block {}
// SAFETY: as for `Send`.
unsafe impl Sync for Block {}

impl Block {
    /// Allocates a zeroed block for `size` members in this rank's arena,
    /// held once per member.
    pub(crate) fn create(size: u32) -> Result<Block> {
        let p = shmheap::ShmHeap::new().try_alloc_zeroed(layout(size)?)?;
        let base = p.cast::<Header>();
        // SAFETY: a fresh, zeroed, 64-aligned block large enough for the
        // header; nobody else knows its address yet.
        unsafe {
            (*base.as_ptr()).size = size;
            (*base.as_ptr()).refs.store(size, Ordering::Relaxed);
        }
        Ok(Block { base, size })
    }

    /// The block the window's rank 0 created, at `addr`.
    ///
    /// # Safety
    /// `addr` came from [`Block::create`] on the window's rank 0 (and the
    /// collective that carried it ordered its header before this call);
    /// this member has not attached to it before.
    pub(crate) unsafe fn attach(addr: u64, size: u32) -> Result<Block> {
        let base = NonNull::new(addr as usize as *mut Header)
            .filter(|_| shmheap::is_shared(addr as usize as *const u8))
            .ok_or_else(|| Error::Internal(format!("window block {addr:#x} not shared")))?;
        // SAFETY: the caller's guarantee: a live block whose header was
        // written before its address reached us.
        let n = unsafe { (*base.as_ptr()).size };
        if n != size {
            return Err(Error::Internal(format!(
                "window block for {n} members, window of {size}"
            )));
        }
        Ok(Block { base, size })
    }

    /// Frees a block that no other member attached to (a creation that
    /// failed somewhere).
    ///
    /// # Safety
    /// Made by [`Block::create`] here, and nobody else holds it.
    pub(crate) unsafe fn discard(self) {
        if let Ok(l) = layout(self.size) {
            // SAFETY: the caller's guarantee; allocated with this layout.
            unsafe { shmheap::ShmHeap::new().dealloc(self.base.as_ptr().cast(), l) };
        }
        std::mem::forget(self);
    }

    /// The block's address (for the other members).
    pub(crate) fn addr(&self) -> u64 {
        self.base.as_ptr() as usize as u64
    }

    fn bytes(&self) -> *mut u8 {
        self.base.as_ptr().cast()
    }

    /// Stripe `i` (modulo [`STRIPES`]).
    pub(crate) fn stripe(&self, i: usize) -> &AtomicU32 {
        let off = std::mem::size_of::<Header>() + (i % STRIPES) * 4;
        // SAFETY: inside the stripes of a live block; a zeroed `AtomicU32`
        // is a valid one.
        unsafe { &*self.bytes().add(off).cast::<AtomicU32>() }
    }

    fn row(&self, r: u32) -> *mut u8 {
        debug_assert!(r < self.size);
        let off = std::mem::size_of::<Header>()
            + STRIPE_BYTES
            + r as usize * row_bytes(self.size as usize);
        // SAFETY: `r < size`: the row lies inside the block.
        unsafe { self.bytes().add(off) }
    }

    /// Member `r`'s fixed row part.
    pub(crate) fn head(&self, r: u32) -> &RowHead {
        // SAFETY: a live row, 64-aligned (the header, stripes and rows are
        // whole lines); its fields are atomics, valid when zeroed.
        unsafe { &*self.row(r).cast::<RowHead>() }
    }

    /// The counter of posts by `t` to origin `o`.
    pub(crate) fn post(&self, t: u32, o: u32) -> &AtomicU32 {
        debug_assert!(o < self.size);
        // SAFETY: inside row `t`'s post counters.
        unsafe {
            &*self
                .row(t)
                .add(std::mem::size_of::<RowHead>() + o as usize * 4)
                .cast::<AtomicU32>()
        }
    }

    /// The counter of completes by origin `o` to target `t`.
    pub(crate) fn complete(&self, o: u32, t: u32) -> &AtomicU32 {
        debug_assert!(t < self.size);
        let off =
            std::mem::size_of::<RowHead>() + counters_bytes(self.size as usize) + t as usize * 4;
        // SAFETY: inside row `o`'s complete counters.
        unsafe { &*self.row(o).add(off).cast::<AtomicU32>() }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: the header is live until the last reference goes.
        let header = unsafe { self.base.as_ref() };
        // SYNC POINT: AcqRel: Release publishes this member's last
        // accesses; the last member's Acquire sees everybody's before it
        // frees the block.
        if header.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(l) = layout(self.size) {
                // SAFETY: allocated by `ShmHeap` with this layout in
                // `create`; nobody holds it any more.
                unsafe { shmheap::ShmHeap::new().dealloc(self.base.as_ptr().cast(), l) };
            }
        }
    }
}

// ------------------------------------------------------------ the lock word

/// Takes the reader-writer lock `w`: spin, yield, then sleep until it is
/// free (exclusive) or not held exclusively (shared).
pub(crate) fn lock(w: &AtomicU32, exclusive: bool) {
    if try_lock(w, exclusive) {
        return;
    }
    let mut backoff = Backoff::new();
    loop {
        // Relaxed: only a guess for the exchange below, which acquires.
        let v = w.load(Ordering::Relaxed);
        let free = if exclusive {
            v & (EXCLUSIVE | SHARED) == 0
        } else {
            v & EXCLUSIVE == 0 && v & SHARED < SHARED
        };
        if free {
            let new = if exclusive { v | EXCLUSIVE } else { v + 1 };
            // SYNC POINT: Acquire on success pairs with the Release of the
            // previous holder's unlock: its accesses to the target happen
            // before ours. Relaxed on failure: we look again.
            if w.compare_exchange_weak(v, new, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            continue;
        }
        if backoff.is_sleeping() {
            // Relaxed: the mark only asks the holder to wake us; the lock
            // itself is taken by the Acquire exchange above.
            let marked = v | WAITERS;
            if v & WAITERS != 0
                || w.compare_exchange(v, marked, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                backoff.snooze_on(w, marked);
            }
        } else {
            backoff.snooze();
        }
    }
}

/// Takes `w` if it is free at once (exclusive) or not held exclusively
/// (shared); whether it did.
pub(crate) fn try_lock(w: &AtomicU32, exclusive: bool) -> bool {
    // Relaxed: a guess for the exchange, which acquires.
    let v = w.load(Ordering::Relaxed);
    let (free, new) = if exclusive {
        (v & (EXCLUSIVE | SHARED) == 0, v | EXCLUSIVE)
    } else {
        (v & EXCLUSIVE == 0 && v & SHARED < SHARED, v + 1)
    };
    // SYNC POINT: Acquire on success, as in `lock`.
    free && w
        .compare_exchange(v, new, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// Releases `w`, taken by [`lock`] with the same `exclusive`; wakes the
/// sleepers when the lock became free.
pub(crate) fn unlock(w: &AtomicU32, exclusive: bool) {
    // SYNC POINT: Release pairs with the next holder's Acquire exchange:
    // our accesses to the target happen before theirs.
    let old = if exclusive {
        w.fetch_and(!EXCLUSIVE, Ordering::Release)
    } else {
        w.fetch_sub(1, Ordering::Release)
    };
    let now = if exclusive { old & !EXCLUSIVE } else { old - 1 };
    if now & WAITERS != 0 && now & (EXCLUSIVE | SHARED) == 0 {
        // Relaxed: clearing the mark orders nothing; a waiter that sets it
        // again after this sleeps at most its bounded nap.
        w.fetch_and(!WAITERS, Ordering::Relaxed);
        wake_all(w);
    }
}

// ------------------------------------------------------ the PSCW counters
//
// A counter holds a count in its low 31 bits; the top bit marks a reader
// that may be asleep on it, so that a publication without sleepers is one
// atomic swap and no system call.

/// The counter's sleeper mark.
const ASLEEP: u32 = 1 << 31;
/// The counter's count bits.
const COUNT: u32 = !ASLEEP;
/// How long a sleeping reader stays in the kernel before it looks again
/// (bounds the cost of a publication that raced with the mark).
const NAP: std::time::Duration = std::time::Duration::from_millis(2);

/// Whether count `x` is at or past `v`, in wrapping 31-bit arithmetic
/// (counts in flight differ by far less than 2^30).
fn past(x: u32, v: u32) -> bool {
    (x & COUNT).wrapping_sub(v) & COUNT < 1 << 30
}

/// Publishes `v` in a single-writer counter; wakes the readers that
/// marked it.
pub(crate) fn publish(c: &AtomicU32, v: u32) {
    // SYNC POINT: Release pairs with `reached`'s and `reach`'s Acquire
    // loads: every access of the writer before the publication (an
    // origin's puts before its complete; a target's own stores before its
    // post) happens before the reader's return.
    if c.swap(v & COUNT, Ordering::Release) & ASLEEP != 0 {
        wake_all(c);
    }
}

/// Whether the counter `c` has reached `v`.
pub(crate) fn reached(c: &AtomicU32, v: u32) -> bool {
    // SYNC POINT: pairs with `publish`'s Release swap.
    past(c.load(Ordering::Acquire), v)
}

/// Waits until the counter `c` reaches `v`: spin, yield, then sleep on it
/// after marking it.
pub(crate) fn reach(c: &AtomicU32, v: u32) {
    let mut backoff = Backoff::new();
    loop {
        // SYNC POINT: pairs with `publish`'s Release swap.
        let x = c.load(Ordering::Acquire);
        if past(x, v) {
            return;
        }
        if !backoff.is_sleeping() {
            backoff.snooze();
            continue;
        }
        // Relaxed: the mark only asks the writer to wake us; the data is
        // acquired by the load at the top of the loop. A failed exchange
        // means the counter moved: look again.
        let marked = x | ASLEEP;
        if x & ASLEEP != 0
            || c.compare_exchange(x, marked, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            shmheap::sync::futex::futex_wait(c, marked, NAP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_word_admits_readers_together_and_a_writer_alone() {
        let w = AtomicU32::new(0);
        lock(&w, false);
        assert!(try_lock(&w, false));
        assert!(!try_lock(&w, true));
        unlock(&w, false);
        unlock(&w, false);
        assert!(try_lock(&w, true));
        assert!(!try_lock(&w, false));
        unlock(&w, true);
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_writer_waits_for_a_reader_on_another_thread() {
        let w = std::sync::Arc::new(AtomicU32::new(0));
        let hits = std::sync::Arc::new(AtomicU32::new(0));
        lock(&w, false);
        let t = {
            let (w, hits) = (w.clone(), hits.clone());
            std::thread::spawn(move || {
                lock(&w, true);
                hits.fetch_add(1, Ordering::SeqCst);
                unlock(&w, true);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        unlock(&w, false);
        t.join().unwrap();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn counters_compare_across_the_wrap() {
        let c = AtomicU32::new(COUNT);
        assert!(reached(&c, COUNT));
        assert!(!reached(&c, 0));
        publish(&c, COUNT.wrapping_add(2));
        assert!(reached(&c, 0) && reached(&c, 1) && !reached(&c, 2));
        reach(&c, 1);
        // A sleeper's mark does not change the count.
        c.store(5 | ASLEEP, Ordering::Relaxed);
        assert!(reached(&c, 5) && !reached(&c, 6));
    }

    #[test]
    fn a_reader_asleep_on_a_counter_is_woken() {
        let c = std::sync::Arc::new(AtomicU32::new(0));
        let t = {
            let c = c.clone();
            std::thread::spawn(move || reach(&c, 3))
        };
        for v in 1..=3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            publish(&c, v);
        }
        t.join().unwrap();
        assert!(reached(&c, 3));
    }
}
