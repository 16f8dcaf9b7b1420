//! `hmpi-bench msgrate-mt`: the 8-byte message rate of `N` threads per
//! rank in 2 ranks, against `N` single-threaded ranks per side.
//!
//! Each sending thread (rank 0) and its partner (rank 1) run OSU's
//! message-rate loop: the sender starts a window of 64 nonblocking 8-byte
//! sends and waits for them, the receiver posts 64 receives and waits,
//! then sends a one-byte acknowledgement; repeated `iters` times. A
//! request that finished as it started is done with once its status is
//! checked, the others of the window are waited for with one wait all (as
//! the peers' `MPI_Waitall`, and as libhmpi's `MPI_Isend` and `MPI_Irecv`
//! return a finished request). A
//! repetition's rate is every pair's messages over the longest pair's
//! time. The backends, all hmpi, in the same run:
//!
//! * `one-vci`: the `N` pairs on one duplicate of the world, one VCI per
//!   rank (`HMPI_VCIS=1`): one stream, every thread on its lock;
//! * `hints`: one duplicate with `mpi_assert_no_any_source`,
//!   `mpi_assert_no_any_tag` and the tag-bit hints (thread index in the
//!   tag), `HMPI_VCIS` the next power of two ≥ `N`, so that each pair gets
//!   a VCI of its own;
//! * `overtaking`: one duplicate with `mpi_assert_allow_overtaking`
//!   alone, a tag per pair, `HMPI_VCIS` as for `hints`: each sending
//!   thread on its own VCI, each receive posted on every VCI (until it
//!   finds its message on its own thread's VCI, the first it looks at);
//!   what the hint costs against `hints`, which names each pair's VCI;
//! * `streams`: each pair on a stream communicator of its own
//!   (`HMPI_VCIS=N+1`);
//! * `endpoints`: one endpoints communicator of `N` endpoints per rank
//!   (`HMPI_VCIS=N+1`), thread `i` of rank 0 (endpoint rank `i`) paired
//!   with thread `i` of rank 1 (endpoint rank `N + i`);
//! * `everywhere`: `2N` single-threaded ranks, rank `i` sending to
//!   `N + i` (MPI everywhere).
//!
//! `--threads LIST` chooses `N` (default `1,2`; at most 7, the streams'
//! VCIs). `--peers openmpi,mpich` adds the MPI peers at
//! `MPI_THREAD_MULTIPLE` (`peers/msgrate_mt.c`, built with each MPI's
//! `mpicc` and run under its launcher: the same loop, a communicator per
//! thread pair). The targets: streams and endpoints ≥ 0.9× everywhere and
//! ≥ 3× the best peer at the same `N`.

use crate::report::{self, Sample};
use crate::{BenchError, Options, Outcome, Progress, Workload};
use hmpi::hmpi_core::endpoints::Endpoint;
use hmpi::hmpi_core::hints::{CommHints, TagBits};
use hmpi::hmpi_core::launch::{allowed_cpus, Bind, Launcher};
use hmpi::hmpi_core::raw;
use hmpi::hmpi_core::stream::StreamComm;
use hmpi::hmpi_core::traits::Communicator;
use hmpi::hmpi_core::SimpleCommunicator;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The `msgrate-mt` workload.
pub const WORKLOAD: Workload = Workload {
    name: "msgrate-mt",
    about:
        "8-byte message rate, N threads per rank (one VCI, hints, overtaking, streams, endpoints) \
         against N ranks per side",
    run,
    worker: Some((WORKER, worker)),
};

const WORKER: &str = "msgrate-mt";
const LINE_TAG: &str = "msgrate-mt-sample";
const UNIT: &str = "Mmsg/s";
const SIZE: usize = 8;
/// Messages in flight per iteration (OSU's window).
const WINDOW: usize = 64;
/// The backends, in table order.
const BACKENDS: [&str; 6] = [
    "one-vci",
    "hints",
    "overtaking",
    "streams",
    "endpoints",
    "everywhere",
];
/// The backends the targets are for.
const TARGETED: [&str; 2] = ["streams", "endpoints"];
/// The target: streams (endpoints) over everywhere.
const TARGET: f64 = 0.9;
/// The target: streams (endpoints) over the best MPI peer.
const PEER_TARGET: f64 = 3.0;
/// The MPI peers' program.
const PEER_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/msgrate_mt.c");
/// The most threads per rank (streams and endpoints need `N + 1` VCIs, at
/// most 8).
const MAX_THREADS: usize = 7;

