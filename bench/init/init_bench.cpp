// SPDX-License-Identifier: MIT
// backtrace_init's cost as a program sees it: wall and CPU time of the call,
// the RSS it adds, and the first backtrace after it; then the same until
// every module is ready (backtrace_wait_ready(): the background generator
// done); beside libunwind's first unw_backtrace in the same process set-up. Each measurement runs in a fresh
// process (this program re-executed), so nothing is warm but the page cache.
//
// Cases:
//   c++   this program as linked: libstdc++, libm, libgcc_s, libc (and
//         whatever the backtrace library itself pulls in);
//   llvm  the same with libLLVM-14 dlopen'ed before the measurement;
//   c++-fde, llvm-fde  the same with BacktraceOptions::stack_libraries_per_fde
//         (libc only for its functions on the stack at init).
// libunwind is dlopen'ed only in its own children, so the sframepp children
// do not carry its modules.
//
// Usage: init_bench [RUNS] [--case c++|llvm|c++-fde|llvm-fde]...   (RUNS defaults to 7;
// c++ and llvm when no case is named)
// INIT_BENCH_SMAPS=1 in a child (init_bench --child sframepp c++|llvm)
// prints the RSS added per mapping; INIT_BENCH_REPORT=1 each module's
// outcome; INIT_BENCH_KEEP_CFI=1 sets BacktraceOptions::release_cfi_pages
// to false. After ready, each sframepp child times a first C++ throw/catch
// (CPU, minor page faults): what the program pays when the .eh_frame pages
// init gave back are mapped again.
// RSS is read from /proc/self/smaps_rollup (exact; see read_rss()); the
// init figure with the background thread started just after that reading
// (BacktraceOptions::defer_background_start), so that it holds init's pages
// alone, the ready figure once the thread is done.
// Prints medians (min-max) per case and the ratios. Never asserts a speed.
#include <dlfcn.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sframe/backtrace/backtrace.hpp"

namespace {

constexpr const char* kLlvm = "libLLVM-14.so.1";

double now_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Resident KiB of the process, from /proc/self/smaps_rollup (Rss: every
// resident page; Anonymous: its anonymous part, heap and stacks; the rest is
// file pages, such as the .eh_frame bytes generation reads and the code the
// calls run). Not VmRSS/RssAnon of /proc/self/status: since Linux 6.2 those
// read per-CPU counters without summing them (proc(5): "inaccurate ... use
// /proc/pid/smaps_rollup"), off by up to 32 pages per CPU per counter,
// large against the figure measured. smaps_rollup walks the page
// tables: exact at the time of reading.
struct Rss {
  long kib = -1;
  long anon_kib = -1;
};

Rss read_rss() {
  Rss r;
  FILE* f = std::fopen("/proc/self/smaps_rollup", "re");
  if (!f) return r;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "Rss:", 4) == 0) r.kib = std::strtol(line + 4, nullptr, 10);
    if (std::strncmp(line, "Anonymous:", 10) == 0) r.anon_kib = std::strtol(line + 10, nullptr, 10);
  }
  std::fclose(f);
  return r;
}

// Resident KiB per mapping (/proc/self/smaps), keyed by "start-end name",
// for INIT_BENCH_SMAPS: where the RSS a measurement adds lives (heap and
// anonymous memory, the thread stack, file pages of .eh_frame read in).
std::vector<std::pair<std::string, long>> smaps_rss() {
  std::vector<std::pair<std::string, long>> out;
  FILE* f = std::fopen("/proc/self/smaps", "re");
  if (!f) return out;
  char line[512];
  std::string key;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long b = 0, e = 0;
    char perms[8] = {};
    int name_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &b, &e, perms, &name_at) == 3 && name_at > 0) {
      std::string name = line + name_at;
      if (!name.empty() && name.back() == '\n') name.pop_back();
      char buf[64];
      std::snprintf(buf, sizeof buf, "%lx-%lx %s ", b, e, perms);
      key = buf + name;
    } else if (std::strncmp(line, "Rss:", 4) == 0) {
      out.emplace_back(key, std::strtol(line + 4, nullptr, 10));
    }
  }
  std::fclose(f);
  return out;
}

