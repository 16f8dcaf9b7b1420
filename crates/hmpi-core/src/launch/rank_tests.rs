//! A harness for tests that run as real ranks.
//!
//! A test target with `harness = false` calls [`main`] from its `main`. Run
//! plainly (by `cargo test`), it runs the listed tests one after another and
//! prints libtest's summary line; each test starts ranks with [`launch`],
//! which re-executes the same binary with [`ROLE_VAR`] naming the rank side
//! to run. A rank runs on the main thread with no harness threads beside it
//! (libtest's would allocate and run concurrently with the rank), prints
//! `role NAME done` when its side returns, and [`assert_ran`] checks that
//! every rank got there, so a rank that never ran its role cannot pass.
//!
//! # Example
//! ```no_run
//! use hmpi_core::launch::rank_tests;
//!
//! fn hello_rank() {
//!     assert!(std::env::var("HMPI_RANK").is_ok());
//! }
//!
//! fn hello_runs_on_three_ranks() {
//!     rank_tests::assert_ran(&rank_tests::launch("hello", 3, &[]), "hello");
//! }
//!
//! fn main() {
//!     rank_tests::main(
//!         |role| match role {
//!             "hello" => Some(hello_rank()),
//!             _ => None,
//!         },
//!         &[("hello_runs_on_three_ranks", hello_runs_on_three_ranks)],
//!     );
//! }
//! ```

use super::{JobReport, Launcher};
use std::time::{Duration, Instant};

/// The variable that names the rank side a re-executed test binary runs.
pub const ROLE_VAR: &str = "HMPI_TEST_ROLE";

/// How long one launched job may take.
const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// The `main` of a multi-process test binary. As a rank: runs `rank(role)`
/// (which returns `None` for an unknown role) and prints `role NAME done`.
/// Otherwise: runs the `tests` whose names contain a command-line filter
/// (all without one; flags that cargo passes are ignored), then exits 101
/// if any failed.
pub fn main(rank: impl FnOnce(&str) -> Option<()>, tests: &[(&str, fn())]) {
    if let Ok(role) = std::env::var(ROLE_VAR) {
        if rank(&role).is_none() {
            eprintln!("unknown {ROLE_VAR} {role:?}");
            std::process::exit(2);
        }
        println!("role {role} done");
        return;
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected: Vec<_> = tests
        .iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed) = (0, Vec::new());
    for (name, test) in selected {
        let t0 = Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(()) => {
                println!("test {name} ... ok ({:.1?})", t0.elapsed());
                passed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered out\n",
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}

/// Starts `ranks` copies of this test binary in role `role`, with `env`
/// added, output captured, and a generous timeout.
pub fn launch(role: &str, ranks: u32, env: &[(&str, String)]) -> JobReport {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut launcher = Launcher::new(exe, ranks)
        .env(ROLE_VAR, role)
        .capture_output(true)
        .timeout(JOB_TIMEOUT);
    for (k, v) in env {
        launcher = launcher.env(k, v);
    }
    launcher.run().expect("launch ranks")
}

/// Every rank's status and output, for assertion messages.
pub fn describe(report: &JobReport) -> String {
    let mut s = format!("timed out: {}\n", report.timed_out);
    for r in &report.ranks {
        s += &format!(
            "--- rank {} {:?}\nstdout:\n{}\nstderr:\n{}\n",
            r.rank,
            r.status,
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
    }
    s
}

/// Panics (with [`describe`]) unless the job succeeded and every rank
/// finished role `role`.
pub fn assert_ran(report: &JobReport, role: &str) {
    let done = format!("role {role} done");
    let all_done = report.ranks.iter().all(|r| {
        String::from_utf8_lossy(&r.stdout)
            .lines()
            .any(|l| l == done)
    });
    assert!(
        report.success() && all_done,
        "job {role} failed:\n{}",
        describe(report)
    );
}
