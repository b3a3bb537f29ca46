// sframepp: state shared by the in-process backtrace's setup
// (backtrace_modules.cpp, not async-signal-safe) and its walk (backtrace.cpp,
// async-signal-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sframe/backtrace.hpp"
#include "sframe/lookup.hpp"
#include "sframe/unwind.hpp"

namespace sframe::bt {

/// An SFrame section held in memory with its lookup accelerator.
struct OwnedSection {
  std::vector<std::byte> bytes;
  std::optional<Section> section;
  std::optional<FdeIndex> index;
};

/// One loaded module's unwind data. Immutable once built; shared by every
/// table that lists the module, so refreshes reuse it.
struct ModuleData {
  std::string name;
  std::uint64_t bias = 0;
  AddressRange range;
  /// The SFrame bytes: a copy of PT_GNU_SFRAME or a generated section. Owned
  /// here (never the module's own mapping) so that a walk through a stale
  /// table after dlclose reads nothing unmapped.
  OwnedSection primary;
  /// For a module with PT_GNU_SFRAME: a section generated from its
  /// .eh_frame, consulted for PCs the native one does not cover (objects
  /// assembled without --gsframe, static libraries linked in).
  OwnedSection extra;
  bool generated = false;
  /// Signal trampolines found in the module's code (glibc __restore_rt).
  std::vector<AddressRange> trampolines;
};

/// An immutable snapshot of the loaded modules, published through an atomic
/// pointer.
struct Table {
  std::vector<std::shared_ptr<const ModuleData>> data;
  std::vector<Module> storage;
  ModuleMap map{std::span<Module>()};
  /// The modules' `extra` sections, looked up when `map` has no FDE.
  std::vector<Module> extra_storage;
  ModuleMap extra_map{std::span<Module>()};
  /// The modules' signal trampolines.
  std::vector<AddressRange> trampolines;
  unsigned long long adds = 0;
  unsigned long long subs = 0;
  std::size_t generated = 0;
  BacktraceOptions options;
};

/// The current table (null before backtrace_init) and the number of walks
/// running; a retired table is freed only when no walk runs.
extern std::atomic<const Table*> g_table;
extern std::atomic<int> g_walkers;
/// Set once membarrier(PRIVATE_EXPEDITED) is registered: walks then announce
/// themselves in their own ThreadState::walking (plain stores) instead of
/// the shared g_walkers (two locked read-modify-writes per walk), and
/// rebuild() supplies the store-load ordering with a membarrier() call.
extern std::atomic<bool> g_asymmetric;
/// The current table's map generation (0 before backtrace_init), published
/// with it: the straight prelude of a walk checks its memo against it
/// without taking the table.
extern std::atomic<std::uint64_t> g_generation;

inline constexpr std::size_t kCacheEntries = 4096;

/// Memo-only bits of Memo::rule[].flags: rules a straight run (see
/// backtrace.cpp) takes with a range check on the CFA alone: the CFA must
/// lie in [SP + 16, stack end], and then the RA (at CFA - 8) and the saved
/// FP (below the CFA, at or above SP) are inside [SP, stack end):
///  - kMemoStraightSp: CFA = SP + 16 or more, the FP, if saved, below the
///    CFA and at or above the SP;
///  - kMemoStraightFp: CFA = FP + 16 or more, the FP, if saved, at CFA - 8
///    or CFA - 16 (the frame record of -fno-omit-frame-pointer code).
/// Both: the RA at CFA - 8.
inline constexpr std::uint16_t kMemoStraightSp = 1u << 8;
inline constexpr std::uint16_t kMemoStraightFp = 1u << 9;

/// The kMemoStraight* bit `r` (a cache rule) qualifies for, or 0.
inline std::uint16_t straight_bit(const CompactRule& r) noexcept {
  constexpr std::uint16_t kNot =
      CompactRule::kRaInRegister | CompactRule::kRaUndefined | CompactRule::kRaMangled | CompactRule::kSignal;
  if ((r.flags & kNot) || !(r.flags & CompactRule::kRaOnStack)) return 0;
  if (r.ra_offset_by_8 != -1 || r.cfa_offset < 16) return 0;
  const bool fp_saved = (r.flags & CompactRule::kFpOnStack) != 0;
  if (r.flags & CompactRule::kCfaBaseFp) {
    const bool fp_near = r.fp_offset_by_8 == -1 || r.fp_offset_by_8 == -2;
    return !fp_saved || fp_near ? kMemoStraightFp : 0;
  }
  return !fp_saved || (r.fp_offset_by_8 < 0 && r.cfa_offset + r.fp_offset_by_8 * 8 >= 0) ? kMemoStraightSp : 0;
}

/// The memo's copy of cache rule `r`: kValid and its kMemoStraight* bit
/// set; a straight rule that saves no FP names the RA slot as its FP slot,
/// so that a straight run reads that slot unconditionally (and keeps the
/// value only under kFpOnStack).
inline CompactRule memo_rule(const CompactRule& r) noexcept {
  CompactRule m = r;
  const std::uint16_t straight = straight_bit(r);
  m.flags |= static_cast<std::uint16_t>(CompactRule::kValid | straight);
  if (straight && !(r.flags & CompactRule::kFpOnStack)) m.fp_offset_by_8 = -1;
  return m;
}

/// Depths the memo covers; deeper frames go through the cache alone.
inline constexpr std::size_t kMemoDepth = 256;

/// The thread's last walk, by depth: the lookup PC seen at each depth and
/// the compact rule the cache gave for it (rule.flags has kValid when set).
/// Two parallel arrays rather than one of pairs: the straight run indexes
/// both, and the output, with the one depth register.
struct Memo {
  /// One entry more than kMemoDepth: the straight run's stop sentinel.
  static constexpr std::size_t kEntries = kMemoDepth + 1;
  std::uint64_t pc[kEntries] = {};
  CompactRule rule[kEntries] = {};
  void clear() noexcept {
    for (std::size_t i = 0; i < kEntries; ++i) {
      pc[i] = 0;
      rule[i] = CompactRule{};
    }
  }
};


/// Per-thread state, created by backtrace_register_thread().
struct ThreadState {
  /// The thread's stack: [lo, hi). For the main thread lo is the bottom of
  /// its mapping when registered (the walk lowers it to the current SP).
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  /// The main thread, whose stack grows on demand below `lo`, down to
  /// `limit` (the bottom of its rlimit-sized area).
  bool grows = false;
  std::uint64_t limit = 0;
  /// Set while a walk uses `cache`: a walk from a signal handler that
  /// interrupted another walk on this thread goes without the cache.
  volatile int busy = 0;
  /// Walks running on this thread (nested through signal handlers), read
  /// by rebuild() after a membarrier() when g_asymmetric is set. Only this
  /// thread writes it, with plain load/store pairs: a handler that
  /// interrupts one leaves the count as it found it.
  std::atomic<int> walking{0};
  StaticRuleCache<kCacheEntries> cache;
  /// The last walk's rules by depth, filled under `memo_generation` (the
  /// ModuleMap generation; 0: empty). A walk predicts that frame d has the
  /// same PC as last time: the entry's address does not depend on the RA
  /// just read, so its load leaves the per-frame dependency chain, and the
  /// prediction is verified by comparing PCs. Used only together with
  /// `cache` (same `busy` guard); holds only rules the cache's fast path
  /// would use for that PC (no trampolines, no slow-path flags).
  std::uint64_t memo_generation = 0;
  Memo memo;
};

/// Set by backtrace_register_thread(). Initial-exec TLS: reading it is a
/// plain %fs-relative load, safe in a signal handler.
/// (constinit: no dynamic initialization, so no TLS wrapper call on access.)
[[gnu::tls_model("initial-exec"), gnu::visibility("hidden")]] extern thread_local constinit ThreadState* t_state;

/// The calling thread's state or null.
inline ThreadState* thread_state() noexcept { return t_state; }

}  // namespace sframe::bt
