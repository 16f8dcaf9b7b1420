//! `pgas`: the global address space (`hmpi::pgas`), 2 units.
//!
//! * `put-latency` / `get-latency`: one blocking put (get) of each size
//!   through a global pointer to the other unit (`Pgas::put` / `get`,
//!   complete at both ends on return), time per operation;
//! * `put-bw` / `get-bw`: 64 non-blocking puts (gets) of each size with
//!   handles, then `waitall` (MB/s);
//! * `fadd-latency`: one 8-byte `fetch_add` on the other unit (size 8);
//! * `gups`: HPCC RandomAccess on a table distributed over both units
//!   (the size column is the table's words in all): every unit runs its
//!   own stream of the HPCC generator (`x ← x << 1 ^ (x < 0 ? 7 : 0)`),
//!   4 updates per table word in all, each `table[x mod size] ^= x` as an
//!   atomic XOR through a global pointer; giga-updates per second, every
//!   repetition verified against a serial replay of both streams;
//! * `halo-exchange`: the halo exchange of a 3D heat stencil distributed
//!   by planes: each unit puts its boundary plane (`HALO_N`² `f64`, the
//!   size column in bytes) into the other's ghost plane, then both meet
//!   in a barrier; time per exchange, the ghost planes checked.
//!
//! * `agent-serial` / `agent-overlap` (hmpi alone, the largest size):
//!   the question whether a progress agent pays here. Both units at once
//!   (no CPU idle, as in an application whose units all compute) do
//!   [`AGENT_PUTS`] blocking puts of the size to the other and a computation
//!   that takes about as long, one after the other (`agent-serial`), and
//!   with the puts handed to a helper thread of the unit (woken through a
//!   channel, as an agent would be) while the main thread computes
//!   (`agent-overlap`); time per round. Equal times: no overlap; half the
//!   serial time: perfect overlap.
//!
//! `hmpi-bench compare pgas` runs the same on the MPI peers in the same
//! run (Open MPI, MPICH): `MPI_Win_allocate` + `MPI_Win_lock_all`, then
//! `MPI_Put` / `MPI_Get` + `MPI_Win_flush` (latency), 64 of them + one
//! flush (bandwidth), `MPI_Fetch_and_op` + flush, GUPS with
//! `MPI_Accumulate(MPI_BXOR)` in batches of [`GUPS_BATCH`] and
//! `MPI_Win_flush_all` (the usual MPI-3 RandomAccess), and the halo with
//! `MPI_Put` + flush + `MPI_Barrier`, through rsmpi's raw `mpi::ffi`, as
//! `rma.rs` does. Each round runs every backend back to back; the targets
//! are judged on the rounds' own hmpi / best-peer ratios.
//!
//! Registered in `main.rs` with `mod pgas;` and `pgas::WORKLOAD` in
//! `WORKLOADS`; `compare pgas` with `Command::ComparePgas`.

use crate::compare::{self, PAIRED, RATIO_UNIT};
use crate::p2p::ResultFile;
use crate::report::{self, Sample};
use crate::worker::{self, Job};
use crate::{rma, BenchError, Options, Outcome, Progress, Workload};
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use hmpi::pgas::{waitall, GlobalPtr, Gptr, Pgas};
use hmpi::traits::Communicator;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The `pgas` workload.
pub const WORKLOAD: Workload = Workload {
    name: "pgas",
    about: "global pointers: put/get latency and bandwidth, fetch_add, GUPS, stencil halo exchange",
    run,
    worker: Some((WORKER, worker)),
};

const WORKER: &str = "pgas";
const LINE_TAG: &str = "pgas-sample";
const PUT: &str = "put-latency";
const GET: &str = "get-latency";
const PUT_BW: &str = "put-bw";
const GET_BW: &str = "get-bw";
const FADD: &str = "fadd-latency";
const GUPS: &str = "gups";
const HALO: &str = "halo-exchange";
const AGENT_SERIAL: &str = "agent-serial";
const AGENT_OVERLAP: &str = "agent-overlap";
/// Puts per round of the agent measurement.
const AGENT_PUTS: usize = 16;
const BACKEND: &str = "hmpi";
/// Every workload, in table order.
pub const ALL: [&str; 9] = [
    PUT,
    GET,
    PUT_BW,
    GET_BW,
    FADD,
    GUPS,
    HALO,
    AGENT_SERIAL,
    AGENT_OVERLAP,
];
/// Operations in flight per bandwidth iteration (OSU's window).
const BW_WINDOW: usize = 64;
/// MPI accumulates issued between two `MPI_Win_flush_all` in GUPS.
const GUPS_BATCH: usize = 1024;
/// Words of the GUPS table at each unit (4 updates per word in all).
const GUPS_WORDS: usize = 1 << 18;
const QUICK_GUPS_WORDS: usize = 1 << 14;
/// The halo plane is `HALO_N × HALO_N` `f64`s.
const HALO_N: usize = 128;
/// HPCC's polynomial.
const POLY: u64 = 7;

