// SPDX-License-Identifier: MIT
// sframepp: DWARF CFI of an ELF file as SFrame rows. Generation reads it
// with our single-pass reader (sframe/unwind/cfi_reader.hpp) from the file's
// .eh_frame and .debug_frame; the comparison `verify` makes reads it through
// elfutils libdw, an independent reader. What SFrame cannot say is reported
// with a reason rather than approximated.
#pragma once
// Library: libsframepp-cfi (sframepp::cfi). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"

namespace sframe::cfi {

/// Work bound of libdw_functions, in bytes of CFI interpreted: reading
/// the row at a PC costs the bytes of its FDE and CIE records, so a function
/// of R rows costs R x (FDE + CIE bytes). The bound keeps a crafted file
/// linear; real files stay far below it.
inline constexpr std::uint64_t kCfiWorkBase = std::uint64_t{1} << 24;
/// See kCfiWorkBase.
inline constexpr std::uint64_t kCfiWorkPerByte = 512;

/// The CFI sections of `file` as read_cfi() takes them: .eh_frame (up to
/// its zero terminator) then .debug_frame, those present with FDE records
/// (a file may have both: .debug_frame for code built with
/// -fno-asynchronous-unwind-tables -g, .eh_frame for the C runtime's). The
/// spans point into `file`'s memory. Errors: kElfError (neither section, or
/// a relocatable object not relocated: its FDE addresses are relocations).
Expected<std::vector<CfiSource>> cfi_sources(const elf::ElfFile& file);

/// The x86-64 PLT sections of `file` (.plt, .plt.sec, .plt.got), for
/// for_each_generated(); empty for other machines.
std::vector<PltSection> plt_sections(const elf::ElfFile& file);

/// read_cfi() on the file's CFI sections (cfi_sources()). Errors: those of
/// cfi_sources() and read_cfi(), kNotRepresentable (machine without an
/// SFrame ABI). `unreadable`, when given, counts the FDEs left out.
Expected<void> for_each_function(const elf::ElfFile& file, const std::function<void(const Function&)>& fn,
                                 std::uint64_t* unreadable = nullptr);

/// All of them, collected.
Expected<std::vector<Function>> read_functions(const elf::ElfFile& file);

/// The reference reader, through elfutils libdw (dwarf_cfi_addrframe, one
/// call per row), independent of read_cfi(): `verify` and the differential
/// tests compare with it. FDE starts come from .eh_frame_hdr's table when
/// the file has one, else from read_cfi()'s listing; each start is looked
/// up in .eh_frame, then in .debug_frame. Rows are translated alike (the
/// same rule recognition as read_cfi()) and each function is cut at the
/// next FDE's start. libdw re-runs an FDE's program for every row, so once
/// kCfiWorkBase + kCfiWorkPerByte x (CFI bytes) is spent each further FDE
/// comes as one row with Reason::kCfiTooLong. An FDE libdw cannot read at
/// its start is not passed to `fn`; `unreadable`, when given, counts them.
/// Errors: kElfError (no CFI), kNotRepresentable (machine).
Expected<void> libdw_functions(const elf::ElfFile& file, const std::function<void(const Function&)>& fn,
                               std::uint64_t* unreadable = nullptr);

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

/// for_each_generated() without copying each function's rows into
/// RowSpecs: `fn` gets each function's shape and the reader's rows, as
/// for_each_translated() over the file's CFI sections gives them (see
/// TranslatedSink); SectionEncoder's accessor add() takes them in place.
/// Errors as for_each_generated().
Expected<Generated> for_each_translated(const elf::ElfFile& file, Version version, std::uint64_t section_address,
                                        const TranslatedSink& fn);

/// ModuleUnwind::generate() from the CFI of `file` (the module's file, or a
/// copy of its image): its CFI sections (cfi_sources()) and x86-64 PLT
/// sections (plt_sections()), for a section at link-time
/// `section_address`. The same outcome rules: with a usable own section,
/// only the functions it lacks, as `extra()`; at most once per module.
/// Errors: kNotRepresentable (machine without an SFrame ABI) and those of
/// cfi_sources(), recorded as the module's outcome
/// (ModuleUnwind::fail_generation(), reason "no usable .eh_frame (...)");
/// else those of ModuleUnwind::generate().
Expected<void> generate(ModuleUnwind& module, const elf::ElfFile& file, std::uint64_t section_address = 0);

/// ModuleUnwind::enable_on_demand() from `file`: .eh_frame_hdr and
/// .eh_frame by section header, the PLT sections. Errors:
/// kNotRepresentable (machine), those of cfi_sources(), kElfError (no
/// .eh_frame_hdr table, or the file also has .debug_frame FDEs, which the
/// table does not list: whole-module generation reads both), and those of
/// ModuleUnwind::enable_on_demand().
Expected<void> enable_on_demand(ModuleUnwind& module, const elf::ElfFile& file);

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

/// Result of comparing an SFrame section with the file's DWARF CFI. The
/// CfiClassCounts are our reader's, from the same CFI (all zero when it
/// could not read it).
struct Comparison : CfiClassCounts {
  std::vector<Mismatch> mismatches;
  std::vector<Missing> missing;
  /// PCs compared (every row boundary of either side).
  std::uint64_t pcs_checked = 0;
  std::uint64_t functions_checked = 0;
  /// FDEs of the CFI's table that libdw could not read (not compared),
  /// among them those of the CIEs counted in `cie_restore`.
  std::uint64_t unreadable_fdes = 0;
  /// PC ranges where the SFrame FDE is a signal frame without FREs and the
  /// DWARF CFI does not end the stack trace: SFrame gives no rules there, so
  /// nothing is compared. Spec v3 §1.2 makes a DEFAULT FDE without FREs an
  /// outermost frame; GNU as 2.47 writes one for a signal frame whose CFI
  /// SFrame cannot hold (e.g. .cfi_signal_frame with a
  /// DW_CFA_def_cfa_expression). `reason`: why SFrame could not hold the
  /// DWARF row, when known. (Such an FDE that is no signal frame is compared
  /// as an outermost frame.)
  std::vector<Missing> no_rules;
  /// PCs compared in no_rules (row boundaries of either side).
  std::uint64_t no_rules_pcs = 0;
  /// False when libdw was not run, because our reader found CFI on which
  /// libdw could allocate without bound (then nothing was compared, and
  /// large_regno, long_leb, truncated_fdes and ours_unreadable say why).
  bool libdw_run = true;
};

/// Compares, at every PC where the SFrame rows or the CFI rows of `file`
/// change, the CFA, RA and FP recovery the two give (rules, not bytes; an
/// SFrame padding word counts as the header's fixed offset or "unchanged").
/// x86-64 PLT sections are left out (DWARF describes them by expression).
/// libdw is not run on CFI it could allocate gigabytes on (libdw_run).
Expected<Comparison> compare(const elf::ElfFile& file, const Section& s);

/// One PC where read_cfi() and libdw give different rows.
struct RowDifference {
  std::uint64_t pc = 0;
  std::uint64_t function_start = 0;
  /// What differs: "row" (rules, signal, FLEX need or reason), "only ours"
  /// (libdw has no row there), "only libdw".
  std::string_view what;
  Row ours;
  Row libdw;
};

/// Result of compare_readers(). Where one of the CfiClassCounts is not zero
/// the readers may rightly differ: the rows are still compared (unless
/// `known_classes_only`), but a difference there is no error of either.
struct ReaderComparison : CfiClassCounts {
  /// Functions either reader gives (by start PC).
  std::uint64_t functions = 0;
  /// PCs compared: every row start of either reader, in either's functions.
  std::uint64_t rows_compared = 0;
  /// Of those, where the two disagree.
  std::uint64_t differing_rows = 0;
  /// FDEs libdw could not read at their start (not compared).
  std::uint64_t libdw_unreadable = 0;
  /// Rows of FDEs libdw gave up on (Reason::kCfiTooLong; not compared).
  std::uint64_t libdw_too_long = 0;
  /// False when libdw was not run, for the reasons Comparison::libdw_run
  /// gives (large_regno, long_leb, truncated_fdes, ours_unreadable say
  /// which); then nothing was compared.
  bool libdw_run = true;
  /// The first differences (at most the `max_examples` asked for).
  std::vector<RowDifference> examples;
};

/// Compares read_cfi()'s rows (for_each_function) with libdw's
/// (libdw_functions) at every row start of either, function by function:
/// the same translated row (FrameRow without ra_mangled, which libdw does
/// not report; signal; FLEX need; reason) must hold at each. Functions
/// libdw gives up on (kCfiTooLong) are not compared. `known_classes_only`:
/// when our reader counts any of the input classes where libdw is not the
/// truth (CfiClassCounts::any()), libdw is not run either (the fuzz
/// target, where such hostile CFI can keep libdw busy for seconds).
/// Errors: those of either reader.
Expected<ReaderComparison> compare_readers(const elf::ElfFile& file, std::size_t max_examples = 16,
                                           bool known_classes_only = false);

/// The ABI of an ELF machine, if SFrame has one.
std::optional<Abi> abi_of(const elf::ElfInfo& info);

}  // namespace sframe::cfi

#pragma GCC visibility pop
