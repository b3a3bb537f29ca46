// SPDX-License-Identifier: MIT
// CFI bytes written by hand (DWARF 5 §6.4, LSB 5.0 .eh_frame) for the CFI
// reader tests (cfi_reader_hand_test.cpp, cfi_reader_on_demand_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace sframe_test {

struct Bytes {
  std::vector<std::byte> b;
  bool big = false;
  void u8(unsigned v) { b.push_back(static_cast<std::byte>(v)); }
  void word(std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) u8(static_cast<unsigned>(v >> (8 * (big ? n - 1 - i : i))) & 0xff);
  }
  void uleb(std::uint64_t v) {
    do {
      unsigned byte = v & 0x7f;
      v >>= 7;
      u8(byte | (v ? 0x80 : 0));
    } while (v);
  }
  void sleb(std::int64_t v) {
    for (;;) {
      unsigned byte = static_cast<unsigned>(v & 0x7f);
      v >>= 7;
      const bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
      u8(byte | (done ? 0 : 0x80));
      if (done) return;
    }
  }
  void bytes(std::initializer_list<unsigned> v) {
    for (unsigned x : v) u8(x);
  }
  // Patches the 4-byte length at `at` to cover up to the end.
  void close(std::size_t at) {
    const std::uint64_t len = b.size() - at - 4;
    for (unsigned i = 0; i < 4; ++i)
      b[at + i] = static_cast<std::byte>((len >> (8 * (big ? 3 - i : i))) & 0xff);
  }
};

// An x86-64 .eh_frame CIE (augmentation "zR", pcrel|sdata4, the usual
// initial rules: CFA = rsp + 8, RA at CFA - 8) at the start of `e`.
inline void x86_cie(Bytes& e) {
  e.word(0, 4);
  e.word(0, 4);  // CIE id
  e.u8(1);
  e.bytes({'z', 'R', 0});
  e.uleb(1);
  e.sleb(-8);
  e.u8(16);
  e.uleb(1);
  e.u8(0x1b);                  // DW_EH_PE_pcrel | sdata4
  e.bytes({0x0c, 7, 8});       // def_cfa rsp, 8
  e.bytes({0x80 | 16, 1});     // offset r16, 1 x -8
  e.close(0);
}

// An FDE for [start, start + size) with `program`, its CIE at offset 0.
inline void x86_fde(Bytes& e, std::uint64_t section_address, std::uint64_t start, std::uint32_t size,
             std::initializer_list<unsigned> program) {
  const std::size_t at = e.b.size();
  e.word(0, 4);
  e.word(at + 4, 4);  // CIE pointer: back to offset 0
  const std::uint64_t field = section_address + e.b.size();
  e.word(static_cast<std::uint32_t>(start - field), 4);
  e.word(size, 4);
  e.uleb(0);  // augmentation data
  e.bytes(program);
  while ((e.b.size() - at) % 8 != 0) e.u8(0);  // DW_CFA_nop padding
  e.close(at);
}

}  // namespace sframe_test
