// SPDX-License-Identifier: MIT
// A program that takes its own stack with sframe::backtrace() and then parks
// in pause() in the same function, on the main thread and on a thread that
// never registered, for same_as_backtrace.sh to compare with `sframe stack`.
// Writes, per thread, the return addresses from the parked function's
// caller outward (backtrace()'s frames 1..), one "T n" line before each
// list, then "ready".
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "sframe/backtrace/backtrace.hpp"

namespace {

FILE* g_out = nullptr;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
int g_written = 0;
volatile int g_stop = 0;  // never set: parked() returns as far as the compiler knows

[[gnu::noinline]] void parked() {
  void* frames[128];
  const std::size_t n = sframe::backtrace(frames);
  pthread_mutex_lock(&g_lock);
  std::fprintf(g_out, "T %ld\n", static_cast<long>(gettid()));
  for (std::size_t i = 1; i < n; ++i) std::fprintf(g_out, "%p\n", frames[i]);
  if (++g_written == 2) std::fprintf(g_out, "ready\n");
  std::fflush(g_out);
  pthread_mutex_unlock(&g_lock);
  while (!g_stop) pause();
}

[[gnu::noinline]] int level(int depth) {
  if (depth == 0) {
    parked();
    return 0;
  }
  int r = level(depth - 1) + depth;
  asm volatile("" : "+r"(r));
  return r;
}

void* worker(void*) { return reinterpret_cast<void*>(static_cast<long>(level(7))); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  g_out = std::fopen(argv[1], "w");
  if (!g_out) return 2;
  if (!sframe::backtrace_init()) std::fprintf(stderr, "backtrace_init reported an error\n");
  sframe::backtrace_wait_ready();
  pthread_t t;
  pthread_create(&t, nullptr, worker, nullptr);
  return level(4);
}
