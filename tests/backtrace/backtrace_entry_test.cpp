// SPDX-License-Identifier: MIT
// The entry points' own cases, against the same references as
// backtrace_test.cpp (libunwind, glibc backtrace()): walks from given
// registers, hostile stacks and frame pointers, the stack's end bounding
// the assembly straight run of sframepp_backtrace_here, reported reasons.
// Built like backtrace_test.cpp; every case runs over the same three kinds
// of sections.
#include "backtrace_support.hpp"

// White-box (one test): the thread's registered stack bounds.
#include "../../src/backtrace/backtrace_internal.hpp"

extern "C" {
// Calls sframepp_backtrace_here (the entry behind sframe::backtrace) from a
// frame whose CFI says CFA = RBP + 16, with RBP set to `fp` for the call (0:
// the frame's own), and returns what it returns.
std::size_t sfpp_test_walk_with_fp(void** out, std::size_t size, sframe::BacktraceResult* result, std::uint64_t fp);
// Stores the registers sframepp_backtrace_here takes of its caller: the
// return address, the SP after the return, RBP.
void sfpp_test_caller_regs(std::uint64_t regs[3]);
// The differential pair: from one frame (CFA = RBP + 16, RBP set to `fp`
// for both walks, 0: the frame's own), walks (a) with the assembly entry
// sframepp_backtrace_here into out_a/res_a, then (b) with the C++ walk it
// continues into, sframepp_backtrace_walk_on, from the very registers the
// entry took (PC = the return address of (a)'s call, the same SP and RBP)
// and no frame taken, into out_b/res_b: the same frames, the same memo,
// the same stack, through the assembly's straight run or the C++ rule
// executor.
void sfpp_test_both(void** out_a, std::size_t size, sframe::BacktraceResult* res_a, std::uint64_t fp, void** out_b,
                    sframe::BacktraceResult* res_b);
}

asm(R"(
  .text
  .p2align 4
  .globl sfpp_test_walk_with_fp
  .type sfpp_test_walk_with_fp,@function
sfpp_test_walk_with_fp:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  testq %rcx, %rcx
  jz 1f
  movq %rcx, %rbp
1:
  call sframepp_backtrace_here
  movq %rsp, %rbp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size sfpp_test_walk_with_fp, .-sfpp_test_walk_with_fp

  .p2align 4
  .globl sfpp_test_caller_regs
  .type sfpp_test_caller_regs,@function
sfpp_test_caller_regs:
  .cfi_startproc
  movq (%rsp), %rax
  movq %rax, (%rdi)
  leaq 8(%rsp), %rax
  movq %rax, 8(%rdi)
  movq %rbp, 16(%rdi)
  ret
  .cfi_endproc
  .size sfpp_test_caller_regs, .-sfpp_test_caller_regs

  .p2align 4
  .globl sfpp_test_both
  .type sfpp_test_both,@function
sfpp_test_both:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  pushq %rbx
  .cfi_offset %rbx, -24
  pushq %r12
  .cfi_offset %r12, -32
  pushq %r13
  .cfi_offset %r13, -40
  pushq %r14
  .cfi_offset %r14, -48
  movq %r8, %rbx
  movq %r9, %r12
  movq %rsi, %r13
  movq %rcx, %r14
  testq %r14, %r14
  jz 1f
  movq %r14, %rbp
1:
  call sframepp_backtrace_here
2:
  leaq 32(%rsp), %rbp
  movq %rbx, %rdi
  movq %r13, %rsi
  movq %r12, %rdx
  leaq 2b(%rip), %rcx
  movq %rsp, %r8
  movq %rbp, %r9
  testq %r14, %r14
  cmovnzq %r14, %r9
  movq $0, (%rdx)
  testq %r14, %r14
  jz 3f
  movq %r14, %rbp
3:
  call sframepp_backtrace_walk_on
  leaq 32(%rsp), %rbp
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size sfpp_test_both, .-sfpp_test_both
)");

