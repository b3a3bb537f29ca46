// SPDX-License-Identifier: MIT
// sframepp (private, not installed): the lookup accelerators of the
// in-process backtrace - ModuleHint and its prebuilt slots (with the fields
// only the backtrace's tables fill: memo step codes, trampoline and
// rows-inside flags, bucket rules), BucketRule, and lookup_compact(), the
// cold step's lookup over them. The one step and loop (Stepper, apply_rule,
// unwind()) stay in sframe/unwind/detail/unwind_step.hpp; these only find
// a cached rule sooner, and the differential tests (unwind_corpus_test,
// fuzz_unwind) hold lookup_compact() to lookup_rules().
// slot_of() and fill_hint() are defined in libsframepp-unwind
// (src/unwind/rules.cpp) and exported from it for libsframepp-backtrace,
// the tests and the fuzz targets; no API promise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sframe/unwind/unwind.hpp"

#pragma GCC visibility push(default)
namespace sframe::detail {

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

}  // namespace sframe::detail
#pragma GCC visibility pop
