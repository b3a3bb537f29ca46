// SPDX-License-Identifier: MIT
// sframepp: the perf_event_open(2) pieces `sframe record` uses: opening an
// event, the online CPUs, and one event's mmap'ed ring buffer read record
// by record (the side-band records of a dummy event: MMAP2, COMM, FORK,
// EXIT, LOST).
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace sframe::record {

/// perf_event_open(2) with PERF_FLAG_FD_CLOEXEC and no group: the fd, or
/// -1 with errno set.
int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu);

/// The online CPUs (/sys/devices/system/cpu/online: "0-3,5"); empty when
/// it cannot be read.
std::vector<int> online_cpus();

/// One event and its ring buffer (perf_event_open(2): a metadata page, then
/// 2^n data pages), unmapped and closed on destruction.
class PerfRing {
 public:
  PerfRing() = default;
  PerfRing(const PerfRing&) = delete;
  PerfRing& operator=(const PerfRing&) = delete;
  ~PerfRing();
  /// Opens `attr` on `cpu` (all tasks) and maps `data_pages` (a power of
  /// two) of ring. Returns "" or what failed, in words.
  std::string open(perf_event_attr& attr, int cpu, std::size_t data_pages);
  /// Calls `take` with each whole record the kernel has written since the
  /// last call (its header first; a record wrapping around the ring's end
  /// comes joined), then frees their space.
  void read(const std::function<void(const perf_event_header&, std::span<const std::byte>)>& take);
  /// The event's descriptor (poll(2): POLLIN at the wake-ups its attribute
  /// asks for), or -1.
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t map_size_ = 0;
  std::size_t data_size_ = 0;
  std::vector<std::byte> rec_;
};

}  // namespace sframe::record
