/* SPDX-License-Identifier: MIT */
/*
 * sframepp: the stable C API (C99) to SFrame stack-trace sections.
 *
 * Usable from C, C++, and from other languages through their C foreign
 * function interfaces (Rust, Go cgo, Python ctypes): opaque handles, plain
 * structs of fixed-width integers, no C++ type crosses it, no C++ exception
 * leaves it (each entry point catches at the boundary; an allocation failure
 * becomes SFRAME_E_NO_MEMORY, anything unforeseen SFRAME_E_INTERNAL).
 *
 * Every function returns an sframe_status: SFRAME_OK (0) or the reason it
 * failed. sframe_strerror() gives the reason in words. Functions that read
 * untrusted input take an optional `sframe_error *` (may be NULL) that
 * receives, on failure, where the input broke the rule: the byte offset in
 * the SFrame section (or in the ELF file), the offending value, and the
 * FDE/FRE index (SFRAME_NO_INDEX when none applies). There is no global
 * "last error" state.
 *
 * ABI: the soname is libsframepp.so.0; the exported `sframe_*` symbols,
 * the enumerator values and the struct layouts below are kept stable for
 * every libsframepp.so.0 (checked against abi/libsframepp.so.0.abi with
 * abidiff). The C++ API of the other headers promises source compatibility
 * only.
 *
 * Which library exports what (the layers of the project):
 *  - libsframepp-format (libsframepp-format.so.0 / .a; no dependency),
 *    which every other library links: the shared helpers sframe_strerror
 *    and sframe_free, reachable from whichever library a program links.
 *  - libsframepp (libsframepp.so.0 / libsframepp.a; needs libelf):
 *    sections (bytes or ELF file), validation, FDE/FRE iteration,
 *    find(pc), the encoder, the unwinder.
 *  - libsframepp-cfi (libsframepp-cfi.so.0 / .a; needs libsframepp and
 *    libdw): sframe_cfi_generate.
 *  - libsframepp-backtrace (libsframepp-backtrace.so.0 / .a; needs only
 *    libsframepp-unwind and libsframepp-format: no libelf, no libdw):
 *    sframe_backtrace_*.
 * Every exported symbol carries the version node SFRAMEPP_0.
 * The static archives are C++: link them with the C++ runtime (-lstdc++).
 *
 * Thread safety is stated for every function. "Async-signal-safe" means it
 * allocates nothing, takes no lock and calls no non-async-signal-safe libc
 * function, so it may run in a signal handler.
 *
 * Specification references: "spec" is the SFrame format specification,
 * versions 1-3 (binutils' sframe-spec), with its errata 1 and 2.
 */
#ifndef SFRAME_SFRAME_H
#define SFRAME_SFRAME_H

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
 * library does not know). Thread-safe, async-signal-safe. In
 * libsframepp-format (before 0.2.0: libsframepp).
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
 * Sections
 * ---------------------------------------------------------------------- */

/** An SFrame section opened for reading (opaque). Immutable once opened. */
typedef struct sframe_section sframe_section;

/* Flags of sframe_section_open_bytes(). */
enum {
  /** Do not copy the bytes: the caller keeps them alive and unchanged until
   *  sframe_section_close(). Without it the bytes are copied. */
  SFRAME_OPEN_NO_COPY = 0x1
};

/*
 * Opens the SFrame section held in `bytes[0 .. size)`, whose first byte is
 * (or will be) loaded at `address` (sh_addr of .sframe; 0 for raw bytes):
 * FDE start PCs are reported as absolute addresses from it. Checks the
 * header and the extents of the sub-sections (spec §2.2, §2.1); everything
 * else is checked as it is read, or at once by sframe_section_validate().
 * `flags`: 0 or SFRAME_OPEN_NO_COPY. On success *out is a new handle for
 * sframe_section_close().
 * Errors: SFRAME_E_INVALID_ARGUMENT (NULL out, NULL bytes with size > 0,
 * unknown flags), SFRAME_E_NO_MEMORY, SFRAME_E_TRUNCATED_HEADER,
 * SFRAME_E_BAD_MAGIC, SFRAME_E_BAD_VERSION, SFRAME_E_BAD_ABI,
 * SFRAME_E_AUX_HEADER_PAST_END, SFRAME_E_FDE_TABLE_PAST_END,
 * SFRAME_E_FRE_SECTION_PAST_END (with the byte offset in `err`).
 * Thread-safe (no shared state).
 */
