// SPDX-License-Identifier: MIT
// The one reader of ELF function symbols (see include/sframe/elf/symbols.hpp).
#include "sframe/elf/symbols.hpp"

#include "plt_symbols.hpp"
#include "symbol_base.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

namespace sframe::elf {
namespace {

Elf_Scn* find_table(Elf* e, std::uint32_t type) {
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) && sh.sh_type == type) return scn;
  }
  return nullptr;
}

// Whether section `ndx` of `e` holds code (SHF_EXECINSTR), looked up once
// per section: a table of tens of thousands of symbols names a few dozen
// sections.
class ExecSections {
 public:
  explicit ExecSections(Elf* e) : e_(e) {
    if (elf_getshdrnum(e, &count_) != 0) count_ = 0;
  }
  bool operator()(std::size_t ndx) {
    if (ndx >= count_) return false;  // elf_getscn() has no such section
    if (known_.empty()) known_.assign(count_, -1);
    if (known_[ndx] < 0) {
      GElf_Shdr sh;
      Elf_Scn* scn = elf_getscn(e_, ndx);
      known_[ndx] = scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) ? 1 : 0;
    }
    return known_[ndx] != 0;
  }

 private:
  Elf* e_;
  std::size_t count_ = 0;
  std::vector<signed char> known_;  // per section: -1 not looked up yet
};

// The names of a string table section, as elf_strptr() gives them: null
// for an offset outside the section or a string the section does not end.
// Read from the section's data directly (elf_strptr() checks the section
// and the offset again on each call, for every symbol of a table).
class StringTable {
 public:
  StringTable(Elf* e, std::size_t ndx) {
    Elf_Scn* scn = elf_getscn(e, ndx);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB) return;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || !d->d_buf || d->d_size == 0) return;
    base_ = static_cast<const char*>(d->d_buf);
    size_ = std::min<std::size_t>(d->d_size, sh.sh_size);
    terminated_ = base_[size_ - 1] == '\0';
  }
  const char* at(std::size_t off) const {
    if (off >= size_) return nullptr;
    if (!terminated_ && !std::memchr(base_ + off, '\0', size_ - off)) return nullptr;
    return base_ + off;
  }

 private:
  const char* base_ = nullptr;
  std::size_t size_ = 0;
  bool terminated_ = false;
};

// Appends the defined, named STT_FUNC/STT_GNU_IFUNC symbols of `scn`, and
// with `labels` the named STT_NOTYPE symbols of code sections (perf keeps
// such asm labels, e.g. ld.so's _start: util/symbol-elf.c, elf_sym__is_label);
// `order` counts on across tables.
// `skip`, when given: sorted addresses whose symbols are counted in `order`
// but not kept (a .dynsym entry at an address the .symtab names).
void read_table(Elf* e, Elf_Scn* scn, std::vector<FunctionSymbol>& out, std::uint32_t& order, bool labels = false,
                const std::vector<std::uint64_t>* skip = nullptr) {
  GElf_Shdr sh;
  if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_entsize == 0) return;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data) return;
  std::size_t n = sh.sh_size / sh.sh_entsize;
  // At most one symbol per entry, within the file's size: growing the
  // vector instead copied it (and faulted fresh pages in) a dozen times.
  out.reserve(out.size() + std::min<std::size_t>(n, data->d_size / sh.sh_entsize + 1));
  // A 64-bit file's symbols straight from the converted data (an array of
  // Elf64_Sym in memory order, as gelf_getsym() reads it), else through
  // gelf_getsym(); either way no entry past the data.
  const bool wide = gelf_getclass(e) == ELFCLASS64 && data->d_type == ELF_T_SYM && data->d_buf;
  if (wide) n = std::min(n, data->d_size / sizeof(Elf64_Sym));
  GElf_Ehdr eh;
  const bool rel = gelf_getehdr(e, &eh) && eh.e_type == ET_REL;  // symbol_base() is 0 otherwise
  ExecSections exec_section(e);
  const StringTable names(e, sh.sh_link);
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (wide) {
      Elf64_Sym s64;
      std::memcpy(&s64, static_cast<const char*>(data->d_buf) + i * sizeof(Elf64_Sym), sizeof s64);
      sym = s64;  // GElf_Sym is Elf64_Sym
    } else if (!gelf_getsym(data, static_cast<int>(i), &sym)) {
      break;
    }
    const auto type = static_cast<std::uint8_t>(GELF_ST_TYPE(sym.st_info));
    if (sym.st_shndx == SHN_UNDEF) continue;
    if (type != STT_FUNC && type != STT_GNU_IFUNC &&
        !(labels && type == STT_NOTYPE && sym.st_shndx != SHN_ABS && sym.st_shndx < SHN_LORESERVE &&
          exec_section(sym.st_shndx)))
      continue;
    const char* name = names.at(sym.st_name);
    if (!name || !*name) continue;
    const std::uint64_t address = sym.st_value + (rel ? detail::symbol_base(e, sym) : 0);
    // Tested before the name is copied: most of a library's .dynsym
    // repeats its .symtab.
    if (skip && std::binary_search(skip->begin(), skip->end(), address)) {
      ++order;
      continue;
    }
    out.push_back({name, address, sym.st_size, static_cast<std::uint8_t>(GELF_ST_BIND(sym.st_info)), type, order++});
  }
}

