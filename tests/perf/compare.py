#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares `perf script` output (the truth: perf 7.2 for our default
layout, perf 6.1 for --perf-compat 6.1) with `sframe perf script`.

  compare.py [--quiet] PERF.txt OURS.txt OURS.json
      Sample by sample (same order: both deliver samples in time order):
      the header line and the frame lines must be identical for at least
      99% of the samples; every differing sample is listed with its reason
      (from the frames and our JSON: where the walk stopped and why, or
      where the frames part).
  compare.py --folded PERF.folded OURS.folded
      Collapsed stacks: at least 99% of the samples must fall on stacks
      with the same count on both sides; the others are listed.
  compare.py --where REGEX MIN PERF.txt OURS.txt
      The samples whose text in PERF (header and frame lines, stripped,
      one a line) matches REGEX (Python, re.DOTALL): at least MIN of them,
      and ours must match it too, with the same text in its group 1 (the
      whole match when REGEX has no group); the others are listed.
Exit status 1 when below the threshold or the sample counts differ.
"""
import json
import re
import sys

THRESHOLD = 0.99


def samples(path):
    out, cur = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur is not None:
                    out.append(cur)
                cur = None
                continue
            if cur is None:
                cur = {"header": line, "frames": []}
            elif line.startswith("\t"):
                cur["frames"].append(line.strip())
            else:
                cur["frames"].append(line.strip())
    if cur is not None:
        out.append(cur)
    return out


def reason(p, o, js):
    pf, of = p["frames"], o["frames"]
    stop = js.get("stop") if js else None
    srcs = [f["source"] for f in js["frames"]] if js else []
    if p["header"] != o["header"]:
        return "header line differs: perf %r, ours %r" % (p["header"], o["header"])
    if len(of) < len(pf) and pf[: len(of)] == of:
        return "sframe stopped %d frame(s) early after %r: %s (perf goes on with %r)" % (
            len(pf) - len(of), of[-1] if of else None, stop, pf[len(of)])
    if len(pf) < len(of) and of[: len(pf)] == pf:
        return "perf stopped %d frame(s) earlier; sframe went on with %r (source %s)" % (
            len(of) - len(pf), of[len(pf)], srcs[len(pf)] if len(srcs) > len(pf) else "?")
    k = next(i for i in range(min(len(pf), len(of))) if pf[i] != of[i])
    pip, oip = pf[k].split(" ", 1)[0], of[k].split(" ", 1)[0]
    if pip == oip:
        return "same address, other name at frame %d: perf %r, ours %r" % (k, pf[k], of[k])
    why = "frames part at frame %d: perf %r, ours %r (our frame %d from %s; walk ended: %s)" % (
        k, pf[k], of[k], k, srcs[k] if k < len(srcs) else "?", stop)
    if "([stack])" in pf[k]:
        why += "; perf's frame lies in [stack]: its libunwind state of the process before exec"
    return why


def compare(perf_path, ours_path, json_path, quiet):
    ps, os_ = samples(perf_path), samples(ours_path)
    with open(json_path, encoding="utf-8") as f:
        js = json.load(f)["samples"]
    print("%s: %d samples (perf), %d samples (sframe)" % (ours_path, len(ps), len(os_)))
    if len(ps) != len(os_):
        print("FAIL: the sample counts differ")
        return 1
    same = 0
    diffs = []
    for i, (p, o) in enumerate(zip(ps, os_)):
        if p == o:
            same += 1
        else:
            diffs.append((i, reason(p, o, js[i] if i < len(js) else None)))
    total = len(ps)
    frac = same / total if total else 0.0
    print("identical frame lists: %d of %d samples (%.2f%%), threshold %.0f%%" % (same, total, 100 * frac,
                                                                                100 * THRESHOLD))
    if not quiet or frac < THRESHOLD:
        for i, r in diffs:
            print("  sample %d: %s" % (i, r))
    if total == 0:
        print("FAIL: no samples")
        return 1
    if frac < THRESHOLD:
        print("FAIL: below the threshold")
        return 1
    return 0


def folded(path):
    d = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            d[stack] = d.get(stack, 0) + int(n)
    return d


def compare_folded(perf_path, ours_path):
    p, o = folded(perf_path), folded(ours_path)
    total = sum(p.values())
    agree = sum(min(n, o.get(s, 0)) for s, n in p.items())
    frac = agree / total if total else 0.0
    print("%s: %d samples on %d stacks (perf), %d on %d stacks (sframe); on stacks counted alike: %.2f%%" % (
        ours_path, total, len(p), sum(o.values()), len(o), 100 * frac))
    if sum(o.values()) != total:
        print("FAIL: the sample totals differ")
        return 1
    for s in sorted(set(p) | set(o)):
        if p.get(s, 0) != o.get(s, 0):
            print("  %s: perf %d, sframe %d" % (s, p.get(s, 0), o.get(s, 0)))
    if frac < THRESHOLD:
        print("FAIL: below the threshold")
        return 1
    return 0


def compare_where(pattern, least, perf_path, ours_path):
    ps, os_ = samples(perf_path), samples(ours_path)
    if len(ps) != len(os_):
        print("FAIL: the sample counts differ: %d (perf), %d (sframe)" % (len(ps), len(os_)))
        return 1
    rx = re.compile(pattern, re.DOTALL)
    group = 1 if rx.groups else 0

    def part(s):
        m = rx.search("\n".join([s["header"]] + s["frames"]))
        return m.group(group) if m else None

    theirs = [(i, part(p)) for i, p in enumerate(ps)]
    picked = [(i, t) for i, t in theirs if t is not None]
    diffs = [i for i, t in picked if part(os_[i]) != t]
    print("%s: %d samples where perf matches, %d printed the same by sframe (at least %d wanted)" % (
        ours_path, len(picked), len(picked) - len(diffs), least))
    for i in diffs:
        print("  sample %d: perf %r, ours %r" % (i, ps[i]["frames"], os_[i]["frames"]))
    if len(picked) < least:
        print("FAIL: too few such samples: the case is not exercised")
        return 1
    if diffs:
        print("FAIL: ours prints %d of them otherwise" % len(diffs))
        return 1
    return 0


def main(argv):
    quiet = "--quiet" in argv
    argv = [a for a in argv if a != "--quiet"]
    if argv and argv[0] == "--folded":
        return compare_folded(argv[1], argv[2])
    if argv and argv[0] == "--where":
        return compare_where(argv[1], int(argv[2]), argv[3], argv[4])
    return compare(argv[0], argv[1], argv[2], quiet)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
