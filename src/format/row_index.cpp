// SPDX-License-Identifier: MIT
// RowIndex: a section compiled into one boundary table for O(1) lookups.
#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>

#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"

namespace sframe {
namespace {

// Everything that distinguishes two rows, packed for hashing.
struct RowKey {
  FrameRow row;
  bool signal;
  FdeType fde_type;
  friend bool operator==(const RowKey&, const RowKey&) = default;
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

std::uint64_t rule_bits(const Rule& r) noexcept {
  return std::uint64_t{static_cast<std::uint8_t>(r.kind)} | std::uint64_t{static_cast<std::uint8_t>(r.base)} << 2 |
         std::uint64_t{r.deref} << 4 | std::uint64_t{r.regnum} << 8 |
         std::uint64_t{static_cast<std::uint32_t>(r.offset)} << 24;
}

struct RowKeyHash {
  std::size_t operator()(const RowKey& k) const noexcept {
    std::uint64_t h = rule_bits(k.row.cfa);
    h = mix(h, rule_bits(k.row.ra));
    h = mix(h, rule_bits(k.row.fp));
    h = mix(h, std::uint64_t{k.row.ra_mangled} | std::uint64_t{k.signal} << 2 |
                 std::uint64_t{static_cast<std::uint8_t>(k.fde_type)} << 3);
    return static_cast<std::size_t>(h);
  }
};

struct Span {
  std::uint64_t start;
  std::uint32_t size;
  std::uint32_t fde;
};

// Row ids by an FRE's encoded rules: its info byte and data words as
// stored, with its FDE's type and signal bit. The row an FRE decodes to
// depends on nothing else in a section (the header is the same for all;
// spec §3: the info byte names the CFA base, the word count and size, the
// mangled-RA bit), so FREs with the same bytes get the same row without
// being decoded again. Compiled code repeats a few thousand encodings
// across a million FREs; decoding each (Section::row) and hashing the
// decoded row was most of build(). Open addressing over a power-of-two
// table of 16-byte keys; FREs whose words take more than 12 bytes (FLEX)
// are not cached.
class EncodedRows {
 public:
  static constexpr std::uint32_t kAbsent = 0xffffffff;
  struct Key {
    std::uint64_t lo = 0, hi = 0;  // the bytes, zero past their end
    std::uint32_t tag = 0;         // length, signal bit, FDE type
    friend bool operator==(const Key&, const Key&) = default;
  };
  // The key of the FRE whose info byte and words are the `n` bytes at `p`
  // of which `avail` can be read, or false when they take more than 13.
  static bool key_of(const std::byte* p, std::size_t n, std::size_t avail, bool signal, FdeType type,
                     Key& key) noexcept {
    if (n > 13) return false;
    key.tag = static_cast<std::uint32_t>(n) | (signal ? 1u << 8 : 0u) | static_cast<std::uint32_t>(type) << 9;
    if (avail >= 16) {
      // Two fixed-size loads (no store to forward), then the bytes past
      // the FRE masked off.
      std::memcpy(&key.lo, p, 8);
      std::memcpy(&key.hi, p + 8, 8);
      if (n < 8) {
        key.lo &= first_bytes(n);
        key.hi = 0;
      } else {
        key.hi &= first_bytes(n - 8);
      }
    } else {
      key.lo = key.hi = 0;
      for (std::size_t i = 0; i < n; ++i)
        (i < 8 ? key.lo : key.hi) |= std::uint64_t{std::to_integer<std::uint8_t>(p[i])} << (8 * (i % 8));
    }
    return true;
  }
  std::uint32_t find(const Key& key) const noexcept {
    if (slots_.empty()) return kAbsent;
    for (std::size_t i = slot(key);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.id == kAbsent) return kAbsent;
      if (s.key == key) return s.id;
    }
  }
  void insert(const Key& key, std::uint32_t id) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = slot(key);
    while (slots_[i].id != kAbsent) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = {key, id};
    ++used_;
  }

