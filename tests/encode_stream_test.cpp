// SPDX-License-Identifier: MIT
// The streaming encoder (SectionEncoder) and streaming gen
// (cfi::for_each_generated): the same sections as the whole-model paths,
// checked against the rows of GNU's own sections and the files' DWARF CFI.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "support/rows.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "support/corpus.hpp"

namespace {

using namespace sframe;

struct Gnu {
  std::string name;
  std::vector<std::byte> bytes;
  SectionSpec spec;  // decoded from GNU's section: the truth
};

// Every corpus section GNU as/ld made, decoded.
std::vector<Gnu> gnu_sections() {
  std::vector<Gnu> out;
  for (const auto& c : sframe_test::golden_cases()) {
    auto f = elf::ElfFile::open((c.dir / c.file).string());
    if (!f) continue;
    auto d = f->sframe_section();
    if (!d) continue;
    Gnu g{c.name(), std::vector<std::byte>(d->bytes.begin(), d->bytes.end()), {}};
    auto s = Section::parse(g.bytes, d->address);
    if (!s || s->version() == Version::kV1) continue;  // v1 is read, never written
    auto spec = to_spec(*s);
    if (!spec) continue;
    g.spec = std::move(*spec);
    out.push_back(std::move(g));
  }
  return out;
}

using sframe_test::distinct_rows;

// Functions added in any order: FDEs come out sorted by start PC, each with
// GNU's rows; FREs sit in the order the functions were added.
TEST(SectionEncoder, AnyOrderGivesSortedFdesWithGnuRows) {
  std::mt19937 rng(99);
  int sections = 0;
  for (const auto& g : gnu_sections()) {
    // Relocatable objects may put functions of different sections at one
    // address: which of them is which is then ambiguous.
    std::set<std::uint64_t> starts;
    for (const auto& f : g.spec.functions) starts.insert(f.start_pc);
    if (starts.size() != g.spec.functions.size()) continue;
    std::vector<std::size_t> order(g.spec.functions.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    SectionEncoder enc(g.spec);
    for (std::size_t i : order) ASSERT_TRUE(enc.add(g.spec.functions[i])) << g.name;
    EXPECT_EQ(enc.size(), order.size());
    auto bytes = enc.finish();
    ASSERT_TRUE(bytes) << g.name;
    EXPECT_EQ(enc.size(), 0u);
    auto s = Section::parse(*bytes, g.spec.section_address);
    ASSERT_TRUE(s) << g.name;
    ASSERT_TRUE(validate(*s, Strictness::kStrict)) << g.name;
    auto back = to_spec(*s);
    ASSERT_TRUE(back);
    auto want = g.spec.functions;
    std::stable_sort(want.begin(), want.end(), [](auto& a, auto& b) { return a.start_pc < b.start_pc; });
    ASSERT_EQ(back->functions.size(), want.size()) << g.name;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(back->functions[i].start_pc, want[i].start_pc) << g.name;
      EXPECT_EQ(back->functions[i].size, want[i].size) << g.name;
      EXPECT_EQ(back->functions[i].pc_type, want[i].pc_type) << g.name;
      EXPECT_EQ(back->functions[i].rows, distinct_rows(want[i].rows)) << g.name << " function " << i;
    }
    // FRE offsets increase in the order the functions were added.
    std::vector<std::uint32_t> fre_offsets;
    for (std::size_t i : order) {
      const auto pc = g.spec.functions[i].start_pc;
      const auto it = std::find_if(back->functions.begin(), back->functions.end(), [&](const FunctionSpec& f) {
        return f.start_pc == pc && f.size == g.spec.functions[i].size;
      });
      ASSERT_NE(it, back->functions.end());
      fre_offsets.push_back(it->fre_offset);
    }
    EXPECT_TRUE(std::is_sorted(fre_offsets.begin(), fre_offsets.end())) << g.name;
    ++sections;
  }
  EXPECT_GE(sections, 30);
}

// Added by start PC, the stream gives encode()'s bytes; kPreserve through
// encode() still gives GNU's bytes (encode_test.cpp), and here too.
TEST(SectionEncoder, SortedStreamIsEncodeAndPreserveIsGnu) {
  for (const auto& g : gnu_sections()) {
    auto want = encode(g.spec);
    ASSERT_TRUE(want) << g.name;
    auto sorted = g.spec.functions;
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.start_pc < b.start_pc; });
    SectionEncoder enc(g.spec);
    for (const auto& f : sorted) ASSERT_TRUE(enc.add(f));
    auto got = enc.finish();
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, *want) << g.name;

    if (g.spec.version != Version::kV3) continue;
    auto s = Section::parse(g.bytes, g.spec.section_address);
    ASSERT_TRUE(s);
    SectionEncoder keep(g.spec, Layout::kPreserve);
    for (const auto& f : g.spec.functions) ASSERT_TRUE(keep.add(f));
    auto same = keep.finish();
    ASSERT_TRUE(same);
    ASSERT_LE(same->size(), g.bytes.size());
    EXPECT_TRUE(std::equal(same->begin(), same->end(), g.bytes.begin())) << g.name;
    EXPECT_EQ(same->size(), s->used_size()) << g.name;
  }
}

