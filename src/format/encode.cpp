// SFrame v2/v3 encoder: rows to FREs with the smallest (or the recorded)
// encodings, then header, FDE sub-section and FRE sub-section.
#include "sframe/encode.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

namespace sframe {
namespace {

// One data word before sizing: offsets are signed, FLEX control words unsigned.
struct Word {
  std::int64_t value;
  bool control;
};

struct EncodedRow {
  std::uint32_t start;
  std::uint8_t info_base_mangled;  // bit 0 and bit 7 of the FRE info byte
  std::vector<Word> words;
};

bool fits(const Word& w, unsigned size) {
  const unsigned bits = 8 * size;
  if (w.control) return w.value >= 0 && (bits == 32 || w.value < (std::int64_t{1} << bits));
  if (bits == 32) return w.value >= std::numeric_limits<std::int32_t>::min() && w.value <= std::numeric_limits<std::int32_t>::max();
  const std::int64_t lim = std::int64_t{1} << (bits - 1);
  return w.value >= -lim && w.value < lim;
}

unsigned smallest_size(const std::vector<Word>& words) {
  for (unsigned size : {1u, 2u, 4u})
    if (std::all_of(words.begin(), words.end(), [&](const Word& w) { return fits(w, size); })) return size;
  return 0;
}

class Encoder {
 public:
  Encoder(const SectionSpec& spec, std::uint32_t fde, std::uint32_t row)
      : spec_(spec), regs_(abi_regs(spec.abi)), fde_(fde), row_(row) {}

  Unexpected not_representable(std::uint64_t what = 0) const {
    return make_error(Errc::kNotRepresentable, 0, what, fde_, row_);
  }

  // s390x stores CFA offsets adjusted and scaled (errata 1); they must divide.
  Expected<std::int64_t> stored_cfa_offset(std::int32_t off) const {
    if (spec_.abi != Abi::kS390xBig) return std::int64_t{off};
    const std::int64_t adj = std::int64_t{off} + s390x::kCfaOffsetAdjustment;
    if (adj % s390x::kCfaOffsetAlignment != 0) return not_representable(static_cast<std::uint64_t>(off));
    return adj / s390x::kCfaOffsetAlignment;
  }

  // A rule that needs no data word: the header's fixed offset, or unchanged
  // when the header fixes nothing.
  static bool implicit(const Rule& r, std::int8_t fixed) {
    if (fixed != 0)
      return r.kind == Rule::Kind::kExpr && r.from_header && r.base == Rule::Base::kCfa && r.deref &&
             r.offset == fixed;
    return r.kind == Rule::Kind::kUnchanged;
  }

  Expected<std::vector<Word>> default_words(const FrameRow& row, std::uint8_t& base_bit) const {
    const Rule& c = row.cfa;
    if (c.kind != Rule::Kind::kExpr || c.base != Rule::Base::kRegister || c.deref ||
        (c.regnum != regs_.sp && c.regnum != regs_.fp))
      return not_representable();
    base_bit = c.regnum == regs_.sp ? 1 : 0;
    auto off = stored_cfa_offset(c.offset);
    if (!off) return Unexpected{off.error()};
    std::vector<Word> words{{*off, false}};
    const bool v2_s390 = spec_.abi == Abi::kS390xBig && spec_.version == Version::kV2;
    // A saved-register rule as a data word: a CFA slot, or (s390x v2) a
    // register number tagged with bit 0.
    const auto slot = [&](const Rule& r) -> Expected<Word> {
      if (r.kind == Rule::Kind::kExpr && !r.from_header && r.base == Rule::Base::kCfa && r.deref) {
        if (v2_s390 && (r.offset & 1)) return not_representable(static_cast<std::uint64_t>(r.offset));
        return Word{r.offset, false};
      }
      if (v2_s390 && r.kind == Rule::Kind::kExpr && r.base == Rule::Base::kRegister && !r.deref && r.offset == 0)
        return Word{(std::int64_t{r.regnum} << 1) | 1, false};
      return not_representable();
    };
    std::optional<Word> ra, fp;
    if (!implicit(row.ra, spec_.cfa_fixed_ra_offset)) {
      if (spec_.cfa_fixed_ra_offset != 0) return not_representable();
      if (row.ra.kind == Rule::Kind::kPadding) {
        ra = Word{kRaOffsetInvalid, false};
      } else {
        auto w = slot(row.ra);
        if (!w) return Unexpected{w.error()};
        // 0 reads back as SFRAME_FRE_RA_OFFSET_INVALID.
        if (w->value == kRaOffsetInvalid) return not_representable();
        ra = *w;
      }
    }
    if (!implicit(row.fp, spec_.cfa_fixed_fp_offset)) {
      if (spec_.cfa_fixed_fp_offset != 0) return not_representable();
      auto w = slot(row.fp);
      if (!w) return Unexpected{w.error()};
      fp = *w;
    }
    if (fp && spec_.cfa_fixed_ra_offset == 0 && !ra) return not_representable();  // use a padding RA
    if (ra) words.push_back(*ra);
    if (fp) words.push_back(*fp);
    return words;
  }

