//! MPI matching state of one VCI: messages that arrived before their
//! receive (the unexpected list), receives posted before their message (the
//! posted list), and the receive slots that requests collect.
//!
//! Everything here is private to the owning process and lives under the VCI
//! lock ([`crate::vci::Vci`]). The rule both lists keep: after every step no
//! unexpected message matches a posted receive. Arrivals are appended in
//! the order the progress takes them (per sender, the order it sent them),
//! receives in posting order, and each side matches the *earliest* entry of
//! the other, which is MPI's non-overtaking rule per (source, tag, context).
//!
//! Each entry carries its matching key, so a scan touches only this
//! process's memory, never an envelope line in another rank's arena.
//!
//! # Example
//! ```
//! // The key test of MPI matching, with wildcards on the receive side only.
//! use vci::{ANY_SOURCE, ANY_TAG};
//! let (src, tag, ctx) = (3u32, 7i32, 0u32);
//! let matches = |s: i32, t: i32, c: u32| {
//!     c == ctx && (s == ANY_SOURCE || s as u32 == src) && (t == ANY_TAG || t == tag)
//! };
//! assert!(matches(ANY_SOURCE, 7, 0) && matches(3, ANY_TAG, 0));
//! assert!(!matches(3, 7, 1) && !matches(2, 7, 0));
//! ```

use crate::endpoint::{status_source, SENDER_BITS};
use crate::envelope::Envelope;
use crate::fastbox::Small;
use crate::owned::OwnedBlock;
use crate::request::Status;
use crate::{ANY_SOURCE, ANY_TAG};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Where a receive puts the message it matches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// The caller's buffer of `cap` bytes.
    Buffer {
        /// First byte.
        buf: *mut u8,
        /// Its length.
        cap: usize,
    },
    /// An ownership receive: the block (the sender's, or a fresh one of the
    /// global allocator holding a copy) is written to `*out`.
    Owned {
        /// Where the block goes.
        out: *mut Option<OwnedBlock>,
        /// The alignment the block must have (a power of two).
        align: usize,
    },
}

/// A matching key: (source, tag, context); a receive's may hold wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub source: i32,
    pub tag: i32,
    pub context: u32,
}

impl Key {
    /// Whether a receive or probe with this key matches a message with key
    /// `m` (which has no wildcards). A receive from `ANY_SOURCE` matches
    /// the words of every sending endpoint of its context
    /// ([`crate::endpoint::from_sender`]); one from a rank only its own
    /// word.
    #[inline]
    pub(crate) fn matches(&self, m: &Key) -> bool {
        (self.context == m.context
            || self.source == ANY_SOURCE && self.context == m.context & !SENDER_BITS)
            && (self.source == ANY_SOURCE || self.source == m.source)
            && (self.tag == ANY_TAG || self.tag == m.tag)
    }
}

/// How an arrived message holds its payload.
#[derive(Debug)]
pub(crate) enum Carrier {
    /// An envelope from the incoming queue (ours until delivered).
    Envelope(NonNull<Envelope>),
    /// A fast-box message, copied out of its slot.
    Small(Small),
}

/// A message taken off the incoming queue or a fast box, not delivered
/// yet.
#[derive(Debug)]
pub(crate) struct Arrival {
    pub key: Key,
    /// The payload's length in bytes.
    pub len: u64,
    pub carrier: Carrier,
}

// SAFETY: an arrival's envelope belongs to whoever holds the arrival (the
// VCI's lists under the VCI lock, or a `Message`); it lives in the node
// heap, usable from any thread of the process.
unsafe impl Send for Arrival {}

impl Arrival {
    /// The arrival of a queued envelope.
    ///
    /// # Safety
    ///
    /// `env` was popped from this process's incoming queue and is valid.
    pub(crate) unsafe fn envelope(env: NonNull<Envelope>) -> Arrival {
        // SAFETY: valid (caller's contract).
        let e = unsafe { env.as_ref() };
        Arrival {
            key: Key {
                source: e.source() as i32,
                tag: e.tag(),
                context: e.context(),
            },
            len: e.len(),
            carrier: Carrier::Envelope(env),
        }
    }

