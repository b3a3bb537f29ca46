// SPDX-License-Identifier: MIT
// sframepp: kallsyms text -> function symbols (see kallsyms.hpp).
#include "kallsyms.hpp"

#include "sframe/format/byte_order.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sframe::perf::detail {
namespace {

// The value of 8 lowercase hex digits at `s` (kallsyms addresses), eight
// bytes at a time; false when any is not one.
bool hex8(const char* s, std::uint64_t& out) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHigh = kOnes * 0x80;
  // Little-endian: the first digit in the low byte.
  std::uint64_t v = endian::load<8>(reinterpret_cast<const std::byte*>(s), ByteOrder::kLittle);
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

namespace {

// Calls fn(line, nl, tab) for each line [line, nl) of `text` (nl: its
// '\n' or the end; tab: its first '\t', else nl). Each '\n' or '\t' is
// found sixteen bytes at a time (two memchr calls per line of some 40
// bytes cost more).
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  const char* const base = text.data();
  const char* const end = base + text.size();
  const char* line = base;
  const char* tab = nullptr;  // the line's first tab
  const auto found = [&](const char* at) {
    if (*at == '\t') {
      if (!tab) tab = at;
      return;
    }
    fn(line, at, tab ? tab : at);
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
  if (line < end) fn(line, end, tab ? tab : end);  // no final newline
}

// The 16 address characters of a line in the 64-bit layout, as a pair
// whose order is their string order.
using Key = std::pair<std::uint64_t, std::uint64_t>;
Key prefix_key(const char* p) {
  // Big-endian: the first character in the high byte.
  const auto* b = reinterpret_cast<const std::byte*>(p);
  return {endian::load<8>(b, ByteOrder::kBig), endian::load<8>(b + 8, ByteOrder::kBig)};
}

// A line with the 64-bit layout's address, space, type, space.
bool layout64(const char* p, const char* nl) { return nl - p >= 19 && p[16] == ' ' && p[18] == ' '; }

// A nonempty line [line, nl) the sorted run may hold: parse_line() takes
// the 64-bit layout only when the name (up to a tab or the line's end)
// starts past byte 19, so other lines end the run (else the index and the
// full parse disagree). Inlined into the index's scan (GCC calls it
// otherwise: twice the cost).
inline __attribute__((always_inline)) bool indexable(const char* line, const char* nl) {
  if (nl - line < 20 || !layout64(line, nl) || line[17] == '\t' || line[19] == '\t') return false;
#if defined(__SSE2__)
  return _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(line)), _mm_set1_epi8('\t'))) == 0;
#else
  return std::memchr(line, '\t', 16) == nullptr;
#endif
}

}  // namespace

std::uint64_t kallsyms_address(std::string_view text, std::string_view name) {
  if (name.empty()) return 0;
  // " TYPE NAME\n": the name between the type's space and the line's end.
  for (std::size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    const std::size_t end = at + name.size();
    if (at < 3 || text[at - 1] != ' ' || text[at - 3] != ' ' || (end < text.size() && text[end] != '\n')) continue;
    const std::size_t line = text.rfind('\n', at - 1);
    const std::size_t from = line == std::string_view::npos ? 0 : line + 1;
    // The line as parse_kallsyms() reads it: its name ends at its first tab.
    const std::size_t tab = text.substr(from, end - from).find('\t');
    const char* const name_end = text.data() + (tab == std::string_view::npos ? end : from + tab);
    std::vector<KSym> one;
    parse_line(text.data(), text.data() + from, text.data() + end, name_end, one);
    if (!one.empty() && text.substr(one.front().name_at, one.front().name_len) == name) return one.front().address;
  }
  return 0;
}

void parse_kallsyms(std::string_view text, std::vector<KSym>& out) {
  const std::size_t first = out.size();
  const char* const base = text.data();
  for_each_line(text, [&](const char* line, const char* nl, const char* name_end) {
    parse_line(base, line, nl, name_end, out);
  });
  const auto by_address = [](const KSym& a, const KSym& b) { return a.address < b.address; };
  if (!std::is_sorted(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_address))
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_address);
}

