#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `nm -D --defined-only LIB` shows only the API of one of sframepp's shared
# libraries: the C functions its own C header declares (no more, no fewer), and C++ symbols of namespace sframe from
# the public headers; every export at version SFRAMEPP_0; no std::
# instantiation, no internal namespace, no anonymous namespace.
# Each library's C header (sframe.h includes them all):
#   libsframepp-format   format/sframe_format.h: the helpers every feature's
#                        C functions share (sframe_strerror, sframe_free)
#   libsframepp          elf/sframe_elf.h
#   libsframepp-cfi      cfi/sframe_cfi.h
#   libsframepp-backtrace backtrace/sframe_backtrace.h, and the assembly entry
#                        of backtrace.hpp's inline backtrace() (sframepp_backtrace_here)
#   -unwind, -process: none (unwind/sframe_unwind.h declares constants only)
# Usage: exports.sh LIB SRC
set -uo pipefail
lib=$1 src=$2
fail=0
bad() { fail=1; echo "FAIL $*"; }
syms=$(nm -D --defined-only "$lib" | awk '{print $3}') || { echo "FAIL nm $lib"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
# The truth for the C part: the declarations of the library's C header.
decls() { # HEADER...: the sframe_* functions declared SFRAME_API, sorted
  cat "$@" | grep -o 'SFRAME_API [^(]*(' | grep -o 'sframe_[a-z_0-9]*($' | tr -d '(' | sort
}
inc=$src/include/sframe
[ -n "$(decls "$inc"/*/*.h)" ] || bad "no SFRAME_API declarations found in $inc/*/*.h"
# Every declaration lies in a library's C header (none elsewhere).
[ "$(decls "$inc"/*/*.h)" = "$(decls $(find "$inc" -name '*.h'))" ] || bad "SFRAME_API declarations outside $inc/LIBRARY/*.h"
extra_c=""
case $soname in
  libsframepp-format.so.0) want=$(decls "$inc/format/sframe_format.h") ;;
  libsframepp.so.0) want=$(decls "$inc/elf/sframe_elf.h") ;;
  libsframepp-cfi.so.0) want=$(decls "$inc/cfi/sframe_cfi.h") ;;
  libsframepp-backtrace.so.0) want=$(decls "$inc/backtrace/sframe_backtrace.h"); extra_c=sframepp_backtrace_here ;;
  libsframepp-unwind.so.0) want=$(decls "$inc/unwind/sframe_unwind.h") ;;
  libsframepp-process.so.0) want="" ;;
  *) echo "FAIL: unknown library soname '$soname'"; exit 1 ;;
esac
got=$(echo "$syms" | sed -n 's/^\(sframe_[a-z_0-9]*\)@@SFRAMEPP_0$/\1/p' | sort)
[ "$got" = "$want" ] || bad "$soname: C exports differ from its C header: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
# Every sframe_* export versioned (an unversioned one would not show in $got).
for s in $(echo "$syms" | grep '^sframe_' | grep -v '@@SFRAMEPP_0$'); do bad "$soname: unversioned C export: $s"; done
others=$(echo "$syms" | grep -v '^sframe_' | c++filt)
while IFS= read -r s; do
  [ -z "$s" ] && continue
  [ "$s" = SFRAMEPP_0 ] && continue  # the version definition itself
  case "$s" in
    *@@SFRAMEPP_0) ;;
    *) bad "$soname: unversioned export: $s"; continue ;;
  esac
  n=${s%@@SFRAMEPP_0}
  [ -n "$extra_c" ] && [ "$n" = "$extra_c" ] && continue
  case "$n" in
    sframe::bt::* | sframe::capi::* | sframe::tools::* | *"(anonymous namespace)"*)
      bad "$soname: internal symbol exported: $n" ;;
    sframe::detail::*)
      # Called by the public headers' templates; only the unwind core has them.
      [ "$soname" = libsframepp-unwind.so.0 ] || bad "$soname: internal symbol exported: $n" ;;
    sframe::* | "typeinfo for sframe::"* | "typeinfo name for sframe::"* | "vtable for sframe::"* | \
      "TLS init function for sframe::"* | "TLS wrapper function for sframe::"*) ;;
    *) bad "$soname: non-API symbol exported: $n" ;;
  esac
done <<<"$others"
echo "exports: $soname: $(echo "$got" | grep -c .) C functions, $(echo "$others" | grep -c .) other symbols"
exit $fail
