// SPDX-License-Identifier: MIT
// `sframe merge -o RAW IN...`: SFrame sections combined as a linker does.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "cli.hpp"
#include "commands.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::tools {
namespace {

class MergeCommand final : public Command {
 public:
  std::string_view name() const override { return "merge"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("merge", "Combine SFrame sections into one, as a linker does");
    app_->add_option("inputs", opt_.inputs, "ELF files or raw sections, each as FILE[@ADDRESS]")->required();
    app_->add_option("-o,--output", opt_.output, "Raw section to write (-: standard output)")->required();
    app_->add_option("--address", opt_.address, "Address of the output section (0x... or decimal)")
        ->capture_default_str();
    app_->add_option("--format-version", opt_.version, "SFrame version to write")
        ->check(CLI::IsMember({2, 3}))
        ->capture_default_str();
    app_->add_option("--section", opt_.section, "Name of the SFrame section in ELF inputs")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print the summary as JSON");
    auto* optimize = app_->add_flag("--optimize-size", opt_.size.optimize, kOptimizeSizeHelp);
    app_->add_option("--for", opt_.size.consumers, kForHelp)->needs(optimize);
  }

  int run() override {
    const std::uint64_t address = parse_number_or_throw(opt_.address, "--address");
    for (const auto& in : opt_.inputs) split_input(in);  // a bad @ADDRESS is bad usage
    const int rc = combine(address);
    if (rc != 0 && opt_.json) {
      Json j = envelope("merge");
      j["output"] = opt_.output;
      j["error"] = error_;
      if (opt_.output != "-") print(json_text(j) + "\n");
    }
    return rc;
  }

 private:
  int fail(const std::string& where, const std::string& what) {
    complain(where, what);
    error_ = where == "merge" ? what : fmt::format("{}: {}", where, what);
    return 1;
  }

  int combine(std::uint64_t address) {
    // An input that is also the output would be lost if the merge is wrong.
    for (const auto& in : opt_.inputs)
      if (same_file(split_input(in).path, opt_.output))
        return fail(opt_.output, fmt::format("the output is the input {}", in));
    const Version version = opt_.version == 2 ? Version::kV2 : Version::kV3;
    std::vector<SectionSpec> specs;
    Json inputs = Json::array();
    std::vector<std::string> names;  // of the inputs in `specs`
    std::size_t empty = 0;
    for (const auto& in : opt_.inputs) {
      std::string why;
      LoadOptions lo;
      lo.section = opt_.section;
      lo.allow_empty = true;
      auto l = load(in, lo, why);
      if (l && l->empty) {
        // No data, so no functions and no ABI to agree on: as ld does, skip it.
        inputs.push_back({{"input", in}, {"address", hex(l->data.address)}, {"functions", 0}, {"empty", true}});
        ++empty;
        continue;
      }
      if (!l || !rows_fit_model(*l, opt_.section, why)) return fail(in, why);
      auto spec = to_spec(l->section);
      if (!spec) return fail(in, error_text(spec.error()));
      Json j = {{"input", in}, {"address", hex(l->data.address)}, {"functions", spec->functions.size()}};
      if (l->raw) j["raw"] = raw_json(*l);
      inputs.push_back(std::move(j));
      specs.push_back(std::move(*spec));
      names.push_back(in);
    }
    if (specs.empty())
      return fail("merge", fmt::format("every input's {} section is empty (0 bytes): no SFrame data to merge",
                                       opt_.section));
    if (auto why = check(specs, names, version); !why.empty()) return fail("merge", why);
    auto merged = merge(specs, address, version);
    if (!merged) return fail(opt_.output, error_text(merged.error()));
    auto bytes = encode(*merged, Layout::kOptimize, size_options(opt_.size, version, merged->big_endian));
    if (!bytes) return fail(opt_.output, error_text(bytes.error()));
    if (auto ok = write_file(opt_.output, *bytes); !ok)
      return fail(opt_.output, "cannot write: " + write_error_text(ok.error()));
    // With the section on standard output, the summary goes to stderr.
    std::FILE* const report = opt_.output == "-" ? stderr : stdout;
    if (opt_.json) {
      Json j = envelope("merge");
      j["output"] = opt_.output;
      j["version"] = opt_.version;
      j["address"] = hex(address);
      j["functions"] = merged->functions.size();
      j["bytes"] = bytes->size();
      j["inputs"] = std::move(inputs);
      const std::string text = json_text(j) + "\n";
      std::fwrite(text.data(), 1, text.size(), report);
      return 0;
    }
    fmt::print(report, "{}: SFrame v{} section for address 0x{:x}: {} functions, {} bytes{}\n", opt_.output,
               opt_.version, address, merged->functions.size(), bytes->size(),
               empty ? fmt::format("; {} empty input sections skipped", empty) : "");
    return 0;
  }

  // What merge() would refuse, said with the inputs' names and FDE indexes.
  std::string check(const std::vector<SectionSpec>& specs, const std::vector<std::string>& names,
                    Version version) const {
    struct Range {
      std::uint64_t start, end;
      std::size_t input, fde;
    };
    std::vector<Range> ranges;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const SectionSpec& s = specs[i];
      if (s.abi != specs[0].abi)
        return fmt::format("{} is {}, {} is {}: one section holds one ABI", names[i], abi_name(s.abi),
                           names[0], abi_name(specs[0].abi));
      if (s.cfa_fixed_fp_offset != specs[0].cfa_fixed_fp_offset ||
          s.cfa_fixed_ra_offset != specs[0].cfa_fixed_ra_offset)
        return fmt::format("{} has fixed FP/RA offsets {}/{}, {} has {}/{}", names[i], s.cfa_fixed_fp_offset,
                           s.cfa_fixed_ra_offset, names[0], specs[0].cfa_fixed_fp_offset,
                           specs[0].cfa_fixed_ra_offset);
      for (std::size_t f = 0; f < s.functions.size(); ++f) {
        const FunctionSpec& fn = s.functions[f];
        if (version == Version::kV2 && fn.fde_type == FdeType::kFlex)
          return fmt::format("{} FDE {} at 0x{:x} is FLEX, which SFrame v2 cannot encode (use --format-version 3)",
                             names[i], f, fn.start_pc);
        ranges.push_back({fn.start_pc, fn.start_pc + fn.size, i, f});
      }
    }
    std::stable_sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
    for (std::size_t k = 1, last = 0; k < ranges.size(); ++k) {
      const Range &a = ranges[last], &b = ranges[k];
      if (a.end > b.start)
        return fmt::format("{} FDE {} overlaps {} FDE {} at 0x{:x}", names[a.input], a.fde,
                           names[b.input], b.fde, b.start);
      if (b.end > a.end) last = k;
    }
    return "";
  }

  MergeOptions opt_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Command> make_merge_command() { return std::make_unique<MergeCommand>(); }

}  // namespace sframe::tools
