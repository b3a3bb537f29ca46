// SPDX-License-Identifier: MIT
// Nanoseconds per frame of sframe::backtrace beside, in the same run, a
// frame-pointer walk (the physical limit), glibc backtrace() and libunwind's
// unw_backtrace, at depths 8, 32 and 128 (the buffer full before the
// outermost frame), then full walks to _start (see full_walks below).
//
//  warm: the same stack walked repeatedly (the walk loop runs in the deepest
//        frame of one chain).
//  cold: before each walk (untimed) our rule cache and libunwind's caches
//        are flushed and a different chain of distinct functions is put on
//        the stack (64 chains x 64 functions: 4096 distinct return addresses), so code, stack and unwind
//        data are touched afresh. Each walk is timed with steady_clock
//        (the clock's own overhead is included for every method alike);
//        the summary uses the median walk.
//
// The summary uses CPU time for warm runs: the machine is shared, and wall
// time there counts other processes' time slices.
//
// Every method walks exactly `depth` frames (the output span has `depth`
// slots and the chain is deeper), so ns/frame = time / depth.
#define UNW_LOCAL_ONLY
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "sframe/backtrace/backtrace.hpp"
#include "backtrace/glibc_backtrace.hpp"

namespace sf_chains {
using Callback = void (*)(void*);
int call(int chain, int depth, Callback fn, void* arg);
}  // namespace sf_chains
namespace fp_chains {
using Callback = void (*)(void*);
int call(int chain, int depth, Callback fn, void* arg);
std::size_t fp_walk(void** out, std::size_t max);
std::size_t fp_walk_to(void** out, std::size_t max, std::uintptr_t hi);
}  // namespace fp_chains

// The C++ rule executor's warm path for comparison with the assembly's:
// enters the C++ walk the assembly entry continues into
// (sframepp_backtrace_walk_on) with the registers that entry takes and no
// frame taken, so the memo's frames go through memo_run/apply_rule.
extern "C" std::size_t sfpp_bench_walk_cpp(void** out, std::size_t size, sframe::BacktraceResult* result);
asm(R"(
  .text
  .p2align 6
  .globl sfpp_bench_walk_cpp
  .type sfpp_bench_walk_cpp,@function
sfpp_bench_walk_cpp:
  .cfi_startproc
  movq (%rsp), %rcx
  leaq 8(%rsp), %r8
  movq %rbp, %r9
  movq $0, (%rdx)
  jmp sframepp_backtrace_walk_on
  .cfi_endproc
  .size sfpp_bench_walk_cpp, .-sfpp_bench_walk_cpp
)");

