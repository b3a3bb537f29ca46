// SPDX-License-Identifier: MIT
// sframepp: DWARF CFI (.eh_frame, .debug_frame) as SFrame rows, read by our
// own single-pass interpreter from plain bytes: no libelf, no libdw, no file.
//
// The reader lists the FDEs of a CFI section by walking its records (DWARF 5
// §6.4.1; LSB 5.0 "Exception Frames" for .eh_frame), so no .eh_frame_hdr is
// needed, runs each CIE's initial instructions and each FDE's program once
// (DWARF 5 §6.4.2), and turns every row of the table into an SFrame row
// (FLEX where only SFrame v3 can say it, else a named Reason). Time is linear
// in the bytes read; every count is bounded by them.
//
// The ELF front end (sframe/cfi/cfi.hpp) finds the section in a file; the
// in-process backtrace passes a module's loaded .eh_frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sframe/format/encode.hpp"
#include "sframe/format/error.hpp"
#include "sframe/format/format.hpp"
#include "sframe/format/section.hpp"

// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)
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
  /// Only the libdw reference reader (libdw_functions, used by `verify`):
  /// the file's CFI would take more than kCfiWorkBase + kCfiWorkPerByte x
  /// (bytes of .eh_frame) to read through libdw, which re-runs an FDE's
  /// program for every row; this FDE and the rest are not compared.
  kCfiTooLong,
};

/// Short description of a Reason.
std::string_view describe(Reason r);

/// A CFI row turned into an SFrame row for [start, end).
struct Row {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// Rows of one read (one read_cfi() call, one FdeReader) with the same
  /// nonzero value are equal in everything but start and end: one
  /// translation of one CFI state, copied. A consumer may deduplicate by
  /// it without comparing rows (RowIndex::Builder). 0: no such promise.
  /// (Here, and the flags after `row`, so that a Row stays 64 bytes on
  /// 64-bit hosts: every row is copied once from the reader's memo.)
  std::uint32_t translation = 0;
  FrameRow row;
  /// The CIE has the 'S' augmentation (a signal frame).
  bool signal = false;
  /// The row needs a FLEX FDE (v3).
  bool flex = false;
  /// kNone, or why the row cannot be said in SFrame at all.
  Reason reason = Reason::kNone;
};

/// One FDE of the CFI with its rows, which cover [start, end) without gaps.
struct Function {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::vector<Row> rows;
};

/// Which CFI section a CfiSource holds (they differ in CIE ids, CIE
/// pointers and the meaning of a zero length; DWARF 5 §6.4.1, LSB 5.0).
enum class CfiKind : std::uint8_t {
  kEhFrame,
  kDebugFrame,
};

/// The bytes of one CFI section and what decoding them needs. No file: the
/// bytes may be a section read from an ELF file or a loaded module's image.
struct CfiSource {
  /// The section; for .eh_frame it may run past the section's end (e.g. to
  /// the end of the containing PT_LOAD): reading stops at the zero
  /// terminator (a 4-byte zero length) or at the end of `bytes`.
  std::span<const std::byte> bytes;
  /// Address of bytes[0] (link-time for a file, or link-time for a loaded
  /// image read at runtime address minus load bias). DW_EH_PE_pcrel
  /// pointers are relative to it, so FDE PCs come out in the same space.
  std::uint64_t address = 0;
  CfiKind kind = CfiKind::kEhFrame;
  bool big_endian = false;
  /// Bytes of an address (DW_EH_PE_absptr, .debug_frame FDE fields): 4 or 8.
  unsigned address_size = 8;
  /// Bases of DW_EH_PE_textrel and DW_EH_PE_datarel pointers (GNU ld emits
  /// neither for x86-64, AArch64 or s390x). cfi_sources() leaves both 0:
  /// libgcc's unwinder sets them only where CRT_GET_RFIB_DATA is defined
  /// (i386 and a few others; unwind-dw2-fde-dip.c), so 0 on x86-64 and
  /// AArch64, and libdw uses 0 too (libdw/dwarf_getcfi_elf.c).
  std::uint64_t text_base = 0;
  std::uint64_t data_base = 0;
};

