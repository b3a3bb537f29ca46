// SPDX-License-Identifier: MIT
// The invariant check of the fuzz harnesses: a broken invariant prints what
// and where, then traps (libFuzzer reports a crash and keeps the input).
#pragma once

#include <cstdint>
#include <cstdio>

#define SFRAME_FUZZ_CHECK(cond)                                                           \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "sframe fuzz: invariant broken: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                             \
      __builtin_trap();                                                                   \
    }                                                                                     \
  } while (0)

namespace sframe::fuzz {

// Keeps reads the checks do not otherwise use from being optimized away.
inline volatile std::uint64_t g_sink;

}  // namespace sframe::fuzz