namespace {

using sframe_test::BacktraceFn;
using sframe_test::glibc_backtrace_fn;

enum Method { kOurs, kFp, kGlibc, kLibunwind, kOursCpp };
const char* const kMethodNames[] = {"sframe", "fp_walk", "glibc", "libunwind", "sframe_cpp"};

[[gnu::always_inline]] inline std::size_t walk(Method m, void** buf, int depth) {
  switch (m) {
    case kOurs: return sframe::backtrace(std::span<void*>(buf, static_cast<std::size_t>(depth)));
    case kFp: return fp_chains::fp_walk(buf, static_cast<std::size_t>(depth));
    case kGlibc: return static_cast<std::size_t>(glibc_backtrace_fn()(buf, depth));
    case kLibunwind: return static_cast<std::size_t>(unw_backtrace(buf, depth));
    case kOursCpp: {
      sframe::BacktraceResult r;
      return sfpp_bench_walk_cpp(buf, static_cast<std::size_t>(depth), &r);
    }
  }
  return 0;
}

struct Job {
  benchmark::State* state;
  Method method;
  int depth;
  double seconds = 0;
  std::size_t frames = 0;
  void* buf[256] = {};
};

int call_chain(Method m, int chain, int depth, void (*fn)(void*), void* arg) {
  return m == kFp ? fp_chains::call(chain, depth, fn, arg) : sf_chains::call(chain, depth, fn, arg);
}

// Warm: the whole benchmark loop runs at the bottom of one chain.
template <Method M>
void warm_bottom(void* arg) {
  auto* job = static_cast<Job*>(arg);
  for (auto _ : *job->state) {
    job->frames = walk(M, job->buf, job->depth);
    benchmark::DoNotOptimize(job->buf);
  }
}

template <Method M>
void cold_bottom(void* arg) {
  auto* job = static_cast<Job*>(arg);
  const auto t0 = std::chrono::steady_clock::now();
  job->frames = walk(M, job->buf, job->depth);
  benchmark::DoNotOptimize(job->buf);
  const auto t1 = std::chrono::steady_clock::now();
  job->seconds = std::chrono::duration<double>(t1 - t0).count();
}

template <Method M>
void BM_Warm(benchmark::State& state) {
  Job job{&state, M, static_cast<int>(state.range(0))};
  call_chain(M, 0, job.depth + 4, warm_bottom<M>, &job);
  if (job.frames != static_cast<std::size_t>(job.depth)) state.SkipWithError("walk came up short");
  state.counters["frames"] = static_cast<double>(job.frames);
}

template <Method M>
void BM_Cold(benchmark::State& state) {
  Job job{&state, M, static_cast<int>(state.range(0))};
  int chain = 0;
  std::vector<double> samples;
  for (auto _ : state) {
    sframe::backtrace_flush_cache();
    unw_flush_cache(unw_local_addr_space, 0, 0);
    call_chain(M, ++chain, job.depth + 4, cold_bottom<M>, &job);
    state.SetIterationTime(job.seconds);
    samples.push_back(job.seconds);
  }
  if (job.frames != static_cast<std::size_t>(job.depth)) state.SkipWithError("walk came up short");
  state.counters["frames"] = static_cast<double>(job.frames);
  // The median walk: on a shared machine a walk now and then loses the CPU
  // for a whole time slice, which the mean would spread over all of them.
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2), samples.end());
  state.counters["median_ns"] = samples.empty() ? 0 : samples[samples.size() / 2] * 1e9;
}

#define DEPTHS Arg(8)->Arg(32)->Arg(128)
BENCHMARK(BM_Warm<kOurs>)->Name("warm/sframe")->DEPTHS;
BENCHMARK(BM_Warm<kFp>)->Name("warm/fp_walk")->DEPTHS;
BENCHMARK(BM_Warm<kGlibc>)->Name("warm/glibc")->DEPTHS;
BENCHMARK(BM_Warm<kLibunwind>)->Name("warm/libunwind")->DEPTHS;
BENCHMARK(BM_Warm<kOursCpp>)->Name("warm/sframe_cpp")->DEPTHS;
BENCHMARK(BM_Cold<kOurs>)->Name("cold/sframe")->DEPTHS->UseManualTime();
BENCHMARK(BM_Cold<kFp>)->Name("cold/fp_walk")->DEPTHS->UseManualTime();
BENCHMARK(BM_Cold<kGlibc>)->Name("cold/glibc")->DEPTHS->UseManualTime();
BENCHMARK(BM_Cold<kLibunwind>)->Name("cold/libunwind")->DEPTHS->UseManualTime();

