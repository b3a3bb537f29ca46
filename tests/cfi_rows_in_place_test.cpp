// SPDX-License-Identifier: MIT
// The in-process generation path (ModuleUnwind::generate() without an
// FdeIndex: cfi::for_each_translated() into RowIndex::Builder, the reader's
// rows taken in place, no RowSpec copy) against libdw's rows, at the first
// and last byte of every row of every function of libc and libstdc++.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/process/process.hpp"

namespace {

using namespace sframe;

TEST(CfiRowsInPlace, ModuleUnwindIndexAnswersAsLibdw) {
  for (const char* lib : {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    const std::optional<Abi> abi = cfi::abi_of(f->info());
    ASSERT_TRUE(abi) << lib;
    auto srcs = cfi::cfi_sources(*f);
    ASSERT_TRUE(srcs) << lib;
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    cfi::ModuleUnwindOptions opt;
    opt.fde_index_with_rows = false;  // as backtrace_init() asks: the rows-built index
    cfi::ModuleUnwind m = cfi::ModuleUnwind::build(cfi::ModuleImage{}, opt);
    ASSERT_TRUE(m.generate(*srcs, *abi, 0, plts)) << lib << ": " << m.reason();
    const cfi::UnwindSection& s = m.primary();
    ASSERT_TRUE(s.rows) << lib << ": no RowIndex built from the rows";
    ASSERT_FALSE(s.index) << lib << ": an encoded section's FdeIndex, not the rows-built index";
    const auto in_plt = [&](const cfi::Function& fn) {
      for (const auto& p : plts)
        if (fn.start < p.address + p.size && p.address < fn.end) return true;
      return false;
    };
    std::size_t checked = 0, bad = 0;
    std::string first;
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (in_plt(fn) || fn.rows.empty()) return;
      bool blocked = false;
      for (const auto& r : fn.rows) {
        if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
        blocked |= r.reason != cfi::Reason::kNone && !r.flex;
      }
      for (const cfi::Row& want : fn.rows)
        for (const std::uint64_t pc : {want.start, want.end - 1}) {
          ++checked;
          const Expected<RowMatch> got = s.rows->find(pc);
          // A function SFrame cannot hold is left out.
          const bool right = blocked ? (!got && got.error().code() == LookupErrc::kPcNotCovered)
                                     : (got && got->row == want.row && got->signal == want.signal);
          if (!right && bad++ == 0) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "0x%llx in 0x%llx-0x%llx (%s)", static_cast<unsigned long long>(pc),
                          static_cast<unsigned long long>(fn.start), static_cast<unsigned long long>(fn.end),
                          blocked ? "left out, yet covered" : got ? "row differs" : "not covered");
            first = buf;
          }
        }
    });
    ASSERT_TRUE(ok) << lib;
    EXPECT_GT(checked, 50000u) << lib;
    EXPECT_EQ(bad, 0u) << lib << ": first at " << first;
    std::printf("%s: %zu row ends compared with libdw\n", lib, checked);
  }
}

