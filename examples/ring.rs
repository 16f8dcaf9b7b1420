//! A token goes around the ring of all ranks a few times; each rank adds
//! its rank to it, and rank 0 checks the sum after every lap.
//!
//! Run: `cargo build --release --examples && target/release/hmpirun -n 4 target/release/examples/ring`

use hmpi::prelude::*;

const LAPS: u64 = 3;

fn main() {
    if let Err(e) = run() {
        eprintln!("ring: {e}");
        std::process::exit(1);
    }
}

fn run() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    let next = world.process_at_rank((me + 1) % n);
    let prev = world.process_at_rank((me + n - 1) % n);
    let per_lap: u64 = (0..n as u64).sum();
    let mut token = 0u64;
    for lap in 1..=LAPS {
        if me == 0 {
            next.send(&token)?;
            let (t, status) = prev.receive::<u64>()?;
            token = t;
            if token != lap * per_lap {
                eprintln!("ring: lap {lap}: token {token}, expected {}", lap * per_lap);
                world.abort(2);
            }
            println!(
                "lap {lap}: token {token} back from rank {} on {}",
                status.source_rank(),
                hmpi::processor_name()?
            );
        } else {
            let (t, _) = prev.receive::<u64>()?;
            token = t + me as u64;
            next.send(&token)?;
        }
    }
    world.barrier()?;
    if me == 0 {
        println!("ring of {n} ranks: {LAPS} laps done");
    }
    Ok(())
}
