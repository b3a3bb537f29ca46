#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages of a shared build (cmake/package.cmake).
#   deb.sh build SRC BUILD_DIR DEBS    `cpack -G DEB` into DEBS (a fixture),
#       from a shared build of SRC configured as a packager does, with
#       -DCMAKE_INSTALL_PREFIX=/usr (Debian's multiarch library directory,
#       no RUNPATH: cmake/install.cmake), in DEBS/build, with BUILD_DIR's
#       compilers and compiler launcher (ccache)
#   deb.sh check DEBS SHARED WORK CXX  the package set, names and Depends
#       (Debian policy: one runtime package per shared library, named from
#       its soname; dpkg-shlibdeps's system dependencies); then every
#       package extracted with `dpkg-deb -x` into a scratch root and the
#       consumers of consumers.sh built against its usr/ and run; the
#       libraries in usr/lib/MULTIARCH, no RUNPATH, the -dev split (the
#       runtime packages hold the .so.0 files only); prints the installed
#       size of each library.
set -uo pipefail
mode=$1
here=$(cd "$(dirname "$0")" && pwd)
fail=0
bad() { fail=$((fail+1)); echo "FAIL $*"; }
for t in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$t" >/dev/null || { echo "FAIL: $t not found (scripts/install-deps installs dpkg-dev)"; exit 1; }
done

