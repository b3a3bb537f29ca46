// SPDX-License-Identifier: MIT
// `sframe convert`: a file's SFrame section rewritten in another version,
// inside the section's existing space, or else in a new segment.
#include <elf.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <optional>

#include "cli.hpp"
#include "commands.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::tools {
namespace {

struct ConvertOptions {
  std::string file;
  int version = 3;
  std::string byte_order;  // little, big; empty: the input's
  std::string output;
  bool in_place = false;
  std::string section = ".sframe";
  bool json = false;
  SizeFlags size;
};

std::string abi_name(Abi a) {
  switch (a) {
    case Abi::kAarch64Big: return "aarch64 (big-endian)";
    case Abi::kAarch64Little: return "aarch64 (little-endian)";
    case Abi::kAmd64Little: return "amd64 (little-endian)";
    case Abi::kS390xBig: return "s390x (big-endian)";
  }
  return "unknown";
}

class ConvertCommand final : public Command {
 public:
  std::string_view name() const override { return "convert"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("convert",
                                 "Rewrite a file's SFrame section in another version, inside its existing space "
                                 "(else in a new PT_LOAD)");
    app_->add_option("file", opt_.file, "ELF file (linked), or a raw section")->required();
    app_->add_option("--format-version", opt_.version, "SFrame version to write")
        ->check(CLI::IsMember({2, 3}))
        ->capture_default_str();
    app_->add_option("--byte-order", opt_.byte_order,
                     "Byte order to write (default: the input's); the SFrame ABI fixes it (spec §2.2.1)")
        ->check(CLI::IsMember({"little", "big"}));
    auto* o = app_->add_option("-o,--output", opt_.output, "Write the converted file here");
    auto* ip = app_->add_flag("--in-place", opt_.in_place,
                              "Replace FILE by the converted copy (atomically: a failure leaves FILE as it was)");
    o->excludes(ip);
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print the summary as JSON");
    auto* optimize = app_->add_flag("--optimize-size", opt_.size.optimize, kOptimizeSizeHelp);
    app_->add_option("--for", opt_.size.consumers, kForHelp)->needs(optimize);
  }

  int run() override {
    const int rc = convert();
    if (rc != 0 && opt_.json) {
      Json j = envelope("convert");
      j["file"] = opt_.file;
      j["error"] = error_;
      print(json_text(j) + "\n");
    }
    return rc;
  }

 private:
  int convert();
  int fail(const std::string& where, const std::string& what) {
    complain(where, what);
    error_ = where == opt_.file ? what : fmt::format("{}: {}", where, what);
    return 1;
  }

