// SPDX-License-Identifier: MIT
// The PLT entries perf names as symbols (see plt_symbols.hpp).
#include "plt_symbols.hpp"

#include <elf.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace sframe::elf::detail {

Elf_Scn* find_named(Elf* e, const char* name) {
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(e, shstrndx, sh.sh_name);
    if (n && std::strcmp(n, name) == 0) return scn;
  }
  return nullptr;
}

// perf's PLT symbols (util/symbol-elf.c, dso__synthesize_plt_symbols, x86-64
// layout): one "NAME@plt" of 16 bytes per .rela.plt entry, in .plt.sec
// when the file has one (IBT), else in .plt after its 16-byte header.
void add_plt_symbols(Elf* e, std::vector<FunctionSymbol>& out, std::uint32_t& order) {
  GElf_Ehdr eh;
  if (!gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64) return;
  Elf_Scn* rela = find_named(e, ".rela.plt");
  Elf_Scn* plt = find_named(e, ".plt.sec");
  std::uint64_t header = 0;
  if (!plt) {
    plt = find_named(e, ".plt");
    header = 16;
  }
  GElf_Shdr rsh, psh, ssh;
  if (!rela || !plt || !gelf_getshdr(rela, &rsh) || !gelf_getshdr(plt, &psh) || rsh.sh_type != SHT_RELA ||
      rsh.sh_entsize == 0)
    return;
  Elf_Scn* dynsym = elf_getscn(e, rsh.sh_link);
  if (!dynsym || !gelf_getshdr(dynsym, &ssh)) return;
  Elf_Data* rdata = elf_getdata(rela, nullptr);
  Elf_Data* sdata = elf_getdata(dynsym, nullptr);
  if (!rdata || !sdata) return;
  const std::size_t n = rsh.sh_size / rsh.sh_entsize;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Rela r;
    GElf_Sym sym;
    if (!gelf_getrela(rdata, static_cast<int>(i), &r)) break;
    const std::uint64_t at = psh.sh_addr + header + 16 * i;
    if (at + 16 > psh.sh_addr + psh.sh_size) break;
    if (!gelf_getsym(sdata, static_cast<int>(GELF_R_SYM(r.r_info)), &sym)) continue;
    // An entry without a symbol (R_X86_64_IRELATIVE: libc's own IFUNC calls,
    // memcpy/strlen...) is still a PLT slot: perf 6.1 names it "@plt" (the
    // empty name of symbol 0), so a sample in it is not [unknown].
    const char* name = GELF_R_SYM(r.r_info) == 0 ? "" : elf_strptr(e, ssh.sh_link, sym.st_name);
    if (!name) continue;
    out.push_back({std::string(name) + "@plt", at, 16, STB_GLOBAL, STT_FUNC, order++});
  }
}

namespace {

// The distance from the start of an x86-64 PLT entry at `p` (`avail`
// bytes readable) to the GOT entry it jumps through, as perf 7.2 finds it
// (util/symbol-elf.c, get_x86_64_plt_disp): a `jmp *disp32(%rip)` (ff 25)
// after an optional endbr64 and bnd prefix. 32 bits, as perf adds it to
// the entry's offset unsigned. nullopt: no such jump (or perf's 0).
std::optional<std::uint32_t> plt_jump_distance(const unsigned char* p, std::size_t avail) {
  static constexpr unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  std::size_t n = 0;
  if (avail >= sizeof kEndbr64 && std::memcmp(p, kEndbr64, sizeof kEndbr64) == 0) n += sizeof kEndbr64;
  if (n < avail && p[n] == 0xf2) ++n;
  if (n + 6 > avail || p[n] != 0xff || p[n + 1] != 0x25) return std::nullopt;
  const std::uint32_t disp = std::uint32_t{p[n + 2]} | std::uint32_t{p[n + 3]} << 8 | std::uint32_t{p[n + 4]} << 16 |
                             std::uint32_t{p[n + 5]} << 24;
  const auto d = static_cast<std::uint32_t>(n + 6 + disp);
  if (d == 0) return std::nullopt;
  return d;
}

// perf 7.2's x86-64 PLT entry size: sh_entsize when 8 or 16, else 8 for an
// 8-aligned section and 16 otherwise (get_plt_sizes).
std::uint64_t plt_entry_size(const GElf_Shdr& sh) {
  if (sh.sh_entsize == 8 || sh.sh_entsize == 16) return sh.sh_entsize;
  return sh.sh_addralign == 8 ? 8 : 16;
}

// perf 7.2's name of a PLT entry it has no symbol for: its file offset.
std::string offset_plt_name(std::uint64_t file_offset) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "offset_%#" PRIx64 "@plt", file_offset);
  return buf;
}

