// SPDX-License-Identifier: MIT
// find(pc) against two independent truths: the rows GNU objdump printed for
// the corpus files, and GNU libsframe's sframe_find_fre (binutils 2.40, via
// dlopen) on v1 sections.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <random>
#include <regex>
#include <sstream>

#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "support/corpus.hpp"
#include "support/gnu_libsframe.hpp"

namespace {

struct GoldenFde {
  std::uint64_t pc = 0;
  std::uint64_t size = 0;
  bool mask = false;
  std::vector<std::uint64_t> rows;  // FRE start PCs as printed
};

// Parses objdump's "func idx" blocks.
std::vector<GoldenFde> parse_golden(const std::string& text) {
  std::vector<GoldenFde> out;
  std::istringstream in(text);
  std::string line;
  const std::regex func(R"(^    func idx \[\d+\]: pc = 0x([0-9a-f]+), size = (\d+) bytes)");
  const std::regex row(R"(^    ([0-9a-f]{16})  )");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, func)) {
      out.push_back({std::stoull(m[1], nullptr, 16), std::stoull(m[2]), false, {}});
    } else if (!out.empty() && line.rfind("    STARTPC[m]", 0) == 0) {
      out.back().mask = true;
    } else if (!out.empty() && std::regex_search(line, m, row)) {
      out.back().rows.push_back(std::stoull(m[1], nullptr, 16));
    }
  }
  return out;
}

struct Loaded {
  sframe::elf::ElfFile file;
  sframe::elf::SFrameSectionData data;
};

Loaded open_section(const std::filesystem::path& p) {
  auto f = sframe::elf::ElfFile::open(p.string());
  EXPECT_TRUE(f) << p;
  auto d = f->sframe_section();
  EXPECT_TRUE(d) << p;
  return {std::move(*f), std::move(*d)};
}

// Linked files: FDEs are sorted and their PCs unique, so every printed row
// start (and the byte before the next row) must map back to that row.
TEST(Lookup, EveryGoldenRowOfLinkedFiles) {
  std::size_t checked = 0;
  for (const auto& c : sframe_test::golden_cases()) {
    const std::string dir = c.dir.filename().string();
    if (dir.find("linked") == std::string::npos) continue;
    Loaded l = open_section(c.dir / c.file);
    auto s = sframe::Section::parse(l.data.bytes, l.data.address);
    ASSERT_TRUE(s);
    auto ix = sframe::FdeIndex::build(*s);
    ASSERT_TRUE(ix);
    auto rx = sframe::RowIndex::build(*s);
    ASSERT_TRUE(rx);
    for (const GoldenFde& g : parse_golden(sframe_test::read_file(c.golden))) {
      for (std::size_t r = 0; r < g.rows.size(); ++r) {
        // PC-mask rows print offsets within the 16-byte PLT entry; probe the
        // second entry of the block to exercise the modulo.
        const std::uint64_t first = g.mask ? g.pc + 16 + g.rows[r] : g.rows[r];
        const std::uint64_t next = r + 1 < g.rows.size() ? (g.mask ? g.pc + 16 + g.rows[r + 1] : g.rows[r + 1])
                                                         : (g.mask ? g.pc + 32 : g.pc + g.size);
        if (first >= g.pc + g.size) continue;
        for (std::uint64_t pc : {first, next - 1}) {
          auto m = sframe::find(*s, pc);
          ASSERT_TRUE(m) << c.name() << " pc " << std::hex << pc;
          EXPECT_EQ(m->fde.start_pc, g.pc) << c.name() << " pc " << std::hex << pc;
          const std::uint64_t row_start = g.mask ? g.rows[r] : g.rows[r] - g.pc;
          EXPECT_EQ(m->fre.start_offset, row_start) << c.name() << " pc " << std::hex << pc;
          auto mi = ix->find(pc);
          ASSERT_TRUE(mi);
          EXPECT_EQ(mi->fre, m->fre);
          EXPECT_EQ(mi->row, m->row);
          auto mr = rx->find(pc);
          ASSERT_TRUE(mr) << c.name() << " pc " << std::hex << pc;
          EXPECT_EQ(mr->fde_index, m->fde.index);
          EXPECT_EQ(mr->fre_index, m->fre.index);
          EXPECT_EQ(mr->row, m->row);
          ++checked;
        }
      }
      // One past the function: not this FDE any more.
      auto after = sframe::find(*s, g.pc + g.size);
      auto after_rx = rx->find(g.pc + g.size);
      EXPECT_EQ(after.has_value(), after_rx.has_value());
      if (after) {
        EXPECT_NE(after->fde.start_pc, g.pc);
        if (after_rx) {
          EXPECT_EQ(after_rx->fde_index, after->fde.index);
        }
      }
    }
  }
  EXPECT_GT(checked, 300u);
}

