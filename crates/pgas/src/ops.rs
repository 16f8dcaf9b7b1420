//! Communication through global pointers: blocking and non-blocking
//! put/get, strided and datatype'd transfers, atomics, flushes.
//!
//! Every call resolves the pointer (a live segment, a unit of its team,
//! an access inside the unit's part). The common cases take the **direct
//! path** (`crate::direct`): the pointer becomes an address with no lock
//! and no map, and the transfer is a copy through the shared mapping —
//! typed put/get, and raw ones whose datatypes are dense at both ends —
//! or a hardware atomic on the target address: fetch-and-op with
//! `Sum`, `Replace`, `NoOp` and the bitwise operations, and
//! compare-and-swap, on aligned 4- and 8-byte integers. The window layer
//! (`hmpi_core::window`) does those on the same elements with the same
//! hardware atomics, so a global-pointer atomic and a window accumulate
//! on one element are atomic against each other. Everything else
//! (strided and other derived types, accumulates, the remaining
//! operations, misaligned or other element types) goes to the segment's
//! window, whose epoch was opened when the segment was made. Either way a
//! transfer is complete at both ends when the call returns.
//!
//! The typed calls copy whole elements of `T` (`size_of::<T>()` bytes
//! each), padding included.
//!
//! A non-blocking call returns a [`Handle`] that borrows the origin
//! buffer until it is waited for; [`Handle::wait`] / [`Handle::test`]
//! flush the target (so the transfer is complete and ordered before what
//! follows). The transfers are done at the call today; the handle is
//! what lets a later progress agent do them in the background without
//! changing callers.

use crate::error::{arg, Result};
use crate::gptr::{GlobalPtr, Gptr};
use crate::runtime::Pgas;
use hmpi_core::datatype::{Datatype, Equivalence, UserDatatype};
use hmpi_core::op::SystemOperation;
use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Whether `T` is a 4- or 8-byte integer: the element types whose
/// atomics take the direct path.
fn is_int<T: 'static>() -> bool {
    let t = TypeId::of::<T>();
    [
        TypeId::of::<u64>(),
        TypeId::of::<i64>(),
        TypeId::of::<u32>(),
        TypeId::of::<i32>(),
        TypeId::of::<usize>(),
        TypeId::of::<isize>(),
    ]
    .contains(&t)
}

/// The fetch-and-op operations the direct path does with one hardware
/// instruction on an integer (the others, and every operation on other
/// types, go to the window).
fn direct_op(op: SystemOperation) -> bool {
    use SystemOperation as S;
    matches!(
        op,
        S::Sum | S::Replace | S::NoOp | S::BitwiseAnd | S::BitwiseOr | S::BitwiseXor
    )
}

/// One fetch-and-op on an atomic integer; the value before. Every
/// ordering is AcqRel (Acquire for the load), as the window layer's: the
/// element's atomics are ordered with each other and with the
/// synchronisation around them.
macro_rules! rmw {
    ($a:expr, $v:expr, $op:expr) => {{
        use SystemOperation as S;
        match $op {
            S::Sum => $a.fetch_add($v, Ordering::AcqRel),
            S::Replace => $a.swap($v, Ordering::AcqRel),
            S::BitwiseAnd => $a.fetch_and($v, Ordering::AcqRel),
            S::BitwiseOr => $a.fetch_or($v, Ordering::AcqRel),
            S::BitwiseXor => $a.fetch_xor($v, Ordering::AcqRel),
            _ => $a.load(Ordering::Acquire),
        }
    }};
}

