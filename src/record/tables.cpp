// SPDX-License-Identifier: MIT
// sframepp: the in-kernel unwind tables of `sframe record` (tables.hpp).
#include "tables.hpp"

#include <algorithm>
#include <span>

#include "perf_unwind.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/process/process.hpp"
#include "sframe/unwind/module_unwind.hpp"

namespace sframe::record {
namespace {

constexpr std::uint64_t kPage = std::uint64_t{1} << SFRAME_RECORD_PAGE_SHIFT;
// With the BPF hash map's element header (48 bytes on 6.x), its key and the
// allocator's 8, a page is 1 KiB (record_abi.h).
static_assert(sizeof(sframe_record_page) == 960);
// x86-64 DWARF register numbers (psABI): RSP 7, RBP 6, RBX 3.
constexpr std::uint16_t kDwarfSp = 7, kDwarfFp = 6, kDwarfBx = 3;

// One rule over link-time [lo, hi).
struct Span {
  std::uint64_t lo, hi;
  sframe_record_row row;  // start unused
};

bool same_rule(const sframe_record_row& a, const sframe_record_row& b) {
  return a.flags == b.flags && a.fp_off8 == b.fp_off8 && a.cfa_off == b.cfa_off;
}

// The row form of an SFrame FrameRow (spec §3.1; x86-64: RA at CFA - 8),
// or a NONE row for what the layout cannot hold.
sframe_record_row row_of(const FrameRow& r, bool generated, TableStats& st) {
  sframe_record_row o{};
  o.flags = generated ? SFRAME_RECORD_ROW_GENERATED : 0;
  if (r.outermost()) {
    o.flags |= SFRAME_RECORD_ROW_OUTERMOST;
    return o;
  }
  const auto none = [&] {
    ++st.unsupported_rules;
    sframe_record_row n{};
    n.flags = SFRAME_RECORD_ROW_NONE;
    return n;
  };
  if (r.cfa.kind != Rule::Kind::kExpr || r.cfa.base != Rule::Base::kRegister || r.cfa.deref ||
      (r.cfa.regnum != kDwarfSp && r.cfa.regnum != kDwarfFp && r.cfa.regnum != kDwarfBx))
    return none();
  if (r.ra.kind != Rule::Kind::kExpr || r.ra.base != Rule::Base::kCfa || !r.ra.deref || r.ra.offset != -8)
    return none();
  if (r.cfa.regnum == kDwarfFp) o.flags |= SFRAME_RECORD_ROW_CFA_FP;
  if (r.cfa.regnum == kDwarfBx) o.flags |= SFRAME_RECORD_ROW_CFA_RBX;
  o.cfa_off = r.cfa.offset;
  if (r.fp.kind == Rule::Kind::kExpr) {
    if (r.fp.base != Rule::Base::kCfa || !r.fp.deref || r.fp.offset % 8 != 0 || r.fp.offset / 8 < -128 ||
        r.fp.offset / 8 > 127)
      return none();
    o.flags |= SFRAME_RECORD_ROW_FP_SAVED;
    o.fp_off8 = static_cast<std::int8_t>(r.fp.offset / 8);
  } else if (r.fp.kind != Rule::Kind::kUnchanged) {
    return none();
  }
  return o;
}

// A PC-mask function (spec §2.3) as one PCMASK row: one SP-based rule, or
// two in 16-byte blocks at 16-byte aligned addresses (x86-64 PLTs), with RA
// at CFA - 8 and FP unchanged; anything else a NONE row.
sframe_record_row pc_mask_row(const Section& s, const Fde& fde, bool generated, TableStats& st) {
  sframe_record_row none{};
  none.flags = SFRAME_RECORD_ROW_NONE;
  // v1 has no block-size field: its PC-mask FDEs mask the PC with 0xf
  // (16-byte blocks), as the library's lookup reads them.
  const unsigned block = fde.rep_size ? fde.rep_size : 16;
  std::vector<std::pair<std::uint32_t, std::int32_t>> rules;  // block offset, CFA offset
  for (const Expected<Fre>& fre : s.fres(fde)) {
    if (!fre) return ++st.unsupported_rules, none;
    auto r = s.row(fde, *fre);
    if (!r) return ++st.unsupported_rules, none;
    const sframe_record_row one = row_of(*r, generated, st);
    if (one.flags & (SFRAME_RECORD_ROW_NONE | SFRAME_RECORD_ROW_OUTERMOST | SFRAME_RECORD_ROW_CFA_FP |
                     SFRAME_RECORD_ROW_CFA_RBX | SFRAME_RECORD_ROW_FP_SAVED) ||
        one.cfa_off < 0 || one.cfa_off > 0xffff || fre->start_offset >= 16)
      return ++st.unsupported_rules, none;
    rules.emplace_back(fre->start_offset, one.cfa_off);
  }
  if (rules.empty() || rules.size() > 2 || rules[0].first != 0) return ++st.unsupported_rules, none;
  // One rule holds at every PC, whatever the blocks (.plt.got's 8-byte
  // entries); two need the 16-byte blocks the row encodes.
  if (rules.size() == 2 && (block != 16 || fde.start_pc % 16 != 0)) return ++st.unsupported_rules, none;
  const std::int32_t second = rules.size() == 2 ? rules[1].second : rules[0].second;
  sframe_record_row o{};
  o.flags = static_cast<std::uint8_t>(SFRAME_RECORD_ROW_PCMASK | (generated ? SFRAME_RECORD_ROW_GENERATED : 0));
  o.fp_off8 = static_cast<std::int8_t>(rules.size() == 2 ? rules[1].first : 16);
  o.cfa_off = static_cast<std::int32_t>(static_cast<std::uint32_t>(rules[0].second) |
                                        static_cast<std::uint32_t>(second) << 16);
  return o;
}

// Every FRE of `s` as a span; PC-mask functions as one span each.
void spans_of(const Section& s, bool generated, std::vector<Span>& out, TableStats& st) {
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    auto fde = s.fde(i);
    if (!fde || fde->size == 0) continue;
    const std::uint64_t end = fde->start_pc + fde->size;
    if (fde->pc_type == PcType::kMask) {
      out.push_back({fde->start_pc, end, pc_mask_row(s, *fde, generated, st)});
      continue;
    }
    std::vector<std::pair<std::uint64_t, sframe_record_row>> rows;
    for (const Expected<Fre>& fre : s.fres(*fde)) {
      if (!fre) break;
      if (fre->start_offset >= fde->size) break;
      auto r = s.row(*fde, *fre);
      sframe_record_row row{};
      if (r) {
        row = row_of(*r, generated, st);
      } else {
        ++st.unsupported_rules;
        row.flags = SFRAME_RECORD_ROW_NONE;
      }
      rows.emplace_back(fde->start_pc + fre->start_offset, row);
    }
    // No FRE: an outermost function (spec v3 §1.2: e.g. a signal-frame FDE
    // written without FREs).
    if (rows.empty()) {
      sframe_record_row o{};
      o.flags = SFRAME_RECORD_ROW_OUTERMOST;
      rows.emplace_back(fde->start_pc, o);
    }
    // Before the first FRE no rule applies (kPcBeforeFirstFre).
    if (rows.front().first > fde->start_pc) {
      sframe_record_row n{};
      n.flags = SFRAME_RECORD_ROW_NONE;
      out.push_back({fde->start_pc, rows.front().first, n});
    }
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::uint64_t hi = k + 1 < rows.size() ? rows[k + 1].first : end;
      if (hi > rows[k].first) out.push_back({rows[k].first, hi, rows[k].second});
    }
  }
}

}  // namespace