/// The targets on 2 units: workload, size, higher is better, bound on
/// hmpi / the best peer (8-byte put and get latency <= 0.2x, GUPS >= 2x).
pub fn targets(quick: bool) -> [(&'static str, usize, bool, f64); 3] {
    [
        (PUT, 8, false, 0.2),
        (GET, 8, false, 0.2),
        (GUPS, 2 * gups_words(quick), true, 2.0),
    ]
}

fn gups_words(quick: bool) -> usize {
    if quick {
        QUICK_GUPS_WORDS
    } else {
        GUPS_WORDS
    }
}

fn unit_of(w: &str) -> &'static str {
    match w {
        PUT_BW | GET_BW => "MB/s",
        GUPS => "GUP/s",
        _ => "us",
    }
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

/// The next number of HPCC's generator.
fn next(x: u64) -> u64 {
    (x << 1) ^ if (x as i64) < 0 { POLY } else { 0 }
}

/// Unit `u`'s first number (nonzero, distinct per unit).
fn seed(u: usize) -> u64 {
    let mut z = (u as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (z ^ (z >> 27)) | 1
}

/// The table `local`'s part of unit `me` must hold after both units'
/// streams of `updates` each, starting from word `i` = global index `i`.
fn gups_expected(me: usize, units: usize, local: usize, updates: usize) -> Vec<u64> {
    let total = (local * units) as u64;
    let mut t: Vec<u64> = (0..local).map(|i| (me * local + i) as u64).collect();
    for u in 0..units {
        let mut x = seed(u);
        for _ in 0..updates {
            x = next(x);
            let idx = (x & (total - 1)) as usize;
            if idx / local == me {
                t[idx % local] ^= x;
            }
        }
    }
    t
}

fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let sizes = rma::sizes(opts)?;
    let reps = rma::reps(opts);
    progress.line(format_args!(
        "pgas: 2 units, {} sizes, {reps} repetitions{}",
        sizes.len(),
        if opts.quick { " (quick)" } else { "" }
    ));
    let mut failures = Vec::new();
    let samples = run_hmpi(&sizes, reps, opts.quick).unwrap_or_else(|e| {
        progress.line(format_args!("FAILED: {e}"));
        failures.push(e);
        Vec::new()
    });
    let mut text = String::new();
    for w in ALL {
        let _ = writeln!(text, "{w}:");
        text += &report::render_table(&samples, w, &[BACKEND], &[]);
    }
    text += "(gups: size = table words in all; halo-exchange: size = plane bytes)\n";
    text += &agent_line(&samples);
    text += "  (the MPI peers in the same run: hmpi-bench compare pgas)\n";
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

fn worker_args(sizes: &[usize], reps: usize, quick: bool, out: &Path) -> Vec<OsString> {
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

fn time_bound(sizes: &[usize], reps: usize, quick: bool) -> Duration {
    let bytes: usize = sizes.iter().map(|&s| s * iters(s, quick) * 4).sum();
    Duration::from_secs(120 + (reps as u64 + 1) * (bytes as u64 / 100_000_000 + 60))
}

fn format_line(label: &str, workload: &str, size: usize, values: &[f64]) -> String {
    let v: Vec<String> = values.iter().map(|x| format!("{x:.4}")).collect();
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
    let size: usize = w.next()?.parse().ok()?;
    let values: Vec<f64> = w
        .next()?
        .split(',')
        .map(|x| x.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0))
        .collect::<Option<_>>()?;
    Sample::from_reps(workload, backend, 2, size, unit_of(workload), &values)
}

/// The samples of `label` in `path`, checked to hold every workload (the
/// latency and bandwidth ones at every size).
fn read_results(path: &Path, label: &str, sizes: &[usize]) -> Result<Vec<Sample>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let samples: Vec<Sample> = text.lines().filter_map(parse_line).collect();
    for w in ALL {
        let at: Vec<usize> = match w {
            PUT | GET | PUT_BW | GET_BW => sizes.to_vec(),
            _ => Vec::new(),
        };
        if (w == AGENT_SERIAL || w == AGENT_OVERLAP) && label != BACKEND {
            continue;
        }
        if !samples
            .iter()
            .any(|s| s.workload == w && s.backend == label)
        {
            return Err(format!("{label} {w}: no result"));
        }
        for s in at {
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

/// hmpi's measurement: 2 ranks through the launcher.
pub fn run_hmpi(sizes: &[usize], reps: usize, quick: bool) -> Result<Vec<Sample>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let file = ResultFile::new("pgas")?;
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
            "the 2-rank pgas job failed (first failure: rank {:?}; its messages are above)",
            report.first_failure
        ));
    }
    read_results(&file.0, BACKEND, sizes)
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
            .map_err(|e| BenchError::Failed(format!("pgas worker: {}: {e}", job.out)))?;
        for l in &lines {
            writeln!(f, "{l}").map_err(|e| BenchError::Failed(format!("pgas worker: {e}")))?;
        }
    }
    Ok(())
}

