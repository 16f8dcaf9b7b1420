//! `hmpi-bench compare WORKLOAD[,WORKLOAD…]`: hmpi and its MPI peers in one
//! invocation, side by side with the ratio per size.
//!
//! For each workload, hmpi runs first (2 ranks through the launcher, bound
//! to cores; collectives on `--ranks`, unbound when there are more ranks
//! than CPUs), then every peer: this same program built with feature `mpi`
//! against one MPI (rsmpi, the `mpi` crate) and started by that MPI's own
//! launcher, 2 ranks bound to cores:
//!
//! | peer | label | build (`MPICC`) | launcher |
//! |---|---|---|---|
//! | Open MPI | `rsmpi-openmpi` | `mpicc.openmpi` | `mpirun.openmpi -n 2 --bind-to core --mca btl self,vader` (+ `--allow-run-as-root` as root) |
//! | MPICH | `rsmpi-mpich` | `mpicc.mpich` | `mpiexec.mpich -n 2 -bind-to core` |
//!
//! rsmpi links one MPI at build time (its build script asks the `MPICC`
//! wrapper with `-show`, else pkg-config), so each peer is a separate build
//! in its own target directory, `PEER_DIR/<mpi>/release/hmpi-bench`, where
//! `PEER_DIR` is `--peer-dir`, else `HMPI_BENCH_PEER_DIR`, else
//! `target/peers` in the workspace this program was built from. Before
//! measuring, `compare` runs `cargo build --release --features mpi` on this
//! package's manifest (`benches/hmpi-bench/Cargo.toml`) for each peer
//! whose MPI is installed (a no-op when the peer is up to date;
//! `--no-build` skips it and uses what is there). It says which peers it
//! found and which are missing, and how to install them
//! (`scripts/setup-mpi`). The run fails (exit 1, after printing what it
//! measured) when no peer could run, when an installed MPI's peer cannot be
//! built, when a peer named with `--peers` is not installed, or when any
//! measurement fails.
//!
//! # Example
//! ```text
//! hmpi-bench compare latency,bw --sizes 1-4M --csv p2p.csv --plot p2p.png
//! ```

use crate::p2p::{self, Family, Job, Kernel, ResultFile};
use crate::report::{self, fmt_size, Sample};
use crate::{rma, stats, BenchError, Options, Outcome, Progress};
use hmpi::hmpi_core::launch::allowed_cpus;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A system MPI that a peer build links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mpi {
    /// Short name (`--peers`, target directory).
    pub name: &'static str,
    /// What people call it.
    pub display: &'static str,
    /// The backend label in results.
    pub label: &'static str,
    /// Its compiler wrapper (rsmpi's build reads `MPICC`).
    pub mpicc: &'static str,
    /// Its launcher.
    pub launcher: &'static str,
    /// Its pkg-config name (for the version).
    pub pkg: &'static str,
}

/// The peers `compare` knows, in the order it runs them.
pub const MPIS: [Mpi; 2] = [
    Mpi {
        name: "openmpi",
        display: "Open MPI",
        label: "rsmpi-openmpi",
        mpicc: "mpicc.openmpi",
        launcher: "mpirun.openmpi",
        pkg: "ompi-c",
    },
    Mpi {
        name: "mpich",
        display: "MPICH",
        label: "rsmpi-mpich",
        mpicc: "mpicc.mpich",
        launcher: "mpiexec.mpich",
        pkg: "mpich",
    },
];

/// The script that installs the peers' MPIs.
const SETUP: &str = "scripts/setup-mpi";
/// The variable that overrides the peers' directory.
const PEER_DIR_VAR: &str = "HMPI_BENCH_PEER_DIR";
/// This package's directory in the source tree it was built from.
const SOURCE_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The workspace root, two levels above this package
/// (`benches/hmpi-bench`).
fn workspace_dir() -> PathBuf {
    let pkg = Path::new(SOURCE_DIR);
    pkg.parent()
        .and_then(Path::parent)
        .map_or_else(|| pkg.to_path_buf(), Path::to_path_buf)
}

/// The workloads `compare` accepts: names, `p2p`/`all` for every
/// point-to-point kernel, `coll` for every collective one.
pub fn parse_workloads(list: &str) -> Result<Vec<&'static Kernel>, BenchError> {
    let mut out: Vec<&'static Kernel> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let ks: Vec<&'static Kernel> = match name {
            "p2p" | "all" => p2p::KERNELS.iter().collect(),
            "coll" => crate::coll::KERNELS.iter().collect(),
            "alloc" => {
                return Err(BenchError::Usage(
                    "compare: alloc has no MPI peer; `hmpi-bench alloc` compares allocators in every run"
                        .into(),
                ))
            }
            n => vec![p2p::kernel(n).ok_or_else(|| {
                let names: Vec<&str> = p2p::KERNELS.iter().map(|k| k.name).collect();
                let colls: Vec<&str> = crate::coll::KERNELS.iter().map(|k| k.name).collect();
                BenchError::Usage(format!(
                    "compare: unknown workload '{n}'; known: {}, p2p (all of them), {}, \
                     coll (all of them)",
                    names.join(", "),
                    colls.join(", ")
                ))
            })?],
        };
        for k in ks {
            if !out.iter().any(|o| o.name == k.name) {
                out.push(k);
            }
        }
    }
    if out.is_empty() {
        return Err(BenchError::Usage(
            "compare needs a workload, e.g. latency".into(),
        ));
    }
    Ok(out)
}

