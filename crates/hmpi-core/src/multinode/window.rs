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
//!   The operations are MPI's predefined ones (`REPLACE` and `NO_OP`
//!   included), on the numbers MPI has datatypes for (not 128-bit
//!   integers); the others are [`Error::Op`];
//! * **compare-and-swap** too (`MPI_Compare_and_swap`), on the bits of
//!   the element (as an unsigned integer of its size: MPI compares
//!   integers only);
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
//! The MPI side is a [`NetWindow`]: the same MPI window over memory of the
//! node heap, addressed in bytes, for layers that keep their own element
//! types and tables (the global address space).
//!
//! Displacements count elements of `T`, as in [`crate::window::Window`].
//! Creating and dropping a window are collective over the communicator
//! (every member drops it at the same point of its program, before the
//! universe is dropped).

use super::coll::Plain;
use super::comm::SpanningCommunicator;
use super::mpi::{datatype_of, host_hash, open_mpi, rma_op_of, RawWin};
use crate::datatype::BasicType;
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

/// An MPI window over `size` bytes of the node heap at every member of a
/// [`SpanningCommunicator`], addressed in bytes, in a passive-target epoch
/// (`lock_all` with `MPI_MODE_NOCHECK`) from creation to drop. The memory
/// belongs to the caller (normally an hmpi window of the node's members,
/// which serves them directly); this is the way to it from other nodes,
/// and the way every member takes for atomics (see the module docs).
///
/// Dropping it is collective (`MPI_Win_free`), and must come before the
/// memory is freed.
pub struct NetWindow {
    raw: RawWin,
    /// This process's rank.
    rank: i32,
    /// Per member: its rank among this node's members, -1 on another node.
    local_of: Vec<i32>,
    /// Per member: the bytes it exposes.
    sizes: Vec<u64>,
    /// This process's memory (its address).
    base: usize,
    /// Whether a compare-and-swap on this process's own memory is made here
    /// with the processor's (see [`NetWindow::compare_and_swap`]).
    own_cas_here: bool,
}

impl std::fmt::Debug for NetWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetWindow")
            .field("rank", &self.rank)
            .field("sizes", &self.sizes)
            .finish()
    }
}

impl Drop for NetWindow {
    fn drop(&mut self) {
        super::mpi::count_window(-1);
    }
}

/// A one-sided operation in flight through MPI ([`NetWindow::rput`],
/// [`NetWindow::rget`]); dropping it waits for it.
#[derive(Debug)]
pub struct NetRequest(Option<super::mpi::RawRequest>);

impl NetRequest {
    /// Whether it is complete (`MPI_Test`).
    pub fn test(&mut self) -> Result<bool> {
        match &mut self.0 {
            None => Ok(true),
            Some(r) => {
                let done = r.test()?.is_some();
                if done {
                    self.0 = None;
                }
                Ok(done)
            }
        }
    }

    /// Waits until it is complete (tests, spinning, then yielding).
    pub fn wait(mut self) -> Result<()> {
        self.wait_mut()
    }

    fn wait_mut(&mut self) -> Result<()> {
        match self.0.take() {
            Some(mut r) => r.wait_polling().map(drop),
            None => Ok(()),
        }
    }
}

impl Drop for NetRequest {
    fn drop(&mut self) {
        // MPI may still read or write the caller's buffer: wait (an error
        // leaves nothing pending, as MPI_Test frees a failed request).
        let _ = self.wait_mut();
    }
}

/// The datatype of `n` elements of `dt` (a dense type of one basic type)
/// as MPI's: its predefined datatype and the count of basic elements.
fn mpi_elements(
    dt: &Datatype,
    n: usize,
    what: &str,
) -> Result<(BasicType, ffi::MPI_Datatype, usize)> {
    let b = dt.basic_type().filter(|_| dt.dense_offset() == Some(0));
    let mdt = b.and_then(datatype_of);
    match (b, mdt) {
        (Some(b), Some(m)) => Ok((b, m, n * (dt.size() / b.size().max(1)))),
        _ => Err(Error::Type {
            reason: format!(
                "{what} across nodes takes dense elements of one number type MPI names \
                 (integers and floats of at most 64 bits); not {:?}",
                dt.basic_type()
            ),
        }),
    }
}

/// MPI's unsigned integer datatype of `bytes` bytes (a compare-and-swap
/// compares bits).
fn bits_of(bytes: usize) -> Option<ffi::MPI_Datatype> {
    datatype_of(match bytes {
        1 => BasicType::U8,
        2 => BasicType::U16,
        4 => BasicType::U32,
        8 => BasicType::U64,
        _ => return None,
    })
}

