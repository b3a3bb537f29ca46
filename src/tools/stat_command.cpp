// SPDX-License-Identifier: MIT
// `sframe stat`: counts, encodings, sizes beside .eh_frame, .text coverage.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "json_stream.hpp"

namespace sframe::tools {
namespace {

void print_stats(const std::string& path, const Loaded& l, const Stats& st) {
  const Section& s = l.section;
  const auto pct = [](std::uint64_t a, std::uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
  std::string flags;
  for (const auto& f : flag_names(s.header().flags, s.version())) flags += (flags.empty() ? "" : ", ") + f;
  if (l.raw) {
    fmt::print("{}: {}\n", path, raw_note(l));
  } else {
    fmt::print("{}: section {} at 0x{:x}{}\n", path, l.data.name, l.data.address,
               l.data.from_segment ? " (from PT_GNU_SFRAME)" : "");
  }
  // v1 is what Debian 12's assembler (binutils 2.40) writes, while gen and
  // convert write v3: the line says why a section may be v1.
  const char* older = s.version() == Version::kV1 ? " (as GNU as 2.40 writes it; sframe gen and convert write v3)" : "";
  fmt::print("  version {}{}, {}, {} byte order, flags: {}\n", static_cast<int>(s.version()), older, abi_name(s.abi()),
             s.big_endian() ? "big" : "little", flags.empty() ? "none" : flags);
  fmt::print("  FDEs: {} (PC type inc {}, mask {}; FDE type default {}, flex {}; signal {})\n", s.num_fdes(),
             st.pc_types[0], st.pc_types[1], st.fde_types[0], st.fde_types[1], st.signal_fdes);
  fmt::print("  FREs: {} ({:.2f} per FDE)\n", st.fres, s.num_fdes() ? double(st.fres) / s.num_fdes() : 0.0);
  fmt::print("  FRE types (FDEs): addr1 {}, addr2 {}, addr4 {}\n", st.fre_types[0], st.fre_types[1], st.fre_types[2]);
  fmt::print("  data-word sizes (FREs): 1B {}, 2B {}, 4B {}\n", st.dataword_sizes[0], st.dataword_sizes[1],
             st.dataword_sizes[2]);
  std::string counts;
  for (std::size_t n = 0; n < st.dataword_counts.size(); ++n)
    if (st.dataword_counts[n]) counts += fmt::format("{}{}: {}", counts.empty() ? "" : ", ", n, st.dataword_counts[n]);
  fmt::print("  data-word counts (FREs): {}{}\n", counts,
             st.mangled_ra_fres ? fmt::format("; signed RA in {} FREs", st.mangled_ra_fres) : "");
  // The bytes the header's counts describe (header, FDE and FRE
  // sub-sections); a section may carry more (padding a linker added).
  std::string bytes = fmt::format("  bytes: .sframe {}", st.sframe_bytes);
  if (st.used_bytes != st.sframe_bytes)
    bytes += fmt::format(" ({} in the header and its FDE and FRE sub-sections, {} after them)", st.used_bytes,
                         st.sframe_bytes - st.used_bytes);
  // .eh_frame and .text are the ELF file's: a raw section has neither, so
  // it gets no comparison and no coverage line at all.
  if (l.raw) {
    fmt::print("{}\n", bytes);
    return;
  }
  const std::uint64_t eh = st.eh_frame_bytes + st.eh_frame_hdr_bytes;
  if (eh)
    bytes += fmt::format("; .eh_frame {} + .eh_frame_hdr {} = {} (.sframe is {:.1f}% of that)", st.eh_frame_bytes,
                         st.eh_frame_hdr_bytes, eh, pct(st.sframe_bytes, eh));
  else
    bytes += "; no .eh_frame";
  fmt::print("{}\n", bytes);
  if (st.text_bytes)
    fmt::print("  .text coverage: {} of {} bytes ({:.1f}%)\n", st.text_covered, st.text_bytes,
               pct(st.text_covered, st.text_bytes));
  else
    fmt::print("  .text coverage: no .text section\n");
}

class StatCommand final : public Command {
 public:
  std::string_view name() const override { return "stat"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("stat", "Summarize SFrame sections: counts, encodings, sizes, coverage");
    app_->add_option("files", opt_.files,
                     "ELF files, or raw sections as RAW[@ADDRESS] (default: this program itself)");
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    if (opt_.files.empty()) opt_.files.push_back(self_path());
    // Bad usage is found before the document begins (its own document, exit 2).
    if (opt_.json)
      for (const auto& path : opt_.files) split_input(path);
    return run_per_file("stat", opt_.files, opt_.json,
                        [&](const std::string& path, JsonStream* js) { return stat_file(path, js); });
  }

 private:
  // Prints one file's statistics: as text, or as one element of `files` to
  // `js`. Returns its exit status (0 or 1).
  int stat_file(const std::string& path, JsonStream* js) {
    std::string why;
    LoadOptions lo;
    lo.section = opt_.section;
    lo.allow_empty = true;
    auto l = load(path, lo, why);
    if (l && l->empty) {
      // A section without data: nothing to count, and nothing wrong.
      if (js) {
        js->begin_object();
        js->member("file", path);
        js->member("section", l->data.name);
        js->member("address", hex(l->data.address));
        js->member("from_segment", l->data.from_segment);
        js->member("empty", true);
        js->end();
      } else {
        fmt::print("{}: section {} at 0x{:x}{}: empty (0 bytes), no SFrame data\n", path, l->data.name,
                   l->data.address, l->data.from_segment ? " (from PT_GNU_SFRAME)" : "");
      }
      return 0;
    }
    std::optional<Stats> st;
    if (l) {
      auto r = compute_stats(l->section, l->file ? l->file->sections() : std::vector<elf::SectionHeader>(),
                             l->data.bytes.size());
      if (r) st = *r; else why = section_error_text(*l, opt_.section, r.error());
    }
    if (!st) {
      complain(path, why);
      if (js) {
        js->begin_object();
        js->member("file", path);
        js->member("error", why);
        js->end();
      }
      return 1;
    }
    if (!js) {
      print_stats(path, *l, *st);
      return 0;
    }
    js->begin_object();
    js->member("file", path);
    js->member("section", l->raw ? std::string(".sframe") : l->data.name);
    js->member("address", hex(l->data.address));
    js->member("from_segment", l->data.from_segment);
    if (l->raw) js->member("raw", raw_json(*l));
    js->member("stats", stats_json(l->section, *st));
    js->end();
    return 0;
  }

  StatOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_stat_command() { return std::make_unique<StatCommand>(); }

}  // namespace sframe::tools
