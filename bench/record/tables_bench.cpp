// SPDX-License-Identifier: MIT
// `sframe record`'s in-kernel table layout (record_abi.h: per module, an
// array of 4 KiB blocks: a directory of 1 KiB pages, then each page's
// 8-byte rows) against the library's
// RowIndex of the same module (8-byte boundaries, a bucket table, the
// distinct rows decoded once), for the modules given:
//   record_tables_bench FILE...
// For each: rows, bytes of each layout, and the host time of a lookup of a
// random covered PC (blocks: the BPF program's own lookup, bpf/walk.h
// compiled for the host, two block lookups and a search; RowIndex:
// row_id()).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/process/process.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "bpf/record_abi.h"
#include "tables.hpp"

#include "bpf/walk_host.h"
// Only the walk's rule lookup is used here (one module, mapped at its
// table base): its reads find nothing, its blocks are the module's.
namespace {
const sframe::record::ModuleTable* g_table = nullptr;
int no_read(__u64*, __u64) { return -1; }
const sframe_record_process* no_process(const __u32*) { return nullptr; }
}  // namespace
#define SFRAME_RECORD_READ(dst, addr) no_read((dst), (addr))
#define SFRAME_RECORD_BLOCK(module, index) ((void)(module), g_table->block(index))
#define SFRAME_RECORD_PROCESS(tgid) no_process(tgid)
// The layout's own lookup, every time: no row cache (and every module here
// is module 1).
#define SFRAME_RECORD_ROW_CACHE() ((sframe_record_row_cache*)nullptr)
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
  std::printf("%-28s %9s %9s %11s %11s %7s %12s %12s\n", "module", "FREs", "rows", "blocks MB", "RowIndex MB",
              "ratio", "blocks ns", "RowIndex ns");
  for (int a = 1; a < argc; ++a) {
    auto f = elf::ElfFile::open(argv[a]);
    if (!f) {
      std::fprintf(stderr, "%s: cannot open\n", argv[a]);
      return 1;
    }
    record::TableStats st;
    const record::ModuleTable table = record::build_module_table(*f, st);
    g_table = &table;
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
    const std::size_t table_bytes = table.blocks().size_bytes();

    // Random PCs among those of the pages with rules.
    std::vector<std::uint64_t> pages;
    for (std::uint64_t p = 0;; ++p) {
      const sframe_record_block* d = table.block(static_cast<std::uint32_t>(p / SFRAME_RECORD_DIR_PAGES));
      const std::uint32_t lo = d ? d->dir[p % SFRAME_RECORD_DIR_PAGES] : 0;
      if (!d || lo / SFRAME_RECORD_BLOCK_ROWS < p / SFRAME_RECORD_DIR_PAGES) break;  // past the directory
      if (d->dir[p % SFRAME_RECORD_DIR_PAGES + 1] > lo) pages.push_back(p);
    }
    // The walk's state for sframe_record_rule(): one mapping, bias 0 (PCs
    // are offsets from the table base).
    sframe_record_walk w{};
    w.have_process = 1;
    w.map_start = 0;
    w.map_end = ~0ull;
    w.map_module = 1;
    std::mt19937_64 rng(1);
    std::vector<std::uint64_t> pcs(1 << 20);
    for (auto& pc : pcs)
      pc = pages.empty() ? 0
                         : (pages[rng() % pages.size()] << SFRAME_RECORD_PAGE_SHIFT) +
                               rng() % (1u << SFRAME_RECORD_PAGE_SHIFT);
    std::uint64_t sink = 0;
    auto t0 = Clock::now();
    for (std::uint64_t pc : pcs) {
      const sframe_record_row* r = sframe_record_find_rule(&w, pc);
      sink += r ? static_cast<std::uint64_t>(r->cfa_off) : 0;
    }
    auto t1 = Clock::now();
    for (std::uint64_t pc : pcs)
      for (const RowIndex* r : indexes) sink += r->row_id(pc);
    auto t2 = Clock::now();
    const double n = double(pcs.size());
    const char* base = std::strrchr(argv[a], '/');
    std::printf("%-28.28s %9zu %9llu %11.2f %11.2f %6.1fx %12.1f %12.1f%s\n", base ? base + 1 : argv[a], fres,
                static_cast<unsigned long long>(st.rows), double(table_bytes) / 1e6, double(ri_bytes) / 1e6,
                ri_bytes ? double(table_bytes) / double(ri_bytes) : 0.0,
                std::chrono::duration<double, std::nano>(t1 - t0).count() / n,
                std::chrono::duration<double, std::nano>(t2 - t1).count() / n, sink == 42 ? " " : "");
  }
  return 0;
}
