// SPDX-License-Identifier: MIT
/* Shared-library half of the `sframe stack` test program: a call chain that
   parks its thread in nanosleep() (through two inlined functions). */
#include <time.h>

volatile int stacklib_stop;

/* Two levels inlined into lib_g3 (nap_outer -> nap_inner), shown by
   `sframe stack -i` as frames of their own when compiled with -g. */
static inline __attribute__((always_inline)) void nap_inner(const struct timespec* ts) {
  nanosleep(ts, 0);
  __asm__ volatile("");
}
static inline __attribute__((always_inline)) void nap_outer(const struct timespec* ts) {
  nap_inner(ts);
  __asm__ volatile("");
}
__attribute__((noinline)) void lib_g3(void) {
  struct timespec ts = {1000, 0};
  while (!stacklib_stop) nap_outer(&ts);
}
/* The empty asm after each call keeps the call out of tail position. */
__attribute__((noinline)) void lib_g2(void) {
  lib_g3();
  __asm__ volatile("");
}
__attribute__((noinline)) void lib_g1(void) {
  lib_g2();
  __asm__ volatile("");
}
