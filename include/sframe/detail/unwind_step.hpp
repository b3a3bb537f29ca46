// SPDX-License-Identifier: MIT
// sframepp: the unwind loop (templated over the memory reader so that the
// in-process reader inlines). Included by sframe/unwind.hpp; not a public
// header on its own. Stepper, StepOutcome, in_ranges, strip_pauth and
// frame_of are used by the in-process backtrace and the `sframe stack` tool
// to build their own loops: keep their shape stable.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <vector>

#include "sframe/unwind.hpp"

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

/// What lookup_compact() found.
enum class CompactLookup : std::uint8_t {
  /// `out` holds the rule: the `compact` (kValid set) that lookup_rules()
  /// gives with kFound and `compactable`, its kSignal bit the row's
  /// signal flag.
  kRule,
  /// No module's section has an FDE for the PC (lookup_rules: kNoSFrame).
  kNoSFrame,
  /// Anything else (a row without a compact form, a PC-mask FDE, a PC
  /// before its FDE's first FRE, a module without compiled rows, another
  /// arch, a decoding error): lookup_rules() must answer.
  kFull,
};

/// Per RowIndex bucket, 16 bits naming the compiled rule of the bucket's
/// first row where it has one of the commonest shapes on x86-64 (the RA at
/// CFA - 8 in each): the in-process cold walk reads it beside the bucket
/// word rather than the rule table the word's row id points into (a load
/// that waited for the word, on the chain from one frame's RA to the
/// next). 2 bytes per bucket, built once every module is ready. Bits
/// 15-14 the shape, the rest its offsets in units of 8 bytes:
///   0  none of these (read the rows);
///   1  CFA = SP + 8 k (k: bits 13-0, >= 1), FP unchanged;
///   2  CFA = SP + 8 k (k: bits 13-5), FP at CFA - 8 j (j: bits 4-0, >= 1);
///   3  CFA = FP + 8 k (k: bits 13-5), FP at CFA - 8 j (j: bits 4-0, >= 1).
using BucketRule = std::uint16_t;

namespace bucket_rule_detail {
inline constexpr std::uint16_t kSp = CompactRule::kValid | CompactRule::kRaOnStack;
inline constexpr std::uint16_t kSpFp = kSp | CompactRule::kFpOnStack;
inline constexpr std::uint16_t kFp = kSpFp | CompactRule::kCfaBaseFp;
}  // namespace bucket_rule_detail

/// The bucket rule for compiled rule `r` (0: not one of the shapes).
constexpr BucketRule bucket_rule_of(const CompactRule& r) noexcept {
  using namespace bucket_rule_detail;
  if (r.ra_offset_by_8 != -1 || r.cfa_offset % 8 != 0) return 0;
  const std::int32_t k = r.cfa_offset / 8, j = -std::int32_t{r.fp_offset_by_8};
  if (r.flags == kSp && r.fp_offset_by_8 == 0 && k >= 1 && k < (1 << 14))
    return static_cast<BucketRule>(1u << 14 | static_cast<unsigned>(k));
  if ((r.flags == kSpFp || r.flags == kFp) && k >= (r.flags == kSpFp ? 1 : 0) && k < (1 << 9) && j >= 1 && j < 32)
    return static_cast<BucketRule>((r.flags == kSpFp ? 2u : 3u) << 14 | static_cast<unsigned>(k) << 5 |
                                   static_cast<unsigned>(j));
  return 0;
}

/// The compiled rule bucket rule `b` (nonzero) names: bucket_rule_of()
/// inverted. Without a branch on the shape (a walk meets them mixed).
constexpr CompactRule rule_of_bucket(BucketRule b) noexcept {
  using namespace bucket_rule_detail;
  const unsigned shape = b >> 14;
  const bool fp_unchanged = shape == 1;
  CompactRule r;
  r.cfa_offset = static_cast<std::int32_t>(fp_unchanged ? b & 0x3fffu : b >> 5 & 0x1ffu) * 8;
  r.ra_offset_by_8 = -1;
  r.fp_offset_by_8 = static_cast<std::int8_t>(fp_unchanged ? 0 : -static_cast<int>(b & 0x1fu));
  r.flags = static_cast<std::uint16_t>(kSp | (fp_unchanged ? 0 : CompactRule::kFpOnStack) |
                                       (shape == 3 ? CompactRule::kCfaBaseFp : 0));
  return r;
}

