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
  Traces t;
  mixed_at(0, 12, t);
  expect_all_agree(t, 12);
}

TEST(BacktraceModules, InitReportListsEveryModuleWithCode) {
  sframe::BacktraceInitReport report;
  const auto ok = sframe::backtrace_init({}, &report);
  ASSERT_TRUE(ok) << report.message();
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
  std::string lib = "/usr/lib/x86_64-linux-gnu/libicudata.so.72";
  struct stat st {};
  if (::stat(lib.c_str(), &st) != 0) {
    lib = build_library(scratch(), "libdataonly", "const unsigned char table[4096] = {1, 2, 3};\n", "");
    if (lib.empty()) GTEST_SKIP() << "no libicudata and no C compiler";
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
    EXPECT_FALSE(m->failed);
    EXPECT_NE(m->reason.find("no .eh_frame FDEs"), std::string::npos) << m->reason;
  }
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  dlclose(h);
}

TEST(BacktraceModules, FailureNamesTheModule) {
  ASSERT_TRUE(sframe::backtrace_init());
  const std::string dir = scratch();
  // No --gsframe: the library's only unwind information is .eh_frame,
  // read from its file, which is gone by the time the table is rebuilt.
  const std::string path = build_library(dir, "libgone", "int gone_fn(int x) { return x * 3 + 1; }\n", "");
  if (path.empty()) GTEST_SKIP() << "no C compiler";
  if (run("readelf -lW '" + path + "'").find("GNU_SFRAME") != std::string::npos)
    GTEST_SKIP() << "the compiler emits SFrame by default";
  void* h = dlopen(path.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  sframe::BacktraceInitReport report;
  const auto r = sframe::backtrace_refresh(&report);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, sframe::Errc::kIoError);
  EXPECT_EQ(report.failures(), 1u) << report.message();
  EXPECT_NE(report.message().find(path + ": "), std::string::npos) << report.message();
  EXPECT_NE(report.message().find("cannot open its file"), std::string::npos) << report.message();
  std::printf("%s\n", report.message().c_str());
  bool listed = false;
  for (const auto& m : report.modules)
    if (m.name == path) {
      listed = true;
      EXPECT_TRUE(m.failed);
      EXPECT_EQ(m.source, sframe::BacktraceModuleSource::kNone);
    }
  EXPECT_TRUE(listed);
  // The table was still published: the library is in it.
  EXPECT_TRUE(sframe::backtrace_modules_ready());
  dlclose(h);
  EXPECT_TRUE(sframe::backtrace_refresh());
}

TEST(BacktraceModules, ReadyAfterRefreshIfNeeded) {
  ASSERT_TRUE(sframe::backtrace_init());
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

TEST(BacktraceModules, OwnSectionCoveringEveryFunctionGeneratesNothing) {
  ASSERT_TRUE(sframe::backtrace_init());
  // Without the crt objects every FDE of .eh_frame comes from this one
  // assembly, which wrote SFrame for each function too.
  const std::string lib = build_library(scratch(), "libcovered",
                                        "__attribute__((noinline)) int covered_a(int x) { return x * 5 + 1; }\n"
                                        "int covered_b(int x) { return covered_a(x) + 2; }\n",
                                        "-nostartfiles -Wa,--gsframe");
  if (lib.empty()) GTEST_SKIP() << "no compiler with -Wa,--gsframe";
  const std::string phdrs = run("readelf -lW '" + lib + "'");
  if (phdrs.find("GNU_SFRAME") == std::string::npos || phdrs.find("GNU_EH_FRAME") == std::string::npos)
    GTEST_SKIP() << "no PT_GNU_SFRAME or PT_GNU_EH_FRAME";
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
