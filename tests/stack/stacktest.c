// SPDX-License-Identifier: MIT
/* The `sframe stack` test program: threads parked in known call chains.
     main:     m1 -> m2 -> pthread_join (futex wait in libc)
     t-pause:  f1 -> f2 -> f3 -> (park_in_pause, inlined) -> pause()
     t-futex:  h1 -> h2 -> h3 -> futex(FUTEX_WAIT)
     t-lib:    k1 -> lib_g1 -> lib_g2 -> lib_g3 (libstacklib.so) -> nanosleep()
     t-signal: q1 -> q2 -> raise(SIGUSR1) -> handler s1 -> s2 -> pause()
   Prints "ready" once every thread has reached its chain.
   With the argument "chaos" it adds, for the robustness checks, a thread
   whose stack pointer points at unmapped memory while it waits in pause()
   (x86-64), and a thread that keeps creating threads that exit at once. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void lib_g1(void);

static volatile int stop;
static int futex_word;
static volatile int arrived;

static void arrive(void) { __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST); }

/* Inlined into f3: with -g, `sframe stack -i` shows it as a frame of its own. */
static inline __attribute__((always_inline)) void park_in_pause(void) {
  pause();
  __asm__ volatile("");
}
__attribute__((noinline)) void f3(void) {
  arrive();
  while (!stop) park_in_pause();
}
__attribute__((noinline)) void f2(void) {
  f3();
  __asm__ volatile("");
}
__attribute__((noinline)) void f1(void) {
  f2();
  __asm__ volatile("");
}

__attribute__((noinline)) void h3(void) {
  arrive();
  while (!stop) syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}
__attribute__((noinline)) void h2(void) {
  h3();
  __asm__ volatile("");
}
__attribute__((noinline)) void h1(void) {
  h2();
  __asm__ volatile("");
}

__attribute__((noinline)) void k1(void) {
  arrive();
  lib_g1();
  __asm__ volatile("");
}

__attribute__((noinline)) void s2(void) {
  arrive();
  while (!stop) pause();
}
__attribute__((noinline)) void s1(void) {
  s2();
  __asm__ volatile("");
}
static void on_usr1(int sig) {
  (void)sig;
  s1();
}
__attribute__((noinline)) void q2(void) {
  raise(SIGUSR1);
  __asm__ volatile("");
}
__attribute__((noinline)) void q1(void) {
  q2();
  __asm__ volatile("");
}

static void* run_pause(void* a) { (void)a; f1(); return NULL; }
static void* run_futex(void* a) { (void)a; h1(); return NULL; }
static void* run_lib(void* a) { (void)a; k1(); return NULL; }
static void* run_signal(void* a) { (void)a; q1(); return NULL; }

__attribute__((noinline)) void m2(pthread_t t) {
  pthread_join(t, NULL);
  __asm__ volatile("");
}
__attribute__((noinline)) void m1(pthread_t t) {
  m2(t);
  __asm__ volatile("");
}

static void* run_badstack(void* a) {
  (void)a;
  arrive();
#if defined(__x86_64__)
  /* pause() by raw syscall with RSP and RBP pointing at unmapped page 0: the
     thread never returns and is killed with the process. */
  __asm__ volatile(
      "mov $0x10, %%rsp\n\t"
      "xor %%ebp, %%ebp\n"
      "1: mov $34, %%eax\n\t"
      "syscall\n\t"
      "jmp 1b" ::: "rax", "rcx", "r11", "memory");
#endif
  while (!stop) pause();
  return NULL;
}

static void* exit_at_once(void* a) { return a; }
static void* run_churn(void* a) {
  (void)a;
  arrive();
  while (!stop) {
    pthread_t t;
    if (pthread_create(&t, NULL, exit_at_once, NULL) == 0) pthread_join(t, NULL);
  }
  return NULL;
}

int main(int argc, char** argv) {
  struct sigaction sa = {0};
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  void* (*fns[])(void*) = {run_pause, run_futex, run_lib, run_signal};
  const char* names[] = {"t-pause", "t-futex", "t-lib", "t-signal"};
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) {
    pthread_create(&t[i], NULL, fns[i], NULL);
    pthread_setname_np(t[i], names[i]);
  }
  int want = 4;
  if (argc > 1 && strcmp(argv[1], "chaos") == 0) {
    pthread_t b, c;
    pthread_create(&b, NULL, run_badstack, NULL);
    pthread_create(&c, NULL, run_churn, NULL);
    want += 2;
  }
  while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < want) usleep(1000);
  printf("ready\n");
  fflush(stdout);
  m1(t[0]);
  return 0;
}
