// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s module tables kept on disk by build-id, so
// that a module's table is built (its SFrame generated from .eh_frame, its
// pages laid out) once, not at every recording, as perf keeps its copies of
// recorded files by build-id (~/.debug).
//
// One file per module: DIR/BUILD-ID.table, holding a header (its format,
// the table's base and block count, the module's TableStats, a CRC-32 of
// the blocks, and the GNU build-id of the program that built the table)
// and the blocks as record_abi.h lays them out. A file that is short, of
// another format, written by another build of sframepp (whose table layout
// or builder may differ), or whose blocks do not match their CRC is not
// used (the table is built again and the file replaced). A program linked
// without a build-id uses no cache.
// Files are written to a temporary name and renamed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

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
  /// gives it), or nullopt: none, an ID that is not such hex, or a file not
  /// usable (see above).
  std::optional<CachedTable> load(std::string_view build_id) const;
  /// Stores `t` for `build_id`, replacing any file there. False when it
  /// could not be written, or this program has no build-id to name its
  /// build with (the cache is then only slower).
  bool store(std::string_view build_id, const CachedTable& t) const;
  const std::string& dir() const noexcept { return dir_; }

 private:
  std::string path_of(std::string_view build_id) const;
  std::string dir_;
};

}  // namespace sframe::record
