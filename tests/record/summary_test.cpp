// SPDX-License-Identifier: MIT
// The recorder's summary from the BPF program's per-CPU counters
// (add_counters(), recorder.hpp): every count is the sum over the CPUs, and
// the walk's median is the lower bound of the power-of-two bucket holding
// the middle walk of all CPUs' histograms together (hand-counted here).
#include <gtest/gtest.h>

#include <vector>

#include "recorder.hpp"

namespace {

using sframe::record::add_counters;
using sframe::record::RecordSummary;

TEST(RecordSummary, CountersAreSummedOverTheCpus) {
  std::vector<sframe_record_counters> cpu(3, sframe_record_counters{});
  cpu[0].runs = 10, cpu[1].runs = 20, cpu[2].runs = 30;
  cpu[0].samples = 7, cpu[2].samples = 5;
  cpu[1].lost = 2;
  cpu[0].kernel_frames = 100, cpu[1].kernel_frames = 1;
  cpu[2].user_frames = 64;
  cpu[0].by_source[SFRAME_RECORD_SOURCES - 1] = 4, cpu[1].by_source[SFRAME_RECORD_SOURCES - 1] = 5;
  cpu[1].stops[SFRAME_RECORD_STOPS - 1] = 3, cpu[2].stops[0] = 9;
  cpu[0].no_process = 1, cpu[0].unmapped_pc = 2, cpu[2].walk_ns = 1000, cpu[1].walk_ns = 24;
  cpu[1].checks = 6, cpu[2].deferred = 8, cpu[0].copies_lost = 11;
  cpu[0].row_lookups = 50, cpu[1].row_lookups = 50, cpu[1].row_cache_hits = 90;
  RecordSummary s;
  s.runs = 1;  // added to, not replaced
  add_counters(cpu, s);
  EXPECT_EQ(s.runs, 61u);
  EXPECT_EQ(s.samples, 12u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.kernel_frames, 101u);
  EXPECT_EQ(s.user_frames, 64u);
  EXPECT_EQ(s.by_source[SFRAME_RECORD_SOURCES - 1], 9u);
  EXPECT_EQ(s.by_source[0], 0u);
  EXPECT_EQ(s.stops[SFRAME_RECORD_STOPS - 1], 3u);
  EXPECT_EQ(s.stops[0], 9u);
  EXPECT_EQ(s.no_process, 1u);
  EXPECT_EQ(s.unmapped_pc, 2u);
  EXPECT_EQ(s.walk_ns, 1024u);
  EXPECT_EQ(s.checks, 6u);
  EXPECT_EQ(s.deferred, 8u);
  EXPECT_EQ(s.copies_lost, 11u);
  EXPECT_EQ(s.row_lookups, 100u);
  EXPECT_EQ(s.row_cache_hits, 90u);
  EXPECT_EQ(s.walk_ns_median, 0u);  // no histogram counts
}

TEST(RecordSummary, MedianIsTheBucketOfTheMiddleWalkOfAllCpus) {
  std::vector<sframe_record_counters> cpu(2, sframe_record_counters{});
  // 6 walks: three in [1024, 2048) on CPU 0, two in [2048, 4096) and one
  // in [4096, 8192) on CPU 1. The 3rd of 6 lies in the first bucket.
  cpu[0].walk_ns_log2[10] = 3;
  cpu[1].walk_ns_log2[11] = 2;
  cpu[1].walk_ns_log2[12] = 1;
  RecordSummary s;
  add_counters(cpu, s);
  EXPECT_EQ(s.walk_ns_median, 1024u);
  // 7 walks (3, 3 and 1): the 4th lies in [2048, 4096).
  cpu[1].walk_ns_log2[11] = 3;
  RecordSummary t;
  add_counters(cpu, t);
  EXPECT_EQ(t.walk_ns_median, 2048u);
  // The last bucket.
  std::vector<sframe_record_counters> one(1, sframe_record_counters{});
  one[0].walk_ns_log2[31] = 1;
  RecordSummary u;
  add_counters(one, u);
  EXPECT_EQ(u.walk_ns_median, std::uint64_t{1} << 31);
}

}  // namespace
