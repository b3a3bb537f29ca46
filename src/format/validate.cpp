// One pass over every FDE and FRE, checking the rules of the specification.
#include <algorithm>
#include <vector>

#include "sframe/section.hpp"

namespace sframe {
namespace {

// Checks one FDE's own fields (strict rules only).
Expected<void> check_fde_fields(const Section& s, const Fde& f) {
  const Version v = s.version();
  const std::uint64_t info_at = v == Version::kV3 ? f.fres_begin - kFdeAttrSizeV3 + 2 : f.start_field_offset + 16;
  if (f.info & fde_info::unused_mask(v)) return make_error(Errc::kUnusedBitsSet, info_at, f.info, f.index);
  if (v == Version::kV3 && (f.info2 & fde_info::kInfo2UnusedMask))
    return make_error(Errc::kUnusedBitsSet, info_at + 1, f.info2, f.index);
  // sfde_func_rep_size follows the info byte in v2; in v3 it follows info2.
  if (v != Version::kV1 && f.pc_type == PcType::kMask && f.rep_size == 0)
    return make_error(Errc::kZeroRepSize, info_at + (v == Version::kV3 ? 2 : 1), 0, f.index);
  if (f.start_pc + f.size < f.start_pc) return make_error(Errc::kFuncRangeOverflow, f.start_field_offset, f.start_pc, f.index);
  return {};
}

// Strict checks on one FRE's start offset (limit: function size, or block
// size for PC-mask FDEs).
Expected<void> check_start(const Fde& f, std::uint64_t limit, std::uint32_t k, std::uint64_t start,
                           std::uint64_t prev, std::uint64_t at) {
  if (k > 0 && start <= prev) return make_error(Errc::kFreStartNotIncreasing, at, start, f.index, k);
  // A zero-size function may still carry its single FRE at offset 0.
  if (start >= limit && !(start == 0 && limit == 0))
    return make_error(Errc::kFreStartOutsideFunction, at, start, f.index, k);
  return {};
}

std::uint64_t start_limit(const Fde& f) {
  return (f.pc_type == PcType::kMask && f.rep_size != 0) ? f.rep_size : f.size;
}

// The hot path for DEFAULT FDEs: reads only each FRE's start and info byte.
// Reports exactly what Section::fre_at and Section::row would.
Expected<std::uint64_t> check_default_fres(const Section& s, const Fde& f, Strictness mode) {
  const Header& h = s.header();
  const std::uint64_t end = std::uint64_t{s.fre_section_offset()} + h.fre_len;
  const std::uint32_t max_words = 1u + (h.cfa_fixed_ra_offset == 0) + (h.cfa_fixed_fp_offset == 0);
  const unsigned asz = start_address_size(f.fre_type);
  const std::uint64_t limit = start_limit(f);
  const std::span<const std::byte> b = s.bytes();
  std::uint64_t at = f.fres_begin;
  std::uint64_t prev = 0;
  for (std::uint32_t k = 0; k < f.num_fres; ++k) {
    if (at + asz + 1 > end) return make_error(Errc::kFreTruncated, at, 0, f.index, k);
    const std::uint64_t start = s.load(at, asz);
    const auto info = static_cast<std::uint8_t>(b[at + asz]);
    const unsigned code = fre_info::dataword_size_code(info);
    if (code > 2) return make_error(Errc::kBadDatawordSize, at + asz, code, f.index, k);
    const std::uint64_t words_end = at + asz + 1 + (std::uint64_t{fre_info::dataword_count(info)} << code);
    if (words_end > end) return make_error(Errc::kFreTruncated, at, words_end, f.index, k);
    if (fre_info::dataword_count(info) > max_words)
      return make_error(Errc::kBadDatawordCount, at, fre_info::dataword_count(info), f.index, k);
    if (mode == Strictness::kStrict) {
      if (auto ok = check_start(f, limit, k, start, prev, at); !ok) return Unexpected{ok.error()};
    }
    prev = start;
    at = words_end;
  }
  return at;
}

// Walks the FREs of one FDE; returns the end offset of its FRE data.
Expected<std::uint64_t> check_fres(const Section& s, const Fde& f, Strictness mode) {
  if (f.fde_type == FdeType::kDefault) return check_default_fres(s, f, mode);
  const bool strict = mode == Strictness::kStrict;
  std::uint64_t end = f.fres_begin;
  std::uint64_t prev_start = 0;
  const std::uint64_t limit = start_limit(f);
  for (const Expected<Fre>& fre : s.fres(f)) {
    if (!fre) return Unexpected{fre.error()};
    if (auto row = s.row(f, *fre); !row) return Unexpected{row.error()};
    end = fre->section_offset + fre->encoded_size;
    if (!strict) continue;
    if (auto ok = check_start(f, limit, fre->index, fre->start_offset, prev_start, fre->section_offset); !ok)
      return Unexpected{ok.error()};
    prev_start = fre->start_offset;
  }
  return end;
}

// One bit per byte of the FRE sub-section, to find bytes claimed by two
// FDEs in time linear in the section size (no sorting).
class Coverage {
 public:
  explicit Coverage(std::uint64_t bytes) : words_((bytes + 63) / 64) {}
  // Marks [begin, end); false if any of those bytes was already marked.
  bool claim(std::uint64_t begin, std::uint64_t end) {
    while (begin < end) {
      const std::uint64_t w = begin / 64;
      const unsigned lo = static_cast<unsigned>(begin % 64);
      const std::uint64_t n = std::min<std::uint64_t>(end - begin, 64 - lo);
      const std::uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << lo;
      if (words_[w] & mask) return false;
      words_[w] |= mask;
      begin += n;
    }
    return true;
  }

 private:
  std::vector<std::uint64_t> words_;
};

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
  Coverage claimed(strict ? h.fre_len : 0);
  std::uint64_t used = 0;
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
    const std::uint64_t base = s.fre_section_offset();
    if (!claimed.claim(run_begin - base, *end - base)) return make_error(Errc::kFdeFresOverlap, run_begin, 0, i);
    used += *end - run_begin;
    if ((h.flags & flags::kFdeSorted) && i > 0) {
      if (f->start_pc < prev_start) return make_error(Errc::kFdesUnsorted, f->start_field_offset, f->start_pc, i);
      if (f->start_pc < prev_end) return make_error(Errc::kFdesOverlap, f->start_field_offset, f->start_pc, i);
    }
    prev_start = f->start_pc;
    prev_end = f->start_pc + f->size;
  }
  if (!strict) return {};
  if (total_fres != h.num_fres) return make_error(Errc::kFreCountMismatch, 12, h.num_fres);
  if (used != h.fre_len) return make_error(Errc::kFreLenMismatch, 16, h.fre_len);
  return {};
}

}  // namespace sframe
