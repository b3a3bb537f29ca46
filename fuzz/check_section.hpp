// SPDX-License-Identifier: MIT
// Shared body of the fuzz targets: decodes one SFrame section every way the
// library offers and traps when a documented invariant breaks.
//
// Invariants checked (each __builtin_trap()s with a message on stderr):
//  - parse() fails only with the errors it documents, and on success the
//    header's sub-sections lie inside the bytes;
//  - validate(kStrict) ok implies validate(kLenient) ok;
//  - the accessors are safe on any parsed bytes, validated or not (the
//    sanitizers check the reads), and every error names the right FDE/FRE;
//  - kLenient ok <=> walking every fde(), FRE and row() meets no error, and
//    the first error of the walk is exactly the one kLenient reported;
//  - kLenient ok: the number of FREs iterated equals the sum of the FDEs'
//    num_fres, fre_covering() finds the FREs the iterator gave, and the
//    objdump text renders without error;
//  - kStrict ok: that sum, counting a whole FRE block shared by several
//    FDEs once (validate() in section.hpp), equals the header's
//    sfh_num_fres, (sorted FDEs)
//    find() and FdeIndex::find() agree, and RowIndex::find() (when the
//    index builds) agrees with find();
//  - kLenient ok: the objdump text and the JSON render without error;
//  - check_consumer() is safe on any parsed section, keeps its cap, and
//    names only its consumer's rules at offsets inside the section.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check_encode.hpp"
#include "fuzz_check.hpp"
#include "json_stream.hpp"
#include "objdump_text.hpp"
#include "render.hpp"
#include "sframe/format/consumers.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"


