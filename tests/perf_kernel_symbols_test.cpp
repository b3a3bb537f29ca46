// SPDX-License-Identifier: MIT
// The names of kernel frames (perf::detail::KernelSymbols) from a kallsyms
// text written here by hand, the expected names worked out by hand from
// the rules perf applies to such a text: a function holds its addresses up
// to the next symbol's start; of aliases at one address perf names the
// last in file order (perf 6.1 and 7.2 print "__pi_memcpy" for "memcpy",
// "__memcpy", "__pi_memcpy"); a copy of another boot is shifted by the
// difference of the two _text addresses (perf's kallsyms__delta); perf's
// copy in its build-id cache is preferred when the recording names the
// kernel's build-id.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernel_symbols.hpp"
#include "perf_unwind.hpp"

namespace {

namespace fs = std::filesystem;
using sframe::perf::detail::KernelSymbols;

constexpr const char* kText =
    "ffffffff81000000 T _text\n"
    "ffffffff81000100 T memcpy\n"
    "ffffffff81000100 T __memcpy\n"
    "ffffffff81000100 T __pi_memcpy\n"
    "ffffffff81000200 t local_fn\n"
    "ffffffff81000400 T last_fn\n";

class KernelSymbolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sframepp-ksyms-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write(dir_ / "kallsyms", kText);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  // The name found at `addr`, or "" for none; its start in `start`.
  static std::string name_at(KernelSymbols& k, std::uint64_t addr, std::uint64_t* start = nullptr) {
    const KernelSymbols::Function f = k.find(addr);
    if (start) *start = f.start;
    return f.name ? *f.name : std::string();
  }
  fs::path dir_;
};

TEST_F(KernelSymbolsTest, NamesAsPerfDoes) {
  KernelSymbols k((dir_ / "kallsyms").string(), (dir_ / "debug").string(), {});
  std::uint64_t start = 0;
  EXPECT_EQ(name_at(k, 0xffffffff81000000, &start), "_text");
  EXPECT_EQ(start, 0xffffffff81000000u);
  EXPECT_EQ(name_at(k, 0xffffffff81000150, &start), "__pi_memcpy");
  EXPECT_EQ(start, 0xffffffff81000100u);
  // local_fn reaches last_fn.
  EXPECT_EQ(name_at(k, 0xffffffff81000350, &start), "local_fn");
  EXPECT_EQ(start, 0xffffffff81000200u);
  EXPECT_EQ(name_at(k, 0xffffffff81000400), "last_fn");
  EXPECT_EQ(name_at(k, 0xffffffff80ffffff), "");
  // Asked again: the same answer, from the per-address cache.
  EXPECT_EQ(name_at(k, 0xffffffff81000150), "__pi_memcpy");
}

TEST_F(KernelSymbolsTest, ShiftsACopyOfAnotherBoot) {
  KernelSymbols k((dir_ / "kallsyms").string(), (dir_ / "debug").string(), {});
  // Recorded with _text at 0xffffffff90000000: 0xf000000 above the copy's.
  k.set_recorded_text(0xffffffff90000000);
  std::uint64_t start = 0;
  EXPECT_EQ(name_at(k, 0xffffffff90000150, &start), "__pi_memcpy");
  EXPECT_EQ(start, 0xffffffff90000100u);
  EXPECT_EQ(name_at(k, 0xffffffff81000150), "");
}

TEST_F(KernelSymbolsTest, PrefersPerfsCopyOfTheRecordedKernel) {
  const std::string debug = (dir_ / "debug").string();
  write(sframe::perf::kallsyms_cache_path(debug, "00ff"), "ffffffff81000000 T _text\nffffffff81000100 T cached_fn\n");
  {
    KernelSymbols k((dir_ / "kallsyms").string(), debug, {"00ff"});
    EXPECT_EQ(name_at(k, 0xffffffff81000100), "cached_fn");
  }
  {
    // No copy for this build-id: the given file.
    KernelSymbols k((dir_ / "kallsyms").string(), debug, {"1234"});
    EXPECT_EQ(name_at(k, 0xffffffff81000100), "__pi_memcpy");
  }
  {
    // An unreadable file: no names, no error.
    KernelSymbols k((dir_ / "none").string(), debug, {});
    EXPECT_EQ(name_at(k, 0xffffffff81000100), "");
  }
}

}  // namespace
