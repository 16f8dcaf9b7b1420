//! The job launcher: starts the ranks of a job on this node, watches them,
//! and tears the job down when a rank fails, time runs out, or the launcher
//! is interrupted. The `hmpirun` binary is a thin command line over
//! [`Launcher`]; tests and benchmarks use it directly.
//!
//! A run goes like this:
//!
//! 1. the node segment is created ([`SegmentFile::create`]) under a fresh job
//!    id `<launcher pid>-<random hex>`, as a file without a name: ranks
//!    inherit its descriptor and open it as `/proc/self/fd/N`
//!    (`HMPI_SHM_NAME`), so nothing is left in `/dev/shm` on any path,
//!    `kill -9` of the launcher included;
//! 2. a guard process is forked (`guard`): it leads the job's process
//!    group and kills the group when the launcher closes its pipe or dies;
//! 3. every rank is spawned into the guard's process group, optionally
//!    bound to the CPUs its place on the node's topology gives it
//!    ([`Launcher::bind`], [`Launcher::map_by`], [`topo`]), with
//!    `PR_SET_PDEATHSIG` so that it dies with the launcher even before it
//!    joins the group, and with the job's variables ([`crate::env`]; with
//!    [`topo::DOMAIN_VAR`] when the bound ranks span several cache or
//!    memory domains);
//! 4. the launcher sleeps in `poll(2)` on a self-pipe that `SIGCHLD`,
//!    `SIGINT`, `SIGTERM` and `SIGHUP` write to, and reaps each rank with
//!    `waitpid(pid, WNOHANG)`, so that concurrent jobs in one process never
//!    take each other's children;
//! 5. on the first failure (a non-zero exit, a death by signal, or an exit
//!    with status 0 of a rank that initialised the runtime and did not
//!    finalize it: its peers would wait for it forever), on the timeout, or
//!    on a signal (which is forwarded), the job's group gets `SIGTERM` (or
//!    the forwarded signal), then `SIGKILL` after one second;
//! 6. once every rank is reaped, the guard kills what is left of the group
//!    (descendants that did not exit with their rank), the output threads
//!    are joined and the segment's descriptor is closed.
//!
//! No rank outlives [`Launcher::run`] on any path, including a failed spawn
//! of rank k after ranks 0..k started.
//!
//! Output: by default the ranks share the launcher's stdout and stderr. With
//! [`Launcher::tag_output`] each line is prefixed with `[rank] `; with
//! [`Launcher::capture_output`] the streams are collected into the
//! [`RankReport`]s instead (and the launcher prints nothing itself). Rank 0
//! inherits the launcher's stdin unless it is a terminal (a rank is not in
//! the terminal's foreground group, so reading it would stop the rank); the
//! other ranks read from `/dev/null`.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use hmpi_core::launch::{Launcher, RankStatus};
//!
//! let report = Launcher::new("/bin/sh", 3)
//!     .args(["-c", "[ $HMPI_RANK != 1 ] || exit 3; sleep 30"])
//!     .timeout(Duration::from_secs(20))
//!     .capture_output(true)
//!     .run()
//!     .unwrap();
//! assert_eq!(report.first_failure, Some(1));
//! assert_eq!(report.ranks[1].status, RankStatus::Exited(3));
//! assert_eq!(report.ranks[0].status, RankStatus::Killed);
//! assert_eq!(report.exit_code(), 3);
//! ```

mod guard;
mod output;
pub mod rank_tests;
mod signals;
pub mod topo;

pub use signals::signal_name;

use crate::env;
use guard::Guard;
use nix::sys::signal::Signal;
use output::{Pumps, Sink, Stream};
use shmheap::segment::{RankState, SegmentFile, SegmentSpec, MAX_RANKS};
use signals::Registration;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long ranks get between `SIGTERM` (or a forwarded signal) and `SIGKILL`.
pub const KILL_GRACE: Duration = Duration::from_secs(1);
/// How long the launcher waits for the ranks' output after the job.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);
/// How often the launcher looks for ranks waiting in init for a rank that
/// exited before initializing (ranks entering init send no signal).
const INIT_WATCH: Duration = Duration::from_millis(50);
/// The exit code of a job that ran out of time (as `timeout(1)`).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// How wide each rank's CPU binding is (`mpirun --bind-to`): the object of
/// the node's topology that holds the place [`Launcher::map_by`] gives the
/// rank, or, when narrower than that place, the next such object in it.
/// Only the CPUs the launcher may use count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// One hardware thread.
    HwThread,
    /// A core (all its hardware threads): with the default mapping, rank
    /// `i` runs on the `i`-th core (modulo their number).
    Core,
    /// The CPUs that share an L3 cache.
    L3Cache,
    /// The CPUs of a NUMA node.
    Numa,
    /// The CPUs of a socket.
    Socket,
    /// Ranks may run on any CPU the launcher may use.
    None,
}