 private:
  struct Slot {
    Key key;
    std::uint32_t id;
  };
  // A mask keeping the first `k` (< 8) bytes of a word loaded from memory.
  static std::uint64_t first_bytes(std::size_t k) noexcept {
    if (k == 0) return 0;
    if constexpr (std::endian::native == std::endian::little) return ~std::uint64_t{0} >> (64 - 8 * k);
    return ~std::uint64_t{0} << (64 - 8 * k);
  }
  std::size_t slot(const Key& key) const noexcept {
    std::uint64_t h = (key.lo * 0x9e3779b97f4a7c15ULL) ^ (key.hi * 0xc2b2ae3d27d4eb4fULL) ^ key.tag;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return static_cast<std::size_t>(h ^ (h >> 32)) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 256 : old.size() * 2, Slot{Key{}, kAbsent});
    used_ = 0;
    for (const Slot& s : old)
      if (s.id != kAbsent) insert(s.key, s.id);
  }
  std::vector<Slot> slots_;
  std::size_t used_ = 0;
};

}  // namespace

Expected<RowIndex> RowIndex::build(const Section& s) {
  RowIndex ix;
  ix.s_ = s;
  const std::uint32_t n = s.num_fdes();
  std::vector<Span> fdes;
  fdes.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    if (f->size != 0) fdes.push_back({f->start_pc, f->size, i});
  }
  std::stable_sort(fdes.begin(), fdes.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  if (fdes.empty()) {
    ix.bucket_ = {0, 0};
    for (int k = 0; k <= kSentinels; ++k) ix.add(UINT32_MAX, kGap);
    return ix;
  }
  ix.lo_ = fdes.front().start;
  for (std::size_t k = 0; k < fdes.size(); ++k) {
    const std::uint64_t end = fdes[k].start + fdes[k].size;
    if (end < fdes[k].start) return make_error(FormatErrc::kFuncRangeOverflow, 0, fdes[k].start, fdes[k].fde);
    if (k + 1 < fdes.size() && fdes[k + 1].start < end)
      return make_error(FormatErrc::kFdesOverlap, 0, fdes[k + 1].start, fdes[k + 1].fde);
    ix.span_ = std::max(ix.span_, end - ix.lo_);
  }
  if (ix.span_ > UINT32_MAX) return make_error(EncodeErrc::kNotRepresentable, 0, ix.span_);

  std::unordered_map<RowKey, std::uint32_t, RowKeyHash> ids;
  EncodedRows by_encoding;
  const auto row_id = [&](const FrameRow& row, bool signal, FdeType type) {
    const auto [it, added] = ids.try_emplace(RowKey{row, signal, type}, static_cast<std::uint32_t>(ix.rows_.size()));
    if (added) ix.rows_.push_back({row, signal, type});
    return it->second;
  };
  // The header's FRE count is not trusted: an FRE takes at least two bytes.
  const std::size_t fres_max = std::min<std::size_t>(s.header().num_fres, s.bytes().size() / 2);
  ix.entries_.reserve(fres_max + fdes.size() + 3);
  ix.fdes_.reserve(fdes.size());
  for (std::size_t k = 0; k < fdes.size(); ++k) {
    const Span& sp = fdes[k];
    const auto at = static_cast<std::uint32_t>(sp.start - ix.lo_);
    ix.fdes_.push_back({at, sp.fde});
    Expected<Fde> f = s.fde(sp.fde);
    if (!f) return Unexpected{f.error()};
    if (f->pc_type == PcType::kMask) {
      // PLT blocks: a few FDEs, resolved from the section on lookup.
      ix.add(at, kMaskFde);
    } else {
      std::uint32_t prev = 0;
      bool first = true;
      for (const Expected<Fre>& fre : s.fres(*f)) {
        if (!fre) return Unexpected{fre.error()};
        if (fre->start_offset >= sp.size) break;
        if (!first && fre->start_offset < prev)
          return make_error(FormatErrc::kFreStartNotIncreasing, fre->section_offset, fre->start_offset, sp.fde, fre->index);
        if (first && fre->start_offset > 0) ix.add(at, kBeforeFirstFre);
        // The info byte and data words follow the start address.
        const std::uint32_t enc_size = 1u + std::uint32_t{fre->dataword_count} * fre->dataword_size;
        const std::size_t enc_at = std::size_t{fre->section_offset} + fre->encoded_size - enc_size;
        EncodedRows::Key key;
        const bool keyed = EncodedRows::key_of(s.bytes().data() + enc_at, enc_size, s.bytes().size() - enc_at,
                                               f->signal, f->fde_type, key);
        std::uint32_t id = keyed ? by_encoding.find(key) : EncodedRows::kAbsent;
        if (id == EncodedRows::kAbsent) {
          Expected<FrameRow> row = s.row(*f, *fre);
          if (!row) return Unexpected{row.error()};
          id = row_id(*row, f->signal, f->fde_type);
          if (keyed) by_encoding.insert(key, id);
        }
        ix.add(at + fre->start_offset, id);
        prev = fre->start_offset;
        first = false;
      }
      if (first) ix.add(at, kBeforeFirstFre);
    }
    const std::uint64_t end = at + std::uint64_t{sp.size};
    if (k + 1 == fdes.size() || fdes[k + 1].start - ix.lo_ != end)
      ix.add(static_cast<std::uint32_t>(std::min<std::uint64_t>(end, UINT32_MAX)), kGap);
  }

  ix.finalize();
  return ix;
}

