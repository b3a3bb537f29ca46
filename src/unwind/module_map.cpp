// SPDX-License-Identifier: MIT
// The module map and the rule cache: the unwinder's setup-time state.
#include <algorithm>
#include <atomic>
#include <bit>

#include "sframe/unwind/unwind.hpp"

namespace sframe {
namespace {

// Generations are unique process-wide, so a RuleCache moved between maps
// (or a map cleared and refilled) never sees a stale generation match.
// Lock-free on every target we build for; only touched by map updates.
std::atomic<std::uint64_t> g_next_generation{1};

std::uint64_t next_generation() noexcept { return g_next_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

ModuleMap::ModuleMap(std::span<Module> storage) noexcept : storage_(storage), generation_(next_generation()) {}

Expected<void> ModuleMap::add(const Module& m) noexcept {
  if (m.range.begin >= m.range.end) return make_error(IoErrc::kBadModuleRange, 0, m.range.begin);
  if (size_ == storage_.size()) return make_error(IoErrc::kModuleMapFull, 0, storage_.size());
  // First module starting after m: m goes before it.
  // By binary search: adding n modules in address order costs O(n log n)
  // (no shifting), as maps of thousands of generated FDEs are built.
  std::size_t at = 0, hi = size_;
  while (at < hi) {
    const std::size_t mid = at + (hi - at) / 2;
    if (storage_[mid].range.begin < m.range.begin)
      at = mid + 1;
    else
      hi = mid;
  }
  if (at > 0 && storage_[at - 1].range.end > m.range.begin) return make_error(IoErrc::kModulesOverlap, 0, m.range.begin);
  if (at < size_ && storage_[at].range.begin < m.range.end) return make_error(IoErrc::kModulesOverlap, 0, m.range.begin);
  for (std::size_t i = size_; i > at; --i) storage_[i] = storage_[i - 1];
  storage_[at] = m;
  ++size_;
  generation_ = next_generation();
  return {};
}

Expected<void> ModuleMap::add_sorted(std::span<const Module> ms) noexcept {
  if (ms.empty()) return {};
  if (ms.size() > storage_.size() - size_) return make_error(IoErrc::kModuleMapFull, 0, storage_.size());
  // Checked in merged order before anything moves, so that an error leaves
  // the map as it was.
  const Module* prev = nullptr;
  for (std::size_t i = 0, j = 0; i < size_ || j < ms.size();) {
    const bool take_new = j < ms.size() && (i == size_ || ms[j].range.begin < storage_[i].range.begin);
    const Module& m = take_new ? ms[j++] : storage_[i++];
    if (take_new && m.range.begin >= m.range.end) return make_error(IoErrc::kBadModuleRange, 0, m.range.begin);
    if (prev && prev->range.end > m.range.begin)
      return make_error(IoErrc::kModulesOverlap, 0, take_new ? m.range.begin : prev->range.begin);
    prev = &m;
  }
  // From the top down, in place: each module moves at most once.
  std::size_t i = size_, j = ms.size(), k = size_ + ms.size();
  while (j > 0) {
    if (i > 0 && storage_[i - 1].range.begin > ms[j - 1].range.begin)
      storage_[--k] = storage_[--i];
    else
      storage_[--k] = ms[--j];
  }
  size_ += ms.size();
  generation_ = next_generation();
  return {};
}

bool ModuleMap::remove(std::uint64_t begin) noexcept {
  for (std::size_t i = 0; i < size_; ++i) {
    if (storage_[i].range.begin != begin) continue;
    for (std::size_t j = i + 1; j < size_; ++j) storage_[j - 1] = storage_[j];
    --size_;
    generation_ = next_generation();
    return true;
  }
  return false;
}

void ModuleMap::clear() noexcept {
  size_ = 0;
  generation_ = next_generation();
}

const Module* ModuleMap::find(std::uint64_t pc) const noexcept {
  // Last module whose range begins at or before pc.
  std::size_t lo = 0;
  std::size_t hi = size_;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (storage_[mid].range.begin <= pc) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return nullptr;
  const Module& m = storage_[lo - 1];
  return m.range.contains(pc) ? &m : nullptr;
}

std::string_view to_string(ModuleSource s) noexcept {
  switch (s) {
    case ModuleSource::kNative:
      return "native";
    case ModuleSource::kGenerated:
      return "generated";
    case ModuleSource::kNone:
      return "none";
  }
  return "?";
}

void RuleCache::set_storage(std::span<Entry> storage) noexcept {
  // At most 2^31 entries, so that set indices fit the clear() log.
  const std::size_t usable = std::min<std::size_t>(storage.size(), std::size_t{1} << 31);
  const std::size_t n = usable < 2 ? 0 : std::bit_floor(usable);
  entries_ = storage.first(n);
  // Sets of two: log2(n / 2) bits of the folded PC pick the set, times 2.
  const std::size_t sets = n / 2;
  shift_ = sets > 1 ? static_cast<unsigned>(std::countr_zero(sets)) : 1u;
  mask_ = sets > 1 ? sets - 1 : 0;
}

RuleCache::RuleCache(std::span<Entry> storage) noexcept {
  set_storage(storage);
  written_ = kLogged + 1;  // the caller's storage: every entry cleared
  clear();
}

RuleCache::RuleCache(std::span<Entry> storage, ZeroedStorage) noexcept {
  // No clear(): an all-zero Entry is empty (pc 0, no kValid in its flags).
  set_storage(storage);
  written_ = 0;
}

void RuleCache::reset(std::uint64_t generation) noexcept {
  clear();
  generation_ = generation;
}

void RuleCache::adopt(std::uint64_t generation, std::uint64_t lo, std::uint64_t hi) noexcept {
  generation_ = generation;
  if (entries_.empty() || lo >= hi) return;
  // Emptied in place: clear()'s log of written sets stays a superset.
  const auto drop = [&](std::size_t s) noexcept {
    for (Entry& e : entries_.subspan(s, 2))
      if (e.pc >= lo && e.pc < hi) e = Entry{};
  };
  // Only the sets the entries of [lo, hi) can be in: those logged since the
  // last clear() when the log is complete, else those of the range's PCs
  // when it is shorter than the storage (one generated FDE is usually a
  // few hundred bytes; a walk adds hundreds of them, each a call here).
  if (written_ <= kLogged) {
    for (unsigned i = 0; i < written_; ++i) drop(written_sets_[i]);
  } else if (hi - lo < entries_.size() / 2) {
    for (std::uint64_t pc = lo; pc < hi; ++pc) drop(set(pc));
  } else {
    for (Entry& e : entries_)
      if (e.pc >= lo && e.pc < hi) e = Entry{};
  }
}

void RuleCache::clear() noexcept {
  if (written_ <= kLogged) {
    for (unsigned i = 0; i < written_; ++i) {
      entries_[written_sets_[i]] = Entry{};
      entries_[written_sets_[i] + 1] = Entry{};
    }
  } else {
    for (Entry& e : entries_) e = Entry{};
  }
  written_ = 0;
}

}  // namespace sframe
