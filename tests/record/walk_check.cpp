// SPDX-License-Identifier: MIT
// The differential test of `sframe record`'s in-kernel walk
// (src/record/bpf/walk.h, compiled here for the host) against the
// library's walk (process::walk_chain, through perf::Session, which
// `sframe perf script` prints): for every sample of a `perf record
// --call-graph=dwarf` recording, both walk the sample's stack copy from its
// registers, the BPF walk over the tables `sframe record` loads into the
// kernel (record::Tables, built from the same Session), and the user frames
// must be the same addresses.
//   walk_check PERF.DATA [MIN_PERCENT [CORRUPT_SEED]]
// Prints the counts, each kind of difference with an example, and exits 1
// when fewer than MIN_PERCENT (default 99) of the walked samples agree.
// With CORRUPT_SEED, every stack copy is damaged first (each 8-byte word
// with probability 1/8 replaced by a random value, a stack address or a
// code address), and both walks read the damaged copy: hostile stacks.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "perf_data.hpp"
#include "perf_unwind.hpp"
#include "recorder.hpp"
#include "tables.hpp"

namespace {

// What the host walk reads: the sample's stack copy, nothing else.
std::span<const std::byte> g_stack;
std::uint64_t g_stack_base = 0;
sframe::record::Tables* g_tables = nullptr;
const sframe_record_process* g_process = nullptr;

int read_user(void* dst, std::uint32_t len, __u64 addr) {
  if (addr < g_stack_base || addr - g_stack_base > g_stack.size() || g_stack.size() - (addr - g_stack_base) < len)
    return -1;
  std::memcpy(dst, g_stack.data() + (addr - g_stack_base), len);
  return 0;
}

}  // namespace

#include "bpf/walk_host.h"
// Reads go through the stack window, as the BPF program's do.
#define SFRAME_RECORD_READ_USER(dst, len, addr) read_user((dst), (len), (addr))
#include "bpf/stack_window.h"
namespace {
sframe_record_window g_window;
}  // namespace
#define SFRAME_RECORD_READ(dst, addr) sframe_record_window_read(&g_window, (dst), (addr))
#define SFRAME_RECORD_BLOCK(module, index) g_tables->block((module), (index))
#define SFRAME_RECORD_PROCESS(tgid) g_process
namespace {
// The row cache as one CPU's, kept across the samples as the BPF program's
// is: a walk that takes a row from it must still walk as the library does.
sframe_record_row_cache g_row_cache;
}  // namespace
#define SFRAME_RECORD_ROW_CACHE() (&g_row_cache)
#include "bpf/walk.h"

namespace {
sframe_record_walk g_walk;
}  // namespace

