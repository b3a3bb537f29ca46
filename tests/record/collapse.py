# SPDX-License-Identifier: MIT
# Collapses `perf script -F comm,ip,sym` (either perf) into folded stacks,
# "comm;outermost;...;innermost COUNT", as perf's stackcollapse does:
# a sample is its header line, then one frame per line, then a blank line.
import sys
from collections import Counter

stacks = Counter()
comm, frames = None, []
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        if comm is not None:
            stacks[";".join([comm.replace(" ", "_")] + list(reversed(frames)))] += 1
        comm, frames = None, []
    elif not line[0].isspace():
        comm, frames = line.split()[0], []
    else:
        parts = line.split(None, 1)  # address, symbol (may hold spaces)
        frames.append((parts[1] if len(parts) > 1 else "[unknown]").replace(";", ":"))
if comm is not None:
    stacks[";".join([comm.replace(" ", "_")] + list(reversed(frames)))] += 1
for s, n in sorted(stacks.items()):
    print(s, n)