/// `N` from `--threads` (`1,2` when absent).
fn thread_counts(opts: &Options) -> Result<Vec<usize>, BenchError> {
    let Some(list) = &opts.threads else {
        return Ok(vec![1, 2]);
    };
    list.split(',')
        .map(|s| match s.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
            _ => Err(BenchError::Usage(format!(
                "--threads: '{s}' is not a thread count from 1 to {MAX_THREADS}"
            ))),
        })
        .collect()
}

fn run(opts: &Options, progress: &Progress) -> Result<Outcome, BenchError> {
    let counts = thread_counts(opts)?;
    let reps = opts.reps.unwrap_or(if opts.quick { 3 } else { 5 });
    let iters = if opts.quick { 200 } else { 5000 };
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    let peers = build_peers(opts, progress, &mut failures)?;
    for &n in &counts {
        for (label, cmd) in &peers {
            progress.line(format_args!("msgrate-mt: {label}, {n} thread(s) per side"));
            let r = run_peer(cmd, n, iters, reps).and_then(|out| rates(&[out], n, iters, reps));
            match r {
                Ok(values) => samples.extend(Sample::from_reps(
                    "msgrate-mt",
                    label,
                    n as u32,
                    SIZE,
                    UNIT,
                    &values,
                )),
                Err(e) => {
                    progress.line(format_args!("FAILED: {label}, {n}: {e}"));
                    failures.push(format!("{label} with {n} thread(s): {e}"));
                }
            }
        }
        for b in BACKENDS {
            progress.line(format_args!("msgrate-mt: {b}, {n} thread(s) per side"));
            match measure(b, n, iters, reps) {
                Ok(values) => {
                    if let Some(s) =
                        Sample::from_reps("msgrate-mt", b, n as u32, SIZE, UNIT, &values)
                    {
                        samples.push(s);
                    }
                }
                Err(e) => {
                    progress.line(format_args!("FAILED: {b}, {n}: {e}"));
                    failures.push(format!("{b} with {n} thread(s): {e}"));
                }
            }
        }
    }
    let mut text = String::from("msgrate-mt (8-byte messages, window 64):\n");
    let mut columns: Vec<&str> = BACKENDS.to_vec();
    columns.extend(peers.iter().map(|(l, _)| *l));
    let mut ratios = vec![
        ("streams", "everywhere"),
        ("endpoints", "everywhere"),
        ("hints", "everywhere"),
        ("overtaking", "hints"),
        ("streams", "one-vci"),
    ];
    ratios.extend(peers.iter().map(|(l, _)| ("streams", *l)));
    ratios.extend(peers.iter().map(|(l, _)| ("endpoints", *l)));
    text += &report::render_table(&samples, "msgrate-mt", &columns, &ratios);
    text += "targets:\n";
    for &n in &counts {
        let get = |b: &str| {
            samples
                .iter()
                .find(|s| s.backend == b && s.threads == n as u32)
                .map(|s| s.value)
        };
        let best = peers
            .iter()
            .filter_map(|(l, _)| get(l))
            .fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))));
        for t in TARGETED {
            if let (Some(s), Some(e)) = (get(t), get("everywhere")) {
                let r = s / e;
                let _ = writeln!(
                    text,
                    "  N={n}: {t} / everywhere = {r:.2}x (target >= {TARGET}x): {}",
                    if r >= TARGET { "met" } else { "NOT met" }
                );
            }
            if let (Some(s), Some(p)) = (get(t), best) {
                let r = s / p;
                let _ = writeln!(
                    text,
                    "  N={n}: {t} / best MPI peer = {r:.2}x (target >= {PEER_TARGET}x): {}",
                    if r >= PEER_TARGET { "met" } else { "NOT met" }
                );
            }
        }
    }
    Ok(Outcome {
        samples,
        text,
        failures,
    })
}

