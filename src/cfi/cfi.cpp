// SPDX-License-Identifier: MIT
// DWARF CFI -> SFrame rows. libdw interprets the CFA programs; this file
// recognizes the location descriptions it returns and maps them to rules.
#include "sframe/cfi/cfi.hpp"

#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "../unwind/translate.hpp"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

namespace sframe::cfi {

std::optional<Abi> abi_of(const elf::ElfInfo& info) {
  if (info.bits != 64) return std::nullopt;
  switch (info.machine) {
    case EM_X86_64: return Abi::kAmd64Little;
    case EM_AARCH64: return info.big_endian ? Abi::kAarch64Big : Abi::kAarch64Little;
    case EM_S390: return Abi::kS390xBig;
    default: return std::nullopt;
  }
}

namespace {

using detail::fits32;
using detail::Loc;

// Register rules: offset(N) = [call_frame_cfa, plus_uconst N], val_offset
// adds stack_value, register(R) = [regx R], expression(E) = E.
Loc parse_register_rule(const Dwarf_Op* ops, std::size_t n) {
  Loc out;
  bool value = false;
  if (n > 0 && ops[n - 1].atom == DW_OP_stack_value) {
    value = true;
    --n;
  }
  // DW_CFA_expression rules come with the CFA pushed first; an expression
  // that starts by pushing a register leaves that pushed CFA unused.
  if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
      (ops[1].atom == DW_OP_bregx || (ops[1].atom >= DW_OP_breg0 && ops[1].atom <= DW_OP_breg31))) {
    ++ops;
    --n;
  }
  const auto off_ok = [&](std::int64_t v) { return fits32(v); };
  if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kCfa, 0, 0, !value);
  } else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst &&
             off_ok(static_cast<std::int64_t>(ops[1].number))) {
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kCfa, 0, static_cast<std::int32_t>(ops[1].number), !value);
  } else if (n == 1 && !value && (ops[0].atom == DW_OP_regx || (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31))) {
    const auto reg = ops[0].atom == DW_OP_regx ? ops[0].number : ops[0].atom - DW_OP_reg0;
    if (reg > 0xffff) return out;  // SFrame register numbers are 16-bit
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(reg), 0, false);
  } else if (n == 1 && (ops[0].atom == DW_OP_bregx || (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31))) {
    const bool x = ops[0].atom == DW_OP_bregx;
    const auto reg = x ? ops[0].number : ops[0].atom - DW_OP_breg0;
    const auto off = static_cast<std::int64_t>(x ? ops[0].number2 : ops[0].number);
    if (off_ok(off) && reg <= 0xffff) {
      out.kind = Loc::Kind::kRule;
      out.rule =
          make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(reg), static_cast<std::int32_t>(off), !value);
    }
  }
  return out;
}

// The CFA: reg + offset ([bregx R off]), or *(reg + offset) for DRAP.
std::optional<Rule> parse_cfa(const Dwarf_Op* ops, std::size_t n) {
  if (n == 0 || n > 2) return std::nullopt;
  const bool deref = n == 2;
  if (deref && ops[1].atom != DW_OP_deref) return std::nullopt;
  const bool x = ops[0].atom == DW_OP_bregx;
  if (!x && !(ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31)) return std::nullopt;
  const auto reg = x ? ops[0].number : ops[0].atom - DW_OP_breg0;
  const auto off = static_cast<std::int64_t>(x ? ops[0].number2 : ops[0].number);
  if (!fits32(off) || reg > 0xffff) return std::nullopt;
  return make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(reg), static_cast<std::int32_t>(off), deref);
}

Loc register_loc(Dwarf_Frame* frame, int regno) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  std::size_t n = 0;
  Loc out;
  if (dwarf_frame_register(frame, regno, mem, &ops, &n) != 0) return out;
  if (n == 0) {
    out.kind = ops == nullptr ? Loc::Kind::kSame : Loc::Kind::kUndefined;
    return out;
  }
  return parse_register_rule(ops, n);
}

