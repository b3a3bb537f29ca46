// SPDX-License-Identifier: MIT
// sframepp: the DWARF CFI reader's records (see cfi_reader_internal.hpp):
// record headers, DW_EH_PE pointers, CIEs and FDEs (DWARF 5 §6.4.1, LSB 5.0
// §10.5-§10.6).
#include <string_view>

#include "cfi_reader_internal.hpp"

namespace sframe::cfi::reader_impl {

// Reads the header at `c` and bounds `c` to the record. False when the length cannot be read (`h.length` is then 0) or runs
// past the section (`h.length` holds it).
bool record_header(Cursor& c, RecordHeader& h) {
  h = RecordHeader{};
  if (!c.word(4, h.length)) return false;
  if (h.length == 0xffffffff) {
    h.id_size = 8;
    if (!c.word(8, h.length)) {
      h.length = 0;
      return false;
    }
  }
  if (h.length > c.left()) return false;
  c.end = c.p + h.length;
  return true;
}

// Reads a DW_EH_PE_* encoded pointer at `c` (LSB 5.0 §10.5.1). `range`:
// the value format only (FDE address ranges). nullopt: omitted, unknown
// or past the end.
bool read_encoded(Cursor& c, std::uint8_t enc, const Ctx& x, bool range, std::uint64_t& out) {
  if (enc == 0xff) return false;  // DW_EH_PE_omit
  const unsigned asize = x.src->address_size;
  const std::uint64_t field = x.src->address + static_cast<std::uint64_t>(c.p - x.base);
  if (!range && (enc & 0x70) == 0x50) {
    // DW_EH_PE_aligned: an absolute pointer at the next aligned address.
    // GCC knows it as a whole encoding (libgcc's unwind-pe.h tests for it
    // by equality). With a value format or DW_EH_PE_indirect beside it,
    // readers part ways: libgcc reads that format unaligned (base 0), libdw
    // aligns to the format's size (elfutils libdw/encoded-value.h), LSB 5.0
    // §10.5.1 says an address-unit boundary. No defined meaning: unreadable.
    if (enc != 0x50) return false;
    const std::uint64_t mis = field % asize;
    if (mis != 0) {
      if (c.left() < asize - mis) return false;
      c.p += asize - mis;
    }
    return c.word(asize, out);
  }
  std::uint64_t v = 0;
  switch (enc & 0x0f) {
    case 0x00: if (!c.word(asize, v)) return false; break;  // absptr
    case 0x01: if (!c.uleb(v)) return false; break;
    case 0x02: if (!c.word(2, v)) return false; break;
    case 0x03: if (!c.word(4, v)) return false; break;
    case 0x04: if (!c.word(8, v)) return false; break;
    // 0x08, DW_EH_PE_signed alone, is no value format of LSB 5.0 §10.5.1's
    // table: libgcc aborts on it (unwind-pe.h), libdw refuses it
    // (libdw/encoded-value.h), binutils' readelf reads an address-sized
    // signed value. No agreed meaning: unreadable, as 0x05-0x07 and 0x0d-0x0f.
    case 0x09: {
      std::int64_t s = 0;
      if (!c.sleb(s)) return false;
      v = static_cast<std::uint64_t>(s);
      break;
    }
    case 0x0a:
      if (!c.word(2, v)) return false;
      v = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int16_t>(v)});
      break;
    case 0x0b:
      if (!c.word(4, v)) return false;
      v = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(v)});
      break;
    case 0x0c: if (!c.word(8, v)) return false; break;
    default: return false;
  }
  if (!range) {
    switch (enc & 0x70) {
      case 0x00: break;
      case 0x10: v += field; break;             // pcrel
      case 0x20: v += x.src->text_base; break;  // textrel
      case 0x30: v += x.src->data_base; break;  // datarel
      default: return false;                    // funcrel: no function here
    }
  }
  if (asize == 4) v &= 0xffffffffu;
  if (!range && (enc & 0x80)) {
    // DW_EH_PE_indirect: the value is the address of an address-sized
    // pointer holding the real one (LSB 5.0 §10.5.1; libgcc's unwinder
    // loads it at run time). Only a pointer inside this CFI section can be
    // read here, as libdw reads it (elfutils libdw/encoded-value.h); any
    // other is unreadable. FDE ranges are never indirect.
    const std::uint64_t size = x.src->bytes.size();
    if (v < x.src->address || size < asize || v - x.src->address > size - asize) return false;
    Cursor at{x.base + (v - x.src->address), x.base + size, x.src->big_endian};
    return at.word(asize, out);
  }
  out = v;
  return true;
}

