/* SPDX-License-Identifier: MIT */
/*
 * What the C API's C99 tests share: the CHECK counter macro, the closing
 * report, and reading a corpus file whole (the corpus's objects are GNU-made
 * ELF files with golden objdump dumps beside them). Functions are static
 * inline, so a test that leaves one unused compiles without a warning.
 */
#ifndef SFRAMEPP_TESTS_CAPI_TEST_SUPPORT_H
#define SFRAMEPP_TESTS_CAPI_TEST_SUPPORT_H

#include <stdio.h>
#include <stdlib.h>

static int failures = 0, checks = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    ++checks;                                                                  \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* Prints "NAME: C checks, F failed" and returns the exit status (0: none
 * failed). */
static inline int capi_test_report(const char *name) {
  printf("%s: %d checks, %d failed\n", name, checks, failures);
  return failures ? 1 : 0;
}

/* The bytes of `path` (NUL appended, not counted) and their count in
 * `*size`; NULL when the file cannot be opened or read. The caller frees. */
static inline unsigned char *capi_test_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[n] = 0;
  *size = (size_t)n;
  return buf;
}

/* `corpus`/`rel` into `buf` (of `len` bytes); 0 when it does not fit. */
static inline int capi_test_corpus_path(char *buf, size_t len, const char *corpus, const char *rel) {
  int n = snprintf(buf, len, "%s/%s", corpus, rel);
  return n >= 0 && (size_t)n < len;
}

#endif
