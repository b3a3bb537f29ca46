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

/* A buffer of 3, beside glibc's with 3 and a full walk, from one function. */
static void *ours3[3], *theirs3[3], *ours_full[kMax];
static int n_theirs3;
static sframe_backtrace_result result3, result_full;
__attribute__((noinline)) static void short_leaf(void) {
  n_theirs3 = backtrace(theirs3, 3);
  status = sframe_backtrace(ours3, 3, &result3);
  sframe_backtrace(ours_full, kMax, &result_full);
  __asm__ volatile("" ::: "memory");
}
/* A buffer of 64 or more that the stack fills takes sframe_backtrace's
 * second walk (from its caller's frame record): 64 entries on a stack of
 * about 100 frames, beside glibc's 64 from the same function. */
enum { kDeep = 64 };
static void *ours64[kDeep], *theirs64[kDeep], *first64[kDeep];
static int n_theirs64;
static sframe_backtrace_result result64;
__attribute__((noinline)) static int deep(int n) {
  int r;
  if (n > 0) {
    r = deep(n - 1) + 1;
    __asm__ volatile("" ::: "memory");
    return r;
  }
  n_theirs64 = backtrace(theirs64, kDeep);
  status = sframe_backtrace(ours64, kDeep, &result64);
  __asm__ volatile("" ::: "memory");
  return 0;
}
__attribute__((noinline)) static void short_middle(void) {
  short_leaf();
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
  /* A buffer of 3 on a deeper stack: filled whole, as glibc fills its 3;
   * entries 1 and 2 (short_middle's and its caller's return addresses) are
   * the full walk's and glibc's (found at its entry 1, or 2 after a
   * sanitizer's backtrace interceptor); entry 0 is short_leaf's own call
   * site. */
  short_middle();
  CHECK(status == SFRAME_OK && result3.count == 3 && result3.stop == SFRAME_STOP_DEPTH_LIMIT);
  CHECK(n_theirs3 == 3 && result_full.count > 3 && result_full.stop == SFRAME_STOP_OUTERMOST);
  CHECK(ours3[1] == ours_full[1] && ours3[2] == ours_full[2]);
  CHECK((ours3[1] == theirs3[1] && ours3[2] == theirs3[2]) || ours3[1] == theirs3[2]);
  CHECK(ours3[0] != ours_full[0] && (char *)ours3[0] < (char *)ours_full[0] &&
        (char *)ours_full[0] - (char *)ours3[0] < 64);
  if (ours3[1] != theirs3[1] && ours3[1] != theirs3[2])
    fprintf(stderr, "  buffer of 3: %p %p %p, glibc %p %p %p\n", ours3[0], ours3[1], ours3[2], theirs3[0], theirs3[1],
            theirs3[2]);
  /* A buffer of 64 that a deeper stack fills: 64 entries, equal to glibc's
   * from entry 1 on (offset as above), and the same on a second call. */
  deep(100);
  CHECK(status == SFRAME_OK && result64.count == kDeep && result64.stop == SFRAME_STOP_DEPTH_LIMIT);
  CHECK(n_theirs64 == kDeep);
  at = theirs64[1] == ours64[1] ? 1 : theirs64[2] == ours64[1] ? 2 : -1;
  CHECK(at > 0);
  for (i = 1; at > 0 && at + i - 1 < kDeep; ++i) {
    CHECK(ours64[i] == theirs64[at + i - 1]);
    if (ours64[i] != theirs64[at + i - 1])
      fprintf(stderr, "  buffer of 64, entry %d: %p, glibc %p\n", i, ours64[i], theirs64[at + i - 1]);
  }
  memcpy(first64, ours64, sizeof first64);
  deep(100);
  CHECK(result64.count == kDeep && memcmp(first64, ours64, sizeof first64) == 0);
  /* A buffer of 1: the caller's return address alone. */
  CHECK(sframe_backtrace(ours3, 1, &result3) == SFRAME_OK && result3.count == 1 &&
        result3.stop == SFRAME_STOP_DEPTH_LIMIT);
  CHECK(sframe_backtrace(NULL, 0, &result3) == SFRAME_OK && result3.count == 0 &&
        result3.stop == SFRAME_STOP_DEPTH_LIMIT);
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
