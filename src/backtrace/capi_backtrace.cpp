// SPDX-License-Identifier: MIT
// The C API of libsframepp-backtrace (include/sframe/backtrace/sframe_backtrace.h): the
// in-process, async-signal-safe backtrace of include/sframe/backtrace/backtrace.hpp.
#include <cstdint>
#include <cstring>
#include <span>

#include "backtrace_internal.hpp"
#include "../capi/capi_internal.hpp"
#include "sframe/backtrace/backtrace.hpp"

using namespace sframe;
using sframe::capi::fail;
using sframe::capi::guarded;

namespace {

// The stop reasons pass through unchanged: one vocabulary (sframe.h's
// SFRAME_STOP_*, checked against StopReason in capi.cpp).
static_assert(sizeof(StopReason) == 1);

sframe_status finish(const BacktraceResult& r, sframe_backtrace_result* result) noexcept {
  if (result) *result = sframe_backtrace_result{r.size, static_cast<std::uint32_t>(r.reason), 0, r.address};
  if (r.reason == StopReason::kNotInitialized) return SFRAME_E_NOT_INITIALIZED;
  if (r.reason == StopReason::kUnsupported) return SFRAME_E_UNSUPPORTED;
  return SFRAME_OK;
}

}  // namespace

extern "C" {

sframe_status sframe_backtrace_init(uint32_t generated_version, sframe_error* err) {
  return guarded(err, [&] {
    if (generated_version != 0 && generated_version != 2 && generated_version != 3)
      return fail(SFRAME_E_INVALID_ARGUMENT, err);
    BacktraceOptions o;
    o.generated_version = generated_version == 2 ? Version::kV2 : Version::kV3;
    auto ok = backtrace_init(o);
    return ok ? SFRAME_OK : fail(ok.error(), err);
  });
}

sframe_status sframe_backtrace_refresh(sframe_error* err) {
  return guarded(err, [&] {
    auto ok = backtrace_refresh();
    return ok ? SFRAME_OK : fail(ok.error(), err);
  });
}

sframe_status sframe_backtrace_register_thread(void) {
  return guarded(nullptr, [] {
    backtrace_register_thread();
    return SFRAME_OK;
  });
}

// out[0] is the caller's return address and `out` fills whole, as glibc's
// backtrace() does. The inline entry (its assembly straight run) walks
// from this function: its frame 0 is the return address into here, to be
// dropped, so it needs capacity + 1 slots. Up to kLocal of them are taken
// on this stack and copied out: one walk. A larger `out` takes the walk
// directly, and when that filled it (the stack goes on, and the dropped
// slot must hold the next frame) the walk runs again through the C++ entry
// from the registers the caller has once this function returns - PC the
// return address, SP just above it, RBP as the caller left it - read from
// this function's frame record (__builtin_frame_address makes GCC and
// Clang build one). Never inlined, and its call to the walk is no tail
// call: the frame record and the walk's frame 0 are this function's.
[[gnu::noinline]] sframe_status sframe_backtrace(void** out, size_t capacity, sframe_backtrace_result* result) {
  if (!out && capacity > 0) return SFRAME_E_INVALID_ARGUMENT;
  constexpr std::size_t kLocal = 64;
  BacktraceResult r;
  if (capacity < kLocal) {
    void* local[kLocal];
    r = backtrace_ex(std::span<void*>(local, capacity + 1));
    if (r.size > 0) {
      --r.size;
      if (r.size > 0) std::memcpy(out, local + 1, r.size * sizeof(void*));  // `out` may be null when empty
    }
    return finish(r, result);
  }
  r = backtrace_ex(std::span<void*>(out, capacity));
  if (r.size > 0) {
    std::memmove(out, out + 1, (r.size - 1) * sizeof(void*));
    --r.size;
  }
#if defined(__x86_64__) && defined(__linux__)
  if (r.reason == StopReason::kDepthLimit) {
    void* const* const frame = static_cast<void* const*>(__builtin_frame_address(0));
    r.size = 0;  // a whole walk: `pc` is frame 0's return address
    sframepp_backtrace_walk_on(out, capacity, &r, reinterpret_cast<std::uint64_t>(frame[1]),
                               reinterpret_cast<std::uint64_t>(frame + 2), reinterpret_cast<std::uint64_t>(frame[0]));
  }
#endif
  return finish(r, result);
}

sframe_status sframe_backtrace_ucontext(void** out, size_t capacity, const void* ucontext,
                                        sframe_backtrace_result* result) {
  if ((!out && capacity > 0) || !ucontext) return SFRAME_E_INVALID_ARGUMENT;
  return finish(backtrace_ex(std::span<void*>(out, capacity), static_cast<const ucontext_t*>(ucontext)), result);
}

}  // extern "C"
