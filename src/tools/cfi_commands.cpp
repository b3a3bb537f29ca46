#include "cfi_commands.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <optional>

#include "sframe/cfi.hpp"
#include "sframe/encode.hpp"
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

int run_gen(const std::string& path, const GenOptions& opt) {
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
  if (!opt.output.empty()) {
    std::FILE* f = std::fopen(opt.output.c_str(), "wb");
    if (!f || std::fwrite(bytes->data(), 1, bytes->size(), f) != bytes->size() || std::fclose(f) != 0) {
      fmt::print(stderr, "sframe: {}: cannot write\n", opt.output);
      return 1;
    }
  }
  if (!opt.elf_output.empty()) {
    auto ok = elf::write_with_section(path, opt.elf_output, ".sframe", elf::kShtGnuSframe, *bytes, address);
    if (!ok) {
      fmt::print(stderr, "sframe: {}: cannot write a copy with .sframe: {}\n", opt.elf_output, error_text(ok.error()));
      return 1;
    }
  }
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
    std::fwrite(j.dump(2).c_str(), 1, j.dump(2).size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  fmt::print("{}: SFrame v{} for address 0x{:x}{}\n", path, opt.version, address,
             opt.output.empty() ? "" : fmt::format(", written to {}", opt.output));
  fmt::print("  functions: {} with CFI, {} covered ({} FLEX), {} PLT FDEs added, {} left out\n", g->functions_in,
             functions_out - g->plt_functions, g->flex_functions, g->plt_functions, g->skipped.size());
  for (const auto& [r, n] : by_reason) fmt::print("    left out: {} x {}\n", n, cfi::describe(r));
  fmt::print("  bytes: .eh_frame {} in, .sframe {} out\n", eh, bytes->size());
  return 0;
}

bool verify_against_dwarf(const elf::ElfFile& file, const Section& s, bool json, Json& j, bool& has_cfi) {
  has_cfi = false;
  auto cmp = cfi::compare(file, s);
  if (!cmp) return true;
  has_cfi = true;
  const auto syms = elf::SymbolTable::read(file);
  Json mism = Json::array(), miss = Json::array();
  for (const auto& m : cmp->mismatches) {
    const std::string sf = rules_in_words(s, m.sframe), dw = rules_in_words(s, m.dwarf);
    if (json) {
      mism.push_back({{"pc", hex(m.pc)}, {"function", where(syms, m.pc)}, {"what", std::string(m.what)},
                      {"sframe", sf}, {"dwarf", dw}});
    } else {
      fmt::print("  mismatch at 0x{:x} <{}>: {} differs\n    SFrame: {}\n    DWARF:  {}\n", m.pc, where(syms, m.pc),
                 m.what, sf, dw);
    }
  }
  for (const auto& m : cmp->missing) {
    if (json) {
      miss.push_back({{"start", hex(m.start)}, {"end", hex(m.end)}, {"function", where(syms, m.start)},
                      {"reason", std::string(cfi::describe(m.reason))}});
    } else {
      fmt::print("  not in SFrame: 0x{:x}-0x{:x} <{}>{}\n", m.start, m.end, where(syms, m.start),
                 m.reason == cfi::Reason::kNone ? "" : fmt::format(": {}", cfi::describe(m.reason)));
    }
  }
  j["dwarf"] = {{"functions_checked", cmp->functions_checked},
                {"pcs_checked", cmp->pcs_checked},
                {"mismatches", mism},
                {"missing", miss}};
  if (!json)
    fmt::print("  DWARF CFI: {} functions, {} PCs compared, {} mismatches, {} ranges not in SFrame\n",
               cmp->functions_checked, cmp->pcs_checked, cmp->mismatches.size(), cmp->missing.size());
  return cmp->mismatches.empty();
}

}  // namespace sframe::tools
