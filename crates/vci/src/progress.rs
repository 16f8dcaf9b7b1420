//! Progress: taking what has arrived and matching it.
//!
//! Progress runs under the VCI lock. It drains the incoming queue in FIFO
//! order, each envelope after the fast-box messages its sender numbered
//! before it ([`crate::fastbox`]), then the fast boxes in rank order; each
//! message matches the earliest matching posted receive, or is appended to
//! the unexpected list. A *lazy* pass ([`Vci::progress`]) leaves fast-box
//! messages nobody waits for in their slots; a *full* pass
//! ([`Vci::progress_all`]) takes them all. An events count tells waiters
//! without the lock when to look again ([`Vci::news`]). A waiter also
//! sweeps the process's other VCIs now and then ([`Endpoint::sweep`]).

use crate::endpoint::Endpoint;
use crate::envelope::Envelope;
use crate::fastbox::FbPair;
use crate::matching::{Arrival, Key, Private, RecvState};
use crate::request::Status;
use crate::stats::bump;
use crate::vci::Vci;
use shmheap::sync::mpsc::Pop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

impl Vci {
    /// Takes what posted receives need, in order per sender: the whole
    /// incoming queue, then messages from the senders' fast boxes while a
    /// receive is posted. Each message matches the earliest matching posted
    /// receive or joins the unexpected list.
    ///
    /// Fast-box messages that no posted receive waits for stay in their
    /// slots, where a later receive takes them directly
    /// ([`Vci::post_recv`]; why: docs/performance.md, "Progress"). A sender
    /// whose fast box is full queues envelopes instead, and an envelope
    /// brings its sender's earlier fast-box messages along
    /// ([`Vci::catch_up`]), so nothing waits there unseen for long.
    pub(crate) fn progress(&self, p: &mut Private) {
        self.progress_with(p, false);
    }

    /// Takes every message that has arrived: [`Vci::progress`], but
    /// emptying every fast box. For receives and probes that are not
    /// posted (a blocking receive, a probe), which must see all of them.
    pub(crate) fn progress_all(&self, p: &mut Private) {
        self.progress_with(p, true);
    }

    fn progress_with(&self, p: &mut Private, all: bool) {
        let mut took = false;
        // Empty or Inconsistent (a sender is between its swap and its link;
        // it rings the doorbell after linking, so a waiter polls again) end
        // the loop.
        while let Pop::Item(node) = self.pop(p) {
            took = true;
            let env = NonNull::new(node.cast::<Envelope>()).expect("queued nodes are non-null");
            // SAFETY: a popped envelope is valid and ours until delivered.
            let (source, seq) = unsafe { (env.as_ref().source(), env.as_ref().seq()) };
            // Messages the sender put in its fast box before this one come
            // first (they are visible: see `crate::fastbox`).
            self.catch_up(p, source, seq);
            // SAFETY: popped from our queue, valid.
            self.arrive(p, unsafe { Arrival::envelope(env) });
            if let Some(e) = self.expected.get(source as usize) {
                // Relaxed: written only under the lock (which we hold);
                // lock-free readers take it as a hint (see `news`).
                e.store(seq + 1, Ordering::Relaxed);
            }
            if let Some(fb) = self.rings.get(source as usize) {
                fb.consumed(seq);
            }
        }
        // In rank order, whether the pass is full or lazy: a program that
        // orders two senders' messages through a third message (which MPI
        // does not promise to honour) sees them matched in that order
        // whenever both have arrived. In a lazy pass a sender further down
        // waits at most a fast box's worth of messages: a full box sends
        // it to the queue, whose envelope brings its box along.
        for (source, fb) in self.rings.iter().enumerate() {
            while (all || !p.posted.is_empty()) && self.take_small(p, fb, source as u32) {
                took = true;
            }
        }
        if took {
            self.note_event(p);
        }
    }

    /// Advances the events count (under the lock: `_locked`).
    pub(crate) fn note_event(&self, _locked: &mut Private) {
        // Relaxed load: only lock holders write the count, and we hold the
        // lock. SYNC POINT: the Release store pairs with the Acquire load
        // in `news`: a waiter that sees the new count sees the matching
        // state (expected numbers, finished receives) we changed before.
        let n = self.events.0.load(Ordering::Relaxed);
        self.events.0.store(n.wrapping_add(1), Ordering::Release);
    }

