// SPDX-License-Identifier: MIT
// The process layer against the kernel's and the dynamic loader's own view:
// /proc/self/exe, dladdr(), unmapped pages, /proc/PID/status.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <sys/auxv.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "sframe/process/process.hpp"

namespace sframe::process {
namespace {

TEST(Maps, ParsesKernelLines) {
  // Lines in the kernel's format (fs/proc/task_mmu.c show_map_vma): path
  // column after padding, " (deleted)" suffix, pseudo names, anonymous.
  const char* text =
      "55d0c4a00000-55d0c4a02000 r--p 00000000 08:01 1048602                    /usr/bin/cat\n"
      "55d0c4a02000-55d0c4a07000 r-xp 00002000 08:01 1048602                    /usr/bin/cat\n"
      "7f1e2a000000-7f1e2a021000 rw-p 00000000 00:00 0 \n"
      "7f1e2b000000-7f1e2b001000 r-xs 0001f000 fd:02 77                         /tmp/my lib.so (deleted)\n"
      "7ffd4a1c0000-7ffd4a1e1000 rw-p 00000000 00:00 0                          [stack]\n"
      "7ffd4a1f0000-7ffd4a1f2000 r-xp 00000000 00:00 0                          [vdso]\n"
      "7ffd4a1f2000-7ffd4a1f\n";  // cut short while the process changed
  const auto m = parse_maps(text);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].start, 0x55d0c4a02000u);
  EXPECT_EQ(m[1].end, 0x55d0c4a07000u);
  EXPECT_EQ(m[1].offset, 0x2000u);
  EXPECT_TRUE(m[1].read && m[1].exec && !m[1].write && !m[1].shared);
  EXPECT_EQ(m[1].inode, 1048602u);
  EXPECT_EQ(m[1].path, "/usr/bin/cat");
  EXPECT_TRUE(m[1].file_backed());
  EXPECT_EQ(m[2].path, "");
  EXPECT_FALSE(m[2].file_backed());
  EXPECT_EQ(m[3].path, "/tmp/my lib.so");
  EXPECT_TRUE(m[3].deleted && m[3].shared);
  EXPECT_EQ(m[3].offset, 0x1f000u);
  EXPECT_EQ(m[4].path, "[stack]");
  EXPECT_FALSE(m[4].file_backed());
  EXPECT_EQ(m[5].path, "[vdso]");
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

__attribute__((noinline)) int local_function(int x) { return x * 3 + 1; }

TEST(Maps, SelfCodeIsInAnExecutableMappingOfTheExecutable) {
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  const auto pc = reinterpret_cast<std::uintptr_t>(&local_function);
  bool found = false;
  for (const auto& m : *maps) {
    if (pc >= m.start && pc < m.end) {
      found = true;
      EXPECT_TRUE(m.exec);
      EXPECT_EQ(m.path, self_exe());
    }
  }
  EXPECT_TRUE(found);
}

TEST(RemoteMemory, ReadsThePrefixBeforeAnUnmappedPage) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* p = static_cast<unsigned char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  for (long i = 0; i < page; ++i) p[i] = static_cast<unsigned char>(i * 7);
  // Unmapped, not PROT_NONE: /proc/PID/mem reads PROT_NONE pages (FOLL_FORCE).
  ASSERT_EQ(munmap(p + page, page), 0);
  for (auto method : {RemoteMemory::Method::kAuto, RemoteMemory::Method::kProcMem}) {
    RemoteMemory mem(getpid(), method);
    std::byte out[100] = {};
    const auto base = reinterpret_cast<std::uint64_t>(p);
    // 40 readable bytes, then the unmapped page.
    EXPECT_EQ(mem.read(base + page - 40, out), 40u);
    EXPECT_EQ(std::memcmp(out, p + page - 40, 40), 0);
    EXPECT_EQ(mem.read(base + page, out), 0u);
    EXPECT_FALSE(mem.read_word(base + page - 4));
    std::uint64_t want;
    std::memcpy(&want, p + 123, 8);
    EXPECT_EQ(mem.read_word(base + 123), want);
    EXPECT_FALSE(mem.read_word(~std::uint64_t{0} - 3));  // wraps around
    EXPECT_FALSE(mem.read_word(0));
  }
  munmap(p, page);
}

