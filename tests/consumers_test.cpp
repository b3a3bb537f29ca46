// SPDX-License-Identifier: MIT
// The consumers' acceptance rules (docs/consumers.md): one hand-made section
// per rule, each rejected with that rule named; and GNU ld 2.47's sections
// accepted by the consumers that read their version.
//
// Truth: the rules as shared/reference/sframe-consumers.md and the
// consumers' sources state them. The broken sections are GNU-made corpus
// sections with one field patched here, located by this file's own reading
// of the layout in the specification (v2 §2.3, v3 §2.3-2.4), not by the
// library; the tests assert the rule named (and the byte patched), never a
// value the library computed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "sframe/format/consumers.hpp"
#include "sframe/elf/elf.hpp"
#include "support/corpus.hpp"
#include "support/flip.hpp"

namespace {

using sframe::Consumer;
using sframe::ConsumerRule;

// A corpus section as bytes, with its address and the file's facts.
struct Input {
  std::vector<std::uint8_t> bytes;
  std::uint64_t address = 0;
  std::optional<sframe::FileFacts> facts;
};

Input from_corpus(const std::string& rel) {
  const auto path = sframe_test::shared_dir() / "corpus" / rel;
  auto f = sframe::elf::ElfFile::open(path.string());
  EXPECT_TRUE(f) << path;
  if (!f) return {};
  auto d = f->sframe_section();
  EXPECT_TRUE(d) << path;
  if (!d) return {};
  Input in;
  const auto* p = reinterpret_cast<const std::uint8_t*>(d->bytes.data());
  in.bytes.assign(p, p + d->bytes.size());
  in.address = d->address;
  in.facts = sframe::elf::consumer_facts(*f, *d);
  return in;
}

Input raw_file(const std::string& rel) {
  const std::string s = sframe_test::read_file(sframe_test::shared_dir() / "corpus" / rel);
  EXPECT_FALSE(s.empty()) << rel;
  Input in;
  in.bytes.assign(s.begin(), s.end());
  return in;
}

// Little-endian field access (the x86-64 corpus), and big-endian for the
// foreign sections; the order is the magic's (spec §2.1).
bool big(const std::vector<std::uint8_t>& b) { return b[0] == 0xde; }
std::uint64_t get(const std::vector<std::uint8_t>& b, std::size_t at, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= std::uint64_t{b.at(at + (big(b) ? n - 1 - i : i))} << (8 * i);
  return v;
}
void put(std::vector<std::uint8_t>& b, std::size_t at, unsigned n, std::uint64_t v) {
  const bool be = big(b);
  for (unsigned i = 0; i < n; ++i) b.at(at + (be ? n - 1 - i : i)) = static_cast<std::uint8_t>(v >> (8 * i));
}

// The layout, read from the header (spec §2.2): header end, FDE and FRE
// sub-section offsets, FDE entry size.
struct Layout {
  unsigned version;
  std::size_t hdr_end, fdes, fres, fre_len, num_fdes, entry;
};
Layout layout(const std::vector<std::uint8_t>& b) {
  Layout l{};
  l.version = b[2];
  l.hdr_end = 28 + b[7];
  l.num_fdes = get(b, 8, 4);
  l.fre_len = get(b, 16, 4);
  l.fdes = l.hdr_end + get(b, 20, 4);
  l.fres = l.hdr_end + get(b, 24, 4);
  l.entry = l.version == 3 ? 16 : l.version == 2 ? 20 : 17;
  return l;
}
// FDE i's entry; its sfde_func_start_fre_off field (v3: at +12; v2: +8).
std::size_t fde_at(const Layout& l, std::size_t i) { return l.fdes + i * l.entry; }
std::size_t fre_off_field(const Layout& l, std::size_t i) { return fde_at(l, i) + (l.version == 3 ? 12 : 8); }
// Where the FDE's info byte, rep_size and num_fres are (v3: in the
// attribute at the head of its FRE data; v2: in the entry).
std::size_t attr_at(const std::vector<std::uint8_t>& b, const Layout& l, std::size_t i) {
  return l.fres + get(b, fre_off_field(l, i), 4);
}
std::size_t info_at(const std::vector<std::uint8_t>& b, const Layout& l, std::size_t i) {
  return l.version == 3 ? attr_at(b, l, i) + 2 : fde_at(l, i) + 16;
}
std::size_t rep_size_at(const std::vector<std::uint8_t>& b, const Layout& l, std::size_t i) {
  return l.version == 3 ? attr_at(b, l, i) + 4 : fde_at(l, i) + 17;
}
// Byte offset of FRE k of FDE i (spec §2.4: start address, info, words).
std::size_t fre_at(const std::vector<std::uint8_t>& b, const Layout& l, std::size_t i, std::size_t k) {
  std::size_t at = l.version == 3 ? attr_at(b, l, i) + 5 : attr_at(b, l, i);
  const unsigned asz = 1u << (b[info_at(b, l, i)] & 0xf);
  for (std::size_t j = 0; j < k; ++j) {
    const std::uint8_t info = b[at + asz];
    at += asz + 1 + (((info >> 1) & 0xf) << ((info >> 5) & 3));
  }
  return at;
}
std::size_t addr_size(const std::vector<std::uint8_t>& b, const Layout& l, std::size_t i) {
  return 1u << (b[info_at(b, l, i)] & 0xf);
}

// Inserts `n` zero bytes at `at` (for an auxiliary header or a gap).
void insert(std::vector<std::uint8_t>& b, std::size_t at, std::size_t n) {
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), n, 0);
}

