// SPDX-License-Identifier: MIT
// `sframe record`'s table cache (src/record/table_cache.hpp): a module
// table read back is the table built, byte for byte, with its counts; a
// file that is truncated, damaged, of another format, written by another
// build (its header names the build-id readelf gives for this program), or
// that claims more blocks than it holds is refused (the table is then built
// again), never read past its end; IDs that are not hex never name a file.
// A module without a build-id is kept under its file's XXH128 (as xxhsum
// -H2 prints it) and read back by the next Tables.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "perf_unwind.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"
#include "table_cache.hpp"
#include "tables.hpp"

namespace {

namespace fs = std::filesystem;
using sframe::record::CachedTable;
using sframe::record::TableCache;

class TableCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sframe-table-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // A real module's table: the C library of this machine, SFrame
    // generated from its .eh_frame.
    auto f = sframe::elf::ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6");
    ASSERT_TRUE(f.has_value());
    built_.table = sframe::record::build_module_table(*f, built_.stats);
    ASSERT_FALSE(built_.table.blocks().empty());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& id) const { return dir_ + "/cache/" + id + ".table"; }
  std::vector<char> bytes(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void put(const std::string& path, const std::vector<char>& b) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(b.data(), static_cast<std::streamsize>(b.size()));
  }

  std::string dir_;
  CachedTable built_;
};

constexpr const char* kId = "0123456789abcdef0123456789abcdef01234567";

TEST_F(TableCacheTest, ReadsBackTheTableBuiltAndItsCounts) {
  const TableCache cache(dir_ + "/cache");  // made on first store
  EXPECT_FALSE(cache.load(kId).has_value());
  ASSERT_TRUE(cache.store(kId, built_));
  auto got = cache.load(kId);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->table.base(), built_.table.base());
  ASSERT_EQ(got->table.blocks().size_bytes(), built_.table.blocks().size_bytes());
  EXPECT_EQ(std::memcmp(got->table.blocks().data(), built_.table.blocks().data(), built_.table.blocks().size_bytes()), 0);
  EXPECT_EQ(got->stats.modules, 1u);
  EXPECT_EQ(got->stats.pages, built_.stats.pages);
  EXPECT_EQ(got->stats.rows, built_.stats.rows);
  EXPECT_EQ(got->stats.max_page_rows, built_.stats.max_page_rows);
  EXPECT_EQ(got->stats.generated_modules, built_.stats.generated_modules);
  EXPECT_EQ(got->stats.unsupported_rules, built_.stats.unsupported_rules);
  EXPECT_EQ(got->stats.eh_frame_bytes, built_.stats.eh_frame_bytes);
  EXPECT_EQ(got->stats.table_bytes, built_.stats.table_bytes);
  // Written whole under its name, no temporary file left beside it.
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_ + "/cache")) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);
}

TEST_F(TableCacheTest, RefusesFilesThatAreNotWhole) {
  const TableCache cache(dir_ + "/cache");
  ASSERT_TRUE(cache.store(kId, built_));
  const std::vector<char> good = bytes(file(kId));
  constexpr std::size_t kHeader = 40 + 8 * 10 + 128;
  ASSERT_GT(good.size(), kHeader + 4096);
  struct Damage {
    const char* what;
    std::vector<char> b;
  };
  std::vector<Damage> cases;
  cases.push_back({"empty", {}});
  cases.push_back({"header only", {good.begin(), good.begin() + kHeader}});
  cases.push_back({"a block short", {good.begin(), good.end() - 4096}});
  cases.push_back({"a byte short", {good.begin(), good.end() - 1}});
  auto longer = good;
  longer.push_back(0);
  cases.push_back({"a byte long", longer});
  auto magic = good;
  magic[0] ^= 1;
  cases.push_back({"another magic", magic});
  auto format = good;
  format[8] ^= 1;
  cases.push_back({"another format", format});
  auto build = good;
  build[40 + 8 * 10 + 3] ^= 1;
  cases.push_back({"another build", build});
  auto flipped = good;
  flipped[kHeader + 100] ^= 0x40;
  cases.push_back({"a flipped bit in a block", flipped});
  auto last = good;
  last.back() ^= 1;
  cases.push_back({"a flipped bit in the last block", last});
  auto huge = good;
  const std::uint64_t many = std::uint64_t{1} << 40;
  std::memcpy(huge.data() + 32, &many, 8);  // blocks: more than the file holds
  cases.push_back({"a block count past the file", huge});
  for (const Damage& d : cases) {
    put(file(kId), d.b);
    EXPECT_FALSE(cache.load(kId).has_value()) << d.what;
  }
  // Stored again, it reads back.
  ASSERT_TRUE(cache.store(kId, built_));
  EXPECT_TRUE(cache.load(kId).has_value());
}

