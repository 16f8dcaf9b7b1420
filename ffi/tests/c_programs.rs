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
    ("reduce_local_every_op", reduce_local_every_op),
    (
        "derived_datatype_between_a_rust_rank_and_a_c_rank",
        derived_datatype_between_a_rust_rank_and_a_c_rank,
    ),
    (
        "collectives_blocking_nonblocking_persistent",
        collectives_blocking_nonblocking_persistent,
    ),
    (
        "topologies_and_neighbor_collectives",
        topologies_and_neighbor_collectives,
    ),
    ("large_count_collectives", large_count_collectives),
    ("ownership_passing_in_c", ownership_passing_in_c),
    ("communicators_and_groups", communicators_and_groups),
    (
        "intercommunicators_info_and_constructors",
        intercommunicators_info_and_constructors,
    ),
    (
        "many_communicators_reuse_their_ids",
        many_communicators_reuse_their_ids,
    ),
    ("malloc_is_the_shared_heap", malloc_is_the_shared_heap),
    (
        "malloc_before_init_without_launcher",
        malloc_before_init_without_launcher,
    ),
    (
        "mpi_works_after_malloc_used_up_the_arena",
        mpi_works_after_malloc_used_up_the_arena,
    ),
    ("random_calls_raise_no_signal", random_calls_raise_no_signal),
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
        "a_call_before_init_is_fatal_by_default",
        a_call_before_init_is_fatal_by_default,
    ),
    (
        "every_bad_handle_is_an_error_of_its_class",
        every_bad_handle_is_an_error_of_its_class,
    ),
    (
        "threads_on_separate_communicators",
        threads_on_separate_communicators,
    ),
    (
        "streams_and_communicator_hints",
        streams_and_communicator_hints,
    ),
    (
        "thread_endpoints_of_different_counts",
        thread_endpoints_of_different_counts,
    ),
    (
        "static_library_links_and_runs",
        static_library_links_and_runs,
    ),
    ("pingpong_example_runs", pingpong_example_runs),
    (
        "every_declared_function_links",
        every_declared_function_links,
    ),
    (
        "every_declared_function_is_exported",
        every_declared_function_is_exported,
    ),
    ("unsupported_routines_refuse", unsupported_routines_refuse),
    (
        "sessions_without_and_with_init",
        sessions_without_and_with_init,
    ),
    (
        "generalized_requests_and_error_classes",
        generalized_requests_and_error_classes,
    ),
    ("one_sided_windows_in_c", one_sided_windows_in_c),
    (
        "persistent_point_to_point_restarted",
        persistent_point_to_point_restarted,
    ),
    (
        "partitioned_ring_with_threads",
        partitioned_ring_with_threads,
    ),
    (
        "large_count_point_to_point_and_isendrecv",
        large_count_point_to_point_and_isendrecv,
    ),
    (
        "attribute_callbacks_and_predefined_attributes",
        attribute_callbacks_and_predefined_attributes,
    ),
    (
        "buffered_sends_within_the_attached_buffer",
        buffered_sends_within_the_attached_buffer,
    ),
    ("large_count_packing", large_count_packing),
    (
        "subarray_halo_darray_contents_external32",
        subarray_halo_darray_contents_external32,
    ),
    (
        "unsupported_routine_is_fatal_by_default",
        unsupported_routine_is_fatal_by_default,
    ),
    ("pgas_headers_are_clean", pgas_headers_are_clean),
    ("dart_global_memory_in_c", dart_global_memory_in_c),
    ("openshmem_program_in_c", openshmem_program_in_c),
    (
        "openshmem_non_symmetric_address_ends_the_job",
        openshmem_non_symmetric_address_ends_the_job,
    ),
];

fn main() {
    rank_tests::main(
        |role| match role {
            "rust-and-c" => {
                rust_and_c_rank();
                Some(())
            }
            _ => None,
        },
        TESTS,
    );
}

