// SPDX-License-Identifier: MIT
// sframepp: zero-copy decoder of SFrame sections, versions 1, 2 and 3.
//
// A Section is a cheap view over the caller's bytes (which must outlive it).
// Section::parse checks the header and the extents of both sub-sections; the
// per-FDE and per-FRE accessors check every further read, so any byte string
// can be walked safely. validate() checks every rule of the specification once.
// Both byte orders are read in place: nothing is copied or flipped.
#pragma once
// Library: libsframepp-format (sframepp::format). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>

#include "sframe/format/byte_order.hpp"
#include "sframe/format/error.hpp"
#include "sframe/format/format.hpp"

namespace sframe {

/// The SFrame header (spec §2.2), decoded to host values.
struct Header {
  Version version{};
  /// sfp_flags as stored; see sframe::flags.
  std::uint8_t flags = 0;
  Abi abi{};
  /// sfh_cfa_fixed_fp_offset: bytes from the CFA where FP is saved; 0 = not fixed.
  std::int8_t cfa_fixed_fp_offset = 0;
  /// sfh_cfa_fixed_ra_offset: bytes from the CFA where RA is saved; 0 = not fixed
  /// (AMD64: -8).
  std::int8_t cfa_fixed_ra_offset = 0;
  /// Bytes of auxiliary header following the fixed 28-byte header.
  std::uint8_t auxhdr_len = 0;
  std::uint32_t num_fdes = 0;
  std::uint32_t num_fres = 0;
  /// Length in bytes of the FRE sub-section.
  std::uint32_t fre_len = 0;
  /// Offsets of the sub-sections, relative to the end of the header (and aux header).
  std::uint32_t fdeoff = 0;
  std::uint32_t freoff = 0;

  friend bool operator==(const Header&, const Header&) = default;
};

/// One function descriptor (spec §2.3), version-independent.
struct Fde {
  std::uint32_t index = 0;
  /// Absolute start PC: section address + the decoded start offset (mod 2^64).
  std::uint64_t start_pc = 0;
  /// The stored start field (sign-extended from 32 bits in v1/v2).
  std::int64_t start_field = 0;
  /// Byte offset of the start field within the section.
  std::uint32_t start_field_offset = 0;
  /// Function size in bytes.
  std::uint32_t size = 0;
  /// sfde_func_start_fre_off: offset of this function's data in the FRE sub-section.
  std::uint32_t fre_offset = 0;
  std::uint32_t num_fres = 0;
  FreType fre_type{};
  PcType pc_type{};
  FdeType fde_type{};
  PauthKey pauth_key{};
  /// v3: the function is a signal trampoline.
  bool signal = false;
  /// Size of the repeated code block for PcType::kMask (e.g. 16 for PLT entries).
  std::uint8_t rep_size = 0;
  /// Raw info bytes (info2 is 0 before v3).
  std::uint8_t info = 0;
  std::uint8_t info2 = 0;
  /// Byte offset in the section of the first FRE (after the v3 attribute).
  std::uint32_t fres_begin = 0;

  friend bool operator==(const Fde&, const Fde&) = default;
};

/// One frame row entry (spec §2.4). Its data words stay in the section: read
/// them with Section::dataword(); Section::row() interprets them.
struct Fre {
  std::uint32_t index = 0;
  /// sfre_start_address: offset from the function start (or, for PC-mask FDEs,
  /// within the repeated block).
  std::uint32_t start_offset = 0;
  /// Byte offset of this FRE within the section.
  std::uint32_t section_offset = 0;
  /// Encoded size in bytes (start address + info byte + data words).
  std::uint32_t encoded_size = 0;
  std::uint8_t info = 0;
  std::uint8_t dataword_count = 0;
  /// Bytes per data word: 1, 2 or 4.
  std::uint8_t dataword_size = 0;

  bool cfa_base_sp() const noexcept { return fre_info::cfa_base_sp(info); }
  bool mangled_ra() const noexcept { return fre_info::mangled_ra_p(info); }
  /// Byte offset in the section of data word k.
  std::uint32_t dataword_offset(std::uint32_t k) const noexcept {
    return section_offset + encoded_size - (dataword_count - k) * std::uint32_t{dataword_size};
  }
  friend bool operator==(const Fre&, const Fre&) = default;
};

/// How to recover one value (CFA, RA or FP) for a PC range (spec §3), fully
/// resolved: how the FRE stored it (a data word, a padding word, or nothing
/// and the header's sfh_cfa_fixed_*_offset) is gone. The raw view of an FRE
/// is WireRow (Section::wire_row).
struct Rule {
  enum class Kind : std::uint8_t {
    /// Not saved by this frame: the caller's value is the current one.
    kUnchanged,
    /// No value: the RA (and the CFA) of the outermost frame (errata 2: an FRE
    /// with no data words). The trace ends here.
    kUndefined,
    /// value = base + offset, read from memory there when `deref`.
    kExpr,
  };
  enum class Base : std::uint8_t {
    /// The CFA of this frame (RA/FP rules only).
    kCfa,
    /// DWARF register `regnum` (SP/FP for default CFA rules; any for FLEX).
    kRegister,
  };
  Kind kind = Kind::kUnchanged;
  Base base = Base::kCfa;
  bool deref = false;
  std::uint16_t regnum = 0;
  /// Bytes; for s390x CFA rules already decoded (adjustment and scaling undone).
  std::int32_t offset = 0;