void RowIndex::finalize() {
  // Two to four buckets per boundary: nearly every bucket holds at most two
  // boundaries, which find() checks without a loop or a branch.
  const std::size_t m = entries_.size();
  unsigned shift = 0;
  while (shift < 32 && (span_ >> shift) >= m) ++shift;
  shift_ = shift;
  const std::size_t buckets = static_cast<std::size_t>(span_ >> shift) + 1;
  bucket_.resize(buckets + 1);
  // The entry index in the low bits, the row (where it fits) above.
  ebits_ = std::max(1u, static_cast<unsigned>(std::bit_width(m - 1)));
  emask_ = ebits_ >= 32 ? 0xffffffffu : (1u << ebits_) - 1;
  rnone_ = ebits_ >= 32 ? 0u : 0xffffffffu >> ebits_;
  const auto word = [&](std::uint32_t e) {
    const std::uint32_t row = entries_[e].row;  // a kGap-like marker is >= rnone_ too
    const std::uint32_t field = row < rnone_ ? row : rnone_;
    return ebits_ >= 32 ? e : e | (field << ebits_);
  };
  // Bucket b: the last entry starting at or before b << shift (entry 0 for
  // those before it). Filled entry by entry, each entry's run of buckets at
  // once: those starting before the next entry (a search per bucket redoes
  // what the entries' order already gives, for every bucket of a large
  // library's generation).
  std::size_t b = 0;
  for (std::size_t e = 0; e + 1 < m && b < buckets; ++e) {
    const std::uint64_t next = entries_[e + 1].start;
    const auto upto = static_cast<std::size_t>(
        std::min<std::uint64_t>(buckets, (next + (std::uint64_t{1} << shift) - 1) >> shift));
    const std::uint32_t w = word(static_cast<std::uint32_t>(e));
    for (; b < upto; ++b) bucket_[b] = w;
  }
  const std::uint32_t last = word(static_cast<std::uint32_t>(m - 1));
  for (; b < buckets; ++b) bucket_[b] = last;
  bucket_[buckets] = last;
  // Sentinels: find() may read View::kDirect entries past its answer.
  for (int k = 0; k < kSentinels; ++k) add(UINT32_MAX, kGap);
}

Expected<std::uint32_t> RowIndex::find_row(std::uint64_t pc) const noexcept {
  const std::uint64_t off = pc - lo_;
  if (pc < lo_ || off >= span_) return make_error(LookupErrc::kPcNotCovered, 0, pc);
  const std::size_t e = boundary(static_cast<std::uint32_t>(off));
  const std::uint32_t row = entries_[e].row;
  if (row < rows_.size()) return row;
  if (row == kMaskFde) return kUseFind;
  if (row == kBeforeFirstFre) return make_error(LookupErrc::kPcBeforeFirstFre, 0, pc, fde_at(static_cast<std::uint32_t>(off)));
  return make_error(LookupErrc::kPcNotCovered, 0, pc);
}

std::uint32_t RowIndex::fde_at(std::uint32_t o) const noexcept {
  const auto it = std::upper_bound(fdes_.begin(), fdes_.end(), o,
                                   [](std::uint32_t v, const FdeStart& f) { return v < f.start; });
  return it == fdes_.begin() ? 0 : std::prev(it)->fde;
}