// The in-process backtrace keeps a RowIndex without an FdeIndex beside it
// (cfi::UnwindSection::assign with fde_index_with_rows false): its
// coverage, rows and FRE starts must still be those objdump printed, and
// the same as with the FdeIndex kept.
TEST(Lookup, UnwindSectionWithoutFdeIndexAnswersAsObjdump) {
  std::size_t checked = 0, sections = 0;
  for (const auto& c : sframe_test::golden_cases()) {
    const std::string dir = c.dir.filename().string();
    if (dir.find("linked") == std::string::npos) continue;
    Loaded l = open_section(c.dir / c.file);
    const std::vector<std::byte> bytes(l.data.bytes.begin(), l.data.bytes.end());
    sframe::cfi::UnwindSection lean, full;
    ASSERT_TRUE(lean.assign(bytes, l.data.address, false)) << c.name();
    ASSERT_TRUE(full.assign(bytes, l.data.address, true)) << c.name();
    ASSERT_TRUE(lean.usable() && full.usable()) << c.name();
    ASSERT_TRUE(full.index.has_value());
    // No FdeIndex exactly where a RowIndex answers.
    EXPECT_EQ(lean.index.has_value(), !lean.rows.has_value()) << c.name();
    EXPECT_EQ(lean.rows.has_value(), full.rows.has_value()) << c.name();
    if (lean.rows) ++sections;
    const std::vector<GoldenFde> golden = parse_golden(sframe_test::read_file(c.golden));
    const auto in_golden = [&](std::uint64_t pc) {
      for (const GoldenFde& g : golden)
        if (pc >= g.pc && pc - g.pc < g.size) return true;
      return false;
    };
    for (const GoldenFde& g : golden) {
      if (g.size == 0) continue;
      for (std::uint64_t pc : {g.pc, g.pc + g.size - 1, g.pc + g.size, g.pc - 1}) {
        EXPECT_EQ(lean.covers(pc), in_golden(pc)) << c.name() << " pc " << std::hex << pc;
        EXPECT_EQ(full.covers(pc), in_golden(pc)) << c.name() << " pc " << std::hex << pc;
        ++checked;
      }
      if (g.mask || !lean.rows) continue;
      // Each printed row start maps to an FRE starting there.
      for (std::uint64_t start : g.rows) {
        if (start >= g.pc + g.size) continue;
        auto r = lean.rows->find(start);
        ASSERT_TRUE(r) << c.name() << " pc " << std::hex << start;
        auto fde = lean.section->fde(r->fde_index);
        ASSERT_TRUE(fde);
        EXPECT_EQ(fde->start_pc, g.pc) << c.name() << " pc " << std::hex << start;
        std::optional<sframe::Fre> fre;
        for (const auto& x : lean.section->fres(*fde))
          if (x && x->index == r->fre_index) fre = *x;
        ASSERT_TRUE(fre);
        EXPECT_EQ(fre->start_offset, start - g.pc) << c.name() << " pc " << std::hex << start;
      }
    }
  }
  EXPECT_GT(sections, 3u);
  EXPECT_GT(checked, 300u);
}

using sframe_test::GnuFre;
using LibSframe = sframe_test::GnuLibsframe;

