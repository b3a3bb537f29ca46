// SPDX-License-Identifier: MIT
// Resource bounds of parse() and validate() on hostile sections:
//  - counts of 2^32-1 FDEs or FREs are rejected from the extents, before
//    anything proportional to the claim is allocated (a counting global
//    operator new measures what parse()/validate() allocate);
//  - validation work is linear in the section size even when FDEs share FRE
//    data, overlap each other's FRE runs or claim huge FRE counts. The work is
//    measured in counts (ValidateStats: FDE and FRE decodes), never timings.
// The sections are written here byte by byte from the spec (v2 §2.2-2.4,
// v3 §2.3); the expected errors are the spec's rules, and the expected
// lenient verdicts come from walking the public accessors FRE by FRE.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "sframe/format/section.hpp"

// ---------------------------------------------------------------------------
// Counting allocator: every operator new of the test binary goes through
// here; tests read the bytes allocated between two points of one thread.
namespace {
std::atomic<std::uint64_t> g_allocated{0};
}  // namespace

// g++ 12 at -O2 flags free() of what the replaced operator new returned as
// mismatched: it is malloc's, as the replacement says.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  g_allocated.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {


using sframe::FormatErrc;
using sframe::Section;
using sframe::Strictness;
using sframe::ValidateStats;

// Bytes allocated while running f.
template <class F>
std::uint64_t allocated_by(F&& f) {
  const std::uint64_t before = g_allocated.load();
  f();
  return g_allocated.load() - before;
}

// Little-endian section writer.
struct Writer {
  std::vector<std::byte> b;
  void u8(std::uint64_t v) { b.push_back(static_cast<std::byte>(v & 0xff)); }
  void u16(std::uint64_t v) { u8(v); u8(v >> 8); }
  void u32(std::uint64_t v) { u16(v); u16(v >> 16); }
  void u64(std::uint64_t v) { u32(v); u32(v >> 32); }
};

// v2 AMD64 header (RA fixed at CFA-8, FP tracked); flags 0 (unsorted, so
// FDEs may overlap in the lenient cases), FDEs right after the header.
void v2_header(Writer& w, std::uint32_t num_fdes, std::uint32_t num_fres, std::uint32_t fre_len) {
  w.u16(0xdee2);
  w.u8(2);       // version
  w.u8(0);       // flags
  w.u8(3);       // AMD64 LE
  w.u8(0);       // fixed FP offset: tracked
  w.u8(0xf8);    // fixed RA offset: -8
  w.u8(0);       // aux header length
  w.u32(num_fdes);
  w.u32(num_fres);
  w.u32(fre_len);
  w.u32(0);                   // fdeoff
  w.u32(num_fdes * 20);       // freoff
}

// v2 FDE: ADDR1 FREs, PCINC.
void v2_fde(Writer& w, std::uint32_t start, std::uint32_t size, std::uint32_t fre_off, std::uint32_t num_fres) {
  w.u32(start);
  w.u32(size);
  w.u32(fre_off);
  w.u32(num_fres);
  w.u8(0);  // info: ADDR1, PCINC
  w.u8(0);  // rep size
  w.u16(0);
}

// An ADDR1 FRE: start, info (SP-based CFA, one 1-byte word), CFA offset 8.
void fre1(Writer& w, std::uint8_t start) {
  w.u8(start);
  w.u8(0x03);
  w.u8(8);
}
constexpr std::uint32_t kFre1Size = 3;

// A section of `fdes` v2 FDEs; FDE i's FREs start at FRE (i * step) % `fres`
// of one shared run of `fres` FREs and it claims `count(i)` of them.
template <class Count>
std::vector<std::byte> shared_v2(std::uint32_t fdes, std::uint32_t fres, std::uint32_t step, Count count) {
  Writer w;
  const std::uint32_t fre_len = fres * kFre1Size;
  v2_header(w, fdes, fres, fre_len);
  for (std::uint32_t i = 0; i < fdes; ++i)
    v2_fde(w, 0x1000 * i, 0x1000, (i * step % fres) * kFre1Size, count(i));
  for (std::uint32_t k = 0; k < fres; ++k) fre1(w, static_cast<std::uint8_t>(k));
  return w.b;
}