std::size_t RowIndex::clustered(std::uint32_t o, std::size_t e, std::size_t last) const noexcept {
  const auto it = std::upper_bound(entries_.begin() + static_cast<std::ptrdiff_t>(e) + 1,
                                   entries_.begin() + static_cast<std::ptrdiff_t>(last) + 1, o,
                                   [](std::uint32_t v, const Entry& x) { return v < x.start; });
  return static_cast<std::size_t>(it - entries_.begin()) - 1;
}

Expected<RowMatch> RowIndex::find(std::uint64_t pc) const noexcept {
  const std::uint64_t off = pc - lo_;
  if (pc < lo_ || off >= span_) return make_error(LookupErrc::kPcNotCovered, 0, pc);
  const auto o = static_cast<std::uint32_t>(off);
  const std::size_t e = boundary(o);
  if (from_rows_) return find_built(pc, o, e);
  const Entry& hit = entries_[e];
  if (hit.row < rows_.size()) {
    // The FRE is the last of its FDE that starts at this boundary (build()
    // added them in order; a later one with the same start replaced it).
    const RowInfo& r = rows_[hit.row];
    const std::uint32_t fde = fde_at(o);
    Expected<Fde> f = s_.fde(fde);
    if (!f) return Unexpected{f.error()};
    const auto fde_start = static_cast<std::uint32_t>(f->start_pc - lo_);
    const std::uint32_t rel = hit.start - fde_start;
    std::uint32_t fre = 0;
    for (const Expected<Fre>& x : s_.fres(*f)) {
      if (!x) return Unexpected{x.error()};
      if (x->start_offset > rel || x->start_offset >= f->size) break;
      fre = x->index;
    }
    return RowMatch{fde, fre, r.row, r.signal, r.fde_type};
  }
  if (hit.row == kMaskFde) {
    Expected<Fde> f = s_.fde(fde_at(o));
    if (!f) return Unexpected{f.error()};
    Expected<Match> m = find_in_fde(s_, *f, pc);
    if (!m) return Unexpected{m.error()};
    return RowMatch{f->index, m->fre.index, m->row, f->signal, f->fde_type};
  }
  if (hit.row == kBeforeFirstFre) return make_error(LookupErrc::kPcBeforeFirstFre, 0, pc, fde_at(o));
  return make_error(LookupErrc::kPcNotCovered, 0, pc);
}

Expected<RowMatch> RowIndex::find_built(std::uint64_t pc, std::uint32_t o, std::size_t e) const noexcept {
  const Entry& hit = entries_[e];
  if (hit.row < rows_.size()) {
    // The FRE index: boundaries since the FDE's first (its start; a
    // kBeforeFirstFre marker there is no FRE). Functions do not overlap
    // and the one before ends at or before this start, so the first entry
    // at this start is this FDE's.
    const auto f = std::upper_bound(fdes_.begin(), fdes_.end(), o,
                                    [](std::uint32_t v, const FdeStart& x) { return v < x.start; });
    const FdeStart& fs = *std::prev(f);
    const auto first = std::lower_bound(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(e), fs.start,
                                        [](const Entry& x, std::uint32_t v) { return x.start < v; });
    auto fre = static_cast<std::uint32_t>(entries_.begin() + static_cast<std::ptrdiff_t>(e) - first);
    if (first->row == kBeforeFirstFre) --fre;
    const RowInfo& r = rows_[hit.row];
    return RowMatch{fs.fde, fre, r.row, r.signal, r.fde_type};
  }
  if (hit.row == kMaskFde) {
    // Its period's rows, as find_in_fde() reads a PC-mask FDE's FREs.
    const auto m = std::upper_bound(masks_.begin(), masks_.end(), o,
                                    [](std::uint32_t v, const MaskFde& x) { return v < x.start; });
    const MaskFde& mf = *std::prev(m);
    const std::uint32_t rel = (o - mf.start) % mf.rep_size;
    std::uint32_t k = 0;
    while (k < mf.count && mask_rows_[mf.first + k].offset <= rel) ++k;
    if (k == 0) return make_error(LookupErrc::kPcBeforeFirstFre, 0, pc, mf.fde);
    const RowInfo& r = rows_[mask_rows_[mf.first + k - 1].row];
    return RowMatch{mf.fde, k - 1, r.row, r.signal, r.fde_type};
  }
  if (hit.row == kBeforeFirstFre) return make_error(LookupErrc::kPcBeforeFirstFre, 0, pc, fde_at(o));
  return make_error(LookupErrc::kPcNotCovered, 0, pc);
}

