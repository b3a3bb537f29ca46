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
#include <vector>

#include "sframe/elf.hpp"
#include "sframe/output_file.hpp"

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
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(Errc::kElfError, 0);
  Fd in{::open(in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return make_error(Errc::kIoError, 0);
  std::unique_ptr<Elf, ElfDeleter> ie(elf_begin(in.fd, ELF_C_READ_MMAP, nullptr));
  GElf_Ehdr eh;
  std::size_t shnum = 0, shstrndx = 0, phnum = 0;
  if (!ie || elf_kind(ie.get()) != ELF_K_ELF || !gelf_getehdr(ie.get(), &eh) ||
      elf_getshdrnum(ie.get(), &shnum) != 0 || elf_getshdrstrndx(ie.get(), &shstrndx) != 0 ||
      elf_getphdrnum(ie.get(), &phnum) != 0 || shstrndx == 0 || shnum + 1 >= SHN_LORESERVE)
    return make_error(Errc::kElfError, 0);
  std::size_t in_size = 0;
  const char* image = elf_rawfile(ie.get(), &in_size);
  if (!image) return make_error(Errc::kElfError, 0);

  std::unique_ptr<Elf, ElfDeleter> oe(elf_begin(out.fd(), ELF_C_WRITE, nullptr));
  if (!oe || !gelf_newehdr(oe.get(), gelf_getclass(ie.get()))) return make_error(Errc::kElfError, 0);
  // Every offset stays the input's (ELF_F_LAYOUT); what is new goes past
  // the old end of the file.
  elf_flagelf(oe.get(), ELF_C_SET, ELF_F_LAYOUT);
  if (phnum != 0) {
    if (!gelf_newphdr(oe.get(), phnum)) return make_error(Errc::kElfError, 0);
    for (std::size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(ie.get(), static_cast<int>(i), &ph) || !gelf_update_phdr(oe.get(), static_cast<int>(i), &ph))
        return make_error(Errc::kElfError, eh.e_phoff);
    }
  }
  const std::uint64_t word = eh.e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
  std::uint64_t end = in_size;
  std::vector<char> names;
  std::size_t name_at = 0;
  for (Elf_Scn* s = elf_nextscn(ie.get(), nullptr); s; s = elf_nextscn(ie.get(), s)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(s, &sh)) return make_error(Errc::kElfError, eh.e_shoff);
    const char* n = elf_strptr(ie.get(), shstrndx, sh.sh_name);
    if (n && name == n) return make_error(Errc::kElfError, sh.sh_offset);
    Elf_Scn* o = elf_newscn(oe.get());
    Elf_Data* d = o ? elf_newdata(o) : nullptr;
    if (!d) return make_error(Errc::kElfError, sh.sh_offset);
    Elf_Data* raw = sh.sh_type == SHT_NOBITS ? nullptr : elf_rawdata(s, nullptr);
    d->d_type = ELF_T_BYTE;
    d->d_align = sh.sh_addralign ? sh.sh_addralign : 1;
    d->d_size = raw ? raw->d_size : sh.sh_size;
    d->d_buf = raw ? raw->d_buf : nullptr;
    if (elf_ndxscn(s) == shstrndx) {
      // The name table grows by `name`: it moves past the end of the file.
      if (!raw) return make_error(Errc::kElfError, sh.sh_offset);
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
    if (!gelf_update_shdr(o, &sh)) return make_error(Errc::kElfError, sh.sh_offset);
  }
  std::vector<std::byte> payload(bytes.begin(), bytes.end());  // must outlive elf_update
  Elf_Scn* scn = elf_newscn(oe.get());
  Elf_Data* d = scn ? elf_newdata(scn) : nullptr;
  GElf_Shdr sh{};
  if (!d) return make_error(Errc::kElfError, 0);
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
  if (!gelf_update_shdr(scn, &sh)) return make_error(Errc::kElfError, 0);

  eh.e_shoff = align_up(sh.sh_offset + sh.sh_size, word);
  eh.e_shnum = static_cast<GElf_Half>(shnum + 1);
  if (!gelf_update_ehdr(oe.get(), &eh)) return make_error(Errc::kElfError, 0);
  if (elf_update(oe.get(), ELF_C_WRITE) < 0) return make_error(Errc::kIoError, 0);
  // libelf fills what no header describes (padding between sections) with
  // zeros: put the input's bytes back there, and everywhere past the ELF
  // header, so every loaded byte is the input's.
  const std::size_t from = eh.e_ehsize;
  for (std::size_t at = from; at < in_size;) {
    const ssize_t w = ::pwrite(out.fd(), image + at, in_size - at, static_cast<off_t>(at));
    if (w <= 0) return make_error(Errc::kIoError, at);
    at += static_cast<std::size_t>(w);
  }
  return {};
}

