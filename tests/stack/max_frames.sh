#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe stack -n N` against eu-stack -n N, on a thread parked 300 calls
# deep (deep.c) and on stacktest (5 threads, 5 to 9 frames each):
#   -n 0      unlimited: all 300+ frames, the same PCs as eu-stack -n 0, exit 0
#   default   256 frames, then (as eu-stack) "tid T: shown max number of
#             frames (256, use -n 0 for unlimited)" on stderr and exit 1
#   -n 2      stdout identical to eu-stack -n 2, the same stderr lines
#             (apart from the program name) and the same exit status 1;
#             JSON "truncated": true
#   -n 100    stacktest's stacks are all shorter: nothing said, exit 0
#             (eu-stack announces a cut also for a stack of exactly N frames,
#             which it cannot tell from a longer one; sframe walks one frame
#             further and announces only real cuts)
# Usage: max_frames.sh SFRAME_BIN WORKDIR. A missing tool or ptrace permission
# is a failure.
source "$(dirname "$0")/preamble.sh"
require_oracles gcc eu-stack python3

park() {  # park LABEL PROGRAM -> $target
  "$2" > "$work/$1.ready" 2>&1 &
  target=$!; pids+=($target)
  for _ in $(seq 200); do grep -q ready "$work/$1.ready" 2>/dev/null && break; sleep 0.05; done
  grep -q ready "$work/$1.ready" || { bad "$1: did not get ready"; return 1; }
  sleep 0.3
}
# run NAME CMD...: stdout to NAME.out, stderr to NAME.err, status to NAME.rc
run() { local n=$1; shift; "$@" > "$work/$n.out" 2> "$work/$n.err"; echo $? > "$work/$n.rc"; }
pcs() { grep -E '^#[0-9]+ ' "$1" | awk '{print $2}'; }
# stderr without the program-name prefix
said() { sed -E 's/^(eu-stack|sframe: stack): //' "$1"; }

gcc -O2 -Wa,--gsframe -o "$work/deep" "$here/deep.c" || { echo "FAIL: compile deep"; exit 1; }
if park deep "$work/deep"; then
  run eu0 eu-stack -n 0 -p "$target"
  run sf0 "$bin" stack -n 0 "$target"
  n_eu=$(pcs "$work/eu0.out" | wc -l) n_sf=$(pcs "$work/sf0.out" | wc -l)
  echo "deep -n 0: eu-stack $n_eu frames (exit $(cat "$work/eu0.rc")), sframe $n_sf frames (exit $(cat "$work/sf0.rc"))"
  [ "$n_eu" -gt 256 ] && ok || bad "deep: eu-stack -n 0 shows only $n_eu frames (premise)"
  [ "$(cat "$work/eu0.rc")" = 0 ] || bad "deep: eu-stack -n 0 exit $(cat "$work/eu0.rc") (premise)"
  diff <(pcs "$work/eu0.out") <(pcs "$work/sf0.out") > /dev/null && ok || bad "deep -n 0: PCs differ from eu-stack -n 0"
  [ "$(cat "$work/sf0.rc")" = 0 ] && [ ! -s "$work/sf0.err" ] && ok || bad "deep -n 0: exit $(cat "$work/sf0.rc"), stderr: $(cat "$work/sf0.err")"
  run eud eu-stack -p "$target"
  run sfd "$bin" stack "$target"
  [ "$(pcs "$work/sfd.out" | wc -l)" = 256 ] && diff <(pcs "$work/eud.out") <(pcs "$work/sfd.out") > /dev/null && ok ||
    bad "deep default: not eu-stack's 256 frames"
  [ "$(cat "$work/sfd.rc")" = "$(cat "$work/eud.rc")" ] && [ "$(cat "$work/sfd.rc")" = 1 ] && ok ||
    bad "deep default: exit sframe $(cat "$work/sfd.rc"), eu-stack $(cat "$work/eud.rc")"
  diff <(said "$work/eud.err") <(said "$work/sfd.err") && ok || bad "deep default: stderr differs from eu-stack's"
  echo "deep default: sframe says on stderr: $(cat "$work/sfd.err")"
  "$bin" stack --json "$target" > "$work/deep.json" 2>/dev/null
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["threads"][0]; sys.exit(0 if t["truncated"] and len(t["frames"])==256 and t["stop"]["reason"]=="kDepthLimit" else 1)' \
    "$work/deep.json" && ok || bad "deep --json: not truncated at 256"
  { kill -9 "$target"; wait "$target"; } 2>/dev/null
fi

gcc -O2 -fomit-frame-pointer -Wa,--gsframe -fPIC -shared -o "$work/libstacklib.so" "$here/stacklib.c" &&
  gcc -O2 -fomit-frame-pointer -Wa,--gsframe -o "$work/stacktest" "$here/stacktest.c" -L"$work" -lstacklib -Wl,-rpath,'$ORIGIN' -pthread ||
  { echo "FAIL: compile stacktest"; exit 1; }
if park stacktest "$work/stacktest"; then
  run eu2 eu-stack -n 2 -p "$target"
  run sf2 "$bin" stack -n 2 "$target"
  diff "$work/eu2.out" "$work/sf2.out" && ok || bad "-n 2: stdout differs from eu-stack -n 2"
  diff <(said "$work/eu2.err") <(said "$work/sf2.err") && ok || bad "-n 2: stderr differs from eu-stack's"
  [ "$(cat "$work/sf2.rc")" = "$(cat "$work/eu2.rc")" ] && [ "$(cat "$work/sf2.rc")" = 1 ] && ok ||
    bad "-n 2: exit sframe $(cat "$work/sf2.rc"), eu-stack $(cat "$work/eu2.rc")"
  echo "-n 2: $(grep -c '^#' "$work/sf2.out") frames shown, $(wc -l < "$work/sf2.err") threads announced, exit $(cat "$work/sf2.rc") (eu-stack: $(wc -l < "$work/eu2.err"), exit $(cat "$work/eu2.rc"))"
  "$bin" stack -n 2 --json "$target" > "$work/n2.json" 2>/dev/null; rc=$?
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if all(t["truncated"] and len(t["frames"])==2 for t in d["threads"]) else 1)' \
    "$work/n2.json" && [ $rc = 1 ] && ok || bad "-n 2 --json: not every thread truncated at 2 (exit $rc)"
  python3 - "$here/../../docs/sframepp.schema.json" "$work/n2.json" <<'PY' && ok || bad "-n 2 --json does not validate against the schema"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))
PY
  run sf100 "$bin" stack -n 100 "$target"
  [ "$(cat "$work/sf100.rc")" = 0 ] && [ ! -s "$work/sf100.err" ] && ok || bad "-n 100: exit $(cat "$work/sf100.rc"), stderr: $(cat "$work/sf100.err")"
  run eu100 eu-stack -n 100 -p "$target"
  diff "$work/eu100.out" "$work/sf100.out" > /dev/null && ok || bad "-n 100: stdout differs from eu-stack -n 100"
  { kill -9 "$target"; wait "$target"; } 2>/dev/null
fi

echo "max_frames: $pass passed, $fail failed"
[ $fail -eq 0 ]
