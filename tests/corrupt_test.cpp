// SPDX-License-Identifier: MIT
// Table-driven corruption tests: every row takes a known-good SFrame section
// (hand-written from the specification, one comment per field, in
// support/sframe_bases.hpp), breaks
// exactly one rule, and expects the specific sframe::FormatErrc (and, where it is
// meaningful, the byte offset / FDE index / FRE index) from the step that must
// catch it:
//
//   kParse   Section::parse rejects the bytes.
//   kDecode  needed to decode: validate(kLenient) and validate(kStrict) both
//            report it, and walking the public accessors (fde, fres, row)
//            hits the very same Error.
//   kStrict  a rule of the spec that decoding does not need: validate(kStrict)
//            reports it, validate(kLenient) accepts the section, and the
//            accessors decode everything.
//
// CorruptSmoke then throws deterministic random mutations and every truncation
// of each base at parse + validate + full iteration + the objdump renderer;
// it asserts only that nothing crashes (run it under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "objdump_text.hpp"
#include "support/sframe_bases.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"

namespace sframe {
// Readable gtest output for EXPECT_EQ on errors.
void PrintTo(const Error& e, std::ostream* os) {
  *os << code_name(e.code()) << " @" << e.offset << " value=" << e.value << " fde="
      << (e.fde == kNoIndex ? std::string("-") : std::to_string(e.fde))
      << " fre=" << (e.fre == kNoIndex ? std::string("-") : std::to_string(e.fre));
}
}  // namespace sframe

namespace {

using sframe::FormatErrc;
using sframe::Error;
using sframe::Section;
using sframe::Strictness;
using namespace sframe_test::bases;


// ---------------------------------------------------------------------------
// Mutations: small edits of a section's bytes, in the section's byte order.

struct Buf {
  Bytes b;
  bool big;  // the base's byte order (taken before the mutation)
  void put(std::size_t off, std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i)
      b.at(off + i) = B(v >> (8 * (big ? n - 1 - i : i)));
  }
};
using Mutation = std::function<void(Buf&)>;

Mutation set8(std::size_t off, std::uint64_t v) { return [=](Buf& m) { m.put(off, v, 1); }; }
Mutation set16(std::size_t off, std::uint64_t v) { return [=](Buf& m) { m.put(off, v, 2); }; }
Mutation set32(std::size_t off, std::uint64_t v) { return [=](Buf& m) { m.put(off, v, 4); }; }
Mutation set64(std::size_t off, std::uint64_t v) { return [=](Buf& m) { m.put(off, v, 8); }; }
Mutation orb(std::size_t off, std::uint8_t mask) { return [=](Buf& m) { m.b.at(off) |= mask; }; }
Mutation trunc(std::size_t n) { return [=](Buf& m) { m.b.resize(n); }; }
Mutation append(std::size_t n) { return [=](Buf& m) { m.b.resize(m.b.size() + n, 0); }; }
Mutation erase(std::size_t off, std::size_t n) {
  return [=](Buf& m) { m.b.erase(m.b.begin() + static_cast<std::ptrdiff_t>(off), m.b.begin() + static_cast<std::ptrdiff_t>(off + n)); };
}
Mutation insert(std::size_t off, std::size_t n) {
  return [=](Buf& m) { m.b.insert(m.b.begin() + static_cast<std::ptrdiff_t>(off), n, std::uint8_t{0}); };
}
Mutation all(std::initializer_list<Mutation> ms) {
  return [v = std::vector<Mutation>(ms)](Buf& m) {
    for (const auto& f : v) f(m);
  };
}

Bytes mutated(Base base, const Mutation& mut) {
  const Bytes& good = bytes_of(base);
  Buf m{good, good[0] == 0xde};
  mut(m);
  return m.b;
}

// An exact-size heap copy, so that ASan flags any read past the end.
struct Owned {
  explicit Owned(const Bytes& b) : size(b.size()), p(std::make_unique<std::byte[]>(b.size())) {
    if (size != 0) std::memcpy(p.get(), b.data(), size);
  }
  std::span<const std::byte> span() const { return {p.get(), size}; }
  std::size_t size;
  std::unique_ptr<std::byte[]> p;
};

// Decodes everything through the public accessors; the first error, if any.
std::optional<Error> walk(const Section& s) {
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    auto f = s.fde(i);
    if (!f) return f.error();
    for (const auto& fre : s.fres(*f)) {
      if (!fre) return fre.error();
      if (auto row = s.row(*f, *fre); !row) return row.error();
    }
  }
  return std::nullopt;
}

std::string str(const Error& e) {
  std::ostringstream os;
  sframe::PrintTo(e, &os);
  return os.str();
}

// ---------------------------------------------------------------------------
// The table.

enum class At : std::uint8_t { kParse, kDecode, kStrict };
using enum At;

constexpr std::int64_t X = -1;                 // not checked
constexpr std::int64_t N = sframe::kNoIndex;   // "no FDE/FRE index"

