//! The operations of the raw tier: put, get, the accumulates and their
//! request-based forms, each complete when its call returns.
//!
//! An operation names its target memory as (rank, displacement, count,
//! datatype); [`Win::target`] checks the epoch and the range and finds
//! where the bytes are: plain memory here (the node heap, or this
//! process's own window) or the target's address space (`remote`).
//!
//! A put or get of one dense run each side into memory mapped here is one
//! copy after those checks (fixed-size register moves up to 64 bytes), with
//! no lock and no allocation.
//!
//! Ordering: MPI completes an operation at the target at the latest at
//! `flush`, and a completed put must be seen by this thread's later reads
//! of the window (two origins that each put, flush and get the other's
//! location cannot both miss). The copies are complete when their calls
//! return; the one order the hardware does not give by itself is that of
//! a store before a later load (a store may wait in the store buffer). So a
//! thread that stored to window memory owes a full fence ([`owe`]), and
//! its next operation that reads window memory pays it first ([`settle`]);
//! `flush` itself need not fence: a put followed only by puts, flushes or
//! other communication (whose stores x86-64 keeps after the put's; on
//! other architectures `flush` adds a release fence for that order)
//! costs no full fence.

use super::{remote, shared, Flavor, Win};
use crate::datatype::{BasicType, Datatype};
use crate::error::{Error, Result};
use crate::op::{reduce_local_raw, Operation, SystemOperation};
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

thread_local! {
    /// This thread has stored to window memory (a put or an accumulate)
    /// and not fenced since.
    static OWED: Cell<bool> = const { Cell::new(false) };
}

/// Records that this thread stored to window memory.
#[inline]
pub(super) fn owe() {
    OWED.set(true);
}

/// Before a read of window memory: the stores of this thread's earlier
/// operations are visible to every process first.
#[inline]
pub(super) fn settle() {
    if OWED.get() {
        // SeqCst: a full fence orders the earlier operations' stores
        // before the loads that follow (store-to-load, the order plain
        // stores and loads lack); later stores keep their order (on x86-64 by
        // themselves, elsewhere through `flush`'s release fence).
        fence(Ordering::SeqCst);
        OWED.set(false);
    }
}

/// After a full fence by this thread: nothing is owed.
#[inline]
pub(super) fn fenced() {
    OWED.set(false);
}

/// How an operation touches the target's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Touch {
    /// It stores only (put).
    Store,
    /// It loads only (get).
    Load,
    /// It loads and stores (the accumulates, compare-and-swap).
    Both,
}

/// Copies `len <= 64` bytes from `src` to `dst` with fixed-size moves, every
/// load before the first store (so the ranges may overlap).
///
/// # Safety
/// `src` is readable and `dst` writable for `len` bytes; `len <= 64`.
#[inline]
unsafe fn copy_small(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: each access lies in [0, len) of its buffer (the caller's
    // guarantee, with the arm's bounds on `len`); unaligned moves, no
    // alignment assumed.
    unsafe {
        match len {
            0 => {}
            1 => dst.write(src.read()),
            2..=3 => {
                let a = src.cast::<u16>().read_unaligned();
                let b = src.add(len - 2).cast::<u16>().read_unaligned();
                dst.cast::<u16>().write_unaligned(a);
                dst.add(len - 2).cast::<u16>().write_unaligned(b);
            }
            4..=7 => {
                let a = src.cast::<u32>().read_unaligned();
                let b = src.add(len - 4).cast::<u32>().read_unaligned();
                dst.cast::<u32>().write_unaligned(a);
                dst.add(len - 4).cast::<u32>().write_unaligned(b);
            }
            8..=16 => {
                let a = src.cast::<u64>().read_unaligned();
                let b = src.add(len - 8).cast::<u64>().read_unaligned();
                dst.cast::<u64>().write_unaligned(a);
                dst.add(len - 8).cast::<u64>().write_unaligned(b);
            }
            17..=32 => {
                let a = src.cast::<u128>().read_unaligned();
                let b = src.add(len - 16).cast::<u128>().read_unaligned();
                dst.cast::<u128>().write_unaligned(a);
                dst.add(len - 16).cast::<u128>().write_unaligned(b);
            }
            _ => {
                let a = src.cast::<u128>().read_unaligned();
                let b = src.add(16).cast::<u128>().read_unaligned();
                let c = src.add(len - 32).cast::<u128>().read_unaligned();
                let d = src.add(len - 16).cast::<u128>().read_unaligned();
                dst.cast::<u128>().write_unaligned(a);
                dst.add(16).cast::<u128>().write_unaligned(b);
                dst.add(len - 32).cast::<u128>().write_unaligned(c);
                dst.add(len - 16).cast::<u128>().write_unaligned(d);
            }
        }
    }
}

/// The largest transfer [`copy_small`] makes.
const SMALL: usize = 64;

/// Where an operation lands.
#[derive(Debug, Clone, Copy)]
struct Target {
    rank: u32,
    /// Element 0 in the target's address space.
    addr: u64,
    /// The memory lies in the node heap.
    heap: bool,
    /// It can be reached with plain loads and stores here (in the heap,
    /// or this process's own memory).
    direct: bool,
    pid: u32,
}

fn range(reason: String) -> Error {
    Error::RmaRange { reason }
}

fn is_pair(b: BasicType) -> bool {
    use BasicType::*;
    matches!(
        b,
        FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoF32 | TwoF64
    )
}

/// The packed bytes of `count` elements of `dt` at `origin` (borrowed when
/// they are one run).
///
/// # Safety
/// The elements are readable at `origin`.
unsafe fn packed<'a>(origin: *const u8, count: usize, dt: &Datatype) -> Result<Cow<'a, [u8]>> {
    let bytes = dt.packed_size(count)?;
    if bytes == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    if let Some(off) = dt.dense_offset() {
        // SAFETY: the caller's guarantee: one run of `bytes` bytes.
        return Ok(Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(origin.wrapping_offset(off), bytes)
        }));
    }
    let mut v = vec![0u8; bytes];
    // SAFETY: the caller's guarantee.
    unsafe { dt.pack_raw(origin, count, &mut v)? };
    Ok(Cow::Owned(v))
}

