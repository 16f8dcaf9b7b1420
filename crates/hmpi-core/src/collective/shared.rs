//! The shared state of one communicator's collectives: a block in the node
//! heap with one slot per member, and the sequence words ranks wait on.
//!
//! Every collective call on a communicator takes the next **epoch** `e`
//! (a per-process counter; MPI requires every member to call the
//! communicator's collectives in the same order, so the members agree on
//! `e` without talking). A slot has four **phases**, used by the epochs
//! in turn (`e % 4`), and each phase is one run of 17 cache lines:
//!
//! ```text
//! phase:  arrive (u32) | finished (u32) | ptr (u64) | ptr2 (u64) | len (u64) | inline data (1056 B)
//! slot:   phase 0 | … | phase 3 | mid (u32) done (u32), on a line of their own
//! ```
//!
//! * `arrive` is the epoch whose data the owner has published: inline
//!   bytes right behind it (a reader's first miss brings the flag and up
//!   to 32 bytes of data), or the address of a buffer in the node heap in
//!   `ptr` / `ptr2` (every rank maps the heap at the same address, so the
//!   readers copy straight from it: each byte moves once).
//! * `done` is the last epoch the owner has finished (epochs finish in
//!   order, even when nonblocking collectives are completed out of order):
//!   it no longer reads what anybody published for it; `mid` marks a
//!   middle step of the collectives that have two (allreduce by slices),
//!   also in epoch order. Phases' `arrive` words are not: a member may
//!   publish `e + 1` before `e` (a nonblocking collective whose
//!   publication waits for an earlier step of its own), so what a reader
//!   remembers of them it remembers per phase.
//! * Before a member writes phase `p` for epoch `e` it waits until every
//!   member (itself included) has finished `e - 4`, the previous epoch
//!   that used the same phase. Four phases rather than two: a member
//!   learns that the others finished `e - 4` from what they published for
//!   an epoch it read anyway, even when the collective in between was one
//!   whose publications it did not read (a bcast's non-root reads only
//!   the root's). A publication carries the epoch its owner
//!   had finished (`finished`, beside `arrive`), so a reader learns it
//!   from the line it reads for the data and rarely reads a `done` word:
//!   a small collective is one publication and one wait for the others'.
//!
//! Each word has one writer, its slot's owner, and any number of readers.
//! Readers spin, then yield, then sleep on the word's futex after setting
//! its top bit (a sleeper mark); the owner's publication swaps the word and
//! wakes the sleepers only when the mark was there, so an uncontended
//! publication is one atomic swap. A sleeping reader asks now and then
//! whether a member has ended without finalizing (the engine's liveness
//! check, `vci::Endpoint::peer_failed`), so that a collective with a dead
//! member is an error instead of a wait forever; a reader that finds the
//! word published never asks.
//!
//! The block is allocated by the communicator's rank 0 in its own arena
//! and freed by the last member to let go of it (a reference count in the
//! header), wherever that member is: the heap returns a block freed by
//! another rank to its owner.

use crate::error::{Error, Result};
use shmheap::sync::futex::{futex_wait, Backoff};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Phases per slot (a power of two: epochs wrap at 2^31).
pub(crate) const PHASES: u32 = 4;

/// The phase epoch `e` uses.
#[inline]
pub(crate) fn phase_of(e: u32) -> usize {
    (e % PHASES) as usize
}

/// Bytes of inline data in one phase of a slot: at least 1 KiB, so that a
/// contribution of 1 KiB needs no wait for its readers (see
/// docs/performance.md, "Small collectives").
pub(crate) const INLINE: usize = 1056;
/// The top bit of a sequence word: a reader may be asleep on it.
const SLEEPER: u32 = 1 << 31;
/// The epoch bits of a sequence word.
const EPOCH: u32 = !SLEEPER;
/// How long a sleeping reader stays in the kernel before it looks again
/// (bounds the cost of a publication that raced with the sleeper mark).
const NAP: Duration = Duration::from_millis(2);

/// Naps between two checks for failed members (see [`SeqWord::wait`]): a
/// member that ended is noticed within a few tens of milliseconds, at the
/// cost of a system call per member and check, in sleeping waits only.
const NAPS_PER_CHECK: u32 = 8;

/// A word with one writer that readers wait on (see the module docs).
#[repr(C)]
pub(crate) struct SeqWord(AtomicU32);

/// Whether epoch `v` is at or past epoch `e`, in wrapping 31-bit
/// arithmetic (epochs in flight differ by far less than 2^30).
#[inline]
fn reached(v: u32, e: u32) -> bool {
    (v & EPOCH).wrapping_sub(e) & EPOCH < 1 << 30
}

