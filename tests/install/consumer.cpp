// SPDX-License-Identifier: MIT
// A program outside the project, built against the installed sframepp: prints
// the FDE count of a file's SFrame section and the function covering a PC.
#include <cstdio>
#include <cstdlib>

#include <sframe/elf/elf.hpp>
#include <sframe/format/lookup.hpp>
#include <sframe/format/section.hpp>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  auto file = sframe::elf::ElfFile::open(argv[1]);
  if (!file) return 1;
  auto data = file->sframe_section();
  if (!data) return 1;
  auto sec = sframe::Section::parse(data->bytes, data->address);
  if (!sec || !sframe::validate(*sec)) return 1;
  auto m = sframe::find(*sec, std::strtoull(argv[2], nullptr, 0));
  if (!m) return 1;
  std::printf("Num FDEs: %u\nfunc idx [%u]: pc = 0x%llx, size = %u bytes\n", sec->num_fdes(), m->fde.index,
              static_cast<unsigned long long>(m->fde.start_pc), m->fde.size);
  return 0;
}
