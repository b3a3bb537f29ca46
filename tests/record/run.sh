#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe record` on programs started now:
#   run.sh SFRAME WORKDIR PART
# PART:
#   fp      the perf tests' C program built with frame pointers (leaf
#           functions too), with two threads and a fork+exec of a second
#           file, started by sh, which then execs that second file.
#           Truths: Debian 12's perf 6.1 and the current perf read the
#           recording and print, sample for sample, what `sframe perf script`
#           prints (-F comm,tid,ip,sym,dso; --no-inline); perf's own
#           `perf record --call-graph=dwarf` of the same program, unwound by
#           the current perf (libdw), has our hottest stack at the same share
#           of its process's samples within 5 percentage points (or three
#           standard errors of the difference, where fewer samples make that
#           larger); the exec'd child's samples are named (its MMAP2 records
#           came from the side band). The program runs on one CPU.
#   c       the same truths for the perf tests' C program without frame
#           pointers, with its own .sframe (-Wa,--gsframe);
#   python  and for python3 (SFrame generated from .eh_frame; run 4x longer
#           with SFRAMEPP_RECORD_SLOW set, in sanitizer builds). For both,
#           the profile --pprof converts as the records are written:
#           go tool pprof lists the stacks (and mappings) that the current
#           perf reads in the perf.data written beside it; --folded writes
#           stacks on standard output and no perf.data.
#   check   --check 1, sample for sample: for the C program with its own
#           .sframe, the C++ program that throws, python3 (SFrame generated),
#           the threads + fork+exec program, the dlopen program (its
#           library's CFI in .eh_frame, or in .debug_frame alone) and the C
#           program linked -static, without and with its own .sframe (libc's
#           SFrame generated from an .eh_frame no .eh_frame_hdr lists), the
#           current perf (libdw) unwinds the copied stacks of the --check
#           file, and at least 99% of those samples have the same user frames
#           (symbol and DSO) in the recording (tests/record/check.py; where
#           perf's 8 KB copy ran out, its frames a prefix of ours; for a
#           recursion 200 calls deep, tests/record/deep.c, most walks end at
#           the depth limit with 127 frames, a prefix of perf's). The
#           later programs take the C library's and the vDSO's tables from
#           the table cache the first one filled (the static ones exactly
#           the vDSO's); one takes them rebuilt from a damaged file.
#   profile the profile test program (tests/record/profile.c: two threads,
#           24 stacks in fixed shares) recorded by `sframe record` and by
#           perf record --call-graph=dwarf (unwound by the current perf) for
#           the same time, at least 20,000 samples each: the top 10 stacks of
#           each are within 2 percentage points of their share in the other.
#   pid     -p PID of a running process: recorded until it exits. Then a
#           command that runs 200 short processes, one after the other: the
#           samples (as perf 7.2 reads them) come from at least 100 of them.
#   all     -a --duration 1: the whole system; both perfs read it.
#   errors  no root, bad usage, SIGINT mid-recording (a complete file), an
#           unwritable output (the old file left as it was).
#   walk    the differential test of the in-kernel walk (bpf/walk.h,
#           compiled for the host: WALK_CHECK, the 4th argument) against the
#           library's walk over the tables `sframe record` loads, on perf
#           --call-graph=dwarf recordings of a C program with its own
#           .sframe (-Wa,--gsframe, no frame pointers), a C++ program and
#           python3 (SFrame generated from .eh_frame): at least 99% of the
#           samples walk to the same frames, on the recorded stacks and on
#           the same stacks damaged (three seeds: hostile stacks).
# BPF refused is a FAILURE with the recorder's words, never a skip.
set -euo pipefail
sframe=$(readlink -f "$1")
work=$2
part=$3
here=$(cd "$(dirname "$0")" && pwd)
record_tests=$here
perf_tests=$here/../perf
rm -rf "$work"
mkdir -p "$work"
cd "$work"
perf7=$(bash "$perf_tests/current_perf.sh") || exit 1

# build_part and record (perf record --call-graph=dwarf, made again when it
# fails or loses records): the perf tests' programs and how they are recorded.
. "$perf_tests/programs.sh"
launch=()

fail=0
fpflags=(-O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)

