// Stopping and resuming the threads of another process with ptrace.
#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <set>

#include "sframe/process.hpp"

namespace sframe::process {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
volatile std::sig_atomic_t g_timed_out = 0;

// The handlers only set flags: waiting calls return EINTR (no SA_RESTART)
// and the code unwinds normally, detaching on the way out.
extern "C" void on_terminate(int) { g_interrupted = 1; }
extern "C" void on_alarm(int) { g_timed_out = 1; }

constexpr int kCaught[] = {SIGINT, SIGTERM, SIGHUP};

// Installs the handlers for the lifetime of the attachments (counted).
struct Handlers {
  int users = 0;
  struct sigaction old[std::size(kCaught)] = {};
  struct sigaction old_alarm = {};

  void acquire() {
    if (users++ > 0) return;
    g_interrupted = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_terminate;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    for (std::size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &sa, &old[i]);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, &old_alarm);
  }
  void release() {
    if (users == 0 || --users > 0) return;
    for (std::size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &old[i], nullptr);
    sigaction(SIGALRM, &old_alarm, nullptr);
  }
};
Handlers g_handlers;

std::set<pid_t> list_tasks(pid_t pid) {
  std::set<pid_t> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) out.insert(static_cast<pid_t>(tid));
  }
  closedir(d);
  return out;
}

std::string read_comm(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

bool read_registers(pid_t tid, ThreadRegisters& r, int& err) {
#if defined(__x86_64__)
  user_regs_struct regs{};
  iovec io{&regs, sizeof regs};
  if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) {
    err = errno;
    return false;
  }
  r.pc = regs.rip;
  r.sp = regs.rsp;
  r.fp = regs.rbp;
  r.lr = 0;
  return true;
#elif defined(__aarch64__)
  user_pt_regs regs{};
  iovec io{&regs, sizeof regs};
  if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) {
    err = errno;
    return false;
  }
  r.pc = regs.pc;
  r.sp = regs.sp;
  r.fp = regs.regs[29];
  r.lr = regs.regs[30];
  return true;
#else
  (void)tid;
  (void)r;
  err = ENOSYS;
  return false;
#endif
}

Error errno_error(int e) { return Error{Errc::kIoError, 0, static_cast<std::uint64_t>(e), kNoIndex, kNoIndex}; }

// Waits for the stop PTRACE_INTERRUPT asked for. Returns 0, or an errno:
// ESRCH (thread gone), EINTR (interrupted), ETIMEDOUT.
int wait_stopped(Thread& t) {
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(t.tid, &status, __WALL);
    if (r < 0) {
      if (errno == EINTR) {
        if (g_interrupted) return EINTR;
        if (g_timed_out) return ETIMEDOUT;
        continue;
      }
      return errno == ECHILD ? ESRCH : errno;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return ESRCH;
    if (!WIFSTOPPED(status)) continue;
    const int sig = WSTOPSIG(status);
    const int event = (status >> 16) & 0xff;
    // An event stop (the interrupt itself, or a group-stop) carries no signal
    // to deliver; a signal-delivery-stop does, and we give it back on detach.
    if (event == 0 && sig != SIGTRAP) t.pending_signal = sig;
    return 0;
  }
}

}  // namespace

bool Attachment::interrupted() noexcept { return g_interrupted != 0; }

std::string process_name(pid_t pid) { return read_comm("/proc/" + std::to_string(pid) + "/comm"); }

Expected<Attachment> Attachment::attach(pid_t pid) {
  if (pid <= 0) return Unexpected{errno_error(ESRCH)};
  Attachment a;
  a.pid_ = pid;
  a.attached_ = true;
  g_handlers.acquire();
  g_timed_out = 0;
  // A thread stuck in an uninterruptible wait (D state) does not stop until
  // it leaves it; do not wait for ever.
  alarm(10);
  struct AlarmOff {
    ~AlarmOff() { alarm(0); }
  } alarm_off;

  std::set<pid_t> seen;
  std::vector<pid_t> seized;
  for (int round = 0; round < 100; ++round) {
    bool added = false;
    for (pid_t tid : list_tasks(pid)) {
      if (!seen.insert(tid).second) continue;
      added = true;
      Thread t;
      t.tid = tid;
      t.name = read_comm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
      if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
        const int e = errno;
        if (e == ESRCH) continue;  // exited meanwhile
        if (a.threads_.empty() && tid == pid) return Unexpected{errno_error(e)};
        t.error = errno_error(e);
        a.threads_.push_back(std::move(t));
        continue;
      }
      if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
        t.error = errno_error(errno);
      } else {
        t.stopped = true;  // provisional: confirmed by wait_stopped below
        a.unwaited_.push_back(tid);
      }
      a.threads_.push_back(std::move(t));
      if (g_interrupted) return Unexpected{errno_error(EINTR)};
    }
    if (!added) break;
  }
  if (seen.empty()) return Unexpected{errno_error(ESRCH)};

  for (Thread& t : a.threads_) {
    if (!t.stopped) continue;
    t.stopped = false;
    const int e = wait_stopped(t);
    std::erase(a.unwaited_, t.tid);
    if (e == EINTR) return Unexpected{errno_error(EINTR)};
    if (e != 0) {
      t.error = errno_error(e);
      continue;
    }
    t.stopped = true;
    int err = 0;
    if (!read_registers(t.tid, t.regs, err)) {
      t.error = errno_error(err);
      t.stopped = false;  // still in a ptrace stop: detach() resumes it
    }
  }
  // Threads that exited between SEIZE and the stop are dropped.
  std::erase_if(a.threads_, [](const Thread& t) { return !t.stopped && t.error.value == ESRCH; });
  if (a.threads_.empty()) return Unexpected{errno_error(ESRCH)};
  std::sort(a.threads_.begin(), a.threads_.end(), [pid](const Thread& x, const Thread& y) {
    if ((x.tid == pid) != (y.tid == pid)) return x.tid == pid;
    return x.tid < y.tid;
  });
  return a;
}

Attachment::Attachment(Attachment&& o) noexcept
    : pid_(o.pid_),
      threads_(std::move(o.threads_)),
      unwaited_(std::move(o.unwaited_)),
      attached_(std::exchange(o.attached_, false)) {}

Attachment& Attachment::operator=(Attachment&& o) noexcept {
  if (this != &o) {
    detach();
    pid_ = o.pid_;
    threads_ = std::move(o.threads_);
    unwaited_ = std::move(o.unwaited_);
    attached_ = std::exchange(o.attached_, false);
  }
  return *this;
}

Attachment::~Attachment() { detach(); }

void Attachment::detach() noexcept {
  if (!attached_) return;
  attached_ = false;
  // A thread asked to stop but not waited for (attach() was interrupted)
  // must reach its stop before PTRACE_DETACH can release it; wait briefly.
  if (!unwaited_.empty()) {
    g_timed_out = 0;
    alarm(2);
    for (pid_t tid : unwaited_) {
      int status = 0;
      while (waitpid(tid, &status, __WALL) < 0 && errno == EINTR && !g_timed_out) {
      }
      if (g_timed_out) break;
    }
    alarm(0);
    unwaited_.clear();
  }
  for (const Thread& t : threads_) {
    // Threads never seized fail with ESRCH here, harmlessly. A thread seized
    // but not stopped is detached by the kernel when this process exits.
    ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<std::intptr_t>(t.pending_signal)));
  }
  g_handlers.release();
}

}  // namespace sframe::process