// The vDSO image is the one the kernel names in the auxiliary vector
// (AT_SYSINFO_EHDR), at every call and in a forked child.
TEST(Modules, OwnVdsoIsWhereTheAuxiliaryVectorSays) {
  const auto* ehdr = reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR));
  ASSERT_NE(ehdr, nullptr) << "no vDSO in the auxiliary vector";
  const auto image_of = [](const elf::ElfFile& f) {
    std::size_t size = 0;
    const char* raw = elf_rawfile(static_cast<Elf*>(f.native_handle()), &size);
    return std::string(raw, size);
  };
  auto first = own_vdso();
  ASSERT_TRUE(first.has_value());
  const std::string a = image_of(*first);
  ASSERT_GE(a.size(), 4096u);
  EXPECT_EQ(a, std::string(ehdr, a.size()));
  auto second = own_vdso();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(image_of(*second), a);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto v = own_vdso();
    _exit(v && image_of(*v) == std::string(ehdr, a.size()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Modules, SymbolizeAgreesWithDladdr) {
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  RemoteMemory mem(getpid());
  auto mods = LoadedModules::load(getpid(), *maps, mem);
  // A libc function and one of this program's.
  const void* fns[] = {reinterpret_cast<const void*>(&::getpid), reinterpret_cast<const void*>(&local_function)};
  for (const void* fn : fns) {
    Dl_info info{};
    ASSERT_NE(dladdr(fn, &info), 0);
    const auto pc = reinterpret_cast<std::uint64_t>(fn) + 1;
    const auto s = symbolize(mods, pc);
    ASSERT_NE(s.module, nullptr);
    char want_path[PATH_MAX], got_path[PATH_MAX];
    ASSERT_NE(realpath(info.dli_fname, want_path), nullptr);
    ASSERT_NE(realpath(s.module->path.c_str(), got_path), nullptr);
    EXPECT_STREQ(got_path, want_path);
    ASSERT_FALSE(s.name.empty());
    if (info.dli_saddr) {
      EXPECT_EQ(pc - s.offset, reinterpret_cast<std::uint64_t>(info.dli_saddr));
    }
    // PIEs and shared objects are linked at 0: their bias is the load base
    // the loader reports (a non-PIE executable has bias 0).
    if (s.module->bias != 0) {
      EXPECT_EQ(s.module->bias, reinterpret_cast<std::uint64_t>(info.dli_fbase));
    }
    // SFrame is generated on demand for modules without their own (libc
    // here); afterwards the unwinder's map covers the PC.
    if (s.module->source == ModuleSource::kNone) {
      EXPECT_TRUE(s.module->generation_pending);
      EXPECT_TRUE(mods.generate_for(pc));
      EXPECT_FALSE(mods.generate_for(pc));  // once
    }
    EXPECT_NE(s.module->source, ModuleSource::kNone) << s.module->path << ": " << s.module->why;
    EXPECT_NE(mods.unwind_map().find(pc), nullptr);
  }
}

// The shared per-module builder's trampoline detection, against the kernel:
// the restorer glibc's sigaction() registered (read back with the raw
// rt_sigaction system call, whose struct carries sa_restorer).
TEST(Modules, SignalTrampolineIsTheKernelsRestorer) {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);
  struct KernelSigaction {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } k{};
  ASSERT_EQ(syscall(SYS_rt_sigaction, SIGUSR2, nullptr, &k, sizeof k.mask), 0);
  signal(SIGUSR2, SIG_DFL);
  ASSERT_NE(k.restorer, nullptr);
  const auto restorer = reinterpret_cast<std::uint64_t>(k.restorer);
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  RemoteMemory mem(getpid());
  ModuleOptions no_symbols_needed;
  auto mods = LoadedModules::load(getpid(), *maps, mem, no_symbols_needed);
  bool found = false;
  for (const auto& t : mods.signal_trampolines()) found = found || t.contains(restorer);
  EXPECT_TRUE(found);
  // By code alone (the builder, no symbols): the module's own ranges.
  const LoadedModule* libc = mods.find(restorer);
  ASSERT_NE(libc, nullptr);
  ASSERT_NE(libc->unwind, nullptr);
  found = false;
  for (const auto& t : libc->unwind->trampolines()) found = found || t.contains(restorer - libc->bias);
  EXPECT_TRUE(found) << libc->path;
}

