#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `sframe convert --optimize-size` (v3 and v2) of the corpus's linked
# programs: at every PC from before the first function of GNU's section to
# past its last (gaps included), `sframe lookup` of the converted file finds
# the CFA and FP rules GNU objdump printed for the input (the corpus's
# golden `objdump --sframe` dumps, an independent truth), or nothing where
# objdump shows no function. Coalescing joins PLT0, the PC-mask PLTn entries
# and .plt.got into one FDE and extends PC-mask FDEs: no PC may read a
# different row. Every converted file must also pass `verify --consumer
# all`. A missing golden or program fails.
# Usage: golden_lookups.py SFRAME_BIN SHARED_DIR WORKDIR
import json, os, re, subprocess, sys

bin_, shared, work = sys.argv[1:]
os.makedirs(work, exist_ok=True)
fails = 0
checked = 0


def golden_fdes(path):
    txt = open(path).read()
    fdes = []
    for m in re.finditer(r"func idx \[\d+\]: pc = (0x[0-9a-f]+), size = (\d+) bytes\n"
                         r"\s+STARTPC(\[m\])?.*\n((?:\s+[0-9a-f]{16}.*\n)+)", txt):
        start, size, mask = int(m.group(1), 16), int(m.group(2)), bool(m.group(3))
        rows = []
        for line in m.group(4).splitlines():
            p = line.split()
            rows.append((int(p[0], 16) - (0 if mask else start), p[1], p[2]))
        fdes.append((start, size, mask, rows))
    return fdes


def want(fdes, pc):
    for start, size, mask, rows in fdes:
        if start <= pc < start + size:
            off = pc - start
            if mask:
                # objdump does not print rep_size: GNU ld's x86-64 PLTn
                # entries repeat every 16 bytes, .plt.got's every 8.
                off %= 16 if size % 16 == 0 else 8
            row = None
            for at, cfa, fp in rows:
                if at <= off:
                    row = (cfa, fp)
            return row
    return None


def shown(fre):
    c = fre["cfa"]
    base = {"SP": "sp", "FP": "fp"}.get(c.get("register_name"), "?")
    f = fre["fp"]
    fp = "u" if f["kind"] == "unchanged" else (f"c{f['offset']:+d}" if f["base"] == "cfa" else "?")
    return (f"{base}+{c['offset']}", fp)


for d in ("x86_64-v3-linked", "x86_64-v2-linked"):
    for name in ("basic", "cxx", "libdemo.so", "longfn", "realign", "signals", "usesolib"):
        src = os.path.join(shared, "corpus", d, name)
        golden = src + ".objdump.txt"
        if not os.path.exists(src) or not os.path.exists(golden):
            print(f"FAIL {d}/{name}: program or golden dump missing")
            fails += 1
            continue
        fdes = golden_fdes(golden)
        if not fdes:
            print(f"FAIL {d}/{name}: no FDE read from the golden dump")
            fails += 1
            continue
        lo = min(f[0] for f in fdes)
        hi = max(f[0] + f[1] for f in fdes)
        pcs = list(range(lo - 2, hi + 2))
        for v in ("3", "2"):
            # realign's v3 section has a FLEX FDE, which v2 cannot say
            # (convert refuses it: tests/convert).
            if d == "x86_64-v3-linked" and name == "realign" and v == "2":
                continue
            out = os.path.join(work, f"{d}-{name}-v{v}")
            r = subprocess.run([bin_, "convert", "--format-version", v, "--optimize-size", src, "-o", out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {d}/{name} v{v}: convert: {r.stderr.strip()}")
                fails += 1
                continue
            r = subprocess.run([bin_, "verify", "--consumer", "all", out], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {d}/{name} v{v}: verify --consumer all: {r.stdout.strip()} {r.stderr.strip()}")
                fails += 1
            res = json.loads(subprocess.run([bin_, "lookup", "--json", out] + [hex(p) for p in pcs],
                                            capture_output=True, text=True).stdout)["results"]
            if len(res) != len(pcs):
                print(f"FAIL {d}/{name} v{v}: {len(res)} lookup results for {len(pcs)} PCs")
                fails += 1
                continue
            bad = 0
            for pc, r in zip(pcs, res):
                w = want(fdes, pc)
                got = shown(r["fre"]) if r.get("found") else None
                if w != got:
                    bad += 1
                    if bad <= 3:
                        print(f"FAIL {d}/{name} v{v}: pc {pc:#x}: golden {w}, converted {got}")
            fails += bad != 0
            checked += len(pcs)

print(f"{checked} PCs compared with the golden dumps; {fails} failures")
sys.exit(1 if fails or checked == 0 else 0)
