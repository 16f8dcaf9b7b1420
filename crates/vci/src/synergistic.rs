//! The synergistic copy: receiver and sender copy a large single-copy
//! message together, in blocks.
//!
//! A single-copy envelope ([`crate::single_copy`]) carries a second cache
//! line, [`SynCopy`]: the receive buffer's heap address, the length to
//! copy, the block size, a "help wanted" flag, a claim counter (byte
//! offset) and a finished-bytes counter. A receiver whose buffer is in the
//! node heap and whose message is at least `synergistic_min` bytes fills it
//! in, raises the flag (Release), rings the sender's doorbell and claims
//! blocks with `fetch_add` on the claim counter; a sender inside the
//! library (testing or waiting on the send) that sees the flag (Acquire)
//! claims blocks too. After each block the copier adds its bytes to the
//! finished counter (Release); the receiver waits until it reaches the
//! length (Acquire), so every block is in its buffer before it completes
//! the envelope. The receiver alone can always finish: it claims blocks
//! until none is left.

use crate::envelope::{Envelope, LINE};
use crate::stats::{add, bump};
use crate::vci::{Vci, VciShared};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The synergistic-copy line of a single-copy envelope (see the module
/// docs). All-zero is the initial state: nobody asked for help.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct SynCopy {
    /// 1 once the receiver asks for help (the other fields are set).
    help: AtomicU32,
    _pad: u32,
    /// Heap address of the receive buffer.
    dst: AtomicU64,
    /// Bytes to copy (the message, or the receive buffer if shorter).
    len: AtomicU64,
    /// Block size.
    block: AtomicU64,
    /// Claim counter: byte offset of the next unclaimed block.
    next: AtomicU64,
    /// Bytes copied so far, by anyone.
    done: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<SynCopy>() == LINE);

