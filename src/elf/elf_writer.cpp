// SPDX-License-Identifier: MIT
// Adding a section to a copy of an ELF file, leaving everything the loader
// reads byte for byte as it was.
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "sframe/format/byte_order.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::elf {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
struct ElfDeleter {
  void operator()(Elf* e) const noexcept { elf_end(e); }
};

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept { return (v + a - 1) / a * a; }

}  // namespace

Expected<void> write_with_section(const std::string& in_path, const std::string& out_path, std::string_view name,
                                  std::uint32_t type, std::span<const std::byte> bytes, std::uint64_t address) {
  // Never written in place: `out_path` may be the input itself (mapped while
  // the copy is made: truncating it would fault on the mapping) or a file a
  // failure must leave as it was. A new copy of an executable stays one.
  auto out = OutputFile::create(out_path, in_path);
  if (!out) return Unexpected{out.error()};
  if (auto ok = write_with_section(in_path, *out, name, type, bytes, address); !ok) return ok;
  return out->commit();
}

Expected<void> write_with_section(const std::string& in_path, OutputFile& out, std::string_view name,
                                  std::uint32_t type, std::span<const std::byte> bytes, std::uint64_t address) {
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ElfErrc::kElfError, 0);
  Fd in{::open(in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return make_error(IoErrc::kIoError, 0);
  std::unique_ptr<Elf, ElfDeleter> ie(elf_begin(in.fd, ELF_C_READ_MMAP, nullptr));
  GElf_Ehdr eh;
  std::size_t shnum = 0, shstrndx = 0, phnum = 0;
  if (!ie || elf_kind(ie.get()) != ELF_K_ELF || !gelf_getehdr(ie.get(), &eh) ||
      elf_getshdrnum(ie.get(), &shnum) != 0 || elf_getshdrstrndx(ie.get(), &shstrndx) != 0 ||
      elf_getphdrnum(ie.get(), &phnum) != 0 || shstrndx == 0 || shnum + 1 >= SHN_LORESERVE)
    return make_error(ElfErrc::kElfError, 0);
  std::size_t in_size = 0;
  const char* image = elf_rawfile(ie.get(), &in_size);
  if (!image) return make_error(ElfErrc::kElfError, 0);

  std::unique_ptr<Elf, ElfDeleter> oe(elf_begin(out.fd(), ELF_C_WRITE, nullptr));
  if (!oe || !gelf_newehdr(oe.get(), gelf_getclass(ie.get()))) return make_error(ElfErrc::kElfError, 0);
  // Every offset stays the input's (ELF_F_LAYOUT); what is new goes past
  // the old end of the file.
  elf_flagelf(oe.get(), ELF_C_SET, ELF_F_LAYOUT);
  if (phnum != 0) {
    if (!gelf_newphdr(oe.get(), phnum)) return make_error(ElfErrc::kElfError, 0);
    for (std::size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(ie.get(), static_cast<int>(i), &ph) || !gelf_update_phdr(oe.get(), static_cast<int>(i), &ph))
        return make_error(ElfErrc::kElfError, eh.e_phoff);
    }
  }
  const std::uint64_t word = eh.e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
  std::uint64_t end = in_size;
  std::vector<char> names;
  std::size_t name_at = 0;
  for (Elf_Scn* s = elf_nextscn(ie.get(), nullptr); s; s = elf_nextscn(ie.get(), s)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(s, &sh)) return make_error(ElfErrc::kElfError, eh.e_shoff);
    const char* n = elf_strptr(ie.get(), shstrndx, sh.sh_name);
    if (n && name == n) return make_error(ElfErrc::kElfError, sh.sh_offset);
    Elf_Scn* o = elf_newscn(oe.get());
    Elf_Data* d = o ? elf_newdata(o) : nullptr;
    if (!d) return make_error(ElfErrc::kElfError, sh.sh_offset);
    Elf_Data* raw = sh.sh_type == SHT_NOBITS ? nullptr : elf_rawdata(s, nullptr);
    d->d_type = ELF_T_BYTE;
    d->d_align = sh.sh_addralign ? sh.sh_addralign : 1;
    d->d_size = raw ? raw->d_size : sh.sh_size;
    d->d_buf = raw ? raw->d_buf : nullptr;
    if (elf_ndxscn(s) == shstrndx) {
      // The name table grows by `name`: it moves past the end of the file.
      if (!raw) return make_error(ElfErrc::kElfError, sh.sh_offset);
      names.assign(static_cast<const char*>(raw->d_buf), static_cast<const char*>(raw->d_buf) + raw->d_size);
      name_at = names.size();
      names.insert(names.end(), name.begin(), name.end());
      names.push_back('\0');
      d->d_buf = names.data();
      d->d_size = names.size();
      sh.sh_offset = end;
      sh.sh_size = names.size();
      end += names.size();
    }
    if (!gelf_update_shdr(o, &sh)) return make_error(ElfErrc::kElfError, sh.sh_offset);
  }
  std::vector<std::byte> payload(bytes.begin(), bytes.end());  // must outlive elf_update
  Elf_Scn* scn = elf_newscn(oe.get());
  Elf_Data* d = scn ? elf_newdata(scn) : nullptr;
  GElf_Shdr sh{};
  if (!d) return make_error(ElfErrc::kElfError, 0);
  d->d_buf = payload.data();
  d->d_size = payload.size();
  d->d_type = ELF_T_BYTE;
  d->d_align = word;
  sh.sh_name = static_cast<GElf_Word>(name_at);
  sh.sh_type = type;
  sh.sh_addr = address;
  sh.sh_offset = align_up(end, word);
  sh.sh_size = payload.size();
  sh.sh_addralign = word;
  if (!gelf_update_shdr(scn, &sh)) return make_error(ElfErrc::kElfError, 0);

  eh.e_shoff = align_up(sh.sh_offset + sh.sh_size, word);
  eh.e_shnum = static_cast<GElf_Half>(shnum + 1);
  if (!gelf_update_ehdr(oe.get(), &eh)) return make_error(ElfErrc::kElfError, 0);
  if (elf_update(oe.get(), ELF_C_WRITE) < 0) return make_error(IoErrc::kIoError, 0);
  // libelf fills what no header describes (padding between sections) with
  // zeros: put the input's bytes back there, and everywhere past the ELF
  // header, so every loaded byte is the input's.
  const std::size_t from = eh.e_ehsize;
  for (std::size_t at = from; at < in_size;) {
    const ssize_t w = ::pwrite(out.fd(), image + at, in_size - at, static_cast<off_t>(at));
    if (w <= 0) return make_error(IoErrc::kIoError, at);
    at += static_cast<std::size_t>(w);
  }
  return {};
}

