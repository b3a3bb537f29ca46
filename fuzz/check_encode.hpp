// SPDX-License-Identifier: MIT
// Encoder properties shared by fuzz_encode, fuzz_cfi and fuzz_section:
//  - encode() either fails with a documented error (kBadVersion, kBadAbi,
//    kNotRepresentable) or returns bytes that parse and pass
//    validate(kStrict) (kPreserve: but for what the recorded header flags
//    claim, which the encoder writes as told);
//  - to_spec(decode(encode(m))) == m, normalized as encode.hpp documents:
//    kOptimize sorts FDEs by start PC (stable) and drops rows equal to the
//    previous one, and records no layout; kPreserve keeps FDE order, every
//    row, the FRE type, the flags, the FRE sub-section order, and data-word
//    sizes at least as large as recorded. Outermost rows (RA undefined:
//    no data words) decode as CFA/RA undefined, FP unchanged; v2 has no
//    signal bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "sframe/format/section.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"

namespace sframe::fuzz {

inline FrameRow canonical_row(const FrameRow& r) {
  if (!r.outermost()) return r;
  FrameRow out;
  out.ra_mangled = r.ra_mangled;
  out.cfa.kind = Rule::Kind::kUndefined;
  out.ra.kind = Rule::Kind::kUndefined;
  out.fp.kind = Rule::Kind::kUnchanged;
  return out;
}

inline SectionSpec normalized(const SectionSpec& in, Layout layout) {
  SectionSpec out = in;
  const bool preserve = layout == Layout::kPreserve;
  for (FunctionSpec& f : out.functions) {
    if (out.version != Version::kV3) f.signal = false;
    std::vector<RowSpec> rows;
    for (std::size_t k = 0; k < f.rows.size(); ++k) {
      if (!preserve && k > 0 && f.rows[k].row == f.rows[k - 1].row) continue;
      rows.push_back({f.rows[k].start_offset, canonical_row(f.rows[k].row)});
    }
    f.rows = std::move(rows);
  }
  if (!preserve)
    std::stable_sort(out.functions.begin(), out.functions.end(),
                     [](const FunctionSpec& a, const FunctionSpec& b) { return a.start_pc < b.start_pc; });
  return out;
}

// Clears what to_spec records of the layout, for the comparison.
inline void drop_layout(SectionSpec& s) {
  s.flags = 0;
  for (FunctionSpec& f : s.functions) {
    f.fre_type = FreType::kAddr1;
    f.dataword_sizes.clear();
    f.dataword_counts.clear();
    f.fre_offset = 0;
  }
}

inline bool valid_dataword_size(std::uint8_t n) { return n == 1 || n == 2 || n == 4; }

// Whether the recorded flags let kStrict fail with `c` (kPreserve writes
// them as told).
inline bool flags_explain(const SectionSpec& m, ErrorCode c) {
  if (c == FormatErrc::kUndefinedFlags) return (m.flags & ~defined_flags(m.version)) != 0;
  if (c == FormatErrc::kFdesUnsorted || c == FormatErrc::kFdesOverlap) return (m.flags & flags::kFdeSorted) != 0;
  return false;
}

/// Encodes `m` with `layout` and checks the properties above. Returns true if
/// the encoder accepted the model.
inline bool check_encode(const SectionSpec& m, Layout layout) {
  const Expected<std::vector<std::byte>> bytes = encode(m, layout);
  if (!bytes) {
    const ErrorCode c = bytes.error().code();
    SFRAME_FUZZ_CHECK(c == FormatErrc::kBadVersion || c == FormatErrc::kBadAbi || c == EncodeErrc::kNotRepresentable);
    return false;
  }
  const Expected<Section> s = Section::parse(*bytes, m.section_address);
  SFRAME_FUZZ_CHECK(s.has_value());
  SFRAME_FUZZ_CHECK(s->used_size() == bytes->size());
  const Expected<void> strict = validate(*s, Strictness::kStrict);
  if (!strict && !(layout == Layout::kPreserve && flags_explain(m, strict.error().code()))) {
    std::fprintf(stderr, "sframe fuzz: encoded section fails kStrict: %s (offset %llu, fde %u, fre %u)\n",
                 std::string(code_name(strict.error().code())).c_str(),
                 static_cast<unsigned long long>(strict.error().offset), strict.error().fde, strict.error().fre);
    SFRAME_FUZZ_CHECK(layout == Layout::kPreserve && flags_explain(m, strict.error().code()));
    SFRAME_FUZZ_CHECK(validate(*s, Strictness::kLenient).has_value());
  }
  const Expected<SectionSpec> back = to_spec(*s);
  SFRAME_FUZZ_CHECK(back.has_value());

  SectionSpec want = normalized(m, layout);
  SectionSpec got = *back;
  SFRAME_FUZZ_CHECK(got.functions.size() == want.functions.size());
  if (layout == Layout::kPreserve) {
    SFRAME_FUZZ_CHECK(got.flags == want.flags);
    for (std::size_t i = 0; i < want.functions.size(); ++i) {
      const FunctionSpec& w = want.functions[i];
      const FunctionSpec& g = got.functions[i];
      SFRAME_FUZZ_CHECK(g.fre_type == w.fre_type);
      SFRAME_FUZZ_CHECK(g.dataword_sizes.size() == g.rows.size());
      for (std::size_t k = 0; k < g.dataword_sizes.size() && k < w.dataword_sizes.size(); ++k)
        if (valid_dataword_size(w.dataword_sizes[k])) SFRAME_FUZZ_CHECK(g.dataword_sizes[k] >= w.dataword_sizes[k]);
      for (std::size_t j = 0; j < want.functions.size(); ++j)
        // (<=: a v2 function without rows has no FRE bytes.)
        if (w.fre_offset < want.functions[j].fre_offset) SFRAME_FUZZ_CHECK(g.fre_offset <= got.functions[j].fre_offset);
    }
  } else {
    SFRAME_FUZZ_CHECK(got.flags & flags::kFdeFuncStartPcrel);
  }
  drop_layout(want);
  drop_layout(got);
  for (std::size_t i = 0; i < want.functions.size(); ++i) {
    if (got.functions[i] == want.functions[i]) continue;
    const FunctionSpec& w = want.functions[i];
    const FunctionSpec& g = got.functions[i];
    std::fprintf(stderr,
                 "sframe fuzz: function %zu differs after the round trip: start %llx/%llx size %u/%u rows %zu/%zu "
                 "pc_type %d/%d fde_type %d/%d rep %u/%u signal %d/%d key %d/%d\n",
                 i, static_cast<unsigned long long>(w.start_pc), static_cast<unsigned long long>(g.start_pc), w.size,
                 g.size, w.rows.size(), g.rows.size(), int(w.pc_type), int(g.pc_type), int(w.fde_type),
                 int(g.fde_type), w.rep_size, g.rep_size, w.signal, g.signal, int(w.pauth_key), int(g.pauth_key));
    for (std::size_t k = 0; k < w.rows.size() && k < g.rows.size(); ++k)
      if (!(w.rows[k] == g.rows[k])) std::fprintf(stderr, "  row %zu differs (start %u/%u)\n", k, w.rows[k].start_offset, g.rows[k].start_offset);
  }
  SFRAME_FUZZ_CHECK(got == want);
  return true;
}

/// Whether `e`, from encoding v2 model `m` with kOptimize, is the one
/// rejection a valid v2 section may get there: sorting moved an FDE whose
/// 32-bit PC-relative start field fit where it was to a slot where it does
/// not (a function about 2 GiB from the section).
inline bool v2_sorted_start_out_of_range(const SectionSpec& m, const Error& e) {
  if (m.version != Version::kV2 || e.code() != EncodeErrc::kNotRepresentable || e.fde >= m.functions.size()) return false;
  std::vector<std::uint64_t> starts;
  for (const FunctionSpec& f : m.functions) starts.push_back(f.start_pc);
  std::stable_sort(starts.begin(), starts.end());
  const std::uint64_t field_at = kHeaderSize + std::uint64_t{e.fde} * fde_entry_size(Version::kV2);
  const auto field = static_cast<std::int64_t>(starts[e.fde] - m.section_address - field_at);
  return e.offset == field_at && (field < INT32_MIN || field > INT32_MAX);
}

/// A section that passes kStrict (v2/v3): its model encodes again, with
/// both layouts (kOptimize: but for v2_sorted_start_out_of_range), and
/// round-trips.
inline void check_reencode(const Section& s) {
  const Expected<SectionSpec> m = to_spec(s);
  SFRAME_FUZZ_CHECK(m.has_value());
  for (const Layout layout : {Layout::kOptimize, Layout::kPreserve}) {
    if (layout == Layout::kOptimize && m->version == Version::kV2) {
      const auto bytes = encode(*m, layout);
      if (!bytes && v2_sorted_start_out_of_range(*m, bytes.error())) continue;
    }
    if (check_encode(*m, layout)) continue;
    const Error e = encode(*m, layout).error();
    std::fprintf(stderr, "sframe fuzz: the model of a valid section is rejected (%s): %s value %llu fde %u fre %u\n",
                 layout == Layout::kOptimize ? "kOptimize" : "kPreserve", std::string(code_name(e.code())).c_str(),
                 static_cast<unsigned long long>(e.value), e.fde, e.fre);
    SFRAME_FUZZ_CHECK(false && "the model of a section that passes kStrict encodes");
  }
}

/// The size options (SizeOptions::all(), what --optimize-size does for every
/// consumer): when the plain kOptimize encoding of `m` succeeds, the
/// optimized one succeeds too, is no larger, passes validate(kStrict), and,
/// when no two functions overlap, every PC at a boundary of the model (each
/// function's start and end, each row's start, the byte before each; for
/// PC-mask functions in the first periods and the last) finds the same rows
/// in both sections.
inline void check_size_options(const SectionSpec& m) {
  const Expected<std::vector<std::byte>> plain = encode(m, Layout::kOptimize);
  if (!plain) return;
  const Expected<std::vector<std::byte>> opt = encode(m, Layout::kOptimize, SizeOptions::all());
  if (!opt) {
    std::fprintf(stderr, "sframe fuzz: --optimize-size rejects what plain encoding accepts: %s fde %u\n",
                 std::string(code_name(opt.error().code())).c_str(), opt.error().fde);
    SFRAME_FUZZ_CHECK(false && "size options encode what plain encoding does");
  }
  SFRAME_FUZZ_CHECK(opt->size() <= plain->size());
  const Expected<Section> a = Section::parse(*plain, m.section_address);
  const Expected<Section> b = Section::parse(*opt, m.section_address);
  SFRAME_FUZZ_CHECK(a.has_value() && b.has_value());
  const Expected<void> strict = validate(*b, Strictness::kStrict);
  if (!strict)
    std::fprintf(stderr, "sframe fuzz: optimized section fails kStrict: %s (offset %llu, fde %u)\n",
                 std::string(code_name(strict.error().code())).c_str(),
                 static_cast<unsigned long long>(strict.error().offset), strict.error().fde);
  SFRAME_FUZZ_CHECK(strict.has_value());
  // Overlapping functions: a lookup may pick either, in either section.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const FunctionSpec& f : m.functions) ranges.push_back({f.start_pc, f.start_pc + f.size});
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return;
  const auto same = [&](std::uint64_t pc) {
    const Expected<Match> x = find(*a, pc);
    const Expected<Match> y = find(*b, pc);
    if (x.has_value() != y.has_value() || (x && !(x->row == y->row))) {
      std::fprintf(stderr, "sframe fuzz: pc %llx: plain %s, optimized %s\n", static_cast<unsigned long long>(pc),
                   x ? "row" : std::string(code_name(x.error().code())).c_str(),
                   y ? "row" : std::string(code_name(y.error().code())).c_str());
      SFRAME_FUZZ_CHECK(false && "size options keep every lookup");
    }
  };
  for (const FunctionSpec& f : m.functions) {
    const std::uint64_t end = f.start_pc + f.size;
    same(f.start_pc - 1);
    same(end - 1);
    same(end);
    const std::uint64_t period = f.pc_type == PcType::kMask && f.rep_size ? f.rep_size : f.size;
    if (period == 0) continue;
    const std::uint64_t periods = f.size / period;
    for (std::uint64_t k = 0; k <= periods; ++k) {
      if (k == 4 && periods > 5) k = periods - 1;
      for (const RowSpec& r : f.rows) {
        const std::uint64_t at = f.start_pc + k * period + r.start_offset;
        if (at >= end) break;
        same(at - 1);
        same(at);
      }
    }
  }
}

}  // namespace sframe::fuzz
