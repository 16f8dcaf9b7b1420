//! `hmpirun`: runs N ranks of a program on this node.
//!
//! ```text
//! hmpirun -n N [--map-by LEVEL[:PE=n]] [--bind-to LEVEL|none] [--report-bindings]
//!         [--oversubscribe] [--tag-output] [--timeout SECS] [--] PROGRAM [ARGS...]
//! ```
//!
//! `LEVEL` is `hwthread`, `core`, `l3cache`, `numa` or `socket`; the
//! placement is [`hmpi_core::launch::topo`]'s.
//!
//! Exits with the job's exit code ([`hmpi_core::launch::JobReport::exit_code`]):
//! 0, the first failing rank's status (1 for a rank that exited with status
//! 0 without finalizing), 124 on timeout, 128 + signal when interrupted; 2
//! on bad usage, 126/127 when the program cannot be run.
//!
//! # Example
//! ```text
//! $ hmpirun -n 2 --tag-output sh -c 'echo hello from $HMPI_RANK'
//! [0] hello from 0
//! [1] hello from 1
//! ```

use hmpi_core::env;
use hmpi_core::launch::topo::Level;
use hmpi_core::launch::{allowed_cpus, Bind, LaunchError, Launcher};
use std::ffi::OsString;
use std::time::Duration;

const USAGE: &str = "\
Usage: hmpirun -n N [OPTIONS] [--] PROGRAM [ARGS...]

Runs N ranks of PROGRAM on this node, sharing one node heap.

Options:
  -n, -np, --np N        number of ranks (required)
  --map-by LEVEL[:PE=n]  place rank i in the i-th LEVEL (round robin) of
                         the CPUs hmpirun may use; with PE=n, bind each
                         rank to n cores (default: core)
  --bind-to LEVEL|none   bind each rank to the LEVEL that holds its place
                         (or, if LEVEL is narrower, to the next LEVEL in
                         it), or not at all (default: the --map-by level;
                         without either option, if N <= allowed CPUs,
                         one hardware thread per rank, mapped by core
                         (rank i on the i-th CPU), else none)
                         LEVEL: hwthread, core, l3cache, numa, socket
                         (package); read with hwloc if built with the
                         feature hwloc, else from /sys
  --report-bindings      print each rank's CPUs, L3, NUMA node and socket
                         on stderr before the ranks start
  --oversubscribe        say nothing when more ranks are bound than there
                         are CPUs (they share them)
  --tag-output           prefix every output line with [rank]
  --timeout SECS         end the job after SECS seconds (exit code 124);
                         default $HMPI_TIMEOUT, 0 for no limit
  -h, --help             print this help
  -V, --version          print the version

Everything after PROGRAM is passed to it unchanged.";

