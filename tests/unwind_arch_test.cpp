// SPDX-License-Identifier: MIT
// The unwinder on AArch64 (with and without PAuth, both section byte orders)
// and s390x, on sections encoded from hand-written rules and stack images
// built by simulating each ABI's calls and prologues:
//  AArch64 (AAPCS64, gcc -O2): `bl` puts the RA in x30; [paciasp signs x30;]
//    stp x29, x30, [sp, #-S]!; mov x29, sp; ... ldp x29, x30, [sp], #S;
//    [autiasp;] ret. The frame record {x29, x30} sits at the bottom of the
//    frame: FP at CFA - S, RA at CFA - S + 8.
//  s390x (ELF ABI): `brasl %r14` puts the RA in r14; stmg %r6,%r15,48(%r15)
//    saves r11 at SP+88 and r14 at SP+112 of the CALLER's 160-byte register
//    save area (CFA - 72 and CFA - 48, CFA = SP at entry + 160);
//    aghi %r15,-S; [lgr %r11,%r15;] ... lmg; br %r14.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "sframe/format/encode.hpp"
#include "sframe/unwind/unwind.hpp"
#include "support/stack_image.hpp"
#include "support/unwind_util.hpp"

namespace {

using namespace sframe;
using namespace sframe_test;

constexpr std::uint64_t kStackBase = 0x7ffe0000;
constexpr std::size_t kStackSize = 0x20000;

struct Want {
  std::uint64_t pc;
  std::uint64_t sp;
};

void expect_frames(std::span<const Frame> got, std::vector<Want> want_outer_first) {
  std::reverse(want_outer_first.begin(), want_outer_first.end());
  ASSERT_EQ(got.size(), want_outer_first.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].pc.value(), want_outer_first[i].pc) << "frame " << i;
    EXPECT_EQ(got[i].sp, want_outer_first[i].sp) << "frame " << i;
  }
}

// ---------------------------------------------------------------------------
// AArch64
// ---------------------------------------------------------------------------

constexpr std::uint64_t kA64Text = 0x410000;
constexpr int kA64Funcs = 5;
std::uint64_t a64_func(int k) { return kA64Text + 0x100 * static_cast<std::uint64_t>(k + 1); }
std::int32_t a64_frame(int k) { return 16 * (k + 2); }
bool a64_leaf(int k) { return k == kA64Funcs - 1; }  // sub sp, sp, #S; no frame record
constexpr std::uint16_t kX29 = 29, kSp = 31;

SectionSpec a64_spec(bool pauth, bool big_endian) {
  SectionSpec s;
  s.version = Version::kV3;
  s.abi = big_endian ? Abi::kAarch64Big : Abi::kAarch64Little;
  s.big_endian = big_endian;
  s.section_address = 0x400000;
  FunctionSpec start;
  start.start_pc = kA64Text;
  start.size = 0x40;
  start.rows = {{0, outermost()}};
  s.functions.push_back(start);
  const Rule u = rule::unchanged();
  for (int k = 0; k < kA64Funcs; ++k) {
    FunctionSpec f;
    f.start_pc = a64_func(k);
    f.size = 0x100;
    const std::int32_t S = a64_frame(k);
    if (a64_leaf(k)) {
      f.rows = {{0, row(rule::reg(kSp, 0), u, u)}, {4, row(rule::reg(kSp, S), u, u)}, {0xf0, row(rule::reg(kSp, 0), u, u)}};
    } else {
      f.rows = {{0, row(rule::reg(kSp, 0), u, u)},
                {4, row(rule::reg(kSp, 0), u, u, pauth)},
                {8, row(rule::reg(kSp, S), rule::slot(-S + 8), rule::slot(-S), pauth)},
                {0xc, row(rule::reg(kX29, S), rule::slot(-S + 8), rule::slot(-S), pauth)},
                {0xe0, row(rule::reg(kSp, 0), u, u, pauth)},
                {0xe4, row(rule::reg(kSp, 0), u, u)}};
    }
    s.functions.push_back(f);
  }
  return s;
}

struct A64Machine {
  explicit A64Machine(ByteOrder o) : stack(kStackBase, kStackSize, o) {}
  StackImage stack;
  std::uint64_t sp = kStackBase + kStackSize - 64;
  std::uint64_t x29 = 0;
  std::uint64_t lr = 0;
  std::vector<Want> frames;  // outermost first
};

