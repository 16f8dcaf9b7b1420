//! One-sided windows across nodes: a [`SpanWindow`] over a
//! [`SpanningCommunicator`], each member exposing `len` elements of `T`.
//!
//! The memory of each member is an hmpi window's ([`Win::allocate`] on
//! the node's communicator, in the node heap), and an MPI window is made
//! over the same memory (`MPI_Win_create` on the spanning communicator's
//! MPI communicator). Both stay in a passive-target epoch on every member
//! from creation to drop (`lock_all` with `MPI_MODE_NOCHECK`), so
//! operations are allowed at any time:
//!
//! * **put and get** to a member of this node are hmpi's: a copy into or
//!   out of its memory, complete when the call returns; to a member of
//!   another node they are MPI's (`MPI_Put` followed by
//!   `MPI_Win_flush_local`, so the caller's buffer is free when the call
//!   returns; `MPI_Get` followed by `MPI_Win_flush`, so the data is there);
//! * **accumulate and fetch-and-op** go through MPI for every target, this
//!   node's too: MPI makes accumulates to one location atomic only with
//!   respect to its own accumulates, so all of them take MPI's way, and
//!   concurrent accumulates to a location stay atomic whoever issues them.
//!   The operations are the predefined ones MPI's C binding names through
//!   rsmpi (not `REPLACE` or `NO_OP`), on the numbers MPI has datatypes for
//!   (not 128-bit integers); the others are [`Error::Op`];
//! * **flush** completes this process's operations to a member at the
//!   target (`MPI_Win_flush`; hmpi's are complete already);
//! * **fence** (collective) completes every member's operations and
//!   orders them before everything after the fence: `MPI_Win_flush_all`,
//!   `MPI_Win_sync`, `MPI_Barrier` over every member, `MPI_Win_sync`.
//!   MPI's barrier rather than the hierarchical one: MPI may complete an
//!   operation only while its target calls MPI (Open MPI's atomics over
//!   its shared-memory transport do), and a member waiting in MPI's
//!   barrier does; one waiting in a node-local phase would not;
//! * **lock / unlock** of one member, exclusive or shared: MPI allows no
//!   per-target lock inside `lock_all`, so each member also exposes a lock
//!   word in a second MPI window, taken by every origin (this node's too)
//!   with MPI's atomic `MPI_Fetch_and_op` (sum): an exclusive lock adds a
//!   writer bit and holds the word if it was 0, a shared one adds a reader
//!   and holds it if no writer bit was there; a loser takes back what it
//!   added and tries again. (Open MPI 4.1's one-sided component crashes
//!   in its emulated `MPI_Compare_and_swap` on a process's own window, so
//!   the lock needs no compare-and-swap.) Unlock flushes the operations to
//!   the member before releasing the word.
//!
//! Displacements count elements of `T`, as in [`crate::window::Window`].
//! Creating and dropping a window are collective over the communicator
//! (every member drops it at the same point of its program, before the
//! universe is dropped).

use super::coll::Plain;
use super::comm::SpanningCommunicator;
use super::mpi::{datatype_of, op_of, RawWin};
use crate::datatype::{Datatype, Equivalence};
use crate::error::{Error, Result};
use crate::op::SystemOperation;
use crate::window::{assert, LockType, Win};
use ::mpi::ffi;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::{fence, Ordering};
use std::sync::Mutex;

/// The writer bit of a lock word (readers count below it).
const WRITER: i64 = 1 << 32;