// The rule shared with the in-process backtrace: a module with its own
// section generates only what that section lacks; with every .eh_frame FDE
// covered, nothing is pending. Truth: binutils' FDE counts.
TEST(Modules, GenerationOnlyForWhatTheOwnSectionLacks) {
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  RemoteMemory mem(getpid());
  auto mods = LoadedModules::load(getpid(), *maps, mem);
  const auto self = reinterpret_cast<std::uint64_t>(&local_function);
  const LoadedModule* m = mods.find(self);
  ASSERT_NE(m, nullptr);
  // Does not apply where this program has no SFrame section of its own: the
  // clang build (no -Wa,--gsframe, CMakeLists.txt), or SFRAMEPP_SELF_SFRAME=OFF.
  if (m->source != ModuleSource::kNative) GTEST_SKIP() << "test program without SFrame";
  const std::string count_eh = "readelf -wf '" + m->path + "' 2>/dev/null | grep -c 'FDE cie='";
  const std::string count_sf = "objdump --sframe '" + m->path + "' 2>/dev/null | grep -c 'func idx'";
  const auto count = [](const std::string& cmd) {
    FILE* f = popen(cmd.c_str(), "r");
    long n = 0;
    if (f) {
      if (std::fscanf(f, "%ld", &n) != 1) n = 0;
      pclose(f);
    }
    return n;
  };
  const long eh = count(count_eh), sf = count(count_sf);
  ASSERT_NE(eh, 0) << "readelf (binutils) counted no FDE: the oracle is missing or failed";
  ASSERT_NE(sf, 0) << "objdump (binutils) counted no SFrame FDE: the oracle is missing or failed";
  EXPECT_EQ(m->generation_pending, eh > sf);
  // One FDE at a time (the default): never for a PC the own section covers;
  // for each .eh_frame FDE it lacks, once.
  ASSERT_TRUE(m->unwind->on_demand());
  auto hdr = m->file->section_bytes(".eh_frame_hdr");
  ASSERT_TRUE(hdr);
  auto starts = cfi::eh_frame_hdr_starts(hdr->bytes, hdr->header.address);
  ASSERT_TRUE(starts);
  long missing = 0, tried = 0, covered = 0;
  for (std::uint64_t start : *starts) {
    auto own = m->index->find(start);
    if (own || own.error().code() != LookupErrc::kPcNotCovered) {
      if (covered++ < 20) {
        EXPECT_FALSE(mods.generate_for(start + m->bias)) << std::hex << start;
      }
      continue;
    }
    ++missing;
    if (tried == 20) continue;
    ++tried;
    const std::uint64_t pc = start + m->bias;
    EXPECT_TRUE(mods.generate_for(pc)) << std::hex << start;
    EXPECT_NE(mods.extra_map().find(pc), nullptr) << std::hex << start;
    EXPECT_FALSE(mods.generate_for(pc)) << std::hex << start;
  }
  EXPECT_GE(missing, eh - sf);
  EXPECT_LE(missing, eh - sf + 4);
  // The whole module at load (on_demand off): what the own section lacks.
  ModuleOptions whole;
  whole.on_demand = false;
  auto all = LoadedModules::load(getpid(), *maps, mem, whole);
  const LoadedModule* w = all.find(self);
  ASSERT_NE(w, nullptr);
  if (eh > sf) {
    EXPECT_GE(static_cast<long>(w->extra_functions), eh - sf);
    EXPECT_LE(static_cast<long>(w->extra_functions), eh - sf + 4);
  }
}

TEST(Attachment, StopsAndReleasesAChild) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  usleep(20000);
  {
    auto a = Attachment::attach(child);
    if (!a && a.error().value == EPERM) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      FAIL() << "ptrace not permitted: the test cannot run (CI runs as root)";
    }
    ASSERT_TRUE(a);
    ASSERT_EQ(a->threads().size(), 1u);
    const Thread& t = a->threads()[0];
    EXPECT_EQ(t.tid, child);
    EXPECT_TRUE(t.stopped);
    // The stack pointer is in the child's [stack] mapping.
    auto maps = read_maps(child);
    ASSERT_TRUE(maps);
    bool in_stack = false;
    for (const auto& m : *maps)
      if (m.path == "[stack]" && t.regs.sp >= m.start && t.regs.sp < m.end) in_stack = true;
    EXPECT_TRUE(in_stack);
    std::ifstream st("/proc/" + std::to_string(child) + "/status");
    std::string line, tracer;
    while (std::getline(st, line))
      if (line.rfind("TracerPid:", 0) == 0) tracer = line;
    EXPECT_NE(tracer.find(std::to_string(getpid())), std::string::npos) << tracer;
  }
  // Detached by the destructor: no tracer any more.
  std::ifstream st("/proc/" + std::to_string(child) + "/status");
  std::string line, tracer;
  while (std::getline(st, line))
    if (line.rfind("TracerPid:", 0) == 0) tracer = line;
  EXPECT_EQ(tracer, "TracerPid:\t0");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// The test program's own handlers, installed before attaching.
extern "C" void app_handler(int) {}

struct AppHandlers {
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGALRM};
  struct sigaction old[std::size(kSignals)] = {};
  AppHandlers() {
    struct sigaction sa = {};
    sa.sa_handler = app_handler;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &old[i]);
  }
  ~AppHandlers() {
    for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &old[i], nullptr);
  }
  // Every signal still has the application's handler (asked of the kernel).
  static void expect_installed(const char* when) {
    for (int sig : kSignals) {
      struct sigaction now = {};
      ASSERT_EQ(sigaction(sig, nullptr, &now), 0);
      EXPECT_EQ(now.sa_handler, &app_handler) << "signal " << sig << " " << when;
    }
    // No alarm is pending either (alarm(0) returns the seconds left).
    EXPECT_EQ(alarm(0), 0u) << when;
  }
};

