// SPDX-License-Identifier: MIT
// SFrame v2/v3 encoder: rows to FREs with the smallest (or the recorded)
// encodings, then header, FDE sub-section and FRE sub-section.
#include "sframe/format/encode.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

#include "encode_size.hpp"

namespace sframe {
using detail::block_hash;
using detail::fre_bytes_of;
using detail::kContinueRowLimit;
using detail::one_period;
using detail::unroll_period;

namespace {

// One data word before sizing: offsets are signed, FLEX control words unsigned.
struct Word {
  std::int64_t value;
  bool control;
};

// A row's data words; a FLEX row has the most: CFA, RA and FP as pairs.
struct Words {
  Word w[6];
  std::uint8_t n = 0;
  void push(Word x) { w[n++] = x; }
  const Word* begin() const { return w; }
  const Word* end() const { return w + n; }
};

struct EncodedRow {
  std::uint32_t start;
  std::uint8_t info_base_mangled;  // bit 0 and bit 7 of the FRE info byte
  Words words;
};

bool fits(const Word& w, unsigned size) {
  const unsigned bits = 8 * size;
  if (w.control) return w.value >= 0 && (bits == 32 || w.value < (std::int64_t{1} << bits));
  if (bits == 32) return w.value >= std::numeric_limits<std::int32_t>::min() && w.value <= std::numeric_limits<std::int32_t>::max();
  const std::int64_t lim = std::int64_t{1} << (bits - 1);
  return w.value >= -lim && w.value < lim;
}

unsigned smallest_size(const Words& words) {
  unsigned size = 1;
  for (const Word& w : words) {
    while (size <= 4 && !fits(w, size)) size *= 2;
    if (size > 4) return 0;
  }
  return size;
}

class Encoder {
 public:
  Encoder(const SectionSpec& spec, std::uint32_t fde) : spec_(spec), regs_(abi_regs(spec.abi)), fde_(fde) {}

  // The row errors name.
  void at_row(std::uint32_t row) { row_ = row; }

  Unexpected not_representable(std::uint64_t what = 0) const {
    return make_error(EncodeErrc::kNotRepresentable, 0, what, fde_, row_);
  }

  // s390x stores CFA offsets adjusted and scaled (errata 1); they must divide.
  Expected<std::int64_t> stored_cfa_offset(std::int32_t off) const {
    if (spec_.abi != Abi::kS390xBig) return std::int64_t{off};
    const std::int64_t adj = std::int64_t{off} + s390x::kCfaOffsetAdjustment;
    if (adj % s390x::kCfaOffsetAlignment != 0) return not_representable(static_cast<std::uint64_t>(off));
    return adj / s390x::kCfaOffsetAlignment;
  }

  // A rule that needs no data word: the header's fixed offset, or unchanged
  // when the header fixes nothing (what Section::row reads for no word).
  static bool implicit(const Rule& r, std::int8_t fixed) {
    if (fixed != 0)
      return r.kind == Rule::Kind::kExpr && r.base == Rule::Base::kCfa && r.deref && r.offset == fixed;
    return r.kind == Rule::Kind::kUnchanged;
  }

  // `want`: the data-word count to reproduce (Layout::kPreserve, from the raw
  // view), or 0: the fewest words. It only makes words explicit (or padding)
  // that the rules alone would leave out; it never changes what they say.
  Expected<void> default_words(const FrameRow& row, unsigned want, std::uint8_t& base_bit, Words& words) const {
    const Rule& c = row.cfa;
    if (c.kind != Rule::Kind::kExpr || c.base != Rule::Base::kRegister || c.deref ||
        (c.regnum != regs_.sp && c.regnum != regs_.fp))
      return not_representable();
    base_bit = c.regnum == regs_.sp ? 1 : 0;
    auto off = stored_cfa_offset(c.offset);
    if (!off) return Unexpected{off.error()};
    words.push({*off, false});
    const bool v2_s390 = spec_.abi == Abi::kS390xBig && spec_.version == Version::kV2;
    // A saved-register rule as a data word: a CFA slot, or (s390x v2) a
    // register number tagged with bit 0.
    const auto slot = [&](const Rule& r) -> Expected<Word> {
      if (r.kind == Rule::Kind::kExpr && r.base == Rule::Base::kCfa && r.deref) {
        if (v2_s390 && (r.offset & 1)) return not_representable(static_cast<std::uint64_t>(r.offset));
        return Word{r.offset, false};
      }
      if (v2_s390 && r.kind == Rule::Kind::kExpr && r.base == Rule::Base::kRegister && !r.deref && r.offset == 0)
        return Word{(std::int64_t{r.regnum} << 1) | 1, false};
      return not_representable();
    };
    const bool ra_tracked = spec_.cfa_fixed_ra_offset == 0;
    std::optional<Word> ra, fp;
    if (!implicit(row.ra, spec_.cfa_fixed_ra_offset)) {
      if (!ra_tracked) return not_representable();
      auto w = slot(row.ra);
      if (!w) return Unexpected{w.error()};
      // 0 reads back as SFRAME_FRE_RA_OFFSET_INVALID.
      if (w->value == kRaOffsetInvalid) return not_representable();
      ra = *w;
    }
    if (!implicit(row.fp, spec_.cfa_fixed_fp_offset)) {
      if (spec_.cfa_fixed_fp_offset != 0) return not_representable();
      auto w = slot(row.fp);
      if (!w) return Unexpected{w.error()};
      fp = *w;
    }
    // A tracked RA without a rule before an FP word (or kept from the layout):
    // SFRAME_FRE_RA_OFFSET_INVALID (errata 1).
    if (ra_tracked && !ra && (fp || want >= 2)) ra = Word{kRaOffsetInvalid, false};
    if (ra) words.push(*ra);
    if (fp) words.push(*fp);
    return {};
  }

