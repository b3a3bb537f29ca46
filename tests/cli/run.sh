#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A command line people can trust (issue 13, items 3-8), on files compiled
# now with gcc: each PART checks exit codes, text and JSON (validated
# against docs/sframepp.schema.json).
#   raw          raw sections (gen -o, merge -o) as RAW[@ADDRESS] for dump,
#                stat, lookup and verify; without @ADDRESS: at 0, and said
#   merge        merge errors name the inputs; ELF@ADDRESS; merge --json
#   json-errors  --json prints a JSON document on stdout also on failure
#   usage        --version; unknown commands and bad usage: one line, exit 2
#   numbers      one number parser: 0x... or decimal; 010, -5, 148f2 refused
#   file-errors  directory, empty, non-ELF, truncated ELF, errno as text,
#                gen --elf on a file with .sframe, 32-bit x86
#   no-file      dump, stat and lookup PC... with no FILE read the tool itself
#   lookup-pid   lookup --pid PID ADDRESS... in a live process; FILE+OFFSET;
#                relocatable objects with several FDEs at 0
#   messages     messages a person stumbles on (issue 29, part 5): verify's
#                functions not in SFrame summarized (all with -v), "1
#                mismatch", stat on a raw section, --consumer all saying
#                what it checks, stack on a kernel thread, stat's v1 note
#   damaged      a byte of .sframe damaged by hand in the header, an FDE and
#                an FRE: every reading command says which rule, the FDE/FRE
#                index, the section and file offsets, exits 1, writes no
#                output and leaves the input as it was
# Usage: run.sh SFRAME_BIN SOURCE_DIR WORKDIR PART
set -uo pipefail
bin=$1 srcdir=$2 work=$3 part=$4
schema="$srcdir/docs/sframepp.schema.json"
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL [$part] $*"; }

# t WANT_STATUS REGEX ARGS...: runs the tool; the exit status must be
# WANT_STATUS and stdout+stderr must match the (grep -E) REGEX. Sets $out, $err.
t() {
  local want=$1 re=$2; shift 2
  "$bin" "$@" >out.txt 2>err.txt; local rc=$?
  out=$(cat out.txt) err=$(cat err.txt)
  [ "$rc" -eq "$want" ] && ok || bad "sframe $*: exit $rc, want $want: $(head -c 300 err.txt)"
  if [ -n "$re" ]; then
    grep -Eq -- "$re" out.txt err.txt && ok || bad "sframe $*: no match for /$re/ in: $(head -c 400 out.txt) $(head -c 300 err.txt)"
  fi
}
# j WANT_STATUS PYTHON_CONDITION ARGS...: runs the tool (ARGS hold --json);
# the exit status must be WANT_STATUS, stdout one JSON document valid
# against the schema, and the condition (on `doc`) true.
j() {
  local want=$1 cond=$2; shift 2
  "$bin" "$@" >out.json 2>err.txt; local rc=$?
  [ "$rc" -eq "$want" ] && ok || bad "sframe $*: exit $rc, want $want: $(head -c 300 err.txt)"
  python3 - "$schema" out.json "$cond" <<'PY' && ok || bad "sframe $*: JSON invalid or condition false: $cond: $(head -c 400 out.json)"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
try:
    doc = json.load(open(sys.argv[2]))
except ValueError as e:
    print("   not JSON:", e); sys.exit(1)
errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
for e in errors[:3]: print("  ", list(e.path), e.message[:200])
sys.exit(1 if errors or not eval(sys.argv[3]) else 0)
PY
}
# The first line on stderr only, and it starts with "sframe: ".
one_line() {
  [ "$(wc -l < err.txt)" -eq 1 ] && grep -q '^sframe: ' err.txt && ok || bad "$1: stderr is not one line: $(head -c 400 err.txt)"
}

cat > prog.c <<'C'
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int x) { return leaf(x) + printf("%d\n", x); }
int main(int argc, char** argv) { (void)argv; return mid(argc) & 1; }
C
cat > lib.c <<'C'
__attribute__((noinline)) int lib_leaf(int x) { return x * 5 + 2; }
int lib_api(int x) { return lib_leaf(x) + lib_leaf(x + 1); }
C
gcc -O2 prog.c -o prog || { echo "cannot compile"; exit 1; }             # no .sframe: gen makes it
gcc -O2 -Wa,--gsframe prog.c -o prog-sf || exit 1                         # its own .sframe
gcc -O2 -shared -fPIC -Wa,--gsframe lib.c -o liba.so || exit 1
cp liba.so libb.so
main=$(nm prog | awk '$3 == "main" { print "0x" $1 }')

