// SPDX-License-Identifier: MIT
// The acceptance rules of the SFrame consumers (docs/consumers.md, from
// shared/reference/sframe-consumers.md and the consumers' sources).
#include "sframe/format/consumers.hpp"

#include <array>
#include <bit>

namespace sframe {
namespace {

constexpr ConsumerRuleInfo kRules[] = {
#define SFRAME_X(name, consumer, id, words, file) {ConsumerRule::name, Consumer::consumer, id, words, file},
    SFRAME_CONSUMER_RULES(SFRAME_X)
#undef SFRAME_X
};

// Header field offsets (spec §2.2): the preamble, then the fixed fields.
constexpr std::uint64_t kVersionAt = 2, kFlagsAt = 3, kAuxAt = 7, kNumFdesAt = 8, kNumFresAt = 12, kFreLenAt = 16,
                        kFdeOffAt = 20, kFreOffAt = 24;

// glibc reads v2 FDEs as its 20-byte sframe_func_desc_entry.
constexpr std::uint64_t kGlibcFdeSize = 20;
// glibc's MAX_NUM_STACK_OFFSETS: CFA, RA, FP.
constexpr unsigned kGlibcMaxWords = 3;

// Byte offset of an FDE's sfde_func_rep_size: after the info byte in v2,
// last of the v3 attribute.
std::uint64_t rep_size_at(const Section& s, const Fde& f) noexcept {
  return s.version() == Version::kV3 ? f.fres_begin - 1u : f.start_field_offset + 17u;
}

bool native_order(const Section& s) noexcept { return endian::order(s.big_endian()) == kHostByteOrder; }

// Collects violations up to the cap.
class Sink {
 public:
  Sink(ConsumerReport& r, std::size_t max) : r_(r), max_(max) {}
  // Out of line: a violation is the rare path, and g++ 12 at -O3, inlining
  // the vector's growth into the checks, warns of a write past its end.
  [[gnu::noinline]] void add(ConsumerRule rule, std::uint64_t offset, std::uint64_t value = 0, std::uint32_t fde = kNoIndex,
           std::uint32_t fre = kNoIndex) {
    if (r_.violations.size() < max_)
      r_.violations.push_back({rule, offset, value, fde, fre});
    else
      ++r_.omitted;
  }

 private:
  ConsumerReport& r_;
  std::size_t max_;
};

// Bounds the FRE decodes of one check, whatever the counts claim: a section
// whose FDEs share FRE blocks is walked once per FDE.
class Budget {
 public:
  explicit Budget(const Section& s) : left_(2 * s.bytes().size() + s.num_fdes() + 16) {}
  bool take() noexcept { return left_ == 0 ? false : (--left_, true); }

