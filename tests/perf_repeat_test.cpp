// SPDX-License-Identifier: MIT
// The session's repeat cache (src/perf/repeat_cache.hpp): a callchain's
// frames come back only for the same process and the same words, from its
// second sample on, with one id per kept resolution; a word's frame only
// for the same address space and position; past its bounds it starts over. The perf tests see the cache only through output that must
// not change; its own rules are checked here.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "repeat_cache.hpp"

namespace {

using sframe::perf::ResolvedFrame;
using sframe::perf::Sample;
using sframe::perf::detail::RepeatCache;

// A sample whose callchain is `words` (kept alive by the caller).
Sample sample_of(const std::vector<std::uint64_t>& words) {
  Sample s;
  s.callchain_nr = words.size();
  s.callchain_data = reinterpret_cast<const std::byte*>(words.data());
  return s;
}

// The frames of `words` in address space `space` (words[0] the first
// user frame, the rest callers), each as its word's kept frame, kept at its
// address when new: their indexes.
std::vector<std::uint32_t> keep(RepeatCache& c, std::uint32_t space, const std::vector<std::uint64_t>& words) {
  c.make_room(words.size());
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::uint32_t id = c.word_frame(space, words[i], i > 0);
    if (id == RepeatCache::kNone) {
      ResolvedFrame f;
      f.address = words[i];
      id = c.keep_word_frame(space, words[i], i > 0, f);
    }
    ids.push_back(id);
  }
  return ids;
}

TEST(PerfRepeatCache, KeepsACallchainFromItsSecondSample) {
  RepeatCache c;
  const std::vector<std::uint64_t> words = {0x401000, 0x401200};
  const Sample s = sample_of(words);
  const std::uint64_t key = RepeatCache::key(7, s);
  ASSERT_NE(key, 0u);
  EXPECT_EQ(c.find(key, 7, s).id, 0u);
  EXPECT_EQ(c.remember(key, 7, s, keep(c, 7, words)), 0u);  // first sighting: noted only
  EXPECT_EQ(c.find(key, 7, s).id, 0u);
  const std::uint64_t id = c.remember(key, 7, s, keep(c, 7, words));
  EXPECT_NE(id, 0u);
  const RepeatCache::Hit hit = c.find(key, 7, s);
  EXPECT_EQ(hit.id, id);
  ASSERT_EQ(hit.frames.size(), 2u);
  EXPECT_EQ(c.frame(hit.frames[0]).address, 0x401000u);
  EXPECT_EQ(c.frame(hit.frames[1]).address, 0x401200u);
  std::vector<ResolvedFrame> copied(5);
  c.copy_frames(hit.frames, copied);
  ASSERT_EQ(copied.size(), 2u);
  EXPECT_EQ(copied[1].address, 0x401200u);
}

TEST(PerfRepeatCache, AWordsFrameIsKeptBySpaceAndPosition) {
  RepeatCache c;
  EXPECT_EQ(c.word_frame(7, 0x401000, false), RepeatCache::kNone);
  ResolvedFrame f;
  f.address = 1;
  const std::uint32_t first = c.keep_word_frame(7, 0x401000, false, f);
  EXPECT_EQ(c.word_frame(7, 0x401000, false), first);
  // Kept once: a second keep returns the first frame, not the new one.
  f.address = 2;
  EXPECT_EQ(c.keep_word_frame(7, 0x401000, false, f), first);
  EXPECT_EQ(c.frame(first).address, 1u);
  // As a caller, in another process, or in the kernel: another frame.
  EXPECT_EQ(c.word_frame(7, 0x401000, true), RepeatCache::kNone);
  EXPECT_EQ(c.word_frame(8, 0x401000, false), RepeatCache::kNone);
  EXPECT_EQ(c.word_frame(RepeatCache::kKernelSpace, 0x401000, false), RepeatCache::kNone);
  const std::uint32_t caller = c.keep_word_frame(7, 0x401000, true, f);
  EXPECT_NE(caller, first);
  EXPECT_EQ(c.frame(caller).address, 2u);
  // Many more words: the table grows, every index stays.
  std::vector<std::uint32_t> ids;
  for (std::uint64_t w = 0; w < 5000; ++w) {
    f.address = w;
    ids.push_back(c.keep_word_frame(9, w * 16, false, f));
  }
  for (std::uint64_t w = 0; w < 5000; ++w) {
    ASSERT_EQ(c.word_frame(9, w * 16, false), ids[w]) << w;
    ASSERT_EQ(c.frame(ids[w]).address, w);
  }
  EXPECT_EQ(c.word_frame(7, 0x401000, false), first);
}

