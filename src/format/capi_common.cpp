// SPDX-License-Identifier: MIT
// The C helpers of include/sframe/format/sframe_format.h that every feature's C functions
// share (status messages, freeing what a C function allocated), in the
// lowest library, libsframepp-format, which every other library links: a C
// program that uses one feature (the backtrace alone, say) links that
// feature's library and its dependencies, never libsframepp (and libelf)
// for these. Defined here only.
#include <cstdlib>

#include "../capi/capi_internal.hpp"

using namespace sframe;

extern "C" {

const char* sframe_strerror(int status) {
  switch (status) {
    case SFRAME_OK: return "success";
    case SFRAME_E_INVALID_ARGUMENT: return "invalid argument (a null pointer or a value out of range)";
    case SFRAME_E_NO_MEMORY: return "out of memory";
    case SFRAME_E_INTERNAL: return "internal error";
    case SFRAME_E_UNSUPPORTED: return "not supported on this machine";
    case SFRAME_E_NOT_INITIALIZED: return "sframe_backtrace_init() has not run";
    default: break;
  }
  // Input statuses: the C++ message of the first code (in the order of
  // SFRAME_ERROR_LAYERS) mapping to it (literals, so NUL-terminated).
  for (const ErrorCodeInfo& i : kErrorCodes)
    if (status == capi::to_status(i.code)) return i.message.data();
  return "unknown status";
}

sframe_status sframe_free(void* bytes) {
  std::free(bytes);
  return SFRAME_OK;
}

}  // extern "C"
