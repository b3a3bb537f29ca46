/* SPDX-License-Identifier: MIT */
/*
 * A C99 consumer of the backtrace layer (sframepp::backtrace,
 * sframepp-backtrace): sframe_backtrace() from a nested call, checked
 * against glibc's backtrace() (libgcc's .eh_frame unwinder) from the same
 * function. Entry 0 is each walker's own call site; every caller after it
 * must agree. Prints "frames N (success)" (N >= 4) when they do, the last
 * word from sframe_strerror(), which the backtrace's libraries carry.
 * It includes its library's C header alone (sframe.h would do too).
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdio.h>

#include "sframe/backtrace/sframe_backtrace.h"

enum { kMax = 64 };
static void *ours[kMax], *theirs[kMax];
static int n_theirs;
static sframe_backtrace_result result;
static sframe_status status;

__attribute__((noinline)) static void leaf(void) {
  n_theirs = backtrace(theirs, kMax);
  status = sframe_backtrace(ours, kMax, &result);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void middle(void) {
  leaf();
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void outer(void) {
  middle();
  __asm__ volatile("" ::: "memory");
}

int main(void) {
  sframe_error e;
  int i, n;
  if (sframe_backtrace_init(0, &e) != SFRAME_OK) {
    fprintf(stderr, "sframe_backtrace_init: status %d\n", (int)e.status);
    return 1;
  }
  outer();
  if (status != SFRAME_OK) {
    fprintf(stderr, "sframe_backtrace: status %d\n", (int)status);
    return 1;
  }
  n = (int)result.count < n_theirs ? (int)result.count : n_theirs;
  for (i = 1; i < n; ++i) {
    if (ours[i] != theirs[i]) {
      fprintf(stderr, "entry %d: %p, glibc %p\n", i, ours[i], theirs[i]);
      return 1;
    }
  }
  /* sframe_strerror from the backtrace's own libraries (no libsframepp). */
  printf("frames %d (%s)\n", n, sframe_strerror(status));
  return n >= 4 ? 0 : 1;
}