namespace {

// Stores `v` as an `n`-byte field at `at` in the file's byte order.
void store(std::vector<std::byte>& img, std::uint64_t at, unsigned n, std::uint64_t v, bool big) {
  endian::store(img.data() + at, v, n, endian::order(big));
}

}  // namespace

Expected<void> write_with_section_replaced(const std::string& in_path, OutputFile& out, std::string_view name,
                                           std::span<const std::byte> bytes) {
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ElfErrc::kElfError, 0);
  Fd in{::open(in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return make_error(IoErrc::kIoError, 0);
  std::unique_ptr<Elf, ElfDeleter> ie(elf_begin(in.fd, ELF_C_READ_MMAP, nullptr));
  GElf_Ehdr eh;
  std::size_t shstrndx = 0, phnum = 0;
  if (!ie || elf_kind(ie.get()) != ELF_K_ELF || !gelf_getehdr(ie.get(), &eh) ||
      elf_getshdrstrndx(ie.get(), &shstrndx) != 0 || elf_getphdrnum(ie.get(), &phnum) != 0)
    return make_error(ElfErrc::kElfError, 0);
  std::size_t in_size = 0;
  const char* image = elf_rawfile(ie.get(), &in_size);
  if (!image) return make_error(ElfErrc::kElfError, 0);
  const bool is64 = eh.e_ident[EI_CLASS] == ELFCLASS64, big = eh.e_ident[EI_DATA] == ELFDATA2MSB;
  Elf_Scn* found = nullptr;
  GElf_Shdr sh{};
  for (Elf_Scn* sc = elf_nextscn(ie.get(), nullptr); sc; sc = elf_nextscn(ie.get(), sc)) {
    if (!gelf_getshdr(sc, &sh)) return make_error(ElfErrc::kElfError, eh.e_shoff);
    const char* n = elf_strptr(ie.get(), shstrndx, sh.sh_name);
    if (n && name == n) {
      found = sc;
      break;
    }
  }
  if (!found) return make_error(ElfErrc::kElfError, eh.e_shoff);
  const std::uint64_t shdr_at = eh.e_shoff + elf_ndxscn(found) * std::uint64_t{eh.e_shentsize};
  if (sh.sh_type == SHT_NOBITS || sh.sh_offset > in_size || sh.sh_size > in_size - sh.sh_offset ||
      shdr_at + eh.e_shentsize > in_size)
    return make_error(ElfErrc::kElfError, shdr_at);
  if (bytes.size() > sh.sh_size) return make_error(EncodeErrc::kNotRepresentable, sh.sh_offset, bytes.size());

  std::vector<std::byte> img(reinterpret_cast<const std::byte*>(image),
                             reinterpret_cast<const std::byte*>(image) + in_size);
  std::copy(bytes.begin(), bytes.end(), img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset));
  std::fill(img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset + bytes.size()),
            img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset + sh.sh_size), std::byte{0});
  // sh_size (ELF64: 8 bytes at 32; ELF32: 4 bytes at 20).
  store(img, shdr_at + (is64 ? offsetof(Elf64_Shdr, sh_size) : offsetof(Elf32_Shdr, sh_size)), is64 ? 8 : 4,
        bytes.size(), big);
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(ie.get(), static_cast<int>(i), &ph)) return make_error(ElfErrc::kElfError, eh.e_phoff);
    if (ph.p_type != kPtGnuSframeSegment || ph.p_offset != sh.sh_offset) continue;
    const std::uint64_t at = eh.e_phoff + i * std::uint64_t{eh.e_phentsize};
    if (at + eh.e_phentsize > in_size) return make_error(ElfErrc::kElfError, at);
    store(img, at + (is64 ? offsetof(Elf64_Phdr, p_filesz) : offsetof(Elf32_Phdr, p_filesz)), is64 ? 8 : 4,
          bytes.size(), big);
    store(img, at + (is64 ? offsetof(Elf64_Phdr, p_memsz) : offsetof(Elf32_Phdr, p_memsz)), is64 ? 8 : 4,
          bytes.size(), big);
  }
  return out.write(img);
}

