#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf script --pprof` (and --flamegraph) on recordings made now,
# checked by tools that are not ours:
#   profile.sh SFRAME WORKDIR PART
# PART: c, cxx, python, names (programs.sh: demangled names with '<', '>',
# '&', '"'), empty (a recording without samples).
#  - pprof: `go tool pprof -traces` on our gzipped profile lists the same
#    stacks with the same counts as `--folded` on the same recording (-raw
#    renumbers; -traces names); its -raw mappings are the recording's MMAP2
#    events (perf script --show-mmap-events) with the files' own build-ids
#    (readelf -n); `protoc --decode_raw` reads the file (string 0 is "").
#  - SVG flame graph (profile_check.py svg): well-formed XML without external
#    references; headless Chromium's DOM after the SVG's script ran
#    (--dump-dom) has a frame per call path of --folded wide enough to draw,
#    with its count and percentage in its title, its bar within 1 px of its
#    share; #zoom=ID widens that frame to the full width; #search=REGEX
#    gives the matched share. A screenshot is kept (WORKDIR/flamegraph.png).
#    names: the text layout's full C++ names ('"' from operator"") also give
#    a well-formed SVG that Chromium loads with those names.
# go, protoc or perf missing, or perf_event_open refused: a FAILURE, never a
# skip (scripts/install-deps installs golang-go, protobuf-compiler, chromium).
set -euo pipefail
sframe=$(readlink -f "$1")
work=$2
part=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"

missing=0
for t in go:golang-go protoc:protobuf-compiler chromium:chromium perf:linux-perf; do
  command -v "${t%%:*}" >/dev/null || { echo "FAIL: ${t%%:*} not found (scripts/install-deps installs ${t#*:})"; missing=1; }
done
[ $missing = 0 ] || exit 1

. "$here/programs.sh"
if [ "$part" = empty ]; then
  build_part c 1
  # One sample a second of cpu-clock: a short run records none.
  record perf.data -c 1000000000
else
  build_part "$part"
  record perf.data
fi

"$sframe" perf script -i perf.data --folded --pprof ours.pb.gz --flamegraph ours.svg >ours.folded 2>ours.err ||
  { cat ours.err; exit 1; }
cat ours.err
fail=0

# chromium URL OUT: the DOM after the document's script ran.
dom() {
  chromium --headless --no-sandbox --disable-gpu --dump-dom "$1" >"$2" 2>chromium.err ||
    { echo "FAIL: chromium --dump-dom $1:"; cat chromium.err; exit 1; }
}
svg_url="file://$PWD/ours.svg"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,800 \
  --screenshot="$PWD/flamegraph.png" "$svg_url" >/dev/null 2>chromium.err ||
  { echo "FAIL: chromium --screenshot:"; cat chromium.err; exit 1; }

# The file as protobuf, read without our schema: gzip, then string 0 = "".
gzip -dc ours.pb.gz >ours.pb
protoc --decode_raw <ours.pb >ours.raw.txt || { echo "FAIL: protoc --decode_raw cannot read the profile"; fail=1; }
first=$(grep -m1 '^6: ' ours.raw.txt || true)
[ "$first" = '6: ""' ] || { echo "FAIL: the first string is $first, not \"\""; fail=1; }

if [ "$part" = empty ]; then
  [ ! -s ours.folded ] || { echo "FAIL: samples in the empty recording?"; fail=1; }
  grep -q '^2 {' ours.raw.txt && { echo "FAIL: samples in the profile of an empty recording"; fail=1; }
  grep -q '^1 {' ours.raw.txt || { echo "FAIL: no sample types in the profile of an empty recording"; fail=1; }
  python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' ours.svg ||
    { echo "FAIL: the flame graph of an empty recording is not well-formed"; fail=1; }
  dom "$svg_url" empty.dom
  grep -q '(0 samples)</text>' empty.dom || { echo "FAIL: Chromium's DOM of the empty flame graph has no title with 0 samples"; fail=1; }
  [ $fail = 0 ] && echo "ok: empty recording: a valid profile without samples, an empty flame graph Chromium loads"
  exit $fail
fi

go tool pprof -symbolize=none -sample_index=samples -traces ours.pb.gz >pprof.traces 2>pprof.err ||
  { echo "FAIL: go tool pprof -traces:"; cat pprof.err; exit 1; }
go tool pprof -symbolize=none -raw ours.pb.gz >pprof.raw 2>>pprof.err ||
  { echo "FAIL: go tool pprof -raw:"; cat pprof.err; exit 1; }
perf script -i perf.data --show-mmap-events 2>/dev/null | grep 'PERF_RECORD_MMAP' >mmap.txt || true
python3 "$here/profile_check.py" pprof ours.folded pprof.traces pprof.raw mmap.txt || fail=1

# The flame graph as Chromium lays it out, zoomed to the widest frame below
# 90% (or the root), and searched for "main".
dom "$svg_url" svg.dom
zoom=$(python3 - svg.dom <<'PY'
import re, sys
best = ("f0", -1)
total = None
for m in re.finditer(r'<g class="f" id="(f\d+)" data-n="(\d+)" data-x="\d+" data-d="(\d+)"', open(sys.argv[1]).read()):
    fid, n, d = m.group(1), int(m.group(2)), int(m.group(3))
    if d == 0:
        total = n
    elif d >= 2 and n < 0.9 * total and n > best[1]:
        best = (fid, n)
print(best[0])
PY
)
dom "$svg_url#zoom=$zoom" zoom.dom
dom "$svg_url#search=%5Emain%24" search.dom
python3 "$here/profile_check.py" svg ours.folded ours.svg svg.dom zoom.dom "$zoom" search.dom '^main$' || fail=1

if [ "$part" = names ]; then
  # The text layout's names are the whole demangled ones: operator"" _spin(...).
  "$sframe" perf script -i perf.data --flamegraph full.svg >/dev/null 2>&1 || { echo "FAIL: --flamegraph with the text layout"; fail=1; }
  python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' full.svg ||
    { echo "FAIL: full.svg is not well-formed"; fail=1; }
  dom "file://$PWD/full.svg#zoom-name=operator%22%22%20_spin(unsigned%20long%20long)" full.dom
  # Written escaped; Chromium's DOM holds the names themselves (its
  # serialization escapes '<', '>', '&' in text, not quotes).
  if grep -q '<title>operator&quot;&quot; _spin(unsigned long long) (' full.svg &&
     grep -q '<title>operator"" _spin(unsigned long long) (' full.dom &&
     grep -q '<title>void spin_in&lt;std::pair&lt;int, char&amp;&gt; &gt;(std::pair&lt;int, char&amp;&gt;&amp;, unsigned long) (' full.dom &&
     grep -q 'id="unzoom"[^>]*opacity: 1' full.dom; then
    echo "ok: names with '<', '>', '&', '\"' escaped; Chromium zooms to operator\"\" _spin by name"
  else
    echo "FAIL: the full C++ names are not in Chromium's DOM as written, or #zoom-name did not zoom"
    fail=1
  fi
fi
exit $fail
