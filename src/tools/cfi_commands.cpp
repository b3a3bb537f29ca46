#include "cfi_commands.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <optional>

#include "sframe/cfi.hpp"
#include "sframe/encode.hpp"
#include "sframe/output_file.hpp"
#include "sframe/symbols.hpp"

namespace sframe::tools {
namespace {

std::string where(const elf::SymbolTable& syms, std::uint64_t pc) {
  const auto s = syms.find(pc);
  return s ? fmt::format("{}+0x{:x}", syms.display_name(*s->symbol), s->offset) : std::string("?");
}

std::uint64_t section_size(const elf::ElfFile& f, std::string_view name) {
  for (const auto& sh : f.sections())
    if (sh.name == name) return sh.size;
  return 0;
}

// Why a file has no CFI gen can read, in words (gen reads the .eh_frame of
// linked files through .eh_frame_hdr's table); empty if none of these.
std::string why_no_cfi(const elf::ElfFile& f) {
  bool eh = false, hdr = false, debug = false;
  for (const auto& sh : f.sections()) {
    eh |= sh.name == ".eh_frame" && sh.size > 4;  // 4 bytes: only the terminator
    hdr |= sh.name == ".eh_frame_hdr";
    debug |= sh.name == ".debug_frame";
  }
  if (f.info().type == ET_REL) return "relocatable object (gen reads linked executables and shared objects)";
  if (!eh) return debug ? "no .eh_frame (only .debug_frame)" : "no .eh_frame FDEs";
  if (!hdr) return ".eh_frame without .eh_frame_hdr";
  return "";
}

}  // namespace

int run_gen(const std::string& path, const GenOptions& in_opt) {
  GenOptions opt = in_opt;
  // Outputs are checked before any work: an output that is the input would
  // destroy it (a raw section over the ELF file), unless --in-place asks for
  // the ELF copy to replace it.
  if (opt.in_place) {
    if (opt.elf_output.empty()) opt.elf_output = path;
    if (!same_file(opt.elf_output, path)) {
      fmt::print(stderr, "sframe: {}: --in-place writes the --elf copy over FILE; --elf names another file\n",
                 opt.elf_output);
      return 1;
    }
  } else if (!opt.elf_output.empty() && same_file(opt.elf_output, path)) {
    fmt::print(stderr, "sframe: {}: --elf output is the input file; use --in-place to replace it\n", opt.elf_output);
    return 1;
  }
  if (!opt.output.empty() && same_file(opt.output, path)) {
    fmt::print(stderr, "sframe: {}: -o output is the input file (it would be replaced by a raw section)\n",
               opt.output);
    return 1;
  }
  if (!opt.output.empty() && !opt.elf_output.empty() &&
      (opt.output == opt.elf_output || same_file(opt.output, opt.elf_output))) {
    fmt::print(stderr, "sframe: {}: -o and --elf name the same file\n", opt.output);
    return 1;
  }
  if (opt.elf_output == "-") {
    // libelf writes with seeks, which a pipe cannot take.
    fmt::print(stderr, "sframe: --elf -: an ELF copy cannot go to standard output; use -o - for the raw section\n");
    return 1;
  }
  // With the raw section on standard output, the summary goes to stderr.
  std::FILE* const report = opt.output == "-" ? stderr : stdout;
  auto file = elf::ElfFile::open(path);
  if (!file) {
    fmt::print(stderr, "sframe: {}: {}\n", path, error_text(file.error()));
    return 1;
  }
  std::uint64_t address = 0;
  if (!opt.address.empty()) {
    try {
      address = std::stoull(opt.address, nullptr, 0);
    } catch (...) {
      fmt::print(stderr, "sframe: {}: bad address\n", opt.address);
      return 1;
    }
  } else if (auto existing = file->sframe_section(); existing) {
    address = existing->address;
  }
  const Version version = opt.version == 2 ? Version::kV2 : Version::kV3;
  auto header = cfi::section_header(*file, version, address);
  if (!header) {
    fmt::print(stderr, "sframe: {}: cannot read DWARF CFI: {}\n", path, error_text(header.error()));
    return 1;
  }
  // Streamed into the encoder: one function's rows in memory at a time.
  SectionEncoder enc(*header);
  const std::uint64_t eh = section_size(*file, ".eh_frame");
  // Address space only: pages of the buffer never written are never touched.
  enc.reserve(section_size(*file, ".eh_frame_hdr") / 8 + 64, 2 * eh + 4096);
  std::optional<Error> enc_error;
  auto g = cfi::for_each_generated(*file, version, address, [&](const FunctionSpec& f) {
    if (enc_error) return;
    if (auto ok = enc.add(f); !ok) enc_error = ok.error();
  });
  if (!g) {
    const std::string why = g.error().code == Errc::kElfError ? why_no_cfi(*file) : std::string();
    fmt::print(stderr, "sframe: {}: cannot read DWARF CFI: {}\n", path, why.empty() ? error_text(g.error()) : why);
    return 1;
  }
  const std::uint64_t functions_out = enc.size();
  auto bytes = enc_error ? Expected<std::vector<std::byte>>(Unexpected{*enc_error}) : enc.finish();
  if (!bytes) {
    fmt::print(stderr, "sframe: {}: {}\n", path, error_text(bytes.error()));
    return 1;
  }
  // Both outputs are written in full before either replaces anything, so a
  // failure of one leaves the other's destination as it was too.
  std::optional<OutputFile> raw_out, elf_out;
  const auto cannot = [](const std::string& where, const std::string& what, const Error& e) {
    fmt::print(stderr, "sframe: {}: {}: {}\n", where, what, write_error_text(e));
    return 1;
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
    auto ok = elf::write_with_section(path, *out, ".sframe", elf::kShtGnuSframe, *bytes, address);
    if (!ok) return cannot(opt.elf_output, "cannot write a copy with .sframe", ok.error());
    elf_out.emplace(std::move(*out));
  }
  if (raw_out)
    if (auto ok = raw_out->commit(); !ok) return cannot(opt.output, "cannot write", ok.error());
  if (elf_out)
    if (auto ok = elf_out->commit(); !ok) return cannot(opt.elf_output, "cannot write a copy with .sframe", ok.error());
  std::map<cfi::Reason, std::uint64_t> by_reason;
  for (const auto& s : g->skipped) ++by_reason[s.reason];
  if (opt.json) {
    Json j;
    j["sframepp_json"] = 1;
    j["command"] = "gen";
    j["file"] = path;
    j["version"] = opt.version;
    j["address"] = hex(address);
    j["functions_in"] = g->functions_in;
    j["functions_out"] = functions_out;
    j["flex_functions"] = g->flex_functions;
    j["plt_functions"] = g->plt_functions;
    Json left = Json::object();
    for (const auto& [r, n] : by_reason) left[std::string(cfi::describe(r))] = n;
    j["left_out"] = left;
    j["bytes"] = {{"eh_frame", eh}, {"sframe", bytes->size()}};
    const std::string text = j.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), report);
    return 0;
  }
  fmt::print(report, "{}: SFrame v{} for address 0x{:x}{}\n", path, opt.version, address,
             opt.output.empty() ? "" : fmt::format(", written to {}", opt.output));
  fmt::print(report, "  functions: {} with CFI, {} covered ({} FLEX), {} PLT FDEs added, {} left out\n", g->functions_in,
             functions_out - g->plt_functions, g->flex_functions, g->plt_functions, g->skipped.size());
  for (const auto& [r, n] : by_reason) fmt::print(report, "    left out: {} x {}\n", n, cfi::describe(r));
  fmt::print(report, "  bytes: .eh_frame {} in, .sframe {} out\n", eh, bytes->size());
  return 0;
}

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
  if (!eh || eh->bytes.size() <= 4) {  // 4 bytes: only the terminator
    const bool debug = file.section_bytes(".debug_frame").has_value();
    return not_compared(debug ? "no .eh_frame (only .debug_frame)" : "no .eh_frame FDEs", false);
  }
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