  Expected<std::vector<Word>> flex_words(const FrameRow& row, std::uint8_t& base_bit) const {
    const Rule& c = row.cfa;
    if (c.kind != Rule::Kind::kExpr || c.base != Rule::Base::kRegister) return not_representable();
    // The control word names the base; GNU as leaves fre_cfa_base_reg_id 0.
    base_bit = 0;
    auto off = stored_cfa_offset(c.offset);
    if (!off) return Unexpected{off.error()};
    std::vector<Word> words{{control(c), true}, {*off, false}};
    const auto pair = [&](const Rule& r) -> Expected<std::pair<Word, Word>> {
      if (r.kind != Rule::Kind::kExpr || r.from_header) return not_representable();
      const std::int64_t ctl = control(r);
      if (ctl == 0) return not_representable();  // 0 is the padding word
      return std::pair{Word{ctl, true}, Word{r.offset, false}};
    };
    const bool ra_none = implicit(row.ra, spec_.cfa_fixed_ra_offset);
    const bool fp_none = implicit(row.fp, spec_.cfa_fixed_fp_offset);
    if (!fp_none) {
      auto fp = pair(row.fp);
      if (!fp) return Unexpected{fp.error()};
      if (row.ra.kind == Rule::Kind::kPadding) {
        words.push_back({0, true});
      } else {
        auto ra = pair(row.ra);
        if (!ra) return Unexpected{ra.error()};
        words.push_back(ra->first);
        words.push_back(ra->second);
      }
      words.push_back(fp->first);
      words.push_back(fp->second);
    } else if (!ra_none) {
      auto ra = pair(row.ra);
      if (!ra) return Unexpected{ra.error()};
      words.push_back(ra->first);
      words.push_back(ra->second);
    }
    return words;
  }

  Expected<EncodedRow> row(const FunctionSpec& f, const RowSpec& r) const {
    EncodedRow out;
    out.start = r.start_offset;
    std::uint8_t base_bit = 0;
    if (!r.row.ra_undefined) {
      auto w = f.fde_type == FdeType::kFlex ? flex_words(r.row, base_bit) : default_words(r.row, base_bit);
      if (!w) return Unexpected{w.error()};
      out.words = std::move(*w);
    }
    out.info_base_mangled = static_cast<std::uint8_t>(base_bit | (r.row.ra_mangled ? 0x80 : 0));
    return out;
  }

 private:
  static std::int64_t control(const Rule& r) {
    const bool reg = r.base == Rule::Base::kRegister;
    return (reg ? (std::int64_t{r.regnum} << 3) | 1 : 0) | (r.deref ? 2 : 0);
  }

