//! `rma`: one-sided communication on hmpi's windows, 2 ranks.
//!
//! * `put-latency` / `get-latency`: one put (get) of each size followed by
//!   `flush` in a `lock_all` epoch, as OSU's `osu_put_latency` /
//!   `osu_get_latency` with `MPI_Win_flush` (time per operation);
//! * `put-bw` / `get-bw`: 64 puts (gets) of each size, then `flush`, as
//!   OSU's `osu_put_bw` / `osu_get_bw` (MB/s);
//! * `acc-latency`: an accumulate (`SUM` of `u64`s) of each size and
//!   `flush`; `fop-latency`: one 8-byte `fetch_and_op` and `flush` (size 8);
//! * `fence-put` / `pscw-put`: OSU's put latency with fence (a put, then a
//!   fence at both ranks) and with post/start/complete/wait (the target
//!   posts and waits, the origin starts, puts and completes), per epoch;
//! * `put-overlap` / `get-overlap`: the origin-side overlap figure of the
//!   truly one-sided paper (notes §5, its §5.5): in a `lock_all` epoch
//!   the origin times a burst of 16 puts (gets) of one size and `flush`
//!   (`T_comm`), then the burst, a computation of `T_comp = 1.2 T_comm`
//!   and `flush` (`T_total`); the value is `(T_comm + T_comp - T_total) /
//!   T_comm`, 1 when the transfer hides entirely behind the computation,
//!   0 when the two run one after the other (sizes of 4 KiB and up; each
//!   time is the fastest of 3 tries, so that a descheduled try does not
//!   count);
//! * `skew-origin`: the benchmark of the truly one-sided paper (notes §5):
//!   the origin's time for one exclusive lock epoch of 16 puts of 256 KiB
//!   while the target computes an `n × n` matrix product outside the
//!   library (`n` in the size column, 0: no skew); `skew-target` is the
//!   target's computing time, for scale. Truly one-sided, the origin's
//!   time does not grow with `n`. Every repetition starts after both
//!   ranks idled 50 ms, so that the origin starts with its caches in the
//!   same state for every `n` (an origin that waited for a long product
//!   in the previous repetition would otherwise start colder than one
//!   that did not).
//!
//! `hmpi-bench compare rma` measures the MPI peers too: the same worker
//! built with feature `mpi` runs `put-latency`, `get-latency`, `put-bw`,
//! `get-bw`, the overlap figure and the skew benchmark through rsmpi's raw C bindings
//! (`mpi::ffi::MPI_Win_allocate`, `MPI_Win_lock_all`, `MPI_Put`,
//! `MPI_Get`, `MPI_Win_flush`, `MPI_Win_lock`, `MPI_Win_unlock`), the
//! calls OSU's C programs make, with the same loops and sizes
//! (`--transport rsmpi --label rsmpi-<mpi>` on the worker's command line).
//!
//! Registered in `main.rs` with `mod rma;` and `rma::WORKLOAD` in
//! `WORKLOADS`.

use crate::p2p::ResultFile;
use crate::report::{self, Sample};
use crate::worker::{self, Job};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use hmpi::collective::SystemOperation;
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use hmpi::traits::{Communicator, CommunicatorCollectives};
use hmpi::window::{Access, LockType, Window};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The `rma` workload.
pub const WORKLOAD: Workload = Workload {
    name: "rma",
    about: "one-sided put/get latency (lock_all + flush) and the skew benchmark (16 x 256 KiB puts, busy target)",
    run,
    worker: Some((WORKER, worker)),
};