impl NetWindow {
    /// The MPI window over the `size` bytes at `base` of every member of
    /// `comm` (collective; sizes may differ).
    ///
    /// # Safety
    /// The memory stays valid for reads and writes by MPI (on behalf of
    /// any member) until the window is dropped, and is in the node heap or
    /// otherwise reachable by MPI.
    pub unsafe fn create(comm: &SpanningCommunicator, base: *mut u8, size: u64) -> Result<Self> {
        comm.active()?;
        let inner = &comm.inner;
        let bytes = usize::try_from(size).map_err(|_| Error::TooLarge {
            count: size,
            element_size: 1,
        })?;
        // SAFETY: the caller's guarantee.
        let raw = unsafe { RawWin::create(&inner.remote, base, bytes, 1) }?;
        let sizes = inner
            .remote
            .allgather_i64(size as i64)?
            .into_iter()
            .map(|l| l as u64)
            .collect();
        let hosts = inner.remote.allgather_i64(host_hash()?)?;
        super::mpi::count_window(1);
        crate::collective::install_idle_hook();
        Ok(NetWindow {
            raw,
            rank: inner.rank,
            local_of: inner.local_of.clone(),
            sizes,
            base: base as usize,
            own_cas_here: open_mpi() && hosts.iter().all(|&h| h == hosts[0]),
        })
    }

    /// The node's window of `size` bytes at this member (`Win::allocate`
    /// on the node's communicator, `disp_unit` bytes per displacement)
    /// and an MPI window over it, both in a `lock_all` epoch (collective
    /// over `comm`; sizes may differ). `size` may be an error this member
    /// found in its request: every member agrees on the outcome before MPI
    /// is asked for more, so a failure anywhere fails it everywhere (with
    /// the member's own error, or [`Error::Win`] where another failed).
    /// Free the MPI window before the node's.
    pub fn allocate(
        comm: &SpanningCommunicator,
        size: Result<u64>,
        disp_unit: u64,
    ) -> Result<(Win, NetWindow)> {
        comm.active()?;
        let inner = &comm.inner;
        let local = size.and_then(|b| Win::allocate(&inner.local, b, disp_unit));
        let ok = i32::from(local.is_ok());
        if inner.remote.allreduce_min(ok)? == 0 {
            return Err(match local {
                Err(e) => e,
                Ok(w) => {
                    w.free()?;
                    Error::Win {
                        reason: "the window could not be made on another member".into(),
                    }
                }
            });
        }
        let local = local?;
        local.lock_all(assert::NOCHECK)?;
        // SAFETY: `local`'s memory (its size at its base, in the node
        // heap) lives as long as `local`, which the caller frees after
        // the MPI window.
        let net = unsafe { Self::create(comm, local.base(), local.size()) }?;
        Ok((local, net))
    }

    /// The bytes member `rank` exposes.
    pub fn size_of(&self, rank: i32) -> Result<u64> {
        self.sizes
            .get(usize::try_from(rank).unwrap_or(usize::MAX))
            .copied()
            .ok_or(Error::Rank {
                rank,
                size: self.sizes.len() as i32,
            })
    }

    /// Member `rank`'s rank among this node's members, if it is on this
    /// node.
    pub fn on_node(&self, rank: i32) -> Option<i32> {
        let l = *self.local_of.get(usize::try_from(rank).ok()?)?;
        (l >= 0).then_some(l)
    }

