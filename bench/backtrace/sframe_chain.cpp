// SPDX-License-Identifier: MIT
// The chains walked by sframe::backtrace, glibc backtrace() and libunwind:
// built with -fomit-frame-pointer (and -Wa,--gsframe under gcc).
#define CHAINS_NS sf_chains
#include "chains.hpp"

namespace sf_chains {
int call(int chain, int depth, Callback fn, void* arg) { return run(chain, depth, fn, arg); }
}  // namespace sf_chains
