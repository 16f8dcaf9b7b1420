//! The C programs in `ffi/tests/` against libhmpi, as a user builds and
//! runs them: `ffi/build.sh` lays out the library cargo built for this
//! test run (same profile, `CARGO_TARGET_DIR` or not) with `hmpicc`, each
//! program is compiled with `hmpicc -std=c11 -Wall -Wextra -pedantic
//! -Werror` (the header with `hmpicxx` as C++ too) and run on real ranks by
//! the launcher library (what `hmpirun` runs). A program checks its own
//! results and prints `rank R: NAME passed`; every rank must print it and
//! exit 0.

use hmpi_core::launch::{rank_tests, JobReport, Launcher, RankStatus};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

const TESTS: &[(&str, fn())] = &[
    ("header_is_clean_c11_and_cxx", header_is_clean_c11_and_cxx),
    ("abi_values_static_asserts", abi_values_static_asserts),
    ("pingpong_all_sizes_checked", pingpong_all_sizes_checked),
    (
        "wildcards_status_and_requests",
        wildcards_status_and_requests,
    ),
    (
        "derived_datatypes_pack_correctly",
        derived_datatypes_pack_correctly,
    ),
    ("ownership_passing_in_c", ownership_passing_in_c),
    ("communicators_and_groups", communicators_and_groups),
    ("malloc_is_the_shared_heap", malloc_is_the_shared_heap),
    (
        "malloc_before_init_without_launcher",
        malloc_before_init_without_launcher,
    ),
    (
        "c_heap_stays_private_with_hmpi_malloc_system",
        c_heap_stays_private_with_hmpi_malloc_system,
    ),
    (
        "error_classes_for_bad_arguments",
        error_classes_for_bad_arguments,
    ),
    ("errors_are_fatal_by_default", errors_are_fatal_by_default),
    (
        "threads_on_separate_communicators",
        threads_on_separate_communicators,
    ),
    (
        "static_library_links_and_runs",
        static_library_links_and_runs,
    ),
    ("pingpong_example_runs", pingpong_example_runs),
];

fn main() {
    rank_tests::main(|_| None, TESTS);
}

/// Where the C toolchain of this test run lives.
struct Kit {
    prefix: PathBuf,
    out: PathBuf,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Lays out libhmpi (built by cargo for this run) with hmpicc, once.
fn kit() -> &'static Kit {
    static KIT: OnceLock<Kit> = OnceLock::new();
    KIT.get_or_init(|| {
        // This binary is <target>/<profile>/deps/c_programs-<hash>; cargo
        // built libhmpi.so and libhmpi.a beside it (the library is a
        // dependency of this test, so they are fresh).
        let exe = std::env::current_exe().expect("test binary path");
        let deps = exe.parent().expect("<profile>/deps").to_path_buf();
        let profile_dir = deps.parent().expect("<profile>").to_path_buf();
        let prefix = profile_dir.join("hmpi-test");
        let status = Command::new(manifest_dir().join("build.sh"))
            .arg("--no-build")
            .arg("--lib-dir")
            .arg(&deps)
            .arg("--prefix")
            .arg(&prefix)
            .status()
            .expect("run ffi/build.sh");
        assert!(status.success(), "ffi/build.sh failed");
        let out = prefix.join("tests");
        std::fs::create_dir_all(&out).expect("create the test output directory");
        Kit { prefix, out }
    })
}