SFRAME_API sframe_status sframe_section_open_bytes(const void *bytes, size_t size, uint64_t address, uint32_t flags,
                                                   sframe_section **out, sframe_error *err);

/*
 * Opens the SFrame section of the ELF file at `path` (NUL-terminated):
 * the section called `section_name`, or for NULL or ".sframe" the .sframe
 * section, else the first of type SHT_GNU_SFRAME, else the PT_GNU_SFRAME
 * segment. Relocatable objects get their .rela.sframe applied (v2/v3), as
 * GNU objdump does. The handle keeps the file mapped until closed.
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_NO_MEMORY, SFRAME_E_IO (errno
 * in err->value), SFRAME_E_ELF, SFRAME_E_NO_SFRAME_SECTION,
 * SFRAME_E_BAD_RELOCATION, and the header errors of
 * sframe_section_open_bytes(). Thread-safe: each call opens its own libelf
 * descriptor (the only libelf global, its version, is set alike by every
 * caller).
 */
SFRAME_API sframe_status sframe_section_open_elf(const char *path, const char *section_name, sframe_section **out,
                                                 sframe_error *err);

/*
 * Frees `section` (NULL: nothing to do). The handle must not be in use by
 * another thread or by an unwinder (sframe_unwinder_add_module). Returns
 * SFRAME_OK. Not thread-safe with respect to other uses of the same handle.
 */
SFRAME_API sframe_status sframe_section_close(sframe_section *section);

/** Header facts of a section (spec §2.2), decoded to host values. 48 bytes. */
typedef struct sframe_section_info {
  /** 1, 2 or 3. */
  uint8_t version;
  /** SFRAME_ABI_*. */
  uint8_t abi;
  /** sfp_flags as stored (SFRAME_F_*). */
  uint8_t flags;
  /** 1 if the section is stored big-endian. */
  uint8_t big_endian;
  /** sfh_cfa_fixed_fp_offset / _ra_offset: bytes from the CFA; 0 = not fixed. */
  int8_t cfa_fixed_fp_offset;
  int8_t cfa_fixed_ra_offset;
  /** Bytes of auxiliary header. */
  uint8_t auxhdr_len;
  uint8_t reserved0;
  uint32_t num_fdes;
  uint32_t num_fres;
  /** Bytes of the FRE sub-section. */
  uint32_t fre_len;
  uint32_t reserved1;
  /** The address given at open (sh_addr). */
  uint64_t address;
  /** Bytes the section occupies according to its header. */
  uint64_t used_size;
  /** Bytes opened (may include trailing padding). */
  uint64_t size;
} sframe_section_info;

/*
 * Fills *info. Errors: SFRAME_E_INVALID_ARGUMENT (NULL argument).
 * Thread-safe, async-signal-safe.
 */
SFRAME_API sframe_status sframe_section_get_info(const sframe_section *section, sframe_section_info *info);

/*
 * Checks every FDE and FRE of the section once, in time linear in its size
 * (spec §2-§3). `strictness`: SFRAME_VALIDATE_LENIENT (what decoding needs;
 * afterwards every FDE, FRE and row decodes) or SFRAME_VALIDATE_STRICT
 * (every rule of the spec). Returns SFRAME_OK or the first rule broken,
 * with its byte offset and FDE/FRE index in `err`.
 * Thread-safe (the handle is only read); allocates (bounded by the
 * section's size).
 */
SFRAME_API sframe_status sframe_section_validate(const sframe_section *section, uint32_t strictness,
                                                 sframe_error *err);

