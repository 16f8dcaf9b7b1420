//! The kernel-assisted single copy: the receiver reads a peer's private
//! memory with Linux cross-memory attach (`process_vm_readv`).
//!
//! A send buffer outside the node heap (stack, statics, the system
//! allocator) cannot be read by the receiver through the shared mapping.
//! When the receiver may read the sender's address space (same user, and
//! with Yama's `ptrace_scope = 1` a declared tracer), the envelope carries
//! the buffer's address in the sender's address space, the receiver finds
//! the sender's pid in the sender's [`VciShared`], and it copies once with
//! `process_vm_readv` ([`read`]); then it completes the envelope and rings
//! the sender, whose request finishes (as for the single copy, see
//! `single_copy`).
//!
//! Whether a rank may read a peer is found out once per peer when the
//! endpoint is created ([`can_read`] on the peer's VCI magic) and recorded
//! in the reader's CMA table (one byte per rank, in its VCI 0's shared
//! part), which senders consult to choose the protocol
//! ([`Endpoint::kernel_assisted_to`]). A peer that cannot be read (`EPERM`,
//! `ENOSYS` under a seccomp filter, …) gets two copy for good
//! (`two_copy`); so does one whose read fails later. `HMPI_CMA=0`
//! turns it off. (Also reachable as `vci::cma`, its former name.)
//!
//! # Example
//! ```
//! let x = 0x5a5a_1234_u32;
//! let me = std::process::id();
//! // Reading one's own memory is always allowed.
//! assert!(vci::kernel_assisted::can_read(me, &x as *const u32 as u64, &x.to_ne_bytes()));
//! let mut y = [0u8; 4];
//! // SAFETY: `y` is a valid 4-byte buffer; the source is this process's `x`.
//! unsafe { vci::kernel_assisted::read(me, &x as *const u32 as u64, y.as_mut_ptr(), 4) }.unwrap();
//! assert_eq!(u32::from_ne_bytes(y), x);
//! // The former name still works.
//! assert!(vci::cma::can_read(me, &x as *const u32 as u64, &x.to_ne_bytes()));
//! ```

use crate::endpoint::Endpoint;
use crate::envelope::Envelope;
use crate::request::StatusError;
use crate::vci::{Vci, VciShared};
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

/// Reads `len` bytes at `remote` in process `pid` into `local`, looping on
/// partial reads.
///
/// # Safety
///
/// `local` is valid for `len` bytes of writes and not otherwise in use.
pub unsafe fn read(pid: u32, remote: u64, local: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let liov = libc::iovec {
            // SAFETY: `done < len`: inside the local buffer.
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: len - done,
        };
        let riov = libc::iovec {
            iov_base: (remote + done as u64) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec inside the caller's buffer (see above),
        // one remote iovec that the kernel checks against the peer's
        // address space; no flags.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &liov, 1, &riov, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        done += n as usize;
    }
    Ok(())
}

/// Whether this process may read `expect.len()` bytes at `remote` in
/// process `pid`, and finds `expect` there.
pub fn can_read(pid: u32, remote: u64, expect: &[u8]) -> bool {
    let mut buf = vec![0u8; expect.len()];
    // SAFETY: `buf` is a fresh buffer of the right length.
    unsafe { read(pid, remote, buf.as_mut_ptr(), buf.len()) }.is_ok() && buf == expect
}

/// Lets the launcher (this process's parent) and its descendants — the
/// job's other ranks — read this process's memory where Yama restricts
/// ptrace to descendants (`ptrace_scope = 1`). Without Yama this does
/// nothing (the call fails with `EINVAL`, which is ignored).
pub(crate) fn allow_job_to_read() {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    if parent > 1 {
        // SAFETY: PR_SET_PTRACER takes a pid and ignores the other
        // arguments; failure is harmless.
        unsafe { libc::prctl(libc::PR_SET_PTRACER, parent as libc::c_ulong, 0, 0, 0) };
    }
}

/// CMA table entry: the owner can read that rank's memory.
pub(crate) const CMA_YES: u8 = 1;
/// CMA table entry: it cannot (for good).
pub(crate) const CMA_NO: u8 = 2;

impl VciShared {
    fn cma_entry(&self, rank: u32) -> Option<&AtomicU8> {
        if self.cma_from == 0 || rank >= self.ranks {
            return None;
        }
        // SAFETY: the table holds `ranks` AtomicU8 in the owner's arena,
        // allocated before publication and never freed.
        Some(unsafe { &*(self.cma_from as *const AtomicU8).add(rank as usize) })
    }

    /// Whether the owner can read rank `rank`'s memory (as far as it knows).
    pub(crate) fn can_read_rank(&self, rank: u32) -> bool {
        // SYNC POINT: Acquire pairs with the Release store in
        // `set_can_read`; the entry carries no data, the ordering only
        // keeps the answer consistent with the probe that produced it.
        self.cma_entry(rank)
            .is_some_and(|e| e.load(Ordering::Acquire) == CMA_YES)
    }

    /// Records whether the owner (the caller) can read rank `rank`.
    pub(crate) fn set_can_read(&self, rank: u32, yes: bool) {
        if let Some(e) = self.cma_entry(rank) {
            // SYNC POINT: Release pairs with the Acquire in `can_read_rank`.
            e.store(if yes { CMA_YES } else { CMA_NO }, Ordering::Release);
        }
    }
}

impl Endpoint {
    /// Whether a send of a private buffer (outside the node heap, above
    /// `eager_max`) to `dest` uses the kernel-assisted single copy: CMA is
    /// on here and `dest` found at start-up that it can read this process.
    /// `false` for an invalid rank.
    pub fn kernel_assisted_to(&self, dest: i32) -> bool {
        self.config.cma
            && self
                .check_rank(dest)
                .is_ok_and(|d| self.peer0(d).can_read_rank(self.rank))
    }
}

impl Vci {
    /// The kernel-assisted copy of envelope `e`'s first `n` bytes into
    /// `buf`: `process_vm_readv` from the sender's buffer. On failure the
    /// sender gets two copy from now on, and the error is returned for
    /// the receive's status.
    ///
    /// # Safety
    ///
    /// `e` is a kernel-assisted envelope this VCI popped and has not
    /// completed, with at least `n` bytes; `buf` is valid for `n` bytes of
    /// writes (and not otherwise in use).
    #[inline(always)]
    pub(crate) unsafe fn read_kernel_assisted(
        &self,
        e: &Envelope,
        buf: *mut u8,
        n: usize,
    ) -> Option<StatusError> {
        let mut error = None;
        // SAFETY: `buf` is valid for `cap >= n` bytes (caller's
        // contract); the source is the sender's buffer in its
        // address space, borrowed by its pending request until
        // we complete the envelope.
        // SAFETY: `reply` is the sender's VciShared, never freed.
        let pid = unsafe { &*(e.reply() as *const VciShared) }.pid();
        // SAFETY: as said above.
        if let Err(err) = unsafe { read(pid, e.data(), buf, n) } {
            // The probe at start-up said yes; the kernel now says
            // no (the sender changed credentials, or died).
            // Use two copy for this sender from now on and
            // report the failure in the receive's status.
            self.shared.set_can_read(e.source(), false);
            error = Some(StatusError::Transfer {
                errno: err.raw_os_error().unwrap_or(0),
            });
        }
        error
    }
}
