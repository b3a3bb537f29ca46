/* SPDX-License-Identifier: MIT */
/*
 * sframepp C API (C99): status codes and sframe_error, the format's
 * constants, rules and rows, and the helpers every library's C functions
 * share (sframe_strerror, sframe_free).
 * Library: libsframepp-format, which every other library links.
 * Part of <sframe/sframe.h>, which includes every library's C header;
 * its opening comment states the conventions (status and sframe_error,
 * ABI, thread safety, spec references).
 */
#ifndef SFRAME_FORMAT_SFRAME_FORMAT_H
#define SFRAME_FORMAT_SFRAME_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SFRAME_API
#else
#define SFRAME_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Status codes and errors
 * ---------------------------------------------------------------------- */

/*
 * What a call returns: SFRAME_OK or why it failed. Values are part of the
 * ABI and never change meaning; new codes may be added.
 * 1-15: the call itself (arguments, memory, environment);
 * 16-: the input breaks a rule of the SFrame specification or of ELF, or a
 * lookup found nothing.
 */
typedef enum sframe_status {
  SFRAME_OK = 0,
  /** A required pointer was NULL, or an enum/range argument was invalid. */
  SFRAME_E_INVALID_ARGUMENT = 1,
  /** Memory could not be allocated (std::bad_alloc at the boundary). */
  SFRAME_E_NO_MEMORY = 2,
  /** An unexpected internal failure (a C++ exception other than bad_alloc). */
  SFRAME_E_INTERNAL = 3,
  /** The operation is not available on this machine (backtrace off x86-64 Linux). */
  SFRAME_E_UNSUPPORTED = 4,
  /** sframe_backtrace_init() has not run. */
  SFRAME_E_NOT_INITIALIZED = 5,

  SFRAME_E_TRUNCATED_HEADER = 16,
  SFRAME_E_BAD_MAGIC = 17,
  SFRAME_E_BAD_VERSION = 18,
  SFRAME_E_BAD_ABI = 19,
  SFRAME_E_UNDEFINED_FLAGS = 20,
  SFRAME_E_AUX_HEADER_PAST_END = 21,
  SFRAME_E_FDE_TABLE_PAST_END = 22,
  SFRAME_E_FRE_SECTION_PAST_END = 23,
  SFRAME_E_SUBSECTIONS_OVERLAP = 24,
  SFRAME_E_FDE_INDEX_OUT_OF_RANGE = 25,
  SFRAME_E_FRE_OFFSET_PAST_END = 26,
  SFRAME_E_FDE_ATTR_TRUNCATED = 27,
  SFRAME_E_FRE_TRUNCATED = 28,
  SFRAME_E_BAD_FRE_TYPE = 29,
  SFRAME_E_BAD_FDE_TYPE = 30,
  SFRAME_E_BAD_DATAWORD_SIZE = 31,
  SFRAME_E_BAD_DATAWORD_COUNT = 32,
  SFRAME_E_BAD_FLEX_CONTROL = 33,
  SFRAME_E_UNUSED_BITS_SET = 34,
  SFRAME_E_ZERO_REP_SIZE = 35,
  SFRAME_E_FUNC_RANGE_OVERFLOW = 36,
  SFRAME_E_FRE_START_NOT_INCREASING = 37,
  SFRAME_E_FRE_START_OUTSIDE_FUNCTION = 38,
  SFRAME_E_FDE_FRES_OVERLAP = 39,
  SFRAME_E_FRE_COUNT_MISMATCH = 40,
  SFRAME_E_FRE_LEN_MISMATCH = 41,
  SFRAME_E_FDES_UNSORTED = 42,
  SFRAME_E_FDES_OVERLAP = 43,
  SFRAME_E_NO_SFRAME_SECTION = 44,
  SFRAME_E_ELF = 45,
  SFRAME_E_IO = 46,
  SFRAME_E_BAD_RELOCATION = 47,
  SFRAME_E_PC_NOT_COVERED = 48,
  SFRAME_E_PC_BEFORE_FIRST_FRE = 49,
  SFRAME_E_NOT_REPRESENTABLE = 50,
  SFRAME_E_MODULE_MAP_FULL = 51,
  SFRAME_E_BAD_MODULE_RANGE = 52,
  SFRAME_E_MODULES_OVERLAP = 53
} sframe_status;

/** Marks "no FDE/FRE index applies" in sframe_error. */
#define SFRAME_NO_INDEX UINT32_C(0xffffffff)

/*
 * Where a failure is: filled by the functions that take one (when the
 * pointer is not NULL), on failure only. 32 bytes.
 */
typedef struct sframe_error {
  /** The status the function returned. */
  int32_t status;
  /** Index of the FDE concerned, or SFRAME_NO_INDEX. */
  uint32_t fde;
  /** Index of the FRE within that FDE, or SFRAME_NO_INDEX. */
  uint32_t fre;
  uint32_t reserved;
  /** Byte offset from the start of the SFrame section where the rule is
   *  broken (ELF errors: a file offset; encoder: the output's offset). */
  uint64_t offset;
  /** The offending value read from the input (a count, a code, an
   *  address, an errno for SFRAME_E_IO), if any; else 0. */
  uint64_t value;
} sframe_error;

