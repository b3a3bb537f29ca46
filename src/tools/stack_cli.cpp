// SPDX-License-Identifier: MIT
// The `stack` subcommand's command line; the command itself is
// stack_command.cpp (tools::run_stack), wrapped here so that `--json` prints
// a JSON document also when it fails.
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

// Runs `f` with stderr going to a temporary file; gives that text back (and
// copies it to the real stderr) so that a failure can be put in the JSON.
template <typename F>
int with_stderr_captured(F&& f, std::string& captured) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  const int saved = tmp ? ::dup(STDERR_FILENO) : -1;
  if (saved < 0 || ::dup2(::fileno(tmp), STDERR_FILENO) < 0) {
    if (saved >= 0) ::close(saved);
    if (tmp) std::fclose(tmp);
    return f();
  }
  const int rc = f();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::rewind(tmp);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) captured.append(buf, n);
  std::fclose(tmp);
  std::fwrite(captured.data(), 1, captured.size(), stderr);
  return rc;
}

class StackCli final : public Command {
 public:
  std::string_view name() const override { return "stack"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("stack", "Print the stack of every thread of a running process (like eu-stack -p)");
    app_->add_option("pid", pid_, "Process ID")->required();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
    app_->add_flag("-v,--verbose", opt_.verbose, "Show each module's and frame's unwind source and why traces stop");
    app_->add_flag("-m,--module", opt_.modules, "Show each frame's module");
    app_->add_option("-n,--max-frames", opt_.max_frames, "Frames per thread at most")->capture_default_str();
    app_->add_flag("!--no-generate", opt_.generate, "Do not generate SFrame from .eh_frame for modules without it");
    app_->add_flag("--ignore-sframe", opt_.ignore_sframe, "Ignore the modules' own SFrame sections");
    app_->add_flag("!--no-fp-fallback", opt_.fp_fallback, "Do not step by frame pointers where SFrame is missing");
  }

  int run() override {
    long pid = 0;
    bool ok = !pid_.empty() && pid_.size() <= 10 && pid_[0] != '0';
    for (char c : pid_) ok = ok && c >= '0' && c <= '9';
    if (ok) pid = std::stol(pid_);
    if (!ok || pid <= 0 || pid > INT_MAX)
      throw UsageError(fmt::format("{}: not a process ID (a positive decimal number, as ps shows it)", pid_));
    if (!opt_.json) return run_stack(static_cast<pid_t>(pid), opt_);
    std::string err;
    const int rc = with_stderr_captured([&] { return run_stack(static_cast<pid_t>(pid), opt_); }, err);
    if (rc != 0) {
      // The last line on stderr says why, as "sframe: stack: WHY".
      while (!err.empty() && err.back() == '\n') err.pop_back();
      if (const auto nl = err.rfind('\n'); nl != std::string::npos) err.erase(0, nl + 1);
      if (err.rfind("sframe: ", 0) == 0) err.erase(0, 8);
      if (err.rfind("stack: ", 0) == 0) err.erase(0, 7);
      Json j = envelope("stack");
      j["pid"] = pid;
      j["error"] = err.empty() ? fmt::format("exit status {}", rc) : err;
      print(j.dump(2) + "\n");
    }
    return rc;
  }

 private:
  std::string pid_;
  StackOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_stack_command() { return std::make_unique<StackCli>(); }

}  // namespace sframe::tools
