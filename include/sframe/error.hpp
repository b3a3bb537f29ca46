// SPDX-License-Identifier: MIT
// sframepp: errors and the Expected<T> result type.
//
// Every fallible call returns Expected<T>: either a value or an Error. The
// Error is a small trivially copyable value (usable in a signal handler) that
// names the rule broken, the byte offset in the section where it was found,
// and the FDE/FRE index when the problem belongs to one.
#pragma once
// Exported from libsframepp.so, which builds with hidden visibility.
#pragma GCC visibility push(default)

#include <cassert>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

namespace sframe {

// X-macro: (enumerator, short message). The message says which rule of the
// SFrame specification the input breaks; `offset`, `value` and the indices in
// Error say where and what.
#define SFRAME_ERROR_CODES(X)                                                            \
  X(kTruncatedHeader, "section is shorter than the SFrame header")                       \
  X(kBadMagic, "bad magic number (expected 0xdee2 in either byte order)")                \
  X(kBadVersion, "unknown SFrame version")                                               \
  X(kBadAbi, "unknown ABI/arch identifier")                                              \
  X(kUndefinedFlags, "undefined flag bits set in sfp_flags")                             \
  X(kAuxHeaderPastEnd, "auxiliary header runs past the end of the section")              \
  X(kFdeTablePastEnd, "FDE sub-section runs past the end of the section")                \
  X(kFreSectionPastEnd, "FRE sub-section runs past the end of the section")              \
  X(kSubsectionsOverlap, "FDE sub-section overlaps the FRE sub-section")                 \
  X(kFdeIndexOutOfRange, "FDE index out of range")                                       \
  X(kFreOffsetPastEnd, "FDE's FRE data starts past the end of the FRE sub-section")      \
  X(kFdeAttrTruncated, "FDE attribute runs past the end of the FRE sub-section")         \
  X(kFreTruncated, "FRE runs past the end of the FRE sub-section")                       \
  X(kBadFreType, "FRE type code does not exist")                                         \
  X(kBadFdeType, "FDE type code does not exist")                                         \
  X(kBadDatawordSize, "FRE data-word size code does not exist")                          \
  X(kBadDatawordCount, "FRE data-word count impossible for this ABI and FDE type")       \
  X(kBadFlexControl, "FLEX FRE control data word breaks the encoding rules")             \
  X(kUnusedBitsSet, "unused bits set in an FDE info byte or a FLEX control word")         \
  X(kZeroRepSize, "PC-mask FDE with a repetition block size of zero")                    \
  X(kFuncRangeOverflow, "function start + size overflows the address space")             \
  X(kFreStartNotIncreasing, "FRE start addresses are not strictly increasing")           \
  X(kFreStartOutsideFunction, "FRE start address is not inside the function")            \
  X(kFdeFresOverlap, "FDE's FREs overlap another FDE's FREs")                            \
  X(kFreCountMismatch, "sfh_num_fres disagrees with the sum of the FDEs' FRE counts")    \
  X(kFreLenMismatch, "sfh_fre_len disagrees with the bytes the FREs occupy")             \
  X(kFdesUnsorted, "FDEs not sorted by start address while SFRAME_F_FDE_SORTED is set")  \
  X(kFdesOverlap, "functions of two FDEs overlap")                                       \
  X(kNoSFrameSection, "no SFrame section found")                                         \
  X(kElfError, "ELF file could not be read")                                             \
  X(kIoError, "file could not be opened or read")                                        \
  X(kBadRelocation, "relocation of the SFrame section could not be applied")              \
  X(kPcNotCovered, "no FDE covers the PC")                                               \
  X(kPcBeforeFirstFre, "the PC lies before the first FRE of its function")                \
  X(kNotRepresentable, "the model holds something this SFrame version or ABI cannot encode") \
  X(kModuleMapFull, "the module map has no storage left")                                 \
  X(kBadModuleRange, "module address range is empty")                                     \
  X(kModulesOverlap, "module address range overlaps a module already in the map")           \
  X(kPerfBadHeader, "not a perf.data file, or its header is malformed")                   \
  X(kPerfTruncated, "perf.data section or record runs past the end of the file")          \
  X(kPerfBadRecord, "perf.data record is malformed")                                      \
  X(kPerfUnsupported, "perf.data uses a feature this reader refuses (32-bit, big-endian)") \
  X(kPerfDecompress, "a perf.data COMPRESSED record does not decompress (zstd)") \
  X(kBadCfi, "DWARF CFI record runs past the end of its section (.eh_frame/.debug_frame)")

/// The rule an input broke (or the reason an operation failed).
enum class Errc : std::uint8_t {
#define SFRAME_X(name, msg) name,
  SFRAME_ERROR_CODES(SFRAME_X)
#undef SFRAME_X
};

/// Short English description of an error code; never null.
constexpr std::string_view describe(Errc code) noexcept {
  switch (code) {
#define SFRAME_X(name, msg) \
  case Errc::name:          \
    return msg;
    SFRAME_ERROR_CODES(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown error";
}

/// Identifier of an error code, e.g. "kBadMagic"; never null.
constexpr std::string_view code_name(Errc code) noexcept {
  switch (code) {
#define SFRAME_X(name, msg) \
  case Errc::name:          \
    return #name;
    SFRAME_ERROR_CODES(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}

/// Marks "no FDE/FRE index applies" in Error.
inline constexpr std::uint32_t kNoIndex = 0xffffffffu;

/// A decoding or validation failure. Trivially copyable, 32 bytes (two
/// 8-byte fields, two 4-byte indices, the code and padding).
struct Error {
  Errc code{};
  /// Byte offset from the start of the SFrame section where the rule is broken
  /// (kPerf* codes: from the start of the perf.data file or stream).
  std::uint64_t offset = 0;
  /// The offending value read from the input (a count, a code, an address), if any.
  std::uint64_t value = 0;
  /// Index of the FDE concerned, or kNoIndex.
  std::uint32_t fde = kNoIndex;
  /// Index of the FRE within that FDE, or kNoIndex.
  std::uint32_t fre = kNoIndex;

  friend bool operator==(const Error&, const Error&) = default;
};
static_assert(std::is_trivially_copyable_v<Error>);
static_assert(sizeof(Error) == 32, "Error's documented size");

/// Wrapper that constructs the error alternative of Expected, like std::unexpected.
struct Unexpected {
  Error error;
};

/// Shorthand for building an error result.
constexpr Unexpected make_error(Errc code, std::uint64_t offset, std::uint64_t value = 0,
                                std::uint32_t fde = kNoIndex, std::uint32_t fre = kNoIndex) {
  return Unexpected{Error{code, offset, value, fde, fre}};
}

/// A value of T or an Error; the subset of C++23 std::expected<T, Error> that
/// sframepp uses, so it can be swapped for it later.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(const T& v) : has_(true) { new (&val_) T(v); }           // NOLINT(implicit)
  Expected(T&& v) : has_(true) { new (&val_) T(std::move(v)); }     // NOLINT(implicit)
  Expected(Unexpected u) : has_(false) { new (&err_) Error(u.error); }  // NOLINT(implicit)
  Expected(const Expected& o) : has_(o.has_) {
    if (has_) new (&val_) T(o.val_); else new (&err_) Error(o.err_);
  }
  Expected(Expected&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : has_(o.has_) {
    if (has_) new (&val_) T(std::move(o.val_)); else new (&err_) Error(o.err_);
  }
  Expected& operator=(const Expected& o) {
    if (this != &o) { destroy(); has_ = o.has_; if (has_) new (&val_) T(o.val_); else new (&err_) Error(o.err_); }
    return *this;
  }
  Expected& operator=(Expected&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) { destroy(); has_ = o.has_; if (has_) new (&val_) T(std::move(o.val_)); else new (&err_) Error(o.err_); }
    return *this;
  }
  ~Expected() { destroy(); }

  bool has_value() const noexcept { return has_; }
  explicit operator bool() const noexcept { return has_; }
  // The value of an error, or the error of a value, is a caller's bug:
  // debug builds stop there (std::expected leaves it undefined).
  T& value() & { assert(has_); return val_; }
  const T& value() const& { assert(has_); return val_; }
  T&& value() && { assert(has_); return std::move(val_); }
  T& operator*() & { assert(has_); return val_; }
  const T& operator*() const& { assert(has_); return val_; }
  T* operator->() { assert(has_); return &val_; }
  const T* operator->() const { assert(has_); return &val_; }
  const Error& error() const { assert(!has_); return err_; }

 private:
  void destroy() { if (has_) val_.~T(); }
  union { T val_; Error err_; };
  bool has_;
};

/// Expected<void>: success or an Error.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Unexpected u) : has_(false), err_(u.error) {}  // NOLINT(implicit)
  bool has_value() const noexcept { return has_; }
  explicit operator bool() const noexcept { return has_; }
  const Error& error() const { assert(!has_); return err_; }

 private:
  bool has_ = true;
  Error err_{};
};

}  // namespace sframe

#pragma GCC visibility pop