/// Times `n` calls of `one`, `reps` times after `n / 10` warm-up calls:
/// microseconds per call, per repetition.
fn latency<E>(
    n: usize,
    reps: usize,
    mut one: impl FnMut() -> Result<(), E>,
) -> Result<Vec<f64>, E> {
    for _ in 0..n / 10 {
        one()?;
    }
    let mut us = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..n {
            one()?;
        }
        us.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    Ok(us)
}

/// hmpi's unit: measures everything; unit 0 returns the result lines.
fn hmpi_worker(job: &Job) -> Result<Option<Vec<String>>, BenchError> {
    crate::node_heap_allocator();
    let failed = |e: &dyn std::fmt::Display| BenchError::Failed(format!("pgas worker: {e}"));
    let universe = hmpi::init().map_err(|e| failed(&e))?;
    let world = universe.world();
    if world.size() != 2 {
        return Err(failed(&format!(
            "needs 2 units, the job has {}",
            world.size()
        )));
    }
    let pg = Pgas::new(&world).map_err(|e| failed(&e))?;
    let all = pg.team_all().clone();
    let me = pg.myid() as usize;
    let max = job.sizes.iter().copied().max().unwrap_or(0).max(8);
    let seg: GlobalPtr<u8> = GlobalPtr::from_raw(
        pg.team_memalloc_aligned(&all, max as u64)
            .map_err(|e| failed(&e))?,
    );
    let other = seg.at_unit(1);
    let src = vec![0x5au8; max];
    let mut dst = vec![0u8; max];
    let mut lines = Vec::new();
    let pf = |e: hmpi::pgas::Error| failed(&e);

    all.barrier().map_err(pf)?;
    if me == 0 {
        for &size in &job.sizes {
            let n = iters(size, job.quick);
            let us = latency(n, job.reps, || pg.put(other, &src[..size])).map_err(pf)?;
            lines.push(format_line(BACKEND, PUT, size, &us));
            let us = latency(n, job.reps, || pg.get(other, &mut dst[..size])).map_err(pf)?;
            lines.push(format_line(BACKEND, GET, size, &us));
        }
        for &size in &job.sizes {
            let n = (iters(size, job.quick) / BW_WINDOW).max(2);
            for (w, put) in [(PUT_BW, true), (GET_BW, false)] {
                let mut mbs = Vec::with_capacity(job.reps);
                for rep in 0..=job.reps {
                    let t = Instant::now();
                    for _ in 0..n {
                        if put {
                            let hs = (0..BW_WINDOW)
                                .map(|_| pg.put_nb(other, &src[..size]))
                                .collect::<Result<Vec<_>, _>>()
                                .map_err(pf)?;
                            waitall(hs).map_err(pf)?;
                        } else {
                            // A get's handle borrows the buffer until
                            // waited for: one at a time into one buffer.
                            for _ in 0..BW_WINDOW {
                                let h = pg.get_nb(other, &mut dst[..size]).map_err(pf)?;
                                h.wait().map_err(pf)?;
                            }
                        }
                    }
                    if rep > 0 {
                        let bytes = (size * BW_WINDOW * n) as f64;
                        mbs.push(bytes / t.elapsed().as_secs_f64() / 1e6);
                    }
                }
                lines.push(format_line(BACKEND, w, size, &mbs));
            }
        }
        let word: GlobalPtr<u64> = other.cast();
        let before = pg.get_value(word).map_err(pf)?;
        let n = iters(8, job.quick);
        let us = latency(n, job.reps, || pg.fetch_add(word, 1).map(drop)).map_err(pf)?;
        let after = pg.get_value(word).map_err(pf)?;
        let calls = (n / 10 + n * job.reps) as u64;
        if after.wrapping_sub(before) != calls {
            return Err(failed(&format!(
                "fetch_add: {calls} adds of 1 moved the word by {}",
                after.wrapping_sub(before)
            )));
        }
        lines.push(format_line(BACKEND, FADD, 8, &us));
    }
    all.barrier().map_err(pf)?;
    // Both units at once, each putting to the other: no CPU is idle, as
    // in an application whose units all compute.
    let (serial, overlap) =
        agent(&pg, seg.at_unit(1 - me as u32), &src[..max], job.reps).map_err(pf)?;
    lines.push(format_line(BACKEND, AGENT_SERIAL, max, &serial));
    lines.push(format_line(BACKEND, AGENT_OVERLAP, max, &overlap));
    all.barrier().map_err(pf)?;

    // GUPS: both units update the table through global pointers.
    let local = gups_words(job.quick);
    let updates = 4 * local;
    let total = (2 * local) as u64;
    let table: GlobalPtr<u64> = GlobalPtr::from_raw(
        pg.team_memalloc_aligned(&all, (local * 8) as u64)
            .map_err(pf)?,
    );
    let mine = pg.local_ptr(table.at_unit(me as u32)).map_err(pf)?;
    let expected = gups_expected(me, 2, local, updates);
    let mut gups = Vec::with_capacity(job.reps);
    for rep in 0..=job.reps {
        for i in 0..local {
            // SAFETY: word `i` of this unit's part (checked at `local_ptr`
            // for the first word; the part holds `local` words); the other
            // unit touches it only after the barrier below.
            unsafe { mine.add(i).write((me * local + i) as u64) };
        }
        all.barrier().map_err(pf)?;
        let t = Instant::now();
        let mut x = seed(me);
        let base = table.raw();
        for _ in 0..updates {
            x = next(x);
            let idx = (x & (total - 1)) as usize;
            let g = GlobalPtr::<u64>::from_raw(Gptr {
                unit: (idx / local) as u32,
                offset: ((idx % local) * 8) as u64,
                ..base
            });
            pg.fetch_op(g, x, hmpi::collective::SystemOperation::BitwiseXor)
                .map_err(pf)?;
        }
        all.barrier().map_err(pf)?;
        let secs = t.elapsed().as_secs_f64();
        // SAFETY: this unit's `local` words; both units are past their
        // updates (barrier).
        let got = unsafe { std::slice::from_raw_parts(mine, local) };
        if got != expected.as_slice() {
            let bad = got.iter().zip(&expected).filter(|(a, b)| a != b).count();
            return Err(failed(&format!(
                "gups: {bad} of {local} words differ from the serial replay"
            )));
        }
        all.barrier().map_err(pf)?;
        if rep > 0 {
            gups.push((2 * updates) as f64 / secs / 1e9);
        }
    }
    lines.push(format_line(BACKEND, GUPS, total as usize, &gups));
    pg.team_memfree(table.raw()).map_err(pf)?;

    // Halo exchange: ghost planes [low, high] at each unit.
    let plane = HALO_N * HALO_N;
    let ghosts: GlobalPtr<f64> = GlobalPtr::from_raw(
        pg.team_memalloc_aligned(&all, (2 * plane * 8) as u64)
            .map_err(pf)?,
    );
    let boundary = vec![me as f64 + 1.0; plane];
    // Unit 0's top plane goes to unit 1's low ghost, unit 1's bottom
    // plane to unit 0's high ghost.
    let target = if me == 0 {
        ghosts.at_unit(1)
    } else {
        ghosts.at_unit(0).add(plane).map_err(pf)?
    };
    let n = if job.quick { 100 } else { 1000 };
    let us = latency(n, job.reps, || {
        pg.put(target, &boundary)?;
        all.barrier()
    })
    .map_err(pf)?;
    let ghost_here = if me == 0 {
        ghosts.at_unit(0).add(plane).map_err(pf)?
    } else {
        ghosts.at_unit(1)
    };
    let mut got = vec![0.0f64; plane];
    pg.get(ghost_here, &mut got).map_err(pf)?;
    let want = (1 - me) as f64 + 1.0;
    if got.iter().any(|&v| v != want) {
        return Err(failed(
            &"halo: a ghost plane does not hold the neighbour's plane",
        ));
    }
    lines.push(format_line(BACKEND, HALO, plane * 8, &us));
    all.barrier().map_err(pf)?;
    pg.team_memfree(ghosts.raw()).map_err(pf)?;
    pg.team_memfree(seg.raw()).map_err(pf)?;
    pg.finalize().map_err(pf)?;
    Ok((me == 0).then_some(lines))
}

