//! Compiles `src/pcontrol.c` into libhmpi: `MPI_Pcontrol` and
//! `PMPI_Pcontrol` are variadic, which stable Rust cannot define.
//!
//! Nothing in Rust calls them, so the object is linked whole
//! (`+whole-archive`): the static library carries it as a member, and the
//! shared library would otherwise drop it. rustc's version script for the
//! shared library exports only the Rust `#[no_mangle]` symbols (`local:
//! *` for the rest), so a second version script exports these two.
//! Linkers that merge version scripts (LLD, rustc's default linker on
//! x86_64 Linux since Rust 1.90) accept it; GNU ld refuses to combine two,
//! which a trial link detects: there the shared library is built without
//! them (with a warning) and only the static library has them.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/pcontrol.c");
    println!("cargo:rerun-if-changed=include/mpi.h");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));

    cc::Build::new()
        .file("src/pcontrol.c")
        .include("include")
        .warnings(true)
        .extra_warnings(true)
        // The link line below is ours (whole archive).
        .cargo_metadata(false)
        .compile("hmpi_pcontrol");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static:+whole-archive=hmpi_pcontrol");

    let map = out.join("pcontrol.map");
    fs::write(
        &map,
        "{\n  global:\n    MPI_Pcontrol;\n    PMPI_Pcontrol;\n};\n",
    )
    .expect("write the version script");
    if linker_merges_version_scripts(&out) {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            map.display()
        );
    } else {
        println!(
            "cargo:warning=the linker does not merge version scripts (GNU ld?): \
             libhmpi.so will not export MPI_Pcontrol/PMPI_Pcontrol (libhmpi.a has them); \
             link with LLD to export them"
        );
    }
}

/// Whether rustc, linking a cdylib for this target with this build's flags,
/// accepts a second version script.
fn linker_merges_version_scripts(out: &Path) -> bool {
    let dir = out.join("version-script-probe");
    if fs::create_dir_all(&dir).is_err() {
        return false;
    }
    let src = dir.join("probe.rs");
    let map = dir.join("probe.map");
    let written = fs::write(&src, "#[no_mangle]\npub extern \"C\" fn hmpi_probe() {}\n")
        .and_then(|()| fs::write(&map, "{\n  global:\n    hmpi_probe;\n};\n"));
    if written.is_err() {
        return false;
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.args([
        "--crate-type",
        "cdylib",
        "--crate-name",
        "hmpi_probe",
        "--edition",
        "2021",
    ])
    .arg("--out-dir")
    .arg(&dir)
    .arg(&src)
    .arg("-C")
    .arg(format!("link-arg=-Wl,--version-script={}", map.display()));
    if let Ok(target) = env::var("TARGET") {
        cmd.args(["--target", &target]);
    }
    if let Some(linker) = env::var_os("RUSTC_LINKER") {
        let mut arg = std::ffi::OsString::from("linker=");
        arg.push(linker);
        cmd.arg("-C").arg(arg);
    }
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}
