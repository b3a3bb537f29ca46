# SPDX-License-Identifier: MIT
# Two folded profiles of one program (ours: `sframe record`; theirs: perf
# record --call-graph=dwarf, unwound by the current perf), both collapsed by
# collapse.py from perf script's output:
#   profiles.py OURS THEIRS hottest [COMM]
#       the hottest stack of ours has the same share of its process's
#       samples (those of its comm) in theirs within 5 percentage points (or
#       three standard errors of the difference, where fewer samples make
#       that larger); with COMM, some stack of ours is named COMM;...;main;...
#       Within its process: how a machine shared with other guests splits
#       the time between processes run one after the other moves their
#       shares by more than that, and it is the scheduler's, not the
#       unwinder's.
#   profiles.py OURS THEIRS top N POINTS MIN_SAMPLES
#       each has at least MIN_SAMPLES samples, and every stack among the N
#       hottest of either has the same share in the other within POINTS.
import sys


def load(p):
    d = {}
    for line in open(p):
        s, n = line.rstrip("\n").rsplit(" ", 1)
        d[s] = d.get(s, 0) + int(n)
    return d


def hottest(ours, theirs, comm):
    top_o = max(ours, key=ours.get)
    top_t = max(theirs, key=theirs.get)
    proc = top_o.split(";", 1)[0]
    of_proc = lambda d: sum(n for s, n in d.items() if s.split(";", 1)[0] == proc)
    to, tt = of_proc(ours), of_proc(theirs)
    if not tt:
        print(f"FAIL: perf --call-graph=dwarf has no sample of {proc}")
        return 1
    so, st = 100 * ours[top_o] / to, 100 * theirs.get(top_o, 0) / tt
    # Two samplings of one share differ by chance: 5 points, or three
    # standard errors of the difference where the samples are fewer.
    p = (so + st) / 200
    allowed = max(5.0, 300 * (p * (1 - p) * (1 / to + 1 / tt)) ** 0.5)
    print(f"hottest stack: ours {top_o} {so:.1f}% of {to} of {proc}; perf --call-graph=dwarf (libdw): {st:.1f}% of {tt} "
          f"(its hottest: {top_t}); allowed difference {allowed:.1f} points")
    if abs(so - st) > allowed:
        print(f"FAIL: the hottest stack's shares differ by more than {allowed:.1f} points")
        return 1
    if comm and not any(s.startswith(comm + ";") and ";main;" in s for s in ours):
        print(f"FAIL: no named sample of {comm}")
        return 1
    return 0


def top(ours, theirs, to, tt, n, points, min_samples):
    bad = 0
    for name, count in (("sframe record", to), ("perf --call-graph=dwarf", tt)):
        if count < min_samples:
            print(f"FAIL: {name} has {count} samples, fewer than {min_samples}")
            bad = 1
    print(f"profiles: sframe record {to} samples, perf record --call-graph=dwarf (perf 7.2, libdw) {tt} samples; "
          f"the {n} hottest stacks of each, within {points} points")
    hot = lambda d: sorted(d, key=d.get, reverse=True)[:n]
    for s in sorted(set(hot(ours)) | set(hot(theirs)), key=lambda s: -ours.get(s, 0)):
        so, st = 100 * ours.get(s, 0) / to, 100 * theirs.get(s, 0) / tt
        ok = abs(so - st) <= points
        bad |= not ok
        print(f"  {'ok  ' if ok else 'FAIL'} ours {so:5.2f}%  perf {st:5.2f}%  {s}")
    return bad


def main():
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    to, tt = sum(ours.values()), sum(theirs.values())
    if not to or not tt:
        print(f"FAIL: an empty profile (ours {to} samples, perf's {tt})")
        return 1
    if sys.argv[3] == "hottest":
        return hottest(ours, theirs, sys.argv[4] if len(sys.argv) > 4 else "")
    return top(ours, theirs, to, tt, int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))


sys.exit(main())
