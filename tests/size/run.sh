#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `--optimize-size` and `--for` of gen, convert and merge on real binaries.
# Truths: the file's DWARF CFI (`sframe verify` compares every row with the
# CFI; `gen --compare-libdw` has shown our CFI reader equal to elfutils libdw
# on the system sweep), each consumer's acceptance rules (`verify --consumer`,
# docs/consumers.md, file rules included for ELF copies), and the section
# gen writes without --optimize-size from the same file: `sframe lookup`
# finds the same rules at every FDE start and end and at every FRE boundary
# (and the byte before it) of that section.
# Usage: run.sh SFRAME_BIN SOURCE_DIR SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 srcdir=$2 shared=$3 work=$4
corpus="$shared/corpus"
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
: "$srcdir"

# same_lookups PLAIN OPT: every boundary PC of PLAIN (a raw section or ELF
# file, as `sframe lookup` takes it) finds the same rules in OPT.
same_lookups() {
  python3 - "$bin" "$1" "$2" <<'PY'
import json, subprocess, sys
bin_, plain, opt = sys.argv[1:]
def run(*a):
    # lookup exits 1 when a PC is not covered; its JSON still says which.
    return json.loads(subprocess.run([bin_, *a], capture_output=True, text=True).stdout)
fdes = run("dump", "--json", plain)["files"][0]["section"]["fdes"]
pcs = set()
for f in fdes:
    start = int(f["start_pc"], 16)
    end = start + f["size"]
    pcs.update({start - 1, start, start + 1, end - 1, end})
    # PC-mask FDEs: every period's FRE boundaries.
    period = f["rep_size"] if f["pc_type"] == "mask" else f["size"] or 1
    for base in range(start, end, period):
        for r in f["fres"]:
            at = base + r["start_offset"]
            pcs.update({at - 1, at})
pcs = sorted(p for p in pcs if p >= 0)
# Large files: every 5th PC (the C++ tests, size_test.cpp, check every PC of
# their inputs); 20,000 lookups per section keep an ASan run short.
if len(pcs) > 20000:
    pcs = pcs[::5]
def rules(path):
    out = {}
    for k in range(0, len(pcs), 4000):
        for r in run("lookup", "--json", path, *[hex(p) for p in pcs[k:k + 4000]])["results"]:
            fre = r.get("fre") if r.get("found") else None
            out[r["pc"]] = None if fre is None else (json.dumps(fre["cfa"]), json.dumps(fre["ra"]), json.dumps(fre["fp"]),
                                                    fre["outermost"], fre["ra_mangled"])
    return out
a, b = rules(plain), rules(opt)
diff = [p for p in a if a[p] != b.get(p)]
for p in diff[:5]:
    print(f"  pc {p}: plain {a[p]}, optimized {b.get(p)}")
print(f"{len(pcs)} PCs, {len(diff)} differ")
sys.exit(1 if diff or not pcs else 0)
PY
}

size_of() { stat -c %s "$1"; }

