// SPDX-License-Identifier: MIT
// sframepp: the unwind loop (templated over the memory reader so that the
// in-process reader inlines). Included by sframe/unwind/unwind.hpp; not a public
// header on its own. Stepper, StepOutcome, in_ranges, strip_pauth and
// frame_of are used by the in-process backtrace and the `sframe stack` tool
// to build their own loops: keep their shape stable. The backtrace's lookup
// accelerators (ModuleHint, bucket rules, lookup_compact) are private to
// the build: src/unwind/module_hint.hpp.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <vector>

#include "sframe/unwind/unwind.hpp"

namespace sframe::detail {

/// What the (non-template) rule lookup found for a lookup PC.
enum class LookupStatus : std::uint8_t {
  kFound,
  /// No module, or no FDE/FRE covers the PC.
  kNoSFrame,
  /// DEFAULT FDE without FREs: the outermost frame (v3 errata).
  kOutermost,
  /// The module's section failed to decode here, or is of another arch.
  kDecodeError,
};

/// Rules for one frame resolved (Section::row applied the header's
/// fixed offsets), so evaluation never needs the Section.
struct LookedUpRules {
  LookupStatus status = LookupStatus::kNoSFrame;
  /// kDecodeError: the decoder's error code.
  std::optional<ErrorCode> error;
  bool signal = false;
  /// `compact` holds the same rules in cacheable form.
  bool compactable = false;
  FrameRow row;
  CompactRule compact;
};

/// The cacheable form of every distinct row of `rows` (an index over `s`),
/// for Module::compact_rows: CompactRule::kValid set where the row has one
/// (DEFAULT FDEs; outermost rows of any type). Allocates; for setup.
std::vector<CompactRule> compile_rows(const RowIndex& rows, const Section& s, Arch arch);

/// Finds the module of runtime `lookup_pc`, then its FDE/FRE (at
/// lookup_pc - bias), and resolves the row for `arch`. `row` is set only
/// when the rules are not `compactable` (else `compact` says everything). Allocation-free,
/// async-signal-safe. Defined in src/unwind/rules.cpp.
LookedUpRules lookup_rules(const ModuleMap& modules, Arch arch, std::uint64_t lookup_pc) noexcept;

/// AArch64 PAuth: drop the signature in the bits above the VA width
/// (sign-extending bit 55, which selects the address-space half), keeping
/// the top byte when top-byte-ignore applies. Pure bit arithmetic: no
/// xpaclri, which would fault on cores without PAuth.
inline std::uint64_t strip_pauth(std::uint64_t ra, const UnwindOptions& o) noexcept {
  const unsigned bits = o.pauth_va_bits < 32 ? 32u : o.pauth_va_bits > 56 ? 56u : o.pauth_va_bits;
  const std::uint64_t top = o.pauth_tbi ? 0xff00000000000000ull : 0;
  const std::uint64_t pac = ~((std::uint64_t{1} << bits) - 1) & ~top;
  return ((ra >> 55) & 1) ? (ra | pac) : (ra & ~pac);
}

/// Outcome of one Stepper::step().
struct StepOutcome {
  /// True: the registers and PC now describe the caller. False: `reason`,
  /// `address` and `error` say why not (as in UnwindResult).
  bool stepped = false;
  StopReason reason = StopReason::kOutermost;
  std::uint64_t address = 0;
  std::optional<ErrorCode> error;
  /// The current frame's CFA (valid when stepped).
  std::uint64_t cfa = 0;
  /// Flags for the current frame (kFrameSignal) and for the caller.
  std::uint8_t this_flags = 0;
  std::uint8_t caller_flags = 0;
  /// Skip the CFA-increase check (the step crossed a signal frame).
  bool cfa_unchecked = false;
};

/// The rule between two frames that every frame loop (unwind(),
/// process::walk_chain(), the in-process backtrace's general walk) applies
/// to a step the Stepper took, kept in one place (spec v3 Appendix A: a
/// tracer stops when the CFA does not move up the stack):
///  - the CFA must lie strictly above the callee's (kCfaNotIncreasing,
///    address: the CFA);
///  - except that a signal frame's CFA may equal its handler's (both are
///    the address of the ucontext), and the step after one whose CFA went
///    unchecked (crossing a signal frame: the interrupted code may run on
///    another stack, sigaltstack) is not compared.
/// The rule executor (apply_rule) applies the same rule to cached rules
/// from CompactFrame::check_cfa, which check_cfa() feeds.
struct CfaChain {
  /// The last accepted frame's CFA (valid when have_prev).
  std::uint64_t prev_cfa = 0;
  bool have_prev = false;
  /// The last step crossed a signal frame: the next CFA is not compared.
  bool unchecked = false;

