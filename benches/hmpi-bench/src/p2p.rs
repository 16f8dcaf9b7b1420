//! Workloads `latency`, `bw`, `bibw` and `msgrate`: the OSU micro-benchmarks'
//! point-to-point loops, written once over [`Transport`] and run for hmpi
//! (through the launcher) and, by `hmpi-bench compare`, for rsmpi over each
//! system MPI (under its own `mpirun`).
//!
//! | kernel | OSU program | loop (rank 0) | value |
//! |---|---|---|---|
//! | `latency` | `osu_latency` | send, receive (ping-pong) | one-way µs = round trip / 2 |
//! | `bw` | `osu_bw` | window of 64 sends, wait, 4-byte ack | MB/s (10^6 B/s) |
//! | `bibw` | `osu_bibw` | 64 receives + 64 sends both ways, wait | MB/s, both directions |
//! | `msgrate` | `osu_mbw_mr` | as `bw`, ranks in pairs | million messages/s, all pairs |
//!
//! Iteration counts are OSU's (`osu_util.h`): latency 10 000 iterations
//! after 100 warm-up ones for sizes up to 8 KiB, 1 000 after 10 above;
//! windows 100 after 10 up to 8 KiB, 20 after 2 above; window 64. Every
//! window of sends reads one buffer and every window of receives writes
//! one buffer, as in OSU; buffers are page aligned, allocated once at the
//! largest size. Unlike OSU, which times one run, each size runs its
//! warm-up once and then `--reps` timed repetitions of the full iteration
//! count, each starting after a barrier; the median is the value and the
//! minimum and maximum go to the CSV. `--quick` divides the iteration
//! counts by 10.
//!
//! The [`Kernel`] table, the worker and the parent's launch are shared
//! with the collective kernels ([`crate::coll`]), which differ only in
//! their loop, their iteration counts ([`Loops`]) and their buffers (a
//! piece per rank).
//!
//! The worker side (`hmpi-bench --worker p2p …`, every rank) appends one
//! line per size to the `--out` file (rank 0 only) and prints progress on
//! stderr; the parent turns the lines into [`Sample`]s.

use crate::report::{self, fmt_size, Sample};
use crate::transport::{self, AlignedBuf, TResult, Transport};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Hidden worker name (`hmpi-bench --worker p2p …`).
pub const WORKER: &str = "p2p";
/// OSU's window: messages in flight per iteration.
pub const WINDOW: usize = 64;
/// OSU's `LARGE_MESSAGE_SIZE`: above it, fewer iterations.
pub const LARGE: usize = 8192;
/// The largest size measured by default (OSU's `MAX_MSG_SIZE`).
pub const MAX_DEFAULT: usize = 4 << 20;
/// The largest size accepted.
pub const MAX_SIZE: usize = 64 << 20;
/// Timed repetitions per size by default.
pub const DEFAULT_REPS: usize = 5;
/// Repetitions with `--quick`.
pub const QUICK_REPS: usize = 3;
/// Sizes of `--quick` (unless `--sizes` says otherwise).
pub const QUICK_SIZES: [usize; 4] = [8, 1 << 10, 64 << 10, 1 << 20];
/// Iteration divisor of `--quick`.
const QUICK_DIV: usize = 10;
/// Tags, as in OSU.
const TAG_DATA: i32 = 100;
const TAG_ACK: i32 = 101;
const TAG_PING: i32 = 1;
/// Bytes of the bandwidth benchmarks' acknowledgement.
const ACK: usize = 4;
/// First word of a result line in the `--out` file.
const LINE_TAG: &str = "sample";

/// One point-to-point benchmark kernel.
pub struct Kernel {
    /// Workload name on the command line and in the CSV.
    pub name: &'static str,
    /// Unit of its values.
    pub unit: &'static str,
    /// Whether a larger value is better (bandwidth) or worse (latency).
    pub higher_is_better: bool,
    /// The smallest size of its default range (OSU: 0 for latency, else 1;
    /// collectives: 0 marks the size-less barrier, 8 a reduction's `f64`).
    pub min_size: usize,
    /// Point-to-point or collective.
    pub family: Family,
    /// Which of OSU's iteration counts it runs.
    pub(crate) loops: Loops,
    /// One timed repetition of `iters` iterations at `size`; rank 0 returns
    /// the value, the others `None`.
    pub(crate) run: fn(&dyn Transport, &mut Bufs, usize, usize) -> TResult<Option<f64>>,
}