// eu-stack's binding preference (libdwfl's binding_value, negated: lower is
// better).
int eu_binding_rank(std::uint8_t binding) {
  switch (binding) {
    case STB_GLOBAL:
      return 0;
    case STB_WEAK:
      return 1;
    case STB_LOCAL:
      return 2;
    default:
      return 3;
  }
}

std::size_t leading_underscores(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && s[n] == '_') ++n;
  return n;
}

std::string perf_short_name(std::string d);

// The name perf's choice among aliases compares when it differs from the
// symbol's own: perf stores a symbol demangled (util/symbol-elf.c,
// demangle_sym; perf 6.1 without the parameter list) before
// choose_best_symbol counts its leading underscores and its length.
// nullopt for a name that is no mangled C++ name, compared as it is (most
// of a C library's aliases: no copy of each).
std::optional<std::string> perf_demangled_name(std::string_view name, PerfPlt perf) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::nullopt;
  const auto at = name.find('@');
  const std::string_view base = name.substr(0, at);
  std::string d = demangle(base);
  if (perf == PerfPlt::k6_1 && d != base) d = perf_short_name(std::move(d));
  if (at != std::string_view::npos) d += name.substr(at);
  return d;
}

// True if `a` is preferred over `b` (both at one address) under `policy`;
// for kPerf, `na` and `nb` are the names perf compares (their own, else
// perf_demangled_name()).
bool preferred(const FunctionSymbol& a, const FunctionSymbol& b, NamingPolicy policy, std::string_view na = {},
               std::string_view nb = {}) {
  if (policy == NamingPolicy::kPerf) {
    // perf's choose_best_symbol (util/symbol.c), on the sizes its
    // symbols__fixup_end gave first: non-zero length, not weak, global,
    // fewer leading underscores, the longer name.
    const auto key = [](const FunctionSymbol& s, std::string_view n) {
      return std::make_tuple(s.size == 0, s.binding == STB_WEAK, s.binding != STB_GLOBAL, leading_underscores(n),
                             -static_cast<std::ptrdiff_t>(n.size()));
    };
    const auto ka = key(a, na), kb = key(b, nb);
    if (ka != kb) return ka < kb;
    // Then the first in table order: perf keeps aliases of one address in
    // the order it read them, and its last rule (arch__choose_best_symbol)
    // keeps the first (libc: "dlopen@GLIBC_2.2.5", before
    // "dlopen@@GLIBC_2.34" in its .symtab, in perf 6.1 and 7.2 alike).
    return a.order < b.order;
  }
  // eu-stack: sized symbols are candidates, zero-sized ones only a fallback;
  // then binding, then the smaller size, then table order.
  return std::make_tuple(a.size == 0, eu_binding_rank(a.binding), a.size, a.order) <
         std::make_tuple(b.size == 0, eu_binding_rank(b.binding), b.size, b.order);
}

