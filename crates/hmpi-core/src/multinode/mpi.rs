//! The system MPI as the spanning layer uses it: checked wrappers around
//! rsmpi's raw bindings (`mpi::ffi`), on bytes (`MPI_UINT8_T`), except
//! reductions of numbers (`MPI_Allreduce`), which take MPI's datatype and
//! operation for hmpi's ([`datatype_of`], [`op_of`]).
//!
//! Every call returns a [`Result`]: the communicators made here use
//! `MPI_ERRORS_RETURN`, and a failed call becomes [`Error::Comm`] with
//! MPI's own error string. When MPI could not give `MPI_THREAD_MULTIPLE`,
//! one process-wide lock serialises the calls ([`call`]); the waits of the
//! layer above are loops of nonblocking tests, so a thread never holds the
//! lock while it waits for a peer.

use crate::datatype::BasicType;
use crate::error::{Error, Result};
use crate::op::SystemOperation;
use mpi::ffi;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Whether MPI calls must be serialised (MPI gave less than
/// `MPI_THREAD_MULTIPLE`).
static SERIALISE: AtomicBool = AtomicBool::new(true);
/// The lock that serialises them.
static LOCK: Mutex<()> = Mutex::new(());

/// Records the thread level MPI provided.
pub(crate) fn set_thread_multiple(multiple: bool) {
    // Relaxed: written once during start-up, before any other thread of
    // this runtime can call MPI (init returns after it).
    SERIALISE.store(!multiple, Ordering::Relaxed);
}

/// Whether MPI provided `MPI_THREAD_MULTIPLE`.
pub(crate) fn thread_multiple() -> bool {
    // Relaxed: see `set_thread_multiple`.
    !SERIALISE.load(Ordering::Relaxed)
}

/// Runs `f` (MPI calls) under the serialising lock when one is needed.
pub(crate) fn call<R>(f: impl FnOnce() -> R) -> R {
    // Relaxed: see `set_thread_multiple`.
    if SERIALISE.load(Ordering::Relaxed) {
        let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        f()
    } else {
        f()
    }
}

/// An MPI return code as a result. Inline: it follows every MPI call of
/// the message path, where a call and its frame would be paid by every
/// message; the error's text is built out of line.
#[inline(always)]
fn check(rc: c_int, what: &str) -> Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(failed(rc, what)),
    }
}

/// The error of MPI return code `rc` (not success) of call `what`, with
/// MPI's text for it.
#[cold]
#[inline(never)]
pub(crate) fn failed(rc: c_int, what: &str) -> Error {
    let mut buf = vec![0 as std::ffi::c_char; 1024];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING (at most 1024 in both MPIs)
    // characters; MPI writes at most that many and their length.
    let ok = unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr(), &mut len) } == 0;
    let msg = if ok {
        let bytes: Vec<u8> = buf[..len.clamp(0, 1024) as usize]
            .iter()
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        format!("error code {rc}")
    };
    Error::Comm {
        reason: format!("MPI {what}: {msg}"),
    }
}

/// Receive buffers for MPI: an empty `Vec`'s pointer is a dangling
/// address shared by every empty buffer, and MPI takes a send and a
/// receive buffer at the same address for an aliasing error (Open MPI:
/// `MPI_ERR_ARG`); an empty receive buffer gets a distinct spare byte.
fn recv_ptr(buf: &mut [u8], spare: &mut [u8; 1]) -> *mut c_void {
    if buf.is_empty() {
        spare.as_mut_ptr().cast()
    } else {
        buf.as_mut_ptr().cast()
    }
}

/// A length as MPI's `int` count.
pub(crate) fn count(len: usize) -> Result<c_int> {
    c_int::try_from(len).map_err(|_| Error::TooLarge {
        count: len as u64,
        element_size: 1,
    })
}

/// A source as MPI spells it (hmpi's `ANY_SOURCE` is not MPI's value).
fn mpi_source(source: i32) -> c_int {
    if source == crate::raw::ANY_SOURCE {
        // SAFETY: a constant rsmpi's shim initialises at load time.
        unsafe { ffi::RSMPI_ANY_SOURCE }
    } else {
        source
    }
}

/// A tag as MPI spells it (hmpi's `ANY_TAG` is not MPI's value).
fn mpi_tag(tag: i32) -> c_int {
    if tag == crate::raw::ANY_TAG {
        // SAFETY: as above.
        unsafe { ffi::RSMPI_ANY_TAG }
    } else {
        tag
    }
}

/// `MPI_UINT8_T`.
fn bytes() -> ffi::MPI_Datatype {
    // SAFETY: a constant handle rsmpi's shim initialises at load time.
    unsafe { ffi::RSMPI_UINT8_T }
}

/// MPI's predefined datatype for elements of `b`, for the fixed-width
/// numbers MPI names (`None` for the others, such as 128-bit integers).
pub(crate) fn datatype_of(b: BasicType) -> Option<ffi::MPI_Datatype> {
    use BasicType::*;
    // SAFETY: constant handles rsmpi's shim initialises at load time.
    unsafe {
        Some(match b {
            I8 => ffi::RSMPI_INT8_T,
            U8 => ffi::RSMPI_UINT8_T,
            I16 => ffi::RSMPI_INT16_T,
            U16 => ffi::RSMPI_UINT16_T,
            I32 => ffi::RSMPI_INT32_T,
            U32 => ffi::RSMPI_UINT32_T,
            I64 => ffi::RSMPI_INT64_T,
            U64 => ffi::RSMPI_UINT64_T,
            F32 => ffi::RSMPI_FLOAT,
            F64 => ffi::RSMPI_DOUBLE,
            _ => return None,
        })
    }
}

/// MPI's predefined operation for `s`, for those a collective takes
/// (`None` for `MAXLOC`, `MINLOC`, `REPLACE` and `NO_OP`).
pub(crate) fn op_of(s: SystemOperation) -> Option<ffi::MPI_Op> {
    use SystemOperation::*;
    // SAFETY: constant handles rsmpi's shim initialises at load time.
    unsafe {
        Some(match s {
            Sum => ffi::RSMPI_SUM,
            Product => ffi::RSMPI_PROD,
            Max => ffi::RSMPI_MAX,
            Min => ffi::RSMPI_MIN,
            LogicalAnd => ffi::RSMPI_LAND,
            LogicalOr => ffi::RSMPI_LOR,
            LogicalXor => ffi::RSMPI_LXOR,
            BitwiseAnd => ffi::RSMPI_BAND,
            BitwiseOr => ffi::RSMPI_BOR,
            BitwiseXor => ffi::RSMPI_BXOR,
            MaxLoc | MinLoc | Replace | NoOp => return None,
        })
    }
}

