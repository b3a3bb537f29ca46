// SPDX-License-Identifier: MIT
// ELF access through elfutils libelf: section lookup and .rela.sframe.
#include "sframe/format/byte_order.hpp"
#include "sframe/elf/elf.hpp"
#include "symbol_base.hpp"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace sframe::elf {

namespace {


}  // namespace

struct ElfFile::Impl {
  int fd = -1;
  Elf* elf = nullptr;
  ElfInfo info;
  // relocated_copy(): the file's bytes, relocated, that `elf` reads.
  std::vector<char> image;
  bool relocated = false;
  ~Impl() {
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
  }
};

ElfFile::ElfFile(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
ElfFile::ElfFile(ElfFile&&) noexcept = default;
ElfFile& ElfFile::operator=(ElfFile&&) noexcept = default;
ElfFile::~ElfFile() = default;
const ElfInfo& ElfFile::info() const noexcept { return impl_->info; }
bool ElfFile::relocated() const noexcept { return impl_->relocated; }

Expected<ElfFile> ElfFile::open(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ElfErrc::kElfError, 0);
  auto impl = std::make_unique<Impl>();
  // Non-blocking, and regular files only: a path from a recording (a
  // perf.data's MMAP2 file name) may name a FIFO or a terminal, whose open
  // or read would wait for a writer that never comes.
  impl->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (impl->fd < 0) return make_error(IoErrc::kIoError, 0, static_cast<std::uint64_t>(errno));
  struct stat st {};
  if (::fstat(impl->fd, &st) != 0) return make_error(IoErrc::kIoError, 0, static_cast<std::uint64_t>(errno));
  if (!S_ISREG(st.st_mode)) return make_error(ElfErrc::kElfError, 0);
  impl->elf = elf_begin(impl->fd, ELF_C_READ_MMAP, nullptr);
  if (!impl->elf || elf_kind(impl->elf) != ELF_K_ELF) return make_error(ElfErrc::kElfError, 0);
  GElf_Ehdr eh;
  if (!gelf_getehdr(impl->elf, &eh)) return make_error(ElfErrc::kElfError, 0);
  impl->info.bits = eh.e_ident[EI_CLASS] == ELFCLASS32 ? 32 : 64;
  impl->info.big_endian = eh.e_ident[EI_DATA] == ELFDATA2MSB;
  impl->info.machine = eh.e_machine;
  impl->info.type = eh.e_type;
  return ElfFile(std::move(impl));
}

std::vector<SectionHeader> ElfFile::sections() const {
  std::vector<SectionHeader> out;
  Elf* elf = impl_->elf;
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
    out.push_back({n ? n : "", sh.sh_type, sh.sh_flags, sh.sh_addr, sh.sh_offset, sh.sh_size});
  }
  return out;
}

void* ElfFile::native_handle() const noexcept { return impl_->elf; }

std::optional<SectionBytes> ElfFile::section_bytes(std::string_view name) const {
  Elf* elf = impl_->elf;
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return std::nullopt;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!n || name != n || sh.sh_type == SHT_NOBITS) continue;
    Elf_Data* d = elf_rawdata(scn, nullptr);
    if (!d || (d->d_size && !d->d_buf)) return std::nullopt;
    return SectionBytes{{n, sh.sh_type, sh.sh_flags, sh.sh_addr, sh.sh_offset, sh.sh_size},
                        std::span(static_cast<const std::byte*>(d->d_buf), d->d_size)};
  }
  return std::nullopt;
}

std::vector<ProgramHeader> ElfFile::program_headers() const {
  std::vector<ProgramHeader> out;
  Elf* elf = static_cast<Elf*>(native_handle());
  std::size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return out;
  out.reserve(phnum);
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) continue;
    out.push_back({ph.p_type, ph.p_flags, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz});
  }
  return out;
}

std::optional<FileFacts> consumer_facts(const ElfFile& file, const SFrameSectionData& sframe) {
  if (file.info().type == ET_REL) return std::nullopt;
  FileFacts f;
  for (const auto& ph : file.program_headers())
    if (ph.type == PT_LOAD) f.loads.push_back({ph.vaddr, ph.memsz, (ph.flags & PF_X) != 0});
  f.section_address = sframe.address;
  f.section_size = sframe.bytes.size();
  return f;
}

