// SPDX-License-Identifier: MIT
// Stopping and resuming the threads of another process with ptrace. No
// signal handlers, no alarms: waits poll waitpid(WNOHANG) against a deadline.
#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <mutex>
#include <set>

#include "sframe/process/process.hpp"

namespace sframe::process {
namespace {

using Clock = std::chrono::steady_clock;

// Between two polls of waitpid(WNOHANG). A signal to the caller ends the
// sleep early, so a cancel flag set by its handler is seen at once.
constexpr auto kPollInterval = std::chrono::milliseconds(1);
constexpr auto kDefaultDeadline = std::chrono::seconds(10);
constexpr auto kDetachGrace = std::chrono::seconds(2);

bool cancelled(const volatile std::sig_atomic_t* flag) noexcept { return flag && *flag != 0; }

// Threads seized by an attach() that gave up on them (ETIMEDOUT): still
// traced, they stop when they leave their uninterruptible wait and must then
// be detached, by the thread that seized them (ptrace's rule; a detach from
// another thread fails and is retried later).
std::mutex g_stragglers_mutex;
std::vector<pid_t> g_stragglers;

std::size_t release_stragglers() noexcept {
  const std::lock_guard<std::mutex> lock(g_stragglers_mutex);
  std::erase_if(g_stragglers, [](pid_t tid) {
    int status = 0;
    (void)waitpid(tid, &status, __WALL | WNOHANG);  // consume its stop, if any
    if (ptrace(PTRACE_DETACH, tid, nullptr, nullptr) == 0) return true;
    // Gone (exited, or reaped) rather than merely still running?
    return ::kill(tid, 0) != 0 && errno == ESRCH;
  });
  return g_stragglers.size();
}

void nap() noexcept {
  timespec ts{0, static_cast<long>(std::chrono::nanoseconds(kPollInterval).count())};
  nanosleep(&ts, nullptr);
}

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

Error errno_error(int e) { return Error{IoErrc::kIoError, 0, static_cast<std::uint64_t>(e), kNoIndex, kNoIndex}; }

// One waitpid(WNOHANG) for the stop PTRACE_INTERRUPT asked for. Returns
// 0 (stopped), EAGAIN (not yet), or an errno: ESRCH (thread gone).
int poll_stopped(Thread& t) noexcept {
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(t.tid, &status, __WALL | WNOHANG);
    if (r == 0) return EAGAIN;
    if (r < 0) {
      if (errno == EINTR) continue;
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

std::string process_name(pid_t pid) { return read_comm("/proc/" + std::to_string(pid) + "/comm"); }

Expected<Attachment> Attachment::attach(pid_t pid, const AttachOptions& opt) {
  if (pid <= 0) return Unexpected{errno_error(ESRCH)};
  const Clock::time_point deadline = opt.deadline ? *opt.deadline : Clock::now() + kDefaultDeadline;
  if (Clock::now() >= deadline) return Unexpected{errno_error(ETIMEDOUT)};
  if (cancelled(opt.cancel)) return Unexpected{errno_error(EINTR)};
  (void)release_stragglers();
  Attachment a;
  a.pid_ = pid;
  a.attached_ = true;

  std::set<pid_t> seen;
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
        t.stopped = true;  // provisional: confirmed by poll_stopped below
        a.unwaited_.push_back(tid);
      }
      a.threads_.push_back(std::move(t));
      if (cancelled(opt.cancel)) return Unexpected{errno_error(EINTR)};  // `a` detaches
    }
    if (!added) break;
  }
  if (seen.empty()) return Unexpected{errno_error(ESRCH)};

  // Poll every thread still expected to stop until all have, the deadline
  // passes, or the caller cancels.
  bool timed_out = false;
  for (;;) {
    for (Thread& t : a.threads_) {
      if (!t.stopped || std::find(a.unwaited_.begin(), a.unwaited_.end(), t.tid) == a.unwaited_.end()) continue;
      const int e = poll_stopped(t);
      if (e == EAGAIN) continue;
      std::erase(a.unwaited_, t.tid);
      if (e != 0) {
        t.stopped = false;
        t.error = errno_error(e);
        continue;
      }
      int err = 0;
      if (!read_registers(t.tid, t.regs, err)) {
        t.error = errno_error(err);
        t.stopped = false;  // still in a ptrace stop: detach() resumes it
      }
    }
    if (a.unwaited_.empty()) break;
    if (cancelled(opt.cancel)) return Unexpected{errno_error(EINTR)};
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    nap();
  }
  if (timed_out) {
    // Still running (uninterruptible): ETIMEDOUT. Waiting longer in detach()
    // would not help; they are released once they stop (release_pending()).
    for (Thread& t : a.threads_) {
      if (std::find(a.unwaited_.begin(), a.unwaited_.end(), t.tid) == a.unwaited_.end()) continue;
      t.stopped = false;
      t.error = errno_error(ETIMEDOUT);
    }
    const std::lock_guard<std::mutex> lock(g_stragglers_mutex);
    g_stragglers.insert(g_stragglers.end(), a.unwaited_.begin(), a.unwaited_.end());
    a.unwaited_.clear();
  }
  // Threads that exited between SEIZE and the stop are dropped.
  std::erase_if(a.threads_, [](const Thread& t) { return !t.stopped && t.error && t.error->value == ESRCH; });
  if (a.threads_.empty()) return Unexpected{errno_error(ESRCH)};
  if (timed_out && std::none_of(a.threads_.begin(), a.threads_.end(), [](const Thread& t) { return t.stopped; }))
    return Unexpected{errno_error(ETIMEDOUT)};
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
  // A thread asked to stop but not stopped yet (attach() was cancelled)
  // must reach its stop before PTRACE_DETACH can release it;
  // poll for it briefly.
  if (!unwaited_.empty()) {
    const Clock::time_point until = Clock::now() + kDetachGrace;
    for (;;) {
      std::erase_if(unwaited_, [](pid_t tid) {
        int status = 0;
        const pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
        return r != 0 && !(r < 0 && errno == EINTR);  // stopped, gone, or not ours
      });
      if (unwaited_.empty() || Clock::now() >= until) break;
      nap();
    }
    // Still not stopped: released later, once they stop.
    const std::lock_guard<std::mutex> lock(g_stragglers_mutex);
    g_stragglers.insert(g_stragglers.end(), unwaited_.begin(), unwaited_.end());
    unwaited_.clear();
  }
  for (const Thread& t : threads_) {
    // Threads never seized, or not stopped (now stragglers), fail with
    // ESRCH here, harmlessly.
    ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<std::intptr_t>(t.pending_signal)));
  }
  (void)release_stragglers();
}

std::size_t Attachment::release_pending() noexcept { return release_stragglers(); }

}  // namespace sframe::process
