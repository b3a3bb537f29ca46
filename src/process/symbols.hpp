// Internal to src/process: reading function symbols.
#pragma once

#include <vector>

#include "sframe/elf.hpp"

namespace sframe::process::detail {

/// The file has a .symtab section.
bool has_symtab(const elf::ElfFile& f);

/// STT_FUNC/STT_GNU_IFUNC symbols of .symtab, else .dynsym, sorted by
/// address, one per address: the global name if any, else a weak one, else a
/// local one (the shortest, then alphabetically first, among equals).
std::vector<elf::Symbol> function_symbols(const elf::ElfFile& f);

}  // namespace sframe::process::detail
