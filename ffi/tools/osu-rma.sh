#!/usr/bin/env bash
# Builds the OSU micro-benchmarks' one-sided programs, unchanged, with
# hmpicc and runs each on 2 ranks with hmpirun, every window kind (-w) and
# synchronisation (-s) the program offers, on a short size range; fails if
# any build or run fails (exit status non-zero) or runs past its time.
#
# Usage: ffi/tools/osu-rma.sh [--no-build] [--keep DIR] <osu source dir>
#   <osu source dir>  an unpacked OSU source tree, either layout:
#                     c/mpi/one-sided + c/util (OMB 7.x; sizes -m 1:4096)
#                     or mpi/one-sided with osu_1sc.c (OMB 4.x-5.x, which
#                     has no size option; fewer iterations instead)
#   --no-build        use the libhmpi and hmpicc already laid out by
#                     ffi/build.sh (default: run ffi/build.sh first)
#   --keep DIR        build the programs into DIR and keep them
#
# The OSU sources are not part of this repository: fetch them yourself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
build=1
keep=""
src=""
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --keep) keep=$2; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "osu-rma.sh: unknown option $1" >&2; exit 2 ;;
        *) [ -z "$src" ] || { echo "osu-rma.sh: one source dir, not '$1' too" >&2; exit 2; }
           src=$1 ;;
    esac
    shift
done
[ -n "$src" ] || { echo "usage: ffi/tools/osu-rma.sh [--no-build] [--keep DIR] <osu source dir>" >&2; exit 2; }
src=$(cd "$src" && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
if [ "$build" = 1 ]; then
    "$root/ffi/build.sh"
fi
bin=$target/hmpi/bin
for t in hmpicc hmpirun; do
    [ -x "$bin/$t" ] || { echo "osu-rma.sh: no $bin/$t (run ffi/build.sh)" >&2; exit 1; }
done

if [ -d "$src/c/mpi/one-sided" ]; then
    dir=$src/c/mpi/one-sided
    util=$src/c/util
    extra=("$util/osu_util.c" "$util/osu_util_mpi.c" "$util/osu_util_graph.c"
           "$util/osu_util_papi.c" "$util/osu_util_validation.c")
    # What OMB's configure would define: its version (from configure.ac).
    version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$src/configure.ac" 2>/dev/null | head -1)
    cflags=(-I"$util" -DPACKAGE_VERSION="\"${version:-unknown}\"")
    libs=(-lm -lpthread)
    sizes=(-m 1:4096 -i 100 -x 10)
elif [ -d "$src/mpi/one-sided" ]; then
    dir=$src/mpi/one-sided
    extra=("$dir/osu_1sc.c")
    cflags=(-I"$dir")
    libs=(-lm)
    sizes=(-i 20 -x 2)
else
    echo "osu-rma.sh: $src has neither c/mpi/one-sided nor mpi/one-sided" >&2
    exit 2
fi

out=${keep:-$(mktemp -d)}
mkdir -p "$out"
[ -n "$keep" ] || trap 'rm -rf "$out"' EXIT

programs=()
for f in "$dir"/osu_*.c; do
    name=$(basename "$f" .c)
    case "$name" in osu_1sc) continue ;; esac
    programs+=("$name")
done
[ ${#programs[@]} -gt 0 ] || { echo "osu-rma.sh: no programs in $dir" >&2; exit 2; }

failed=()
runs=0
skipped=0
for p in "${programs[@]}"; do
    echo "== build $p"
    srcs=("$dir/$p.c")
    for x in "${extra[@]}"; do
        # Old OMB: osu_1sc.c only for the programs that include its header.
        if [ "$(basename "$x")" != osu_1sc.c ] || grep -q '"osu_1sc.h"' "$dir/$p.c"; then
            srcs+=("$x")
        fi
    done
    if ! "$bin/hmpicc" -O2 -w "${cflags[@]}" -o "$out/$p" "${srcs[@]}" "${libs[@]}"; then
        failed+=("build $p")
        continue
    fi
    # The window kinds and synchronisations the program lists in its
    # usage text (the lines under "-w" and "-s", or under "win_option:"
    # and "sync_option:"), asked of 2 ranks (some refuse to start on 1).
    usage=$("$bin/hmpirun" -n 2 "$out/$p" -h 2>&1 || true)
    wins=$(printf '%s\n' "$usage" | awk '/^ *-w[ ,]/ || /^win_option:/ {f=1;next} /^ *-[a-zA-Z]/ || /^[a-z_]+:/ {f=0} f && $1 ~ /^(create|allocate|dynamic)$/ && !seen[$1]++ {print $1}')
    syncs=$(printf '%s\n' "$usage" | awk '/^ *-s[ ,]/ || /^sync_option:/ {f=1;next} /^ *-[a-zA-Z]/ || /^[a-z_]+:/ {f=0} f && $1 ~ /^(pscw|fence|lock|flush|flush_local|lock_all)$/ && !seen[$1]++ {print $1}')
    [ -n "$wins" ] || wins=default
    [ -n "$syncs" ] || syncs=default
    for w in $wins; do
        for s in $syncs; do
            args=()
            [ "$w" = default ] || args+=(-w "$w")
            [ "$s" = default ] || args+=(-s "$s")
            echo "== run $p ${args[*]} ${sizes[*]}"
            if timeout 300 "$bin/hmpirun" -n 2 "$out/$p" "${args[@]}" "${sizes[@]}" \
                    >"$out/run.log" 2>&1; then
                cat "$out/run.log"
                runs=$((runs + 1))
            elif grep -q "Invalid option or invalid argument" "$out/run.log"; then
                # Some programs list every synchronisation in their usage
                # text but take fewer (osu_put_bibw: pscw and fence).
                echo "   (not offered by $p)"
                skipped=$((skipped + 1))
            else
                cat "$out/run.log"
                runs=$((runs + 1))
                failed+=("$p ${args[*]}")
            fi
        done
    done
done

echo "== $runs runs of ${#programs[@]} programs ($skipped combinations not offered), ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
    printf '   failed: %s\n' "${failed[@]}"
    exit 1
fi