/// A computation outside the library: `n` steps of a dependent
/// floating-point recurrence.
fn compute(n: usize) -> f64 {
    let mut x = 1.0f64;
    for i in 0..n {
        x = x * 1.000_000_1 + (i & 7) as f64 * 1e-9;
    }
    std::hint::black_box(x)
}

/// The agent measurement: microseconds per round of [`AGENT_PUTS`] puts
/// of `src` to `dst` plus a computation of about their length, one after
/// the other and with the puts on a helper thread.
fn agent(
    pg: &Pgas,
    dst: GlobalPtr<u8>,
    src: &[u8],
    reps: usize,
) -> hmpi::pgas::Result<(Vec<f64>, Vec<f64>)> {
    let puts = || -> hmpi::pgas::Result<()> {
        for _ in 0..AGENT_PUTS {
            pg.put(dst, src)?;
        }
        Ok(())
    };
    // Calibrate the computation to the (warm) puts' time.
    puts()?;
    let t = Instant::now();
    puts()?;
    let put_time = t.elapsed();
    let t = Instant::now();
    compute(1 << 16);
    let step = t.elapsed().as_secs_f64() / f64::from(1 << 16);
    let steps = ((put_time.as_secs_f64() / step.max(1e-12)) as usize).max(1);
    let rounds = 20;
    let mut serial = Vec::with_capacity(reps);
    for _ in 0..=reps {
        let t = Instant::now();
        for _ in 0..rounds {
            puts()?;
            compute(steps);
        }
        serial.push(t.elapsed().as_secs_f64() * 1e6 / rounds as f64);
    }
    serial.remove(0);
    let mut overlap = Vec::with_capacity(reps);
    std::thread::scope(|s| -> hmpi::pgas::Result<()> {
        let (go, work) = std::sync::mpsc::channel::<bool>();
        let (done, finished) = std::sync::mpsc::channel::<hmpi::pgas::Result<()>>();
        s.spawn(move || {
            while let Ok(true) = work.recv() {
                if done.send(puts()).is_err() {
                    break;
                }
            }
        });
        let mut first = Ok(());
        for _ in 0..=reps {
            let t = Instant::now();
            for _ in 0..rounds {
                let _ = go.send(true);
                compute(steps);
                match finished.recv() {
                    Ok(r) => first = first.and(r),
                    Err(_) => break,
                }
            }
            overlap.push(t.elapsed().as_secs_f64() * 1e6 / rounds as f64);
        }
        let _ = go.send(false);
        first
    })?;
    overlap.remove(0);
    Ok((serial, overlap))
}

