// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s module tables kept on disk by build-id, so
// that a module's table is built (its SFrame generated from .eh_frame, its
// pages laid out) once, not at every recording, as perf keeps its copies of
// recorded files by build-id (~/.debug).
//
// One file per module: DIR/BUILD-ID.table, holding a header (its format,
// the table's base and block count, the module's TableStats, an XXH3-64
// digest of the blocks, and the GNU build-id of the program that built the table)
// and the blocks as record_abi.h lays them out. A file that is short, of
// another format, written by another build of sframepp (whose table layout
// or builder may differ), or whose blocks do not match their digest is not
// used (the table is built again and the file replaced). A module without
// a build-id (a Go program's own linker, --build-id=none, an executable run
// from a memfd) is named by a hash of its whole file instead,
// DIR/xxh128-HASH.table (content_key()): its table is built from that file
// alone. A program (sframe) linked without a build-id uses no cache.
// Files are written to a temporary name and renamed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sframe/elf/elf.hpp"
#include "tables.hpp"

namespace sframe::record {

/// A module table with the counts its build added (TableStats of one
/// module).
struct CachedTable {
  ModuleTable table;
  TableStats stats;
};

/// The table cache in one directory (created on first store).
class TableCache {
 public:
  explicit TableCache(std::string dir) : dir_(std::move(dir)) {}
  /// The table stored for `build_id` (lowercase hex, as elf::build_id()
  /// gives it, or a content_key()), or nullopt: none, an ID that is neither,
  /// or a file not usable (see above).
  std::optional<CachedTable> load(std::string_view build_id) const;
  /// Stores `t` for `build_id` (as load() takes it), replacing any file
  /// there. False when it could not be written, or this program has no
  /// build-id to name its build with (the cache is then only slower).
  bool store(std::string_view build_id, const CachedTable& t) const;
  /// The key of a module without a build-id: "xxh128-" and the 32 lowercase
  /// hex digits of XXH3's 128-bit hash of the whole file as `file` maps it
  /// (every byte its table is built from). Empty when `file` has no file
  /// image (one made in memory).
  static std::string content_key(const elf::ElfFile& file);
  const std::string& dir() const noexcept { return dir_; }

 private:
  std::string path_of(std::string_view build_id) const;
  std::string dir_;
};

}  // namespace sframe::record
