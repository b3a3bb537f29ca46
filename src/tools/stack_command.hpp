// SPDX-License-Identifier: MIT
// `sframe stack PID`: the stacks of every thread of a live process.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace CLI {
class App;
}

namespace sframe::tools {

struct StackOptions {
  bool json = false;
  /// Say which unwind source each module and frame used, and why traces stop.
  bool verbose = false;
  /// Print each frame's module path.
  bool modules = false;
  /// Frames per thread at most (with `inlines`, inline frames count too, as
  /// in eu-stack); 0: unlimited. A thread with more is announced on stderr
  /// and the exit status is 1.
  std::size_t max_frames = 256;
  /// Generate SFrame from .eh_frame for modules without it.
  bool generate = true;
  /// Ignore the modules' own SFrame sections (use generation / frame pointers).
  bool ignore_sframe = false;
  /// Step by frame pointers where no SFrame covers a PC.
  bool fp_fallback = true;
  /// Show each frame's source file:line:column (DWARF line tables; eu-stack -s).
  bool source = false;
  /// Show the functions inlined at each frame's PC as frames of their own,
  /// and name frames as DWARF does (eu-stack -i, which implies -d).
  bool inlines = false;
};

/// Registers the options of `sframe stack` (all but the PID) on its
/// subcommand `stack_cmd`, storing them in `opt` (which must outlive parsing).
void register_stack_options(CLI::App& stack_cmd, StackOptions& opt);

/// Runs the command; returns the exit status (0 ok, 1 error or a stack
/// truncated by `max_frames`, 130 interrupted).
int run_stack(pid_t pid, const StackOptions& opt);

}  // namespace sframe::tools
