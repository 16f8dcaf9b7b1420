//! Workload `coll`: the OSU micro-benchmarks' collective loops, written
//! once over [`Transport::collective`] and run for hmpi (through the
//! launcher) and, by `hmpi-bench compare coll`, for rsmpi over each system
//! MPI (under its own `mpirun`).
//!
//! | kernel | OSU program | call (root 0) | per-rank size `s` |
//! |---|---|---|---|
//! | `barrier` | `osu_barrier` | barrier | none (size 0) |
//! | `bcast` | `osu_bcast` | broadcast | `s` bytes |
//! | `reduce` | `osu_reduce` | sum of `s / 8` `f64`s to the root | `s` |
//! | `allreduce` | `osu_allreduce` | sum of `s / 8` `f64`s | `s` |
//! | `gather` | `osu_gather` | `s` bytes from each to the root | `s` |
//! | `scatter` | `osu_scatter` | `s` bytes from the root to each | `s` |
//! | `allgather` | `osu_allgather` | `s` bytes from each to all | `s` |
//! | `alltoall` | `osu_alltoall` | `s` bytes from each to each | `s` |
//! | `reduce_scatter_block` | `osu_reduce_scatter` | sum of `n` blocks of `s / 8` `f64`s, block `r` to rank `r` | `s` (the block) |
//!
//! The loop is OSU's: every rank times each call alone, with a barrier
//! after it that is not timed (`osu_barrier` times its barriers back to
//! back); `COLL_SKIP_*` warm-up calls, then `COLL_LOOP_*` timed ones
//! (100 and 1 000 up to 8 KiB, 10 and 100 above). A rank's latency is its
//! total time over the calls; the value is OSU's `Avg Latency(us)`, the
//! average of the ranks' latencies (gathered at rank 0 with
//! point-to-point messages after the loop, outside the timing). As in
//! the point-to-point kernels, each size runs its warm-up once and then
//! `--reps` repetitions of the timed loop, each after a barrier, and the
//! median is reported. With `HMPI_BENCH_PER_RANK` set, every repetition
//! also prints each rank's own average on standard error.
//!
//! Buffers are the worker's two page-aligned buffers of `ranks` times the
//! largest size, allocated once after the backend started, so that in an
//! hmpi worker they live in the node heap (the worker checks) and hmpi's
//! single-copy path is what is measured; the send buffer holds `1.0`s.

use crate::p2p::{self, Bufs, Family, Kernel, Loops};
use crate::report::{self, Sample};
use crate::transport::{f64s_mut, CollOp, TResult, Transport};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use std::time::{Duration, Instant};

/// Tag of the per-rank latencies sent to rank 0 after a repetition.
const TAG_TIME: i32 = 200;

macro_rules! kernel {
    ($name:literal, $min:expr, $run:ident) => {
        Kernel {
            name: $name,
            unit: "us",
            higher_is_better: false,
            min_size: $min,
            family: Family::Coll,
            loops: Loops::Coll,
            run: $run,
        }
    };
}

/// The collective kernels, in OSU's order. `min_size` 0 marks the
/// size-less barrier; 8 the reductions (one `f64`).
pub const KERNELS: &[Kernel] = &[
    kernel!("barrier", 0, barrier),
    kernel!("bcast", 1, bcast),
    kernel!("reduce", 8, reduce),
    kernel!("allreduce", 8, allreduce),
    kernel!("gather", 1, gather),
    kernel!("scatter", 1, scatter),
    kernel!("allgather", 1, allgather),
    kernel!("alltoall", 1, alltoall),
    kernel!("reduce_scatter_block", 8, reduce_scatter_block),
];

/// Fills the send buffer with `1.0`s (finite sums, no denormals).
pub fn prepare(bufs: &mut Bufs) -> TResult<()> {
    let s = bufs.send.as_mut_slice();
    let whole = s.len() / 8 * 8;
    f64s_mut(&mut s[..whole])?.fill(1.0);
    Ok(())
}

