//! The FFT2D demo's transposes on rsmpi over the system's MPI:
//!
//! ```text
//! mpirun -n P target/debug/fft2d-rsmpi [--n N] [--reps R] [--out FILE]
//! ```
//!
//! `copy` packs the blocks, sends them with immediate sends and receives
//! and unpacks them; `alltoall` packs, calls `MPI_Alltoall` and unpacks —
//! the same loops as `examples/fft2d`'s `copy` and `all_to_all` variants,
//! checked against the same serial FFT. Rank 0 writes one result line per
//! variant to `--out` (`name seconds seconds bytes error`), which the hmpi
//! program adds to its table (`--extra`).

#[path = "../../fft2d/kernel.rs"]
mod kernel;

use kernel::{Row, Shape, C64};
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use std::time::Instant;

fn transpose(world: &SimpleCommunicator, s: &Shape, m: &mut [C64], all_to_all: bool) {
    let (b, p) = (s.b, s.p);
    let mut send = vec![[0.0; 2]; p * b * b];
    s.pack_all(m, &mut send);
    let mut recv = vec![[0.0; 2]; p * b * b];
    if all_to_all {
        world.all_to_all_into(send.as_flattened(), recv.as_flattened_mut());
    } else {
        mpi::request::scope(|scope| {
            let mut reqs = Vec::new();
            for (i, chunk) in recv.chunks_mut(b * b).enumerate() {
                let from = world.process_at_rank(i as i32);
                reqs.push(from.immediate_receive_into_with_tag(scope, chunk.as_flattened_mut(), 9));
            }
            for (j, chunk) in send.chunks(b * b).enumerate() {
                let to = world.process_at_rank(j as i32);
                reqs.push(to.immediate_send_with_tag(scope, chunk.as_flattened(), 9));
            }
            for r in reqs {
                r.wait();
            }
        });
    }
    for (i, blk) in recv.chunks(b * b).enumerate() {
        s.unpack(blk, i, m);
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1).cloned().unwrap_or_default())
}

fn number(name: &str, default: usize) -> Result<usize, String> {
    match arg(name) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| format!("{name} needs a number, not {s:?}")),
    }
}

fn run() -> Result<(), String> {
    let universe = mpi::initialize().ok_or("MPI is already initialized")?;
    let world = universe.world();
    let (p, me) = (world.size() as usize, world.rank() as usize);
    let n = number("--n", 512)?;
    let reps = number("--reps", 5)?.max(1);
    let s = Shape::new(n, p, me)?;
    kernel::check_fft()?;
    let tw = kernel::twiddles(n);
    let reference = kernel::serial_fft2d(n, &tw);
    let mine = &reference[me * s.b * n..][..s.b * n];
    let scale = reference
        .iter()
        .map(|c| c[0].abs().max(c[1].abs()))
        .fold(1.0, f64::max);
    let mut lines = String::new();
    for (name, all_to_all) in [("rsmpi-copy", false), ("rsmpi-alltoall", true)] {
        let (mut comm, mut total) = (Vec::new(), Vec::new());
        let mut err: f64 = 0.0;
        for rep in 0..=reps {
            world.barrier();
            let t0 = Instant::now();
            let mut m = s.local_input();
            s.rows_fft(&mut m, &tw);
            let mut t_comm = 0.0;
            for pass in 0..2 {
                let t1 = Instant::now();
                transpose(&world, &s, &mut m, all_to_all);
                t_comm += t1.elapsed().as_secs_f64();
                if pass == 0 {
                    s.rows_fft(&mut m, &tw);
                }
            }
            if rep > 0 {
                total.push(t0.elapsed().as_secs_f64());
                comm.push(t_comm);
            }
            err = m
                .iter()
                .zip(mine)
                .map(|(a, b)| kernel::dist(*a, *b) / scale)
                .fold(err, f64::max);
        }
        if err > 1e-10 {
            return Err(format!(
                "rank {me}: {name} differs from the serial FFT by {err:e}"
            ));
        }
        let (t, c) = (kernel::median(&mut total), kernel::median(&mut comm));
        let (mut tmax, mut cmax) = (0.0f64, 0.0f64);
        world.all_reduce_into(&t, &mut tmax, SystemOperation::max());
        world.all_reduce_into(&c, &mut cmax, SystemOperation::max());
        let row = Row {
            name: name.into(),
            total: tmax,
            transpose: cmax,
            // pack, the library's copy (at least one), unpack; two
            // transposes per FFT
            copied: 2 * 3 * s.local_bytes(),
            error: err,
        };
        lines.push_str(&row.to_line());
        lines.push('\n');
    }
    if me == 0 {
        match arg("--out") {
            Some(f) => std::fs::write(&f, &lines).map_err(|e| format!("--out {f}: {e}"))?,
            None => print!("{lines}"),
        }
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("fft2d-rsmpi: {e}");
        std::process::exit(1);
    }
}
