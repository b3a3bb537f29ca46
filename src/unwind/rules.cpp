// SPDX-License-Identifier: MIT
// Rule lookup for the unwinder: PC -> module -> FDE/FRE -> resolved row, and
// its compact (cacheable) form. Allocation-free and async-signal-safe.
#include <limits>
#include <vector>

#include "sframe/unwind/unwind.hpp"
#include "sframe/format/lookup.hpp"
#include "module_hint.hpp"

namespace sframe::detail {

namespace {

// A CFA-relative stack slot whose offset fits CompactRule's scaled byte.
bool compact_slot(const Rule& r, std::int8_t& by_8) noexcept {
  if (r.kind != Rule::Kind::kExpr || r.base != Rule::Base::kCfa || !r.deref) return false;
  if (r.offset % 8 != 0) return false;
  const std::int32_t q = r.offset / 8;
  if (q < std::numeric_limits<std::int8_t>::min() || q > std::numeric_limits<std::int8_t>::max()) return false;
  by_8 = static_cast<std::int8_t>(q);
  return true;
}

bool compact(const FrameRow& row, Arch arch, bool signal, CompactRule& c) noexcept {
  const ArchRegs ar = arch_regs(arch);
  c = CompactRule{};
  if (row.cfa.kind != Rule::Kind::kExpr || row.cfa.base != Rule::Base::kRegister || row.cfa.deref) return false;
  if (row.cfa.regnum == ar.fp) c.flags |= CompactRule::kCfaBaseFp;
  else if (row.cfa.regnum != ar.sp) return false;
  c.cfa_offset = row.cfa.offset;
  if (row.outermost()) {
    c.flags |= CompactRule::kRaUndefined;
  } else if (row.ra.kind == Rule::Kind::kUnchanged) {
    if (ar.ra == kNoRegister) return false;
    c.flags |= CompactRule::kRaInRegister;
  } else if (compact_slot(row.ra, c.ra_offset_by_8)) {
    c.flags |= CompactRule::kRaOnStack;
  } else {
    return false;
  }
  if (row.fp.kind == Rule::Kind::kExpr) {
    if (!compact_slot(row.fp, c.fp_offset_by_8)) return false;
    c.flags |= CompactRule::kFpOnStack;
  } else if (row.fp.kind != Rule::Kind::kUnchanged) {
    return false;
  }
  if (row.ra_mangled) c.flags |= CompactRule::kRaMangled;
  if (signal) c.flags |= CompactRule::kSignal;
  return true;
}

// A found row (Section::row applied the header's fixed offsets), and its
// compact form when it has one.
LookedUpRules found_rules(Arch arch, const FrameRow& row, bool signal, FdeType type) noexcept {
  LookedUpRules out;
  out.row = row;
  out.status = LookupStatus::kFound;
  out.signal = signal;
  out.compactable = type == FdeType::kDefault && compact(out.row, arch, out.signal, out.compact);
  if (!out.compactable && out.row.outermost()) {
    // An outermost frame, whatever its FDE type (gen writes _start's as
    // FLEX): nothing of the rule but "stop" is used, so it is cached.
    // A signal FDE's keeps kSignal: the x86-64 walk takes its signal frame
    // first, cached or not.
    out.compact = CompactRule{};
    out.compact.flags = static_cast<std::uint16_t>(CompactRule::kRaUndefined | (signal ? CompactRule::kSignal : 0));
    out.compactable = true;
  }
  return out;
}

// The outcome of a failed FDE/FRE lookup.
LookedUpRules not_found(const Section& s, const Error& e) noexcept {
  LookedUpRules out;
  if (e.is(LookupErrc::kPcNotCovered)) return out;
  if (e.is(LookupErrc::kPcBeforeFirstFre)) {
    // A DEFAULT FDE without FREs marks an outermost frame (v3 errata).
    Expected<Fde> fde = s.fde(e.fde);
    if (fde && fde->num_fres == 0 && fde->fde_type == FdeType::kDefault) out.status = LookupStatus::kOutermost;
    return out;
  }
  out.status = LookupStatus::kDecodeError;
  out.error = e.code();
  return out;
}

LookedUpRules lookup_in_rows(const RowIndex& rows, const Section& s, Arch arch, std::uint64_t link_pc) noexcept {
  // The distinct row when there is one (find() would also say which FRE,
  // decoding its FDE's FREs); find() for PC-mask FDEs.
  Expected<std::uint32_t> id = rows.find_row(link_pc);
  if (!id) return not_found(s, id.error());
  if (*id != RowIndex::kUseFind) return found_rules(arch, rows.row_at(*id), rows.row_signal(*id), rows.row_fde_type(*id));
  Expected<RowMatch> found = rows.find(link_pc);
  if (!found) return not_found(s, found.error());
  // FLEX FDEs' rows never go into the cache; the type comes with the row.
  const FdeType type = found->fde_type;
  return found_rules(arch, found->row, found->signal, type);
}

// Through the module's compiled rows: one 8-byte rule for a compactable
// row, the decoded row otherwise; PC-mask FDEs through RowIndex::find.
LookedUpRules lookup_in_compiled(const Module& m, const Section& s, Arch arch, std::uint64_t link_pc) noexcept {
  Expected<std::uint32_t> id = m.rows->find_row(link_pc);
  if (!id) return not_found(s, id.error());
  if (*id == RowIndex::kUseFind) return lookup_in_rows(*m.rows, s, arch, link_pc);
  const CompactRule& c = m.compact_rows[*id];
  if (!(c.flags & CompactRule::kValid))
    return found_rules(arch, m.rows->row_at(*id), m.rows->row_signal(*id), m.rows->row_fde_type(*id));
  LookedUpRules out;
  out.status = LookupStatus::kFound;
  out.signal = m.rows->row_signal(*id);
  out.compactable = true;
  out.compact = c;  // kValid kept: whole-value copies only (no partial store to stall a load)
  return out;
}

}  // namespace

ModuleHint::Slot slot_of(const Module& m, Arch arch) noexcept {
  ModuleHint::Slot slot;
  slot.begin = m.range.begin;
  slot.size = m.range.end - m.range.begin;
  slot.bias = m.bias;
  const bool lean = m.rows && m.compact_rows && arch_of(m.section.abi()) == arch;
  slot.rows = lean ? m.rows->view().rebased(m.bias) : RowIndex::View{};
  slot.compact = lean ? m.compact_rows : nullptr;
  return slot;
}

bool fill_hint(const ModuleMap& modules, Arch arch, std::uint64_t lookup_pc, ModuleHint::Slot& slot) noexcept {
  const Module* m = modules.find(lookup_pc);
  if (!m) {
    slot = ModuleHint::Slot{};
    return false;
  }
  slot = slot_of(*m, arch);
  return true;
}

std::vector<CompactRule> compile_rows(const RowIndex& rows, const Section& /*s: the rows are resolved*/, Arch arch) {
  std::vector<CompactRule> out(rows.num_rows());
  for (std::uint32_t id = 0; id < rows.num_rows(); ++id) {
    const LookedUpRules r = found_rules(arch, rows.row_at(id), rows.row_signal(id), rows.row_fde_type(id));
    if (!r.compactable) continue;
    out[id] = r.compact;
    out[id].flags |= CompactRule::kValid;
  }
  return out;
}

LookedUpRules lookup_rules(const ModuleMap& modules, Arch arch, std::uint64_t lookup_pc) noexcept {
  LookedUpRules out;
  const Module* m = modules.find(lookup_pc);
  if (!m) return out;
  const Section& s = m->section;
  if (arch_of(s.abi()) != arch) {
    out.status = LookupStatus::kDecodeError;
    out.error = FormatErrc::kBadAbi;
    return out;
  }
  const std::uint64_t link_pc = lookup_pc - m->bias;
  if (m->rows && m->compact_rows) return lookup_in_compiled(*m, s, arch, link_pc);
  if (m->rows) return lookup_in_rows(*m->rows, s, arch, link_pc);
  Expected<Match> found = m->index ? m->index->find(link_pc) : find(s, link_pc);
  if (!found) return not_found(s, found.error());
  return found_rules(arch, found->row, found->fde.signal, found->fde.fde_type);
}

}  // namespace sframe::detail
