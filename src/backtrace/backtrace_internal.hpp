// SPDX-License-Identifier: MIT
// sframepp: state shared by the in-process backtrace's setup
// (backtrace_modules.cpp, not async-signal-safe) and its walk (backtrace.cpp,
// async-signal-safe).
#pragma once

#include <link.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sframe/backtrace/backtrace.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/unwind/unwind.hpp"

#include "../unwind/module_hint.hpp"

namespace sframe::bt {

/// An SFrame section held in memory with its lookup accelerators (the
/// shared per-module builder's, see sframe/unwind/module_unwind.hpp).
using OwnedSection = cfi::UnwindSection;

/// What dl_iterate_phdr reports about one module, copied out so that the
/// slow work (generating SFrame) runs without the loader lock.
struct RawModule {
  std::string name;
  std::uint64_t bias = 0;
  std::vector<ElfW(Phdr)> phdrs;
};

/// One loaded module's unwind data. Immutable once built; shared by every
/// table that lists the module, so refreshes reuse it.
struct ModuleData {
  std::string name;
  std::uint64_t bias = 0;
  AddressRange range;
  /// The module's sections, built by the shared builder: `primary()` a copy
  /// of PT_GNU_SFRAME or a generated section, `extra()` for a module with
  /// PT_GNU_SFRAME the .eh_frame functions it lacks (none when it covers
  /// every FDE .eh_frame_hdr lists). Owned here (never the module's own
  /// mapping) so that a walk through a stale table after dlclose reads
  /// nothing unmapped.
  cfi::ModuleUnwind unwind;
  /// Signal trampolines found in the module's code (glibc __restore_rt),
  /// runtime addresses.
  std::vector<AddressRange> trampolines;
  /// Why the module has no SFrame although it has unwind information (its
  /// file unreadable, .eh_frame unusable); empty when it did not fail.
  std::optional<Error> error;
  /// Words on a failure the builder's reason does not tell (its file could
  /// not be opened), or "".
  std::string failure;
  bool failed() const noexcept { return error.has_value(); }
  /// Set while its SFrame waits for the background generator (which
  /// replaces this ModuleData with a built one in a new table); the
  /// module's program headers, for that.
  std::optional<RawModule> deferred;
};

/// A module dl_iterate_phdr listed (any, with code or not), for the
/// readiness check against the dynamic linker's list.
struct LoadedKey {
  std::uint64_t bias = 0;
  std::string name;
  friend bool operator<(const LoadedKey& a, const LoadedKey& b) { return a.bias < b.bias; }
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
  /// Every module's executable range (with or without SFrame, the vDSO
  /// too): a frame-pointer step must land in one.
  std::vector<AddressRange> code;
  /// Every module dl_iterate_phdr listed, sorted by bias.
  std::vector<LoadedKey> loaded;
  /// Prebuilt lookup slots of `map` and `extra_map` (built by
  /// build_slots() once the maps are complete): a cold frame that changes
  /// module searches 8-byte starts and copies one slot instead of
  /// searching the Modules and reading the module's RowIndex.
  struct Slots {
    std::vector<std::uint64_t> begins;
    std::vector<detail::ModuleHint::Slot> slots;
    detail::ModuleHint::Slots view;
  };
  Slots map_slots;
  Slots extra_slots;
  /// Per module with compiled rows, the memo's step code of each row
  /// (straight_code() of its compiled rule), which the slots' `codes`
  /// point at: a cold frame's memo fill loads it rather than deriving it.
  std::vector<std::vector<std::int64_t>> row_codes;
  /// Per module with compiled rows, its slot's bucket rules (empty until
  /// every module is built: assemble()).
  std::vector<std::vector<detail::BucketRule>> bucket_rules;
  /// The hull of `trampolines` as [lo, lo + span) (span 0: none): a cold
  /// frame outside it (nearly all) skips the scan of every range.
  std::uint64_t tramp_lo = 0;
  std::uint64_t tramp_span = 0;
  unsigned long long adds = 0;
  unsigned long long subs = 0;
  std::size_t generated = 0;
  /// Modules waiting for the background generator (ModuleData::deferred).
  std::size_t deferred = 0;
  BacktraceOptions options;
};

/// The lookup PC of the last walk that stopped (kNoSFrameForPc) at a PC in
/// no module of its table (0: none since backtrace_refresh_if_needed()
/// consumed it). Lock-free; set from signal handlers.
extern std::atomic<std::uint64_t> g_unknown_pc;

/// For the walk: records `pc` in g_unknown_pc when it lies in no module's
/// code in `table` (a module loaded after the table was built).
/// Async-signal-safe (a relaxed atomic store).
inline void note_unknown_pc(const Table& table, std::uint64_t pc) noexcept {
  for (const AddressRange& r : table.code)
    if (r.contains(pc)) return;
  g_unknown_pc.store(pc == 0 ? 1 : pc, std::memory_order_relaxed);
}

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

/// Depths the memo covers; deeper frames go through the cache alone.
inline constexpr std::size_t kMemoDepth = 256;

/// A rule as the straight run (backtrace_entry.cpp) takes it, coded in one
/// int64 so that the common frame costs one load and one sign test:
///  - > 0: a plain frame: CFA = SP + code (16 .. 2^31 - 1 bytes), RA at
///    CFA - 8, FP unchanged;
///  - 0: not straight (the run stops);
///  - < 0: any other straight frame, its fields packed (see StraightCode),
///    or the outermost frame (StraightCode::kOutermost).
/// Straight rules are those whose slots lie inside [SP, stack end) once the
/// CFA lies in [SP + 16, stack end]: the RA at CFA - 8 and
///  - CFA = SP + 16 or more, the FP, if saved, below the CFA and at or
///    above the SP;
///  - CFA = FP + 16 or more, the FP, if saved, at CFA - 8 or CFA - 16 (the
///    frame record of -fno-omit-frame-pointer code).
struct StraightCode {
  /// A negative code's fields: bits 0-31 the CFA offset (bytes, 16 ..
  /// 2^31 - 1), bits 32-47 the FP slot relative to the CFA (int16, bytes;
  /// 0: not saved), bit 48 set for CFA = FP + offset, bit 63 set.
  static constexpr std::int64_t kFpBase = std::int64_t{1} << 48;
  /// The outermost frame (RA undefined): the run writes its PC and ends
  /// the walk there, with no table touched (bit 49; no other field).
  static constexpr std::int64_t kOutermostBit = std::int64_t{1} << 49;
  static constexpr std::int64_t kSpecial = std::numeric_limits<std::int64_t>::min();