/// Runs one backend with `n` threads (or rank pairs) and returns the rate
/// of each repetition (millions of messages per second).
fn measure(backend: &str, n: usize, iters: usize, reps: usize) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let (ranks, vcis) = match backend {
        "one-vci" => (2, 1),
        "hints" | "overtaking" => (2, n.next_power_of_two()),
        "streams" | "endpoints" => (2, n + 1),
        _ => (2 * n, 1),
    };
    // Threads of one rank must not share a core: bound only with one
    // thread per rank, for every backend alike.
    let bind = if n == 1 && allowed_cpus().len() >= 2 {
        Bind::Core
    } else {
        Bind::None
    };
    let report = Launcher::new(exe, ranks as u32)
        .bind(bind)
        .env("HMPI_VCIS", vcis.to_string())
        .capture_output(true)
        .timeout(Duration::from_secs(300))
        .args([
            "--worker".to_string(),
            WORKER.into(),
            backend.into(),
            n.to_string(),
            iters.to_string(),
            reps.to_string(),
        ])
        .run()
        .map_err(|e| format!("launching {ranks} ranks failed: {e}"))?;
    if !report.success() {
        let err: String = report
            .ranks
            .iter()
            .map(|r| String::from_utf8_lossy(&r.stderr).into_owned())
            .collect();
        return Err(format!("the job failed: {err}"));
    }
    let outs: Vec<String> = report
        .ranks
        .iter()
        .map(|r| String::from_utf8_lossy(&r.stdout).into_owned())
        .collect();
    rates(&outs, n, iters, reps)
}

/// The rate of each repetition from the ranks' outputs: lines
/// `msgrate-mt-sample REP MESSAGES SECONDS`, one per sending pair; every
/// pair's messages over the longest pair's time.
fn rates(outs: &[String], n: usize, iters: usize, reps: usize) -> Result<Vec<f64>, String> {
    let mut msgs = vec![0u64; reps];
    let mut secs = vec![0f64; reps];
    for out in outs {
        for line in out.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if let [LINE_TAG, rep, m, s] = w[..] {
                let (Ok(rep), Ok(m), Ok(s)) =
                    (rep.parse::<usize>(), m.parse::<u64>(), s.parse::<f64>())
                else {
                    return Err(format!("bad result line '{line}'"));
                };
                if rep < reps {
                    msgs[rep] += m;
                    secs[rep] = secs[rep].max(s);
                }
            }
        }
    }
    let want = (n * iters * WINDOW) as u64;
    if msgs.iter().any(|&m| m != want) || secs.iter().any(|&s| s <= 0.0) {
        return Err(format!("incomplete results: {msgs:?} messages, {secs:?} s"));
    }
    Ok(msgs
        .iter()
        .zip(&secs)
        .map(|(&m, &s)| m as f64 / s / 1e6)
        .collect())
}

/// The peers `--peers` names (none by default), each built from
/// `peers/msgrate_mt.c` with its `mpicc`: its label and the launcher
/// command before the program's arguments. A peer that cannot be built is
/// a failure of the run, not of the others.
fn build_peers(
    opts: &Options,
    progress: &Progress,
    failures: &mut Vec<String>,
) -> Result<Vec<(&'static str, Vec<String>)>, BenchError> {
    let mut out = Vec::new();
    for mpi in crate::compare::parse_peers(opts.peers.as_deref().unwrap_or("none"))? {
        let label = match mpi.name {
            "openmpi" => "mt-openmpi",
            _ => "mt-mpich",
        };
        let exe = std::env::temp_dir().join(format!(
            "hmpi-bench-msgrate-mt-{}-{}",
            std::process::id(),
            mpi.name
        ));
        progress.line(format_args!(
            "msgrate-mt: building the {} peer",
            mpi.display
        ));
        let built = std::process::Command::new(mpi.mpicc)
            .args(["-O2", "-pthread", "-o"])
            .arg(&exe)
            .arg(PEER_SOURCE)
            .output();
        match built {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                failures.push(format!(
                    "{}: {} failed: {}",
                    mpi.display,
                    mpi.mpicc,
                    String::from_utf8_lossy(&o.stderr)
                ));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: cannot run {}: {e}", mpi.display, mpi.mpicc));
                continue;
            }
        }
        let mut cmd = vec!["timeout".to_string(), "300".into(), mpi.launcher.into()];
        cmd.extend(["-n", "2"].map(String::from));
        if mpi.name == "openmpi" {
            // Threads of a rank must not share a core; shared memory only.
            cmd.extend(
                [
                    "--bind-to",
                    "none",
                    "--oversubscribe",
                    "--mca",
                    "btl",
                    "self,vader",
                ]
                .map(String::from),
            );
            // SAFETY: getuid has no preconditions and cannot fail.
            if unsafe { libc::getuid() } == 0 {
                cmd.push("--allow-run-as-root".into());
            }
        } else {
            cmd.extend(["-bind-to", "none"].map(String::from));
        }
        cmd.push(exe.to_string_lossy().into_owned());
        out.push((label, cmd));
    }
    Ok(out)
}