// Sorts `v` stably by key(element), a 64-bit value: an LSD radix sort over
// the key bits that vary, 11 bits a pass (a few passes for one file's
// addresses, where a comparison sort of a libc-sized table cost most of
// reading it). Fewer than 2^32 elements.
template <class T, class KeyOf>
void radix_sort(std::vector<T>& v, KeyOf key) {
  if (v.empty()) return;
  std::uint64_t varying = 0;
  const std::uint64_t first = key(v.front());
  for (const T& x : v) varying |= key(x) ^ first;
  constexpr unsigned kDigitBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
  std::vector<T> tmp(v.size());
  std::vector<std::uint32_t> count(kBuckets);
  for (unsigned shift = 0; shift < 64 && (varying >> shift) != 0; shift += kDigitBits) {
    std::fill(count.begin(), count.end(), 0u);
    for (const T& x : v) ++count[(key(x) >> shift) & (kBuckets - 1)];
    std::uint32_t at = 0;
    for (std::uint32_t& c : count) at += std::exchange(c, at);
    for (const T& x : v) tmp[count[(key(x) >> shift) & (kBuckets - 1)]++] = x;
    v.swap(tmp);
  }
}

bool covers(const FunctionSymbol& s, std::uint64_t address) {
  return address >= s.address && address - s.address < std::max<std::uint64_t>(s.size, 1);
}

}  // namespace

std::string_view source_name(SymbolSource s) noexcept {
  switch (s) {
    case SymbolSource::kSymtab:
      return ".symtab";
    case SymbolSource::kDebugFile:
      return "debug file";
    case SymbolSource::kDynsym:
      return ".dynsym";
    case SymbolSource::kNone:
      break;
  }
  return "";
}

std::optional<std::string> gnu_build_id(std::span<const std::byte> notes) {
  const auto* p = reinterpret_cast<const unsigned char*>(notes.data());
  const std::uint64_t size = notes.size();
  const auto padded = [](std::uint64_t n) { return (n + 3) & ~std::uint64_t{3}; };
  for (std::uint64_t at = 0; size - at >= 12;) {
    std::uint32_t namesz, descsz, type;
    std::memcpy(&namesz, p + at, 4);
    std::memcpy(&descsz, p + at + 4, 4);
    std::memcpy(&type, p + at + 8, 4);
    const std::uint64_t name_at = at + 12;
    if (padded(namesz) > size - name_at) return std::nullopt;
    const std::uint64_t desc_at = name_at + padded(namesz);
    if (descsz > size - desc_at) return std::nullopt;
    if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(p + name_at, "GNU", 4) == 0) {
      if (descsz == 0 || descsz > 64) return std::nullopt;
      std::string hex;
      for (std::uint32_t i = 0; i < descsz; ++i) {
        char b[3];
        std::snprintf(b, sizeof b, "%02x", p[desc_at + i]);
        hex += b;
      }
      return hex;
    }
    // The last note's padding may be cut off at the end of the section.
    at = desc_at + std::min(padded(descsz), size - desc_at);
  }
  return std::nullopt;
}

std::optional<std::string> build_id(const ElfFile& file) {
  auto note = file.section_bytes(".note.gnu.build-id");
  if (!note) return std::nullopt;
  return gnu_build_id(note->bytes);
}

