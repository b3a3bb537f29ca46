// SPDX-License-Identifier: MIT
// Benchmarks against GNU libsframe (the machine's libsframe.so.0, binutils
// 2.40, loaded with dlopen) on ../shared/bench/many-20k-v1 (20,003 FDEs), and
// sframepp alone on many-20k-v3 (libsframe 2.40 cannot read v3).
//
// Prints, after Google Benchmark's table, the ratios the project tracks:
// open (parse) vs sframe_decode, find(pc) vs sframe_find_fre, and strict
// validation throughput. All figures come from this one run.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"
#include "support/gnu_libsframe.hpp"

namespace {

using LibSframe = sframe_test::GnuLibsframe;

struct Input {
  sframe::elf::SFrameSectionData data;
  sframe::Section section;
  std::uint64_t text_lo = 0;
  std::uint64_t text_hi = 0;
  std::vector<std::uint64_t> pcs;  // uniformly random PCs in .text
};

Input* load(const char* name) {
  const std::string path = std::string(SFRAMEPP_SHARED_DIR) + "/bench/" + name;
  auto file = sframe::elf::ElfFile::open(path);
  if (!file) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    std::exit(2);
  }
  auto* in = new Input{};
  auto data = file->sframe_section();
  // Copy the bytes out: the mapping dies with `file`.
  in->data.owned.assign(data->bytes.begin(), data->bytes.end());
  in->data.address = data->address;
  in->section = *sframe::Section::parse(in->data.owned, data->address);
  for (const auto& sh : file->sections())
    if (sh.name == ".text") {
      in->text_lo = sh.address;
      in->text_hi = sh.address + sh.size;
    }
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> dist(in->text_lo, in->text_hi - 1);
  in->pcs.resize(1 << 16);
  for (auto& pc : in->pcs) pc = dist(rng);
  return in;
}

Input& v1() {
  static Input* in = load("many-20k-v1");
  return *in;
}
Input& v3() {
  static Input* in = load("many-20k-v3");
  return *in;
}
LibSframe& gnu() {
  static LibSframe lib;
  return lib;
}

void BM_Open_Sframepp(benchmark::State& st, Input& (*in)()) {
  const auto bytes = std::span<const std::byte>(in().data.owned);
  for (auto _ : st) {
    auto s = sframe::Section::parse(bytes, in().data.address);
    benchmark::DoNotOptimize(s);
  }
}

void BM_Open_Libsframe(benchmark::State& st) {
  auto& b = v1().data.owned;
  if (!gnu().ok) return st.SkipWithError("libsframe.so.0 not loadable");
  for (auto _ : st) {
    int err = 0;
    void* ctx = gnu().decode(reinterpret_cast<const char*>(b.data()), b.size(), &err);
    benchmark::DoNotOptimize(ctx);
    gnu().free(&ctx);
  }
}

// Looks up the input's random PCs one after the other with `find`.
template <class Find>
void find_loop(benchmark::State& st, const Input& in, Find&& find) {
  std::size_t i = 0, found = 0;
  for (auto _ : st) {
    auto m = find(in.pcs[i++ & (in.pcs.size() - 1)]);
    found += m.has_value();
    benchmark::DoNotOptimize(m);
  }
  st.counters["found%"] = 100.0 * static_cast<double>(found) / static_cast<double>(st.iterations());
}

void BM_Find_Sframepp(benchmark::State& st, Input& (*in)()) {
  find_loop(st, in(), [&](std::uint64_t pc) { return sframe::find(in().section, pc); });
}

void BM_Find_Indexed(benchmark::State& st, Input& (*in)()) {
  const auto ix = *sframe::FdeIndex::build(in().section);
  find_loop(st, in(), [&](std::uint64_t pc) { return ix.find(pc); });
}

void BM_Find_RowIndex(benchmark::State& st, Input& (*in)()) {
  const auto ix = *sframe::RowIndex::build(in().section);
  find_loop(st, in(), [&](std::uint64_t pc) { return ix.find(pc); });
  // The boundaries (8 bytes each, RowIndex's doc) and the distinct rows;
  // buckets and FDE starts are not counted.
  st.counters["boundary_row_bytes"] =
      static_cast<double>(ix.num_boundaries() * 8 + ix.num_rows() * (sizeof(sframe::FrameRow) + 4));
}

void BM_BuildRowIndex(benchmark::State& st, Input& (*in)()) {
  for (auto _ : st) {
    auto ix = sframe::RowIndex::build(in().section);
    benchmark::DoNotOptimize(ix);
  }
}

