// SPDX-License-Identifier: MIT
// The module table's set-up as seen by its user: the init report (one entry
// per module with code, its source and, for failures, the module's path and
// why), data-only libraries (not an error), readiness after dlopen and
// backtrace_refresh_if_needed(). Truth comes from outside the library:
// /proc/self/maps for the modules, `readelf -lW` for which have
// PT_GNU_SFRAME / PT_GNU_EH_FRAME, libunwind and glibc for the traces.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>

#include <algorithm>
#include <thread>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backtrace_support.hpp"

namespace {

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// Files with an executable mapping, from /proc/self/maps.
std::set<std::string> exec_files() {
  std::set<std::string> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, off, dev, inode, path;
    in >> range >> perms >> off >> dev >> inode >> path;
    if (perms.size() > 2 && perms[2] == 'x' && !path.empty() && path[0] == '/') out.insert(real(path));
  }
  return out;
}

const sframe::BacktraceModuleReport* find_module(const sframe::BacktraceInitReport& r, const std::string& path) {
  for (const auto& m : r.modules)
    if (real(m.name) == real(path)) return &m;
  return nullptr;
}

// A scratch directory for libraries compiled by the tests, removed at exit.
std::string scratch() {
  static std::vector<std::string>& dirs = *new std::vector<std::string>();
  static const int registered = std::atexit([] {
    for (const std::string& d : dirs) std::filesystem::remove_all(d);
  });
  (void)registered;
  char tmpl[] = "/tmp/sframepp-btmod-XXXXXX";
  const char* d = mkdtemp(tmpl);
  if (!d) return "/tmp";
  dirs.push_back(d);
  return d;
}

// Compiles `source` (C) into a shared library; "" when no compiler works.
std::string build_library(const std::string& dir, const std::string& name, const std::string& source,
                          const std::string& flags) {
  const std::string c = dir + "/" + name + ".c", so = dir + "/" + name + ".so";
  std::ofstream(c) << source;
  const std::string cmd = "cc -shared -fPIC -O2 " + flags + " -o " + so + " " + c + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return "";
  return so;
}

// The deepest frames through a helper of backtrace_support.hpp (used, so
// that this file compiles warning-free with all of it).
TEST(BacktraceModules, TraceAfterReportedInit) {
  sframe::BacktraceInitReport report;
  ASSERT_TRUE(sframe::backtrace_init({}, &report)) << report.message();
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  Traces t;
  mixed_at(0, 12, t);
  expect_all_agree(t, 12);
}

TEST(BacktraceModules, InitReportListsEveryModuleWithCode) {
  sframe::BacktraceInitReport report;
  const auto ok = sframe::backtrace_init({}, &report);
  ASSERT_TRUE(ok) << report.message();
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  report = sframe::backtrace_report();
  EXPECT_EQ(report.failures(), 0u) << report.message();
  EXPECT_EQ(report.message(), "");
  for (const std::string& file : exec_files()) {
    const sframe::BacktraceModuleReport* m = find_module(report, file);
    ASSERT_NE(m, nullptr) << file << " missing from the report";
    // The program headers, read by binutils.
    const std::string phdrs = run("readelf -lW '" + file + "'");
    const bool has_sframe = phdrs.find("GNU_SFRAME") != std::string::npos;
    const bool has_eh = phdrs.find("GNU_EH_FRAME") != std::string::npos;
    if (has_sframe) {
      EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kNative) << file << ": " << m->reason;
    } else if (has_eh) {
      EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << file << ": " << m->reason;
    }
    EXPECT_FALSE(m->reason.empty()) << file;
  }
  // The test program's crt objects and GoogleTest were assembled without
  // --gsframe: its PT_GNU_SFRAME lacks their functions, and only those are
  // generated. Truth: binutils' counts of .eh_frame FDEs and SFrame FDEs
  // (the generator adds PC-mask FDEs for the PLT sections, a few at most).
  const sframe::BacktraceModuleReport* self = find_module(report, "/proc/self/exe");
  ASSERT_NE(self, nullptr);
  if (self->source == sframe::BacktraceModuleSource::kNative) {
    const std::string exe = real("/proc/self/exe");
    const long eh = std::stol("0" + run("readelf -wf '" + exe + "' 2>/dev/null | grep -c 'FDE cie='"));
    const long sf = std::stol("0" + run("objdump --sframe '" + exe + "' 2>/dev/null | grep -c 'func idx'"));
    if (eh > 0 && sf > 0) {
      EXPECT_GE(static_cast<long>(self->extra_functions), eh - sf) << self->reason;
      EXPECT_LE(static_cast<long>(self->extra_functions), eh - sf + 4) << self->reason;
    }
  }
  // backtrace_report() describes the same table.
  EXPECT_EQ(sframe::backtrace_report().modules.size(), report.modules.size());
}