  /// Whether the next CFA must lie above prev_cfa.
  [[nodiscard]] bool check_cfa() const noexcept { return have_prev && !unchecked; }
  /// Judges `s` (a step taken: s.stepped): std::nullopt and the CFA
  /// recorded when it may be taken, else why the walk ends at it.
  [[nodiscard]] std::optional<StopReason> accept(const StepOutcome& s) noexcept {
    const bool signal_equal = (s.this_flags & kFrameSignal) && s.cfa == prev_cfa;
    if (check_cfa() && s.cfa <= prev_cfa && !signal_equal) return StopReason::kCfaNotIncreasing;
    prev_cfa = s.cfa;
    have_prev = true;
    unchecked = s.cfa_unchecked;
    return std::nullopt;
  }
  /// Records a step apply_rule took (it checked the CFA itself).
  void took(std::uint64_t cfa) noexcept {
    prev_cfa = cfa;
    have_prev = true;
    unchecked = false;
  }
};

inline StepOutcome stop(StopReason r, std::uint64_t addr, std::optional<ErrorCode> e = std::nullopt) noexcept {
  StepOutcome s;
  s.reason = r;
  s.address = addr;
  s.error = e;
  return s;
}

inline bool in_ranges(std::span<const AddressRange> ranges, std::uint64_t pc) noexcept {
  for (const AddressRange& r : ranges)
    if (r.contains(pc)) return true;
  return false;
}

/// rt_sigreturn on x86-64 Linux: mov $0xf,%rax; syscall.
template <MemoryReader M>
bool is_x86_64_sigreturn(const M& mem, std::uint64_t pc) noexcept {
  // Two overlapping little-endian words cover the 9 bytes without reading
  // past them: bytes 0-7 and bytes 1-8 (byte 8 is the top byte of the second).
  const std::optional<std::uint64_t> a = mem.read_word(pc);
  if (!a || *a != 0x0f0000000fc0c748ull) return false;
  const std::optional<std::uint64_t> b = mem.read_word(pc + 1);
  return b && (*b >> 56) == 0x05;
}

/// The frame a cached rule is applied to: what is known of its registers,
/// and the CFA of the frame below it (the callee) for the check that CFAs
/// increase.
struct CompactFrame {
  std::uint64_t sp = 0;
  std::uint64_t fp = 0;
  /// The RA register's value (AArch64 LR, s390x r14): used by kRaInRegister
  /// rules, valid in the topmost frame and right after a signal frame only.
  std::uint64_t ra_reg = 0;
  bool sp_known = true;
  bool fp_known = false;
  bool ra_reg_known = false;
  /// Check that the CFA lies above `prev_cfa` (false for frame 0 and right
  /// after a signal frame).
  bool check_cfa = false;
  std::uint64_t prev_cfa = 0;