/// The kind of benchmark a kernel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Two ranks (or pairs) exchanging messages: this module.
    P2p,
    /// Every rank in one collective call: [`crate::coll`].
    Coll,
}

/// Which of OSU's iteration counts (`osu_util.h`) a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loops {
    /// `LAT_LOOP_*` / `LAT_SKIP_*`.
    Latency,
    /// `BW_LOOP_*` / `BW_SKIP_*`.
    Window,
    /// `COLL_LOOP_*` / `COLL_SKIP_*`.
    Coll,
}

/// The point-to-point kernels, in `--help` order; the collective ones are
/// [`crate::coll::KERNELS`], and [`kernel`] finds both.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "latency",
        unit: "us",
        higher_is_better: false,
        min_size: 0,
        family: Family::P2p,
        loops: Loops::Latency,
        run: latency,
    },
    Kernel {
        name: "bw",
        unit: "MB/s",
        higher_is_better: true,
        min_size: 1,
        family: Family::P2p,
        loops: Loops::Window,
        run: bandwidth,
    },
    Kernel {
        name: "bibw",
        unit: "MB/s",
        higher_is_better: true,
        min_size: 1,
        family: Family::P2p,
        loops: Loops::Window,
        run: bibandwidth,
    },
    Kernel {
        name: "msgrate",
        unit: "Mmsg/s",
        higher_is_better: true,
        min_size: 1,
        family: Family::P2p,
        loops: Loops::Window,
        run: msgrate,
    },
];

/// The kernel called `name`, point-to-point or collective.
pub fn kernel(name: &str) -> Option<&'static Kernel> {
    KERNELS
        .iter()
        .chain(crate::coll::KERNELS)
        .find(|k| k.name == name)
}

impl Kernel {
    /// (timed iterations, warm-up iterations) at `size`, as in OSU, divided
    /// by 10 for `quick`.
    pub fn iterations(&self, size: usize, quick: bool) -> (usize, usize) {
        let (iters, skip) = match (self.loops, size > LARGE) {
            (Loops::Latency, false) => (10_000, 100),
            (Loops::Latency, true) => (1_000, 10),
            (Loops::Window, false) => (100, 10),
            (Loops::Window, true) => (20, 2),
            (Loops::Coll, false) => (1_000, 100),
            (Loops::Coll, true) => (100, 10),
        };
        if quick {
            ((iters / QUICK_DIV).max(1), (skip / QUICK_DIV).max(1))
        } else {
            (iters, skip)
        }
    }

    /// Messages one iteration moves one way (for time estimates; a
    /// collective iteration is the call and a barrier).
    fn messages(&self) -> usize {
        match self.loops {
            Loops::Window => WINDOW,
            Loops::Latency | Loops::Coll => 2,
        }
    }

    /// The sizes to measure: powers of two from `--sizes` (and 0 when the
    /// range starts at 0), `--quick`'s four, or the kernel's OSU range. A
    /// collective kernel leaves out sizes below its `min_size` (a
    /// reduction's `f64`); `barrier` has one size, 0.
    pub fn sizes(&self, opts: &Options) -> Result<Vec<usize>, BenchError> {
        if self.family == Family::Coll && self.min_size == 0 {
            return Ok(vec![0]);
        }
        let (lo, hi) = match opts.sizes {
            Some(r) => r,
            None if opts.quick => return Ok(QUICK_SIZES.to_vec()),
            // Collectives: 8 B up (OSU's range from one `f64`).
            None if self.family == Family::Coll => (self.min_size.max(8), MAX_DEFAULT),
            None => (self.min_size, MAX_DEFAULT),
        };
        if hi > MAX_SIZE {
            return Err(BenchError::Usage(format!(
                "--sizes: {} measures sizes up to {}, not {hi}",
                self.name,
                fmt_size(MAX_SIZE)
            )));
        }
        let mut v: Vec<usize> = Vec::new();
        let lo = match self.family {
            Family::P2p => lo,
            Family::Coll => lo.max(self.min_size),
        };
        if lo == 0 {
            v.push(0);
        }
        v.extend(
            (0..usize::BITS)
                .map(|k| 1usize << k)
                .filter(|&s| s >= lo && s <= hi),
        );
        if self.family == Family::Coll {
            v.retain(|&s| s % self.min_size == 0);
        }
        if v.is_empty() {
            return Err(BenchError::Usage(format!(
                "--sizes: {} measures 0 and powers of two, and there is none from {lo} to {hi}",
                self.name
            )));
        }
        Ok(v)
    }

