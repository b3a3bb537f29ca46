// SPDX-License-Identifier: MIT
// Error and Expected (include/sframe/format/error.hpp): one code enum per layer,
// the layer carried with the code, the documented size, and the debug
// assertion of value()/error() on the wrong alternative. Truth: the spec's
// header layout (a bad magic number is a section error at byte 0, spec
// §2.2), the ELF format (a file cut inside its 64-byte header is not an
// ELF object), errno's ENOENT for a missing file, POSIX's open() of a
// FIFO for reading (it waits for a writer unless O_NONBLOCK), and the
// perf.data magic "PERFILE2" (tools/perf/Documentation/perf.data-file-format.txt).
//
// Built without NDEBUG (this file only), so that assert() is live.
#undef NDEBUG
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/format/error.hpp"
#include "perf_data.hpp"
#include "sframe/format/section.hpp"

namespace {

using namespace sframe;

static_assert(sizeof(Error) == 24);
static_assert(std::is_trivially_copyable_v<Error>);

// The layers' enumerators all start at 0: the same raw value in two layers
// is two different codes.
TEST(Error, LayerIsPartOfTheCode) {
  const Error a{FormatErrc::kTruncatedHeader, 0};
  const Error b{ElfErrc::kNoSFrameSection, 0};
  EXPECT_EQ(a.code().raw(), b.code().raw());
  EXPECT_NE(a.code(), b.code());
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(a.is(FormatErrc::kTruncatedHeader));
  EXPECT_FALSE(a.is(ElfErrc::kNoSFrameSection));
  EXPECT_EQ(a.layer(), ErrorLayer::kFormat);
  EXPECT_EQ(b.layer(), ErrorLayer::kElf);
  EXPECT_EQ(b.code().as<ElfErrc>(), ElfErrc::kNoSFrameSection);
  EXPECT_FALSE(b.code().as<FormatErrc>().has_value());
}

TEST(Error, EveryCodeHasAMessageAndAUniqueName) {
  std::vector<ErrorCode> all;
  for (const ErrorCodeInfo& i : kErrorCodes) all.push_back(i.code);
  EXPECT_EQ(all.size(), 44u);  // the codes of the one enum this replaced
  std::set<std::string_view> names;
  for (ErrorCode c : all) {
    EXPECT_NE(describe(c), "unknown error") << code_name(c);
    EXPECT_NE(code_name(c), "unknown");
    EXPECT_NE(layer_name(c.layer()), "unknown");
    names.insert(code_name(c));
  }
  EXPECT_EQ(names.size(), all.size());
}

TEST(Error, FieldsAndOffsetLimit) {
  const Error e{PerfErrc::kPerfTruncated, 0x1234, 7, 3, 4};
  EXPECT_EQ(e.offset, 0x1234u);
  EXPECT_EQ(e.value, 7u);
  EXPECT_EQ(e.fde, 3u);
  EXPECT_EQ(e.fre, 4u);
  EXPECT_EQ(code_name(e), "kPerfTruncated");
  EXPECT_EQ(layer_name(e.layer()), "perf.data");
  // Offsets beyond 48 bits are stored as the largest one.
  const Error big{PerfErrc::kPerfTruncated, ~std::uint64_t{0}};
  EXPECT_EQ(big.offset, Error::kMaxOffset);
  EXPECT_EQ(Error::kMaxOffset, (std::uint64_t{1} << 48) - 1);
}

// Real failures of each layer carry their layer.
TEST(Error, LayersOfRealFailures) {
  // Spec §2.2: sfp_magic (0xdee2) is the first field of the header.
  std::array<std::byte, 64> junk{};
  junk[0] = std::byte{0x12};
  junk[1] = std::byte{0x34};
  const Expected<Section> s = Section::parse(junk);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode(FormatErrc::kBadMagic));
  EXPECT_EQ(s.error().layer(), ErrorLayer::kFormat);
  EXPECT_EQ(s.error().offset, 0u);

  const Expected<elf::ElfFile> missing = elf::ElfFile::open("/nonexistent-dir/none.elf");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode(IoErrc::kIoError));
  EXPECT_EQ(missing.error().value, static_cast<std::uint64_t>(ENOENT));

  const std::string path = ::testing::TempDir() + "error_test_truncated.elf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write("\177ELF\2\1\1\0\0\0\0\0\0\0\0\0", 16);  // e_ident only
  }
  const Expected<elf::ElfFile> cut = elf::ElfFile::open(path);
  if (cut) {
    // libelf may accept the identification alone; finding the section must fail in the ELF layer.
    const auto sec = cut->sframe_section();
    ASSERT_FALSE(sec);
    EXPECT_EQ(sec.error().layer(), ErrorLayer::kElf);
  } else {
    EXPECT_EQ(cut.error().code(), ErrorCode(ElfErrc::kElfError));
  }
  std::remove(path.c_str());

  const std::array<std::byte, 8> not_perf{};
  const Expected<perf::PerfData> p = perf::PerfData::from_bytes(not_perf);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().layer(), ErrorLayer::kPerf);
}

// A path from a recording (an MMAP2 file name in a perf.data) may name a
// FIFO: opening one for reading waits for a writer, and reading a terminal
// waits for input. ElfFile::open refuses them at once (the alarm ends a
// wait as a failure).
TEST(Error, ElfFileOpenRefusesAFifoWithoutWaiting) {
  const std::string fifo = ::testing::TempDir() + "error_test_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ::alarm(10);
  const Expected<elf::ElfFile> f = elf::ElfFile::open(fifo);
  ::alarm(0);
  std::remove(fifo.c_str());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), ErrorCode(ElfErrc::kElfError));
}

struct Local {
  int v = 0;
};

TEST(ErrorDeathTest, ValueOfAnErrorAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Expected<Local> bad = make_error(FormatErrc::kBadMagic, 0);
  EXPECT_DEATH((void)bad.value(), "has_");
  const Expected<Local> good = Local{1};
  EXPECT_DEATH((void)good.error(), "has_");
  EXPECT_EQ(good.value().v, 1);
}

}  // namespace
