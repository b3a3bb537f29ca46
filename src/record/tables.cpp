// SPDX-License-Identifier: MIT
// sframepp: the in-kernel unwind tables of `sframe record` (tables.hpp).
#include "tables.hpp"

#include "table_cache.hpp"

#include <algorithm>
#include <iterator>
#include <span>
#include <vector>

#include "perf_unwind.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/process/process.hpp"
#include "sframe/unwind/module_unwind.hpp"

namespace sframe::record {
namespace {

constexpr std::uint64_t kPage = std::uint64_t{1} << SFRAME_RECORD_PAGE_SHIFT;
constexpr std::uint32_t kBlockRows = SFRAME_RECORD_BLOCK_ROWS;
constexpr std::uint32_t kMaxPages = std::uint32_t{1} << (30 - SFRAME_RECORD_PAGE_SHIFT);
static_assert(sizeof(sframe_record_block) == SFRAME_RECORD_BLOCK_BYTES);
static_assert(sizeof(sframe_record_row) * SFRAME_RECORD_BLOCK_ROWS == SFRAME_RECORD_BLOCK_BYTES);
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
// at CFA - 8 and FP unchanged; anything else a NONE row. `rows`: its rows
// by block offset; `readable`: false when one of them did not decode.
sframe_record_row pc_mask_row(std::uint64_t start_pc, std::uint8_t rep_size, std::span<const RowSpec> rows,
                              bool readable, bool generated, TableStats& st) {
  sframe_record_row none{};
  none.flags = SFRAME_RECORD_ROW_NONE;
  if (!readable) return ++st.unsupported_rules, none;
  // v1 has no block-size field: its PC-mask FDEs mask the PC with 0xf
  // (16-byte blocks), as the library's lookup reads them.
  const unsigned block = rep_size ? rep_size : 16;
  std::pair<std::uint32_t, std::int32_t> rules[2];  // block offset, CFA offset
  std::size_t n = 0;
  for (const RowSpec& r : rows) {
    const sframe_record_row one = row_of(r.row, generated, st);
    if (one.flags & (SFRAME_RECORD_ROW_NONE | SFRAME_RECORD_ROW_OUTERMOST | SFRAME_RECORD_ROW_CFA_FP |
                     SFRAME_RECORD_ROW_CFA_RBX | SFRAME_RECORD_ROW_FP_SAVED) ||
        one.cfa_off < 0 || one.cfa_off > 0xffff || r.start_offset >= 16 || n == 2)
      return ++st.unsupported_rules, none;
    rules[n++] = {r.start_offset, one.cfa_off};
  }
  if (n == 0 || rules[0].first != 0) return ++st.unsupported_rules, none;
  // One rule holds at every PC, whatever the blocks (.plt.got's 8-byte
  // entries); two need the 16-byte blocks the row encodes.
  if (n == 2 && (block != 16 || start_pc % 16 != 0)) return ++st.unsupported_rules, none;
  const std::int32_t second = n == 2 ? rules[1].second : rules[0].second;
  sframe_record_row o{};
  o.flags = static_cast<std::uint8_t>(SFRAME_RECORD_ROW_PCMASK | (generated ? SFRAME_RECORD_ROW_GENERATED : 0));
  o.fp_off8 = static_cast<std::int8_t>(n == 2 ? rules[1].first : 16);
  o.cfa_off = static_cast<std::int32_t>(static_cast<std::uint32_t>(rules[0].second) |
                                        static_cast<std::uint32_t>(second) << 16);
  return o;
}

// A function's rows: (link-time PC, rule) by increasing PC.
using FunctionRows = std::vector<std::pair<std::uint64_t, sframe_record_row>>;

// The spans of one PC-increment function over link-time [start, end) whose
// rows (inside the function) are `rows`.
void function_spans(std::uint64_t start, std::uint64_t end, FunctionRows& rows, std::vector<Span>& out) {
  // No row: an outermost function (spec v3 §1.2: e.g. a signal-frame FDE
  // written without FREs).
  if (rows.empty()) {
    sframe_record_row o{};
    o.flags = SFRAME_RECORD_ROW_OUTERMOST;
    rows.emplace_back(start, o);
  }
  // Before the first FRE no rule applies (kPcBeforeFirstFre).
  if (rows.front().first > start) {
    sframe_record_row n{};
    n.flags = SFRAME_RECORD_ROW_NONE;
    out.push_back({start, rows.front().first, n});
  }
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::uint64_t hi = k + 1 < rows.size() ? rows[k + 1].first : end;
    if (hi > rows[k].first) out.push_back({rows[k].first, hi, rows[k].second});
  }
}

// About a span per row and one per function (counts from a header,
// capped: a hostile count allocates no more than `cap`).
void reserve_spans(std::vector<Span>& out, std::uint64_t rows, std::uint64_t functions, std::uint64_t cap) {
  out.reserve(out.size() + static_cast<std::size_t>(std::min<std::uint64_t>(rows + functions, cap)));
}

// Every FRE of `s` as a span; PC-mask functions as one span each. The
// ranges of signal-trampoline FDEs (v3's 'signal_p' bit, spec v3 §2.3.3) go to
// `signal`, as generation gives those of CIEs with the 'S' augmentation.
void spans_of(const Section& s, bool generated, std::vector<Span>& out, std::vector<AddressRange>& signal,
              TableStats& st) {
  reserve_spans(out, s.header().num_fres, s.num_fdes(), s.bytes().size());
  FunctionRows rows;  // one FDE's, reused
  std::vector<RowSpec> mask_rows;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    auto fde = s.fde(i);
    if (!fde || fde->size == 0) continue;
    const std::uint64_t end = fde->start_pc + fde->size;
    if (fde->signal) signal.push_back({fde->start_pc, end});
    if (fde->pc_type == PcType::kMask) {
      mask_rows.clear();
      bool readable = true;
      for (const Expected<Fre>& fre : s.fres(*fde)) {
        auto r = fre ? s.row(*fde, *fre) : Expected<FrameRow>(Unexpected{fre.error()});
        if (!r) {
          readable = false;
          break;
        }
        mask_rows.push_back({fre->start_offset, *r});
      }
      const sframe_record_row row = pc_mask_row(fde->start_pc, fde->rep_size, mask_rows, readable, generated, st);
      out.push_back({fde->start_pc, end, row});
      continue;
    }
    rows.clear();
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
    function_spans(fde->start_pc, end, rows, out);
  }
}