/// The direct path's answer with a unit of another node as `None` (the
/// caller then takes the segment's MPI window).
#[inline(always)]
fn here<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(crate::error::Error::Elsewhere { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn bytes_of<T>(n: usize) -> Result<u64> {
    (n as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| arg(format!("{n} elements overflow")))
}

/// The bytes `count` elements of `dt` reach from their start, checked to
/// start at 0 or after (a target datatype may not reach before the
/// pointer).
fn reach(count: usize, dt: &Datatype) -> Result<u64> {
    match dt.reach(count)? {
        None => Ok(0),
        Some((lo, _)) if lo < 0 => Err(arg(format!(
            "the target datatype reaches {} bytes before the global pointer",
            -lo
        ))),
        Some((_, hi)) => Ok(hi as u64),
    }
}

/// A non-blocking transfer (`dart_handle_t`): borrows the origin buffer
/// (`'a`) until [`Handle::wait`] or a successful [`Handle::test`].
#[derive(Debug)]
#[must_use = "a handle must be waited for (or tested until done)"]
pub struct Handle<'a> {
    pg: &'a Pgas,
    target: Gptr,
    done: bool,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> Handle<'a> {
    fn new(pg: &'a Pgas, target: Gptr) -> Self {
        Handle {
            pg,
            target,
            done: false,
            _buf: PhantomData,
        }
    }

    /// The target the transfer goes to or comes from.
    pub fn target(&self) -> Gptr {
        self.target
    }

    /// Whether a [`Handle::test`] found it complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn complete(&mut self) -> Result<()> {
        if !self.done {
            self.pg.flush(self.target)?;
            self.done = true;
        }
        Ok(())
    }

    /// Waits until the transfer is complete at both ends (`dart_wait`).
    /// An error if its segment was freed before.
    pub fn wait(mut self) -> Result<()> {
        self.complete()
    }

    /// Whether the transfer is complete (`dart_test`); once it is, the
    /// buffer may be reused after the handle is dropped.
    pub fn test(&mut self) -> Result<bool> {
        self.complete()?;
        Ok(self.done)
    }
}

