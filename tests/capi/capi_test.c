/* SPDX-License-Identifier: MIT */
/*
 * C unit tests of the C API (C99): error paths (bad bytes -> status and byte
 * offset, null handles and pointers, truncated buffers), the encoder round
 * trip, and an unwind over a hand-made stack. Run under ASan + UBSan in the
 * sanitizer suite. Truth: the header layout and sizes the SFrame spec fixes
 * (28-byte header, 16-byte v3 FDEs), the FDE count GNU objdump prints in the
 * corpus's golden dump, and values this test writes itself.
 * Usage: capi_test CORPUS_DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_test_support.h"
#include "sframe/sframe.h"


/* A hand-made stack for sframe_unwind: 4 words at `base` (none: NULL). */
struct stack_image {
  uint64_t base;
  const uint64_t *words;
};
static int capi_test_read(void *ctx, uint64_t addr, uint64_t *value);

/* The FDE count objdump prints ("Num FDEs: N") in a golden dump. */
static long golden_num_fdes(const char *path) {
  char line[256];
  long n = -1;
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, " Num FDEs: %ld", &n) == 1) break;
  fclose(f);
  return n;
}

static void test_null_arguments(void) {
  sframe_section *s = (sframe_section *)1;
  sframe_error e;
  sframe_fde fde;
  sframe_match m;
  sframe_section_info info;
  size_t n = 7;
  unsigned char byte = 0;
  CHECK(sframe_section_open_bytes(NULL, 4, 0, 0, &s, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(e.status == SFRAME_E_INVALID_ARGUMENT && e.fde == SFRAME_NO_INDEX);
  CHECK(sframe_section_open_bytes(&byte, 1, 0, 0, NULL, NULL) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_open_bytes(&byte, 1, 0, 0x80, &s, NULL) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_open_elf(NULL, NULL, &s, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_get_info(NULL, &info) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_validate(NULL, SFRAME_VALIDATE_STRICT, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_get_fde(NULL, 0, &fde, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_get_fres(NULL, 0, 0, NULL, 0, &n, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_find(NULL, 0x1000, &m, &e) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_section_close(NULL) == SFRAME_OK);
  CHECK(sframe_encoder_create(NULL, NULL) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_encoder_destroy(NULL) == SFRAME_OK);
  CHECK(sframe_unwinder_destroy(NULL) == SFRAME_OK);
  CHECK(sframe_free(NULL) == SFRAME_OK);
  CHECK(sframe_unwind(NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL) == SFRAME_E_INVALID_ARGUMENT);
  {
    /* More modules than memory can hold: a status, not an exception. */
    sframe_unwinder *u = (sframe_unwinder *)1;
    CHECK(sframe_unwinder_create(SIZE_MAX / 2, &u) == SFRAME_E_NO_MEMORY && u == NULL);
  }
}

static void test_strerror(void) {
  int st;
  for (st = -5; st < 80; ++st) CHECK(sframe_strerror(st) != NULL && sframe_strerror(st)[0] != '\0');
  CHECK(strstr(sframe_strerror(SFRAME_E_BAD_MAGIC), "magic") != NULL);
  CHECK(strcmp(sframe_strerror(1000), "unknown status") == 0);
}

static void test_bad_bytes(const char *corpus) {
  char path[1024], golden[1100];
  sframe_section *s = NULL, *elf = NULL;
  sframe_error e;
  sframe_section_info info;
  unsigned char *copy;
  size_t cut;
  long fdes;
  unsigned char junk[64];
  memset(junk, 0xab, sizeof junk);
  /* Shorter than the 28-byte header (spec §2.2). */
  CHECK(sframe_section_open_bytes(junk, 27, 0, 0, &s, &e) == SFRAME_E_TRUNCATED_HEADER);
  CHECK(e.status == SFRAME_E_TRUNCATED_HEADER && e.offset == 0 && s == NULL);
  CHECK(sframe_section_open_bytes(junk, 0, 0, 0, &s, &e) == SFRAME_E_TRUNCATED_HEADER);
  /* Magic 0xdee2 in neither byte order. */
  CHECK(sframe_section_open_bytes(junk, sizeof junk, 0, 0, &s, &e) == SFRAME_E_BAD_MAGIC);
  CHECK(e.offset == 0);

  /* A real section (GNU ld), then cut short at every length. */
  CHECK(capi_test_corpus_path(path, sizeof path, corpus, "x86_64-v3-linked/basic"));
  snprintf(golden, sizeof golden, "%s.objdump.txt", path);
  fdes = golden_num_fdes(golden);
  CHECK(fdes > 0);
  CHECK(sframe_section_open_elf(path, NULL, &elf, &e) == SFRAME_OK);
  if (!elf) return;
  CHECK(sframe_section_get_info(elf, &info) == SFRAME_OK);
  CHECK((long)info.num_fdes == fdes && info.version == 3 && info.abi == SFRAME_ABI_AMD64_LITTLE);
  CHECK(sframe_section_validate(elf, SFRAME_VALIDATE_STRICT, &e) == SFRAME_OK);
  {
    /* The bytes themselves, through the section's own read-back: FDE
     * index past the end names the index. */
    sframe_fde fde;
    CHECK(sframe_section_get_fde(elf, info.num_fdes, &fde, &e) == SFRAME_E_FDE_INDEX_OUT_OF_RANGE);
    CHECK(e.value == info.num_fdes || e.fde == info.num_fdes);
  }
  /* Cut copies: the header reads (28 bytes), the FDE table ends at
   * 28 + 16 x num_fdes (v3, no aux header in ld's output), so each cut
   * below it breaks a named rule at an offset inside the bytes given. */
  {
    unsigned char *whole = NULL;
    size_t size = 0;
    sframe_section *tmp = NULL;
    /* The section's raw bytes: found in the file by its magic (0xdee2,
     * little-endian), version 3 and the counts of the ELF path. */
    whole = capi_test_read_file(path, &size);
    CHECK(whole != NULL);
    if (whole) {
      size_t at, found = (size_t)-1;
      for (at = 0; at + 4 <= size; ++at)
        if (whole[at] == 0xe2 && whole[at + 1] == 0xde && whole[at + 2] == 3 &&
            sframe_section_open_bytes(whole + at, info.used_size, 0, SFRAME_OPEN_NO_COPY, &tmp, NULL) == SFRAME_OK) {
          sframe_section_info ti;
          sframe_section_get_info(tmp, &ti);
          sframe_section_close(tmp);
          if (ti.num_fdes == info.num_fdes && ti.num_fres == info.num_fres) {
            found = at;
            break;
          }
        }
      CHECK(found != (size_t)-1);
      if (found != (size_t)-1) {
        for (cut = 0; cut < info.used_size; ++cut) {
          sframe_status st;
          copy = malloc(cut ? cut : 1);
          memcpy(copy, whole + found, cut);
          st = sframe_section_open_bytes(copy, cut, 0, 0, &s, &e);
          if (cut < 28) {
            CHECK(st == SFRAME_E_TRUNCATED_HEADER);
          } else if (cut < 28 + 16 * (size_t)info.num_fdes) {
            CHECK(st == SFRAME_E_FDE_TABLE_PAST_END);
          } else {
            CHECK(st == SFRAME_E_FRE_SECTION_PAST_END);
          }
          CHECK(st != SFRAME_OK && e.status == (int32_t)st && e.offset <= cut);
          CHECK(s == NULL);
          free(copy);
        }
        /* A bad FRE info byte (data-word size code 3) in the first FRE:
         * strict validation names FDE 0, FRE 0 at the FRE's offset. */
        {
          sframe_fre fre;
          size_t n = 0, info_at;
          CHECK(sframe_section_get_fres(elf, 0, 0, &fre, 1, &n, &e) == SFRAME_OK && n == 1);
          copy = malloc(info.used_size);
          memcpy(copy, whole + found, info.used_size);
          /* The info byte sits right before the data words (spec §2.4). */
          info_at = fre.section_offset + fre.encoded_size - fre.dataword_count * fre.dataword_size - 1;
          copy[info_at] |= 0x60;
          CHECK(sframe_section_open_bytes(copy, info.used_size, 0, SFRAME_OPEN_NO_COPY, &s, &e) == SFRAME_OK);
          CHECK(sframe_section_validate(s, SFRAME_VALIDATE_LENIENT, &e) == SFRAME_E_BAD_DATAWORD_SIZE);
          CHECK(e.fde == 0 && e.fre == 0 && e.offset == info_at);
          n = 5;
          CHECK(sframe_section_get_fres(s, 0, 0, &fre, 1, &n, &e) == SFRAME_E_BAD_DATAWORD_SIZE && n == 0);
          sframe_section_close(s);
          free(copy);
        }
      }
      free(whole);
    }
  }
  sframe_section_close(elf);
  /* Files that are not there or not ELF. */
  CHECK(sframe_section_open_elf("/nonexistent/file", NULL, &s, &e) == SFRAME_E_IO && s == NULL);
  CHECK(capi_test_corpus_path(path, sizeof path, corpus, "x86_64-v3-linked/basic.objdump.txt"));
  CHECK(sframe_section_open_elf(path, NULL, &s, &e) == SFRAME_E_ELF && s == NULL);
}

/* The encoder: rows in, a strict-valid section out, the same rows back. */
static void test_encoder(void) {
  sframe_encoder_header h;
  sframe_encoder *enc = NULL;
  sframe_function f;
  sframe_row_spec rows[2];
  sframe_error e;
  void *bytes = NULL;
  size_t size = 0, n = 0;
  sframe_section *s = NULL;
  sframe_fre fres[4];
  memset(&h, 0, sizeof h);
  h.version = 3;
  h.abi = SFRAME_ABI_AMD64_LITTLE;
  h.cfa_fixed_ra_offset = -8;
  h.section_address = 0x10000;
  CHECK(sframe_encoder_create(&h, &enc) == SFRAME_OK);
  memset(&f, 0, sizeof f);
  f.start_pc = 0x1000;
  f.size = 32;
  memset(rows, 0, sizeof rows);
  /* CFA = SP + 8 at entry; CFA = SP + 16, FP at CFA - 16 after push %rbp. */
  rows[0].start_offset = 0;
  rows[0].row.cfa.kind = SFRAME_RULE_EXPR;
  rows[0].row.cfa.base = SFRAME_BASE_REGISTER;
  rows[0].row.cfa.regnum = 7;
  rows[0].row.cfa.offset = 8;
  rows[0].row.ra.kind = SFRAME_RULE_EXPR;
  rows[0].row.ra.flags = SFRAME_RULE_DEREF | SFRAME_RULE_FROM_HEADER;
  rows[0].row.ra.offset = -8;
  rows[1] = rows[0];
  rows[1].start_offset = 1;
  rows[1].row.cfa.offset = 16;
  rows[1].row.fp.kind = SFRAME_RULE_EXPR;
  rows[1].row.fp.flags = SFRAME_RULE_DEREF;
  rows[1].row.fp.offset = -16;
  /* Unsorted rows: refused, naming function 0 and row 1. */
  {
    sframe_row_spec bad[2];
    bad[0] = rows[1];
    bad[1] = rows[0];
    CHECK(sframe_encoder_add_function(enc, &f, bad, 2, &e) == SFRAME_E_NOT_REPRESENTABLE);
    CHECK(e.fde == 0 && e.fre == 1);
    bad[0] = rows[0];
    bad[0].row.cfa.kind = 9;
    CHECK(sframe_encoder_add_function(enc, &f, bad, 1, &e) == SFRAME_E_INVALID_ARGUMENT);
  }
  CHECK(sframe_encoder_add_function(enc, &f, rows, 2, &e) == SFRAME_OK);
  CHECK(sframe_encoder_finish(enc, &bytes, &size, &e) == SFRAME_OK && bytes && size > 28);
  CHECK(sframe_encoder_destroy(enc) == SFRAME_OK);
  CHECK(sframe_section_open_bytes(bytes, size, 0x10000, 0, &s, &e) == SFRAME_OK);
  CHECK(sframe_free(bytes) == SFRAME_OK); /* the handle holds a copy */
  if (!s) return;
  CHECK(sframe_section_validate(s, SFRAME_VALIDATE_STRICT, &e) == SFRAME_OK);
  CHECK(sframe_section_get_fres(s, 0, 0, fres, 4, &n, &e) == SFRAME_OK && n == 2);
  CHECK(fres[0].start_offset == 0 && fres[0].cfa_base_sp && fres[0].row.cfa.offset == 8);
  CHECK(fres[0].row.ra.kind == SFRAME_RULE_EXPR && (fres[0].row.ra.flags & SFRAME_RULE_FROM_HEADER) &&
        fres[0].row.ra.offset == -8);
  CHECK(fres[0].row.fp.kind == SFRAME_RULE_UNCHANGED);
  CHECK(fres[1].start_offset == 1 && fres[1].row.cfa.offset == 16 && fres[1].row.fp.kind == SFRAME_RULE_EXPR &&
        fres[1].row.fp.offset == -16);
  /* From FRE 1 on only. */
  CHECK(sframe_section_get_fres(s, 0, 1, fres, 4, &n, &e) == SFRAME_OK && n == 1 && fres[0].index == 1);
  {
    sframe_match m;
    CHECK(sframe_section_find(s, 0x1005, &m, &e) == SFRAME_OK && m.fre.index == 1);
    CHECK(sframe_section_find(s, 0x1020, &m, &e) == SFRAME_E_PC_NOT_COVERED);
  }

  /* Unwind through that function over a hand-made stack: frame 0 at
   * 0x1005 (after push %rbp), SP = 0x7000: CFA = 0x7010, RA at 0x7008,
   * saved FP at 0x7000. The caller's PC 0x5555 is in no module. */
  {
    static uint64_t stack[4];
    sframe_unwinder *u = NULL;
    sframe_regs regs;
    sframe_frame frames[3];
    sframe_unwind_result r;
    sframe_unwind_options o;
    struct stack_image m;
    stack[0] = 0x7100; /* saved RBP */
    stack[1] = 0x5555; /* RA */
    m.base = 0x7000;
    m.words = stack;
    CHECK(sframe_unwinder_create(2, &u) == SFRAME_OK);
    CHECK(sframe_unwinder_add_module(u, s, 0x1000, 0x1020, 0, &e) == SFRAME_OK);
    CHECK(sframe_unwinder_add_module(u, s, 0x1010, 0x1030, 0, &e) == SFRAME_E_MODULES_OVERLAP);
    CHECK(sframe_unwinder_add_module(u, s, 0x2000, 0x2000, 0, &e) == SFRAME_E_BAD_MODULE_RANGE);
    memset(&regs, 0, sizeof regs);
    regs.arch = SFRAME_ARCH_AMD64;
    regs.pc = 0x1005;
    regs.dwarf[7] = 0x7000;
    regs.dwarf[6] = 0x1234;
    regs.valid = (1u << 7) | (1u << 6);
    CHECK(sframe_unwind_options_init(&o) == SFRAME_OK && o.pauth_va_bits == 48);
    CHECK(sframe_unwind(u, &regs, capi_test_read, &m, &o, frames, 3, &r) == SFRAME_OK);
    CHECK(r.count == 2 && r.stop == SFRAME_STOP_NO_SFRAME_FOR_PC && r.address == 0x5554);
    CHECK(frames[0].pc == 0x1005 && frames[0].sp == 0x7000 && frames[0].cfa == 0x7010 &&
          !(frames[0].flags & SFRAME_FRAME_RETURN_ADDRESS));
    CHECK(frames[1].pc == 0x5555 && frames[1].sp == 0x7010 && frames[1].fp == 0x7100 &&
          (frames[1].flags & SFRAME_FRAME_RETURN_ADDRESS) && (frames[1].flags & SFRAME_FRAME_FP_VALID));
    /* One frame of room: the depth limit. */
    CHECK(sframe_unwind(u, &regs, capi_test_read, &m, NULL, frames, 1, &r) == SFRAME_OK);
    CHECK(r.count == 1 && r.stop == SFRAME_STOP_DEPTH_LIMIT);
    /* Memory that reads nothing: the RA is unreadable at 0x7008. */
    m.words = NULL;
    CHECK(sframe_unwind(u, &regs, capi_test_read, &m, NULL, frames, 3, &r) == SFRAME_OK);
    CHECK(r.count == 1 && r.stop == SFRAME_STOP_UNREADABLE_MEMORY && r.address == 0x7008);
    regs.arch = 7;
    CHECK(sframe_unwind(u, &regs, capi_test_read, &m, NULL, frames, 3, &r) == SFRAME_E_INVALID_ARGUMENT);
    CHECK(sframe_unwinder_remove_module(u, 0x1000) == SFRAME_OK);
    CHECK(sframe_unwinder_remove_module(u, 0x1000) == SFRAME_E_INVALID_ARGUMENT);
    CHECK(sframe_unwinder_destroy(u) == SFRAME_OK);
  }
  sframe_section_close(s);
}

/* Reads the hand-made stack: 4 words at `base`. */
static int capi_test_read(void *ctx, uint64_t addr, uint64_t *value) {
  const struct stack_image *m = ctx;
  if (!m->words || addr < m->base || addr - m->base > 3 * 8 || (addr - m->base) % 8) return 0;
  *value = m->words[(addr - m->base) / 8];
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  test_null_arguments();
  test_strerror();
  test_bad_bytes(argv[1]);
  test_encoder();
  return capi_test_report("capi_test");
}