    /// A generous bound on one backend's run over `sizes` with `ranks`
    /// ranks, for timeouts.
    pub fn time_bound(&self, sizes: &[usize], reps: usize, quick: bool, ranks: usize) -> Duration {
        let mut secs = 30.0;
        // A collective moves up to `ranks` pieces per rank; more ranks
        // than CPUs take turns on them.
        let (width, crowd) = match self.family {
            Family::P2p => (1.0, 1.0),
            Family::Coll => (
                ranks as f64,
                if ranks > allowed_cpus().len() {
                    20.0
                } else {
                    1.0
                },
            ),
        };
        for &s in sizes {
            let (iters, skip) = self.iterations(s, quick);
            let n = (iters * reps + skip) as f64 * self.messages() as f64;
            // 50 µs per message and 200 MB/s: far below any real transport.
            secs += n * width * crowd * (50e-6 + s as f64 / 200e6);
        }
        Duration::from_secs_f64(secs)
    }
}

/// The send and receive buffers of a worker, allocated once.
pub struct Bufs {
    pub(crate) send: AlignedBuf,
    pub(crate) recv: AlignedBuf,
}

impl Bufs {
    fn new(max: usize) -> TResult<Bufs> {
        Ok(Bufs {
            send: AlignedBuf::new(max.max(ACK))?,
            recv: AlignedBuf::new(max.max(ACK))?,
        })
    }
}

/// The partner of `rank` in a job of `size` ranks: the first half pairs with
/// the second (`osu_mbw_mr`'s pairing), `None` for the odd one out.
fn partner(rank: usize, size: usize) -> Option<usize> {
    let half = size / 2;
    if rank < half {
        Some(rank + half)
    } else if rank < 2 * half {
        Some(rank - half)
    } else {
        None
    }
}

