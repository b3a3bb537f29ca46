// SPDX-License-Identifier: MIT
// sframepp (private): see module_file.hpp.
#include "module_file.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace sframe::bt {
namespace {

// Reads exactly `n` bytes at `off`.
bool read_at(int fd, void* buf, std::size_t n, std::uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = pread(fd, p, n, static_cast<off_t>(off));
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    off += static_cast<std::uint64_t>(got);
  }
  return true;
}

}  // namespace

// ELF64 in the host's byte order: the only kind this process can have loaded.
FileCfi read_file_cfi(const std::string& path) {
  FileCfi out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = std::string("cannot open its file (") + std::strerror(errno) + ")";
    return out;
  }
  const auto fail = [&](std::string why) {
    close(fd);
    out.error = std::move(why);
    return std::move(out);
  };
  struct stat st {};
  Elf64_Ehdr eh{};
  if (fstat(fd, &st) != 0 || !read_at(fd, &eh, sizeof eh, 0)) return fail("its file is not readable");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  constexpr unsigned char kHostData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != kHostData || eh.e_shentsize != sizeof(Elf64_Shdr))
    return fail("its file is not a 64-bit ELF file of this machine's byte order");
  std::uint64_t shnum = eh.e_shnum;
  std::uint32_t shstrndx = eh.e_shstrndx;
  Elf64_Shdr first{};
  if (eh.e_shoff == 0 || eh.e_shoff > file_size || !read_at(fd, &first, sizeof first, eh.e_shoff))
    return fail("its file has no section headers");
  if (shnum == 0) shnum = first.sh_size;  // extended numbering (gABI)
  if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
  if (shnum == 0 || shnum > (file_size - eh.e_shoff) / sizeof(Elf64_Shdr) || shstrndx >= shnum)
    return fail("its section headers run past the end of the file");
  std::vector<Elf64_Shdr> sh(shnum);
  if (!read_at(fd, sh.data(), shnum * sizeof(Elf64_Shdr), eh.e_shoff)) return fail("its section headers are unreadable");
  const Elf64_Shdr& strtab = sh[shstrndx];
  if (strtab.sh_offset > file_size || strtab.sh_size > file_size - strtab.sh_offset)
    return fail("its section name table runs past the end of the file");
  std::string names(strtab.sh_size, '\0');
  if (!read_at(fd, names.data(), names.size(), strtab.sh_offset)) return fail("its section name table is unreadable");
  const auto name_of = [&](const Elf64_Shdr& h) {
    return h.sh_name < names.size() ? std::string_view(names.c_str() + h.sh_name) : std::string_view();
  };
  for (const Elf64_Shdr& h : sh) {
    if (h.sh_type != SHT_PROGBITS) continue;
    if (name_of(h) == ".eh_frame" && (h.sh_flags & SHF_ALLOC) && out.eh_frame_size == 0) {
      out.eh_frame_address = h.sh_addr;
      out.eh_frame_size = h.sh_size;
    } else if (name_of(h) == ".debug_frame" && !(h.sh_flags & SHF_COMPRESSED) && out.debug_frame.empty() &&
               h.sh_offset <= file_size && h.sh_size <= file_size - h.sh_offset) {
      out.debug_frame.resize(h.sh_size);
      out.debug_frame_address = h.sh_addr;
      if (!read_at(fd, out.debug_frame.data(), out.debug_frame.size(), h.sh_offset)) out.debug_frame.clear();
    }
  }
  close(fd);
  return out;
}

}  // namespace sframe::bt
