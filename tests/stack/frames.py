#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks `sframe stack --json` traces against independent truth.

  frames.py same OURS.json EU.txt TID LABEL
      the thread's frame PCs equal eu-stack's, frame for frame
  frames.py first OURS.json EU.txt TID NAME LABEL
      the thread's frame 0 PC equals eu-stack's, whose frame 0 is in a
      function named NAME (after stripping leading underscores)
  frames.py exec OURS.json MAPS LABEL
      every frame PC of every thread lies in an executable mapping of MAPS
      (a copy of /proc/PID/maps)

Prints one line; exits 1 on a difference."""
import json
import re
import sys


def ours(path):
    with open(path) as f:
        d = json.load(f)
    return {t["tid"]: [int(fr["pc"], 16) for fr in t.get("frames", [])] for t in d["threads"]}


def eu(path):
    out, cur = {}, None
    names = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^TID (\d+):", line)
            if m:
                cur = int(m.group(1))
                out[cur], names[cur] = [], []
                continue
            m = re.match(r"^#(\d+)\s+0x([0-9a-f]+)\s*(\S*)", line)
            if m and cur is not None:
                out[cur].append(int(m.group(2), 16))
                names[cur].append(m.group(3))
    return out, names


def hexes(pcs):
    return " ".join(hex(p) for p in pcs)


mode = sys.argv[1]
if mode == "same":
    _, o, e, tid, label = sys.argv[1:6]
    a, (b, _n) = ours(o).get(int(tid)), eu(e)
    b = b.get(int(tid))
    if a is None or b is None:
        print(f"FAIL {label}: thread {tid} missing (sframe: {a is not None}, eu-stack: {b is not None})")
        sys.exit(1)
    if a != b:
        print(f"FAIL {label}: {len(a)} frames, eu-stack {len(b)}\n  sframe:   {hexes(a)}\n  eu-stack: {hexes(b)}")
        sys.exit(1)
    print(f"{label}: {len(a)} frames, equal to eu-stack's")
elif mode == "first":
    _, o, e, tid, name, label = sys.argv[1:7]
    a = ours(o).get(int(tid))
    b, n = eu(e)
    b, n = b.get(int(tid)), n.get(int(tid))
    if not a or not b:
        print(f"FAIL {label}: thread {tid} missing or empty (sframe: {a}, eu-stack: {b})")
        sys.exit(1)
    if n[0].lstrip("_") != name:
        print(f"FAIL {label}: eu-stack's frame 0 is {n[0]!r}, not {name}: the thread is not where the test put it")
        sys.exit(1)
    if a[0] != b[0]:
        print(f"FAIL {label}: frame 0 {hex(a[0])}, eu-stack {hex(b[0])}")
        sys.exit(1)
    print(f"{label}: frame 0 {hex(a[0])} in {name} as eu-stack; {len(a)} frames: {hexes(a)}")
elif mode == "exec":
    _, o, maps, label = sys.argv[1:5]
    ranges = []
    with open(maps) as f:
        for line in f:
            f2 = line.split()
            if len(f2) >= 2 and "x" in f2[1]:
                lo, hi = (int(x, 16) for x in f2[0].split("-"))
                ranges.append((lo, hi))
    bad, n = [], 0
    for tid, pcs in ours(o).items():
        for i, pc in enumerate(pcs):
            n += 1
            if not any(lo <= pc < hi for lo, hi in ranges):
                bad.append(f"thread {tid} frame #{i} {hex(pc)}")
    if not n:
        print(f"FAIL {label}: no frames")
        sys.exit(1)
    if bad:
        print(f"FAIL {label}: frames outside every executable mapping: " + ", ".join(bad))
        sys.exit(1)
    print(f"{label}: {n} frames, all in executable mappings")
else:
    sys.exit(f"unknown mode {mode}")
