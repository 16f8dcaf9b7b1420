//! rsmpi's own example programs, built against this crate and run.
//!
//! The examples ship in the `mpi` crate's package (0.8) in cargo's
//! registry; they are taken from cargo's copy there (never copied into
//! this repository). A scratch package under the workspace's `target/`
//! lists each as an `[[example]]` pointing at the registry file, with this
//! crate as its `mpi` dependency, so that every example builds unchanged
//! in one `cargo build --examples --keep-going`. Each example that builds
//! runs under the launcher (`hmpirun`'s library) at the rank counts it
//! expects (2, 3 and 4 unless it asks for others), and its exit status is
//! checked (its own assertions included).
//!
//! Examples that need what this crate does not provide yet are listed in
//! [`UNSUPPORTED`] with the reason; every other example must build and
//! exit 0. Without the registry copy the test says so and passes (run
//! `cargo fetch` in `benches/hmpi-bench`, or `scripts/setup`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hmpi_core::launch::Launcher;

/// The rank counts an example runs at unless it asks for others: the
/// 2–4 that rsmpi's examples are written for, an odd count among them.
const DEFAULT_RANKS: &[u32] = &[2, 3, 4];

/// Examples that expect rank counts of their own: `cartesian` skips its
/// checks below 4 ranks, `cartesian_map` maps onto a 2 × (size/4) grid.
const RANKS: &[(&str, &[u32])] = &[("cartesian", &[4]), ("cartesian_map", &[4, 8])];

/// Examples this crate cannot build or run yet, and why.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "spawn",
        "dynamic process creation is refused (with its error)",
    ),
    (
        "spawn_multiple",
        "dynamic process creation is refused (with its error)",
    ),
];

/// Unsupported examples that would hang rather than fail: built, not run.
const NOT_RUN: &[&str] = &[];

fn main() {
    let Some(rsmpi) = registry_copy() else {
        println!(
            "rsmpi_examples: skipped: no registry copy of the `mpi` crate 0.8 \
             (run `cargo fetch` in benches/hmpi-bench, or scripts/setup)"
        );
        return;
    };
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let workspace = here.join("../..").canonicalize().expect("workspace root");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let names = example_names(&rsmpi);
    assert!(!names.is_empty(), "no examples in {}", rsmpi.display());
    let pkg = target.join("rsmpi-examples");
    write_package(&pkg, &here, &rsmpi, &names, &workspace);

    println!(
        "rsmpi_examples: building {} examples of {}",
        names.len(),
        rsmpi.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&pkg)
        .env("CARGO_TARGET_DIR", &target)
        .args([
            "build",
            "--examples",
            "--keep-going",
            "--message-format=json",
        ])
        .output()
        .expect("run cargo");
    let errors = compile_errors(&String::from_utf8_lossy(&out.stdout));
    if !out.status.success() && errors.is_empty() {
        // Cargo itself failed (resolution, a dependency): say why.
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }

    let unsupported: BTreeMap<&str, &str> = UNSUPPORTED.iter().copied().collect();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for name in &names {
        let bin = target.join("debug/examples").join(name);
        let outcome = if let Some(e) = errors.get(name.as_str()) {
            Err(format!("does not compile: {e}"))
        } else if !bin.exists() {
            Err("not built".to_string())
        } else if NOT_RUN.contains(&name.as_str()) {
            Err("builds; not run".to_string())
        } else {
            ranks(name)
                .iter()
                .try_for_each(|&n| run(&bin, n).map_err(|e| format!("{n} ranks: {e}")))
        };
        let verdict = match (&outcome, unsupported.get(name.as_str())) {
            (Ok(()), None) => "runs".to_string(),
            (Ok(()), Some(_)) => "runs (listed as unsupported: take it off the list)".to_string(),
            (Err(e), Some(why)) => format!("unsupported ({why}): {e}"),
            (Err(e), None) => {
                failures.push(name.clone());
                format!("FAILS: {e}")
            }
        };
        table.push(format!("{name:32} {verdict}"));
    }
    for line in &table {
        println!("{line}");
    }
    let runs = table.iter().filter(|l| l.contains(" runs")).count();
    println!(
        "rsmpi_examples: {runs} of {} run; {} unsupported; {} failing",
        names.len(),
        unsupported.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "examples that should run failed: {failures:?}"
    );
}

