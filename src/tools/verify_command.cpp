// SPDX-License-Identifier: MIT
// `sframe verify`: every rule of the specification, then the same recovery
// rules as the file's DWARF CFI.
#include <elf.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "sframe/cfi.hpp"
#include "sframe/symbols.hpp"

namespace sframe::tools {
namespace {

std::string where(const elf::SymbolTable& syms, std::uint64_t pc) {
  const auto s = syms.find(pc);
  return s ? fmt::format("{}+0x{:x}", syms.display_name(*s->symbol), s->offset) : std::string("?");
}

// Replaces the SFrame section of `l` by the raw section RAW[@ADDRESS]
// (default address: the file's own section's).
bool use_raw(Loaded& l, const std::string& arg, std::string& why) {
  const InputName in = split_input(arg);
  const auto kind = identify(in.path, why);
  if (!kind) {
    why = fmt::format("{}: {}", in.path, why);
    return false;
  }
  if (*kind != FileKind::kRaw) {
    why = fmt::format("{}: --raw takes a raw SFrame section (gen -o, merge -o), not an ELF file", in.path);
    return false;
  }
  auto bytes = read_all(in.path, why);
  if (!bytes) {
    why = fmt::format("{}: {}", in.path, why);
    return false;
  }
  l.data.owned = std::move(*bytes);
  l.data.bytes = l.data.owned;
  if (in.address) l.data.address = *in.address;
  l.address_given = true;  // the file's own section address is not "assumed 0"
  l.data.name = in.path;
  auto sec = Section::parse(l.data.bytes, l.data.address);
  Expected<void> ok = sec ? validate(*sec, Strictness::kStrict) : Expected<void>(Unexpected{sec.error()});
  if (!ok) {
    why = fmt::format("{}: {}", in.path, error_text(ok.error()));
    return false;
  }
  l.section = *sec;
  return true;
}

class VerifyCommand final : public Command {
 public:
  std::string_view name() const override { return "verify"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("verify", "Check every rule of the SFrame specification, then against DWARF CFI");
    app_->add_option("files", opt_.files, "ELF files, or raw sections as RAW[@ADDRESS]")->required();
    app_->add_option("--raw", opt_.raw, "Check this raw section (RAW[@ADDRESS]) instead of the file's own");
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    if (!opt_.raw.empty()) split_input(opt_.raw);  // a bad @ADDRESS is bad usage
    int rc = 0;
    Json doc = envelope("verify");
    doc["files"] = Json::array();
    for (const auto& path : opt_.files) {
      std::string why;
      std::optional<Loaded> l;
      if (opt_.raw.empty()) {
        LoadOptions lo;
        lo.section = opt_.section;
        lo.strictness = Strictness::kStrict;
        lo.for_cfi = true;
        l = load(path, lo, why);
      } else if (auto file = open_elf(path, true, why); file) {
        // The file need not have SFrame of its own (e.g. `gen` output for it).
        Loaded own;
        own.path = path;
        if (auto s = file->sframe_section(opt_.section)) own.data.address = s->address;
        own.file.emplace(std::move(*file));
        l.emplace(std::move(own));
        if (!use_raw(*l, opt_.raw, why)) l.reset();
      }
      Json f;
      f["file"] = path;
      f["ok"] = l.has_value();
      if (!l) {
        rc = 1;
        f["error"] = why;
        if (!opt_.json) complain(path, why);
        doc["files"].push_back(std::move(f));
        continue;
      }
      if (l->raw) f["raw"] = raw_json(*l);
      f["version"] = static_cast<int>(l->section.version());
      f["num_fdes"] = l->section.num_fdes();
      f["num_fres"] = l->section.header().num_fres;
      // The semantic half: the same recovery rules as the file's DWARF CFI.
      // Its verdict comes first on the verdict line, so that line never says
      // "ok" about a file that fails.
      DwarfVerdict d;
      if (l->file) {
        d = verify_against_dwarf(*l->file, l->section, f);
      } else {
        const std::string reason = "a raw section has no DWARF CFI (verify ELF --raw RAW@ADDRESS compares it)";
        d.summary = "DWARF: not compared: " + reason;
        f["dwarf"] = {{"compared", false}, {"reason", reason}};
      }
      if (d.failed) {
        rc = 1;
        f["ok"] = false;
        f["error"] = d.error;
      }
      if (!opt_.json) {
        fmt::print("{}: {}; {}\n", path, d.failed ? "FAILED: format valid" : "format ok", d.summary);
        fmt::print("  {}: SFrame v{}, {} FDEs, {} FREs{}\n", l->data.name, static_cast<int>(l->section.version()),
                   l->section.num_fdes(), l->section.header().num_fres, l->raw ? "; " + raw_note(*l) : "");
        print(d.details);
        if (d.failed) complain(path, d.error);
      }
      doc["files"].push_back(std::move(f));
    }
    if (opt_.json) print(doc.dump(2) + "\n");
    return rc;
  }

