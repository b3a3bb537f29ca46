// SPDX-License-Identifier: MIT
// The profile writers' parts that have an independent truth at hand:
// Fixed2 against fmt's "{:.2f}" (the formatting it replaces), and
// folded_stacks() against stacks collapsed by hand, the samples added by
// frame and by frame id.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flamegraph_svg.hpp"
#include "profile.hpp"

namespace {

using sframe::tools::profile::Fixed2;
using sframe::tools::profile::Frame;
using sframe::tools::profile::Profile;
using sframe::tools::profile::Sample;

void expect_fixed2(double v) { EXPECT_EQ(Fixed2(v).view(), fmt::format("{:.2f}", v)) << std::hexfloat << v; }

TEST(Fixed2, AsFmtWritesIt) {
  // Ties (k/8 has an exact third decimal 5), zeros, the edges of the
  // integer path, subnormals, huge values, infinities and NaN.
  for (int k = -4000; k <= 4000; ++k) expect_fixed2(k / 8.0);
  for (double v : {0.0, -0.0, 0.005, 0.015, 0.025, 0.125, 5e-324, 1e-300, 0.00499999999999, 999999999999999.88,
                   1e15, 4503599627370495.5, 1e300, -1e300, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN()})
    expect_fixed2(v);
  // Values as the SVG makes them (shares of a plot width, percentages) and
  // arbitrary bit patterns.
  std::mt19937_64 rng(31);
  for (int i = 0; i < 200000; ++i) {
    const std::uint64_t total = rng() % 2000000 + 1, n = rng() % (total + 1);
    expect_fixed2(10 + double(n) / double(total) * 1180);
    expect_fixed2(100.0 * double(n) / double(total));
    expect_fixed2(std::bit_cast<double>(rng()));
  }
}

// A frame of the synthetic samples below: the name's view is what the
// Profile keys frames by, so each name lives in `names`.
Frame frame(const std::string& name, std::uint64_t pc) {
  Frame f;
  f.pc = pc;
  f.function = name;
  return f;
}

// The samples go in by their frames (Profile::add) or, `by_id`, by the
// ids Profile::frame() gives their frames (Profile::add_frames): the same
// stacks either way.
class FoldedStacks : public testing::TestWithParam<bool> {};

TEST_P(FoldedStacks, AsStackcollapseWritesThem) {
  const bool by_id = GetParam();
  const std::vector<std::string> names = {"main", "work;inner", "leaf", "", "bad\xff", "y"};
  Profile p;
  const auto add = [&](std::uint32_t pid, std::string_view comm, std::vector<Frame> frames) {
    Sample s;
    s.pid = s.tid = pid;
    s.comm = comm;
    s.event = "cpu-clock";
    s.period = 1000;
    if (by_id) {
      p.add_frames(s, frames.size(), [&](std::size_t i) { return p.frame(frames[i]); });
      return;
    }
    s.frames = frames;  // innermost first
    p.add(s);
  };
  Frame unknown;  // no name at all: "[unknown]"
  unknown.pc = 0x999;
  add(1, "my prog", {frame(names[2], 0x30), frame(names[1], 0x20), frame(names[0], 0x10)});
  // Another pid and another PC in "leaf": the same folded line.
  add(2, "my prog", {frame(names[2], 0x31), frame(names[1], 0x20), frame(names[0], 0x10)});
  add(1, "my prog", {unknown, frame(names[0], 0x10)});
  add(1, "my prog", {frame(names[3], 0x40), frame(names[0], 0x10)});  // an empty name stays empty
  add(3, "x;y", {frame(names[4], 0x50)});                             // a comm with ';', bytes not UTF-8
  add(4, "x", {frame(names[4], 0x50), frame(names[5], 0x60)});  // the line above, once collapsed
  add(5, "idle", {});                                    // no frames: the comm alone
  EXPECT_EQ(sframe::tools::profile::folded_stacks(p),
            "idle 1\n"
            "my_prog;main; 1\n"
            "my_prog;main;[unknown] 1\n"
            "my_prog;main;work:inner;leaf 2\n"
            "x;y;bad\xff 2\n");
  // Each sample counted once, at the node its stack ends in.
  std::uint64_t counted = 0;
  for (const auto& n : p.nodes()) counted += n.count;
  EXPECT_EQ(counted, 7u);
  EXPECT_EQ(p.samples(), 7u);
}

INSTANTIATE_TEST_SUITE_P(ByFrameOrById, FoldedStacks, testing::Bool());

}  // namespace
