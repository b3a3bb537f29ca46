#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The C ABI guard of the libraries that implement sframe.h's functions:
# libsframepp-format.so.0 (the shared helpers sframe_strerror and
# sframe_free), libsframepp.so.0, libsframepp-cfi.so.0 and
# libsframepp-backtrace.so.0 (libabigail, Debian's abigail-tools).
#   run.sh check  LIB SRC WORK   abidw the built LIB and abidiff it against
#                                SRC/abi/SONAME.abi: any change of the C
#                                API (a sframe_* function removed, added or
#                                retyped, a struct of sframe.h changed, the
#                                soname or symbol version) fails.
#   run.sh update LIB SRC        rewrites the baseline from LIB (after an
#                                intended C API change: commit the new file
#                                with the change, and say why in the message).
# Only the C API is compared (abi/c-api.suppr): the C++ API promises source
# compatibility only, and the handles are opaque.
set -uo pipefail
mode=$1 lib=$2 src=$(cd "$3" && pwd) work=${4:-}
suppr=$src/abi/c-api.suppr
for t in abidw abidiff readelf; do
  command -v "$t" >/dev/null || { echo "FAIL: $t not found (scripts/install-deps installs abigail-tools)"; exit 1; }
done
dump() { # LIB -> stdout: the C API's ABI as abixml
  # The C API's types are those of the C headers (sframe.h and the
  # library headers it includes).
  local hf=() h
  for h in "$src"/include/sframe/sframe.h "$src"/include/sframe/*/*.h; do hf+=(--header-file "$h"); done
  abidw --exported-interfaces-only "${hf[@]}" --drop-private-types \
        --suppressions "$suppr" --no-corpus-path --no-show-locs --type-id-style hash "$1"
}
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
# Per library: the fewest sframe_* functions its baseline must hold (a
# baseline that lost them would compare nothing), and a struct of sframe.h
# its functions use, whose layout abidw must see (none for the helpers,
# which take and return plain C types only).
case $soname in
  libsframepp-format.so.0) min=2 struct= ;;
  libsframepp.so.0) min=18 struct=sframe_fde ;;
  libsframepp-cfi.so.0) min=1 struct=sframe_generate_stats ;;
  libsframepp-backtrace.so.0) min=5 struct=sframe_backtrace_result ;;
  *) echo "FAIL: soname is '$soname', want libsframepp-format.so.0, libsframepp.so.0, libsframepp-cfi.so.0 or libsframepp-backtrace.so.0"; exit 1 ;;
esac
baseline=$src/abi/$soname.abi
case $mode in
  update)
    dump "$lib" >"$baseline.tmp" && mv "$baseline.tmp" "$baseline" && echo "wrote $baseline" ;;
  check)
    rm -rf "$work"; mkdir -p "$work"
    [ -s "$baseline" ] || { echo "FAIL: no baseline $baseline"; exit 1; }
    dump "$lib" >"$work/current.abi" || { echo "FAIL: abidw $lib"; exit 1; }
    # abidw keeps the layouts of the types sframe.h defines only when the
    # header path matches the library's DWARF (a build of this tree); else
    # every struct would be compared as an opaque declaration.
    [ -z "$struct" ] || grep -q "class-decl name='$struct' size-in-bits" "$work/current.abi" ||
      { echo "FAIL: abidw did not see sframe.h's struct layouts in $lib (built from another tree than $src?)"; exit 1; }
    # Symbols of the C API in the baseline: a baseline that lost them would
    # compare nothing.
    n=$(grep -c "<elf-symbol name='sframe_" "$baseline")
    [ "$n" -ge "$min" ] || { echo "FAIL: baseline lists $n sframe_* symbols"; exit 1; }
    if abidiff --suppressions "$suppr" "$baseline" "$work/current.abi" >"$work/abidiff.txt" 2>&1; then
      echo "abi: $soname C ABI unchanged ($n functions)"
    else
      cat "$work/abidiff.txt"
      echo "FAIL: the C ABI of $soname changed (abidiff above)."
      echo "If intended (only additions keep .so.0 compatible), update the baseline:"
      echo "  bash tests/abi/run.sh update $lib $src"
      exit 1
    fi ;;
  *) echo "usage: run.sh check|update LIB SRC [WORK]"; exit 2 ;;
esac
