// SPDX-License-Identifier: MIT
// The unwinder on sections encoded from rules written here by hand, walking
// stack images that the tests build the way each ABI's calls and prologues
// would (x86-64 `call`/`push %rbp`/`mov %rsp,%rbp`; AArch64 `bl`/`stp x29,
// x30, [sp, -N]!`; s390x `brasl`/`stmg %r6,%r15,48(%r15)`/`aghi %r15,-N`).
// The truth is what the simulated machine planted: the return addresses and
// stack pointers of every frame.
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

constexpr std::uint64_t kStackBase = 0x7ffd0000;
constexpr std::size_t kStackSize = 0x10000;

struct Want {
  std::uint64_t pc;
  std::uint64_t sp;
  bool exact;
};

void expect_frames(std::span<const Frame> got, const std::vector<Want>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].pc.value(), want[i].pc) << "frame " << i;
    EXPECT_EQ(got[i].sp, want[i].sp) << "frame " << i;
    EXPECT_EQ(got[i].pc.is_return_address(), !want[i].exact) << "frame " << i;
  }
}

// ---------------------------------------------------------------------------
// AMD64
// ---------------------------------------------------------------------------

// Two function shapes, as gcc makes them:
//  kFramePointer: 0: (entry) push %rbp; 1: mov %rsp,%rbp; 4: sub $N,%rsp ...
//                 body from 8 on, CFA = rbp + 16 from 4 to 0xf0; leave at 0xf0.
//  kSpOnly:       0: (entry) sub $N,%rsp; 4: body, CFA = rsp + N + 8;
//                 0xf0: add $N,%rsp; ret.
constexpr std::uint64_t kAmdText = 0x401000;
constexpr std::uint64_t kAmdStart = kAmdText;  // _start: RA undefined
constexpr int kAmdFuncs = 6;
std::uint64_t amd_func(int k) { return kAmdText + 0x100 * static_cast<std::uint64_t>(k + 1); }
bool amd_fp_style(int k) { return k % 2 == 0; }
std::int32_t amd_frame_size(int k) { return 8 * (k + 2); }  // sub $N: N
constexpr std::uint16_t kRsp = 7, kRbp = 6;

SectionSpec amd64_spec() {
  SectionSpec s;
  s.version = Version::kV3;
  s.abi = Abi::kAmd64Little;
  s.cfa_fixed_ra_offset = -8;
  s.section_address = 0x400000;
  FunctionSpec start;
  start.start_pc = kAmdStart;
  start.size = 0x40;
  start.rows = {{0, outermost()}};
  s.functions.push_back(start);
  const Rule ra = rule::fixed(-8);
  for (int k = 0; k < kAmdFuncs; ++k) {
    FunctionSpec f;
    f.start_pc = amd_func(k);
    f.size = 0x100;
    if (amd_fp_style(k)) {
      f.rows = {{0, row(rule::reg(kRsp, 8), ra, rule::unchanged())},
                {1, row(rule::reg(kRsp, 16), ra, rule::slot(-16))},
                {4, row(rule::reg(kRbp, 16), ra, rule::slot(-16))},
                {0xf1, row(rule::reg(kRsp, 8), ra, rule::unchanged())}};
    } else {
      f.rows = {{0, row(rule::reg(kRsp, 8), ra, rule::unchanged())},
                {4, row(rule::reg(kRsp, amd_frame_size(k) + 8), ra, rule::unchanged())},
                {0xf4, row(rule::reg(kRsp, 8), ra, rule::unchanged())}};
    }
    s.functions.push_back(f);
  }
  return s;
}

// The machine: calls push the return address, prologues push and move.
struct Amd64Machine {
  StackImage stack{kStackBase, kStackSize};
  std::uint64_t sp = kStackBase + kStackSize - 64;
  std::uint64_t rbp = 0;
  std::vector<Want> frames;  // outermost first while building

