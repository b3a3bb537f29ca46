#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the backtrace probe (probe.cpp) and checks its sframe::backtrace trace
# against independent truths: glibc backtrace()'s (libgcc's unwinder) from
# the caller of probe_f3 outward, addr2line (binutils) naming the frames
# probe_f3, probe_f2, probe_f1, main ... _start (addresses less the load
# bias glibc's dl_iterate_phdr gives), and the walk ending kOutermost.
# Modes:
#   static    PROBE is a static non-PIE executable (no PT_GNU_EH_FRAME): its
#             SFrame is generated from .eh_frame.
#   loadable  PROBE is a PIE without SFrame of its own code; a copy
#             retrofitted with `sframe gen --elf COPY --loadable` (with
#             --repair when the build gave it a partial PT_GNU_SFRAME) must
#             run, its section (in a new PT_LOAD, PT_GNU_SFRAME) must be the
#             one the walk uses, and
#             init must generate nothing for the executable: the section
#             covers every .eh_frame FDE (the backtrace report: "native",
#             0 extra functions).
# Usage: run.sh PROBE static | run.sh PROBE loadable SFRAME_BIN WORKDIR
set -uo pipefail
probe=$1 mode=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v addr2line >/dev/null || fail "addr2line (binutils) not found"
if [ "$mode" = loadable ]; then
  bin=$3 work=$4
  rm -rf "$work"; mkdir -p "$work"
  if readelf -lW "$probe" | grep -q GNU_SFRAME; then
    # gcc builds: the backtrace library's objects are assembled with
    # -Wa,--gsframe, so ld made a PT_GNU_SFRAME section covering them alone
    # (partial, SFrame v1); the v3 section does not fit its space and goes
    # to a new segment, PT_GNU_SFRAME retargeted.
    "$bin" gen "$probe" --elf "$work/probe" --repair --loadable || fail "gen --repair --loadable $probe"
  else
    "$bin" gen "$probe" --elf "$work/probe" --loadable || fail "gen --loadable $probe"
  fi
  readelf -lW "$work/probe" | grep -q GNU_SFRAME || fail "no PT_GNU_SFRAME in the retrofitted copy"
  probe=$work/probe
fi
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
bias=$(awk '$1=="bias"{print $2}' "$probe.stderr")
[ -n "$bias" ] || fail "the probe printed no load bias"
# Names of the return addresses (RA - 1: the call, not what follows it).
names=()
for ((i = 0; i < ${#ours[@]}; i++)); do
  a=$((ours[i] - bias - (i > 0 ? 1 : 0)))
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
  loadable)
    # Under ASan, backtrace() is libasan's interceptor, one frame more at
    # the top: the outer frames are compared.
    n=$((${#ours[@]} - 1))
    [ ${#theirs[@]} -ge ${#ours[@]} ] || fail "glibc backtrace() gave ${#theirs[@]} frames, ours ${#ours[@]}"
    [ "${ours[*]:1}" = "${theirs[*]: -$n}" ] || fail "from frame 1 on, ours: ${ours[*]:1}; glibc: ${theirs[*]: -$n}"
    # The executable's module line (its path resolved from /proc/self/exe).
    line=$(grep -F "module $(readlink -f "$probe"):" "$probe.stderr")
    [ -n "$line" ] || fail "no module line for $probe"
    case $line in
      *": native (own SFrame section covers every .eh_frame FDE) extra 0") ;;
      *) fail "the executable's section was not used alone: $line" ;;
    esac
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode: ${#ours[@]} frames, ${names[*]}"