impl Bind {
    /// The topology level of the binding (`None` for [`Bind::None`]).
    pub fn level(self) -> Option<topo::Level> {
        use topo::Level;
        match self {
            Bind::HwThread => Some(Level::HwThread),
            Bind::Core => Some(Level::Core),
            Bind::L3Cache => Some(Level::L3Cache),
            Bind::Numa => Some(Level::Numa),
            Bind::Socket => Some(Level::Socket),
            Bind::None => None,
        }
    }

    /// The binding to objects of `level`.
    pub fn to(level: topo::Level) -> Bind {
        use topo::Level;
        match level {
            Level::HwThread => Bind::HwThread,
            Level::Core => Bind::Core,
            Level::L3Cache => Bind::L3Cache,
            Level::Numa => Bind::Numa,
            Level::Socket => Bind::Socket,
        }
    }

    /// The binding named as on `mpirun`'s command line (`none`, or a
    /// [`topo::Level`]'s name).
    pub fn parse(s: &str) -> Option<Bind> {
        match s {
            "none" => Some(Bind::None),
            _ => topo::Level::parse(s).map(Bind::to),
        }
    }
}

/// A job to launch: the program, its arguments and the number of ranks.
#[derive(Debug, Clone)]
#[must_use]
pub struct Launcher {
    program: PathBuf,
    ranks: u32,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    bind: Bind,
    map: Option<topo::Level>,
    pe: u32,
    report_bindings: bool,
    oversubscribe: bool,
    topology: Option<topo::Topology>,
    tag_output: bool,
    capture_output: bool,
    timeout: Option<Duration>,
    spec: Option<SegmentSpec>,
    fail_spawn_at: Option<u32>,
}

impl Launcher {
    /// A job of `ranks` copies of `program` (looked up in `PATH` unless it
    /// contains a `/`), without arguments, binding, tagging, capture or
    /// time limit.
    pub fn new(program: impl Into<PathBuf>, ranks: u32) -> Self {
        Launcher {
            program: program.into(),
            ranks,
            args: Vec::new(),
            env: Vec::new(),
            bind: Bind::None,
            map: None,
            pe: 1,
            report_bindings: false,
            oversubscribe: false,
            topology: None,
            tag_output: false,
            capture_output: false,
            timeout: None,
            spec: None,
            fail_spawn_at: None,
        }
    }

    /// Appends arguments for the program.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Appends one argument for the program.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable for every rank. The job's own variables
    /// ([`crate::env`]) cannot be overridden. The segment's variables
    /// (`HMPI_HEAP_PER_RANK`, `HMPI_SHM_BASE`, `HMPI_SHM_DIR`) set here also
    /// shape the segment the launcher creates, unless [`Launcher::spec`]
    /// overrides it.
    pub fn env(mut self, key: impl Into<OsString>, val: impl Into<OsString>) -> Self {
        self.env.push((key.into(), val.into()));
        self
    }

    /// Sets the CPU binding (default [`Bind::None`]).
    pub fn bind(mut self, bind: Bind) -> Self {
        self.bind = bind;
        self
    }

    /// Places rank `i` in the `i`-th object of `level` (modulo their
    /// number), as `mpirun --map-by` (default: by core). Matters only when
    /// the ranks are bound.
    pub fn map_by(mut self, level: topo::Level) -> Self {
        self.map = Some(level);
        self
    }

    /// Binds each rank to `n` hardware threads or cores (`--map-by X:PE=n`;
    /// default 1). More than 1 needs [`Bind::HwThread`] or [`Bind::Core`].
    pub fn pe(mut self, n: u32) -> Self {
        self.pe = n;
        self
    }

    /// Prints each rank's binding on standard error before the ranks
    /// start, one line per rank as `mpirun --report-bindings` does (not
    /// when capturing output).
    pub fn report_bindings(mut self, on: bool) -> Self {
        self.report_bindings = on;
        self
    }

    /// Allows more bound ranks than CPUs without a word (by default the
    /// launcher says once on standard error that the ranks share CPUs).
    pub fn oversubscribe(mut self, quiet: bool) -> Self {
        self.oversubscribe = quiet;
        self
    }

