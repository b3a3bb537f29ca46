// SPDX-License-Identifier: MIT
// The Stepper's cold paths (include/sframe/unwind/detail/unwind_step.hpp): rows
// that do not compact to a CompactRule (FLEX rules, spec v3 §3.2;
// register-saved RA/FP), the frame-pointer fallback and the x86-64 signal
// frame. They read memory through the Memory interface, so one copy serves
// every reader; the cached per-frame path (apply_rule) stays in the header.
#include "sframe/unwind/unwind.hpp"

namespace sframe::detail {

namespace {

// Evaluates base + offset (wrapping, as the hardware would), dereferenced
// when asked. nullopt + `fail` set on a missing register or failed read.
std::optional<std::uint64_t> eval(const Memory& mem, const Rule& rule, std::uint64_t cfa, const Regs& regs,
                                  StepOutcome& fail, std::uint64_t lpc) noexcept {
  std::uint64_t base;
  if (rule.base == Rule::Base::kCfa) {
    base = cfa;
  } else if (regs.has(rule.regnum)) {
    base = regs.dwarf[rule.regnum];
  } else {
    fail = stop(StopReason::kBadRule, lpc);
    return std::nullopt;
  }
  const std::uint64_t addr = base + static_cast<std::uint64_t>(static_cast<std::int64_t>(rule.offset));
  if (!rule.deref) return addr;
  std::optional<std::uint64_t> v = mem.read_word(addr);
  if (!v) fail = stop(StopReason::kUnreadableMemory, addr);
  return v;
}

}  // namespace

StepOutcome step_row(const Memory& mem, const UnwindOptions& opt, Regs& regs, CodeAddress& pc, const FrameRow& row,
                     std::uint64_t lpc) noexcept {
  if (row.outermost()) return stop(StopReason::kOutermost, 0);
  const ArchRegs ar = arch_regs(regs.arch);
  StepOutcome out;
  if (row.cfa.kind != Rule::Kind::kExpr || row.cfa.base != Rule::Base::kRegister)
    return stop(StopReason::kBadRule, lpc);
  const std::optional<std::uint64_t> cfa = eval(mem, row.cfa, 0, regs, out, lpc);
  if (!cfa) return out;

  std::uint64_t ra;
  if (row.ra.kind == Rule::Kind::kExpr) {
    const std::optional<std::uint64_t> v = eval(mem, row.ra, *cfa, regs, out, lpc);
    if (!v) return out;
    ra = *v;
  } else if (regs.has(ar.ra)) {
    // RA unchanged: still in LR/r14, known only in the topmost frame or
    // right after a signal frame (the validity mask enforces it).
    ra = regs.dwarf[ar.ra];
  } else {
    return stop(StopReason::kBadRule, lpc);
  }

  std::optional<std::uint64_t> fp;
  if (row.fp.kind == Rule::Kind::kExpr) {
    // An unreadable FP slot: the caller's FP is unknown (see apply_rule).
    StepOutcome fp_fail;
    fp = eval(mem, row.fp, *cfa, regs, fp_fail, lpc);
    if (!fp && fp_fail.reason != StopReason::kUnreadableMemory) return fp_fail;
  } else {
    fp = regs.get(ar.fp);
  }

  if (row.ra_mangled && regs.arch == Arch::kAarch64) {
    const std::uint64_t stripped = strip_pauth(ra, opt);
    if (stripped != ra) out.caller_flags |= kFramePauthStripped;
    ra = stripped;
  }
  out.stepped = true;
  out.cfa = *cfa;
  become_caller(regs, pc, *cfa, ra, fp.has_value(), fp.value_or(0));
  return out;
}

StepOutcome step_frame_pointer(const Memory& mem, const UnwindOptions& opt, Regs& regs, CodeAddress& pc,
                               std::uint64_t lpc) noexcept {
  const ArchRegs ar = arch_regs(regs.arch);
  const std::optional<std::uint64_t> fp = regs.get(ar.fp);
  if (!fp || *fp == 0) return stop(StopReason::kNoSFrameForPc, lpc);
  // Both conventions keep the frame record {caller FP, RA} at FP; on
  // x86-64 it sits right below the CFA, on AArch64 the CFA is unknown and
  // FP + 16 is its lower bound.
  const std::optional<std::uint64_t> caller_fp = mem.read_word(*fp);
  if (!caller_fp) return stop(StopReason::kUnreadableMemory, *fp);
  std::optional<std::uint64_t> ra = mem.read_word(*fp + 8);
  if (!ra) return stop(StopReason::kUnreadableMemory, *fp + 8);
  if (!opt.code_ranges.empty() &&
      !in_ranges(opt.code_ranges, regs.arch == Arch::kAarch64 ? strip_pauth(*ra, opt) : *ra))
    return stop(StopReason::kNoSFrameForPc, lpc);
  StepOutcome out;
  out.stepped = true;
  out.cfa = *fp + 16;
  out.caller_flags = kFrameFpFallback;
  std::uint64_t ret = *ra;
  if (regs.arch == Arch::kAarch64) {
    const std::uint64_t stripped = strip_pauth(ret, opt);
    if (stripped != ret) out.caller_flags |= kFramePauthStripped;
    ret = stripped;
  }
  regs.valid = 0;
  regs.set(ar.sp, out.cfa);
  regs.set(ar.fp, *caller_fp);
  regs.pc = ret;
  pc = CodeAddress::return_address(ret);
  return out;
}

// x86-64 Linux rt_sigframe: the interrupted context is in the ucontext_t
// at the trampoline's SP (see x86_64_sigframe).
StepOutcome step_sigframe(const Memory& mem, Regs& regs, CodeAddress& pc) noexcept {
  const std::optional<std::uint64_t> sp = regs.sp();
  if (!sp) return stop(StopReason::kBadRule, pc.lookup_pc());
  Regs next;
  next.arch = regs.arch;
  const std::uint64_t gregs = *sp + x86_64_sigframe::kGregsOffset;
  for (unsigned i = 0; i < x86_64_sigframe::kGregToDwarf.size(); ++i) {
    const std::uint64_t at = gregs + 8u * i;
    const std::optional<std::uint64_t> v = mem.read_word(at);
    if (!v) return stop(StopReason::kUnreadableMemory, at);
    if (i == x86_64_sigframe::kRegRip) next.pc = *v;
    else next.set(x86_64_sigframe::kGregToDwarf[i], *v);
  }
  StepOutcome out;
  out.stepped = true;
  out.cfa = *sp;
  out.this_flags = kFrameSignal;
  out.cfa_unchecked = true;
  regs = next;
  pc = CodeAddress::exact(next.pc);
  return out;
}

}  // namespace sframe::detail
