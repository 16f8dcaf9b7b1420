//! `hmpi-bench`: multi-process benchmarks of hmpi against its peers.
//!
//! ```text
//! hmpi-bench <workload> [--csv FILE] [--plot FILE.png] [--sizes MIN-MAX] [--reps N] [--ms N] [--quick]
//! hmpi-bench coll [--workloads bcast,allreduce,…] [--ranks N] [options]
//! hmpi-bench compare <workload>[,<workload>…] [--peers openmpi,mpich|none] [--no-build] [options]
//! hmpi-bench plot --csv FILE --out FILE.png [--benchmark NAME]
//! hmpi-bench --help
//! ```
//!
//! Each workload measures every backend it compares in the same run and
//! prints a table of medians with the ratios between them; `--csv` writes
//! every sample (`workload,backend,threads,size,value,unit,min,max`),
//! `--plot` draws them; `plot` draws a CSV written earlier (or a results
//! file under `docs/bench/`). Progress goes to stderr, results to stdout.
//!
//! Layout: this file parses the command line and dispatches; [`report`]
//! holds samples, tables and CSV; [`stats`] the order statistics; [`plot`]
//! the PNG charts; each workload family has its own module that registers
//! itself in [`WORKLOADS`] with a `run` function (the parent side) and, when
//! it needs several ranks, a `worker` function that the parent starts
//! through the launcher by re-executing this program with the hidden
//! arguments `--worker NAME …`:
//!
//! * [`alloc`]: allocator throughput, shmheap against glibc and mimalloc;
//! * [`p2p`]: `latency`, `bw`, `bibw`, `msgrate`, the OSU point-to-point
//!   loops written once over the [`transport::Transport`] trait, whose
//!   backends are hmpi and (feature `mpi`) rsmpi over a system MPI;
//! * [`coll`]: `coll`, the OSU collective loops (barrier, bcast, reduce,
//!   allreduce, gather, scatter, allgather, alltoall, reduce-scatter) as
//!   more kernels of the same kind, over the same transports;
//! * [`compare`]: `hmpi-bench compare`, which runs hmpi and the rsmpi peers
//!   (Open MPI, MPICH; each a build of this program with feature `mpi`,
//!   started by that MPI's launcher) in one invocation;
//! * [`opi`]: ownership passing (give/take) against the copy path and
//!   (feature `iceoryx2`) iceoryx2, with the kernels in [`opi_kernels`];
//! * [`msgrate_mt`]: `msgrate-mt`, the 8-byte message rate of N threads
//!   per rank (one VCI, hints, overtaking, streams) against N ranks per side;
//! * [`rma`]: one-sided put/get latency and the skew benchmark on hmpi's
//!   windows, and (`compare rma`) on the peers' `MPI_Win_allocate` windows;
//! * [`pgas`]: the global address space (put/get, fetch_add, GUPS, halo
//!   exchange through global pointers), and (`compare pgas`) MPI RMA;
//! * [`multinode`]: hmpi across virtual nodes against plain MPI, run as an
//!   MPI program under `mpirun` (feature `multinode`).
//!
//! Features: `mimalloc` and `plots` (default) add the `alloc` workload's
//! mimalloc backend and the PNG charts; `mpi` builds the rsmpi peer;
//! `iceoryx2` the zero-copy peer of `opi`.
//!
//! The global allocator is [`BenchAlloc`]: the node heap ([`ShmHeap`], which
//! serves from the system allocator until the process attaches to a node
//! heap) in hmpi message workers, so that message buffers live in the
//! shared heap as in any hmpi program; the system allocator in the `alloc`
//! workload (whose bookkeeping must not disturb the allocators it measures)
//! and in the MPI peers (as in any MPI program).

mod alloc;
mod coll;
mod compare;
mod floor;
#[cfg(feature = "iceoryx2")]
mod iceoryx;
mod msgrate_mt;
mod multinode;
mod opi;
mod opi_kernels;
mod p2p;
mod pgas;
#[cfg(feature = "plots")]
mod plot;
mod report;
mod rma;
mod stats;
mod transport;
mod worker;

use hmpi::ShmHeap;
use report::Sample;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The program's global allocator: [`ShmHeap`] (the node heap once the
/// process has attached to one, the system allocator before) unless
/// [`system_allocator`] was called, then the system allocator for every new
/// block. Frees go by address to whichever allocator made the block.
pub struct BenchAlloc;

