#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The packages installed on this system: `apt-get install ./*.deb` (needs
# root), then a C99 consumer of sframe.h built with the system's pkg-config
# and compiler against them (it must print objdump's golden "Function
# Index"), and the installed `sframe dump` (objdump's golden dump); the
# packages are purged on exit, pass or fail.
# Usage: apt.sh DEBS SHARED WORK
set -uo pipefail
debs=$1 shared=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"; mkdir -p "$work"
fail=0
bad() { fail=$((fail+1)); echo "FAIL $*"; }
[ "$(id -u)" -eq 0 ] || { echo "FAIL: apt-get install needs root"; exit 1; }
mapfile -t pkgs < <(for d in "$debs"/*.deb; do dpkg-deb -f "$d" Package; done)
[ "${#pkgs[@]}" -ge 8 ] || { echo "FAIL: ${#pkgs[@]} packages in $debs"; exit 1; }
remove() { DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${pkgs[@]}" >"$work/remove.log" 2>&1; }
# A run killed before its cleanup left them: remove first.
grep -q "install ok installed" <<<"$(dpkg-query -W -f '${Status}\n' "${pkgs[@]}" 2>/dev/null)" && remove
trap 'remove || { echo "FAIL: apt-get purge (see $work/remove.log)"; exit 1; }' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$debs"/*.deb >"$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; echo "FAIL: apt-get install"; exit 1; }

corpus=$shared/corpus/x86_64-v3-linked
# shellcheck disable=SC2046
if gcc -std=c99 -Wall -Wextra -Werror -pedantic "$here/consumer.c" -o "$work/c_consumer" \
     $(pkg-config --cflags --libs sframepp) 2>"$work/c.log"; then
  grep -q '=> /\(usr/\)\?lib/\(x86_64-linux-gnu/\)\?libsframepp.so.0 ' <<<"$(ldd "$work/c_consumer")" || bad "C consumer does not load the installed libsframepp.so.0"
  diff <("$work/c_consumer" "$corpus/basic" 2>&1) <(sed -n '/Function Index :/,$p' "$corpus/basic.objdump.txt") >"$work/c.diff" ||
    bad "C consumer differs from objdump: $(head -5 "$work/c.diff")"
else
  bad "C consumer: $(head -c 600 "$work/c.log")"
fi
[ "$(command -v sframe)" = /usr/bin/sframe ] || bad "sframe is $(command -v sframe), want /usr/bin/sframe"
(cd "$corpus" && /usr/bin/sframe dump basic) | diff - "$corpus/basic.objdump.txt" >"$work/dump.diff" ||
  bad "installed sframe dump differs from objdump: $(head -5 "$work/dump.diff")"
echo "apt: $fail failed"
[ "$fail" -eq 0 ]
