// SPDX-License-Identifier: MIT
// Shared by the in-process backtrace tests (backtrace_test.cpp,
// backtrace_entry_test.cpp): the three traces taken at one call site
// (ours, glibc backtrace(), libunwind's unw_backtrace) and their comparison,
// the call chains walked, and the fixture that runs every scenario over
// three kinds of sections (native, generated v2, generated v3). Included
// once per test file (internal linkage: each file has its own copy).
//
// Convention compared: return addresses (RA, not RA-1) for every frame except
// the one a signal interrupted, which is its exact PC - what both references
// report.
#pragma once

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include <gtest/gtest.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sframe/backtrace/backtrace.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "glibc_backtrace.hpp"

extern "C" {
typedef void (*bt_callback)(void*);
int callee_recurse(int depth, bt_callback fn, void* arg);
unsigned callee_mix(unsigned x);
}

namespace {


using sframe_test::BacktraceFn;
using sframe_test::glibc_backtrace_fn;

constexpr int kMax = 1024;

// The three traces, taken at one call site. Frame 0 of each is a different
// return address inside capture() (three calls); frames 1.. must agree.
struct Traces {
  std::vector<void*> ours;
  std::vector<void*> glibc;
  std::vector<void*> libunwind;
  sframe::BacktraceResult result;
  /// Called at the bottom of mixed_recurse in place of capture().
  void (*bottom)(Traces&) = nullptr;
};

// Async-signal-safe storage for traces taken in handlers.
struct RawTraces {
  void* ours[kMax];
  void* glibc[kMax];
  void* libunwind[kMax];
  void* from_uc[kMax];
  int n_ours, n_glibc, n_libunwind, n_uc;
  sframe::StopReason reason, uc_reason;
  std::uint64_t uc_pc;
};

// Under AddressSanitizer, a signal handler's frames lie where the
// interrupted code (ASan's own runtime, say) left shadow poison behind, and
// libunwind, not instrumented, keeps buffers there that the sanitizer's
// mincore interceptor then reports as "stack-use-after-scope": a false
// report about the reference, not about the code under test. The stack
// below this frame is unpoisoned before the references walk.
[[gnu::always_inline]] inline void unpoison_stack_below() {
#if defined(__SANITIZE_ADDRESS__)
  char probe = 0;
  asm volatile("" : : "r"(&probe) : "memory");
  const auto below = (reinterpret_cast<std::uintptr_t>(&probe) & ~std::uintptr_t{63}) - 64;
  __asan_unpoison_memory_region(reinterpret_cast<void*>(below - 32768), 32768);
#endif
}

[[gnu::noinline]] void capture_raw(RawTraces& t) {
  const sframe::BacktraceResult r = sframe::backtrace_ex(std::span<void*>(t.ours, kMax));
  t.n_ours = static_cast<int>(r.size);
  t.reason = r.reason;
  t.n_glibc = glibc_backtrace_fn()(t.glibc, kMax);
  unpoison_stack_below();
  t.n_libunwind = unw_backtrace(t.libunwind, kMax);
  asm volatile("" ::: "memory");
}

Traces to_traces(const RawTraces& r) {
  Traces t;
  t.ours.assign(r.ours, r.ours + r.n_ours);
  t.glibc.assign(r.glibc, r.glibc + r.n_glibc);
  t.libunwind.assign(r.libunwind, r.libunwind + r.n_libunwind);
  t.result.size = static_cast<std::size_t>(r.n_ours);
  t.result.reason = r.reason;
  return t;
}

[[gnu::noinline]] Traces capture() {
  auto raw = std::make_unique<RawTraces>();
  capture_raw(*raw);
  Traces t = to_traces(*raw);
  asm volatile("" ::: "memory");
  return t;
}

std::string name_of(void* pc) {
  Dl_info info{};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p", pc);
  std::string s = buf;
  if (dladdr(static_cast<char*>(pc) - 1, &info) && info.dli_fname) {
    s += " ";
    s += std::strrchr(info.dli_fname, '/') ? std::strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    if (info.dli_sname) s += std::string("(") + info.dli_sname + ")";
  }
  return s;
}

std::string dump(const std::vector<void*>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += "  #" + std::to_string(i) + " " + name_of(v[i]) + "\n";
  return s;
}

// ours[from..] must equal truth[from..], entry by entry, to the end of truth.
void expect_same(const std::vector<void*>& ours, const std::vector<void*>& truth, std::size_t from, const char* what) {
  ASSERT_GT(truth.size(), from) << what;
  bool same = ours.size() == truth.size();
  for (std::size_t i = from; same && i < truth.size(); ++i) same = ours[i] == truth[i];
  EXPECT_TRUE(same) << "ours vs " << what << "\nours:\n" << dump(ours) << what << ":\n" << dump(truth);
}

void expect_all_agree(const Traces& t, std::size_t min_frames) {
  EXPECT_GE(t.glibc.size(), min_frames);
  // The two references must agree with each other too, or the scenario
  // proves nothing.
  expect_same(t.libunwind, t.glibc, 1, "glibc (libunwind vs glibc)");
  expect_same(t.ours, t.glibc, 1, "glibc backtrace()");
  expect_same(t.ours, t.libunwind, 1, "unw_backtrace");
  EXPECT_EQ(t.result.reason, sframe::StopReason::kOutermost) << sframe::describe(t.result.reason);
}

// ----- call chains ---------------------------------------------------------

[[gnu::noinline, maybe_unused]] int recurse(int depth, Traces& out) {
  if (depth == 0) {
    out = capture();
    return 1;
  }
  int r = recurse(depth - 1, out) + depth;
  asm volatile("" : "+r"(r));
  return r;
}

inline void store_capture(void* arg) { *static_cast<Traces*>(arg) = capture(); }

// Frames of both CFA kinds: alloca makes the compiler keep RBP as
// the frame pointer (CFA = RBP + 16), the others are SP-based. `pad` moves
// the whole chain down the stack by that many bytes.
[[gnu::noinline]] int mixed_recurse(int depth, Traces& out);
[[gnu::noinline]] int vla_level(int depth, Traces& out) {
  volatile char* a = static_cast<volatile char*>(__builtin_alloca(16 + static_cast<unsigned>(depth & 7)));
  a[0] = static_cast<char>(depth);
  int r = mixed_recurse(depth - 1, out) + a[0];
  asm volatile("" : "+r"(r));
  return r;
}
[[gnu::noinline]] int mixed_recurse(int depth, Traces& out) {
  if (depth == 0) {
    if (out.bottom)
      out.bottom(out);
    else
      out = capture();
    return 1;
  }
  if (depth % 3 == 0) return vla_level(depth, out) + 1;
  int r = mixed_recurse(depth - 1, out) + depth;
  asm volatile("" : "+r"(r));
  return r;
}
[[gnu::noinline]] int mixed_at(std::size_t pad, int depth, Traces& out) {
  volatile char* p = static_cast<volatile char*>(__builtin_alloca(pad + 1));
  p[0] = 1;
  int r = mixed_recurse(depth, out) + p[0];
  asm volatile("" : "+r"(r));
  return r;
}

struct Param {
  const char* name;
  sframe::BacktraceOptions options;
};

class BacktraceTest : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() {
    void* warm[4];
    (void)glibc_backtrace_fn()(warm, 4);  // glibc loads libgcc_s on first use: not in a handler
    Dl_info info{};
    ASSERT_TRUE(dladdr(reinterpret_cast<void*>(glibc_backtrace_fn()), &info));
    ASSERT_NE(std::strstr(info.dli_fname, "libc.so"), nullptr) << info.dli_fname;
  }
  void SetUp() override {
    const auto r = sframe::backtrace_init(GetParam().options);
    ASSERT_TRUE(r) << sframe::code_name(r.error().code());
    ASSERT_TRUE(sframe::backtrace_wait_ready(120000));
    const sframe::BacktraceCacheStats s = sframe::backtrace_stats();
    ASSERT_GE(s.modules, 4u);
  }
};

/// The three kinds of sections every scenario runs over.
inline auto section_params() {
  return ::testing::Values(Param{"native", {sframe::Version::kV3, false}},
                           Param{"generated_v2", {sframe::Version::kV2, true}},
                           Param{"generated_v3", {sframe::Version::kV3, true}});
}
inline std::string param_name(const ::testing::TestParamInfo<Param>& p) { return std::string(p.param.name); }

}  // namespace
