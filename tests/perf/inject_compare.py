#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two `perf script -F tid,ip,sym,dso` outputs by the names of
their frames: symbol and dso per frame, addresses left out (perf prints
user frames map-relative or absolute, by version).

  inject_compare.py THRESHOLD TRUTH.txt OTHER.txt [OTHERS_OWN.txt]
      Sample by sample, in order; at least THRESHOLD (0-1) of the samples
      must have the same tid and the same (symbol, dso) list. Every
      differing sample is listed with where the lists part. With
      OTHERS_OWN.txt (the reading perf's own `perf script` of the
      recording), a frame OTHER names as that perf names the same frame
      when it reads the recording itself also counts as the same: perf 6.1
      names the first slot of a program's .plt after `_init` (a zero-size
      symbol it extends over the PLT), whichever file it reads, where
      `--perf-compat 6.1` names the slot's @plt symbol. Such samples are
      counted and listed apart.
  inject_compare.py --vs-perf-inject THRESHOLD PERF_SCRIPT.txt PERF_INJ.txt OURS_INJ.txt
      The current perf's `perf inject --convert-callchain` output against
      ours, both printed by the current perf, with the current perf's own
      `perf script` of the recording (its unwinding at read time) as the
      judge: a sample counts as agreeing when both name the same frames, or
      when ours names the frames perf script finds and perf's inject does
      not (perf's conversion lost frames its own unwinder finds; counted
      and listed apart). At least THRESHOLD must agree.
Exit status 1 below the threshold or when the sample counts differ.
"""
import sys

from compare import samples


# perf 6.1 prints an all-ones frame where its libunwind walk read the last
# 8 bytes of the stack copy (`sframe perf script --perf-compat 6.1` does
# too); a callchain holds the frame found there instead, or nothing when
# the walk ended there.
END_OF_COPY = "<end of the stack copy>"


def names(s):
    out = []
    for f in s["frames"]:
        parts = f.split(" ", 1)
        if parts[0] == "ffffffffffffffff":
            out.append(END_OF_COPY)
            continue
        out.append(parts[1] if len(parts) > 1 else "")
    return s["header"].split()[0] if s["header"].split() else "", out


def same_frames(truth, other):
    """Equal, a truth END_OF_COPY last frame standing for one frame or none."""
    if truth and truth[-1] == END_OF_COPY:
        return other == truth[:-1] or (len(other) == len(truth) and other[:-1] == truth[:-1])
    return truth == other


def vs_perf_inject(threshold, script_path, perf_path, ours_path):
    js, ps, os_ = samples(script_path), samples(perf_path), samples(ours_path)
    print("%s: %d, %s: %d, %s: %d samples" % (script_path, len(js), perf_path, len(ps), ours_path, len(os_)))
    if not (len(js) == len(ps) == len(os_)) or not ps:
        print("FAIL: the sample counts differ (or there are none)")
        return 1
    same = lost_by_perf = 0
    diffs = []
    for i, (j, p, o) in enumerate(zip(js, ps, os_)):
        nj, np_, no = names(j), names(p), names(o)
        if np_ == no:
            same += 1
        elif no == nj:
            lost_by_perf += 1
        else:
            k = next((x for x in range(min(len(np_[1]), len(no[1]))) if np_[1][x] != no[1][x]),
                     min(len(np_[1]), len(no[1])))
            diffs.append((i, "frame %d: perf inject %r, ours %r, perf script %r" % (
                k, np_[1][k] if k < len(np_[1]) else None, no[1][k] if k < len(no[1]) else None,
                nj[1][k] if k < len(nj[1]) else None)))
    total = len(ps)
    frac = (same + lost_by_perf) / total
    print("same frames as perf inject: %d; ours as perf's own perf script where perf inject lost frames: %d; "
          "other: %d; agreeing %d of %d (%.2f%%), threshold %.0f%%" % (
              same, lost_by_perf, len(diffs), same + lost_by_perf, total, 100 * frac, 100 * threshold))
    for i, r in diffs[:50]:
        print("  sample %d: %s" % (i, r))
    if frac < threshold:
        print("FAIL: below the threshold")
        return 1
    return 0


def main(argv):
    if argv[0] == "--vs-perf-inject":
        return vs_perf_inject(float(argv[1]), argv[2], argv[3], argv[4])
    threshold = float(argv[0])
    a, b = samples(argv[1]), samples(argv[2])
    own = samples(argv[3]) if len(argv) > 3 else None
    print("%s: %d samples, %s: %d samples" % (argv[1], len(a), argv[2], len(b)))
    if len(a) != len(b) or not a or (own is not None and len(own) != len(a)):
        print("FAIL: the sample counts differ (or there are none)")
        return 1
    same = as_own = 0
    diffs = []
    own_named = []
    for i, (x, y) in enumerate(zip(a, b)):
        (tx, fx), (ty, fy) = names(x), names(y)
        if tx == ty and same_frames(fx, fy):
            same += 1
            continue
        if own is not None and tx == ty and len(fx) == len(fy):
            fo = names(own[i])[1]
            parts = [k for k in range(len(fx)) if fx[k] != fy[k]]
            if parts and all(k < len(fo) and fy[k] == fo[k] for k in parts):
                as_own += 1
                k = parts[0]
                own_named.append((i, "frame %d: %r, as it names it reading the recording; ours %r" % (k, fy[k], fx[k])))
                continue
        if tx != ty:
            diffs.append((i, "tid %s against %s" % (tx, ty)))
            continue
        k = next((j for j in range(min(len(fx), len(fy))) if fx[j] != fy[j]), min(len(fx), len(fy)))
        diffs.append((i, "frame %d: %r against %r (%d and %d frames)" % (
            k, fx[k] if k < len(fx) else None, fy[k] if k < len(fy) else None, len(fx), len(fy))))
    frac = (same + as_own) / len(a)
    print("same frame names: %d of %d samples (%.2f%%), threshold %.0f%%" % (same + as_own, len(a), 100 * frac,
                                                                           100 * threshold))
    if own is not None:
        print("  of them named as %s names them reading the recording itself: %d" % (argv[3], as_own))
        for i, r in own_named[:10]:
            print("    sample %d: %s" % (i, r))
    for i, r in diffs[:50]:
        print("  sample %d: %s" % (i, r))
    if len(diffs) > 50:
        print("  ... %d more" % (len(diffs) - 50))
    if frac < threshold:
        print("FAIL: below the threshold")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
