// SPDX-License-Identifier: MIT
// sframepp: loaded objects (code range, SFrame section, load bias) and the
// PC -> module map the unwinder searches.
// Part of the unwinder's API (layer `unwind`); sframe/unwind/unwind.hpp includes it.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "sframe/format/error.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"

namespace sframe {

// ---------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------

/// A half-open runtime address range [begin, end).
struct AddressRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  constexpr bool contains(std::uint64_t a) const noexcept { return a >= begin && a < end; }
  friend constexpr bool operator==(const AddressRange&, const AddressRange&) = default;
};

/// Where a module's SFrame comes from: the one name for it across the
/// in-process backtrace (BacktraceModuleReport), `sframe stack`
/// (process::LoadedModule) and the shared builder (cfi::ModuleUnwind).
enum class ModuleSource : std::uint8_t {
  /// Its own SFrame section (PT_GNU_SFRAME / .sframe), perhaps with SFrame
  /// generated from .eh_frame beside it for the functions it lacks.
  kNative,
  /// SFrame generated from its .eh_frame (sframe::cfi::generate), in place
  /// of an own section it lacks (or that was ignored or unusable).
  kGenerated,
  /// None: only the frame-pointer fallback walks its frames.
  kNone,
  /// Deprecated: process::UnwindSource's name for kNative.
  kSFrameSection [[deprecated("use ModuleSource::kNative")]] = kNative,
  /// Deprecated: process::UnwindSource's name for kNone.
  kFramePointer [[deprecated("use ModuleSource::kNone")]] = kNone,
};

/// "native", "generated", "none" (printed by `sframe stack` and the
/// backtrace's init report); "?" for a value outside the enum.
std::string_view to_string(ModuleSource s) noexcept;

/// One loaded object: its code range, its SFrame section and its load bias.
/// The Section (and its FdeIndex or RowIndex, if any) must outlive every
/// unwind that uses the module.
struct Module {
  /// Runtime addresses covered (typically the executable PT_LOAD segment).
  AddressRange range;
  /// runtime address - link-time address (0 for non-PIE executables; the
  /// load base of shared objects and PIEs).
  std::uint64_t bias = 0;
  /// The module's SFrame section, parsed with its link-time sh_addr.
  Section section;
  /// Optional accelerator over `section` (FdeIndex::build); null = binary
  /// search with sframe::find().
  const FdeIndex* index = nullptr;
  /// Optional faster accelerator (RowIndex::build over `section`, which
  /// must pass validate(kStrict): RowIndex::find answers as find() does
  /// only there); used instead of `index` when set. Must outlive every
  /// unwind that uses the module.
  const RowIndex* rows = nullptr;
  /// Optional, with `rows`: rows->num_rows() cacheable forms of its
  /// distinct rows (detail::compile_rows; an entry without
  /// CompactRule::kValid has none), so that a cold frame's lookup reads
  /// one bucket, one line of boundaries and one 8-byte rule. Must outlive
  /// every unwind that uses the module.
  const struct CompactRule* compact_rows = nullptr;
};

/// PC -> module map over caller-provided storage: sorted by address,
/// binary-searched, allocation-free. add()/remove()/clear() are not
/// async-signal-safe with respect to a concurrent unwind (update outside any
/// unwind, e.g. under the caller's lock or before installing handlers);
/// find() is async-signal-safe. Each change takes a new generation number,
/// unique across all maps of the process, which invalidates RuleCaches.
class ModuleMap {
 public:
  /// `storage` bounds the number of modules; it must outlive the map.
  explicit ModuleMap(std::span<Module> storage) noexcept;

  /// Inserts `m`, keeping the map sorted. Errors: kModuleMapFull (no
  /// storage left), kBadModuleRange (empty range), kModulesOverlap (its
  /// range overlaps a module already present; `value` = m.range.begin).
  Expected<void> add(const Module& m) noexcept;
  /// Inserts every module of `ms`, which must be sorted by range.begin, in
  /// one merge: O(size() + ms.size()), where add() one at a time shifts the
  /// map for each. All or nothing: on an error the map is unchanged. Errors
  /// as add(): kModuleMapFull, kBadModuleRange, kModulesOverlap (also for
  /// `ms` unsorted or overlapping itself; `value` = the begin of the module
  /// found overlapping). One new generation when anything was added.
  Expected<void> add_sorted(std::span<const Module> ms) noexcept;
  /// Removes the module whose range starts at `begin`; false if none.
  bool remove(std::uint64_t begin) noexcept;
  /// Removes every module.
  void clear() noexcept;

  /// The module whose range contains runtime `pc`, or null. O(log n).
  /// Async-signal-safe.
  const Module* find(std::uint64_t pc) const noexcept;

  std::span<const Module> modules() const noexcept { return {storage_.data(), size_}; }
  std::size_t capacity() const noexcept { return storage_.size(); }
  /// Changes whenever the set of modules changes; never 0.
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::span<Module> storage_;
  std::size_t size_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace sframe

#pragma GCC visibility pop