int main(int argc, char** argv) {
  using namespace sframe;
  if (argc < 2) {
    std::fprintf(stderr, "usage: walk_check PERF.DATA [MIN_PERCENT]\n");
    return 2;
  }
  const double min_percent = argc > 2 ? std::atof(argv[2]) : 99.0;
  const bool corrupt = argc > 3;
  std::uint64_t rng = argc > 3 ? std::strtoull(argv[3], nullptr, 10) * 0x9e3779b97f4a7c15ull + 1 : 0;
  const auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  std::vector<std::byte> damaged;
  auto data = perf::PerfData::open(argv[1]);
  if (!data) {
    std::fprintf(stderr, "walk_check: %s: cannot read\n", argv[1]);
    return 2;
  }
  perf::SessionOptions so;
  so.symbols = false;
  so.max_stack = 1 + SFRAME_RECORD_MAX_USER + 1024;
  static perf::Session* session = new perf::Session(data->info(), so);
  static record::Tables* tables = new record::Tables(*session);
  g_tables = tables;
  std::uint64_t walked = 0, same = 0;
  std::map<std::string, std::pair<std::uint64_t, std::string>> kinds;  // kind -> count, example
  std::vector<std::uint64_t> ours;
  // The process tables pushed since the last record that is not a sample.
  std::map<std::uint32_t, const sframe_record_process*> pushed;
  std::array<std::uint64_t, SFRAME_RECORD_SOURCES> sources{};
  auto r = data->for_each([&](const perf::Record& in) {
    perf::Record copy;
    const perf::Record* p = &in;
    if (corrupt && in.type == perf::kRecordSample) {
      copy = in;
      damaged.assign(in.sample.stack.begin(), in.sample.stack.end());
      std::array<std::uint64_t, 24> regs{};
      in.sample.user_regs(regs);
      for (std::size_t at = 0; at + 8 <= damaged.size(); at += 8) {
        const std::uint64_t roll = next();
        if (roll % 8 != 0) continue;
        std::uint64_t v = next();
        if (roll % 3 == 0) v = regs[perf::kX86Sp] + (v % damaged.size());       // a stack address
        else if (roll % 3 == 1) v = regs[perf::kX86Ip] + (v % 4096) - 2048;    // near code
        std::memcpy(damaged.data() + at, &v, 8);
      }
      copy.sample.stack = damaged;
      p = &copy;
    }
    const perf::Record& rec = *p;
    if (rec.type != perf::kRecordSample) {
      session->process(rec);
      // A process's table is pushed again after its mappings change (the
      // recorder pushes it after such records): a new generation.
      pushed.clear();
      return;
    }
    std::array<std::uint64_t, 24> reg{};
    const std::uint64_t has = rec.sample.user_regs(reg);
    if (!(has >> perf::kX86Ip & 1) || !(has >> perf::kX86Sp & 1) || !(has >> perf::kX86Bp & 1)) return;
    const perf::UnwoundSample& u = session->unwind(rec);
    std::vector<std::uint64_t> lib;
    for (const perf::ResolvedFrame& f : u.frames)
      if (f.origin != perf::FrameOrigin::kKernel) lib.push_back(f.runtime_ip);
    // The host walk, as the BPF program runs it.
    auto [proc, fresh] = pushed.try_emplace(rec.id.pid);
    if (fresh) proc->second = &tables->process(rec.id.pid);
    g_process = proc->second;
    g_stack = rec.sample.stack;
    g_stack_base = reg[perf::kX86Sp];
    // One walk state for all samples, as the BPF program's per-CPU one:
    // the mappings it remembers from earlier walks of the same table are
    // used again.
    sframe_record_walk& w = g_walk;
    sframe_record_walk_reset(&w);
    w.pc = reg[perf::kX86Ip];
    w.sp = reg[perf::kX86Sp];
    w.fp = reg[perf::kX86Bp];
    w.fp_known = 1;
    w.rbx = reg[perf::kX86Bx];
    w.rbx_known = has >> perf::kX86Bx & 1;
    w.exact = 1;
    w.max = SFRAME_RECORD_MAX_USER;
    w.tgid = rec.id.pid;
    sframe_record_walk_use(&w, g_process);
    sframe_record_window_reset(&g_window, w.sp);
    std::vector<__u64> ips(SFRAME_RECORD_MAX_FRAMES);
    ips[0] = w.pc;
    w.n = 1;
    if (w.pc != 0)
      while (sframe_record_step(&w) && sframe_record_emit(ips.data(), 0, SFRAME_RECORD_MAX_USER, &w))
        ++sources[w.last_source];
    ours.assign(ips.begin(), ips.begin() + w.n);
    ++walked;
    // The library may walk further than the BPF depth.
    if (lib.size() > ours.size() && ours.size() == SFRAME_RECORD_MAX_USER) lib.resize(ours.size());
    if (lib == ours) {
      ++same;
      return;
    }
    std::size_t k = 0;
    while (k < lib.size() && k < ours.size() && lib[k] == ours[k]) ++k;
    std::string kind = k == ours.size() ? "ours shorter (stop: " + std::string(record::stop_name(w.stop)) + ")"
                       : k == lib.size() ? "library shorter (" + std::string(u.why) + ")"
                                          : "different frame";
    char ex[256];
    std::snprintf(ex, sizeof ex, "pid %u at frame %zu: library %#llx, ours %#llx (library %zu frames, ours %zu)",
                  rec.id.pid, k, k < lib.size() ? static_cast<unsigned long long>(lib[k]) : 0ull,
                  k < ours.size() ? static_cast<unsigned long long>(ours[k]) : 0ull, lib.size(), ours.size());
    auto& kd = kinds[kind];
    if (kd.first++ == 0) kd.second = ex;
  });
  if (!r) {
    std::fprintf(stderr, "walk_check: %s: malformed\n", argv[1]);
    return 2;
  }
  const auto& st = tables->stats();
  std::printf("walk_check: %llu samples walked, %llu identical (%.2f%%); callers: frame-pointer %llu, sframe %llu, "
              "generated %llu, signal %llu; tables: %llu modules, %llu pages (at most %llu rows in one), %llu rows, %llu rules and %llu pages "
              "left to frame pointers\n",
              (unsigned long long)walked, (unsigned long long)same, walked ? 100.0 * double(same) / double(walked) : 0,
              (unsigned long long)sources[0], (unsigned long long)sources[1], (unsigned long long)sources[2],
              (unsigned long long)sources[3], (unsigned long long)st.modules, (unsigned long long)st.pages, (unsigned long long)st.max_page_rows,
              (unsigned long long)st.rows, (unsigned long long)st.unsupported_rules,
              (unsigned long long)st.overflow_pages);
  for (const auto& [kind, v] : kinds)
    std::printf("  %llu %s, e.g. %s\n", (unsigned long long)v.first, kind.c_str(), v.second.c_str());
  if (walked == 0 || 100.0 * double(same) / double(walked) < min_percent) {
    std::printf("FAIL: fewer than %.1f%% of the samples walk the same\n", min_percent);
    return 1;
  }
  return 0;
}
