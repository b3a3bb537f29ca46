// SPDX-License-Identifier: MIT
// The encoder's size options (SizeOptions, --optimize-size) against truths
// that are not the encoder's:
//  - the model: the row a lookup of each PC must find is read off the input
//    FunctionSpecs directly (the last row starting at or before the PC's
//    offset, modulo rep_size for PC-mask functions), for every PC of every
//    function and the gaps between them;
//  - the unoptimized section encoded from the same input: every PC finds the
//    same row in both;
//  - the consumers' acceptance rules (check_consumer(), docs/consumers.md),
//    for every consumer that reads the version written;
//  - hand-counted FDE, FRE and byte totals for hand-made inputs.
// tests/size/run.sh checks the CLI on real binaries against libdw (verify).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sframe/format/consumers.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "support/corpus.hpp"

namespace {

using namespace sframe;

constexpr bool kNativeBig = std::endian::native == std::endian::big;

// AMD64 rows: CFA = SP + cfa (or FP + cfa), RA at CFA - 8 (the header's),
// FP at CFA + fp when fp != 0.
FrameRow amd64_row(std::int32_t cfa, std::int32_t fp = 0, bool on_fp = false) {
  FrameRow r;
  r.cfa.kind = Rule::Kind::kExpr;
  r.cfa.base = Rule::Base::kRegister;
  r.cfa.regnum = on_fp ? 6 : 7;
  r.cfa.offset = cfa;
  r.ra.kind = Rule::Kind::kExpr;
  r.ra.base = Rule::Base::kCfa;
  r.ra.deref = true;
  r.ra.offset = -8;
  if (fp != 0) {
    r.fp.kind = Rule::Kind::kExpr;
    r.fp.base = Rule::Base::kCfa;
    r.fp.deref = true;
    r.fp.offset = fp;
  }
  return r;
}

FunctionSpec fn(std::uint64_t start, std::uint32_t size, std::vector<std::pair<std::uint32_t, FrameRow>> rows) {
  FunctionSpec f;
  f.start_pc = start;
  f.size = size;
  for (auto& [at, row] : rows) f.rows.push_back({at, row});
  return f;
}

SectionSpec amd64(Version v, std::vector<FunctionSpec> fns, bool big_endian = false) {
  SectionSpec s;
  s.version = v;
  s.abi = Abi::kAmd64Little;
  s.big_endian = big_endian;
  s.cfa_fixed_ra_offset = -8;
  s.section_address = 0x100000;
  s.functions = std::move(fns);
  return s;
}

// What a lookup of `pc` must find, read off the model: nullopt when no
// function covers it or it lies before the function's first row.
std::optional<FrameRow> model_row(const SectionSpec& s, std::uint64_t pc) {
  for (const FunctionSpec& f : s.functions) {
    if (pc < f.start_pc || pc >= f.start_pc + f.size) continue;
    std::uint64_t off = pc - f.start_pc;
    if (f.pc_type == PcType::kMask) off %= f.rep_size;
    const FrameRow* row = nullptr;
    for (const RowSpec& r : f.rows)
      if (r.start_offset <= off) row = &r.row;
    if (!row) return std::nullopt;
    return *row;
  }
  return std::nullopt;
}

struct Encoded {
  std::vector<std::byte> bytes;
  Section section;
};

Encoded encode_ok(const SectionSpec& s, SizeOptions o) {
  auto bytes = encode(s, Layout::kOptimize, o);
  EXPECT_TRUE(bytes) << (bytes ? "" : describe(bytes.error().code()));
  Encoded e;
  if (!bytes) return e;
  e.bytes = std::move(*bytes);
  auto parsed = Section::parse(e.bytes, s.section_address);
  EXPECT_TRUE(parsed);
  if (parsed) e.section = *parsed;
  return e;
}

// Every PC from before the first function to past the last: the optimized
// section finds what the unoptimized one finds, and (when `model`) what the
// model says. Returns the PCs compared.
std::uint64_t expect_same_lookups(const SectionSpec& s, const Section& plain, const Section& opt, bool model,
                                  const std::string& what) {
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const FunctionSpec& f : s.functions) {
    lo = std::min(lo, f.start_pc);
    hi = std::max(hi, f.start_pc + f.size);
  }
  std::uint64_t n = 0;
  int failures = 0;
  for (std::uint64_t pc = lo - 2; pc < hi + 2 && failures < 5; ++pc, ++n) {
    const auto a = find(plain, pc);
    const auto b = find(opt, pc);
    const bool same = a.has_value() == b.has_value() && (!a || a->row == b->row);
    if (!same) ++failures;
    EXPECT_TRUE(same) << what << ": pc 0x" << std::hex << pc << " plain " << (a ? "row" : "error") << ", optimized "
                      << (b ? "row" : "error");
    if (model) {
      const std::optional<FrameRow> want = model_row(s, pc);
      if (want.has_value() != b.has_value() || (want && !(*want == b->row))) ++failures;
      EXPECT_EQ(want.has_value(), b.has_value()) << what << ": pc 0x" << std::hex << pc;
      if (want && b) {
        EXPECT_TRUE(*want == b->row) << what << ": pc 0x" << std::hex << pc;
      }
    }
  }
  return n;
}