KallsymsIndex::KallsymsIndex(std::string_view text) : text_(text) {
  // One pass: every 16th line start, up to the first line out of the
  // 64-bit layout or out of address order (before it, string order is
  // address order).
  // A lookup parses the lines from the kept start at or below its address:
  // 8 on average (every 64th kept, 32 of them were most of a Python
  // profile's ~500 kernel lookups; the index is 2 bytes per line).
  const char* const base = text.data();
  const char* const end = base + text.size();
  bool ok = true;
  Key prev{0, 0};
  std::size_t n = 0;
  const char* line = base;
  // Stops (ok false) with `line` at the first line out of layout or order.
  const auto at_line_end = [&](const char* nl) __attribute__((always_inline)) {
    if (!ok) return;
    if (nl != line) {  // empty lines name nothing
      // parse_line() takes the 64-bit layout only when the name (up to a
      // tab or the line's end) starts past byte 19: other lines are out of
      // layout here too (else the index and the full parse disagree).
      if (!indexable(line, nl)) {
        ok = false;
        return;
      }
      const Key k = prefix_key(line);
      if (k.first < prev.first || (k.first == prev.first && k.second < prev.second)) {
        ok = false;
        return;
      }
      prev = k;
      if (n++ % 16 == 0) sparse_.push_back(static_cast<std::uint32_t>(line - base));
    }
    line = nl < end ? nl + 1 : end;
  };
  // Newlines only (names end at a tab only in lookups), 64 bytes at a time
  // (a kallsyms line is some 44: a mask per 16 bytes costs a loop turn per
  // newline or less), the rest one by one; stops at the first line out of
  // layout or order.
  const char* p = base;
#if defined(__SSE2__)
  const __m128i nl16 = _mm_set1_epi8('\n');
  const auto newlines16 = [&](const char* at) -> std::uint64_t {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    return static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl16)));
  };
  for (; ok && end - p >= 64; p += 64) {
    std::uint64_t mask = newlines16(p) | newlines16(p + 16) << 16 | newlines16(p + 32) << 32 | newlines16(p + 48) << 48;
    for (; mask != 0; mask &= mask - 1) at_line_end(p + std::countr_zero(mask));
  }
#endif
  for (; ok && p < end; ++p)
    if (*p == '\n') at_line_end(p);
  if (ok && line < end) at_line_end(end);  // no final newline
  sorted_end_ = ok ? text.size() : static_cast<std::size_t>(line - base);
  if (text.size() > UINT32_MAX) {
    sparse_.clear();
    sorted_end_ = 0;
  }
  // The rest (from its first line) parsed whole, names at their offsets in
  // the whole text.
  parse_kallsyms(text.substr(sorted_end_), rest_);
  for (KSym& k : rest_) k.name_at += static_cast<std::uint32_t>(sorted_end_);
}

bool KallsymsIndex::lookup(std::uint64_t addr, std::vector<KSym>& group, std::uint64_t& next) const {
  group.clear();
  next = 0;
  const bool hit = sorted_end_ != 0 && lookup_sorted(addr, group, next);
  // The rest's, beside: the greater address wins, both groups at the same
  // one (the sorted run's lines come first in the file).
  const auto up =
      std::upper_bound(rest_.begin(), rest_.end(), addr, [](std::uint64_t v, const KSym& k) { return v < k.address; });
  if (up != rest_.end() && (next == 0 || up->address < next)) next = up->address;
  if (up == rest_.begin()) return hit;
  const std::uint64_t at = (up - 1)->address;
  if (hit && group.front().address > at) return true;
  if (hit && group.front().address < at) group.clear();
  auto lo = up - 1;
  while (lo != rest_.begin() && (lo - 1)->address == at) --lo;
  group.insert(group.end(), lo, up);
  return true;
}