  void call(std::uint64_t ret) {
    frames.push_back({ret, sp, false});
    sp -= 8;
    stack.put(sp, ret);
  }
  // Runs function k's prologue up to the state at offset `off`.
  void enter(int k, std::uint64_t off) {
    if (amd_fp_style(k)) {
      if (off >= 1 && off < 0xf1) {
        sp -= 8;
        stack.put(sp, rbp);  // push %rbp
      }
      if (off >= 4 && off < 0xf1) {
        rbp = sp;  // mov %rsp,%rbp
        sp -= static_cast<std::uint64_t>(amd_frame_size(k));
      }
      if (off >= 0xf1) {
        // After `leave`: rbp restored, nothing left but the RA.
      }
    } else if (off >= 4 && off < 0xf4) {
      sp -= static_cast<std::uint64_t>(amd_frame_size(k));  // rbp is callee-saved: left alone
    }
  }
};

// A chain _start -> f(k0) -> f(k1) -> ... built outermost first; the
// topmost frame stops at `top_off` within its function.
Amd64Machine amd64_chain(const std::vector<int>& funcs, std::uint64_t top_off, std::mt19937_64& rng) {
  Amd64Machine m;
  m.call(kAmdStart + 0x10);  // _start calls the first function
  for (std::size_t i = 0; i < funcs.size(); ++i) {
    const int k = funcs[i];
    const bool top = i + 1 == funcs.size();
    // Calls happen in the body: return addresses whose RA - 1 is in it.
    const std::uint64_t off = top ? top_off : 0x10 + rng() % 0xd0;
    m.enter(k, off);
    if (top) {
      m.frames.push_back({amd_func(k) + off, m.sp, true});
    } else {
      m.call(amd_func(k) + off);
    }
  }
  return m;
}

std::vector<Want> innermost_first(std::vector<Want> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

TEST(UnwindAmd64, DeepChainEveryTopmostState) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  std::mt19937_64 rng(1);
  StaticRuleCache<1024> cache;
  for (std::uint64_t top_off : {0x0ull, 0x1ull, 0x4ull, 0x20ull, 0xf1ull, 0xf4ull, 0xf8ull}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<int> funcs;
      const int depth = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < depth; ++i) funcs.push_back(static_cast<int>(rng() % kAmdFuncs));
      Amd64Machine m = amd64_chain(funcs, top_off, rng);
      const auto want = innermost_first(m.frames);
      const Want& top = want.front();
      const Regs regs = Regs::amd64(top.pc, m.sp, m.rbp);
      std::array<Frame, 64> out;
      const BufferMemory mem = m.stack.memory();
      // Without a cache, filling it, and (mostly) hitting it: same frames.
      for (RuleCache* c : {static_cast<RuleCache*>(nullptr), static_cast<RuleCache*>(&cache),
                           static_cast<RuleCache*>(&cache)}) {
        const UnwindResult r = unwind(mod->map, mem, regs, std::span<Frame>(out), {}, c);
        EXPECT_EQ(r.reason, StopReason::kOutermost) << stop_reason_name(r.reason) << " at 0x" << std::hex << r.address;
        expect_frames(std::span<const Frame>(out.data(), r.count), want);
        // CFAs strictly increase and each caller's SP is its callee's CFA.
        for (std::size_t i = 0; i + 1 < r.count; ++i) {
          EXPECT_EQ(out[i].cfa, out[i + 1].sp);
          if (i > 0) {
            EXPECT_GT(out[i].cfa, out[i - 1].cfa);
          }
        }
      }
    }
  }
  EXPECT_GT(cache.hits, cache.misses / 2);
}

TEST(UnwindAmd64, DepthLimitAndEmptyBuffer) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  std::mt19937_64 rng(2);
  Amd64Machine m = amd64_chain({0, 1, 2, 3, 4, 5, 0, 1}, 0x20, rng);
  const auto want = innermost_first(m.frames);
  const Regs regs = Regs::amd64(want.front().pc, m.sp, m.rbp);
  const BufferMemory mem = m.stack.memory();
  std::array<Frame, 16> out;
  // Exactly as many slots as frames: the walk still ends at the outermost.
  UnwindResult r = unwind(mod->map, mem, regs, std::span<Frame>(out.data(), want.size()));
  EXPECT_EQ(r.reason, StopReason::kOutermost);
  EXPECT_EQ(r.count, want.size());
  r = unwind(mod->map, mem, regs, std::span<Frame>(out.data(), 3));
  EXPECT_EQ(r.reason, StopReason::kDepthLimit);
  EXPECT_EQ(r.count, 3u);
  expect_frames(std::span<const Frame>(out.data(), 3), {want.begin(), want.begin() + 3});
  r = unwind(mod->map, mem, regs, std::span<Frame>());
  EXPECT_EQ(r.reason, StopReason::kDepthLimit);
  EXPECT_EQ(r.count, 0u);
}

