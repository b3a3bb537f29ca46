// SPDX-License-Identifier: MIT
// Checks the x86-64 signal-frame layout in sframe/unwind/unwind.hpp against the C
// library's own definition when built on x86-64 Linux. The unwinder itself
// uses the constants, so it also works offline on other hosts.
#include "sframe/unwind/unwind.hpp"

#if defined(__x86_64__) && defined(__linux__)
#include <sys/ucontext.h>

#include <cstddef>

namespace sframe::x86_64_sigframe {
namespace {

constexpr std::size_t greg_offset(unsigned reg) {
  return offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs) + reg * sizeof(greg_t);
}
static_assert(greg_offset(0) == kGregsOffset, "uc_mcontext.gregs moved");
static_assert(REG_RIP == kRegRip && REG_RSP == kRegRsp && REG_RBP == kRegRbp);
static_assert(sizeof(greg_t) == 8);
// The DWARF mapping of every greg (System V AMD64 psABI DWARF numbering).
static_assert(kGregToDwarf[REG_RAX] == 0 && kGregToDwarf[REG_RDX] == 1 && kGregToDwarf[REG_RCX] == 2 &&
              kGregToDwarf[REG_RBX] == 3 && kGregToDwarf[REG_RSI] == 4 && kGregToDwarf[REG_RDI] == 5 &&
              kGregToDwarf[REG_RBP] == 6 && kGregToDwarf[REG_RSP] == 7 && kGregToDwarf[REG_R8] == 8 &&
              kGregToDwarf[REG_R15] == 15 && kGregToDwarf[REG_RIP] == 16);

}  // namespace
}  // namespace sframe::x86_64_sigframe
#endif