/// The variables of a job, listed by `--help` (every `HMPI_*` variable the
/// runtime, the launcher, libhmpi and hmpicc read, with its default).
const ENVIRONMENT: &str = "\
Environment (sizes take K, M, G, T suffixes):
  HMPI_TIMEOUT=SECS            default of --timeout                [0: no limit]
  HMPI_HEAP_PER_RANK=SIZE      virtual size of each rank's arena;
                               only the pages used are backed      [16G]
  HMPI_SHM_BASE=ADDR           address of the node heap in every rank
                                                                   [0x200000000000]
  HMPI_SHM_DIR=DIR             directory of the (unnamed) segment  [/dev/shm]
  HMPI_EAGER_MAX=SIZE          largest message sent inline         [256, at most 64K]
  HMPI_SYNERGISTIC_MIN=SIZE    least message copied by sender and
                               receiver together                   [64K]
  HMPI_SYNERGISTIC_BLOCK=SIZE  block of a synergistic copy         [64K]
  HMPI_CMA=0|1                 kernel-assisted copy of private
                               send buffers (process_vm_readv)     [1]
  HMPI_FASTBOX=0|1             per-pair fast boxes for small
                               messages                            [1]
  HMPI_VCIS=N                  communication channels per rank     [1]
  HMPI_SOLO=0|1                lock-free path while one thread
                               communicates                        [1]
  HMPI_COPY_AGENTS=N|auto      threads per rank that help with
                               large window puts and gets (auto: one,
                               while a CPU is free)                [auto]
  HMPI_COPY_MIN=SIZE           least put or get they help with     [256K]
  HMPI_COLL_DOMAINS=K          collectives: pretend the ranks form
                               K cache domains (tests the hierarchy)
                               (unset: HMPI_NODE_DOMAIN, else hwloc if
                               built with it, else flat)
  HMPI_OPI_POOL_MAX=N          buffers an OpiBuf pool keeps        [64]
  HMPI_OPI_POOL_POLICY=freeing|allocating
                               which rank's pool a freed OpiBuf
                               joins                               [freeing]
  HMPI_PGAS_POOL=SIZE          global address space: each unit's
                               pool for non-collective allocations
                               (a power of two, alike everywhere)  [8M]
  HMPI_NODES=K                 under mpirun / mpiexec (feature mpi):
                               split the ranks into K virtual nodes,
                               one heap each       [unset: the machines]
  HMPI_MALLOC=system           libhmpi: leave C malloc on glibc    [unset: node heap]
  HMPI_LINK=static             hmpicc: link libhmpi.a              [unset: libhmpi.so]
  HMPI_CC, HMPI_CXX            hmpicc, hmpicxx: the compiler       [cc, c++]

Set by hmpirun for every rank (read by the runtime):
  HMPI_RANK, HMPI_SIZE         the rank and the number of ranks
  HMPI_LOCAL_RANK, HMPI_LOCAL_SIZE
                               the same on this node
  HMPI_JOB                     the job's identifier
  HMPI_SHM_NAME                the node heap's descriptor
  HMPI_NODE_DOMAIN             the rank's L3 / NUMA node / socket, when
                               the bound ranks span several (read by
                               the collectives' hierarchy)
  HMPI_HEAP_PID                libhmpi: the process that attached the heap

A program started without hmpirun is a world of 1 process.";

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Cli {
    Help,
    Version,
    Run(Options),
}

#[derive(Debug, PartialEq)]
struct Options {
    ranks: u32,
    bind: Option<Bind>,
    /// `--map-by`'s level and PE.
    map: Option<(Level, u32)>,
    report_bindings: bool,
    oversubscribe: bool,
    tag_output: bool,
    timeout: Option<Duration>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse_ranks(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid number of ranks {s:?}: expected a positive integer"
        )),
    }
}

const LEVELS: &str = "hwthread, core, l3cache, numa or socket";

fn parse_bind(s: &str) -> Result<Bind, String> {
    Bind::parse(s)
        .ok_or_else(|| format!("invalid value {s:?} for --bind-to: expected {LEVELS}, or none"))
}

/// `LEVEL` or `LEVEL:PE=n`.
fn parse_map(s: &str) -> Result<(Level, u32), String> {
    let (level, modifier) = match s.split_once(':') {
        Some((l, m)) => (l, Some(m)),
        None => (s, None),
    };
    let Some(level) = Level::parse(level) else {
        return Err(format!(
            "invalid value {s:?} for --map-by: expected {LEVELS}, optionally with :PE=n"
        ));
    };
    let pe = match modifier {
        None => 1,
        Some(m) => match m.strip_prefix("PE=").or_else(|| m.strip_prefix("pe=")) {
            Some(n) => match n.parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(format!(
                        "invalid PE in --map-by {s:?}: expected a positive integer"
                    ))
                }
            },
            None => {
                return Err(format!(
                    "invalid modifier {m:?} in --map-by {s:?}: only PE=n is known"
                ))
            }
        },
    };
    Ok((level, pe))
}

fn parse_timeout(s: &str, source: &str) -> Result<Option<Duration>, String> {
    match env::parse_seconds(s) {
        Some(d) if d.is_zero() => Ok(None),
        Some(d) => Ok(Some(d)),
        None => Err(format!(
            "invalid timeout {s:?} in {source}: expected seconds, such as 30 or 2.5"
        )),
    }
}