// malloc's view (all arenas): bytes in use, free but kept, mmapped.
void print_malloc_stats(const char* when) {
  const struct mallinfo2 mi = mallinfo2();
  std::fprintf(stderr, "malloc %s: in use %zu KiB, free kept %zu KiB (releasable at top %zu KiB), mmapped %zu KiB\n",
               when, (mi.uordblks) / 1024, mi.fordblks / 1024, mi.keepcost / 1024, mi.hblkhd / 1024);
}

void print_smaps_delta(const std::vector<std::pair<std::string, long>>& before,
                       const std::vector<std::pair<std::string, long>>& after) {
  std::vector<std::pair<long, std::string>> d;
  for (const auto& [k, v] : after) {
    long old = 0;
    for (const auto& [k0, v0] : before)
      if (k0 == k) old = v0;
    if (v != old) d.emplace_back(v - old, k);
  }
  std::sort(d.begin(), d.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [kib, k] : d) std::fprintf(stderr, "  %+7ld KiB %s\n", kib, k.c_str());
}

struct Sample {
  // backtrace_init(): wall, the calling thread's CPU, the RSS it added.
  double init_wall_us = 0, init_cpu_us = 0;
  long init_rss_kib = 0, init_anon_kib = 0;
  // Until every module is ready (backtrace_wait_ready()): wall, the whole
  // process's CPU (the background generator's included), RSS added.
  double ready_wall_us = 0, ready_cpu_us = 0;
  long ready_rss_kib = 0, ready_anon_kib = 0;
  double first_walk_us = 0;
  std::size_t frames = 0;
  double throw_cpu_us = 0;  // first throw/catch after ready
  long throw_minflt = 0;
};

[[gnu::noinline]] void thrower(int v) {
  if (v >= 0) throw std::runtime_error("init_bench");
}

long minflt() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

bool g_per_fde = false;  // the case's BacktraceOptions::stack_libraries_per_fde

[[gnu::noinline]] Sample measure_sframepp() {
  Sample s;
  const bool smaps = std::getenv("INIT_BENCH_SMAPS") != nullptr;
  const auto maps0 = smaps ? smaps_rss() : std::vector<std::pair<std::string, long>>();
  if (smaps) print_malloc_stats("before");
  const Rss rss0 = read_rss();
  const double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID),
               p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  sframe::BacktraceOptions options;
  options.stack_libraries_per_fde = g_per_fde;
  options.release_cfi_pages = std::getenv("INIT_BENCH_KEEP_CFI") == nullptr;
  // The background thread starts right after the reading below rather than
  // at init's end, so that the reading (a walk of the page tables, about a
  // millisecond, while a started thread would be adding its pages) holds
  // init's alone. The timeline is otherwise the default one's; what runs
  // between init and the start (the reading, the first walk) is left out
  // of the ready figures.
  options.defer_background_start = true;
  auto ok = sframe::backtrace_init(options);
  const double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  const Rss rss1 = read_rss();
  s.init_rss_kib = rss1.kib - rss0.kib;
  s.init_anon_kib = rss1.anon_kib - rss0.anon_kib;
  if (smaps) {
    std::fprintf(stderr, "RSS added by backtrace_init(), by mapping:\n");
    print_smaps_delta(maps0, smaps_rss());
    print_malloc_stats("after backtrace_init()");
  }
  if (!ok) std::fprintf(stderr, "backtrace_init: %s\n", sframe::backtrace_report().message().c_str());
  void* out[256];
  const double b0 = now_ns(CLOCK_MONOTONIC);
  s.frames = sframe::backtrace(out);
  s.first_walk_us = (now_ns(CLOCK_MONOTONIC) - b0) / 1e3;
  const double gap_wall = now_ns(CLOCK_MONOTONIC) - w1, gap_cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - c1;
  sframe::backtrace_start_background();
  sframe::backtrace_wait_ready();
  const double w2 = now_ns(CLOCK_MONOTONIC) - gap_wall, p2 = now_ns(CLOCK_PROCESS_CPUTIME_ID) - gap_cpu;
  const Rss rss2 = read_rss();
  s.ready_rss_kib = rss2.kib - rss0.kib;
  s.ready_anon_kib = rss2.anon_kib - rss0.anon_kib;
  if (smaps) {
    std::fprintf(stderr, "RSS added until ready, by mapping:\n");
    print_smaps_delta(maps0, smaps_rss());
    print_malloc_stats("when ready");
  }
  if (std::getenv("INIT_BENCH_REPORT"))
    for (const auto& m : sframe::backtrace_report().modules)
      std::fprintf(stderr, "  %s: %s\n", m.name.c_str(), m.reason.c_str());
  const long f0 = minflt();
  const double t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  try {
    thrower(1);
  } catch (const std::runtime_error&) {
  }
  s.throw_cpu_us = (now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e3;
  s.throw_minflt = minflt() - f0;
  s.init_wall_us = (w1 - w0) / 1e3;
  s.init_cpu_us = (c1 - c0) / 1e3;
  s.ready_wall_us = (w2 - w0) / 1e3;
  s.ready_cpu_us = (p2 - p0) / 1e3;
  return s;
}

