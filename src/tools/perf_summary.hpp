// SPDX-License-Identifier: MIT
// The parts of the summary lines `sframe perf script` and `sframe perf
// inject` print on stderr, written once.
#pragma once

#include <fmt/format.h>

#include <string>

#include "perf_unwind.hpp"

namespace sframe::tools {

/// Frames by where they came from, "kernel 41, registers 3732, sframe ...",
/// from origin `first` on (FrameOrigin order).
inline std::string frame_origins_text(const perf::SessionStats& st, std::size_t first = 0) {
  std::string s;
  for (std::size_t i = first; i < perf::kFrameOrigins; ++i)
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", perf::to_string(static_cast<perf::FrameOrigin>(i)),
                     st.by_origin[i]);
  return s;
}

/// Why user walks ended, "outermost frame 3730, no unwind information 2",
/// or "none".
inline std::string walk_stops_text(const perf::SessionStats& st) {
  std::string s;
  for (const auto& [why, n] : st.stops) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", why, n);
  return s.empty() ? "none" : s;
}

}  // namespace sframe::tools
