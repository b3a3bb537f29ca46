#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A program linked against 0.1.0's libsframepp.so.0, which defined
# sframe_strerror and sframe_free, still runs now that they are defined in
# libsframepp-format.so.0 (CHANGELOG.md): libsframepp.so.0 links
# libsframepp-format.so.0, and the loader resolves a reference by name and
# version node (SFRAMEPP_0), from whichever loaded library defines it. The
# old library is stood in for by a stub of the same soname and version node
# that defines the two functions; the program is linked against the stub
# and then run against this build's libraries, with the stub out of the
# way. The truth: the words for SFRAME_OK (0) and SFRAME_E_NO_MEMORY (2),
# not the stub's.
# Usage: moved.sh LIBSFRAMEPP_SO_0 WORK
set -uo pipefail
lib=$1 work=$2
cc=${CC:-gcc}
rm -rf "$work"; mkdir -p "$work/old" "$work/bin"
cat >"$work/stub.c" <<'C'
const char *sframe_strerror(int status) { (void)status; return "stub"; }
int sframe_free(void *bytes) { (void)bytes; return 0; }
C
printf 'SFRAMEPP_0 { global: sframe_strerror; sframe_free; local: *; };\n' >"$work/stub.map"
"$cc" -shared -fPIC -o "$work/old/libsframepp.so.0" -Wl,-soname,libsframepp.so.0 \
  -Wl,--version-script="$work/stub.map" "$work/stub.c" || { echo "FAIL: stub library"; exit 1; }
cat >"$work/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
const char *sframe_strerror(int status);
int sframe_free(void *bytes);
int main(void) {
  printf("%s|%s|%d\n", sframe_strerror(0), sframe_strerror(2), sframe_free(malloc(8)));
  return 0;
}
C
"$cc" -o "$work/bin/prog" "$work/prog.c" "$work/old/libsframepp.so.0" || { echo "FAIL: link against the stub"; exit 1; }
readelf -V "$work/bin/prog" | grep -q 'Name: SFRAMEPP_0' || { echo "FAIL: the program has no reference at SFRAMEPP_0"; exit 1; }
grep -q 'SFRAME_OK = 0,' "$(dirname "$0")/../../include/sframe/format/sframe_format.h" &&
  grep -q 'SFRAME_E_NO_MEMORY = 2,' "$(dirname "$0")/../../include/sframe/format/sframe_format.h" ||
  { echo "FAIL: SFRAME_OK or SFRAME_E_NO_MEMORY moved in sframe/format/sframe_format.h"; exit 1; }
want="success|out of memory"
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$work/bin/prog" 2>&1)
if [ "$out" = "$want|0" ]; then
  echo "moved: a program linked against the old libsframepp.so.0 resolves sframe_strerror and sframe_free: $out"
else
  echo "FAIL: printed '$out', want '$want|0'"; exit 1
fi