SymbolTable SymbolTable::read(const ElfFile& file, const SymbolOptions& options) {
  SymbolTable t;
  t.policy_ = options.policy;
  t.perf_ = options.perf_plt;
  Elf* e = static_cast<Elf*>(file.native_handle());
  std::uint32_t order = 0;
  const bool labels = options.policy == NamingPolicy::kPerf;
  if (Elf_Scn* symtab = find_table(e, SHT_SYMTAB)) {
    read_table(e, symtab, t.symbols_, order, labels);
    t.source_ = SymbolSource::kSymtab;
  } else if (auto id = build_id(file); options.use_debug_file && id && id->size() > 2) {
    const std::string path = options.debug_root + "/.build-id/" + id->substr(0, 2) + "/" + id->substr(2) + ".debug";
    if (auto dbg = ElfFile::open(path)) {
      Elf* de = static_cast<Elf*>(dbg->native_handle());
      if (Elf_Scn* dbg_symtab = find_table(de, SHT_SYMTAB)) {
        read_table(de, dbg_symtab, t.symbols_, order, labels);
        t.source_ = SymbolSource::kDebugFile;
      }
    }
  }
  // .dynsym for the addresses the .symtab has no function at.
  std::vector<std::uint64_t> have;
  have.reserve(t.symbols_.size());
  for (const auto& s : t.symbols_) have.push_back(s.address);
  if (have.size() < 256)
    std::sort(have.begin(), have.end());
  else
    radix_sort(have, [](std::uint64_t a) { return a; });
  const std::size_t from_symtab = t.symbols_.size();
  read_table(e, find_table(e, SHT_DYNSYM), t.symbols_, order, false, &have);
  if (t.source_ == SymbolSource::kNone && t.symbols_.size() > from_symtab) t.source_ = SymbolSource::kDynsym;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ifuncs;  // PLT slot, IFUNC address
  if (labels && options.perf_plt == PerfPlt::k6_1) detail::add_plt_symbols(e, t.symbols_, order);
  if (labels && options.perf_plt == PerfPlt::k7_2) detail::add_plt_symbols_7_2(e, t.symbols_, order, ifuncs);
  if (t.symbols_.empty()) t.source_ = SymbolSource::kNone;
  t.finish();
  // perf 7.2 (get_ifunc_name): an IRELATIVE slot is "NAME@plt" when the
  // symbol perf names its addend by starts there and is an IFUNC or the
  // alias of one ("strlen@plt"); else it keeps its offset name.
  for (const auto& [slot, target] : ifuncs) {
    const auto at_slot = t.find(slot);
    const auto hit = t.find(target);
    if (!at_slot || at_slot->offset != 0 || !hit || hit->offset != 0) continue;
    const auto by_address = [](const FunctionSymbol& s, std::uint64_t a) { return s.address < a; };
    bool ifunc = false;
    for (auto it = std::lower_bound(t.symbols_.begin(), t.symbols_.end(), target, by_address);
         it != t.symbols_.end() && it->address == target; ++it)
      ifunc |= it->type == STT_GNU_IFUNC;
    if (ifunc) t.symbols_[static_cast<std::size_t>(at_slot->symbol - t.symbols_.data())].name = hit->symbol->name + "@plt";
  }
  return t;
}

SymbolTable SymbolTable::from_symbols(std::vector<FunctionSymbol> symbols, NamingPolicy policy, SymbolSource source) {
  SymbolTable t;
  t.policy_ = policy;
  t.symbols_ = std::move(symbols);
  t.source_ = t.symbols_.empty() ? SymbolSource::kNone : source;
  t.finish();
  return t;
}

