#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds programs outside the project against an installed sframepp (a
# `cmake --install` prefix, or the usr/ of extracted .deb packages) and runs
# them, one per component, each built two ways: CMake find_package(sframepp
# COMPONENTS ...) (CMakeLists.txt.in) and pkg-config (pkg-config --static
# for a static install: its Libs.private must carry the C++ runtime, as
# the C programs link with gcc). The truths:
#   elf, format  the FDE count and the function covering a PC, as GNU
#                objdump's golden dump of a corpus executable prints them;
#   cfi          that function's start and size, from SFrame generated from
#                the file's DWARF CFI;
#   process      the file mapped at main(): the program's own path;
#   backtrace    glibc's backtrace() from the same function (in the program);
#   C API        consumer.c (gcc -std=c99 -Wall -Wextra -Werror -pedantic)
#                prints objdump's "Function Index" of every corpus file
#                objdump 2.47 printed with DEFAULT FDEs only;
#   ctypes       (shared) tests/capi/ctypes_smoke.py: lookups through
#                Python ctypes against objdump's golden rows.
# Shared: each program loads the prefix's libraries, and the backtrace one
# neither libdw nor libelf. Static: none loads a libsframepp.
# Usage: consumers.sh PREFIX shared|static WORK SHARED_DIR CXX [CXXFLAGS]
set -uo pipefail
prefix=$1 kind=$2 work=$3 shared=$4 cxx=$5 cxxflags=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-gcc}
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
bad() { fail=$((fail+1)); echo "FAIL [$kind] $*"; }
ok() { pass=$((pass+1)); }

pcfile=$(find "$prefix" -name sframepp-backtrace.pc | head -1)
[ -n "$pcfile" ] || { echo "FAIL [$kind] no sframepp-backtrace.pc under $prefix"; exit 1; }
libdir=$(dirname "$(dirname "$pcfile")")
for l in sframepp-format sframepp-unwind sframepp sframepp-cfi sframepp-process sframepp-backtrace; do
  [ -e "$libdir/pkgconfig/$l.pc" ] || bad "not installed: $libdir/pkgconfig/$l.pc"
  if [ "$kind" = shared ]; then
    [ -e "$libdir/lib$l.so.0" ] && [ -e "$libdir/lib$l.so" ] || bad "not installed: $libdir/lib$l.so{,.0}"
    [ -e "$libdir/lib$l.a" ] && bad "a shared install has lib$l.a"
  else
    [ -e "$libdir/lib$l.a" ] || bad "not installed: $libdir/lib$l.a"
    compgen -G "$libdir/lib$l.so*" >/dev/null && bad "a static install has lib$l.so"
  fi