  const SectionSpec& spec_;
  AbiRegs regs_;
  std::uint32_t fde_;
  std::uint32_t row_;
};

class Writer {
 public:
  explicit Writer(bool big) : big_(big) {}
  void put(std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned shift = 8 * (big_ ? n - 1 - i : i);
      bytes_.push_back(static_cast<std::byte>((v >> shift) & 0xff));
    }
  }
  void put_at(std::size_t at, std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      const unsigned shift = 8 * (big_ ? n - 1 - i : i);
      bytes_[at + i] = static_cast<std::byte>((v >> shift) & 0xff);
    }
  }
  std::size_t size() const { return bytes_.size(); }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  bool big_;
  std::vector<std::byte> bytes_;
};

struct EncodedFunction {
  std::vector<std::byte> fre_bytes;  // v3: attribute + FREs
  std::uint32_t num_fres = 0;
  FreType fre_type{};
};

Expected<EncodedFunction> encode_function(const SectionSpec& spec, const FunctionSpec& f, std::uint32_t index,
                                          bool preserve) {
  if (f.fde_type == FdeType::kFlex && spec.version != Version::kV3)
    return make_error(Errc::kNotRepresentable, 0, 1, index);
  // Enum fields of the model come from the caller: out-of-range values would
  // spill into other bits of the info bytes.
  if (static_cast<unsigned>(f.pc_type) > 1 || static_cast<unsigned>(f.fde_type) > 1 ||
      static_cast<unsigned>(f.pauth_key) > 1 || (preserve && static_cast<unsigned>(f.fre_type) > 2))
    return make_error(Errc::kNotRepresentable, 0, 2, index);
  // What validate(kStrict) requires of an FDE (spec §2.3): a PC-mask block
  // size, a function range inside the address space, and (below) row starts
  // inside the function or block.
  if (f.pc_type == PcType::kMask && f.rep_size == 0) return make_error(Errc::kNotRepresentable, 0, 0, index);
  if (f.start_pc + f.size < f.start_pc) return make_error(Errc::kNotRepresentable, 0, f.start_pc, index);
  const std::uint64_t limit = f.pc_type == PcType::kMask ? f.rep_size : f.size;
  std::vector<EncodedRow> rows;
  rows.reserve(f.rows.size());
  for (std::uint32_t k = 0; k < f.rows.size(); ++k) {
    if (k > 0 && f.rows[k].start_offset <= f.rows[k - 1].start_offset)
      return make_error(Errc::kNotRepresentable, 0, f.rows[k].start_offset, index, k);
    // A zero-size function may still carry one row at offset 0.
    if (f.rows[k].start_offset >= limit && !(f.rows[k].start_offset == 0 && limit == 0))
      return make_error(Errc::kNotRepresentable, 0, f.rows[k].start_offset, index, k);
    if (!preserve && k > 0 && f.rows[k].row == f.rows[k - 1].row) continue;  // same rules: nothing to say
    auto r = Encoder(spec, index, k).row(f, f.rows[k]);
    if (!r) return Unexpected{r.error()};
    if (r->words.size() > kMaxDatawords) return make_error(Errc::kNotRepresentable, 0, r->words.size(), index, k);
    rows.push_back(std::move(*r));
  }
  EncodedFunction out;
  const std::uint32_t max_start = rows.empty() ? 0 : rows.back().start;
  out.fre_type = preserve ? f.fre_type
                 : max_start <= 0xff ? FreType::kAddr1
                 : max_start <= 0xffff ? FreType::kAddr2
                                       : FreType::kAddr4;
  const unsigned asz = start_address_size(out.fre_type);
  if (asz < 4 && max_start >> (8 * asz)) return make_error(Errc::kNotRepresentable, 0, max_start, index);
  Writer w(spec.big_endian);
  if (spec.version == Version::kV3) {
    if (rows.size() > 0xffff) return make_error(Errc::kNotRepresentable, 0, rows.size(), index);
    w.put(rows.size(), 2);
    const std::uint8_t info = static_cast<std::uint8_t>(static_cast<unsigned>(out.fre_type) |
                                                        (static_cast<unsigned>(f.pc_type) << 4) |
                                                        (static_cast<unsigned>(f.pauth_key) << 5) | (f.signal ? 0x80 : 0));
    w.put(info, 1);
    w.put(static_cast<unsigned>(f.fde_type), 1);
    w.put(f.rep_size, 1);
  }
  for (std::uint32_t k = 0; k < rows.size(); ++k) {
    const EncodedRow& r = rows[k];
    unsigned size = smallest_size(r.words);
    if (preserve && k < f.dataword_sizes.size() && f.dataword_sizes[k] >= size) {
      size = f.dataword_sizes[k];
      if (size != 1 && size != 2 && size != 4) return make_error(Errc::kNotRepresentable, 0, size, index, k);
    }
    if (size == 0) return make_error(Errc::kNotRepresentable, 0, 0, index, k);
    const unsigned code = size == 1 ? 0 : size == 2 ? 1 : 2;
    w.put(r.start, asz);
    w.put(static_cast<std::uint8_t>((r.info_base_mangled & 0x81) | (r.words.size() << 1) | (code << 5)), 1);
    for (const Word& word : r.words) w.put(static_cast<std::uint64_t>(word.value), size);
  }
  out.num_fres = static_cast<std::uint32_t>(rows.size());
  out.fre_bytes = w.take();
  return out;
}

}  // namespace