TEST(UnwindAmd64, UnreadableMemoryZeroPcAndCfaNotIncreasing) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  std::mt19937_64 rng(3);
  Amd64Machine m = amd64_chain({1, 3, 5}, 0x20, rng);  // SP-only functions
  auto want = innermost_first(m.frames);
  const Regs regs = Regs::amd64(want.front().pc, m.sp, m.rbp);
  std::array<Frame, 16> out;

  // The stack image ends right below the topmost frame's RA slot.
  {
    const std::uint64_t ra_slot = want[1].sp - 8;
    const std::span<const std::byte> all = m.stack.bytes();
    const BufferMemory cut(all.first(ra_slot - kStackBase), kStackBase);
    const UnwindResult r = unwind(mod->map, cut, regs, std::span<Frame>(out));
    EXPECT_EQ(r.reason, StopReason::kUnreadableMemory);
    EXPECT_EQ(r.address, ra_slot);
    EXPECT_EQ(r.count, 1u);
  }
  // A zero return address in frame 2's slot.
  {
    StackImage s = m.stack;
    s.put(want[2].sp - 8, 0);
    const UnwindResult r = unwind(mod->map, s.memory(), regs, std::span<Frame>(out));
    EXPECT_EQ(r.reason, StopReason::kZeroPc);
    EXPECT_EQ(r.count, 2u);
  }
  // A frame-pointer function whose saved %rbp points back down the stack:
  // its CFA (rbp + 16) falls below the previous CFA.
  {
    Amd64Machine f = amd64_chain({1, 0, 0}, 0x20, rng);
    auto w = innermost_first(f.frames);
    // Frame 1 (function 0, FP-based CFA) takes its %rbp from frame 0's
    // saved slot? Frame 0 is FP-style too: it saved the caller's %rbp at
    // CFA0 - 16. Point that at an address below frame 0's CFA.
    const std::uint64_t cfa0 = w[1].sp;
    f.stack.put(cfa0 - 16, cfa0 - 64);
    const Regs r0 = Regs::amd64(w[0].pc, f.sp, f.rbp);
    const UnwindResult r = unwind(mod->map, f.stack.memory(), r0, std::span<Frame>(out));
    EXPECT_EQ(r.reason, StopReason::kCfaNotIncreasing);
    EXPECT_EQ(r.count, 2u);
    EXPECT_EQ(r.address, cfa0 - 64 + 16);
  }
}

// Random words over the callers' part of the stack: the frames below the
// damage are still right, and the walk ends with some reason, never a crash.
TEST(UnwindAmd64, CorruptedCallerFrames) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  std::mt19937_64 rng(8);
  for (int round = 0; round < 200; ++round) {
    std::vector<int> funcs;
    const int depth = 3 + static_cast<int>(rng() % 20);
    for (int i = 0; i < depth; ++i) funcs.push_back(static_cast<int>(rng() % kAmdFuncs));
    Amd64Machine m = amd64_chain(funcs, 0x20, rng);
    const auto want = innermost_first(m.frames);
    // Frames 0..k read nothing at or above frame k's SP.
    const std::size_t k = 1 + rng() % (want.size() - 1);
    for (std::uint64_t a = want[k].sp; a + 8 <= m.stack.end(); a += 8) {
      switch (rng() % 3) {
        case 0: m.stack.put(a, rng()); break;
        case 1: m.stack.put(a, want[k].sp + (rng() % 0x400) - 0x200); break;  // stack-ish
        default: m.stack.put(a, kAmdText + rng() % 0x800); break;             // code-ish
      }
    }
    std::array<Frame, 64> out;
    UnwindOptions o;
    o.fp_fallback = rng() % 2;
    const UnwindResult r = unwind(mod->map, m.stack.memory(), Regs::amd64(want[0].pc, m.sp, m.rbp), std::span<Frame>(out), o);
    ASSERT_GE(r.count, k + 1) << stop_reason_name(r.reason);
    ASSERT_LE(r.count, out.size());
    expect_frames(std::span<const Frame>(out.data(), k + 1), {want.begin(), want.begin() + static_cast<std::ptrdiff_t>(k) + 1});
  }
}