void BM_Find_Libsframe(benchmark::State& st) {
  if (!gnu().ok) return st.SkipWithError("libsframe.so.0 not loadable");
  auto& in = v1();
  int err = 0;
  void* ctx = gnu().decode(reinterpret_cast<const char*>(in.data.owned.data()), in.data.owned.size(), &err);
  alignas(16) unsigned char fre[64];
  std::size_t i = 0, found = 0;
  for (auto _ : st) {
    // libsframe 2.40 takes the PC relative to the section start.
    const auto rel = static_cast<std::int32_t>(in.pcs[i++ & (in.pcs.size() - 1)] - in.data.address);
    found += gnu().find_fre(ctx, rel, fre) == 0;
    benchmark::DoNotOptimize(fre);
  }
  gnu().free(&ctx);
  st.counters["found%"] = 100.0 * static_cast<double>(found) / static_cast<double>(st.iterations());
}

void BM_ValidateStrict(benchmark::State& st, Input& (*in)()) {
  for (auto _ : st) {
    auto ok = sframe::validate(in().section, sframe::Strictness::kStrict);
    benchmark::DoNotOptimize(ok);
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * in().section.used_size()));
}

BENCHMARK_CAPTURE(BM_Open_Sframepp, v1, v1);
BENCHMARK(BM_Open_Libsframe);
BENCHMARK_CAPTURE(BM_Find_Sframepp, v1, v1);
BENCHMARK_CAPTURE(BM_Find_Indexed, v1, v1);
BENCHMARK_CAPTURE(BM_Find_RowIndex, v1, v1);
BENCHMARK(BM_Find_Libsframe);
BENCHMARK_CAPTURE(BM_BuildRowIndex, v1, v1);
BENCHMARK_CAPTURE(BM_ValidateStrict, v1, v1);
BENCHMARK_CAPTURE(BM_Open_Sframepp, v3, v3);
BENCHMARK_CAPTURE(BM_Find_Sframepp, v3, v3);
BENCHMARK_CAPTURE(BM_Find_Indexed, v3, v3);
BENCHMARK_CAPTURE(BM_Find_RowIndex, v3, v3);
BENCHMARK_CAPTURE(BM_BuildRowIndex, v3, v3);
BENCHMARK_CAPTURE(BM_ValidateStrict, v3, v3);

// Records each run's time per iteration and bytes/s for the summary.
class Recorder : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;
  std::map<std::string, double> bps;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      ns[r.benchmark_name()] = r.GetAdjustedCPUTime();  // CPU time: robust to a busy machine
      auto it = r.counters.find("bytes_per_second");
      if (it != r.counters.end()) bps[r.benchmark_name()] = it->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

void ratio(const Recorder& r, const char* what, const std::string& ours, const std::string& theirs, double goal) {
  auto a = r.ns.find(ours), b = r.ns.find(theirs);
  if (a == r.ns.end() || b == r.ns.end()) return;
  const double x = b->second / a->second;
  std::printf("%-34s %9.1f ns vs %9.1f ns  = %6.1fx faster (goal >= %.0fx: %s)\n", what, a->second, b->second, x,
              goal, x >= goal ? "met" : "NOT met");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  std::printf("\n== sframepp vs GNU libsframe 2.40 (same run)\n");
  ratio(rec, "open v1 (parse vs sframe_decode)", "BM_Open_Sframepp/v1", "BM_Open_Libsframe", 10);
  ratio(rec, "find v1 (binary search)", "BM_Find_Sframepp/v1", "BM_Find_Libsframe", 10);
  ratio(rec, "find v1 (FdeIndex)", "BM_Find_Indexed/v1", "BM_Find_Libsframe", 10);
  ratio(rec, "find v1 (RowIndex)", "BM_Find_RowIndex/v1", "BM_Find_Libsframe", 10);
  for (const char* v : {"v1", "v3"}) {
    auto it = rec.bps.find(std::string("BM_ValidateStrict/") + v);
    if (it != rec.bps.end())
      std::printf("strict validation %s: %.2f GB/s (goal >= 1 GB/s: %s)\n", v, it->second / 1e9,
                  it->second >= 1e9 ? "met" : "NOT met");
  }
  auto p = [&](const char* n) {
    auto it = rec.ns.find(n);
    if (it != rec.ns.end()) std::printf("%-34s %9.1f ns\n", n, it->second);
  };
  p("BM_Open_Sframepp/v3");
  p("BM_Find_Sframepp/v3");
  p("BM_Find_Indexed/v3");
  p("BM_Find_RowIndex/v3");
  p("BM_BuildRowIndex/v1");
  p("BM_BuildRowIndex/v3");
  benchmark::Shutdown();
  return 0;
}