namespace {

// The highest segment end plan_loadable_section() builds on (2^63: far
// above every user address space; its page-aligned sums cannot wrap).
constexpr std::uint64_t kAddressLimit = std::uint64_t{1} << 63;

// Reads an `n`-byte field at `at` in the file's byte order.
std::uint64_t load(std::span<const std::byte> img, std::uint64_t at, unsigned n, bool big) {
  return endian::load(img.data() + at, n, endian::order(big));
}

bool power_of_two(std::uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// An ELF64 program header stored at `at` in the file's byte order (ELF gABI,
// "Program Header").
void store_phdr(std::vector<std::byte>& img, std::uint64_t at, const GElf_Phdr& p, bool big) {
  store(img, at + offsetof(Elf64_Phdr, p_type), 4, p.p_type, big);
  store(img, at + offsetof(Elf64_Phdr, p_flags), 4, p.p_flags, big);
  store(img, at + offsetof(Elf64_Phdr, p_offset), 8, p.p_offset, big);
  store(img, at + offsetof(Elf64_Phdr, p_vaddr), 8, p.p_vaddr, big);
  store(img, at + offsetof(Elf64_Phdr, p_paddr), 8, p.p_paddr, big);
  store(img, at + offsetof(Elf64_Phdr, p_filesz), 8, p.p_filesz, big);
  store(img, at + offsetof(Elf64_Phdr, p_memsz), 8, p.p_memsz, big);
  store(img, at + offsetof(Elf64_Phdr, p_align), 8, p.p_align, big);
}

// Whether dynamic tag `tag` holds an address (d_ptr) rather than a value:
// the gABI's ("Dynamic Section") classic address tags, the even tags from
// DT_ENCODING up to DT_LOOS, the DT_ADDRRNGLO..DT_ADDRRNGHI range, and the
// GNU symbol-version tables.
bool address_tag(std::int64_t tag) noexcept {
  switch (tag) {
    case DT_PLTGOT:
    case DT_HASH:
    case DT_STRTAB:
    case DT_SYMTAB:
    case DT_RELA:
    case DT_INIT:
    case DT_FINI:
    case DT_REL:
    case DT_DEBUG:
    case DT_JMPREL:
    case DT_INIT_ARRAY:
    case DT_FINI_ARRAY:
    case DT_VERSYM:
    case DT_VERDEF:
    case DT_VERNEED:
      return true;
    default:
      break;
  }
  if (tag >= DT_ENCODING && tag < DT_LOOS) return tag % 2 == 0;
  return tag >= DT_ADDRRNGLO && tag <= DT_ADDRRNGHI;
}

// The addresses the dynamic section (PT_DYNAMIC) holds in address tags, and
// the file offsets of those entries' d_ptr fields.
std::vector<std::pair<std::uint64_t, std::uint64_t>> dynamic_addresses(Elf* e, std::span<const std::byte> img,
                                                                       bool big) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  std::size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0) return out;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_type != PT_DYNAMIC) continue;
    if (ph.p_offset > img.size() || ph.p_filesz > img.size() - ph.p_offset) return out;
    for (std::uint64_t at = ph.p_offset; at + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz; at += sizeof(Elf64_Dyn)) {
      const auto tag = static_cast<std::int64_t>(load(img, at, 8, big));
      if (tag == DT_NULL) break;
      if (address_tag(tag)) out.emplace_back(load(img, at + 8, 8, big), at + 8);
    }
  }
  return out;
}