TEST(BacktraceModules, DataOnlyLibraryIsNotAnError) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  std::string lib = "/usr/lib/x86_64-linux-gnu/libicudata.so.72";
  struct stat st {};
  if (::stat(lib.c_str(), &st) != 0) {
    lib = build_library(scratch(), "libdataonly", "const unsigned char table[4096] = {1, 2, 3};\n", "");
    ASSERT_FALSE(lib.empty()) << "no C compiler (scripts/install-deps installs build-essential)";
  }
  void* h = dlopen(lib.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_FALSE(sframe::backtrace_modules_ready());
  sframe::BacktraceInitReport report;
  const auto ok = sframe::backtrace_refresh(&report);
  EXPECT_TRUE(ok) << report.message();
  EXPECT_EQ(report.failures(), 0u) << report.message();
  const sframe::BacktraceModuleReport* m = find_module(report, lib);
  if (m) {  // listed when it has an executable segment (crt stubs)
    EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kNone) << m->reason;
    EXPECT_FALSE(m->failed());
    EXPECT_NE(m->reason.find("no .eh_frame FDEs"), std::string::npos) << m->reason;
  }
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  dlclose(h);
}

TEST(BacktraceModules, DeletedFileIsGeneratedFromMemory) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  const std::string dir = scratch();
  // No --gsframe: the library's only unwind information is .eh_frame, read
  // as loaded (its file is gone by the time the table is rebuilt).
  const std::string path = build_library(dir, "libgone", "int gone_fn(int x) { return x * 3 + 1; }\n", "");
  ASSERT_FALSE(path.empty()) << "no C compiler (scripts/install-deps installs build-essential)";
  // Does not apply to a toolchain that emits SFrame by default (the premise
  // is a library whose only unwind information is .eh_frame); Debian 12's
  // gcc does not, so on the CI machine this never skips.
  if (run("readelf -lW '" + path + "'").find("GNU_SFRAME") != std::string::npos)
    GTEST_SKIP() << "the compiler emits SFrame by default";
  void* h = dlopen(path.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  sframe::BacktraceInitReport report;
  const auto r = sframe::backtrace_refresh(&report);
  ASSERT_TRUE(r) << report.message();
  const sframe::BacktraceModuleReport* m = find_module(report, path);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->failed()) << m->reason;
  EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << m->reason;
  dlclose(h);
  EXPECT_TRUE(sframe::backtrace_refresh());
}