// The spans of a module whose rules are all generated from its CFI: the
// translator's functions as cfi::for_each_translated() gives them (the
// rows ModuleUnwind::generate() encodes into a section), taken as they
// come, without encoding them and decoding them again. Returns whether the
// CFI could be read; adds the CIEs' signal ranges to `signal`.
bool translated_spans(const elf::ElfFile& file, std::uint64_t section_address, std::vector<Span>& out,
                      std::vector<AddressRange>& signal, TableStats& st) {
  FunctionRows rows;  // one function's, reused
  std::uint32_t last_tag = 0;
  sframe_record_row last_row{};
  auto gen = cfi::for_each_translated(
      file, Version::kV3, section_address, [&](const FunctionSpec& fn, const cfi::Function* cfi) {
        if (fn.size == 0) return;
        const std::uint64_t end = fn.start_pc + fn.size;
        if (fn.pc_type == PcType::kMask) {
          out.push_back({fn.start_pc, end, pc_mask_row(fn.start_pc, fn.rep_size, fn.rows, true, true, st)});
          return;
        }
        rows.clear();
        if (!cfi) {  // rows of its own (shape.rows)
          for (const RowSpec& r : fn.rows) {
            if (r.start_offset >= fn.size) break;
            rows.emplace_back(fn.start_pc + r.start_offset, row_of(r.row, true, st));
          }
        } else {
          for (const cfi::Row& r : cfi->rows) {
            const std::uint64_t off = r.start - cfi->start;
            if (off >= fn.size || (!rows.empty() && fn.start_pc + off < rows.back().first)) break;
            // Rows of one read with the same translation are equal
            // (cfi::Row::translation): their table row is the one before.
            if (r.translation == 0 || r.translation != last_tag) {
              last_row = row_of(r.row, true, st);
              last_tag = r.translation;
            } else if (last_row.flags & SFRAME_RECORD_ROW_NONE) {
              ++st.unsupported_rules;
            }
            rows.emplace_back(fn.start_pc + off, last_row);
          }
        }
        function_spans(fn.start_pc, end, rows, out);
      });
  if (!gen) return false;
  for (const cfi::PcRange& r : gen->signal_ranges) signal.push_back({r.start, r.end});
  return true;
}

}  // namespace