std::string status_field(pid_t pid, const std::string& field) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  return "";
}

bool traced(pid_t pid) {
  const std::string t = status_field(pid, "TracerPid");
  return t.find_first_not_of(" \t0") != std::string::npos;
}

pid_t fork_pausing_child() {
  const pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  return child;
}

void kill_child(pid_t child) {
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(Attachment, LeavesTheApplicationsSignalHandlersAlone) {
  const AppHandlers app;
  AppHandlers::expect_installed("before attach");
  const pid_t child = fork_pausing_child();
  ASSERT_GT(child, 0);
  usleep(20000);
  {
    auto a = Attachment::attach(child);
    if (!a && a.error().value == EPERM) {
      kill_child(child);
      FAIL() << "ptrace not permitted here (CI runs as root, where it is)";
    }
    ASSERT_TRUE(a) << a.error().value;
    ASSERT_EQ(a->threads().size(), 1u);
    EXPECT_TRUE(a->threads()[0].stopped);
    AppHandlers::expect_installed("while attached");
    a->detach();
    AppHandlers::expect_installed("after detach");
  }
  AppHandlers::expect_installed("after the attachment ended");
  EXPECT_FALSE(traced(child));
  kill_child(child);
}

TEST(Attachment, DeadlineAlreadyPassedAttachesNothing) {
  const pid_t child = fork_pausing_child();
  ASSERT_GT(child, 0);
  usleep(20000);
  AttachOptions opt;
  opt.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  auto a = Attachment::attach(child, opt);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().value, static_cast<std::uint64_t>(ETIMEDOUT));
  EXPECT_LT(took, std::chrono::milliseconds(100));
  EXPECT_FALSE(traced(child));
  kill_child(child);
}

TEST(Attachment, CancelFlagSetStopsAttaching) {
  const pid_t child = fork_pausing_child();
  ASSERT_GT(child, 0);
  usleep(20000);
  volatile std::sig_atomic_t cancel = 1;
  AttachOptions opt;
  opt.cancel = &cancel;
  auto a = Attachment::attach(child, opt);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().value, static_cast<std::uint64_t>(EINTR));
  EXPECT_FALSE(traced(child));
  kill_child(child);
}

// A vfork parent waits for its child in an uninterruptible (killable) sleep:
// PTRACE_INTERRUPT cannot stop it until the child execs or exits, so attach()
// must give up at the deadline, and release it once it does stop.
TEST(Attachment, DeadlineGivesUpOnAThreadThatCannotStop) {
  const AppHandlers app;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setpgid(0, 0);
    if (vfork() == 0) {
      for (;;) syscall(SYS_pause);  // the parent waits in the kernel meanwhile
    }
    for (;;) pause();
  }
  setpgid(child, child);
  // Wait until the child sleeps in vfork (state D).
  std::string state;
  for (int i = 0; i < 200; ++i) {
    state = status_field(child, "State");
    if (state.find('D') != std::string::npos) break;
    usleep(10000);
  }
  ASSERT_NE(state.find('D'), std::string::npos) << "the vfork parent is not in state D: " << state;
  AttachOptions opt;
  opt.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  auto a = Attachment::attach(child, opt);
  const auto took = std::chrono::steady_clock::now() - t0;
  if (!a && a.error().value == EPERM) {
    kill(-child, SIGKILL);
    waitpid(child, nullptr, 0);
    FAIL() << "ptrace not permitted here (CI runs as root, where it is)";
  }
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().value, static_cast<std::uint64_t>(ETIMEDOUT));
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  AppHandlers::expect_installed("after the timeout");
  EXPECT_EQ(Attachment::release_pending(), 1u);  // still in vfork: seized, not stopped
  // End the vfork: the parent leaves its sleep, stops for the pending
  // interrupt, and release_pending() lets it go.
  std::string tasks;
  {
    std::ifstream children("/proc/" + std::to_string(child) + "/task/" + std::to_string(child) + "/children");
    std::getline(children, tasks);
  }
  const pid_t grandchild = static_cast<pid_t>(std::atol(tasks.c_str()));
  ASSERT_GT(grandchild, 0) << "no vfork child listed";
  kill(grandchild, SIGKILL);
  std::size_t pending = 1;
  for (int i = 0; i < 200 && pending != 0; ++i) {
    usleep(10000);
    pending = Attachment::release_pending();
  }
  EXPECT_EQ(pending, 0u);
  EXPECT_FALSE(traced(child));
  usleep(50000);
  const std::string after = status_field(child, "State");
  EXPECT_EQ(after.find('t'), std::string::npos) << "left in a tracing stop: " << after;
  kill(-child, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(Attachment, NoSuchProcess) {
  auto a = Attachment::attach(999999999);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().value, static_cast<std::uint64_t>(ESRCH));
}

}  // namespace
}  // namespace sframe::process