case "$part" in
raw)
  t 0 "" gen -o prog.sframe prog
  t 0 "" gen --elf prog-copy prog          # the same section, at 0, in an ELF copy
  t 0 "prog.sframe: +raw SFrame section at 0x0 \(no @ADDRESS given: address 0 assumed\)" dump prog.sframe
  grep -q "Contents of the SFrame section" out.txt && ok || bad "dump raw: no section dumped"
  sed -n '/Contents of the SFrame/,$p' out.txt > raw-dump.txt
  "$bin" dump prog-copy | sed -n '/Contents of the SFrame/,$p' > elf-dump.txt
  cmp -s raw-dump.txt elf-dump.txt && ok || bad "dump of the raw section differs from the dump of the ELF copy's"
  t 0 "raw SFrame section at 0x1000$" dump prog.sframe@0x1000
  t 0 "prog.sframe: raw SFrame section at 0x0 \(no @ADDRESS given" stat prog.sframe
  t 0 "raw SFrame section at 0x4000$" stat prog.sframe@0x4000
  t 0 "no @ADDRESS given" lookup prog.sframe "$main"
  want=$("$bin" lookup prog-copy "$main" | grep -o 'function 0x[0-9a-f]*, size [0-9]*')
  [ -n "$want" ] && grep -q "$want" out.txt && ok || bad "lookup raw: not the ELF copy's function ($want): $out"
  t 0 "format ok; DWARF: not compared: a raw section" verify prog.sframe
  t 0 "format ok; DWARF: [0-9]+ functions" verify prog --raw prog.sframe
  j 0 'doc["files"][0]["raw"] == {"address": "0x0", "address_given": False} and "section" in doc["files"][0]' dump --json prog.sframe
  j 0 'doc["files"][0]["raw"]["address"] == "0x2000" and doc["files"][0]["raw"]["address_given"]' dump --json prog.sframe@0x2000
  j 0 'doc["files"][0]["raw"]["address_given"] is False and doc["files"][0]["stats"]["num_fdes"] > 0' stat --json prog.sframe
  j 0 'doc["raw"]["address_given"] is False and doc["results"][0]["found"]' lookup --json prog.sframe "$main"
  j 0 'doc["files"][0]["ok"] and doc["files"][0]["dwarf"]["compared"] is False' verify --json prog.sframe
  ;;
merge)
  t 0 "" gen -o prog.sframe prog
  t 1 "liba.so FDE [0-9]+ overlaps libb.so FDE [0-9]+ at 0x[0-9a-f]+" merge liba.so libb.so -o m.sframe
  one_line "merge overlap"
  t 1 "(prog.sframe@0x0|liba.so) FDE [0-9]+ overlaps (liba.so|prog.sframe@0x0) FDE [0-9]+ at 0x" merge prog.sframe@0x0 liba.so -o m.sframe
  [ ! -e m.sframe ] && ok || bad "a failed merge wrote its output"
  t 0 "m.sframe: SFrame v3 section for address 0x0" merge liba.so libb.so@0x100000 -o m.sframe
  nfdes=$("$bin" stat --json liba.so | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"][0]["stats"]["num_fdes"])')
  j 0 "doc['files'][0]['section']['header']['num_fdes'] == 2 * $nfdes" dump --json m.sframe
  j 0 "doc['command'] == 'merge' and doc['functions'] == 2 * $nfdes and doc['inputs'][1]['address'] == '0x100000' and doc['bytes'] > 0" \
    merge --json liba.so libb.so@0x100000 -o m2.sframe
  cmp -s m.sframe m2.sframe && ok || bad "merge --json wrote another section than merge"
  t 0 "format ok" verify m.sframe
  j 1 "'liba.so FDE' in doc['error'] and 'overlaps libb.so FDE' in doc['error'] and doc['output'] == 'm3.sframe'" \
    merge --json liba.so libb.so -o m3.sframe
  t 0 "for address 0x200000" merge --address 0x200000 m.sframe@0x0 prog.sframe@0x300000 -o m4.sframe
  ;;
json-errors)
  j 1 "doc['command'] == 'lookup' and 'No such file or directory' in doc['error']" lookup --json nonexistent 0x10
  j 1 "doc['command'] == 'lookup' and 'no section .sframe' in doc['error']" lookup --json prog 0x10
  j 1 "doc['command'] == 'gen' and doc['file'] == 'nonexistent' and 'No such file' in doc['error']" gen --json nonexistent
  j 1 "doc['command'] == 'gen' and 'relocatable object' in doc['error']" gen --json "$(gcc -O2 -c lib.c -o lib.o && echo lib.o)"
  j 1 "doc['command'] == 'merge' and 'No such file' in doc['error']" merge --json nonexistent.so -o m.sframe
  true & dead=$!; wait $dead
  j 1 "doc['command'] == 'stack' and doc['pid'] == $dead and len(doc['error']) > 0" stack --json "$dead"
  j 2 "doc['command'] == 'stack' and 'not a process ID' in doc['error']" stack --json 0
  j 1 "doc['files'][0]['error'] == 'is a directory'" dump --json .
  ;;
