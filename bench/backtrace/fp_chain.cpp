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

}  // namespace fp_chains
