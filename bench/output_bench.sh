#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Output that scales: CPU time and peak RSS of
#   1. `sframe dump --json` against the text dump of the same file: an SFrame
#      section generated for a copy of libLLVM-14 (`sframe gen --elf`);
#      goals: peak RSS under 64 MB, CPU time within 2x of the text dump;
#   2. `sframe stack -n 0` against `eu-stack -n 0` on a thread parked 50,000
#      calls deep (tests/stack/deep.c); goal: no more CPU time than eu-stack.
# Each command runs RUNS times (default 5), alternating; printed are the
# median and the min-max of user+sys CPU seconds and of peak RSS, and the
# ratios of the medians, all from this run.
# Usage: bench/output_bench.sh SFRAME_BIN [RUNS] [FILE]
#   FILE defaults to /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1.
set -euo pipefail
bin=$(realpath "$1")
runs=${2:-5}
file=${3:-/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1}
here=$(cd "$(dirname "$0")/.." && pwd)
for tool in gcc eu-stack python3; do
  command -v "$tool" > /dev/null || { echo "output_bench: $tool not found" >&2; exit 2; }
done
work=$(mktemp -d)
target=
trap '[ -n "$target" ] && { kill -9 "$target"; wait "$target"; } 2>/dev/null; rm -rf "$work"' EXIT

# One run: CPU seconds (user + sys) and peak RSS (KB) of the command, its
# output to /dev/null.
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{u.ru_utime + u.ru_stime:.3f} {u.ru_maxrss}")
PY
}

# NAME... then the commands as "NAME|CMD" lines on stdin; prints a table and
# leaves NAME.cpu / NAME.rss (medians) in $work.
compare() {
  local names=() cmds=()
  while IFS='|' read -r n c; do names+=("$n"); cmds+=("$c"); done
  for ((r = 0; r < runs; r++)); do
    for i in "${!names[@]}"; do
      # shellcheck disable=SC2086
      measure ${cmds[$i]} >> "$work/${names[$i]}.runs"
    done
  done
  for n in "${names[@]}"; do
    python3 - "$work/$n.runs" "$n" "$work" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
cpu = [r[0] for r in rows]; rss = [r[1] / 1024 for r in rows]
name, work = sys.argv[2], sys.argv[3]
print(f"  {name:<22} cpu {statistics.median(cpu):7.3f} s ({min(cpu):.3f}-{max(cpu):.3f})   "
      f"peak RSS {statistics.median(rss):8.1f} MB ({min(rss):.1f}-{max(rss):.1f})")
open(f"{work}/{name}.cpu", "w").write(str(statistics.median(cpu)))
open(f"{work}/{name}.rss", "w").write(str(statistics.median(rss)))
PY
  done
}
ratio() { python3 -c "import sys; print(f'{float(open(sys.argv[1]).read()) / max(float(open(sys.argv[2]).read()), 1e-9):.2f}')" "$work/$1" "$work/$2"; }
verdict() { python3 -c "import sys; print('met' if float(sys.argv[1]) <= float(sys.argv[2]) else 'NOT met')" "$1" "$2"; }

echo "== dump --json vs text: $(basename "$file") (sframe gen --elf), $runs runs"
"$bin" gen --elf "$work/lib.sf" "$file" > /dev/null
printf 'json|%s dump --json %s\ntext|%s dump %s\n' "$bin" "$work/lib.sf" "$bin" "$work/lib.sf" | compare
json_bytes=$("$bin" dump --json "$work/lib.sf" | wc -c)
text_bytes=$("$bin" dump "$work/lib.sf" | wc -c)
echo "  output: JSON $((json_bytes >> 20)) MB, text $((text_bytes >> 20)) MB"
rss=$(cat "$work/json.rss")
r=$(ratio json.cpu text.cpu)
echo "  peak RSS of dump --json: $(printf '%.1f' "$rss") MB (goal under 64 MB): $(verdict "$rss" 64)"
echo "  CPU time JSON / text: ${r}x (goal at most 2x): $(verdict "$r" 2)"

echo
echo "== stack -n 0 vs eu-stack -n 0: 50,000 frames, $runs runs"
gcc -O2 -Wa,--gsframe -o "$work/deep" "$here/tests/stack/deep.c"
"$work/deep" 50000 > "$work/deep.ready" &
target=$!
for _ in $(seq 400); do grep -q ready "$work/deep.ready" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$work/deep.ready" || { echo "output_bench: deep did not park" >&2; exit 1; }
frames=$("$bin" stack -n 0 "$target" 2>/dev/null | grep -c '^#' || true)
echo "  frames shown: sframe $frames, eu-stack $(eu-stack -n 0 -p "$target" 2>/dev/null | grep -c '^#' || true)"
printf 'sframe-stack|%s stack -n 0 %s\neu-stack|eu-stack -n 0 -p %s\n' "$bin" "$target" "$target" | compare
r=$(ratio sframe-stack.cpu eu-stack.cpu)
echo "  CPU time sframe / eu-stack: ${r}x (goal at most 1x): $(verdict "$r" 1)"
