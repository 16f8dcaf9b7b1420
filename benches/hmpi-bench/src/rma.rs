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
//! The MPI peers are not measured by this workload yet (`compare` does
//! not know it).
//!
//! Registered in `main.rs` with `mod rma;` and `rma::WORKLOAD` in
//! `WORKLOADS`.

use crate::p2p::ResultFile;
use crate::report::{self, Sample};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use hmpi::collective::SystemOperation;
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use hmpi::traits::{Communicator, CommunicatorCollectives};
use hmpi::window::{Access, LockType, Window};
use std::fmt::Write as _;
use std::io::Write as _;
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
/// The bound: origin time at the largest skew over its time
/// without skew.
const SKEW_TARGET_RATIO: f64 = 1.2;

fn sizes(opts: &Options) -> Vec<usize> {
    let Some((lo, hi)) = opts.sizes else {
        return if opts.quick {
            QUICK_SIZES.to_vec()
        } else {
            DEFAULT_SIZES.to_vec()
        };
    };
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
    let sizes = sizes(opts);
    if sizes.is_empty() {
        return Err(BenchError::Usage("--sizes: no size in the range".into()));
    }
    if let Some(&big) = sizes.iter().find(|&&s| s > 1 << 30) {
        return Err(BenchError::Usage(format!(
            "--sizes: {} is larger than the 1 GiB rma accepts",
            report::fmt_size(big)
        )));
    }
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    progress.line(format_args!(
        "rma: 2 ranks, {} sizes, {reps} repetitions{}",
        sizes.len(),
        if opts.quick { " (quick)" } else { "" }
    ));
    let mut failures = Vec::new();
    let samples = match launch(&sizes, reps, opts.quick) {
        Ok(s) => s,
        Err(e) => {
            progress.line(format_args!("FAILED: {e}"));
            failures.push(e);
            Vec::new()
        }
    };
    let mut text = String::new();
    for w in [
        PUT,
        GET,
        PUT_BW,
        GET_BW,
        ACC,
        FOP,
        FENCE,
        PSCW,
        SKEW,
        SKEW_TARGET,
    ] {
        let _ = writeln!(text, "{w}:");
        text += &report::render_table(&samples, w, &[BACKEND], &[]);
    }
    text += "(skew rows: the size column is the matrix order n, not bytes)\n";
    let origin = |n| report::find(&samples, SKEW, BACKEND, 2, n).map(|s| s.value);
    let m = if opts.quick { QUICK_MATRIX } else { MATRIX };
    if let (Some(base), Some(&last)) = (origin(0), m.last()) {
        if let Some(busy) = origin(last) {
            let _ = writeln!(
                text,
                "targets:\n  skew: origin {busy:.1} us at n = {last} vs {base:.1} us without skew: \
                 {:.2} x, target <= {SKEW_TARGET_RATIO} x: {} (the peers are not measured by \
                 this workload yet)",
                busy / base,
                if busy <= base * SKEW_TARGET_RATIO {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
    }
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

fn launch(sizes: &[usize], reps: usize, quick: bool) -> Result<Vec<Sample>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let file = ResultFile::new("rma")?;
    let list: Vec<String> = sizes.iter().map(usize::to_string).collect();
    let bind = if allowed_cpus().len() >= 2 {
        Bind::Core
    } else {
        Bind::None
    };
    let bytes: usize = sizes.iter().map(|&s| s * iters(s, quick) * 2).sum();
    let bound = Duration::from_secs(60 + (reps as u64 + 1) * (bytes as u64 / 100_000_000 + 30));
    let mut l = Launcher::new(exe, 2)
        .arg("--worker")
        .arg(WORKER)
        .arg("--sizes")
        .arg(list.join(","))
        .arg("--reps")
        .arg(reps.to_string())
        .arg("--out")
        .arg(file.0.as_os_str())
        .bind(bind)
        .timeout(bound);
    if quick {
        l = l.arg("--quick");
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
    let text = std::fs::read_to_string(&file.0)
        .map_err(|e| format!("cannot read {}: {e}", file.0.display()))?;
    let samples: Vec<Sample> = text.lines().filter_map(parse_line).collect();
    for &s in sizes {
        for w in [PUT, GET] {
            if report::find(&samples, w, BACKEND, 2, s).is_none() {
                return Err(format!("{w}: no result for size {}", report::fmt_size(s)));
            }
        }
    }
    Ok(samples)
}

fn format_line(workload: &str, size: usize, values: &[f64]) -> String {
    let v: Vec<String> = values.iter().map(|x| format!("{x:.3}")).collect();
    format!("{LINE_TAG} {workload} {size} {}", v.join(","))
}

fn parse_line(line: &str) -> Option<Sample> {
    let mut w = line.split_whitespace();
    if w.next()? != LINE_TAG {
        return None;
    }
    let name = w.next()?;
    let workload = [
        PUT,
        GET,
        PUT_BW,
        GET_BW,
        ACC,
        FOP,
        FENCE,
        PSCW,
        SKEW,
        SKEW_TARGET,
    ]
    .into_iter()
    .find(|&k| k == name)?;
    let unit = if workload == PUT_BW || workload == GET_BW {
        BW_UNIT
    } else {
        UNIT
    };
    let size: usize = w.next()?.parse().ok()?;
    let values: Vec<f64> = w
        .next()?
        .split(',')
        .map(|x| x.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0))
        .collect::<Option<_>>()?;
    Sample::from_reps(workload, BACKEND, 2, size, unit, &values)
}

/// The worker's arguments.
struct Job {
    sizes: Vec<usize>,
    reps: usize,
    quick: bool,
    out: String,
}

fn parse_job(args: &[String]) -> Result<Job, BenchError> {
    let bad = |m: String| BenchError::Usage(format!("--worker {WORKER}: {m}"));
    let mut job = Job {
        sizes: Vec::new(),
        reps: 5,
        quick: false,
        out: String::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| bad(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--sizes" => {
                job.sizes = value()?
                    .split(',')
                    .map(|s| s.parse().map_err(|_| bad(format!("bad size '{s}'"))))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => {
                let v = value()?;
                job.reps = v
                    .parse()
                    .ok()
                    .filter(|&r| r > 0)
                    .ok_or_else(|| bad(format!("bad --reps '{v}'")))?
            }
            "--out" => job.out = value()?,
            "--quick" => job.quick = true,
            other => return Err(bad(format!("unknown argument '{other}'"))),
        }
    }
    if job.sizes.is_empty() || job.out.is_empty() {
        return Err(bad("--sizes and --out are required".into()));
    }
    Ok(job)
}

/// `c = a × b` for `n × n` matrices, naively (the target's computation;
/// no library call inside).
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
    let job = parse_job(args)?;
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
                lines.push(format_line(w, size, &us));
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
                lines.push(format_line(w, size, &mbs));
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
                lines.push(format_line(w, size, &us));
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
            lines.push(format_line(w, size, &us));
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
        lines.push(format_line(SKEW, n, &origin_us));
        lines.push(format_line(SKEW_TARGET, n, &target_us));
    }
    if me == 0 {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&job.out)
            .map_err(|e| BenchError::Failed(format!("rma worker: {}: {e}", job.out)))?;
        for l in &lines {
            writeln!(f, "{l}").map_err(|e| BenchError::Failed(format!("rma worker: {e}")))?;
        }
    }
    win64.free().map_err(failed)?;
    win.free().map_err(failed)?;
    Ok(())
}
