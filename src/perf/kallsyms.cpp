// SPDX-License-Identifier: MIT
// sframepp: kallsyms text -> function symbols (see kallsyms.hpp).
#include "kallsyms.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sframe::perf::detail {
namespace {

// The value of 8 lowercase hex digits at `s` (kallsyms addresses), eight
// bytes at a time; false when any is not one.
bool hex8(const char* s, std::uint64_t& out) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHigh = kOnes * 0x80;
  std::uint64_t v;
  std::memcpy(&v, s, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  if (v & kHigh) return false;  // below, per-byte sums stay within the byte
  const std::uint64_t digit = (v + kOnes * 0x50) & ~(v + kOnes * 0x46);  // '0'..'9'
  const std::uint64_t letter = (v + kOnes * 0x1f) & ~(v + kOnes * 0x19);  // 'a'..'f'
  if (((digit | letter) & kHigh) != kHigh) return false;
  v = (v & kOnes * 0x0f) + ((v >> 6) & kOnes) * 9;  // each byte its nibble
  // The first character is the most significant digit and the lowest byte.
  v = ((v << 4) | (v >> 8)) & 0x00ff00ff00ff00ffULL;
  v = ((v << 8) | (v >> 16)) & 0x0000ffff0000ffffULL;
  out = ((v << 16) | (v >> 32)) & 0xffffffffULL;
  return true;
}

bool is_text(char t) { return t == 't' || t == 'T' || t == 'w' || t == 'W'; }

// One line [p, nl), its name ending at `name_end` (its first tab, else nl).
void parse_line(const char* base, const char* p, const char* nl, const char* name_end, std::vector<KSym>& out) {
  static constexpr auto kHex = [] {
    std::array<std::int8_t, 256> t{};
    t.fill(-1);
    for (int c = 0; c < 10; ++c) t['0' + c] = static_cast<std::int8_t>(c);
    for (int c = 0; c < 6; ++c) t['a' + c] = static_cast<std::int8_t>(10 + c);
    return t;
  }();
  const auto hex = [](char c) { return int{kHex[static_cast<unsigned char>(c)]}; };
  // "ADDRESS TYPE NAME[\tMODULE]"; the type is looked at first so that the
  // address of a data symbol is never parsed.
  std::uint64_t addr = 0;
  const char* q = p;
  if (name_end - p > 19 && p[16] == ' ' && p[18] == ' ') {  // the 64-bit layout
    if (!is_text(p[17])) return;
    q = p + 16;
    // The 64-bit kernel's addresses start with these 8 digits: compared as
    // one word, only the low 8 are parsed.
    std::uint64_t hi = 0, lo = 0, w, kernel_hi;
    std::memcpy(&w, p, 8);
    std::memcpy(&kernel_hi, "ffffffff", 8);
    if (w == kernel_hi) {
      hi = 0xffffffffu;
      if (!hex8(p + 8, lo)) return;
    } else if (!hex8(p, hi) || !hex8(p + 8, lo)) {
      return;
    }
    addr = hi << 32 | lo;
  } else {
    while (q < nl && hex(*q) >= 0) ++q;
    if (q == p || q - p > 16) return;
    for (const char* d = p; d < q; ++d) addr = addr << 4 | static_cast<unsigned>(hex(*d));
    if (name_end - q <= 3 || q[0] != ' ' || q[2] != ' ' || !is_text(q[1])) return;
  }
  if (addr == 0) return;  // kptr_restrict
  const char* name = q + 3;
  out.push_back({addr, static_cast<std::uint32_t>(name - base),
                 static_cast<std::uint16_t>(std::min<std::ptrdiff_t>(name_end - name, 0xffff)), q[1]});
}

}  // namespace

void parse_kallsyms(std::string_view text, std::vector<KSym>& out) {
  const std::size_t first = out.size();
  const char* const base = text.data();
  const char* const end = base + text.size();
  const char* line = base;
  const char* tab = nullptr;  // the line's first tab
  // Each '\n' or '\t' found ends a line or a name: sixteen bytes compared
  // at a time (two memchr calls per line of some 40 bytes cost more).
  const auto found = [&](const char* at) {
    if (*at == '\t') {
      if (!tab) tab = at;
      return;
    }
    parse_line(base, line, at, tab ? tab : at, out);
    line = at + 1;
    tab = nullptr;
  };
  const char* p = base;
#if defined(__SSE2__)
  const __m128i nl16 = _mm_set1_epi8('\n'), tab16 = _mm_set1_epi8('\t');
  for (; end - p >= 16; p += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    auto mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, nl16), _mm_cmpeq_epi8(v, tab16))));
    for (; mask != 0; mask &= mask - 1) found(p + std::countr_zero(mask));
  }
#endif
  for (; p < end; ++p)
    if (*p == '\n' || *p == '\t') found(p);
  if (line < end) parse_line(base, line, end, tab ? tab : end, out);  // no final newline
  const auto by_address = [](const KSym& a, const KSym& b) { return a.address < b.address; };
  if (!std::is_sorted(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_address))
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_address);
}

}  // namespace sframe::perf::detail
