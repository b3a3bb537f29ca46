// libFuzzer target: an ELF file image. ElfFile::open takes a path, so the
// input goes into an in-memory file (memfd) opened as /proc/self/fd/N.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check_section.hpp"
#include "sframe/elf.hpp"

namespace {

// One memfd for the whole run, rewritten for each input.
int memfd() {
  static const int fd = [] {
    const int f = memfd_create("sframe-fuzz-elf", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("memfd_create");
      __builtin_trap();
    }
    return f;
  }();
  return fd;
}

bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  if (ftruncate(fd, 0) != 0) return false;
  off_t at = 0;
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, at);
    if (w <= 0) return false;
    p += w;
    at += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = memfd();
  if (!write_all(fd, data, size)) {
    std::perror("memfd write");
    __builtin_trap();
  }
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);

  auto file = sframe::elf::ElfFile::open(path);
  if (!file) {
    SFRAME_FUZZ_CHECK(file.error().code == sframe::Errc::kElfError);
    return 0;
  }
  const sframe::elf::ElfInfo& info = file->info();
  SFRAME_FUZZ_CHECK(info.bits == 32 || info.bits == 64);
  for (const auto& sh : file->sections()) sframe::fuzz::g_sink = sh.name.size() + sh.size;
  const std::vector<sframe::elf::Symbol> syms = file->function_symbols();
  for (std::size_t i = 1; i < syms.size(); ++i) SFRAME_FUZZ_CHECK(syms[i - 1].address <= syms[i].address);
  std::string text;
  sframe::tools::append_banner(text, "fuzz.o", sframe::tools::bfd_target_name(info));

  auto data_or = file->sframe_section();
  if (!data_or) {
    const sframe::Errc c = data_or.error().code;
    SFRAME_FUZZ_CHECK(c == sframe::Errc::kNoSFrameSection || c == sframe::Errc::kElfError ||
                      c == sframe::Errc::kBadRelocation);
    return 0;
  }
  const sframe::elf::SFrameSectionData& sec = *data_or;
  if (!sec.owned.empty()) SFRAME_FUZZ_CHECK(sec.bytes.data() == sec.owned.data());
  // Checked in a heap block of exactly its size, so AddressSanitizer sees any
  // read past either end (the file mapping would hide it).
  const auto copy = std::make_unique<std::byte[]>(sec.bytes.size());
  if (!sec.bytes.empty()) std::memcpy(copy.get(), sec.bytes.data(), sec.bytes.size());
  sframe::fuzz::check_section(std::span<const std::byte>(copy.get(), sec.bytes.size()), sec.address);
  return 0;
}
