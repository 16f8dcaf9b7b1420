//! Delivery: moving a matched message's data to its receive and letting
//! go of the message.
//!
//! [`Vci::deliver`] dispatches an arrival by its carrier (an envelope, or a
//! fast-box message copied out of its slot) and by its target (a buffer, or
//! a fresh block for an ownership receive); [`Vci::deliver_into`] copies an
//! envelope's payload by its protocol — inline ([`crate::immediate`]), from
//! the sender's heap buffer ([`crate::single_copy`], large ones
//! [`crate::synergistic`]), with `process_vm_readv`
//! ([`crate::kernel_assisted`]), from a bounce buffer ([`crate::two_copy`])
//! — then completes the envelope for its sender or frees it. Given blocks
//! go to [`crate::owned`].

use crate::endpoint::status_source;
use crate::envelope::{Envelope, Protocol};
use crate::matching::{Arrival, Carrier, Key, Target};
use crate::owned::Given;
use crate::request::{Status, StatusError};
use crate::single_copy::hand_back;
use crate::stats::bump;
use crate::vci::Vci;
use std::ptr::{self, NonNull};

/// The status of a delivery of `n` of a message's `len` bytes (truncated
/// if `n < len`).
pub(crate) fn delivered(key: Key, len: usize, n: usize) -> Status {
    Status {
        source: status_source(key.source, key.context),
        tag: key.tag,
        count: n as u64,
        error: (n < len).then_some(StatusError::Truncate {
            message_len: len as u64,
        }),
        cancelled: false,
    }
}

impl Vci {
    /// Delivers arrival `a` to `target` and lets go of it.
    ///
    /// # Safety
    ///
    /// `a` came from this VCI's progress and was not delivered yet; the
    /// target is valid: a buffer for `cap` bytes of writes (and not
    /// otherwise in use), or an `out` location valid for a write.
    pub(crate) unsafe fn deliver(&self, a: Arrival, target: Target) -> Status {
        match a.carrier {
            Carrier::Envelope(env) => {
                // SAFETY: the arrival's envelope is ours until we let go.
                if unsafe { env.as_ref() }.protocol() == Protocol::Owned {
                    // SAFETY: an owned envelope, ours (caller's contract).
                    let given = unsafe { Given::from_envelope(env) };
                    // SAFETY: the caller's contract.
                    return unsafe { self.deliver_given(a.key, given, target, false) };
                }
                match target {
                    // SAFETY: the caller's contract.
                    Target::Buffer { buf, cap } => unsafe { self.deliver_into(env, buf, cap) },
                    Target::Owned { out, align } => {
                        let len = a.len as usize;
                        // SAFETY: the caller's contract; a fresh block holds
                        // `len` writable bytes.
                        let (block, st) = self.fresh_block(len, align, [0; 4], false, |b| unsafe {
                            self.deliver_into(env, b, len)
                        });
                        // SAFETY: `out` is valid for a write (caller's
                        // contract).
                        unsafe { out.write(block) };
                        st
                    }
                }
            }
            Carrier::Small(small) => match small.owned() {
                Some(rec) => {
                    let given = Given {
                        addr: rec.addr as *mut u8,
                        info: rec.info,
                        len: small.head.len as usize,
                    };
                    // SAFETY: the given block is ours now (the sender gave
                    // it up); the caller's contract for the target.
                    unsafe { self.deliver_given(a.key, given, target, false) }
                }
                // SAFETY: the caller's contract.
                None => unsafe { self.deliver_small(a.key, &small, target) },
            },
        }
    }

    /// Copies `env`'s payload into `buf` (`cap` bytes) and lets go of `env`.
    ///
    /// # Safety
    ///
    /// `env` is an envelope this VCI popped and has not let go of, not an
    /// owned one (those go through [`Vci::deliver_given`]); `buf` is valid
    /// for `cap` bytes of writes (and not otherwise in use).
    pub(crate) unsafe fn deliver_into(
        &self,
        env: NonNull<Envelope>,
        buf: *mut u8,
        cap: usize,
    ) -> Status {
        // SAFETY: valid until we let go below (caller's contract).
        let e = unsafe { env.as_ref() };
        let len = e.len();
        let n = (len.min(cap as u64)) as usize;
        let proto = e.protocol();
        let mut error = (len > n as u64).then_some(StatusError::Truncate { message_len: len });
        if n > 0 {
            match proto {
                Protocol::KernelAssisted => {
                    // SAFETY: the caller's contract (a kernel-assisted
                    // envelope, ours until we complete it below).
                    if let Some(err) = unsafe { self.read_kernel_assisted(e, buf, n) } {
                        error = Some(err);
                    }
                }
                Protocol::SingleCopy
                    if n as u64 >= self.syn_min
                        && shmheap::is_shared(buf)
                        // SAFETY: `n - 1 < cap`: inside the buffer.
                        && shmheap::is_shared(unsafe { buf.add(n - 1) }) =>
                {
                    // SAFETY: the caller's contract (a single-copy
                    // envelope, ours until we complete it below; `buf`
                    // holds `cap >= n` bytes in the node heap).
                    unsafe { self.copy_synergistic(env, e, buf, n) }
                }
                Protocol::Immediate
                | Protocol::SingleCopy
                | Protocol::TwoCopy
                | Protocol::Owned => {
                    let src: *const u8 = match proto {
                        Protocol::Immediate => Envelope::inline_ptr(env),
                        _ => e.data() as *const u8,
                    };
                    // SAFETY: `src` holds `len >= n` bytes: the inline area,
                    // the sender's heap buffer (borrowed by its pending
                    // request until we complete the envelope) or the
                    // envelope's bounce buffer; `buf` is valid for `cap >= n`
                    // bytes and is a distinct buffer (a receive buffer is
                    // borrowed mutably by its request).
                    unsafe { ptr::copy_nonoverlapping(src, buf, n) };
                }
            }
        }
        bump(&self.stats.received[proto as usize - 1]);
        let status = Status {
            source: status_source(e.source() as i32, e.context()),
            tag: e.tag(),
            count: n as u64,
            error,
            cancelled: false,
        };
        let sender_frees =
            e.is_sync() || matches!(proto, Protocol::SingleCopy | Protocol::KernelAssisted);
        if sender_frees {
            hand_back(e);
        } else {
            // SAFETY: the envelope (and bounce buffer) is ours alone: the
            // sender let go of it when it queued it (not synchronous).
            unsafe { Envelope::destroy(env) };
        }
        status
    }
}