std::uint32_t Reader::cie_at(const Ctx& x, std::uint64_t off) {
  // Most FDEs use the CIE of the FDE before them.
  if (last_cie_ != UINT32_MAX && cies_[last_cie_].offset == off && cie_src_[last_cie_] == x.src) return last_cie_;
  if (auto it = by_offset_.find(off); it != by_offset_.end()) return last_cie_ = it->second;
  const auto index = static_cast<std::uint32_t>(cies_.size());
  last_cie_ = index;
  by_offset_.emplace(off, index);
  cies_.emplace_back();
  cie_src_.push_back(x.src);
  Cie& cie = cies_.back();
  cie.offset = off;
  const CfiSource& src = *x.src;
  const std::uint8_t* end = x.base + src.bytes.size();
  Cursor c{x.base + off, end, src.big_endian};
  RecordHeader h;
  std::uint64_t id = 0;
  const bool sized = record_header(c, h);
  if (sized) cie.size = (h.id_size == 4 ? 4 : 12) + h.length;
  if (!sized || h.length < h.id_size || !c.word(h.id_size, id)) return index;
  if (id != cie_id_of(src.kind == CfiKind::kEhFrame, h.id_size)) return index;
  std::uint8_t version = 0;
  if (!c.u8(version) || !(version == 1 || version == 3 || version == 4)) return index;
  const auto* aug = c.p;
  while (c.p < c.end && *c.p != 0) ++c.p;
  if (c.p >= c.end) return index;
  const std::string_view augmentation(reinterpret_cast<const char*>(aug), static_cast<std::size_t>(c.p - aug));
  ++c.p;
  if (version == 4) {
    std::uint8_t asize = 0, seg = 0;
    // The ELF class fixes the size of an address: a CIE claiming another
    // (DWARF 5 §6.4.1 lets it differ only for targets ELF cannot describe)
    // is refused, as libgcc refuses it (its CIE reader wants the target's
    // pointer size), rather than read with widths its FDEs' writer and every
    // other reader disagree on (libdw reads .eh_frame pointers at the ELF
    // class's width whatever the CIE says).
    if (!c.u8(asize) || !c.u8(seg) || seg != 0 || asize != src.address_size) return index;
  }
  if (!c.uleb(cie.code_align) || !c.sleb(cie.data_align)) return index;
  std::uint64_t ra = 0;
  if (version == 1) {
    std::uint8_t r = 0;
    if (!c.u8(r)) return index;
  } else if (!c.uleb(ra)) {
    return index;
  }
  if (!augmentation.empty()) {
    if (augmentation[0] != 'z') return index;  // "eh" and others: their data cannot be skipped
    cie.has_z = true;
    std::uint64_t alen = 0;
    if (!c.uleb(alen) || alen > c.left()) return index;
    Cursor a{c.p, c.p + alen, src.big_endian};
    c.p += alen;
    for (std::size_t i = 1; i < augmentation.size(); ++i) {
      std::uint8_t enc = 0;
      std::uint64_t ignored = 0;
      bool known = true;
      switch (augmentation[i]) {
        case 'R':
          if (!a.u8(enc)) return index;
          cie.fde_enc = enc;
          break;
        case 'L':
          if (!a.u8(enc)) return index;
          break;
        case 'P':
          // The personality routine's pointer: read only to skip it.
          if (!a.u8(enc) || !read_encoded(a, static_cast<std::uint8_t>(enc & 0x7f), x, false, ignored)) return index;
          // DW_EH_PE_uleb128 / DW_EH_PE_sleb128 (LSB 5.0 §10.5.1).
          if ((enc & 0x07) == 0x01 && stats_) ++stats_->leb_personality;
          break;
        case 'S': cie.signal = true; break;
        case 'B': break;  // AArch64 BTI-protected frames: nothing for unwinding
        default: known = false; break;  // 'z' says how long the rest is
      }
      if (!known) {
        // Ours ends the augmentation at its first unknown letter, as
        // libgcc's extract_cie_info does; libdw skips the letter and reads
        // the known ones after it (CfiStats::unknown_augmentation).
        if (stats_ && augmentation.find_first_of("LPRS", i + 1) != std::string_view::npos)
          ++stats_->unknown_augmentation;
        break;
      }
    }
  }
  cie.insns = c.p;
  // Its header fields too (alignment factors, RA column, augmentation
  // length): libdw parses the rest of the CIE from other bytes.
  if (c.long_leb && stats_) ++stats_->long_leb;
  cie.insns_end = c.end;
  // The CIE's initial instructions, once, from the ABI's initial state.
  State s = abi_initial_state(abi_);
  std::uint64_t loc = 0, emitted = 0;
  const bool read = execute(cie, &x, cie.insns, cie.insns_end, s, true, loc, emitted, 0, nullptr);
  if (cur_.long_leb && stats_) ++stats_->long_leb;
  if (!read) return index;
  cie.initial = s;
  cie.ok = true;
  // An AArch64 CIE that leaves the CFA register to the ABI: libdw's ABI
  // state says x30 + 0 there (elfutils backends/aarch64_cfi.c, against its
  // own comment and AADWARF64, which say SP); ours says SP + 0. Also when the
  // CIE then changes only the offset (DW_CFA_def_cfa_offset).
  if (aarch64_ && stats_ && s.cfa.kind == CfaRule::kRegOff && s.cfa.reg == 31 &&
      !cfa_defined_in(cie.insns, cie.insns_end))
    ++stats_->abi_default_cfa;
  return index;
}