// The header names the build that wrote the file: this program's GNU
// build-id as readelf reads it from the file.
TEST_F(TableCacheTest, NamesTheBuildThatWroteIt) {
  std::string want;
  {
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    FILE* p = popen(("readelf -n '" + self + "' 2>/dev/null").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char line[512];
    while (fgets(line, sizeof line, p))
      if (const char* at = std::strstr(line, "Build ID: ")) want.assign(at + 10, std::strcspn(at + 10, " \n"));
    pclose(p);
  }
  ASSERT_FALSE(want.empty()) << "readelf -n names no build-id for this test program";
  const TableCache cache(dir_ + "/cache");
  ASSERT_TRUE(cache.store(kId, built_));
  const std::vector<char> b = bytes(file(kId));
  ASSERT_GT(b.size(), std::size_t{40 + 8 * 10 + 128});
  const char* field = b.data() + 40 + 8 * 10;
  EXPECT_EQ(std::string(field, strnlen(field, 128)), want);
}

TEST_F(TableCacheTest, OnlyHexIdsNameFiles) {
  const TableCache cache(dir_ + "/cache");
  for (const char* id : {"", "a", "../../etc/passwd", "0123ABCD", "01 23", "0123/4567"}) {
    EXPECT_FALSE(cache.store(id, built_)) << id;
    EXPECT_FALSE(cache.load(id).has_value()) << id;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/cache")) << "nothing stored, no directory made";
}

// xxhsum -H2 FILE's hash (32 hex digits), or "" when it does not run.
std::string xxhsum128(const std::string& path) {
  std::string out;
  if (FILE* p = popen(("xxhsum -H2 '" + path + "' 2>/dev/null").c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    if (pclose(p) != 0) out.clear();
  }
  return out.substr(0, out.find_first_of(" \n"));
}

TEST_F(TableCacheTest, ContentKeyIsTheFilesXxh128) {
  const std::string copy = dir_ + "/libc-copy.so";
  fs::copy_file("/lib/x86_64-linux-gnu/libc.so.6", copy);
  const std::string want = xxhsum128(copy);
  ASSERT_EQ(want.size(), 32u) << "xxhsum -H2 (Debian: xxhash) is the oracle of this test";
  auto f = sframe::elf::ElfFile::open(copy);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(TableCache::content_key(*f), "xxh128-" + want);
  // One byte of the file changed (its last: a section's, not a header's).
  std::vector<char> b = bytes(copy);
  b.back() = static_cast<char>(b.back() ^ 1);
  const std::string changed = dir_ + "/libc-changed.so";
  put(changed, b);
  const std::string want2 = xxhsum128(changed);
  ASSERT_EQ(want2.size(), 32u);
  EXPECT_NE(want2, want);
  auto g = sframe::elf::ElfFile::open(changed);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(TableCache::content_key(*g), "xxh128-" + want2);
}

TEST_F(TableCacheTest, ContentKeysNameFilesAndNothingElseDoes) {
  const TableCache cache(dir_ + "/cache");
  const std::string key = "xxh128-0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(cache.store(key, built_));
  EXPECT_TRUE(fs::exists(file(key)));
  EXPECT_TRUE(cache.load(key).has_value());
  for (const std::string& bad : {std::string("xxh128-"), key.substr(0, key.size() - 1), key + "0",
                                 std::string("xxh128-0123456789ABCDEF0123456789abcdef"),
                                 std::string("xxh128-../../../../../../../etc/passwd0"), std::string("xxh64-0123456789abcdef")}) {
    EXPECT_FALSE(cache.store(bad, built_)) << bad;
    EXPECT_FALSE(cache.load(bad).has_value()) << bad;
  }
}

// A module without a build-id (objcopy takes libc's note out): built by the
// first Tables, read back from the cache by the next, the same table.
TEST_F(TableCacheTest, ModuleWithoutBuildIdIsReadBack) {
  const std::string copy = dir_ + "/libc-no-id.so";
  const std::string cmd = "objcopy --remove-section .note.gnu.build-id /lib/x86_64-linux-gnu/libc.so.6 '" + copy + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  {
    auto f = sframe::elf::ElfFile::open(copy);
    ASSERT_TRUE(f.has_value());
    ASSERT_FALSE(sframe::elf::build_id(*f).has_value()) << "objcopy left a build-id";
  }
  const sframe::perf::FileInfo info;
  const sframe::perf::Session session(info);
  sframe::record::Tables first(session, dir_ + "/cache");
  ASSERT_TRUE(first.preload(copy));
  EXPECT_EQ(first.stats().cached_modules, 0u);
  EXPECT_EQ(first.stats().generated_modules, 1u);
  sframe::record::Tables second(session, dir_ + "/cache");
  ASSERT_TRUE(second.preload(copy));
  EXPECT_EQ(second.stats().cached_modules, 1u);
  const auto& a = first.module(1);
  const auto& b = second.module(1);
  EXPECT_EQ(a.base(), b.base());
  ASSERT_EQ(a.blocks().size_bytes(), b.blocks().size_bytes());
  EXPECT_EQ(std::memcmp(a.blocks().data(), b.blocks().data(), a.blocks().size_bytes()), 0);
  // The table of the file with its build-id is libc's as built directly.
  ASSERT_EQ(a.blocks().size_bytes(), built_.table.blocks().size_bytes());
  EXPECT_EQ(std::memcmp(a.blocks().data(), built_.table.blocks().data(), a.blocks().size_bytes()), 0);
}

TEST_F(TableCacheTest, NoDirectoryNoCache) {
  const TableCache none("");
  EXPECT_FALSE(none.store(kId, built_));
  EXPECT_FALSE(none.load(kId).has_value());
  // A directory that cannot be made (under a regular file).
  put(dir_ + "/file", {'x'});
  const TableCache bad(dir_ + "/file/cache");
  EXPECT_FALSE(bad.store(kId, built_));
  EXPECT_FALSE(bad.load(kId).has_value());
}

}  // namespace
