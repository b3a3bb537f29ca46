// SPDX-License-Identifier: MIT
// `sframe lookup FILE PC...`: the function, FRE and CFA/RA/FP rules covering PCs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "sframe/lookup.hpp"
#include "sframe/symbols.hpp"

namespace sframe::tools {
namespace {

class LookupCommand final : public Command {
 public:
  std::string_view name() const override { return "lookup"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("lookup", "Show the function and CFA/RA/FP rules covering PCs");
    app_->add_option("file", opt_.file, "ELF file, or a raw section as RAW[@ADDRESS]")->required();
    app_->add_option("pcs", opt_.pcs, "PCs: hex as 0x..., or decimal")->required();
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    Json doc = envelope("lookup");
    doc["file"] = opt_.file;
    const auto failed = [&](const std::string& why) {
      complain(opt_.file, why);
      if (opt_.json) {
        doc["error"] = why;
        print(doc.dump(2) + "\n");
      }
      return 1;
    };
    std::string why;
    LoadOptions lo;
    lo.section = opt_.section;
    auto l = load(opt_.file, lo, why);
    if (!l) return failed(why);
    auto index = FdeIndex::build(l->section);
    if (!index) return failed(error_text(index.error()));
    const auto syms = l->file ? elf::SymbolTable::read(*l->file) : elf::SymbolTable();
    if (l->raw) {
      doc["raw"] = raw_json(*l);
      if (!opt_.json) fmt::print("{}: {}\n", l->path, raw_note(*l));
    }
    int rc = 0;
    doc["results"] = Json::array();
    for (const auto& text : opt_.pcs) {
      const auto pc = parse_number(text, why);
      Json r;
      r["pc"] = text;
      if (!pc) {
        rc = 1;
        r["found"] = false;
        r["reason"] = why;
        if (!opt_.json) fmt::print("{}\n", why);
        doc["results"].push_back(std::move(r));
        continue;
      }
      r["pc"] = hex(*pc);
      const auto sym = syms.find(*pc);
      const std::string name = sym ? syms.display_name(*sym->symbol) : std::string();
      const std::string where = sym ? fmt::format(" <{}+0x{:x}>", name, sym->offset) : std::string();
      auto m = index->find(*pc);
      r["found"] = m.has_value();
      if (sym) r["symbol"] = name;
      if (!m) {
        rc = 1;
        r["reason"] = std::string(describe(m.error().code));
        if (!opt_.json) fmt::print("0x{:x}{}: {}\n", *pc, where, describe(m.error().code));
        doc["results"].push_back(std::move(r));
        continue;
      }
      const Section& s = l->section;
      r["fde"] = fde_json(m->fde);
      r["fre"] = fre_json(s, m->fde, m->fre, m->row);
      if (!opt_.json) {
        fmt::print("0x{:x}{}: function 0x{:x}, size {} (FDE {}{}{})\n", *pc, where, m->fde.start_pc, m->fde.size,
                   m->fde.index, m->fde.pc_type == PcType::kMask ? ", PC mask" : "",
                   m->fde.fde_type == FdeType::kFlex ? ", flexible" : "");
        fmt::print("  FRE {} from +0x{:x}: {}\n", m->fre.index, m->fre.start_offset, rules_in_words(s, m->row));
      }
      doc["results"].push_back(std::move(r));
    }
    if (opt_.json) print(doc.dump(2) + "\n");
    return rc;
  }

 private:
  LookupOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_lookup_command() { return std::make_unique<LookupCommand>(); }

}  // namespace sframe::tools
