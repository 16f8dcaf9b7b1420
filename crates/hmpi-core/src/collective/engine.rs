//! The collective algorithms on bytes, over one communicator's shared
//! block (see [`super::shared`]).
//!
//! Every algorithm is flat: each member publishes what it contributes in
//! its own slot (inline when it is small, else the address of its buffer
//! in the node heap) and reads what it needs straight from the others'
//! slots or buffers. So each byte is copied once, from where it is to
//! where it is wanted, and a member waits only on words that one other
//! member writes — no locks, no message queues.
//!
//! * Small contributions (up to [`INLINE`] bytes) are copied into the
//!   slot, so the caller may return (and reuse its buffer) as soon as it
//!   has read what it needs.
//! * Larger ones are read in place: the owner waits, before it returns,
//!   until every reader is `done`. A buffer outside the node heap (the
//!   stack, a static, memory from before the heap) is first copied into a
//!   staging buffer in the heap.
//! * Reductions combine in rank order, whatever the size: every element
//!   is `in_0 op (in_1 op (… op in_{n-1}))`, so results are the same on
//!   every member and in every run, and non-commutative operations get
//!   MPI's order. Large vectors are split into one slice per member; each
//!   member reduces its slice straight from the others' buffers, then (for
//!   allreduce) copies the others' slices from their results.
//!
//! Callers (the typed API, the C library) check arguments first; these
//! functions trust them.

use super::shared::{Block, INLINE};
use crate::error::{Error, Result};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// How a reduction combines elements.
pub trait Combine {
    /// Bytes of one element (the slices given to [`Combine::apply`] hold
    /// whole elements).
    fn element_size(&self) -> usize;
    /// `inout[i] = input[i] op inout[i]` for every element; `input` and
    /// `inout` do not overlap.
    fn apply(&self, input: &[u8], inout: &mut [u8]);
}

/// A buffer in this rank's arena of the node heap, for contributions whose
/// own memory the others cannot read.
#[derive(Debug, Default)]
struct Staging {
    ptr: usize,
    cap: usize,
}

const STAGING_ALIGN: usize = 64;

impl Staging {
    /// At least `len` bytes of heap memory (kept for the next call).
    fn get(&mut self, len: usize) -> Result<*mut u8> {
        if len > self.cap {
            self.release();
            let cap = len.next_power_of_two().max(4096);
            let l = Layout::from_size_align(cap, STAGING_ALIGN)
                .map_err(|e| Error::Internal(e.to_string()))?;
            self.ptr = shmheap::ShmHeap::new().try_alloc(l)?.as_ptr() as usize;
            self.cap = cap;
        }
        Ok(self.ptr as *mut u8)
    }

    fn release(&mut self) {
        if self.cap > 0 {
            if let Ok(l) = Layout::from_size_align(self.cap, STAGING_ALIGN) {
                // SAFETY: allocated by `ShmHeap` with this layout in `get`.
                unsafe { shmheap::ShmHeap::new().dealloc(self.ptr as *mut u8, l) };
            }
            self.cap = 0;
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.release();
    }
}

/// One member's state for one communicator's collectives.
#[derive(Debug)]
pub struct Coll {
    block: Block,
    rank: u32,
    size: u32,
    /// The last epoch begun.
    epoch: AtomicU32,
    /// The latest epoch seen published by each member (a cache of their
    /// `arrive` words, so that the check in `begin` rarely reads them).
    seen: Box<[AtomicU32]>,
    /// Two staging buffers (a contribution and a result).
    staging: Mutex<[Staging; 2]>,
}

/// A contribution or result buffer as the others see it.
#[derive(Clone, Copy)]
struct Shared(*mut u8);

/// The byte range of member `r`'s slice of `count` elements of `es` bytes.
#[inline]
fn slice_of(count: usize, es: usize, size: u32, r: u32) -> (usize, usize) {
    let (n, r) = (size as usize, r as usize);
    let lo = count * r / n;
    let hi = count * (r + 1) / n;
    (lo * es, hi * es)
}

impl Coll {
    /// The state of member `rank` over `block`.
    pub(crate) fn new(block: Block, rank: u32, size: u32) -> Coll {
        Coll {
            block,
            rank,
            size,
            epoch: AtomicU32::new(0),
            seen: (0..size).map(|_| AtomicU32::new(0)).collect(),
            staging: Mutex::new([Staging::default(), Staging::default()]),
        }
    }

