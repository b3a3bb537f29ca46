// SPDX-License-Identifier: MIT
// sframepp (private): one CFI row's rules, as either reader recognized them,
// turned into an SFrame row. Shared by our reader (cfi_reader.cpp) and the
// libdw reference (cfi.cpp), so both translate alike and a differential
// comparison of their rows compares what they read. Default visibility:
// libsframepp-unwind.so (the reader) exports it for libsframepp-cfi.so (the
// libdw reference); namespace detail: no API promise.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sframe/unwind/cfi_reader.hpp"

#pragma GCC visibility push(default)

namespace sframe::cfi::detail {

/// A register's rule, recognized (DWARF 5 §6.4.1 register rules).
struct Loc {
  enum class Kind : std::uint8_t { kUndefined, kSame, kRule, kUnknown } kind = Kind::kUnknown;
  Rule rule;  // for kRule
};

/// DWARF register number of the return-address column per ABI.
std::uint16_t ra_column(Abi abi);

/// The offset fits an SFrame data word (at most 32 bits).
inline bool fits32(std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/// The SFrame row for a CFI row whose CFA is `cfa` (nullopt: an expression
/// SFrame cannot say) and whose RA and FP columns are `ra` and `fp`, for
/// `abi` (fixed_ra: the header's fixed RA offset, AMD64 -8, else 0). The
/// range fields are left 0.
Row translate(const std::optional<Rule>& cfa, const Loc& ra, const Loc& fp, bool signal, bool ra_mangled, Abi abi,
              std::int8_t fixed_ra);

}  // namespace sframe::cfi::detail

namespace sframe::cfi::detail {

/// The FunctionSpec for_each_generated() gives for a function
/// for_each_translated() gave as `shape` and `cfi`: into `out` (its rows'
/// capacity reused), the reader's rows copied as RowSpecs.
void fill_rows(const FunctionSpec& shape, const Function& cfi, FunctionSpec& out);

/// Why a function cannot go into a section (kNone: it can): a row no SFrame
/// version can hold, else (without FLEX FDEs) a row that needs FLEX.
Reason blocking_reason(const Function& fn, bool flex_ok);

/// The x86-64 PLT sections' address ranges, looked up once per file rather
/// than by name for every function.
class PltRanges {
 public:
  explicit PltRanges(std::span<const PltSection> plts);
  bool contains(std::uint64_t pc) const;

 private:
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;
};

}  // namespace sframe::cfi::detail
#pragma GCC visibility pop
