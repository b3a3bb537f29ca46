// SPDX-License-Identifier: MIT
// Call chains for the backtrace benchmark: kChains distinct chains of
// kLevels distinct non-inlined functions each, recursing through their chain
// (wrapping around) to any depth and then calling a callback. Included by two
// translation units built differently (SFrame, no frame pointer; and frame
// pointers), each in its own namespace (CHAINS_NS).
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#ifndef CHAINS_NS
#error "define CHAINS_NS"
#endif

namespace CHAINS_NS {

inline constexpr int kChains = 64;
inline constexpr int kLevels = 64;

using Callback = void (*)(void*);

struct Ctx {
  int remaining;
  Callback fn;
  void* arg;
};

template <int C, int L>
[[gnu::noinline]] int level(Ctx& c) {
  if (--c.remaining <= 0) {
    c.fn(c.arg);
    return 0;
  }
  int r = level<C, (L + 1) % kLevels>(c);
  asm volatile("" : "+r"(r));  // no tail call: every level keeps its frame
  return r + 1;
}

template <std::size_t... C>
constexpr std::array<int (*)(Ctx&), sizeof...(C)> entries(std::index_sequence<C...>) {
  return {&level<static_cast<int>(C), 0>...};
}

/// Calls `fn(arg)` from `depth` frames of chain `chain` (mod kChains).
inline int run(int chain, int depth, Callback fn, void* arg) {
  static constexpr auto kEntries = entries(std::make_index_sequence<kChains>());
  Ctx c{depth, fn, arg};
  return kEntries[static_cast<std::size_t>(chain % kChains)](c);
}

}  // namespace CHAINS_NS