// The lenient verdict the public accessors give: the first error met
// walking every FDE's FREs and rows, naively (quadratic, test sizes only).
std::optional<sframe::Error> naive_first_error(const Section& s) {
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    const auto f = s.fde(i);
    if (!f) return f.error();
    for (const auto& fre : s.fres(*f)) {
      if (!fre) return fre.error();
      if (auto row = s.row(*f, *fre); !row) return row.error();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------

TEST(ResourceBounds, HugeFdeCountRejectedByParseWithoutAllocating) {
  for (const int version : {1, 2, 3}) {
    Writer w;
    w.u16(0xdee2);
    w.u8(static_cast<std::uint64_t>(version));
    w.u8(0);
    w.u8(3);
    w.u8(0);
    w.u8(0xf8);
    w.u8(0);
    w.u32(0xffffffffu);  // sfh_num_fdes
    w.u32(0xffffffffu);  // sfh_num_fres
    w.u32(0);
    w.u32(0);
    w.u32(0);
    for (int k = 0; k < 64; ++k) w.u8(0);
    std::optional<sframe::Expected<Section>> s;
    const std::uint64_t bytes = allocated_by([&] { s.emplace(Section::parse(w.b)); });
    ASSERT_FALSE(s->has_value()) << "v" << version;
    // The FDE table's extent (num_fdes * FDE size) is checked against the bytes.
    EXPECT_EQ(s->error().code(), FormatErrc::kFdeTablePastEnd) << "v" << version;
    EXPECT_EQ(s->error().offset, 20u);
    EXPECT_EQ(bytes, 0u);
  }
}

TEST(ResourceBounds, HugeHeaderFreCountRejectedBeforeAllocating) {
  // A valid one-FDE section whose header claims 2^32-1 FREs.
  Writer w;
  v2_header(w, 1, 0xffffffffu, 2 * kFre1Size);
  v2_fde(w, 0, 0x10, 0, 2);
  fre1(w, 0);
  fre1(w, 4);
  const auto s = Section::parse(w.b);
  ASSERT_TRUE(s.has_value());
  sframe::Expected<void> strict;
  ValidateStats stats;
  const std::uint64_t bytes = allocated_by([&] { strict = sframe::validate(*s, Strictness::kStrict, stats); });
  ASSERT_FALSE(strict.has_value());
  EXPECT_EQ(strict.error().code(), FormatErrc::kFreCountMismatch);
  EXPECT_EQ(strict.error().offset, 12u);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(stats.fre_decodes, 0u) << "rejected from the header before walking";
  // kLenient does not use sfh_num_fres.
  EXPECT_TRUE(sframe::validate(*s, Strictness::kLenient).has_value());
}

TEST(ResourceBounds, HugeFdeFreCountFailsWithoutAllocatingForTheClaim) {
  // Three FDEs: the last claims 2^32-1 FREs of a 4-FRE sub-section.
  const std::vector<std::byte> b = shared_v2(3, 4, 0, [](std::uint32_t i) { return i < 2 ? 4u : 0xffffffffu; });
  const auto s = Section::parse(b);
  ASSERT_TRUE(s.has_value());
  for (const Strictness mode : {Strictness::kLenient, Strictness::kStrict}) {
    sframe::Expected<void> r;
    ValidateStats stats;
    const std::uint64_t bytes = allocated_by([&] { r = sframe::validate(*s, mode, stats); });
    ASSERT_FALSE(r.has_value());
    if (mode == Strictness::kLenient) {
      // FRE 4 of FDE 2 would start at the end of the FRE sub-section.
      EXPECT_EQ(r.error().code(), FormatErrc::kFreTruncated);
      EXPECT_EQ(r.error().fde, 2u);
      EXPECT_EQ(r.error().fre, 4u);
      EXPECT_EQ(r.error(), *naive_first_error(*s));
    } else {
      // FDE 1 shares FDE 0's whole block, which kStrict accepts; FDE 2
      // points at it with another FRE count, which it rejects.
      EXPECT_EQ(r.error().code(), FormatErrc::kFdeFresOverlap);
      EXPECT_EQ(r.error().fde, 2u);
    }
    EXPECT_LE(bytes, 16 * b.size()) << "allocation must follow the size, not the claimed count";
    EXPECT_LE(stats.fre_decodes, 16 * b.size());
  }
}

// The crafted worst cases of the plain walk: N FDEs each walking the same M
// FREs (N*M work), or walking overlapping tails of them (N*M/2 work).
struct SharedCase {
  const char* name;
  std::uint32_t step;  // FDE i starts at FRE i*step
  bool tails;          // FDE i claims the FREs from its start to the end
};

class SharedFres : public ::testing::TestWithParam<SharedCase> {};

TEST_P(SharedFres, LenientWorkIsLinearInSectionSize) {
  const SharedCase c = GetParam();
  for (const std::uint32_t n : {64u, 512u, 4096u, 16384u}) {
    const std::uint32_t m = n;
    const std::vector<std::byte> b = shared_v2(n, m, c.step, [&](std::uint32_t i) {
      return c.tails ? m - (i * c.step % m) : m;
    });
    const auto s = Section::parse(b);
    ASSERT_TRUE(s.has_value());
    ValidateStats lenient_stats;
    const auto lenient = sframe::validate(*s, Strictness::kLenient, lenient_stats);
    EXPECT_TRUE(lenient.has_value()) << c.name << " n=" << n;
    // Every FDE walks its FREs; the plain walk would take this many decodes.
    std::uint64_t naive = 0;
    for (std::uint32_t i = 0; i < n; ++i) naive += s->fde(i)->num_fres;
    EXPECT_LE(lenient_stats.fre_decodes, 4 * b.size()) << c.name << " n=" << n << " naive " << naive;
    EXPECT_EQ(lenient_stats.fde_decodes, n);

    ValidateStats strict_stats;
    const auto strict = sframe::validate(*s, Strictness::kStrict, strict_stats);
    // Up to 256 FREs their 1-byte start addresses increase. Then every FDE
    // sharing the whole run is valid (section.hpp: whole shared blocks);
    // FDEs starting inside another's run are not.
    if (m <= 256 && c.step == 0) {
      EXPECT_TRUE(strict.has_value()) << c.name << " n=" << n;
    } else {
      ASSERT_FALSE(strict.has_value());
      if (m <= 256) {
        EXPECT_EQ(strict.error().code(), FormatErrc::kFdeFresOverlap) << c.name << " n=" << n;
      }
    }
    EXPECT_LE(strict_stats.fre_decodes, 2 * b.size()) << c.name << " n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SharedFres,
                         ::testing::Values(SharedCase{"AllSameRun", 0, false},
                                           SharedCase{"OverlappingTails", 1, true},
                                           SharedCase{"InterleavedTails", 7, true}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The memoizing walk must report exactly the error of the plain walk: one
// bad FRE in a shared run, FDEs reaching it or not.
TEST(ResourceBounds, SharedFresErrorsMatchTheAccessors) {
  constexpr std::uint32_t kFdes = 200, kFres = 100;
  for (const std::uint32_t bad : {0u, 1u, 37u, 99u}) {
    for (const std::uint32_t step : {0u, 1u, 3u}) {
      // Even FDEs claim one FRE, odd ones every FRE to the end of the run.
      std::vector<std::byte> b = shared_v2(kFdes, kFres, step, [&](std::uint32_t i) {
        return i % 2 == 0 ? 1u : kFres - (i * step % kFres);
      });
      // FRE `bad`: data-word size code 3 does not exist.
      const std::size_t fre_at = std::size_t{28} + kFdes * 20 + bad * kFre1Size;
      b[fre_at + 1] = std::byte{0x63};
      const auto s = Section::parse(b);
      ASSERT_TRUE(s.has_value());
      ValidateStats stats;
      const auto r = sframe::validate(*s, Strictness::kLenient, stats);
      const std::optional<sframe::Error> want = naive_first_error(*s);
      ASSERT_EQ(r.has_value(), !want.has_value()) << "bad=" << bad << " step=" << step;
      if (want) {
        EXPECT_EQ(r.error(), *want) << "bad=" << bad << " step=" << step;
        EXPECT_EQ(r.error().code(), FormatErrc::kBadDatawordSize);
      }
      EXPECT_LE(stats.fre_decodes, 4 * b.size());
    }
  }
}

// v3: the FDE attribute lives in the FRE sub-section, and DEFAULT and FLEX
// FDEs are checked apart. Half the FDEs share one DEFAULT/ADDR1 run, half
// one FLEX/ADDR2 run (FLEX rows of two words: CFA = SP + 16).
TEST(ResourceBounds, V3SharedRunsOfBothFdeTypesStayLinear) {
  for (const std::uint32_t n : {100u, 2000u}) {
    const std::uint32_t m = n;
    const std::uint32_t run_a = 5 + 2 * m;          // attribute + M 2-byte FREs
    const std::uint32_t run_b = 5 + (2 + 1 + 2) * m;  // attribute + M FLEX FREs
    Writer w;
    w.u16(0xdee2);
    w.u8(3);
    w.u8(0);
    w.u8(3);
    w.u8(0);
    w.u8(0xf8);
    w.u8(0);
    w.u32(n);
    w.u32(0);
    w.u32(run_a + run_b);
    w.u32(0);
    w.u32(n * 16);
    for (std::uint32_t i = 0; i < n; ++i) {
      w.u64(0x100000ull * i);
      w.u32(0x100000);
      w.u32(i % 2 == 0 ? 0 : run_a);
    }
    w.u16(m);  // DEFAULT, ADDR1
    w.u8(0);
    w.u8(0);
    w.u8(0);
    for (std::uint32_t k = 0; k < m; ++k) {
      w.u8(k);  // start (wraps: kLenient does not check order)
      w.u8(0);  // no data words: RA undefined
    }
    w.u16(m);  // FLEX, ADDR2
    w.u8(1);
    w.u8(1);
    w.u8(0);
    for (std::uint32_t k = 0; k < m; ++k) {
      w.u16(k);
      w.u8(0x05);  // SP base bit, 2 one-byte words
      w.u8((7 << 3) | 1);  // control: register 7 (SP)
      w.u8(16);
    }
    const auto s = Section::parse(w.b);
    ASSERT_TRUE(s.has_value());
    ValidateStats stats;
    const auto r = sframe::validate(*s, Strictness::kLenient, stats);
    EXPECT_TRUE(r.has_value()) << "n=" << n;
    EXPECT_FALSE(naive_first_error(*s).has_value());
    // The plain walk: n * m decodes.
    EXPECT_LE(stats.fre_decodes, 4 * w.b.size()) << "n=" << n;
  }
}

}  // namespace
