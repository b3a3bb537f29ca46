// SPDX-License-Identifier: MIT
// The offline unwinder against a frame-pointer walk over the same stack
// image and the same memory reader, per frame: SFrame with a warm rule cache,
// with a cold cache (cleared before every walk), and without a cache; over a
// section of 20,000 functions (x86-64, frame-pointer style rows) and a chain
// of 64 frames through random functions.
//
// Prints the ratios after Google Benchmark's table; every figure comes from
// this one run. The in-process target is SFrame (warm) <= 2x the FP walk.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sframe/format/encode.hpp"
#include "sframe/unwind/unwind.hpp"

namespace {

using namespace sframe;

constexpr std::uint64_t kText = 0x400000;
constexpr std::uint32_t kFuncs = 20000;
constexpr std::uint64_t kFuncSize = 0x40;
constexpr std::uint64_t kStackBase = 0x7ffd00000000;
constexpr std::size_t kStackSize = 1 << 16;
constexpr int kDepth = 64;

struct Scene {
  std::vector<std::byte> section_bytes;
  Section section;
  std::array<Module, 1> storage;
  ModuleMap map{storage};
  std::optional<FdeIndex> index;
  std::vector<std::byte> stack;
  Regs regs;
};

Rule reg(std::uint16_t r, std::int32_t off) { return make_rule(Rule::Base::kRegister, r, off, false); }
Rule slot(std::int32_t off) { return make_rule(Rule::Base::kCfa, 0, off, true); }

Scene* scene() {
  static Scene* s = [] {
    auto* sc = new Scene;
    SectionSpec spec;
    spec.abi = Abi::kAmd64Little;
    spec.cfa_fixed_ra_offset = -8;
    spec.section_address = 0x300000;
    Rule unchanged;
    for (std::uint32_t i = 0; i < kFuncs; ++i) {
      FunctionSpec f;
      f.start_pc = kText + i * kFuncSize;
      f.size = kFuncSize;
      FrameRow entry, pushed, body;
      entry.cfa = reg(7, 8), entry.ra = slot(-8), entry.fp = unchanged;
      pushed.cfa = reg(7, 16), pushed.ra = slot(-8), pushed.fp = slot(-16);
      body.cfa = reg(6, 16), body.ra = slot(-8), body.fp = slot(-16);
      f.rows = {{0, entry}, {1, pushed}, {4, body}};
      spec.functions.push_back(f);
    }
    auto enc = encode(spec);
    if (!enc) std::abort();
    sc->section_bytes = std::move(*enc);
    sc->section = *Section::parse(sc->section_bytes, spec.section_address);
    auto ix = FdeIndex::build(sc->section);
    sc->index = std::move(*ix);
    if (!sc->map.add({{kText, kText + kFuncs * kFuncSize}, 0, sc->section, &*sc->index})) std::abort();
    // push %rbp; mov %rsp,%rbp; sub $32,%rsp in every frame; calls from the body.
    sc->stack.assign(kStackSize, std::byte{0});
    std::mt19937_64 rng(1);
    std::uint64_t sp = kStackBase + kStackSize - 64, rbp = 0;
    const auto put = [&](std::uint64_t a, std::uint64_t v) { std::memcpy(&sc->stack[a - kStackBase], &v, 8); };
    std::uint64_t pc = 0;
    for (int d = 0; d < kDepth; ++d) {
      const std::uint64_t f = kText + (rng() % kFuncs) * kFuncSize;
      if (d) {
        sp -= 8;
        put(sp, pc + 1);  // return address into the previous function
      }
      sp -= 8;
      put(sp, rbp);
      rbp = sp;
      sp -= 32;
      pc = f + 0x10;
    }
    sc->regs = Regs::amd64(pc, sp, rbp);
    return sc;
  }();
  return s;
}

// The baseline: follow the rbp chain with the same bounds-checked reader.
std::size_t fp_walk(const BufferMemory& mem, std::uint64_t pc, std::uint64_t fp, std::span<std::uint64_t> out) {
  std::size_t n = 0;
  out[n++] = pc;
  while (n < out.size()) {
    const auto ra = mem.read_word(fp + 8);
    const auto next = mem.read_word(fp);
    if (!ra || !next || *ra == 0 || *next <= fp) break;
    out[n++] = *ra;
    fp = *next;
  }
  return n;
}

std::map<std::string, double> g_ns_per_frame;

void record(benchmark::State& st, const char* name, std::size_t frames) {
  st.counters["frames"] = static_cast<double>(frames);
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * frames));
  (void)name;
}