  Expected<void> flex_words(const FrameRow& row, unsigned want, std::uint8_t& base_bit, Words& words) const {
    const Rule& c = row.cfa;
    if (c.kind != Rule::Kind::kExpr || c.base != Rule::Base::kRegister) return not_representable();
    // The control word names the base; GNU as leaves fre_cfa_base_reg_id 0.
    base_bit = 0;
    auto off = stored_cfa_offset(c.offset);
    if (!off) return Unexpected{off.error()};
    words.push({control(c), true});
    words.push({*off, false});
    const auto pair = [&](const Rule& r) -> Expected<std::pair<Word, Word>> {
      if (r.kind != Rule::Kind::kExpr) return not_representable();
      const std::int64_t ctl = control(r);
      if (ctl == 0) return not_representable();  // 0 is the padding word
      return std::pair{Word{ctl, true}, Word{r.offset, false}};
    };
    // Pairs for rules the header does not give, or that the layout kept as
    // pairs: CFA + RA is 4 words, CFA + padding + FP 5, all three 6 (v3 §3.2).
    const bool ra_pair = !implicit(row.ra, spec_.cfa_fixed_ra_offset) || want == 4 || want == 6;
    const bool fp_pair = !implicit(row.fp, spec_.cfa_fixed_fp_offset) || want == 5 || want == 6;
    if (ra_pair) {
      auto ra = pair(row.ra);
      if (!ra) return Unexpected{ra.error()};
      words.push(ra->first);
      words.push(ra->second);
    } else if (fp_pair) {
      words.push({0, true});
    }
    if (fp_pair) {
      auto fp = pair(row.fp);
      if (!fp) return Unexpected{fp.error()};
      words.push(fp->first);
      words.push(fp->second);
    }
    return {};
  }

  // Row `k` of `f`, `row` from `start` on; `preserve`: with the data-word
  // count f recorded.
  Expected<void> row(const FunctionSpec& f, std::uint32_t k, std::uint32_t start, const FrameRow& row, bool preserve,
                     EncodedRow& out) const {
    out.start = start;
    out.words.n = 0;
    std::uint8_t base_bit = 0;
    // The outermost row (errata 2) is an FRE without data words.
    if (!row.outermost()) {
      const unsigned want = preserve && k < f.dataword_counts.size() ? f.dataword_counts[k] : 0;
      auto ok = f.fde_type == FdeType::kFlex ? flex_words(row, want, base_bit, out.words)
                                             : default_words(row, want, base_bit, out.words);
      if (!ok) return ok;
    }
    out.info_base_mangled = static_cast<std::uint8_t>(base_bit | (row.ra_mangled ? 0x80 : 0));
    return {};
  }

 private:
  static std::int64_t control(const Rule& r) {
    const bool reg = r.base == Rule::Base::kRegister;
    return (reg ? (std::int64_t{r.regnum} << 3) | 1 : 0) | (r.deref ? 2 : 0);
  }