done
[ -e "$libdir/cmake/sframepp/sframeppConfig.cmake" ] || bad "not installed: $libdir/cmake/sframepp/sframeppConfig.cmake"
grep -q -- '-std=' <<<"$(grep -h '^Cflags' "$libdir"/pkgconfig/*.pc)" && bad ".pc files force a -std= on consumers"
# No LD_LIBRARY_PATH. A prefix install (shared): each library finds the
# others it links through its RUNPATH $ORIGIN, a program finds the first
# through its own RUNPATH (CMake's for imported targets; -Wl,-rpath with
# pkg-config, as docs/install.md says). The .deb packages (DEB_ROOT=1,
# extracted into a scratch root, not installed) carry no RUNPATH: their
# usr/lib/MULTIARCH stands in for the loader's default directory.
unset LD_LIBRARY_PATH
rpath=
if [ "$kind" = shared ]; then
  if [ "${DEB_ROOT:-0}" = 1 ]; then
    export LD_LIBRARY_PATH=$libdir
  else
    rpath=-Wl,-rpath,$libdir
    for l in sframepp-format sframepp-unwind sframepp sframepp-cfi sframepp-process sframepp-backtrace; do
      r=$(readelf -d "$libdir/lib$l.so.0" 2>&1 | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
      [ "$r" = '$ORIGIN' ] || bad "installed lib$l.so.0: RUNPATH '$r', want \$ORIGIN"
    done
  fi
fi

# The truth: objdump's golden dump of a linked corpus executable.
dir=$shared/corpus/x86_64-v3-linked
golden=$dir/basic.objdump.txt
want_fdes=$(grep -m1 'Num FDEs' "$golden" | sed 's/^ *//')
want_fde=$(grep -m1 'func idx \[2\]' "$golden" | sed 's/^ *//')
pc=$(( $(echo "$want_fde" | sed 's/.*pc = \(0x[0-9a-f]*\).*/\1/') + 1 ))
# The raw section and its address, as GNU binutils see them.
objcopy -O binary --only-section=.sframe "$dir/basic" "$work/basic.sframe"
addr=0x$(objdump -h "$dir/basic" | awk '$2 == ".sframe" { print $4 }')

links() { # NAME BINARY LIB: the program loads the prefix's LIB (shared) or no libsframepp (static)
  local l; l=$(ldd "$2" 2>&1)
  if [ "$kind" = shared ]; then
    grep -q "=> $libdir/$3.so.0" <<<"$l" && ok || bad "$1 does not load $libdir/$3.so.0: $(grep sframe <<<"$l" | tr '\n' ' ')"
  else
    grep -q libsframepp <<<"$l" && bad "$1 loads a libsframepp: $(grep sframe <<<"$l" | tr '\n' ' ')" || ok
  fi
}
expect() { # NAME WANT BINARY ARGS...: the program prints WANT
  local name=$1 want=$2 out; shift 2
  out=$("$@" 2>&1)
  [ "$out" = "$want" ] && ok || bad "$name printed: $out; want: $want"
}
run_all() { # WAY PREFIX-OF-BINARIES
  local w=$1 b=$2
  expect "$w elf" "$(printf '%s\n%s' "$want_fdes" "$want_fde")" "${b}elf" "$dir/basic" "$pc"
  links "$w elf" "${b}elf" libsframepp
  expect "$w format" "$(printf '%s\n%s' "$want_fdes" "$want_fde")" "${b}format" "$work/basic.sframe" "$addr" "$pc"
  links "$w format" "${b}format" libsframepp-format
  expect "$w cfi" "${want_fde#*: }" "${b}cfi" "$dir/basic" "$pc"
  links "$w cfi" "${b}cfi" libsframepp-cfi
  expect "$w process" "$(realpath "${b}process")" "${b}process"
  links "$w process" "${b}process" libsframepp-process
  local out
  # sframe_strerror(SFRAME_OK) is "success" (sframe.h), from the
  # backtrace's own dependencies: libsframepp (and libelf) stay out.
  out=$("${b}backtrace" 2>&1) && [[ $out == "frames "*" (success)" ]] && ok || bad "$w backtrace: $out"
  links "$w backtrace" "${b}backtrace" libsframepp-backtrace
  out=$(ldd "${b}backtrace" 2>&1)
  grep -q 'libdw\|libelf\|libsframepp\.so' <<<"$out" && bad "$w backtrace loads libdw/libelf/libsframepp: $(tr '\n' ' ' <<<"$out")" || ok
  grep -q 'not found' <<<"$out" && bad "$w backtrace: $(grep 'not found' <<<"$out" | tr '\n' ' ')" || ok
  expect "$w C" "$(sed -n '/Function Index :/,$p' "$golden")" "${b}c" "$dir/basic"
  links "$w C" "${b}c" libsframepp
}

# 1. CMake: find_package(sframepp COMPONENTS ...).
mkdir -p "$work/cmake"
cp "$here/CMakeLists.txt.in" "$work/cmake/CMakeLists.txt"
if cmake -S "$work/cmake" -B "$work/cmake/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_DIR="$here" \
     -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_C_FLAGS="$cxxflags" \
     >"$work/cmake.log" 2>&1 && cmake --build "$work/cmake/build" >>"$work/cmake.log" 2>&1; then
  run_all cmake "$work/cmake/build/cmake_"
else
  bad "CMake consumers: $(tail -15 "$work/cmake.log")"
fi

# 2. pkg-config, one .pc file per library.
export PKG_CONFIG_PATH=$libdir/pkgconfig
static=; [ "$kind" = static ] && static=--static
build_pc() { # NAME PKG SOURCE
  local drv=$cxx std=-std=c++20
  case $3 in *.c) drv=$cc std="-std=c99 -Wall -Wextra -Werror -pedantic" ;; esac
  # shellcheck disable=SC2046,SC2086
  "$drv" $std $cxxflags "$here/$3" -o "$work/pc_$1" $(pkg-config $static --cflags --libs "$2") $rpath 2>"$work/pc_$1.log" ||
    bad "pkg-config $1: $(head -c 600 "$work/pc_$1.log")"
}
build_pc elf sframepp consumer.cpp
build_pc format sframepp-format consumer_format.cpp
build_pc cfi sframepp-cfi consumer_cfi.cpp
build_pc process sframepp-process consumer_process.cpp
build_pc backtrace sframepp-backtrace consumer_backtrace.c
build_pc c sframepp consumer.c
run_all pkg-config "$work/pc_"

# 3. The C consumer over the corpus.
if [ -x "$work/pc_c" ]; then
  ncorpus=0
  for golden in "$shared"/corpus/*/*.objdump.txt; do
    file=${golden%.objdump.txt}
    [ -e "$file" ] || continue
    # objdump 2.40's v1 layout, FLEX FDEs and s390x registers print
    # otherwise: the consumer renders DEFAULT FDEs as objdump 2.47 does.
    case $file in */x86_64-v1-*|*/s390x-*|*s390x*) continue ;; esac
    grep -q 'attr = "F"' "$golden" && continue
    ncorpus=$((ncorpus+1))
    if diff <("$work/pc_c" "$file" 2>&1) <(sed -n '/Function Index :/,$p' "$golden") >"$work/c.diff"; then ok
    else bad "C consumer on $file differs from objdump: $(head -5 "$work/c.diff")"; fi
  done
  [ "$ncorpus" -ge 40 ] || bad "C consumer: only $ncorpus corpus files compared"
fi

# 4. Python ctypes over the installed libsframepp.so.0 (objdump's golden
# rows, tests/capi/ctypes_smoke.py).
if [ "$kind" = shared ]; then
  python3 "$here/../capi/ctypes_smoke.py" "$libdir/libsframepp.so.0" "$shared/corpus" >"$work/ctypes.log" 2>&1 && ok ||
    bad "ctypes: $(tail -5 "$work/ctypes.log")"
fi

echo "consumers [$kind, $prefix]: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