impl SeqWord {
    /// Publishes epoch `e`: whatever the owner wrote before is visible to
    /// a reader whose [`SeqWord::wait`] for `e` returns.
    #[inline]
    pub(crate) fn publish(&self, e: u32) {
        // Relaxed: only the sleeper mark is read here; the owner is the
        // word's only writer of epochs, readers only add the mark.
        if self.0.load(Ordering::Relaxed) & SLEEPER == 0 {
            // SYNC POINT: Release pairs with the Acquire load in `wait`
            // (and `is_at`): the owner's writes of its data (inline bytes,
            // buffer addresses, results) happen before the reader's
            // return. A plain store, not a swap: the owner does not stall
            // until the line is its own. A reader that marks the word
            // between the load above and this store loses its mark; its
            // futex wait then either fails at once (the word changed) or
            // ends at its timeout (`NAP`), when it looks again.
            self.0.store(e & EPOCH, Ordering::Release);
            return;
        }
        // SYNC POINT: as above; the swap returns the mark of a sleeper
        // that came in meanwhile, so none is missed.
        if self.0.swap(e & EPOCH, Ordering::Release) & SLEEPER != 0 {
            shmheap::sync::futex::wake_all(&self.0);
        }
    }

    /// Whether epoch `e` has been published.
    #[inline]
    pub(crate) fn is_at(&self, e: u32) -> bool {
        // SYNC POINT: pairs with `publish`'s Release swap.
        reached(self.0.load(Ordering::Acquire), e)
    }

    /// The epoch last published (Acquire).
    #[inline]
    pub(crate) fn epoch(&self) -> u32 {
        // SYNC POINT: pairs with `publish`'s Release swap.
        self.0.load(Ordering::Acquire) & EPOCH
    }

    /// Waits until epoch `e` (or a later one) has been published: spin,
    /// yield, then sleep on the word. While sleeping, every
    /// [`NAPS_PER_CHECK`]th nap asks `failed` whether a member the wait
    /// depends on has ended without finalizing; when it says so (and the
    /// word is still short of `e`), the wait ends with its error. The fast
    /// path (the word already at `e`) and the spinning never call it.
    #[inline]
    pub(crate) fn wait<E>(&self, e: u32, failed: impl FnMut() -> Option<E>) -> Result<(), E> {
        if self.is_at(e) {
            return Ok(());
        }
        self.wait_slow(e, failed)
    }

    #[cold]
    fn wait_slow<E>(&self, e: u32, mut failed: impl FnMut() -> Option<E>) -> Result<(), E> {
        let mut backoff = Backoff::new();
        let mut naps = 0u32;
        loop {
            // SYNC POINT: pairs with `publish`'s Release swap.
            let v = self.0.load(Ordering::Acquire);
            if reached(v, e) {
                return Ok(());
            }
            if !backoff.is_sleeping() {
                backoff.snooze();
                continue;
            }
            super::progress_elsewhere();
            naps = naps.wrapping_add(1);
            if naps % NAPS_PER_CHECK == 0 {
                if let Some(err) = failed() {
                    // What the member published before it ended counts:
                    // one last look.
                    if self.is_at(e) {
                        return Ok(());
                    }
                    return Err(err);
                }
            }
            // Relaxed: the mark only asks the writer to wake us; the data
            // is acquired by the load at the top of the loop. A failed
            // exchange means the word changed: look again.
            let marked = v | SLEEPER;
            if v & SLEEPER != 0
                || self
                    .0
                    .compare_exchange(v, marked, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                futex_wait(&self.0, marked, NAP);
            }
        }
    }
}

/// One phase of a slot: the owner's publication for the epochs of one
/// parity.
#[repr(C, align(64))]
pub(crate) struct Phase {
    pub(crate) arrive: SeqWord,
    /// The last epoch the owner had finished when it published this phase
    /// (so a reader learns it with the line it reads anyway, and rarely
    /// needs the owner's `done` word).
    pub(crate) finished: AtomicU32,
    /// A buffer of the owner's, in the node heap (0: the data is inline).
    pub(crate) ptr: AtomicU64,
    /// A second buffer (a result the others write into or read from).
    pub(crate) ptr2: AtomicU64,
    /// The length of the contribution in bytes (readers check it against
    /// what they expect, so that mismatched counts are an error, never a
    /// read past the data).
    pub(crate) len: AtomicU64,
    /// Inline data; written by the owner before `arrive`, read by the
    /// others after it.
    data: [u8; INLINE],
}

/// The owner's progress words, on a cache line of their own.
#[repr(C, align(64))]
pub(crate) struct Progress {
    pub(crate) mid: SeqWord,
    pub(crate) done: SeqWord,
}