ModuleTable build_module_table(const elf::ElfFile& file, TableStats& st) {
  // The shared module builder, whole: the kernel has no generation on demand.
  auto own = file.sframe_section();
  if (own) st.sframe_bytes += own->bytes.size();
  if (auto eh = file.section_bytes(".eh_frame")) st.eh_frame_bytes += eh->bytes.size();
  cfi::ModuleImage img = process::module_image(file, own);
  // Read FDE by FDE below: no RowIndex.
  cfi::ModuleUnwindOptions mo;
  mo.row_index = false;
  cfi::ModuleUnwind u = cfi::ModuleUnwind::build(img, mo);
  std::vector<Span> spans;
  std::vector<AddressRange> signal(u.trampolines().begin(), u.trampolines().end());
  // Three runs, each in address order already when its FDEs are sorted
  // (a generated section's are): sorted apart, then merged. The order of
  // one stable sort of all, for a merge sort of sorted spans costs as much
  // as of unsorted ones.
  std::size_t ends[3];
  if (u.needs_generation() && !u.primary().usable()) {
    // Every rule generated: the translator's rows, as they come.
    const auto eh = file.section_bytes(".eh_frame");
    // About a span per 4 bytes of .eh_frame (libc, libpython): a guess too
    // large costs address space only, one too small a copy of them all.
    if (eh) reserve_spans(spans, eh->bytes.size() / 4, 0, eh->bytes.size());
    if (translated_spans(file, eh ? eh->header.address : 0, spans, signal, st) && !spans.empty())
      ++st.generated_modules;
    ends[0] = ends[1] = spans.size();
  } else {
    // An own section, and SFrame generated for the functions it lacks
    // (ModuleUnwind::generate() keeps those).
    if (u.needs_generation()) {
      auto eh = file.section_bytes(".eh_frame");
      (void)cfi::generate(u, file, eh ? eh->header.address : 0);
      signal.assign(u.trampolines().begin(), u.trampolines().end());
    }
    if (u.primary().usable()) spans_of(*u.primary().section, false, spans, signal, st);
    ends[0] = spans.size();
    if (u.extra().usable()) spans_of(*u.extra().section, true, spans, signal, st);
    ends[1] = spans.size();
    if (u.extra().usable()) ++st.generated_modules;
  }
  for (const AddressRange& t : signal) {
    sframe_record_row r{};
    r.flags = SFRAME_RECORD_ROW_SIGNAL;
    spans.push_back({t.begin, t.end, r});
  }
  ends[2] = spans.size();
  const auto by_lo = [](const Span& a, const Span& b) { return a.lo < b.lo; };
  const auto span_at = [&](std::size_t i) { return spans.begin() + static_cast<std::ptrdiff_t>(i); };
  for (std::size_t k = 0, from = 0; k < 3; from = ends[k++])
    if (!std::is_sorted(span_at(from), span_at(ends[k]), by_lo)) std::stable_sort(span_at(from), span_at(ends[k]), by_lo);
  std::inplace_merge(spans.begin(), span_at(ends[0]), span_at(ends[1]), by_lo);
  std::inplace_merge(spans.begin(), span_at(ends[1]), span_at(ends[2]), by_lo);

  // Rows per page: each span's rule at its start (and at the start of every
  // page it continues into), a NONE row where it ends and nothing follows.
  // The spans are sorted by start and each emits only below the next one's
  // start, so rows come in address order: a page's rows are a run of
  // `flat`, the pages in order.
  std::vector<sframe_record_row> flat;
  flat.reserve(spans.size() + spans.size() / 2);
  struct PageRun {
    std::uint32_t page;
    std::uint32_t first;  // its rows: flat[first, next run's first)
  };
  std::vector<PageRun> runs;
  const auto emit = [&](std::uint64_t at, const sframe_record_row& rule) {
    const auto page = static_cast<std::uint32_t>(at >> SFRAME_RECORD_PAGE_SHIFT);
    if (runs.empty() || page != runs.back().page) {
      if (!runs.empty() && page < runs.back().page) return;  // not in address order: no sorted spans do this
      runs.push_back({page, static_cast<std::uint32_t>(flat.size())});
    }
    const std::size_t first = runs.back().first;
    sframe_record_row r = rule;
    r.start = static_cast<std::uint16_t>(at & (kPage - 1));
    if (flat.size() > first && flat.back().start == r.start) flat.pop_back();
    if (flat.size() > first && same_rule(flat.back(), r)) return;
    if (flat.size() == first && r.start != 0) {
      sframe_record_row n{};
      n.flags = SFRAME_RECORD_ROW_NONE;
      flat.push_back(n);
    }
    flat.push_back(r);
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
  // The pages kept: those with a rule, of at most a block's rows.
  std::vector<std::pair<std::uint32_t, std::span<const sframe_record_row>>> rows;
  rows.reserve(runs.size());
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t end = k + 1 < runs.size() ? runs[k + 1].first : flat.size();
    const std::span<const sframe_record_row> v(flat.data() + runs[k].first, end - runs[k].first);
    if (std::none_of(v.begin(), v.end(), [](const sframe_record_row& r) { return !(r.flags & SFRAME_RECORD_ROW_NONE); }))
      continue;
    if (v.size() > kBlockRows) {
      ++st.overflow_pages;
      continue;
    }
    rows.emplace_back(runs[k].page, v);
  }
  ++st.modules;
  if (rows.empty()) return {};
  // The layout of record_abi.h: page 0 is the first page with rules; the
  // directory has an entry per page up to the last, and one for the end. Its
  // size follows the span of the code, not its rules: pages past 1 GiB from
  // the first (no module's code spans that) are left out.
  const std::uint32_t first_page = rows.front().first;
  while (rows.back().first - first_page >= kMaxPages) {
    ++st.overflow_pages;
    rows.pop_back();
  }
  const std::uint64_t pages = std::uint64_t{rows.back().first} - first_page + 1;
  const std::uint64_t dir_blocks = pages / SFRAME_RECORD_DIR_PAGES + 1;
  std::uint64_t row_slots = dir_blocks * kBlockRows;
  for (const auto& [p, v] : rows) {
    if (row_slots % kBlockRows + v.size() > kBlockRows) row_slots += kBlockRows - row_slots % kBlockRows;
    row_slots += v.size();
  }
  // A row slot is a __u32 in the directory.
  if (row_slots > 0xffffffffu) {
    st.overflow_pages += rows.size();
    return {};
  }
  std::vector<sframe_record_block> blocks((row_slots + kBlockRows - 1) / kBlockRows, sframe_record_block{});
  const auto set_dir = [&](std::uint64_t entry, std::uint32_t slot) {
    const std::uint64_t b = entry / SFRAME_RECORD_DIR_PAGES, k = entry % SFRAME_RECORD_DIR_PAGES;
    blocks[b].dir[k] = slot;
    // A block's last slot repeats the next block's first.
    if (k == 0 && b > 0) blocks[b - 1].dir[SFRAME_RECORD_DIR_PAGES] = slot;
  };
  sframe_record_row pad{};
  pad.start = SFRAME_RECORD_ROW_PAD;
  pad.flags = SFRAME_RECORD_ROW_NONE;
  std::uint32_t slot = static_cast<std::uint32_t>(dir_blocks * kBlockRows);
  std::uint64_t entry = 0;
  for (const auto& [p, v] : rows) {
    // Pages with no rule before this one: no rows.
    for (; entry < p - first_page; ++entry) set_dir(entry, slot);
    if (slot % kBlockRows + v.size() > kBlockRows)
      for (; slot % kBlockRows; ++slot) blocks[slot / kBlockRows].rows[slot % kBlockRows] = pad;
    set_dir(entry++, slot);
    for (const sframe_record_row& r : v) {
      blocks[slot / kBlockRows].rows[slot % kBlockRows] = r;
      ++slot;
    }
    st.rows += v.size();
    st.max_page_rows = std::max<std::uint64_t>(st.max_page_rows, v.size());
  }
  // The end, in every slot past the last page.
  for (; entry < dir_blocks * SFRAME_RECORD_DIR_PAGES; ++entry) set_dir(entry, slot);
  blocks[dir_blocks - 1].dir[SFRAME_RECORD_DIR_PAGES] = slot;
  st.pages += rows.size();
  st.table_bytes += blocks.size() * sizeof(sframe_record_block);
  return ModuleTable(std::uint64_t{first_page} << SFRAME_RECORD_PAGE_SHIFT, std::move(blocks));
}

