//! Receives and probes that look on every VCI: the receive side of a
//! communicator whose messages may overtake each other (hmpi-core's
//! `mpi_assert_allow_overtaking`), whose senders spread the messages of
//! one (source, tag) pair over VCIs by sending thread
//! ([`Endpoint::thread_vci`]).
//!
//! A receive or probe names the context word [`on_every_vci`]`(c)`; the
//! engine's receive and probe entry points hand such a word here (one
//! branch on their path).
//!
//! * A probe looks at each VCI in turn, under that VCI's lock alone; a
//!   matched probe takes the first message it finds off its VCI's
//!   unexpected list, so no other receive can have it.
//! * A receive is posted on every VCI as one *part* per VCI, the parts
//!   sharing one claim word ([`OPEN`] until a part matches). Posting takes
//!   the VCIs one at a time, never two locks at once: on each it first
//!   looks for a matching unexpected message (and claims the receive
//!   before taking it), else posts its part; only on the first VCI does
//!   it take everything that has arrived beforehand (elsewhere what has
//!   not been taken meets the part at the next progress, as it meets any
//!   posted receive). Progress that matches a part
//!   against an arriving message claims the receive first (a compare and
//!   swap under that VCI's lock) and delivers only if it won; a part whose
//!   receive was claimed elsewhere is dropped by whichever progress meets
//!   it next. When the request completes (or is cancelled: the claim then
//!   becomes [`CANCELLED`]) it withdraws every part, collecting the
//!   winner's status.
//!
//! So a message is received exactly once, a receive receives at most one
//! message, and a receive can be matched by progress from the moment its
//! first part is posted — MPI's progress rule holds (a receive posted
//! before a send that waits for its own match does not deadlock).
//! Wildcards work: every part carries the receive's key. What is given up
//! is order between VCIs: messages of one sender on one VCI keep their
//! order, but a receive may match a later message that travelled on
//! another VCI, which is what the hint allows.
//!
//! A receive starts on the VCI of its own thread's index, so in a program
//! whose thread `i` talks to thread `i` a message that has arrived is
//! found on the first VCI, and the other parts are never posted.

use crate::endpoint::{on_vci, Endpoint, CONTEXT_MAX, VCI_SHIFT};
use crate::error::{Error, Result};
use crate::liveness::Watch;
use crate::matching::{take_at, Arrival, Key, PartClaim, RecvSlot, RecvState, Target, SPREAD_PART};
use crate::message::Message;
use crate::request::{Request, Status, StatusError};
use crate::stats::bump;
use crate::vci::Vci;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// The claim word of a receive no part has matched yet.
pub(crate) const OPEN: u32 = 0;
/// The claim word of a cancelled (or abandoned) receive.
pub(crate) const CANCELLED: u32 = u32::MAX;

/// The VCI field of a context word that asks for every VCI (above every
/// field [`on_vci`] makes).
const EVERY: u32 = 0xF;

/// The context word of a receive or probe in communicator context
/// `context` that looks on every VCI (see the module docs). For receives
/// and probes only: a message sent with it would match no receive.
///
/// ```
/// let w = vci::endpoint::on_every_vci(6);
/// assert!(vci::endpoint::is_every_vci(w));
/// assert!(!vci::endpoint::is_every_vci(vci::endpoint::on_vci(6, 7)));
/// assert_eq!(w & vci::endpoint::CONTEXT_MAX, 6);
/// ```
#[inline(always)]
pub const fn on_every_vci(context: u32) -> u32 {
    (context & CONTEXT_MAX) | (EVERY << VCI_SHIFT)
}

/// Whether context word `word` was made by [`on_every_vci`].
#[inline(always)]
pub const fn is_every_vci(word: u32) -> bool {
    word >> VCI_SHIFT == EVERY
}

/// The claim word's value when the part on VCI `v` matched.
fn mark(v: usize) -> u32 {
    v as u32 + 1
}

/// The calling thread's index: the lowest index no live thread holds,
/// taken when the thread first asks and given back when it ends (so a
/// process whose threads come and go, a pool re-created for each phase,
/// keeps small indices that map its `n` threads to `n` VCIs).
pub fn thread_index() -> usize {
    /// Indices handed out so far, and those given back.
    static POOL: Mutex<(usize, Vec<usize>)> = Mutex::new((0, Vec::new()));
    /// A thread's index, given back to the pool when the thread ends.
    struct Held(Cell<usize>);
    impl Drop for Held {
        fn drop(&mut self) {
            let i = self.0.get();
            if i != usize::MAX {
                let mut p = POOL.lock().unwrap_or_else(|e| e.into_inner());
                p.1.push(i);
            }
        }
    }
    thread_local! {
        static INDEX: Held = const { Held(Cell::new(usize::MAX)) };
    }
    let take = || {
        let mut p = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let (next, free) = &mut *p;
        match free.iter().enumerate().min_by_key(|&(_, &i)| i) {
            Some((k, _)) => free.swap_remove(k),
            None => {
                *next += 1;
                *next - 1
            }
        }
    };
    INDEX
        .try_with(|h| match h.0.get() {
            usize::MAX => {
                let i = take();
                h.0.set(i);
                i
            }
            i => i,
        })
        // A thread already being torn down: any index is correct.
        .unwrap_or(0)
}

