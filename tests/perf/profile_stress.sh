#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The profile writers on a synthetic hostile input (tests/profile_stress.cpp:
# distinct stacks over names with '<', '>', '&', quotes, ';', control
# characters, "]]>" and a byte that is no UTF-8; comms with them too):
#   profile_stress.sh PROFILE_STRESS WORKDIR [RSS_LIMIT_MB]
#  - 100000 samples, each its own stack: `go tool pprof -traces` lists the
#    generated stacks with their counts; the SVG is well-formed XML, under
#    5 MB, and Chromium loads it with its title; the writer's peak memory
#    stays under RSS_LIMIT_MB (default 600; /usr/bin/time).
# go, chromium or /usr/bin/time missing is a FAILURE, never a skip.
set -euo pipefail
gen=$(readlink -f "$1")
work=$2
limit_mb=${3:-600}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"
missing=0
for t in go:golang-go chromium:chromium /usr/bin/time:time; do
  command -v "${t%%:*}" >/dev/null || { echo "FAIL: ${t%%:*} not found (scripts/install-deps installs ${t#*:})"; missing=1; }
done
[ $missing = 0 ] || exit 1
fail=0

n=100000
/usr/bin/time -f '%M' -o rss.txt "$gen" $n stress.pb.gz stress.svg stress.folded
rss_kb=$(tail -1 rss.txt)
if [ "$rss_kb" -gt $((limit_mb * 1024)) ]; then
  echo "FAIL: $n distinct stacks took $((rss_kb / 1024)) MB (limit $limit_mb MB)"
  fail=1
else
  echo "ok: $n distinct stacks in $((rss_kb / 1024)) MB at peak"
fi
go tool pprof -symbolize=none -sample_index=samples -traces stress.pb.gz >pprof.traces 2>pprof.err ||
  { echo "FAIL: go tool pprof -traces:"; cat pprof.err; exit 1; }
python3 - stress.folded pprof.traces "$here" <<'PY' || fail=1
import sys
sys.path.insert(0, sys.argv[3])
import profile_check as pc
ours, theirs = pc.read_folded(sys.argv[1]), pc.traces_as_folded(sys.argv[2])
if ours != theirs:
    bad = [s for s in set(ours) | set(theirs) if ours[s] != theirs[s]]
    print(f"FAIL: go tool pprof -traces and the generated stacks differ in {len(bad)} stacks, e.g.:")
    for s in bad[:3]:
        print(f"  generated {ours[s]} pprof {theirs[s]} {s!r}")
    sys.exit(1)
print(f"ok: go tool pprof -traces lists the {len(ours)} generated stacks with their counts")
PY
size=$(stat -c %s stress.svg)
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' stress.svg ||
  { echo "FAIL: stress.svg is not well-formed XML"; fail=1; }
[ "$size" -lt $((5 * 1024 * 1024)) ] || { echo "FAIL: the SVG of $n distinct stacks is $size bytes"; fail=1; }
chromium --headless --no-sandbox --disable-gpu --dump-dom "file://$PWD/stress.svg" >stress.dom 2>chromium.err ||
  { echo "FAIL: chromium:"; cat chromium.err; exit 1; }
grep -q "profile_stress &lt;&amp;\"&gt; ($n samples)</text>" stress.dom ||
  { echo "FAIL: Chromium's DOM has no title with the $n samples"; fail=1; }
frames=$(grep -c '<g class="f"' stress.dom || true)
[ $fail = 0 ] && echo "ok: SVG well-formed, $size bytes, $frames frames drawn, loaded by Chromium"
exit $fail
