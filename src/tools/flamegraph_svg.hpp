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

#include <cstddef>
#include <string>

#include "profile.hpp"

namespace sframe::tools::profile {

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