sframe::ConsumerReport check(const Input& in, Consumer c, bool with_file = false) {
  const auto* p = reinterpret_cast<const std::byte*>(in.bytes.data());
  auto s = sframe::Section::parse(std::span(p, in.bytes.size()), in.address);
  EXPECT_TRUE(s) << "the patched section must still parse";
  if (!s) return {};
  return sframe::check_consumer(*s, c, with_file && in.facts ? &*in.facts : nullptr, 1000);
}

std::string list(const sframe::ConsumerReport& r) {
  std::string out;
  for (const auto& v : r.violations) out += std::string(sframe::rule_info(v.rule).id) + " ";
  return out.empty() ? "none" : out;
}

// Asserts that `rule` is among the violations (at `offset` when given).
void expect_rule(const sframe::ConsumerReport& r, ConsumerRule rule, std::optional<std::uint64_t> offset = {}) {
  const auto& info = sframe::rule_info(rule);
  const auto it = std::find_if(r.violations.begin(), r.violations.end(), [&](const auto& v) {
    return v.rule == rule && (!offset || v.offset == *offset);
  });
  EXPECT_NE(it, r.violations.end()) << "want " << info.id << (offset ? " at byte " + std::to_string(*offset) : "")
                                    << "; got " << list(r);
  EXPECT_FALSE(r.accepted());
}

const char* const kV3 = "x86_64-v3-linked/basic";
const char* const kV3Plt = "x86_64-v3-linked/usesolib";  // FDEs 1, 2: PC-mask (.plt, .plt.got)
const char* const kV2 = "x86_64-v2-linked/basic";
const char* const kV2Plt = "x86_64-v2-linked/usesolib";

// ---- Acceptance: GNU ld 2.47's output -----------------------------------

const char* const kLinked[] = {"basic", "cxx", "libdemo.so", "longfn", "realign", "signals", "usesolib"};

TEST(Consumers, Ld247V3AcceptedByKernelAndLibsframe) {
  for (const char* f : kLinked) {
    const Input in = from_corpus(std::string("x86_64-v3-linked/") + f);
    ASSERT_TRUE(in.facts) << f;
    const auto k = check(in, Consumer::kKernel, true);
    EXPECT_TRUE(k.accepted()) << f << ": " << list(k);
    EXPECT_TRUE(k.file_rules_checked);
    const auto l = check(in, Consumer::kLibsframe, true);
    EXPECT_TRUE(l.accepted()) << f << ": " << list(l);
  }
}

TEST(Consumers, V2CorpusAcceptedByGlibcAndLibsframe) {
  for (const char* f : kLinked) {
    const Input in = from_corpus(std::string("x86_64-v2-linked/") + f);
    const auto g = check(in, Consumer::kGlibc, true);
    EXPECT_TRUE(g.accepted()) << f << ": " << list(g);
    const auto l = check(in, Consumer::kLibsframe, true);
    EXPECT_TRUE(l.accepted()) << f << ": " << list(l);
  }
}

// libsframe 2.47 decodes GNU's foreign-order sections (objdump 2.47 dumped
// them: the corpus goldens), so its flip rules must accept them.
TEST(Consumers, ForeignOrderCorpusAcceptedByLibsframe) {
  for (const char* f : {"raw-sections/gnu-v3-s390x.sframe", "raw-sections/gnu-v2-aarch64be.sframe"}) {
    const auto r = check(raw_file(f), Consumer::kLibsframe);
    EXPECT_TRUE(r.accepted()) << f << ": " << list(r);
  }
}

