//! The launcher end to end: real ranks (`/bin/sh -c …`) through the library
//! API and through the `hmpirun` binary.
//!
//! Every test checks that nothing is left in the job's segment directory
//! and that no rank survives: ranks print `pid <pid>`, and after the run
//! `kill(pid, 0)` must fail with `ESRCH`. Tests run in parallel threads of
//! one process, which also exercises concurrent jobs.

use hmpi_core::launch::{allowed_cpus, Bind, JobReport, LaunchError, Launcher, RankStatus};
use shmheap::segment::SegmentSpec;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const HMPIRUN: &str = env!("CARGO_BIN_EXE_hmpirun");

/// A private directory for one test's segment files, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new(name: &str) -> ShmDir {
        let dir =
            PathBuf::from("/dev/shm").join(format!("hmpi-core-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        ShmDir(dir)
    }

    fn spec(&self) -> SegmentSpec {
        SegmentSpec {
            arena_len: 64 << 20,
            dir: self.0.clone(),
            ..SegmentSpec::default()
        }
    }

    fn assert_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "segment files left behind: {left:?}");
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A job of `ranks` shells running `script`, segment in `dir`.
fn sh(dir: &ShmDir, ranks: u32, script: &str) -> Launcher {
    Launcher::new("/bin/sh", ranks)
        .args(["-c", script])
        .spec(dir.spec())
}

/// The values of lines `<key> <value>` in `out`.
fn values(out: &[u8], key: &str) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(str::to_string)
        .collect()
}

fn assert_gone(pid: &str) {
    let pid: libc::pid_t = pid.trim().parse().unwrap();
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid, 0) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert!(
        r == -1 && errno == Some(libc::ESRCH),
        "rank process {pid} survived the job"
    );
}

/// Checks that every rank that printed its pid is gone, and that no
/// segment file is left.
fn assert_clean(report: &JobReport, dir: &ShmDir) {
    for r in &report.ranks {
        values(&r.stdout, "pid").iter().for_each(|p| assert_gone(p));
    }
    // The segment never has a name: ranks get the launcher's descriptor.
    assert!(report.segment.starts_with("/proc/self/fd/"), "{report:?}");
    dir.assert_empty();
}

fn hmpirun(dir: &ShmDir, args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(HMPIRUN)
        .args(args)
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .env_remove("HMPI_TIMEOUT")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, t.elapsed())
}

/// Checks the pids and segment paths printed by ranks under `hmpirun`.
fn assert_clean_output(stdout: &[u8], dir: &ShmDir) {
    values(stdout, "pid").iter().for_each(|p| assert_gone(p));
    for shm in values(stdout, "shm") {
        assert!(shm.starts_with("/proc/self/fd/"), "segment path {shm}");
    }
    dir.assert_empty();
}

#[test]
fn all_ranks_succeed_and_see_their_environment() {
    let dir = ShmDir::new("env");
    let report = sh(
        &dir,
        4,
        r#"echo "pid $$"
           echo "env $HMPI_RANK $HMPI_SIZE $HMPI_LOCAL_RANK $HMPI_LOCAL_SIZE $HMPI_JOB $EXTRA"
           echo "shm $HMPI_SHM_NAME"
           test -f "$HMPI_SHM_NAME" && echo "exists yes""#,
    )
    .env("EXTRA", "extra-value")
    .capture_output(true)
    .run()
    .unwrap();
    assert!(report.success(), "{report:?}");
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.ranks.len(), 4);
    assert!(report.job.starts_with(&format!("{}-", std::process::id())));
    for (i, r) in report.ranks.iter().enumerate() {
        assert_eq!(r.rank as usize, i);
        assert_eq!(r.status, RankStatus::Exited(0));
        assert_eq!(
            values(&r.stdout, "env"),
            [format!("{i} 4 {i} 4 {} extra-value", report.job)],
            "rank {i}"
        );
        assert_eq!(
            values(&r.stdout, "shm"),
            [report.segment.display().to_string()]
        );
        assert_eq!(values(&r.stdout, "exists"), ["yes"], "rank {i}");
        assert!(r.stderr.is_empty());
    }
    assert_clean(&report, &dir);
}

#[test]
fn a_failing_rank_ends_the_job() {
    let dir = ShmDir::new("fail");
    let t = Instant::now();
    let report = sh(
        &dir,
        4,
        r#"echo "pid $$"; [ "$HMPI_RANK" != 1 ] || exit 3; exec sleep 30"#,
    )
    .capture_output(true)
    .run()
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(report.first_failure, Some(1));
    assert_eq!(report.ranks[1].status, RankStatus::Exited(3));
    for i in [0, 2, 3] {
        assert_eq!(report.ranks[i].status, RankStatus::Killed, "rank {i}");
    }
    assert!(!report.success());
    assert!(!report.timed_out);
    assert_eq!(report.exit_code(), 3);
    assert_clean(&report, &dir);
}