/// MPI's operation for `s` in a one-sided accumulate: [`op_of`]'s, and
/// `MPI_REPLACE` and `MPI_NO_OP` too. rsmpi names no handle for those two,
/// so they are made from their Fortran values (`MPI_Op_f2c`), which each
/// library fixes in its `mpif.h`: Open MPI's are 13 and 14 (its `MPI_SUM`
/// is 3), MPICH's `0x5800000d` and `0x5800000e` (its `MPI_SUM` is
/// `0x58000003`). With a library whose `MPI_SUM` is neither, they are
/// `None`.
pub(crate) fn rma_op_of(s: SystemOperation) -> Option<ffi::MPI_Op> {
    let (replace, no_op) = match s {
        SystemOperation::Replace | SystemOperation::NoOp => {
            // SAFETY: a constant handle; c2f reads no memory of ours.
            match unsafe { ffi::RSMPI_Op_c2f(ffi::RSMPI_SUM) } {
                3 => (13, 14),
                0x5800_0003 => (0x5800_000d, 0x5800_000e),
                _ => return None,
            }
        }
        _ => return op_of(s),
    };
    let f = if s == SystemOperation::Replace {
        replace
    } else {
        no_op
    };
    // SAFETY: a predefined operation's Fortran value (see above).
    Some(unsafe { ffi::RSMPI_Op_f2c(f) })
}

/// A hash of this process's host name (`MPI_Get_processor_name`), to tell
/// whether the members of a communicator share one machine.
pub(crate) fn host_hash() -> Result<i64> {
    let mut buf = vec![0 as std::ffi::c_char; 256];
    let mut len: c_int = 0;
    check(
        // SAFETY: `buf` holds MPI_MAX_PROCESSOR_NAME (at most 256 in both
        // MPIs) characters; MPI writes at most that many and their length.
        call(|| unsafe { ffi::MPI_Get_processor_name(buf.as_mut_ptr(), &mut len) }),
        "Get_processor_name",
    )?;
    // FNV-1a: equal names give equal hashes on every member.
    let h = buf[..len.clamp(0, 256) as usize]
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
            (h ^ u64::from(c as u8)).wrapping_mul(0x100_0000_01b3)
        });
    Ok(h as i64)
}

