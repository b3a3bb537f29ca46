// SPDX-License-Identifier: MIT
// Prints what the kernel and the dynamic linker made of the program headers
// of this (retrofitted) executable, for tests/gen/loadable.sh to compare
// with readelf: "phdr 0xA phnum N sframe 0xS SIZE" (link-time addresses:
// getauxval(AT_PHDR) less the load bias dl_iterate_phdr gives; PT_GNU_SFRAME
// as the table in memory lists it), and writes the bytes mapped at
// PT_GNU_SFRAME to argv[1]. Exits with status 3.
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <sys/auxv.h>

static int first(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  FILE* out = fopen((const char*)arg, "wb");
  if (!out) return -1;
  unsigned long sf = 0, sf_size = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != 0x6474e554) continue;
    sf = info->dlpi_phdr[i].p_vaddr;
    sf_size = info->dlpi_phdr[i].p_memsz;
    fwrite((const void*)(info->dlpi_addr + sf), 1, sf_size, out);
  }
  fclose(out);
  printf("phdr 0x%lx phnum %d sframe 0x%lx %lu\n", getauxval(AT_PHDR) - info->dlpi_addr, info->dlpi_phnum, sf,
         sf_size);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return 1;
  dl_iterate_phdr(first, argv[1]);
  return 3;
}
