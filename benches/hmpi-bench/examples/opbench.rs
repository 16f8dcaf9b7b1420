//! OPBench (the papers' ownership-passing benchmark, thesis §4.7.1), and
//! the one-way give/take latency of `hmpi-bench opi` as a standalone run.
//!
//! ```text
//! cargo build --release -p hmpi-bench --example opbench
//! hmpirun -n 2 target/release/examples/opbench [exchange|latency|all]
//!         [--sizes MIN-MAX] [--iters N] [--csv FILE]
//! ```
//!
//! **exchange** (default): each iteration simulates the computation once
//! (a pass over the application array), then four times — four
//! neighbours — packs the array's data into a communication buffer,
//! exchanges buffers with the other rank, and unpacks what arrived. Two
//! ways to exchange, measured in the same run:
//!
//! * `opi`: allocate the buffer from the pool, pack, give it, take the
//!   peer's, unpack, free it (back to the pool): nothing is copied in
//!   between;
//! * `copy`: pack into a send buffer, two-sided immediate send and receive
//!   into a receive buffer (the engine copies once), unpack.
//!
//! Reported as the papers do: the communication + unpack phases, as
//! bandwidth (4 × size / time per iteration), sizes 8 B – 4 MiB.
//!
//! **latency**: one-way give/take latency, 8 B – 64 MiB (half a ping-pong
//! of one pooled buffer), the same for the two-sided copy path, and pool
//! alloc+free of 8 bytes. Rows use `hmpi-bench`'s CSV columns
//! (`workload,backend,threads,size,value,unit`).
//!
//! The global allocator is the node heap, so given buffers move by
//! pointer.

use hmpi::opi::prelude::*;
use hmpi::{hmpi_core, opi, shmheap, ShmHeap};
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

