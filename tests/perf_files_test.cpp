// SPDX-License-Identifier: MIT
// The table of mapped files Sessions share (perf::FileTable): a file is
// opened once, a replaced one again when a recording names its new
// build-id, and the Sessions sharing the table name the same opened file.
// Build-ids are checked against elfutils' own reader (dwelf).
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "perf_unwind.hpp"
#include "sframe/elf/elf.hpp"

namespace {

using sframe::perf::FileTable;

std::string hex(const void* p, ssize_t n) {
  std::string s;
  char b[3];
  for (ssize_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(p)[i]);
    s += b;
  }
  return s;
}

// The build-id as elfutils reads it from an ELF image.
std::string dwelf_id(Elf* e) {
  const void* id = nullptr;
  const ssize_t n = e ? dwelf_elf_gnu_build_id(e, &id) : -1;
  return n > 0 ? hex(id, n) : std::string();
}

std::string dwelf_id(const std::string& path) {
  elf_version(EV_CURRENT);
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return {};
  Elf* e = elf_begin(fd, ELF_C_READ, nullptr);
  std::string id = dwelf_id(e);
  elf_end(e);
  close(fd);
  return id;
}

// Two programs of this machine with build-ids of their own.
constexpr const char* kA = "/bin/true";
constexpr const char* kB = "/bin/false";

TEST(PerfFiles, AFileIsOpenedOnceWithItsBuildId) {
  const std::string want = dwelf_id(kA);
  ASSERT_FALSE(want.empty()) << kA << " has no build-id";
  FileTable t;
  const FileTable::Entry& a = t.open(kA);
  ASSERT_TRUE(a.file);
  EXPECT_EQ(a.build_id, want);
  const FileTable::Entry& again = t.open(kA, want);
  EXPECT_EQ(again.file.get(), a.file.get());
  EXPECT_FALSE(t.open("/nonexistent/file").file);
}

TEST(PerfFiles, AReplacedFileIsOpenedAgainForItsNewBuildId) {
  const std::string id_a = dwelf_id(kA), id_b = dwelf_id(kB);
  ASSERT_FALSE(id_a.empty());
  ASSERT_FALSE(id_b.empty());
  ASSERT_NE(id_a, id_b);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sframe-files-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "prog").string();
  fs::copy_file(kA, path, fs::copy_options::overwrite_existing);

  FileTable t;
  const auto first = t.open(path).file;
  ASSERT_TRUE(first);
  EXPECT_EQ(t.open(path).build_id, id_a);
  // Replaced on disk (as a package upgrade does: a new file renamed over).
  fs::copy_file(kB, path + ".new", fs::copy_options::overwrite_existing);
  fs::rename(path + ".new", path);
  // Asked for no build-id: the file opened before.
  EXPECT_EQ(t.open(path).file.get(), first.get());
  // Asked for the new one: opened again, and kept.
  const FileTable::Entry& b = t.open(path, id_b);
  ASSERT_TRUE(b.file);
  EXPECT_NE(b.file.get(), first.get());
  EXPECT_EQ(b.build_id, id_b);
  EXPECT_EQ(t.open(path).build_id, id_b);
  // Asked for one the file does not have: the entry stays.
  EXPECT_EQ(t.open(path, id_a).build_id, id_b);
  fs::remove_all(dir);
}

TEST(PerfFiles, TheVdsoIsTheAuxiliaryVectorsImage) {
  const auto* ehdr = reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR));
  ASSERT_NE(ehdr, nullptr) << "no vDSO in the auxiliary vector";
  FileTable t;
  const FileTable::Entry& v = t.vdso();
  ASSERT_TRUE(v.file);
  std::size_t size = 0;
  char* raw = elf_rawfile(static_cast<Elf*>(v.file->native_handle()), &size);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(std::string(raw, size), std::string(ehdr, size));
  // Its build-id as elfutils reads it from the mapped image.
  elf_version(EV_CURRENT);
  Elf* e = elf_memory(const_cast<char*>(ehdr), size);
  const std::string want = dwelf_id(e);
  elf_end(e);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(v.build_id, want);
  EXPECT_EQ(t.vdso().file.get(), v.file.get());
}

// An executable mapping of `path` in process 1 (MMAP2, no build-id).
sframe::perf::Record mmap_of(const char* path) {
  sframe::perf::Record r;
  r.type = sframe::perf::kRecordMmap2;
  r.mmap.pid = r.mmap.tid = 1;
  r.mmap.start = 0x400000;
  r.mmap.len = 0x1000;
  r.mmap.mmap2 = true;
  r.mmap.exec = true;
  r.mmap.filename = path;
  return r;
}

TEST(PerfFiles, SessionsSharingATableNameOneOpenedFile) {
  sframe::perf::FileInfo info;
  sframe::perf::SessionOptions so;
  so.symbols = false;
  so.files = std::make_shared<FileTable>();
  sframe::perf::Session a(info, so), b(info, so);
  sframe::perf::SessionOptions own = so;
  own.files = nullptr;
  sframe::perf::Session c(info, own);
  for (sframe::perf::Session* s : {&a, &b, &c}) s->process(mmap_of(kA));
  const auto ma = a.mappings(1), mb = b.mappings(1), mc = c.mappings(1);
  ASSERT_EQ(ma.size(), 1u);
  ASSERT_EQ(mb.size(), 1u);
  ASSERT_EQ(mc.size(), 1u);
  ASSERT_TRUE(ma[0].file);
  EXPECT_EQ(ma[0].file.get(), mb[0].file.get());
  EXPECT_EQ(ma[0].file.get(), so.files->open(kA).file.get());
  ASSERT_TRUE(mc[0].file);
  EXPECT_NE(mc[0].file.get(), ma[0].file.get());
  EXPECT_EQ(c.files().open(kA).file.get(), mc[0].file.get());
  EXPECT_EQ(ma[0].build_id, dwelf_id(kA));
}

}  // namespace