/// A window of `len` elements of `T` per member over a spanning
/// communicator (see the module docs).
pub struct SpanWindow<T: Plain + Equivalence> {
    comm: SpanningCommunicator,
    /// The MPI window over the memory of `local` (freed before it; see
    /// the `Drop` impl for the order).
    data: ManuallyDrop<RawWin>,
    /// The MPI window over `lock_word` (freed before it).
    locks: ManuallyDrop<RawWin>,
    /// This member's lock word, touched only through `locks`.
    lock_word: ManuallyDrop<Box<UnsafeCell<i64>>>,
    /// This node's members' memory, hmpi's window.
    local: ManuallyDrop<Win>,
    /// Per member, its length in elements.
    lens: Vec<u64>,
    /// `T`'s datatype, built once.
    dt: Datatype,
    /// The members this process holds a lock on.
    held: Mutex<Vec<bool>>,
    _t: PhantomData<T>,
}

impl<T: Plain + Equivalence> std::fmt::Debug for SpanWindow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanWindow")
            .field("rank", &self.comm.rank())
            .field("lens", &self.lens)
            .finish()
    }
}

impl<T: Plain + Equivalence> SpanWindow<T> {
    /// A window of `len` zeroed elements of `T` on every member of `comm`
    /// (`MPI_Win_allocate`; collective, members may give different
    /// lengths). A failure at any member fails it everywhere.
    pub fn allocate(comm: &SpanningCommunicator, len: usize) -> Result<Self> {
        comm.active()?;
        let inner = &comm.inner;
        let unit = std::mem::size_of::<T>();
        let bytes = (len as u64).checked_mul(unit as u64);
        // The node's hmpi window (collective on the node); its outcome
        // is agreed by every member before MPI is asked for more.
        let local = match (unit, bytes) {
            (0, _) => Err(Error::Type {
                reason: "a window of zero-sized elements".into(),
            }),
            (_, None) => Err(Error::TooLarge {
                count: len as u64,
                element_size: unit,
            }),
            (_, Some(b)) => Win::allocate(&inner.local, b, unit as u64),
        };
        let ok = i32::from(local.is_ok());
        if inner.remote.allreduce_min(ok)? == 0 {
            return Err(match local {
                Err(e) => e,
                Ok(_) => Error::Win {
                    reason: "the window could not be made on another member".into(),
                },
            });
        }
        let local = local?;
        local.lock_all(assert::NOCHECK)?;
        let bytes = len * unit;
        // SAFETY: `local`'s memory (`bytes` bytes at its base) lives as
        // long as `local`, which is dropped after `data`.
        let data = unsafe { RawWin::create(&inner.remote, local.base(), bytes, unit) }?;
        let lock_word = Box::new(UnsafeCell::new(0i64));
        // SAFETY: the box's i64 lives as long as the window (dropped after
        // `locks`) and is touched by MPI only.
        let locks = unsafe { RawWin::create(&inner.remote, lock_word.get().cast(), 8, 8) }?;
        let lens = inner
            .remote
            .allgather_i64(len as i64)?
            .into_iter()
            .map(|l| l as u64)
            .collect();
        Ok(SpanWindow {
            comm: comm.clone(),
            data: ManuallyDrop::new(data),
            locks: ManuallyDrop::new(locks),
            lock_word: ManuallyDrop::new(lock_word),
            local: ManuallyDrop::new(local),
            lens,
            dt: T::equivalent_datatype(),
            held: Mutex::new(vec![false; inner.size as usize]),
            _t: PhantomData,
        })
    }

    /// This process's rank in the window's communicator.
    pub fn rank(&self) -> i32 {
        self.comm.rank()
    }

    /// The number of members.
    pub fn size(&self) -> i32 {
        self.comm.size()
    }

    /// This member's length in elements.
    pub fn len(&self) -> usize {
        self.lens[self.comm.rank() as usize] as usize
    }