    /// The events count as of now (read under the lock: `_locked`).
    pub(crate) fn events(&self, _locked: &Private) -> u64 {
        // Relaxed: only lock holders write it, and we hold the lock.
        self.events.0.load(Ordering::Relaxed)
    }

    /// Whether a locked attempt might find something new since the caller
    /// last held the lock and saw the events count `seen`: another thread
    /// progressed (the count moved), an envelope is queued, or a sender's
    /// next fast-box message is in its slot. Reads no lock and writes
    /// nothing, so a waiter may ask in a tight loop.
    ///
    /// A hint: it may say yes for nothing (a message another thread is
    /// taking right now), and it may miss a message only while another
    /// thread's progress is under way, which then moves the count; waiters
    /// still take the lock now and then, and always before they sleep.
    pub(crate) fn news(&self, seen: u64) -> bool {
        // SYNC POINT: Acquire pairs with the Release store in `note_event`.
        if self.events.0.load(Ordering::Acquire) != seen {
            return true;
        }
        if !self.shared.incoming.is_empty() {
            return true;
        }
        self.rings.iter().zip(self.expected.iter()).any(|(fb, e)| {
            // Relaxed: a hint; the count above says it is what we left.
            fb.ready(e.load(Ordering::Relaxed))
        })
    }

    /// Pops the incoming queue (`_locked` proves the VCI lock is held).
    fn pop(&self, _locked: &mut Private) -> Pop {
        // SAFETY: the VCI lock is held (we were given its `Private`), which
        // makes us the only consumer; the queue never moves and queued
        // envelopes stay valid until popped (their senders' contract).
        unsafe { self.shared.incoming.pop() }
    }

    /// Takes `source`'s fast-box messages numbered before `seq`.
    fn catch_up(&self, p: &mut Private, source: u32, seq: u64) {
        let Some(fb) = self.rings.get(source as usize) else {
            return;
        };
        // Relaxed: written only under the lock, which we hold.
        while self.expected[source as usize].load(Ordering::Relaxed) < seq {
            // Published before the envelope was queued, so visible; a stale
            // read can only be momentary.
            if !self.take_small(p, fb, source) {
                std::hint::spin_loop();
            }
        }
    }

    /// Takes the next message from `source`'s fast box `fb`, if it is there.
    fn take_small(&self, p: &mut Private, fb: &FbPair, source: u32) -> bool {
        let e = &self.expected[source as usize];
        // Relaxed (load and store): written only under the lock, which we
        // hold; lock-free readers take it as a hint (see `news`).
        let seq = e.load(Ordering::Relaxed);
        let Some(head) = fb.head(seq) else {
            return false;
        };
        let key = Key {
            source: source as i32,
            tag: head.tag,
            context: head.context,
        };
        match p.match_posted(&key) {
            Some(id) => {
                bump(&self.stats.matched_posted);
                let slot = p.slot_mut(id).expect("posted receives have slots");
                let mut st = Status::empty();
                // SAFETY: `head` came from this slot; the receive slot's
                // target is borrowed by its live request.
                unsafe { self.deliver_slot(fb, seq, head, key, slot.target, &mut st) };
                slot.state = RecvState::Done(st);
            }
            None => p
                .unexpected
                .push_back(Arrival::small(source, fb.take(seq, head))),
        }
        // The next message starts after this one's slots.
        e.store(seq + head.slots(), Ordering::Relaxed);
        true
    }

    /// A message has arrived: delivers it to the earliest matching posted
    /// receive, or appends it to the unexpected list.
    fn arrive(&self, p: &mut Private, a: Arrival) {
        match p.match_posted(&a.key) {
            Some(id) => {
                bump(&self.stats.matched_posted);
                let slot = p.slot_mut(id).expect("posted receives have slots");
                // SAFETY: the arrival is ours; the slot's target is borrowed
                // by its live request.
                slot.state = RecvState::Done(unsafe { self.deliver(a, slot.target) });
            }
            None => p.unexpected.push_back(a),
        }
    }

    /// Tries to progress this VCI without waiting for its lock (a sweep by
    /// a thread that waits on another VCI). Returns whether it did.
    pub(crate) fn try_progress(&self) -> bool {
        match self.private.try_lock() {
            Some(mut g) => {
                self.progress(&mut g);
                true
            }
            None => false,
        }
    }
}

impl Endpoint {
    /// Progresses every VCI but `except` whose lock is free.
    pub(crate) fn sweep(&self, except: usize) {
        for (i, v) in self.vcis.iter().enumerate() {
            if i != except {
                v.try_progress();
            }
        }
    }
}
