// SPDX-License-Identifier: MIT
// sframepp: perf_event_open(2) helpers of `sframe record` (perf_events.hpp).
#include "perf_events.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sframe::record {

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu) {
  return static_cast<int>(syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  std::getline(in, text);
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto dash = part.find('-');
    try {
      const int a = std::stoi(part.substr(0, dash));
      const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int c = a; c <= b && c < 4096; ++c) cpus.push_back(c);
    } catch (...) {
    }
  }
  return cpus;
}

PerfRing::~PerfRing() {
  if (base_) munmap(base_, map_size_);
  if (fd_ >= 0) close(fd_);
}

std::string PerfRing::open(perf_event_attr& attr, int cpu, std::size_t data_pages) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  fd_ = perf_event_open(&attr, -1, cpu);
  if (fd_ < 0) return "perf_event_open(cpu " + std::to_string(cpu) + "): " + std::strerror(errno);
  data_size_ = data_pages * page;
  map_size_ = data_size_ + page;
  void* m = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) return std::string("cannot map a ring buffer: ") + std::strerror(errno);
  base_ = m;
  return {};
}

namespace {

// `n` bytes at ring position `at` (which may wrap around the data's end).
void copy_out(const std::byte* data, std::size_t size, std::uint64_t at, void* out, std::size_t n) {
  const std::size_t off = static_cast<std::size_t>(at % size);
  const std::size_t first = std::min(n, size - off);
  std::memcpy(out, data + off, first);
  if (first < n) std::memcpy(static_cast<std::byte*>(out) + first, data, n - first);
}

}  // namespace

void PerfRing::read(const std::function<void(const perf_event_header&, std::span<const std::byte>)>& take) {
  if (!base_) return;
  auto* meta = static_cast<perf_event_mmap_page*>(base_);
  const auto* data = static_cast<const std::byte*>(base_) + (map_size_ - data_size_);
  const std::uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  std::uint64_t tail = meta->data_tail;
  while (tail + sizeof(perf_event_header) <= head) {
    perf_event_header h;
    copy_out(data, data_size_, tail, &h, sizeof h);
    if (h.size < sizeof h || tail + h.size > head) break;
    rec_.resize(h.size);
    copy_out(data, data_size_, tail, rec_.data(), h.size);
    tail += h.size;
    take(h, rec_);
  }
  __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

}  // namespace sframe::record