void RowIndex::Builder::reserve(std::size_t functions, std::size_t rows) {
  fns_.reserve(functions);
  staged_.reserve(rows);
}

std::uint32_t RowIndex::Builder::id_of(const FrameRow& row, bool signal, FdeType type) {
  std::vector<RowInfo>& rows = ix_.rows_;
  // The row packed into four words, every field at its own bits (the
  // enums and the register number whole, the bools in `flags`), so that
  // equal words are equal rows: compared and hashed as such.
  const auto word = [](const Rule& r) {
    return std::uint64_t{static_cast<std::uint8_t>(r.kind)} | std::uint64_t{static_cast<std::uint8_t>(r.base)} << 8 |
           std::uint64_t{r.regnum} << 16 | std::uint64_t{static_cast<std::uint32_t>(r.offset)} << 32;
  };
  const Packed key{word(row.cfa), word(row.ra), word(row.fp),
                   std::uint64_t{row.ra_mangled} | std::uint64_t{signal} << 1 | std::uint64_t{row.cfa.deref} << 2 |
                       std::uint64_t{row.ra.deref} << 3 | std::uint64_t{row.fp.deref} << 4 |
                       std::uint64_t{static_cast<std::uint8_t>(type)} << 8};
  const auto same = [&](std::uint32_t id) { return keys_[id] == key; };
  // Functions repeat their neighbours' rows.
  if (last_id_ < rows.size() && same(last_id_)) return last_id_;
  const auto hash = [](const Packed& k) {
    std::uint64_t h = k.cfa * 0x9e3779b97f4a7c15ULL ^ k.ra * 0xc2b2ae3d27d4eb4fULL ^ k.fp * 0x165667b19e3779f9ULL ^ k.flags;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return static_cast<std::size_t>(h ^ (h >> 32));
  };
  // Open addressing over the ids, at most half full.
  if ((rows.size() + 1) * 2 > slots_.size()) {
    slots_.assign(slots_.empty() ? 256 : slots_.size() * 2, EncodedRows::kAbsent);
    for (std::uint32_t id = 0; id < rows.size(); ++id) {
      std::size_t i = hash(keys_[id]) & (slots_.size() - 1);
      while (slots_[i] != EncodedRows::kAbsent) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = id;
    }
  }
  std::size_t i = hash(key) & (slots_.size() - 1);
  for (; slots_[i] != EncodedRows::kAbsent; i = (i + 1) & (slots_.size() - 1))
    if (same(slots_[i])) return last_id_ = slots_[i];
  const auto id = static_cast<std::uint32_t>(rows.size());
  rows.push_back({row, signal, type});
  keys_.push_back(key);
  slots_[i] = id;
  return last_id_ = id;
}

Expected<void> RowIndex::Builder::open_function(const FunctionSpec& shape, std::size_t count) {
  // The encoder's shape checks, with its errors: what an FDE must satisfy
  // for build() to index it (the rows' own by check_row_start(), in add()).
  const auto index = static_cast<std::uint32_t>(fns_.size());
  if (fns_.size() >= 0xffffffffu) return make_error(EncodeErrc::kNotRepresentable, 0, fns_.size() + 1);
  if (auto ok = check_function_outline(shape, index); !ok) return ok;
  if (staged_.size() + count > 0xffffffffu) return make_error(EncodeErrc::kNotRepresentable, 0, staged_.size());
  const bool mask = shape.pc_type == PcType::kMask;
  open_ = Fn{shape.start_pc, shape.size, static_cast<std::uint32_t>(staged_.size()), 0, mask ? shape.rep_size : 0u};
  open_limit_ = detail::row_limit(shape.pc_type, shape.size, shape.rep_size);
  open_signal_ = shape.signal;
  open_type_ = shape.fde_type;
  return {};
}

Expected<void> RowIndex::Builder::row_error(std::size_t k, std::uint32_t start, std::uint32_t prev) const {
  return check_row_start(open_limit_, static_cast<std::uint32_t>(fns_.size()), static_cast<std::uint32_t>(k), start,
                         prev);
}