/// Waits for every handle (`dart_waitall`); the first error, after all
/// were waited for.
pub fn waitall<'a>(handles: impl IntoIterator<Item = Handle<'a>>) -> Result<()> {
    let mut first = Ok(());
    for h in handles {
        let r = h.wait();
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Whether every handle is complete (`dart_testall`).
pub fn testall(handles: &mut [Handle<'_>]) -> Result<bool> {
    let mut all = true;
    for h in handles {
        all &= h.test()?;
    }
    Ok(all)
}

impl Pgas {
    // ------------------------------------------------------------ raw

    /// Puts `ocount` elements of `odt` at `origin` into `tcount` elements
    /// of `tdt` starting at `dst` (blocking: complete at both ends on
    /// return). The raw form for a C layer.
    ///
    /// # Safety
    /// The origin's elements are readable at `origin`.
    pub unsafe fn put_raw(
        &self,
        dst: Gptr,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let len = reach(tcount, tdt)?;
        if let Some((oo, to, bytes)) = Self::dense_pair(ocount, odt, tcount, tdt, len) {
            if let Some((pin, p)) = here(self.direct(dst, len))? {
                // SAFETY: the caller's guarantee for the origin's `bytes`
                // from `oo`; the target's are inside the unit's part of a
                // live segment (checked for `len` ≥ `to + bytes`), mapped
                // here and allocated while `pin` lives; `copy` allows an
                // overlap (a put from one's own part).
                unsafe { std::ptr::copy(origin.wrapping_offset(oo), p.wrapping_add(to), bytes) };
                drop(pin);
                return Ok(());
            }
        }
        self.with(dst, len, |p| match p.seg.here(p.rank) {
            // SAFETY: the caller's guarantee for the origin; the target
            // range was checked against the unit's part.
            Some(l) => unsafe {
                Ok(p.seg
                    .win
                    .put(origin, ocount, odt, l, dst.offset, tcount, tdt)?)
            },
            None => p.far(|n| {
                // SAFETY: as above.
                unsafe { n.put_typed(origin, ocount, odt, p.rank, dst.offset, tcount, tdt) }?;
                n.flush(p.rank)
            }),
        })
    }

    /// Gets `tcount` elements of `tdt` starting at `src` into `ocount`
    /// elements of `odt` at `origin` (blocking). The raw form for a C
    /// layer.
    ///
    /// # Safety
    /// The origin's elements are writable at `origin`.
    pub unsafe fn get_raw(
        &self,
        src: Gptr,
        origin: *mut u8,
        ocount: usize,
        odt: &Datatype,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let len = reach(tcount, tdt)?;
        if let Some((oo, to, bytes)) = Self::dense_pair(ocount, odt, tcount, tdt, len) {
            if let Some((pin, p)) = here(self.direct(src, len))? {
                // SAFETY: as in `put_raw`, the other way round.
                unsafe { std::ptr::copy(p.wrapping_add(to), origin.wrapping_offset(oo), bytes) };
                drop(pin);
                return Ok(());
            }
        }
        self.with(src, len, |p| match p.seg.here(p.rank) {
            // SAFETY: as in `put_raw`, the other way round.
            Some(l) => unsafe {
                Ok(p.seg
                    .win
                    .get(origin, ocount, odt, l, src.offset, tcount, tdt)?)
            },
            // SAFETY: as above.
            None => p.far(|n| unsafe {
                n.get_typed(origin, ocount, odt, p.rank, src.offset, tcount, tdt)
            }),
        })
    }

    /// Whether a raw transfer is one run of bytes at both ends, of the
    /// same length, inside the `len` bytes it reaches at the target: the
    /// origin's offset, the target's and the bytes. `None` sends it to the
    /// window (which also reports mismatched sizes).
    fn dense_pair(
        ocount: usize,
        odt: &Datatype,
        tcount: usize,
        tdt: &Datatype,
        len: u64,
    ) -> Option<(isize, usize, usize)> {
        let oo = odt.dense_offset()?;
        let to = usize::try_from(tdt.dense_offset()?).ok()?;
        let bytes = odt.packed_size(ocount).ok()?;
        if tdt.packed_size(tcount).ok()? != bytes || (to as u64).checked_add(bytes as u64)? > len {
            return None;
        }
        Some((oo, to, bytes))
    }

    // ---------------------------------------------------------- typed

    /// [`Pgas::put`] to a unit of another node, out of the direct path's
    /// way (not inlined into it).
    ///
    /// # Safety
    /// `src` is readable for `len` bytes.
    #[cold]
    #[inline(never)]
    unsafe fn put_far(&self, dst: Gptr, src: *const u8, len: u64) -> Result<()> {
        self.net(dst, len, |n, rank, disp| {
            // SAFETY: the caller's guarantee.
            unsafe { n.put(src, len as usize, rank, disp) }?;
            n.flush(rank)
        })
    }

    /// [`Pgas::get`] from a unit of another node, as [`Pgas::put_far`].
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes.
    #[cold]
    #[inline(never)]
    unsafe fn get_far(&self, src: Gptr, dst: *mut u8, len: u64) -> Result<()> {
        // SAFETY: the caller's guarantee.
        self.net(src, len, |n, rank, disp| unsafe {
            n.get(dst, len as usize, rank, disp)
        })
    }

    /// Puts `src` into the elements from `dst` on (`dart_put_blocking`):
    /// complete at both ends when it returns.
    pub fn put<T: Equivalence>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<()> {
        let len = bytes_of::<T>(src.len())?;
        let Some((pin, p)) = here(self.direct(dst.raw(), len))? else {
            // SAFETY: `src` is readable for `len` bytes.
            return unsafe { self.put_far(dst.raw(), src.as_ptr().cast(), len) };
        };
        // SAFETY: `src` is readable for `len` bytes; the target's are
        // inside the unit's part of a live segment (checked), mapped here
        // and allocated while `pin` lives; `copy` allows an overlap (a put
        // from one's own part).
        unsafe { std::ptr::copy(src.as_ptr().cast::<u8>(), p, len as usize) };
        drop(pin);
        Ok(())
    }

    /// Gets the elements from `src` on into `dst` (`dart_get_blocking`).
    pub fn get<T: Equivalence>(&self, src: GlobalPtr<T>, dst: &mut [T]) -> Result<()> {
        let len = bytes_of::<T>(dst.len())?;
        let Some((pin, p)) = here(self.direct(src.raw(), len))? else {
            // SAFETY: `dst` is writable for `len` bytes (an `Equivalence`
            // type is valid for every byte pattern).
            return unsafe { self.get_far(src.raw(), dst.as_mut_ptr().cast(), len) };
        };
        // SAFETY: as in `put`, the other way round (an `Equivalence` type
        // is valid for every byte pattern).
        unsafe { std::ptr::copy(p, dst.as_mut_ptr().cast::<u8>(), len as usize) };
        drop(pin);
        Ok(())
    }

    /// One element.
    pub fn put_value<T: Equivalence>(&self, dst: GlobalPtr<T>, value: T) -> Result<()> {
        self.put(dst, std::slice::from_ref(&value))
    }

    /// One element.
    pub fn get_value<T: Equivalence>(&self, src: GlobalPtr<T>) -> Result<T> {
        let Some((pin, p)) = here(self.direct(src.raw(), bytes_of::<T>(1)?))? else {
            let mut v = std::mem::MaybeUninit::<T>::uninit();
            // SAFETY: room for one `T`.
            unsafe { self.get_far(src.raw(), v.as_mut_ptr().cast(), bytes_of::<T>(1)?) }?;
            // SAFETY: the get wrote the element (an `Equivalence` type is
            // valid for every byte pattern).
            return Ok(unsafe { v.assume_init() });
        };
        // SAFETY: one `T` inside a live segment (checked), mapped here and
        // allocated while `pin` lives, possibly unaligned; an
        // `Equivalence` type is valid for every byte pattern.
        let v = unsafe { std::ptr::read_unaligned(p.cast::<T>()) };
        drop(pin);
        Ok(v)
    }

    /// Non-blocking [`Pgas::put`] (`dart_put_handle`): `src` stays
    /// borrowed until the handle is waited for.
    pub fn put_nb<'a, T: Equivalence>(
        &'a self,
        dst: GlobalPtr<T>,
        src: &'a [T],
    ) -> Result<Handle<'a>> {
        self.put(dst, src)?;
        Ok(Handle::new(self, dst.raw()))
    }

    /// Non-blocking [`Pgas::get`] (`dart_get_handle`): `dst` holds the
    /// data once the handle is complete.
    pub fn get_nb<'a, T: Equivalence>(
        &'a self,
        src: GlobalPtr<T>,
        dst: &'a mut [T],
    ) -> Result<Handle<'a>> {
        self.get(src, dst)?;
        Ok(Handle::new(self, src.raw()))
    }

    /// The target type of a strided transfer of `n` elements.
    fn strided<T: Equivalence>(n: usize, blocklen: usize, stride: usize) -> Result<Datatype> {
        if blocklen == 0 || n % blocklen != 0 {
            return Err(arg(format!(
                "a strided transfer of {n} elements in blocks of {blocklen}: the blocks must \
                 be nonempty and divide the elements"
            )));
        }
        if stride < blocklen {
            return Err(arg(format!(
                "a stride of {stride} elements is shorter than a block of {blocklen}"
            )));
        }
        let stride = isize::try_from(stride).map_err(|_| arg("the stride overflows"))?;
        Ok(UserDatatype::vector(n / blocklen, blocklen, stride, &Pgas::dt::<T>())?.into())
    }

    /// Puts `src` into blocks of `blocklen` elements, `stride` elements
    /// apart, from `dst` on (a column of a row-major matrix: `blocklen`
    /// 1, `stride` the row length).
    pub fn put_strided<T: Equivalence>(
        &self,
        dst: GlobalPtr<T>,
        src: &[T],
        blocklen: usize,
        stride: usize,
    ) -> Result<()> {
        if src.is_empty() {
            return self.put(dst, src);
        }
        let tdt = Pgas::strided::<T>(src.len(), blocklen, stride)?;
        let dt = Pgas::dt::<T>();
        // SAFETY: `src` is readable for its length.
        unsafe { self.put_raw(dst.raw(), src.as_ptr().cast(), src.len(), &dt, 1, &tdt) }
    }

    /// Gets blocks of `blocklen` elements, `stride` elements apart, from
    /// `src` on into `dst`.
    pub fn get_strided<T: Equivalence>(
        &self,
        src: GlobalPtr<T>,
        dst: &mut [T],
        blocklen: usize,
        stride: usize,
    ) -> Result<()> {
        if dst.is_empty() {
            return self.get(src, dst);
        }
        let tdt = Pgas::strided::<T>(dst.len(), blocklen, stride)?;
        let dt = Pgas::dt::<T>();
        // SAFETY: `dst` is writable for its length.
        unsafe { self.get_raw(src.raw(), dst.as_mut_ptr().cast(), dst.len(), &dt, 1, &tdt) }
    }

    /// Puts `src` into `tcount` elements of the datatype `tdt` from `dst`
    /// on (the type's signature must match `src`'s elements).
    pub fn put_datatype<T: Equivalence>(
        &self,
        dst: Gptr,
        src: &[T],
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let dt = Pgas::dt::<T>();
        // SAFETY: `src` is readable for its length.
        unsafe { self.put_raw(dst, src.as_ptr().cast(), src.len(), &dt, tcount, tdt) }
    }

    /// Gets `tcount` elements of the datatype `tdt` from `src` on into
    /// `dst`.
    pub fn get_datatype<T: Equivalence>(
        &self,
        src: Gptr,
        dst: &mut [T],
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let dt = Pgas::dt::<T>();
        // SAFETY: `dst` is writable for its length.
        unsafe { self.get_raw(src, dst.as_mut_ptr().cast(), dst.len(), &dt, tcount, tdt) }
    }

    // -------------------------------------------------------- atomics

    /// Combines `value` into the element at `g` with `op` and returns the
    /// element from before, atomically (`dart_fetch_and_op`). `op` is a
    /// predefined operation valid for `T` (`Replace` swaps, `NoOp`
    /// reads).
    pub fn fetch_op<T: Equivalence>(
        &self,
        g: GlobalPtr<T>,
        value: T,
        op: SystemOperation,
    ) -> Result<T> {
        if direct_op(op) && is_int::<T>() {
            if let Some(old) = self.fetch_op_direct(g, value, op)? {
                return Ok(old);
            }
        }
        self.fetch_op_window(g, value, op)
    }

    /// [`Pgas::fetch_op`] through the segment's windows (out of the direct
    /// path's way, not inlined into it).
    #[inline(never)]
    fn fetch_op_window<T: Equivalence>(
        &self,
        g: GlobalPtr<T>,
        value: T,
        op: SystemOperation,
    ) -> Result<T> {
        let dt = Pgas::dt::<T>();
        let mut old = std::mem::MaybeUninit::<T>::uninit();
        let (v, o) = ((&value as *const T).cast(), old.as_mut_ptr().cast());
        let at = g.byte_offset();
        self.with(g.raw(), bytes_of::<T>(1)?, |p| match p.seg.net {
            // SAFETY: one `T` readable at `v`, one writable at `o`.
            None => unsafe { Ok(p.seg.win.fetch_and_op(v, o, &dt, p.rank, at, op)?) },
            // SAFETY: as above.
            Some(_) => p.far(|n| unsafe { n.fetch_and_op(v, o, &dt, p.rank, at, op) }),
        })?;
        // SAFETY: the operation wrote the element from before.
        Ok(unsafe { old.assume_init() })
    }

    /// [`Pgas::fetch_op`] on a 4- or 8-byte integer `T` with an operation
    /// of [`direct_op`], as one hardware atomic on the target address;
    /// `None` (nothing done) if the element is misaligned, which the
    /// window does under its lock stripes, as it does for its own
    /// accumulates there.
    fn fetch_op_direct<T: Equivalence>(
        &self,
        g: GlobalPtr<T>,
        value: T,
        op: SystemOperation,
    ) -> Result<Option<T>> {
        let w = std::mem::size_of::<T>();
        let Some((pin, p)) = here(self.direct(g.raw(), w as u64))? else {
            return Ok(None);
        };
        if pin.fast.spans || (p as usize) % w != 0 {
            return Ok(None);
        }
        let old = if w == 8 {
            // SAFETY: `T` is an 8-byte integer (`is_int`).
            let v: u64 = unsafe { std::mem::transmute_copy(&value) };
            // SAFETY: an aligned 8-byte element inside a live segment
            // (checked), mapped here and allocated while `pin` lives; every
            // access to it by a unit is atomic (this path or the window's).
            let a = unsafe { &*(p as *const AtomicU64) };
            let o = rmw!(a, v, op);
            // SAFETY: back to the 8-byte integer `T`.
            unsafe { std::mem::transmute_copy::<u64, T>(&o) }
        } else {
            // SAFETY: `T` is a 4-byte integer.
            let v: u32 = unsafe { std::mem::transmute_copy(&value) };
            // SAFETY: as above, 4 bytes.
            let a = unsafe { &*(p as *const AtomicU32) };
            let o = rmw!(a, v, op);
            // SAFETY: back to the 4-byte integer `T`.
            unsafe { std::mem::transmute_copy::<u32, T>(&o) }
        };
        drop(pin);
        Ok(Some(old))
    }

    /// [`Pgas::compare_and_swap`] on the direct path (as
    /// [`Pgas::fetch_op_direct`]).
    fn cas_direct<T: Equivalence>(
        &self,
        g: GlobalPtr<T>,
        value: T,
        compare: T,
    ) -> Result<Option<T>> {
        let w = std::mem::size_of::<T>();
        let Some((pin, p)) = here(self.direct(g.raw(), w as u64))? else {
            return Ok(None);
        };
        if pin.fast.spans || (p as usize) % w != 0 {
            return Ok(None);
        }
        // SYNC POINT: AcqRel on success, Acquire on failure, as the
        // window's compare-and-swap: a swap used as a lock acquires what
        // the previous holder released.
        let old = if w == 8 {
            // SAFETY: `T` is an 8-byte integer (`is_int`).
            let (v, c): (u64, u64) = unsafe {
                (
                    std::mem::transmute_copy(&value),
                    std::mem::transmute_copy(&compare),
                )
            };
            // SAFETY: as in `fetch_op_direct`.
            let a = unsafe { &*(p as *const AtomicU64) };
            let o = a
                .compare_exchange(c, v, Ordering::AcqRel, Ordering::Acquire)
                .unwrap_or_else(|x| x);
            // SAFETY: back to `T`.
            unsafe { std::mem::transmute_copy::<u64, T>(&o) }
        } else {
            // SAFETY: `T` is a 4-byte integer.
            let (v, c): (u32, u32) = unsafe {
                (
                    std::mem::transmute_copy(&value),
                    std::mem::transmute_copy(&compare),
                )
            };
            // SAFETY: as in `fetch_op_direct`, 4 bytes.
            let a = unsafe { &*(p as *const AtomicU32) };
            let o = a
                .compare_exchange(c, v, Ordering::AcqRel, Ordering::Acquire)
                .unwrap_or_else(|x| x);
            // SAFETY: back to `T`.
            unsafe { std::mem::transmute_copy::<u32, T>(&o) }
        };
        drop(pin);
        Ok(Some(old))
    }

    /// Adds `value` and returns the element from before.
    pub fn fetch_add<T: Equivalence>(&self, g: GlobalPtr<T>, value: T) -> Result<T> {
        self.fetch_op(g, value, SystemOperation::Sum)
    }

    /// Replaces the element with `value` and returns the one from before.
    pub fn swap<T: Equivalence>(&self, g: GlobalPtr<T>, value: T) -> Result<T> {
        self.fetch_op(g, value, SystemOperation::Replace)
    }

    /// Reads the element atomically.
    pub fn atomic_load<T: Equivalence>(&self, g: GlobalPtr<T>) -> Result<T> {
        // SAFETY: an `Equivalence` type is valid for every byte pattern,
        // zeros included; NoOp does not read the value anyway.
        let any: T = unsafe { std::mem::zeroed() };
        self.fetch_op(g, any, SystemOperation::NoOp)
    }

    /// If the element equals `compare`, it becomes `value`; returns the
    /// element from before, atomically.
    pub fn compare_and_swap<T: Equivalence>(
        &self,
        g: GlobalPtr<T>,
        value: T,
        compare: T,
    ) -> Result<T> {
        if is_int::<T>() {
            if let Some(old) = self.cas_direct(g, value, compare)? {
                return Ok(old);
            }
        }
        self.cas_window(g, value, compare)
    }

    /// [`Pgas::compare_and_swap`] through the segment's windows (out of
    /// the direct path's way, not inlined into it).
    #[inline(never)]
    fn cas_window<T: Equivalence>(&self, g: GlobalPtr<T>, value: T, compare: T) -> Result<T> {
        let dt = Pgas::dt::<T>();
        let mut old = std::mem::MaybeUninit::<T>::uninit();
        let (v, c) = ((&value as *const T).cast(), (&compare as *const T).cast());
        let (o, at) = (old.as_mut_ptr().cast(), g.byte_offset());
        self.with(g.raw(), bytes_of::<T>(1)?, |p| match p.seg.net {
            // SAFETY: one `T` each at `v` and `c`, one writable at `o`.
            None => unsafe { Ok(p.seg.win.compare_and_swap(v, c, o, &dt, p.rank, at)?) },
            // SAFETY: as above.
            Some(_) => p.far(|n| unsafe { n.compare_and_swap(v, c, o, &dt, p.rank, at) }),
        })?;
        // SAFETY: the operation wrote the element from before.
        Ok(unsafe { old.assume_init() })
    }

    /// Combines `src` into the elements from `dst` on with `op`,
    /// element-wise atomically (`dart_accumulate`).
    pub fn accumulate<T: Equivalence>(
        &self,
        dst: GlobalPtr<T>,
        src: &[T],
        op: SystemOperation,
    ) -> Result<()> {
        let dt = Pgas::dt::<T>();
        let (s, n, at) = (src.as_ptr().cast(), src.len(), dst.byte_offset());
        self.with(dst.raw(), bytes_of::<T>(n)?, |p| match p.seg.net {
            // SAFETY: `src` is readable for its length.
            None => unsafe { Ok(p.seg.win.accumulate(s, n, &dt, p.rank, at, n, &dt, op)?) },
            Some(_) => p.far(|w| {
                // SAFETY: as above.
                unsafe { w.accumulate(s, n, &dt, p.rank, at, op) }?;
                w.flush(p.rank)
            }),
        })
    }

    // -------------------------------------------------------- flushes

    /// Completes (and orders) the operations to `g`'s unit in `g`'s
    /// segment (`dart_flush`).
    pub fn flush(&self, g: Gptr) -> Result<()> {
        drop(here(self.direct(g, 0))?);
        // SeqCst: the operations so far happen before the ones after (the
        // window's flush is this fence too; every transfer here is already
        // complete when its call returns).
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Completes the operations to every unit of `g`'s segment
    /// (`dart_flush_all`).
    pub fn flush_all(&self, g: Gptr) -> Result<()> {
        drop(here(self.direct(g, 0))?);
        // SeqCst: as in `flush`.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Completes every operation of this unit, in every segment.
    pub fn quiet(&self) -> Result<()> {
        self.each_segment(|s| {
            s.win.flush_all()?;
            match &s.net {
                Some(n) => Ok(n.flush_all()?),
                None => Ok(()),
            }
        })
    }
}