// PAC bits for a user-space address with 48-bit VAs and no TBI: 48-54, 56-63.
std::uint64_t sign(std::uint64_t ra, std::mt19937_64& rng) {
  const std::uint64_t pac = rng() & 0xff7f000000000000ull;
  return ra | pac | (std::uint64_t{1} << 50);  // never leave it unsigned
}

A64Machine a64_chain(const std::vector<int>& funcs, std::uint64_t top_off, bool pauth, ByteOrder order,
                     std::mt19937_64& rng) {
  A64Machine m(order);
  std::uint64_t ret = kA64Text + 0x10;  // _start's bl
  m.frames.push_back({ret, m.sp});
  for (std::size_t i = 0; i < funcs.size(); ++i) {
    const int k = funcs[i];
    const bool top = i + 1 == funcs.size();
    const std::uint64_t off = top ? top_off : 0x10 + 4 * (rng() % 0x30);
    m.lr = ret;  // bl
    const std::uint64_t S = static_cast<std::uint64_t>(a64_frame(k));
    if (a64_leaf(k)) {
      if (off >= 4 && off < 0xf0) m.sp -= S;
    } else {
      if (pauth && off >= 4 && off < 0xe4) m.lr = sign(m.lr, rng);  // paciasp
      if (off >= 8 && off < 0xe0) {
        m.sp -= S;
        m.stack.put(m.sp, m.x29);
        m.stack.put(m.sp + 8, m.lr);
      }
      if (off >= 0xc && off < 0xe0) m.x29 = m.sp;
    }
    if (top) {
      m.frames.push_back({a64_func(k) + off, m.sp});
    } else {
      ret = a64_func(k) + off;
      m.frames.push_back({ret, m.sp});
    }
  }
  // In a body, x30 holds whatever the last call left there.
  if (top_off >= 0x8 && top_off < 0xe0 && !a64_leaf(funcs.back())) m.lr = 0xdead0000;
  return m;
}

class UnwindAarch64 : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(UnwindAarch64, DeepChainsEveryTopmostState) {
  const auto [pauth, big] = GetParam();
  const ByteOrder order = big ? ByteOrder::kBig : ByteOrder::kLittle;
  auto mod = map_encoded(a64_spec(pauth, big), {kA64Text, kA64Text + 0x1000});
  std::mt19937_64 rng(11);
  StaticRuleCache<256> cache;
  for (std::uint64_t top_off : {0x0ull, 0x4ull, 0x8ull, 0xcull, 0x40ull, 0xe0ull, 0xe4ull}) {
    for (int round = 0; round < 10; ++round) {
      std::vector<int> funcs;
      const int depth = 1 + static_cast<int>(rng() % 30);
      // Leaf functions can only be the topmost frame.
      for (int i = 0; i < depth; ++i) funcs.push_back(static_cast<int>(rng() % (kA64Funcs - 1)));
      if (round % 3 == 0) funcs.back() = kA64Funcs - 1;
      A64Machine m = a64_chain(funcs, top_off, pauth, order, rng);
      const Regs regs = Regs::aarch64(m.frames.back().pc, m.sp, m.x29, m.lr);
      std::array<Frame, 64> out;
      for (RuleCache* c : {static_cast<RuleCache*>(nullptr), static_cast<RuleCache*>(&cache)}) {
        const UnwindResult r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out), {}, c);
        EXPECT_EQ(r.reason, StopReason::kOutermost)
            << stop_reason_name(r.reason) << " 0x" << std::hex << r.address << " top_off " << top_off;
        expect_frames(std::span<const Frame>(out.data(), r.count), m.frames);
        if (pauth && r.count > 1 && top_off >= 4 && top_off < 0xe4 && !a64_leaf(funcs.back())) {
          EXPECT_TRUE(out[1].flags & kFramePauthStripped);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, UnwindAarch64, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param) ? "Pauth" : "Plain") +
                                  (std::get<1>(p.param) ? "Big" : "Little");
                         });