// Strictly valid, and accepted by every consumer that reads the version
// (and, for libsframe, the byte order's flip when foreign).
void expect_accepted(const Section& s, const std::string& what) {
  auto ok = validate(s, Strictness::kStrict);
  EXPECT_TRUE(ok) << what << ": " << (ok ? "" : describe(ok.error().code())) << " at "
                  << (ok ? 0 : ok.error().offset);
  for (Consumer c : kAllConsumers) {
    if (!reads_version(c, s.version())) continue;
    const ConsumerReport r = check_consumer(s, c);
    std::string why;
    for (const ConsumerViolation& v : r.violations) why += std::string(rule_info(v.rule).id) + " ";
    EXPECT_TRUE(r.accepted()) << what << ": " << consumer_name(c) << " rejects: " << why;
  }
}

std::vector<Consumer> readers(Version v) {
  std::vector<Consumer> out;
  for (Consumer c : kAllConsumers)
    if (reads_version(c, v)) out.push_back(c);
  return out;
}

// ---------------------------------------------------------------------------
// What each consumer set allows.

TEST(SizeOptions, ConsumersAllowSharingExceptLibsframeInForeignOrder) {
  for (Version v : {Version::kV2, Version::kV3}) {
    const std::vector<Consumer> all = readers(v);
    EXPECT_EQ(size_options_for(all, v, kNativeBig), SizeOptions::all());
    // libsframe's flip walks every FDE's FREs (libsframe.foreign-lengths).
    SizeOptions no_share = SizeOptions::all();
    no_share.share_fre_blocks = false;
    EXPECT_EQ(size_options_for(all, v, !kNativeBig), no_share);
    const Consumer lib[] = {Consumer::kLibsframe};
    EXPECT_EQ(size_options_for(lib, v, !kNativeBig), no_share);
    EXPECT_EQ(size_options_for(lib, v, kNativeBig), SizeOptions::all());
  }
  const Consumer kernel[] = {Consumer::kKernel};
  EXPECT_EQ(size_options_for(kernel, Version::kV3, kNativeBig), SizeOptions::all());
  const Consumer glibc[] = {Consumer::kGlibc};
  EXPECT_EQ(size_options_for(glibc, Version::kV2, kNativeBig), SizeOptions::all());
}

// ---------------------------------------------------------------------------
// Merging adjacent FDEs.

TEST(SizeOptions, MergeAdjacentOnlyJoinsTouchingFunctionsWithTheSameRow) {
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  SizeOptions merge;
  merge.merge_adjacent = true;
  for (Version v : {Version::kV2, Version::kV3}) {
    std::vector<FunctionSpec> fns;
    // A: push; ...; pop; ret: ends on the leaf row. B, C: leaves right after:
    // joined to A.
    fns.push_back(fn(0x1000, 0x20, {{0, leaf}, {1, pushed}, {0x1e, leaf}}));
    fns.push_back(fn(0x1020, 0x10, {{0, leaf}}));
    fns.push_back(fn(0x1030, 0x08, {{0, leaf}}));
    // D: a gap of 8 bytes before it: its own FDE (the gap stays uncovered).
    fns.push_back(fn(0x1040, 0x10, {{0, leaf}}));
    // E: touching, but a different row: its own FDE.
    fns.push_back(fn(0x1050, 0x10, {{0, pushed}}));
    // F: touching E, the leaf row, but E ends on another row: its own FDE.
    fns.push_back(fn(0x1060, 0x10, {{0, leaf}}));
    // G: touching F, same row, but a signal frame (v3 only has the bit).
    FunctionSpec g = fn(0x1070, 0x10, {{0, leaf}});
    g.signal = v == Version::kV3;
    fns.push_back(g);
    // H: touching G, same row and attributes: joined to G (v2, which has no
    // signal bit: F, G and H are one FDE).
    FunctionSpec h = fn(0x1080, 0x10, {{0, leaf}});
    h.signal = g.signal;
    fns.push_back(h);
    // I: a leaf whose row starts past offset 0: not joined (the PCs before
    // its first row must stay uncovered).
    fns.push_back(fn(0x1090, 0x10, {{4, leaf}}));
    const SectionSpec s = amd64(v, fns);
    const Encoded plain = encode_ok(s, {});
    const Encoded opt = encode_ok(s, merge);
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    // Counted by hand: v3 {A,B,C} D E F {G,H} I; v2 {A,B,C} D E {F,G,H} I.
    EXPECT_EQ(plain.section.num_fdes(), 9u) << what;
    EXPECT_EQ(opt.section.num_fdes(), v == Version::kV3 ? 6u : 5u) << what;
    const auto first = opt.section.fde(0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->start_pc, 0x1000u);
    EXPECT_EQ(first->size, 0x38u);
    EXPECT_EQ(first->num_fres, 3u);
    EXPECT_LT(opt.bytes.size(), plain.bytes.size());
    expect_accepted(opt.section, what);
    EXPECT_GT(expect_same_lookups(s, plain.section, opt.section, true, what), 0x90u);
  }
}

