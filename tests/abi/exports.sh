#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `nm -D --defined-only LIB` shows only the API of one of sframepp's shared
# libraries: the C functions of include/sframe/sframe.h that the library
# implements (no more, no fewer), and C++ symbols of namespace sframe from
# the public headers; every export at version SFRAMEPP_0; no std::
# instantiation, no internal namespace, no anonymous namespace.
# Which sframe.h functions each library implements:
#   libsframepp-format   the helpers every feature's C functions share:
#                        sframe_strerror, sframe_free
#   libsframepp          every one but those, sframe_cfi_* and sframe_backtrace*
#   libsframepp-cfi      sframe_cfi_*
#   libsframepp-backtrace sframe_backtrace*, and the assembly entry of
#                        backtrace.hpp's inline backtrace() (sframepp_backtrace_here)
#   -unwind, -process: none
# Usage: exports.sh LIB SRC
set -uo pipefail
lib=$1 src=$2
fail=0
bad() { fail=1; echo "FAIL $*"; }
syms=$(nm -D --defined-only "$lib" | awk '{print $3}') || { echo "FAIL nm $lib"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
# The truth for the C part: the header's declarations.
decl=$(grep -o 'SFRAME_API [^(]*(' "$src/include/sframe/sframe.h" | grep -o 'sframe_[a-z_0-9]*($' | tr -d '(' | sort)
[ -n "$decl" ] || bad "no SFRAME_API declarations found in sframe.h"
extra_c=""
common='^sframe_strerror$\|^sframe_free$'
case $soname in
  libsframepp-format.so.0) want=$(echo "$decl" | grep "$common") ;;
  libsframepp.so.0) want=$(echo "$decl" | grep -v '^sframe_cfi_\|^sframe_backtrace' | grep -v "$common") ;;
  libsframepp-cfi.so.0) want=$(echo "$decl" | grep '^sframe_cfi_') ;;
  libsframepp-backtrace.so.0) want=$(echo "$decl" | grep '^sframe_backtrace'); extra_c=sframepp_backtrace_here ;;
  libsframepp-unwind.so.0 | libsframepp-process.so.0) want="" ;;
  *) echo "FAIL: unknown library soname '$soname'"; exit 1 ;;
esac
got=$(echo "$syms" | sed -n 's/^\(sframe_[a-z_0-9]*\)@@SFRAMEPP_0$/\1/p' | sort)
[ "$got" = "$want" ] || bad "$soname: C exports differ from sframe.h: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
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