/// Hidden worker name (`hmpi-bench --worker rma …`).
const WORKER: &str = "rma";
/// First word of a result line.
const LINE_TAG: &str = "rma-sample";
const PUT: &str = "put-latency";
const GET: &str = "get-latency";
const SKEW: &str = "skew-origin";
const SKEW_TARGET: &str = "skew-target";
const PUT_BW: &str = "put-bw";
const GET_BW: &str = "get-bw";
const ACC: &str = "acc-latency";
const FOP: &str = "fop-latency";
const FENCE: &str = "fence-put";
const PSCW: &str = "pscw-put";
const PUT_OVERLAP: &str = "put-overlap";
const GET_OVERLAP: &str = "get-overlap";
/// The overlap figure's unit: a share of the communication time.
const OVERLAP_UNIT: &str = "fraction";
/// Operations of one overlap burst (the paper's 16).
const OVERLAP_BURST: usize = 16;
/// The computation inserted, relative to the burst's time (the paper's
/// 1.2).
const OVERLAP_COMP: f64 = 1.2;
/// The least size of the overlap figure.
const OVERLAP_MIN: usize = 4 << 10;
/// Tries of each overlap time; the fastest counts.
const OVERLAP_TRIES: usize = 3;
const UNIT: &str = "us";
const BW_UNIT: &str = "MB/s";
/// Operations in flight per bandwidth iteration (OSU's window).
const BW_WINDOW: usize = 64;
const BACKEND: &str = "hmpi";
/// The skew benchmark's puts: 16 of 256 KiB.
const SKEW_PUTS: usize = 16;
const SKEW_BYTES: usize = 256 << 10;
/// Matrix sizes of the skew benchmark (the paper's 0 … 256).
const MATRIX: &[usize] = &[0, 32, 64, 128, 192, 256];
const QUICK_MATRIX: &[usize] = &[0, 64, 256];
const DEFAULT_SIZES: &[usize] = &[8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20];
const QUICK_SIZES: &[usize] = &[8, 1 << 10, 64 << 10, 1 << 20];
/// How long both ranks idle before each repetition of the skew benchmark.
const IDLE: Duration = Duration::from_millis(50);
/// The issue's bound: origin time at the largest skew over its time
/// without skew.
const SKEW_TARGET_RATIO: f64 = 1.2;

/// The sizes of a run: `--sizes` (powers of two), else the defaults.
pub fn sizes(opts: &Options) -> Result<Vec<usize>, BenchError> {
    let v = match opts.sizes {
        None if opts.quick => QUICK_SIZES.to_vec(),
        None => DEFAULT_SIZES.to_vec(),
        Some((lo, hi)) => {
            let mut v = Vec::new();
            let mut s = lo.max(1).next_power_of_two();
            if lo > 0 && s != lo {
                v.push(lo);
            }
            while s <= hi {
                v.push(s);
                s *= 2;
            }
            v
        }
    };
    if v.is_empty() {
        return Err(BenchError::Usage("--sizes: no size in the range".into()));
    }
    if let Some(&big) = v.iter().find(|&&s| s > 1 << 30) {
        return Err(BenchError::Usage(format!(
            "--sizes: {} is larger than the 1 GiB rma accepts",
            report::fmt_size(big)
        )));
    }
    Ok(v)
}

/// Repetitions of every point (`--reps`, else 5; 3 with `--quick`).
pub fn reps(opts: &Options) -> usize {
    opts.reps.unwrap_or(if opts.quick { 3 } else { 5 })
}

/// Operations per repetition of a latency point (OSU's counts).
fn iters(size: usize, quick: bool) -> usize {
    let n = if size <= 8192 { 10_000 } else { 1_000 };
    if quick {
        n / 10
    } else {
        n
    }
}

fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let sizes = sizes(opts)?;
    let reps = reps(opts);
    progress.line(format_args!(
        "rma: 2 ranks, {} sizes, {reps} repetitions{}",
        sizes.len(),
        if opts.quick { " (quick)" } else { "" }
    ));
    let mut failures = Vec::new();
    let samples = match run_hmpi(&sizes, reps, opts.quick) {
        Ok(s) => s,
        Err(e) => {
            progress.line(format_args!("FAILED: {e}"));
            failures.push(e);
            Vec::new()
        }
    };
    let mut text = String::new();
    for w in ALL {
        let _ = writeln!(text, "{w}:");
        text += &report::render_table(&samples, w, &[BACKEND], &[]);
    }
    text += "(skew rows: the size column is the matrix order n, not bytes)\n";
    text += "targets:\n";
    text += &skew_lines(&samples, &[BACKEND], opts.quick);
    text += "  (the MPI peers in the same run: hmpi-bench compare rma)\n";
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// Every workload of the hmpi worker, in table order.
const ALL: [&str; 12] = [
    PUT,
    GET,
    PUT_BW,
    GET_BW,
    PUT_OVERLAP,
    GET_OVERLAP,
    ACC,
    FOP,
    FENCE,
    PSCW,
    SKEW,
    SKEW_TARGET,
];

/// The workloads `compare rma` measures on every backend, in table order.
pub const COMPARED: [&str; 8] = [
    PUT,
    GET,
    PUT_BW,
    GET_BW,
    PUT_OVERLAP,
    GET_OVERLAP,
    SKEW,
    SKEW_TARGET,
];

/// The compared workloads with a latency or bandwidth target (2 ranks):
/// the size it is judged at, whether higher is better, and the bound on
/// hmpi / the best peer: 8-byte put and get latency <= 0.5x, 1 MiB put and
/// get bandwidth >= 2x.
pub const TARGETS: [(&str, usize, bool, f64); 4] = [
    (PUT, 8, false, 0.5),
    (GET, 8, false, 0.5),
    (PUT_BW, 1 << 20, true, 2.0),
    (GET_BW, 1 << 20, true, 2.0),
];