usage)
  t 0 "^sframe \(sframepp\) [0-9]+\.[0-9]+" --version
  t 2 "sframe: nosuch: unknown command" nosuch
  one_line "unknown command"
  t 2 "^sframe: " ; one_line "no command"
  t 2 "sframe: lookup: .*required" lookup prog-sf
  one_line "lookup without PCs"
  t 2 "sframe: dump: .*--frobnicate" dump --frobnicate
  one_line "unknown option"
  t 2 "sframe: gen: .*format-version" gen --format-version 7 prog
  one_line "bad --format-version"
  t 2 "sframe: stack: 0: not a process ID" stack 0
  one_line "stack 0"
  grep -q 1797693 err.txt && bad "stack 0 prints a double's range" || ok
  t 2 "sframe: stack: abc: not a process ID" stack abc
  one_line "stack abc"
  j 2 "doc['command'] == 'lookup' and 'required' in doc['error']" lookup --json prog-sf
  ;;
numbers)
  # A refused number is bad usage (exit 2, README and docs/tool.md), the
  # PCs before it looked up or not.
  j 2 "doc['command'] == 'lookup' and '010: a leading 0 is refused (octal or decimal?); write 0x10 or 10' in doc['error']" lookup --json prog-sf 010
  t 2 "^sframe: lookup: -5: signed numbers are refused" lookup prog-sf -5
  one_line "lookup -5"
  grep -q fffffffffffffffb out.txt && bad "-5 read as 2^64-5" || ok
  t 2 "^sframe: lookup: 148f2: hex digits without 0x; write 0x148f2 " lookup prog-sf 148f2
  one_line "lookup 148f2"
  [ -s out.txt ] && bad "lookup 148f2 printed on stdout: $(head -c 200 out.txt)" || ok
  t 2 "^sframe: lookup: 148f2: hex digits without 0x" lookup prog-sf "$main" 148f2
  t 2 "^sframe: lookup: 148f2: hex digits without 0x" lookup --pid $$ 148f2
  t 0 "<main\+0x0>: function" lookup prog-sf "$main"
  t 0 "<main\+0x0>: function" lookup prog-sf "$((main))"        # decimal
  t 2 "sframe: gen: --address 010: a leading 0" gen --address 010 -o x.sframe prog
  [ ! -e x.sframe ] && ok || bad "gen --address 010 wrote its output"
  t 2 "sframe: gen: --address -5: signed" gen --address -5 -o x.sframe prog
  t 2 "sframe: merge: --address 148f2: hex digits without 0x; write 0x148f2" merge --address 148f2 -o x.sframe liba.so
  t 0 "" gen -o prog.sframe prog
  t 2 "prog.sframe@010: address after @: 010: a leading 0" dump prog.sframe@010
  t 2 "prog.sframe@-5: address after @: -5: signed" lookup prog.sframe@-5 0x10
  t 2 "address after @: abc: hex digits without 0x; write 0xabc" verify prog --raw prog.sframe@abc
  ;;
file-errors)
  mkdir adir; : > empty; echo "hello" > text
  head -c 40 prog > trunc-header; head -c 2000 prog > trunc-body
  t 1 "^sframe: adir: is a directory$" dump adir
  t 1 "^sframe: empty: file format not recognized$" stat empty
  t 1 "^sframe: text: file format not recognized$" lookup text 0x10
  t 1 "^sframe: trunc-header: file truncated$" verify trunc-header
  t 1 "^sframe: trunc-body: file truncated$" dump trunc-body
  t 1 "^sframe: nonexistent: No such file or directory$" stat nonexistent
  grep -q "value 0x" err.txt && bad "errno given as a value" || ok
  t 1 "^sframe: adir: is a directory$" gen adir
  t 1 "^sframe: empty: file format not recognized$" gen -o x.sframe empty
  t 1 "^sframe: prog-sf: already has a .sframe section" gen --elf copy prog-sf
  [ ! -e copy ] && ok || bad "gen --elf wrote a copy of a file with .sframe"
  cp prog-sf inplace; t 1 "already has a .sframe section" gen --in-place inplace
  cmp -s prog-sf inplace && ok || bad "gen --in-place changed a file with .sframe"
  # 32-bit x86: gcc -m32 where it can compile, else a copy of a 64-bit
  # object with its ELF class and machine patched (ELFCLASS32, EM_386).
  if ! gcc -m32 -O2 -c lib.c -o i386.o 2>/dev/null; then
    echo "note: no gcc -m32: an ELF32 i386 header crafted with python"
    python3 - <<'PY'