// A function refused is not added; its error names it by position.
TEST(SectionEncoder, RefusedFunctionIsNotAdded) {
  SectionSpec h;
  h.version = Version::kV2;
  h.abi = Abi::kAmd64Little;
  h.cfa_fixed_ra_offset = -8;
  FunctionSpec ok;
  ok.start_pc = 0x1000;
  ok.size = 16;
  RowSpec r;
  r.row.cfa = {Rule::Kind::kExpr, Rule::Base::kRegister, false, 7, 8};
  r.row.ra = {Rule::Kind::kExpr, Rule::Base::kCfa, true, 0, -8};
  ok.rows = {r};
  FunctionSpec flex = ok;
  flex.start_pc = 0x2000;
  flex.fde_type = FdeType::kFlex;  // v3 only
  SectionEncoder enc(h);
  ASSERT_TRUE(enc.add(ok));
  auto e = enc.add(flex);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), EncodeErrc::kNotRepresentable);
  EXPECT_EQ(e.error().fde, 1u);
  EXPECT_EQ(enc.size(), 1u);
  auto bytes = enc.finish();
  ASSERT_TRUE(bytes);
  auto s = Section::parse(*bytes, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->num_fdes(), 1u);
  // A version the encoder does not write.
  h.version = Version::kV1;
  SectionEncoder v1(h);
  auto bad = v1.add(ok);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), FormatErrc::kBadVersion);
}

// Streaming gen: functions by increasing start PC (PLT FDEs among them),
// and the same section generate() + encode() give.
TEST(ForEachGenerated, SortedAndSameAsGenerate) {
  std::vector<std::string> files;
  for (const auto& c : sframe_test::golden_cases())
    if (c.dir.filename().string() == "x86_64-v3-linked") files.push_back((c.dir / c.file).string());
  files.push_back("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
  int plts = 0;
  for (const auto& path : files) {
    auto file = elf::ElfFile::open(path);
    if (!file) continue;  // the system file may be missing
    for (Version v : {Version::kV3, Version::kV2}) {
      auto header = cfi::section_header(*file, v, 0x1000);
      ASSERT_TRUE(header);
      SectionEncoder enc(*header);
      std::uint64_t last = 0;
      bool sorted = true;
      auto g = cfi::for_each_generated(*file, v, 0x1000, [&](const FunctionSpec& f) {
        sorted &= f.start_pc >= last;
        last = f.start_pc;
        EXPECT_TRUE(enc.add(f));
      });
      ASSERT_TRUE(g) << path;
      EXPECT_TRUE(g->spec.functions.empty());
      EXPECT_TRUE(sorted) << path;
      plts += static_cast<int>(g->plt_functions);
      auto streamed = enc.finish();
      ASSERT_TRUE(streamed);
      auto whole = cfi::generate(*file, v, 0x1000);
      ASSERT_TRUE(whole);
      EXPECT_EQ(whole->functions_in, g->functions_in);
      EXPECT_EQ(whole->skipped.size(), g->skipped.size());
      auto bytes = encode(whole->spec);
      ASSERT_TRUE(bytes);
      EXPECT_EQ(*streamed, *bytes) << path;
    }
  }
  EXPECT_GT(plts, 0);
}

}  // namespace