    fn staging(&self) -> std::sync::MutexGuard<'_, [Staging; 2]> {
        // A panic while staging leaves only a buffer behind: still usable.
        self.staging.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the next epoch: waits until every member has finished the
    /// epoch before the previous one (whose phase this one reuses).
    fn begin(&self) -> u32 {
        // Relaxed: the counter is this process's own; collectives on one
        // communicator are not called concurrently (MPI's rule).
        let e = self.epoch.load(Ordering::Relaxed).wrapping_add(1) & 0x7fff_ffff;
        self.epoch.store(e, Ordering::Relaxed);
        let prev = e.wrapping_sub(1) & 0x7fff_ffff;
        for r in self.others() {
            // A member that published epoch `e - 1` has finished `e - 2`.
            self.wait_arrive(r, prev);
        }
        e
    }

    fn others(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.size).filter(move |&r| r != self.rank)
    }

    /// Waits until member `r` has published epoch `e`.
    #[inline]
    fn wait_arrive(&self, r: u32, e: u32) {
        let seen = &self.seen[r as usize];
        // Relaxed: a local cache of an epoch already acquired below.
        let s = seen.load(Ordering::Relaxed);
        if s.wrapping_sub(e) & 0x7fff_ffff < 1 << 30 {
            return;
        }
        self.block.slot(r).phase[(e & 1) as usize].arrive.wait(e);
        seen.store(e, Ordering::Relaxed);
    }

    /// Publishes this member's contribution for epoch `e`: `bytes` inline
    /// (when given), and the two addresses.
    ///
    /// # Safety
    /// `inline` holds `len <= INLINE` readable bytes.
    unsafe fn publish(&self, e: u32, inline: Option<(*const u8, usize)>, ptr: usize, ptr2: usize) {
        let me = self.rank;
        if let Some((p, len)) = inline {
            debug_assert!(len <= INLINE);
            // SAFETY: the caller's guarantee for the source; the phase is
            // ours to write: every member finished reading it (`begin`).
            unsafe { std::ptr::copy_nonoverlapping(p, self.block.inline(me, e), len) };
        }
        let phase = &self.block.slot(me).phase[(e & 1) as usize];
        // Relaxed: published by the Release in `arrive.publish`.
        phase.ptr.store(ptr as u64, Ordering::Relaxed);
        phase.ptr2.store(ptr2 as u64, Ordering::Relaxed);
        phase.arrive.publish(e);
    }

    /// Member `r`'s data for epoch `e` (after `wait_arrive(r, e)`): its
    /// inline bytes when it published no address.
    fn data_of(&self, r: u32, e: u32) -> Shared {
        let phase = &self.block.slot(r).phase[(e & 1) as usize];
        // Relaxed: ordered by the Acquire in `wait_arrive`.
        match phase.ptr.load(Ordering::Relaxed) {
            0 => Shared(self.block.inline(r, e)),
            p => Shared(p as usize as *mut u8),
        }
    }

    fn result_of(&self, r: u32, e: u32) -> Shared {
        let phase = &self.block.slot(r).phase[(e & 1) as usize];
        // Relaxed: ordered by the Acquire in `wait_arrive`.
        Shared(phase.ptr2.load(Ordering::Relaxed) as usize as *mut u8)
    }

    fn finish(&self, e: u32) {
        self.block.slot(self.rank).progress.done.publish(e);
    }

    /// Waits until every other member is done with epoch `e`.
    fn wait_all_done(&self, e: u32) {
        for r in self.others() {
            self.block.slot(r).progress.done.wait(e);
        }
    }

    /// `buf` if the others can read it, else a staged copy of its `len`
    /// bytes (`copy`: copy them in).
    ///
    /// # Safety
    /// `buf` holds `len` readable bytes.
    unsafe fn readable(
        &self,
        st: &mut Staging,
        buf: *const u8,
        len: usize,
        copy: bool,
    ) -> Result<*mut u8> {
        if len == 0 || shmheap::is_shared(buf) {
            return Ok(buf.cast_mut());
        }
        let s = st.get(len)?;
        if copy {
            // SAFETY: `buf` is readable (caller), `s` holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(buf, s, len) };
        }
        Ok(s)
    }

