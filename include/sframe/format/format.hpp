// SPDX-License-Identifier: MIT
// sframepp: constants of the SFrame format (spec v1, v2 with errata 1-2, v3).
//
// Wire sizes, codes and bit layouts, declared once. No I/O, no allocation.
#pragma once
// Library: libsframepp-format (sframepp::format). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
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

/// The byte layout of the SFrame structures (spec v1/v2/v3 §2.1-§2.4): the
/// offset of each field from the start of its structure and its size. The
/// decoder, validator and encoder name fields only through these.
namespace wire {

/// One field: byte offset within its structure, size in bytes.
struct Field {
  std::uint32_t offset;
  std::uint32_t size;
};

/// The spec's C structures, packed as stored. Only for offsetof and sizeof:
/// fields are read and written through sframe::endian, never through these
/// types (no type punning, no alignment assumptions).
namespace layout {
/// sframe_preamble (§2.1) followed by the rest of sframe_header (§2.2).
struct [[gnu::packed]] Header {
  std::uint16_t sfp_magic;
  std::uint8_t sfp_version;
  std::uint8_t sfp_flags;
  std::uint8_t sfh_abi_arch;
  std::int8_t sfh_cfa_fixed_fp_offset;
  std::int8_t sfh_cfa_fixed_ra_offset;
  std::uint8_t sfh_auxhdr_len;
  std::uint32_t sfh_num_fdes;
  std::uint32_t sfh_num_fres;
  std::uint32_t sfh_fre_len;
  std::uint32_t sfh_fdeoff;
  std::uint32_t sfh_freoff;
};
/// sframe_func_desc_entry, v1 (§2.3).
struct [[gnu::packed]] FdeV1 {
  std::int32_t sfde_func_start_address;
  std::uint32_t sfde_func_size;
  std::uint32_t sfde_func_start_fre_off;
  std::uint32_t sfde_func_num_fres;
  std::uint8_t sfde_func_info;
};
/// sframe_func_desc_entry, v2 (§2.3): v1 plus the repetition block size.
struct [[gnu::packed]] FdeV2 {
  std::int32_t sfde_func_start_address;
  std::uint32_t sfde_func_size;
  std::uint32_t sfde_func_start_fre_off;
  std::uint32_t sfde_func_num_fres;
  std::uint8_t sfde_func_info;
  std::uint8_t sfde_func_rep_size;
  std::uint16_t sfde_func_padding2;
};
/// sframe_func_desc_idx, v3 (§2.3): the FDE entry of the FDE sub-section.
struct [[gnu::packed]] FdeV3 {
  std::int64_t sfdi_func_start_offset;
  std::uint32_t sfdi_func_size;
  std::uint32_t sfdi_func_start_fre_off;
};
/// sframe_func_desc_attr, v3 (§2.3.1): at the head of each function's FREs.
struct [[gnu::packed]] FdeAttrV3 {
  std::uint16_t sfda_func_num_fres;
  std::uint8_t sfda_func_info;
  std::uint8_t sfda_func_info2;
  std::uint8_t sfda_func_rep_size;
};
static_assert(sizeof(Header) == 28, "spec §2.2: the header is 28 bytes");
static_assert(sizeof(FdeV1) == 17, "spec v1 §2.3: an FDE is 17 bytes");
static_assert(sizeof(FdeV2) == 20, "spec v2 §2.3: an FDE is 20 bytes");
static_assert(sizeof(FdeV3) == 16, "spec v3 §2.3: an FDE index entry is 16 bytes");
static_assert(sizeof(FdeAttrV3) == 5, "spec v3 §2.3.1: the FDE attribute is 5 bytes");
}  // namespace layout

/// Header fields (all versions).
namespace header {
using H = layout::Header;
inline constexpr Field kMagic{offsetof(H, sfp_magic), sizeof(H::sfp_magic)};
inline constexpr Field kVersion{offsetof(H, sfp_version), sizeof(H::sfp_version)};
inline constexpr Field kFlags{offsetof(H, sfp_flags), sizeof(H::sfp_flags)};
inline constexpr Field kAbi{offsetof(H, sfh_abi_arch), sizeof(H::sfh_abi_arch)};
inline constexpr Field kCfaFixedFpOffset{offsetof(H, sfh_cfa_fixed_fp_offset), sizeof(H::sfh_cfa_fixed_fp_offset)};
inline constexpr Field kCfaFixedRaOffset{offsetof(H, sfh_cfa_fixed_ra_offset), sizeof(H::sfh_cfa_fixed_ra_offset)};
inline constexpr Field kAuxhdrLen{offsetof(H, sfh_auxhdr_len), sizeof(H::sfh_auxhdr_len)};
inline constexpr Field kNumFdes{offsetof(H, sfh_num_fdes), sizeof(H::sfh_num_fdes)};
inline constexpr Field kNumFres{offsetof(H, sfh_num_fres), sizeof(H::sfh_num_fres)};
inline constexpr Field kFreLen{offsetof(H, sfh_fre_len), sizeof(H::sfh_fre_len)};
inline constexpr Field kFdeOff{offsetof(H, sfh_fdeoff), sizeof(H::sfh_fdeoff)};
inline constexpr Field kFreOff{offsetof(H, sfh_freoff), sizeof(H::sfh_freoff)};
inline constexpr std::uint32_t kSize = sizeof(H);
}  // namespace header

/// FDE fields of v1 and v2 (v2 adds kRepSize and padding).
namespace fde_v2 {
using F = layout::FdeV2;
inline constexpr Field kStart{offsetof(F, sfde_func_start_address), sizeof(F::sfde_func_start_address)};
inline constexpr Field kSize{offsetof(F, sfde_func_size), sizeof(F::sfde_func_size)};
inline constexpr Field kFreOff{offsetof(F, sfde_func_start_fre_off), sizeof(F::sfde_func_start_fre_off)};
inline constexpr Field kNumFres{offsetof(F, sfde_func_num_fres), sizeof(F::sfde_func_num_fres)};
inline constexpr Field kInfo{offsetof(F, sfde_func_info), sizeof(F::sfde_func_info)};
/// v2 only.
inline constexpr Field kRepSize{offsetof(F, sfde_func_rep_size), sizeof(F::sfde_func_rep_size)};
inline constexpr Field kPadding2{offsetof(F, sfde_func_padding2), sizeof(F::sfde_func_padding2)};
static_assert(kInfo.offset == offsetof(layout::FdeV1, sfde_func_info),
              "v1 and v2 share the fields up to the info byte");
}  // namespace fde_v2

/// FDE index entry of v3.
namespace fde_v3 {
using F = layout::FdeV3;
inline constexpr Field kStart{offsetof(F, sfdi_func_start_offset), sizeof(F::sfdi_func_start_offset)};
inline constexpr Field kSize{offsetof(F, sfdi_func_size), sizeof(F::sfdi_func_size)};
inline constexpr Field kFreOff{offsetof(F, sfdi_func_start_fre_off), sizeof(F::sfdi_func_start_fre_off)};
}  // namespace fde_v3

/// FDE attribute of v3, at sfdi_func_start_fre_off in the FRE sub-section.
namespace fde_attr {
using A = layout::FdeAttrV3;
inline constexpr Field kNumFres{offsetof(A, sfda_func_num_fres), sizeof(A::sfda_func_num_fres)};
inline constexpr Field kInfo{offsetof(A, sfda_func_info), sizeof(A::sfda_func_info)};
inline constexpr Field kInfo2{offsetof(A, sfda_func_info2), sizeof(A::sfda_func_info2)};
inline constexpr Field kRepSize{offsetof(A, sfda_func_rep_size), sizeof(A::sfda_func_rep_size)};
inline constexpr std::uint32_t kSize = sizeof(A);
}  // namespace fde_attr

}  // namespace wire