namespace sframe::fuzz {

inline bool is_parse_error(ErrorCode code) {
  const std::optional<FormatErrc> c = code.as<FormatErrc>();
  if (!c) return false;
  switch (*c) {
    case FormatErrc::kTruncatedHeader:
    case FormatErrc::kBadMagic:
    case FormatErrc::kBadVersion:
    case FormatErrc::kBadAbi:
    case FormatErrc::kAuxHeaderPastEnd:
    case FormatErrc::kFdeTablePastEnd:
    case FormatErrc::kFreSectionPastEnd:
      return true;
    default:
      return false;
  }
}

// Errors that decoding an FDE, an FRE or a row may report: what kLenient checks.
inline bool is_decode_error(ErrorCode code) {
  const std::optional<FormatErrc> c = code.as<FormatErrc>();
  if (!c) return false;
  switch (*c) {
    case FormatErrc::kFreOffsetPastEnd:
    case FormatErrc::kFdeAttrTruncated:
    case FormatErrc::kBadFreType:
    case FormatErrc::kBadFdeType:
    case FormatErrc::kFreTruncated:
    case FormatErrc::kBadDatawordSize:
    case FormatErrc::kBadDatawordCount:
    case FormatErrc::kBadFlexControl:
      return true;
    default:
      return false;
  }
}

struct Walk {
  /// False when the walk stopped early (budget spent): the totals below are
  /// then partial and the completeness invariants are skipped.
  bool complete = true;
  std::optional<Error> first_error;
  std::uint64_t fde_errors = 0;
  std::uint64_t fres_iterated = 0;
  std::uint64_t fres_declared = 0;  // sum of num_fres over the FDEs that decoded
  std::vector<Fde> fdes;            // the FDEs that decoded
};

// FDEs may share FRE data, so the FREs of all FDEs can number about
// (section size)^2 / 40: the walk stops after this many FRE decodes, and
// after kBudgetAfterError more once it has met an error (the section is
// then known bad). Real sections of up to 64 KiB have at most 32 Ki FREs.
inline constexpr std::uint64_t kWalkBudget = 1u << 18;
inline constexpr std::uint64_t kBudgetAfterError = 1u << 14;

inline void check_row(const Section& s, const Fde& f, const Fre& fre, const FrameRow& row) {
  if (fre.dataword_count == 0) {
    SFRAME_FUZZ_CHECK(row.outermost());
    return;
  }
  SFRAME_FUZZ_CHECK(!row.outermost());
  SFRAME_FUZZ_CHECK(row.cfa.kind == Rule::Kind::kExpr);
  SFRAME_FUZZ_CHECK(row.ra.kind != Rule::Kind::kUndefined && row.fp.kind != Rule::Kind::kUndefined);
  // A value the FRE stores no word for (or a padding word) is the header's
  // fixed CFA slot when it has one, else unchanged.
  const Expected<WireRow> w = s.wire_row(f, fre);
  SFRAME_FUZZ_CHECK(w.has_value());
  const auto implicit = [](const Rule& r, std::int8_t fixed) {
    if (fixed == 0) return r.kind == Rule::Kind::kUnchanged;
    return r.kind == Rule::Kind::kExpr && r.base == Rule::Base::kCfa && r.deref && r.offset == fixed;
  };
  if (w->ra != WireRow::Slot::kWord) SFRAME_FUZZ_CHECK(implicit(row.ra, s.header().cfa_fixed_ra_offset));
  if (w->fp != WireRow::Slot::kWord) SFRAME_FUZZ_CHECK(implicit(row.fp, s.header().cfa_fixed_fp_offset));
  if (f.fde_type == FdeType::kDefault) {
    SFRAME_FUZZ_CHECK(row.cfa.base == Rule::Base::kRegister);
    if (s.header().cfa_fixed_ra_offset != 0) SFRAME_FUZZ_CHECK(w->ra == WireRow::Slot::kNone);
    if (s.header().cfa_fixed_fp_offset != 0) SFRAME_FUZZ_CHECK(w->fp == WireRow::Slot::kNone);
  }
}

// Decodes every FDE, FRE and row in validate()'s order, whether or not the
// section is valid.
inline Walk walk(const Section& s) {
  Walk w;
  const std::uint64_t size = s.bytes().size();
  const std::uint64_t fres_end = std::uint64_t{s.fre_section_offset()} + s.header().fre_len;
  std::uint64_t budget = kWalkBudget;
  const auto note = [&](const Error& e) {
    SFRAME_FUZZ_CHECK(is_decode_error(e.code()));
    SFRAME_FUZZ_CHECK(e.offset <= size);
    // Only an error met with nothing skipped before it is validate()'s.
    if (!w.first_error && w.complete) {
      w.first_error = e;
      budget = std::min(budget, kBudgetAfterError);
    }
  };
  std::vector<Fre> kept;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    if (budget == 0) w.complete = false;
    const Expected<Fde> f = s.fde(i);
    if (!f) {
      note(f.error());
      SFRAME_FUZZ_CHECK(f.error().fde == i);
      ++w.fde_errors;
      continue;
    }
    SFRAME_FUZZ_CHECK(f->index == i);
    SFRAME_FUZZ_CHECK(f->start_pc == s.fde_start_pc(i));
    SFRAME_FUZZ_CHECK(f->fres_begin >= s.fre_section_offset() && f->fres_begin <= fres_end);
    if (s.version() != Version::kV3) SFRAME_FUZZ_CHECK(f->fde_type == FdeType::kDefault);
    w.fdes.push_back(*f);
    w.fres_declared += f->num_fres;
    if (budget == 0) continue;

    const std::uint32_t asz = start_address_size(f->fre_type);
    std::uint32_t k = 0;
    bool failed = false;
    kept.clear();
    for (const Expected<Fre>& fre : s.fres(*f)) {
      // A fallible iterator ends right after yielding its error.
      SFRAME_FUZZ_CHECK(!failed);
      if (!fre) {
        failed = true;
        note(fre.error());
        SFRAME_FUZZ_CHECK(fre.error().fde == i && fre.error().fre == k);
        continue;
      }
      SFRAME_FUZZ_CHECK(fre->index == k);
      SFRAME_FUZZ_CHECK(fre->dataword_size == 1 || fre->dataword_size == 2 || fre->dataword_size == 4);
      SFRAME_FUZZ_CHECK(fre->dataword_count <= kMaxDatawords);
      SFRAME_FUZZ_CHECK(fre->encoded_size == asz + 1 + std::uint32_t{fre->dataword_count} * fre->dataword_size);
      SFRAME_FUZZ_CHECK(fre->section_offset >= f->fres_begin);
      SFRAME_FUZZ_CHECK(std::uint64_t{fre->section_offset} + fre->encoded_size <= fres_end);
      std::uint64_t sum = 0;
      for (std::uint32_t d = 0; d < fre->dataword_count; ++d) {
        sum += s.dataword(*fre, d);
        sum += static_cast<std::uint64_t>(s.sdataword(*fre, d));
      }
      g_sink = sum;
      const Expected<FrameRow> row = s.row(*f, *fre);
      if (!row) {
        note(row.error());
        SFRAME_FUZZ_CHECK(row.error().fde == i && row.error().fre == k);
      } else {
        check_row(s, *f, *fre, *row);
      }
      if (kept.size() < 16) kept.push_back(*fre);
      ++k;
      ++w.fres_iterated;
      if (--budget == 0) break;
    }
    SFRAME_FUZZ_CHECK(k <= f->num_fres);
    if (budget == 0) {
      w.complete = false;
      continue;
    }
    if (!failed) SFRAME_FUZZ_CHECK(k == f->num_fres);

    // fre_covering() steps over the same FREs reading only start and info;
    // when they all decode it can fail only for a PC before the first one.
    if (failed) continue;
    if (k > 0 && budget >= k) {
      budget -= k;
      const Expected<Fre> last = s.fre_covering(*f, ~std::uint64_t{0});
      SFRAME_FUZZ_CHECK(last && last->index == k - 1);
    }
    for (const Fre& fre : kept) {
      // Unordered starts can make the scan run to the last FRE.
      if (budget < k) break;
      budget -= k;
      const Expected<Fre> c = s.fre_covering(*f, fre.start_offset);
      if (!c) {
        // Unordered start addresses can hide an FRE behind an earlier one.
        SFRAME_FUZZ_CHECK(c.error().code() == LookupErrc::kPcBeforeFirstFre);
        continue;
      }
      SFRAME_FUZZ_CHECK(c->start_offset <= fre.start_offset);
      if (c->index < kept.size()) SFRAME_FUZZ_CHECK(*c == kept[c->index]);
    }
  }
  return w;
}

