#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf script` against `perf script --no-inline` on recordings made
# now with `perf record -e cpu-clock --call-graph=dwarf`. Two perfs are the
# truth: the current one (perf 7.2, which unwinds with libdw) for our
# default layout, and Debian 12's linux-perf (perf 6.1, libunwind) for
# `--perf-compat 6.1`:
#   run.sh SFRAME WORKDIR PART
# The current perf is $SFRAMEPP_CURRENT_PERF, else
# /opt/sframepp-ci/perf/bin/perf (where scripts/install-deps unpacks it);
# Debian 12's is `perf` on PATH. Either missing is a FAILURE.
# PART: c (-O2 -fomit-frame-pointer -Wa,--gsframe), threads (threads and a
# fork+exec), dlopen (a library dlopen()ed mid-recording, no .sframe), cxx
# (C++ with libstdc++), plt (samples in libc's own PLT, whose IRELATIVE
# slots perf 6.1 names "@plt", perf 7.2 "strlen@plt"), exec (one process
# through a chain of execs: samples before, inside and after them), clang
# (clang-16 compiling a C++ file: libLLVM's and libclang-cpp's folded
# aliases and C++ names), static
# and static_gsframe (static executables, without .eh_frame_hdr), and
# dlopen_debug_frame (the dlopen part's library with .debug_frame as its only
# CFI): perf 7.2 alone is the truth for those three, as perf 6.1's libunwind
# finds no unwind table there (checked: at most 50% of its samples as ours).
# Compares `-F tid,ip,sym,dso` and the default layout sample by sample,
# each of our layouts against its perf: at least 99% of the samples must
# print byte for byte the same, and every difference is listed with its
# reason (compare.py). Also checks --folded against perf 6.1's `perf script
# report stackcollapse`, that pipe mode and -z (zstd) recordings give the
# same frames, (c) that a binary gone since the recording is found in
# perf's build-id cache, and (exec) that every sample inside an exec, after
# its COMM record, is named by the old image's mappings as perf names it.
# perf_event_open refused (or perf missing) is a FAILURE, never a skip.
set -euo pipefail
sframe=$(readlink -f "$1")
work=$2
part=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"

perf7=$(bash "$here/current_perf.sh") || exit 1

. "$here/programs.sh"
build_part "$part"
# The c part checks that a binary gone since the recording is found in
# perf's build-id cache: perf record fills it there.
[ "$part" = c ] && record_cache=1
record perf.data

fail=0
# versus DATA TAG [--quiet] [-F FIELDS]: each perf's `perf script
# --no-inline` against ours in its layout (perf 7.2: our default; perf 6.1:
# --perf-compat 6.1), into {perf,ours}{7,61}-TAG.txt.
versus() {
  local data=$1 tag=$2 quiet=()
  shift 2
  if [ "${1:-}" = --quiet ]; then quiet=(--quiet); shift; fi
  [ -f "ours-$tag.json" ] || "$sframe" perf script -i "$data" --json >"ours-$tag.json" 2>/dev/null
  "$perf7" script -i "$data" "$@" --no-inline >"perf7-$tag.txt" 2>/dev/null
  "$sframe" perf script -i "$data" "$@" >"ours7-$tag.txt" 2>"ours7-$tag.err"
  perf script -i "$data" "$@" --no-inline >"perf61-$tag.txt" 2>/dev/null
  "$sframe" perf script -i "$data" "$@" --perf-compat 6.1 >"ours61-$tag.txt" 2>/dev/null
  echo "== $tag ${*:-(default layout)}: perf 7.2 vs default"
  python3 "$here/compare.py" "${quiet[@]}" "perf7-$tag.txt" "ours7-$tag.txt" "ours-$tag.json" || fail=1
  echo "== $tag ${*:-(default layout)}: perf 6.1 vs --perf-compat 6.1"
  if [ $oracle61 = 1 ]; then
    python3 "$here/compare.py" "${quiet[@]}" "perf61-$tag.txt" "ours61-$tag.txt" "ours-$tag.json" || fail=1
  else
    # No truth here (see below): it must still be unable, or it becomes one.
    local same
    same=$(python3 "$here/compare.py" "perf61-$tag.txt" "ours61-$tag.txt" "ours-$tag.json" |
           sed -n 's/^identical frame lists: .*(\([0-9.]*\)%).*/\1/p') || true
    echo "perf 6.1 is no truth for $part: ${same:-?}% of its samples as ours (at most 50% expected)"
    awk -v s="${same:-100}" 'BEGIN { exit !(s <= 50) }' ||
      { echo "FAIL: perf 6.1 unwinds $part now: compare against it"; fail=1; }
  fi
}
# Where perf 6.1's libunwind finds no unwind table, perf 7.2 (libdw) alone
# is the truth: static executables (no .eh_frame_hdr; perf 6.1 prints the
# sampled frame alone) and a library whose CFI is .debug_frame alone.
oracle61=1
case $part in static* | dlopen_debug_frame) oracle61=0 ;; esac
versus perf.data fields -F tid,ip,sym,dso
cat ours7-fields.err
# The default layout (header line with comm, tid, time, period, event;
# sym+off and dso per frame): the same samples must print the same.
cp ours-fields.json ours-default.json
versus perf.data default --quiet