fn same_size(a: usize, b: usize, what: &str) -> Result<()> {
    if a != b {
        return Err(Error::Type {
            reason: format!(
                "{what}: the origin's elements hold {a} bytes, the target's {b} (the type \
                 signatures must match)"
            ),
        });
    }
    Ok(())
}

impl Win {
    /// Checks the epoch and the range of `count` elements of `dt` at
    /// displacement `disp` of `rank`; `None` for `PROC_NULL`. Keeps the
    /// store-to-load order of the module's docs for an operation that
    /// `touch`es the target so.
    #[inline]
    fn target(
        &self,
        rank: i32,
        disp: u64,
        count: usize,
        dt: &Datatype,
        what: &str,
        touch: Touch,
    ) -> Result<Option<Target>> {
        if rank == vci::PROC_NULL {
            return Ok(None);
        }
        let p = *self.peer(rank)?;
        self.check_access(rank as u32, what)?;
        let addr = disp
            .checked_mul(p.disp_unit)
            .and_then(|d| d.checked_add(p.base))
            .ok_or_else(|| range(format!("{what}: displacement {disp} overflows")))?;
        let mut heap = p.heap;
        if let Some((lo, hi)) = dt.reach(count)? {
            let lo = i128::from(addr) + lo as i128;
            let hi = i128::from(addr) + hi as i128;
            if self.flavor == Flavor::Dynamic {
                if !self.in_region(rank as u32, lo, hi) {
                    return Err(range(format!(
                        "{what}: [{lo:#x}, {hi:#x}) of rank {rank} is not inside a region \
                         attached to the dynamic window"
                    )));
                }
                heap = shmheap::is_shared(lo as usize as *const u8)
                    && shmheap::is_shared((hi - 1) as usize as *const u8);
            } else {
                let (b, e) = (i128::from(p.base), i128::from(p.base) + i128::from(p.size));
                if lo < b || hi > e {
                    return Err(range(format!(
                        "{what}: bytes {}..{} of rank {rank}'s window of {} bytes (displacement \
                         {disp}, unit {})",
                        lo - b,
                        hi - b,
                        p.size,
                        p.disp_unit
                    )));
                }
            }
        }
        if touch != Touch::Store {
            settle();
        }
        if touch != Touch::Load {
            owe();
        }
        Ok(Some(Target {
            rank: rank as u32,
            addr,
            heap,
            direct: heap || rank as u32 == self.me,
            pid: p.pid,
        }))
    }

    /// Whether `[lo, hi)` lies in one region attached by `rank`.
    fn in_region(&self, rank: u32, lo: i128, hi: i128) -> bool {
        self.block.head(rank).regions.iter().any(|r| {
            // SYNC POINT: Acquire pairs with `attach`'s Release store of
            // the length: the base is the one written with it.
            let len = r.len.load(Ordering::Acquire);
            // Relaxed: ordered by the length's Acquire load.
            let b = i128::from(r.base.load(Ordering::Relaxed));
            len != 0 && lo >= b && hi <= b + i128::from(len)
        })
    }

