// SPDX-License-Identifier: MIT
// The session's repeat cache (src/perf/repeat_cache.hpp): a callchain's
// frames come back only for the same process and the same words, from its
// second sample on, with one id per kept resolution; past its bounds it
// starts over. The perf tests see the cache only through output that must
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

std::vector<ResolvedFrame> frames_at(std::initializer_list<std::uint64_t> addresses) {
  std::vector<ResolvedFrame> out;
  for (std::uint64_t a : addresses) {
    ResolvedFrame f;
    f.address = a;
    out.push_back(f);
  }
  return out;
}

TEST(PerfRepeatCache, KeepsACallchainFromItsSecondSample) {
  RepeatCache c;
  const std::vector<std::uint64_t> words = {0xfffffffffffffe00, 0x401000, 0x401200};
  const Sample s = sample_of(words);
  const std::uint64_t key = RepeatCache::key(7, s);
  ASSERT_NE(key, 0u);
  const auto frames = frames_at({0x401000, 0x4011ff});
  EXPECT_EQ(c.find(key, 7, s).id, 0u);
  EXPECT_EQ(c.remember(key, 7, s, frames), 0u);  // first sighting: noted only
  EXPECT_EQ(c.find(key, 7, s).id, 0u);
  const std::uint64_t id = c.remember(key, 7, s, frames);
  EXPECT_NE(id, 0u);
  const RepeatCache::Hit hit = c.find(key, 7, s);
  EXPECT_EQ(hit.id, id);
  ASSERT_EQ(hit.frames.size(), 2u);
  EXPECT_EQ(c.frame(hit.frames[0]).address, 0x401000u);
  EXPECT_EQ(c.frame(hit.frames[1]).address, 0x4011ffu);
  std::vector<ResolvedFrame> copied(5);
  c.copy_frames(hit, copied);
  ASSERT_EQ(copied.size(), 2u);
  EXPECT_EQ(copied[1].address, 0x4011ffu);
}

TEST(PerfRepeatCache, AnotherProcessOrCallchainIsNotAHit) {
  RepeatCache c;
  const std::vector<std::uint64_t> words = {0x401000, 0x401200};
  const std::vector<std::uint64_t> other = {0x401000, 0x401208};
  const Sample s = sample_of(words), t = sample_of(other);
  const auto frames = frames_at({0x401000});
  const std::uint64_t key = RepeatCache::key(7, s);
  c.remember(key, 7, s, frames);
  c.remember(key, 7, s, frames);
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
  const std::vector<std::uint64_t> a = {0x401000}, b = {0x402000};
  const Sample sa = sample_of(a), sb = sample_of(b);
  const std::uint64_t key = 0x1235;  // both filed under one key
  const auto fa = frames_at({0xa}), fb = frames_at({0xb, 0xbb});
  c.remember(key, 1, sa, fa);
  const std::uint64_t ida = c.remember(key, 1, sa, fa);
  const std::uint64_t idb = c.remember(key, 1, sb, fb);  // the key seen: kept at once
  ASSERT_NE(ida, 0u);
  ASSERT_NE(idb, 0u);
  EXPECT_NE(ida, idb);
  EXPECT_EQ(c.find(key, 1, sa).id, ida);
  EXPECT_EQ(c.find(key, 1, sa).frames.size(), 1u);
  EXPECT_EQ(c.find(key, 1, sb).id, idb);
  ASSERT_EQ(c.find(key, 1, sb).frames.size(), 2u);
  EXPECT_EQ(c.frame(c.find(key, 1, sb).frames[1]).address, 0xbbu);
}

TEST(PerfRepeatCache, SharedFramesAreKeptOnceAndDifferingOnesApart) {
  RepeatCache c;
  const std::vector<std::uint64_t> wa = {0x401000, 0x402000}, wb = {0x401000, 0x403000};
  const Sample sa = sample_of(wa), sb = sample_of(wb);
  const std::string name = "f", other = "f";
  auto fa = frames_at({0x401000, 0x402000}), fb = frames_at({0x401000, 0x402000});
  fa[0].symbol = &name;
  fb[0].symbol = &name;
  fb[1].symbol = &other;  // the same address, another name: another frame
  const std::uint64_t ka = RepeatCache::key(1, sa), kb = RepeatCache::key(1, sb);
  c.remember(ka, 1, sa, fa);
  c.remember(ka, 1, sa, fa);
  c.remember(kb, 1, sb, fb);
  c.remember(kb, 1, sb, fb);
  const RepeatCache::Hit ha = c.find(ka, 1, sa), hb = c.find(kb, 1, sb);
  ASSERT_EQ(ha.frames.size(), 2u);
  ASSERT_EQ(hb.frames.size(), 2u);
  EXPECT_EQ(ha.frames[0], hb.frames[0]);
  EXPECT_NE(ha.frames[1], hb.frames[1]);
  EXPECT_EQ(c.frame(ha.frames[1]).symbol, nullptr);
  EXPECT_EQ(c.frame(hb.frames[1]).symbol, &other);
  EXPECT_EQ(c.frame(hb.frames[0]).symbol, &name);
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
  const auto frames = frames_at({0x401000});
  c.remember(key, 3, s, frames);
  const std::uint64_t first = c.remember(key, 3, s, frames);
  c.clear();
  EXPECT_EQ(c.find(key, 3, s).id, 0u);
  EXPECT_EQ(c.remember(key, 3, s, frames), 0u);  // seen afresh
  const std::uint64_t second = c.remember(key, 3, s, frames);
  EXPECT_NE(second, 0u);
  EXPECT_NE(second, first);
}

TEST(PerfRepeatCache, StartsOverPastItsFrameBound) {
  RepeatCache c;
  // Stacks of 1,024 frames: the bound holds 128 of them.
  const std::size_t depth = 1024, fit = RepeatCache::kFrames / depth;
  std::vector<std::vector<std::uint64_t>> chains;
  for (std::size_t i = 0; i <= fit; ++i) chains.push_back({0x400000 + i});
  const std::vector<ResolvedFrame> frames(depth);
  std::vector<std::uint64_t> keys;
  for (std::size_t i = 0; i < fit; ++i) {
    const Sample s = sample_of(chains[i]);
    keys.push_back(RepeatCache::key(1, s));
    c.remember(keys[i], 1, s, frames);
    ASSERT_NE(c.remember(keys[i], 1, s, frames), 0u);
  }
  for (std::size_t i = 0; i < fit; ++i) EXPECT_NE(c.find(keys[i], 1, sample_of(chains[i])).id, 0u) << i;
  // One more kept stack would pass the bound: everything is dropped first.
  const Sample last = sample_of(chains[fit]);
  const std::uint64_t k = RepeatCache::key(1, last);
  c.remember(k, 1, last, frames);
  EXPECT_EQ(c.find(keys[0], 1, sample_of(chains[0])).id, 0u);
  EXPECT_EQ(c.find(keys[fit - 1], 1, sample_of(chains[fit - 1])).id, 0u);
}

}  // namespace