/// A receive posted on several VCIs, as its request keeps it: the claim
/// its parts share and each part's (VCI, slot).
#[derive(Debug)]
pub(crate) struct Spread {
    claim: Arc<AtomicU32>,
    parts: Vec<(usize, u32)>,
    /// The receive's source and plain context (what a wait watches).
    pub(crate) source: i32,
    pub(crate) context: u32,
}

impl Spread {
    /// The claim word: [`OPEN`], [`CANCELLED`], or the mark of the VCI
    /// whose part matched.
    pub(crate) fn claimed(&self) -> u32 {
        // Acquire: pairs with the winning claim (see `PartClaim::claim`);
        // the delivered data itself is read under the VCI lock.
        self.claim.load(Ordering::Acquire)
    }

    /// Cancels the receive if no part has matched; whether it did.
    pub(crate) fn cancel(&self) -> bool {
        // AcqRel/Acquire: as for a part's claim.
        self.claim
            .compare_exchange(OPEN, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Progresses each part's VCI until a part has matched; the claim
    /// word then.
    pub(crate) fn progress(&self, ep: &Endpoint) -> u32 {
        for &(v, _) in &self.parts {
            match self.claimed() {
                OPEN => {
                    let vci = ep.vci_at(v);
                    vci.progress(&mut vci.lock());
                }
                won => return won,
            }
        }
        self.claimed()
    }

    /// Withdraws every part, one VCI lock at a time, once the claim is
    /// `won` (not [`OPEN`]); returns the status of the part that matched,
    /// or a cancelled status if none of these did.
    pub(crate) fn finish(&self, ep: &Endpoint, won: u32) -> Status {
        let mut st = Status::empty();
        st.cancelled = true;
        for &(v, id) in &self.parts {
            let vci = ep.vci_at(v);
            let mut g = vci.lock();
            if won == mark(v) {
                // The part matched in a critical section of this lock that
                // set its claim and its status together: it is done.
                if let Some(s) = vci.take_recv(&mut g, id) {
                    st = s;
                }
            }
            g.withdraw_part(id);
        }
        st
    }
}

/// What posting one part made of a receive.
enum Part {
    /// It took a message that had arrived: the receive's status.
    Matched(Status),
    /// It waits on the VCI under this slot.
    Posted(u32),
    /// Another part matched meanwhile: nothing posted here.
    Lost,
}

impl Vci {
    /// Posts one part of a receive with key `key` (see the module docs);
    /// `drain`: take everything that has arrived first (on the first
    /// VCI, where the receive most likely finds its message; elsewhere
    /// what has not been taken meets the posted part at the next
    /// progress, as it meets any posted receive).
    ///
    /// # Safety
    ///
    /// As for [`Vci::post_recv`]: the target stays valid until the part's
    /// slot is withdrawn or the status is returned.
    unsafe fn post_part(
        &self,
        target: Target,
        key: Key,
        claim: &Arc<AtomicU32>,
        mine: u32,
        drain: bool,
    ) -> Part {
        let mut guard = self.lock();
        let p = &mut *guard;
        // Acquire: as in `Spread::claimed`.
        if claim.load(Ordering::Acquire) != OPEN {
            return Part::Lost;
        }
        if drain {
            self.progress_all(p);
        }
        let part = PartClaim {
            word: claim.clone(),
            mine,
        };
        if let Some(i) = p.unexpected.iter().position(|a| key.matches(&a.key)) {
            if !part.claim() {
                return Part::Lost;
            }
            let Some(a) = take_at(&mut p.unexpected, i) else {
                unreachable!("the position was just found");
            };
            bump(&self.stats.matched_unexpected);
            // SAFETY: the arrival is ours (taken off the unexpected list);
            // the target is valid (caller's contract).
            return Part::Matched(unsafe { self.deliver(a, target) });
        }
        let id = p.insert(RecvSlot {
            target,
            state: RecvState::Posted,
            claim: Some(part),
        });
        p.posted.push_back((key, id | SPREAD_PART));
        Part::Posted(id)
    }
}

impl Endpoint {
    /// The context word of a send in context `context` by the calling
    /// thread on a communicator that lets its messages overtake: the VCI
    /// `(context + thread index) % vci_count()`, so that threads sending
    /// at once use different VCIs (a receive then looks on every VCI:
    /// [`on_every_vci`]).
    #[inline]
    pub fn thread_vci(&self, context: u32) -> u32 {
        match self.vci_count() {
            1 => context,
            n => on_vci(context, (context as usize + thread_index()) % n),
        }
    }

    /// Every VCI's (number, context word) for plain context `context`, from
    /// the calling thread's own VCI on, as [`Endpoint::thread_vci`] makes
    /// them (with one VCI: the plain context).
    fn every_vci(&self, context: u32) -> impl Iterator<Item = (usize, u32)> {
        let n = self.vci_count();
        let first = (context as usize + thread_index()) % n;
        (0..n).map(move |j| match n {
            1 => (0, context),
            _ => {
                let v = (first + j) % n;
                (v, on_vci(context, v))
            }
        })
    }

    /// Posts a receive with `source`, `tag` (either may be a wildcard)
    /// and a word of [`on_every_vci`] on every VCI (see the module docs).
    ///
    /// # Safety
    ///
    /// The target stays valid until the returned request completes; the
    /// request is completed or dropped, never leaked.
    #[cold]
    pub(crate) unsafe fn post_spread(
        &self,
        target: Target,
        source: i32,
        tag: i32,
        context: u32,
    ) -> Request<'_> {
        let context = context & CONTEXT_MAX;
        let claim = Arc::new(AtomicU32::new(OPEN));
        let mut spread = Spread {
            claim,
            parts: Vec::with_capacity(self.vci_count()),
            source,
            context,
        };
        let mut first = None;
        for (v, word) in self.every_vci(context) {
            first.get_or_insert(v);
            let key = Key {
                source,
                tag,
                context: word,
            };
            let drain = spread.parts.is_empty();
            // SAFETY: the caller's contract: the target stays valid until
            // the request (which withdraws every part) completes.
            match unsafe {
                self.vci_at(v)
                    .post_part(target, key, &spread.claim, mark(v), drain)
            } {
                Part::Posted(id) => spread.parts.push((v, id)),
                Part::Matched(st) => {
                    spread.finish(self, mark(v));
                    return Request::complete(self, v, st);
                }
                Part::Lost => break,
            }
        }
        Request::spread(self, first.unwrap_or(0), spread)
    }

    /// A blocking receive on every VCI (see [`Endpoint::recv`]): posted,
    /// then waited for.
    ///
    /// # Safety
    ///
    /// The target is valid for the duration of the call.
    #[cold]
    pub(crate) unsafe fn recv_spread(
        &self,
        target: Target,
        key: Key,
        out: &mut Status,
    ) -> Result<()> {
        // SAFETY: the request is waited for here, while the target is
        // valid (caller's contract).
        let mut r = unsafe { self.post_spread(target, key.source, key.tag, key.context) };
        *out = *r.wait_in_place();
        match out.error {
            Some(StatusError::ProcFailed { rank }) => Err(Error::ProcFailed { rank }),
            _ => Ok(()),
        }
    }

    /// The status of the earliest message matching `key` (a word of
    /// [`on_every_vci`]) on the first VCI that has one.
    #[cold]
    pub(crate) fn iprobe_spread(&self, key: Key) -> Option<Status> {
        self.every_vci(key.context & CONTEXT_MAX)
            .find_map(|(v, context)| {
                let vci = self.vci_at(v);
                vci.iprobe(&mut vci.lock(), Key { context, ..key })
            })
    }

    /// Takes the earliest message matching `key` (a word of
    /// [`on_every_vci`]) on the first VCI that has one (a matched probe).
    #[cold]
    pub(crate) fn improbe_spread(&self, key: Key) -> Option<(Message<'_>, Status)> {
        self.every_vci(key.context & CONTEXT_MAX)
            .find_map(|(v, context)| {
                let vci = self.vci_at(v);
                let found: Option<(Arrival, Status)> =
                    vci.take_unexpected(&mut vci.lock(), Key { context, ..key });
                found.map(|(a, st)| (Message::new(self, v, Some(a), st), st))
            })
    }

    /// Waits until [`Endpoint::iprobe_spread`] finds a message.
    #[cold]
    pub(crate) fn probe_spread(&self, key: Key) -> Result<Status> {
        let (first, _) = self
            .every_vci(key.context & CONTEXT_MAX)
            .next()
            .unwrap_or((0, 0));
        self.wait_on(first, self.watch_key(key), |_| self.iprobe_spread(key))
            .map_err(|rank| Error::ProcFailed { rank })
    }

    /// Waits until [`Endpoint::improbe_spread`] takes a message.
    #[cold]
    pub(crate) fn mprobe_spread(&self, key: Key) -> Result<(Message<'_>, Status)> {
        let (first, _) = self
            .every_vci(key.context & CONTEXT_MAX)
            .next()
            .unwrap_or((0, 0));
        self.wait_on(first, self.watch_key(key), |_| self.improbe_spread(key))
            .map_err(|rank| Error::ProcFailed { rank })
    }

    fn watch_key(&self, key: Key) -> Watch {
        Watch::source(key.source, key.context & CONTEXT_MAX)
    }
}