  static constexpr std::int64_t special(std::int32_t cfa_offset, std::int32_t fp_slot, bool fp_based) noexcept {
    return kSpecial | (fp_based ? kFpBase : 0) |
           static_cast<std::int64_t>(std::uint64_t{static_cast<std::uint16_t>(fp_slot)} << 32) |
           static_cast<std::int64_t>(static_cast<std::uint32_t>(cfa_offset));
  }
  static constexpr std::uint64_t cfa_offset(std::int64_t code) noexcept { return static_cast<std::uint32_t>(code); }
  static constexpr std::int64_t fp_slot(std::int64_t code) noexcept {
    return static_cast<std::int16_t>(static_cast<std::uint16_t>(static_cast<std::uint64_t>(code) >> 32));
  }
  static constexpr bool fp_based(std::int64_t code) noexcept { return (code & kFpBase) != 0; }
  static constexpr std::int64_t kOutermost = std::numeric_limits<std::int64_t>::min() | kOutermostBit;
};

/// The straight-run code of cache rule `r` (0 if it is not straight).
inline std::int64_t straight_code(const CompactRule& r) noexcept {
  if ((r.flags & (CompactRule::kRaUndefined | CompactRule::kNoSFrame | CompactRule::kSignal)) == CompactRule::kRaUndefined)
    return StraightCode::kOutermost;
  constexpr std::uint16_t kNot = CompactRule::kRaInRegister | CompactRule::kRaUndefined | CompactRule::kRaMangled |
                                 CompactRule::kSignal | CompactRule::kNoSFrame;
  if ((r.flags & kNot) || !(r.flags & CompactRule::kRaOnStack)) return 0;
  if (r.ra_offset_by_8 != -1 || r.cfa_offset < 16) return 0;
  const bool fp_saved = (r.flags & CompactRule::kFpOnStack) != 0;
  const std::int32_t fp_slot = fp_saved ? std::int32_t{r.fp_offset_by_8} * 8 : 0;
  if (r.flags & CompactRule::kCfaBaseFp) {
    const bool fp_near = fp_slot == -8 || fp_slot == -16;
    return !fp_saved || fp_near ? StraightCode::special(r.cfa_offset, fp_slot, true) : 0;
  }
  if (!fp_saved) return r.cfa_offset;
  return fp_slot < 0 && r.cfa_offset + fp_slot >= 0 ? StraightCode::special(r.cfa_offset, fp_slot, false) : 0;
}

/// The thread's last walk, by depth: a key for the PC seen at each depth
/// (its lookup PC + 1, which is the RA itself for a caller frame), the
/// compact rule the cache gave for it (rule.flags has kValid when set) and
/// that rule's straight-run code. Parallel arrays of 8-byte entries rather
/// than one of records: the straight run indexes them, and the output, with
/// the one depth register.
struct Memo {
  /// One entry more than kMemoDepth: the straight run's stop sentinel.
  static constexpr std::size_t kEntries = kMemoDepth + 1;
  std::uint64_t key[kEntries] = {};
  std::int64_t step[kEntries] = {};
  CompactRule rule[kEntries] = {};

  static constexpr std::uint64_t key_of(std::uint64_t lookup_pc) noexcept { return lookup_pc + 1; }
  bool holds(std::size_t depth, std::uint64_t lookup_pc) const noexcept { return key[depth] == key_of(lookup_pc); }

