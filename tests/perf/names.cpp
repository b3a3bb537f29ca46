// SPDX-License-Identifier: MIT
// A program whose hot functions have names with XML's special characters
// once demangled: '<', '>', '&' (templates, references, operator<, operator&)
// and '"' (a literal operator), for the profile writers' escaping.
#include <cstdlib>
#include <utility>

volatile unsigned long sink;

template <typename T>
__attribute__((noinline)) void spin_in(T& t, unsigned long n) {
  for (unsigned long i = 0; i < n; ++i) sink = sink + i * static_cast<unsigned long>(t.first);
}

struct Q {
  unsigned long n;
};

__attribute__((noinline)) bool operator<(const Q& a, const Q& b) {
  for (unsigned long i = 0; i < a.n; ++i) sink = sink + i * 3;
  return a.n < b.n;
}

__attribute__((noinline)) unsigned long operator&(const Q& a, int b) {
  for (unsigned long i = 0; i < a.n; ++i) sink = sink + i * 5;
  return a.n & static_cast<unsigned long>(b);
}

__attribute__((noinline)) unsigned long long operator""_spin(unsigned long long n) {
  for (unsigned long long i = 0; i < n; ++i) sink = sink + i * 7;
  return n;
}

int main(int argc, char** argv) {
  const unsigned long loops = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 40;
  std::pair<int, char&> p(3, *argv[0]);
  for (unsigned long i = 0; i < loops; ++i) {
    spin_in(p, 2000000);
    const Q q{2000000};
    if (q < Q{1}) return 1;
    sink = sink + (q & 1);
    sink = sink + 2000000_spin;
  }
  return 0;
}
