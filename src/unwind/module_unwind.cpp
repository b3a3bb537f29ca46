// SPDX-License-Identifier: MIT
// sframepp: one module's unwind information (see sframe/unwind/module_unwind.hpp).
#include "sframe/unwind/module_unwind.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/format/encode.hpp"
#include "translate.hpp"

namespace sframe::cfi {

Expected<void> UnwindSection::assign(std::vector<std::byte> b, std::uint64_t address, bool fde_index_with_rows,
                                     bool row_index) {
  bytes = std::move(b);
  section.reset();
  index.reset();
  rows.reset();
  compact_rows.clear();
  const auto fail = [&](const Error& e) -> Expected<void> {
    bytes.clear();
    section.reset();
    index.reset();
    return Unexpected{e};
  };
  Expected<Section> s = Section::parse(bytes, address);
  if (!s) return fail(s.error());
  // Strict implies lenient: one pass for the sections that pass it (every
  // generated one), a second only for those that do not.
  const bool strict = static_cast<bool>(validate(*s, Strictness::kStrict));
  if (!strict) {
    if (auto ok = validate(*s, Strictness::kLenient); !ok) return fail(ok.error());
  }
  section = *s;
  if (strict && row_index) {
    Expected<RowIndex> r = RowIndex::build(*section);
    if (r) {
      rows.emplace(std::move(*r));
      compact_rows = sframe::detail::compile_rows(*rows, *section, arch_of(section->abi()));
    }
  }
  if (!rows || fde_index_with_rows) {
    Expected<FdeIndex> idx = FdeIndex::build(*s);
    if (!idx) {
      rows.reset();
      compact_rows.clear();
      return fail(idx.error());
    }
    index.emplace(std::move(*idx));
  }
  return {};
}

Expected<void> UnwindSection::assign_rows(RowIndex::Builder& built, Abi abi, Version version, std::uint64_t address) {
  bytes.clear();
  section.reset();
  index.reset();
  rows.reset();
  compact_rows.clear();
  // The header alone, as the encoder writes it (one mechanism for both).
  Expected<std::vector<std::byte>> header = SectionEncoder(section_header(abi, version, address)).finish();
  if (!header) return Unexpected{header.error()};
  bytes = std::move(*header);
  Expected<Section> s = Section::parse(bytes, address);
  if (!s) {
    bytes.clear();
    return Unexpected{s.error()};
  }
  Expected<RowIndex> r = built.finish(*s);
  if (!r) {
    bytes.clear();
    return Unexpected{r.error()};
  }
  section = *s;
  rows.emplace(std::move(*r));
  compact_rows = sframe::detail::compile_rows(*rows, *section, arch_of(abi));
  return {};
}

bool UnwindSection::covers(std::uint64_t pc) const noexcept {
  // Both accelerators answer as sframe::find() does (kPcNotCovered: no FDE).
  if (index) {
    auto m = index->find(pc);
    return m || m.error().code() != LookupErrc::kPcNotCovered;
  }
  if (!rows) return false;
  auto m = rows->find_row(pc);
  return m || m.error().code() != LookupErrc::kPcNotCovered;
}

namespace {

std::string error_words(const Error& e) { return std::string(describe(e.code())); }

// A loaded module's .eh_frame_hdr is in the host's byte order.
constexpr bool kHostBig = std::endian::native == std::endian::big;

// The number of FDEs a .eh_frame_hdr's table lists (read_eh_frame_hdr());
// their start PCs into `out` when given (the count alone reads only the
// header: the table of a module that generates everything is never
// touched, nor copied).
Expected<std::size_t> hdr_table(std::span<const std::byte> hdr, std::uint64_t address,
                                std::vector<std::uint64_t>* out) {
  Expected<EhFrameHdr> h = read_eh_frame_hdr(hdr, address, kHostBig);
  if (!h) return Unexpected{h.error()};
  if (out) {
    out->reserve(h->count);
    for (std::uint32_t i = 0; i < h->count; ++i) out->push_back(h->start(i));
  }
  return std::size_t{h->count};
}

}  // namespace

Expected<std::vector<std::uint64_t>> eh_frame_hdr_starts(std::span<const std::byte> hdr, std::uint64_t address) {
  std::vector<std::uint64_t> out;
  Expected<std::size_t> n = hdr_table(hdr, address, &out);
  if (!n) return Unexpected{n.error()};
  return out;
}

namespace {

// Every function of section `s` into `b` (ModuleUnwindOptions::merge_own),
// as to_spec() models them: false at the first FDE or FRE that does not
// decode or function the builder refuses (e.g. an FRE past its function's
// end, which RowIndex::build() ignores): the caller then starts again
// without them. One FunctionSpec reused, its vectors keeping their
// capacity.
bool add_section_functions(const Section& s, RowIndex::Builder& b) {
  FunctionSpec fn;
  for (std::uint32_t i = 0; i < s.header().num_fdes; ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f || !to_function_spec(s, *f, fn) || !b.add(fn)) return false;
  }
  return true;
}

}  // namespace

