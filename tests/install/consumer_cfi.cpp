// SPDX-License-Identifier: MIT
// A consumer of the cfi layer (sframepp::cfi, sframepp-cfi): SFrame
// generated from an ELF file's DWARF CFI, then the function covering a PC,
// whose start and size come from the same .cfi_startproc/.cfi_endproc as
// the FDE gas emitted (the test compares with objdump's golden dump).
#include <cstdio>
#include <cstdlib>

#include <sframe/cfi/cfi.hpp>
#include <sframe/elf/elf.hpp>
#include <sframe/format/encode.hpp>
#include <sframe/format/lookup.hpp>
#include <sframe/format/section.hpp>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  auto file = sframe::elf::ElfFile::open(argv[1]);
  if (!file) return 1;
  const std::uint64_t address = 0x10000000;  // any: parse() below uses the same
  auto gen = sframe::cfi::generate(*file, sframe::Version::kV2, address);
  if (!gen) return 1;
  auto bytes = sframe::encode(gen->spec);
  if (!bytes) return 1;
  auto sec = sframe::Section::parse(*bytes, address);
  if (!sec || !sframe::validate(*sec)) return 1;
  auto m = sframe::find(*sec, std::strtoull(argv[2], nullptr, 0));
  if (!m) return 1;
  std::printf("pc = 0x%llx, size = %u bytes\n", static_cast<unsigned long long>(m->fde.start_pc), m->fde.size);
  return 0;
}
