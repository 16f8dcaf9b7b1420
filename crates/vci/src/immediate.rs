//! The immediate protocol: the payload travels with the message's header.
//!
//! A message of up to `eager_max` bytes is copied by the sender into the
//! message itself, and the send is complete at once. A small one (at most
//! [`crate::fastbox::FB_SPAN_MAX`] bytes, whatever `eager_max` is; not
//! synchronous) goes into the destination's per-sender fast-box ring
//! ([`crate::fastbox`]) when the ring has credit for it — one slot up to
//! [`crate::fastbox::FB_PAYLOAD`] bytes, consecutive slots beyond: this
//! module holds that send path and the receive paths that take a message
//! straight from its slots. A message up to `eager_max` bytes that does not
//! go there travels inline in an envelope ([`crate::envelope`]), and the
//! receiver copies it out and frees the envelope ([`crate::deliver`]); a
//! larger one takes the protocol its size and buffer choose
//! ([`crate::endpoint`]).

use crate::deliver::delivered;
use crate::endpoint::Endpoint;
use crate::envelope::Protocol;
use crate::error::Result;
use crate::fastbox::{FbHead, FbPair, SlotData, Small, FB_PAYLOAD, KIND_PLAIN};
use crate::matching::{Arrival, Key, Private, Target};
use crate::owned::Given;
use crate::request::Status;
use crate::stats::{bump, bump_locked};
use crate::vci::Vci;
use crate::{PROC_NULL, TAG_UB};
use std::ptr;
use std::sync::atomic::Ordering;

impl Vci {
    /// Whether the next message of `key.source` waits in its fast box and
    /// matches `key`; if so, it is delivered to `target` (a plain one into
    /// a buffer straight from its slot) and its status written to `out`.
    /// The caller made sure that nothing posted or unexpected comes first.
    ///
    /// The target is borrowed, not copied: a copy of the receive's target
    /// made here was read back with wider loads than it had just been
    /// written with, a stall on every small receive (see
    /// docs/performance.md, "Store forwarding").
    ///
    /// # Safety
    ///
    /// As for [`Vci::recv_now`].
    #[inline(always)]
    pub(crate) unsafe fn take_direct(
        &self,
        p: &mut Private,
        key: Key,
        target: &Target,
        out: &mut Status,
    ) -> bool {
        let Ok(source) = usize::try_from(key.source) else {
            return false;
        };
        let Some(fb) = self.rings.get(source) else {
            return false;
        };
        let e = &self.expected[source];
        // Relaxed: written only under the lock, which we hold.
        let seq = e.load(Ordering::Relaxed);
        let Some(head) = fb.head(seq) else {
            return false;
        };
        let found = Key {
            source: key.source,
            tag: head.tag,
            context: head.context,
        };
        if !key.matches(&found) {
            return false;
        }
        // SAFETY: `head` came from this slot just now, under the lock; the
        // target is valid (caller's contract).
        unsafe { self.deliver_slot_in(fb, seq, head, found, target, out) };
        // Relaxed: as above; lock-free readers take it as a hint. The
        // next message starts after this one's slots.
        e.store(seq + head.slots(), Ordering::Relaxed);
        self.note_event(p);
        true
    }

    /// Delivers fast-box message `seq` (header `head`, key `key`) straight
    /// from its slot to `target` — a plain payload into a buffer, a given
    /// block's record — hands the slot back to the sender, and writes the
    /// status to `out` (in place: see [`Vci::recv_now`]).
    ///
    /// # Safety
    ///
    /// `head` is what [`FbPair::head`] returned for `seq` under the VCI
    /// lock, and nothing took the message since; the target is valid (see
    /// [`Vci::deliver`]).
    ///
    /// A plain payload into a buffer (what a small receive is) is copied
    /// here; the other cases are out of line (see docs/performance.md,
    /// "Fast-box slots").
    #[inline(always)]
    pub(crate) unsafe fn deliver_slot(
        &self,
        fb: &FbPair,
        seq: u64,
        head: FbHead,
        key: Key,
        target: Target,
        out: &mut Status,
    ) {
        // SAFETY: the caller's contract.
        unsafe { self.deliver_slot_in(fb, seq, head, key, &target, out) }
    }

    /// [`Vci::deliver_slot`] with the target borrowed (see
    /// [`Vci::take_direct`]).
    ///
    /// # Safety
    ///
    /// As for [`Vci::deliver_slot`].
    #[inline(always)]
    pub(crate) unsafe fn deliver_slot_in(
        &self,
        fb: &FbPair,
        seq: u64,
        head: FbHead,
        key: Key,
        target: &Target,
        out: &mut Status,
    ) {
        match *target {
            Target::Buffer { buf, cap } if head.kind == KIND_PLAIN => {
                let (len, n) = (head.len as usize, (head.len as usize).min(cap));
                // SAFETY: `buf` holds `cap >= n` bytes (caller's contract).
                unsafe { fb.take_into(seq, head, buf, n) };
                bump_locked(&self.stats.slot.plain);
                *out = delivered(key, len, n);
            }
            // SAFETY: the caller's contract.
            _ => *out = unsafe { self.deliver_slot_other(fb, seq, head, key, *target) },
        }
    }

