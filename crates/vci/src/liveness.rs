//! Liveness of the peers: whether a rank a waiter depends on is gone.
//!
//! A rank is *failed* when its process has ended while its state word in
//! the segment header ([`shmheap::segment::RankState`]) says it was in
//! the runtime (initializing or running, not finalized): it left its peers
//! without the messages (or the copies of theirs) they may wait for. A
//! process that uses the engine alone, without the runtime that marks the
//! word, is never taken for failed. A waiter asks only in the slow path of
//! waiting, between two doorbell sleeps ([`crate::wait`]), so the message
//! path pays nothing, and a job without a launcher watching it (or whose
//! launcher does not end it) cannot hang on a dead peer.
//!
//! Whether a process has ended: a pidfd (Linux 5.3 and later) polls
//! readable once the process exits, zombie or not, and cannot be fooled by
//! a reused pid. Where a pidfd cannot be had (an old kernel, or beyond a
//! quarter of the process's descriptor limit, which stays the program's)
//! `/proc/<pid>/stat` answers: gone, a zombie, or another process (a
//! different start time) is an ended peer.
//!
//! Init's barriers ask too: the first one, before the peers' pids are all
//! known, about the peers that published theirs ([`ended_in_init`]); the
//! second one through [`Liveness`].
//!
//! What a wait watches ([`Watch`]) is decided by the operation: a receive
//! from a rank or a send to it watches that rank; a receive from any
//! source fails only when **every** process that could send to it in its
//! context has failed (the senders the layer above registered for the
//! context with [`Liveness::set_senders`], every peer for a context it did
//! not register). ULFM fails a wildcard receive as soon as one possible
//! sender fails and lets the program acknowledge the failure and receive
//! on; without that acknowledgement call, failing on the first dead peer
//! would make a wildcard receive unusable for the rest of the job, so a
//! receive that a live process may still satisfy keeps waiting (and a
//! launcher that watches ends the job anyway). Once found, a failed rank
//! stays failed.

use shmheap::segment::Segment;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The peers a wait depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// One rank (a receive from it, a send to it).
    Rank(u32),
    /// Every other rank: any of them failed (init's barrier).
    Any,
    /// A receive from any source in this context: every process that
    /// could send in it failed.
    AnyIn(u32),
    /// None: the wait does not depend on a peer.
    Nothing,
}

impl Watch {
    /// What a receive from `source` (a rank or a wildcard) in `context`
    /// watches (a send: its destination, with any context).
    pub(crate) fn source(source: i32, context: u32) -> Watch {
        match u32::try_from(source) {
            Ok(r) => Watch::Rank(r),
            Err(_) if source == crate::ANY_SOURCE => Watch::AnyIn(context),
            Err(_) => Watch::Nothing,
        }
    }
}

/// How a peer's end is noticed.
#[derive(Debug)]
enum Probe {
    /// A pidfd of the peer's process.
    Pidfd(OwnedFd),
    /// Its pid and start time (`/proc/<pid>/stat`, field 22).
    Stat { pid: i32, start: u64 },
    /// A peer whose process had ended (and been reaped) already when it
    /// was looked for.
    Ended,
    /// This process, or a peer that published no pid.
    Never,
}

#[derive(Debug)]
struct Peer {
    probe: Probe,
    /// Sticky: found failed.
    failed: AtomicBool,
}

/// The peers of this process and how to tell whether they are gone.
#[derive(Debug)]
pub(crate) struct Liveness {
    seg: Segment,
    me: u32,
    peers: Vec<Peer>,
    /// The ranks that may send in a context, as the layer above said
    /// (asked by sleeping wildcard receives only: a lock is fine).
    senders: Mutex<HashMap<u32, Arc<[u32]>>>,
}

