#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `nm -D --defined-only libsframepp.so` shows only the API: the C functions
# declared in include/sframe/sframe.h (no more, no fewer), each at version
# SFRAMEPP_0, and C++ symbols of namespace sframe from the public headers;
# no std:: instantiation, no internal namespace, no anonymous namespace.
# Usage: exports.sh LIB SRC
set -uo pipefail
lib=$1 src=$2
fail=0
bad() { fail=1; echo "FAIL $*"; }
syms=$(nm -D --defined-only "$lib" | awk '{print $3}') || { echo "FAIL nm $lib"; exit 1; }
# The truth for the C part: the header's declarations.
want=$(grep -o 'SFRAME_API [^(]*(' "$src/include/sframe/sframe.h" | grep -o 'sframe_[a-z_0-9]*($' | tr -d '(' | sort)
got=$(echo "$syms" | sed -n 's/^\(sframe_[a-z_0-9]*\)@@SFRAMEPP_0$/\1/p' | sort)
# libsframepp exports the codec, ELF, encoder and unwinder functions; the
# generation and backtrace ones live in libsframepp-cfi / -backtrace.
want=$(echo "$want" | grep -v '^sframe_cfi_\|^sframe_backtrace')
[ -n "$want" ] || bad "no SFRAME_API declarations found in sframe.h"
[ "$got" = "$want" ] || bad "C exports differ from sframe.h: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
others=$(echo "$syms" | grep -v '^sframe_' | c++filt)
while IFS= read -r s; do
  [ -z "$s" ] && continue
  [ "$s" = SFRAMEPP_0 ] && continue  # the version definition itself
  case "$s" in
    *@@SFRAMEPP_0) ;;
    *) bad "unversioned export: $s"; continue ;;
  esac
  n=${s%@@SFRAMEPP_0}
  case "$n" in
    sframe::bt::* | sframe::capi::* | sframe::tools::* | *"(anonymous namespace)"* | sframe::detail::*)
      bad "internal symbol exported: $n" ;;
    sframe::* | "typeinfo for sframe::"* | "typeinfo name for sframe::"* | "vtable for sframe::"*) ;;
    *) bad "non-API symbol exported: $n" ;;
  esac
done <<<"$others"
echo "exports: $(echo "$got" | wc -l) C functions, $(echo "$others" | grep -c .) C++ symbols"
exit $fail