namespace {

class BacktraceEntryTest : public BacktraceTest {};

// The register entry (backtrace_from, exact PC), walked repeatedly from the
// same registers: the first walk fills the memo, the next ones take its
// straight run, compiled from C++ (the in-process entry's is assembly),
// over SP- and FP-based frames. Frame 0 is given as the call's return
// address - 1, an exact PC inside the call with the return address's rule.
[[gnu::noinline]] void walks_from_registers(Traces& t) {
  std::uint64_t regs[3];
  sfpp_test_caller_regs(regs);
  static void* outs[3][kMax];
  sframe::BacktraceResult results[3] = {};
  int walks = 3;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i)
    results[i] = sframe::backtrace_from(std::span<void*>(outs[i], kMax), regs[0] - 1, regs[1], regs[2]);
  t.ours.assign(outs[2], outs[2] + results[2].size);
  t.result = results[2];
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(std::equal(outs[i], outs[i] + results[i].size, t.ours.begin(), t.ours.end())) << i;
  void* ref[kMax];
  t.glibc.assign(ref, ref + glibc_backtrace_fn()(ref, kMax));
  t.libunwind.assign(ref, ref + unw_backtrace(ref, kMax));
  asm volatile("" ::: "memory");
}

// `bottom` run 24 frames deep in a chain of both CFA kinds (mixed_at), the
// chain where it is and moved 4 KiB down the stack: its walk must equal
// glibc's and libunwind's.
void expect_agree_over_both_cfa_kinds(void (*bottom)(Traces&)) {
  for (const std::size_t pad : {std::size_t{0}, std::size_t{4096}}) {
    Traces t;
    t.bottom = bottom;
    mixed_at(pad, 24, t);
    expect_all_agree(t, 24);
  }
}

TEST_P(BacktraceEntryTest, RegisterEntryRepeatedOverBothCfaKinds) {
  expect_agree_over_both_cfa_kinds(walks_from_registers);
}

// The register entry (exact PC) on a cold walk, right after a flush (the
// cold run, whose first frame is then exact: its value is not its memo
// key), against the same walk through the general loop alone: the same
// frames, stop and address, frame 0 the exact PC given, and the memo the
// cold run filled warm for a third walk.
[[gnu::noinline]] void cold_walks_from_registers(Traces& t) {
  std::uint64_t regs[3];
  sfpp_test_caller_regs(regs);
  sframe::bt::ThreadState* st = sframe::bt::t_state;
  static void* outs[3][kMax];
  sframe::BacktraceResult results[3] = {};
  bool cold_only = false;
  int walks = 3;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i) {
    if (i < 2) {
      sframe::backtrace_flush_cache();
      st->cache_empty = i == 0;  // 1: the general loop alone
    }
    asm volatile("" ::: "memory");
    results[i] = sframe::backtrace_from(std::span<void*>(outs[i], kMax), regs[0] - 1, regs[1], regs[2]);
    if (i == 0) cold_only = st->cache_empty;
  }
  EXPECT_TRUE(cold_only) << "the cold run handed the walk to the general loop";
  for (int i = 0; i < 3; ++i) {
    ASSERT_GT(results[i].size, 0u) << i;
    EXPECT_EQ(outs[i][0], reinterpret_cast<void*>(regs[0] - 1)) << i;
  }
  for (int i : {0, 2}) {
    EXPECT_EQ(results[i].size, results[1].size) << i;
    EXPECT_EQ(results[i].reason, results[1].reason) << i;
    EXPECT_EQ(results[i].address, results[1].address) << i;
    EXPECT_TRUE(std::equal(outs[i], outs[i] + results[i].size, outs[1], outs[1] + results[1].size)) << i;
  }
  t.ours.assign(outs[0], outs[0] + results[0].size);
  t.result = results[0];
  void* ref[kMax];
  t.glibc.assign(ref, ref + glibc_backtrace_fn()(ref, kMax));
  t.libunwind.assign(ref, ref + unw_backtrace(ref, kMax));
  asm volatile("" ::: "memory");
}

TEST_P(BacktraceEntryTest, ColdRunFromAnExactPc) {
  expect_agree_over_both_cfa_kinds(cold_walks_from_registers);
}

TEST_P(BacktraceEntryTest, UnregisteredThreadWalksWhole) {
  // A thread that never registered (as libraries' threads are): no rule
  // cache and no known stack bounds, so every page read is checked by the
  // kernel first; the trace must still be whole, twice in a row (the
  // crash handlers' ucontext_t entry on such threads: StackOverflow tests).
  Traces t[2];
  std::thread([&] {
    for (Traces& each : t) recurse(12, each);
  }).join();
  for (const Traces& each : t) expect_all_agree(each, 12);
}

