// SPDX-License-Identifier: MIT
// The perf.data reader against perf's own view of committed recordings
// (tests/perf/data: file mode, -z COMPRESSED, pipe mode; the truth files
// were written by perf report --stats, perf script, perf buildid-list and
// perf script --header-only from the same files), plus hostile input:
// every truncation and byte corruption is an error or a success, never a
// crash (AddressSanitizer in CI), and 32-bit samples are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "perf_data.hpp"

namespace {

using namespace sframe;
using namespace sframe::perf;

const std::string kDir = SFRAMEPP_PERF_DATA_DIR;

std::vector<std::byte> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// "  MMAP2 events:  23  ( 39.7%)" -> {"MMAP2", 23}; the first of each name.
std::map<std::string, std::uint64_t> perf_stats(const std::string& path) {
  std::map<std::string, std::uint64_t> m;
  for (const std::string& l : lines(path)) {
    std::istringstream ss(l);
    std::string name, events;
    std::uint64_t n = 0;
    ss >> name >> events >> n;
    m.emplace(name, n);
  }
  return m;
}

// Collapses runs of spaces (perf pads its columns).
std::string squeeze(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == ' ' && (o.empty() || o.back() == ' ')) continue;
    o += c;
  }
  while (!o.empty() && o.back() == ' ') o.pop_back();
  return o;
}

struct Seen {
  std::vector<std::string> samples;  // as perf script -F tid,time,ip -G
  std::map<std::uint32_t, std::uint64_t> types;
};

Seen read_all(PerfData& d) {
  Seen s;
  auto r = d.for_each([&](const Record& rec) {
    ++s.types[rec.type];
    if (rec.type != kRecordSample) return;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%5u %5" PRIu64 ".%06" PRIu64 ": %16" PRIx64, rec.id.tid, rec.id.time / 1000000000,
                  rec.id.time % 1000000000 / 1000, rec.sample.ip);
    s.samples.push_back(squeeze(buf));
  });
  EXPECT_TRUE(r) << (r ? "" : std::string(describe(r.error().code())));
  return s;
}

class Recording : public ::testing::TestWithParam<const char*> {};

TEST_P(Recording, SamplesAndRecordCountsAsPerfSeesThem) {
  const std::string base = kDir + "/" + GetParam();
  auto d = PerfData::open(base + ".data");
  ASSERT_TRUE(d) << describe(d.error().code()) << " at " << d.error().offset;
  const Seen s = read_all(*d);
  std::vector<std::string> want;
  for (const std::string& l : lines(base + ".samples")) want.push_back(squeeze(l));
  EXPECT_EQ(s.samples, want);
  const auto stats = perf_stats(base + ".stats");
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::uint32_t>>{
           {"MMAP", kRecordMmap}, {"MMAP2", kRecordMmap2}, {"COMM", kRecordComm},
           {"EXIT", kRecordExit}, {"FORK", kRecordFork},   {"SAMPLE", kRecordSample}}) {
    const auto it = stats.find(name);
    EXPECT_EQ(s.types.count(type) ? s.types.at(type) : 0, it == stats.end() ? 0 : it->second) << name;
  }
  const auto rounds = stats.find("FINISHED_ROUND");
  EXPECT_EQ(d->stats().finished_rounds, rounds == stats.end() ? 0 : rounds->second);
  const auto comp = stats.find("COMPRESSED");
  EXPECT_EQ(d->stats().compressed_records, comp == stats.end() ? 0 : comp->second);
  EXPECT_EQ(d->info().pipe, std::string(GetParam()) == "small-pipe");
  // Time order: perf script prints samples sorted by time.
  ASSERT_EQ(d->info().attrs.size(), 1u);
  EXPECT_EQ(d->info().attrs[0].name, "cpu-clock");
  EXPECT_EQ(d->info().attrs[0].sample_regs_user, 0xff0fffu);  // small.header: sample_regs_user = 0xff0fff
  EXPECT_EQ(d->info().attrs[0].sample_stack_user, 256u);
}