/// `hmpi-bench compare pgas`: hmpi and the MPI peers, each round every
/// backend back to back (a different one first each round); the targets
/// judged on the rounds' own ratios.
pub fn run_compare(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let sizes = rma::sizes(opts)?;
    let reps = rma::reps(opts);
    let (peers, mut text, mut failures) = compare::prepare(opts, progress)?;
    let rounds = opts.rounds.unwrap_or(1);
    let backends = 1 + peers.len();
    progress.line(format_args!(
        "pgas: {} sizes {}-{}, {reps} repetitions{}, 2 units, {rounds} round(s)",
        sizes.len(),
        report::fmt_size(sizes[0]),
        report::fmt_size(sizes[sizes.len() - 1]),
        if opts.quick { " (quick)" } else { "" },
    ));
    let floor_before = crate::floor::measure();
    let mut by_round: Vec<Vec<Sample>> = Vec::new();
    for round in 0..rounds {
        let mut measured = Vec::new();
        for b in (0..backends).map(|i| (i + round) % backends) {
            let got = if b == 0 {
                progress.line(format_args!("pgas hmpi (round {}/{rounds})", round + 1));
                run_hmpi(&sizes, reps, opts.quick)
            } else {
                let p = &peers[b - 1];
                progress.line(format_args!(
                    "pgas {} (round {}/{rounds})",
                    p.mpi.label,
                    round + 1
                ));
                let file =
                    ResultFile::new(&format!("pgas-{}", p.mpi.name)).map_err(BenchError::Failed)?;
                let mut c = compare::peer_launch(p, 2);
                c.args(worker_args(&sizes, reps, opts.quick, &file.0));
                c.args(["--transport", "rsmpi", "--label", p.mpi.label]);
                compare::run_with_timeout(c, time_bound(&sizes, reps, opts.quick))
                    .map_err(|e| format!("{} pgas: {e}", p.mpi.label))
                    .and_then(|()| read_results(&file.0, p.mpi.label, &sizes))
            };
            match got {
                Ok(s) => measured.extend(s),
                Err(e) => {
                    progress.line(format_args!("FAILED: {e}"));
                    failures.push(e);
                }
            }
        }
        by_round.push(measured);
    }
    let mut samples = paired_ratios(&by_round, opts.quick);
    samples.extend(compare::merge_rounds(by_round.concat()));
    let floor = crate::floor::line(floor_before, crate::floor::measure());
    progress.line(format_args!("pgas: {floor}"));
    let _ = writeln!(text, "pgas: {floor}");
    let labels: Vec<&str> = std::iter::once(BACKEND)
        .chain(peers.iter().map(|p| p.mpi.label))
        .collect();
    text += &render(&samples, &labels, opts.quick);
    let _ = writeln!(
        text,
        "(the MPI peers' GUPS: MPI_Accumulate(MPI_BXOR), flush_all every {GUPS_BATCH})"
    );
    text += "OpenSHMEM: not measured (Open MPI's oshrun starts programs here, but they \
             crash with SIGSEGV in shmem_finalize)\n";
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// What the agent measurement says: the time with a helper thread over
/// the time without (1: no overlap, 0.5: perfect).
fn agent_line(samples: &[Sample]) -> String {
    let pick = |w| {
        samples
            .iter()
            .find(|s| s.workload == w && s.backend == BACKEND)
    };
    let (Some(a), Some(b)) = (pick(AGENT_SERIAL), pick(AGENT_OVERLAP)) else {
        return String::new();
    };
    format!(
        "progress agent ({AGENT_PUTS} puts of {} + as long a computation): {:.1} us serial, \
         {:.1} us with a helper thread: {:.2}x (1: no overlap, 0.5: perfect)\n",
        report::fmt_size(a.size),
        a.value,
        b.value,
        b.value / a.value
    )
}

/// The best peer's sample of `w` at `size`.
fn best_peer<'a>(s: &'a [Sample], w: &str, size: usize, higher: bool) -> Option<&'a Sample> {
    s.iter()
        .filter(|x| x.workload == w && x.size == size && x.backend != BACKEND)
        .reduce(|a, b| {
            if (b.value > a.value) == higher && b.value != a.value {
                b
            } else {
                a
            }
        })
}

