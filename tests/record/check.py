# SPDX-License-Identifier: MIT
# `sframe record --check N`, sample for sample: the frames our BPF program
# walked in the kernel (OURS: `perf script -F tid,time,ip,sym,dso` of the
# recording) against the current perf's own unwinding (libdw) of the stack
# copies of the same samples (THEIRS: the same of the --check file), matched
# by thread and time. User frames are compared by symbol and DSO.
#   check.py OURS.txt THEIRS.txt CHECK.data MIN_PERCENT
# A sample matches when the frames are equal, or when perf's copy ran out
# (8 KB copied, the stack going on; or nothing readable, as when the process
# exits) and perf's frames are a prefix of ours, or when our walk stopped at
# its depth limit and ours are a prefix of perf's.
# Whether the copy ran out is read from CHECK.data itself (perf.data's
# layout, tools/perf/Documentation/perf.data-file-format.txt, and
# perf_event_open(2)'s sample layout), not through sframepp's reader.
import struct
import sys

KERNEL = "[kernel.kallsyms]"
# User frames the in-kernel walk goes to (SFRAME_RECORD_MAX_USER).
MAX_USER = 127


def samples(path):
    """{(tid, time): [(sym, dso), ...] user frames, innermost first}"""
    out, key, frames = {}, None, []
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip():
            if key is not None:
                out[key] = frames
            key, frames = None, []
        elif not line.startswith("\t"):
            tid, time = line.split()[:2]
            key, frames = (int(tid), time.rstrip(":")), []
        else:
            addr, rest = line.split(None, 1)
            sym, _, dso = rest.rpartition(" (")
            dso = dso.rstrip(")")
            if dso != KERNEL:
                frames.append((sym, dso))
    if key is not None:
        out[key] = frames
    return out


def copies(path):
    """{(tid, time as perf prints it): (dyn_size, requested)} of every sample"""
    data = open(path, "rb").read()
    magic, hsize, attr_size = struct.unpack_from("<8sQQ", data, 0)
    if magic != b"PERFILE2":
        sys.exit(f"{path}: not a perf.data file")
    attrs_off, attrs_size, data_off, data_size = struct.unpack_from("<QQQQ", data, 24)
    if attrs_size != attr_size:
        sys.exit(f"{path}: {attrs_size // attr_size} events, one expected")
    # struct perf_event_attr: type, size, config, period, sample_type, ...
    sample_type, = struct.unpack_from("<Q", data, attrs_off + 24)
    regs_mask, = struct.unpack_from("<Q", data, attrs_off + 80)
    stack_user, = struct.unpack_from("<I", data, attrs_off + 88)
    order = ["IDENTIFIER", "IP", "TID", "TIME", "ADDR", "ID", "STREAM_ID", "CPU", "PERIOD", "READ", "CALLCHAIN",
             "RAW", "BRANCH_STACK", "REGS_USER", "STACK_USER"]
    bit = {"IP": 0, "TID": 1, "TIME": 2, "ADDR": 3, "READ": 4, "CALLCHAIN": 5, "ID": 6, "CPU": 7, "PERIOD": 8,
           "STREAM_ID": 9, "RAW": 10, "BRANCH_STACK": 11, "REGS_USER": 12, "STACK_USER": 13, "IDENTIFIER": 16}
    for name in ("READ", "RAW", "BRANCH_STACK"):
        if sample_type >> bit[name] & 1:
            sys.exit(f"{path}: sample_type with {name}: not read here")
    out = {}
    at, end = data_off, data_off + data_size
    while at + 8 <= end:
        rtype, misc, size = struct.unpack_from("<IHH", data, at)
        if size < 8:
            sys.exit(f"{path}: a record of {size} bytes at {at}")
        if rtype == 9:  # PERF_RECORD_SAMPLE
            p, tid, time, dyn = at + 8, None, None, 0
            for name in order:
                if not sample_type >> bit[name] & 1:
                    continue
                if name == "TID":
                    _, tid = struct.unpack_from("<II", data, p)
                    p += 8
                elif name == "TIME":
                    time, = struct.unpack_from("<Q", data, p)
                    p += 8
                elif name == "CALLCHAIN":
                    nr, = struct.unpack_from("<Q", data, p)
                    p += 8 + 8 * nr
                elif name == "REGS_USER":
                    abi, = struct.unpack_from("<Q", data, p)
                    p += 8 + (8 * bin(regs_mask).count("1") if abi else 0)
                elif name == "STACK_USER":
                    n, = struct.unpack_from("<Q", data, p)
                    p += 8
                    if n:
                        dyn, = struct.unpack_from("<Q", data, p + n)
                        p += n + 8
                else:
                    p += 8
            out[(tid, f"{time // 10**9}.{time % 10**9 // 1000:06d}")] = (dyn, stack_user)
        at += size
    return out


def main():
    ours, theirs = samples(sys.argv[1]), samples(sys.argv[2])
    copied = copies(sys.argv[3])
    need = float(sys.argv[4])
    equal = prefix = deep = 0
    diffs = []
    for key, t in sorted(theirs.items()):
        o = ours.get(key)
        dyn, asked = copied.get(key, (0, 0))
        if o is None:
            diffs.append((key, "no sample of ours at this thread and time", t, []))
        elif o == t:
            equal += 1
        elif (dyn >= asked or dyn == 0) and o[:len(t)] == t:
            prefix += 1
        elif len(o) == MAX_USER and t[:MAX_USER] == o:
            deep += 1
        else:
            i = next((k for k in range(min(len(o), len(t))) if o[k] != t[k]), min(len(o), len(t)))
            if i == len(t):
                why = f"perf's {len(t)} frames end first (its copy: {dyn} of {asked} bytes)"
            elif i == len(o):
                why = f"our walk ends after {len(o)} frames, perf's goes on"
            else:
                why = f"frame {i} differs: ours {o[i][0]} ({o[i][1]}), perf's {t[i][0]} ({t[i][1]})"
            diffs.append((key, why, t, o))
    n = len(theirs)
    ok = equal + prefix + deep
    share = 100.0 * ok / n if n else 0.0
    print(f"--check: {n} samples copied; {equal} walked to the same frames as perf 7.2 (libdw) unwinds from the "
          f"copy, {prefix} where perf's copy ran out (perf's frames a prefix of ours), {deep} at our depth limit of "
          f"{MAX_USER} user frames (ours a prefix of perf's): {share:.2f}% (need {need}%)")
    for key, why, t, o in diffs[:20]:
        print(f"  differs: tid {key[0]} at {key[1]}: {why}")
    if len(diffs) > 20:
        print(f"  ... and {len(diffs) - 20} more")
    if n == 0:
        print("FAIL: no sample was copied")
        return 1
    if share < need:
        print(f"FAIL: {share:.2f}% of the checked samples match, below {need}%")
        return 1
    return 0


sys.exit(main())
