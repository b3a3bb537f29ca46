// SPDX-License-Identifier: MIT
// Test helper shared by the encoder tests.
#pragma once

#include <vector>

#include "sframe/format/encode.hpp"

namespace sframe_test {

/// Rows without repeats: what the optimizing encoder keeps.
inline std::vector<sframe::RowSpec> distinct_rows(const std::vector<sframe::RowSpec>& rows) {
  std::vector<sframe::RowSpec> out;
  for (const auto& r : rows)
    if (out.empty() || !(out.back().row == r.row)) out.push_back(r);
  return out;
}

}  // namespace sframe_test
