/* SPDX-License-Identifier: MIT */
/*
 * sframepp C API (C99): SFrame generated from an ELF file's DWARF CFI.
 * Library: libsframepp-cfi.
 * Part of <sframe/sframe.h>, which includes every library's C header;
 * its opening comment states the conventions (status and sframe_error,
 * ABI, thread safety, spec references).
 */
#ifndef SFRAME_CFI_SFRAME_CFI_H
#define SFRAME_CFI_SFRAME_CFI_H

#include "sframe/format/sframe_format.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * handles.
 * Library: libsframepp-cfi.
 */
SFRAME_API sframe_status sframe_cfi_generate(const char *path, uint32_t version, uint64_t section_address,
                                             void **bytes, size_t *size, sframe_generate_stats *stats,
                                             sframe_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_CFI_SFRAME_CFI_H */