/// The highest `mpi-0.8.*` in cargo's registry sources.
fn registry_copy() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let mut found = Vec::new();
    for index in std::fs::read_dir(home.join("registry/src")).ok()?.flatten() {
        for krate in std::fs::read_dir(index.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = krate.file_name().to_string_lossy().into_owned();
            if let Some(patch) = name.strip_prefix("mpi-0.8.") {
                if let Ok(p) = patch.parse::<u32>() {
                    if krate.path().join("examples").is_dir() {
                        found.push((p, krate.path()));
                    }
                }
            }
        }
    }
    found.sort();
    found.pop().map(|(_, p)| p)
}

fn example_names(rsmpi: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(rsmpi.join("examples"))
        .expect("examples directory")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The scratch package: every example of `rsmpi` as an `[[example]]`,
/// this crate as `mpi`; the workspace's lock file, so that dependencies
/// resolve to the versions (and build artifacts) the workspace uses.
fn write_package(pkg: &Path, here: &Path, rsmpi: &Path, names: &[String], workspace: &Path) {
    std::fs::create_dir_all(pkg).expect("create the scratch package");
    let mut toml = String::from(
        "# Generated by crates/mpi-compat/tests/rsmpi_examples.rs: rsmpi's examples\n\
         # (from cargo's registry copy) built against hmpi-mpi.\n\
         [package]\nname = \"rsmpi-examples-on-hmpi\"\nversion = \"0.0.0\"\n\
         edition = \"2021\"\npublish = false\n\n[workspace]\n\n[lib]\npath = \"lib.rs\"\n\n\
         # rsmpi's features and configuration names, which its examples test.\n\
         [features]\ndefault = [\"user-operations\", \"complex\"]\nuser-operations = []\n\
         derive = []\ncomplex = [\"mpi/complex\"]\n\n\
         [lints.rust]\nunexpected_cfgs = { level = \"warn\", check-cfg = [\"cfg(msmpi)\"] }\n\n",
    );
    toml.push_str(&format!(
        "[dependencies]\nmpi = {{ package = \"hmpi-mpi\", path = {:?}, features = [\"derive\"] }}\n\
         num-complex = \"0.4\"\n\n",
        here.display().to_string()
    ));
    for n in names {
        let path = rsmpi.join("examples").join(format!("{n}.rs"));
        toml.push_str(&format!(
            "[[example]]\nname = {n:?}\npath = {:?}\n\n",
            path.display().to_string()
        ));
    }
    std::fs::write(pkg.join("Cargo.toml"), toml).expect("write Cargo.toml");
    std::fs::write(
        pkg.join("lib.rs"),
        "//! Empty: the package is its examples.\n",
    )
    .expect("write lib.rs");
    let lock = workspace.join("Cargo.lock");
    if lock.exists() {
        std::fs::copy(lock, pkg.join("Cargo.lock")).expect("copy Cargo.lock");
    }
}

/// The first error message of each example that failed to compile, from
/// cargo's JSON messages (one object a line).
fn compile_errors(json: &str) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for line in json.lines() {
        if !line.contains("\"reason\":\"compiler-message\"")
            || !line.contains("\"level\":\"error\"")
        {
            continue;
        }
        let Some(target) = field_after(line, "\"target\":", "\"name\":\"") else {
            continue;
        };
        let Some(msg) = field_after(line, "\"message\":{", "\"message\":\"") else {
            continue;
        };
        errors.entry(target).or_insert(msg);
    }
    errors
}

/// The JSON string value that follows `key` after the first `anchor`.
fn field_after(line: &str, anchor: &str, key: &str) -> Option<String> {
    let rest = &line[line.find(anchor)? + anchor.len()..];
    let rest = &rest[rest.find(key)? + key.len()..];
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push(' '),
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
    None
}

fn ranks(name: &str) -> &'static [u32] {
    RANKS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(DEFAULT_RANKS, |&(_, r)| r)
}

/// Runs `bin` on `ranks` ranks; `Err` with the failing rank's last
/// standard-error line.
fn run(bin: &Path, ranks: u32) -> Result<(), String> {
    let report = Launcher::new(bin, ranks)
        .timeout(Duration::from_secs(60))
        .capture_output(true)
        .run()
        .map_err(|e| format!("launch: {e}"))?;
    if report.success() {
        return Ok(());
    }
    let why = report
        .first_failure
        .and_then(|i| report.ranks.get(i))
        .map(|r| {
            let err = String::from_utf8_lossy(&r.stderr);
            let line = err
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            format!("rank {} {:?}: {line}", r.rank, r.status)
        })
        .unwrap_or_default();
    let timeout = if report.timed_out { " (timed out)" } else { "" };
    Err(format!("exit {}{timeout} {why}", report.exit_code()))
}
