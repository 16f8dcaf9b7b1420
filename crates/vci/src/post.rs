//! Posting receives, blocking receive attempts, cancelling, and probes.
//!
//! A new receive first takes what has arrived, then matches the earliest
//! matching unexpected message, or is appended to the posted list (where
//! [`crate::progress`] matches it against later arrivals). A blocking
//! receive is not posted: each attempt takes the earliest matching message
//! that has arrived. A probe looks at the unexpected list after taking
//! everything that has arrived; a matched probe takes the message off it.

use crate::matching::{Arrival, Key, Private, RecvSlot, RecvState, Target};
use crate::request::Status;
use crate::stats::bump;
use crate::vci::Vci;

/// What [`Vci::post_recv`] made of a receive.
pub(crate) enum Posted<P = (), E = std::convert::Infallible> {
    /// It matched an unexpected message and is finished: its status.
    Matched(Status),
    /// It waits for a message under this id, with the place its caller
    /// gave for its request.
    Waiting(u32, P),
    /// It would have waited, but its caller had no place for its request
    /// (why): it was not posted.
    NoPlace(E),
}

impl Vci {
    /// Posts a receive; matches the earliest matching unexpected message
    /// first. A receive that matched is finished at once (its status);
    /// otherwise `place` is asked (under the lock, before the receive is
    /// posted) where its request will live, and it waits under an id
    /// unless there is no place.
    ///
    /// # Safety
    ///
    /// The target is valid (a buffer for `cap` bytes of writes, or an `out`
    /// location for a write) until the call returns a status, or until
    /// the waiting receive's slot is collected by [`Vci::take_recv`] (done
    /// or cancelled).
    ///
    /// Always inlined (its callers are the engine's two receive entry
    /// points, themselves inlined into the caller): a receive that matched
    /// at once hands its status over in registers, not through memory that
    /// the caller reads back at once (see docs/performance.md, "Store
    /// forwarding").
    #[inline(always)]
    pub(crate) unsafe fn post_recv<P, E>(
        &self,
        target: Target,
        source: i32,
        tag: i32,
        context: u32,
        place: impl FnOnce() -> Result<P, E>,
    ) -> Posted<P, E> {
        let key = Key {
            source,
            tag,
            context,
        };
        let mut guard = self.lock();
        let p = &mut *guard;
        // What has arrived first: the unexpected list holds a prefix of
        // each sender's messages (progress takes them in sequence), so a
        // match there is the earliest one from its sender, and the
        // messages still in the fast boxes can wait for the next
        // progress. Only without a match does progress run now.
        let mut matched = p.match_unexpected(&key);
        if matched.is_none() && !p.posted.is_empty() {
            // Receives posted before this one come first: serve them with
            // what has arrived (which may leave a match for this one).
            self.progress(p);
            matched = p.match_unexpected(&key);
        }
        if matched.is_none() && p.posted.is_empty() {
            // Nothing unexpected matches and no receive posted before
            // this one could claim it: the next message of a named source,
            // if it waits in its fast box and matches, goes straight from
            // its slot (as a blocking receive's does), not through the
            // unexpected list.
            let mut st = Status::empty();
            // SAFETY: the target is valid (caller's contract).
            if unsafe { self.take_direct(p, key, &target, &mut st) } {
                return Posted::Matched(st);
            }
            // Any source, or the next message does not match: look at
            // everything that has arrived.
            self.progress_all(p);
            matched = p.match_unexpected(&key);
        }
        if let Some(a) = matched {
            bump(&self.stats.matched_unexpected);
            // No slot: the request is finished before anyone sees it, so
            // completing it later needs neither the lock nor a lookup.
            // SAFETY: the arrival is ours (taken off the unexpected list);
            // the target is valid (caller's contract).
            return Posted::Matched(unsafe { self.deliver(a, target) });
        }
        let at = match place() {
            Ok(at) => at,
            Err(e) => return Posted::NoPlace(e),
        };
        let id = p.insert(RecvSlot {
            target,
            state: RecvState::Posted,
            claim: None,
        });
        p.posted.push_back((key, id));
        Posted::Waiting(id, at)
    }