    /// The arrival of a fast-box message from `source`.
    pub(crate) fn small(source: u32, small: Small) -> Arrival {
        Arrival {
            key: Key {
                source: source as i32,
                tag: small.head.tag,
                context: small.head.context,
            },
            len: small.head.len as u64,
            carrier: Carrier::Small(small),
        }
    }

    /// A probe's status for this message.
    pub(crate) fn status(&self) -> Status {
        Status {
            source: status_source(self.key.source, self.key.context),
            tag: self.key.tag,
            count: self.len,
            error: None,
            cancelled: false,
        }
    }
}

/// Where a receive stands.
#[derive(Debug)]
pub(crate) enum RecvState {
    Posted,
    Done(Status),
}

/// A receive request's bookkeeping.
#[derive(Debug)]
pub(crate) struct RecvSlot {
    pub target: Target,
    pub state: RecvState,
    /// For a part of a receive posted on several VCIs
    /// ([`crate::spread`]): the claim its parts share.
    pub claim: Option<PartClaim>,
}

/// Marks a posted-list entry that is one part of a receive posted on
/// several VCIs ([`crate::spread`]); the rest of the entry's id is its
/// slot. Slot indices stay far below it.
pub(crate) const SPREAD_PART: u32 = 1 << 31;

/// The claim word a receive's parts share (see [`crate::spread`]) and the
/// value this part writes to win it.
#[derive(Debug)]
pub(crate) struct PartClaim {
    pub word: Arc<AtomicU32>,
    pub mine: u32,
}

