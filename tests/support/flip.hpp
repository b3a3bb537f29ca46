// SPDX-License-Identifier: MIT
// Test helper: re-encode an SFrame section in the opposite byte order.
//
// Written from the SFrame specification (versions 1, 2 and 3) only, so that
// it can serve as an independent oracle for the library's own endianness
// handling: tests flip a known-good section and check that the library
// decodes both encodings to the same result.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace sframe_test {

// Returns `section` with every multi-byte field byte-swapped. The input byte
// order is taken from the magic (0xdee2 read in either order). Versions 1, 2
// and 3 are supported. Bytes not covered by any structure (auxiliary header,
// padding, gaps) are copied unchanged.
//
// Returns std::nullopt if the input is malformed: bad magic, unknown version,
// unknown FRE type or data-word size, or any structure reaching beyond the
// section (FREs beyond the FRE sub-section). Never reads out of bounds.
std::optional<std::vector<std::uint8_t>>
flip_sframe_byte_order(std::span<const std::uint8_t> section);

}  // namespace sframe_test
