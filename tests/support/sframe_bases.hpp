// SPDX-License-Identifier: MIT
// The known-good SFrame sections of the corruption tests, hand-written from
// the specification with one comment per field (v1 and v2 AMD64, v3 AMD64,
// AArch64 and big-endian s390x), and the field encoders that write them.
#pragma once

#include <cstdint>
#include <vector>

namespace sframe_test::bases {

using Bytes = std::vector<std::uint8_t>;

// ---------------------------------------------------------------------------
// Field encoders for the hand-written sections.
constexpr std::uint8_t B(std::uint64_t x) { return static_cast<std::uint8_t>(x & 0xff); }
#define LE16(x) B(x), B((x) >> 8)
#define LE32(x) B(x), B((x) >> 8), B((x) >> 16), B((x) >> 24)
#define LE64(x) LE32(x), LE32((x) >> 32)
#define BE16(x) B((x) >> 8), B(x)
#define BE32(x) B((x) >> 24), B((x) >> 16), B((x) >> 8), B(x)
#define BE64(x) BE32((x) >> 32), BE32(x)

// ---------------------------------------------------------------------------
// The known-good bases. "@N" is the byte offset of a field in the section.

// v1, AMD64 little-endian, RA fixed at CFA-8. One FDE, two FREs. 52 bytes.
const Bytes kSecV1 = {
    0xe2, 0xde,  // @0  sfp_magic 0xdee2, little-endian
    0x01,        // @2  sfp_version 1
    0x01,        // @3  sfp_flags: FDE_SORTED
    0x03,        // @4  sfh_abi_arch: AMD64 little-endian
    0x00,        // @5  sfh_cfa_fixed_fp_offset: FP tracked per FRE
    0xf8,        // @6  sfh_cfa_fixed_ra_offset: -8
    0x00,        // @7  sfh_auxhdr_len
    LE32(1),     // @8  sfh_num_fdes
    LE32(2),     // @12 sfh_num_fres
    LE32(7),     // @16 sfh_fre_len
    LE32(0),     // @20 sfh_fdeoff
    LE32(17),    // @24 sfh_freoff: after one 17-byte v1 FDE
    // FDE 0 @28 (17 bytes)
    LE32(0x1000),  // @28 sfde_func_start_address (from the section start)
    LE32(0x20),    // @32 sfde_func_size
    LE32(0),       // @36 sfde_func_start_fre_off
    LE32(2),       // @40 sfde_func_num_fres
    0x00,          // @44 sfde_func_info: FRE type ADDR1, PCINC
    // FRE sub-section @45
    0x00, 0x03, 0x08,        // @45 FRE 0: start 0; info SP-based, 1 word of 1B; CFA = SP+8
    0x01, 0x05, 0x10, 0xf0,  // @48 FRE 1: start 1; SP, 2 words 1B; CFA = SP+16, FP = *(CFA-16)
};

// v2 (errata 1), AMD64 LE, RA fixed at CFA-8, SORTED | FUNC_START_PCREL.
// FDE 0 at 0x1000 (INC), FDE 1 at 0x1040 (a PLT-like PCMASK, rep_size 16). 85 bytes.
const Bytes kSecV2 = {
    0xe2, 0xde,  // @0  sfp_magic
    0x02,        // @2  sfp_version 2
    0x05,        // @3  sfp_flags: FDE_SORTED | FDE_FUNC_START_PCREL
    0x03,        // @4  sfh_abi_arch: AMD64 LE
    0x00,        // @5  sfh_cfa_fixed_fp_offset: tracked
    0xf8,        // @6  sfh_cfa_fixed_ra_offset: -8
    0x00,        // @7  sfh_auxhdr_len
    LE32(2),     // @8  sfh_num_fdes
    LE32(5),     // @12 sfh_num_fres
    LE32(17),    // @16 sfh_fre_len
    LE32(0),     // @20 sfh_fdeoff
    LE32(40),    // @24 sfh_freoff: after two 20-byte v2 FDEs
    // FDE 0 @28
    LE32(0xfe4),   // @28 sfde_func_start_address: 0x1000 - 28 (PC-relative to this field)
    LE32(0x40),    // @32 sfde_func_size
    LE32(0),       // @36 sfde_func_start_fre_off
    LE32(3),       // @40 sfde_func_num_fres
    0x00,          // @44 sfde_func_info: ADDR1, PCINC
    0x00,          // @45 sfde_func_rep_size
    LE16(0),       // @46 sfde_func_padding2
    // FDE 1 @48
    LE32(0x1010),  // @48 sfde_func_start_address: 0x1040 - 48
    LE32(0x20),    // @52 sfde_func_size
    LE32(11),      // @56 sfde_func_start_fre_off
    LE32(2),       // @60 sfde_func_num_fres
    0x10,          // @64 sfde_func_info: ADDR1, PCMASK
    16,            // @65 sfde_func_rep_size
    LE16(0),       // @66 sfde_func_padding2
    // FRE sub-section @68; FDE 0's FREs
    0x00, 0x03, 0x08,        // @68 FRE 0: start 0; SP, 1 word; CFA = SP+8
    0x01, 0x05, 0x10, 0xf0,  // @71 FRE 1: start 1; SP, 2 words; CFA = SP+16, FP = *(CFA-16)
    0x04, 0x04, 0x10, 0xf0,  // @75 FRE 2: start 4; FP-based, 2 words; CFA = FP+16, FP = *(CFA-16)
    // FDE 1's FREs (offsets within the 16-byte block)
    0x00, 0x03, 0x08,  // @79 FRE 0: start 0; CFA = SP+8
    0x0b, 0x03, 0x10,  // @82 FRE 1: start 11; CFA = SP+16
};

// v3, AMD64 LE, RA fixed at CFA-8, SORTED | PCREL. FDE 0 DEFAULT at 0x2000
// (ADDR2 FREs), FDE 1 FLEX at 0x2100 (ADDR1 FREs with 2, 5 and 6 words). 106 bytes.
const Bytes kSecV3Amd64 = {
    0xe2, 0xde,  // @0  sfp_magic
    0x03,        // @2  sfp_version 3
    0x05,        // @3  sfp_flags: FDE_SORTED | FDE_FUNC_START_PCREL
    0x03,        // @4  sfh_abi_arch: AMD64 LE
    0x00,        // @5  sfh_cfa_fixed_fp_offset
    0xf8,        // @6  sfh_cfa_fixed_ra_offset: -8
    0x00,        // @7  sfh_auxhdr_len
    LE32(2),     // @8  sfh_num_fdes
    LE32(5),     // @12 sfh_num_fres
    LE32(46),    // @16 sfh_fre_len
    LE32(0),     // @20 sfh_fdeoff
    LE32(32),    // @24 sfh_freoff: after two 16-byte FDE index entries
    // FDE index 0 @28
    LE64(0x1fe4ull),  // @28 sfdi_func_start_offset: 0x2000 - 28
    LE32(0x100),      // @36 sfdi_func_size
    LE32(0),          // @40 sfdi_func_start_fre_off
    // FDE index 1 @44
    LE64(0x20d4ull),  // @44 sfdi_func_start_offset: 0x2100 - 44
    LE32(0x80),       // @52 sfdi_func_size
    LE32(16),         // @56 sfdi_func_start_fre_off
    // FRE sub-section @60. FDE 0 attribute:
    LE16(2),  // @60 sfda_func_num_fres
    0x01,     // @62 sfda_func_info: ADDR2, PCINC
    0x00,     // @63 sfda_func_info2: DEFAULT
    0x00,     // @64 sfda_func_rep_size
    LE16(0), 0x03, 0x08,                       // @65 FRE 0: start 0; SP, 1 word 1B; CFA = SP+8
    LE16(0x10), 0x25, LE16(0x10), LE16(0xfff0),  // @69 FRE 1: start 16; SP, 2 words 2B; CFA = SP+16, FP = *(CFA-16)
    // FDE 1 attribute @76
    LE16(3),  // @76 sfda_func_num_fres
    0x00,     // @78 sfda_func_info: ADDR1, PCINC
    0x01,     // @79 sfda_func_info2: FLEX
    0x00,     // @80 sfda_func_rep_size
    0x00, 0x05, 0x39, 0x08,  // @81 FRE 0: start 0; 2 words 1B; CFA = r7(SP) + 8
    // @85 FRE 1: start 4; 5 words 1B; CFA = *(r10 - 8); RA: padding word; FP = *(r6 + 0)
    0x04, 0x0b, 0x53, 0xf8, 0x00, 0x33, 0x00,
    // @92 FRE 2: start 8; 6 words 2B; CFA = r7 + 16; RA = *(CFA - 8); FP = *(CFA - 16)
    0x08, 0x2d, LE16(0x39), LE16(16), LE16(0x02), LE16(0xfff8), LE16(0x02), LE16(0xfff0),
};

// v3, AArch64 LE, nothing fixed, SORTED | PCREL. FDE 0 DEFAULT at 0x4000
// (PAuth key B, mangled RA, 4-byte words), FDE 1 FLEX at 0x4040. 99 bytes.
const Bytes kSecV3Arm64 = {
    0xe2, 0xde,  // @0  sfp_magic
    0x03,        // @2  sfp_version 3
    0x05,        // @3  sfp_flags: FDE_SORTED | FDE_FUNC_START_PCREL
    0x02,        // @4  sfh_abi_arch: AArch64 LE
    0x00,        // @5  sfh_cfa_fixed_fp_offset
    0x00,        // @6  sfh_cfa_fixed_ra_offset
    0x00,        // @7  sfh_auxhdr_len
    LE32(2),     // @8  sfh_num_fdes
    LE32(4),     // @12 sfh_num_fres
    LE32(39),    // @16 sfh_fre_len
    LE32(0),     // @20 sfh_fdeoff
    LE32(32),    // @24 sfh_freoff
    // FDE index 0 @28
    LE64(0x3fe4ull),  // @28 sfdi_func_start_offset: 0x4000 - 28
    LE32(0x40),       // @36 sfdi_func_size
    LE32(0),          // @40 sfdi_func_start_fre_off
    // FDE index 1 @44
    LE64(0x4014ull),  // @44 sfdi_func_start_offset: 0x4040 - 44
    LE32(0x40),       // @52 sfdi_func_size
    LE32(22),         // @56 sfdi_func_start_fre_off
    // FRE sub-section @60. FDE 0 attribute:
    LE16(2),  // @60 sfda_func_num_fres
    0x20,     // @62 sfda_func_info: ADDR1, PCINC, PAuth key B
    0x00,     // @63 sfda_func_info2: DEFAULT
    0x00,     // @64 sfda_func_rep_size
    0x00, 0x03, 0x00,  // @65 FRE 0: start 0; SP, 1 word 1B; CFA = SP+0
    // @68 FRE 1: start 8; mangled RA, SP, 3 words 4B; CFA = SP+16, RA = *(CFA-8), FP = *(CFA-16)
    0x08, 0xc7, LE32(16), LE32(0xfffffff8), LE32(0xfffffff0),
    // FDE 1 attribute @82
    LE16(2),  // @82 sfda_func_num_fres
    0x00,     // @84 sfda_func_info: ADDR1, PCINC
    0x01,     // @85 sfda_func_info2: FLEX
    0x00,     // @86 sfda_func_rep_size
    0x00, 0x05, 0xf9, 0x00,  // @87 FRE 0: start 0; 2 words; CFA = r31(SP) + 0
    // @91 FRE 1: start 4; 6 words; CFA = r29 + 16; RA = *(CFA-8); FP = *(CFA-16)
    0x04, 0x0d, 0xe9, 0x10, 0x02, 0xf8, 0x02, 0xf0,
};

// v3, s390x big-endian, nothing fixed, SORTED | PCREL. FDE 0 DEFAULT at
// 0x8000 (CFA offsets stored as (off - 160) / 8), FDE 1 FLEX at 0x8060 with
// ADDR2 FREs (RA saved in r24). 98 bytes.
const Bytes kSecV3S390x = {
    0xde, 0xe2,  // @0  sfp_magic 0xdee2, big-endian
    0x03,        // @2  sfp_version 3
    0x05,        // @3  sfp_flags: FDE_SORTED | FDE_FUNC_START_PCREL
    0x04,        // @4  sfh_abi_arch: s390x BE
    0x00,        // @5  sfh_cfa_fixed_fp_offset
    0x00,        // @6  sfh_cfa_fixed_ra_offset
    0x00,        // @7  sfh_auxhdr_len
    BE32(2),     // @8  sfh_num_fdes
    BE32(5),     // @12 sfh_num_fres
    BE32(38),    // @16 sfh_fre_len
    BE32(0),     // @20 sfh_fdeoff
    BE32(32),    // @24 sfh_freoff
    // FDE index 0 @28
    BE64(0x7fe4ull),  // @28 sfdi_func_start_offset: 0x8000 - 28
    BE32(0x60),       // @36 sfdi_func_size
    BE32(0),          // @40 sfdi_func_start_fre_off
    // FDE index 1 @44
    BE64(0x8034ull),  // @44 sfdi_func_start_offset: 0x8060 - 44
    BE32(0x30),       // @52 sfdi_func_size
    BE32(21),         // @56 sfdi_func_start_fre_off
    // FRE sub-section @60. FDE 0 attribute:
    BE16(3),  // @60 sfda_func_num_fres
    0x00,     // @62 sfda_func_info: ADDR1, PCINC
    0x00,     // @63 sfda_func_info2: DEFAULT
    0x00,     // @64 sfda_func_rep_size
    0x00, 0x03, 0x00,              // @65 FRE 0: start 0; SP, 1 word; CFA = SP + 0*8 + 160
    0x06, 0x07, 0x14, 0xd0, 0xb8,  // @68 FRE 1: start 6; 3 words; CFA = SP+320, RA = *(CFA-48), FP = *(CFA-72)
    // @73 FRE 2: start 16; 3 words 2B; CFA = SP+320, RA not saved (RA_OFFSET_INVALID), FP = *(CFA-72)
    0x10, 0x27, BE16(0x14), BE16(0), BE16(0xffb8),
    // FDE 1 attribute @81
    BE16(2),  // @81 sfda_func_num_fres
    0x01,     // @83 sfda_func_info: ADDR2, PCINC
    0x01,     // @84 sfda_func_info2: FLEX
    0x00,     // @85 sfda_func_rep_size
    BE16(0), 0x05, 0x79, 0x00,              // @86 FRE 0: start 0; 2 words; CFA = r15 + 160
    BE16(8), 0x09, 0x79, 0x14, 0xc1, 0x00,  // @91 FRE 1: start 8; 4 words; CFA = r15 + 320; RA = r24 + 0
};

enum class Base : std::uint8_t { kV1, kV2, kV3Amd64, kV3Arm64, kV3S390x };
using enum Base;

inline const Bytes& bytes_of(Base b) {
  switch (b) {
    case kV1: return kSecV1;
    case kV2: return kSecV2;
    case kV3Amd64: return kSecV3Amd64;
    case kV3Arm64: return kSecV3Arm64;
    case kV3S390x: return kSecV3S390x;
  }
  return kSecV1;
}

inline const char* name_of(Base b) {
  switch (b) {
    case kV1: return "V1";
    case kV2: return "V2";
    case kV3Amd64: return "V3Amd64";
    case kV3Arm64: return "V3Arm64";
    case kV3S390x: return "V3S390x";
  }
  return "?";
}

inline constexpr Base kAllBases[] = {kV1, kV2, kV3Amd64, kV3Arm64, kV3S390x};

#undef LE16
#undef LE32
#undef LE64
#undef BE16
#undef BE32
#undef BE64

}  // namespace sframe_test::bases