impl PartClaim {
    /// Takes the receive for this part if no part has matched and the
    /// receive is not cancelled.
    pub(crate) fn claim(&self) -> bool {
        // AcqRel/Acquire: the word decides which part matches; what that
        // part delivers is published by its VCI lock, under which the
        // request collects it, so Relaxed would do. The stronger orders
        // cost nothing on this cold path and let a reader of the word
        // (`Spread::claimed`, Acquire) rely on it alone.
        self.word
            .compare_exchange(
                crate::spread::OPEN,
                self.mine,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// The private part of a VCI, under the VCI lock.
#[derive(Debug, Default)]
pub(crate) struct Private {
    /// Messages that matched no posted receive, in arrival order.
    pub unexpected: VecDeque<Arrival>,
    /// Posted receives in posting order: (key, slot index).
    pub posted: VecDeque<(Key, u32)>,
    /// Receive slots by index (a slab: `free` lists the empty ones), kept
    /// until the request collects them.
    slots: Vec<Option<RecvSlot>>,
    free: Vec<u32>,
}

// SAFETY: the raw pointers in `Private` are (1) envelopes in the node heap,
// owned by this VCI's consumer (whoever holds the lock), and (2) receive
// targets borrowed by live `Request`s for as long as their slot exists;
// both may be used from any thread of the process that holds the lock.
unsafe impl Send for Private {}

impl Private {
    /// Stores a receive slot; returns its index (the request's id).
    pub(crate) fn insert(&mut self, slot: RecvSlot) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub(crate) fn slot_mut(&mut self, id: u32) -> Option<&mut RecvSlot> {
        self.slots.get_mut(id as usize)?.as_mut()
    }

    /// Removes slot `id` (its request collected it).
    pub(crate) fn remove(&mut self, id: u32) -> Option<RecvSlot> {
        let s = self.slots.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some(s)
    }

    /// Takes the earliest posted receive matching `m` off the posted list
    /// and returns its slot.
    #[inline]
    pub(crate) fn match_posted(&mut self, m: &Key) -> Option<u32> {
        let i = self.posted.iter().position(|(k, _)| k.matches(m))?;
        let (_, id) = take_at(&mut self.posted, i)?;
        if id & SPREAD_PART == 0 {
            return Some(id);
        }
        self.match_part(m, i, id)
    }

    /// [`Private::match_posted`] when the match at `i` (taken off the
    /// list, id `id`) is a part of a receive posted on several VCIs: the
    /// part matches if it wins its receive's claim; a part whose receive
    /// another part (or a cancel) took is dropped here (its request
    /// withdraws its slot) and the search goes on after it.
    #[cold]
    fn match_part(&mut self, m: &Key, mut i: usize, mut id: u32) -> Option<u32> {
        loop {
            if id & SPREAD_PART == 0 {
                return Some(id);
            }
            let slot = id & !SPREAD_PART;
            let won = self
                .slots
                .get(slot as usize)
                .and_then(|s| s.as_ref())
                .and_then(|s| s.claim.as_ref())
                .is_some_and(PartClaim::claim);
            if won {
                return Some(slot);
            }
            i += self.posted.range(i..).position(|(k, _)| k.matches(m))?;
            id = take_at(&mut self.posted, i)?.1;
        }
    }

    /// Withdraws part `slot` of a receive posted on several VCIs: its
    /// posted entry (if no progress dropped it) and its slot.
    pub(crate) fn withdraw_part(&mut self, slot: u32) {
        let entry = slot | SPREAD_PART;
        if let Some(i) = self.posted.iter().position(|&(_, x)| x == entry) {
            let _ = take_at(&mut self.posted, i);
        }
        let _ = self.remove(slot);
    }

    /// Takes the earliest unexpected message matching `k` off the list.
    /// The list is usually empty (small messages go from their slots
    /// straight to the receive): that is answered inline, without the
    /// call that returns an arrival through memory.
    #[inline(always)]
    pub(crate) fn match_unexpected(&mut self, k: &Key) -> Option<Arrival> {
        if self.unexpected.is_empty() {
            return None;
        }
        self.search_unexpected(k)
    }

    /// [`Private::match_unexpected`] over a list that is not empty.
    #[inline(never)]
    fn search_unexpected(&mut self, k: &Key) -> Option<Arrival> {
        let i = self.unexpected.iter().position(|a| k.matches(&a.key))?;
        take_at(&mut self.unexpected, i)
    }
}

/// Takes entry `i` off `list`. A match is usually the oldest entry: that
/// one comes off the front without `remove`'s shifting logic.
pub(crate) fn take_at<T>(list: &mut VecDeque<T>, i: usize) -> Option<T> {
    if i == 0 {
        list.pop_front()
    } else {
        list.remove(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{from_sender, on_vci};

    /// Words that name a sending endpoint: a receive from a rank matches
    /// only its endpoint's, one from `ANY_SOURCE` every endpoint's (of
    /// its own context and VCI), and the status tells the endpoints apart.
    #[test]
    fn sending_endpoints() {
        let base = on_vci(8, 2);
        let from = |s: i32, j: u32| Key {
            source: s,
            tag: 5,
            context: from_sender(base, j),
        };
        let m = from(1, 3);
        assert!(from(1, 3).matches(&m));
        assert!(!from(1, 0).matches(&m) && !from(1, 2).matches(&m));
        let any = Key {
            source: ANY_SOURCE,
            tag: ANY_TAG,
            context: base,
        };
        assert!(any.matches(&m) && any.matches(&from(0, 0)));
        // Another context or VCI is not matched, whatever the endpoint.
        for other in [on_vci(10, 2), on_vci(8, 1), from_sender(8, 3)] {
            let k = Key {
                context: other,
                ..any
            };
            assert!(!k.matches(&m));
        }
        let st = crate::deliver::delivered(m, 0, 0);
        assert_eq!(st.source, 1 + 3 * crate::endpoint::SENDER_STRIDE);
        assert_eq!(crate::deliver::delivered(from(1, 0), 0, 0).source, 1);
    }
}