/** One function descriptor (spec §2.3), version-independent. 40 bytes. */
typedef struct sframe_fde {
  uint32_t index;
  /** Function size in bytes. */
  uint32_t size;
  /** Absolute start PC: section address + the decoded start offset. */
  uint64_t start_pc;
  uint32_t num_fres;
  /** sfde_func_start_fre_off: offset of the function's FRE data in the FRE
   *  sub-section. */
  uint32_t fre_offset;
  /** SFRAME_FRE_TYPE_*, SFRAME_PC_TYPE_*, SFRAME_FDE_TYPE_*. */
  uint8_t fre_type;
  uint8_t pc_type;
  uint8_t fde_type;
  /** AArch64 PAuth key signing the RA: 0 = A, 1 = B. */
  uint8_t pauth_key;
  /** v3: the function is a signal trampoline. */
  uint8_t signal;
  /** Repetition block size of PC-mask FDEs (e.g. 16 for PLT entries). */
  uint8_t rep_size;
  /** Raw info bytes (info2 is 0 before v3). */
  uint8_t info;
  uint8_t info2;
  uint64_t reserved;
} sframe_fde;

/** One frame row entry (spec §2.4) with its rules. 64 bytes. */
typedef struct sframe_fre {
  /** Index of the FRE within its FDE. */
  uint32_t index;
  /** sfre_start_address: bytes from the function start (PC-mask FDEs:
   *  from the start of the repeated block). */
  uint32_t start_offset;
  /** Byte offset of the FRE in the section, and its encoded size. */
  uint32_t section_offset;
  uint32_t encoded_size;
  /** Raw FRE info byte; data-word count and size in bytes (1, 2, 4). */
  uint8_t info;
  uint8_t dataword_count;
  uint8_t dataword_size;
  /** 1 if the CFA is SP-based (FRE info bit 0), 0 if FP-based. */
  uint8_t cfa_base_sp;
  uint32_t reserved;
  sframe_row row;
} sframe_fre;

/*
 * Decodes FDE `index` (< num_fdes). Errors: SFRAME_E_INVALID_ARGUMENT,
 * SFRAME_E_FDE_INDEX_OUT_OF_RANGE, SFRAME_E_FRE_OFFSET_PAST_END,
 * SFRAME_E_FDE_ATTR_TRUNCATED, SFRAME_E_BAD_FRE_TYPE (offset in `err`).
 * Thread-safe, async-signal-safe.
 */
SFRAME_API sframe_status sframe_section_get_fde(const sframe_section *section, uint32_t index, sframe_fde *fde,
                                                sframe_error *err);

/*
 * Decodes the FREs of FDE `fde_index` from FRE `first` on, in order, into
 * `fres[0 .. capacity)`, each with its rules; *written receives how many
 * were written (min(capacity, num_fres - first); 0 when first >= num_fres).
 * One pass: call it with capacity = num_fres to read a whole function.
 * Errors: SFRAME_E_INVALID_ARGUMENT (NULL section or written; NULL fres
 * with capacity > 0), the errors of sframe_section_get_fde(), and of the
 * FRE or its data words: SFRAME_E_FRE_TRUNCATED, SFRAME_E_BAD_DATAWORD_SIZE,
 * SFRAME_E_BAD_DATAWORD_COUNT, SFRAME_E_BAD_FLEX_CONTROL (FREs before the
 * bad one are written and counted in *written).
 * Thread-safe, async-signal-safe.
 */
SFRAME_API sframe_status sframe_section_get_fres(const sframe_section *section, uint32_t fde_index, uint32_t first,
                                                 sframe_fre *fres, size_t capacity, size_t *written,
                                                 sframe_error *err);

/*
 * What covers a PC: its FDE and its FRE with the rules (spec §2.3-§3;
 * PC-mask FDEs reduce the PC modulo their block size).
 */
typedef struct sframe_match {
  sframe_fde fde;
  sframe_fre fre;
} sframe_match;

/*
 * Finds the FDE covering absolute `pc` (start_pc <= pc < start_pc + size)
 * and in it the last FRE starting at or before the PC. Binary search when
 * the FDEs are sorted (SFRAME_F_FDE_SORTED), else a linear scan.
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_PC_NOT_COVERED,
 * SFRAME_E_PC_BEFORE_FIRST_FRE, or a decoding error of the FDE/FRE.
 * Thread-safe, async-signal-safe (allocates nothing).
 */
SFRAME_API sframe_status sframe_section_find(const sframe_section *section, uint64_t pc, sframe_match *match,
                                             sframe_error *err);

