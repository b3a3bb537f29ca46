// SPDX-License-Identifier: MIT
// `sframe dump`: SFrame sections as `objdump --sframe` prints them, or JSON.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>

#include "cli.hpp"
#include "commands.hpp"
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
    int rc = 0;
    Json doc = envelope("dump");
    doc["files"] = Json::array();
    for (const auto& path : opt_.files) {
      std::string out, why;
      LoadOptions lo;
      lo.section = opt_.section;
      lo.text_prefix = &out;
      lo.allow_empty = true;
      auto l = load(path, lo, why);
      if (opt_.json) {
        Json f;
        f["file"] = path;
        if (l && l->empty) {
          f["elf_format"] = std::string(bfd_target_name(l->file->info()));
          f["empty_section"] = l->data.name;
        } else if (l) {
          if (l->raw) {
            f["raw"] = raw_json(*l);
          } else {
            f["elf_format"] = std::string(bfd_target_name(l->file->info()));
          }
          f["section"] = section_json(l->section, l->raw ? std::string_view(".sframe") : l->data.name);
        } else {
          f["error"] = why;
          rc = 1;
          complain(path, why);
        }
        doc["files"].push_back(std::move(f));
        continue;
      }
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
    if (opt_.json) print(doc.dump(2) + "\n");
    return rc;
  }

 private:
  DumpOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_dump_command() { return std::make_unique<DumpCommand>(); }

}  // namespace sframe::tools