TEST(BacktraceModules, FailureNamesTheModule) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  const std::string dir = scratch();
  const std::string path = build_library(dir, "libbadhdr", "int bad_fn(int x) { return x * 3 + 1; }\n", "");
  ASSERT_FALSE(path.empty()) << "no C compiler (scripts/install-deps installs build-essential)";
  // Does not apply to a toolchain that emits SFrame by default (the premise
  // is a library whose only unwind information is .eh_frame); Debian 12's
  // gcc does not, so on the CI machine this never skips.
  if (run("readelf -lW '" + path + "'").find("GNU_SFRAME") != std::string::npos)
    GTEST_SKIP() << "the compiler emits SFrame by default";
  // Byte 1 of .eh_frame_hdr (eh_frame_ptr_enc) made an encoding that does
  // not exist (DW_EH_PE 0x05): the loader does not read it, an unwinder
  // cannot find .eh_frame through it. Offset from binutils' section table.
  const std::string off = run("readelf -SW '" + path + "' | awk '$2 == \".eh_frame_hdr\" { print $5 }'");
  ASSERT_FALSE(off.empty());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::stoul(off, nullptr, 16) + 1));
    f.put(0x05);
    ASSERT_TRUE(f.good());
  }
  void* h = dlopen(path.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  sframe::BacktraceInitReport report;
  const auto r = sframe::backtrace_refresh(&report);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), sframe::ElfErrc::kElfError);
  EXPECT_EQ(report.failures(), 1u) << report.message();
  EXPECT_NE(report.message().find(path + ": "), std::string::npos) << report.message();
  EXPECT_NE(report.message().find(".eh_frame_hdr unreadable (byte 1)"), std::string::npos) << report.message();
  std::printf("%s\n", report.message().c_str());
  bool listed = false;
  for (const auto& mod : report.modules)
    if (mod.name == path) {
      listed = true;
      EXPECT_TRUE(mod.failed());
      EXPECT_EQ(mod.source, sframe::BacktraceModuleSource::kNone);
    }
  EXPECT_TRUE(listed);
  // The table was still published: the library is in it.
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  dlclose(h);
  EXPECT_TRUE(sframe::backtrace_refresh());
}

TEST(BacktraceModules, ReadyAfterRefreshIfNeeded) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  auto again = sframe::backtrace_refresh_if_needed();
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  void* h = dlopen(SFRAMEPP_BT_DL_PATH, RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_FALSE(sframe::backtrace_modules_ready());
  auto rebuilt = sframe::backtrace_refresh_if_needed();
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(*rebuilt);
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  EXPECT_EQ(sframe::backtrace_unknown_pc(), 0u);
  auto* fn = reinterpret_cast<int (*)(int, bt_callback, void*)>(dlsym(h, "dl_recurse"));
  ASSERT_NE(fn, nullptr);
  Traces t;
  fn(5, store_capture, &t);
  expect_all_agree(t, 8);
  dlclose(h);
  // Entries of unloaded modules left in the table do not matter.
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  rebuilt = sframe::backtrace_refresh_if_needed();
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(*rebuilt);
}

