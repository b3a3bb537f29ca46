// SPDX-License-Identifier: MIT
// The single-pass CFI reader (sframe/unwind/cfi_reader.hpp) on CFI bytes written by
// hand from DWARF 5 §6.4 and the LSB's .eh_frame, with their rows worked out
// by hand; hostile records stay bounded.
#include <gtest/gtest.h>

#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <set>
#include <string>

#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "support/corpus.hpp"
#include "support/cfi_bytes.hpp"

namespace {

using namespace sframe;
using sframe_test::Bytes;
using sframe_test::x86_cie;
using sframe_test::x86_fde;

std::vector<cfi::Function> read_all(const cfi::CfiSource& src, Abi abi, cfi::CfiStats* st = nullptr) {
  std::vector<cfi::Function> out;
  auto ok = cfi::read_cfi(src, abi, [&](const cfi::Function& f) { out.push_back(f); }, st);
  EXPECT_TRUE(ok);
  return out;
}

// push %rbp; mov %rsp,%rbp; ...; pop %rbp; ret with remember/restore around
// the epilogue: the rows of DWARF 5 Appendix D.6 in x86-64 terms, no
// .eh_frame_hdr needed, read up to the zero terminator with more bytes after
// it (as a loaded image would have).
TEST(CfiReader, HandWrittenEhFrameRows) {
  Bytes e;
  const std::uint64_t addr = 0x2000;
  x86_cie(e);
  x86_fde(e, addr, 0x1000, 0x20,
          {0x41, 0x0e, 16, 0x80 | 6, 2,   // +1: CFA rsp+16, rbp at CFA-16
           0x43, 0x0d, 6,                 // +3: CFA rbp+16
           0x0a,                          // remember_state
           0x4a, 0x0c, 7, 8, 0xc0 | 6,    // +10: CFA rsp+8, rbp restored (same value)
           0x41, 0x0b});                  // +1: restore_state
  e.word(0, 4);                           // zero terminator
  e.bytes({0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff});  // what follows in memory
  cfi::CfiSource src{e.b, addr};
  const auto fns = read_all(src, Abi::kAmd64Little);
  ASSERT_EQ(fns.size(), 1u);
  const auto& r = fns[0].rows;
  EXPECT_EQ(fns[0].start, 0x1000u);
  EXPECT_EQ(fns[0].end, 0x1020u);
  ASSERT_EQ(r.size(), 5u);
  const std::uint64_t starts[] = {0x1000, 0x1001, 0x1004, 0x100e, 0x100f};
  const std::uint16_t regs[] = {7, 7, 6, 7, 6};
  const std::int32_t offs[] = {8, 16, 16, 8, 16};
  const bool fp_saved[] = {false, true, true, false, true};
  for (std::size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r[i].start, starts[i]);
    EXPECT_EQ(r[i].end, i + 1 < 5 ? starts[i + 1] : 0x1020u);
    EXPECT_EQ(r[i].reason, cfi::Reason::kNone);
    EXPECT_EQ(r[i].row.cfa.regnum, regs[i]);
    EXPECT_EQ(r[i].row.cfa.offset, offs[i]);
    EXPECT_EQ(r[i].row.ra.kind, Rule::Kind::kExpr);
    EXPECT_EQ(r[i].row.ra.base, Rule::Base::kCfa);
    EXPECT_TRUE(r[i].row.ra.deref);
    EXPECT_EQ(r[i].row.ra.offset, -8);
    EXPECT_EQ(r[i].row.fp.kind, fp_saved[i] ? Rule::Kind::kExpr : Rule::Kind::kUnchanged);
    if (fp_saved[i]) {
      EXPECT_EQ(r[i].row.fp.offset, -16);
    }
  }
}