fn latency(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let (s, r) = (
        &b.send.as_slice()[..size],
        &mut b.recv.as_mut_slice()[..size],
    );
    t.barrier()?;
    let start = Instant::now();
    match t.rank() {
        0 => {
            for _ in 0..iters {
                t.send(s, 1, TAG_PING)?;
                t.recv(r, 1, TAG_PING)?;
            }
            let secs = start.elapsed().as_secs_f64();
            Ok(Some(secs * 1e6 / (2 * iters) as f64))
        }
        1 => {
            for _ in 0..iters {
                t.recv(r, 0, TAG_PING)?;
                t.send(s, 0, TAG_PING)?;
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// One `osu_bw` / `osu_mbw_mr` iteration loop; returns the elapsed seconds
/// on senders (the first half of the ranks).
fn windows(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let (rank, n) = (t.rank(), t.size());
    let Some(peer) = partner(rank, n) else {
        t.barrier()?;
        t.barrier()?;
        return Ok(None);
    };
    let (s, r) = (b.send.as_slice(), b.recv.as_mut_slice());
    t.barrier()?;
    let start = Instant::now();
    if rank < n / 2 {
        for _ in 0..iters {
            t.send_window(&s[..size], WINDOW, peer, TAG_DATA)?;
            t.recv(&mut r[..ACK], peer, TAG_ACK)?;
        }
    } else {
        for _ in 0..iters {
            t.recv_window(&mut r[..size], WINDOW, peer, TAG_DATA)?;
            t.send(&s[..ACK], peer, TAG_ACK)?;
        }
    }
    // Rank 0's clock stops after its last acknowledgement, as in OSU; the
    // barrier only keeps the next repetition from starting early.
    let secs = start.elapsed().as_secs_f64();
    t.barrier()?;
    Ok((rank == 0).then_some(secs))
}

fn bandwidth(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    Ok(windows(t, b, size, iters)?.map(|secs| (size * WINDOW * iters) as f64 / secs / 1e6))
}

fn msgrate(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let pairs = t.size() / 2;
    Ok(windows(t, b, size, iters)?.map(|secs| (pairs * WINDOW * iters) as f64 / secs / 1e6))
}

fn bibandwidth(t: &dyn Transport, b: &mut Bufs, size: usize, iters: usize) -> TResult<Option<f64>> {
    let (rank, n) = (t.rank(), t.size());
    let peer = match (rank, n) {
        (0, _) => 1,
        (1, _) => 0,
        _ => {
            t.barrier()?;
            return Ok(None);
        }
    };
    let (s, r) = (b.send.as_slice(), b.recv.as_mut_slice());
    t.barrier()?;
    let start = Instant::now();
    for _ in 0..iters {
        t.exchange_window(&s[..size], &mut r[..size], WINDOW, peer, TAG_DATA)?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((rank == 0).then(|| (2 * size * WINDOW * iters) as f64 / secs / 1e6))
}

// ---------------------------------------------------------------------------
// The worker side.

/// What a worker job measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// `hmpi` or `rsmpi`.
    pub transport: String,
    /// The backend's label in results.
    pub label: String,
    /// Kernel name.
    pub kernel: String,
    /// Sizes, in order.
    pub sizes: Vec<usize>,
    /// Timed repetitions per size.
    pub reps: usize,
    /// OSU iteration counts divided by 10.
    pub quick: bool,
    /// The file rank 0 appends its result lines to.
    pub out: PathBuf,
}

impl Job {
    /// The worker's arguments after `--worker p2p`.
    pub fn to_args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(|s| s.to_string()).collect();
        let mut v = vec![
            "--transport".into(),
            self.transport.clone(),
            "--label".into(),
            self.label.clone(),
            "--kernel".into(),
            self.kernel.clone(),
            "--sizes".into(),
            sizes.join(","),
            "--reps".into(),
            self.reps.to_string(),
            "--out".into(),
            self.out.display().to_string(),
        ];
        if self.quick {
            v.push("--quick".into());
        }
        v
    }

    /// Parses [`Job::to_args`]'s output.
    pub fn parse(args: &[String]) -> Result<Job, BenchError> {
        let bad = |m: String| BenchError::Usage(format!("p2p worker: {m}"));
        let mut job = Job {
            transport: String::new(),
            label: String::new(),
            kernel: String::new(),
            sizes: Vec::new(),
            reps: 0,
            quick: false,
            out: PathBuf::new(),
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            if flag == "--quick" {
                job.quick = true;
                continue;
            }
            let v = it
                .next()
                .ok_or_else(|| bad(format!("{flag} needs a value")))?;
            match flag.as_str() {
                "--transport" => job.transport = v.clone(),
                "--label" => job.label = v.clone(),
                "--kernel" => job.kernel = v.clone(),
                "--reps" => {
                    job.reps = v
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad(format!("--reps {v}")))?
                }
                "--sizes" => {
                    job.sizes = v
                        .split(',')
                        .map(|s| s.parse::<usize>().ok().filter(|&n| n <= MAX_SIZE))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad(format!("--sizes {v}")))?
                }
                "--out" => job.out = PathBuf::from(v),
                other => return Err(bad(format!("unknown argument '{other}'"))),
            }
        }
        if job.transport.is_empty() || job.kernel.is_empty() || job.sizes.is_empty() {
            return Err(bad("--transport, --kernel and --sizes are required".into()));
        }
        if job.out.as_os_str().is_empty() || job.reps == 0 {
            return Err(bad("--out and --reps are required".into()));
        }
        if job.label.is_empty() {
            job.label = job.transport.clone();
        }
        if kernel(&job.kernel).is_none() {
            return Err(bad(format!("unknown kernel '{}'", job.kernel)));
        }
        Ok(job)
    }
}

/// One result line: `sample kernel=K backend=B ranks=N size=S unit=U values=a,b,…`.
pub fn format_line(
    kernel: &str,
    backend: &str,
    ranks: usize,
    size: usize,
    unit: &str,
    values: &[f64],
) -> String {
    let v: Vec<String> = values.iter().map(|x| format!("{x:.6}")).collect();
    format!(
        "{LINE_TAG} kernel={kernel} backend={backend} ranks={ranks} size={size} unit={unit} values={}",
        v.join(",")
    )
}

/// Parses a [`format_line`] line into a sample (median, min, max of its
/// values); `None` for any other line.
pub fn parse_line(line: &str) -> Option<Sample> {
    let mut w = line.split_whitespace();
    if w.next()? != LINE_TAG {
        return None;
    }
    let mut field = |key: &str| -> Option<String> {
        w.next()?
            .strip_prefix(key)?
            .strip_prefix('=')
            .map(str::to_owned)
    };
    let k = kernel(&field("kernel")?)?;
    let backend = field("backend")?;
    let ranks: u32 = field("ranks")?.parse().ok()?;
    let size: usize = field("size")?.parse().ok()?;
    if field("unit")? != k.unit {
        return None;
    }
    let values: Vec<f64> = field("values")?
        .split(',')
        .map(|x| x.parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0))
        .collect::<Option<_>>()?;
    Sample::from_reps(k.name, &backend, ranks, size, k.unit, &values)
}

