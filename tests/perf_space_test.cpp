// SPDX-License-Identifier: MIT
// A process's mappings across an exec (src/perf/address_space.hpp): the
// old image's stay while execve() has not returned (a sample there still
// names the old image's frame, as both perfs print it), and go at the first
// sample whose user PC lies in a mapping made since the exec. The perf
// tests (perf_script_exec) see the first half against both perfs; the
// second half leaves the printed output as it is and is checked here.
#include <gtest/gtest.h>

#include "address_space.hpp"

namespace {

using sframe::perf::detail::MapEntry;
using sframe::perf::detail::Space;

MapEntry mapping(std::uint64_t start, std::uint64_t end) {
  MapEntry e;
  e.start = start;
  e.end = end;
  return e;
}

TEST(PerfSpace, OldImageStaysUntilASampleRunsInTheNewOne) {
  Space s;
  s.insert(mapping(0x400000, 0x401000), true);              // the old image
  s.insert(mapping(0x7f0000000000, 0x7f0000100000), true);  // its libc
  s.mark_exec();                                            // COMM with exec
  s.insert(mapping(0x500000, 0x501000), true);              // the new image
  ASSERT_NE(s.find(0x400800), nullptr);
  // Inside execve: the user PC is still the old libc's.
  s.settle_exec(0x7f0000000100);
  EXPECT_NE(s.find(0x400800), nullptr);
  EXPECT_NE(s.find(0x7f0000000100), nullptr);
  // A PC in no mapping settles nothing.
  s.settle_exec(0x600000);
  EXPECT_NE(s.find(0x400800), nullptr);
  // The new image runs: the old one's mappings are gone, the new one's kept.
  s.settle_exec(0x500100);
  EXPECT_EQ(s.find(0x400800), nullptr);
  EXPECT_EQ(s.find(0x7f0000000100), nullptr);
  EXPECT_NE(s.find(0x500100), nullptr);
  EXPECT_EQ(s.maps.size(), 1u);
  // A later exec starts over; the mapping settled before is now the old one.
  s.mark_exec();
  s.insert(mapping(0x600000, 0x601000), true);
  s.settle_exec(0x600010);
  EXPECT_EQ(s.find(0x500100), nullptr);
  EXPECT_NE(s.find(0x600010), nullptr);
}

TEST(PerfSpace, ANewMappingOverAnOldOneIsNew) {
  // The new image mapped where the old one was: a sample there is the new
  // image running (MMAP2 after the exec replaced those pages).
  Space s;
  s.insert(mapping(0x400000, 0x402000), true);
  s.mark_exec();
  s.insert(mapping(0x401000, 0x403000), true);
  s.settle_exec(0x401800);
  EXPECT_EQ(s.find(0x400800), nullptr);
  ASSERT_NE(s.find(0x402800), nullptr);
  EXPECT_EQ(s.find(0x402800)->start, 0x401000u);
}

}  // namespace