    /// [`Error::RmaRange`] unless `len` bytes from `disp` lie within member
    /// `rank`'s memory.
    fn check(&self, rank: i32, disp: u64, len: u64, what: &str) -> Result<()> {
        let size = self.size_of(rank)?;
        if disp.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::RmaRange {
                reason: format!("{what}: {len} bytes at {disp} of rank {rank}'s {size}"),
            });
        }
        Ok(())
    }

    /// `MPI_Put` of the `len` bytes at `src` to byte `disp` of `rank`;
    /// `src` may be reused when it returns, the bytes are at the target
    /// after a flush.
    ///
    /// # Safety
    /// `src` is readable for `len` bytes.
    pub unsafe fn put(&self, src: *const u8, len: usize, rank: i32, disp: u64) -> Result<()> {
        self.check(rank, disp, len as u64, "put")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the caller's guarantee, borrowed until the local flush;
        // the target holds the bytes (checked).
        unsafe { self.raw.put(src, len, rank, disp) }?;
        self.raw.flush_local(rank)
    }

    /// `MPI_Get` of `len` bytes from byte `disp` of `rank` into `dst`,
    /// there when it returns.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes.
    pub unsafe fn get(&self, dst: *mut u8, len: usize, rank: i32, disp: u64) -> Result<()> {
        self.check(rank, disp, len as u64, "get")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the caller's guarantee, until the flush completes the
        // get; the target holds the bytes (checked).
        unsafe { self.raw.get(dst, len, rank, disp) }?;
        self.raw.flush(rank)
    }

    /// `MPI_Rput` of the `len` bytes at `src` to byte `disp` of `rank`:
    /// `src` may be reused once the request completes, the bytes are at
    /// the target after a flush.
    ///
    /// # Safety
    /// `src` holds `len` bytes, unchanged until the request completes (or
    /// is dropped, which waits for it).
    pub unsafe fn rput(
        &self,
        src: *const u8,
        len: usize,
        rank: i32,
        disp: u64,
    ) -> Result<NetRequest> {
        self.check(rank, disp, len as u64, "rput")?;
        // SAFETY: the caller's guarantee; the target holds the bytes.
        let r = unsafe { self.raw.rput(src, len, rank, disp) }?;
        Ok(NetRequest(Some(r)))
    }

    /// `MPI_Rget` of `len` bytes from byte `disp` of `rank` into `dst`:
    /// there once the request completes.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and untouched until the request
    /// completes (or is dropped, which waits for it).
    pub unsafe fn rget(
        &self,
        dst: *mut u8,
        len: usize,
        rank: i32,
        disp: u64,
    ) -> Result<NetRequest> {
        self.check(rank, disp, len as u64, "rget")?;
        // SAFETY: the caller's guarantee; the target holds the bytes.
        let r = unsafe { self.raw.rget(dst, len, rank, disp) }?;
        Ok(NetRequest(Some(r)))
    }

    /// The target's byte runs of `count` elements of `dt` from `disp`
    /// (checked to lie in `rank`'s memory), in packing order.
    fn runs(
        &self,
        dt: &Datatype,
        count: usize,
        rank: i32,
        disp: u64,
        what: &str,
    ) -> Result<Vec<(u64, usize)>> {
        let (lo, hi) = dt.reach(count)?.unwrap_or((0, 0));
        if lo < 0 {
            return Err(Error::RmaRange {
                reason: format!(
                    "{what}: the target datatype reaches {} bytes before its start",
                    -lo
                ),
            });
        }
        self.check(rank, disp, hi as u64, what)?;
        let ext = dt.extent() as i64;
        let mut out = Vec::with_capacity(count * dt.block_count());
        for k in 0..count as i64 {
            for &(off, len) in dt.blocks() {
                if len > 0 {
                    out.push(((disp as i64 + k * ext + off as i64) as u64, len));
                }
            }
        }
        Ok(out)
    }

    /// Puts `ocount` elements of `odt` at `origin` into `tcount` elements
    /// of `tdt` from byte `disp` of `rank` (packed here, one `MPI_Put` per
    /// contiguous run of the target's type map); `origin` may be reused
    /// when it returns.
    ///
    /// # Safety
    /// The origin's elements are readable at `origin`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put_typed(
        &self,
        origin: *const u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let n = odt.packed_size(ocount)?;
        if tdt.packed_size(tcount)? != n {
            return Err(Error::Type {
                reason: format!(
                    "put: the origin packs to {n} bytes, the target's datatype holds {}",
                    tdt.packed_size(tcount)?
                ),
            });
        }
        // A dense origin is sent from where it is; another one packed.
        let packed;
        let src = match odt.dense_offset() {
            Some(oo) => origin.wrapping_offset(oo),
            None => {
                // SAFETY: the caller's guarantee.
                packed = unsafe { pack_origin(origin, ocount, odt) }?;
                packed.as_ptr()
            }
        };
        let mut at = 0;
        for (d, len) in self.runs(tdt, tcount, rank, disp, "put")? {
            // SAFETY: `src` holds the `n` bytes in packing order (the
            // caller's or `packed`, alive past the local flush below); the
            // target holds the run (checked).
            unsafe { self.raw.put(src.add(at), len, rank, d) }?;
            at += len;
        }
        self.raw.flush_local(rank)
    }

    /// Gets `tcount` elements of `tdt` from byte `disp` of `rank` into
    /// `ocount` elements of `odt` at `origin` (one `MPI_Get` per run, then
    /// unpacked here); there when it returns.
    ///
    /// # Safety
    /// The origin's elements are writable at `origin`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get_typed(
        &self,
        origin: *mut u8,
        ocount: usize,
        odt: &Datatype,
        rank: i32,
        disp: u64,
        tcount: usize,
        tdt: &Datatype,
    ) -> Result<()> {
        let n = odt.packed_size(ocount)?;
        if tdt.packed_size(tcount)? != n {
            return Err(Error::Type {
                reason: format!(
                    "get: the target's datatype holds {} bytes, the origin's {n}",
                    tdt.packed_size(tcount)?
                ),
            });
        }
        // A dense origin receives where it is; another one is unpacked.
        let dense = odt.dense_offset();
        let mut packed = vec![0u8; if dense.is_some() { 0 } else { n }];
        let dst = match dense {
            Some(oo) => origin.wrapping_offset(oo),
            None => packed.as_mut_ptr(),
        };
        let mut at = 0;
        for (d, len) in self.runs(tdt, tcount, rank, disp, "get")? {
            // SAFETY: `dst` has room for the `n` bytes in packing order
            // (the caller's or `packed`), not touched before the flush;
            // the target holds the run.
            unsafe { self.raw.get(dst.add(at), len, rank, d) }?;
            at += len;
        }
        self.raw.flush(rank)?;
        if dense.is_none() {
            // SAFETY: the caller's guarantee: the origin's elements are
            // writable at `origin`.
            unsafe { odt.unpack_raw(&packed, origin, ocount) }?;
        }
        Ok(())
    }

    /// `MPI_Accumulate` of `count` elements of `dt` at `src` into byte
    /// `disp` of `rank` with `op` (any predefined operation MPI has,
    /// `REPLACE` included); `src` may be reused when it returns.
    ///
    /// # Safety
    /// `src` holds `count` elements of `dt`.
    pub unsafe fn accumulate(
        &self,
        src: *const u8,
        count: usize,
        dt: &Datatype,
        rank: i32,
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        let (b, mdt, n) = mpi_elements(dt, count, "accumulate")?;
        let mop = Self::op(op, b, "accumulate")?;
        self.check(rank, disp, (count * dt.size()) as u64, "accumulate")?;
        // SAFETY: the caller's guarantee: `n` elements of `mdt`, borrowed
        // until the local flush.
        unsafe { self.raw.accumulate(src, n, mdt, rank, disp, mop) }?;
        self.raw.flush_local(rank)
    }

    /// `MPI_Get_accumulate` of `count` elements of `dt`: `result` gets the
    /// elements from byte `disp` of `rank` from before `op` combined `src`
    /// into them (element-wise atomic, as accumulates are); complete when
    /// it returns.
    ///
    /// # Safety
    /// `src` holds `count` elements of `dt` (read unless `op` is
    /// `NO_OP`), `result` has room for `count`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get_accumulate(
        &self,
        src: *const u8,
        result: *mut u8,
        count: usize,
        dt: &Datatype,
        rank: i32,
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        let (b, mdt, n) = mpi_elements(dt, count, "get_accumulate")?;
        let mop = Self::op(op, b, "get_accumulate")?;
        self.check(rank, disp, (count * dt.size()) as u64, "get_accumulate")?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the caller's guarantee: `n` elements of `mdt` each.
        unsafe {
            self.raw
                .get_accumulate(src, result, n, mdt, rank, disp, mop)
        }
    }

    /// `MPI_Fetch_and_op` of one element of `dt` at byte `disp` of `rank`:
    /// `result` gets the element from before; complete when it returns.
    ///
    /// # Safety
    /// `value` and `result` each hold one element of `dt`.
    pub unsafe fn fetch_and_op(
        &self,
        value: *const u8,
        result: *mut u8,
        dt: &Datatype,
        rank: i32,
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        let (b, mdt, n) = mpi_elements(dt, 1, "fetch_and_op")?;
        if n != 1 {
            return Err(Error::Type {
                reason: "fetch_and_op across nodes takes one number".into(),
            });
        }
        let mop = Self::op(op, b, "fetch_and_op")?;
        self.check(rank, disp, dt.size() as u64, "fetch_and_op")?;
        // SAFETY: the caller's guarantee: one element of `mdt` each.
        unsafe { self.raw.fetch_and_op(value, result, mdt, rank, disp, mop) }
    }

    /// `MPI_Compare_and_swap` of one element of `dt` (1, 2, 4 or 8 bytes,
    /// compared bit by bit) at byte `disp` of `rank`: `result` gets the
    /// element from before; complete when it returns.
    ///
    /// Open MPI 4.1's one-sided component crashes in a compare-and-swap a
    /// process aims at itself over shared memory (it takes the network
    /// path, which has no endpoint to the process itself). When every
    /// member runs on one machine under Open MPI, a process's own
    /// compare-and-swap is therefore the processor's, on its memory: the
    /// others' atomics reach that memory as processor atomics there too
    /// (Open MPI emulates them at the target over shared memory).
    ///
    /// # Safety
    /// `value`, `compare` and `result` each hold one element of `dt`.
    pub unsafe fn compare_and_swap(
        &self,
        value: *const u8,
        compare: *const u8,
        result: *mut u8,
        dt: &Datatype,
        rank: i32,
        disp: u64,
    ) -> Result<()> {
        let w = dt.size();
        let Some(mdt) = bits_of(w).filter(|_| dt.dense_offset() == Some(0)) else {
            return Err(Error::Type {
                reason: format!(
                    "compare_and_swap across nodes takes one element of 1, 2, 4 or 8 dense \
                     bytes, not {w}"
                ),
            });
        };
        self.check(rank, disp, w as u64, "compare_and_swap")?;
        if rank == self.rank && self.own_cas_here {
            let at = (self.base as *mut u8).wrapping_add(disp as usize);
            // SAFETY: the caller's guarantee for the three elements; `at`
            // is in this process's memory (checked), which every member's
            // atomics reach as processor atomics (see above).
            unsafe { own_cas(value, compare, result, at, w) }?;
            // Those atomics are done by this process's MPI calls: one
            // spinning on its own element (a lock word, while another
            // member's release waits to be done here) must still make
            // some.
            return self.raw.flush(rank);
        }
        // SAFETY: the caller's guarantee: one element of `mdt` each.
        unsafe {
            self.raw
                .compare_and_swap(value, compare, result, mdt, rank, disp)
        }
    }

    /// MPI's handle for `op` on elements of `b`.
    fn op(op: SystemOperation, b: BasicType, what: &str) -> Result<ffi::MPI_Op> {
        let applies = matches!(op, SystemOperation::Replace | SystemOperation::NoOp)
            || op.element_type(&Datatype::basic(b)).is_ok();
        match rma_op_of(op).filter(|_| applies) {
            Some(m) => Ok(m),
            None => Err(Error::Op {
                reason: format!(
                    "{what}: {} on elements of {b:?} is not available across nodes (MPI's \
                     predefined operations on numbers of at most 64 bits)",
                    op.name()
                ),
            }),
        }
    }

    /// `MPI_Win_flush`: this process's operations to `rank` are complete
    /// at the target.
    pub fn flush(&self, rank: i32) -> Result<()> {
        self.size_of(rank)?;
        self.raw.flush(rank)
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) -> Result<()> {
        self.raw.flush_all()
    }

    /// Frees the window (collective, `MPI_Win_free`: what other members
    /// still do to this memory completes first); the same as dropping it.
    pub fn free(self) {
        drop(self);
    }

    /// `MPI_Win_sync`: this process's loads and stores of its memory and
    /// what MPI's operations stored there agree.
    pub fn sync(&self) -> Result<()> {
        self.raw.sync()
    }
}