  /// A frame of a walk's fast path: SP known, FP known or not, the CFA
  /// checked against `prev` when `check`.
  static constexpr CompactFrame of(std::uint64_t sp, std::uint64_t fp, bool fp_known, bool check,
                                   std::uint64_t prev) noexcept {
    CompactFrame f;
    f.sp = sp;
    f.fp = fp;
    f.fp_known = fp_known;
    f.check_cfa = check;
    f.prev_cfa = prev;
    return f;
  }
};

/// What applying a cached rule gave: the caller's PC (`ra`) and FP, and
/// this frame's CFA; on failure `address` (kUnreadableMemory: the address
/// read; kCfaNotIncreasing: the CFA).
struct CompactStep {
  std::uint64_t cfa = 0;
  std::uint64_t ra = 0;
  std::uint64_t fp = 0;
  bool fp_known = false;
  std::uint8_t caller_flags = 0;
  std::uint64_t address = 0;
};

/// Outcome of apply_rule(). kBadRule: the rule's CFA base or RA register is
/// not known in this frame.
enum class CompactStatus : std::uint8_t { kStepped, kOutermost, kBadRule, kUnreadableMemory, kCfaNotIncreasing };

/// Reads a word through `m` into `v`: through the reader's optional
/// `bool try_read_word(addr, uint64_t&)` when it has one (no std::optional
/// in the executor's loop, which GCC keeps in memory), else read_word().
template <MemoryReader M>
[[gnu::always_inline]] inline bool read_into(const M& m, std::uint64_t at, std::uint64_t& v) noexcept {
  if constexpr (requires { { m.try_read_word(at, v) } -> std::same_as<bool>; }) {
    return m.try_read_word(at, v);
  } else {
    const std::optional<std::uint64_t> o = m.read_word(at);
    if (!o) return false;
    v = *o;
    return true;
  }
}

/// THE rule executor: applies one cached DEFAULT rule (CompactRule) to
/// `f`, reading the stack through `mem`. Every C++ unwind path (the
/// Stepper, unwind()'s loop, the in-process walks) steps cached frames
/// through it, so that the order of checks and the stop reasons are one:
///  1. RA undefined: kOutermost (spec v2/v3 errata: the outermost frame);
///  2. the CFA base (SP or FP) must be known: else kBadRule;
///  3. CFA = base + offset (wrapping, as the hardware would);
///  4. RA: read at CFA + offset (kUnreadableMemory), or the RA register;
///  5. FP: read at CFA + offset if saved (kUnreadableMemory), else
///     unchanged;
///  6. the CFA must lie above the callee's when `f.check_cfa`
///     (kCfaNotIncreasing);
///  7. AArch64 PAuth: the RA stripped of its signature (kRaMangled).
/// A zero RA is the caller's to judge (it ends the walk after this frame).
/// Not handled here: kSignal and kNoSFrame entries (the Stepper's).
template <MemoryReader M>
[[gnu::always_inline]] inline CompactStatus apply_rule(const CompactRule& c, const CompactFrame& f, const M& mem,
                                                       Arch arch, const UnwindOptions* pauth,
                                                       CompactStep& out) noexcept {
  if (c.flags & CompactRule::kRaUndefined) return CompactStatus::kOutermost;
  const bool fp_based = (c.flags & CompactRule::kCfaBaseFp) != 0;
  if (fp_based ? !f.fp_known : !f.sp_known) return CompactStatus::kBadRule;
  const std::uint64_t cfa = (fp_based ? f.fp : f.sp) + static_cast<std::uint64_t>(std::int64_t{c.cfa_offset});
  std::uint64_t ra;
  if (c.flags & CompactRule::kRaOnStack) {
    const std::uint64_t at = cfa + static_cast<std::uint64_t>(std::int64_t{c.ra_offset_by_8} * 8);
    if (!read_into(mem, at, ra)) {
      out.address = at;
      return CompactStatus::kUnreadableMemory;
    }
  } else if ((c.flags & CompactRule::kRaInRegister) && f.ra_reg_known) {
    ra = f.ra_reg;
  } else {
    return CompactStatus::kBadRule;
  }
  out.fp = f.fp;
  out.fp_known = f.fp_known;
  if (c.flags & CompactRule::kFpOnStack) {
    // An unreadable FP slot leaves the caller's FP unknown rather than
    // ending the walk (a rule that needs it later stops with kBadRule):
    // in a stack copy (perf's PERF_SAMPLE_STACK_USER starts at the SP) the
    // slot of a function stopped in its epilogue, after `pop %rbp`, lies
    // below the SP, outside the copy; the RA is all the step needs.
    const std::uint64_t at = cfa + static_cast<std::uint64_t>(std::int64_t{c.fp_offset_by_8} * 8);
    out.fp_known = read_into(mem, at, out.fp);
  }
  if (f.check_cfa && cfa <= f.prev_cfa) {
    out.address = cfa;
    return CompactStatus::kCfaNotIncreasing;
  }
  out.caller_flags = 0;
  if ((c.flags & CompactRule::kRaMangled) && arch == Arch::kAarch64 && pauth) {
    const std::uint64_t stripped = strip_pauth(ra, *pauth);
    if (stripped != ra) out.caller_flags = kFramePauthStripped;
    ra = stripped;
  }
  out.cfa = cfa;
  out.ra = ra;
  return CompactStatus::kStepped;
}

/// The StopReason of a failed apply_rule().
inline StopReason stop_reason(CompactStatus s) noexcept {
  switch (s) {
    case CompactStatus::kOutermost: return StopReason::kOutermost;
    case CompactStatus::kUnreadableMemory: return StopReason::kUnreadableMemory;
    case CompactStatus::kCfaNotIncreasing: return StopReason::kCfaNotIncreasing;
    case CompactStatus::kBadRule:
    case CompactStatus::kStepped: break;
  }
  return StopReason::kBadRule;
}

/// The cache entry for an outermost frame (RA undefined; v3 errata: also a
/// DEFAULT FDE without FREs).
inline constexpr CompactRule outermost_rule() noexcept {
  CompactRule c;
  c.flags = CompactRule::kRaUndefined;
  return c;
}

/// The cache entry saying that no SFrame covers a PC (the frame-pointer
/// fallback or a stop follow), so that walks through such frames do not
/// search the modules again.
inline constexpr CompactRule no_sframe_rule() noexcept {
  CompactRule c;
  c.flags = CompactRule::kNoSFrame;
  return c;
}

/// The rules for `lookup_pc` from `modules`, else (no SFrame there) from
/// `fallback` when given: the per-PC source chain of a module with its own
/// section and one generated for what that section lacks.
inline LookedUpRules lookup_rules(const ModuleMap& modules, const ModuleMap* fallback, Arch arch,
                                  std::uint64_t lookup_pc) noexcept {
  LookedUpRules r = lookup_rules(modules, arch, lookup_pc);
  if (r.status == LookupStatus::kNoSFrame && fallback) r = lookup_rules(*fallback, arch, lookup_pc);
  return r;
}

// The caller's registers: only SP and FP are known after a normal step
// (SFrame tracks nothing else), so rules naming any other register fail
// from here on, as spec Appendix A requires.
inline void become_caller(Regs& regs, CodeAddress& pc, std::uint64_t cfa, std::uint64_t ra, bool fp_known,
                          std::uint64_t fp) noexcept {
  const ArchRegs ar = arch_regs(regs.arch);
  regs.valid = 0;
  regs.set(ar.sp,
           regs.arch == Arch::kS390x ? cfa + static_cast<std::uint64_t>(std::int64_t{s390x::kSpValOffset}) : cfa);
  if (fp_known) regs.set(ar.fp, fp);
  regs.pc = ra;
  pc = CodeAddress::return_address(ra);
}

/// Cold paths of the Stepper, defined in src/unwind/stepper.cpp (not on the
/// cached per-frame path; async-signal-safe when `mem` is).
/// A full FrameRow (FLEX rules, register-saved RA/FP, rows that do not
/// compact): spec Appendix A; registers other than SP/FP only where known.
StepOutcome step_row(const Memory& mem, const UnwindOptions& opt, Regs& regs, CodeAddress& pc, const FrameRow& row,
                     std::uint64_t lpc) noexcept;
/// The frame-pointer convention, for PCs without SFrame (UnwindOptions::fp_fallback).
StepOutcome step_frame_pointer(const Memory& mem, const UnwindOptions& opt, Regs& regs, CodeAddress& pc,
                               std::uint64_t lpc) noexcept;
/// An x86-64 Linux signal frame (rt_sigframe; see x86_64_sigframe).
StepOutcome step_sigframe(const Memory& mem, Regs& regs, CodeAddress& pc) noexcept;

/// The one-frame stepper: `regs`/`pc` describe the current frame and are
/// replaced by the caller's on success. Does not check that the CFA
/// increases, nor a zero PC, nor the depth: the loop around it does (see
/// unwind()). Async-signal-safe when M::read_word is; holds references to
/// its arguments, which must outlive it.
template <MemoryReader M>
class Stepper {
 public:
  /// `fallback`: rules for PCs `modules` has no SFrame for (optional).
  Stepper(const ModuleMap& modules, const M& mem, const UnwindOptions& opt, RuleCache* cache,
          const ModuleMap* fallback = nullptr) noexcept
      : modules_(modules), fallback_(fallback), mem_(mem), opt_(opt), cache_(cache) {}