TEST(UnwindAmd64, NoSFrameAndFramePointerFallback) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  std::mt19937_64 rng(4);
  // Frame 0 in code without SFrame (say a JIT page at 0x900000) with a
  // standard frame: push %rbp; mov %rsp,%rbp; called from function 0.
  Amd64Machine m = amd64_chain({0, 2}, 0x20, rng);
  // Replace the topmost: function 2 calls into the JIT code.
  const std::uint64_t ret = amd_func(2) + 0x30;
  m.frames.back() = {ret, m.sp, false};
  m.sp -= 8;
  m.stack.put(m.sp, ret);
  m.sp -= 8;
  m.stack.put(m.sp, m.rbp);
  m.rbp = m.sp;
  m.sp -= 0x40;
  const std::uint64_t jit_pc = 0x900123;
  std::vector<Want> w2 = innermost_first(m.frames);
  w2.insert(w2.begin(), Want{jit_pc, m.sp, true});
  const Regs regs = Regs::amd64(jit_pc, m.sp, m.rbp);
  std::array<Frame, 16> out;
  UnwindResult r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kNoSFrameForPc);
  EXPECT_EQ(r.address, jit_pc);
  EXPECT_EQ(r.count, 1u);

  UnwindOptions o;
  o.fp_fallback = true;
  r = unwind(mod->map, m.stack.memory(), regs, std::span<Frame>(out), o);
  EXPECT_EQ(r.reason, StopReason::kOutermost);
  ASSERT_EQ(r.count, w2.size());
  for (std::size_t i = 0; i < r.count; ++i) EXPECT_EQ(out[i].pc.value(), w2[i].pc) << i;
  EXPECT_TRUE(out[1].flags & kFrameFpFallback);
  EXPECT_EQ(out[1].sp, w2[1].sp);
  EXPECT_FALSE(out[2].flags & kFrameFpFallback);
}

TEST(UnwindAmd64, FpBasedCfaNeedsAKnownFp) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  Regs regs;
  regs.arch = Arch::kAmd64;
  regs.pc = amd_func(0) + 0x20;  // CFA = rbp + 16
  regs.set(kRsp, kStackBase + 0x100);
  std::array<Frame, 4> out;
  const StackImage stack(kStackBase, 0x1000);
  const UnwindResult r = unwind(mod->map, stack.memory(), regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kBadRule);
  EXPECT_EQ(r.address, regs.pc);
  EXPECT_FALSE(out[0].flags & kFrameFpValid);
}

TEST(UnwindAmd64, LoadBias) {
  // The same section loaded 0x7f0000000000 higher, as a PIE would be.
  const std::uint64_t bias = 0x7f0000000000;
  auto mod = map_encoded(amd64_spec(), {kAmdText + bias, kAmdText + bias + 0x1000}, bias);
  std::mt19937_64 rng(5);
  Amd64Machine m = amd64_chain({0, 1, 2}, 0x20, rng);
  auto want = innermost_first(m.frames);
  // Relocate the planted return addresses.
  for (std::size_t i = 1; i < want.size(); ++i) {
    m.stack.put(want[i].sp - 8, want[i].pc + bias);
    want[i].pc += bias;
  }
  want[0].pc += bias;
  std::array<Frame, 16> out;
  const UnwindResult r =
      unwind(mod->map, m.stack.memory(), Regs::amd64(want[0].pc, m.sp, m.rbp), std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kOutermost);
  expect_frames(std::span<const Frame>(out.data(), r.count), want);
}

