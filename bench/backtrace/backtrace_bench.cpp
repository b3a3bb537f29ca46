// Nanoseconds per frame of sframe::backtrace beside, in the same run, a
// frame-pointer walk (the physical limit), glibc backtrace() and libunwind's
// unw_backtrace, at depths 8, 32 and 128.
//
//  warm: the same stack walked repeatedly (the walk loop runs in the deepest
//        frame of one chain).
//  cold: before each walk (untimed) our rule cache and libunwind's caches
//        are flushed and a different chain of distinct functions is put on
//        the stack (64 chains x 64 functions: 4096 distinct return addresses), so code, stack and unwind
//        data are touched afresh. Each walk is timed with steady_clock
//        (about 20 ns of clock overhead is included for every method
//        alike); the summary uses the median walk.
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

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sframe/backtrace.hpp"
#include "backtrace/glibc_backtrace.hpp"

namespace sf_chains {
using Callback = void (*)(void*);
int call(int chain, int depth, Callback fn, void* arg);
}  // namespace sf_chains
namespace fp_chains {
using Callback = void (*)(void*);
int call(int chain, int depth, Callback fn, void* arg);
std::size_t fp_walk(void** out, std::size_t max);
}  // namespace fp_chains

namespace {

using sframe_test::BacktraceFn;
using sframe_test::glibc_backtrace_fn;

enum Method { kOurs, kFp, kGlibc, kLibunwind };
const char* const kMethodNames[] = {"sframe", "fp_walk", "glibc", "libunwind"};

[[gnu::always_inline]] inline std::size_t walk(Method m, void** buf, int depth) {
  switch (m) {
    case kOurs: return sframe::backtrace(std::span<void*>(buf, static_cast<std::size_t>(depth)));
    case kFp: return fp_chains::fp_walk(buf, static_cast<std::size_t>(depth));
    case kGlibc: return static_cast<std::size_t>(glibc_backtrace_fn()(buf, depth));
    case kLibunwind: return static_cast<std::size_t>(unw_backtrace(buf, depth));
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

}  // namespace

int main(int argc, char** argv) {
  if (auto r = sframe::backtrace_init(); !r)
    std::fprintf(stderr, "backtrace_init: %s (continuing)\n", std::string(sframe::code_name(r.error().code)).c_str());
  void* warmup[4];
  (void)glibc_backtrace_fn()(warmup, 4);  // glibc loads libgcc_s on first use
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
  benchmark::Shutdown();
  return 0;
}