void TableStats::add(const TableStats& o) {
  modules += o.modules;
  pages += o.pages;
  rows += o.rows;
  max_page_rows = std::max(max_page_rows, o.max_page_rows);
  generated_modules += o.generated_modules;
  unsupported_rules += o.unsupported_rules;
  overflow_pages += o.overflow_pages;
  sframe_bytes += o.sframe_bytes;
  eh_frame_bytes += o.eh_frame_bytes;
  table_bytes += o.table_bytes;
  cached_modules += o.cached_modules;
}

Tables::Tables(const perf::Session& session, std::string cache_dir)
    : session_(session), cache_dir_(std::move(cache_dir)) {}

bool Tables::preload(const std::string& path) {
  // Through the session's files: its MMAP2 records of the path find the
  // file opened here.
  const perf::FileTable::Entry& f = session_.files().open(path);
  return f.file && module_of(f.file, path, f.build_id) != 0;
}

bool Tables::preload_vdso() {
  // The session keys the vDSO by its name alone (perf_unwind.cpp: no file,
  // no build-id in its MMAP2 record); the table cache by the build-id note
  // in its ".note" section.
  const perf::FileTable::Entry& v = session_.files().vdso();
  return v.file && module_of(v.file, "[vdso]", "", v.build_id) != 0;
}

