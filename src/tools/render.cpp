// SPDX-License-Identifier: MIT
#include "render.hpp"

#include "json_stream.hpp"

#include <fmt/format.h>

#include <cstring>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <tuple>

namespace sframe::tools {

std::string_view abi_name(Abi abi) {
  switch (abi) {
    case Abi::kAarch64Big: return "AArch64 big-endian";
    case Abi::kAarch64Little: return "AArch64 little-endian";
    case Abi::kAmd64Little: return "AMD64 little-endian";
    case Abi::kS390xBig: return "s390x big-endian";
  }
  return "unknown";
}

std::vector<std::string> flag_names(std::uint8_t flags, Version v) {
  std::vector<std::string> out;
  const auto take = [&](std::uint8_t bit, const char* name) {
    if (flags & bit) out.emplace_back(name);
    flags = static_cast<std::uint8_t>(flags & ~bit);
  };
  take(flags::kFdeSorted, "SFRAME_F_FDE_SORTED");
  if (v != Version::kV3) take(flags::kFramePointer, "SFRAME_F_FRAME_POINTER");
  if (v != Version::kV1) take(flags::kFdeFuncStartPcrel, "SFRAME_F_FDE_FUNC_START_PCREL");
  for (unsigned bit = 0; bit < 8; ++bit)
    if (flags & (1u << bit)) out.push_back(fmt::format("0x{:x}", 1u << bit));
  return out;
}

std::string register_name(Abi abi, std::uint16_t regnum) {
  const AbiRegs regs = abi_regs(abi);
  if (regnum == regs.sp) return "SP";
  if (regnum == regs.fp) return "FP";
  return fmt::format("r{}", regnum);
}

namespace {

std::string signed_term(std::int32_t v) { return v < 0 ? fmt::format(" - {}", -std::int64_t{v}) : fmt::format(" + {}", v); }

// "X = base + off" for values, "X at base + off" for memory slots.
std::string rule_words(const Section& s, std::string_view what, const Rule& r) {
  switch (r.kind) {
    case Rule::Kind::kUnchanged: return fmt::format("{} unchanged", what);
    case Rule::Kind::kUndefined: return fmt::format("{} undefined (outermost frame)", what);
    case Rule::Kind::kExpr: break;
  }
  const std::string base = r.base == Rule::Base::kCfa ? "CFA" : register_name(s.abi(), r.regnum);
  if (!r.deref && r.offset == 0 && r.base == Rule::Base::kRegister && what != "CFA")
    return fmt::format("{} in {}", what, base);
  return fmt::format("{} {} {}{}", what, r.deref ? "at" : "=", base, signed_term(r.offset));
}

// The JSON of a rule (docs/json.md "Rules"), to a JsonStream or a
// JsonBuilder.
template <class Out>
void write_rule(Out& out, const Section& s, const Rule& r) {
  out.begin_object();
  switch (r.kind) {
    case Rule::Kind::kUnchanged: out.member("kind", "unchanged"); break;
    case Rule::Kind::kUndefined: out.member("kind", "undefined"); break;
    case Rule::Kind::kExpr:
      out.member("kind", "expr");
      out.member("base", r.base == Rule::Base::kCfa ? "cfa" : "register");
      if (r.base == Rule::Base::kRegister) {
        out.member("register", r.regnum);
        out.member("register_name", register_name(s.abi(), r.regnum));
      }
      out.member("offset", r.offset);
      out.member("deref", r.deref);
      break;
  }
  out.end();
}

// The one description of an FDE's and an FRE's JSON (docs/json.md, `dump`),
// to a JsonStream (dump) or a JsonBuilder (lookup). An FDE's fields are
// written into an object the caller opened (dump adds its `fres` after).
template <class Out>
void write_fde_fields(Out& out, const Fde& f) {
  static constexpr const char* kFreTypes[] = {"addr1", "addr2", "addr4"};
  out.member("index", f.index);
  out.member("start_pc", hex(f.start_pc));
  out.member("size", f.size);
  out.member("pc_type", f.pc_type == PcType::kMask ? "mask" : "inc");
  out.member("fde_type", f.fde_type == FdeType::kFlex ? "flex" : "default");
  out.member("fre_type", kFreTypes[static_cast<int>(f.fre_type)]);
  out.member("rep_size", f.rep_size);
  out.member("signal", f.signal);
  out.member("pauth_key", f.pauth_key == PauthKey::kB ? "B" : "A");
  out.member("num_fres", f.num_fres);
}

template <class Out>
void write_fre(Out& out, const Section& s, const Fde& f, const Fre& fre, const FrameRow& row) {
  out.begin_object();
  out.member("index", fre.index);
  out.member("start_offset", fre.start_offset);
  // PC-mask FREs start at an offset within each repeated block.
  if (f.pc_type == PcType::kMask) {
    out.member("start_pc", nullptr);
  } else {
    out.member("start_pc", hex(f.start_pc + fre.start_offset));
  }
  out.member("dataword_size", fre.dataword_size);
  out.key("datawords");
  out.begin_array();
  for (std::uint32_t k = 0; k < fre.dataword_count; ++k) out.value(s.dataword(fre, k));
  out.end();
  // The raw view: how the FRE stores the RA and the FP (the rules below are
  // resolved).
  const auto stored = [](WireRow::Slot slot) {
    return slot == WireRow::Slot::kWord ? "word" : slot == WireRow::Slot::kPadding ? "padding" : "none";
  };
  const Expected<WireRow> wire = s.wire_row(f, fre);  // row() succeeded, so this does
  out.member("ra_stored", stored(wire ? wire->ra : WireRow::Slot::kNone));
  out.member("fp_stored", stored(wire ? wire->fp : WireRow::Slot::kNone));
  out.member("outermost", row.outermost());
  out.member("ra_mangled", row.ra_mangled);
  out.key("cfa");
  write_rule(out, s, row.cfa);
  out.key("ra");
  write_rule(out, s, row.ra);
  out.key("fp");
  write_rule(out, s, row.fp);
  out.member("text", rules_in_words(s, row));
  out.end();
}

}  // namespace

std::string rules_in_words(const Section& s, const FrameRow& row) {
  if (row.outermost()) return "RA undefined (outermost frame)";
  std::string out = rule_words(s, "CFA", row.cfa);
  out += "; " + rule_words(s, "RA", row.ra);
  out += "; " + rule_words(s, "FP", row.fp);
  if (row.ra_mangled) out += "; RA signed (PAuth)";
  return out;
}

std::string json_text(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::string hex(std::uint64_t v) {
  char tmp[2 + 16];
  tmp[0] = '0';
  tmp[1] = 'x';
  const auto r = std::to_chars(tmp + 2, tmp + sizeof tmp, v, 16);
  return std::string(tmp, r.ptr);
}

std::string error_text(const Error& e) {
  std::string s = fmt::format("{} [{}] at byte 0x{:x}", describe(e.code()), code_name(e.code()), e.offset);
  if (e.fde != kNoIndex) s += fmt::format(", FDE {}", e.fde);
  if (e.fre != kNoIndex) s += fmt::format(", FRE {}", e.fre);
  if (e.value != 0) s += fmt::format(" (value {:#x})", e.value);
  return s;
}

std::string write_error_text(const Error& e) {
  if (e.code() == IoErrc::kIoError && e.value != 0) return std::strerror(static_cast<int>(e.value));
  return error_text(e);
}

Json error_json(const Error& e) {
  Json j;
  j["code"] = std::string(code_name(e.code()));
  j["message"] = std::string(describe(e.code()));
  j["offset"] = e.offset;
  j["value"] = hex(e.value);
  j["fde"] = e.fde == kNoIndex ? Json(nullptr) : Json(e.fde);
  j["fre"] = e.fre == kNoIndex ? Json(nullptr) : Json(e.fre);
  return j;
}

Json header_json(const Header& h) {
  Json j;
  j["version"] = static_cast<int>(h.version);
  j["flags"] = h.flags;
  j["flag_names"] = flag_names(h.flags, h.version);
  j["abi"] = static_cast<int>(h.abi);
  j["abi_name"] = std::string(abi_name(h.abi));
  j["cfa_fixed_fp_offset"] = h.cfa_fixed_fp_offset;
  j["cfa_fixed_ra_offset"] = h.cfa_fixed_ra_offset;
  j["auxhdr_len"] = h.auxhdr_len;
  j["num_fdes"] = h.num_fdes;
  j["num_fres"] = h.num_fres;
  j["fre_len"] = h.fre_len;
  j["fdeoff"] = h.fdeoff;
  j["freoff"] = h.freoff;
  return j;
}

Json fde_json(const Fde& f) {
  JsonBuilder out;
  out.begin_object();
  write_fde_fields(out, f);
  out.end();
  return out.take();
}

Json fre_json(const Section& s, const Fde& f, const Fre& fre, const FrameRow& row) {
  JsonBuilder out;
  write_fre(out, s, f, fre, row);
  return out.take();
}

Expected<void> write_section_json(JsonStream& out, const Section& s, std::string_view name) {
  out.begin_object();
  out.member("name", std::string(name));
  out.member("address", hex(s.address()));
  out.member("byte_order", s.big_endian() ? "big" : "little");
  out.member("header", header_json(s.header()));
  out.key("fdes");
  out.begin_array();
  Expected<void> result;
  for (std::uint32_t i = 0; i < s.num_fdes() && result; ++i) {
    auto f = s.fde(i);
    if (!f) {
      result = Unexpected{f.error()};
      break;
    }
    out.begin_object();
    write_fde_fields(out, *f);
    out.key("fres");
    out.begin_array();
    for (const auto& fre : s.fres(*f)) {
      if (!fre) {
        result = Unexpected{fre.error()};
        break;
      }
      auto row = s.row(*f, *fre);
      if (!row) {
        result = Unexpected{row.error()};
        break;
      }
      write_fre(out, s, *f, *fre, *row);
    }
    out.end();
    out.end();
  }
  out.end();
  out.end();
  return result;
}

Expected<Stats> compute_stats(const Section& s, const std::vector<elf::SectionHeader>& sections,
                              std::uint64_t sframe_file_size) {
  Stats st;
  st.sframe_bytes = sframe_file_size;
  st.used_bytes = s.used_size();
  std::uint64_t text_lo = 0, text_hi = 0;
  for (const auto& sh : sections) {
    if (sh.name == ".eh_frame") st.eh_frame_bytes = sh.size;
    if (sh.name == ".eh_frame_hdr") st.eh_frame_hdr_bytes = sh.size;
    if (sh.name == ".text") {
      text_lo = sh.address;
      text_hi = sh.address + sh.size;
    }
  }
  st.text_bytes = text_hi - text_lo;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  ranges.reserve(s.num_fdes());
  // The FRE counts of one FDE's FREs (spec §2.4: an FDE's FREs are
  // `num_fres` records from `fres_begin`, read by its FRE type).
  struct BlockStats {
    std::array<std::uint64_t, 3> dataword_sizes{};
    std::array<std::uint64_t, 16> dataword_counts{};
    std::uint64_t mangled_ra_fres = 0;
  };
  // FDEs may share one FRE block (the spec does not forbid it; the encoder's
  // share_fre_blocks does it): each block is decoded once, else N FDEs on a
  // block of M FREs would cost N x M decodes for N x 20 + 3 x M input bytes.
  // Runs that overlap without being the same block (lenient sections only)
  // could still multiply the work: the decodes are bounded by the bytes.
  std::map<std::tuple<std::uint64_t, std::uint32_t, int>, BlockStats> blocks;
  std::uint64_t budget = 2 * s.bytes().size() + s.num_fdes() + 16;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    auto f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    ++st.fre_types[static_cast<int>(f->fre_type)];
    ++st.pc_types[static_cast<int>(f->pc_type)];
    ++st.fde_types[static_cast<int>(f->fde_type)];
    st.signal_fdes += f->signal;
    ranges.emplace_back(f->start_pc, f->start_pc + f->size);
    st.fres += f->num_fres;
    const auto [it, fresh] = blocks.try_emplace({f->fres_begin, f->num_fres, static_cast<int>(f->fre_type)});
    BlockStats& b = it->second;
    if (fresh) {
      for (const auto& fre : s.fres(*f)) {
        if (!fre) return Unexpected{fre.error()};
        if (budget-- == 0) return make_error(FormatErrc::kFdeFresOverlap, f->fres_begin, 0, i);
        ++b.dataword_sizes[fre->dataword_size == 1 ? 0 : fre->dataword_size == 2 ? 1 : 2];
        ++b.dataword_counts[fre->dataword_count];
        b.mangled_ra_fres += fre->mangled_ra();
      }
    }
    for (std::size_t k = 0; k < b.dataword_sizes.size(); ++k) st.dataword_sizes[k] += b.dataword_sizes[k];
    for (std::size_t k = 0; k < b.dataword_counts.size(); ++k) st.dataword_counts[k] += b.dataword_counts[k];
    st.mangled_ra_fres += b.mangled_ra_fres;
  }
  // Union of function ranges, intersected with .text.
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t cur_lo = 0, cur_hi = 0;
  const auto flush = [&] {
    const std::uint64_t lo = std::max(cur_lo, text_lo), hi = std::min(cur_hi, text_hi);
    if (hi > lo) st.text_covered += hi - lo;
  };
  for (const auto& [lo, hi] : ranges) {
    if (lo > cur_hi) {
      flush();
      cur_lo = lo;
      cur_hi = hi;
    } else {
      cur_hi = std::max(cur_hi, hi);
    }
  }
  flush();
  return st;
}

Json stats_json(const Section& s, const Stats& st) {
  Json j;
  j["version"] = static_cast<int>(s.version());
  j["abi"] = std::string(abi_name(s.abi()));
  j["byte_order"] = s.big_endian() ? "big" : "little";
  j["flag_names"] = flag_names(s.header().flags, s.version());
  j["num_fdes"] = s.num_fdes();
  j["num_fres"] = st.fres;
  j["fre_types"] = {{"addr1", st.fre_types[0]}, {"addr2", st.fre_types[1]}, {"addr4", st.fre_types[2]}};
  j["pc_types"] = {{"inc", st.pc_types[0]}, {"mask", st.pc_types[1]}};
  j["fde_types"] = {{"default", st.fde_types[0]}, {"flex", st.fde_types[1]}};
  j["signal_fdes"] = st.signal_fdes;
  j["dataword_sizes"] = {{"1", st.dataword_sizes[0]}, {"2", st.dataword_sizes[1]}, {"4", st.dataword_sizes[2]}};
  Json counts = Json::object();
  for (std::size_t n = 0; n < st.dataword_counts.size(); ++n)
    if (st.dataword_counts[n]) counts[std::to_string(n)] = st.dataword_counts[n];
  j["dataword_counts"] = std::move(counts);
  j["mangled_ra_fres"] = st.mangled_ra_fres;
  j["bytes"] = {{"sframe", st.sframe_bytes},
                {"sframe_used", st.used_bytes},
                {"eh_frame", st.eh_frame_bytes},
                {"eh_frame_hdr", st.eh_frame_hdr_bytes}};
  j["text"] = {{"bytes", st.text_bytes}, {"covered", st.text_covered}};
  return j;
}

}  // namespace sframe::tools
