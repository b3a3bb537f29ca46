// SPDX-License-Identifier: MIT
// sframepp: the in-process entry behind sframe::backtrace(),
// sframepp_backtrace_here: the warm straight run in x86-64 assembly, which
// jumps to the C++ rest of the walk (sframepp_backtrace_walk_on in
// backtrace.cpp) for anything else. Async-signal-safe like the walk.
#include <cstddef>

#include "backtrace_internal.hpp"

#if defined(__x86_64__) && defined(__linux__)

// Layout facts the assembly entry below relies on, checked at compile time
// (offsetof on ThreadState, which is not standard-layout for its rule
// cache: GCC and Clang support it for classes without virtual bases).
#define SFPP_TS_LO 0x0
#define SFPP_TS_HI 0x8
#define SFPP_TS_BUSY 0x20
#define SFPP_TS_HITS 0x28
#define SFPP_TS_MEMO_GEN 0x468
#define SFPP_TS_KEY 0x470
#define SFPP_TS_STEP 0xc78
#define SFPP_MEMO_DEPTH 256
#define SFPP_STOP_OUTERMOST 0
#define SFPP_STOP_DEPTH_LIMIT 4
#define SFPP_STOP_ZERO_PC 6
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(sframe::bt::ThreadState, lo) == SFPP_TS_LO);
static_assert(offsetof(sframe::bt::ThreadState, hi) == SFPP_TS_HI);
static_assert(offsetof(sframe::bt::ThreadState, busy) == SFPP_TS_BUSY && sizeof(int) == 4);
static_assert(offsetof(sframe::bt::ThreadState, cache.hits) == SFPP_TS_HITS);
static_assert(offsetof(sframe::bt::ThreadState, memo_generation) == SFPP_TS_MEMO_GEN);
static_assert(offsetof(sframe::bt::ThreadState, memo.key) == SFPP_TS_KEY);
static_assert(offsetof(sframe::bt::ThreadState, memo.step) == SFPP_TS_STEP);
#pragma GCC diagnostic pop
static_assert(sframe::bt::kMemoDepth == SFPP_MEMO_DEPTH);
static_assert(static_cast<int>(sframe::StopReason::kDepthLimit) == SFPP_STOP_DEPTH_LIMIT);
static_assert(static_cast<int>(sframe::StopReason::kOutermost) == SFPP_STOP_OUTERMOST);
static_assert(sframe::bt::StraightCode::kOutermostBit == (std::int64_t{1} << 49));
static_assert(static_cast<int>(sframe::StopReason::kZeroPc) == SFPP_STOP_ZERO_PC);
static_assert(offsetof(sframe::BacktraceResult, size) == 0 && offsetof(sframe::BacktraceResult, reason) == 8 &&
              offsetof(sframe::BacktraceResult, address) == 16 && sizeof(sframe::StopReason) == 1);
#define SFPP_STR2(x) #x
#define SFPP_STR(x) SFPP_STR2(x)