struct Row {
  Row(const char* n, Base b, Mutation m, FormatErrc c, At a, std::int64_t o = X, std::int64_t fd = X, std::int64_t fr = X)
      : name(n), base(b), mutate(std::move(m)), code(c), at(a), off(o), fde(fd), fre(fr) {}
  const char* name;
  Base base;
  Mutation mutate;
  FormatErrc code;
  At at;
  std::int64_t off, fde, fre;
};

void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

using enum FormatErrc;

const std::vector<Row>& rows() {
  static const std::vector<Row> kRows = {
    // name                          base       mutation                       expected                   at       offset fde fre
    // --- Header: truncation at every field boundary -------------------------------------------------------
    {"TruncEmpty",                   kV2,       trunc(0),                      kTruncatedHeader,          kParse,  0},
    {"TruncInMagic",                 kV3S390x,  trunc(1),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterMagic",              kV1,       trunc(2),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterVersion",            kV3Amd64,  trunc(3),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterFlags",              kV3Arm64,  trunc(4),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterAbi",                kV3S390x,  trunc(5),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterFixedFp",            kV2,       trunc(6),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterFixedRa",            kV1,       trunc(7),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterAuxLen",             kV3Amd64,  trunc(8),                      kTruncatedHeader,          kParse,  0},
    {"TruncAfterNumFdes",            kV3Arm64,  trunc(12),                     kTruncatedHeader,          kParse,  0},
    {"TruncAfterNumFres",            kV3S390x,  trunc(16),                     kTruncatedHeader,          kParse,  0},
    {"TruncAfterFreLen",             kV2,       trunc(20),                     kTruncatedHeader,          kParse,  0},
    {"TruncAfterFdeOff",             kV1,       trunc(24),                     kTruncatedHeader,          kParse,  0},
    {"TruncInFreOff",                kV3Amd64,  trunc(27),                     kTruncatedHeader,          kParse,  0},
    // --- Header values and extents ------------------------------------------------------------------------
    {"TruncAtHeaderEnd",             kV2,       trunc(28),                     kFdeTablePastEnd,          kParse,  20},
    {"TruncInFdeTable",              kV3Amd64,  trunc(50),                     kFdeTablePastEnd,          kParse,  20},
    {"TruncInFreSection",            kV3Arm64,  trunc(90),                     kFreSectionPastEnd,        kParse,  24},
    {"TruncLastByte",                kV1,       trunc(51),                     kFreSectionPastEnd,        kParse,  24},
    {"TruncLastByteBE",              kV3S390x,  trunc(97),                     kFreSectionPastEnd,        kParse,  24},
    {"BadMagic",                     kV2,       set8(1, 0xdf),                 kBadMagic,                 kParse,  0},
    {"MagicZero",                    kV3S390x,  set16(0, 0),                   kBadMagic,                 kParse,  0},
    {"Version0",                     kV2,       set8(2, 0),                    kBadVersion,               kParse,  2},
    {"Version4",                     kV3Amd64,  set8(2, 4),                    kBadVersion,               kParse,  2},
    {"Abi0",                         kV2,       set8(4, 0),                    kBadAbi,                   kParse,  4},
    {"Abi5",                         kV3Arm64,  set8(4, 5),                    kBadAbi,                   kParse,  4},
    {"Abi4S390xInV1",                kV1,       set8(4, 4),                    kBadAbi,                   kParse,  4},
    {"AuxHeaderPastEnd",             kV2,       set8(7, 0xff),                 kAuxHeaderPastEnd,         kParse,  7},
    {"AuxHeaderShiftsFresPastEnd",   kV3Arm64,  set8(7, 4),                    kFreSectionPastEnd,        kParse,  24},
    {"NumFdesTooLarge",              kV2,       set32(8, 3),                   kFdeTablePastEnd,          kParse,  20},
    {"NumFdesHuge",                  kV3S390x,  set32(8, 0xffffffff),          kFdeTablePastEnd,          kParse,  20},
    {"FdeOffPastEnd",                kV3Arm64,  set32(20, 1000),               kFdeTablePastEnd,          kParse,  20},
    {"FreOffPastEnd",                kV2,       set32(24, 100),                kFreSectionPastEnd,        kParse,  24},
    {"FreOffHuge",                   kV1,       set32(24, 0xffffffff),         kFreSectionPastEnd,        kParse,  24},
    {"FreLenPastEnd",                kV3Amd64,  set32(16, 47),                 kFreSectionPastEnd,        kParse,  24},
    {"FreLenHuge",                   kV3S390x,  set32(16, 0xffffffff),         kFreSectionPastEnd,        kParse,  24},
    // --- FDEs: decoding ---------------------------------------------------------------------------------------
    {"V1FreOffPastFreSection",       kV1,       set32(36, 8),                  kFreOffsetPastEnd,         kDecode, 36, 0, N},
    {"V2FreOffPastFreSection",       kV2,       set32(56, 18),                 kFreOffsetPastEnd,         kDecode, 56, 1, N},
    {"V3FreOffPastFreSection",       kV3Arm64,  set32(40, 40),                 kFreOffsetPastEnd,         kDecode, 40, 0, N},
    {"V3AttrTruncated",              kV3Amd64,  set32(56, 44),                 kFdeAttrTruncated,         kDecode, 104, 1, N},
    {"V3AttrAtFreSectionEnd",        kV3S390x,  set32(56, 38),                 kFdeAttrTruncated,         kDecode, 98, 1, N},
    {"V1FreType4",                   kV1,       set8(44, 0x04),                kBadFreType,               kDecode, 44, 0, N},
    {"V2FreType3",                   kV2,       set8(44, 0x03),                kBadFreType,               kDecode, 44, 0, N},
    {"V3FreType15",                  kV3Arm64,  set8(84, 0x0f),                kBadFreType,               kDecode, 84, 1, N},
    {"V3FdeType2",                   kV3Amd64,  set8(63, 0x02),                kBadFdeType,               kDecode, 63, 0, N},
    {"V3FdeType31",                  kV3S390x,  set8(84, 0x1f),                kBadFdeType,               kDecode, 84, 1, N},
    // --- FREs: decoding ---------------------------------------------------------------------------------------
    {"V1NumFresPastFreSection",      kV1,       set32(40, 3),                  kFreTruncated,             kDecode, 52, 0, 2},
    {"FreStartAddrTruncated",        kV3S390x,  set32(16, 32),                 kFreTruncated,             kDecode, 91, 1, 1},
    {"FreInfoTruncated",             kV3S390x,  set32(16, 33),                 kFreTruncated,             kDecode, 91, 1, 1},
    {"FreInfoTruncatedAddr1",        kV3Amd64,  set32(16, 33),                 kFreTruncated,             kDecode, 92, 1, 2},
    {"FreWordsTruncated2B",          kV3Amd64,  set32(16, 45),                 kFreTruncated,             kDecode, 92, 1, 2},
    {"FreWordsTruncated1B",          kV3Arm64,  set32(16, 38),                 kFreTruncated,             kDecode, 91, 1, 1},
    {"FreLenTooSmall",               kV2,       set32(16, 16),                 kFreTruncated,             kDecode, 82, 1, 1},
    {"DatawordSize3",                kV2,       set8(72, 0x65),                kBadDatawordSize,          kDecode, 72, 0, 1},
    {"DatawordSize3BE",              kV3S390x,  orb(74, 0x60),                 kBadDatawordSize,          kDecode, 74, 0, 2},
    // --- FRE data-word counts (0 = RA undefined is valid everywhere; see CorruptAccepted) -------------------
    {"V1Amd64Count3",                kV1,       set8(46, 0x07),                kBadDatawordCount,         kDecode, 45, 0, 0},
    {"V2Amd64Count3",                kV2,       set8(72, 0x07),                kBadDatawordCount,         kDecode, 71, 0, 1},
    {"V2Amd64Count4",                kV2,       set8(76, 0x08),                kBadDatawordCount,         kDecode, 75, 0, 2},
    {"V2Amd64FixedFpCount2",         kV2,       set8(5, 0xf0),                 kBadDatawordCount,         kDecode, 71, 0, 1},
    {"V3Amd64Count3",                kV3Amd64,  set8(71, 0x27),                kBadDatawordCount,         kDecode, 69, 0, 1},
    {"V3Arm64Count4",                kV3Arm64,  set8(69, 0xc9),                kBadDatawordCount,         kDecode, 68, 0, 1},
    {"V3Arm64Count15",               kV3Arm64,  set8(66, 0x1f),                kBadDatawordCount,         kDecode, 65, 0, 0},
    {"V3S390xCount4",                kV3S390x,  set8(69, 0x09),                kBadDatawordCount,         kDecode, 68, 0, 1},
    {"FlexCount1",                   kV3Amd64,  set8(82, 0x03),                kBadDatawordCount,         kDecode, 81, 1, 0},
    {"FlexCount3PaddingNoFp",        kV3Amd64,  set8(86, 0x07),                kBadDatawordCount,         kDecode, 85, 1, 1},
    {"FlexCount3PaddingNoFpBE",      kV3S390x,  set8(88, 0x07),                kBadDatawordCount,         kDecode, 86, 1, 0},
    {"FlexCount3HalfRaPair",         kV3Arm64,  set8(92, 0x07),                kBadDatawordCount,         kDecode, 91, 1, 1},
    {"FlexCount4PaddingHalfFp",      kV3Amd64,  set8(86, 0x09),                kBadDatawordCount,         kDecode, 85, 1, 1},
    {"FlexCount6PaddingThenThree",   kV3Arm64,  set8(95, 0x00),                kBadDatawordCount,         kDecode, 91, 1, 1},
    {"FlexCount7",                   kV3Amd64,  set8(82, 0x0f),                kBadDatawordCount,         kDecode, 81, 1, 0},
    {"FlexCount15",                  kV3Amd64,  set8(82, 0x1f),                kBadDatawordCount,         kDecode, 81, 1, 0},
    // --- FLEX control words ---------------------------------------------------------------------------------
    {"FlexCfaCtlNoRegP",             kV3Amd64,  set8(83, 0x38),                kBadFlexControl,           kDecode, 81, 1, 0},
    {"FlexCfaCtlPaddingBE",          kV3S390x,  set8(89, 0x00),                kBadFlexControl,           kDecode, 86, 1, 0},
    {"FlexCfaCtlDerefNoReg2B",       kV3Amd64,  set16(94, 0x3a),               kBadFlexControl,           kDecode, 92, 1, 2},
    {"FlexFpCtlZeroAfterPadding",    kV3Amd64,  set8(90, 0x00),                kBadFlexControl,           kDecode, 85, 1, 1},
    {"FlexFpCtlZeroAfterRaPair",     kV3Arm64,  set8(97, 0x00),                kBadFlexControl,           kDecode, 91, 1, 1},
    {"FlexFpCtlZero2B",              kV3Amd64,  set16(102, 0),                 kBadFlexControl,           kDecode, 92, 1, 2},
    // --- Strict only: flags and unused bits -------------------------------------------------------------------
    {"V1UndefinedFlag0x4",           kV1,       orb(3, 0x04),                  kUndefinedFlags,           kStrict, 3},
    {"V2UndefinedFlag0x8",           kV2,       orb(3, 0x08),                  kUndefinedFlags,           kStrict, 3},
    {"V3UndefinedFlag0x2",           kV3Amd64,  orb(3, 0x02),                  kUndefinedFlags,           kStrict, 3},
    {"V3UndefinedFlag0x80",          kV3S390x,  orb(3, 0x80),                  kUndefinedFlags,           kStrict, 3},
    {"V1InfoBit7",                   kV1,       orb(44, 0x80),                 kUnusedBitsSet,            kStrict, 44, 0, N},
    {"V2InfoBit6",                   kV2,       orb(44, 0x40),                 kUnusedBitsSet,            kStrict, 44, 0, N},
    {"V2InfoBit7",                   kV2,       orb(64, 0x80),                 kUnusedBitsSet,            kStrict, 64, 1, N},
    {"V3InfoBit6",                   kV3Arm64,  orb(62, 0x40),                 kUnusedBitsSet,            kStrict, 62, 0, N},
    {"V3Info2Bit5",                  kV3Amd64,  orb(79, 0x20),                 kUnusedBitsSet,            kStrict, 79, 1, N},
    {"V3Info2Bit7BE",                kV3S390x,  orb(63, 0x80),                 kUnusedBitsSet,            kStrict, 63, 0, N},
    // FLEX control words (v3 §2.4.2): bit 2 is unused; regnum only with reg_p.
    {"FlexCtlUnusedBit",             kV3Amd64,  orb(90, 0x04),                 kUnusedBitsSet,            kStrict, 90, 1, 1},
    {"FlexCtlCfaUnusedBit",          kV3Amd64,  orb(83, 0x04),                 kUnusedBitsSet,            kStrict, 83, 1, 0},
    {"FlexCtlRegnumWithoutRegP2B",   kV3Amd64,  orb(98, 0x28),                 kUnusedBitsSet,            kStrict, 98, 1, 2},
    // --- Strict only: FDE fields ----------------------------------------------------------------------------
    {"V2PcMaskRepSize0",             kV2,       set8(65, 0),                   kZeroRepSize,              kStrict, 65, 1, N},
    {"V3PcMaskRepSize0",             kV3Arm64,  orb(62, 0x10),                 kZeroRepSize,              kStrict, 64, 0, N},
    {"V2FuncRangeOverflow",          kV2,       set32(48, 0xffffffc4),         kFuncRangeOverflow,        kStrict, 48, 1, N},
    {"V3FuncRangeOverflow",          kV3Amd64,  set64(28, 0xffffffffffffffc0), kFuncRangeOverflow,        kStrict, 28, 0, N},
    // --- Strict only: FRE order and range ---------------------------------------------------------------------
    {"FreStartRepeated",             kV2,       set8(75, 1),                   kFreStartNotIncreasing,    kStrict, 75, 0, 2},
    {"FreStartDecreasingBE",         kV3S390x,  set8(73, 5),                   kFreStartNotIncreasing,    kStrict, 73, 0, 2},
    {"FreStartRepeatedAddr2",        kV3Amd64,  set16(69, 0),                  kFreStartNotIncreasing,    kStrict, 69, 0, 1},
    {"FreStartAtFuncEnd",            kV2,       set8(75, 0x40),                kFreStartOutsideFunction,  kStrict, 75, 0, 2},
    {"FreStartPastRepBlock",         kV2,       set8(82, 0x10),                kFreStartOutsideFunction,  kStrict, 82, 1, 1},
    {"FreStartPastFuncAddr2",        kV3Amd64,  set16(69, 0x100),              kFreStartOutsideFunction,  kStrict, 69, 0, 1},
    {"FreStartPastFuncBE",           kV3S390x,  set16(91, 0x30),               kFreStartOutsideFunction,  kStrict, 91, 1, 1},
    // --- Strict only: totals and FRE ownership ----------------------------------------------------------------
    {"NumFresTooBig",                kV2,       set32(12, 6),                  kFreCountMismatch,         kStrict, 12},
    {"NumFresTooSmall",              kV3Arm64,  set32(12, 3),                  kFreCountMismatch,         kStrict, 12},
    {"FreLenTooBig",                 kV2,       all({set32(16, 18), append(1)}), kFreLenMismatch,         kStrict, 16},
    {"FreLenGapBetweenFdes",         kV3Amd64,  all({insert(76, 1), set32(56, 17), set32(16, 47)}), kFreLenMismatch, kStrict, 16},
    {"FdesShareFres",                kV2,       set32(56, 0),                  kFdeFresOverlap,           kStrict, 68, 1},
    {"FdesOverlapFres",              kV2,       set32(56, 3),                  kFdeFresOverlap,           kStrict, 71, 1},
    // FDE 1 shares FDE 0's whole block (attribute and FREs), which kStrict
    // accepts (section.hpp); its own block is then counted by no FDE.
    {"V3FdesShareAttr",              kV3Arm64,  set32(56, 0),                  kFreCountMismatch,         kStrict, 12},
    // --- Strict only: sub-sections and FDE order --------------------------------------------------------------
    {"FdeTableOverlapsFres",         kV2,       all({erase(66, 2), set32(24, 38)}), kSubsectionsOverlap,  kStrict, 20},
    {"FdesUnsorted",                 kV2,       set32(48, 0),                  kFdesUnsorted,             kStrict, 48, 1, N},
    {"FdesUnsortedBE",               kV3S390x,  set64(44, 0),                  kFdesUnsorted,             kStrict, 44, 1, N},
    {"FuncsOverlap",                 kV2,       set32(32, 0x41),               kFdesOverlap,              kStrict, 48, 1, N},
    {"FuncsOverlapV3",               kV3Amd64,  set64(44, 0x20d3),             kFdesOverlap,              kStrict, 44, 1, N},
    {"FuncsSameStart",               kV3Arm64,  set64(44, 0x3fd4),             kFdesOverlap,              kStrict, 44, 1, N},
  };
  return kRows;
}

void expect_error(const Error& e, const Row& r) {
  EXPECT_EQ(e.code(), r.code) << "got " << str(e) << ", want " << sframe::code_name(r.code);
  if (r.off != X) {
    EXPECT_EQ(e.offset, static_cast<std::uint64_t>(r.off)) << str(e);
  }
  if (r.fde != X) {
    EXPECT_EQ(e.fde, static_cast<std::uint32_t>(r.fde)) << str(e);
  }
  if (r.fre != X) {
    EXPECT_EQ(e.fre, static_cast<std::uint32_t>(r.fre)) << str(e);
  }
}

// Every base is known-good: it parses, passes strict validation and decodes
// to what its comments say.
TEST(CorruptBase, BasesAreValid) {
  for (Base b : kAllBases) {
    SCOPED_TRACE(name_of(b));
    const Owned o(bytes_of(b));
    auto s = Section::parse(o.span());
    ASSERT_TRUE(s) << str(s.error());
    EXPECT_EQ(s->used_size(), o.size);
    auto strict = sframe::validate(*s, Strictness::kStrict);
    EXPECT_TRUE(strict) << str(strict.error());
    EXPECT_FALSE(walk(*s).has_value());
    std::uint32_t fres = 0;
    for (std::uint32_t i = 0; i < s->num_fdes(); ++i)
      for (const auto& fre : s->fres(*s->fde(i))) fres += fre.has_value();
    EXPECT_EQ(fres, s->header().num_fres);
  }
}

TEST(CorruptBase, BasesDecodeAsDocumented) {
  using sframe::FdeType;
  using sframe::Rule;
  const auto row_of = [](const Section& s, std::uint32_t fde, std::uint32_t fre) {
    auto f = s.fde(fde);
    std::uint32_t k = 0;
    for (const auto& r : s.fres(*f))
      if (k++ == fre) return *s.row(*f, *r);
    ADD_FAILURE() << "no FRE " << fre;
    return sframe::FrameRow{};
  };
  // The raw view of the same FRE.
  const auto wire_of = [](const Section& s, std::uint32_t fde, std::uint32_t fre) {
    auto f = s.fde(fde);
    std::uint32_t k = 0;
    for (const auto& r : s.fres(*f))
      if (k++ == fre) return *s.wire_row(*f, *r);
    ADD_FAILURE() << "no FRE " << fre;
    return sframe::WireRow{};
  };
  using Slot = sframe::WireRow::Slot;
  {
    const Owned o(kSecV2);
    auto s = *Section::parse(o.span());
    EXPECT_EQ(s.fde(0)->start_pc, 0x1000u);
    EXPECT_EQ(s.fde(1)->start_pc, 0x1040u);
    EXPECT_EQ(s.fde(1)->pc_type, sframe::PcType::kMask);
    const auto r = row_of(s, 0, 2);
    EXPECT_EQ(r.cfa.regnum, 6);  // FP-based
    EXPECT_EQ(r.cfa.offset, 16);
    // RA: no word, the header's fixed offset (CFA - 8) applied.
    EXPECT_EQ(wire_of(s, 0, 2).ra, Slot::kNone);
    EXPECT_EQ(r.ra.kind, Rule::Kind::kExpr);
    EXPECT_EQ(r.ra.base, Rule::Base::kCfa);
    EXPECT_TRUE(r.ra.deref);
    EXPECT_EQ(r.ra.offset, -8);
    EXPECT_EQ(r.fp.offset, -16);
  }
  {
    const Owned o(kSecV3Amd64);
    auto s = *Section::parse(o.span());
    EXPECT_EQ(s.fde(0)->start_pc, 0x2000u);
    EXPECT_EQ(s.fde(1)->start_pc, 0x2100u);
    EXPECT_EQ(s.fde(1)->fde_type, FdeType::kFlex);
    const auto r = row_of(s, 1, 1);
    EXPECT_EQ(r.cfa.regnum, 10);
    EXPECT_TRUE(r.cfa.deref);
    EXPECT_EQ(r.cfa.offset, -8);
    // A FLEX padding word for the RA: the header's fixed offset.
    EXPECT_EQ(wire_of(s, 1, 1).ra, Slot::kPadding);
    EXPECT_EQ(wire_of(s, 1, 1).fp, Slot::kWord);
    EXPECT_EQ(wire_of(s, 1, 1).fp_word, 3);
    EXPECT_EQ(r.ra.kind, Rule::Kind::kExpr);
    EXPECT_EQ(r.ra.base, Rule::Base::kCfa);
    EXPECT_TRUE(r.ra.deref);
    EXPECT_EQ(r.ra.offset, -8);
    EXPECT_EQ(r.fp.regnum, 6);
    EXPECT_TRUE(r.fp.deref);
    EXPECT_EQ(row_of(s, 1, 2).fp.offset, -16);
  }
  {
    const Owned o(kSecV3Arm64);
    auto s = *Section::parse(o.span());
    EXPECT_EQ(s.fde(0)->pauth_key, sframe::PauthKey::kB);
    const auto r = row_of(s, 0, 1);
    EXPECT_TRUE(r.ra_mangled);
    EXPECT_EQ(r.ra.offset, -8);
    EXPECT_EQ(r.fp.offset, -16);
  }
  {
    const Owned o(kSecV3S390x);
    auto s = *Section::parse(o.span());
    EXPECT_TRUE(s.big_endian());
    EXPECT_EQ(s.fde(0)->start_pc, 0x8000u);
    EXPECT_EQ(s.fde(1)->start_pc, 0x8060u);
    EXPECT_EQ(row_of(s, 0, 0).cfa.offset, 160);
    EXPECT_EQ(row_of(s, 0, 1).cfa.offset, 320);
    // SFRAME_FRE_RA_OFFSET_INVALID, no fixed RA offset on s390x: unchanged.
    EXPECT_EQ(wire_of(s, 0, 2).ra, Slot::kPadding);
    EXPECT_EQ(row_of(s, 0, 2).ra.kind, Rule::Kind::kUnchanged);
    EXPECT_EQ(row_of(s, 0, 2).fp.offset, -72);
    EXPECT_EQ(row_of(s, 1, 1).ra.regnum, 24);
  }
}

class CorruptTable : public ::testing::TestWithParam<Row> {};

TEST_P(CorruptTable, DetectsCorruption) {
  const Row& r = GetParam();
  const Bytes bad = mutated(r.base, r.mutate);
  ASSERT_NE(bad, bytes_of(r.base)) << "the mutation changed nothing";
  const Owned o(bad);
  auto s = Section::parse(o.span());
  if (r.at == kParse) {
    ASSERT_FALSE(s) << "parse accepted the corrupt section";
    expect_error(s.error(), r);
    return;
  }
  ASSERT_TRUE(s) << "parse failed early: " << str(s.error());
  auto strict = sframe::validate(*s, Strictness::kStrict);
  ASSERT_FALSE(strict) << "strict validation accepted the corrupt section";
  expect_error(strict.error(), r);
  auto lenient = sframe::validate(*s, Strictness::kLenient);
  const std::optional<Error> walked = walk(*s);
  if (r.at == kDecode) {
    ASSERT_FALSE(lenient) << "lenient validation accepted an undecodable section";
    EXPECT_EQ(lenient.error(), strict.error());
    ASSERT_TRUE(walked.has_value()) << "the accessors decoded everything";
    EXPECT_EQ(*walked, lenient.error());
  } else {
    EXPECT_TRUE(lenient) << "strict-only rule rejected in lenient mode: " << str(lenient.error());
    EXPECT_FALSE(walked.has_value()) << "accessors failed: " << str(*walked);
  }
}

INSTANTIATE_TEST_SUITE_P(Corrupt, CorruptTable, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& p) { return std::string(p.param.name); });