/// The modules a walk's last lookups found, one per map: consecutive
/// frames are mostly in one module, so the next lookup checks it before
/// searching its map. Each slot keeps what the lookup reads of its module
/// (range, bias, a RowIndex::View, the compiled rows), so that a lookup in
/// the same module starts from values the walk holds, not from the
/// module's fields. Valid while the maps (and so their modules' indexes)
/// do not change; one hint per arch.
struct ModuleHint {
  struct Slot {
    /// The module's runtime range as [begin, begin + size); size 0: none.
    std::uint64_t begin = 0;
    std::uint64_t size = 0;
    std::uint64_t bias = 0;
    /// The module's RowIndex viewed at runtime addresses (rebased by
    /// `bias`): a lookup subtracts one base from the PC, not two, on the
    /// chain of dependent steps from one frame's RA to the next.
    RowIndex::View rows;
    /// Module::compact_rows, or null where lookup_compact() must answer
    /// kFull for the whole module (no compiled rows, another arch).
    const CompactRule* compact = nullptr;
    /// Optional, with `compact`: one word per compiled row that the owner of
    /// a Slots table computed once beside the rule (the in-process walk's
    /// memo step code), handed out by lookup_compact(); null: none.
    const std::int64_t* codes = nullptr;
    /// Optional, owner-computed like `codes`: whether a signal trampoline
    /// of the owner's lies in [begin, begin + size] (false: none, or not
    /// computed). The in-process walk reads it on a module switch rather
    /// than scanning every trampoline range there.
    bool tramps = false;
    /// Optional, owner-computed like `codes`: whether every PC `rows`
    /// covers lies in [begin, begin + size) (false: not computed, or not
    /// so). A walk that stays in such a slot may then ask `rows` alone.
    bool rows_inside = false;
    /// Optional, owner-computed: per bucket of `rows`
    /// (rows.bucket_count()), bucket_rule_of() the compiled rule of the
    /// bucket's first row (0 where it is a marker); null: none.
    const BucketRule* brules = nullptr;
  };
  /// Prebuilt slots for every module of one map, in the map's order (by
  /// runtime start): a lookup that leaves its hint's module then costs a
  /// search of `begins` (8 bytes per module, one or two cache lines) and
  /// one Slot copy, not ModuleMap::find() over the Modules and a read of
  /// the module's RowIndex. Must describe the map it is used with (same
  /// modules, same order) for as long as the map's generation holds.
  struct Slots {
    const std::uint64_t* begins = nullptr;
    const Slot* slots = nullptr;
    std::size_t count = 0;
  };
  Slot primary;
  Slot fallback;
  /// Optional prebuilt slots of the primary and the fallback map.
  const Slots* primary_slots = nullptr;
  const Slots* fallback_slots = nullptr;
};

/// What bucket_rule_at() finds: a bucket rule (0: none) and the row id it
/// stands for (slot.rows.row_id_at() of the offset, where `rule` is set).
struct BucketHit {
  BucketRule rule = 0;
  std::uint32_t row = 0;
};

/// The bucket rule covering offset `off` from slot.rows.base(): that of the
/// bucket's first row where `off` lies before the bucket's second boundary
/// (that row then covers it), else none (also for an offset outside the
/// rows and a slot without bucket rules). A walk that gets one steps
/// rule_of_bucket() of it: the same rule as slot.compact[hit.row], read
/// without the rule table (whose load would wait for the row id).
[[gnu::always_inline]] inline BucketHit bucket_rule_at(const ModuleHint::Slot& slot, std::uint64_t off) noexcept {
  if (!slot.brules || off >= slot.rows.span()) return {};
  const std::size_t b = slot.rows.bucket_of(off);
  const BucketRule r = slot.brules[b];
  if (r == 0 || static_cast<std::uint32_t>(off) >= slot.rows.bucket_second(b)) return {};
  return {r, slot.rows.bucket_row(b)};
}

/// The slot of module `m` for lookups of `arch` (rows and compiled rules
/// only where `m` has both and its section is of `arch`; `codes` null).
/// For fill_hint() and for prebuilt ModuleHint::Slots; defined in
/// src/unwind/rules.cpp.
ModuleHint::Slot slot_of(const Module& m, Arch arch) noexcept;

/// Points `slot` at the module of `modules` that holds runtime `lookup_pc`
/// for `arch`; false (slot emptied) when no module does. For
/// lookup_compact(); defined in src/unwind/rules.cpp.
bool fill_hint(const ModuleMap& modules, Arch arch, std::uint64_t lookup_pc, ModuleHint::Slot& slot) noexcept;

/// The prebuilt slot of the module holding runtime `lookup_pc`: the last
/// slot starting at or before it when it holds the PC (a search without a
/// branch per step over the dense `begins`, bounded by log2 of the module
/// count); null otherwise. For fill_hint() and for walks that keep a
/// pointer to the slot rather than a copy.
[[gnu::always_inline]] inline const ModuleHint::Slot* find_slot(const ModuleHint::Slots& t,
                                                               std::uint64_t lookup_pc) noexcept {
  std::size_t lo = 0, n = t.count;
  if (n == 0) [[unlikely]]
    return nullptr;
  while (n > 1) {
    const std::size_t half = n / 2;
    lo = t.begins[lo + half] <= lookup_pc ? lo + half : lo;
    n -= half;
  }
  const ModuleHint::Slot& s = t.slots[lo];
  return lookup_pc - s.begin < s.size ? &s : nullptr;
}

/// fill_hint() from prebuilt slots: find_slot()'s slot copied into `slot`;
/// false (slot emptied) where no module holds the PC.
[[gnu::always_inline]] inline bool fill_hint(const ModuleHint::Slots& t, std::uint64_t lookup_pc,
                                             ModuleHint::Slot& slot) noexcept {
  if (const ModuleHint::Slot* s = find_slot(t, lookup_pc)) {
    slot = *s;
    return true;
  }
  slot = ModuleHint::Slot{};
  return false;
}