class Recorder : public benchmark::ConsoleReporter {
 public:
  // ns per iteration: CPU time for warm runs (the machine is shared; CPU
  // time is what another process's load disturbs least), the manual
  // per-walk wall time for cold runs.
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      auto median = r.counters.find("median_ns");
      ns[r.benchmark_name()] = median != r.counters.end() ? double(median->second) : r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

// ----- full walks ---------------------------------------------------------
// Traces that end at the outermost frame (_start) with room to spare in the
// buffer: main + N frames of a chain, N = 2, 10, 40. Timed outside Google
// Benchmark, whose own frames would sit between main and the chain.
//  warm:  CPU time of batches of walks of the same stack (7 batches; the
//         median batch, and the spread);
//  cold:  before each walk our rule cache and libunwind's caches are
//         flushed and another chain is on the stack (median of 301 walks);
//  coldB: the same walks timed in batches of 63 less the batch without
//         them (cold_batched()): the clock moves in steps that are a
//         sizeable part of a cold walk, which a single walk's median snaps
//         to; the batched figure does not;
//  cold*: informational, not a goal: each walk on a new thread after one
//         walk of that thread's own frames, so that the chain's return
//         addresses are new to both libraries' caches (libunwind's
//         per-thread trace cache survives unw_flush_cache; "cold" above
//         measures its hits). Median of 31 walks; ends at clone3.
//  first: the first walk in a fresh process (forked before anything
//         walked), after backtrace_init() for ours: what a crash reporter's
//         first trace costs.

std::uintptr_t g_stack_hi = 0;

std::size_t full_walk(Method m, void** buf) {
  switch (m) {
    case kOurs: return sframe::backtrace(std::span<void*>(buf, 256));
    case kFp: return fp_chains::fp_walk_to(buf, 256, g_stack_hi);
    case kGlibc: return static_cast<std::size_t>(glibc_backtrace_fn()(buf, 256));
    case kLibunwind: return static_cast<std::size_t>(unw_backtrace(buf, 256));
    case kOursCpp: {
      sframe::BacktraceResult r;
      return sfpp_bench_walk_cpp(buf, 256, &r);
    }
  }
  return 0;
}

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct FullJob {
  Method method;
  int reps = 0;
  /// Frames a batched cold walk may write (full_batch_bottom()).
  int cap = 256;
  double ns = 0;
  std::size_t frames = 0;
  std::uint64_t misses = 0;
  void* buf[256] = {};
};

void full_warm_bottom(void* arg) {
  auto* job = static_cast<FullJob*>(arg);
  // Round -1 fills the caches, untimed, from the same call site as the
  // timed rounds: a warm-up call from another site has another return
  // address in this frame, which the first timed walk then looked up (the
  // one miss per run the warm rows used to show).
  std::uint64_t m0 = 0;
  double t0 = 0;
  for (int i = -1; i < job->reps; ++i) {
    if (i == 0) {
      m0 = sframe::backtrace_stats().misses;
      t0 = thread_cpu_ns();
    }
    job->frames = full_walk(job->method, job->buf);
    benchmark::DoNotOptimize(job->buf);
  }
  job->ns = (thread_cpu_ns() - t0) / job->reps;
  job->misses = sframe::backtrace_stats().misses - m0;
}

void full_single_bottom(void* arg) {
  auto* job = static_cast<FullJob*>(arg);
  const auto t0 = std::chrono::steady_clock::now();
  job->frames = full_walk(job->method, job->buf);
  benchmark::DoNotOptimize(job->buf);
  job->ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The bottom of a chain in a batch of cold walks: walks when job->reps is
// 1, else returns at once (the batch's baseline).
void full_batch_bottom(void* arg) {
  auto* job = static_cast<FullJob*>(arg);
  if (job->reps != 1) return benchmark::DoNotOptimize(job->buf);
  if (job->cap == 256)
    job->frames = full_walk(job->method, job->buf);
  else if (job->method == kOurs)
    job->frames = sframe::backtrace(std::span<void*>(job->buf, static_cast<std::size_t>(job->cap)));
  else
    job->frames = static_cast<std::size_t>(unw_backtrace(job->buf, job->cap));
  benchmark::DoNotOptimize(job->buf);
}

// Cold walks timed in batches, for a figure finer than the clock: both
// clocks move in steps that are a sizeable part of a cold walk, so a single
// walk is read only to within a step and the median of such readings snaps
// to one. A batch is
// kChains cold walks, each as the cold row takes it (both libraries'
// caches flushed, then a walk at the bottom of another chain); the same
// batch with the walks left out (flushes and chains alike) is timed right
// after it, and the walk's cost is the difference of the two batches'
// medians over kChains. The flush after a walk has that walk's entries to
// clear, the baseline's flush none: that work counts against the method.
// Returns ns per walk. `cap`: the walk's buffer (256: full walks; less:
// the walk stops with a full buffer, ours and libunwind's only).
double cold_batched(Method m, int extra, int cap = 256) {
  constexpr int kChains = 63, kBatches = 41;
  std::vector<double> with, without;
  for (int b = 0; b < kBatches; ++b) {
    for (const int walk : {1, 0}) {
      FullJob job{m, walk, cap};
      const auto t0 = std::chrono::steady_clock::now();
      for (int c = 1; c <= kChains; ++c) {
        sframe::backtrace_flush_cache();
        unw_flush_cache(unw_local_addr_space, 0, 0);
        call_chain(m, c, extra, full_batch_bottom, &job);
      }
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      (walk ? with : without).push_back(ns);
    }
  }
  return (median(with) - median(without)) / kChains;
}

// The first walk of each method, each in a child forked before this
// process walked at all; ns in `first[method]`, frames in `frames`.
void first_walks(int extra, double first[4], std::size_t frames[4]) {
  for (int m = 0; m < 4; ++m) {
    int fds[2];
    if (pipe(fds) != 0) return;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      if (m == kOurs) {
        (void)sframe::backtrace_init();
        sframe::backtrace_wait_ready();
      }
      FullJob job{static_cast<Method>(m)};
      call_chain(static_cast<Method>(m), 1, extra, full_single_bottom, &job);
      const double out[2] = {job.ns, static_cast<double>(job.frames)};
      (void)!write(fds[1], out, sizeof out);
      _exit(0);
    }
    close(fds[1]);
    double in[2] = {};
    (void)!read(fds[0], in, sizeof in);
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    first[m] = in[0];
    frames[m] = static_cast<std::size_t>(in[1]);
  }
}

[[gnu::noinline]] void full_walks(const double first_by_extra[3][4], const std::size_t first_frames[3][4]) {
  std::printf("\n== full walks to _start (main + N chain frames; buffer of 256 never full), ns per walk\n");
  std::printf("%-5s %4s %6s | %16s %16s %16s %16s | %10s %14s\n", "mode", "N", "frames", "sframe", "fp_walk", "glibc",
              "libunwind", "lu/ours", "ours misses");
  const int extras[3] = {2, 10, 40};
  for (int e = 0; e < 3; ++e) {
    const int extra = extras[e];
    // warm
    double med[4] = {}, lo[4] = {}, hi[4] = {};
    std::size_t frames = 0;
    std::uint64_t misses = 0;
    for (int m = 0; m < 4; ++m) {
      std::vector<double> runs;
      for (int b = 0; b < 7; ++b) {
        FullJob job{static_cast<Method>(m), m == kGlibc ? 2000 : 20000};
        call_chain(static_cast<Method>(m), 0, extra, full_warm_bottom, &job);
        runs.push_back(job.ns);
        if (m == kOurs) {
          frames = job.frames;
          misses = std::max(misses, job.misses);
        }
      }
      med[m] = median(runs);
      lo[m] = *std::min_element(runs.begin(), runs.end());
      hi[m] = *std::max_element(runs.begin(), runs.end());
    }
    char cell[4][32];
    for (int m = 0; m < 4; ++m) std::snprintf(cell[m], sizeof cell[m], "%.1f [%.1f-%.1f]", med[m], lo[m], hi[m]);
    std::printf("%-5s %4d %6zu | %16s %16s %16s %16s | %9.2fx %14llu%s\n", "warm", extra, frames, cell[0], cell[1],
                cell[2], cell[3], med[kLibunwind] / med[kOurs], static_cast<unsigned long long>(misses),
                med[kLibunwind] / med[kOurs] >= 3 ? "  goal met (>= 3x)" : "  goal NOT met (>= 3x)");
    // cold
    double cold[4] = {};
    std::size_t cframes = 0;
    for (int m = 0; m < 4; ++m) {
      std::vector<double> runs;
      for (int i = 0; i < 301; ++i) {
        sframe::backtrace_flush_cache();
        unw_flush_cache(unw_local_addr_space, 0, 0);
        FullJob job{static_cast<Method>(m)};
        call_chain(static_cast<Method>(m), 1 + i % 63, extra, full_single_bottom, &job);
        runs.push_back(job.ns);
        if (m == kOurs) cframes = job.frames;
      }
      cold[m] = median(runs);
    }
    std::printf("%-5s %4d %6zu | %16.1f %16.1f %16.1f %16.1f | %9.2fx%s\n", "cold", extra, cframes, cold[0], cold[1],
                cold[2], cold[3], cold[kLibunwind] / cold[kOurs],
                cold[kLibunwind] / cold[kOurs] >= 1 ? "  goal met (ns/frame <= libunwind's)" : "  goal NOT met");
    // The same walks timed in batches (cold_batched()): below the clock's step.
    double batched[4] = {};
    for (int m = 0; m < 4; ++m) batched[m] = cold_batched(static_cast<Method>(m), extra);
    std::printf("%-5s %4d %6zu | %16.1f %16.1f %16.1f %16.1f | %9.2fx%s\n", "coldB", extra, cframes, batched[0],
                batched[1], batched[2], batched[3], batched[kLibunwind] / batched[kOurs],
                batched[kLibunwind] / batched[kOurs] >= 1 ? "  goal met (ns/frame <= libunwind's)" : "  goal NOT met");
    // Informational: cold for both caches. Each walk on a new thread (ours
    // registered), after one walk of the thread's own frames there: the
    // chain's return addresses are new to our rule cache and to
    // libunwind's per-thread trace cache, which unw_flush_cache keeps.
    double fresh[2] = {};
    std::size_t fresh_frames = 0;
    for (int k = 0; k < 2; ++k) {
      const Method m = k == 0 ? kOurs : kLibunwind;
      std::vector<double> runs;
      for (int i = 0; i < 31; ++i) {
        FullJob job{m};
        std::thread t([&job, m, i, extra] {
          if (m == kOurs) sframe::backtrace_register_thread();
          void* prime[256];
          (void)full_walk(m, prime);
          unw_flush_cache(unw_local_addr_space, 0, 0);
          call_chain(m, 1 + i % 63, extra, full_single_bottom, &job);
        });
        t.join();
        runs.push_back(job.ns);
        if (m == kOurs) fresh_frames = job.frames;
      }
      fresh[k] = median(runs);
    }
    std::printf("%-5s %4d %6zu | %16.1f %16s %16s %16.1f | %9.2fx  (new thread: PCs new to both caches)\n", "cold*",
                extra, fresh_frames, fresh[0], "", "", fresh[1], fresh[1] / fresh[0]);
    const double* f = first_by_extra[e];
    std::printf("%-5s %4d %6zu | %16.1f %16.1f %16.1f %16.1f | %9.2fx\n", "first", extra, first_frames[e][kOurs], f[0],
                f[1], f[2], f[3], f[kLibunwind] / f[kOurs]);
  }
}

// --cold-frames [N]: where a cold walk's time goes, frame by frame: the
// batched cold walk (cold_batched()) of main + N (default 2) with its
// buffer capped at 1, 2, ... frames, ours beside libunwind's; each row's
// increase over the one before is the cost of the lookup and step that
// found that frame. Informational.
[[gnu::noinline]] void cold_frames(int extra) {
  std::printf("== batched cold walks of main + %d capped at K frames, ns (3 runs)\n", extra);
  std::printf("%3s %6s | %20s | %20s\n", "K", "frames", "sframe", "libunwind");
  std::size_t frames = 0;
  {
    FullJob job{kOurs, 1};
    call_chain(kOurs, 1, extra, full_batch_bottom, &job);
    frames = job.frames;
  }
  for (int cap = 1; cap <= static_cast<int>(frames) + 1; ++cap) {
    double ours[3], lu[3];
    for (int r = 0; r < 3; ++r) {
      ours[r] = cold_batched(kOurs, extra, cap);
      lu[r] = cold_batched(kLibunwind, extra, cap);
    }
    std::printf("%3d %6zu | %6.1f %6.1f %6.1f | %6.1f %6.1f %6.1f\n", cap, std::min<std::size_t>(cap, frames), ours[0],
                ours[1], ours[2], lu[0], lu[1], lu[2]);
  }
}

// --cold-only [N [WALKS]]: our cold full walks alone (the cold rows of
// full_walks, no other method; only main + N if given), so that
// `valgrind --tool=callgrind` counts the instructions of cold walks and
// nothing else. WALKS (default 301, as full_walks takes) more give a
// sampling profiler (`perf record`) enough of them.
[[gnu::noinline]] void cold_only(int only_extra, int walks) {
  std::printf("== cold full walks, sframe only (median of %d walks)\n", walks);
  for (const int extra : {2, 10, 40}) {
    if (only_extra != 0 && extra != only_extra) continue;
    std::vector<double> runs;
    std::size_t frames = 0;
    for (int i = 0; i < walks; ++i) {
      sframe::backtrace_flush_cache();
      unw_flush_cache(unw_local_addr_space, 0, 0);
      FullJob job{kOurs};
      call_chain(kOurs, 1 + i % 63, extra, full_single_bottom, &job);
      runs.push_back(job.ns);
      frames = job.frames;
    }
    std::printf("main + %2d: %zu frames, %.1f ns\n", extra, frames, median(runs));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The first walks, in children forked before this process walks at all.
  double first[3][4] = {};
  std::size_t first_frames[3][4] = {};
  // --full-only: only the full walks; a --benchmark_filter: only those.
  const bool full_only = argc > 1 && std::string(argv[1]) == "--full-only";
  const bool cold_only_run =
      argc > 1 && (std::string(argv[1]) == "--cold-only" || std::string(argv[1]) == "--cold-frames");
  const bool full = !cold_only_run && (full_only || !(argc > 1 && std::string(argv[1]).rfind("--benchmark_filter", 0) == 0));
  if (full) {
    const int extras[3] = {2, 10, 40};
    for (int e = 0; e < 3; ++e) first_walks(extras[e], first[e], first_frames[e]);
  }
  {
    pthread_attr_t attr;
    void* addr = nullptr;
    std::size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &size);
      pthread_attr_destroy(&attr);
    }
    g_stack_hi = reinterpret_cast<std::uintptr_t>(addr) + size;
  }
  if (auto r = sframe::backtrace_init(); !r)
    std::fprintf(stderr, "backtrace_init: %s (continuing)\n", std::string(sframe::code_name(r.error().code())).c_str());
  sframe::backtrace_wait_ready();
  void* warmup[4];
  (void)glibc_backtrace_fn()(warmup, 4);  // glibc loads libgcc_s on first use
  if (argc > 1 && std::string(argv[1]) == "--cold-frames") {
    cold_frames(argc > 2 ? std::max(1, std::atoi(argv[2])) : 2);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--cold-only") {
    cold_only(argc > 2 ? std::atoi(argv[2]) : 0, argc > 3 ? std::max(1, std::atoi(argv[3])) : 301);
    return 0;
  }
  if (full_only) {
    full_walks(first, first_frames);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);

