// SPDX-License-Identifier: MIT
// objdump-compatible text. Column widths, signs and markers follow GNU
// objdump's output exactly, including its quirks (see notes inline).
#include "objdump_text.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <iterator>

namespace sframe::tools {
namespace {

using Out = std::back_insert_iterator<std::string>;

std::string reg_name(Abi abi, std::uint16_t regnum) {
  const AbiRegs regs = abi_regs(abi);
  if (regnum == regs.sp) return "sp";
  if (regnum == regs.fp) return "fp";
  return fmt::format("r{}", regnum);
}

// FLEX rules print "reg+off" or "(reg+off)"; objdump shows the dereference
// only for register-based rules, and names the CFA base "c".
std::string flex_rule(Abi abi, const Rule& r) {
  const std::string base = r.base == Rule::Base::kRegister ? reg_name(abi, r.regnum) : "c";
  if (r.base == Rule::Base::kRegister && r.deref) return fmt::format("({}{:+d})", base, r.offset);
  return fmt::format("{}{:+d}", base, r.offset);
}

std::string saved_rule(const Rule& r) {
  if (r.base == Rule::Base::kRegister) return fmt::format("r{}", r.regnum);
  return fmt::format("c{:+d}", r.offset);
}

void header_v2v3(Out o, const Header& h) {
  fmt::format_to(o, "\n  Header :\n\n    Version: SFRAME_VERSION_{}\n", static_cast<int>(h.version));
  std::uint8_t f = h.flags;
  if (f == 0) {
    fmt::format_to(o, "{:>11}NONE\n", "Flags: ");
  } else {
    std::string_view prefix = "Flags: ";
    const auto flag = [&](std::uint8_t bit, std::string_view name) {
      if (!(f & bit)) return;
      f = static_cast<std::uint8_t>(f & ~bit);
      fmt::format_to(o, "{:>11}{}{}\n", prefix, name, f ? "," : "");
      prefix = " ";
    };
    flag(flags::kFdeSorted, "SFRAME_F_FDE_SORTED");
    if (h.version == Version::kV2) flag(flags::kFramePointer, "SFRAME_F_FRAME_POINTER");
    flag(flags::kFdeFuncStartPcrel, "SFRAME_F_FDE_FUNC_START_PCREL");
    if (f) fmt::format_to(o, "{:>11}{}\n", prefix, f);
  }
  if (h.cfa_fixed_fp_offset) fmt::format_to(o, "    CFA fixed FP offset: {}\n", h.cfa_fixed_fp_offset);
  if (h.cfa_fixed_ra_offset) fmt::format_to(o, "    CFA fixed RA offset: {}\n", h.cfa_fixed_ra_offset);
  fmt::format_to(o, "    Num FDEs: {}\n    Num FREs: {}\n", static_cast<std::int32_t>(h.num_fdes),
                 static_cast<std::int32_t>(h.num_fres));
}

// objdump 2.40 names one flag at most: its flag string was built with strcpy,
// so FRAME_POINTER replaces FDE_SORTED and unknown bits print nothing.
void header_v1(Out o, const Header& h) {
  std::string_view fl = h.flags == 0 ? "NONE" : "";
  if (h.flags & flags::kFdeSorted) fl = "SFRAME_F_FDE_SORTED";
  if (h.flags & flags::kFramePointer) fl = "SFRAME_F_FRAME_POINTER";
  fmt::format_to(o, "\n  Header :\n\n    Version: SFRAME_VERSION_1\n    Flags: {}\n", fl);
  fmt::format_to(o, "    Num FDEs: {}\n    Num FREs: {}\n", static_cast<std::int32_t>(h.num_fdes),
                 static_cast<std::int32_t>(h.num_fres));
}

// Rows print as stored (the raw view `w`: padding words as "U", the
// header's fixed RA as "f"), the values from the resolved row `r`.
void row_default(Out o, const Section& s, const WireRow& w, const FrameRow& r) {
  const Abi abi = s.abi();
  if (r.outermost()) {
    fmt::format_to(o, "  RA undefined");
    return;
  }
  fmt::format_to(o, "  {:<10}", fmt::format("{}+{}", reg_name(abi, r.cfa.regnum), r.cfa.offset));
  fmt::format_to(o, "{:<10}", r.fp.kind == Rule::Kind::kExpr ? saved_rule(r.fp) : "u");
  std::string ra;
  if (s.header().cfa_fixed_ra_offset != 0) {
    ra = "f";
  } else if (w.ra == WireRow::Slot::kPadding) {
    ra = "U";
  } else if (r.ra.kind == Rule::Kind::kExpr) {
    ra = saved_rule(r.ra);
  } else {
    ra = "u";
  }
  ra += w.fre.mangled_ra() ? "[s]" : "   ";
  fmt::format_to(o, "{:<13}", ra);
}

void row_flex(Out o, const Section& s, const WireRow& w, const FrameRow& r) {
  const Abi abi = s.abi();
  if (r.outermost()) {
    fmt::format_to(o, "  RA undefined");
    return;
  }
  fmt::format_to(o, "  {:<10}", flex_rule(abi, r.cfa));
  fmt::format_to(o, "{:<10}", w.fp == WireRow::Slot::kWord ? flex_rule(abi, r.fp) : "u");
  // Built with fmt, not string assignment: g++ 12 -O3 warns falsely
  // (-Wrestrict) on assigning a literal to a std::string here.
  const char* mark = w.fre.mangled_ra() ? "[s]" : "   ";
  if (w.ra == WireRow::Slot::kWord) {
    fmt::format_to(o, "{:<13}", fmt::format("{}{}", flex_rule(abi, r.ra), mark));
  } else {
    const char* ra = w.ra == WireRow::Slot::kPadding ? "U" : r.ra.kind == Rule::Kind::kExpr ? "f" : "u";
    fmt::format_to(o, "{}{}{:<9}", ra, mark, "");
  }
}

// objdump 2.40 (v1): RA prints "u" when the header fixes it, no "RA
// undefined" form, and the CFA of an FRE without data words reads as +0.
void row_v1(Out o, const Section& s, const WireRow& w, const FrameRow& r) {
  const Abi abi = s.abi();
  const AbiRegs regs = abi_regs(abi);
  const std::uint16_t base = w.fre.cfa_base_sp() ? regs.sp : regs.fp;
  const std::int32_t cfa = r.cfa.kind == Rule::Kind::kExpr ? r.cfa.offset : 0;
  fmt::format_to(o, "  {:<10}", fmt::format("{}+{}", reg_name(abi, base), cfa));
  const auto stack_slot = [](WireRow::Slot slot, const Rule& rule) {
    return slot == WireRow::Slot::kWord ? fmt::format("c{:+d}", rule.offset) : std::string("u");
  };
  fmt::format_to(o, "{:<10}", stack_slot(w.fp, r.fp));
  fmt::format_to(o, "{:<13}", stack_slot(w.ra, r.ra) + (w.fre.mangled_ra() ? "[s]" : "   "));
}

Expected<void> function(Out o, const Section& s, const Fde& f) {
  const bool v1 = s.version() == Version::kV1;
  fmt::format_to(o, "\n    func idx [{}]: pc = 0x{:x}, size = {} bytes", static_cast<std::int32_t>(f.index), f.start_pc,
                 static_cast<std::int32_t>(f.size));
  if (!v1) {
    const bool flex = f.fde_type == FdeType::kFlex;
    if (f.signal || flex) fmt::format_to(o, ", attr = \"{}{}\"", f.signal ? "S" : "", flex ? "F" : "");
    const bool aarch64 = s.abi() == Abi::kAarch64Big || s.abi() == Abi::kAarch64Little;
    if (aarch64 && f.pauth_key == PauthKey::kB) fmt::format_to(o, ", pauth = B key");
  }
  const bool mask = f.pc_type == PcType::kMask;
  fmt::format_to(o, "\n    {:<7}{:<8} {:<10}{:<10}{:<13}", "STARTPC", mask ? "[m]" : "   ", "CFA", "FP", "RA");
  for (const Expected<Fre>& fre : s.fres(f)) {
    if (!fre) return Unexpected{fre.error()};
    const Expected<WireRow> wire = s.wire_row(f, *fre);
    if (!wire) return Unexpected{wire.error()};
    const Expected<FrameRow> row = s.row(f, *fre);
    if (!row) return Unexpected{row.error()};
    const std::uint64_t pc = mask ? fre->start_offset : f.start_pc + fre->start_offset;
    fmt::format_to(o, "\n    {:016x}", pc);
    if (v1) {
      row_v1(o, s, *wire, *row);
    } else if (f.fde_type == FdeType::kFlex) {
      row_flex(o, s, *wire, *row);
    } else {
      row_default(o, s, *wire, *row);
    }
  }
  return {};
}

}  // namespace

std::string_view bfd_target_name(const elf::ElfInfo& info) {
  const bool b64 = info.bits == 64;
  switch (info.machine) {
    case EM_X86_64: return b64 ? "elf64-x86-64" : "elf32-x86-64";
    case EM_386: return "elf32-i386";
    case EM_AARCH64:
      if (b64) return info.big_endian ? "elf64-bigaarch64" : "elf64-littleaarch64";
      return info.big_endian ? "elf32-bigaarch64" : "elf32-littleaarch64";
    case EM_S390: return b64 ? "elf64-s390" : "elf32-s390";
    default: break;
  }
  if (b64) return info.big_endian ? "elf64-big" : "elf64-little";
  return info.big_endian ? "elf32-big" : "elf32-little";
}

void append_banner(std::string& out, std::string_view file, std::string_view target) {
  fmt::format_to(std::back_inserter(out), "\n{}:     file format {}\n\n", file, target);
}

Expected<void> append_section(std::string& out, const Section& s, std::string_view name) {
  Out o(out);
  fmt::format_to(o, "Contents of the SFrame section {}:", name);
  if (s.version() == Version::kV1) {
    header_v1(o, s.header());
  } else {
    header_v2v3(o, s.header());
  }
  fmt::format_to(o, "\n  Function Index :\n");
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    const Expected<Fde> f = s.fde(i);
    if (!f) return Unexpected{f.error()};
    if (auto ok = function(o, s, *f); !ok) return ok;
    fmt::format_to(o, "\n");
  }
  return {};
}

}  // namespace sframe::tools