// --- hostile stacks ---

// Random words on a fake stack (some pointing back into it, some at real
// code addresses, some at nothing): every walk must end, with a reason.
TEST_P(BacktraceEntryTest, CorruptedStackNeverCrashes) {
  Traces real;
  recurse(10, real);
  ASSERT_GT(real.ours.size(), 5u);
  std::mt19937_64 rng(12345);
  std::vector<std::uint64_t> fake(4096);
  const auto base = reinterpret_cast<std::uint64_t>(fake.data());
  (void)base;
  std::uint64_t stack_words[512];
  const auto sbase = reinterpret_cast<std::uint64_t>(stack_words);
  int reasons[16] = {};
  for (int iter = 0; iter < 20000; ++iter) {
    for (auto& w : stack_words) {
      switch (rng() % 5) {
        case 0: w = rng(); break;
        case 1: w = sbase + (rng() % sizeof stack_words); break;
        case 2: w = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]); break;
        case 3: w = 0; break;
        default: w = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]) + rng() % 64 - 32; break;
      }
    }
    asm volatile("" ::: "memory");
    const std::uint64_t pc = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]) + rng() % 16;
    std::uint64_t sp;
    switch (rng() % 4) {
      case 0: sp = rng(); break;
      case 1: sp = base + (rng() % (fake.size() * 8)); break;  // heap: not a stack
      default: sp = sbase + (rng() % sizeof stack_words); break;
    }
    const std::uint64_t fp = rng() % 2 ? sbase + (rng() % sizeof stack_words) : rng();
    void* out[64];
    const sframe::BacktraceResult r = sframe::backtrace_from(out, pc, sp, fp);
    ASSERT_LE(r.size, 64u);
    ++reasons[static_cast<int>(r.reason)];
  }
  // Bad reads, not-increasing CFAs and unknown PCs must all have happened.
  EXPECT_GT(reasons[static_cast<int>(sframe::StopReason::kUnreadableMemory)], 0);
  EXPECT_GT(reasons[static_cast<int>(sframe::StopReason::kNoSFrameForPc)], 0);
}

// Frame 0 with CFA = RBP + 16 and a hostile RBP, once walks with the real
// one have filled the per-depth memo (so the entry's straight run holds the
// FP-based rule for that frame): a CFA below SP + 16 (or wrapping) or above
// the stack's end must be refused before anything is read there - these
// addresses are unmapped, so a read would crash - and the general walk then
// reports the read it refuses.
TEST_P(BacktraceEntryTest, HostileFramePointerAtFrameZero) {
  void* out[64];
  sframe::BacktraceResult r{};
  std::size_t good = 0;
  for (int i = 0; i < 3; ++i) {
    good = sfpp_test_walk_with_fp(out, 64, &r, 0);
    EXPECT_EQ(r.size, good);
    EXPECT_EQ(r.reason, sframe::StopReason::kOutermost) << sframe::describe(r.reason);
  }
  ASSERT_GT(good, 3u);
  int probe = 0;
  const auto sp = reinterpret_cast<std::uint64_t>(&probe);
  for (const std::uint64_t fp : {std::uint64_t{0x10}, ~std::uint64_t{0} - 8, sp + (std::uint64_t{1} << 40),
                                 std::uint64_t{1} << 46}) {
    r = {};
    const std::size_t n = sfpp_test_walk_with_fp(out, 64, &r, fp);
    EXPECT_EQ(n, 1u) << std::hex << fp;
    EXPECT_EQ(r.size, 1u);
    EXPECT_EQ(r.reason, sframe::StopReason::kUnreadableMemory) << sframe::describe(r.reason);
  }
  // And the memo still serves the real frame pointer.
  EXPECT_EQ(sfpp_test_walk_with_fp(out, 64, &r, 0), good);
}

