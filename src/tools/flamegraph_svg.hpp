// SPDX-License-Identifier: MIT
// A Profile as a self-contained SVG flame graph (no network, no external
// script): a frame per distinct call path (comm, then the functions
// outermost first, as `--folded` collapses them), as wide as its share of
// the samples; a tooltip (<title>) per frame with its samples and
// percentage; click to zoom; a search box; a title with the command and the
// sample count. It opens in any browser from a file.
//
// Scripted hooks, for viewers and tests without a pointer: the URL fragment
// "#zoom=ID" zooms to the frame with element id ID ("f0" is the root),
// "#zoom-name=NAME" (URL-encoded) to the widest frame named NAME, and
// "#search=REGEX" highlights the frames whose names match.
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "profile.hpp"

namespace sframe::tools::profile {

/// A number with two decimals, as fmt's "{:.2f}" writes it (the SVG's
/// coordinates and shares): the exact binary value rounded, ties to even.
/// fmt's fixed-precision path was most of the writer's time; this one works
/// in integers: v = m * 2^e with a 53-bit m, so v * 100 is m * 100 (under
/// 2^60) shifted by e, and the bits shifted out decide the rounding (no
/// floating-point rounding function: nearbyintl's save and restore of the
/// x87 state showed in profiles). Other values (negative, huge, not finite)
/// go through std::to_chars, which rounds the same way.
class Fixed2 {
 public:
  /// Writes `v`.
  explicit Fixed2(double v) {
    if (std::signbit(v) || !(v < 1e15)) {
      end_ = std::to_chars(buf_, buf_ + sizeof buf_, v, std::chars_format::fixed, 2).ptr;
      return;
    }
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const auto biased = static_cast<int>(bits >> 52);  // the sign bit is clear
    const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
    const std::uint64_t m = biased == 0 ? fraction : fraction | std::uint64_t{1} << 52;
    const int e = biased == 0 ? -1074 : biased - 1075;
    const std::uint64_t scaled = m * 100;
    std::uint64_t cents = 0;
    if (e >= 0) {
      cents = scaled << e;  // v < 1e15: fits
    } else if (e > -61) {  // else v * 100 is under 2^60 * 2^-61: rounds to 0
      const int s = -e;
      cents = scaled >> s;
      const std::uint64_t rest = scaled & ((std::uint64_t{1} << s) - 1), half = std::uint64_t{1} << (s - 1);
      if (rest > half || (rest == half && cents % 2 == 1)) ++cents;
    }
    end_ = std::to_chars(buf_, buf_ + sizeof buf_ - 3, cents / 100).ptr;
    *end_++ = '.';
    *end_++ = static_cast<char>('0' + cents / 10 % 10);
    *end_++ = static_cast<char>('0' + cents % 10);
  }
  /// The text.
  std::string_view view() const { return {buf_, static_cast<std::size_t>(end_ - buf_)}; }

 private:
  // The widest double with two decimals: a sign, 309 digits, the point and
  // two decimals.
  char buf_[320];
  char* end_;
};

/// How a flame graph is drawn.
struct FlameGraphOptions {
  /// The title line's text before the sample count (e.g. the command).
  std::string title = "Flame graph";
  /// Image width, pixels (at least 200).
  unsigned width = 1200;
  /// Frames narrower than this (pixels) are not drawn: their samples stay in
  /// their caller's width, as flamegraph.pl's --minwidth does.
  double min_width = 0.1;
  /// A size budget, bytes: while the frames drawn would exceed it (as
  /// estimated before writing), min_width is doubled. Keeps a recording of
  /// a million distinct stacks a few megabytes.
  std::size_t max_bytes = std::size_t{4} << 20;
};

/// The SVG document of `p`'s samples (all events together, as --folded).
/// The root element carries data-total (samples), data-min-width (the
/// threshold used, pixels), data-plot-x and data-plot-width (the frames'
/// area, pixels); each frame is a <g class="f" id="fN"> with data-n
/// (samples), data-x (samples before it at its depth) and data-d (depth,
/// root 0), holding <title>NAME (N samples, P%)</title>, a <rect> and a
/// <text> label. Names are XML-escaped; bytes that are not UTF-8 or not
/// XML characters are written as U+FFFD.
std::string flamegraph_svg(const Profile& p, const FlameGraphOptions& opt = {});

}  // namespace sframe::tools::profile
