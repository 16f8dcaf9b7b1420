//! The stress run of `examples/stress.rs`, short, in the default test run:
//! 4 ranks (more than the cores CI has), two sender and two receiver
//! threads per rank, a few thousand messages of log-uniform sizes up to
//! 4 MiB, every byte and every message checked (see the example's docs).
//!
//! The example's own source is compiled into this test binary, so the
//! test runs exactly the code `hmpirun -n 4 stress` runs. It is written
//! against the `hmpi` facade, whose names are `hmpi_core`'s; the alias
//! below lets it compile here, where only `hmpi_core` is a dependency.
//!
//! `HMPI_STRESS_MESSAGES`, `HMPI_STRESS_SEED`, `HMPI_STRESS_THREADS` and
//! `HMPI_STRESS_MAX_SIZE` change the run (a long variant:
//! `HMPI_STRESS_MESSAGES=200000 cargo test --release --test stress`).

extern crate hmpi_core as hmpi;

use hmpi_core::launch::rank_tests;

#[allow(dead_code)] // `main` and the argument parsing serve the example only
#[path = "../../../examples/stress.rs"]
mod stress;

const TESTS: &[(&str, fn())] = &[
    (
        "stress_checker_finds_lost_extra_reordered_and_corrupted_messages",
        stress_checker_finds_lost_extra_reordered_and_corrupted_messages,
    ),
    (
        "stress_4000_messages_4_ranks_2_threads",
        stress_4000_messages_4_ranks_2_threads,
    ),
];

/// The run's configuration, from the variables above.
fn config() -> stress::Config {
    let var = |name: &str| std::env::var(name).ok();
    let mut cfg = stress::Config {
        messages: 4000,
        max_size: 4 << 20,
        seed: 20261122,
        threads: 2,
        progress: false,
    };
    if let Some(v) = var("HMPI_STRESS_MESSAGES") {
        cfg.messages = v.parse().expect("HMPI_STRESS_MESSAGES: a count");
    }
    if let Some(v) = var("HMPI_STRESS_SEED") {
        cfg.seed = v.parse().expect("HMPI_STRESS_SEED: a number");
    }
    if let Some(v) = var("HMPI_STRESS_THREADS") {
        cfg.threads = v.parse().expect("HMPI_STRESS_THREADS: a count");
    }
    if let Some(v) = var("HMPI_STRESS_MAX_SIZE") {
        cfg.max_size = v.parse().expect("HMPI_STRESS_MAX_SIZE: bytes");
    }
    cfg
}

fn main() {
    rank_tests::main(
        |role| {
            (role == "stress").then(|| {
                let universe = hmpi_core::init().expect("init");
                if let Some(summary) = stress::run(&universe.world(), &config()) {
                    println!("{summary}");
                }
            })
        },
        TESTS,
    );
}

fn stress_checker_finds_lost_extra_reordered_and_corrupted_messages() {
    // The checker must reject what a broken engine would deliver, or the
    // run below could not fail.
    stress::checker_self_test().unwrap();
}

fn stress_4000_messages_4_ranks_2_threads() {
    let cfg = config();
    let report = rank_tests::launch("stress", 4, &[]);
    rank_tests::assert_ran(&report, "stress");
    let out = String::from_utf8_lossy(&report.ranks[0].stdout);
    let want = format!("stress: {} messages, ", cfg.messages);
    assert!(
        out.lines().any(|l| l.starts_with(&want)),
        "no summary line on rank 0:\n{}",
        rank_tests::describe(&report)
    );
    println!(
        "{}",
        out.lines().find(|l| l.starts_with(&want)).unwrap_or("")
    );
}