TEST(SizeOptions, MergeAdjacentNeverJoinsPcMaskOrDifferentFdeTypes) {
  const FrameRow leaf = amd64_row(8);
  SizeOptions merge;
  merge.merge_adjacent = true;
  std::vector<FunctionSpec> fns;
  FunctionSpec plt = fn(0x2000, 0x40, {{0, leaf}, {6, amd64_row(16)}});
  plt.pc_type = PcType::kMask;
  plt.rep_size = 16;
  fns.push_back(plt);
  fns.push_back(fn(0x2040, 0x10, {{0, amd64_row(16)}}));  // PC-mask before it: own FDE
  FunctionSpec flex = fn(0x2050, 0x10, {{0, amd64_row(16)}});
  flex.fde_type = FdeType::kFlex;
  fns.push_back(flex);  // FLEX after DEFAULT: own FDE
  const SectionSpec s = amd64(Version::kV3, fns);
  const Encoded opt = encode_ok(s, merge);
  EXPECT_EQ(opt.section.num_fdes(), 3u);
  expect_accepted(opt.section, "v3");
  expect_same_lookups(s, encode_ok(s, {}).section, opt.section, true, "v3");
}

// Coalescing adjacent FDEs whose rows differ.

TEST(SizeOptions, CoalesceJoinsTouchingFunctionsWhenThatIsSmaller) {
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  SizeOptions join;
  join.coalesce_adjacent = true;
  for (Version v : {Version::kV2, Version::kV3}) {
    std::vector<FunctionSpec> fns;
    // A: push; ...; pop; ret (ends on the leaf row). B right after, with a
    // push of its own: joined, its first row (the leaf row, A's last)
    // dropped, its push an FRE at 0x24.
    fns.push_back(fn(0x1000, 0x20, {{0, leaf}, {1, pushed}, {0x1e, leaf}}));
    fns.push_back(fn(0x1020, 0x10, {{0, leaf}, {4, pushed}}));
    // C: 8 bytes of gap before it: its own FDE (the gap stays uncovered).
    fns.push_back(fn(0x1038, 0x10, {{0, pushed}}));
    // D: touching C, but its first row starts at 2 (its first two PCs have
    // no row): its own FDE.
    fns.push_back(fn(0x1048, 0x10, {{2, leaf}}));
    // E: touching D, a signal frame in v3: its own FDE there (v2 has no
    // signal bit: joined to D).
    FunctionSpec e = fn(0x1058, 0x40, {{0, pushed}});
    e.signal = v == Version::kV3;
    fns.push_back(e);
    // F: touching E, 250 bytes with 30 rows up to offset 232 (1-byte start
    // addresses): joined, its starts would reach 0x40 + 232 > 255, and every
    // FRE of the FDE would need a 2-byte start address (31 or 32 bytes more
    // for 21 saved in v3, 20 in v2): its own FDE.
    FunctionSpec f;
    f.start_pc = 0x1098;
    f.size = 250;
    for (std::uint32_t k = 0; k < 30; ++k) f.rows.push_back({k * 8, k % 2 ? pushed : amd64_row(24)});
    fns.push_back(f);
    const SectionSpec s = amd64(v, fns);
    const Encoded plain = encode_ok(s, {});
    const Encoded opt = encode_ok(s, join);
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    // Counted by hand: v3 {A,B} C D E F; v2 {A,B} C {D,E} F.
    EXPECT_EQ(plain.section.num_fdes(), 6u) << what;
    EXPECT_EQ(opt.section.num_fdes(), v == Version::kV3 ? 5u : 4u) << what;
    const auto first = opt.section.fde(0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->start_pc, 0x1000u);
    EXPECT_EQ(first->size, 0x30u);
    EXPECT_EQ(first->num_fres, 4u);
    std::vector<std::uint32_t> starts;
    for (const auto& fre : opt.section.fres(*first))
      if (fre) starts.push_back(fre->start_offset);
    EXPECT_EQ(starts, (std::vector<std::uint32_t>{0, 1, 0x1e, 0x24})) << what;
    // Bytes saved, by hand. A+B: apart, A's FREs 3 x 3 bytes (1-byte start,
    // info, one 1-byte word; the pushed row has two words: 4 bytes), B's 3 +
    // 4, and B's FDE (v3: 16 + 5-byte attribute; v2: 20); joined, one FRE of
    // 4 bytes more. v2 D+E: E's FDE (20) less nothing (E's row restated at
    // 0x10 is 4 bytes, as it was).
    const std::size_t ab = v == Version::kV3 ? (3 + 4) + 21 : (3 + 4) + 20;
    const std::size_t de = v == Version::kV3 ? 0 : 20;
    EXPECT_EQ(plain.bytes.size() - opt.bytes.size(), ab - 4 + de) << what;
    expect_accepted(opt.section, what);
    EXPECT_GT(expect_same_lookups(s, plain.section, opt.section, true, what), 0x190u) << what;
    // At most 3 FREs per FDE: A+B (4 FREs) stays apart.
    SizeOptions capped = join;
    capped.coalesce_max_fres = 3;
    const Encoded c = encode_ok(s, capped);
    EXPECT_EQ(c.section.num_fdes(), v == Version::kV3 ? 6u : 5u) << what;
    expect_same_lookups(s, plain.section, c.section, true, what + " capped");
  }
}

