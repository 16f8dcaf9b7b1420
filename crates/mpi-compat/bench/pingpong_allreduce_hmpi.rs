//! The program of `pingpong_allreduce.rs` on hmpi's native API (errors as
//! values, unwrapped here), with hmpi's node heap as the allocator: the
//! reference that `run.sh` compares hmpi-mpi with.

use hmpi::op::SystemOperation;
use hmpi::prelude::*;
use std::time::Instant;

#[global_allocator]
static HEAP: hmpi::ShmHeap = hmpi::ShmHeap::new();

/// Repetitions at `bytes`: fewer for large messages, at least 20.
fn iterations(bytes: usize) -> usize {
    (20_000_000 / (bytes + 2_000)).clamp(20, 10_000)
}

fn main() {
    let label = std::env::args().nth(1).unwrap_or_else(|| "hmpi".into());
    let universe = hmpi::init().unwrap();
    let world = universe.world();
    let rank = world.rank();
    let sizes: Vec<usize> = (0..=20).step_by(2).map(|p| 1usize << p).collect();

    for &bytes in &sizes {
        let iters = iterations(bytes);
        let mut buf = vec![1u8; bytes];
        world.barrier().unwrap();
        let mut usec = 0.0;
        if rank < 2 && world.size() >= 2 {
            let peer = world.process_at_rank(1 - rank);
            for round in 0..2 {
                let n = if round == 0 { iters / 10 + 1 } else { iters };
                let t0 = Instant::now();
                for _ in 0..n {
                    if rank == 0 {
                        peer.send(&buf[..]).unwrap();
                        peer.receive_into(&mut buf[..]).unwrap();
                    } else {
                        peer.receive_into(&mut buf[..]).unwrap();
                        peer.send(&buf[..]).unwrap();
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
            world.barrier().unwrap();
            let t0 = Instant::now();
            for _ in 0..reps {
                world
                    .all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum())
                    .unwrap();
            }
            usec = t0.elapsed().as_secs_f64() * 1e6 / reps as f64;
        }
        assert_eq!(recv[0], world.size() as f64);
        if rank == 0 {
            println!("{label} allreduce {bytes} {usec:.3}");
        }
    }
}