ModulePages build_module_pages(const elf::ElfFile& file, TableStats& st) {
  // The shared module builder, whole: the kernel has no generation on demand.
  auto own = file.sframe_section();
  if (own) st.sframe_bytes += own->bytes.size();
  if (auto eh = file.section_bytes(".eh_frame")) st.eh_frame_bytes += eh->bytes.size();
  cfi::ModuleImage img = process::module_image(file, own);
  cfi::ModuleUnwind u = cfi::ModuleUnwind::build(img, {});
  if (u.needs_generation()) {
    auto eh = file.section_bytes(".eh_frame");
    (void)cfi::generate(u, file, eh ? eh->header.address : 0);
  }
  std::vector<Span> spans;
  const bool generated_primary = u.source() == ModuleSource::kGenerated;
  if (u.primary().usable()) spans_of(*u.primary().section, generated_primary, spans, st);
  if (u.extra().usable()) spans_of(*u.extra().section, true, spans, st);
  if (generated_primary || u.extra().usable()) ++st.generated_modules;
  for (const AddressRange& t : u.trampolines()) {
    sframe_record_row r{};
    r.flags = SFRAME_RECORD_ROW_SIGNAL;
    spans.push_back({t.begin, t.end, r});
  }
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });

  // Rows per page: each span's rule at its start (and at the start of every
  // page it continues into), a NONE row where it ends and nothing follows.
  std::map<std::uint32_t, std::vector<sframe_record_row>> rows;
  const auto emit = [&](std::uint64_t at, const sframe_record_row& rule) {
    auto& v = rows[static_cast<std::uint32_t>(at >> SFRAME_RECORD_PAGE_SHIFT)];
    sframe_record_row r = rule;
    r.start = static_cast<std::uint16_t>(at & (kPage - 1));
    if (!v.empty() && v.back().start == r.start) v.pop_back();
    if (!v.empty() && same_rule(v.back(), r)) return;
    if (v.empty() && r.start != 0) {
      sframe_record_row n{};
      n.flags = SFRAME_RECORD_ROW_NONE;
      v.push_back(n);
    }
    v.push_back(r);
  };
  sframe_record_row none{};
  none.flags = SFRAME_RECORD_ROW_NONE;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& sp = spans[i];
    if (sp.hi <= sp.lo || (sp.hi - 1) >> SFRAME_RECORD_PAGE_SHIFT > 0xffffffffu) continue;
    // A span overlapping the next one's start (a trampoline inside a
    // function) ends there; the rest of it resumes after.
    emit(sp.lo, sp.row);
    for (std::uint64_t p = (sp.lo >> SFRAME_RECORD_PAGE_SHIFT) + 1; p <= (sp.hi - 1) >> SFRAME_RECORD_PAGE_SHIFT; ++p)
      if (i + 1 >= spans.size() || spans[i + 1].lo > (p << SFRAME_RECORD_PAGE_SHIFT)) emit(p << SFRAME_RECORD_PAGE_SHIFT, sp.row);
    if (i + 1 >= spans.size() || spans[i + 1].lo > sp.hi) emit(sp.hi, none);
  }
  ModulePages pages;
  const auto useful = [](std::span<const sframe_record_row> v) {
    return std::any_of(v.begin(), v.end(), [](const sframe_record_row& r) { return !(r.flags & SFRAME_RECORD_ROW_NONE); });
  };
  const auto add = [&](std::uint32_t key, std::span<const sframe_record_row> v) {
    pages.add(key, 0, v);
    st.rows += v.size();
  };
  // Sub-pages per page, and the first page whose sub-page keys would reach
  // the SFRAME_RECORD_SUBPAGE bit.
  constexpr std::uint32_t kSubs = 1u << (SFRAME_RECORD_PAGE_SHIFT - SFRAME_RECORD_SUBPAGE_SHIFT);
  constexpr std::uint32_t kSubBytes = 1u << SFRAME_RECORD_SUBPAGE_SHIFT;
  constexpr std::uint32_t kSplitLimit = SFRAME_RECORD_SUBPAGE / kSubs;
  std::vector<sframe_record_row> sub;
  for (auto& [p, v] : rows) {
    if (!useful(v)) continue;
    if (v.size() <= SFRAME_RECORD_PAGE_ROWS) {
      add(p, v);
      continue;
    }
    if (p >= kSplitLimit) {
      ++st.overflow_pages;
      continue;
    }
    // A split page (record_abi.h): each sub-page starts with the rule in
    // effect at its start, as a page does.
    bool split = false;
    std::size_t at = 0;  // the last row starting at or before the sub-page
    for (std::uint32_t k = 0; k < kSubs; ++k) {
      const std::uint32_t lo = k * kSubBytes, hi = lo + kSubBytes;
      while (at + 1 < v.size() && v[at + 1].start <= lo) ++at;
      sub.clear();
      for (std::size_t j = at; j < v.size() && v[j].start < hi; ++j) {
        sframe_record_row r = v[j];
        r.start = static_cast<std::uint16_t>(j == at ? 0 : r.start - lo);
        sub.push_back(r);
      }
      if (!useful(sub)) continue;
      if (sub.size() > SFRAME_RECORD_PAGE_ROWS) {
        ++st.overflow_pages;
        continue;
      }
      add(SFRAME_RECORD_SUBPAGE | (p * kSubs + k), sub);
      split = true;
    }
    if (!split) continue;
    pages.add(p, SFRAME_RECORD_PAGE_SPLIT, {});
    ++st.split_pages;
  }
  pages.finish();
  st.pages += pages.size();
  st.table_bytes += pages.size() * sizeof(sframe_record_page);
  ++st.modules;
  return pages;
}

