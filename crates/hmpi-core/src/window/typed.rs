//! The typed API: a [`Window`] of `T` (displacements count elements of
//! `T`), and epochs as guards that carry the operations, so that an
//! operation outside an epoch does not compile. A guard's drop ends its
//! epoch; its `end`/`unlock`/`complete`/`wait` method does the same and
//! returns the error, if any.

use super::{assert, LockType, Win};
use crate::comm::SimpleCommunicator;
use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, Result};
use crate::group::Group;
use crate::info::Info;
use crate::op::SystemOperation;
use crate::request::Scope;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU64;

/// A window whose memory is elements of `T` (rsmpi has none; MPI's
/// `MPI_Win` with a displacement unit of `size_of::<T>()`). `'m` is the
/// borrow of the caller's memory for [`Window::create`], `'static` for
/// the library's.
#[derive(Debug)]
pub struct Window<'m, T: Equivalence> {
    raw: Win,
    /// `T::equivalent_datatype()`, built once: the epochs' operations
    /// borrow it instead of building (and reference-counting) one per call.
    dt: Datatype,
    len: usize,
    _mem: PhantomData<&'m mut [T]>,
}

fn unit<T>() -> Result<u64> {
    match std::mem::size_of::<T>() {
        0 => Err(Error::Type {
            reason: "a window of zero-sized elements".into(),
        }),
        s => Ok(s as u64),
    }
}

fn bytes<T>(len: usize) -> Result<u64> {
    (len as u64)
        .checked_mul(unit::<T>()?)
        .ok_or(Error::TooLarge {
            count: len as u64,
            element_size: std::mem::size_of::<T>(),
        })
}

impl<T: Equivalence> Window<'static, T> {
    /// `MPI_Win_allocate`: `len` zeroed elements of `T` per member, in the
    /// node heap (collective).
    pub fn allocate(comm: &SimpleCommunicator, len: usize) -> Result<Self> {
        let raw = Win::allocate(comm, bytes::<T>(len)?, unit::<T>()?)?;
        Ok(Window {
            raw,
            dt: T::equivalent_datatype(),
            len,
            _mem: PhantomData,
        })
    }

    /// `MPI_Win_allocate_shared`: `len` zeroed elements per member in one
    /// contiguous segment; [`Window::shared_query`] gives any member's.
    pub fn allocate_shared(comm: &SimpleCommunicator, len: usize) -> Result<Self> {
        let raw = Win::allocate_shared(comm, bytes::<T>(len)?, unit::<T>()?)?;
        Ok(Window {
            raw,
            dt: T::equivalent_datatype(),
            len,
            _mem: PhantomData,
        })
    }
}

impl<'m, T: Equivalence> Window<'m, T> {
    /// `MPI_Win_create` over the caller's elements (collective), borrowed
    /// for the window's life. In the node heap they are reached by plain
    /// copies, elsewhere (a static, a stack) through the kernel.
    pub fn create(comm: &SimpleCommunicator, mem: &'m mut [T]) -> Result<Self> {
        let len = mem.len();
        // SAFETY: `mem` is borrowed exclusively for `'m`, the window's
        // life, so nobody else touches it while the window reaches it.
        let raw = unsafe {
            Win::create(
                comm,
                mem.as_mut_ptr().cast(),
                bytes::<T>(len)?,
                unit::<T>()?,
            )?
        };
        Ok(Window {
            raw,
            dt: T::equivalent_datatype(),
            len,
            _mem: PhantomData,
        })
    }

    /// The raw window (attributes, derived datatypes, the C library's
    /// calls).
    pub fn raw(&self) -> &Win {
        &self.raw
    }