// RA "unchanged" (still in x30) is only meaningful in the topmost frame: a
// return address inside a function's no-frame-record region is bad data.
TEST(UnwindAarch64Rules, RaInLrBelowTopmostIsBadRule) {
  auto mod = map_encoded(a64_spec(false, false), {kA64Text, kA64Text + 0x1000});
  std::mt19937_64 rng(12);
  A64Machine m = a64_chain({0, 1}, 0x40, false, ByteOrder::kLittle, rng);
  // Frame 0's saved RA points at the leaf function's body (RA "u").
  const std::uint64_t bogus = a64_func(kA64Funcs - 1) + 0x20;
  m.stack.put(m.x29 + 8, bogus);
  std::array<Frame, 8> out;
  const UnwindResult r = unwind(mod->map, m.stack.memory(), Regs::aarch64(m.frames.back().pc, m.sp, m.x29, 0), std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kBadRule);
  EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(out[1].pc.value(), bogus);
  EXPECT_EQ(r.address, bogus - 1);
}

TEST(UnwindAarch64Rules, PauthStripping) {
  UnwindOptions o;
  const std::uint64_t ra = 0x0000aaaabbbbcccc;
  EXPECT_EQ(detail::strip_pauth(0x007f'aaaa'bbbb'ccccull, o), ra);
  EXPECT_EQ(detail::strip_pauth(0xff2a'aaaa'bbbb'ccccull, o), ra);
  EXPECT_EQ(detail::strip_pauth(ra, o), ra);
  // Kernel half (bit 55 set): the PAC bits are set, not cleared.
  EXPECT_EQ(detail::strip_pauth(0x0080'8000'0000'1234ull, o), 0xffff'8000'0000'1234ull);
  o.pauth_tbi = true;  // the top byte is a tag, kept
  EXPECT_EQ(detail::strip_pauth(0x5a2a'aaaa'bbbb'ccccull, o), 0x5a00'aaaa'bbbb'ccccull);
  o.pauth_tbi = false;
  o.pauth_va_bits = 39;
  EXPECT_EQ(detail::strip_pauth(0x0000'0080'1234'5678ull, o), 0x0000'0000'1234'5678ull);
  EXPECT_EQ(detail::strip_pauth(0x0000'007f'1234'5678ull, o), 0x0000'007f'1234'5678ull);
}

TEST(UnwindAarch64Rules, FramePointerFallbackStripsPac) {
  auto mod = map_encoded(a64_spec(true, false), {kA64Text, kA64Text + 0x1000});
  std::mt19937_64 rng(13);
  A64Machine m = a64_chain({0, 1}, 0x40, true, ByteOrder::kLittle, rng);
  // Function 1 calls code without SFrame that built a standard frame record.
  const std::uint64_t ret = a64_func(1) + 0x44;
  m.frames.back() = {ret, m.sp};
  m.sp -= 32;
  m.stack.put(m.sp, m.x29);
  m.stack.put(m.sp + 8, sign(ret, rng));
  m.x29 = m.sp;
  m.frames.push_back({0x900000, m.sp});
  UnwindOptions o;
  o.fp_fallback = true;
  std::array<Frame, 8> out;
  const UnwindResult r = unwind(mod->map, m.stack.memory(), Regs::aarch64(0x900000, m.sp, m.x29, 0), std::span<Frame>(out), o);
  EXPECT_EQ(r.reason, StopReason::kOutermost);
  ASSERT_EQ(r.count, m.frames.size());
  EXPECT_EQ(out[1].pc.value(), ret);
  EXPECT_TRUE(out[1].flags & kFrameFpFallback);
  EXPECT_TRUE(out[1].flags & kFramePauthStripped);
  for (std::size_t i = 2; i < r.count; ++i) EXPECT_EQ(out[i].pc.value(), m.frames[m.frames.size() - 1 - i].pc);
}

// ---------------------------------------------------------------------------
// s390x
// ---------------------------------------------------------------------------

constexpr std::uint64_t kZText = 0x420000;
constexpr int kZFuncs = 5;
std::uint64_t z_func(int k) { return kZText + 0x100 * static_cast<std::uint64_t>(k + 1); }
std::int32_t z_frame(int k) { return 160 + 8 * k; }
bool z_fp_style(int k) { return k % 2 == 1; }
bool z_leaf(int k) { return k == kZFuncs - 1; }
constexpr std::uint16_t kR11 = 11, kR15 = 15;

SectionSpec z_spec() {
  SectionSpec s;
  s.version = Version::kV3;
  s.abi = Abi::kS390xBig;
  s.big_endian = true;
  s.section_address = 0x400000;
  FunctionSpec start;
  start.start_pc = kZText;
  start.size = 0x40;
  start.rows = {{0, outermost()}};
  s.functions.push_back(start);
  const Rule u = rule::unchanged();
  for (int k = 0; k < kZFuncs; ++k) {
    FunctionSpec f;
    f.start_pc = z_func(k);
    f.size = 0x100;
    const std::int32_t S = z_frame(k);
    if (z_leaf(k)) {
      f.rows = {{0, row(rule::reg(kR15, 160), u, u)}};
    } else {
      f.rows = {{0, row(rule::reg(kR15, 160), u, u)},
                {6, row(rule::reg(kR15, 160), rule::slot(-48), rule::slot(-72))},
                {0xc, row(rule::reg(kR15, 160 + S), rule::slot(-48), rule::slot(-72))}};
      if (z_fp_style(k)) f.rows.push_back({0x10, row(rule::reg(kR11, 160 + S), rule::slot(-48), rule::slot(-72))});
      f.rows.push_back({0xe0, row(rule::reg(kR15, 160), u, u)});
    }
    s.functions.push_back(f);
  }
  // A leaf keeping the caller's r11 in f2 (DWARF 17) while it uses r11 (FLEX:
  // FP = r17 + 0, RA unchanged = still in r14, stored as a padding word), as
  // gcc does on s390x.
  FunctionSpec flex;
  flex.start_pc = kZText + 0xf00;
  flex.size = 0x40;
  flex.fde_type = FdeType::kFlex;
  flex.rows = {{0, row(rule::reg(kR15, 160), u, u)}, {8, row(rule::reg(kR15, 160), u, rule::reg(17, 0))}};
  s.functions.push_back(flex);
  return s;
}

struct ZMachine {
  StackImage stack{kStackBase, kStackSize, ByteOrder::kBig};
  std::uint64_t sp = kStackBase + kStackSize - 512;
  std::uint64_t r11 = 0, r14 = 0;
  std::vector<Want> frames;
};

ZMachine z_chain(const std::vector<int>& funcs, std::uint64_t top_off, std::mt19937_64& rng) {
  ZMachine m;
  std::uint64_t ret = kZText + 0x10;
  m.frames.push_back({ret, m.sp});
  for (std::size_t i = 0; i < funcs.size(); ++i) {
    const int k = funcs[i];
    const bool top = i + 1 == funcs.size();
    const std::uint64_t off = top ? top_off : 0x20 + 2 * (rng() % 0x40);
    m.r14 = ret;  // brasl %r14
    if (!z_leaf(k) && off >= 6 && off < 0xe0) {
      m.stack.put(m.sp + 88, m.r11);   // stmg: r11
      m.stack.put(m.sp + 112, m.r14);  // stmg: r14
      m.stack.put(m.sp + 120, m.sp);   // stmg: r15 (unused by SFrame)
    }
    if (!z_leaf(k) && off >= 0xc && off < 0xe0) m.sp -= static_cast<std::uint64_t>(z_frame(k));
    if (!z_leaf(k) && z_fp_style(k) && off >= 0x10 && off < 0xe0) m.r11 = m.sp;
    m.frames.push_back({z_func(k) + off, m.sp});
    ret = z_func(k) + off;
  }
  if (top_off >= 6 && top_off < 0xe0 && !z_leaf(funcs.back())) m.r14 = 0xdead;  // clobbered by calls
  return m;
}

TEST(UnwindS390x, DeepChainsEveryTopmostState) {
  auto mod = map_encoded(z_spec(), {kZText, kZText + 0x1000});
  std::mt19937_64 rng(21);
  StaticRuleCache<256> cache;
  for (std::uint64_t top_off : {0x0ull, 0x6ull, 0xcull, 0x10ull, 0x40ull, 0xe0ull}) {
    for (int round = 0; round < 10; ++round) {
      std::vector<int> funcs;
      const int depth = 1 + static_cast<int>(rng() % 30);
      for (int i = 0; i < depth; ++i) funcs.push_back(static_cast<int>(rng() % (kZFuncs - 1)));
      if (round % 3 == 0) funcs.back() = kZFuncs - 1;
      ZMachine m = z_chain(funcs, top_off, rng);
      std::array<Frame, 64> out;
      for (RuleCache* c : {static_cast<RuleCache*>(nullptr), static_cast<RuleCache*>(&cache)}) {
        const UnwindResult r = unwind(mod->map, m.stack.memory(), Regs::s390x(m.frames.back().pc, m.sp, m.r11, m.r14),
                                      std::span<Frame>(out), {}, c);
        EXPECT_EQ(r.reason, StopReason::kOutermost) << stop_reason_name(r.reason) << " 0x" << std::hex << r.address;
        expect_frames(std::span<const Frame>(out.data(), r.count), m.frames);
        // s390x: SP = CFA - 160.
        for (std::size_t i = 0; i + 1 < r.count; ++i) EXPECT_EQ(out[i].cfa - 160, out[i + 1].sp);
      }
    }
  }
  EXPECT_GT(cache.hits, 0u);
}

TEST(UnwindS390x, FlexFpInFloatingPointRegister) {
  auto mod = map_encoded(z_spec(), {kZText, kZText + 0x1000});
  std::mt19937_64 rng(22);
  ZMachine m = z_chain({1, 3}, 0x40, rng);  // FP-style caller: needs its r11 back
  const std::uint64_t ret = z_func(3) + 0x40;
  m.frames.back() = {ret, m.sp};
  const std::uint64_t pc = kZText + 0xf10;
  m.frames.push_back({pc, m.sp});
  Regs regs = Regs::s390x(pc, m.sp, 0x1234 /* r11 reused */, ret);
  regs.set(17, m.r11);  // ldgr %f2,%r11
  std::array<Frame, 16> out;
  UnwindResult r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kOutermost) << stop_reason_name(r.reason);
  expect_frames(std::span<const Frame>(out.data(), r.count), m.frames);
  EXPECT_EQ(out[1].fp, m.r11);
  // Without f2 the rule cannot be evaluated.
  regs.forget(17);
  r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kBadRule);
  EXPECT_EQ(r.count, 1u);
}

}  // namespace

namespace {

// SFrame v2 s390x (errata 1): an RA/FP data word with bit 0 set names the
// DWARF register holding the value (leaf functions keep r14 and r11 in
// floating-point registers). Only the topmost frame has those registers.
TEST(UnwindS390x, V2RegisterEncodedRaAndFp) {
  SectionSpec s = z_spec();
  s.version = Version::kV2;
  s.functions.pop_back();  // the FLEX function (v3 only)
  FunctionSpec leaf;
  leaf.start_pc = kZText + 0xf00;
  leaf.size = 0x40;
  const Rule u = rule::unchanged();
  leaf.rows = {{0, row(rule::reg(kR15, 160), u, u)},
               {8, row(rule::reg(kR15, 160), rule::reg(16, 0), rule::reg(17, 0))}};  // ldgr %f0,%r14; ldgr %f2,%r11
  s.functions.push_back(leaf);
  auto mod = map_encoded(s, {kZText, kZText + 0x1000});
  ASSERT_EQ(mod->section.version(), Version::kV2);
  std::mt19937_64 rng(23);
  ZMachine m = z_chain({1, 3}, 0x40, rng);
  const std::uint64_t ret = z_func(3) + 0x40;
  m.frames.back() = {ret, m.sp};
  const std::uint64_t pc = kZText + 0xf10;
  m.frames.push_back({pc, m.sp});
  Regs regs = Regs::s390x(pc, m.sp, 0x1111 /* r11 reused */, 0x2222 /* r14 reused */);
  regs.set(16, ret);
  regs.set(17, m.r11);
  std::array<Frame, 16> out;
  UnwindResult r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kOutermost) << stop_reason_name(r.reason);
  expect_frames(std::span<const Frame>(out.data(), r.count), m.frames);
  EXPECT_EQ(out[1].fp, m.r11);
  // Without f0 (as in any caller frame) the RA rule cannot be evaluated.
  regs.forget(16);
  r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kBadRule);
  EXPECT_EQ(r.count, 1u);
}

}  // namespace