/// The collective kernels named in `list` (comma-separated), in the
/// order of [`KERNELS`]; `coll` or `all` for all of them.
pub fn select(list: &str) -> Result<Vec<&'static Kernel>, BenchError> {
    let mut names: Vec<&str> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "coll" || name == "all" {
            names.extend(KERNELS.iter().map(|k| k.name));
        } else if KERNELS.iter().any(|k| k.name == name) {
            names.push(name);
        } else {
            let known: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
            return Err(BenchError::Usage(format!(
                "--workloads: unknown collective '{name}'; known: {}, coll (all of them)",
                known.join(", ")
            )));
        }
    }
    let out: Vec<&'static Kernel> = KERNELS.iter().filter(|k| names.contains(&k.name)).collect();
    if out.is_empty() {
        return Err(BenchError::Usage(
            "--workloads needs a collective, e.g. allreduce".into(),
        ));
    }
    Ok(out)
}

/// The kernels `opts.workloads` names, or all of them.
pub fn selected(opts: &Options) -> Result<Vec<&'static Kernel>, BenchError> {
    select(opts.workloads.as_deref().unwrap_or("coll"))
}

/// OSU's loop: `iters` calls of `call`, each timed alone and followed by
/// an untimed barrier; returns this rank's average per call in µs.
fn timed(t: &dyn Transport, iters: usize, mut call: impl FnMut() -> TResult<()>) -> TResult<f64> {
    t.barrier()?;
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        call()?;
        total += start.elapsed();
        t.barrier()?;
    }
    Ok(total.as_secs_f64() * 1e6 / iters as f64)
}

/// With this variable set, each repetition also prints every rank's own
/// average on standard error (which rank waits, which only publishes).
const PER_RANK_VAR: &str = "HMPI_BENCH_PER_RANK";

/// The average of every rank's `us` at rank 0 (OSU's `Avg Latency`),
/// gathered with point-to-point messages.
fn average(t: &dyn Transport, us: f64) -> TResult<Option<f64>> {
    if t.rank() != 0 {
        t.send(&us.to_ne_bytes(), 0, TAG_TIME)?;
        return Ok(None);
    }
    let mut each = vec![us];
    for r in 1..t.size() {
        let mut b = [0u8; 8];
        t.recv(&mut b, r, TAG_TIME)?;
        each.push(f64::from_ne_bytes(b));
    }
    if std::env::var_os(PER_RANK_VAR).is_some() {
        let list: Vec<String> = each.iter().map(|v| format!("{v:.4}")).collect();
        eprintln!("[hmpi-bench] per rank (us): {}", list.join(" "));
    }
    Ok(Some(each.iter().sum::<f64>() / t.size() as f64))
}

/// One repetition of `op` at per-rank size `size`, with the send and
/// receive lengths in pieces of `size` (see [`CollOp`]).
fn run_op(
    t: &dyn Transport,
    b: &mut Bufs,
    op: CollOp,
    (send_pieces, recv_pieces): (usize, usize),
    size: usize,
    iters: usize,
) -> TResult<Option<f64>> {
    let (s, r) = (
        &b.send.as_slice()[..send_pieces * size],
        &mut b.recv.as_mut_slice()[..recv_pieces * size],
    );
    let us = timed(t, iters, || t.collective(op, s, r))?;
    average(t, us)
}

