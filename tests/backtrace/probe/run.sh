#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the backtrace probe (probe.cpp) built as a static non-PIE executable
# (no PT_GNU_EH_FRAME) and checks its sframe::backtrace trace against
# independent truths: glibc backtrace()'s (libgcc's unwinder, linked in) from
# the caller of probe_f3 outward, addr2line (binutils) naming the frames
# probe_f3, probe_f2, probe_f1, main ... _start, and the walk ending
# kOutermost. Non-PIE: its addresses are link-time addresses.
# Usage: run.sh PROBE static
set -uo pipefail
probe=$1 mode=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v addr2line >/dev/null || fail "addr2line (binutils) not found"
out=$("$probe" 2>"$probe.stderr") || { cat "$probe.stderr"; fail "$probe exited with status $?"; }
cat "$probe.stderr"
echo "$out"
read -r -a ours <<<"$(grep '^sframepp:' <<<"$out")"
read -r -a theirs <<<"$(grep '^glibc:' <<<"$out")"
stop=${ours[1]}
ours=("${ours[@]:3}")
theirs=("${theirs[@]:2}")
[ "$stop" = kOutermost ] || fail "trace stopped with $stop, not kOutermost"
[ ${#ours[@]} -ge 5 ] || fail "only ${#ours[@]} frames"
# Names of the return addresses (RA - 1: the call, not what follows it).
names=()
for ((i = 0; i < ${#ours[@]}; i++)); do
  a=$((ours[i] - (i > 0 ? 1 : 0)))
  names+=("$(addr2line -f -e "$probe" "$(printf '0x%x' "$a")" | head -1)")
done
echo "names: ${names[*]}"
[ "${names[0]}" = probe_f3 ] && [ "${names[1]}" = probe_f2 ] && [ "${names[2]}" = probe_f1 ] && [ "${names[3]}" = main ] ||
  fail "frames 0-3 are ${names[*]:0:4}, not probe_f3 probe_f2 probe_f1 main"
[ "${names[-1]}" = _start ] || fail "the outermost frame is ${names[-1]}, not _start"
case $mode in
  static)
    [ ${#theirs[@]} -ge 2 ] || fail "glibc backtrace() gave ${#theirs[@]} frames"
    [ "${ours[*]:1}" = "${theirs[*]:1}" ] || fail "from frame 1 on, ours: ${ours[*]:1}; glibc: ${theirs[*]:1}"
    grep -q 'generated' "$probe.stderr" || fail "the executable's SFrame was not generated"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode: ${#ours[@]} frames, ${names[*]}"
