// SPDX-License-Identifier: MIT
// sframepp: the one reader of ELF function symbols (.symtab, .dynsym, the
// separate debug file), used by `sframe lookup`, `verify` and `stack`.
#pragma once
// Library: libsframepp (sframepp::sframepp). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/elf/elf.hpp"

namespace sframe::elf {

/// How a symbolizer chooses among aliases (several function symbols at one
/// address) and how it prints the chosen name.
enum class NamingPolicy {
  /// As elfutils' eu-stack (dwfl_module_addrinfo): a GLOBAL symbol over a
  /// WEAK one over a LOCAL one, then the smaller size, then the first in
  /// symbol-table order (glibc's `openat64` before `openat`; `qsort_r`, weak,
  /// over the local `__qsort_r` and `__GI___qsort_r`). C++ names demangled;
  /// names the table spells with a version (`__libc_start_main@@GLIBC_2.34`,
  /// found in .symtab of glibc's debug file) are printed as spelled.
  kEuStack,
  /// As perf (tools/perf/util/symbol.c, choose_best_symbol): a sized symbol
  /// over a zero-sized one, a non-WEAK one over a WEAK one, a GLOBAL one
  /// over a LOCAL one, fewer leading underscores, the longer name, then the
  /// first in table order. C++ names demangled (the part before any
  /// `@VERSION`) as perf 6.1 prints them by default (DMGL_NO_OPTS): without
  /// the parameter list, the return type and "[clone .suffix]".
  /// Asm labels (named STT_NOTYPE symbols in code sections) are kept, as
  /// perf keeps them (util/symbol-elf.c, elf_sym__is_label).
  /// On x86-64, "NAME@plt" symbols for the PLT entries, as perf
  /// synthesizes them (dso__synthesize_plt_symbols; the release's rules:
  /// SymbolOptions::perf_plt).
  /// A zero-sized symbol reaches the next symbol's start, as perf's
  /// symbols__fixup_end() makes it (its `size` is set so); the last one
  /// reaches the end of the 4 KiB page after the one it starts in.
  kPerf,
};

/// One function symbol (STT_FUNC or STT_GNU_IFUNC, defined, named; under
/// NamingPolicy::kPerf also STT_NOTYPE labels in code sections).
struct FunctionSymbol {
  /// The name as the string table spells it (mangled; may end in
  /// `@VERSION` or `@@VERSION` in a .symtab).
  std::string name;
  /// st_value and st_size: link-time address and size in bytes.
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  /// STB_GLOBAL, STB_WEAK, STB_LOCAL (or another ELF binding).
  std::uint8_t binding = 0;
  /// STT_FUNC, STT_GNU_IFUNC (or STT_NOTYPE for a kPerf label).
  std::uint8_t type = 0;
  /// Position in the table it came from, .symtab entries before .dynsym ones
  /// (the order eu-stack breaks remaining ties by).
  std::uint32_t order = 0;
};

/// A symbolized address: the symbol covering it and the distance from its
/// start in bytes.
struct SymbolHit {
  const FunctionSymbol* symbol = nullptr;
  std::uint64_t offset = 0;
};

/// Where a table's symbols came from.
enum class SymbolSource {
  kNone,       ///< no function symbols found
  kSymtab,     ///< the file's own .symtab (and .dynsym for addresses it lacks)
  kDebugFile,  ///< the .symtab of the separate debug file found by build ID
  kDynsym,     ///< .dynsym only (a stripped file without a debug file)
};

/// ".symtab", "debug file", ".dynsym", or "" for kNone.
std::string_view source_name(SymbolSource s) noexcept;

/// Whose PLT symbols NamingPolicy::kPerf synthesizes on x86-64 (perf's
/// util/symbol-elf.c, dso__synthesize_plt_symbols, as each release has it),
/// and whose names its choice among aliases at one address compares (perf
/// stores a symbol demangled, perf 6.1 without its parameter list, perf 7.2
/// with it, and prefers the longer name).
enum class PerfPlt : std::uint8_t {
  /// Debian 12's perf 6.1: the I-th .rela.plt entry names the I-th 16-byte
  /// slot (of .plt.sec, else of .plt after its 16-byte header),
  /// "SYMBOL@plt", or "@plt" for an entry without a symbol (libc's
  /// R_X86_64_IRELATIVE calls of its own IFUNCs). No .plt.got symbols.
  k6_1,
  /// perf 7.2: the .rela.plt entries in GOT address order name the slots
  /// (the linker puts IRELATIVE entries last, their slots where their GOT
  /// entries are); an entry without a symbol is named after the IFUNC at
  /// its addend ("strlen@plt"), else "offset_0xOFFSET@plt" (file offset of
  /// the slot). ".plt" for .plt's header (all of .plt when the file has
  /// .plt.sec; none when .plt has one slot per entry and no room for it).
  /// Each .plt.got entry (sh_entsize bytes) is named after the .rela.dyn
  /// symbol of the GOT entry its `jmp *disp(%rip)` reads
  /// ("PyMem_Free@plt"), else "offset_0xOFFSET@plt".
  k7_2,
};

/// Options of SymbolTable::read.
struct SymbolOptions {
  NamingPolicy policy = NamingPolicy::kEuStack;
  /// Under NamingPolicy::kPerf: which perf release's PLT symbols to add.
  PerfPlt perf_plt = PerfPlt::k6_1;
  /// When the file has no .symtab, read the .symtab of its separate debug
  /// file `<debug_root>/.build-id/xx/yyyy....debug` (the build ID in hex),
  /// as eu-stack and gdb do.
  bool use_debug_file = true;
  std::string debug_root = "/usr/lib/debug";
};

/// The function symbols of one ELF file, sorted for lookup by address.
///
/// Sources: .symtab (the file's, else that of its separate debug file when
/// SymbolOptions::use_debug_file), then .dynsym for the addresses the .symtab
/// has no function symbol at (all of .dynsym when there is no .symtab).
/// Symbols of type STT_FUNC and STT_GNU_IFUNC with a section and a name are
/// kept (aliases included: the policy chooses among them at lookup).
class SymbolTable {
 public:
  SymbolTable() = default;

