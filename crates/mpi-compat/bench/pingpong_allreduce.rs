//! Ping-pong and allreduce, written once against rsmpi's API (the `mpi`
//! crate, 0.8). `run.sh` builds this file against rsmpi over Open MPI, over
//! MPICH, and against hmpi-mpi, and runs them side by side with
//! `pingpong_allreduce_hmpi.rs`, the same program on hmpi's native API.
//!
//! Output, on rank 0: `LABEL pingpong|allreduce BYTES MICROSECONDS` lines
//! (half a round trip; one allreduce of BYTES of f64 sums).

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;

/// Repetitions at `bytes`: fewer for large messages, at least 20.
fn iterations(bytes: usize) -> usize {
    (20_000_000 / (bytes + 2_000)).clamp(20, 10_000)
}

fn main() {
    let label = std::env::args().nth(1).unwrap_or_else(|| "rsmpi".into());
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let rank = world.rank();
    let sizes: Vec<usize> = (0..=20).step_by(2).map(|p| 1usize << p).collect();

    for &bytes in &sizes {
        let iters = iterations(bytes);
        let mut buf = vec![1u8; bytes];
        world.barrier();
        let mut usec = 0.0;
        if rank < 2 && world.size() >= 2 {
            let peer = world.process_at_rank(1 - rank);
            for round in 0..2 {
                let n = if round == 0 { iters / 10 + 1 } else { iters };
                let t0 = Instant::now();
                for _ in 0..n {
                    if rank == 0 {
                        peer.send(&buf[..]);
                        peer.receive_into(&mut buf[..]);
                    } else {
                        peer.receive_into(&mut buf[..]);
                        peer.send(&buf[..]);
                    }
                }
                usec = t0.elapsed().as_secs_f64() * 1e6 / n as f64 / 2.0;
            }
        }
        if rank == 0 {
            println!("{label} pingpong {bytes} {usec:.3}");
        }
    }

    for &bytes in sizes.iter().filter(|&&b| b >= 8) {
        let n = bytes / 8;
        let iters = iterations(bytes);
        let send = vec![1.0f64; n];
        let mut recv = vec![0.0f64; n];
        let mut usec = 0.0;
        for round in 0..2 {
            let reps = if round == 0 { iters / 10 + 1 } else { iters };
            world.barrier();
            let t0 = Instant::now();
            for _ in 0..reps {
                world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            }
            usec = t0.elapsed().as_secs_f64() * 1e6 / reps as f64;
        }
        assert_eq!(recv[0], world.size() as f64);
        if rank == 0 {
            println!("{label} allreduce {bytes} {usec:.3}");
        }
    }
}