/* ------------------------------------------------------------------------
 * The encoder: functions and rows in, section bytes out (spec §2, v2/v3)
 * ---------------------------------------------------------------------- */

/** A section being encoded (opaque). */
typedef struct sframe_encoder sframe_encoder;

/** The header of the section to encode. 24 bytes. */
typedef struct sframe_encoder_header {
  /** 2 or 3 (version 1 is not written). */
  uint8_t version;
  /** SFRAME_ABI_*. */
  uint8_t abi;
  /** 1 to write the section big-endian (the ABI's own order for AArch64
   *  big-endian and s390x). */
  uint8_t big_endian;
  /** Header fixed offsets (AMD64: RA at CFA - 8); 0 = not fixed. */
  int8_t cfa_fixed_fp_offset;
  int8_t cfa_fixed_ra_offset;
  uint8_t reserved[3];
  /** Address the section will be loaded at (start fields are PC-relative). */
  uint64_t section_address;
  uint64_t reserved1;
} sframe_encoder_header;

/** One function of the model (an FDE). 24 bytes. */
typedef struct sframe_function {
  /** Absolute start PC and size in bytes. */
  uint64_t start_pc;
  uint32_t size;
  /** SFRAME_PC_TYPE_*; SFRAME_FDE_TYPE_* (FLEX is v3 only). */
  uint8_t pc_type;
  uint8_t fde_type;
  /** Block size of PC-mask functions (x86-64 PLT: 16). */
  uint8_t rep_size;
  /** v3 signal-frame bit; AArch64 PAuth key (0 = A, 1 = B). */
  uint8_t signal;
  uint8_t pauth_key;
  uint8_t reserved[7];
} sframe_function;

/** From `start_offset` (bytes from the function start) on, `row` applies.
 *  44 bytes. Rules use the kinds and flags above: RA UNDEFINED marks the
 *  outermost frame. Rules are taken as resolved: an RA or FP rule equal to
 *  the header's fixed offset (else UNCHANGED) is written as no data word,
 *  and as a padding word (FLEX) or SFRAME_FRE_RA_OFFSET_INVALID (RA) where
 *  an FP word follows; SFRAME_RULE_FROM_HEADER and SFRAME_RULE_PADDING are
 *  accepted and change nothing. */
typedef struct sframe_row_spec {
  uint32_t start_offset;
  sframe_row row;
} sframe_row_spec;

/*
 * A new encoder for a section with `header`, writing the smallest
 * encoding: the smallest FRE type and data-word size, repeated rows
 * dropped, FDEs sorted by start PC, start fields PC-relative.
 * Errors: SFRAME_E_INVALID_ARGUMENT (NULL argument, version not 2 or 3,
 * unknown ABI), SFRAME_E_NO_MEMORY. Thread-safe (no shared state).
 */
SFRAME_API sframe_status sframe_encoder_create(const sframe_encoder_header *header, sframe_encoder **out);

/*
 * Adds one function with its `num_rows` rows (by increasing start_offset;
 * `rows` may be NULL when num_rows is 0). Its FREs are encoded now.
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_NO_MEMORY,
 * SFRAME_E_NOT_REPRESENTABLE (a rule the version, ABI or FDE type cannot
 * express, an offset out of range, unsorted rows, a row outside its
 * function, a PC-mask function with a zero block size, an end past the
 * address space), with err->fde = functions added before and err->fre =
 * the row. A failed add leaves the encoder as it was.
 * Not thread-safe: one thread at a time per encoder.
 */
SFRAME_API sframe_status sframe_encoder_add_function(sframe_encoder *encoder, const sframe_function *function,
                                                     const sframe_row_spec *rows, size_t num_rows, sframe_error *err);

/*
 * Writes the section (header, FDE and FRE sub-sections) to a new buffer:
 * *bytes (free it with sframe_free()) and *size. The encoder is then
 * empty, ready for another section with the same header. What it writes
 * passes sframe_section_validate(STRICT).
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_NO_MEMORY,
 * SFRAME_E_NOT_REPRESENTABLE (sizes beyond the 32-bit fields, v2 start
 * PCs out of range). Not thread-safe: one thread at a time per encoder.
 */