    /// Places the ranks on this topology instead of the machine's
    /// ([`topo::Topology::detect`]); its CPUs must be real ones for the
    /// binding to take effect.
    pub fn topology(mut self, topology: topo::Topology) -> Self {
        self.topology = Some(topology);
        self
    }

    /// Where the ranks go: each rank's CPUs, and their cache or memory
    /// domains. Reads the node's topology unless the ranks are not bound.
    pub fn placement(&self) -> Result<topo::Mapping, LaunchError> {
        self.plan().map(|(_, m)| m)
    }

    /// The topology (if the ranks are bound) and the mapping.
    fn plan(&self) -> Result<(Option<topo::Topology>, topo::Mapping), LaunchError> {
        let bad = |e: topo::TopoError| LaunchError::InvalidArgument(e.0);
        let Some(bind) = self.bind.level() else {
            if self.pe != 1 {
                return Err(LaunchError::InvalidArgument(format!(
                    "PE={} needs the ranks bound (to cores or hardware threads)",
                    self.pe
                )));
            }
            let cpus = vec![None; self.ranks as usize];
            let m = topo::Mapping {
                cpus,
                slots: 0,
                oversubscribed: false,
                domains: None,
            };
            return Ok((None, m));
        };
        let topology = match &self.topology {
            Some(t) => t.clone(),
            None => topo::Topology::detect().map_err(bad)?,
        };
        let map = self.map.unwrap_or(topo::Level::Core);
        let m = topology
            .map(&allowed_cpus(), self.ranks, map, Some(bind), self.pe)
            .map_err(bad)?;
        Ok((Some(topology), m))
    }

    /// Prefixes every output line with `[rank] ` (ignored when capturing).
    pub fn tag_output(mut self, on: bool) -> Self {
        self.tag_output = on;
        self
    }