/// Each round's own hmpi / best-peer ratio at the targets' points, and
/// at every latency size (`<workload>-ratio`, backend [`PAIRED`]).
fn paired_ratios(rounds: &[Vec<Sample>], quick: bool) -> Vec<Sample> {
    let mut points: Vec<(&str, usize, bool)> = targets(quick)
        .iter()
        .map(|&(w, s, h, _)| (w, s, h))
        .collect();
    points.push((FADD, 8, false));
    let halo = HALO_N * HALO_N * 8;
    points.push((HALO, halo, false));
    points
        .into_iter()
        .filter_map(|(w, size, higher)| {
            let ratios: Vec<f64> = rounds
                .iter()
                .filter_map(|r| {
                    let h = report::find(r, w, BACKEND, 2, size)?;
                    Some(h.value / best_peer(r, w, size, higher)?.value)
                })
                .collect();
            Sample::from_reps(&format!("{w}-ratio"), PAIRED, 2, size, RATIO_UNIT, &ratios)
        })
        .collect()
}

fn render(samples: &[Sample], labels: &[&str], quick: bool) -> String {
    let mut out = String::new();
    let ratios: Vec<(&str, &str)> = labels.iter().skip(1).map(|p| (BACKEND, *p)).collect();
    for w in ALL {
        if report::rows(samples, w).is_empty() {
            continue;
        }
        let _ = write!(out, "\n{w}:\n");
        out += &report::render_table(samples, w, labels, &ratios);
    }
    out += "(gups: size = table words in all; halo-exchange: size = plane bytes)\n";
    out += &agent_line(samples);
    out += "paired ratios (hmpi / best peer, median of the rounds' own):\n";
    for s in samples.iter().filter(|s| s.backend == PAIRED) {
        let _ = writeln!(
            out,
            "  {} {}: {:.3}x ({:.3}-{:.3})",
            s.workload,
            report::fmt_size(s.size),
            s.value,
            s.min(),
            s.max()
        );
    }
    out += "targets:\n";
    for (w, size, higher, bound) in targets(quick) {
        let Some(r) = report::find(samples, &format!("{w}-ratio"), PAIRED, 2, size) else {
            continue;
        };
        let met = if higher {
            r.value >= bound
        } else {
            r.value <= bound
        };
        let _ = writeln!(
            out,
            "  {w} {}: hmpi/best peer = {:.3}x, target {} {bound}x: {}",
            report::fmt_size(size),
            r.value,
            if higher { ">=" } else { "<=" },
            if met { "met" } else { "missed" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_results_must_be_complete() {
        let l = format_line("rsmpi-mpich", GUPS, 1 << 15, &[0.01, 0.03, 0.02]);
        let s = parse_line(&l).unwrap();
        assert_eq!(
            (s.workload.as_str(), s.backend.as_str(), s.unit, s.value),
            (GUPS, "rsmpi-mpich", "GUP/s", 0.02)
        );
        assert!(parse_line("pgas-sample hmpi nosuch 8 1.0").is_none());
        let path = std::env::temp_dir().join(format!("pgas-results-{}", std::process::id()));
        std::fs::write(&path, format!("{l}\n")).unwrap();
        let e = read_results(&path, "rsmpi-mpich", &[8]).unwrap_err();
        assert!(e.contains("put-latency"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// The replay agrees with a direct simulation of one table.
    #[test]
    fn gups_replay_matches_a_whole_table() {
        let (local, updates) = (64, 256);
        let total = 2 * local;
        let mut whole: Vec<u64> = (0..total as u64).collect();
        for u in 0..2 {
            let mut x = seed(u);
            for _ in 0..updates {
                x = next(x);
                whole[(x as usize) & (total - 1)] ^= x;
            }
        }
        let parts = [
            gups_expected(0, 2, local, updates),
            gups_expected(1, 2, local, updates),
        ]
        .concat();
        assert_eq!(parts, whole);
        assert_ne!(seed(0), seed(1));
        assert_eq!(next(1 << 63), POLY);
    }
}

/// An MPI peer's rank: the same measurements through rsmpi's raw C
/// bindings.
#[cfg(feature = "mpi")]
mod peer {
    use super::{
        format_line, gups_expected, gups_words, iters, latency, next, seed, BenchError, Job,
        BW_WINDOW, FADD, GET, GET_BW, GUPS, GUPS_BATCH, HALO, HALO_N, PUT, PUT_BW,
    };
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::Equivalence;
    use mpi::ffi;
    use mpi::raw::AsRaw;
    use mpi::topology::Communicator;
    use std::os::raw::{c_int, c_void};
    use std::time::Instant;

    fn check(label: &str, what: &str, code: c_int) -> Result<(), BenchError> {
        if code == ffi::MPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(BenchError::Failed(format!(
                "{label} {what}: MPI error code {code}"
            )))
        }
    }

    /// A window from `MPI_Win_allocate`: its handle and local base.
    struct Win {
        raw: ffi::MPI_Win,
        base: *mut u8,
        label: String,
    }

    impl Win {
        fn allocate(label: &str, bytes: usize, comm: ffi::MPI_Comm) -> Result<Win, BenchError> {
            let mut base: *mut u8 = std::ptr::null_mut();
            // SAFETY: a plain handle value.
            let mut raw = unsafe { ffi::RSMPI_WIN_NULL };
            // SAFETY: collective over `comm`; MPI writes the base address
            // and the handle.
            let code = unsafe {
                ffi::MPI_Win_allocate(
                    bytes as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    comm,
                    (&mut base as *mut *mut u8).cast::<c_void>(),
                    &mut raw,
                )
            };
            check(label, "MPI_Win_allocate", code)?;
            Ok(Win {
                raw,
                base,
                label: label.to_owned(),
            })
        }

        fn check(&self, what: &str, code: c_int) -> Result<(), BenchError> {
            check(&self.label, what, code)
        }

        fn lock_all(&self) -> Result<(), BenchError> {
            // SAFETY: a live window with no epoch open.
            self.check("MPI_Win_lock_all", unsafe {
                ffi::MPI_Win_lock_all(0, self.raw)
            })
        }

        fn unlock_all(&self) -> Result<(), BenchError> {
            // SAFETY: closes the lock_all epoch.
            self.check("MPI_Win_unlock_all", unsafe {
                ffi::MPI_Win_unlock_all(self.raw)
            })
        }

        /// `MPI_Put` / `MPI_Get` of `len` bytes at `buf`.
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
            // SAFETY: `buf` holds `len` bytes until the caller's flush;
            // the window holds `disp + len` bytes at the target.
            let code = unsafe {
                if put {
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
                } else {
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
            self.check("MPI_Win_flush", unsafe {
                ffi::MPI_Win_flush(target, self.raw)
            })
        }

        fn flush_all(&self) -> Result<(), BenchError> {
            // SAFETY: as for `flush`.
            self.check("MPI_Win_flush_all", unsafe {
                ffi::MPI_Win_flush_all(self.raw)
            })
        }

        fn free(self) -> Result<(), BenchError> {
            let mut raw = self.raw;
            // SAFETY: collective; every epoch on the window is closed.
            check(&self.label, "MPI_Win_free", unsafe {
                ffi::MPI_Win_free(&mut raw)
            })
        }
    }

    /// Both ranks: every measurement; rank 0 returns the lines.
    pub fn worker(job: &Job) -> Result<Option<Vec<String>>, BenchError> {
        let label = job.label.as_str();
        let universe = mpi::initialize()
            .ok_or_else(|| BenchError::Failed(format!("{label}: MPI was already initialised")))?;
        let world = universe.world();
        if world.size() != 2 {
            return Err(BenchError::Failed(format!(
                "{label} pgas worker: needs 2 ranks, the job has {}",
                world.size()
            )));
        }
        let me = world.rank() as usize;
        let comm = world.as_raw();
        let max = job.sizes.iter().copied().max().unwrap_or(0).max(8);
        let win = Win::allocate(label, max, comm)?;
        let mut src = vec![0x5au8; max];
        let mut dst = vec![0u8; max];
        let mut lines = Vec::new();
        let u64t = u64::equivalent_datatype().as_raw();
        world.barrier();
        win.lock_all()?;
        if me == 0 {
            for &size in &job.sizes {
                let n = iters(size, job.quick);
                for (w, put) in [(PUT, true), (GET, false)] {
                    let buf = if put {
                        src.as_mut_ptr()
                    } else {
                        dst.as_mut_ptr()
                    };
                    let us = latency(n, job.reps, || {
                        win.transfer(put, buf, size, 1, 0)?;
                        win.flush(1)
                    })?;
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
                    let mut mbs = Vec::with_capacity(job.reps);
                    for rep in 0..=job.reps {
                        let t = Instant::now();
                        for _ in 0..n {
                            for _ in 0..BW_WINDOW {
                                win.transfer(put, buf, size, 1, 0)?;
                            }
                            win.flush(1)?;
                        }
                        if rep > 0 {
                            let bytes = (size * BW_WINDOW * n) as f64;
                            mbs.push(bytes / t.elapsed().as_secs_f64() / 1e6);
                        }
                    }
                    lines.push(format_line(label, w, size, &mbs));
                }
            }
            let one = 1u64;
            let mut old = 0u64;
            let n = iters(8, job.quick);
            let us = latency(n, job.reps, || {
                // SAFETY: one u64 at `one` and at `old`; the window holds
                // 8 bytes at displacement 0 of rank 1.
                let code = unsafe {
                    ffi::MPI_Fetch_and_op(
                        (&one as *const u64).cast(),
                        (&mut old as *mut u64).cast(),
                        u64t,
                        1,
                        0,
                        ffi::RSMPI_SUM,
                        win.raw,
                    )
                };
                win.check("MPI_Fetch_and_op", code)?;
                win.flush(1)
            })?;
            lines.push(format_line(label, FADD, 8, &us));
        }
        win.unlock_all()?;
        world.barrier();

        // GUPS with batched accumulates.
        let local = gups_words(job.quick);
        let updates = 4 * local;
        let total = (2 * local) as u64;
        let table = Win::allocate(label, local * 8, comm)?;
        let mine = table.base.cast::<u64>();
        let expected = gups_expected(me, 2, local, updates);
        let mut batch = vec![0u64; GUPS_BATCH];
        let mut gups = Vec::with_capacity(job.reps);
        for rep in 0..=job.reps {
            for i in 0..local {
                // SAFETY: word `i` of this rank's window memory, no epoch
                // open at any rank (the barrier below orders it).
                unsafe { mine.add(i).write((me * local + i) as u64) };
            }
            world.barrier();
            table.lock_all()?;
            let t = Instant::now();
            let mut x = seed(me);
            let mut k = 0;
            for _ in 0..updates {
                x = next(x);
                let idx = (x & (total - 1)) as usize;
                batch[k] = x;
                // SAFETY: one u64 at `batch[k]`, unchanged until the
                // flush below; the target word is inside the window.
                let code = unsafe {
                    ffi::MPI_Accumulate(
                        (&batch[k] as *const u64).cast(),
                        1,
                        u64t,
                        (idx / local) as c_int,
                        ((idx % local) * 8) as ffi::MPI_Aint,
                        1,
                        u64t,
                        ffi::RSMPI_BXOR,
                        table.raw,
                    )
                };
                table.check("MPI_Accumulate", code)?;
                k += 1;
                if k == GUPS_BATCH {
                    table.flush_all()?;
                    k = 0;
                }
            }
            table.flush_all()?;
            world.barrier();
            let secs = t.elapsed().as_secs_f64();
            table.unlock_all()?;
            world.barrier();
            // SAFETY: this rank's `local` words; every epoch is closed.
            let got = unsafe { std::slice::from_raw_parts(mine, local) };
            if got != expected.as_slice() {
                return Err(BenchError::Failed(format!(
                    "{label} gups: the table differs from the serial replay"
                )));
            }
            world.barrier();
            if rep > 0 {
                gups.push((2 * updates) as f64 / secs / 1e9);
            }
        }
        lines.push(format_line(label, GUPS, total as usize, &gups));
        table.free()?;

        // Halo exchange.
        let plane = HALO_N * HALO_N;
        let ghosts = Win::allocate(label, 2 * plane * 8, comm)?;
        let boundary = vec![me as f64 + 1.0; plane];
        let (peer, disp) = if me == 0 { (1, 0) } else { (0, plane * 8) };
        ghosts.lock_all()?;
        let n = if job.quick { 100 } else { 1000 };
        let us = latency(n, job.reps, || {
            ghosts.transfer(true, boundary.as_ptr() as *mut u8, plane * 8, peer, disp)?;
            ghosts.flush(peer)?;
            world.barrier();
            Ok::<(), BenchError>(())
        })?;
        ghosts.unlock_all()?;
        world.barrier();
        let off = if me == 0 { plane } else { 0 };
        // SAFETY: this rank's ghost plane, every epoch closed.
        let got = unsafe { std::slice::from_raw_parts(ghosts.base.cast::<f64>().add(off), plane) };
        if got.iter().any(|&v| v != (1 - me) as f64 + 1.0) {
            return Err(BenchError::Failed(format!(
                "{label} halo: a ghost plane does not hold the neighbour's plane"
            )));
        }
        lines.push(format_line(label, HALO, plane * 8, &us));
        ghosts.free()?;
        win.free()?;
        Ok((me == 0).then_some(lines))
    }
}