import struct
# A minimal ELF32 i386 relocatable: the header and an empty section table.
eh = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
eh += struct.pack("<HHIIIIIHHHHHH", 1, 3, 1, 0, 0, 52, 0, 52, 0, 0, 40, 2, 1)
shdr0 = bytes(40)
shstr = b"\x00.shstrtab\x00"
sh1 = struct.pack("<IIIIIIIIII", 1, 3, 0, 0, 52 + 80, len(shstr), 0, 0, 1, 0)
open("i386.o", "wb").write(eh + shdr0 + sh1 + shstr)
PY
  fi
  t 1 "^sframe: i386.o: .*32-bit x86 has no SFrame ABI$" dump i386.o
  t 1 "^sframe: i386.o: 32-bit x86 has no SFrame ABI$" gen -o x.sframe i386.o
  j 1 "doc['files'][0]['error'] == 'is a directory'" stat --json adir
  j 1 "doc['files'][0]['error'] == 'file truncated'" dump --json trunc-body
  j 1 "'32-bit x86 has no SFrame ABI' in doc['error']" gen --json i386.o
  ;;
no-file)
  t 0 "" dump
  grep -q "Contents of the SFrame section" out.txt && ok || bad "dump with no FILE: no section dumped"
  t 0 "^/.*: section \.sframe at 0x[0-9a-f]+" stat
  t 0 "FDEs: [1-9]" stat
  j 0 "doc['files'][0]['stats']['num_fdes'] > 0" stat --json
  self=$(readlink -f "$bin")
  smain=$(printf '0x%x' "0x$(nm "$self" | awk '$3 == "main" && ($2 == "T" || $2 == "t") { print $1; exit }')")
  t 0 "^$smain <main\+0x0>: function $smain, size [0-9]+ \(FDE [0-9]+\)" lookup "$smain"
  j 0 "doc['file'] == '$self' and doc['results'][0]['found'] and doc['results'][0]['symbol'] == 'main'" lookup --json "$smain"
  t 1 "^0x1: no FDE covers the PC" lookup 0x1
  t 2 "sframe: lookup: .*required" lookup
  one_line "lookup without arguments"
  ;;
lookup-pid)
  cat > parked.c <<'C'
#include <unistd.h>
__attribute__((noinline)) int parked_leaf(int x) { return x * 7 + 3; }
__attribute__((noinline)) int parked_mid(int x) { return parked_leaf(x) + 1; }
int main(void) { for (;;) pause(); return parked_mid(1); }
C
  gcc -O2 -fPIE -pie -Wa,--gsframe parked.c -o parked || exit 1
  ./parked & ppid=$!
  trap 'kill $ppid 2>/dev/null' EXIT
  sleep 0.3
  # Independent truth: nm's offset of parked_mid + the mapping's start
  # (the first mapping of the file is at file offset 0, link-time 0).
  path=$(readlink -f parked)
  base=$(awk -v p="$path" '$6 == p && $3 == "00000000" { split($1, a, "-"); print a[1]; exit }' /proc/$ppid/maps)
  off=$(printf '%x' "0x$(nm parked | awk '$3 == "parked_mid" { print $1 }')")
  addr=$(printf '0x%x' $((0x$base + 0x$off + 2)))
  t 0 "^$addr in $path at $(printf '0x%x' $((0x$off + 2))) <parked_mid\\+0x2>: function 0x$off, size" lookup --pid "$ppid" "$addr"
  j 0 "(r := doc['results'][0]) and doc['pid'] == $ppid and r['found'] and r['symbol'] == 'parked_mid' and r['module'] == '$path' and r['address'] == '$addr' and int(r['pc'], 16) == 0x$off + 2" \
    lookup --json --pid "$ppid" "$addr"
  t 1 "^0x10: in no executable mapping of process $ppid" lookup --pid "$ppid" 0x10
  j 1 "doc['results'][0]['found'] is False and 'no executable mapping' in doc['results'][0]['reason']" lookup --json --pid "$ppid" 0x10
  true & dead=$!; wait $dead
  t 1 "^sframe: process $dead: no such process$" lookup --pid "$dead" 0x10
  one_line "lookup --pid of a dead process"
  j 1 "doc['pid'] == $dead and len(doc['error']) > 0" lookup --json --pid "$dead" 0x10
  t 2 "sframe: lookup: --pid abc: not a process ID" lookup --pid abc 0x10
  # A module damaged on disk once mapped (its last FDE's FRE type made 15;
  # spec §2.2.1: 0-2 defined): the results streamed around its own, which
  # says why, make one document (python's parser).
  cp liba.so libd.so
  gcc -O2 -fPIE -pie -Wa,--gsframe parked.c -o parked-d -Wl,--no-as-needed -L. -l:libd.so -Wl,-rpath,"$PWD" || exit 1
  ./parked-d & dpid=$!
  trap 'kill $ppid $dpid 2>/dev/null' EXIT
  sleep 0.3
  dpath=$(readlink -f parked-d) lpath=$(readlink -f libd.so)
  dbase=$(awk -v p="$dpath" '$6 == p && $3 == "00000000" { split($1, a, "-"); print a[1]; exit }' /proc/$dpid/maps)
  lbase=$(awk -v p="$lpath" '$6 == p && $3 == "00000000" { split($1, a, "-"); print a[1]; exit }' /proc/$dpid/maps)
  in_main=$(printf '0x%x' $((0x$dbase + 0x$(nm parked-d | awk '$3 == "parked_mid" { print $1 }') + 2)))
  in_lib=$(printf '0x%x' $((0x$lbase + 0x$(nm libd.so | awk '$3 == "lib_leaf" { print $1 }') + 2)))
  sec=$(readelf -SW libd.so | sed -n 's/^ *\[ *[0-9]*\] *\.sframe  *[A-Z_0-9+a-fx]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p')
  last=$(python3 - libd.so "$sec" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read()); sec = int(sys.argv[2], 16)
