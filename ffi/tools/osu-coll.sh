#!/usr/bin/env bash
# Builds the OSU micro-benchmarks' collective programs, unchanged, with
# hmpicc, and runs each under hmpirun on 2 and then 4 ranks over a short
# size range; fails if any program fails to build or exits non-zero.
#
# The OSU sources are not part of hmpi: pass a copy of them (7.x layout,
# c/mpi/collective/{blocking,non_blocking,persistent} and c/util; the 5.x
# layout mpi/collective is accepted too). They are configured with their
# own configure (CC=hmpicc) in a scratch build directory; the source
# directory is not written to.
#
# Usage: ffi/tools/osu-coll.sh [--prefix DIR] [--ranks "2 4"] [--max-size N]
#                              [--iterations N] [--skip "DIR…"] [--keep DIR]
#                              OSU_SOURCE_DIR
#   --prefix DIR     the libhmpi layout with bin/hmpicc and bin/hmpirun
#                    (default: <target>/hmpi from ffi/build.sh, else
#                    <target>/hmpi-debug from ffi/build.sh --debug)
#   --ranks LIST     rank counts to run with (default "2 4")
#   --max-size N     largest message size in bytes (default 65536)
#   --iterations N   timed iterations per size (default 20)
#   --skip LIST      subdirectories of the collective programs not to run,
#                    e.g. "neighborhood" (default: none)
#   --no-validate    do not pass -c (OSU 7.x checks every result with -c,
#                    which the script passes by default to all but the
#                    barriers; 5.x has no -c)
#   --keep DIR       build and log in DIR and keep it (default: a temporary
#                    directory, removed at the end)
#
# Prints one line per program and rank count (ok / FAILED), the list of
# programs that ran, and exits 1 if any failed (its log is printed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
prefix=""
ranks="2 4"
max_size=65536
iterations=20
keep=""
skip=""
validate=1
src=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift ;;
        --ranks) ranks=$2; shift ;;
        --max-size) max_size=$2; shift ;;
        --iterations) iterations=$2; shift ;;
        --keep) keep=$2; shift ;;
        --skip) skip=$2; shift ;;
        --no-validate) validate=0 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        -*) echo "osu-coll.sh: unknown option $1" >&2; exit 2 ;;
        *) [ -z "$src" ] || { echo "osu-coll.sh: one source directory only" >&2; exit 2; }
           src=$1 ;;
    esac
    shift
done
if [ -z "$src" ] || [ ! -d "$src" ]; then
    echo "osu-coll.sh: the OSU micro-benchmarks source directory is missing (see --help)" >&2
    exit 2
fi
case "$max_size$iterations${ranks// /}" in *[!0-9]*) echo "osu-coll.sh: numbers expected" >&2; exit 2 ;; esac
src=$(cd "$src" && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
if [ -z "$prefix" ]; then
    for p in "$target/hmpi" "$target/hmpi-debug"; do
        if [ -x "$p/bin/hmpicc" ] && [ -x "$p/bin/hmpirun" ]; then prefix=$p; break; fi
    done
fi
if [ -z "$prefix" ] || [ ! -x "$prefix/bin/hmpicc" ] || [ ! -x "$prefix/bin/hmpirun" ]; then
    echo "osu-coll.sh: no libhmpi layout with bin/hmpicc and bin/hmpirun (run ffi/build.sh, or pass --prefix)" >&2
    exit 1
fi
prefix=$(cd "$prefix" && pwd)

if [ -d "$src/c/mpi/collective" ]; then
    coll=c/mpi/collective
elif [ -d "$src/mpi/collective" ]; then
    coll=mpi/collective
    validate=0
else
    echo "osu-coll.sh: $src has neither c/mpi/collective nor mpi/collective" >&2
    exit 2
fi

dir=${keep:-$(mktemp -d)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT
build=$dir/build
mkdir -p "$build"

# Their configure, out of tree, with hmpicc as the MPI compiler.
echo "configuring $src with CC=$prefix/bin/hmpicc"
if ! (cd "$build" && "$src/configure" CC="$prefix/bin/hmpicc" CXX="$prefix/bin/hmpicxx" \
        > "$dir/configure.log" 2>&1); then
    tail -n 30 "$dir/configure.log" >&2
    echo "osu-coll.sh: configure failed (log: $dir/configure.log)" >&2
    exit 1
fi
# Only the collective programs (and the utilities they link).
jobs=$(nproc 2>/dev/null || echo 2)
if ! make -C "$build/$coll" -j"$jobs" > "$dir/make.log" 2>&1; then
    grep -E "error|undefined" "$dir/make.log" | head -n 40 >&2 || true
    echo "osu-coll.sh: building $coll failed (log: $dir/make.log)" >&2
    exit 1
fi

# Every program that was built, in a stable order.
mapfile -t progs < <(find "$build/$coll" -type f -name 'osu_*' -perm -u+x ! -name '*.o' | sort)
if [ "${#progs[@]}" -eq 0 ]; then
    echo "osu-coll.sh: no program was built under $build/$coll" >&2
    exit 1
fi

# Programs whose -c cannot pass with any MPI: OSU 7.4's
# osu_allreduce_persistent initialises its request on the warm-up
# buffers and validates the others. They run without -c.
no_check=" persistent/osu_allreduce_persistent "

failed=()
ran=()
for p in "${progs[@]}"; do
    name=${p#"$build/$coll/"}
    sub=${name%%/*}
    case " $skip " in *" $sub "*) [ "$sub" != "$name" ] && continue ;; esac
    for n in $ranks; do
        log=$dir/$(echo "$name" | tr / _).n$n.log
        args=(-i "$iterations" -x 2)
        case "$(basename "$p")" in
            *barrier*) ;;
            *) args+=(-m "$max_size")
               case "$no_check" in *" $name "*) ;; *) [ "$validate" = 0 ] || args+=(-c) ;; esac ;;
        esac
        if "$prefix/bin/hmpirun" -n "$n" --timeout 300 "$p" "${args[@]}" > "$log" 2>&1; then
            echo "ok      $name -n $n"
        else
            echo "FAILED  $name -n $n (exit $?)"
            failed+=("$name -n $n")
            sed 's/^/    /' "$log" | tail -n 20
        fi
    done
    ran+=("$name")
done
echo
echo "ran ${#ran[@]} programs on ${ranks// /, } ranks: ${ran[*]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
echo "all passed"
