#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Retrofits through the packaging tools (issue 29, part 1): `sframe gen
# --loadable` on bash, busybox-static, python3.11, a C++ program with
# exceptions compiled here (with -g) and libz, and `gen --repair
# --loadable` on that program assembled with --gsframe after objcopy
# --remove-section=.sframe; then each tool a distribution runs on them:
# GNU strip (default, --strip-debug, --strip-unneeded), dh_strip's flags
# (executables: --remove-section=.comment --remove-section=.note; shared
# libraries: the same plus --strip-unneeded; debug files: objcopy
# --only-keep-debug --compress-debug-sections, strip, then objcopy
# --add-gnu-debuglink) and elfutils eu-strip. After each, valid means
# (truths that are not sframepp's code, but for verify's own verdicts):
#  - the program runs its own checks with the original's output and exit
#    status (bash -c, busybox sh -c, a python script using json, hashlib and
#    sqlite3, the C++ program's throw and catch, python3.11's zlib module
#    with the library);
#  - the tool says nothing (strip once warned "section .sframe lma ...
#    adjusted");
#  - readelf: the same program header types as the retrofit (eu-strip once
#    wrote PT_NULLs), PT_GNU_SFRAME equal to .sframe inside a PT_LOAD;
#  - `sframe verify` and `sframe verify --consumer kernel` exit 0;
#  - objdump --sframe of binutils 2.47 (shared/tools/get-unstable; Debian
#    12's 2.40 reads only SFrame v1) reads the section without a warning,
#    and prints what it printed for the retrofit before the tool.
# busybox-static is a static executable: its .rela.plt (whose address its
# code holds) follows its notes, so the program headers cannot grow in
# place; gen must warn, and the order the warning names (the tool first,
# then gen) must give a valid file.
# Every oracle and input must be there: a missing one fails the test.
# Usage: strip_matrix.sh SFRAME_BIN SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 shared=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
chk() { python3 "$here/loadable_check.py" "$@"; }
for t in strip objcopy eu-strip readelf g++ python3 /bin/bash /bin/busybox /usr/bin/python3.11; do
  command -v "$t" >/dev/null || bad "$t not found (an oracle or input of this test; scripts/install-deps)"
done
readelf -lW /bin/busybox 2>/dev/null | grep -q INTERP && bad "/bin/busybox is not busybox-static (apt-get install busybox-static)"
B=$("$shared/tools/get-unstable" binutils 2>"$work/get-unstable.err" | tail -1)
objdump47=$B/objdump
"$objdump47" --version 2>/dev/null | head -1 | grep -qE ' 2\.(4[7-9]|[5-9][0-9])' ||
  bad "no objdump 2.47 or later from shared/tools/get-unstable binutils: $(tail -3 "$work/get-unstable.err")"
[ $fail = 0 ] || { echo "strip_matrix: oracles missing"; exit 1; }

cat >"$work/cxx.cpp" <<'EOF'
#include <cstdio>
#include <stdexcept>
#include <string>
__attribute__((noinline)) int deep(int n) {
  if (n == 0) throw std::runtime_error("bottom");
  return deep(n - 1) + 1;
}
int main(int argc, char**) {
  try {
    deep(argc + 20);
  } catch (const std::exception& e) {
    std::printf("caught %s\n", e.what());
    return 5;
  }
  return 0;
}
EOF
mkdir -p "$work/src"
g++ -O2 -g -o "$work/src/cxx" "$work/cxx.cpp" || bad "compile cxx.cpp"
# --repair --loadable: the same program assembled with --gsframe, its
# section removed by objcopy (which leaves an empty PT_GNU_SFRAME).
g++ -O2 -g -Wa,--gsframe -o "$work/src/gsframe" "$work/cxx.cpp" &&
  objcopy --remove-section=.sframe "$work/src/gsframe" "$work/src/repair" || bad "compile cxx.cpp with --gsframe"

