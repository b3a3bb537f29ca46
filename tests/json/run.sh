#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Validates every --json output of the sframe tool against
# docs/sframepp.schema.json (python3-jsonschema), on the whole corpus, on
# error cases, and checks that JSON and text come from the same model (FRE
# counts agree with the text dump).
# Usage: run.sh SFRAME_BIN SOURCE_DIR SHARED_DIR WORKDIR
set -uo pipefail
bin=$1 src=$2 shared=$3 work=$4
mkdir -p "$work"
schema="$src/docs/sframepp.schema.json"
pass=0 fail=0
check() {  # name, json-file
  if python3 - "$schema" "$2" <<'PY'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
doc = json.load(open(sys.argv[2]))
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
for e in errors[:5]:
    print("  ", list(e.path), e.message[:200])
sys.exit(1 if errors else 0)
PY
  then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $1"; fi
}
mapfile -t files < <(find "$shared/corpus" -type f ! -name '*.txt' ! -name '*.sframe' ! -name '*.c' ! -name '*.cpp' | sort)
"$bin" dump --json "${files[@]}" > "$work/dump.json" 2>/dev/null; check dump "$work/dump.json"
"$bin" stat --json "${files[@]}" > "$work/stat.json" 2>/dev/null; check stat "$work/stat.json"
"$bin" verify --json "${files[@]}" /nonexistent > "$work/verify.json" 2>/dev/null; check verify "$work/verify.json"
"$bin" dump --json /nonexistent "$src/README.md" > "$work/dump-err.json" 2>/dev/null; check dump-errors "$work/dump-err.json"
"$bin" stat --json /nonexistent > "$work/stat-err.json" 2>/dev/null; check stat-errors "$work/stat-err.json"
# Raw sections (gen -o, merge -o) are recognized by their magic: RAW[@ADDRESS].
"$bin" dump --json "$shared"/corpus/raw-sections/*.sframe > "$work/dump-raw.json" 2>/dev/null; check dump-raw "$work/dump-raw.json"
"$bin" stat --json "$shared"/corpus/raw-sections/gnu-v3-amd64.sframe@0x1000 > "$work/stat-raw.json" 2>/dev/null; check stat-raw "$work/stat-raw.json"
"$bin" lookup --json /nonexistent 0x10 > "$work/lookup-err.json" 2>/dev/null; check lookup-error "$work/lookup-err.json"
# A bad RAW@ADDRESS is bad usage (exit 2, the README's exit statuses), found
# before the document begins: one document with the error, for each command.
for c in dump stat verify; do
  "$bin" $c --json "$shared"/corpus/raw-sections/gnu-v3-amd64.sframe@zz > "$work/$c-usage.json" 2>/dev/null
  rc=$?
  if [ $rc -ne 2 ]; then fail=$((fail+1)); echo "FAIL $c --json RAW@zz: exit $rc, not 2"; fi
  check "$c-usage" "$work/$c-usage.json"
done
for f in x86_64-v3-linked/usesolib x86_64-v3-linked/realign s390x-v3-O2/basic.o aarch64-v3-pauth/basic.o raw-sections/gnu-v3-s390x.o; do
  "$bin" lookup --json "$shared/corpus/$f" 0x0 0x10 0x1040 0x1190 0x11a0 0x72 0x70 notanumber > "$work/lookup.json" 2>/dev/null
  check "lookup $f" "$work/lookup.json"
done
for f in x86_64-v3-linked/realign x86_64-v2-linked/cxx; do
  "$bin" gen --json --format-version 2 "$shared/corpus/$f" > "$work/gen.json" 2>/dev/null; check "gen $f" "$work/gen.json"
done
# sframe stack on a process of our own (ptrace refused is a failure: the
# stack document would go unchecked).
sleep 30 & sleeper=$!
if "$bin" stack --json "$sleeper" > "$work/stack.json" 2>/dev/null; then
  check stack "$work/stack.json"
  "$bin" stack --json --ignore-sframe --no-generate "$sleeper" > "$work/stack-fp.json" 2>/dev/null; check stack-fp "$work/stack-fp.json"
else
  fail=$((fail+1)); echo "FAIL stack: cannot ptrace a child process here"
fi
kill $sleeper 2>/dev/null
# sframe perf script on the committed recording (its programs are gone:
# frames are [unknown], the document is complete) and on a missing file.
"$bin" perf script --json -i "$src/tests/perf/data/small.data" > "$work/perf.json" 2>/dev/null; check perf-script "$work/perf.json"
"$bin" perf script --json -i /nonexistent > "$work/perf-err.json" 2>/dev/null; check perf-script-error "$work/perf-err.json"
# A record broken in the middle of the data: the streamed document ends
# with the error, still one valid document.
python3 - "$src/tests/perf/data/small.data" "$work/mid.data" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
off, size = struct.unpack_from("<QQ", b, 40)
pos, n = off, 0
while pos < off + size:
    t, m, sz = struct.unpack_from("<IHH", b, pos)
    n += t == 9
    if n == 20:
        struct.pack_into("<H", b, pos + 6, 4)  # a record size below the header's
        break
    pos += sz
open(sys.argv[2], "wb").write(b)
PY
if "$bin" perf script --json -i "$work/mid.data" > "$work/perf-mid.json" 2>/dev/null; then
  fail=$((fail+1)); echo "FAIL perf script --json of a broken record exits 0"
fi
check perf-script-midstream "$work/perf-mid.json"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert list(d)[-1] == "error" and "samples" in d, list(d)' "$work/perf-mid.json" &&
  pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL perf-script-midstream: error not last"; }
head -c 300 "$src/tests/perf/data/small.data" > "$work/cut.data"
"$bin" perf script --json -i "$work/cut.data" > "$work/perf-cut.json" 2>/dev/null; check perf-script-truncated "$work/perf-cut.json"
# verify and stat stream their documents one file at a time: a file that
# fails after others were written (a raw v2 section whose last FDE has FRE
# type 15, spec v2 §2.2.1: 0-2 defined) is one element with its `error`
# last, between complete ones, in one document (read by python's parser).
"$bin" gen --format-version 2 -o "$work/cxx.sframe" "$shared/corpus/x86_64-v2-linked/cxx" > /dev/null 2>&1
read -r last at < <(python3 - "$work/cxx.sframe" "$work/late.sframe" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
magic, version, flags, abi, fp, ra, aux, nfdes, nfres, frelen, fdeoff, freoff = struct.unpack_from("<HBBBbbBIIIII", b, 0)
assert magic == 0xdee2 and version == 2 and nfdes > 1, (hex(magic), version, nfdes)
info = 28 + aux + fdeoff + 20 * (nfdes - 1) + 16  # §2.2: 20-byte FDEs, sfde_func_info at 16
b[info] |= 0x0f
open(sys.argv[2], "wb").write(b)
print(nfdes - 1, hex(info))
PY
)
for cmd in verify stat; do
  "$bin" $cmd --json "$work/cxx.sframe" "$work/late.sframe" "$work/cxx.sframe" > "$work/late-$cmd.json" 2>/dev/null
  rc=$?
  if [ $rc -eq 1 ] && python3 -m json.tool "$work/late-$cmd.json" > /dev/null && python3 - "$work/late-$cmd.json" "$last" "$at" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
f = doc["files"]
bad = f[1]
ok = (len(f) == 3 and list(doc)[-1] == "files" and list(bad)[-1] == "error" and "error" not in f[0] and "error" not in f[2]
      and bad["error"].endswith(f"at byte {sys.argv[3]}, FDE {sys.argv[2]} (value 0xf)"))
sys.exit(0 if ok else 1)
PY
  then check "$cmd with a section damaged at its last FDE" "$work/late-$cmd.json"; else fail=$((fail+1)); echo "FAIL $cmd --json with a section damaged at its last FDE (exit $rc)"; fi
done
# One model, two printers: the FRE rows of the JSON dump equal the text dump's.
python3 - "$work/dump.json" "$bin" <<'PY' && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL json/text agreement"; }
import json, subprocess, sys
doc = json.load(open(sys.argv[1]))
bad = 0
for f in doc["files"]:
    if "section" not in f: continue
    text = subprocess.run([sys.argv[2], "dump", f["file"]], capture_output=True, text=True).stdout
    rows_text = sum(1 for l in text.splitlines() if l.startswith("    ") and len(l) > 20 and l[4:20].strip() and all(c in "0123456789abcdef" for c in l[4:20]))
    rows_json = sum(len(d["fres"]) for d in f["section"]["fdes"])
    if rows_text != rows_json or f["section"]["header"]["num_fres"] != rows_json:
        print("  mismatch", f["file"], rows_text, rows_json); bad += 1
sys.exit(1 if bad else 0)
PY
# A file name that is not UTF-8 (any byte but '/' and NUL may name a file):
# every command still prints one valid document, the name's bad bytes as
# U+FFFD, and exits as it would for the same file under a good name.
bad_name=$(printf '%s/bad-\xff-name.o' "$work")
cp "$shared/corpus/x86_64-v3-O2/basic.o" "$bad_name"
for cmd in dump stat verify; do
  "$bin" $cmd --json "$shared/corpus/x86_64-v3-O2/basic.o" "$bad_name" > "$work/badname-$cmd.json" 2>/dev/null
  rc=$?
  if [ $rc -eq 0 ] && python3 - "$work/badname-$cmd.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
names = [f["file"] for f in doc["files"]]
sys.exit(0 if len(names) == 2 and names[1].endswith("bad-\ufffd-name.o") and "error" not in doc else 1)
PY
  then check "$cmd with a non-UTF-8 file name" "$work/badname-$cmd.json"; else fail=$((fail+1)); echo "FAIL $cmd --json with a non-UTF-8 file name (exit $rc)"; fi
done
# gen with several files writes each summary when its file is done: a file
# that fails between two others is one element with its error, and a name
# that is not UTF-8 is written as U+FFFD (it aborted the whole array).
cp "$shared/corpus/x86_64-v2-linked/cxx" "${bad_name%.o}"
"$bin" gen --json "$shared/corpus/x86_64-v2-linked/cxx" /nonexistent "${bad_name%.o}" > "$work/gen-several.json" 2>/dev/null
rc=$?
if [ $rc -eq 1 ] && python3 -m json.tool "$work/gen-several.json" > /dev/null && python3 - "$work/gen-several.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
ok = (len(a) == 3 and a[1]["file"] == "/nonexistent" and list(a[1])[-2:] == ["error", "seconds"]
      and a[2]["file"].endswith("bad-\ufffd-name") and "error" not in a[0] and "error" not in a[2])
sys.exit(0 if ok else 1)
PY
then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL gen --json with several files, one failing, one not UTF-8 (exit $rc)"; fi

echo "json: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
