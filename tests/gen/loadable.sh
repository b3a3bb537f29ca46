#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe gen --loadable` (a new read-only PT_LOAD holding the moved
# program-header table and .sframe, with PT_GNU_SFRAME) and `gen --repair`
# (a PT_GNU_SFRAME section regenerated in its space, or moved to a new
# segment with --loadable). Truths, none of them sframepp's:
#  - the retrofitted programs (compiled now; /bin/bash; /usr/bin/python3.11;
#    a shared library and its user; libz under python3.11) run with the
#    original's output and exit status;
#  - GNU readelf -lW/-SW (tests/gen/loadable_check.py): one new R PT_LOAD
#    past every segment and the file's end, offset and address congruent,
#    PT_LOADs sorted, the program headers inside it and PT_PHDR describing
#    them, the lowest PT_LOAD's bias + e_phoff at the table (AT_PHDR the
#    same for every kernel), PT_GNU_SFRAME equal to the SHF_ALLOC .sframe,
#    every other header and every input byte as they were;
#  - the kernel and glibc at run time (tests/gen/phdr_probe.c): AT_PHDR at
#    the table readelf shows, dl_iterate_phdr's header count and
#    PT_GNU_SFRAME, and the bytes mapped there equal to objcopy's .sframe,
#    for PIE, non-PIE, static and static-pie executables;
#  - `sframe verify` (strict; its DWARF comparison) and `verify --consumer
#    kernel` accept every output (objdump 2.40 reads only SFrame v1); a v2
#    section (--format-version 2) passes glibc's and libsframe's rules.
# The --repair inputs are made here: lld 14 concatenates the objects'
# .sframe sections (and leaves FDEs of discarded COMDAT code pointing near
# 0) but writes no PT_GNU_SFRAME, so a PT_NOTE is turned into one over the
# section (lld and mold versions that wrote the segment wrote the same
# bytes); ld's sections overwritten with garbage; a zero-size section; the
# empty PT_GNU_SFRAME `objcopy --remove-section=.sframe` leaves.
# Usage: loadable.sh SFRAME_BIN SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 shared=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
src="$shared/corpus/src"
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
chk() { python3 "$here/loadable_check.py" "$@"; }
for t in gcc g++ readelf objcopy ld.lld python3 /usr/bin/python3.11 /bin/bash; do
  command -v "$t" >/dev/null || bad "$t not found (an oracle or input of this test)"
done

# run_out FILE ARGS...: "status|output" of a run (20 s at most).
run_out() { local o r; o=$(timeout 20 "$@" 2>&1); r=$?; echo "$r|$o"; }
# same_run WHAT EXPECTED ACTUAL: the two run_out results agree.
same_run() {
  [ "$2" = "$3" ] && [[ ! $2 =~ ^(124|126|127)\| ]] && ok ||
    bad "$1 runs differently: '$(head -c 300 <<<"$3")' vs the original's '$(head -c 300 <<<"$2")'"
}
# verified FILE: strict verify and the kernel's rules accept FILE.
verified() {
  local o
  o=$("$bin" verify "$1" 2>&1) && ok || bad "verify $1: $(head -5 <<<"$o")"
  grep -q ' 0 mismatches$' <<<"$o" && ok || bad "verify $1: rows disagree with DWARF: $(head -3 <<<"$o")"
  o=$("$bin" verify --consumer kernel "$1" 2>&1) && ok || bad "verify --consumer kernel $1: $(tail -3 <<<"$o")"
}
# retrofit ORIG NEW: gen --loadable, the layout readelf shows, verify.
retrofit() {
  local o
  o=$("$bin" gen "$1" --elf "$2" --loadable 2>&1) && ok || { bad "gen --loadable $1: $o"; return 1; }
  o=$(chk layout "$1" "$2" 2) && ok || bad "$o"
  verified "$2"
}

