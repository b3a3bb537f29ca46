// SPDX-License-Identifier: MIT
// A consumer of the format layer alone (sframepp::format, sframepp-format):
// a raw .sframe section (objcopy -O binary) and its address in, the FDE
// count and the function covering a PC out, as consumer.cpp prints them.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <sframe/format/lookup.hpp>
#include <sframe/format/section.hpp>

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  std::FILE* f = std::fopen(argv[1], "rb");
  if (f == nullptr) return 1;
  std::vector<std::byte> bytes;
  for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(static_cast<std::byte>(c));
  std::fclose(f);
  auto sec = sframe::Section::parse(bytes, std::strtoull(argv[2], nullptr, 0));
  if (!sec || !sframe::validate(*sec)) return 1;
  auto m = sframe::find(*sec, std::strtoull(argv[3], nullptr, 0));
  if (!m) return 1;
  std::printf("Num FDEs: %u\nfunc idx [%u]: pc = 0x%llx, size = %u bytes\n", sec->num_fdes(), m->fde.index,
              static_cast<unsigned long long>(m->fde.start_pc), m->fde.size);
  return 0;
}
