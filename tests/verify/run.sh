#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe verify` says what it checked and fails what it could not check:
# the verdict line is "FILE: format ok; DWARF: N functions, M PCs, K
# mismatch(es)" or "...; DWARF: not compared: REASON", it says "ok" only when
# the exit status is 0, and text and JSON (--json) agree. Files are
# compiled now with gcc -Wa,--gsframe. Truth: readelf's FDE count of
# .eh_frame, objdump --sframe's rows, files broken on purpose.
# Usage: run.sh SFRAME_BIN SOURCE_DIR SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 srcdir=$2 shared=$3 work=$4
src="$shared/corpus/src"
schema="$srcdir/docs/sframepp.schema.json"
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

# run WANT_STATUS FILE [ARGS...]: runs verify in text and JSON; checks the
# exit status of both, that the first line says "ok" exactly when the status
# is 0, and that the JSON is valid and agrees with the text. Sets $line (the
# first line) and $jsonf (the JSON file).
run() {
  local want=$1; shift
  local name; name=$(basename "$1")
  "$bin" verify "$@" >"$work/$name.txt" 2>"$work/$name.err"; local rc=$?
  line=$(head -1 "$work/$name.txt")
  [ $rc -eq "$want" ] && ok || bad "verify $*: exit $rc, want $want: $line $(head -c 300 "$work/$name.err")"
  if [ $rc -eq 0 ]; then
    [[ "$line" == *"format ok; DWARF: "* ]] && ok || bad "verify $*: exit 0 without a verdict: $line"
  else
    [[ "$line" != *ok* ]] && ok || bad "verify $*: exit $rc but the first line says ok: $line"
    grep -q '^sframe: ' "$work/$name.err" && ok || bad "verify $*: no reason on stderr"
  fi
  jsonf="$work/$name.json"
  "$bin" verify --json "$@" >"$jsonf" 2>/dev/null; local jrc=$?
  [ $jrc -eq $rc ] && ok || bad "verify --json $*: exit $jrc, text exit $rc"
  python3 - "$schema" "$jsonf" "$rc" "$line" <<'PY' && ok || bad "verify --json $*: JSON invalid or disagrees with the text"
import json, re, sys, jsonschema
schema, doc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
for e in errors[:3]: print("  ", list(e.path), e.message[:200])
f = doc["files"][0]
assert f["ok"] == (sys.argv[3] == "0"), ("ok", f["ok"])
line, d = sys.argv[4], f.get("dwarf")
if d is None:  # the section itself is broken: no verdict line, an error
    assert not f["ok"] and f["error"] and not line, (f, line)
    sys.exit(1 if errors else 0)
m = re.search(r"DWARF: (\d+) functions, (\d+) PCs, (\d+) mismatch(?:es)?$", line)
if m:
    assert d["compared"] and [d["functions_checked"], d["pcs_checked"], len(d["mismatches"])] == [int(x) for x in m.groups()], d
else:
    m = re.search(r"DWARF: not compared: (.*)$", line)
    assert m and not d["compared"] and d["reason"] == m.group(1), (line, d)
sys.exit(1 if errors else 0)
PY
}

# fdes FILE: FDEs of .eh_frame as readelf counts them.
fdes() { readelf --debug-dump=frames "$1" 2>/dev/null | grep -c ' FDE cie='; }
# verdict_counts: "N M K" from $line.
verdict_counts() { sed -nE 's/.*DWARF: ([0-9]+) functions, ([0-9]+) PCs, ([0-9]+) mismatch(es)?$/\1 \2 \3/p' <<<"$line"; }