Expected<EhFrameHdrEntry> eh_frame_hdr_lookup(std::span<const std::byte> hdr, std::uint64_t address,
                                              std::uint64_t pc) {
  Expected<EhFrameHdr> t = read_eh_frame_hdr(hdr, address, kHostBig);
  if (!t) return Unexpected{t.error()};
  // First entry starting above pc; the one before it is the candidate.
  std::uint32_t lo = 0, hi = t->count;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (t->start(mid) <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return make_error(LookupErrc::kPcNotCovered, 0, pc);
  EhFrameHdrEntry e;
  e.index = lo - 1;
  e.start = t->start(e.index);
  e.fde = t->fde(e.index);
  e.next_start = lo < t->count ? t->start(lo) : UINT64_MAX;
  return e;
}

Expected<std::uint64_t> eh_frame_hdr_eh_frame(std::span<const std::byte> hdr, std::uint64_t address) {
  Expected<EhFrameHdr> h = read_eh_frame_hdr(hdr, address, kHostBig, false);
  if (!h) return Unexpected{h.error()};
  return h->eh_frame;
}

std::vector<AddressRange> find_sigreturn_code(std::span<const CodeBytes> code, std::size_t limit) {
  // mov $15,%rax; syscall
  static constexpr unsigned char kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  // Found by its rarest byte, the opcode 0xc7 (0.1-0.4% of the bytes of
  // libc and libpython's code): glibc's memchr reads a vector at a time,
  // memmem's search over code took several times longer, and this scan
  // reads every module's code at its first recording.
  constexpr std::size_t kAt = 1;
  std::vector<AddressRange> out;
  for (const CodeBytes& c : code) {
    const auto* begin = reinterpret_cast<const unsigned char*>(c.bytes.data());
    const std::size_t size = c.bytes.size();
    if (size < sizeof kSigreturn) continue;
    // Positions of the 0xc7 a whole sequence can hold: [kAt, last].
    const std::size_t last = size - sizeof kSigreturn + kAt;
    std::size_t at = kAt;
    while (out.size() < limit && at <= last) {
      const void* hit = std::memchr(begin + at, kSigreturn[kAt], last + 1 - at);
      if (!hit) break;
      const auto j = static_cast<std::size_t>(static_cast<const unsigned char*>(hit) - begin);
      if (std::memcmp(begin + j - kAt, kSigreturn, sizeof kSigreturn) != 0) {
        at = j + 1;
        continue;
      }
      const std::uint64_t a = c.address + (j - kAt);
      out.push_back({a, a + 1});
      at = j + sizeof kSigreturn;
    }
  }
  return out;
}

ModuleUnwind ModuleUnwind::build(const ModuleImage& image, const ModuleUnwindOptions& opt) {
  ModuleUnwind m;
  m.version_ = opt.version;
  m.fde_index_with_rows_ = opt.fde_index_with_rows || !opt.row_index;
  m.row_index_ = opt.row_index;
  m.per_fde_rows_ = opt.per_fde_rows;
  m.merge_own_ = opt.merge_own;
  m.trampolines_ = find_sigreturn_code(image.code);
  std::string own_note;
  if (!image.sframe.empty() && !opt.ignore_own) {
    m.has_own_ = true;
    auto ok = m.primary_.assign(std::vector<std::byte>(image.sframe.begin(), image.sframe.end()), image.sframe_address,
                                m.fde_index_with_rows_, m.row_index_);
    if (ok)
      m.source_ = ModuleSource::kNative;
    else
      own_note = "own SFrame section unusable (" + error_words(ok.error()) + ")";
  } else if (!image.sframe.empty()) {
    own_note = "own SFrame section ignored";
  } else {
    own_note = "no SFrame section";
  }
  // The start PCs only where an own section is checked against them.
  std::vector<std::uint64_t> starts;
  bool hdr_known = true;
  std::size_t listed = 0;
  if (!image.eh_frame_hdr.empty()) {
    auto n = hdr_table(image.eh_frame_hdr, image.eh_frame_hdr_address,
                       m.source_ == ModuleSource::kNative ? &starts : nullptr);
    if (n)
      listed = *n;
    else
      hdr_known = false;
  } else if (image.has_cfi) {
    hdr_known = false;  // FDEs not listed (a static executable)
  }
  m.listed_ = hdr_known ? listed : 1;
  if (m.source_ == ModuleSource::kNative) {
    if (!hdr_known) {
      m.pending_ = 1;  // no readable table: let generation decide
      m.reason_ = image.eh_frame_hdr.empty() ? "own SFrame section; .eh_frame FDEs not listed (no .eh_frame_hdr)"
                                             : "own SFrame section; .eh_frame_hdr unreadable";
    } else {
      for (std::uint64_t pc : starts)
        if (!m.primary_.covers(pc)) ++m.pending_;
      m.reason_ = m.pending_ == 0 ? "own SFrame section covers every .eh_frame FDE"
                                  : "own SFrame section; " + std::to_string(m.pending_) + " .eh_frame FDEs it lacks";
    }
  } else {
    m.pending_ = m.listed_;
    m.reason_ = m.listed_ == 0 ? own_note + "; no .eh_frame FDEs (no code to unwind)" : own_note;
  }
  return m;
}

Expected<void> ModuleUnwind::generate(std::span<const CfiSource> srcs, Abi abi, std::uint64_t section_address,
                                      std::span<const PltSection> plts) {
  if (generated_once_) return first_outcome();
  generated_once_ = true;
  const bool has_native = source_ == ModuleSource::kNative;
  const std::string before = reason_;
  const auto fail = [&](const Error& e, std::string_view what) -> Expected<void> {
    generate_error_ = e;
    reason_ = before + "; " + std::string(what) + " (" + error_words(e) + ")";
    return Unexpected{e};
  };
  const UnwindSection* own = has_native ? &primary_ : nullptr;
  std::size_t kept = 0;
  std::optional<Error> add_error;
  // The translator's functions that the own section lacks (start or last
  // byte not covered), each handed to `sink` as the reader gives it: its
  // shape, and the reader's rows (cfi; null: shape.rows holds them).
  const auto translate = [&](const std::function<Expected<void>(const FunctionSpec&, const Function*)>& sink) {
    kept = 0;
    add_error.reset();
    return for_each_translated(srcs, abi, version_, section_address, plts,
                               [&](const FunctionSpec& fn, const Function* cfi) {
                                 if (add_error) return;
                                 if (own && own->covers(fn.start_pc) &&
                                     own->covers(fn.start_pc + (fn.size ? fn.size - 1 : 0)))
                                   return;
                                 if (auto ok = sink(fn, cfi); !ok) add_error = ok.error();
                                 ++kept;
                               });
  };
  // Streamed: each function goes into the encoder (or, in-process, the
  // RowIndex builder) as the reader gives it, so memory stays proportional
  // to the output (no model of the section).
  SectionEncoder enc(section_header(abi, version_, section_address));
  const auto encode_all = [&] {
    // Sized from the FDEs .eh_frame_hdr lists (compiled code averages under
    // 64 bytes of FREs per function), so that the buffers are not grown by
    // doubling, each step a copy and fresh pages; a guess too large costs
    // address space only, one too small a doubling.
    if (!has_native) enc.reserve(listed_ + 8, listed_ * 64);
    FunctionSpec full;  // reused: its rows keep their capacity
    return translate([&](const FunctionSpec& fn, const Function* cfi) {
      if (!cfi) return enc.add(fn);
      detail::fill_rows(fn, *cfi, full);
      return enc.add(full);
    });
  };
  // In-process (no FdeIndex wanted beside the rows): the translator's rows
  // go straight into a RowIndex, with no encoded section to write, check
  // and decode again; they come from our own translator, which the
  // differential tests check against libdw. Callers reading `index` or the
  // section's FDEs (`sframe stack`) keep the encoded section.
  RowIndex::Builder built;
  bool direct = !fde_index_with_rows_;
  // Compiled code averages well under 16 rows per function (a guess too
  // large costs address space only).
  if (direct && !has_native) built.reserve(listed_ + 8, listed_ * 16);
  // The reader's rows go into the builder in place (no RowSpec copy).
  const auto build_direct = [&](const FunctionSpec& fn, const Function* cfi) {
    if (!cfi) return built.add(fn);
    const std::span<const Row> rows = cfi->rows;
    // One read feeds this builder: the reader's translation numbers tag
    // its rows (cfi::Row::translation).
    return built.add(
        fn, rows.size(), [&](std::size_t k) { return static_cast<std::uint32_t>(rows[k].start - cfi->start); },
        [&](std::size_t k) -> const FrameRow& { return rows[k].row; },
        [&](std::size_t k) { return rows[k].translation; });
  };
  // ModuleUnwindOptions::merge_own: the own section's functions go in
  // first; the translator's then keeps only those it lacks, as for extra().
  const bool merge = direct && has_native && merge_own_;
  const bool merged = merge && primary_.section->abi() == abi && add_section_functions(*primary_.section, built);
  if (merge && !merged) built = RowIndex::Builder();
  Expected<Generated> gen = direct ? translate(build_direct) : encode_all();
  if (!gen) return fail(gen.error(), "no usable CFI");
  if (add_error) return fail(*add_error, "generated SFrame does not encode");
  // Signal trampolines from the CIE 'S' augmentation, beside any the code
  // bytes showed.
  for (const PcRange& r : gen->signal_ranges) trampolines_.push_back({r.start, r.end});
  if (has_native) {
    extra_functions_ = kept;
    if (kept == 0) {
      reason_ = "own SFrame section covers every .eh_frame function it can";
      return {};
    }
  } else if (kept == 0 && gen->skipped.empty()) {
    // CFI without an FDE (a data-only library's crt stubs): nothing to
    // unwind, not an error.
    reason_ = before + "; its CFI has no FDEs";
    return {};
  }
  if (merged) {
    UnwindSection one;
    if (one.assign_rows(built, abi, version_, section_address)) {
      primary_ = std::move(one);
      reason_ = "own SFrame section; " + std::to_string(extra_functions_) +
                " .eh_frame functions it lacks generated (one index with it)";
      return {};
    }
    // Functions of the two that overlap: the generated ones apart, in
    // extra(), as without merge_own.
    built = RowIndex::Builder();
    gen = translate(build_direct);
    if (!gen) return fail(gen.error(), "no usable CFI");
    if (add_error) return fail(*add_error, "generated SFrame does not encode");
  }
  UnwindSection& target = has_native ? extra_ : primary_;
  if (direct && !target.assign_rows(built, abi, version_, section_address)) {
    // Rows a RowIndex cannot hold (overlapping FDEs, a span of 4 GiB or
    // more): the encoded section, with an FdeIndex, as elsewhere.
    direct = false;
    gen = encode_all();
    if (!gen) return fail(gen.error(), "no usable CFI");
    if (add_error) return fail(*add_error, "generated SFrame does not encode");
  }
  if (!direct) {
    Expected<std::vector<std::byte>> bytes = enc.finish();
    if (!bytes) return fail(bytes.error(), "generated SFrame does not encode");
    if (auto ok = target.assign(std::move(*bytes), section_address, fde_index_with_rows_, row_index_); !ok)
      return fail(ok.error(), "generated SFrame unusable");
  }
  if (has_native) {
    reason_ = "own SFrame section; " + std::to_string(extra_functions_) + " .eh_frame functions it lacks generated";
  } else {
    source_ = ModuleSource::kGenerated;
    reason_ = before + "; generated from CFI";
  }
  return {};
}

// ---------------------------------------------------------------------------
// Per-FDE generation

struct ModuleUnwind::OnDemand {
  explicit OnDemand(OnDemandSource s) : src(std::move(s)), reader(src.eh_frame, src.abi) {}
  OnDemandSource src;
  FdeReader reader;
  // Outcome per table entry (by index), and per PLT section (kPltKey + i).
  struct Slot {
    std::unique_ptr<GeneratedFde> fde;
    std::optional<Error> error;
  };
  std::unordered_map<std::uint64_t, Slot> slots;
  static constexpr std::uint64_t kPltKey = std::uint64_t{1} << 63;
};

Expected<void> ModuleUnwind::enable_on_demand(OnDemandSource src) {
  Expected<EhFrameHdr> t = read_eh_frame_hdr(src.eh_frame_hdr, src.eh_frame_hdr_address, kHostBig);
  if (!t) return Unexpected{t.error()};
  if (t->count == 0) return make_error(ElfErrc::kElfError, 2);
  on_demand_ = std::make_shared<OnDemand>(std::move(src));
  return {};
}

Expected<const GeneratedFde*> ModuleUnwind::generate_for_pc(std::uint64_t pc) {
  if (!on_demand_) return make_error(ElfErrc::kElfError, 0);
  OnDemand& od = *on_demand_;
  // The slot: a PLT section (replaced by ld's PC-mask functions, as
  // generate() replaces them), else the table entry at or below pc.
  std::uint64_t key = 0;
  std::optional<EhFrameHdrEntry> entry;
  for (std::size_t i = 0; i < od.src.plts.size(); ++i) {
    const PltSection& p = od.src.plts[i];
    if (p.executable && pc >= p.address && pc - p.address < p.size) key = OnDemand::kPltKey + i;
  }
  if (key == 0) {
    Expected<EhFrameHdrEntry> e = eh_frame_hdr_lookup(od.src.eh_frame_hdr, od.src.eh_frame_hdr_address, pc);
    if (!e) return Unexpected{e.error()};
    entry = *e;
    key = e->index;
  }
  const auto in_range = [&](const GeneratedFde& g) -> Expected<const GeneratedFde*> {
    if (pc >= g.start && pc < g.end) return &g;
    return make_error(LookupErrc::kPcNotCovered, 0, pc);  // between functions
  };
  auto [it, fresh] = od.slots.try_emplace(key);
  OnDemand::Slot& slot = it->second;
  if (!fresh) {
    if (slot.fde) return in_range(*slot.fde);
    return Unexpected{*slot.error};
  }
  const auto fail = [&](const Error& e) -> Expected<const GeneratedFde*> {
    slot.error = e;
    return Unexpected{e};
  };
  // The functions, by the translation generate() uses, into `sink`.
  const std::uint64_t section_address = od.src.eh_frame.address;
  std::optional<Error> add_error;
  std::uint64_t lo = UINT64_MAX, hi = 0;
  const auto translate = [&](const auto& sink) -> Expected<Reason> {
    add_error.reset();
    lo = UINT64_MAX;
    hi = 0;
    const auto add = [&](const FunctionSpec& fn) {
      if (add_error) return;
      if (auto ok = sink(fn); !ok) add_error = ok.error();
      lo = std::min(lo, fn.start_pc);
      hi = std::max(hi, fn.start_pc + fn.size);
    };
    Reason why = Reason::kNone;
    if (entry) {
      // The record's offset in .eh_frame; the reader checks it lies inside.
      const std::uint64_t off = entry->fde - od.src.eh_frame.address;
      Expected<const Function*> fn = od.reader.read(off, entry->next_start);
      if (!fn) return Unexpected{fn.error()};
      const Generated g = generate_function(**fn, od.src.abi, version_, section_address, od.src.plts, add);
      if (!g.skipped.empty()) why = g.skipped.front().reason;
      if (lo == UINT64_MAX && why == Reason::kNone) why = Reason::kNoRow;  // in a PLT section: not ours
    } else {
      for (const FunctionSpec& f : plt_functions_at(od.src.plts, pc)) add(f);
      if (lo == UINT64_MAX) why = Reason::kNoRow;
    }
    return why;
  };
  const auto checked = [&](const Expected<Reason>& why) -> std::optional<Error> {
    if (!why) return why.error();
    if (*why != Reason::kNone) return Error{EncodeErrc::kNotRepresentable, 0, static_cast<std::uint64_t>(*why)};
    return add_error;
  };
  auto g = std::make_unique<GeneratedFde>();
  bool built = false;
  if (per_fde_rows_) {
    // Straight into a RowIndex (see ModuleUnwindOptions::per_fde_rows).
    RowIndex::Builder rows;
    if (std::optional<Error> e = checked(translate([&](const FunctionSpec& fn) { return rows.add(fn); })))
      return fail(*e);
    // Rows a RowIndex cannot hold (e.g. a span of 4 GiB): encoded below.
    built = static_cast<bool>(g->section.assign_rows(rows, od.src.abi, version_, section_address));
  }
  if (!built) {
    SectionEncoder enc(section_header(od.src.abi, version_, section_address));
    if (std::optional<Error> e = checked(translate([&](const FunctionSpec& fn) { return enc.add(fn); })))
      return fail(*e);
    Expected<std::vector<std::byte>> bytes = enc.finish();
    if (!bytes) return fail(bytes.error());
    // Without an own section, an FdeIndex only: the FDE joins the walker's
    // primary map, whose rules its rule cache keeps after the first lookup,
    // and a RowIndex (~15 K instructions to build per FDE) was most of a
    // Python profile's generation. Beside an own section the FDE joins the
    // extra map, which no rule cache serves: there every lookup of its PCs
    // takes the RowIndex's compiled rows (an FdeIndex lookup decodes the FDE
    // each time: a C profile's `_start` frames cost more than the build).
    const bool row_index = source_ == ModuleSource::kNative;
    if (auto ok = g->section.assign(std::move(*bytes), section_address, /*fde_index_with_rows=*/!row_index, row_index);
        !ok)
      return fail(ok.error());
  }
  g->start = lo;
  g->end = hi;
  slot.fde = std::move(g);
  generated_list_.push_back(slot.fde.get());
  if (source_ == ModuleSource::kNone) {
    source_ = ModuleSource::kGenerated;
    reason_ += "; generated per FDE from .eh_frame";
  }
  return in_range(*slot.fde);
}

Expected<void> ModuleUnwind::fail_generation(const Error& error, std::string_view why) {
  if (generated_once_) return first_outcome();
  generated_once_ = true;
  generate_error_ = error;
  reason_ += "; ";
  reason_ += why;
  return Unexpected{error};
}

Expected<void> ModuleUnwind::first_outcome() const {
  if (generate_error_) return Unexpected{*generate_error_};
  return {};
}

}  // namespace sframe::cfi