magic, version, flags, abi, fp, ra, aux, nfdes, nfres, frelen, fdeoff, freoff = struct.unpack_from("<HBBBbbBIIIII", b, sec)
assert magic == 0xdee2 and version in (1, 2), (hex(magic), version)
size = 17 if version == 1 else 20  # §2.2: v2 adds sfde_func_rep_size and padding
info = sec + 28 + aux + fdeoff + size * (nfdes - 1) + 16
with open(sys.argv[1], "r+b") as f:  # in place: the mapped file itself
    f.seek(info); f.write(bytes([b[info] | 0x0f]))
print(nfdes - 1)
PY
)
  j 1 "(r := doc['results']) and list(doc)[-1] == 'results' and len(r) == 3 and r[0]['found'] and r[2]['found'] and r[1]['found'] is False and list(r[1])[-1] == 'reason' and 'FDE $last (value 0xf)' in r[1]['reason'] and r[1]['module'] == '$lpath'" \
    lookup --json --pid "$dpid" "$in_main" "$in_lib" "$in_main"
  python3 -m json.tool out.json > /dev/null && ok || bad "lookup --pid with a damaged module: not one JSON document"
  kill $dpid
  kill $ppid
  # FILE+OFFSET: the address relative to the load base (0 for a PIE).
  t 0 "" lookup parked "0x$off"
  want=$(grep -o 'function .*' out.txt)
  t 0 "^parked\\+0x$off = 0x$off <parked_mid\\+0x0>: function 0x$off" lookup "parked+0x$off"
  grep -qF "$want" out.txt && ok || bad "parked+0x$off: not what lookup parked 0x$off says ($want)"
  j 0 "doc['results'][0]['as_given'] == 'parked+0x$off' and doc['results'][0]['symbol'] == 'parked_mid'" lookup --json "parked+0x$off"
  # A relocatable object: two functions in their own sections, both at 0.
  gcc -O2 -ffunction-sections -Wa,--gsframe -c lib.c -o lib.o || exit 1
  t 0 "^0x0 in \.text\.lib_(leaf|api): function 0x0, size [0-9]+ \(FDE [01] of 2 covering 0x0; also FDE [01] in \.text\.lib_(leaf|api)\)" lookup lib.o 0x0
  j 0 "(r := doc['results'][0]) and r['covering_fdes'] == 2 and r['section'].startswith('.text.lib_') and len(r['also']) == 1 and r['also'][0]['section'] != r['section']" lookup --json lib.o 0x0
  ;;
messages)
  # 1. verify on a program of which one object was assembled without
  # --gsframe: its functions are not in SFrame, with demangled names of
  # hundreds of characters. The truth: nm's names of that object's
  # functions, readelf's count of its FDEs.
  cat > nosf.cpp <<'CXX'
#include <map>
#include <string>
#include <utility>
#include <vector>
using Big = std::map<std::string, std::vector<std::pair<std::string, std::map<int, std::string>>>>;
#define F(n) __attribute__((noinline)) unsigned long nosf_##n(Big& m, const Big& o) { return m.size() + o.size() + n; }
F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12)
CXX
  cat > withsf.cpp <<'CXX'