/// The skew workload and the matrix order of its largest skew.
pub fn skew_point(quick: bool) -> (&'static str, usize) {
    let m = if quick { QUICK_MATRIX } else { MATRIX };
    (SKEW, m[m.len() - 1])
}

/// One line per backend of `labels`: the origin's time at the largest
/// skew over its time without skew; hmpi's is judged against the bound.
pub fn skew_lines(samples: &[Sample], labels: &[&str], quick: bool) -> String {
    let (_, last) = skew_point(quick);
    let mut out = String::new();
    for &b in labels {
        let origin = |n| report::find(samples, SKEW, b, 2, n).map(|s| s.value);
        let (Some(base), Some(busy)) = (origin(0), origin(last)) else {
            continue;
        };
        let verdict = if b != BACKEND {
            ""
        } else if busy <= base * SKEW_TARGET_RATIO {
            ", target <= 1.2 x: met"
        } else {
            ", target <= 1.2 x: NOT met"
        };
        let _ = writeln!(
            out,
            "  skew {b}: origin {busy:.1} us at n = {last} vs {base:.1} us without skew: \
             {:.2} x{verdict}",
            busy / base
        );
    }
    out
}

/// The worker's arguments for `sizes`, `reps`, `quick`, writing to `out`
/// (a backend adds `--transport` and `--label`).
pub fn worker_args(sizes: &[usize], reps: usize, quick: bool, out: &Path) -> Vec<OsString> {
    let list: Vec<String> = sizes.iter().map(usize::to_string).collect();
    let mut v: Vec<OsString> = vec![
        "--worker".into(),
        WORKER.into(),
        "--sizes".into(),
        list.join(",").into(),
        "--reps".into(),
        reps.to_string().into(),
        "--out".into(),
        out.into(),
    ];
    if quick {
        v.push("--quick".into());
    }
    v
}

/// A limit on a whole job's time, generous enough for a slow machine.
pub fn time_bound(sizes: &[usize], reps: usize, quick: bool) -> Duration {
    let bytes: usize = sizes.iter().map(|&s| s * iters(s, quick) * 2).sum();
    Duration::from_secs(60 + (reps as u64 + 1) * (bytes as u64 / 100_000_000 + 30))
}

/// The samples of backend `label` in `path`, checked to be complete for
/// `workloads` at `sizes`.
pub fn read_results(
    path: &Path,
    label: &str,
    sizes: &[usize],
    workloads: &[&str],
) -> Result<Vec<Sample>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let samples: Vec<Sample> = text.lines().filter_map(parse_line).collect();
    for &s in sizes {
        for &w in workloads {
            if report::find(&samples, w, label, 2, s).is_none() {
                return Err(format!(
                    "{label} {w}: no result for size {}",
                    report::fmt_size(s)
                ));
            }
        }
    }
    Ok(samples)
}

/// hmpi's measurement: 2 ranks through the launcher, bound to cores when
/// there are two.
pub fn run_hmpi(sizes: &[usize], reps: usize, quick: bool) -> Result<Vec<Sample>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let file = ResultFile::new("rma")?;
    let bind = if allowed_cpus().len() >= 2 {
        Bind::Core
    } else {
        Bind::None
    };
    let mut l = Launcher::new(exe, 2)
        .bind(bind)
        .timeout(time_bound(sizes, reps, quick));
    for a in worker_args(sizes, reps, quick, &file.0) {
        l = l.arg(a);
    }
    let report = l
        .run()
        .map_err(|e| format!("launching 2 ranks failed: {e}"))?;
    if !report.success() {
        return Err(format!(
            "the 2-rank rma job failed (first failure: rank {:?}; its messages are above)",
            report.first_failure
        ));
    }
    read_results(&file.0, BACKEND, sizes, &[PUT, GET])
}

fn format_line(label: &str, workload: &str, size: usize, values: &[f64]) -> String {
    let v: Vec<String> = values.iter().map(|x| format!("{x:.3}")).collect();
    format!("{LINE_TAG} {label} {workload} {size} {}", v.join(","))
}

