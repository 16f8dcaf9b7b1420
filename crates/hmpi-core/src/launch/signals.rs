//! Waking a job's monitor on `SIGCHLD`, `SIGINT`, `SIGTERM` and `SIGHUP`
//! without busy polling: one self-pipe per running job.
//!
//! Several jobs may run at once in one process (tests run in parallel
//! threads), so the handlers are process-wide and shared: each job registers
//! the write end of its pipe in a fixed table of slots ([`WAKE_FDS`]); the
//! handler writes one byte to every registered pipe and, for a terminating
//! signal, records the signal number in the slot ([`RECEIVED`]). The first
//! registration installs the handlers and the last one restores the
//! dispositions found before, so a process that runs no job keeps its own.
//!
//! The handler only loads and stores lock-free atomics and calls `write(2)`,
//! all async-signal-safe. A slot's pipe is closed only after the slot is
//! cleared *and* no handler is running ([`IN_HANDLER`]), so a handler never
//! writes to a descriptor that was closed (and possibly reused) under it.
//!
//! # Example
//! ```ignore
//! let wake = Registration::new()?;   // handlers installed
//! wake.wait(Some(Duration::from_secs(1)))?; // a signal or the timeout
//! wake.drain();
//! if let Some(sig) = wake.take_signal() { /* SIGINT, SIGTERM or SIGHUP */ }
//! drop(wake);                        // last job out restores the handlers
//! ```

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The most jobs that can run at once in one process.
pub(crate) const MAX_JOBS: usize = 64;

/// The signals a job listens to.
const HANDLED: [Signal; 4] = [
    Signal::SIGCHLD,
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
];

/// Write ends of the registered self-pipes; -1 marks a free slot.
static WAKE_FDS: [AtomicI32; MAX_JOBS] = [const { AtomicI32::new(-1) }; MAX_JOBS];
/// The last terminating signal each slot's job has not yet taken; 0 if none.
static RECEIVED: [AtomicI32; MAX_JOBS] = [const { AtomicI32::new(0) }; MAX_JOBS];
/// Handlers currently running (on any thread).
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// The dispositions to restore when the last job is done, and how many jobs
/// are registered. Registration and release are serialised by this lock.
static INSTALLED: Mutex<Installed> = Mutex::new(Installed {
    users: 0,
    previous: Vec::new(),
});

struct Installed {
    users: usize,
    previous: Vec<(Signal, SigAction)>,
}

