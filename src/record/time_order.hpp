// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s time-ordered merge. Its records come from
// several streams (the BPF ring buffers' samples and stack copies, one
// dummy event's ring per CPU), each in its own order; perf.data wants them
// in time order, with a FINISHED_ROUND between passes (perf's
// ordered-events rule: no record written after a round is older than one
// written before it). A record is kept, bytes and all, until a pass hands
// over every record at or before a cutoff time the caller knows no stream
// will go below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sframe::record {

class TimeOrder {
 public:
  /// What the caller says of a record, handed back with it.
  struct Tag {
    std::uint32_t type = 0;
    std::uint32_t pid = 0;
    std::uint32_t ppid = 0;
  };

  /// The buffer a record's bytes are appended to before its add(): a
  /// record is the bytes from `from` (the buffer's size before they were
  /// appended) to its end.
  std::vector<std::byte>& buffer() { return bytes_; }

  /// Queues the bytes from `from` to the buffer's end as a record of time
  /// `time` (ns, one clock for every stream). Records of the same time come
  /// out in the order they were added. The same bytes may be queued twice
  /// (the same `from`, nothing appended between), under two tags: they are
  /// kept once.
  void add(std::uint64_t time, std::size_t from, Tag tag);
  /// add() with a zero tag.
  void add(std::uint64_t time, std::size_t from);

  /// Calls `f(tag, bytes)` for each record of time <= `cutoff`, oldest
  /// first, then forgets them; the others wait for a later pass. The bytes
  /// live until take() returns; `f` must not append to buffer() nor add()
  /// (the spans point into the buffer). Returns how many were handed over.
  template <class F>
  std::size_t take(std::uint64_t cutoff, F&& f) {
    const std::size_t n = sort_ready(cutoff);
    for (std::size_t i = 0; i < n; ++i) {
      const Entry& e = entries_[i];
      f(static_cast<const Tag&>(e), std::span<const std::byte>(bytes_.data() + e.offset, e.size));
    }
    compact(n);
    return n;
  }

  /// Records queued.
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry : Tag {
    std::uint64_t time;
    std::uint64_t seq;
    std::size_t offset;
    std::size_t size;
  };
  // Sorts by time (then seq); returns how many are at or before `cutoff`.
  std::size_t sort_ready(std::uint64_t cutoff);
  // Drops the first n entries and moves the rest's bytes to the buffer's
  // start.
  void compact(std::size_t n);

  std::vector<std::byte> bytes_;
  std::vector<Entry> entries_;
  std::uint64_t seq_ = 0;
};

}  // namespace sframe::record
