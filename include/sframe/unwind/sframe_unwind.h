/* SPDX-License-Identifier: MIT */
/*
 * sframepp C API (C99): the stop vocabulary of every walk.
 * Library: libsframepp-unwind, which has no C function: these constants
 * are shared by the unwinder of libsframepp (sframe/elf/sframe_elf.h) and
 * the backtrace of libsframepp-backtrace.
 * Part of <sframe/sframe.h>, which includes every library's C header;
 * its opening comment states the conventions (status and sframe_error,
 * ABI, thread safety, spec references).
 */
#ifndef SFRAME_UNWIND_SFRAME_UNWIND_H
#define SFRAME_UNWIND_SFRAME_UNWIND_H

#include "sframe/format/sframe_format.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* SFRAME_UNWIND_SFRAME_UNWIND_H */