/// The peers `--peers` names (`none` for hmpi alone), or all known ones.
pub fn parse_peers(list: &str) -> Result<Vec<Mpi>, BenchError> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "none" {
            continue;
        }
        let m = MPIS.iter().find(|m| m.name == name).ok_or_else(|| {
            BenchError::Usage(format!(
                "--peers: unknown MPI '{name}'; known: openmpi, mpich, none"
            ))
        })?;
        if !out.contains(m) {
            out.push(*m);
        }
    }
    Ok(out)
}

/// `name` on `PATH`, if there.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The directory under which each peer has its target directory.
fn peer_dir(opts: &Options) -> PathBuf {
    opts.peer_dir
        .clone()
        .or_else(|| std::env::var_os(PEER_DIR_VAR).map(PathBuf::from))
        .unwrap_or_else(|| workspace_dir().join("target").join("peers"))
}

/// The peer program of `mpi` under `dir`.
pub fn peer_binary(dir: &Path, mpi: &Mpi) -> PathBuf {
    dir.join(mpi.name).join("release").join("hmpi-bench")
}

/// The version of `mpi`: pkg-config's, else the launcher's `--version` line
/// that names one.
fn version(mpi: &Mpi, launcher: &Path) -> String {
    let run = |c: &mut Command| {
        c.stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if let Some(v) = run(Command::new("pkg-config").args(["--modversion", mpi.pkg])) {
        let v = v.trim();
        if !v.is_empty() {
            return v.to_owned();
        }
    }
    run(Command::new(launcher).arg("--version"))
        .and_then(|out| {
            out.lines()
                .map(str::trim)
                .find(|l| l.contains("Version") || l.contains("Open MPI"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "version unknown".into())
}

/// A peer ready to run.
pub(crate) struct Peer {
    pub(crate) mpi: Mpi,
    launcher: PathBuf,
    binary: PathBuf,
    version: String,
}

fn cargo() -> PathBuf {
    if let Some(c) = std::env::var_os("CARGO") {
        return PathBuf::from(c);
    }
    if let Some(c) = which("cargo") {
        return c;
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cargo/bin/cargo")
}

/// Builds (or brings up to date) the peer of `mpi` with its compiler
/// wrapper `mpicc`; cargo's progress goes to stderr.
fn build_peer(mpi: &Mpi, mpicc: &Path, dir: &Path, progress: &Progress) -> Result<(), String> {
    let manifest = Path::new(SOURCE_DIR).join("Cargo.toml");
    if !manifest.is_file() {
        return Err(format!(
            "cannot build the {} peer: the source tree {SOURCE_DIR} is gone",
            mpi.display
        ));
    }
    progress.line(format_args!(
        "building the {} peer (cargo build --release --features mpi, MPICC={})",
        mpi.display,
        mpicc.display()
    ));
    let status = Command::new(cargo())
        .args([
            "build",
            "--release",
            "--features",
            "mpi",
            "--bin",
            "hmpi-bench",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(dir.join(mpi.name))
        .env("MPICC", mpicc)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run cargo ({}): {e}", cargo().display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the {} peer failed ({status}); its compiler output is above \
             ({SETUP} installs MPI and libclang)",
            mpi.display
        ))
    }
}

/// Finds (and unless `--no-build`, builds) each requested peer. Returns the
/// ready ones, a line per MPI that is not installed, and a line per peer
/// that is installed but could not be built or found.
fn find_peers(
    wanted: &[Mpi],
    opts: &Options,
    progress: &Progress,
) -> (Vec<Peer>, Vec<String>, Vec<String>) {
    let dir = peer_dir(opts);
    let mut ready = Vec::new();
    let mut missing = Vec::new();
    let mut broken = Vec::new();
    for mpi in wanted {
        let (Some(launcher), Some(mpicc)) = (which(mpi.launcher), which(mpi.mpicc)) else {
            missing.push(format!(
                "{} ({}): not installed ({} or {} not on PATH); {SETUP} installs it",
                mpi.label, mpi.display, mpi.launcher, mpi.mpicc
            ));
            continue;
        };
        let binary = peer_binary(&dir, mpi);
        if !opts.no_build {
            if let Err(e) = build_peer(mpi, &mpicc, &dir, progress) {
                broken.push(format!("{} ({}): {e}", mpi.label, mpi.display));
                continue;
            }
        }
        if !binary.is_file() {
            broken.push(format!(
                "{} ({}): no peer program at {} (run without --no-build to build it)",
                mpi.label,
                mpi.display,
                binary.display()
            ));
            continue;
        }
        let version = version(mpi, &launcher);
        ready.push(Peer {
            mpi: *mpi,
            launcher,
            binary,
            version,
        });
    }
    (ready, missing, broken)
}

/// Am I root (Open MPI refuses to run as root without being told)?
fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// The launcher command line of `peer` for `job` on `ranks` ranks.
fn peer_command(peer: &Peer, job: &Job, ranks: usize) -> Command {
    let mut c = peer_launch(peer, ranks);
    c.arg("--worker").arg(p2p::WORKER);
    c.args(job.to_args());
    c
}

/// `peer`'s launcher starting its program on `ranks` ranks, bound to
/// cores when there are enough (the worker's arguments follow).
pub(crate) fn peer_launch(peer: &Peer, ranks: usize) -> Command {
    let mut c = Command::new(&peer.launcher);
    let enough_cpus = allowed_cpus().len() >= ranks;
    let n = ranks.to_string();
    match peer.mpi.name {
        "openmpi" => {
            c.args(["-n", &n]);
            if enough_cpus {
                c.args(["--bind-to", "core"]);
            } else {
                c.args(["--bind-to", "none", "--oversubscribe"]);
            }
            // Shared memory and self only: no network probing in containers.
            c.args(["--mca", "btl", "self,vader"]);
            if is_root() {
                c.arg("--allow-run-as-root");
            }
        }
        _ => {
            c.args(["-n", &n]);
            c.args(["-bind-to", if enough_cpus { "core" } else { "none" }]);
        }
    }
    c.arg(&peer.binary);
    c
}

/// Runs `cmd` to completion, killing it (TERM, then KILL) past `limit`; it
/// also gets TERM if this process dies first, so no launcher outlives it.
pub(crate) fn run_with_timeout(mut cmd: Command, limit: Duration) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, which is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("the job failed ({status})")),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for the job: {e}")),
        }
        if start.elapsed() > limit {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(2));
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the job ran past its limit of {} s and was ended",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `k` on `peer`; returns its samples.
fn run_peer(
    peer: &Peer,
    k: &Kernel,
    sizes: &[usize],
    reps: usize,
    quick: bool,
    ranks: usize,
) -> Result<Vec<Sample>, String> {
    let file = ResultFile::new(&format!("{}-{}", k.name, peer.mpi.name))?;
    let job = Job {
        transport: "rsmpi".into(),
        label: peer.mpi.label.into(),
        kernel: k.name.into(),
        sizes: sizes.to_vec(),
        reps,
        quick,
        out: file.0.clone(),
    };
    run_with_timeout(
        peer_command(peer, &job, ranks),
        k.time_bound(sizes, reps, quick, ranks),
    )
    .map_err(|e| format!("{} {}: {e}", peer.mpi.label, k.name))?;
    let samples = p2p::read_results(&file.0)?;
    p2p::check_complete(&samples, k, peer.mpi.label, sizes, ranks)?;
    Ok(samples)
}

/// Finds (and builds) the peers `--peers` asks for; returns the ready
/// ones, the text that names them and the failures so far (a peer named
/// with `--peers` that is missing, an installed one that cannot be built,
/// no peer at all).
pub(crate) fn prepare(
    opts: &Options,
    progress: &Progress,
) -> Result<(Vec<Peer>, String, Vec<String>), BenchError> {
    let wanted = match &opts.peers {
        Some(list) => parse_peers(list)?,
        None => MPIS.to_vec(),
    };
    let (peers, missing, broken) = find_peers(&wanted, opts, progress);
    let mut text = String::new();
    for p in &peers {
        let line = format!(
            "peer {}: {} {}, {}",
            p.mpi.label,
            p.mpi.display,
            p.version,
            p.binary.display()
        );
        progress.line(format_args!("{line}"));
        let _ = writeln!(text, "{line}");
    }
    for m in &missing {
        progress.line(format_args!("peer missing: {m}"));
        let _ = writeln!(text, "peer missing: {m}");
    }
    let mut failures: Vec<String> = Vec::new();
    let fail = |e: String, failures: &mut Vec<String>| {
        progress.line(format_args!("FAILED: {e}"));
        failures.push(e);
    };
    // A peer named with --peers must run; one that is installed must build.
    if opts.peers.is_some() {
        failures.extend(missing.iter().map(|m| format!("peer missing: {m}")));
    }
    for b in broken {
        fail(format!("peer unusable: {b}"), &mut failures);
    }
    if peers.is_empty() && !wanted.is_empty() {
        fail(
            format!("no MPI peer could be run ({SETUP} installs Open MPI and MPICH)"),
            &mut failures,
        );
    }
    Ok((peers, text, failures))
}

/// `hmpi-bench compare rma`: hmpi's one-sided workload ([`crate::rma`])
/// and the same measurements on each peer (its `MPI_Win_allocate`
/// windows through rsmpi's C bindings), 2 ranks, each round running
/// every backend back to back (starting with a different one each
/// round). The latency and bandwidth targets are judged as in the other
/// comparisons (each round's own hmpi / best-peer ratio with several
/// rounds); the skew target compares hmpi's origin time at the largest
/// matrix with its own time without skew, the peers' ratios beside it.
pub fn run_rma(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let sizes = rma::sizes(opts)?;
    let reps = rma::reps(opts);
    let (peers, mut text, mut failures) = prepare(opts, progress)?;
    let rounds = opts.rounds.unwrap_or(1);
    let backends = 1 + peers.len();
    progress.line(format_args!(
        "rma: {} sizes {}-{}, {reps} repetitions{}, 2 ranks{}",
        sizes.len(),
        fmt_size(sizes[0]),
        fmt_size(sizes[sizes.len() - 1]),
        if opts.quick { " (quick)" } else { "" },
        if rounds > 1 {
            format!(", {rounds} rounds")
        } else {
            String::new()
        }
    ));
    let floor_before = crate::floor::measure();
    let mut by_round: Vec<Vec<Sample>> = Vec::new();
    for round in 0..rounds {
        let tag = if rounds > 1 {
            format!(" (round {}/{rounds})", round + 1)
        } else {
            String::new()
        };
        let mut measured = Vec::new();
        for b in (0..backends).map(|i| (i + round) % backends) {
            let got = if b == 0 {
                progress.line(format_args!("rma hmpi{tag}"));
                rma::run_hmpi(&sizes, reps, opts.quick)
            } else {
                let p = &peers[b - 1];
                progress.line(format_args!(
                    "rma {} ({}){tag}",
                    p.mpi.label,
                    p.launcher.display()
                ));
                run_rma_peer(p, &sizes, reps, opts.quick)
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
    let mut samples = Vec::new();
    if rounds > 1 {
        samples.extend(rma_paired_ratios(&by_round));
    }
    samples.extend(merge_rounds(by_round.concat()));
    let floor = crate::floor::line(floor_before, crate::floor::measure());
    progress.line(format_args!("rma: {floor}"));
    let _ = writeln!(text, "rma: {floor}");
    let labels: Vec<&str> = std::iter::once("hmpi")
        .chain(peers.iter().map(|p| p.mpi.label))
        .collect();
    text += &render_rma(&samples, &labels, opts.quick);
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// The rma measurements of `peer` under its launcher.
fn run_rma_peer(
    peer: &Peer,
    sizes: &[usize],
    reps: usize,
    quick: bool,
) -> Result<Vec<Sample>, String> {
    let file = ResultFile::new(&format!("rma-{}", peer.mpi.name))?;
    let mut c = peer_launch(peer, 2);
    c.args(rma::worker_args(sizes, reps, quick, &file.0));
    c.args(["--transport", "rsmpi", "--label", peer.mpi.label]);
    run_with_timeout(c, rma::time_bound(sizes, reps, quick))
        .map_err(|e| format!("{} rma: {e}", peer.mpi.label))?;
    rma::read_results(&file.0, peer.mpi.label, sizes, &rma::COMPARED[..4])
}

/// The best peer's sample of `workload` at `size` in `samples`.
fn best_rma_peer<'a>(
    samples: &'a [Sample],
    workload: &str,
    size: usize,
    higher_is_better: bool,
) -> Option<&'a Sample> {
    samples
        .iter()
        .filter(|s| s.workload == workload && s.size == size && s.backend != "hmpi")
        .reduce(|a, b| {
            if (b.value > a.value) == higher_is_better && b.value != a.value {
                b
            } else {
                a
            }
        })
}

/// Each round's own hmpi / best-peer ratio at the targets' points
/// (workload `<workload>-ratio`, backend [`PAIRED`], unit `x`), as
/// [`paired_ratios`] does for the kernels.
fn rma_paired_ratios(rounds: &[Vec<Sample>]) -> Vec<Sample> {
    rma::TARGETS
        .iter()
        .filter_map(|&(w, size, higher, _)| {
            let ratios: Vec<f64> = rounds
                .iter()
                .filter_map(|r| {
                    let h = report::find(r, w, "hmpi", 2, size)?;
                    Some(h.value / best_rma_peer(r, w, size, higher)?.value)
                })
                .collect();
            Sample::from_reps(&format!("{w}-ratio"), PAIRED, 2, size, RATIO_UNIT, &ratios)
        })
        .collect()
}

/// The tables of the compared workloads and the target lines.
fn render_rma(samples: &[Sample], labels: &[&str], quick: bool) -> String {
    let mut out = String::new();
    let ratios: Vec<(&str, &str)> = labels.iter().skip(1).map(|p| ("hmpi", *p)).collect();
    for w in rma::COMPARED {
        if report::rows(samples, w).is_empty() {
            continue;
        }
        let _ = write!(out, "\n{w}:\n");
        out += &report::render_table(samples, w, labels, &ratios);
    }
    out += "(skew rows: the size column is the matrix order n, not bytes)\ntargets:\n";
    for &(w, size, higher, target) in &rma::TARGETS {
        let (Some(h), Some(p)) = (
            report::find(samples, w, "hmpi", 2, size),
            best_rma_peer(samples, w, size, higher),
        ) else {
            continue;
        };
        let medians = h.value / p.value;
        let (r, how) = match report::find(samples, &format!("{w}-ratio"), PAIRED, 2, size) {
            Some(pr) => (
                pr.value,
                format!(
                    "hmpi/best peer = {:.2}x (median of the rounds' own ratios, {:.2}-{:.2}; \
                     of the medians: {medians:.2}x against {})",
                    pr.value,
                    pr.min(),
                    pr.max(),
                    p.backend
                ),
            ),
            None => (
                medians,
                format!("hmpi/best peer ({}) = {medians:.2}x", p.backend),
            ),
        };
        let met = if higher { r >= target } else { r <= target };
        let _ = writeln!(
            out,
            "  {w} {}: {how}, target {} {target}x: {}",
            fmt_size(size),
            if higher { ">=" } else { "<=" },
            if met { "met" } else { "missed" }
        );
    }
    out += &rma::skew_lines(samples, labels, quick);
    out
}

/// Entry point of `hmpi-bench compare`.
pub fn run(
    kernels: &[&'static Kernel],
    opts: &Options,
    progress: &Progress,
) -> Result<Outcome, BenchError> {
    let sizes: Vec<Vec<usize>> = kernels
        .iter()
        .map(|k| k.sizes(opts))
        .collect::<Result<_, _>>()?;
    let reps = p2p::reps(opts);
    // Point-to-point kernels always run on 2 ranks (`--ranks` is refused
    // with them), collectives on `--ranks`.
    let ranks = opts.ranks.unwrap_or(2);
    let (peers, mut text, mut failures) = prepare(opts, progress)?;
    let mut samples = Vec::new();
    let fail = |e: String, failures: &mut Vec<String>| {
        progress.line(format_args!("FAILED: {e}"));
        failures.push(e);
    };
    let rounds = opts.rounds.unwrap_or(1);
    // Backend 0 is hmpi, then the peers.
    let backends = 1 + peers.len();
    for (k, sizes) in kernels.iter().zip(&sizes) {
        progress.line(format_args!(
            "{}: {} sizes {}-{}, {reps} repetitions (OSU iterations{}), {ranks} ranks{}",
            k.name,
            sizes.len(),
            fmt_size(sizes[0]),
            fmt_size(*sizes.last().expect("sizes are never empty")),
            if opts.quick { " / 10" } else { "" },
            if rounds > 1 {
                format!(", {rounds} rounds")
            } else {
                String::new()
            }
        ));
        let floor_before = crate::floor::measure();
        let mut by_round: Vec<Vec<Sample>> = Vec::new();
        for round in 0..rounds {
            let mut measured = Vec::new();
            for b in (0..backends).map(|i| (i + round) % backends) {
                let tag = if rounds > 1 {
                    format!(" (round {}/{rounds})", round + 1)
                } else {
                    String::new()
                };
                let got = if b == 0 {
                    progress.line(format_args!("{} hmpi{tag}", k.name));
                    p2p::run_hmpi(k, sizes, reps, opts.quick, ranks)
                } else {
                    let p = &peers[b - 1];
                    progress.line(format_args!(
                        "{} {} ({}){tag}",
                        k.name,
                        p.mpi.label,
                        p.launcher.display()
                    ));
                    run_peer(p, k, sizes, reps, opts.quick, ranks)
                };
                match got {
                    Ok(s) => measured.extend(s),
                    Err(e) => fail(e, &mut failures),
                }
            }
            by_round.push(measured);
        }
        if rounds > 1 {
            samples.extend(paired_ratios(&by_round, k, ranks));
        }
        samples.extend(merge_rounds(by_round.concat()));
        let floor = crate::floor::line(floor_before, crate::floor::measure());
        progress.line(format_args!("{}: {floor}", k.name));
        let _ = writeln!(text, "{}: {floor}", k.name);
    }
    let labels: Vec<&str> = std::iter::once("hmpi")
        .chain(peers.iter().map(|p| p.mpi.label))
        .collect();
    text += &render(&samples, kernels, &labels, ranks);
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// One sample per point from the rounds' samples of it: the median of
/// their medians, the smallest minimum and the largest maximum (a single
/// round's samples come back as they are).
pub fn merge_rounds(samples: Vec<Sample>) -> Vec<Sample> {
    let mut points: Vec<Vec<Sample>> = Vec::new();
    for s in samples {
        let same = |p: &&mut Vec<Sample>| {
            let q = &p[0];
            (&q.workload, &q.backend, q.threads, q.size)
                == (&s.workload, &s.backend, s.threads, s.size)
        };
        match points.iter_mut().find(same) {
            Some(p) => p.push(s),
            None => points.push(vec![s]),
        }
    }
    points
        .into_iter()
        .map(|mut p| {
            if p.len() == 1 {
                return p.pop().expect("one sample");
            }
            let medians: Vec<f64> = p.iter().map(|s| s.value).collect();
            let mut merged = p[0].clone();
            merged.value = stats::median(&medians).expect("rounds are never empty");
            merged.set_range(
                p.iter().map(Sample::min).fold(f64::INFINITY, f64::min),
                p.iter().map(Sample::max).fold(0.0, f64::max),
            );
            merged
        })
        .collect()
}

/// The tables (each backend's median, hmpi / each peer per size) and the
/// target lines (judged at `ranks` ranks; the targets are set for 2).
pub fn render(samples: &[Sample], kernels: &[&Kernel], labels: &[&str], ranks: usize) -> String {
    let mut out = String::new();
    let ratios: Vec<(&str, &str)> = labels.iter().skip(1).map(|p| ("hmpi", *p)).collect();
    for k in kernels {
        if report::rows(samples, k.name).is_empty() {
            continue;
        }
        out += "\n";
        out += &report::render_table(samples, k.name, labels, &ratios);
        out += &targets(samples, k, ranks);
    }
    out
}

/// The best peer's median at `size` and `ranks` (lowest latency, highest
/// bandwidth).
fn best_peer<'a>(
    samples: &'a [Sample],
    k: &Kernel,
    size: usize,
    ranks: usize,
) -> Option<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.workload == k.name
                && s.size == size
                && s.threads as usize == ranks
                && s.backend != "hmpi"
        })
        .reduce(|a, b| {
            let b_better = if k.higher_is_better {
                b.value > a.value
            } else {
                b.value < a.value
            };
            if b_better {
                b
            } else {
                a
            }
        })
}

/// Backend of the paired ratios (workload `<kernel>-ratio`, see
/// [`paired_ratios`]).
pub const PAIRED: &str = "hmpi/best-peer";
/// Unit of the paired ratios.
pub(crate) const RATIO_UNIT: &str = "x";

/// Workload name of `k`'s paired ratios.
fn ratio_workload(k: &Kernel) -> String {
    format!("{}-ratio", k.name)
}

/// The project's targets (for 2 ranks): the sizes a kernel is judged at
/// and the bound on hmpi / the best peer (at most it where lower is
/// better, at least it where higher is): 8 B latency <= 0.6x, 1-4 MiB
/// bandwidth >= 2.5x; the barrier, 8 B and 1 MiB bcast / reduce /
/// allreduce, and 1 MiB allgather <= 0.5x.
fn target_of(k: &Kernel) -> Option<(&'static [usize], f64)> {
    match k.name {
        "latency" => Some((&[8], 0.6)),
        "bw" => Some((&[1 << 20, 2 << 20, 4 << 20], 2.5)),
        "barrier" => Some((&[0], 0.5)),
        "bcast" | "reduce" | "allreduce" => Some((&[8, 1 << 20], 0.5)),
        "allgather" => Some((&[1 << 20], 0.5)),
        _ => None,
    }
}

/// Ranks at which the targets are set.
const TARGET_RANKS: usize = 2;

/// For each size a target is judged at, hmpi / the best peer of each round
/// that measured both: the backends of one round run back to back, while
/// the machine's speed changes for stretches of seconds to minutes, so
/// medians over all rounds can compare different stretches. The median
/// of the rounds' ratios is the value and they are the repetitions (the
/// CSV's min and max are their range). Workload `<kernel>-ratio`, backend
/// [`PAIRED`], unit `x`; in the CSV, not the tables.
fn paired_ratios(rounds: &[Vec<Sample>], k: &Kernel, ranks: usize) -> Vec<Sample> {
    let Some((sizes, _)) = target_of(k) else {
        return Vec::new();
    };
    let n = ranks as u32;
    sizes
        .iter()
        .filter_map(|&size| {
            let ratios: Vec<f64> = rounds
                .iter()
                .filter_map(|r| {
                    let h = report::find(r, k.name, "hmpi", n, size)?;
                    Some(h.value / best_peer(r, k, size, ranks)?.value)
                })
                .collect();
            Sample::from_reps(&ratio_workload(k), PAIRED, n, size, RATIO_UNIT, &ratios)
        })
        .collect()
}

/// The target lines, checked against the best peer of this run: from the
/// paired ratios when there are several rounds, else from the medians.
fn targets(samples: &[Sample], k: &Kernel, ranks: usize) -> String {
    let Some((sizes, target)) = target_of(k) else {
        return String::new();
    };
    if ranks != TARGET_RANKS {
        return format!(
            "targets of {}: set for {TARGET_RANKS} ranks, not judged at {ranks}\n",
            k.name
        );
    }
    let n = ranks as u32;
    let better = if k.higher_is_better { ">=" } else { "<=" };
    let mut out = String::new();
    for &size in sizes {
        let (Some(h), Some(p)) = (
            report::find(samples, k.name, "hmpi", n, size),
            best_peer(samples, k, size, ranks),
        ) else {
            continue;
        };
        let medians = h.value / p.value;
        let (r, how) = match report::find(samples, &ratio_workload(k), PAIRED, n, size) {
            Some(pr) => (
                pr.value,
                format!(
                    "hmpi/best peer = {:.2}x (median of the rounds' own ratios, {:.2}-{:.2}; \
                     of the medians: {medians:.2}x against {})",
                    pr.value,
                    pr.min(),
                    pr.max(),
                    p.backend
                ),
            ),
            None => (
                medians,
                format!("hmpi/best peer ({}) = {medians:.2}x", p.backend),
            ),
        };
        let met = if k.higher_is_better {
            r >= target
        } else {
            r <= target
        };
        // The barrier has no size to name.
        let at = if size == 0 && k.family == Family::Coll {
            String::new()
        } else {
            format!(" {}", fmt_size(size))
        };
        let _ = writeln!(
            out,
            "target {}{at}: {how}, target {better} {target}x: {}",
            k.name,
            if met { "met" } else { "missed" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(w: &str, b: &str, size: usize, v: f64) -> Sample {
        let unit = p2p::kernel(w).map_or("us", |k| k.unit);
        Sample::from_reps(w, b, 2, size, unit, &[v]).unwrap()
    }

    #[test]
    fn rounds_merge_into_the_median_of_their_medians() {
        let r = |v: f64, lo: f64, hi: f64| {
            Sample::from_reps("latency", "hmpi", 2, 8, "us", &[lo, v, hi]).unwrap()
        };
        let merged = merge_rounds(vec![
            r(1.0, 0.9, 1.1),
            s("latency", "hmpi", 16, 2.0),
            r(3.0, 2.5, 3.5),
            r(2.0, 1.5, 2.5),
        ]);
        assert_eq!(merged.len(), 2);
        let m = &merged[0];
        assert_eq!((m.size, m.value, m.min(), m.max()), (8, 2.0, 0.9, 3.5));
        assert_eq!(merged[1], s("latency", "hmpi", 16, 2.0));
    }

    #[test]
    fn several_rounds_judge_the_targets_by_each_rounds_own_ratio() {
        let round = |h: f64, o: f64, m: f64| {
            vec![
                s("latency", "hmpi", 8, h),
                s("latency", "rsmpi-openmpi", 8, o),
                s("latency", "rsmpi-mpich", 8, m),
            ]
        };
        // Rounds 1 and 2 ran in one state each (0.5 both); in round 3 hmpi
        // ran in a slow stretch and Open MPI in a fast one (1.91). The
        // medians over all rounds (hmpi 0.20; Open MPI 0.105, with round 4)
        // compare the two stretches: 1.90.
        let rounds = [
            round(0.05, 0.10, 0.12),
            round(0.20, 0.40, 0.42),
            round(0.21, 0.11, 0.45),
            // A round without hmpi (its run failed) has no ratio.
            vec![s("latency", "rsmpi-openmpi", 8, 0.01)],
        ];
        let ks = parse_workloads("latency,msgrate").unwrap();
        let paired = paired_ratios(&rounds, ks[0], 2);
        assert_eq!(paired.len(), 1);
        let p = &paired[0];
        assert_eq!(
            (p.workload.as_str(), p.backend.as_str(), p.size, p.unit),
            ("latency-ratio", PAIRED, 8, "x")
        );
        assert_eq!(p.value, 0.5);
        assert!((p.max() - 0.21 / 0.11).abs() < 1e-12, "{p:?}");
        // Kernels without a target have no paired ratios.
        assert!(paired_ratios(&rounds, ks[1], 2).is_empty());
        let mut samples = merge_rounds(rounds.concat());
        samples.extend(paired);
        let t = render(
            &samples,
            &ks[..1],
            &["hmpi", "rsmpi-openmpi", "rsmpi-mpich"],
            2,
        );
        assert!(
            t.contains(
                "target latency 8: hmpi/best peer = 0.50x (median of the rounds' own ratios, \
                 0.50-1.91; of the medians: 1.90x against rsmpi-openmpi), target <= 0.6x: met"
            ),
            "{t}"
        );
        // The ratio rows stay out of the tables.
        assert!(!t.contains("latency-ratio"), "{t}");
    }

    #[test]
    fn rma_targets_take_each_rounds_best_peer() {
        let r = |w: &str, b: &str, size: usize, v: f64| {
            let unit = if w.ends_with("-bw") { "MB/s" } else { "us" };
            Sample::from_reps(w, b, 2, size, unit, &[v]).unwrap()
        };
        let round = |h: f64, o: f64, m: f64, hb: f64, ob: f64| {
            vec![
                r("put-latency", "hmpi", 8, h),
                r("put-latency", "rsmpi-openmpi", 8, o),
                r("put-latency", "rsmpi-mpich", 8, m),
                r("put-bw", "hmpi", 1 << 20, hb),
                r("put-bw", "rsmpi-openmpi", 1 << 20, ob),
                r("skew-origin", "hmpi", 0, 100.0),
                r("skew-origin", "hmpi", 256, 110.0),
                r("skew-origin", "rsmpi-mpich", 0, 100.0),
                r("skew-origin", "rsmpi-mpich", 256, 5000.0),
            ]
        };
        // Latency: best peer per round is the lower one (0.1 then 0.2).
        let rounds = [
            round(0.04, 0.1, 0.3, 30.0, 10.0),
            round(0.12, 0.4, 0.2, 20.0, 10.0),
        ];
        let paired = rma_paired_ratios(&rounds);
        let lat = paired
            .iter()
            .find(|s| s.workload == "put-latency-ratio")
            .unwrap();
        assert!((lat.min() - 0.4).abs() < 1e-12 && (lat.max() - 0.6).abs() < 1e-12);
        let bw = paired
            .iter()
            .find(|s| s.workload == "put-bw-ratio")
            .unwrap();
        assert_eq!((bw.min(), bw.max(), bw.value), (2.0, 3.0, 2.5));
        let mut samples = merge_rounds(rounds.concat());
        samples.extend(paired);
        let t = render_rma(&samples, &["hmpi", "rsmpi-openmpi", "rsmpi-mpich"], true);
        assert!(t.contains("put-latency 8: hmpi/best peer = 0.50x"), "{t}");
        assert!(t.contains("target <= 0.5x: met"), "{t}");
        assert!(t.contains("put-bw 1M: hmpi/best peer = 2.50x"), "{t}");
        assert!(t.contains("target >= 2x: met"), "{t}");
        assert!(t.contains("skew hmpi: origin 110.0 us at n = 256 vs 100.0 us without skew: 1.10 x, target <= 1.2 x: met"), "{t}");
        assert!(
            t.contains(
                "skew rsmpi-mpich: origin 5000.0 us at n = 256 vs 100.0 us without skew: 50.00 x\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn workload_and_peer_lists() {
        let ks = parse_workloads("latency,bw,latency").unwrap();
        assert_eq!(
            ks.iter().map(|k| k.name).collect::<Vec<_>>(),
            ["latency", "bw"]
        );
        assert_eq!(parse_workloads("p2p").unwrap().len(), p2p::KERNELS.len());
        for bad in ["", "alloc", "nosuch", "latency,nosuch"] {
            assert!(
                matches!(parse_workloads(bad), Err(BenchError::Usage(_))),
                "{bad}"
            );
        }
        assert_eq!(parse_peers("mpich").unwrap(), vec![MPIS[1]]);
        assert!(parse_peers("none").unwrap().is_empty());
        assert!(parse_peers("lam").is_err());
    }

    #[test]
    fn peer_programs_live_in_their_own_target_dirs() {
        let p = peer_binary(Path::new("/x/peers"), &MPIS[0]);
        assert_eq!(p, Path::new("/x/peers/openmpi/release/hmpi-bench"));
    }

    #[test]
    fn tables_show_ratios_and_targets() {
        let samples = [
            s("latency", "hmpi", 8, 0.06),
            s("latency", "rsmpi-openmpi", 8, 0.15),
            s("latency", "rsmpi-mpich", 8, 0.12),
            s("bw", "hmpi", 1 << 20, 20000.0),
            s("bw", "rsmpi-openmpi", 1 << 20, 12000.0),
            s("bw", "rsmpi-mpich", 1 << 20, 13000.0),
        ];
        let ks = parse_workloads("latency,bw").unwrap();
        let t = render(&samples, &ks, &["hmpi", "rsmpi-openmpi", "rsmpi-mpich"], 2);
        assert!(t.contains("hmpi/openmpi"), "{t}");
        assert!(t.contains("0.40x"), "{t}"); // 0.06 / 0.15
                                             // Latency: the best peer is the fastest (MPICH): 0.06/0.12 = 0.5 <= 0.6.
        assert!(
            t.contains(
                "target latency 8: hmpi/best peer (rsmpi-mpich) = 0.50x, target <= 0.6x: met"
            ),
            "{t}"
        );
        // Bandwidth: the best peer is the fastest (MPICH): 20000/13000 < 2.5.
        assert!(
            t.contains(
                "target bw 1M: hmpi/best peer (rsmpi-mpich) = 1.54x, target >= 2.5x: missed"
            ),
            "{t}"
        );
    }
}