// The stack's end bounds the entry's straight run as it bounds every read:
// with the registered end lowered into a call chain, a walk must stop at
// the first frame whose CFA lies above it, where libunwind says (the SP it
// gives frame k + 1 is frame k's CFA), even though the memo predicts the
// frames beyond and their memory is readable. The end is put after frame 0
// (whose rule saves RBP here: a straight rule other than the plain one),
// after frame 3 and after frame 6.
struct BoundedRun {
  static constexpr int kBounded = 3;
  static constexpr int kFrames[kBounded] = {0, 3, 6};
  bool walked = false;
  std::size_t full = 0;
  std::size_t sizes[kBounded] = {};
  sframe::StopReason reasons[kBounded] = {};
  bool prefix[kBounded] = {};
};

// The SP libunwind gives each frame from the caller's outward (frame k's
// CFA is the SP of frame k + 1), up to 64. Inline: frame 0 is the caller.
[[gnu::always_inline]] inline std::vector<std::uint64_t> libunwind_sps() {
  std::vector<std::uint64_t> sps;
  unw_context_t ctx;
  unw_cursor_t cur;
  unw_getcontext(&ctx);
  unw_init_local(&cur, &ctx);
  do {
    unw_word_t v = 0;
    unw_get_reg(&cur, UNW_REG_SP, &v);
    sps.push_back(v);
  } while (unw_step(&cur) > 0 && sps.size() < 64);
  return sps;
}

[[gnu::noinline]] void bounded_walks(void* arg) {
  auto& b = *static_cast<BoundedRun*>(arg);
  const std::vector<std::uint64_t> sps = libunwind_sps();
  if (sps.size() < 12) return;
  sframe::bt::ThreadState* st = sframe::bt::t_state;
  const std::uint64_t saved = st->hi;
  // Three walks fill the memo, then one per end: frame k's CFA (sps[k + 1])
  // lies above sps[k] + 8, the CFAs before it do not.
  constexpr int kWalks = 3 + BoundedRun::kBounded;
  std::uint64_t ends[kWalks] = {saved, saved, saved};
  for (int j = 0; j < BoundedRun::kBounded; ++j) ends[3 + j] = sps[BoundedRun::kFrames[j]] + 8;
  static void* outs[kWalks][kMax];
  sframe::BacktraceResult results[kWalks] = {};
  // The walks differ only in data (no branch the compiler could split into
  // two call sites, whose frame 0 would differ), and the count is opaque
  // (no peeled copy of the loop).
  int walks = kWalks;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i) {
    st->hi = ends[i];
    results[i] = sframe::backtrace_ex(std::span<void*>(outs[i], kMax));
    st->hi = saved;
  }
  b.walked = true;
  b.full = results[2].size;
  for (int j = 0; j < BoundedRun::kBounded; ++j) {
    const sframe::BacktraceResult& r = results[3 + j];
    b.sizes[j] = r.size;
    b.reasons[j] = r.reason;
    b.prefix[j] = r.size <= b.full && std::equal(outs[3 + j], outs[3 + j] + r.size, outs[2]);
  }
}

TEST_P(BacktraceEntryTest, StackEndBoundsTheStraightRun) {
  BoundedRun b;
  callee_recurse(20, bounded_walks, &b);
  ASSERT_TRUE(b.walked) << "libunwind walked too few frames";
  ASSERT_GT(b.full, 20u);
  for (int j = 0; j < BoundedRun::kBounded; ++j) {
    SCOPED_TRACE(BoundedRun::kFrames[j]);
    EXPECT_EQ(b.sizes[j], static_cast<std::size_t>(BoundedRun::kFrames[j] + 1));
    EXPECT_EQ(b.reasons[j], sframe::StopReason::kUnreadableMemory) << sframe::describe(b.reasons[j]);
    EXPECT_TRUE(b.prefix[j]);
  }
}

TEST_P(BacktraceEntryTest, ReasonsAreReported) {
  void* one[1];
  const sframe::BacktraceResult full = sframe::backtrace_ex(one);
  EXPECT_EQ(full.size, 1u);
  EXPECT_EQ(full.reason, sframe::StopReason::kDepthLimit);
  // A heap "stack" is never read.
  std::vector<std::uint64_t> heap(16, 0);
  void* out[8];
  const auto r = sframe::backtrace_from(out, reinterpret_cast<std::uint64_t>(&capture) + 8,
                                        reinterpret_cast<std::uint64_t>(heap.data()), 0);
  EXPECT_EQ(r.size, 1u);
  EXPECT_EQ(r.reason, sframe::StopReason::kUnreadableMemory);
}