void SymbolTable::finish() {
  SymbolTable& t = *this;
  const NamingPolicy policy = t.policy_;
  // Sorted as (address, index) keys, then moved once: moving the symbols
  // themselves (a string each) in the sort cost several times more.
  {
    struct Key {
      std::uint64_t address;
      std::uint32_t index;
    };
    std::vector<Key> keys(t.symbols_.size());
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = {t.symbols_[i].address, static_cast<std::uint32_t>(i)};
    // By address first, stably (a stable LSD radix sort over the address
    // bits that vary: a few passes for one file's symbols, where a
    // comparison sort of a libc-sized table cost most of reading it), so
    // that aliases keep the order they were read in.
    radix_sort(keys, [](const Key& k) { return k.address; });
    if (policy == NamingPolicy::kPerf) {
      // perf (util/symbol.c, symbols__fixup_end), before it chooses among
      // aliases: a zero-sized symbol reaches the start of the one after it
      // in address and table order (an alias read after it leaves it at
      // zero); the last reaches the end of the page after its own (perf
      // 6.1 and 7.2 alike: libm's _fini, the last in its debug file's
      // .symtab, names _fini+4 in both).
      for (std::size_t i = 0; i < keys.size(); ++i) {
        FunctionSymbol& s = t.symbols_[keys[i].index];
        if (s.size != 0) continue;
        if (i + 1 < keys.size()) {
          s.size = keys[i + 1].address - s.address;
        } else if (s.address <= ~std::uint64_t{0} - 2 * 4096) {
          s.size = (s.address + 4095) / 4096 * 4096 + 4096 - s.address;
        }
      }
    }
    // Then each group of aliases, best first: perf keeps that one alone.
    // A group's keys sort with the names perf compares (kPerf) beside them.
    struct Member {
      Key key;
      std::optional<std::string> demangled;  // perf_demangled_name()
    };
    const auto compared = [&](const Member& m) -> std::string_view {
      return m.demangled ? std::string_view(*m.demangled) : std::string_view(t.symbols_[m.key.index].name);
    };
    std::vector<Member> group;  // one buffer for every group
    for (std::size_t i = 0; i < keys.size();) {
      std::size_t j = i + 1;
      while (j < keys.size() && keys[j].address == keys[i].address) ++j;
      if (j - i > 1) {
        group.clear();
        for (std::size_t k = i; k < j; ++k)
          group.push_back({keys[k], policy == NamingPolicy::kPerf
                                        ? perf_demangled_name(t.symbols_[keys[k].index].name, t.perf_)
                                        : std::nullopt});
        const auto better = [&](const Member& a, const Member& b) {
          return preferred(t.symbols_[a.key.index], t.symbols_[b.key.index], policy, compared(a), compared(b));
        };
        if (group.size() <= 16) {
          // Insertion, stable as stable_sort() and without its buffer: a
          // library's debug .symtab has thousands of small groups, and an
          // allocation per group cost a fifth of reading it.
          for (std::size_t a = 1; a < group.size(); ++a) {
            Member m = std::move(group[a]);
            std::size_t b = a;
            for (; b > 0 && better(m, group[b - 1]); --b) group[b] = std::move(group[b - 1]);
            group[b] = std::move(m);
          }
        } else {
          std::stable_sort(group.begin(), group.end(), better);
        }
        for (std::size_t k = i; k < j; ++k) keys[k] = group[k - i].key;
      }
      i = j;
    }
    // Position i takes symbol keys[i].index: applied in place, one cycle
    // of the permutation at a time (a done position points at itself), so
    // that no second vector of symbols is allocated and faulted in (a
    // debug file's .symtab of tens of thousands of symbols is megabytes).
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].index == i) continue;
      FunctionSymbol first = std::move(t.symbols_[i]);
      std::size_t j = i;
      for (;;) {
        const std::size_t from = keys[j].index;
        keys[j].index = static_cast<std::uint32_t>(j);
        if (from == i) {
          t.symbols_[j] = std::move(first);
          break;
        }
        t.symbols_[j] = std::move(t.symbols_[from]);
        j = from;
      }
    }
  }
  // The last byte, not the end: a symbol reaching the top of the address
  // space (address + size wraps) still covers its own bytes.
  t.max_last_.reserve(t.symbols_.size());
  std::uint64_t last = 0;
  for (const auto& s : t.symbols_) {
    const std::uint64_t span = std::max<std::uint64_t>(s.size, 1) - 1;
    last = std::max(last, s.address + span < s.address ? ~std::uint64_t{0} : s.address + span);
    t.max_last_.push_back(last);
  }
}

std::optional<SymbolHit> SymbolTable::find(std::uint64_t address) const noexcept {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](std::uint64_t v, const FunctionSymbol& s) { return v < s.address; });
  std::size_t hi = static_cast<std::size_t>(it - symbols_.begin());
  const FunctionSymbol* global = nullptr;
  const FunctionSymbol* local = nullptr;
  // Address groups from the nearest start down, while a symbol below could
  // still reach the address.
  while (hi > 0 && max_last_[hi - 1] >= address) {
    std::size_t lo = hi - 1;
    while (lo > 0 && symbols_[lo - 1].address == symbols_[hi - 1].address) --lo;
    // perf keeps the best of a group of aliases alone (symbols__fixup_duplicate).
    const std::size_t end = policy_ == NamingPolicy::kPerf ? lo + 1 : hi;
    for (std::size_t k = lo; k < end; ++k) {
      const FunctionSymbol& s = symbols_[k];
      if (!covers(s, address)) continue;
      if (policy_ == NamingPolicy::kPerf) return SymbolHit{&s, address - s.address};
      if (s.binding != STB_LOCAL) {
        global = &s;
        break;
      }
      if (!local) local = &s;
    }
    if (global) break;
    hi = lo;
  }
  const FunctionSymbol* s = global ? global : local;
  if (!s) return std::nullopt;
  return SymbolHit{s, address - s->address};
}