# 1. gen on programs without .sframe: an ELF copy with the optimized
# section, both versions; DWARF and every consumer of the version (file rules
# included) accept it; lookups equal the plain section's; never larger.
sys_files=(/usr/bin/bash /usr/bin/python3.11 /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/bin/ls)
for f in "${sys_files[@]}"; do
  [ -r "$f" ] || { bad "$f missing (a Debian 12 system file)"; continue; }
  b=$(basename "$f")
  for v in 2 3; do
    n="$b.v$v"
    "$bin" gen --format-version "$v" "$f" -o "$work/$n.plain" >/dev/null 2>"$work/$n.err" || { bad "gen $f: $(cat "$work/$n.err")"; continue; }
    "$bin" gen --format-version "$v" --optimize-size --json "$f" -o "$work/$n.opt" --elf "$work/$n.elf" \
      >"$work/$n.json" 2>"$work/$n.err" || { bad "gen --optimize-size $f: $(cat "$work/$n.err")"; continue; }
    [ "$(size_of "$work/$n.opt")" -le "$(size_of "$work/$n.plain")" ] && ok ||
      bad "$n: optimized $(size_of "$work/$n.opt") > plain $(size_of "$work/$n.plain") bytes"
    # The copy's section is not loaded (gen --elf adds no segment), so the
    # kernel's kernel.section-in-one-load may fail; no other rule may.
    "$bin" verify --consumer all "$work/$n.elf" >"$work/$n.verify" 2>&1
    rules=$(grep -o '\[[a-z0-9.-]*\]' "$work/$n.verify" | sort -u | tr '\n' ' ')
    [ -z "$rules" ] || [ "$rules" = "[kernel.section-in-one-load] " ] && ok ||
      bad "verify --consumer all $n: $rules $(head -5 "$work/$n.verify")"
    grep -q 'format valid\|format ok' "$work/$n.verify" && ok || bad "$n: not valid: $(head -3 "$work/$n.verify")"
    grep -q ' 0 mismatches$' "$work/$n.verify" && ok || bad "$n: rows disagree with DWARF: $(head -3 "$work/$n.verify")"
    grep -q "rules needing the file skipped" "$work/$n.verify" && bad "$n: file rules skipped" || ok
    same_lookups "$work/$n.plain" "$work/$n.opt" >"$work/$n.lookups" 2>&1 && ok ||
      bad "$n: lookups differ: $(cat "$work/$n.lookups")"
    # The summary counts functions and the FDEs that describe them.
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['fdes_out'] <= j['functions_out'] else 1)" \
      "$work/$n.json" && ok || bad "$n: fdes_out > functions_out"
  done
done
# On bash (v3), sharing and merging must have done something.
[ "$(size_of "$work/bash.v3.opt")" -lt "$(size_of "$work/bash.v3.plain")" ] && ok || bad "bash v3: nothing saved"

# 2. --for one consumer: what it accepts (kernel v3, glibc v2).
"$bin" gen --optimize-size --for kernel /usr/bin/bash --elf "$work/bash.kernel" >/dev/null 2>&1 && ok || bad "gen --for kernel"
"$bin" verify --consumer kernel "$work/bash.kernel" >/dev/null 2>&1 && ok || bad "kernel rejects --for kernel"
"$bin" gen --format-version 2 --optimize-size --for glibc /usr/bin/bash --elf "$work/bash.glibc" >/dev/null 2>&1 && ok || bad "gen --for glibc"
"$bin" verify --consumer glibc "$work/bash.glibc" >/dev/null 2>&1 && ok || bad "glibc rejects --for glibc"
# A consumer that does not read the version, an unknown one, --for alone: usage errors.
"$bin" gen --optimize-size --for glibc /usr/bin/bash -o "$work/x" >"$work/usage1" 2>&1
[ $? -eq 2 ] && grep -q "glibc does not read SFrame v3" "$work/usage1" && ok || bad "--for glibc on v3: $(cat "$work/usage1")"
"$bin" gen --optimize-size --for kernel,gdb /usr/bin/bash -o "$work/x" >"$work/usage2" 2>&1
[ $? -eq 2 ] && grep -q "unknown consumer 'gdb'" "$work/usage2" && ok || bad "--for gdb: $(cat "$work/usage2")"
"$bin" gen --for kernel /usr/bin/bash -o "$work/x" >"$work/usage3" 2>&1
[ $? -ne 0 ] && grep -q "optimize-size" "$work/usage3" && ok || bad "--for without --optimize-size: $(cat "$work/usage3")"

