// SPDX-License-Identifier: MIT
/* Loaded with dlopen after backtrace_init(): its frames are found only after
   backtrace_refresh(). */
typedef void (*bt_callback)(void*);

__attribute__((noinline)) int dl_recurse(int depth, bt_callback fn, void* arg) {
  if (depth <= 0) {
    fn(arg);
    return 0;
  }
  int r = dl_recurse(depth - 1, fn, arg);
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}