Expected<std::vector<std::byte>> encode(const SectionSpec& spec, Layout layout) {
  if (spec.version != Version::kV2 && spec.version != Version::kV3)
    return make_error(Errc::kBadVersion, 2, static_cast<std::uint64_t>(spec.version));
  if (!is_known_abi(static_cast<std::uint8_t>(spec.abi), spec.version))
    return make_error(Errc::kBadAbi, 4, static_cast<std::uint64_t>(spec.abi));
  const bool preserve = layout == Layout::kPreserve;
  const std::uint32_t n = static_cast<std::uint32_t>(spec.functions.size());
  if (spec.functions.size() > 0xffffffffu) return make_error(Errc::kNotRepresentable, 8, spec.functions.size());

  // FDE order: as recorded, or by start PC.
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (!preserve)
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return spec.functions[a].start_pc < spec.functions[b].start_pc;
    });
  std::vector<EncodedFunction> enc(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    auto e = encode_function(spec, spec.functions[order[i]], i, preserve);
    if (!e) return Unexpected{e.error()};
    enc[i] = std::move(*e);
  }
  // FRE sub-section order: FDE order, or the recorded FRE offsets.
  std::vector<std::uint32_t> fre_order(n);
  std::iota(fre_order.begin(), fre_order.end(), 0u);
  if (preserve)
    std::stable_sort(fre_order.begin(), fre_order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return spec.functions[order[a]].fre_offset < spec.functions[order[b]].fre_offset;
    });
  std::vector<std::uint32_t> fre_off(n);
  std::uint64_t fre_len = 0, num_fres = 0;
  for (std::uint32_t i : fre_order) {
    fre_off[i] = static_cast<std::uint32_t>(fre_len);
    fre_len += enc[i].fre_bytes.size();
    num_fres += enc[i].num_fres;
  }
  const std::uint64_t fde_size = fde_entry_size(spec.version);
  if (fre_len > 0xffffffffu || num_fres > 0xffffffffu || n * fde_size > 0xffffffffu)
    return make_error(Errc::kNotRepresentable, 16, fre_len);

  // Sorted, but only claimed when no two functions overlap (relocatable
  // objects put functions of different sections at the same address).
  bool disjoint = true;
  for (std::uint32_t i = 1; i < n; ++i) {
    const FunctionSpec& a = spec.functions[order[i - 1]];
    if (a.start_pc + a.size > spec.functions[order[i]].start_pc) disjoint = false;
  }
  const std::uint8_t flags = preserve ? spec.flags
                                      : static_cast<std::uint8_t>((disjoint ? flags::kFdeSorted : 0) |
                                                                  flags::kFdeFuncStartPcrel);
  Writer w(spec.big_endian);
  w.put(kMagic, 2);
  w.put(static_cast<unsigned>(spec.version), 1);
  w.put(flags, 1);
  w.put(static_cast<unsigned>(spec.abi), 1);
  w.put(static_cast<std::uint8_t>(spec.cfa_fixed_fp_offset), 1);
  w.put(static_cast<std::uint8_t>(spec.cfa_fixed_ra_offset), 1);
  w.put(0, 1);  // no auxiliary header
  w.put(n, 4);
  w.put(num_fres, 4);
  w.put(fre_len, 4);
  w.put(0, 4);               // FDE sub-section right after the header
  w.put(n * fde_size, 4);    // FRE sub-section right after the FDEs
  for (std::uint32_t i = 0; i < n; ++i) {
    const FunctionSpec& f = spec.functions[order[i]];
    const std::uint64_t field_at = w.size();
    std::uint64_t field = f.start_pc - spec.section_address;
    if (flags & flags::kFdeFuncStartPcrel) field -= field_at;
    if (spec.version == Version::kV3) {
      w.put(field, 8);
      w.put(f.size, 4);
      w.put(fre_off[i], 4);
    } else {
      const auto sfield = static_cast<std::int64_t>(field);
      if (sfield < std::numeric_limits<std::int32_t>::min() || sfield > std::numeric_limits<std::int32_t>::max())
        return make_error(Errc::kNotRepresentable, field_at, field, i);
      w.put(field, 4);
      w.put(f.size, 4);
      w.put(fre_off[i], 4);
      w.put(enc[i].num_fres, 4);
      w.put(static_cast<unsigned>(enc[i].fre_type) | (static_cast<unsigned>(f.pc_type) << 4) |
                (static_cast<unsigned>(f.pauth_key) << 5),
            1);
      w.put(f.rep_size, 1);
      w.put(0, 2);
    }
  }
  std::vector<std::byte> out = w.take();
  for (std::uint32_t i : fre_order) out.insert(out.end(), enc[i].fre_bytes.begin(), enc[i].fre_bytes.end());
  return out;
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
    if (in.abi != out.abi) return make_error(Errc::kBadAbi, 4, static_cast<std::uint64_t>(in.abi), i);
    if (in.cfa_fixed_fp_offset != out.cfa_fixed_fp_offset || in.cfa_fixed_ra_offset != out.cfa_fixed_ra_offset)
      return make_error(Errc::kNotRepresentable, 5, i, i);
    for (const FunctionSpec& f : in.functions) {
      if (version == Version::kV2 && f.fde_type == FdeType::kFlex)
        return make_error(Errc::kNotRepresentable, 0, f.start_pc, i);
      out.functions.push_back(f);
    }
  }
  std::stable_sort(out.functions.begin(), out.functions.end(),
                   [](const FunctionSpec& a, const FunctionSpec& b) { return a.start_pc < b.start_pc; });
  for (std::uint32_t i = 1; i < out.functions.size(); ++i) {
    const FunctionSpec& a = out.functions[i - 1];
    if (a.start_pc + a.size > out.functions[i].start_pc)
      return make_error(Errc::kFdesOverlap, 0, out.functions[i].start_pc, i);
  }
  return out;
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
    fn.start_pc = f->start_pc;
    fn.size = f->size;
    fn.pc_type = f->pc_type;
    fn.fde_type = f->fde_type;
    // v1 has no block size; its PC-mask FDEs are x86-64 PLTs of 16 bytes.
    fn.rep_size = (h.version == Version::kV1 && f->pc_type == PcType::kMask) ? 16 : f->rep_size;
    fn.signal = f->signal;
    fn.pauth_key = f->pauth_key;
    fn.fre_type = f->fre_type;
    fn.fre_offset = f->fre_offset;
    for (const auto& fre : s.fres(*f)) {
      if (!fre) return Unexpected{fre.error()};
      auto row = s.row(*f, *fre);
      if (!row) return Unexpected{row.error()};
      fn.rows.push_back({fre->start_offset, *row});
      fn.dataword_sizes.push_back(fre->dataword_size);
    }
    spec.functions.push_back(std::move(fn));
  }
  return spec;
}

}  // namespace sframe