// GNU ld's x86-64 PLT as three FDEs (what its .sframe and gen write):
// PLT0 (PC-increment, CFA sp+16 then sp+24 after its push), the 16-byte
// PLTn entries (PC-mask, rep_size 16: sp+8, sp+16 from byte 11 on) and
// .plt.got (PC-mask, rep_size 8, sp+8), each starting where the one before
// ends. Coalescing takes a PC-mask function in as the rows its period gives
// over its whole size, when that is smaller.
TEST(SizeOptions, CoalesceTakesInPcMaskStubsAsTheirRows) {
  const FrameRow sp8 = amd64_row(8), sp16 = amd64_row(16), sp24 = amd64_row(24);
  const auto plt = [&](Version v, std::uint32_t entries) {
    std::vector<FunctionSpec> fns;
    fns.push_back(fn(0x1020, 16, {{0, sp16}, {6, sp24}}));
    FunctionSpec pltn = fn(0x1030, 16 * entries, {{0, sp8}, {11, sp16}});
    pltn.pc_type = PcType::kMask;
    pltn.rep_size = 16;
    fns.push_back(pltn);
    FunctionSpec got = fn(0x1030 + 16 * entries, 8, {{0, sp8}});
    got.pc_type = PcType::kMask;
    got.rep_size = 8;
    fns.push_back(got);
    // A function after a gap: its own FDE whatever happens before.
    fns.push_back(fn(0x1040 + 16 * entries, 20, {{0, sp8}, {1, sp16}}));
    return amd64(v, fns);
  };
  SizeOptions join;
  join.coalesce_adjacent = true;
  for (Version v : {Version::kV2, Version::kV3}) {
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    // Two entries: one FDE of 7 FREs (0 sp16, 6 sp24, 16 sp8, 27 sp16, 32
    // sp8, 43 sp16, 48 sp8), each 3 bytes (1-byte start, info, 1-byte word).
    const SectionSpec s = plt(v, 2);
    const Encoded plain = encode_ok(s, {});
    const Encoded opt = encode_ok(s, join);
    ASSERT_EQ(plain.section.num_fdes(), 4u) << what;
    ASSERT_EQ(opt.section.num_fdes(), 2u) << what;
    const auto first = opt.section.fde(0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->pc_type, PcType::kInc) << what;
    EXPECT_EQ(first->start_pc, 0x1020u) << what;
    EXPECT_EQ(first->size, 16u + 32u + 8u) << what;
    std::vector<std::uint32_t> starts;
    for (const auto& fre : opt.section.fres(*first))
      if (fre) starts.push_back(fre->start_offset);
    EXPECT_EQ(starts, (std::vector<std::uint32_t>{0, 6, 16, 27, 32, 43, 48})) << what;
    // By hand: apart, PLT0 2 FREs, PLTn 2, .plt.got 1 (5 x 3 bytes) and
    // three FDEs (v3 16 + a 5-byte attribute each, v2 20); joined, 7 FREs
    // and one FDE.
    const std::size_t fde = v == Version::kV3 ? 21 : 20;
    EXPECT_EQ(plain.bytes.size() - opt.bytes.size(), (3 * fde + 5 * 3) - (fde + 7 * 3)) << what;
    expect_accepted(opt.section, what);
    EXPECT_GT(expect_same_lookups(s, plain.section, opt.section, true, what), 0x50u) << what;
    // The whole of --optimize-size does the same.
    const Encoded all = encode_ok(s, SizeOptions::all());
    EXPECT_EQ(all.section.num_fdes(), 2u) << what;
    expect_accepted(all.section, what + " all");
    expect_same_lookups(s, plain.section, all.section, true, what + " all");
    // Twenty entries would be 42 FREs, more than a PC-mask FDE costs (and
    // past --optimize-size's 16-FRE cap): PLTn keeps its own PC-mask FDE.
    // .plt.got (sp+8 over 8 bytes) reads what the next 16-byte period of
    // PLTn would (sp+8 up to byte 11): PLTn's FDE extends over it. GNU ld
    // 2.47 says sp+16 there, which the period does not: its own FDE.
    for (const std::int32_t got_cfa : {8, 16}) {
      SectionSpec big = plt(v, 20);
      big.functions[2].rows = {{0, amd64_row(got_cfa)}};
      const Encoded big_plain = encode_ok(big, {});
      const std::string w = what + " 20 entries, .plt.got sp+" + std::to_string(got_cfa);
      for (SizeOptions o : {join, SizeOptions::all()}) {
        const Encoded b = encode_ok(big, o);
        EXPECT_EQ(b.section.num_fdes(), got_cfa == 8 ? 3u : 4u) << w;
        const auto mask = b.section.fde(1);
        ASSERT_TRUE(mask);
        EXPECT_EQ(mask->pc_type, PcType::kMask) << w;
        EXPECT_EQ(mask->num_fres, 2u) << w;
        EXPECT_EQ(mask->size, got_cfa == 8 ? 320u + 8u : 320u) << w;
        expect_accepted(b.section, w);
        expect_same_lookups(big, big_plain.section, b.section, true, w);
      }
    }
  }
}