# check PROGRAM FILE: "status|output" of PROGRAM's own checks run with FILE.
check() {
  local o r
  case $1 in
    bash) o=$(timeout 20 "$2" -c 'f() { echo $((6 * 7)); return 3; }; f; echo $?; printf "%s\n" a c b | sort -r' 2>&1) ;;
    # busybox picks the applet by its name (argv[0]), then by argv[1]: run
    # through a link called busybox.
    busybox) mkdir -p "$2.d" && ln -sf "$(realpath "$2")" "$2.d/busybox"
      o=$(timeout 20 "$2.d/busybox" sh -c 'x=$(echo abc | tr a-c A-C); echo $x $((7 * 6)); seq 3 | wc -l; exit 4' 2>&1) ;;
    python3.11) o=$(timeout 20 "$2" -c 'import json, hashlib, sqlite3, sys
c = sqlite3.connect(":memory:")
c.execute("create table t(x)")
c.executemany("insert into t values (?)", [(i,) for i in range(100)])
print(json.dumps({"sum": c.execute("select sum(x) from t").fetchone()[0],
                  "sha": hashlib.sha256(b"sframe").hexdigest()}))
sys.exit(6)' 2>&1) ;;
    cxx | repair) o=$(timeout 20 "$2" 2>&1) ;;
    # A shared library: python3.11's zlib module loads it by its soname.
    libz) mkdir -p "$2.d" && cp "$2" "$2.d/libz.so.1"
      o=$(LD_LIBRARY_PATH="$2.d" timeout 20 /usr/bin/python3.11 -c 'import zlib, sys
print(zlib.crc32(b"sframe" * 1000), len(zlib.compress(bytes(range(256)) * 64)))
print([l.split()[-1] for l in open("/proc/self/maps") if "libz.so" in l][0].startswith(sys.argv[1]))' "$2.d/" 2>&1) ;;
  esac
  r=$?
  echo "$r|$o"
}
# apply TOOL IN OUT: what the packaging tool does to IN, written to OUT.
apply() {
  local tool=$1 in=$2 out=$3
  case $tool in
    strip) strip -o "$out" "$in" ;;
    strip-debug) strip --strip-debug -o "$out" "$in" ;;
    strip-unneeded) strip --strip-unneeded -o "$out" "$in" ;;
    dh-exec) strip --remove-section=.comment --remove-section=.note -o "$out" "$in" ;;
    dh-lib) strip --remove-section=.comment --remove-section=.note --strip-unneeded -o "$out" "$in" ;;
    dh-debug)
      # Debian's own binaries went through dh_strip already: their
      # .gnu_debuglink goes first, as a fresh build has none.
      objcopy --only-keep-debug --compress-debug-sections "$in" "$out.debug" &&
        strip --remove-section=.comment --remove-section=.note --remove-section=.gnu_debuglink -o "$out" "$in" &&
        objcopy --add-gnu-debuglink="$out.debug" "$out" &&
        readelf -SW "$out" | grep -q ' \.gnu_debuglink ' ;;
    eu-strip) eu-strip -o "$out" "$in" ;;
  esac
}
types() { readelf -lW "$1" | awk '/^  [A-Z]/ && $1 != "Type" {print $1}' | tr '\n' ' '; }
# sframe_dump FILE: objdump 2.47's reading of FILE's section (without the
# file name line) to FILE.objdump, its stderr to FILE.objdump.err.
sframe_dump() {
  [ -e "$1.objdump" ] || "$objdump47" --sframe "$1" 2>"$1.objdump.err" | tail -n +3 >"$1.objdump"
}
# valid WHAT PROGRAM FILE REF: FILE (PROGRAM after a tool) is valid; REF is
# the retrofit it came from (program headers, objdump's reading).
valid() {
  local what=$1 prog=$2 f=$3 ref=$4 o before=$fail
  [ "$(check "$prog" "$f")" = "${want[$prog]}" ] && ok ||
    bad "$what: runs differently: '$(check "$prog" "$f" | head -c 300)' vs '${want[$prog]}'"
  [ "$(types "$f")" = "$(types "$ref")" ] && ok || bad "$what: program headers '$(types "$f")', were '$(types "$ref")'"
  o=$(chk sframe-seg "$f") && ok || bad "$what: $o"
  o=$("$bin" verify "$f" 2>&1) && ok || bad "$what: sframe verify: $(head -3 <<<"$o")"
  o=$("$bin" verify --consumer kernel "$f" 2>&1) && ok || bad "$what: verify --consumer kernel: $(tail -3 <<<"$o")"
  sframe_dump "$f"; sframe_dump "$ref"
  grep -q 'Num FDEs' "$f.objdump" && cmp -s "$f.objdump" "$ref.objdump" && ! grep -qiE 'warning|error' "$f.objdump.err" && ok ||
    bad "$what: objdump 2.47 --sframe reads it differently from the retrofit's: $(head -3 "$f.objdump.err")"
  [ $fail = $before ]
}