 private:
  std::uint64_t left_;
};

// Visits f's FREs in order, each read from the end of the one before, as
// every consumer reads them (spec §2.4: FREs follow one another without
// gaps): `each(fre, at, k)` for each FRE that decodes, `bad(error, k)` for
// the first that does not, where the walk ends. False when the budget ran
// out (the report is then incomplete).
template <class Each, class Bad>
bool walk_fres(const Section& s, const Fde& f, std::uint32_t i, Budget& budget, Each&& each, Bad&& bad) {
  std::uint64_t at = f.fres_begin;
  for (std::uint32_t k = 0; k < f.num_fres; ++k) {
    if (!budget.take()) return false;
    const Expected<Fre> fre = s.fre_at(static_cast<std::uint32_t>(at), f.fre_type, i, k);
    if (!fre) {
      bad(fre.error(), k);
      return true;
    }
    each(*fre, at, k);
    at += fre->encoded_size;
  }
  return true;
}

const LoadSegment* segment_of(const FileFacts& f, std::uint64_t addr, bool executable) {
  for (const auto& l : f.loads)
    if ((!executable || l.executable) && addr >= l.vaddr && addr - l.vaddr < l.memsz) return &l;
  return nullptr;
}

// The kernel's unwind_user/sframe checks at registration and lookup, with
// CONFIG_SFRAME_VALIDATION (sframe-consumers.md, kernel items 1-7).
void check_kernel(const Section& s, const FileFacts* file, Sink& out, ConsumerReport& rep) {
  const Header& h = s.header();
  if (!native_order(s)) out.add(ConsumerRule::kKernelNativeOrder, 0, s.big_endian());
  if (h.version != Version::kV3) out.add(ConsumerRule::kKernelVersion, kVersionAt, static_cast<unsigned>(h.version));
  if (!(h.flags & flags::kFdeSorted)) out.add(ConsumerRule::kKernelFlagSorted, kFlagsAt, h.flags);
  if (!(h.flags & flags::kFdeFuncStartPcrel)) out.add(ConsumerRule::kKernelFlagPcrel, kFlagsAt, h.flags);
  if (h.auxhdr_len != 0) out.add(ConsumerRule::kKernelAuxHeader, kAuxAt, h.auxhdr_len);
  if (h.num_fdes == 0) out.add(ConsumerRule::kKernelNoFdes, kNumFdesAt, 0);
  if (h.num_fres == 0) out.add(ConsumerRule::kKernelNoFres, kNumFresAt, 0);
  const std::uint64_t size = s.bytes().size();
  const std::uint64_t hdr_end = kHeaderSize + std::uint64_t{h.auxhdr_len};
  const std::uint64_t fdes_end = s.fde_table_offset() + std::uint64_t{h.num_fdes} * fde_entry_size(h.version);
  if (hdr_end >= size) out.add(ConsumerRule::kKernelLayout, kAuxAt, hdr_end);
  if (fdes_end > s.fre_section_offset()) out.add(ConsumerRule::kKernelLayout, kFreOffAt, fdes_end);

  if (file) {
    const std::uint64_t a = file->section_address, n = file->section_size;
    const LoadSegment* seg = segment_of(*file, a, false);
    if (!seg || n > seg->memsz - (a - seg->vaddr)) out.add(ConsumerRule::kKernelSectionSegment, 0, a);
  }

  Budget budget(s);
  const LoadSegment* text = nullptr;
  std::uint64_t prev_start = 0;
  const unsigned max_default_words = 1u + (h.cfa_fixed_ra_offset == 0) + 1u;
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    const std::uint64_t start_pc = s.fde_start_pc(i);
    const std::uint64_t field_at = s.fde_table_offset() + std::uint64_t{i} * fde_entry_size(h.version);
    if (i > 0 && start_pc <= prev_start) out.add(ConsumerRule::kKernelFdeOrder, field_at, start_pc, i);
    prev_start = start_pc;
    if (file) {
      const LoadSegment* seg = segment_of(*file, start_pc, true);
      if (!seg) {
        out.add(ConsumerRule::kKernelFdeOutsideText, field_at, start_pc, i);
      } else if (!text) {
        text = seg;
      } else if (seg != text) {
        out.add(ConsumerRule::kKernelFdesSpanSegments, field_at, start_pc, i);
      }
    }
    const Expected<Fde> f = s.fde(i);
    if (!f) {
      const Error& e = f.error();
      const ConsumerRule r = e.code() == FormatErrc::kBadFreType   ? ConsumerRule::kKernelFreType
                             : e.code() == FormatErrc::kBadFdeType ? ConsumerRule::kKernelFlex
                                                           : ConsumerRule::kKernelFdeAttr;
      out.add(r, e.offset, e.value, i);
      continue;
    }
    if (f->pc_type == PcType::kMask && f->rep_size == 0)
      out.add(ConsumerRule::kKernelRepSize, rep_size_at(s, *f), 0, i);
    std::uint32_t prev = 0;
    const auto each = [&](const Fre& fre, std::uint64_t at, std::uint32_t k) {
      if (k > 0 && fre.start_offset <= prev) out.add(ConsumerRule::kKernelFreOrder, at, fre.start_offset, i, k);
      if (f->pc_type == PcType::kInc && fre.start_offset > f->size)
        out.add(ConsumerRule::kKernelFreRange, at, fre.start_offset, i, k);
      prev = fre.start_offset;
      if (f->fde_type == FdeType::kFlex) {
        if (!s.row(*f, fre)) out.add(ConsumerRule::kKernelFlex, at, fre.dataword_count, i, k);
      } else if (fre.dataword_count > max_default_words) {
        out.add(ConsumerRule::kKernelDatawords, at + start_address_size(f->fre_type), fre.dataword_count, i, k);
      }
    };
    const auto bad = [&](const Error& e, std::uint32_t k) {
      out.add(e.code() == FormatErrc::kBadDatawordSize ? ConsumerRule::kKernelDatawordSize : ConsumerRule::kKernelFreBounds,
              e.offset, e.value, i, k);
    };
    if (!walk_fres(s, *f, i, budget, each, bad)) {
      rep.complete = false;
      return;
    }
  }
}

// glibc's sysdeps/generic/sframe-read.c (sframe-consumers.md, glibc).
void check_glibc(const Section& s, Sink& out, ConsumerReport& rep) {
  const Header& h = s.header();
  if (!native_order(s)) out.add(ConsumerRule::kGlibcNativeOrder, 0, s.big_endian());
  if (h.version != Version::kV2) out.add(ConsumerRule::kGlibcVersion, kVersionAt, static_cast<unsigned>(h.version));
  constexpr std::uint8_t accepted = flags::kFdeSorted | flags::kFramePointer | flags::kFdeFuncStartPcrel;
  if (h.flags & ~accepted) out.add(ConsumerRule::kGlibcFlags, kFlagsAt, h.flags);
  if (!(h.flags & flags::kFdeSorted)) out.add(ConsumerRule::kGlibcFlagSorted, kFlagsAt, h.flags);
  if (h.fdeoff != 0) out.add(ConsumerRule::kGlibcFdeOffset, kFdeOffAt, h.fdeoff);
  if (std::uint64_t{h.freoff} != std::uint64_t{h.num_fdes} * kGlibcFdeSize)
    out.add(ConsumerRule::kGlibcFreOffset, kFreOffAt, h.freoff);
  Budget budget(s);
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    const Expected<Fde> f = s.fde(i);
    if (!f) {
      const Error& e = f.error();
      out.add(e.code() == FormatErrc::kBadFreType ? ConsumerRule::kGlibcFreType : ConsumerRule::kGlibcBounds, e.offset,
              e.value, i);
      continue;
    }
    if (f->pc_type == PcType::kMask && f->rep_size == 0)
      out.add(ConsumerRule::kGlibcRepSize, rep_size_at(s, *f), 0, i);
    const auto each = [&](const Fre& fre, std::uint64_t at, std::uint32_t k) {
      if (fre.dataword_count > kGlibcMaxWords)
        out.add(ConsumerRule::kGlibcDatawords, at + start_address_size(f->fre_type), fre.dataword_count, i, k);
    };
    const auto bad = [&](const Error& e, std::uint32_t k) {
      out.add(e.code() == FormatErrc::kBadDatawordSize ? ConsumerRule::kGlibcDatawords : ConsumerRule::kGlibcBounds,
              e.offset, e.value, i, k);
    };
    if (!walk_fres(s, *f, i, budget, each, bad)) {
      rep.complete = false;
      return;
    }
  }
}