// Every sampled user register, read in one pass (user_regs) and one by one
// (user_reg), is what perf script prints for it (F.uregs: `perf script -F
// tid,time,uregs -G`). The mask 0xff0fff of small.header has gaps, so each
// register's place is counted across them; the names are perf's, in the
// register order of arch/x86/include/uapi/asm/perf_regs.h.
TEST_P(Recording, UserRegsAsPerfPrintsThem) {
  static constexpr const char* kNames[] = {"AX", "BX", "CX",  "DX",  "SI",  "DI",  "BP",  "SP",
                                           "IP", "FLAGS", "CS", "SS", "DS", "ES", "FS", "GS",
                                           "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"};
  const std::string base = kDir + "/" + GetParam();
  auto d = PerfData::open(base + ".data");
  ASSERT_TRUE(d);
  std::vector<std::string> one_pass, one_by_one;
  auto r = d->for_each([&](const Record& rec) {
    if (rec.type != kRecordSample) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%u %" PRIu64 ".%06" PRIu64 ": ABI:%" PRIu64, rec.id.tid,
                  rec.id.time / 1000000000, rec.id.time % 1000000000 / 1000,
                  static_cast<std::uint64_t>(rec.sample.regs_abi));
    std::string a = buf, b = buf;
    std::array<std::uint64_t, 64> all{};
    const std::uint64_t has = rec.sample.user_regs(all);
    for (unsigned reg = 0; reg < std::size(kNames); ++reg) {
      if ((has >> reg) & 1) {
        std::snprintf(buf, sizeof buf, " %s:0x%" PRIx64, kNames[reg], all[reg]);
        a += buf;
      }
      if (const auto one = rec.sample.user_reg(reg)) {
        std::snprintf(buf, sizeof buf, " %s:0x%" PRIx64, kNames[reg], *one);
        b += buf;
      }
    }
    one_pass.push_back(a);
    one_by_one.push_back(b);
  });
  ASSERT_TRUE(r);
  std::vector<std::string> want;
  for (const std::string& l : lines(base + ".uregs")) want.push_back(squeeze(l.substr(l.find_first_not_of(' '))));
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(one_pass, want);
  EXPECT_EQ(one_by_one, want);
}

INSTANTIATE_TEST_SUITE_P(Modes, Recording, ::testing::Values("small", "small-z", "small-pipe"));

TEST(PerfData, HeaderFeaturesAsPerfPrintsThem) {
  auto d = PerfData::open(kDir + "/small.data");
  ASSERT_TRUE(d);
  std::string cmdline, arch;
  for (const std::string& l : lines(kDir + "/small.header")) {
    if (l.rfind("# cmdline : ", 0) == 0) cmdline = squeeze(l.substr(12));
    if (l.rfind("# arch : ", 0) == 0) arch = l.substr(9);
  }
  std::string ours;
  for (const std::string& a : d->info().cmdline) ours += (ours.empty() ? "" : " ") + a;
  EXPECT_EQ(ours, cmdline);
  EXPECT_EQ(d->info().arch, arch);
  // perf buildid-list: "BUILDID PATH" per DSO with samples.
  std::map<std::string, std::string> ids;
  for (const auto& b : d->info().build_ids) ids[b.filename] = b.build_id;
  for (const std::string& l : lines(kDir + "/small.buildids")) {
    const auto sp = l.find(' ');
    ASSERT_NE(sp, std::string::npos);
    EXPECT_EQ(ids[l.substr(sp + 1)], l.substr(0, sp)) << l;
  }
}

// Every prefix and every single-byte corruption of the three recordings:
// an error (with an offset inside the input) or a success, never a crash.
TEST(PerfData, HostileInputIsBoundedAndClear) {
  for (const char* name : {"small", "small-z", "small-pipe"}) {
    const std::vector<std::byte> all = slurp(kDir + "/" + name + ".data");
    ASSERT_FALSE(all.empty());
    for (std::size_t n = 0; n < all.size(); n += (n < 512 ? 1 : 61)) {
      auto d = PerfData::from_bytes(std::span(all).first(n));
      if (!d) {
        EXPECT_LE(d.error().offset, n) << name << " cut at " << n;
        continue;
      }
      auto r = d->for_each([](const Record&) {});
      if (!r) {
        EXPECT_LE(r.error().offset, n) << name << " cut at " << n;
      }
    }
    for (std::size_t i = 0; i < all.size(); i += 13) {
      std::vector<std::byte> bad = all;
      bad[i] ^= std::byte{0xa5};
      auto d = PerfData::from_bytes(bad);
      if (d) (void)d->for_each([](const Record&) {});
    }
  }
  EXPECT_EQ(PerfData::from_bytes({}).error().code(), PerfErrc::kPerfBadHeader);
  std::vector<std::byte> junk(200, std::byte{0x41});
  EXPECT_EQ(PerfData::from_bytes(junk).error().code(), PerfErrc::kPerfBadHeader);
}