  /// Reads the symbols of `file`. Never fails: a file without usable symbol
  /// tables (or with unreadable ones) gives an empty table (kNone).
  static SymbolTable read(const ElfFile& file, const SymbolOptions& options = {});
  /// A table over symbols from another source (e.g. /proc/kallsyms, whose
  /// entries have no size: give each the distance to the next, as perf
  /// does), sorted and searched as read() does, with aliases ordered by
  /// `policy`; `source` is reported by source() (kNone when empty).
  static SymbolTable from_symbols(std::vector<FunctionSymbol> symbols, NamingPolicy policy,
                                  SymbolSource source = SymbolSource::kSymtab);

  /// Symbols sorted by address, and at one address in the policy's order of
  /// preference (the preferred alias first).
  std::span<const FunctionSymbol> symbols() const noexcept { return symbols_; }
  SymbolSource source() const noexcept { return source_; }
  NamingPolicy policy() const noexcept { return policy_; }
  bool empty() const noexcept { return symbols_.empty(); }

  /// The symbol naming link-time `address`: among the symbols whose range
  /// [address, address + size) holds it (a zero-sized symbol holds only its
  /// own address), the one starting nearest below it, a GLOBAL or WEAK one
  /// before any LOCAL one (as eu-stack searches global symbols first), and
  /// among aliases at that start the policy's preferred one that holds it.
  /// Binary search, then a walk back bounded by the furthest end of the
  /// symbols below. nullopt when no symbol holds the address (PLT stubs,
  /// padding). Allocation-free.
  std::optional<SymbolHit> find(std::uint64_t address) const noexcept;

  /// The name to print for `sym` under this table's policy (demangled).
  std::string display_name(const FunctionSymbol& sym) const;

 private:
  // Sorts symbols_ (address, then policy order) and fills max_last_.
  void finish();
  std::vector<FunctionSymbol> symbols_;
  // max_last_[i]: the largest last byte, address + max(size, 1) - 1
  // (saturated), among symbols_[0..i].
  std::vector<std::uint64_t> max_last_;
  SymbolSource source_ = SymbolSource::kNone;
  NamingPolicy policy_ = NamingPolicy::kEuStack;
  PerfPlt perf_ = PerfPlt::k6_1;
};

/// `name` demangled as a C++ name (abi::__cxa_demangle), or `name` itself
/// when it is not a mangled C++ name.
std::string demangle(std::string_view name);

/// The name to print for the raw symbol name `name` under `policy`.
std::string display_name(std::string_view name, NamingPolicy policy);

/// The file's GNU build ID (NT_GNU_BUILD_ID note in .note.gnu.build-id) in
/// lower-case hex; nullopt when it has none or the note is malformed.
std::optional<std::string> build_id(const ElfFile& file);

/// The GNU build ID in `notes`, a sequence of ELF notes in the host's byte
/// order (a note section's bytes, or the running kernel's
/// /sys/kernel/notes): the first note named "GNU" of type NT_GNU_BUILD_ID,
/// in lower-case hex (gABI "Note Section": namesz, descsz, type, then name
/// and descriptor each padded to 4 bytes). nullopt when there is none, or
/// a note before it runs past the end of `notes`; a descriptor of more
/// than 64 bytes is not taken for a build ID.
std::optional<std::string> gnu_build_id(std::span<const std::byte> notes);

}  // namespace sframe::elf

#pragma GCC visibility pop