/// `count` elements of `odt` at `origin`, packed.
///
/// # Safety
/// The elements are readable at `origin`.
unsafe fn pack_origin(origin: *const u8, count: usize, odt: &Datatype) -> Result<Vec<u8>> {
    let mut packed = vec![0u8; odt.packed_size(count)?];
    // SAFETY: the caller's guarantee.
    unsafe { odt.pack_raw(origin, count, &mut packed) }?;
    Ok(packed)
}

/// A compare-and-swap of `w` bytes on this process's memory at `at`.
///
/// # Safety
/// `value`, `compare`, `result` hold `w` bytes; `at` is an element of `w`
/// bytes of this process's memory that every other access reaches
/// atomically.
unsafe fn own_cas(
    value: *const u8,
    compare: *const u8,
    result: *mut u8,
    at: *mut u8,
    w: usize,
) -> Result<()> {
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
    if (at as usize) % w != 0 {
        return Err(Error::RmaRange {
            reason: format!("compare_and_swap: a {w}-byte element at a misaligned address"),
        });
    }
    macro_rules! cas {
        ($a:ty, $t:ty) => {{
            // SAFETY: the caller's guarantee; `at` is aligned (checked).
            let (v, c, a) = unsafe {
                (
                    value.cast::<$t>().read_unaligned(),
                    compare.cast::<$t>().read_unaligned(),
                    &*(at as *const $a),
                )
            };
            // SYNC POINT: AcqRel on success, Acquire on failure, as the
            // window layer's compare-and-swap.
            let old = a
                .compare_exchange(c, v, Ordering::AcqRel, Ordering::Acquire)
                .unwrap_or_else(|x| x);
            // SAFETY: `result` holds `w` bytes.
            unsafe { result.cast::<$t>().write_unaligned(old) };
        }};
    }
    match w {
        1 => cas!(AtomicU8, u8),
        2 => cas!(AtomicU16, u16),
        4 => cas!(AtomicU32, u32),
        _ => cas!(AtomicU64, u64),
    }
    Ok(())
}

