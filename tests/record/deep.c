// SPDX-License-Identifier: MIT
// Stacks deeper than `sframe record`'s walk goes (SFRAME_RECORD_MAX_USER,
// 127 user frames): leaf() at the bottom of a recursion DEPTH calls deep,
// without frame pointers (built with -fomit-frame-pointer -Wa,--gsframe).
// Each frame is small, so perf's 8 KB stack copy holds them all and perf
// unwinds past our depth limit: the walk must give its first 127 frames.
//   deep DEPTH N   (N calls of the recursion)
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long leaf(unsigned long n) {
  unsigned long s = 0;
  for (unsigned long i = 0; i < n; i++) s += i * i;
  return s;
}

// Not a tail call: the result is stored after the call returns.
__attribute__((noinline)) unsigned long down(int depth, unsigned long n) {
  if (depth == 0) return leaf(n);
  const unsigned long r = down(depth - 1, n) + 1;
  sink = r;
  return r;
}

int main(int argc, char** argv) {
  const int depth = argc > 1 ? atoi(argv[1]) : 200;
  const int calls = argc > 2 ? atoi(argv[2]) : 1000;
  for (int k = 0; k < calls; k++) sink = down(depth, 300000);
  return 0;
}