# Module tables are kept in the test's own cache (not ~/.cache): built by
# the first recording of a part, read back by the later ones.
rec() { # sframe record ARGS..., failing with its words
  if ! "$sframe" record --cache "$work/table-cache" "$@" >rec.out 2>rec.err; then
    echo "FAIL: sframe record $* failed:"
    sed 's/^/  | /' rec.err
    exit 1
  fi
  cat rec.err
}

# Both perfs print what `sframe perf script` prints, byte for byte (with
# COMM: for that command's samples; the others are the whole system's, whose
# names are perf script's business, not the recorder's).
only_comm() { # COMM < perf script text
  awk -v c="$1" 'BEGIN { RS=""; ORS="\n\n" } { split($0, l, " "); if (l[1] == c) print }'
}
same_as_perf() { # FILE [COMM]
  local f=$1 comm=${2:-}
  perf script -i "$f" -F comm,tid,ip,sym,dso >perf61.txt 2>perf61.err || { echo "FAIL: perf 6.1 cannot read $f:"; cat perf61.err; fail=1; return; }
  "$sframe" perf script --perf-compat 6.1 -i "$f" -F comm,tid,ip,sym,dso >ours61.txt 2>/dev/null
  "$perf7" script --no-inline -i "$f" -F comm,tid,ip,sym,dso >perf72.txt 2>perf72.err || { echo "FAIL: perf 7.2 cannot read $f:"; cat perf72.err; fail=1; return; }
  "$sframe" perf script -i "$f" -F comm,tid,ip,sym,dso >ours72.txt 2>/dev/null
  if [ -n "$comm" ]; then
    local t
    for t in perf61 ours61 perf72 ours72; do only_comm "$comm" <$t.txt >$t.only && mv $t.only $t.txt; done
  fi
  local n
  n=$(grep -c '^[^[:space:]]' perf61.txt || true)
  [ "$n" -gt 0 ] || { echo "FAIL: perf 6.1 prints no sample of $f"; fail=1; }
  cmp -s perf61.txt ours61.txt || { echo "FAIL: perf 6.1 and sframe perf script --perf-compat 6.1 differ on $f:"; diff perf61.txt ours61.txt | head -20; fail=1; }
  cmp -s perf72.txt ours72.txt || { echo "FAIL: perf 7.2 and sframe perf script differ on $f:"; diff perf72.txt ours72.txt | head -20; fail=1; }
  echo "$f: $n samples, perf 6.1 and 7.2 print what sframe perf script prints"
}

# The kernel as perf record notes it: the build-id perf reads off the
# running kernel (perf buildid-list -k) under [kernel.kallsyms], and the
# text mapping [_text, _etext) as /proc/kallsyms lists the two symbols.
kernel_as_perf() { # FILE
  local f=$1 want got text etext
  want="$(perf buildid-list -k 2>/dev/null) [kernel.kallsyms]"
  got=$(perf buildid-list -i "$f" 2>/dev/null | grep ' \[kernel.kallsyms\]$' || true)
  [ "$got" = "$want" ] || { echo "FAIL: $f: kernel build-id '$got', perf buildid-list -k says '$want'"; fail=1; }
  text=$(awk '$3 == "_text" { print $1; exit }' /proc/kallsyms)
  etext=$(awk '$3 == "_etext" { print $1; exit }' /proc/kallsyms)
  want=$(printf '[0x%x(0x%x) @ 0x%x' $((0x$text)) $((0x$etext - 0x$text)) $((0x$text)))
  got=$(perf script -i "$f" --show-mmap-events 2>/dev/null | grep -o '\[0x[0-9a-f]*(0x[0-9a-f]*) @ 0x[0-9a-f]*.*\[kernel.kallsyms\]_text' | head -1)
  [ "${got%% 00:00*}" = "$want" ] || { echo "FAIL: $f: kernel mapping '$got', /proc/kallsyms gives '$want'"; fail=1; }
  echo "$f: kernel build-id and text mapping as perf buildid-list -k and /proc/kallsyms give them"
}

