#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`sframe lookup FILE PC` and `sframe stack PID` must name a PC identically
(one symbol reader): for every frame of OURS.json in one of the given
modules, the PC stack named (the return address minus 1 for callers) is
looked up in the module's file at its link-time address, and the symbol and
its start must be the ones stack printed.

Usage: lookup_names.py SFRAME_BIN OURS.json LABEL NAME[=LOOKUP_FILE]...
NAME is a module's file name (e.g. libc.so.6); LOOKUP_FILE (default: the
module's path) is a copy of the module that lookup can read (e.g. libc with SFrame added by `sframe gen --elf`). Prints one summary
line and the differences; exits 1 on a difference or when nothing was
compared."""
import json
import os
import re
import subprocess
import sys

sframe, ours_path, label = sys.argv[1:4]
files = {}
for arg in sys.argv[4:]:
    mod, _, copy = arg.partition("=")
    files[mod] = copy

with open(ours_path) as f:
    ours = json.load(f)
bias = {m["path"]: int(m["bias"], 16) for m in ours["modules"]}

# module -> [(link-time PC, symbol, symbol start)]
wanted = {}
for t in ours["threads"]:
    for fr in t.get("frames", []):
        mod = fr.get("module")
        if mod is None or os.path.basename(mod) not in files or "symbol" not in fr:
            continue
        pc = int(fr["pc"], 16)
        # The PC stack named: a return address minus 1, unless the symbol
        # starts at the return address itself (a signal trampoline).
        name_pc = pc - 1 if fr["return_address"] and fr["offset"] > 0 else pc
        start = pc - fr["offset"]
        wanted.setdefault(mod, []).append((name_pc - bias[mod], fr["symbol"], start - bias[mod]))

line_re = re.compile(r"^0x([0-9a-f]+) <(.*)\+0x([0-9a-f]+)>: ")
compared, bad = 0, []
for mod, frames in wanted.items():
    pcs = sorted({hex(p) for p, _, _ in frames})
    out = subprocess.run([sframe, "lookup", files[os.path.basename(mod)] or mod] + pcs, capture_output=True, text=True).stdout
    named = {}
    for line in out.splitlines():
        m = line_re.match(line)
        if m:
            named[int(m.group(1), 16)] = (m.group(2), int(m.group(1), 16) - int(m.group(3), 16))
    for pc, sym, start in frames:
        compared += 1
        got = named.get(pc)
        if got != (sym, start):
            bad.append(f"{mod} 0x{pc:x}: stack {sym}@0x{start:x}, lookup {got}")

print(f"{label}: lookup vs stack names: {compared} frames in {len(wanted)} modules, {len(bad)} differ")
for b in bad:
    print("  " + b)
sys.exit(1 if bad or compared == 0 else 0)
