// SPDX-License-Identifier: MIT
// Zero-copy SFrame decoder: header, FDEs, FREs and their interpretation.
#include "sframe/section.hpp"

#include <bit>

namespace sframe {
namespace {

// Overflow-safe "does [off, off+len) fit in [0, size)?"
constexpr bool fits(std::uint64_t off, std::uint64_t len, std::uint64_t size) noexcept {
  return off <= size && len <= size - off;
}

}  // namespace

Expected<Section> Section::parse(std::span<const std::byte> bytes, std::uint64_t section_address) {
  if (bytes.size() < kHeaderSize) return make_error(FormatErrc::kTruncatedHeader, 0, bytes.size());
  Section s;
  s.bytes_ = bytes;
  s.address_ = section_address;
  const auto b0 = static_cast<std::uint8_t>(bytes[0]);
  const auto b1 = static_cast<std::uint8_t>(bytes[1]);
  // The magic 0xdee2 read in the section's own order tells that order.
  if (b0 == 0xde && b1 == 0xe2) {
    s.big_endian_ = true;
  } else if (b0 == 0xe2 && b1 == 0xde) {
    s.big_endian_ = false;
  } else {
    return make_error(FormatErrc::kBadMagic, 0, static_cast<std::uint64_t>(b0) << 8 | b1);
  }
  Header& h = s.header_;
  const auto ver = static_cast<std::uint8_t>(bytes[2]);
  if (!is_known_version(ver)) return make_error(FormatErrc::kBadVersion, 2, ver);
  h.version = static_cast<Version>(ver);
  h.flags = static_cast<std::uint8_t>(bytes[3]);
  const auto abi = static_cast<std::uint8_t>(bytes[4]);
  if (!is_known_abi(abi, h.version)) return make_error(FormatErrc::kBadAbi, 4, abi);
  h.abi = static_cast<Abi>(abi);
  h.cfa_fixed_fp_offset = static_cast<std::int8_t>(bytes[5]);
  h.cfa_fixed_ra_offset = static_cast<std::int8_t>(bytes[6]);
  h.auxhdr_len = static_cast<std::uint8_t>(bytes[7]);
  h.num_fdes = static_cast<std::uint32_t>(s.load(8, 4));
  h.num_fres = static_cast<std::uint32_t>(s.load(12, 4));
  h.fre_len = static_cast<std::uint32_t>(s.load(16, 4));
  h.fdeoff = static_cast<std::uint32_t>(s.load(20, 4));
  h.freoff = static_cast<std::uint32_t>(s.load(24, 4));

  const std::uint64_t size = bytes.size();
  const std::uint64_t hdr_end = kHeaderSize + std::uint64_t{h.auxhdr_len};
  if (hdr_end > size) return make_error(FormatErrc::kAuxHeaderPastEnd, 7, h.auxhdr_len);

  const std::uint64_t fdes_begin = hdr_end + h.fdeoff;
  const std::uint64_t fdes_len = std::uint64_t{h.num_fdes} * fde_entry_size(h.version);
  if (!fits(fdes_begin, fdes_len, size)) return make_error(FormatErrc::kFdeTablePastEnd, 20, fdes_begin + fdes_len);
  const std::uint64_t fres_begin = hdr_end + h.freoff;
  if (!fits(fres_begin, h.fre_len, size)) return make_error(FormatErrc::kFreSectionPastEnd, 24, fres_begin + h.fre_len);

  s.fdes_begin_ = static_cast<std::uint32_t>(fdes_begin);
  s.fres_begin_ = static_cast<std::uint32_t>(fres_begin);
  s.fres_end_ = static_cast<std::uint32_t>(fres_begin + h.fre_len);
  s.used_size_ = std::max<std::uint64_t>(fdes_begin + fdes_len, s.fres_end_);
  return s;
}

Expected<Fde> Section::fde(std::uint32_t i) const noexcept {
  if (i >= header_.num_fdes) return make_error(FormatErrc::kFdeIndexOutOfRange, fdes_begin_, i, i);
  const Version v = header_.version;
  const std::uint64_t at = fdes_begin_ + std::uint64_t{i} * fde_entry_size(v);
  Fde f;
  f.index = i;
  f.start_field_offset = static_cast<std::uint32_t>(at);
  std::uint64_t attr_at = 0;
  if (v == Version::kV3) {
    f.start_field = static_cast<std::int64_t>(load(at, 8));
    f.size = static_cast<std::uint32_t>(load(at + 8, 4));
    f.fre_offset = static_cast<std::uint32_t>(load(at + 12, 4));
    attr_at = std::uint64_t{fres_begin_} + f.fre_offset;
    if (f.fre_offset > header_.fre_len) return make_error(FormatErrc::kFreOffsetPastEnd, at + 12, f.fre_offset, i);
    if (!fits(attr_at, kFdeAttrSizeV3, fres_end_))
      return make_error(FormatErrc::kFdeAttrTruncated, attr_at, f.fre_offset, i);
    f.num_fres = static_cast<std::uint32_t>(load(attr_at, 2));
    f.info = static_cast<std::uint8_t>(bytes_[attr_at + 2]);
    f.info2 = static_cast<std::uint8_t>(bytes_[attr_at + 3]);
    f.rep_size = static_cast<std::uint8_t>(bytes_[attr_at + 4]);
    f.fres_begin = static_cast<std::uint32_t>(attr_at + kFdeAttrSizeV3);
  } else {
    f.start_field = static_cast<std::int32_t>(load(at, 4));
    f.size = static_cast<std::uint32_t>(load(at + 4, 4));
    f.fre_offset = static_cast<std::uint32_t>(load(at + 8, 4));
    f.num_fres = static_cast<std::uint32_t>(load(at + 12, 4));
    f.info = static_cast<std::uint8_t>(bytes_[at + 16]);
    if (v == Version::kV2) f.rep_size = static_cast<std::uint8_t>(bytes_[at + 17]);
    if (f.fre_offset > header_.fre_len) return make_error(FormatErrc::kFreOffsetPastEnd, at + 8, f.fre_offset, i);
    f.fres_begin = fres_begin_ + f.fre_offset;
  }
  const std::uint8_t fre_type = fde_info::fre_type(f.info);
  if (fre_type > 2) return make_error(FormatErrc::kBadFreType, v == Version::kV3 ? attr_at + 2 : at + 16, fre_type, i);
  f.fre_type = static_cast<FreType>(fre_type);
  f.pc_type = static_cast<PcType>(fde_info::pc_type(f.info));
  f.pauth_key = static_cast<PauthKey>(fde_info::pauth_key(f.info));
  if (v == Version::kV3) {
    f.signal = fde_info::signal_p(f.info);
    const std::uint8_t t = fde_info::fde_type(f.info2);
    if (t > 1) return make_error(FormatErrc::kBadFdeType, attr_at + 3, t, i);
    f.fde_type = static_cast<FdeType>(t);
  }
  // Start PC: PC-relative to the field (errata 1 flag) or to the section start.
  std::uint64_t start = address_ + static_cast<std::uint64_t>(f.start_field);
  if (v != Version::kV1 && (header_.flags & flags::kFdeFuncStartPcrel)) start += f.start_field_offset;
  f.start_pc = start;
  return f;
}

Expected<Fre> Section::fre_covering(const Fde& fde, std::uint64_t off) const noexcept {
  const unsigned asz = start_address_size(fde.fre_type);
  std::uint32_t at = fde.fres_begin;
  std::uint32_t best = 0;
  std::uint32_t best_index = kNoIndex;
  for (std::uint32_t k = 0; k < fde.num_fres; ++k) {
    if (!fits(at, asz + 1u, fres_end_)) return make_error(FormatErrc::kFreTruncated, at, 0, fde.index, k);
    if (load(at, asz) > off) break;
    const auto info = static_cast<std::uint8_t>(bytes_[at + asz]);
    const unsigned code = fre_info::dataword_size_code(info);
    if (code > 2) return make_error(FormatErrc::kBadDatawordSize, at + asz, code, fde.index, k);
    best = at;
    best_index = k;
    at += asz + 1u + (fre_info::dataword_count(info) << code);
  }
  if (best_index == kNoIndex) return make_error(LookupErrc::kPcBeforeFirstFre, fde.fres_begin, off, fde.index);
  return fre_at(best, fde.fre_type, fde.index, best_index);
}

Expected<Fre> Section::fre_at(std::uint32_t offset, FreType t, std::uint32_t fde_index,
                              std::uint32_t fre_index) const noexcept {
  const unsigned asz = start_address_size(t);
  if (!fits(offset, asz + 1u, fres_end_)) return make_error(FormatErrc::kFreTruncated, offset, 0, fde_index, fre_index);
  Fre r;
  r.index = fre_index;
  r.section_offset = offset;
  r.start_offset = static_cast<std::uint32_t>(load(offset, asz));
  r.info = static_cast<std::uint8_t>(bytes_[offset + asz]);
  const std::uint8_t code = fre_info::dataword_size_code(r.info);
  if (code > 2) return make_error(FormatErrc::kBadDatawordSize, offset + asz, code, fde_index, fre_index);
  r.dataword_size = static_cast<std::uint8_t>(1u << code);
  r.dataword_count = fre_info::dataword_count(r.info);
  const std::uint32_t words_at = offset + asz + 1;
  const std::uint32_t words_len = std::uint32_t{r.dataword_count} * r.dataword_size;
  if (!fits(words_at, words_len, fres_end_))
    return make_error(FormatErrc::kFreTruncated, offset, words_at + words_len, fde_index, fre_index);
  r.encoded_size = asz + 1 + words_len;
  return r;
}

namespace {

Rule expr(Rule::Base base, std::uint16_t regnum, std::int32_t offset, bool deref, bool from_header = false) {
  Rule r;
  r.kind = Rule::Kind::kExpr;
  r.base = base;
  r.regnum = regnum;
  r.offset = offset;
  r.deref = deref;
  r.from_header = from_header;
  return r;
}

Rule of_kind(Rule::Kind k) {
  Rule r;
  r.kind = k;
  return r;
}

// A saved-register rule fixed by the header, or "unchanged" when not fixed.
Rule fixed_or_unchanged(std::int8_t fixed) {
  return fixed != 0 ? expr(Rule::Base::kCfa, 0, fixed, true, true) : of_kind(Rule::Kind::kUnchanged);
}

}  // namespace

Expected<FrameRow> Section::row(const Fde& fde, const Fre& fre) const noexcept {
  FrameRow row;
  row.ra_mangled = fre.mangled_ra();
  const std::uint32_t n = fre.dataword_count;
  const AbiRegs regs = abi_regs(header_.abi);
  const bool s390 = header_.abi == Abi::kS390xBig;
  const auto bad_count = [&] {
    return make_error(FormatErrc::kBadDatawordCount, fre.section_offset, n, fde.index, fre.index);
  };
  if (n == 0) {
    // Errata 2: no data words = RA undefined, the outermost frame.
    row.ra_undefined = true;
    row.cfa = of_kind(Rule::Kind::kUndefined);
    row.ra = of_kind(Rule::Kind::kUndefined);
    row.fp = of_kind(Rule::Kind::kUnchanged);
    return row;
  }
  const auto cfa_offset = [&](std::uint32_t k) {
    const std::int32_t w = sdataword(fre, k);
    return s390 ? s390x::decode_cfa_offset(w) : w;
  };

  if (fde.fde_type == FdeType::kFlex) {
    // Pairs of (control, offset) for CFA, RA, FP; a lone padding word may
    // stand for the RA pair when an FP pair follows (spec v3 §3.2).
    if (n < 2) return bad_count();
    const std::uint32_t cfa_ctl = dataword(fre, 0);
    if (!flex::reg_p(cfa_ctl))
      return make_error(FormatErrc::kBadFlexControl, fre.section_offset, cfa_ctl, fde.index, fre.index);
    row.cfa = expr(Rule::Base::kRegister, static_cast<std::uint16_t>(flex::regnum(cfa_ctl)), cfa_offset(1),
                   flex::deref_p(cfa_ctl));
    const auto pair_rule = [&](std::uint32_t k) {
      const std::uint32_t ctl = dataword(fre, k);
      const bool reg = flex::reg_p(ctl);
      return expr(reg ? Rule::Base::kRegister : Rule::Base::kCfa,
                  reg ? static_cast<std::uint16_t>(flex::regnum(ctl)) : 0, sdataword(fre, k + 1), flex::deref_p(ctl));
    };
    std::uint32_t k = 2;
    if (n == 2) {
      row.ra = fixed_or_unchanged(header_.cfa_fixed_ra_offset);
      row.fp = fixed_or_unchanged(header_.cfa_fixed_fp_offset);
      return row;
    }
    if (dataword(fre, 2) == 0) {
      row.ra = of_kind(Rule::Kind::kPadding);
      k = 3;
    } else {
      if (n < 4) return bad_count();
      row.ra = pair_rule(2);
      k = 4;
    }
    if (n == k) {
      if (k == 3) return bad_count();  // padding must be followed by an FP pair
      row.fp = fixed_or_unchanged(header_.cfa_fixed_fp_offset);
      return row;
    }
    if (n != k + 2) return bad_count();
    if (dataword(fre, k) == 0) return make_error(FormatErrc::kBadFlexControl, fre.section_offset, 0, fde.index, fre.index);
    row.fp = pair_rule(k);
    return row;
  }

  // Default FDE type: CFA = SP/FP + word 0; then RA (unless fixed by the
  // header) and FP (unless fixed), in that order (spec §3.1).
  row.cfa = expr(Rule::Base::kRegister, fre.cfa_base_sp() ? regs.sp : regs.fp, cfa_offset(0), false);
  const bool ra_tracked = header_.cfa_fixed_ra_offset == 0;
  const bool fp_tracked = header_.cfa_fixed_fp_offset == 0;
  const std::uint32_t max = 1u + ra_tracked + fp_tracked;
  if (n > max) return bad_count();
  const bool v2_s390 = s390 && header_.version == Version::kV2;
  const auto saved = [&](std::uint32_t k) {
    const std::int32_t w = sdataword(fre, k);
    if (v2_s390 && s390x::v2_offset_is_regnum(w))
      return expr(Rule::Base::kRegister, static_cast<std::uint16_t>(s390x::v2_offset_regnum(w)), 0, false);
    return expr(Rule::Base::kCfa, 0, w, true);
  };
  std::uint32_t k = 1;
  if (!ra_tracked) {
    row.ra = expr(Rule::Base::kCfa, 0, header_.cfa_fixed_ra_offset, true, true);
  } else if (k < n) {
    // SFRAME_FRE_RA_OFFSET_INVALID (errata 1) only exists from v2 on.
    row.ra = (sdataword(fre, k) == kRaOffsetInvalid && header_.version != Version::kV1) ? of_kind(Rule::Kind::kPadding)
                                                                                  : saved(k);
    ++k;
  } else {
    row.ra = of_kind(Rule::Kind::kUnchanged);
  }
  if (!fp_tracked) {
    row.fp = expr(Rule::Base::kCfa, 0, header_.cfa_fixed_fp_offset, true, true);
  } else if (k < n) {
    row.fp = saved(k);
  } else {
    row.fp = of_kind(Rule::Kind::kUnchanged);
  }
  return row;
}

FreIterator::FreIterator(const Section* s, const Fde& fde) noexcept
    : s_(s), fde_index_(fde.index), count_(fde.num_fres), offset_(fde.fres_begin), type_(fde.fre_type),
      done_(fde.num_fres == 0) {
  if (!done_) decode();
}

void FreIterator::decode() noexcept {
  cur_ = s_->fre_at(offset_, type_, fde_index_, next_);
  if (cur_) offset_ += cur_->encoded_size;
}

FreIterator& FreIterator::operator++() noexcept {
  if (!cur_ || ++next_ >= count_) {
    done_ = true;
    return *this;
  }
  decode();
  return *this;
}

}  // namespace sframe