/// The compiled row of `lookup_pc` in the module of slot `h` (which holds
/// it): an index into h.compact, whose kValid bit says whether the row has
/// a cacheable rule; RowIndex::kNotCovered where no FDE covers the PC; or
/// RowIndex::kUseFind where only the full lookup can answer (a slot without
/// compiled rows, a PC-mask FDE, a PC before its FDE's first FRE). The
/// first half of compact_at(), for a loop that reads the row's rule in
/// place.
[[gnu::always_inline]] inline std::uint32_t compact_row(const ModuleHint::Slot& h, std::uint64_t lookup_pc) noexcept {
  if (!h.compact) [[unlikely]]
    return RowIndex::kUseFind;
  return h.rows.row_id(lookup_pc);
}

/// lookup_compact() in the module of slot `h`, which holds `lookup_pc`:
/// kRule, kNoSFrame (no FDE there), or kFull. `code`, when given, is set to
/// the row's entry of the slot's `codes` on kRule (null where it has none).
[[gnu::always_inline]] inline CompactLookup compact_at(const ModuleHint::Slot& h, std::uint64_t lookup_pc,
                                                       CompactRule& out, const std::int64_t** code) noexcept {
  const std::uint32_t id = compact_row(h, lookup_pc);
  if (id == RowIndex::kNotCovered) return CompactLookup::kNoSFrame;
  if (id == RowIndex::kUseFind) [[unlikely]]
    return CompactLookup::kFull;
  const CompactRule c = h.compact[id];
  if (!(c.flags & CompactRule::kValid)) [[unlikely]]
    return CompactLookup::kFull;
  out = c;
  if (code) *code = h.codes ? h.codes + id : nullptr;
  return CompactLookup::kRule;
}

/// lookup_compact() in one map: kRule, kNoSFrame (no module, or no FDE in
/// it), or kFull.
/// `prebuilt`: the map's slots (or null); `code` as for compact_at().
[[gnu::always_inline]] inline CompactLookup compact_in(const ModuleMap& modules, const ModuleHint::Slots* prebuilt,
                                                       Arch arch, std::uint64_t lookup_pc, ModuleHint::Slot& h,
                                                       CompactRule& out, const std::int64_t** code) noexcept {
  // One subtraction and one comparison when the PC is in the hint's
  // module (an empty slot's size 0 never holds a PC).
  if (lookup_pc - h.begin >= h.size) [[unlikely]] {
    if (!(prebuilt ? fill_hint(*prebuilt, lookup_pc, h) : fill_hint(modules, arch, lookup_pc, h)))
      return CompactLookup::kNoSFrame;
  }
  return compact_at(h, lookup_pc, out, code);
}

/// The cold step's lookup: lookup_rules(modules, fallback, arch, lookup_pc)
/// reduced to what a cacheable rule needs, without building a
/// LookedUpRules (module, one RowIndex::row_id(), one 8-byte compiled
/// rule). Answers kFull rather than guess wherever the full lookup has more
/// to say. `hint` must be used with one `arch` and one pair of maps (and
/// its prebuilt slots, if set, must be those maps'). `code`, when given,
/// is set on kRule to the row's entry of the prebuilt slot's `codes`, or
/// null where there is none. Inline (a walk runs it for every cold frame);
/// allocation-free, async-signal-safe.
[[gnu::always_inline]] inline CompactLookup lookup_compact(const ModuleMap& modules, const ModuleMap* fallback, Arch arch,
                                                           std::uint64_t lookup_pc, ModuleHint& hint, CompactRule& out,
                                                           const std::int64_t** code = nullptr) noexcept {
  const CompactLookup r = compact_in(modules, hint.primary_slots, arch, lookup_pc, hint.primary, out, code);
  if (r != CompactLookup::kNoSFrame || !fallback) [[likely]]
    return r;
  return compact_in(*fallback, hint.fallback_slots, arch, lookup_pc, hint.fallback, out, code);
}

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

// Writes a frame field by field (a whole-struct copy from a temporary costs
// a store-forwarding stall per frame on the hot path).
inline void put_frame(Frame& f, const Regs& regs, const CodeAddress& pc, std::uint8_t flags) noexcept {
  const ArchRegs ar = arch_regs(regs.arch);
  // Field by field: CodeAddress was just written as a word and a byte, and a
  // 16-byte copy of it would wait for both stores to retire.
  const std::uint64_t v = pc.value();
  f.pc = pc.is_return_address() ? CodeAddress::return_address(v) : CodeAddress::exact(v);
  f.sp = regs.has(ar.sp) ? regs.dwarf[ar.sp] : 0;
  const bool fp = regs.has(ar.fp);
  f.fp = fp ? regs.dwarf[ar.fp] : 0;
  f.cfa = 0;
  f.flags = static_cast<std::uint8_t>(flags | (fp ? kFrameFpValid : 0));
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
