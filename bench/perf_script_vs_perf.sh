#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf script` against `perf script --no-inline` on the same
# `perf record -e cpu-clock --call-graph=dwarf` recording, in one run:
# records each workload once, then runs each side RUNS times, alternating,
# after one warm-up run each (page cache), and prints medians of CPU time
# (user + sys), wall time, µs per sample, and perf's CPU time over ours.
# Our time includes opening every module and generating SFrame for those
# without it (nothing is cached across runs). Also `--folded` against
# `perf script report stackcollapse`, and `cat` of the file (the floor:
# reading it). The goal is >= 10x.
# Usage: bench/perf_script_vs_perf.sh SFRAME_BIN [RUNS] [WORKLOAD...]
#   RUNS defaults to 5; WORKLOAD is c (tests/perf/work.c, -O2
#   -fomit-frame-pointer -Wa,--gsframe), python (python3.11 running a
#   loop), cxx (tests/perf/cxx.cpp); default: c python.
# Speed is reported, never asserted: the exit status only says whether
# everything ran. Needs root (or perf_event_paranoid <= 1).
set -euo pipefail
bin=$(readlink -f "$1")
runs=${2:-5}
shift $(($# >= 2 ? 2 : $#))
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(c python)
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# One measured run: appends "wall cpu" (seconds) to $tmp/$name. CPU time is
# perf stat's task-clock (user + system of the command and its children, to
# the microsecond: GNU time's %U + %S count in 10 ms ticks, coarser than our
# whole run); wall time is its duration_time.
run() {
  local name=$1; shift
  perf stat -x, -e task-clock,duration_time -o t -- "$@" > /dev/null 2> err ||
    { echo "$name failed:" >&2; cat err >&2; exit 1; }
  awk -F, '$3 == "task-clock" { cpu = $1 / 1000 } $3 == "duration_time" { wall = $1 / 1e9 }
           END { printf "%.5f %.6f\n", wall, cpu }' t >> "$name"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4f-%.4f", lo, hi }'; }

for w in "${workloads[@]}"; do
  case $w in
    c)
      gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o prog "$here/tests/perf/work.c" -lpthread
      cmd=(./prog 40000) ;;
    cxx)
      g++ -O2 -g -fomit-frame-pointer -Wa,--gsframe -o prog "$here/tests/perf/cxx.cpp"
      cmd=(./prog 150) ;;
    python)
      cmd=(python3.11 -c 'import json
def f(n):
    return sum(len(json.dumps({"k": i, "v": [i] * 8})) for i in range(n))
print(f(300000))') ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
  rm -f perf.data ours perf ours_folded perf_folded cat
  perf record -q -e cpu-clock --call-graph=dwarf -o perf.data -- "${cmd[@]}" >/dev/null 2>rec.err ||
    { echo "perf record failed:" >&2; cat rec.err >&2; exit 1; }
  samples=$("$bin" perf script -i perf.data -F tid 2>&1 >/dev/null | sed -n 's/^sframe perf script: \([0-9]*\) samples.*/\1/p')
  size=$(stat -c %s perf.data)
  o() { run ours "$bin" perf script -i perf.data -F tid,ip,sym,dso; }
  p() { run perf perf script -i perf.data -F tid,ip,sym,dso --no-inline; }
  of() { run ours_folded "$bin" perf script -i perf.data --folded; }
  pf() { run perf_folded perf script -i perf.data report stackcollapse; }
  c() { run cat cat perf.data; }
  o; p; of; pf; c; rm -f ours perf ours_folded perf_folded cat   # warm-up
  for ((i = 0; i < runs; i++)); do
    if ((i % 2)); then p; o; pf; of; else o; p; of; pf; fi
    c
  done
  echo "== $w: ${cmd[*]:0:2}...: $samples samples, $((size / 1000000)) MB perf.data, $runs runs (median; CPU range)"
  for name in ours perf ours_folded perf_folded cat; do
    cpu=$(awk '{ print $2 }' "$name" | median)
    wall=$(awk '{ print $1 }' "$name" | median)
    printf '  %-12s cpu %8.4f s (%s)  wall %7.3f s  %8.2f us/sample\n' "$name" "$cpu" \
      "$(awk '{ print $2 }' "$name" | spread)" "$wall" "$(awk -v c="$cpu" -v n="$samples" 'BEGIN { print n ? c * 1e6 / n : 0 }')"
  done
  ratio() { awk -v a="$(awk '{ print $2 }' "$1" | median)" -v b="$(awk '{ print $2 }' "$2" | median)" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'; }
  echo "  ratio (perf script CPU / sframe perf script CPU): $(ratio perf ours)x"
  echo "  ratio (stackcollapse CPU / sframe --folded CPU): $(ratio perf_folded ours_folded)x"
done
