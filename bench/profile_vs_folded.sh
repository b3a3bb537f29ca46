#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What --pprof and --flamegraph cost on top of --folded, on the same
# `perf record -e cpu-clock --call-graph=dwarf` recording, in one run:
# records each workload once (bench/lib.sh: the workloads of
# perf_script_vs_perf.sh, about 100 MB each), then runs `sframe perf
# script --folded` alone, with --pprof, with --flamegraph and with both,
# RUNS times alternating, after one warm-up run each, and prints medians of
# CPU time (user + sys), the ratios over --folded (goal: at most 1.2x), and
# the sizes of the pprof file and the SVG.
# With PROFILE_STRESS (the build's tests/profile_stress), also the writers
# alone on a synthetic million samples, each its own stack: SVG size (goal:
# under 5 MB), time and peak memory.
# Usage: bench/profile_vs_folded.sh SFRAME_BIN [RUNS] [WORKLOAD...]
#   RUNS defaults to 5; WORKLOAD: c, python, cxx (default: all three).
# Speed is reported, never asserted: the exit status only says whether
# everything ran. Needs root (or perf_event_paranoid <= 1).
set -euo pipefail
bin=$(readlink -f "$1")
runs=${2:-5}
shift $(($# >= 2 ? 2 : $#))
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(c python cxx)
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
. "$here/bench/lib.sh"

for w in "${workloads[@]}"; do
  build_workload "$w"
  all=(folded pprof flamegraph both)
  rm -f perf.data "${all[@]}"
  perf record -q -e cpu-clock --call-graph=dwarf -o perf.data -- "${cmd[@]}" >/dev/null 2>rec.err ||
    { echo "perf record failed:" >&2; cat rec.err >&2; exit 1; }
  samples=$("$bin" perf script -i perf.data --folded 2>&1 >/dev/null | sed -n 's/^sframe perf script: \([0-9]*\) samples.*/\1/p')
  size=$(stat -c %s perf.data)
  f() { run folded "$bin" perf script -i perf.data --folded; }
  p() { run pprof "$bin" perf script -i perf.data --folded --pprof out.pb.gz; }
  g() { run flamegraph "$bin" perf script -i perf.data --folded --flamegraph out.svg; }
  b() { run both "$bin" perf script -i perf.data --folded --pprof out.pb.gz --flamegraph out.svg; }
  f; p; g; b; rm -f "${all[@]}"  # warm-up
  for ((i = 0; i < runs; i++)); do
    if ((i % 2)); then b; g; p; f; else f; p; g; b; fi
  done
  echo "== $w: ${cmd[*]:0:2}...: $samples samples, $((size / 1000000)) MB perf.data, $runs runs (median; CPU range)"
  for name in "${all[@]}"; do
    printf '  %-10s cpu %8.4f s (%s)  wall %7.3f s\n' "$name" "$(awk '{ print $2 }' "$name" | median)" \
      "$(awk '{ print $2 }' "$name" | spread)" "$(awk '{ print $1 }' "$name" | median)"
  done
  for name in pprof flamegraph both; do
    x=$(ratio "$name" folded 3)
    echo "  ratio ($name CPU / --folded CPU): ${x}x (goal <= 1.2x: $(goal "$x" 1.2 "<="))"
  done
  echo "  sizes: pprof $(stat -c %s out.pb.gz) bytes, SVG $(stat -c %s out.svg) bytes" \
       "($(grep -c '<g class="f"' out.svg) frames drawn, $(wc -l <"$("$bin" perf script -i perf.data --folded >folded.txt 2>/dev/null; echo folded.txt)") stacks)"
done

if [ -n "${PROFILE_STRESS:-}" ]; then
  /usr/bin/time -f '%e %M' -o stress.time "$PROFILE_STRESS" 1000000 stress.pb.gz stress.svg
  read -r secs kb <stress.time
  s=$(stat -c %s stress.svg)
  echo "== synthetic: 1000000 samples, each its own stack (depth 6-25, 4000 names)"
  echo "  writers: $secs s, peak $((kb / 1024)) MB; pprof $(stat -c %s stress.pb.gz) bytes"
  echo "  SVG $s bytes, $(grep -c '<g class="f"' stress.svg) frames drawn (goal under 5 MB: $([ "$s" -lt 5242880 ] && echo met || echo "NOT met"))"
fi