    /// This member's elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this member has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of this member's elements now (others may change them in an
    /// epoch; read them between epochs).
    pub fn read_local(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.len);
        // SAFETY: the window's memory holds `len` elements of `T`, in this
        // process; `v` has room for them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.raw.base().cast::<T>(), v.as_mut_ptr(), self.len);
            v.set_len(self.len);
        }
        v
    }

    /// Overwrites this member's elements from `data` (the first
    /// `data.len()`), as a local store between epochs.
    pub fn write_local(&self, data: &[T]) -> Result<()> {
        if data.len() > self.len {
            return Err(Error::RmaRange {
                reason: format!("{} elements into a window of {}", data.len(), self.len),
            });
        }
        // SAFETY: as in `read_local`, the other way round.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.raw.base().cast::<T>(), data.len())
        };
        Ok(())
    }

    /// `MPI_Win_shared_query` on a shared window: member `rank`'s elements,
    /// as (count, address here) for direct loads and stores.
    pub fn shared_query(&self, rank: i32) -> Result<(usize, *mut T)> {
        let (size, _, p) = self.raw.shared_query(rank)?;
        Ok((size as usize / std::mem::size_of::<T>(), p.cast()))
    }

    /// `MPI_Win_set_info` (see [`Win::set_info`]).
    pub fn set_info(&self, info: &Info) -> Result<()> {
        self.raw.set_info(info)
    }

    /// `MPI_Win_get_info`: the hints in effect (see [`Win::info`]).
    pub fn info(&self) -> Info {
        self.raw.info()
    }

    /// Member `rank`'s user flag word (see [`Win::flag`]).
    pub fn flag(&self, rank: i32) -> Result<&AtomicU64> {
        self.raw.flag(rank)
    }

    /// `MPI_Win_fence` (collective): opens an epoch in which every member
    /// may access every other; the guard's [`Fence::end`] (or drop) is the
    /// closing fence.
    pub fn fence(&self) -> Result<Fence<'_, T>> {
        self.raw.fence(0)?;
        Ok(Fence {
            raw: &self.raw,
            dt: &self.dt,
            open: true,
            _t: PhantomData,
        })
    }

    /// `MPI_Win_lock`: a passive-target epoch at `rank`.
    pub fn lock(&self, rank: i32, kind: LockType) -> Result<LockEpoch<'_, T>> {
        self.raw.lock(kind, rank, 0)?;
        Ok(LockEpoch {
            raw: &self.raw,
            dt: &self.dt,
            rank,
            open: true,
            _t: PhantomData,
        })
    }

    /// `MPI_Win_lock_all`: shared locks on every member.
    pub fn lock_all(&self) -> Result<LockAll<'_, T>> {
        self.raw.lock_all(0)?;
        Ok(LockAll {
            raw: &self.raw,
            dt: &self.dt,
            open: true,
            _t: PhantomData,
        })
    }

    /// `MPI_Win_start`: an access epoch to the members of `group` (a
    /// group of the window's members).
    pub fn start(&self, group: &Group) -> Result<AccessEpoch<'_, T>> {
        self.raw.start(group, 0)?;
        Ok(AccessEpoch {
            raw: &self.raw,
            dt: &self.dt,
            open: true,
            _t: PhantomData,
        })
    }

    /// `MPI_Win_post`: an exposure epoch to the members of `group`.
    pub fn post(&self, group: &Group) -> Result<ExposureEpoch<'_>> {
        self.raw.post(group, 0)?;
        Ok(ExposureEpoch {
            raw: &self.raw,
            open: true,
        })
    }

    /// `MPI_Win_free` (collective).
    pub fn free(self) -> Result<()> {
        self.raw.free()
    }
}

/// The operations of an access epoch, on any member of the window
/// (`rank`), at a displacement in elements of `T`.
pub trait Access<T: Equivalence> {
    /// The raw window.
    fn raw(&self) -> &Win;

    /// The datatype of `T` (built once per window).
    fn datatype(&self) -> &Datatype;

    /// `MPI_Put` of `data` to `disp` of `rank`.
    fn put(&self, rank: i32, data: &[T], disp: u64) -> Result<()> {
        let dt = self.datatype();
        // SAFETY: `data` holds `len` elements of `T`.
        unsafe {
            self.raw().put(
                data.as_ptr().cast(),
                data.len(),
                dt,
                rank,
                disp,
                data.len(),
                dt,
            )
        }
    }

