// SPDX-License-Identifier: MIT
// A consumer of the process layer (sframepp::process, sframepp-process):
// reads its own /proc/PID/maps and prints the file mapped at main(), which
// the test compares with the path it started.
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include <sframe/process/process.hpp>

int main() {
  auto maps = sframe::process::read_maps(getpid());
  if (!maps) return 1;
  const auto pc = reinterpret_cast<std::uintptr_t>(&main);
  for (const auto& m : *maps) {
    if (pc >= m.start && pc < m.end) {
      std::printf("%s\n", m.path.c_str());
      return 0;
    }
  }
  return 1;
}