  friend bool operator==(const Rule&, const Rule&) = default;
};

/// The expression rule value = `base` + `offset` bytes, read from memory
/// there when `deref` (spec §3: the CFA is SP or FP plus an offset, RA and FP
/// are saved at CFA plus an offset; v3 §3.2 FLEX: any DWARF register
/// `regnum`, optionally dereferenced). `regnum` is ignored for Base::kCfa.
/// `offset` is a data word's value, so at most 32 bits (spec §2.4.2): a
/// caller holding a wider value checks its range first. No errors.
constexpr Rule make_rule(Rule::Base base, std::uint16_t regnum, std::int32_t offset, bool deref) noexcept {
  Rule r;
  r.kind = Rule::Kind::kExpr;
  r.base = base;
  r.regnum = regnum;
  r.offset = offset;
  r.deref = deref;
  return r;
}

/// The three rules of one FRE, interpreted per ABI and FDE type (spec §3),
/// with the header's fixed offsets applied.
struct FrameRow {
  Rule cfa;
  Rule ra;
  Rule fp;
  /// RA is signed with PAuth (AArch64): strip before use.
  bool ra_mangled = false;
  /// No data words: the RA is undefined, the trace ends here (errata 2).
  bool outermost() const noexcept { return ra.kind == Rule::Kind::kUndefined; }
  friend bool operator==(const FrameRow&, const FrameRow&) = default;
};

/// The raw view of an FRE's RA and FP: where the FRE stores each (spec
/// §2.4.2 data words, §3.1 default and v3 §3.2 FLEX layouts). For dumping an
/// FRE as stored and for re-encoding it with the same layout; unwinders use
/// FrameRow.
struct WireRow {
  enum class Slot : std::uint8_t {
    /// No data word: the header's sfh_cfa_fixed_*_offset when it is not 0,
    /// else the value is unchanged (also for an FRE without data words).
    kNone,
    /// Data words from `ra_word`/`fp_word`: a CFA offset (default FDEs, s390x
    /// v2: or a tagged register number), or a FLEX (control, offset) pair.
    kWord,
    /// One padding word that says "no rule here", meaning as kNone:
    /// SFRAME_FRE_RA_OFFSET_INVALID (errata 1, v2 on) or a FLEX control word 0.
    kPadding,
  };
  Fre fre;
  Slot ra = Slot::kNone;
  Slot fp = Slot::kNone;
  /// Index of the first data word of each value stored as kWord.
  std::uint8_t ra_word = 0;
  std::uint8_t fp_word = 0;
  friend bool operator==(const WireRow&, const WireRow&) = default;
};

/// How much validate() checks.
enum class Strictness : std::uint8_t {
  /// Everything needed to decode every FDE and FRE without failure, as GNU
  /// objdump tolerates (for dumping imperfect sections).
  kLenient,
  /// Every rule of the specification.
  kStrict,
};

class FreRange;

/// A view over one SFrame section. Cheap to copy; does not own the bytes.
class Section {
 public:
  /// Parses the header and checks that the FDE and FRE sub-sections lie inside
  /// `bytes`. `section_address` is the address of the section's first byte
  /// (sh_addr of .sframe; 0 for raw bytes) and makes FDE start PCs absolute.
  /// Trailing bytes after the FRE sub-section (zero padding) are allowed.
  /// Errors: kTruncatedHeader, kBadMagic, kBadVersion, kBadAbi,
  /// kAuxHeaderPastEnd, kFdeTablePastEnd, kFreSectionPastEnd.
  static Expected<Section> parse(std::span<const std::byte> bytes, std::uint64_t section_address = 0);