std::string SymbolTable::display_name(const FunctionSymbol& sym) const { return elf::display_name(sym.name, policy_); }

std::string demangle(std::string_view name) {
  // Only GNU v3 ABI names ("_Z..."), as eu-stack: __cxa_demangle also takes
  // bare type encodings, and would turn a C function `f` into "float".
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  const std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) {
    std::free(d);
    return z;
  }
  std::string out(d);
  std::free(d);
  return out;
}

namespace {

// perf demangles without options (util/symbol-elf.c: DMGL_NO_OPTS unless
// verbose): no parameter list, no return type, no "[clone .suffix]". From
// the full demangled form, that is: drop the clone suffixes, the trailing
// qualifiers and the parameter list after the name, then a return type
// before it (text up to the last space outside brackets, except the
// space of "operator new", "operator delete", conversion operators).
std::string perf_short_name(std::string d) {
  // Thunks keep their target's parameters (perf 6.1: "non-virtual thunk to
  // clang::ASTReader::hasExternalDefinitions(clang::Decl const*)").
  for (std::string_view thunk : {"non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to "})
    if (d.rfind(thunk, 0) == 0) return d;
  while (d.size() > 2 && d.back() == ']') {
    const auto open = d.rfind(" [clone ");
    if (open == std::string::npos) break;
    d.resize(open);
  }
  // The parameter list: the ')' closing the name's arguments, qualifiers
  // (" const", " &", " noexcept") after it.
  std::size_t close = d.rfind(')');
  if (close == std::string::npos) return d;
  int depth = 0;
  std::size_t open = std::string::npos;
  for (std::size_t i = close + 1; i-- > 0;) {
    if (d[i] == ')') ++depth;
    if (d[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos || open == 0) return d;
  d.resize(open);
  // The return type: the last space outside <> and () before the name.
  // An operator's own characters ("operator<<", "operator()") are no
  // brackets, and the spaces of "operator new", "operator bool" and before
  // an operator's template arguments ("llvm::operator<<
  // <llvm::raw_string_ostream&>") are part of the name.
  constexpr std::string_view kOperatorChars = "+-*/%^&|~!=<>,()[]";
  // The start of "operator" when it ends just before `end` (opchars after
  // it skipped), else npos.
  const auto operator_before = [&](std::size_t end) {
    std::size_t op = end;
    while (op > 0 && kOperatorChars.find(d[op - 1]) != std::string_view::npos) --op;
    return op >= 8 && d.compare(op - 8, 8, "operator") == 0 ? op - 8 : std::string::npos;
  };
  int angle = 0, paren = 0;
  for (std::size_t i = d.size(); i-- > 0;) {
    const char c = d[i];
    if (kOperatorChars.find(c) != std::string_view::npos) {
      if (const std::size_t at = operator_before(i + 1); at != std::string::npos) {
        i = at;  // the next pass looks at the character before "operator"
        continue;
      }
    }
    if (c == '>') ++angle;
    if (c == '<') --angle;
    if (c == ')') ++paren;
    if (c == '(') --paren;
    if (c == ' ' && angle == 0 && paren == 0) {
      if (const std::size_t at = operator_before(i); at != std::string::npos) {
        i = at;
        continue;
      }
      // A conversion operator's type ("llvm::TypeSize::operator unsigned
      // long"): its spaces are the name's.
      if (const std::size_t conv = d.rfind("operator ", i);
          conv != std::string::npos && conv < i && (conv == 0 || d[conv - 1] == ':')) {
        i = conv;
        continue;
      }
      return d.substr(i + 1);
    }
  }
  return d;
}

}  // namespace

std::string display_name(std::string_view name, NamingPolicy policy) {
  if (policy == NamingPolicy::kPerf) {
    const auto at = name.find('@');
    const std::string_view base = at != std::string_view::npos && at > 0 ? name.substr(0, at) : name;
    std::string d = demangle(base);
    if (base.size() > 2 && base[0] == '_' && base[1] == 'Z' && d != base) d = perf_short_name(std::move(d));
    if (at != std::string_view::npos && at > 0) d += name.substr(at);
    return d;
  }
  return demangle(name);
}

}  // namespace sframe::elf