// PLT stubs: one PC-mask FDE for all 16-byte entries (jmp *GOT; push $n; jmp
// PLT0): CFA = rsp + 8 before the push, rsp + 16 after it.
TEST(UnwindAmd64, PcMaskPltFde) {
  SectionSpec s = amd64_spec();
  FunctionSpec plt;
  plt.start_pc = 0x400e00;
  plt.size = 0x100;
  plt.pc_type = PcType::kMask;
  plt.rep_size = 16;
  plt.rows = {{0, row(rule::reg(kRsp, 8), rule::fixed(-8), rule::unchanged())},
              {0xb, row(rule::reg(kRsp, 16), rule::fixed(-8), rule::unchanged())}};
  s.functions.insert(s.functions.begin(), plt);
  auto mod = map_encoded(s, {0x400e00, kAmdText + 0x1000});
  std::mt19937_64 rng(6);
  for (std::uint64_t entry : {0u, 3u, 15u}) {
    for (std::uint64_t off : {0u, 5u, 6u, 11u, 15u}) {
      Amd64Machine m = amd64_chain({2, 1}, 0x20, rng);
      const std::uint64_t pc = plt.start_pc + 16 * entry + off;
      m.frames.back() = {amd_func(1) + 0x40, m.sp, false};
      m.sp -= 8;
      m.stack.put(m.sp, amd_func(1) + 0x40);
      if (off >= 0xb) {
        m.sp -= 8;
        m.stack.put(m.sp, entry);  // push $n
      }
      auto want = innermost_first(m.frames);
      want.insert(want.begin(), Want{pc, m.sp, true});
      std::array<Frame, 16> out;
      const UnwindResult r = unwind(mod->map, m.stack.memory(), Regs::amd64(pc, m.sp, m.rbp), std::span<Frame>(out));
      EXPECT_EQ(r.reason, StopReason::kOutermost) << entry << "/" << off;
      expect_frames(std::span<const Frame>(out.data(), r.count), want);
    }
  }
}

// ---------------------------------------------------------------------------
// x86-64 signal frames
// ---------------------------------------------------------------------------

constexpr std::uint64_t kTramp = kAmdText + 0xe01;  // __restore_rt (a nop before it)

struct SignalScene {
  StackImage stack{kStackBase, kStackSize};
  std::vector<Want> want;  // innermost first
  Regs regs;
  std::uint64_t interrupted_rbp = 0;
};

// _start -> f0 -> f2 [interrupted at its first instruction] -> signal ->
// handler f1. f2 interrupted at offset 0 (entry, CFA = rsp + 8): looking up
// PC - 1 would land in f1's range, so the PC after the signal must be exact.
SignalScene signal_scene(std::uint64_t sigframe_gap) {
  SignalScene sc;
  std::mt19937_64 rng(7);
  Amd64Machine m = amd64_chain({0, 2}, 0, rng);
  sc.stack = m.stack;
  const std::uint64_t interrupted_sp = m.sp;
  const std::uint64_t interrupted_pc = amd_func(2);
  const std::uint64_t interrupted_rbp = m.rbp;
  sc.interrupted_rbp = interrupted_rbp;
  // The kernel builds rt_sigframe below the red zone: pretcode, then uc.
  const std::uint64_t frame = ((interrupted_sp - 128 - sigframe_gap - 1200) & ~std::uint64_t{15}) - 8;
  const std::uint64_t uc = frame + 8;
  sc.stack.put(frame, kTramp);  // pretcode: the handler returns to the trampoline
  const std::uint64_t gregs = uc + 40;
  for (unsigned i = 0; i < 23; ++i) sc.stack.put(gregs + 8 * i, 0x5000 + i);  // r8.. junk
  sc.stack.put(gregs + 8 * 16, interrupted_pc);   // REG_RIP
  sc.stack.put(gregs + 8 * 15, interrupted_sp);   // REG_RSP
  sc.stack.put(gregs + 8 * 10, interrupted_rbp);  // REG_RBP
  // The handler: function 1 in its body, CFA = rsp + 8 + N.
  const std::uint64_t handler_sp = frame - static_cast<std::uint64_t>(amd_frame_size(1));
  const std::uint64_t handler_pc = amd_func(1) + 0x40;
  sc.want = innermost_first(m.frames);
  sc.want.front() = {interrupted_pc, interrupted_sp, true};
  sc.want.insert(sc.want.begin(), Want{kTramp, uc, false});
  sc.want.insert(sc.want.begin(), Want{handler_pc, handler_sp, true});
  sc.regs = Regs::amd64(handler_pc, handler_sp, 0x4242);
  return sc;
}

