// One pass over every FDE and FRE, checking the rules of the specification.
#include <algorithm>
#include <vector>

#include "sframe/section.hpp"

namespace sframe {
namespace {

struct ByteRun {
  std::uint64_t begin;
  std::uint64_t end;
  std::uint32_t fde;
};

// Checks one FDE's own fields (strict rules only).
Expected<void> check_fde_fields(const Section& s, const Fde& f) {
  const Version v = s.version();
  const std::uint64_t info_at = v == Version::kV3 ? f.fres_begin - kFdeAttrSizeV3 + 2 : f.start_field_offset + 16;
  if (f.info & fde_info::unused_mask(v)) return make_error(Errc::kUnusedBitsSet, info_at, f.info, f.index);
  if (v == Version::kV3 && (f.info2 & fde_info::kInfo2UnusedMask))
    return make_error(Errc::kUnusedBitsSet, info_at + 1, f.info2, f.index);
  if (v != Version::kV1 && f.pc_type == PcType::kMask && f.rep_size == 0)
    return make_error(Errc::kZeroRepSize, info_at + 2, 0, f.index);
  if (f.start_pc + f.size < f.start_pc) return make_error(Errc::kFuncRangeOverflow, f.start_field_offset, f.start_pc, f.index);
  return {};
}

// Walks the FREs of one FDE; returns the end offset of its FRE data.
Expected<std::uint64_t> check_fres(const Section& s, const Fde& f, Strictness mode) {
  const bool strict = mode == Strictness::kStrict;
  std::uint64_t end = f.fres_begin;
  std::uint64_t prev_start = 0;
  // For PC-mask FDEs FRE starts are offsets within one repeated block.
  const std::uint64_t limit = (f.pc_type == PcType::kMask && f.rep_size != 0) ? f.rep_size : f.size;
  for (const Expected<Fre>& fre : s.fres(f)) {
    if (!fre) return Unexpected{fre.error()};
    if (auto row = s.row(f, *fre); !row) return Unexpected{row.error()};
    end = fre->section_offset + fre->encoded_size;
    if (!strict) continue;
    if (fre->index > 0 && fre->start_offset <= prev_start)
      return make_error(Errc::kFreStartNotIncreasing, fre->section_offset, fre->start_offset, f.index, fre->index);
    // A zero-size function may still carry its single FRE at offset 0.
    if (fre->start_offset >= limit && !(fre->start_offset == 0 && limit == 0))
      return make_error(Errc::kFreStartOutsideFunction, fre->section_offset, fre->start_offset, f.index, fre->index);
    prev_start = fre->start_offset;
  }
  return end;
}

Expected<void> check_fre_runs(const Section& s, std::vector<ByteRun>& runs) {
  const auto by_begin = [](const ByteRun& a, const ByteRun& b) { return a.begin < b.begin; };
  // Producers lay FREs out in FDE order; sort only when they did not.
  if (!std::is_sorted(runs.begin(), runs.end(), by_begin)) std::sort(runs.begin(), runs.end(), by_begin);
  std::uint64_t used = 0;
  std::uint64_t max_end = 0;
  std::uint32_t max_owner = kNoIndex;
  for (const ByteRun& r : runs) {
    if (r.end == r.begin) continue;  // an FDE without FREs occupies nothing
    if (r.begin < max_end) return make_error(Errc::kFdeFresOverlap, r.begin, max_owner, r.fde);
    max_end = r.end;
    max_owner = r.fde;
    used += r.end - r.begin;
  }
  if (used != s.header().fre_len) return make_error(Errc::kFreLenMismatch, 16, s.header().fre_len);
  return {};
}

}  // namespace

Expected<void> validate(const Section& s, Strictness mode) {
  const bool strict = mode == Strictness::kStrict;
  const Header& h = s.header();
  if (strict) {
    if (h.flags & ~defined_flags(h.version)) return make_error(Errc::kUndefinedFlags, 3, h.flags);
    const std::uint64_t fdes_end = s.fde_table_offset() + std::uint64_t{h.num_fdes} * fde_entry_size(h.version);
    const std::uint64_t fres_end = s.fre_section_offset() + std::uint64_t{h.fre_len};
    if (h.num_fdes != 0 && h.fre_len != 0 && s.fde_table_offset() < fres_end && s.fre_section_offset() < fdes_end)
      return make_error(Errc::kSubsectionsOverlap, 20, s.fre_section_offset());
  }
  std::vector<ByteRun> runs;
  if (strict) runs.reserve(h.num_fdes);
  std::uint64_t total_fres = 0;
  std::uint64_t prev_start = 0;
  std::uint64_t prev_end = 0;
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    const Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    if (strict) {
      if (auto ok = check_fde_fields(s, *f); !ok) return ok;
    }
    const Expected<std::uint64_t> end = check_fres(s, *f, mode);
    if (!end) return Unexpected{end.error()};
    if (!strict) continue;
    total_fres += f->num_fres;
    const std::uint64_t run_begin = h.version == Version::kV3 ? f->fres_begin - kFdeAttrSizeV3 : f->fres_begin;
    runs.push_back({run_begin, *end, i});
    if ((h.flags & flags::kFdeSorted) && i > 0) {
      if (f->start_pc < prev_start) return make_error(Errc::kFdesUnsorted, f->start_field_offset, f->start_pc, i);
      if (f->start_pc < prev_end) return make_error(Errc::kFdesOverlap, f->start_field_offset, f->start_pc, i);
    }
    prev_start = f->start_pc;
    prev_end = f->start_pc + f->size;
  }
  if (!strict) return {};
  if (total_fres != h.num_fres) return make_error(Errc::kFreCountMismatch, 12, h.num_fres);
  return check_fre_runs(s, runs);
}

}  // namespace sframe