    /// Ends the job after `limit` (exit code 124). Zero means no limit.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = (!limit.is_zero()).then_some(limit);
        self
    }

    /// Collects each rank's stdout and stderr into its [`RankReport`]
    /// instead of forwarding them; the launcher's own messages are not
    /// printed either.
    pub fn capture_output(mut self, on: bool) -> Self {
        self.capture_output = on;
        self
    }

    /// Overrides the segment's spec (default: [`SegmentSpec::from_vars`] over
    /// this launcher's [`Launcher::env`] and the process environment).
    /// Its `ranks` is replaced by the job's.
    pub fn spec(mut self, spec: SegmentSpec) -> Self {
        self.spec = Some(spec);
        self
    }

    /// For tests: spawning rank `rank` fails, after a short pause that lets
    /// the ranks before it start.
    #[doc(hidden)]
    pub fn inject_spawn_failure(mut self, rank: u32) -> Self {
        self.fail_spawn_at = Some(rank);
        self
    }

    /// Runs the job to its end and reports how each rank ended.
    ///
    /// Errors are the launcher's own (bad arguments, the segment, spawning);
    /// a failing rank is reported in the [`JobReport`]. The calling thread
    /// must stay alive until `run` returns (it does: `run` blocks), since
    /// ranks are killed when the thread that spawned them exits.
    pub fn run(&self) -> Result<JobReport, LaunchError> {
        if self.ranks == 0 || self.ranks > MAX_RANKS {
            return Err(LaunchError::InvalidArgument(format!(
                "the number of ranks must be between 1 and {MAX_RANKS}, not {}",
                self.ranks
            )));
        }
        if self.program.as_os_str().is_empty() {
            return Err(LaunchError::InvalidArgument(
                "the program name is empty".into(),
            ));
        }
        let mut spec = match &self.spec {
            Some(spec) => spec.clone(),
            None => SegmentSpec::from_vars(self.ranks, &|var: &str| {
                let set_here = self.env.iter().rev().find(|(k, _)| k == var);
                set_here
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var_os(var))
            })?,
        };
        spec.ranks = self.ranks;
        let (topology, placement) = self.plan()?;
        if !self.capture_output {
            if placement.oversubscribed && !self.oversubscribe {
                let unit = if self.bind == Bind::HwThread || self.map == Some(topo::Level::HwThread)
                {
                    "hardware threads"
                } else {
                    "cores"
                };
                output::write_stderr_line(&format!(
                    "hmpirun: {} ranks bound to {} {unit}: oversubscribed, ranks share CPUs \
                     (--oversubscribe silences this)\n",
                    self.ranks, placement.slots
                ));
            }
            if self.report_bindings {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "localhost".into());
                let me = std::process::id();
                let mut text = String::new();
                for (rank, set) in placement.cpus.iter().enumerate() {
                    let line = match &topology {
                        Some(t) => t.report_line(rank as u32, set.as_deref()),
                        None => topo::unbound_line(rank as u32),
                    };
                    text.push_str(&format!("[{host}:{me}] {line}\n"));
                }
                output::write_stderr_line(&text);
            }
        }
        let start = Instant::now();
        let job_id = new_job_id();
        // Declared first, dropped last: after every rank is reaped.
        let segment = SegmentFile::create(&spec, &job_id)?;
        let guard = Guard::start().map_err(|source| LaunchError::Io {
            op: "start the job's guard process",
            source,
        })?;
        let wake = Registration::new().map_err(|source| LaunchError::Io {
            op: "install the launcher's signal handlers",
            source,
        })?;
        let pumps = Pumps::new().map_err(|source| LaunchError::Io {
            op: "create a pipe",
            source,
        })?;
        let mut job = Job {
            procs: Vec::with_capacity(self.ranks as usize),
            pumps,
            guard,
            cause: None,
            quiet: self.capture_output,
        };
        for rank in 0..self.ranks {
            let cpus = placement.cpus[rank as usize].as_deref();
            let domain = placement.domains.as_ref().map(|d| d[rank as usize]);
            if let Err(e) = self.spawn(&mut job, rank, &job_id, &segment, cpus, domain) {
                job.abort();
                return Err(e);
            }
        }
        // A limit too far to represent is no limit.
        let deadline = self.timeout.and_then(|t| start.checked_add(t));
        job.monitor(&wake, &segment, deadline, self.timeout);
        job.kill_strays();
        let mut ranks: Vec<RankReport> = job
            .procs
            .iter()
            .enumerate()
            .map(|(rank, p)| RankReport {
                rank: rank as u32,
                status: p.status.clone().unwrap_or(RankStatus::Killed),
                stdout: Vec::new(),
                stderr: Vec::new(),
            })
            .collect();
        for (rank, stream, bytes) in job.pumps.finish(OUTPUT_GRACE) {
            let r = &mut ranks[rank as usize];
            match stream {
                Stream::Stdout => r.stdout = bytes,
                Stream::Stderr => r.stderr = bytes,
            }
        }
        let cause = job.cause;
        drop(job);
        drop(wake);
        let segment_path = segment.path().to_path_buf();
        drop(segment); // closes the launcher's descriptor
        Ok(JobReport {
            ranks,
            first_failure: match cause {
                Some(Cause::Failure(rank)) => Some(rank),
                _ => None,
            },
            timed_out: matches!(cause, Some(Cause::Timeout)),
            interrupted: match cause {
                Some(Cause::Interrupt(sig)) => Some(sig),
                _ => None,
            },
            job: job_id,
            segment: segment_path,
            elapsed: start.elapsed(),
        })
    }

    /// Starts rank `rank` and its output pumps.
    fn spawn(
        &self,
        job: &mut Job,
        rank: u32,
        job_id: &str,
        segment: &SegmentFile,
        cpus: Option<&[usize]>,
        domain: Option<u32>,
    ) -> Result<(), LaunchError> {
        let spawn_error = |source| LaunchError::Spawn {
            program: self.program.clone(),
            rank,
            source,
        };
        if self.fail_spawn_at == Some(rank) {
            std::thread::sleep(Duration::from_millis(200));
            return Err(spawn_error(io::Error::other("injected failure")));
        }
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let size = self.ranks.to_string();
        cmd.env(env::RANK, rank.to_string())
            .env(env::SIZE, &size)
            .env(env::LOCAL_RANK, rank.to_string())
            .env(env::LOCAL_SIZE, &size)
            .env(env::JOB, job_id)
            .env(env::SHM_NAME, segment.path());
        // The rank's cache or memory domain, for the collectives; never an
        // inherited one.
        match domain {
            Some(d) => cmd.env(topo::DOMAIN_VAR, d.to_string()),
            None => cmd.env_remove(topo::DOMAIN_VAR),
        };
        cmd.process_group(job.guard.pgid());
        let stdin_is_tty = nix::unistd::isatty(io::stdin()).unwrap_or(false);
        cmd.stdin(if rank == 0 && !stdin_is_tty {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        let piped = self.capture_output || self.tag_output;
        if piped {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let cpu_set = cpus.map(cpu_set_of);
        let launcher = nix::unistd::getpid();
        let segment_fd = segment.fd().as_raw_fd();
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe system calls (prctl, getppid,
        // fcntl, sched_setaffinity); it allocates nothing and touches no
        // lock.
        unsafe {
            cmd.pre_exec(move || in_child(launcher, segment_fd, cpu_set.as_ref()));
        }
        let mut child = cmd.spawn().map_err(spawn_error)?;
        job.procs.push(Proc {
            pid: child.id() as libc::pid_t,
            status: None,
        });
        // `child` is dropped without waiting: `Job` reaps it by pid.
        if piped {
            let sink = if self.capture_output {
                Sink::Capture
            } else {
                Sink::Tag
            };
            let streams = [
                (Stream::Stdout, child.stdout.take().map(OwnedFd::from)),
                (Stream::Stderr, child.stderr.take().map(OwnedFd::from)),
            ];
            for (stream, fd) in streams {
                if let Some(fd) = fd {
                    job.pumps
                        .spawn(rank, stream, fd, sink)
                        .map_err(|source| LaunchError::Io {
                            op: "start an output thread",
                            source,
                        })?;
                }
            }
        }
        Ok(())
    }
}

/// What runs in a rank between fork and exec.
fn in_child(
    launcher: nix::unistd::Pid,
    segment_fd: RawFd,
    cpus: Option<&nix::sched::CpuSet>,
) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    // The launcher may have died before the prctl: then nobody would kill
    // us. (A parent that died is replaced by a subreaper or init.)
    if nix::unistd::getppid() != launcher {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // The rank inherits the segment (it opens `/proc/self/fd/N`).
    // SAFETY: the launcher keeps the segment's descriptor open while it
    // spawns ranks, and this child is a copy of that state.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(segment_fd) };
    nix::fcntl::fcntl(
        fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )?;
    if let Some(set) = cpus {
        // Binding is a performance hint: failing to bind (a CPU taken away
        // by a cgroup change meanwhile) does not fail the rank.
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set);
    }
    Ok(())
}

fn cpu_set_of(cpus: &[usize]) -> nix::sched::CpuSet {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        // `cpu` is one of `allowed_cpus`, so it is below the set's size.
        let _ = set.set(cpu);
    }
    set
}

/// The CPUs this process may run on, in increasing order (empty if the
/// kernel cannot say).
pub fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..nix::sched::CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

/// A fresh job id: `<launcher pid>-<random hex>`.
fn new_job_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // RandomState is seeded from the OS once per thread and then stepped;
    // the counter and the clock make ids of one thread differ too.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    // Relaxed: only uniqueness matters.
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:08x}", std::process::id(), h.finish() as u32)
}

