#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build tree into a scratch prefix, then builds a consumer
# outside the project against it, four ways: CMake find_package (shared and
# static targets) and pkg-config (shared and static). Each consumer reads a
# corpus executable and must print what GNU objdump's golden dump says.
# Then a C99 consumer of the C API (consumer.c, gcc -std=c99 -Wall -Wextra
# -Werror, against the installed sframe/sframe.h and libsframepp.so) dumps
# the FDEs and FREs of every corpus file objdump 2.47 printed with DEFAULT
# FDEs only, and must print objdump's "Function Index" exactly.
# Usage: run.sh BUILD_DIR SHARED_DIR WORKDIR CXX [CXXFLAGS]
set -uo pipefail
build=$1 shared=$2 work=$3 cxx=$4 cxxflags=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
pass=0 fail=0
bad() { fail=$((fail+1)); echo "FAIL $*"; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { bad "cmake --install: $(tail -5 "$work/install.log")"; exit 1; }
for f in include/sframe/section.hpp include/sframe/lookup.hpp include/sframe/elf.hpp include/sframe/sframe.h bin/sframe; do
  [ -e "$prefix/$f" ] || bad "not installed: $f"
done
libdir=$(dirname "$(find "$prefix" -name libsframepp.a | head -1)")
for f in libsframepp.a libsframepp.so libsframepp-cfi.a cmake/sframepp/sframeppConfig.cmake pkgconfig/sframepp.pc pkgconfig/sframepp-cfi.pc; do
  [ -e "$libdir/$f" ] || bad "not installed: lib/$f"
done

# The truth: objdump's golden dump of a linked corpus executable.
dir=$shared/corpus/x86_64-v3-linked
golden=$dir/basic.objdump.txt
want_fdes=$(grep -m1 'Num FDEs' "$golden" | sed 's/^ *//')
want_fde=$(grep -m1 'func idx \[2\]' "$golden" | sed 's/^ *//')
pc=$(( $(echo "$want_fde" | sed 's/.*pc = \(0x[0-9a-f]*\).*/\1/') + 1 ))
check() { # NAME BINARY [shared|static]
  local out
  out=$("$2" "$dir/basic" "$pc" 2>&1)
  if [ "$out" = "$(printf '%s\n%s' "$want_fdes" "$want_fde")" ]; then pass=$((pass+1)); else bad "$1 printed: $out; want: $want_fdes / $want_fde"; fi
  if [ "$3" = shared ]; then
    ldd "$2" | grep "$prefix/.*libsframepp.so" >/dev/null || bad "$1 does not load the installed libsframepp.so: $(ldd "$2" | grep sframe)"
  else
    ldd "$2" | grep libsframepp >/dev/null || pass=$((pass+1))
    ldd "$2" | grep libsframepp >/dev/null && bad "$1 should link libsframepp statically"
  fi
}

# 1. CMake package.
mkdir -p "$work/cmake-consumer"
cp "$here/consumer.cpp" "$work/cmake-consumer/"
cp "$here/CMakeLists.txt.in" "$work/cmake-consumer/CMakeLists.txt"
if cmake -S "$work/cmake-consumer" -B "$work/cmake-consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$cxxflags" >"$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake-consumer/build" >>"$work/cmake.log" 2>&1; then
  check "find_package shared" "$work/cmake-consumer/build/consumer_shared" shared
  check "find_package static" "$work/cmake-consumer/build/consumer_static" static
else
  bad "CMake consumer: $(tail -15 "$work/cmake.log")"
fi

# 2. pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046,SC2086
if "$cxx" $cxxflags "$here/consumer.cpp" -o "$work/pc_shared" $(pkg-config --cflags --libs sframepp) \
     -Wl,-rpath,"$libdir" 2>"$work/pc.log"; then
  check "pkg-config shared" "$work/pc_shared" shared
else
  bad "pkg-config shared: $(head -c 600 "$work/pc.log")"
fi
# shellcheck disable=SC2046,SC2086
if "$cxx" $cxxflags "$here/consumer.cpp" -o "$work/pc_static" $(pkg-config --cflags sframepp) \
     -Wl,-Bstatic $(pkg-config --libs-only-L --libs-only-l sframepp) -Wl,-Bdynamic \
     $(pkg-config --libs libelf) 2>"$work/pc.log"; then
  check "pkg-config static" "$work/pc_static" static
else
  bad "pkg-config static: $(head -c 600 "$work/pc.log")"
fi

# 3. The C API from C99. The sanitizer flags of a sanitizer build come along
# (its libsframepp.so needs their runtimes).
cc=${CC:-gcc}
# shellcheck disable=SC2086
if "$cc" -std=c99 -Wall -Wextra -Werror -pedantic $cxxflags -I"$prefix/include" "$here/consumer.c" -o "$work/c_consumer" \
     -L"$libdir" -lsframepp -Wl,-rpath,"$libdir" 2>"$work/c.log"; then
  ldd "$work/c_consumer" | grep "$prefix/.*libsframepp.so.0" >/dev/null || bad "C consumer does not load the installed libsframepp.so.0"
  ncorpus=0
  for golden in "$shared"/corpus/*/*.objdump.txt; do
    file=${golden%.objdump.txt}
    [ -e "$file" ] || continue
    # objdump 2.40's v1 layout, FLEX FDEs and s390x registers print
    # otherwise: the consumer renders DEFAULT FDEs as objdump 2.47 does.
    case $file in */x86_64-v1-*|*/s390x-*|*s390x*) continue ;; esac
    grep -q 'attr = "F"' "$golden" && continue
    ncorpus=$((ncorpus+1))
    if diff <("$work/c_consumer" "$file" 2>&1) <(sed -n '/Function Index :/,$p' "$golden") >"$work/c.diff"; then
      pass=$((pass+1))
    else
      bad "C consumer on $file differs from objdump: $(head -5 "$work/c.diff")"
    fi
  done
  [ "$ncorpus" -ge 40 ] || bad "C consumer: only $ncorpus corpus files compared"
else
  bad "C consumer: $(head -c 600 "$work/c.log")"
fi

echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