TEST(Lookup, AgreesWithGnuLibsframeOnV1) {
  LibSframe gnu;
  ASSERT_TRUE(gnu.decode && gnu.find_fre) << "libsframe.so.0 (binutils' libbinutils) not available: the oracle is missing";
  Loaded l = open_section(sframe_test::shared_dir() / "bench" / "many-20k-v1");
  auto s = sframe::Section::parse(l.data.bytes, l.data.address);
  ASSERT_TRUE(s);
  auto ix = sframe::FdeIndex::build(*s);
  ASSERT_TRUE(ix);
  auto rx = sframe::RowIndex::build(*s);
  ASSERT_TRUE(rx);
  std::uint64_t lo = 0, hi = 0;
  for (const auto& sh : l.file.sections())
    if (sh.name == ".text") lo = sh.address, hi = sh.address + sh.size;
  int err = 0;
  void* ctx = gnu.decode(reinterpret_cast<const char*>(l.data.bytes.data()), l.data.bytes.size(), &err);
  ASSERT_NE(ctx, nullptr);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::uint64_t> dist(lo, hi - 1);
  std::size_t found = 0, n = 200000;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t pc = dist(rng);
    GnuFre g{};
    const bool gnu_found = gnu.find_fre(ctx, static_cast<std::int32_t>(pc - l.data.address), &g) == 0;
    auto m = ix->find(pc);
    ASSERT_EQ(m.has_value(), gnu_found) << std::hex << pc;
    if (!gnu_found) continue;
    ++found;
    ASSERT_EQ(m->fre.start_offset, g.start_addr) << std::hex << pc;
    ASSERT_EQ(m->fre.info, g.info) << std::hex << pc;
    for (std::uint32_t k = 0; k < m->fre.dataword_count; ++k) {
      const unsigned char* p = g.offsets + k * m->fre.dataword_size;
      std::uint32_t w = 0;
      for (unsigned b = 0; b < m->fre.dataword_size; ++b) w |= std::uint32_t{p[b]} << (8 * b);
      ASSERT_EQ(s->dataword(m->fre, k), w) << std::hex << pc;
    }
    // RowIndex: the same FRE of the same FDE as libsframe, and its rules.
    auto r = rx->find(pc);
    ASSERT_TRUE(r) << std::hex << pc;
    auto fde = s->fde(r->fde_index);
    ASSERT_TRUE(fde);
    std::optional<sframe::Fre> fre;
    for (const auto& x : s->fres(*fde))
      if (x && x->index == r->fre_index) fre = *x;
    ASSERT_TRUE(fre) << std::hex << pc;
    ASSERT_EQ(fre->start_offset, g.start_addr) << std::hex << pc;
    ASSERT_EQ(fre->info, g.info) << std::hex << pc;
    ASSERT_EQ(r->row, *s->row(*fde, *fre)) << std::hex << pc;
  }
  gnu.free(&ctx);
  EXPECT_GT(found, n / 2);
  std::printf("libsframe agreement: %zu PCs, %zu covered, all identical\n", n, found);
}

}  // namespace

namespace {

// FDE starts spanning the whole 64-bit range must not wrap the index's
// bucket arithmetic (found by the corruption-test work).
TEST(Lookup, IndexHandlesFullAddressSpan) {
  // v2 AMD64, SORTED, not PCREL: start fields are section-relative, so a
  // section at 0x0 with start -1 puts FDE 1 at 0xffffffffffffffff.
  std::vector<std::uint8_t> b = {
      0xe2, 0xde, 2, 0x1,  // magic, version 2, flags SORTED
      3, 0, 0xf8, 0,       // AMD64, fixed FP 0, fixed RA -8, no aux header
      2, 0, 0, 0,          // num_fdes
      2, 0, 0, 0,          // num_fres
      6, 0, 0, 0,          // fre_len: two FREs of 3 bytes
      0, 0, 0, 0,          // fdeoff
      40, 0, 0, 0,         // freoff
      // FDE 0: start 0, size 0x100, FREs at 0, 1 FRE, info ADDR1, rep 0, pad
      0, 0, 0, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
      // FDE 1: start -1, size 0, FREs at 3, 1 FRE
      0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
      // two FREs: start 0, info 0x03 (SP base, 1 data word of 1 byte), word 8
      0, 0x03, 8, 0, 0x03, 8};
  auto s = sframe::Section::parse(std::as_bytes(std::span(b)), 0);
  ASSERT_TRUE(s);
  ASSERT_TRUE(sframe::validate(*s, sframe::Strictness::kStrict)) << sframe::describe(sframe::validate(*s).error().code());
  auto ix = sframe::FdeIndex::build(*s);
  ASSERT_TRUE(ix);
  auto direct = sframe::find(*s, 0x10);
  auto indexed = ix->find(0x10);
  ASSERT_TRUE(direct);
  ASSERT_TRUE(indexed);
  EXPECT_EQ(indexed->fde.index, 0u);
  EXPECT_EQ(direct->fde.index, 0u);
}

}  // namespace