 private:
  VerifyOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_verify_command() { return std::make_unique<VerifyCommand>(); }

DwarfVerdict verify_against_dwarf(const elf::ElfFile& file, const Section& s, Json& j) {
  DwarfVerdict v;
  // Not comparing is acceptable only where there is nothing to compare
  // with; a comparison that cannot run on a file with CFI is a failure.
  const auto not_compared = [&](const std::string& reason, bool failure) {
    v.summary = "DWARF: not compared: " + reason;
    v.failed = failure;
    if (failure) v.error = "DWARF CFI not compared: " + reason;
    j["dwarf"] = {{"compared", false}, {"reason", reason}};
    return v;
  };
  if (!cfi::abi_of(file.info()))
    return not_compared(fmt::format("no SFrame ABI for ELF machine {}", file.info().machine), false);
  const auto eh = file.section_bytes(".eh_frame");
  const auto debug = file.section_bytes(".debug_frame");
  if ((!eh || eh->bytes.size() <= 4) && (!debug || debug->bytes.size() <= 4))  // 4 bytes: only the terminator
    return not_compared("no .eh_frame FDEs and no .debug_frame", false);
  auto cmp = cfi::compare(file, s);
  if (!cmp) {
    const std::string why =
        cmp.error().code == Errc::kElfError && !file.relocated() ? why_no_cfi(file) : std::string();
    return not_compared("cannot read the DWARF CFI: " + (why.empty() ? error_text(cmp.error()) : why), true);
  }
  const auto syms = elf::SymbolTable::read(file);
  Json mism = Json::array(), miss = Json::array();
  for (const auto& m : cmp->mismatches) {
    const std::string sf = rules_in_words(s, m.sframe), dw = rules_in_words(s, m.dwarf);
    mism.push_back({{"pc", hex(m.pc)}, {"function", where(syms, m.pc)}, {"what", std::string(m.what)},
                    {"sframe", sf}, {"dwarf", dw}});
    v.details += fmt::format("  mismatch at 0x{:x} <{}>: {} differs\n    SFrame: {}\n    DWARF:  {}\n", m.pc,
                             where(syms, m.pc), m.what, sf, dw);
  }
  for (const auto& m : cmp->missing) {
    miss.push_back({{"start", hex(m.start)}, {"end", hex(m.end)}, {"function", where(syms, m.start)},
                    {"reason", std::string(cfi::describe(m.reason))}});
    v.details += fmt::format("  not in SFrame: 0x{:x}-0x{:x} <{}>{}\n", m.start, m.end, where(syms, m.start),
                             m.reason == cfi::Reason::kNone ? "" : fmt::format(": {}", cfi::describe(m.reason)));
  }
  j["dwarf"] = {{"compared", true},
                {"functions_checked", cmp->functions_checked},
                {"pcs_checked", cmp->pcs_checked},
                {"mismatches", mism},
                {"missing", miss}};
  v.summary = fmt::format("DWARF: {} functions, {} PCs, {} mismatches", cmp->functions_checked, cmp->pcs_checked,
                          cmp->mismatches.size());
  if (!cmp->mismatches.empty()) {
    v.failed = true;
    v.error = "SFrame and DWARF CFI disagree";
  } else if (cmp->unreadable_fdes != 0) {
    // Part of the CFI was never compared: not a verdict on the whole file.
    v.failed = true;
    v.error = fmt::format("libdw could not read {} FDEs of the DWARF CFI", cmp->unreadable_fdes);
    v.details += "  " + v.error + "\n";
  } else if (cmp->pcs_checked == 0 && cmp->functions_checked > 0 && s.num_fdes() > 0) {
    // Both sides describe code, yet at no common PC: the section was read
    // at the wrong address (e.g. a raw section given @ another address).
    v.failed = true;
    v.error = "no PC of the DWARF CFI is in the SFrame section (wrong section address?)";
    v.details += "  " + v.error + "\n";
  }
  return v;
}

}  // namespace sframe::tools
