#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares `sframe stack -s -i --json PID` with `eu-stack -s -i -p PID`
taken on the same parked process: per thread, the frames as printed (one per
function, inlined functions included), each frame's PC, function name and
source position (file:line:column).

Usage: source_lines.py OURS.json EU.txt LABEL

eu-stack -i prints each inlined function as a frame of its own (same PC) and
names frames as DWARF does (it implies -d); our JSON nests them: a physical
frame carries "function" and its "inlined_into" list. Both are flattened here
into (pc, function, source) and compared position by position. Prints one
summary line and every difference (with its explanation when one is known);
exits 1 on a difference, or when the traces hold no inline frame or no
source line in libc (the premises: the test program's inline functions, and
libc6-dbg's debug file found by build ID)."""
import json
import re
import sys

ours_path, eu_path, label = sys.argv[1:4]


def src(d):
    if "file" not in d:
        return None
    s = d["file"]
    if "line" in d:
        s += f":{d['line']}"
        if "column" in d:
            s += f":{d['column']}"
    return s


with open(ours_path) as f:
    doc = json.load(f)
ours = {}
for t in doc["threads"]:
    rows = []
    for fr in t.get("frames", []):
        pc = int(fr["pc"], 16)
        rows.append((pc, fr.get("function", fr.get("symbol")), src(fr), False))
        for inl in fr.get("inlined_into", []):
            rows.append((pc, inl.get("function"), src(inl), True))
    ours[t["tid"]] = rows

eu, cur = {}, None
with open(eu_path) as f:
    for line in f:
        m = re.match(r"^TID (\d+):", line)
        if m:
            cur = int(m.group(1))
            eu[cur] = []
            continue
        m = re.match(r"^#(\d+)\s+0x([0-9a-f]+)\s*(\S+)?\s*$", line)
        if m and cur is not None:
            eu[cur].append([int(m.group(2), 16), m.group(3), None])
            continue
        m = re.match(r"^    (\S.*)$", line)
        if m and cur is not None and eu[cur]:
            eu[cur][-1][2] = m.group(1)

problems = []
st = dict(threads=0, same_threads=0, frames=0, total=0, names=0, lines=0, with_line=0, inline=0, libc_lines=0)
for tid in sorted(set(ours) | set(eu)):
    o, e = ours.get(tid), eu.get(tid)
    if o is None or e is None:
        problems.append(f"TID {tid}: only in {'eu-stack' if o is None else 'sframe'}")
        continue
    st["threads"] += 1
    st["total"] += max(len(o), len(e))
    same_thread = len(o) == len(e)
    for i, ((pc, name, s, inl), (epc, ename, es)) in enumerate(zip(o, e)):
        if pc != epc:
            problems.append(f"TID {tid} #{i}: PC sframe {pc:#x}, eu-stack {epc:#x}")
            same_thread = False
            continue
        st["frames"] += 1
        if name == ename:
            st["names"] += 1
        else:
            problems.append(f"TID {tid} #{i} {pc:#x}: function sframe {name}, eu-stack {ename}")
            same_thread = False
        if s == es:
            st["lines"] += 1
            if s and re.search(r":\d+", s):
                st["with_line"] += 1
        else:
            problems.append(f"TID {tid} #{i} {pc:#x} {ename}: source sframe {s}, eu-stack {es}")
            same_thread = False
        if inl:
            st["inline"] += 1
        if es and es.startswith("../sysdeps/"):
            st["libc_lines"] += 1
    if len(o) != len(e):
        problems.append(f"TID {tid}: {len(o)} frames in sframe, {len(e)} in eu-stack")
    st["same_threads"] += same_thread
if st["inline"] == 0:
    problems.append("premise: no inline frame (the test program's inline functions were not seen)")
if st["libc_lines"] == 0:
    problems.append("premise: no libc source line (libc6-dbg's debug file not found under /usr/lib/debug?)")

print(f"{label}: threads {st['threads']}, {st['same_threads']} identical to eu-stack -s -i; frames (inline "
      f"included) {st['frames']}/{st['total']} same PC, {st['names']} same function, {st['lines']} same source "
      f"({st['with_line']} with a line number); {st['inline']} inline caller frames; {st['libc_lines']} libc lines "
      f"from the debug file")
for p in problems:
    print("  DIFF " + p)
sys.exit(1 if problems else 0)
