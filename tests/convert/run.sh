#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe convert`: a linked file's section rewritten in another version
# inside its existing space, or in a new PT_LOAD when it does not fit. Truth: the converted section's rows equal the
# golden `objdump --sframe` rows of the original (GNU objdump 2.47, the
# corpus goldens; the machine's objdump 2.40 reads only v1), they match the
# file's DWARF CFI (`verify ELF --raw SECTION@ADDRESS`), readelf shows the new
# sh_size and PT_GNU_SFRAME sizes, and the converted programs run with the
# original's output and exit status.
# Usage: run.sh SFRAME_BIN SOURCE_DIR SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 srcdir=$2 shared=$3 work=$4
corpus="$shared/corpus"
schema="$srcdir/docs/sframepp.schema.json"
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

# rows FILE: the row tables of a dump (from "Function Index" on), which
# objdump and `sframe dump` print alike for every version.
rows() { sed -n '/Function Index/,$p' "$1" | sed 's/, attr = "[A-Z]*"//'; }
# sec_size FILE, seg_sizes FILE: .sframe's sh_size; PT_GNU_SFRAME's p_filesz p_memsz (readelf).
sec_size() { printf '%d' "0x$(readelf -SW "$1" | awk '$2==".sframe"{print $6}')"; }
seg_sizes() { local f m; read -r f m < <(readelf -lW "$1" | awk '$1=="GNU_SFRAME"{print $5, $6}'); printf '%d %d' "$f" "$m"; }
sec_addr() { readelf -SW "$1" | awk '$2==".sframe"{print "0x"$4}'; }

schema_ok() {
  python3 - "$schema" "$1" <<'PY'
import json, sys, jsonschema
schema, doc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
for e in errors[:3]: print("  ", list(e.path), e.message[:200])
sys.exit(1 if errors else 0)
PY
}

# check_converted ORIG OUT GOLDEN VERSION: OUT is ORIG's conversion to
# VERSION: rows as GOLDEN, DWARF agrees, sizes updated, consumers accept.
check_converted() {
  local orig=$1 out=$2 golden=$3 v=$4 name; name=$(basename "$out")
  "$bin" dump "$out" >"$work/$name.dump" 2>&1 || bad "dump $out"
  grep -q "Version: SFRAME_VERSION_$v" "$work/$name.dump" && ok || bad "$out: not version $v"
  diff <(rows "$golden") <(rows "$work/$name.dump") >"$work/$name.diff" && ok ||
    bad "$out: rows differ from the original's golden: $(head -20 "$work/$name.diff")"
  # The converted section checked against the original's DWARF CFI.
  objcopy -O binary --only-section=.sframe "$out" "$work/$name.raw" || bad "objcopy $out"
  "$bin" verify "$orig" --raw "$work/$name.raw@$(sec_addr "$orig")" >"$work/$name.vr" 2>&1 && ok ||
    bad "verify $orig --raw (converted): $(head -3 "$work/$name.vr")"
  grep -q ' 0 mismatches$' "$work/$name.vr" && ok || bad "$out: rows disagree with DWARF: $(head -3 "$work/$name.vr")"
  "$bin" verify --consumer all "$out" >"$work/$name.v" 2>&1 && ok || bad "verify --consumer all $out: $(cat "$work/$name.v")"
  # sh_size and PT_GNU_SFRAME follow the new length (the section's header).
  local n; n=$(python3 -c "import sys;b=open(sys.argv[1],'rb').read();print(len(b))" "$work/$name.raw")
  [ "$(sec_size "$out")" = "$n" ] && ok || bad "$out: sh_size $(sec_size "$out"), section $n bytes"
  [ "$(seg_sizes "$out")" = "$n $n" ] && ok || bad "$out: PT_GNU_SFRAME sizes '$(seg_sizes "$out")', want $n"
}

# same_run ORIG OUT: the converted program runs as the original.
same_run() {
  local a b ra rb
  a=$(cd "$(dirname "$1")" && LD_LIBRARY_PATH=. timeout 20 "$1" 2>&1); ra=$?
  b=$(cd "$(dirname "$1")" && LD_LIBRARY_PATH=. timeout 20 "$2" 2>&1); rb=$?
  [ "$a" = "$b" ] && [ $ra = $rb ] && [ $ra -ne 124 ] && [ $ra -ne 126 ] && [ $ra -ne 127 ] && ok ||
    bad "$2 runs differently: status $rb vs $ra; output '$(head -c 200 <<<"$b")' vs '$(head -c 200 <<<"$a")'"
}

