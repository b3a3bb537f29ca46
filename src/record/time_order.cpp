// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s time-ordered merge (see time_order.hpp).
#include "time_order.hpp"

#include <algorithm>
#include <cstring>

namespace sframe::record {

void TimeOrder::add(std::uint64_t time, std::size_t from, Tag tag) {
  if (from > bytes_.size()) return;
  Entry e;
  static_cast<Tag&>(e) = tag;
  e.time = time;
  e.seq = seq_++;
  e.offset = from;
  e.size = bytes_.size() - from;
  entries_.push_back(e);
}

void TimeOrder::add(std::uint64_t time, std::size_t from) { add(time, from, Tag{}); }

std::size_t TimeOrder::sort_ready(std::uint64_t cutoff) {
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.time != b.time ? a.time < b.time : a.seq < b.seq; });
  return static_cast<std::size_t>(
      std::upper_bound(entries_.begin(), entries_.end(), cutoff,
                       [](std::uint64_t c, const Entry& e) { return c < e.time; }) -
      entries_.begin());
}

void TimeOrder::compact(std::size_t n) {
  // The rest, compacted in place in the buffer's order (the next pass sorts
  // them by time again): the buffer and the list keep their room for the
  // next pass's records, where new ones grew from empty at every pass.
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.seq < b.seq;
  });
  // Entries queued twice share their bytes.
  std::size_t at = 0, last_from = ~std::size_t{0}, last_to = 0;
  for (Entry& e : entries_) {
    if (e.offset == last_from) {
      e.offset = last_to;
      continue;
    }
    std::memmove(bytes_.data() + at, bytes_.data() + e.offset, e.size);
    last_from = e.offset;
    last_to = e.offset = at;
    at += e.size;
  }
  bytes_.resize(at);
}

}  // namespace sframe::record
