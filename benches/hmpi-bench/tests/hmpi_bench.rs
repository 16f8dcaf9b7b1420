//! `hmpi-bench` end to end, hmpi backend only (no system MPI needed): the
//! message workloads at a tiny size range, through the launcher, with the
//! CSV checked for every size and sane values; `opi --quick` (without the
//! iceoryx2 peer); `coll --quick` (every collective, 2 ranks) and `coll`
//! on 4 ranks; `msgrate-mt` (every backend, 1 and 2 threads); and `compare`
//! with no peers.
//! The MPI peers are exercised by CI's short `compare` (`.ci/run`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_hmpi-bench");

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hmpi-bench-test-{}-{name}", std::process::id()))
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run hmpi-bench");
    eprintln!(
        "hmpi-bench {}: {}\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One CSV row: (workload, backend, threads, size, value, unit, min, max).
type Row = (String, String, u32, usize, f64, String, f64, f64);

fn read_csv(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).expect("the CSV was written");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("workload,backend,threads,size,value,unit,min,max")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 8, "{l}");
            (
                f[0].to_owned(),
                f[1].to_owned(),
                f[2].parse().expect("threads"),
                f[3].parse().expect("size"),
                f[4].parse().expect("value"),
                f[5].to_owned(),
                f[6].parse().expect("min"),
                f[7].parse().expect("max"),
            )
        })
        .collect()
}

/// Every row is hmpi's, for 2 ranks, with finite positive values in order.
fn check_rows(rows: &[Row], workload: &str, unit: &str, sizes: &[usize]) {
    let got: Vec<usize> = rows.iter().map(|r| r.3).collect();
    assert_eq!(got, sizes);
    for (w, b, threads, size, value, u, min, max) in rows {
        assert_eq!(
            (w.as_str(), b.as_str(), *threads, u.as_str()),
            (workload, "hmpi", 2, unit)
        );
        for v in [value, min, max] {
            assert!(v.is_finite() && *v > 0.0, "{workload} {size}: {v}");
        }
        assert!(
            min <= value && value <= max,
            "{workload} {size}: {min} {value} {max}"
        );
    }
}