// --- the assembly's straight run against the C++ rule executor ---

// Both walks of sfpp_test_both must give the same frames, stop reason and
// address: on the real stack (the memo warm), with the stack's registered
// end lowered into the chain, with hostile frame pointers, and with the
// callers' frames overwritten by random words, real return addresses and
// stack addresses (restored after each walk). Removing a bound from either
// side makes them differ (the other still stops) or crashes.
struct Differential {
  /// Compare the cold run (after a flush) with the general loop instead
  /// (ColdRunEqualsGeneralLoop).
  bool cold = false;
  bool ran = false;
  int compared = 0;
  int stopped_early = 0;  // walks that ended before the outermost frame
  int cold_only = 0;      // cold walks the cold run took whole
  std::vector<std::string> diffs;
};

// The cold pair: from one frame (as sfpp_test_both), (a) right after
// backtrace_flush_cache() - cache and memo empty: the C++ walk's cold run,
// handing over to the general loop at any frame it does not take - and
// (b) with the memo and cache emptied but the cache marked as used, so
// that the walk goes through the general loop alone (a cache probe and a
// full lookup per frame). One call site for both (the walks differ only
// in data), so that their frames are comparable. `cold_only`: (a) never
// entered the general loop (which marks the cache used).
[[gnu::noinline]] void cold_and_general(void** a, sframe::BacktraceResult* ra, void** b, sframe::BacktraceResult* rb,
                                        std::uint64_t fp, bool* cold_only) {
  sframe::bt::ThreadState* st = sframe::bt::t_state;
  void** outs[2] = {a, b};
  sframe::BacktraceResult* results[2] = {ra, rb};
  bool empty_after[2] = {};
  // No branch on `i` in the loop (clang peeled a first round that had
  // one, giving the walks two call sites).
  int walks = 2;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i) {
    sframe::backtrace_flush_cache();
    st->cache_empty = i == 0;
    asm volatile("" ::: "memory");
    *results[i] = {};
    sfpp_test_walk_with_fp(outs[i], kMax, results[i], fp);
    empty_after[i] = st->cache_empty;
  }
  *cold_only = empty_after[0];
}

void compare_both(Differential& d, const char* what, std::uint64_t detail, std::uint64_t fp) {
  static void* a[kMax];
  static void* b[kMax];
  sframe::BacktraceResult ra{}, rb{};
  if (d.cold) {
    bool cold_only = false;
    cold_and_general(a, &ra, b, &rb, fp, &cold_only);
    d.cold_only += cold_only ? 1 : 0;
  } else {
    sfpp_test_both(a, kMax, &ra, fp, b, &rb);
  }
  ++d.compared;
  if (ra.reason != sframe::StopReason::kOutermost) ++d.stopped_early;
  const bool same = ra.size == rb.size && ra.reason == rb.reason && ra.address == rb.address &&
                    std::equal(a, a + ra.size, b);
  if (!same && d.diffs.size() < 8) {
    char buf[256];
    std::snprintf(buf, sizeof buf, d.cold ? "%s (0x%llx): cold %zu frames %s @0x%llx, general %zu frames %s @0x%llx"
                                          : "%s (0x%llx): asm %zu frames %s @0x%llx, C++ %zu frames %s @0x%llx",
                  what,
                  static_cast<unsigned long long>(detail), ra.size,
                  std::string(sframe::stop_reason_name(ra.reason)).c_str(),
                  static_cast<unsigned long long>(ra.address), rb.size,
                  std::string(sframe::stop_reason_name(rb.reason)).c_str(),
                  static_cast<unsigned long long>(rb.address));
    d.diffs.push_back(std::string(buf) + (d.cold ? "\ncold:\n" : "\nasm:\n") + dump(std::vector<void*>(a, a + ra.size)) +
                      (d.cold ? "general:\n" : "C++:\n") + dump(std::vector<void*>(b, b + rb.size)));
  }
}

