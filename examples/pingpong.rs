//! Ping-pong between ranks 0 and 1: one-way latency and bandwidth for a few
//! message sizes (other ranks, if any, only take part in the barriers).
//!
//! Run: `cargo build --release --examples && target/release/hmpirun -n 2 target/release/examples/pingpong`

use hmpi::prelude::*;

// Buffers in the node heap: large messages are copied once, by the receiver.
#[global_allocator]
static ALLOC: hmpi::ShmHeap = hmpi::ShmHeap::new();

const SIZES: [usize; 8] = [0, 8, 64, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20];

fn main() {
    if let Err(e) = run() {
        eprintln!("pingpong: {e}");
        std::process::exit(1);
    }
}

fn run() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let me = world.rank();
    if world.size() < 2 {
        println!("pingpong needs 2 ranks: hmpirun -n 2 {}", program());
        return Ok(());
    }
    if me == 0 {
        println!(
            "{:>10} {:>8} {:>14} {:>14}",
            "bytes", "iters", "latency (us)", "bandwidth (MB/s)"
        );
    }
    for &size in &SIZES {
        let iters = (20_000_000 / (size + 2_000)).clamp(10, 10_000);
        let mut buf = vec![0u8; size];
        world.barrier()?;
        if me <= 1 {
            let peer = world.process_at_rank(1 - me);
            // One warm-up round trip, then the timed ones.
            let mut t0 = 0.0;
            for i in 0..=iters {
                if i == 1 {
                    t0 = universe.wtime();
                }
                if me == 0 {
                    peer.send(&buf)?;
                    peer.receive_into(&mut buf)?;
                } else {
                    peer.receive_into(&mut buf)?;
                    peer.send(&buf)?;
                }
            }
            let one_way = (universe.wtime() - t0) / (2 * iters) as f64;
            if me == 0 {
                println!(
                    "{size:>10} {iters:>8} {:>14.2} {:>14.1}",
                    one_way * 1e6,
                    size as f64 / one_way / 1e6
                );
            }
        }
    }
    world.barrier()?;
    Ok(())
}

fn program() -> String {
    std::env::args().next().unwrap_or_else(|| "pingpong".into())
}
