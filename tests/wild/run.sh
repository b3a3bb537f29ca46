#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SFrame as found in the wild (issue 30, part 4), on objects GNU as 2.47
# (Debian unstable's binutils, shared/tools/get-unstable) makes now from
# sources written here. A missing binutils 2.47 fails the test.
#   empty   an empty .sframe section (size 0, as GNU as 2.45 writes in
#           Ubuntu 25.10's Scrt1.o): dump prints objdump 2.47's banner and
#           readelf 2.47's line, dump/stat/verify exit 0, merge skips it.
#           Truth: readelf -S (size 0), objdump and readelf --sframe, the
#           FDE count objdump --sframe prints for the other input.
#   restore a CIE whose initial instructions hold DW_CFA_restore (gas moves
#           a function's leading .cfi_restore there; readelf shows it):
#           the file's other FDEs are compared, the CIE's FDEs are failed
#           as not compared because libdw refuses them, and said so.
#   signal  a signal-frame FDE gas writes without FREs (.cfi_signal_frame
#           with a DW_CFA_def_cfa_expression; objdump shows attr "S" and 0
#           FREs): no SFrame rules there, listed over readelf's FDE range;
#           no "wrong section address".
# Usage: run.sh SFRAME_BIN SOURCE_DIR SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 srcdir=$2 shared=$3 work=$4
schema="$srcdir/docs/sframepp.schema.json"
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
finish() { echo "wild: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

B=$("$shared/tools/get-unstable" binutils 2>get-unstable.err | tail -1)
if [ -z "$B" ] || [ ! -x "$B/as" ] || ! "$B/objdump" --version | head -1 | grep -q ' 2\.4[7-9]\| 2\.[5-9][0-9]'; then
  bad "no binutils 2.47 from get-unstable (the oracle): $(tail -3 get-unstable.err)"
  finish
fi
cc() { gcc -B"$B" "$@"; }  # gas 2.47 as the assembler
case "$(gcc -B"$B" -print-prog-name=as)" in "$B"/*) ok ;; *) bad "gcc -B$B does not use an assembler of $B" ;; esac

# j WANT_STATUS PYTHON_CONDITION ARGS...: the tool with --json in ARGS; exit
# status, JSON valid against the schema, and the condition (on `doc`) true.
j() {
  local want=$1 cond=$2; shift 2
  "$bin" "$@" >out.json 2>err.txt; local rc=$?
  [ "$rc" -eq "$want" ] && ok || bad "sframe $*: exit $rc, want $want: $(head -c 300 err.txt)"
  python3 - "$schema" out.json "$cond" <<'PY' && ok || bad "sframe $*: JSON invalid or condition false: $cond: $(head -c 600 out.json)"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
for e in errors[:3]: print("  ", list(e.path), e.message[:200])
sys.exit(1 if errors or not eval(sys.argv[3]) else 0)
PY
}
# t WANT_STATUS REGEX ARGS...: exit status and stdout+stderr matching REGEX.
t() {
  local want=$1 re=$2; shift 2
  "$bin" "$@" >out.txt 2>err.txt; local rc=$?
  [ "$rc" -eq "$want" ] && ok || bad "sframe $*: exit $rc, want $want: $(head -c 300 err.txt)"
  grep -Eq -- "$re" out.txt err.txt && ok || bad "sframe $*: no /$re/ in: $(head -c 400 out.txt) $(head -c 300 err.txt)"
}
sframe_size() { local h; h=$("$B/readelf" -SW "$1" | sed -n 's/.* \.sframe  *[A-Z_]*  *[0-9a-f]*  *[0-9a-f]*  *\([0-9a-f]*\) .*/\1/p'); [ -n "$h" ] && echo $((16#$h)); }

# --- empty: two ways to an empty .sframe: gas with the section named and
# nothing in it, and objcopy --add-section of an empty file.
cat > empty.s <<'S'
	.text
	.globl _start
	.type _start, @function
_start:
	.cfi_startproc
	.cfi_undefined %rip
	xorl %ebp, %ebp
	hlt
	.cfi_endproc
	.size _start, .-_start
	.section .sframe,"a"
S
cc -c empty.s -o empty.o || bad "assemble empty.s"
printf 'int f(int x) { return x + 1; }\n' > f.c
gcc -O2 -c f.c -o f0.o && : > nothing.bin &&
  "$B/objcopy" --add-section .sframe=nothing.bin --set-section-flags .sframe=alloc,readonly f0.o added.o ||
  bad "objcopy --add-section"
for o in empty.o added.o; do
  [ "$(sframe_size "$o")" = 0 ] && ok || bad "$o: readelf says .sframe is $(sframe_size "$o") bytes, want 0"
  # objdump 2.47: its banner, then "\nCan't get contents for section ''.\n",
  # exit 0; readelf 2.47: "\nSection '.sframe' has no debugging data.\n".
  "$B/objdump" --sframe "$o" >od.txt 2>od.err; odrc=$?
  [ $odrc -eq 0 ] && [ ! -s od.err ] && ok || bad "$o: objdump --sframe exit $odrc: $(cat od.err)"
  "$B/readelf" --sframe "$o" >re.txt 2>/dev/null
  { head -n -2 od.txt; cat re.txt; } >want.txt
  "$bin" dump "$o" >dump.txt 2>dump.err; rc=$?
  [ $rc -eq 0 ] && [ ! -s dump.err ] && ok || bad "dump $o: exit $rc: $(cat dump.err)"
  cmp -s want.txt dump.txt && ok || bad "dump $o differs from objdump's banner + readelf's line: $(diff want.txt dump.txt)"
  j 0 'doc["files"][0]["empty_section"] == ".sframe" and doc["files"][0]["elf_format"] == "elf64-x86-64"' dump --json "$o"
  t 0 "^$o: section \.sframe at 0x0: empty \(0 bytes\), no SFrame data$" stat "$o"
  j 0 'doc["files"][0]["empty"] is True and "stats" not in doc["files"][0]' stat --json "$o"
  t 0 "^$o: format ok; DWARF: not compared: section \.sframe is empty \(0 bytes\): no SFrame data$" verify "$o"
  j 0 'doc["files"][0]["ok"] and doc["files"][0]["empty"] and not doc["files"][0]["dwarf"]["compared"]' verify --json "$o"
  # Commands that need rules say the section is empty, not damaged.
  t 1 "section \.sframe is empty \(0 bytes\): no SFrame data" lookup "$o" 0x0
done
# merge: the empty input skipped; the result has the other input's FDEs
# (objdump 2.47's count), and merging only empty sections fails.
printf 'int main(void) { return 0; }\n' > m.c
cc -O2 -Wa,--gsframe m.c -o prog || bad "link prog"
fdes=$("$B/objdump" --sframe prog | sed -n 's/^ *Num FDEs: //p')
t 0 "^merged\.raw: SFrame v3 section for address 0x0: $fdes functions, [0-9]+ bytes; 1 empty input sections skipped$" \
  merge -o merged.raw prog empty.o
j 0 "doc['functions'] == $fdes and doc['inputs'][1] == {'input': 'empty.o', 'address': '0x0', 'functions': 0, 'empty': True}" \
  merge --json -o merged2.raw prog empty.o
t 1 "^sframe: merge: every input's \.sframe section is empty \(0 bytes\): no SFrame data to merge$" \
  merge -o none.raw empty.o added.o
[ ! -e none.raw ] && ok || bad "merge of empty sections wrote none.raw"

# --- restore: foo's leading .cfi_restore goes into its CIE; bar has a CIE
# of its own without it.
cat > restore.s <<'S'
	.text
	.globl foo
	.type foo, @function
foo:
	.cfi_startproc
	.cfi_restore %rbp
	pushq %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	popq %rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size foo, .-foo
	.globl bar
	.type bar, @function
bar:
	.cfi_startproc
	pushq %rbx
	.cfi_def_cfa_offset 16
	.cfi_offset %rbx, -16
	popq %rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size bar, .-bar
S
cc -Wa,--gsframe -c restore.s -o restore.o 2>restore.err || bad "assemble restore.s: $(cat restore.err)"
"$B/readelf" --debug-dump=frames restore.o >frames.txt
[ "$(grep -c ' CIE$' frames.txt)" = 2 ] && [ "$(awk '/ CIE$/ {c=1} / FDE /{c=0} c && /DW_CFA_restore: r6/' frames.txt | wc -l)" = 1 ] &&
  ok || bad "restore.o: readelf shows no CIE holding DW_CFA_restore r6: $(head -40 frames.txt)"
[ "$(grep -c ' FDE cie=' frames.txt)" = 2 ] && ok || bad "restore.o: want 2 FDEs (readelf)"
# bar is compared (1 function, its PCs, no mismatch); foo's FDE fails as
# not compared, and the reason says why.
t 1 "^restore\.o: FAILED: format valid; DWARF: 1 functions, [1-9][0-9]* PCs, 0 mismatches$" verify restore.o
grep -q "^sframe: restore.o: libdw could not read 1 FDEs of the DWARF CFI (the CFI has 1 DW_CFA_restore in CIE initial instructions, which libdw refuses; DWARF 5 §6.4.2.3 makes them no change)$" err.txt &&
  ok || bad "verify restore.o: reason: $(cat err.txt)"
j 1 'not doc["files"][0]["ok"] and doc["files"][0]["dwarf"]["functions_checked"] == 1 and not doc["files"][0]["dwarf"]["mismatches"]' \
  verify --json restore.o

# --- signal: gas 2.47's own case (gas/testsuite/gas/cfi-sframe, "Signal
# Frame with no FREs"): it warns and writes the FDE without FREs.
cat > signal.s <<'S'
	.text
	.globl sig
	.type sig, @function
sig:
	.cfi_startproc
	.cfi_signal_frame
	.cfi_escape 0x0f, 0x03, 0x77, 0xa0, 0x01
	movq $15, %rax
	syscall
	.cfi_endproc
	.size sig, .-sig
S
cc -Wa,--gsframe -c signal.s -o signal.o 2>signal.err || bad "assemble signal.s"
grep -q 'no SFrame FDE emitted; .cfi_escape with op (0xf)' signal.err && ok || bad "gas did not warn: $(cat signal.err)"
"$B/objdump" --sframe signal.o >od.txt
grep -q '^    Num FREs: 0$' od.txt && grep -Eq 'func idx \[0\]: pc = 0x0, size = [0-9]+ bytes, attr = "S"' od.txt &&
  ok || bad "signal.o: objdump shows no signal FDE without FREs: $(cat od.txt)"
range=$("$B/readelf" --debug-dump=frames signal.o | sed -n 's/.* FDE cie=.* pc=0*\([0-9a-f]*\)\.\.0*\([0-9a-f]*\)$/0x\1 0x\2/p')
read -r lo hi <<<"$range"; [ "$lo" = 0x ] && lo=0x0
t 0 "^signal\.o: format ok; DWARF: 1 functions, 0 PCs, 0 mismatches$" verify signal.o
grep -q "^  no SFrame rules: $lo-$hi <sig+0x0>: a signal-frame FDE without FREs (an outermost frame, SFrame v3 §1.2), where DWARF CFI recovers the caller" out.txt &&
  ok || bad "verify signal.o: no 'no SFrame rules' line for $lo-$hi: $(cat out.txt)"
grep -q 'wrong section address' out.txt err.txt && bad "verify signal.o still says wrong section address" || ok
j 0 "[(r['start'], r['end'], r['function']) for r in doc['files'][0]['dwarf']['no_rules']] == [('$lo', '$hi', 'sig+0x0')]" \
  verify --json signal.o

finish
