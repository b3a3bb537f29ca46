// SPDX-License-Identifier: MIT
// One process's mappings as a perf.data recording tells them (MMAP2, FORK,
// COMM with exec, EXIT), and the unwinder's module maps over them; private
// to the perf library (perf_unwind.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe::perf::detail {

struct Dso;  // one mapped file (perf_unwind.cpp)

struct MapEntry {
  std::uint64_t start = 0, end = 0, pgoff = 0;
  Dso* dso = nullptr;  // null: anonymous or unreadable file
  std::uint64_t bias = 0;
  bool before_exec = false;  // the process's image before its last exec
};

// One process's executable mappings and the unwinder's maps over them.
struct Space {
  std::map<std::uint64_t, MapEntry> maps;  // by start, disjoint
  bool dirty = true;
  // Since the last rebuild: the executable mappings added, in order, and
  // whether any mapping was cut or dropped. Additions alone are taken into
  // the unwinder's maps as they are (Impl::extend), which keeps the rule
  // cache's entries for the rest: a process's loader and dlopen() map one
  // library after another between samples, and a full rebuild for each
  // emptied the cache.
  std::vector<MapEntry> added;
  bool cut_since_build = true;
  std::uint64_t built_epoch = 0;
  // The unwinder's maps; `built` once assigned.
  ModuleTable table;
  bool built = false;
  std::vector<AddressRange> trampolines;
  std::unique_ptr<StaticRuleCache<1024>> cache;

  // The mapping holding `addr`. A walk asks for every frame, mostly in the
  // mapping it asked for last: that one is kept (forget() drops it
  // whenever `maps` changes).
  const MapEntry* find(std::uint64_t addr) const {
    if (last && addr >= last->start && addr < last->end) return last;
    auto it = maps.upper_bound(addr);
    if (it == maps.begin()) return nullptr;
    --it;
    if (addr >= it->second.end) return nullptr;
    last = &it->second;
    return last;
  }
  void forget() { last = nullptr; }
  mutable const MapEntry* last = nullptr;
  // Inserts [start, end), cutting what it overlaps (a new mapping replaces
  // the old pages, as mmap(MAP_FIXED) does). `exec` false: only cuts.
  void insert(const MapEntry& e, bool exec) {
    forget();
    if (exec) added.push_back(e);
    std::vector<MapEntry> keep;
    bool cut = false;
    auto it = maps.upper_bound(e.start);
    if (it != maps.begin()) --it;
    while (it != maps.end() && it->second.start < e.end) {
      const MapEntry old = it->second;
      if (old.end <= e.start) {
        ++it;
        continue;
      }
      it = maps.erase(it);
      cut = true;
      if (old.start < e.start) {
        MapEntry l = old;
        l.end = e.start;
        keep.push_back(l);
      }
      if (old.end > e.end) {
        MapEntry r = old;
        r.pgoff += e.end - old.start;
        r.start = e.end;
        keep.push_back(r);
      }
    }
    for (const MapEntry& k : keep) maps[k.start] = k;
    if (exec) maps[e.start] = e;
    // Data mappings (malloc's, the interpreter's) that cut no code leave
    // the unwinder's maps as they are.
    if (exec || cut) dirty = true;
    if (cut) cut_since_build = true;
  }
  // After an exec the old image's mappings stay until the new image runs
  // (see Impl::process, kRecordComm): marked here, dropped by settle_exec().
  bool before_exec = false;
  void mark_exec() {
    for (auto& [start, m] : maps) m.before_exec = true;
    before_exec = !maps.empty();
  }
  // Drops the old image's mappings once a sample's user PC lies in a
  // mapping made since the exec: execve() has returned. A process kept them
  // for good otherwise (every image a shell script's execs went through),
  // and every build of the unwinder's maps took their modules along.
  void settle_exec(std::uint64_t user_pc) {
    if (!before_exec) return;
    const MapEntry* m = find(user_pc);
    if (!m || m->before_exec) return;
    std::erase_if(maps, [](const auto& kv) { return kv.second.before_exec; });
    before_exec = false;
    reset_maps();
  }
  // Every mapping changes (exec, a fork's copy): the next build is full.
  void reset_maps() {
    forget();
    dirty = true;
    cut_since_build = true;
    added.clear();
  }
};

}  // namespace sframe::perf::detail