    /// The target's bytes of `count` elements of `dt`, as (address,
    /// length) runs in packing order, neighbours merged.
    fn segments(t: &Target, count: usize, dt: &Datatype) -> Vec<(u64, usize)> {
        let mut v: Vec<(u64, usize)> = Vec::new();
        let ext = dt.extent() as i64;
        for i in 0..count as i64 {
            let elem = (t.addr as i64).wrapping_add(i.wrapping_mul(ext));
            for &(off, len) in dt.blocks() {
                if len == 0 {
                    continue;
                }
                let a = elem.wrapping_add(off as i64) as u64;
                match v.last_mut() {
                    Some(last) if last.0 + last.1 as u64 == a => last.1 += len,
                    _ => v.push((a, len)),
                }
            }
        }
        v
    }

    /// Where a small transfer of one dense run each side may go with no
    /// more checks: the address in this process of `tcount` elements of
    /// `tdt` at `disp` of `rank`, and their length, when the transfer is
    /// between dense types of one size, at most [`SMALL`] bytes and not
    /// empty, inside a window of fixed memory mapped here, within an epoch
    /// of a lock held on `rank`. `None` sends the operation through the
    /// general path, which makes every check and reports what is wrong.
    #[inline(always)]
    fn small_target(
        &self,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Option<(*mut u8, usize)> {
        let r = usize::try_from(rank).ok()?;
        let p = self.peers.get(r)?;
        if !(p.heap || r == self.me as usize)
            || self.flavor == Flavor::Dynamic
            || !self.lock_held(r as u32)
        {
            return None;
        }
        let (o, t) = (odt.dense_offset()?, tdt.dense_offset()?);
        let bytes = ocount.checked_mul(odt.size())?;
        if bytes == 0 || bytes > SMALL || tcount.checked_mul(tdt.size())? != bytes || o != 0 {
            return None;
        }
        // The run's first byte, from the window's base (a dense type's
        // bytes start at its offset).
        let lo = disp
            .checked_mul(p.disp_unit)?
            .checked_add_signed(t as i64)?;
        if lo.checked_add(bytes as u64)? > p.size {
            return None;
        }
        Some(((p.base + lo) as usize as *mut u8, bytes))
    }

    /// `MPI_Put`: `ocount` elements of `odt` at `origin` into `tcount`
    /// elements of `tdt` at displacement `disp` of `rank`'s window.
    ///
    /// # Safety
    /// The origin's elements are readable at `origin`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        if let Some((dst, bytes)) = self.small_target(ocount, odt, rank, disp, tcount, tdt) {
            owe();
            // SAFETY: the caller's guarantee for the origin (one dense run
            // at `origin`, offset 0); the target's bytes are inside its
            // window, mapped here (`small_target`); `copy_small` allows an
            // overlap (a put within one's own window).
            unsafe { copy_small(dst, origin, bytes) };
            return Ok(());
        }
        let bytes = odt.packed_size(ocount)?;
        same_size(bytes, tdt.packed_size(tcount)?, "MPI_Put")?;
        let Some(t) = self.target(rank, disp, tcount, tdt, "MPI_Put", Touch::Store)? else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        if t.direct {
            if let (Some(oo), Some(to)) = (odt.dense_offset(), tdt.dense_offset()) {
                let dst = (t.addr as usize as *mut u8).wrapping_offset(to);
                let src = origin.wrapping_offset(oo);
                if bytes <= SMALL {
                    // SAFETY: the caller's guarantee for the origin; the
                    // target's bytes are inside its window (checked),
                    // mapped here; `copy_small` allows an overlap (a put
                    // within one's own window).
                    unsafe { copy_small(dst, src, bytes) };
                } else {
                    // SAFETY: as above; the agents' `copy` allows an
                    // overlap too and returns complete.
                    unsafe { self.agents.copy(dst, src, bytes) };
                }
                return Ok(());
            }
            // SAFETY: the caller's guarantee.
            let data = unsafe { packed(origin, ocount, odt)? };
            // SAFETY: the target's elements are inside its window
            // (checked), mapped here.
            unsafe { tdt.unpack_raw(&data, t.addr as usize as *mut u8, tcount)? };
            return Ok(());
        }
        // SAFETY: the caller's guarantee.
        let data = unsafe { packed(origin, ocount, odt)? };
        remote::write(t.pid, &Win::segments(&t, tcount, tdt), &data)
    }

    /// `MPI_Get`: `tcount` elements of `tdt` at displacement `disp` of
    /// `rank`'s window into `ocount` elements of `odt` at `origin`.
    ///
    /// # Safety
    /// The origin's elements are writable at `origin`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get(
        &self,
        origin: *mut u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        if let Some((src, bytes)) = self.small_target(ocount, odt, rank, disp, tcount, tdt) {
            settle();
            // SAFETY: as in `put`, the other way round: `origin` holds one
            // dense run of `bytes` writable bytes at offset 0.
            unsafe { copy_small(origin, src, bytes) };
            return Ok(());
        }
        let bytes = odt.packed_size(ocount)?;
        same_size(bytes, tdt.packed_size(tcount)?, "MPI_Get")?;
        let Some(t) = self.target(rank, disp, tcount, tdt, "MPI_Get", Touch::Load)? else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        if t.direct {
            if let (Some(oo), Some(to)) = (odt.dense_offset(), tdt.dense_offset()) {
                let dst = origin.wrapping_offset(oo);
                let src = (t.addr as usize as *const u8).wrapping_offset(to);
                if bytes <= SMALL {
                    // SAFETY: as in `put`, the other way round.
                    unsafe { copy_small(dst, src, bytes) };
                } else {
                    // SAFETY: as in `put`, the other way round.
                    unsafe { self.agents.copy(dst, src, bytes) };
                }
                return Ok(());
            }
        }
        let mut buf = vec![0u8; bytes];
        if t.direct {
            // SAFETY: the target's elements are inside its window, mapped
            // here.
            unsafe { tdt.pack_raw(t.addr as usize as *const u8, tcount, &mut buf)? };
        } else {
            remote::read(t.pid, &Win::segments(&t, tcount, tdt), &mut buf)?;
        }
        // SAFETY: the caller's guarantee.
        unsafe { odt.unpack_raw(&buf, origin, ocount)? };
        Ok(())
    }

    /// `MPI_Accumulate`: combines `ocount` elements of `odt` at `origin`
    /// into the target's elements with `op` (any predefined operation,
    /// `REPLACE` and `NO_OP` included), element-wise atomically.
    ///
    /// # Safety
    /// The origin's elements are readable at `origin`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn accumulate(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
        op: SystemOperation,
    ) -> Result<()> {
        // SAFETY: the caller's guarantee; no result.
        unsafe {
            self.get_accumulate(
                origin,
                ocount,
                odt,
                std::ptr::null_mut(),
                0,
                None,
                rank,
                disp,
                tcount,
                tdt,
                op,
            )
        }
    }

    /// `MPI_Get_accumulate`: as [`Win::accumulate`], and the target's
    /// elements from before go to `rcount` elements of `rdt` at `result`
    /// (`rdt: None`: no result, as `accumulate`). With `NO_OP` the origin
    /// is not read (a count of 0 will do).
    ///
    /// # Safety
    /// The origin's elements are readable at `origin` (unless the
    /// operation is `NO_OP`), the result's writable at `result`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get_accumulate(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        result: *mut u8,
        rcount: usize,
        rdt: Option<&Datatype>,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
        op: SystemOperation,
    ) -> Result<()> {
        let what = if rdt.is_some() {
            "MPI_Get_accumulate"
        } else {
            "MPI_Accumulate"
        };
        let bytes = tdt.packed_size(tcount)?;
        let b = match tdt.basic_type() {
            Some(b) => b,
            None if bytes == 0 => {
                return self.target(rank, disp, 0, tdt, what, Touch::Both).map(drop)
            }
            None => {
                return Err(Error::Type {
                    reason: format!(
                        "{what}: the target datatype must be made of one predefined type"
                    ),
                })
            }
        };
        if !matches!(op, SystemOperation::Replace | SystemOperation::NoOp) {
            op.element_type(tdt)?;
        }
        if op != SystemOperation::NoOp {
            same_size(odt.packed_size(ocount)?, bytes, what)?;
            if bytes > 0 && odt.basic_type() != Some(b) {
                return Err(Error::Type {
                    reason: format!(
                        "{what}: the origin's elements are not of the target's type {b:?}"
                    ),
                });
            }
        }
        if let Some(r) = rdt {
            same_size(r.packed_size(rcount)?, bytes, what)?;
            if bytes > 0 && r.basic_type() != Some(b) {
                return Err(Error::Type {
                    reason: format!(
                        "{what}: the result's elements are not of the target's type {b:?}"
                    ),
                });
            }
        }
        let Some(t) = self.target(rank, disp, tcount, tdt, what, Touch::Both)? else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        let input = if op == SystemOperation::NoOp {
            None
        } else {
            // SAFETY: the caller's guarantee.
            Some(unsafe { packed(origin, ocount, odt)? })
        };
        let mut fetched = rdt.map(|_| vec![0u8; bytes]);
        self.rmw(
            &t,
            tcount,
            tdt,
            b,
            op,
            input.as_deref(),
            fetched.as_deref_mut(),
        )?;
        if let (Some(r), Some(f)) = (rdt, fetched) {
            // SAFETY: the caller's guarantee.
            unsafe { r.unpack_raw(&f, result, rcount)? };
        }
        Ok(())
    }

    /// `MPI_Fetch_and_op`: one element of the predefined `dt`.
    ///
    /// # Safety
    /// One element is readable at `origin` (not read with `NO_OP`) and one
    /// writable at `result`.
    pub unsafe fn fetch_and_op(
        &self,
        origin: *const u8,
        result: *mut u8,
        dt: &Datatype,
        rank: i32,
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        if dt.predefined().is_none() {
            return Err(Error::Type {
                reason: "MPI_Fetch_and_op needs a predefined datatype".into(),
            });
        }
        let oc = usize::from(op != SystemOperation::NoOp);
        // SAFETY: the caller's guarantee.
        unsafe { self.get_accumulate(origin, oc, dt, result, 1, Some(dt), rank, disp, 1, dt, op) }
    }

    /// `MPI_Compare_and_swap`: if the target's element equals the one at
    /// `compare`, it becomes the one at `origin`; the element from before
    /// goes to `result`. Atomic (as every accumulate on the element).
    ///
    /// # Safety
    /// One element of `dt` is readable at `origin` and `compare`, writable
    /// at `result`.
    pub unsafe fn compare_and_swap(
        &self,
        origin: *const u8,
        compare: *const u8,
        result: *mut u8,
        dt: &Datatype,
        rank: i32,
        disp: u64,
    ) -> Result<()> {
        let Some(b) = dt.predefined() else {
            return Err(Error::Type {
                reason: "MPI_Compare_and_swap needs a predefined datatype".into(),
            });
        };
        let s = b.size();
        let Some(t) = self.target(rank, disp, 1, dt, "MPI_Compare_and_swap", Touch::Both)? else {
            return Ok(());
        };
        let segs = Win::segments(&t, 1, dt);
        // SAFETY: the caller's guarantee: one element each.
        let (new, cmp) = unsafe {
            (
                std::slice::from_raw_parts(origin, s),
                std::slice::from_raw_parts(compare, s),
            )
        };
        let mut old = vec![0u8; s];
        if Win::hardware(&t, b, &segs) {
            let a = t.addr as usize;
            if s == 8 {
                // SAFETY: an aligned 8-byte element inside the window in the
                // node heap, mapped here.
                let w = unsafe { &*(a as *const AtomicU64) };
                let (n, c) = (u64_of(new), u64_of(cmp));
                // SYNC POINT: AcqRel on success, Acquire on failure: the
                // swap is ordered with the other atomics on the element and
                // the epoch's synchronisation (a compare-and-swap used as a
                // lock acquires what the previous holder released).
                let v = w
                    .compare_exchange(c, n, Ordering::AcqRel, Ordering::Acquire)
                    .unwrap_or_else(|x| x);
                old.copy_from_slice(&v.to_ne_bytes());
            } else {
                // SAFETY: as above, a 4-byte element.
                let w = unsafe { &*(a as *const AtomicU32) };
                let (n, c) = (u32_of(new), u32_of(cmp));
                // SYNC POINT: as above.
                let v = w
                    .compare_exchange(c, n, Ordering::AcqRel, Ordering::Acquire)
                    .unwrap_or_else(|x| x);
                old.copy_from_slice(&v.to_ne_bytes());
            }
        } else {
            self.locked(&t, &segs, || {
                self.read_target(&t, 1, dt, &segs, &mut old)?;
                if old == cmp {
                    self.write_target(&t, 1, dt, &segs, new)?;
                }
                Ok(())
            })?;
        }
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), result, s) };
        Ok(())
    }

    // ------------------------------------------------- request-based forms

    /// `MPI_Rput`: [`Win::put`] in a passive-target epoch (the request MPI
    /// returns is complete at once).
    ///
    /// # Safety
    /// As for [`Win::put`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn rput(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        self.check_passive(rank, "MPI_Rput")?;
        // SAFETY: the caller's guarantee.
        unsafe { self.put(origin, ocount, odt, rank, disp, tcount, tdt) }
    }

    /// `MPI_Rget`: [`Win::get`] in a passive-target epoch.
    ///
    /// # Safety
    /// As for [`Win::get`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn rget(
        &self,
        origin: *mut u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        self.check_passive(rank, "MPI_Rget")?;
        // SAFETY: the caller's guarantee.
        unsafe { self.get(origin, ocount, odt, rank, disp, tcount, tdt) }
    }

    /// `MPI_Raccumulate` / `MPI_Rget_accumulate`: [`Win::get_accumulate`]
    /// in a passive-target epoch.
    ///
    /// # Safety
    /// As for [`Win::get_accumulate`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn rget_accumulate(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        result: *mut u8,
        rcount: usize,
        rdt: Option<&Datatype>,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
        op: SystemOperation,
    ) -> Result<()> {
        let what = if rdt.is_some() {
            "MPI_Rget_accumulate"
        } else {
            "MPI_Raccumulate"
        };
        self.check_passive(rank, what)?;
        // SAFETY: the caller's guarantee.
        unsafe {
            self.get_accumulate(
                origin, ocount, odt, result, rcount, rdt, rank, disp, tcount, tdt, op,
            )
        }
    }

    // ------------------------------------------------------ the machinery

    /// Whether an accumulate on these target bytes uses hardware atomics:
    /// memory in the heap, 4- or 8-byte elements that are not pairs,
    /// aligned. A property of the location and its type only, so every
    /// origin decides alike.
    fn hardware(t: &Target, b: BasicType, segs: &[(u64, usize)]) -> bool {
        let s = b.size();
        t.heap
            && (s == 4 || s == 8)
            && !is_pair(b)
            && segs.iter().all(|&(a, l)| a % s as u64 == 0 && l % s == 0)
    }

    /// Runs `f` holding the lock stripes of the cache lines `segs` touch
    /// (taken in increasing order, released in reverse).
    fn locked<R>(
        &self,
        t: &Target,
        segs: &[(u64, usize)],
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let mut idx: Vec<usize> = Vec::new();
        'outer: for &(a, l) in segs {
            for line in a / 64..=(a + l as u64 - 1) / 64 {
                // Heap addresses mean the same memory in every process;
                // others are told apart by their owner.
                let key = if t.heap {
                    line
                } else {
                    line ^ (u64::from(t.rank) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                };
                idx.push(
                    (key.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as usize % shared::STRIPES,
                );
                if idx.len() >= shared::STRIPES * 2 {
                    idx = (0..shared::STRIPES).collect();
                    break 'outer;
                }
            }
        }
        idx.sort_unstable();
        idx.dedup();
        for &i in &idx {
            shared::lock(self.block.stripe(i), true);
        }
        let r = f();
        for &i in idx.iter().rev() {
            shared::unlock(self.block.stripe(i), true);
        }
        r
    }

    fn read_target(
        &self,
        t: &Target,
        count: usize,
        dt: &Datatype,
        segs: &[(u64, usize)],
        out: &mut [u8],
    ) -> Result<()> {
        if t.direct {
            // SAFETY: the target's elements are inside its window (checked
            // by `target`), mapped here.
            unsafe { dt.pack_raw(t.addr as usize as *const u8, count, out)? };
            Ok(())
        } else {
            remote::read(t.pid, segs, out)
        }
    }

    fn write_target(
        &self,
        t: &Target,
        count: usize,
        dt: &Datatype,
        segs: &[(u64, usize)],
        data: &[u8],
    ) -> Result<()> {
        if t.direct {
            // SAFETY: as in `read_target`.
            unsafe { dt.unpack_raw(data, t.addr as usize as *mut u8, count)? };
            Ok(())
        } else {
            remote::write(t.pid, segs, data)
        }
    }

    /// The read-modify-write of the accumulates: `target = input op
    /// target`, element-wise atomic; the elements from before into
    /// `fetched`.
    #[allow(clippy::too_many_arguments)]
    fn rmw(
        &self,
        t: &Target,
        count: usize,
        dt: &Datatype,
        b: BasicType,
        op: SystemOperation,
        input: Option<&[u8]>,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        let segs = Win::segments(t, count, dt);
        let s = b.size();
        if Win::hardware(t, b, &segs) {
            if let (None, Some(inp)) = (&fetched, input) {
                // SAFETY: every element of `segs` is an aligned element of
                // `s` bytes inside the window in the node heap
                // (`hardware`, `target`).
                if unsafe { bulk(&segs, s, b, op, inp) } {
                    return Ok(());
                }
            }
            let mut fetched = fetched;
            let mut p = 0usize;
            for &(a, l) in &segs {
                for off in (0..l).step_by(s) {
                    let addr = a as usize + off;
                    let inp = input.map(|i| &i[p..p + s]);
                    let out = fetched.as_deref_mut().map(|f| &mut f[p..p + s]);
                    if s == 8 {
                        // SAFETY: an aligned 8-byte element inside the
                        // window in the node heap (`hardware`, `target`).
                        let old = unsafe { atomic8(addr, b, op, inp)? };
                        if let Some(o) = out {
                            o.copy_from_slice(&old.to_ne_bytes());
                        }
                    } else {
                        // SAFETY: as above, 4 bytes.
                        let old = unsafe { atomic4(addr, b, op, inp)? };
                        if let Some(o) = out {
                            o.copy_from_slice(&old.to_ne_bytes());
                        }
                    }
                    p += s;
                }
            }
            return Ok(());
        }
        self.locked(t, &segs, || {
            let mut cur = vec![0u8; dt.packed_size(count)?];
            self.read_target(t, count, dt, &segs, &mut cur)?;
            if let Some(f) = fetched {
                f.copy_from_slice(&cur);
            }
            let Some(input) = input else {
                return Ok(());
            };
            if op == SystemOperation::Replace {
                cur.copy_from_slice(input);
            } else {
                // SAFETY: both hold `cur.len() / s` dense elements of `b`,
                // in distinct buffers.
                unsafe {
                    reduce_local_raw(
                        input.as_ptr(),
                        cur.as_mut_ptr(),
                        cur.len() / s,
                        &Datatype::basic(b),
                        &Operation::System(op),
                    )?
                };
            }
            self.write_target(t, count, dt, &segs, &cur)
        })
    }
}

