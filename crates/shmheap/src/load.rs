//! How busy the machine is: its run queue (`/proc/loadavg`) against its
//! CPUs, for code that should step aside when runnable threads outnumber
//! the CPUs — a copy agent that would take a core from a rank, a waiter
//! that would spin through another process's time slice.
//!
//! Both readings are hints: the run queue is read at most every
//! [`RUNNABLE_EVERY`] per process, by one thread at a time.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a reading of the machine's run queue stands (see
/// [`runnable_threads`]).
pub const RUNNABLE_EVERY: Duration = Duration::from_millis(10);

/// The machine's runnable threads (the fourth field of `/proc/loadavg`,
/// `running/total`), read at most every [`RUNNABLE_EVERY`] by one thread
/// at a time; `usize::MAX` if it cannot be read (as under Miri), or while
/// another thread of the process is reading it.
pub fn runnable_threads() -> usize {
    if cfg!(miri) {
        // Miri's isolation has no `/proc`: read as unknown.
        return usize::MAX;
    }
    static LAST: Mutex<Option<(Instant, usize)>> = Mutex::new(None);
    let Ok(mut last) = LAST.try_lock() else {
        return usize::MAX;
    };
    if let Some((at, n)) = *last {
        if at.elapsed() < RUNNABLE_EVERY {
            return n;
        }
    }
    let n = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| parse_runnable(&s))
        .unwrap_or(usize::MAX);
    *last = Some((Instant::now(), n));
    n
}

/// The running count of a `/proc/loadavg` line (`0.52 0.58 0.59 3/467 123`).
fn parse_runnable(line: &str) -> Option<usize> {
    let field = line.split_whitespace().nth(3)?;
    field.split('/').next()?.parse().ok()
}

/// The CPUs the calling thread may run on (1 if the kernel cannot say).
pub fn thread_cpus() -> usize {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set, filled by
    // `sched_getaffinity` for this thread (pid 0) with the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return 1;
        }
        (libc::CPU_COUNT(&set) as usize).max(1)
    }
}

/// The machine's online CPUs (read once per process; 1 if the system
/// cannot say).
pub fn online_cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| {
        // SAFETY: `sysconf` reads a system value and has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        usize::try_from(n).unwrap_or(1).max(1)
    })
}

/// Whether the machine's runnable threads outnumber its CPUs (some
/// thread waits for a CPU right now), as far as [`runnable_threads`]
/// last saw.
pub fn oversubscribed() -> bool {
    runnable_threads() > online_cpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_running_count() {
        assert_eq!(parse_runnable("0.52 0.58 0.59 3/467 12345\n"), Some(3));
        assert_eq!(parse_runnable("0.52 0.58 0.59\n"), None);
        assert_eq!(parse_runnable("a b c x/1 2"), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc and the CPU count from the system")]
    fn readings_are_plausible() {
        assert!(online_cpus() >= 1);
        assert!(thread_cpus() >= 1);
        // This thread is running, so at least one thread is runnable
        // (or the reading failed, which reads as MAX).
        assert!(runnable_threads() >= 1);
    }
}