void check_signal(const ModuleMap& map, const SignalScene& sc, const UnwindOptions& o,
                  const std::vector<BufferMemory>& extra = {}) {
  std::vector<BufferMemory> regions{sc.stack.memory()};
  regions.insert(regions.end(), extra.begin(), extra.end());
  const MultiBufferMemory mem(regions);
  std::array<Frame, 16> out;
  const UnwindResult r = unwind(map, mem, sc.regs, std::span<Frame>(out), o);
  EXPECT_EQ(r.reason, StopReason::kOutermost) << stop_reason_name(r.reason) << " 0x" << std::hex << r.address;
  expect_frames(std::span<const Frame>(out.data(), r.count), sc.want);
  ASSERT_GE(r.count, 3u);
  EXPECT_TRUE(out[1].flags & kFrameSignal);
  EXPECT_FALSE(out[0].flags & kFrameSignal);
  EXPECT_EQ(out[2].fp, sc.interrupted_rbp);  // restored from the ucontext
  EXPECT_TRUE(out[2].flags & kFrameFpValid);
}

TEST(UnwindSignal, SignalBitFde) {
  SectionSpec s = amd64_spec();
  FunctionSpec t;
  t.start_pc = kTramp - 1;  // covers the nop, where RA - 1 points
  t.size = 0x10;
  t.signal = true;
  t.rows = {{0, row(rule::reg(kRsp, 8), rule::fixed(-8), rule::unchanged())}};
  s.functions.push_back(t);
  auto mod = map_encoded(s, {kAmdText, kAmdText + 0x1000});
  UnwindOptions o;
  o.detect_sigreturn_code = false;
  for (std::uint64_t gap : {0u, 64u}) check_signal(mod->map, signal_scene(gap), o);
  // Cached the second time round.
  StaticRuleCache<16> cache;
  const SignalScene sc = signal_scene(0);
  std::array<Frame, 16> out;
  for (int i = 0; i < 2; ++i) {
    const UnwindResult r = unwind(mod->map, sc.stack.memory(), sc.regs, std::span<Frame>(out), o, &cache);
    EXPECT_EQ(r.count, sc.want.size());
    EXPECT_TRUE(out[1].flags & kFrameSignal);
  }
  EXPECT_GT(cache.hits, 0u);
}

TEST(UnwindSignal, TrampolineRange) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  const std::array<AddressRange, 1> tramps{{{kTramp, kTramp + 9}}};
  UnwindOptions o;
  o.detect_sigreturn_code = false;
  o.signal_trampolines = tramps;
  check_signal(mod->map, signal_scene(0), o);
  // Without the range, the trampoline has no SFrame.
  o.signal_trampolines = {};
  const SignalScene sc = signal_scene(0);
  std::array<Frame, 16> out;
  const UnwindResult r = unwind(mod->map, sc.stack.memory(), sc.regs, std::span<Frame>(out), o);
  EXPECT_EQ(r.reason, StopReason::kNoSFrameForPc);
  EXPECT_EQ(r.count, 2u);
}

TEST(UnwindSignal, SigreturnCodeBytes) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  // The trampoline's code: mov $0xf,%rax; syscall.
  StackImage code(kTramp & ~std::uint64_t{0xfff}, 0x1000);
  code.put_bytes(kTramp, {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05});
  check_signal(mod->map, signal_scene(0), {}, {code.memory()});
  // One byte off: not a trampoline.
  code.put_bytes(kTramp + 8, {0x04});
  const SignalScene sc = signal_scene(0);
  const std::vector<BufferMemory> regions{sc.stack.memory(), code.memory()};
  std::array<Frame, 16> out;
  const UnwindResult r = unwind(mod->map, MultiBufferMemory(regions), sc.regs, std::span<Frame>(out));
  EXPECT_EQ(r.reason, StopReason::kNoSFrameForPc);
}

TEST(UnwindSignal, UnreadableSigframe) {
  auto mod = map_encoded(amd64_spec(), {kAmdText, kAmdText + 0x1000});
  SignalScene sc = signal_scene(0);
  const std::array<AddressRange, 1> tramps{{{kTramp, kTramp + 9}}};
  UnwindOptions o;
  o.signal_trampolines = tramps;
  // Cut the image inside the ucontext's gregs.
  const std::uint64_t uc = sc.want[1].sp;
  const BufferMemory cut(std::span<const std::byte>(sc.stack.bytes()).first(uc + 100 - kStackBase), kStackBase);
  std::array<Frame, 16> out;
  const UnwindResult r = unwind(mod->map, cut, sc.regs, std::span<Frame>(out), o);
  EXPECT_EQ(r.reason, StopReason::kUnreadableMemory);
  EXPECT_EQ(r.count, 2u);
}

}  // namespace