/// Why the job is being torn down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// This rank failed first.
    Failure(usize),
    Timeout,
    /// The launcher received this signal.
    Interrupt(i32),
}

/// One spawned rank.
struct Proc {
    pid: libc::pid_t,
    /// `None` while the rank has not been reaped.
    status: Option<RankStatus>,
}

/// The running job. Dropping it kills and reaps every rank still alive.
struct Job {
    procs: Vec<Proc>,
    pumps: Pumps,
    /// Leads the job's process group; kills it when released.
    guard: Guard,
    cause: Option<Cause>,
    /// Print no messages (output is captured).
    quiet: bool,
}

impl Job {
    fn live(&self) -> impl Iterator<Item = &Proc> {
        self.procs.iter().filter(|p| p.status.is_none())
    }

    /// A rank that exited with status 0 without ever starting the
    /// runtime (its state word never reached init), if any.
    fn exited_unstarted(&self, segment: &SegmentFile) -> Option<usize> {
        self.procs.iter().enumerate().position(|(i, p)| {
            p.status == Some(RankStatus::Exited(0))
                && matches!(
                    segment.rank_state(i as u32),
                    RankState::Unknown | RankState::Attached
                )
        })
    }

    /// A rank that exited without starting the runtime while a live peer
    /// waits in init (for every rank, the one that left included).
    fn left_before_init(&self, segment: &SegmentFile) -> Option<usize> {
        let i = self.exited_unstarted(segment)?;
        let waiting = self.procs.iter().enumerate().any(|(j, p)| {
            p.status.is_none() && segment.rank_state(j as u32) == RankState::Initializing
        });
        waiting.then_some(i)
    }

    /// Sends `sig` to the job's process group (every rank and its
    /// descendants) if a rank is not yet reaped.
    fn signal_live(&self, sig: Signal) {
        if self.live().next().is_some() {
            self.guard.signal(sig);
        }
    }

