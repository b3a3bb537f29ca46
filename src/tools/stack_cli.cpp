// SPDX-License-Identifier: MIT
// The `stack` subcommand's command line; the command itself is
// stack_command.cpp (tools::run_stack, which prints a JSON document with
// --json also when it fails).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "stack_command.hpp"

namespace sframe::tools {
namespace {

class StackCli final : public Command {
 public:
  std::string_view name() const override { return "stack"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("stack", "Print the stack of every thread of a running process (like eu-stack -p)");
    app_->add_option("pid", pid_, "Process ID")->required();
    register_stack_options(*app_, opt_);
  }

  int run() override {
    long pid = 0;
    bool ok = !pid_.empty() && pid_.size() <= 10 && pid_[0] != '0';
    for (char c : pid_) ok = ok && c >= '0' && c <= '9';
    if (ok) pid = std::stol(pid_);
    if (!ok || pid <= 0 || pid > INT_MAX)
      throw UsageError(fmt::format("{}: not a process ID (a positive decimal number, as ps shows it)", pid_));
    // run_stack prints its own JSON document, also when it fails.
    return run_stack(static_cast<pid_t>(pid), opt_);
  }

 private:
  std::string pid_;
  StackOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_stack_command() { return std::make_unique<StackCli>(); }

}  // namespace sframe::tools