// Translates one libdw frame into an SFrame row for `abi`, as our reader
// translates its rows (detail::translate).
Row translate(Dwarf_Frame* frame, Abi abi, std::int8_t fixed_ra) {
  Dwarf_Addr start = 0, end = 0;
  bool signal = false;
  dwarf_frame_info(frame, &start, &end, &signal);
  Dwarf_Op* cops = nullptr;
  std::size_t cn = 0;
  std::optional<Rule> cfa;
  if (dwarf_frame_cfa(frame, &cops, &cn) == 0) cfa = parse_cfa(cops, cn);
  Row row = detail::translate(cfa, register_loc(frame, detail::ra_column(abi)),
                              register_loc(frame, abi_regs(abi).fp), signal, false, abi, fixed_ra);
  row.start = start;
  row.end = end;
  return row;
}

// An FDE as .eh_frame_hdr's binary-search table lists it, with what one
// dwarf_cfi_addrframe call on it may cost: libdw runs the CIE's initial
// instructions and the FDE's program up to the PC asked for, so a call
// costs at most the bytes of both records.
struct FdeEntry {
  std::uint64_t start = 0;
  std::uint64_t cost = 0;
};

// By start address, duplicates dropped.
void sort_unique(std::vector<FdeEntry>& v) {
  std::sort(v.begin(), v.end(), [](const FdeEntry& x, const FdeEntry& y) { return x.start < y.start; });
  v.erase(std::unique(v.begin(), v.end(), [](const FdeEntry& x, const FdeEntry& y) { return x.start == y.start; }),
          v.end());
}

// The FDEs of .eh_frame_hdr's table (else of .eh_frame itself), by start
// address (duplicates dropped). Which FDEs exist and where their records
// lie is decoded by our reader (read_eh_frame_hdr(), for_each_fde_record());
// libdw reads their rows.
std::optional<std::vector<FdeEntry>> fde_entries(const elf::ElfFile& file, Abi abi, std::uint64_t& eh_frame_size) {
  const bool big = file.info().big_endian;
  const auto hdr_bytes = file.section_bytes(".eh_frame_hdr");
  std::optional<EhFrameHdr> hdr;
  if (hdr_bytes) {
    Expected<EhFrameHdr> h = read_eh_frame_hdr(hdr_bytes->bytes, hdr_bytes->header.address, big);
    if (!h) return std::nullopt;
    hdr = *h;
  }
  // Static executables and relocated objects have no .eh_frame_hdr (for an
  // object only once relocated: its FDE addresses are relocations); LSB 5.0
  // §10.6.2: a header whose table is omitted (ld writes one so when it
  // cannot read an input's .eh_frame) has readers search .eh_frame too.
  const bool walk = !hdr || !hdr->has_table;
  if (walk && file.info().type == ET_REL && !file.relocated()) return std::nullopt;
  const auto eh = file.section_bytes(".eh_frame");
  if (walk && !eh) return std::vector<FdeEntry>{};
  CfiSource src;
  if (eh) {
    src.bytes = eh->bytes;
    src.address = eh->header.address;
    src.big_endian = big;
    src.address_size = file.info().bits == 64 ? 8 : 4;
    // text_base and data_base 0, as libdw has them (libdw/dwarf_getcfi_elf.c).
  }
  eh_frame_size = src.bytes.size();
  // Every FDE record of .eh_frame, with its and its CIE's size.
  std::vector<FdeRecord> records;
  bool all_read = true;
  const bool listed = static_cast<bool>(for_each_fde_record(src, abi, [&](const FdeRecord& r) {
    all_read &= r.readable;
    records.push_back(r);
  }));
  std::vector<FdeEntry> out;
  if (walk) {
    // An FDE we cannot read, or a record past the end: no listing (libdw
    // could not read it either).
    if (!listed || !all_read) return std::nullopt;
    // An FDE whose address range is 0 describes no instruction (DWARF 5
    // §6.4.1): it is no function, and its start no function boundary
    // (read_cfi() leaves it out too).
    for (const FdeRecord& r : records)
      if (r.end > r.start) out.push_back({r.start, r.size + r.cie_size});
    sort_unique(out);
    return out;
  }
  // A record we cannot size (none there, or its CIE's) is charged as the
  // whole .eh_frame.
  const auto cost_of = [&](std::uint64_t fde_address) {
    const std::uint64_t off = fde_address - src.address;
    const auto it = std::lower_bound(records.begin(), records.end(), off,
                                     [](const FdeRecord& r, std::uint64_t o) { return r.offset < o; });
    if (it == records.end() || it->offset != off || it->cie_size == 0) return src.bytes.size() + 1;
    return it->size + it->cie_size;
  };
  out.reserve(hdr->count);
  for (std::uint32_t i = 0; i < hdr->count; ++i) out.push_back({hdr->start(i), cost_of(hdr->fde(i))});
  sort_unique(out);
  return out;
}

