// SPDX-License-Identifier: MIT
// `sframe perf script` as a function (perf_command.cpp), for the commands
// that end in its outputs: `sframe perf script` itself and `sframe record`
// (--folded, --pprof, --flamegraph of what it recorded).
#pragma once

#include <string>

namespace sframe::tools {

struct PerfScriptOptions {
  std::string input = "perf.data";
  std::string fields;
  std::string perf_compat = "7.2";
  bool folded = false;
  bool json = false;
  std::string pprof;
  std::string flamegraph;
  /// Where --folded writes ("-": standard output); a file is written to a
  /// temporary file and renamed when complete.
  std::string folded_output = "-";
  /// Print the summary line on stderr.
  bool summary = true;
  /// Without --folded and --json: print perf script's text (false: only
  /// --pprof and --flamegraph are written).
  bool text = true;
  /// The command named in the profiles' titles and comments (empty:
  /// "sframe perf script -i INPUT").
  std::string command_line;
};

/// Runs `sframe perf script` with `opt`; the exit status (errors are
/// printed on stderr, or as a JSON document with --json).
int run_perf_script(const PerfScriptOptions& opt);

}  // namespace sframe::tools
