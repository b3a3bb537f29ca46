// SPDX-License-Identifier: MIT
// The C API's boundary (include/sframe/sframe.h): one mapping from the C++
// error codes to the flat sframe_status, and the catch-all that keeps C++
// exceptions from crossing into C. Shared by the C functions of every
// library (the shared helpers in libsframepp-format, codec in libsframepp,
// generation in libsframepp-cfi, backtrace in libsframepp-backtrace); not
// installed.
#pragma once

#include <new>
#include <stdexcept>

#include "sframe/format/error.hpp"
#include "sframe/sframe.h"

namespace sframe::capi {

/// The C status of a C++ error code, every layer's codes in one place.
/// Written case by case (no arithmetic on the enumerators): the C values
/// are ABI and must not move when a code enum does; -Wswitch flags a code
/// added without a C status.
constexpr sframe_status to_status(ErrorCode code) noexcept {
  switch (code.layer()) {
    case ErrorLayer::kFormat:
      switch (*code.as<FormatErrc>()) {
        case FormatErrc::kTruncatedHeader: return SFRAME_E_TRUNCATED_HEADER;
        case FormatErrc::kBadMagic: return SFRAME_E_BAD_MAGIC;
        case FormatErrc::kBadVersion: return SFRAME_E_BAD_VERSION;
        case FormatErrc::kBadAbi: return SFRAME_E_BAD_ABI;
        case FormatErrc::kUndefinedFlags: return SFRAME_E_UNDEFINED_FLAGS;
        case FormatErrc::kAuxHeaderPastEnd: return SFRAME_E_AUX_HEADER_PAST_END;
        case FormatErrc::kFdeTablePastEnd: return SFRAME_E_FDE_TABLE_PAST_END;
        case FormatErrc::kFreSectionPastEnd: return SFRAME_E_FRE_SECTION_PAST_END;
        case FormatErrc::kSubsectionsOverlap: return SFRAME_E_SUBSECTIONS_OVERLAP;
        case FormatErrc::kFdeIndexOutOfRange: return SFRAME_E_FDE_INDEX_OUT_OF_RANGE;
        case FormatErrc::kFreOffsetPastEnd: return SFRAME_E_FRE_OFFSET_PAST_END;
        case FormatErrc::kFdeAttrTruncated: return SFRAME_E_FDE_ATTR_TRUNCATED;
        case FormatErrc::kFreTruncated: return SFRAME_E_FRE_TRUNCATED;
        case FormatErrc::kBadFreType: return SFRAME_E_BAD_FRE_TYPE;
        case FormatErrc::kBadFdeType: return SFRAME_E_BAD_FDE_TYPE;
        case FormatErrc::kBadDatawordSize: return SFRAME_E_BAD_DATAWORD_SIZE;
        case FormatErrc::kBadDatawordCount: return SFRAME_E_BAD_DATAWORD_COUNT;
        case FormatErrc::kBadFlexControl: return SFRAME_E_BAD_FLEX_CONTROL;
        case FormatErrc::kUnusedBitsSet: return SFRAME_E_UNUSED_BITS_SET;
        case FormatErrc::kZeroRepSize: return SFRAME_E_ZERO_REP_SIZE;
        case FormatErrc::kFuncRangeOverflow: return SFRAME_E_FUNC_RANGE_OVERFLOW;
        case FormatErrc::kFreStartNotIncreasing: return SFRAME_E_FRE_START_NOT_INCREASING;
        case FormatErrc::kFreStartOutsideFunction: return SFRAME_E_FRE_START_OUTSIDE_FUNCTION;
        case FormatErrc::kFdeFresOverlap: return SFRAME_E_FDE_FRES_OVERLAP;
        case FormatErrc::kFreCountMismatch: return SFRAME_E_FRE_COUNT_MISMATCH;
        case FormatErrc::kFreLenMismatch: return SFRAME_E_FRE_LEN_MISMATCH;
        case FormatErrc::kFdesUnsorted: return SFRAME_E_FDES_UNSORTED;
        case FormatErrc::kFdesOverlap: return SFRAME_E_FDES_OVERLAP;
      }
      break;
    case ErrorLayer::kLookup:
      switch (*code.as<LookupErrc>()) {
        case LookupErrc::kPcNotCovered: return SFRAME_E_PC_NOT_COVERED;
        case LookupErrc::kPcBeforeFirstFre: return SFRAME_E_PC_BEFORE_FIRST_FRE;
      }
      break;
    case ErrorLayer::kElf:
      switch (*code.as<ElfErrc>()) {
        case ElfErrc::kNoSFrameSection: return SFRAME_E_NO_SFRAME_SECTION;
        case ElfErrc::kElfError: return SFRAME_E_ELF;
        case ElfErrc::kBadRelocation: return SFRAME_E_BAD_RELOCATION;
      }
      break;
    case ErrorLayer::kIo:
      switch (*code.as<IoErrc>()) {
        case IoErrc::kIoError: return SFRAME_E_IO;
        case IoErrc::kModuleMapFull: return SFRAME_E_MODULE_MAP_FULL;
        case IoErrc::kBadModuleRange: return SFRAME_E_BAD_MODULE_RANGE;
        case IoErrc::kModulesOverlap: return SFRAME_E_MODULES_OVERLAP;
      }
      break;
    case ErrorLayer::kEncode:
      switch (*code.as<EncodeErrc>()) {
        case EncodeErrc::kNotRepresentable: return SFRAME_E_NOT_REPRESENTABLE;
      }
      break;
    case ErrorLayer::kPerf:
      // perf.data reading has no C entry point: these never reach the C API.
      return SFRAME_E_INTERNAL;
    case ErrorLayer::kCfi:
      switch (*code.as<CfiErrc>()) {
        // A CFI record running past its section: the ELF file's CFI is bad.
        case CfiErrc::kBadCfi: return SFRAME_E_ELF;
      }
      break;
  }
  return SFRAME_E_INTERNAL;
}

/// Reports `e` through the optional out-struct; returns its status.
inline sframe_status fail(const Error& e, sframe_error* err) noexcept {
  const sframe_status s = to_status(e.code());
  if (err) *err = sframe_error{s, e.fde, e.fre, 0, e.offset, e.value};
  return s;
}

/// A failure of the call itself (no input position).
inline sframe_status fail(sframe_status s, sframe_error* err) noexcept {
  if (err) *err = sframe_error{s, SFRAME_NO_INDEX, SFRAME_NO_INDEX, 0, 0, 0};
  return s;
}

/// Runs `body` (returning sframe_status), turning any C++ exception into a
/// status: nothing thrown crosses the C boundary.
template <class F>
sframe_status guarded(sframe_error* err, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(SFRAME_E_NO_MEMORY, err);
  } catch (const std::length_error&) {
    // A container asked for more than it can ever hold: out of memory too.
    return fail(SFRAME_E_NO_MEMORY, err);
  } catch (...) {
    return fail(SFRAME_E_INTERNAL, err);
  }
}

}  // namespace sframe::capi
