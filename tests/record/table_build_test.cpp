// SPDX-License-Identifier: MIT
// `sframe record`'s module tables (src/record/tables.hpp): the table of a
// module without .sframe, built from the CFI translator's rows as they come,
// is the table of the same module with `sframe gen`'s encoded SFrame
// section added (SFrame v3 that GNU objdump dumps as we do; the golden
// tests), read back through the section decoder: the same pages and rows,
// but for the bit that marks generated rules.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "sframe/elf/elf.hpp"
#include "tables.hpp"

namespace {

namespace fs = std::filesystem;
using sframe::record::build_module_table;
using sframe::record::ModuleTable;
using sframe::record::TableStats;

ModuleTable table_of(const std::string& path, TableStats& st) {
  auto f = sframe::elf::ElfFile::open(path);
  EXPECT_TRUE(f.has_value()) << path;
  if (!f) return {};
  return build_module_table(*f, st);
}

class TableBuild : public ::testing::TestWithParam<const char*> {};

TEST_P(TableBuild, TranslatedRowsGiveTheTableOfTheEncodedSection) {
  const std::string lib = GetParam();
  char tmpl[] = "/tmp/sframe-table-build-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string copy = std::string(tmpl) + "/with-sframe.so";
  const std::string cmd = std::string(SFRAMEPP_TOOL) + " gen --elf " + copy + " " + lib + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  TableStats direct_st, encoded_st;
  const ModuleTable direct = table_of(lib, direct_st);
  const ModuleTable encoded = table_of(copy, encoded_st);
  fs::remove_all(tmpl);
  ASSERT_FALSE(direct.blocks().empty());
  EXPECT_EQ(direct_st.generated_modules, 1u);
  EXPECT_EQ(encoded_st.generated_modules, 0u);  // its own section covers every function
  EXPECT_EQ(direct.base(), encoded.base());
  ASSERT_EQ(direct.blocks().size(), encoded.blocks().size());
  EXPECT_EQ(direct_st.pages, encoded_st.pages);
  EXPECT_EQ(direct_st.rows, encoded_st.rows);
  EXPECT_EQ(direct_st.unsupported_rules, encoded_st.unsupported_rules);
  // The directory blocks come first; the first page's rows start right
  // after them (record_abi.h).
  const std::size_t dir_blocks = direct.blocks()[0].dir[0] / SFRAME_RECORD_BLOCK_ROWS;
  ASSERT_GT(dir_blocks, 0u);
  ASSERT_LT(dir_blocks, direct.blocks().size());
  for (std::size_t b = 0; b < dir_blocks; ++b)
    EXPECT_EQ(std::memcmp(&direct.blocks()[b], &encoded.blocks()[b], sizeof(sframe_record_block)), 0)
        << lib << ": directory block " << b;
  std::size_t rows = 0, differ = 0;
  for (std::size_t b = dir_blocks; b < direct.blocks().size(); ++b) {
    const sframe_record_block& x = direct.blocks()[b];
    const sframe_record_block& y = encoded.blocks()[b];
    for (std::size_t k = 0; k < SFRAME_RECORD_BLOCK_ROWS; ++k) {
      sframe_record_row r = x.rows[k], s = y.rows[k];
      r.flags &= static_cast<std::uint8_t>(~SFRAME_RECORD_ROW_GENERATED);
      if (r.start == s.start && r.flags == s.flags && r.fp_off8 == s.fp_off8 && r.cfa_off == s.cfa_off) {
        rows += (x.rows[k].flags & SFRAME_RECORD_ROW_GENERATED) != 0;
        continue;
      }
      if (++differ <= 5)
        ADD_FAILURE() << lib << ": block " << b << " slot " << k << ": start " << x.rows[k].start << " / " << s.start
                      << ", flags " << int(x.rows[k].flags) << " / " << int(s.flags) << ", CFA offset "
                      << x.rows[k].cfa_off << " / " << s.cfa_off;
    }
  }
  EXPECT_EQ(differ, 0u);
  // The rows compared are generated ones (not only padding and directory).
  EXPECT_GT(rows, 1000u);
}

// Libraries of this machine without .sframe (Debian 12's).
INSTANTIATE_TEST_SUITE_P(System, TableBuild,
                         ::testing::Values("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
                                           "/lib/x86_64-linux-gnu/libstdc++.so.6"));

}  // namespace
