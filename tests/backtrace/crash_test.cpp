// SPDX-License-Identifier: MIT
// Crash handlers as people write them: an SA_ONSTACK | SA_SIGINFO handler on
// a sigaltstack takes sframe::backtrace(out, ucontext) after the stack
// overflowed (SIGSEGV on the guard page), on the main thread and on a
// worker thread that never registered, and the 256 frames must equal
// libunwind's unw_backtrace() and glibc's backtrace() taken in the same
// handler, after their handler and trampoline frames. Also a deep (not
// overflowed) main-thread stack, megabytes below where backtrace_init()
// registered it, with an 8 MiB RLIMIT_STACK and under `ulimit -s unlimited`.
//
// Each scenario runs in a child process (this binary re-executed with
// SFPP_CRASH_CHILD=scenario, after setrlimit(RLIMIT_STACK) where the
// scenario needs it, so that the kernel lays out the stack for that limit);
// the child prints what differs and exits non-zero.
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "glibc_backtrace.hpp"
#include "sframe/backtrace/backtrace.hpp"

namespace {

constexpr int kOurs = 256;
// The references also hold the handler's own frames and the trampoline.
constexpr int kTheirs = kOurs + 16;

struct Shot {
  void* ours[kOurs];
  void* libunwind[kTheirs];
  void* glibc[kTheirs];
  int n_ours = 0, n_libunwind = 0, n_glibc = 0;
  sframe::BacktraceResult result;
};
Shot g_shot;
sigjmp_buf g_jump;
volatile int g_stop = 0;

extern "C" void on_signal(int, siginfo_t*, void* uc) {
  g_shot.result = sframe::backtrace_ex(std::span<void*>(g_shot.ours, kOurs), static_cast<const ucontext_t*>(uc));
  g_shot.n_ours = static_cast<int>(g_shot.result.size);
  g_shot.n_libunwind = unw_backtrace(g_shot.libunwind, kTheirs);
  g_shot.n_glibc = sframe_test::glibc_backtrace_fn()(g_shot.glibc, kTheirs);
  siglongjmp(g_jump, 1);
}

// Unbounded unless g_stop (never set: it keeps the compiler from seeing an
// infinite recursion); 64 bytes of locals a frame.
[[gnu::noinline]] int overflow(int n) {
  volatile char pad[64];
  pad[n & 63] = static_cast<char>(n);
  if (g_stop) return 0;
  int r = overflow(n + 1) + pad[(n + 1) & 63];
  asm volatile("" : "+r"(r));
  return r;
}

// `depth` frames, then a signal to the calling thread.
[[gnu::noinline]] int deep(int depth) {
  volatile char pad[64];
  pad[depth & 63] = static_cast<char>(depth);
  if (depth == 0) {
    raise(SIGUSR1);
    return pad[0];
  }
  int r = deep(depth - 1) + pad[depth & 63];
  asm volatile("" : "+r"(r));
  return r;
}

void install(int sig) {
  struct sigaction sa = {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

void give_altstack() {
  // Per thread; large enough for the three walkers (libgcc's unwinder
  // needs a few KiB).
  const std::size_t size = 256 * 1024;
  // mmap: kept for the thread's (and the process's) life, not a leak.
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::abort();
  stack_t ss = {};
  ss.ss_sp = mem;
  ss.ss_size = size;
  sigaltstack(&ss, nullptr);
}

std::string where(void* pc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", pc);
  return buf;
}

// Ours must equal `theirs` from the frame the signal interrupted (ours[0])
// on, for every frame ours has. Prints what differs; returns the number of
// frames compared, or -1.
int compare(const char* what, void* const* theirs, int n_theirs) {
  int at = -1;
  for (int i = 0; i < n_theirs && i < 16; ++i)
    if (theirs[i] == g_shot.ours[0]) at = i;
  if (at < 0) {
    std::fprintf(stderr, "%s: the interrupted PC %s is not among its first 16 frames\n", what,
                 where(g_shot.ours[0]).c_str());
    return -1;
  }
  const int n = std::min(g_shot.n_ours, n_theirs - at);
  for (int i = 0; i < n; ++i)
    if (g_shot.ours[i] != theirs[at + i]) {
      std::fprintf(stderr, "%s: frame %d differs: ours %s, %s %s\n", what, i, where(g_shot.ours[i]).c_str(), what,
                   where(theirs[at + i]).c_str());
      return -1;
    }
  return n;
}

// Ours must have filled the buffer, and equal both references frame for
// frame.
int check() {
  const sframe::BacktraceResult& r = g_shot.result;
  std::fprintf(stderr, "ours: %d frames, %s; libunwind %d, glibc %d\n", g_shot.n_ours,
               std::string(sframe::stop_reason_name(r.reason)).c_str(), g_shot.n_libunwind, g_shot.n_glibc);
  const int a = compare("unw_backtrace", g_shot.libunwind, g_shot.n_libunwind);
  const int b = compare("glibc backtrace", g_shot.glibc, g_shot.n_glibc);
  if (a < 0 || b < 0) return 1;
  if (a != kOurs || b != kOurs || g_shot.n_ours != kOurs || r.reason != sframe::StopReason::kDepthLimit) {
    std::fprintf(stderr, "compared %d and %d of our %d frames (want %d)\n", a, b, g_shot.n_ours, kOurs);
    return 1;
  }
  return 0;
}

// This thread's process_vm_readv calls fail with EPERM, as under a
// container's seccomp profile.
bool deny_process_vm_readv() {
  sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {static_cast<unsigned short>(std::size(f)), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

void* refused_thread(void*) {
  if (!deny_process_vm_readv()) return reinterpret_cast<void*>(5);
  give_altstack();
  if (sigsetjmp(g_jump, 1) == 0) overflow(0);
  // Unregistered: the first read, at the interrupted SP, needs the check.
  const sframe::BacktraceResult& r = g_shot.result;
  std::fprintf(stderr, "ours: %zu frames, %s\n", r.size, std::string(sframe::stop_reason_name(r.reason)).c_str());
  return reinterpret_cast<void*>(r.size == 1 && r.reason == sframe::StopReason::kReadCheckRefused ? 0 : 1);
}

void* overflow_thread(void* arg) {
  if (arg) sframe::backtrace_register_thread();
  give_altstack();
  if (sigsetjmp(g_jump, 1) == 0) overflow(0);
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(check()));
}

int run_child(const std::string& scenario) {
  if (!sframe::backtrace_init()) std::fprintf(stderr, "backtrace_init reported an error (walks go on)\n");
  sframe::backtrace_wait_ready();
  void* warm[4];
  (void)sframe_test::glibc_backtrace_fn()(warm, 4);  // loads libgcc_s: not in a handler
  (void)unw_backtrace(warm, 4);
  install(SIGSEGV);
  install(SIGUSR1);
  if (scenario == "overflow-main") {
    give_altstack();
    if (sigsetjmp(g_jump, 1) == 0) overflow(0);
    return check();
  }
  if (scenario == "overflow-worker" || scenario == "overflow-worker-registered") {
    pthread_t t;
    void* registered = scenario == "overflow-worker-registered" ? &g_shot : nullptr;
    if (pthread_create(&t, nullptr, overflow_thread, registered) != 0) return 2;
    void* rc = nullptr;
    pthread_join(t, &rc);
    return static_cast<int>(reinterpret_cast<std::intptr_t>(rc));
  }
  if (scenario == "refused-worker") {
    pthread_t t;
    if (pthread_create(&t, nullptr, refused_thread, nullptr) != 0) return 2;
    void* rc = nullptr;
    pthread_join(t, &rc);
    return static_cast<int>(reinterpret_cast<std::intptr_t>(rc));
  }
  if (scenario == "deep-main") {
    // About 3 MiB below where backtrace_init registered the stack.
    give_altstack();
    if (sigsetjmp(g_jump, 1) == 0) deep(30000);
    return check();
  }
  std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
  return 2;
}

// Runs this binary as `scenario` with RLIMIT_STACK `stack_limit`; returns
// its exit status and stderr.
struct Outcome {
  int status = -1;
  std::string output;
};
Outcome run(const char* scenario, rlim_t stack_limit) {
  Outcome o;
  int fds[2];
  if (pipe(fds) != 0) return o;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    struct rlimit rl = {stack_limit, stack_limit};
    struct rlimit cur = {};
    getrlimit(RLIMIT_STACK, &cur);
    if (stack_limit != RLIM_INFINITY && cur.rlim_max != RLIM_INFINITY && cur.rlim_max < stack_limit)
      rl.rlim_max = rl.rlim_cur = cur.rlim_max;
    if (setrlimit(RLIMIT_STACK, &rl) != 0) {
      std::perror("setrlimit(RLIMIT_STACK)");
      _exit(3);
    }
    setenv("SFPP_CRASH_CHILD", scenario, 1);
    execl("/proc/self/exe", "backtrace_crash_tests", static_cast<char*>(nullptr));
    _exit(4);
  }
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) o.output.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

TEST(CrashHandler, StackOverflowOnMainThread) {
  const Outcome o = run("overflow-main", 8u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, StackOverflowOnMainThreadSmallRlimit) {
  const Outcome o = run("overflow-main", 1u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, StackOverflowOnUnregisteredThread) {
  const Outcome o = run("overflow-worker", 8u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, StackOverflowOnRegisteredThread) {
  const Outcome o = run("overflow-worker-registered", 8u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, ReadCheckRefusedBySeccomp) {
  // The walk stops with the reason, never with a second fault.
  const Outcome o = run("refused-worker", 8u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, DeepMainThreadUnlimitedStack) {
  const Outcome o = run("deep-main", RLIM_INFINITY);
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST(CrashHandler, DeepMainThread) {
  const Outcome o = run("deep-main", 8u << 20);
  EXPECT_EQ(o.status, 0) << o.output;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("SFPP_CRASH_CHILD")) return run_child(scenario);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
