// SPDX-License-Identifier: MIT
#include "flip.hpp"

#include <algorithm>
#include <cstddef>

namespace sframe_test {
namespace {

constexpr std::uint64_t kHeaderSize = 28;

// Every field is read from the untouched input and its reversed bytes are
// written into the output at the same offset. Never swapping in place means a
// region reachable from two FDEs (shared FREs) is flipped once, not twice, and
// untouched bytes keep their original value.
class Flipper {
 public:
  Flipper(std::span<const std::uint8_t> in, bool big_endian)
      : in_(in), out_(in.begin(), in.end()), big_endian_(big_endian) {}

  // Flips the `size`-byte field at `pos` and advances `pos` past it; the
  // field must end at or before `end`. Returns its value, decoded in the
  // input's byte order, or nullopt if it does not fit.
  std::optional<std::uint64_t> field(std::uint64_t& pos, std::uint64_t size,
                                     std::uint64_t end) {
    // `end` is always <= the section size, so this check alone keeps every
    // access in bounds; written to avoid overflow on hostile offsets.
    if (end > in_.size() || pos > end || size > end - pos) return std::nullopt;
    const auto first = in_.begin() + static_cast<std::ptrdiff_t>(pos);
    const auto last = first + static_cast<std::ptrdiff_t>(size);
    std::reverse_copy(first, last,
                      out_.begin() + static_cast<std::ptrdiff_t>(pos));
    std::uint64_t value = 0;
    for (std::uint64_t i = 0; i < size; ++i) {
      const std::uint64_t byte = big_endian_ ? i : size - 1 - i;
      value = (value << 8) | in_[pos + byte];
    }
    pos += size;
    return value;
  }

  std::uint64_t section_size() const { return in_.size(); }
  std::vector<std::uint8_t> take() { return std::move(out_); }

 private:
  std::span<const std::uint8_t> in_;
  std::vector<std::uint8_t> out_;
  bool big_endian_;
};

// Flips the `num_fres` FREs starting at `pos`. `fde_info` holds the FRE type
// (bits 0-3), which fixes the width of each FRE's start address; each FRE's
// own info byte gives its data-word count and width. FREs must stay inside
// the FRE sub-section, which ends at `end`.
bool flip_fres(Flipper& f, std::uint64_t pos, std::uint64_t num_fres,
               std::uint8_t fde_info, std::uint64_t end) {
  static constexpr std::uint64_t kWidth[] = {1, 2, 4};  // by type/size code
  const unsigned fre_type = fde_info & 0xfu;
  if (fre_type > 2) return false;  // unknown type: FRE size is unknowable
  // A hostile count (up to 2^32) is harmless: every FRE takes at least two
  // bytes, so the loop fails at the end of the sub-section.
  for (std::uint64_t i = 0; i < num_fres; ++i) {
    if (!f.field(pos, kWidth[fre_type], end)) return false;
    const auto info = f.field(pos, 1, end);
    if (!info) return false;
    const unsigned count = (*info >> 1) & 0xfu;
    const unsigned size_code = (*info >> 5) & 0x3u;
    if (size_code > 2) return false;  // reserved data-word size
    for (unsigned w = 0; w < count; ++w)
      if (!f.field(pos, kWidth[size_code], end)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<std::uint8_t>>
flip_sframe_byte_order(std::span<const std::uint8_t> section) {
  // The magic is the only thing that reveals the byte order.
  if (section.size() < kHeaderSize) return std::nullopt;
  bool big_endian;
  if (section[0] == 0xde && section[1] == 0xe2)
    big_endian = true;
  else if (section[0] == 0xe2 && section[1] == 0xde)
    big_endian = false;
  else
    return std::nullopt;

  Flipper f(section, big_endian);
  const std::uint64_t size = f.section_size();
  std::uint64_t pos = 0;
  // Header fields, in order. The single-byte ones go through field() too,
  // which copies them unchanged and keeps `pos` in step with the layout.
  f.field(pos, 2, size);                        // magic
  const auto version = *f.field(pos, 1, size);  // version
  f.field(pos, 1, size);                        // flags
  f.field(pos, 1, size);                        // abi/arch
  f.field(pos, 1, size);                        // cfa fixed fp offset
  f.field(pos, 1, size);                        // cfa fixed ra offset
  const auto auxhdr_len = *f.field(pos, 1, size);
  const auto num_fdes = *f.field(pos, 4, size);
  f.field(pos, 4, size);                        // num_fres (section total)
  const auto fre_len = *f.field(pos, 4, size);
  const auto fdeoff = *f.field(pos, 4, size);
  const auto freoff = *f.field(pos, 4, size);
  if (version < 1 || version > 3) return std::nullopt;

  // Sub-section offsets count from the end of the auxiliary header, which
  // is opaque (ABI-specific) and therefore copied as is. All arithmetic is
  // 64-bit on 32-bit inputs, so none of it can overflow.
  const std::uint64_t hdr_end = kHeaderSize + auxhdr_len;
  if (hdr_end > size) return std::nullopt;
  const std::uint64_t fde_start = hdr_end + fdeoff;
  const std::uint64_t fre_start = hdr_end + freoff;
  const std::uint64_t fre_end = fre_start + fre_len;
  if (fre_end > size) return std::nullopt;

  const std::uint64_t fde_size = version == 1 ? 17 : version == 2 ? 20 : 16;
  if (fde_start > size || num_fdes > (size - fde_start) / fde_size)
    return std::nullopt;

  for (std::uint64_t i = 0; i < num_fdes; ++i) {
    pos = fde_start + i * fde_size;  // in bounds: checked above
    std::uint64_t num_fres = 0;
    std::uint8_t info = 0;
    f.field(pos, version == 3 ? 8 : 4, size);  // function start offset
    f.field(pos, 4, size);                     // function size
    const auto start_fre_off = *f.field(pos, 4, size);
    std::uint64_t fres = fre_start + start_fre_off;
    if (version < 3) {
      num_fres = *f.field(pos, 4, size);
      info = static_cast<std::uint8_t>(*f.field(pos, 1, size));
      if (version == 2) {
        f.field(pos, 1, size);  // repetition block size
        f.field(pos, 2, size);  // padding
      }
    } else {
      // v3 keeps the FRE count and info in an attribute that precedes the
      // function's FREs inside the FRE sub-section.
      const auto n = f.field(fres, 2, fre_end);
      const auto fi = f.field(fres, 1, fre_end);
      if (!n || !fi) return std::nullopt;
      if (!f.field(fres, 1, fre_end) || !f.field(fres, 1, fre_end))
        return std::nullopt;  // info2, repetition block size
      num_fres = *n;
      info = static_cast<std::uint8_t>(*fi);
    }
    if (!flip_fres(f, fres, num_fres, info, fre_end)) return std::nullopt;
  }
  return f.take();
}

}  // namespace sframe_test