struct CfiDeleter {
  void operator()(Dwarf_CFI* c) const { dwarf_cfi_end(c); }
};

struct DwarfDeleter {
  void operator()(Dwarf* d) const { dwarf_end(d); }
};

// A CFI section with room for a record beyond a zero terminator.
bool has_records(const std::optional<elf::SectionBytes>& s) { return s && s->bytes.size() >= 8; }

}  // namespace

Expected<void> libdw_functions(const elf::ElfFile& file, const std::function<void(const Function&)>& fn,
                               std::uint64_t* unreadable) {
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  const std::int8_t fixed_ra = *abi == Abi::kAmd64Little ? -8 : 0;
  std::uint64_t eh_frame_size = 0;
  auto fdes = fde_entries(file, *abi, eh_frame_size);
  if (!fdes) return make_error(ElfErrc::kElfError, 0);
  Elf* elf = static_cast<Elf*>(file.native_handle());
  std::unique_ptr<Dwarf_CFI, CfiDeleter> eh_cfi(dwarf_getcfi_elf(elf));
  // .debug_frame comes through a Dwarf handle (dwarf_getcfi), which owns it.
  std::unique_ptr<Dwarf, DwarfDeleter> dwarf;
  Dwarf_CFI* debug_cfi = nullptr;
  const auto debug_frame = file.section_bytes(".debug_frame");
  if (has_records(debug_frame)) {
    dwarf.reset(dwarf_begin_elf(elf, DWARF_C_READ, nullptr));
    if (dwarf) debug_cfi = dwarf_getcfi(dwarf.get());
    // Its FDE starts: libdw lists none, so they come from our reader (each
    // is then looked up by libdw, which fails for a wrong one).
    auto srcs = cfi_sources(file);
    if (srcs) {
      for (const CfiSource& src : *srcs) {
        if (src.kind != CfiKind::kDebugFrame) continue;
        auto ok = read_cfi(src, *abi, [&](const Function& f) {
          fdes->push_back({f.start, 64 + 16 * f.rows.size()});
        });
        (void)ok;
        eh_frame_size += src.bytes.size();
      }
      std::stable_sort(fdes->begin(), fdes->end(),
                       [](const FdeEntry& x, const FdeEntry& y) { return x.start < y.start; });
      fdes->erase(std::unique(fdes->begin(), fdes->end(),
                              [](const FdeEntry& x, const FdeEntry& y) { return x.start == y.start; }),
                  fdes->end());
    }
  }
  if (!eh_cfi && !debug_cfi) return make_error(ElfErrc::kElfError, 0);
  // libdw answers one row per call and runs the FDE's program from its start
  // each time, so a function of R rows costs about R x its CFI bytes. Real
  // files spend under 100 bytes of work per byte of .eh_frame (GCC's cc1plus,
  // with FDEs of 6,677 rows: ~95); a crafted one could make it quadratic.
  const std::uint64_t budget = kCfiWorkBase + kCfiWorkPerByte * eh_frame_size;
  std::uint64_t work = 0;
  Function f;
  for (std::size_t i = 0; i < fdes->size(); ++i) {
    const std::uint64_t next = i + 1 < fdes->size() ? (*fdes)[i + 1].start : UINT64_MAX;
    const std::uint64_t cost = (*fdes)[i].cost;
    f.start = (*fdes)[i].start;
    f.rows.clear();
    std::uint64_t pc = f.start;
    // The CFI holding the FDE: .eh_frame first, as read_cfi() prefers it.
    Dwarf_CFI* cfi = eh_cfi.get();
    // One pass over the FDE's rows: each lookup yields the row's range.
    while (pc < next) {
      if (!f.rows.empty() && work > budget) {
        // Left out whole: the first row's end, or the next FDE, bounds it.
        const std::uint64_t end = next == UINT64_MAX ? f.rows.front().end : next;
        Row whole;
        whole.start = f.start;
        whole.end = end;
        whole.reason = Reason::kCfiTooLong;
        f.rows.assign(1, whole);
        pc = end;
        break;
      }
      work += cost;
      Dwarf_Frame* frame = nullptr;
      int rc = cfi ? dwarf_cfi_addrframe(cfi, pc, &frame) : -1;
      if (rc != 0 && f.rows.empty() && debug_cfi && cfi != debug_cfi) {
        cfi = debug_cfi;
        rc = dwarf_cfi_addrframe(cfi, pc, &frame);
      }
      if (rc != 0) {
        if (f.rows.empty() && unreadable) ++*unreadable;
        break;
      }
      Row row = translate(frame, *abi, fixed_ra);
      std::free(frame);
      if (row.end <= pc) break;
      row.start = pc;
      row.end = std::min(row.end, next);
      pc = row.end;
      f.rows.push_back(row);
    }
    f.end = pc;
    if (!f.rows.empty() && f.end > f.start) fn(f);
  }
  return {};
}

