// SPDX-License-Identifier: MIT
// sframepp: one module's unwind information, built the same way for the
// in-process backtrace (sframe::backtrace_init) and for `sframe stack`
// (sframe::process::LoadedModules).
//
// The core needs no file: the module's own SFrame section bytes, the bytes
// of its .eh_frame_hdr and of its executable segments. From them it builds
// the section with its accelerator (a RowIndex when validate(kStrict)
// passes, else an FdeIndex), finds the signal trampolines (x86-64
// rt_sigreturn code), and decides whether SFrame must be generated from
// .eh_frame: only when .eh_frame_hdr lists an FDE whose start PC the own
// section does not cover (a module whose own section covers every function
// generates nothing). Generation reads CFI bytes with our own reader
// (ModuleUnwind::generate: from a loaded .eh_frame, no file), keeping only
// the functions the own section lacks. The forms that read the module's
// file are free functions of libsframepp-cfi (sframe/cfi/cfi.hpp:
// cfi::generate(ModuleUnwind&, const elf::ElfFile&), cfi::enable_on_demand(
// ModuleUnwind&, const elf::ElfFile&)). File-based extras (symbols, debug
// files) are layered on top by the remote side.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind; the deprecated ElfFile
// member overloads: libsframepp-cfi). Exported from it, which builds with
// hidden visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sframe/format/format.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/unwind/unwind.hpp"

// Declared only, for the deprecated member overloads that take an ELF file
// (defined in libsframepp-cfi); an unwind header includes no header of a
// library above it.
namespace sframe::elf {
class ElfFile;
}  // namespace sframe::elf

namespace sframe::cfi {

/// An SFrame section held in memory with its lookup accelerators. Moving it
/// keeps the views valid (they point into the vector's heap buffer).
struct UnwindSection {
  std::vector<std::byte> bytes;
  /// Set when `bytes` parse and pass validate(kLenient).
  std::optional<Section> section;
  /// Built for every usable section, unless assign() was told to leave it
  /// out where `rows` is built (the RowIndex answers every lookup then).
  std::optional<FdeIndex> index;
  /// Built when the section passes validate(kStrict) (8 bytes per FRE): a
  /// lookup reads one bucket and one row.
  std::optional<RowIndex> rows;
  /// With `rows`: the cacheable form of each of its rows
  /// (detail::compile_rows), for Module::compact_rows.
  std::vector<CompactRule> compact_rows;

