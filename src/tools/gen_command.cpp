// SPDX-License-Identifier: MIT
// `sframe gen FILE`: SFrame from the file's DWARF CFI (.eh_frame, .debug_frame),
// read by our single-pass reader (sframe/unwind/cfi_reader.hpp).
#include <elf.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "cli.hpp"
#include "commands.hpp"
#include "json_stream.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::tools {
namespace {

std::uint64_t section_size(const elf::ElfFile& f, std::string_view name) {
  for (const auto& sh : f.sections())
    if (sh.name == name) return sh.size;
  return 0;
}

// One rule for --compare-libdw's messages: "u" (unchanged), "undef", else [BASE+OFFSET] or BASE+OFFSET (r7 is DWARF register 7).
std::string rule_words(const Rule& r) {
  switch (r.kind) {
    case Rule::Kind::kUnchanged: return "u";
    case Rule::Kind::kUndefined: return "undef";
    case Rule::Kind::kExpr: break;
  }
  const std::string base = r.base == Rule::Base::kCfa ? "cfa" : fmt::format("r{}", r.regnum);
  const std::string e = fmt::format("{}{:+d}", base, r.offset);
  return r.deref ? "[" + e + "]" : e;
}

// A CFI row as --compare-libdw prints it.
std::string row_words(const cfi::Row& r) {
  return fmt::format("cfa {} ra {}{} fp {}{}{}{} ({})", rule_words(r.row.cfa), rule_words(r.row.ra),
                     r.row.ra_mangled ? " signed" : "", rule_words(r.row.fp), r.signal ? " signal" : "",
                     r.flex ? " flex" : "", r.row.outermost() ? " outermost" : "", cfi::describe(r.reason));
}

class GenCommand final : public Command {
 public:
  std::string_view name() const override { return "gen"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand(
        "gen", "Generate SFrame from the DWARF CFI (.eh_frame, .debug_frame) of a linked ELF file");
    app_->add_option("files", opt_.files,
                     "ELF files; with several, each is converted in turn in this one process (-o names a "
                     "folder that gets FILE's base name + .sframe; --elf/--in-place are per-file only; "
                     "--json prints a JSON array of the per-file summaries; exit status 1 if any failed)")
        ->required();
    app_->add_option("--format-version", opt_.version, "SFrame version to write")
        ->check(CLI::IsMember({2, 3}))
        ->capture_default_str();
    app_->add_option("-o,--output", opt_.output,
                     "Write the raw section here (-: standard output); with several FILEs, a folder that gets "
                     "one BASENAME.sframe per FILE");
    app_->add_option("--elf", opt_.elf_output,
                     "Write a copy of FILE with the section added as .sframe (not loaded: no segment maps it; see --loadable)");
    app_->add_flag("--in-place", opt_.in_place,
                   "Replace FILE by its copy with .sframe added (atomically: a failure leaves FILE as it was)");
    app_->add_flag("--loadable", opt_.loadable,
                   "With --elf/--in-place: map .sframe in a new read-only PT_LOAD with a PT_GNU_SFRAME, so the "
                   "kernel and the dynamic linker find it (the program-header table moves to the new segment); "
                   "the section is generated for its address there. With --repair: where the section does not "
                   "fit its old space");
    app_->add_flag("--repair", opt_.repair,
                   "With --elf/--in-place: regenerate the section of a file that has PT_GNU_SFRAME (a broken or "
                   "partial section) into its existing space, updating sh_size and PT_GNU_SFRAME; refused when "
                   "it does not fit, unless --loadable is given too");
    app_->add_option("--address", opt_.address,
                     "Section address, 0x... or decimal (default: the file's .sframe address, else 0)");
    app_->add_flag("--json", opt_.json, "Print the summary as JSON");
    auto* optimize = app_->add_flag("--optimize-size", opt_.size.optimize, kOptimizeSizeHelp);
    app_->add_option("--for", opt_.size.consumers, kForHelp)->needs(optimize);
    app_->add_flag("--compare-libdw", opt_.compare_libdw,
                   "Also read the CFI through elfutils libdw and count the rows where it and gen's reader "
                   "disagree (summary: libdw_diff; the first differences on stderr)");
  }

