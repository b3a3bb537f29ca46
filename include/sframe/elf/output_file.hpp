// SPDX-License-Identifier: MIT
// sframepp: writing an output file so that a failure never damages what was
// there: the bytes go to a temporary file in the destination's directory,
// which is renamed over the destination only once complete and on disk.
#pragma once
// Library: libsframepp (sframepp::sframepp). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <sys/stat.h>

#include "sframe/format/error.hpp"

namespace sframe {

/// An output being written. Until commit() succeeds, the destination is
/// untouched; destroying an uncommitted OutputFile removes its temporary file.
/// "-" means standard output; an existing destination that is not a regular
/// file (e.g. /dev/null) is written directly (nothing to keep there). A
/// destination that is a symbolic link is resolved: its target is replaced.
class OutputFile {
 public:
  /// Opens a temporary file beside `path`. A replaced file keeps its mode,
  /// owner and extended attributes (security.capability included); a new
  /// file gets the permission bits of `mode_source` when given (the copy of
  /// an executable stays executable), else 0666 less the umask.
  /// Errors: kIoError (value: errno).
  static Expected<OutputFile> create(const std::string& path, const std::string& mode_source = {});

  OutputFile(OutputFile&&) noexcept;
  OutputFile& operator=(OutputFile&&) noexcept;
  ~OutputFile();

  /// The descriptor to write to (the temporary file's, or the destination's
  /// when written directly).
  int fd() const noexcept;

  /// Writes all of `bytes` at the current position. Errors: kIoError.
  Expected<void> write(std::span<const std::byte> bytes);

  /// How commit() orders the file's data against its rename.
  enum class Durability {
    /// fsync before the rename: after a crash the destination holds the old
    /// file or the whole new one.
    kSynced,
    /// No fsync (much cheaper on many files): after a crash the
    /// destination may be empty or cut short. For data checked when read
    /// back, as a cache.
    kUnsynced,
  };

  /// Flushes the data to disk (unless `durability` says not to), gives the
  /// file its mode, owner and attributes, and renames it over the
  /// destination. On failure the temporary file is removed and the
  /// destination is as it was. Errors: kIoError (value: errno).
  Expected<void> commit(Durability durability = Durability::kSynced);

 private:
  struct State;
  explicit OutputFile(std::unique_ptr<State> s) noexcept;
  std::unique_ptr<State> s_;
};

/// Writes `bytes` to `path` through an OutputFile ("-": standard output).
Expected<void> write_file(const std::string& path, std::span<const std::byte> bytes,
                          const std::string& mode_source = {});

/// True when `a` and `b` both exist and are the same file (same device and
/// inode: hard links and symbolic links to it count).
bool same_file(const std::string& a, const std::string& b);

}  // namespace sframe

#pragma GCC visibility pop
