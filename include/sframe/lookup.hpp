// sframepp: finding the FDE, FRE and rules that cover a PC.
#pragma once

#include <cstdint>
#include <vector>

#include "sframe/section.hpp"

namespace sframe {

/// What covers a PC: its function, its frame row entry, and the rules there.
struct Match {
  Fde fde;
  Fre fre;
  FrameRow row;
};

/// Finds the FDE covering absolute `pc` (start_pc <= pc < start_pc + size)
/// and, within it, the last FRE whose start is <= the PC's offset. For PC-mask
/// FDEs (PLT stubs) the offset is taken modulo the repetition block size
/// (rep_size; v1 has none and uses 16, the x86-64 PLT entry size).
/// Binary search over the FDE table when SFRAME_F_FDE_SORTED is set, a linear
/// scan otherwise. Allocates nothing; async-signal-safe.
/// Errors: kPcNotCovered, kPcBeforeFirstFre, or a decoding error of the FDE/FRE.
Expected<Match> find(const Section& s, std::uint64_t pc) noexcept;

/// Looks up `pc` inside one FDE known to cover it (see find()).
Expected<Match> find_in_fde(const Section& s, const Fde& fde, std::uint64_t pc) noexcept;

/// An accelerator for find() on one section: a table of FDE start PCs sorted
/// by address, plus a bucket table mapping a PC to the first candidate FDE in
/// O(1). Built once (allocating about 12 bytes per FDE, never more, whatever
/// the address span); lookups allocate nothing and are async-signal-safe.
/// The Section's bytes must outlive the index.
class FdeIndex {
 public:
  /// Builds the index. FDEs that fail to decode are reported as an error.
  static Expected<FdeIndex> build(const Section& s);

  /// Same contract as sframe::find().
  Expected<Match> find(std::uint64_t pc) const noexcept;

  const Section& section() const noexcept { return s_; }

 private:
  struct Entry {
    std::uint64_t start;  // absolute start PC
    std::uint32_t size;   // function size
    std::uint32_t fde;    // FDE index in the section
  };
  Section s_;
  std::uint64_t lo_ = 0;          // lowest start PC
  unsigned shift_ = 0;            // bucket = (pc - lo_) >> shift_
  std::vector<Entry> entries_;    // sorted by start
  std::vector<std::uint32_t> bucket_;  // last entry starting at or before the bucket
};

}  // namespace sframe