// The same CFI as big-endian 32-bit .debug_frame in 64-bit DWARF form (CIE
// id all ones, absolute addresses, CIE pointer an offset): one function,
// found without any .eh_frame.
TEST(CfiReader, HandWrittenDebugFrame64BigEndian) {
  Bytes e;
  e.big = true;
  // CIE, 64-bit DWARF: 0xffffffff, 8-byte length, 8-byte id of all ones.
  e.word(0xffffffff, 4);
  const std::size_t len_at = e.b.size();
  e.word(0, 8);
  e.word(~std::uint64_t{0}, 8);
  e.u8(4);          // version 4: address and segment selector sizes follow
  e.u8(0);          // augmentation ""
  e.u8(4);          // address size
  e.u8(0);          // segment selector size
  e.uleb(4);        // code alignment
  e.sleb(-4);       // data alignment
  e.uleb(30);       // RA column (x30 as AArch64)
  e.bytes({0x0c, 31, 0});  // def_cfa sp, 0
  const auto patch8 = [&](std::size_t at) {
    const std::uint64_t len = e.b.size() - at - 8;
    for (unsigned i = 0; i < 8; ++i) e.b[at + i] = static_cast<std::byte>((len >> (8 * (7 - i))) & 0xff);
  };
  patch8(len_at);
  // FDE: CIE pointer 0 (the section offset of the CIE), 4-byte addresses.
  e.word(0xffffffff, 4);
  const std::size_t fde_len_at = e.b.size();
  e.word(0, 8);
  e.word(0, 8);
  e.word(0x400, 4);
  e.word(0x40, 4);
  e.bytes({0x41, 0x0e, 16, 0x80 | 29, 4, 0x80 | 30, 3});  // +4: CFA sp+16, x29 at CFA-16, x30 at CFA-12
  patch8(fde_len_at);
  cfi::CfiSource src;
  src.bytes = e.b;
  src.kind = cfi::CfiKind::kDebugFrame;
  src.big_endian = true;
  src.address_size = 4;
  const auto fns = read_all(src, Abi::kAarch64Big);
  ASSERT_EQ(fns.size(), 1u);
  ASSERT_EQ(fns[0].rows.size(), 2u);
  EXPECT_EQ(fns[0].start, 0x400u);
  EXPECT_EQ(fns[0].end, 0x440u);
  EXPECT_EQ(fns[0].rows[1].start, 0x404u);
  EXPECT_EQ(fns[0].rows[1].row.cfa.offset, 16);
  EXPECT_EQ(fns[0].rows[1].row.fp.offset, -16);
  EXPECT_EQ(fns[0].rows[1].row.ra.offset, -12);
  EXPECT_EQ(fns[0].rows[1].reason, cfi::Reason::kNone);
}

// Hostile input: a record longer than the section is an error at its
// offset; remember_state nested past kMaxRememberDepth ends the function at
// its last complete row; an unknown opcode likewise; duplicates keep the
// first FDE.
TEST(CfiReader, HostileInputIsBounded) {
  {
    Bytes e;
    x86_cie(e);
    const std::size_t at = e.b.size();
    e.word(0x7ffffff0, 4);
    e.word(at + 4, 4);
    cfi::CfiSource src{e.b, 0};
    auto ok = cfi::read_cfi(src, Abi::kAmd64Little, [](const cfi::Function&) {});
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().code(), CfiErrc::kBadCfi);
    EXPECT_EQ(ok.error().offset, at);
  }
  {
    Bytes e;
    x86_cie(e);
    std::vector<unsigned> deep;
    deep.push_back(0x41);  // one row, then too much nesting
    for (unsigned i = 0; i <= cfi::kMaxRememberDepth; ++i) deep.push_back(0x0a);
    deep.push_back(0x41);
    const std::size_t at = e.b.size();
    e.word(0, 4);
    e.word(at + 4, 4);
    e.word(static_cast<std::uint32_t>(0x100 - (e.b.size())), 4);
    e.word(0x10, 4);
    e.uleb(0);
    for (unsigned v : deep) e.u8(v);
    e.close(at);
    x86_fde(e, 0, 0x200, 0x10, {0x41, 0x3f, 0x41});  // opcode 0x3f (undefined) after one row
    x86_fde(e, 0, 0x200, 0x10, {0x48});              // a duplicate start: dropped
    cfi::CfiStats st;
    cfi::CfiSource src{e.b, 0};
    const auto fns = read_all(src, Abi::kAmd64Little, &st);
    ASSERT_EQ(fns.size(), 2u);
    EXPECT_EQ(fns[0].start, 0x100u);
    EXPECT_EQ(fns[0].end, 0x101u);
    EXPECT_EQ(fns[1].start, 0x200u);
    EXPECT_EQ(fns[1].end, 0x201u);
    EXPECT_EQ(st.fdes, 3u);
    EXPECT_EQ(st.duplicates, 1u);
  }
}


