/* SPDX-License-Identifier: MIT */
/*
 * The C status a C program sees for the failures of three layers of the C++
 * library (which keeps one code enum per layer and maps them all to the
 * one flat sframe_status): an SFrame section with a bad magic number
 * (codec), a truncated ELF file (ELF), a file that does not exist (I/O).
 * Truth: the numeric values sframe.h documents for those statuses (they are
 * ABI: a mapping that moved would change them), errno's ENOENT, and the
 * byte layout the SFrame spec fixes (the magic at offset 0, spec §2.2).
 * Usage: capi_status_test CORPUS_DIR SCRATCH_DIR
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"
#include "sframe/sframe.h"


/* The values sframe.h gives these statuses (part of the ABI). */
#define kTruncatedHeader 16
#define kBadMagic 17
#define kElf 45
#define kIo 46

int main(int argc, char **argv) {
  sframe_section *s = NULL;
  sframe_error e;
  unsigned char bytes[64];
  char path[1024], out[1024];
  unsigned char *whole;
  FILE *f;
  size_t n;
  if (argc != 3) {
    fprintf(stderr, "usage: capi_status_test CORPUS_DIR SCRATCH_DIR\n");
    return 2;
  }

  /* Codec: a 28-byte header whose magic is neither 0xdee2 nor 0xe2de. */
  memset(bytes, 0, sizeof bytes);
  bytes[0] = 0x12;
  bytes[1] = 0x34;
  bytes[2] = 2; /* version */
  memset(&e, 0xff, sizeof e);
  CHECK((int)sframe_section_open_bytes(bytes, sizeof bytes, 0, 0, &s, &e) == kBadMagic);
  CHECK(e.status == kBadMagic && e.offset == 0 && e.fde == SFRAME_NO_INDEX && e.fre == SFRAME_NO_INDEX && s == NULL);
  CHECK(strstr(sframe_strerror(kBadMagic), "magic") != NULL);
  /* Shorter than the header. */
  CHECK((int)sframe_section_open_bytes(bytes, 27, 0, 0, &s, &e) == kTruncatedHeader && s == NULL);

  /* ELF: the first 40 bytes of a real ELF file (the 64-byte ELF header cut). */
  CHECK(capi_test_corpus_path(path, sizeof path, argv[1], "x86_64-v3-linked/basic"));
  whole = capi_test_read_file(path, &n);
  CHECK(whole != NULL);
  if (whole) {
    CHECK(n >= 40 && memcmp(whole, "\177ELF", 4) == 0);
    snprintf(out, sizeof out, "%s/capi_status_truncated.elf", argv[2]);
    f = fopen(out, "wb");
    CHECK(f != NULL);
    if (f) {
      CHECK(fwrite(whole, 1, 40, f) == 40);
      fclose(f);
      memset(&e, 0, sizeof e);
      CHECK((int)sframe_section_open_elf(out, NULL, &s, &e) == kElf && s == NULL);
      CHECK(e.status == kElf);
      CHECK(strstr(sframe_strerror(kElf), "ELF") != NULL);
      remove(out);
    }
    free(whole);
  }

  /* I/O: a file that is not there; errno in err.value. */
  snprintf(out, sizeof out, "%s/capi_status_missing/none.elf", argv[2]);
  memset(&e, 0, sizeof e);
  CHECK((int)sframe_section_open_elf(out, NULL, &s, &e) == kIo && s == NULL);
  CHECK(e.status == kIo && e.value == ENOENT);

  return capi_test_report("capi_status_test");
}
