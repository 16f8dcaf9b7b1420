//! Window memory outside the node heap (a stack, a static, memory from
//! before the heap existed): reached in the target's address space with
//! Linux cross-memory attach (`process_vm_readv` / `process_vm_writev`),
//! still without the target's participation.
//!
//! A transfer is a list of `(remote address, length)` segments of the
//! target and one contiguous local buffer holding their bytes in order
//! (the packed form of a datatype's elements).

use crate::error::{Error, Result};

/// Remote segments per system call (the kernel's `IOV_MAX`).
const IOV_MAX: usize = 1024;

fn os_error(what: &str, pid: u32, e: std::io::Error) -> Error {
    Error::RmaRange {
        reason: format!(
            "{what} of process {pid}'s window memory outside the node heap failed: {e} (the \
             window memory must be readable with process_vm_readv: same user, and ptrace \
             allowed)"
        ),
    }
}

/// Moves the bytes of `segs` (in process `pid`) to or from `local`, which
/// holds exactly their total length.
///
/// # Safety
/// `local` is valid for `len` bytes (writable when reading); the segments
/// lie in the target's window (the kernel checks that they are mapped).
unsafe fn transfer(pid: u32, segs: &[(u64, usize)], local: *mut u8, write: bool) -> Result<()> {
    let (mut i, mut within, mut at) = (0usize, 0usize, 0usize);
    let mut riov: Vec<libc::iovec> = Vec::with_capacity(segs.len().min(IOV_MAX));
    while i < segs.len() {
        riov.clear();
        let mut batch = 0usize;
        let mut k = i;
        let mut skip = within;
        while k < segs.len() && riov.len() < IOV_MAX {
            let (addr, len) = segs[k];
            if len > skip {
                riov.push(libc::iovec {
                    iov_base: (addr as usize + skip) as *mut libc::c_void,
                    iov_len: len - skip,
                });
                batch += len - skip;
            }
            skip = 0;
            k += 1;
        }
        if batch == 0 {
            return Ok(());
        }
        let liov = libc::iovec {
            // SAFETY: `at + batch` is at most the total length of `local`.
            iov_base: unsafe { local.add(at) }.cast(),
            iov_len: batch,
        };
        // SAFETY: one local iovec inside the caller's buffer; remote iovecs
        // the kernel checks against the target's address space; no flags.
        let n = unsafe {
            if write {
                libc::process_vm_writev(
                    pid as libc::pid_t,
                    &liov,
                    1,
                    riov.as_ptr(),
                    riov.len() as _,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid as libc::pid_t,
                    &liov,
                    1,
                    riov.as_ptr(),
                    riov.len() as _,
                    0,
                )
            }
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_error(if write { "a write" } else { "a read" }, pid, e));
        }
        if n == 0 {
            return Err(os_error(
                "a transfer",
                pid,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        // Advance by the bytes moved (a partial transfer stops at a
        // segment boundary or inside one).
        let mut moved = n as usize;
        at += moved;
        while moved > 0 {
            let left = segs[i].1 - within;
            if moved >= left {
                moved -= left;
                i += 1;
                within = 0;
            } else {
                within += moved;
                moved = 0;
            }
        }
        while i < segs.len() && segs[i].1 == within {
            i += 1;
            within = 0;
        }
    }
    Ok(())
}

/// Writes `data` over the segments `segs` of process `pid`.
pub(crate) fn write(pid: u32, segs: &[(u64, usize)], data: &[u8]) -> Result<()> {
    debug_assert_eq!(segs.iter().map(|s| s.1).sum::<usize>(), data.len());
    // SAFETY: `data` holds the segments' total length; it is only read
    // (the cast to `*mut` is for the shared transfer loop, which reads from
    // it when writing).
    unsafe { transfer(pid, segs, data.as_ptr().cast_mut(), true) }
}

/// Reads the segments `segs` of process `pid` into `out`.
pub(crate) fn read(pid: u32, segs: &[(u64, usize)], out: &mut [u8]) -> Result<()> {
    debug_assert_eq!(segs.iter().map(|s| s.1).sum::<usize>(), out.len());
    // SAFETY: `out` holds the segments' total length and is ours to write.
    unsafe { transfer(pid, segs, out.as_mut_ptr(), false) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // Miri does not emulate process_vm_readv/writev
    fn segments_of_this_process_round_trip() {
        let me = std::process::id();
        let mut a = [0u8; 16];
        let base = a.as_mut_ptr() as u64;
        let segs = [(base + 1, 3), (base + 8, 0), (base + 10, 5)];
        write(me, &segs, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(a, [0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 4, 5, 6, 7, 8, 0]);
        let mut out = [0u8; 8];
        read(me, &segs, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri does not emulate process_vm_readv/writev
    fn an_unmapped_address_is_an_error() {
        let me = std::process::id();
        let mut out = [0u8; 4];
        assert!(matches!(
            read(me, &[(8, 4)], &mut out),
            Err(Error::RmaRange { .. })
        ));
    }
}
