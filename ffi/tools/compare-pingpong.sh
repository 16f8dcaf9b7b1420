#!/usr/bin/env bash
# Compares the C ping-pong (ffi/examples/pingpong.c over libhmpi) with
# `hmpi-bench latency` and `hmpi-bench bw` (the same engine through Rust):
# ROUNDS rounds, each running both programs back to back, the order
# swapped every round; per size, the median over the rounds of each
# program's value (itself a median of 5 repetitions), the ratio of the two
# medians C / bench, and the median over the rounds of each round's own
# ratio ("paired"): the machine's speed changes for stretches of seconds to
# minutes, and the two programs of one round usually share a stretch where
# two medians over all rounds may not.
#
# With --per-size, each round runs the programs one size at a time (C,
# then hmpi-bench latency and bw, or the reverse), so the two values of a
# pair are seconds apart rather than a whole sweep: slower (three launches
# per size and round), but the paired ratios see less of the machine's
# changes.
#
# Usage: ffi/tools/compare-pingpong.sh [--rounds N] [--sizes LO-HI] [--per-size] [--keep DIR]
#   --rounds N     rounds (default 9)
#   --sizes LO-HI  powers of two from LO to HI bytes (default 8-1024)
#   --per-size     pair the programs size by size (see above)
#   --keep DIR     keep every round's raw output in DIR
#
# Needs a release build: `ffi/build.sh` and `cargo build --release -p
# hmpi-bench`, under $CARGO_TARGET_DIR (or target/ at the workspace root).
# Prints the load average before every round, then the table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
rounds=9
lo=8
hi=1024
keep=""
per_size=0
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift ;;
        --sizes) lo=${2%-*}; hi=${2#*-}; shift ;;
        --per-size) per_size=1 ;;
        --keep) keep=$2; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "compare-pingpong.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case "$rounds$lo$hi" in *[!0-9]*) echo "compare-pingpong.sh: numbers expected" >&2; exit 2 ;; esac
if [ "$rounds" -lt 1 ] || [ "$lo" -lt 1 ] || [ "$hi" -lt "$lo" ]; then
    echo "compare-pingpong.sh: need --rounds >= 1 and 1 <= LO <= HI" >&2
    exit 2
fi
target=${CARGO_TARGET_DIR:-$root/target}
bench=$target/release/hmpi-bench
prefix=$target/hmpi
for f in "$bench" "$prefix/bin/hmpicc" "$prefix/bin/hmpirun"; do
    if [ ! -x "$f" ]; then
        echo "compare-pingpong.sh: $f is missing (ffi/build.sh; cargo build --release -p hmpi-bench)" >&2
        exit 1
    fi
done
sizes=""
s=1
while [ "$s" -le "$hi" ]; do
    if [ "$s" -ge "$lo" ]; then sizes="$sizes${sizes:+,}$s"; fi
    s=$((s * 2))
done
if [ -z "$sizes" ]; then
    echo "compare-pingpong.sh: no power of two from $lo to $hi" >&2
    exit 2
fi
dir=${keep:-$(mktemp -d)}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT
"$prefix/bin/hmpicc" -O2 -o "$dir/pingpong" "$root/ffi/examples/pingpong.c"

# run_c ROUND LIST and run_bench ROUND LO HI append to the round's files
# (the C program takes a comma-separated list: "S," is the one size S).
run_c() {
    "$prefix/bin/hmpirun" -n 2 "$dir/pingpong" "$2" >> "$dir/c.$1.txt"
}
run_bench() {
    "$bench" latency --sizes "$2-$3" --csv "$dir/one.csv" > /dev/null 2>&1
    cat "$dir/one.csv" >> "$dir/lat.$1.csv"
    "$bench" bw --sizes "$2-$3" --csv "$dir/one.csv" > /dev/null 2>&1
    cat "$dir/one.csv" >> "$dir/bw.$1.csv"
}
# The groups of sizes run together: all of them, or one at a time.
if [ "$per_size" = 1 ]; then groups=${sizes//,/ }; else groups=$sizes; fi
for r in $(seq 1 "$rounds"); do
    echo "round $r: $(uptime | sed 's/.*load average/load average/')" >&2
    : > "$dir/c.$r.txt"
    : > "$dir/lat.$r.csv"
    : > "$dir/bw.$r.csv"
    for g in $groups; do
        glo=${g%%,*}
        ghi=${g##*,}
        if [ $((r % 2)) = 1 ]; then
            run_c "$r" "$g,"
            run_bench "$r" "$glo" "$ghi"
        else
            run_bench "$r" "$glo" "$ghi"
            run_c "$r" "$g,"
        fi
    done
done

# One line per value: program kernel size value round.
{
    for r in $(seq 1 "$rounds"); do
        awk -v r="$r" '!/^#/ && $1 ~ /^[0-9]+$/ { print "c latency", $1, $2, r; if ($3 != "-") print "c bw", $1, $3, r }' "$dir/c.$r.txt"
        for k in lat bw; do
            awk -F, -v r="$r" 'NR > 1 && $2 == "hmpi" { print "bench", $1, $4, $5, r }' "$dir/$k.$r.csv"
        done
    done
} > "$dir/values.txt"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%8s  %12s %12s %7s %7s  %12s %12s %7s %7s\n' bytes "lat C (us)" "bench (us)" "C/b" "paired" "bw C (MB/s)" "bench" "C/b" "paired"
for s in ${sizes//,/ }; do
    row=()
    for k in latency bw; do
        c=$(awk -v k=$k -v s=$s '$1 == "c" && $2 == k && $3 == s { print $4 }' "$dir/values.txt" | median)
        b=$(awk -v k=$k -v s=$s '$1 == "bench" && $2 == k && $3 == s { print $4 }' "$dir/values.txt" | median)
        # Each round's C / bench, then their median.
        p=$(awk -v k=$k -v s=$s '$2 == k && $3 == s { v[$1 " " $5] = $4; r[$5] = 1 }
            END { for (i in r) if (("c " i) in v && ("bench " i) in v && v["bench " i] > 0) print v["c " i] / v["bench " i] }' "$dir/values.txt" | median)
        row+=("$c" "$b" "$(awk -v c="$c" -v b="$b" 'BEGIN { printf "%.2f", c / b }')" "$(awk -v p="$p" 'BEGIN { printf "%.2f", p }')")
    done
    printf '%8s  %12s %12s %7s %7s  %12s %12s %7s %7s\n' "$s" "${row[@]}"
done
echo "(medians of $rounds rounds; paired: the median of the rounds' own ratios; $(uptime | sed 's/.*load average/load average/') at the end)"