/// One-sided windows of this process that MPI may have to progress.
static LIVE_WINDOWS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a window made (`+1`) or freed (`-1`) for [`poke`].
pub(crate) fn count_window(delta: isize) {
    // Relaxed: a hint for `poke`; a poke more or less changes no result.
    if delta > 0 {
        LIVE_WINDOWS.fetch_add(1, Ordering::Relaxed);
    } else {
        LIVE_WINDOWS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Lets MPI progress, while a thread of this process waits for something
/// else, when one-sided windows are live: MPI may complete another
/// process's one-sided operation on this process's memory (an atomic over
/// shared memory, in Open MPI) only while this process calls MPI, and a
/// process waiting in a node-local phase would otherwise never do. One
/// `MPI_Iprobe`; skipped when the serialising lock is busy (its holder is
/// calling MPI already).
pub(crate) fn poke() {
    // Relaxed: see `count_window`.
    if LIVE_WINDOWS.load(Ordering::Relaxed) == 0 || finalized() {
        return;
    }
    let probe = || {
        let mut flag: c_int = 0;
        // SAFETY: a probe of the world with constant handles; `flag` is
        // writable; the status is ignored.
        unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                ffi::RSMPI_COMM_WORLD,
                &mut flag,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
    };
    // Relaxed: see `set_thread_multiple`.
    if SERIALISE.load(Ordering::Relaxed) {
        if let Ok(_g) = LOCK.try_lock() {
            probe();
        }
    } else {
        probe();
    }
}

/// Whether MPI was finalized (then no handle may be freed).
pub(crate) fn finalized() -> bool {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time; `flag` is writable.
    unsafe { ffi::MPI_Finalized(&mut flag) };
    flag != 0
}

/// An MPI communicator this layer made (freed when dropped) or the world
/// (never freed).
#[derive(Debug)]
pub(crate) struct RawComm {
    handle: ffi::MPI_Comm,
    owned: bool,
}

// SAFETY: an MPI communicator handle may be used from any thread (calls
// are serialised by `call` unless MPI is thread-multiple).
unsafe impl Send for RawComm {}
// SAFETY: as above; the handle is never changed after creation.
unsafe impl Sync for RawComm {}

impl Drop for RawComm {
    fn drop(&mut self) {
        if self.owned && !finalized() {
            // SAFETY: a communicator this layer created and nothing else
            // frees; pending operations on it finish before MPI releases it.
            call(|| unsafe { ffi::MPI_Comm_free(&mut self.handle) });
        }
    }
}

/// Sets `MPI_ERRORS_RETURN` on `c`.
fn errors_return(c: ffi::MPI_Comm) -> Result<()> {
    check(
        // SAFETY: `c` is a valid communicator; the handler is a constant.
        call(|| unsafe { ffi::MPI_Comm_set_errhandler(c, ffi::RSMPI_ERRORS_RETURN) }),
        "Comm_set_errhandler",
    )
}

impl RawComm {
    /// `MPI_COMM_WORLD`, its errors returned.
    pub(crate) fn world() -> Result<RawComm> {
        // SAFETY: a constant handle.
        let handle = unsafe { ffi::RSMPI_COMM_WORLD };
        errors_return(handle)?;
        Ok(RawComm {
            handle,
            owned: false,
        })
    }

    fn made(handle: ffi::MPI_Comm) -> Result<Option<RawComm>> {
        // SAFETY: comparing with a constant handle.
        if handle == unsafe { ffi::RSMPI_COMM_NULL } {
            return Ok(None);
        }
        let c = RawComm {
            handle,
            owned: true,
        };
        errors_return(c.handle)?;
        Ok(Some(c))
    }

    /// This process's rank.
    pub(crate) fn rank(&self) -> Result<i32> {
        let mut r: c_int = 0;
        check(
            // SAFETY: a valid communicator; `r` is writable.
            call(|| unsafe { ffi::MPI_Comm_rank(self.handle, &mut r) }),
            "Comm_rank",
        )?;
        Ok(r)
    }

    /// The number of processes.
    pub(crate) fn size(&self) -> Result<i32> {
        let mut r: c_int = 0;
        check(
            // SAFETY: as in `rank`.
            call(|| unsafe { ffi::MPI_Comm_size(self.handle, &mut r) }),
            "Comm_size",
        )?;
        Ok(r)
    }

    /// `MPI_Comm_dup`.
    pub(crate) fn dup(&self) -> Result<RawComm> {
        // SAFETY: any handle value; MPI overwrites it.
        let mut out = unsafe { ffi::RSMPI_COMM_NULL };
        check(
            // SAFETY: a valid communicator; `out` is writable.
            call(|| unsafe { ffi::MPI_Comm_dup(self.handle, &mut out) }),
            "Comm_dup",
        )?;
        Self::made(out)?.ok_or_else(|| Error::Internal("MPI_Comm_dup gave no communicator".into()))
    }

    /// `MPI_Comm_split` (`None` color: `MPI_UNDEFINED`).
    pub(crate) fn split(&self, color: Option<i32>, key: i32) -> Result<Option<RawComm>> {
        // SAFETY: a constant.
        let color = color.unwrap_or(unsafe { ffi::RSMPI_UNDEFINED });
        // SAFETY: as in `dup`.
        let mut out = unsafe { ffi::RSMPI_COMM_NULL };
        check(
            // SAFETY: a valid communicator; `out` is writable.
            call(|| unsafe { ffi::MPI_Comm_split(self.handle, color, key, &mut out) }),
            "Comm_split",
        )?;
        Self::made(out)
    }

    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`: the processes that can
    /// share memory with this one.
    pub(crate) fn split_shared(&self, key: i32) -> Result<RawComm> {
        // SAFETY: as in `dup`.
        let mut out = unsafe { ffi::RSMPI_COMM_NULL };
        check(
            // SAFETY: a valid communicator, constants, `out` writable.
            call(|| unsafe {
                ffi::MPI_Comm_split_type(
                    self.handle,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    key,
                    ffi::RSMPI_INFO_NULL,
                    &mut out,
                )
            }),
            "Comm_split_type",
        )?;
        Self::made(out)?
            .ok_or_else(|| Error::Internal("MPI_Comm_split_type gave no communicator".into()))
    }

    /// The largest tag MPI accepts on this communicator (`MPI_TAG_UB`).
    pub(crate) fn tag_ub(&self) -> Result<i32> {
        let mut val: *mut c_int = std::ptr::null_mut();
        let mut flag: c_int = 0;
        check(
            // SAFETY: MPI writes a pointer to the attribute's int into `val`.
            call(|| unsafe {
                ffi::MPI_Comm_get_attr(
                    self.handle,
                    ffi::MPI_TAG_UB as c_int,
                    (&mut val as *mut *mut c_int).cast::<c_void>(),
                    &mut flag,
                )
            }),
            "Comm_get_attr(MPI_TAG_UB)",
        )?;
        if flag == 0 || val.is_null() {
            // The standard's guaranteed minimum.
            return Ok(32767);
        }
        // SAFETY: MPI gave a pointer to its attribute value, valid while
        // MPI is initialized.
        Ok(unsafe { *val })
    }

    /// `MPI_Barrier`.
    pub(crate) fn barrier(&self) -> Result<()> {
        // SAFETY: a valid communicator.
        check(call(|| unsafe { ffi::MPI_Barrier(self.handle) }), "Barrier")
    }

    /// `MPI_Allreduce` of one `int` with `MPI_MIN`.
    pub(crate) fn allreduce_min(&self, v: i32) -> Result<i32> {
        let mut out: c_int = 0;
        check(
            // SAFETY: one int in, one int out; constant handles.
            call(|| unsafe {
                ffi::MPI_Allreduce(
                    (&v as *const c_int).cast(),
                    (&mut out as *mut c_int).cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    ffi::RSMPI_MIN,
                    self.handle,
                )
            }),
            "Allreduce",
        )?;
        Ok(out)
    }

    /// `recv = send` combined over every process with `op` on `count`
    /// elements of `dt` (`MPI_Allreduce`; MPI's own algorithm and its
    /// combining order, the same on every process).
    pub(crate) fn allreduce(
        &self,
        send: &[u8],
        recv: &mut [u8],
        count: usize,
        dt: ffi::MPI_Datatype,
        op: ffi::MPI_Op,
    ) -> Result<()> {
        if send.len() != recv.len() || send.as_ptr() == recv.as_ptr() {
            return Err(Error::Internal(
                "allreduce: send and receive buffers differ in length or alias".into(),
            ));
        }
        let n = self::count(count)?;
        check(
            // SAFETY: `send` and `recv` are distinct buffers of the same
            // length, which holds `count` elements of `dt` (the caller's
            // pairing of `dt` with the element type); `op` and `dt` are
            // predefined handles.
            call(|| unsafe {
                ffi::MPI_Allreduce(
                    send.as_ptr().cast(),
                    recv.as_mut_ptr().cast(),
                    n,
                    dt,
                    op,
                    self.handle,
                )
            }),
            "Allreduce",
        )
    }

    /// Every process's `v`, by rank (`MPI_Allgather` of an `i64`).
    pub(crate) fn allgather_i64(&self, v: i64) -> Result<Vec<i64>> {
        let n = self.size()? as usize;
        let mut out = vec![0i64; n];
        check(
            // SAFETY: one i64 in, `n` out, as MPI_INT64_T.
            call(|| unsafe {
                ffi::MPI_Allgather(
                    (&v as *const i64).cast(),
                    1,
                    ffi::RSMPI_INT64_T,
                    out.as_mut_ptr().cast(),
                    1,
                    ffi::RSMPI_INT64_T,
                    self.handle,
                )
            }),
            "Allgather",
        )?;
        Ok(out)
    }

    /// Every process's `mine`, concatenated by rank (`MPI_Allgather`);
    /// every process gives the same length.
    pub(crate) fn allgather_fixed(&self, mine: &[u8]) -> Result<Vec<u8>> {
        let n = count(mine.len())?;
        let size = usize::try_from(self.size()?).unwrap_or(0);
        let mut all = vec![0u8; mine.len() * size];
        let mut spare = [0u8; 1];
        let recv = recv_ptr(&mut all, &mut spare);
        check(
            // SAFETY: `mine` holds `n` bytes; `recv` holds `n` per process
            // (a spare byte when `n` is 0).
            call(|| unsafe {
                ffi::MPI_Allgather(
                    mine.as_ptr().cast(),
                    n,
                    bytes(),
                    recv,
                    n,
                    bytes(),
                    self.handle,
                )
            }),
            "Allgather",
        )?;
        Ok(all)
    }

    /// Every process's bytes, by rank (`MPI_Allgatherv`, lengths first).
    pub(crate) fn allgatherv(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let lens = self.allgather_i64(mine.len() as i64)?;
        let (counts, displs, total) = layout(&lens)?;
        let mut all = vec![0u8; total];
        let mut spare = [0u8; 1];
        let n = count(mine.len())?;
        let recv = recv_ptr(&mut all, &mut spare);
        check(
            // SAFETY: `mine` holds `n` bytes; `recv` holds the sum of
            // `counts` at `displs`, which agree on every process (gathered
            // above), or is a spare byte when that sum is 0.
            call(|| unsafe {
                ffi::MPI_Allgatherv(
                    mine.as_ptr().cast(),
                    n,
                    bytes(),
                    recv,
                    counts.as_ptr(),
                    displs.as_ptr(),
                    bytes(),
                    self.handle,
                )
            }),
            "Allgatherv",
        )?;
        Ok(split_at(&all, &counts, &displs))
    }

    /// The root's bytes on every process (`MPI_Bcast`, length first).
    pub(crate) fn bcast(&self, data: &mut Vec<u8>, root: i32) -> Result<()> {
        let mut len = data.len() as u64;
        check(
            // SAFETY: one u64 on every process.
            call(|| unsafe {
                ffi::MPI_Bcast(
                    (&mut len as *mut u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    root,
                    self.handle,
                )
            }),
            "Bcast",
        )?;
        let len = usize::try_from(len).map_err(|_| Error::Internal("bcast length".into()))?;
        data.resize(len, 0);
        let n = count(len)?;
        check(
            // SAFETY: `data` holds `n` bytes on every process.
            call(|| unsafe {
                ffi::MPI_Bcast(data.as_mut_ptr().cast(), n, bytes(), root, self.handle)
            }),
            "Bcast",
        )
    }

    /// Every process's bytes at `root`, by rank (`MPI_Gatherv`).
    pub(crate) fn gatherv(&self, mine: &[u8], root: i32) -> Result<Option<Vec<Vec<u8>>>> {
        // The root needs every length; the others only send theirs.
        let lens = self.allgather_i64(mine.len() as i64)?;
        let (counts, displs, total) = layout(&lens)?;
        let at_root = self.rank()? == root;
        let mut all = vec![0u8; if at_root { total } else { 0 }];
        let mut spare = [0u8; 1];
        let n = count(mine.len())?;
        let recv = recv_ptr(&mut all, &mut spare);
        check(
            // SAFETY: as in `allgatherv`; only the root's receive arguments
            // are read.
            call(|| unsafe {
                ffi::MPI_Gatherv(
                    mine.as_ptr().cast(),
                    n,
                    bytes(),
                    recv,
                    counts.as_ptr(),
                    displs.as_ptr(),
                    bytes(),
                    root,
                    self.handle,
                )
            }),
            "Gatherv",
        )?;
        Ok(at_root.then(|| split_at(&all, &counts, &displs)))
    }

    /// Piece `r` of the root's `pieces` to rank `r` (`MPI_Scatterv`).
    pub(crate) fn scatterv(&self, pieces: Option<&[Vec<u8>]>, root: i32) -> Result<Vec<u8>> {
        let at_root = self.rank()? == root;
        let mut flat = Vec::new();
        let mut lens = Vec::new();
        if at_root {
            let p = pieces.ok_or_else(|| Error::Internal("scatter root without data".into()))?;
            for piece in p {
                lens.push(piece.len() as u64);
                flat.extend_from_slice(piece);
            }
        }
        // Each process learns its own length from the root.
        let mut mine_len: u64 = 0;
        check(
            // SAFETY: one u64 per process, from `lens` at the root.
            call(|| unsafe {
                ffi::MPI_Scatter(
                    lens.as_ptr().cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    (&mut mine_len as *mut u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    root,
                    self.handle,
                )
            }),
            "Scatter",
        )?;
        let lens_i: Vec<i64> = lens.iter().map(|&l| l as i64).collect();
        let (counts, displs, _) = layout(&lens_i)?;
        let mut out = vec![0u8; mine_len as usize];
        let mut spare = [0u8; 1];
        let n = count(out.len())?;
        let recv = recv_ptr(&mut out, &mut spare);
        check(
            // SAFETY: the root's `flat` holds `counts` at `displs`; `recv`
            // holds this process's count (a spare byte for 0).
            call(|| unsafe {
                ffi::MPI_Scatterv(
                    flat.as_ptr().cast(),
                    counts.as_ptr(),
                    displs.as_ptr(),
                    bytes(),
                    recv,
                    n,
                    bytes(),
                    root,
                    self.handle,
                )
            }),
            "Scatterv",
        )?;
        Ok(out)
    }

    /// Piece `d` of `pieces` to rank `d`; returns the piece from every
    /// rank (`MPI_Alltoallv`, lengths first with `MPI_Alltoall`).
    pub(crate) fn alltoallv(&self, pieces: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let slens: Vec<i64> = pieces.iter().map(|p| p.len() as i64).collect();
        let mut rlens = vec![0i64; pieces.len()];
        check(
            // SAFETY: one i64 per process each way.
            call(|| unsafe {
                ffi::MPI_Alltoall(
                    slens.as_ptr().cast(),
                    1,
                    ffi::RSMPI_INT64_T,
                    rlens.as_mut_ptr().cast(),
                    1,
                    ffi::RSMPI_INT64_T,
                    self.handle,
                )
            }),
            "Alltoall",
        )?;
        let (sc, sd, _) = layout(&slens)?;
        let (rc, rd, rtotal) = layout(&rlens)?;
        let flat: Vec<u8> = pieces.concat();
        let mut all = vec![0u8; rtotal];
        let mut spare = [0u8; 1];
        let recv = recv_ptr(&mut all, &mut spare);
        check(
            // SAFETY: `flat` holds `sc` at `sd`, `recv` holds `rc` at `rd`
            // (or is a spare byte when they are all 0); every pair agrees
            // on its counts (exchanged above).
            call(|| unsafe {
                ffi::MPI_Alltoallv(
                    flat.as_ptr().cast(),
                    sc.as_ptr(),
                    sd.as_ptr(),
                    bytes(),
                    recv,
                    rc.as_ptr(),
                    rd.as_ptr(),
                    bytes(),
                    self.handle,
                )
            }),
            "Alltoallv",
        )?;
        Ok(split_at(&all, &rc, &rd))
    }

    /// `MPI_Abort` on this communicator.
    pub(crate) fn abort(&self, code: i32) {
        // SAFETY: a valid communicator; MPI ends the job.
        unsafe { ffi::MPI_Abort(self.handle, code) };
    }

    /// Starts sending `buf` (`MPI_Isend`, or `MPI_Issend` when `sync`).
    ///
    /// # Safety
    /// `buf` stays valid and unchanged until the request completes.
    pub(crate) unsafe fn isend(
        &self,
        buf: &[u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> Result<RawRequest> {
        count(buf.len())?;
        // SAFETY: the caller's contract; the length fits (checked).
        let (rc, req) = unsafe { self.start_send(buf, dest, tag, sync) };
        check(rc, "Isend")?;
        Ok(req)
    }

    /// [`RawComm::isend`] for a buffer of at most `c_int::MAX` bytes, with
    /// MPI's return code beside the request (a null one unless 0) rather
    /// than a `Result`: a value that small stays in registers, where a
    /// `Result` of this crate's error goes through memory, and reading it
    /// back right after its narrow stores stalls the processor (see
    /// docs/performance.md, "Store forwarding"). For the message path.
    ///
    /// # Safety
    /// As for [`RawComm::isend`]; `buf.len() <= c_int::MAX`.
    #[inline(always)]
    pub(crate) unsafe fn start_send(
        &self,
        buf: &[u8],
        dest: i32,
        tag: i32,
        sync: bool,
    ) -> (c_int, RawRequest) {
        debug_assert!(c_int::try_from(buf.len()).is_ok());
        let n = buf.len() as c_int;
        // SAFETY: as in `dup`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `buf` holds `n` bytes, valid until completion (caller).
        let rc = call(|| unsafe {
            if sync {
                ffi::MPI_Issend(
                    buf.as_ptr().cast(),
                    n,
                    bytes(),
                    dest,
                    tag,
                    self.handle,
                    &mut req,
                )
            } else {
                ffi::MPI_Isend(
                    buf.as_ptr().cast(),
                    n,
                    bytes(),
                    dest,
                    tag,
                    self.handle,
                    &mut req,
                )
            }
        });
        (
            rc,
            RawRequest {
                handle: req,
                kind: Kind::Send {
                    len: buf.len(),
                    to: dest,
                    tag,
                },
                cancelling: false,
            },
        )
    }

    /// Sends `buf` to `dest` with `tag`, blocking in MPI (`MPI_Send`;
    /// `sync`: `MPI_Ssend`).
    pub(crate) fn send(&self, buf: &[u8], dest: i32, tag: i32, sync: bool) -> Result<()> {
        let n = count(buf.len())?;
        let (p, h) = (buf.as_ptr().cast(), self.handle);
        // SAFETY: `buf` holds `n` bytes for the call.
        let rc = call(|| unsafe {
            if sync {
                ffi::MPI_Ssend(p, n, bytes(), dest, tag, h)
            } else {
                ffi::MPI_Send(p, n, bytes(), dest, tag, h)
            }
        });
        check(rc, if sync { "Ssend" } else { "Send" })
    }

    /// Receives into `buf` from `source` with `tag` (`MPI_Recv`),
    /// blocking in MPI; a longer message completes with `truncated` in
    /// its status, as [`RawRequest::test`] says.
    pub(crate) fn recv(&self, buf: &mut [u8], source: i32, tag: i32) -> Result<MpiStatus> {
        let n = count(buf.len())?;
        let mut spare = [0u8; 1];
        let cap = buf.len();
        let at = recv_ptr(buf, &mut spare);
        // SAFETY: as in `RawComm::improbe`.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: `at` is writable for `n` bytes; `st` is writable.
        let rc = call(|| unsafe {
            ffi::MPI_Recv(
                at,
                n,
                bytes(),
                mpi_source(source),
                mpi_tag(tag),
                self.handle,
                &mut st,
            )
        });
        if rc != 0 {
            if is_truncate(rc) {
                return truncated(&st, cap);
            }
            check(rc, "Recv")?;
        }
        MpiStatus::from(&st, false)
    }

    /// Starts receiving into the `len` bytes at `buf` (`MPI_Irecv`).
    ///
    /// # Safety
    /// `buf` is valid for `len` bytes of writes until the request
    /// completes.
    pub(crate) unsafe fn irecv(
        &self,
        buf: *mut u8,
        len: usize,
        source: i32,
        tag: i32,
    ) -> Result<RawRequest> {
        let n = count(len)?;
        // SAFETY: as in `dup`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        check(
            // SAFETY: `buf` is writable for `n` bytes until completion.
            call(|| unsafe {
                ffi::MPI_Irecv(
                    buf.cast(),
                    n,
                    bytes(),
                    mpi_source(source),
                    mpi_tag(tag),
                    self.handle,
                    &mut req,
                )
            }),
            "Irecv",
        )?;
        Ok(RawRequest {
            handle: req,
            kind: Kind::Recv(len),
            cancelling: false,
        })
    }

    /// Takes a matching message if there is one (`MPI_Improbe`).
    pub(crate) fn improbe(&self, source: i32, tag: i32) -> Result<Option<(RawMessage, MpiStatus)>> {
        let mut flag: c_int = 0;
        // SAFETY: as in `dup`.
        let mut msg = unsafe { ffi::RSMPI_MESSAGE_NULL };
        // SAFETY: a zeroed status is a valid value for MPI to overwrite.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        check(
            // SAFETY: valid communicator; all outputs writable.
            call(|| unsafe {
                ffi::MPI_Improbe(
                    mpi_source(source),
                    mpi_tag(tag),
                    self.handle,
                    &mut flag,
                    &mut msg,
                    &mut st,
                )
            }),
            "Improbe",
        )?;
        if flag == 0 {
            return Ok(None);
        }
        Ok(Some((RawMessage(msg), MpiStatus::from(&st, false)?)))
    }

    /// The status of a matching message if there is one (`MPI_Iprobe`).
    pub(crate) fn iprobe(&self, source: i32, tag: i32) -> Result<Option<MpiStatus>> {
        let mut flag: c_int = 0;
        // SAFETY: as in `improbe`.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        check(
            // SAFETY: valid communicator; outputs writable.
            call(|| unsafe {
                ffi::MPI_Iprobe(
                    mpi_source(source),
                    mpi_tag(tag),
                    self.handle,
                    &mut flag,
                    &mut st,
                )
            }),
            "Iprobe",
        )?;
        if flag == 0 {
            return Ok(None);
        }
        Ok(Some(MpiStatus::from(&st, false)?))
    }
}

/// An MPI window over memory this layer does not own (`MPI_Win_create`
/// on a [`RawComm`]), its errors returned, in a passive-target epoch on
/// every member from creation to drop (`MPI_Win_lock_all` with
/// `MPI_MODE_NOCHECK`): operations are allowed at any time and completed
/// by [`RawWin::flush`].
#[derive(Debug)]
pub(crate) struct RawWin {
    handle: ffi::MPI_Win,
}

// SAFETY: a window handle may be used from any thread (calls are
// serialised by `call` unless MPI is thread-multiple).
unsafe impl Send for RawWin {}
// SAFETY: as above; the handle is never changed after creation.
unsafe impl Sync for RawWin {}

impl Drop for RawWin {
    fn drop(&mut self) {
        // A panicking thread leaves the window to the job's end (the
        // universe's drop aborts it): freeing is collective, and the peers
        // may never come.
        if !finalized() && !std::thread::panicking() {
            // SAFETY: a window this layer created, in the epoch `create`
            // opened; nothing else frees it. MPI_Win_free is collective:
            // every member drops its window at the same point of the
            // program (the owner's contract, as for MPI).
            call(|| unsafe {
                ffi::MPI_Win_unlock_all(self.handle);
                ffi::MPI_Win_free(&mut self.handle);
            });
        }
    }
}

impl RawWin {
    /// `MPI_Win_create` over the `size` bytes at `base` (`disp_unit` bytes
    /// per displacement) on every member of `comm`, then
    /// `MPI_Win_lock_all(MPI_MODE_NOCHECK)` (collective).
    ///
    /// # Safety
    /// The memory stays valid for reads and writes by MPI (on behalf of
    /// any member) until the window is dropped.
    pub(crate) unsafe fn create(
        comm: &RawComm,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
    ) -> Result<RawWin> {
        let size = ffi::MPI_Aint::try_from(size).map_err(|_| Error::TooLarge {
            count: size as u64,
            element_size: 1,
        })?;
        let unit = count(disp_unit)?;
        // SAFETY: a constant handle.
        let mut handle = unsafe { ffi::RSMPI_WIN_NULL };
        check(
            // SAFETY: the caller keeps `size` bytes at `base` valid while
            // the window lives; `handle` is writable.
            call(|| unsafe {
                ffi::MPI_Win_create(
                    base.cast(),
                    size,
                    unit,
                    ffi::RSMPI_INFO_NULL,
                    comm.handle,
                    &mut handle,
                )
            }),
            "Win_create",
        )?;
        let win = RawWin { handle };
        check(
            // SAFETY: a window just made; the handler is a constant.
            call(|| unsafe { ffi::MPI_Win_set_errhandler(win.handle, ffi::RSMPI_ERRORS_RETURN) }),
            "Win_set_errhandler",
        )?;
        check(
            // SAFETY: a window just made, in no epoch yet.
            call(|| unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win.handle) }),
            "Win_lock_all",
        )?;
        Ok(win)
    }

    /// `MPI_Put` of the `len` bytes at `src` to displacement `disp` of
    /// `rank`; complete at the target after [`RawWin::flush`].
    ///
    /// # Safety
    /// `src` holds `len` bytes that stay unchanged until the flush; the
    /// target's window holds `len` bytes from `disp`.
    pub(crate) unsafe fn put(
        &self,
        src: *const u8,
        len: usize,
        rank: i32,
        disp: u64,
    ) -> Result<()> {
        let n = count(len)?;
        check(
            // SAFETY: the caller's guarantee; byte datatypes on both sides.
            call(|| unsafe {
                ffi::MPI_Put(
                    src.cast(),
                    n,
                    bytes(),
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    bytes(),
                    self.handle,
                )
            }),
            "Put",
        )
    }

    /// `MPI_Get` of `len` bytes from displacement `disp` of `rank` into
    /// `dst`; there after [`RawWin::flush`].
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and not otherwise accessed until
    /// the flush; the target's window holds `len` bytes from `disp`.
    pub(crate) unsafe fn get(&self, dst: *mut u8, len: usize, rank: i32, disp: u64) -> Result<()> {
        let n = count(len)?;
        check(
            // SAFETY: the caller's guarantee.
            call(|| unsafe {
                ffi::MPI_Get(
                    dst.cast(),
                    n,
                    bytes(),
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    bytes(),
                    self.handle,
                )
            }),
            "Get",
        )
    }

    /// `MPI_Accumulate` of `n` elements of `dt` at `src` into displacement
    /// `disp` of `rank` with `op`.
    ///
    /// # Safety
    /// As for [`RawWin::put`], with `n` elements of `dt`.
    pub(crate) unsafe fn accumulate(
        &self,
        src: *const u8,
        n: usize,
        dt: ffi::MPI_Datatype,
        rank: i32,
        disp: u64,
        op: ffi::MPI_Op,
    ) -> Result<()> {
        let n = count(n)?;
        check(
            // SAFETY: the caller's guarantee; predefined handles.
            call(|| unsafe {
                ffi::MPI_Accumulate(
                    src.cast(),
                    n,
                    dt,
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    dt,
                    op,
                    self.handle,
                )
            }),
            "Accumulate",
        )
    }

    /// `MPI_Fetch_and_op` of one element of `dt`, completed at once (the
    /// result is read here): the element at `disp` of `rank` before.
    ///
    /// # Safety
    /// `value` and `result` each hold one element of `dt`.
    pub(crate) unsafe fn fetch_and_op(
        &self,
        value: *const u8,
        result: *mut u8,
        dt: ffi::MPI_Datatype,
        rank: i32,
        disp: u64,
        op: ffi::MPI_Op,
    ) -> Result<()> {
        check(
            // SAFETY: the caller's guarantee; predefined handles.
            call(|| unsafe {
                ffi::MPI_Fetch_and_op(
                    value.cast(),
                    result.cast(),
                    dt,
                    rank,
                    disp as ffi::MPI_Aint,
                    op,
                    self.handle,
                )
            }),
            "Fetch_and_op",
        )?;
        self.flush(rank)
    }

    /// `MPI_Rput` of the `len` bytes at `src` to displacement `disp` of
    /// `rank`: complete (the origin reusable) when its request is; at the
    /// target after a flush.
    ///
    /// # Safety
    /// `src` holds `len` bytes that stay unchanged until the request
    /// completes; the target's window holds `len` bytes from `disp`.
    pub(crate) unsafe fn rput(
        &self,
        src: *const u8,
        len: usize,
        rank: i32,
        disp: u64,
    ) -> Result<RawRequest> {
        let n = count(len)?;
        // SAFETY: a constant handle.
        let mut handle = unsafe { ffi::RSMPI_REQUEST_NULL };
        check(
            // SAFETY: the caller's guarantee; `handle` is writable.
            call(|| unsafe {
                ffi::MPI_Rput(
                    src.cast(),
                    n,
                    bytes(),
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    bytes(),
                    self.handle,
                    &mut handle,
                )
            }),
            "Rput",
        )?;
        Ok(RawRequest::one_sided(handle, len, rank))
    }

    /// `MPI_Rget` of `len` bytes from displacement `disp` of `rank` into
    /// `dst`: there when its request completes.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and not otherwise accessed until
    /// the request completes; the target's window holds `len` bytes from
    /// `disp`.
    pub(crate) unsafe fn rget(
        &self,
        dst: *mut u8,
        len: usize,
        rank: i32,
        disp: u64,
    ) -> Result<RawRequest> {
        let n = count(len)?;
        // SAFETY: a constant handle.
        let mut handle = unsafe { ffi::RSMPI_REQUEST_NULL };
        check(
            // SAFETY: the caller's guarantee; `handle` is writable.
            call(|| unsafe {
                ffi::MPI_Rget(
                    dst.cast(),
                    n,
                    bytes(),
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    bytes(),
                    self.handle,
                    &mut handle,
                )
            }),
            "Rget",
        )?;
        Ok(RawRequest::one_sided(handle, len, rank))
    }

    /// `MPI_Get_accumulate` of `n` elements of `dt`: `result` gets the
    /// elements at `disp` of `rank` from before `op` combined `src` into
    /// them; completed at once.
    ///
    /// # Safety
    /// `src` holds `n` elements of `dt` (unless `op` is `MPI_NO_OP`),
    /// `result` has room for `n`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn get_accumulate(
        &self,
        src: *const u8,
        result: *mut u8,
        n: usize,
        dt: ffi::MPI_Datatype,
        rank: i32,
        disp: u64,
        op: ffi::MPI_Op,
    ) -> Result<()> {
        let n = count(n)?;
        check(
            // SAFETY: the caller's guarantee; predefined handles.
            call(|| unsafe {
                ffi::MPI_Get_accumulate(
                    src.cast(),
                    n,
                    dt,
                    result.cast(),
                    n,
                    dt,
                    rank,
                    disp as ffi::MPI_Aint,
                    n,
                    dt,
                    op,
                    self.handle,
                )
            }),
            "Get_accumulate",
        )?;
        self.flush(rank)
    }

    /// `MPI_Compare_and_swap` of one element of `dt`, completed at once:
    /// the element at `disp` of `rank` before (replaced by `value` if it
    /// equalled `compare`).
    ///
    /// # Safety
    /// `value`, `compare` and `result` each hold one element of `dt`.
    pub(crate) unsafe fn compare_and_swap(
        &self,
        value: *const u8,
        compare: *const u8,
        result: *mut u8,
        dt: ffi::MPI_Datatype,
        rank: i32,
        disp: u64,
    ) -> Result<()> {
        check(
            // SAFETY: the caller's guarantee; a predefined handle.
            call(|| unsafe {
                ffi::MPI_Compare_and_swap(
                    value.cast(),
                    compare.cast(),
                    result.cast(),
                    dt,
                    rank,
                    disp as ffi::MPI_Aint,
                    self.handle,
                )
            }),
            "Compare_and_swap",
        )?;
        self.flush(rank)
    }

    /// `MPI_Fetch_and_op` with `MPI_SUM` of one `i64` at `disp` of `rank`,
    /// completed at once: the element before.
    pub(crate) fn fetch_add_i64(&self, value: i64, rank: i32, disp: u64) -> Result<i64> {
        let mut out: i64 = 0;
        // SAFETY: one i64 each, as MPI_INT64_T.
        unsafe {
            self.fetch_and_op(
                (&value as *const i64).cast(),
                (&mut out as *mut i64).cast(),
                ffi::RSMPI_INT64_T,
                rank,
                disp,
                ffi::RSMPI_SUM,
            )
        }?;
        Ok(out)
    }

    /// `MPI_Win_flush`: this process's operations to `rank` are complete
    /// at the origin and at the target.
    pub(crate) fn flush(&self, rank: i32) -> Result<()> {
        check(
            // SAFETY: a window in its lock_all epoch.
            call(|| unsafe { ffi::MPI_Win_flush(rank, self.handle) }),
            "Win_flush",
        )
    }

    /// `MPI_Win_flush_local`: the origin buffers of this process's
    /// operations to `rank` may be reused (the operations may still be on
    /// their way to the target).
    pub(crate) fn flush_local(&self, rank: i32) -> Result<()> {
        check(
            // SAFETY: a window in its lock_all epoch.
            call(|| unsafe { ffi::MPI_Win_flush_local(rank, self.handle) }),
            "Win_flush_local",
        )
    }

    /// `MPI_Win_flush_all`.
    pub(crate) fn flush_all(&self) -> Result<()> {
        check(
            // SAFETY: as above.
            call(|| unsafe { ffi::MPI_Win_flush_all(self.handle) }),
            "Win_flush_all",
        )
    }

    /// `MPI_Win_sync`: the window's memory and what MPI's operations
    /// stored agree for this process's loads and stores.
    pub(crate) fn sync(&self) -> Result<()> {
        check(
            // SAFETY: as above.
            call(|| unsafe { ffi::MPI_Win_sync(self.handle) }),
            "Win_sync",
        )
    }
}

/// A matched message of [`RawComm::improbe`], to receive with
/// [`RawMessage::recv`].
#[derive(Debug)]
pub(crate) struct RawMessage(ffi::MPI_Message);

impl RawMessage {
    /// Receives the message into `buf`, at most `buf.len()` bytes
    /// (`MPI_Mrecv`); `len` is the message's length (from its probe).
    pub(crate) fn recv(mut self, buf: &mut [u8], len: usize) -> Result<()> {
        if len > buf.len() {
            // Take the whole message into a scratch buffer and keep its
            // head: MPI would report the truncation as an error without
            // delivering the bytes the status promises.
            let mut tmp = vec![0u8; len];
            self.recv_exact(&mut tmp)?;
            let n = buf.len();
            buf.copy_from_slice(&tmp[..n]);
            return Ok(());
        }
        self.recv_exact(&mut buf[..len])
    }

    fn recv_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        let n = count(buf.len())?;
        check(
            // SAFETY: `buf` holds `n` bytes, the message's length.
            call(|| unsafe {
                ffi::MPI_Mrecv(
                    buf.as_mut_ptr().cast(),
                    n,
                    bytes(),
                    &mut self.0,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            }),
            "Mrecv",
        )
    }
}

/// A pending MPI request.
#[derive(Debug)]
pub(crate) struct RawRequest {
    handle: ffi::MPI_Request,
    /// A send or a receive, with its length.
    kind: Kind,
    /// Whether a cancel was asked for: only then does a completed
    /// request's status say more than a plain completion.
    cancelling: bool,
}

/// What a [`RawRequest`] does.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A send of `len` bytes to rank `to` with `tag` (a one-sided request:
    /// its target, tag 0): its status, without asking MPI (for a send,
    /// MPI's says no more).
    Send { len: usize, to: i32, tag: i32 },
    /// A receive into a buffer of this many bytes.
    Recv(usize),
}

// SAFETY: a request handle may be tested from any thread (serialised by
// `call` unless MPI is thread-multiple).
unsafe impl Send for RawRequest {}

impl RawRequest {
    /// The request of a one-sided transfer (`MPI_Rput`, `MPI_Rget`) of
    /// `len` bytes with `rank`: a send's kind, as its status (undefined
    /// for one-sided requests) is not read for a count.
    fn one_sided(handle: ffi::MPI_Request, len: usize, rank: i32) -> RawRequest {
        RawRequest {
            handle,
            kind: Kind::Send {
                len,
                to: rank,
                tag: 0,
            },
            cancelling: false,
        }
    }

    /// Its status once complete (`MPI_Test`); the request is then gone.
    ///
    /// A receive of a message longer than its buffer completes with
    /// `truncated` in its status rather than as an error: MPI reports it
    /// as `MPI_ERR_TRUNCATE` and frees the request (Open MPI and MPICH
    /// alike). What MPI tells of it differs: Open MPI delivers the
    /// buffer's worth of the message and counts the whole message in the
    /// status; MPICH delivers nothing, and its count is the message's
    /// length for long messages only. The status keeps what is known:
    /// `len` the bytes delivered (the buffer's length under Open MPI, 0
    /// otherwise), `truncated` MPI's count when it exceeds the buffer, else
    /// the least the message can have been (the buffer's length + 1).
    pub(crate) fn test(&mut self) -> Result<Option<MpiStatus>> {
        let mut flag: c_int = 0;
        // SAFETY: as in `RawComm::improbe`.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: a request MPI gave; outputs writable.
        let rc = call(|| unsafe { ffi::MPI_Test(&mut self.handle, &mut flag, &mut st) });
        if rc != 0 {
            if let Kind::Recv(cap) = self.kind {
                if is_truncate(rc) {
                    return truncated(&st, cap).map(Some);
                }
            }
            check(rc, "Test")?;
        }
        if flag == 0 {
            return Ok(None);
        }
        // A send's status has nothing to tell but its length, and only a
        // request asked to cancel can have been cancelled: the common
        // completions skip those MPI calls (the 8-byte remote message rate
        // is MPI calls).
        let mut cancelled: c_int = 0;
        if self.cancelling {
            // SAFETY: a status MPI just wrote.
            unsafe { ffi::MPI_Test_cancelled(&st, &mut cancelled) };
        }
        if let (Kind::Send { len, to, tag }, 0) = (self.kind, cancelled) {
            return Ok(Some(MpiStatus::sent(len, to, tag)));
        }
        Ok(Some(MpiStatus::from(&st, cancelled != 0)?))
    }

    /// Blocks in MPI until a send completes (`MPI_Wait`), when that is
    /// allowed: a send never asked to cancel, with MPI thread-multiple
    /// (no serialising lock held meanwhile). `None` otherwise: test it.
    #[inline]
    pub(crate) fn wait_send(&mut self) -> Result<Option<MpiStatus>> {
        let Kind::Send { len, to, tag } = self.kind else {
            return Ok(None);
        };
        if self.cancelling || !thread_multiple() {
            return Ok(None);
        }
        // MPI's status of a send tells nothing the request does not know;
        // ignored, so that nothing reads back what MPI just wrote.
        check(
            // SAFETY: a request MPI gave; `MPI_STATUS_IGNORE` is allowed.
            unsafe { ffi::MPI_Wait(&mut self.handle, ffi::RSMPI_STATUS_IGNORE) },
            "Wait",
        )?;
        Ok(Some(MpiStatus::sent(len, to, tag)))
    }

    /// Tests until complete, spinning first, then yielding between tests
    /// (so that other threads may call MPI, and more ranks than cores
    /// progress); its status.
    pub(crate) fn wait_polling(&mut self) -> Result<MpiStatus> {
        let mut polls = 0u32;
        loop {
            if let Some(st) = self.test()? {
                return Ok(st);
            }
            if polls < super::comm::SPIN_POLLS {
                polls += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Asks MPI to cancel the request (`MPI_Cancel`); complete it with
    /// [`RawRequest::test`] as usual.
    pub(crate) fn cancel(&mut self) -> Result<()> {
        self.cancelling = true;
        // SAFETY: a request MPI gave.
        check(
            call(|| unsafe { ffi::MPI_Cancel(&mut self.handle) }),
            "Cancel",
        )
    }
}

/// Whether the MPI library is Open MPI (asked once).
pub(crate) fn open_mpi() -> bool {
    static OPEN_MPI: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OPEN_MPI
        .get_or_init(|| ::mpi::environment::library_version().is_ok_and(|v| v.contains("Open MPI")))
}

/// The status of a receive into `cap` bytes whose message was longer
/// (see [`RawRequest::test`]): Open MPI delivered the buffer's worth and
/// counts the message; MPICH delivered nothing, and its count is the
/// message's length only when it exceeds the buffer.
fn truncated(st: &ffi::MPI_Status, cap: usize) -> Result<MpiStatus> {
    let mut out = MpiStatus::from(st, false)?;
    let told = out.len;
    out.len = if open_mpi() { cap } else { 0 };
    out.truncated = Some(told.max(cap + 1) as u64);
    Ok(out)
}

/// Whether MPI's error code `rc` is of class `MPI_ERR_TRUNCATE`.
fn is_truncate(rc: c_int) -> bool {
    let mut class: c_int = 0;
    // SAFETY: any error code may be asked for its class; `class` is
    // writable.
    let ok = unsafe { ffi::MPI_Error_class(rc, &mut class) } == 0;
    ok && class == ffi::MPI_ERR_TRUNCATE as c_int
}

/// What this layer keeps of an `MPI_Status`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MpiStatus {
    pub source: i32,
    pub tag: i32,
    pub len: usize,
    pub cancelled: bool,
    /// For a receive whose message was longer than its buffer: the
    /// message's length (see [`RawRequest::test`]).
    pub truncated: Option<u64>,
}

impl MpiStatus {
    /// A completed send's status, as the node's engine gives one: the
    /// destination as its source, the send's tag and length.
    fn sent(len: usize, to: i32, tag: i32) -> MpiStatus {
        MpiStatus {
            source: to,
            tag,
            len,
            cancelled: false,
            truncated: None,
        }
    }

    #[inline]
    fn from(st: &ffi::MPI_Status, cancelled: bool) -> Result<MpiStatus> {
        Ok(MpiStatus {
            source: st.MPI_SOURCE,
            tag: st.MPI_TAG,
            len: count_of(st)?,
            cancelled,
            truncated: None,
        })
    }
}

/// Where this library's `MPI_Status` keeps the count of bytes received.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CountAt {
    /// Open MPI: a `size_t` of bytes after four `int`s.
    SizeAt16,
    /// MPICH: the low 32 bits in the first `int`, the high ones above the
    /// cancelled bit of the second.
    SplitAt0,
    /// Neither: ask MPI (`MPI_Get_count`).
    Ask,
}

/// The count of bytes a receive's status reports. `MPI_Get_count` costs
/// about as much as hmpi's whole share of a small remote receive, so the
/// count is read from the status itself where its layout is recognised:
/// once, by asking MPI to set known counts into a status
/// (`MPI_Status_set_elements`) and checking where they land against
/// `MPI_Get_count`; a library laid out otherwise is asked every time.
#[inline]
fn count_of(st: &ffi::MPI_Status) -> Result<usize> {
    static AT: std::sync::OnceLock<CountAt> = std::sync::OnceLock::new();
    let at = *AT.get_or_init(|| {
        [CountAt::SizeAt16, CountAt::SplitAt0]
            .into_iter()
            .find(|&c| {
                [0, 7, 0x1234_5678].iter().all(|&n: &c_int| {
                    // SAFETY: as in `RawComm::improbe`.
                    let mut t: ffi::MPI_Status = unsafe { std::mem::zeroed() };
                    // SAFETY: `t` is a status of ours to write.
                    let set = unsafe { ffi::MPI_Status_set_elements(&mut t, bytes(), n) };
                    set == 0
                        && read_count(&t, c) == Some(n as usize)
                        && ask_count(&t).ok() == Some(n as usize)
                })
            })
            .unwrap_or(CountAt::Ask)
    });
    match read_count(st, at) {
        Some(n) => Ok(n),
        None => ask_count(st),
    }
}

/// The count where `at` says, if the status is large enough to hold it.
#[inline]
fn read_count(st: &ffi::MPI_Status, at: CountAt) -> Option<usize> {
    let p = (st as *const ffi::MPI_Status).cast::<u8>();
    let size = std::mem::size_of::<ffi::MPI_Status>();
    match at {
        CountAt::SizeAt16 if size >= 16 + std::mem::size_of::<usize>() => {
            // SAFETY: inside the status (checked), read unaligned.
            Some(unsafe { p.add(16).cast::<usize>().read_unaligned() })
        }
        CountAt::SplitAt0 if size >= 8 => {
            // SAFETY: inside the status (checked), read unaligned.
            let (lo, hi) = unsafe {
                (
                    p.cast::<u32>().read_unaligned(),
                    p.add(4).cast::<u32>().read_unaligned(),
                )
            };
            usize::try_from(u64::from(lo) | u64::from(hi >> 1) << 32).ok()
        }
        _ => None,
    }
}

/// `MPI_Get_count` in bytes.
fn ask_count(st: &ffi::MPI_Status) -> Result<usize> {
    let mut n: c_int = 0;
    check(
        // SAFETY: a status MPI wrote; counted in bytes.
        unsafe { ffi::MPI_Get_count(st, bytes(), &mut n) },
        "Get_count",
    )?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Counts and displacements for pieces of `lens` bytes, and their sum.
fn layout(lens: &[i64]) -> Result<(Vec<c_int>, Vec<c_int>, usize)> {
    let mut counts = Vec::with_capacity(lens.len());
    let mut displs = Vec::with_capacity(lens.len());
    let mut at: usize = 0;
    for &l in lens {
        let l = usize::try_from(l).map_err(|_| Error::Internal("negative length".into()))?;
        counts.push(count(l)?);
        displs.push(count(at)?);
        at += l;
    }
    count(at)?;
    Ok((counts, displs, at))
}

/// `all` cut into its pieces.
fn split_at(all: &[u8], counts: &[c_int], displs: &[c_int]) -> Vec<Vec<u8>> {
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| all[d as usize..(d + c) as usize].to_vec())
        .collect()
}