  /// Steps from the frame (`regs`, `pc`) to its caller, replacing both.
  /// On failure they are left unchanged and the outcome says why.
  StepOutcome step(Regs& regs, CodeAddress& pc) noexcept {
    const std::uint64_t lpc = pc.lookup_pc();
    const bool amd64 = regs.arch == Arch::kAmd64;
    if (amd64 && !opt_.signal_trampolines.empty() && in_ranges(opt_.signal_trampolines, pc.value()))
      return signal_step(regs, pc);
    if (cache_) {
      if (const CompactRule* c = cache_->lookup(lpc)) {
        ++cache_->hits;
        if (c->flags & CompactRule::kNoSFrame) return no_sframe_step(regs, pc, lpc);
        if ((c->flags & CompactRule::kSignal) && amd64) return signal_step(regs, pc);
        return apply_compact(regs, pc, *c, lpc);
      }
      ++cache_->misses;
    }
    return slow_step(regs, pc, lpc);
  }

 private:
  // Cache miss: module, FDE and FRE lookup, then the full rule evaluation.
  [[gnu::noinline]] StepOutcome slow_step(Regs& regs, CodeAddress& pc, std::uint64_t lpc) noexcept {
    const bool amd64 = regs.arch == Arch::kAmd64;
    const LookedUpRules r = lookup_rules(modules_, fallback_, regs.arch, lpc);
    switch (r.status) {
      case LookupStatus::kFound:
        if (cache_ && r.compactable) cache_->insert(lpc, r.compact);
        if (r.signal && amd64) return signal_step(regs, pc);
        return r.compactable ? apply_compact(regs, pc, r.compact, lpc) : apply(regs, pc, r.row, lpc);
      case LookupStatus::kOutermost:
        if (cache_) cache_->insert(lpc, outermost_rule());
        return stop(StopReason::kOutermost, 0);
      case LookupStatus::kDecodeError: return stop(StopReason::kBadRule, lpc, r.error);
      case LookupStatus::kNoSFrame:
        if (cache_) cache_->insert(lpc, no_sframe_rule());
        break;
    }
    return no_sframe_step(regs, pc, lpc);
  }

