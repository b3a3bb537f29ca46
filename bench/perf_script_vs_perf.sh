#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf script` and `sframe perf inject` against perf on the same
# `perf record -e cpu-clock --call-graph=dwarf` recording, in one run:
# records each workload once, then runs each command RUNS times,
# alternating, after one warm-up run each (page cache), and prints medians
# of CPU time (user + sys), wall time, µs per sample, and the ratios:
#  - `perf script --no-inline` (Debian 12's perf 6.1 and the current perf,
#    ../shared/tools/get-current-perf) over `sframe perf script`: goal >= 10x;
#  - `sframe perf script` over `cat` of the file (the floor: reading it):
#    goal <= 1.3x on recordings of at least 100 MB;
#  - the current perf's `perf inject --convert-callchain` over `sframe perf
#    inject`: goal >= 20x, and our output no larger than perf's;
#  - `perf report` (both perfs) of the injected file against the recording.
# Also `--folded` against `perf script report stackcollapse`. Our times
# include opening every module and generating SFrame for those without it
# (nothing is cached across runs).
# Usage: bench/perf_script_vs_perf.sh SFRAME_BIN [RUNS] [WORKLOAD...]
#   RUNS defaults to 5; WORKLOAD is c (tests/perf/work.c, -O2
#   -fomit-frame-pointer -Wa,--gsframe), python (python3.11 running a
#   loop), cxx (tests/perf/cxx.cpp); default: c python cxx. Each recording
#   is sized to pass 100 MB.
# Speed is reported, never asserted: the exit status only says whether
# everything ran. Needs root (or perf_event_paranoid <= 1).
set -euo pipefail
bin=$(readlink -f "$1")
runs=${2:-5}
shift $(($# >= 2 ? 2 : $#))
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(c python cxx)
here=$(cd "$(dirname "$0")/.." && pwd)
perf7=$(bash "$here/tests/perf/current_perf.sh") || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

. "$here/bench/lib.sh"

for w in "${workloads[@]}"; do
  build_workload "$w"
  rm -f perf.data ours perf perf7 ours_folded perf_folded cat inject perf7_inject report61 report61_inj report7 report7_inj
  perf record -q -e cpu-clock --call-graph=dwarf -o perf.data -- "${cmd[@]}" >/dev/null 2>rec.err ||
    { echo "perf record failed:" >&2; cat rec.err >&2; exit 1; }
  samples=$("$bin" perf script -i perf.data -F tid 2>&1 >/dev/null | sed -n 's/^sframe perf script: \([0-9]*\) samples.*/\1/p')
  size=$(stat -c %s perf.data)
  o() { run ours "$bin" perf script -i perf.data -F tid,ip,sym,dso; }
  p() { run perf perf script -i perf.data -F tid,ip,sym,dso --no-inline; }
  p7() { run perf7 "$perf7" script -i perf.data -F tid,ip,sym,dso --no-inline; }
  of() { run ours_folded "$bin" perf script -i perf.data --folded; }
  pf() { run perf_folded perf script -i perf.data report stackcollapse; }
  c() { run cat cat perf.data; }
  oi() { run inject "$bin" perf inject -i perf.data -o ours.inj; }
  pi() { run perf7_inject "$perf7" inject --convert-callchain -i perf.data -o perf7.inj; }
  r() { run report61 perf report -i perf.data --stdio; run report61_inj perf report -i ours.inj --stdio;
        run report7 "$perf7" report -i perf.data --stdio; run report7_inj "$perf7" report -i ours.inj --stdio; }
  all=(ours perf perf7 ours_folded perf_folded cat inject perf7_inject report61 report61_inj report7 report7_inj)
  o; p; p7; of; pf; c; oi; pi; r; rm -f "${all[@]}"   # warm-up
  for ((i = 0; i < runs; i++)); do
    if ((i % 2)); then p; p7; o; pf; of; pi; oi; else o; p; p7; of; pf; oi; pi; fi
    c
    r
  done
  echo "== $w: ${cmd[*]:0:2}...: $samples samples, $((size / 1000000)) MB perf.data, $runs runs (median; CPU range)"
  [ "$size" -ge 100000000 ] || echo "  (under 100 MB: the cat goal is stated for recordings of at least 100 MB)"
  for name in "${all[@]}"; do
    cpu=$(awk '{ print $2 }' "$name" | median)
    wall=$(awk '{ print $1 }' "$name" | median)
    printf '  %-12s cpu %8.4f s (%s)  wall %7.3f s  %8.2f us/sample\n' "$name" "$cpu" \
      "$(awk '{ print $2 }' "$name" | spread)" "$wall" "$(awk -v c="$cpu" -v n="$samples" 'BEGIN { print n ? c * 1e6 / n : 0 }')"
  done
  x=$(ratio perf ours); echo "  ratio (perf 6.1 script CPU / sframe perf script CPU): ${x}x (goal >= 10x: $(goal "$x" 10 ">="))"
  x=$(ratio perf7 ours); echo "  ratio (current perf script CPU / sframe perf script CPU): ${x}x (goal >= 10x: $(goal "$x" 10 ">="))"
  x=$(ratio ours cat); echo "  ratio (sframe perf script CPU / cat CPU): ${x}x (goal <= 1.3x: $(goal "$x" 1.3 "<="))"
  echo "  ratio (stackcollapse CPU / sframe --folded CPU): $(ratio perf_folded ours_folded)x"
  x=$(ratio perf7_inject inject); echo "  ratio (perf inject --convert-callchain CPU / sframe perf inject CPU): ${x}x (goal >= 20x: $(goal "$x" 20 ">="))"
  a=$(stat -c %s ours.inj); b=$(stat -c %s perf7.inj)
  echo "  injected size: ours $a bytes, perf's $b bytes (goal no larger: $( [ "$a" -le "$b" ] && echo met || echo "NOT met"))"
  echo "  ratio (perf report CPU, recording / injected): perf 6.1 $(ratio report61 report61_inj)x, current perf $(ratio report7 report7_inj)x"
done