  const Header& header() const noexcept { return header_; }
  Version version() const noexcept { return header_.version; }
  Abi abi() const noexcept { return header_.abi; }
  /// True if the section is stored big-endian.
  bool big_endian() const noexcept { return big_endian_; }
  std::uint64_t address() const noexcept { return address_; }
  /// All bytes given to parse().
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// Bytes the section occupies according to its header (header, sub-sections).
  std::uint64_t used_size() const noexcept { return used_size_; }
  /// Byte offset of the FDE / FRE sub-sections within the section.
  std::uint32_t fde_table_offset() const noexcept { return fdes_begin_; }
  std::uint32_t fre_section_offset() const noexcept { return fres_begin_; }

  std::uint32_t num_fdes() const noexcept { return header_.num_fdes; }
  /// Decodes FDE `i`. For v3 this also reads its attribute from the FRE
  /// sub-section. Errors: kFdeIndexOutOfRange, kFreOffsetPastEnd,
  /// kFdeAttrTruncated, kBadFreType (FRE type code > 2).
  Expected<Fde> fde(std::uint32_t i) const noexcept;

  /// Absolute start PC of FDE `i` without decoding the rest of it; for
  /// binary searches. Precondition: i < num_fdes() (the table's extent was
  /// checked by parse()).
  std::uint64_t fde_start_pc(std::uint32_t i) const noexcept {
    const Version v = header_.version;
    const std::uint64_t at = fdes_begin_ + std::uint64_t{i} * fde_entry_size(v);
    constexpr wire::Field f3 = wire::fde_v3::kStart, f2 = wire::fde_v2::kStart;
    const auto field = v == Version::kV3
                           ? static_cast<std::int64_t>(load(at + f3.offset, f3.size))
                           : static_cast<std::int64_t>(static_cast<std::int32_t>(load(at + f2.offset, f2.size)));
    const bool pcrel = v != Version::kV1 && (header_.flags & flags::kFdeFuncStartPcrel);
    return address_ + static_cast<std::uint64_t>(field) + (pcrel ? at : 0);
  }

  /// The FRE of `fde` covering byte offset `off` from the function start
  /// (already reduced modulo the block size for PC-mask FDEs): the last FRE
  /// whose start is <= off. Steps over earlier FREs reading only their start
  /// and info bytes. Errors: kPcBeforeFirstFre, kFreTruncated, kBadDatawordSize.
  Expected<Fre> fre_covering(const Fde& fde, std::uint64_t off) const noexcept;

  /// The FREs of `fde`, decoded one by one as iterated.
  FreRange fres(const Fde& fde) const noexcept;

  /// Decodes the FRE at section byte offset `offset` of an FDE of FRE type `t`.
  /// Errors: kFreTruncated, kBadDatawordSize.
  Expected<Fre> fre_at(std::uint32_t offset, FreType t, std::uint32_t fde_index,
                       std::uint32_t fre_index) const noexcept;

  /// Interprets an FRE's data words as CFA/RA/FP rules for this section's ABI
  /// and the FDE's type (spec §3.1, §3.2), the header's fixed RA/FP offsets
  /// applied where the FRE stores no word (the one place that does so).
  /// Errors: kBadDatawordCount, kBadFlexControl.
  Expected<FrameRow> row(const Fde& fde, const Fre& fre) const noexcept;

  /// The raw view: which data words of `fre` hold the RA and the FP, and
  /// which are padding (spec §3.1, v3 §3.2). Checks the word count per ABI
  /// and FDE type as row() does. Errors: kBadDatawordCount, kBadFlexControl.
  Expected<WireRow> wire_row(const Fde& fde, const Fre& fre) const noexcept;

  /// Data word k (< fre.dataword_count) of an FRE decoded from this section,
  /// zero-extended (for FLEX control words).
  std::uint32_t dataword(const Fre& fre, std::uint32_t k) const noexcept {
    return static_cast<std::uint32_t>(load(fre.dataword_offset(k), fre.dataword_size));
  }
  /// Data word k read as a signed integer of the FRE's data-word size.
  std::int32_t sdataword(const Fre& fre, std::uint32_t k) const noexcept {
    const std::uint32_t w = dataword(fre, k);
    if (fre.dataword_size == 1) return static_cast<std::int8_t>(w);
    if (fre.dataword_size == 2) return static_cast<std::int16_t>(w);
    return static_cast<std::int32_t>(w);
  }

  /// Reads an unsigned integer of `n` (1, 2, 4, 8) bytes at section offset
  /// `off` in the section's byte order. The caller guarantees bounds.
  std::uint64_t load(std::uint64_t off, unsigned n) const noexcept {
    return endian::load(bytes_.data() + off, n, endian::order(big_endian_));
  }