void BM_FramePointerWalk(benchmark::State& st) {
  Scene* s = scene();
  const BufferMemory mem(s->stack, kStackBase);
  std::array<std::uint64_t, 128> out;
  std::size_t n = 0;
  for (auto _ : st) {
    n = fp_walk(mem, s->regs.pc, *s->regs.fp(), out);
    benchmark::DoNotOptimize(out.data());
  }
  record(st, "fp", n);
}
BENCHMARK(BM_FramePointerWalk);

void BM_SFrameWarmCache(benchmark::State& st) {
  Scene* s = scene();
  const BufferMemory mem(s->stack, kStackBase);
  StaticRuleCache<1024> cache;
  std::array<Frame, 128> out;
  UnwindResult r;
  for (auto _ : st) {
    r = unwind(s->map, mem, s->regs, std::span<Frame>(out), {}, &cache);
    benchmark::DoNotOptimize(out.data());
  }
  if (r.count != kDepth) st.SkipWithError("wrong frame count");
  st.counters["hit_rate"] = static_cast<double>(cache.hits) / static_cast<double>(cache.hits + cache.misses);
  record(st, "warm", r.count);
}
BENCHMARK(BM_SFrameWarmCache);

void BM_SFrameColdCache(benchmark::State& st) {
  Scene* s = scene();
  const BufferMemory mem(s->stack, kStackBase);
  StaticRuleCache<1024> cache;
  std::array<Frame, 128> out;
  UnwindResult r;
  for (auto _ : st) {
    cache.clear();
    r = unwind(s->map, mem, s->regs, std::span<Frame>(out), {}, &cache);
    benchmark::DoNotOptimize(out.data());
  }
  record(st, "cold", r.count);
}
BENCHMARK(BM_SFrameColdCache);

void BM_SFrameNoCache(benchmark::State& st) {
  Scene* s = scene();
  const BufferMemory mem(s->stack, kStackBase);
  std::array<Frame, 128> out;
  UnwindResult r;
  for (auto _ : st) {
    r = unwind(s->map, mem, s->regs, std::span<Frame>(out));
    benchmark::DoNotOptimize(out.data());
  }
  record(st, "none", r.count);
}
BENCHMARK(BM_SFrameNoCache);

// Collects ns/frame per benchmark for the summary.
class Summary : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const auto it = r.counters.find("frames");
      if (it == r.counters.end() || r.iterations == 0) continue;
      const double ns = r.GetAdjustedCPUTime();  // per iteration, in ns: CPU time, as the machine may be shared
      g_ns_per_frame[r.benchmark_name()] = ns / it->second.value;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Summary reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto get = [](const char* n) {
    auto it = g_ns_per_frame.find(n);
    return it == g_ns_per_frame.end() ? 0.0 : it->second;
  };
  const double fp = get("BM_FramePointerWalk");
  std::printf("\nns per frame (depth %d, %u functions):\n", kDepth, kFuncs);
  for (const char* n : {"BM_FramePointerWalk", "BM_SFrameWarmCache", "BM_SFrameColdCache", "BM_SFrameNoCache"}) {
    const double v = get(n);
    std::printf("  %-22s %7.2f ns/frame  %5.2fx the FP walk\n", n, v, fp > 0 ? v / fp : 0.0);
  }
  benchmark::Shutdown();
  return 0;
}
