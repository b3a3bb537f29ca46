// SPDX-License-Identifier: MIT
// The rows GNU objdump printed for a corpus file, parsed into rules the
// unwinder tests build stack images from. This is the tests' independent
// truth: it comes from GNU's text, never from sframepp's decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sframe_test {

/// One column of an objdump row ("sp+16", "c-48[s]", "(fp-40)", "r17+0", ...).
struct GoldenLoc {
  enum class Kind {
    kUnchanged,  // "u"
    kFixed,      // "f": the header's fixed offset
    kPadWord,    // "U": FLEX padding (the fixed offset if any, else unchanged)
    kCfaSlot,    // "c+N": saved at CFA + N
    kRegValue,   // "sp+N", "fp+N", "rK+N": register + N
    kRegDeref,   // "(fp-40)": *(register + N)
  };
  Kind kind = Kind::kUnchanged;
  /// "sp" and "fp" are given as -1 and -2; "rK" as K.
  int reg = 0;
  std::int64_t offset = 0;
  bool mangled = false;  // "[s]"
};
inline constexpr int kGoldenSp = -1;
inline constexpr int kGoldenFp = -2;

struct GoldenRow {
  std::uint64_t start = 0;  // absolute start PC (or offset in the block for PC-mask FDEs)
  GoldenLoc cfa, fp, ra;
};

struct GoldenFunc {
  std::uint64_t pc = 0;
  std::uint64_t size = 0;
  bool mask = false;
  bool flex = false;
  std::vector<GoldenRow> rows;
  /// [begin, end) of row i: absolute PCs (for PC-mask FDEs, offsets).
  std::uint64_t row_end(std::size_t i) const {
    return i + 1 < rows.size() ? rows[i + 1].start : (mask ? 0 : pc + size);
  }
};

struct GoldenSection {
  int fixed_ra = 0;  // "CFA fixed RA offset", 0 if absent
  int fixed_fp = 0;
  std::vector<GoldenFunc> funcs;
};

/// Parses `objdump --sframe` text. Throws std::runtime_error on a column it
/// does not understand.
GoldenSection parse_golden_section(const std::string& text);
GoldenLoc parse_golden_loc(const std::string& token);

}  // namespace sframe_test