// The name of symbol `index` of the symbol table section `symtab`, or ""
// (perf reads symbol 0's empty name for a relocation without a symbol).
std::string rel_symbol_name(Elf* e, Elf_Scn* symtab, std::uint64_t index) {
  GElf_Shdr sh;
  Elf_Data* data = symtab ? elf_getdata(symtab, nullptr) : nullptr;
  GElf_Sym sym;
  if (!data || !gelf_getshdr(symtab, &sh) || index > INT32_MAX || !gelf_getsym(data, static_cast<int>(index), &sym))
    return {};
  const char* name = elf_strptr(e, sh.sh_link, sym.st_name);
  return name ? name : "";
}

// perf 7.2's .plt.got symbols (dso__synthesize_plt_got_symbols): one per
// sh_entsize bytes, named after the symbol of the .rela.dyn entry (one with
// a symbol, the first in table order) relocating the GOT entry it jumps
// through, "NAME@plt", else offset_plt_name(). perf takes the GOT entry's
// address as the .plt.got entry's file offset plus the jump's distance (the
// same as its address where, as usual, the two are equal).
void add_plt_got_symbols(Elf* e, std::vector<FunctionSymbol>& out, std::uint32_t& order) {
  Elf_Scn* pg = find_named(e, ".plt.got");
  GElf_Shdr gsh;
  if (!pg || !gelf_getshdr(pg, &gsh) || gsh.sh_entsize == 0) return;
  Elf_Data* gdata = elf_getdata(pg, nullptr);
  if (!gdata || !gdata->d_buf) return;
  const auto* bytes = static_cast<const unsigned char*>(gdata->d_buf);
  const std::uint64_t size = std::min<std::uint64_t>(gsh.sh_size, gdata->d_size);
  struct Entry {
    std::uint64_t got;  // 0: no jump
    std::uint64_t symbol = 0;
  };
  std::vector<Entry> entries;
  for (std::uint64_t i = 0; i < size; i += gsh.sh_entsize) {
    const auto d = plt_jump_distance(bytes + i, static_cast<std::size_t>(size - i));
    entries.push_back({d ? gsh.sh_offset + i + *d : 0});
  }
  Elf_Scn* dynsym = nullptr;
  GElf_Shdr rsh;
  if (Elf_Scn* rela = find_named(e, ".rela.dyn");
      rela && gelf_getshdr(rela, &rsh) && rsh.sh_link != 0 && rsh.sh_entsize != 0) {
    // The GOT entries wanted, sorted, then one pass over .rela.dyn (tens
    // of thousands of entries in libpython, a few .plt.got entries).
    std::vector<std::pair<std::uint64_t, std::size_t>> wanted;
    for (std::size_t k = 0; k < entries.size(); ++k)
      if (entries[k].got) wanted.emplace_back(entries[k].got, k);
    std::sort(wanted.begin(), wanted.end());
    dynsym = elf_getscn(e, rsh.sh_link);
    Elf_Data* rdata = elf_getdata(rela, nullptr);
    const std::size_t n = rdata ? rsh.sh_size / rsh.sh_entsize : 0;
    for (std::size_t i = 0; i < n && !wanted.empty() && i <= INT32_MAX; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(rdata, static_cast<int>(i), &r)) break;
      if (GELF_R_SYM(r.r_info) == 0) continue;
      auto it = std::lower_bound(wanted.begin(), wanted.end(), std::make_pair(r.r_offset, std::size_t{0}));
      for (; it != wanted.end() && it->first == r.r_offset; ++it)
        if (!entries[it->second].symbol) entries[it->second].symbol = GELF_R_SYM(r.r_info);
    }
  }
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const std::uint64_t i = k * gsh.sh_entsize;
    std::string name = entries[k].symbol ? rel_symbol_name(e, dynsym, entries[k].symbol) : std::string();
    name = name.empty() ? offset_plt_name(gsh.sh_offset + i) : name + "@plt";
    out.push_back({std::move(name), gsh.sh_addr + i, gsh.sh_entsize, STB_GLOBAL, STT_FUNC, order++});
  }
}

}  // namespace

