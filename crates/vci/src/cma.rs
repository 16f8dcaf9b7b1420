//! Kernel-assisted single copy: reading a peer's private memory with
//! Linux cross-memory attach (`process_vm_readv`).
//!
//! A send buffer outside the node heap (stack, statics, the system
//! allocator) cannot be read by the receiver through the shared mapping.
//! When the receiver may read the sender's address space (same user, and
//! with Yama's `ptrace_scope = 1` a declared tracer), the envelope carries
//! the sender's pid and the buffer's address and the receiver copies once
//! with `process_vm_readv`. Whether a rank may read a peer is found out once
//! per peer when the endpoint is created ([`can_read`] on the peer's VCI
//! magic); a peer that cannot be read (`EPERM`, `ENOSYS` under a seccomp
//! filter, …) gets two copy for good. `HMPI_CMA=0` turns it off.
//!
//! # Example
//! ```
//! let x = 0x5a5a_1234_u32;
//! let me = std::process::id();
//! // Reading one's own memory is always allowed.
//! assert!(vci::cma::can_read(me, &x as *const u32 as u64, &x.to_ne_bytes()));
//! let mut y = [0u8; 4];
//! // SAFETY: `y` is a valid 4-byte buffer; the source is this process's `x`.
//! unsafe { vci::cma::read(me, &x as *const u32 as u64, y.as_mut_ptr(), 4) }.unwrap();
//! assert_eq!(u32::from_ne_bytes(y), x);
//! ```

use std::io;

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
