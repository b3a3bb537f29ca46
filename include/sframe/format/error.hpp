// SPDX-License-Identifier: MIT
// sframepp: errors and the Expected<T> result type.
//
// Every fallible call returns Expected<T>: either a value or an Error. The
// Error is a small trivially copyable value (24 bytes, usable in a signal
// handler) that names the rule broken, where it was found, and the FDE/FRE
// index when the problem belongs to one.
//
// Codes come in one enum per layer, and the layer fixes what Error::offset
// counts bytes of:
//   FormatErrc  decoding and validating an SFrame section (spec v1-v3 §2, §3):
//               offset = byte offset from the start of the SFrame section.
//   LookupErrc  a PC that no FDE/FRE covers (find(), RowIndex, the .eh_frame
//               lookups of module_unwind.hpp): value = the PC searched (or
//               its offset in the function); offset = the FDE's FRE bytes in
//               the SFrame section when known, else 0.
//   ElfErrc     reading an ELF object (libelf), finding and relocating its
//               SFrame section, parsing .eh_frame_hdr: offset = byte offset
//               in the ELF file, or in the ELF section the call parses.
//   IoErrc      files, processes and the module map (I/O and process):
//               value = the errno (kIoError, 0 when unknown) or the
//               runtime address (module map); offset = byte position in the
//               file when a read or write failed there, else 0.
//   EncodeErrc  the encoder (encode.hpp) and the CFI-to-SFrame generation:
//               fde/fre = the model's function and row; offset = the byte of
//               the output header whose field overflowed, else 0.
//   PerfErrc    reading perf.data: offset = byte offset in the perf.data
//               file or stream.
//   CfiErrc     reading DWARF CFI: offset = byte offset in the CFI section
//               (.eh_frame or .debug_frame).
// There is no "no error" code: success is the value of an Expected, or an
// empty std::optional<Error>.
#pragma once
// Library: libsframepp-format (sframepp::format; header-only). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <array>
#include <cassert>
#include <cstddef>
#include <concepts>
#include <cstdint>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace sframe {

// X-macros: (enumerator, short message), one per layer. The message says
// which rule of the SFrame specification (or of the container: ELF, DWARF
// CFI, perf.data) the input breaks; `offset`, `value` and the indices in
// Error say where and what. Enumerator names are unique across layers (they
// are printed as the code's name).
#define SFRAME_FORMAT_CODES(X)                                                           \
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
  X(kUnusedBitsSet, "unused bits set in an FDE info byte or a FLEX control word")        \
  X(kZeroRepSize, "PC-mask FDE with a repetition block size of zero")                    \
  X(kFuncRangeOverflow, "function start + size overflows the address space")             \
  X(kFreStartNotIncreasing, "FRE start addresses are not strictly increasing")           \
  X(kFreStartOutsideFunction, "FRE start address is not inside the function")            \
  X(kFdeFresOverlap, "FDE's FREs overlap another FDE's FREs")                            \
  X(kFreCountMismatch, "sfh_num_fres disagrees with the sum of the FDEs' FRE counts")    \
  X(kFreLenMismatch, "sfh_fre_len disagrees with the bytes the FREs occupy")             \
  X(kFdesUnsorted, "FDEs not sorted by start address while SFRAME_F_FDE_SORTED is set")  \
  X(kFdesOverlap, "functions of two FDEs overlap")

#define SFRAME_LOOKUP_CODES(X)                                              \
  X(kPcNotCovered, "no FDE covers the PC")                                  \
  X(kPcBeforeFirstFre, "the PC lies before the first FRE of its function")

#define SFRAME_ELF_CODES(X)                                                   \
  X(kNoSFrameSection, "no SFrame section found")                              \
  X(kElfError, "ELF file could not be read")                                  \
  X(kBadRelocation, "relocation of the SFrame section could not be applied")

#define SFRAME_IO_CODES(X)                                                         \
  X(kIoError, "file could not be opened or read")                                  \
  X(kModuleMapFull, "the module map has no storage left")                          \
  X(kBadModuleRange, "module address range is empty")                              \
  X(kModulesOverlap, "module address range overlaps a module already in the map")

#define SFRAME_ENCODE_CODES(X)                                                                \
  X(kNotRepresentable, "the model holds something this SFrame version or ABI cannot encode")

#define SFRAME_PERF_CODES(X)                                                                \
  X(kPerfBadHeader, "not a perf.data file, or its header is malformed")                     \
  X(kPerfTruncated, "perf.data section or record runs past the end of the file")            \
  X(kPerfBadRecord, "perf.data record is malformed")                                        \
  X(kPerfUnsupported, "perf.data uses a feature this reader refuses (32-bit, big-endian)")  \
  X(kPerfDecompress, "a perf.data COMPRESSED record does not decompress (zstd)")