[[gnu::noinline]] void differential_walks(void* arg) {
  auto& d = *static_cast<Differential*>(arg);
  const std::vector<std::uint64_t> sps = libunwind_sps();
  if (sps.size() < 20) return;
  d.ran = true;
  for (int i = 0; i < 3; ++i) compare_both(d, "warm", 0, 0);
  // The registered end lowered to just above frame k's CFA.
  sframe::bt::ThreadState* st = sframe::bt::t_state;
  const std::uint64_t saved_hi = st->hi;
  for (std::size_t k = 1; k + 1 < sps.size(); ++k) {
    for (const std::uint64_t end : {sps[k], sps[k] + 8, sps[k] + 16}) {
      st->hi = end;
      compare_both(d, "stack end", end, 0);
      st->hi = saved_hi;
    }
  }
  // Hostile frame pointers at frame 0 (CFA = RBP + 16).
  const std::uint64_t here = sps[0];
  for (const std::uint64_t fp :
       {std::uint64_t{0x10}, ~std::uint64_t{0} - 8, here + (std::uint64_t{1} << 40), std::uint64_t{1} << 46, here - 64,
        here + 8, sps[3], sps[5] - 16, sps[8] + 24, saved_hi - 16, saved_hi - 8, saved_hi}) {
    compare_both(d, "frame pointer", fp, fp);
  }
  // Random words in the callers' frames above this function's own: the
  // 20 levels of callee_recurse, not the test's frames beyond (the
  // restore would overwrite what the test stored there meanwhile).
  const std::uint64_t lo = sps[1], hi = sps[20];
  const std::size_t words = static_cast<std::size_t>((hi - lo) / 8);
  auto* slots = reinterpret_cast<std::uint64_t*>(lo);
  std::vector<std::uint64_t> saved(slots, slots + words);
  std::vector<std::uint64_t> ras;  // real return addresses (the memo's keys)
  for (std::size_t k = 1; k < sps.size(); ++k) ras.push_back(*reinterpret_cast<std::uint64_t*>(sps[k] - 8));
  std::mt19937_64 rng(20261124);
  for (int iter = 0; iter < 3000; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) {
      const std::size_t at = rng() % words;
      std::uint64_t v;
      switch (rng() % 6) {
        case 0: v = ras[rng() % ras.size()]; break;
        case 1: v = lo + (rng() % (hi - lo + 4096)) - 2048; break;
        case 2: v = rng(); break;
        case 3: v = 0; break;
        case 4: v = saved_hi - 8 * (rng() % 4); break;
        default: v = slots[rng() % words]; break;
      }
      asm volatile("" ::: "memory");
      slots[at] = v;
    }
    const bool lowered = rng() % 4 == 0;
    if (lowered) st->hi = sps[1 + rng() % (sps.size() - 1)] + 8 * (rng() % 3);
    compare_both(d, "random words", static_cast<std::uint64_t>(iter), 0);
    st->hi = saved_hi;
    std::copy(saved.begin(), saved.end(), slots);
    asm volatile("" ::: "memory");
  }
}

TEST_P(BacktraceEntryTest, AssemblyRunEqualsExecutor) {
  Differential d;
  callee_recurse(24, differential_walks, &d);
  ASSERT_TRUE(d.ran) << "libunwind walked too few frames";
  EXPECT_GT(d.compared, 3000);
  // The hostile cases must have stopped walks, or they tested nothing.
  EXPECT_GT(d.stopped_early, 1000);
  for (const std::string& s : d.diffs) ADD_FAILURE() << s;
}

// The cold run (cold_run in fast_runs.hpp: the first walk after a flush)
// against the general loop, over the same cases as AssemblyRunEqualsExecutor
// (the real stack, its end lowered into the chain, hostile frame pointers,
// random words in the callers' frames): the same frames, stop reason and
// address. The cold run stops short of every frame it cannot take and
// leaves the stop to the general loop, so removing one of its bounds (the
// stack range, the CFA check, the FP-based rule's known FP) makes it walk
// on where the general loop stops.
TEST_P(BacktraceEntryTest, ColdRunEqualsGeneralLoop) {
  // The ready table's slots have bucket rules (BucketRulesAgreeWithTheRows),
  // which the cold run steps where they answer: these walks cover them.
  const sframe::bt::Table* t = sframe::bt::g_table.load();
  ASSERT_TRUE(t && !t->map_slots.slots.empty());
  ASSERT_TRUE(std::any_of(t->map_slots.slots.begin(), t->map_slots.slots.end(),
                          [](const sframe::detail::ModuleHint::Slot& s) { return s.brules != nullptr; }));
  Differential d;
  d.cold = true;
  callee_recurse(24, differential_walks, &d);
  ASSERT_TRUE(d.ran) << "libunwind walked too few frames";
  EXPECT_GT(d.compared, 3000);
  EXPECT_GT(d.stopped_early, 1000);
  // Walks the cold run took whole (the unchanged stack's, at least).
  EXPECT_GE(d.cold_only, 3);
  for (const std::string& s : d.diffs) ADD_FAILURE() << s;
}