/// One member's slot.
#[repr(C)]
pub(crate) struct Slot {
    pub(crate) phase: [Phase; PHASES as usize],
    pub(crate) progress: Progress,
}

/// The block's header.
#[repr(C, align(64))]
struct Header {
    /// Members still holding the block; the one that brings it to zero
    /// frees it.
    refs: AtomicU32,
    /// Number of slots (checked by every member when it attaches).
    size: u32,
}

const _: () = assert!(std::mem::size_of::<Phase>() == 17 * 64);
const _: () = assert!(std::mem::size_of::<Progress>() == 64);
const _: () = assert!(std::mem::size_of::<Header>() == 64);

/// A member's view of the block.
#[derive(Debug)]
pub(crate) struct Block {
    base: NonNull<Header>,
    size: u32,
}

// SAFETY: the block lives in the node heap, which stays mapped while the
// runtime is up; every field a thread touches through `Block` is an atomic
// or inline data whose accesses the sequence words order.
unsafe impl Send for Block {}
// SAFETY: as for `Send`.
unsafe impl Sync for Block {}

fn layout(size: u32) -> Result<Layout> {
    let bytes = std::mem::size_of::<Slot>()
        .checked_mul(size as usize)
        .and_then(|b| b.checked_add(std::mem::size_of::<Header>()))
        .ok_or_else(|| Error::Internal("collective block size overflows".into()))?;
    Layout::from_size_align(bytes, 64).map_err(|e| Error::Internal(e.to_string()))
}

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

    /// The block another member created, at `addr`.
    ///
    /// # Safety
    /// `addr` came from [`Block::create`] on this communicator's rank 0,
    /// and this member has not attached to it before.
    pub(crate) unsafe fn attach(addr: u64, size: u32) -> Result<Block> {
        let base = NonNull::new(addr as usize as *mut Header)
            .filter(|_| shmheap::is_shared(addr as usize as *const u8))
            .ok_or_else(|| Error::Internal(format!("collective block {addr:#x} not shared")))?;
        // SAFETY: the caller's guarantee: a live block whose header was
        // written before its address was sent to us (the message orders it).
        let n = unsafe { (*base.as_ptr()).size };
        if n != size {
            return Err(Error::Internal(format!(
                "collective block for {n} members, communicator of {size}"
            )));
        }
        Ok(Block { base, size })
    }

    /// The block's address (to send to the other members).
    pub(crate) fn addr(&self) -> u64 {
        self.base.as_ptr() as usize as u64
    }

    /// Member `r`'s slot.
    #[inline]
    pub(crate) fn slot(&self, r: u32) -> &Slot {
        debug_assert!(r < self.size);
        // SAFETY: `r < size`, so the slot lies inside the block, which is
        // live while `self` holds a reference.
        unsafe { &*self.base.as_ptr().add(1).cast::<Slot>().add(r as usize) }
    }

    /// The inline data of member `r`'s phase for epoch `e`.
    #[inline]
    pub(crate) fn inline(&self, r: u32, e: u32) -> *mut u8 {
        let phase: *const Phase = &self.slot(r).phase[phase_of(e)];
        // SAFETY: a field of a live phase; the pointer is only used for
        // accesses ordered by the phase's `arrive` word.
        unsafe { std::ptr::addr_of!((*phase).data).cast::<u8>().cast_mut() }
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
                // `create`; nobody holds it any more. The heap routes a
                // block freed by another rank to its owner's arena.
                unsafe { shmheap::ShmHeap::new().dealloc(self.base.as_ptr().cast(), l) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_compare_across_the_wrap() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(reached(0, EPOCH));
        assert!(!reached(EPOCH, 0));
        assert!(reached(3 | SLEEPER, 3));
    }

    #[test]
    fn a_waiter_sees_a_publication_from_another_thread() {
        let w = std::sync::Arc::new(SeqWord(AtomicU32::new(0)));
        let t = {
            let w = w.clone();
            std::thread::spawn(move || w.wait(3, || None::<()>))
        };
        std::thread::sleep(Duration::from_millis(20));
        w.publish(1);
        w.publish(3);
        t.join().unwrap().unwrap();
        assert!(w.is_at(3) && !w.is_at(4));
    }

    #[test]
    fn a_sleeping_waiter_gives_up_when_told_a_member_failed() {
        let w = SeqWord(AtomicU32::new(0));
        let mut asked = 0;
        let r = w.wait(1, || {
            asked += 1;
            (asked == 3).then_some("gone")
        });
        assert_eq!(r, Err("gone"));
        assert_eq!(asked, 3);
        // Published: no question asked.
        w.publish(1);
        assert_eq!(w.wait(1, || -> Option<()> { panic!("asked") }), Ok(()));
    }
}