    /// Whether this member exposes no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This member's elements (its own memory; what others put there is
    /// seen after a synchronisation: a fence, or their flush or unlock and
    /// a message).
    pub fn read_local(&self) -> Result<Vec<T>> {
        self.data.sync()?;
        let n = self.len();
        let mut out = Vec::with_capacity(n);
        // SAFETY: the window's memory holds `n` elements of `T` (a plain
        // number type: every pattern valid); `out` has room for them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.local.base().cast::<T>(), out.as_mut_ptr(), n);
            out.set_len(n);
        }
        Ok(out)
    }

    /// Stores `data` into this member's memory from its start.
    pub fn write_local(&self, data: &[T]) -> Result<()> {
        if data.len() > self.len() {
            return Err(Error::RmaRange {
                reason: format!(
                    "write_local: {} elements into a window of {}",
                    data.len(),
                    self.len()
                ),
            });
        }
        // SAFETY: the window's memory holds at least `data.len()` elements
        // (checked above) and does not overlap the caller's slice.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.local.base().cast::<T>(), data.len())
        };
        self.data.sync()
    }

    /// [`Error::Rank`] or [`Error::RmaRange`] unless `n` elements from
    /// `disp` lie within member `rank`'s window; its rank on this node if
    /// it is here.
    fn target(&self, rank: i32, disp: u64, n: usize, what: &str) -> Result<Option<i32>> {
        self.comm.active()?;
        let len = *self
            .lens
            .get(usize::try_from(rank).unwrap_or(usize::MAX))
            .ok_or(Error::Rank {
                rank,
                size: self.comm.size(),
            })?;
        if disp.checked_add(n as u64).is_none_or(|end| end > len) {
            return Err(Error::RmaRange {
                reason: format!("{what}: {n} elements at {disp} of rank {rank}'s window of {len}"),
            });
        }
        let l = self.comm.inner.local_of[rank as usize];
        Ok((l >= 0).then_some(l))
    }

    /// MPI's datatype and operation for an accumulate of `op` on `T`.
    fn mpi_op(&self, op: SystemOperation, what: &str) -> Result<(ffi::MPI_Datatype, ffi::MPI_Op)> {
        let b = match op {
            SystemOperation::Replace | SystemOperation::NoOp => None,
            _ => op.element_type(&self.dt)?,
        };
        let dt = b.and_then(datatype_of);
        match (dt, op_of(op)) {
            (Some(dt), Some(mop)) => Ok((dt, mop)),
            _ => Err(Error::Op {
                reason: format!(
                    "{what}: {} on elements of {:?} is not available across nodes (MPI's \
                     predefined operations other than REPLACE and NO_OP, on numbers of at \
                     most 64 bits)",
                    op.name(),
                    self.dt.basic_type()
                ),
            }),
        }
    }

    /// `MPI_Put` of `data` to `disp` of `rank`: complete at a member of
    /// this node when it returns, at one of another node after a flush.
    pub fn put(&self, rank: i32, data: &[T], disp: u64) -> Result<()> {
        match self.target(rank, disp, data.len(), "put")? {
            // SAFETY: `data` holds its elements of `T`.
            Some(l) => unsafe {
                self.local.put(
                    data.as_ptr().cast(),
                    data.len(),
                    &self.dt,
                    l,
                    disp,
                    data.len(),
                    &self.dt,
                )
            },
            None => {
                // SAFETY: `data` is borrowed until the local flush below,
                // after which MPI no longer reads it; the target's window
                // holds the elements (checked).
                unsafe {
                    self.data.put(
                        data.as_ptr().cast(),
                        std::mem::size_of_val(data),
                        rank,
                        disp,
                    )
                }?;
                self.data.flush_local(rank)
            }
        }
    }

    /// `MPI_Get` from `disp` of `rank` into `buf`, there when it returns.
    pub fn get(&self, rank: i32, buf: &mut [T], disp: u64) -> Result<()> {
        let n = buf.len();
        match self.target(rank, disp, n, "get")? {
            // SAFETY: `buf` holds `n` writable elements of `T`.
            Some(l) => unsafe {
                self.local
                    .get(buf.as_mut_ptr().cast(), n, &self.dt, l, disp, n, &self.dt)
            },
            None => {
                // SAFETY: `buf` is borrowed until the flush below completes
                // the get; the target's window holds the elements.
                unsafe {
                    self.data.get(
                        buf.as_mut_ptr().cast(),
                        std::mem::size_of_val(buf),
                        rank,
                        disp,
                    )
                }?;
                self.data.flush(rank)
            }
        }
    }

    /// `MPI_Accumulate` of `data` into `disp` of `rank` with `op`
    /// (through MPI for every target; complete at the target after a
    /// flush).
    pub fn accumulate(&self, rank: i32, data: &[T], disp: u64, op: SystemOperation) -> Result<()> {
        self.target(rank, disp, data.len(), "accumulate")?;
        let (dt, mop) = self.mpi_op(op, "accumulate")?;
        // SAFETY: `data` holds its elements of `T`, of MPI datatype `dt`,
        // borrowed until the local flush below.
        unsafe {
            self.data
                .accumulate(data.as_ptr().cast(), data.len(), dt, rank, disp, mop)
        }?;
        self.data.flush_local(rank)
    }

    /// `MPI_Fetch_and_op`: the element at `disp` of `rank` before `op`
    /// combined `value` into it (through MPI for every target, complete
    /// when it returns).
    pub fn fetch_and_op(&self, rank: i32, value: T, disp: u64, op: SystemOperation) -> Result<T> {
        self.target(rank, disp, 1, "fetch_and_op")?;
        let (dt, mop) = self.mpi_op(op, "fetch_and_op")?;
        let mut out = [value];
        // SAFETY: one element of `T` (MPI datatype `dt`) each.
        unsafe {
            self.data.fetch_and_op(
                (&value as *const T).cast(),
                out.as_mut_ptr().cast(),
                dt,
                rank,
                disp,
                mop,
            )
        }?;
        Ok(out[0])
    }

    /// `MPI_Win_flush`: this process's operations to `rank` are complete
    /// at the target.
    pub fn flush(&self, rank: i32) -> Result<()> {
        self.target(rank, 0, 0, "flush")?;
        self.data.flush(rank)?;
        // The node's direct copies are complete already; this orders them
        // before what follows, as hmpi's flush does.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) -> Result<()> {
        self.comm.active()?;
        self.data.flush_all()?;
        // SeqCst: as in `flush`.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// `MPI_Win_fence` (collective): every member's operations before it
    /// are complete, at their targets, before any member returns from it.
    pub fn fence(&self) -> Result<()> {
        self.flush_all()?;
        self.data.sync()?;
        // MPI's barrier over every member, not the hierarchical one: a
        // member waiting in it keeps MPI progressing, which Open MPI's
        // atomics over its shared-memory transport need at the target.
        self.comm.inner.remote.barrier()?;
        self.data.sync()?;
        // SeqCst: this process's later loads of window memory follow the
        // barrier, after which the other members' stores are complete.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// `MPI_Win_lock` of member `rank` (see the module docs): a guard
    /// whose operations target that member, unlocked by
    /// [`SpanLock::unlock`] or its drop. [`Error::RmaSync`] if this
    /// process holds a lock on `rank` already.
    pub fn lock(&self, rank: i32, kind: LockType) -> Result<SpanLock<'_, T>> {
        self.target(rank, 0, 0, "lock")?;
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            if held[rank as usize] {
                return Err(Error::RmaSync {
                    reason: format!("lock: rank {rank} is locked by this process already"),
                });
            }
            held[rank as usize] = true;
        }
        if let Err(e) = self.acquire(rank, kind) {
            self.held.lock().unwrap_or_else(|p| p.into_inner())[rank as usize] = false;
            return Err(e);
        }
        Ok(SpanLock {
            win: self,
            rank,
            kind,
            open: true,
        })
    }

    /// Takes member `rank`'s lock word.
    fn acquire(&self, rank: i32, kind: LockType) -> Result<()> {
        let mut tries = 0u32;
        loop {
            let got = match kind {
                // A writer holds the word if nobody did when it added its
                // bit; a reader if no writer bit was there. A loser takes
                // back what it added.
                LockType::Exclusive => {
                    if self.locks.fetch_add_i64(WRITER, rank, 0)? == 0 {
                        true
                    } else {
                        self.locks.fetch_add_i64(-WRITER, rank, 0)?;
                        false
                    }
                }
                LockType::Shared => {
                    if self.locks.fetch_add_i64(1, rank, 0)? < WRITER {
                        true
                    } else {
                        self.locks.fetch_add_i64(-1, rank, 0)?;
                        false
                    }
                }
            };
            if got {
                // SeqCst: the holder's direct copies follow the lock, as
                // the previous holder's preceded its release.
                fence(Ordering::SeqCst);
                return self.data.sync();
            }
            tries += 1;
            if tries > 64 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Releases member `rank`'s lock word after completing the
    /// operations to it.
    fn release(&self, rank: i32, kind: LockType) -> Result<()> {
        let flushed = self.flush(rank).and_then(|()| self.data.sync());
        let delta = match kind {
            LockType::Exclusive => -WRITER,
            LockType::Shared => -1,
        };
        let released = self.locks.fetch_add_i64(delta, rank, 0).map(drop);
        self.held.lock().unwrap_or_else(|p| p.into_inner())[rank as usize] = false;
        flushed.and(released)
    }
}

impl<T: Plain + Equivalence> Drop for SpanWindow<T> {
    /// Collective: the MPI windows are freed first (`MPI_Win_free`
    /// completes what peers still do to this memory), then the lock word
    /// and the node's window. A panicking thread frees nothing: its peers
    /// may never come to the collective frees, and the job is ending (the
    /// universe's drop aborts it), so the memory MPI may still reach stays.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        // SAFETY: each field is dropped once, here, and never used again;
        // `data` and `locks` go before the memory they expose.
        unsafe {
            ManuallyDrop::drop(&mut self.data);
            ManuallyDrop::drop(&mut self.locks);
            ManuallyDrop::drop(&mut self.lock_word);
            ManuallyDrop::drop(&mut self.local);
        }
    }
}