// Lookups of PCs at and around the edges of some FDEs.
inline void check_lookup(const Section& s, const Walk& w, bool strict_ok) {
  const Expected<FdeIndex> index = FdeIndex::build(s);
  if (w.fde_errors == 0) SFRAME_FUZZ_CHECK(index.has_value());
  const bool comparable = strict_ok && (s.header().flags & flags::kFdeSorted) && index;

  std::vector<std::uint64_t> pcs = {0, ~std::uint64_t{0}, s.address()};
  const std::size_t n = w.fdes.size();
  for (std::size_t j = 0; j < n; ++j) {
    if (j >= 8 && j + 8 < n) continue;
    const Fde& f = w.fdes[j];
    pcs.insert(pcs.end(), {f.start_pc, f.start_pc - 1, f.start_pc + f.size, f.start_pc + f.size / 2});
    if (f.size > 0) pcs.push_back(f.start_pc + f.size - 1);
  }
  // RowIndex (any section it accepts: it decodes everything up front)
  // answers as find() does wherever kStrict holds.
  const Expected<RowIndex> rows = RowIndex::build(s);
  for (const std::uint64_t pc : pcs) {
    const Expected<Match> a = find(s, pc);
    if (a) SFRAME_FUZZ_CHECK(pc - a->fde.start_pc < a->fde.size);
    if (rows) {
      const Expected<RowMatch> r = rows->find(pc);
      if (r) SFRAME_FUZZ_CHECK(r->fde_index < s.num_fdes());
      if (strict_ok) {
        SFRAME_FUZZ_CHECK(r.has_value() == a.has_value());
        if (a) {
          SFRAME_FUZZ_CHECK(r->fde_index == a->fde.index && r->fre_index == a->fre.index && r->row == a->row &&
                            r->signal == a->fde.signal && r->fde_type == a->fde.fde_type);
        } else {
          SFRAME_FUZZ_CHECK(r.error().code() == a.error().code());
        }
      }
    }
    if (!index) continue;
    const Expected<Match> b = index->find(pc);
    if (b) SFRAME_FUZZ_CHECK(pc - b->fde.start_pc < b->fde.size);
    if (!comparable) continue;
    SFRAME_FUZZ_CHECK(a.has_value() == b.has_value());
    if (a) {
      SFRAME_FUZZ_CHECK(a->fde == b->fde && a->fre == b->fre && a->row == b->row);
    } else {
      SFRAME_FUZZ_CHECK(a.error() == b.error());
    }
  }
}

// Above this many FREs the objdump text (about 50 bytes per FRE) and the
// JSON are not rendered: FDEs may share FRE data (kLenient accepts shared
// blocks), so the text can grow quadratically. 2^18 FREs took 14 s to
// render under ASan and coverage, past libFuzzer's 12 s timeout in CI.
inline constexpr std::uint64_t kMaxRenderedFres = 1u << 15;

