#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks of the profile writers against tools that are not ours
(tests/perf/profile.sh):

  profile_check.py pprof FOLDED TRACES RAW MMAPS
    `go tool pprof -traces` (TRACES) lists the stacks and counts of
    `sframe perf script --folded` (FOLDED), each written as stackcollapse
    writes it; the mappings `go tool pprof -raw` (RAW) lists are MMAP2
    events of the recording (MMAPS: perf script --show-mmap-events), each
    with the build-id `readelf -n` reads from its file.
"""
import collections
import os
import re
import subprocess
import sys

SEPARATOR = "-----------+-------------------------------------------------------"


def read_folded(path):
    stacks = collections.Counter()
    for line in open(path, encoding="utf-8", errors="surrogateescape"):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, n = line.rpartition(" ")
        stacks[stack] += int(n)
    return stacks


def traces_as_folded(path):
    """pprof's printTraces: per sample, its labels ("%10s:  %s"), then its
    frames innermost first ("%10s   %s", the value on the first)."""
    stacks = collections.Counter()
    text = open(path, encoding="utf-8", errors="surrogateescape").read()
    blocks = text.split(SEPARATOR + "\n")[1:]
    for block in blocks:
        labels, names, value = {}, [], None
        for line in block.splitlines():
            if len(line) > 12 and line[10] == ":" and line[11:13] == "  ":
                labels[line[:10].strip()] = line[13:]
                continue
            if value is None:
                value = line[:10].strip()
            names.append(line[13:])
        if not names:
            continue
        # An unsymbolized location prints as "[FILE]" or "<unknown>";
        # stackcollapse as "[unknown]".
        names = ["[unknown]" if re.fullmatch(r"\[[^\]]*\]|<unknown>", n) else n for n in names]
        comm = labels.get("comm", "").replace(" ", "_")
        stack = ";".join([comm] + [n.replace(";", ":") for n in reversed(names)])
        stacks[stack] += int(value)
    return stacks


def build_id_of(path):
    try:
        out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=False).stdout
    except OSError:
        return None
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def check_pprof(folded_path, traces_path, raw_path, mmaps_path):
    ok = True
    ours = read_folded(folded_path)
    # pprof prints no sample without frames; stackcollapse prints its comm.
    frameless = {s: n for s, n in ours.items() if ";" not in s}
    for s in frameless:
        del ours[s]
    theirs = traces_as_folded(traces_path)
    if ours != theirs:
        ok = False
        print("FAIL: go tool pprof -traces and --folded differ:")
        for s in sorted(set(ours) | set(theirs)):
            if ours[s] != theirs[s]:
                print(f"  folded {ours[s]:6}  pprof {theirs[s]:6}  {s}")
    else:
        print(f"ok: go tool pprof -traces lists the {len(ours)} stacks of --folded with their counts "
              f"({sum(ours.values())} samples; {sum(frameless.values())} without frames, which pprof omits)")

    # The recording's mappings: (start, limit, offset, file).
    mmaps = set()
    for line in open(mmaps_path, encoding="utf-8", errors="surrogateescape"):
        m = re.search(r"\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) [^\]]*\]: \S+ (.*)$", line)
        if m:
            start, size, off = (int(x, 16) for x in m.groups()[:3])
            mmaps.add((start, start + size, off, m.group(4)))
    raw = open(raw_path, encoding="utf-8", errors="surrogateescape").read()
    section = raw.split("\nMappings\n", 1)[1] if "\nMappings\n" in raw else ""
    checked = 0
    for line in section.splitlines():
        m = re.match(r"\d+: (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)(?: ([0-9a-f]+))?", line)
        if not m:
            continue
        start, limit, off = (int(x, 16) for x in m.groups()[:3])
        path, bid = m.group(4), m.group(5)
        if path == "[kernel.kallsyms]":
            continue
        if (start, limit, off, path) not in mmaps:
            ok = False
            print(f"FAIL: mapping {line.strip()} is no MMAP2 event of the recording")
        if path.startswith("/") and os.path.exists(path):
            want = build_id_of(path)
            if want != bid:
                ok = False
                print(f"FAIL: mapping {path}: build-id {bid}, readelf -n: {want}")
        checked += 1
    if checked == 0:
        ok = False
        print("FAIL: no file mapping in the profile")
    elif ok:
        print(f"ok: {checked} mappings are MMAP2 events of the recording with their files' build-ids")
    for want in ("samples/count", "cpu/nanoseconds"):
        if want not in raw:
            ok = False
            print(f"FAIL: no sample type {want}")
    for label in ("comm:[", "pid:[", "tid:["):
        if label not in raw:
            ok = False
            print(f"FAIL: no sample label {label}...]")
    return ok


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "pprof":
        return 0 if check_pprof(*sys.argv[2:]) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