  // No SFrame covers the PC: a sigreturn trampoline recognised by its code,
  // the frame-pointer convention, or a stop.
  StepOutcome no_sframe_step(Regs& regs, CodeAddress& pc, std::uint64_t lpc) noexcept {
    const bool amd64 = regs.arch == Arch::kAmd64;
    if (amd64 && opt_.detect_sigreturn_code && is_x86_64_sigreturn(mem_, pc.value())) return signal_step(regs, pc);
    if (opt_.fp_fallback && regs.arch != Arch::kS390x) return fp_step(regs, pc, lpc);
    return stop(StopReason::kNoSFrameForPc, lpc);
  }

  // A cached DEFAULT rule, through the one executor (apply_rule). The
  // CFA-increase check is the loop's (see unwind()), as for every step.
  StepOutcome apply_compact(Regs& regs, CodeAddress& pc, const CompactRule c, std::uint64_t lpc) noexcept {
    const ArchRegs ar = arch_regs(regs.arch);
    CompactFrame f;
    f.sp_known = regs.has(ar.sp);
    f.sp = f.sp_known ? regs.dwarf[ar.sp] : 0;
    f.fp_known = regs.has(ar.fp);
    f.fp = f.fp_known ? regs.dwarf[ar.fp] : 0;
    f.ra_reg_known = ar.ra != kNoRegister && regs.has(ar.ra);
    f.ra_reg = f.ra_reg_known ? regs.dwarf[ar.ra] : 0;
    CompactStep st;
    const CompactStatus s = apply_rule(c, f, mem_, regs.arch, &opt_, st);
    if (s != CompactStatus::kStepped)
      return stop(stop_reason(s), s == CompactStatus::kOutermost ? 0 : s == CompactStatus::kBadRule ? lpc : st.address);
    StepOutcome out;
    out.stepped = true;
    out.cfa = st.cfa;
    out.caller_flags = st.caller_flags;
    become_caller(regs, pc, st.cfa, st.ra, st.fp_known, st.fp);
    return out;
  }