# 1. Relocatable objects, the commonest gas output, are compared: every FDE
#    (readelf's count) is a function checked, at least one PC each, no
#    mismatch (was: "ok", nothing compared).
for opt in -O2 -O0; do
  for f in basic realign signals; do
    o="$work/$f$opt.o"
    gcc $opt -Wa,--gsframe -c -o "$o" "$src/$f.c" 2>/dev/null || { bad "compile $o"; continue; }
    run 0 "$o"
    read -r n m k <<<"$(verdict_counts)"
    want=$(fdes "$o")
    [ "${n:-x}" = "$want" ] && [ "${m:-0}" -ge "$want" ] && [ "${k:-x}" = 0 ] && ok ||
      bad "verify $o: '$line': want $want functions (readelf), >= $want PCs, 0 mismatches"
  done
done
g++ -O2 -Wa,--gsframe -c -o "$work/cxx.o" "$src/cxx.cpp" 2>/dev/null || bad "compile cxx.o"
run 0 "$work/cxx.o"
[ "$(verdict_counts | cut -d' ' -f1)" = "$(fdes "$work/cxx.o")" ] && ok || bad "verify cxx.o: '$line': want $(fdes "$work/cxx.o") functions"

# 2. A linked program: compared, no mismatch.
exe="$work/basic"
gcc -O2 -Wa,--gsframe -o "$exe" "$src/basic.c" 2>/dev/null || bad "compile $exe"
run 0 "$exe"
read -r n m k <<<"$(verdict_counts)"
[ "${n:-0}" -gt 0 ] && [ "${m:-0}" -gt 0 ] && [ "${k:-x}" = 0 ] && ok || bad "verify $exe: '$line'"

# 3. A raw section at the wrong address: 0 PCs compared while both sides
#    exist is a failure (was: "ok ... 0 PCs compared", exit 0).
"$bin" gen -o "$work/raw" "$exe" >/dev/null 2>&1 || bad "gen -o raw"
run 0 "$exe" --raw "$work/raw"
run 1 "$exe" --raw "$work/raw@0x1234"
[[ "$line" == *"DWARF: "*" functions, 0 PCs, 0 mismatches" ]] && ok || bad "wrong address: verdict '$line'"
grep -q 'wrong section address' "$work/basic.err" && ok || bad "wrong address: stderr does not say why"

# 4. An injected CFA error: the first FRE of the first function says CFA =
#    SP + 16 where the CFI says SP + 8 (objdump 2.40 reads this v1 section
#    and shows the change). Exit 1, and the first line does not say ok.
inj="$work/injected"
cp "$exe" "$inj"
objcopy -O binary --only-section=.sframe "$exe" "$work/sframe.bin" || bad "objcopy extract"
python3 - "$work/sframe.bin" <<'PY' || bad "inject: layout not as expected"
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
magic, version, flags, abi, fp, ra, aux, nfdes, nfres, frelen, fdeoff, freoff = struct.unpack_from("<HBBBbbBIIIII", b, 0)
assert magic == 0xdee2 and version == 1, (hex(magic), version)
hdr = 28 + aux
for i in range(nfdes):  # the first PC-increment FDE whose first FRE is CFA = SP + 8
    fde = hdr + fdeoff + 17 * i  # start(4) size(4) fre_off(4) num_fres(4) info(1)
    fre_off, info = struct.unpack_from("<I", b, fde + 8)[0], b[fde + 16]
    fre = hdr + freoff + fre_off  # addr1 FRE: start(1) info(1) CFA offset(1)
    if info & 0x1f == 0 and b[fre] == 0 and (b[fre + 1] >> 5) & 3 == 0 and b[fre + 2] == 8:
        b[fre + 2] = 16
        break
else:
    sys.exit("no FDE starting with CFA = SP + 8")
open(p, "wb").write(b)
PY
objcopy --update-section .sframe="$work/sframe.bin" "$inj" || bad "objcopy update"
changed=$(diff <(objdump --sframe "$exe") <(objdump --sframe "$inj") | grep -v 'file format' | grep '^[<>]')
[ "$(grep -c '^<.*sp+8 ' <<<"$changed")" = 1 ] && [ "$(grep -c '^>.*sp+16 ' <<<"$changed")" = 1 ] &&
  [ "$(wc -l <<<"$changed")" = 2 ] && ok || bad "inject: objdump does not show one CFA sp+8 made sp+16: $changed"