SFRAME_API sframe_status sframe_encoder_finish(sframe_encoder *encoder, void **bytes, size_t *size,
                                               sframe_error *err);

/*
 * Frees `encoder` (NULL: nothing to do); returns SFRAME_OK. Not
 * thread-safe with respect to other uses of the same encoder.
 */
SFRAME_API sframe_status sframe_encoder_destroy(sframe_encoder *encoder);

/*
 * Frees a buffer returned by sframe_encoder_finish() or
 * sframe_cfi_generate() (NULL: nothing to do); returns SFRAME_OK.
 * Thread-safe. In libsframepp-format (before 0.2.0: libsframepp).
 */
SFRAME_API sframe_status sframe_free(void *bytes);

/* ------------------------------------------------------------------------
 * Generation from DWARF CFI (libsframepp-cfi)
 * ---------------------------------------------------------------------- */

/** What sframe_cfi_generate() did. 32 bytes. */
typedef struct sframe_generate_stats {
  /** FDEs of .eh_frame read, FDEs written (PLT ones included), FLEX FDEs
   *  written, PC-mask PLT FDEs added. */
  uint64_t functions_in;
  uint32_t functions_out;
  uint32_t flex_functions;
  uint32_t plt_functions;
  /** Functions left out because SFrame cannot describe them. */
  uint32_t skipped;
  uint64_t reserved;
} sframe_generate_stats;

/*
 * Translates the DWARF CFI (.eh_frame, through .eh_frame_hdr) of the
 * linked ELF executable or shared object at `path` into an SFrame section
 * of `version` (2 or 3; 3 adds FLEX FDEs for what DEFAULT rules cannot
 * say) for loading at `section_address`, as `sframe gen` does: *bytes
 * (free with sframe_free()) and *size; `stats` (may be NULL) says what was
 * left out. Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_NO_MEMORY,
 * SFRAME_E_IO, SFRAME_E_ELF (no .eh_frame/.eh_frame_hdr, unreadable CFI),
 * SFRAME_E_NOT_REPRESENTABLE (a machine without an SFrame ABI).
 * Thread-safe: each call reads the file through its own libelf and libdw
 * handles. Exported by libsframepp-cfi.
 */
SFRAME_API sframe_status sframe_cfi_generate(const char *path, uint32_t version, uint64_t section_address,
                                             void **bytes, size_t *size, sframe_generate_stats *stats,
                                             sframe_error *err);

/* ------------------------------------------------------------------------
 * The unwinder (spec Appendix A): caller-supplied registers and memory
 * ---------------------------------------------------------------------- */

/* Architectures of an unwind. */
enum { SFRAME_ARCH_AMD64 = 0, SFRAME_ARCH_AARCH64 = 1, SFRAME_ARCH_S390X = 2 };

/*
 * Reads the 64-bit word at byte address `addr` of the unwound target, in
 * the target's byte order, into *value: returns 1 on success, 0 if any byte
 * of [addr, addr + 8) is not readable. `addr` may be anything (read from a
 * corrupted stack): check it. Must be async-signal-safe when the unwind
 * runs in a signal handler.
 */
typedef int (*sframe_read_word_fn)(void *context, uint64_t addr, uint64_t *value);

/** Register state of frame 0. 272 bytes. */
typedef struct sframe_regs {
  /** SFRAME_ARCH_*. */
  uint32_t arch;
  /** Bit r set: dwarf[r] is known. */
  uint32_t valid;
  /** Runtime address of the current instruction (exact). */
  uint64_t pc;
  /** DWARF registers 0-31 (AMD64: rsp 7, rbp 6; AArch64: sp 31, x29, x30;
   *  s390x: r15, r11, r14). SP and FP are needed; AArch64 and s390x want
   *  the RA register too. */
  uint64_t dwarf[32];
} sframe_regs;

/** A runtime address range [begin, end). */
typedef struct sframe_range {
  uint64_t begin;
  uint64_t end;
} sframe_range;