bool Reader::fde_fields(const Ctx& x, Cursor& c, std::uint64_t id, std::uint64_t id_at, const std::uint8_t* rec_end,
                        Fde& f) {
  const CfiSource& src = *x.src;
  const auto* base = x.base;
  const std::uint64_t size = src.bytes.size();
  const bool eh = src.kind == CfiKind::kEhFrame;
  // An FDE: find its CIE.
  const std::uint64_t cie_off = eh ? id_at - id : id;
  const bool cie_in_range = eh ? id <= id_at : id < size;
  const std::uint32_t ci = cie_in_range ? cie_at(x, cie_off) : UINT32_MAX;
  f.cie = ci;
  bool ok = ci != UINT32_MAX && cies_[ci].ok;
  if (ok) {
    const Cie& cie = cies_[ci];
    std::uint64_t range = 0;
    const std::uint8_t enc = eh || cie.has_z ? cie.fde_enc : 0;
    // `where`: the initial location and range read; `fits`: all fields.
    const auto fields = [&](Cursor& k, bool& fits, bool& where) {
      std::uint64_t alen = 0;
      where = read_encoded(k, enc, x, false, f.start) && read_encoded(k, enc, x, true, range);
      f.end = where ? f.start + (src.address_size == 4 ? range & 0xffffffffu : range) : f.start;
      fits = where && (!cie.has_z || (k.uleb(alen) && alen <= k.left()));
      if (fits && cie.has_z) k.p += alen;
    };
    Cursor whole{c.p, base + size, src.big_endian};
    bool where = false;
    fields(c, ok, where);
    if (c.long_leb && stats_) ++stats_->long_leb;  // the augmentation length
    // Its range is known though the rest is not: kept to tell overlaps.
    if (!ok && f.end > f.start && stats_) bad_ranges_.push_back({f.start, f.end});
    if (!ok && !where && stats_) {
      // Would its location and range read with the bytes after the
      // record? (libdw reads them there.)
      bool all = false, beyond = false;
      fields(whole, all, beyond);
      stats_->truncated_fdes += beyond;
    }
    if (ok && src.address_size == 4) range &= 0xffffffffu;
    f.end = f.start + range;
    if (ok && f.end < f.start) ok = false;  // wraps the address space
    f.insns = c.p;
    f.insns_end = rec_end;
  }
  return ok;
}

}  // namespace sframe::cfi::reader_impl

