// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s tables (tables.hpp) loaded into the BPF
// program's maps (layout: bpf/record_abi.h): process tables into the
// `processes` hash map by pid, each module's blocks into an array map of
// its own, set into the `modules` array of maps at the module's ID.
#pragma once

#include <cstdint>
#include <span>

namespace sframe::record {

class Tables;

/// The BPF maps that hold a Tables, and what they refused. The file
/// descriptors stay the caller's (the skeleton's maps).
class TableMaps {
 public:
  /// `processes`: the BPF hash map of sframe_record_process by pid;
  /// `modules`: the BPF array of maps by module ID.
  TableMaps(int processes, int modules) : processes_(processes), modules_(modules) {}

  /// Loads the modules `tables` built since the last push (all into the
  /// array of maps in one batch), then the process tables of `touched`
  /// (modules first: a process table never names a module whose table is
  /// not in the kernel yet), then deletes the tables of `gone`.
  void push(Tables& tables, std::span<const std::uint32_t> touched, std::span<const std::uint32_t> gone);

  /// Process tables the kernel refused (the map full, memory).
  std::uint64_t processes_refused() const noexcept { return processes_refused_; }
  /// Module tables the kernel refused (memory, an ID past
  /// SFRAME_RECORD_MAX_MODULES): their walks fall back to frame pointers.
  std::uint64_t modules_refused() const noexcept { return modules_refused_; }

 private:
  void load_modules(const Tables& tables, std::span<const std::uint32_t> ids);
  const int processes_;
  const int modules_;
  std::uint64_t processes_refused_ = 0;
  std::uint64_t modules_refused_ = 0;
};

}  // namespace sframe::record
