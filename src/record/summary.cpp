// SPDX-License-Identifier: MIT
// sframepp: the recorder's summary from the BPF program's counters (see
// recorder.hpp).
#include <array>
#include <iterator>
#include <tuple>
#include <type_traits>

#include "recorder.hpp"

namespace sframe::record {

const char* stop_name(std::size_t i) noexcept {
  // enum sframe_record_stop's order.
  static const char* const kNames[] = {"outermost frame", "unreadable stack", "CFA not increasing", "depth limit",
                                       "no user stack",   "no unwind information", "return address 0", "bad rule"};
  static_assert(std::size(kNames) == SFRAME_RECORD_STOPS);
  return i < std::size(kNames) ? kNames[i] : "?";
}

void add_counters(std::span<const sframe_record_counters> per_cpu, RecordSummary& sum) {
  constexpr std::size_t kBuckets = std::extent_v<decltype(sframe_record_counters::walk_ns_log2)>;
  static_assert(std::extent_v<decltype(sframe_record_counters::by_source)> ==
                std::tuple_size_v<decltype(RecordSummary::by_source)>);
  static_assert(std::extent_v<decltype(sframe_record_counters::stops)> ==
                std::tuple_size_v<decltype(RecordSummary::stops)>);
  std::array<std::uint64_t, kBuckets> hist{};
  for (const sframe_record_counters& c : per_cpu) {
    sum.runs += c.runs;
    sum.samples += c.samples;
    sum.lost += c.lost;
    sum.kernel_frames += c.kernel_frames;
    sum.user_frames += c.user_frames;
    for (std::size_t i = 0; i < sum.by_source.size(); ++i) sum.by_source[i] += c.by_source[i];
    sum.no_process += c.no_process;
    sum.unmapped_pc += c.unmapped_pc;
    for (std::size_t i = 0; i < sum.stops.size(); ++i) sum.stops[i] += c.stops[i];
    sum.walk_ns += c.walk_ns;
    sum.checks += c.checks;
    sum.deferred += c.deferred;
    sum.copies_lost += c.copies_lost;
    sum.row_lookups += c.row_lookups;
    sum.row_cache_hits += c.row_cache_hits;
    for (std::size_t i = 0; i < kBuckets; ++i) hist[i] += c.walk_ns_log2[i];
  }
  std::uint64_t total = 0, seen = 0;
  for (std::uint64_t h : hist) total += h;
  for (std::size_t i = 0; i < kBuckets && total; ++i) {
    seen += hist[i];
    if (2 * seen >= total) {
      sum.walk_ns_median = std::uint64_t{1} << i;
      break;
    }
  }
}

}  // namespace sframe::record