// perf 7.2's PLT symbols (dso__synthesize_plt_symbols, x86-64; see
// PerfPlt::k7_2), .plt.got's included. A slot whose R_X86_64_IRELATIVE
// entry has no symbol is named offset_plt_name() here and goes to
// `ifuncs` (slot address, addend): SymbolTable::read names it after the
// IFUNC once the table is sorted.
void add_plt_symbols_7_2(Elf* e, std::vector<FunctionSymbol>& out, std::uint32_t& order,
                         std::vector<std::pair<std::uint64_t, std::uint64_t>>& ifuncs) {
  GElf_Ehdr eh;
  if (!gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64) return;
  Elf_Scn* plt = find_named(e, ".plt");
  GElf_Shdr psh;
  if (!plt || !gelf_getshdr(plt, &psh)) return;
  const std::uint64_t header = plt_entry_size(psh);
  add_plt_got_symbols(e, out, order);
  // The slots: .plt.sec's (then ".plt" is all of .plt), else .plt's after
  // its header.
  GElf_Shdr sec;
  const bool has_sec = [&] {
    Elf_Scn* s = find_named(e, ".plt.sec");
    return s && gelf_getshdr(s, &sec);
  }();
  const GElf_Shdr& slots = has_sec ? sec : psh;
  const std::uint64_t slot_size = plt_entry_size(slots);
  std::uint64_t first = slots.sh_addr, first_offset = slots.sh_offset;
  bool header_symbol = true;
  Elf_Scn* rela = find_named(e, ".rela.plt");
  GElf_Shdr rsh;
  Elf_Data* rdata = nullptr;
  if (rela && gelf_getshdr(rela, &rsh) && rsh.sh_type == SHT_RELA && rsh.sh_link != 0 && rsh.sh_entsize != 0)
    rdata = elf_getdata(rela, nullptr);
  std::vector<GElf_Rela> rels;
  if (rdata) {
    const std::size_t n = rsh.sh_size / rsh.sh_entsize;
    for (std::size_t i = 0; i < n && i <= INT32_MAX; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(rdata, static_cast<int>(i), &r)) break;
      rels.push_back(r);
    }
    // A .plt of exactly one slot per entry has no header (no lazy binding).
    if (!has_sec && rels.size() * slot_size == psh.sh_size) {
      header_symbol = false;
    } else if (!has_sec) {
      first += header;
      first_offset += header;
    }
  }
  if (header_symbol) out.push_back({".plt", psh.sh_addr, has_sec ? psh.sh_size : header, STB_GLOBAL, STT_FUNC, order++});
  // The linker puts IRELATIVE entries after the others, their slots where
  // their GOT entries are: GOT address order is slot order.
  std::stable_sort(rels.begin(), rels.end(), [](const GElf_Rela& a, const GElf_Rela& b) { return a.r_offset < b.r_offset; });
  Elf_Scn* symtab = rdata ? elf_getscn(e, rsh.sh_link) : nullptr;
  for (std::size_t i = 0; i < rels.size(); ++i) {
    const std::uint64_t at = first + slot_size * i;
    if (at + slot_size > slots.sh_addr + slots.sh_size) break;
    std::string name = rel_symbol_name(e, symtab, GELF_R_SYM(rels[i].r_info));
    if (name.empty()) {
      name = offset_plt_name(first_offset + slot_size * i);
      if (GELF_R_TYPE(rels[i].r_info) == R_X86_64_IRELATIVE)
        ifuncs.emplace_back(at, static_cast<std::uint64_t>(rels[i].r_addend));
    } else {
      name += "@plt";
    }
    out.push_back({std::move(name), at, slot_size, STB_GLOBAL, STT_FUNC, order++});
  }
}

}  // namespace sframe::elf::detail
