/* SPDX-License-Identifier: MIT */
/*
 * sframepp C API (C99): sections (from bytes or an ELF file), validation,
 * FDE/FRE iteration, find(pc), the encoder and the unwinder.
 * Library: libsframepp.
 * Part of <sframe/sframe.h>, which includes every library's C header;
 * its opening comment states the conventions (status and sframe_error,
 * ABI, thread safety, spec references).
 */
#ifndef SFRAME_ELF_SFRAME_ELF_H
#define SFRAME_ELF_SFRAME_ELF_H

#include "sframe/format/sframe_format.h"
#include "sframe/unwind/sframe_unwind.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * Library: libsframepp.
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
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_section_open_elf(const char *path, const char *section_name, sframe_section **out,
                                                 sframe_error *err);

/*
 * Frees `section` (NULL: nothing to do). The handle must not be in use by
 * another thread or by an unwinder (sframe_unwinder_add_module). Returns
 * SFRAME_OK. Not thread-safe with respect to other uses of the same handle.
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
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
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_encoder_finish(sframe_encoder *encoder, void **bytes, size_t *size,
                                               sframe_error *err);

/*
 * Frees `encoder` (NULL: nothing to do); returns SFRAME_OK. Not
 * thread-safe with respect to other uses of the same encoder.
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_encoder_destroy(sframe_encoder *encoder);

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
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_unwind_options_init(sframe_unwind_options *options);

/*
 * A new unwinder with room for `max_modules` modules (allocated now; adding
 * and unwinding allocate nothing). Errors: SFRAME_E_INVALID_ARGUMENT,
 * SFRAME_E_NO_MEMORY. Thread-safe (no shared state).
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_unwinder_create(size_t max_modules, sframe_unwinder **out);

/*
 * Adds a module: the runtime code range [begin, end), its load bias
 * (runtime = link-time + bias) and its SFrame section (opened with its
 * link-time address; it must stay open while the unwinder uses it).
 * Errors: SFRAME_E_INVALID_ARGUMENT, SFRAME_E_MODULE_MAP_FULL,
 * SFRAME_E_BAD_MODULE_RANGE, SFRAME_E_MODULES_OVERLAP (err->value = begin).
 * Not thread-safe: no unwind of this unwinder may run meanwhile.
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_unwinder_add_module(sframe_unwinder *unwinder, const sframe_section *section,
                                                    uint64_t begin, uint64_t end, uint64_t bias, sframe_error *err);

/*
 * Removes the module whose range starts at `begin`. Errors:
 * SFRAME_E_INVALID_ARGUMENT (NULL, or no such module). Not thread-safe: no
 * unwind of this unwinder may run meanwhile.
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_unwinder_remove_module(sframe_unwinder *unwinder, uint64_t begin);

/*
 * Frees `unwinder` (NULL: nothing to do); returns SFRAME_OK. Its sections
 * stay open. Not thread-safe with respect to other uses of it.
 * Library: libsframepp.
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
 * Library: libsframepp.
 */
SFRAME_API sframe_status sframe_unwind(const sframe_unwinder *unwinder, const sframe_regs *regs,
                                       sframe_read_word_fn read, void *context,
                                       const sframe_unwind_options *options, sframe_frame *frames, size_t capacity,
                                       sframe_unwind_result *result);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_ELF_SFRAME_ELF_H */
