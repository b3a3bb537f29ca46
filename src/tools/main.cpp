// SPDX-License-Identifier: MIT
// The `sframe` command-line tool. Each subcommand lives in its own file
// (commands.hpp); this only wires them to the command line.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli.hpp"
#include "commands.hpp"

#ifndef SFRAMEPP_VERSION
#define SFRAMEPP_VERSION "unknown"
#endif

namespace sframe::tools {

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> c;
  c.push_back(make_dump_command());
  c.push_back(make_verify_command());
  c.push_back(make_lookup_command());
  c.push_back(make_stat_command());
  c.push_back(make_merge_command());
  c.push_back(make_gen_command());
  c.push_back(make_convert_command());
  c.push_back(make_stack_command());
  c.push_back(make_perf_command());
  c.push_back(make_record_command());
  return c;
}

}  // namespace sframe::tools

namespace {

using namespace sframe::tools;

constexpr int kUsageStatus = 2;

// Bad usage: one line on stderr (and the JSON error document with --json,
// when the command is known); exit status 2.
int usage(const Command* cmd, bool json, const std::string& what) {
  const std::string line = what.substr(0, what.find('\n'));
  std::fflush(stdout);
  if (cmd) {
    fmt::print(stderr, "sframe: {}: {} (see sframe {} --help)\n", cmd->name(), line, cmd->name());
  } else {
    fmt::print(stderr, "sframe: {} (see sframe --help)\n", line);
  }
  if (json && cmd) {
    Json j = envelope(cmd->name());
    j["error"] = line;
    print(json_text(j) + "\n");
  }
  return kUsageStatus;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sframe: decode, validate, look up and dump SFrame stack-trace sections"};
  app.set_version_flag("--version", "sframe (sframepp) " SFRAMEPP_VERSION);
  app.require_subcommand(1);
  auto commands = all_commands();
  // Only the command named first, when one is: building every other
  // command's options is a sizeable part of a bare start. Else all, for
  // `sframe --help` and the messages of bad usage.
  Command* first = nullptr;
  for (auto& c : commands)
    if (argc > 1 && c->name() == argv[1]) first = c.get();
  for (auto& c : commands)
    if (!first || c.get() == first) c->register_on(app);

  // Before parsing: the command named on the line, and whether --json is
  // asked, for the messages of bad usage.
  const Command* named = nullptr;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    json |= std::strcmp(argv[i], "--json") == 0;
    for (auto& c : commands)
      if (!named && c->name() == argv[i]) named = c.get();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (argc > 1 && argv[1][0] != '-' && !named) {
      std::string names;
      for (auto& c : commands) names += (names.empty() ? "" : ", ") + std::string(c->name());
      return usage(nullptr, false, fmt::format("{}: unknown command (commands: {})", argv[1], names));
    }
    if (argc == 1) return usage(nullptr, false, "no command given");
    if (!named) return usage(nullptr, false, fmt::format("{}: unknown option, or no command given", argv[1]));
    return usage(named, json, e.what());
  }
  for (auto& c : commands) {
    if (!c->app() || !c->app()->parsed()) continue;
    try {
      return c->run();
    } catch (const UsageError& e) {
      return usage(c.get(), c->json(), e.what());
    }
  }
  return kUsageStatus;
}