#include <map>
#include <string>
#include <utility>
#include <vector>
using Big = std::map<std::string, std::vector<std::pair<std::string, std::map<int, std::string>>>>;
unsigned long nosf_1(Big&, const Big&);
int main() { Big m; return static_cast<int>(nosf_1(m, m)); }
CXX
  g++ -O2 -c nosf.cpp -o nosf.o && g++ -O2 -Wa,--gsframe -c withsf.cpp -o withsf.o && g++ withsf.o nosf.o -o mixed || exit 1
  nfde=$(readelf --debug-dump=frames nosf.o | grep -c ' FDE ')
  [ "$nfde" -ge 12 ] && ok || bad "readelf counts $nfde FDEs in nosf.o, want >= 12"
  t 0 "^mixed: format ok; DWARF: " verify mixed
  n=$(sed -n 's/^  not in SFrame: \([0-9]*\) functions that the DWARF CFI covers (the first 5 below; -v lists all)$/\1/p' out.txt)
  [ -n "$n" ] && [ "$n" -ge "$nfde" ] && ok || bad "verify mixed: no count of at least $nfde functions not in SFrame: $(head -c 600 out.txt)"
  [ "$(grep -c '^    0x[0-9a-f]*-0x[0-9a-f]* <' out.txt)" -eq 5 ] && ok || bad "verify mixed: not 5 functions listed: $out"
  [ "$(awk 'length > 130' out.txt | grep -vc '^  consumers: ')" -eq 0 ] && ok || bad "verify mixed: lines over 130 characters: $(awk 'length > 130' out.txt | head -3)"
  t 0 "" verify -v mixed
  [ "$(grep -c '^  not in SFrame: 0x' out.txt)" = "$n" ] && ok || bad "verify -v mixed: not $n lines: $(grep -c '^  not in SFrame: 0x' out.txt)"
  for f in $(nm -C nosf.o | sed -n 's/^[0-9a-f]* T \(nosf_[0-9]*\)(.*/\1/p'); do
    grep -q "<$f(std::map<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::vector<" out.txt && ok ||
      bad "verify -v mixed: $f not listed with its full name"
  done
  j 0 "len(doc['files'][0]['dwarf']['missing']) == $n" verify --json mixed
  # 2. "1 mismatch": one FRE's CFA offset (8, the CFA at a function's entry)
  # raised by hand to 16 in a function of one FRE.
  gcc -O2 -Wa,--gsframe prog.c -o prog-sf1 || exit 1
  python3 - <<'PY'
import struct, subprocess
d = bytearray(open("prog-sf1", "rb").read())
out = subprocess.run(["readelf", "-SW", "prog-sf1"], capture_output=True, text=True).stdout
f = [l for l in out.splitlines() if " .sframe " in l][0].split()
sec = int(f[f.index(".sframe") + 3], 16)
h = d[sec:sec + 28]
assert h[:2] == b"\xe2\xde" and h[2] in (1, 2), "a little-endian v1/v2 section"
stride = 17 if h[2] == 1 else 20          # spec v1 §2.2: 17-byte FDEs; v2: 20
aux, num_fdes = h[7], struct.unpack_from("<I", h, 8)[0]
fdeoff, freoff = struct.unpack_from("<II", h, 20)
for k in range(num_fdes):
    fde = sec + 28 + aux + fdeoff + stride * k
    fre_off, nfres = struct.unpack_from("<II", d, fde + 8)
    info = d[fde + 16]
    if nfres == 1 and not info & 0x10:    # one FRE, PC type inc
        fre = sec + 28 + aux + freoff + fre_off
        word = fre + {0: 1, 1: 2, 2: 4}[info & 0x0f] + 1
        assert d[word] == 8, d[word]
        d[word] = 16
        break
else:
    raise SystemExit("no FDE of one FRE")