declare -A want path
libz=$(/usr/bin/python3.11 -c 'import zlib
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libz.so" in l))')
cp "$libz" "$work/src/libz.so.1" || bad "no libz.so mapped by python3.11 ($libz)"
path=([bash]=/bin/bash [busybox]=/bin/busybox [python3.11]=/usr/bin/python3.11 [cxx]=$work/src/cxx
      [libz]=$work/src/libz.so.1 [repair]=$work/src/repair)
tools=(none strip strip-debug strip-unneeded dh-exec dh-lib dh-debug eu-strip)
matrix=""
for prog in bash busybox python3.11 cxx libz repair; do
  orig=${path[$prog]}
  want[$prog]=$(check "$prog" "$orig")
  [[ ${want[$prog]} =~ ^(124|126|127)\| ]] && bad "$prog: the original does not run: ${want[$prog]}"
  d=$work/$prog; mkdir -p "$d"
  how=--loadable added=2
  [ $prog = repair ] && how="--repair --loadable" added=1
  o=$("$bin" gen "$orig" --elf "$d/$prog.sf" $how 2>&1 >/dev/null) || { bad "$prog: gen $how: $o"; continue; }
  row=$(printf '%-11s' "$prog")
  if [ $prog = busybox ]; then
    # The order the warning names: the tool first, then gen.
    grep -q "warning: .*strip first" <<<"$o" && ok || bad "busybox-static: gen --loadable did not warn: '$o'"
    for tool in "${tools[@]}"; do
      if [ $tool = none ]; then cp "$orig" "$d/$tool"; else apply $tool "$orig" "$d/$tool" || bad "$prog: $tool failed"; fi
      o=$("$bin" gen "$d/$tool" --elf "$d/$tool.sf" --loadable 2>&1 >/dev/null) || { bad "$prog: $tool then gen: $o"; continue; }
      valid "busybox: $tool, then gen" $prog "$d/$tool.sf" "$d/$tool.sf" && row+=" $(printf '%-14s' "ok(tool,gen)")" ||
        row+=" $(printf '%-14s' FAIL)"
    done
  else
    [ -z "$o" ] && ok || bad "$prog: gen --loadable said '$o'"
    [[ $(chk layout "$orig" "$d/$prog.sf" $added) == *in-place ]] && ok || bad "$prog: the program headers did not grow in place"
    for tool in "${tools[@]}"; do
      if [ $tool = none ]; then cp "$d/$prog.sf" "$d/$tool"
      else
        # Quietly: BFD warned "section .sframe lma 0x... adjusted" on the
        # layout it rewrote.
        apply $tool "$d/$prog.sf" "$d/$tool" 2>"$d/$tool.err" || bad "$prog: $tool failed"
        [ ! -s "$d/$tool.err" ] && ok || bad "$prog: $tool warned: $(head -3 "$d/$tool.err")"
      fi
      valid "$prog: gen, then $tool" $prog "$d/$tool" "$d/$prog.sf" && row+=" $(printf '%-14s' ok)" ||
        row+=" $(printf '%-14s' FAIL)"
    done
  fi
  matrix+="$row"$'\n'
done
printf '%-11s' program; printf ' %-14s' "${tools[@]}"; echo
printf '%s' "$matrix"
echo "strip_matrix: $pass checks passed, $fail failed"
[ $fail = 0 ]
