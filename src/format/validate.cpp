// SPDX-License-Identifier: MIT
// One pass over every FDE and FRE, checking the rules of the specification.
#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sframe/format/section.hpp"

namespace sframe {
namespace {

// Checks one FDE's own fields (strict rules only).
Expected<void> check_fde_fields(const Section& s, const Fde& f) {
  const Version v = s.version();
  // v3: the fields live in the attribute before the FREs; v1/v2: in the FDE.
  const bool v3 = v == Version::kV3;
  const std::uint64_t base = v3 ? f.fres_begin - wire::fde_attr::kSize : f.start_field_offset;
  const std::uint64_t info_at = base + (v3 ? wire::fde_attr::kInfo : wire::fde_v2::kInfo).offset;
  if (f.info & fde_info::unused_mask(v)) return make_error(FormatErrc::kUnusedBitsSet, info_at, f.info, f.index);
  if (v3 && (f.info2 & fde_info::kInfo2UnusedMask))
    return make_error(FormatErrc::kUnusedBitsSet, base + wire::fde_attr::kInfo2.offset, f.info2, f.index);
  if (v != Version::kV1 && f.pc_type == PcType::kMask && f.rep_size == 0)
    return make_error(FormatErrc::kZeroRepSize, base + (v3 ? wire::fde_attr::kRepSize : wire::fde_v2::kRepSize).offset, 0,
                      f.index);
  if (f.start_pc + f.size < f.start_pc) return make_error(FormatErrc::kFuncRangeOverflow, f.start_field_offset, f.start_pc, f.index);
  return {};
}

// Strict checks on one FRE's start offset (limit: function size, or block
// size for PC-mask FDEs).
Expected<void> check_start(const Fde& f, std::uint64_t limit, std::uint32_t k, std::uint64_t start,
                           std::uint64_t prev, std::uint64_t at) {
  if (k > 0 && start <= prev) return make_error(FormatErrc::kFreStartNotIncreasing, at, start, f.index, k);
  // A zero-size function may still carry its single FRE at offset 0.
  if (start >= limit && !(start == 0 && limit == 0))
    return make_error(FormatErrc::kFreStartOutsideFunction, at, start, f.index, k);
  return {};
}

std::uint64_t start_limit(const Fde& f) {
  return (f.pc_type == PcType::kMask && f.rep_size != 0) ? f.rep_size : f.size;
}

// The layout checks of one DEFAULT FDE's FREs (spec §2.4: start address,
// info byte, data words; what Section::fre_at and Section::row report),
// with what they need worked out once per FDE.
struct DefaultFres {
  DefaultFres(const Section& section, const Fde& fde)
      : s(section),
        f(fde),
        end(std::uint64_t{section.fre_section_offset()} + section.header().fre_len),
        max_words(1u + (section.header().cfa_fixed_ra_offset == 0) + (section.header().cfa_fixed_fp_offset == 0)),
        info_off(wire::fre::info(fde.fre_type).offset),
        words_off(wire::fre::datawords_offset(fde.fre_type)) {}

  // FRE k at `at`: the offset of the next FRE.
  Expected<std::uint64_t> next(std::uint64_t at, std::uint32_t k) const {
    if (at + words_off > end) return make_error(FormatErrc::kFreTruncated, at, 0, f.index, k);
    const auto info = static_cast<std::uint8_t>(s.bytes()[at + info_off]);
    const unsigned code = fre_info::dataword_size_code(info);
    if (code > 2) return make_error(FormatErrc::kBadDatawordSize, at + info_off, code, f.index, k);
    const std::uint64_t words_end = at + words_off + (std::uint64_t{fre_info::dataword_count(info)} << code);
    if (words_end > end) return make_error(FormatErrc::kFreTruncated, at, words_end, f.index, k);
    if (fre_info::dataword_count(info) > max_words)
      return make_error(FormatErrc::kBadDatawordCount, at, fre_info::dataword_count(info), f.index, k);
    return words_end;
  }

