// The `sframe` command-line tool.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "objdump_text.hpp"
#include "sframe/elf.hpp"
#include "sframe/section.hpp"

namespace {

using namespace sframe;

std::string error_text(const Error& e) {
  std::string s = fmt::format("{} [{}] at byte 0x{:x}", describe(e.code), code_name(e.code), e.offset);
  if (e.fde != kNoIndex) s += fmt::format(", FDE {}", e.fde);
  if (e.fre != kNoIndex) s += fmt::format(", FRE {}", e.fre);
  if (e.value != 0) s += fmt::format(" (value {:#x})", e.value);
  return s;
}

void flush(std::string& out) {
  std::fwrite(out.data(), 1, out.size(), stdout);
  out.clear();
}

// Dumps one file; returns false (after one line on stderr) on any error.
bool dump_file(const std::string& path, const std::string& section_name) {
  std::string out;
  auto fail = [&](const std::string& why) {
    flush(out);
    std::fflush(stdout);
    fmt::print(stderr, "sframe: {}: {}\n", path, why);
    return false;
  };
  auto file = elf::ElfFile::open(path);
  if (!file) return fail(error_text(file.error()));
  tools::append_banner(out, path, tools::bfd_target_name(file->info()));
  auto data = file->sframe_section(section_name);
  if (!data) {
    if (data.error().code == Errc::kNoSFrameSection) {
      out += fmt::format("No {} section present\n\n", section_name);
      return fail(fmt::format("no section {}", section_name));
    }
    return fail(error_text(data.error()));
  }
  auto sec = Section::parse(data->bytes, data->address);
  if (!sec) return fail(fmt::format("section {}: {}", section_name, error_text(sec.error())));
  if (auto ok = validate(*sec, Strictness::kLenient); !ok)
    return fail(fmt::format("section {}: {}", section_name, error_text(ok.error())));
  if (auto ok = tools::append_section(out, *sec, data->name); !ok)
    return fail(fmt::format("section {}: {}", section_name, error_text(ok.error())));
  flush(out);
  return true;
}

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sframe: decode, validate and dump SFrame stack-trace sections"};
  app.require_subcommand(1);

  std::vector<std::string> files;
  std::string section = ".sframe";
  auto* dump = app.add_subcommand("dump", "Print SFrame sections as `objdump --sframe` does");
  dump->add_option("files", files, "ELF files (default: this program itself)");
  dump->add_option("--section", section, "Name of the SFrame section")->capture_default_str();

  std::vector<std::string> vfiles;
  auto* verify = app.add_subcommand("verify", "Validate SFrame sections strictly");
  verify->add_option("files", vfiles, "ELF files")->required();
  verify->add_option("--section", section, "Name of the SFrame section")->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  int rc = 0;
  if (*dump) {
    if (files.empty()) files.push_back(self_path());
    for (const auto& f : files)
      if (!dump_file(f, section)) rc = 1;
  } else if (*verify) {
    for (const auto& path : vfiles) {
      auto file = elf::ElfFile::open(path);
      auto data = file ? file->sframe_section(section) : Expected<elf::SFrameSectionData>(Unexpected{file.error()});
      if (!data) {
        fmt::print(stderr, "sframe: {}: {}\n", path, error_text(data.error()));
        rc = 1;
        continue;
      }
      auto sec = Section::parse(data->bytes, data->address);
      Expected<void> ok = sec ? validate(*sec, Strictness::kStrict) : Expected<void>(Unexpected{sec.error()});
      if (!ok) {
        fmt::print(stderr, "sframe: {}: section {}: {}\n", path, data->name, error_text(ok.error()));
        rc = 1;
        continue;
      }
      fmt::print("{}: {} ok: SFrame v{}, {} FDEs, {} FREs\n", path, data->name, static_cast<int>(sec->version()),
                 sec->num_fdes(), sec->header().num_fres);
    }
  }
  return rc;
}
