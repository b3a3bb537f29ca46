// SPDX-License-Identifier: MIT
// /proc/PID/maps parsing and remote memory reads.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "sframe/format/byte_order.hpp"
#include "sframe/process/process.hpp"

namespace sframe::process {
namespace {

// Consumes a hex number from `s`; false when there is none.
bool take_hex(std::string_view& s, std::uint64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (r.ec != std::errc() || r.ptr == s.data()) return false;
  s.remove_prefix(static_cast<std::size_t>(r.ptr - s.data()));
  return true;
}

bool take_dec(std::string_view& s, std::uint64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (r.ec != std::errc() || r.ptr == s.data()) return false;
  s.remove_prefix(static_cast<std::size_t>(r.ptr - s.data()));
  return true;
}

bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

void skip_spaces(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
}

// "start-end perms offset dev:dev inode   path"
std::optional<Mapping> parse_line(std::string_view s) {
  Mapping m;
  std::uint64_t major = 0, minor = 0;
  if (!take_hex(s, m.start) || !take_char(s, '-') || !take_hex(s, m.end) || !take_char(s, ' ')) return std::nullopt;
  if (s.size() < 5) return std::nullopt;
  m.read = s[0] == 'r';
  m.write = s[1] == 'w';
  m.exec = s[2] == 'x';
  m.shared = s[3] == 's';
  s.remove_prefix(4);
  if (!take_char(s, ' ') || !take_hex(s, m.offset) || !take_char(s, ' ')) return std::nullopt;
  if (!take_hex(s, major) || !take_char(s, ':') || !take_hex(s, minor) || !take_char(s, ' ')) return std::nullopt;
  if (!take_dec(s, m.inode)) return std::nullopt;
  skip_spaces(s);
  constexpr std::string_view kDeleted = " (deleted)";
  if (s.size() > kDeleted.size() && s.ends_with(kDeleted) && s.front() == '/') {
    s.remove_suffix(kDeleted.size());
    m.deleted = true;
  }
  m.path = std::string(s);
  if (m.end < m.start) return std::nullopt;
  return m;
}

}  // namespace

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (auto m = parse_line(line)) out.push_back(std::move(*m));
  }
  return out;
}

Expected<std::vector<Mapping>> read_maps(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream in(path);
  if (!in) return make_error(IoErrc::kIoError, 0, static_cast<std::uint64_t>(errno ? errno : ENOENT));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_maps(ss.str());
}

RemoteMemory::RemoteMemory(RemoteMemory&& o) noexcept
    : pid_(o.pid_), mem_fd_(std::exchange(o.mem_fd_, -1)), use_vm_readv_(o.use_vm_readv_) {}

RemoteMemory& RemoteMemory::operator=(RemoteMemory&& o) noexcept {
  if (this != &o) {
    if (mem_fd_ >= 0) ::close(mem_fd_);
    pid_ = o.pid_;
    mem_fd_ = std::exchange(o.mem_fd_, -1);
    use_vm_readv_ = o.use_vm_readv_;
  }
  return *this;
}

RemoteMemory::~RemoteMemory() {
  if (mem_fd_ >= 0) ::close(mem_fd_);
}

namespace {
constexpr std::uint64_t kPage = 4096;  // the split granularity; a multiple of no page size is smaller
}

std::size_t RemoteMemory::read(std::uint64_t addr, std::span<std::byte> out) const noexcept {
  std::size_t done = 0;
  if (use_vm_readv_) {
    // One iovec per page: the kernel stops at the first unreadable page and
    // reports the bytes copied before it, which is the prefix we want.
    while (done < out.size()) {
      const std::uint64_t at = addr + done;
      if (at < addr) return done;  // wrapped around the address space
      const std::size_t in_page = static_cast<std::size_t>(kPage - (at % kPage));
      const std::size_t n = std::min(in_page, out.size() - done);
      iovec local{out.data() + done, n};
      iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(at)), n};
      const ssize_t got = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
      if (got < 0) {
        if (errno == ENOSYS || errno == EPERM) {
          use_vm_readv_ = false;  // refused outright: /proc/PID/mem may still work
          break;
        }
        return done;
      }
      done += static_cast<std::size_t>(got);
      if (static_cast<std::size_t>(got) < n) return done;
    }
    if (use_vm_readv_) return done;
  }
  return done + read_proc_mem(addr + done, out.subspan(done));
}

std::size_t RemoteMemory::read_proc_mem(std::uint64_t addr, std::span<std::byte> out) const noexcept {
  if (mem_fd_ < 0) {
    const std::string path = "/proc/" + std::to_string(pid_) + "/mem";
    mem_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (mem_fd_ < 0) return 0;
  }
  std::size_t done = 0;
  while (done < out.size()) {
    const std::uint64_t at = addr + done;
    if (at < addr || at > static_cast<std::uint64_t>(INT64_MAX)) break;  // off_t is signed
    const ssize_t got = ::pread(mem_fd_, out.data() + done, out.size() - done, static_cast<off_t>(at));
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::optional<std::uint64_t> RemoteMemory::read_word(std::uint64_t addr) const noexcept {
  std::byte buf[8];
  if (read(addr, buf) != sizeof buf) return std::nullopt;
  return endian::load<8>(buf, kHostByteOrder);
}

}  // namespace sframe::process
