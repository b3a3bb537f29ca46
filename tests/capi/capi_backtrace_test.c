/* SPDX-License-Identifier: MIT */
/*
 * The C API's in-process backtrace (libsframepp-backtrace) from C99,
 * checked against glibc's backtrace() (execinfo.h, which walks .eh_frame
 * with libgcc's unwinder): the same callers, entry by entry, from a plain
 * call and from a signal handler's ucontext.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include "capi_test_support.h"
#include "sframe/sframe.h"


enum { kMax = 64 };
static void *ours[kMax], *theirs[kMax];
static int n_theirs;
static sframe_backtrace_result result;
static sframe_status status;

/* Both walks from the same function: entry 0 differs (two call sites),
 * every caller after it must agree. */
__attribute__((noinline)) static void leaf(void) {
  n_theirs = backtrace(theirs, kMax);
  status = sframe_backtrace(ours, kMax, &result);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void middle(void) {
  leaf();
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void outer(void) {
  middle();
  __asm__ volatile("" ::: "memory");
}

static void on_signal(int sig, siginfo_t *info, void *uc) {
  (void)sig;
  (void)info;
  n_theirs = backtrace(theirs, kMax);
  status = sframe_backtrace_ucontext(ours, kMax, uc, &result);
}

__attribute__((noinline)) static void raiser(void) {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

int main(void) {
  sframe_error e;
  ucontext_t uc;
  struct sigaction sa;
  int i, at;
  /* Before init the ucontext variant refuses (it never initialises). */
  getcontext(&uc);
  CHECK(sframe_backtrace_ucontext(ours, kMax, &uc, &result) == SFRAME_E_NOT_INITIALIZED);
  CHECK(result.stop == SFRAME_STOP_NOT_INITIALIZED && result.count == 0);
  CHECK(sframe_backtrace_ucontext(ours, kMax, NULL, &result) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_backtrace(NULL, 4, &result) == SFRAME_E_INVALID_ARGUMENT);
  CHECK(sframe_backtrace_init(1, &e) == SFRAME_E_INVALID_ARGUMENT);

  CHECK(sframe_backtrace_init(0, &e) == SFRAME_OK);
  CHECK(sframe_backtrace_register_thread() == SFRAME_OK);
  outer();
  CHECK(status == SFRAME_OK && result.stop == SFRAME_STOP_OUTERMOST && result.count >= 4);
  /* Entry 0 is each walker's own call site in leaf(); from entry 1 (the
   * return address into middle()) on, the lists must agree to the end.
   * glibc's list may hold one more entry first (a sanitizer's backtrace
   * interceptor), hence the search for ours[1] in it. */
  at = -1;
  for (i = 1; i < n_theirs && at < 0; ++i)
    if (theirs[i] == ours[1]) at = i;
  CHECK(at == 1 || at == 2);
  if (at > 0) {
    CHECK((int)result.count - 1 == n_theirs - at);
    for (i = 1; i < (int)result.count && at + i - 1 < n_theirs; ++i) {
      CHECK(ours[i] == theirs[at + i - 1]);
      if (ours[i] != theirs[at + i - 1]) fprintf(stderr, "  frame %d: %p, glibc %p\n", i, ours[i], theirs[at + i - 1]);
    }
  }
  /* A buffer of 3: two entries, the rest cut. */
  CHECK(sframe_backtrace(ours, 3, &result) == SFRAME_OK);
  CHECK(result.count == 2 && result.stop == SFRAME_STOP_DEPTH_LIMIT);
  /* The former SFRAME_BT_* names still compile, as the same values. */
  CHECK(SFRAME_BT_BUFFER_FULL == SFRAME_STOP_DEPTH_LIMIT && SFRAME_BT_OUTERMOST == SFRAME_STOP_OUTERMOST &&
        SFRAME_BT_READ_CHECK_REFUSED == SFRAME_STOP_READ_CHECK_REFUSED);

  /* From a signal handler: frame 0 is the interrupted PC in raise(); glibc
   * lists the handler, the trampoline, then the same PC and callers. */
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  raiser();
  CHECK(status == SFRAME_OK && result.count >= 3);
  at = -1;
  for (i = 0; i < n_theirs; ++i)
    if (theirs[i] == ours[0]) at = i;
  CHECK(at > 0);
  if (at > 0) {
    CHECK((int)result.count == n_theirs - at);
    for (i = 0; i < (int)result.count && at + i < n_theirs; ++i) CHECK(ours[i] == theirs[at + i]);
  }
  CHECK(sframe_backtrace_refresh(&e) == SFRAME_OK);
  return capi_test_report("capi_backtrace_test");
}