#define SFRAME_CFI_CODES(X)                                                                 \
  X(kBadCfi, "DWARF CFI record runs past the end of its section (.eh_frame/.debug_frame)")

// (layer enumerator, code enum, X-macro, name printed for the layer).
#define SFRAME_ERROR_LAYERS(X)                                  \
  X(kFormat, FormatErrc, SFRAME_FORMAT_CODES, "SFrame section") \
  X(kLookup, LookupErrc, SFRAME_LOOKUP_CODES, "lookup")         \
  X(kElf, ElfErrc, SFRAME_ELF_CODES, "ELF")                     \
  X(kIo, IoErrc, SFRAME_IO_CODES, "I/O")                        \
  X(kEncode, EncodeErrc, SFRAME_ENCODE_CODES, "encoder")        \
  X(kPerf, PerfErrc, SFRAME_PERF_CODES, "perf.data")            \
  X(kCfi, CfiErrc, SFRAME_CFI_CODES, "DWARF CFI")

/// The layer an error comes from; it says what Error::offset counts (see
/// the top of this file).
enum class ErrorLayer : std::uint8_t {
#define SFRAME_X(layer, type, codes, name) layer,
  SFRAME_ERROR_LAYERS(SFRAME_X)
#undef SFRAME_X
};

#define SFRAME_X_CODE(name, msg) name,
#define SFRAME_X(layer, type, codes, lname) \
  enum class type : std::uint8_t { codes(SFRAME_X_CODE) };
/// One code enum per layer: FormatErrc, LookupErrc, ElfErrc, IoErrc,
/// EncodeErrc, PerfErrc, CfiErrc (enumerators as in the X-macros above).
SFRAME_ERROR_LAYERS(SFRAME_X)
#undef SFRAME_X
#undef SFRAME_X_CODE

/// The layer of each code enum.
template <class E>
struct ErrcLayer;
#define SFRAME_X(layer, type, codes, lname)                                  \
  template <>                                                                \
  struct ErrcLayer<type> {                                                   \
    static constexpr ErrorLayer value = ErrorLayer::layer;                   \
  };
SFRAME_ERROR_LAYERS(SFRAME_X)
#undef SFRAME_X

/// One of the per-layer code enums.
template <class E>
concept ErrcEnum = std::is_enum_v<E> && requires { ErrcLayer<E>::value; };

