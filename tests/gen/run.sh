#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gen and verify on programs compiled now and on a fixed sample of the
# machine's binaries.
#  1. The corpus sources, built with the machine's gcc -Wa,--gsframe (gas 2.40:
#     SFrame v1): gas's SFrame must agree with gas's DWARF CFI (verify exits
#     0), and gen's v3 and v2 sections must too (verify --raw).
#  3. (below) static non-PIE and .debug_frame-only programs, against
#     readelf's FDE list and libdw's rows.
#  2. A sample of system ELF files (no SFrame of their own): gen must finish
#     and its section must agree with the DWARF it came from. libcrypto's
#     hand-written assembly brings FLEX FDEs (CFA in other registers) and
#     functions left out (CFA by DWARF expression), which the other files
#     lack; the full sweep (scripts/gen-sweep) found nothing else they miss.
# Usage: run.sh SFRAME_BIN SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 shared=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

src="$shared/corpus/src"
for opt in -O2 -O0; do
  for f in basic longfn realign signals; do
    exe="$work/$f$opt"
    gcc $opt -Wa,--gsframe -o "$exe" "$src/$f.c" 2>/dev/null || { bad "compile $f $opt"; continue; }
  done
  g++ $opt -Wa,--gsframe -o "$work/cxx$opt" "$src/cxx.cpp" 2>/dev/null || bad "compile cxx $opt"
  gcc $opt -Wa,--gsframe -fPIC -shared -o "$work/libdemo$opt.so" "$src/lib.c" 2>/dev/null || bad "compile lib $opt"
