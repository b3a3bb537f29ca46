// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s module tables on disk (table_cache.hpp).
#include "table_cache.hpp"

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libelf.h>
#include <xxhash.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include "perf_data.hpp"
#include "sframe/elf/output_file.hpp"
#include "sframe/elf/symbols.hpp"

namespace sframe::record {
namespace {

// The file's first bytes and the layout of its header (bump kFormat when
// Header changes). What a table holds (record_abi.h's layout, the builder's
// rules) is this program's: the header names the build that wrote the
// file (builder_id()), and no other build reads it.
constexpr std::array<char, 8> kMagic = {'S', 'F', 'R', 'T', 'A', 'B', 'L', 'E'};
constexpr std::uint32_t kFormat = 3;

// The GNU build-id (NT_GNU_BUILD_ID, lower-case hex) of the loaded object
// that holds this code: a new build of the table builder has another one
// (a build-id is a hash of the linked object's contents), so its tables
// are built again rather than read with another build's layout. Empty
// when the object has none: the cache is then not used.
const std::string& builder_id() {
  static const std::string id = [] {
    struct Find {
      std::uintptr_t at;
      std::string id;
    } find{reinterpret_cast<std::uintptr_t>(&kMagic), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
          auto& f = *static_cast<Find*>(data);
          bool here = false;
          for (std::size_t i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
            if (ph.p_type == PT_LOAD && f.at >= start && f.at - start < ph.p_memsz) here = true;
          }
          if (!here) return 0;
          for (std::size_t i = 0; i < info->dlpi_phnum && f.id.empty(); ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const auto* notes = reinterpret_cast<const std::byte*>(info->dlpi_addr + ph.p_vaddr);
            if (auto note = elf::gnu_build_id({notes, ph.p_memsz})) f.id = std::move(*note);
          }
          return 1;
        },
        &find);
    return find.id;
  }();
  return id;
}

// TableStats as the file holds it: these fields, in this order.
constexpr std::size_t kStats = 10;
std::array<std::uint64_t, kStats> stats_fields(const TableStats& s) {
  return {s.modules,           s.pages,          s.rows,           s.max_page_rows, s.generated_modules,
          s.unsupported_rules, s.overflow_pages, s.sframe_bytes,   s.eh_frame_bytes, s.table_bytes};
}
TableStats stats_of(const std::array<std::uint64_t, kStats>& f) {
  TableStats s;
  s.modules = f[0];
  s.pages = f[1];
  s.rows = f[2];
  s.max_page_rows = f[3];
  s.generated_modules = f[4];
  s.unsupported_rules = f[5];
  s.overflow_pages = f[6];
  s.sframe_bytes = f[7];
  s.eh_frame_bytes = f[8];
  s.table_bytes = f[9];
  return s;
}

// The header, in host byte order (a cache of this machine).
struct Header {
  std::array<char, 8> magic;
  std::uint32_t format;
  std::uint32_t reserved;  // 0
  std::uint64_t digest;    // XXH3 (64 bits) of the blocks
  std::uint64_t base;
  std::uint64_t blocks;
  std::array<std::uint64_t, kStats> stats;
  std::array<char, 128> builder;  // builder_id(), NUL-padded
};
static_assert(sizeof(Header) == 40 + 8 * kStats + 128);

std::array<char, 128> builder_field() {
  std::array<char, 128> f{};
  const std::string& id = builder_id();
  std::memcpy(f.data(), id.data(), std::min(id.size(), f.size()));
  return f;
}

// XXH3 reads a table of megabytes several times faster than zlib's CRC-32
// did (a table read back is checked at every recording).
std::uint64_t digest_of(std::span<const sframe_record_block> blocks) {
  return XXH3_64bits(blocks.data(), blocks.size_bytes());
}

bool hex(std::string_view id) {
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

constexpr std::string_view kContentPrefix = "xxh128-";

// A build-id as elf::build_id() gives it, or a content_key(): nothing
// else names a file (no '/', no '.').
bool cache_key(std::string_view id) {
  if (id.starts_with(kContentPrefix)) return id.size() == kContentPrefix.size() + 32 && hex(id.substr(kContentPrefix.size()));
  return id.size() >= 2 && id.size() <= 128 && hex(id);
}

bool read_all(int fd, void* dst, std::size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n) {
    const ssize_t got = ::read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

std::string TableCache::content_key(const elf::ElfFile& file) {
  std::size_t size = 0;
  const char* image = elf_rawfile(static_cast<Elf*>(file.native_handle()), &size);
  if (!image || size == 0) return {};
  // The canonical form: big-endian, as xxhsum prints it.
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(image, size));
  return std::string(kContentPrefix) + perf::lowercase_hex(std::as_bytes(std::span(c.digest)));
}

std::string TableCache::path_of(std::string_view build_id) const {
  return dir_ + "/" + std::string(build_id) + ".table";
}

std::optional<CachedTable> TableCache::load(std::string_view build_id) const {
  if (dir_.empty() || !cache_key(build_id) || builder_id().empty()) return std::nullopt;
  const int fd = ::open(path_of(build_id).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<CachedTable> out;
  struct stat st {};
  Header h{};
  // The size is checked against the header before anything is allocated.
  if (fstat(fd, &st) == 0 && read_all(fd, &h, sizeof h) && h.magic == kMagic && h.format == kFormat &&
      h.builder == builder_field() && h.blocks > 0 && h.blocks <= (std::uint64_t{1} << 32) &&
      static_cast<std::uint64_t>(st.st_size) == sizeof h + h.blocks * sizeof(sframe_record_block)) {
    std::vector<sframe_record_block> blocks(h.blocks);
    if (read_all(fd, blocks.data(), blocks.size() * sizeof(sframe_record_block)) && digest_of(blocks) == h.digest)
      out = CachedTable{ModuleTable(h.base, std::move(blocks)), stats_of(h.stats)};
  }
  ::close(fd);
  return out;
}

bool TableCache::store(std::string_view build_id, const CachedTable& t) const {
  if (dir_.empty() || !cache_key(build_id) || builder_id().empty() || t.table.blocks().empty()) return false;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  auto f = OutputFile::create(path_of(build_id));
  if (!f) return false;
  Header h{};
  h.magic = kMagic;
  h.format = kFormat;
  h.digest = digest_of(t.table.blocks());
  h.base = t.table.base();
  h.blocks = t.table.blocks().size();
  h.stats = stats_fields(t.stats);
  h.builder = builder_field();
  // Not synced: a file a crash cuts short fails its size or digest check.
  return f->write(std::as_bytes(std::span(&h, 1))) && f->write(std::as_bytes(t.table.blocks())) &&
         f->commit(OutputFile::Durability::kUnsynced);
}

}  // namespace sframe::record
