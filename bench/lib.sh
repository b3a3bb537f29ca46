# SPDX-License-Identifier: MIT
# Sourced by the perf benchmarks (perf_script_vs_perf.sh, profile_vs_folded.sh):
# measuring a command and summarizing the runs.
#   run NAME CMD...   one measured run of CMD: appends "wall cpu" (seconds)
#                     to the file NAME in the current directory
#   median, spread    of the numbers on standard input
#   ratio A B         median CPU of runs A over runs B ("%.1f", or DIGITS
#                     decimals as a third argument)
#   goal R G OP       "met" or "NOT met" for R OP G (OP: >= or <=)
#   build_workload W  builds workload W (c, cxx, python; $here: the
#                     checkout) into the current directory and sets cmd=(...)

# One measured run: appends "wall cpu" (seconds) to ./$name. CPU time is
# perf stat's task-clock (user + system of the command and its children, to
# the microsecond: GNU time's %U + %S count in 10 ms ticks, coarser than our
# whole run); wall time is its duration_time.
run() {
  local name=$1; shift
  perf stat -x, -e task-clock,duration_time -o t -- "$@" > /dev/null 2> err ||
    { echo "$name failed:" >&2; cat err >&2; exit 1; }
  awk -F, '$3 == "task-clock" { cpu = $1 / 1000 } $3 == "duration_time" { wall = $1 / 1e9 }
           END { printf "%.5f %.6f\n", wall, cpu }' t >> "$name"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4f-%.4f", lo, hi }'; }
ratio() {
  awk -v a="$(awk '{ print $2 }' "$1" | median)" -v b="$(awk '{ print $2 }' "$2" | median)" -v d="${3:-1}" \
    'BEGIN { printf "%.*f", d, (b > 0 ? a / b : 0) }'
}
goal() { awk -v r="$1" -v g="$2" -v op="$3" 'BEGIN { m = op == ">=" ? r >= g : r <= g; print m ? "met" : "NOT met" }'; }

build_workload() {
  local w=$1
  case $w in
    c)
      gcc -O2 -g -fomit-frame-pointer -Wa,--gsframe -o prog "$here/tests/perf/work.c" -lpthread
      cmd=(./prog 110000) ;;
    cxx)
      g++ -O2 -g -fomit-frame-pointer -Wa,--gsframe -o prog "$here/tests/perf/cxx.cpp"
      cmd=(./prog 1300) ;;
    python)
      # The interpreter itself, as tests/record/run.sh runs it: a launcher
      # script found first in PATH (pyenv's shims are bash scripts) would
      # add its shell's processes to every recording.
      cmd=("$(python3.11 -c 'import sys; print(sys.executable)')" -c 'import json
def f(n):
    return sum(len(json.dumps({"k": i, "v": [i] * 8})) for i in range(n))
print(f(1000000))') ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
}