  const SectionSpec& spec_;
  AbiRegs regs_;
  std::uint32_t fde_;
  std::uint32_t row_ = 0;
};

// Stores the fields (wire::Field) of one structure at `base` in the
// section's byte order, into room the caller sized beforehand.
struct FieldWriter {
  ByteOrder order;
  std::byte* base;
  void put(wire::Field f, std::uint64_t v) const { endian::store(base + f.offset, v, f.size, order); }
};

Expected<void> check_header(const SectionSpec& spec) {
  if (spec.version != Version::kV2 && spec.version != Version::kV3)
    return make_error(FormatErrc::kBadVersion, wire::header::kVersion.offset, static_cast<std::uint64_t>(spec.version));
  if (!is_known_abi(static_cast<std::uint8_t>(spec.abi), spec.version))
    return make_error(FormatErrc::kBadAbi, wire::header::kAbi.offset, static_cast<std::uint64_t>(spec.abi));
  return {};
}

}  // namespace

SectionEncoder::SectionEncoder(const SectionSpec& header, Layout layout) : layout_(layout) {
  header_.version = header.version;
  header_.abi = header.abi;
  header_.big_endian = header.big_endian;
  header_.cfa_fixed_fp_offset = header.cfa_fixed_fp_offset;
  header_.cfa_fixed_ra_offset = header.cfa_fixed_ra_offset;
  header_.section_address = header.section_address;
  header_.flags = header.flags;
}

void SectionEncoder::reserve(std::size_t functions, std::size_t fre_bytes) {
  fdes_.reserve(functions);
  fres_.reserve(fre_bytes);
  detail::advise_huge_pages(fres_.data(), fres_.capacity());
  if (alt_) alt_->reserve(functions, fre_bytes);
}

Expected<void> check_function_outline(const FunctionSpec& f, std::uint32_t index) noexcept {
  if (f.pc_type == PcType::kMask && f.rep_size == 0) return make_error(EncodeErrc::kNotRepresentable, 0, 0, index);
  if (f.start_pc + f.size < f.start_pc) return make_error(EncodeErrc::kNotRepresentable, 0, f.start_pc, index);
  return {};
}

Expected<void> check_row_start(std::uint64_t limit, std::uint32_t index, std::uint32_t k, std::uint32_t start,
                               std::uint32_t prev) noexcept {
  if (!detail::row_start_fits(limit, k, start, prev))
    return make_error(EncodeErrc::kNotRepresentable, 0, start, index, k);
  return {};
}

Expected<void> check_function_shape(const FunctionSpec& f, std::uint32_t index) noexcept {
  if (auto ok = check_function_outline(f, index); !ok) return ok;
  const std::uint64_t limit = detail::row_limit(f.pc_type, f.size, f.rep_size);
  for (std::uint32_t k = 0; k < f.rows.size(); ++k)
    if (auto ok = check_row_start(limit, index, k, f.rows[k].start_offset, k > 0 ? f.rows[k - 1].start_offset : 0); !ok)
      return ok;
  return {};
}

Expected<void> SectionEncoder::open_function(const FunctionSpec& f, std::size_t count) {
  (void)count;  // the row count has no limit of its own before encoding (v3's 0xffff counts FREs)
  if (auto ok = check_header(header_); !ok) return ok;
  const bool preserve = layout_ == Layout::kPreserve;
  if (added_ >= 0xffffffffu)
    return make_error(EncodeErrc::kNotRepresentable, wire::header::kNumFdes.offset, std::uint64_t{added_} + 1);
  const std::uint32_t index = added_;
  if (f.fde_type == FdeType::kFlex && header_.version != Version::kV3)
    return make_error(EncodeErrc::kNotRepresentable, 0, 1, index);
  // Enum fields of the model come from the caller: out-of-range values would
  // spill into other bits of the info bytes.
  if (static_cast<unsigned>(f.pc_type) > 1 || static_cast<unsigned>(f.fde_type) > 1 ||
      static_cast<unsigned>(f.pauth_key) > 1 || (preserve && static_cast<unsigned>(f.fre_type) > 2))
    return make_error(EncodeErrc::kNotRepresentable, 0, 2, index);
  return check_function_outline(f, index);
}

Expected<void> SectionEncoder::row_error(std::size_t k, std::uint32_t start) const {
  return make_error(EncodeErrc::kNotRepresentable, 0, start, added_, static_cast<std::uint32_t>(k));
}

void SectionEncoder::begin_rows(std::vector<Row>& out) {
  out_rows_ = &out;
  out_count_ = 0;
  prev_row_ = nullptr;
  prev_tag_ = 0;
  size_error_ = false;
}

Expected<void> SectionEncoder::put_row(const FunctionSpec& f, std::uint32_t k, std::uint32_t start,
                                       const FrameRow& row, std::uint32_t tag, bool checked) {
  const bool preserve = layout_ == Layout::kPreserve;
  // Same rules as the row before, or a tagged row encoded before:
  // put_known_row(), unless the caller ran it already (kPreserve keeps
  // every row and sizes each FRE as recorded: neither applies).
  if (!checked && put_known_row(f, start, row, tag)) return {};
  std::vector<Row>& out = *out_rows_;
  // Where a tagged row's FRE is kept for its next rows.
  TagSlot* slot = nullptr;
  if (tag != 0 && !preserve) {
    if (tag_slots_.empty()) tag_slots_.resize(kTagSlots);
    slot = &tag_slots_[tag & (kTagSlots - 1)];
  }
  Encoder encoder(header_, added_);
  encoder.at_row(k);
  EncodedRow e;
  if (auto ok = encoder.row(f, k, start, row, preserve, e); !ok) return ok;
  // The data-word size: the smallest, or the recorded one (kPreserve). A
  // size error waits for end_rows(): the rules of every row are checked
  // first, as they always were.
  const auto fre = static_cast<std::uint32_t>(out_count_);
  unsigned size = smallest_size(e.words);
  if (preserve && fre < f.dataword_sizes.size() && f.dataword_sizes[fre] >= size) {
    size = f.dataword_sizes[fre];
    if (size != 1 && size != 2 && size != 4 && !size_error_) {
      size_error_ = true;
      size_error_fre_ = fre;
      size_error_value_ = size;
    }
  }
  if (size == 0 && !size_error_) {
    size_error_ = true;
    size_error_fre_ = fre;
    size_error_value_ = 0;
  }
  // Rows past out_count_ stay from earlier functions and are overwritten in
  // place: no zero-fill of each row before it is written.
  if (out_count_ == out.size()) out.emplace_back();
  Row& r = out[out_count_++];
  r.start = e.start;
  r.info_base_mangled = e.info_base_mangled;
  r.word_size = static_cast<std::uint8_t>(size);
  r.num_words = e.words.n;
  for (std::uint8_t j = 0; j < e.words.n; ++j) r.words[j] = e.words.w[j].value;
  // Kept for the tag's next rows (only an FRE without a size error).
  if (slot && size != 0) *slot = TagSlot{tag, f.fde_type, r};
  return {};
}

Expected<void> SectionEncoder::end_rows(const FunctionSpec& f) {
  std::vector<Row>& out = *out_rows_;
  const std::size_t count = out_count_;
  const std::uint32_t index = added_;
  const std::uint32_t max_start = count == 0 ? 0 : out[count - 1].start;
  if (layout_ == Layout::kPreserve) {
    const unsigned asz = start_address_size(f.fre_type);
    if (asz < 4 && max_start >> (8 * asz)) return make_error(EncodeErrc::kNotRepresentable, 0, max_start, index);
  }
  if (header_.version == Version::kV3 && count > 0xffff)
    return make_error(EncodeErrc::kNotRepresentable, 0, count, index);
  if (size_error_) return make_error(EncodeErrc::kNotRepresentable, 0, size_error_value_, index, size_error_fre_);
  out.resize(count);  // shrinks only: the rows past count were written
  return {};
}

Expected<void> SectionEncoder::encode_rows(const FunctionSpec& f, const std::vector<RowSpec>& spec,
                                           std::vector<Row>& out) {
  begin_rows(out);
  for (std::uint32_t k = 0; k < spec.size(); ++k)
    if (auto ok = put_row(f, k, spec[k].start_offset, spec[k].row); !ok) return ok;
  return end_rows(f);
}

Expected<void> SectionEncoder::add_encoded(const FunctionSpec& f) {
  const std::uint8_t info = static_cast<std::uint8_t>((static_cast<unsigned>(f.pc_type) << 4) |
                                                      (static_cast<unsigned>(f.pauth_key) << 5));
  if (pending_)
    if (auto ok = flush(); !ok) return ok;
  pending_ = true;
  pending_rec_ = {f.start_pc, f.size, 0, 0, f.fre_offset, info, f.fde_type, f.rep_size, f.signal, 0};
  pending_pc_type_ = f.pc_type;
  pending_fre_type_ = f.fre_type;
  // The FREs change places with the flushed ones': no copy, and both keep
  // their capacity.
  std::swap(pending_rows_, rows_);
  last_mergeable_ = false;  // no size technique on
  ++added_;
  return {};
}

Expected<void> SectionEncoder::add_whole(const FunctionSpec& shape) {
  FunctionSpec& f = whole_;
  f.start_pc = shape.start_pc;
  f.size = shape.size;
  f.pc_type = shape.pc_type;
  f.fde_type = shape.fde_type;
  f.rep_size = shape.rep_size;
  f.signal = shape.signal;
  f.pauth_key = shape.pauth_key;
  f.fre_type = shape.fre_type;
  f.fre_offset = shape.fre_offset;
  // (The size techniques are kOptimize only: the recorded data-word sizes
  // and counts are never read here.)
  // The same checks fail the same way in both.
  if (alt_)
    if (auto ok = alt_->add(f); !ok) return ok;
  const std::uint32_t index = added_;
  if (auto ok = check_function_shape(f, index); !ok) return ok;
  if (size_.merge_adjacent && extends_last(f)) {
    pending_rec_.size += f.size;
    ++added_;
    return {};
  }
  // pc_mask: the rows of one period under PcType::kMask, when they repeat.
  const std::vector<RowSpec>* spec_rows = &f.rows;
  PcType pc_type = f.pc_type;
  std::uint8_t rep_size = f.rep_size;
  if (size_.pc_mask && f.pc_type == PcType::kInc && f.rows.size() >= 2) {
    distinct_.clear();
    for (const RowSpec& r : f.rows)
      if (distinct_.empty() || !(distinct_.back().row == r.row)) distinct_.push_back(r);
    std::uint8_t period = 0;
    period_rows_ = one_period(distinct_, f.size, period);
    if (!period_rows_.empty()) {
      spec_rows = &period_rows_;
      pc_type = PcType::kMask;
      rep_size = period;
    }
  }
  const std::vector<RowSpec>& in_rows = *spec_rows;
  std::vector<Row>& rows = rows_;
  std::vector<Row>& inc_rows = inc_rows_;
  std::vector<RowSpec>& unrolled = unrolled_;
  if (auto ok = encode_rows(f, in_rows, rows); !ok) return ok;
  const std::uint8_t info = static_cast<std::uint8_t>((static_cast<unsigned>(pc_type) << 4) |
                                                      (static_cast<unsigned>(f.pauth_key) << 5));
  // coalesce_adjacent: `f`'s rows appended to the pending FDE's, its first
  // dropped when it repeats the pending FDE's last row. A PC-mask function
  // joins as the PC-increment rows its period gives over its whole size
  // (a lookup reads the same row at every PC; spec §2.3.1,
  // SFRAME_FDE_PCTYPE_MASK): a short run of stubs (an x86-64 .plt of a few
  // entries beside PLT0 and .plt.got) then costs a few FREs instead of its
  // own FDE entry and attribute.
  const auto join = [&](const std::vector<Row>& joined, const std::vector<RowSpec>& joined_spec, bool first_repeats) {
    const std::uint32_t shift = static_cast<std::uint32_t>(f.start_pc - pending_rec_.start_pc);
    for (std::size_t k = first_repeats ? 1 : 0; k < joined.size(); ++k) {
      Row r = joined[k];
      r.start += shift;
      pending_rows_.push_back(r);
    }
    pending_rec_.size = shift + f.size;
    last_row_ = joined_spec.back().row;
    ++added_;
  };
  // coalesce_adjacent: a pending PC-mask FDE extends over `f` when each PC
  // of `f` reads the row the period gives there (x86-64: .plt.got's
  // CFA = SP + 8 continues the 16-byte PLTn period, whose first 11 bytes
  // read SP + 8), saving `f`'s FDE and FREs.
  if (size_.coalesce_adjacent && pending_ && pending_pc_type_ == PcType::kMask && !in_rows.empty() &&
      pending_rec_.start_pc + pending_rec_.size == f.start_pc && f.size != 0 &&
      std::uint64_t{pending_rec_.size} + f.size <= 0xffffffffu && f.fde_type == pending_rec_.fde_type &&
      f.signal == pending_rec_.signal && ((pending_rec_.info >> 5) & 1) == static_cast<unsigned>(f.pauth_key)) {
    const std::vector<Row>* f_rows = &rows;
    bool ok = pc_type == PcType::kInc;
    if (!ok && unroll_period(in_rows, rep_size, f.size, kContinueRowLimit, unrolled)) {
      if (auto e = encode_rows(f, unrolled, inc_rows); !e) return e;
      f_rows = &inc_rows;
      ok = true;
    }
    if (ok && continues_period(f.size, *f_rows)) {
      pending_rec_.size += f.size;
      ++added_;
      return {};
    }
  }
  if (size_.coalesce_adjacent && last_mergeable_ && !in_rows.empty()) {
    if (pc_type == PcType::kInc) {
      const bool first_repeats = in_rows.front().row == last_row_;
      if (coalesces(f, rows, first_repeats, rows, pc_type, rep_size)) {
        join(rows, in_rows, first_repeats);
        return {};
      }
    } else if (unroll_period(in_rows, rep_size, f.size, coalesce_limit(), unrolled)) {
      if (auto ok = encode_rows(f, unrolled, inc_rows); !ok) return ok;
      const bool first_repeats = unrolled.front().row == last_row_;
      if (coalesces(f, inc_rows, first_repeats, rows, pc_type, rep_size)) {
        join(inc_rows, unrolled, first_repeats);
        return {};
      }
    }
  }
  if (pending_)
    if (auto ok = flush(); !ok) return ok;
  pending_ = true;
  pending_rec_ = {f.start_pc, f.size, 0, 0, f.fre_offset, info, f.fde_type, rep_size, f.signal, 0};
  pending_pc_type_ = pc_type;
  pending_fre_type_ = f.fre_type;
  pending_rows_.assign(rows.begin(), rows.end());
  // merge_adjacent, coalesce_adjacent: a PC-increment FDE with rows can be
  // extended by the next.
  last_mergeable_ = (size_.merge_adjacent || size_.coalesce_adjacent) && pc_type == PcType::kInc && !in_rows.empty();
  if (last_mergeable_) last_row_ = in_rows.back().row;
  ++added_;
  return {};
}

std::size_t SectionEncoder::write_block(std::span<const Row> rows, const FdeRecord& rec, std::uint8_t info,
                                       std::byte* out) const {
  const ByteOrder order = endian::order(header_.big_endian);
  const auto type = static_cast<FreType>(fde_info::fre_type(info));
  std::byte* at = out;
  if (header_.version == Version::kV3) {
    namespace a = wire::fde_attr;
    const FieldWriter w{order, at};
    w.put(a::kNumFres, rows.size());
    w.put(a::kInfo, info | (rec.signal ? 0x80u : 0u));
    w.put(a::kInfo2, static_cast<unsigned>(rec.fde_type));
    w.put(a::kRepSize, rec.rep_size);
    at += a::kSize;
  }
  const std::uint32_t words_off = wire::fre::datawords_offset(type);
  for (const Row& r : rows) {
    const unsigned code = r.word_size == 1 ? 0 : r.word_size == 2 ? 1 : 2;
    const FieldWriter w{order, at};
    w.put(wire::fre::start_address(type), r.start);
    w.put(wire::fre::info(type), fre_info::make(r.info_base_mangled & 0x1, r.num_words, code,
                                                (r.info_base_mangled & 0x80) != 0));
    at += words_off;
    for (std::uint8_t j = 0; j < r.num_words; ++j, at += r.word_size)
      endian::store(at, static_cast<std::uint64_t>(r.words[j]), r.word_size, order);
  }
  return static_cast<std::size_t>(at - out);
}

Expected<void> SectionEncoder::flush() {
  pending_ = false;
  FdeRecord rec = pending_rec_;
  const std::vector<Row>& rows = pending_rows_;
  const std::uint32_t max_start = rows.empty() ? 0 : rows.back().start;
  const FreType fre_type = layout_ == Layout::kPreserve ? pending_fre_type_
                           : max_start <= 0xff          ? FreType::kAddr1
                           : max_start <= 0xffff        ? FreType::kAddr2
                                                        : FreType::kAddr4;
  const unsigned asz = start_address_size(fre_type);
  if (fres_.size() > 0xffffffffu)
    return make_error(EncodeErrc::kNotRepresentable, wire::header::kFreLen.offset, fres_.size());
  const std::size_t len = (header_.version == Version::kV3 ? 5 : 0) + fre_bytes_of(rows, asz);
  const std::size_t begin = fres_.size();
  const std::uint8_t info = static_cast<std::uint8_t>(rec.info | static_cast<unsigned>(fre_type));
  fres_.resize(begin + len);
  write_block(rows, rec, info, fres_.data() + begin);
  std::uint32_t fre_begin = static_cast<std::uint32_t>(begin);
  std::optional<std::uint32_t> same;
  // (A v2 function without rows has no block to share.)
  if (size_.share_fre_blocks && len > 0)
    same = find_block(fres_.data() + begin, static_cast<std::uint32_t>(len), info);
  if (same) {
    fres_.resize(begin);  // an identical block is stored already: point at it
    fre_begin = *same;
  } else {
    stored_fres_ += rows.size();
    if (size_.share_fre_blocks && len > 0)
      blocks_.emplace(block_hash(fres_.data() + begin, static_cast<std::uint32_t>(len), info & 0x0f),
                      static_cast<std::uint32_t>(fdes_.size()));
  }
  rec.fre_begin = fre_begin;
  rec.num_fres = static_cast<std::uint32_t>(rows.size());
  rec.info = info;
  rec.fre_bytes = static_cast<std::uint32_t>(len);
  fdes_.push_back(rec);
  return {};
}

Expected<std::vector<std::byte>> SectionEncoder::finish() {
  if (alt_) {
    std::unique_ptr<SectionEncoder> alt = std::move(alt_);
    auto joined = finish();
    auto apart = alt->finish();
    if (joined && apart && apart->size() < joined->size()) {
      finished_fdes_ = alt->finished_fdes_;
      joined = std::move(apart);
    }
    // Ready for another section, as finish() leaves it.
    alt_ = std::move(alt);
    return joined;
  }
  if (auto ok = check_header(header_); !ok) return Unexpected{ok.error()};
  if (pending_)
    if (auto ok = flush(); !ok) return Unexpected{ok.error()};
  const bool preserve = layout_ == Layout::kPreserve;
  auto fdes = std::move(fdes_);
  auto fres = std::move(fres_);
  const std::uint64_t num_fres = stored_fres_;
  fdes_.clear();
  fres_.clear();
  blocks_.clear();
  // The next section may come from another read, whose tags mean other
  // rows: no FRE kept by tag outlives its section.
  tag_slots_.clear();
  stored_fres_ = 0;
  last_mergeable_ = false;
  added_ = 0;
  const auto n = static_cast<std::uint32_t>(fdes.size());
  finished_fdes_ = n;
  if (fres.size() > 0xffffffffu)
    return make_error(EncodeErrc::kNotRepresentable, wire::header::kFreLen.offset, fres.size());

  // FDE order: as added, or by start PC.
  const auto by_pc = [](const FdeRecord& a, const FdeRecord& b) { return a.start_pc < b.start_pc; };
  if (!preserve && !std::is_sorted(fdes.begin(), fdes.end(), by_pc))
    std::stable_sort(fdes.begin(), fdes.end(), by_pc);
  // FRE sub-section order: as added, or the recorded FRE offsets.
  if (preserve) {
    std::vector<std::uint32_t> fre_order(n);
    std::iota(fre_order.begin(), fre_order.end(), 0u);
    const auto by_offset = [&](std::uint32_t a, std::uint32_t b) {
      return fdes[a].recorded_fre_offset < fdes[b].recorded_fre_offset;
    };
    if (!std::is_sorted(fre_order.begin(), fre_order.end(), by_offset)) {
      std::stable_sort(fre_order.begin(), fre_order.end(), by_offset);
      // Added in order, so each function's FREs end where the next begin.
      std::vector<std::uint32_t> len(n);
      for (std::uint32_t i = 0; i < n; ++i)
        len[i] = static_cast<std::uint32_t>((i + 1 < n ? fdes[i + 1].fre_begin : fres.size()) - fdes[i].fre_begin);
      decltype(fres) moved;
      moved.reserve(fres.size());
      for (std::uint32_t i : fre_order) {
        const auto from = fres.begin() + fdes[i].fre_begin;
        fdes[i].fre_begin = static_cast<std::uint32_t>(moved.size());
        moved.insert(moved.end(), from, from + len[i]);
      }
      fres = std::move(moved);
    }
  }
  const std::uint64_t fde_size = fde_entry_size(header_.version);
  if (num_fres > 0xffffffffu || n * fde_size > 0xffffffffu)
    return make_error(EncodeErrc::kNotRepresentable, wire::header::kFreLen.offset, fres.size());

  // Sorted, but only claimed when no two functions overlap (relocatable
  // objects put functions of different sections at the same address).
  bool disjoint = true;
  for (std::uint32_t i = 1; i < n; ++i)
    if (fdes[i - 1].start_pc + fdes[i - 1].size > fdes[i].start_pc) disjoint = false;
  const std::uint8_t flags = preserve ? header_.flags
                                      : static_cast<std::uint8_t>((disjoint ? flags::kFdeSorted : 0) |
                                                                  flags::kFdeFuncStartPcrel);
  // The FRE bytes become the section: moved up in their own buffer to make
  // room for the head, rather than copied into a new one (for libLLVM-14 a
  // fresh 5.5 MB buffer, each page zeroed and faulted in, then the copy).
  // The buffer has room when reserve() guessed right; past its capacity it
  // grows as a vector does, its untouched tail costing address space only.
  const std::size_t head_size = kHeaderSize + n * fde_size;
  const std::size_t fres_size = fres.size();
  std::vector<std::byte> out = std::move(fres);
  out.insert(out.begin(), head_size, std::byte{0});
  const ByteOrder order = endian::order(header_.big_endian);
  {
    namespace h = wire::header;
    const FieldWriter w{order, out.data()};
    w.put(h::kMagic, kMagic);
    w.put(h::kVersion, static_cast<unsigned>(header_.version));
    w.put(h::kFlags, flags);
    w.put(h::kAbi, static_cast<unsigned>(header_.abi));
    w.put(h::kCfaFixedFpOffset, static_cast<std::uint8_t>(header_.cfa_fixed_fp_offset));
    w.put(h::kCfaFixedRaOffset, static_cast<std::uint8_t>(header_.cfa_fixed_ra_offset));
    w.put(h::kAuxhdrLen, 0);  // no auxiliary header
    w.put(h::kNumFdes, n);
    w.put(h::kNumFres, num_fres);
    w.put(h::kFreLen, fres_size);
    w.put(h::kFdeOff, 0);               // FDE sub-section right after the header
    w.put(h::kFreOff, n * fde_size);    // FRE sub-section right after the FDEs
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    const FdeRecord& f = fdes[i];
    const std::uint64_t field_at = kHeaderSize + i * fde_size;
    std::uint64_t field = f.start_pc - header_.section_address;
    if (flags & flags::kFdeFuncStartPcrel) field -= field_at;
    const FieldWriter w{order, out.data() + field_at};
    if (header_.version == Version::kV3) {
      namespace d = wire::fde_v3;
      w.put(d::kStart, field);
      w.put(d::kSize, f.size);
      w.put(d::kFreOff, f.fre_begin);
    } else {
      namespace d = wire::fde_v2;
      const auto sfield = static_cast<std::int64_t>(field);
      if (sfield < std::numeric_limits<std::int32_t>::min() || sfield > std::numeric_limits<std::int32_t>::max())
        return make_error(EncodeErrc::kNotRepresentable, field_at, field, i);
      w.put(d::kStart, field);
      w.put(d::kSize, f.size);
      w.put(d::kFreOff, f.fre_begin);
      w.put(d::kNumFres, f.num_fres);
      w.put(d::kInfo, f.info);
      w.put(d::kRepSize, f.rep_size);
      w.put(d::kPadding2, 0);
    }
  }
  return out;
}

Expected<std::vector<std::byte>> encode(const SectionSpec& spec, Layout layout) {
  return encode(spec, layout, SizeOptions{});
}

Expected<std::vector<std::byte>> encode(const SectionSpec& spec, Layout layout, SizeOptions size) {
  if (auto ok = check_header(spec); !ok) return Unexpected{ok.error()};
  const bool preserve = layout == Layout::kPreserve;
  if (spec.functions.size() > 0xffffffffu)
    return make_error(EncodeErrc::kNotRepresentable, wire::header::kNumFdes.offset, spec.functions.size());
  const auto n = static_cast<std::uint32_t>(spec.functions.size());
  // Added by start PC (kOptimize), so the FREs follow the FDE order.
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (!preserve)
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return spec.functions[a].start_pc < spec.functions[b].start_pc;
    });
  SectionEncoder enc(spec, layout, size);
  std::size_t rows = 0;
  for (const FunctionSpec& f : spec.functions) rows += f.rows.size();
  enc.reserve(n, n * 5 + rows * 8);
  for (std::uint32_t i : order)
    if (auto ok = enc.add(spec.functions[i]); !ok) return Unexpected{ok.error()};
  return enc.finish();
}