    /// `MPI_Get` from `disp` of `rank` into `buf`.
    fn get(&self, rank: i32, buf: &mut [T], disp: u64) -> Result<()> {
        let dt = self.datatype();
        let n = buf.len();
        // SAFETY: `buf` holds `n` writable elements of `T`.
        unsafe {
            self.raw()
                .get(buf.as_mut_ptr().cast(), n, dt, rank, disp, n, dt)
        }
    }

    /// `MPI_Accumulate` of `data` into `disp` of `rank` with `op`.
    fn accumulate(&self, rank: i32, data: &[T], disp: u64, op: SystemOperation) -> Result<()> {
        let dt = self.datatype();
        let n = data.len();
        // SAFETY: `data` holds `n` elements.
        unsafe {
            self.raw()
                .accumulate(data.as_ptr().cast(), n, dt, rank, disp, n, dt, op)
        }
    }

    /// `MPI_Get_accumulate`: as `accumulate`, the elements from before
    /// into `result` (as long as `data`).
    fn get_accumulate(
        &self,
        rank: i32,
        data: &[T],
        result: &mut [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        let dt = self.datatype();
        let n = data.len();
        // SAFETY: `data` holds `n` elements, `result` `result.len()`
        // writable ones (checked against `n` by the raw tier).
        unsafe {
            self.raw().get_accumulate(
                data.as_ptr().cast(),
                n,
                dt,
                result.as_mut_ptr().cast(),
                result.len(),
                Some(dt),
                rank,
                disp,
                n,
                dt,
                op,
            )
        }
    }

    /// `MPI_Fetch_and_op`: the element at `disp` of `rank` before `op`
    /// combined `value` into it.
    fn fetch_and_op(&self, rank: i32, value: T, disp: u64, op: SystemOperation) -> Result<T> {
        let dt = self.datatype();
        let mut out = [value];
        // SAFETY: one element each.
        unsafe {
            self.raw().fetch_and_op(
                (&value as *const T).cast(),
                out.as_mut_ptr().cast(),
                dt,
                rank,
                disp,
                op,
            )?
        };
        Ok(out[0])
    }

    /// `MPI_Compare_and_swap`: the element at `disp` of `rank` becomes
    /// `value` if it was `compare`; what it was.
    fn compare_and_swap(&self, rank: i32, value: T, compare: T, disp: u64) -> Result<T> {
        let dt = self.datatype();
        let mut out = [value];
        // SAFETY: one element each.
        unsafe {
            self.raw().compare_and_swap(
                (&value as *const T).cast(),
                (&compare as *const T).cast(),
                out.as_mut_ptr().cast(),
                dt,
                rank,
                disp,
            )?
        };
        Ok(out[0])
    }
}

/// The request of an `immediate_*` one-sided operation (`MPI_Rput` …):
/// the operation is complete when its call returns, so the request is
/// complete from the start; it lives in a [`Scope`] like the others.
#[must_use = "a request should be waited for"]
#[derive(Debug)]
pub struct RmaRequest<'s> {
    _scope: PhantomData<&'s ()>,
}

impl RmaRequest<'_> {
    /// Returns at once: the operation is complete.
    pub fn wait(self) -> Result<()> {
        Ok(())
    }

    /// Always true: the operation is complete.
    pub fn test(&mut self) -> bool {
        true
    }
}

fn done<'s>(_scope: &'s Scope<'s, '_>) -> RmaRequest<'s> {
    RmaRequest {
        _scope: PhantomData,
    }
}

