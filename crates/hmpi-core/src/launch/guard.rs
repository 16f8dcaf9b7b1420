//! The job's guard: a small process that kills every rank and every rank's
//! descendant when the launcher ends, whichever way it ends (`kill -9`
//! included).
//!
//! The launcher forks the guard before any rank starts. The guard leads a
//! new process group, and every rank joins that group, so the group holds
//! the whole job: ranks and whatever they start (unless a descendant leaves
//! the group itself with `setsid` or `setpgid`). The guard then blocks in
//! `read(2)` on a pipe whose only write end the launcher holds. When the
//! launcher closes it ([`Guard::finish`]) or dies, the read returns end of
//! file and the guard sends `SIGKILL` to its group, itself included.
//! `PR_SET_PDEATHSIG` on each rank (set by the launcher) covers the
//! moments before a rank has joined the group.
//!
//! The guard is a fork of a process that may have other threads, so it
//! makes only async-signal-safe system calls and never returns into Rust
//! code of the parent: no allocation, no lock.
//!
//! # Example
//! ```ignore
//! let guard = Guard::start()?;          // before the first rank
//! cmd.process_group(guard.pgid());      // each rank joins its group
//! guard.signal(libc::SIGTERM);          // every rank and descendant
//! guard.finish();                       // kills what is left, reaps the guard
//! ```

use nix::sys::signal::{killpg, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::{ForkResult, Pid};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// A running guard. Dropping it is [`Guard::finish`].
pub(crate) struct Guard {
    pid: Pid,
    /// The launcher's end of the pipe; closing it releases the guard.
    release: Option<OwnedFd>,
    reaped: bool,
}

impl Guard {
    /// Forks the guard and makes it the leader of a new process group.
    pub(crate) fn start() -> io::Result<Guard> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // SAFETY: the child runs only `guard_main`, which makes
        // async-signal-safe system calls and never returns.
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Child => guard_main(read.as_raw_fd()),
            ForkResult::Parent { child } => {
                drop(read);
                // The guard does the same; whichever runs first makes the
                // group, and it exists before any rank is spawned. An error
                // means the guard died already: the ranks' setpgid then
                // fails and so does the launch.
                let _ = nix::unistd::setpgid(child, child);
                Ok(Guard {
                    pid: child,
                    release: Some(write),
                    reaped: false,
                })
            }
        }
    }

    /// The process group of the job (the guard's pid).
    pub(crate) fn pgid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Sends `sig` to the whole job: every rank and its descendants. The
    /// guard ignores every signal but `SIGKILL`, which ends it too (the
    /// launcher is then tearing the job down already).
    pub(crate) fn signal(&self, sig: Signal) {
        if !self.reaped {
            // The group exists while the guard is unreaped, so its id
            // cannot name another group.
            let _ = killpg(self.pid, sig);
        }
    }

    /// Releases the guard, which kills what is left of the job, and reaps
    /// it. Idempotent.
    pub(crate) fn finish(&mut self) {
        drop(self.release.take());
        if self.reaped {
            return;
        }
        loop {
            // Raw libc: the status is not needed, and nix's WaitStatus
            // cannot represent every signal the guard may die of.
            // SAFETY: a null status pointer is allowed; waiting for one pid
            // never takes another job's child.
            let r = unsafe { libc::waitpid(self.pid.as_raw(), std::ptr::null_mut(), 0) };
            if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        self.reaped = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The guard's whole life, in the forked child.
fn guard_main(release: RawFd) -> ! {
    // The parent's handlers would write to its wake-up pipes; the terminal
    // and the launcher's forwarding must not end the guard before the
    // ranks. (`sigaction` is async-signal-safe; the handlers here are the
    // constants SIG_IGN and SIG_DFL.)
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        // SAFETY: SIG_IGN is not a function of ours to be called.
        let _ = unsafe { nix::sys::signal::sigaction(sig, &ignore) };
    }
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: as above, with SIG_DFL.
    let _ = unsafe { nix::sys::signal::sigaction(Signal::SIGCHLD, &default) };
    // Unblock everything the forking thread had blocked.
    let _ = SigSet::empty().thread_set_mask();
    close_other_fds(release);
    let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: `release` is the read end of the pipe, open in this
        // process (not closed by `close_other_fds`) and owned by nothing
        // else here.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(release) };
        match nix::unistd::read(fd, &mut byte) {
            Err(nix::errno::Errno::EINTR) | Ok(1..) => continue,
            _ => break, // end of file: the launcher is done or dead
        }
    }
    let _ = killpg(Pid::from_raw(0), Signal::SIGKILL);
    // Only reached if the signal could not be sent.
    // SAFETY: _exit ends the process without running the parent's atexit
    // handlers or destructors (raw libc: nix has no _exit).
    unsafe { libc::_exit(0) }
}

/// Closes every descriptor but `keep`: the guard must not hold the write
/// ends of other pipes (its own launcher's, other jobs' output pipes, the
/// launcher's own standard output) open after their owners close them.
fn close_other_fds(keep: RawFd) {
    let keep = keep as libc::c_uint;
    // Raw libc: nix has no close_range (Linux 5.9). Each call is one
    // system call, async-signal-safe.
    // SAFETY: close_range only closes descriptors; none is in use by Rust
    // code in this process, which runs nothing else.
    let closed = unsafe {
        (keep == 0 || libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) == 0)
            && libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32) == 0
    };
    if !closed {
        // An older kernel: close the usual range one by one.
        for fd in 0..4096 {
            if fd != keep as RawFd {
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
        }
    }
}