Expected<SectionSpec> merge(const std::vector<SectionSpec>& inputs, std::uint64_t output_address, Version version) {
  SectionSpec out;
  out.version = version;
  out.section_address = output_address;
  if (inputs.empty()) return out;
  const SectionSpec& first = inputs.front();
  out.abi = first.abi;
  out.big_endian = abi_big_endian(first.abi);
  out.cfa_fixed_fp_offset = first.cfa_fixed_fp_offset;
  out.cfa_fixed_ra_offset = first.cfa_fixed_ra_offset;
  for (std::uint32_t i = 0; i < inputs.size(); ++i) {
    const SectionSpec& in = inputs[i];
    if (in.abi != out.abi)
      return make_error(FormatErrc::kBadAbi, wire::header::kAbi.offset, static_cast<std::uint64_t>(in.abi), i);
    if (in.cfa_fixed_fp_offset != out.cfa_fixed_fp_offset || in.cfa_fixed_ra_offset != out.cfa_fixed_ra_offset)
      return make_error(EncodeErrc::kNotRepresentable, wire::header::kCfaFixedFpOffset.offset, i, i);
    for (const FunctionSpec& f : in.functions) {
      if (version == Version::kV2 && f.fde_type == FdeType::kFlex)
        return make_error(EncodeErrc::kNotRepresentable, 0, f.start_pc, i);
      out.functions.push_back(f);
    }
  }
  std::stable_sort(out.functions.begin(), out.functions.end(),
                   [](const FunctionSpec& a, const FunctionSpec& b) { return a.start_pc < b.start_pc; });
  for (std::uint32_t i = 1; i < out.functions.size(); ++i) {
    const FunctionSpec& a = out.functions[i - 1];
    if (a.start_pc + a.size > out.functions[i].start_pc)
      return make_error(FormatErrc::kFdesOverlap, 0, out.functions[i].start_pc, i);
  }
  return out;
}

