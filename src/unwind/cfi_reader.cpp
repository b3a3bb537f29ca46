// SPDX-License-Identifier: MIT
// sframepp: the single-pass DWARF CFI reader (see sframe/unwind/cfi_reader.hpp).
//
// Records: DWARF 5 §6.4.1 (.debug_frame: CIE id 0xffffffff, or all ones in
// 64-bit DWARF; the CIE pointer is an offset from the section start) and the
// LSB 5.0 .eh_frame form (CIE id 0; the CIE pointer counts back from its own
// field; pointers encoded with DW_EH_PE_*; a zero length ends the section).
// Instructions: DWARF 5 §6.4.2. Rows: DWARF 5 §6.4.3 - a row holds from its
// location to the next location an instruction moves to; the state at a PC
// is the one left by all instructions before the first advance past it.
#include <algorithm>
#include <memory>

#include "cfi_reader_internal.hpp"

namespace sframe::cfi {

std::string_view describe(Reason r) {
  switch (r) {
    case Reason::kNone: return "representable";
    case Reason::kCfaExpression: return "CFA is a DWARF expression SFrame cannot express";
    case Reason::kCfaRegister: return "CFA based on a register other than SP/FP (needs a v3 FLEX FDE)";
    case Reason::kCfaDeref: return "CFA found by dereference, e.g. DRAP (needs a v3 FLEX FDE)";
    case Reason::kRaNotAtFixedOffset: return "RA not at the ABI's fixed CFA offset (needs a v3 FLEX FDE)";
    case Reason::kRegisterRule: return "RA or FP kept in a register or by expression (needs a v3 FLEX FDE)";
    case Reason::kUnsupportedRule: return "register rule SFrame cannot express";
    case Reason::kUnsupportedMachine: return "machine has no SFrame ABI";
    case Reason::kNoRow: return "part of the function has no CFI row";
    case Reason::kCfiTooLong: return "CFI program too long to interpret within the work bound (rows x bytes)";
    case Reason::kTooFarForV2: return "function too far from the SFrame section for v2's 32-bit start field (use v3)";
  }
  return "unknown";
}

namespace reader_impl {

Expected<void> Reader::scan(const CfiSource& src, std::uint32_t source_index) {
  if (src.address_size != 4 && src.address_size != 8) return make_error(CfiErrc::kBadCfi, 0, src.address_size);
  srcs_.push_back(&src);
  by_offset_.clear();
  const auto* base = reinterpret_cast<const std::uint8_t*>(src.bytes.data());
  const Ctx x{&src, base};
  const std::uint64_t size = src.bytes.size();
  const bool eh = src.kind == CfiKind::kEhFrame;
  std::uint32_t order = 0;
  bool zeros_before = false;  // .debug_frame: zero length words before this record
  for (std::uint64_t off = 0; off < size;) {
    Cursor c{base + off, base + size, src.big_endian};
    RecordHeader h;
    if (!record_header(c, h)) return make_error(CfiErrc::kBadCfi, off, h.length != 0 ? h.length : size - off);
    const std::uint64_t len = h.length;
    if (len == 0 && h.id_size == 4) {
      if (eh) break;  // the zero terminator (LSB 5.0)
      // DWARF 5 §6.4.1 gives a zero length no meaning in .debug_frame:
      // skipped as binutils' readelf skips it, and the records after it read.
      off += 4;
      zeros_before = true;
      continue;
    }
    if (zeros_before && stats_) ++stats_->debug_frame_zero_length;
    zeros_before = false;
    const unsigned id_size = h.id_size;
    const std::uint8_t* rec_end = c.end;
    const std::uint64_t next = static_cast<std::uint64_t>(rec_end - base);
    const std::uint64_t id_at = static_cast<std::uint64_t>(c.p - base);
    std::uint64_t id = 0;
    if (len < id_size + 1 || !c.word(id_size, id)) {
      // Too short to hold its CIE id or pointer and one byte more (a CIE's
      // version, an FDE's initial location): neither CIE nor FDE (DWARF 5
      // §6.4.1), a record we cannot read, even when nothing refers to it.
      // libdw's linear FDE search stops at it (libdw/dwarf_next_cfi.c
      // rejects it before it knows where the next record starts).
      if (stats_) ++stats_->ours_unreadable;
      if (listing_) (*listing_)(FdeRecord{off, next - off, 0, 0, false, 0, 0});
      off = next;
      continue;
    }
    if (id == cie_id_of(eh, id_size)) {
      off = next;
      continue;
    }
    if (stats_) ++stats_->fdes;
    Fde f;
    const bool ok = fde_fields(x, c, id, id_at, rec_end, f);
    if (listing_) {
      FdeRecord r;
      r.offset = off;
      r.size = next - off;
      if (f.cie != UINT32_MAX) {
        r.cie_offset = cies_[f.cie].offset;
        r.cie_size = cies_[f.cie].size;
      }
      r.readable = ok;
      if (ok) {
        r.start = f.start;
        r.end = f.end;
      }
      (*listing_)(r);
    }
    if (!ok) {
      if (stats_) ++stats_->ours_unreadable;
    } else if (f.end > f.start) {
      f.order = order++;
      (void)source_index;
      fdes_.push_back(f);
    }
    off = next;
  }
  return {};
}

namespace {

// Sorts `v` by start, stably (the first FDE read at a start is the one
// kept): a merge sort of the runs already in order, which linkers leave
// long (libc's 3,713 FDEs come in 200 runs, libLLVM-14's 94,994 in 595),
// through a buffer of scratch pages (scratch.hpp). std::stable_sort takes
// its buffer from the heap (74 KB for libc), where it stays resident as a
// hole once freed; std::sort with the read order as tie-break needed
// 3.5x the instructions on libLLVM-14.
template <class Vec>
void sort_by_start(Vec& v) {
  const auto by_start = [](const Fde& a, const Fde& b) { return a.start < b.start; };
  // The end of the run in order that starts at `i`.
  const auto run_end = [&](const Vec& x, std::size_t i) {
    while (++i < x.size() && !by_start(x[i], x[i - 1])) {
    }
    return i;
  };
  if (run_end(v, 0) >= v.size()) return;
  Vec buf(v.size());
  Vec* src = &v;
  Vec* dst = &buf;
  for (;;) {
    // One pass: each pair of neighbouring runs merged into one (the left
    // one first on ties: stable).
    std::size_t runs = 0;
    for (std::size_t i = 0; i < src->size(); ++runs) {
      const std::size_t mid = run_end(*src, i);
      const std::size_t end = mid < src->size() ? run_end(*src, mid) : mid;
      const auto d = static_cast<std::ptrdiff_t>(i);
      std::merge(src->begin() + d, src->begin() + static_cast<std::ptrdiff_t>(mid),
                 src->begin() + static_cast<std::ptrdiff_t>(mid), src->begin() + static_cast<std::ptrdiff_t>(end),
                 dst->begin() + d, by_start);
      i = end;
    }
    std::swap(src, dst);
    if (runs == 1) break;
  }
  if (src != &v) v.swap(buf);
}

}  // namespace

void Reader::run(const std::function<void(const Function&)>& fn) {
  // Linkers mostly write FDEs in address order: sort_by_start() checks first.
  sort_by_start(fdes_);
  Function f;
  for (std::size_t i = 0; i < fdes_.size(); ++i) {
    const Fde& fde = fdes_[i];
    if (i > 0 && fdes_[i - 1].start == fde.start) {
      if (stats_) ++stats_->duplicates;
      continue;
    }
    std::size_t j = i + 1;
    while (j < fdes_.size() && fdes_[j].start == fde.start) ++j;
    const std::uint64_t next = j < fdes_.size() ? fdes_[j].start : UINT64_MAX;
    const std::uint64_t stop = std::min(fde.end, next);
    if (stats_ && fde.end > next) ++stats_->overlapping_fdes;
    // Overlapping an FDE left out (it read as far as its range).
    if (stats_ && !bad_ranges_.empty())
      for (const auto& [lo, hi] : bad_ranges_)
        if (lo < fde.end && fde.start < hi) {
          ++stats_->overlapping_fdes;
          break;
        }
    if (!rows_of(fde, stop, f)) continue;
    fn(f);
  }
}

bool Reader::rows_of(const Fde& fde, std::uint64_t stop, Function& f) {
  const Cie& cie = cies_[fde.cie];
  f.start = fde.start;
  f.rows.clear();
  State s = cie.initial;
  std::uint64_t loc = fde.start, emitted = fde.start;
  dirty_ = true;
  // The source the FDE came from decodes its expressions' byte order.
  const CfiSource* src = cie_src_[fde.cie];
  srcs_.push_back(src);
  const Ctx x{src, reinterpret_cast<const std::uint8_t*>(src->bytes.data())};
  const bool read = execute(cie, &x, fde.insns, fde.insns_end, s, false, loc, emitted, stop, &f);
  srcs_.pop_back();
  // An operand cut by the program's end: libdw applies what it read.
  if (!read && cur_.short_leb && stats_) ++stats_->truncated_fdes;
  if (cur_.long_leb && stats_) ++stats_->long_leb;
  // The end of the program is a move to the FDE's end (DWARF 5 §6.4.3).
  if (read && emitted < stop) {
    emit(cie, s, emitted, stop, f, dirty_);
    emitted = stop;
  }
  if (f.rows.empty()) {
    if (stats_) ++stats_->ours_unreadable;
    return false;
  }
  f.end = emitted;
  return true;
}

Expected<const Function*> Reader::one(const CfiSource& src, std::uint64_t off, std::uint64_t stop, Function& f) {
  // The record as scan() reads it (length, CIE pointer, fields), alone.
  if (src.address_size != 4 && src.address_size != 8) return make_error(CfiErrc::kBadCfi, 0, src.address_size);
  if (srcs_.empty()) srcs_.push_back(&src);
  const auto* base = reinterpret_cast<const std::uint8_t*>(src.bytes.data());
  const Ctx x{&src, base};
  const std::uint64_t size = src.bytes.size();
  if (off >= size) return make_error(CfiErrc::kBadCfi, off, size);
  Cursor c{base + off, base + size, src.big_endian};
  RecordHeader h;
  if (!record_header(c, h) || h.length == 0) return make_error(CfiErrc::kBadCfi, off, h.length);
  const std::uint8_t* rec_end = c.end;
  const std::uint64_t id_at = static_cast<std::uint64_t>(c.p - base);
  std::uint64_t id = 0;
  // Too short for its CIE pointer, or a CIE: not an FDE.
  if (!c.word(h.id_size, id) || id == cie_id_of(src.kind == CfiKind::kEhFrame, h.id_size))
    return make_error(CfiErrc::kBadCfi, off, id);
  Fde fde;
  if (!fde_fields(x, c, id, id_at, rec_end, fde) || fde.end <= fde.start) return make_error(CfiErrc::kBadCfi, off);
  if (!rows_of(fde, stop > fde.start ? std::min(fde.end, stop) : fde.end, f)) return make_error(CfiErrc::kBadCfi, off);
  return &f;
}

}  // namespace reader_impl

using reader_impl::Reader;

Expected<void> read_cfi(std::span<const CfiSource> srcs, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats) {
  Reader r(abi, stats);
  r.reserve(srcs);
  for (std::size_t i = 0; i < srcs.size(); ++i)
    if (auto ok = r.scan(srcs[i], static_cast<std::uint32_t>(i)); !ok) return ok;
  r.run(fn);
  return {};
}

Expected<void> for_each_fde_record(const CfiSource& src, Abi abi, const std::function<void(const FdeRecord&)>& fn) {
  // The scan read_cfi() makes, its records passed on (the FDEs it keeps
  // are a few dozen bytes each, left unused).
  Reader r(abi, nullptr);
  r.list_records(&fn);
  return r.scan(src, 0);
}

struct FdeReader::Impl {
  Impl(const CfiSource& s, Abi abi) : src(s), reader(abi, nullptr) {}
  CfiSource src;
  Reader reader;
  Function f;
};

FdeReader::FdeReader(const CfiSource& src, Abi abi) : impl_(std::make_unique<Impl>(src, abi)) {}
FdeReader::FdeReader(FdeReader&&) noexcept = default;
FdeReader& FdeReader::operator=(FdeReader&&) noexcept = default;
FdeReader::~FdeReader() = default;

Expected<const Function*> FdeReader::read(std::uint64_t offset, std::uint64_t stop) {
  return impl_->reader.one(impl_->src, offset, stop, impl_->f);
}

const CfiSource& FdeReader::source() const noexcept { return impl_->src; }

Expected<void> read_cfi(const CfiSource& src, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats) {
  return read_cfi(std::span<const CfiSource>(&src, 1), abi, fn, stats);
}

}  // namespace sframe::cfi
