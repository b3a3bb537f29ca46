# SPDX-License-Identifier: MIT
# Sourced by the perf tests (run.sh, inject.sh): the programs they record and
# how. Needs $here (this folder) and $work (the current directory).
#   build_part PART   builds PART's program(s) into the current directory and
#                     sets cmd=(...) to run it; parts: c, threads, dlopen,
#                     cxx, plt, python, names (run as ${cmd[@]})
#   record OUT [perf record options...]
#                     perf record -e cpu-clock --call-graph=dwarf of ${cmd[@]};
#                     refused (or failing) is a FAILURE with perf's words,
#                     never a skip.

build_part() {
  local cflags=(-O2 -g -fomit-frame-pointer) gsframe=(-Wa,--gsframe)
  case $1 in
    c)
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/work.c" -lpthread
      cmd=(./prog "${2:-4000}") ;;
    threads)
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/work.c" -lpthread
      # The exec'd child: another file (built with frame pointers).
      gcc -O1 -g -fno-omit-frame-pointer -o child "$here/work.c" -lpthread
      # The child runs a 200th of the parent's loops: perf 6.1 keeps a
      # process's libunwind state across exec, so its own unwinding of an
      # exec'd child stops early in libc or runs into the parent's [stack]
      # (seen here: ~25% of the samples when the child works as long as the
      # parent; with setarch -R, every process exec'd after a sample). The
      # child's few samples are listed by compare.py with that reason.
      cmd=(./prog 3000 fork "$work/child") ;;
    dlopen)
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/dl_main.c" -ldl
      gcc "${cflags[@]}" -shared -fPIC -o libburn.so "$here/dl_lib.c"
      cmd=(./prog "$work/libburn.so" 4000) ;;
    cxx)
      g++ "${cflags[@]}" "${gsframe[@]}" -o prog "$here/cxx.cpp"
      cmd=(./prog "${2:-60}") ;;
    names)
      # Demangled names with '<', '>', '&' and '"' (tests/perf/profile.sh).
      g++ "${cflags[@]}" "${gsframe[@]}" -std=c++20 -o prog "$here/names.cpp"
      cmd=(./prog "${2:-40}") ;;
    plt)
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/plt.c"
      cmd=(./prog 10000) ;;
    python)
      # python3 (a non-PIE interpreter on Debian, pyenv's shared libpython
      # elsewhere) with libc, libm, libz and libexpat in its frames.
      cat >work.py <<'PY'
import hashlib, json, zlib, xml.etree.ElementTree as ET
d = {"k%d" % i: list(range(i % 50)) for i in range(3000)}
for _ in range(25):
    s = json.dumps(d)
    hashlib.sha256(zlib.compress(s.encode())).hexdigest()
    json.loads(s)
    ET.fromstring("<r>" + "".join("<a b='%d'/>" % i for i in range(2000)) + "</r>")
PY
      # The interpreter itself: a version manager's shim (pyenv's) would put
      # its chain of execs in the recording, samples inside execve that the
      # perfs name differently.
      cmd=("$(python3 -c 'import sys; print(sys.executable)')" work.py) ;;
    *) echo "unknown part $1" >&2; exit 2 ;;
  esac
}

record() { # OUT EXTRA...
  local out=$1
  shift
  if ! perf record -q -e cpu-clock --call-graph=dwarf "$@" -o "$out" -- "${cmd[@]}" >/dev/null 2>record.err; then
    echo "FAIL: perf record failed (perf_event_open refused?):"
    sed 's/^/  | /' record.err
    echo "  perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null), uid=$(id -u)"
    exit 1
  fi
}
