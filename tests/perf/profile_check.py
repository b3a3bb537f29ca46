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
  profile_check.py svg FOLDED SVG DOM ZOOMDOM ZOOMID SEARCHDOM REGEX
    The SVG (parsed by Python's XML parser: well-formed, no external
    reference) as headless Chromium laid it out after its script ran (DOM:
    --dump-dom): a frame per call path of FOLDED at least data-min-width
    pixels wide, with the path's count and percentage in its title, its bar
    within 1 px of its share and offset; ZOOMDOM (#zoom=ZOOMID): that frame
    spans the full width, its callees scaled with it, frames beside it
    hidden; SEARCHDOM (#search=REGEX): the matched share is that of the
    stacks with a frame matching REGEX.
"""
import collections
import html
import os
import xml.dom.minidom
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


def folded_tree(stacks):
    """Call path (tuple of names, "all" first) -> samples, as a flame graph
    sums them."""
    tree = collections.Counter()
    for stack, n in stacks.items():
        parts = stack.split(";")
        tree[("all",)] += n
        for i in range(1, len(parts) + 1):
            tree[("all",) + tuple(parts[:i])] += n
    return tree


def dom_frames(path):
    """The frames of a --dump-dom: id -> dict(n, x, d, name, count, pct, rx,
    rw, hidden)."""
    text = open(path, encoding="utf-8", errors="surrogateescape").read()
    root = re.search(r"<svg\b([^>]*)>", text)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', root.group(1)))
    frames = {}
    for m in re.finditer(r'<g class="f"([^>]*)><title>(.*?)</title><rect([^>]*)>', text, re.S):
        g = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        r = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(3)))
        t = re.fullmatch(r"(.*) \((\d+) samples, ([\d.]+)%\)", html.unescape(m.group(2)), re.S)
        frames[g["id"]] = dict(n=int(g["data-n"]), x=int(g["data-x"]), d=int(g["data-d"]), name=t.group(1),
                               count=int(t.group(2)), pct=float(t.group(3)), rx=float(r["x"]),
                               rw=float(r["width"]), hidden="display: none" in g.get("style", ""))
    return attrs, frames, text


def frame_paths(frames):
    """Each frame's call path: its parent is the frame one level down whose
    sample range holds it."""
    by_depth = collections.defaultdict(list)
    for fid, f in frames.items():
        by_depth[f["d"]].append(fid)
    paths = {}
    for d in sorted(by_depth):
        for fid in by_depth[d]:
            f = frames[fid]
            if d == 0:
                paths[fid] = (f["name"],)
                continue
            parent = [p for p in by_depth[d - 1] if frames[p]["x"] <= f["x"] and f["x"] + f["n"] <= frames[p]["x"] + frames[p]["n"]]
            if len(parent) != 1 or parent[0] not in paths:
                return None
            # As stackcollapse writes them: comm with '_' for ' ', ';' as ':'.
            name = f["name"].replace(" ", "_") if d == 1 else f["name"].replace(";", ":")
            paths[fid] = paths[parent[0]] + (name,)
    return paths


def check_svg(folded_path, svg_path, dom_path, zoom_path, zoom_id, search_path, regex):
    ok = True
    def fail(msg):
        nonlocal ok
        ok = False
        print("FAIL: " + msg)
    raw = open(svg_path, "rb").read()
    try:
        xml.dom.minidom.parseString(raw)
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        fail(f"{svg_path} is not well-formed XML: {e}")
    stripped = raw.replace(b'xmlns="http://www.w3.org/2000/svg"', b"").replace(b'xmlns="http://www.w3.org/1999/xhtml"', b"")
    for ref in (b"http:", b"https:", b"href", b"url(", b"@import"):
        if ref in stripped:
            fail(f"{svg_path} refers to something outside it ({ref.decode()})")

    stacks = read_folded(folded_path)
    tree = folded_tree(stacks)
    total = sum(stacks.values())
    attrs, frames, text = dom_frames(dom_path)
    if f"({total} samples)</text>" not in text:
        fail(f"the title does not give the {total} samples")
    px, pw, minw = float(attrs["data-plot-x"]), float(attrs["data-plot-width"]), float(attrs["data-min-width"])
    paths = frame_paths(frames)
    if paths is None:
        fail("frames do not nest")
        return False
    drawn = {}
    for fid, path in paths.items():
        f = frames[fid]
        drawn[path] = fid
        want = tree.get(path)
        if want is None:
            fail(f"frame {fid} {path} is no call path of --folded")
            continue
        if f["count"] != want or f["n"] != want:
            fail(f"frame {path}: {f['count']} samples, --folded {want}")
        if abs(f["pct"] - round(100.0 * want / total, 2)) > 0.006:
            fail(f"frame {path}: {f['pct']}%, --folded {100.0 * want / total:.4f}%")
        if abs(f["rw"] - want / total * pw) > 1:
            fail(f"frame {path}: {f['rw']} px wide, its share is {want / total * pw:.2f} px")
    # Offsets: callees side by side from their caller's start, by name.
    for path, fid in drawn.items():
        if len(path) == 1:
            want_x = 0
        else:
            sib = sorted(p for p in tree if len(p) == len(path) and p[:-1] == path[:-1])
            parent_x = frames[drawn[path[:-1]]]["x"] if path[:-1] in drawn else None
            if parent_x is None:
                continue
            # Compare names as the SVG holds them (before stackcollapse's
            # replacements, which keep the order of these names).
            want_x = parent_x + sum(tree[p] for p in sib if p < path)
        if abs(frames[fid]["rx"] - (px + want_x / total * pw)) > 1:
            fail(f"frame {path} at x={frames[fid]['rx']}, its offset is {px + want_x / total * pw:.2f}")
    # Every call path wide enough is drawn (its callers being drawn).
    missing = [p for p, n in tree.items() if n / total * pw >= minw and p not in drawn
               and all(p[:i] in drawn for i in range(1, len(p)))]
    for p in missing[:10]:
        fail(f"call path {p} ({tree[p]} samples) not drawn")
    if ok:
        print(f"ok: {len(drawn)} frames with the counts, percentages, widths and offsets of --folded "
              f"({total} samples, {len(tree)} call paths, threshold {minw} px)")

    # Zoom: the chosen frame full width, its callees scaled, others hidden.
    zattrs, zframes, _ = dom_frames(zoom_path)
    z = zframes[zoom_id]
    if abs(z["rw"] - pw) > 1 or abs(z["rx"] - px) > 1:
        fail(f"#zoom={zoom_id}: the frame is {z['rw']} px wide at {z['rx']}, not {pw} at {px}")
    zok = True
    for fid, f in zframes.items():
        inside = f["d"] >= z["d"] and f["x"] >= z["x"] and f["x"] + f["n"] <= z["x"] + z["n"]
        below = f["d"] < z["d"] and f["x"] <= z["x"] and f["x"] + f["n"] >= z["x"] + z["n"]
        if inside:
            want = f["n"] / z["n"] * pw
            if f["hidden"] or abs(f["rw"] - want) > 1:
                zok = False
                fail(f"#zoom={zoom_id}: callee {fid} is {f['rw']} px wide, its share is {want:.2f}")
        elif below:
            if f["hidden"] or abs(f["rw"] - pw) > 1:
                zok = False
                fail(f"#zoom={zoom_id}: caller {fid} is not full width")
        elif f["d"] >= z["d"] or not f["hidden"]:
            if not f["hidden"]:
                zok = False
                fail(f"#zoom={zoom_id}: frame {fid} beside the zoomed one still shown")
    if zok and ok:
        print(f"ok: #zoom={zoom_id} ({z['name']}, {z['n']} samples) widens it to {pw} px, scales its callees")

    # Search: the share of the stacks with a matching frame.
    stext = open(search_path, encoding="utf-8", errors="surrogateescape").read()
    m = re.search(r'<text id="matched"[^>]*>Matched: ([\d.]+)%</text>', stext)
    pat = re.compile(regex)
    hit = sum(n for s, n in stacks.items() if any(pat.search(x) for x in s.split(";")[1:]))
    if not m or abs(float(m.group(1)) - round(100.0 * hit / total, 2)) > 0.006:
        fail(f"#search={regex}: {m.group(1) if m else 'nothing'}%, the stacks matching hold {100.0 * hit / total:.2f}%")
    else:
        print(f"ok: #search={regex} matches {m.group(1)}% of the samples")
    return ok


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "pprof":
        return 0 if check_pprof(*sys.argv[2:]) else 1
    if len(sys.argv) == 9 and sys.argv[1] == "svg":
        return 0 if check_svg(*sys.argv[2:]) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
