// SPDX-License-Identifier: MIT
// `sframe perf inject` (perf_inject.cpp), a subcommand of `sframe perf`.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace sframe::tools {

struct PerfInjectOptions {
  /// Defaults as perf inject's: standard input and output.
  std::string input = "-";
  std::string output = "-";
};

/// Adds `inject` to the `perf` subcommand; options land in `opt`.
CLI::App* register_perf_inject(CLI::App& perf, PerfInjectOptions& opt);
/// Runs it: 0, or 1 with one line on stderr naming the file and what is wrong.
int run_perf_inject(const PerfInjectOptions& opt);

}  // namespace sframe::tools
