// SPDX-License-Identifier: MIT
// The whole contents of a file, read-only: mapped when it is a regular file
// (no copy, pages read on first touch), else read into memory (a pipe,
// stdin, a /proc file whose st_size is 0). Shared by the perf.data reader
// and the kallsyms reader.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sframe::perf::detail {

class FileBytes {
 public:
  FileBytes() = default;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  FileBytes(FileBytes&& o) noexcept { *this = std::move(o); }
  FileBytes& operator=(FileBytes&& o) noexcept {
    if (this != &o) {
      release();
      map_ = o.map_;
      map_size_ = o.map_size_;
      owned_ = std::move(o.owned_);
      bytes_ = o.bytes_;
      o.map_ = nullptr;
      o.map_size_ = 0;
      o.bytes_ = {};
    }
    return *this;
  }
  ~FileBytes() { release(); }

  /// Reads `path` ("-" is stdin). Returns 0 or the errno of the failing
  /// call (EISDIR for a directory). A read stops at `max_read` bytes for
  /// files that cannot be mapped, so a endless /proc or pipe source is
  /// bounded; `truncated()` then says so.
  int open(const std::string& path, std::size_t max_read = std::size_t{1} << 34) {
    release();
    const bool in = path == "-";
    const int fd = in ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    const int e = load(fd, max_read);
    if (!in) ::close(fd);
    return e;
  }

  /// Takes a copy of `bytes` (tests, fuzzing).
  void assign(std::span<const std::byte> bytes) {
    release();
    owned_.assign(bytes.begin(), bytes.end());
    bytes_ = owned_;
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  std::string_view text() const { return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()}; }
  bool truncated() const { return truncated_; }

 private:
  int load(int fd, std::size_t max_read) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (m != MAP_FAILED) {
        map_ = m;
        map_size_ = static_cast<std::size_t>(st.st_size);
        bytes_ = {static_cast<const std::byte*>(m), map_size_};
        return 0;
      }
    }
    // Read straight into the buffer, which grows geometrically: no bounce
    // buffer on the stack (it would be copied into every perf sample of
    // this tool, and the caller's frames lost beyond it).
    std::size_t n = 0;
    owned_.resize(std::size_t{1} << 16);
    for (;;) {
      if (n == owned_.size()) {
        if (n >= max_read) {
          truncated_ = true;
          break;
        }
        owned_.resize(std::min(n * 2, max_read));
      }
      const ssize_t r = ::read(fd, owned_.data() + n, owned_.size() - n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int e = errno;
        owned_.clear();
        return e;
      }
      if (r == 0) break;
      n += static_cast<std::size_t>(r);
    }
    owned_.resize(n);
    bytes_ = owned_;
    return 0;
  }

  void release() {
    if (map_) ::munmap(map_, map_size_);
    map_ = nullptr;
    map_size_ = 0;
    owned_.clear();
    bytes_ = {};
    truncated_ = false;
  }

  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::vector<std::byte> owned_;
  std::span<const std::byte> bytes_;
  bool truncated_ = false;
};

}  // namespace sframe::perf::detail
