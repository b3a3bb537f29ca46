/* SPDX-License-Identifier: MIT */
/*
 * sframepp C API (C99): the in-process backtrace (x86-64 Linux).
 * Library: libsframepp-backtrace.
 * Part of <sframe/sframe.h>, which includes every library's C header;
 * its opening comment states the conventions (status and sframe_error,
 * ABI, thread safety, spec references).
 */
#ifndef SFRAME_BACKTRACE_SFRAME_BACKTRACE_H
#define SFRAME_BACKTRACE_SFRAME_BACKTRACE_H

#include "sframe/format/sframe_format.h"
#include "sframe/unwind/sframe_unwind.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * Library: libsframepp-backtrace.
 */
SFRAME_API sframe_status sframe_backtrace_init(uint32_t generated_version, sframe_error *err);

/*
 * Rebuilds the module table if modules were loaded or unloaded (after
 * dlopen/dlclose). Errors as sframe_backtrace_init(). Not
 * async-signal-safe; thread-safe.
 * Library: libsframepp-backtrace.
 */
SFRAME_API sframe_status sframe_backtrace_refresh(sframe_error *err);

/*
 * Gives the calling thread a rule cache and records its stack bounds (an
 * optimisation; threads that never call it walk too). Errors:
 * SFRAME_E_NO_MEMORY. Not async-signal-safe; thread-safe.
 * Library: libsframepp-backtrace.
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
 * Library: libsframepp-backtrace.
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
 * Library: libsframepp-backtrace.
 */
SFRAME_API sframe_status sframe_backtrace_ucontext(void **out, size_t capacity, const void *ucontext,
                                                   sframe_backtrace_result *result);

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_BACKTRACE_SFRAME_BACKTRACE_H */