fn parse_line(line: &str) -> Option<Sample> {
    let mut w = line.split_whitespace();
    if w.next()? != LINE_TAG {
        return None;
    }
    let backend = w.next()?;
    let name = w.next()?;
    let workload = ALL.into_iter().find(|&k| k == name)?;
    let overlap = workload == PUT_OVERLAP || workload == GET_OVERLAP;
    let unit = if workload == PUT_BW || workload == GET_BW {
        BW_UNIT
    } else if overlap {
        OVERLAP_UNIT
    } else {
        UNIT
    };
    let size: usize = w.next()?.parse().ok()?;
    // An overlap below 0 is a measurement (the computation ran slower
    // beside the transfer); times and bandwidths are not.
    let values: Vec<f64> = w
        .next()?
        .split(',')
        .map(|x| {
            x.parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && (overlap || *v >= 0.0))
        })
        .collect::<Option<_>>()?;
    Sample::from_reps(workload, backend, 2, size, unit, &values)
}

/// `c = a × b` for `n × n` matrices, naively (the target's computation;
/// no library call inside).
/// Computes (register arithmetic only, no memory traffic) for `d`.
fn compute(d: Duration) {
    let t = Instant::now();
    let mut x = 1u64;
    while t.elapsed() < d {
        for _ in 0..256 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    std::hint::black_box(x);
}

/// The sizes of the overlap figure among `sizes`.
fn overlap_sizes(sizes: &[usize]) -> impl Iterator<Item = usize> + '_ {
    sizes.iter().copied().filter(|&s| s >= OVERLAP_MIN)
}

/// One repetition of the overlap figure: `issue` starts a burst,
/// `complete` completes it (a flush). Returns `(T_comm + T_comp -
/// T_total) / T_comm`.
fn overlap_rep<E>(
    mut issue: impl FnMut() -> Result<(), E>,
    mut complete: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    let mut comm = f64::INFINITY;
    for _ in 0..OVERLAP_TRIES {
        let t = Instant::now();
        issue()?;
        complete()?;
        comm = comm.min(t.elapsed().as_secs_f64());
    }
    let comp = Duration::from_secs_f64(comm * OVERLAP_COMP);
    let mut total = f64::INFINITY;
    for _ in 0..OVERLAP_TRIES {
        let t = Instant::now();
        issue()?;
        compute(comp);
        complete()?;
        total = total.min(t.elapsed().as_secs_f64());
    }
    Ok((comm + comp.as_secs_f64() - total) / comm)
}

fn matmul(n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for i in 0..n {
        for j in 0..n {
            let mut s = 0.0;
            for k in 0..n {
                s += a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = s;
        }
    }
}

fn worker(args: &[String]) -> Result<(), BenchError> {
    let job = worker::parse(WORKER, args, 5, Some(BACKEND))?;
    let lines = match job.transport.as_str() {
        BACKEND => hmpi_worker(&job)?,
        #[cfg(feature = "mpi")]
        "rsmpi" => peer::worker(&job)?,
        #[cfg(not(feature = "mpi"))]
        "rsmpi" => {
            return Err(BenchError::Usage(format!(
                "--worker {WORKER}: this hmpi-bench was built without the `mpi` feature"
            )))
        }
        other => {
            return Err(BenchError::Usage(format!(
                "--worker {WORKER}: unknown transport '{other}' (known: hmpi, rsmpi)"
            )))
        }
    };
    if let Some(lines) = lines {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&job.out)
            .map_err(|e| BenchError::Failed(format!("rma worker: {}: {e}", job.out)))?;
        for l in &lines {
            writeln!(f, "{l}").map_err(|e| BenchError::Failed(format!("rma worker: {e}")))?;
        }
    }
    Ok(())
}

