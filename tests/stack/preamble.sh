# SPDX-License-Identifier: MIT
# Sourced by the stack tests that fail, never skip, when an oracle or ptrace
# is missing (chain.sh, max_frames.sh, source.sh): arguments SFRAME_BIN
# WORKDIR, a fresh WORKDIR, pass/fail counters (ok, bad), child processes in
# `pids` killed on exit, and `require_oracles TOOL...` (the tools, then a
# ptrace of a child).
set -uo pipefail
bin=$1 work=$2
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
rm -rf "$work"; mkdir -p "$work"
pass=0 fail=0
# Under AddressSanitizer, a report must not pass for an ordinary exit 1.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

require_oracles() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (the oracle is missing)"; exit 1; }
  done
  sleep 30 & local probe=$!; pids+=($probe)
  local out
  if ! out=$("$bin" stack "$probe" 2>&1); then
    echo "FAIL: cannot ptrace a child process here: $out"
    exit 1
  fi
  kill $probe 2>/dev/null
}
