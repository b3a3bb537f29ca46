// SPDX-License-Identifier: MIT
// `sframe dump` text against GNU objdump's golden output for every corpus file.
#include <gtest/gtest.h>

#include "objdump_text.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/section.hpp"
#include "support/corpus.hpp"

namespace {

using sframe_test::GoldenCase;

std::string dump(const GoldenCase& c) {
  auto file = sframe::elf::ElfFile::open((c.dir / c.file).string());
  if (!file) return "open failed";
  std::string out;
  sframe::tools::append_banner(out, c.file, sframe::tools::bfd_target_name(file->info()));
  auto data = file->sframe_section();
  if (!data) return "no section";
  auto sec = sframe::Section::parse(data->bytes, data->address);
  if (!sec) return "parse failed";
  if (!sframe::validate(*sec, sframe::Strictness::kLenient)) return "validate failed";
  if (!sframe::tools::append_section(out, *sec, data->name)) return "dump failed";
  return out;
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, DumpMatchesObjdump) {
  const GoldenCase& c = GetParam();
  const std::string want = sframe_test::read_file(c.golden);
  ASSERT_FALSE(want.empty()) << c.golden;
  EXPECT_EQ(dump(c), want);
}

// Every section made by GNU as/ld obeys every rule we check.
TEST_P(Golden, StrictValidationAccepts) {
  const GoldenCase& c = GetParam();
  auto file = sframe::elf::ElfFile::open((c.dir / c.file).string());
  ASSERT_TRUE(file);
  auto data = file->sframe_section();
  ASSERT_TRUE(data);
  auto sec = sframe::Section::parse(data->bytes, data->address);
  ASSERT_TRUE(sec);
  auto ok = sframe::validate(*sec, sframe::Strictness::kStrict);
  EXPECT_TRUE(ok) << sframe::describe(ok.error().code()) << " at " << ok.error().offset;
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, Golden, ::testing::ValuesIn(sframe_test::golden_cases()), case_name);

// The corpus must be there: a missing ../shared must fail, not pass vacuously.
TEST(GoldenCorpus, HasAllGoldens) { EXPECT_GE(sframe_test::golden_cases().size(), 61u); }

}  // namespace
