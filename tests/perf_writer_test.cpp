// SPDX-License-Identifier: MIT
// The perf.data writer's records written from scratch (what `sframe record`
// will write), read by perf itself: Debian's perf 6.1 and the current perf
// (tests/perf/current_perf.sh) must print the task events, the
// mapping, and the sample's callchain named from the mapped file (libc's
// dynamic symbols, whose addresses come from `nm -D`, not from us). File
// and pipe mode.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../src/perf/perf_data.hpp"
#include "../src/perf/perf_layout.hpp"
#include "../src/perf/perf_unwind.hpp"
#include "../src/perf/perf_writer.hpp"

namespace {

using namespace sframe::perf;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

// A dynamic symbol's address in `lib`, from binutils' nm.
std::uint64_t nm_address(const std::string& lib, const std::string& name) {
  const std::string line = run("nm -D --defined-only " + lib + " | grep -m1 ' " + name + "@'");
  return line.empty() ? 0 : std::strtoull(line.c_str(), nullptr, 16);
}

// The records encoded in `rec`, one at a time, as a recorder writes them.
void write_records(PerfWriter& w, const std::vector<std::byte>& rec) {
  for (std::size_t at = 0; at < rec.size();) {
    std::uint16_t size = 0;
    std::memcpy(&size, rec.data() + at + 6, 2);
    ASSERT_TRUE(w.write({rec.data() + at, size}).has_value());
    at += size;
  }
}

// cpu-clock samples with callchains, as `sframe record` writes them.
EventAttr cpu_clock_attr() {
  EventAttr a;
  a.type = 1;  // PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK
  a.sample_period = 100000;
  a.sample_type = kSampleIp | kSampleTid | kSampleTime | kSampleCpu | kSamplePeriod | kSampleCallchain;
  // mmap, comm, task, sample_id_all, mmap2
  a.flags = (1ull << 8) | (1ull << 9) | (1ull << 13) | layout::attr::kFlagSampleIdAll | (1ull << 23);
  a.ids = {7};
  a.name = "cpu-clock";
  return a;
}

// The attribute and the features perf needs, into `w`.
void begin_file(PerfWriter& w, const EventAttr& a) {
  EXPECT_TRUE(w.set_attrs({&a, 1}).has_value());
  EXPECT_TRUE(w.add_feature(layout::kFeatEventDesc, feature_event_desc({&a, 1})).has_value());
  EXPECT_TRUE(w.add_feature(layout::kFeatArch, feature_string("x86_64")).has_value());
}

std::vector<std::byte> write_file(bool pipe, const std::string& libc) {
  const EventAttr a = cpu_clock_attr();
  std::vector<std::byte> out;
  PerfWriter w = PerfWriter::to_memory(out, pipe);
  begin_file(w, a);
  const std::string argv[] = {"sframe", "record"};
  EXPECT_TRUE(w.add_feature(layout::kFeatCmdline, feature_cmdline(argv)).has_value());
  std::vector<std::byte> rec;
  SampleId id;
  id.pid = id.tid = 4242;
  id.time = 1'000'000'000;
  Comm c;
  c.pid = c.tid = 4242;
  c.comm = "sfpp-writer";
  c.exec = true;
  EXPECT_TRUE(encode_comm(rec, c, id, a).has_value());
  Mmap m;
  m.pid = m.tid = 4242;
  m.start = 0x7f0000000000;
  struct stat st {};
  stat(libc.c_str(), &st);
  m.len = (static_cast<std::uint64_t>(st.st_size) + 0xfff) & ~std::uint64_t{0xfff};
  m.prot = 5;   // PROT_READ | PROT_EXEC
  m.flags = 2;  // MAP_PRIVATE
  m.ino = st.st_ino;
  m.filename = libc;
  id.time += 1000;
  EXPECT_TRUE(encode_mmap2(rec, kMiscUser, m, id, a).has_value());
  Task t;
  t.pid = t.tid = 4243;
  t.ppid = t.ptid = 4242;
  t.time = id.time += 1000;
  EXPECT_TRUE(encode_task(rec, kRecordFork, t, id, a).has_value());
  const std::uint64_t qsort = nm_address(libc, "qsort"), getpid = nm_address(libc, "getpid");
  EXPECT_NE(qsort, 0u);
  EXPECT_NE(getpid, 0u);
  const std::uint64_t chain[] = {kContextUser, m.start + qsort + 4, m.start + getpid + 1};
  id.time += 1000;
  EXPECT_TRUE(encode_sample(rec, kMiscUser, a, id, m.start + qsort + 4, 0, 100000, chain).has_value());
  t.time = id.time += 1000;
  EXPECT_TRUE(encode_task(rec, kRecordExit, t, id, a).has_value());
  write_records(w, rec);
  encode_finished_round(rec);
  EXPECT_TRUE(w.write({rec.data() + rec.size() - 8, 8}).has_value());
  EXPECT_TRUE(w.finish().has_value());
  return out;
}

void expect_perf_reads(const std::string& perf, const std::string& file) {
  SCOPED_TRACE(perf + " script -i " + file);
  const std::string out =
      run(perf + " script -i " + file + " -F comm,tid,ip,sym,symoff --show-task-events --show-mmap-events 2>&1");
  EXPECT_NE(out.find("sfpp-writer"), std::string::npos) << out;
  EXPECT_NE(out.find("PERF_RECORD_MMAP2 4242/4242"), std::string::npos) << out;
  EXPECT_NE(out.find("PERF_RECORD_FORK(4243:4243):(4242:4242)"), std::string::npos) << out;
  EXPECT_NE(out.find("PERF_RECORD_EXIT(4243:4243):(4242:4242)"), std::string::npos) << out;
  EXPECT_NE(out.find("qsort+0x4"), std::string::npos) << out;
  EXPECT_NE(out.find("getpid+0x1"), std::string::npos) << out;
}

TEST(PerfWriter, PerfReadsRecordsWrittenFromScratch) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  const std::string perf7 = [] {
    std::string p = run("bash " + std::string(SFRAMEPP_SOURCE_DIR) + "/tests/perf/current_perf.sh");
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    return p;
  }();
  ASSERT_FALSE(perf7.empty()) << "tests/perf/current_perf.sh found no current perf: a required oracle";
  ASSERT_FALSE(run("command -v perf").empty()) << "perf (Debian's linux-perf) is a required oracle";
  for (const bool pipe : {false, true}) {
    const std::vector<std::byte> bytes = write_file(pipe, libc);
    const std::string path = ::testing::TempDir() + (pipe ? "writer-pipe.data" : "writer-file.data");
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    expect_perf_reads("perf", path);
    expect_perf_reads(perf7, path);
    // Our reader, for the header information perf does not print.
    auto d = PerfData::open(path);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->info().pipe, pipe);
    EXPECT_EQ(d->info().arch, "x86_64");
    ASSERT_EQ(d->info().cmdline.size(), 2u);
    EXPECT_EQ(d->info().cmdline[1], "record");
  }
}

