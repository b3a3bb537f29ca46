// SPDX-License-Identifier: MIT
// sframepp: the names of kernel frames for a recording's replay (layer
// `perf`, under perf_unwind.cpp): the function at each kernel text address,
// from kallsyms, named as perf names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "file_bytes.hpp"
#include "kallsyms.hpp"

namespace sframe::perf::detail {

/// The kernel's function symbols of one recording. The text is read at the
/// first find(): perf's copy in its build-id cache when the recording names
/// the kernel's build-id and that copy exists (the symbols of the recorded
/// kernel, and a plain file: reading /proc/kallsyms makes the kernel format
/// every line), else `kallsyms`. With `sframe record`'s saved index beside
/// the copy (checked against the text), the text is not scanned.
class KernelSymbols {
 public:
  /// `kallsyms`: the file read when no cached copy applies (normally
  /// /proc/kallsyms). `buildid_dir`: perf's build-id cache (~/.debug).
  /// `build_ids`: the recorded kernel's, in hex (its BUILD_ID feature
  /// entries, in file order: the last whose copy exists is read).
  KernelSymbols(std::string kallsyms, std::string buildid_dir, std::vector<std::string> build_ids)
      : kallsyms_(std::move(kallsyms)), buildid_dir_(std::move(buildid_dir)), build_ids_(std::move(build_ids)) {}

  /// The recorded kernel's _text address (the pgoff of perf's synthesized
  /// "[kernel.kallsyms]_text" mapping). A text read from another boot of
  /// the same kernel is shifted by KASLR: its own _text minus this is taken
  /// from its addresses, as perf's kallsyms__delta() does. Used when the
  /// text is read (the first find()).
  void set_recorded_text(std::uint64_t text) { recorded_text_ = text; }

  /// A kernel function: its name as perf prints it and its start (both in
  /// the recording's addresses). `name` is null when none holds the address.
  struct Function {
    const std::string* name = nullptr;
    std::uint64_t start = 0;
  };
  /// The function at `addr` (a recorded kernel address), cached per
  /// address; the name lives as long as this object.
  Function find(std::uint64_t addr);

 private:
  void read();
  const std::optional<std::string>& name_of(const std::vector<KSym>& group, std::uint64_t next);

  std::string kallsyms_, buildid_dir_;
  std::vector<std::string> build_ids_;
  std::uint64_t recorded_text_ = 0;
  bool read_ = false;
  FileBytes file_;
  std::string_view text_;
  std::optional<KallsymsIndex> index_;
  std::uint64_t delta_ = 0;                  // the read text's _text minus the recorded one
  std::vector<KSym> group_;                  // reused by find()
  std::unordered_map<std::uint64_t, Function> by_address_;
  // Names by symbol start, made once per group of aliases.
  std::unordered_map<std::uint64_t, std::optional<std::string>> names_;
};

}  // namespace sframe::perf::detail