// Whether `p` is the PT_LOAD that maps the program-header table, file
// bytes [table, end).
bool holds_table(const GElf_Phdr& p, std::uint64_t table, std::uint64_t end) noexcept {
  return p.p_type == PT_LOAD && p.p_offset <= table && p.p_filesz >= end - p.p_offset;
}

// Decides whether the program-header table of `e` can grow in place to
// plan.phnum entries (LoadablePlan::table_in_place): the sections after it in
// its PT_LOAD move up into that segment's slack. Fills plan's table_in_place,
// shift_from, shift_end, shift and grown_end, or returns why it cannot.
// Only sections that nothing but program headers and the dynamic section
// find move (notes, .interp, the dynamic linker's tables): code may hold the
// address of anything else (a static executable's .rela.plt, through
// __rela_iplt_start), which a copy cannot update.
std::string grow_in_place(Elf* e, const GElf_Ehdr& eh, std::span<const std::byte> img, LoadablePlan& plan) {
  const bool big = eh.e_ident[EI_DATA] == ELFDATA2MSB;
  std::size_t phnum = 0, shnum = 0, shstrndx = 0;
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || elf_getphdrnum(e, &phnum) != 0)
    return "unreadable program headers";
  if (eh.e_shoff == 0 || elf_getshdrnum(e, &shnum) != 0 || shnum == 0 || elf_getshdrstrndx(e, &shstrndx) != 0)
    return "no section headers to show what follows the program headers";
  const std::uint64_t table = eh.e_phoff, old_end = table + phnum * sizeof(Elf64_Phdr),
                      new_end = table + plan.phnum * sizeof(Elf64_Phdr);
  std::vector<GElf_Phdr> phdrs(phnum);
  std::optional<std::size_t> holder;
  for (std::size_t i = 0; i < phnum; ++i) {
    if (!gelf_getphdr(e, static_cast<int>(i), &phdrs[i])) return "unreadable program headers";
    const auto& p = phdrs[i];
    if (holds_table(p, table, old_end) && !holder) holder = i;
  }
  if (!holder) return "no PT_LOAD maps the program headers";
  if (phdrs[*holder].p_filesz > img.size() - phdrs[*holder].p_offset) return "the program headers' segment passes the end of the file";
  const GElf_Phdr load_ph = phdrs[*holder];
  const std::uint64_t seg_end = load_ph.p_offset + load_ph.p_filesz;
  const std::uint64_t bias = load_ph.p_vaddr - load_ph.p_offset;
  const auto dyn = dynamic_addresses(e, img, big);
  struct Moved {
    std::string name;
    GElf_Shdr sh;
  };
  std::vector<Moved> tail;
  std::uint64_t from = seg_end, align = 1;
  for (Elf_Scn* s = elf_nextscn(e, nullptr); s; s = elf_nextscn(e, s)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(s, &sh)) return "unreadable section headers";
    const char* n = elf_strptr(e, shstrndx, sh.sh_name);
    std::string name = n ? n : "?";
    if (sh.sh_type == SHT_NOBITS || sh.sh_offset < old_end || sh.sh_offset >= seg_end) {
      if (sh.sh_type != SHT_NOBITS && sh.sh_size != 0 && sh.sh_offset < old_end && sh.sh_offset + sh.sh_size > table)
        return name + " overlaps the program headers";
      continue;
    }
    if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_addr - sh.sh_offset != bias || sh.sh_size > seg_end - sh.sh_offset)
      return name + " is in the program headers' segment but not loaded with it";
    from = std::min<std::uint64_t>(from, sh.sh_offset);
    align = std::max<std::uint64_t>(align, sh.sh_addralign);
    tail.push_back({std::move(name), sh});
  }
  if (!power_of_two(align)) return "a section alignment that is not a power of two";
  const std::uint64_t shift = from >= new_end ? 0 : align_up(new_end - from, align);
  if (shift != 0) {
    for (const auto& m : tail) {
      const bool found_by_dynamic = std::any_of(dyn.begin(), dyn.end(), [&](const auto& d) { return d.first == m.sh.sh_addr; });
      if (m.sh.sh_size != 0 && m.sh.sh_type != SHT_NOTE && m.name != ".interp" && !found_by_dynamic)
        return m.name + " follows the program headers, and code may hold its address";
    }
    for (std::size_t i = 0; i < phnum; ++i) {
      const auto& p = phdrs[i];
      if (p.p_type == PT_LOAD || p.p_type == PT_PHDR || p.p_filesz == 0) continue;
      const bool inside = p.p_offset >= from && p.p_offset + p.p_filesz <= seg_end;
      const bool apart = p.p_offset + p.p_filesz <= from || p.p_offset >= seg_end;
      if (!inside && !apart) return "a program header covers both moved and unmoved bytes";
    }
  }
  // The segment grows over its slack: file bytes and pages nothing else uses.
  const std::uint64_t grown = std::max(seg_end + shift, new_end);
  if (grown > seg_end) {
    std::uint64_t limit = img.size();
    for (std::size_t i = 0; i < phnum; ++i) {
      const auto& p = phdrs[i];
      if (p.p_type != PT_LOAD || i == *holder) continue;
      if (p.p_offset + p.p_filesz > seg_end) limit = std::min(limit, std::max(p.p_offset, seg_end));
      if (p.p_vaddr + p.p_memsz > load_ph.p_vaddr + load_ph.p_filesz) {
        const std::uint64_t page_start = p.p_vaddr / plan.page * plan.page;
        const std::uint64_t room = page_start > load_ph.p_vaddr + load_ph.p_filesz
                                       ? page_start - (load_ph.p_vaddr + load_ph.p_filesz) : 0;
        limit = std::min(limit, seg_end + room);
      }
    }
    for (Elf_Scn* s = elf_nextscn(e, nullptr); s; s = elf_nextscn(e, s)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(s, &sh)) return "unreadable section headers";
      if (sh.sh_type != SHT_NOBITS && sh.sh_size != 0 && sh.sh_offset + sh.sh_size > seg_end)
        limit = std::min(limit, std::max<std::uint64_t>(sh.sh_offset, seg_end));
    }
    if (eh.e_shoff + shnum * std::uint64_t{eh.e_shentsize} > seg_end)
      limit = std::min(limit, std::max<std::uint64_t>(eh.e_shoff, seg_end));
    if (load_ph.p_memsz != load_ph.p_filesz) return "the program headers' segment has more bytes in memory than in the file";
    if (grown > limit)
      return "the program headers' segment has " + std::to_string(limit - seg_end) + " bytes of slack, " +
             std::to_string(grown - seg_end) + " needed";
  }
  plan.table_in_place = true;
  plan.shift_from = from;
  plan.shift_end = seg_end;
  plan.shift = shift;
  plan.grown_end = grown;
  return {};
}

}  // namespace