/** Knobs of an unwind; sframe_unwind_options_init() sets the defaults. */
typedef struct sframe_unwind_options {
  /** Where no SFrame covers a PC, step with the frame-pointer convention
   *  (x86-64, AArch64). Default 0. */
  uint8_t fp_fallback;
  /** x86-64: a PC at `mov $15,%rax; syscall` is a signal trampoline.
   *  Default 1. */
  uint8_t detect_sigreturn_code;
  /** AArch64 PAuth: virtual-address width in bits (32-56). Default 48. */
  uint8_t pauth_va_bits;
  /** AArch64 top-byte-ignore for code addresses. Default 0. */
  uint8_t pauth_tbi;
  uint32_t reserved;
  /** Runtime ranges of signal trampolines (may be NULL when count is 0). */
  const sframe_range *signal_trampolines;
  size_t num_signal_trampolines;
  /** Executable ranges: a frame-pointer step is taken only when the RA it
   *  reads lies in one (may be NULL when count is 0). */
  const sframe_range *code_ranges;
  size_t num_code_ranges;
} sframe_unwind_options;

/* sframe_frame.flags */
enum {
  /** This frame's PC is in a signal trampoline (x86-64 Linux). */
  SFRAME_FRAME_SIGNAL = 0x1,
  /** Reached by the frame-pointer fallback. */
  SFRAME_FRAME_FP_FALLBACK = 0x2,
  /** The PC was stripped of PAuth bits. */
  SFRAME_FRAME_PAUTH_STRIPPED = 0x4,
  /** `fp` is known. */
  SFRAME_FRAME_FP_VALID = 0x8,
  /** `pc` is a return address (look rules up at pc - 1); else exact. */
  SFRAME_FRAME_RETURN_ADDRESS = 0x10
};

/** One frame of a walk. 48 bytes. */
typedef struct sframe_frame {
  uint64_t pc;
  uint64_t sp;
  uint64_t fp;
  /** The frame's CFA (0 for the last frame). */
  uint64_t cfa;
  /** SFRAME_FRAME_*. */
  uint32_t flags;
  uint32_t reserved0;
  uint64_t reserved1;
} sframe_frame;

/*
 * Why a walk ended: sframe_unwind_result.stop and sframe_backtrace_result.stop
 * (libsframepp and libsframepp-backtrace share this one vocabulary, the C++
 * sframe::StopReason of <sframe/unwind/stop_reason.hpp>, value for value).
 */
enum {
  /** Reached the outermost frame (RA undefined: _start, a thread's start). */
  SFRAME_STOP_OUTERMOST = 0,
  /** No module or no SFrame FDE covers the PC (and no frame-pointer step). */
  SFRAME_STOP_NO_SFRAME_FOR_PC = 1,
  /** The CFA did not move up the stack (outside a signal frame). */
  SFRAME_STOP_CFA_NOT_INCREASING = 2,
  /** A stack read failed. */
  SFRAME_STOP_UNREADABLE_MEMORY = 3,
  /** The caller's frame buffer is full (the stack goes on). */
  SFRAME_STOP_DEPTH_LIMIT = 4,
  /** A rule needs an unknown register, or the SFrame data failed to decode. */
  SFRAME_STOP_BAD_RULE = 5,
  /** The PC of frame 0 or a recovered return address is 0. */
  SFRAME_STOP_ZERO_PC = 6,
  /** Backtrace only: sframe_backtrace_init() has not run. */
  SFRAME_STOP_NOT_INITIALIZED = 7,
  /** Backtrace only: not x86-64 Linux. */
  SFRAME_STOP_UNSUPPORTED = 8,
  /** Backtrace only: a checked read (process_vm_readv) was refused (seccomp). */
  SFRAME_STOP_READ_CHECK_REFUSED = 9,
  /** Same as SFRAME_STOP_DEPTH_LIMIT. */
  SFRAME_STOP_BUFFER_FULL = SFRAME_STOP_DEPTH_LIMIT
};

/** Outcome of a walk. 24 bytes. */
typedef struct sframe_unwind_result {
  /** Frames written. */
  uint64_t count;
  /** SFRAME_STOP_*. */
  uint32_t stop;
  /** SFRAME_STOP_BAD_RULE from a decoding failure: its status; else SFRAME_OK. */
  int32_t error;
  /** Unreadable memory: the address; no SFrame / bad rule: the lookup PC;
   *  CFA not increasing: the CFA; else 0. */
  uint64_t address;
} sframe_unwind_result;