  int run() override {
    if (opt_.files.size() == 1) {
      opt_.file = opt_.files[0];
      const int rc = generate();
      if (rc != 0 && opt_.json) {
        // A JSON document on stdout also on failure (`-o -` has the section there).
        Json j = envelope("gen");
        j["file"] = opt_.file;
        j["error"] = error_;
        if (opt_.output != "-") print(json_text(j) + "\n");
      }
      return rc;
    }
    // Many files, one process: no process start-up or library loading per
    // file (scripts/gen-sweep converts thousands this way).
    if (!opt_.elf_output.empty() || opt_.in_place) {
      complain("gen", "--elf and --in-place take one FILE");
      return 2;
    }
    if (opt_.output == "-") {
      complain("gen", "-o - takes one FILE (several FILEs: -o DIR)");
      return 2;
    }
    opt_.output_dir = opt_.output;
    // --json: each file's summary is written when the file is done (an
    // array, laid out as dump(1) lays it out), not kept for the end.
    std::optional<JsonStream> js;
    if (opt_.json) {
      js.emplace(stdout, 1);
      js->begin_array();
    }
    int rc = 0;
    for (const std::string& f : opt_.files) {
      opt_.file = f;
      opt_.output = opt_.output_dir.empty()
                        ? std::string()
                        : opt_.output_dir + "/" + std::filesystem::path(f).filename().string() + ".sframe";
      error_.clear();
      json_ = Json();
      const auto t0 = std::chrono::steady_clock::now();
      const int one = generate();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rc = std::max(rc, one);
      if (js) {
        if (one != 0) {
          json_ = envelope("gen");
          json_["file"] = f;
          json_["error"] = error_;
        }
        json_["seconds"] = secs;
        js->value(json_);
      }
    }
    if (js) js->finish();
    return rc;
  }

 private:
  int generate();
  // Says why on stderr ("sframe: WHERE: WHAT"), keeps it for the JSON; 1.
  int fail(const std::string& where, const std::string& what) {
    complain(where, what);
    error_ = where == opt_.file ? what : fmt::format("{}: {}", where, what);
    return 1;
  }