TEST(SizeOptions, CoalesceWithSharingKeepsTheSmallerSection) {
  // Ten identical two-function pairs: joined, each pair is a unique-looking
  // block of its own until the second pair, which shares the first pair's
  // joined block; apart, all but two blocks are shared. Whichever is
  // smaller is returned, never more than sharing alone gives.
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  std::vector<FunctionSpec> fns;
  for (std::uint64_t i = 0; i < 10; ++i) {
    const std::uint64_t at = 0x4000 + i * 0x40;
    fns.push_back(fn(at, 0x20, {{0, leaf}, {1, pushed}, {0x1e, leaf}}));
    fns.push_back(fn(at + 0x20, 0x10, {{0, pushed}}));
  }
  for (Version v : {Version::kV2, Version::kV3}) {
    const SectionSpec s = amd64(v, fns);
    SizeOptions share;
    share.share_fre_blocks = true;
    SizeOptions both = share;
    both.coalesce_adjacent = true;
    const Encoded shared = encode_ok(s, share);
    const Encoded opt = encode_ok(s, both);
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    EXPECT_LE(opt.bytes.size(), shared.bytes.size()) << what;
    expect_accepted(opt.section, what);
    expect_same_lookups(s, encode_ok(s, {}).section, opt.section, true, what);
  }
}

// ---------------------------------------------------------------------------
// PC-mask FDEs for repeated stubs.

TEST(SizeOptions, PcMaskFoldsRowsThatRepeatWithAFixedPeriod) {
  SizeOptions mask;
  mask.pc_mask = true;
  const FrameRow a = amd64_row(8);
  const FrameRow b = amd64_row(16);
  for (Version v : {Version::kV2, Version::kV3}) {
    // 12 PLT-like stubs of 16 bytes: CFA = SP + 8 at 0, SP + 16 from 6.
    std::vector<std::pair<std::uint32_t, FrameRow>> rows;
    for (std::uint32_t k = 0; k < 12; ++k) {
      rows.push_back({16 * k, a});
      rows.push_back({16 * k + 6, b});
    }
    std::vector<FunctionSpec> fns;
    fns.push_back(fn(0x3000, 12 * 16, rows));
    // The same, but the last stub cut short (size not a multiple of 16).
    auto cut = rows;
    cut.pop_back();
    fns.push_back(fn(0x3100, 11 * 16 + 4, cut));
    // Not periodic: the 5th stub's second row is at 7: stays PC-increment.
    auto odd = rows;
    odd[9].first = 16 * 4 + 7;
    fns.push_back(fn(0x3200, 12 * 16, odd));
    const SectionSpec s = amd64(v, fns);
    const Encoded plain = encode_ok(s, {});
    const Encoded opt = encode_ok(s, mask);
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    ASSERT_EQ(opt.section.num_fdes(), 3u) << what;
    for (std::uint32_t i = 0; i < 3; ++i) {
      const auto f = opt.section.fde(i);
      ASSERT_TRUE(f);
      EXPECT_EQ(f->size, s.functions[i].size) << what << " FDE " << i;
      if (i < 2) {
        EXPECT_EQ(f->pc_type, PcType::kMask) << what << " FDE " << i;
        EXPECT_EQ(f->rep_size, 16u) << what << " FDE " << i;
        EXPECT_EQ(f->num_fres, 2u) << what << " FDE " << i;
      } else {
        EXPECT_EQ(f->pc_type, PcType::kInc) << what;
        EXPECT_EQ(f->num_fres, 24u) << what;
      }
    }
    EXPECT_LT(opt.bytes.size(), plain.bytes.size());
    expect_accepted(opt.section, what);
    expect_same_lookups(s, plain.section, opt.section, true, what);
  }
}

