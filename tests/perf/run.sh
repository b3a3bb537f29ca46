#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf script` against `perf script --no-inline` on recordings made
# now with `perf record -e cpu-clock --call-graph=dwarf` (perf is the truth:
# Debian's linux-perf, which unwinds with libunwind):
#   run.sh SFRAME WORKDIR PART
# PART: c (-O2 -fomit-frame-pointer -Wa,--gsframe), threads (threads and a
# fork+exec), dlopen (a library dlopen()ed mid-recording, no .sframe), cxx
# (C++ with libstdc++), plt (samples in libc's own PLT, whose IRELATIVE
# slots perf names "@plt"). Compares `-F tid,ip,sym,dso` sample by sample: at
# least 99% of the samples must have identical frame lists, and every
# difference is listed with its reason (compare.py). Also checks the
# default layout, --folded against `perf script report stackcollapse`, that
# pipe mode and -z (zstd) recordings give the same frames, and (c) that a
# binary gone since the recording is found in perf's build-id cache.
# perf_event_open refused (or perf missing) is a FAILURE, never a skip.
set -euo pipefail
sframe=$(readlink -f "$1")
work=$2
part=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"

command -v perf >/dev/null || { echo "FAIL: perf not installed (scripts/install-deps installs linux-perf)"; exit 1; }

cflags=(-O2 -g -fomit-frame-pointer)
gsframe=(-Wa,--gsframe)
case $part in
  c)
    gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/work.c" -lpthread
    cmd=(./prog 4000) ;;
  threads)
    gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/work.c" -lpthread
    # The exec'd child: another file (built with frame pointers).
    gcc -O1 -g -fno-omit-frame-pointer -o child "$here/work.c" -lpthread
    # The child runs a 200th of the parent's loops: perf 6.1 keeps a
    # process's libunwind state across exec, so its own unwinding of an
    # exec'd child stops early in libc or runs into the parent's [stack]
    # (seen here: ~25% of the samples when the child works as long as the
    # parent; with setarch -R, every process exec'd after a sample). The
    # child's few samples are listed by compare.py with that reason.
    cmd=(./prog 3000 fork "$work/child") ;;
  dlopen)
    gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/dl_main.c" -ldl
    gcc "${cflags[@]}" -shared -fPIC -o libburn.so "$here/dl_lib.c"
    cmd=(./prog "$work/libburn.so" 4000) ;;
  cxx)
    g++ "${cflags[@]}" "${gsframe[@]}" -o prog "$here/cxx.cpp"
    cmd=(./prog 60) ;;
  plt)
    gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/plt.c"
    cmd=(./prog 10000) ;;
  *) echo "run.sh: unknown part $part" >&2; exit 2 ;;
esac

record() { # OUT EXTRA...
  local out=$1
  shift
  if ! perf record -q -e cpu-clock --call-graph=dwarf "$@" -o "$out" -- "${cmd[@]}" >/dev/null 2>record.err; then
    echo "FAIL: perf record failed (perf_event_open refused?):"
    sed 's/^/  | /' record.err
    echo "  perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null), uid=$(id -u)"
    exit 1
  fi
}
record perf.data

fail=0
perf script -i perf.data -F tid,ip,sym,dso --no-inline >perf.txt 2>perf.err
"$sframe" perf script -i perf.data -F tid,ip,sym,dso >ours.txt 2>ours.err
"$sframe" perf script -i perf.data --json >ours.json 2>/dev/null
cat ours.err
python3 "$here/compare.py" perf.txt ours.txt ours.json || fail=1

# The default layout (header line with comm, tid, time, period, event;
# sym+off and dso per frame): the same samples must print the same.
perf script -i perf.data --no-inline >perf-default.txt 2>/dev/null
"$sframe" perf script -i perf.data >ours-default.txt 2>/dev/null
python3 "$here/compare.py" --quiet perf-default.txt ours-default.txt ours.json || {
  echo "FAIL: the default layout differs beyond the allowed 1% (see $work/*-default.txt)"
  fail=1
}

# --folded vs perf's own stackcollapse script over the same file: every
# stack perf collapses the same (its frames agree) must count the same.
# (perf script report stackcollapse is this script; --no-inline as ours.)
perf script -i perf.data --no-inline -s /usr/lib/perf-core/scripts/python/stackcollapse.py >perf.folded 2>/dev/null
"$sframe" perf script -i perf.data --folded >ours.folded 2>/dev/null
python3 "$here/compare.py" --folded perf.folded ours.folded || fail=1

if [ "$part" = c ]; then
  # Pipe mode and zstd-compressed records: the same reader output as perf.
  for mode in pipe z; do
    if [ $mode = pipe ]; then
      perf record -q -e cpu-clock --call-graph=dwarf -o - -- "${cmd[@]}" >"$mode.data" 2>record.err ||
        { echo "FAIL: perf record -o - failed:"; cat record.err; exit 1; }
    else
      record "$mode.data" -z
    fi
    perf script -i "$mode.data" -F tid,ip,sym,dso --no-inline >"perf-$mode.txt" 2>/dev/null
    "$sframe" perf script -i "$mode.data" -F tid,ip,sym,dso >"ours-$mode.txt" 2>/dev/null
    "$sframe" perf script -i "$mode.data" --json >"ours-$mode.json" 2>/dev/null
    echo "== $mode mode"
    python3 "$here/compare.py" "perf-$mode.txt" "ours-$mode.txt" "ours-$mode.json" || fail=1
  done
fi
if [ "$part" = c ]; then
  # A binary gone since the recording (deleted, or rebuilt): both tools find
  # it by build-id in perf's cache (~/.debug/.build-id/, filled by perf
  # record), where perf keeps a copy.
  mv prog prog.moved
  perf script -i perf.data -F tid,ip,sym,dso --no-inline >perf-gone.txt 2>/dev/null
  "$sframe" perf script -i perf.data -F tid,ip,sym,dso >ours-gone.txt 2>/dev/null
  "$sframe" perf script -i perf.data --json >ours-gone.json 2>/dev/null
  echo "== binary gone (build-id cache)"
  if ! grep -q "leaf (.*/prog)" perf-gone.txt; then
    echo "FAIL: perf itself does not name the gone binary's frames (no build-id cache copy?)"
    fail=1
  fi
  python3 "$here/compare.py" perf-gone.txt ours-gone.txt ours-gone.json || fail=1
  mv prog.moved prog
fi
if [ "$part" = plt ]; then
  # perf's own name for libc's IRELATIVE PLT slots ("@plt"): the recording
  # must have such samples, and ours must name every one of them the same.
  libc_plt() { grep -cE '^[[:space:]]+[0-9a-f]+ @plt \(.*/libc\.so' "$1" || true; }
  theirs=$(libc_plt perf.txt)
  mine=$(libc_plt ours.txt)
  echo "== samples in libc's PLT named @plt: perf $theirs, ours $mine"
  if [ "$theirs" -lt 10 ]; then
    echo "FAIL: perf shows only $theirs frames in libc's PLT: the case is not exercised"
    fail=1
  elif [ "$mine" != "$theirs" ]; then
    echo "FAIL: perf names $theirs frames in libc's PLT @plt, ours $mine"
    fail=1
  fi
fi
[ $fail = 0 ] && echo "PASS: $part"
exit $fail
