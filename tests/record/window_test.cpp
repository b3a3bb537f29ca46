// SPDX-License-Identifier: MIT
// The in-kernel walk's stack window (src/record/bpf/stack_window.h,
// compiled here for the host) against direct reads of the same memory: user
// memory is modelled as pages that are readable or not, as
// bpf_probe_read_user sees them (a read fails whole when any byte of it is
// on an unreadable page). Every read through the window, in any order,
// must return what an 8-byte read of its own returns: the same failure or
// the same value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr std::uint64_t kBase = 0x7ffd'0000'0000;  // the model's first page
constexpr std::uint64_t kPage = 4096;
constexpr int kPages = 14;  // 3.5 windows (a static_assert below says so)

struct Memory {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(kPages * kPage);
  bool readable[kPages] = {};
  int chunk_reads = 0;  // reads of more than 8 bytes (the window's)
  int word_reads = 0;

  int read(void* dst, std::uint32_t len, std::uint64_t addr) {
    (len > 8 ? chunk_reads : word_reads)++;
    if (addr < kBase || addr + len > kBase + bytes.size() || addr + len < addr) return -14;
    for (std::uint64_t p = (addr - kBase) / kPage; p <= (addr + len - 1 - kBase) / kPage; ++p)
      if (!readable[p]) return -14;
    std::memcpy(dst, bytes.data() + (addr - kBase), len);
    return 0;
  }
};

Memory* g_memory = nullptr;
int read_user(void* dst, std::uint32_t len, std::uint64_t addr) { return g_memory->read(dst, len, addr); }

}  // namespace

#include "bpf/walk_host.h"
#define SFRAME_RECORD_READ_USER(dst, len, addr) read_user((dst), (len), (addr))
#include "bpf/stack_window.h"

static_assert(2 * kPages * kPage == 7 * SFRAME_RECORD_WINDOW_BYTES, "the model holds 3.5 windows");