    /// Reaps every rank that has ended (all of them with `block`). Returns
    /// the ranks reaped.
    fn reap(&mut self, block: bool) -> Vec<usize> {
        let mut reaped = Vec::new();
        let tearing_down = self.cause.is_some();
        for (i, p) in self.procs.iter_mut().enumerate() {
            if p.status.is_some() {
                continue;
            }
            let mut status = 0;
            let flags = if block { 0 } else { libc::WNOHANG };
            let r = loop {
                // Raw libc: nix's WaitStatus cannot carry real-time
                // signals, which a rank may die of.
                // SAFETY: `status` is a valid out-pointer. Waiting for one
                // pid never takes another job's child.
                let r = unsafe { libc::waitpid(p.pid, &mut status, flags) };
                if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break r;
                }
            };
            let st = if r == 0 {
                continue; // still running
            } else if r < 0 {
                // ECHILD: someone else reaped it (SIGCHLD ignored, or a
                // waitpid(-1) elsewhere in the process).
                RankStatus::Lost
            } else if tearing_down {
                RankStatus::Killed
            } else if libc::WIFSIGNALED(status) {
                RankStatus::Signaled(libc::WTERMSIG(status))
            } else {
                RankStatus::Exited(libc::WEXITSTATUS(status))
            };
            p.status = Some(st);
            reaped.push(i);
        }
        reaped
    }

    fn say(&self, msg: fmt::Arguments<'_>) {
        if !self.quiet {
            output::write_stderr_line(&format!("hmpirun: {msg}\n"));
        }
    }

    /// Starts the teardown for `cause`: `sig` to the job's group.
    fn begin_teardown(&mut self, cause: Cause, sig: Signal) -> Instant {
        self.cause = Some(cause);
        self.signal_live(sig);
        Instant::now() + KILL_GRACE
    }

    /// Watches the job until every rank is reaped.
    fn monitor(
        &mut self,
        wake: &Registration,
        segment: &SegmentFile,
        deadline: Option<Instant>,
        limit: Option<Duration>,
    ) {
        let mut kill_at: Option<Instant> = None;
        loop {
            wake.drain();
            let reaped = self.reap(false);
            for &i in &reaped {
                // A rank that started the runtime and left without
                // finalizing leaves its peers waiting for it.
                let p = &mut self.procs[i];
                if p.status == Some(RankStatus::Exited(0))
                    && segment.rank_state(i as u32).leaves_peers_waiting()
                {
                    p.status = Some(RankStatus::NotFinalized);
                }
            }
            // A rank that exited without starting the runtime while a peer
            // waits for it in init (now, or later: looked at again below).
            let unstarted = self.left_before_init(segment);
            let now = Instant::now();
            if self.cause.is_none() {
                let failed = reaped
                    .into_iter()
                    .find(|&i| !matches!(self.procs[i].status, Some(RankStatus::Exited(0))))
                    .or_else(|| {
                        let i = unstarted?;
                        self.procs[i].status = Some(RankStatus::LeftBeforeInit);
                        Some(i)
                    });
                if let Some(i) = failed {
                    let status = self.procs[i].status.clone().expect("reaped");
                    self.say(format_args!("rank {i} {status}; terminating the job"));
                    kill_at = Some(self.begin_teardown(Cause::Failure(i), Signal::SIGTERM));
                }
            }
            if let Some(sig) = wake.take_signal() {
                if self.cause.is_none() {
                    let name = signal_name(sig).unwrap_or("a signal");
                    self.say(format_args!("received {name}; terminating the job"));
                    // Only SIGINT, SIGTERM and SIGHUP are recorded.
                    let fwd = Signal::try_from(sig).unwrap_or(Signal::SIGTERM);
                    kill_at = Some(self.begin_teardown(Cause::Interrupt(sig), fwd));
                } else {
                    // Asked again: stop waiting for the ranks.
                    kill_at = Some(now);
                }
            }
            if self.cause.is_none() && deadline.is_some_and(|d| now >= d) {
                let secs = limit.unwrap_or_default().as_secs_f64();
                self.say(format_args!("timeout after {secs} s; terminating the job"));
                kill_at = Some(self.begin_teardown(Cause::Timeout, Signal::SIGTERM));
            }
            if self.live().next().is_none() {
                return;
            }
            if kill_at.is_some_and(|k| now >= k) {
                self.signal_live(Signal::SIGKILL);
                self.reap(true);
                return;
            }
            let mut next = match (self.cause.is_none().then_some(deadline).flatten(), kill_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if self.cause.is_none() && self.exited_unstarted(segment).is_some() {
                // A peer may yet reach init and wait for the rank that
                // left: look again soon (no signal tells us).
                let soon = now + INIT_WATCH;
                next = Some(next.map_or(soon, |n| n.min(soon)));
            }
            if let Err(e) = wake.wait(next.map(|t| t.saturating_duration_since(Instant::now()))) {
                // poll on our own pipe cannot fail in practice; never spin.
                self.say(format_args!("cannot wait for the ranks: {e}"));
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Kills what is left of the job's process group after the ranks
    /// ended (descendants that did not exit with their rank): releases the
    /// guard and reaps it.
    fn kill_strays(&mut self) {
        self.guard.finish();
    }

    /// Kills and reaps every rank (a failed spawn, or a panic).
    fn abort(&mut self) {
        if self.live().next().is_some() {
            self.signal_live(Signal::SIGKILL);
            self.reap(true);
        }
        self.kill_strays();
        self.pumps.finish(Duration::ZERO);
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.abort();
    }
}

/// How one rank ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankStatus {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it (not one sent by the launcher).
    Signaled(i32),
    /// The launcher terminated it, because another rank failed, time ran
    /// out, or the launcher was interrupted.
    Killed,
    /// It exited with status 0 after initialising the runtime, without
    /// finalizing it (peers waiting for it would wait forever): a failure.
    NotFinalized,
    /// It exited with status 0 without starting the runtime while other
    /// ranks waited for it in init (they would wait forever): a failure.
    LeftBeforeInit,
    /// Its status was collected by someone else in the launcher's process
    /// (e.g. `SIGCHLD` set to ignore, or a `waitpid(-1)`), so it is unknown.
    Lost,
}

impl RankStatus {
    /// Whether the rank exited with status 0.
    pub fn success(&self) -> bool {
        *self == RankStatus::Exited(0)
    }

    /// The status as a shell reports it: the exit status, or 128 + signal.
    pub fn code(&self) -> i32 {
        match self {
            RankStatus::Exited(code) => *code,
            RankStatus::Signaled(sig) => 128 + sig,
            RankStatus::Killed => 128 + libc::SIGTERM,
            RankStatus::NotFinalized | RankStatus::LeftBeforeInit | RankStatus::Lost => 1,
        }
    }
}

impl fmt::Display for RankStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankStatus::Exited(code) => write!(f, "exited with status {code}"),
            RankStatus::Signaled(sig) => match signal_name(*sig) {
                Some(name) => write!(f, "was killed by signal {sig} ({name})"),
                None => write!(f, "was killed by signal {sig}"),
            },
            RankStatus::Killed => write!(f, "was terminated by the launcher"),
            RankStatus::NotFinalized => write!(f, "exited with status 0 without finalizing"),
            RankStatus::LeftBeforeInit => write!(
                f,
                "exited with status 0 before initializing, while other ranks wait for it in init"
            ),
            RankStatus::Lost => write!(f, "ended with an unknown status"),
        }
    }
}

