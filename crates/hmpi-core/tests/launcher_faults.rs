//! The launcher against ranks that leave early: a rank that exits with
//! status 0 without finalizing ends the job (its peers would wait for it
//! forever), and a rank that exits after finalizing does not. Also: the
//! segment's inherited descriptor does not reach programs a rank starts.
//!
//! Real ranks of this binary (`harness = false`, see
//! [`hmpi_core::launch::rank_tests`]), run through the library and through
//! the `hmpirun` binary, each job with a private segment directory.

use hmpi_core::launch::{rank_tests, Launcher, RankStatus};
use hmpi_core::prelude::*;
use shmheap::segment::SegmentSpec;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const HMPIRUN: &str = env!("CARGO_BIN_EXE_hmpirun");

/// How long the job may take to end after a rank left without finalizing.
const LIMIT: f64 = 2.0;

/// A private directory for one test's segment files, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new(name: &str) -> ShmDir {
        let dir =
            PathBuf::from("/dev/shm").join(format!("hmpi-faults-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        ShmDir(dir)
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

/// Rank 1 leaves right after init; rank 0 waits in a receive from it and
/// rank 2 in a barrier, forever unless the launcher ends the job.
fn early_exit_rank() {
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    match world.rank() {
        1 => {
            println!("left-at {}", hmpi_core::time());
            std::process::exit(0); // no finalize
        }
        0 => {
            let _ = world.process_at_rank(1).receive_vec::<u64>();
        }
        _ => {
            let _ = world.barrier();
        }
    }
    unreachable!("rank {} got past its wait", world.rank());
}

/// Every rank finalizes; then rank 1 exits at once while the others linger.
fn finalize_then_linger_rank() {
    let universe = hmpi_core::init().expect("init");
    let me = universe.world().rank();
    universe.finalize().expect("finalize");
    if me != 1 {
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// After init, the inherited descriptor of the segment is close-on-exec:
/// a program this rank starts cannot attach as the same rank through it.
fn descriptor_kept_rank() {
    let universe = hmpi_core::init().expect("init");
    let path = std::env::var("HMPI_SHM_NAME").unwrap();
    let n: i32 = path
        .strip_prefix("/proc/self/fd/")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("HMPI_SHM_NAME={path}"));
    // SAFETY: F_GETFD only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(n, libc::F_GETFD) };
    assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0, "flags {flags}");
    let status = Command::new("/bin/sh")
        .args(["-c", r#"exec 2>/dev/null; ! test -e "$HMPI_SHM_NAME""#])
        .status()
        .unwrap();
    assert!(status.success(), "a child could open {path}");
    drop(universe);
}

/// The `left-at` time rank 1 printed.
fn left_at(stdout: &[u8]) -> f64 {
    String::from_utf8_lossy(stdout)
        .lines()
        .find_map(|l| l.strip_prefix("left-at ")?.parse().ok())
        .expect("rank 1 printed when it left")
}

fn early_exit_ends_the_job_through_the_library() {
    let dir = ShmDir::new("lib");
    let exe = std::env::current_exe().unwrap();
    let report = Launcher::new(exe, 3)
        .env(rank_tests::ROLE_VAR, "early-exit")
        .spec(SegmentSpec {
            arena_len: 64 << 20,
            dir: dir.0.clone(),
            ..SegmentSpec::default()
        })
        .capture_output(true)
        .timeout(Duration::from_secs(60))
        .run()
        .unwrap();
    let ended = hmpi_core::time();
    let d = rank_tests::describe(&report);
    assert!(!report.timed_out, "{d}");
    assert_eq!(report.first_failure, Some(1), "{d}");
    assert_eq!(report.ranks[1].status, RankStatus::NotFinalized, "{d}");
    assert_eq!(report.ranks[0].status, RankStatus::Killed, "{d}");
    assert_eq!(report.ranks[2].status, RankStatus::Killed, "{d}");
    assert_ne!(report.exit_code(), 0);
    let waited = ended - left_at(&report.ranks[1].stdout);
    assert!(
        waited <= LIMIT,
        "the job ended {waited:.2} s after rank 1 left"
    );
    dir.assert_empty();
}

fn early_exit_ends_the_job_under_hmpirun_with_a_message() {
    let dir = ShmDir::new("bin");
    let out = Command::new(HMPIRUN)
        .args(["-n", "3", "--timeout", "60", "--"])
        .arg(std::env::current_exe().unwrap())
        .env(rank_tests::ROLE_VAR, "early-exit")
        .env("HMPI_SHM_DIR", &dir.0)
        .env("HMPI_HEAP_PER_RANK", "64M")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ended = hmpi_core::time();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hmpirun: rank 1 exited with status 0 without finalizing"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let waited = ended - left_at(&out.stdout);
    assert!(
        waited <= LIMIT,
        "hmpirun ended {waited:.2} s after rank 1 left"
    );
    dir.assert_empty();
}

fn a_ranks_children_do_not_inherit_the_segment() {
    let report = rank_tests::launch("descriptor-kept", 2, &[]);
    rank_tests::assert_ran(&report, "descriptor-kept");
}

fn exiting_after_finalize_is_normal() {
    let report = rank_tests::launch("finalize-then-linger", 3, &[]);
    rank_tests::assert_ran(&report, "finalize-then-linger");
}

fn main() {
    rank_tests::main(
        |role| {
            let body: fn() = match role {
                "early-exit" => early_exit_rank,
                "finalize-then-linger" => finalize_then_linger_rank,
                "descriptor-kept" => descriptor_kept_rank,
                _ => return None,
            };
            body();
            Some(())
        },
        &[
            (
                "early_exit_ends_the_job_through_the_library",
                early_exit_ends_the_job_through_the_library,
            ),
            (
                "early_exit_ends_the_job_under_hmpirun_with_a_message",
                early_exit_ends_the_job_under_hmpirun_with_a_message,
            ),
            (
                "exiting_after_finalize_is_normal",
                exiting_after_finalize_is_normal,
            ),
            (
                "a_ranks_children_do_not_inherit_the_segment",
                a_ranks_children_do_not_inherit_the_segment,
            ),
        ],
    );
}
