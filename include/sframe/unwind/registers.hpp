// SPDX-License-Identifier: MIT
// sframepp: architectures, the register state of a frame (DWARF numbering,
// spec §2.2.1 ABIs) and code addresses (exact PC or return address).
// Part of the unwinder's API (layer `unwind`); sframe/unwind/unwind.hpp includes it.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <array>
#include <cstdint>
#include <optional>

#include "sframe/format/format.hpp"

namespace sframe {

// ---------------------------------------------------------------------------
// Architectures and registers
// ---------------------------------------------------------------------------

/// Target architecture of an unwind (the section's byte order is separate:
/// both AArch64 ABIs map to kAarch64).
enum class Arch : std::uint8_t { kAmd64, kAarch64, kS390x };

/// The architecture of an SFrame ABI identifier (spec §2.2.1).
constexpr Arch arch_of(Abi abi) noexcept {
  switch (abi) {
    case Abi::kAmd64Little: return Arch::kAmd64;
    case Abi::kS390xBig: return Arch::kS390x;
    case Abi::kAarch64Big:
    case Abi::kAarch64Little: break;
  }
  return Arch::kAarch64;
}

/// DWARF numbers of the registers the SFrame rules name implicitly.
struct ArchRegs {
  std::uint16_t sp;
  std::uint16_t fp;
  /// Register holding the return address on entry (AArch64 x30/LR, s390x
  /// r14); kNoRegister on AMD64, where the RA is always on the stack.
  std::uint16_t ra;
};
inline constexpr std::uint16_t kNoRegister = 0xffff;

/// AMD64: rsp 7, rbp 6. AArch64: sp 31, x29 29, x30 30. s390x: r15, r11, r14.
constexpr ArchRegs arch_regs(Arch a) noexcept {
  // Indexed by Arch: one load where a switch cost a chain of compares and
  // branches on every step, a cost the short cached step feels. A
  // local table, not a namespace-scope one: that would be a symbol every
  // library exports.
  constexpr ArchRegs kByArch[] = {{7, 6, kNoRegister}, {31, 29, 30}, {15, 11, 14}};
  static_assert(static_cast<unsigned>(Arch::kAmd64) == 0 && static_cast<unsigned>(Arch::kAarch64) == 1 &&
                static_cast<unsigned>(Arch::kS390x) == 2);
  const auto i = static_cast<unsigned>(a);
  return i < std::size(kByArch) ? kByArch[i] : ArchRegs{kNoRegister, kNoRegister, kNoRegister};
}

/// Register state of one frame: the PC plus DWARF registers 0..31 with a
/// validity mask (AMD64 uses 0-16, AArch64 x0-x30 and sp, s390x r0-r15 and
/// f0-f15 as DWARF 16-31, which FLEX rules may name). Fixed size, no
/// allocation. Registers not marked valid are unknown: a rule that needs one
/// stops the unwind with StopReason::kBadRule.
struct Regs {
  static constexpr unsigned kNumDwarf = 32;

  Arch arch = Arch::kAmd64;
  /// Runtime address of the next instruction to execute (frame 0: the
  /// interrupted/current instruction).
  std::uint64_t pc = 0;
  std::array<std::uint64_t, kNumDwarf> dwarf{};
  /// Bit r set: dwarf[r] is known.
  std::uint32_t valid = 0;

  /// True if DWARF register `r` is known (false for r >= kNumDwarf).
  bool has(unsigned r) const noexcept { return r < kNumDwarf && ((valid >> r) & 1u); }
  /// DWARF register `r`, or nullopt if unknown.
  std::optional<std::uint64_t> get(unsigned r) const noexcept {
    if (!has(r)) return std::nullopt;
    return dwarf[r];
  }
  /// Sets DWARF register `r` (ignored if r >= kNumDwarf).
  void set(unsigned r, std::uint64_t v) noexcept {
    if (r >= kNumDwarf) return;
    dwarf[r] = v;
    valid |= 1u << r;
  }
  /// Marks DWARF register `r` unknown.
  void forget(unsigned r) noexcept {
    if (r < kNumDwarf) valid &= ~(1u << r);
  }
  /// The stack and frame pointer of `arch`, if known.
  std::optional<std::uint64_t> sp() const noexcept { return get(arch_regs(arch).sp); }
  std::optional<std::uint64_t> fp() const noexcept { return get(arch_regs(arch).fp); }

  /// Frame-0 state from the three registers every architecture has.
  static Regs make(Arch a, std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept {
    Regs r;
    r.arch = a;
    r.pc = pc;
    r.set(arch_regs(a).sp, sp);
    r.set(arch_regs(a).fp, fp);
    return r;
  }
  static Regs amd64(std::uint64_t pc, std::uint64_t rsp, std::uint64_t rbp) noexcept {
    return make(Arch::kAmd64, pc, rsp, rbp);
  }
  /// `lr`: x30, where the RA is while the function has not saved it.
  static Regs aarch64(std::uint64_t pc, std::uint64_t sp, std::uint64_t x29, std::uint64_t lr) noexcept {
    Regs r = make(Arch::kAarch64, pc, sp, x29);
    r.set(30, lr);
    return r;
  }
  /// `r14`: the RA register; `r11`: the preferred FP (spec §3.1.3).
  static Regs s390x(std::uint64_t pc, std::uint64_t r15, std::uint64_t r11, std::uint64_t r14) noexcept {
    Regs r = make(Arch::kS390x, pc, r15, r11);
    r.set(14, r14);
    return r;
  }
};

// ---------------------------------------------------------------------------
// Code addresses
// ---------------------------------------------------------------------------

/// A runtime code address and how it was obtained. A return address points
/// after the call, possibly past the caller's last instruction or into the
/// next function, so rules are looked up at RA - 1. An exact PC (frame 0, or
/// the interrupted PC restored from a signal frame) is looked up as is.
class CodeAddress {
 public:
  constexpr CodeAddress() = default;
  /// An instruction that was executing (or is next to execute) in this frame.
  static constexpr CodeAddress exact(std::uint64_t pc) noexcept { return CodeAddress(pc, false); }
  /// A return address read from a callee's frame.
  static constexpr CodeAddress return_address(std::uint64_t ra) noexcept { return CodeAddress(ra, true); }

  constexpr std::uint64_t value() const noexcept { return value_; }
  constexpr bool is_return_address() const noexcept { return ra_; }
  /// The address whose rules describe this frame: value - 1 for return
  /// addresses, value otherwise.
  constexpr std::uint64_t lookup_pc() const noexcept { return ra_ ? value_ - 1 : value_; }
  friend constexpr bool operator==(const CodeAddress&, const CodeAddress&) = default;

 private:
  constexpr CodeAddress(std::uint64_t v, bool ra) noexcept : value_(v), ra_(ra) {}
  std::uint64_t value_ = 0;
  bool ra_ = false;
};

}  // namespace sframe

#pragma GCC visibility pop
