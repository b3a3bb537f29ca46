// SPDX-License-Identifier: MIT
// Rule resolution shared by the unwind layer and the C API (libsframepp);
// not installed. Default visibility: libsframepp-unwind.so exports it for
// libsframepp.so (namespace detail: no API promise).
#pragma once

#include <cstdint>

#include "sframe/section.hpp"

#pragma GCC visibility push(default)
namespace sframe::detail {

/// Replaces a Rule::Kind::kPadding rule ("no rule in this FRE") by what it
/// means: the header's fixed CFA offset `fixed` when the ABI has one (spec
/// v3 §3.2), else "unchanged" (s390x SFRAME_FRE_RA_OFFSET_INVALID, errata 1).
/// Other rules are left as they are.
void resolve_padding(Rule& r, std::int8_t fixed) noexcept;

}  // namespace sframe::detail
#pragma GCC visibility pop