# 1. Programs compiled now, without SFrame: run as before.
gcc -O2 -o "$work/basic" "$src/basic.c" && gcc -O2 -o "$work/longfn" "$src/longfn.c" &&
  gcc -O2 -o "$work/signals" "$src/signals.c" && gcc -O2 -mavx -o "$work/realign" "$src/realign.c" &&
  g++ -O2 -o "$work/cxx" "$src/cxx.cpp" && gcc -O2 -no-pie -fno-PIE -o "$work/basic-nopie" "$src/basic.c" &&
  gcc -O2 -static -o "$work/signals-static" "$src/signals.c" || bad "compile the corpus sources"
for f in basic longfn signals realign cxx basic-nopie signals-static; do
  [ -x "$work/$f" ] || continue
  retrofit "$work/$f" "$work/$f.sf" || continue
  same_run "$f" "$(run_out "$work/$f")" "$(run_out "$work/$f.sf")"
done

# SFrame v2 (glibc's backtrace() reads v2 only): glibc's and libsframe's rules.
o=$("$bin" gen "$work/cxx" --elf "$work/cxx.v2" --loadable --format-version 2 2>&1) && ok || bad "gen --loadable v2: $o"
o=$(chk layout "$work/cxx" "$work/cxx.v2" 2) && ok || bad "$o"
for c in glibc libsframe; do o=$("$bin" verify --consumer $c "$work/cxx.v2" 2>&1) && ok || bad "verify --consumer $c v2: $o"; done
same_run "cxx v2" "$(run_out "$work/cxx")" "$(run_out "$work/cxx.v2")"

# 2. What the kernel and the dynamic linker see at run time.
for v in "-pie -fPIE" "-no-pie -fno-PIE" "-static" "-static-pie"; do
  exe="$work/phdr${v// /}"
  gcc -O2 $v -o "$exe" "$here/phdr_probe.c" || { bad "compile phdr_probe.c $v"; continue; }
  retrofit "$exe" "$exe.sf" || continue
  got=$(timeout 20 "$exe.sf" "$exe.loaded"); r=$?
  [ $r = 3 ] && ok || bad "$exe.sf: status $r"
  read -r _ table _ phnum _ sf size <<<"$got"
  want=$(chk layout "$exe" "$exe.sf" 2)  # "table 0xA phnum N sframe 0xS SIZE LAYOUT" (readelf)
  want=${want% *}
  [ "$got" = "phdr ${want#table }" ] && ok || bad "$exe.sf: at run time '$got'; readelf: '$want'"
  objcopy -O binary --only-section=.sframe "$exe.sf" "$exe.objcopy" || bad "objcopy $exe.sf"
  cmp -s "$exe.loaded" "$exe.objcopy" && ok || bad "$exe.sf: the bytes mapped at PT_GNU_SFRAME are not .sframe's"
done

# 3. A shared library and its user, each retrofitted; libz under python3.11.
mkdir -p "$work/lib" "$work/lib.sf"
gcc -O2 -fPIC -shared -o "$work/lib/libdemo.so" "$src/lib.c" &&
  gcc -O2 -o "$work/usesolib" "$src/usesolib.c" -L"$work/lib" -ldemo || bad "compile libdemo.so, usesolib"
if retrofit "$work/lib/libdemo.so" "$work/lib.sf/libdemo.so" && retrofit "$work/usesolib" "$work/usesolib.sf"; then
  want=$(LD_LIBRARY_PATH="$work/lib" run_out "$work/usesolib" a b)
  same_run "usesolib with libdemo.so retrofitted" "$want" "$(LD_LIBRARY_PATH="$work/lib.sf" run_out "$work/usesolib" a b)"
  same_run "usesolib retrofitted with libdemo.so retrofitted" "$want" \
    "$(LD_LIBRARY_PATH="$work/lib.sf" run_out "$work/usesolib.sf" a b)"
