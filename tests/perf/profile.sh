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
for t in go:golang-go protoc:protobuf-compiler perf:linux-perf; do
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

"$sframe" perf script -i perf.data --folded --pprof ours.pb.gz >ours.folded 2>ours.err || { cat ours.err; exit 1; }
cat ours.err
fail=0

# The file as protobuf, read without our schema: gzip, then string 0 = "".
gzip -dc ours.pb.gz >ours.pb
protoc --decode_raw <ours.pb >ours.raw.txt || { echo "FAIL: protoc --decode_raw cannot read the profile"; fail=1; }
first=$(grep -m1 '^6: ' ours.raw.txt || true)
[ "$first" = '6: ""' ] || { echo "FAIL: the first string is $first, not \"\""; fail=1; }

if [ "$part" = empty ]; then
  [ ! -s ours.folded ] || { echo "FAIL: samples in the empty recording?"; fail=1; }
  grep -q '^2 {' ours.raw.txt && { echo "FAIL: samples in the profile of an empty recording"; fail=1; }
  grep -q '^1 {' ours.raw.txt || { echo "FAIL: no sample types in the profile of an empty recording"; fail=1; }
  [ $fail = 0 ] && echo "ok: empty recording: a valid profile without samples"
  exit $fail
fi

go tool pprof -symbolize=none -sample_index=samples -traces ours.pb.gz >pprof.traces 2>pprof.err ||
  { echo "FAIL: go tool pprof -traces:"; cat pprof.err; exit 1; }
go tool pprof -symbolize=none -raw ours.pb.gz >pprof.raw 2>>pprof.err ||
  { echo "FAIL: go tool pprof -raw:"; cat pprof.err; exit 1; }
perf script -i perf.data --show-mmap-events 2>/dev/null | grep 'PERF_RECORD_MMAP' >mmap.txt || true
python3 "$here/profile_check.py" pprof ours.folded pprof.traces pprof.raw mmap.txt || fail=1
exit $fail
