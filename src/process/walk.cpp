// SPDX-License-Identifier: MIT
// Walking the stack of a stopped thread with a source chain per PC: the
// module's own SFrame section, else SFrame generated from its .eh_frame, else
// frame pointers checked against the process's executable mappings.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "sframe/process/process.hpp"
#include "sframe/unwind/unwind.hpp"
#include "sframe/process/walk_chain.hpp"

namespace sframe::process {
namespace {

Regs start_regs(const ThreadRegisters& r) {
#if defined(__aarch64__)
  return Regs::aarch64(r.pc, r.sp, r.fp, r.lr);
#else
  return Regs::amd64(r.pc, r.sp, r.fp);
#endif
}

}  // namespace

std::string_view to_string(RuleSource s) noexcept {
  switch (s) {
    case RuleSource::kNone:
      return "none";
    case RuleSource::kSFrameSection:
      return "sframe";
    case RuleSource::kGenerated:
      return "generated";
    case RuleSource::kFramePointer:
      return "frame-pointer";
    case RuleSource::kSignalFrame:
      return "signal frame";
  }
  return "?";
}

namespace {

// LoadedModules as walk_chain()'s address space.
struct LiveSpace {
  LoadedModules& m;
  const sframe::ModuleMap& unwind_map() const { return m.unwind_map(); }
  const sframe::ModuleMap& extra_map() const { return m.extra_map(); }
  bool generated(std::uint64_t lpc) const {
    const LoadedModule* mod = m.find(lpc);
    return mod && mod->source == ModuleSource::kGenerated;
  }
  bool generate_for(std::uint64_t lpc) { return m.generate_for(lpc); }
  bool executable(std::uint64_t addr) const { return m.executable(addr); }
  std::span<const AddressRange> signal_trampolines() const { return m.signal_trampolines(); }
};

// The thread's memory as walk_chain() reads it, a block at a time: a walk
// reads words upward through the stack, which word by word costs one
// process_vm_readv each (deep recursions: tens of thousands). A few blocks
// are kept, replaced in turn, so a read elsewhere (a signal frame's saved
// registers) does not evict the stack. The thread is stopped: its memory
// does not change while the walk reads it.
class BlockCache {
 public:
  explicit BlockCache(const RemoteMemory& mem) : mem_(mem), storage_(new std::byte[kBlocks * kBlockSize]) {}  // not zeroed: read() fills what is used

  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    for (const Block& b : blocks_)
      if (holds(b, addr)) return load(b, addr);
    Block& b = blocks_[next_];
    next_ = (next_ + 1) % kBlocks;
    b.base = addr & ~std::uint64_t{kPage - 1};
    b.len = mem_.read(b.base, std::span<std::byte>(data(b), kBlockSize));
    if (holds(b, addr)) return load(b, addr);
    // Unreadable, or the word straddles the readable end of the block.
    return mem_.read_word(addr);
  }

 private:
  static constexpr std::size_t kBlocks = 4;
  static constexpr std::size_t kBlockSize = 64 * 1024;
  static constexpr std::uint64_t kPage = 4096;
  struct Block {
    std::uint64_t base = 0;
    std::size_t len = 0;  // readable bytes from base
  };
  static bool holds(const Block& b, std::uint64_t addr) {
    return b.len >= 8 && addr >= b.base && addr - b.base <= b.len - 8;
  }
  std::byte* data(const Block& b) const {
    return storage_.get() + static_cast<std::size_t>(&b - blocks_.data()) * kBlockSize;
  }
  std::uint64_t load(const Block& b, std::uint64_t addr) const {
    std::uint64_t v = 0;
    std::memcpy(&v, data(b) + (addr - b.base), sizeof v);  // host byte order: the walk is of this machine
    return v;
  }

  const RemoteMemory& mem_;
  std::unique_ptr<std::byte[]> storage_;
  mutable std::array<Block, kBlocks> blocks_{};
  mutable std::size_t next_ = 0;
};

}  // namespace

WalkResult LoadedModules::walk(const RemoteMemory& mem, const ThreadRegisters& start, std::span<Frame> frames,
                               std::span<RuleSource> sources, const WalkOptions& opt) {
  LiveSpace space{*this};
  const BlockCache cached(mem);
  return walk_chain(space, cached, start_regs(start), frames, sources, opt);
}

}  // namespace sframe::process