// The reader's translation numbers as RowIndex::Builder tags (the in-process
// path above uses them): the index must be the one the same rows give
// untagged, where the builder compares and hashes every row. Compared by
// find() (rules, FDE and FRE index) at the first and last byte of every
// row of libc's and libstdc++'s functions.
TEST(CfiRowsInPlace, TaggedRowsIndexAsUntagged) {
  for (const char* lib : {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    const std::optional<Abi> abi = cfi::abi_of(f->info());
    ASSERT_TRUE(abi) << lib;
    auto srcs = cfi::cfi_sources(*f);
    ASSERT_TRUE(srcs) << lib;
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    RowIndex::Builder tagged, plain;
    std::vector<std::uint64_t> pcs;
    std::size_t rows = 0, untagged = 0, refused = 0;
    auto gen = cfi::for_each_translated(*srcs, *abi, Version::kV3, 0, plts,
                                        [&](const FunctionSpec& fn, const cfi::Function* cfi) {
                                          if (!cfi) {
                                            refused += !tagged.add(fn) + !plain.add(fn);
                                            return;
                                          }
                                          const std::span<const cfi::Row> r = cfi->rows;
                                          const auto start_of = [&](std::size_t k) {
                                            return static_cast<std::uint32_t>(r[k].start - cfi->start);
                                          };
                                          const auto row_of = [&](std::size_t k) -> const FrameRow& { return r[k].row; };
                                          refused += !tagged.add(fn, r.size(), start_of, row_of,
                                                                 [&](std::size_t k) { return r[k].translation; });
                                          refused += !plain.add(fn, r.size(), start_of, row_of);
                                          for (const cfi::Row& x : r) {
                                            pcs.push_back(x.start);
                                            pcs.push_back(x.end - 1);
                                            untagged += x.translation == 0;
                                          }
                                          rows += r.size();
                                        });
    ASSERT_TRUE(gen) << lib;
    EXPECT_EQ(refused, 0u) << lib;
    EXPECT_GT(rows, 20000u) << lib;
    EXPECT_EQ(untagged, 0u) << lib << ": rows the reader left without a translation number";
    Expected<std::vector<std::byte>> header = SectionEncoder(cfi::section_header(*abi, Version::kV3, 0)).finish();
    ASSERT_TRUE(header);
    Expected<Section> s = Section::parse(*header, 0);
    ASSERT_TRUE(s);
    Expected<RowIndex> a = tagged.finish(*s), b = plain.finish(*s);
    ASSERT_TRUE(a && b) << lib;
    EXPECT_EQ(a->num_rows(), b->num_rows()) << lib;
    EXPECT_EQ(a->num_boundaries(), b->num_boundaries()) << lib;
    std::size_t bad = 0;
    for (const std::uint64_t pc : pcs) {
      const Expected<RowMatch> x = a->find(pc), y = b->find(pc);
      const bool same = x && y ? *x == *y : !x && !y && x.error().code() == y.error().code();
      if (!same && bad++ == 0) ADD_FAILURE() << lib << ": first difference at 0x" << std::hex << pc;
    }
    EXPECT_EQ(bad, 0u) << lib;
    std::printf("%s: %zu rows, %zu PCs found alike tagged and untagged\n", lib, rows, pcs.size());
  }
}


// ModuleUnwindOptions::merge_own, as backtrace_init() asks it: an own
// section lacking functions (crt1's _start, gas leaving out the functions
// whose CFI it cannot express, e.g. stack realignment) and the generated
// ones in one RowIndex as primary(). Truth for the own section's functions:
// its decoded FREs (which the golden tests hold to objdump --sframe), at the
// first and last byte of each; for the others: libdw's rows, as above. Both
// GNU section versions of the corpus, linked by ld.
TEST(CfiRowsInPlace, MergedOwnIndexAnswersAsOwnSectionAndLibdw) {
  for (const char* name : {"x86_64-v3-linked/cxx", "x86_64-v3-linked/realign", "x86_64-v2-linked/cxx",
                           "x86_64-v2-linked/realign"}) {
    const std::string file = std::string(SFRAMEPP_SHARED_DIR) + "/corpus/" + name;
    auto f = elf::ElfFile::open(file);
    ASSERT_TRUE(f) << file;
    const Expected<elf::SFrameSectionData> own = f->sframe_section();
    ASSERT_TRUE(own) << file;
    const Expected<Section> sec = Section::parse(own->bytes, own->address);
    ASSERT_TRUE(sec) << file;
    const cfi::ModuleImage img = process::module_image(*f, own);
    cfi::ModuleUnwindOptions opt;
    opt.fde_index_with_rows = false;
    opt.merge_own = true;
    cfi::ModuleUnwind merged = cfi::ModuleUnwind::build(img, opt);
    opt.merge_own = false;
    cfi::ModuleUnwind apart = cfi::ModuleUnwind::build(img, opt);
    ASSERT_EQ(merged.source(), cfi::ModuleSource::kNative) << file << ": " << merged.reason();
    ASSERT_TRUE(cfi::generate(merged, *f)) << file << ": " << merged.reason();
    ASSERT_TRUE(cfi::generate(apart, *f)) << file << ": " << apart.reason();
    // Without the option, the lacking functions go to extra(), as before.
    ASSERT_TRUE(apart.extra().usable()) << file << ": " << apart.reason();
    EXPECT_GT(merged.extra_functions(), 0u) << file;
    EXPECT_EQ(merged.extra_functions(), apart.extra_functions()) << file;
    EXPECT_FALSE(merged.extra().usable()) << file << ": " << merged.reason();
    const cfi::UnwindSection& m = merged.primary();
    ASSERT_TRUE(m.rows) << file << ": " << merged.reason();
    std::size_t checked = 0, bad = 0;
    std::string first;
    const auto check = [&](std::uint64_t pc, const FrameRow& want, bool signal, const char* from) {
      ++checked;
      const Expected<RowMatch> got = m.rows->find(pc);
      if ((!got || got->row != want || got->signal != signal) && bad++ == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "0x%llx (%s): %s", static_cast<unsigned long long>(pc), from,
                      got ? "row differs" : "not covered");
        first = buf;
      }
    };
    for (std::uint32_t i = 0; i < sec->header().num_fdes; ++i) {
      const Expected<Fde> fde = sec->fde(i);
      ASSERT_TRUE(fde) << file;
      std::vector<std::pair<std::uint64_t, FrameRow>> rows;
      for (const auto& fre : sec->fres(*fde)) {
        ASSERT_TRUE(fre) << file;
        const Expected<FrameRow> row = sec->row(*fde, *fre);
        ASSERT_TRUE(row) << file;
        rows.push_back({fde->start_pc + fre->start_offset, *row});
      }
      for (std::size_t k = 0; k < rows.size(); ++k) {
        const std::uint64_t end = k + 1 < rows.size() ? rows[k + 1].first : fde->start_pc + fde->size;
        check(rows[k].first, rows[k].second, fde->signal, "own FRE, first byte");
        check(end - 1, rows[k].second, fde->signal, "own FRE, last byte");
      }
    }
    const std::size_t own_checked = checked;
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (fn.rows.empty() || apart.primary().covers(fn.start)) return;
      for (const auto& r : fn.rows)
        if (r.reason != cfi::Reason::kNone) return;  // no SFrame form: not generated
      for (const cfi::Row& want : fn.rows) {
        check(want.start, want.row, want.signal, "libdw row, first byte");
        check(want.end - 1, want.row, want.signal, "libdw row, last byte");
      }
    });
    ASSERT_TRUE(ok) << file;
    EXPECT_GT(own_checked, 20u) << file;
    EXPECT_GE(checked - own_checked, 2u) << file << ": no generated function compared (crt1's _start)";
    EXPECT_EQ(bad, 0u) << file << ": first at " << first;
    std::printf("%s: %zu own and %zu generated row ends found in the one index\n", name, own_checked,
                checked - own_checked);
  }
}

}  // namespace
