/* SPDX-License-Identifier: MIT */
/*
 * A C99 program outside the project, built against the installed
 * libsframepp through the C API only (sframe/sframe.h): opens FILE's SFrame
 * section, validates it, and prints its "Function Index" the way GNU
 * objdump --sframe does for DEFAULT FDEs (so tests compare it with the
 * corpus's golden dumps). Exit status 1 with the status text on failure.
 * Usage: consumer FILE
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sframe/sframe.h>

static int die(const char *what, sframe_status s, const sframe_error *e) {
  fprintf(stderr, "%s: %s", what, sframe_strerror(s));
  if (e) fprintf(stderr, " (offset %" PRIu64 ", fde %" PRIu32 ", fre %" PRIu32 ")", e->offset, e->fde, e->fre);
  fputc('\n', stderr);
  return 1;
}

/* "c-16": a CFA-relative stack slot; "u" when the FRE holds no rule. */
static void slot(char *buf, size_t n, const sframe_rule *r) {
  if (r->kind == SFRAME_RULE_EXPR && !(r->flags & SFRAME_RULE_FROM_HEADER))
    snprintf(buf, n, "c%+" PRId32, r->offset);
  else
    snprintf(buf, n, "u");
}

int main(int argc, char **argv) {
  sframe_section *sec = NULL;
  sframe_error err;
  sframe_section_info info;
  sframe_status s;
  uint32_t i;
  if (argc != 2) return 2;
  s = sframe_section_open_elf(argv[1], NULL, &sec, &err);
  if (s != SFRAME_OK) return die("open", s, &err);
  s = sframe_section_validate(sec, SFRAME_VALIDATE_STRICT, &err);
  if (s != SFRAME_OK) return die("validate", s, &err);
  s = sframe_section_get_info(sec, &info);
  if (s != SFRAME_OK) return die("info", s, NULL);
  printf("  Function Index :\n");
  for (i = 0; i < info.num_fdes; ++i) {
    sframe_fde fde;
    sframe_fre *fres;
    size_t n = 0, k;
    s = sframe_section_get_fde(sec, i, &fde, &err);
    if (s != SFRAME_OK) return die("fde", s, &err);
    printf("\n    func idx [%" PRIu32 "]: pc = 0x%" PRIx64 ", size = %" PRIu32 " bytes", fde.index, fde.start_pc,
           fde.size);
    if (fde.signal) printf(", attr = \"S\"");
    printf("\n    STARTPC%s      CFA       FP        RA           \n", fde.pc_type == SFRAME_PC_TYPE_MASK ? "[m]" : "   ");
    fres = calloc(fde.num_fres ? fde.num_fres : 1, sizeof *fres);
    if (!fres) return die("calloc", SFRAME_E_NO_MEMORY, NULL);
    s = sframe_section_get_fres(sec, i, 0, fres, fde.num_fres, &n, &err);
    if (s != SFRAME_OK) return die("fres", s, &err);
    for (k = 0; k < n; ++k) {
      const sframe_fre *f = &fres[k];
      char cfa[32], fp[32], ra[32];
      uint64_t start = fde.pc_type == SFRAME_PC_TYPE_MASK ? f->start_offset : fde.start_pc + f->start_offset;
      printf("    %016" PRIx64, start);
      if (f->row.ra.kind == SFRAME_RULE_UNDEFINED) {
        printf("  RA undefined\n");
        continue;
      }
      snprintf(cfa, sizeof cfa, "%s+%" PRId32, f->cfa_base_sp ? "sp" : "fp", f->row.cfa.offset);
      slot(fp, sizeof fp, &f->row.fp);
      if (info.cfa_fixed_ra_offset != 0)
        snprintf(ra, sizeof ra, "f");
      else if (f->row.ra.flags & SFRAME_RULE_PADDING)
        snprintf(ra, sizeof ra, "U");
      else
        slot(ra, sizeof ra, &f->row.ra);
      strcat(ra, f->row.ra_mangled ? "[s]" : "   ");
      printf("  %-10s%-10s%-13s\n", cfa, fp, ra);
    }
    free(fres);
  }
  sframe_section_close(sec);
  return 0;
}
