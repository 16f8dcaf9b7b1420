//! The single-copy protocol: the receiver copies straight from the
//! sender's buffer in the node heap.
//!
//! A send buffer above `eager_max` that lies in the node heap (a program
//! whose global allocator is `shmheap::ShmHeap`) is mapped at the same
//! address in every rank: the envelope carries its address, and the
//! receiver copies the payload once, into the receive buffer — in blocks
//! shared with the sender when the message is large and the receive buffer
//! is in the heap too ([`crate::synergistic`]). The send's request stays
//! pending, borrowing the buffer, until the receiver hands the envelope
//! back ([`hand_back`]): it stores the completion word (Release), and the
//! sender's request sees it (Acquire) and frees the envelope. The
//! kernel-assisted copy ([`crate::kernel_assisted`]) and every synchronous
//! send end the same way.

use crate::envelope::Envelope;
use crate::vci::VciShared;

/// Hands envelope `e` back to its sender after the receive is done with
/// it (single copy, kernel assisted, every synchronous send): completes it
/// and rings the sender's doorbell. From the completion on the sender may
/// free the envelope, so `e` is not touched after it.
#[inline(always)]
pub(crate) fn hand_back(e: &Envelope) {
    let reply = e.reply() as *const VciShared;
    e.complete();
    // From here on the sender may free the envelope.
    // SAFETY: `reply` is the sender's VciShared, which lives in its
    // arena for the rest of the job (never freed).
    unsafe { &*reply }.ring();
}
