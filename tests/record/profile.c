// SPDX-License-Identifier: MIT
// `sframe record`'s profile test program: two threads spend fixed shares of
// their time in twelve call paths (path k: k + 1 parts of 78) for SECONDS
// seconds, so both profilers see the same two dozen stacks in the same
// shares. Built without frame pointers, with its own .sframe.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

__attribute__((noinline)) static void burn(long n) {
  unsigned long s = 0;
  for (long i = 0; i < n; i++) {
    s += (unsigned long)(i * i % 7);
    sink = s;
  }
}

// The store after the call keeps it from becoming a tail call (which would
// take path<k> off the stack).
#define PATH(k)                                                  \
  __attribute__((noinline)) void path##k(long n) {               \
    burn(n * (k + 1));                                           \
    sink++;                                                      \
  }
PATH(0) PATH(1) PATH(2) PATH(3) PATH(4) PATH(5) PATH(6) PATH(7) PATH(8) PATH(9) PATH(10) PATH(11)

static void (*const paths[])(long) = {path0, path1, path2, path3, path4,  path5,
                                      path6, path7, path8, path9, path10, path11};

static double seconds;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void* run(void* arg) {
  (void)arg;
  const double end = now() + seconds;
  while (now() < end)
    for (int k = 0; k < 12; k++) paths[k](4000);
  return NULL;
}

int main(int argc, char** argv) {
  seconds = argc > 1 ? atof(argv[1]) : 1;
  pthread_t t;
  pthread_create(&t, NULL, run, NULL);
  run(NULL);
  pthread_join(t, NULL);
  return 0;
}
