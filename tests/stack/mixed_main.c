// SPDX-License-Identifier: MIT
/* The part of the mixed-SFrame test program assembled with -Wa,--gsframe
   (mixed_helper.c is not): main -> m1 -> h1 -> m2 -> h2 -> m3 -> pause(),
   alternating between the two files, so that a walk needs the program's own
   SFrame section for the m* frames and SFrame generated from .eh_frame for
   the h* frames. Prints "ready" once parked. */
#include <stdio.h>
#include <unistd.h>

void h1(int depth);
void h2(int depth);

volatile int sink;

__attribute__((noinline)) void m3(int depth) {
  printf("ready %d\n", depth);
  fflush(stdout);
  for (;;) pause();
}
__attribute__((noinline)) void m2(int depth) {
  h2(depth + 1);
  sink++;
}
__attribute__((noinline)) void m1(int depth) {
  h1(depth + 1);
  sink++;
}

int main(void) {
  m1(1);
  return sink;
}
