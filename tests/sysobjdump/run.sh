#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe dump` against the machine's own `objdump --sframe` (binutils 2.40,
# SFrame v1) on programs generated and compiled now with gcc -Wa,--gsframe:
# objects, executables and a shared object, C and C++, -O2 and -O0, a few
# hundred functions of varied frame shapes, two of them tens of KB long.
# Each file is compared alone, then all of them in one call (banners and
# order as objdump prints them).
# Usage: run.sh SFRAME_BIN WORKDIR
set -uo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
python3 "$here/genprog.py" . 400 7 || exit 1

pass=0 fail=0
build() { # OUT CMD...
  local out=$1; shift
  "$@" -o "$out" 2>"$out.cc.log" || { echo "FAIL compile $out: $(head -c 400 "$out.cc.log")"; fail=$((fail+1)); }
}
for opt in -O2 -O0; do
  t=${opt#-}
  build "c-$t.o" gcc "$opt" -Wa,--gsframe -c many.c &
  build "cxx-$t.o" g++ "$opt" -Wa,--gsframe -c many.cpp &
  build "libmany-$t.so" gcc "$opt" -Wa,--gsframe -fPIC -shared many.c &
  wait
  build "c-$t" gcc "$opt" -Wa,--gsframe "c-$t.o"
  build "cxx-$t" g++ "$opt" -Wa,--gsframe "cxx-$t.o"
done

files=()
for f in c-O2.o cxx-O2.o libmany-O2.so c-O2 cxx-O2 c-O0.o cxx-O0.o libmany-O0.so c-O0 cxx-O0; do
  [ -f "$f" ] || continue
  files+=("$f")
  if ! objdump --sframe "$f" >"$f.want" 2>"$f.want.err" || ! grep -q 'Header :' "$f.want"; then
    echo "FAIL objdump has no SFrame for $f: $(head -c 200 "$f.want.err")"; fail=$((fail+1)); continue
  fi
  "$bin" dump "$f" >"$f.got" 2>"$f.got.err"
  if cmp -s "$f.want" "$f.got"; then
    pass=$((pass+1))
  else
    fail=$((fail+1))
    echo "FAIL $f differs from objdump --sframe ($(grep -c 'pc = ' "$f.want") FREs in objdump's text):"
    diff "$f.want" "$f.got" | head -20
  fi
done

# All files in one call, as objdump prints several.
objdump --sframe "${files[@]}" >all.want 2>/dev/null
"$bin" dump "${files[@]}" >all.got 2>all.got.err
if cmp -s all.want all.got; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL multi-file dump differs"; diff all.want all.got | head -20; fi

fres=$(grep -cE '^ +[0-9a-f]{16} ' all.want || true)
fdes=$(grep -c 'func idx' all.want || true)
echo "sysobjdump: ${#files[@]} files, $fdes FDEs, $fres FREs compared with $(objdump --version | head -1)"
echo "sysobjdump: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
