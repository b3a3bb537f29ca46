// SPDX-License-Identifier: MIT
// The streaming encoder (SectionEncoder) and streaming gen
// (cfi::for_each_generated): the same sections as the whole-model paths,
// checked against the rows of GNU's own sections and the files' DWARF CFI.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "support/rows.hpp"
#include "sframe/cfi.hpp"
#include "sframe/elf.hpp"
#include "sframe/encode.hpp"
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
