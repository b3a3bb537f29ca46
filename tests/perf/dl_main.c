// SPDX-License-Identifier: MIT
// perf script test program: dlopen()s the library given as argv[1] (after
// the recording started, so its MMAP2 record comes mid-stream), then calls
// its burn() argv[2] times.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long call(long (*burn)(long), long n) {
  long t = 0;
  for (long i = 0; i < n; i++) t += burn(20000);
  return t;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  long (*burn)(long) = (long (*)(long))dlsym(h, "burn");
  if (!burn) return 1;
  printf("%ld\n", call(burn, atol(argv[2])));
  dlclose(h);
  return 0;
}