// One process samples the same callchain (the same words) again and again
// while its mappings, its name and its pid change under it: a libc
// mapping, a fork, a rename (COMM without exec), then libm mapped over
// libc's addresses. Each sample must be named from what is mapped at its
// time, as perf names it, though the words repeat (the session and the
// folded aggregation remember repeated callchains). The truth: the current
// perf's script of the same file, collapsed as the record tests collapse it.
std::string write_repeats(const std::string& libc, const std::string& libm) {
  const EventAttr a = cpu_clock_attr();
  std::vector<std::byte> out;
  PerfWriter w = PerfWriter::to_memory(out, false);
  begin_file(w, a);
  std::vector<std::byte> rec;
  SampleId id;
  id.time = 1'000'000'000;
  const auto at = [&](std::uint32_t pid) {
    id.pid = id.tid = pid;
    id.time += 1000;
    return id;
  };
  const auto comm = [&](std::uint32_t pid, const char* name, bool exec) {
    Comm c;
    c.pid = c.tid = pid;
    c.comm = name;
    c.exec = exec;
    EXPECT_TRUE(encode_comm(rec, c, at(pid), a).has_value());
  };
  const std::uint64_t base = 0x7f0000000000;
  const auto map = [&](const std::string& path) {
    Mmap m;
    m.pid = m.tid = 4242;
    m.start = base;
    struct stat st {};
    stat(path.c_str(), &st);
    m.len = (static_cast<std::uint64_t>(st.st_size) + 0xfff) & ~std::uint64_t{0xfff};
    m.prot = 5;
    m.flags = 2;
    m.ino = st.st_ino;
    m.filename = path;
    EXPECT_TRUE(encode_mmap2(rec, kMiscUser, m, at(4242), a).has_value());
  };
  const std::uint64_t qsort = nm_address(libc, "qsort"), getpid = nm_address(libc, "getpid");
  EXPECT_NE(qsort, 0u);
  EXPECT_NE(getpid, 0u);
  const std::uint64_t chain[] = {kContextUser, base + qsort + 4, base + getpid + 1};
  const auto samples = [&](std::uint32_t pid, int n) {
    for (int i = 0; i < n; ++i)
      EXPECT_TRUE(encode_sample(rec, kMiscUser, a, at(pid), chain[1], 0, 100000, chain).has_value());
  };
  comm(4242, "sfpp-first", true);
  map(libc);
  samples(4242, 3);
  Task t;
  t.pid = t.tid = 4243;
  t.ppid = t.ptid = 4242;
  t.time = at(4242).time;
  EXPECT_TRUE(encode_task(rec, kRecordFork, t, id, a).has_value());
  samples(4243, 2);
  comm(4242, "sfpp-renamed", false);
  samples(4242, 3);
  map(libm);
  samples(4242, 4);
  samples(4243, 3);
  write_records(w, rec);
  EXPECT_TRUE(w.finish().has_value());
  const std::string path = ::testing::TempDir() + "repeats.data";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(out.data()),
                                              static_cast<std::streamsize>(out.size()));
  return path;
}

