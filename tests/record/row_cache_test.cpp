// SPDX-License-Identifier: MIT
// The in-kernel walk's row cache (record_abi.h, bpf/walk.h compiled here
// for the host): over the tables of two real modules (this machine's C
// library and C++ library, SFrame generated from their .eh_frame) under
// module IDs 1 and 2, every lookup through one CPU's cache, hits, misses
// and evictions, returns the row the table's own lookup (directory, block,
// search) returns, or none where it finds none; a module's rows never
// answer for the other's at the same offset.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "bpf/record_abi.h"
#include "sframe/elf/elf.hpp"
#include "tables.hpp"

#include "bpf/walk_host.h"
namespace {
const sframe::record::ModuleTable* g_tables[3] = {};
sframe_record_row_cache* g_cache = nullptr;
int no_read(__u64*, __u64) { return -1; }
const sframe_record_process* no_process(const __u32*) { return nullptr; }
}  // namespace
#define SFRAME_RECORD_READ(dst, addr) no_read((dst), (addr))
#define SFRAME_RECORD_BLOCK(module, index) ((module) < 3 && g_tables[module] ? g_tables[module]->block(index) : nullptr)
#define SFRAME_RECORD_PROCESS(tgid) no_process(tgid)
#define SFRAME_RECORD_ROW_CACHE() g_cache
#include "bpf/walk.h"

namespace {

sframe::record::ModuleTable table_of(const char* path) {
  auto f = sframe::elf::ElfFile::open(path);
  EXPECT_TRUE(f.has_value()) << path;
  if (!f) return {};
  sframe::record::TableStats stats;
  return sframe::record::build_module_table(*f, stats);
}

// The walk's state for a lookup in module `id`, mapped at its table base.
sframe_record_walk walk_in(std::uint32_t id) {
  sframe_record_walk w{};
  w.have_process = 1;
  w.map_start = 0;
  w.map_end = ~0ull;
  w.map_module = id;
  return w;
}

TEST(RecordRowCache, AnswersAsTheTableDoes) {
  const auto libc = table_of("/lib/x86_64-linux-gnu/libc.so.6");
  const auto libstdcxx = table_of("/lib/x86_64-linux-gnu/libstdc++.so.6");
  ASSERT_FALSE(libc.blocks().empty());
  ASSERT_FALSE(libstdcxx.blocks().empty());
  g_tables[1] = &libc;
  g_tables[2] = &libstdcxx;
  auto cache = std::make_unique<sframe_record_row_cache>();
  // Offsets a walk meets again and again (a few thousand: more than the
  // cache's slots, so that slots are taken over), in both modules' text
  // and past it.
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> offsets(4000);
  for (auto& o : offsets) o = rng() % (std::uint64_t{3} << 20);
  int found = 0, none = 0, differ_across = 0;
  for (int i = 0; i < 400000; ++i) {
    const std::uint64_t off = offsets[rng() % offsets.size()];
    const std::uint32_t id = 1 + static_cast<std::uint32_t>(rng() % 2);
    sframe_record_walk w = walk_in(id);
    g_cache = nullptr;
    const sframe_record_row* want = sframe_record_find_rule(&w, off);
    g_cache = cache.get();
    const sframe_record_row* got = sframe_record_find_rule(&w, off);
    ASSERT_EQ(got != nullptr, want != nullptr) << "module " << id << " offset 0x" << std::hex << off;
    if (!want) {
      ++none;
      continue;
    }
    ++found;
    ASSERT_EQ(std::memcmp(got, want, sizeof *want), 0) << "module " << id << " offset 0x" << std::hex << off;
    // The other module at the same offset: its own row, or none.
    sframe_record_walk other = walk_in(3 - id);
    g_cache = nullptr;
    const sframe_record_row* theirs = sframe_record_find_rule(&other, off);
    differ_across += theirs && std::memcmp(theirs, want, sizeof *want) != 0;
  }
  int filled = 0;
  for (const auto& s : cache->slots) filled += s.tag != 0;
  // Both outcomes ran, the cache filled up, and the two modules' rows at
  // one offset differ often enough that a mix-up would have shown.
  EXPECT_GT(found, 100000);
  EXPECT_GT(none, 1000);
  EXPECT_GT(filled, int(SFRAME_RECORD_ROW_CACHE_SLOTS) * 9 / 10);
  EXPECT_GT(differ_across, 10000);
}

}  // namespace