// GNU libsframe 2.47's sframe_decode and, for the foreign byte order, its
// flip_sframe walk (sframe-consumers.md, libsframe).
void check_libsframe(const Section& s, Sink& out, ConsumerReport& rep) {
  const Header& h = s.header();
  if (h.version == Version::kV1) out.add(ConsumerRule::kLibsframeVersion, kVersionAt, 1);
  const std::uint8_t defined = h.version == Version::kV3 ? defined_flags(Version::kV3) : defined_flags(Version::kV2);
  if (h.flags & ~defined) out.add(ConsumerRule::kLibsframeFlags, kFlagsAt, h.flags);
  if (h.fdeoff > h.freoff) out.add(ConsumerRule::kLibsframeOffsets, kFdeOffAt, h.fdeoff);
  const bool foreign = !native_order(s);
  if (foreign && h.auxhdr_len != 0) out.add(ConsumerRule::kLibsframeForeignAux, kAuxAt, h.auxhdr_len);

  // The native decoder reads every v3 FDE's attribute; the foreign one also
  // walks every FDE's FREs from its offset, counting FREs and bytes.
  Budget budget(s);
  std::uint64_t fres_walked = 0, bytes_walked = 0, walk_end = s.fre_section_offset();
  bool walk_ok = true;
  for (std::uint32_t i = 0; i < h.num_fdes; ++i) {
    const Expected<Fde> f = s.fde(i);
    if (!f) {
      // libsframe does not check the FDE type; an FRE type > 2 trips its
      // sframe_assert in sframe_fre_start_addr_size.
      const Error& e = f.error();
      if (e.code() == FormatErrc::kBadFreType)
        out.add(ConsumerRule::kLibsframeFreType, e.offset, e.value, i);
      else if (e.code() != FormatErrc::kBadFdeType)
        out.add(ConsumerRule::kLibsframeBounds, e.offset, e.value, i);
      walk_ok = false;
      continue;
    }
    if (!foreign) continue;
    if (h.version == Version::kV3) bytes_walked += kFdeAttrSizeV3;
    const auto each = [&](const Fre& fre, std::uint64_t, std::uint32_t) {
      ++fres_walked;
      bytes_walked += fre.encoded_size;
    };
    const auto bad = [&](const Error& e, std::uint32_t k) {
      out.add(ConsumerRule::kLibsframeBounds, e.offset, e.value, i, k);
      walk_ok = false;
    };
    if (!walk_fres(s, *f, i, budget, each, bad)) {
      rep.complete = false;
      return;
    }
  }
  if (!foreign || !walk_ok) return;
  if (fres_walked != h.num_fres) out.add(ConsumerRule::kLibsframeForeignCount, kNumFresAt, fres_walked);
  if (bytes_walked > h.fre_len) out.add(ConsumerRule::kLibsframeForeignLength, kFreLenAt, bytes_walked);
  // libsframe requires zeros from the end of the bytes it flipped (counted
  // from the FRE sub-section's start) to the end of the buffer.
  walk_end += bytes_walked;
  const auto b = s.bytes();
  for (std::uint64_t p = walk_end; p < b.size(); ++p) {
    if (b[p] != std::byte{0}) {
      out.add(ConsumerRule::kLibsframeForeignPadding, p, static_cast<std::uint8_t>(b[p]));
      break;
    }
  }
}

}  // namespace