 private:
  std::span<const std::byte> bytes_;
  Header header_{};
  std::uint64_t address_ = 0;
  std::uint64_t used_size_ = 0;
  std::uint32_t fdes_begin_ = 0;
  std::uint32_t fres_begin_ = 0;
  std::uint32_t fres_end_ = 0;
  bool big_endian_ = false;
};

/// Sentinel for FreIterator.
struct FreEnd {};

/// Iterates the FREs of one FDE. Dereferences to Expected<Fre>; after an error
/// it yields that error once, then ends (LLVM fallible-iterator style).
class FreIterator {
 public:
  using value_type = Expected<Fre>;
  using difference_type = std::ptrdiff_t;

  FreIterator() = default;
  FreIterator(const Section* s, const Fde& fde) noexcept;
  const Expected<Fre>& operator*() const noexcept { return cur_; }
  FreIterator& operator++() noexcept;
  void operator++(int) noexcept { ++*this; }
  bool operator==(FreEnd) const noexcept { return done_; }

 private:
  void decode() noexcept;
  const Section* s_ = nullptr;
  std::uint32_t fde_index_ = 0;
  std::uint32_t next_ = 0;
  std::uint32_t count_ = 0;
  std::uint32_t offset_ = 0;
  FreType type_{};
  bool done_ = true;
  Expected<Fre> cur_{Fre{}};
};

/// Range of an FDE's FREs; see Section::fres.
class FreRange {
 public:
  FreRange(const Section* s, const Fde& fde) noexcept : s_(s), fde_(fde) {}
  FreIterator begin() const noexcept { return FreIterator(s_, fde_); }
  FreEnd end() const noexcept { return {}; }

 private:
  const Section* s_;
  Fde fde_;
};

inline FreRange Section::fres(const Fde& fde) const noexcept { return FreRange(this, fde); }

/// Checks every FDE and FRE of `s` once, in time linear in the section size.
/// kLenient checks what decoding needs: extents, codes, data-word counts per
/// ABI and FDE type, FLEX control words (after it, every fde(), FRE and row()
/// of the section succeeds). kStrict adds every other rule of the spec:
/// undefined flags and unused bits, zero PC-mask block size, FRE order and
/// range, FRE count/length totals, FRE overlap between FDEs, sub-section
/// overlap, FDE order and overlap under SFRAME_F_FDE_SORTED. Returns the
/// first error found.
/// Shared FRE blocks: kStrict accepts FDEs that share a whole FRE block
/// (v3: attribute and FREs) and rejects any other overlap. An FDE may point
/// exactly at the start of an earlier FDE's block when the block reads the
/// same for it (same FRE type, FDE type and FRE count; in v3 these live in
/// the shared attribute anyway) and the block's FRE starts lie inside its own
/// range; every other byte of the FRE sub-section belongs to at most one block
/// (an FDE starting inside another's block, or blocks overlapping in part:
/// kFdeFresOverlap). sfh_num_fres and sfh_fre_len then count each stored
/// block once, and must equal those sums. Why: the spec neither requires nor
/// forbids sharing (sfdi_func_start_fre_off is "the offset to the start of
/// the function's stack trace data", v3 §2.3; v2 §2.3: "the offset to the
/// first SFrame FRE for the function"), the kernel, glibc and
/// libsframe in the native byte order read each FDE's FREs by offset and
/// never sum counts (docs/consumers.md, "Smaller sections"), and sharing
/// identical blocks is what makes encode()'s share_fre_blocks sections
/// smaller. A partial overlap has no such use and leaves the totals without
/// one meaning. libsframe 2.47 in the foreign byte order rejects any
/// sharing; check_consumer() says so (rule libsframe.foreign-lengths), not
/// validate(). kLenient accepts any overlap that decodes.
/// Resources: kStrict allocates one bit per byte of the FRE sub-section (none
/// when the header's counts are impossible); kLenient allocates nothing
/// unless FDEs share FRE data (or claim more FREs than fit), and then up to
/// 4 bytes per byte of the FRE sub-section per (FRE type, FDE type) pair in
/// use, to keep the time linear (see ValidateStats).
Expected<void> validate(const Section& s, Strictness strictness = Strictness::kStrict);

/// The work validate() did, to check its time bound in tests (counts, not
/// timings). Both are at most a small constant times the section size in
/// bytes, whatever the counts the section claims.
struct ValidateStats {
  /// FDEs decoded.
  std::uint64_t fde_decodes = 0;
  /// FREs decoded (each decode reads one FRE's start address and info byte).
  std::uint64_t fre_decodes = 0;
};

/// validate() reporting the work done in `stats` (overwritten).
Expected<void> validate(const Section& s, Strictness strictness, ValidateStats& stats);

}  // namespace sframe

#pragma GCC visibility pop
