// SPDX-License-Identifier: MIT
// Replays every input kept under tests/fuzz_regressions/TARGET/ (inputs that
// once broke an invariant or a sanitizer, or hand-made worst cases) through
// the fuzz target's own harness, fuzz/TARGET.cpp, built here with the normal
// compiler: the harness checks the same invariants and traps when one breaks,
// so a regression fails (crashes) its test here without clang or libFuzzer.
// Run this binary under ASan/UBSan (scripts/test does) for the memory checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// The harnesses' LLVMFuzzerTestOneInput, renamed per target at build time.
extern "C" int sframepp_fuzz_section(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_elf(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_encode(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_cfi(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_unwind(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_perf(const std::uint8_t* data, std::size_t size);
extern "C" int sframepp_fuzz_cfi_diff(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

struct Case {
  std::string target;
  fs::path file;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.target << "/" << c.file.filename().string(); }

std::vector<Case> cases() {
  std::vector<Case> out;
  const fs::path root = SFRAMEPP_FUZZ_REGRESSIONS_DIR;
  for (const char* t : {"fuzz_section", "fuzz_elf", "fuzz_encode", "fuzz_cfi", "fuzz_unwind", "fuzz_perf", "fuzz_cfi_diff"}) {
    if (!fs::is_directory(root / t)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(root / t))
      if (e.is_regular_file() && e.path().extension() != ".md") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) out.push_back({t, f});
  }
  return out;
}

class FuzzRegression : public ::testing::TestWithParam<Case> {};

TEST_P(FuzzRegression, PassesTheHarness) {
  const Case& c = GetParam();
  std::ifstream in(c.file, std::ios::binary);
  ASSERT_TRUE(in) << c.file;
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A heap block of exactly the input's size, as libFuzzer passes it.
  std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
  const auto* p = data.data();
  const std::size_t n = data.size();
  int rc = 0;
  if (c.target == "fuzz_section") rc = sframepp_fuzz_section(p, n);
  if (c.target == "fuzz_elf") rc = sframepp_fuzz_elf(p, n);
  if (c.target == "fuzz_encode") rc = sframepp_fuzz_encode(p, n);
  if (c.target == "fuzz_cfi") rc = sframepp_fuzz_cfi(p, n);
  if (c.target == "fuzz_unwind") rc = sframepp_fuzz_unwind(p, n);
  if (c.target == "fuzz_perf") rc = sframepp_fuzz_perf(p, n);
  if (c.target == "fuzz_cfi_diff") rc = sframepp_fuzz_cfi_diff(p, n);
  EXPECT_EQ(rc, 0);
}

TEST(FuzzRegressions, EveryTargetHasInputs) {
  std::vector<std::string> seen;
  for (const Case& c : cases()) seen.push_back(c.target);
  for (const char* t : {"fuzz_section", "fuzz_elf", "fuzz_encode", "fuzz_cfi", "fuzz_unwind", "fuzz_perf", "fuzz_cfi_diff"})
    EXPECT_NE(std::find(seen.begin(), seen.end(), t), seen.end()) << t;
}

std::string case_name(const ::testing::TestParamInfo<Case>& param_info) {
  std::string name = param_info.param.target + "_" + param_info.param.file.filename().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Inputs, FuzzRegression, ::testing::ValuesIn(cases()), case_name);

}  // namespace
