// SPDX-License-Identifier: MIT
// `sframe record`'s in-kernel table layout (record_abi.h: per module, 1 KiB
// pages of up to 119 8-byte rows in a hash map, denser ones split into
// 256-byte sub-pages) against the library's
// RowIndex of the same module (8-byte boundaries, a bucket table, the
// distinct rows decoded once), for the modules given:
//   record_tables_bench FILE...
// For each: rows, bytes of each layout, and the host time of a lookup of a
// random covered PC (pages: a hash lookup and the BPF program's own page
// search, bpf/walk.h compiled for the host; RowIndex: row_id()). Memory
// counts values only (a BPF hash map adds its per-element header and key).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/process/process.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "bpf/record_abi.h"
#include "tables.hpp"

#define SFRAME_RECORD_INLINE inline
#define SFRAME_RECORD_OPAQUE(v) (void)0
#define SFRAME_RECORD_STEP_LINKAGE static inline
#define SFRAME_RECORD_SEARCH_LINKAGE static inline
// Only the walk's rule lookup is used here (one module, mapped at its
// link-time addresses): its reads find nothing, its pages come from the
// module's hash below.
#include <unordered_map>
namespace {
std::unordered_map<std::uint32_t, const sframe_record_page*> g_pages;
int no_read(__u64*, __u64) { return -1; }
const sframe_record_page* page_of(const sframe_record_page_key* key) {
  auto it = g_pages.find(key->page);
  return it == g_pages.end() ? nullptr : it->second;
}
const sframe_record_process* no_process(const __u32*) { return nullptr; }
}  // namespace
#define SFRAME_RECORD_READ(dst, addr) no_read((dst), (addr))
#define SFRAME_RECORD_PAGE(key) page_of(key)
#define SFRAME_RECORD_PROCESS(tgid) no_process(tgid)
#include "bpf/walk.h"

namespace {

using Clock = std::chrono::steady_clock;

// Bytes of a RowIndex as lookup.hpp accounts them: 8 per boundary, 4 per
// bucket, 8 per FDE, one decoded row (FrameRow and two flags) per distinct
// row.
std::size_t row_index_bytes(const sframe::RowIndex& r) {
  return 8 * r.num_boundaries() + 4 * r.view().bucket_count() + 8 * r.section().num_fdes() +
         (sizeof(sframe::FrameRow) + 2) * r.num_rows();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sframe;
  if (argc < 2) {
    std::fprintf(stderr, "usage: record_tables_bench FILE...\n");
    return 2;
  }
  std::printf("%-28s %9s %9s %11s %11s %7s %12s %12s\n", "module", "FREs", "rows", "pages MB", "RowIndex MB",
              "ratio", "pages ns", "RowIndex ns");
  for (int a = 1; a < argc; ++a) {
    auto f = elf::ElfFile::open(argv[a]);
    if (!f) {
      std::fprintf(stderr, "%s: cannot open\n", argv[a]);
      return 1;
    }
    record::TableStats st;
    const record::ModulePages pages = record::build_module_pages(*f, st);
    // The library's module, built as the tables' builder builds it.
    auto own = f->sframe_section();
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(process::module_image(*f, own), {});
    if (u.needs_generation()) {
      auto eh = f->section_bytes(".eh_frame");
      (void)cfi::generate(u, *f, eh ? eh->header.address : 0);
    }
    std::size_t ri_bytes = 0, fres = 0;
    std::vector<const RowIndex*> indexes;
    for (const cfi::UnwindSection* s : {&u.primary(), &u.extra()}) {
      if (!s->usable() || !s->rows) continue;
      ri_bytes += row_index_bytes(*s->rows);
      indexes.push_back(&*s->rows);
      for (std::uint32_t i = 0; i < s->section->num_fdes(); ++i)
        if (auto fde = s->section->fde(i)) fres += fde->num_fres;
    }
    const std::size_t page_bytes = pages.size() * sizeof(sframe_record_page);

    // Random PCs among those a page covers.
    // The pages as the BPF map holds them (fixed-size values).
    std::vector<sframe_record_page> values(pages.size());
    g_pages.clear();
    std::vector<std::uint32_t> keys;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      pages.fill(i, values[i]);
      const std::uint32_t k = pages.key(i);
      g_pages.emplace(k, &values[i]);
      if (!(k & SFRAME_RECORD_SUBPAGE)) keys.push_back(k);
    }
    // The walk's state for sframe_record_rule(): one mapping, bias 0.
    sframe_record_walk w{};
    w.have_process = 1;
    w.map_start = 0;
    w.map_end = ~0ull;
    w.map_module = 1;
    std::mt19937_64 rng(1);
    std::vector<std::uint64_t> pcs(1 << 20);
    for (auto& pc : pcs)
      pc = keys.empty() ? 0
                        : (std::uint64_t{keys[rng() % keys.size()]} << SFRAME_RECORD_PAGE_SHIFT) +
                              rng() % (1u << SFRAME_RECORD_PAGE_SHIFT);
    std::uint64_t sink = 0;
    auto t0 = Clock::now();
    for (std::uint64_t pc : pcs) {
      const sframe_record_row* r = sframe_record_rule(&w, pc);
      sink += r ? static_cast<std::uint64_t>(r->cfa_off) : 0;
    }
    auto t1 = Clock::now();
    for (std::uint64_t pc : pcs)
      for (const RowIndex* r : indexes) sink += r->row_id(pc);
    auto t2 = Clock::now();
    const double n = double(pcs.size());
    const char* base = std::strrchr(argv[a], '/');
    std::printf("%-28.28s %9zu %9llu %11.2f %11.2f %6.1fx %12.1f %12.1f%s\n", base ? base + 1 : argv[a], fres,
                static_cast<unsigned long long>(st.rows), double(page_bytes) / 1e6, double(ri_bytes) / 1e6,
                ri_bytes ? double(page_bytes) / double(ri_bytes) : 0.0,
                std::chrono::duration<double, std::nano>(t1 - t0).count() / n,
                std::chrono::duration<double, std::nano>(t2 - t1).count() / n, sink == 42 ? " " : "");
  }
  return 0;
}
