# SPDX-License-Identifier: MIT
# Sourced by the perf tests (run.sh, inject.sh): the programs they record and
# how. Needs $here (this folder) and $work (the current directory).
#   build_part PART   builds PART's program(s) into the current directory and
#                     sets cmd=(...) to run it; parts: c, threads, dlopen,
#                     cxx, plt, python, names, exec, static,
#                     static_gsframe, dlopen_debug_frame, clang (run as ${cmd[@]}; perf
#                     record itself run under ${launch[@]}, empty but
#                     for exec)
#   record OUT [perf record options...]
#                     perf record -e cpu-clock --call-graph=dwarf of ${cmd[@]}
#                     (-N unless record_cache=1: see below);
#                     refused (or failing) is a FAILURE with perf's words,
#                     never a skip.

build_part() {
  local cflags=(-O2 -g -fomit-frame-pointer) gsframe=(-Wa,--gsframe)
  launch=()
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
      # The samples taken inside an exec (perf's of prog, prog's of child)
      # hold the old image's user registers, which each perf names its own
      # way: a fixed handful, up to 10 seen under ASan's load. 12,000 loops
      # (~3,000 samples) keep them well under 1%; 3,000 loops did not.
      cmd=(./prog "${2:-12000}" fork "$work/child") ;;
    exec)
      # One process through a chain of execs (Space::settle_exec): pre
      # (work.c with frame pointers) works ~25 ms, execs sh, which execs
      # setarch, which execs prog (the c part's program) for the real work.
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/work.c" -lpthread
      gcc -O1 -g -fno-omit-frame-pointer -o pre "$here/work.c" -lpthread
      # pre's exec of sh carries 50,000 empty arguments (sh's positional
      # parameters, not passed on), which the kernel goes through again
      # after the exec's COMM record, before sh runs: samples there hold
      # pre's user PC (its libc's execve), named by pre's mappings alone
      # (and, pre's stack and sh's in the same place, walked by both perfs).
      # perf 6.1 finds a library's unwind table from the lowest start among
      # the process's mappings of that file (read_unwind_spec_eh_frame),
      # old images' included: with every image placed at random, its walk
      # of a later image goes wrong whenever an earlier libc.so or ld.so lay
      # lower (seen: most of prog's samples stop after
      # __libc_start_call_main). So perf record runs under setarch -R: pre,
      # sh and setarch map their libraries at the top, each replacing the
      # last, and `setarch $(uname -m)` drops that flag, which places
      # prog's at random below them.
      # Under setarch -R, perf 6.1's record dies adding this recording's
      # files to its build-id cache (3 runs in 4 here): record() passes -N.
      launch=(setarch -R)
      cmd=(./pre 1000 exec 50000 /bin/sh -c "exec setarch $(uname -m) ./prog ${2:-30000}") ;;
    clang)
      # A real C++ program of this machine: clang-16 compiling one of our
      # sources, in libclang-cpp and libLLVM (identical code folded: many
      # aliases at one address, zero-sized ones among them; operator
      # templates, conversion operators, thunks).
      local src
      src=$(cd "$here/../.." && pwd)
      cmd=(clang-16 -std=c++20 -O1 -c "$src/src/perf/perf_data.cpp" -I "$src/include" -I "$src/src/perf" -o /dev/null) ;;
    static | static_gsframe)
      # A static executable: GNU ld writes no .eh_frame_hdr for it, so its
      # .eh_frame FDEs are not listed. static: no SFrame at all (generated
      # from .eh_frame whole); static_gsframe: work.c's functions in its own
      # .sframe, libc.a's (main's callers) only in .eh_frame.
      local g=()
      [ "$1" = static_gsframe ] && g=("${gsframe[@]}")
      gcc "${cflags[@]}" "${g[@]}" -static -o prog "$here/work.c" -lpthread
      cmd=(./prog "${2:-4000}") ;;
    dlopen | dlopen_debug_frame)
      gcc "${cflags[@]}" "${gsframe[@]}" -o prog "$here/dl_main.c" -ldl
      # dlopen_debug_frame: the library's CFI in .debug_frame alone (its
      # .eh_frame an empty terminator, no .eh_frame_hdr).
      local cfi=()
      [ "$1" = dlopen_debug_frame ] && cfi=(-fno-asynchronous-unwind-tables)
      gcc "${cflags[@]}" "${cfi[@]}" -shared -fPIC -o libburn.so "$here/dl_lib.c"
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
      # Three times the loops that once gave 9-10 samples in libc's PLT:
      # the check below needs 10.
      cmd=(./prog "${2:-30000}") ;;
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

# perf 6.1's record aborts adding a recording's files to its build-id cache
# (~/.debug), after "assertion failed at util/build-id.c:1010": every time
# while `sframe record` runs (4 runs in 4 here), now and then without
# (perf_script_plt in a ctest run). So -N
# (files not cached) unless the test reads the cache (record_cache=1).
# A recording that fails, that abort or any other (seen in CI: exit 1
# and nothing on stderr under -q), is made again without -q, twice
# at most; the third failure is the test's.
record_cache=0
# A recording that lost records (PERF_RECORD_LOST: perf's reader fell behind
# its 8 KB-a-sample ring) is no oracle: a lost MMAP2 or COMM leaves each perf
# naming the frames of that process its own way (seen: an exec's MMAP2
# records lost, perf naming the new image's code with the old image's
# anonymous mapping there). So the ring is 8 MB a CPU, and a recording that
# lost records anyway is made again, three times at most.
record() { # OUT EXTRA...
  local out=$1 tries=0 lost_tries=0 lost rc cache=(-N) quiet=(-q)
  shift
  [ "$record_cache" = 1 ] && cache=()
  while :; do
    set +e
    "${launch[@]}" perf record "${quiet[@]}" -e cpu-clock --call-graph=dwarf -m 8M "${cache[@]}" "$@" \
        -o "$out" -- "${cmd[@]}" >/dev/null 2>record.err
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then
      # perf 6.1's -q silences its own error messages too: a failure is
      # made again without it, so that the FAIL below carries perf's words.
      if [ $((tries += 1)) -le 2 ]; then
        echo "perf record failed (exit $rc$([ -s record.err ] && echo ": $(head -c 300 record.err | tr '\n' ' ')")): again"
        quiet=()
        continue
      fi
      echo "FAIL: perf record failed (exit $rc), three times (perf_event_open refused?):"
      sed 's/^/  | /' record.err
      echo "  perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null), uid=$(id -u)," \
        "free here: $(df -Ph . | awk 'NR == 2 { print $4 }')"
      exit 1
    fi
    lost=$(perf report -i "$out" --stats 2>/dev/null | awk '$1 == "LOST" && $2 == "events:" { print $3; exit }')
    if [ "${lost:-0}" -gt 0 ] && [ $((lost_tries += 1)) -le 3 ]; then
      echo "perf record lost records ($lost PERF_RECORD_LOST): again"
      continue
    fi
    break
  done
}
