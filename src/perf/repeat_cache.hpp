// SPDX-License-Identifier: MIT
// sframepp (private): the session's memory of samples already resolved,
// by process and recorded callchain, for `sframe perf script` and the
// conversions of `sframe record`. Separate from the session so that tests
// hold it to its rules directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "perf_data.hpp"
#include "perf_unwind.hpp"

namespace sframe::perf::detail {

/// Samples without a stack copy, resolved, by pid and recorded callchain: a
/// profile repeats a few hundred stacks, and copying a stack's frames back
/// costs a fraction of resolving each frame again. A callchain is kept from
/// its second sample on (half of a Python profile's stacks come once, and
/// keeping their frames cost more, the memory faulted in, than their
/// repeats saved). Each distinct frame is kept once, and a callchain as the
/// indexes of its frames: a profile's stacks share most of their frames,
/// and a copy of every stack's frames faulted in megabytes of fresh pages
/// (a page fault per 46 frames), the cache's main cost. Past kFrames frame
/// references, callchain words or callchains seen, everything is dropped
/// and the cache starts over. The session drops it at every record that
/// changes a process.
class RepeatCache {
 public:
  /// Bounds: frame references kept and callchain words kept (each),
  /// callchains seen.
  static constexpr std::size_t kFrames = std::size_t{1} << 17;
  /// A longer callchain (words, context markers included) is not kept.
  static constexpr std::uint64_t kMaxWords = 1024;

  /// The key of `smp`'s callchain in process `pid`; 0 (never a key) when
  /// the sample is not one to remember: no callchain, or longer than
  /// kMaxWords.
  static std::uint64_t key(std::uint32_t pid, const Sample& smp) noexcept;

  /// An earlier resolution of the same pid and callchain: its frames' indexes
  /// (frame()) and its id (> 0, unique in the session); empty and id 0
  /// when none is kept. Valid until the next remember() or clear().
  struct Hit {
    std::span<const std::uint32_t> frames;
    std::uint64_t id = 0;
  };
  Hit find(std::uint64_t key, std::uint32_t pid, const Sample& smp) const;

  /// A kept frame, by an index a Hit holds.
  const ResolvedFrame& frame(std::uint32_t index) const { return frames_[index]; }

  /// Replaces `out` with the frames of `hit`, in order.
  void copy_frames(const Hit& hit, std::vector<ResolvedFrame>& out) const;

  /// Notes that `smp` of `pid` (its key(), nonzero) resolved to `frames`:
  /// kept when its callchain was seen before, with a new id returned; 0
  /// when only its first sighting was noted.
  std::uint64_t remember(std::uint64_t key, std::uint32_t pid, const Sample& smp,
                         std::span<const ResolvedFrame> frames);

  /// Forgets every callchain (a process changed: its frames may resolve
  /// otherwise now). Keeps the memory for what comes next.
  void clear();

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  struct Entry {
    std::uint64_t key;
    std::uint64_t id;
    std::size_t words_at, refs_at;  // into words_, refs_
    std::uint32_t words, frames;
    std::uint32_t pid;
    std::uint32_t older;  // the previous entry of the same key, or kNone
  };
  // The index of `f` in frames_, added when new.
  std::uint32_t intern(const ResolvedFrame& f);

  std::vector<std::byte> words_;      // the callchains' bytes as recorded
  std::vector<std::uint32_t> refs_;   // the callchains' frames, as indexes into frames_
  std::vector<ResolvedFrame> frames_;  // each distinct frame once
  std::vector<std::uint32_t> slots_;  // frames_ by content: open addressing, kNone empty
  std::vector<Entry> entries_;
  // key -> its newest entry; kNone: one sample of it seen, none kept
  std::unordered_map<std::uint64_t, std::uint32_t> newest_;
  std::uint64_t next_id_ = 1;
};

}  // namespace sframe::perf::detail
