#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A program linked with the in-process backtrace library depends on libc and
# the C++ runtime alone: ldd (the dynamic loader's own answer) lists no
# libdw, libelf, libz, liblzma or libbz2.
# Usage: links_no_libdw.sh PROGRAM
set -uo pipefail
out=$(ldd "$1") || { echo "FAIL: ldd $1"; exit 1; }
echo "$out"
if grep -E '\blib(dw|elf|z|lzma|bz2)[.-]' <<<"$out"; then
  echo "FAIL: $1 depends on the libraries above"
  exit 1
fi
echo PASS