/*
 * A static, NUL-terminated English description of `status` (the rule of
 * the spec the input breaks); never NULL ("unknown status" for values this
 * library does not know). Thread-safe, async-signal-safe.
 * Library: libsframepp-format (before 0.2.0: libsframepp).
 */
SFRAME_API const char *sframe_strerror(int status);

/* ------------------------------------------------------------------------
 * Format constants (spec §2)
 * ---------------------------------------------------------------------- */

/* sfh_abi_arch (spec §2.2.1; s390x from errata 1). */
enum {
  SFRAME_ABI_AARCH64_BIG = 1,
  SFRAME_ABI_AARCH64_LITTLE = 2,
  SFRAME_ABI_AMD64_LITTLE = 3,
  SFRAME_ABI_S390X_BIG = 4
};
/* sfp_flags bits (spec §2.1.3, errata 1). */
enum {
  SFRAME_F_FDE_SORTED = 0x1,
  SFRAME_F_FRAME_POINTER = 0x2,
  SFRAME_F_FDE_FUNC_START_PCREL = 0x4
};
/* FRE types: width of sfre_start_address (spec §2.3.3.3). */
enum { SFRAME_FRE_TYPE_ADDR1 = 0, SFRAME_FRE_TYPE_ADDR2 = 1, SFRAME_FRE_TYPE_ADDR4 = 2 };
/* FDE PC types (v3 §2.3.3.1: PCINC / PCMASK). */
enum { SFRAME_PC_TYPE_INC = 0, SFRAME_PC_TYPE_MASK = 1 };
/* FDE types (v3 §2.3.3.2; always DEFAULT before v3). */
enum { SFRAME_FDE_TYPE_DEFAULT = 0, SFRAME_FDE_TYPE_FLEX = 1 };
/* validate() strictness. */
enum {
  /** What decoding every FDE, FRE and row needs (as GNU objdump tolerates). */
  SFRAME_VALIDATE_LENIENT = 0,
  /** Every rule of the specification. */
  SFRAME_VALIDATE_STRICT = 1
};

/* ------------------------------------------------------------------------
 * Rules (spec §3): how to recover the CFA, the RA and the FP
 * ---------------------------------------------------------------------- */

/* sframe_rule.kind */
enum {
  /** Not saved by this frame: the caller's value is the current one. */
  SFRAME_RULE_UNCHANGED = 0,
  /** Undefined: the outermost frame (errata 2: an FRE without data words);
   *  set on both `cfa` and `ra`. */
  SFRAME_RULE_UNDEFINED = 1,
  /** value = base + offset, read from memory there when SFRAME_RULE_DEREF. */
  SFRAME_RULE_EXPR = 2
};
/* sframe_rule.base */
enum {
  /** The CFA of this frame (RA and FP rules). */
  SFRAME_BASE_CFA = 0,
  /** DWARF register `regnum` (SP or FP for DEFAULT CFA rules; any for FLEX). */
  SFRAME_BASE_REGISTER = 1
};
/* sframe_rule.flags */
enum {
  /** Read the value from memory at base + offset. */
  SFRAME_RULE_DEREF = 0x1,
  /** The offset is the header's fixed CFA offset (sfh_cfa_fixed_*_offset),
   *  not an FRE data word (objdump prints "f"). */
  SFRAME_RULE_FROM_HEADER = 0x2,
  /** The FRE held an explicit "no rule" word (a v3 FLEX padding word or
   *  s390x SFRAME_FRE_RA_OFFSET_INVALID); the rule given is already
   *  resolved (the header's fixed offset, else unchanged). */
  SFRAME_RULE_PADDING = 0x4
};

/** One recovery rule, already resolved against the section's header and ABI.
 *  12 bytes. */
typedef struct sframe_rule {
  uint8_t kind;
  uint8_t base;
  uint8_t flags;
  uint8_t reserved0;
  /** DWARF register number when base == SFRAME_BASE_REGISTER. */
  uint16_t regnum;
  uint16_t reserved1;
  /** Bytes (s390x CFA offsets already decoded: adjustment and scaling undone). */
  int32_t offset;
} sframe_rule;

/** The rules of one FRE. 40 bytes. */
typedef struct sframe_row {
  sframe_rule cfa;
  sframe_rule ra;
  sframe_rule fp;
  /** The RA is signed with PAuth (AArch64): strip before use. */
  uint8_t ra_mangled;
  uint8_t reserved[3];
} sframe_row;

/* ------------------------------------------------------------------------
 * Buffers returned by the C functions
 * ---------------------------------------------------------------------- */

/*
 * Frees a buffer returned by sframe_encoder_finish() or
 * sframe_cfi_generate() (NULL: nothing to do); returns SFRAME_OK.
 * Thread-safe.
 * Library: libsframepp-format (before 0.2.0: libsframepp).
 */
SFRAME_API sframe_status sframe_free(void *bytes);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_FORMAT_SFRAME_FORMAT_H */
