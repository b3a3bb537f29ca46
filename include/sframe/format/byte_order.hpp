// SPDX-License-Identifier: MIT
// sframepp: the one byte-order helper. Loads and stores of 1-, 2-, 4- and
// 8-byte unsigned integers in an explicit byte order, unaligned, without
// type punning (memcpy into a host integer, then a byte swap when the order
// is not the host's). Used by the SFrame decoder and encoder, the ELF and CFI
// readers and writers, and the unwinder's memory readers.
#pragma once
// Library: libsframepp-format (sframepp::format; header-only). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace sframe {

/// Byte order of stored data: an SFrame section (spec §2.1: the magic read
/// in the section's own order tells it), an ELF file, or the unwound
/// target's memory.
enum class ByteOrder : std::uint8_t { kLittle, kBig };

/// The host's byte order (in-process unwinding).
inline constexpr ByteOrder kHostByteOrder =
    std::endian::native == std::endian::big ? ByteOrder::kBig : ByteOrder::kLittle;

namespace endian {

/// kBig when `big_endian`, else kLittle.
constexpr ByteOrder order(bool big_endian) noexcept { return big_endian ? ByteOrder::kBig : ByteOrder::kLittle; }

/// The unsigned N-byte integer (N = 1, 2, 4 or 8) stored in `order` at `p`
/// (no alignment needed; the caller guarantees the N bytes are readable).
template <unsigned N>
inline std::uint64_t load(const std::byte* p, ByteOrder order) noexcept {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8);
  if constexpr (N == 1) {
    return static_cast<std::uint8_t>(*p);
  } else if constexpr (N == 2) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return order == kHostByteOrder ? v : __builtin_bswap16(v);
  } else if constexpr (N == 4) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return order == kHostByteOrder ? v : __builtin_bswap32(v);
  } else {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return order == kHostByteOrder ? v : __builtin_bswap64(v);
  }
}

/// load<N> with the width `n` (1, 2, 4; any other value reads 8 bytes) known
/// only at run time.
inline std::uint64_t load(const std::byte* p, unsigned n, ByteOrder order) noexcept {
  switch (n) {
    case 1: return load<1>(p, order);
    case 2: return load<2>(p, order);
    case 4: return load<4>(p, order);
    default: return load<8>(p, order);
  }
}

/// The `n`-byte (1, 2, 4, 8) integer at byte offset `at` of `bytes`, or
/// nullopt when [at, at + n) does not lie inside `bytes` (overflow-safe) or
/// `n` is not one of those widths. For decoders reading untrusted offsets.
inline std::optional<std::uint64_t> load_checked(std::span<const std::byte> bytes, std::uint64_t at, unsigned n,
                                                 ByteOrder order) noexcept {
  if (n != 1 && n != 2 && n != 4 && n != 8) return std::nullopt;
  if (at > bytes.size() || n > bytes.size() - at) return std::nullopt;
  return load(bytes.data() + at, n, order);
}

/// Stores the low `n` (1, 2, 4, 8) bytes of `v` in `order` at `p` (no
/// alignment needed; the caller guarantees room).
inline void store(std::byte* p, std::uint64_t v, unsigned n, ByteOrder order) noexcept {
  switch (n) {
    case 1: *p = static_cast<std::byte>(v); return;
    case 2: {
      auto x = static_cast<std::uint16_t>(v);
      if (order != kHostByteOrder) x = __builtin_bswap16(x);
      std::memcpy(p, &x, 2);
      return;
    }
    case 4: {
      auto x = static_cast<std::uint32_t>(v);
      if (order != kHostByteOrder) x = __builtin_bswap32(x);
      std::memcpy(p, &x, 4);
      return;
    }
    default: {
      if (order != kHostByteOrder) v = __builtin_bswap64(v);
      std::memcpy(p, &v, 8);
      return;
    }
  }
}

}  // namespace endian
}  // namespace sframe

#pragma GCC visibility pop