/// A window of `len` elements of `T` per member over a spanning
/// communicator (see the module docs).
pub struct SpanWindow<T: Plain + Equivalence> {
    comm: SpanningCommunicator,
    /// The MPI window over the memory of `local` (freed before it; see
    /// the `Drop` impl for the order).
    data: ManuallyDrop<NetWindow>,
    /// The MPI window over `lock_word` (freed before it).
    locks: ManuallyDrop<RawWin>,
    /// This member's lock word, touched only through `locks`.
    lock_word: ManuallyDrop<Box<UnsafeCell<i64>>>,
    /// This node's members' memory, hmpi's window.
    local: ManuallyDrop<Win>,
    /// `T`'s datatype, built once.
    dt: Datatype,
    /// The members this process holds a lock on.
    held: Mutex<Vec<bool>>,
    /// Where the post/start/complete/wait tokens travel (a duplicate of
    /// the communicator, so they meet no message of the program).
    sync: SpanningCommunicator,
    /// The generalized active-target epochs of this process.
    pscw: Mutex<Pscw>,
    _t: PhantomData<T>,
}

impl<T: Plain + Equivalence> std::fmt::Debug for SpanWindow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanWindow")
            .field("rank", &self.comm.rank())
            .field("data", &*self.data)
            .finish()
    }
}

