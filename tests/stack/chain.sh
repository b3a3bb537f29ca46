#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `sframe stack PID`: the unwind source chain per PC and threads fresh out
# of clone3, against eu-stack and /proc/PID/maps.
#   mixed         a program whose mixed_main.c is assembled with --gsframe
#                 and mixed_helper.c without, parked in pause() 6 frames deep
#                 through both files: its own SFrame covers the m* frames,
#                 SFrame generated from its .eh_frame the h* frames. The
#                 frames must equal eu-stack's.
#   static-pie    the same two objects linked -static-pie (libc.a has no
#                 SFrame: generated from .eh_frame inside the same module).
#   clone3        a thread stopped before its first instruction after clone3
#                 (clonestop.c): frame 0 as eu-stack's, and no invented
#                 frame (every PC in an executable mapping).
#   clone-loop    stacktest chaos (a thread creating threads in a loop),
#                 traced 20 times: every PC in an executable mapping.
# Usage: chain.sh SFRAME_BIN WORKDIR. A missing tool or ptrace permission is
# a failure (CI runs as root, where all of it works).
source "$(dirname "$0")/preamble.sh"
require_oracles gcc eu-stack python3 objdump

cflags="-O2 -fomit-frame-pointer"
gcc $cflags -Wa,--gsframe -c -o "$work/main.o" "$here/mixed_main.c" &&
  gcc $cflags -c -o "$work/helper.o" "$here/mixed_helper.c" &&
  gcc -o "$work/mixed" "$work/main.o" "$work/helper.o" || { echo "FAIL: compile mixed"; exit 1; }
# The premise: the program has an SFrame section, helper.o contributed none.
objdump -h "$work/main.o" | grep -q '\.sframe' && ! objdump -h "$work/helper.o" | grep -q '\.sframe' &&
  objdump -h "$work/mixed" | grep -q '\.sframe' && ok || bad "mixed: SFrame sections not as intended"

park() {  # park LABEL PROGRAM -> $target
  "$2" > "$work/$1.ready" 2>&1 &
  target=$!; pids+=($target)
  for _ in $(seq 200); do grep -q ready "$work/$1.ready" 2>/dev/null && break; sleep 0.05; done
  grep -q ready "$work/$1.ready" || { bad "$1: did not get ready"; return 1; }
  sleep 0.2
}

same_as_eu() {  # LABEL: $target's main thread, sframe vs eu-stack
  local o="$work/$1"
  "$bin" stack --json "$target" > "$o.json" 2> "$o.err" || { bad "$1: sframe stack: $(cat "$o.err")"; return; }
  "$bin" stack -v -m "$target" > "$o.txt" 2>&1
  eu-stack -p "$target" > "$o.eu" 2>&1
  python3 "$here/frames.py" same "$o.json" "$o.eu" "$target" "$1" && ok || { bad "$1"; cat "$o.txt"; }
  # The h* frames are stepped with generated SFrame, the m* frames with the
  # program's own section (the tag names the rule of the frame's own PC).
  for f in h1 h2; do grep -Eq "^#[0-9]+ +0x[0-9a-f]+ $f .*\[generated\]$" "$o.txt" && ok || bad "$1: $f not [generated]"; done
  for f in m1 m2 m3; do grep -Eq "^#[0-9]+ +0x[0-9a-f]+ $f .*\[sframe\]$" "$o.txt" && ok || bad "$1: $f not [sframe]"; done
}

if park mixed "$work/mixed"; then
  same_as_eu mixed
  { kill -9 "$target"; wait "$target"; } 2>/dev/null
fi

if gcc -static-pie -o "$work/mixed-static" "$work/main.o" "$work/helper.o" 2> "$work/static.err"; then
  if park static-pie "$work/mixed-static"; then
    same_as_eu static-pie
    { kill -9 "$target"; wait "$target"; } 2>/dev/null
  fi
else
  bad "static-pie: cannot link: $(head -3 "$work/static.err")"
fi

# --- A thread stopped right after clone3 ----------------------------------
gcc -O2 -o "$work/clonestop" "$here/clonestop.c" -pthread || { echo "FAIL: compile clonestop"; exit 1; }
"$work/clonestop" > "$work/clonestop.out" 2> "$work/clonestop.err" &
harness=$!; pids+=($harness)
for _ in $(seq 100); do [ -s "$work/clonestop.out" ] && break; sleep 0.05; done
if read -r cpid ctid < "$work/clonestop.out" && [ -n "${ctid:-}" ]; then
  pids+=($cpid)
  states=$(cat /proc/$cpid/task/*/stat 2>/dev/null | awk '{print $3}' | sort -u | tr -d '\n')
  [ "$states" = T ] && ok || bad "clone3: the process is not stopped (states: $states)"
  o="$work/clone3"
  "$bin" stack --json "$cpid" > "$o.json" 2> "$o.err" || bad "clone3: sframe stack: $(cat "$o.err")"
  "$bin" stack -v "$cpid" > "$o.txt" 2>&1
  eu-stack -p "$cpid" > "$o.eu" 2>&1
  cp /proc/$cpid/maps "$o.maps"
  python3 "$here/frames.py" first "$o.json" "$o.eu" "$ctid" clone3 clone3 && ok || bad "clone3: frame 0"
  python3 "$here/frames.py" exec "$o.json" "$o.maps" clone3 && ok || { bad "clone3: invented frame"; cat "$o.txt"; }
  # Left as found: stopped, untraced.
  traced=$(grep -l "TracerPid:[[:space:]]*[1-9]" /proc/$cpid/task/*/status 2>/dev/null | wc -l)
  [ "$traced" -eq 0 ] && ok || bad "clone3: $traced threads still traced"
else
  bad "clone3: harness: $(cat "$work/clonestop.err")"
fi
kill -TERM $harness 2>/dev/null; wait $harness 2>/dev/null

# --- Threads created in a loop ----------------------------------------------
gcc $cflags -Wa,--gsframe -fPIC -shared -o "$work/libstacklib.so" "$here/stacklib.c" &&
  gcc $cflags -Wa,--gsframe -o "$work/stacktest" "$here/stacktest.c" -L"$work" -lstacklib -Wl,-rpath,'$ORIGIN' -pthread ||
  { echo "FAIL: compile stacktest"; exit 1; }
"$work/stacktest" chaos > "$work/chaos.ready" 2>&1 &
target=$!; pids+=($target)
for _ in $(seq 200); do grep -q ready "$work/chaos.ready" 2>/dev/null && break; sleep 0.05; done
if grep -q ready "$work/chaos.ready"; then
  cp /proc/$target/maps "$work/chaos.maps"
  for i in $(seq 20); do
    "$bin" stack --json "$target" > "$work/chaos.$i.json" 2> "$work/chaos.$i.err" || { bad "clone-loop $i: $(cat "$work/chaos.$i.err")"; continue; }
    python3 "$here/frames.py" exec "$work/chaos.$i.json" "$work/chaos.maps" "clone-loop $i" > "$work/chaos.$i.check" && ok ||
      bad "$(sed "s/^FAIL //" "$work/chaos.$i.check")"
  done
  tail -1 "$work/chaos.20.check"
else
  bad "clone-loop: stacktest did not get ready"
fi
{ kill -9 "$target"; wait "$target"; } 2>/dev/null

echo "chain: $pass passed, $fail failed"
[ $fail -eq 0 ]
