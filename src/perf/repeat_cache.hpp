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
/// its second sample on (half of a Python profile's stacks come once). Its
/// frames are kept as indexes into the frames resolved since the last
/// clear(), each once, by callchain word: the stacks of a profile share
/// most of their frames (12,643 samples of a python3 recording: 3,069
/// distinct words in 258,884 frames), a word's frame found again costs one
/// probe instead of a mapping and symbol lookup, and a copy of every kept
/// stack's frames (88 bytes each) faulted in megabytes of fresh pages, the
/// cache's main cost. The session drops it all at every record that
/// changes a process; make_room() drops it past its bounds.
class RepeatCache {
 public:
  /// Bounds: frames, frame references and callchain words kept (each),
  /// callchains seen.
  static constexpr std::size_t kFrames = std::size_t{1} << 17;
  /// A longer callchain (words, context markers included) is not kept.
  static constexpr std::uint64_t kMaxWords = 1024;
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  /// The address space of kernel callchain words (word_frame()).
  static constexpr std::uint32_t kKernelSpace = ~std::uint32_t{0};

  /// The key of `smp`'s callchain in process `pid`; 0 (never a key) when
  /// the sample is not one to remember: no callchain, or longer than
  /// kMaxWords.
  static std::uint64_t key(std::uint32_t pid, const Sample& smp) noexcept;

  /// Drops everything when a sample of `words` callchain words could pass
  /// a bound: called before a sample's frames are looked up or kept, so
  /// that its indexes stay valid until its remember().
  void make_room(std::uint64_t words);

  /// The frame kept for callchain word `word` of address space `space`
  /// (a pid, or kKernelSpace), as the first user frame (`caller` false) or
  /// a caller (`caller` true): its index, or kNone.
  std::uint32_t word_frame(std::uint32_t space, std::uint64_t word, bool caller) const;
  /// Keeps `f` as that word's frame; returns its index.
  std::uint32_t keep_word_frame(std::uint32_t space, std::uint64_t word, bool caller, const ResolvedFrame& f);

  /// A kept frame, by index.
  const ResolvedFrame& frame(std::uint32_t index) const { return frames_[index]; }
  /// Changes at every clear(): indexes are valid while it stays.
  std::uint64_t generation() const { return generation_; }

  /// An earlier resolution of the same pid and callchain: its frames'
  /// indexes and its id (> 0, unique in the session); empty and id 0 when
  /// none is kept.
  struct Hit {
    std::span<const std::uint32_t> frames;
    std::uint64_t id = 0;
  };
  Hit find(std::uint64_t key, std::uint32_t pid, const Sample& smp) const;

  /// Replaces `out` with the frames of `indexes`, in order.
  void copy_frames(std::span<const std::uint32_t> indexes, std::vector<ResolvedFrame>& out) const;

  /// Notes that `smp` of `pid` (its key(), nonzero) resolved to the kept
  /// frames `indexes` (make_room() called for it first): kept when its
  /// callchain was seen before, with a new id returned; 0 when only its
  /// first sighting was noted.
  std::uint64_t remember(std::uint64_t key, std::uint32_t pid, const Sample& smp,
                         std::span<const std::uint32_t> indexes);

  /// Forgets every frame and callchain (a process changed: its frames may
  /// resolve otherwise now). Keeps the memory for what comes next.
  void clear();

 private:
  struct Entry {
    std::uint64_t key;
    std::uint64_t id;
    std::size_t words_at, refs_at;  // into words_, refs_
    std::uint32_t words, frames;
    std::uint32_t pid;
    std::uint32_t older;  // the previous entry of the same key, or kNone
  };
  struct WordKey {
    std::uint64_t word;
    std::uint32_t space;
    std::uint32_t caller;
  };
  std::size_t word_slot(const WordKey& k) const;

  std::vector<std::byte> words_;      // the callchains' bytes as recorded
  std::vector<std::uint32_t> refs_;   // the callchains' frames, as indexes into frames_
  std::vector<ResolvedFrame> frames_;  // the frames kept, by word
  std::vector<WordKey> frame_keys_;   // each frame's word
  std::vector<std::uint32_t> slots_;  // frames_ by word: open addressing, kNone empty
  unsigned shift_ = 64;
  std::vector<Entry> entries_;
  // key -> its newest entry; kNone: one sample of it seen, none kept
  std::unordered_map<std::uint64_t, std::uint32_t> newest_;
  std::uint64_t next_id_ = 1;
  std::uint64_t generation_ = 0;
};

}  // namespace sframe::perf::detail
