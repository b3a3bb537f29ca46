// SPDX-License-Identifier: MIT
/* A shared library for the backtrace tests, called through the PLT. Built
   with -O2 -fomit-frame-pointer (and -Wa,--gsframe under gcc). */
#include <stdlib.h>

typedef void (*bt_callback)(void*);

/* Recurses `depth` times inside this library, then calls back. */
__attribute__((noinline)) int callee_recurse(int depth, bt_callback fn, void* arg) {
  if (depth <= 0) {
    fn(arg);
    return 0;
  }
  int r = callee_recurse(depth - 1, fn, arg);
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}

static int by_value(const void* a, const void* b) {
  return *(const int*)a - *(const int*)b;
}

/* Leaf work for the spinning signal test: called through the PLT in a loop. */
__attribute__((noinline)) unsigned callee_mix(unsigned x) {
  int v[4] = {(int)(x & 7), (int)(x >> 3 & 7), 1, (int)(x >> 6 & 7)};
  qsort(v, 4, sizeof v[0], by_value);
  return x * 2654435761u + (unsigned)v[0] + (unsigned)v[3];
}