done
for exe in "$work"/*; do
  [ -x "$exe" ] || continue
  out=$("$bin" verify "$exe" 2>&1) && ok || bad "verify $exe: $(echo "$out" | grep -m3 -E 'mismatch|error|sframe:')"
  for v in 3 2; do
    "$bin" gen --format-version $v "$exe" -o "$exe.v$v.sf" >/dev/null 2>&1 || { bad "gen v$v $exe"; continue; }
    out=$("$bin" verify "$exe" --raw "$exe.v$v.sf" 2>&1) && ok || bad "verify gen v$v $exe: $(echo "$out" | grep -m3 -E 'mismatch|error|sframe:')"
  done
done

for f in /usr/bin/ls /usr/bin/bash /usr/bin/objdump /usr/bin/gdb /usr/bin/cmake \
         /usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
         /usr/lib/x86_64-linux-gnu/libdw.so.1 /usr/lib/x86_64-linux-gnu/libm.so.6 \
         /usr/lib/x86_64-linux-gnu/libcrypto.so.3; do
  [ -e "$f" ] || continue
  base=$(basename "$f")
  if ! "$bin" gen --format-version 3 "$f" -o "$work/$base.sf" > "$work/$base.gen.txt" 2>&1; then
    bad "gen $f: $(head -c 300 "$work/$base.gen.txt")"; continue
  fi
  out=$("$bin" verify "$f" --raw "$work/$base.sf" 2>&1)
  if [ $? -eq 0 ]; then ok; else bad "verify gen $f: $(echo "$out" | grep -m3 -E 'mismatch|sframe:')"; fi
  sed -n 2p "$work/$base.gen.txt"
done
# gen --elf: a copy of a program built without SFrame, with .sframe added.
# It must still run as the original does (same output, same status), keep
# its program headers and every byte past the ELF header, and its section
# must agree with the DWARF CFI (verify reads it through the section header).
for opt in -O2 -O0; do
  for f in basic signals; do
    exe="$work/nosf-$f$opt"
    gcc $opt -o "$exe" "$src/$f.c" 2>/dev/null || { bad "compile $exe"; continue; }
    for v in 3 2; do
      copy="$exe.v$v.elf"
      "$bin" gen --format-version $v "$exe" --elf "$copy" >/dev/null 2>&1 || { bad "gen --elf $exe v$v"; continue; }
      want=$("$exe" 2>&1; echo "status $?") got=$("$copy" 2>&1; echo "status $?")
      [ "$want" = "$got" ] && ok || bad "gen --elf v$v: $copy runs differently: $got vs $want"
      cmp -s <(readelf -lW "$exe" | tail -n +2) <(readelf -lW "$copy" | tail -n +2) && ok || bad "gen --elf v$v: program headers changed"
      cmp -s -i 64 <(head -c "$(stat -c %s "$exe")" "$copy") "$exe" && ok || bad "gen --elf v$v: bytes past the ELF header changed"
      out=$("$bin" verify "$copy" 2>&1) && ok || bad "verify gen --elf v$v $copy: $(echo "$out" | head -3)"
    done
  done
done
"$bin" gen "$work/basic-O2" --elf "$work/twice" >/dev/null 2>&1 && bad "gen --elf on a file with .sframe must refuse" || ok

# 3. Static non-PIE executables (no .eh_frame_hdr) and programs whose own
# code has only .debug_frame (-fno-asynchronous-unwind-tables -g; the C
# runtime still brings .eh_frame): gen reads every FDE readelf lists (start
# PCs with a range, in either section, less those in PLT sections, which get
# ld's PC-mask FDEs), its rows agree with libdw's (--compare-libdw: 0 rows
# differ), and verify (through libdw) accepts its v3 and v2 sections.
readelf_fdes() {  # FILE: distinct FDE start PCs with a range, outside .plt*
  { readelf -SW "$1"; echo "--frames--"; readelf --debug-dump=frames "$1"; } 2>/dev/null | python3 -c '
import re, sys
plts, starts, frames = [], set(), False
for line in sys.stdin:
    if line.startswith("--frames--"): frames = True; continue
    if not frames:
        m = re.match(r"\s*\[\s*\d+\]\s+(\.plt\S*)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m: plts.append((int(m.group(2), 16), int(m.group(2), 16) + int(m.group(3), 16)))
        continue
    m = re.search(r" FDE .*pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
    if m:
        s, e = int(m.group(1), 16), int(m.group(2), 16)
        if e > s and not any(lo <= s < hi for lo, hi in plts): starts.add(s)
print(len(starts))'
}
for kind in static debug-frame static-debug-frame; do
  exe="$work/$kind"
  case $kind in
    static) flags="-O2 -static -no-pie" ;;
    debug-frame) flags="-O2 -fno-asynchronous-unwind-tables -g" ;;
    static-debug-frame) flags="-O0 -fno-asynchronous-unwind-tables -g -static -no-pie" ;;
  esac
  gcc $flags -o "$exe" "$src/basic.c" 2>/dev/null || { bad "compile $kind"; continue; }
  case $kind in
    static*) grep -q '\.eh_frame_hdr' <(readelf -SW "$exe") && bad "$kind: has .eh_frame_hdr" || ok ;;
  esac
  case $kind in
    *debug-frame) grep -q '\.debug_frame' <(readelf -SW "$exe") && ok || bad "$kind: no .debug_frame" ;;
  esac
  json=$("$bin" gen --json --compare-libdw "$exe" -o "$exe.v3.sf" 2>&1) || { bad "gen $kind: $json"; continue; }
  got=$(echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["functions_in"], d["libdw_diff"]["differing_rows"], d["libdw_diff"]["rows_compared"])')
  want=$(readelf_fdes "$exe")
  read -r fin differ compared <<< "$got"
  [ "$fin" = "$want" ] && ok || bad "gen $kind: $fin functions read, readelf lists $want FDEs"
  [ "$differ" = 0 ] && [ "$compared" -gt 0 ] && ok || bad "gen $kind: $differ of $compared rows differ from libdw"
  for v in 3 2; do
    "$bin" gen --format-version $v "$exe" -o "$exe.v$v.sf" >/dev/null 2>&1 || { bad "gen v$v $kind"; continue; }
    out=$("$bin" verify "$exe" --raw "$exe.v$v.sf" 2>&1) && ok || bad "verify gen v$v $kind: $(echo "$out" | grep -m3 -E 'mismatch|error|sframe:|DWARF')"
  done
done

# Several FILEs in one process (-o DIR, --json array): the same sections as
# one run per file, and a file without CFI fails alone (exit status 1).
mkdir -p "$work/many"
"$bin" gen --json "$work/static" "$work/debug-frame" /usr/bin/true -o "$work/many" > "$work/many.json" 2>/dev/null && ok ||
  bad "gen FILE... failed"
for f in "$work/static" "$work/debug-frame" /usr/bin/true; do
  "$bin" gen "$f" -o "$work/one.sf" >/dev/null 2>&1 && cmp -s "$work/one.sf" "$work/many/$(basename "$f").sframe" && ok ||
    bad "gen FILE...: $(basename "$f") differs from its own run"
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d) == 3 and all("seconds" in x and "error" not in x for x in d) else 1)' \
  "$work/many.json" && ok || bad "gen FILE... --json: not an array of 3 summaries"
"$bin" gen /usr/bin/true "$src/basic.c" -o "$work/many" >/dev/null 2>&1 && bad "gen FILE... with a bad FILE must exit 1" || ok
[ -s "$work/many/true.sframe" ] && ok || bad "gen FILE...: the good FILE's section is missing"

# 5. --compare-libdw on hostile CFI: a program ending inside an operand
#    (DW_CFA_offset_extended whose register LEB128 takes the padding byte
#    after it, leaving no offset: readelf reports it) is CFI libdw reads
#    past, into bytes our reader never screens for register numbers, so
#    libdw is not run and gen says so. And a program whose .eh_frame_hdr has
#    no search table (ld omits it when it cannot read an input's .eh_frame:
#    fde_count encoding DW_EH_PE_omit, LSB 5.0 §10.6.2) is compared by
#    walking .eh_frame, as libdw searches it.
printf '%s\n' 'int main(void) { return 0; }' \
  "__asm__(\".text\\n.globl cut\\n.type cut,@function\\ncut:\\n.cfi_startproc\\nnop\\n.cfi_escape 0x05, 0x80\\nnop\\nret\\n.cfi_endproc\\n.size cut, .-cut\\n\");" \
  > "$work/cut.c"
gcc -O2 -o "$work/cut" "$work/cut.c" 2>/dev/null || bad "compile cut"
out=$("$bin" gen --compare-libdw "$work/cut" -o "$work/cut.sf" 2>&1) && ok || bad "gen --compare-libdw on a cut program: $out"
[[ "$out" == *"libdw: not run (CFI on which it could allocate without bound:"*"1 FDEs cut short"* ]] && ok ||
  bad "gen --compare-libdw on a cut program ran libdw: $(echo "$out" | tail -1)"
printf '%s\n' 'int main(void) { return 0; }' \
  "__asm__(\".text\\n.globl odd\\n.type odd,@function\\nodd:\\n.cfi_startproc\\nnop\\n.cfi_escape 0x10, 0x06, 0x7f\\nnop\\nret\\n.cfi_endproc\\n.size odd, .-odd\\n\");" \
  > "$work/notable.c"
gcc -O2 -o "$work/notable" "$work/notable.c" 2>/dev/null || bad "compile notable"
hdr=$(readelf -SW "$work/notable" | sed -n 's/.*\.eh_frame_hdr *PROGBITS *[0-9a-f]* \([0-9a-f]*\) .*/\1/p')
[ -n "$hdr" ] && [ "$(od -An -tx1 -j $((16#$hdr)) -N4 "$work/notable" | tr -d ' ')" = 011bffff ] && ok ||
  bad "notable: ld wrote a search table after all"
out=$("$bin" gen --compare-libdw "$work/notable" -o "$work/notable.sf" 2>&1) && ok || bad "gen --compare-libdw, no search table: $out"
[[ "$out" == *"libdw: "*" rows compared, 0 differ"* ]] && ok || bad "no search table: $(echo "$out" | tail -1)"

echo "gen: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