// sframepp_backtrace_here(out = rdi, size = rsi, result = rdx): frame 0 is
// its caller's, with the registers as they are right after the call returns
// (PC = the return address, SP = the address above it, RBP), whatever the
// compiler does with the C++ around it. The warm path - the memo's
// straight rules (Memo::step, straight_code) applied as the one rule
// executor, detail::apply_rule, applies the memo's rules: it takes a frame
// only where the executor would step it, and leaves every other case
// (and every stop) to the C++ rest of the walk, which then takes the frame
// through the executor; the differential test (backtrace_entry_test.cpp,
// AssemblyRunEqualsExecutor) pins the two together - is written here
// rather than compiled: its speed turned on code layout the compiler does
// not control (the same C++ ran faster or slower depending on where the
// loop fell), and here it needs only scratch registers and the red
// zone (it calls nothing). Any other case jumps to the C++ rest of the walk
// with the registers intact.
//
// Registers: rax ThreadState, rdi out, rcx PC (value) of frame n, r8 its
// SP, r9 FP, r10 n, rdx the stack's end, r11/rsi scratch. Red zone: -8
// result, -16 size, -24 the stop's address, -32 its saved code. CFA = RSP +
// 8 throughout (nothing is pushed), as the CFI says.
asm(R"(
  .text
  # The run's count and the caller's saved words written back, the thread
  # no longer busy; %rdx = the BacktraceResult (both exits of the run).
  .macro sfpp_publish
  movq -24(%rsp), %rsi
  movq -32(%rsp), %r11
  movq %r11, (%rsi)
  addq %r10, )" SFPP_STR(SFPP_TS_HITS) R"((%rax)
  movl $0, )" SFPP_STR(SFPP_TS_BUSY) R"((%rax)
  movq -8(%rsp), %rdx
  .endm
  # Returns the count (%r10) with the stop reason `why` and no address.
  .macro sfpp_return why
  movb $\why, 8(%rdx)
  movq $0, 16(%rdx)
  movq %r10, %rax
  ret
  .endm
  .p2align 6
  .globl sframepp_backtrace_here
  .type sframepp_backtrace_here,@function
sframepp_backtrace_here:
  .cfi_startproc
  movq (%rsp), %rcx
  leaq 8(%rsp), %r8
  movq %rbp, %r9
  movq _ZN6sframe2bt7t_stateE@gottpoff(%rip), %rax
  movq %fs:(%rax), %rax
  testq %rax, %rax
  jz .Lsfpp_general
  cmpl $0, )" SFPP_STR(SFPP_TS_BUSY) R"((%rax)
  jne .Lsfpp_general
  movq _ZN6sframe2bt12g_generationE@GOTPCREL(%rip), %r10
  movq (%r10), %r10
  cmpq %r10, )" SFPP_STR(SFPP_TS_MEMO_GEN) R"((%rax)
  jne .Lsfpp_general
  # SP in [lo, hi)
  movq %r8, %r10
  subq )" SFPP_STR(SFPP_TS_LO) R"((%rax), %r10
  movq )" SFPP_STR(SFPP_TS_HI) R"((%rax), %r11
  subq )" SFPP_STR(SFPP_TS_LO) R"((%rax), %r11
  cmpq %r11, %r10
  jae .Lsfpp_general
  movl $1, )" SFPP_STR(SFPP_TS_BUSY) R"((%rax)
  # Frame 0's key: its lookup PC + 1, the return address itself.
  cmpq %rcx, )" SFPP_STR(SFPP_TS_KEY) R"((%rax)
  jne .Lsfpp_not_busy
  movq %rdx, -8(%rsp)
  movq %rsi, -16(%rsp)
  # The output's end as a stop (code 0) in the memo, saved and put back.
  movl $)" SFPP_STR(SFPP_MEMO_DEPTH) R"(, %r10d
  cmpq %r10, %rsi
  cmovbq %rsi, %r10
  leaq )" SFPP_STR(SFPP_TS_STEP) R"((%rax,%r10,8), %r10
  movq %r10, -24(%rsp)
  movq (%r10), %r11
  movq %r11, -32(%rsp)
  movq $0, (%r10)
  movq )" SFPP_STR(SFPP_TS_HI) R"((%rax), %rdx
  xorl %r10d, %r10d
  jmp .Lsfpp_loop

  # Any other straight code: r11 = code, flags from its test.
.Lsfpp_special:
  je .Lsfpp_stop
  btq $49, %r11
  jc .Lsfpp_outermost
  movl %r11d, %esi
  sarq $32, %r11
  btq $16, %r11
  jc 1f
  addq %r8, %rsi
  cmpq %rdx, %rsi
  ja .Lsfpp_stop
  jmp 2f
1:
  addq %r9, %rsi
  cmpq %rdx, %rsi
  ja .Lsfpp_stop
  # CFA >= SP + 16 as signed values (also catches FP + offset wrapping)
  subq $16, %rsi
  cmpq %r8, %rsi
  jl .Lsfpp_stop
  addq $16, %rsi
2:
  movswq %r11w, %r11
  testq %r11, %r11
  jz 3f
  movq (%rsi,%r11), %r9
3:
  movq %rsi, %r11
  jmp .Lsfpp_take

  .p2align 6
.Lsfpp_loop:
  movq )" SFPP_STR(SFPP_TS_STEP) R"((%rax,%r10,8), %r11
  testq %r11, %r11
  jle .Lsfpp_special
  addq %r8, %r11
  cmpq %rdx, %r11
  ja .Lsfpp_stop
.Lsfpp_take:
  movq -8(%r11), %rsi
  movq %rcx, (%rdi,%r10,8)
  addq $1, %r10
  movq %r11, %r8
  movq %rsi, %rcx
  cmpq %rsi, )" SFPP_STR(SFPP_TS_KEY) R"((%rax,%r10,8)
  je .Lsfpp_loop

.Lsfpp_stop:
  sfpp_publish
  movq -16(%rsp), %rsi
  movq %r10, (%rdx)
  testq %r10, %r10
  jz sframepp_backtrace_walk_on
  cmpq %r10, %rsi
  je .Lsfpp_full
  testq %rcx, %rcx
  jz .Lsfpp_zero_pc
  jmp sframepp_backtrace_walk_on
.Lsfpp_full:
  sfpp_return )" SFPP_STR(SFPP_STOP_DEPTH_LIMIT) R"(
.Lsfpp_zero_pc:
  sfpp_return )" SFPP_STR(SFPP_STOP_ZERO_PC) R"(
  # The outermost frame (StraightCode::kOutermost): its PC is the last
  # (frame n < the stop at the output's end, so out[n] is inside).
.Lsfpp_outermost:
  movq %rcx, (%rdi,%r10,8)
  addq $1, %r10
  sfpp_publish
  movq %r10, (%rdx)
  sfpp_return )" SFPP_STR(SFPP_STOP_OUTERMOST) R"(
.Lsfpp_not_busy:
  movl $0, )" SFPP_STR(SFPP_TS_BUSY) R"((%rax)
.Lsfpp_general:
  movq $0, (%rdx)
  jmp sframepp_backtrace_walk_on
  .cfi_endproc
  .size sframepp_backtrace_here, .-sframepp_backtrace_here
  .purgem sfpp_publish
  .purgem sfpp_return
)");

#else  // not x86-64 Linux

extern "C" std::size_t sframepp_backtrace_here(void**, std::size_t, sframe::BacktraceResult* result) noexcept {
  *result = {0, sframe::StopReason::kUnsupported, 0};
  return 0;
}

#endif
