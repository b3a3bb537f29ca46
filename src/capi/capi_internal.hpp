// SPDX-License-Identifier: MIT
// The C API's boundary (include/sframe/sframe.h): one mapping from the C++
// error codes to the flat sframe_status, and the catch-all that keeps C++
// exceptions from crossing into C. Shared by the C functions of every
// library (codec in libsframepp, generation in libsframepp-cfi, backtrace in
// libsframepp-backtrace); not installed.
#pragma once

#include <new>
#include <stdexcept>

#include "sframe/error.hpp"
#include "sframe/sframe.h"

namespace sframe::capi {

/// The C status of a C++ error code. Written case by case (no arithmetic on
/// the enumerators): the C values are ABI and must not move when Errc does;
/// -Wswitch flags an Errc added without a C status.
constexpr sframe_status to_status(Errc e) noexcept {
  switch (e) {
    case Errc::kTruncatedHeader: return SFRAME_E_TRUNCATED_HEADER;
    case Errc::kBadMagic: return SFRAME_E_BAD_MAGIC;
    case Errc::kBadVersion: return SFRAME_E_BAD_VERSION;
    case Errc::kBadAbi: return SFRAME_E_BAD_ABI;
    case Errc::kUndefinedFlags: return SFRAME_E_UNDEFINED_FLAGS;
    case Errc::kAuxHeaderPastEnd: return SFRAME_E_AUX_HEADER_PAST_END;
    case Errc::kFdeTablePastEnd: return SFRAME_E_FDE_TABLE_PAST_END;
    case Errc::kFreSectionPastEnd: return SFRAME_E_FRE_SECTION_PAST_END;
    case Errc::kSubsectionsOverlap: return SFRAME_E_SUBSECTIONS_OVERLAP;
    case Errc::kFdeIndexOutOfRange: return SFRAME_E_FDE_INDEX_OUT_OF_RANGE;
    case Errc::kFreOffsetPastEnd: return SFRAME_E_FRE_OFFSET_PAST_END;
    case Errc::kFdeAttrTruncated: return SFRAME_E_FDE_ATTR_TRUNCATED;
    case Errc::kFreTruncated: return SFRAME_E_FRE_TRUNCATED;
    case Errc::kBadFreType: return SFRAME_E_BAD_FRE_TYPE;
    case Errc::kBadFdeType: return SFRAME_E_BAD_FDE_TYPE;
    case Errc::kBadDatawordSize: return SFRAME_E_BAD_DATAWORD_SIZE;
    case Errc::kBadDatawordCount: return SFRAME_E_BAD_DATAWORD_COUNT;
    case Errc::kBadFlexControl: return SFRAME_E_BAD_FLEX_CONTROL;
    case Errc::kUnusedBitsSet: return SFRAME_E_UNUSED_BITS_SET;
    case Errc::kZeroRepSize: return SFRAME_E_ZERO_REP_SIZE;
    case Errc::kFuncRangeOverflow: return SFRAME_E_FUNC_RANGE_OVERFLOW;
    case Errc::kFreStartNotIncreasing: return SFRAME_E_FRE_START_NOT_INCREASING;
    case Errc::kFreStartOutsideFunction: return SFRAME_E_FRE_START_OUTSIDE_FUNCTION;
    case Errc::kFdeFresOverlap: return SFRAME_E_FDE_FRES_OVERLAP;
    case Errc::kFreCountMismatch: return SFRAME_E_FRE_COUNT_MISMATCH;
    case Errc::kFreLenMismatch: return SFRAME_E_FRE_LEN_MISMATCH;
    case Errc::kFdesUnsorted: return SFRAME_E_FDES_UNSORTED;
    case Errc::kFdesOverlap: return SFRAME_E_FDES_OVERLAP;
    case Errc::kNoSFrameSection: return SFRAME_E_NO_SFRAME_SECTION;
    case Errc::kElfError: return SFRAME_E_ELF;
    case Errc::kIoError: return SFRAME_E_IO;
    case Errc::kBadRelocation: return SFRAME_E_BAD_RELOCATION;
    case Errc::kPcNotCovered: return SFRAME_E_PC_NOT_COVERED;
    case Errc::kPcBeforeFirstFre: return SFRAME_E_PC_BEFORE_FIRST_FRE;
    case Errc::kNotRepresentable: return SFRAME_E_NOT_REPRESENTABLE;
    case Errc::kModuleMapFull: return SFRAME_E_MODULE_MAP_FULL;
    case Errc::kBadModuleRange: return SFRAME_E_BAD_MODULE_RANGE;
    case Errc::kModulesOverlap: return SFRAME_E_MODULES_OVERLAP;
    // perf.data reading has no C entry point: these never reach the C API.
    case Errc::kPerfBadHeader:
    case Errc::kPerfTruncated:
    case Errc::kPerfBadRecord:
    case Errc::kPerfUnsupported:
    case Errc::kPerfDecompress: return SFRAME_E_INTERNAL;
    // A CFI record running past its section: the ELF file's CFI is bad.
    case Errc::kBadCfi: return SFRAME_E_ELF;
  }
  return SFRAME_E_INTERNAL;
}

/// Reports `e` through the optional out-struct; returns its status.
inline sframe_status fail(const Error& e, sframe_error* err) noexcept {
  const sframe_status s = to_status(e.code);
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
