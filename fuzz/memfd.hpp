// SPDX-License-Identifier: MIT
// The fuzz input as a file: ElfFile::open takes a path, so each input is
// written to one in-memory file (memfd) opened as /proc/self/fd/N.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sframe::fuzz {

// Rewrites the run's memfd with `p[0, n)` and returns its path.
inline const std::string& memfd_path(const std::uint8_t* p, std::size_t n) {
  static const int fd = [] {
    const int f = memfd_create("sframe-fuzz", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("memfd_create");
      __builtin_trap();
    }
    return f;
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0) __builtin_trap();
  off_t at = 0;
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, at);
    if (w <= 0) {
      std::perror("memfd write");
      __builtin_trap();
    }
    p += w;
    at += w;
    n -= static_cast<std::size_t>(w);
  }
  return path;
}

}  // namespace sframe::fuzz
