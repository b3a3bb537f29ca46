// Function symbols of a module, with one name per address chosen as
// symbolizers do (eu-stack, gdb): global over weak over local.
#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>

#include "symbols.hpp"

namespace sframe::process::detail {
namespace {

int rank(unsigned char binding) {
  switch (binding) {
    case STB_GLOBAL:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

struct Ranked {
  elf::Symbol sym;
  int rank;
};

}  // namespace

bool has_symtab(const elf::ElfFile& f) {
  Elf* e = static_cast<Elf*>(f.native_handle());
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB) return true;
  }
  return false;
}

std::vector<elf::Symbol> function_symbols(const elf::ElfFile& f) {
  Elf* e = static_cast<Elf*>(f.native_handle());
  Elf_Scn* symtab = nullptr;
  Elf_Scn* dynsym = nullptr;
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_SYMTAB && !symtab) symtab = scn;
    if (sh.sh_type == SHT_DYNSYM && !dynsym) dynsym = scn;
  }
  std::vector<Ranked> all;
  Elf_Scn* scn = symtab ? symtab : dynsym;
  GElf_Shdr sh;
  if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_entsize == 0) return {};
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return {};
  const std::size_t n = sh.sh_size / sh.sh_entsize;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    const int type = GELF_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
    const char* name = elf_strptr(e, sh.sh_link, sym.st_name);
    if (!name || !*name) continue;
    all.push_back({{name, sym.st_value, sym.st_size}, rank(GELF_ST_BIND(sym.st_info))});
  }
  // Per address: the best-ranked name first, then the rest are dropped (a
  // larger size among aliases is kept so the range stays covered).
  std::sort(all.begin(), all.end(), [](const Ranked& a, const Ranked& b) {
    if (a.sym.address != b.sym.address) return a.sym.address < b.sym.address;
    if (a.rank != b.rank) return a.rank < b.rank;
    // glibc's internal aliases (__GI_x, __libc_x) are longer than the name
    // users know.
    if (a.sym.name.size() != b.sym.name.size()) return a.sym.name.size() < b.sym.name.size();
    return a.sym.name < b.sym.name;
  });
  std::vector<elf::Symbol> out;
  for (auto& r : all) {
    if (!out.empty() && out.back().address == r.sym.address) {
      out.back().size = std::max(out.back().size, r.sym.size);
      continue;
    }
    out.push_back(std::move(r.sym));
  }
  return out;
}

}  // namespace sframe::process::detail