/// Reads every sample of the `--out` file at `path`.
pub fn read_results(path: &Path) -> Result<Vec<Sample>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text.lines().filter_map(parse_line).collect())
}

/// The worker: one rank of a job of any transport.
pub fn worker(args: &[String]) -> Result<(), BenchError> {
    let job = Job::parse(args)?;
    let k = kernel(&job.kernel).expect("checked by Job::parse");
    if job.transport == "hmpi" {
        // Message buffers, like every allocation after init, in the node heap.
        crate::node_heap_allocator();
    } else {
        crate::system_allocator();
    }
    let fail = |e: String| BenchError::Failed(e);
    let t = transport::open(&job.transport, &job.label).map_err(fail)?;
    if t.size() < 2 {
        return Err(fail(format!(
            "{}: {} needs at least 2 ranks, the job has {}",
            job.label,
            k.name,
            t.size()
        )));
    }
    let max = job.sizes.iter().copied().max().unwrap_or(0);
    // A collective's buffers hold a piece per rank (gather, alltoall, …).
    let max = match k.family {
        Family::P2p => max,
        Family::Coll => max * t.size(),
    };
    let mut bufs = Bufs::new(max).map_err(fail)?;
    if k.family == Family::Coll {
        crate::coll::prepare(&mut bufs).map_err(fail)?;
    }
    if job.transport == "hmpi" && !hmpi::is_shared(bufs.send.as_slice().as_ptr()) {
        return Err(fail(format!(
            "{}: the message buffers are not in the node heap, so the \
             single-copy path would not be measured",
            job.label
        )));
    }
    let mut out = if t.rank() == 0 {
        Some(
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&job.out)
                .map_err(|e| fail(format!("cannot open {}: {e}", job.out.display())))?,
        )
    } else {
        None
    };
    for &size in &job.sizes {
        let (iters, skip) = k.iterations(size, job.quick);
        (k.run)(&*t, &mut bufs, size, skip).map_err(fail)?;
        let mut values = Vec::with_capacity(job.reps);
        for _ in 0..job.reps {
            if let Some(v) = (k.run)(&*t, &mut bufs, size, iters).map_err(fail)? {
                values.push(v);
            }
        }
        if let Some(f) = out.as_mut() {
            let line = format_line(k.name, &job.label, t.size(), size, k.unit, &values);
            writeln!(f, "{line}")
                .and_then(|()| f.flush())
                .map_err(|e| fail(format!("cannot write {}: {e}", job.out.display())))?;
            let median = crate::stats::median(&values).unwrap_or(f64::NAN);
            eprintln!(
                "[hmpi-bench] {} {} size={}: {median:.3} {} (median of {})",
                k.name,
                t.label(),
                fmt_size(size),
                k.unit,
                values.len()
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The parent side.

/// A scratch file for a job's results, removed when dropped.
pub struct ResultFile(pub PathBuf);

impl ResultFile {
    /// A fresh, empty file in the temporary directory named after `what`.
    pub fn new(what: &str) -> Result<ResultFile, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // Relaxed: only uniqueness within this process matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("hmpi-bench-{}-{n}-{nanos:x}-{what}.txt", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ResultFile(path))
    }
}

impl Drop for ResultFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `kernel` on hmpi: `ranks` ranks through the launcher, bound to
/// cores when there is a CPU for each. Returns its samples.
pub fn run_hmpi(
    k: &Kernel,
    sizes: &[usize],
    reps: usize,
    quick: bool,
    ranks: usize,
) -> Result<Vec<Sample>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let file = ResultFile::new(k.name)?;
    let job = Job {
        transport: "hmpi".into(),
        label: "hmpi".into(),
        kernel: k.name.into(),
        sizes: sizes.to_vec(),
        reps,
        quick,
        out: file.0.clone(),
    };
    let bind = if allowed_cpus().len() >= ranks {
        Bind::Core
    } else {
        Bind::None
    };
    let n = u32::try_from(ranks).map_err(|_| format!("{ranks} ranks are too many"))?;
    let report = Launcher::new(exe, n)
        .arg("--worker")
        .arg(WORKER)
        .args(job.to_args())
        .bind(bind)
        .timeout(k.time_bound(sizes, reps, quick, ranks))
        .run()
        .map_err(|e| format!("launching {ranks} hmpi ranks failed: {e}"))?;
    if !report.success() {
        let why: Vec<String> = report
            .ranks
            .iter()
            .map(|r| format!("rank {} {:?}", r.rank, r.status))
            .collect();
        return Err(format!(
            "the {ranks}-rank hmpi job failed ({}; its messages are above)",
            why.join(", ")
        ));
    }
    let samples = read_results(&file.0)?;
    check_complete(&samples, k, "hmpi", sizes, ranks)?;
    Ok(samples)
}

/// Fails unless `samples` hold every size of `sizes` for `backend` at
/// `ranks` ranks.
pub fn check_complete(
    samples: &[Sample],
    k: &Kernel,
    backend: &str,
    sizes: &[usize],
    ranks: usize,
) -> Result<(), String> {
    let missing: Vec<String> = sizes
        .iter()
        .filter(|&&s| report::find(samples, k.name, backend, ranks as u32, s).is_none())
        .map(|&s| fmt_size(s))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{backend} {}: no result for size(s) {}",
            k.name,
            missing.join(", ")
        ))
    }
}

