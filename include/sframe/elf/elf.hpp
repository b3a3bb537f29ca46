// SPDX-License-Identifier: MIT
// sframepp: finding SFrame sections in ELF files (elfutils libelf).
#pragma once
// Library: libsframepp (sframepp::sframepp). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/format/consumers.hpp"
#include "sframe/format/error.hpp"

namespace sframe {
class OutputFile;
}

namespace sframe::elf {

/// ELF section type of SFrame sections (SHT_GNU_SFRAME, errata 1).
inline constexpr std::uint32_t kShtGnuSframe = 0x6ffffff4;
/// PT_GNU_SFRAME, the program header of the SFrame section (SFrame v3 §1.1).
inline constexpr std::uint32_t kPtGnuSframeSegment = 0x6474e554;

/// The bytes of an SFrame section found in an ELF file.
struct SFrameSectionData {
  std::string name;
  /// sh_addr: the address the section is loaded at (0 in relocatable objects).
  std::uint64_t address = 0;
  /// The section bytes: a view into the file's mapping, or into `owned` when
  /// relocations had to be applied. Valid while the ElfFile lives.
  std::span<const std::byte> bytes;
  std::vector<std::byte> owned;
  /// Number of .rela.sframe entries applied (relocatable objects, v2/v3).
  std::size_t relocations_applied = 0;
  /// Found through the PT_GNU_SFRAME program header (no usable section
  /// header); `name` is then ".sframe" and `bytes` span the whole segment,
  /// which may be longer than the section (its header tells its length).
  bool from_segment = false;
};

/// Facts about the ELF file itself.
struct ElfInfo {
  /// 32 or 64.
  int bits = 64;
  bool big_endian = false;
  /// e_machine and e_type.
  std::uint16_t machine = 0;
  std::uint16_t type = 0;
};

/// One section header, as far as sframepp needs it.
struct SectionHeader {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  /// Load address (sh_addr), file offset and size in bytes.
  std::uint64_t address = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// One program header (segment), as far as sframepp needs it.
struct ProgramHeader {
  /// p_type (PT_LOAD, PT_GNU_SFRAME, ...) and p_flags (PF_X, PF_W, PF_R).
  std::uint32_t type = 0;
  std::uint32_t flags = 0;
  /// File offset, link-time address, bytes in the file and in memory.
  std::uint64_t offset = 0;
  std::uint64_t vaddr = 0;
  std::uint64_t filesz = 0;
  std::uint64_t memsz = 0;
};

/// The raw bytes of a section, viewed in the file's mapping.
struct SectionBytes {
  SectionHeader header;
  std::span<const std::byte> bytes;
};

/// An open ELF file. Move-only; owns the file descriptor and libelf handle.
class ElfFile {
 public:
  /// Opens and identifies `path`. Errors: kIoError (cannot open/read),
  /// kElfError (not a regular file, not an ELF file, or unreadable
  /// headers). Never waits: a FIFO or a device is refused without reading.
  static Expected<ElfFile> open(const std::string& path);

  ElfFile(ElfFile&&) noexcept;
  ElfFile& operator=(ElfFile&&) noexcept;
  ~ElfFile();

  const ElfInfo& info() const noexcept;

  /// For a relocatable object (ET_REL): a copy in memory laid out as a
  /// linker would: executable sections at distinct addresses (the first at
  /// 0, the rest after it in file order), and the RELA relocations of
  /// .eh_frame and of the SFrame section applied (any SFrame version), so
  /// that libdw reads the object's CFI at the same addresses as its SFrame
  /// gives. Symbols and sections report those addresses. Errors: kElfError
  /// (not ET_REL, unreadable headers), kBadRelocation.
  Expected<ElfFile> relocated_copy() const;

  /// True for the result of relocated_copy().
  bool relocated() const noexcept;

  /// All section headers, in file order (empty when the file has none).
  std::vector<SectionHeader> sections() const;

  /// All program headers, in file order (empty for relocatable objects or
  /// when they cannot be read).
  std::vector<ProgramHeader> program_headers() const;

  /// The bytes of the first section called `name` (none for SHT_NOBITS).
  std::optional<SectionBytes> section_bytes(std::string_view name) const;

  /// The libelf handle (an `Elf*`), for layers that read through libdw.
  void* native_handle() const noexcept;

  /// (Function symbols: elf::SymbolTable::read in sframe/elf/symbols.hpp.)