extern "C" fn on_signal(sig: libc::c_int) {
    let saved_errno = Errno::last_raw();
    // SYNC POINT: SeqCst, paired with the SeqCst store of -1 and load of
    // IN_HANDLER in `Registration::drop`: either that load sees this
    // increment (and waits for us), or our loads below come after the store
    // of -1 in the single total order and skip the slot.
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    for (fd, received) in WAKE_FDS.iter().zip(&RECEIVED) {
        let fd = fd.load(Ordering::SeqCst);
        if fd < 0 {
            continue;
        }
        if sig != libc::SIGCHLD {
            // SYNC POINT: SeqCst; stored before the byte is written, so a
            // monitor that drained the byte and then swaps `received`
            // sees the signal.
            received.store(sig, Ordering::SeqCst);
        }
        // SAFETY: `fd` is the write end of a non-blocking pipe that stays
        // open while IN_HANDLER > 0 (see the module docs).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        // A full pipe (EAGAIN) already holds a wake-up.
        let _ = nix::unistd::write(fd, &[1u8]);
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    // Restores the interrupted code's errno.
    Errno::set_raw(saved_errno);
}

fn install(installed: &mut Installed) -> io::Result<()> {
    // SA_RESTART spares other threads of the process from EINTR; poll(2)
    // is interrupted regardless, and the monitor relies on the pipe anyway.
    let mut mask = SigSet::empty();
    HANDLED.iter().for_each(|&sig| mask.add(sig));
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART | SaFlags::SA_NOCLDSTOP,
        mask,
    );
    for sig in HANDLED {
        if sig != Signal::SIGCHLD && is_ignored(sig) {
            // An ignored SIGINT or SIGHUP (`nohup`, a background job of a
            // script) stays ignored, as POSIX asks of programs. An ignored
            // SIGCHLD must not: the kernel would reap the ranks for us.
            continue;
        }
        // SAFETY: the handler is async-signal-safe (see `on_signal`).
        match unsafe { nix::sys::signal::sigaction(sig, &action) } {
            Ok(previous) => installed.previous.push((sig, previous)),
            Err(e) => {
                restore(installed);
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// Whether `sig`'s disposition is "ignore".
fn is_ignored(sig: Signal) -> bool {
    // Raw libc: nix's sigaction always installs an action, and this is a
    // query only (a null new action).
    // SAFETY: an all-zero sigaction is a valid value (integers, an empty
    // mask and a null restorer), overwritten by the call.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action and a valid old one.
    let r = unsafe { libc::sigaction(sig as libc::c_int, std::ptr::null(), &mut current) };
    r == 0 && current.sa_sigaction == libc::SIG_IGN
}

fn restore(installed: &mut Installed) {
    for (sig, previous) in installed.previous.drain(..).rev() {
        // SAFETY: `previous` is the disposition sigaction returned for `sig`.
        let _ = unsafe { nix::sys::signal::sigaction(sig, &previous) };
    }
}

/// A job's registration: its self-pipe and slot. Dropping it unregisters.
pub(crate) struct Registration {
    slot: usize,
    read: OwnedFd,
    // Kept open until `drop` has cleared the slot and waited for handlers.
    _write: OwnedFd,
}

impl Registration {
    /// Creates the job's pipe, registers it, and installs the handlers if
    /// this is the process's only job.
    pub(crate) fn new() -> io::Result<Registration> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = WAKE_FDS.iter().position(|fd| fd.load(Ordering::SeqCst) < 0) else {
            return Err(io::Error::other(format!(
                "more than {MAX_JOBS} jobs running at once in this process"
            )));
        };
        if installed.users == 0 {
            install(&mut installed)?;
        }
        installed.users += 1;
        RECEIVED[slot].store(0, Ordering::SeqCst);
        WAKE_FDS[slot].store(write.as_raw_fd(), Ordering::SeqCst);
        Ok(Registration {
            slot,
            read,
            _write: write,
        })
    }

    /// Waits until a signal arrived since the last [`Registration::drain`]
    /// or `timeout` passed (`None`: no limit).
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> io::Result<()> {
        // Round up so that a wait for 0.3 ms does not become a busy loop.
        let ms = timeout.map_or(PollTimeout::NONE, |t| {
            let ms = t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        });
        let mut pfd = [PollFd::new(self.read.as_fd(), PollFlags::POLLIN)];
        match poll(&mut pfd, ms) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Empties the pipe.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            match nix::unistd::read(&self.read, &mut buf) {
                Ok(1..) | Err(Errno::EINTR) => continue,
                // EOF is impossible (we hold the write end); EAGAIN means
                // empty.
                _ => return,
            }
        }
    }

    /// The terminating signal received since the last call, if any.
    pub(crate) fn take_signal(&self) -> Option<i32> {
        // SYNC POINT: SeqCst, see the store in `on_signal`.
        match RECEIVED[self.slot].swap(0, Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        // SYNC POINT: SeqCst, see `on_signal`.
        WAKE_FDS[self.slot].store(-1, Ordering::SeqCst);
        while IN_HANDLER.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        installed.users -= 1;
        if installed.users == 0 {
            restore(&mut installed);
        }
        // The pipe is closed when the fields drop, after this body.
    }
}

/// The name of signal `sig` (`"SIGKILL"`), if it is a standard one.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    const NAMES: [(libc::c_int, &str); 31] = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGSTKFLT, "SIGSTKFLT"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGURG, "SIGURG"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGPWR, "SIGPWR"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    NAMES.iter().find(|(n, _)| *n == sig).map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn names() {
        assert_eq!(signal_name(9), Some("SIGKILL"));
        assert_eq!(signal_name(libc::SIGINT), Some("SIGINT"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(64), None);
    }

    /// Whether our handler is installed for `sig` right now.
    fn handled(sig: libc::c_int) -> bool {
        // SAFETY: an all-zero sigaction is a valid value to be overwritten.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a query only: a null new action and a valid old one.
        let r = unsafe { libc::sigaction(sig, std::ptr::null(), &mut current) };
        r == 0
            && current.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
    }

    #[test]
    #[cfg_attr(miri, ignore)] // Miri has no signal handlers (sigaction, raise)
    fn registration_wakes_on_signal_and_times_out() {
        let wake = Registration::new().unwrap();
        let t = Instant::now();
        wake.wait(Some(Duration::from_millis(30))).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(25));
        // A signal to ourselves: the handler records it and wakes us. Signals
        // the process inherited as ignored stay ignored (nohup, background
        // jobs of scripts), so use one our handler has.
        let Some(sig) = [libc::SIGHUP, libc::SIGTERM, libc::SIGINT]
            .into_iter()
            .find(|&s| handled(s))
        else {
            eprintln!("SIGHUP, SIGTERM and SIGINT are all ignored here; checked the timeout only");
            return;
        };
        // SAFETY: raise has no memory-safety preconditions; the handler is
        // installed while `wake` lives.
        unsafe { libc::raise(sig) };
        wake.wait(Some(Duration::from_secs(5))).unwrap();
        wake.drain();
        // Another test's job may run concurrently and take nothing from us:
        // every slot gets its own copy of the signal.
        assert_eq!(wake.take_signal(), Some(sig));
        assert_eq!(wake.take_signal(), None);
    }
}