TEST(Consumers, FileRulesSkippedWithoutFile) {
  const auto r = check(from_corpus(kV3), Consumer::kKernel, false);
  EXPECT_FALSE(r.file_rules_checked);
  EXPECT_TRUE(r.accepted());
}

TEST(Consumers, VersionsRead) {
  using sframe::Version;
  EXPECT_TRUE(sframe::reads_version(Consumer::kKernel, Version::kV3));
  EXPECT_FALSE(sframe::reads_version(Consumer::kKernel, Version::kV2));
  EXPECT_TRUE(sframe::reads_version(Consumer::kGlibc, Version::kV2));
  EXPECT_FALSE(sframe::reads_version(Consumer::kGlibc, Version::kV3));
  EXPECT_FALSE(sframe::reads_version(Consumer::kLibsframe, Version::kV1));
  EXPECT_TRUE(sframe::reads_version(Consumer::kLibsframe, Version::kV3));
}

// Every rule is documented with its source.
TEST(Consumers, EveryRuleInDocs) {
  const std::string doc = sframe_test::read_file(std::filesystem::path(SFRAMEPP_SOURCE_DIR) / "docs/consumers.md");
  ASSERT_FALSE(doc.empty());
  for (const auto& r : sframe::consumer_rules()) {
    // Appended rather than "`" + id + "`", which g++ 12 at -O3 warns of
    // (-Wrestrict) though it is well-defined.
    std::string quoted(1, '`');
    quoted.append(r.id).push_back('`');
    EXPECT_NE(doc.find(quoted), std::string::npos) << r.id << " missing in docs/consumers.md";
  }
}

// ---- Kernel (sframe-consumers.md, kernel items 1-7) -----------------------

TEST(KernelRules, NativeByteOrder) {
  Input in = from_corpus(kV3);
  in.bytes = *sframe_test::flip_sframe_byte_order(in.bytes);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelNativeOrder, 0);
}

TEST(KernelRules, Version) { expect_rule(check(from_corpus(kV2), Consumer::kKernel), ConsumerRule::kKernelVersion, 2); }

TEST(KernelRules, FlagSorted) {
  Input in = from_corpus(kV3);
  in.bytes[3] &= static_cast<std::uint8_t>(~0x1);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFlagSorted, 3);
}

TEST(KernelRules, FlagPcrel) {
  Input in = from_corpus(kV3);
  in.bytes[3] &= static_cast<std::uint8_t>(~0x4);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFlagPcrel, 3);
}

TEST(KernelRules, AuxHeader) {
  Input in = from_corpus(kV3);
  insert(in.bytes, 28, 4);  // the offsets count from the end of the aux header
  in.bytes[7] = 4;
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelAuxHeader, 7);
}

TEST(KernelRules, NoFdes) {
  Input in = from_corpus(kV3);
  put(in.bytes, 8, 4, 0);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelNoFdes, 8);
}

TEST(KernelRules, NoFres) {
  Input in = from_corpus(kV3);
  put(in.bytes, 12, 4, 0);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelNoFres, 12);
}

TEST(KernelRules, SubsectionsOrdered) {
  // One more FDE than the FDE sub-section has room for before the FREs.
  Input in = from_corpus(kV3);
  put(in.bytes, 8, 4, get(in.bytes, 8, 4) + 1);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelLayout);
}

TEST(KernelRules, FdeStartsStrictlyIncreasing) {
  // FDE 1 made to start where FDE 0 starts (PC-relative fields: 16 apart).
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  put(in.bytes, fde_at(l, 1), 8, get(in.bytes, fde_at(l, 0), 8) - 16);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFdeOrder, fde_at(l, 1));
}

TEST(KernelRules, FdeAttributeInsideFres) {
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  put(in.bytes, fre_off_field(l, 0), 4, l.fre_len - 2);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFdeAttr);
}

TEST(KernelRules, FreType) {
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  in.bytes[info_at(in.bytes, l, 0)] |= 0x3;
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFreType, info_at(in.bytes, l, 0));
}

