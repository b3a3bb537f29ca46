// SPDX-License-Identifier: MIT
// libFuzzer target: one raw SFrame section.
// Input: 8 bytes of section address (little-endian), then the section bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "check_section.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t address = 0;
  std::memcpy(&address, data, 8);
  // A heap block of exactly the section's size, so AddressSanitizer catches
  // a read one byte before or after it.
  const std::size_t n = size - 8;
  const auto copy = std::make_unique<std::byte[]>(n);
  if (n != 0) std::memcpy(copy.get(), data + 8, n);
  sframe::fuzz::check_section(std::span<const std::byte>(copy.get(), n), address);
  return 0;
}
