// SPDX-License-Identifier: MIT
// sframepp: constants of the SFrame format (spec v1, v2 with errata 1-2, v3).
//
// Wire sizes, codes and bit layouts, declared once. No I/O, no allocation.
#pragma once
// Exported from libsframepp.so, which builds with hidden visibility.
#pragma GCC visibility push(default)

#include <cstdint>
#include <string_view>

namespace sframe {

/// SFRAME_MAGIC, as stored in the section's own byte order (spec §2.1).
inline constexpr std::uint16_t kMagic = 0xdee2;

/// sfp_version (spec §2.1.2).
enum class Version : std::uint8_t { kV1 = 1, kV2 = 2, kV3 = 3 };

/// sfp_flags bits (spec §2.1.3, errata 1).
namespace flags {
inline constexpr std::uint8_t kFdeSorted = 0x1;
/// Versions 1 and 2 only.
inline constexpr std::uint8_t kFramePointer = 0x2;
/// Version 2 (errata 1) and 3: FDE start is relative to the start field itself.
inline constexpr std::uint8_t kFdeFuncStartPcrel = 0x4;
}  // namespace flags

/// Defined flag bits per version; any other bit is undefined.
constexpr std::uint8_t defined_flags(Version v) noexcept {
  switch (v) {
    case Version::kV1: return 0x3;
    case Version::kV2: return 0x7;
    case Version::kV3: return 0x5;
  }
  return 0;
}

/// sfh_abi_arch (spec §2.2.1; s390x from errata 1).
enum class Abi : std::uint8_t {
  kAarch64Big = 1,
  kAarch64Little = 2,
  kAmd64Little = 3,
  kS390xBig = 4,
};

/// Size of the fixed SFrame header in bytes, all versions (spec §2.2).
inline constexpr std::uint32_t kHeaderSize = 28;

/// On-disk size of one FDE in the FDE sub-section: v1 17, v2 20, v3 16 (the
/// FDE index; the 5-byte attribute lives in the FRE sub-section).
constexpr std::uint32_t fde_entry_size(Version v) noexcept {
  switch (v) {
    case Version::kV1: return 17;
    case Version::kV2: return 20;
    case Version::kV3: return 16;
  }
  return 0;
}

/// Size of the v3 FDE attribute (sfda_*) at the head of each function's FREs.
inline constexpr std::uint32_t kFdeAttrSizeV3 = 5;

/// FRE type: width of sfre_start_address (spec §2.3.3.3).
enum class FreType : std::uint8_t { kAddr1 = 0, kAddr2 = 1, kAddr4 = 2 };

/// Bytes of sfre_start_address for an FRE type.
constexpr std::uint32_t start_address_size(FreType t) noexcept {
  return t == FreType::kAddr1 ? 1u : t == FreType::kAddr2 ? 2u : 4u;
}

/// FDE PC type (v3 §2.3.3.1; called FDE type PCINC/PCMASK in v1/v2).
enum class PcType : std::uint8_t { kInc = 0, kMask = 1 };

/// FDE type (v3 §2.3.3.2). v1/v2 FDEs are always kDefault.
enum class FdeType : std::uint8_t { kDefault = 0, kFlex = 1 };

/// AArch64 PAuth key that signs return addresses (bit 5 of the FDE info byte).
enum class PauthKey : std::uint8_t { kA = 0, kB = 1 };

/// Bit layout of the FDE info byte (sfde_func_info / sfda_func_info).
namespace fde_info {
constexpr std::uint8_t fre_type(std::uint8_t info) noexcept { return info & 0xf; }
constexpr std::uint8_t pc_type(std::uint8_t info) noexcept { return (info >> 4) & 0x1; }
constexpr std::uint8_t pauth_key(std::uint8_t info) noexcept { return (info >> 5) & 0x1; }
/// v3 only: bit 7 marks a signal frame.
constexpr bool signal_p(std::uint8_t info) noexcept { return (info >> 7) & 0x1; }
/// v3 sfda_func_info2 bits 0-4.
constexpr std::uint8_t fde_type(std::uint8_t info2) noexcept { return info2 & 0x1f; }
/// Bits that must be zero: v1/v2 bits 6-7; v3 bit 6.
constexpr std::uint8_t unused_mask(Version v) noexcept { return v == Version::kV3 ? 0x40 : 0xc0; }
inline constexpr std::uint8_t kInfo2UnusedMask = 0xe0;
}  // namespace fde_info

/// Bit layout of the FRE info byte (spec §2.4.1).
namespace fre_info {
/// 1 if the CFA is SP-based, 0 if FP-based.
constexpr bool cfa_base_sp(std::uint8_t info) noexcept { return info & 0x1; }
constexpr std::uint8_t dataword_count(std::uint8_t info) noexcept { return (info >> 1) & 0xf; }
/// Size code: 0 = 1 byte, 1 = 2 bytes, 2 = 4 bytes, 3 = invalid.
constexpr std::uint8_t dataword_size_code(std::uint8_t info) noexcept { return (info >> 5) & 0x3; }
constexpr bool mangled_ra_p(std::uint8_t info) noexcept { return (info >> 7) & 0x1; }
}  // namespace fre_info

/// Most data words an FRE can carry (4-bit count).
inline constexpr std::uint32_t kMaxDatawords = 15;
/// Smallest encoded FRE: a 1-byte start address and the info byte, no data
/// words. Bounds how many FREs an FRE sub-section can hold.
inline constexpr std::uint32_t kMinFreSize = 2;

/// v3 FLEX control data word (spec v3 §3.2): bit 0 reg_p, bit 1 deref_p,
/// bits 3+ DWARF register number. 0 is the padding word.
namespace flex {
constexpr bool reg_p(std::uint32_t w) noexcept { return w & 0x1; }
constexpr bool deref_p(std::uint32_t w) noexcept { return (w >> 1) & 0x1; }
constexpr std::uint32_t regnum(std::uint32_t w) noexcept { return w >> 3; }
inline constexpr std::uint32_t kUnusedBit = 0x4;
}  // namespace flex

/// s390x encodings (errata 1, kept in v3).
namespace s390x {
/// CFA offsets are stored as (offset + kCfaOffsetAdjustment) / kCfaOffsetAlignment.
inline constexpr std::int32_t kCfaOffsetAdjustment = -160;
inline constexpr std::int32_t kCfaOffsetAlignment = 8;
/// SP = CFA + kSpValOffset.
inline constexpr std::int32_t kSpValOffset = -160;
constexpr std::int32_t decode_cfa_offset(std::int32_t stored) noexcept {
  // Modular arithmetic: a hostile 4-byte word must not overflow int32.
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(stored) * 8u -
                                   static_cast<std::uint32_t>(kCfaOffsetAdjustment));
}
/// v2 only: an FP/RA data word with bit 0 set holds a DWARF register number.
constexpr bool v2_offset_is_regnum(std::int32_t w) noexcept { return w & 1; }
constexpr std::int32_t v2_offset_regnum(std::int32_t w) noexcept { return w >> 1; }
}  // namespace s390x

