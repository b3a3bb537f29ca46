// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s tables into the BPF maps (see table_maps.hpp).
#include "table_maps.hpp"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "bpf/record_abi.h"
#include "tables.hpp"

namespace sframe::record {
namespace {

// An array map holding `blocks`, filled through mmap (one copy, no system
// call per block), or -1.
int module_map(std::span<const sframe_record_block> blocks) {
  bpf_map_create_opts o{};
  o.sz = sizeof o;
  o.map_flags = BPF_F_MMAPABLE | BPF_F_INNER_MAP;
  const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, nullptr, sizeof(std::uint32_t), sizeof(sframe_record_block),
                                static_cast<std::uint32_t>(blocks.size()), &o);
  if (fd < 0) return -1;
  void* at = mmap(nullptr, blocks.size_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) {
    close(fd);
    return -1;
  }
  std::memcpy(at, blocks.data(), blocks.size_bytes());
  munmap(at, blocks.size_bytes());
  return fd;
}

}  // namespace

void TableMaps::push(Tables& tables, std::span<const std::uint32_t> touched, std::span<const std::uint32_t> gone) {
  std::vector<std::pair<std::uint32_t, const sframe_record_process*>> procs;
  procs.reserve(touched.size());
  // process() builds the modules of mappings seen for the first time.
  for (std::uint32_t pid : touched) procs.emplace_back(pid, &tables.process(pid));
  load_modules(tables, tables.take_new_modules());
  for (const auto& [pid, t] : procs)
    if (bpf_map_update_elem(processes_, &pid, t, BPF_ANY) != 0) ++processes_refused_;
  for (std::uint32_t pid : gone) bpf_map_delete_elem(processes_, &pid);
}

// Each module's table into an array map of its own, then all into the array
// of maps in one batch: the kernel waits for an RCU grace period after each
// update of a map of maps (some 10 ms here), so not one per module.
void TableMaps::load_modules(const Tables& tables, std::span<const std::uint32_t> ids) {
  std::vector<std::uint32_t> keys;
  std::vector<int> fds;
  for (std::uint32_t id : ids) {
    const std::span<const sframe_record_block> blocks = tables.module(id).blocks();
    if (blocks.empty()) continue;
    const int fd = id < SFRAME_RECORD_MAX_MODULES ? module_map(blocks) : -1;
    if (fd < 0) {
      ++modules_refused_;
      continue;
    }
    keys.push_back(id);
    fds.push_back(fd);
  }
  if (keys.empty()) return;
  bpf_map_batch_opts opts{};
  opts.sz = sizeof opts;
  opts.elem_flags = BPF_ANY;
  auto count = static_cast<std::uint32_t>(keys.size());
  if (bpf_map_update_batch(modules_, keys.data(), fds.data(), &count, &opts) != 0) {
    // Past the elements the batch did (all but EFAULT report a count), one
    // by one.
    const std::size_t done = errno == EFAULT ? 0 : std::min<std::size_t>(count, keys.size());
    for (std::size_t i = done; i < keys.size(); ++i)
      if (bpf_map_update_elem(modules_, &keys[i], &fds[i], BPF_ANY) != 0) ++modules_refused_;
  }
  // The array of maps holds its own references.
  for (int fd : fds) close(fd);
}

}  // namespace sframe::record