    /// Blocks until every member has called it.
    pub fn barrier(&self) -> Result<()> {
        let e = self.begin();
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0) };
        for r in self.others() {
            self.wait_arrive(r, e);
        }
        Ok(())
    }

    /// Broadcasts `len` bytes at `buf` from `root`.
    ///
    /// # Safety
    /// `buf` holds `len` bytes, readable at the root and writable
    /// elsewhere, untouched by others during the call.
    pub unsafe fn bcast(&self, buf: *mut u8, len: usize, root: u32) -> Result<()> {
        let e = self.begin();
        if self.rank == root {
            if len <= INLINE {
                // SAFETY: `buf` holds `len` bytes (caller).
                unsafe { self.publish(e, Some((buf, len)), 0, 0) };
                return Ok(());
            }
            let mut st = self.staging();
            // SAFETY: the caller's guarantee.
            let src = unsafe { self.readable(&mut st[0], buf, len, true)? };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
            self.wait_all_done(e);
            return Ok(());
        }
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0) };
        self.wait_arrive(root, e);
        let src = self.data_of(root, e);
        // SAFETY: the root published `len` bytes there (its inline area or
        // its buffer, which it keeps until we are done); `buf` is ours.
        unsafe { std::ptr::copy_nonoverlapping(src.0, buf, len) };
        self.finish(e);
        Ok(())
    }

    /// Gathers `len` bytes from every member into `recv` at the root
    /// (member `r`'s at `recv + displs[r]`, `counts[r]` bytes of it; all
    /// `len` when `counts` is `None`).
    ///
    /// # Safety
    /// `send` holds `len` readable bytes; at the root, `recv` is writable
    /// at every `displs[r]` for `counts[r]` (or `len`) bytes, and `displs`
    /// / `counts` have one entry per member.
    pub unsafe fn gather(
        &self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        displs: &[usize],
        root: u32,
    ) -> Result<()> {
        let e = self.begin();
        if self.rank != root {
            if len <= INLINE {
                // SAFETY: `send` holds `len` bytes (caller).
                unsafe { self.publish(e, Some((send, len)), 0, 0) };
                return Ok(());
            }
            let mut st = self.staging();
            // SAFETY: the caller's guarantee.
            let src = unsafe { self.readable(&mut st[0], send, len, true)? };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
            self.block.slot(root).progress.done.wait(e);
            return Ok(());
        }
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0) };
        for r in 0..self.size {
            // SAFETY: the caller's guarantee for `recv`/`displs`.
            let dst = unsafe { recv.add(displs[r as usize]) };
            if r == root {
                // SAFETY: our own contribution; `copy` allows overlap (in
                // place: the same bytes).
                unsafe { std::ptr::copy(send, dst, len) };
                continue;
            }
            self.wait_arrive(r, e);
            let src = self.data_of(r, e);
            // SAFETY: member `r` published `len` bytes (every member
            // contributes the same length: the caller checked counts).
            unsafe { std::ptr::copy_nonoverlapping(src.0, dst, len) };
        }
        self.finish(e);
        Ok(())
    }

    /// Gathers contributions of different lengths at the root: member
    /// `r` sends `len` bytes (its own), the root places `counts[r]` bytes
    /// at `recv + displs[r]`.
    ///
    /// # Safety
    /// As [`Coll::gather`], with `counts[r]` equal to member `r`'s `len`.
    pub unsafe fn gatherv(
        &self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &[usize],
        displs: &[usize],
        root: u32,
    ) -> Result<()> {
        let e = self.begin();
        if self.rank != root {
            if len <= INLINE {
                // SAFETY: `send` holds `len` bytes (caller).
                unsafe { self.publish(e, Some((send, len)), 0, 0) };
                return Ok(());
            }
            let mut st = self.staging();
            // SAFETY: the caller's guarantee.
            let src = unsafe { self.readable(&mut st[0], send, len, true)? };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
            self.block.slot(root).progress.done.wait(e);
            return Ok(());
        }
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0) };
        for r in 0..self.size {
            let (n, d) = (counts[r as usize], displs[r as usize]);
            // SAFETY: the caller's guarantee for `recv`/`displs`.
            let dst = unsafe { recv.add(d) };
            if r == root {
                // SAFETY: our own contribution (possibly in place).
                unsafe { std::ptr::copy(send, dst, n.min(len)) };
                continue;
            }
            self.wait_arrive(r, e);
            let src = self.data_of(r, e);
            // SAFETY: member `r` published `counts[r]` bytes (caller).
            unsafe { std::ptr::copy_nonoverlapping(src.0, dst, n) };
        }
        self.finish(e);
        Ok(())
    }

    /// Scatters from the root: member `r` receives `counts[r]` bytes from
    /// `send + displs[r]` into `recv`.
    ///
    /// # Safety
    /// At the root `send` is readable at every `displs[r]` for `counts[r]`
    /// bytes; `recv` holds `counts[rank]` writable bytes (at the root it
    /// may be `send + displs[root]`, in place); `counts`/`displs` have one
    /// entry per member and are the same on every member.
    pub unsafe fn scatterv(
        &self,
        send: *const u8,
        counts: &[usize],
        displs: &[usize],
        recv: *mut u8,
        root: u32,
    ) -> Result<()> {
        let e = self.begin();
        let me = self.rank as usize;
        if self.rank == root {
            let end = counts
                .iter()
                .zip(displs)
                .map(|(&c, &d)| c + d)
                .max()
                .unwrap_or(0);
            let mut st = self.staging();
            // SAFETY: the caller's guarantee: `send` readable to `end`.
            let src = unsafe { self.readable(&mut st[0], send, end, true)? };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
            // SAFETY: ours, possibly in place.
            unsafe { std::ptr::copy(send.add(displs[me]), recv, counts[me]) };
            self.wait_all_done(e);
            return Ok(());
        }
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, 0, 0) };
        self.wait_arrive(root, e);
        let src = self.data_of(root, e);
        // SAFETY: the root's buffer holds our piece (same counts/displs on
        // every member), kept until we are done.
        unsafe { std::ptr::copy_nonoverlapping(src.0.add(displs[me]), recv, counts[me]) };
        self.finish(e);
        Ok(())
    }

    /// Every member gathers every member's `len` bytes: member `r`'s go
    /// to `recv + displs[r]` (`counts[r]` bytes).
    ///
    /// # Safety
    /// `send` holds `len` readable bytes (it may lie inside `recv` at
    /// `displs[rank]`: in place); `recv` is writable at every `displs[r]`
    /// for `counts[r]` bytes; `counts[rank] == len`, the same arrays on
    /// every member.
    pub unsafe fn allgatherv(
        &self,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let e = self.begin();
        let big = len > INLINE;
        let mut st = self.staging();
        if big {
            // SAFETY: the caller's guarantee.
            let src = unsafe { self.readable(&mut st[0], send, len, true)? };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
        } else {
            // SAFETY: `send` holds `len` bytes.
            unsafe { self.publish(e, Some((send, len)), 0, 0) };
        }
        for r in 0..self.size {
            // SAFETY: the caller's guarantee for `recv`/`displs`.
            let dst = unsafe { recv.add(displs[r as usize]) };
            if r == self.rank {
                // SAFETY: ours (possibly in place).
                unsafe { std::ptr::copy(send, dst, len) };
                continue;
            }
            self.wait_arrive(r, e);
            let src = self.data_of(r, e);
            // SAFETY: member `r` published `counts[r]` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.0, dst, counts[r as usize]) };
        }
        self.finish(e);
        if big || counts.iter().any(|&c| c > INLINE) {
            self.wait_all_done(e);
        }
        Ok(())
    }

    /// All-to-all: member `r` receives `scounts_of_s[r]` bytes from
    /// `send_s + sdispls_s[r]` of every member `s` into
    /// `recv + rdispls[s]`. Every member publishes its send displacements
    /// so that the others can find their pieces.
    ///
    /// # Safety
    /// `send` is readable at every `sdispls[r]` for `scounts[r]` bytes,
    /// `recv` writable at every `rdispls[s]` for `rcounts[s]` bytes, with
    /// `rcounts[s]` equal to member `s`'s `scounts[rank]`; `send` and
    /// `recv` do not overlap.
    pub unsafe fn alltoallv(
        &self,
        send: *const u8,
        scounts: &[usize],
        sdispls: &[usize],
        recv: *mut u8,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        let e = self.begin();
        let n = self.size as usize;
        let end = scounts
            .iter()
            .zip(sdispls)
            .map(|(&c, &d)| c + d)
            .max()
            .unwrap_or(0);
        let mut st = self.staging();
        // SAFETY: the caller's guarantee: `send` readable to `end`.
        let src = unsafe { self.readable(&mut st[0], send, end, true)? };
        // The displacements go inline (or, for many members, staged too).
        let table: Vec<u64> = sdispls.iter().map(|&d| d as u64).collect();
        let tbytes = n * 8;
        if tbytes <= INLINE {
            // SAFETY: `table` holds `tbytes` bytes.
            unsafe { self.publish(e, Some((table.as_ptr().cast(), tbytes)), src as usize, 0) };
        } else {
            let t = st[1].get(tbytes)?;
            // SAFETY: `t` holds `tbytes` bytes of ours.
            unsafe { std::ptr::copy_nonoverlapping(table.as_ptr().cast::<u8>(), t, tbytes) };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, t as usize) };
        }
        let me = self.rank as usize;
        for s in 0..self.size {
            let si = s as usize;
            // SAFETY: the caller's guarantee for `recv`.
            let dst = unsafe { recv.add(rdispls[si]) };
            if s == self.rank {
                // SAFETY: our own piece; send and recv do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(send.add(sdispls[me]), dst, rcounts[si]) };
                continue;
            }
            self.wait_arrive(s, e);
            let phase = &self.block.slot(s).phase[(e & 1) as usize];
            // Relaxed: ordered by the Acquire in `wait_arrive`.
            let buf = phase.ptr.load(Ordering::Relaxed) as usize as *const u8;
            let t = phase.ptr2.load(Ordering::Relaxed);
            let tab = if t == 0 {
                self.block.inline(s, e).cast_const()
            } else {
                t as usize as *const u8
            };
            // SAFETY: member `s` published `n` displacements; unaligned
            // read of the one for us.
            let d = unsafe { tab.cast::<u64>().add(me).read_unaligned() } as usize;
            // SAFETY: member `s`'s buffer holds our piece at `d`.
            unsafe { std::ptr::copy_nonoverlapping(buf.add(d), dst, rcounts[si]) };
        }
        self.finish(e);
        self.wait_all_done(e);
        Ok(())
    }

    /// Reduces `count` elements of every member's `send` with `op`, in rank
    /// order, into `recv` at `root` (every member's `recv` when `root` is
    /// `None`: allreduce).
    ///
    /// # Safety
    /// `send` holds `count` elements readable (at a root or in allreduce it
    /// may equal `recv`: in place); `recv` holds `count` writable elements
    /// where a result is wanted.
    pub unsafe fn reduce(
        &self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &dyn Combine,
        root: Option<u32>,
    ) -> Result<()> {
        let es = op.element_size();
        let len = count * es;
        let wants = root.is_none_or(|r| r == self.rank);
        if len <= INLINE {
            return self.reduce_small(send, recv, len, op, root, wants);
        }
        let e = self.begin();
        let mut st = self.staging();
        let [s0, s1] = &mut *st;
        // A contribution in place is read by the others while results are
        // written over it: stage it.
        let in_place = std::ptr::eq(send, recv.cast_const());
        // SAFETY: the caller's guarantee.
        let src = unsafe {
            if in_place {
                let s = s0.get(len)?;
                std::ptr::copy_nonoverlapping(send, s, len);
                s
            } else {
                self.readable(s0, send, len, true)?
            }
        };
        // Where this member's result goes (if any): the others write
        // (reduce) or read (allreduce) slices of it.
        let res = if wants {
            // SAFETY: the caller's guarantee for `recv`.
            unsafe { self.readable(s1, recv, len, false)? }
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: no inline data.
        unsafe { self.publish(e, None, src as usize, res as usize) };
        for r in self.others() {
            self.wait_arrive(r, e);
        }
        // This member's slice: reduced from every member's buffer into the
        // result's slice (the root's, or our own).
        let (lo, hi) = slice_of(count, es, self.size, self.rank);
        let target = match root {
            Some(r) if r != self.rank => self.result_of(r, e).0,
            _ => res,
        };
        if hi > lo {
            let inputs: Vec<*const u8> = (0..self.size)
                .map(|r| {
                    if r == self.rank {
                        src.cast_const()
                    } else {
                        self.data_of(r, e).0.cast_const()
                    }
                })
                .collect();
            // SAFETY: every input holds `len` bytes; the target's slice is
            // written by this member alone.
            unsafe { combine_into(&inputs, lo, hi, target.add(lo), op) };
        }
        match root {
            Some(_) => {
                self.finish(e);
                self.wait_all_done(e);
            }
            None => {
                self.block.slot(self.rank).progress.mid.publish(e);
                for r in self.others() {
                    self.block.slot(r).progress.mid.wait(e);
                    let (lo, hi) = slice_of(count, es, self.size, r);
                    let theirs = self.result_of(r, e).0;
                    // SAFETY: member `r` finished its slice of its result
                    // (`mid`) and keeps it until we are done.
                    unsafe { std::ptr::copy_nonoverlapping(theirs.add(lo), res.add(lo), hi - lo) };
                }
                self.finish(e);
                self.wait_all_done(e);
            }
        }
        if wants && res != recv {
            // SAFETY: the staged result holds `len` bytes; `recv` is ours.
            unsafe { std::ptr::copy_nonoverlapping(res, recv, len) };
        }
        Ok(())
    }

    /// [`Coll::reduce`] for vectors that fit inline: every member reduces
    /// the whole vector itself from the others' slots.
    fn reduce_small(
        &self,
        send: *const u8,
        recv: *mut u8,
        len: usize,
        op: &dyn Combine,
        root: Option<u32>,
        wants: bool,
    ) -> Result<()> {
        let e = self.begin();
        // SAFETY: `send` holds `len <= INLINE` bytes (caller of `reduce`).
        unsafe { self.publish(e, Some((send, len)), 0, 0) };
        if !wants {
            return Ok(());
        }
        for r in self.others() {
            self.wait_arrive(r, e);
        }
        let inputs: Vec<*const u8> = (0..self.size)
            .map(|r| self.block.inline(r, e).cast_const())
            .collect();
        // SAFETY: every slot holds `len` inline bytes for epoch `e`; `recv`
        // holds `len` writable bytes (caller) and is not a slot.
        unsafe { combine_into(&inputs, 0, len, recv, op) };
        let _ = root;
        Ok(())
    }

    /// Inclusive (or, with `exclusive`, exclusive) prefix reduction:
    /// member `r` gets `in_0 op … op in_r` (`… op in_{r-1}`; member 0's
    /// `recv` is left as it is in the exclusive form).
    ///
    /// # Safety
    /// As [`Coll::reduce`] (in place allowed).
    pub unsafe fn scan(
        &self,
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: &dyn Combine,
        exclusive: bool,
    ) -> Result<()> {
        let len = count * op.element_size();
        let e = self.begin();
        let mut st = self.staging();
        let big = len > INLINE;
        if big {
            // Staged always: the others read it while we write `recv`,
            // which may be the same memory.
            let s = st[0].get(len)?;
            // SAFETY: `send` holds `len` bytes, `s` is ours.
            unsafe { std::ptr::copy_nonoverlapping(send, s, len) };
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, s as usize, 0) };
        } else {
            // SAFETY: `send` holds `len` bytes.
            unsafe { self.publish(e, Some((send, len)), 0, 0) };
        }
        let last = if exclusive { self.rank } else { self.rank + 1 };
        for r in 0..last {
            if r != self.rank {
                self.wait_arrive(r, e);
            }
        }
        if last > 0 && len > 0 {
            let inputs: Vec<*const u8> = (0..last)
                .map(|r| self.data_of(r, e).0.cast_const())
                .collect();
            // SAFETY: each input holds `len` bytes for epoch `e` (our own
            // is the published copy); `recv` is ours.
            unsafe { combine_into(&inputs, 0, len, recv, op) };
        }
        self.finish(e);
        if big {
            self.wait_all_done(e);
        }
        Ok(())
    }

    /// Reduce-scatter: member `r` gets the reduction of every member's
    /// block `r` (`counts[r]` elements, blocks back to back in `send`).
    ///
    /// # Safety
    /// `send` holds the sum of `counts` elements; `recv` holds
    /// `counts[rank]` writable elements and does not overlap `send` unless
    /// it is `send` itself (in place: the result goes to the start).
    pub unsafe fn reduce_scatter(
        &self,
        send: *const u8,
        recv: *mut u8,
        counts: &[usize],
        op: &dyn Combine,
    ) -> Result<()> {
        let es = op.element_size();
        let total: usize = counts.iter().sum::<usize>() * es;
        let e = self.begin();
        let mut st = self.staging();
        let in_place = std::ptr::eq(send, recv.cast_const());
        // SAFETY: the caller's guarantee.
        let src = unsafe {
            if in_place {
                let s = st[0].get(total)?;
                std::ptr::copy_nonoverlapping(send, s, total);
                s
            } else {
                self.readable(&mut st[0], send, total, true)?
            }
        };
        let big = total > INLINE;
        if big {
            // SAFETY: no inline data.
            unsafe { self.publish(e, None, src as usize, 0) };
        } else {
            // SAFETY: `src` holds `total` bytes.
            unsafe { self.publish(e, Some((src, total)), 0, 0) };
        }
        for r in self.others() {
            self.wait_arrive(r, e);
        }
        let me = self.rank as usize;
        let lo = counts[..me].iter().sum::<usize>() * es;
        let hi = lo + counts[me] * es;
        let inputs: Vec<*const u8> = (0..self.size)
            .map(|r| {
                if r == self.rank && big {
                    src.cast_const()
                } else {
                    self.data_of(r, e).0.cast_const()
                }
            })
            .collect();
        if hi > lo {
            // SAFETY: each input holds `total` bytes; `recv` holds our
            // block and is not read by anyone (staged when in place).
            unsafe { combine_into(&inputs, lo, hi, recv, op) };
        }
        self.finish(e);
        if big {
            self.wait_all_done(e);
        }
        Ok(())
    }
}