[[gnu::noinline]] Sample measure_libunwind() {
  Sample s;
  void* lib = dlopen("libunwind.so.8", RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "dlopen libunwind.so.8: %s\n", dlerror());
    std::exit(3);
  }
  using Fn = int (*)(void**, int);
  auto fn = reinterpret_cast<Fn>(dlsym(lib, "unw_backtrace"));
  if (!fn) std::exit(3);
  void* out[256];
  const Rss rss0 = read_rss();
  const double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  const int n = fn(out, 256);
  const double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  const Rss rss1 = read_rss();
  s.init_wall_us = s.ready_wall_us = s.first_walk_us = (w1 - w0) / 1e3;
  s.init_cpu_us = s.ready_cpu_us = (c1 - c0) / 1e3;
  s.init_rss_kib = s.ready_rss_kib = rss1.kib - rss0.kib;
  s.init_anon_kib = s.ready_anon_kib = rss1.anon_kib - rss0.anon_kib;
  s.frames = n > 0 ? static_cast<std::size_t>(n) : 0;
  return s;
}

int child(const char* who, const char* kase) {
  g_per_fde = std::strstr(kase, "-fde") != nullptr;
  if (std::strncmp(kase, "llvm", 4) == 0 && !dlopen(kLlvm, RTLD_NOW | RTLD_GLOBAL)) {
    std::fprintf(stderr, "dlopen %s: %s\n", kLlvm, dlerror());
    return 3;
  }
  const Sample s = std::strcmp(who, "sframepp") == 0 ? measure_sframepp() : measure_libunwind();
  std::printf("%.1f %.1f %ld %.1f %.1f %ld %.1f %zu %ld %ld %.1f %ld\n", s.init_wall_us, s.init_cpu_us, s.init_rss_kib,
              s.ready_wall_us, s.ready_cpu_us, s.ready_rss_kib, s.first_walk_us, s.frames, s.init_anon_kib,
              s.ready_anon_kib, s.throw_cpu_us, s.throw_minflt);
  return 0;
}

