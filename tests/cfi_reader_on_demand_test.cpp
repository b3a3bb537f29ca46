// SPDX-License-Identifier: MIT
// Per-FDE (on-demand) generation and the RowIndex built from the reader's
// rows against libdw's rows (libc, libstdc++) and hand-made hostile
// .eh_frame_hdr tables.
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

}  // namespace

namespace {

// One function as a one-function section, by the translation generation
// uses (generate_function); empty when the translation leaves it out.
std::vector<std::byte> section_of(const cfi::Function& fn, std::uint64_t address, cfi::Reason& why) {
  SectionEncoder enc(cfi::section_header(Abi::kAmd64Little, Version::kV3, address));
  const cfi::Generated g = cfi::generate_function(fn, Abi::kAmd64Little, Version::kV3, address, {},
                                                  [&](const FunctionSpec& f) { (void)enc.add(f); });
  why = g.skipped.empty() ? cfi::Reason::kNone : g.skipped.front().reason;
  if (why != cfi::Reason::kNone) return {};
  auto bytes = enc.finish();
  return bytes ? std::move(*bytes) : std::vector<std::byte>{};
}

}  // namespace

// Per-FDE (on-demand) generation: for every FDE of libc and libstdc++,
// at its start, its last byte, its middle and each row's start, the row
// generate_for_pc() gives (found through .eh_frame_hdr's table, read alone
// by FdeReader) equals the row of the same function as libdw reads it (the
// independent truth, cfi::libdw_functions), both put through the one
// translation and encoder; a function libdw's rows say SFrame cannot hold
// is refused with that reason. PLT sections are left to the PC-mask tests.
// Both ways of holding a generated FDE: an encoded section (looked up with
// find()), and with ModuleUnwindOptions::per_fde_rows a RowIndex built
// straight from the translator's rows (looked up with RowIndex::find(),
// the function's range from the GeneratedFde).
TEST(CfiReader, OnDemandRowsEqualLibdwRows) {
  const char* libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
  for (const bool per_fde_rows : {false, true})
  for (const char* lib : libs) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    cfi::ModuleUnwindOptions mo;
    mo.per_fde_rows = per_fde_rows;
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{}, mo);
    ASSERT_TRUE(cfi::enable_on_demand(u, *f)) << lib;
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    const auto in_plt = [&](const cfi::Function& fn) {
      for (const auto& p : plts)
        if (fn.start < p.address + p.size && p.address < fn.end) return true;
      return false;
    };
    std::size_t functions = 0, pcs = 0, refused = 0;
    std::vector<std::string> diffs;
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (in_plt(fn) || fn.rows.empty()) return;
      for (const auto& r : fn.rows)
        if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
      ++functions;
      cfi::Reason why = cfi::Reason::kNone;
      const std::vector<std::byte> bytes = section_of(fn, 0, why);
      auto ref = bytes.empty() ? Expected<Section>(make_error(FormatErrc::kTruncatedHeader, 0)) : Section::parse(bytes, 0);
      std::vector<std::uint64_t> at = {fn.start, fn.end - 1, fn.start + (fn.end - fn.start) / 2};
      for (std::size_t i = 0; i < fn.rows.size() && i < 16; ++i) at.push_back(fn.rows[i].start);
      for (const std::uint64_t pc : at) {
        ++pcs;
        Expected<const cfi::GeneratedFde*> g = u.generate_for_pc(pc);
        if (why != cfi::Reason::kNone) {
          ++refused;
          if (g || g.error().code() != EncodeErrc::kNotRepresentable || g.error().value != static_cast<std::uint64_t>(why))
            diffs.push_back(fmt::format("{:#x}: libdw's rows give reason {}, on-demand {}", pc, describe(why),
                                        g ? "generated" : describe(g.error().code())));
          continue;
        }
        ASSERT_TRUE(ref) << lib;
        if (!g) {
          diffs.push_back(fmt::format("{:#x}: on-demand error {}", pc, describe(g.error().code())));
          continue;
        }
        auto want = find(*ref, pc);
        if (per_fde_rows) {
          ASSERT_TRUE((*g)->section.rows.has_value()) << lib;
          EXPECT_FALSE((*g)->section.index.has_value()) << lib;
          auto got = (*g)->section.rows->find(pc);
          if (!want || !got) {
            diffs.push_back(fmt::format("{:#x}: lookup {} / rows {}", pc, want ? "ok" : describe(want.error().code()),
                                        got ? "ok" : describe(got.error().code())));
            continue;
          }
          if (!(want->row == got->row) || want->fde.start_pc != (*g)->start ||
              want->fde.start_pc + want->fde.size != (*g)->end || want->fde.signal != got->signal)
            diffs.push_back(fmt::format("{:#x}: rows differ (function {:#x}-{:#x})", pc, fn.start, fn.end));
          continue;
        }
        auto got = find(*(*g)->section.section, pc);
        if (!want || !got) {
          diffs.push_back(fmt::format("{:#x}: lookup {} / {}", pc, want ? "ok" : describe(want.error().code()),
                                      got ? "ok" : describe(got.error().code())));
          continue;
        }
        if (!(want->row == got->row) || want->fde.start_pc != got->fde.start_pc || want->fde.size != got->fde.size ||
            want->fde.signal != got->fde.signal)
          diffs.push_back(fmt::format("{:#x}: rows differ (function {:#x}-{:#x})", pc, fn.start, fn.end));
      }
    });
    ASSERT_TRUE(ok) << lib;
    EXPECT_GT(functions, 1000u) << lib;
    EXPECT_TRUE(diffs.empty()) << lib << (per_fde_rows ? " (per_fde_rows)" : "") << ": " << diffs.size() << " of "
                               << pcs << " PCs differ, first " << (diffs.empty() ? "" : diffs.front());
    std::printf("%s%s: %zu functions, %zu PCs (%zu refused with libdw's reason), %zu FDEs generated\n", lib,
                per_fde_rows ? " (per_fde_rows)" : "", functions, pcs, refused, u.generated_fdes().size());
  }
}

