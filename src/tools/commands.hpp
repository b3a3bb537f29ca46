// SPDX-License-Identifier: MIT
// The subcommands of the `sframe` tool, one file each (dump_command.cpp,
// ...): an options struct, register_on() adds the subcommand and its options
// to the CLI11 app, run() runs it and returns the exit status. main.cpp only
// wires them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "render.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/section.hpp"

namespace CLI {
class App;
}

namespace sframe::tools {

class Command {
 public:
  virtual ~Command();
  virtual std::string_view name() const = 0;
  /// Adds the subcommand to `parent`.
  virtual void register_on(CLI::App& parent) = 0;
  /// Runs it (after parsing); the exit status. Bad usage throws UsageError.
  virtual int run() = 0;
  /// --json was given.
  virtual bool json() const = 0;
  /// The subcommand registered (null before register_on).
  CLI::App* app() const { return app_; }

 protected:
  CLI::App* app_ = nullptr;
};

/// Every subcommand, in the order `sframe --help` lists them.
std::vector<std::unique_ptr<Command>> all_commands();

struct DumpOptions {
  std::vector<std::string> files;  // none: the sframe binary itself
  std::string section = ".sframe";
  bool json = false;
};
struct VerifyOptions {
  std::vector<std::string> files;
  std::string section = ".sframe";
  std::string raw;  // RAW[@ADDRESS] checked against each file's DWARF
  std::string consumer;  // kernel, glibc, libsframe, all; empty: only the summary line
  bool json = false;
};
struct LookupOptions {
  std::string file;
  std::vector<std::string> pcs;
  std::string section = ".sframe";
  bool json = false;
};
struct StatOptions {
  std::vector<std::string> files;
  std::string section = ".sframe";
  bool json = false;
};
struct MergeOptions {
  std::vector<std::string> inputs;  // ELF[@ADDRESS] or RAW[@ADDRESS]
  std::string output;
  std::string address = "0";
  int version = 3;
  std::string section = ".sframe";
  bool json = false;
  SizeFlags size;
};
struct GenOptions {
  std::string file;                // the file being converted
  std::vector<std::string> files;  // FILE... as given
  std::string output_dir;          // with several FILEs: -o DIR
  int version = 3;
  std::string output;      // raw section file; empty: none
  std::string elf_output;  // copy of the input with .sframe added; empty: none
  bool in_place = false;   // the --elf copy replaces FILE (atomically)
  bool loadable = false;   // the --elf copy maps .sframe: new PT_LOAD + PT_GNU_SFRAME
  bool repair = false;     // regenerate a file's PT_GNU_SFRAME section in its space
  std::string address;     // section address; empty: the file's .sframe address, else 0
  bool json = false;
  bool compare_libdw = false;  // also compare our CFI reader's rows with libdw's
  SizeFlags size;              // --optimize-size, --for
};

/// Why a file has no CFI gen can read, in words; empty if none of these.
std::string why_no_cfi(const elf::ElfFile& f);

std::unique_ptr<Command> make_dump_command();
std::unique_ptr<Command> make_verify_command();
std::unique_ptr<Command> make_lookup_command();
std::unique_ptr<Command> make_stat_command();
std::unique_ptr<Command> make_gen_command();
std::unique_ptr<Command> make_convert_command();
std::unique_ptr<Command> make_merge_command();
std::unique_ptr<Command> make_stack_command();
/// `sframe perf script` (perf_command.cpp).
std::unique_ptr<Command> make_perf_command();
/// `sframe record` (record_command.cpp).
std::unique_ptr<Command> make_record_command();

}  // namespace sframe::tools
