// SPDX-License-Identifier: MIT
// Test memories for the unwinder: a stack image the tests fill word by word
// (as the ABI's calls and prologues would), and a FakeMemory that only
// answers at planted addresses and counts reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "sframe/unwind/unwind.hpp"

namespace sframe_test {

/// `size` bytes of stack at [base, base + size), filled with a marker byte
/// so a read of a never-written slot returns an implausible value.
class StackImage {
 public:
  StackImage(std::uint64_t base, std::size_t size, sframe::ByteOrder order = sframe::ByteOrder::kLittle)
      : base_(base), bytes_(size, std::byte{0xa5}), order_(order) {}

  void put(std::uint64_t addr, std::uint64_t value) {
    if (addr < base_ || addr - base_ + 8 > bytes_.size()) throw std::out_of_range("stack image write");
    for (int i = 0; i < 8; ++i) {
      const int shift = order_ == sframe::ByteOrder::kLittle ? 8 * i : 8 * (7 - i);
      bytes_[addr - base_ + static_cast<std::size_t>(i)] = static_cast<std::byte>(value >> shift);
    }
  }
  void put_bytes(std::uint64_t addr, const std::vector<std::uint8_t>& b) {
    if (addr < base_ || addr - base_ + b.size() > bytes_.size()) throw std::out_of_range("stack image write");
    for (std::size_t i = 0; i < b.size(); ++i) bytes_[addr - base_ + i] = static_cast<std::byte>(b[i]);
  }
  sframe::BufferMemory memory() const { return sframe::BufferMemory(bytes_, base_, order_); }
  std::uint64_t base() const { return base_; }
  std::uint64_t end() const { return base_ + bytes_.size(); }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::uint64_t base_;
  std::vector<std::byte> bytes_;
  sframe::ByteOrder order_;
};

/// Words readable only where planted (exact addresses): a read anywhere else
/// fails, so an unwinder reading the wrong slot is caught.
class FakeMemory {
 public:
  void put(std::uint64_t addr, std::uint64_t v) { words_[addr] = v; }
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    ++reads_;
    auto it = words_.find(addr);
    if (it == words_.end()) return std::nullopt;
    return it->second;
  }
  std::size_t reads() const { return reads_; }

 private:
  std::map<std::uint64_t, std::uint64_t> words_;
  mutable std::size_t reads_ = 0;
};
static_assert(sframe::MemoryReader<FakeMemory>);

}  // namespace sframe_test