run 1 "$inj"
[[ "$line" == "$inj: FAILED: format valid; DWARF: "*" functions, "*" PCs, "[1-9]*" mismatch"* ]] && ok ||
  bad "injected CFA error: verdict '$line'"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["files"][0]["dwarf"]; sys.exit(0 if d["mismatches"][0]["what"]=="CFA" else 1)' \
  "$jsonf" && ok || bad "injected CFA error: JSON does not name a CFA mismatch"

# 5. CFI that cannot be read on a file that has CFI is a failure, not "ok":
#    the CIE's augmentation "zR" made "zQ" (unknown to libdw and to us).
cp "$work/basic-O2.o" "$work/badcie.o"
objcopy -O binary --only-section=.eh_frame "$work/basic-O2.o" "$work/eh.bin" || bad "objcopy extract .eh_frame"
python3 - "$work/eh.bin" <<'PY' || bad "badcie: no zR augmentation"
import sys
p = sys.argv[1]; b = open(p, "rb").read()
assert b.count(b"zR\0") == 1
open(p, "wb").write(b.replace(b"zR\0", b"zQ\0"))
PY
objcopy --update-section .eh_frame="$work/eh.bin" "$work/badcie.o" || bad "objcopy update .eh_frame"
run 1 "$work/badcie.o"
[[ "$line" == *"FAILED: format valid; DWARF: not compared: "* ]] && ok || bad "unreadable CFI: verdict '$line'"

# 6. Nothing to compare with is not a failure: a section without .eh_frame.
run 0 "$shared/corpus/raw-sections/gnu-v3-amd64.o"
[[ "$line" == *"format ok; DWARF: not compared: no .eh_frame"* ]] && ok || bad "no CFI: verdict '$line'"

# 7. A broken section: exit 1, nothing says ok.
printf 'not sframe' > "$work/junk"
run 1 "$exe" --raw "$work/junk"

# 8. Hostile CFI whose rules name register numbers no ABI has: libdw keeps a
#    rule per register up to the largest named (elfutils libdw/cfi.c) and
#    made verify peak at 530 MB for r67108864 (2^26), 2.1 GB for r268435454.
#    verify screens the CFI with our reader first and does not run libdw:
#    exit 1, "not compared", and a peak RSS far below that (truth: the
#    register numbers written here, readelf's reading of them).
for reg in '0x80, 0x80, 0x80, 0x20:67108864' '0xfe, 0xff, 0xff, 0x7f:268435454'; do
  bytes=${reg%%:*} num=${reg##*:}
  h="$work/hostile-r$num"
  printf '%s\n' 'int main(void) { return 0; }' \
    "__asm__(\".text\\n.globl hostile\\n.type hostile,@function\\nhostile:\\n.cfi_startproc\\nnop\\n.cfi_escape 0x05, $bytes, 0x01\\nnop\\nret\\n.cfi_endproc\\n.size hostile, .-hostile\\n\");" \
    > "$h.c"
  gcc -O2 -Wa,--gsframe -o "$h" "$h.c" 2>/dev/null || { bad "compile $h"; continue; }
  grep -q "DW_CFA_offset_extended: .*r$num " <(readelf --debug-dump=frames "$h" 2>/dev/null) && ok ||
    bad "$h: readelf does not show a rule for r$num"
  run 1 "$h"
  [[ "$line" == *"DWARF: not compared: CFI on which libdw could allocate without bound"* ]] && ok ||
    bad "hostile r$num: verdict '$line'"
  peak=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$bin" verify "$h")
  [ "$peak" -lt 204800 ] && ok || bad "hostile r$num: verify peaked at $peak KiB (libdw run?)"
done

echo "verify: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