/// The request-based operations (`MPI_Rput`, `MPI_Rget`,
/// `MPI_Raccumulate`, `MPI_Rget_accumulate`) of a passive-target epoch,
/// in a [`Scope`].
pub trait Immediate<T: Equivalence>: Access<T> {
    /// `MPI_Rput`.
    fn immediate_put<'s>(
        &self,
        scope: &'s Scope<'s, '_>,
        rank: i32,
        data: &'s [T],
        disp: u64,
    ) -> Result<RmaRequest<'s>> {
        let dt = self.datatype();
        let n = data.len();
        // SAFETY: `data` holds `n` elements.
        unsafe {
            self.raw()
                .rput(data.as_ptr().cast(), n, dt, rank, disp, n, dt)?
        };
        Ok(done(scope))
    }

    /// `MPI_Rget`.
    fn immediate_get<'s>(
        &self,
        scope: &'s Scope<'s, '_>,
        rank: i32,
        buf: &'s mut [T],
        disp: u64,
    ) -> Result<RmaRequest<'s>> {
        let dt = self.datatype();
        let n = buf.len();
        // SAFETY: `buf` holds `n` writable elements.
        unsafe {
            self.raw()
                .rget(buf.as_mut_ptr().cast(), n, dt, rank, disp, n, dt)?
        };
        Ok(done(scope))
    }

    /// `MPI_Raccumulate`.
    fn immediate_accumulate<'s>(
        &self,
        scope: &'s Scope<'s, '_>,
        rank: i32,
        data: &'s [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<RmaRequest<'s>> {
        let dt = self.datatype();
        let n = data.len();
        // SAFETY: `data` holds `n` elements; no result.
        unsafe {
            self.raw().rget_accumulate(
                data.as_ptr().cast(),
                n,
                dt,
                std::ptr::null_mut(),
                0,
                None,
                rank,
                disp,
                n,
                dt,
                op,
            )?
        };
        Ok(done(scope))
    }

    /// `MPI_Rget_accumulate`.
    fn immediate_get_accumulate<'s>(
        &self,
        scope: &'s Scope<'s, '_>,
        rank: i32,
        data: &'s [T],
        result: &'s mut [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<RmaRequest<'s>> {
        let dt = self.datatype();
        let n = data.len();
        // SAFETY: `data` holds `n` elements, `result` `result.len()`
        // writable ones (checked against `n` by the raw tier).
        unsafe {
            self.raw().rget_accumulate(
                data.as_ptr().cast(),
                n,
                dt,
                result.as_mut_ptr().cast(),
                result.len(),
                Some(dt),
                rank,
                disp,
                n,
                dt,
                op,
            )?
        };
        Ok(done(scope))
    }
}

impl<T: Equivalence> Immediate<T> for LockAll<'_, T> {}

/// A fence epoch ([`Window::fence`]).
#[derive(Debug)]
pub struct Fence<'w, T> {
    raw: &'w Win,
    dt: &'w Datatype,
    open: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Equivalence> Access<T> for Fence<'_, T> {
    fn raw(&self) -> &Win {
        self.raw
    }

    fn datatype(&self) -> &Datatype {
        self.dt
    }
}

impl<T> Fence<'_, T> {
    /// A fence inside the epoch: what came before is complete everywhere,
    /// and the epoch goes on (collective).
    pub fn fence(&self) -> Result<()> {
        self.raw.fence(0)
    }

    /// The closing fence (`MPI_MODE_NOSUCCEED`, collective).
    pub fn end(mut self) -> Result<()> {
        self.open = false;
        self.raw.fence(assert::NOSUCCEED)
    }
}

impl<T> Drop for Fence<'_, T> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.raw.fence(assert::NOSUCCEED);
        }
    }
}

/// A passive-target epoch at one member ([`Window::lock`]).
#[derive(Debug)]
pub struct LockEpoch<'w, T> {
    raw: &'w Win,
    dt: &'w Datatype,
    rank: i32,
    open: bool,
    _t: PhantomData<fn(T)>,
}

/// The operations of a [`LockEpoch`], on its target.
struct On<'a>(&'a Win, &'a Datatype);

impl<T: Equivalence> Access<T> for On<'_> {
    fn raw(&self) -> &Win {
        self.0
    }

    fn datatype(&self) -> &Datatype {
        self.1
    }
}

