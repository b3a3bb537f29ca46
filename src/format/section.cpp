// SPDX-License-Identifier: MIT
// Zero-copy SFrame decoder: header, FDEs, FREs and their interpretation.
#include "sframe/format/section.hpp"

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
  namespace h = wire::header;
  const auto b0 = static_cast<std::uint8_t>(bytes[h::kMagic.offset]);
  const auto b1 = static_cast<std::uint8_t>(bytes[h::kMagic.offset + 1]);
  // The magic 0xdee2 read in the section's own order tells that order.
  if (b0 == 0xde && b1 == 0xe2) {
    s.big_endian_ = true;
  } else if (b0 == 0xe2 && b1 == 0xde) {
    s.big_endian_ = false;
  } else {
    return make_error(FormatErrc::kBadMagic, h::kMagic.offset, static_cast<std::uint64_t>(b0) << 8 | b1);
  }
  Header& hd = s.header_;
  const auto byte_at = [&](wire::Field f) { return static_cast<std::uint8_t>(bytes[f.offset]); };
  const auto word_at = [&](wire::Field f) { return static_cast<std::uint32_t>(s.load(f.offset, f.size)); };
  const std::uint8_t ver = byte_at(h::kVersion);
  if (!is_known_version(ver)) return make_error(FormatErrc::kBadVersion, h::kVersion.offset, ver);
  hd.version = static_cast<Version>(ver);
  hd.flags = byte_at(h::kFlags);
  const std::uint8_t abi = byte_at(h::kAbi);
  if (!is_known_abi(abi, hd.version)) return make_error(FormatErrc::kBadAbi, h::kAbi.offset, abi);
  hd.abi = static_cast<Abi>(abi);
  hd.cfa_fixed_fp_offset = static_cast<std::int8_t>(byte_at(h::kCfaFixedFpOffset));
  hd.cfa_fixed_ra_offset = static_cast<std::int8_t>(byte_at(h::kCfaFixedRaOffset));
  hd.auxhdr_len = byte_at(h::kAuxhdrLen);
  hd.num_fdes = word_at(h::kNumFdes);
  hd.num_fres = word_at(h::kNumFres);
  hd.fre_len = word_at(h::kFreLen);
  hd.fdeoff = word_at(h::kFdeOff);
  hd.freoff = word_at(h::kFreOff);

  const std::uint64_t size = bytes.size();
  const std::uint64_t hdr_end = kHeaderSize + std::uint64_t{hd.auxhdr_len};
  if (hdr_end > size) return make_error(FormatErrc::kAuxHeaderPastEnd, h::kAuxhdrLen.offset, hd.auxhdr_len);

  const std::uint64_t fdes_begin = hdr_end + hd.fdeoff;
  const std::uint64_t fdes_len = std::uint64_t{hd.num_fdes} * fde_entry_size(hd.version);
  if (!fits(fdes_begin, fdes_len, size))
    return make_error(FormatErrc::kFdeTablePastEnd, h::kFdeOff.offset, fdes_begin + fdes_len);
  const std::uint64_t fres_begin = hdr_end + hd.freoff;
  if (!fits(fres_begin, hd.fre_len, size))
    return make_error(FormatErrc::kFreSectionPastEnd, h::kFreOff.offset, fres_begin + hd.fre_len);

  s.fdes_begin_ = static_cast<std::uint32_t>(fdes_begin);
  s.fres_begin_ = static_cast<std::uint32_t>(fres_begin);
  s.fres_end_ = static_cast<std::uint32_t>(fres_begin + hd.fre_len);
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
  // Field `w` of the structure at `base`.
  const auto field = [&](std::uint64_t base, wire::Field w) { return load(base + w.offset, w.size); };
  std::uint64_t attr_at = 0;
  std::uint64_t info_at = 0;
  if (v == Version::kV3) {
    namespace d = wire::fde_v3;
    namespace a = wire::fde_attr;
    f.start_field = static_cast<std::int64_t>(field(at, d::kStart));
    f.size = static_cast<std::uint32_t>(field(at, d::kSize));
    f.fre_offset = static_cast<std::uint32_t>(field(at, d::kFreOff));
    attr_at = std::uint64_t{fres_begin_} + f.fre_offset;
    if (f.fre_offset > header_.fre_len)
      return make_error(FormatErrc::kFreOffsetPastEnd, at + d::kFreOff.offset, f.fre_offset, i);
    if (!fits(attr_at, a::kSize, fres_end_)) return make_error(FormatErrc::kFdeAttrTruncated, attr_at, f.fre_offset, i);
    f.num_fres = static_cast<std::uint32_t>(field(attr_at, a::kNumFres));
    f.info = static_cast<std::uint8_t>(field(attr_at, a::kInfo));
    f.info2 = static_cast<std::uint8_t>(field(attr_at, a::kInfo2));
    f.rep_size = static_cast<std::uint8_t>(field(attr_at, a::kRepSize));
    f.fres_begin = static_cast<std::uint32_t>(attr_at + a::kSize);
    info_at = attr_at + a::kInfo.offset;
  } else {
    namespace d = wire::fde_v2;  // v1: the same fields without kRepSize
    f.start_field = static_cast<std::int32_t>(field(at, d::kStart));
    f.size = static_cast<std::uint32_t>(field(at, d::kSize));
    f.fre_offset = static_cast<std::uint32_t>(field(at, d::kFreOff));
    f.num_fres = static_cast<std::uint32_t>(field(at, d::kNumFres));
    f.info = static_cast<std::uint8_t>(field(at, d::kInfo));
    if (v == Version::kV2) f.rep_size = static_cast<std::uint8_t>(field(at, d::kRepSize));
    if (f.fre_offset > header_.fre_len)
      return make_error(FormatErrc::kFreOffsetPastEnd, at + d::kFreOff.offset, f.fre_offset, i);
    f.fres_begin = fres_begin_ + f.fre_offset;
    info_at = at + d::kInfo.offset;
  }
  const std::uint8_t fre_type = fde_info::fre_type(f.info);
  if (fre_type > 2) return make_error(FormatErrc::kBadFreType, info_at, fre_type, i);
  f.fre_type = static_cast<FreType>(fre_type);
  f.pc_type = static_cast<PcType>(fde_info::pc_type(f.info));
  f.pauth_key = static_cast<PauthKey>(fde_info::pauth_key(f.info));
  if (v == Version::kV3) {
    f.signal = fde_info::signal_p(f.info);
    const std::uint8_t t = fde_info::fde_type(f.info2);
    if (t > 1) return make_error(FormatErrc::kBadFdeType, attr_at + wire::fde_attr::kInfo2.offset, t, i);
    f.fde_type = static_cast<FdeType>(t);
  }
  // Start PC: PC-relative to the field (errata 1 flag) or to the section start.
  std::uint64_t start = address_ + static_cast<std::uint64_t>(f.start_field);
  if (v != Version::kV1 && (header_.flags & flags::kFdeFuncStartPcrel)) start += f.start_field_offset;
  f.start_pc = start;
  return f;
}