// lookup() in the sorted run; `next` is set whether or not it holds a
// symbol at or below addr.
bool KallsymsIndex::lookup_sorted(std::uint64_t addr, std::vector<KSym>& group, std::uint64_t& next) const {
  const char* const base = text_.data();
  const char* const end = base + sorted_end_;
  // The key of the line "%016lx" of addr would start.
  char target_text[16];
  std::uint64_t v = addr;
  for (int i = 15; i >= 0; --i, v >>= 4) target_text[i] = "0123456789abcdef"[v & 15];
  const Key target = prefix_key(target_text);
  // The line [p, nl) and its name end; nl is end for the last line.
  const auto line_end = [&](const char* p) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    return nl ? nl : end;
  };
  std::vector<KSym> one;
  const auto symbol = [&](const char* p, const char* nl) -> const KSym* {
    one.clear();
    const char* tab = static_cast<const char*>(std::memchr(p, '\t', static_cast<std::size_t>(nl - p)));
    parse_line(base, p, nl, tab ? tab : nl, one);
    return one.empty() ? nullptr : &one.front();
  };
  const auto prev_line = [&](const char* p) -> const char* {  // start of the line before p's (p > base)
    const char* q = p - 1;  // its '\n'
    while (q > base && q[-1] != '\n') --q;
    return q;
  };
  // The address of the first symbol line from p on (0: none).
  const auto first_symbol_from = [&](const char* p) -> std::uint64_t {
    while (p < end) {
      const char* nl = line_end(p);
      if (nl != p)
        if (const KSym* k = symbol(p, nl)) return k->address;
      p = nl + 1;
    }
    return 0;
  };
  // The last sparse entry whose line is at or below the target.
  auto it = std::upper_bound(sparse_.begin(), sparse_.end(), target,
                             [&](const Key& t, std::uint32_t at) { return t < prefix_key(base + at); });
  if (it == sparse_.begin()) {  // every line lies above
    next = first_symbol_from(base);
    return false;
  }
  // Every line of the run the constructor found is indexable(); a saved
  // index read back names its run's end without the scan that checked
  // each line, so in the walks below a line out of layout ends the run
  // (prefix_key() reads 16 bytes of it).
  // L: the last symbol line at or below the target, forward from there...
  const char* last = nullptr;
  const char* above = end;  // the first line above the target
  for (const char* p = base + *(it - 1); p < end;) {
    const char* nl = line_end(p);
    if (nl != p) {
      if (!indexable(p, nl) || prefix_key(p) > target) {
        above = p;
        break;
      }
      if (symbol(p, nl)) last = p;
    }
    p = nl + 1;
  }
  // ... else backward from it.
  for (const char* p = base + *(it - 1); !last && p > base;) {
    p = prev_line(p);
    const char* nl = line_end(p);
    if (nl == p) continue;
    if (!indexable(p, nl)) break;
    if (symbol(p, nl)) last = p;
  }
  if (!last) {
    next = first_symbol_from(above);
    return false;
  }
  // The group: symbol lines of the same address around L (contiguous:
  // sorted), in file order.
  const Key key = prefix_key(last);
  const char* first = last;
  for (const char* p = last; p > base;) {
    p = prev_line(p);
    const char* nl = line_end(p);
    if (nl == p) continue;
    if (!indexable(p, nl) || prefix_key(p) != key) break;
    first = p;
  }
  for (const char* p = first; p <= last;) {
    const char* nl = line_end(p);
    if (nl != p)
      if (const KSym* k = symbol(p, nl)) group.push_back(*k);
    p = nl + 1;
  }
  // The next symbol above them.
  next = first_symbol_from(line_end(last) + 1);
  return !group.empty();
}

}  // namespace sframe::perf::detail

