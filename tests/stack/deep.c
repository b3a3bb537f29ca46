// SPDX-License-Identifier: MIT
/* A thread parked 300 calls deep (more than the 256 frames `sframe stack`
   and eu-stack show by default), for `-n`: prints "ready" once parked. */
#include <stdio.h>
#include <unistd.h>

volatile int deep_sink;

__attribute__((noinline)) void down(int n) {
  if (n > 0) {
    down(n - 1);
  } else {
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  deep_sink++; /* not a tail call */
}

int main(void) {
  down(300);
  return 0;
}