Tables::Tables(const perf::Session& session) : session_(session) {}

bool Tables::preload(const std::string& path) {
  auto f = elf::ElfFile::open(path);
  if (!f) return false;
  auto file = std::make_shared<const elf::ElfFile>(std::move(*f));
  const std::string id = elf::build_id(*file).value_or("");
  return module_of(file, path, id) != 0;
}

std::uint32_t Tables::module_of(const std::shared_ptr<const elf::ElfFile>& file, const std::string& path,
                                const std::string& build_id) {
  if (!file) return 0;
  auto [it, fresh] = ids_.try_emplace(path + '\n' + build_id, 0);
  if (fresh) {
    files_.push_back(file);
    modules_.push_back(build_module_pages(*file, stats_));
    it->second = static_cast<std::uint32_t>(modules_.size());
    fresh_.push_back(it->second);
  }
  return it->second;
}

const sframe_record_process& Tables::process(std::uint32_t pid) {
  sframe_record_process& p = processes_[pid];
  p = {};
  for (const perf::ProcessMapping& m : session_.mappings(pid)) {
    if (p.n >= SFRAME_RECORD_MAX_MAPPINGS) {
      ++dropped_mappings_;
      continue;
    }
    sframe_record_mapping& e = p.maps[p.n++];
    e.start = m.start;
    e.end = m.end;
    e.bias = m.bias;
    e.module = module_of(m.file, m.path, m.build_id);
  }
  return p;
}