// ModuleUnwindOptions::merge_own where an own function and a generated one
// overlap (a RowIndex cannot hold both): the two stay apart, primary() the
// own section and extra() the generated functions, as without the option;
// without the overlap the same own section and CFI give one index. The own
// section: [0x1000, 0x1040) CFA = SP + 8. The CFI: [0x1020, 0x1080) (its
// last byte outside the own function, so generation keeps it) and
// [0x2000, 0x2010), both CFA = SP + 8 with a push at +1 (CFA = SP + 16).
TEST(CfiReader, MergeOwnKeepsOverlappingFunctionsApart) {
  SectionSpec own = cfi::section_header(Abi::kAmd64Little, Version::kV3, 0x9000);
  FunctionSpec f;
  f.start_pc = 0x1000;
  f.size = 0x40;
  FrameRow sp8;
  sp8.cfa.kind = Rule::Kind::kExpr;
  sp8.cfa.base = Rule::Base::kRegister;
  sp8.cfa.regnum = 7;
  sp8.cfa.offset = 8;
  sp8.ra.kind = Rule::Kind::kExpr;
  sp8.ra.base = Rule::Base::kCfa;
  sp8.ra.deref = true;
  sp8.ra.offset = -8;
  f.rows = {{0, sp8}};
  own.functions = {f};
  Expected<std::vector<std::byte>> own_bytes = encode(own);
  ASSERT_TRUE(own_bytes);
  const auto cfi_with = [](std::uint64_t first) {
    Bytes e;
    x86_cie(e);
    x86_fde(e, 0x4000, first, 0x60, {0x41, 0x0e, 16});  // +1: CFA rsp+16
    x86_fde(e, 0x4000, 0x2000, 0x10, {0x41, 0x0e, 16});
    e.word(0, 4);
    return e;
  };
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlapping" : "apart");
    const Bytes e = cfi_with(overlap ? 0x1020 : 0x1800);
    cfi::ModuleImage img;
    img.sframe = *own_bytes;
    img.sframe_address = 0x9000;
    cfi::ModuleUnwindOptions opt;
    opt.fde_index_with_rows = false;
    opt.merge_own = true;
    cfi::ModuleUnwind m = cfi::ModuleUnwind::build(img, opt);
    ASSERT_EQ(m.source(), cfi::ModuleSource::kNative) << m.reason();
    cfi::CfiSource src{e.b, 0x4000};
    ASSERT_TRUE(m.generate(src, Abi::kAmd64Little, 0)) << m.reason();
    EXPECT_EQ(m.extra_functions(), 2u) << m.reason();
    ASSERT_TRUE(m.primary().rows) << m.reason();
    const RowIndex& p = *m.primary().rows;
    // The own function's row, from the own section either way.
    const Expected<RowMatch> own_row = p.find(0x1010);
    ASSERT_TRUE(own_row);
    EXPECT_EQ(own_row->row.cfa.offset, 8);
    const RowIndex* gen = overlap ? (m.extra().rows ? &*m.extra().rows : nullptr) : &p;
    ASSERT_NE(gen, nullptr) << m.reason();
    EXPECT_EQ(m.extra().usable(), overlap) << m.reason();
    // The generated function after its push, in extra() or in the one index.
    const Expected<RowMatch> pushed = gen->find(0x2005);
    ASSERT_TRUE(pushed) << m.reason();
    EXPECT_EQ(pushed->row.cfa.offset, 16);
    if (overlap) {
      EXPECT_FALSE(p.find(0x2005)) << "the own section's index holds a generated function";
    }
  }
}

}  // namespace
