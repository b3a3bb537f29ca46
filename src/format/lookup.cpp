// SPDX-License-Identifier: MIT
// PC lookup: FDE by binary search or bucket index, then FRE by a short scan.
#include "sframe/format/lookup.hpp"

#include <algorithm>
#include <numeric>

namespace sframe {
namespace {

// v1 PC-mask FDEs carry no block size; GNU ld 2.40 only made them for
// x86-64 PLTs, whose entries are 16 bytes.
constexpr std::uint32_t kV1MaskBlock = 16;

}  // namespace

Expected<Match> find_in_fde(const Section& s, const Fde& fde, std::uint64_t pc) noexcept {
  std::uint64_t off = pc - fde.start_pc;
  if (fde.pc_type == PcType::kMask) {
    const std::uint32_t block = fde.rep_size ? fde.rep_size : kV1MaskBlock;
    off %= block;
  }
  Expected<Fre> best = s.fre_covering(fde, off);
  if (!best) return Unexpected{best.error()};
  Expected<FrameRow> row = s.row(fde, *best);
  if (!row) return Unexpected{row.error()};
  return Match{fde, *best, *row};
}

Expected<Match> find(const Section& s, std::uint64_t pc) noexcept {
  const std::uint32_t n = s.num_fdes();
  if (s.header().flags & flags::kFdeSorted) {
    if (n == 0 || s.fde_start_pc(0) > pc) return make_error(LookupErrc::kPcNotCovered, 0, pc);
    // Branchless search for the last FDE whose start is <= pc: random PCs
    // would mispredict about half of the branches of a classic search.
    std::uint32_t base = 0;
    std::uint32_t len = n;
    while (len > 1) {
      const std::uint32_t half = len / 2;
      base = s.fde_start_pc(base + half) <= pc ? base + half : base;
      len -= half;
    }
    Expected<Fde> f = s.fde(base);
    if (!f) return Unexpected{f.error()};
    if (pc - f->start_pc >= f->size) return make_error(LookupErrc::kPcNotCovered, 0, pc);
    return find_in_fde(s, *f, pc);
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    if (pc >= f->start_pc && pc - f->start_pc < f->size) return find_in_fde(s, *f, pc);
  }
  return make_error(LookupErrc::kPcNotCovered, 0, pc);
}

Expected<FdeIndex> FdeIndex::build(const Section& s) {
  FdeIndex ix;
  ix.s_ = s;
  const std::uint32_t n = s.num_fdes();
  ix.entries_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    ix.entries_.push_back({f->start_pc, f->size, i});
  }
  const auto by_start = [](const Entry& a, const Entry& b) { return a.start < b.start; };
  if (!std::is_sorted(ix.entries_.begin(), ix.entries_.end(), by_start))
    std::stable_sort(ix.entries_.begin(), ix.entries_.end(), by_start);
  if (n == 0) return ix;
  ix.lo_ = ix.entries_.front().start;
  // At most about one bucket per FDE: the table stays proportional to the
  // FDE count whatever the address span.
  // Distance from the first start to the last; +1 could wrap at 2^64.
  const std::uint64_t d = ix.entries_.back().start - ix.lo_;
  unsigned shift = 0;
  while (shift < 63 && (d >> shift) >= n) ++shift;
  ix.shift_ = shift;
  const std::uint64_t buckets = (d >> shift) + 1;
  ix.bucket_.resize(buckets);
  std::uint32_t e = 0;
  for (std::uint64_t b = 0; b < buckets; ++b) {
    const std::uint64_t first = ix.lo_ + (b << shift);
    while (e + 1 < n && ix.entries_[e + 1].start <= first) ++e;
    ix.bucket_[b] = e;
  }
  return ix;
}

Expected<Match> FdeIndex::find(std::uint64_t pc) const noexcept {
  const std::size_t n = entries_.size();
  if (n == 0 || pc < lo_) return make_error(LookupErrc::kPcNotCovered, 0, pc);
  const std::uint64_t b = (pc - lo_) >> shift_;
  std::size_t e = n - 1;
  if (b < bucket_.size()) {
    // The answer lies between this bucket's entry and the next bucket's:
    // usually the same or the next entry; clustered starts still take
    // logarithmic time.
    e = bucket_[b];
    const std::size_t last = b + 1 < bucket_.size() ? std::size_t{bucket_[b + 1]} : n - 1;
    if (e < last && entries_[e + 1].start <= pc) {
      if (e + 1 == last || entries_[e + 2].start > pc) {
        ++e;
      } else {
        const auto it = std::upper_bound(entries_.begin() + static_cast<std::ptrdiff_t>(e) + 2,
                                         entries_.begin() + static_cast<std::ptrdiff_t>(last) + 1, pc,
                                         [](std::uint64_t v, const Entry& x) { return v < x.start; });
        e = static_cast<std::size_t>(it - entries_.begin()) - 1;
      }
    }
  }
  const Entry& hit = entries_[e];
  if (pc - hit.start >= hit.size) return make_error(LookupErrc::kPcNotCovered, 0, pc);
  Expected<Fde> f = s_.fde(hit.fde);
  if (!f) return Unexpected{f.error()};
  return find_in_fde(s_, *f, pc);
}

}  // namespace sframe