namespace {

Expected<SFrameSectionData> from_segment(Elf* elf) {
  std::size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return make_error(ElfErrc::kNoSFrameSection, 0);
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != kPtGnuSframeSegment) continue;
    Elf_Data* d = elf_getdata_rawchunk(elf, static_cast<int64_t>(ph.p_offset), ph.p_filesz, ELF_T_BYTE);
    if (!d || (d->d_size && !d->d_buf)) return make_error(ElfErrc::kElfError, ph.p_offset);
    SFrameSectionData out;
    out.name = ".sframe";
    out.address = ph.p_vaddr;
    out.bytes = std::span(static_cast<const std::byte*>(d->d_buf), d->d_size);
    out.from_segment = true;
    return out;
  }
  return make_error(ElfErrc::kNoSFrameSection, 0);
}

struct RelocKind {
  unsigned size;  // bytes written
  bool pcrel;
};

// Relocation types GNU as uses for .sframe start offsets, and their absolute
// and 32-bit siblings. Returns size 0 for anything else.
RelocKind classify(std::uint16_t machine, std::uint32_t type) {
  switch (machine) {
    case EM_X86_64:
      if (type == R_X86_64_PC64) return {8, true};
      if (type == R_X86_64_PC32) return {4, true};
      if (type == R_X86_64_64) return {8, false};
      if (type == R_X86_64_32 || type == R_X86_64_32S) return {4, false};
      break;
    case EM_AARCH64:
      if (type == R_AARCH64_PREL64) return {8, true};
      if (type == R_AARCH64_PREL32) return {4, true};
      if (type == R_AARCH64_ABS64) return {8, false};
      if (type == R_AARCH64_ABS32) return {4, false};
      break;
    case EM_S390:
      if (type == R_390_PC64) return {8, true};
      if (type == R_390_PC32) return {4, true};
      if (type == R_390_64) return {8, false};
      if (type == R_390_32) return {4, false};
      break;
    default:
      break;
  }
  return {0, false};
}

// Applies every RELA section that targets section `target_index` to `out`.
// `pcrel_from_section`: PC-relative values count from the section's start
// rather than from the field (what ld makes of SFrame v1's start fields).
Expected<std::size_t> apply_relocations(Elf* elf, const ElfInfo& info, std::size_t target_index,
                                        std::uint64_t target_addr, std::vector<std::byte>& out,
                                        bool pcrel_from_section = false) {
  std::size_t applied = 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_info != target_index) continue;
    Elf_Data* rel = elf_getdata(scn, nullptr);
    Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
    Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
    if (!rel || !syms || sh.sh_entsize == 0) return make_error(ElfErrc::kBadRelocation, 0);
    const std::size_t n = sh.sh_size / sh.sh_entsize;
    for (std::size_t i = 0; i < n; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(rel, static_cast<int>(i), &r)) return make_error(ElfErrc::kBadRelocation, 0, i);
      const std::uint32_t type = static_cast<std::uint32_t>(GELF_R_TYPE(r.r_info));
      const RelocKind k = classify(info.machine, type);
      if (k.size == 0) return make_error(ElfErrc::kBadRelocation, r.r_offset, type);
      if (r.r_offset > out.size() || k.size > out.size() - r.r_offset)
        return make_error(ElfErrc::kBadRelocation, r.r_offset, out.size());
      GElf_Sym sym;
      if (!gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym))
        return make_error(ElfErrc::kBadRelocation, r.r_offset, GELF_R_SYM(r.r_info));
      // Sections of a relocatable object sit at address 0 (as objdump sees
      // them) unless relocated_copy() placed them.
      std::uint64_t v = sym.st_value + detail::symbol_base(elf, sym) + static_cast<std::uint64_t>(r.r_addend);
      if (k.pcrel) v -= target_addr + (pcrel_from_section ? 0 : r.r_offset);
      endian::store(out.data() + r.r_offset, v, k.size, endian::order(info.big_endian));
      ++applied;
    }
  }
  return applied;
}

}  // namespace

Expected<SFrameSectionData> ElfFile::sframe_section(std::string_view name) const {
  Elf* elf = impl_->elf;
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
    if (name == ".sframe") return from_segment(elf);
    return make_error(ElfErrc::kElfError, 0);
  }
  Elf_Scn* found = nullptr;
  Elf_Scn* by_type = nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
    if (n && name == n) {
      found = scn;
      break;
    }
    if (!by_type && sh.sh_type == kShtGnuSframe) by_type = scn;
  }
  if (!found && name == ".sframe") found = by_type;
  if (!found && name == ".sframe") return from_segment(elf);
  if (!found) return make_error(ElfErrc::kNoSFrameSection, 0);

  GElf_Shdr sh;
  if (!gelf_getshdr(found, &sh) || sh.sh_type == SHT_NOBITS) return make_error(ElfErrc::kElfError, 0);
  Elf_Data* data = elf_rawdata(found, nullptr);
  if (!data || (data->d_size && !data->d_buf)) return make_error(ElfErrc::kElfError, sh.sh_offset);
  SFrameSectionData out;
  const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
  out.name = n ? n : std::string(name);
  out.address = sh.sh_addr;
  out.bytes = std::span(static_cast<const std::byte*>(data->d_buf), data->d_size);

  // objdump 2.47 relocates v2/v3 sections of ET_REL files; 2.40 left v1 alone.
  const bool v2_or_later = out.bytes.size() > 2 && static_cast<std::uint8_t>(out.bytes[2]) >= 2;
  if (impl_->info.type == ET_REL && v2_or_later && !impl_->relocated) {
    out.owned.assign(out.bytes.begin(), out.bytes.end());
    auto applied = apply_relocations(elf, impl_->info, elf_ndxscn(found), sh.sh_addr, out.owned);
    if (!applied) return Unexpected{applied.error()};
    out.relocations_applied = *applied;
    out.bytes = out.owned;
  }
  return out;
}

}  // namespace sframe::elf