TEST(KernelRules, FreInsideFreSubsection) {
  // The FDE whose FREs come last claims 5 more FREs than it has: they
  // would lie past the end of the FRE sub-section.
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  std::size_t last = 0;
  for (std::size_t i = 0; i < l.num_fdes; ++i)
    if (get(in.bytes, fre_off_field(l, i), 4) > get(in.bytes, fre_off_field(l, last), 4)) last = i;
  const std::size_t a = attr_at(in.bytes, l, last);
  put(in.bytes, a, 2, get(in.bytes, a, 2) + 5);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFreBounds);
}

TEST(KernelRules, DatawordSizeCode) {
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  const std::size_t info = fre_at(in.bytes, l, 0, 0) + addr_size(in.bytes, l, 0);
  in.bytes[info] |= 0x60;  // size code 3
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelDatawordSize, info);
}

TEST(KernelRules, FreStartsStrictlyIncreasing) {
  // basic's FDE 0 (the PLT0 stub): FREs at 0x0 and 0x6 (golden dump).
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  const std::size_t fre1 = fre_at(in.bytes, l, 0, 1);
  put(in.bytes, fre1, static_cast<unsigned>(addr_size(in.bytes, l, 0)), 0);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFreOrder, fre1);
}

TEST(KernelRules, FreStartWithinFunctionSize) {
  // FDE 0 is 16 bytes long (golden dump): its last FRE moved to 17.
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  ASSERT_EQ(get(in.bytes, fde_at(l, 0) + 8, 4), 16u);
  const std::size_t fre1 = fre_at(in.bytes, l, 0, 1);
  put(in.bytes, fre1, static_cast<unsigned>(addr_size(in.bytes, l, 0)), 17);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFreRange, fre1);
}

TEST(KernelRules, LeftoverDataword) {
  // AMD64 fixes the RA offset (-8): CFA and FP at most; a third word is left over.
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  ASSERT_NE(static_cast<std::int8_t>(in.bytes[6]), 0);
  const std::size_t info = fre_at(in.bytes, l, 0, 0) + addr_size(in.bytes, l, 0);
  in.bytes[info] = static_cast<std::uint8_t>((in.bytes[info] & ~0x1e) | (3 << 1));
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelDatawords, info);
}

TEST(KernelRules, PcMaskRepSizeNonZero) {
  Input in = from_corpus(kV3Plt);
  const Layout l = layout(in.bytes);
  ASSERT_EQ((in.bytes[info_at(in.bytes, l, 1)] >> 4) & 1, 1) << "FDE 1 is the PC-mask .plt FDE";
  in.bytes[rep_size_at(in.bytes, l, 1)] = 0;
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelRepSize, rep_size_at(in.bytes, l, 1));
}

TEST(KernelRules, FlexSupportedForm) {
  // realign's FDE 5 is FLEX (attr "F" in the golden); its first FRE's CFA
  // control word loses reg_p (spec v3 §3.2: the CFA is register-based).
  Input in = from_corpus("x86_64-v3-linked/realign");
  const Layout l = layout(in.bytes);
  ASSERT_EQ(in.bytes[attr_at(in.bytes, l, 5) + 3] & 0x1f, 1) << "FDE 5 is FLEX";
  const std::size_t fre0 = fre_at(in.bytes, l, 5, 0);
  const std::size_t word0 = fre0 + addr_size(in.bytes, l, 5) + 1;
  ASSERT_EQ(in.bytes[word0] & 1, 1);
  in.bytes[word0] &= static_cast<std::uint8_t>(~1);
  expect_rule(check(in, Consumer::kKernel), ConsumerRule::kKernelFlex, fre0);
}

TEST(KernelRules, FdeInExecutableLoad) {
  // FDE 0 made to start at the section itself (read-only data).
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  put(in.bytes, fde_at(l, 0), 8, static_cast<std::uint64_t>(-static_cast<std::int64_t>(fde_at(l, 0))));
  expect_rule(check(in, Consumer::kKernel, true), ConsumerRule::kKernelFdeOutsideText, fde_at(l, 0));
}

TEST(KernelRules, FdesInOneExecutableLoad) {
  // The same file described with its text split into two PF_X segments at
  // FDE 1's start (golden: 0x1030): registration is per PF_X segment.
  Input in = from_corpus(kV3);
  ASSERT_TRUE(in.facts);
  auto& loads = in.facts->loads;
  const auto text = std::find_if(loads.begin(), loads.end(), [](const auto& s) { return s.executable; });
  ASSERT_NE(text, loads.end());
  ASSERT_TRUE(0x1030 > text->vaddr && 0x1030 < text->vaddr + text->memsz);
  const sframe::LoadSegment second{0x1030, text->vaddr + text->memsz - 0x1030, true};
  text->memsz = 0x1030 - text->vaddr;
  loads.push_back(second);
  const Layout l = layout(in.bytes);
  expect_rule(check(in, Consumer::kKernel, true), ConsumerRule::kKernelFdesSpanSegments, fde_at(l, 1));
}

