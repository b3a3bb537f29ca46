// SPDX-License-Identifier: MIT
// The resolved rows (Section::row) and the raw view (Section::wire_row) of
// every FRE of every corpus file against GNU objdump's golden dump of it:
// objdump prints each FRE as stored ("f": the header's fixed offset, "U": a
// padding word, "u": nothing stored, "c-16": a CFA slot word, "(fp-40)",
// "r17+0": FLEX pairs), so its text says both what the FRE stores and, with
// the spec's rules for fixed offsets and padding words, what the row means.
// The expected values come from objdump's text, the golden header lines and
// the spec, never from our decoder.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "sframe/elf/elf.hpp"
#include "sframe/format/section.hpp"
#include "support/corpus.hpp"
#include "support/golden_rows.hpp"

namespace {

using namespace sframe;
using sframe_test::GoldenCase;
using sframe_test::GoldenLoc;
using Kind = GoldenLoc::Kind;
using Slot = WireRow::Slot;

// One FRE line of objdump's dump: its start and its three columns, or
// "RA undefined" (an FRE without data words).
struct GoldenFre {
  std::uint64_t start = 0;
  bool outermost = false;
  GoldenLoc cfa, fp, ra;
};

struct GoldenDump {
  int version = 0;
  int fixed_ra = 0;  // "CFA fixed RA offset: N", 0 when not printed
  int fixed_fp = 0;
  std::vector<std::vector<GoldenFre>> funcs;
};

GoldenDump parse(const std::string& text) {
  GoldenDump d;
  std::istringstream in(text);
  std::string line;
  static const std::regex version(R"(^    Version: SFRAME_VERSION_(\d))");
  static const std::regex fixed(R"(^    CFA fixed (RA|FP) offset: (-?\d+))");
  static const std::regex func(R"(^    func idx \[\d+\])");
  static const std::regex undefined(R"(^    ([0-9a-f]{16})  RA undefined)");
  static const std::regex row(R"(^    ([0-9a-f]{16})  +(\S+) +(\S+) +(\S+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, version)) {
      d.version = std::stoi(m[1]);
    } else if (std::regex_search(line, m, fixed)) {
      (m[1] == "RA" ? d.fixed_ra : d.fixed_fp) = std::stoi(m[2]);
    } else if (std::regex_search(line, m, func)) {
      d.funcs.emplace_back();
    } else if (!d.funcs.empty() && std::regex_search(line, m, undefined)) {
      GoldenFre f;
      f.start = std::stoull(m[1], nullptr, 16);
      f.outermost = true;
      d.funcs.back().push_back(f);
    } else if (!d.funcs.empty() && std::regex_search(line, m, row)) {
      GoldenFre f;
      f.start = std::stoull(m[1], nullptr, 16);
      f.cfa = sframe_test::parse_golden_loc(m[2]);
      f.fp = sframe_test::parse_golden_loc(m[3]);
      f.ra = sframe_test::parse_golden_loc(m[4]);
      d.funcs.back().push_back(f);
    }
  }
  return d;
}

// A rule as objdump's column names it: "sp+16", "(fp-40)", "r10+0", "c-16".
Rule rule_of(const GoldenLoc& l, Abi abi) {
  const AbiRegs regs = abi_regs(abi);
  const auto off = static_cast<std::int32_t>(l.offset);
  if (l.kind == Kind::kCfaSlot) return make_rule(Rule::Base::kCfa, 0, off, true);
  const auto reg = static_cast<std::uint16_t>(l.reg == sframe_test::kGoldenSp   ? regs.sp
                                              : l.reg == sframe_test::kGoldenFp ? regs.fp
                                                                                : l.reg);
  return make_rule(Rule::Base::kRegister, reg, off, l.kind == Kind::kRegDeref);
}

// What a value the FRE stores no word for (or a padding word) means: the
// header's fixed CFA offset when it has one, else unchanged (spec §2.2
// sfh_cfa_fixed_*_offset; errata 1 SFRAME_FRE_RA_OFFSET_INVALID; v3 §3.2).
Rule implicit(int fixed) {
  if (fixed != 0) return make_rule(Rule::Base::kCfa, 0, fixed, true);
  return Rule{Rule::Kind::kUnchanged};
}

Rule normalized(Rule r) { return r.kind == Rule::Kind::kExpr ? r : Rule{r.kind}; }

