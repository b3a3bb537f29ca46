// SPDX-License-Identifier: MIT
// sframepp: the unwinder's two module maps built from modules' unwind
// information (cfi::ModuleUnwind), one mechanism for `sframe stack`
// (process::LoadedModules), `sframe perf script` and the in-process
// backtrace's table.
//
// A module placed at a runtime range [begin, end) with a load bias gives
// the maps these entries (sframe::Module):
//   - its primary() section, if usable, in the primary map;
//   - its extra() section (functions generated beside its own section), if
//     usable, in the extra map;
//   - each FDE generated on demand (generated_fdes()), cut to the range, in
//     the extra map when primary() is usable (beside the own section, for
//     the PCs it lacks), else in the primary map (in place of the section
//     the module lacks, so that the walker's rule cache, which serves the
//     primary map, holds their rules). This is the placement rule.
// A walk looks a PC up in the primary map first, then in the extra map.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sframe/unwind/module_unwind.hpp"
#include "sframe/unwind/modules.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe {

/// The primary and extra ModuleMaps of a set of placed modules, over
/// storage the table owns. Moving the table keeps both maps valid (the
/// storage's buffers move with it); copying is not allowed. Not
/// thread-safe; not async-signal-safe (the in-process backtrace uses the
/// static helpers to fill its own maps).
class ModuleTable {
 public:
  /// The entries of placed modules, collected before they go into maps.
  struct Entries {
    std::vector<Module> primary;
    std::vector<Module> extra;
    /// Appends the entries of `u` placed at runtime `range` with load
    /// `bias` (runtime = link-time + bias): see the file comment.
    void add(const cfi::ModuleUnwind& u, AddressRange range, std::uint64_t bias);
    bool empty() const noexcept { return primary.empty() && extra.empty(); }
  };

  /// What generate_for_pc() did.
  enum class Generated : std::uint8_t {
    /// Nothing new for the PC: not on demand, the own section covers it,
    /// no FDE covers it (or it cannot be translated), or its FDE is in the
    /// map already.
    kNothing,
    /// The PC's FDE was added to a map (the caller should look it up
    /// again).
    kAdded,
  };

  ModuleTable();
  ModuleTable(ModuleTable&&) noexcept = default;
  ModuleTable& operator=(ModuleTable&&) noexcept = default;
  ModuleTable(const ModuleTable&) = delete;
  ModuleTable& operator=(const ModuleTable&) = delete;

  /// The map walks search first: modules' own or generated sections, and
  /// the generated FDEs of modules without a usable primary section.
  const ModuleMap& primary() const noexcept { return primary_; }
  /// The map searched when the primary one has no FDE for a PC.
  const ModuleMap& extra() const noexcept { return extra_; }

  /// Replaces both maps (new generations) by `e`'s entries, with room for
  /// as many more again, at least 64, in each (geometric growth: entries
  /// added later by generate_for_pc() or extend() do not rebuild each
  /// time). Entries that overlap an earlier one (by start address; equal
  /// starts in `e`'s order) are left out.
  void assign(const Entries& e);

  /// Adds `e`'s entries to the maps as they stand; each addition to the
  /// primary map is adopted by `cache` (if not null, and in step with the
  /// map): only its entries in the new range are dropped
  /// (RuleCache::adopt). False when there is not room for all of them, or
  /// one overlaps an entry present: then the maps may hold part of `e` and
  /// the caller should assign() from scratch.
  bool extend(const Entries& e, RuleCache* cache = nullptr);

  /// On-demand generation for runtime `pc` in the module `u` placed at
  /// `range` with `bias`: when the module's own section does not cover it
  /// (UnwindSection::covers; the walk found no rule for it), generates the
  /// FDE covering it (cfi::ModuleUnwind::generate_for_pc) and adds its
  /// entry, cut to `range`, to the map the placement rule names (growing
  /// that map's storage geometrically when full: a new generation). An
  /// addition to the primary map is adopted by `cache` as in extend().
  /// kNothing when `u` is not on_demand(); generation errors are kept by
  /// `u` and give kNothing.
  Generated generate_for_pc(cfi::ModuleUnwind& u, AddressRange range, std::uint64_t bias, std::uint64_t pc,
                            RuleCache* cache = nullptr);

  // ----- the mechanism's parts, for callers that keep their own maps ------

  /// The entry for section `u` over runtime `range` with load `bias`; none
  /// when `u` is not usable(). Its index, rows and compact_rows point into
  /// `u` (null where `u` has none), which must outlive the entry's use.
  static std::optional<Module> entry(const cfi::UnwindSection& u, AddressRange range, std::uint64_t bias) noexcept;
  /// The entry for generated FDE `g` (link-time [g.start, g.end)) cut to
  /// runtime `range`; none when nothing of it lies in `range` or its
  /// section is not usable.
  static std::optional<Module> fde_entry(const cfi::GeneratedFde& g, AddressRange range, std::uint64_t bias) noexcept;
  /// The placement rule: `u`'s generated FDEs go to the extra map (true)
  /// when its primary() section is usable, else to the primary map.
  static bool fdes_in_extra(const cfi::ModuleUnwind& u) noexcept { return u.primary().usable(); }
  /// Makes `map` a new map over `storage`, resized to `capacity` (at least
  /// entries.size()), holding `entries` added in address order (equal
  /// starts in their order; one overlapping an earlier entry is left out).
  /// `storage` must stay where it is (not be resized or moved from) while
  /// `map` is used.
  static void fill(std::span<const Module> entries, std::vector<Module>& storage, ModuleMap& map,
                   std::size_t capacity);

 private:
  std::vector<Module> primary_storage_;
  std::vector<Module> extra_storage_;
  ModuleMap primary_;
  ModuleMap extra_;
};

}  // namespace sframe

#pragma GCC visibility pop