#[test]
fn hmpirun_names_the_failing_rank() {
    let dir = ShmDir::new("fail-bin");
    let (out, elapsed) = hmpirun(
        &dir,
        &[
            "-n",
            "4",
            "sh",
            "-c",
            r#"echo "pid $$"; echo "shm $HMPI_SHM_NAME"; [ "$HMPI_RANK" != 1 ] || exit 3; exec sleep 30"#,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    assert!(
        stderr.contains("hmpirun: rank 1 exited with status 3; terminating the job"),
        "{stderr}"
    );
    assert_clean_output(&out.stdout, &dir);
}

#[test]
fn a_rank_killed_by_a_signal() {
    let dir = ShmDir::new("kill9");
    let script = r#"echo "pid $$"; echo "shm $HMPI_SHM_NAME"; [ "$HMPI_RANK" != 2 ] || kill -9 $$; exec sleep 30"#;
    let report = sh(&dir, 3, script).capture_output(true).run().unwrap();
    assert_eq!(report.first_failure, Some(2));
    assert_eq!(report.ranks[2].status, RankStatus::Signaled(9));
    assert_eq!(report.exit_code(), 137);
    assert_clean(&report, &dir);

    let (out, elapsed) = hmpirun(&dir, &["-n", "3", "sh", "-c", script]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    assert!(
        stderr.contains("hmpirun: rank 2 was killed by signal 9 (SIGKILL); terminating the job"),
        "{stderr}"
    );
    assert_clean_output(&out.stdout, &dir);
}

#[test]
fn timeout_ends_the_job() {
    let dir = ShmDir::new("timeout");
    let report = sh(&dir, 2, r#"echo "pid $$"; exec sleep 30"#)
        .timeout(Duration::from_millis(800))
        .capture_output(true)
        .run()
        .unwrap();
    assert!(report.timed_out);
    assert_eq!(report.first_failure, None);
    assert_eq!(report.exit_code(), 124);
    assert!(report.ranks.iter().all(|r| r.status == RankStatus::Killed));
    assert!(
        report.elapsed >= Duration::from_millis(800) && report.elapsed < Duration::from_secs(2),
        "{:?}",
        report.elapsed
    );
    assert_clean(&report, &dir);

    let (out, elapsed) = hmpirun(
        &dir,
        &[
            "--timeout",
            "0.5",
            "-n",
            "2",
            "sh",
            "-c",
            r#"echo "pid $$"; exec sleep 30"#,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    assert!(
        stderr.contains("hmpirun: timeout after 0.5 s; terminating the job"),
        "{stderr}"
    );
    assert_clean_output(&out.stdout, &dir);
}

/// Starts `hmpirun` with sleeping ranks, waits until they all printed their
/// pid, sends it `sig`, and checks the exit code and the cleanup.
fn interrupt_hmpirun(name: &str, sig: i32) {
    let dir = ShmDir::new(name);
    let mut cmd = Command::new(HMPIRUN);
    // The test harness may itself run with SIGINT or SIGHUP ignored (a
    // background job of a script, nohup), and hmpirun rightly keeps an
    // inherited "ignore"; this test is about a launcher that can be
    // interrupted, so give it the default dispositions.
    // SAFETY: the closure only calls signal(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(s, libc::SIG_DFL);
            }
            Ok(())
        })
    };
    let mut child = cmd
        .args(["-n", "3", "sh", "-c"])
        .arg(r#"echo "shm $HMPI_SHM_NAME"; echo "pid $$"; exec sleep 30"#)
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .env_remove("HMPI_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    while values(&seen, "pid").len() < 3 {
        let mut line = Vec::new();
        assert!(
            stdout.read_until(b'\n', &mut line).unwrap() > 0,
            "hmpirun ended early"
        );
        seen.extend(line);
    }
    let t = Instant::now();
    // SAFETY: kill has no memory-safety preconditions; the pid is our child,
    // not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    stdout.read_to_end(&mut seen).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(128 + sig), "{stderr}");
    assert!(stderr.contains("terminating the job"), "{stderr}");
    assert_clean_output(&seen, &dir);
}

#[test]
fn sigint_to_hmpirun_ends_the_job() {
    interrupt_hmpirun("sigint", libc::SIGINT);
}

#[test]
fn sigterm_to_hmpirun_ends_the_job() {
    interrupt_hmpirun("sigterm", libc::SIGTERM);
}

#[test]
fn more_ranks_than_cores() {
    let dir = ShmDir::new("many");
    let cpus = allowed_cpus();
    let report = sh(
        &dir,
        8,
        r#"echo "pid $$"; echo "cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)""#,
    )
    .bind(Bind::Core)
    .capture_output(true)
    .run()
    .unwrap();
    assert!(report.success(), "{report:?}");
    for (i, r) in report.ranks.iter().enumerate() {
        assert_eq!(
            values(&r.stdout, "cpus"),
            [cpus[i % cpus.len()].to_string()],
            "rank {i}"
        );
    }
    assert_clean(&report, &dir);

    let (out, _) = hmpirun(&dir, &["-n", "8", "sh", "-c", r#"echo "pid $$""#]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(values(&out.stdout, "pid").len(), 8);
    assert_clean_output(&out.stdout, &dir);
}

#[test]
fn program_not_found() {
    let dir = ShmDir::new("notfound");
    let err = Launcher::new("hmpi-no-such-program", 2)
        .spec(dir.spec())
        .run()
        .unwrap_err();
    match &err {
        LaunchError::Spawn { rank, source, .. } => {
            assert_eq!(*rank, 0);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("unexpected error {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("hmpi-no-such-program") && msg.contains("not found"),
        "{msg}"
    );
    dir.assert_empty();

    let (out, _) = hmpirun(&dir, &["-n", "2", "/nonexistent/hmpi-prog"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("program \"/nonexistent/hmpi-prog\" not found"),
        "{stderr}"
    );
    dir.assert_empty();
}

#[test]
fn a_failed_spawn_kills_the_ranks_already_started() {
    let dir = ShmDir::new("spawnfail");
    let pids = dir.0.with_extension("pids");
    let _ = std::fs::remove_file(&pids);
    let err = sh(&dir, 4, r#"echo "pid $$" >> "$PIDS"; exec sleep 30"#)
        .env("PIDS", &pids)
        .inject_spawn_failure(3)
        .run()
        .unwrap_err();
    assert!(matches!(err, LaunchError::Spawn { rank: 3, .. }), "{err:?}");
    let written = std::fs::read(&pids).unwrap_or_default();
    let _ = std::fs::remove_file(&pids);
    let started = values(&written, "pid");
    assert!(started.len() <= 3, "{started:?}");
    started.iter().for_each(|p| assert_gone(p));
    dir.assert_empty();
}

#[test]
fn tag_output_prefixes_lines() {
    let dir = ShmDir::new("tag");
    let (out, _) = hmpirun(
        &dir,
        &[
            "--tag-output",
            "-n",
            "2",
            "sh",
            "-c",
            r#"echo "out $HMPI_RANK"; echo "err $HMPI_RANK" >&2; printf partial"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let mut stdout: Vec<_> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    stdout.sort();
    assert_eq!(
        stdout,
        ["[0] out 0", "[0] partial", "[1] out 1", "[1] partial"]
    );
    let mut stderr: Vec<_> = String::from_utf8(out.stderr)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    stderr.sort();
    assert_eq!(stderr, ["[0] err 0", "[1] err 1"]);
    dir.assert_empty();
}

#[test]
fn program_arguments_pass_untouched() {
    let dir = ShmDir::new("args");
    let (out, _) = hmpirun(
        &dir,
        &[
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            r#"printf '%s|' "$@""#,
            "sh",
            "-n",
            "--tag-output",
            "--",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"-n|--tag-output|--|");
    dir.assert_empty();
}

#[test]
fn bad_usage_exits_2() {
    let dir = ShmDir::new("usage");
    for (args, needle) in [
        (&[][..], "missing PROGRAM"),
        (&["-n", "x", "true"], "invalid number of ranks"),
        (&["true"], "missing the number of ranks"),
        (&["-n", "2", "--bind-to", "board", "true"], "--bind-to"),
        (&["-n", "2", "--bogus", "true"], "unknown option"),
        (&["-n", "2", "--timeout", "soon", "true"], "invalid timeout"),
    ] {
        let (out, _) = hmpirun(&dir, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage: hmpirun"), "{args:?}: {stderr}");
    }
    let (out, _) = hmpirun(&dir, &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: hmpirun"));
    dir.assert_empty();
}

#[test]
fn concurrent_jobs_in_one_process() {
    let dir = ShmDir::new("concurrent");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let launcher = sh(
                &dir,
                3,
                r#"echo "pid $$"; [ "$HMPI_RANK" != "$FAIL" ] || exit 5; sleep 0.2"#,
            )
            .env("FAIL", if t % 2 == 0 { "none" } else { "2" })
            .capture_output(true);
            std::thread::spawn(move || launcher.run().unwrap())
        })
        .collect();
    for (t, h) in threads.into_iter().enumerate() {
        let report = h.join().unwrap();
        if t % 2 == 0 {
            assert!(report.success(), "job {t}: {report:?}");
        } else {
            assert_eq!(report.exit_code(), 5, "job {t}: {report:?}");
            assert_eq!(report.first_failure, Some(2));
        }
        for r in &report.ranks {
            values(&r.stdout, "pid").iter().for_each(|p| assert_gone(p));
        }
    }
    dir.assert_empty();
}

/// Whether `pid` is gone or a zombie (an orphan whose new parent, e.g. a
/// container's init, has not reaped it yet).
fn dead(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[test]
fn ranks_die_with_a_killed_launcher() {
    let dir = ShmDir::new("pdeathsig");
    let mut child = Command::new(HMPIRUN)
        .args(["-n", "2", "sh", "-c", r#"echo "pid $$"; exec sleep 30"#])
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .env_remove("HMPI_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    while values(&seen, "pid").len() < 2 {
        let mut line = Vec::new();
        assert!(
            stdout.read_until(b'\n', &mut line).unwrap() > 0,
            "hmpirun ended early"
        );
        seen.extend(line);
    }
    child.kill().unwrap(); // SIGKILL: no cleanup by the launcher
    child.wait().unwrap();
    let pids = values(&seen, "pid");
    let t = Instant::now();
    while !pids.iter().all(|p| dead(p)) {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "ranks {pids:?} outlived the launcher"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    dir.assert_empty();
}

/// Live processes (not zombies) whose environment holds `marker`
/// (`NAME=VALUE`).
fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == marker.as_bytes()))
        })
        .filter(|pid| !dead(pid))
        .collect()
}

/// A small deterministic generator (xorshift64*), seeded per run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn killing_the_launcher_in_its_first_50_ms_leaves_nothing() {
    let seed = std::env::var("HMPI_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
        | 1;
    println!("seed {seed} (set HMPI_TEST_SEED to repeat)");
    let mut rng = Rng(seed);
    let dir = ShmDir::new("kill9");
    // Each rank starts a child of its own that would outlive it.
    let script = "sleep 30 & exec sleep 30";
    // Trials in which the launcher had children (guard, ranks) when it was
    // killed: how much of the start the test reached.
    let mut with_job = 0;
    for trial in 0..30 {
        // Half the trials in the first 5 ms, where the launcher creates
        // the segment, forks the guard and spawns the ranks.
        let window = if trial % 2 == 0 { 5_000 } else { 50_000 };
        let delay = Duration::from_micros(rng.next() % window);
        let tag = format!("{}-{trial}", std::process::id());
        let marker = format!("HMPI_KILL_TRIAL={tag}");
        let mut child = Command::new(HMPIRUN)
            .args(["-n", "3", "sh", "-c", script])
            .env("HMPI_KILL_TRIAL", &tag)
            .env("HMPI_SHM_DIR", &dir.0)
            .env("HMPI_HEAP_PER_RANK", "64M")
            .env_remove("HMPI_TIMEOUT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // One cheap read, so as not to delay the kill much.
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
            .unwrap_or_default();
        child.kill().unwrap(); // SIGKILL: no cleanup by the launcher
        with_job += usize::from(!children.trim().is_empty());
        child.wait().unwrap();
        let t = Instant::now();
        loop {
            let left = processes_with(&marker);
            if left.is_empty() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "trial {trial} (seed {seed}, killed after {delay:?}): processes {left:?} survived"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
        assert!(
            left.is_empty(),
            "trial {trial} (seed {seed}, killed after {delay:?}): {left:?} left behind"
        );
    }
    println!("{with_job} of 30 trials killed the launcher after it had forked");
}

#[test]
fn a_ranks_children_die_with_the_job() {
    let dir = ShmDir::new("strays");
    // Each rank leaves a child behind and exits at once.
    let t = Instant::now();
    let report = sh(&dir, 2, r#"sleep 30 & echo "pid $!"; echo "pid $$""#)
        .capture_output(true)
        .run()
        .unwrap();
    assert!(report.success(), "{report:?}");
    // The children were killed, not waited for.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let pids: Vec<String> = report
        .ranks
        .iter()
        .flat_map(|r| values(&r.stdout, "pid"))
        .collect();
    assert_eq!(pids.len(), 4, "{report:?}");
    // An orphaned child is reaped by its new parent, not by the launcher:
    // a zombie counts as gone.
    let t = Instant::now();
    while !pids.iter().all(|p| dead(p)) {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{pids:?} outlived the job"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    dir.assert_empty();
}