std::uint32_t Tables::module_of(const std::shared_ptr<const elf::ElfFile>& file, const std::string& path,
                                const std::string& build_id, const std::string& cache_id) {
  if (!file) return 0;
  auto [it, fresh] = ids_.try_emplace(path + '\n' + build_id, 0);
  if (fresh) {
    files_.push_back(file);
    // From the cache when it has the file's (by build-id: the same bytes;
    // without one, by a hash of the bytes); else built, and kept there for
    // the next recording.
    const TableCache cache(cache_dir_);
    std::string id = cache_id.empty() ? build_id : cache_id;
    if (id.empty() && !cache_dir_.empty()) id = TableCache::content_key(*file);
    std::optional<CachedTable> t = cache.load(id);
    if (t) {
      t->stats.cached_modules = 1;
    } else {
      t.emplace();
      t->table = build_module_table(*file, t->stats);
      if (!id.empty()) cache.store(id, *t);
    }
    stats_.add(t->stats);
    modules_.push_back(std::move(t->table));
    it->second = static_cast<std::uint32_t>(modules_.size());
    fresh_.push_back(it->second);
  }
  return it->second;
}

const sframe_record_process& Tables::process(std::uint32_t pid) {
  sframe_record_process& p = processes_[pid];
  p = {};
  p.generation = ++generation_;
  for (const perf::ProcessMapping& m : session_.mappings(pid)) {
    if (p.n >= SFRAME_RECORD_MAX_MAPPINGS) {
      ++dropped_mappings_;
      continue;
    }
    sframe_record_mapping& e = p.maps[p.n++];
    e.start = m.start;
    e.end = m.end;
    e.module = module_of(m.file, m.path, m.build_id);
    e.bias = m.bias + (e.module ? modules_[e.module - 1].base() : 0);
  }
  return p;
}

std::vector<std::uint32_t> Tables::take_new_modules() {
  std::vector<std::uint32_t> out;
  out.swap(fresh_);
  return out;
}

}  // namespace sframe::record