/** A set of modules to unwind through (opaque). */
typedef struct sframe_unwinder sframe_unwinder;

/*
 * Sets *options to the defaults. Errors: SFRAME_E_INVALID_ARGUMENT.
 * Thread-safe, async-signal-safe.
 */
SFRAME_API sframe_status sframe_unwind_options_init(sframe_unwind_options *options);

/*
 * A new unwinder with room for `max_modules` modules (allocated now; adding
 * and unwinding allocate nothing). Errors: SFRAME_E_INVALID_ARGUMENT,
 * SFRAME_E_NO_MEMORY. Thread-safe (no shared state).
 */
SFRAME_API sframe_status sframe_unwinder_create(size_t max_modules, sframe_unwinder **out);

/*
 * Adds a module: the runtime code range [begin, end), its load bias
 * (runtime = link-time + bias) and its SFrame section (opened with its
 * link-time address; it must stay open while the unwinder uses it).
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_MODULE_MAP_FULL,
 * SFRAME_E_BAD_MODULE_RANGE, SFRAME_E_MODULES_OVERLAP (err->value = begin).
 * Not thread-safe: no unwind of this unwinder may run meanwhile.
 */
SFRAME_API sframe_status sframe_unwinder_add_module(sframe_unwinder *unwinder, const sframe_section *section,
                                                    uint64_t begin, uint64_t end, uint64_t bias, sframe_error *err);

/*
 * Removes the module whose range starts at `begin`. Errors:
 * SFRAME_E_INVALID_ARGUMENT (NULL, or no such module). Not thread-safe: no
 * unwind of this unwinder may run meanwhile.
 */
SFRAME_API sframe_status sframe_unwinder_remove_module(sframe_unwinder *unwinder, uint64_t begin);

/*
 * Frees `unwinder` (NULL: nothing to do); returns SFRAME_OK. Its sections
 * stay open. Not thread-safe with respect to other uses of it.
 */
SFRAME_API sframe_status sframe_unwinder_destroy(sframe_unwinder *unwinder);

/*
 * Walks the stack from `regs` (frame 0, exact PC), reading memory through
 * `read(context, ...)`, writing up to `capacity` frames to `frames`; frame
 * k > 0 has the return address read from frame k-1 (or, after a signal
 * trampoline, the interrupted PC). `options` may be NULL (defaults).
 * *result says how many frames were written and why the walk ended; the
 * walk's own end (outermost frame, unreadable memory, ...) is not an error.
 * Errors: SFRAME_E_INVALID_ARGUMENT (NULL unwinder, regs, read or result;
 * NULL frames with capacity > 0; unknown arch).
 * Thread-safe: any number of walks may share an unwinder (it is only read).
 * Async-signal-safe when `read` is (no allocation, no lock).
 */
SFRAME_API sframe_status sframe_unwind(const sframe_unwinder *unwinder, const sframe_regs *regs,
                                       sframe_read_word_fn read, void *context,
                                       const sframe_unwind_options *options, sframe_frame *frames, size_t capacity,
                                       sframe_unwind_result *result);

/* ------------------------------------------------------------------------
 * In-process backtrace (libsframepp-backtrace; x86-64 Linux)
 * ---------------------------------------------------------------------- */

/*
 * Former names of the SFRAME_STOP_* values a backtrace reports, kept for
 * source compatibility. Since 0.2.0 they equal the SFRAME_STOP_* values of
 * the same name (0.1.0 numbered them apart: rebuild against this header).
 */