TEST(CorruptTableMeta, EnoughDistinctRows) {
  EXPECT_GE(rows().size(), 45u);
  std::vector<Bytes> seen;
  for (const Row& r : rows()) {
    const Bytes b = mutated(r.base, r.mutate);
    for (const Bytes& other : seen) EXPECT_NE(b, other) << r.name << " duplicates another row";
    seen.push_back(b);
  }
}

// ---------------------------------------------------------------------------
// Legal variants near the corruptions above: they must pass strict validation.

struct Variant {
  const char* name;
  Base base;
  Mutation mutate;
};

TEST(CorruptAccepted, LegalVariantsPassStrict) {
  const Variant variants[] = {
      // Errata 2: zero data words = RA undefined (the last FRE, with fre_len adjusted).
      {"DefaultCount0RaUndefined", kV2, all({set8(83, 0x01), trunc(84), set32(16, 16)})},
      {"FlexCount0RaUndefined", kV3Arm64, all({set8(92, 0x01), trunc(93), set32(16, 33)})},
      {"V3SignalFrameBit", kV3Arm64, orb(62, 0x80)},
      {"V1FramePointerFlag", kV1, orb(3, 0x02)},
      {"V2FramePointerFlag", kV2, orb(3, 0x02)},
      {"UnsortedWithoutSortedFlag", kV2, all({set8(3, 0x04), set32(48, 0)})},
      {"OverlapWithoutSortedFlag", kV3Amd64, all({set8(3, 0x04), set64(44, 0x20d3)})},
      {"TrailingPadding", kV3S390x, append(8)},
      {"AuxHeader", kV3Arm64, all({insert(28, 4), set8(7, 4)})},
      {"FreStartLastInFunction", kV2, set8(75, 0x3f)},
      {"FreStartLastInRepBlock", kV2, set8(82, 0x0f)},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const Owned o(mutated(v.base, v.mutate));
    auto s = Section::parse(o.span());
    ASSERT_TRUE(s) << str(s.error());
    auto strict = sframe::validate(*s, Strictness::kStrict);
    EXPECT_TRUE(strict) << str(strict.error());
    EXPECT_FALSE(walk(*s).has_value());
  }
  // The zero-word FRE decodes as "RA undefined".
  const Owned o(mutated(kV2, all({set8(83, 0x01), trunc(84), set32(16, 16)})));
  auto s = *Section::parse(o.span());
  auto f = *s.fde(1);
  std::optional<sframe::Fre> last;
  for (const auto& fre : s.fres(f)) last = *fre;
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(s.row(f, *last)->outermost());
  EXPECT_EQ(s.row(f, *last)->ra.kind, sframe::Rule::Kind::kUndefined);
}

