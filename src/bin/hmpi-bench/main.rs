//! `hmpi-bench`: multi-process benchmarks of hmpi against its peers.
//!
//! ```text
//! hmpi-bench <workload> [--csv FILE] [--sizes MIN-MAX] [--reps N] [--ms N] [--quick]
//! hmpi-bench --help
//! ```
//!
//! Each workload measures every backend it compares in the same run and
//! prints a table of medians with the ratios between them; `--csv` writes
//! every sample (`workload,backend,threads,size,value,unit`). Progress goes
//! to stderr, results to stdout.
//!
//! Layout: this file parses the command line and dispatches; [`report`]
//! holds samples, tables and CSV; [`stats`] the order statistics; each
//! workload family has its own module ([`alloc`]) that registers itself in
//! [`WORKLOADS`] with a `run` function (the parent side) and, when it needs
//! several ranks, a `worker` function that the parent starts through the
//! launcher by re-executing this program with the hidden arguments
//! `--worker NAME …`.
//!
//! The benchmark program keeps the system allocator as its own global
//! allocator so that its bookkeeping does not disturb the allocators it
//! measures.

mod alloc;
mod report;
mod stats;

use report::Sample;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

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

/// The workloads, in the order `--help` lists them.
pub const WORKLOADS: &[Workload] = &[alloc::WORKLOAD];

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
    hmpi-bench --help

WORKLOADS:
",
    );
    for w in WORKLOADS {
        s += &format!("    {:<10}{}\n", w.name, w.about);
    }
    s += "
OPTIONS:
    --csv FILE        also write every sample to FILE as CSV
                      (header: workload,backend,threads,size,value,unit)
    --sizes MIN-MAX   sizes in bytes (powers of two in the range), e.g. 64-64K;
                      one size alone (e.g. 4K) measures just that size.
                      Suffixes K, M, G (binary)
    --reps N          measured repetitions per point, median reported (default 5)
    --ms N            time per repetition in milliseconds (default 100)
    --quick           smoke run: sizes 16, 1K, 64K, 1M; 2 repetitions; 20 ms
    -h, --help        this text

Results go to stdout (a table with ratios), progress to stderr.
Exit codes: 0 success, 1 a measurement failed, 2 bad command line.
";
    s
}

fn parse_size_arg(s: &str) -> Result<usize, BenchError> {
    shmheap::env::parse_size(s)
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            BenchError::Usage(format!(
                "--sizes: '{s}' is not a size (a positive number with an optional K, M or G)"
            ))
        })
}

fn parse_sizes(s: &str) -> Result<(usize, usize), BenchError> {
    let (lo, hi) = match s.split_once('-') {
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

/// What the command line asks for.
enum Command {
    Help,
    Run(&'static Workload, Options),
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
    let mut workload = None;
    let mut opts = Options::default();
    let mut i = 0;
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
            f if f.starts_with('-') => {
                return Err(BenchError::Usage(format!("unknown option '{f}'")));
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
    match workload {
        Some(w) => Ok(Command::Run(w, opts)),
        None => Err(BenchError::Usage("no workload given".into())),
    }
}

fn run(cmd: Command) -> Result<(), BenchError> {
    match cmd {
        Command::Help => {
            print!("{}", help());
            Ok(())
        }
        Command::Worker(w, args) => {
            let (_, worker) = w.worker.expect("matched on a worker name");
            worker(&args)
        }
        Command::Run(w, opts) => {
            // Check the CSV path before spending minutes measuring.
            if let Some(path) = &opts.csv {
                std::fs::File::create(path).map_err(|e| {
                    BenchError::Usage(format!("--csv: cannot create {}: {e}", path.display()))
                })?;
            }
            let progress = Progress::new();
            let outcome = (w.run)(&opts, &progress)?;
            print!("{}", outcome.text);
            if let Some(path) = &opts.csv {
                report::write_csv(path, &outcome.samples).map_err(|e| {
                    BenchError::Failed(format!("cannot write {}: {e}", path.display()))
                })?;
                progress.line(format_args!(
                    "wrote {} samples to {}",
                    outcome.samples.len(),
                    path.display()
                ));
            }
            progress.line(format_args!(
                "done in {:.1} s",
                progress.start.elapsed().as_secs_f64()
            ));
            if outcome.failures.is_empty() {
                Ok(())
            } else {
                Err(BenchError::Failed(format!(
                    "{} measurement(s) failed: {}",
                    outcome.failures.len(),
                    outcome.failures.join("; ")
                )))
            }
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
        ] {
            match parse_args(&args(bad)) {
                Err(e @ BenchError::Usage(_)) => assert_eq!(e.exit_code(), 2),
                Err(e) => panic!("'{bad}': not a usage error: {e}"),
                Ok(_) => panic!("'{bad}' was accepted"),
            }
        }
    }

    #[test]
    fn help_lists_workloads() {
        assert!(matches!(parse_args(&args("--help")), Ok(Command::Help)));
        assert!(help().contains("alloc"));
    }
}
