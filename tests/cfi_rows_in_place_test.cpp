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

#include "sframe/cfi.hpp"
#include "sframe/cfi_reader.hpp"
#include "sframe/lookup.hpp"
#include "sframe/module_unwind.hpp"

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

}  // namespace