/// What one rank did.
#[derive(Debug, Clone)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// How it ended.
    pub status: RankStatus,
    /// Its standard output (only with [`Launcher::capture_output`]).
    pub stdout: Vec<u8>,
    /// Its standard error (only with [`Launcher::capture_output`]).
    pub stderr: Vec<u8>,
}

/// How a job ended. At most one of `first_failure`, `timed_out` and
/// `interrupted` is set: the cause of the teardown.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Every rank, indexed by rank.
    pub ranks: Vec<RankReport>,
    /// The rank whose failure ended the job.
    pub first_failure: Option<usize>,
    /// The job ran out of time.
    pub timed_out: bool,
    /// The launcher received this signal and ended the job.
    pub interrupted: Option<i32>,
    /// The job id (`HMPI_JOB`).
    pub job: String,
    /// The path the ranks were given for the segment (`HMPI_SHM_NAME`):
    /// `/proc/self/fd/N`, the launcher's descriptor N, closed by now. The
    /// file never had a name.
    pub segment: PathBuf,
    /// From the start of the launch to the last rank reaped.
    pub elapsed: Duration,
}

impl JobReport {
    /// Whether every rank exited with status 0.
    pub fn success(&self) -> bool {
        self.first_failure.is_none()
            && !self.timed_out
            && self.interrupted.is_none()
            && self.ranks.iter().all(|r| r.status.success())
    }