#[test]
fn latency_at_tiny_sizes_writes_a_sane_csv() {
    let csv = tmp("latency.csv");
    let out = run(&[
        "latency",
        "--sizes",
        "0-64",
        "--reps",
        "2",
        "--quick",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("latency (us"), "{stdout}");
    check_rows(
        &read_csv(&csv),
        "latency",
        "us",
        &[0, 1, 2, 4, 8, 16, 32, 64],
    );
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn window_workloads_write_sane_csvs() {
    for (workload, unit) in [("bw", "MB/s"), ("bibw", "MB/s"), ("msgrate", "Mmsg/s")] {
        let csv = tmp(&format!("{workload}.csv"));
        let out = run(&[
            workload,
            "--sizes",
            "8-1K",
            "--reps",
            "1",
            "--quick",
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{workload}");
        check_rows(
            &read_csv(&csv),
            workload,
            unit,
            &[8, 16, 32, 64, 128, 256, 512, 1024],
        );
        std::fs::remove_file(&csv).unwrap();
    }
}

#[test]
fn opi_quick_measures_the_target_sizes_alternately_too() {
    let csv = tmp("opi.csv");
    let out = run(&["opi", "--quick", "--csv", csv.to_str().unwrap()]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("opi-latency (ns"), "{stdout}");
    // The 4 MiB / 8 B target is judged from the alternate measurement.
    assert!(
        stdout.contains("4 MiB / 8 B: ")
            && stdout.contains("(measured alternately, median of the rounds' ratios)"),
        "{stdout}"
    );
    let rows = read_csv(&csv);
    let sizes_of = |backend: &str| -> Vec<usize> {
        rows.iter()
            .filter(|r| r.0 == "opi-latency" && r.1 == backend)
            .map(|r| r.3)
            .collect()
    };
    assert_eq!(
        sizes_of("hmpi-opi"),
        [8, 1 << 10, 64 << 10, 1 << 20, 4 << 20]
    );
    assert_eq!(sizes_of("hmpi-opi-paired"), [8, 4 << 20]);
    // The verdict's figure: the median of the paired rounds' own ratios.
    let ratios: Vec<_> = rows.iter().filter(|r| r.0 == "opi-ratio").collect();
    assert_eq!(ratios.len(), 1, "{rows:?}");
    assert_eq!(
        (ratios[0].1.as_str(), ratios[0].3),
        ("hmpi-opi-paired", 4 << 20)
    );
    for (w, b, ranks, size, value, unit, min, max) in &rows {
        assert!(
            value.is_finite() && *value > 0.0 && min <= value && value <= max,
            "{w} {b} {size}: {min} {value} {max}"
        );
        let want = if w == "opi-ratio" { "x" } else { "ns" };
        assert_eq!(unit, want, "{w} {b}");
        assert!(*ranks == 2 || w == "opi-pool", "{w} {b} {ranks}");
    }
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn compare_without_peers_runs_hmpi() {
    let csv = tmp("compare.csv");
    let out = run(&[
        "compare",
        "latency,bw",
        "--peers",
        "none",
        "--sizes",
        "4K",
        "--reps",
        "1",
        "--quick",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let rows = read_csv(&csv);
    check_rows(&rows[..1], "latency", "us", &[4096]);
    check_rows(&rows[1..], "bw", "MB/s", &[4096]);
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn bad_command_lines_exit_2() {
    for args in [
        &["compare", "nosuch"][..],
        &["latency", "--sizes", "3"],
        &["compare", "latency", "--peers", "lam"],
        &["bw", "--plot", "x.txt"],
        &["latency", "--peers", "mpich"],
        &["msgrate-mt", "--peers", "lam"],
        &["latency", "--threads", "2"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[cfg(feature = "plots")]
#[test]
fn plot_draws_one_benchmark_of_a_results_file() {
    let csv = tmp("results.csv");
    let png = tmp("results.png");
    let mut text =
        String::from("benchmark,date,workload,backend,threads,size,value,unit,min,max\n");
    for threads in [1, 2] {
        for size in [16, 64, 256] {
            for (backend, v) in [("shmheap", 100.0), ("glibc", 30.0)] {
                text += &format!(
                    "alloc,2026-11-21,alloc-free,{backend},{threads},{size},{v},Mpairs/s,,\n"
                );
            }
        }
    }
    text += "opi,2026-11-27,opi-pool,hmpi-opi,1,8,14.0,ns,13.7,14.5\n";
    std::fs::write(&csv, text).unwrap();
    let (c, p) = (csv.to_str().unwrap(), png.to_str().unwrap());
    let out = run(&["plot", "--csv", c, "--out", p, "--benchmark", "alloc"]);
    assert!(out.status.success());
    let bytes = std::fs::read(&png).expect("the PNG was written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A panel per thread count, side by side (IHDR width and height).
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (1800, 620));
    // One size is no curve; no rows, or no file, is a failure.
    for bench in ["opi", "p2p"] {
        let out = run(&["plot", "--csv", c, "--out", p, "--benchmark", bench]);
        assert_eq!(out.status.code(), Some(1), "{bench}");
    }
    std::fs::remove_file(&csv).unwrap();
    let out = run(&["plot", "--csv", c, "--out", p]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_file(&png);
}

/// The collectives OSU measures, in `hmpi-bench coll`'s order.
const COLLECTIVES: [&str; 9] = [
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
    "reduce_scatter_block",
];

/// The rows of `workload`, checked as hmpi's at `ranks` ranks in µs at
/// `sizes` (the barrier at size 0 alone).
fn check_coll_rows(rows: &[Row], workload: &str, ranks: u32, sizes: &[usize]) {
    let mine: Vec<&Row> = rows.iter().filter(|r| r.0 == workload).collect();
    let got: Vec<usize> = mine.iter().map(|r| r.3).collect();
    let want: &[usize] = if workload == "barrier" { &[0] } else { sizes };
    assert_eq!(got, want, "{workload}");
    for (w, b, threads, size, value, u, min, max) in mine {
        assert_eq!(
            (b.as_str(), *threads, u.as_str()),
            ("hmpi", ranks, "us"),
            "{w}"
        );
        assert!(
            value.is_finite() && *value > 0.0 && min <= value && value <= max,
            "{w} {size}: {min} {value} {max}"
        );
    }
}

#[test]
fn coll_quick_measures_every_collective() {
    let csv = tmp("coll.csv");
    let out = run(&[
        "coll",
        "--quick",
        "--reps",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("allreduce (us"), "{stdout}");
    let rows = read_csv(&csv);
    for w in COLLECTIVES {
        check_coll_rows(&rows, w, 2, &[8, 1 << 10, 64 << 10, 1 << 20]);
    }
    assert_eq!(rows.len(), 1 + 8 * 4);
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn coll_runs_on_more_ranks_than_cores() {
    let csv = tmp("coll4.csv");
    let out = run(&[
        "coll",
        "--ranks",
        "4",
        "--workloads",
        "barrier,gather,alltoall,reduce_scatter_block",
        "--sizes",
        "8-64",
        "--quick",
        "--reps",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let rows = read_csv(&csv);
    for w in ["barrier", "gather", "alltoall", "reduce_scatter_block"] {
        check_coll_rows(&rows, w, 4, &[8, 16, 32, 64]);
    }
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn compare_coll_without_peers_runs_hmpi() {
    let csv = tmp("compare-coll.csv");
    let out = run(&[
        "compare",
        "coll",
        "--workloads",
        "barrier,allreduce",
        "--peers",
        "none",
        "--sizes",
        "8",
        "--reps",
        "1",
        "--quick",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let rows = read_csv(&csv);
    check_coll_rows(&rows, "barrier", 2, &[8]);
    check_coll_rows(&rows, "allreduce", 2, &[8]);
    std::fs::remove_file(&csv).unwrap();
}

#[test]
fn msgrate_mt_measures_every_backend_for_each_thread_count() {
    let csv = tmp("msgrate-mt.csv");
    let out = run(&[
        "msgrate-mt",
        "--threads",
        "1,2",
        "--reps",
        "2",
        "--quick",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("streams / everywhere"), "{stdout}");
    let rows = read_csv(&csv);
    let mut got: Vec<(String, u32)> = rows.iter().map(|r| (r.1.clone(), r.2)).collect();
    got.sort();
    let mut want = Vec::new();
    for b in [
        "endpoints",
        "everywhere",
        "hints",
        "one-vci",
        "overtaking",
        "streams",
    ] {
        for n in [1, 2] {
            want.push((b.to_owned(), n));
        }
    }
    assert_eq!(got, want);
    for (w, _, _, size, value, unit, min, max) in &rows {
        assert_eq!(
            (w.as_str(), *size, unit.as_str()),
            ("msgrate-mt", 8, "Mmsg/s")
        );
        assert!(value.is_finite() && *value > 0.0 && min <= value && value <= max);
    }
    std::fs::remove_file(&csv).unwrap();
    // Out of range: a usage error.
    assert_eq!(
        run(&["msgrate-mt", "--threads", "8"]).status.code(),
        Some(2)
    );
}
