//! Communication through global pointers: blocking and non-blocking
//! put/get, strided and datatype'd transfers, atomics, flushes.
//!
//! Every call resolves the pointer ([`Pgas`]'s segment table: a live
//! segment, a unit of its team, an access inside the unit's part) and
//! hands the transfer to the segment's window (`hmpi_core::window::Win`),
//! whose epoch was opened when the segment was made. On this node a
//! window operation is a copy through the shared mapping, or an atomic on
//! it, complete at both ends when it returns; atomics here and window
//! accumulates on the same memory take the same way, so they are atomic
//! against each other.
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
use std::marker::PhantomData;

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
        self.with(dst, len, |p| {
            // SAFETY: the caller's guarantee for the origin; the target
            // range was checked against the unit's part.
            unsafe {
                p.seg
                    .win
                    .put(origin, ocount, odt, p.rank, dst.offset, tcount, tdt)?
            };
            Ok(())
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
        self.with(src, len, |p| {
            // SAFETY: as in `put_raw`, the other way round.
            unsafe {
                p.seg
                    .win
                    .get(origin, ocount, odt, p.rank, src.offset, tcount, tdt)?
            };
            Ok(())
        })
    }

    // ---------------------------------------------------------- typed

    /// Puts `src` into the elements from `dst` on (`dart_put_blocking`):
    /// complete at both ends when it returns.
    pub fn put<T: Equivalence>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<()> {
        let dt = Pgas::dt::<T>();
        // SAFETY: `src` is readable for its length.
        unsafe {
            self.put_raw(
                dst.raw(),
                src.as_ptr().cast(),
                src.len(),
                &dt,
                src.len(),
                &dt,
            )
        }
    }

    /// Gets the elements from `src` on into `dst` (`dart_get_blocking`).
    pub fn get<T: Equivalence>(&self, src: GlobalPtr<T>, dst: &mut [T]) -> Result<()> {
        let dt = Pgas::dt::<T>();
        // SAFETY: `dst` is writable for its length.
        unsafe {
            self.get_raw(
                src.raw(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                &dt,
                dst.len(),
                &dt,
            )
        }
    }

    /// One element.
    pub fn put_value<T: Equivalence>(&self, dst: GlobalPtr<T>, value: T) -> Result<()> {
        self.put(dst, std::slice::from_ref(&value))
    }

    /// One element.
    pub fn get_value<T: Equivalence>(&self, src: GlobalPtr<T>) -> Result<T> {
        let mut v = [std::mem::MaybeUninit::<T>::uninit()];
        let dt = Pgas::dt::<T>();
        // SAFETY: one `T` writable at `v`.
        unsafe { self.get_raw(src.raw(), v.as_mut_ptr().cast(), 1, &dt, 1, &dt)? };
        // SAFETY: the get wrote the whole `T` (an `Equivalence` type is
        // valid for every byte pattern).
        Ok(unsafe { v[0].assume_init() })
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
        let dt = Pgas::dt::<T>();
        let mut old = std::mem::MaybeUninit::<T>::uninit();
        self.with(g.raw(), bytes_of::<T>(1)?, |p| {
            // SAFETY: one `T` readable at `value`, one writable at `old`.
            unsafe {
                p.seg.win.fetch_and_op(
                    (&value as *const T).cast(),
                    old.as_mut_ptr().cast(),
                    &dt,
                    p.rank,
                    g.byte_offset(),
                    op,
                )?
            };
            Ok(())
        })?;
        // SAFETY: the operation wrote the element from before.
        Ok(unsafe { old.assume_init() })
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
        let dt = Pgas::dt::<T>();
        let mut old = std::mem::MaybeUninit::<T>::uninit();
        self.with(g.raw(), bytes_of::<T>(1)?, |p| {
            // SAFETY: one `T` each at `value` and `compare`, one writable
            // at `old`.
            unsafe {
                p.seg.win.compare_and_swap(
                    (&value as *const T).cast(),
                    (&compare as *const T).cast(),
                    old.as_mut_ptr().cast(),
                    &dt,
                    p.rank,
                    g.byte_offset(),
                )?
            };
            Ok(())
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
        self.with(dst.raw(), bytes_of::<T>(src.len())?, |p| {
            // SAFETY: `src` is readable for its length.
            unsafe {
                p.seg.win.accumulate(
                    src.as_ptr().cast(),
                    src.len(),
                    &dt,
                    p.rank,
                    dst.byte_offset(),
                    src.len(),
                    &dt,
                    op,
                )?
            };
            Ok(())
        })
    }

    // -------------------------------------------------------- flushes

    /// Completes (and orders) the operations to `g`'s unit in `g`'s
    /// segment (`dart_flush`).
    pub fn flush(&self, g: Gptr) -> Result<()> {
        self.with(g, 0, |p| Ok(p.seg.win.flush(p.rank)?))
    }

    /// Completes the operations to every unit of `g`'s segment
    /// (`dart_flush_all`).
    pub fn flush_all(&self, g: Gptr) -> Result<()> {
        self.with(g, 0, |p| Ok(p.seg.win.flush_all()?))
    }

    /// Completes every operation of this unit, in every segment.
    pub fn quiet(&self) -> Result<()> {
        self.each_segment(|w| Ok(w.flush_all()?))
    }
}
