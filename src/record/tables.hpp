// SPDX-License-Identifier: MIT
// sframepp: the in-kernel unwind tables of `sframe record` (layout:
// bpf/record_abi.h), built in user space from what the library already
// has: a module's rules come from the shared module builder
// (cfi::ModuleUnwind: its own .sframe, plus generated SFrame for the FDEs
// the own section lacks) or, for a module without a usable own section,
// from the CFI translator's rows as they come (cfi::for_each_translated():
// the rows generation would encode, not encoded and decoded again),
// processes' mappings from the perf::Session that follows MMAP2, COMM,
// FORK and EXIT records (the same process model `sframe perf script` uses).
//
// The layout: per module file, an array of 4 KiB blocks: a directory of
// its 1 KiB pages, then every page's rows back to back (the rows that start
// in the page after one at offset 0 with the rule in effect there; lookup:
// the directory's block, the rows' block, a binary search in the page's
// rows); per process, its executable mappings sorted (a binary search).
#pragma once

#include <cstdint>
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
  /// Pages (1 KiB of code) with rules, and their rows.
  std::uint64_t pages = 0;
  std::uint64_t rows = 0;
  /// The most rows of one page (a function whose rules change at nearly
  /// every instruction: pushes of call arguments).
  std::uint64_t max_page_rows = 0;
  /// Modules whose rules are (partly) SFrame generated from .eh_frame.
  std::uint64_t generated_modules = 0;
  /// Rules the table layout cannot hold, left to frame pointers: FLEX rules
  /// with a CFA not based on SP, FP or RBX, or a dereferenced one; RA not at
  /// CFA - 8; PC-mask (PLT) functions of more than one rule not in 16-byte
  /// blocks.
  std::uint64_t unsupported_rules = 0;
  /// Pages with more rows than a block holds (SFRAME_RECORD_BLOCK_ROWS),
  /// left to frame pointers.
  std::uint64_t overflow_pages = 0;
  /// Bytes of .sframe / .eh_frame of the modules loaded, and bytes of the
  /// tables (blocks) made from them.
  std::uint64_t sframe_bytes = 0;
  std::uint64_t eh_frame_bytes = 0;
  std::uint64_t table_bytes = 0;
  /// Modules whose table came from the table cache (table_cache.hpp).
  std::uint64_t cached_modules = 0;

  /// Adds the counts of `o` (another module's); max_page_rows takes the
  /// larger.
  void add(const TableStats& o);
};

/// The table of one module (record_abi.h): its blocks, the directory's
/// first, as its BPF array map holds them, and the link-time address its
/// page offsets count from.
class ModuleTable {
 public:
  ModuleTable() = default;
  ModuleTable(std::uint64_t base, std::vector<sframe_record_block> blocks)
      : base_(base), blocks_(std::move(blocks)) {}
  /// The link-time address of page 0 (a mapping's bias adds it).
  std::uint64_t base() const noexcept { return base_; }
  std::span<const sframe_record_block> blocks() const noexcept { return blocks_; }
  /// Block `i`, or null past the end (the BPF array map's lookup).
  const sframe_record_block* block(std::uint32_t i) const noexcept {
    return i < blocks_.size() ? &blocks_[i] : nullptr;
  }

 private:
  std::uint64_t base_ = 0;
  std::vector<sframe_record_block> blocks_;
};

/// Builds the table of `file` (x86-64): from its own .sframe and the
/// SFrame generated for the functions it lacks, else from the rows the CFI
/// translator gives for its .eh_frame (and .debug_frame); the x86-64
/// rt_sigreturn code and the CIEs' signal ranges as signal frames. Rules
/// the layout cannot hold, and
/// pages of more rows than a block holds, are left out (frame pointers
/// there), and counted in `stats`.
ModuleTable build_module_table(const elf::ElfFile& file, TableStats& stats);

/// The tables of every module and process a Session follows. Module IDs
/// start at 1, one per distinct file.
class Tables {
 public:
  /// `cache_dir`: where module tables are kept by build-id, or by a hash
  /// of the file for a module without one (table_cache.hpp); empty: build
  /// every module's.
  explicit Tables(const perf::Session& session, std::string cache_dir = {});
  /// The process table of `pid` as the session sees it now: its mappings'
  /// modules built on first sight (then in take_new_modules()).
  /// Mappings beyond SFRAME_RECORD_MAX_MAPPINGS are left out (counted).
  const sframe_record_process& process(std::uint32_t pid);
  /// Builds the module of the file at `path` now (before a process maps
  /// it: a command's files before it starts), for the mappings that later
  /// name it by the same path and build-id. False when it cannot be read.
  bool preload(const std::string& path);
  /// Builds the module of the vDSO now (this process's: the kernel maps the
  /// same one into every process), for the mappings the session names
  /// "[vdso]". False when there is none.
  bool preload_vdso();
  /// Block `index` of module `module`'s table, or null (host lookups: the
  /// differential test). Valid while the Tables live.
  const sframe_record_block* block(std::uint32_t module, std::uint32_t index) const {
    return module == 0 || module > modules_.size() ? nullptr : modules_[module - 1].block(index);
  }
  /// The modules built since the last call (IDs), for loading their tables
  /// into the BPF maps.
  std::vector<std::uint32_t> take_new_modules();
  /// The table of module `id` (1..number of modules built).
  const ModuleTable& module(std::uint32_t id) const { return modules_[id - 1]; }
  const TableStats& stats() const noexcept { return stats_; }
  std::uint64_t dropped_mappings() const noexcept { return dropped_mappings_; }

 private:
  // The module of `file`, keyed by path and build-id; its table from the
  // cache under `cache_id` (empty: build_id).
  std::uint32_t module_of(const std::shared_ptr<const elf::ElfFile>& file, const std::string& path,
                          const std::string& build_id, const std::string& cache_id = {});
  const perf::Session& session_;
  std::string cache_dir_;
  // By path and build-id ("PATH\nID"): one module per file, whoever opened it.
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::shared_ptr<const elf::ElfFile>> files_;  // keeps them alive
  std::vector<ModuleTable> modules_;                       // by id - 1
  std::vector<std::uint32_t> fresh_;                        // module ids not taken yet
  std::unordered_map<std::uint32_t, sframe_record_process> processes_;
  // The last sframe_record_process::generation given (from 1: a walk's
  // memory starts out zero).
  std::uint32_t generation_ = 0;
  TableStats stats_;
  std::uint64_t dropped_mappings_ = 0;
};

}  // namespace sframe::record