namespace {

// RowIndex::row_id() (the walk's lookup: buckets answering alone, or the
// boundaries) against find() at `pcs`: kNotCovered exactly where find()
// says kPcNotCovered, kUseFind for PC-mask FDEs and PCs before their FDE's
// first FRE, else a row equal to find()'s.
void expect_row_ids_agree(const sframe::Section& s, const sframe::RowIndex& rx, const std::vector<std::uint64_t>& pcs,
                          const std::string& name) {
  for (std::uint64_t pc : pcs) {
    auto want = sframe::find(s, pc);
    const std::uint32_t id = rx.row_id(pc);
    if (!want) {
      if (want.error().code() == sframe::LookupErrc::kPcNotCovered)
        EXPECT_EQ(id, sframe::RowIndex::kNotCovered) << name << " pc " << std::hex << pc;
      else
        EXPECT_EQ(id, sframe::RowIndex::kUseFind) << name << " pc " << std::hex << pc;
      continue;
    }
    if (want->fde.pc_type == sframe::PcType::kMask) {
      EXPECT_EQ(id, sframe::RowIndex::kUseFind) << name << " pc " << std::hex << pc;
      continue;
    }
    ASSERT_LT(id, rx.num_rows()) << name << " pc " << std::hex << pc;
    EXPECT_EQ(rx.row_at(id), want->row) << name << " pc " << std::hex << pc;
  }
}

// RowIndex answers exactly what find() answers, on every corpus section (v1,
// v2, v3, both byte orders, every ABI, unsorted objects, PC-mask PLT FDEs):
// at every FRE start, the byte before the next one, function ends, the gaps
// between functions and random PCs around them.
TEST(Lookup, RowIndexAgreesWithFindOnEveryCorpusSection) {
  std::size_t sections = 0, probes = 0;
  std::mt19937_64 rng(11);
  for (const auto& c : sframe_test::golden_cases()) {
    Loaded l = open_section(c.dir / c.file);
    auto s = sframe::Section::parse(l.data.bytes, l.data.address);
    ASSERT_TRUE(s);
    auto rx = sframe::RowIndex::build(*s);
    if (!rx) {
      // Objects may hold overlapping FDEs before relocation (v1: all at 0).
      EXPECT_EQ(rx.error().code(), sframe::FormatErrc::kFdesOverlap) << c.name();
      continue;
    }
    ++sections;
    std::vector<std::uint64_t> pcs;
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (std::uint32_t i = 0; i < s->num_fdes(); ++i) {
      auto f = s->fde(i);
      ASSERT_TRUE(f);
      lo = std::min(lo, f->start_pc);
      hi = std::max(hi, f->start_pc + f->size);
      pcs.insert(pcs.end(), {f->start_pc - 1, f->start_pc, f->start_pc + f->size - 1, f->start_pc + f->size});
      for (const auto& fre : s->fres(*f)) {
        ASSERT_TRUE(fre);
        pcs.insert(pcs.end(), {f->start_pc + fre->start_offset - 1, f->start_pc + fre->start_offset,
                               f->start_pc + fre->start_offset + 1});
      }
    }
    if (lo < hi) {
      std::uniform_int_distribution<std::uint64_t> dist(lo - 64, hi + 64);
      for (int k = 0; k < 2000; ++k) pcs.push_back(dist(rng));
    }
    for (std::uint64_t pc : pcs) {
      auto want = sframe::find(*s, pc);
      auto got = rx->find(pc);
      ASSERT_EQ(got.has_value(), want.has_value()) << c.name() << " pc " << std::hex << pc;
      ++probes;
      if (!want) {
        EXPECT_EQ(got.error().code(), want.error().code()) << c.name() << " pc " << std::hex << pc;
        continue;
      }
      EXPECT_EQ(got->fde_index, want->fde.index) << c.name() << " pc " << std::hex << pc;
      EXPECT_EQ(got->fre_index, want->fre.index) << c.name() << " pc " << std::hex << pc;
      EXPECT_EQ(got->row, want->row) << c.name() << " pc " << std::hex << pc;
      EXPECT_EQ(got->signal, want->fde.signal) << c.name() << " pc " << std::hex << pc;
    }
    expect_row_ids_agree(*s, *rx, pcs, c.name());
  }
  EXPECT_GE(sections, 30u);
  std::printf("RowIndex vs find: %zu sections, %zu PCs, all identical\n", sections, probes);
}

}  // namespace