case $mode in
build)
  src=$2 build=$3 debs=$4
  rm -rf "$debs"; mkdir -p "$debs"
  t0=$SECONDS
  cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
  pb=$debs/build
  if ! { cmake -S "$src" -B "$pb" -G Ninja -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" -DCMAKE_INSTALL_PREFIX=/usr \
           -DBUILD_SHARED_LIBS=ON -DSFRAMEPP_TESTS=OFF -DSFRAMEPP_BENCH=OFF -DSFRAMEPP_TOOLS=ON \
           -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" -DCMAKE_C_COMPILER="$(cache CMAKE_C_COMPILER)" \
           -DCMAKE_CXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)" \
           -DCMAKE_C_COMPILER_LAUNCHER="$(cache CMAKE_C_COMPILER_LAUNCHER)" >"$debs/build.log" 2>&1 &&
         cmake --build "$pb" -j 2 >>"$debs/build.log" 2>&1; }; then
    tail -30 "$debs/build.log"; echo "FAIL: the packaging build (CMAKE_INSTALL_PREFIX=/usr)"; exit 1
  fi
  (cd "$debs" && cpack --config "$pb/CPackConfig.cmake" -G DEB -B "$debs/cpack" >"$debs/cpack.log" 2>&1) ||
    { tail -30 "$debs/cpack.log"; echo "FAIL: cpack -G DEB"; exit 1; }
  mv "$debs"/cpack/*.deb "$debs/" && rm -rf "$debs/cpack/_CPack_Packages"
  ls "$debs"/*.deb
  echo "cpack: $((SECONDS - t0)) s"
  ;;
check)
  debs=$2 shared=$3 work=$4 cxx=$5
  rm -rf "$work"; mkdir -p "$work/root"
  declare -A pkg_of deps_of
  for d in "$debs"/*.deb; do
    p=$(dpkg-deb -f "$d" Package)
    pkg_of[$p]=$d
    deps_of[$p]=$(dpkg-deb -f "$d" Depends)
    dpkg-deb -x "$d" "$work/root" || bad "dpkg-deb -x $d"
  done
  for p in libsframepp-dev sframe-tools; do
    [ -n "${pkg_of[$p]:-}" ] || bad "no package $p (have: ${!pkg_of[*]})"
  done
  nlib=0
  # Every shared library in its own package, named as policy 8.1 says:
  # the soname's library name and version, "-" between two digits.
  for d in "$debs"/*.deb; do
    p=$(dpkg-deb -f "$d" Package)
    while read -r so; do
      nlib=$((nlib+1))
      soname=$(readelf -d "$work/root/$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
      name=${soname%%.so.*} ver=${soname##*.so.}
      want=$name$ver; [[ $name == *[0-9] ]] && want=$name-$ver
      want=${want,,}
      [ "$p" = "$want" ] || bad "$soname is in package $p, policy names it $want"
      [ "$(dpkg-deb -c "$d" | grep '^-' | grep -c '\.so\.[0-9]*\.[0-9.]*$')" -eq 1 ] || bad "$p holds more than one shared library"
    done < <(dpkg-deb -c "$d" | grep '^-' | awk '{print $6}' | grep '\.so\.[0-9]*\.[0-9.]*$' | sed 's|^\./||')
  done
  [ "$nlib" -eq 6 ] || bad "$nlib shared libraries packaged, want 6"
  # Debian's multiarch directory; no RUNPATH (policy 10.2); the -dev split:
  # a runtime package holds its .so.0 (file and soname link) only, the .so
  # links, headers, CMake and pkg-config files are in libsframepp-dev.
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
  dev=$(dpkg-deb -c "${pkg_of[libsframepp-dev]:-/dev/null}" 2>/dev/null | awk '{ print $7 == "->" ? $6 " -> " $8 : $6 }')
  for l in sframepp-format sframepp-unwind sframepp sframepp-cfi sframepp-process sframepp-backtrace; do
    f=$work/root/usr/lib/$multiarch/lib$l.so.0
    [ -e "$f" ] || { bad "not in usr/lib/$multiarch: lib$l.so.0"; continue; }
    readelf -d "$f" | grep -q 'RPATH\|RUNPATH' && bad "packaged lib$l.so.0 has a RUNPATH: $(readelf -d "$f" | grep 'R.*PATH' | tr -s ' ')"
    p=lib$l; [[ $l == *[0-9] ]] && p=$p-; p=${p}0
    c=$(dpkg-deb -c "${pkg_of[$p]:-/dev/null}" 2>/dev/null | awk '{print $6}' | grep -v '/$')
    grep -qv "^\./usr/lib/$multiarch/lib$l\.so\.0" <<<"$c" && bad "$p holds more than lib$l.so.0*: $(tr '\n' ' ' <<<"$c")"
    grep -q "\./usr/lib/$multiarch/lib$l\.so -> " <<<"$dev" || bad "libsframepp-dev lacks the link lib$l.so"
  done
  for f in usr/include/sframe/sframe.h "usr/lib/$multiarch/cmake/sframepp/sframeppConfig.cmake" \
           "usr/lib/$multiarch/pkgconfig/sframepp.pc"; do
    grep -q "\./$f\$" <<<"$dev" || bad "libsframepp-dev lacks $f"
  done
  outside=$(find "$work/root/usr/lib" -mindepth 1 -maxdepth 1 -name 'lib*')
  [ -z "$outside" ] || bad "libraries outside usr/lib/$multiarch: $outside"
  # Depends: our own libraries at this version, the system ones from
  # dpkg-shlibdeps; the backtrace needs neither libdw nor libelf.
  dep_has() { grep -q "\(^\|, \)$2\( \|,\|$\)" <<<"${deps_of[$1]:-}" || bad "$1 Depends lacks $2: ${deps_of[$1]:-}"; }
  dep_has libsframepp-unwind0 libsframepp-format0
  dep_has libsframepp0 libsframepp-unwind0
  dep_has libsframepp0 libelf1
  dep_has libsframepp-cfi0 libsframepp0
  dep_has libsframepp-cfi0 libdw1
  dep_has libsframepp-process0 libsframepp-cfi0
  dep_has libsframepp-backtrace0 libsframepp-unwind0
  dep_has libsframepp-backtrace0 libstdc++6
  dep_has libsframepp-dev libsframepp0
  dep_has libsframepp-dev libsframepp-backtrace0
  # The tool links our layers statically: none of our packages, the
  # system's libdw and libelf.
  dep_has sframe-tools libdw1
  dep_has sframe-tools libelf1
  grep -q 'libsframepp' <<<"${deps_of[sframe-tools]:-}" && bad "sframe-tools depends on our libraries: ${deps_of[sframe-tools]}"
  grep -q 'libdw\|libelf' <<<"${deps_of[libsframepp-backtrace0]:-}" && bad "libsframepp-backtrace0 depends on libdw/libelf"
  grep -q 'libdw\|libelf' <<<"${deps_of[libsframepp-format0]:-}" && bad "libsframepp-format0 depends on libdw/libelf"
  # The tool runs from the extracted root.
  corpus=$shared/corpus/x86_64-v3-linked
  (cd "$corpus" && LD_LIBRARY_PATH=$(dirname "$(find "$work/root" -name libsframepp.so.0 | head -1)") \
    "$work/root/usr/bin/sframe" dump basic) | diff - "$corpus/basic.objdump.txt" >"$work/dump.diff" ||
    bad "extracted sframe dump differs from objdump: $(head -5 "$work/dump.diff")"
  echo "installed libraries (stripped, bytes):"
  find "$work/root" -name '*.so.*.*' -printf '  %f %s\n' | sort
  DEB_ROOT=1 bash "$here/consumers.sh" "$work/root/usr" shared "$work/consumers" "$shared" "$cxx" || bad "consumers [deb]"
  echo "deb: $fail failed"
  [ "$fail" -eq 0 ]
  ;;
*) echo "usage: deb.sh build SRC BUILD DEBS | check DEBS SHARED WORK CXX"; exit 2 ;;
esac
