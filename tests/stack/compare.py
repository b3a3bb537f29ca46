#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares `sframe stack --json PID` with `eu-stack -p PID` and gdb's
`thread apply all bt` taken on the same stopped-in-place process.

Usage: compare.py OURS.json EU.txt GDB.txt LABEL [--expect-chains] [--exact-names]
       compare.py OURS.json - - LABEL --expect-chains   (chains only)

Frames are matched by address (both other unwinders print frame 0's PC and
return addresses after it, as sframe does). Names are compared after removing
symbol versions and glibc's internal alias prefixes; names of the test
program's own functions must match exactly. gdb adds frames from debug info
that no CFI-based unwinder produces (inlined functions: same PC as the frame
before; tail-call frames: PCs that are nowhere in the other traces), and
prints "<signal handler called>" for the signal trampoline; those are
accounted for, not compared. Prints one summary line and the differences;
exits 1 on a difference."""
import json
import re
import sys

ours_path, eu_path, gdb_path, label = sys.argv[1:5]
expect_chains = "--expect-chains" in sys.argv
# Names must equal eu-stack's verbatim (sframe's NamingPolicy::kEuStack
# chooses among aliases as libdwfl does), not only after normalisation.
exact_names = "--exact-names" in sys.argv

OWN = re.compile(r"^(f[123]|h[123]|k1|q[12]|s[12]|m[12]|main|run_\w+|lib_g[123])$")
# The chains the test program parks its threads in (innermost first), ending
# where every thread must reach.
CHAINS = {
    "t-pause": ["f3", "f2", "f1", "run_pause", "start_thread"],
    "t-futex": ["h3", "h2", "h1", "run_futex", "start_thread"],
    "t-lib": ["lib_g3", "lib_g2", "lib_g1", "k1", "run_lib", "start_thread"],
    "t-signal": ["s2", "s1", "__restore_rt", "q2", "q1", "run_signal", "start_thread"],
    "main": ["m2", "m1", "main"],
}


def norm(name):
    if name is None:
        return None
    name = name.split("@")[0]
    changed = True
    while changed:
        changed = False
        for p in ("__GI_", "__libc_", "__"):
            if name.startswith(p) and len(name) > len(p):
                name = name[len(p):]
                changed = True
    return name


with open(ours_path) as f:
    ours = json.load(f)
ours_threads = {}
ours_names = {}
for t in ours["threads"]:
    if "error" in t:
        continue
    ours_threads[t["tid"]] = [(int(fr["pc"], 16), fr.get("symbol")) for fr in t["frames"]]
    ours_names[t["tid"]] = t["name"]

only_chains = eu_path == "-"
eu_threads = {}
cur = None
for line in ([] if only_chains else open(eu_path)):
    m = re.match(r"^TID (\d+):", line)
    if m:
        cur = int(m.group(1))
        eu_threads[cur] = []
        continue
    m = re.match(r"^#(\d+)\s+0x([0-9a-f]+)\s*(\S+)?", line)
    if m and cur is not None:
        eu_threads[cur].append((int(m.group(2), 16), m.group(3)))

gdb_threads = {}
cur = None
for line in ([] if only_chains else open(gdb_path)):
    m = re.match(r"^Thread \d+ \(.*\(LWP (\d+)\)", line)
    if m:
        cur = int(m.group(1))
        gdb_threads[cur] = []
        continue
    if cur is None:
        continue
    if re.match(r"^#\d+\s+<signal handler called>", line):
        gdb_threads[cur].append((None, "<signal>"))
        continue
    m = re.match(r"^#\d+\s+0x([0-9a-f]+) in (\S+)", line)
    if m:
        gdb_threads[cur].append((int(m.group(1), 16), m.group(2)))

problems = []
st = dict(threads=0, eu_threads=0, eu_frames=0, eu_total=0, eu_names=0, eu_exact=0, gdb_threads=0, gdb_frames=0,
          gdb_total=0, gdb_names=0, gdb_extra=0, chains=0)
for tid, frames in sorted(ours_threads.items()):
    st["threads"] += 1
    pcs = [p for p, _ in frames]
    # eu-stack: the same frames, in the same order, to the end.
    eu = eu_threads.get(tid)
    if only_chains:
        pass
    elif eu is None:
        problems.append(f"TID {tid}: not in eu-stack output")
    else:
        same = sum(1 for a, b in zip(frames, eu) if a[0] == b[0])
        st["eu_frames"] += same
        st["eu_total"] += max(len(eu), len(frames))
        if same == len(eu) == len(frames):
            st["eu_threads"] += 1
        else:
            problems.append(f"TID {tid}: eu-stack {[hex(p) for p, _ in eu]} vs sframe {[hex(p) for p in pcs]}")
        for (p, n), (q, en) in zip(frames, eu):
            if p != q:
                continue
            if n == en:
                st["eu_exact"] += 1
            elif exact_names:
                problems.append(f"TID {tid}: at {p:#x} eu-stack says {en}, sframe says {n} (--exact-names)")
            if norm(n) == norm(en):
                st["eu_names"] += 1
            elif (n and OWN.match(n)) or (en and OWN.match(en)):
                problems.append(f"TID {tid}: at {p:#x} eu-stack says {en}, sframe says {n}")
    # gdb: drop inlined frames (PC repeated) and tail-call frames (a PC in
    # no other trace); the signal line stands for our trampoline frame.
    g = gdb_threads.get(tid)
    if g is None and not only_chains:
        problems.append(f"TID {tid}: not in gdb output")
        continue
    kept = []
    g = g or []
    for i, (p, n) in enumerate(g):
        if p is not None and kept and kept[-1][0] == p:
            # Inlined callee and its caller share the PC: the caller is the
            # function whose symbol covers it.
            st["gdb_extra"] += 1
            kept[-1] = (p, n)
            continue
        if p is not None and p not in pcs:
            st["gdb_extra"] += 1
            continue
        kept.append((p, n))
    # Frames dropped as tail calls must stay the exception: gdb's innermost
    # frame and most of the others must be found in ours.
    dropped = len(g) - len(kept)
    if g and (not kept or kept[0][0] not in (None, pcs[0]) or dropped > len(kept)):
        problems.append(f"TID {tid}: gdb's frames {[hex(p) if p else '<signal>' for p, _ in g]} "
                        f"are mostly not in sframe's {[hex(p) for p in pcs]}")
    st["gdb_total"] += len(kept)
    same = 0
    for (p, n), (q, gn) in zip(frames, kept):
        if q is None and n == "__restore_rt":
            same += 1
            st["gdb_names"] += 1
            continue
        if p != q:
            continue
        same += 1
        if norm(n) == norm(gn):
            st["gdb_names"] += 1
        elif (n and OWN.match(n)) or (gn and OWN.match(gn)):
            problems.append(f"TID {tid}: at {p:#x} gdb says {gn}, sframe says {n}")
    st["gdb_frames"] += same
    # gdb stops at main (backtrace past-main off): compare down to its end.
    if same == len(kept) and len(frames) >= len(kept):
        st["gdb_threads"] += 1
    elif not only_chains:
        problems.append(f"TID {tid}: gdb {[hex(p) if p else '<signal>' for p, _ in kept]} vs sframe {[hex(p) for p in pcs]}")
    if expect_chains:
        name = ours_names[tid] if tid != ours["pid"] else "main"
        want = CHAINS.get(name)
        names = [n for _, n in frames]
        if want is None:
            problems.append(f"TID {tid}: unexpected thread {name}")
        else:
            # The chain must appear in order; only libc frames (raise, ...)
            # may sit between its links.
            own = [n for n in names if n in want]
            if own == want:
                st["chains"] += 1
            else:
                problems.append(f"TID {tid} ({name}): chain {own}, want {want}")

if only_chains:
    print(f"{label}: threads {st['threads']}; chains {st['chains']}/{st['threads']}")
else:
    print(f"{label}: threads {st['threads']}; vs eu-stack: {st['eu_threads']}/{st['threads']} threads identical, "
          f"{st['eu_frames']}/{st['eu_total']} frames same PC, {st['eu_names']} same name ({st['eu_exact']} verbatim); "
          f"vs gdb: {st['gdb_threads']}/{st['threads']} threads identical to its end, {st['gdb_frames']}/{st['gdb_total']} "
          f"frames same PC, {st['gdb_names']} same name ({st['gdb_extra']} gdb-only inline/tail-call frames)"
        + (f"; chains {st['chains']}/{st['threads']}" if expect_chains else ""))
for p in problems:
    print("  DIFF " + p)
sys.exit(1 if problems else 0)
