#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe gen` against `readelf --debug-dump=frames-interp` on one file, in one
# run: both read the file's .eh_frame and compute the same row table (readelf
# prints it, gen encodes it as SFrame). Runs each RUNS times, alternating,
# after one warm-up run each (page cache), and prints medians: wall time, CPU
# time (user + sys, less sensitive to other load on the machine), peak RSS,
# MB/s of .eh_frame (1 MB = 10^6 bytes), and readelf's time over gen's.
# Also gen's peak RSS over its own baseline (gen on a file with almost no
# CFI, /usr/bin/true or BASELINE_FILE) against the sizes of .eh_frame plus the
# .sframe written.
# Goals (issue 14): gen at least 10x faster than readelf (CPU time), and
# gen's RSS delta at most 2x (.eh_frame + .sframe).
# Usage: bench/gen_vs_readelf.sh SFRAME_BIN [FILE] [RUNS]
#   FILE defaults to /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1, RUNS to 7.
# Speed is reported, never asserted: the exit status only says whether both
# programs ran.
set -euo pipefail
bin=$1
file=${2:-/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1}
runs=${3:-7}
readelf=${READELF:-readelf}
time_bin=/usr/bin/time
[ -x "$time_bin" ] || { echo "needs GNU time ($time_bin)" >&2; exit 2; }
python=${PYTHON:-python3}
command -v "$python" > /dev/null || { echo "needs python3 (to time the runs)" >&2; exit 2; }
[ -r "$file" ] || { echo "$file: not readable" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

eh=$("$readelf" -SW "$file" | awk '{ for (i = 1; i < NF; i++) if ($i == ".eh_frame" && !found) { print $(i + 4); found = 1 } }')
[ -n "$eh" ] || { echo "$file: no .eh_frame" >&2; exit 2; }
eh=$((16#$eh))

# One measured run: appends "wall cpu maxrss_kb" to $tmp/$1. Wall and CPU
# time (user + sys) from wait4() in microseconds: GNU time prints CPU time
# in hundredths of a second, too coarse for gen's short run: the ratio
# jumped a whole tick at a time. It counts GNU time's own start-up too
# (small, alike for both programs). The peak RSS is GNU time's (%M) of
# the program alone: a child forked from Python would inherit Python's
# high-water mark.
run() {
  local name=$1; shift
  "$python" - "$tmp/t" "$time_bin" -o "$tmp/m" -f "%M" "$@" > /dev/null 2> "$tmp/err" <<'PY' ||
import os, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
open(out, "w").write("%.4f %.4f" % (wall, ru.ru_utime + ru.ru_stime))
sys.exit(os.waitstatus_to_exitcode(status))
PY
    { echo "$name failed:" >&2; cat "$tmp/err" >&2; exit 1; }
  echo "$(cat "$tmp/t") $(tail -n 1 "$tmp/m")" >> "$tmp/$name"
}
gen() { run gen "$bin" gen "$file" -o "$tmp/out.sframe"; }
base_file=${BASELINE_FILE:-/usr/bin/true}
base() { run base "$bin" gen "$base_file" -o "$tmp/base.sframe"; }
rdl() { run readelf "$readelf" --debug-dump=frames-interp "$file"; }

gen; rdl; base; rm -f "$tmp/gen" "$tmp/readelf" "$tmp/base"   # warm-up
for ((i = 0; i < runs; i++)); do
  if ((i % 2)); then rdl; gen; else gen; rdl; fi
  base
done

median() {  # column $2 of file $1
  sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
gw=$(median "$tmp/gen" 1) gc=$(median "$tmp/gen" 2) gm=$(median "$tmp/gen" 3)
rw=$(median "$tmp/readelf" 1) rc=$(median "$tmp/readelf" 2) rm_=$(median "$tmp/readelf" 3)
out=$(stat -c %s "$tmp/out.sframe")
bm=$(median "$tmp/base" 3)

awk -v f="$file" -v eh="$eh" -v out="$out" -v n="$runs" -v gw="$gw" -v gc="$gc" -v gm="$gm" \
    -v rw="$rw" -v rc="$rc" -v rm="$rm_" -v bm="$bm" 'BEGIN {
  mb = eh / 1e6
  sw = gw > 0 ? gw : 0.001; sc = gc > 0 ? gc : 0.001
  rsw = rw > 0 ? rw : 0.001; rsc = rc > 0 ? rc : 0.001
  printf "file: %s\n.eh_frame: %d bytes (%.2f MB); .sframe written: %d bytes; %d runs each, medians\n", f, eh, mb, out, n
  printf "%-8s %9s %9s %10s %12s %12s\n", "", "wall s", "cpu s", "MB/s wall", "MB/s cpu", "max RSS KB"
  printf "%-8s %9.4f %9.4f %10.1f %12.1f %12d\n", "gen", gw, gc, mb / sw, mb / sc, gm
  printf "%-8s %9.4f %9.4f %10.1f %12.1f %12d\n", "readelf", rw, rc, mb / rsw, mb / rsc, rm
  printf "ratio (readelf time / gen time): wall %.2fx, cpu %.2fx (goal: 10x)\n", rw / sw, rc / sc
  d = gm - bm; sz = (eh + out) / 1024
  printf "gen RSS: %d KB over its baseline (%d KB on a file without CFI) = %.2fx (.eh_frame + .sframe = %d KB; goal: at most 2x)\n", d, bm, d / sz, sz
}'