    /// [`Vci::deliver_slot`] for a given block's record, or a plain
    /// payload to a target that is not a buffer.
    ///
    /// # Safety
    ///
    /// As for [`Vci::deliver_slot`].
    #[inline(never)]
    unsafe fn deliver_slot_other(
        &self,
        fb: &FbPair,
        seq: u64,
        head: FbHead,
        key: Key,
        target: Target,
    ) -> Status {
        if head.is_owned() {
            let rec = fb.take_owned(seq, head);
            let given = Given {
                addr: rec.addr as *mut u8,
                info: rec.info,
                len: head.len as usize,
            };
            // SAFETY: the given block is ours now (the sender gave it up);
            // the target is valid (caller's contract); we hold the VCI lock
            // (caller's contract).
            unsafe { self.deliver_given(key, given, target, true) }
        } else {
            let a = Arrival::small(key.source as u32, fb.take(seq, head));
            // SAFETY: the arrival is ours (just taken); the target is valid
            // (caller's contract).
            unsafe { self.deliver(a, target) }
        }
    }

    /// Delivers a plain fast-box message.
    ///
    /// # Safety
    ///
    /// The target is valid (see [`Vci::deliver`]).
    pub(crate) unsafe fn deliver_small(&self, key: Key, small: &Small, target: Target) -> Status {
        let data = small.data();
        let copy = |buf: *mut u8, cap: usize| {
            let n = data.len().min(cap);
            // SAFETY: `data` holds `n` bytes; `buf` is valid for `cap >= n`
            // bytes (caller's contract) and distinct from our copy.
            unsafe { ptr::copy_nonoverlapping(data.as_ptr(), buf, n) };
            bump(&self.stats.received[Protocol::Immediate as usize - 1]);
            bump(&self.stats.recv_fastbox);
            delivered(key, data.len(), n)
        };
        match target {
            Target::Buffer { buf, cap } => copy(buf, cap),
            Target::Owned { out, align } => {
                let (block, st) =
                    self.fresh_block(data.len(), align, [0; 4], false, |b| copy(b, data.len()));
                // SAFETY: `out` is valid for a write (caller's contract).
                unsafe { out.write(block) };
                st
            }
        }
    }
}

impl Endpoint {
    /// The fast-box path of a standard send: if `buf` is small enough, the
    /// tag a sendable one and `dest` a rank, tries `dest`'s fast box and
    /// returns the VCI the message went through. `None`: the general path
    /// ([`Endpoint::start_send`]) is the one to take (it also reports a bad
    /// tag and handles `PROC_NULL`).
    #[inline(always)]
    pub(crate) fn send_through_fastbox(
        &self,
        buf: &[u8],
        dest: i32,
        tag: i32,
        context: u32,
    ) -> Result<Option<usize>> {
        if buf.len() < self.fastbox_below && (0..=TAG_UB).contains(&tag) && dest != PROC_NULL {
            let d = self.check_rank(dest)?;
            let v = self.vci_of(context);
            if self.try_fastbox(d, v, tag, context, buf) {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Tries to send `buf` through `dest`'s fast box of VCI `v`; returns
    /// whether it did.
    #[inline(always)]
    fn try_fastbox(&self, dest: u32, v: usize, tag: i32, context: u32, buf: &[u8]) -> bool {
        let head = FbHead {
            tag,
            context,
            len: buf.len() as u32,
            kind: KIND_PLAIN,
        };
        if buf.len() > FB_PAYLOAD {
            return self.try_span(dest, v, head, buf);
        }
        self.try_slot(dest, v, head, SlotData::Bytes(buf))
    }

    /// [`Endpoint::try_fastbox`] for a payload longer than a slot's (up to
    /// [`crate::fastbox::FB_SPAN_MAX`] bytes): several consecutive slots, if the ring has
    /// credit for them (out of line: the one-slot send stays short).
    #[cold]
    #[inline(never)]
    fn try_span(&self, dest: u32, v: usize, head: FbHead, buf: &[u8]) -> bool {
        let lane = &self.lanes[self.lane_index(dest, v)];
        let Some(fb) = lane.ring() else {
            return false;
        };
        let sent = {
            let mut l = lane.lock();
            let sent = fb.try_send_span(&mut l, head, buf);
            if sent {
                l.fastbox_sent += 1;
            }
            sent
        };
        if sent {
            self.peer0(dest).ring();
        }
        sent
    }

    /// Tries to put a message (header `head`, then `data`) into `dest`'s
    /// fast box of VCI `v`; returns whether it did.
    #[inline(always)]
    pub(crate) fn try_slot(&self, dest: u32, v: usize, head: FbHead, data: SlotData<'_>) -> bool {
        let lane = &self.lanes[self.lane_index(dest, v)];
        let Some(fb) = lane.ring() else {
            return false;
        };
        let sent = {
            let mut l = lane.lock();
            let sent = fb.try_send(&mut l, head, data);
            if sent {
                if head.is_owned() {
                    l.owned_sent += 1;
                } else {
                    l.fastbox_sent += 1;
                }
            }
            sent
        };
        if sent {
            self.peer0(dest).ring();
        }
        sent
    }
}
