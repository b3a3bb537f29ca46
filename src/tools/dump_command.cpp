// SPDX-License-Identifier: MIT
// `sframe dump`: SFrame sections as `objdump --sframe` prints them, or JSON.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>

#include "cli.hpp"
#include "commands.hpp"
#include "json_stream.hpp"
#include "objdump_text.hpp"

namespace sframe::tools {
namespace {

class DumpCommand final : public Command {
 public:
  std::string_view name() const override { return "dump"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("dump", "Print SFrame sections as `objdump --sframe` does");
    app_->add_option("files", opt_.files,
                     "ELF files, or raw sections (gen -o, merge -o) as RAW[@ADDRESS] (default: this program itself)");
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    if (opt_.files.empty()) opt_.files.push_back(self_path());
    if (opt_.json) return run_json();
    int rc = 0;
    for (const auto& path : opt_.files) {
      std::string out, why;
      auto l = load(path, load_options(&out), why);
      if (l && l->empty) {
        out += empty_section_text(l->data.name);
      } else if (l) {
        if (auto ok = append_section(out, l->section, l->raw ? std::string_view(".sframe") : l->data.name); !ok) {
          why = section_error_text(*l, opt_.section, ok.error());
          l.reset();
        }
      }
      print(out);
      if (!l) {
        complain(path, why);
        rc = 1;
      }
    }
    return rc;
  }

 private:
  LoadOptions load_options(std::string* text_prefix) const {
    LoadOptions lo;
    lo.section = opt_.section;
    lo.text_prefix = text_prefix;
    lo.allow_empty = true;
    return lo;
  }

  // The document is written as it is produced (a library's section gives
  // hundreds of megabytes of JSON): one file at a time, one FRE at a time.
  int run_json() {
    // Bad usage is found before the document begins (its own document,
    // exit 2), as in stat and verify.
    for (const auto& path : opt_.files) split_input(path);
    return run_per_file("dump", opt_.files, true, [&](const std::string& path, JsonStream* doc) {
      std::string why;
      auto l = load(path, load_options(nullptr), why);
      doc->begin_object();
      doc->member("file", path);
      if (l && l->empty) {
        doc->member("elf_format", std::string(bfd_target_name(l->file->info())));
        doc->member("empty_section", l->data.name);
      } else if (l) {
        if (l->raw) {
          doc->member("raw", raw_json(*l));
        } else {
          doc->member("elf_format", std::string(bfd_target_name(l->file->info())));
        }
        doc->key("section");
        if (auto ok = write_section_json(*doc, l->section, l->raw ? std::string_view(".sframe") : l->data.name);
            !ok) {
          why = section_error_text(*l, opt_.section, ok.error());
          l.reset();
        }
      }
      int rc = 0;
      if (!l) {
        doc->member("error", why);
        rc = 1;
        complain(path, why);
      }
      doc->end();
      return rc;
    });
  }

  DumpOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_dump_command() { return std::make_unique<DumpCommand>(); }

}  // namespace sframe::tools