namespace sframe::cfi {

namespace {

using reader_impl::Ctx;
using reader_impl::Cursor;

// DW_EH_PE_* (LSB 5.0 §10.5.1) .eh_frame_hdr's fields are checked against.
constexpr std::uint8_t kPeAbsptr = 0x00, kPeUdata4 = 0x03, kPeUdata8 = 0x04, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c,
                       kPePcrel = 0x10, kPeDatarel = 0x30, kPeOmit = 0xff;

// The section as a CfiSource for read_encoded(): pcrel counts from the
// field, datarel from the section's start (LSB 5.0 §10.6.2; libgcc's
// unwind-dw2-fde-dip.c: "DW_EH_PE_datarel here means using PT_GNU_EH_FRAME
// start as base").
CfiSource hdr_source(std::span<const std::byte> hdr, std::uint64_t address, bool big_endian) {
  CfiSource s;
  s.bytes = hdr;
  s.address = address;
  s.big_endian = big_endian;
  s.address_size = 8;
  s.data_base = address;
  return s;
}

// The field at byte `at` of the section in encoding `enc` (checked by the
// caller); false past the end.
bool hdr_field(const EhFrameHdr& h, std::size_t at, std::uint8_t enc, std::uint64_t& out) {
  const CfiSource src = hdr_source(h.bytes, h.address, h.big_endian);
  const auto* base = reinterpret_cast<const std::uint8_t*>(h.bytes.data());
  Cursor c{base + at, base + h.bytes.size(), h.big_endian};
  return reader_impl::read_encoded(c, enc, Ctx{&src, base}, false, out);
}

// The bytes of a fixed-size encoding's field (0 for the others).
unsigned fixed_size(std::uint8_t enc) {
  switch (enc & 0x0f) {
    case kPeUdata4: case kPeSdata4: return 4;
    case kPeAbsptr: case kPeUdata8: case kPeSdata8: return 8;
    default: return 0;
  }
}

}  // namespace

std::uint64_t EhFrameHdr::start(std::uint32_t i) const noexcept {
  std::uint64_t v = 0;
  (void)hdr_field(*this, table + std::size_t{8} * i, kPeDatarel | kPeSdata4, v);
  return v;
}

std::uint64_t EhFrameHdr::fde(std::uint32_t i) const noexcept {
  std::uint64_t v = 0;
  (void)hdr_field(*this, table + std::size_t{8} * i + 4, kPeDatarel | kPeSdata4, v);
  return v;
}

Expected<EhFrameHdr> read_eh_frame_hdr(std::span<const std::byte> hdr, std::uint64_t address, bool big_endian,
                                       bool with_table) {
  // version, eh_frame_ptr_enc, fde_count_enc, table_enc, then the encoded
  // eh_frame_ptr and fde_count, then the table (LSB 5.0 §10.6.2).
  if (hdr.size() < 4 || std::to_integer<unsigned>(hdr[0]) != 1)
    return make_error(ElfErrc::kElfError, 0, hdr.empty() ? 0 : std::to_integer<unsigned>(hdr[0]));
  const auto ptr_enc = std::to_integer<std::uint8_t>(hdr[1]);
  const auto count_enc = std::to_integer<std::uint8_t>(hdr[2]);
  const auto table_enc = std::to_integer<std::uint8_t>(hdr[3]);
  EhFrameHdr h;
  h.bytes = hdr;
  h.address = address;
  h.big_endian = big_endian;
  const unsigned rel = ptr_enc & 0x70;
  const unsigned ptr_size = fixed_size(ptr_enc);
  if (ptr_size == 0 || (ptr_enc & 0x80) || (rel != 0 && rel != kPePcrel && rel != kPeDatarel))
    return make_error(ElfErrc::kElfError, 1, ptr_enc);
  if (!hdr_field(h, 4, ptr_enc, h.eh_frame)) return make_error(ElfErrc::kElfError, 4);
  if (!with_table || count_enc == kPeOmit || table_enc == kPeOmit) return h;
  // A count is no address: relative forms have no meaning for it (the
  // copies this reader replaced disagreed on udata4|pcrel, one adding the
  // field's address, the other not).
  if (count_enc != kPeUdata4 && count_enc != kPeSdata4) return make_error(ElfErrc::kElfError, 2, count_enc);
  if (table_enc != (kPeDatarel | kPeSdata4)) return make_error(ElfErrc::kElfError, 3, table_enc);
  const std::size_t count_at = 4 + ptr_size;
  std::uint64_t count = 0;
  if (!hdr_field(h, count_at, count_enc, count)) return make_error(ElfErrc::kElfError, count_at);
  h.table = count_at + 4;
  // 8 bytes an entry: the count is bounded by the bytes there are.
  if ((hdr.size() - h.table) / 8 < count) return make_error(ElfErrc::kElfError, h.table, count);
  h.has_table = true;
  h.count = static_cast<std::uint32_t>(count);
  return h;
}

}  // namespace sframe::cfi