class RowModel : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(RowModel, ResolvedRowsAndRawViewMatchObjdump) {
  const GoldenCase& c = GetParam();
  const GoldenDump g = parse(sframe_test::read_file(c.golden));
  ASSERT_NE(g.version, 0) << c.golden;
  auto file = elf::ElfFile::open((c.dir / c.file).string());
  ASSERT_TRUE(file);
  auto data = file->sframe_section();
  ASSERT_TRUE(data);
  auto s = Section::parse(data->bytes, data->address);
  ASSERT_TRUE(s);
  ASSERT_EQ(g.funcs.size(), s->num_fdes());
  const Abi abi = s->abi();
  // objdump prints no fixed-offset lines for v1; the AMD64 RA is at CFA - 8
  // (the call pushed it; spec §2.2 sfh_cfa_fixed_ra_offset for AMD64).
  const int fixed_ra = g.version == 1 && abi == Abi::kAmd64Little ? -8 : g.fixed_ra;
  const int fixed_fp = g.fixed_fp;
  std::size_t checked = 0, fixed_seen = 0;
  for (std::uint32_t i = 0; i < s->num_fdes(); ++i) {
    auto f = s->fde(i);
    ASSERT_TRUE(f);
    const bool flex = f->fde_type == FdeType::kFlex;
    const auto& want_fres = g.funcs[i];
    std::uint32_t k = 0;
    for (const auto& fre : s->fres(*f)) {
      ASSERT_TRUE(fre);
      ASSERT_LT(k, want_fres.size()) << "FDE " << i;
      const GoldenFre& want = want_fres[k++];
      SCOPED_TRACE(::testing::Message() << c.name() << " FDE " << i << " FRE " << fre->index);
      const std::uint64_t start = f->pc_type == PcType::kMask ? fre->start_offset : f->start_pc + fre->start_offset;
      ASSERT_EQ(start, want.start);
      auto row = s->row(*f, *fre);
      auto wire = s->wire_row(*f, *fre);
      ASSERT_TRUE(row);
      ASSERT_TRUE(wire);
      ++checked;
      if (want.outermost) {
        EXPECT_TRUE(row->outermost());
        EXPECT_EQ(row->ra.kind, Rule::Kind::kUndefined);
        EXPECT_EQ(fre->dataword_count, 0);
        continue;
      }
      EXPECT_FALSE(row->outermost());
      // CFA.
      EXPECT_EQ(row->cfa, rule_of(want.cfa, abi));
      // RA: "f", "U", "u" store no word; a slot or FLEX rule stores words.
      EXPECT_EQ(row->ra_mangled, want.ra.mangled);
      switch (want.ra.kind) {
        case Kind::kFixed:
          ++fixed_seen;
          ASSERT_NE(fixed_ra, 0);
          EXPECT_EQ(wire->ra, Slot::kNone);
          EXPECT_EQ(row->ra, implicit(fixed_ra));
          break;
        case Kind::kPadWord:
          EXPECT_EQ(wire->ra, Slot::kPadding);
          EXPECT_EQ(normalized(row->ra), implicit(fixed_ra));
          break;
        case Kind::kUnchanged:
          EXPECT_EQ(wire->ra, Slot::kNone);
          EXPECT_EQ(normalized(row->ra), implicit(fixed_ra));
          break;
        default:
          EXPECT_EQ(wire->ra, Slot::kWord);
          EXPECT_EQ(row->ra, rule_of(want.ra, abi));
          break;
      }
      // FP: objdump prints the header's fixed FP as a slot in default FDEs,
      // "u" for nothing stored.
      if (want.fp.kind == Kind::kUnchanged) {
        EXPECT_EQ(wire->fp, Slot::kNone);
        EXPECT_EQ(normalized(row->fp), implicit(fixed_fp));
      } else {
        if (fixed_fp == 0 || flex) {
          EXPECT_EQ(wire->fp, Slot::kWord);
        }
        EXPECT_EQ(row->fp, rule_of(want.fp, abi));
      }
    }
    EXPECT_EQ(k, want_fres.size()) << "FDE " << i;
  }
  EXPECT_GT(checked, 0u);
  // The x86-64 v2/v3 files fix the RA in the header: every default FDE's
  // FRE prints "f".
  if (abi == Abi::kAmd64Little && g.version >= 2) {
    EXPECT_GT(fixed_seen, 0u);
  }
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, RowModel, ::testing::ValuesIn(sframe_test::golden_cases()), case_name);

}  // namespace