TEST(CorruptAccepted, FdeIndexOutOfRange) {
  const Owned o(kSecV2);
  auto s = *Section::parse(o.span());
  auto f = s.fde(2);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), kFdeIndexOutOfRange);
  EXPECT_EQ(f.error().fde, 2u);
}

// A strictly valid s390x section whose CFA data word is 0x0fffffff (4 bytes):
// decoding it (stored * 8 + 160, in row() and find()) must not be undefined
// behaviour. Run in a child process so that a sanitizer abort fails only this
// test.
TEST(CorruptBugs, S390xLargeCfaWordDecodesWithoutOverflow) {
  const Bytes b = mutated(kV3S390x, all({set8(74, 0x43),          // FDE 0 FRE 2: SP, 1 word of 4B
                                        set32(75, 0x0fffffff),   // CFA word
                                        erase(79, 2),            // drop the rest of the old words
                                        set32(56, 19),           // FDE 1 moves back 2 bytes
                                        set32(16, 36)}));        // sfh_fre_len
  const Owned o(b);
  auto s = Section::parse(o.span());
  ASSERT_TRUE(s);
  ASSERT_TRUE(sframe::validate(*s, Strictness::kStrict));
  EXPECT_EXIT(
      {
        const bool ok = !walk(*s).has_value() && sframe::find(*s, 0x8010).has_value();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// Random-mutation smoke: nothing may crash; results are only counted.

struct Tally {
  std::uint64_t inputs = 0, parse_rejected = 0, lenient_rejected = 0, strict_rejected = 0;
  // Broken contracts: lenient-valid but an accessor fails; strict-valid but not lenient-valid.
  std::uint64_t lenient_but_undecodable = 0, strict_but_not_lenient = 0;
};

// Everything a consumer might do with untrusted bytes.
void exercise(const Bytes& b, Tally& t) {
  ++t.inputs;
  const Owned o(b);
  auto s = Section::parse(o.span());
  if (!s) {
    ++t.parse_rejected;
    return;
  }
  const bool lenient_ok = static_cast<bool>(sframe::validate(*s, Strictness::kLenient));
  const bool strict_ok = static_cast<bool>(sframe::validate(*s, Strictness::kStrict));
  t.lenient_rejected += !lenient_ok;
  t.strict_rejected += !strict_ok;
  t.strict_but_not_lenient += strict_ok && !lenient_ok;
  t.lenient_but_undecodable += lenient_ok && walk(*s).has_value();
  for (std::uint32_t i = 0; i <= s->num_fdes(); ++i) {  // one past the end on purpose
    auto f = s->fde(i);
    if (!f) continue;
    for (const auto& fre : s->fres(*f)) {
      if (!fre) break;
      (void)s->row(*f, *fre);
    }
  }
  if (lenient_ok) {
    std::string out;
    (void)sframe::tools::append_section(out, *s, ".sframe");
  }
  // PC lookups at every function's edges, by search and through both indexes.
  auto index = sframe::FdeIndex::build(*s);
  auto rows = sframe::RowIndex::build(*s);
  for (std::uint32_t i = 0; i < s->num_fdes(); ++i) {
    auto f = s->fde(i);
    if (!f) continue;
    for (std::uint64_t pc : {f->start_pc - 1, f->start_pc, f->start_pc + f->size / 2, f->start_pc + f->size - 1,
                             f->start_pc + f->size}) {
      (void)sframe::find(*s, pc);
      if (index) (void)index->find(pc);
      if (rows) (void)rows->find(pc);
    }
  }
}

class CorruptSmoke : public ::testing::TestWithParam<Base> {};

TEST_P(CorruptSmoke, RandomMutationsAndTruncationsDoNotCrash) {
  const Base base = GetParam();
  const Bytes& good = bytes_of(base);
  constexpr int kMutations = 20000;
  std::mt19937 rng(0x5f3759dfu + static_cast<unsigned>(base));
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  static constexpr std::uint8_t kBytes[] = {0x00, 0x01, 0x02, 0x03, 0x0f, 0x10, 0x1f, 0x20,
                                            0x40, 0x60, 0x7f, 0x80, 0xc0, 0xe0, 0xfe, 0xff};
  static constexpr std::uint32_t kWords[] = {0, 1, 2, 5, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff,
                                             0x80000000, 0xfffffff0, 0xffffffff};
  Tally mut;
  for (int i = 0; i < kMutations; ++i) {
    Bytes b = good;
    const std::size_t edits = 1 + pick(4);
    for (std::size_t e = 0; e < edits; ++e) {
      // Three edits in four land after the 28-byte header, where most of the decoding is.
      const std::size_t at = pick(4) != 0 ? 28 + pick(b.size() - 28) : pick(28);
      switch (pick(4)) {
        case 0: b[at] = static_cast<std::uint8_t>(rng()); break;
        case 1: b[at] ^= static_cast<std::uint8_t>(1u << pick(8)); break;
        case 2: b[at] = kBytes[pick(std::size(kBytes))]; break;
        default: {  // a 32-bit value in either byte order
          const std::uint32_t w = kWords[pick(std::size(kWords))];
          const bool big = rng() & 1;
          for (unsigned k = 0; k < 4 && at + k < b.size(); ++k)
            b[at + k] = B(w >> (8 * (big ? 3 - k : k)));
        }
      }
    }
    if (pick(10) == 0) b.resize(pick(b.size() + 8), 0);  // sometimes also cut or extend
    exercise(b, mut);
  }
  Tally cut;
  for (std::size_t n = 0; n <= good.size(); ++n) exercise(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)), cut);
  // Every proper prefix is rejected at parse; the whole base is accepted.
  EXPECT_EQ(cut.parse_rejected, good.size());
  // The documented contracts of validate(): kLenient accepts only what every
  // accessor decodes, and kStrict only what kLenient accepts.
  EXPECT_EQ(mut.lenient_but_undecodable, 0u);
  EXPECT_EQ(mut.strict_but_not_lenient, 0u);
  std::cout << "[ smoke    ] " << name_of(base) << ": " << mut.inputs << " random mutations: rejected by parse "
            << mut.parse_rejected << ", by lenient validate " << mut.lenient_rejected << ", by strict validate "
            << mut.strict_rejected << " (accepted strict: "
            << mut.inputs - mut.parse_rejected - mut.strict_rejected << "); " << cut.inputs
            << " truncations: rejected by parse " << cut.parse_rejected << "\n";
}

INSTANTIATE_TEST_SUITE_P(Corrupt, CorruptSmoke, ::testing::ValuesIn(kAllBases),
                         [](const ::testing::TestParamInfo<Base>& p) { return std::string(name_of(p.param)); });

}  // namespace