  /// Takes `bytes` as a section at link-time `address` and builds the
  /// accelerators; with `fde_index_with_rows` false, no FdeIndex beside a
  /// RowIndex (the FdeIndex's entries, about 20 bytes per FDE, saved). Errors: the parse,
  /// validate(kLenient) or FdeIndex error (the object is then empty).
  /// `row_index` false: no RowIndex (an FdeIndex only), for the
  /// one-function sections of per-FDE generation, looked up a few times
  /// each and then through the walker's rule cache.
  Expected<void> assign(std::vector<std::byte> bytes, std::uint64_t address, bool fde_index_with_rows = true,
                        bool row_index = true);
  /// A RowIndex made by `built` (RowIndex::Builder::finish()) with no
  /// encoded section: `bytes` and `section` then hold a section of `abi`
  /// and `version` at `address` with no FDE (its header: the ABI and fixed
  /// offsets the unwinder reads); no FdeIndex. For the in-process
  /// backtrace, whose rows come from our own translator. Errors: those of
  /// finish() (the object is then empty).
  Expected<void> assign_rows(RowIndex::Builder& built, Abi abi, Version version, std::uint64_t address);
  bool usable() const noexcept { return section.has_value() && (index.has_value() || rows.has_value()); }
  /// Whether an FDE of the section covers link-time `pc`, or one exists
  /// whose rows start later (the function is the section's). Needs usable().
  bool covers(std::uint64_t pc) const noexcept;
};

/// Bytes of one executable segment, at its link-time address.
struct CodeBytes {
  std::uint64_t address = 0;
  std::span<const std::byte> bytes;
};

/// What the core reads; no file needed. Every span is copied or scanned
/// during ModuleUnwind::build() and need not outlive it.
struct ModuleImage {
  /// The module's own SFrame section (PT_GNU_SFRAME, .sframe) and its
  /// link-time address; empty when it has none.
  std::span<const std::byte> sframe;
  std::uint64_t sframe_address = 0;
  /// The module's .eh_frame_hdr (PT_GNU_EH_FRAME) and its link-time
  /// address; empty when it has none (then .eh_frame lists no FDE that
  /// generation could read).
  std::span<const std::byte> eh_frame_hdr;
  std::uint64_t eh_frame_hdr_address = 0;
  /// The executable segments, scanned for signal trampolines.
  std::vector<CodeBytes> code;
  /// The module has CFI records (.eh_frame or .debug_frame). Without
  /// .eh_frame_hdr (GNU ld writes none for a static executable; it never
  /// lists .debug_frame) its FDEs are not listed: generation then reads
  /// the sections whole, when a PC first needs it.
  bool has_cfi = false;
};

/// What per-FDE (on-demand) generation reads: the module's .eh_frame_hdr
/// (its binary search table finds a PC's FDE) and .eh_frame, with the
/// x86-64 PLT sections when known. The bytes must outlive the ModuleUnwind
/// (e.g. views into its ElfFile, which the owner keeps beside it).
struct OnDemandSource {
  std::span<const std::byte> eh_frame_hdr;
  std::uint64_t eh_frame_hdr_address = 0;
  CfiSource eh_frame;
  Abi abi = Abi::kAmd64Little;
  std::vector<PltSection> plts;
};

/// SFrame generated for one FDE of .eh_frame (or one x86-64 PLT section):
/// a section holding its function(s), covering link-time [start, end).
struct GeneratedFde {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  UnwindSection section;
};

/// How a module's unwind information is built.
struct ModuleUnwindOptions {
  /// Version of generated sections (kV2 or kV3).
  Version version = Version::kV3;
  /// Ignore the module's own section (generate everything; tests).
  bool ignore_own = false;
  /// Keep an FdeIndex beside each RowIndex (UnwindSection::assign), for
  /// callers that read `index` (the remote side's LoadedModule). The
  /// in-process backtrace looks up through the RowIndex alone.
  bool fde_index_with_rows = true;
  /// Build a RowIndex for each section (UnwindSection::rows, lookups
  /// through it). False: an FdeIndex only, for callers that read the
  /// sections FDE by FDE and never look a PC up through this object
  /// (`sframe record`'s in-kernel tables); generate() then encodes a
  /// section whatever fde_index_with_rows says.
  bool row_index = true;
  /// Per-FDE generation (generate_for_pc()) puts each FDE's rows straight
  /// into a RowIndex (RowIndex::Builder, as generate() does without an
  /// FdeIndex): no encoded section to write, check and decode again, no
  /// FdeIndex, and every lookup through the RowIndex's compiled rows. Off:
  /// an encoded section with an FdeIndex (and a RowIndex beside an own
  /// section). For callers that look generated FDEs up only through the
  /// unwinder's Module (`sframe perf script`).
  bool per_fde_rows = false;
  /// With fde_index_with_rows off (rows straight into a RowIndex) and a
  /// usable own section that lacks functions: generate() puts the own
  /// section's functions and the generated ones into one RowIndex, which
  /// becomes primary() (extra() stays empty, source() kNative), so that a
  /// lookup reads one index whichever of the two a function comes from.
  /// The rules are those of primary() + extra(): generated functions are
  /// only those the own section lacks. Where the two overlap (a RowIndex
  /// cannot hold that) or the own section's functions do not go into a
  /// RowIndex, they stay apart as without this option. For the in-process
  /// backtrace, whose walk otherwise looks a function the own section
  /// lacks (e.g. a `main` with CFI gas gives no SFrame FDE) up twice.
  bool merge_own = false;
};

/// Where a module's primary unwind information comes from: deprecated
/// name of sframe::ModuleSource (sframe/unwind/modules.hpp), the one enum.
using ModuleSource = sframe::ModuleSource;
/// sframe::to_string(ModuleSource): "native", "generated", "none".
using sframe::to_string;

/// Start PCs (link-time) of the FDEs a .eh_frame_hdr lists, from its binary
/// search table (encoding DW_EH_PE_datarel|sdata4, what linkers write), in
/// host byte order (read_eh_frame_hdr()). `address` is the link-time
/// address of `hdr`. Errors: those of read_eh_frame_hdr() (kElfError: too
/// short, unknown version or encoding, at the byte at fault).
Expected<std::vector<std::uint64_t>> eh_frame_hdr_starts(std::span<const std::byte> hdr, std::uint64_t address);

/// The address of .eh_frame that a .eh_frame_hdr at link-time `address`
/// points to (its eh_frame_ptr: pcrel, datarel or absolute, 4 or 8 bytes,
/// in host byte order; LSB 5.0 "Exception Frames"), as libgcc and libunwind
/// find a loaded module's .eh_frame; the table is not read. Errors: those
/// of read_eh_frame_hdr() for the header (kElfError: too short, unknown
/// version or encoding; the offset of the field).
Expected<std::uint64_t> eh_frame_hdr_eh_frame(std::span<const std::byte> hdr, std::uint64_t address);

/// One entry of a .eh_frame_hdr binary search table (link-time addresses).
struct EhFrameHdrEntry {
  /// Index in the table.
  std::uint32_t index = 0;
  /// The FDE's initial location and the address of its record.
  std::uint64_t start = 0;
  std::uint64_t fde = 0;
  /// The next entry's initial location (UINT64_MAX for the last entry).
  std::uint64_t next_start = UINT64_MAX;
};

/// The table entry for link-time `pc` by binary search (LSB 5.0 "Exception
/// Frames": entries sorted by initial location; an unsorted table gives some
/// entry or none, never a read outside `hdr`), i.e. the last entry whose
/// start is at or below `pc`. `address` is the link-time address of `hdr`.
/// Errors: ElfErrc::kElfError as eh_frame_hdr_starts(); LookupErrc::kPcNotCovered (value: pc)
/// when `pc` lies below every entry or the table is empty.
Expected<EhFrameHdrEntry> eh_frame_hdr_lookup(std::span<const std::byte> hdr, std::uint64_t address, std::uint64_t pc);

/// Link-time ranges (1 byte each, at the `mov $15,%rax`) of x86-64
/// rt_sigreturn sequences (`mov $15,%rax; syscall`, glibc's __restore_rt)
/// in `code`, at most `limit` of them.
std::vector<AddressRange> find_sigreturn_code(std::span<const CodeBytes> code, std::size_t limit = 16);

/// One module's unwind information.
class ModuleUnwind {
 public:
  /// The in-memory core: copies and indexes the own section (ignored when
  /// it does not pass validate(kLenient); `reason` says so), finds the
  /// trampolines, and lists the .eh_frame_hdr FDEs the own section lacks.
  /// Never fails: see source(), reason(), needs_generation().
  static ModuleUnwind build(const ModuleImage& image, const ModuleUnwindOptions& opt = {});