/// Counts of the CFI input classes on which our reader and libdw (the
/// reference reader of libsframepp-cfi: libdw_functions(), compare(),
/// compare_readers()) may rightly give different rows: libdw bugs and
/// limits, bounds of ours, and bytes the two read otherwise. read_cfi()
/// counts them (CfiStats); compare() and compare_readers() report them
/// (Comparison, ReaderComparison) and compare no row where any is counted
/// (compare_readers()'s `known_classes_only`, the fuzz target
/// fuzz_cfi_diff). Four of them (large_regno, long_leb, truncated_fdes,
/// ours_unreadable) keep libdw from being run at all: on such CFI it could
/// allocate without bound.
struct CfiClassCounts {
  /// FDEs whose range runs past the next FDE's start (cut there: ours
  /// answers a PC from the FDE that starts last before it), or overlaps an
  /// FDE left out as unreadable after its range was read. Linkers never
  /// make them; a reader looking up by PC (libdw, from whichever covering
  /// FDE its search tree finds) may answer such a PC from either FDE, so
  /// rows after the overlap starts may differ without either reader being
  /// wrong.
  std::uint64_t overlapping_fdes = 0;
  /// FDEs whose initial location, address range or augmentation data run
  /// past the end of their own record (counted in `ours_unreadable` too),
  /// or whose program ends inside a LEB128, DW_CFA_set_loc or
  /// DW_CFA_advance_loc1/2/4 operand (the function ends at its last complete
  /// row). libdw reads such fields and set_loc and advance_loc operands from
  /// the bytes after the record, and applies the part of a LEB128 it could
  /// read. Also CFA, RA and FP expression blocks that end inside an
  /// operand (ours leaves the rule out, libdw applies the partial LEB128).
  std::uint64_t truncated_fdes = 0;
  /// FDEs our reader leaves out because their CIE, their fields or the
  /// start of their program cannot be read (no row at their start), and
  /// records too short to hold their CIE id or pointer and one byte more (a
  /// CIE's version, an FDE's initial location), CIE or not (even a CIE no
  /// FDE refers to). libdw reads such bytes otherwise than ours, or bytes
  /// ours never interprets, where register numbers go unscreened; without
  /// .eh_frame_hdr it searches FDEs linearly and stops at such a record,
  /// losing the FDEs after it.
  std::uint64_t ours_unreadable = 0;
  /// AArch64 CIEs whose initial instructions do not start by defining the
  /// CFA, which then starts as the ABI says: SP + 0 (AADWARF64). libdw's
  /// ABI state says x30 + 0 instead (elfutils backends/aarch64_cfi.c), a
  /// libdw bug.
  std::uint64_t abi_default_cfa = 0;
  /// DW_CFA_restore and DW_CFA_restore_extended instructions in CIEs'
  /// initial instructions (GNU as 2.47 moves a function's leading
  /// .cfi_restore there). DWARF 5 §6.4.2.3 restores the rule the initial
  /// instructions assign, which there is the rule so far: ours reads them as
  /// no change; libdw refuses every FDE of such a CIE (elfutils
  /// libdw/cfi.c: "This can't be used in the CIE's own initial
  /// instructions").
  std::uint64_t cie_restore = 0;
  /// CIEs whose personality pointer ('P' augmentation) is encoded as a
  /// LEB128 (DW_EH_PE_uleb128 or DW_EH_PE_sleb128, LSB 5.0 §10.5.1). Ours
  /// reads the number to its last byte (bit 7 clear, DWARF 5 §7.6); libdw
  /// sizes it to its first byte with bit 7 set instead (elfutils
  /// libdw/encoded-value.h, encoded_value_size), so it reads the CIE's
  /// other augmentation fields, and with them its FDEs' addresses, from
  /// the wrong bytes, a libdw bug. No toolchain encodes a personality
  /// pointer so.
  std::uint64_t leb_personality = 0;
  /// CIEs whose augmentation string has a letter LSB 5.0 §10.6.1.1 does not
  /// define before one it does ("z?R"). The 'z' lets a reader skip the
  /// rest: ours stops at the unknown letter, as libgcc's unwinder does
  /// (unwind-dw2.c, extract_cie_info), so a later 'R' does not set the FDE
  /// pointer encoding; libdw skips the letter and reads the ones after it
  /// (elfutils libdw/cie.c).
  std::uint64_t unknown_augmentation = 0;
  /// Runs of zero length words in .debug_frame followed by a record. DWARF 5
  /// §6.4.1 gives a zero length no meaning there; we skip the word and read
  /// on (as binutils' readelf does), libdw takes it for the LSB's .eh_frame
  /// terminator and ends the section (elfutils libdw/dwarf_next_cfi.c).
  std::uint64_t debug_frame_zero_length = 0;
  /// Register rules (DW_CFA_offset and the like, DW_CFA_restore) for
  /// register numbers of 2^16 or more, which no ABI's DWARF numbering has.
  /// libdw's frame state holds a rule for every register up to the largest
  /// one named (elfutils libdw/cfi.c), some 16 bytes each: a few bytes of
  /// CFI make it allocate gigabytes.
  std::uint64_t large_regno = 0;
  /// DW_CFA_expression and DW_CFA_val_expression rules with an empty block
  /// for the RA or FP column. The CFA is pushed before the block runs (DWARF
  /// 5 §6.4.2), so the result is the CFA, as libgcc's unwinder computes it
  /// (execute_stack_op returns its initial entry); libdw drops the pushed
  /// CFA for an empty block (libdw/dwarf_getlocation.c) and reports the
  /// register undefined. No toolchain emits empty blocks.
  std::uint64_t empty_expression = 0;
  /// CIE and FDE programs and headers with a LEB128 of more than 10 bytes
  /// (DWARF 5 §7.6 sets no length limit), operands in the expression
  /// blocks of the CFA, RA and FP rules included. libdw decodes at most 10 bytes
  /// (elfutils libdw/memory-access.h: then UINT64_MAX) and reads the bytes
  /// after them as the next instructions, where a register number could
  /// make it allocate without bound; ours reads the whole number, and
  /// refuses one past 64 bits (the program ends at its last complete row;
  /// libdw keeps the low 64 bits), counted here too.
  std::uint64_t long_leb = 0;
  /// offset(N) and val_offset(N) register rules whose N (the factored
  /// offset times the data alignment factor, in 64-bit arithmetic) lies
  /// outside [-2^60, 2^60). libdw keeps a rule's value in a 61-bit signed
  /// bitfield (elfutils libdw/cfi.h, struct dwarf_frame_register) and
  /// reports such an offset cut to its low 61 bits; ours keeps all 64 (gen
  /// leaves the function out: SFrame offsets are 32-bit). No stack frame is
  /// an exabyte.
  std::uint64_t wide_offset = 0;
  /// Programs nesting DW_CFA_remember_state deeper than kMaxRememberDepth.
  /// DWARF 5 §6.4.2.4 sets no depth; ours bounds it (a fixed stack, usable
  /// without allocating) and ends the function at its last complete row,
  /// where libdw keeps a copy per level and reads on. A limit of ours on
  /// hostile input: compilers nest one or two.
  std::uint64_t deep_remember = 0;