  const Section& s;
  const Fde& f;
  const std::uint64_t end;
  const std::uint32_t max_words;
  const std::uint32_t info_off;
  const std::uint32_t words_off;
};

// The hot path for DEFAULT FDEs: reads only each FRE's start and info byte.
// Reports exactly what Section::fre_at and Section::row would.
Expected<std::uint64_t> check_default_fres(const Section& s, const Fde& f, Strictness mode) {
  const DefaultFres fres(s, f);
  const wire::Field start_field = wire::fre::start_address(f.fre_type);
  const std::uint64_t limit = start_limit(f);
  std::uint64_t at = f.fres_begin;
  std::uint64_t prev = 0;
  for (std::uint32_t k = 0; k < f.num_fres; ++k) {
    const Expected<std::uint64_t> next = fres.next(at, k);
    if (!next) return next;
    if (mode == Strictness::kStrict) {
      const std::uint64_t start = s.load(at + start_field.offset, start_field.size);
      if (auto ok = check_start(f, limit, k, start, prev, at); !ok) return Unexpected{ok.error()};
      prev = start;
    }
    at = *next;
  }
  return at;
}

// One FRE as kLenient checks it (what check_default_fres, or fre_at and
// row for FLEX FDEs, report); returns the offset of the next FRE.
Expected<std::uint64_t> check_one_fre(const Section& s, const Fde& f, std::uint64_t at, std::uint32_t k) {
  if (f.fde_type != FdeType::kDefault) {
    const Expected<Fre> fre = s.fre_at(static_cast<std::uint32_t>(at), f.fre_type, f.index, k);
    if (!fre) return Unexpected{fre.error()};
    if (auto row = s.row(f, *fre); !row) return Unexpected{row.error()};
    return at + fre->encoded_size;
  }
  return DefaultFres(s, f).next(at, k);
}

// Strict: a FLEX control word carries no bits without a meaning (spec v3
// §2.4.2 "Encoding of Data Word 1"): bit 2 is unused, and the register
// number counts only when reg_p is set. Such bits would let a control word
// with reg_p = deref_p = 0 differ from the padding word 0 and say "CFA + 0",
// which the spec says cannot be encoded. Call after row() accepted the FRE.
Expected<void> check_flex_controls(const Section& s, const Fde& f, const Fre& fre) {
  const std::uint32_t n = fre.dataword_count;
  if (n == 0) return {};  // RA undefined: no control words at all
  std::array<std::uint32_t, 3> at{0, 0, 0};
  std::size_t m = 1;  // word 0: the CFA's control word
  if (n > 2) {
    if (s.dataword(fre, 2) == 0) {
      at[m++] = 3;  // padding for RA, then the FP pair
    } else {
      at[m++] = 2;
      if (n > 4) at[m++] = 4;
    }
  }
  for (std::size_t i = 0; i < m; ++i) {
    const std::uint32_t w = s.dataword(fre, at[i]);
    if ((w & flex::kUnusedBit) || (!flex::reg_p(w) && flex::regnum(w) != 0))
      return make_error(FormatErrc::kUnusedBitsSet, fre.dataword_offset(at[i]), w, f.index, fre.index);
  }
  return {};
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
    if (auto ok = check_flex_controls(s, f, *fre); !ok) return Unexpected{ok.error()};
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

// FREs a walk of `f` decoded before it ended (with `err` or not).
std::uint64_t walked(const Fde& f, const Expected<std::uint64_t>& end) {
  return end ? f.num_fres : std::uint64_t{end.error().fre} + 1;
}

// kLenient for sections whose FDEs share FRE data (which the spec does not
// forbid and kStrict refuses, see validate() in section.hpp; kLenient
// tolerates it, as objdump, the kernel and glibc do): walking each FDE's FREs anew
// would take time quadratic in the section size. An FRE's successor depends
// only on its offset and FRE type, and whether it passes only on that and
// the FDE type, so per (FRE type, FDE type) class the FRE offsets form
// chains that merge; depth[offset] remembers how many valid FREs follow on
// from an offset. Each offset is decoded at most twice per class.
class SharedFres {
 public:
  SharedFres(const Section& s, ValidateStats& stats) : s_(s), stats_(stats) {}

  Expected<void> check(const Fde& f) {
    const std::uint64_t d = depth(f);
    if (d >= f.num_fres) return {};
    // FRE d of the FDE is the first bad one: walk to it and report it as the
    // plain walk would.
    std::uint64_t at = f.fres_begin;
    for (std::uint32_t k = 0;; ++k) {
      ++stats_.fre_decodes;
      const Expected<std::uint64_t> next = check_one_fre(s_, f, at, k);
      if (!next) return Unexpected{next.error()};
      at = *next;
    }
  }

 private:
  // Number of consecutive valid FREs from f.fres_begin in f's class (capped
  // by the end of the FRE sub-section).
  std::uint64_t depth(const Fde& f) {
    const std::uint64_t base = s_.fre_section_offset();
    const std::uint64_t end = base + s_.header().fre_len;
    std::vector<std::uint32_t>& memo =
        memo_[static_cast<unsigned>(f.fre_type) * 2 + (f.fde_type == FdeType::kDefault ? 0 : 1)];
    if (memo.empty()) memo.assign(s_.header().fre_len, 0);
    // memo[at - base]: 0 = unknown, else 1 + valid FREs from `at` on.
    const auto known = [&](std::uint64_t at) { return at >= end || memo[at - base] != 0; };
    const auto value = [&](std::uint64_t at) -> std::uint64_t { return at >= end ? 0 : memo[at - base] - 1; };
    std::uint64_t at = f.fres_begin;
    std::uint64_t n = 0;
    while (!known(at)) {
      ++stats_.fre_decodes;
      const Expected<std::uint64_t> next = check_one_fre(s_, f, at, 0);
      if (!next) {
        memo[at - base] = 1;
        break;
      }
      ++n;
      at = *next;
    }
    const std::uint64_t total = n + value(at);
    // Second pass: record the depth of every offset just walked.
    at = f.fres_begin;
    for (std::uint64_t left = total; !known(at); --left) {
      memo[at - base] = static_cast<std::uint32_t>(left + 1);
      ++stats_.fre_decodes;
      at = *check_one_fre(s_, f, at, 0);
    }
    return total;
  }

  const Section& s_;
  ValidateStats& stats_;
  std::array<std::vector<std::uint32_t>, 6> memo_;
};

Expected<void> validate_lenient(const Section& s, ValidateStats& stats) {
  const Header& h = s.header();
  // FREs take at least 2 bytes: FDEs whose FREs do not overlap declare at
  // most this many in total. Past it, FRE data is shared (or counts are
  // wrong) and the memoizing walk keeps the time linear.
  const std::uint64_t budget = h.fre_len / kMinFreSize;
  std::uint64_t declared = 0;
  std::optional<SharedFres> shared;
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    ++stats.fde_decodes;
    const Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    declared += f->num_fres;
    if (declared > budget && !shared) shared.emplace(s, stats);
    if (shared) {
      if (auto ok = shared->check(*f); !ok) return ok;
      continue;
    }
    const Expected<std::uint64_t> end = check_fres(s, *f, Strictness::kLenient);
    stats.fre_decodes += walked(*f, end);
    if (!end) return Unexpected{end.error()};
  }
  return {};
}

}  // namespace

Expected<void> validate(const Section& s, Strictness mode) {
  ValidateStats stats;
  return validate(s, mode, stats);
}

Expected<void> validate(const Section& s, Strictness mode, ValidateStats& stats) {
  stats = ValidateStats{};
  if (mode == Strictness::kLenient) return validate_lenient(s, stats);
  const Header& h = s.header();
  if (h.flags & ~defined_flags(h.version)) return make_error(FormatErrc::kUndefinedFlags, wire::header::kFlags.offset, h.flags);
  // More FREs than the FRE sub-section can hold: rejected before anything
  // is allocated or walked.
  if (h.num_fres > h.fre_len / kMinFreSize) return make_error(FormatErrc::kFreCountMismatch, wire::header::kNumFres.offset, h.num_fres);
  const std::uint64_t fdes_end = s.fde_table_offset() + std::uint64_t{h.num_fdes} * fde_entry_size(h.version);
  const std::uint64_t fres_end = s.fre_section_offset() + std::uint64_t{h.fre_len};
  if (h.num_fdes != 0 && h.fre_len != 0 && s.fde_table_offset() < fres_end && s.fre_section_offset() < fdes_end)
    return make_error(FormatErrc::kSubsectionsOverlap, wire::header::kFdeOff.offset, s.fre_section_offset());
  Coverage claimed(h.fre_len);
  // Whole FRE blocks may be shared (see validate() in section.hpp). Built
  // when the first FDE claims bytes already claimed: each block start ->
  // the first FDE there and (once asked) the start of the block's last FRE.
  struct Block {
    std::uint32_t fde;
    std::optional<std::uint64_t> last_start;
  };
  std::optional<std::unordered_map<std::uint64_t, Block>> blocks;
  const auto run_of = [&](const Fde& f) -> std::uint64_t {
    return h.version == Version::kV3 ? f.fres_begin - kFdeAttrSizeV3 : f.fres_begin;
  };
  // `f` starts at an earlier FDE's block: accepted when the block reads the
  // same for it (FRE type, FDE type, FRE count; v3 shares the whole
  // attribute anyway) and its FREs start inside `f`.
  const auto shared_ok = [&](const Fde& f, Block& b) -> Expected<void> {
    const Expected<Fde> g = s.fde(b.fde);
    if (!g) return Unexpected{g.error()};
    if (g->fre_type != f.fre_type || g->fde_type != f.fde_type || g->num_fres != f.num_fres)
      return make_error(FormatErrc::kFdeFresOverlap, run_of(f), 0, f.index);
    if (f.num_fres == 0) return {};
    if (!b.last_start) {
      std::uint64_t last = 0;
      for (const Expected<Fre>& fre : s.fres(*g)) {
        ++stats.fre_decodes;
        if (!fre) return Unexpected{fre.error()};
        last = fre->start_offset;
      }
      b.last_start = last;
    }
    const std::uint64_t limit = start_limit(f);
    if (*b.last_start >= limit && !(*b.last_start == 0 && limit == 0))
      return make_error(FormatErrc::kFreStartOutsideFunction, f.fres_begin, *b.last_start, f.index, f.num_fres - 1);
    return {};
  };
  std::uint64_t used = 0;
  std::uint64_t total_fres = 0;
  std::uint64_t prev_start = 0;
  std::uint64_t prev_end = 0;
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    ++stats.fde_decodes;
    const Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    if (auto ok = check_fde_fields(s, *f); !ok) return ok;
    const std::uint64_t run_begin = run_of(*f);
    const std::uint64_t base = s.fre_section_offset();
    // A v2 FDE without FREs has no block: nothing to share or claim.
    const bool empty = h.version != Version::kV3 && f->num_fres == 0;
    auto known = blocks && !empty ? blocks->find(run_begin) : std::unordered_map<std::uint64_t, Block>::iterator{};
    if (blocks && !empty && known != blocks->end()) {
      if (auto ok = shared_ok(*f, known->second); !ok) return ok;
    } else {
      // Linear: FREs walked here are claimed below (disjoint, or shared as
      // a whole and then not walked again), but for the last FDE, which fails.
      const Expected<std::uint64_t> end = check_fres(s, *f, Strictness::kStrict);
      stats.fre_decodes += walked(*f, end);
      if (!end) return Unexpected{end.error()};
      if (claimed.claim(run_begin - base, *end - base)) {
        total_fres += f->num_fres;
        used += *end - run_begin;
        if (blocks && !empty) blocks->emplace(run_begin, Block{i, std::nullopt});
      } else {
        // The first sharing seen: index the blocks of the FDEs before.
        if (!blocks) {
          blocks.emplace();
          for (std::uint32_t k = 0; k < i; ++k) {
            ++stats.fde_decodes;
            const Expected<Fde> g = s.fde(k);
            if (!g) return Unexpected{g.error()};
            if (h.version == Version::kV3 || g->num_fres != 0) blocks->emplace(run_of(*g), Block{k, std::nullopt});
          }
        }
        const auto it = blocks->find(run_begin);
        if (it == blocks->end()) return make_error(FormatErrc::kFdeFresOverlap, run_begin, 0, i);
        if (auto ok = shared_ok(*f, it->second); !ok) return ok;
      }
    }
    if ((h.flags & flags::kFdeSorted) && i > 0) {
      if (f->start_pc < prev_start) return make_error(FormatErrc::kFdesUnsorted, f->start_field_offset, f->start_pc, i);
      if (f->start_pc < prev_end) return make_error(FormatErrc::kFdesOverlap, f->start_field_offset, f->start_pc, i);
    }
    prev_start = f->start_pc;
    prev_end = f->start_pc + f->size;
  }
  if (total_fres != h.num_fres) return make_error(FormatErrc::kFreCountMismatch, wire::header::kNumFres.offset, h.num_fres);
  if (used != h.fre_len) return make_error(FormatErrc::kFreLenMismatch, wire::header::kFreLen.offset, h.fre_len);
  return {};
}

}  // namespace sframe