/// A particle as the Rust rank and the C rank (`tests/derived_rust.c`)
/// both lay it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, hmpi_core::datatype::Equivalence)]
#[equivalence(crate = "hmpi_core")]
#[repr(C)]
struct Particle {
    pos: [f64; 3],
    mass: f64,
    id: i64,
}

/// Rank 0 of the mixed job: a vector of a derived struct datatype, built
/// in Rust, to the C rank and back. Rank 1 becomes the C program.
fn rust_and_c_rank() {
    use hmpi_core::datatype::{Buffer, Equivalence, UserDatatype};
    use hmpi_core::traits::*;
    if std::env::var("HMPI_RANK").as_deref() == Ok("1") {
        use std::os::unix::process::CommandExt;
        let c = std::env::var("HMPI_TEST_C_PROGRAM").expect("the C program");
        let e = Command::new(c).exec();
        panic!("exec the C program: {e}");
    }
    let universe = hmpi_core::init().expect("init");
    let world = universe.world();
    let every_other = UserDatatype::vector(4, 1, 2, &Particle::equivalent_datatype()).unwrap();
    let ps: Vec<Particle> = (0..8)
        .map(|i| Particle {
            pos: [i as f64, i as f64 * 0.5, -(i as f64)],
            mass: 1.0 + i as f64,
            id: 1000 + i,
        })
        .collect();
    let c = world.process_at_rank(1);
    c.send_with_datatype(&ps[..], 1, &every_other, 7).unwrap();
    let mut back = vec![Particle::default(); 8];
    let st = c
        .receive_into_with_datatype(&mut back[..], 1, &every_other, 8)
        .unwrap();
    assert_eq!(
        st.byte_count() as usize,
        every_other.packed_size(1).unwrap()
    );
    for (i, (b, p)) in back.iter().zip(&ps).enumerate() {
        if i % 2 == 0 {
            assert_eq!(
                *b,
                Particle {
                    mass: p.mass * 2.0,
                    id: p.id + 1,
                    ..*p
                }
            );
        } else {
            assert_eq!(
                *b,
                Particle::default(),
                "untouched between the vector's blocks"
            );
        }
    }
    assert_eq!(ps[..].as_bytes().len(), 8 * 40);
    println!("rank 0: derived passed");
}

fn derived_datatype_between_a_rust_rank_and_a_c_rank() {
    let c = compile("tests/derived_rust.c", &[], &[]);
    let me = std::env::current_exe().expect("this test binary");
    let report = Launcher::new(&me, 2)
        .env("LD_LIBRARY_PATH", lib_path())
        .env(rank_tests::ROLE_VAR, "rust-and-c")
        .env("HMPI_TEST_C_PROGRAM", &c)
        .capture_output(true)
        .timeout(Duration::from_secs(120))
        .run()
        .expect("launch ranks");
    for r in &report.ranks {
        let line = format!("rank {}: derived passed", r.rank);
        assert!(
            report.success()
                && String::from_utf8_lossy(&r.stdout)
                    .lines()
                    .any(|l| l == line),
            "{}",
            rank_tests::describe(&report)
        );
    }
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
            // It prints the prefix on stdout, which the test harness does
            // not capture for a child: a stray path in the test output.
            .stdout(std::process::Stdio::null())
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
    // The headers alone, as several C and C++ standards (C++98 too:
    // mpi.h and opi.h promise it).
    headers_are_clean(&["mpi.h", "opi.h"], &["-std=c++98"]);
}