impl<T: Plain + Equivalence> SpanWindow<T> {
    /// A window of `len` zeroed elements of `T` on every member of `comm`
    /// (`MPI_Win_allocate`; collective, members may give different
    /// lengths). A failure at any member fails it everywhere.
    pub fn allocate(comm: &SpanningCommunicator, len: usize) -> Result<Self> {
        let inner = &comm.inner;
        let unit = std::mem::size_of::<T>();
        let bytes = match (unit, (len as u64).checked_mul(unit as u64)) {
            (0, _) => Err(Error::Type {
                reason: "a window of zero-sized elements".into(),
            }),
            (_, None) => Err(Error::TooLarge {
                count: len as u64,
                element_size: unit,
            }),
            (_, Some(b)) => Ok(b),
        };
        // `local` is dropped after `data` (see the `Drop` impl).
        let (local, data) = NetWindow::allocate(comm, bytes, unit as u64)?;
        let lock_word = Box::new(UnsafeCell::new(0i64));
        // SAFETY: the box's i64 lives as long as the window (dropped after
        // `locks`) and is touched by MPI only.
        let locks = unsafe { RawWin::create(&inner.remote, lock_word.get().cast(), 8, 8) }?;
        Ok(SpanWindow {
            comm: comm.clone(),
            data: ManuallyDrop::new(data),
            locks: ManuallyDrop::new(locks),
            lock_word: ManuallyDrop::new(lock_word),
            local: ManuallyDrop::new(local),
            dt: T::equivalent_datatype(),
            held: Mutex::new(vec![false; inner.size as usize]),
            sync: comm.duplicate()?,
            pscw: Mutex::new(Pscw::default()),
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
        self.len_of(self.comm.rank()).unwrap_or(0) as usize
    }

    /// Member `rank`'s length in elements (its bytes, which the MPI window
    /// keeps, over the element's).
    fn len_of(&self, rank: i32) -> Result<u64> {
        Ok(self.data.size_of(rank)? / std::mem::size_of::<T>() as u64)
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
        let len = self.len_of(rank)?;
        if disp.checked_add(n as u64).is_none_or(|end| end > len) {
            return Err(Error::RmaRange {
                reason: format!("{what}: {n} elements at {disp} of rank {rank}'s window of {len}"),
            });
        }
        Ok(self.data.on_node(rank))
    }

    /// The byte displacement of element `disp`.
    fn bytes(disp: u64) -> u64 {
        disp.wrapping_mul(std::mem::size_of::<T>() as u64)
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
            // SAFETY: `data` holds its bytes; the target's window holds the
            // elements (checked).
            None => unsafe {
                self.data.put(
                    data.as_ptr().cast(),
                    std::mem::size_of_val(data),
                    rank,
                    Self::bytes(disp),
                )
            },
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
            // SAFETY: `buf` is writable for its bytes; the target's window
            // holds the elements.
            None => unsafe {
                self.data.get(
                    buf.as_mut_ptr().cast(),
                    std::mem::size_of_val(buf),
                    rank,
                    Self::bytes(disp),
                )
            },
        }
    }

    /// `MPI_Accumulate` of `data` into `disp` of `rank` with `op`
    /// (through MPI for every target; complete at the target after a
    /// flush).
    pub fn accumulate(&self, rank: i32, data: &[T], disp: u64, op: SystemOperation) -> Result<()> {
        self.target(rank, disp, data.len(), "accumulate")?;
        // SAFETY: `data` holds its elements of `T` (`self.dt`).
        unsafe {
            self.data.accumulate(
                data.as_ptr().cast(),
                data.len(),
                &self.dt,
                rank,
                Self::bytes(disp),
                op,
            )
        }
    }

    /// `MPI_Fetch_and_op`: the element at `disp` of `rank` before `op`
    /// combined `value` into it (through MPI for every target, complete
    /// when it returns).
    pub fn fetch_and_op(&self, rank: i32, value: T, disp: u64, op: SystemOperation) -> Result<T> {
        self.target(rank, disp, 1, "fetch_and_op")?;
        let mut out = [value];
        // SAFETY: one element of `T` (`self.dt`) each.
        unsafe {
            self.data.fetch_and_op(
                (&value as *const T).cast(),
                out.as_mut_ptr().cast(),
                &self.dt,
                rank,
                Self::bytes(disp),
                op,
            )
        }?;
        Ok(out[0])
    }

    /// `MPI_Rput` of `data` to `disp` of `rank`: `data` stays borrowed
    /// until the request completes (at once for a member of this node,
    /// whose copy is done in the call); the elements are at a member of
    /// another node after a flush.
    pub fn rput<'a>(&self, rank: i32, data: &'a [T], disp: u64) -> Result<SpanRmaRequest<'a>> {
        match self.target(rank, disp, data.len(), "rput")? {
            Some(_) => self.put(rank, data, disp).map(|()| SpanRmaRequest::done()),
            // SAFETY: `data` stays borrowed by the request, which waits
            // for MPI before the borrow ends; the target holds the
            // elements (checked).
            None => unsafe {
                self.data.rput(
                    data.as_ptr().cast(),
                    std::mem::size_of_val(data),
                    rank,
                    Self::bytes(disp),
                )
            }
            .map(SpanRmaRequest::pending),
        }
    }

    /// `MPI_Rget` from `disp` of `rank` into `buf`: there once the request
    /// completes (at once for a member of this node).
    pub fn rget<'a>(&self, rank: i32, buf: &'a mut [T], disp: u64) -> Result<SpanRmaRequest<'a>> {
        match self.target(rank, disp, buf.len(), "rget")? {
            Some(_) => self.get(rank, buf, disp).map(|()| SpanRmaRequest::done()),
            // SAFETY: as in `rput`; `buf` is borrowed mutably by the
            // request.
            None => unsafe {
                self.data.rget(
                    buf.as_mut_ptr().cast(),
                    std::mem::size_of_val(buf),
                    rank,
                    Self::bytes(disp),
                )
            }
            .map(SpanRmaRequest::pending),
        }
    }

    /// `MPI_Get_accumulate`: `result` gets the elements from `disp` of
    /// `rank` from before `op` combined `data` into them (through MPI for
    /// every target, complete when it returns; `data` and `result` of one
    /// length).
    pub fn get_accumulate(
        &self,
        rank: i32,
        data: &[T],
        result: &mut [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        if data.len() != result.len() {
            return Err(Error::Buffer {
                reason: format!(
                    "get_accumulate: {} elements in, room for {} out",
                    data.len(),
                    result.len()
                ),
            });
        }
        self.target(rank, disp, data.len(), "get_accumulate")?;
        // SAFETY: `data` holds its elements of `T` (`self.dt`), `result`
        // room for as many.
        unsafe {
            self.data.get_accumulate(
                data.as_ptr().cast(),
                result.as_mut_ptr().cast(),
                data.len(),
                &self.dt,
                rank,
                Self::bytes(disp),
                op,
            )
        }
    }

    /// `MPI_Compare_and_swap`: the element at `disp` of `rank` before; it
    /// became `value` if it equalled `compare` bit for bit (through MPI
    /// for every target, complete when it returns).
    pub fn compare_and_swap(&self, rank: i32, value: T, compare: T, disp: u64) -> Result<T> {
        self.target(rank, disp, 1, "compare_and_swap")?;
        let mut out = [value];
        // SAFETY: one element of `T` (`self.dt`) each.
        unsafe {
            self.data.compare_and_swap(
                (&value as *const T).cast(),
                (&compare as *const T).cast(),
                out.as_mut_ptr().cast(),
                &self.dt,
                rank,
                Self::bytes(disp),
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

    /// The members of `group` (processes named by MPI world rank) as ranks
    /// of the window's communicator.
    fn members_of(&self, group: &crate::Group, what: &str) -> Result<Vec<i32>> {
        let all: Vec<i32> = (0..group.size()).collect();
        group
            .translate_ranks(&all, &self.comm.group())?
            .into_iter()
            .zip(group.world_ranks())
            .map(|(r, w)| {
                r.ok_or_else(|| Error::Group {
                    reason: format!("{what}: process {w} is not a member of the window"),
                })
            })
            .collect()
    }

    fn pscw(&self) -> std::sync::MutexGuard<'_, Pscw> {
        self.pscw.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `MPI_Win_post`: opens an exposure epoch for the members of `group`
    /// (each is told; their `start` waits for it). Their operations are
    /// complete here when [`SpanWindow::wait`] returns.
    pub fn post(&self, group: &crate::Group) -> Result<()> {
        let origins = self.members_of(group, "post")?;
        let mut e = self.pscw();
        if e.exposure.is_some() {
            return Err(Error::RmaSync {
                reason: "post during an exposure epoch".into(),
            });
        }
        // SeqCst: this process's stores to its memory come before the
        // tokens that let the origins at it.
        fence(Ordering::SeqCst);
        self.data.sync()?;
        for &o in &origins {
            self.sync.send(&[], o, POSTED)?;
        }
        e.heard = vec![false; origins.len()];
        e.exposure = Some(origins);
        Ok(())
    }

    /// `MPI_Win_start`: opens an access epoch to the members of `group`,
    /// once each of them has posted (it blocks until then).
    pub fn start(&self, group: &crate::Group) -> Result<()> {
        let targets = self.members_of(group, "start")?;
        let mut e = self.pscw();
        if e.access.is_some() {
            return Err(Error::RmaSync {
                reason: "start during an access epoch".into(),
            });
        }
        for &t in &targets {
            self.sync.recv(&mut [], t, POSTED)?;
        }
        e.access = Some(targets);
        Ok(())
    }

    /// `MPI_Win_complete`: completes this process's operations at each
    /// target of the access epoch, then tells it so.
    pub fn complete(&self) -> Result<()> {
        let targets = self.pscw().access.take().ok_or_else(|| Error::RmaSync {
            reason: "complete without start".into(),
        })?;
        for &t in &targets {
            self.flush(t)?;
            self.sync.send(&[], t, COMPLETED)?;
        }
        Ok(())
    }

    /// `MPI_Win_wait`: waits until every origin of the exposure epoch has
    /// completed; their operations are then visible here.
    pub fn wait(&self) -> Result<()> {
        while !self.test()? {
            std::thread::yield_now();
        }
        Ok(())
    }

    /// `MPI_Win_test`: whether every origin of the exposure epoch has
    /// completed (then the epoch is over, as after `wait`).
    pub fn test(&self) -> Result<bool> {
        let mut g = self.pscw();
        let Pscw {
            exposure, heard, ..
        } = &mut *g;
        let Some(origins) = exposure else {
            return Err(Error::RmaSync {
                reason: "wait or test without post".into(),
            });
        };
        for (&o, h) in origins.iter().zip(heard.iter_mut()) {
            if !*h && self.sync.iprobe(o, COMPLETED)?.is_some() {
                self.sync.recv(&mut [], o, COMPLETED)?;
                *h = true;
            }
        }
        if heard.iter().all(|&h| h) {
            *exposure = None;
            self.data.sync()?;
            // SeqCst: this process's loads of its memory follow the
            // tokens, after which the origins' stores are complete.
            fence(Ordering::SeqCst);
            return Ok(true);
        }
        Ok(false)
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

/// The tag of a post token (on the window's own duplicate).
const POSTED: i32 = 1;
/// The tag of a complete token.
const COMPLETED: i32 = 2;

/// A process's generalized active-target epochs on a [`SpanWindow`].
#[derive(Debug, Default)]
struct Pscw {
    /// The origins of the open exposure epoch.
    exposure: Option<Vec<i32>>,
    /// Per origin of the exposure epoch: whether its complete came.
    heard: Vec<bool>,
    /// The targets of the open access epoch.
    access: Option<Vec<i32>>,
}

/// A request of [`SpanWindow::rput`] / [`SpanWindow::rget`]: borrows the
/// buffer until it completes; dropping it waits.
#[derive(Debug)]
#[must_use = "a request must be waited for (or tested until done)"]
pub struct SpanRmaRequest<'a> {
    net: Option<NetRequest>,
    _buf: PhantomData<&'a mut [u8]>,
}

impl SpanRmaRequest<'_> {
    fn done() -> Self {
        SpanRmaRequest {
            net: None,
            _buf: PhantomData,
        }
    }

    fn pending(r: NetRequest) -> Self {
        SpanRmaRequest {
            net: Some(r),
            _buf: PhantomData,
        }
    }

    /// Whether it is complete.
    pub fn test(&mut self) -> Result<bool> {
        match &mut self.net {
            None => Ok(true),
            Some(r) => r.test(),
        }
    }

    /// Waits until it is complete.
    pub fn wait(self) -> Result<()> {
        match self.net {
            None => Ok(()),
            Some(r) => r.wait(),
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

    /// `MPI_Get_accumulate` at `disp`.
    pub fn get_accumulate(
        &self,
        data: &[T],
        result: &mut [T],
        disp: u64,
        op: SystemOperation,
    ) -> Result<()> {
        self.win.get_accumulate(self.rank, data, result, disp, op)
    }

    /// `MPI_Compare_and_swap` at `disp`.
    pub fn compare_and_swap(&self, value: T, compare: T, disp: u64) -> Result<T> {
        self.win.compare_and_swap(self.rank, value, compare, disp)
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
