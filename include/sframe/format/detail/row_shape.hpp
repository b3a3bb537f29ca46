// SPDX-License-Identifier: MIT
// sframepp (private): the rule a row's start offset must satisfy (spec v2
// §2.3, v3 §2.3-2.4: FRE starts strictly increase and lie inside the
// function, or inside its repetition block for PC-mask FDEs), as a
// predicate inline enough for RowIndex::Builder's per-row loop.
// check_row_start() (encode.hpp) gives its error. Namespace detail: no API
// promise.
#pragma once

#include <cstdint>

#include "sframe/format/format.hpp"

namespace sframe::detail {

/// The bound a function's row starts must lie below: its size, or for
/// PcType::kMask its repetition block size.
inline std::uint64_t row_limit(PcType pc_type, std::uint32_t size, std::uint8_t rep_size) noexcept {
  return pc_type == PcType::kMask ? rep_size : size;
}

/// Row `k` starting at `start`, after a row at `prev` when k > 0, fits a
/// function whose rows lie below `limit`: starts strictly increase, and lie
/// below the limit, except one row at 0 of a zero-size function.
inline bool row_start_fits(std::uint64_t limit, std::uint64_t k, std::uint32_t start, std::uint32_t prev) noexcept {
  if (k > 0 && start <= prev) return false;
  return start < limit || (start == 0 && limit == 0);
}

}  // namespace sframe::detail