namespace sframe::perf::detail {
namespace {

// save()'s layout: this header, the sparse line starts (u32 each, padded
// to 8 bytes), then the rest's symbols (kRestBytes each: address u64,
// name_at u32, name_len u16, type, a zero byte).
struct IndexHeader {
  char magic[8];
  std::uint64_t text_size;
  std::uint64_t sorted_end;
  std::uint64_t sparse;
  std::uint64_t rest;
};
constexpr char kIndexMagic[8] = {'S', 'F', 'K', 'I', 'D', 'X', '1', '\0'};
constexpr std::size_t kRestBytes = 16;
constexpr std::size_t sparse_bytes(std::uint64_t n) { return (4 * n + 7) / 8 * 8; }

}  // namespace

std::vector<std::byte> KallsymsIndex::save() const {
  IndexHeader h{};
  std::memcpy(h.magic, kIndexMagic, sizeof h.magic);
  h.text_size = text_.size();
  h.sorted_end = sorted_end_;
  h.sparse = sparse_.size();
  h.rest = rest_.size();
  std::vector<std::byte> out(sizeof h + sparse_bytes(h.sparse) + kRestBytes * h.rest);
  std::memcpy(out.data(), &h, sizeof h);
  if (!sparse_.empty()) std::memcpy(out.data() + sizeof h, sparse_.data(), 4 * sparse_.size());
  std::byte* r = out.data() + sizeof h + sparse_bytes(h.sparse);
  for (const KSym& k : rest_) {
    std::memcpy(r, &k.address, 8);
    std::memcpy(r + 8, &k.name_at, 4);
    std::memcpy(r + 12, &k.name_len, 2);
    r[14] = static_cast<std::byte>(k.type);
    r += kRestBytes;
  }
  return out;
}

std::optional<KallsymsIndex> KallsymsIndex::load(std::string_view text, std::span<const std::byte> bytes) {
  IndexHeader h;
  if (bytes.size() < sizeof h) return std::nullopt;
  std::memcpy(&h, bytes.data(), sizeof h);
  // Every count bounded by the text before any size is computed from it.
  if (std::memcmp(h.magic, kIndexMagic, sizeof h.magic) != 0 || h.text_size != text.size() ||
      text.size() > UINT32_MAX || h.sorted_end > text.size() || h.sparse > text.size() / 20 + 1 ||
      h.rest > text.size() || bytes.size() != sizeof h + sparse_bytes(h.sparse) + kRestBytes * h.rest)
    return std::nullopt;
  const char* const base = text.data();
  // The run ends at the text's end or after a newline.
  if (h.sorted_end != 0 && h.sorted_end != text.size() && base[h.sorted_end - 1] != '\n') return std::nullopt;
  KallsymsIndex k;
  k.text_ = text;
  k.sorted_end_ = h.sorted_end;
  k.sparse_.resize(h.sparse);
  if (h.sparse != 0) std::memcpy(k.sparse_.data(), bytes.data() + sizeof h, 4 * h.sparse);
  // Each kept start: in the run, after the one before, at a line start, on
  // a line the run may hold, in address order.
  const char* const run_end = base + h.sorted_end;
  Key prev{0, 0};
  for (std::size_t i = 0; i < k.sparse_.size(); ++i) {
    const std::uint32_t at = k.sparse_[i];
    if (at >= h.sorted_end || (i > 0 && at <= k.sparse_[i - 1]) || (at != 0 && base[at - 1] != '\n'))
      return std::nullopt;
    const char* line = base + at;
    const char* nl = static_cast<const char*>(std::memchr(line, '\n', static_cast<std::size_t>(run_end - line)));
    if (!indexable(line, nl ? nl : run_end)) return std::nullopt;
    const Key key = prefix_key(line);
    if (key < prev) return std::nullopt;
    prev = key;
  }
  // The rest's symbols: names after the run and inside the text, function
  // types, by address.
  k.rest_.resize(h.rest);
  const std::byte* r = bytes.data() + sizeof h + sparse_bytes(h.sparse);
  for (std::size_t i = 0; i < k.rest_.size(); ++i, r += kRestBytes) {
    KSym& s = k.rest_[i];
    std::memcpy(&s.address, r, 8);
    std::memcpy(&s.name_at, r + 8, 4);
    std::memcpy(&s.name_len, r + 12, 2);
    s.type = static_cast<char>(r[14]);
    if (s.name_at < h.sorted_end || std::uint64_t{s.name_at} + s.name_len > text.size() ||
        (s.type != 't' && s.type != 'T' && s.type != 'w' && s.type != 'W') ||
        (i > 0 && s.address < k.rest_[i - 1].address))
      return std::nullopt;
  }
  return k;
}

}  // namespace sframe::perf::detail