Expected<std::vector<CfiSource>> cfi_sources(const elf::ElfFile& file) {
  const auto& info = file.info();
  // An object's FDE addresses are relocations until applied.
  if (info.type == ET_REL && !file.relocated()) return make_error(ElfErrc::kElfError, 0);
  std::vector<CfiSource> out;
  for (const char* name : {".eh_frame", ".debug_frame"}) {
    const auto s = file.section_bytes(name);
    if (!has_records(s) || s->header.type == SHT_NOBITS) continue;
    CfiSource src;
    src.bytes = s->bytes;
    src.address = s->header.address;
    src.kind = name[1] == 'e' ? CfiKind::kEhFrame : CfiKind::kDebugFrame;
    src.big_endian = info.big_endian;
    src.address_size = info.bits == 64 ? 8 : 4;
    // text_base and data_base stay 0, as libgcc and libdw have them here.
    out.push_back(src);
  }
  if (out.empty()) return make_error(ElfErrc::kElfError, 0);
  return out;
}

std::vector<PltSection> plt_sections(const elf::ElfFile& file) {
  std::vector<PltSection> out;
  if (file.info().machine != EM_X86_64) return out;
  // Names as literals: sections() returns a copy that does not outlive us.
  static constexpr std::string_view kNames[] = {".plt", ".plt.sec", ".plt.got"};
  for (const auto& sh : file.sections())
    for (std::string_view name : kNames)
      if (sh.name == name) out.push_back({name, sh.address, sh.size, (sh.flags & SHF_EXECINSTR) != 0});
  return out;
}

Expected<void> for_each_function(const elf::ElfFile& file, const std::function<void(const Function&)>& fn,
                                 std::uint64_t* unreadable) {
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  auto srcs = cfi_sources(file);
  if (!srcs) return Unexpected{srcs.error()};
  CfiStats stats;
  auto ok = read_cfi(*srcs, *abi, fn, &stats);
  if (unreadable) *unreadable += stats.ours_unreadable;
  return ok;
}

Expected<std::vector<Function>> read_functions(const elf::ElfFile& file) {
  std::vector<Function> out;
  auto ok = for_each_function(file, [&](const Function& f) { out.push_back(f); });
  if (!ok) return Unexpected{ok.error()};
  return out;
}

Expected<SectionSpec> section_header(const elf::ElfFile& file, Version version, std::uint64_t section_address) {
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  return section_header(*abi, version, section_address);
}

namespace {

// What generation reads of a linked file: its ABI, CFI sections and PLTs.
struct FileCfi {
  Abi abi;
  std::vector<CfiSource> sources;
  std::vector<PltSection> plts;
};

Expected<FileCfi> file_cfi(const elf::ElfFile& file) {
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  auto srcs = cfi_sources(file);
  if (!srcs) return Unexpected{srcs.error()};
  return FileCfi{*abi, std::move(*srcs), plt_sections(file)};
}

}  // namespace

