#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two builds of `sframe record` walking the same stacks at the same time:
#   bench/record_walk_pair.sh A B [PAIRS]     (root; PAIRS=6)
# Each pair starts the python workload of bench/lib.sh, lets both binaries
# record it at once (`-p PID --duration 4`, both per-task events sampling
# the same process), and prints both walk means (the summary's in-program
# "walk mean", ns a sample); the pairs alternate which binary starts first.
# Then the mean of B - A over the pairs and its range.
#
# Why pairs: on these machines the walk of the same stacks by the same
# binary moved 1.7x within a quarter of an hour (docs/benchmarks.md, stop
# 57), more than most changes to the walk, so recordings made one after
# the other compare the machine's moments as much as the binaries. Two
# recordings made at once see the same moment. The same binary given as
# A and B says what the method's own noise is.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 A B [PAIRS]" >&2; exit 2; }
a=$(readlink -f "$1")
b=$(readlink -f "$2")
pairs=${3:-6}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
work=$(mktemp -d /tmp/record-pair.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
build_workload python
# Long enough for every pair's 4 s: five times the benchmark's loop.
cmd[2]=${cmd[2]//1000000/5000000}
walk_mean() { sed -n 's/.*walk mean \([0-9]*\) ns.*/\1/p' "$1"; }

# The table cache filled once, so that no pair builds a table.
"$a" record --cache cache -F 999 -o x.data -- "${cmd[0]}" -c 'import json' > /dev/null 2>&1
rm -f diffs
printf '%-5s %10s %10s %8s\n' pair "A ns" "B ns" "B - A"
for ((i = 0; i < pairs; i++)); do
  "${cmd[@]}" > /dev/null &
  pid=$!
  sleep 0.5
  if ((i % 2 == 0)); then first=("$a" ea) second=("$b" eb); else first=("$b" eb) second=("$a" ea); fi
  "${first[0]}" record --cache cache -F 999 -p "$pid" --duration 4 -o "${first[1]}.data" 2> "${first[1]}" &
  rec=$!
  "${second[0]}" record --cache cache -F 999 -p "$pid" --duration 4 -o "${second[1]}.data" 2> "${second[1]}"
  wait "$rec"
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  ma=$(walk_mean ea)
  mb=$(walk_mean eb)
  [ -n "$ma" ] && [ -n "$mb" ] || { echo "pair $i: no walk mean:" >&2; cat ea eb >&2; exit 1; }
  echo $((mb - ma)) >> diffs
  printf '%-5s %10s %10s %8s\n' "$i" "$ma" "$mb" $((mb - ma))
done
awk '{ s += $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
     END { printf "B - A: mean %.0f ns a sample over %d pairs [%d to %d]\n", s / NR, NR, lo, hi }' diffs
