// SPDX-License-Identifier: MIT
// A function whose CFA changes at nearly every instruction: each call
// pushes ten stack arguments (System V x86-64: the seventh on), and
// without frame pointers every push is a rule of its own (SFrame FREs from
// gas --gsframe). Built with -O2 -fomit-frame-pointer, dense() holds over
// 120 rules in one 1 KiB page of `sframe record`'s tables (record_abi.h:
// 20 on average; a page that does not fit the rest of its block starts the
// next one); leaf() is where the samples land, with callers in every part
// of dense().
//   dense N   (N calls of dense)
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long leaf(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8,
                                    long a9, long a10, long a11, long a12, long a13, long a14, long a15) {
  volatile long s = 0;
  for (int k = 0; k < 200; k++)
    s += (a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7 ^ a8 ^ a9 ^ a10 ^ a11 ^ a12 ^ a13 ^ a14 ^ a15) + k;
  return s;
}

#define CALL(n)                                                                                                    \
  t += leaf(t, n, n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7, n + 8, n + 9, n + 10, n + 11, n + 12, n + 13, \
            t + n);
#define CALLS4(n) CALL(n) CALL(n + 20) CALL(n + 40) CALL(n + 60)

__attribute__((noinline)) long dense(long t) {
  CALLS4(1) CALLS4(100) CALLS4(200) CALLS4(300) CALLS4(400) CALLS4(500)
  return t;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000, t = 0;
  for (long i = 0; i < n; i++) t += dense(i);
  printf("%ld\n", t);
  return 0;
}
