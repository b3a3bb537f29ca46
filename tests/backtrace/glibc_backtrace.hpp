// SPDX-License-Identifier: MIT
// glibc's own backtrace(), for comparisons in the tests and the benchmark.
#pragma once

#include <dlfcn.h>

#include <cstdlib>

namespace sframe_test {

/// libunwind exports a `backtrace` of its own that takes the place of glibc's
/// when it is linked: take glibc's from libc.so.6 itself. Aborts if libc.so.6
/// has no `backtrace`.
using BacktraceFn = int (*)(void**, int);
inline BacktraceFn glibc_backtrace_fn() {
  static const BacktraceFn fn = [] {
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void* sym = libc ? dlsym(libc, "backtrace") : nullptr;
    if (!sym) std::abort();
    return reinterpret_cast<BacktraceFn>(sym);
  }();
  return fn;
}

}  // namespace sframe_test
