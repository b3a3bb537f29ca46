#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SFrame section sizes under --optimize-size, technique by technique
# (build/bench/size_bench does the encoding, see bench/size/size_bench.cpp),
# on three groups of files:
#   corpus: the linked programs of ../shared/corpus (x86_64-v3-linked and
#           x86_64-v2-linked), which carry GNU ld 2.47's own .sframe;
#   sweep:  every ELF file under /usr/bin and /usr/lib/x86_64-linux-gnu (the
#           file list as scripts/gen-sweep makes it);
#   llvm:   /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1.
# Against: GNU's section (sh_size of .sframe, readelf -SW) where the file has
# one, and .eh_frame + .eh_frame_hdr (readelf -SW). Sections are encoded
# from `sframe gen`'s model of the file's CFI ("gen") and, where GNU made
# one, from GNU's own section ("gnu", what `sframe convert` does).
# Goal (issue 17): with every consumer accepting, at most 0.9x GNU's bytes
# and below .eh_frame + .eh_frame_hdr. Sizes are counted, not timed: no
# noise. The exit status says only whether the tools ran, and whether any
# section was rejected by validate(kStrict) or a consumer of its version.
# Usage: bench/size_bench.sh SIZE_BENCH_BIN [SHARED_DIR] [GROUP...]
#   GROUP: corpus, sweep, llvm (default: all three).
set -euo pipefail
bench=$1; shift
shared=${1:-$(dirname "$0")/../../shared}; [ $# -gt 0 ] && shift
groups=("$@"); [ ${#groups[@]} -gt 0 ] || groups=(corpus sweep llvm)
py=/usr/bin/python3; [ -x "$py" ] || py=python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

elf_files() {  # ELF files under the folders given, one a line
  find "$@" -type f -size +0 -print0 2>/dev/null | "$py" -c '
import sys
for name in sys.stdin.buffer.read().split(b"\0"):
    if not name or b"\n" in name or b"\t" in name: continue
    try:
        with open(name, "rb") as f:
            if f.read(4) == b"\x7fELF": sys.stdout.buffer.write(name + b"\n")
    except OSError: pass
'
}

for g in "${groups[@]}"; do
  case $g in
    corpus) elf_files "$shared/corpus/x86_64-v3-linked" "$shared/corpus/x86_64-v2-linked" | sort > "$tmp/$g.files" ;;
    sweep) elf_files /usr/bin /usr/lib/x86_64-linux-gnu | sort > "$tmp/$g.files" ;;
    llvm) ls /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 > "$tmp/$g.files" ;;
    *) echo "unknown group $g (corpus, sweep, llvm)" >&2; exit 2 ;;
  esac
  [ -s "$tmp/$g.files" ] || { echo "$g: no files" >&2; exit 2; }
  "$bench" < "$tmp/$g.files" > "$tmp/$g.tsv" 2> "$tmp/$g.err" || { cat "$tmp/$g.err" >&2; exit 1; }
done

"$py" - "$tmp" "${groups[@]}" <<'PY'
import collections, os, subprocess, sys
tmp, groups = sys.argv[1], sys.argv[2:]
TECH = ["none", "merge", "mask", "share", "coalesce", "coalesce16", "nocoalesce", "allnocap", "all", "nonshare"]

