#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe perf inject` on recordings made now (perf record -e cpu-clock
# --call-graph=dwarf), read back by both perfs:
#   inject.sh SFRAME WORKDIR PART
# PART: c (the perf tests' C program, -O2 -fomit-frame-pointer -Wa,--gsframe;
# also pipe mode in and out, -z input, and bad input), cxx (C++ with
# libstdc++), python (python3.11 running a small workload: a non-PIE
# interpreter, libc, libm, libz, libexpat), exec (one process through a
# chain of execs: tests/perf/programs.sh). Truths:
#  - Debian 12's perf 6.1 and the current perf (tests/perf/current_perf.sh)
#    read the injected file, and `perf script -F tid,ip,sym,dso --no-inline
#    --max-stack 1024` of it names the same frames (symbol and dso, per
#    frame) as `sframe perf script` of the recording, for 100% of samples;
#  - the current perf's own `perf script` of the recording (libdw, at read
#    time) names the same frames as it does reading ours, for at least 99%;
#  - the current perf's own `perf inject --convert-callchain` output, printed
#    by the current perf, names the same frames as ours for at least 99% of
#    samples, where perf's conversion losing frames its own perf script
#    finds counts for ours (inject_compare.py --vs-perf-inject; every other
#    difference listed);
#  - the injected attributes lose REGS_USER and STACK_USER (perf evlist -v).
# perf_event_open refused, or either perf missing, is a FAILURE, never a skip.
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
case $part in
  c) build_part c 3000 ;;
  cxx) build_part cxx 40 ;;
  python) build_part python ;;
  exec) build_part exec ;;
  *) echo "inject.sh: unknown part $part" >&2; exit 2 ;;
esac

record in.data

fail=0
fields=(-F tid,ip,sym,dso --no-inline --max-stack 1024)
# What `sframe perf script` names, in each perf's naming: the current
# perf's (default) and perf 6.1's (--perf-compat 6.1; its all-ones frame,
# where perf 6.1's own libunwind walk reads the copy's last 8 bytes, stands
# for the frame a callchain holds there: inject_compare.py).
"$sframe" perf script -i in.data -F tid,ip,sym,dso >ours-script.txt 2>/dev/null
"$sframe" perf script --perf-compat 6.1 -i in.data -F tid,ip,sym,dso >ours-script61.txt 2>/dev/null
/usr/bin/time -f "%e s %M KB" -o inject.time "$sframe" perf inject -i in.data -o inj.data 2>inject.err ||
  { echo "FAIL: sframe perf inject failed:"; cat inject.err; exit 1; }
cat inject.err
echo "input $(stat -c %s in.data) bytes, injected $(stat -c %s inj.data) bytes, $(cat inject.time)"

if perf evlist -v -i inj.data 2>/dev/null | grep -qE 'REGS_USER|STACK_USER'; then
  echo "FAIL: the injected attributes still sample REGS_USER or STACK_USER:"
  perf evlist -v -i inj.data
  fail=1
fi

# Both perfs read the injected file and name the frames sframe perf script names.
perf script -i inj.data "${fields[@]}" >perf61-inj.txt 2>perf61.err || { echo "FAIL: perf 6.1 cannot read it:"; cat perf61.err; fail=1; }
"$perf7" script -i inj.data "${fields[@]}" >perf7-inj.txt 2>perf7.err || { echo "FAIL: the current perf cannot read it:"; cat perf7.err; fail=1; }
# perf 6.1's own names of the recording's frames: where it names a frame
# otherwise than --perf-compat 6.1 does (the first .plt slot, after
# `_init`), it must name it so in both files.
perf script -i in.data "${fields[@]}" >perf61-script.txt 2>/dev/null ||
  { echo "FAIL: perf 6.1 cannot read the recording"; fail=1; }
echo "== perf 6.1 reading ours against sframe perf script of the recording"
python3 "$here/inject_compare.py" 1.0 ours-script61.txt perf61-inj.txt perf61-script.txt || fail=1
echo "== the current perf reading ours against sframe perf script of the recording"
python3 "$here/inject_compare.py" 1.0 ours-script.txt perf7-inj.txt || fail=1