  /// Whether any class above was counted.
  bool any() const noexcept {
    return overlapping_fdes != 0 || truncated_fdes != 0 || ours_unreadable != 0 || abi_default_cfa != 0 ||
           cie_restore != 0 || leb_personality != 0 || unknown_augmentation != 0 || debug_frame_zero_length != 0 ||
           large_regno != 0 || empty_expression != 0 || long_leb != 0 || wide_offset != 0 || deep_remember != 0;
  }
};

/// Counts of a read, beside the rows: the FDEs, and the input classes on
/// which libdw may give other rows (CfiClassCounts).
struct CfiStats : CfiClassCounts {
  /// FDE records found (before dropping duplicates and empty ones).
  std::uint64_t fdes = 0;
  /// Later FDEs with the start PC of an earlier one, dropped.
  std::uint64_t duplicates = 0;
};

/// Deepest DW_CFA_remember_state nesting an FDE may use; deeper nesting
/// makes the rest of its program unreadable (compilers nest one or two).
inline constexpr unsigned kMaxRememberDepth = 64;

/// Calls `fn` for every FDE of `src` with a range, by increasing start PC
/// (of FDEs with the same start, the first in the section), with every row
/// of its table: the CIE's initial instructions and the FDE's program run
/// once (DWARF 5 §6.4.2, §6.4.3), every DW_CFA_* of DWARF 5 plus
/// DW_CFA_GNU_args_size, DW_CFA_GNU_negative_offset_extended and (AArch64)
/// DW_CFA_AARCH64_negate_ra_state, which sets FrameRow::ra_mangled. A
/// function ends at its FDE's end or at the next FDE's start, whichever
/// comes first; a program that turns unreadable part way ends the function
/// at its last complete row. The Function passed is reused between calls
/// (no allocation per FDE or per row once grown). Rows are translated for
/// `abi` as SFrame says them (see Row). Errors: kBadCfi (a record's length
/// runs past the end of `bytes`, at that record's offset; the address size
/// is not 4 or 8).
Expected<void> read_cfi(const CfiSource& src, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats = nullptr);

