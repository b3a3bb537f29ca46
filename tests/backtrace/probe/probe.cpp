// SPDX-License-Identifier: MIT
// A program that walks its own stack with sframe::backtrace from the bottom
// of a known chain (probe_f3 <- probe_f2 <- probe_f1 <- main) and prints the
// return addresses, then glibc backtrace()'s, one list per line:
//   sframepp: STOP N 0xPC 0xRA ...
//   glibc: N 0xPC 0xRA ...
// and, on stderr, the module table (one "module NAME: SOURCE (REASON)
// extra N" line each) and "bias 0xB", the executable's load bias as
// glibc's dl_iterate_phdr gives it.
// Built as a static non-PIE executable (no PT_GNU_EH_FRAME), and as a PIE
// without SFrame that the test retrofits with `sframe gen --loadable`;
// tests/backtrace/probe/run.sh names the addresses with addr2line and
// compares.
#include <execinfo.h>
#include <link.h>

#include <cstdio>

#include "sframe/backtrace/backtrace.hpp"

extern "C" {
[[gnu::noinline]] int probe_f3(int x);
[[gnu::noinline]] int probe_f2(int x);
[[gnu::noinline]] int probe_f1(int x);
}

namespace {
int (*volatile g_next)(int) = nullptr;

// Out of line: stop_reason_name() is inline, and inlined right after the
// walk's call it would own probe_f3's return address for addr2line.
[[gnu::noinline]] void print_reason(sframe::StopReason r, std::size_t n) {
  std::printf("sframepp: %s %zu", std::string(sframe::stop_reason_name(r)).c_str(), n);
}
}  // namespace

extern "C" [[gnu::noinline]] int probe_f3(int x) {
  void* out[64];
  const sframe::BacktraceResult r = sframe::backtrace_ex(out);
  print_reason(r.reason, r.size);
  for (std::size_t i = 0; i < r.size; ++i) std::printf(" %p", out[i]);
  std::printf("\n");
  void* theirs[64];
  const int n = ::backtrace(theirs, 64);
  std::printf("glibc: %d", n);
  for (int i = 0; i < n; ++i) std::printf(" %p", theirs[i]);
  std::printf("\n");
  return x + static_cast<int>(r.size);
}

extern "C" [[gnu::noinline]] int probe_f2(int x) { return g_next(x + 1) * 3; }
extern "C" [[gnu::noinline]] int probe_f1(int x) { return probe_f2(x + 2) * 5; }

int main() {
  g_next = probe_f3;
  sframe::BacktraceInitReport report;
  if (auto ok = sframe::backtrace_init({}, &report); !ok) {
    std::fprintf(stderr, "backtrace_init: %s\n", report.message().c_str());
    return 1;
  }
  for (const auto& m : report.modules)
    std::fprintf(stderr, "module %s: %s (%s) extra %zu\n", m.name.c_str(),
                 std::string(sframe::to_string(m.source)).c_str(), m.reason.c_str(), m.extra_functions);
  // The first module dl_iterate_phdr reports is the executable.
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void*) {
        std::fprintf(stderr, "bias 0x%llx\n", static_cast<unsigned long long>(info->dlpi_addr));
        return 1;
      },
      nullptr);
  return probe_f1(1) > 0 ? 0 : 1;
}
