// SPDX-License-Identifier: MIT
// sframepp: DWARF CFI (.eh_frame) as SFrame rows, through elfutils libdw.
//
// Each FDE's rows are read with dwarf_cfi_addrframe/dwarf_frame_info and
// translated to SFrame rules; what SFrame cannot say is reported with a
// reason rather than approximated.
#pragma once
// Exported from libsframepp.so, which builds with hidden visibility.
#pragma GCC visibility push(default)

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sframe/elf.hpp"
#include "sframe/encode.hpp"

namespace sframe::cfi {

/// Why a CFI row has no SFrame equivalent (in the version asked for).
enum class Reason : std::uint8_t {
  kNone,
  /// The CFA is a DWARF expression other than *(reg + offset) or reg + offset.
  kCfaExpression,
  /// The CFA is based on a register other than SP/FP (v3 FLEX only).
  kCfaRegister,
  /// The CFA is found by dereference (DRAP; v3 FLEX only).
  kCfaDeref,
  /// The RA is not saved at the ABI's fixed CFA offset (AMD64: CFA - 8).
  kRaNotAtFixedOffset,
  /// The RA or FP is kept in a register or found through an expression
  /// (v3 FLEX only).
  kRegisterRule,
  /// A rule SFrame cannot express in any version (e.g. val_expression).
  kUnsupportedRule,
  /// The machine has no SFrame ABI.
  kUnsupportedMachine,
  /// No CFI row covers part of the FDE.
  kNoRow,
  /// v2 only: the function starts too far from the SFrame section for the
  /// 32-bit PC-relative start field (v3's field is 64-bit).
  kTooFarForV2,
  /// The file's CFI would take more than kCfiWorkBase + kCfiWorkPerByte x
  /// (bytes of .eh_frame) to read (see for_each_function); this FDE and the
  /// rest of the file's are left out.
  kCfiTooLong,
};

/// Work bound of for_each_function, in bytes of CFI interpreted: reading
/// the row at a PC costs the bytes of its FDE and CIE records, so a function
/// of R rows costs R x (FDE + CIE bytes). The bound keeps a crafted file
/// linear; real files stay far below it.
inline constexpr std::uint64_t kCfiWorkBase = std::uint64_t{1} << 24;
/// See kCfiWorkBase.
inline constexpr std::uint64_t kCfiWorkPerByte = 512;

/// Short description of a Reason.
std::string_view describe(Reason r);

/// A CFI row turned into an SFrame row for [start, end).
struct Row {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  bool signal = false;
  FrameRow row;
  /// The row needs a FLEX FDE (v3).
  bool flex = false;
  /// kNone, or why the row cannot be said in SFrame at all.
  Reason reason = Reason::kNone;
};

/// One FDE of the CFI with its rows.
struct Function {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::vector<Row> rows;
};

/// Calls `fn` for every FDE of the file's .eh_frame that .eh_frame_hdr lists
/// (linked executables and shared objects), rows in PC order. Once the work
/// bound (kCfiWorkBase) is spent, each further FDE comes as one row with
/// Reason::kCfiTooLong spanning [start, next FDE's start). The Function
/// passed is reused between calls (no allocation per FDE). Errors: kElfError
/// (no .eh_frame/.eh_frame_hdr or unreadable CFI), kNotRepresentable
/// (machine without an SFrame ABI). An FDE libdw cannot read at its start
/// is not passed to `fn`; `unreadable`, when given, counts them.
Expected<void> for_each_function(const elf::ElfFile& file, const std::function<void(const Function&)>& fn,
                                 std::uint64_t* unreadable = nullptr);

/// All of them, collected.
Expected<std::vector<Function>> read_functions(const elf::ElfFile& file);

/// A function left out of the output, and why.
struct Skipped {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  Reason reason = Reason::kNone;
};

/// What `sframe gen` produced.
struct Generated {
  SectionSpec spec;
  std::vector<Skipped> skipped;
  std::uint64_t functions_in = 0;
  std::uint64_t flex_functions = 0;
  std::uint64_t plt_functions = 0;
};

/// Translates the CFI of `file` into an SFrame model of `version` (2 or 3)
/// for a section at `section_address`: one FDE per CFI FDE (FLEX in v3 when a
/// row needs it; left out of v2 with its reason), PC-mask FDEs for x86-64
/// .plt/.plt.sec/.plt.got as GNU ld makes them, the signal bit from the CIE's
/// 'S' augmentation, RA-undefined rows for outermost frames.
Expected<Generated> generate(const elf::ElfFile& file, Version version, std::uint64_t section_address);

/// The header generate() gives a section for `file` (ABI and byte order of
/// its machine, AMD64's fixed RA offset), without functions. Errors:
/// kNotRepresentable (machine without an SFrame ABI).
Expected<SectionSpec> section_header(const elf::ElfFile& file, Version version, std::uint64_t section_address);

/// generate() without the model: calls `fn` with each function it would
/// hold, by increasing start PC (the FunctionSpec is reused between calls),
/// and returns the header fields, counts and left-out functions with an empty
/// `spec.functions`. Feeding a SectionEncoder from `fn` encodes a section in
/// memory proportional to the output. Errors as generate().
Expected<Generated> for_each_generated(const elf::ElfFile& file, Version version, std::uint64_t section_address,
                                       const std::function<void(const FunctionSpec&)>& fn);

/// A PC where SFrame and DWARF recover the CFA, RA or FP differently.
struct Mismatch {
  std::uint64_t pc = 0;
  std::uint64_t function_start = 0;
  /// "CFA", "RA" or "FP".
  std::string_view what;
  FrameRow sframe;
  FrameRow dwarf;
};

/// A PC range DWARF CFI covers but the SFrame section does not.
struct Missing {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// Why SFrame could not hold it, when known (kNone: no reason found).
  Reason reason = Reason::kNone;
};

/// Result of comparing an SFrame section with the file's DWARF CFI.
struct Comparison {
  std::vector<Mismatch> mismatches;
  std::vector<Missing> missing;
  /// PCs compared (every row boundary of either side).
  std::uint64_t pcs_checked = 0;
  std::uint64_t functions_checked = 0;
  /// FDEs of the CFI's table that libdw could not read (not compared).
  std::uint64_t unreadable_fdes = 0;
};

/// Compares, at every PC where the SFrame rows or the CFI rows of `file`
/// change, the CFA, RA and FP recovery the two give (rules, not bytes; an
/// SFrame padding word counts as the header's fixed offset or "unchanged").
/// x86-64 PLT sections are left out (DWARF describes them by expression).
Expected<Comparison> compare(const elf::ElfFile& file, const Section& s);

/// The ABI of an ELF machine, if SFrame has one.
std::optional<Abi> abi_of(const elf::ElfInfo& info);

}  // namespace sframe::cfi

#pragma GCC visibility pop
