// SPDX-License-Identifier: MIT
// sframepp: the memory readers the unwinder reads stacks through. Each
// returns a word in the target's byte order: BufferMemory converts with
// endian::load in the order it is given (the host's by default); ByteOrder
// and endian::load themselves live in sframe/format/byte_order.hpp.
// Part of the unwinder's API (layer `unwind`); sframe/unwind/unwind.hpp includes it.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

#include "sframe/format/byte_order.hpp"

namespace sframe {

// ---------------------------------------------------------------------------
// Memory readers
// ---------------------------------------------------------------------------

/// What the unwinder needs from memory: one 64-bit word at a byte address,
/// in the TARGET's byte order (x86-64 and little-endian AArch64: little;
/// s390x and big-endian AArch64: big), or nullopt if any byte of
/// [addr, addr + 8) is not readable. The address may be unaligned, and may be
/// anything (read from a corrupted stack): implementations check it.
///
/// std::optional rather than Expected: the only failure is "not readable",
/// the unwinder already knows the address (it reports it in UnwindResult), and
/// a 16-byte trivially copyable result travels in two registers on the hot
/// path. Implementations used from signal handlers must be async-signal-safe.
template <class M>
concept MemoryReader = requires(const M& m, std::uint64_t addr) {
  { m.read_word(addr) } noexcept -> std::same_as<std::optional<std::uint64_t>>;
};

/// A stack image (or any memory snapshot) of `bytes` starting at runtime
/// address `base`: reads inside [base, base + size) succeed, all others fail
/// (overflow-safe). Does not own the bytes. Async-signal-safe.
class BufferMemory {
 public:
  BufferMemory() = default;
  BufferMemory(std::span<const std::byte> bytes, std::uint64_t base,
               ByteOrder order = kHostByteOrder) noexcept
      : bytes_(bytes), base_(base), order_(order) {}

  /// The word at [addr, addr + 8) in the image's byte order, or nullopt if
  /// any of those bytes lies outside the image.
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    // addr - base wraps for addresses below base: one unsigned compare covers
    // both ends without overflow.
    const std::uint64_t off = addr - base_;
    if (bytes_.size() < 8 || off > bytes_.size() - 8) return std::nullopt;
    return endian::load<8>(bytes_.data() + off, order_);
  }
  /// Copies `out.size()` bytes at `addr`; false (and nothing copied) if any
  /// of them lies outside the image.
  bool read(std::uint64_t addr, std::span<std::byte> out) const noexcept {
    const std::uint64_t off = addr - base_;
    if (off > bytes_.size() || out.size() > bytes_.size() - off) return false;
    if (!out.empty()) std::memcpy(out.data(), bytes_.data() + off, out.size());
    return true;
  }
  /// Runtime address of the first byte, and the size in bytes.
  std::uint64_t base() const noexcept { return base_; }
  std::uint64_t size() const noexcept { return bytes_.size(); }
  ByteOrder byte_order() const noexcept { return order_; }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t base_ = 0;
  ByteOrder order_ = kHostByteOrder;
};
static_assert(MemoryReader<BufferMemory>);

/// Several disjoint BufferMemory regions (e.g. a thread stack, a signal
/// altstack and a code page), tried in order. Does not own the span.
/// Async-signal-safe.
class MultiBufferMemory {
 public:
  explicit MultiBufferMemory(std::span<const BufferMemory> regions) noexcept : regions_(regions) {}
  /// The word from the first region holding all 8 bytes of it.
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    for (const BufferMemory& r : regions_)
      if (auto w = r.read_word(addr)) return w;
    return std::nullopt;
  }

 private:
  std::span<const BufferMemory> regions_;
};
static_assert(MemoryReader<MultiBufferMemory>);

/// Type-erased reader for tools (ptrace, /proc/PID/mem, core files) where a
/// virtual call per word does not matter. Memory itself satisfies
/// MemoryReader, so unwind<Memory>() is instantiated once for all of them.
class Memory {
 public:
  virtual ~Memory() = default;
  /// Same contract as MemoryReader::read_word.
  virtual std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept = 0;
};
static_assert(MemoryReader<Memory>);

/// Adapts any MemoryReader to the Memory interface. Holds a reference: the
/// reader must outlive the adapter.
template <MemoryReader M>
class MemoryAdapter final : public Memory {
 public:
  explicit MemoryAdapter(const M& m) noexcept : m_(&m) {}
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept override { return m_->read_word(addr); }

 private:
  const M* m_;
};

}  // namespace sframe

#pragma GCC visibility pop