// Per-FDE generation over hostile .eh_frame_hdr tables and .eh_frame
// records stays bounded: each PC gets the error for its own entry (the
// offsets are the record's, in .eh_frame), the good FDE is still generated,
// and an unsorted table gives some entry or none, never a read outside the
// bytes. Hand-made, with the values the LSB's .eh_frame_hdr layout gives.
TEST(CfiReader, OnDemandHostileTableIsBounded) {
  const std::uint64_t eh_addr = 0x2000, hdr_addr = 0x1800;
  Bytes e;
  x86_cie(e);
  const std::size_t good = e.b.size();
  x86_fde(e, eh_addr, 0x1000, 0x20, {0x41, 0x0e, 16});  // +1: CFA rsp+16
  const std::size_t bad = e.b.size();
  x86_fde(e, eh_addr, 0x1100, 0x20, {0x41, 0x0e, 16});
  e.b[bad + 4] = std::byte{0x7f};  // its CIE pointer now points before the section
  e.word(0, 4);                     // zero terminator
  // The table: (start, FDE address) pairs, datarel sdata4 from hdr_addr.
  const auto hdr = [&](std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> entries) {
    Bytes h;
    h.bytes({1, 0x1b, 0x03, 0x3b});
    h.word(static_cast<std::uint32_t>(eh_addr - (hdr_addr + 4)), 4);
    h.word(entries.size(), 4);
    for (auto [start, fde] : entries) {
      h.word(static_cast<std::uint32_t>(start - hdr_addr), 4);
      h.word(static_cast<std::uint32_t>(fde - hdr_addr), 4);
    }
    return h.b;
  };
  const auto make = [&](const std::vector<std::byte>& table) {
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{});
    cfi::OnDemandSource src;
    src.eh_frame_hdr = table;
    src.eh_frame_hdr_address = hdr_addr;
    src.eh_frame = cfi::CfiSource{e.b, eh_addr};
    EXPECT_TRUE(u.enable_on_demand(src));
    return u;
  };
  {
    // Sorted; entries for the good FDE, the bad one, one past .eh_frame's
    // end, one before its start, and one pointing at the CIE.
    const std::vector<std::byte> t = hdr({{0x1000, eh_addr + good},
                                          {0x1100, eh_addr + bad},
                                          {0x1200, eh_addr + 0x100000},
                                          {0x1300, eh_addr - 64},
                                          {0x1400, eh_addr}});
    cfi::ModuleUnwind u = make(t);
    auto g = u.generate_for_pc(0x1005);
    ASSERT_TRUE(g);
    EXPECT_EQ((*g)->start, 0x1000u);
    EXPECT_EQ((*g)->end, 0x1020u);
    auto m = find(*(*g)->section.section, 0x1005);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->row.cfa.offset, 16);
    auto miss = u.generate_for_pc(0x1050);  // after the function, before the next entry
    ASSERT_FALSE(miss);
    EXPECT_EQ(miss.error().code(), LookupErrc::kPcNotCovered);
    auto below = u.generate_for_pc(0x0fff);
    ASSERT_FALSE(below);
    EXPECT_EQ(below.error().code(), LookupErrc::kPcNotCovered);
    for (std::uint64_t pc : {0x1105u, 0x1205u, 0x1305u, 0x1405u}) {
      SCOPED_TRACE(pc);
      auto r = u.generate_for_pc(pc);
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code(), CfiErrc::kBadCfi);
      auto again = u.generate_for_pc(pc);  // kept: the same reason
      ASSERT_FALSE(again);
      EXPECT_EQ(again.error().code(), CfiErrc::kBadCfi);
    }
    EXPECT_EQ(u.generate_for_pc(0x1105).error().offset, bad);
    EXPECT_EQ(u.generated_fdes().size(), 1u);
  }
  {
    // Unsorted: the search lands on some entry; the PC it returns for is
    // inside what was generated, else the error says not covered.
    const std::vector<std::byte> t = hdr({{0x1400, eh_addr + good}, {0x1000, eh_addr + good}, {0x1200, eh_addr + good}});
    cfi::ModuleUnwind u = make(t);
    for (std::uint64_t pc = 0x0ff0; pc < 0x1500; pc += 8) {
      auto r = u.generate_for_pc(pc);
      if (r) {
        EXPECT_GE(pc, (*r)->start);
        EXPECT_LT(pc, (*r)->end);
      } else {
        EXPECT_EQ(r.error().code(), LookupErrc::kPcNotCovered);
      }
    }
  }
  {
    // A count larger than the table: refused when turning it on.
    std::vector<std::byte> t = hdr({{0x1000, eh_addr + good}});
    t[8] = std::byte{0xff};
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{});
    cfi::OnDemandSource src;
    src.eh_frame_hdr = t;
    src.eh_frame_hdr_address = hdr_addr;
    src.eh_frame = cfi::CfiSource{e.b, eh_addr};
    auto ok = u.enable_on_demand(src);
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().code(), ElfErrc::kElfError);
    EXPECT_FALSE(u.on_demand());
  }
}