impl<T: Equivalence> LockEpoch<'_, T> {
    /// The locked member.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// `MPI_Put` of `data` to `disp`.
    pub fn put(&self, data: &[T], disp: u64) -> Result<()> {
        Access::<T>::put(&On(self.raw, self.dt), self.rank, data, disp)
    }

    /// `MPI_Get` from `disp` into `buf`.
    pub fn get(&self, buf: &mut [T], disp: u64) -> Result<()> {
        Access::<T>::get(&On(self.raw, self.dt), self.rank, buf, disp)
    }

    /// `MPI_Accumulate` of `data` into `disp`.
    pub fn accumulate(&self, data: &[T], disp: u64, op: SystemOperation) -> Result<()> {
        Access::<T>::accumulate(&On(self.raw, self.dt), self.rank, data, disp, op)
    }

    /// `MPI_Get_accumulate` at `disp`.
    pub fn get_accumulate(
        &self,
        data: &[T],
        result: &mut [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        Access::<T>::get_accumulate(&On(self.raw, self.dt), self.rank, data, result, disp, op)
    }

    /// `MPI_Fetch_and_op` at `disp`.
    pub fn fetch_and_op(&self, value: T, disp: u64, op: SystemOperation) -> Result<T> {
        Access::<T>::fetch_and_op(&On(self.raw, self.dt), self.rank, value, disp, op)
    }

    /// `MPI_Compare_and_swap` at `disp`.
    pub fn compare_and_swap(&self, value: T, compare: T, disp: u64) -> Result<T> {
        Access::<T>::compare_and_swap(&On(self.raw, self.dt), self.rank, value, compare, disp)
    }

    /// `MPI_Win_flush`.
    pub fn flush(&self) -> Result<()> {
        self.raw.flush(self.rank)
    }

    /// `MPI_Win_unlock`.
    pub fn unlock(mut self) -> Result<()> {
        self.open = false;
        self.raw.unlock(self.rank)
    }
}

impl<T> Drop for LockEpoch<'_, T> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.raw.unlock(self.rank);
        }
    }
}

/// Shared locks on every member ([`Window::lock_all`]).
#[derive(Debug)]
pub struct LockAll<'w, T> {
    raw: &'w Win,
    dt: &'w Datatype,
    open: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Equivalence> Access<T> for LockAll<'_, T> {
    fn raw(&self) -> &Win {
        self.raw
    }

    fn datatype(&self) -> &Datatype {
        self.dt
    }
}

impl<T> LockAll<'_, T> {
    /// `MPI_Win_flush` of `rank`.
    pub fn flush(&self, rank: i32) -> Result<()> {
        self.raw.flush(rank)
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) -> Result<()> {
        self.raw.flush_all()
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(mut self) -> Result<()> {
        self.open = false;
        self.raw.unlock_all()
    }
}

impl<T> Drop for LockAll<'_, T> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.raw.unlock_all();
        }
    }
}

/// An access epoch of post/start/complete/wait ([`Window::start`]).
#[derive(Debug)]
pub struct AccessEpoch<'w, T> {
    raw: &'w Win,
    dt: &'w Datatype,
    open: bool,
    _t: PhantomData<fn(T)>,
}

impl<T: Equivalence> Access<T> for AccessEpoch<'_, T> {
    fn raw(&self) -> &Win {
        self.raw
    }

    fn datatype(&self) -> &Datatype {
        self.dt
    }
}

impl<T> AccessEpoch<'_, T> {
    /// `MPI_Win_complete`.
    pub fn complete(mut self) -> Result<()> {
        self.open = false;
        self.raw.complete()
    }
}

impl<T> Drop for AccessEpoch<'_, T> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.raw.complete();
        }
    }
}

/// An exposure epoch ([`Window::post`]).
#[derive(Debug)]
pub struct ExposureEpoch<'w> {
    raw: &'w Win,
    open: bool,
}

impl ExposureEpoch<'_> {
    /// `MPI_Win_test`: whether every origin has completed (the epoch is
    /// then over; [`ExposureEpoch::wait`] returns at once).
    pub fn test(&mut self) -> Result<bool> {
        if !self.open {
            return Ok(true);
        }
        let done = self.raw.test()?;
        self.open = !done;
        Ok(done)
    }

    /// `MPI_Win_wait`.
    pub fn wait(mut self) -> Result<()> {
        if !self.open {
            return Ok(());
        }
        self.open = false;
        self.raw.wait()
    }
}

impl Drop for ExposureEpoch<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.raw.wait();
        }
    }
}
