#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe stack PID` and the program's own sframe::backtrace() must give the
# same return addresses, from the parked function's caller outward, on the
# main thread and on an unregistered thread (bt_parked.cpp).
# Usage: same_as_backtrace.sh SFRAME_BIN BT_PARKED_BIN WORKDIR
set -uo pipefail
bin=$1 prog=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
"$prog" "$work/own.txt" & pid=$!
trap 'kill -9 $pid 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q ready "$work/own.txt" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$work/own.txt" || { echo "FAIL: the program did not park"; exit 1; }
"$bin" stack "$pid" > "$work/stack.txt" 2> "$work/stack.err" || { echo "FAIL: sframe stack: $(cat "$work/stack.err")"; exit 1; }
python3 - "$work/own.txt" "$work/stack.txt" <<'PY'
import re, sys
own, cur = {}, None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("T "): cur = int(line[2:]); own[cur] = []
    elif line.startswith("0x"): own[cur].append(int(line, 16))
stack, cur = {}, None
for line in open(sys.argv[2]):
    m = re.match(r"TID (\d+):", line)
    if m: cur = int(m.group(1)); stack[cur] = []; continue
    m = re.match(r"#\d+\s+0x([0-9a-f]+)", line)
    if m and cur is not None: stack[cur].append(int(m.group(1), 16))
fails = 0
for tid, ras in own.items():
    got = stack.get(tid, [])
    if not ras or ras[0] not in got:
        print(f"FAIL thread {tid}: the parked function's caller {ras[0]:#x} is not among sframe stack's frames"
              f" {[hex(x) for x in got]}"); fails += 1; continue
    tail = got[got.index(ras[0]):]
    if tail != ras:
        print(f"FAIL thread {tid}:\n  backtrace(): {[hex(x) for x in ras]}\n  sframe stack: {[hex(x) for x in tail]}")
        fails += 1
    else:
        print(f"ok thread {tid}: {len(ras)} return addresses equal")
print(f"{len(own) - fails} passed, {fails} failed")
sys.exit(1 if fails or len(own) != 2 else 0)
PY
