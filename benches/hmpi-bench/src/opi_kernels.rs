//! The measurement kernels of the `opi` workload (and of the `opbench`
//! example, which includes this file): one-way give/take latency between
//! two ranks, the same for the two-sided copy path, and pool alloc+free.
//!
//! Latency is half the round trip of a ping-pong, averaged over `iters`
//! round trips after `warmup` ones. The give/take ping-pong passes one
//! pooled buffer back and forth. With [`Touch::None`] nobody touches the
//! payload, as iceoryx2's publish-subscribe benchmark measures its
//! zero-copy transport (it loans, sends and receives samples without
//! writing or reading them); with [`Touch::FirstByte`] the giver writes
//! the first byte and the taker reads and writes it — a message is only
//! useful if its data can be touched, and this costs the transfer of the
//! payload's first cache line between the cores (the rest of the payload
//! is not touched, which is the point of ownership passing). The copy
//! ping-pong sends and receives `size` bytes between two buffers allocated
//! once.

use hmpi::opi::p2p::{Give, Take};
use hmpi::opi::pool::OpiBuf;
use hmpi::traits::{Communicator, Destination, Source};
use hmpi::{Error, Result, SimpleCommunicator};
use std::hint::black_box;
use std::time::Instant;

/// Tag of the benchmark ping-pongs.
const TAG: i32 = 77;

fn check_peer(comm: &SimpleCommunicator, peer: i32) -> Result<()> {
    if peer == comm.rank() {
        return Err(Error::Rank {
            rank: peer,
            size: comm.size(),
        });
    }
    comm.to_world(peer).map(drop)
}

/// What the give/take ping-pong does with the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// Nothing (iceoryx2's method).
    None,
    /// The giver writes the first byte; the taker reads and writes it.
    FirstByte,
}

/// One-way give/take latency in seconds between this rank and `peer`
/// for a buffer of `size` bytes. Both ranks call it (with the same
/// `touch`); the one with `leader` starts each round trip.
pub fn give_take_latency(
    comm: &SimpleCommunicator,
    peer: i32,
    leader: bool,
    size: usize,
    touch: Touch,
    warmup: usize,
    iters: usize,
) -> Result<f64> {
    check_peer(comm, peer)?;
    let p = comm.process_at_rank(peer);
    let mut buf: Option<OpiBuf<u8>> = None;
    if leader {
        let mut b = OpiBuf::<u8>::with_capacity(size)?;
        // Filled once: the payload is real data, never read again.
        b.resize(size, 1);
        buf = Some(b);
    }
    let mut t0 = Instant::now();
    for i in 0..warmup + iters {
        if i == warmup {
            t0 = Instant::now();
        }
        if leader {
            let mut b = buf
                .take()
                .ok_or_else(|| Error::Internal("no buffer".into()))?;
            if touch == Touch::FirstByte {
                if let Some(x) = b.first_mut() {
                    *x = x.wrapping_add(1);
                }
            }
            p.give_with_tag(b, TAG)?;
            let b = p.take_buf_with_tag::<u8>(TAG)?;
            if touch == Touch::FirstByte {
                black_box(b.first().copied());
            }
            buf = Some(b);
        } else {
            let mut b = p.take_buf_with_tag::<u8>(TAG)?;
            if touch == Touch::FirstByte {
                if let Some(x) = b.first_mut() {
                    *x = x.wrapping_add(1);
                }
            }
            p.give_with_tag(b, TAG)?;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    Ok(dt / (2 * iters.max(1)) as f64)
}

/// One-way latency of the two-sided copy path (send / receive into a
/// buffer) for `size` bytes, measured as [`give_take_latency`].
pub fn copy_latency(
    comm: &SimpleCommunicator,
    peer: i32,
    leader: bool,
    size: usize,
    warmup: usize,
    iters: usize,
) -> Result<f64> {
    check_peer(comm, peer)?;
    let p = comm.process_at_rank(peer);
    let out = vec![1u8; size];
    let mut inb = vec![0u8; size];
    let mut t0 = Instant::now();
    for i in 0..warmup + iters {
        if i == warmup {
            t0 = Instant::now();
        }
        if leader {
            p.send_with_tag(&out[..], TAG)?;
            p.receive_into_with_tag(&mut inb[..], TAG)?;
        } else {
            p.receive_into_with_tag(&mut inb[..], TAG)?;
            p.send_with_tag(&out[..], TAG)?;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    Ok(dt / (2 * iters.max(1)) as f64)
}

/// Nanoseconds per alloc+free pair of a pooled buffer of `size` bytes
/// (`OpiBuf::with_capacity` then drop), on this thread's pool.
pub fn pool_alloc_free_ns(size: usize, iters: usize) -> Result<f64> {
    // Warm the pool.
    drop(OpiBuf::<u8>::with_capacity(size)?);
    let t0 = Instant::now();
    for _ in 0..iters {
        let b = OpiBuf::<u8>::with_capacity(black_box(size))?;
        black_box(b.as_ptr());
        drop(b);
    }
    Ok(t0.elapsed().as_nanos() as f64 / iters.max(1) as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pool_alloc_free_takes_time() {
        let ns = super::pool_alloc_free_ns(8, 10_000).expect("pooled buffers");
        assert!(ns > 0.0);
    }
}
