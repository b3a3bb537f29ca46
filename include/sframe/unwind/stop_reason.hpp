// SPDX-License-Identifier: MIT
// sframepp: why a stack walk ended - the one vocabulary of every walk: the
// unwinder over any memory (unwind(), walk_chain()), the in-process
// backtrace, `sframe stack` and `sframe perf script`. The C API's
// SFRAME_STOP_* constants (sframe.h) carry the same values.
#pragma once

#include <cstdint>
#include <string_view>

namespace sframe {

/// Why a walk ended. The frame that could not be stepped over is the last
/// frame written. The values are stable: they are the C API's SFRAME_STOP_*.
#define SFRAME_STOP_REASONS(X)                                                                                  \
  X(kOutermost, "reached the outermost frame (RA undefined, errata 2: _start or a thread's start routine)")     \
  X(kNoSFrameForPc, "no module or no SFrame FDE covers the PC, and no frame-pointer step applied")              \
  X(kCfaNotIncreasing, "the CFA did not move up the stack")                                                     \
  X(kUnreadableMemory, "a stack read failed (memory not mapped, or outside the thread's known stack)")          \
  X(kDepthLimit, "the frame buffer is full")                                                                    \
  X(kBadRule, "a rule needs an unknown register, or the SFrame data failed to decode")                         \
  X(kZeroPc, "the PC of frame 0 or a recovered return address is 0")                                            \
  X(kNotInitialized, "the in-process module table is not built (backtrace_init() has not run)")                 \
  X(kUnsupported, "the in-process backtrace does not support this platform (x86-64 Linux only)")                \
  X(kReadCheckRefused, "a read outside the known stack needed process_vm_readv, which the kernel refused (seccomp)")
enum class StopReason : std::uint8_t {
#define SFRAME_X(name, msg) name,
  SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
  /// The in-process backtrace's former name of kDepthLimit: one concept.
  kBufferFull = kDepthLimit,
};

/// Identifier of a stop reason, e.g. "kOutermost"; never null.
constexpr std::string_view stop_reason_name(StopReason r) noexcept {
  switch (r) {
#define SFRAME_X(name, msg) \
  case StopReason::name:    \
    return #name;
    SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}

/// Short English description of a stop reason.
constexpr std::string_view describe(StopReason r) noexcept {
  switch (r) {
#define SFRAME_X(name, msg) \
  case StopReason::name:    \
    return msg;
    SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}

}  // namespace sframe