  GenOptions opt_;
  std::string error_;
  // With several FILEs and --json: the current file's summary.
  Json json_;
};

int GenCommand::generate() {
  GenOptions& opt = opt_;
  const std::string& path = opt.file;
  // Outputs are checked before any work: an output that is the input would
  // destroy it (a raw section over the ELF file), unless --in-place asks for
  // the ELF copy to replace it.
  if (opt.in_place) {
    if (opt.elf_output.empty()) opt.elf_output = path;
    if (!same_file(opt.elf_output, path)) {
      return fail(opt.elf_output, "--in-place writes the --elf copy over FILE; --elf names another file");
    }
  } else if (!opt.elf_output.empty() && same_file(opt.elf_output, path)) {
    return fail(opt.elf_output, "--elf output is the input file; use --in-place to replace it");
  }
  if (!opt.output.empty() && same_file(opt.output, path)) {
    return fail(opt.output, "-o output is the input file (it would be replaced by a raw section)");
  }
  if (!opt.output.empty() && !opt.elf_output.empty() &&
      (opt.output == opt.elf_output || same_file(opt.output, opt.elf_output))) {
    return fail(opt.output, "-o and --elf name the same file");
  }
  if (opt.elf_output == "-") {
    // libelf writes with seeks, which a pipe cannot take.
    return fail("--elf -", "an ELF copy cannot go to standard output; use -o - for the raw section");
  }
  // With the raw section on standard output, the summary goes to stderr.
  std::FILE* const report = opt.output == "-" ? stderr : stdout;
  std::uint64_t address = 0;
  if (!opt.address.empty()) address = parse_number_or_throw(opt.address, "--address");
  std::string why_not;
  auto file = open_elf(path, false, why_not);
  if (!file) return fail(path, why_not);
  if (file->info().machine == EM_386) return fail(path, "32-bit x86 has no SFrame ABI");
  auto existing = file->sframe_section();
  if (!opt.repair && !opt.loadable && !opt.elf_output.empty() && existing && !existing->from_segment)
    return fail(path, fmt::format("already has a {} section (gen --elf adds one; dump or verify it instead)",
                                  existing->name));
  if (opt.address.empty() && existing) address = existing->address;
  // --loadable and --repair: where the section goes decides its address.
  std::optional<elf::SectionHeader> repaired;  // --repair: the section rewritten
  std::optional<elf::LoadablePlan> plan;       // --loadable: the new segment
  if (opt.loadable || opt.repair) {
    const char* const what = opt.repair ? "--repair" : "--loadable";
    if (opt.elf_output.empty()) return fail(path, fmt::format("{} writes an ELF file: give --elf OUT or --in-place", what));
    if (!opt.address.empty())
      return fail("--address", fmt::format("{} places the section, which decides its address", what));
    if (file->info().bits != 64) return fail(path, fmt::format("32-bit ELF file: {} handles 64-bit files only", what));
    if (file->info().type != ET_EXEC && file->info().type != ET_DYN)
      return fail(path, fmt::format("not a linked executable or shared object: {} needs its segments", what));
    const auto phdrs = file->program_headers();
    const bool has_segment =
        std::any_of(phdrs.begin(), phdrs.end(), [](const auto& p) { return p.type == elf::kPtGnuSframeSegment; });
    if (std::none_of(phdrs.begin(), phdrs.end(), [](const auto& p) { return p.type == PT_LOAD; }))
      return fail(path, fmt::format("no PT_LOAD segment: {} needs a loadable file", what));
    if (opt.repair) {
      if (!has_segment) return fail(path, "no PT_GNU_SFRAME segment to repair (--loadable adds one)");
      for (const auto& sh : file->sections())
        if (!repaired && (sh.name == ".sframe" || sh.type == elf::kShtGnuSframe)) repaired = sh;
      if (repaired && repaired->type != SHT_NOBITS) {
        address = repaired->address;
      } else if (!opt.loadable) {
        return fail(path, "PT_GNU_SFRAME has no .sframe section header to rewrite in its space (add --loadable to "
                          "put the section in a new segment)");
      } else {
        // No space to rewrite (objcopy --remove-section=.sframe leaves an
        // empty PT_GNU_SFRAME): straight to a new segment.
        if (repaired) return fail(path, fmt::format("{} is SHT_NOBITS: no bytes to repair", repaired->name));
        auto p = elf::plan_loadable_section(*file, true);
        if (!p) return fail(path, cannot_add_segment(p.error()));
        plan = *p;
        address = plan->address;
      }
    } else {
      if (has_segment)
        return fail(path, "already has a PT_GNU_SFRAME segment (gen --in-place --repair regenerates its section)");
      auto p = elf::plan_loadable_section(*file, false);
      if (!p) return fail(path, cannot_add_segment(p.error()));
      plan = *p;
      address = plan->address;
    }
  }
  const Version version = opt.version == 2 ? Version::kV2 : Version::kV3;
  const std::uint64_t eh = section_size(*file, ".eh_frame");
  const std::uint64_t debug_frame = section_size(*file, ".debug_frame");
  std::optional<Expected<cfi::Generated>> g_at;
  std::optional<Expected<std::vector<std::byte>>> bytes_at;
  std::uint64_t functions_out = 0;
  std::uint64_t fdes_out = 0;  // --optimize-size may describe several functions by one FDE
  // Generates the section for `at`; 0, or fail()'s status.
  const auto generate_at = [&](std::uint64_t at) {
    auto header = cfi::section_header(*file, version, at);
    if (!header) {
      return fail(path, fmt::format("cannot read DWARF CFI: {}", error_text(header.error())));
    }
    // Streamed into the encoder: one function's rows in memory at a time.
    SectionEncoder enc(*header, Layout::kOptimize, size_options(opt.size, version, header->big_endian));
    // Address space only: pages of the buffer never written are never touched.
    // An FDE takes at least 24 bytes of CFI. A corrupt header's sizes are
    // bounded by the file's.
    std::error_code size_error;
    const std::uint64_t file_bytes = std::filesystem::file_size(path, size_error);
    const std::uint64_t cfi_bytes =
        size_error ? 0 : std::min(eh, file_bytes) + std::min(debug_frame, file_bytes);
    enc.reserve(cfi_bytes / 24 + 64, 2 * cfi_bytes + 4096);
    std::optional<Error> enc_error;
    functions_out = 0;
    // The reader's rows go into the encoder in place (a PLT function's are
    // in its FunctionSpec): no copy into RowSpecs per function. One read
    // feeds this encoder: the reader's translation numbers tag its rows
    // (cfi::Row::translation), so a repeated row is encoded once.
    g_at.emplace(cfi::for_each_translated(*file, version, at, [&](const FunctionSpec& f, const cfi::Function* fn) {
      if (enc_error) return;
      auto ok = fn ? enc.add(
                         f, fn->rows.size(),
                         [&](std::size_t k) { return static_cast<std::uint32_t>(fn->rows[k].start - fn->start); },
                         [&](std::size_t k) -> const FrameRow& { return fn->rows[k].row; },
                         [&](std::size_t k) { return fn->rows[k].translation; })
                   : enc.add(f);
      if (!ok) enc_error = ok.error();
      ++functions_out;
    }));
    if (!*g_at) {
      const std::string why = g_at->error().code() == ElfErrc::kElfError ? why_no_cfi(*file) : std::string();
      return fail(path, fmt::format("cannot read DWARF CFI: {}", why.empty() ? error_text(g_at->error()) : why));
    }
    bytes_at.emplace(enc_error ? Expected<std::vector<std::byte>>(Unexpected{*enc_error}) : enc.finish());
    fdes_out = enc.finished_fdes();
    if (!*bytes_at) {
      return fail(path, error_text(bytes_at->error()));
    }
    return 0;
  };
  if (const int rc = generate_at(address); rc != 0) return rc;
  if (repaired && (*bytes_at)->size() > repaired->size) {
    // Not in the old space: a new segment when asked for, for which the
    // section is generated again at its new address.
    if (!opt.loadable)
      return fail(path, fmt::format("the regenerated section needs {} bytes; {} has {}: it does not fit (add "
                                    "--loadable to put it in a new segment)",
                                    (*bytes_at)->size(), repaired->name, repaired->size));
    auto p = elf::plan_loadable_section(*file, true);
    if (!p) return fail(path, cannot_add_segment(p.error()));
    plan = *p;
    address = plan->address;
    if (const int rc = generate_at(address); rc != 0) return rc;
  }
  auto& g = *g_at;
  auto& bytes = *bytes_at;
  // Both outputs are written in full before either replaces anything, so a
  // failure of one leaves the other's destination as it was too.
  std::optional<OutputFile> raw_out, elf_out;
  const auto cannot = [this](const std::string& where, const std::string& what, const Error& e) {
    return fail(where, fmt::format("{}: {}", what, write_error_text(e)));
  };
  if (!opt.output.empty()) {
    if (opt.output == "-") std::fflush(stdout);
    auto out = OutputFile::create(opt.output);
    if (!out) return cannot(opt.output, "cannot write", out.error());
    if (auto ok = out->write(*bytes); !ok) return cannot(opt.output, "cannot write", ok.error());
    raw_out.emplace(std::move(*out));
  }
  if (!opt.elf_output.empty()) {
    auto out = OutputFile::create(opt.elf_output, path);
    if (!out) return cannot(opt.elf_output, "cannot write a copy with .sframe", out.error());
    // --loadable on a file with an unmapped section (lld 14 concatenates
    // .sframe without PT_GNU_SFRAME): that section's header is reused.
    const std::string name = repaired ? repaired->name : existing ? existing->name : std::string(".sframe");
    auto ok = plan ? elf::write_with_loadable_section(path, *out, name, *bytes, address, plan->retarget)
              : repaired ? elf::write_with_section_replaced(path, *out, repaired->name, *bytes)
                         : elf::write_with_section(path, *out, ".sframe", elf::kShtGnuSframe, *bytes, address);
    if (!ok) return cannot(opt.elf_output, "cannot write a copy with .sframe", ok.error());
    elf_out.emplace(std::move(*out));
  }
  if (raw_out)
    if (auto ok = raw_out->commit(); !ok) return cannot(opt.output, "cannot write", ok.error());
  if (elf_out)
    if (auto ok = elf_out->commit(); !ok) return cannot(opt.elf_output, "cannot write a copy with .sframe", ok.error());
  if (plan) warn_if_not_strip_safe("gen", opt.elf_output, *plan);
  std::map<cfi::Reason, std::uint64_t> by_reason;
  for (const auto& s : g->skipped) ++by_reason[s.reason];
  std::optional<cfi::ReaderComparison> diff;
  if (opt.compare_libdw) {
    auto d = cfi::compare_readers(*file);
    if (!d) return fail(path, fmt::format("cannot compare with libdw: {}", error_text(d.error())));
    diff = std::move(*d);
    for (const auto& x : diff->examples)
      fmt::print(stderr, "{}: libdw differs at 0x{:x} (FDE 0x{:x}): {}; ours: {}; libdw: {}\n", path, x.pc,
                 x.function_start, x.what, row_words(x.ours), row_words(x.libdw));
  }
  if (opt.json) {
    Json j = envelope("gen");
    j["file"] = path;
    j["version"] = opt.version;
    j["address"] = hex(address);
    j["functions_in"] = g->functions_in;
    j["functions_out"] = functions_out;
    if (opt.size.optimize) j["fdes_out"] = fdes_out;
    j["flex_functions"] = g->flex_functions;
    j["plt_functions"] = g->plt_functions;
    Json left = Json::object();
    for (const auto& [r, n] : by_reason) left[std::string(cfi::describe(r))] = n;
    j["left_out"] = left;
    j["bytes"] = {{"eh_frame", eh}, {"debug_frame", debug_frame}, {"sframe", bytes->size()}};
    if (diff)
      j["libdw_diff"] = {{"libdw_run", diff->libdw_run},
                         {"functions", diff->functions},
                         {"rows_compared", diff->rows_compared},
                         {"differing_rows", diff->differing_rows},
                         {"libdw_unreadable_fdes", diff->libdw_unreadable},
                         {"libdw_too_long_rows", diff->libdw_too_long},
                         {"overlapping_fdes", diff->overlapping_fdes},
                         {"truncated_fdes", diff->truncated_fdes},
                         {"ours_unreadable_fdes", diff->ours_unreadable},
                         {"large_regno_rules", diff->large_regno},
                         {"long_leb_programs", diff->long_leb},
                         {"wide_offset_rules", diff->wide_offset},
                         {"deep_remember_programs", diff->deep_remember}};
    if (opt.files.size() > 1) {
      json_ = std::move(j);
      return 0;
    }
    const std::string text = json_text(j) + "\n";
    std::fwrite(text.data(), 1, text.size(), report);
    return 0;
  }
  fmt::print(report, "{}: SFrame v{} for address 0x{:x}{}\n", path, opt.version, address,
             opt.output.empty() ? "" : fmt::format(", written to {}", opt.output));
  fmt::print(report, "  functions: {} with CFI, {} covered ({} FLEX), {} PLT FDEs added, {} left out\n", g->functions_in,
             functions_out - g->plt_functions, g->flex_functions, g->plt_functions, g->skipped.size());
  for (const auto& [r, n] : by_reason) fmt::print(report, "    left out: {} x {}\n", n, cfi::describe(r));
  if (plan)
    fmt::print(report, "  {}: new PT_LOAD at 0x{:x} (file offset 0x{:x}), .sframe at 0x{:x}, {} program headers {}{}\n",
               opt.elf_output, plan->vaddr, plan->offset, plan->address, plan->phnum,
               !plan->table_in_place ? "(moved to the new segment)"
               : plan->shift != 0    ? fmt::format("(grown in place; the sections after them moved up {} bytes)", plan->shift)
                                     : std::string("(grown in place)"),
               plan->retarget ? fmt::format(" ({}; PT_GNU_SFRAME retargeted)",
                                            repaired ? "the old section did not fit" : "no section header to rewrite")
               : existing     ? fmt::format(" (the unmapped {} replaced)", existing->name)
                              : std::string());
  else if (repaired)
    fmt::print(report, "  {}: {} rewritten in its space ({} of {} bytes)\n", opt.elf_output, repaired->name,
               bytes->size(), repaired->size);
  if (opt.size.optimize) fmt::print(report, "  --optimize-size: {} FDEs for {} functions\n", fdes_out, functions_out);
  fmt::print(report, "  bytes: .eh_frame {}{} in, .sframe {} out\n", eh,
             debug_frame ? fmt::format(" and .debug_frame {}", debug_frame) : "", bytes->size());
  if (diff && !diff->libdw_run)
    fmt::print(report,
               "  libdw: not run (CFI on which it could allocate without bound: {} rules for register numbers of "
               "2^16 or more, {} programs with a LEB128 of more than 10 bytes or past 64 bits, {} FDEs cut short, "
               "{} unreadable FDEs)\n",
               diff->large_regno, diff->long_leb, diff->truncated_fdes, diff->ours_unreadable);
  else if (diff)
    fmt::print(report, "  libdw: {} rows compared, {} differ ({} FDEs libdw cannot read, {} rows it gave up on)\n",
               diff->rows_compared, diff->differing_rows, diff->libdw_unreadable, diff->libdw_too_long);
  return 0;
}

}  // namespace

std::string why_no_cfi(const elf::ElfFile& f) {
  bool eh = false, hdr = false, debug = false;
  for (const auto& sh : f.sections()) {
    eh |= sh.name == ".eh_frame" && sh.size > 4;  // 4 bytes: only the terminator
    hdr |= sh.name == ".eh_frame_hdr";
    debug |= sh.name == ".debug_frame";
  }
  (void)hdr;
  if (f.info().type == ET_REL) return "relocatable object (gen reads linked executables and shared objects)";
  if (!eh && !debug) return "no .eh_frame FDEs and no .debug_frame";
  return "";
}


std::unique_ptr<Command> make_gen_command() { return std::make_unique<GenCommand>(); }

}  // namespace sframe::tools
