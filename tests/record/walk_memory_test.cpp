// SPDX-License-Identifier: MIT
// The in-kernel walk's memory of the mappings it found
// (src/record/bpf/walk.h, compiled here for the host): a later walk of the
// same process table takes them from there instead of searching the
// table, and a walk of another process or of the table pushed again
// (a new generation: a dlclose, an exec) searches the table it is given.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "bpf/record_abi.h"

namespace {
// The process table the walk's search sees, and how often it looked.
const sframe_record_process* g_table = nullptr;
int g_lookups = 0;
const sframe_record_process* table_of(const __u32*) {
  ++g_lookups;
  return g_table;
}
int no_read(__u64*, __u64) { return -1; }
const sframe_record_block* no_block(__u32, __u32) { return nullptr; }
}  // namespace

#include "bpf/walk_host.h"
#define SFRAME_RECORD_READ(dst, addr) no_read((dst), (addr))
#define SFRAME_RECORD_BLOCK(module, index) no_block((module), (index))
#define SFRAME_RECORD_PROCESS(tgid) table_of(tgid)
#define SFRAME_RECORD_ROW_CACHE() ((sframe_record_row_cache*)nullptr)
#include "bpf/walk.h"

namespace {

// A table of `n` mappings of 64 KiB, 64 KiB apart from 0x400000, mapping i
// in module `first_module` + i.
std::unique_ptr<sframe_record_process> table(__u32 generation, __u32 n, __u32 first_module) {
  auto p = std::make_unique<sframe_record_process>();
  p->generation = generation;
  p->n = n;
  for (__u32 i = 0; i < n; ++i) {
    p->maps[i].start = 0x400000 + 0x20000ull * i;
    p->maps[i].end = p->maps[i].start + 0x10000;
    p->maps[i].bias = p->maps[i].start;
    p->maps[i].module = first_module + i;
  }
  return p;
}

__u64 pc_in(__u32 i) { return 0x400000 + 0x20000ull * i + 0x123; }

class RecordWalkMemory : public ::testing::Test {
 protected:
  // A new sample's walk of process `tgid`, as on_sample starts it.
  void start(__u32 tgid, const sframe_record_process* p) {
    sframe_record_walk_reset(&w);
    w.tgid = tgid;
    sframe_record_walk_use(&w, p);
    g_table = p;
  }
  // The module the walk finds for `pc` (its table has no rows: the rule is
  // none, but the mapping is the walk's), and whether it searched.
  __u32 module_at(__u64 pc, bool& searched) {
    const int before = g_lookups;
    EXPECT_EQ(sframe_record_rule(&w, pc), 0);
    searched = g_lookups != before;
    return w.map_module;
  }
  sframe_record_walk w{};
};

TEST_F(RecordWalkMemory, LaterWalksOfTheSameTableDoNotSearch) {
  const auto p = table(1, 3, 10);
  bool searched = false;
  start(100, p.get());
  for (__u32 i = 0; i < 3; ++i) {
    EXPECT_EQ(module_at(pc_in(i), searched), 10 + i);
    EXPECT_TRUE(searched) << i;
  }
  start(100, p.get());
  for (__u32 i : {2u, 0u, 1u, 2u}) {
    EXPECT_EQ(module_at(pc_in(i), searched), 10 + i);
    EXPECT_FALSE(searched) << i;
  }
  // The range's ends: the first byte is in, the end is not.
  EXPECT_EQ(module_at(0x420000, searched), 11u);
  EXPECT_FALSE(searched);
  // Between mappings: searched, and none found.
  module_at(0x410000, searched);
  EXPECT_TRUE(searched);
  EXPECT_EQ(w.unmapped_pc, 1);
}

TEST_F(RecordWalkMemory, ANewGenerationOrProcessSearchesItsOwnTable) {
  const auto old_table = table(1, 3, 10);
  const auto new_table = table(2, 3, 20);  // the same ranges, other modules
  bool searched = false;
  start(100, old_table.get());
  EXPECT_EQ(module_at(pc_in(1), searched), 11u);
  start(100, new_table.get());
  EXPECT_EQ(module_at(pc_in(1), searched), 21u);
  EXPECT_TRUE(searched);
  // Another process with a table of the same generation number.
  const auto other = table(2, 3, 30);
  start(101, other.get());
  EXPECT_EQ(module_at(pc_in(1), searched), 31u);
  EXPECT_TRUE(searched);
  start(100, new_table.get());
  EXPECT_EQ(module_at(pc_in(1), searched), 21u);
  EXPECT_TRUE(searched);
}

TEST_F(RecordWalkMemory, ATablePushedDuringAWalkIsNotRemembered) {
  const auto old_table = table(1, 3, 10);
  const auto new_table = table(2, 3, 20);
  bool searched = false;
  start(100, old_table.get());
  g_table = new_table.get();  // pushed after the walk began
  EXPECT_EQ(module_at(pc_in(0), searched), 20u);
  EXPECT_TRUE(searched);
  // A walk still tagged with the old table does not take it from memory.
  start(100, old_table.get());
  EXPECT_EQ(module_at(pc_in(0), searched), 10u);
  EXPECT_TRUE(searched);
}

TEST_F(RecordWalkMemory, KeepsTheLastMappingsFound) {
  const __u32 n = SFRAME_RECORD_WALK_MAPS + 3;
  const auto p = table(1, n, 10);
  bool searched = false;
  start(100, p.get());
  for (__u32 i = 0; i < n; ++i) EXPECT_EQ(module_at(pc_in(i), searched), 10 + i);
  start(100, p.get());
  for (__u32 i = n; i-- > 0;) {
    EXPECT_EQ(module_at(pc_in(i), searched), 10 + i);
    EXPECT_EQ(searched, i < n - SFRAME_RECORD_WALK_MAPS) << i;
  }
}

TEST_F(RecordWalkMemory, AWalkWithoutATableRemembersNothing) {
  const auto p = table(1, 2, 10);
  bool searched = false;
  start(100, p.get());
  EXPECT_EQ(module_at(pc_in(0), searched), 10u);
  // A sample with no table for its process: the walk takes no rule.
  sframe_record_walk_reset(&w);
  w.tgid = 100;
  EXPECT_EQ(w.have_process, 0);
  EXPECT_EQ(sframe_record_rule(&w, pc_in(0)), 0);
  EXPECT_EQ(w.map_module, 0u);
}

}  // namespace