/// The state character and start time in `/proc/<pid>/stat`, if the
/// process exists.
fn stat_of(pid: i32) -> Option<(u8, u64)> {
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything;
    // the fields after the last ')' are plain.
    let close = s.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&s[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 3 was the state; the start time is field 22.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

impl Liveness {
    /// Identifies the processes of ranks `0..pids.len()` (`pids[r]` is
    /// rank `r`'s, as it published; `me` is this process's rank). Called
    /// inside init, between two barriers: a peer whose process cannot be
    /// found then has ended already (a pid published in init, reused by
    /// another process since, is taken for the peer: init's second
    /// barrier then waits, as it would without the check).
    pub(crate) fn new(seg: Segment, me: u32, pids: &[u32]) -> Liveness {
        // Pidfds take descriptors: at most a quarter of what the process
        // may open, so that the program keeps its own; the other peers are
        // watched through /proc.
        let mut pidfds = Self::pidfd_budget();
        let peers = pids
            .iter()
            .enumerate()
            .map(|(r, &pid)| Peer {
                probe: if r as u32 == me {
                    Probe::Never
                } else {
                    Self::probe_of(pid as i32, &mut pidfds)
                },
                failed: AtomicBool::new(false),
            })
            .collect();
        Liveness {
            seg,
            me,
            peers,
            senders: Mutex::new(HashMap::new()),
        }
    }

    /// How many pidfds this process may take: a quarter of its
    /// descriptor limit.
    fn pidfd_budget() -> usize {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit, which `lim` is.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return 0;
        }
        usize::try_from(lim.rlim_cur / 4).unwrap_or(usize::MAX)
    }

    fn probe_of(pid: i32, pidfds: &mut usize) -> Probe {
        if pid <= 0 {
            return Probe::Never;
        }
        let fd = if *pidfds > 0 {
            // Raw libc: neither std nor nix wraps pidfd_open.
            // SAFETY: pidfd_open takes a pid and flags and returns a new
            // descriptor or -1; no memory is passed.
            unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) }
        } else {
            -1
        };
        if fd >= 0 {
            *pidfds -= 1;
            // SAFETY: a fresh descriptor that nothing else owns. A pidfd
            // is close-on-exec from its creation.
            return Probe::Pidfd(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        match stat_of(pid) {
            Some((_, start)) => Probe::Stat { pid, start },
            // It published its pid in init, so it existed: it has ended.
            None => Probe::Ended,
        }
    }

    /// Whether `peer`'s process has ended.
    fn ended(peer: &Peer) -> bool {
        match &peer.probe {
            Probe::Pidfd(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no timeout.
                let n = unsafe { libc::poll(&mut p, 1, 0) };
                n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
            }
            Probe::Stat { pid, start } => match stat_of(*pid) {
                None => true,
                Some((state, s)) => s != *start || state == b'Z' || state == b'X',
            },
            Probe::Ended => true,
            Probe::Never => false,
        }
    }

    /// Whether rank `rank` has failed: its process ended without
    /// finalizing. Costs a system call; for the slow path only.
    pub(crate) fn failed(&self, rank: u32) -> bool {
        let Some(peer) = self.peers.get(rank as usize) else {
            return false;
        };
        // Relaxed: a sticky flag this process sets; nothing is published
        // with it.
        if peer.failed.load(Ordering::Relaxed) {
            return true;
        }
        // A peer that finalized (or never started the runtime above the
        // engine, which marks the word) owes nobody anything.
        if !self.seg.rank_state(rank).leaves_peers_waiting() || !Self::ended(peer) {
            return false;
        }
        // It ended; had it finalized just before, the word says so now.
        if !self.seg.rank_state(rank).leaves_peers_waiting() {
            return false;
        }
        // Relaxed: as above.
        peer.failed.store(true, Ordering::Relaxed);
        true
    }

    /// Says which ranks may send in `context` (replacing what was said
    /// for it before: a context of a freed communicator is reused).
    pub(crate) fn set_senders(&self, context: u32, ranks: &[u32]) {
        let mut m = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(context, ranks.into());
    }

    /// A failed rank among those `watch` names, if any (for a wildcard
    /// receive, one of its senders once all have failed).
    pub(crate) fn check(&self, watch: Watch) -> Option<u32> {
        match watch {
            Watch::Rank(r) => self.failed(r).then_some(r),
            Watch::Any => (0..self.peers.len() as u32).find(|&r| self.failed(r)),
            Watch::AnyIn(context) => {
                let listed = self
                    .senders
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    // A context word may name its VCI in its top bits
                    // (communicator hints, streams); the senders are said
                    // for the communicator's plain context.
                    .get(&(context & crate::endpoint::CONTEXT_MAX))
                    .cloned();
                let all: Vec<u32>;
                let senders: &[u32] = match &listed {
                    Some(l) => l,
                    None => {
                        all = (0..self.peers.len() as u32).collect();
                        &all
                    }
                };
                every_other_failed(senders, self.me, |r| self.failed(r))
            }
            Watch::Nothing => None,
        }
    }
}

/// The first of `senders` other than `me` if every one of those failed
/// (asked in order, stopping at the first alive); `None` if one lives or
/// there is none.
fn every_other_failed(senders: &[u32], me: u32, failed: impl Fn(u32) -> bool) -> Option<u32> {
    let mut others = senders.iter().copied().filter(|&r| r != me);
    let first = others.next()?;
    (failed(first) && others.all(failed)).then_some(first)
}

/// For init's first barrier, before [`Liveness`] exists: a peer that
/// published its engine (its VCI 0, which holds its pid) and whose process
/// has ended since (gone, or a zombie). A peer that has not published yet
/// cannot be told from a late one, and is not named.
pub(crate) fn ended_in_init(seg: &Segment, me: u32) -> Option<u32> {
    let slot = crate::slots::vci_slot(0)?;
    (0..seg.ranks()).filter(|&r| r != me).find(|&r| {
        let addr = seg.lookup(r, slot);
        addr != 0
            && crate::endpoint::vci_at(r, 0, addr).is_ok_and(|peer| {
                let pid = peer.pid() as i32;
                pid > 0 && stat_of(pid).is_none_or(|(state, _)| state == b'Z' || state == b'X')
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn peer(pid: i32, pidfds: usize) -> Peer {
        let mut budget = pidfds;
        Peer {
            probe: Liveness::probe_of(pid, &mut budget),
            failed: AtomicBool::new(false),
        }
    }

    #[test]
    fn a_wildcard_fails_only_when_every_other_sender_failed() {
        let dead = |r: u32| r == 1 || r == 3;
        assert_eq!(every_other_failed(&[0, 1, 3], 0, dead), Some(1));
        assert_eq!(every_other_failed(&[0, 1, 2, 3], 0, dead), None);
        assert_eq!(every_other_failed(&[3, 1], 0, dead), Some(3));
        // Alone (or nobody): nothing to fail on.
        assert_eq!(every_other_failed(&[0], 0, dead), None);
        assert_eq!(every_other_failed(&[], 0, dead), None);
    }

    #[test]
    fn both_probes_see_a_process_end_and_not_this_one() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.05")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let by_fd = peer(pid, 1);
        let by_stat = peer(pid, 0);
        assert!(matches!(by_stat.probe, Probe::Stat { .. }));
        assert!(!Liveness::ended(&by_stat));
        // It ends; not reaped yet, it is a zombie, which counts as ended.
        let start = Instant::now();
        while !Liveness::ended(&by_fd) {
            assert!(start.elapsed() < Duration::from_secs(10), "never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(Liveness::ended(&by_stat));
        child.wait().unwrap();
        assert!(Liveness::ended(&by_fd) && Liveness::ended(&by_stat));
        let me = peer(std::process::id() as i32, 1);
        assert!(!Liveness::ended(&me));
        assert!(!Liveness::ended(&peer(0, 1)));
        // Reaped before it was looked for: ended.
        assert!(Liveness::ended(&peer(pid, 1)) && Liveness::ended(&peer(pid, 0)));
    }
}