bool run_child(const char* self, const char* who, const char* kase, Sample& s) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(self, self, "--child", who, kase, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {};
  std::size_t got = 0;
  for (ssize_t n; (n = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0;) got += static_cast<std::size_t>(n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s %s: status %d (signal %d): %s\n", who, kase, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0, buf);
    return false;
  }
  return std::sscanf(buf, "%lf %lf %ld %lf %lf %ld %lf %zu %ld %ld %lf %ld", &s.init_wall_us, &s.init_cpu_us,
                     &s.init_rss_kib, &s.ready_wall_us, &s.ready_cpu_us, &s.ready_rss_kib, &s.first_walk_us, &s.frames,
                     &s.init_anon_kib, &s.ready_anon_kib, &s.throw_cpu_us, &s.throw_minflt) == 12;
}

struct Stat {
  double med, lo, hi;
};

Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

void print_row(const char* name, const std::vector<Sample>& v) {
  const auto col = [&](auto field) {
    std::vector<double> x;
    for (const Sample& s : v) x.push_back(static_cast<double>(field(s)));
    return stat_of(x);
  };
  const Stat iw = col([](const Sample& s) { return s.init_wall_us; });
  const Stat ic = col([](const Sample& s) { return s.init_cpu_us; });
  const Stat ir = col([](const Sample& s) { return s.init_rss_kib; });
  const Stat ia = col([](const Sample& s) { return s.init_anon_kib; });
  const Stat ra = col([](const Sample& s) { return s.ready_anon_kib; });
  const Stat rw = col([](const Sample& s) { return s.ready_wall_us; });
  const Stat rc = col([](const Sample& s) { return s.ready_cpu_us; });
  const Stat rr = col([](const Sample& s) { return s.ready_rss_kib; });
  const Stat f = col([](const Sample& s) { return s.first_walk_us; });
  std::printf("  %-9s init: wall %8.0f us (%.0f-%.0f) cpu %8.0f us (%.0f-%.0f) RSS +%6.0f KiB (%.0f-%.0f; anon +%.0f) | "
              "ready: wall %8.0f us cpu %8.0f us (%.0f-%.0f) RSS +%6.0f KiB (%.0f-%.0f; anon +%.0f) | first walk %6.1f "
              "us, %zu frames\n",
              name, iw.med, iw.lo, iw.hi, ic.med, ic.lo, ic.hi, ir.med, ir.lo, ir.hi, ia.med, rw.med, rc.med, rc.lo, rc.hi,
              rr.med, rr.lo, rr.hi, ra.med, f.med, v.front().frames);
  const Stat tc = col([](const Sample& s) { return s.throw_cpu_us; });
  const Stat tf = col([](const Sample& s) { return s.throw_minflt; });
  if (tc.hi > 0)
    std::printf("  %-9s first throw/catch after ready: cpu %.0f us (%.0f-%.0f), %.0f minor faults (%.0f-%.0f)\n", name,
                tc.med, tc.lo, tc.hi, tf.med, tf.lo, tf.hi);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return child(argv[2], argv[3]);
  int runs = 7;
  std::vector<std::string> cases;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
      cases.push_back(argv[++i]);
    } else {
      runs = std::max(1, std::atoi(argv[i]));
    }
  }
  if (cases.empty()) cases = {"c++", "llvm"};
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = '\0';
  for (const std::string& k : cases) {
    std::vector<Sample> ours, theirs;
    for (int i = 0; i < runs; ++i) {
      Sample a, b;
      // Alternating, so that drift on the machine hits both alike.
      if (!run_child(self, "sframepp", k.c_str(), a) || !run_child(self, "libunwind", k.c_str(), b)) {
        std::fprintf(stderr, "case %s: a child failed\n", k.c_str());
        return 1;
      }
      ours.push_back(a);
      theirs.push_back(b);
    }
    std::printf("case %s (%d runs, median (min-max)):\n", k.c_str(), runs);
    print_row("sframepp", ours);
    print_row("libunwind", theirs);
    const auto med = [](const std::vector<Sample>& v, auto f) {
      std::vector<double> x;
      for (const Sample& s : v) x.push_back(f(s));
      return stat_of(x).med;
    };
    const double oi = med(ours, [](const Sample& s) { return s.init_cpu_us; });
    const double orc = med(ours, [](const Sample& s) { return s.ready_cpu_us; });
    const double tc = med(theirs, [](const Sample& s) { return s.init_cpu_us; });
    std::printf("  CPU, ours / libunwind's first unw_backtrace: init %.1fx, until ready %.1fx\n", oi / tc, orc / tc);
  }
  return 0;
}