open("one-mismatch", "wb").write(d)
PY
  t 1 "^one-mismatch: FAILED: format valid; DWARF: [0-9]+ functions, [0-9]+ PCs, 1 mismatch$" verify one-mismatch
  t 0 "PCs, 0 mismatches$" verify prog-sf1
  # 3. stat on a raw section: no .eh_frame or .text lines (a raw section
  # has neither); on the ELF file, both.
  t 0 "" gen -o prog.sframe prog
  t 0 "^  bytes: \.sframe [0-9]+$" stat prog.sframe
  grep -q 'eh_frame\|\.text coverage\|header accounts' out.txt && bad "stat of a raw section: $(grep 'eh_frame\|text cov\|header acc' out.txt)" || ok
  size=$(stat -c %s prog.sframe)
  grep -q "^  bytes: \.sframe $size$" out.txt && ok || bad "stat prog.sframe: not its $size bytes: $out"
  t 0 "^  bytes: \.sframe [0-9]+; \.eh_frame [0-9]+ \+ \.eh_frame_hdr [0-9]+ = [0-9]+ " stat prog-sf
  grep -q "^  \.text coverage: [0-9]* of $((0x$(readelf -SW prog-sf | awk '$2 == ".text" { print $6 }'))) bytes" out.txt && ok ||
    bad "stat prog-sf: .text coverage not of readelf's .text size: $out"
  # 4. --consumer all: the consumers that read the section's version; the
  # others said to be left out, in the output and in --help.
  t 0 "" gen --elf prog-v3 prog
  t 0 "^  glibc: not checked: it reads SFrame v2 only \(--consumer all: the consumers that read v3\)$" verify --consumer all prog-v3
  grep -q '^  kernel: accepts the section (SFrame v3)$' out.txt && ok || bad "verify --consumer all prog-v3: $out"
  t 1 "^  glibc: .*glibc.version" verify --consumer glibc prog-v3
  t 0 "" convert --format-version 2 prog-v3 -o prog-v2
  t 0 "^  kernel: not checked: it reads SFrame v3 only \(--consumer all: the consumers that read v2\)$" verify --consumer all prog-v2
  t 1 "kernel rejects the section" verify --consumer kernel prog-v2
  t 1 "no consumer reads SFrame v1" verify --consumer all prog-sf
  t 0 "all: every consumer that reads the section's version" verify --help
  # 5. stack on a kernel thread (PF_KTHREAD in /proc/PID/stat's flags,
  # proc(5)): said so, exit 1, instead of ptrace's "Operation not permitted".
  kt=
  for p in /proc/[0-9]*; do
    fl=$(sed 's/.*) //' "$p/stat" 2>/dev/null | awk '{ print $7 }')
    [ -n "$fl" ] && (( fl & 0x200000 )) && { kt=${p#/proc/}; break; }
  done
  if [ -n "$kt" ]; then
    t 1 "^sframe: stack: process $kt \(.*\) is a kernel thread: it has no user-space stack to unwind$" stack "$kt"
    one_line "stack of a kernel thread"
    j 1 "'is a kernel thread' in doc['error']" stack --json "$kt"
  else
    echo "note: no kernel thread visible in /proc (a PID namespace): the kernel-thread check not run"
  fi
  # 6. stat of a v1 section says why v1 (the README's first command runs
  # stat on the tool itself): the version byte read with python.
  v=$(python3 -c "
import subprocess, sys
out = subprocess.run(['readelf', '-SW', 'prog-sf'], capture_output=True, text=True).stdout
f = [l for l in out.splitlines() if ' .sframe ' in l][0].split()
print(open('prog-sf', 'rb').read()[int(f[f.index('.sframe') + 3], 16) + 2])")
  if [ "$v" = 1 ]; then
    t 0 "^  version 1 \(as GNU as 2.40 writes it; sframe gen and convert write v3\), " stat prog-sf
  else
    t 0 "^  version $v, " stat prog-sf
  fi
  t 0 "^  version 3, " stat prog-v3
  ;;
damaged)
  # Where each damaged byte lies: the section's file offset from readelf,
  # the fields from the SFrame spec (v1/v2 share them: §2.1 a 28-byte
  # header + sfh_auxhdr_len; §2.2 FDEs from sfh_fdeoff, sfde_func_info 16
  # bytes in; §2.3 FREs from sfh_freoff + sfde_func_start_fre_off, the
  # fre_info byte after a start address of 1, 2 or 4 bytes by FRE type).
  readelf -SW prog-sf | sed -n 's/^ *\[ *[0-9]*\] *\.sframe  *[A-Z_0-9+a-fx]*  *[0-9a-f]*  *\([0-9a-f]*\)  *\([0-9a-f]*\) .*/\1 \2/p' > sec.txt
  [ -s sec.txt ] && ok || bad "readelf shows no .sframe in prog-sf"
  read -r hdr fde fre size < <(python3 - $(cat sec.txt) <<'PY'
import struct, sys
sec, size = int(sys.argv[1], 16), int(sys.argv[2], 16)
d = open("prog-sf", "rb").read()
h = d[sec:sec + 28]
assert h[:2] == b"\xe2\xde", "not a little-endian SFrame section"
ver, aux = h[2], h[7]
assert ver in (1, 2), f"SFrame v{ver}: this test knows the v1/v2 layouts"
fdeoff, freoff = struct.unpack_from("<II", h, 20)
fde0 = sec + 28 + aux + fdeoff
fre_start_off = struct.unpack_from("<I", d, fde0 + 8)[0]
fre_type = d[fde0 + 16] & 0x0f
fre0 = sec + 28 + aux + freoff + fre_start_off
print(sec, fde0 + 16, fre0 + {0: 1, 1: 2, 2: 4}[fre_type], size)
PY
)
  [ -n "$fre" ] && ok || { bad "cannot locate the bytes to damage"; exit 1; }
  damage() {  # FILE OFFSET BYTE: a copy of prog-sf with one byte replaced
    cp prog-sf "$1"; printf "\\x$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
    sha256sum "$1" > "$1.sum"
  }
  damage bad-magic "$hdr" 00      # magic 0xdee2 no longer
  damage bad-fde "$fde" 0f        # FRE type 15 (§2.2.1: 0-2 defined)
  damage bad-fre "$fre" ff        # data-word size code 3 (§2.3.1: 0-2 defined)
  hx() { printf '0x%x' "$1"; }
  want_magic="section \.sframe: bad magic number .*\[kBadMagic\] at byte 0x0 .*, file offset $(hx "$hdr")$"
  want_fde="section \.sframe: FRE type code does not exist \[kBadFreType\] at byte $(hx $((fde - hdr))), FDE 0 \(value 0xf\), file offset $(hx "$fde")$"
  want_fre="section \.sframe: FRE data-word size code does not exist \[kBadDatawordSize\] at byte $(hx $((fre - hdr))), FDE 0, FRE 0 \(value 0x3\), file offset $(hx "$fre")$"
  for f in bad-magic bad-fde bad-fre; do
    case $f in bad-magic) want=$want_magic ;; bad-fde) want=$want_fde ;; bad-fre) want=$want_fre ;; esac
    t 1 "^sframe: $f: $want" verify "$f"; one_line "verify $f"
    t 1 "^sframe: $f: $want" stat "$f"; one_line "stat $f"
    t 1 "^sframe: $f: $want" lookup "$f" "$main"; one_line "lookup $f"
    t 1 "^sframe: $f: $want" dump "$f"
    t 1 "^sframe: $f: $want" merge "$f" -o m.sframe; one_line "merge $f"
    [ ! -e m.sframe ] && ok || bad "merge $f wrote its output"
    t 1 "^sframe: $f: $want" convert "$f" -o c.elf; one_line "convert $f"
    [ ! -e c.elf ] && ok || bad "convert $f wrote its output"
    cp "$f" "$f.inplace"; t 1 "^sframe: $f.inplace: section" convert --in-place "$f.inplace"
    cmp -s "$f" "$f.inplace" && ok || bad "convert --in-place $f changed the file"
    sha256sum -c --quiet "$f.sum" && ok || bad "$f changed"
  done
  j 1 "doc['files'][0]['error'].endswith(', file offset $(hx "$fre")')" dump --json bad-fre
  # A raw section's offsets are file offsets already: no second one.
  dd if=bad-fre of=bad-fre.raw bs=1 skip="$hdr" count="$size" status=none
  t 1 "^sframe: bad-fre.raw: raw section: .* at byte $(hx $((fre - hdr))), FDE 0, FRE 0 \(value 0x3\)$" verify bad-fre.raw
  # FDEs sharing FRE data (spec §2.4 does not forbid it): 20,000 FDEs on
  # one block of 100,000 FREs (700 KB) declare 2 x 10^9 FREs; stat counts
  # them without decoding the block 20,000 times (it took minutes). Then
  # each FDE i on the run from FRE i: overlapping runs, refused by name.
  python3 - <<'PY'