TEST(PerfRepeatCache, AnotherProcessOrCallchainIsNotAHit) {
  RepeatCache c;
  const std::vector<std::uint64_t> words = {0x401000, 0x401200};
  const std::vector<std::uint64_t> other = {0x401000, 0x401208};
  const Sample s = sample_of(words), t = sample_of(other);
  const std::uint64_t key = RepeatCache::key(7, s);
  c.remember(key, 7, s, keep(c, 7, words));
  c.remember(key, 7, s, keep(c, 7, words));
  // The same words in another process (pid 8), under the key of pid 7:
  // the words match, the pid does not.
  EXPECT_EQ(c.find(key, 8, s).id, 0u);
  // Other words under the same key (a collision): compared, not a hit.
  EXPECT_EQ(c.find(key, 7, t).id, 0u);
  EXPECT_NE(RepeatCache::key(8, s), key);
  EXPECT_NE(RepeatCache::key(7, t), key);
}

TEST(PerfRepeatCache, CollidingCallchainsKeepTheirOwnFrames) {
  RepeatCache c;
  const std::vector<std::uint64_t> a = {0xa}, b = {0xb, 0xbb};
  const Sample sa = sample_of(a), sb = sample_of(b);
  const std::uint64_t key = 0x1235;  // both filed under one key
  c.remember(key, 1, sa, keep(c, 1, a));
  const std::uint64_t ida = c.remember(key, 1, sa, keep(c, 1, a));
  const std::uint64_t idb = c.remember(key, 1, sb, keep(c, 1, b));  // the key seen: kept at once
  ASSERT_NE(ida, 0u);
  ASSERT_NE(idb, 0u);
  EXPECT_NE(ida, idb);
  EXPECT_EQ(c.find(key, 1, sa).id, ida);
  EXPECT_EQ(c.find(key, 1, sa).frames.size(), 1u);
  EXPECT_EQ(c.find(key, 1, sb).id, idb);
  ASSERT_EQ(c.find(key, 1, sb).frames.size(), 2u);
  EXPECT_EQ(c.frame(c.find(key, 1, sb).frames[1]).address, 0xbbu);
}

TEST(PerfRepeatCache, NoKeyForAnEmptyOrOverlongCallchain) {
  const std::vector<std::uint64_t> none;
  EXPECT_EQ(RepeatCache::key(1, sample_of(none)), 0u);
  const std::vector<std::uint64_t> longest(RepeatCache::kMaxWords, 0x401000);
  EXPECT_NE(RepeatCache::key(1, sample_of(longest)), 0u);
  const std::vector<std::uint64_t> too_long(RepeatCache::kMaxWords + 1, 0x401000);
  EXPECT_EQ(RepeatCache::key(1, sample_of(too_long)), 0u);
}

TEST(PerfRepeatCache, ClearForgetsAndIdsStayUnique) {
  RepeatCache c;
  const std::vector<std::uint64_t> words = {0x401000};
  const Sample s = sample_of(words);
  const std::uint64_t key = RepeatCache::key(3, s);
  c.remember(key, 3, s, keep(c, 3, words));
  const std::uint64_t first = c.remember(key, 3, s, keep(c, 3, words));
  const std::uint64_t generation = c.generation();
  c.clear();
  EXPECT_NE(c.generation(), generation);
  EXPECT_EQ(c.find(key, 3, s).id, 0u);
  EXPECT_EQ(c.word_frame(3, 0x401000, false), RepeatCache::kNone);
  EXPECT_EQ(c.remember(key, 3, s, keep(c, 3, words)), 0u);  // seen afresh
  const std::uint64_t second = c.remember(key, 3, s, keep(c, 3, words));
  EXPECT_NE(second, 0u);
  EXPECT_NE(second, first);
}

TEST(PerfRepeatCache, StartsOverPastItsFrameBound) {
  RepeatCache c;
  // Stacks of 1,024 frames: the bound holds 128 of them.
  const std::size_t depth = 1024, fit = RepeatCache::kFrames / depth;
  std::vector<std::vector<std::uint64_t>> chains;
  for (std::size_t i = 0; i <= fit; ++i) {
    std::vector<std::uint64_t> w(depth - 1, 0x500000);
    w.insert(w.begin(), 0x400000 + i);
    chains.push_back(w);
  }
  // Distinct kept frames: the first word differs, the rest are callers of
  // one word, kept once per chain's space (pid i + 1).
  std::vector<std::uint64_t> keys;
  for (std::size_t i = 0; i < fit; ++i) {
    const Sample s = sample_of(chains[i]);
    const auto pid = static_cast<std::uint32_t>(i + 1);
    keys.push_back(RepeatCache::key(pid, s));
    c.remember(keys[i], pid, s, keep(c, pid, chains[i]));
    ASSERT_NE(c.remember(keys[i], pid, s, keep(c, pid, chains[i])), 0u);
  }
  for (std::size_t i = 0; i < fit; ++i)
    EXPECT_NE(c.find(keys[i], static_cast<std::uint32_t>(i + 1), sample_of(chains[i])).id, 0u) << i;
  const std::uint64_t generation = c.generation();
  // One more stack would pass the bound on references: make_room() drops
  // everything first.
  c.make_room(depth);
  EXPECT_NE(c.generation(), generation);
  EXPECT_EQ(c.find(keys[0], 1, sample_of(chains[0])).id, 0u);
  EXPECT_EQ(c.word_frame(1, 0x400000, false), RepeatCache::kNone);
}

}  // namespace
