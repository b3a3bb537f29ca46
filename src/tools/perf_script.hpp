// SPDX-License-Identifier: MIT
// `sframe perf script` as a function (perf_command.cpp), for the commands
// that end in its outputs: `sframe perf script` itself and `sframe record`
// (--folded, --pprof, --flamegraph of what it recorded).
#pragma once

#include <memory>
#include <string>

#include "perf_data.hpp"
#include "perf_unwind.hpp"

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
  /// Where the session opens mapped files: shared with another session of
  /// the same recording (`sframe record`'s recorder); null: its own.
  std::shared_ptr<perf::FileTable> files;
};

/// Runs `sframe perf script` with `opt`; the exit status (errors are
/// printed on stderr, or as a JSON document with --json).
int run_perf_script(const PerfScriptOptions& opt);

/// `sframe perf script` fed record by record instead of reading
/// `input` (which only names the records in messages): `sframe record`'s
/// --folded, --pprof and --flamegraph, converted as the recording is
/// written, with no perf.data read back. Each call returns an exit status
/// (0: go on; errors are printed on stderr).
class PerfScriptStream {
 public:
  explicit PerfScriptStream(const PerfScriptOptions& opt);
  ~PerfScriptStream();
  PerfScriptStream(const PerfScriptStream&) = delete;
  PerfScriptStream& operator=(const PerfScriptStream&) = delete;
  /// Once, before any record: the file's header as a reader would find it.
  int begin(const perf::FileInfo& info);
  /// One record, in the file's order (the views live for the call only).
  void take(const perf::Record& rec);
  /// After the last record: writes the outputs.
  int end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sframe::tools
