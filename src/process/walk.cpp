// SPDX-License-Identifier: MIT
// Walking the stack of a stopped thread with a source chain per PC: the
// module's own SFrame section, else SFrame generated from its .eh_frame, else
// frame pointers checked against the process's executable mappings.
#include <algorithm>

#include "sframe/process.hpp"
#include "sframe/unwind.hpp"

namespace sframe::process {
namespace {

Regs start_regs(const ThreadRegisters& r) {
#if defined(__aarch64__)
  return Regs::aarch64(r.pc, r.sp, r.fp, r.lr);
#else
  return Regs::amd64(r.pc, r.sp, r.fp);
#endif
}

}  // namespace

std::string_view to_string(RuleSource s) noexcept {
  switch (s) {
    case RuleSource::kNone:
      return "none";
    case RuleSource::kSFrameSection:
      return "sframe";
    case RuleSource::kGenerated:
      return "generated";
    case RuleSource::kFramePointer:
      return "frame-pointer";
    case RuleSource::kSignalFrame:
      return "signal frame";
  }
  return "?";
}

WalkResult LoadedModules::walk(const RemoteMemory& mem, const ThreadRegisters& start, std::span<Frame> frames,
                               std::span<RuleSource> sources, const WalkOptions& opt) {
  WalkResult res;
  const auto finish = [&](std::size_t n, StopReason why, std::uint64_t addr = 0) {
    res.count = n;
    res.reason = why;
    res.address = addr;
    return res;
  };
  const std::size_t cap = std::min(frames.size(), sources.size());
  if (cap == 0) return finish(0, StopReason::kDepthLimit);

  // SFrame steps: no frame-pointer fallback inside the Stepper (the chain
  // below decides), trampolines by address and by code.
  UnwindOptions sframe_opt;
  sframe_opt.fp_fallback = false;
  sframe_opt.signal_trampolines = signal_trampolines();
  // The frame-pointer step alone: an empty map, nothing else recognised.
  UnwindOptions fp_opt;
  fp_opt.fp_fallback = true;
  fp_opt.detect_sigreturn_code = false;
  const ModuleMap no_modules{std::span<sframe::Module>()};

  Regs regs = start_regs(start);
  const ArchRegs ar = arch_regs(regs.arch);
  CodeAddress pc = CodeAddress::exact(regs.pc);
  frames[0] = detail::frame_of(regs, pc, 0);
  sources[0] = RuleSource::kNone;
  std::size_t n = 1;
  if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
  std::uint64_t prev_cfa = 0;
  bool have_prev = false, unchecked = false;

  for (;;) {
    const std::uint64_t lpc = pc.lookup_pc();
    detail::StepOutcome s;
    RuleSource src = RuleSource::kNone;
    Regs next = regs;
    CodeAddress next_pc = pc;
    for (;;) {
      // (1) the module's own section (or its generated one when it has none).
      next = regs;
      next_pc = pc;
      s = detail::Stepper<RemoteMemory>(unwind_map(), mem, sframe_opt, nullptr).step(next, next_pc);
      if (s.stepped || s.reason != StopReason::kNoSFrameForPc) {
        const LoadedModule* m = find(lpc);
        src = (s.this_flags & kFrameSignal) ? RuleSource::kSignalFrame
              : m && m->source == UnwindSource::kGenerated ? RuleSource::kGenerated
                                                             : RuleSource::kSFrameSection;
        break;
      }
      // (2) SFrame generated for the .eh_frame FDEs the own section lacks.
      next = regs;
      next_pc = pc;
      s = detail::Stepper<RemoteMemory>(extra_map(), mem, sframe_opt, nullptr).step(next, next_pc);
      if (s.stepped || s.reason != StopReason::kNoSFrameForPc) {
        src = (s.this_flags & kFrameSignal) ? RuleSource::kSignalFrame : RuleSource::kGenerated;
        break;
      }
      // Generation pending for this PC's module: generate, then try again.
      if (!generate_for(lpc)) break;
    }
    if (!s.stepped && s.reason == StopReason::kNoSFrameForPc && opt.fp_fallback && regs.arch != Arch::kS390x) {
      // (3) frame pointers, only where they give a plausible caller.
      Regs fp_next = regs;
      CodeAddress fp_pc = pc;
      const detail::StepOutcome f = detail::Stepper<RemoteMemory>(no_modules, mem, fp_opt, nullptr).step(fp_next, fp_pc);
      if (f.stepped) {
        const std::uint64_t ra = fp_pc.value();
        const std::optional<std::uint64_t> sp = regs.get(ar.sp);
        if (ra != 0 && !executable(ra)) {
          res.fp_rejected = true;
          res.fp_rejected_ra = ra;
        } else if (sp && f.cfa <= *sp) {
          res.fp_rejected = true;
          res.fp_rejected_cfa = true;
        } else {
          s = f;
          next = fp_next;
          next_pc = fp_pc;
          src = RuleSource::kFramePointer;
        }
      } else if (f.reason == StopReason::kUnreadableMemory) {
        s = f;  // a frame pointer that points nowhere: say where
        src = RuleSource::kFramePointer;
      }
    }
    sources[n - 1] = src;
    if (!s.stepped) return finish(n, s.reason, s.address);
    res.fp_rejected = false;
    res.fp_rejected_ra = 0;
    res.fp_rejected_cfa = false;
    frames[n - 1].flags |= s.this_flags;
    // Strictly up the stack, as sframe::unwind(): the trampoline's CFA may
    // equal its handler's, and the frame after a signal frame may be on
    // another stack (sigaltstack).
    const bool signal_equal = (s.this_flags & kFrameSignal) && s.cfa == prev_cfa;
    if (have_prev && !unchecked && s.cfa <= prev_cfa && !signal_equal)
      return finish(n, StopReason::kCfaNotIncreasing, s.cfa);
    frames[n - 1].cfa = s.cfa;
    prev_cfa = s.cfa;
    have_prev = true;
    unchecked = s.cfa_unchecked;
    regs = next;
    pc = next_pc;
    if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
    if (n == cap) return finish(n, StopReason::kDepthLimit);
    frames[n] = detail::frame_of(regs, pc, s.caller_flags);
    sources[n] = RuleSource::kNone;
    ++n;
  }
}

}  // namespace sframe::process
