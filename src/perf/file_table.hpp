// SPDX-License-Identifier: MIT
// sframepp (private to the perf layer): the mapped files the Sessions of one
// recording open, each once (perf_unwind.hpp's SessionOptions::files).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace sframe::elf {
class ElfFile;
}

namespace sframe::perf {

/// The mapped files Sessions open, each once, by path: for the Sessions
/// that follow the same processes at once (`sframe record`'s recorder, its
/// in-process conversion, its table builder) to share, instead of each
/// opening every file and reading its build-id. Not thread-safe: the
/// Sessions sharing one run on one thread.
class FileTable {
 public:
  /// A file as opened, with its own build-id (lowercase hex of its
  /// NT_GNU_BUILD_ID note; empty: none).
  struct Entry {
    std::shared_ptr<const elf::ElfFile> file;
    std::string build_id;
  };
  FileTable();
  ~FileTable();
  FileTable(const FileTable&) = delete;
  FileTable& operator=(const FileTable&) = delete;
  /// The file at `path`, opened on first call (null file: it could not be
  /// opened). When `want_id` is not empty and the file opened before has
  /// another build-id, the path is opened again (it may have been replaced
  /// since) and the entry replaced when that one has `want_id`.
  const Entry& open(const std::string& path, std::string_view want_id = {});
  /// This process's vDSO image (process::own_vdso()), copied on first call
  /// (null file: none mapped); `build_id` from its ".note" section, where
  /// the kernel's vdso linker script puts the NT_GNU_BUILD_ID note.
  const Entry& vdso();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sframe::perf