  /// .eh_frame has FDEs the own section does not cover (all of them when
  /// there is no usable own section) and generate() has not run yet.
  bool needs_generation() const noexcept { return pending_ > 0 && !generated_once_; }
  /// FDEs of .eh_frame_hdr whose start the own section lacks.
  std::size_t missing_fdes() const noexcept { return pending_; }

  /// Generates SFrame without a file (no libelf, no libdw, no I/O): from
  /// the CFI sections `srcs` of a module of `abi` (e.g. its loaded
  /// .eh_frame, found through PT_GNU_EH_FRAME's eh_frame_ptr, with
  /// CfiSource::address its link-time address and the bytes running to the
  /// end of its PT_LOAD: reading stops at the zero terminator), and its
  /// x86-64 PLT sections when known (none: PLT code keeps the CFI's own
  /// FDEs), for a section at link-time `section_address`. With a usable own
  /// section, only the functions it lacks (start or last byte not covered)
  /// are kept, as `extra()`; else the whole section becomes primary(). Runs
  /// at most once (later calls, and fail_generation(), return the first
  /// outcome). The module's file: cfi::generate(ModuleUnwind&, const
  /// elf::ElfFile&, std::uint64_t) (sframe/cfi/cfi.hpp). Errors: those of
  /// cfi::for_each_generated() and encode(); kElfError when the result does
  /// not parse or index.
  Expected<void> generate(std::span<const CfiSource> srcs, Abi abi, std::uint64_t section_address = 0,
                          std::span<const PltSection> plts = {});
  /// The one-section form of the above.
  Expected<void> generate(const CfiSource& src, Abi abi, std::uint64_t section_address = 0) {
    return generate(std::span<const CfiSource>(&src, 1), abi, section_address);
  }
  /// Records `error` as generate()'s outcome without generating, for a
  /// caller that could not gather the CFI sources generate() reads (e.g.
  /// cfi::generate(ModuleUnwind&, const elf::ElfFile&, std::uint64_t) when
  /// the file has no usable .eh_frame): appends "; " and `why` to reason().
  /// At most once, as generate(): after either has run, nothing changes and
  /// the first outcome is returned. Returns `error` when it records it.
  Expected<void> fail_generation(const Error& error, std::string_view why);