TEST(KernelRules, SectionInsideOneLoad) {
  // The section said to run one byte past the end of its segment.
  Input in = from_corpus(kV3);
  ASSERT_TRUE(in.facts);
  for (const auto& s : in.facts->loads)
    if (in.facts->section_address >= s.vaddr && in.facts->section_address < s.vaddr + s.memsz)
      in.facts->section_size = s.vaddr + s.memsz - in.facts->section_address + 1;
  expect_rule(check(in, Consumer::kKernel, true), ConsumerRule::kKernelSectionSegment, 0);
}

// ---- glibc 2.42/2.43 sframe-read.c -----------------------------------------

TEST(GlibcRules, NativeByteOrder) {
  Input in = from_corpus(kV2);
  in.bytes = *sframe_test::flip_sframe_byte_order(in.bytes);
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcNativeOrder, 0);
}

TEST(GlibcRules, Version) { expect_rule(check(from_corpus(kV3), Consumer::kGlibc), ConsumerRule::kGlibcVersion, 2); }

TEST(GlibcRules, Flags) {
  Input in = from_corpus(kV2);
  in.bytes[3] |= 0x8;
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcFlags, 3);
}

TEST(GlibcRules, FlagSorted) {
  Input in = from_corpus(kV2);
  in.bytes[3] &= static_cast<std::uint8_t>(~0x1);
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcFlagSorted, 3);
}

TEST(GlibcRules, FdesRightAfterHeader) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  insert(in.bytes, l.fdes, 8);
  put(in.bytes, 20, 4, 8);
  put(in.bytes, 24, 4, get(in.bytes, 24, 4) + 8);
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcFdeOffset, 20);
}

TEST(GlibcRules, FresRightAfterFdes) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  insert(in.bytes, l.fres, 8);
  put(in.bytes, 24, 4, get(in.bytes, 24, 4) + 8);
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcFreOffset, 24);
}

TEST(GlibcRules, FreType) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  in.bytes[info_at(in.bytes, l, 0)] |= 0x3;
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcFreType, info_at(in.bytes, l, 0));
}

TEST(GlibcRules, AtMostThreeDatawords) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  const std::size_t info = fre_at(in.bytes, l, 0, 0) + addr_size(in.bytes, l, 0);
  in.bytes[info] = static_cast<std::uint8_t>((in.bytes[info] & ~0x1e) | (4 << 1));
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcDatawords, info);
}

TEST(GlibcRules, DatawordSizeCode) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  const std::size_t info = fre_at(in.bytes, l, 0, 0) + addr_size(in.bytes, l, 0);
  in.bytes[info] |= 0x60;
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcDatawords, info);
}

TEST(GlibcRules, PcMaskRepSizeNonZero) {
  Input in = from_corpus(kV2Plt);
  const Layout l = layout(in.bytes);
  ASSERT_EQ((in.bytes[info_at(in.bytes, l, 1)] >> 4) & 1, 1) << "FDE 1 is the PC-mask .plt FDE";
  in.bytes[rep_size_at(in.bytes, l, 1)] = 0;
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcRepSize, rep_size_at(in.bytes, l, 1));
}

TEST(GlibcRules, FresInsideFreSubsection) {
  Input in = from_corpus(kV2);
  const Layout l = layout(in.bytes);
  put(in.bytes, fre_off_field(l, 0), 4, l.fre_len + 1);
  expect_rule(check(in, Consumer::kGlibc), ConsumerRule::kGlibcBounds);
}

// ---- GNU libsframe 2.47 sframe.c --------------------------------------------

TEST(LibsframeRules, Version1Refused) {
  expect_rule(check(from_corpus("x86_64-v1-O2/basic.o"), Consumer::kLibsframe), ConsumerRule::kLibsframeVersion, 2);
}

TEST(LibsframeRules, Flags) {
  Input in = from_corpus(kV3);
  in.bytes[3] |= 0x2;  // SFRAME_F_FRAME_POINTER: not a v3 flag
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeFlags, 3);
}

