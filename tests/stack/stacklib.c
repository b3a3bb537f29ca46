/* Shared-library half of the `sframe stack` test program: a call chain that
   parks its thread in nanosleep(). */
#include <time.h>

volatile int stacklib_stop;

__attribute__((noinline)) void lib_g3(void) {
  struct timespec ts = {1000, 0};
  while (!stacklib_stop) nanosleep(&ts, 0);
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