Expected<Fre> Section::fre_covering(const Fde& fde, std::uint64_t off) const noexcept {
  const wire::Field start = wire::fre::start_address(fde.fre_type);
  const wire::Field info_field = wire::fre::info(fde.fre_type);
  const std::uint32_t words_off = wire::fre::datawords_offset(fde.fre_type);
  std::uint32_t at = fde.fres_begin;
  std::uint32_t best = 0;
  std::uint32_t best_index = kNoIndex;
  for (std::uint32_t k = 0; k < fde.num_fres; ++k) {
    if (!fits(at, words_off, fres_end_)) return make_error(FormatErrc::kFreTruncated, at, 0, fde.index, k);
    if (load(at + start.offset, start.size) > off) break;
    const auto info = static_cast<std::uint8_t>(bytes_[at + info_field.offset]);
    const unsigned code = fre_info::dataword_size_code(info);
    if (code > 2) return make_error(FormatErrc::kBadDatawordSize, at + info_field.offset, code, fde.index, k);
    best = at;
    best_index = k;
    at += words_off + (fre_info::dataword_count(info) << code);
  }
  if (best_index == kNoIndex) return make_error(LookupErrc::kPcBeforeFirstFre, fde.fres_begin, off, fde.index);
  return fre_at(best, fde.fre_type, fde.index, best_index);
}