impl SynCopy {
    pub(crate) const fn new() -> Self {
        SynCopy {
            help: AtomicU32::new(0),
            _pad: 0,
            dst: AtomicU64::new(0),
            len: AtomicU64::new(0),
            block: AtomicU64::new(0),
            next: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }

    /// The receiver asks for help copying `len` bytes into `dst` (a heap
    /// address) in blocks of `block` bytes.
    pub(crate) fn ask_for_help(&self, dst: *mut u8, len: u64, block: u64) {
        // Relaxed (three stores): published by the Release store of `help`.
        self.dst.store(dst as u64, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.block.store(block.max(1), Ordering::Relaxed);
        // SYNC POINT: Release pairs with the Acquire load in `copy_blocks`:
        // a helper that sees the flag sees the destination, length and
        // block size.
        self.help.store(1, Ordering::Release);
    }

    /// If help is wanted, claims and copies blocks from `src` (the sender's
    /// buffer, `len` bytes) until none is left. Returns the blocks copied.
    ///
    /// # Safety
    ///
    /// `src` is the message's payload (valid for the message's length, not
    /// written while the envelope is pending); the envelope is not
    /// completed yet (the receiver completes it only after every claimed
    /// block is finished, and keeps its buffer alive until then).
    pub(crate) unsafe fn copy_blocks(&self, src: *const u8) -> u64 {
        // SYNC POINT: Acquire pairs with the Release store in
        // `ask_for_help` (see there).
        if self.help.load(Ordering::Acquire) == 0 {
            return 0;
        }
        // Relaxed (three loads): ordered after the Acquire above.
        let dst = self.dst.load(Ordering::Relaxed) as *mut u8;
        let len = self.len.load(Ordering::Relaxed);
        let block = self.block.load(Ordering::Relaxed);
        let mut blocks = 0;
        loop {
            // Relaxed: a hint; a waiting sender polls here often, and a
            // plain load keeps it from bouncing the line with RMWs once
            // every block is claimed.
            if self.next.load(Ordering::Relaxed) >= len {
                return blocks;
            }
            // Relaxed: the claim counter only hands out disjoint ranges
            // (atomicity of the RMW); the copied bytes are published by the
            // Release add on `done`. Overshoot past `len` is bounded by
            // (copiers x block), far from overflow.
            let off = self.next.fetch_add(block, Ordering::Relaxed);
            if off >= len {
                return blocks;
            }
            let n = block.min(len - off);
            // SAFETY: `[off, off + n)` is inside both buffers and claimed
            // by us alone; `src` is valid (caller's contract) and `dst` is
            // the receive buffer, kept alive by the receiver until `done`
            // reaches `len`; the buffers are distinct.
            unsafe {
                ptr::copy_nonoverlapping(src.add(off as usize), dst.add(off as usize), n as usize)
            };
            // SYNC POINT: Release pairs with the Acquire load in
            // `wait_finished`: this block's bytes are in the receive
            // buffer before the receiver sees them counted.
            self.done.fetch_add(n, Ordering::Release);
            blocks += 1;
        }
    }

    /// Waits until every byte is copied (the receiver, after its own
    /// `copy_blocks` found nothing left to claim).
    pub(crate) fn wait_finished(&self) {
        // Relaxed: set by `ask_for_help`, earlier in this thread.
        let len = self.len.load(Ordering::Relaxed);
        let mut backoff = shmheap::sync::futex::Backoff::new();
        // SYNC POINT: Acquire pairs with the helpers' Release adds: every
        // block counted is in the receive buffer.
        while self.done.load(Ordering::Acquire) < len {
            // A helper is in the middle of one block: spin, then yield.
            backoff.snooze();
        }
    }
}

impl Vci {
    /// Copies the first `n` bytes of single-copy envelope `env` (`e`) into
    /// `buf` synergistically: asks the sender for help, rings it, claims
    /// blocks until none is left and waits until every claimed block is
    /// copied (a plain copy if the envelope has no synergistic line).
    ///
    /// # Safety
    ///
    /// `env` (`e`) is a single-copy envelope this VCI popped and has not
    /// completed, with at least `n` bytes; `buf` is valid for `n` bytes of
    /// writes (and not otherwise in use) and lies in the node heap.
    #[inline(always)]
    pub(crate) unsafe fn copy_synergistic(
        &self,
        env: NonNull<Envelope>,
        e: &Envelope,
        buf: *mut u8,
        n: usize,
    ) {
        // SAFETY: the envelope is ours until we complete it
        // below, after the copy.
        let syn = unsafe { Envelope::syn(env) };
        match syn {
            Some(syn) => {
                syn.ask_for_help(
                    buf,
                    n as u64,
                    crate::config::synergistic_block(n as u64, self.syn_block),
                );
                // The sender may sleep in `wait`: wake it so it
                // helps.
                // SAFETY: `reply` is the sender's VciShared,
                // never freed.
                unsafe { &*(e.reply() as *const VciShared) }.ring();
                // SAFETY: the payload is the sender's heap
                // buffer, valid until we complete; the buffer
                // stays alive until `wait_finished` returns.
                let blocks = unsafe { syn.copy_blocks(e.data() as *const u8) };
                syn.wait_finished();
                bump(&self.stats.synergistic);
                add(&self.stats.syn_receiver_blocks, blocks);
            }
            // SAFETY: the payload is the sender's heap buffer, borrowed by
            // its pending request until we complete the envelope; `buf`
            // holds `n` bytes and is distinct (the caller's contract).
            None => unsafe { ptr::copy_nonoverlapping(e.data() as *const u8, buf, n) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synergistic_blocks_are_claimed_once() {
        let len = (1 << 20) + 123;
        let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; len];
        let syn = SynCopy::new();
        let (s, d) = (src.as_ptr() as usize, dst.as_mut_ptr() as usize);
        // SAFETY: nobody asked for help yet: nothing is copied.
        assert_eq!(unsafe { syn.copy_blocks(s as *const u8) }, 0);
        syn.ask_for_help(d as *mut u8, len as u64, 4096);
        let blocks: u64 = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    let syn = &syn;
                    // SAFETY: `src` and `dst` outlive the scope; the blocks
                    // are disjoint claims.
                    sc.spawn(move || unsafe { syn.copy_blocks(s as *const u8) })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        syn.wait_finished();
        assert_eq!(blocks, (len as u64).div_ceil(4096));
        assert_eq!(dst, src);
    }
}