/// Size of the fixed SFrame header in bytes, all versions (spec §2.2).
inline constexpr std::uint32_t kHeaderSize = wire::header::kSize;

/// On-disk size of one FDE in the FDE sub-section: v1 17, v2 20, v3 16 (the
/// FDE index; the 5-byte attribute lives in the FRE sub-section).
constexpr std::uint32_t fde_entry_size(Version v) noexcept {
  switch (v) {
    case Version::kV1: return sizeof(wire::layout::FdeV1);
    case Version::kV2: return sizeof(wire::layout::FdeV2);
    case Version::kV3: return sizeof(wire::layout::FdeV3);
  }
  return 0;
}

/// Size of the v3 FDE attribute (sfda_*) at the head of each function's FREs.
inline constexpr std::uint32_t kFdeAttrSizeV3 = wire::fde_attr::kSize;

/// FRE type: width of sfre_start_address (spec §2.3.3.3).
enum class FreType : std::uint8_t { kAddr1 = 0, kAddr2 = 1, kAddr4 = 2 };

/// Bytes of sfre_start_address for an FRE type.
constexpr std::uint32_t start_address_size(FreType t) noexcept {
  return t == FreType::kAddr1 ? 1u : t == FreType::kAddr2 ? 2u : 4u;
}

/// FRE fields (spec §2.4): sfre_start_address of the FRE type's width, the
/// info byte (bit layout: sframe::fre_info), then the data words.
namespace wire::fre {
constexpr Field start_address(FreType t) noexcept { return {0, start_address_size(t)}; }
constexpr Field info(FreType t) noexcept { return {start_address_size(t), 1}; }
constexpr std::uint32_t datawords_offset(FreType t) noexcept { return start_address_size(t) + 1; }
}  // namespace wire::fre

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
/// The info byte of the fields above (count < 16, size code < 4).
constexpr std::uint8_t make(bool cfa_base_sp, unsigned count, unsigned size_code, bool mangled_ra) noexcept {
  return static_cast<std::uint8_t>((cfa_base_sp ? 1u : 0u) | (count & 0xfu) << 1 | (size_code & 0x3u) << 5 |
                                   (mangled_ra ? 0x80u : 0u));
}
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
