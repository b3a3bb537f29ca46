// SPDX-License-Identifier: MIT
// perf script test program: a call chain burning CPU, built with
// -O2 -fomit-frame-pointer -Wa,--gsframe (its own .sframe). `work N`
// loops N times; `work N fork PROGRAM` also runs two threads and a
// fork+exec of PROGRAM (given N / 200 + 1); `work N exec PAD PROGRAM
// ARGS...` then execs PROGRAM ARGS... and PAD empty arguments in the same
// process (a chain of execs).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long sink;

__attribute__((noinline)) static long leaf(long x) {
  long s = 0;
  for (long i = 0; i < x; i++) {
    s += i * i % 7;
    sink = s;
  }
  return s;
}
__attribute__((noinline)) long middle(long x) { return leaf(x) + 1; }
__attribute__((noinline)) long outer(long x) { return middle(x) * 2; }

static long loops;

static void* thread_main(void* arg) {
  (void)arg;
  long t = 0;
  for (long i = 0; i < loops; i++) t += outer(20000);
  sink = t;
  return NULL;
}

int main(int argc, char** argv) {
  loops = argc > 1 ? atol(argv[1]) : 100;
  if (argc > 2 && strcmp(argv[2], "fork") == 0) {
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, NULL);
    const pid_t pid = fork();
    if (pid == 0) {
      char n[32];
      snprintf(n, sizeof n, "%ld", loops / 200 + 1);
      const char* prog = argc > 3 ? argv[3] : "/proc/self/exe";
      execl(prog, prog, n, (char*)NULL);
      _exit(127);
    }
    thread_main(NULL);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  thread_main(NULL);
  if (argc > 4 && strcmp(argv[2], "exec") == 0) {
    // PAD empty arguments after ARGS: the kernel reads each of them
    // (create_elf_tables) after the exec's COMM record and before the new
    // image runs, so samples land in between.
    const long pad = atol(argv[3]);
    const int nargs = argc - 4;
    char** args = calloc((size_t)(nargs + pad + 1), sizeof *args);
    if (!args) return 1;
    for (int i = 0; i < nargs; i++) args[i] = argv[4 + i];
    for (long i = 0; i < pad; i++) args[nargs + i] = (char*)"";
    execv(argv[4], args);
    perror(argv[4]);
    return 127;
  }
  return 0;
}