TEST(BacktraceModules, WalkIntoUnrefreshedModuleIsNoted) {
  // dlopen without a refresh: a walk that meets the new module's code says
  // so (backtrace_unknown_pc, a PC the dynamic linker places in the
  // library), and the next safe point's refresh makes the walk whole.
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  auto cleared = sframe::backtrace_refresh_if_needed();
  ASSERT_TRUE(cleared);
  ASSERT_EQ(sframe::backtrace_unknown_pc(), 0u);
  void* h = dlopen(SFRAMEPP_BT_DL_PATH, RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* fn = reinterpret_cast<int (*)(int, bt_callback, void*)>(dlsym(h, "dl_recurse"));
  ASSERT_NE(fn, nullptr);
  Traces before;
  fn(5, store_capture, &before);
  const std::uint64_t unknown = sframe::backtrace_unknown_pc();
  ASSERT_NE(unknown, 0u);
  Dl_info info{};
  ASSERT_TRUE(dladdr(reinterpret_cast<void*>(unknown), &info) && info.dli_fname);
  EXPECT_NE(std::string(info.dli_fname).find("bt_dl"), std::string::npos) << info.dli_fname;
  auto rebuilt = sframe::backtrace_refresh_if_needed();
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(*rebuilt);
  EXPECT_EQ(sframe::backtrace_unknown_pc(), 0u);
  Traces after;
  fn(5, store_capture, &after);
  expect_all_agree(after, 8);
  dlclose(h);
  EXPECT_TRUE(sframe::backtrace_refresh());
}

namespace df {
void* g_frames[128];
sframe::BacktraceResult g_result;
[[gnu::noinline]] int walk(int x) {
  g_result = sframe::backtrace_ex(std::span<void*>(g_frames));
  return x + static_cast<int>(g_result.size);
}
// The name the dynamic linker's symbol tables give the code at `pc`.
std::string name_at(const void* pc) {
  Dl_info info{};
  return dladdr(pc, &info) && info.dli_sname ? info.dli_sname : "";
}
}  // namespace df

TEST(BacktraceModules, DebugFrameOnlyLibraryIsWalked) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  // Built without unwind tables but with -g: its CFI is .debug_frame only
  // (not loaded; no PT_GNU_EH_FRAME), so init reads it from the file.
  const std::string lib = build_library(scratch(), "libdfonly",
                                        "typedef int (*cb)(int);\n"
                                        "int df_f3(int x, cb f) { return f(x) * 3 + 1; }\n"
                                        "int df_f2(int x, cb f) { return df_f3(x + 1, f) * 5 + 2; }\n"
                                        "int df_f1(int x, cb f) { return df_f2(x + 2, f) * 7 + 3; }\n",
                                        "-fno-asynchronous-unwind-tables -fno-unwind-tables -g -fomit-frame-pointer "
                                        "-fno-optimize-sibling-calls -fno-inline");
  ASSERT_FALSE(lib.empty()) << "no C compiler (scripts/install-deps installs build-essential)";
  // The premise, as binutils sees it.
  ASSERT_NE(run("readelf -SW '" + lib + "'").find(".debug_frame"), std::string::npos);
  ASSERT_EQ(run("readelf -lW '" + lib + "'").find("GNU_EH_FRAME"), std::string::npos);
  void* h = dlopen(lib.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  sframe::BacktraceInitReport report;
  ASSERT_TRUE(sframe::backtrace_refresh(&report)) << report.message();
  const sframe::BacktraceModuleReport* m = find_module(report, lib);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << m->reason;
  auto* f1 = reinterpret_cast<int (*)(int, int (*)(int))>(dlsym(h, "df_f1"));
  ASSERT_NE(f1, nullptr);
  f1(1, df::walk);
  // Named by the dynamic linker (return address - 1: the call itself).
  std::vector<std::string> names;
  for (std::size_t i = 0; i < df::g_result.size; ++i)
    names.push_back(df::name_at(static_cast<char*>(df::g_frames[i]) - (i > 0 ? 1 : 0)));
  std::string all;
  for (const std::string& n : names) all += n + " ";
  const auto k = static_cast<std::size_t>(std::find(names.begin(), names.end(), "df_f3") - names.begin());
  ASSERT_LT(k + 3, names.size()) << all;
  EXPECT_EQ(names[k + 1], "df_f2") << all;
  EXPECT_EQ(names[k + 2], "df_f1") << all;
  // Past the library: the test's own frames, down to the outermost one.
  Dl_info info{};
  ASSERT_TRUE(dladdr(static_cast<char*>(df::g_frames[k + 3]) - 1, &info));
  EXPECT_EQ(real(info.dli_fname), real("/proc/self/exe")) << all;
  EXPECT_EQ(df::g_result.reason, sframe::StopReason::kOutermost) << all;
  dlclose(h);
  EXPECT_TRUE(sframe::backtrace_refresh());
}

// The background generator's thread, found by name in /proc/self/task;
// "" when it is not running.
std::string generator_task() {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "sframepp-gen") return e.path().string();
  }
  return "";
}