  /// Finds the SFrame section called `name`; for the default name ".sframe",
  /// falls back to the first section of type SHT_GNU_SFRAME, then to the
  /// PT_GNU_SFRAME segment (files whose section headers were stripped). In relocatable
  /// objects whose section is SFrame v2 or v3, applies the section's RELA
  /// relocations (PC-relative and absolute, 32 and 64 bit, for x86-64,
  /// AArch64 and s390x) to a copy, as GNU objdump 2.47 does before dumping; v1
  /// sections are left unrelocated, as objdump 2.40 prints them.
  /// Errors: kNoSFrameSection, kElfError, kBadRelocation.
  Expected<SFrameSectionData> sframe_section(std::string_view name = ".sframe") const;

 private:
  struct Impl;
  explicit ElfFile(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

/// The facts about `file` that the consumers' file rules need
/// (sframe/format/consumers.hpp): its PT_LOAD segments and where `sframe` (found
/// in it by sframe_section()) is mapped. None for a relocatable object,
/// which has no segments.
std::optional<FileFacts> consumer_facts(const ElfFile& file, const SFrameSectionData& sframe);

/// Writes a copy of the ELF file `in_path` to `out_path` with one more
/// section, `name` of type `type` (e.g. kShtGnuSframe), holding `bytes`, with
/// sh_addr = `address` and no SHF_ALLOC flag. Every byte of the input stays
/// where it was; the section's data, a grown copy of the section-name table
/// and a new section header table are appended, and the ELF header points at
/// them. No program header changes: the program loads and runs as before,
/// and no segment maps the new section (tools find it by its section header;
/// a PT_GNU_SFRAME segment would need a free program header slot and a
/// loadable segment, which linked files do not have to spare).
/// The copy is written through an OutputFile (include/sframe/elf/output_file.hpp):
/// `out_path` is replaced only when complete, so it may even be `in_path`
/// (an atomic in-place update); a new copy gets the input's permissions.
/// Errors: kIoError (cannot copy, open or write), kElfError (not an ELF file,
/// no section-name table, or a section called `name` exists already; offset:
/// that section's file offset).
Expected<void> write_with_section(const std::string& in_path, const std::string& out_path, std::string_view name,
                                  std::uint32_t type, std::span<const std::byte> bytes, std::uint64_t address);

/// The same, written to `out` and not committed: the caller commits it with
/// its other outputs, so that a failure leaves all of them as they were.
Expected<void> write_with_section(const std::string& in_path, OutputFile& out, std::string_view name,
                                  std::uint32_t type, std::span<const std::byte> bytes, std::uint64_t address);

/// Writes to `out` (not committed) a copy of the ELF file `in_path` whose
/// section `name` holds `bytes` in place of its old contents, inside the
/// section's existing file space: the bytes go at its file offset, the rest
/// of the old space is zero-filled, sh_size becomes bytes.size(), and a
/// PT_GNU_SFRAME program header starting at the section's file offset gets
/// p_filesz = p_memsz = bytes.size(). No other byte changes (the loadable
/// segment holding the section keeps its size: the padding stays mapped).
/// Errors: kIoError (cannot read or write), kElfError (not an ELF file, no
/// section `name`, or it has no file space, SHT_NOBITS; offset: its header),
/// kNotRepresentable (bytes.size() is larger than the section's space;
/// value: bytes.size(), offset: the section's file offset).
Expected<void> write_with_section_replaced(const std::string& in_path, OutputFile& out, std::string_view name,
                                           std::span<const std::byte> bytes);

/// Where write_with_loadable_section() puts a section in a copy of a linked
/// 64-bit ELF file (ET_EXEC or ET_DYN). The layout depends on the file alone,
/// not on the section's bytes, so the section can be generated for its final
/// address first (FDE start offsets are relative to it, SFrame v3 §2.1.3, §2.3.1).
struct LoadablePlan {
  /// The new read-only PT_LOAD: file offset and address (congruent modulo
  /// `page`, past the end of the file and above every existing segment),
  /// and the page size used (the largest p_align of the PT_LOADs, >= 4096).
  std::uint64_t offset = 0;
  std::uint64_t vaddr = 0;
  std::uint64_t page = 0;
  /// Program headers after the change: the table grows by the PT_LOAD and,
  /// unless the file has one to retarget, a PT_GNU_SFRAME.
  std::uint64_t phnum = 0;
  /// The section's address (sh_addr, PT_GNU_SFRAME's p_vaddr): the start of
  /// the new segment when the table grows in place; else after the moved
  /// table in the new segment, 8-byte aligned.
  std::uint64_t address = 0;
  /// The table grows where it is (e_phoff kept), which strip and objcopy
  /// (BFD, which always writes the table right after the ELF header) and
  /// eu-strip keep: the sections that follow it in its PT_LOAD, file bytes
  /// [shift_from, shift_end), move up by `shift` bytes (a multiple of their
  /// largest alignment; 0 when there is room already) into that segment's
  /// slack, which the segment grows to cover. False: the table moves to the
  /// start of the new segment (as patchelf moves it), a layout those tools
  /// do not keep; `no_room` says why it could not grow in place.
  bool table_in_place = false;
  std::uint64_t shift_from = 0;
  std::uint64_t shift_end = 0;
  std::uint64_t shift = 0;
  /// With table_in_place: where the table's PT_LOAD ends in the file after
  /// the change (it grows to cover the table and the moved sections).
  std::uint64_t grown_end = 0;
  std::string no_room;
  /// The file has a PT_GNU_SFRAME (and a section `name`): they are retargeted
  /// to the new bytes instead of new ones being added (gen --repair).
  bool retarget = false;
};

/// The most zero bytes write_with_loadable_section() writes between the end
/// of a file and its new segment (the new segment keeps the lowest
/// PT_LOAD's address-offset difference, so a non-PIE file grows by about
/// its .bss): 1 GiB.
inline constexpr std::uint64_t kMaxGap = std::uint64_t{1} << 30;

/// Plans write_with_loadable_section() for `file`. With `retarget` false the
/// file must have no PT_GNU_SFRAME; with it true, it must have one. The
/// table grows in place when the sections after it in its PT_LOAD are ones
/// only program headers and the dynamic section find (notes, .interp, the
/// dynamic linker's hash, symbol, string, version and relocation tables)
/// and that segment's slack (file bytes and pages no other segment or
/// section uses) takes the shift; else it moves (no_room says why, e.g. a
/// static executable's .rela.plt, whose address its code holds).
/// Errors: kElfError with the offset of what refuses: a 32-bit file (0), a
/// relocatable or core file (0), no PT_LOAD (e_phoff), a PT_GNU_SFRAME when
/// `retarget` is false or none when it is true (its program header's
/// offset, or e_phoff), 65535 or more program headers (e_phoff), a PT_LOAD
/// alignment that is not a power of two or a PT_LOAD ending above 2^63 (its
/// program header); kNotRepresentable when the segment would start more
/// than kMaxGap bytes past the end of the file (value: that gap).
Expected<LoadablePlan> plan_loadable_section(const ElfFile& file, bool retarget);

/// Writes to `out` (not committed) a copy of `in_path` whose new read-only
/// PT_LOAD (placed as plan_loadable_section(file, retarget) says) holds
/// `bytes`, with a PT_GNU_SFRAME (SFrame v3 §1.1) covering exactly `bytes`
/// and a section header `name` of type SHT_GNU_SFRAME with SHF_ALLOC, so
/// that the kernel, the dynamic linker and tools (readelf, objdump) find the
/// section. The program-header table grows by the new headers:
/// - in place when the plan says so (LoadablePlan::table_in_place): the
///   sections after it in its PT_LOAD move up by the plan's shift, and the
///   program headers inside the moved bytes (PT_INTERP, PT_NOTE,
///   PT_GNU_PROPERTY), the dynamic section's addresses into them, their
///   section headers and the symbols defined in them follow; that PT_LOAD
///   and PT_PHDR grow; `bytes` start the new segment. strip, objcopy and
///   eu-strip keep this layout.
/// - else at the start of the new segment, as patchelf moves it: PT_PHDR
///   (if any) is updated to the new table's offset, address and size; the
///   new PT_LOAD's p_vaddr - p_offset equals the lowest PT_LOAD's whenever
///   that keeps the offset past the end of the file, so that AT_PHDR is the
///   same whether a kernel computes it from the PT_LOAD holding e_phoff
///   (Linux >= 5.18) or as the lowest PT_LOAD's bias + e_phoff (older
///   kernels); the old table is left as dead bytes.
/// PT_LOADs stay sorted by p_vaddr (the new one follows the last); every
/// other byte of the input stays where it was; the grown section-name
/// table and a new section-header table follow the new segment, unmapped.
/// With `retarget`, the file's PT_GNU_SFRAME is pointed at the new bytes
/// instead of a new one being added. A section `name` the file has (with or
/// without `retarget`: lld 14 writes .sframe with no segment) has its header
/// pointed at the new bytes, its old bytes left dead; else one is added.
/// `address` must be the plan's address (the caller generated `bytes` for
/// it). Errors: those of plan_loadable_section(); kIoError (cannot read or
/// write); kElfError (unreadable headers, or extended section numbering;
/// offset: the header concerned); kNotRepresentable (`address` is not the
/// plan's; value: the plan's address).
Expected<void> write_with_loadable_section(const std::string& in_path, OutputFile& out, std::string_view name,
                                           std::span<const std::byte> bytes, std::uint64_t address, bool retarget);

}  // namespace sframe::elf

#pragma GCC visibility pop