/// Set by [`system_allocator`].
static SYSTEM_ONLY: AtomicBool = AtomicBool::new(false);
/// The node heap's allocator.
static NODE_HEAP: ShmHeap = ShmHeap::new();

#[global_allocator]
static GLOBAL: BenchAlloc = BenchAlloc;

/// New blocks come from the system allocator from now on (call it first
/// thing in a process, before it attaches to a node heap).
pub fn system_allocator() {
    // Relaxed: set before the process starts other threads (spawning
    // orders it before their first allocation) and read alone.
    SYSTEM_ONLY.store(true, Ordering::Relaxed);
}

/// New blocks come from the node heap once the process attaches (the
/// default; says so where a workload relies on it).
pub fn node_heap_allocator() {
    // Relaxed: as in `system_allocator`.
    SYSTEM_ONLY.store(false, Ordering::Relaxed);
}

fn system_only() -> bool {
    // Relaxed: see `system_allocator`.
    SYSTEM_ONLY.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` or `ShmHeap`, both sound
// allocators; a block goes back to the allocator that made it, told apart
// by address (`ShmHeap` blocks are exactly those inside the node segment).
unsafe impl GlobalAlloc for BenchAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout contract is passed on.
        unsafe {
            if system_only() {
                System.alloc(layout)
            } else {
                NODE_HEAP.alloc(layout)
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if system_only() {
                System.alloc_zeroed(layout)
            } else {
                NODE_HEAP.alloc_zeroed(layout)
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is a live block of this allocator, so it came from
        // `System` (outside the segment) or `ShmHeap` (inside).
        unsafe {
            if hmpi::is_shared(ptr) {
                NODE_HEAP.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `ShmHeap::realloc` itself hands blocks
        // outside the segment to `System`.
        unsafe {
            if system_only() && !hmpi::is_shared(ptr) {
                System.realloc(ptr, layout, new_size)
            } else {
                NODE_HEAP.realloc(ptr, layout, new_size)
            }
        }
    }
}

/// Why the benchmark stopped.
#[derive(Debug)]
pub enum BenchError {
    /// Bad command line: the message says what to change (exit code 2).
    Usage(String),
    /// A measurement could not be made (exit code 1).
    Failed(String),
}

impl BenchError {
    fn exit_code(&self) -> u8 {
        match self {
            BenchError::Usage(_) => 2,
            BenchError::Failed(_) => 1,
        }
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Usage(m) => write!(f, "{m} (see hmpi-bench --help)"),
            BenchError::Failed(m) => f.write_str(m),
        }
    }
}

/// Options shared by all workloads.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where to write the CSV, if anywhere.
    pub csv: Option<PathBuf>,
    /// Inclusive size range (bytes) from `--sizes`.
    pub sizes: Option<(usize, usize)>,
    /// Measured repetitions per point (`--reps`).
    pub reps: Option<usize>,
    /// Time per repetition in milliseconds (`--ms`).
    pub ms: Option<u64>,
    /// Few sizes, few repetitions, short timing: a smoke run.
    pub quick: bool,
    /// Where to draw the PNG chart, if anywhere (`--plot`).
    pub plot: Option<PathBuf>,
    /// `compare`: the peers to run (`--peers`, comma-separated), all known
    /// ones when `None`.
    pub peers: Option<String>,
    /// `compare`: where the peers' builds live (`--peer-dir`).
    pub peer_dir: Option<PathBuf>,
    /// `compare`: use the peers' programs as they are, never build them.
    pub no_build: bool,
    /// `compare`: rounds of every backend, alternating (`--rounds`).
    pub rounds: Option<usize>,
    /// `coll`: ranks of the job (`--ranks`, default 2).
    pub ranks: Option<usize>,
    /// `coll`: the collectives to run (`--workloads`, comma-separated),
    /// all when `None`.
    pub workloads: Option<String>,
    /// `msgrate-mt`: threads per rank (`--threads`, comma-separated).
    pub threads: Option<String>,
}

/// What a workload's run produced.
pub struct Outcome {
    /// Every sample measured.
    pub samples: Vec<Sample>,
    /// Tables and summary lines for stdout.
    pub text: String,
    /// Measurements that failed (already reported on stderr); the program
    /// exits with 1 if there are any.
    pub failures: Vec<String>,
}

/// The rank side of a multi-rank measurement: gets the arguments after
/// `--worker NAME`.
pub type WorkerFn = fn(&[String]) -> Result<(), BenchError>;

/// A workload family.
pub struct Workload {
    /// Name on the command line.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// Measures and returns the samples (the parent process).
    pub run: fn(&Options, &Progress) -> Result<Outcome, BenchError>,
    /// Runs one rank of a multi-rank measurement (`--worker NAME args…`).
    pub worker: Option<(&'static str, WorkerFn)>,
}

/// The workloads, in the order `--help` lists them. A new workload family
/// is a module `NAME.rs` shaped like `alloc.rs` (a `pub const WORKLOAD`),
/// declared with `mod NAME;` above and listed here.
pub const WORKLOADS: &[Workload] = &[
    p2p::LATENCY,
    p2p::BW,
    p2p::BIBW,
    p2p::MSGRATE,
    coll::WORKLOAD,
    alloc::WORKLOAD,
    opi::WORKLOAD,
    rma::WORKLOAD,
    msgrate_mt::WORKLOAD,
    pgas::WORKLOAD,
    multinode::WORKLOAD,
];

/// Progress lines on stderr, stamped with the time since the start.
pub struct Progress {
    start: Instant,
}

impl Progress {
    fn new() -> Self {
        Progress {
            start: Instant::now(),
        }
    }

    /// Prints one progress line.
    pub fn line(&self, msg: std::fmt::Arguments<'_>) {
        eprintln!(
            "[hmpi-bench {:>6.1}s] {msg}",
            self.start.elapsed().as_secs_f64()
        );
    }
}

fn help() -> String {
    let mut s = String::from(
        "hmpi-bench: benchmarks of hmpi against its peers, measured in the same run

USAGE:
    hmpi-bench <WORKLOAD> [OPTIONS]
    hmpi-bench compare <WORKLOAD>[,<WORKLOAD>...] [OPTIONS]
    hmpi-bench --help

WORKLOADS:
",
    );
    for w in WORKLOADS {
        s += &format!("    {:<10}{}\n", w.name, w.about);
    }
    s += "
    compare   hmpi and rsmpi over Open MPI and MPICH (each under its own mpirun)
              in one run, with hmpi/peer ratios per size; workloads: latency,
              bw, bibw, msgrate, or p2p for all four; coll for the
              collectives (or their names: barrier, bcast, reduce, allreduce,
              gather, scatter, allgather, alltoall, reduce_scatter_block);
              rma alone for one-sided put/get and the skew benchmark; pgas
              alone for global pointers against MPI RMA
    plot      draws a CSV written earlier: hmpi-bench plot --csv FILE
              --out FILE.png [--benchmark NAME] (the rows of one benchmark
              of a results file with a `benchmark` column)

OPTIONS:
    --csv FILE        also write every sample to FILE as CSV (header:
                      workload,backend,threads,size,value,unit,min,max;
                      value = median of the repetitions)
    --plot FILE.png   also draw log-log curves per backend to FILE.png
    --sizes MIN-MAX   sizes in bytes (powers of two in the range, and 0 if MIN
                      is 0), e.g. 64-64K; one size alone (e.g. 4K) measures
                      just that size. Suffixes K, M, G (binary)
    --reps N          measured repetitions per point, median reported (default 5;
                      message workloads 5, each of OSU's iteration count)
    --ms N            alloc: time per repetition in milliseconds (default 100)
    --quick           smoke run: alloc: sizes 16, 1K, 64K, 1M, 2 repetitions of
                      20 ms; message workloads: sizes 8, 1K, 64K, 1M,
                      3 repetitions of a tenth of OSU's iterations
    --peers LIST      compare: openmpi, mpich (default: both), or none;
                      msgrate-mt: the same (default: none)
    --peer-dir DIR    compare: where the peer builds live
                      (default: $HMPI_BENCH_PEER_DIR, else target/peers)
    --no-build        compare: do not build or update the peer programs
    --ranks N         coll and compare of collectives: ranks of the job (default
                      2, at most 64; more than the CPUs run unbound)
    --workloads LIST  coll and compare coll: only these collectives
                      (e.g. barrier,allreduce)
    --threads LIST    msgrate-mt: threads per rank to measure (default 1,2;
                      1 to 7)
    --rounds N        compare: run every backend N times, alternating (the
                      first backend of a round rotates), and report per
                      point the median of the rounds' medians (default 1).
                      Machines whose speed drifts during a run (virtual
                      CPUs moving between cores) need a few
    -h, --help        this text

Results go to stdout (a table with ratios), progress to stderr.
Exit codes: 0 success, 1 a measurement failed, 2 bad command line.
";
    s
}

fn parse_size_arg(s: &str) -> Result<usize, BenchError> {
    hmpi::shmheap::env::parse_size(s)
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            BenchError::Usage(format!(
                "--sizes: '{s}' is not a size (a positive number with an optional K, M or G)"
            ))
        })
}

fn parse_sizes(s: &str) -> Result<(usize, usize), BenchError> {
    let (lo, hi) = match s.split_once('-') {
        // The range may start at 0 (the zero-byte message).
        Some(("0", hi)) => (0, parse_size_arg(hi)?),
        Some((lo, hi)) => (parse_size_arg(lo)?, parse_size_arg(hi)?),
        None => {
            let n = parse_size_arg(s)?;
            (n, n)
        }
    };
    if lo > hi {
        return Err(BenchError::Usage(format!(
            "--sizes: the minimum {lo} is larger than the maximum {hi}"
        )));
    }
    Ok((lo, hi))
}

fn parse_number<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    opt: &str,
    s: &str,
    lo: T,
    hi: T,
) -> Result<T, BenchError> {
    match s.trim().parse::<T>() {
        Ok(n) if n >= lo && n <= hi => Ok(n),
        _ => Err(BenchError::Usage(format!(
            "{opt}: expected a whole number from {lo} to {hi}, got '{s}'"
        ))),
    }
}

/// What `hmpi-bench plot` draws.
#[derive(Debug)]
struct PlotArgs {
    /// The CSV to read.
    csv: PathBuf,
    /// The PNG to write.
    out: PathBuf,
    /// Only the rows whose `benchmark` column is this.
    benchmark: Option<String>,
}

/// What the command line asks for.
enum Command {
    Help,
    Plot(PlotArgs),
    Run(&'static Workload, Options),
    Compare(Vec<&'static p2p::Kernel>, Options),
    /// `compare rma`: the one-sided workload on every backend.
    CompareRma(Options),
    /// `compare pgas`: the global address space against MPI RMA.
    ComparePgas(Options),
    Worker(&'static Workload, Vec<String>),
}

fn find_workload(name: &str) -> Result<&'static Workload, BenchError> {
    WORKLOADS.iter().find(|w| w.name == name).ok_or_else(|| {
        let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        BenchError::Usage(format!(
            "unknown workload '{name}'; known: {}",
            names.join(", ")
        ))
    })
}

fn parse_args(args: &[String]) -> Result<Command, BenchError> {
    if args.is_empty() {
        return Err(BenchError::Usage("no workload given".into()));
    }
    if args[0] == "--worker" {
        let name = args
            .get(1)
            .ok_or_else(|| BenchError::Usage("--worker needs a name".into()))?;
        for w in WORKLOADS {
            if let Some((worker_name, _)) = w.worker {
                if worker_name == name {
                    return Ok(Command::Worker(w, args[2..].to_vec()));
                }
            }
        }
        return Err(BenchError::Usage(format!("unknown worker '{name}'")));
    }
    if args[0] == "plot" {
        return parse_plot(&args[1..]);
    }
    let compare = args[0] == "compare";
    let mut compared = None;
    let mut pgas_compare = false;
    let mut workload = None;
    let mut opts = Options::default();
    let mut i = usize::from(compare);
    while i < args.len() {
        let arg = args[i].as_str();
        // `--opt=value` and `--opt value` both work.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg, None),
        };
        let value = |i: &mut usize| -> Result<String, BenchError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| BenchError::Usage(format!("{flag} needs a value")))
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--csv" => opts.csv = Some(PathBuf::from(value(&mut i)?)),
            "--sizes" => opts.sizes = Some(parse_sizes(&value(&mut i)?)?),
            "--reps" => opts.reps = Some(parse_number("--reps", &value(&mut i)?, 1, 1000)?),
            "--ms" => opts.ms = Some(parse_number("--ms", &value(&mut i)?, 1, 60_000)?),
            "--quick" => opts.quick = true,
            "--plot" => opts.plot = Some(png_path("--plot", PathBuf::from(value(&mut i)?))?),
            "--peers" => opts.peers = Some(value(&mut i)?),
            "--peer-dir" => opts.peer_dir = Some(PathBuf::from(value(&mut i)?)),
            "--no-build" => opts.no_build = true,
            "--rounds" => opts.rounds = Some(parse_number("--rounds", &value(&mut i)?, 1, 100)?),
            "--ranks" => opts.ranks = Some(parse_number("--ranks", &value(&mut i)?, 2, 64)?),
            "--workloads" => opts.workloads = Some(value(&mut i)?),
            "--threads" => opts.threads = Some(value(&mut i)?),
            f if f.starts_with('-') => {
                return Err(BenchError::Usage(format!("unknown option '{f}'")));
            }
            list if compare => {
                if compared.is_some() {
                    return Err(BenchError::Usage(format!(
                        "compare takes one list of workloads (a,b,…); '{list}' is a second one"
                    )));
                }
                pgas_compare = list == "pgas";
                compared = Some(if list == "rma" || list == "pgas" {
                    None
                } else if list
                    .split(',')
                    .any(|w| w.trim() == "rma" || w.trim() == "pgas")
                {
                    return Err(BenchError::Usage(
                        "compare rma and compare pgas run alone: hmpi-bench compare rma".into(),
                    ));
                } else {
                    Some(compare::parse_workloads(list)?)
                });
            }
            name => {
                if workload.is_some() {
                    return Err(BenchError::Usage(format!(
                        "one workload per run; '{name}' is a second one"
                    )));
                }
                workload = Some(find_workload(name)?);
            }
        }
        i += 1;
    }
    // msgrate-mt builds its own MPI peers (a C program) when asked.
    let mt = workload.is_some_and(|w| w.name == "msgrate-mt");
    if opts.peers.is_some() || opts.peer_dir.is_some() || opts.no_build {
        let allowed = compare || (mt && opts.peer_dir.is_none() && !opts.no_build);
        if !allowed {
            return Err(BenchError::Usage(
                "--peers, --peer-dir and --no-build belong to compare (msgrate-mt takes --peers)"
                    .into(),
            ));
        }
        compare::parse_peers(opts.peers.as_deref().unwrap_or(""))?;
    }
    if compare && opts.threads.is_some() {
        return Err(BenchError::Usage("--threads belongs to msgrate-mt".into()));
    }
    if compare {
        let Some(compared) = compared else {
            return Err(BenchError::Usage(
                "compare needs a workload, e.g. hmpi-bench compare latency".into(),
            ));
        };
        let Some(mut ks) = compared else {
            if opts.ranks.is_some() || opts.workloads.is_some() || opts.ms.is_some() {
                return Err(BenchError::Usage(
                    "compare rma and compare pgas run on 2 ranks; --ranks, --workloads and \
                     --ms do not apply"
                        .into(),
                ));
            }
            if pgas_compare {
                return Ok(Command::ComparePgas(opts));
            }
            return Ok(Command::CompareRma(opts));
        };
        let colls = |ks: &[&p2p::Kernel]| ks.iter().all(|k| k.family == p2p::Family::Coll);
        if let Some(list) = &opts.workloads {
            let chosen = coll::select(list)?;
            if !colls(&ks) {
                return Err(BenchError::Usage(
                    "--workloads chooses collectives: hmpi-bench compare coll --workloads LIST"
                        .into(),
                ));
            }
            ks.retain(|k| chosen.iter().any(|c| c.name == k.name));
            if ks.is_empty() {
                return Err(BenchError::Usage(format!(
                    "--workloads {list}: none of them is in the compared list"
                )));
            }
        }
        if opts.ranks.is_some() && !colls(&ks) {
            return Err(BenchError::Usage(
                "--ranks applies to collectives only (the point-to-point kernels use 2)".into(),
            ));
        }
        return Ok(Command::Compare(ks, opts));
    }
    match workload {
        Some(w) => {
            if (opts.ranks.is_some() || opts.workloads.is_some()) && w.name != "coll" {
                return Err(BenchError::Usage(
                    "--ranks and --workloads belong to coll (and compare coll)".into(),
                ));
            }
            if let Some(list) = &opts.workloads {
                coll::select(list)?;
            }
            if opts.threads.is_some() && w.name != "msgrate-mt" {
                return Err(BenchError::Usage("--threads belongs to msgrate-mt".into()));
            }
            Ok(Command::Run(w, opts))
        }
        None => Err(BenchError::Usage("no workload given".into())),
    }
}

/// `.png` or a usage error naming `flag`.
fn png_path(flag: &str, p: PathBuf) -> Result<PathBuf, BenchError> {
    if p.extension().and_then(|e| e.to_str()) == Some("png") {
        Ok(p)
    } else {
        Err(BenchError::Usage(format!(
            "{flag}: '{}' must name a .png file",
            p.display()
        )))
    }
}

/// The arguments of `hmpi-bench plot`.
fn parse_plot(args: &[String]) -> Result<Command, BenchError> {
    let (mut csv, mut out, mut benchmark) = (None, None, None);
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (args[i].as_str(), None),
        };
        let value = match inline {
            Some(v) => v,
            None if matches!(flag, "-h" | "--help") => return Ok(Command::Help),
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| BenchError::Usage(format!("plot: {flag} needs a value")))?
            }
        };
        match flag {
            "--csv" => csv = Some(PathBuf::from(value)),
            "--out" => out = Some(png_path("plot --out", PathBuf::from(value))?),
            "--benchmark" => benchmark = Some(value),
            f => return Err(BenchError::Usage(format!("plot: unknown argument '{f}'"))),
        }
        i += 1;
    }
    match (csv, out) {
        (Some(csv), Some(out)) => Ok(Command::Plot(PlotArgs {
            csv,
            out,
            benchmark,
        })),
        _ => Err(BenchError::Usage(
            "plot needs --csv FILE and --out FILE.png".into(),
        )),
    }
}

/// Why `--plot` and `plot` fail in a build without feature `plots`.
#[cfg(not(feature = "plots"))]
const NO_PLOTS: &str = "this hmpi-bench was built without feature `plots` (a default feature)";

/// Draws the workloads of `samples` to the PNG at `path`.
#[cfg(feature = "plots")]
fn draw(path: &std::path::Path, samples: &[Sample]) -> Result<(), String> {
    let mut workloads: Vec<&str> = Vec::new();
    for s in samples {
        if !workloads.contains(&s.workload.as_str()) {
            workloads.push(&s.workload);
        }
    }
    plot::plot_file(path, samples, &workloads)
}

#[cfg(not(feature = "plots"))]
fn draw(_: &std::path::Path, _: &[Sample]) -> Result<(), String> {
    Err(NO_PLOTS.into())
}

/// `hmpi-bench plot`: the rows of the CSV (of one benchmark, if asked),
/// one panel per workload that has a curve (a backend at two sizes or
/// more); a workload measured at several thread counts gets a panel per
/// count.
fn plot_csv(a: &PlotArgs) -> Result<(), BenchError> {
    let rows = report::read_csv(&a.csv).map_err(BenchError::Failed)?;
    let mut samples: Vec<Sample> = rows
        .into_iter()
        .filter(|r| a.benchmark.as_ref().is_none_or(|b| *b == r.benchmark))
        .map(|r| r.sample)
        .collect();
    if samples.is_empty() {
        return Err(BenchError::Failed(format!(
            "{}: no rows{}",
            a.csv.display(),
            a.benchmark
                .as_ref()
                .map_or(String::new(), |b| format!(" of benchmark '{b}'"))
        )));
    }
    // A workload of one size (the pool's alloc+free) is no curve, and the
    // paired ratios (unit `x`) are the targets' verdicts at a few sizes,
    // not curves either; their values are in the file.
    let curves: Vec<String> = samples
        .iter()
        .filter(|s| {
            s.unit != "x"
                && samples
                    .iter()
                    .any(|o| o.workload == s.workload && o.backend == s.backend && o.size != s.size)
        })
        .map(|s| s.workload.clone())
        .collect();
    samples.retain(|s| curves.contains(&s.workload));
    let counts = |w: &str, samples: &[Sample]| {
        let mut t: Vec<u32> = samples
            .iter()
            .filter(|s| s.workload == w)
            .map(|s| s.threads)
            .collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    let several: Vec<String> = samples
        .iter()
        .map(|s| s.workload.clone())
        .filter(|w| counts(w, &samples) > 1)
        .collect();
    for s in &mut samples {
        if several.contains(&s.workload) {
            let n = if s.threads == 1 { "thread" } else { "threads" };
            s.workload = format!("{}, {} {n}", s.workload, s.threads);
        }
    }
    draw(&a.out, &samples).map_err(BenchError::Failed)?;
    eprintln!("hmpi-bench: wrote {}", a.out.display());
    Ok(())
}

/// Checks that the output files can be created before minutes of measuring.
fn check_outputs(opts: &Options) -> Result<(), BenchError> {
    #[cfg(not(feature = "plots"))]
    if opts.plot.is_some() {
        return Err(BenchError::Usage(format!("--plot: {NO_PLOTS}")));
    }
    for (flag, path) in [("--csv", &opts.csv), ("--plot", &opts.plot)] {
        if let Some(path) = path {
            std::fs::File::create(path).map_err(|e| {
                BenchError::Usage(format!("{flag}: cannot create {}: {e}", path.display()))
            })?;
        }
    }
    Ok(())
}

/// Prints the outcome, writes the CSV and the plot, and turns failures into
/// the exit status.
fn finish(outcome: Outcome, opts: &Options, progress: &Progress) -> Result<(), BenchError> {
    print!("{}", outcome.text);
    let mut failures = outcome.failures;
    if let Some(path) = &opts.csv {
        report::write_csv(path, &outcome.samples)
            .map_err(|e| BenchError::Failed(format!("cannot write {}: {e}", path.display())))?;
        progress.line(format_args!(
            "wrote {} samples to {}",
            outcome.samples.len(),
            path.display()
        ));
    }
    if let Some(path) = &opts.plot {
        match draw(path, &outcome.samples) {
            Ok(()) => progress.line(format_args!("wrote {}", path.display())),
            Err(e) => {
                progress.line(format_args!("FAILED: {e}"));
                failures.push(e);
            }
        }
    }
    progress.line(format_args!(
        "done in {:.1} s",
        progress.start.elapsed().as_secs_f64()
    ));
    if failures.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "{} measurement(s) failed: {}",
            failures.len(),
            failures.join("; ")
        )))
    }
}

fn run(cmd: Command) -> Result<(), BenchError> {
    match cmd {
        Command::Help => {
            print!("{}", help());
            Ok(())
        }
        Command::Plot(a) => plot_csv(&a),
        Command::Worker(w, args) => {
            let (_, worker) = w.worker.expect("matched on a worker name");
            worker(&args)
        }
        Command::Run(w, opts) => {
            check_outputs(&opts)?;
            let progress = Progress::new();
            let outcome = (w.run)(&opts, &progress)?;
            finish(outcome, &opts, &progress)
        }
        Command::CompareRma(opts) => {
            check_outputs(&opts)?;
            let progress = Progress::new();
            let outcome = compare::run_rma(&opts, &progress)?;
            finish(outcome, &opts, &progress)
        }
        Command::ComparePgas(opts) => {
            check_outputs(&opts)?;
            let progress = Progress::new();
            let outcome = pgas::run_compare(&opts, &progress)?;
            finish(outcome, &opts, &progress)
        }
        Command::Compare(kernels, opts) => {
            check_outputs(&opts)?;
            let progress = Progress::new();
            let outcome = compare::run(&kernels, &opts, &progress)?;
            finish(outcome, &opts, &progress)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(a) => a,
        Err(a) => {
            eprintln!("hmpi-bench: argument {a:?} is not valid UTF-8");
            return ExitCode::from(2);
        }
    };
    let result = parse_args(&args).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hmpi-bench: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_options() {
        let Ok(Command::Run(w, o)) = parse_args(&args(
            "alloc --csv /tmp/x.csv --sizes 64-4K --reps 3 --quick",
        )) else {
            panic!("expected a run");
        };
        assert_eq!(w.name, "alloc");
        assert_eq!(o.sizes, Some((64, 4096)));
        assert_eq!(o.reps, Some(3));
        assert!(o.quick);
        assert_eq!(o.csv, Some(PathBuf::from("/tmp/x.csv")));
        let Ok(Command::Run(_, o)) = parse_args(&args("alloc --sizes=1M --ms=5")) else {
            panic!("expected a run");
        };
        assert_eq!(o.sizes, Some((1 << 20, 1 << 20)));
        assert_eq!(o.ms, Some(5));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for bad in [
            "",
            "nosuch",
            "alloc --reps",
            "alloc --reps 0",
            "alloc --reps x",
            "alloc --sizes 4K-64",
            "alloc --sizes lots",
            "alloc --frobnicate",
            "alloc alloc",
            "--worker nosuch",
            "alloc --plot x.svg",
            "alloc --peers mpich",
            "compare",
            "compare alloc",
            "compare latency bw",
            "compare latency --peers lam",
            "plot",
            "plot --csv x.csv",
            "plot --csv x.csv --out x.svg",
            "plot --csv x.csv --out x.png --frobnicate 1",
            "latency --sizes 0-nope",
            "coll --ranks 1",
            "coll --ranks 65",
            "coll --workloads nosuch",
            "latency --ranks 4",
            "alloc --workloads bcast",
            "compare latency --ranks 4",
            "compare latency --workloads bcast",
            "compare coll --workloads latency",
            "compare rma,latency",
            "compare latency,rma",
            "compare rma --ranks 4",
        ] {
            match parse_args(&args(bad)) {
                Err(e @ BenchError::Usage(_)) => assert_eq!(e.exit_code(), 2),
                Err(e) => panic!("'{bad}': not a usage error: {e}"),
                Ok(_) => panic!("'{bad}' was accepted"),
            }
        }
    }

    #[test]
    fn parses_compare() {
        let Ok(Command::Compare(ks, o)) = parse_args(&args(
            "compare latency,bw --sizes 0-64K --peers mpich --no-build --plot /tmp/p.png",
        )) else {
            panic!("expected a compare");
        };
        let names: Vec<&str> = ks.iter().map(|k| k.name).collect();
        assert_eq!(names, ["latency", "bw"]);
        assert_eq!(o.sizes, Some((0, 64 << 10)));
        assert_eq!(o.peers.as_deref(), Some("mpich"));
        assert!(o.no_build);
        assert_eq!(o.plot, Some(PathBuf::from("/tmp/p.png")));
        let Ok(Command::Run(w, _)) = parse_args(&args("msgrate --quick")) else {
            panic!("expected a run");
        };
        assert_eq!(w.name, "msgrate");
        let Ok(Command::CompareRma(o)) = parse_args(&args("compare rma --quick --rounds 3")) else {
            panic!("expected a compare of rma");
        };
        assert!(o.quick);
        assert_eq!(o.rounds, Some(3));
    }

    #[test]
    fn parses_coll() {
        let Ok(Command::Run(w, o)) = parse_args(&args("coll --ranks 4 --workloads bcast,barrier"))
        else {
            panic!("expected a run");
        };
        assert_eq!(w.name, "coll");
        assert_eq!(o.ranks, Some(4));
        assert_eq!(o.workloads.as_deref(), Some("bcast,barrier"));
        let Ok(Command::Compare(ks, o)) =
            parse_args(&args("compare coll --workloads allreduce,bcast --rounds 3"))
        else {
            panic!("expected a compare");
        };
        let names: Vec<&str> = ks.iter().map(|k| k.name).collect();
        assert_eq!(names, ["bcast", "allreduce"]);
        assert_eq!(o.rounds, Some(3));
        let Ok(Command::Compare(ks, _)) = parse_args(&args("compare coll --ranks 4")) else {
            panic!("expected a compare");
        };
        assert_eq!(ks.len(), coll::KERNELS.len());
        let Ok(Command::Compare(ks, _)) = parse_args(&args("compare barrier,allgather")) else {
            panic!("expected a compare");
        };
        assert_eq!(ks.len(), 2);
    }

    #[test]
    fn parses_plot() {
        let Ok(Command::Plot(a)) = parse_args(&args(
            "plot --csv docs/bench/r.csv --out=/tmp/r.png --benchmark p2p",
        )) else {
            panic!("expected a plot");
        };
        assert_eq!(a.csv, PathBuf::from("docs/bench/r.csv"));
        assert_eq!(a.out, PathBuf::from("/tmp/r.png"));
        assert_eq!(a.benchmark.as_deref(), Some("p2p"));
    }

    #[test]
    fn help_lists_workloads() {
        assert!(matches!(parse_args(&args("--help")), Ok(Command::Help)));
        for w in [
            "alloc", "latency", "bw", "bibw", "msgrate", "coll", "rma", "compare", "plot",
            "--ranks",
        ] {
            assert!(help().contains(w), "{w}");
        }
    }
}