// perf_file_header (perf's tools/perf/util/header.h): attrs at byte 24
// (offset, size), attr_size at 16; each entry ends with its IDs'
// perf_file_section (offset, size). small.data has one 144-byte entry.
// Appended here: 4096 copies of it, each naming the whole file as its IDs
// (aliasing arrays no perf writes): 4096 x the file's size in IDs if
// believed. The second entry's size field is where the IDs outgrow the
// file.
TEST(PerfData, AliasedIdArraysAreRefusedNotMultiplied) {
  std::vector<std::byte> all = slurp(kDir + "/small.data");
  ASSERT_GE(all.size(), 104u);
  const auto get = [&](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, all.data() + at, 8);
    return v;
  };
  const auto put = [&](std::size_t at, std::uint64_t v) { std::memcpy(all.data() + at, &v, 8); };
  const std::uint64_t entry = get(16), first = get(24);
  ASSERT_EQ(entry, 144u);
  ASSERT_EQ(get(32), entry);
  const std::vector<std::byte> attr(all.begin() + static_cast<std::ptrdiff_t>(first),
                                    all.begin() + static_cast<std::ptrdiff_t>(first + entry));
  const std::uint64_t table = all.size();
  for (int i = 0; i < 4096; ++i) all.insert(all.end(), attr.begin(), attr.end());
  const std::uint64_t whole = all.size() / 8 * 8;
  for (std::uint64_t k = 0; k < 4096; ++k) {
    put(static_cast<std::size_t>(table + k * entry + entry - 16), 0);
    put(static_cast<std::size_t>(table + k * entry + entry - 8), whole);
  }
  put(24, table);
  put(32, 4096 * entry);
  const auto d = PerfData::from_bytes(all);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), PerfErrc::kPerfBadHeader);
  EXPECT_EQ(d.error().offset, table + entry + entry - 8);
}

TEST(PerfData, BigEndianAnd32BitAreRefused) {
  std::vector<std::byte> all = slurp(kDir + "/small.data");
  ASSERT_GE(all.size(), 104u);
  // The magic as a big-endian host writes it.
  std::vector<std::byte> be = all;
  std::reverse(be.begin(), be.begin() + 8);
  EXPECT_EQ(PerfData::from_bytes(be).error().code(), PerfErrc::kPerfUnsupported);
  // The first sample's REGS_USER ABI word set to PERF_SAMPLE_REGS_ABI_32.
  // Its layout (small.header: IP|TID|TIME|ADDR|CALLCHAIN|REGS_USER|...):
  // header, ip, pid/tid, time, addr, callchain nr and entries, then the ABI.
  std::uint64_t data_off = 0;
  std::memcpy(&data_off, all.data() + 40, 8);
  std::size_t pos = data_off;
  bool patched = false;
  while (pos + 8 <= all.size() && !patched) {
    std::uint32_t type = 0;
    std::uint16_t size = 0;
    std::memcpy(&type, all.data() + pos, 4);
    std::memcpy(&size, all.data() + pos + 6, 2);
    ASSERT_GE(size, 8u);
    if (type == kRecordSample) {
      std::uint64_t nr = 0;
      std::memcpy(&nr, all.data() + pos + 8 + 32, 8);
      const std::size_t abi_at = pos + 8 + 32 + 8 + 8 * nr;
      const std::uint64_t abi32 = 1;
      std::memcpy(all.data() + abi_at, &abi32, 8);
      patched = true;
      auto d = PerfData::from_bytes(all);
      ASSERT_TRUE(d);
      auto r = d->for_each([](const Record&) {});
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code(), PerfErrc::kPerfUnsupported);
      EXPECT_GE(r.error().offset, pos);
      EXPECT_LT(r.error().offset, pos + size);
    }
    pos += size;
  }
  EXPECT_TRUE(patched);
}

}  // namespace