// ---------------------------------------------------------------------------
// FRE-block sharing.

TEST(SizeOptions, ShareFreBlocksStoresIdenticalBlocksOnce) {
  SizeOptions share;
  share.share_fre_blocks = true;
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  const FrameRow framed = amd64_row(16, -16, true);
  for (Version v : {Version::kV2, Version::kV3}) {
    std::vector<FunctionSpec> fns;
    // Five functions with the classic frame-pointer prologue (3 FREs each,
    // 1-byte starts, 1-byte words), with gaps so nothing merges.
    for (std::uint64_t k = 0; k < 5; ++k)
      fns.push_back(fn(0x4000 + 0x100 * k, 0x80, {{0, leaf}, {1, pushed}, {4, framed}}));
    // The same rows, the last from offset 0x104: 2-byte starts (spec
    // v3 §2.3.3.3: the FRE type holds the start offsets), a block of its own.
    fns.push_back(fn(0x4600, 0x180, {{0, leaf}, {1, pushed}, {0x104, framed}}));
    // A different block.
    fns.push_back(fn(0x4800, 0x80, {{0, leaf}, {2, pushed}}));
    const SectionSpec s = amd64(v, fns);
    const Encoded plain = encode_ok(s, {});
    const Encoded opt = encode_ok(s, share);
    const std::string what = v == Version::kV2 ? "v2" : "v3";
    // Hand count: a 1-byte-start FRE of 1 word is 3 bytes, of 2 words 4.
    // Block of the 5: 3 + 4 + 4 = 11 (+ 5 attribute bytes in v3); the
    // 2-byte-start block 4 + 5 + 5 = 14 (+5); the last 3 + 4 = 7 (+5).
    const std::uint32_t attr = v == Version::kV3 ? 5 : 0;
    EXPECT_EQ(plain.section.header().fre_len, 5 * (11 + attr) + (14 + attr) + (7 + attr)) << what;
    EXPECT_EQ(opt.section.header().fre_len, (11 + attr) + (14 + attr) + (7 + attr)) << what;
    EXPECT_EQ(opt.section.header().num_fres, 3u + 3u + 2u) << what;
    EXPECT_EQ(opt.section.num_fdes(), 7u) << what;
    const auto f0 = opt.section.fde(0);
    ASSERT_TRUE(f0);
    for (std::uint32_t i = 1; i < 5; ++i) {
      const auto fi = opt.section.fde(i);
      ASSERT_TRUE(fi);
      EXPECT_EQ(fi->fres_begin, f0->fres_begin) << what << " FDE " << i;
      EXPECT_EQ(fi->num_fres, 3u);
    }
    EXPECT_EQ(plain.bytes.size() - opt.bytes.size(), 4 * (11 + attr)) << what;
    expect_accepted(opt.section, what);
    // kLenient (what decoding needs) agrees.
    EXPECT_TRUE(validate(opt.section, Strictness::kLenient));
    expect_same_lookups(s, plain.section, opt.section, true, what);
  }
}

// Why sharing is left out for libsframe in the foreign byte order: its flip
// walks a shared block once per FDE (docs/consumers.md).
TEST(SizeOptions, SharedBlocksInForeignOrderAreWhatLibsframeRejects) {
  SizeOptions share;
  share.share_fre_blocks = true;
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  std::vector<FunctionSpec> fns;
  for (std::uint64_t k = 0; k < 3; ++k) fns.push_back(fn(0x5000 + 0x100 * k, 0x40, {{0, leaf}, {1, pushed}}));
  for (Version v : {Version::kV2, Version::kV3}) {
    const SectionSpec s = amd64(v, fns, !kNativeBig);
    const Encoded shared = encode_ok(s, share);
    EXPECT_TRUE(validate(shared.section, Strictness::kStrict));
    const ConsumerReport r = check_consumer(shared.section, Consumer::kLibsframe);
    EXPECT_FALSE(r.accepted());
    bool length_rule = false;
    for (const ConsumerViolation& x : r.violations)
      length_rule |= x.rule == ConsumerRule::kLibsframeForeignLength || x.rule == ConsumerRule::kLibsframeForeignCount;
    EXPECT_TRUE(length_rule);
    // What --optimize-size picks for that consumer instead is accepted.
    const Consumer lib[] = {Consumer::kLibsframe};
    const Encoded chosen = encode_ok(s, size_options_for(lib, v, s.big_endian));
    EXPECT_TRUE(check_consumer(chosen.section, Consumer::kLibsframe).accepted());
    expect_same_lookups(s, shared.section, chosen.section, true, "foreign");
  }
}