namespace {

TEST(RecordStackWindow, EveryReadIsTheDirectReadsWhateverPagesAreReadable) {
  std::mt19937_64 rng(11);
  Memory memory;
  g_memory = &memory;
  auto window = std::make_unique<sframe_record_window>();
  int from_window = 0, failed = 0, layouts = 0;
  for (int layout = 0; layout < 400; ++layout, ++layouts) {
    for (auto& b : memory.bytes) b = static_cast<std::uint8_t>(rng());
    for (bool& r : memory.readable) r = rng() % 4 != 0;  // about one page in four unreadable
    // An SP anywhere in the model, sometimes just below a page's end (the
    // window then starts on one page and runs into the next).
    std::uint64_t sp = kBase + rng() % (kPages * kPage);
    if (layout % 3 == 0) sp = kBase + (1 + rng() % (kPages - 1)) * kPage - 8 * (1 + rng() % 4);
    sframe_record_window_reset(window.get(), sp);
    for (int i = 0; i < 300; ++i) {
      // Addresses around the window: below its base, in it (aligned or
      // not, across chunk boundaries); then, as a walk goes, up past its
      // end (which moves it up) and past the model.
      const std::uint64_t base = sp & ~std::uint64_t{SFRAME_RECORD_WINDOW_CHUNK - 1};
      std::uint64_t addr = base - 64 + rng() % (SFRAME_RECORD_WINDOW_BYTES + 64);
      if (i >= 250) addr = sp + (i - 250) * (3 * SFRAME_RECORD_WINDOW_BYTES / 50) + rng() % 64;
      if (i % 4 == 0) addr &= ~std::uint64_t{7};
      if (i % 17 == 0) addr = window->base + (1 + rng() % SFRAME_RECORD_WINDOW_CHUNKS) * SFRAME_RECORD_WINDOW_CHUNK - 4;
      __u64 direct = 0, through = 0;
      const int direct_rc = memory.read(&direct, 8, addr);
      const int words_before = memory.word_reads;
      const int rc = sframe_record_window_read(window.get(), &through, addr);
      ASSERT_EQ(rc != 0, direct_rc != 0) << std::hex << "sp " << sp << " addr " << addr;
      if (rc == 0) {
        ASSERT_EQ(through, direct) << std::hex << "sp " << sp << " addr " << addr;
      }
      failed += rc != 0;
      from_window += memory.word_reads == words_before && rc == 0;
    }
  }
  // The window served reads and reads failed: both paths ran.
  EXPECT_GT(from_window, layouts * 100);
  EXPECT_GT(failed, layouts * 10);
}

// A walk up a stack deeper than the window, as a deep C++ or interpreter
// stack is: reads past the window's end move it up, so each chunk is read
// once and no word on its own; a read below the moved window then goes on
// its own, and returns what a direct read does.
TEST(RecordStackWindow, MovesUpAlongADeepStack) {
  Memory memory;
  g_memory = &memory;
  for (bool& r : memory.readable) r = true;
  for (std::size_t i = 0; i < memory.bytes.size(); ++i) memory.bytes[i] = static_cast<std::uint8_t>(i * 7 + 3);
  const auto model = [&memory](std::uint64_t a) {
    __u64 w = 0;
    std::memcpy(&w, memory.bytes.data() + (a - kBase), 8);
    return w;
  };
  auto window = std::make_unique<sframe_record_window>();
  const std::uint64_t sp = kBase + 100 * 8;
  sframe_record_window_reset(window.get(), sp);
  // Every 24 bytes up to the model's end: 3.5 windows.
  const std::uint64_t top = kBase + kPages * kPage;
  int straddling = 0;
  __u64 v = 0;
  for (std::uint64_t a = sp; a + 8 <= top; a += 24) {
    ASSERT_EQ(sframe_record_window_read(window.get(), &v, a), 0) << std::hex << a;
    ASSERT_EQ(v, model(a)) << std::hex << a;
    straddling += (a & (SFRAME_RECORD_WINDOW_CHUNK - 1)) > SFRAME_RECORD_WINDOW_CHUNK - 8;
  }
  const std::uint64_t first_chunk = sp & ~std::uint64_t{SFRAME_RECORD_WINDOW_CHUNK - 1};
  EXPECT_EQ(memory.chunk_reads, int((top - first_chunk) / SFRAME_RECORD_WINDOW_CHUNK));
  EXPECT_EQ(memory.word_reads, straddling);
  EXPECT_GT(window->base, sp + SFRAME_RECORD_WINDOW_BYTES);
  // Below the moved window: a read of its own, the same value.
  const int before = memory.word_reads;
  EXPECT_EQ(sframe_record_window_read(window.get(), &v, sp), 0);
  EXPECT_EQ(memory.word_reads, before + 1);
  EXPECT_EQ(v, model(sp));
}

TEST(RecordStackWindow, ReadsAChunkOnceAndNeverAcrossAPage) {
  Memory memory;
  g_memory = &memory;
  for (bool& r : memory.readable) r = true;
  memory.readable[3] = false;
  auto window = std::make_unique<sframe_record_window>();
  // SP 40 bytes below page 3 (unreadable): the window's first chunk is the
  // last of page 2, its second the first of page 3.
  const std::uint64_t sp = kBase + 3 * kPage - 40;
  sframe_record_window_reset(window.get(), sp);
  EXPECT_EQ(window->base, kBase + 3 * kPage - SFRAME_RECORD_WINDOW_CHUNK);
  __u64 v = 0;
  for (std::uint64_t a = sp; a + 8 <= kBase + 3 * kPage; a += 8) EXPECT_EQ(sframe_record_window_read(window.get(), &v, a), 0);
  EXPECT_EQ(memory.chunk_reads, 1);
  EXPECT_EQ(memory.word_reads, 0);
  // Page 3: its chunk fails once, then each read goes on its own (and fails).
  EXPECT_NE(sframe_record_window_read(window.get(), &v, kBase + 3 * kPage), 0);
  EXPECT_NE(sframe_record_window_read(window.get(), &v, kBase + 3 * kPage + 8), 0);
  EXPECT_EQ(memory.chunk_reads, 2);
  EXPECT_EQ(memory.word_reads, 2);
  // A read straddling pages 2 and 3 fails, as a direct one does.
  EXPECT_NE(sframe_record_window_read(window.get(), &v, kBase + 3 * kPage - 4), 0);
}

}  // namespace
