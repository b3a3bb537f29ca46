// `sframe stack PID`: the stacks of every thread of a live process.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace sframe::tools {

struct StackOptions {
  bool json = false;
  /// Say which unwind source each module and frame used, and why traces stop.
  bool verbose = false;
  /// Print each frame's module path.
  bool modules = false;
  /// Frames per thread at most.
  std::size_t max_frames = 256;
  /// Generate SFrame from .eh_frame for modules without it.
  bool generate = true;
  /// Ignore the modules' own SFrame sections (use generation / frame pointers).
  bool ignore_sframe = false;
  /// Step by frame pointers where no SFrame covers a PC.
  bool fp_fallback = true;
};

/// Runs the command; returns the exit status (0 ok, 1 error, 130 interrupted).
int run_stack(pid_t pid, const StackOptions& opt);

}  // namespace sframe::tools