/// Compiles `ffi/<rel>` with hmpicc (hmpicxx for C++) into the kit.
fn compile(rel: &str, extra: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let k = kit();
    let src = manifest_dir().join(rel);
    let stem = src.file_stem().and_then(|s| s.to_str()).expect("file name");
    let suffix = if env.iter().any(|(k, _)| *k == "HMPI_LINK") {
        "-static"
    } else {
        ""
    };
    let exe = k.out.join(format!("{stem}{suffix}"));
    let cxx = rel.ends_with(".cpp");
    let tool = k
        .prefix
        .join("bin")
        .join(if cxx { "hmpicxx" } else { "hmpicc" });
    let mut cmd = Command::new(tool);
    if cxx {
        cmd.args(["-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"]);
    } else {
        cmd.args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-pedantic",
            "-Werror",
            "-D_GNU_SOURCE",
        ]);
    }
    cmd.args(["-O2", "-pthread", "-I"])
        .arg(manifest_dir().join("tests"))
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&src);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run hmpicc");
    assert!(
        o.status.success(),
        "compiling {rel} failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// The library search path for programs of the kit: its own `lib/` only.
/// (`cargo test` sets `LD_LIBRARY_PATH` to its output directories, where
/// a libhmpi.so from an earlier build may sit; it would win over the
/// programs' rpath.)
fn lib_path() -> PathBuf {
    kit().prefix.join("lib")
}

fn launch(exe: &Path, ranks: u32, env: &[(&str, &str)]) -> JobReport {
    let mut l = Launcher::new(exe, ranks)
        .env("LD_LIBRARY_PATH", lib_path())
        .capture_output(true)
        .timeout(Duration::from_secs(240));
    for (k, v) in env {
        l = l.env(k, v);
    }
    l.run().expect("launch ranks")
}

/// Runs a compiled program on `ranks` ranks; every rank must pass.
fn run_passes(exe: &Path, name: &str, ranks: u32, env: &[(&str, &str)]) -> JobReport {
    let report = launch(exe, ranks, env);
    for r in &report.ranks {
        let line = format!("rank {}: {name} passed", r.rank);
        assert!(
            report.success()
                && String::from_utf8_lossy(&r.stdout)
                    .lines()
                    .any(|l| l == line),
            "{name} failed:\n{}",
            rank_tests::describe(&report)
        );
    }
    report
}

fn build_and_run(rel: &str, name: &str, ranks: u32) {
    let exe = compile(rel, &[], &[]);
    run_passes(&exe, name, ranks, &[]);
}

// ------------------------------------------------------------------ tests

fn header_is_clean_c11_and_cxx() {
    // A C++17 program compiles (with -Werror), links and runs.
    let exe = compile("tests/header_cxx.cpp", &[], &[]);
    run_passes(&exe, "header_cxx", 2, &[]);
    // The headers alone, as several C and C++ standards.
    let k = kit();
    for header in ["mpi.h", "opi.h"] {
        let path = k.prefix.join("include").join(header);
        for (tool, std, lang) in [
            ("hmpicc", "-std=c99", "c"),
            ("hmpicc", "-std=c11", "c"),
            ("hmpicc", "-std=c17", "c"),
            ("hmpicxx", "-std=c++98", "c++"),
            ("hmpicxx", "-std=c++11", "c++"),
            ("hmpicxx", "-std=c++20", "c++"),
        ] {
            let o = Command::new(k.prefix.join("bin").join(tool))
                .args([
                    std,
                    "-Wall",
                    "-Wextra",
                    "-pedantic",
                    "-Werror",
                    "-fsyntax-only",
                    "-x",
                    lang,
                ])
                .arg(&path)
                .output()
                .expect("run the compiler");
            assert!(
                o.status.success(),
                "{header} {std}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

fn abi_values_static_asserts() {
    build_and_run("tests/abi_values.c", "abi_values", 1);
}

fn pingpong_all_sizes_checked() {
    build_and_run("tests/pingpong.c", "pingpong", 2);
}

fn wildcards_status_and_requests() {
    build_and_run("tests/wildcards.c", "wildcards", 4);
}

fn derived_datatypes_pack_correctly() {
    build_and_run("tests/datatypes.c", "datatypes", 2);
}

fn ownership_passing_in_c() {
    build_and_run("tests/opi.c", "opi", 2);
}

fn communicators_and_groups() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    // More ranks than cores.
    build_and_run("tests/comms.c", "comms", (cores + 3).max(5));
}

fn malloc_is_the_shared_heap() {
    build_and_run("tests/heap.c", "heap", 3);
}

fn c_heap_stays_private_with_hmpi_malloc_system() {
    let exe = compile("tests/heap.c", &[], &[]);
    run_passes(&exe, "heap", 2, &[("HMPI_MALLOC", "system")]);
}

fn malloc_before_init_without_launcher() {
    // Alone, a program is a world of one: glibc serves malloc until
    // MPI_Init attaches the heap; realloc then moves blocks into it.
    let exe = compile("tests/heap.c", &[], &[]);
    let o = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_path())
        .output()
        .expect("run heap alone");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.lines().any(|l| l == "rank 0: heap passed"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn error_classes_for_bad_arguments() {
    build_and_run("tests/errors.c", "errors", 2);
}

fn errors_are_fatal_by_default() {
    let exe = compile("tests/fatal.c", &[], &[]);
    let report = launch(&exe, 2, &[]);
    let d = rank_tests::describe(&report);
    assert!(!report.success() && !report.timed_out, "{d}");
    // Rank 1 sent to a rank that does not exist: the default handler
    // printed why and ended the job with MPI_ERR_RANK's class.
    assert_eq!(report.first_failure, Some(1), "{d}");
    assert_eq!(report.ranks[1].status, RankStatus::Exited(6), "{d}");
    let err = String::from_utf8_lossy(&report.ranks[1].stderr);
    assert!(
        err.contains("MPI_Send") && err.contains("MPI_ERR_RANK"),
        "{d}"
    );
    // Rank 0 was blocked in a receive: the launcher ended it.
    assert_ne!(report.ranks[0].status, RankStatus::Exited(0), "{d}");
}

fn threads_on_separate_communicators() {
    build_and_run("tests/threads.c", "threads", 2);
}

fn static_library_links_and_runs() {
    let exe = compile("tests/heap.c", &[], &[("HMPI_LINK", "static")]);
    // No libhmpi.so: the program carries the library (and its malloc).
    let o = Command::new("ldd")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", lib_path())
        .output()
        .expect("run ldd");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("libhmpi"));
    run_passes(&exe, "heap", 2, &[]);
}

fn pingpong_example_runs() {
    let exe = compile("examples/pingpong.c", &[], &[]);
    let report = launch(&exe, 2, &[("HMPI_PINGPONG_QUICK", "1")]);
    let out = String::from_utf8_lossy(&report.ranks[0].stdout);
    assert!(report.success(), "{}", rank_tests::describe(&report));
    // A header, then one line per size (quick: 0, 8, 1 KiB, 64 KiB, 1 MiB,
    // 4 MiB) with latency and bandwidth.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert!(out.contains("latency (us)") && rows.len() == 6, "{out}");
    assert!(
        rows[5].split_whitespace().next() == Some("4194304"),
        "{out}"
    );
}
