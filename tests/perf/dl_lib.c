// SPDX-License-Identifier: MIT
// The library dl_main dlopen()s: a call chain built without frame pointers
// and without .sframe (its SFrame is generated from .eh_frame).
volatile long dl_sink;

__attribute__((noinline)) static long dl_leaf(long x) {
  long s = 0;
  for (long i = 0; i < x; i++) {
    s += i * i % 5;
    dl_sink = s;
  }
  return s;
}
__attribute__((noinline)) long dl_middle(long x) { return dl_leaf(x) + 3; }
long burn(long x) { return dl_middle(x) - 1; }