  /// `r` has kValid set (every rule a walk applies has: the cache's and
  /// lookup_compact()'s): setting it here cost a repacking of the rule's
  /// fields on every cold frame.
  /// `code` is straight_code(r), precomputed where the rule came from a
  /// module's compiled rows (Table::row_codes).
  void set(std::size_t depth, std::uint64_t lookup_pc, const CompactRule& r, std::int64_t code) noexcept {
    key[depth] = key_of(lookup_pc);
    rule[depth] = r;
    step[depth] = code;
    used = depth < used ? used : depth + 1;
  }
  void set(std::size_t depth, std::uint64_t lookup_pc, const CompactRule& r) noexcept {
    set(depth, lookup_pc, r, straight_code(r));
  }
  /// set() without the bookkeeping of `used`, for a loop that fills
  /// depths [from, to) and then calls cover(to) once.
  void put(std::size_t depth, std::uint64_t lookup_pc, const CompactRule& r, std::int64_t code) noexcept {
    key[depth] = key_of(lookup_pc);
    rule[depth] = r;
    step[depth] = code;
  }
  void cover(std::size_t depths) noexcept { used = depths < used ? used : depths; }
  /// Empties the depths set since the last clear (every other entry is
  /// empty already): a flush then writes only what the last walks filled.
  void clear() noexcept {
    for (std::size_t i = 0; i < used; ++i) {
      key[i] = 0;
      step[i] = 0;
      rule[i] = CompactRule{};
    }
    used = 0;
  }
  /// Entries [used, kEntries) are empty. After the arrays: the assembly
  /// entry reads them at fixed offsets.
  std::size_t used = 0;
};

/// A slot holding no PC (size 0): where a ColdHint starts.
inline constexpr detail::ModuleHint::Slot kNoSlot{};

/// The modules the cold run's last lookups found (fast_runs.hpp,
/// cold_run() and cold_lookup()): pointers into the table's prebuilt slots
/// (a module switch costs a pointer, not a Slot copy), the last two of the
/// native map (a walk alternates between a program and libc) and the last
/// of the generated one. Only where to look first: every lookup checks the
/// PC against the slot's range and reads the rule from the table's rows,
/// so a hint holds no PC-to-rule answer and survives a flush of the rule
/// cache; it lives as long as the table (ThreadState::cold_hint).
struct ColdHint {
  const detail::ModuleHint::Slot* cur = &kNoSlot;
  const detail::ModuleHint::Slot* prev = &kNoSlot;
  const detail::ModuleHint::Slot* fallback = &kNoSlot;
  // Whether a trampoline meets `cur` is cur->tramps (build_slots()).
};

/// Per-thread state, created by backtrace_register_thread() (new_state()):
/// one anonymous mapping holds it and, after it, its rule cache's entries.
struct ThreadState {
  /// `zeroed`: kCacheEntries entries of all-zero bytes (the mapping's
  /// fresh pages), which the cache leaves unwritten until it inserts.
  explicit ThreadState(std::span<RuleCache::Entry> zeroed) noexcept : cache(zeroed, RuleCache::ZeroedStorage{}) {}
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
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
  RuleCache cache;
  /// The last walk's rules by depth, filled under `memo_generation` (the
  /// ModuleMap generation; 0: empty). A walk predicts that frame d has the
  /// same PC as last time: the entry's address does not depend on the RA
  /// just read, so its load leaves the per-frame dependency chain, and the
  /// prediction is verified by comparing PCs. Used only together with
  /// `cache` (same `busy` guard); holds only rules the cache's fast path
  /// would use for that PC (no trampolines, no slow-path flags).
  std::uint64_t memo_generation = 0;
  Memo memo;
  /// The cold run's module hint, kept from walk to walk (a cold walk after
  /// a flush then starts in the modules the last one ended in, rather than
  /// searching the slots for each: two or three binary searches a walk,
  /// each a chain of dependent loads). Points into the table of
  /// `memo_generation` and is reset with the memo when that changes.
  ColdHint cold_hint;
  /// Set while `cache` holds nothing (registered, flushed, or emptied by
  /// a map change): the walk that finds it set looks no PC up in the cache,
  /// where every probe would miss (each one a cache line read), and clears
  /// it at its end.
  /// Last: the assembly entry reads the fields above at fixed offsets.
  bool cache_empty = true;
};

/// Set by backtrace_register_thread(). Initial-exec TLS: reading it is a
/// plain %fs-relative load, safe in a signal handler.
/// (constinit: no dynamic initialization, so no TLS wrapper call on access.)
[[gnu::tls_model("initial-exec"), gnu::visibility("hidden")]] extern thread_local constinit ThreadState* t_state;

/// The calling thread's state or null.
inline ThreadState* thread_state() noexcept { return t_state; }

}  // namespace sframe::bt

/// The rest of an in-process walk after the entry's straight run
/// (backtrace_entry.cpp), defined in backtrace.cpp: `result->size` frames
/// are written (0: none, and `pc` is frame 0's return address; else
/// `pc`/`sp`/`fp` are frame result->size's). Writes every field of
/// `*result`; returns result->size. Reached by a jump with the six
/// arguments in registers.
extern "C" std::size_t sframepp_backtrace_walk_on(void** out, std::size_t size, sframe::BacktraceResult* result,
                                                  std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept
    __attribute__((visibility("hidden")));