/// Parses the arguments after the program name. `env_timeout` is the value
/// of `HMPI_TIMEOUT`, if set.
fn parse(args: Vec<OsString>, env_timeout: Option<&str>) -> Result<Cli, String> {
    let mut ranks = None;
    let mut bind = None;
    let mut map = None;
    let mut report_bindings = false;
    let mut oversubscribe = false;
    let mut tag_output = false;
    let mut timeout = None;
    let mut it = args.into_iter();
    let mut program = None;
    while let Some(arg) = it.next() {
        let Some(s) = arg.to_str() else {
            // Not UTF-8: not one of our options, so it is the program.
            program = Some(arg);
            break;
        };
        if s == "--" {
            program = it.next();
            if program.is_none() {
                return Err("missing PROGRAM after '--'".into());
            }
            break;
        }
        if !s.starts_with('-') || s == "-" {
            program = Some(arg);
            break;
        }
        let (name, inline) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (s, None),
        };
        let value = |it: &mut std::vec::IntoIter<OsString>| -> Result<String, String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            match it.next() {
                Some(v) => v
                    .into_string()
                    .map_err(|v| format!("invalid value {v:?} for {name}")),
                None => Err(format!("option {name} needs a value")),
            }
        };
        match name {
            "-h" | "--help" => return Ok(Cli::Help),
            "-V" | "--version" => return Ok(Cli::Version),
            "-n" | "-np" | "--np" | "--n" => ranks = Some(parse_ranks(&value(&mut it)?)?),
            "--bind-to" => bind = Some(parse_bind(&value(&mut it)?)?),
            "--map-by" => map = Some(parse_map(&value(&mut it)?)?),
            "--report-bindings" if inline.is_none() => report_bindings = true,
            "--oversubscribe" if inline.is_none() => oversubscribe = true,
            "--tag-output" if inline.is_none() => tag_output = true,
            "--timeout" => timeout = Some(parse_timeout(&value(&mut it)?, "--timeout")?),
            _ => return Err(format!("unknown option {s:?}")),
        }
    }
    let Some(program) = program else {
        return Err("missing PROGRAM".into());
    };
    let Some(ranks) = ranks else {
        return Err("missing the number of ranks (-n N)".into());
    };
    let timeout = match (timeout, env_timeout) {
        (Some(t), _) => t,
        (None, Some(v)) => parse_timeout(v, env::TIMEOUT)?,
        (None, None) => None,
    };
    Ok(Cli::Run(Options {
        ranks,
        bind,
        map,
        report_bindings,
        oversubscribe,
        tag_output,
        timeout,
        program,
        args: it.collect(),
    }))
}

/// The binding the options ask for, and whether oversubscription goes
/// without a word: `--bind-to`; else the `--map-by` level (cores with
/// PE=n); else, by default, one hardware thread per rank, mapped by core,
/// when there are CPUs enough for the ranks (`cpus()` of them): rank `i`
/// on the `i`-th CPU (Linux numbers the first threads of all cores before
/// the second ones), as before placement options existed; none otherwise.
/// The default never speaks of oversubscription.
fn binding(opts: &Options, cpus: impl FnOnce() -> usize) -> (Bind, bool) {
    match (opts.bind, opts.map) {
        (Some(b), _) => (b, opts.oversubscribe),
        (None, Some((Level::HwThread, pe))) if pe > 1 => (Bind::HwThread, opts.oversubscribe),
        (None, Some((_, pe))) if pe > 1 => (Bind::Core, opts.oversubscribe),
        (None, Some((level, _))) => (Bind::to(level), opts.oversubscribe),
        (None, None) if opts.ranks as usize <= cpus() => (Bind::HwThread, true),
        (None, None) => (Bind::None, true),
    }
}

/// Writes `text` to standard error with one `write(2)` (`eprintln!` would
/// write it piece by piece, and a rank's output may be going there too).
fn say(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
}

