#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe stack -s -i PID` (source lines and inline frames from DWARF) against
# `eu-stack -s -i -p PID` on the same parked process: stacktest.c and
# stacklib.c compiled with -g -O2 (park_in_pause inlined into f3; nap_inner
# and nap_outer inlined into lib_g3), libc's lines from libc6-dbg's debug
# file found by build ID under /usr/lib/debug.
#   -s -i --json  frames (inline ones included), PCs, function names and
#                 file:line:column, frame by frame (source_lines.py)
#   -s -i, -s, -i text output identical to eu-stack's with the same flags
# Usage: source.sh SFRAME_BIN WORKDIR. A missing tool, debug file or ptrace
# permission is a failure (CI runs as root, where all of it works).
source "$(dirname "$0")/preamble.sh"
require_oracles gcc eu-stack python3
ls /usr/lib/debug/.build-id/*/*.debug > /dev/null 2>&1 || { echo "FAIL: no debug files under /usr/lib/debug (libc6-dbg)"; exit 1; }

cflags="-g -O2 -fomit-frame-pointer"
gcc $cflags -Wa,--gsframe -fPIC -shared -o "$work/libstacklib.so" "$here/stacklib.c" &&
  gcc $cflags -Wa,--gsframe -o "$work/stacktest" "$here/stacktest.c" -L"$work" -lstacklib -Wl,-rpath,'$ORIGIN' -pthread ||
  { echo "FAIL: compile stacktest"; exit 1; }

"$work/stacktest" > "$work/ready.txt" 2>&1 &
target=$!; pids+=($target)
for _ in $(seq 200); do grep -q ready "$work/ready.txt" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$work/ready.txt" || { echo "FAIL: stacktest did not get ready"; exit 1; }
sleep 0.3

o="$work/si"
"$bin" stack -s -i --json "$target" > "$o.json" 2> "$o.err" || bad "sframe stack -s -i --json: $(cat "$o.err")"
eu-stack -s -i -p "$target" > "$o.eu" 2> "$o.eu.err" || bad "eu-stack -s -i: exit $? $(cat "$o.eu.err")"
python3 "$here/source_lines.py" "$o.json" "$o.eu" "-s -i" && ok || bad "-s -i: frames, functions or lines differ"
# The text, flag for flag, as eu-stack prints it.
for flags in "-s -i" "-s" "-i"; do
  t="$work/text${flags// /}"
  "$bin" stack $flags "$target" > "$t.ours" 2>&1 || bad "sframe stack $flags: exit status"
  eu-stack $flags -p "$target" > "$t.eu" 2>&1
  if diff "$t.eu" "$t.ours" > "$t.diff"; then
    ok; echo "text $flags: identical to eu-stack ($(grep -c '^#' "$t.ours") frames, $(grep -c '^    ' "$t.ours") source lines)"
  else
    bad "text $flags differs from eu-stack:"; head -40 "$t.diff"
  fi
done
# The inline frames are the intended ones: park_in_pause in f3, and
# nap_inner inside nap_outer inside lib_g3, with the call sites' lines.
python3 - "$o.json" "$here" <<'PY' && ok || bad "inline frames of f3 / lib_g3 not as in the sources"
import json, sys
d = json.load(open(sys.argv[1])); here = sys.argv[2]
def lineno(path, text):
    return next(i for i, l in enumerate(open(path), 1) if text in l)
want = {"f3": ("park_in_pause", [("f3", "stacktest.c", lineno(here + "/stacktest.c", "park_in_pause();"))]),
        "lib_g3": ("nap_inner", [("nap_outer", "stacklib.c", lineno(here + "/stacklib.c", "nap_inner(ts);")),
                                 ("lib_g3", "stacklib.c", lineno(here + "/stacklib.c", "nap_outer(&ts);"))])}
seen = set()
for t in d["threads"]:
    for fr in t.get("frames", []):
        w = want.get(fr.get("symbol"))
        if not w:
            continue
        got = (fr.get("function"), [(i["function"], i.get("file", "").rsplit("/", 1)[-1], i.get("line")) for i in fr.get("inlined_into", [])])
        if got != w:
            print(f"  {fr['symbol']}: {got}, want {w}"); sys.exit(1)
        seen.add(fr["symbol"])
sys.exit(0 if seen == set(want) else 1)
PY

# The JSON (file, line, column, function, inlined_into) against the schema.
python3 - "$here/../../docs/sframepp.schema.json" "$o.json" <<'PY' && ok || bad "-s -i --json does not validate against docs/sframepp.schema.json"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))
PY

echo "source: $pass passed, $fail failed"
[ $fail -eq 0 ]