Expected<LoadablePlan> plan_loadable_section(const ElfFile& file, bool retarget) {
  Elf* e = static_cast<Elf*>(file.native_handle());
  GElf_Ehdr eh;
  std::size_t size = 0;
  if (!gelf_getehdr(e, &eh) || !elf_rawfile(e, &size)) return make_error(ElfErrc::kElfError, 0);
  // Only 64-bit files: every SFrame ABI (x86-64, AArch64, s390x) is 64-bit.
  if (gelf_getclass(e) != ELFCLASS64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
    return make_error(ElfErrc::kElfError, 0);
  const auto phdrs = file.program_headers();
  std::uint64_t page = 4096, end = 0;
  const ProgramHeader* lowest = nullptr;
  std::size_t index = 0;
  for (const auto& ph : phdrs) {
    const std::uint64_t at = eh.e_phoff + index++ * std::uint64_t{eh.e_phentsize};
    if (ph.type == kPtGnuSframeSegment && !retarget) return make_error(ElfErrc::kElfError, at);
    if (ph.type != PT_LOAD) continue;
    GElf_Phdr raw;
    if (!gelf_getphdr(e, static_cast<int>(index - 1), &raw)) return make_error(ElfErrc::kElfError, at);
    if (raw.p_align > 1 && !power_of_two(raw.p_align)) return make_error(ElfErrc::kElfError, at, raw.p_align);
    page = std::max<std::uint64_t>(page, raw.p_align);
    // Room above the segment for a page-aligned one (no wrap-around).
    if (ph.memsz > kAddressLimit || ph.vaddr > kAddressLimit - ph.memsz) return make_error(ElfErrc::kElfError, at);
    end = std::max(end, ph.vaddr + ph.memsz);
    if (!lowest || ph.vaddr < lowest->vaddr) lowest = &ph;
  }
  const bool has_sframe = std::any_of(phdrs.begin(), phdrs.end(), [](const auto& p) { return p.type == kPtGnuSframeSegment; });
  if (!lowest || (retarget && !has_sframe)) return make_error(ElfErrc::kElfError, eh.e_phoff);
  LoadablePlan plan;
  plan.page = page;
  plan.retarget = retarget;
  plan.phnum = phdrs.size() + (retarget ? 1 : 2);
  if (plan.phnum >= PN_XNUM) return make_error(ElfErrc::kElfError, eh.e_phoff, plan.phnum);
  // The lowest PT_LOAD's bias (p_vaddr - p_offset) kept for the new one
  // when it is page-aligned: older kernels set AT_PHDR to that bias plus
  // e_phoff. Else (never seen in linked files) only the congruence the ELF
  // gABI requires (p_vaddr = p_offset modulo p_align).
  const std::uint64_t bias = lowest->vaddr - lowest->offset;
  if (lowest->vaddr >= lowest->offset && bias % page == 0) {
    plan.vaddr = align_up(std::max(end, size + bias), page);
    plan.offset = plan.vaddr - bias;
  } else {
    plan.offset = align_up(size, page);
    plan.vaddr = align_up(end, page);
  }
  // The gap between the file's end and the segment is written out as
  // zeros (a non-PIE file's .bss, typically): bounded.
  if (plan.offset - size > kMaxGap) return make_error(EncodeErrc::kNotRepresentable, eh.e_phoff, plan.offset - size);
  std::span<const std::byte> img(static_cast<const std::byte*>(static_cast<const void*>(elf_rawfile(e, nullptr))), size);
  plan.no_room = grow_in_place(e, eh, img, plan);
  plan.address = plan.table_in_place ? plan.vaddr : plan.vaddr + align_up(plan.phnum * sizeof(Elf64_Phdr), 8);
  return plan;
}

Expected<void> write_with_loadable_section(const std::string& in_path, OutputFile& out, std::string_view name,
                                           std::span<const std::byte> bytes, std::uint64_t address, bool retarget) {
  auto file = ElfFile::open(in_path);
  if (!file) return Unexpected{file.error()};
  auto plan = plan_loadable_section(*file, retarget);
  if (!plan) return Unexpected{plan.error()};
  if (plan->address != address) return make_error(EncodeErrc::kNotRepresentable, 0, plan->address);
  Elf* e = static_cast<Elf*>(file->native_handle());
  GElf_Ehdr eh;
  std::size_t in_size = 0, phnum = 0, shnum = 0, shstrndx = 0;
  const char* raw = elf_rawfile(e, &in_size);
  if (!raw || !gelf_getehdr(e, &eh) || elf_getphdrnum(e, &phnum) != 0) return make_error(ElfErrc::kElfError, 0);
  const bool big = eh.e_ident[EI_DATA] == ELFDATA2MSB;
  const bool has_shdrs = eh.e_shoff != 0 && eh.e_shnum != 0;
  // Extended numbering (e_shnum 0 or e_shstrndx SHN_XINDEX) is left alone:
  // linked files with 65280 sections do not exist in practice.
  if (eh.e_shoff != 0 && (eh.e_shnum == 0 || eh.e_shstrndx == SHN_XINDEX || eh.e_shentsize != sizeof(Elf64_Shdr)))
    return make_error(ElfErrc::kElfError, eh.e_shoff);
  if (has_shdrs && (elf_getshdrnum(e, &shnum) != 0 || elf_getshdrstrndx(e, &shstrndx) != 0 ||
                    shstrndx == 0 || shnum + 1 >= SHN_LORESERVE))
    return make_error(ElfErrc::kElfError, eh.e_shoff);
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return make_error(ElfErrc::kElfError, eh.e_phoff);

  // The new segment: [section bytes] with the table in place; else
  // [program headers][pad to 8][section bytes].
  const std::uint64_t table = plan->phnum * sizeof(Elf64_Phdr);
  const std::uint64_t table_at = plan->table_in_place ? eh.e_phoff : plan->offset;
  const std::uint64_t sec_off = plan->offset + (plan->address - plan->vaddr);
  const std::uint64_t seg_size = (plan->address - plan->vaddr) + bytes.size();
  std::vector<std::byte> img(sec_off + bytes.size());
  std::memcpy(img.data(), raw, in_size);
  std::copy(bytes.begin(), bytes.end(), img.begin() + static_cast<std::ptrdiff_t>(sec_off));

  // In place: the sections after the table move up by `shift` (into slack
  // the plan found unused), and what finds them follows: program headers
  // inside the moved bytes, the dynamic section's addresses, section
  // headers and symbols (below). The bytes they left, up to the grown
  // table, are zeroed.
  const std::uint64_t from = plan->shift_from, upto = plan->shift_end, shift = plan->shift;
  const std::uint64_t old_table_end = eh.e_phoff + phnum * sizeof(Elf64_Phdr);
  std::uint64_t from_addr = 0;  // the moved bytes' first address
  const auto moved = [&](std::uint64_t offset) { return shift != 0 && offset >= from && offset < upto; };
  if (plan->table_in_place && shift != 0) {
    std::memmove(img.data() + from + shift, raw + from, upto - from);
    std::fill(img.begin() + static_cast<std::ptrdiff_t>(old_table_end),
              img.begin() + static_cast<std::ptrdiff_t>(from + shift), std::byte{0});
  }

  std::vector<GElf_Phdr> phdrs;
  std::size_t last_load = 0;
  bool grown = false;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph)) return make_error(ElfErrc::kElfError, eh.e_phoff);
    if (plan->table_in_place && !grown && holds_table(ph, eh.e_phoff, old_table_end)) {
      grown = true;
      from_addr = ph.p_vaddr + (from - ph.p_offset);
      ph.p_filesz = ph.p_memsz = std::max(ph.p_filesz, plan->grown_end - ph.p_offset);
    } else if (ph.p_type != PT_LOAD && ph.p_type != PT_PHDR && ph.p_filesz != 0 && moved(ph.p_offset)) {
      ph.p_offset += shift;
      ph.p_vaddr += shift;
      ph.p_paddr += shift;
    }
    if (ph.p_type == PT_PHDR) {
      ph.p_offset = table_at;
      ph.p_vaddr = ph.p_paddr = plan->table_in_place ? ph.p_vaddr : plan->vaddr;
      ph.p_filesz = ph.p_memsz = table;
    } else if (ph.p_type == kPtGnuSframeSegment) {
      ph.p_offset = sec_off;
      ph.p_vaddr = ph.p_paddr = address;
      ph.p_filesz = ph.p_memsz = bytes.size();
    }
    phdrs.push_back(ph);
    if (ph.p_type == PT_LOAD) last_load = phdrs.size();
  }
  GElf_Phdr seg{};
  seg.p_type = PT_LOAD;
  seg.p_flags = PF_R;
  seg.p_offset = plan->offset;
  seg.p_vaddr = seg.p_paddr = plan->vaddr;
  seg.p_filesz = seg.p_memsz = seg_size;
  seg.p_align = plan->page;
  phdrs.insert(phdrs.begin() + static_cast<std::ptrdiff_t>(last_load), seg);
  if (!retarget) {
    GElf_Phdr sf{};
    sf.p_type = kPtGnuSframeSegment;
    sf.p_flags = PF_R;
    sf.p_offset = sec_off;
    sf.p_vaddr = sf.p_paddr = address;
    sf.p_filesz = sf.p_memsz = bytes.size();
    sf.p_align = 8;
    phdrs.push_back(sf);
  }
  if (phdrs.size() != plan->phnum) return make_error(ElfErrc::kElfError, eh.e_phoff);
  for (std::size_t i = 0; i < phdrs.size(); ++i) store_phdr(img, table_at + i * sizeof(Elf64_Phdr), phdrs[i], big);
  store(img, offsetof(Elf64_Ehdr, e_phoff), 8, table_at, big);
  store(img, offsetof(Elf64_Ehdr, e_phnum), 2, plan->phnum, big);
  const std::uint64_t upto_addr = from_addr + (upto - from);
  if (shift != 0) {
    // The dynamic section is in another segment: its entries are where
    // they were in the file.
    for (const auto& [addr, at] : dynamic_addresses(e, {reinterpret_cast<const std::byte*>(raw), in_size}, big))
      if (addr >= from_addr && addr < upto_addr) store(img, at, 8, addr + shift, big);
  }
  if (!has_shdrs) return out.write(img);

  // Section headers: the input's, `name`'s added (or retargeted), and the
  // name table grown when a name is added; all after the segment, unmapped.
  if (eh.e_shoff + std::uint64_t{shnum} * sizeof(Elf64_Shdr) > in_size) return make_error(ElfErrc::kElfError, eh.e_shoff);
  std::vector<std::byte> shdrs(reinterpret_cast<const std::byte*>(raw) + eh.e_shoff,
                               reinterpret_cast<const std::byte*>(raw) + eh.e_shoff + shnum * sizeof(Elf64_Shdr));
  std::optional<std::size_t> existing;
  std::vector<bool> moved_index(shnum, false);
  for (std::size_t i = 1; i < shnum; ++i) {
    Elf_Scn* s = elf_getscn(e, i);
    GElf_Shdr sh;
    if (!s || !gelf_getshdr(s, &sh)) return make_error(ElfErrc::kElfError, eh.e_shoff + i * sizeof(Elf64_Shdr));
    const char* n = elf_strptr(e, shstrndx, sh.sh_name);
    if (n && name == n && !existing) existing = i;
    if (sh.sh_type != SHT_NOBITS && moved(sh.sh_offset)) {
      moved_index[i] = true;
      const std::uint64_t h = i * sizeof(Elf64_Shdr);
      store(shdrs, h + offsetof(Elf64_Shdr, sh_offset), 8, sh.sh_offset + shift, big);
      store(shdrs, h + offsetof(Elf64_Shdr, sh_addr), 8, sh.sh_addr + shift, big);
    }
  }
  // Symbols defined in a moved section (glibc's __abi_tag in .note.ABI-tag)
  // keep pointing at their bytes; a moved symbol table is patched where it
  // now lies.
  for (std::size_t i = 1; shift != 0 && i < shnum; ++i) {
    GElf_Shdr sh;
    if (!gelf_getshdr(elf_getscn(e, i), &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)) continue;
    const std::uint64_t at = sh.sh_offset + (moved_index[i] ? shift : 0);
    if (sh.sh_offset > in_size || sh.sh_size > in_size - sh.sh_offset) return make_error(ElfErrc::kElfError, sh.sh_offset);
    for (std::uint64_t k = 0; k + sizeof(Elf64_Sym) <= sh.sh_size; k += sizeof(Elf64_Sym)) {
      const std::uint64_t ndx = load(img, at + k + offsetof(Elf64_Sym, st_shndx), 2, big);
      if (ndx == 0 || ndx >= shnum || !moved_index[ndx]) continue;
      const std::uint64_t v = at + k + offsetof(Elf64_Sym, st_value);
      store(img, v, 8, load(img, v, 8, big) + shift, big);
    }
  }
  // A section `name` that exists (retargeted; or one no segment maps, as
  // lld 14 writes) has its header pointed at the new bytes; a file without
  // one (objcopy --remove-section leaves PT_GNU_SFRAME) gets one.
  std::uint64_t name_at = 0;
  if (!existing) {
    // The name table, grown by `name`, moves after the segment.
    GElf_Shdr st;
    Elf_Scn* s = elf_getscn(e, shstrndx);
    if (!s || !gelf_getshdr(s, &st) || st.sh_type == SHT_NOBITS || st.sh_offset + st.sh_size > in_size)
      return make_error(ElfErrc::kElfError, eh.e_shoff + shstrndx * sizeof(Elf64_Shdr));
    const std::uint64_t at = img.size();
    img.insert(img.end(), reinterpret_cast<const std::byte*>(raw) + st.sh_offset,
               reinterpret_cast<const std::byte*>(raw) + st.sh_offset + st.sh_size);
    name_at = st.sh_size;
    for (char c : name) img.push_back(static_cast<std::byte>(c));
    img.push_back(std::byte{0});
    const std::uint64_t h = shstrndx * sizeof(Elf64_Shdr);
    store(shdrs, h + offsetof(Elf64_Shdr, sh_offset), 8, at, big);
    store(shdrs, h + offsetof(Elf64_Shdr, sh_size), 8, img.size() - at, big);
    shdrs.resize(shdrs.size() + sizeof(Elf64_Shdr));
  }
  const std::uint64_t h = (existing ? *existing : shnum) * sizeof(Elf64_Shdr);
  if (!existing) {
    store(shdrs, h + offsetof(Elf64_Shdr, sh_name), 4, name_at, big);
    store(shdrs, h + offsetof(Elf64_Shdr, sh_addralign), 8, 8, big);
  }
  store(shdrs, h + offsetof(Elf64_Shdr, sh_type), 4, kShtGnuSframe, big);
  store(shdrs, h + offsetof(Elf64_Shdr, sh_flags), 8, load(shdrs, h + offsetof(Elf64_Shdr, sh_flags), 8, big) | SHF_ALLOC, big);
  store(shdrs, h + offsetof(Elf64_Shdr, sh_addr), 8, address, big);
  store(shdrs, h + offsetof(Elf64_Shdr, sh_offset), 8, sec_off, big);
  store(shdrs, h + offsetof(Elf64_Shdr, sh_size), 8, bytes.size(), big);
  const std::uint64_t shoff = align_up(img.size(), 8);
  img.resize(shoff);
  img.insert(img.end(), shdrs.begin(), shdrs.end());
  store(img, offsetof(Elf64_Ehdr, e_shoff), 8, shoff, big);
  store(img, offsetof(Elf64_Ehdr, e_shnum), 2, shdrs.size() / sizeof(Elf64_Shdr), big);
  return out.write(img);
}

}  // namespace sframe::elf