    /// The launcher's exit code: 0 on success; the first failing rank's
    /// status (128 + signal if a signal killed it, 1 if it exited with
    /// status 0 without finalizing); 124 on timeout; 128 + signal if the
    /// launcher was interrupted.
    pub fn exit_code(&self) -> i32 {
        if let Some(sig) = self.interrupted {
            128 + sig
        } else if self.timed_out {
            TIMEOUT_EXIT_CODE
        } else if let Some(rank) = self.first_failure {
            self.ranks[rank].status.code()
        } else if let Some(r) = self.ranks.iter().find(|r| !r.status.success()) {
            r.status.code()
        } else {
            0
        }
    }
}

/// Why a job could not be launched.
#[derive(Debug)]
#[non_exhaustive]
pub enum LaunchError {
    /// The job's description is unusable.
    InvalidArgument(String),
    /// A rank could not be started. The ranks started before it were killed.
    Spawn {
        /// The program.
        program: PathBuf,
        /// The rank that failed to start.
        rank: u32,
        /// The operating system's error.
        source: io::Error,
    },
    /// The node segment could not be created.
    Segment(shmheap::Error),
    /// A resource of the launcher itself failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::InvalidArgument(why) => f.write_str(why),
            LaunchError::Spawn {
                program,
                rank,
                source,
            } => {
                let program = program.display();
                match source.kind() {
                    io::ErrorKind::NotFound => write!(
                        f,
                        "cannot start rank {rank}: program {program:?} not found{}",
                        if program.to_string().contains('/') {
                            ""
                        } else {
                            " in PATH"
                        }
                    ),
                    io::ErrorKind::PermissionDenied => write!(
                        f,
                        "cannot start rank {rank}: program {program:?} is not executable ({source})"
                    ),
                    _ => write!(f, "cannot start rank {rank} ({program:?}): {source}"),
                }
            }
            LaunchError::Segment(e) => write!(f, "cannot create the node segment: {e}"),
            LaunchError::Io { op, source } => write!(f, "cannot {op}: {source}"),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Spawn { source, .. } | LaunchError::Io { source, .. } => Some(source),
            LaunchError::Segment(e) => Some(e),
            LaunchError::InvalidArgument(_) => None,
        }
    }
}

impl From<shmheap::Error> for LaunchError {
    fn from(e: shmheap::Error) -> Self {
        LaunchError::Segment(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(statuses: &[RankStatus]) -> JobReport {
        JobReport {
            ranks: statuses
                .iter()
                .enumerate()
                .map(|(i, s)| RankReport {
                    rank: i as u32,
                    status: s.clone(),
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                })
                .collect(),
            first_failure: None,
            timed_out: false,
            interrupted: None,
            job: "j".into(),
            segment: PathBuf::new(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn exit_codes() {
        let ok = report(&[RankStatus::Exited(0), RankStatus::Exited(0)]);
        assert!(ok.success());
        assert_eq!(ok.exit_code(), 0);

        let mut failed = report(&[RankStatus::Killed, RankStatus::Signaled(9)]);
        failed.first_failure = Some(1);
        assert!(!failed.success());
        assert_eq!(failed.exit_code(), 137);

        let mut left = report(&[RankStatus::Killed, RankStatus::NotFinalized]);
        left.first_failure = Some(1);
        assert!(!left.success());
        assert_eq!(left.exit_code(), 1);

        let mut timed_out = report(&[RankStatus::Killed]);
        timed_out.timed_out = true;
        assert_eq!(timed_out.exit_code(), 124);

        let mut interrupted = report(&[RankStatus::Killed]);
        interrupted.interrupted = Some(libc::SIGINT);
        assert_eq!(interrupted.exit_code(), 130);
    }

    #[test]
    fn messages() {
        assert_eq!(RankStatus::Exited(3).to_string(), "exited with status 3");
        assert_eq!(
            RankStatus::NotFinalized.to_string(),
            "exited with status 0 without finalizing"
        );
        assert_eq!(
            RankStatus::Signaled(9).to_string(),
            "was killed by signal 9 (SIGKILL)"
        );
        let e = LaunchError::Spawn {
            program: "no-such-prog".into(),
            rank: 0,
            source: io::ErrorKind::NotFound.into(),
        };
        assert_eq!(
            e.to_string(),
            "cannot start rank 0: program \"no-such-prog\" not found in PATH"
        );
    }

    #[test]
    fn bad_rank_counts() {
        let e = Launcher::new("/bin/true", 0).run().unwrap_err();
        assert!(matches!(e, LaunchError::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("number of ranks"), "{e}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // the wall clock is closed to Miri under isolation
    fn job_ids_differ() {
        let a = new_job_id();
        let b = new_job_id();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())));
    }

    #[test]
    fn cpus() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }
}