fn usage_error(msg: &str) -> ! {
    say(&format!("hmpirun: {msg}\n\n{USAGE}\n"));
    std::process::exit(2);
}

fn main() {
    let env_timeout = match std::env::var(env::TIMEOUT) {
        Ok(v) => Some(v),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(v)) => {
            usage_error(&format!("invalid value {v:?} for {}", env::TIMEOUT))
        }
    };
    let opts = match parse(
        std::env::args_os().skip(1).collect(),
        env_timeout.as_deref(),
    ) {
        Ok(Cli::Help) => {
            println!("{USAGE}\n\n{ENVIRONMENT}");
            return;
        }
        Ok(Cli::Version) => {
            println!("hmpirun {}", env!("CARGO_PKG_VERSION"));
            return;
        }
        Ok(Cli::Run(opts)) => opts,
        Err(msg) => usage_error(&msg),
    };
    let (bind, quiet) = binding(&opts, || allowed_cpus().len());
    let mut launcher = Launcher::new(opts.program, opts.ranks)
        .args(opts.args)
        .bind(bind)
        .report_bindings(opts.report_bindings)
        .oversubscribe(quiet)
        .tag_output(opts.tag_output);
    if let Some((level, pe)) = opts.map {
        launcher = launcher.map_by(level).pe(pe);
    }
    if let Some(t) = opts.timeout {
        launcher = launcher.timeout(t);
    }
    match launcher.run() {
        Ok(report) => std::process::exit(report.exit_code()),
        Err(e) => {
            say(&format!("hmpirun: {e}\n"));
            let code = match &e {
                LaunchError::InvalidArgument(_) => 2,
                LaunchError::Spawn { source, .. } => match source.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    std::io::ErrorKind::PermissionDenied => 126,
                    _ => 1,
                },
                _ => 1,
            };
            std::process::exit(code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the `HMPI_*` variables in `text`: whole string
    /// literals in Rust, expansions (with or without braces) in shell.
    fn variables_in(text: &str, out: &mut std::collections::BTreeSet<String>) {
        for (i, _) in text.match_indices("HMPI_") {
            let before = text[..i].chars().last();
            if !matches!(before, Some('"' | '{' | '$')) {
                continue;
            }
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let after = text[i + name.len()..].chars().next();
            let quoted = before != Some('"') || after == Some('"');
            if quoted && name.len() > "HMPI_".len() && !name.starts_with("HMPI_TEST_") {
                out.insert(name);
            }
        }
    }

    #[test]
    fn help_lists_every_variable() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut dirs = vec![
            root.join("src"),
            root.join("ffi/src"),
            root.join("ffi/tools"),
        ];
        for c in std::fs::read_dir(root.join("crates")).unwrap() {
            dirs.push(c.unwrap().path().join("src"));
        }
        let mut found = std::collections::BTreeSet::new();
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if let Ok(text) = std::fs::read_to_string(&p) {
                    variables_in(&text, &mut found);
                }
            }
        }
        assert!(found.contains("HMPI_HEAP_PER_RANK"), "{found:?}");
        let missing: Vec<_> = found.iter().filter(|v| !ENVIRONMENT.contains(*v)).collect();
        assert!(missing.is_empty(), "not in --help: {missing:?}");
    }

    fn args(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    fn run(s: &[&str]) -> Options {
        match parse(args(s), None) {
            Ok(Cli::Run(o)) => o,
            other => panic!("{s:?}: {other:?}"),
        }
    }

    #[test]
    fn forms_of_the_rank_count() {
        for form in [
            &["-n", "4", "prog"][..],
            &["-np", "4", "prog"],
            &["--np", "4", "prog"],
            &["-n=4", "prog"],
            &["--np=4", "prog"],
        ] {
            assert_eq!(run(form).ranks, 4, "{form:?}");
        }
    }

    #[test]
    fn everything_after_the_program_is_its_own() {
        let o = run(&[
            "-n",
            "2",
            "--tag-output",
            "--",
            "prog",
            "-n",
            "--timeout",
            "x",
        ]);
        assert!(o.tag_output);
        assert_eq!(o.program, "prog");
        assert_eq!(o.args, args(&["-n", "--timeout", "x"]));
        let o = run(&[
            "--bind-to",
            "none",
            "--timeout=2.5",
            "-n",
            "1",
            "prog",
            "--",
            "-h",
        ]);
        assert_eq!(o.bind, Some(Bind::None));
        assert_eq!(o.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(o.args, args(&["--", "-h"]));
    }

    #[test]
    fn bindings_and_maps() {
        let o = run(&[
            "-n",
            "4",
            "--map-by",
            "socket:PE=2",
            "--report-bindings",
            "p",
        ]);
        assert_eq!(o.map, Some((Level::Socket, 2)));
        assert!(o.report_bindings);
        assert_eq!(binding(&o, || 1), (Bind::Core, false));
        let o = run(&["-n", "4", "--map-by=l3cache", "--oversubscribe", "p"]);
        assert_eq!(binding(&o, || 1), (Bind::L3Cache, true));
        let o = run(&["-n", "4", "--map-by", "hwthread:PE=2", "p"]);
        assert_eq!(binding(&o, || 1), (Bind::HwThread, false));
        let o = run(&["-n", "2", "--map-by", "numa", "--bind-to", "package", "p"]);
        assert_eq!(binding(&o, || 1), (Bind::Socket, false));
        for (name, bind) in [
            ("hwthread", Bind::HwThread),
            ("core", Bind::Core),
            ("l3cache", Bind::L3Cache),
            ("numa", Bind::Numa),
            ("socket", Bind::Socket),
            ("none", Bind::None),
        ] {
            assert_eq!(run(&["-n", "1", "--bind-to", name, "p"]).bind, Some(bind));
        }
        // The default: a CPU each when there are enough, quietly.
        let o = run(&["-n", "3", "p"]);
        assert_eq!(binding(&o, || 4), (Bind::HwThread, true));
        assert_eq!(binding(&o, || 2), (Bind::None, true));
    }

    #[test]
    fn timeouts() {
        let o = match parse(args(&["-n", "1", "p"]), Some("7")) {
            Ok(Cli::Run(o)) => o,
            other => panic!("{other:?}"),
        };
        assert_eq!(o.timeout, Some(Duration::from_secs(7)));
        // The option wins over the variable; 0 means no limit.
        let o = match parse(args(&["-n", "1", "--timeout", "0", "p"]), Some("7")) {
            Ok(Cli::Run(o)) => o,
            other => panic!("{other:?}"),
        };
        assert_eq!(o.timeout, None);
        let e = parse(args(&["-n", "1", "p"]), Some("soon")).unwrap_err();
        assert!(e.contains("HMPI_TIMEOUT"), "{e}");
    }

    #[test]
    fn bad_usage() {
        for (line, needle) in [
            (&[][..], "missing PROGRAM"),
            (&["prog"], "-n N"),
            (&["-n", "0", "prog"], "positive integer"),
            (&["-n", "x", "prog"], "positive integer"),
            (&["-n"], "needs a value"),
            (&["-n", "2", "--bind-to", "board", "p"], "hwthread, core"),
            (&["-n", "2", "--map-by", "node", "p"], "--map-by"),
            (&["-n", "2", "--map-by", "core:PE=0", "p"], "invalid PE"),
            (&["-n", "2", "--map-by", "core:span", "p"], "only PE=n"),
            (&["-n", "2", "--report-bindings=1", "p"], "unknown option"),
            (&["-n", "2", "--frobnicate", "p"], "unknown option"),
            (&["-n", "2", "--"], "missing PROGRAM"),
            (&["-n", "2", "--timeout", "-1", "p"], "invalid timeout"),
        ] {
            let e = parse(args(line), None).unwrap_err();
            assert!(e.contains(needle), "{line:?}: {e}");
        }
        assert_eq!(
            parse(args(&["-n", "2", "--help", "p"]), None),
            Ok(Cli::Help)
        );
    }
}