/// `out = in_0 op (in_1 op (… op in_{n-1}))` over bytes `lo..hi` of the
/// inputs, written to `out` (which holds `hi - lo` bytes).
///
/// # Safety
/// Every input holds at least `hi` readable bytes; `out` holds `hi - lo`
/// writable bytes and overlaps no input.
unsafe fn combine_into(inputs: &[*const u8], lo: usize, hi: usize, out: *mut u8, op: &dyn Combine) {
    let n = hi - lo;
    let Some((&last, rest)) = inputs.split_last() else {
        return;
    };
    // SAFETY: the caller's guarantees.
    unsafe {
        std::ptr::copy_nonoverlapping(last.add(lo), out, n);
        let acc = std::slice::from_raw_parts_mut(out, n);
        for &p in rest.iter().rev() {
            op.apply(std::slice::from_raw_parts(p.add(lo), n), acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_vector_at_element_boundaries() {
        for size in 1..8u32 {
            for count in [0usize, 1, 7, 100, 1001] {
                let mut end = 0;
                for r in 0..size {
                    let (lo, hi) = slice_of(count, 8, size, r);
                    assert_eq!(lo, end);
                    assert!(hi >= lo && hi % 8 == 0);
                    end = hi;
                }
                assert_eq!(end, count * 8);
            }
        }
    }

    struct Concat;
    impl Combine for Concat {
        fn element_size(&self) -> usize {
            1
        }
        // A non-commutative "operation" on digits: out = in * 10 + out
        // (mod 256), which shows the order of combination.
        fn apply(&self, input: &[u8], inout: &mut [u8]) {
            for (o, &i) in inout.iter_mut().zip(input) {
                *o = i.wrapping_mul(10).wrapping_add(*o);
            }
        }
    }

    #[test]
    fn combination_is_in_rank_order() {
        let ins = [[1u8], [2], [3]];
        let ptrs: Vec<*const u8> = ins.iter().map(|a| a.as_ptr()).collect();
        let mut out = [0u8];
        // SAFETY: one byte in each input and in `out`.
        unsafe { combine_into(&ptrs, 0, 1, out.as_mut_ptr(), &Concat) };
        // 1 op (2 op 3) = 1*10 + (2*10 + 3) = 33
        assert_eq!(out, [33]);
    }
}
