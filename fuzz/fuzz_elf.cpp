// SPDX-License-Identifier: MIT
// libFuzzer target: an ELF file image (section headers, PT_GNU_SFRAME
// discovery, .rela.sframe relocation of .o files), then its SFrame section
// through every check of check_section.hpp.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check_section.hpp"
#include "memfd.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = sframe::fuzz::memfd_path(data, size);
  auto file = sframe::elf::ElfFile::open(path);
  if (!file) {
    SFRAME_FUZZ_CHECK(file.error().code() == sframe::ElfErrc::kElfError);
    return 0;
  }
  const sframe::elf::ElfInfo& info = file->info();
  SFRAME_FUZZ_CHECK(info.bits == 32 || info.bits == 64);
  for (const auto& sh : file->sections()) sframe::fuzz::g_sink = sh.name.size() + sh.size;
  for (const auto policy : {sframe::elf::NamingPolicy::kEuStack, sframe::elf::NamingPolicy::kPerf}) {
    sframe::elf::SymbolOptions opt;
    opt.policy = policy;
    opt.use_debug_file = false;
    const auto table = sframe::elf::SymbolTable::read(*file, opt);
    const auto syms = table.symbols();
    for (std::size_t i = 1; i < syms.size(); ++i) SFRAME_FUZZ_CHECK(syms[i - 1].address <= syms[i].address);
    // Every symbol's own address is named, by a symbol that covers it.
    for (std::size_t i = 0; i < syms.size() && i < 64; ++i) {
      const auto hit = table.find(syms[i].address);
      SFRAME_FUZZ_CHECK(hit && hit->symbol->address + hit->offset == syms[i].address);
      sframe::fuzz::g_sink = table.display_name(*hit->symbol).size();
    }
  }
  std::string text;
  sframe::tools::append_banner(text, "fuzz.o", sframe::tools::bfd_target_name(info));

  auto data_or = file->sframe_section();
  if (!data_or) {
    const sframe::ErrorCode c = data_or.error().code();
    SFRAME_FUZZ_CHECK(c == sframe::ElfErrc::kNoSFrameSection || c == sframe::ElfErrc::kElfError ||
                      c == sframe::ElfErrc::kBadRelocation);
    return 0;
  }
  const sframe::elf::SFrameSectionData& sec = *data_or;
  if (!sec.owned.empty()) SFRAME_FUZZ_CHECK(sec.bytes.data() == sec.owned.data());
  // Checked in a heap block of exactly its size, so AddressSanitizer sees any
  // read past either end (the file mapping would hide it).
  const auto copy = std::make_unique<std::byte[]>(sec.bytes.size());
  if (!sec.bytes.empty()) std::memcpy(copy.get(), sec.bytes.data(), sec.bytes.size());
  sframe::fuzz::check_section(std::span<const std::byte>(copy.get(), sec.bytes.size()), sec.address);
  return 0;
}
