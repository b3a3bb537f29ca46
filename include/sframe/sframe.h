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
 * the enumerator values and the struct layouts of these headers are kept
 * stable for every libsframepp.so.0 (checked against abi/libsframepp.so.0.abi with
 * abidiff). The C++ API of the other headers promises source compatibility
 * only.
 *
 * One C header per library, beside that library's C++ headers (the
 * folder names the library to link); this header includes them all, and
 * each function's comment names its library:
 *  - sframe/format/sframe_format.h: libsframepp-format
 *    (libsframepp-format.so.0 / .a; no dependency), which every other
 *    library links: status codes, sframe_error, the format's constants
 *    and rules, and the shared helpers sframe_strerror and sframe_free,
 *    reachable from whichever library a program links.
 *  - sframe/unwind/sframe_unwind.h: the SFRAME_STOP_* values of every
 *    walk (libsframepp-unwind has no C function).
 *  - sframe/elf/sframe_elf.h: libsframepp (libsframepp.so.0 /
 *    libsframepp.a; needs libelf): sections (bytes or ELF file),
 *    validation, FDE/FRE iteration, find(pc), the encoder, the unwinder.
 *  - sframe/cfi/sframe_cfi.h: libsframepp-cfi (libsframepp-cfi.so.0 / .a;
 *    needs libsframepp and libdw): sframe_cfi_generate.
 *  - sframe/backtrace/sframe_backtrace.h: libsframepp-backtrace
 *    (libsframepp-backtrace.so.0 / .a; needs only libsframepp-unwind and
 *    libsframepp-format: no libelf, no libdw): sframe_backtrace_*.
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

#include "sframe/format/sframe_format.h"       /* libsframepp-format */
#include "sframe/unwind/sframe_unwind.h"       /* stop reasons (no function) */
#include "sframe/elf/sframe_elf.h"             /* libsframepp */
#include "sframe/cfi/sframe_cfi.h"             /* libsframepp-cfi */
#include "sframe/backtrace/sframe_backtrace.h" /* libsframepp-backtrace */

#endif /* SFRAME_SFRAME_H */