import struct
N, M = 20000, 100000
# FRE (§2.4, SFRAME_FRE_TYPE_ADDR1): start address, info 0x03 (CFA on SP,
# one 1-byte data word), the data word.
fre = b"".join(bytes([k % 256, 0x03, 0x10]) for k in range(M))
def section(name, fre_off, num_fres):
    hdr = struct.pack("<HBBBbbBIIIII", 0xdee2, 2, 1, 3, 0, -8, 0, N, M, len(fre), 0, N * 20)
    fdes = b"".join(struct.pack("<iIIIBBH", 0x1000 * (i + 1), 0x100, fre_off(i), num_fres(i), 0, 0, 0)
                    for i in range(N))
    open(name, "wb").write(hdr + fdes + fre)
section("shared-block.raw", lambda i: 0, lambda i: M)
section("shared-runs.raw", lambda i: 3 * i, lambda i: M - i)
PY
  SECONDS=0
  j 0 "(st := doc['files'][0]['stats']) and st['num_fres'] == 20000 * 100000 and st['dataword_counts'] == {'1': 2 * 10**9} and st['dataword_sizes']['1'] == 2 * 10**9" stat --json shared-block.raw
  t 1 "^sframe: shared-runs.raw: raw section: FDE's FREs overlap another FDE's FREs \[kFdeFresOverlap\] at byte 0x[0-9a-f]+, FDE [0-9]+$" stat shared-runs.raw
  one_line "stat shared-runs.raw"
  [ "$SECONDS" -lt 30 ] && ok || bad "stat of FDEs sharing FREs took $SECONDS s"
  # merge expands every FDE's rows (2 x 10^9 here: it died of bad_alloc).
  t 1 "^sframe: shared-block.raw: raw section: FDEs sharing FRE blocks declare more than [0-9]+ rows by FDE [0-9]+ \(700028 bytes\)" merge shared-block.raw -o m.sframe
  one_line "merge shared-block.raw"
  [ ! -e m.sframe ] && ok || bad "merge of FDEs sharing FREs wrote its output"
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "cli $part: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
