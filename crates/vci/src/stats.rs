//! The engine's statistics: messages per protocol and how they matched.
//!
//! [`Stats`] is the public snapshot ([`crate::Endpoint::stats`]), for the
//! whole process or for one VCI ([`crate::Endpoint::vci_stats`]: which VCIs
//! carried traffic). Receives are counted per VCI in [`Counters`]; sends
//! under the lane locks (see [`crate::fastbox`]), one lane per destination
//! VCI, which the endpoint adds up.

use crate::endpoint::Endpoint;
use crate::vci::Vci;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters per protocol, readable by tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages sent with the immediate protocol.
    pub sent_immediate: u64,
    /// Messages sent with the single-copy protocol.
    pub sent_single_copy: u64,
    /// Messages sent with the two-copy (bounce buffer) protocol.
    pub sent_two_copy: u64,
    /// Messages received with the immediate protocol.
    pub recv_immediate: u64,
    /// Messages received with the single-copy protocol.
    pub recv_single_copy: u64,
    /// Messages received with the two-copy protocol.
    pub recv_two_copy: u64,
    /// Messages that matched a posted receive on arrival.
    pub matched_posted: u64,
    /// Receives that matched a message from the unexpected list.
    pub matched_unexpected: u64,
    /// Messages sent with the kernel-assisted single copy.
    pub sent_kernel_assisted: u64,
    /// Messages received with the kernel-assisted single copy
    /// (`process_vm_readv`).
    pub kernel_assisted: u64,
    /// Synchronous sends ([`crate::SendMode::Synchronous`]) started.
    pub sent_synchronous: u64,
    /// Single-copy messages received with the synergistic copy.
    pub synergistic: u64,
    /// Blocks of synergistic copies this rank copied as the receiver.
    pub synergistic_receiver_blocks: u64,
    /// Blocks of synergistic copies this rank copied as the sender (while
    /// testing or waiting on the send).
    pub synergistic_sender_blocks: u64,
    /// Messages that left the unexpected list through a matched probe.
    pub matched_probe: u64,
    /// Blocks given with [`crate::Endpoint::isend_owned`].
    pub sent_owned: u64,
    /// Given blocks received (by any kind of receive).
    pub recv_owned: u64,
    /// Ownership receives that took the sender's block itself (no copy).
    pub owned_in_place: u64,
    /// Ownership receives that copied the payload into a fresh block (a
    /// plain send, or a block that could not be kept as it was).
    pub owned_copied: u64,
    /// Immediate messages sent through a fast box (also counted in
    /// `sent_immediate`).
    pub sent_fastbox: u64,
    /// Immediate messages received from a fast box (also counted in
    /// `recv_immediate`).
    pub recv_fastbox: u64,
}

impl Stats {
    /// The sum of two sets of counters (a process's VCIs together).
    pub fn merged(&self, o: &Stats) -> Stats {
        macro_rules! sum {
            ($($f:ident),*) => { Stats { $($f: self.$f + o.$f),* } };
        }
        sum!(
            sent_immediate,
            sent_single_copy,
            sent_two_copy,
            recv_immediate,
            recv_single_copy,
            recv_two_copy,
            matched_posted,
            matched_unexpected,
            sent_kernel_assisted,
            kernel_assisted,
            sent_synchronous,
            synergistic,
            synergistic_receiver_blocks,
            synergistic_sender_blocks,
            matched_probe,
            sent_owned,
            recv_owned,
            owned_in_place,
            owned_copied,
            sent_fastbox,
            recv_fastbox
        )
    }
}

/// A VCI's counters of what it received and matched (sends are counted
/// under the lane locks).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// By protocol (`Protocol as usize - 1`).
    pub(crate) received: [AtomicU64; 5],
    pub(crate) matched_posted: AtomicU64,
    pub(crate) matched_unexpected: AtomicU64,
    pub(crate) synergistic: AtomicU64,
    pub(crate) syn_receiver_blocks: AtomicU64,
    pub(crate) syn_sender_blocks: AtomicU64,
    pub(crate) matched_probe: AtomicU64,
    pub(crate) owned_in_place: AtomicU64,
    pub(crate) owned_copied: AtomicU64,
    pub(crate) recv_fastbox: AtomicU64,
    /// The fast-box receive path's counters, apart: see [`SlotCounters`].
    pub(crate) slot: SlotCounters,
}

/// Counters of messages delivered straight from their fast-box slot
/// ([`Vci::deliver_slot`]), which runs only under the VCI lock: one writer
/// at a time, ordered by the lock, so a plain increment counts exactly
/// (why not an atomic add: docs/performance.md, "Locked instructions").
/// Every other
/// writer of the same statistics uses [`Counters`]' own fields (some run
/// without the lock); [`Vci::stats`] adds the two.
#[derive(Debug, Default)]
pub(crate) struct SlotCounters {
    /// Plain payloads (immediate protocol, fast box).
    pub(crate) plain: AtomicU64,
    /// Given blocks.
    pub(crate) owned: AtomicU64,
    /// Given blocks handed over as they are.
    pub(crate) owned_in_place: AtomicU64,
}

