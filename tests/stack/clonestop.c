// SPDX-License-Identifier: MIT
/* Leaves a process with a thread stopped right after clone3, for the
   `sframe stack` tests. Forks a child that creates one thread; traces the
   child with PTRACE_O_TRACECLONE to catch the new thread before it runs a
   single instruction of its own; then stops the whole child (group stop,
   SIGSTOP) and detaches, so the child is stopped but untraced and another
   tracer (sframe stack, eu-stack) can attach. Prints "PID TID" (the child,
   the new thread) and waits; on SIGTERM/SIGINT, kills the child and exits.
   Exit status 1 (with the reason on stderr) when any step fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void* worker(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static pid_t child;

static void die(const char* what) {
  fprintf(stderr, "clonestop: %s: %s\n", what, strerror(errno));
  if (child > 0) kill(child, SIGKILL);
  exit(1);
}

int main(void) {
  int go[2];
  if (pipe(go) != 0) die("pipe");
  child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(2);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    for (;;) pause();
  }
  close(go[0]);
  if (ptrace(PTRACE_SEIZE, child, NULL, (void*)(long)PTRACE_O_TRACECLONE) != 0) die("PTRACE_SEIZE");
  if (write(go[1], "g", 1) != 1) die("write");
  /* The clone event stop of the creating thread. */
  pid_t tid = 0;
  for (;;) {
    int st;
    if (waitpid(child, &st, __WALL) != child) die("waitpid child");
    if (!WIFSTOPPED(st)) { errno = ECHILD; die("child ended"); }
    if ((st >> 8) == (SIGTRAP | (PTRACE_EVENT_CLONE << 8))) {
      unsigned long msg = 0;
      if (ptrace(PTRACE_GETEVENTMSG, child, NULL, &msg) != 0) die("PTRACE_GETEVENTMSG");
      tid = (pid_t)msg;
      break;
    }
    /* Another stop (a signal): pass the signal on. */
    const int sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0;
    if (ptrace(PTRACE_CONT, child, NULL, (void*)(long)sig) != 0) die("PTRACE_CONT");
  }
  /* The new thread's first stop (PTRACE_EVENT_STOP, auto-attached). */
  int st;
  if (waitpid(tid, &st, __WALL) != tid || !WIFSTOPPED(st)) die("waitpid new thread");
  /* Group-stop the child and untrace it: the new thread, released with
     SIGSTOP pending, takes it before returning to user space and starts a
     group stop; the creating thread joins it when detached. */
  if (syscall(SYS_tgkill, child, tid, SIGSTOP) != 0) die("tgkill");
  if (ptrace(PTRACE_DETACH, tid, NULL, NULL) != 0) die("PTRACE_DETACH new thread");
  usleep(100000);
  if (ptrace(PTRACE_DETACH, child, NULL, NULL) != 0) die("PTRACE_DETACH child");
  printf("%d %d\n", (int)child, (int)tid);
  fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  /* Wait for SIGTERM/SIGINT, then clean up. */
  int sig;
  sigwait(&set, &sig);
  kill(child, SIGKILL);
  waitpid(child, NULL, __WALL);
  return 0;
}
