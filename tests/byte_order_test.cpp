// SPDX-License-Identifier: MIT
// Every corpus section re-encoded in the other byte order (by a flipper
// written in the test from the spec) must decode to the identical model.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/format/section.hpp"
#include "support/corpus.hpp"
#include "support/flip.hpp"

namespace {

using sframe::Section;

struct Model {
  sframe::Header header;
  std::vector<sframe::Fde> fdes;
  std::vector<sframe::Fre> fres;
  std::vector<sframe::FrameRow> rows;
};

Model decode(const Section& s) {
  Model m;
  m.header = s.header();
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    auto f = s.fde(i);
    EXPECT_TRUE(f);
    if (!f) break;
    m.fdes.push_back(*f);
    for (const auto& fre : s.fres(*f)) {
      EXPECT_TRUE(fre);
      if (!fre) break;
      m.fres.push_back(*fre);
      auto row = s.row(*f, *fre);
      EXPECT_TRUE(row);
      if (row) m.rows.push_back(*row);
    }
  }
  return m;
}

class ByteOrder : public ::testing::TestWithParam<sframe_test::GoldenCase> {};

TEST_P(ByteOrder, FlippedSectionDecodesIdentically) {
  const auto& c = GetParam();
  auto file = sframe::elf::ElfFile::open((c.dir / c.file).string());
  ASSERT_TRUE(file);
  auto data = file->sframe_section();
  ASSERT_TRUE(data);
  auto sec = Section::parse(data->bytes, data->address);
  ASSERT_TRUE(sec);
  // The flipper only knows the header's extent; trailing padding is dropped.
  std::vector<std::uint8_t> raw(sec->used_size());
  std::memcpy(raw.data(), data->bytes.data(), raw.size());
  auto flipped = sframe_test::flip_sframe_byte_order(raw);
  ASSERT_TRUE(flipped.has_value());
  ASSERT_NE(*flipped, raw);
  auto other = Section::parse(std::as_bytes(std::span(*flipped)), data->address);
  ASSERT_TRUE(other);
  EXPECT_NE(other->big_endian(), sec->big_endian());
  EXPECT_TRUE(sframe::validate(*other, sframe::Strictness::kStrict));
  const Model a = decode(*sec);
  const Model b = decode(*other);
  EXPECT_EQ(a.header, b.header);
  EXPECT_EQ(a.fdes, b.fdes);
  EXPECT_EQ(a.fres, b.fres);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.fres.size(), a.header.num_fres);
}

std::string case_name(const ::testing::TestParamInfo<sframe_test::GoldenCase>& info) {
  std::string n = info.param.name();
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, ByteOrder, ::testing::ValuesIn(sframe_test::golden_cases()), case_name);

}  // namespace