# --folded vs perf's own stackcollapse script over the same file: every
# stack perf collapses the same (its frames agree) must count the same.
# (perf script report stackcollapse is this script; --no-inline as ours.)
# Not for clang: --folded keeps the default layout (docs/tool.md), and perf
# 6.1's stackcollapse ends each of clang's deep stacks that outgrow the 8 KB
# copy with its end-of-copy [unknown] frame (4.3% of samples on stacks counted
# alike, where the frames agree for 99.9%); the current
# perf's python scripting does not run here.
if [ $oracle61 = 1 ] && [ "$part" != clang ]; then
  perf script -i perf.data --no-inline -s /usr/lib/perf-core/scripts/python/stackcollapse.py >perf.folded 2>/dev/null
  "$sframe" perf script -i perf.data --folded >ours.folded 2>/dev/null
  python3 "$here/compare.py" --folded perf.folded ours.folded || fail=1
fi

if [ "$part" = c ]; then
  # Pipe mode and zstd-compressed records: the same reader output as perf.
  for mode in pipe z; do
    if [ $mode = pipe ]; then
      perf record -q -e cpu-clock --call-graph=dwarf -o - -- "${cmd[@]}" >"$mode.data" 2>record.err ||
        { echo "FAIL: perf record -o - failed:"; cat record.err; exit 1; }
    else
      record "$mode.data" -z
    fi
    versus "$mode.data" "$mode" -F tid,ip,sym,dso
  done
fi
if [ "$part" = c ]; then
  # A binary gone since the recording (deleted, or rebuilt): both tools find
  # it by build-id in perf's cache (~/.debug/.build-id/, filled by perf
  # record), where perf keeps a copy.
  mv prog prog.moved
  echo "== binary gone (build-id cache)"
  versus perf.data gone -F tid,ip,sym,dso
  for t in perf7 perf61; do
    if ! grep -q "leaf (.*/prog)" "$t-gone.txt"; then
      echo "FAIL: $t itself does not name the gone binary's frames (no build-id cache copy?)"
      fail=1
    fi
  done
  mv prog.moved prog
fi
if [ "$part" = c ]; then
  # Kernel symbols from perf's cached copy of another boot of the same
  # kernel: KASLR moved every address, by the same amount, and the
  # recording's "[kernel.kallsyms]_text" mapping gives the shift (perf's
  # kallsyms__delta). The copy here is this boot's, every address 16 MiB
  # higher, under a fresh $HOME/.debug. perf on the recorded kernel reads
  # /proc/kallsyms, so its names are the truth. dd spends its time in the
  # kernel: most of its samples have kernel frames.
  id=$(perf buildid-list -k 2>/dev/null)
  [ -n "$id" ] || { echo "FAIL: perf buildid-list -k gives no kernel build-id"; exit 1; }
  mkdir -p "kaslr/.debug/[kernel.kallsyms]/$id"
  python3 -c '
import sys
for line in open("/proc/kallsyms"):
    a, rest = line.split(" ", 1)
    v = int(a, 16)
    sys.stdout.write("%016x %s" % (v + (1 << 24) if v else 0, rest))
' >"kaslr/.debug/[kernel.kallsyms]/$id/kallsyms"
  saved=("${cmd[@]}")
  cmd=(dd if=/dev/zero of=/dev/null bs=64k count=200000)
  record kernel.data
  cmd=("${saved[@]}")
  echo "== kernel symbols from a copy of another boot (KASLR)"
  HOME=$PWD/kaslr versus kernel.data kaslr -F tid,ip,sym,dso
  named=$(grep -cE '^[[:space:]]+[0-9a-f]+ [^[ ][^ ]* \(\[kernel\.kallsyms\]\)$' perf7-kaslr.txt || true)
  echo "perf names $named kernel frames"
  if [ "$named" -lt 100 ]; then
    echo "FAIL: perf names only $named kernel frames: the case is not exercised"
    fail=1
  fi
fi
if [ "$part" = plt ]; then
  # perf 6.1's own name for libc's IRELATIVE PLT slots ("@plt"): the
  # recording must have such samples, and ours must name every one of them
  # the same (perf 7.2 names them after the IFUNC: compared above).
  libc_plt() { grep -cE '^[[:space:]]+[0-9a-f]+ @plt \(.*/libc\.so' "$1" || true; }
  theirs=$(libc_plt perf61-fields.txt)
  mine=$(libc_plt ours61-fields.txt)
  echo "== samples in libc's PLT named @plt: perf $theirs, ours $mine"
  if [ "$theirs" -lt 10 ]; then
    echo "FAIL: perf shows only $theirs frames in libc's PLT: the case is not exercised"
    fail=1
  elif [ "$mine" != "$theirs" ]; then
    echo "FAIL: perf names $theirs frames in libc's PLT @plt, ours $mine"
    fail=1
  fi
fi
if [ "$part" = exec ]; then
  # Samples inside pre's exec of sh after its COMM record (comm sh, the
  # user PC still in pre's libc's execve, the walk ending there): only
  # pre's mappings name that frame, which Space::settle_exec keeps until sh
  # runs. The recording must have such samples, and ours must print every
  # one of them as each perf does, up to that frame (perf 6.1 prints one
  # more after the return address 0 there, all ones: listed above).
  in_exec='^(sh .*\n[0-9a-f]+ __GI___execve\+0x[0-9a-f]+ \([^)]*/libc\.so\.6\))(\nf+ \[unknown\] \(\[unknown\]\))?$'
  for v in 7:7.2 61:6.1; do
    echo "== samples in pre's execve after the exec's COMM record (perf ${v#*:})"
    python3 "$here/compare.py" --where "$in_exec" 3 "perf${v%:*}-default.txt" "ours${v%:*}-default.txt" || fail=1
  done
fi
[ $fail = 0 ] && echo "PASS: $part"
exit $fail