// The in-process backtrace's RowIndex, built straight from the translator's
// rows (RowIndex::Builder, no encoded section), at every PC of libc and
// libstdc++: the row libdw's CFI gives there (the independent truth: the
// same translation of libdw's rules), and, for what libdw says nothing of
// (PLT PC-mask FDEs) and for where each answer comes from (FDE and FRE
// indexes), exactly what RowIndex::build() answers over the section the
// encoder makes of the same functions.
TEST(CfiReader, RowsBuiltIndexEqualsLibdwAndEncodedIndex) {
  const char* libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
  for (const char* lib : libs) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    RowIndex::Builder built;
    auto header = cfi::section_header(*f, Version::kV3, 0);
    ASSERT_TRUE(header) << lib;
    SectionEncoder enc(*header);
    std::optional<Error> add_error;
    auto gen = cfi::for_each_generated(*f, Version::kV3, 0, [&](const FunctionSpec& fn) {
      if (auto ok = built.add(fn); !ok && !add_error) add_error = ok.error();
      if (auto ok = enc.add(fn); !ok && !add_error) add_error = ok.error();
    });
    ASSERT_TRUE(gen) << lib;
    ASSERT_FALSE(add_error) << lib << ": " << describe(add_error->code());
    auto bytes = enc.finish();
    ASSERT_TRUE(bytes) << lib;
    auto s = Section::parse(*bytes, 0);
    ASSERT_TRUE(s) << lib;
    ASSERT_TRUE(validate(*s, Strictness::kStrict)) << lib;
    auto encoded = RowIndex::build(*s);
    ASSERT_TRUE(encoded) << lib;
    auto empty = SectionEncoder(*header).finish();
    ASSERT_TRUE(empty);
    auto hs = Section::parse(*empty, 0);
    ASSERT_TRUE(hs);
    auto rows = built.finish(*hs);
    ASSERT_TRUE(rows) << lib << ": " << describe(rows.error().code());
    EXPECT_EQ(rows->num_rows(), encoded->num_rows()) << lib;
    EXPECT_EQ(rows->num_boundaries(), encoded->num_boundaries()) << lib;

    std::size_t pcs = 0, libdw_pcs = 0, mask_pcs = 0;
    std::vector<std::string> diffs;
    const auto note = [&](std::string d) {
      if (diffs.size() < 8) diffs.push_back(std::move(d));
      else diffs.back() = "... " + d;
    };
    // Both indexes alike at `pc`; returns the rows-built index's answer.
    const auto same_answers = [&](std::uint64_t pc) -> Expected<RowMatch> {
      ++pcs;
      Expected<RowMatch> a = rows->find(pc);
      Expected<RowMatch> b = encoded->find(pc);
      if (a.has_value() != b.has_value() || (a && !(*a == *b)) ||
          (!a && a.error().code() != b.error().code()))
        note(fmt::format("{:#x}: find() differs from the encoded index's ({} / {})", pc,
                         a ? fmt::format("FDE {} FRE {}", a->fde_index, a->fre_index) : std::string(describe(a.error().code())),
                         b ? fmt::format("FDE {} FRE {}", b->fde_index, b->fre_index) : std::string(describe(b.error().code()))));
      Expected<std::uint32_t> x = rows->find_row(pc), y = encoded->find_row(pc);
      const bool row_same = x.has_value() == y.has_value() &&
                            (x ? (*x == RowIndex::kUseFind) == (*y == RowIndex::kUseFind) &&
                                     (*x == RowIndex::kUseFind || rows->row_at(*x) == encoded->row_at(*y))
                               : x.error().code() == y.error().code());
      if (!row_same) note(fmt::format("{:#x}: find_row() differs from the encoded index's", pc));
      if (rows->row_id(pc) < rows->num_rows() && !(rows->row_at(rows->row_id(pc)) == rows->row_at(*x)))
        note(fmt::format("{:#x}: row_id() and find_row() differ", pc));
      return a;
    };
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    for (const auto& p : plts)
      for (std::uint64_t pc = p.address; pc < p.address + p.size; ++pc, ++mask_pcs) (void)same_answers(pc);
    const auto in_plt = [&](const cfi::Function& fn) {
      for (const auto& p : plts)
        if (fn.start < p.address + p.size && p.address < fn.end) return true;
      return false;
    };
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (in_plt(fn) || fn.rows.empty()) return;
      bool blocked = false;
      for (const auto& r : fn.rows) {
        if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
        blocked |= r.reason != cfi::Reason::kNone && !r.flex;
      }
      std::size_t k = 0;
      for (std::uint64_t pc = fn.start; pc < fn.end; ++pc) {
        while (k + 1 < fn.rows.size() && fn.rows[k + 1].start <= pc) ++k;
        const cfi::Row& want = fn.rows[k];
        Expected<RowMatch> got = same_answers(pc);
        ++libdw_pcs;
        if (blocked) {
          // A function SFrame cannot hold is left out.
          if (got || got.error().code() != LookupErrc::kPcNotCovered)
            note(fmt::format("{:#x}: libdw's rows cannot be said, yet covered", pc));
          continue;
        }
        if (!got) {
          note(fmt::format("{:#x}: {} (function {:#x}-{:#x})", pc, describe(got.error().code()), fn.start, fn.end));
          continue;
        }
        if (!(got->row == want.row) || got->signal != want.signal)
          note(fmt::format("{:#x}: row differs from libdw's (function {:#x}-{:#x})", pc, fn.start, fn.end));
      }
    });
    ASSERT_TRUE(ok) << lib;
    EXPECT_GT(libdw_pcs, 500000u) << lib;
    EXPECT_TRUE(diffs.empty()) << lib << ": " << diffs.size() << " differences, first " << (diffs.empty() ? "" : diffs.front())
                               << (diffs.size() > 1 ? "; last " + diffs.back() : "");
    std::printf("%s: %zu PCs compared (%zu against libdw, %zu in PLTs)\n", lib, pcs, libdw_pcs, mask_pcs);
  }
}
