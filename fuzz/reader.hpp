// SPDX-License-Identifier: MIT
// Reads typed values off the fuzz input, front to back; past its end every
// value is 0 (so a short input still makes a whole, small model).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sframe::fuzz {

class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}

  bool empty() const { return n_ == 0; }
  std::uint64_t bits(unsigned bytes) {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes && n_ > 0; ++i, ++p_, --n_) v |= std::uint64_t{*p_} << (8 * i);
    return v;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(bits(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(bits(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(bits(4)); }
  std::uint64_t u64() { return bits(8); }
  bool flag() { return u8() & 1; }
  /// A value in [0, n) (n > 0).
  std::uint32_t below(std::uint32_t n) { return u8() % n; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

}  // namespace sframe::fuzz
