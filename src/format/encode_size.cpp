// SPDX-License-Identifier: MIT
// SectionEncoder's size techniques (SizeOptions, sframe/format/encode.hpp): FDEs
// extended or coalesced with the one before, PC-mask periods found, unrolled
// and continued, identical FRE blocks shared.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "encode_size.hpp"

namespace sframe {
namespace detail {

// pc_mask: the rows of one period P when `rows` (sorted, none equal to the
// one before) repeat every P bytes over `size` bytes; empty otherwise.
// Candidates for P are the starts of later rows equal to the first row (a
// period begins with it again); the first few under 256 (rep_size is one
// byte) are tried, each in time linear in the rows.
std::vector<RowSpec> one_period(const std::vector<RowSpec>& rows, std::uint32_t size, std::uint8_t& period) {
  if (rows.size() < 2 || rows[0].start_offset != 0) return {};
  int tried = 0;
  for (std::size_t i = 1; i < rows.size() && rows[i].start_offset < 256 && tried < 4; ++i) {
    if (!(rows[i].row == rows[0].row)) continue;
    ++tried;
    const std::uint32_t p = rows[i].start_offset;
    // The rows a PC-mask FDE of block size p and rows[0, i) gives, each
    // dropped when equal to the one before, must be `rows` exactly.
    std::size_t k = 0;
    bool same = true;
    const FrameRow* last = nullptr;
    for (std::uint64_t base = 0; base < size && same; base += p) {
      for (std::size_t j = 0; j < i; ++j) {
        const std::uint64_t at = base + rows[j].start_offset;
        if (at >= size) break;
        if (last && *last == rows[j].row) continue;
        if (k >= rows.size() || rows[k].start_offset != at || !(rows[k].row == rows[j].row)) {
          same = false;
          break;
        }
        last = &rows[j].row;
        ++k;
      }
    }
    if (same && k == rows.size()) {
      period = static_cast<std::uint8_t>(p);
      return {rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(i)};
    }
  }
  return {};
}

std::size_t block_hash(const std::byte* at, std::uint32_t len, std::uint8_t fre_type) {
  const std::string_view bytes(reinterpret_cast<const char*>(at), len);
  return std::hash<std::string_view>{}(bytes) ^ (std::size_t{fre_type} * 0x9e3779b97f4a7c15ull);
}

// Unrolled rows past this never make a smaller section than the PC-mask FDE
// they replace (one FDE entry against at least 2 bytes per FRE), and it bounds
// the work on hostile sizes and periods.
constexpr std::uint64_t kMaxUnrolledRows = 1024;

// The PC-increment rows a PC-mask function's lookups read (spec §2.3.1,
// SFRAME_FDE_PCTYPE_MASK: a PC's row is the period's row for its offset
// modulo `rep`): `period` repeated every `rep` bytes over `size` bytes, each
// row dropped when equal to the one before. False (and `out` unusable) when
// more than `limit` rows. Time at most linear in `limit` times the period's
// rows: a period of two or more rows adds at least one row per block.
bool unroll_period(const std::vector<RowSpec>& period, std::uint32_t rep, std::uint32_t size, std::uint64_t limit,
                   std::vector<RowSpec>& out) {
  out.clear();
  if (period.empty() || rep == 0 || period[0].start_offset != 0) return false;
  if (period.size() == 1) {
    out.push_back(period[0]);
    return true;
  }
  limit = std::min(limit, kMaxUnrolledRows);
  if (period.size() > limit) return false;
  for (std::uint64_t base = 0; base < size; base += rep) {
    const std::size_t before = out.size();
    for (const RowSpec& r : period) {
      const std::uint64_t at = base + r.start_offset;
      if (at >= size) break;
      if (!out.empty() && out.back().row == r.row) continue;
      if (out.size() >= limit) return false;
      out.push_back({static_cast<std::uint32_t>(at), r.row});
    }
    // A period that added no row leaves the state as it found it, so every
    // later one adds none either (a period of one repeated row).
    if (out.size() == before) break;
  }
  // A function of size 0 unrolls to no row: nothing a caller can join
  // (it reads the first unrolled row).
  return !out.empty();
}

}  // namespace detail

using detail::block_hash;
using detail::fre_bytes_of;

namespace {

// The narrowest FRE start-address size for a largest start offset (spec §2.3 fre_type).
unsigned address_size_for(std::uint64_t max_start) { return max_start <= 0xff ? 1 : max_start <= 0xffff ? 2 : 4; }

}  // namespace

SizeOptions size_options_for(std::span<const Consumer> consumers, Version v, bool big_endian) {
  SizeOptions o = SizeOptions::all();
  (void)v;  // every technique reads the same in v2 and v3
  const bool native = endian::order(big_endian) == kHostByteOrder;
  for (Consumer c : consumers)
    if (c == Consumer::kLibsframe && !native) o.share_fre_blocks = false;
  return o;
}

SectionEncoder::SectionEncoder(const SectionSpec& header, Layout layout, SizeOptions size)
    : SectionEncoder(header, layout) {
  if (layout == Layout::kOptimize) size_ = size;
  // Joining greedily can take a block that later functions would have
  // shared: the section without joining is encoded beside it, and finish()
  // keeps the smaller.
  if (size_.coalesce_adjacent && size_.share_fre_blocks) {
    SizeOptions plain = size_;
    plain.coalesce_adjacent = false;
    alt_ = std::make_unique<SectionEncoder>(header, layout, plain);
  }
}

bool SectionEncoder::extends_last(const FunctionSpec& f) const {
  if (!pending_ || !last_mergeable_ || f.rows.empty() || f.rows[0].start_offset != 0) return false;
  const FdeRecord& prev = pending_rec_;
  if (f.pc_type != PcType::kInc || f.size == 0 || prev.size == 0) return false;
  if (prev.start_pc + prev.size != f.start_pc || std::uint64_t{prev.size} + f.size > 0xffffffffu) return false;
  // PC type and PAuth key are bits 4 and 5 of the info byte.
  if (f.fde_type != prev.fde_type || f.signal != prev.signal ||
      ((prev.info >> 5) & 1) != static_cast<unsigned>(f.pauth_key))
    return false;
  for (const RowSpec& r : f.rows)
    if (!(r.row == last_row_)) return false;
  return true;
}

std::uint64_t SectionEncoder::coalesce_limit() const {
  return size_.coalesce_max_fres != 0         ? size_.coalesce_max_fres
         : header_.version == Version::kV3 ? 0xffff
                                           : 0xffffffffu;
}

bool SectionEncoder::coalesces(const FunctionSpec& f, const std::vector<Row>& rows, bool first_repeats,
                               std::span<const Row> own_rows, PcType own_pc_type, std::uint8_t own_rep_size) const {
  if (!pending_ || !last_mergeable_ || rows.empty() || rows[0].start != 0 || own_rows.empty()) return false;
  const FdeRecord& prev = pending_rec_;
  if (f.size == 0 || prev.size == 0) return false;
  if (prev.start_pc + prev.size != f.start_pc || std::uint64_t{prev.size} + f.size > 0xffffffffu) return false;
  if (f.fde_type != prev.fde_type || f.signal != prev.signal ||
      ((prev.info >> 5) & 1) != static_cast<unsigned>(f.pauth_key))
    return false;
  const std::span<const Row> added = std::span<const Row>(rows).subspan(first_repeats ? 1 : 0);
  const std::uint64_t joined_rows = pending_rows_.size() + added.size();
  if (joined_rows > coalesce_limit()) return false;
  // Bytes apart: both blocks as they are, and the second FDE entry (v3: with
  // its attribute); joined: one block whose start addresses are as wide as
  // the largest start offset needs.
  // With share_fre_blocks, a block identical to one stored already costs
  // nothing apart, and joining would lose that.
  const unsigned attr = header_.version == Version::kV3 ? 5 : 0;
  const auto apart_bytes = [&](std::span<const Row> block, const FdeRecord& rec) -> std::uint64_t {
    const unsigned asz = address_size_for(block.back().start);
    const std::uint64_t len = attr + fre_bytes_of(block, asz);
    if (!size_.share_fre_blocks) return len;
    thread_local std::vector<std::byte> scratch;
    scratch.resize(len);
    const auto info = static_cast<std::uint8_t>(rec.info | (asz == 1 ? 0u : asz == 2 ? 1u : 2u));
    write_block(block, rec, info, scratch.data());
    return find_block(scratch.data(), static_cast<std::uint32_t>(len), info) ? 0 : len;
  };
  // `f` apart is its own FDE: a PC-mask one keeps its period's rows.
  FdeRecord f_rec = prev;
  f_rec.rep_size = own_rep_size;
  f_rec.info = static_cast<std::uint8_t>((prev.info & ~0x10u) | (static_cast<unsigned>(own_pc_type) << 4));
  const std::uint64_t apart =
      apart_bytes(pending_rows_, prev) + apart_bytes(own_rows, f_rec) + fde_entry_size(header_.version);
  const unsigned asz = address_size_for(added.empty() ? pending_rows_.back().start : prev.size + added.back().start);
  const std::uint64_t joined = attr + fre_bytes_of(pending_rows_, asz) + fre_bytes_of(added, asz);
  return joined < apart;
}

bool SectionEncoder::continues_period(std::uint32_t size, std::span<const Row> f_rows) const {
  const std::vector<Row>& period = pending_rows_;
  const std::uint32_t rep = pending_rec_.rep_size;
  if (rep == 0 || period.empty() || period[0].start != 0 || f_rows.empty() || f_rows[0].start != 0) return false;
  const auto same_rule = [](const Row& a, const Row& b) {
    if (a.info_base_mangled != b.info_base_mangled || a.word_size != b.word_size || a.num_words != b.num_words)
      return false;
    return std::equal(a.words, a.words + a.num_words, b.words);
  };
  // The period's rows over [from, from + size), as offsets from `from`,
  // each dropped when it repeats the one before: they must be `f_rows`.
  const std::uint64_t from = pending_rec_.size;
  std::size_t k = 0;  // rows matched
  const Row* last = nullptr;
  for (std::uint64_t base = from / rep * rep; base < from + size; base += rep) {
    const std::size_t before = k;
    for (std::size_t j = 0; j < period.size(); ++j) {
      const std::uint64_t at = base + period[j].start;
      const std::uint64_t end = j + 1 < period.size() ? base + period[j + 1].start : base + rep;
      if (end <= from) continue;
      if (at >= from + size) break;
      if (last && same_rule(*last, period[j])) continue;
      const std::uint64_t rel = at > from ? at - from : 0;
      if (k >= f_rows.size() || f_rows[k].start != rel || !same_rule(f_rows[k], period[j])) return false;
      last = &period[j];
      ++k;
    }
    // A whole period that matched no row read only `last`'s rule, so every
    // later period reads it too: nothing further changes. This bounds the
    // loop by the rows of `f_rows`, not by size / rep (a 4 GiB function
    // with a 1-byte period would take 2^32 rounds).
    if (period.size() == 1 || (base >= from && k == before)) break;
  }
  return k == f_rows.size();
}

std::optional<std::uint32_t> SectionEncoder::find_block(const std::byte* at, std::uint32_t len,
                                                        std::uint8_t info) const {
  const std::size_t h = block_hash(at, len, info & 0x0f);
  const auto [lo, hi] = blocks_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const FdeRecord& r = fdes_[it->second];
    // v2 blocks read differently per FRE type (in the FDE); v3 attributes
    // carry it in the block.
    if (r.fre_bytes == len && (r.info & 0x0f) == (info & 0x0f) &&
        std::memcmp(fres_.data() + r.fre_begin, at, len) == 0)
      return r.fre_begin;
  }
  return std::nullopt;
}

}  // namespace sframe