  std::printf("\n== ns per frame (same run); ratios: ours/fp (goal warm <= 2), glibc/ours and libunwind/ours "
              "(goal warm >= 3)\n");
  std::printf("%-5s %5s %9s %9s %9s %9s   %8s %10s %14s\n", "mode", "depth", "sframe", "fp_walk", "glibc",
              "libunwind", "ours/fp", "glibc/ours", "libunwind/ours");
  for (const char* mode : {"warm", "cold"}) {
    for (int depth : {8, 32, 128}) {
      double v[4] = {};
      bool ok = true;
      for (int m = 0; m < 4; ++m) {
        const std::string name = std::string(mode) + "/" + kMethodNames[m] + "/" + std::to_string(depth) +
                                 (std::string(mode) == "cold" ? "/manual_time" : "");
        auto it = rec.ns.find(name);
        if (it == rec.ns.end()) {
          ok = false;
          continue;
        }
        v[m] = it->second / depth;
      }
      if (!ok) continue;
      const bool warm = std::string(mode) == "warm";
      const double r_fp = v[kOurs] / v[kFp], r_glibc = v[kGlibc] / v[kOurs], r_lu = v[kLibunwind] / v[kOurs];
      std::printf("%-5s %5d %9.2f %9.2f %9.2f %9.2f   %7.2fx %9.1fx %13.1fx%s\n", mode, depth, v[kOurs], v[kFp],
                  v[kGlibc], v[kLibunwind], r_fp, r_glibc, r_lu,
                  warm ? (r_fp <= 2 && r_glibc >= 3 && r_lu >= 3 ? "  goals met" : "  goals NOT met") : "");
    }
  }
  std::printf("\n== warm: the assembly straight run against the C++ rule executor (same entry registers, same "
              "memo), ns per frame; keep the assembly only if >= 10%% faster\n");
  for (int depth : {8, 32, 128}) {
    const auto a = rec.ns.find("warm/sframe/" + std::to_string(depth));
    const auto c = rec.ns.find("warm/sframe_cpp/" + std::to_string(depth));
    if (a == rec.ns.end() || c == rec.ns.end()) continue;
    std::printf("depth %3d: assembly %.2f, C++ %.2f, assembly %.0f%% lower\n", depth, a->second / depth,
                c->second / depth, 100.0 * (1.0 - a->second / c->second));
  }
  if (full) full_walks(first, first_frames);
  benchmark::Shutdown();
  return 0;
}