/// RA data word value meaning "RA not saved" (SFRAME_FRE_RA_OFFSET_INVALID, errata 1).
inline constexpr std::int32_t kRaOffsetInvalid = 0;

/// DWARF register numbers of the stack and frame pointer for an ABI.
struct AbiRegs {
  std::uint16_t sp;
  std::uint16_t fp;
};
constexpr AbiRegs abi_regs(Abi abi) noexcept {
  switch (abi) {
    case Abi::kAarch64Big:
    case Abi::kAarch64Little: return {31, 29};
    case Abi::kAmd64Little: return {7, 6};
    case Abi::kS390xBig: return {15, 11};
  }
  return {0xffff, 0xffff};
}

/// True if `v` is a known version number.
constexpr bool is_known_version(std::uint8_t v) noexcept { return v >= 1 && v <= 3; }
/// True if `a` is a known ABI for version `v` (s390x arrived with v2 errata 1).
constexpr bool is_known_abi(std::uint8_t a, Version v) noexcept {
  return a >= 1 && (a <= 3 || (a == 4 && v != Version::kV1));
}

/// True for ABIs whose sections are big-endian by definition.
constexpr bool abi_big_endian(Abi abi) noexcept {
  return abi == Abi::kAarch64Big || abi == Abi::kS390xBig;
}

}  // namespace sframe

#pragma GCC visibility pop