# 3. convert: GNU ld's own sections (both versions) made smaller in place;
# the result is checked against the file's DWARF and the consumers.
for d in x86_64-v3-linked x86_64-v2-linked; do
  for f in "$corpus/$d"/*; do
    case $f in *.txt) continue ;; esac
    n="conv.$d.$(basename "$f")"
    v=${d:8:1}
    "$bin" convert --format-version "$v" "$f" -o "$work/$n.plain" >/dev/null 2>"$work/$n.err" || { bad "convert $f: $(cat "$work/$n.err")"; continue; }
    "$bin" convert --format-version "$v" --optimize-size "$f" -o "$work/$n" >/dev/null 2>"$work/$n.err" ||
      { bad "convert --optimize-size $f: $(cat "$work/$n.err")"; continue; }
    "$bin" verify --consumer all "$work/$n" >"$work/$n.verify" 2>&1 && ok || bad "verify --consumer all $n: $(head -5 "$work/$n.verify")"
    grep -q ' 0 mismatches$' "$work/$n.verify" && ok || bad "$n: rows disagree with DWARF: $(head -3 "$work/$n.verify")"
    same_lookups "$work/$n.plain" "$work/$n" >"$work/$n.lookups" 2>&1 && ok || bad "$n: lookups differ: $(cat "$work/$n.lookups")"
    # Never larger than GNU's section (sh_size, readelf).
    gnu=$((16#$(readelf -SW "$f" | awk '$2==".sframe"{print $6}')))
    mine=$((16#$(readelf -SW "$work/$n" | awk '$2==".sframe"{print $6}')))
    [ "$mine" -le "$gnu" ] && ok || bad "$n: $mine bytes > GNU's $gnu"
  done
done

# 4. libsframe in the foreign byte order: GNU as's big-endian s390x section
# (raw) merged at three addresses, so the three FDEs have identical blocks.
# With the default consumers (kernel and libsframe read v3) the blocks stay
# apart and libsframe's flip accepts the section; --for kernel shares them,
# which libsframe rejects (docs/consumers.md). Lookups equal the plain merge.
raw="$corpus/raw-sections/gnu-v3-s390x.sframe"
ins=("$raw@0" "$raw@0x1000" "$raw@0x2000")
"$bin" merge -o "$work/be.plain" "${ins[@]}" >/dev/null 2>"$work/be.err" || bad "merge $raw: $(cat "$work/be.err")"
"$bin" merge --optimize-size -o "$work/be.default" "${ins[@]}" >/dev/null 2>"$work/be.err" && ok || bad "merge --optimize-size $raw: $(cat "$work/be.err")"
"$bin" verify --consumer libsframe "$work/be.default" >"$work/be.v" 2>&1 && ok || bad "libsframe rejects the default: $(cat "$work/be.v")"
"$bin" merge --optimize-size --for kernel -o "$work/be.kernel" "${ins[@]}" >/dev/null 2>&1 && ok || bad "merge --for kernel"
"$bin" verify "$work/be.kernel" >/dev/null 2>&1 && ok || bad "be.kernel fails strict validation"
[ "$(size_of "$work/be.kernel")" -lt "$(size_of "$work/be.default")" ] && ok ||
  bad "--for kernel shares nothing: $(size_of "$work/be.kernel") >= $(size_of "$work/be.default") bytes"
"$bin" verify --consumer libsframe "$work/be.kernel" >"$work/be.kv" 2>&1
[ $? -eq 1 ] && grep -q "libsframe.foreign-lengths" "$work/be.kv" && ok || bad "libsframe accepts shared blocks in foreign order: $(cat "$work/be.kv")"
same_lookups "$work/be.plain" "$work/be.default" >"$work/be.lookups" 2>&1 && ok || bad "be: lookups differ: $(cat "$work/be.lookups")"
same_lookups "$work/be.plain" "$work/be.kernel" >"$work/be.klookups" 2>&1 && ok || bad "be --for kernel: lookups differ: $(cat "$work/be.klookups")"

# 5. merge: two programs' sections merged with --optimize-size.
"$bin" merge -o "$work/merged.plain" "$corpus/x86_64-v3-linked/basic" "$corpus/x86_64-v3-linked/longfn@0x100000" >/dev/null 2>"$work/m.err" || bad "merge: $(cat "$work/m.err")"
"$bin" merge --optimize-size -o "$work/merged.opt" "$corpus/x86_64-v3-linked/basic" "$corpus/x86_64-v3-linked/longfn@0x100000" >/dev/null 2>"$work/m.err" && ok || bad "merge --optimize-size: $(cat "$work/m.err")"
"$bin" verify --consumer all "$work/merged.opt" >"$work/m.v" 2>&1 && ok || bad "merged: $(cat "$work/m.v")"
same_lookups "$work/merged.plain" "$work/merged.opt" >"$work/m.lookups" 2>&1 && ok || bad "merged: lookups differ: $(cat "$work/m.lookups")"

echo "size: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