namespace {

// `functions` functions of `size` bytes from 0x400000, each with two rows
// no other function has (CFA = SP + 16 + 16 i, then + 8): 2 x `functions`
// distinct rows, the RA at CFA - 8.
sframe::SectionSpec distinct_rows_spec(std::uint32_t functions, std::uint32_t size) {
  sframe::SectionSpec spec;
  spec.cfa_fixed_ra_offset = -8;
  spec.section_address = 0x100000;
  const auto make_row = [](std::int32_t cfa_offset) {
    sframe::FrameRow r;
    r.cfa = {sframe::Rule::Kind::kExpr, sframe::Rule::Base::kRegister, false, 7, cfa_offset};
    r.ra = {sframe::Rule::Kind::kExpr, sframe::Rule::Base::kCfa, true, 0, -8};
    return r;
  };
  for (std::uint32_t i = 0; i < functions; ++i) {
    sframe::FunctionSpec f;
    f.start_pc = 0x400000 + std::uint64_t{i} * size;
    f.size = size;
    f.rows = {{0, make_row(static_cast<std::int32_t>(16 + 16 * i))}, {5, make_row(static_cast<std::int32_t>(24 + 16 * i))}};
    spec.functions.push_back(f);
  }
  return spec;
}

}  // namespace

namespace {

// A bucket answers a lookup alone only with 16-bit row ids: a section with
// more distinct rows (2 x 20,000 here, each function's two rows new) must
// still answer every PC as find() does, through buckets that name rows
// below 2^15 and buckets that point into the boundaries.
TEST(Lookup, RowIndexBeyondSixteenBitRowIds) {
  constexpr std::uint32_t kFunctions = 20000, kSize = 16;
  const sframe::SectionSpec spec = distinct_rows_spec(kFunctions, kSize);
  auto bytes = sframe::encode(spec);
  ASSERT_TRUE(bytes) << sframe::describe(bytes.error().code());
  auto s = sframe::Section::parse(*bytes, spec.section_address);
  ASSERT_TRUE(s);
  ASSERT_TRUE(sframe::validate(*s, sframe::Strictness::kStrict));
  auto rx = sframe::RowIndex::build(*s);
  ASSERT_TRUE(rx);
  ASSERT_EQ(rx->num_rows(), 2u * kFunctions);
  std::vector<std::uint64_t> pcs;
  for (std::uint64_t pc = 0x400000 - 8; pc < 0x400000 + std::uint64_t{kFunctions} * kSize + 8; ++pc) pcs.push_back(pc);
  expect_row_ids_agree(*s, *rx, pcs, "40,000 rows");
  for (std::uint64_t pc : pcs) {
    auto want = sframe::find(*s, pc);
    auto got = rx->find(pc);
    auto row = rx->find_row(pc);
    ASSERT_EQ(got.has_value(), want.has_value()) << std::hex << pc;
    ASSERT_EQ(row.has_value(), want.has_value()) << std::hex << pc;
    if (!want) continue;
    EXPECT_EQ(got->fde_index, want->fde.index) << std::hex << pc;
    EXPECT_EQ(got->fre_index, want->fre.index) << std::hex << pc;
    EXPECT_EQ(got->row, want->row) << std::hex << pc;
    EXPECT_EQ(rx->row_at(*row), want->row) << std::hex << pc;
  }
}

}  // namespace

namespace {

// A bucket word holds its first boundary's row only where the row fits the
// bits the boundary index leaves (RowIndex::bucket_): with 2 x 65,536
// distinct rows the index needs 18 bits, which leaves 14 for rows, so rows
// from 16,383 on are read from the boundaries. Every PC at a row's first
// and last byte and around each function must answer as find() on the
// section (the decoder, not the index) does, through both kinds of bucket.
TEST(Lookup, RowIndexRowsBeyondTheBucketWordsRowBits) {
  constexpr std::uint32_t kFunctions = 65536, kSize = 16;
  const sframe::SectionSpec spec = distinct_rows_spec(kFunctions, kSize);
  auto bytes = sframe::encode(spec);
  ASSERT_TRUE(bytes) << sframe::describe(bytes.error().code());
  auto s = sframe::Section::parse(*bytes, spec.section_address);
  ASSERT_TRUE(s);
  auto rx = sframe::RowIndex::build(*s);
  ASSERT_TRUE(rx);
  ASSERT_EQ(rx->num_rows(), 2u * kFunctions);
  std::vector<std::uint64_t> pcs;
  for (std::uint32_t i = 0; i < kFunctions; ++i) {
    const std::uint64_t start = 0x400000 + std::uint64_t{i} * kSize;
    for (const std::uint64_t at : {start - 1, start, start + 4, start + 5, start + kSize - 1}) pcs.push_back(at);
  }
  pcs.push_back(0x400000 + std::uint64_t{kFunctions} * kSize);
  expect_row_ids_agree(*s, *rx, pcs, "131,072 rows");
}

}  // namespace
