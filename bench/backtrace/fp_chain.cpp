// SPDX-License-Identifier: MIT
// The frame-pointer baseline: chains built with -fno-omit-frame-pointer and
// the simplest possible walk of their frame records {saved RBP, RA} - the
// physical limit of any unwinder. It checks only that the chain moves up the
// stack (no bounds), as a minimal production FP walker would.
#define CHAINS_NS fp_chains
#include "chains.hpp"

#include <cstddef>
#include <cstdint>

namespace fp_chains {

int call(int chain, int depth, Callback fn, void* arg) { return run(chain, depth, fn, arg); }

[[gnu::noinline]] std::size_t fp_walk(void** out, std::size_t max) {
  auto* fp = static_cast<std::uintptr_t*>(__builtin_frame_address(0));
  std::size_t n = 0;
  while (n < max && fp) {
    out[n++] = reinterpret_cast<void*>(fp[1]);
    auto* next = reinterpret_cast<std::uintptr_t*>(fp[0]);
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

// The same walk for traces that run out of frame-pointer code (main's
// caller in libc keeps no frame record): stops at the first record outside
// [its own frame, `hi`).
[[gnu::noinline]] std::size_t fp_walk_to(void** out, std::size_t max, std::uintptr_t hi) {
  auto* fp = static_cast<std::uintptr_t*>(__builtin_frame_address(0));
  std::size_t n = 0;
  while (n < max && fp) {
    out[n++] = reinterpret_cast<void*>(fp[1]);
    auto* next = reinterpret_cast<std::uintptr_t*>(fp[0]);
    if (next <= fp || reinterpret_cast<std::uintptr_t>(next) >= hi - 16) break;
    fp = next;
  }
  return n;
}

}  // namespace fp_chains
