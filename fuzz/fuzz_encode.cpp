// SPDX-License-Identifier: MIT
// libFuzzer target: encoder properties (check_encode.hpp). The input is read
// as a recipe for a model: header fields, then functions with their rows;
// every enum and size may come out of range, so invalid models reach the
// encoder too (they must be rejected with an error). The model is encoded
// as v2 and v3, in both byte orders, with both layouts, and with the size
// options (check_size_options).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check_encode.hpp"
#include "reader.hpp"

namespace {

using namespace sframe;
using sframe::fuzz::Reader;

std::int32_t offset(Reader& in) {
  switch (in.below(4)) {
    case 0: return static_cast<std::int8_t>(in.u8());
    case 1: return static_cast<std::int16_t>(in.u16());
    case 2: return static_cast<std::int32_t>(in.u32());
    default: return 8 * static_cast<std::int8_t>(in.u8());  // the usual stack slots
  }
}

std::uint16_t regnum(Reader& in, const AbiRegs& regs) {
  switch (in.below(4)) {
    case 0: return regs.sp;
    case 1: return regs.fp;
    case 2: return in.u8() & 31;
    default: return in.u16();
  }
}

Rule expr(Rule::Base base, std::uint16_t reg, std::int32_t off, bool deref) {
  return make_rule(base, base == Rule::Base::kRegister ? reg : std::uint16_t{0}, off, deref);
}

// A saved-register (RA or FP) rule in its canonical form.
Rule saved_rule(Reader& in, const AbiRegs& regs, std::int8_t fixed) {
  Rule r;
  switch (in.below(7)) {
    case 0: return r;  // unchanged
    case 1: return fixed != 0 ? expr(Rule::Base::kCfa, 0, fixed, true) : r;  // what the header gives
    case 2: r.kind = Rule::Kind::kUndefined; return r;
    case 3: return expr(Rule::Base::kCfa, 0, fixed != 0 && in.flag() ? fixed : offset(in), true);
    case 4: return expr(Rule::Base::kRegister, regnum(in, regs), offset(in), in.flag());
    case 5: return expr(Rule::Base::kCfa, 0, offset(in), false);
    default: return expr(Rule::Base::kCfa, 0, offset(in), true);  // saved at CFA + offset
  }
}

FrameRow row(Reader& in, const AbiRegs& regs, const SectionSpec& s) {
  FrameRow r;
  const std::uint8_t b = in.u8();
  r.ra_mangled = b & 0x80;
  if ((b & 0x7) == 0) {
    r.cfa.kind = Rule::Kind::kUndefined;
    r.ra.kind = Rule::Kind::kUndefined;
    return r;
  }
  r.cfa = expr(Rule::Base::kRegister, regnum(in, regs), offset(in), (b & 0x8) && (b & 0x10));
  r.ra = saved_rule(in, regs, s.cfa_fixed_ra_offset);
  r.fp = saved_rule(in, regs, s.cfa_fixed_fp_offset);
  return r;
}

SectionSpec model(Reader& in) {
  SectionSpec s;
  const std::uint8_t h = in.u8();
  s.version = (h & 0x30) == 0x30 ? static_cast<Version>(h & 0x7) : (h & 1) ? Version::kV3 : Version::kV2;
  const std::uint8_t a = in.u8();
  s.abi = static_cast<Abi>(a < 0xf0 ? 1 + a % 4 : a & 0xf);
  s.big_endian = abi_big_endian(s.abi);
  const AbiRegs regs = is_known_abi(static_cast<std::uint8_t>(s.abi), Version::kV3) ? abi_regs(s.abi) : AbiRegs{7, 6};
  static constexpr std::int8_t kFixed[] = {0, -8, -16, 8};
  const std::uint8_t fx = in.u8();
  s.cfa_fixed_ra_offset = (fx & 0x40) ? static_cast<std::int8_t>(in.u8()) : kFixed[fx & 3];
  s.cfa_fixed_fp_offset = (fx & 0x80) ? static_cast<std::int8_t>(in.u8()) : kFixed[(fx >> 2) & 3];
  s.section_address = (fx & 0x20) ? in.u64() : std::uint64_t{in.u16()} << 8;
  s.flags = in.u8();
  if (!(s.flags & 0x80)) s.flags &= defined_flags(s.version);
  const std::uint32_t nfun = in.below(12);
  std::uint64_t pc = s.section_address + in.u16();
  for (std::uint32_t i = 0; i < nfun && !in.empty(); ++i) {
    FunctionSpec f;
    const std::uint8_t k = in.u8();
    // Mostly functions laid out one after another; sometimes anywhere.
    f.start_pc = (k & 0x80) ? in.u64() : pc;
    f.size = (k & 0x40) ? in.u32() : in.u16();
    pc = f.start_pc + f.size + in.u8();
    const std::uint8_t t = in.u8();
    f.pc_type = (t & 0xc0) == 0xc0 ? static_cast<PcType>(t & 0x7) : static_cast<PcType>(t & 1);
    f.fde_type = (t & 0x30) == 0x30 ? static_cast<FdeType>((t >> 1) & 0x7) : static_cast<FdeType>((t >> 1) & 1);
    f.rep_size = (t & 0x8) ? in.u8() : (f.pc_type == PcType::kMask ? 16 : 0);
    f.signal = t & 0x4;
    const std::uint8_t t2 = in.u8();
    f.pauth_key = (t2 & 0xc0) == 0xc0 ? static_cast<PauthKey>(t2 & 0x7) : static_cast<PauthKey>(t2 & 1);
    f.fre_type = (t2 & 0x30) == 0x30 ? static_cast<FreType>((t2 >> 1) & 0x7) : static_cast<FreType>((t2 >> 1) % 3);
    f.fre_offset = in.u16();
    const std::uint32_t nrows = in.below(24);
    std::uint32_t start = 0;
    for (std::uint32_t r = 0; r < nrows && !in.empty(); ++r) {
      const std::uint8_t step = in.u8();
      // Increasing starts inside the function, or anything.
      start = (step & 0x80) ? in.u32() : start + (r == 0 ? 0 : 1 + (step & 0x3f));
      FrameRow fr = (r > 0 && (step & 0x40)) ? f.rows.back().row : row(in, regs, s);
      f.rows.push_back({start, fr});
      static constexpr std::uint8_t kSizes[] = {1, 2, 4, 0, 3, 8, 1, 2};
      f.dataword_sizes.push_back(kSizes[in.u8() & 7]);
    }
    s.functions.push_back(std::move(f));
  }
  return s;
}

// How many models the encoder accepted: printed at exit when
// SFRAME_FUZZ_STATS is set (a harness whose models are all rejected tests
// little).
std::uint64_t g_accepted = 0, g_tried = 0;
void print_stats() { std::fprintf(stderr, "fuzz_encode: %llu of %llu encodings accepted\n",
                                  static_cast<unsigned long long>(g_accepted), static_cast<unsigned long long>(g_tried)); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool stats = [] {
    if (std::getenv("SFRAME_FUZZ_STATS")) std::atexit(print_stats);
    return true;
  }();
  (void)stats;
  Reader in(data, size);
  SectionSpec m = model(in);
  // Both versions the encoder writes; an out-of-range one once more.
  std::vector<Version> versions{Version::kV2, Version::kV3};
  if (m.version != Version::kV2 && m.version != Version::kV3) versions.push_back(m.version);
  for (const Version v : versions) {
    m.version = v;
    for (const bool big : {false, true}) {
      m.big_endian = big;
      g_accepted += sframe::fuzz::check_encode(m, Layout::kOptimize);
      g_accepted += sframe::fuzz::check_encode(m, Layout::kPreserve);
      g_tried += 2;
      sframe::fuzz::check_size_options(m);
    }
  }
  return 0;
}
