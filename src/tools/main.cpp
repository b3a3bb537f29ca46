// The `sframe` command-line tool: dump, verify, lookup, stat.
#include <elf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cfi_commands.hpp"
#include "objdump_text.hpp"
#include "render.hpp"
#include "stack_command.hpp"
#include "sframe/elf.hpp"
#include "sframe/encode.hpp"
#include "sframe/lookup.hpp"
#include "sframe/output_file.hpp"
#include "sframe/section.hpp"
#include "sframe/symbols.hpp"

namespace {

using namespace sframe;
using tools::Json;

/// JSON documents carry this version; docs/json.md describes the schema.
constexpr int kJsonVersion = 1;

// An ELF file with its SFrame section parsed (and checked to the given level).
struct Loaded {
  elf::ElfFile file;
  elf::SFrameSectionData data;
  Section section;
};

// Opens `path` and parses its SFrame section. On failure `out_error` says
// what, and `text_prefix` gets what objdump would have printed before failing.
std::optional<Loaded> load(const std::string& path, const std::string& section_name, Strictness strictness,
                           std::string& why, std::string* text_prefix = nullptr, bool for_cfi = false);

// Opens `path`; a relocatable object as its relocated copy, whose CFI and
// SFrame sit at the same addresses (verify compares them).
std::optional<elf::ElfFile> open_for_cfi(const std::string& path, std::string& why) {
  auto file = elf::ElfFile::open(path);
  if (!file) {
    why = tools::error_text(file.error());
    return std::nullopt;
  }
  if (file->info().type != ET_REL) return std::move(*file);
  auto copy = file->relocated_copy();
  if (!copy) {
    why = "cannot apply the relocations of .eh_frame and .sframe: " + tools::error_text(copy.error());
    return std::nullopt;
  }
  return std::move(*copy);
}

std::optional<Loaded> load(const std::string& path, const std::string& section_name, Strictness strictness,
                           std::string& why, std::string* text_prefix, bool for_cfi) {
  auto file = for_cfi ? open_for_cfi(path, why) : std::optional<elf::ElfFile>();
  if (!for_cfi) {
    if (auto f = elf::ElfFile::open(path)) {
      file.emplace(std::move(*f));
    } else {
      why = tools::error_text(f.error());
    }
  }
  if (!file) return std::nullopt;
  if (text_prefix) tools::append_banner(*text_prefix, path, tools::bfd_target_name(file->info()));
  auto data = file->sframe_section(section_name);
  if (!data) {
    if (data.error().code == Errc::kNoSFrameSection) {
      if (text_prefix) *text_prefix += fmt::format("No {} section present\n\n", section_name);
      why = fmt::format("no section {}", section_name);
    } else {
      why = tools::error_text(data.error());
    }
    return std::nullopt;
  }
  auto sec = Section::parse(data->bytes, data->address);
  if (!sec) {
    why = fmt::format("section {}: {}", section_name, tools::error_text(sec.error()));
    return std::nullopt;
  }
  if (auto ok = validate(*sec, strictness); !ok) {
    why = fmt::format("section {}: {}", section_name, tools::error_text(ok.error()));
    return std::nullopt;
  }
  Section s = *sec;
  return Loaded{std::move(*file), std::move(*data), s};
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

void complain(const std::string& path, const std::string& why) {
  std::fflush(stdout);
  fmt::print(stderr, "sframe: {}: {}\n", path, why);
}

Json document(const char* command) {
  Json j;
  j["sframepp_json"] = kJsonVersion;
  j["command"] = command;
  return j;
}

int run_dump(const std::vector<std::string>& files, const std::string& section, bool json) {
  int rc = 0;
  Json doc = document("dump");
  doc["files"] = Json::array();
  for (const auto& path : files) {
    std::string out, why;
    auto l = load(path, section, Strictness::kLenient, why, &out);
    if (json) {
      Json f;
      f["file"] = path;
      if (l) {
        f["elf_format"] = std::string(tools::bfd_target_name(l->file.info()));
        f["section"] = tools::section_json(l->section, l->data.name);
      } else {
        f["error"] = why;
        rc = 1;
        complain(path, why);
      }
      doc["files"].push_back(std::move(f));
      continue;
    }
    if (l) {
      if (auto ok = tools::append_section(out, l->section, l->data.name); !ok) {
        why = fmt::format("section {}: {}", section, tools::error_text(ok.error()));
        l.reset();
      }
    }
    print(out);
    if (!l) {
      complain(path, why);
      rc = 1;
    }
  }
  if (json) print(doc.dump(2) + "\n");
  return rc;
}

// Replaces the SFrame section of `l` by raw section bytes given as
// FILE[@ADDRESS] (default address: the file's own section's).
bool use_raw(Loaded& l, const std::string& arg, std::string& why);

int run_verify(const std::vector<std::string>& files, const std::string& section, bool json, const std::string& raw) {
  int rc = 0;
  Json doc = document("verify");
  doc["files"] = Json::array();
  for (const auto& path : files) {
    std::string why;
    std::optional<Loaded> l;
    if (raw.empty()) {
      l = load(path, section, Strictness::kStrict, why, nullptr, true);
    } else if (auto file = open_for_cfi(path, why); file) {
      // The file need not have SFrame of its own (e.g. `gen` output for it).
      elf::SFrameSectionData none;
      if (auto own = file->sframe_section(section)) none.address = own->address;
      l.emplace(Loaded{std::move(*file), std::move(none), Section{}});
      if (!use_raw(*l, raw, why)) l.reset();
    }
    Json f;
    f["file"] = path;
    f["ok"] = l.has_value();
    if (!l) {
      rc = 1;
      f["error"] = why;
      if (!json) complain(path, why);
      doc["files"].push_back(std::move(f));
      continue;
    }
    f["version"] = static_cast<int>(l->section.version());
    f["num_fdes"] = l->section.num_fdes();
    f["num_fres"] = l->section.header().num_fres;
    // The semantic half: the same recovery rules as the file's DWARF CFI.
    // Its verdict comes first on the verdict line, so that line never says
    // "ok" about a file that fails.
    const tools::DwarfVerdict d = tools::verify_against_dwarf(l->file, l->section, f);
    if (d.failed) {
      rc = 1;
      f["ok"] = false;
      f["error"] = d.error;
    }
    if (!json) {
      fmt::print("{}: {}; {}\n", path, d.failed ? "FAILED: format valid" : "format ok", d.summary);
      fmt::print("  {}: SFrame v{}, {} FDEs, {} FREs\n", l->data.name, static_cast<int>(l->section.version()),
                 l->section.num_fdes(), l->section.header().num_fres);
      print(d.details);
      if (d.failed) complain(path, d.error);
    }
    doc["files"].push_back(std::move(f));
  }
  if (json) print(doc.dump(2) + "\n");
  return rc;
}

std::optional<std::uint64_t> parse_pc(const std::string& s) {
  try {
    std::size_t used = 0;
    const unsigned long long v = std::stoull(s, &used, 0);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

int run_lookup(const std::string& path, const std::vector<std::string>& pcs, const std::string& section, bool json) {
  std::string why;
  auto l = load(path, section, Strictness::kLenient, why);
  if (!l) {
    complain(path, why);
    return 1;
  }
  auto index = FdeIndex::build(l->section);
  if (!index) {
    complain(path, tools::error_text(index.error()));
    return 1;
  }
  const auto syms = elf::SymbolTable::read(l->file);
  int rc = 0;
  Json doc = document("lookup");
  doc["file"] = path;
  doc["results"] = Json::array();
  for (const auto& text : pcs) {
    const auto pc = parse_pc(text);
    Json r;
    r["pc"] = text;
    if (!pc) {
      rc = 1;
      r["found"] = false;
      r["reason"] = "not a number";
      if (!json) fmt::print("{}: not a number\n", text);
      doc["results"].push_back(std::move(r));
      continue;
    }
    r["pc"] = tools::hex(*pc);
    const auto sym = syms.find(*pc);
    const std::string name = sym ? syms.display_name(*sym->symbol) : std::string();
    const std::string where = sym ? fmt::format(" <{}+0x{:x}>", name, sym->offset) : std::string();
    auto m = index->find(*pc);
    r["found"] = m.has_value();
    if (sym) r["symbol"] = name;
    if (!m) {
      rc = 1;
      r["reason"] = std::string(describe(m.error().code));
      if (!json) fmt::print("0x{:x}{}: {}\n", *pc, where, describe(m.error().code));
      doc["results"].push_back(std::move(r));
      continue;
    }
    const Section& s = l->section;
    r["fde"] = tools::fde_json(m->fde);
    r["fre"] = tools::fre_json(s, m->fde, m->fre, m->row);
    if (!json) {
      fmt::print("0x{:x}{}: function 0x{:x}, size {} (FDE {}{}{})\n", *pc, where, m->fde.start_pc, m->fde.size,
                 m->fde.index, m->fde.pc_type == PcType::kMask ? ", PC mask" : "",
                 m->fde.fde_type == FdeType::kFlex ? ", flexible" : "");
      fmt::print("  FRE {} from +0x{:x}: {}\n", m->fre.index, m->fre.start_offset, tools::rules_in_words(s, m->row));
    }
    doc["results"].push_back(std::move(r));
  }
  if (json) print(doc.dump(2) + "\n");
  return rc;
}

void print_stats(const std::string& path, const Loaded& l, const tools::Stats& st) {
  const Section& s = l.section;
  const auto pct = [](std::uint64_t a, std::uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; };
  std::string flags;
  for (const auto& f : tools::flag_names(s.header().flags, s.version())) flags += (flags.empty() ? "" : ", ") + f;
  fmt::print("{}: section {} at 0x{:x}{}\n", path, l.data.name, l.data.address,
             l.data.from_segment ? " (from PT_GNU_SFRAME)" : "");
  fmt::print("  version {}, {}, {} byte order, flags: {}\n", static_cast<int>(s.version()), tools::abi_name(s.abi()),
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
  const std::uint64_t eh = st.eh_frame_bytes + st.eh_frame_hdr_bytes;
  fmt::print("  bytes: .sframe {} (header accounts for {}); .eh_frame {} + .eh_frame_hdr {} = {}{}\n",
             st.sframe_bytes, st.used_bytes, st.eh_frame_bytes, st.eh_frame_hdr_bytes, eh,
             eh ? fmt::format(" (.sframe is {:.1f}% of that)", pct(st.sframe_bytes, eh)) : "");
  fmt::print("  .text coverage: {} of {} bytes ({:.1f}%)\n", st.text_covered, st.text_bytes,
             pct(st.text_covered, st.text_bytes));
}

int run_stat(const std::vector<std::string>& files, const std::string& section, bool json) {
  int rc = 0;
  Json doc = document("stat");
  doc["files"] = Json::array();
  for (const auto& path : files) {
    std::string why;
    auto l = load(path, section, Strictness::kLenient, why);
    Json f;
    f["file"] = path;
    std::optional<tools::Stats> st;
    if (l) {
      auto r = tools::compute_stats(l->section, l->file.sections(), l->data.bytes.size());
      if (r) st = *r; else why = tools::error_text(r.error());
    }
    if (!st) {
      rc = 1;
      complain(path, why);
      f["error"] = why;
    } else if (json) {
      f["section"] = l->data.name;
      f["address"] = tools::hex(l->data.address);
      f["from_segment"] = l->data.from_segment;
      f["stats"] = tools::stats_json(l->section, *st);
    } else {
      print_stats(path, *l, *st);
    }
    doc["files"].push_back(std::move(f));
  }
  if (json) print(doc.dump(2) + "\n");
  return rc;
}

// Reads a whole file; nullopt on failure.
std::optional<std::vector<std::byte>> read_all(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::vector<std::byte> out;
  std::byte buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  const bool ok = !std::ferror(f);
  std::fclose(f);
  if (!ok) return std::nullopt;
  return out;
}

// One merge input: an ELF file (its SFrame section at its address), or raw
// section bytes given as FILE@ADDRESS.
std::optional<SectionSpec> merge_input(const std::string& arg, const std::string& section, std::string& why) {
  const auto at = arg.rfind('@');
  if (at != std::string::npos) {
    const std::string path = arg.substr(0, at);
    const auto addr = parse_pc(arg.substr(at + 1));
    auto bytes = read_all(path);
    if (!addr || !bytes) {
      why = addr ? "cannot read file" : "bad address after @";
      return std::nullopt;
    }
    auto sec = Section::parse(*bytes, *addr);
    Expected<void> ok = sec ? validate(*sec, Strictness::kLenient) : Expected<void>(Unexpected{sec.error()});
    if (!ok) {
      why = tools::error_text(ok.error());
      return std::nullopt;
    }
    auto spec = to_spec(*sec);
    if (!spec) why = tools::error_text(spec.error());
    return spec ? std::optional(*spec) : std::nullopt;
  }
  auto l = load(arg, section, Strictness::kLenient, why);
  if (!l) return std::nullopt;
  auto spec = to_spec(l->section);
  if (!spec) {
    why = tools::error_text(spec.error());
    return std::nullopt;
  }
  return *spec;
}

bool use_raw(Loaded& l, const std::string& arg, std::string& why) {
  const auto at = arg.rfind('@');
  const std::string path = arg.substr(0, at);
  std::uint64_t addr = l.data.address;
  if (at != std::string::npos) {
    const auto a = parse_pc(arg.substr(at + 1));
    if (!a) {
      why = "bad address after @";
      return false;
    }
    addr = *a;
  }
  auto bytes = read_all(path);
  if (!bytes) {
    why = fmt::format("{}: cannot read", path);
    return false;
  }
  l.data.owned = std::move(*bytes);
  l.data.bytes = l.data.owned;
  l.data.address = addr;
  l.data.name = path;
  auto sec = Section::parse(l.data.bytes, addr);
  Expected<void> ok = sec ? validate(*sec, Strictness::kStrict) : Expected<void>(Unexpected{sec.error()});
  if (!ok) {
    why = fmt::format("{}: {}", path, tools::error_text(ok.error()));
    return false;
  }
  l.section = *sec;
  return true;
}

int run_merge(const std::vector<std::string>& inputs, const std::string& out_path, const std::string& address,
              int format_version, const std::string& section) {
  // An input that is also the output would be lost if the merge is wrong.
  for (const auto& in : inputs) {
    const auto at = in.rfind('@');
    if (same_file(in, out_path) || (at != std::string::npos && same_file(in.substr(0, at), out_path))) {
      complain(out_path, fmt::format("the output is the input {}", in));
      return 1;
    }
  }
  std::vector<SectionSpec> specs;
  for (const auto& in : inputs) {
    std::string why;
    auto spec = merge_input(in, section, why);
    if (!spec) {
      complain(in, why);
      return 1;
    }
    specs.push_back(std::move(*spec));
  }
  const auto addr = parse_pc(address);
  if (!addr) {
    complain(address, "bad output address");
    return 1;
  }
  auto merged = merge(specs, *addr, format_version == 2 ? Version::kV2 : Version::kV3);
  if (!merged) {
    complain(out_path, tools::error_text(merged.error()));
    return 1;
  }
  auto bytes = encode(*merged);
  if (!bytes) {
    complain(out_path, tools::error_text(bytes.error()));
    return 1;
  }
  if (auto ok = write_file(out_path, *bytes); !ok) {
    complain(out_path, "cannot write: " + tools::write_error_text(ok.error()));
    return 1;
  }
  // With the section on standard output, the summary goes to stderr.
  fmt::print(out_path == "-" ? stderr : stdout, "{}: SFrame v{} section for address 0x{:x}: {} functions, {} bytes\n", out_path, format_version, *addr,
             merged->functions.size(), bytes->size());
  return 0;
}

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sframe: decode, validate, look up and dump SFrame stack-trace sections"};
  app.require_subcommand(1);
  std::string section = ".sframe";
  bool json = false;
  const auto common = [&](CLI::App* cmd) {
    cmd->add_option("--section", section, "Name of the SFrame section")->capture_default_str();
    cmd->add_flag("--json", json, "Print JSON (schema: docs/json.md)");
  };

  std::vector<std::string> files;
  auto* dump = app.add_subcommand("dump", "Print SFrame sections as `objdump --sframe` does");
  dump->add_option("files", files, "ELF files (default: this program itself)");
  common(dump);

  std::vector<std::string> vfiles;
  auto* verify = app.add_subcommand("verify", "Check every rule of the SFrame specification");
  std::string vraw;
  verify->add_option("files", vfiles, "ELF files")->required();
  verify->add_option("--raw", vraw, "Check this raw section (FILE[@ADDRESS]) instead of the file's own");
  common(verify);

  std::string lfile;
  std::vector<std::string> pcs;
  auto* lookup = app.add_subcommand("lookup", "Show the function and CFA/RA/FP rules covering PCs");
  lookup->add_option("file", lfile, "ELF file")->required();
  lookup->add_option("pcs", pcs, "PCs (hex with 0x, or decimal)")->required();
  common(lookup);

  std::vector<std::string> sfiles;
  auto* stat = app.add_subcommand("stat", "Summarize SFrame sections: counts, encodings, sizes, coverage");
  stat->add_option("files", sfiles, "ELF files")->required();
  common(stat);

  std::vector<std::string> minputs;
  std::string mout, maddr = "0";
  int mversion = 3;
  auto* mergecmd = app.add_subcommand("merge", "Combine SFrame sections into one, as a linker does");
  mergecmd->add_option("inputs", minputs, "ELF files, or raw sections as FILE@ADDRESS")->required();
  mergecmd->add_option("-o,--output", mout, "Raw section to write (-: standard output)")->required();
  mergecmd->add_option("--address", maddr, "Address of the output section")->capture_default_str();
  mergecmd->add_option("--format-version", mversion, "SFrame version to write")
      ->check(CLI::IsMember({2, 3}))
      ->capture_default_str();
  mergecmd->add_option("--section", section, "Name of the SFrame section in ELF inputs")->capture_default_str();

  std::string gfile;
  tools::GenOptions gopt;
  auto* gen = app.add_subcommand("gen", "Generate SFrame from the DWARF CFI (.eh_frame) of a linked ELF file");
  gen->add_option("file", gfile, "ELF file")->required();
  gen->add_option("--format-version", gopt.version, "SFrame version to write")
      ->check(CLI::IsMember({2, 3}))
      ->capture_default_str();
  gen->add_option("-o,--output", gopt.output, "Write the raw section here (-: standard output)");
  gen->add_option("--elf", gopt.elf_output,
                  "Write a copy of FILE with the section added as .sframe (not loaded: no segment maps it)");
  gen->add_flag("--in-place", gopt.in_place,
                "Replace FILE by its copy with .sframe added (atomically: a failure leaves FILE as it was)");
  gen->add_option("--address", gopt.address, "Section address (default: the file's .sframe address, else 0)");
  gen->add_flag("--json", gopt.json, "Print the summary as JSON");

  int spid = 0;
  tools::StackOptions sopt;
  auto* stack = app.add_subcommand("stack", "Print the stack of every thread of a running process (like eu-stack -p)");
  stack->add_option("pid", spid, "Process ID")->required()->check(CLI::PositiveNumber);
  tools::register_stack_options(*stack, sopt);

  CLI11_PARSE(app, argc, argv);

  if (*dump) {
    if (files.empty()) files.push_back(self_path());
    return run_dump(files, section, json);
  }
  if (*verify) return run_verify(vfiles, section, json, vraw);
  if (*lookup) return run_lookup(lfile, pcs, section, json);
  if (*stat) return run_stat(sfiles, section, json);
  if (*mergecmd) return run_merge(minputs, mout, maddr, mversion, section);
  if (*gen) return tools::run_gen(gfile, gopt);
  if (*stack) return tools::run_stack(static_cast<pid_t>(spid), sopt);
  return 2;
}
