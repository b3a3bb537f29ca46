// SPDX-License-Identifier: MIT
// Walking the stack of a stopped thread with a source chain per PC: the
// module's own SFrame section, else SFrame generated from its .eh_frame, else
// frame pointers checked against the process's executable mappings.
#include <algorithm>

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

}  // namespace

WalkResult LoadedModules::walk(const RemoteMemory& mem, const ThreadRegisters& start, std::span<Frame> frames,
                               std::span<RuleSource> sources, const WalkOptions& opt) {
  LiveSpace space{*this};
  return walk_chain(space, mem, start_regs(start), frames, sources, opt);
}

}  // namespace sframe::process