TEST(BacktraceModules, BackgroundGenerationFinishesWithSignalsBlocked) {
  // libm is linked but has no frame on this thread's stack: it waits for
  // the background generator, walked by the frame-pointer fallback until
  // then. The report is init's (the table init published), so "pending" is
  // certain; the generator runs on meanwhile and may finish at any time, so
  // what is read after init is checked only in ways that race cannot fail.
  const std::string libm = real("/lib/x86_64-linux-gnu/libm.so.6");
  // Other options first, so that the next init builds every module anew
  // (a table's modules are reused while the options stay the same).
  sframe::BacktraceOptions o;
  o.background_generation = false;
  o.generated_version = sframe::Version::kV2;
  ASSERT_TRUE(sframe::backtrace_init(o));
  sframe::BacktraceInitReport report;
  ASSERT_TRUE(sframe::backtrace_init({}, &report)) << report.message();
  const sframe::BacktraceModuleReport* m = find_module(report, libm);
  ASSERT_NE(m, nullptr);
  const bool pending = m->reason.find("pending") != std::string::npos;
  if (pending) {
    EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kNone) << m->reason;
    // Ready only once nothing is pending, and readiness never goes back:
    // read in this order, a "ready" must be followed by a report with no
    // pending module (a "not ready" may be stale by the time it is read).
    if (sframe::backtrace_modules_ready()) {
      for (const auto& r : sframe::backtrace_report().modules)
        EXPECT_EQ(r.reason.find("pending"), std::string::npos) << r.name << " pending while ready";
    }
    // The worker blocks every signal a program sends (the kernel reports
    // its mask in /proc; SIGKILL/SIGSTOP cannot be blocked). The worker may
    // exit between finding its task and reading it: no SigBlk line then.
    const std::string task = generator_task();
    std::string blocked;
    if (!task.empty()) {
      std::ifstream status(task + "/status");
      std::string line;
      while (std::getline(status, line))
        if (line.rfind("SigBlk:", 0) == 0) blocked = line.substr(7);
    }
    if (!blocked.empty()) {
      const unsigned long long mask = std::stoull(blocked, nullptr, 16);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGPROF, SIGSEGV, SIGUSR1, SIGCHLD})
        EXPECT_TRUE(mask & (1ULL << (sig - 1))) << "signal " << sig << " not blocked: " << blocked;
    }
  }
  // The main program and libc are on this stack: built during init.
  const sframe::BacktraceModuleReport* self = find_module(report, "/proc/self/exe");
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->reason.find("pending"), std::string::npos) << self->reason;
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  report = sframe::backtrace_report();
  m = find_module(report, libm);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << m->reason;
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  for (const auto& r : report.modules) EXPECT_EQ(r.reason.find("pending"), std::string::npos) << r.name;
  EXPECT_TRUE(pending) << "libm was built during init";
}

TEST(BacktraceModules, DeferredBackgroundStartWaitsForTheCall) {
  // BacktraceOptions::defer_background_start: init starts no generator
  // thread (none in /proc/self/task), libm stays pending however long the
  // program waits, also in a forked child, until backtrace_start_background().
  const std::string libm = real("/lib/x86_64-linux-gnu/libm.so.6");
  sframe::BacktraceOptions o;
  o.background_generation = false;
  o.generated_version = sframe::Version::kV2;
  ASSERT_TRUE(sframe::backtrace_init(o));  // other options: the next init builds anew
  ASSERT_EQ(generator_task(), "");
  sframe::BacktraceOptions deferred;
  deferred.defer_background_start = true;
  ASSERT_TRUE(sframe::backtrace_init(deferred));
  const auto libm_pending = [&] {
    const auto report = sframe::backtrace_report();
    const sframe::BacktraceModuleReport* m = find_module(report, libm);
    return m && m->reason.find("pending") != std::string::npos;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(generator_task(), "");
  EXPECT_TRUE(libm_pending());
  EXPECT_FALSE(sframe::backtrace_modules_ready());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    _exit(generator_task().empty() && libm_pending() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child started a generator";
  sframe::backtrace_start_background();
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  EXPECT_FALSE(libm_pending());
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  // A later init without the option starts the thread as before.
  ASSERT_TRUE(sframe::backtrace_init(o));
  sframe::BacktraceInitReport report;
  ASSERT_TRUE(sframe::backtrace_init({}, &report));
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  EXPECT_TRUE(sframe::backtrace_modules_ready());
}

TEST(BacktraceModules, LibraryOnStackAtInitIsWalkedFromItsFdesBeforeReady) {
  // BacktraceOptions::stack_libraries_per_fde. libc has frames on this
  // thread's stack (__libc_start_call_main, __libc_start_main): init
  // generates SFrame for those functions alone,
  // each from its FDE, and leaves the rest of libc to the background
  // generator. A walk taken before libc is ready goes through those frames
  // as libunwind and glibc's backtrace() do (the truth), to _start.
  const std::string libc = real("/lib/x86_64-linux-gnu/libc.so.6");
  bool walked_while_pending = false;
  // The generator may finish libc before the walk (it builds libstdc++
  // first): then init runs again, up to a few times.
  for (int attempt = 0; attempt < 5 && !walked_while_pending; ++attempt) {
    sframe::BacktraceOptions o;
    o.background_generation = false;
    o.generated_version = sframe::Version::kV2;
    ASSERT_TRUE(sframe::backtrace_init(o));  // other options: the next init builds every module anew
    sframe::BacktraceOptions per_fde;
    per_fde.stack_libraries_per_fde = true;
    sframe::BacktraceInitReport report;
    ASSERT_TRUE(sframe::backtrace_init(per_fde, &report)) << report.message();
    Traces t;
    recurse(6, t);
    const sframe::BacktraceInitReport after = sframe::backtrace_report();
    const sframe::BacktraceModuleReport* now = find_module(after, libc);
    ASSERT_NE(now, nullptr);
    walked_while_pending = now->reason.find("pending") != std::string::npos;
    expect_all_agree(t, 6);
    // The table init published: libc from its FDEs on the stack, pending.
    const sframe::BacktraceModuleReport* m = find_module(report, libc);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << m->reason;
    EXPECT_NE(m->reason.find("generated per FDE"), std::string::npos) << m->reason;
    EXPECT_NE(m->reason.find("pending"), std::string::npos) << m->reason;
    // The main program is still built whole during init.
    const sframe::BacktraceModuleReport* self = find_module(report, "/proc/self/exe");
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(self->reason.find("pending"), std::string::npos) << self->reason;
    ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
    // Ready: libc generated whole, like any module.
    const sframe::BacktraceInitReport ready = sframe::backtrace_report();
    m = find_module(ready, libc);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->reason.find("per FDE"), std::string::npos) << m->reason;
    EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kGenerated) << m->reason;
    Traces t2;
    recurse(6, t2);
    expect_all_agree(t2, 6);
  }
  EXPECT_TRUE(walked_while_pending) << "the generator finished libc before every walk: nothing was checked";
}

