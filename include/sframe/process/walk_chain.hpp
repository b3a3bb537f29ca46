// SPDX-License-Identifier: MIT
// sframepp: the unwind source chain per PC shared by `sframe stack` (a live
// process, LoadedModules::walk) and `sframe perf script` (a sample's copied
// stack): the module's own SFrame section, else SFrame generated from its
// .eh_frame (generated on first need), else the frame-pointer convention,
// checked against the executable mappings.
#pragma once

#include <algorithm>
#include <span>

#include "sframe/process/process.hpp"
#include "sframe/unwind/unwind.hpp"

// Library: libsframepp-process (sframepp::process; header-only). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)
namespace sframe::process {

/// Walks from `start` as LoadedModules::walk() documents, over any address
/// space `space` that provides: `const ModuleMap& unwind_map()` and
/// `extra_map()` (fetched again after each generation), `bool
/// generated(std::uint64_t lookup_pc)` (the PC's module's primary section
/// was generated, not its own), `bool generate_for(std::uint64_t
/// lookup_pc)` (generate now if pending; true when that added unwind
/// information), `bool executable(std::uint64_t addr)` and
/// `std::span<const AddressRange> signal_trampolines()`. `cache` (optional)
/// caches the primary map's rules. Not async-signal-safe.
template <class Space, MemoryReader M>
WalkResult walk_chain(Space& space, const M& mem, const Regs& start, std::span<Frame> frames,
                      std::span<RuleSource> sources, const WalkOptions& opt, RuleCache* cache = nullptr) {
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
  sframe_opt.signal_trampolines = space.signal_trampolines();
  // The frame-pointer step alone: an empty map, nothing else recognised.
  UnwindOptions fp_opt;
  fp_opt.fp_fallback = true;
  fp_opt.detect_sigreturn_code = false;
  const ModuleMap no_modules{std::span<sframe::Module>()};

  Regs regs = start;
  const ArchRegs ar = arch_regs(regs.arch);
  CodeAddress pc = CodeAddress::exact(regs.pc);
  frames[0] = detail::frame_of(regs, pc, 0);
  sources[0] = RuleSource::kNone;
  std::size_t n = 1;
  if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
  detail::CfaChain chain;

  for (;;) {
    const std::uint64_t lpc = pc.lookup_pc();
    detail::StepOutcome s;
    RuleSource src = RuleSource::kNone;
    // Each step is taken on `regs`/`pc` in place: a Stepper leaves both
    // unchanged when it fails (detail::Stepper::step), so a failed source
    // hands the next one the same frame without a copy of the registers
    // (a Regs copy per try was a third of this loop's instructions).
    for (;;) {
      // (1) the module's own section (or its generated one when it has none).
      // The map is rebuilt (a new generation) after each generation:
      // cached rules of the old one (e.g. "no SFrame") are dropped.
      if (cache) cache->sync(space.unwind_map().generation());
      s = detail::Stepper<M>(space.unwind_map(), mem, sframe_opt, cache).step(regs, pc);
      if (s.stepped || s.reason != StopReason::kNoSFrameForPc) {
        src = (s.this_flags & kFrameSignal) ? RuleSource::kSignalFrame
              : space.generated(lpc)         ? RuleSource::kGenerated
                                             : RuleSource::kSFrameSection;
        break;
      }
      // (2) SFrame generated for the .eh_frame FDEs the own section lacks.
      s = detail::Stepper<M>(space.extra_map(), mem, sframe_opt, nullptr).step(regs, pc);
      if (s.stepped || s.reason != StopReason::kNoSFrameForPc) {
        src = (s.this_flags & kFrameSignal) ? RuleSource::kSignalFrame : RuleSource::kGenerated;
        break;
      }
      // Generation pending for this PC's module: generate, then try again.
      if (!space.generate_for(lpc)) break;
    }
    if (!s.stepped && s.reason == StopReason::kNoSFrameForPc && opt.fp_fallback && regs.arch != Arch::kS390x) {
      // (3) frame pointers, only where they give a plausible caller: on a
      // copy, which is kept only when the caller passes the checks.
      Regs fp_next = regs;
      CodeAddress fp_pc = pc;
      const detail::StepOutcome f = detail::Stepper<M>(no_modules, mem, fp_opt, nullptr).step(fp_next, fp_pc);
      if (f.stepped) {
        const std::uint64_t ra = fp_pc.value();
        const std::optional<std::uint64_t> sp = regs.get(ar.sp);
        if (ra != 0 && !space.executable(ra)) {
          res.fp_rejected = true;
          res.fp_rejected_ra = ra;
        } else if (sp && f.cfa <= *sp) {
          res.fp_rejected = true;
          res.fp_rejected_cfa = true;
        } else {
          s = f;
          regs = fp_next;
          pc = fp_pc;
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
    if (const std::optional<StopReason> why = chain.accept(s)) return finish(n, *why, s.cfa);
    frames[n - 1].cfa = s.cfa;
    if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
    if (n == cap) return finish(n, StopReason::kDepthLimit);
    frames[n] = detail::frame_of(regs, pc, s.caller_flags);
    sources[n] = RuleSource::kNone;
    ++n;
  }
}


}  // namespace sframe::process
#pragma GCC visibility pop