    /// One attempt of a blocking receive (under the lock): delivers the
    /// earliest message matching `key` that has arrived to `target`,
    /// writes its status to `out` and returns `true`; `false` (and `out`
    /// as it was) if none has arrived (in place: see docs/performance.md,
    /// "Store forwarding").
    ///
    /// A blocking receive is not posted: between its attempts, messages
    /// that other threads' progress takes go to their posted receives
    /// first, else to the unexpected list, where the next attempt finds
    /// them. (Concurrent receives of several threads have no order in
    /// MPI, which also promises no fairness between them.) When no
    /// receive is posted and nothing unexpected matches, the next message
    /// of a named source that waits in its fast box and matches is the
    /// earliest match: it is delivered straight from the slot.
    ///
    /// # Safety
    ///
    /// The target is valid (see [`Vci::deliver`]) for the duration of the
    /// call.
    pub(crate) unsafe fn recv_now(
        &self,
        p: &mut Private,
        key: Key,
        target: Target,
        out: &mut Status,
    ) -> bool {
        if p.posted.is_empty() && !p.unexpected.iter().any(|a| key.matches(&a.key)) {
            // SAFETY: the caller's contract.
            if unsafe { self.take_direct(p, key, &target, out) } {
                return true;
            }
        }
        self.progress_all(p);
        let Some(a) = p.match_unexpected(&key) else {
            return false;
        };
        bump(&self.stats.matched_unexpected);
        // SAFETY: the arrival is ours (taken off the unexpected list); the
        // target is valid (caller's contract).
        *out = unsafe { self.deliver(a, target) };
        true
    }

    /// The status of receive `id` if it is finished (done or cancelled),
    /// forgetting it; `None` while it is posted.
    pub(crate) fn take_recv(&self, p: &mut Private, id: u32) -> Option<Status> {
        match p.slot_mut(id).map(|s| &s.state) {
            Some(RecvState::Posted) => None,
            Some(RecvState::Done(_)) => match p.remove(id).map(|s| s.state) {
                Some(RecvState::Done(st)) => Some(st),
                _ => None,
            },
            // Unknown ids do not exist: requests collect their slot once.
            None => Some(Status::empty()),
        }
    }

    /// Cancels receive `id` if it has not matched yet. Returns whether it
    /// was cancelled.
    pub(crate) fn cancel_recv(&self, id: u32) -> bool {
        let mut guard = self.lock();
        let p = &mut *guard;
        self.progress(p);
        let Some(i) = p.posted.iter().position(|&(_, x)| x == id) else {
            return false;
        };
        p.posted.remove(i);
        self.note_event(p);
        if let Some(slot) = p.slot_mut(id) {
            let mut st = Status::empty();
            st.cancelled = true;
            slot.state = RecvState::Done(st);
        }
        true
    }

    /// The status of the earliest unexpected message matching the key,
    /// after taking what has arrived.
    pub(crate) fn iprobe(&self, p: &mut Private, key: Key) -> Option<Status> {
        self.progress_all(p);
        p.unexpected
            .iter()
            .find(|a| key.matches(&a.key))
            .map(Arrival::status)
    }

    /// Removes the earliest unexpected message matching the key (after
    /// taking what has arrived) and returns it with its status: a matched
    /// probe. The arrival is the caller's, to pass to [`Vci::deliver`]
    /// exactly once.
    pub(crate) fn take_unexpected(&self, p: &mut Private, key: Key) -> Option<(Arrival, Status)> {
        self.progress_all(p);
        let a = p.match_unexpected(&key)?;
        bump(&self.stats.matched_probe);
        let st = a.status();
        Some((a, st))
    }
}