/// Calls `f` with the address of every element of `segs` (`s` bytes
/// each) and its operand in `input`, in packing order.
#[inline(always)]
fn each(segs: &[(u64, usize)], s: usize, input: &[u8], mut f: impl FnMut(usize, &[u8])) {
    let mut p = 0usize;
    for &(a, l) in segs {
        let mut off = 0usize;
        while off + s <= l && p + s <= input.len() {
            f(a as usize + off, &input[p..p + s]);
            p += s;
            off += s;
        }
    }
}

/// An accumulate without a result whose operation is one atomic
/// instruction per element (integer `SUM`, `BAND`, `BOR`, `BXOR`, and
/// `REPLACE`): the operation is chosen once per call, not per element,
/// and each element is still one atomic read-modify-write (or store), so
/// every element stays atomic against concurrent atomics on it. False,
/// with nothing done, for the other operations.
///
/// # Safety
/// Every element of `segs` is an aligned element of `s` bytes (4 or 8),
/// mapped here.
unsafe fn bulk(
    segs: &[(u64, usize)],
    s: usize,
    b: BasicType,
    op: SystemOperation,
    input: &[u8],
) -> bool {
    use SystemOperation as S;
    let int = matches!(
        b,
        BasicType::I64 | BasicType::U64 | BasicType::I32 | BasicType::U32
    );
    // Every ordering below is AcqRel (Release for the store), as in
    // `atomic8`: the element's atomics are ordered with each other and
    // with the epoch's synchronisation around them.
    macro_rules! ops {
        ($au:ty, $of:ident) => {{
            // SAFETY: the caller's guarantee for every `addr` passed.
            let w = |addr: usize| unsafe { &*(addr as *const $au) };
            match op {
                S::Replace => each(segs, s, input, |a, v| w(a).store($of(v), Ordering::Release)),
                S::Sum if int => each(segs, s, input, |a, v| {
                    w(a).fetch_add($of(v), Ordering::AcqRel);
                }),
                S::BitwiseAnd if int => each(segs, s, input, |a, v| {
                    w(a).fetch_and($of(v), Ordering::AcqRel);
                }),
                S::BitwiseOr if int => each(segs, s, input, |a, v| {
                    w(a).fetch_or($of(v), Ordering::AcqRel);
                }),
                S::BitwiseXor if int => each(segs, s, input, |a, v| {
                    w(a).fetch_xor($of(v), Ordering::AcqRel);
                }),
                _ => return false,
            }
            true
        }};
    }
    match s {
        8 => ops!(AtomicU64, u64_of),
        4 => ops!(AtomicU32, u32_of),
        _ => false,
    }
}

