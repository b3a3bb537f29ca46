// SPDX-License-Identifier: MIT
// sframepp: the address base of an ELF symbol, shared by the relocation code
// (elf_file.cpp) and the symbol reader (symbols.cpp).
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>

namespace sframe::elf::detail {

/// In a relocatable object a symbol's value is an offset in its section; its
/// address adds the section's sh_addr, which is 0 in files as gas writes them
/// (the addresses objdump shows) and the layout of ElfFile::relocated_copy().
/// 0 for other files, undefined, absolute and common symbols.
inline std::uint64_t symbol_base(Elf* elf, const GElf_Sym& sym) {
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf, &eh) || eh.e_type != ET_REL || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE)
    return 0;
  GElf_Shdr sh;
  Elf_Scn* scn = elf_getscn(elf, sym.st_shndx);
  return scn && gelf_getshdr(scn, &sh) ? sh.sh_addr : 0;
}

}  // namespace sframe::elf::detail