Expected<Generated> for_each_generated(const elf::ElfFile& file, Version version, std::uint64_t section_address,
                                       const std::function<void(const FunctionSpec&)>& out) {
  auto in = file_cfi(file);
  if (!in) return Unexpected{in.error()};
  return for_each_generated(in->sources, in->abi, version, section_address, in->plts, out);
}

Expected<Generated> for_each_translated(const elf::ElfFile& file, Version version, std::uint64_t section_address,
                                        const TranslatedSink& out) {
  auto in = file_cfi(file);
  if (!in) return Unexpected{in.error()};
  return for_each_translated(in->sources, in->abi, version, section_address, in->plts, out);
}

Expected<Generated> generate(const elf::ElfFile& file, Version version, std::uint64_t section_address) {
  std::vector<FunctionSpec> functions;
  auto g = for_each_generated(file, version, section_address, [&](const FunctionSpec& f) { functions.push_back(f); });
  if (!g) return g;
  g->spec.functions = std::move(functions);
  return g;
}

namespace {

// Whether libdw may read this CFI: our reader found none of the inputs on
// which libdw allocates a rule per register up to the largest number named
// (elfutils libdw/cfi.c), which a few hostile bytes make gigabytes: numbers
// of 2^16 or more, and bytes ours reads otherwise or not at all (LEB128s
// past 10 bytes, FDEs cut short or unreadable), whose register numbers ours
// cannot vouch for. compare() and compare_readers() both screen with it.
bool libdw_may_run(const CfiStats& stats) {
  return stats.large_regno == 0 && stats.long_leb == 0 && stats.truncated_fdes == 0 && stats.ours_unreadable == 0;
}

// The screening's outcome and the class counts, as both Comparison and
// ReaderComparison report them.
template <class Out>
void screen(const CfiStats& stats, Out& out) {
  static_cast<CfiClassCounts&>(out) = stats;
  out.libdw_run = libdw_may_run(stats);
}

// The FDE `e` (a lookup's kPcBeforeFirstFre) names, when it is a DEFAULT FDE
// without FREs: an outermost frame (spec v3 §1.2, "An SFrame FDE of type
// SFRAME_FDE_TYPE_DEFAULT with no FREs is used to indicate an outermost
// frame"), as the unwinder reads it too.
std::optional<Fde> fde_without_fres(const Section& s, const Error& e) {
  if (!e.is(LookupErrc::kPcBeforeFirstFre) || e.fde == kNoIndex) return std::nullopt;
  Expected<Fde> f = s.fde(e.fde);
  if (!f || f->num_fres != 0 || f->fde_type != FdeType::kDefault) return std::nullopt;
  return *f;
}

// A rule without the fields its kind does not use.
Rule normalized(const Rule& r) {
  if (r.kind != Rule::Kind::kExpr) return Rule{r.kind};
  return r;
}

}  // namespace