/// `osu_barrier`: the barriers back to back, timed as one loop.
fn barrier(t: &dyn Transport, _: &mut Bufs, _: usize, iters: usize) -> TResult<Option<f64>> {
    t.barrier()?;
    let start = Instant::now();
    for _ in 0..iters {
        t.collective(CollOp::Barrier, &[], &mut [])?;
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    average(t, us)
}

fn bcast(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    run_op(t, b, CollOp::Bcast, (0, 1), size, iters)
}

fn reduce(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    run_op(t, b, CollOp::Reduce, (1, 1), size, iters)
}

fn allreduce(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    run_op(t, b, CollOp::Allreduce, (1, 1), size, iters)
}

fn gather(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let n = t.size();
    run_op(t, b, CollOp::Gather, (1, n), size, iters)
}

fn scatter(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let n = t.size();
    run_op(t, b, CollOp::Scatter, (n, 1), size, iters)
}

fn allgather(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let n = t.size();
    run_op(t, b, CollOp::Allgather, (1, n), size, iters)
}

fn alltoall(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let n = t.size();
    run_op(t, b, CollOp::Alltoall, (n, n), size, iters)
}

fn reduce_scatter_block(
    t: &dyn Transport,
    b: &mut Bufs,
    size: usize,
    iters: usize,
) -> TResult<Option<f64>> {
    let n = t.size();
    run_op(t, b, CollOp::ReduceScatterBlock, (n, 1), size, iters)
}

/// `hmpi-bench coll`: hmpi alone, every selected kernel at `--ranks`.
fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let kernels = selected(opts)?;
    let ranks = opts.ranks.unwrap_or(2);
    let reps = p2p::reps(opts);
    let mut samples: Vec<Sample> = Vec::new();
    let mut failures = Vec::new();
    let mut text = String::new();
    for k in kernels {
        let sizes = k.sizes(opts)?;
        progress.line(format_args!(
            "{}: hmpi, {ranks} ranks, {} size(s), {reps} repetitions (OSU iterations{})",
            k.name,
            sizes.len(),
            if opts.quick { " / 10" } else { "" }
        ));
        match p2p::run_hmpi(k, &sizes, reps, opts.quick, ranks) {
            Ok(s) => {
                text += "\n";
                text += &report::render_table(&s, k.name, &["hmpi"], &[]);
                samples.extend(s);
            }
            Err(e) => {
                progress.line(format_args!("FAILED: {e}"));
                failures.push(e);
            }
        }
    }
    text += "(compare with MPI peers in the same run: hmpi-bench compare coll)\n";
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// `hmpi-bench coll` (an entry of [`crate::WORKLOADS`]); its worker is the
/// point-to-point one, which runs any [`Kernel`].
pub const WORKLOAD: Workload = Workload {
    name: "coll",
    about: "collectives, OSU loops (osu_barrier, osu_bcast, osu_allreduce, ...)",
    run,
    worker: Some((p2p::WORKER, p2p::worker)),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_follow_osu() {
        let k = p2p::kernel("allreduce").unwrap();
        assert_eq!(k.family, Family::Coll);
        assert_eq!(k.iterations(8, false), (1_000, 100));
        assert_eq!(k.iterations(8192, false), (1_000, 100));
        assert_eq!(k.iterations(16384, false), (100, 10));
        assert_eq!(k.iterations(1 << 20, true), (10, 1));
        let opts = Options::default();
        let s = k.sizes(&opts).unwrap();
        assert_eq!((s[0], *s.last().unwrap(), s.len()), (8, 4 << 20, 20));
        // The barrier has one size; reductions none below one f64.
        let b = p2p::kernel("barrier").unwrap();
        assert_eq!(b.sizes(&opts).unwrap(), [0]);
        let o = Options {
            sizes: Some((1, 16)),
            ..Options::default()
        };
        assert_eq!(k.sizes(&o).unwrap(), [8, 16]);
        let g = p2p::kernel("gather").unwrap();
        assert_eq!(g.sizes(&o).unwrap(), [1, 2, 4, 8, 16]);
        let o = Options {
            sizes: Some((1, 4)),
            ..Options::default()
        };
        assert!(k.sizes(&o).is_err());
        let q = Options {
            quick: true,
            ..Options::default()
        };
        assert_eq!(k.sizes(&q).unwrap(), p2p::QUICK_SIZES);
    }

    #[test]
    fn workload_lists() {
        let all = select("coll").unwrap();
        assert_eq!(all.len(), KERNELS.len());
        let some = select("allreduce,barrier,allreduce").unwrap();
        let names: Vec<&str> = some.iter().map(|k| k.name).collect();
        assert_eq!(names, ["barrier", "allreduce"]);
        for bad in ["", "latency", "allreduce,nosuch"] {
            assert!(matches!(select(bad), Err(BenchError::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn result_lines_of_collectives_round_trip() {
        let line = p2p::format_line("reduce_scatter_block", "hmpi", 4, 1 << 20, "us", &[3.0]);
        let s = p2p::parse_line(&line).unwrap();
        assert_eq!(
            (s.workload.as_str(), s.threads, s.size, s.value),
            ("reduce_scatter_block", 4, 1 << 20, 3.0)
        );
    }
}