  /// Deprecated (kept for the 0.2 series): cfi::generate(*this, file,
  /// section_address) of libsframepp-cfi (sframe/cfi/cfi.hpp), which
  /// defines this overload.
  Expected<void> generate(const elf::ElfFile& file, std::uint64_t section_address = 0);

  /// Turns on per-FDE generation (generate_for_pc()) from `src`, used by
  /// `sframe perf script` and `sframe stack` instead of generate(): a PC's
  /// FDE is found through .eh_frame_hdr's table, read alone with FdeReader
  /// (its CIE parsed once) and translated as generate() translates it
  /// (generate_function()). The in-process backtrace keeps generate(): a
  /// signal handler never generates. Errors: kElfError (the table is
  /// missing, or not in the encoding linkers write; see
  /// eh_frame_hdr_starts()): then generate() stays the way.
  /// The module's file: cfi::enable_on_demand(ModuleUnwind&, const
  /// elf::ElfFile&) (sframe/cfi/cfi.hpp).
  Expected<void> enable_on_demand(OnDemandSource src);
  /// Deprecated (kept for the 0.2 series): cfi::enable_on_demand(*this,
  /// file) of libsframepp-cfi (sframe/cfi/cfi.hpp), which defines this
  /// overload.
  Expected<void> enable_on_demand(const elf::ElfFile& file);
  /// enable_on_demand() succeeded.
  bool on_demand() const noexcept { return on_demand_ != nullptr; }
  /// SFrame for the FDE covering link-time `pc` (only for PCs the own
  /// section does not cover: the caller asks after it found none), generated
  /// on first need and kept per FDE for the object's life; an x86-64 PLT
  /// section's PC-mask functions as generate() makes them. Errors (the
  /// reason for that PC; an unreadable FDE's is kept and returned again):
  /// LookupErrc::kPcNotCovered (no FDE covers `pc`), CfiErrc::kBadCfi (the
  /// FDE's record cannot be read; its offset), EncodeErrc::kNotRepresentable (its rows have no SFrame form;
  /// value: the cfi::Reason), encode errors; kElfError when not on_demand().
  Expected<const GeneratedFde*> generate_for_pc(std::uint64_t pc);
  /// The FDEs generated so far, in the order they were generated.
  std::span<const GeneratedFde* const> generated_fdes() const noexcept { return generated_list_; }

  ModuleSource source() const noexcept { return source_; }
  /// The section walks use first: the own one (kNative) or the generated
  /// one (kGenerated); not usable for kNone.
  const UnwindSection& primary() const noexcept { return primary_; }
  /// For kNative: SFrame generated for the .eh_frame functions the own
  /// section lacks (empty when there are none, and when
  /// ModuleUnwindOptions::merge_own put them into primary()).
  const UnwindSection& extra() const noexcept { return extra_; }
  /// Functions generated beside the own section: in extra(), or merged
  /// into primary() (ModuleUnwindOptions::merge_own).
  std::size_t extra_functions() const noexcept { return extra_functions_; }
  /// Link-time ranges of the signal trampolines found in the code bytes.
  std::span<const AddressRange> trampolines() const noexcept { return trampolines_; }
  /// Words on the outcome, e.g. "own section covers every .eh_frame FDE",
  /// "generated from .eh_frame", "no .eh_frame FDEs (data only?)".
  const std::string& reason() const noexcept { return reason_; }
  /// The module has code with unwind information (own or listed in
  /// .eh_frame_hdr): a module without is not an error when it ends up kNone.
  bool has_unwind_info() const noexcept { return has_own_ || listed_ > 0; }

 private:
  UnwindSection primary_;
  UnwindSection extra_;
  ModuleSource source_ = ModuleSource::kNone;
  std::size_t extra_functions_ = 0;
  std::size_t pending_ = 0;
  std::size_t listed_ = 0;
  bool has_own_ = false;
  bool generated_once_ = false;
  std::optional<Error> generate_error_;
  Version version_ = Version::kV3;
  bool fde_index_with_rows_ = true;
  bool row_index_ = true;
  bool per_fde_rows_ = false;
  bool merge_own_ = false;
  std::vector<AddressRange> trampolines_;
  std::string reason_;

  Expected<void> first_outcome() const;

  // Per-FDE generation state (enable_on_demand()).
  struct OnDemand;
  std::shared_ptr<OnDemand> on_demand_;
  std::vector<const GeneratedFde*> generated_list_;
};

}  // namespace sframe::cfi

#pragma GCC visibility pop
