// SPDX-License-Identifier: MIT
// perf script test program: C++ with libstdc++ (std::sort, std::map,
// std::string), templates and a namespace, for demangled names.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace work {

template <class T>
__attribute__((noinline)) T sorted_sum(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  T s{};
  for (const T& x : v) s += x;
  return s;
}

__attribute__((noinline)) std::size_t map_work(int n) {
  std::map<std::string, int> m;
  for (int i = 0; i < n; ++i) m[std::to_string(i * 7919 % 10007)] += i;
  return m.size();
}

}  // namespace work

int main(int argc, char** argv) {
  const long loops = argc > 1 ? std::atol(argv[1]) : 10;
  std::mt19937 rng(42);
  long total = 0;
  for (long l = 0; l < loops; ++l) {
    std::vector<long> v(20000);
    for (auto& x : v) x = static_cast<long>(rng());
    total += work::sorted_sum(v) & 0xff;
    total += static_cast<long>(work::map_work(4000));
  }
  return total == 42 ? 1 : 0;
}
