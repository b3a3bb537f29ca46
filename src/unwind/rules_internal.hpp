// SPDX-License-Identifier: MIT
// Rule resolution shared inside libsframepp (unwinder and C API); not installed.
#pragma once

#include <cstdint>

#include "sframe/section.hpp"

namespace sframe::detail {

/// Replaces a Rule::Kind::kPadding rule ("no rule in this FRE") by what it
/// means: the header's fixed CFA offset `fixed` when the ABI has one (spec
/// v3 §3.2), else "unchanged" (s390x SFRAME_FRE_RA_OFFSET_INVALID, errata 1).
/// Other rules are left as they are.
void resolve_padding(Rule& r, std::int8_t fixed) noexcept;

}  // namespace sframe::detail