/// Name of a layer, e.g. "ELF"; never null.
constexpr std::string_view layer_name(ErrorLayer l) noexcept {
  switch (l) {
#define SFRAME_X(layer, type, codes, lname) \
  case ErrorLayer::layer:                   \
    return lname;
    SFRAME_ERROR_LAYERS(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}

/// A code of any layer: the layer and the enumerator. Two bytes,
/// trivially copyable; converts implicitly from every code enum, so that
/// `code == ElfErrc::kElfError` compares the layer and the code.
class ErrorCode {
 public:
  template <ErrcEnum E>
  constexpr ErrorCode(E c) noexcept  // NOLINT(implicit)
      : layer_(ErrcLayer<E>::value), code_(static_cast<std::uint8_t>(c)) {}

  constexpr ErrorLayer layer() const noexcept { return layer_; }
  /// The enumerator's value within its layer's enum.
  constexpr std::uint8_t raw() const noexcept { return code_; }
  /// True when this is `c` (same layer, same code).
  template <ErrcEnum E>
  constexpr bool is(E c) const noexcept { return *this == ErrorCode(c); }
  /// The code as layer enum E, or nullopt when it belongs to another layer.
  template <ErrcEnum E>
  constexpr std::optional<E> as() const noexcept {
    if (layer_ != ErrcLayer<E>::value) return std::nullopt;
    return static_cast<E>(code_);
  }
  friend constexpr bool operator==(ErrorCode, ErrorCode) noexcept = default;

 private:
  friend struct Error;
  constexpr ErrorCode(ErrorLayer l, std::uint8_t c) noexcept : layer_(l), code_(c) {}
  ErrorLayer layer_;
  std::uint8_t code_;
};
static_assert(sizeof(ErrorCode) == 2 && std::is_trivially_copyable_v<ErrorCode>);

/// One error code with its identifier ("kBadMagic") and its short English
/// description. Both views are string literals, so NUL-terminated.
struct ErrorCodeInfo {
  ErrorCode code = FormatErrc{};
  std::string_view name;
  std::string_view message;
};

namespace detail {
#define SFRAME_X_CODE(name, msg) +1
#define SFRAME_X(layer, type, codes, lname) codes(SFRAME_X_CODE)
inline constexpr std::size_t kErrorCodeCount = 0 SFRAME_ERROR_LAYERS(SFRAME_X);
#undef SFRAME_X
#undef SFRAME_X_CODE
}  // namespace detail

/// Every code of every layer, in the order of SFRAME_ERROR_LAYERS and,
/// within a layer, of its enum: the one walk of the X-macros above.
/// describe(), code_name(), the C API's sframe_strerror() and the tests read
/// the codes here.
inline constexpr std::array<ErrorCodeInfo, detail::kErrorCodeCount> kErrorCodes = [] {
  std::array<ErrorCodeInfo, detail::kErrorCodeCount> all{};
  std::size_t i = 0;
#define SFRAME_X_CODE(name, msg) all[i++] = ErrorCodeInfo{E::name, #name, msg};
#define SFRAME_X(layer, type, codes, lname) \
  {                                         \
    using E = type;                         \
    codes(SFRAME_X_CODE)                    \
  }
  SFRAME_ERROR_LAYERS(SFRAME_X)
#undef SFRAME_X
#undef SFRAME_X_CODE
  return all;
}();

/// Short English description of an error code; never null.
constexpr std::string_view describe(ErrorCode code) noexcept {
  for (const ErrorCodeInfo& i : kErrorCodes)
    if (i.code == code) return i.message;
  return "unknown error";
}

/// Identifier of an error code, e.g. "kBadMagic" (unique across layers);
/// never null.
constexpr std::string_view code_name(ErrorCode code) noexcept {
  for (const ErrorCodeInfo& i : kErrorCodes)
    if (i.code == code) return i.name;
  return "unknown";
}

/// Marks "no FDE/FRE index applies" in Error.
inline constexpr std::uint32_t kNoIndex = 0xffffffffu;

/// A failure: the code (with its layer), where, and what. Trivially
/// copyable, 24 bytes: the offset shares a word with the layer and the
/// code (48 bits are enough for any byte offset in a file or section; a
/// larger one is stored as kMaxOffset).
struct Error {
  /// The largest offset an Error holds (2^48 - 1).
  static constexpr std::uint64_t kMaxOffset = (std::uint64_t{1} << 48) - 1;

  /// `c` is any layer's code (the enums convert to ErrorCode).
  constexpr Error(ErrorCode c, std::uint64_t off = 0, std::uint64_t val = 0, std::uint32_t fde_index = kNoIndex,
                  std::uint32_t fre_index = kNoIndex) noexcept
      : offset((off < kMaxOffset ? off : kMaxOffset) & kMaxOffset),
        layer_(static_cast<std::uint8_t>(c.layer())),
        code_(c.raw()),
        value(val),
        fde(fde_index),
        fre(fre_index) {}

  /// The code and its layer.
  constexpr ErrorCode code() const noexcept {
    return ErrorCode(static_cast<ErrorLayer>(layer_), static_cast<std::uint8_t>(code_));
  }
  constexpr ErrorLayer layer() const noexcept { return static_cast<ErrorLayer>(layer_); }
  /// True when the error is `c` (same layer, same code).
  template <ErrcEnum E>
  constexpr bool is(E c) const noexcept { return code() == ErrorCode(c); }

  /// Byte offset where the rule is broken; what it counts depends on the
  /// layer (top of this file). Read it as a value (`+e.offset` where a
  /// reference is wanted: it is a bit-field).
  std::uint64_t offset : 48;

 private:
  std::uint64_t layer_ : 8;
  std::uint64_t code_ : 8;

 public:
  /// The offending value read from the input (a count, a code, an address,
  /// an errno), if any.
  std::uint64_t value = 0;
  /// Index of the FDE concerned, or kNoIndex.
  std::uint32_t fde = kNoIndex;
  /// Index of the FRE within that FDE, or kNoIndex.
  std::uint32_t fre = kNoIndex;

  friend constexpr bool operator==(const Error& a, const Error& b) noexcept {
    return a.code() == b.code() && a.offset == b.offset && a.value == b.value && a.fde == b.fde && a.fre == b.fre;
  }
};
static_assert(std::is_trivially_copyable_v<Error>);
static_assert(sizeof(Error) == 24, "Error's documented size");

/// Short English description of `e`'s code; never null.
constexpr std::string_view describe(const Error& e) noexcept { return describe(e.code()); }
/// Identifier of `e`'s code; never null.
constexpr std::string_view code_name(const Error& e) noexcept { return code_name(e.code()); }

/// Wrapper that constructs the error alternative of Expected, like std::unexpected.
struct Unexpected {
  Error error;
};

/// Shorthand for building an error result.
constexpr Unexpected make_error(ErrorCode code, std::uint64_t offset, std::uint64_t value = 0, std::uint32_t fde = kNoIndex,
                                std::uint32_t fre = kNoIndex) noexcept {
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
  Expected(Unexpected u) : err_(u.error) {}  // NOLINT(implicit)
  bool has_value() const noexcept { return !err_; }
  explicit operator bool() const noexcept { return !err_; }
  const Error& error() const { assert(err_); return *err_; }

 private:
  std::optional<Error> err_;
};

}  // namespace sframe

#pragma GCC visibility pop