namespace {

// Streaming gen as `sframe gen` runs it: cfi::for_each_translated() into
// SectionEncoder's accessor add(), the reader's rows in place and tagged
// with its translation numbers, against for_each_generated()'s FunctionSpecs
// into add(FunctionSpec): the same bytes, for v3 and v2, with and without
// the size techniques (which copy the rows), on files with FLEX functions
// (libc: a tag's row is encoded per FDE type) and PLTs.
TEST(SectionEncoder, AccessorAddOfTaggedRowsIsAddOfSpecs) {
  std::vector<std::string> files;
  for (const auto& c : sframe_test::golden_cases())
    if (c.dir.filename().string() == "x86_64-v3-linked") files.push_back((c.dir / c.file).string());
  files.push_back("/usr/lib/x86_64-linux-gnu/libc.so.6");
  files.push_back("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
  int compared = 0;
  for (const auto& path : files) {
    auto file = elf::ElfFile::open(path);
    if (!file) continue;  // the system file may be missing
    for (Version v : {Version::kV3, Version::kV2})
      for (const SizeOptions size : {SizeOptions{}, SizeOptions::all()}) {
        auto header = cfi::section_header(*file, v, 0x1000);
        ASSERT_TRUE(header);
        SectionEncoder specs(*header, Layout::kOptimize, size), in_place(*header, Layout::kOptimize, size);
        auto g = cfi::for_each_generated(*file, v, 0x1000,
                                         [&](const FunctionSpec& f) { EXPECT_TRUE(specs.add(f)) << path; });
        ASSERT_TRUE(g) << path;
        std::size_t tagged = 0;
        auto t = cfi::for_each_translated(*file, v, 0x1000, [&](const FunctionSpec& f, const cfi::Function* fn) {
          if (!fn) {
            EXPECT_TRUE(in_place.add(f)) << path;
            return;
          }
          const auto start_of = [&](std::size_t k) { return static_cast<std::uint32_t>(fn->rows[k].start - fn->start); };
          const auto row_of = [&](std::size_t k) -> const FrameRow& { return fn->rows[k].row; };
          const auto tag_of = [&](std::size_t k) { return fn->rows[k].translation; };
          EXPECT_TRUE(in_place.add(f, fn->rows.size(), start_of, row_of, tag_of)) << path;
          for (const cfi::Row& r : fn->rows) tagged += r.translation != 0;
        });
        ASSERT_TRUE(t) << path;
        EXPECT_GT(tagged, 0u) << path;
        EXPECT_EQ(g->functions_in, t->functions_in) << path;
        auto a = specs.finish(), b = in_place.finish();
        ASSERT_TRUE(a && b) << path;
        EXPECT_EQ(*a, *b) << path << " v" << static_cast<int>(v) << (size == SizeOptions{} ? "" : " optimized");
        EXPECT_EQ(specs.finished_fdes(), in_place.finished_fdes()) << path;
        ++compared;
      }
  }
  EXPECT_GE(compared, 8);
}

// The accessor add() checks as add(FunctionSpec) does, with the same
// errors: a row out of order names its index, a rule SFrame cannot say its
// row; a refused function leaves nothing behind, also for a tagged row
// seen before (its FRE is reused only where it was encoded).
TEST(SectionEncoder, AccessorAddRefusesAsAddOfSpec) {
  SectionSpec h;
  h.version = Version::kV3;
  h.abi = Abi::kAmd64Little;
  h.cfa_fixed_ra_offset = -8;
  RowSpec sp8, sp16, bad;
  sp8.row.cfa = {Rule::Kind::kExpr, Rule::Base::kRegister, false, 7, 8};
  sp8.row.ra = {Rule::Kind::kExpr, Rule::Base::kCfa, true, 0, -8};
  sp16 = sp8;
  sp16.start_offset = 1;
  sp16.row.cfa.offset = 16;
  bad = sp16;
  bad.start_offset = 4;
  bad.row.cfa.regnum = 3;  // CFA from a register other than SP and FP: not in a default FDE
  FunctionSpec f;
  f.start_pc = 0x1000;
  f.size = 16;
  const auto add_both = [&](const std::vector<RowSpec>& rows, const std::vector<std::uint32_t>& tags) {
    f.rows = rows;
    SectionEncoder a(h), b(h);
    auto x = a.add(f);
    auto y = b.add(
        f, rows.size(), [&](std::size_t k) { return rows[k].start_offset; },
        [&](std::size_t k) -> const FrameRow& { return rows[k].row; }, [&](std::size_t k) { return tags[k]; });
    EXPECT_EQ(static_cast<bool>(x), static_cast<bool>(y));
    if (!x && !y) {
      EXPECT_EQ(x.error().code(), y.error().code());
      EXPECT_EQ(x.error().fde, y.error().fde);
      EXPECT_EQ(x.error().fre, y.error().fre);
      EXPECT_EQ(x.error().value, y.error().value);
    }
    return y;
  };
  EXPECT_TRUE(add_both({sp8, sp16}, {1, 2}));
  RowSpec late = sp8;
  late.start_offset = 1;  // not after row 1's start
  auto order = add_both({sp8, sp16, late}, {1, 2, 1});
  ASSERT_FALSE(order);
  EXPECT_EQ(order.error().fre, 2u);
  auto rule = add_both({sp8, bad}, {1, 3});
  ASSERT_FALSE(rule);
  EXPECT_EQ(rule.error().fre, 1u);
  // In one encoder: a tagged row refused in a function added nothing, and
  // the tag's FRE, encoded in the function before, comes out as that one's.
  SectionEncoder enc(h);
  const std::vector<RowSpec> rows = {sp8, sp16};
  const auto start_of = [&](std::size_t k) { return rows[k].start_offset; };
  const auto row_of = [&](std::size_t k) -> const FrameRow& { return rows[k].row; };
  ASSERT_TRUE(enc.add(f, 2, start_of, row_of, [](std::size_t k) { return static_cast<std::uint32_t>(k + 1); }));
  f.start_pc = 0x2000;
  const std::vector<RowSpec> refused = {sp8, bad};
  EXPECT_FALSE(enc.add(
      f, 2, [&](std::size_t k) { return refused[k].start_offset; },
      [&](std::size_t k) -> const FrameRow& { return refused[k].row; },
      [](std::size_t k) { return static_cast<std::uint32_t>(k == 0 ? 1 : 3); }));
  ASSERT_TRUE(enc.add(f, 2, start_of, row_of, [](std::size_t k) { return static_cast<std::uint32_t>(k + 1); }));
  auto bytes = enc.finish();
  ASSERT_TRUE(bytes);
  SectionSpec whole = h;
  f.rows = rows;
  f.start_pc = 0x1000;
  whole.functions.push_back(f);
  f.start_pc = 0x2000;
  whole.functions.push_back(f);
  auto want = encode(whole);
  ASSERT_TRUE(want);
  EXPECT_EQ(*bytes, *want);
}

}  // namespace
