// SPDX-License-Identifier: MIT
// Writes the profile of a synthetic hostile input for tests/perf/profile_stress.sh:
//   profile_stress SAMPLES OUT.pb.gz OUT.svg [OUT.folded]
// SAMPLES samples, each a distinct stack (depth 6 to 25 over 4000 function
// names holding '<', '>', '&', quotes, ';', control characters and bytes
// that are not UTF-8), in 3 processes; OUT.folded lists the stacks as
// stackcollapse would (comm;outer;...;inner COUNT; ';' in names as ':'),
// the input as generated, for the test to compare the writers' output with.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "flamegraph_svg.hpp"
#include "profile.hpp"
#include "profile_pprof.hpp"

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "profile_stress: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: profile_stress SAMPLES OUT.pb.gz OUT.svg [OUT.folded]\n");
    return 2;
  }
  const std::uint64_t samples = std::strtoull(argv[1], nullptr, 10);
  std::vector<std::string> names;
  static const char* kHostile[] = {"<", ">", "&", "\"", "'", ";", "\x01", "\xff", "\xc3\xa9", "]]>", " "};
  for (int i = 0; i < 4000; ++i)
    names.push_back("fn" + std::to_string(i) + kHostile[i % 11] + "x<T&>" + kHostile[(i / 11) % 11]);
  const std::string file = "/usr/lib/libhostile<&>.so", build_id = "0123456789abcdef";
  const std::string comms[] = {"proc <a>", "proc&b", "proc\"c\""};
  sframe::tools::profile::Profile p;
  std::ofstream folded;
  if (argc == 5) folded.open(argv[4], std::ios::binary);
  std::vector<sframe::tools::profile::Frame> frames;
  std::uint64_t x = 88172645463325252ull;  // xorshift64
  const auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (std::uint64_t s = 0; s < samples; ++s) {
    frames.clear();
    const std::size_t depth = 6 + next() % 20;
    for (std::size_t d = 0; d < depth; ++d) {
      sframe::tools::profile::Frame f;
      const std::size_t n = next() % names.size();
      f.pc = 0x400000 + n * 16 + d;
      f.function = names[n];
      f.mapping = {0x400000, 0x500000, 0, file, build_id};
      frames.push_back(f);
    }
    sframe::tools::profile::Sample smp;
    smp.pid = smp.tid = static_cast<std::uint32_t>(100 + s % 3);
    smp.comm = comms[s % 3];
    smp.event = "cpu-clock";
    smp.period = 250000;
    smp.frames = frames;
    p.add(smp);
    if (!folded.is_open()) continue;
    std::string line = comms[s % 3];
    for (char& c : line)
      if (c == ' ') c = '_';
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      line += ';';
      // As the writers give it: the byte that is no UTF-8 as U+FFFD.
      for (char c : f->function) line += c == ';' ? std::string(":") : c == '\xff' ? std::string("\xef\xbf\xbd") : std::string(1, c);
    }
    folded << line << " 1\n";
  }
  write(argv[2], sframe::tools::profile::pprof_bytes(p, {"profile_stress"}));
  sframe::tools::profile::FlameGraphOptions fo;
  fo.title = "profile_stress <&\">";
  write(argv[3], sframe::tools::profile::flamegraph_svg(p, fo));
  return 0;
}