const sframe_record_page* Tables::page(const sframe_record_page_key& key) const {
  if (key.module == 0 || key.module > modules_.size()) return nullptr;
  const ModulePages& m = modules_[key.module - 1];
  const std::size_t i = m.find(key.page);
  if (i == m.size()) return nullptr;
  auto [it, fresh] = looked_up_.try_emplace({key.module, key.page});
  if (fresh) m.fill(i, it->second);
  return &it->second;
}

std::vector<std::uint32_t> Tables::take_new_modules() {
  std::vector<std::uint32_t> out;
  out.swap(fresh_);
  return out;
}

void ModulePages::add(std::uint32_t page, std::uint32_t flags, std::span<const sframe_record_row> rows) {
  entries_.push_back({page, flags, static_cast<std::uint32_t>(rows_.size()), static_cast<std::uint32_t>(rows.size())});
  rows_.insert(rows_.end(), rows.begin(), rows.end());
}

void ModulePages::finish() {
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.page < b.page; });
}

void ModulePages::fill(std::size_t i, sframe_record_page& out) const {
  const Entry& e = entries_[i];
  out.n = e.n;
  out.flags = e.flags;
  std::copy_n(rows_.begin() + e.first, e.n, out.rows);
  std::fill(out.rows + e.n, out.rows + SFRAME_RECORD_PAGE_ROWS, sframe_record_row{});
}

std::size_t ModulePages::find(std::uint32_t page) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), page,
                             [](const Entry& e, std::uint32_t p) { return e.page < p; });
  return it != entries_.end() && it->page == page ? static_cast<std::size_t>(it - entries_.begin()) : entries_.size();
}

}  // namespace sframe::record