# 1. v2 -> v3: ld's v2 corpus files were padded to their v3 size, so the v3
#    section fits. Rows as objdump 2.47 printed the v2 originals.
for f in basic cxx longfn signals usesolib libdemo.so; do
  orig="$corpus/x86_64-v2-linked/$f" out="$work/v3-$f"
  "$bin" convert --format-version 3 "$orig" -o "$out" >"$work/c.txt" 2>&1 && ok || { bad "convert v3 $f: $(cat "$work/c.txt")"; continue; }
  check_converted "$orig" "$out" "$orig.objdump.txt" 3
  # The v2 corpus files are not executable (the copy keeps their mode).
  chmod +x "$out"
  [ "$f" = libdemo.so ] || same_run "$corpus/x86_64-v3-linked/$f" "$out"
done

# 2. v3 -> v2 where representable; realign has a FLEX FDE: refused, saying so.
for f in basic cxx longfn signals usesolib; do
  orig="$corpus/x86_64-v3-linked/$f" out="$work/v2-$f"
  "$bin" convert --format-version 2 "$orig" -o "$out" >"$work/c.txt" 2>&1 && ok || { bad "convert v2 $f: $(cat "$work/c.txt")"; continue; }
  check_converted "$orig" "$out" "$orig.objdump.txt" 2
  same_run "$orig" "$out"
done
"$bin" convert --format-version 2 "$corpus/x86_64-v3-linked/realign" -o "$work/v2-realign" >"$work/c.txt" 2>&1
[ $? -eq 1 ] && ok || bad "convert realign to v2: want exit 1"
grep -q 'not representable in SFrame v2: 1 FLEX FDE (first: FDE 5 at 0x1190)' "$work/c.txt" && ok ||
  bad "realign to v2: reason not given: $(cat "$work/c.txt")"
[ ! -e "$work/v2-realign" ] && ok || bad "realign to v2: an output was left"

# 3. --in-place: atomic replacement; the program still runs; JSON summary.
cp "$corpus/x86_64-v3-linked/signals" "$work/inplace"
"$bin" convert --json --format-version 2 --in-place "$work/inplace" >"$work/inplace.json" 2>&1 && ok || bad "convert --in-place"
schema_ok "$work/inplace.json" && ok || bad "convert --json: not valid against the schema"
check_converted "$corpus/x86_64-v3-linked/signals" "$work/inplace" "$corpus/x86_64-v3-linked/signals.objdump.txt" 2
same_run "$corpus/x86_64-v3-linked/signals" "$work/inplace"
[ -x "$work/inplace" ] && ok || bad "--in-place lost the execute permission"

# 4. v1 (the machine's gcc and ld 2.40): v2 and v3 need more bytes than the
#    section has, so the section moves to a new read-only PT_LOAD, as gen
#    --loadable puts it, with the file's PT_GNU_SFRAME retargeted: GNU
#    readelf shows that layout (tests/gen/loadable_check.py: one PT_LOAD
#    added past the old ones, the program headers inside it, PT_GNU_SFRAME
#    equal to .sframe inside a PT_LOAD), the program runs as before, the
#    rows match its DWARF CFI (verify --raw, and strict verify of the file),
#    and the consumers of the version accept it (v3: the kernel).
gcc -O2 -Wa,--gsframe -o "$work/v1prog" "$corpus/src/basic.c" 2>/dev/null || bad "compile v1prog"
grep -q SFRAME_VERSION_1 <(objdump --sframe "$work/v1prog") && ok || bad "v1prog: no SFrame v1 section"
space=$(sec_size "$work/v1prog")
chk() { python3 "$srcdir/tests/gen/loadable_check.py" "$@"; }
for v in 2 3; do
  out="$work/v1to$v"
  cp "$work/v1prog" "$out"
  "$bin" convert --format-version $v --in-place "$out" >"$work/c.txt" 2>&1 && ok || bad "v1 -> v$v: $(cat "$work/c.txt")"
  grep -q "more than the $space of space; moved to a new PT_LOAD" "$work/c.txt" && ok ||
    bad "v1 -> v$v: the new segment not reported: $(cat "$work/c.txt")"
  o=$(chk layout "$work/v1prog" "$out" 1) && ok || bad "v1 -> v$v layout: $o"
  o=$(chk sframe-seg "$out") && ok || bad "v1 -> v$v PT_GNU_SFRAME: $o"
  [ "$(readelf -lW "$out" | grep -c ' LOAD ')" = "$(( $(readelf -lW "$work/v1prog" | grep -c ' LOAD ') + 1 ))" ] &&
    grep -q GNU_SFRAME <(readelf -lW "$out") && ok || bad "v1 -> v$v: readelf -lW: $(readelf -lW "$out" | grep -E 'LOAD|SFRAME')"
  grep -q "Version: SFRAME_VERSION_$v" <("$bin" dump "$out") && ok || bad "v1 -> v$v: not version $v"
  objcopy -O binary --only-section=.sframe "$out" "$work/v1to$v.sec" || bad "objcopy v1to$v"
  "$bin" verify "$work/v1prog" --raw "$work/v1to$v.sec@$(sec_addr "$out")" >"$work/vr.txt" 2>&1 &&
    grep -q ' 0 mismatches$' "$work/vr.txt" && ok || bad "verify v1prog --raw v1to$v.sec: $(head -3 "$work/vr.txt")"
  "$bin" verify "$out" >"$work/vr.txt" 2>&1 && grep -q ' 0 mismatches$' "$work/vr.txt" && ok ||
    bad "verify $out: $(head -3 "$work/vr.txt")"
  "$bin" verify --consumer all "$out" >"$work/v.txt" 2>&1 && ok || bad "verify --consumer all $out: $(cat "$work/v.txt")"
  if [ $v = 3 ]; then
    "$bin" verify --consumer kernel "$out" >"$work/v.txt" 2>&1 && ok || bad "verify --consumer kernel $out: $(cat "$work/v.txt")"
  fi
  same_run "$work/v1prog" "$out"
