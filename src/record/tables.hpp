// SPDX-License-Identifier: MIT
// sframepp: the in-kernel unwind tables of `sframe record` (layout:
// bpf/record_abi.h), built in user space from what the library already
// has: a module's rules come from the shared module builder
// (cfi::ModuleUnwind: its own .sframe, else SFrame generated from its
// .eh_frame, plus generated SFrame for the FDEs the own section lacks),
// processes' mappings from the perf::Session that follows MMAP2, COMM,
// FORK and EXIT records (the same process model `sframe perf script` uses).
//
// The layout: per module file, its link-time PCs cut into 1 KiB pages, each
// holding the rows that start in it after one at offset 0 with the rule in
// effect there (lookup: one hash-map lookup, then a binary search in up to
// 119 rows; denser pages split into 256-byte sub-pages); per process, its
// executable mappings sorted (a binary search).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpf/record_abi.h"

namespace sframe::elf {
class ElfFile;
}
namespace sframe::perf {
class Session;
}

namespace sframe::record {

/// Counts over the module tables built.
struct TableStats {
  std::uint64_t modules = 0;
  std::uint64_t pages = 0;
  std::uint64_t rows = 0;
  /// Modules whose rules are (partly) SFrame generated from .eh_frame.
  std::uint64_t generated_modules = 0;
  /// Rules the page layout cannot hold, left to frame pointers: FLEX rules
  /// with a CFA not based on SP, FP or RBX, or a dereferenced one; RA not at
  /// CFA - 8; PC-mask (PLT) functions of more than one rule not in 16-byte
  /// blocks.
  std::uint64_t unsupported_rules = 0;
  /// Pages with more than SFRAME_RECORD_PAGE_ROWS rows, split into
  /// sub-pages (record_abi.h).
  std::uint64_t split_pages = 0;
  /// Sub-pages with more than SFRAME_RECORD_PAGE_ROWS rows, left to frame
  /// pointers.
  std::uint64_t overflow_pages = 0;
  /// Bytes of .sframe / .eh_frame of the modules loaded, and bytes of the
  /// tables (pages) made from them.
  std::uint64_t sframe_bytes = 0;
  std::uint64_t eh_frame_bytes = 0;
  std::uint64_t table_bytes = 0;
};

/// The pages of one module, kept compact in user space: every page's rows
/// back to back, and per page its key (`sframe_record_page_key::page`,
/// sub-pages included) and flags. A page takes the BPF map's fixed-size
/// value (sframe_record_page) only when filled for loading: a 1 KiB page
/// holds some 20 of its 119 rows on average, and the fixed-size form of a
/// big module (libLLVM) is over 50 MB.
class ModulePages {
 public:
  /// Adds a page (keys in any order; rows.size() <= SFRAME_RECORD_PAGE_ROWS).
  void add(std::uint32_t page, std::uint32_t flags, std::span<const sframe_record_row> rows);
  /// Sorts the pages by key, for find(); called once all are added.
  void finish();
  std::size_t size() const noexcept { return entries_.size(); }
  /// The key of the i-th page (i < size(), in key order after finish()).
  std::uint32_t key(std::size_t i) const noexcept { return entries_[i].page; }
  /// The i-th page as the BPF map's value.
  void fill(std::size_t i, sframe_record_page& out) const;
  /// The index of the page with key `page`, or size() when there is none.
  std::size_t find(std::uint32_t page) const;

 private:
  struct Entry {
    std::uint32_t page, flags, first, n;  // rows_[first, first + n)
  };
  std::vector<Entry> entries_;
  std::vector<sframe_record_row> rows_;
};

/// Builds the pages of `file` (x86-64), splitting pages of more rows than a
/// page holds into sub-pages. Rules the layout cannot hold, and sub-pages
/// with too many rows, are left out (frame pointers there), and counted in
/// `stats`.
ModulePages build_module_pages(const elf::ElfFile& file, TableStats& stats);

/// The tables of every module and process a Session follows. Module IDs
/// start at 1, one per distinct file.
class Tables {
 public:
  explicit Tables(const perf::Session& session);
  /// The process table of `pid` as the session sees it now: its mappings'
  /// modules built on first sight (their pages then in new_pages()).
  /// Mappings beyond SFRAME_RECORD_MAX_MAPPINGS are left out (counted).
  const sframe_record_process& process(std::uint32_t pid);
  /// Builds the module of the file at `path` now (before a process maps
  /// it: a command's files before it starts), for the mappings that later
  /// name it by the same path and build-id. False when it cannot be read.
  bool preload(const std::string& path);
  /// The page of module `key.module`, or null (host lookups: the
  /// differential test). The page stays valid while the Tables live.
  const sframe_record_page* page(const sframe_record_page_key& key) const;
  /// The modules built since the last call (IDs), for loading their pages
  /// into the BPF map.
  std::vector<std::uint32_t> take_new_modules();
  /// The pages of module `id` (1..number of modules built).
  const ModulePages& module(std::uint32_t id) const { return modules_[id - 1]; }
  const TableStats& stats() const noexcept { return stats_; }
  std::uint64_t dropped_mappings() const noexcept { return dropped_mappings_; }

 private:
  std::uint32_t module_of(const std::shared_ptr<const elf::ElfFile>& file, const std::string& path,
                          const std::string& build_id);
  const perf::Session& session_;
  // By path and build-id ("PATH\nID"): one module per file, whoever opened it.
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::shared_ptr<const elf::ElfFile>> files_;  // keeps them alive
  std::vector<ModulePages> modules_;                       // by id - 1
  std::vector<std::uint32_t> fresh_;                        // module ids not taken yet
  std::unordered_map<std::uint32_t, sframe_record_process> processes_;
  TableStats stats_;
  std::uint64_t dropped_mappings_ = 0;
  // page()'s answers, filled on first use (host lookups only).
  mutable std::map<std::pair<std::uint32_t, std::uint32_t>, sframe_record_page> looked_up_;
};

}  // namespace sframe::record