/// The give/take, copy and pool kernels of `hmpi-bench opi` (this example
/// uses some of them).
#[allow(dead_code)]
#[path = "../src/opi_kernels.rs"]
mod kernels;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Neighbours per iteration (the papers' four).
const NEIGHBOURS: usize = 4;

struct Args {
    mode: String,
    sizes: (usize, usize),
    iters: Option<usize>,
    csv: Option<String>,
}

fn parse_size(s: &str) -> std::result::Result<usize, String> {
    shmheap::env::parse_size(s)
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("'{s}' is not a size (a number with an optional K, M or G)"))
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut a = Args {
        mode: "exchange".into(),
        sizes: (8, 4 << 20),
        iters: None,
        csv: None,
    };
    let mut sizes_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "exchange" | "latency" | "all" => a.mode = arg,
            "--sizes" => {
                let v = it.next().ok_or("--sizes needs MIN-MAX")?;
                let (lo, hi) = v.split_once('-').unwrap_or((&v, &v));
                a.sizes = (parse_size(lo)?, parse_size(hi)?);
                sizes_given = true;
            }
            "--iters" => {
                let v = it.next().ok_or("--iters needs a number")?;
                a.iters = Some(v.parse().map_err(|_| format!("--iters: '{v}'"))?);
            }
            "--csv" => a.csv = Some(it.next().ok_or("--csv needs a file")?),
            "-h" | "--help" => {
                return Err("usage: opbench [exchange|latency|all] [--sizes MIN-MAX] \
                            [--iters N] [--csv FILE]"
                    .into())
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.mode == "latency" && !sizes_given {
        a.sizes = (8, 64 << 20);
    }
    if a.sizes.0 > a.sizes.1 {
        return Err("--sizes: MIN is larger than MAX".into());
    }
    Ok(a)
}

fn sizes(lo: usize, hi: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = lo.next_power_of_two();
    if s != lo {
        v.push(lo);
    }
    while s <= hi {
        v.push(s);
        s *= 2;
    }
    v
}

/// One CSV row of hmpi-bench's format.
struct Row {
    workload: &'static str,
    backend: &'static str,
    size: usize,
    value: f64,
    unit: &'static str,
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("opbench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("opbench: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    let universe = hmpi_core::init()?;
    let world = universe.world();
    if world.size() != 2 {
        if world.rank() == 0 {
            eprintln!("opbench: run it on 2 ranks (hmpirun -n 2 …)");
        }
        return Err(Error::Comm {
            reason: format!("opbench needs 2 ranks, the world has {}", world.size()),
        });
    }
    let mut rows = Vec::new();
    if args.mode == "exchange" || args.mode == "all" {
        rows.extend(exchange(&world, args)?);
    }
    if args.mode == "latency" || args.mode == "all" {
        rows.extend(latency(&world, args)?);
    }
    if world.rank() == 0 {
        if let Some(path) = &args.csv {
            let mut f = std::fs::File::create(path).map_err(|e| Error::Internal(e.to_string()))?;
            let mut s = String::from("workload,backend,threads,size,value,unit\n");
            for r in &rows {
                s += &format!(
                    "{},{},1,{},{},{}\n",
                    r.workload, r.backend, r.size, r.value, r.unit
                );
            }
            f.write_all(s.as_bytes())
                .map_err(|e| Error::Internal(e.to_string()))?;
        }
    }
    universe.finalize()
}

fn fmt_size(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

/// The simulated computation: a pass over the application array.
fn compute(app: &mut [f64]) {
    for x in app.iter_mut() {
        *x = *x * 0.999 + 0.001;
    }
}

fn exchange(world: &SimpleCommunicator, args: &Args) -> Result<Vec<Row>> {
    let me = world.rank();
    let peer = world.process_at_rank(1 - me);
    let mut rows = Vec::new();
    if me == 0 {
        println!("OPBench: 4-neighbour pack / exchange / unpack, 2 ranks");
        println!("communication + unpack phases, GB/s (higher is better)");
        println!(
            "{:>8} {:>10} {:>10} {:>8}   {:>10} {:>10}",
            "size", "opi", "copy", "opi/copy", "opi µs", "copy µs"
        );
    }
    for size in sizes(args.sizes.0, args.sizes.1) {
        let n = size.div_ceil(8);
        let iters = args
            .iters
            .unwrap_or(((64 << 20) / (size * NEIGHBOURS)).clamp(20, 5000));
        let mut app: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut dest = vec![0.0f64; n];
        // OPI.
        let mut t_opi = 0.0;
        world.barrier()?;
        for it in 0..iters + iters / 10 {
            compute(&mut app);
            for k in 0..NEIGHBOURS {
                let mut buf = OpiBuf::<f64>::with_capacity(n)?;
                buf.extend_from_slice(&app); // pack
                let t0 = Instant::now();
                peer.give_with_tag(buf, k as i32)?;
                let got = peer.take_buf_with_tag::<f64>(k as i32)?;
                dest.copy_from_slice(&got); // unpack
                let dt = t0.elapsed().as_secs_f64();
                drop(got); // free: back to the pool
                if it >= iters / 10 {
                    t_opi += dt;
                }
            }
        }
        // Two-sided copy.
        let mut sendbuf = vec![0.0f64; n];
        let mut recvbuf = vec![0.0f64; n];
        let mut t_copy = 0.0;
        world.barrier()?;
        for it in 0..iters + iters / 10 {
            compute(&mut app);
            for k in 0..NEIGHBOURS {
                sendbuf.copy_from_slice(&app); // pack
                let t0 = Instant::now();
                hmpi_core::request::scope(|s| -> Result<()> {
                    let r = peer.immediate_receive_into_with_tag(s, &mut recvbuf[..], k as i32)?;
                    let q = peer.immediate_send_with_tag(s, &sendbuf[..], k as i32)?;
                    r.wait()?;
                    q.wait()?;
                    Ok(())
                })?;
                dest.copy_from_slice(&recvbuf); // unpack
                let dt = t0.elapsed().as_secs_f64();
                if it >= iters / 10 {
                    t_copy += dt;
                }
            }
        }
        black_box(&dest);
        let per_opi = t_opi / iters as f64;
        let per_copy = t_copy / iters as f64;
        let bw = |t: f64| (NEIGHBOURS * n * 8) as f64 / t / 1e9;
        if me == 0 {
            println!(
                "{:>8} {:>10.2} {:>10.2} {:>8.2}   {:>10.2} {:>10.2}",
                fmt_size(size),
                bw(per_opi),
                bw(per_copy),
                per_copy / per_opi,
                per_opi * 1e6,
                per_copy * 1e6
            );
            for (backend, t) in [("opi", per_opi), ("copy", per_copy)] {
                rows.push(Row {
                    workload: "opbench-exchange",
                    backend,
                    size,
                    value: bw(t),
                    unit: "GB/s",
                });
            }
        }
    }
    Ok(rows)
}

fn latency(world: &SimpleCommunicator, args: &Args) -> Result<Vec<Row>> {
    let me = world.rank();
    let leader = me == 0;
    let mut rows = Vec::new();
    if leader {
        println!("one-way latency, ns (median of 5 runs)");
        println!(
            "{:>8} {:>12} {:>12} {:>10}",
            "size", "give/take", "copy", "copy/opi"
        );
    }
    for size in sizes(args.sizes.0, args.sizes.1) {
        let iters = args
            .iters
            .unwrap_or(if size <= 1 << 20 { 20_000 } else { 2000 });
        let copy_iters = if size <= 64 << 10 {
            iters
        } else {
            (iters / 20).max(50)
        };
        let mut opi = Vec::new();
        let mut copy = Vec::new();
        for _ in 0..5 {
            world.barrier()?;
            opi.push(kernels::give_take_latency(
                world,
                1 - me,
                leader,
                size,
                kernels::Touch::FirstByte,
                iters / 10,
                iters,
            )?);
            world.barrier()?;
            copy.push(kernels::copy_latency(
                world,
                1 - me,
                leader,
                size,
                copy_iters / 10,
                copy_iters,
            )?);
        }
        let (o, c) = (median(&mut opi) * 1e9, median(&mut copy) * 1e9);
        if leader {
            println!(
                "{:>8} {:>12.1} {:>12.1} {:>10.1}",
                fmt_size(size),
                o,
                c,
                c / o
            );
            rows.push(Row {
                workload: "opi-latency",
                backend: "hmpi-opi",
                size,
                value: o,
                unit: "ns",
            });
            rows.push(Row {
                workload: "opi-latency",
                backend: "hmpi-copy",
                size,
                value: c,
                unit: "ns",
            });
        }
    }
    // Pool alloc+free on rank 0 alone, while rank 1 sleeps (a peer spinning
    // in a wait would share the cores with the measurement).
    let done = opi::fusion::NodeShared::new(world, 0, opi::fusion::Signal::new)?;
    if leader {
        let v: Result<Vec<f64>> = (0..5)
            .map(|_| kernels::pool_alloc_free_ns(8, 2_000_000))
            .collect();
        done.set();
        let mut v = v?;
        let m = median(&mut v);
        println!("pool alloc+free of 8 bytes: {m:.1} ns (median of 5 runs)");
        rows.push(Row {
            workload: "opi-pool",
            backend: "hmpi-opi",
            size: 8,
            value: m,
            unit: "ns",
        });
    } else {
        while !done.is_set() {
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
    }
    Ok(rows)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
