// SPDX-License-Identifier: MIT
// sframepp: perf's names of the events a recording describes only by type
// and config (perf_data.hpp, default_event_name).
#include <cstdio>
#include <iterator>
#include <string>

#include "perf_data.hpp"

namespace sframe::perf {

std::string default_event_name(std::uint32_t type, std::uint64_t config) {
  static const char* const kSoftware[] = {"cpu-clock",    "task-clock",   "page-faults", "context-switches",
                                          "cpu-migrations", "minor-faults", "major-faults", "alignment-faults",
                                          "emulation-faults", "dummy",     "bpf-output",  "cgroup-switches"};
  static const char* const kHardware[] = {"cycles",         "instructions",  "cache-references",
                                          "cache-misses",   "branches",      "branch-misses",
                                          "bus-cycles",     "stalled-cycles-frontend", "stalled-cycles-backend",
                                          "ref-cycles"};
  if (type == 1 && config < std::size(kSoftware)) return kSoftware[config];
  if (type == 0 && config < std::size(kHardware)) return kHardware[config];
  char buf[48];
  std::snprintf(buf, sizeof buf, "%u:0x%llx", type, static_cast<unsigned long long>(config));
  return buf;
}

}  // namespace sframe::perf
