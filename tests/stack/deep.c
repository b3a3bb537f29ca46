// SPDX-License-Identifier: MIT
/* A thread parked 300 calls deep (more than the 256 frames `sframe stack`
   and eu-stack show by default), for `-n`: prints "ready" once parked.
   `deep N` parks N calls deep instead (bench/output_bench.sh). */
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char** argv) {
  down(argc > 1 ? atoi(argv[1]) : 300);
  return 0;
}
