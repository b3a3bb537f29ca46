// SPDX-License-Identifier: MIT
// The unwinder's module maps from modules' unwind information (see
// sframe/unwind/module_table.hpp).
#include "sframe/unwind/module_table.hpp"

#include <algorithm>
#include <utility>

namespace sframe {
namespace {

// Room for as many entries again as `n`, at least 64: a profile generates
// hundreds of FDEs one at a time, and a fixed step made their additions
// quadratic (each full refill re-sorts every entry and empties the rule
// cache).
std::size_t with_room(std::size_t n) { return n + std::max<std::size_t>(64, n); }

// The indices of `entries` in address order, equal starts in their order.
// Sorted as (start, index) keys: moving the Modules themselves (a Section
// each) costs more than the rest of a refill.
std::vector<std::size_t> address_order(std::span<const Module> entries) {
  std::vector<std::pair<std::uint64_t, std::size_t>> keys(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) keys[i] = {entries[i].range.begin, i};
  std::sort(keys.begin(), keys.end());
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].second;
  return order;
}

std::vector<Module> by_address(std::span<const Module> entries) {
  std::vector<Module> out;
  out.reserve(entries.size());
  for (std::size_t i : address_order(entries)) out.push_back(entries[i]);
  return out;
}

}  // namespace

std::optional<Module> ModuleTable::entry(const cfi::UnwindSection& u, AddressRange range, std::uint64_t bias) noexcept {
  // usable(): a section with an FdeIndex, a RowIndex or both; either may be
  // missing (assign() leaves the FdeIndex out beside a RowIndex when told
  // to, assign_rows() never builds one), so neither is taken for granted.
  if (!u.usable()) return std::nullopt;
  Module m;
  m.range = range;
  m.bias = bias;
  m.section = *u.section;
  m.index = u.index ? &*u.index : nullptr;
  m.rows = u.rows ? &*u.rows : nullptr;
  m.compact_rows = u.rows && !u.compact_rows.empty() ? u.compact_rows.data() : nullptr;
  return m;
}

std::optional<Module> ModuleTable::fde_entry(const cfi::GeneratedFde& g, AddressRange range,
                                             std::uint64_t bias) noexcept {
  // Cut to the mapping: a file mapped in parts (or an FDE that claims more
  // than its segment) must not cover another mapping's addresses.
  const std::uint64_t lo = std::max(g.start + bias, range.begin);
  const std::uint64_t hi = std::min(g.end + bias, range.end);
  if (lo >= hi) return std::nullopt;
  return entry(g.section, {lo, hi}, bias);
}

void ModuleTable::Entries::add(const cfi::ModuleUnwind& u, AddressRange range, std::uint64_t bias) {
  if (auto m = entry(u.primary(), range, bias)) primary.push_back(*m);
  if (auto m = entry(u.extra(), range, bias)) extra.push_back(*m);
  std::vector<Module>& fdes = fdes_in_extra(u) ? extra : primary;
  for (const cfi::GeneratedFde* g : u.generated_fdes())
    if (auto m = fde_entry(*g, range, bias)) fdes.push_back(*m);
}

void ModuleTable::fill(std::span<const Module> entries, std::vector<Module>& storage, ModuleMap& map,
                       std::size_t capacity) {
  storage.assign(std::max(entries.size(), capacity), Module{});
  map = ModuleMap(std::span<Module>(storage));
  // In address order, so that each add() appends; one at a time, so that
  // an entry overlapping an earlier one is left out alone.
  for (std::size_t i : address_order(entries)) (void)map.add(entries[i]);
}

ModuleTable::ModuleTable() : primary_(std::span<Module>()), extra_(std::span<Module>()) {}

void ModuleTable::assign(const Entries& e) {
  fill(e.primary, primary_storage_, primary_, with_room(e.primary.size()));
  fill(e.extra, extra_storage_, extra_, with_room(e.extra.size()));
}

namespace {

// Adds `m` to `map`; the cache, if in step with the map, drops only the
// new range's rules (the others stay true).
bool add_adopted(ModuleMap& map, const Module& m, RuleCache* cache) {
  const std::uint64_t gen = map.generation();
  if (!map.add(m)) return false;
  if (cache && cache->generation() == gen) cache->adopt(map.generation(), m.range.begin, m.range.end);
  return true;
}

}  // namespace

bool ModuleTable::extend(const Entries& e, RuleCache* cache) {
  if (primary_.modules().size() + e.primary.size() > primary_.capacity() ||
      extra_.modules().size() + e.extra.size() > extra_.capacity())
    return false;
  // Merged in one pass each: a process's maps hold thousands of generated
  // FDEs, and inserting a new mapping's entries one at a time shifted them
  // all for each.
  const std::vector<Module> prim = by_address(e.primary), extra = by_address(e.extra);
  const std::uint64_t gen = primary_.generation();
  if (!primary_.add_sorted(prim)) return false;
  if (cache && cache->generation() == gen)
    for (const Module& m : prim) cache->adopt(primary_.generation(), m.range.begin, m.range.end);
  return static_cast<bool>(extra_.add_sorted(extra));
}

ModuleTable::Generated ModuleTable::generate_for_pc(cfi::ModuleUnwind& u, AddressRange range, std::uint64_t bias,
                                                    std::uint64_t pc, RuleCache* cache) {
  if (!u.on_demand() || !range.contains(pc)) return Generated::kNothing;
  // Only for what the own section lacks (generate_for_pc()'s contract): a
  // PC it covers without a rule stays without one.
  if (u.primary().usable() && u.primary().covers(pc - bias)) return Generated::kNothing;
  Expected<const cfi::GeneratedFde*> g = u.generate_for_pc(pc - bias);
  if (!g) return Generated::kNothing;
  const bool in_extra = fdes_in_extra(u);
  ModuleMap& map = in_extra ? extra_ : primary_;
  // Already there (generated before, e.g. for another placement of the
  // same file that shares `u`, and since added): nothing new.
  if (map.find(pc)) return Generated::kNothing;
  std::optional<Module> m = fde_entry(**g, range, bias);
  if (!m || !m->range.contains(pc)) return Generated::kNothing;
  if (map.modules().size() == map.capacity()) {
    // Full: a refill with room (a new generation; the cache empties).
    std::vector<Module> all(map.modules().begin(), map.modules().end());
    all.push_back(*m);
    std::vector<Module>& storage = in_extra ? extra_storage_ : primary_storage_;
    std::vector<Module> grown;
    fill(all, grown, map, with_room(all.size()));
    storage = std::move(grown);  // the buffer `map` points into moves with it
    return map.find(pc) ? Generated::kAdded : Generated::kNothing;
  }
  // Overlapping an entry present (hostile FDE ranges): left out.
  if (!add_adopted(map, *m, in_extra ? nullptr : cache)) return Generated::kNothing;
  return Generated::kAdded;
}

}  // namespace sframe
