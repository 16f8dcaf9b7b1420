#!/usr/bin/env bash
# Builds libhmpi and lays out what a C program needs, in one place:
#
#   <target>/hmpi/lib/libhmpi.so, lib/libhmpi.a, lib/pkgconfig/hmpi.pc,
#                  lib/libmpi_abi.so.1 (-> libhmpi.so, the standard ABI's name)
#   <target>/hmpi/include/mpi.h (and opi.h, dart.h, shmem.h)
#   <target>/hmpi/bin/hmpicc, bin/hmpicxx, bin/hshmemcc, bin/hmpirun
#
# where <target> is $CARGO_TARGET_DIR, or target/ at the workspace root.
#
# Usage: ffi/build.sh [--debug] [--no-build] [--lib-dir DIR] [--prefix DIR]
#   --debug      the dev profile (default: release); prefix <target>/hmpi-debug
#   --no-build   do not run cargo: lay out what is in the profile's directory
#   --lib-dir    where cargo put libhmpi.so (default: <target>/ffi-release or debug)
#   --prefix     where to lay out (default: <target>/hmpi)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
profile=release
build=1
lib_dir=""
prefix=""
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) profile=debug ;;
        --no-build) build=0 ;;
        --lib-dir) lib_dir=$2; shift ;;
        --prefix) prefix=$2; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$PWD/$target ;; esac
# The release library is built as a cdylib and staticlib only, in a
# profile of its own (`ffi-release`, the release profile under another
# name): the manifest adds an rlib (so that `cargo test` builds the .so
# before the C tests), and for a crate that is also an rlib cargo runs no
# LTO. Without LTO every call from libhmpi into the engine crates stays a
# call through the GOT and nothing inlines across them: the C ping-pong
# took 75 ns one way against 66 with it (8 bytes, 2 ranks, same run). The
# profile's own directory keeps `cargo build --release --workspace`, which
# builds the library without LTO, from overwriting the one laid out here.
if [ "$profile" = release ]; then lib_profile=ffi-release; else lib_profile=debug; fi
bin_dir=$target/$profile
if [ -z "$lib_dir" ]; then
    lib_dir=$target/$lib_profile
else
    bin_dir=$lib_dir
fi
if [ -z "$prefix" ]; then
    if [ "$profile" = release ]; then prefix=$target/hmpi; else prefix=$target/hmpi-debug; fi
fi
if [ "$build" = 1 ]; then
    if [ "$profile" = release ]; then
        (cd "$root" && cargo rustc --profile ffi-release -p hmpi-ffi --lib --crate-type cdylib,staticlib \
            && cargo build --release -p hmpi-core --bin hmpirun)
    else
        (cd "$root" && cargo build -p hmpi-ffi && cargo build -p hmpi-core --bin hmpirun)
    fi
fi
for f in libhmpi.so libhmpi.a; do
    if [ ! -f "$lib_dir/$f" ]; then
        echo "build.sh: $lib_dir/$f is missing (build hmpi-ffi first, or drop --no-build)" >&2
        exit 1
    fi
done
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/bin"
prefix=$(cd "$prefix" && pwd)

# Copies into place atomically (concurrent layouts never see half a file).
put() {
    local tmp
    tmp="$2.tmp.$$"
    cp "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

put "$lib_dir/libhmpi.so" "$prefix/lib/libhmpi.so" 755
put "$lib_dir/libhmpi.a" "$prefix/lib/libhmpi.a" 644
# The standard ABI's library name, for programs built against another
# implementation of the MPI 5.0 ABI (they need only the routines they use).
ln -sfn libhmpi.so "$prefix/lib/libmpi_abi.so.1"
ln -sfn libhmpi.so "$prefix/lib/libmpi_abi.so"
for h in "$here"/include/*.h; do
    put "$h" "$prefix/include/$(basename "$h")" 644
done
put "$here/tools/hmpicc" "$prefix/bin/hmpicc" 755
put "$here/tools/hmpicc" "$prefix/bin/hmpicxx" 755
put "$here/tools/hmpicc" "$prefix/bin/hshmemcc" 755
if [ -f "$bin_dir/hmpirun" ]; then
    put "$bin_dir/hmpirun" "$prefix/bin/hmpirun" 755
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
sed -e "s|@prefix@|$prefix|" -e "s|@version@|$version|" "$here/tools/hmpi.pc.in" > "$prefix/lib/pkgconfig/hmpi.pc.tmp.$$"
mv -f "$prefix/lib/pkgconfig/hmpi.pc.tmp.$$" "$prefix/lib/pkgconfig/hmpi.pc"
echo "$prefix"