Expected<void> to_function_spec(const Section& s, const Fde& f, FunctionSpec& fn) {
  fn.start_pc = f.start_pc;
  fn.size = f.size;
  fn.pc_type = f.pc_type;
  fn.fde_type = f.fde_type;
  // v1 has no block size; its PC-mask FDEs are x86-64 PLTs of 16 bytes.
  fn.rep_size = (s.header().version == Version::kV1 && f.pc_type == PcType::kMask) ? 16 : f.rep_size;
  fn.signal = f.signal;
  fn.pauth_key = f.pauth_key;
  fn.fre_type = f.fre_type;
  fn.fre_offset = f.fre_offset;
  fn.rows.clear();
  fn.dataword_sizes.clear();
  fn.dataword_counts.clear();
  for (const auto& fre : s.fres(f)) {
    if (!fre) return Unexpected{fre.error()};
    auto row = s.row(f, *fre);
    if (!row) return Unexpected{row.error()};
    fn.rows.push_back({fre->start_offset, *row});
    fn.dataword_sizes.push_back(fre->dataword_size);
    fn.dataword_counts.push_back(fre->dataword_count);
  }
  return {};
}

Expected<SectionSpec> to_spec(const Section& s) {
  SectionSpec spec;
  const Header& h = s.header();
  spec.version = h.version;
  spec.abi = h.abi;
  spec.big_endian = s.big_endian();
  spec.cfa_fixed_fp_offset = h.cfa_fixed_fp_offset;
  spec.cfa_fixed_ra_offset = h.cfa_fixed_ra_offset;
  spec.section_address = s.address();
  spec.flags = h.flags;
  spec.functions.reserve(h.num_fdes);
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    auto f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    FunctionSpec fn;
    if (auto ok = to_function_spec(s, *f, fn); !ok) return Unexpected{ok.error()};
    spec.functions.push_back(std::move(fn));
  }
  return spec;
}

}  // namespace sframe