// Before every module is built (defer_background_start keeps some
// waiting), the table has no bucket rules (assemble()): the cold run then
// takes every frame's rule from the rows, and must still give the general
// loop's frames, stop and address over ColdRunEqualsGeneralLoop's cases.
struct UnreadyDifferential {
  sframe::BacktraceOptions options;
  Differential d;
  bool inited = false;
  std::size_t deferred = 0;
  bool any_bucket_rules = true;
};

// Inits from within the chain (its module on the initialising stack, so
// built; modules off it deferred) and notes the table it made.
[[gnu::noinline]] void init_in_chain(void* arg) {
  auto& u = *static_cast<UnreadyDifferential*>(arg);
  u.inited = static_cast<bool>(sframe::backtrace_init(u.options));
  const sframe::bt::Table* t = sframe::bt::g_table.load();
  if (!u.inited || !t) return;
  u.deferred = t->deferred;
  u.any_bucket_rules = std::any_of(t->map_slots.slots.begin(), t->map_slots.slots.end(),
                                   [](const sframe::detail::ModuleHint::Slot& s) { return s.brules != nullptr; });
}

TEST_P(BacktraceEntryTest, ColdRunWithoutBucketRulesEqualsGeneralLoop) {
  UnreadyDifferential u;
  u.options = GetParam().options;
  u.options.defer_background_start = true;
  // Other options than SetUp's: init builds the modules afresh rather than
  // keep the ready ones.
  u.options.release_cfi_pages = !u.options.release_cfi_pages;
  u.d.cold = true;
  callee_recurse(2, init_in_chain, &u);
  ASSERT_TRUE(u.inited);
  ASSERT_GT(u.deferred, 0u) << "libraries off the initialising stack wait for the background thread";
  ASSERT_FALSE(u.any_bucket_rules) << "a table with modules waiting has no bucket rules";
  callee_recurse(24, differential_walks, &u.d);
  ASSERT_EQ(sframe::bt::g_table.load()->deferred, u.deferred) << "nothing was built meanwhile";
  ASSERT_TRUE(u.d.ran) << "libunwind walked too few frames";
  EXPECT_GT(u.d.compared, 3000);
  EXPECT_GT(u.d.stopped_early, 1000);
  EXPECT_GE(u.d.cold_only, 3);
  for (const std::string& s : u.d.diffs) ADD_FAILURE() << s;
  sframe::backtrace_start_background();
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  const sframe::bt::Table* ready = sframe::bt::g_table.load();
  EXPECT_TRUE(std::any_of(ready->map_slots.slots.begin(), ready->map_slots.slots.end(),
                          [](const sframe::detail::ModuleHint::Slot& s) { return s.brules != nullptr; }))
      << "the ready table has bucket rules";
}