namespace sframe::elf {

Expected<ElfFile> ElfFile::relocated_copy() const {
  Elf* elf = impl_->elf;
  const ElfInfo& info = impl_->info;
  if (info.type != ET_REL) return make_error(ElfErrc::kElfError, 0, info.type);
  std::size_t size = 0;
  const char* raw = elf_rawfile(elf, &size);
  GElf_Ehdr eh;
  std::size_t shnum = 0;
  if (!raw || !gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &shnum) != 0) return make_error(ElfErrc::kElfError, 0);
  auto impl = std::make_unique<Impl>();
  impl->info = info;
  impl->relocated = true;
  impl->image.assign(raw, raw + size);
  // Code sections one after another, the first at 0, as a linker would
  // place them: gas gives each (e.g. .text and .text.startup) address 0,
  // and their FDEs would cover the same PCs.
  const bool is64 = info.bits == 64;
  const std::uint64_t addr_field = is64 ? 16 : 12;  // sh_addr in Elf64_Shdr / Elf32_Shdr
  const unsigned addr_size = is64 ? 8 : 4;
  std::uint64_t next = 0;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR)) continue;
    const std::uint64_t align = sh.sh_addralign ? sh.sh_addralign : 1;
    if (align > (std::uint64_t{1} << 32)) return make_error(ElfErrc::kElfError, sh.sh_offset, align);
    const std::uint64_t addr = (next + align - 1) / align * align;
    next = addr + sh.sh_size;
    const std::uint64_t at = eh.e_shoff + elf_ndxscn(scn) * std::uint64_t{eh.e_shentsize} + addr_field;
    if (eh.e_shoff > size || at > size || size - at < addr_size) return make_error(ElfErrc::kElfError, eh.e_shoff);
    endian::store(reinterpret_cast<std::byte*>(impl->image.data() + at), addr, addr_size, endian::order(info.big_endian));
  }
  if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ElfErrc::kElfError, 0);
  impl->elf = elf_memory(impl->image.data(), impl->image.size());
  if (!impl->elf || elf_kind(impl->elf) != ELF_K_ELF) return make_error(ElfErrc::kElfError, 0);
  // The relocations of the unwind sections, applied in the image before
  // anything reads them (libdw reads .eh_frame from it).
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(impl->elf, &shstrndx) != 0) return make_error(ElfErrc::kElfError, 0);
  for (Elf_Scn* scn = elf_nextscn(impl->elf, nullptr); scn; scn = elf_nextscn(impl->elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* n = elf_strptr(impl->elf, shstrndx, sh.sh_name);
    const std::string_view name = n ? n : "";
    if (name != ".eh_frame" && name != ".sframe" && sh.sh_type != kShtGnuSframe) continue;
    if (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset) return make_error(ElfErrc::kElfError, sh.sh_offset);
    const auto* from = reinterpret_cast<const std::byte*>(impl->image.data() + sh.sh_offset);
    std::vector<std::byte> bytes(from, from + sh.sh_size);
    // gas 2.40 relocates a v1 function start against the field, but v1
    // counts it from the section's start; ld converts it, and so do we.
    const bool sframe_v1 = name != ".eh_frame" && bytes.size() > 2 && bytes[2] == std::byte{1};
    auto applied = apply_relocations(impl->elf, info, elf_ndxscn(scn), sh.sh_addr, bytes, sframe_v1);
    if (!applied) return Unexpected{applied.error()};
    // An empty section (an empty .sframe, as some assemblers write) has
    // nothing to copy, and no buffer to copy from.
    if (!bytes.empty()) std::memcpy(impl->image.data() + sh.sh_offset, bytes.data(), bytes.size());
  }
  return ElfFile(std::move(impl));
}

}  // namespace sframe::elf