inline void check_section(std::span<const std::byte> bytes, std::uint64_t address) {
  const Expected<Section> parsed = Section::parse(bytes, address);
  if (!parsed) {
    SFRAME_FUZZ_CHECK(is_parse_error(parsed.error().code()));
    return;
  }
  const Section& s = *parsed;
  const Header& h = s.header();
  const std::uint64_t size = bytes.size();
  SFRAME_FUZZ_CHECK(s.bytes().data() == bytes.data() && s.bytes().size() == size);
  SFRAME_FUZZ_CHECK(s.address() == address);
  SFRAME_FUZZ_CHECK(s.big_endian() == (static_cast<std::uint8_t>(bytes[0]) == 0xde));
  SFRAME_FUZZ_CHECK(s.used_size() <= size);
  SFRAME_FUZZ_CHECK(s.fde_table_offset() >= kHeaderSize + std::uint64_t{h.auxhdr_len});
  SFRAME_FUZZ_CHECK(s.fde_table_offset() + std::uint64_t{h.num_fdes} * fde_entry_size(h.version) <= size);
  SFRAME_FUZZ_CHECK(s.fre_section_offset() + std::uint64_t{h.fre_len} <= size);

  const Expected<void> lenient = validate(s, Strictness::kLenient);
  const Expected<void> strict = validate(s, Strictness::kStrict);
  if (strict) SFRAME_FUZZ_CHECK(lenient.has_value());
  if (!lenient) {
    SFRAME_FUZZ_CHECK(is_decode_error(lenient.error().code()));
    SFRAME_FUZZ_CHECK(!strict);
  }
  if (!strict) SFRAME_FUZZ_CHECK(strict.error().offset <= size);

  // The consumers' rules run on any parsed section (sframe/format/consumers.hpp):
  // bounded, each violation of the consumer asked and inside the section.
  FileFacts facts;
  facts.loads.push_back({address, std::uint64_t{1} << 20, true});
  facts.section_address = address;
  facts.section_size = size;
  for (const Consumer c : kAllConsumers) {
    const ConsumerReport r = check_consumer(s, c, &facts, 16);
    SFRAME_FUZZ_CHECK(r.violations.size() <= 16 && r.file_rules_checked);
    SFRAME_FUZZ_CHECK(r.accepted() == (r.violations.empty() && r.omitted == 0 && r.complete));
    for (const auto& v : r.violations) {
      SFRAME_FUZZ_CHECK(rule_info(v.rule).consumer == c);
      SFRAME_FUZZ_CHECK(v.offset <= size);
    }
  }

  const Walk w = walk(s);
  if (w.first_error || w.complete) SFRAME_FUZZ_CHECK(lenient.has_value() == !w.first_error.has_value());
  if (!lenient && w.first_error) SFRAME_FUZZ_CHECK(lenient.error() == *w.first_error);
  if (lenient && w.complete) {
    SFRAME_FUZZ_CHECK(w.fdes.size() == h.num_fdes);
    SFRAME_FUZZ_CHECK(w.fres_iterated == w.fres_declared);
  }
  if (strict) {
    // Every FDE decoded; FDEs sharing a whole block point at the same bytes.
    std::vector<std::pair<std::uint64_t, std::uint32_t>> blocks;
    for (const Fde& f : w.fdes)
      if (f.num_fres != 0) blocks.push_back({f.fres_begin, f.num_fres});
    std::sort(blocks.begin(), blocks.end());
    std::uint64_t stored = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i)
      if (i == 0 || blocks[i].first != blocks[i - 1].first) stored += blocks[i].second;
    SFRAME_FUZZ_CHECK(stored == h.num_fres);
  }

  check_lookup(s, w, strict.has_value());

  if (lenient && w.fres_declared <= kMaxRenderedFres) {
    std::string text;
    const Expected<void> ok = tools::append_section(text, s, ".sframe");
    SFRAME_FUZZ_CHECK(ok.has_value());
    SFRAME_FUZZ_CHECK(!text.empty());
    // The streamed JSON is one valid document with every FDE.
    char* buf = nullptr;
    std::size_t len = 0;
    std::FILE* mem = open_memstream(&buf, &len);
    SFRAME_FUZZ_CHECK(mem != nullptr);
    {
      tools::JsonStream out(mem);
      SFRAME_FUZZ_CHECK(tools::write_section_json(out, s, ".sframe").has_value());
      out.finish();
    }
    std::fclose(mem);
    const tools::Json j = tools::Json::parse(std::string_view(buf, len), nullptr, false);
    std::free(buf);
    SFRAME_FUZZ_CHECK(!j.is_discarded());
    SFRAME_FUZZ_CHECK(j["fdes"].size() == h.num_fdes);
  }
  if (strict && s.version() != Version::kV1 && w.fres_declared <= kMaxRenderedFres) check_reencode(s);
}

}  // namespace sframe::fuzz