Expected<Comparison> compare(const elf::ElfFile& file, const Section& s) {
  auto index = FdeIndex::build(s);
  if (!index) return Unexpected{index.error()};
  const bool x86 = s.abi() == Abi::kAmd64Little;
  const std::vector<PltSection> plt_list = x86 ? plt_sections(file) : std::vector<PltSection>{};
  const detail::PltRanges plt(plt_list);
  Comparison out;
  // Screened by our reader first (libdw_may_run()).
  if (const auto abi = abi_of(file.info()); abi) {
    if (auto srcs = cfi_sources(file); srcs) {
      CfiStats stats;
      if (read_cfi(*srcs, *abi, [](const Function&) {}, &stats)) {
        screen(stats, out);
        if (!out.libdw_run) return out;
      }
    }
  }
  std::vector<std::uint64_t> pcs;
  auto walked = libdw_functions(file, [&](const Function& fn) {
    if (x86 && plt.contains(fn.start)) return;
    ++out.functions_checked;
    // Boundaries: CFI row starts and the starts of SFrame FREs in range.
    pcs.clear();
    for (const Row& r : fn.rows) pcs.push_back(r.start);
    if (auto m = index->find(fn.start); m && m->fde.pc_type == PcType::kInc) {
      for (const auto& fre : s.fres(m->fde)) {
        if (!fre) break;
        const std::uint64_t pc = m->fde.start_pc + fre->start_offset;
        if (pc >= fn.start && pc < fn.end) pcs.push_back(pc);
      }
    }
    std::sort(pcs.begin(), pcs.end());
    pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
    std::size_t row = 0;
    for (std::size_t i = 0; i < pcs.size(); ++i) {
      const std::uint64_t pc = pcs[i];
      while (row + 1 < fn.rows.size() && fn.rows[row + 1].start <= pc) ++row;
      const Row& cfi_row = fn.rows[row];
      auto m = index->find(pc);
      const std::uint64_t end = i + 1 < pcs.size() ? pcs[i + 1] : fn.end;
      if (!m) {
        if (const auto bare = fde_without_fres(s, m.error())) {
          // Both end the stack trace here: they agree.
          if (cfi_row.reason == Reason::kNone && cfi_row.row.outermost()) {
            ++out.pcs_checked;
            continue;
          }
          if (bare->signal) {
            // GNU as writes a signal frame whose CFI it cannot translate so
            // (gas/gen-sframe.c, create_sframe_all): SFrame gives no rules.
            if (!out.no_rules.empty() && out.no_rules.back().end == pc) {
              out.no_rules.back().end = end;
            } else {
              out.no_rules.push_back({pc, end, cfi_row.reason});
            }
            out.no_rules_pcs += 1;
            continue;
          }
          ++out.pcs_checked;
          if (cfi_row.reason != Reason::kNone && !cfi_row.flex) continue;
          FrameRow outermost;
          outermost.ra.kind = Rule::Kind::kUndefined;
          out.mismatches.push_back({pc, fn.start, "RA", outermost, cfi_row.row});
          continue;
        }
        if (!out.missing.empty() && out.missing.back().end == pc) {
          out.missing.back().end = end;
        } else {
          out.missing.push_back({pc, end, detail::blocking_reason(fn, s.version() == Version::kV3)});
        }
        continue;
      }
      ++out.pcs_checked;
      // DWARF rows SFrame cannot hold in any version are not compared.
      if (cfi_row.reason != Reason::kNone && !cfi_row.flex) continue;
      const FrameRow& a = m->row;
      const FrameRow& b = cfi_row.row;
      const auto differ = [&](std::string_view what) { out.mismatches.push_back({pc, fn.start, what, a, b}); };
      if (a.outermost() || b.outermost()) {
        if (a.outermost() != b.outermost()) differ("RA");
        continue;
      }
      if (!(normalized(a.cfa) == normalized(b.cfa))) differ("CFA");
      if (!(normalized(a.ra) == normalized(b.ra))) differ("RA");
      if (!(normalized(a.fp) == normalized(b.fp))) differ("FP");
    }
  }, &out.unreadable_fdes);
  if (!walked) return Unexpected{walked.error()};
  return out;
}

namespace {

// Same translated row, but for the RA signing state libdw does not report.
bool same_row(const Row& a, const Row& b) {
  FrameRow x = a.row, y = b.row;
  x.ra_mangled = y.ra_mangled = false;
  return x == y && a.signal == b.signal && a.flex == b.flex && a.reason == b.reason;
}

// The row of `f` covering `pc`, or null.
const Row* row_at(const Function& f, std::uint64_t pc) {
  auto it = std::upper_bound(f.rows.begin(), f.rows.end(), pc, [](std::uint64_t v, const Row& r) { return v < r.start; });
  if (it == f.rows.begin()) return nullptr;
  --it;
  return pc < it->end ? &*it : nullptr;
}

}  // namespace