# The current perf's own conversion (libdw), printed by the current perf.
/usr/bin/time -f "%e s %M KB" -o perf-inject.time "$perf7" inject --convert-callchain -i in.data -o perf-inj.data 2>perf-inject.err ||
  { echo "FAIL: perf inject --convert-callchain failed:"; cat perf-inject.err; exit 1; }
echo "perf inject --convert-callchain: $(stat -c %s perf-inj.data) bytes, $(cat perf-inject.time)"
"$perf7" script -i perf-inj.data "${fields[@]}" >perf7-perfinj.txt 2>/dev/null
"$perf7" script -i in.data "${fields[@]}" >perf7-script.txt 2>/dev/null
echo "== the current perf: its own perf script of the recording against ours"
python3 "$here/inject_compare.py" 0.99 perf7-script.txt perf7-inj.txt || fail=1
echo "== the current perf: its own --convert-callchain against ours (judge: its perf script)"
python3 "$here/inject_compare.py" --vs-perf-inject 0.99 perf7-script.txt perf7-perfinj.txt perf7-inj.txt || fail=1

if [ "$part" = c ]; then
  # Pipe mode in and out, and -z (zstd) input: the same frames.
  perf record -q -e cpu-clock --call-graph=dwarf -o - -- "${cmd[@]}" 2>record.err >pipe.data ||
    { echo "FAIL: perf record -o - failed:"; cat record.err; exit 1; }
  "$sframe" perf script -i pipe.data -F tid,ip,sym,dso >ours-pipe.txt 2>/dev/null
  "$sframe" perf script --perf-compat 6.1 -i pipe.data -F tid,ip,sym,dso >ours-pipe61.txt 2>/dev/null
  "$sframe" perf inject <pipe.data 2>/dev/null | perf script -i - "${fields[@]}" >perf61-pipe.txt 2>perf61-pipe.err ||
    { echo "FAIL: pipe mode: perf 6.1 cannot read our pipe output:"; cat perf61-pipe.err; fail=1; }
  echo "== pipe mode in and out (perf 6.1 reading)"
  python3 "$here/inject_compare.py" 1.0 ours-pipe61.txt perf61-pipe.txt || fail=1
  "$sframe" perf inject -i pipe.data -o pipe-inj.data 2>/dev/null
  "$perf7" script -i pipe-inj.data "${fields[@]}" >perf7-pipe.txt 2>/dev/null
  echo "== pipe mode in, file out (the current perf reading)"
  python3 "$here/inject_compare.py" 1.0 ours-pipe.txt perf7-pipe.txt || fail=1
  record z.data -z
  "$sframe" perf script -i z.data -F tid,ip,sym,dso >ours-z.txt 2>/dev/null
  "$sframe" perf inject -i z.data -o z-inj.data 2>/dev/null
  "$perf7" script -i z-inj.data "${fields[@]}" >perf7-z.txt 2>/dev/null
  echo "== -z input (the current perf reading)"
  python3 "$here/inject_compare.py" 1.0 ours-z.txt perf7-z.txt || fail=1

  # What it cannot convert: one line naming the file, exit 1, no output left.
  perf record -q -e cpu-clock -o plain.data -- ./prog 200 >/dev/null 2>&1
  head -c 3000 in.data >cut.data
  for bad in plain.data cut.data missing.data; do
    rm -f bad-out.data
    set +e
    "$sframe" perf inject -i "$bad" -o bad-out.data 2>bad.err
    rc=$?
    set -e
    echo "== $bad: exit $rc: $(cat bad.err)"
    if [ $rc != 1 ] || [ "$(wc -l <bad.err)" != 1 ] || ! grep -q "$bad" bad.err || [ -e bad-out.data ]; then
      echo "FAIL: $bad: want exit 1, one line naming the file, no output file"
      fail=1
    fi
  done
fi
[ $fail = 0 ] && echo "PASS: inject $part"
exit $fail