// validate(kStrict): whole shared blocks that read the same are accepted;
// anything else that overlaps is not (section.hpp, docs/consumers.md).
TEST(SizeOptions, StrictValidationAcceptsWholeSharedBlocksOnly) {
  SizeOptions share;
  share.share_fre_blocks = true;
  const FrameRow leaf = amd64_row(8);
  const FrameRow pushed = amd64_row(16, -16);
  std::vector<FunctionSpec> fns;
  fns.push_back(fn(0x6000, 0x40, {{0, leaf}, {1, pushed}, {0x3f, leaf}}));
  fns.push_back(fn(0x6100, 0x40, {{0, leaf}, {1, pushed}, {0x3f, leaf}}));
  const SectionSpec s = amd64(Version::kV2, fns);
  Encoded e = encode_ok(s, share);
  ASSERT_TRUE(validate(e.section, Strictness::kStrict));
  // v2 FDE 1 (header 28 bytes, FDEs of 20): sfde_func_num_fres at 28+20+12.
  const std::size_t fde1 = 28 + 20;
  auto with = [&](std::size_t at, std::uint32_t value) {
    std::vector<std::byte> b = e.bytes;
    for (int k = 0; k < 4; ++k) b[at + k] = std::byte(value >> (8 * k));
    return b;
  };
  // Same offset, one FRE fewer: the block reads differently for it.
  {
    const auto b = with(fde1 + 12, 2);
    const auto sec = Section::parse(b, s.section_address);
    ASSERT_TRUE(sec);
    const auto r = validate(*sec, Strictness::kStrict);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), FormatErrc::kFdeFresOverlap);
    EXPECT_EQ(r.error().fde, 1u);
  }
  // Pointing inside FDE 0's block (its second FRE, 3 bytes in): overlap.
  {
    std::vector<std::byte> b = with(fde1 + 8, 3);
    for (int k = 0; k < 4; ++k) b[fde1 + 12 + k] = std::byte(k == 0 ? 2 : 0);
    const auto sec = Section::parse(b, s.section_address);
    ASSERT_TRUE(sec);
    const auto r = validate(*sec, Strictness::kStrict);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), FormatErrc::kFdeFresOverlap);
    EXPECT_EQ(r.error().fde, 1u);
  }
  // Shared, but the header counts the block twice.
  {
    const std::uint32_t twice = 2 * e.section.header().num_fres;
    std::vector<std::byte> b = with(12, twice);
    const auto sec = Section::parse(b, s.section_address);
    ASSERT_TRUE(sec);
    const auto r = validate(*sec, Strictness::kStrict);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), FormatErrc::kFreCountMismatch);
  }
}

// ---------------------------------------------------------------------------
// Every technique, alone and together, on GNU's own sections (the corpus)
// and on random models: lookups unchanged, consumers accepting.