  // The cold paths (src/unwind/stepper.cpp) read through the Memory
  // interface: a virtual call per word there, none on the cached path.
  template <class F>
  StepOutcome with_memory(F&& f) const noexcept {
    if constexpr (std::is_base_of_v<Memory, M>) {
      return f(static_cast<const Memory&>(mem_));
    } else {
      const MemoryAdapter<M> m(mem_);
      return f(static_cast<const Memory&>(m));
    }
  }
  StepOutcome apply(Regs& regs, CodeAddress& pc, const FrameRow& row, std::uint64_t lpc) noexcept {
    return with_memory([&](const Memory& m) { return step_row(m, opt_, regs, pc, row, lpc); });
  }
  StepOutcome fp_step(Regs& regs, CodeAddress& pc, std::uint64_t lpc) noexcept {
    return with_memory([&](const Memory& m) { return step_frame_pointer(m, opt_, regs, pc, lpc); });
  }
  StepOutcome signal_step(Regs& regs, CodeAddress& pc) noexcept {
    return with_memory([&](const Memory& m) { return step_sigframe(m, regs, pc); });
  }

  const ModuleMap& modules_;
  const ModuleMap* fallback_;
  const M& mem_;
  const UnwindOptions& opt_;
  RuleCache* cache_;
};

inline Frame frame_of(const Regs& regs, CodeAddress pc, std::uint8_t flags) noexcept {
  Frame f;
  f.pc = pc;
  const ArchRegs ar = arch_regs(regs.arch);
  f.sp = regs.has(ar.sp) ? regs.dwarf[ar.sp] : 0;
  if (regs.has(ar.fp)) {
    f.fp = regs.dwarf[ar.fp];
    flags |= kFrameFpValid;
  }
  f.flags = flags;
  return f;
}

}  // namespace sframe::detail