def readelf_sizes(path):
    """sh_size of .eh_frame, .eh_frame_hdr and .sframe (readelf -SW)."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[0].startswith("[") and parts[1] in (".eh_frame", ".eh_frame_hdr", ".sframe"):
            sizes[parts[1]] = int(parts[5], 16)
    return sizes

def classify(g, v, keys, rows, sizes, parts):
    """Why gen's 'all' section of each file is at or above its .eh_frame +
    .eh_frame_hdr: the first of these byte counts (size_bench's 'parts') that
    alone covers the excess (plus one byte, to be strictly below). An SFrame
    FRE restates its whole row (spec v3 §2.4, §3.1.1): the FP word on every FRE after
    an FP save, where DWARF says DW_CFA_offset once (and DW_CFA_restore_state
    brings a whole row back in one byte); and every FRE of a function whose
    FREs start past byte 255 takes a 2-byte start address (§2.3.3.3), where DWARF's
    advance_loc is 1 byte for up to 63 bytes of code."""
    classes = ["FP words", "wide start addresses", "FP words + wide start addresses",
               "FP words + wide starts + wide data words", "other"]
    count, need_bytes, small = collections.Counter(), collections.Counter(), collections.Counter()
    per_file = []
    for k in keys:
        eh = sizes[k[0]].get(".eh_frame", 0) + sizes[k[0]].get(".eh_frame_hdr", 0)
        if rows[k]["all"] < eh or (k[0], v) not in parts:
            continue
        fp, wide, fdes, fres, ww = parts[(k[0], v)]
        need = rows[k]["all"] - eh + 1
        c = classes[4]
        for name, b in zip(classes, (fp, wide, fp + wide, fp + wide + ww)):
            if b >= need:
                c = name
                break
        count[c] += 1
        need_bytes[c] += need
        small[c] += eh < 1024
        per_file.append((need, k[0], rows[k]["all"], eh, fdes, fres, fp, wide, c))
    if not per_file:
        return
    print(f"  why (v{v}, 'all'; the first part that alone covers the bytes over, +1 to be below):")
    print("  | class | files | of them .eh_frame + hdr < 1 KiB | bytes over (+1 each) |")
    print("  |---|---|---|---|")
    for c in classes:
        if count[c]:
            print(f"  | {c} | {count[c]} | {small[c]} | {need_bytes[c]} |")
    per_file.sort(reverse=True)
    print("  most bytes over: " + "; ".join(
        f"{os.path.basename(f)} {sf} vs {eh} ({fdes} FDEs, {fres} FREs, FP words {fp} B, wide starts {w} B)"
        for _, f, sf, eh, fdes, fres, fp, w, _ in per_file[:5]))
    out = os.environ.get("SIZE_BENCH_OVER")
    if out:  # every file at or above, one a line
        with open(f"{out}.{g}.v{v}.tsv", "w") as o:
            o.write("bytes_over_plus1\tfile\tsframe\teh_frame+hdr\tfdes\tfres\tfp_word_bytes\twide_start_bytes\tclass\n")
            for r in per_file:
                o.write("\t".join(map(str, r)) + "\n")


bad = 0
for g in groups:
    rows = collections.defaultdict(dict)  # (file, source, version) -> technique -> bytes
    walk = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])  # (source, version, technique) -> FDEs, reads, covered, max FREs
    rejected = collections.Counter()
    gnu_version = {}  # file -> version of GNU's own section
    gnu_used = {}  # file -> bytes GNU's section uses (Section::used_size: header, FDEs, FREs)
    parts = {}  # (file, version) -> gen 'all': FP-word bytes, wide start bytes, FDEs, FREs, wide word bytes
    for line in open(os.path.join(tmp, g + ".tsv")):
        f, src, v, t, n, rej, fdes, reads, covered, maxf = line.rstrip("\n").split("\t")
        if src == "gnusec":
            gnu_version[f] = int(v)
            gnu_used[f] = int(n)
            continue
        if src == "parts":
            parts[(f, int(v))] = (int(n), int(rej), int(fdes), int(reads), int(covered))
            continue
        rows[(f, src, int(v))][t] = int(n)
        w = walk[(src, int(v), t)]
        w[0] += int(fdes); w[1] += float(reads); w[2] += float(covered); w[3] = max(w[3], int(maxf))
        rejected[(src, int(v), t)] += int(rej)
    files = sorted({k[0] for k in rows})
    sizes = {f: readelf_sizes(f) for f in files}
    print(f"\n== {g}: {len(files)} files with CFI ==")
    for src in ("gen", "gensame", "gnu"):
        for v in (3, 2):
            keys = [k for k in rows if k[1] == src and k[2] == v and len(rows[k]) == len(TECH)]
            if not keys:
                continue
            tot = {t: sum(rows[k][t] for k in keys) for t in TECH}
            eh = sum(sizes[k[0]].get(".eh_frame", 0) + sizes[k[0]].get(".eh_frame_hdr", 0) for k in keys)
            # GNU's sections of the same version.
            gk = [k for k in keys if ".sframe" in sizes[k[0]] and gnu_version.get(k[0]) == v]
            gnu = sum(sizes[k[0]][".sframe"] for k in gk)
            gnu_all = sum(rows[k]["all"] for k in gk)
            title = {"gen": "gen model (all of the file's CFI)",
                     "gensame": "gen model, like for like (only the functions GNU's section covers)",
                     "gnu": "gnu model (GNU's section re-encoded)"}[src]
            print(f"\n{title}, SFrame v{v}, {len(keys)} files; bytes (ratio to 'none')")
            print("| technique | bytes | x none | x (.eh_frame + .eh_frame_hdr) |" + (" x GNU .sframe |" if gk else "") +
                  " FDEs | FREs read per lookup | most FREs in an FDE |")
            print("|---|---|---|---|" + ("---|" if gk else "") + "---|---|---|")
            for t in TECH:
                label = {"none": "none (narrowest encodings only)", "merge": "merge adjacent FDEs (identical rows)",
                         "mask": "PC-mask FDEs", "share": "FRE-block sharing",
                         "coalesce": "coalesce adjacent FDEs (different rows)",
                         "coalesce16": "coalesce, at most 16 FREs per FDE",
                         "nocoalesce": "merge + mask + share (--optimize-size before coalescing)",
                         "allnocap": "all, coalescing with no FRE limit",
                         "all": "all (--optimize-size, native order)",
                         "nonshare": "all but sharing (libsframe, foreign order)"}[t]
                line = f"| {label} | {tot[t]} | {tot[t] / tot['none']:.3f} | {tot[t] / eh:.3f} |" if eh else \
                       f"| {label} | {tot[t]} | {tot[t] / tot['none']:.3f} | - |"
                if gk:
                    line += f" {sum(rows[k][t] for k in gk) / gnu:.3f} |"
                w = walk[(src, v, t)]
                line += f" {w[0]} | {w[1] / w[2] if w[2] else 0:.2f} | {w[3]} |"
                print(line)
            print(f".eh_frame + .eh_frame_hdr: {eh} bytes" +
                  (f"; GNU's v{v} .sframe ({len(gk)} files; 'x GNU' over these): {gnu} bytes" if gk else ""))
            sets = {3: [("kernel", "all"), ("libsframe", "all"), ("kernel,libsframe (default)", "all"),
                        ("libsframe, foreign byte order", "nonshare")],
                    2: [("glibc", "all"), ("libsframe", "all"), ("glibc,libsframe (default)", "all"),
                        ("libsframe, foreign byte order", "nonshare")]}[v]
            print("per --for set: " + "; ".join(f"{name}: {tot[t]} ({tot[t] / tot['none']:.3f}x)" for name, t in sets))
            rej = {t: rejected[(src, v, t)] for t in TECH if rejected[(src, v, t)]}
            print("rejected by validate(kStrict) or a consumer: " + (str(rej) if rej else "none"))
            bad += sum(rej.values())
            if gk:
                goal_gnu = gnu_all <= 0.9 * gnu
                print(f"goal <= 0.9x GNU: {gnu_all / gnu:.3f}x {'met' if goal_gnu else 'NOT met'}")
                used = sum(gnu_used[k[0]] for k in gk)
                print(f"  against the bytes GNU's sections use (header, FDEs, FREs; {used}): {gnu_all / used:.3f}x")
                if src in ("gen", "gensame"):
                    # The same files and version, gen's other model and GNU's rows re-encoded.
                    other = {"gen": "gensame", "gensame": "gen"}[src]
                    mine = sum(rows[k]["all"] for k in gk)
                    ok = [k for k in gk if len(rows.get((k[0], other, v), {})) == len(TECH)
                          and len(rows.get((k[0], "gnu", v), {})) == len(TECH)]
                    if len(ok) == len(gk):
                        o = sum(rows[(k[0], other, v)]["all"] for k in gk)
                        r = sum(rows[(k[0], "gnu", v)]["all"] for k in gk)
                        raw, lfl = (mine, o) if src == "gen" else (o, mine)
                        print(f"  gen vs GNU, all: raw {raw / gnu:.3f}x, like for like {lfl / gnu:.3f}x "
                              f"(used bytes: {raw / used:.3f}x, {lfl / used:.3f}x); "
                              f"like for like against GNU's rows re-encoded: {lfl / r:.3f}x")
            if eh:
                print(f"goal < .eh_frame + .eh_frame_hdr: {tot['all'] / eh:.3f}x {'met' if tot['all'] < eh else 'NOT met'}")
                for t in ("all", "nonshare"):
                    over = [k[0] for k in keys
                            if rows[k][t] >= sizes[k[0]].get(".eh_frame", 0) + sizes[k[0]].get(".eh_frame_hdr", 0)]
                    print(f"  files at or above their .eh_frame + .eh_frame_hdr ({t}): {len(over)} of {len(keys)}" +
                          (f", e.g. {', '.join(os.path.basename(f) for f in over[:3])}" if over else ""))
                if src == "gen":
                    classify(g, v, keys, rows, sizes, parts)
            if gk:
                over = [k[0] for k in gk if rows[k]["all"] > 0.9 * sizes[k[0]][".sframe"]]
                print(f"  files above 0.9x their GNU section (all): {len(over)} of {len(gk)}")
sys.exit(1 if bad else 0)
PY