TEST(SizeOptions, CorpusSectionsKeepEveryLookup) {
  int checked = 0;
  for (const sframe_test::GoldenCase& c : sframe_test::golden_cases()) {
    auto file = elf::ElfFile::open((c.dir / c.file).string());
    ASSERT_TRUE(file) << c.name();
    auto d = file->sframe_section();
    ASSERT_TRUE(d) << c.name();
    const std::vector<std::byte> raw(d->bytes.begin(), d->bytes.end());
    auto gnu = Section::parse(raw, d->address);
    ASSERT_TRUE(gnu) << c.name();
    auto spec = to_spec(*gnu);
    ASSERT_TRUE(spec) << c.name();
    // Relocatable objects hold functions of several sections at one address.
    if (!(gnu->header().flags & flags::kFdeSorted)) continue;
    for (Version v : {Version::kV3, Version::kV2}) {
      SectionSpec s = *spec;
      s.version = v;
      if (v == Version::kV2)
        std::erase_if(s.functions, [](const FunctionSpec& f) { return f.fde_type == FdeType::kFlex; });
      const Encoded plain = encode_ok(s, {});
      for (SizeOptions o : {SizeOptions{true, false, false}, SizeOptions{false, true, false},
                            SizeOptions{false, false, true}, SizeOptions{false, false, false, true, 0},
                            SizeOptions{false, false, false, true, 2}, SizeOptions::all()}) {
        const std::string what = c.name() + (v == Version::kV2 ? " v2" : " v3") + " merge=" +
                                 std::to_string(o.merge_adjacent) + " mask=" + std::to_string(o.pc_mask) +
                                 " share=" + std::to_string(o.share_fre_blocks) +
                                 " coalesce=" + std::to_string(o.coalesce_adjacent) + "/" +
                                 std::to_string(o.coalesce_max_fres);
        const Encoded opt = encode_ok(s, o);
        EXPECT_LE(opt.bytes.size(), plain.bytes.size()) << what;
        if (s.big_endian == kNativeBig) {
          expect_accepted(opt.section, what);
        } else {
          // The kernel and glibc read the native order only; libsframe
          // flips the foreign one, which unshared blocks survive.
          EXPECT_TRUE(validate(opt.section, Strictness::kStrict)) << what;
          if (!o.share_fre_blocks) {
            EXPECT_TRUE(check_consumer(opt.section, Consumer::kLibsframe).accepted()) << what;
          }
        }
        expect_same_lookups(s, plain.section, opt.section, true, what);
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(SizeOptions, RandomModelsKeepEveryLookup) {
  std::mt19937 rng(1717);
  auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  // A small palette of rows, so that neighbours and blocks repeat often.
  const FrameRow palette[] = {amd64_row(8), amd64_row(16, -16), amd64_row(16, -16, true), amd64_row(24),
                              amd64_row(32, -24)};
  // Each technique must have fired somewhere: FDEs joined, PC-mask FDEs
  // made, blocks shared.
  std::uint64_t joined = 0, masked = 0, shared = 0, coalesced = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<FunctionSpec> fns;
    std::uint64_t pc = 0x10000;
    const unsigned n = 1 + pick(30);
    for (unsigned i = 0; i < n; ++i) {
      FunctionSpec f;
      f.start_pc = pc;
      f.size = pick(4) == 0 ? 1 + pick(600) : 1 + pick(48);
      pc += f.size + (pick(3) == 0 ? pick(16) : 0);
      if (pick(6) == 0) {
        // A stub run: period p, 2 rows per period.
        const std::uint32_t p = 4 + pick(30);
        const std::uint32_t at = 1 + pick(p - 1);
        const FrameRow& a = palette[pick(5)];
        const FrameRow& b = palette[pick(5)];
        for (std::uint32_t base = 0; base < f.size; base += p) {
          f.rows.push_back({base, a});
          if (base + at < f.size) f.rows.push_back({base + at, b});
        }
      } else {
        std::uint32_t at = pick(3) == 0 ? pick(3) : 0;
        const unsigned rows = 1 + pick(4);
        for (unsigned k = 0; k < rows && at < f.size; ++k) {
          f.rows.push_back({at, palette[pick(5)]});
          at += 1 + pick(f.size);
        }
      }
      if (pick(10) == 0) f.signal = true;
      if (pick(8) == 0 && f.size > 1) {
        // A PC-mask function of the model: a period of 1-3 rows.
        f.pc_type = PcType::kMask;
        f.rep_size = static_cast<std::uint8_t>(2 + pick(std::min<std::uint32_t>(f.size - 1, 40)));
        f.rows.clear();
        std::uint32_t at = 0;
        for (unsigned k = 0, rows = 1 + pick(3); k < rows && at < f.rep_size; ++k) {
          f.rows.push_back({at, palette[pick(5)]});
          at += 1 + pick(f.rep_size);
        }
      }
      fns.push_back(std::move(f));
    }
    for (Version v : {Version::kV2, Version::kV3}) {
      std::vector<FunctionSpec> vf = fns;
      if (v == Version::kV2)
        for (FunctionSpec& f : vf) f.signal = false;
      const SectionSpec s = amd64(v, vf);
      const Encoded plain = encode_ok(s, {});
      const Encoded opt = encode_ok(s, SizeOptions::all());
      const std::string what = "model " + std::to_string(iter) + (v == Version::kV2 ? " v2" : " v3");
      EXPECT_LE(opt.bytes.size(), plain.bytes.size()) << what;
      expect_accepted(opt.section, what);
      expect_same_lookups(s, plain.section, opt.section, true, what);
      // Coalescing alone (sharing would hide it: finish() may keep the
      // section without joining).
      SizeOptions join;
      join.coalesce_adjacent = true;
      const Encoded j = encode_ok(s, join);
      EXPECT_LE(j.bytes.size(), plain.bytes.size()) << what << " coalesce";
      expect_accepted(j.section, what + " coalesce");
      expect_same_lookups(s, plain.section, j.section, true, what + " coalesce");
      coalesced += plain.section.num_fdes() - j.section.num_fdes();
      if (HasFailure()) return;
      joined += plain.section.num_fdes() - opt.section.num_fdes();
      std::uint64_t fres = 0;
      for (std::uint32_t i = 0; i < opt.section.num_fdes(); ++i) {
        const auto f = opt.section.fde(i);
        ASSERT_TRUE(f);
        masked += f->pc_type == PcType::kMask;
        fres += f->num_fres;
      }
      shared += fres - opt.section.header().num_fres;
    }
  }
  EXPECT_GT(joined, 50u);
  EXPECT_GT(masked, 50u);
  EXPECT_GT(shared, 50u);
  EXPECT_GT(coalesced, joined);
  std::printf("random models: %llu FDEs joined, %llu PC-mask FDEs, %llu FREs shared\n",
              static_cast<unsigned long long>(joined), static_cast<unsigned long long>(masked),
              static_cast<unsigned long long>(shared));
}

}  // namespace