Expected<Fre> Section::fre_at(std::uint32_t offset, FreType t, std::uint32_t fde_index,
                              std::uint32_t fre_index) const noexcept {
  const std::uint32_t words_off = wire::fre::datawords_offset(t);
  if (!fits(offset, words_off, fres_end_)) return make_error(FormatErrc::kFreTruncated, offset, 0, fde_index, fre_index);
  const wire::Field start = wire::fre::start_address(t);
  const wire::Field info = wire::fre::info(t);
  Fre r;
  r.index = fre_index;
  r.section_offset = offset;
  r.start_offset = static_cast<std::uint32_t>(load(offset + start.offset, start.size));
  r.info = static_cast<std::uint8_t>(bytes_[offset + info.offset]);
  const std::uint8_t code = fre_info::dataword_size_code(r.info);
  if (code > 2) return make_error(FormatErrc::kBadDatawordSize, offset + info.offset, code, fde_index, fre_index);
  r.dataword_size = static_cast<std::uint8_t>(1u << code);
  r.dataword_count = fre_info::dataword_count(r.info);
  const std::uint32_t words_at = offset + words_off;
  const std::uint32_t words_len = std::uint32_t{r.dataword_count} * r.dataword_size;
  if (!fits(words_at, words_len, fres_end_))
    return make_error(FormatErrc::kFreTruncated, offset, words_at + words_len, fde_index, fre_index);
  r.encoded_size = words_off + words_len;
  return r;
}

namespace {

Rule of_kind(Rule::Kind k) {
  Rule r;
  r.kind = k;
  return r;
}

}  // namespace

Expected<WireRow> Section::wire_row(const Fde& fde, const Fre& fre) const noexcept {
  WireRow w;
  w.fre = fre;
  const std::uint32_t n = fre.dataword_count;
  const auto bad_count = [&] {
    return make_error(FormatErrc::kBadDatawordCount, fre.section_offset, n, fde.index, fre.index);
  };
  // Errata 2: no data words = RA undefined, the outermost frame.
  if (n == 0) return w;
  if (fde.fde_type == FdeType::kFlex) {
    // Pairs of (control, offset) for CFA, RA, FP; a lone padding word may
    // stand for the RA pair when an FP pair follows (spec v3 §3.2).
    if (n < 2) return bad_count();
    const std::uint32_t cfa_ctl = dataword(fre, 0);
    if (!flex::reg_p(cfa_ctl))
      return make_error(FormatErrc::kBadFlexControl, fre.section_offset, cfa_ctl, fde.index, fre.index);
    if (n == 2) return w;
    std::uint32_t k = 2;
    if (dataword(fre, 2) == 0) {
      w.ra = WireRow::Slot::kPadding;
      k = 3;
    } else {
      if (n < 4) return bad_count();
      w.ra = WireRow::Slot::kWord;
      w.ra_word = 2;
      k = 4;
    }
    if (n == k) {
      if (k == 3) return bad_count();  // padding must be followed by an FP pair
      return w;
    }
    if (n != k + 2) return bad_count();
    if (dataword(fre, k) == 0) return make_error(FormatErrc::kBadFlexControl, fre.section_offset, 0, fde.index, fre.index);
    w.fp = WireRow::Slot::kWord;
    w.fp_word = static_cast<std::uint8_t>(k);
    return w;
  }
  // Default FDE type: CFA offset in word 0; then RA (unless fixed by the
  // header) and FP (unless fixed), in that order (spec §3.1).
  const bool ra_tracked = header_.cfa_fixed_ra_offset == 0;
  const bool fp_tracked = header_.cfa_fixed_fp_offset == 0;
  if (n > 1u + ra_tracked + fp_tracked) return bad_count();
  std::uint8_t k = 1;
  if (ra_tracked && k < n) {
    // SFRAME_FRE_RA_OFFSET_INVALID (errata 1) only exists from v2 on.
    const bool pad = sdataword(fre, k) == kRaOffsetInvalid && header_.version != Version::kV1;
    w.ra = pad ? WireRow::Slot::kPadding : WireRow::Slot::kWord;
    w.ra_word = k++;
  }
  if (fp_tracked && k < n) {
    w.fp = WireRow::Slot::kWord;
    w.fp_word = k;
  }
  return w;
}