/// Runs a peer's command with `n` threads per rank; its standard output.
fn run_peer(cmd: &[String], n: usize, iters: usize, reps: usize) -> Result<String, String> {
    let o = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .args([n.to_string(), iters.to_string(), reps.to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", cmd[2]))?;
    if !o.status.success() {
        return Err(format!(
            "{} ended with {}: {}",
            cmd[2],
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// One pair's loop: `send` says which side this is. Returns the seconds
/// the timed iterations took.
fn pair(c: &SimpleCommunicator, peer: i32, tag: i32, send: bool, iters: usize) -> f64 {
    let out = [7u8; SIZE];
    let mut bufs = vec![[0u8; SIZE]; WINDOW];
    let mut ack = [0u8; 1];
    let mut one = |bufs: &mut Vec<[u8; SIZE]>| {
        // The requests of the window that did not finish as they started.
        let mut rs: Vec<raw::Request<'_>> = Vec::with_capacity(WINDOW);
        if send {
            for _ in 0..WINDOW {
                let to = raw::send_target(c, peer, tag).expect("isend");
                // SAFETY: every request is waited for before `out` goes;
                // `place` gives room in `rs` for one (see `keep`).
                let r = unsafe { raw::isend_or_in(to, || place(&mut rs), &out) };
                keep(&mut rs, r);
            }
            raw::wait_all(rs).expect("send");
            let mut st = raw::Status::empty();
            raw::recv_with_status(c, &mut ack, peer, tag, &mut st).expect("ack");
        } else {
            for b in bufs.iter_mut() {
                let from = raw::recv_target(c, peer, tag).expect("irecv");
                // SAFETY: every request is waited for before `bufs` is
                // touched; `place` gives room in `rs` for one.
                let r = unsafe {
                    raw::irecv_raw_or_in(from, || place(&mut rs), b.as_mut_ptr(), b.len())
                };
                keep(&mut rs, r);
            }
            raw::wait_all(rs).expect("recv");
            raw::send(c, &[1], peer, tag).expect("ack");
        }
    };
    // Warm-up: request slots, fast boxes, caches.
    for _ in 0..iters / 10 + 1 {
        one(&mut bufs);
    }
    let t = Instant::now();
    for _ in 0..iters {
        one(&mut bufs);
    }
    t.elapsed().as_secs_f64()
}

/// Room for one more request at the end of `rs` (within its capacity, a
/// window's).
#[inline(always)]
fn place<'a>(rs: &mut Vec<raw::Request<'a>>) -> Option<*mut raw::Request<'a>> {
    rs.spare_capacity_mut().first_mut().map(|m| m.as_mut_ptr())
}

/// Takes in a message's start, as libhmpi's `MPI_Isend` and `MPI_Irecv`
/// do: one that finished at once is done with once its status is checked
/// (no request); one that waits was written by the engine at the end of
/// `rs` ([`place`]), which now counts it, for the window's wait all
/// (`MPI_Waitall` in the peers). Nothing is built to be moved: a request
/// or status returned and copied right after a send's or receive's stores
/// waits for them (see docs/performance.md, "Store forwarding").
#[inline(always)]
fn keep(rs: &mut Vec<raw::Request<'_>>, r: raw::EngineResult<raw::Start>) {
    match r.expect("start a message") {
        raw::Start::Finished(st) => {
            st.into_result().expect("a message");
        }
        raw::Start::Written => {
            assert!(rs.len() < rs.capacity(), "a request past the window");
            // SAFETY: the engine wrote a request at `rs`'s end ([`place`],
            // within its capacity), which is initialised now.
            unsafe { rs.set_len(rs.len() + 1) };
        }
        raw::Start::NoPlace => panic!("no room for a request in the window"),
    }
}

/// What a pair's thread communicates on.
enum PairComm {
    /// A communicator shared with the other threads.
    Plain(SimpleCommunicator),
    /// The thread's own stream communicator.
    Stream(StreamComm),
    /// The thread's own endpoint.
    Endpoint(Endpoint),
}

impl PairComm {
    fn comm(&self) -> &SimpleCommunicator {
        match self {
            PairComm::Plain(c) => c,
            PairComm::Stream(c) => c,
            PairComm::Endpoint(e) => e,
        }
    }
}

fn worker(args: &[String]) -> Result<(), BenchError> {
    let bad = || BenchError::Usage("msgrate-mt worker: BACKEND N ITERS REPS".into());
    let [backend, n, iters, reps] = args else {
        return Err(bad());
    };
    let (n, iters, reps): (usize, usize, usize) = (
        n.parse().map_err(|_| bad())?,
        iters.parse().map_err(|_| bad())?,
        reps.parse().map_err(|_| bad())?,
    );
    let fail = |e: hmpi::hmpi_core::Error| BenchError::Failed(e.to_string());
    let u = hmpi::hmpi_core::init().map_err(fail)?;
    let world = u.world();
    let me = world.rank();
    if backend == "everywhere" {
        let half = world.size() / 2;
        let c = world.duplicate().map_err(fail)?;
        let (peer, send) = if me < half {
            (me + half, true)
        } else {
            (me - half, false)
        };
        for rep in 0..reps {
            world.barrier().map_err(fail)?;
            let s = pair(&c, peer, 0, send, iters);
            if send {
                println!("{LINE_TAG} {rep} {} {s:.9}", iters * WINDOW);
            }
        }
        return Ok(());
    }
    let send = me == 0;
    // The partner of each thread: the other rank, or on an endpoints
    // communicator the endpoint of the same index there.
    let n_i = n as i32;
    let peers: Vec<i32> = if backend == "endpoints" {
        (0..n_i).map(|i| if send { n_i + i } else { i }).collect()
    } else {
        vec![1 - me; n]
    };
    // One communicator per thread (clones share one for one-vci and
    // hints), and the tag of each thread.
    let bits = (n.next_power_of_two().trailing_zeros() as u8).max(1);
    let (mut comms, tags): (Vec<PairComm>, Vec<i32>) = match backend.as_str() {
        "one-vci" => {
            let c = world.duplicate().map_err(fail)?;
            (
                (0..n).map(|_| PairComm::Plain(c.clone())).collect(),
                (0..n as i32).collect(),
            )
        }
        "hints" => {
            let h = CommHints {
                no_any_source: true,
                no_any_tag: true,
                tag_bits_send: Some(TagBits { lo: 0, len: bits }),
                tag_bits_recv: Some(TagBits {
                    lo: bits,
                    len: bits,
                }),
                ..CommHints::default()
            };
            let c = world.dup_with_hints(&h).map_err(fail)?;
            (
                (0..n).map(|_| PairComm::Plain(c.clone())).collect(),
                (0..n as i32).map(|t| t | t << bits).collect(),
            )
        }
        "overtaking" => {
            let h = CommHints {
                allow_overtaking: true,
                ..CommHints::default()
            };
            let c = world.dup_with_hints(&h).map_err(fail)?;
            (
                (0..n).map(|_| PairComm::Plain(c.clone())).collect(),
                (0..n as i32).collect(),
            )
        }
        "streams" => {
            let mut v = Vec::new();
            for _ in 0..n {
                // The stream stays reserved while its communicator lives.
                let s = u.stream().map_err(fail)?;
                v.push(PairComm::Stream(s.comm(&world).map_err(fail)?));
            }
            (v, vec![0; n])
        }
        "endpoints" => {
            let eps = world.create_endpoints(n).map_err(fail)?;
            (
                eps.into_iter().map(PairComm::Endpoint).collect(),
                vec![0; n],
            )
        }
        _ => return Err(bad()),
    };
    for rep in 0..reps {
        world.barrier().map_err(fail)?;
        // The first pair runs on the main thread (with one thread per
        // rank this is a single-threaded program, as `everywhere`); each
        // other thread takes its communicator (a stream communicator is
        // or an endpoint is `Send`, not `Sync`) and gives it back.
        let mut times = Vec::new();
        std::thread::scope(|sc| {
            let hs: Vec<_> = comms
                .drain(1..)
                .zip(tags[1..].iter().zip(&peers[1..]))
                .map(|(c, (&tag, &peer))| {
                    sc.spawn(move || {
                        let t = pair(c.comm(), peer, tag, send, iters);
                        (c, t)
                    })
                })
                .collect();
            times.push(pair(comms[0].comm(), peers[0], tags[0], send, iters));
            for h in hs {
                let (c, t) = h.join().expect("a pair's thread");
                comms.push(c);
                times.push(t);
            }
        });
        if send {
            for s in times {
                println!("{LINE_TAG} {rep} {} {s:.9}", iters * WINDOW);
            }
        }
    }
    Ok(())
}