#define SFRAME_BT_OUTERMOST SFRAME_STOP_OUTERMOST
#define SFRAME_BT_BUFFER_FULL SFRAME_STOP_DEPTH_LIMIT
#define SFRAME_BT_NO_SFRAME_FOR_PC SFRAME_STOP_NO_SFRAME_FOR_PC
#define SFRAME_BT_CFA_NOT_INCREASING SFRAME_STOP_CFA_NOT_INCREASING
#define SFRAME_BT_UNREADABLE_MEMORY SFRAME_STOP_UNREADABLE_MEMORY
#define SFRAME_BT_BAD_RULE SFRAME_STOP_BAD_RULE
#define SFRAME_BT_ZERO_PC SFRAME_STOP_ZERO_PC
#define SFRAME_BT_NOT_INITIALIZED SFRAME_STOP_NOT_INITIALIZED
#define SFRAME_BT_UNSUPPORTED SFRAME_STOP_UNSUPPORTED
#define SFRAME_BT_READ_CHECK_REFUSED SFRAME_STOP_READ_CHECK_REFUSED

/** Outcome of a backtrace. 24 bytes. */
typedef struct sframe_backtrace_result {
  /** Addresses written. */
  uint64_t count;
  /** SFRAME_STOP_*. */
  uint32_t stop;
  uint32_t reserved;
  /** Unreadable memory: the address; no SFrame / bad rule: the lookup PC;
   *  CFA not increasing: the CFA; else 0. */
  uint64_t address;
} sframe_backtrace_result;

/*
 * One-time initialisation of the in-process backtrace: the table of loaded
 * modules with their SFrame (PT_GNU_SFRAME, else generated from .eh_frame
 * in SFrame `generated_version` 2 or 3; 0 = 3). Registers the calling
 * thread. A second call rebuilds the table. On a module with unwind
 * information that yields no SFrame, returns its error (SFRAME_E_IO,
 * SFRAME_E_ELF, ...) in `err`; the table is still published and the module
 * walked by the frame-pointer fallback. Errors also:
 * SFRAME_E_INVALID_ARGUMENT, SFRAME_E_NO_MEMORY.
 * Not async-signal-safe; thread-safe (serialised internally). Call it
 * before installing signal handlers that take backtraces.
 */
SFRAME_API sframe_status sframe_backtrace_init(uint32_t generated_version, sframe_error *err);

/*
 * Rebuilds the module table if modules were loaded or unloaded (after
 * dlopen/dlclose). Errors as sframe_backtrace_init(). Not
 * async-signal-safe; thread-safe.
 */
SFRAME_API sframe_status sframe_backtrace_refresh(sframe_error *err);

/*
 * Gives the calling thread a rule cache and records its stack bounds (an
 * optimisation; threads that never call it walk too). Errors:
 * SFRAME_E_NO_MEMORY. Not async-signal-safe; thread-safe.
 */
SFRAME_API sframe_status sframe_backtrace_register_thread(void);

/*
 * Writes the calling thread's call stack to out[0 .. capacity): out[0] is
 * the return address into the caller of sframe_backtrace(), the outermost
 * frame last; every entry is a return address except the one right after
 * a signal trampoline (the exact interrupted PC), as glibc's backtrace()
 * reports. When the stack is deeper than `capacity`, all `capacity` entries
 * are written and result->stop is SFRAME_STOP_DEPTH_LIMIT (before 0.2.0: at
 * most capacity - 1). *result (may be NULL) gets
 * the count and why the walk ended.
 * Before sframe_backtrace_init() has run, it runs it first (that first
 * call is not async-signal-safe).
 * Errors: SFRAME_E_INVALID_ARGUMENT (NULL out with capacity > 0),
 * SFRAME_E_UNSUPPORTED (not x86-64 Linux; nothing is written).
 * Async-signal-safe and thread-safe once sframe_backtrace_init() has run.
 */
SFRAME_API sframe_status sframe_backtrace(void **out, size_t capacity, sframe_backtrace_result *result);

/*
 * Walks from the registers of `ucontext` (a ucontext_t * as given to an
 * SA_SIGINFO handler): out[0] is the interrupted PC (exact), then its
 * callers; the handler's and the trampoline's frames are not included.
 * Never initialises. Errors as sframe_backtrace(), plus
 * SFRAME_E_INVALID_ARGUMENT for a NULL ucontext.
 * Async-signal-safe (also on a sigaltstack after a stack overflow) and
 * thread-safe once sframe_backtrace_init() has run.
 */
SFRAME_API sframe_status sframe_backtrace_ucontext(void **out, size_t capacity, const void *ucontext,
                                                   sframe_backtrace_result *result);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_SFRAME_H */