fn u64_of(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_ne_bytes(a)
}

fn u32_of(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_ne_bytes(a)
}

macro_rules! atomic_elem {
    ($name:ident, $au:ty, $ai:ty, $u:ty, $i:ty, $of:ident, $signed:path, $unsigned:path) => {
        /// One element's atomic read-modify-write; the value before.
        ///
        /// # Safety
        /// `addr` is an aligned element of the size, mapped here.
        unsafe fn $name(
            addr: usize,
            b: BasicType,
            op: SystemOperation,
            input: Option<&[u8]>,
        ) -> Result<$u> {
            use SystemOperation as S;
            // SAFETY: the caller's guarantee.
            let w = unsafe { &*(addr as *const $au) };
            // SAFETY: the same element, as signed.
            let wi = unsafe { &*(addr as *const $ai) };
            let int = matches!(b, $signed | $unsigned);
            // Every ordering below is AcqRel (Acquire for a plain load):
            // the element's atomics are ordered with each other and with
            // the epoch's synchronisation around them.
            let Some(inp) = input else {
                return Ok(w.load(Ordering::Acquire));
            };
            let v = $of(inp);
            Ok(match op {
                S::NoOp => w.load(Ordering::Acquire),
                S::Replace => w.swap(v, Ordering::AcqRel),
                S::Sum if int => w.fetch_add(v, Ordering::AcqRel),
                S::BitwiseAnd if int => w.fetch_and(v, Ordering::AcqRel),
                S::BitwiseOr if int => w.fetch_or(v, Ordering::AcqRel),
                S::BitwiseXor if int => w.fetch_xor(v, Ordering::AcqRel),
                S::Max if b == $unsigned => w.fetch_max(v, Ordering::AcqRel),
                S::Min if b == $unsigned => w.fetch_min(v, Ordering::AcqRel),
                S::Max if b == $signed => wi.fetch_max(v as $i, Ordering::AcqRel) as $u,
                S::Min if b == $signed => wi.fetch_min(v as $i, Ordering::AcqRel) as $u,
                _ => {
                    let dt = Datatype::basic(b);
                    let op = Operation::System(op);
                    // Relaxed: a first guess; the exchange decides.
                    let mut old = w.load(Ordering::Relaxed);
                    loop {
                        let mut nb = old.to_ne_bytes();
                        // SAFETY: one element of `b` in each buffer.
                        unsafe { reduce_local_raw(inp.as_ptr(), nb.as_mut_ptr(), 1, &dt, &op)? };
                        match w.compare_exchange_weak(
                            old,
                            <$u>::from_ne_bytes(nb),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => break old,
                            Err(x) => old = x,
                        }
                    }
                }
            })
        }
    };
}

