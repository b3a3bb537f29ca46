// SPDX-License-Identifier: MIT
// The in-kernel walk's two searches (src/record/bpf/walk.h, compiled here
// for the host), the mapping holding a PC and the row covering a page
// offset, against a linear scan over the same entries, on every size the
// maps allow, at every place in a block and at every boundary: the
// searches halve a range a fixed number of times (for the verifier), so a
// wrong count or bound shows at the largest sizes and the edges.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "bpf/record_abi.h"

namespace {
int no_read(__u64*, __u64) { return -1; }
const sframe_record_block* no_block(__u32, __u32) { return nullptr; }
const sframe_record_process* no_process(const __u32*) { return nullptr; }
}  // namespace

#include "bpf/walk_host.h"
#define SFRAME_RECORD_READ(dst, addr) no_read((dst), (addr))
#define SFRAME_RECORD_BLOCK(module, index) no_block((module), (index))
#define SFRAME_RECORD_PROCESS(tgid) no_process(tgid)
#define SFRAME_RECORD_ROW_CACHE() ((sframe_record_row_cache*)nullptr)
#include "bpf/walk.h"

namespace {

int linear_mapping(const sframe_record_process& p, std::uint64_t pc) {
  for (std::uint32_t i = 0; i < p.n; ++i)
    if (p.maps[i].start <= pc && pc < p.maps[i].end) return static_cast<int>(i);
  return -1;
}

int linear_row(const sframe_record_block& b, std::uint32_t first, std::uint32_t n, std::uint32_t off) {
  int last = -1;
  for (std::uint32_t i = first; i < first + n; ++i)
    if (b.rows[i].start <= off) last = static_cast<int>(i);
  return last;
}

TEST(RecordSearch, MappingIndexIsTheLinearScansOnEverySize) {
  std::mt19937_64 rng(7);
  auto process = std::make_unique<sframe_record_process>();
  for (std::uint32_t n = 0; n <= SFRAME_RECORD_MAX_MAPPINGS; ++n) {
    for (int layout = 0; layout < 4; ++layout) {
      *process = {};
      process->n = n;
      // Sorted, disjoint, sometimes touching; user addresses (below 2^47).
      std::uint64_t at = 0x1000 + (rng() % 4) * 0x1000;
      for (std::uint32_t i = 0; i < n; ++i) {
        at += (layout == 0 ? 0 : (rng() % 3) * 0x1000);
        const std::uint64_t len = 0x1000 * (1 + rng() % 8);
        process->maps[i].start = at;
        process->maps[i].end = at + len;
        at += len;
      }
      std::vector<std::uint64_t> pcs = {0, 1, 0x7fffffffffffull};
      for (std::uint32_t i = 0; i < n; ++i)
        for (std::uint64_t a : {process->maps[i].start, process->maps[i].end})
          for (std::uint64_t d : {-1, 0, 1}) pcs.push_back(a + d);
      for (std::uint64_t pc : pcs)
        ASSERT_EQ(sframe_record_mapping_index(process.get(), pc), linear_mapping(*process, pc))
            << "n=" << n << " layout=" << layout << " pc=0x" << std::hex << pc;
    }
  }
  EXPECT_EQ(sframe_record_mapping_index(nullptr, 0x1000), -1);
}

TEST(RecordSearch, RowIndexIsTheLinearScansOnEveryPlaceAndSize) {
  std::mt19937_64 rng(11);
  auto block = std::make_unique<sframe_record_block>();
  const std::uint32_t page_bytes = 1u << SFRAME_RECORD_PAGE_SHIFT;
  const std::uint32_t rows = SFRAME_RECORD_BLOCK_ROWS;
  std::vector<std::uint32_t> offsets;
  for (std::uint32_t off = 0; off < page_bytes; off += 7) offsets.push_back(off);
  offsets.push_back(page_bytes - 1);
  for (std::uint32_t first : {0u, 1u, 2u, 255u, 256u, 400u, rows - 2, rows - 1}) {
    for (std::uint32_t n = 0; n <= rows - first; n += n < 20 || n > rows - first - 20 ? 1 : 17) {
      for (int layout = 0; layout < 3; ++layout) {
        // Rows before `first` belong to other pages (any starts); the
        // page's start at 0 and increase (dense: every byte a row, as a
        // PC-mask or 1-byte instructions give), then padding to the block's
        // end (layout 2), or the next page's rows.
        for (auto& r : block->rows) r.start = static_cast<__u16>(rng() % page_bytes);
        std::uint32_t at = 0, pad = layout == 2 ? 1 + static_cast<std::uint32_t>(rng() % 5) : 0;
        for (std::uint32_t i = 0; i < n; ++i) {
          const bool padding = i + pad >= n;
          block->rows[first + i].start = static_cast<__u16>(padding ? SFRAME_RECORD_ROW_PAD : at);
          at += layout == 0 ? 1 : 1 + static_cast<std::uint32_t>(rng() % 15);
          if (at >= page_bytes) at = page_bytes - 1;
        }
        for (std::uint32_t off : offsets)
          ASSERT_EQ(sframe_record_row_index(block.get(), first, n, off), linear_row(*block, first, n, off))
              << "first=" << first << " n=" << n << " layout=" << layout << " off=" << off;
      }
    }
  }
  // Ranges past the block have no row.
  EXPECT_EQ(sframe_record_row_index(block.get(), rows, 1, 0), -1);
  EXPECT_EQ(sframe_record_row_index(block.get(), rows - 1, 2, 0), -1);
  EXPECT_EQ(sframe_record_row_index(nullptr, 0, 1, 0), -1);
}

}  // namespace