namespace {

// Stores `v` as an `n`-byte field at `at` in the file's byte order.
void store(std::vector<std::byte>& img, std::uint64_t at, unsigned n, std::uint64_t v, bool big) {
  for (unsigned i = 0; i < n; ++i)
    img[at + (big ? n - 1 - i : i)] = static_cast<std::byte>(v >> (8 * i));
}

}  // namespace

Expected<void> write_with_section_replaced(const std::string& in_path, OutputFile& out, std::string_view name,
                                           std::span<const std::byte> bytes) {
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(Errc::kElfError, 0);
  Fd in{::open(in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return make_error(Errc::kIoError, 0);
  std::unique_ptr<Elf, ElfDeleter> ie(elf_begin(in.fd, ELF_C_READ_MMAP, nullptr));
  GElf_Ehdr eh;
  std::size_t shstrndx = 0, phnum = 0;
  if (!ie || elf_kind(ie.get()) != ELF_K_ELF || !gelf_getehdr(ie.get(), &eh) ||
      elf_getshdrstrndx(ie.get(), &shstrndx) != 0 || elf_getphdrnum(ie.get(), &phnum) != 0)
    return make_error(Errc::kElfError, 0);
  std::size_t in_size = 0;
  const char* image = elf_rawfile(ie.get(), &in_size);
  if (!image) return make_error(Errc::kElfError, 0);
  const bool is64 = eh.e_ident[EI_CLASS] == ELFCLASS64, big = eh.e_ident[EI_DATA] == ELFDATA2MSB;
  Elf_Scn* found = nullptr;
  GElf_Shdr sh{};
  for (Elf_Scn* sc = elf_nextscn(ie.get(), nullptr); sc; sc = elf_nextscn(ie.get(), sc)) {
    if (!gelf_getshdr(sc, &sh)) return make_error(Errc::kElfError, eh.e_shoff);
    const char* n = elf_strptr(ie.get(), shstrndx, sh.sh_name);
    if (n && name == n) {
      found = sc;
      break;
    }
  }
  if (!found) return make_error(Errc::kElfError, eh.e_shoff);
  const std::uint64_t shdr_at = eh.e_shoff + elf_ndxscn(found) * std::uint64_t{eh.e_shentsize};
  if (sh.sh_type == SHT_NOBITS || sh.sh_offset > in_size || sh.sh_size > in_size - sh.sh_offset ||
      shdr_at + eh.e_shentsize > in_size)
    return make_error(Errc::kElfError, shdr_at);
  if (bytes.size() > sh.sh_size) return make_error(Errc::kNotRepresentable, sh.sh_offset, bytes.size());

  std::vector<std::byte> img(reinterpret_cast<const std::byte*>(image),
                             reinterpret_cast<const std::byte*>(image) + in_size);
  std::copy(bytes.begin(), bytes.end(), img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset));
  std::fill(img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset + bytes.size()),
            img.begin() + static_cast<std::ptrdiff_t>(sh.sh_offset + sh.sh_size), std::byte{0});
  // sh_size (ELF64: 8 bytes at 32; ELF32: 4 bytes at 20).
  store(img, shdr_at + (is64 ? offsetof(Elf64_Shdr, sh_size) : offsetof(Elf32_Shdr, sh_size)), is64 ? 8 : 4,
        bytes.size(), big);
  constexpr std::uint32_t kPtGnuSframe = 0x6474e554;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(ie.get(), static_cast<int>(i), &ph)) return make_error(Errc::kElfError, eh.e_phoff);
    if (ph.p_type != kPtGnuSframe || ph.p_offset != sh.sh_offset) continue;
    const std::uint64_t at = eh.e_phoff + i * std::uint64_t{eh.e_phentsize};
    if (at + eh.e_phentsize > in_size) return make_error(Errc::kElfError, at);
    store(img, at + (is64 ? offsetof(Elf64_Phdr, p_filesz) : offsetof(Elf32_Phdr, p_filesz)), is64 ? 8 : 4,
          bytes.size(), big);
    store(img, at + (is64 ? offsetof(Elf64_Phdr, p_memsz) : offsetof(Elf32_Phdr, p_memsz)), is64 ? 8 : 4,
          bytes.size(), big);
  }
  return out.write(img);
}

}  // namespace sframe::elf