Expected<FrameRow> Section::row(const Fde& fde, const Fre& fre) const noexcept {
  auto wire = wire_row(fde, fre);
  if (!wire) return Unexpected{wire.error()};
  const WireRow& w = *wire;
  FrameRow row;
  row.ra_mangled = fre.mangled_ra();
  if (fre.dataword_count == 0) {
    // Errata 2: the outermost frame.
    row.cfa = of_kind(Rule::Kind::kUndefined);
    row.ra = of_kind(Rule::Kind::kUndefined);
    return row;
  }
  const bool s390 = header_.abi == Abi::kS390xBig;
  const auto cfa_offset = [&](std::uint32_t k) {
    const std::int32_t v = sdataword(fre, k);
    return s390 ? s390x::decode_cfa_offset(v) : v;
  };
  const bool flex = fde.fde_type == FdeType::kFlex;
  const bool v2_s390 = s390 && header_.version == Version::kV2;
  // A saved value: its word(s), or, stored as no word or a padding word, the
  // header's fixed CFA offset when it has one, else unchanged. This is the
  // one place that applies sfh_cfa_fixed_{ra,fp}_offset (spec §2.2).
  const auto saved = [&](WireRow::Slot slot, std::uint32_t k, std::int8_t fixed) {
    if (slot != WireRow::Slot::kWord)
      return fixed != 0 ? make_rule(Rule::Base::kCfa, 0, fixed, true) : of_kind(Rule::Kind::kUnchanged);
    if (flex) {
      const std::uint32_t ctl = dataword(fre, k);
      const bool reg = flex::reg_p(ctl);
      return make_rule(reg ? Rule::Base::kRegister : Rule::Base::kCfa,
                       reg ? static_cast<std::uint16_t>(flex::regnum(ctl)) : 0, sdataword(fre, k + 1),
                       flex::deref_p(ctl));
    }
    const std::int32_t v = sdataword(fre, k);
    if (v2_s390 && s390x::v2_offset_is_regnum(v))
      return make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(s390x::v2_offset_regnum(v)), 0, false);
    return make_rule(Rule::Base::kCfa, 0, v, true);
  };
  if (flex) {
    const std::uint32_t cfa_ctl = dataword(fre, 0);
    row.cfa = make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(flex::regnum(cfa_ctl)), cfa_offset(1),
                        flex::deref_p(cfa_ctl));
  } else {
    const AbiRegs regs = abi_regs(header_.abi);
    row.cfa = make_rule(Rule::Base::kRegister, fre.cfa_base_sp() ? regs.sp : regs.fp, cfa_offset(0), false);
  }
  row.ra = saved(w.ra, w.ra_word, header_.cfa_fixed_ra_offset);
  row.fp = saved(w.fp, w.fp_word, header_.cfa_fixed_fp_offset);
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