/// hmpi's rank: measures everything; rank 0 returns the result lines.
fn hmpi_worker(job: &Job) -> Result<Option<Vec<String>>, BenchError> {
    // Window memory and origin buffers in the node heap.
    crate::node_heap_allocator();
    let failed = |e: hmpi::Error| BenchError::Failed(format!("rma worker: {e}"));
    let universe = hmpi::init().map_err(failed)?;
    let world = universe.world();
    if world.size() != 2 {
        return Err(BenchError::Failed(format!(
            "rma worker: needs 2 ranks, the job has {}",
            world.size()
        )));
    }
    let me = world.rank();
    let max = job
        .sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(SKEW_PUTS * SKEW_BYTES);
    let win = Window::<u8>::allocate(&world, max).map_err(failed)?;
    let src = vec![0x5au8; max];
    let mut dst = vec![0u8; max];
    let mut lines = Vec::new();

    // Latency: rank 0 puts into (gets from) rank 1, which only waits.
    world.barrier().map_err(failed)?;
    let win64 = Window::<u64>::allocate(&world, max / 8 + 1).map_err(failed)?;
    if me == 0 {
        let e = win.lock_all().map_err(failed)?;
        let e64 = win64.lock_all().map_err(failed)?;
        for &size in &job.sizes {
            let n = iters(size, job.quick);
            for (w, put) in [(PUT, true), (GET, false)] {
                let mut one = || -> Result<(), hmpi::Error> {
                    if put {
                        e.put(1, &src[..size], 0)?;
                    } else {
                        e.get(1, &mut dst[..size], 0)?;
                    }
                    e.flush(1)
                };
                for _ in 0..n / 10 {
                    one().map_err(failed)?;
                }
                let mut us = Vec::with_capacity(job.reps);
                for _ in 0..job.reps {
                    let t = Instant::now();
                    for _ in 0..n {
                        one().map_err(failed)?;
                    }
                    us.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
                }
                lines.push(format_line(BACKEND, w, size, &us));
            }
        }
        // Bandwidth: a window of puts (gets), then one flush.
        for &size in &job.sizes {
            let n = (iters(size, job.quick) / BW_WINDOW).max(2);
            for (w, put) in [(PUT_BW, true), (GET_BW, false)] {
                let mut one = || -> Result<(), hmpi::Error> {
                    for _ in 0..BW_WINDOW {
                        if put {
                            e.put(1, &src[..size], 0)?;
                        } else {
                            e.get(1, &mut dst[..size], 0)?;
                        }
                    }
                    e.flush(1)
                };
                one().map_err(failed)?;
                let mut mbs = Vec::with_capacity(job.reps);
                for _ in 0..job.reps {
                    let t = Instant::now();
                    for _ in 0..n {
                        one().map_err(failed)?;
                    }
                    let bytes = (size * BW_WINDOW * n) as f64;
                    mbs.push(bytes / t.elapsed().as_secs_f64() / 1e6);
                }
                lines.push(format_line(BACKEND, w, size, &mbs));
            }
        }
        // The overlap figure: bursts of puts (gets), computation, flush.
        for size in overlap_sizes(&job.sizes) {
            for (w, put) in [(PUT_OVERLAP, true), (GET_OVERLAP, false)] {
                let mut v = Vec::with_capacity(job.reps);
                for rep in 0..=job.reps {
                    let x = overlap_rep(
                        || -> Result<(), hmpi::Error> {
                            for _ in 0..OVERLAP_BURST {
                                if put {
                                    e.put(1, &src[..size], 0)?;
                                } else {
                                    e.get(1, &mut dst[..size], 0)?;
                                }
                            }
                            Ok(())
                        },
                        || e.flush(1),
                    )
                    .map_err(failed)?;
                    if rep > 0 {
                        // The first repetition warms up.
                        v.push(x);
                    }
                }
                lines.push(format_line(BACKEND, w, size, &v));
            }
        }
        // Accumulate and fetch-and-op latency, on a window of u64s.
        let words: Vec<u64> = (0..max / 8).map(|i| i as u64).collect();
        for (w, sizes) in [(ACC, job.sizes.clone()), (FOP, vec![8])] {
            for size in sizes {
                let k = size / 8;
                if k == 0 {
                    continue;
                }
                let n = iters(size, job.quick);
                let one = || -> Result<(), hmpi::Error> {
                    if w == ACC {
                        e64.accumulate(1, &words[..k], 0, SystemOperation::sum())?;
                    } else {
                        e64.fetch_and_op(1, 1, 0, SystemOperation::sum())?;
                    }
                    e64.flush(1)
                };
                for _ in 0..n / 10 {
                    one().map_err(failed)?;
                }
                let mut us = Vec::with_capacity(job.reps);
                for _ in 0..job.reps {
                    let t = Instant::now();
                    for _ in 0..n {
                        one().map_err(failed)?;
                    }
                    us.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
                }
                lines.push(format_line(BACKEND, w, size, &us));
            }
        }
        e.unlock_all().map_err(failed)?;
        e64.unlock_all().map_err(failed)?;
    }
    world.barrier().map_err(failed)?;

    // Active target: a put per epoch, with fence and with post/start.
    let peer = world.group().exclude(&[me]).map_err(failed)?;
    for &size in &job.sizes {
        let n = (iters(size, job.quick) / 10).max(10);
        for w in [FENCE, PSCW] {
            let one = || -> Result<(), hmpi::Error> {
                if w == FENCE {
                    let f = win.fence()?;
                    if me == 0 {
                        f.put(1, &src[..size], 0)?;
                    }
                    f.end()
                } else if me == 0 {
                    let a = win.start(&peer)?;
                    a.put(1, &src[..size], 0)?;
                    a.complete()
                } else {
                    win.post(&peer)?.wait()
                }
            };
            for _ in 0..n / 10 {
                one().map_err(failed)?;
            }
            let mut us = Vec::with_capacity(job.reps);
            for _ in 0..job.reps {
                world.barrier().map_err(failed)?;
                let t = Instant::now();
                for _ in 0..n {
                    one().map_err(failed)?;
                }
                us.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
            }
            lines.push(format_line(BACKEND, w, size, &us));
        }
    }
    world.barrier().map_err(failed)?;

    // Skew: the target computes (outside the library) while the origin
    // runs its epoch; each reports its own time.
    let m = if job.quick { QUICK_MATRIX } else { MATRIX };
    for &n in m {
        let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64).collect();
        let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64).collect();
        let mut c = vec![0.0; n * n];
        let mut origin_us = Vec::with_capacity(job.reps);
        let mut target_us = Vec::with_capacity(job.reps);
        for rep in 0..=job.reps {
            // Both ranks idle the same time first, so that the origin's
            // caches are in the same state whatever `n` is (after an idle
            // wait other processes have run on its core); the epoch then
            // measures only whether the target's work holds the origin up.
            std::thread::sleep(IDLE);
            world.barrier().map_err(failed)?;
            let t = Instant::now();
            if me == 1 {
                matmul(n, &a, &b, &mut c);
                std::hint::black_box(&c);
            } else {
                let e = win.lock(1, LockType::Exclusive).map_err(failed)?;
                for k in 0..SKEW_PUTS {
                    e.put(&src[..SKEW_BYTES], (k * SKEW_BYTES) as u64)
                        .map_err(failed)?;
                }
                e.unlock().map_err(failed)?;
            }
            let mine = [t.elapsed().as_secs_f64() * 1e6];
            let mut both = [0.0f64; 2];
            world
                .all_gather_into(&mine[..], &mut both[..])
                .map_err(failed)?;
            if rep > 0 {
                // The first round warms up.
                origin_us.push(both[0]);
                target_us.push(both[1]);
            }
        }
        lines.push(format_line(BACKEND, SKEW, n, &origin_us));
        lines.push(format_line(BACKEND, SKEW_TARGET, n, &target_us));
    }
    win64.free().map_err(failed)?;
    win.free().map_err(failed)?;
    Ok((me == 0).then_some(lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_carry_their_backend() {
        let l = format_line("rsmpi-mpich", PUT_BW, 1 << 20, &[1.5, 2.5, 2.0]);
        let s = parse_line(&l).unwrap();
        assert_eq!(
            (
                s.workload.as_str(),
                s.backend.as_str(),
                s.size,
                s.unit,
                s.value
            ),
            (PUT_BW, "rsmpi-mpich", 1 << 20, BW_UNIT, 2.0)
        );
        assert!(parse_line("rma-sample hmpi nosuch 8 1.0").is_none());
        assert!(parse_line("rma-sample hmpi put-latency 8 -1.0").is_none());
        let dir = std::env::temp_dir().join(format!("rma-results-{}", std::process::id()));
        std::fs::write(&dir, format!("{l}\n")).unwrap();
        assert!(read_results(&dir, "rsmpi-mpich", &[1 << 20], &[PUT_BW]).is_ok());
        let missing = read_results(&dir, "rsmpi-mpich", &[8], &[PUT_BW]).unwrap_err();
        assert!(missing.contains("no result for size 8"), "{missing}");
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn sizes_and_arguments() {
        let o = Options {
            sizes: Some((3, 16)),
            ..Options::default()
        };
        assert_eq!(sizes(&o).unwrap(), [3, 4, 8, 16]);
        let o = Options {
            sizes: Some((1 << 31, 1 << 31)),
            ..Options::default()
        };
        assert!(sizes(&o).is_err());
        let a = worker_args(&[8, 16], 3, true, Path::new("/tmp/x"));
        let a: Vec<&str> = a.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            a,
            ["--worker", "rma", "--sizes", "8,16", "--reps", "3", "--out", "/tmp/x", "--quick"]
        );
        let job = worker::parse(
            WORKER,
            &a[2..]
                .iter()
                .map(|s| s.to_string())
                .chain(["--transport", "rsmpi", "--label", "rsmpi-openmpi"].map(String::from))
                .collect::<Vec<_>>(),
            5,
            Some(BACKEND),
        )
        .unwrap();
        assert_eq!(
            (job.transport.as_str(), job.label.as_str()),
            ("rsmpi", "rsmpi-openmpi")
        );
        assert_eq!((job.sizes, job.reps, job.quick), (vec![8, 16], 3, true));
    }
}

/// An MPI peer's rank: the compared measurements through rsmpi's raw C
/// bindings, as OSU's C programs call them.
#[cfg(feature = "mpi")]
mod peer {
    use super::{
        format_line, iters, matmul, overlap_rep, overlap_sizes, BenchError, Job, BW_WINDOW, GET,
        GET_BW, GET_OVERLAP, IDLE, MATRIX, OVERLAP_BURST, PUT, PUT_BW, PUT_OVERLAP, QUICK_MATRIX,
        SKEW, SKEW_BYTES, SKEW_PUTS, SKEW_TARGET,
    };
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::Equivalence;
    use mpi::ffi;
    use mpi::raw::AsRaw;
    use mpi::topology::Communicator;
    use std::os::raw::{c_int, c_void};
    use std::time::Instant;

    /// A window of bytes allocated by the MPI library (`MPI_Win_allocate`).
    struct Win {
        raw: ffi::MPI_Win,
        label: String,
    }

    impl Win {
        fn check(&self, what: &str, code: c_int) -> Result<(), BenchError> {
            check(&self.label, what, code)
        }

        /// `MPI_Put` (or `MPI_Get`) of `len` bytes at `buf` to (from)
        /// displacement `disp` of `target`.
        fn transfer(
            &self,
            put: bool,
            buf: *mut u8,
            len: usize,
            target: c_int,
            disp: usize,
        ) -> Result<(), BenchError> {
            let n = c_int::try_from(len)
                .map_err(|_| BenchError::Failed(format!("{}: {len} bytes", self.label)))?;
            let byte = u8::equivalent_datatype().as_raw();
            let code = if put {
                // SAFETY: `buf` is readable for `len` bytes until the
                // caller's flush or unlock completes the put; the window
                // holds `disp + len` bytes at the target (sized for the
                // largest transfer).
                unsafe {
                    ffi::MPI_Put(
                        buf as *const c_void,
                        n,
                        byte,
                        target,
                        disp as ffi::MPI_Aint,
                        n,
                        byte,
                        self.raw,
                    )
                }
            } else {
                // SAFETY: as for the put; `buf` is writable for `len`
                // bytes until the caller's flush completes the get.
                unsafe {
                    ffi::MPI_Get(
                        buf as *mut c_void,
                        n,
                        byte,
                        target,
                        disp as ffi::MPI_Aint,
                        n,
                        byte,
                        self.raw,
                    )
                }
            };
            self.check(if put { "MPI_Put" } else { "MPI_Get" }, code)
        }

        fn flush(&self, target: c_int) -> Result<(), BenchError> {
            // SAFETY: a live window in a passive-target epoch.
            let code = unsafe { ffi::MPI_Win_flush(target, self.raw) };
            self.check("MPI_Win_flush", code)
        }
    }

    fn check(label: &str, what: &str, code: c_int) -> Result<(), BenchError> {
        if code == ffi::MPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(BenchError::Failed(format!(
                "{label} {what}: MPI error code {code}"
            )))
        }
    }

    /// Both ranks: the compared measurements; rank 0 returns the lines.
    pub fn worker(job: &Job) -> Result<Option<Vec<String>>, BenchError> {
        let label = job.label.as_str();
        let universe = mpi::initialize()
            .ok_or_else(|| BenchError::Failed(format!("{label}: MPI was already initialised")))?;
        let world = universe.world();
        if world.size() != 2 {
            return Err(BenchError::Failed(format!(
                "{label} rma worker: needs 2 ranks, the job has {}",
                world.size()
            )));
        }
        let me = world.rank();
        let max = job
            .sizes
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(SKEW_PUTS * SKEW_BYTES);
        let mut base: *mut u8 = std::ptr::null_mut();
        // SAFETY: a plain handle value.
        let mut raw = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: collective over the world; MPI writes the base address
        // into `base` and the handle into `raw`.
        let code = unsafe {
            ffi::MPI_Win_allocate(
                max as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                world.as_raw(),
                (&mut base as *mut *mut u8).cast::<c_void>(),
                &mut raw,
            )
        };
        check(label, "MPI_Win_allocate", code)?;
        let win = Win {
            raw,
            label: label.to_owned(),
        };
        let mut src = vec![0x5au8; max];
        let mut dst = vec![0u8; max];
        let mut lines = Vec::new();
        world.barrier();
        if me == 0 {
            // SAFETY: a live window; no epoch is open on it.
            let code = unsafe { ffi::MPI_Win_lock_all(0, win.raw) };
            win.check("MPI_Win_lock_all", code)?;
            for &size in &job.sizes {
                let n = iters(size, job.quick);
                for (w, put) in [(PUT, true), (GET, false)] {
                    let buf = if put {
                        src.as_mut_ptr()
                    } else {
                        dst.as_mut_ptr()
                    };
                    let one = || -> Result<(), BenchError> {
                        win.transfer(put, buf, size, 1, 0)?;
                        win.flush(1)
                    };
                    for _ in 0..n / 10 {
                        one()?;
                    }
                    let mut us = Vec::with_capacity(job.reps);
                    for _ in 0..job.reps {
                        let t = Instant::now();
                        for _ in 0..n {
                            one()?;
                        }
                        us.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
                    }
                    lines.push(format_line(label, w, size, &us));
                }
            }
            for &size in &job.sizes {
                let n = (iters(size, job.quick) / BW_WINDOW).max(2);
                for (w, put) in [(PUT_BW, true), (GET_BW, false)] {
                    let buf = if put {
                        src.as_mut_ptr()
                    } else {
                        dst.as_mut_ptr()
                    };
                    let one = || -> Result<(), BenchError> {
                        for _ in 0..BW_WINDOW {
                            win.transfer(put, buf, size, 1, 0)?;
                        }
                        win.flush(1)
                    };
                    one()?;
                    let mut mbs = Vec::with_capacity(job.reps);
                    for _ in 0..job.reps {
                        let t = Instant::now();
                        for _ in 0..n {
                            one()?;
                        }
                        let bytes = (size * BW_WINDOW * n) as f64;
                        mbs.push(bytes / t.elapsed().as_secs_f64() / 1e6);
                    }
                    lines.push(format_line(label, w, size, &mbs));
                }
            }
            for size in overlap_sizes(&job.sizes) {
                for (w, put) in [(PUT_OVERLAP, true), (GET_OVERLAP, false)] {
                    let buf = if put {
                        src.as_mut_ptr()
                    } else {
                        dst.as_mut_ptr()
                    };
                    let mut v = Vec::with_capacity(job.reps);
                    for rep in 0..=job.reps {
                        let x = overlap_rep(
                            || -> Result<(), BenchError> {
                                for _ in 0..OVERLAP_BURST {
                                    win.transfer(put, buf, size, 1, 0)?;
                                }
                                Ok(())
                            },
                            || win.flush(1),
                        )?;
                        if rep > 0 {
                            v.push(x);
                        }
                    }
                    lines.push(format_line(label, w, size, &v));
                }
            }
            // SAFETY: closes the lock_all epoch opened above.
            let code = unsafe { ffi::MPI_Win_unlock_all(win.raw) };
            win.check("MPI_Win_unlock_all", code)?;
        }
        world.barrier();

        // Skew, as in the hmpi worker.
        let m = if job.quick { QUICK_MATRIX } else { MATRIX };
        for &n in m {
            let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64).collect();
            let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64).collect();
            let mut c = vec![0.0; n * n];
            let mut origin_us = Vec::with_capacity(job.reps);
            let mut target_us = Vec::with_capacity(job.reps);
            for rep in 0..=job.reps {
                std::thread::sleep(IDLE);
                world.barrier();
                let t = Instant::now();
                if me == 1 {
                    matmul(n, &a, &b, &mut c);
                    std::hint::black_box(&c);
                } else {
                    let exclusive = ffi::MPI_LOCK_EXCLUSIVE as c_int;
                    // SAFETY: a live window; no epoch is open on it.
                    let code = unsafe { ffi::MPI_Win_lock(exclusive, 1, 0, win.raw) };
                    win.check("MPI_Win_lock", code)?;
                    for k in 0..SKEW_PUTS {
                        win.transfer(true, src.as_mut_ptr(), SKEW_BYTES, 1, k * SKEW_BYTES)?;
                    }
                    // SAFETY: closes the lock epoch opened above.
                    let code = unsafe { ffi::MPI_Win_unlock(1, win.raw) };
                    win.check("MPI_Win_unlock", code)?;
                }
                let mine = [t.elapsed().as_secs_f64() * 1e6];
                let mut both = [0.0f64; 2];
                world.all_gather_into(&mine[..], &mut both[..]);
                if rep > 0 {
                    origin_us.push(both[0]);
                    target_us.push(both[1]);
                }
            }
            lines.push(format_line(label, SKEW, n, &origin_us));
            lines.push(format_line(label, SKEW_TARGET, n, &target_us));
        }
        let mut raw = win.raw;
        // SAFETY: collective; every epoch on the window is closed.
        let code = unsafe { ffi::MPI_Win_free(&mut raw) };
        check(label, "MPI_Win_free", code)?;
        std::hint::black_box(base);
        Ok((me == 0).then_some(lines))
    }
}