namespace sframe {

template <MemoryReader M>
UnwindResult unwind(const ModuleMap& modules, const M& memory, const Regs& regs_in, std::span<Frame> out,
                    const UnwindOptions& options, RuleCache* cache) noexcept {
  UnwindResult res;
  const auto finish = [&](std::size_t n, StopReason why, std::uint64_t addr = 0, std::optional<ErrorCode> e = std::nullopt) {
    res.count = n;
    res.reason = why;
    res.address = addr;
    res.error = e;
    return res;
  };
  if (out.empty()) return finish(0, StopReason::kDepthLimit);
  if (cache) cache->sync(modules.generation());
  const ArchRegs ar = arch_regs(regs_in.arch);
  const std::uint64_t sp_from_cfa =
      regs_in.arch == Arch::kS390x ? static_cast<std::uint64_t>(std::int64_t{s390x::kSpValOffset}) : 0;
  // Rules the fast path below leaves to the Stepper.
  constexpr std::uint16_t kSlowRule =
      CompactRule::kSignal | CompactRule::kRaInRegister | CompactRule::kRaUndefined | CompactRule::kNoSFrame;
  const bool fast_ok = cache != nullptr;

  // The state of the current frame. On the fast path only SP and FP are
  // known, kept in scalars (`regs` is brought up to date lazily before a
  // slow step) so that no store-to-load round trip sits on the per-frame
  // dependency chain.
  Regs regs = regs_in;
  bool regs_stale = false;
  CodeAddress pc = CodeAddress::exact(regs.pc);
  bool sp_known = regs.has(ar.sp), fp_known = regs.has(ar.fp);
  std::uint64_t sp = sp_known ? regs.dwarf[ar.sp] : 0, fp = fp_known ? regs.dwarf[ar.fp] : 0;
  const auto put = [&](Frame& f, std::uint8_t flags) {
    const std::uint64_t v = pc.value();
    f.pc = pc.is_return_address() ? CodeAddress::return_address(v) : CodeAddress::exact(v);
    f.sp = sp_known ? sp : 0;
    f.fp = fp_known ? fp : 0;
    f.cfa = 0;
    f.flags = static_cast<std::uint8_t>(flags | (fp_known ? kFrameFpValid : 0));
  };
  put(out[0], 0);
  std::size_t n = 1;
  if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
  detail::Stepper<M> stepper(modules, memory, options, cache);
  detail::CfaChain chain;
  for (;;) {
    std::uint64_t cfa;
    std::uint8_t caller_flags = 0;
    const CompactRule* c = fast_ok && !detail::in_ranges(options.signal_trampolines, pc.value())
                               ? cache->lookup(pc.lookup_pc())
                               : nullptr;
    if (c && !(c->flags & kSlowRule)) {
      // The hot path: a cached DEFAULT rule needing only SP/FP, through
      // the one executor (detail::apply_rule).
      ++cache->hits;
      detail::CompactFrame f = detail::CompactFrame::of(sp, fp, fp_known, chain.check_cfa(), chain.prev_cfa);
      f.sp_known = sp_known;
      detail::CompactStep st;
      const detail::CompactStatus status = detail::apply_rule(*c, f, memory, regs_in.arch, &options, st);
      if (status != detail::CompactStatus::kStepped)
        return finish(n, detail::stop_reason(status),
                      status == detail::CompactStatus::kOutermost ? 0
                      : status == detail::CompactStatus::kBadRule ? pc.lookup_pc()
                                                                  : st.address);
      cfa = st.cfa;
      fp = st.fp;
      fp_known = st.fp_known;
      caller_flags = st.caller_flags;
      sp = cfa + sp_from_cfa;
      sp_known = true;
      pc = CodeAddress::return_address(st.ra);
      regs_stale = true;
      chain.took(cfa);
    } else {
      if (regs_stale) {
        regs.valid = 0;
        if (sp_known) regs.set(ar.sp, sp);
        if (fp_known) regs.set(ar.fp, fp);
        regs.pc = pc.value();
        regs_stale = false;
      }
      // Through a copy: `pc` itself stays out of memory on the fast path.
      CodeAddress step_pc = pc;
      const detail::StepOutcome s = stepper.step(regs, step_pc);
      if (!s.stepped) return finish(n, s.reason, s.address, s.error);
      pc = step_pc;
      out[n - 1].flags |= s.this_flags;
      if (const std::optional<StopReason> why = chain.accept(s)) return finish(n, *why, s.cfa);
      cfa = s.cfa;
      caller_flags = s.caller_flags;
      sp_known = regs.has(ar.sp);
      fp_known = regs.has(ar.fp);
      sp = sp_known ? regs.dwarf[ar.sp] : 0;
      fp = fp_known ? regs.dwarf[ar.fp] : 0;
    }
    out[n - 1].cfa = cfa;
    if (pc.value() == 0) return finish(n, StopReason::kZeroPc);
    if (n == out.size()) return finish(n, StopReason::kDepthLimit);
    put(out[n++], caller_flags);
  }
}

}  // namespace sframe

#pragma GCC visibility pop