  ConvertOptions opt_;
  std::string error_;
};

int ConvertCommand::convert() {
  const std::string& path = opt_.file;
  if (opt_.output.empty() && !opt_.in_place) throw UsageError("give -o OUT or --in-place");
  const std::string dest = opt_.in_place ? path : opt_.output;
  if (!opt_.in_place && same_file(dest, path)) return fail(dest, "-o output is the input file; use --in-place");
  if (dest == "-") return fail("-o -", "the converted file cannot go to standard output");
  LoadOptions lo;
  lo.section = opt_.section;
  lo.strictness = Strictness::kStrict;
  std::string why;
  auto l = load(path, lo, why);
  if (!l) return fail(path, why);
  if (l->file && l->file->info().type == ET_REL)
    return fail(path, "relocatable object: its FDE start fields are relocated by the linker (convert the linked file)");
  if (l->file && l->data.from_segment)
    return fail(path, "the section was found only through PT_GNU_SFRAME (no section header to update)");
  const Version from = l->section.version();
  const Version to = opt_.version == 2 ? Version::kV2 : Version::kV3;
  if (!rows_fit_model(*l, opt_.section, why)) return fail(path, why);
  auto spec = to_spec(l->section);
  if (!spec) return fail(path, fmt::format("cannot read the section: {}", error_text(spec.error())));
  if (!opt_.byte_order.empty() && (opt_.byte_order == "big") != abi_big_endian(spec->abi))
    return fail(path, fmt::format("SFrame ABI {} fixes the byte order; {}-endian is not representable (spec §2.2.1)",
                                  abi_name(spec->abi), opt_.byte_order));
  spec->version = to;
  // Every v3 FLEX function must become default rules in v2: impossible.
  if (to == Version::kV2) {
    std::size_t flex = 0;
    std::string first;
    for (std::size_t i = 0; i < spec->functions.size(); ++i) {
      if (spec->functions[i].fde_type != FdeType::kFlex) continue;
      if (flex++ == 0) first = fmt::format("FDE {} at 0x{:x}", i, spec->functions[i].start_pc);
    }
    if (flex != 0)
      return fail(path, fmt::format("not representable in SFrame v2: {} FLEX FDE{} (first: {}); v2 has no FLEX "
                                    "FDEs (spec v3 §2.3.3.2)",
                                    flex, flex == 1 ? "" : "s", first));
  }
  const SizeOptions size = size_options(opt_.size, to, spec->big_endian);
  auto bytes = encode(*spec, Layout::kOptimize, size);
  if (!bytes)
    return fail(path, fmt::format("not representable in SFrame v{}: {}", opt_.version, error_text(bytes.error())));
  const std::uint64_t space = l->raw ? bytes->size() : l->data.bytes.size();
  // Larger than its space: into a new read-only PT_LOAD, as gen --loadable
  // does, the file's PT_GNU_SFRAME retargeted (or one added). FDE start
  // fields are relative to the section's address (spec v3 §2.3,
  // SFRAME_F_FDE_FUNC_START_PCREL; v2 errata 1), so the section is encoded
  // again for its new address.
  std::optional<elf::LoadablePlan> plan;
  if (bytes->size() > space) {
    const auto needs = [&](const std::string& reason) {
      return fail(path, fmt::format("the SFrame v{} section needs {} bytes; {} has {}, and {}", opt_.version,
                                    bytes->size(), l->data.name, space, reason));
    };
    const auto& file = *l->file;
    if (file.info().bits != 64) return needs("a new segment is added to 64-bit files only");
    if (file.info().type != ET_EXEC && file.info().type != ET_DYN)
      return needs("a new segment needs a linked executable or shared object");
    const auto phdrs = file.program_headers();
    if (std::none_of(phdrs.begin(), phdrs.end(), [](const auto& p) { return p.type == PT_LOAD; }))
      return needs("the file has no PT_LOAD segment to add one after");
    const bool retarget =
        std::any_of(phdrs.begin(), phdrs.end(), [](const auto& p) { return p.type == elf::kPtGnuSframeSegment; });
    auto p = elf::plan_loadable_section(file, retarget);
    if (!p) return needs(cannot_add_segment(p.error()));
    plan = *p;
    spec->section_address = plan->address;
    bytes = encode(*spec, Layout::kOptimize, size);
    if (!bytes)
      return fail(path, fmt::format("not representable in SFrame v{} at 0x{:x} (a new segment): {}", opt_.version,
                                    plan->address, error_text(bytes.error())));
  }
  const auto cannot = [&](const Error& e) { return fail(dest, fmt::format("cannot write: {}", write_error_text(e))); };
  auto out = OutputFile::create(dest, path);
  if (!out) return cannot(out.error());
  if (l->raw) {
    if (auto ok = out->write(*bytes); !ok) return cannot(ok.error());
  } else if (plan) {
    if (auto ok = elf::write_with_loadable_section(path, *out, l->data.name, *bytes, plan->address, plan->retarget);
        !ok)
      return cannot(ok.error());
  } else if (auto ok = elf::write_with_section_replaced(path, *out, l->data.name, *bytes); !ok) {
    return cannot(ok.error());
  }
  if (auto ok = out->commit(); !ok) return cannot(ok.error());
  if (plan) warn_if_not_strip_safe("convert", dest, *plan);
  if (opt_.json) {
    Json j = envelope("convert");
    j["file"] = path;
    j["output"] = dest;
    j["from_version"] = static_cast<int>(from);
    j["version"] = opt_.version;
    j["functions"] = spec->functions.size();
    j["bytes"] = {{"old", l->section.used_size()}, {"new", bytes->size()}, {"space", space}};
    if (plan)
      j["new_segment"] = {{"vaddr", hex(plan->vaddr)},
                          {"offset", hex(plan->offset)},
                          {"address", hex(plan->address)},
                          {"program_headers", plan->phnum},
                          {"pt_gnu_sframe_retargeted", plan->retarget}};
    print(json_text(j) + "\n");
    return 0;
  }
  fmt::print("{}: SFrame v{} -> v{}, {} functions, written to {}\n", path, static_cast<int>(from), opt_.version,
             spec->functions.size(), dest);
  if (plan) {
    fmt::print("  bytes: {} before, {} after: more than the {} of space; moved to a new PT_LOAD at 0x{:x} (file "
               "offset 0x{:x}), {} at 0x{:x}, {} program headers{}\n",
               l->section.used_size(), bytes->size(), space, plan->vaddr, plan->offset, l->data.name, plan->address,
               plan->phnum, plan->retarget ? " (PT_GNU_SFRAME retargeted)" : " (PT_GNU_SFRAME added)");
    return 0;
  }
  fmt::print("  bytes: {} before, {} after, {} of space{}\n", l->section.used_size(), bytes->size(), space,
             bytes->size() < space ? " (the rest zero-filled)" : "");
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_convert_command() { return std::make_unique<ConvertCommand>(); }

}  // namespace sframe::tools