Expected<ReaderComparison> compare_readers(const elf::ElfFile& file, std::size_t max_examples,
                                           bool known_classes_only) {
  std::vector<Function> ours, ref;
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  auto srcs = cfi_sources(file);
  if (!srcs) return Unexpected{srcs.error()};
  CfiStats stats;
  auto a = read_cfi(*srcs, *abi, [&](const Function& f) { ours.push_back(f); }, &stats);
  if (!a) return Unexpected{a.error()};
  ReaderComparison out;
  screen(stats, out);
  if (!out.libdw_run || (known_classes_only && out.any())) return out;
  auto b = libdw_functions(file, [&](const Function& f) { ref.push_back(f); }, &out.libdw_unreadable);
  if (!b) return Unexpected{b.error()};
  std::vector<std::uint64_t> pcs;
  std::size_t i = 0, j = 0;
  const Function empty;
  while (i < ours.size() || j < ref.size()) {
    const bool take_ours = j == ref.size() || (i < ours.size() && ours[i].start <= ref[j].start);
    const bool take_ref = i == ours.size() || (j < ref.size() && ref[j].start <= ours[i].start);
    const Function& x = take_ours ? ours[i++] : empty;
    const Function& y = take_ref ? ref[j++] : empty;
    ++out.functions;
    if (y.rows.size() == 1 && y.rows[0].reason == Reason::kCfiTooLong) {
      out.libdw_too_long += x.rows.size();
      continue;
    }
    pcs.clear();
    for (const Row& r : x.rows) pcs.push_back(r.start);
    for (const Row& r : y.rows) pcs.push_back(r.start);
    std::sort(pcs.begin(), pcs.end());
    pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
    for (std::uint64_t pc : pcs) {
      ++out.rows_compared;
      const Row* p = row_at(x, pc);
      const Row* q = row_at(y, pc);
      std::string_view what;
      if (p && q) {
        if (same_row(*p, *q)) continue;
        what = "row";
      } else {
        what = p ? "only ours" : "only libdw";
      }
      ++out.differing_rows;
      if (out.examples.size() < max_examples)
        out.examples.push_back({pc, x.rows.empty() ? y.start : x.start, what, p ? *p : Row{}, q ? *q : Row{}});
    }
  }
  return out;
}

Expected<void> generate(ModuleUnwind& module, const elf::ElfFile& file, std::uint64_t section_address) {
  const auto abi = abi_of(file.info());
  auto srcs = abi ? cfi_sources(file) : Expected<std::vector<CfiSource>>(make_error(EncodeErrc::kNotRepresentable, 0));
  // Recorded as the outcome, as the core records its failures.
  if (!srcs)
    return module.fail_generation(srcs.error(),
                                  "no usable .eh_frame (" + std::string(describe(srcs.error().code())) + ")");
  const std::vector<PltSection> plts = plt_sections(file);
  return module.generate(*srcs, *abi, section_address, plts);
}

Expected<void> enable_on_demand(ModuleUnwind& module, const elf::ElfFile& file) {
  const auto abi = abi_of(file.info());
  if (!abi) return make_error(EncodeErrc::kNotRepresentable, 0, file.info().machine);
  auto srcs = cfi_sources(file);
  if (!srcs) return Unexpected{srcs.error()};
  // .debug_frame FDEs are not in .eh_frame_hdr's table: whole-module
  // generation (generate()) reads both sections.
  if (srcs->size() != 1 || srcs->front().kind != CfiKind::kEhFrame) return make_error(ElfErrc::kElfError, 0);
  auto hdr = file.section_bytes(".eh_frame_hdr");
  if (!hdr || hdr->header.type == SHT_NOBITS) return make_error(ElfErrc::kElfError, 0);
  OnDemandSource src;
  src.eh_frame_hdr = hdr->bytes;
  src.eh_frame_hdr_address = hdr->header.address;
  src.eh_frame = srcs->front();
  src.abi = *abi;
  src.plts = plt_sections(file);
  return module.enable_on_demand(std::move(src));
}

// The deprecated member forms (declared in sframe/unwind/module_unwind.hpp).
Expected<void> ModuleUnwind::generate(const elf::ElfFile& file, std::uint64_t section_address) {
  return cfi::generate(*this, file, section_address);
}

Expected<void> ModuleUnwind::enable_on_demand(const elf::ElfFile& file) { return cfi::enable_on_demand(*this, file); }

}  // namespace sframe::cfi