std::string_view consumer_name(Consumer c) noexcept {
  switch (c) {
    case Consumer::kKernel: return "kernel";
    case Consumer::kGlibc: return "glibc";
    case Consumer::kLibsframe: return "libsframe";
  }
  return "unknown";
}

std::optional<Consumer> consumer_from_name(std::string_view name) noexcept {
  for (Consumer c : kAllConsumers)
    if (consumer_name(c) == name) return c;
  return std::nullopt;
}

bool reads_version(Consumer c, Version v) noexcept {
  switch (c) {
    case Consumer::kKernel: return v == Version::kV3;
    case Consumer::kGlibc: return v == Version::kV2;
    case Consumer::kLibsframe: return v == Version::kV2 || v == Version::kV3;
  }
  return false;
}

std::span<const ConsumerRuleInfo> consumer_rules() noexcept { return kRules; }

const ConsumerRuleInfo& rule_info(ConsumerRule r) noexcept { return kRules[static_cast<std::size_t>(r)]; }

ConsumerReport check_consumer(const Section& s, Consumer c, const FileFacts* file, std::size_t max_violations) {
  ConsumerReport rep;
  rep.consumer = c;
  rep.file_rules_checked = file != nullptr;
  Sink out(rep, max_violations);
  switch (c) {
    case Consumer::kKernel: check_kernel(s, file, out, rep); break;
    case Consumer::kGlibc: check_glibc(s, out, rep); break;
    case Consumer::kLibsframe: check_libsframe(s, out, rep); break;
  }
  return rep;
}

}  // namespace sframe
