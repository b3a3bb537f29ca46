// SPDX-License-Identifier: MIT
// GNU libsframe 2.40 (binutils' libsframe.so.0), the independent reader the
// lookup tests and sframe_bench compare with, loaded with dlopen: Debian
// ships no header for it, so the three entry points used are declared here
// as binutils 2.40's libsframe/sframe-api.h declares them.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>

namespace sframe_test {

struct GnuLibsframe {
  using Decode = void* (*)(const char*, std::size_t, int*);
  using Free = void (*)(void**);
  using FindFre = int (*)(void*, std::int32_t, void*);
  /// sframe_decode, sframe_decoder_free, sframe_find_fre; all null when the
  /// library cannot be loaded (`ok` false).
  Decode decode = nullptr;
  Free free = nullptr;
  FindFre find_fre = nullptr;
  bool ok = false;
  GnuLibsframe() {
    void* h = dlopen("libsframe.so.0", RTLD_NOW);
    if (!h) return;
    decode = reinterpret_cast<Decode>(dlsym(h, "sframe_decode"));
    free = reinterpret_cast<Free>(dlsym(h, "sframe_decoder_free"));
    find_fre = reinterpret_cast<FindFre>(dlsym(h, "sframe_find_fre"));
    ok = decode && free && find_fre;
  }
};

/// libsframe 2.40's sframe_frame_row_entry, which sframe_find_fre fills.
struct GnuFre {
  std::uint32_t start_addr;
  unsigned char offsets[12];
  unsigned char info;
};

}  // namespace sframe_test
