#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The install test, in both library kinds one after the other:
#   1. `cmake --install` of this build (its BUILD_SHARED_LIBS) into a
#      scratch prefix, and the consumers of consumers.sh against it;
#   2. a project that carries sframepp by add_subdirectory (subdir.cmake.in),
#      in the other kind (static by default, as a subproject gets it: the
#      libraries alone, no tool, tests or their dependencies), built and
#      run; then its `cmake --install` into a second prefix, and the
#      consumers of consumers.sh against that.
# Usage: run.sh SOURCE_DIR BUILD_DIR SHARED_DIR WORKDIR CXX [CXXFLAGS]
set -uo pipefail
src=$1 build=$2 shared=$3 work=$4 cxx=$5 cxxflags=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-gcc}
rm -rf "$work"; mkdir -p "$work"
fail=0
bad() { fail=$((fail+1)); echo "FAIL $*"; }

if grep -q '^BUILD_SHARED_LIBS:BOOL=ON' "$build/CMakeCache.txt"; then kind=shared other=static
else kind=static other=shared; fi

# 1. This build, installed.
t0=$SECONDS
cmake --install "$build" --prefix "$work/prefix-$kind" >"$work/install.log" 2>&1 ||
  { bad "cmake --install $build: $(tail -5 "$work/install.log")"; exit 1; }
[ -x "$work/prefix-$kind/bin/sframe" ] || bad "not installed: bin/sframe"
# The tool carries our layers (a static link, for its start-up time): its
# dynamic section names none of our libraries, in either kind.
readelf -d "$work/prefix-$kind/bin/sframe" | grep -q 'NEEDED.*libsframepp' &&
  bad "installed bin/sframe needs a libsframepp: $(readelf -d "$work/prefix-$kind/bin/sframe" | grep NEEDED | tr -s ' ')"
# The installed headers are the source tree's include/sframe, file for file:
# the library folders and the forwarding headers at the old paths (each
# compiles on its own: headers_standalone_* in tests/CMakeLists.txt).
d=$(diff <(cd "$src/include" && find sframe -type f | sort) <(cd "$work/prefix-$kind/include" && find sframe -type f | sort))
[ -z "$d" ] || bad "installed headers differ from include/ (< source only, > installed only): $(tr '\n' ' ' <<<"$d")"
bash "$here/consumers.sh" "$work/prefix-$kind" "$kind" "$work/consumers-$kind" "$shared" "$cxx" "$cxxflags" || bad "consumers [$kind]"
echo "install [$kind]: $((SECONDS - t0)) s"

# 2. add_subdirectory, the other kind.
t0=$SECONDS
sub=$work/subdir
mkdir -p "$sub"
cp "$here/subdir.cmake.in" "$sub/CMakeLists.txt"
opts=()
# A subproject's default is static: only the shared kind is asked for.
[ "$other" = shared ] && opts+=(-DBUILD_SHARED_LIBS=ON)
if cmake -S "$sub" -B "$sub/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSFRAMEPP_SOURCE_DIR="$src" "${opts[@]}" \
     -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_C_FLAGS="$cxxflags" \
     >"$sub/build.log" 2>&1 && cmake --build "$sub/build" -j 2 >>"$sub/build.log" 2>&1; then
  # The tool's and the tests' dependencies were not looked up.
  for dep in fmt CLI11 nlohmann_json GTest benchmark; do
    grep -q "^${dep}_DIR:" "$sub/build/CMakeCache.txt" && bad "add_subdirectory looked up $dep"
  done
  golden=$shared/corpus/x86_64-v3-linked/basic.objdump.txt
  want=$(printf '%s\n%s' "$(grep -m1 'Num FDEs' "$golden" | sed 's/^ *//')" "$(grep -m1 'func idx \[2\]' "$golden" | sed 's/^ *//')")
  pc=$(( $(grep -m1 'func idx \[2\]' "$golden" | sed 's/.*pc = \(0x[0-9a-f]*\).*/\1/') + 1 ))
  out=$("$sub/build/sub_elf" "$shared/corpus/x86_64-v3-linked/basic" "$pc" 2>&1)
  [ "$out" = "$want" ] || bad "add_subdirectory elf consumer printed: $out; want: $want"
  out=$("$sub/build/sub_backtrace" 2>&1) && [[ $out == frames* ]] || bad "add_subdirectory backtrace consumer: $out"
  if [ "$other" = static ]; then
    grep -q libsframepp <<<"$(ldd "$sub/build/sub_elf")" && bad "add_subdirectory (static) consumer loads a libsframepp"
  fi
  if cmake --install "$sub/build" --prefix "$work/prefix-$other" >"$work/install-$other.log" 2>&1; then
    bash "$here/consumers.sh" "$work/prefix-$other" "$other" "$work/consumers-$other" "$shared" "$cxx" "$cxxflags" ||
      bad "consumers [$other]"
  else
    bad "cmake --install $sub/build: $(tail -5 "$work/install-$other.log")"
  fi
else
  bad "add_subdirectory project: $(tail -20 "$sub/build.log")"
fi
echo "install [$other, add_subdirectory]: $((SECONDS - t0)) s"

echo "install: $fail failed"
[ "$fail" -eq 0 ]