done
# Refused only when no segment can be added either, naming the size needed:
# a non-PIE file keeps its address-offset difference, so 1.5 GiB of .bss
# would be 1.5 GiB of zeros in the file.
printf 'char big[1536u << 20];\nint main(int c, char **v) { (void)v; big[c] = 1; return big[1]; }\n' >"$work/bss.c"
gcc -O2 -no-pie -fno-PIE -Wa,--gsframe -o "$work/bss" "$work/bss.c" || bad "compile bss.c"
bss_space=$(sec_size "$work/bss")
"$bin" convert --format-version 3 "$work/bss" -o "$work/bss3" >"$work/c.txt" 2>&1
[ $? -eq 1 ] && ok || bad "bss v1 -> v3: want exit 1: $(cat "$work/c.txt")"
need=$(sed -nE 's/.*section needs ([0-9]+) bytes; .sframe has ([0-9]+), and cannot add a segment: .*bytes past the end of the file.*/\1 \2/p' "$work/c.txt")
read -r n s <<<"$need"
[ -n "${n:-}" ] && [ "$s" = "$bss_space" ] && [ "$n" -gt "$bss_space" ] && ok || bad "bss v1 -> v3: size or reason not named: $(cat "$work/c.txt")"
[ ! -e "$work/bss3" ] && ok || bad "bss v1 -> v3: an output was left"

# 4b. A raw v1 section (no space limit) converts: its rows match the
#     program's DWARF CFI (verify --raw), i.e. they are v1's rows.
objcopy -O binary --only-section=.sframe "$work/v1prog" "$work/v1.raw" || bad "objcopy v1"
for v in 2 3; do
  "$bin" convert --format-version $v "$work/v1.raw" -o "$work/v1to$v.raw" >"$work/c.txt" 2>&1 && ok || bad "raw v1 -> v$v: $(cat "$work/c.txt")"
  "$bin" verify "$work/v1prog" --raw "$work/v1to$v.raw@$(sec_addr "$work/v1prog")" >"$work/vr.txt" 2>&1 && ok ||
    bad "verify v1prog --raw v1to$v: $(head -3 "$work/vr.txt")"
  grep -q "SFrame v$v" "$work/vr.txt" && grep -q ' 0 mismatches$' "$work/vr.txt" && ok || bad "v1 -> v$v rows: $(head -3 "$work/vr.txt")"
done

# 5. The ABI fixes the byte order: big-endian AMD64 is refused.
"$bin" convert --format-version 3 --byte-order big "$corpus/x86_64-v2-linked/basic" -o "$work/be" >"$work/c.txt" 2>&1
[ $? -eq 1 ] && grep -q 'fixes the byte order' "$work/c.txt" && ok || bad "--byte-order big on amd64: $(cat "$work/c.txt")"
"$bin" convert --format-version 3 --byte-order little "$corpus/x86_64-v2-linked/basic" -o "$work/le" >/dev/null 2>&1 && ok ||
  bad "--byte-order little on amd64 refused"

# 6. Usage: neither -o nor --in-place; both.
"$bin" convert --format-version 3 "$corpus/x86_64-v2-linked/basic" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "no output: want exit 2"
"$bin" convert --format-version 3 --in-place -o "$work/x" "$corpus/x86_64-v2-linked/basic" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "-o and --in-place: want exit 2"

echo "convert: $pass passed, $fail failed"
[ $fail -eq 0 ]