/// Counts one under the VCI lock (see [`SlotCounters`]).
pub(crate) fn bump_locked(c: &AtomicU64) {
    // Relaxed load and store: the lock holder is the only writer, and the
    // lock orders successive holders; readers take a snapshot.
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

pub(crate) fn bump(c: &AtomicU64) {
    // Relaxed: a statistic; read only as a snapshot, orders nothing.
    c.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    // Relaxed: a statistic; read only as a snapshot, orders nothing.
    c.fetch_add(n, Ordering::Relaxed);
}

fn read(c: &AtomicU64) -> u64 {
    // Relaxed: a statistic snapshot.
    c.load(Ordering::Relaxed)
}

impl Vci {
    /// Counts blocks of a synergistic copy this rank copied as the sender.
    pub(crate) fn count_sender_blocks(&self, n: u64) {
        if n > 0 {
            add(&self.stats.syn_sender_blocks, n);
        }
    }

    /// A snapshot of this VCI's counters: what it received and matched.
    /// Sends are counted by the endpoint's lanes; [`Endpoint::stats`] adds
    /// both.
    ///
    /// [`Endpoint::stats`]: crate::Endpoint::stats
    pub fn stats(&self) -> Stats {
        let s = &self.stats;
        Stats {
            // Sends are counted per lane (`Endpoint::stats`).
            sent_immediate: 0,
            sent_single_copy: 0,
            sent_two_copy: 0,
            recv_immediate: read(&s.received[0]) + read(&s.slot.plain),
            recv_single_copy: read(&s.received[1]),
            recv_two_copy: read(&s.received[2]),
            matched_posted: read(&s.matched_posted),
            matched_unexpected: read(&s.matched_unexpected),
            sent_kernel_assisted: 0,
            kernel_assisted: read(&s.received[3]),
            sent_synchronous: 0,
            synergistic: read(&s.synergistic),
            synergistic_receiver_blocks: read(&s.syn_receiver_blocks),
            synergistic_sender_blocks: read(&s.syn_sender_blocks),
            matched_probe: read(&s.matched_probe),
            sent_owned: 0,
            recv_owned: read(&s.received[4]) + read(&s.slot.owned),
            owned_in_place: read(&s.owned_in_place) + read(&s.slot.owned_in_place),
            owned_copied: read(&s.owned_copied),
            sent_fastbox: 0,
            recv_fastbox: read(&s.recv_fastbox) + read(&s.slot.plain),
        }
    }
}

impl Stats {
    /// Messages received, by any protocol (fast boxes included).
    pub fn received(&self) -> u64 {
        self.recv_immediate
            + self.recv_single_copy
            + self.recv_two_copy
            + self.kernel_assisted
            + self.recv_owned
    }

    /// Messages sent, by any protocol (fast boxes included).
    pub fn sent(&self) -> u64 {
        self.sent_immediate
            + self.sent_single_copy
            + self.sent_two_copy
            + self.sent_kernel_assisted
            + self.sent_owned
    }
}

impl Endpoint {
    /// The per-protocol counters of this process, summed over its VCIs.
    pub fn stats(&self) -> Stats {
        let s = self
            .vcis
            .iter()
            .fold(Stats::default(), |a, v| a.merged(&v.stats()));
        self.add_sends(s, |_| true)
    }

    /// The counters of this process's VCI `v` alone (`None` if there is
    /// no such VCI): what it received and matched, and what this process
    /// sent to VCI `v` of any rank. Shows which VCIs carried traffic.
    pub fn vci_stats(&self, v: usize) -> Option<Stats> {
        let s = self.vcis.get(v)?.stats();
        let n = self.vcis.len();
        Some(self.add_sends(s, |lane| lane % n == v))
    }

    /// `s` with the sends of the lanes `which` takes added (lane
    /// `r * vcis + v` carries messages to VCI `v` of rank `r`).
    fn add_sends(&self, mut s: Stats, which: impl Fn(usize) -> bool) -> Stats {
        // Sends are counted under the lane locks (no atomic add on the
        // send paths).
        for (_, lane) in self.lanes.iter().enumerate().filter(|(i, _)| which(*i)) {
            let l = lane.lock();
            s.sent_fastbox += l.fastbox_sent;
            s.sent_immediate += l.fastbox_sent + l.queued[0];
            s.sent_single_copy += l.queued[1];
            s.sent_two_copy += l.queued[2];
            s.sent_kernel_assisted += l.queued[3];
            s.sent_owned += l.owned_sent + l.queued[4];
            s.sent_synchronous += l.synchronous;
        }
        s
    }
}
