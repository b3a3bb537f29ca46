// SPDX-License-Identifier: MIT
/* The part of the mixed-SFrame test program assembled WITHOUT SFrame (see
   mixed_main.c): its functions are covered only by .eh_frame. */
void m2(int depth);
void m3(int depth);

extern volatile int sink;

__attribute__((noinline)) void h1(int depth) {
  m2(depth + 1);
  sink++;
}
__attribute__((noinline)) void h2(int depth) {
  m3(depth + 1);
  sink++;
}