atomic_elem!(
    atomic8,
    AtomicU64,
    AtomicI64,
    u64,
    i64,
    u64_of,
    BasicType::I64,
    BasicType::U64
);
atomic_elem!(
    atomic4,
    AtomicU32,
    AtomicI32,
    u32,
    i32,
    u32_of,
    BasicType::I32,
    BasicType::U32
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation `bulk` takes, on 8- and 4-byte elements in two
    /// segments with a gap, against the element-wise result; the others
    /// are left to the per-element path.
    #[test]
    fn bulk_accumulates_match_element_wise() {
        use SystemOperation as S;
        type Elementwise = fn(u64, u64) -> u64;
        let ops: [(S, Elementwise); 5] = [
            (S::Replace, |_, v| v),
            (S::Sum, |t, v| t.wrapping_add(v)),
            (S::BitwiseAnd, |t, v| t & v),
            (S::BitwiseOr, |t, v| t | v),
            (S::BitwiseXor, |t, v| t ^ v),
        ];
        for (op, f) in ops {
            let mut t64: Vec<u64> = (0..10).map(|i| i * 0x0101_0101_0101 + 3).collect();
            let input: Vec<u64> = (0..7).map(|i| u64::MAX - i * 977).collect();
            let base = t64.as_mut_ptr() as u64;
            // Elements 0..3 and 5..9.
            let segs = [(base, 3 * 8), (base + 5 * 8, 4 * 8)];
            let mut want = t64.clone();
            for (k, i) in [0, 1, 2, 5, 6, 7, 8].into_iter().enumerate() {
                want[i] = f(want[i], input[k]);
            }
            let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_ne_bytes()).collect();
            // SAFETY: aligned u64 elements of `t64`.
            assert!(unsafe { bulk(&segs, 8, BasicType::U64, op, &bytes) });
            assert_eq!(t64, want, "{op:?}");

            let mut t32: Vec<u32> = (0..6).map(|i| i * 0x0101_0101 + 1).collect();
            let in32: Vec<u32> = (0..6).map(|i| u32::MAX - i * 31).collect();
            let segs = [(t32.as_mut_ptr() as u64, 6 * 4)];
            let want: Vec<u32> = t32
                .iter()
                .zip(&in32)
                .map(|(&t, &v)| f(u64::from(t), u64::from(v)) as u32)
                .collect();
            let bytes: Vec<u8> = in32.iter().flat_map(|v| v.to_ne_bytes()).collect();
            // SAFETY: aligned u32 elements of `t32`.
            assert!(unsafe { bulk(&segs, 4, BasicType::I32, op, &bytes) });
            assert_eq!(t32, want, "{op:?}");
        }
        // Floats sum and integer max go element by element.
        let mut x = [1.0f64];
        let segs = [(x.as_mut_ptr() as u64, 8)];
        let one = 2.0f64.to_ne_bytes();
        // SAFETY: an aligned f64 element (not touched: false).
        assert!(!unsafe { bulk(&segs, 8, BasicType::F64, S::Sum, &one) });
        // SAFETY: as above.
        assert!(!unsafe { bulk(&segs, 8, BasicType::U64, S::Max, &one) });
        assert_eq!(x, [1.0]);
    }
}