Expected<void> RowIndex::Builder::add(const FunctionSpec& f) {
  return add(
      f, f.rows.size(), [&](std::size_t k) { return f.rows[k].start_offset; },
      [&](std::size_t k) -> const FrameRow& { return f.rows[k].row; });
}

Expected<RowIndex> RowIndex::Builder::finish(const Section& header) {
  RowIndex ix = std::move(ix_);
  ix_ = RowIndex{};
  last_id_ = EncodedRows::kAbsent;
  Scratch<std::uint32_t>().swap(slots_);
  Scratch<Packed>().swap(keys_);
  Scratch<TagSlot>().swap(tags_);
  Scratch<Fn> fns = std::move(fns_);
  Scratch<Entry> staged = std::move(staged_);
  fns_.clear();
  staged_.clear();
  ix.s_ = header;
  ix.from_rows_ = true;
  // FDE indexes as the encoder's: by start PC, ties in the order added.
  Scratch<std::uint32_t> order(fns.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto by_pc = [&](std::uint32_t a, std::uint32_t b) { return fns[a].start < fns[b].start; };
  if (!std::is_sorted(order.begin(), order.end(), by_pc)) std::stable_sort(order.begin(), order.end(), by_pc);
  // The functions with a range, as build() keeps them.
  std::size_t ranged = 0;
  for (const std::uint32_t i : order) ranged += fns[i].size != 0;
  if (ranged == 0) {
    ix.bucket_ = {0, 0};
    for (int k = 0; k <= kSentinels; ++k) ix.add(UINT32_MAX, kGap);
    return ix;
  }
  std::uint32_t first_ranged = 0;
  while (fns[order[first_ranged]].size == 0) ++first_ranged;
  ix.lo_ = fns[order[first_ranged]].start;
  std::uint64_t prev_end = 0;
  bool have_prev = false;
  for (std::uint32_t rank = 0; rank < order.size(); ++rank) {
    const Fn& fn = fns[order[rank]];
    if (fn.size == 0) continue;
    const std::uint64_t end = fn.start + fn.size;
    if (have_prev && fn.start < prev_end) return make_error(FormatErrc::kFdesOverlap, 0, fn.start, rank);
    prev_end = end;
    have_prev = true;
    ix.span_ = std::max(ix.span_, end - ix.lo_);
  }
  if (ix.span_ > UINT32_MAX) return make_error(EncodeErrc::kNotRepresentable, 0, ix.span_);

  ix.entries_.reserve(staged.size() + 2 * ranged + 3);
  ix.fdes_.reserve(ranged);
  for (std::uint32_t rank = 0; rank < order.size(); ++rank) {
    const Fn& fn = fns[order[rank]];
    if (fn.size == 0) continue;
    const auto at = static_cast<std::uint32_t>(fn.start - ix.lo_);
    ix.fdes_.push_back({at, rank});
    if (fn.rep_size != 0) {
      ix.add(at, kMaskFde);
      ix.masks_.push_back({at, rank, static_cast<std::uint32_t>(ix.mask_rows_.size()), fn.count, fn.rep_size});
      for (std::uint32_t k = 0; k < fn.count; ++k)
        ix.mask_rows_.push_back({staged[fn.first + k].start, staged[fn.first + k].row});
    } else {
      // Rows at or past the end were refused by add().
      if (fn.count == 0 || staged[fn.first].start > 0) ix.add(at, kBeforeFirstFre);
      for (std::uint32_t k = 0; k < fn.count; ++k)
        ix.add(at + staged[fn.first + k].start, staged[fn.first + k].row);
    }
    const std::uint64_t end = at + std::uint64_t{fn.size};
    // No gap where the next function with a range starts here.
    std::uint32_t next = rank + 1;
    while (next < order.size() && fns[order[next]].size == 0) ++next;
    if (next == order.size() || fns[order[next]].start - ix.lo_ != end)
      ix.add(static_cast<std::uint32_t>(std::min<std::uint64_t>(end, UINT32_MAX)), kGap);
  }
  Scratch<Entry>().swap(staged);
  ix.finalize();
  return ix;
}

}  // namespace sframe