fi
libz=$(python3 -c 'import sys; print(next(l.split()[-1] for l in open("/proc/self/maps") if "libz.so" in l))' 2>/dev/null ||
       /usr/bin/python3.11 -c 'import zlib
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libz.so" in l))')
mkdir -p "$work/z"
if [ -f "$libz" ] && retrofit "$libz" "$work/z/$(basename "$libz")"; then
  [ "$(basename "$libz")" = libz.so.1 ] || ln -sf "$(basename "$libz")" "$work/z/libz.so.1"
  py='import zlib, sys
print(zlib.crc32(b"sframe" * 1000), len(zlib.compress(bytes(range(256)) * 64)))
print([l.split()[-1] for l in open("/proc/self/maps") if "libz.so" in l][0].startswith(sys.argv[1]))
sys.exit(6)'
  want=$(run_out /usr/bin/python3.11 -c "$py" "$work/z/")
  got=$(LD_LIBRARY_PATH="$work/z" run_out /usr/bin/python3.11 -c "$py" "$work/z/")
  same_run "python3.11 with libz retrofitted" "${want/False/True}" "$got"
else
  bad "no libz.so mapped by python3 ($libz), or retrofitting it failed"
fi

# 4. bash and python3.11, copied and retrofitted.
if retrofit /bin/bash "$work/bash.sf"; then
  for cmd in 'echo hi; exit 3' 'f() { return 7; }; for i in 1 2 3; do echo $((i * i)); done; f' 'kill -TERM $$'; do
    same_run "bash -c '$cmd'" "$(run_out /bin/bash -c "$cmd")" "$(run_out "$work/bash.sf" -c "$cmd")"
  done
fi
if retrofit /usr/bin/python3.11 "$work/python3.11.sf"; then
  cmd='import sys, json, zlib; print(json.dumps({"a": [1, 2.5, None]}), zlib.crc32(b"abc"), sum(range(10**5))); sys.exit(4)'
  same_run "python3.11 -c" "$(run_out /usr/bin/python3.11 -c "$cmd")" "$(run_out "$work/python3.11.sf" -c "$cmd")"
fi

# 5. --in-place --loadable writes what --elf OUT --loadable writes; refusals.
cp "$work/basic" "$work/basic.inplace"
"$bin" gen "$work/basic.inplace" --in-place --loadable >/dev/null 2>&1 && ok || bad "gen --in-place --loadable"
cmp -s "$work/basic.inplace" "$work/basic.sf" && [ -x "$work/basic.inplace" ] && ok ||
  bad "gen --in-place --loadable differs from --elf OUT --loadable, or lost the mode"
# The layout strip keeps (the table grown in place, no warning), or a
# warning that says to strip first: a static executable's .rela.plt, whose
# address its code holds, follows its notes (readelf -SW shows it).
o=$("$bin" gen "$work/basic" --elf "$work/w.basic" --loadable 2>&1 >/dev/null) && [ -z "$o" ] && ok ||
  bad "gen --loadable basic: stderr '$o'"
[[ $(chk layout "$work/basic" "$work/w.basic" 2) == *in-place ]] && ok || bad "basic: the table did not grow in place"
readelf -SW "$work/signals-static" | grep -A1 ' NOTE ' | tail -1 | grep -q '\.rela\.plt' && ok ||
  bad "signals-static: .rela.plt does not follow the notes (readelf -SW)"
o=$("$bin" gen "$work/signals-static" --elf "$work/w.static" --loadable 2>&1 >/dev/null)
grep -q "warning: $work/w.static: .*(\.rela\.plt .*strip first" <<<"$o" && ok || bad "gen --loadable static: no warning: '$o'"
[[ $(chk layout "$work/signals-static" "$work/w.static" 2) == *moved ]] && ok || bad "signals-static: the table did not move"
# refused EXPECTED_TEXT ARGS...: gen fails, saying EXPECTED_TEXT.
refused() {
  local want=$1 o; shift
  o=$("$bin" gen "$@" 2>&1) && bad "gen $* succeeded" || { grep -q -- "$want" <<<"$o" && ok || bad "gen $*: '$o' does not say '$want'"; }
}
gcc -O2 -Wa,--gsframe -o "$work/gsframe" "$src/basic.c" || bad "compile with -Wa,--gsframe"
refused "already has a PT_GNU_SFRAME" "$work/gsframe" --elf "$work/x" --loadable
refused "already has a PT_GNU_SFRAME" "$work/basic.sf" --elf "$work/x" --loadable
gcc -O2 -c -o "$work/basic.o" "$src/basic.c" && refused "not a linked" "$work/basic.o" --elf "$work/x" --loadable
refused "give --elf OUT or --in-place" "$work/basic" -o "$work/x" --loadable
refused "no PT_GNU_SFRAME segment to repair" "$work/basic" --elf "$work/x" --repair
# A non-PIE file keeps its address-offset difference: 1.5 GiB of .bss would
# be 1.5 GiB of zeros in the file.
printf 'char big[1536u << 20];\nint main(int c, char **v) { (void)v; big[c] = 1; return big[1]; }\n' >"$work/bss.c"
gcc -O2 -no-pie -fno-PIE -o "$work/bss" "$work/bss.c" && refused "bytes past the end of the file" "$work/bss" --elf "$work/x" --loadable ||
  bad "compile bss.c"
[ ! -e "$work/x" ] && ok || bad "a refused gen wrote $work/x"

# 6. --repair.
# repaired WHAT ORIG BROKEN [RUN ARGS]: BROKEN (ORIG's broken copy) repaired
# in place, or, when gen says it does not fit, with --loadable; the result
# verifies, its PT_GNU_SFRAME is .sframe, and it runs as ORIG.
repaired() {
  local what=$1 orig=$2 broken=$3 out=$3.fixed o; shift 3
  cp "$broken" "$out"
  if o=$("$bin" gen "$out" --in-place --repair 2>&1); then
    grep -q "rewritten in its space" <<<"$o" && ok || bad "$what: gen --repair: $o"
  else
    grep -q "(add --loadable" <<<"$o" && ok || bad "$what: gen --repair: $o"
    cmp -s "$out" "$broken" && ok || bad "$what: a refused --repair changed the file"
    o=$("$bin" gen "$out" --in-place --repair --loadable 2>&1) && ok || { bad "$what: --repair --loadable: $o"; return; }
    o=$(chk layout "$broken" "$out" 1) && ok || bad "$what: $o"
  fi
  o=$(chk sframe-seg "$out") && ok || bad "$what: $o"
  verified "$out"
  same_run "$what" "$(run_out "$orig" "$@")" "$(run_out "$out" "$@")"
}
# 6a. lld: concatenated sections.
cat >"$work/a.c" <<'EOF'
#include <stdio.h>
int helper(int);
__attribute__((noinline)) int twice(int x) { return 2 * x; }
int main(int argc, char **argv) { (void)argv; printf("%d\n", twice(helper(argc))); return 3; }
EOF
cat >"$work/b.c" <<'EOF'
__attribute__((noinline)) int helper(int x) { return x + 41; }
EOF
gcc -O2 -Wa,--gsframe -c -o "$work/a.o" "$work/a.c" && gcc -O2 -Wa,--gsframe -c -o "$work/b.o" "$work/b.c" &&
  gcc -fuse-ld=lld -o "$work/lld-concat" "$work/a.o" "$work/b.o" || bad "compile and link with lld"
cp "$work/lld-concat" "$work/lld-concat.broken" && chk patch note-to-sframe "$work/lld-concat.broken" || bad "patch lld-concat"
"$bin" verify "$work/lld-concat.broken" >/dev/null 2>&1 && bad "lld's concatenated section verifies: not broken" || ok
# --loadable on lld's file as linked: its unmapped .sframe replaced.
retrofit "$work/lld-concat" "$work/lld-concat.sf" && same_run "lld-concat --loadable" "$(run_out "$work/lld-concat" x)" "$(run_out "$work/lld-concat.sf" x)"
repaired "lld concatenated" "$work/lld-concat" "$work/lld-concat.broken" x y
# 6b. lld: FDEs of discarded code (the second copy of a COMDAT function;
# lld 14 needs --noinhibit-exec to write the file at all).
cat >"$work/c1.cpp" <<'EOF'
#include <cstdio>
inline __attribute__((noinline)) int shared_inline(int x) { return x * 3 + 1; }
int other(int);
int main(int argc, char**) { std::printf("%d %d\n", shared_inline(argc), other(argc)); return 5; }
EOF
cat >"$work/c2.cpp" <<'EOF'
inline __attribute__((noinline)) int shared_inline(int x) { return x * 3 + 1; }
int other(int x) { return shared_inline(x + 1); }
EOF
g++ -O2 -Wa,--gsframe -c -o "$work/c1.o" "$work/c1.cpp" && g++ -O2 -Wa,--gsframe -c -o "$work/c2.o" "$work/c2.cpp" &&
  g++ -fuse-ld=lld -Wl,--noinhibit-exec -o "$work/lld-comdat" "$work/c1.o" "$work/c2.o" 2>/dev/null ||
  bad "compile and link with lld (COMDAT)"
cp "$work/lld-comdat" "$work/lld-comdat.broken" && chk patch note-to-sframe "$work/lld-comdat.broken" || bad "patch lld-comdat"
"$bin" verify "$work/lld-comdat.broken" >/dev/null 2>&1 && bad "lld's COMDAT section verifies: not broken" || ok
repaired "lld discarded COMDAT" "$work/lld-comdat" "$work/lld-comdat.broken" x
# 6c. ld 2.47's v3 sections (the corpus) overwritten with garbage: the
# regenerated section fits their space.
for f in cxx libdemo.so; do
  cp "$shared/corpus/x86_64-v3-linked/$f" "$work/v3-$f.broken" && chk patch garbage "$work/v3-$f.broken" || bad "patch $f"
done
repaired "ld v3 cxx, garbage" "$shared/corpus/x86_64-v3-linked/cxx" "$work/v3-cxx.broken"
grep -q "rewritten in its space" <(cp "$work/v3-cxx.broken" "$work/y" && "$bin" gen "$work/y" --in-place --repair 2>&1) && ok ||
  bad "ld v3 cxx: the regenerated section did not fit ld's space"
mkdir -p "$work/v3lib"
cp "$work/v3-libdemo.so.broken" "$work/v3lib/libdemo.so"
o=$("$bin" gen "$work/v3lib/libdemo.so" --in-place --repair 2>&1) && ok || bad "repair libdemo.so: $o"
verified "$work/v3lib/libdemo.so"
same_run "corpus usesolib with libdemo.so repaired" \
  "$(LD_LIBRARY_PATH="$shared/corpus/x86_64-v3-linked" run_out "$shared/corpus/x86_64-v3-linked/usesolib")" \
  "$(LD_LIBRARY_PATH="$work/v3lib" run_out "$shared/corpus/x86_64-v3-linked/usesolib")"
# 6d. ld 2.40's (gas v1) section overwritten with garbage.
cp "$work/gsframe" "$work/gsframe.garbage" && chk patch garbage "$work/gsframe.garbage" || bad "patch gsframe"
repaired "ld v1, garbage" "$work/gsframe" "$work/gsframe.garbage"
# 6e. A zero-size section: does not fit; --loadable moves it.
cp "$work/gsframe" "$work/gsframe.empty" && chk patch zero-size "$work/gsframe.empty" || bad "patch zero-size"
refused "does not fit (add --loadable" "$work/gsframe.empty" --elf "$work/x" --repair
repaired "zero-size section" "$work/gsframe" "$work/gsframe.empty"
# 6f. objcopy --remove-section=.sframe: PT_GNU_SFRAME empty, no section header.
objcopy --remove-section=.sframe "$work/gsframe" "$work/gsframe.removed" || bad "objcopy --remove-section"
refused "add --loadable" "$work/gsframe.removed" --elf "$work/x" --repair
repaired "objcopy-removed section" "$work/gsframe" "$work/gsframe.removed"

echo "loadable: $pass checks passed, $fail failed"
[ $fail = 0 ]