/// read_cfi() over several sections of one module at once (a linked file
/// built with -fno-asynchronous-unwind-tables -g has .debug_frame for its
/// own code and .eh_frame for the C runtime's): their FDEs are merged by
/// start PC; of FDEs with the same start, the earlier source's wins.
Expected<void> read_cfi(std::span<const CfiSource> srcs, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats = nullptr);

/// Reads the FDEs of one CFI section one at a time, by the byte offset of
/// their record (e.g. from .eh_frame_hdr's table; LSB 5.0 "Exception
/// Frames"), with the same interpreter and translation as read_cfi(): the
/// on-demand form of it. Each CIE is parsed once and kept. Not thread-safe.
class FdeReader {
 public:
  /// `src.bytes` must outlive the reader (the reader keeps views into
  /// them).
  FdeReader(const CfiSource& src, Abi abi);
  FdeReader(FdeReader&&) noexcept;
  FdeReader& operator=(FdeReader&&) noexcept;
  ~FdeReader();

  /// The FDE whose record starts at byte `offset` of the source, with every
  /// row of its table (as read_cfi() gives it), cut at `stop` when `stop`
  /// lies inside its range (read_cfi() cuts a function at the next FDE's
  /// start). The Function stays valid until the next read(). Errors:
  /// kBadCfi with the record's offset: outside the section, its length
  /// runs past the end, it is a CIE or the zero terminator, its CIE or
  /// fields cannot be read, or its program gives no row at its start.
  Expected<const Function*> read(std::uint64_t offset, std::uint64_t stop = UINT64_MAX);
  const CfiSource& source() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One FDE record of a CFI section as its header and fields say it (DWARF 5
/// §6.4.1, §7.4; LSB 5.0 §10.6.1), decoded as read_cfi() decodes it but
/// without running its program.
struct FdeRecord {
  /// Byte offset of the record in the section, and its bytes (the length
  /// field included).
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  /// The same for the CIE its CIE pointer leads to (size 0 when the
  /// pointer leads outside the section or to no readable length).
  std::uint64_t cie_offset = 0;
  std::uint64_t cie_size = 0;
  /// Its CIE and its initial location and address range read (read_cfi()
  /// leaves the FDE out otherwise, counted in CfiStats::ours_unreadable).
  bool readable = false;
  /// With `readable`: its PCs [start, end) (end == start: no range).
  std::uint64_t start = 0;
  std::uint64_t end = 0;
};

/// Calls `fn` for every FDE record of `src` in section order, as read_cfi()
/// finds them (a .eh_frame ends at its zero terminator), and the records
/// too short to hold a CIE pointer and one byte more, which are neither CIE
/// nor FDE, as unreadable ones. `abi` is the one the CIEs' initial
/// instructions are read for.
/// Errors: those of read_cfi() (kBadCfi: a record's length runs past the
/// end of `bytes`, at that record's offset; the address size is not 4 or
/// 8); the records before it have been passed to `fn`.
Expected<void> for_each_fde_record(const CfiSource& src, Abi abi, const std::function<void(const FdeRecord&)>& fn);

/// A .eh_frame_hdr section (LSB 5.0 "Exception Frames", .eh_frame_hdr)
/// decoded, its binary search table read in place: where .eh_frame lies
/// and which FDE starts where. The fields' DW_EH_PE pointers are decoded by
/// the reader's one pointer decoder (that of CIEs and FDEs).
struct EhFrameHdr {
  /// The section, its link-time address and byte order (as given to
  /// read_eh_frame_hdr()); the view must outlive the object.
  std::span<const std::byte> bytes;
  std::uint64_t address = 0;
  bool big_endian = false;
  /// Link-time address of .eh_frame (the decoded eh_frame_ptr).
  std::uint64_t eh_frame = 0;
  /// False when the header omits the table (fde_count or table encoding
  /// DW_EH_PE_omit, as ld writes it when it cannot read an input's
  /// .eh_frame): readers search .eh_frame itself then. `count` is 0.
  bool has_table = false;
  /// Entries of the table.
  std::uint32_t count = 0;
  /// Byte offset of the table in `bytes`.
  std::size_t table = 0;

  /// Link-time initial location of entry `i` (< count), and the link-time
  /// address of its FDE record. Entries are sorted by initial location in
  /// what linkers write; nothing here relies on it.
  std::uint64_t start(std::uint32_t i) const noexcept;
  std::uint64_t fde(std::uint32_t i) const noexcept;
};

/// Decodes the .eh_frame_hdr `hdr` at link-time `address` in the byte order
/// given: version 1; eh_frame_ptr absolute, pcrel or datarel (relative to
/// the section's start), udata4/sdata4/udata8/sdata8/absptr (8 bytes), not
/// indirect; fde_count udata4 or sdata4, absolute; the table datarel|sdata4
/// (what ld, gold, lld and mold write, and the only table libgcc's and
/// libunwind's unwinders search). `with_table` false: the header and
/// eh_frame_ptr only (count 0, has_table false), for a reader that only
/// wants .eh_frame. Errors: ElfErrc::kElfError with the byte offset at
/// fault: 0 (shorter than 4 bytes, version not 1; value: the version), 1, 2
/// or 3 (the eh_frame_ptr, fde_count or table encoding is not one of those;
/// value: the encoding), 4 (eh_frame_ptr runs past the end), the count's
/// offset (it runs past the end), the table's offset (count entries run
/// past the end; value: the count).
Expected<EhFrameHdr> read_eh_frame_hdr(std::span<const std::byte> hdr, std::uint64_t address, bool big_endian,
                                       bool with_table = true);

/// A function left out of the output, and why.
struct Skipped {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  Reason reason = Reason::kNone;
};

/// A range of PCs [start, end).
struct PcRange {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
};

/// What `sframe gen` produced.
struct Generated {
  SectionSpec spec;
  std::vector<Skipped> skipped;
  std::uint64_t functions_in = 0;
  std::uint64_t flex_functions = 0;
  std::uint64_t plt_functions = 0;
  /// The ranges of the FDEs whose CIE has the 'S' augmentation (signal
  /// trampolines such as glibc's __restore_rt), whether they went into the
  /// section or were left out: an unwinder's signal frames.
  std::vector<PcRange> signal_ranges;
};

/// An x86-64 PLT section (.plt, .plt.sec, .plt.got) as the section headers
/// give it: ld's SFrame PC-mask FDEs replace its DWARF expressions.
struct PltSection {
  std::string_view name;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  /// SHF_EXECINSTR is set.
  bool executable = true;
};

/// The header a generated section gets for `abi` (its byte order, AMD64's
/// fixed RA offset of -8), without functions.
SectionSpec section_header(Abi abi, Version version, std::uint64_t section_address);

/// The file-free generation core of `sframe gen`: translates the CFI of
/// `srcs` (merged as read_cfi() does) into SFrame functions of `version` (2 or 3) for a section at
/// `section_address`, calling `fn` with each by increasing start PC (the
/// FunctionSpec is reused between calls): one FDE per CFI FDE (FLEX in v3
/// when a row needs it; left out of v2 with its reason), PC-mask FDEs for
/// the x86-64 `plts` as GNU ld makes them (CFI FDEs inside them are
/// dropped), the signal bit from the CIE's 'S' augmentation, RA-undefined
/// rows for outermost frames. Returns the header fields, counts and
/// left-out functions with an empty `spec.functions`. Errors: those of
/// read_cfi().
Expected<Generated> for_each_generated(std::span<const CfiSource> srcs, Abi abi, Version version,
                                       std::uint64_t section_address, std::span<const PltSection> plts,
                                       const std::function<void(const FunctionSpec&)>& fn);

/// What for_each_translated() gives per function: its `shape` (start PC,
/// size, PC and FDE types, signal bit) and, for a function translated from
/// CFI, the reader's Function it comes from, whose rows are its rows (row k
/// starts cfi->rows[k].start - cfi->start bytes into it; shape.rows is
/// empty). For a PLT function `cfi` is null and shape.rows holds its rows.
/// Both are valid during the call only.
using TranslatedSink = std::function<void(const FunctionSpec& shape, const Function* cfi)>;

/// for_each_generated() without copying each function's rows into
/// RowSpecs: the same functions, in the same order, with the reader's rows
/// (RowIndex::Builder takes them in place). Errors as for_each_generated().
Expected<Generated> for_each_translated(std::span<const CfiSource> srcs, Abi abi, Version version,
                                        std::uint64_t section_address, std::span<const PltSection> plts,
                                        const TranslatedSink& fn);

/// for_each_generated() for one CFI function (e.g. from FdeReader::read(),
/// the on-demand path): calls `fn` with the SFrame function it becomes, by
/// the same translation (or, x86-64 without `plts`, with GNU ld's PC-mask
/// functions when its rows are ld's .plt FDE's; nothing when it lies in one
/// of `plts`: see plt_functions_at()). The function left out is listed in
/// `skipped` with its reason. No error: reading is FdeReader's.
Generated generate_function(const Function& cfi, Abi abi, Version version, std::uint64_t section_address,
                            std::span<const PltSection> plts, const std::function<void(const FunctionSpec&)>& fn);

/// The PC-mask functions for_each_generated() makes for the x86-64 PLT
/// section of `plts` that holds link-time `pc` (empty when none does).
std::vector<FunctionSpec> plt_functions_at(std::span<const PltSection> plts, std::uint64_t pc);

/// for_each_generated() collected into `spec.functions`.
Expected<Generated> generate(std::span<const CfiSource> srcs, Abi abi, Version version,
                             std::uint64_t section_address, std::span<const PltSection> plts = {});

}  // namespace sframe::cfi
#pragma GCC visibility pop
