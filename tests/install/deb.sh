#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages of a shared build (cmake/package.cmake).
#   deb.sh build BUILD_DIR DEBS        `cpack -G DEB` into DEBS (a fixture)
#   deb.sh check DEBS SHARED WORK CXX  the package set, names and Depends
#       (Debian policy: one runtime package per shared library, named from
#       its soname; dpkg-shlibdeps's system dependencies); then every
#       package extracted with `dpkg-deb -x` into a scratch root and the
#       consumers of consumers.sh built against its usr/ and run; prints the
#       installed size of each library.
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
  build=$2 debs=$3
  rm -rf "$debs"; mkdir -p "$debs"
  t0=$SECONDS
  (cd "$debs" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$debs/cpack" >"$debs/cpack.log" 2>&1) ||
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
  bash "$here/consumers.sh" "$work/root/usr" shared "$work/consumers" "$shared" "$cxx" || bad "consumers [deb]"
  echo "deb: $fail failed"
  [ "$fail" -eq 0 ]
  ;;
*) echo "usage: deb.sh build BUILD DEBS | check DEBS SHARED WORK CXX"; exit 2 ;;
esac