# The same program recorded by perf record --call-graph=dwarf and unwound
# by the current perf (libdw), both printed by the current perf
# (--no-inline), collapsed and compared by profiles.py (its arguments after
# the two profiles: "hottest [COMM]" or "top N POINTS MIN_SAMPLES").
profile_vs_perf() { # OURS.data (of ${cmd[@]}) COMPARISON...
  local ours=$1
  shift
  record dwarf.data -F 999
  "$perf7" script --no-inline --max-stack 1024 -i dwarf.data -F comm,ip,sym 2>/dev/null | python3 "$record_tests/collapse.py" >theirs.folded
  "$perf7" script --no-inline -i "$ours" -F comm,ip,sym 2>/dev/null | python3 "$record_tests/collapse.py" >ours.folded
  python3 "$record_tests/profiles.py" ours.folded theirs.folded "$@" || fail=1
}

case $part in
  fp)
    gcc "${fpflags[@]}" -o prog "$perf_tests/work.c" -lpthread
    gcc "${fpflags[@]}" -o child "$perf_tests/work.c" -lpthread
    # sh forks and execs both files; prog also runs threads and a short
    # fork+exec of child itself. On one CPU, prog's three equal threads get
    # equal time (on two, one runs beside the recorder, and their shares
    # swing by 10 points from run to run).
    cmd=(taskset -c 0 sh -c "./prog 15000 fork $work/child; ./child 10000")
    rec -F 999 -o rec.data -- "${cmd[@]}"
    same_as_perf rec.data
    profile_vs_perf rec.data hottest child
    ;;
  c|python)
    # No frame pointers: a C program with its own .sframe, python3 with
    # SFrame generated from .eh_frame.
    here=$perf_tests
    if [ "$part" = c ]; then build_part c 30000; else build_part python; fi
    # The interpreter itself, not a launcher script (pyenv's shims are
    # shell scripts): its files then get their tables before it starts.
    [ "$part" = python ] && cmd[0]=$(python3 -c 'import sys; print(sys.executable)')
    # A sanitizer build of the recorder builds the tables of the modules
    # python dlopens (libcrypto for hashlib among them) ten times slower,
    # while the workload runs at full speed: run it longer, so that the
    # samples before those tables stay a small share.
    [ "$part" = python ] && [ -n "${SFRAMEPP_RECORD_SLOW:-}" ] && sed -i 's/range(25)/range(100)/' work.py
    rec -F 999 -o rec.data -- "${cmd[@]}"
    same_as_perf rec.data
    profile_vs_perf rec.data hottest
    if [ "$part" = c ]; then
      # The kernel's symbols left in perf's build-id cache as perf record
      # leaves them: a copy of /proc/kallsyms under the recorded kernel's
      # build-id (dd's samples are mostly in the kernel), read by both
      # perfs and by sframe perf script.
      mkdir -p home
      HOME=$work/home rec -F 999 -o k.data -- dd if=/dev/zero of=/dev/null bs=64k count=200000
      copy="home/.debug/[kernel.kallsyms]/$(perf buildid-list -k)/kallsyms"
      if [ ! -s "$copy" ]; then
        echo "FAIL: sframe record left no copy of kallsyms in perf's build-id cache ($copy)"; fail=1
      elif ! cmp -s <(grep -v '\[' /proc/kallsyms) <(grep -v '\[' "$copy"); then
        echo "FAIL: $copy: the kernel's own lines differ from /proc/kallsyms"; fail=1
      else
        echo "$copy: the kernel's own lines as /proc/kallsyms lists them"
      fi
      HOME=$work/home same_as_perf k.data
      # Beside the copy, its index: sframe perf script reads the copy
      # through it (the comparison above), and through a scan of the copy
      # when the index does not check out against it.
      if [ ! -s "$copy.sframe-index" ]; then
        echo "FAIL: sframe record left no index of the kallsyms copy ($copy.sframe-index)"; fail=1
      else
        printf 'x' | dd of="$copy.sframe-index" bs=1 seek=100 conv=notrunc status=none
        HOME=$work/home same_as_perf k.data
      fi
    fi
    # The profiles directly: files written, nothing on standard output.
    # They are converted as the records are written, not from the perf.data
    # written beside them: go tool pprof lists the stacks the current perf
    # reads in that perf.data, and their mappings are its MMAP2 records.
    rec -F 999 -o rec2.data --pprof rec.pb.gz --flamegraph rec.svg -- "${cmd[@]}"
    if [ -s rec.out ] || [ ! -s rec.pb.gz ] || ! grep -q '<svg' rec.svg; then
      echo "FAIL: --pprof/--flamegraph: stdout $(wc -c <rec.out) bytes, profile $(stat -c %s rec.pb.gz 2>/dev/null) bytes"; fail=1
    fi
    "$perf7" script --no-inline -i rec2.data -F comm,ip,sym 2>/dev/null | python3 "$record_tests/collapse.py" >rec2.folded
    go tool pprof -symbolize=none -sample_index=samples -traces rec.pb.gz >rec.traces 2>pprof.err &&
      go tool pprof -symbolize=none -raw rec.pb.gz >rec.raw 2>>pprof.err ||
      { echo "FAIL: go tool pprof:"; cat pprof.err; fail=1; }
    perf script -i rec2.data --show-mmap-events 2>/dev/null | grep 'PERF_RECORD_MMAP' >rec2.mmap || true
    if python3 "$perf_tests/profile_check.py" pprof rec2.folded rec.traces rec.raw rec2.mmap; then
      echo "--pprof as recorded: the stacks and mappings the current perf reads in the perf.data beside it"
    else
      fail=1
    fi
    # --folded: no perf.data, the stacks on standard output.
    rm -f sframe.data
    rec -F 999 --folded -- "${cmd[@]}"
    if [ -e sframe.data ] || ! grep -q "^${cmd[0]##*/};.* [0-9]*$" rec.out; then
      echo "FAIL: --folded: a perf.data left ($(ls sframe.data 2>&1)), or no stacks of ${cmd[0]##*/} on standard output:"
      head -3 rec.out; fail=1
    fi
    ;;
  check)
    here=$perf_tests
    # Every sample checked, some 250 or more per program: the 99% then
    # allows a difference or two.
    for p in c cxx python threads dlopen dlopen_debug_frame static static_gsframe dense deep; do
      case $p in
        c | static*) build_part "$p" 12000 ;;
        cxx) build_part cxx 180 ;;
        # Callers in a page of over 120 rules (20 on average), which the
        # summary must show in the tables.
        dense) gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o dense "$record_tests/dense.c"
               cmd=(./dense 400000) ;;
        # Stacks of 200 frames: the walk stops at its depth limit, perf
        # unwinds them all.
        deep) gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o deep "$record_tests/deep.c"
              cmd=(./deep 200 2500) ;;
        *) build_part "$p" ;;
      esac
      [[ $p = dlopen* ]] && cmd[2]=12000
      [ "$p" = python ] && cmd[0]=$(python3 -c 'import sys; print(sys.executable)')
      # Tables from the cache are checked as built ones are: every part
      # after the first reads the C library's and the vDSO's from it (the
      # static programs map no file before them: the vDSO's alone). Before
      # `threads`, every cached table is damaged (a byte of its blocks
      # flipped): they are built again, and the next part reads them back.
      if [ "$p" = threads ]; then
        for t in "$work"/table-cache/*.table; do
          python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(200); b = f.read(1); f.seek(200); f.write(bytes([b[0] ^ 0x5a]))' "$t"
        done
      fi
      rec -F 999 --check 1 -o "$p.data" -- "${cmd[@]}"
      cached=$(sed -n 's/.*SFrame, \([0-9]*\) from the cache).*/\1/p' rec.err)
      case $p in
        c | threads) want='[ "$cached" = 0 ]' ;;
        static*) want='[ "$cached" = 1 ]' ;;
        *) want='[ "${cached:-0}" -ge 1 ]' ;;
      esac
      eval "$want" || { echo "FAIL: $p: $cached module tables from the cache (want: $want)"; fail=1; }
      [ -s "$p.data.check" ] || { echo "FAIL: --check wrote no $p.data.check"; fail=1; continue; }
      if [ "$p" = dense ] && ! [ "$(sed -n 's/.*at most \([0-9]*\) in a page.*/\1/p' rec.err)" -ge 120 ] 2>/dev/null; then
        echo "FAIL: dense: no page of 120 rows or more in the tables"; fail=1
      fi
      "$perf7" script --no-inline --max-stack 1024 -i "$p.data.check" -F tid,time,ip,sym,dso >theirs.txt 2>perf72.err ||
        { echo "FAIL: perf 7.2 cannot read $p.data.check:"; cat perf72.err; fail=1; continue; }
      "$perf7" script --no-inline --max-stack 1024 -i "$p.data" -F tid,time,ip,sym,dso >ours.txt 2>perf72.err ||
        { echo "FAIL: perf 7.2 cannot read $p.data:"; cat perf72.err; fail=1; continue; }
      python3 "$record_tests/check.py" ours.txt theirs.txt "$p.data.check" 99 >check.out || fail=1
      sed "s/^/$p: /" check.out
      if [ "$p" = deep ]; then
        # Most samples are at the bottom of the recursion: their walks end
        # at the depth limit, with 127 frames perf unwinds too.
        copied=$(sed -n 's/^--check: \([0-9]*\) samples copied.*/\1/p' check.out)
        at_limit=$(sed -n 's/.* \([0-9]*\) at our depth limit.*/\1/p' check.out)
        if ! [ "${at_limit:-0}" -gt 0 ] || [ $((2 * at_limit)) -lt "${copied:-0}" ]; then
          echo "FAIL: deep: ${at_limit:-no} of ${copied:-?} checked samples walked to the depth limit (want most)"; fail=1
        fi
      fi
    done
    ;;
  profile)
    gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o prog "$record_tests/profile.c" -lpthread
    cmd=(./prog 15)
    rec -F 999 -o rec.data -- "${cmd[@]}"
    profile_vs_perf rec.data top 10 2 20000
    ;;
  pid)
    gcc "${fpflags[@]}" -o prog "$perf_tests/work.c" -lpthread
    ./prog 40000 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    sleep 0.3
    rec -p "$pid" -F 499 -o rec.data
    wait "$pid" || true
    same_as_perf rec.data
    grep -q "^prog;.*;outer;.*leaf " <("$sframe" perf script --folded -i rec.data 2>/dev/null) ||
      { echo "FAIL: no prog;...;outer;...leaf stack"; fail=1; }
    # Processes a recorded one starts are recorded (their sampling events
    # inherited at fork), however many: 200 short shells, each counting
    # for some milliseconds, must show in the samples under many pids.
    printf 'for i in $(seq 200); do sh -c '"'"'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'"'"'; done\n' >spawn.sh
    rec -F 999 -o spawn.data -- sh spawn.sh
    pids=$("$perf7" script -i spawn.data -F pid 2>/dev/null | sort -u | wc -l)
    echo "spawn: samples of $pids processes (200 started)"
    [ "$pids" -ge 100 ] || { echo "FAIL: the processes a recorded one started are not recorded ($pids pids)"; fail=1; }
    ;;
  all)
    gcc "${fpflags[@]}" -o prog "$perf_tests/work.c" -lpthread
    # Running until killed: the set-up (every process's tables) takes
    # seconds in a sanitizer build.
    ./prog 100000000 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    rec -a --duration 1 -o rec.data
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    same_as_perf rec.data prog
    kernel_as_perf rec.data
    grep -q "^prog;.*;outer;.*leaf " <("$sframe" perf script --folded -i rec.data 2>/dev/null) ||
      { echo "FAIL: -a recorded no prog;...;outer;...leaf stack"; fail=1; }
    ;;
  errors)
    gcc "${fpflags[@]}" -o prog "$perf_tests/work.c" -lpthread
    # Not root: one line, exit status 1.
    set +e
    setpriv --reuid=65534 --regid=65534 --clear-groups "$sframe" record -o /tmp/x.data -- ./prog 1 >o.txt 2>e.txt
    rc=$?
    set -e
    if [ $rc -ne 1 ] || [ "$(wc -l <e.txt)" -ne 1 ] || ! grep -q "needs root" e.txt; then
      echo "FAIL: without root: exit $rc, stderr:"; cat e.txt; fail=1
    fi
    # Usage: one mode.
    set +e
    "$sframe" record -a -p 1 >o.txt 2>e.txt; rc=$?
    set -e
    [ $rc -ne 0 ] && grep -q "one of -a, -p PID or -- COMMAND" e.txt || { echo "FAIL: -a -p 1: exit $rc"; cat e.txt; fail=1; }
    # A process that does not exist.
    set +e
    "$sframe" record -p 999999999 -o np.data >o.txt 2>e.txt; rc=$?
    set -e
    [ $rc -eq 1 ] && grep -q "no such process" e.txt && [ ! -e np.data ] ||
      { echo "FAIL: -p of no process: exit $rc"; cat e.txt; fail=1; }
    # A command that does not exist.
    set +e
    "$sframe" record -o nx.data -- ./no-such-program >o.txt 2>e.txt; rc=$?
    set -e
    [ $rc -eq 1 ] && grep -q "no-such-program: cannot run" e.txt && [ ! -e nx.data ] ||
      { echo "FAIL: a missing command: exit $rc"; cat e.txt; ls; fail=1; }
    # SIGINT mid-recording: exit 0, a complete file.
    "$sframe" record -a -o int.data 2>int.err &
    rp=$!
    sleep 1
    kill -INT "$rp"
    set +e
    wait "$rp"; rc=$?
    set -e
    [ $rc -eq 0 ] || { echo "FAIL: SIGINT: exit $rc"; cat int.err; fail=1; }
    perf script -i int.data >/dev/null 2>e.txt || { echo "FAIL: perf 6.1 cannot read the interrupted recording"; cat e.txt; fail=1; }
    # A command that fails or is killed: its status, as the current perf
    # record's own (3, and 128 + SIGTERM), and a complete recording still.
    for c in 'exit 3' 'kill -TERM $$'; do
      set +e
      "$perf7" record -q -e cpu-clock -o pst.data -- sh -c "$c" >o.txt 2>&1; want=$?
      "$sframe" record -o st.data -- sh -c "$c" >o.txt 2>e.txt; rc=$?
      set -e
      [ $rc -eq $want ] && [ $rc -ne 0 ] || { echo "FAIL: record -- sh -c '$c': exit $rc, perf record's $want"; cat e.txt; fail=1; }
      perf script -i st.data >/dev/null 2>o.txt || { echo "FAIL: perf 6.1 cannot read the recording of sh -c '$c'"; cat o.txt; fail=1; }
    done
    # An output that cannot be written: the old file as it was.
    mkdir ro && echo old >ro/keep.data && chmod 555 ro
    set +e
    setpriv --inh-caps=-dac_override --bounding-set=-dac_override "$sframe" record -o ro/keep.data -- ./prog 1 >o.txt 2>e.txt; rc=$?
    set -e
    [ $rc -eq 1 ] && [ "$(cat ro/keep.data)" = old ] && [ "$(wc -l <e.txt)" -eq 1 ] ||
      { echo "FAIL: unwritable output: exit $rc"; cat e.txt; fail=1; }
    # Outputs written after the recording (--folded's, --pprof's) that
    # cannot be written: refused before the command runs, one line naming
    # the path.
    for opt in "--folded -o nodir/x.folded" "--pprof nodir/x.pb.gz"; do
      rm -f ran
      set +e
      # shellcheck disable=SC2086
      "$sframe" record $opt -- sh -c 'touch ran' >o.txt 2>e.txt; rc=$?
      set -e
      [ $rc -eq 1 ] && [ ! -e ran ] && [ "$(wc -l <e.txt)" -eq 1 ] && grep -q "nodir/x" e.txt ||
        { echo "FAIL: record $opt: exit $rc, the command ran: $([ -e ran ] && echo yes || echo no)"; cat e.txt; fail=1; }
    done
    echo "errors: no root, usage, missing command, the command's exit status, SIGINT, unwritable output (before recording for --folded, --pprof)"
    ;;
  walk)
    check=$(readlink -f "$4")
    here=$perf_tests  # programs.sh builds from the perf tests' sources
    # Some 300 samples each at least: the 99% then allows a difference or
    # two, where a hundred samples allowed none.
    for p in c cxx python dense; do
      case $p in
        c) build_part c 12000 ;;
        cxx) build_part cxx 180 ;;
        dense) gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o dense "$record_tests/dense.c"
               cmd=(./dense 400000) ;;
        *) build_part "$p" ;;
      esac
      record "$p.data" -F 999
      "$check" "$p.data" 99 >walk.out || fail=1
      cat walk.out
      if [ "$p" = dense ] && ! [ "$(sed -n 's/.*at most \([0-9]*\) rows in one.*/\1/p' walk.out)" -ge 120 ] 2>/dev/null; then
        echo "FAIL: dense: no page of 120 rows or more in the tables"; fail=1
      fi
      for seed in 1 2 3; do "$check" "$p.data" 99 "$seed" | sed "s/^/  damaged (seed $seed): /" || fail=1; done
    done
    ;;
  *) echo "run.sh: unknown part $part" >&2; exit 2 ;;
esac
[ $fail -eq 0 ] && echo PASS
exit $fail