TEST(BacktraceModules, ForkedChildFinishesGeneration) {
  sframe::BacktraceOptions o;
  o.background_generation = false;
  o.generated_version = sframe::Version::kV2;
  ASSERT_TRUE(sframe::backtrace_init(o));
  ASSERT_TRUE(sframe::backtrace_init());  // background: libm and others pending
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's generator did not come along: the child's own finishes.
    const bool ready = sframe::backtrace_wait_ready(120000) && sframe::backtrace_modules_ready();
    const sframe::BacktraceInitReport r = sframe::backtrace_report();
    bool pending = false;
    for (const auto& m : r.modules) pending |= m.reason.find("pending") != std::string::npos;
    _exit(ready && !pending ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(sframe::backtrace_wait_ready(120000));
}

TEST(BacktraceModules, OwnSectionCoveringEveryFunctionGeneratesNothing) {
  ASSERT_TRUE(sframe::backtrace_init());
  ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
  // Without the crt objects every FDE of .eh_frame comes from this one
  // assembly, which wrote SFrame for each function too.
  const std::string lib = build_library(scratch(), "libcovered",
                                        "__attribute__((noinline)) int covered_a(int x) { return x * 5 + 1; }\n"
                                        "int covered_b(int x) { return covered_a(x) + 2; }\n",
                                        "-nostartfiles -Wa,--gsframe");
  ASSERT_FALSE(lib.empty()) << "no compiler with -Wa,--gsframe (binutils >= 2.40)";
  const std::string phdrs = run("readelf -lW '" + lib + "'");
  ASSERT_NE(phdrs.find("GNU_SFRAME"), std::string::npos) << "ld made no PT_GNU_SFRAME:\n" << phdrs;
  ASSERT_NE(phdrs.find("GNU_EH_FRAME"), std::string::npos) << "ld made no PT_GNU_EH_FRAME:\n" << phdrs;
  void* h = dlopen(lib.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  sframe::BacktraceInitReport report;
  ASSERT_TRUE(sframe::backtrace_refresh(&report)) << report.message();
  const sframe::BacktraceModuleReport* m = find_module(report, lib);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->source, sframe::BacktraceModuleSource::kNative) << m->reason;
  EXPECT_EQ(m->extra_functions, 0u) << m->reason;
  EXPECT_NE(m->reason.find("covers every"), std::string::npos) << m->reason;
  dlclose(h);
}

}  // namespace