TEST(LibsframeRules, FdeOffsetNotPastFreOffset) {
  // FREs first, then the FDEs: sfh_fdeoff > sfh_freoff.
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  std::vector<std::uint8_t> out(in.bytes.begin(), in.bytes.begin() + static_cast<std::ptrdiff_t>(l.hdr_end));
  out.insert(out.end(), in.bytes.begin() + static_cast<std::ptrdiff_t>(l.fres),
             in.bytes.begin() + static_cast<std::ptrdiff_t>(l.fres + l.fre_len));
  out.insert(out.end(), in.bytes.begin() + static_cast<std::ptrdiff_t>(l.fdes),
             in.bytes.begin() + static_cast<std::ptrdiff_t>(l.fdes + l.num_fdes * l.entry));
  in.bytes = out;
  put(in.bytes, 20, 4, l.fre_len);
  put(in.bytes, 24, 4, 0);
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeOffsets, 20);
}

TEST(LibsframeRules, FreType) {
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  in.bytes[info_at(in.bytes, l, 0)] |= 0x3;
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeFreType, info_at(in.bytes, l, 0));
}

TEST(LibsframeRules, AttributeInsideFreSubsection) {
  Input in = from_corpus(kV3);
  const Layout l = layout(in.bytes);
  put(in.bytes, fre_off_field(l, 0), 4, l.fre_len - 2);
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeBounds);
}

TEST(LibsframeRules, ForeignAuxHeader) {
  Input in = raw_file("raw-sections/gnu-v3-s390x.sframe");
  ASSERT_TRUE(big(in.bytes));
  insert(in.bytes, 28, 4);
  in.bytes[7] = 4;
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeForeignAux, 7);
}

TEST(LibsframeRules, ForeignFreCountsAddUp) {
  Input in = raw_file("raw-sections/gnu-v3-s390x.sframe");
  put(in.bytes, 12, 4, get(in.bytes, 12, 4) + 1);
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeForeignCount, 12);
  // The same section in native order: libsframe does not count.
  in.bytes = *sframe_test::flip_sframe_byte_order(in.bytes);
  ASSERT_FALSE(big(in.bytes));
  const auto r = check(in, Consumer::kLibsframe);
  EXPECT_TRUE(r.accepted()) << list(r);
}

TEST(LibsframeRules, ForeignSharedBlockExceedsFreLen) {
  // In big-endian basic: the FDE with the smallest FRE block made to share
  // the biggest block, sfh_num_fres kept consistent: the walk flips the
  // shared block twice, more bytes than sfh_fre_len holds.
  Input in = from_corpus(kV3);
  in.bytes = *sframe_test::flip_sframe_byte_order(in.bytes);
  const Layout l = layout(in.bytes);
  std::vector<std::size_t> offs;
  for (std::size_t i = 0; i < l.num_fdes; ++i) offs.push_back(get(in.bytes, fre_off_field(l, i), 4));
  std::vector<std::size_t> sorted = offs;
  std::sort(sorted.begin(), sorted.end());
  const auto block = [&](std::size_t i) {
    const auto next = std::upper_bound(sorted.begin(), sorted.end(), offs[i]);
    return (next == sorted.end() ? l.fre_len : *next) - offs[i];
  };
  std::size_t small = 0, large = 0;
  for (std::size_t i = 0; i < l.num_fdes; ++i) {
    if (block(i) < block(small)) small = i;
    if (block(i) > block(large)) large = i;
  }
  ASSERT_LT(block(small), block(large));
  const std::uint64_t n_small = get(in.bytes, attr_at(in.bytes, l, small), 2);
  const std::uint64_t n_large = get(in.bytes, attr_at(in.bytes, l, large), 2);
  put(in.bytes, fre_off_field(l, small), 4, offs[large]);
  put(in.bytes, 12, 4, get(in.bytes, 12, 4) - n_small + n_large);
  const auto r = check(in, Consumer::kLibsframe);
  expect_rule(r, ConsumerRule::kLibsframeForeignLength, 16);
}

TEST(LibsframeRules, ForeignPaddingIsZero) {
  Input in = raw_file("raw-sections/gnu-v3-s390x.sframe");
  in.bytes.push_back(0);
  EXPECT_TRUE(check(in, Consumer::kLibsframe).accepted()) << "zero padding is allowed";
  in.bytes.push_back(7);
  expect_rule(check(in, Consumer::kLibsframe), ConsumerRule::kLibsframeForeignPadding, in.bytes.size() - 1);
}

}  // namespace