/// Each of `headers` alone compiles with `-Werror -pedantic` as C99, C11,
/// C17, C++11 and C++20, and as the `extra_cxx` C++ standards.
fn headers_are_clean(headers: &[&str], extra_cxx: &[&str]) {
    let k = kit();
    let c = ["-std=c99", "-std=c11", "-std=c17"].map(|s| ("hmpicc", s, "c"));
    let cxx = extra_cxx
        .iter()
        .chain(&["-std=c++11", "-std=c++20"])
        .map(|&s| ("hmpicxx", s, "c++"));
    for header in headers {
        let path = k.prefix.join("include").join(header);
        for (tool, std, lang) in c.into_iter().chain(cxx.clone()) {
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

fn reduce_local_every_op() {
    build_and_run("tests/reduce_local.c", "reduce_local", 2);
}

fn collectives_blocking_nonblocking_persistent() {
    for ranks in [1, 2, 3, 5] {
        build_and_run("tests/collectives.c", "collectives", ranks);
    }
}

fn topologies_and_neighbor_collectives() {
    // 1 to 6 ranks: grids with periodic dimensions of 1 and 2 processes
    // (both neighbours the same process), and more ranks than cores.
    for ranks in 1..=6 {
        build_and_run("tests/topology.c", "topology", ranks);
    }
}

fn large_count_collectives() {
    // 2 ranks include the counts and displacements past INT_MAX.
    for ranks in [1, 2, 3] {
        build_and_run("tests/collectives_c.c", "collectives_c", ranks);
    }
}

fn ownership_passing_in_c() {
    build_and_run("tests/opi.c", "opi", 2);
}

fn intercommunicators_info_and_constructors() {
    // Uneven halves (2, 3, 5 ranks) and even ones (4 ranks).
    let exe = compile("tests/intercomm.c", &[], &[]);
    for ranks in [2, 3, 4, 5] {
        run_passes(&exe, "intercomm", ranks, &[]);
    }
}

fn communicators_and_groups() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    // More ranks than cores.
    build_and_run("tests/comms.c", "comms", (cores + 3).max(5));
}

fn many_communicators_reuse_their_ids() {
    build_and_run("tests/comm_ids.c", "comm_ids", 2);
}

fn malloc_is_the_shared_heap() {
    build_and_run("tests/heap.c", "heap", 3);
}

fn mpi_works_after_malloc_used_up_the_arena() {
    let exe = compile("tests/nomem.c", &[], &[]);
    run_passes(&exe, "nomem", 2, &[("HMPI_HEAP_PER_RANK", "64M")]);
}

/// Random calls (`tests/fuzz.c`) over several seeds on 2 and 3 ranks:
/// every rank must end normally (no signal, no abort, no hang). Calls per
/// rank: `HMPI_FUZZ_CALLS` (a longer run), 3000 by default.
fn random_calls_raise_no_signal() {
    let exe = compile("tests/fuzz.c", &[], &[]);
    let per_rank = std::env::var("HMPI_FUZZ_CALLS").unwrap_or_else(|_| "3000".into());
    let mut total = 0u64;
    for seed in 1..=4u32 {
        let seed_s = seed.to_string();
        let env = [
            ("HMPI_FUZZ_SEED", seed_s.as_str()),
            ("HMPI_FUZZ_CALLS", per_rank.as_str()),
        ];
        let report = run_passes(&exe, "fuzz", 2 + seed % 2, &env);
        for r in &report.ranks {
            let out = String::from_utf8_lossy(&r.stdout);
            let calls: u64 = out
                .lines()
                .find_map(|l| l.split(": ").nth(2)?.strip_suffix(" calls")?.parse().ok())
                .unwrap_or_else(|| panic!("rank {} did not count its calls:\n{out}", r.rank));
            total += calls;
        }
    }
    println!("fuzz: {total} calls over 4 seeds, no signal");
    if per_rank == "3000" {
        assert!(total >= 20_000, "only {total} calls");
    }
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

fn streams_and_communicator_hints() {
    let exe = compile("tests/streams.c", &[], &[]);
    run_passes(&exe, "streams", 2, &[("HMPI_VCIS", "4")]);
    // One VCI per rank: no stream to reserve, hints still checked.
    run_passes(&exe, "streams", 2, &[("HMPI_VCIS", "1")]);
}

fn thread_endpoints_of_different_counts() {
    let exe = compile("tests/endpoints.c", &[], &[]);
    run_passes(&exe, "endpoints", 2, &[("HMPI_VCIS", "4")]);
    // One VCI per rank: one endpoint each, on VCI 0.
    run_passes(&exe, "endpoints", 2, &[("HMPI_VCIS", "1")]);
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

/// The functions the installed `mpi.h` declares: `MPI_X` and `PMPI_X` for
/// each `HMPI_DECLARE(ret, X, (...))`, and the `HMPI_*` extensions.
fn declared_functions() -> Vec<String> {
    let path = kit().prefix.join("include").join("mpi.h");
    let text = std::fs::read_to_string(&path).expect("read mpi.h");
    // Without comments, which mention routine names too.
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("a comment ends");
        rest = &rest[i + end + 2..];
    }
    code.push_str(rest);
    let mut names = Vec::new();
    for line in code.lines() {
        let line = line.trim();
        if let Some(args) = line.strip_prefix("HMPI_DECLARE(") {
            let name = args
                .split(',')
                .nth(1)
                .expect("HMPI_DECLARE(ret, name, ...)")
                .trim();
            names.push(format!("MPI_{name}"));
            names.push(format!("PMPI_{name}"));
        } else if !line.starts_with('#') {
            // A plain prototype: `int HMPI_Xxx(...)`.
            let Some(open) = line.find('(') else { continue };
            if let Some(name) = line[..open].split_whitespace().last() {
                if ["HMPI_", "MPI_", "MPIX_", "PMPIX_"]
                    .iter()
                    .any(|p| name.starts_with(p))
                {
                    names.push(name.to_owned());
                }
            }
        }
    }
    let routines = names.iter().filter(|n| n.starts_with("MPI_")).count();
    // The MPI 5.0 standard ABI has 664 C routines (and their PMPI_ twins).
    assert_eq!(
        routines,
        664,
        "MPI_ routines declared in {}",
        path.display()
    );
    names
}

fn every_declared_function_links() {
    // A table of pointers to every function the header declares, generated
    // from the header (so it cannot drift from it): it compiles against the
    // standard prototypes, links (shared and static) and loads with every
    // symbol bound.
    let names = declared_functions();
    let mut c = String::from(
        "/* Generated by ffi/tests/c_programs.rs from mpi.h. */\n\
         #include <mpi.h>\n#include <stdio.h>\n\n\
         typedef void (*hmpi_any_fn)(void);\n\n\
         hmpi_any_fn const hmpi_every_function[] = {\n",
    );
    for n in &names {
        c.push_str(&format!("    (hmpi_any_fn){n},\n"));
    }
    c.push_str(
        "};\n\n\
         int main(void) {\n\
         \x20   size_t n = sizeof hmpi_every_function / sizeof hmpi_every_function[0], i, missing = 0;\n\
         \x20   for (i = 0; i < n; i++)\n\
         \x20       if (hmpi_every_function[i] == NULL) missing++;\n\
         \x20   printf(\"%zu functions, %zu missing\\n\", n, missing);\n\
         \x20   if (missing == 0) printf(\"every_function passed\\n\");\n\
         \x20   return missing != 0;\n\
         }\n",
    );
    let src = kit().out.join("every_function.c");
    std::fs::write(&src, c).expect("write every_function.c");
    for env in [&[][..], &[("HMPI_LINK", "static")][..]] {
        let exe = compile(src.to_str().expect("UTF-8 path"), &[], env);
        let o = Command::new(&exe)
            .env("LD_LIBRARY_PATH", lib_path())
            .env("LD_BIND_NOW", "1")
            .output()
            .expect("run every_function");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success()
                && out.contains(&format!("{} functions, 0 missing", names.len()))
                && out.lines().any(|l| l == "every_function passed"),
            "{env:?}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

fn every_declared_function_is_exported() {
    let lib = lib_path().join("libhmpi.so");
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exported: std::collections::BTreeSet<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| {
            // Functions: T (text) or i (indirect).
            matches!(l.split_whitespace().nth(1), Some("T" | "i"))
        })
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_owned)
        .collect();
    let declared: std::collections::BTreeSet<String> = declared_functions().into_iter().collect();
    let missing: Vec<&String> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "declared in mpi.h but not exported: {missing:?}"
    );
    // Both names of every routine, and nothing MPI-like that the header
    // does not declare.
    for n in declared.iter().filter(|n| n.starts_with("MPI_")) {
        assert!(declared.contains(&format!("P{n}")), "{n} without PMPI_");
    }
    let undeclared: Vec<&String> = exported
        .iter()
        .filter(|n| n.starts_with("MPI_") || n.starts_with("PMPI_"))
        .filter(|n| !declared.contains(*n))
        .collect();
    assert!(
        undeclared.is_empty(),
        "exported but not declared: {undeclared:?}"
    );
}

fn one_sided_windows_in_c() {
    for ranks in [1, 2, 3] {
        build_and_run("tests/rma.c", "rma", ranks);
    }
}

fn persistent_point_to_point_restarted() {
    // 1 rank: the ring is a process sending to itself; 4 and 5: more ranks
    // than cores.
    for ranks in [1, 2, 4, 5] {
        build_and_run("tests/persistent.c", "persistent", ranks);
    }
}

fn partitioned_ring_with_threads() {
    // 1 rank: a process sending to itself; 3: more ranks than cores.
    for ranks in [1, 2, 3] {
        build_and_run("tests/partitioned.c", "partitioned", ranks);
    }
}

fn large_count_point_to_point_and_isendrecv() {
    // 2 ranks: one message of 2^31 + 8 bytes; 1 and 3: the rest (3 is more
    // ranks than cores).
    for ranks in [1, 3, 2] {
        let report = run_passes(&compile("tests/p2p_c.c", &[], &[]), "p2p_c", ranks, &[]);
        if ranks == 2 {
            let out = String::from_utf8_lossy(&report.ranks[1].stdout);
            assert!(out.contains("received") || out.contains("skipped"), "{out}");
        }
    }
}

fn attribute_callbacks_and_predefined_attributes() {
    for ranks in [1, 3] {
        build_and_run("tests/attributes.c", "attributes", ranks);
    }
}

fn buffered_sends_within_the_attached_buffer() {
    for ranks in [1, 2, 4] {
        build_and_run("tests/bsend.c", "bsend", ranks);
    }
}

fn large_count_packing() {
    build_and_run("tests/pack_c.c", "pack_c", 1);
}

fn subarray_halo_darray_contents_external32() {
    for ranks in [2, 3] {
        build_and_run("tests/types_more.c", "types_more", ranks);
    }
}

fn unsupported_routines_refuse() {
    build_and_run("tests/unsupported.c", "unsupported", 2);
}

fn sessions_without_and_with_init() {
    let exe = compile("tests/sessions.c", &[], &[]);
    // Sessions alone (the runtime started and ended by them); 3 ranks is
    // more than cores.
    for ranks in [1, 2, 3] {
        run_passes(&exe, "sessions", ranks, &[]);
    }
    // With MPI_Init before or after the first session, and MPI_Finalize
    // before the last session ends.
    for (ranks, when) in [(1, "first"), (2, "first"), (2, "late")] {
        run_passes(&exe, "sessions", ranks, &[("SESSIONS_WITH_INIT", when)]);
    }
}

fn generalized_requests_and_error_classes() {
    let exe = compile("tests/grequest.c", &[], &[]);
    for ranks in [1, 3] {
        run_passes(&exe, "grequest", ranks, &[]);
    }
}

fn a_call_before_init_is_fatal_by_default() {
    let exe = compile("tests/preinit.c", &[], &[]);
    for call in [
        "MPI_Type_size",
        "MPI_Wait",
        "MPI_Test",
        "MPI_Waitany",
        "MPI_Request_free",
        "MPI_Cancel",
        "MPI_Start",
    ] {
        let report = launch(&exe, 1, &[("PREINIT_CALL", call)]);
        let d = rank_tests::describe(&report);
        // MPI_ERR_OTHER's class is the exit status.
        assert_eq!(
            report.ranks[0].status,
            RankStatus::Exited(16),
            "{call}: {d}"
        );
        let out = String::from_utf8_lossy(&report.ranks[0].stdout);
        assert!(out.contains("allowed routines work"), "{d}");
        assert!(!out.contains("still running"), "{d}");
        let err = String::from_utf8_lossy(&report.ranks[0].stderr);
        assert!(
            err.contains(&format!("{call}: MPI_Init has not been called"))
                && err.contains("MPI_ERR_OTHER"),
            "{d}"
        );
    }
}

fn every_bad_handle_is_an_error_of_its_class() {
    build_and_run("tests/badhandles.c", "badhandles", 2);
}

fn unsupported_routine_is_fatal_by_default() {
    let exe = compile("tests/unsupported.c", &[], &[]);
    let report = launch(&exe, 2, &[("HMPI_TEST_FATAL", "1")]);
    let d = rank_tests::describe(&report);
    assert!(!report.success() && !report.timed_out, "{d}");
    // Rank 1 called MPI_Comm_accept: the default handler named it and ended
    // the job with MPI_ERR_UNSUPPORTED_OPERATION's class.
    assert_eq!(report.first_failure, Some(1), "{d}");
    assert_eq!(report.ranks[1].status, RankStatus::Exited(55), "{d}");
    let err = String::from_utf8_lossy(&report.ranks[1].stderr);
    assert!(
        err.contains("MPI_Comm_accept: not supported by libhmpi")
            && err.contains("MPI_ERR_UNSUPPORTED_OPERATION"),
        "{d}"
    );
    assert!(
        !String::from_utf8_lossy(&report.ranks[1].stdout).contains("still running"),
        "{d}"
    );
    assert_ne!(report.ranks[0].status, RankStatus::Exited(0), "{d}");
}

/// `dart.h` and `shmem.h` alone, as several C and C++ standards.
fn pgas_headers_are_clean() {
    headers_are_clean(&["dart.h", "shmem.h"], &[]);
}

fn dart_global_memory_in_c() {
    // 3 and 4 ranks: more ranks than cores.
    let exe = compile("tests/dart.c", &[], &[]);
    for ranks in [1, 2, 3, 4] {
        run_passes(&exe, "dart", ranks, &[]);
    }
}

fn openshmem_program_in_c() {
    // Built as an OpenSHMEM user builds it: hshmemcc, C11 (the
    // type-generic names) and C99 (without them).
    let k = kit();
    let src = manifest_dir().join("tests/shmem.c");
    for std in ["-std=c11", "-std=c99"] {
        let exe = k.out.join(format!("shmem{std}"));
        let o = Command::new(k.prefix.join("bin").join("hshmemcc"))
            .args([std, "-Wall", "-Wextra", "-pedantic", "-Werror", "-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect("run hshmemcc");
        assert!(
            o.status.success(),
            "hshmemcc {std} shmem.c: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // 3 and 4 ranks: more ranks than cores.
        for ranks in [1, 2, 3, 4] {
            run_passes(&exe, "shmem", ranks, &[]);
        }
    }
}

fn openshmem_non_symmetric_address_ends_the_job() {
    let exe = compile("tests/shmem.c", &[], &[]);
    let report = launch(&exe, 3, &[("SHMEM_TEST_BAD_ADDRESS", "1")]);
    let d = rank_tests::describe(&report);
    assert!(!report.success() && !report.timed_out, "{d}");
    // The last PE put to a stack variable: it printed why and ended the
    // job (as shmem_global_exit(1)); nobody got past the barrier.
    assert_eq!(report.first_failure, Some(2), "{d}");
    assert_eq!(report.ranks[2].status, RankStatus::Exited(1), "{d}");
    let err = String::from_utf8_lossy(&report.ranks[2].stderr);
    assert!(
        err.contains("shmem_putmem") && err.contains("not in the symmetric heap"),
        "{d}"
    );
    for r in &report.ranks {
        assert!(
            !String::from_utf8_lossy(&r.stdout).contains("returned"),
            "{d}"
        );
    }
}