TEST(PerfScript, RepeatedCallchainsAreNamedFromTheirTimesMappings) {
  const std::string perf7 = [] {
    std::string p = run("bash " + std::string(SFRAMEPP_SOURCE_DIR) + "/tests/perf/current_perf.sh");
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    return p;
  }();
  ASSERT_FALSE(perf7.empty()) << "tests/perf/current_perf.sh found no current perf: a required oracle";
  const std::string path = write_repeats("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6");
  const std::string theirs = run(perf7 + " script -i " + path + " -F comm,ip,sym 2>/dev/null | python3 " +
                                 SFRAMEPP_SOURCE_DIR + "/tests/record/collapse.py | sort");
  // Three stacks: libc's under the first name (the parent's first samples
  // and all of the fork's) and under the new one, libm's.
  ASSERT_EQ(std::count(theirs.begin(), theirs.end(), '\n'), 3) << theirs;
#ifdef SFRAMEPP_TOOL
  // sframe perf script --folded: the session and the folded aggregation.
  EXPECT_EQ(run(std::string(SFRAMEPP_TOOL) + " perf script -i " + path + " --folded 2>/dev/null | sort"), theirs);
#endif

  // The session remembers a callchain from its second sample on, and
  // forgets it at each record that changes a process.
  auto d = PerfData::open(path);
  ASSERT_TRUE(d.has_value());
  Session session(d->info());
  std::vector<std::uint64_t> ids;
  std::map<std::string, int> stacks;  // as collapse.py folds them
  ASSERT_TRUE(d->for_each([&](const Record& r) {
                 if (r.type != kRecordSample) return session.process(r);
                 const UnwoundSample& u = session.unwind(r);
                 ids.push_back(u.repeat_id);
                 std::string stack(session.comm(r.id.tid));
                 for (auto f = u.frames.rbegin(); f != u.frames.rend(); ++f)
                   stack += ";" + (f->symbol ? *f->symbol : std::string("[unknown]"));
                 ++stacks[stack];
               }).has_value());
  std::string session_folded;
  for (const auto& [stack, n] : stacks) session_folded += stack + " " + std::to_string(n) + "\n";
  EXPECT_EQ(session_folded, theirs);
  ASSERT_EQ(ids.size(), 15u);
  const auto group = [&](std::size_t from, std::size_t n) {
    std::ostringstream s;
    for (std::size_t i = from; i < from + n; ++i) s << (ids[i] == 0 ? 0 : ids[i] == ids[from + 1] ? 1 : 2);
    return s.str();
  };
  EXPECT_EQ(group(0, 3), "011");
  EXPECT_EQ(group(3, 2), "01");
  EXPECT_EQ(group(5, 3), "011");
  EXPECT_EQ(group(8, 4), "0111");
  EXPECT_EQ(group(12, 3), "011");
  EXPECT_NE(ids[1], ids[4]);
  EXPECT_NE(ids[6], ids[9]);
}

}  // namespace