/// A lock on one member of a [`SpanWindow`] ([`SpanWindow::lock`]).
#[derive(Debug)]
pub struct SpanLock<'w, T: Plain + Equivalence> {
    win: &'w SpanWindow<T>,
    rank: i32,
    kind: LockType,
    open: bool,
}

impl<T: Plain + Equivalence> SpanLock<'_, T> {
    /// The locked member.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// `MPI_Put` of `data` to `disp`.
    pub fn put(&self, data: &[T], disp: u64) -> Result<()> {
        self.win.put(self.rank, data, disp)
    }

    /// `MPI_Get` from `disp` into `buf`.
    pub fn get(&self, buf: &mut [T], disp: u64) -> Result<()> {
        self.win.get(self.rank, buf, disp)
    }

    /// `MPI_Accumulate` of `data` into `disp`.
    pub fn accumulate(&self, data: &[T], disp: u64, op: SystemOperation) -> Result<()> {
        self.win.accumulate(self.rank, data, disp, op)
    }

    /// `MPI_Fetch_and_op` at `disp`.
    pub fn fetch_and_op(&self, value: T, disp: u64, op: SystemOperation) -> Result<T> {
        self.win.fetch_and_op(self.rank, value, disp, op)
    }

    /// `MPI_Win_flush`.
    pub fn flush(&self) -> Result<()> {
        self.win.flush(self.rank)
    }

    /// `MPI_Win_unlock`: the operations complete at the member, then the
    /// lock is released.
    pub fn unlock(mut self) -> Result<()> {
        self.open = false;
        self.win.release(self.rank, self.kind)
    }
}

impl<T: Plain + Equivalence> Drop for SpanLock<'_, T> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.win.release(self.rank, self.kind);
        }
    }
}