// The ready table's bucket rules (build_slots(): per RowIndex bucket, the
// compiled rule of the bucket's first row where it has one of the
// commonest shapes), at every offset each slot's rows cover, against the
// rows themselves: where bucket_rule_at() answers, its row is the one
// RowIndex::View::row_id_at() finds for the offset, rule_of_bucket() of
// its bits is that row's compiled rule and gives the same memo step code.
// An answer past the bucket's second boundary (the test dropped), or a
// wrong shape's bits, gives another row or rule at some offset.
TEST_P(BacktraceEntryTest, BucketRulesAgreeWithTheRows) {
  const sframe::bt::Table* t = sframe::bt::g_table.load();
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->deferred, 0u) << "the table is ready (SetUp waited)";
  std::size_t slots = 0, offsets = 0, shaped = 0, hits = 0, bad = 0;
  std::string first_bad;
  for (const auto* table_slots : {&t->map_slots, &t->extra_slots}) {
    for (const sframe::detail::ModuleHint::Slot& slot : table_slots->slots) {
      if (!slot.compact) continue;
      ASSERT_NE(slot.brules, nullptr) << "a ready table's slot with compiled rows has bucket rules";
      ++slots;
      for (std::uint64_t off = 0; off < slot.rows.span(); ++off) {
        ++offsets;
        const std::uint32_t row = slot.rows.row_id_at(off);
        const bool valid = row < sframe::RowIndex::kNotCovered;
        if (valid && sframe::detail::bucket_rule_of(slot.compact[row]) != 0) ++shaped;
        const sframe::detail::BucketHit hit = sframe::detail::bucket_rule_at(slot, off);
        if (hit.rule == 0) continue;
        ++hits;
        const sframe::CompactRule rule = sframe::detail::rule_of_bucket(hit.rule);
        if (!valid || hit.row != row || !(rule == slot.compact[row]) ||
            sframe::bt::straight_code(rule) != slot.codes[row]) {
          if (bad++ == 0)
            first_bad = "offset 0x" + std::to_string(off) + " of the slot at " + std::to_string(slot.begin) +
                        ": bucket row " + std::to_string(hit.row) + ", rows' " + std::to_string(row);
        }
      }
    }
  }
  EXPECT_GE(slots, 4u);
  EXPECT_EQ(bad, 0u) << first_bad;
  // Most offsets whose row has a shape are answered (a bucket's first row
  // covers most of it), or the walk's fast path is rarely taken.
  EXPECT_GT(hits, shaped / 2) << offsets << " offsets, " << shaped << " with a shaped row";
}

// bucket_rule_of() gives bits exactly for the three shapes (the RA at
// CFA - 8; CFA = SP + 8k with the FP unchanged or saved at CFA - 8j, or
// CFA = FP + 8k with the FP saved), and rule_of_bucket() gives the rule back
// unchanged; every other rule (flags, offsets out of range or not a
// multiple of 8) gets 0, which a walk reads as "take the rows".
TEST(BucketRule, NamesItsShapesOnly) {
  using sframe::CompactRule;
  const std::uint16_t sp = CompactRule::kValid | CompactRule::kRaOnStack;
  const std::uint16_t extra[] = {0, CompactRule::kFpOnStack, CompactRule::kCfaBaseFp | CompactRule::kFpOnStack,
                                 CompactRule::kCfaBaseFp, CompactRule::kRaMangled, CompactRule::kSignal,
                                 CompactRule::kRaInRegister, CompactRule::kNoSFrame};
  int named = 0;
  for (const std::uint16_t more : extra) {
    for (const std::uint16_t base : {sp, std::uint16_t(sp & ~CompactRule::kValid)}) {
      for (const std::int32_t cfa : {-8, 0, 4, 8, 16, 24, 4088, 4096, 131064, 131072}) {
        for (const int ra : {-1, -2, 0}) {
          for (const int fp : {0, -1, -2, -7, -31, -32, 1}) {
            CompactRule r;
            r.flags = static_cast<std::uint16_t>(base | more);
            r.cfa_offset = cfa;
            r.ra_offset_by_8 = static_cast<std::int8_t>(ra);
            r.fp_offset_by_8 = static_cast<std::int8_t>(fp);
            const bool fp_saved = (more & CompactRule::kFpOnStack) != 0;
            const bool fp_based = (more & CompactRule::kCfaBaseFp) != 0;
            const bool shape = base == sp && ra == -1 && cfa % 8 == 0 &&
                               (more == 0 ? fp == 0 && cfa >= 8 && cfa < 8 * 16384
                                : fp_saved && (more & ~(CompactRule::kFpOnStack | CompactRule::kCfaBaseFp)) == 0
                                    ? fp <= -1 && fp >= -31 && cfa >= (fp_based ? 0 : 8) && cfa < 8 * 512
                                    : false);
            const sframe::detail::BucketRule b = sframe::detail::bucket_rule_of(r);
            EXPECT_EQ(b != 0, shape) << r.flags << " " << cfa << " " << ra << " " << fp;
            if (b != 0) {
              ++named;
              EXPECT_TRUE(sframe::detail::rule_of_bucket(b) == r) << r.flags << " " << cfa << " " << fp;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(named, 20);
}

INSTANTIATE_TEST_SUITE_P(Sections, BacktraceEntryTest, section_params(), param_name);

}  // namespace