/// Repetitions from the options.
pub fn reps(opts: &Options) -> usize {
    opts.reps
        .unwrap_or(if opts.quick { QUICK_REPS } else { DEFAULT_REPS })
}

/// `hmpi-bench latency|bw|bibw|msgrate`: hmpi alone.
fn run_kernel(name: &str, opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let k = kernel(name).expect("registered kernel");
    let sizes = k.sizes(opts)?;
    let reps = reps(opts);
    progress.line(format_args!(
        "{}: hmpi, 2 ranks, {} sizes, {reps} repetitions (OSU iterations{})",
        k.name,
        sizes.len(),
        if opts.quick { " / 10" } else { "" }
    ));
    let (samples, failures) = match run_hmpi(k, &sizes, reps, opts.quick, 2) {
        Ok(s) => (s, Vec::new()),
        Err(e) => {
            progress.line(format_args!("FAILED: {e}"));
            (Vec::new(), vec![e])
        }
    };
    let mut text = report::render_table(&samples, k.name, &["hmpi"], &[]);
    text += "(compare with MPI peers in the same run: hmpi-bench compare ";
    text += k.name;
    text += ")\n";
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

fn run_latency(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    run_kernel("latency", opts, progress)
}
fn run_bw(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    run_kernel("bw", opts, progress)
}
fn run_bibw(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    run_kernel("bibw", opts, progress)
}
fn run_msgrate(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    run_kernel("msgrate", opts, progress)
}

/// `hmpi-bench latency` (an entry of [`crate::WORKLOADS`]).
pub const LATENCY: Workload = Workload {
    name: "latency",
    about: "one-way latency, ping-pong (osu_latency)",
    run: run_latency,
    worker: Some((WORKER, worker)),
};
/// `hmpi-bench bw`.
pub const BW: Workload = Workload {
    name: "bw",
    about: "bandwidth, 64 messages in flight (osu_bw)",
    run: run_bw,
    worker: Some((WORKER, worker)),
};
/// `hmpi-bench bibw`.
pub const BIBW: Workload = Workload {
    name: "bibw",
    about: "bidirectional bandwidth, 64 each way (osu_bibw)",
    run: run_bibw,
    worker: Some((WORKER, worker)),
};
/// `hmpi-bench msgrate`.
pub const MSGRATE: Workload = Workload {
    name: "msgrate",
    about: "message rate of rank pairs, window 64 (osu_mbw_mr)",
    run: run_msgrate,
    worker: Some((WORKER, worker)),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osu_iteration_counts() {
        let lat = kernel("latency").unwrap();
        assert_eq!(lat.iterations(8, false), (10_000, 100));
        assert_eq!(lat.iterations(8192, false), (10_000, 100));
        assert_eq!(lat.iterations(16384, false), (1_000, 10));
        let bw = kernel("bw").unwrap();
        assert_eq!(bw.iterations(1, false), (100, 10));
        assert_eq!(bw.iterations(1 << 20, false), (20, 2));
        assert_eq!(bw.iterations(1 << 20, true), (2, 1));
    }

    #[test]
    fn default_sizes_follow_osu() {
        let opts = Options::default();
        let lat = kernel("latency").unwrap().sizes(&opts).unwrap();
        assert_eq!(lat.first(), Some(&0));
        assert_eq!(lat.get(1), Some(&1));
        assert_eq!(lat.last(), Some(&(4 << 20)));
        assert_eq!(lat.len(), 24);
        let bw = kernel("bw").unwrap().sizes(&opts).unwrap();
        assert_eq!(bw.first(), Some(&1));
        let o = Options {
            sizes: Some((8, 64)),
            ..Options::default()
        };
        assert_eq!(
            kernel("bw").unwrap().sizes(&o).unwrap(),
            vec![8, 16, 32, 64]
        );
        let o = Options {
            sizes: Some((3, 3)),
            ..Options::default()
        };
        assert!(kernel("bw").unwrap().sizes(&o).is_err());
    }

    #[test]
    fn pairs() {
        assert_eq!(partner(0, 2), Some(1));
        assert_eq!(partner(1, 2), Some(0));
        assert_eq!(partner(1, 4), Some(3));
        assert_eq!(partner(4, 5), None);
    }

    #[test]
    fn job_args_round_trip() {
        let job = Job {
            transport: "rsmpi".into(),
            label: "rsmpi-mpich".into(),
            kernel: "bw".into(),
            sizes: vec![1, 1024, 4 << 20],
            reps: 3,
            quick: true,
            out: PathBuf::from("/tmp/x"),
        };
        assert_eq!(Job::parse(&job.to_args()).unwrap(), job);
        for bad in [
            vec!["--transport", "hmpi"],
            vec![
                "--transport",
                "hmpi",
                "--kernel",
                "nope",
                "--sizes",
                "1",
                "--reps",
                "1",
                "--out",
                "x",
            ],
            vec![
                "--transport",
                "hmpi",
                "--kernel",
                "bw",
                "--sizes",
                "a",
                "--reps",
                "1",
                "--out",
                "x",
            ],
            vec![
                "--transport",
                "hmpi",
                "--kernel",
                "bw",
                "--sizes",
                "1",
                "--reps",
                "0",
                "--out",
                "x",
            ],
        ] {
            let v: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(Job::parse(&v).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn result_lines_round_trip() {
        let line = format_line("latency", "rsmpi-openmpi", 2, 8, "us", &[0.3, 0.1, 0.2]);
        let s = parse_line(&line).unwrap();
        assert_eq!(
            (s.workload.as_str(), s.backend.as_str()),
            ("latency", "rsmpi-openmpi")
        );
        assert_eq!((s.threads, s.size, s.unit), (2, 8, "us"));
        assert_eq!(s.value, 0.2);
        assert_eq!((s.min(), s.max()), (0.1, 0.3));
        // Wrong unit, non-positive or non-finite values, other lines.
        assert!(parse_line(&format_line("latency", "x", 2, 8, "MB/s", &[1.0])).is_none());
        assert!(parse_line(&format_line("bw", "x", 2, 8, "MB/s", &[0.0])).is_none());
        assert!(parse_line(&format_line("bw", "x", 2, 8, "MB/s", &[f64::INFINITY])).is_none());
        assert!(parse_line("[hmpi-bench] latency hmpi size=8: 0.2 us").is_none());
    }
}
