// SPDX-License-Identifier: MIT
// TimeOrder (src/record/time_order.hpp): records of several streams, each
// added out of the others' order, come out by time, those of one time in
// the order they were added; a pass hands over only what is at or before
// its cutoff, and what waits keeps its bytes through the compaction.
#include "time_order.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using sframe::record::TimeOrder;

// Queues `text` as a record of `time`.
void add(TimeOrder& q, std::uint64_t time, const std::string& text, std::uint32_t type = 0) {
  std::vector<std::byte>& b = q.buffer();
  const std::size_t from = b.size();
  for (char ch : text) b.push_back(static_cast<std::byte>(ch));
  q.add(time, from, {type, 0, 0});
}

// A pass: the records handed over, as text with their type.
std::vector<std::pair<std::string, std::uint32_t>> take(TimeOrder& q, std::uint64_t cutoff) {
  std::vector<std::pair<std::string, std::uint32_t>> out;
  q.take(cutoff, [&](const TimeOrder::Tag& t, std::span<const std::byte> rec) {
    std::string s;
    for (std::byte b : rec) s.push_back(static_cast<char>(b));
    out.emplace_back(s, t.type);
  });
  return out;
}

using Out = std::vector<std::pair<std::string, std::uint32_t>>;

TEST(TimeOrder, MergesStreamsByTimeThenArrival) {
  TimeOrder q;
  // Stream A (the samples' ring) then stream B (a side-band ring), each in
  // its own order.
  add(q, 30, "a30");
  add(q, 10, "a10");
  add(q, 20, "b20", 9);
  add(q, 10, "b10", 9);  // same time as a10, added after it
  EXPECT_EQ(take(q, ~std::uint64_t{0}), (Out{{"a10", 0}, {"b10", 9}, {"b20", 9}, {"a30", 0}}));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(q.buffer().empty());
}

TEST(TimeOrder, LaterRecordsWaitWithTheirBytes) {
  TimeOrder q;
  add(q, 50, "fifty");
  add(q, 5, "five");
  add(q, 70, "seventy");
  add(q, 20, "twenty");
  EXPECT_EQ(take(q, 20), (Out{{"five", 0}, {"twenty", 0}}));
  EXPECT_EQ(q.size(), 2u);
  // Compacted: only the waiting records' bytes are kept.
  EXPECT_EQ(q.buffer().size(), std::string("fiftyseventy").size());
  // Records of the next poll, older than one waiting.
  add(q, 60, "sixty");
  EXPECT_EQ(take(q, 60), (Out{{"fifty", 0}, {"sixty", 0}}));
  EXPECT_EQ(take(q, 60), Out{});
  EXPECT_EQ(take(q, 100), (Out{{"seventy", 0}}));
}

TEST(TimeOrder, OneEncodingQueuedTwiceIsKeptOnce) {
  TimeOrder q;
  add(q, 40, "late");
  std::vector<std::byte>& b = q.buffer();
  const std::size_t from = b.size();
  for (char ch : std::string("copy")) b.push_back(static_cast<std::byte>(ch));
  q.add(30, from, {1});
  q.add(30, from, {2});
  add(q, 35, "mid");
  // The pass takes none; the shared bytes survive the compaction once.
  EXPECT_EQ(take(q, 29), Out{});
  EXPECT_EQ(q.buffer().size(), std::string("latecopymid").size());
  EXPECT_EQ(take(q, 100), (Out{{"copy", 1}, {"copy", 2}, {"mid", 0}, {"late", 0}}));
}

TEST(TimeOrder, BytesAppendedWithoutAddAreDropped) {
  TimeOrder q;
  add(q, 2, "kept");
  // An encoding that failed half-way leaves bytes no record names.
  for (char ch : std::string("junk")) q.buffer().push_back(static_cast<std::byte>(ch));
  add(q, 9, "later");
  EXPECT_EQ(take(q, 5), (Out{{"kept", 0}}));
  EXPECT_EQ(q.buffer().size(), std::string("later").size());
  EXPECT_EQ(take(q, 9), (Out{{"later", 0}}));
}

}  // namespace
