// SPDX-License-Identifier: MIT
// What encode.cpp and encode_size.cpp share of SectionEncoder's size
// techniques (SizeOptions, sframe/format/encode.hpp). Internal: no API promise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sframe/format/encode.hpp"

namespace sframe::detail {

// Bytes of FREs `rows` (SectionEncoder rows) take with start addresses of
// `asz` bytes.
template <class Rows>
std::uint64_t fre_bytes_of(const Rows& rows, unsigned asz) {
  std::uint64_t n = 0;
  for (const auto& r : rows) n += asz + 1 + std::uint64_t{r.num_words} * r.word_size;
  return n;
}

// The most rows a PC-mask function is unrolled to for continues_period().
constexpr std::uint64_t kContinueRowLimit = 256;

// PC-mask periods and FRE block sharing, defined in encode_size.cpp.
std::vector<RowSpec> one_period(const std::vector<RowSpec>& rows, std::uint32_t size, std::uint8_t& period);
bool unroll_period(const std::vector<RowSpec>& period, std::uint32_t rep, std::uint32_t size, std::uint64_t limit,
                   std::vector<RowSpec>& out);
std::size_t block_hash(const std::byte* at, std::uint32_t len, std::uint8_t fre_type);

}  // namespace sframe::detail
