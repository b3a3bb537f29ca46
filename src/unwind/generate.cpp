// SPDX-License-Identifier: MIT
// sframepp: the file-free core of `sframe gen` (see sframe/unwind/cfi_reader.hpp):
// CFI rows from read_cfi() -> SFrame functions, plus GNU ld's PLT FDEs.
#include <algorithm>

#include "sframe/unwind/cfi_reader.hpp"
#include "translate.hpp"

namespace sframe::cfi {

namespace detail {

Reason blocking_reason(const Function& fn, bool flex_ok) {
  Reason needs_flex = Reason::kNone;
  for (const Row& r : fn.rows) {
    if (r.reason == Reason::kNone) continue;
    if (!r.flex) return r.reason;
    if (needs_flex == Reason::kNone) needs_flex = r.reason;
  }
  return flex_ok ? Reason::kNone : needs_flex;
}

void fill_rows(const FunctionSpec& shape, const Function& cfi, FunctionSpec& out) {
  out.start_pc = shape.start_pc;
  out.size = shape.size;
  out.pc_type = shape.pc_type;
  out.rep_size = shape.rep_size;
  out.fde_type = shape.fde_type;
  out.signal = shape.signal;
  out.rows.clear();
  for (const Row& r : cfi.rows) out.rows.push_back(RowSpec{static_cast<std::uint32_t>(r.start - cfi.start), r.row});
}

PltRanges::PltRanges(std::span<const PltSection> plts) {
  for (const auto& sh : plts)
    if (sh.name == ".plt" || sh.name == ".plt.sec" || sh.name == ".plt.got") ranges_.push_back({sh.address, sh.size});
}

bool PltRanges::contains(std::uint64_t pc) const {
  return std::any_of(ranges_.begin(), ranges_.end(),
                     [&](const auto& r) { return pc >= r.first && pc - r.first < r.second; });
}

}  // namespace detail

namespace {

RowSpec sp_row(std::uint32_t start, std::int32_t cfa_offset) {
  RowSpec r;
  r.start_offset = start;
  r.row.cfa = make_rule(Rule::Base::kRegister, abi_regs(Abi::kAmd64Little).sp, cfa_offset, false);
  r.row.ra = make_rule(Rule::Base::kCfa, 0, -8, true);
  return r;
}

// GNU ld's SFrame for x86-64 PLTs: PLT0 pushes once and jumps; each 16-byte
// PLTn jumps through the GOT, then (lazy binding) pushes and jumps to PLT0.
std::vector<FunctionSpec> plt_functions(std::span<const PltSection> sections) {
  std::vector<FunctionSpec> out;
  for (const auto& sh : sections) {
    if (!sh.executable || sh.size == 0 || sh.size > UINT32_MAX) continue;
    const auto size = static_cast<std::uint32_t>(sh.size);
    FunctionSpec f;
    f.start_pc = sh.address;
    if (sh.name == ".plt" && size >= 16) {
      FunctionSpec plt0;
      plt0.start_pc = sh.address;
      plt0.size = 16;
      plt0.rows = {sp_row(0, 16), sp_row(6, 24)};
      out.push_back(plt0);
      if (size == 16) continue;
      f.start_pc = sh.address + 16;
      f.size = size - 16;
      f.rep_size = 16;
      f.rows = {sp_row(0, 8), sp_row(11, 16)};
    } else if (sh.name == ".plt.sec") {
      f.size = size;
      f.rep_size = 16;
      f.rows = {sp_row(0, 8)};
    } else if (sh.name == ".plt.got") {
      // jmp *GOT(%rip); xchg %ax,%ax: nothing is pushed, the CFA is rsp + 8
      // as ld's DWARF (an FDE with the CIE's rules) says. ld 2.40's SFrame
      // says sp+16, which sends an unwind interrupted there astray.
      f.size = size;
      f.rep_size = 8;
      f.rows = {sp_row(0, 8)};
    } else {
      continue;
    }
    f.pc_type = PcType::kMask;
    out.push_back(f);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FunctionSpec& x, const FunctionSpec& y) { return x.start_pc < y.start_pc; });
  return out;
}

// v2 start fields are signed 32-bit offsets from the field itself; keep
// 256 MiB of margin for the field's own place in the FDE table.
bool too_far_for_v2(std::uint64_t start_pc, std::uint64_t section_address) {
  const auto d = static_cast<std::int64_t>(start_pc - section_address);
  return d < std::int64_t{INT32_MIN} + (1 << 28) || d > std::int64_t{INT32_MAX} - (1 << 28);
}

// GNU ld's x86-64 .plt as its FDE describes it, for callers without
// section headers (a loaded module): PLT0's rows (CFA = SP + 16 at its
// start, SP + 24 after its push), then from PLT1 on the CFA expression
// SP + 8 + ((RIP & 15) >= 11) * 8, which only a PC-mask FDE can say.
bool is_ld_plt(const Function& fn) {
  const std::uint64_t size = fn.end - fn.start;
  if (fn.rows.size() != 3 || size < 32 || size % 16 != 0 || size > UINT32_MAX || fn.start % 16 != 0) return false;
  const auto sp_based = [](const Row& r, std::uint64_t at, std::int32_t off) {
    return r.start == at && r.reason == Reason::kNone && r.row.cfa.kind == Rule::Kind::kExpr &&
           r.row.cfa.base == Rule::Base::kRegister && r.row.cfa.regnum == abi_regs(Abi::kAmd64Little).sp &&
           !r.row.cfa.deref && r.row.cfa.offset == off;
  };
  return sp_based(fn.rows[0], fn.start, 16) && sp_based(fn.rows[1], fn.start + 6, 24) &&
         fn.rows[2].start == fn.start + 16 && fn.rows[2].reason == Reason::kCfaExpression;
}

}  // namespace

SectionSpec section_header(Abi abi, Version version, std::uint64_t section_address) {
  SectionSpec spec;
  spec.version = version;
  spec.abi = abi;
  spec.big_endian = abi_big_endian(abi);
  spec.cfa_fixed_ra_offset = abi == Abi::kAmd64Little ? -8 : 0;
  spec.section_address = section_address;
  return spec;
}

namespace {

// for_each_generated()'s work per CFI function, shared with the on-demand
// form (generate_function()): one mechanism for both.
class Translator {
 public:
  Translator(Abi abi, Version version, std::uint64_t section_address, std::span<const PltSection> plt_sections,
             Generated& g)
      : version_(version), section_address_(section_address), x86_(abi == Abi::kAmd64Little),
        plt_sections_(x86_ ? plt_sections : std::span<const PltSection>()), plt_(plt_sections_), g_(g) {
    g_.spec = section_header(abi, version, section_address);
  }

  // The PLT functions (x86-64 sections known) up to `pc`, in order.
  void plts_before(std::uint64_t pc, const TranslatedSink& out) {
    if (!plts_made_) {
      // PLT FDEs go in by start PC among the others, so the output is sorted.
      plts_ = plt_functions(plt_sections_);
      plts_made_ = true;
    }
    for (; next_plt_ < plts_.size() && plts_[next_plt_].start_pc <= pc; ++next_plt_) {
      const FunctionSpec& p = plts_[next_plt_];
      if (version_ == Version::kV2 && too_far_for_v2(p.start_pc, section_address_)) {
        g_.skipped.push_back({p.start_pc, p.size, Reason::kTooFarForV2});
        continue;
      }
      out(p, nullptr);
      ++g_.plt_functions;
    }
  }

  // One CFI function; `interleave`: PLT functions before it first.
  void function(const Function& fn, const TranslatedSink& out, bool interleave) {
    if (x86_ && plt_.contains(fn.start)) return;  // replaced by ld's PC-mask FDEs
    if (x86_ && plt_sections_.empty() && is_ld_plt(fn)) {
      // No section headers: ld's .plt recognized by its FDE's rows.
      const PltSection sec{".plt", fn.start, fn.end - fn.start, true};
      for (const FunctionSpec& p : plt_functions(std::span<const PltSection>(&sec, 1))) {
        out(p, nullptr);
        ++g_.plt_functions;
      }
      return;
    }
    ++g_.functions_in;
    const std::uint64_t size = fn.end - fn.start;
    Reason why = detail::blocking_reason(fn, version_ == Version::kV3);
    bool flex = false, signal = false;
    for (const Row& r : fn.rows) {
      signal |= r.signal;
      flex |= r.flex;
    }
    if (signal) g_.signal_ranges.push_back({fn.start, fn.end});
    if (size > UINT32_MAX) why = Reason::kUnsupportedRule;
    if (why == Reason::kNone && version_ == Version::kV2 && too_far_for_v2(fn.start, section_address_))
      why = Reason::kTooFarForV2;
    if (why != Reason::kNone) {
      g_.skipped.push_back({fn.start, size, why});
      return;
    }
    f_.start_pc = fn.start;
    f_.size = static_cast<std::uint32_t>(size);
    f_.fde_type = flex ? FdeType::kFlex : FdeType::kDefault;
    f_.signal = signal && version_ == Version::kV3;
    // The rows stay the reader's (no copy here): the sink takes them from
    // `fn`. (FLEX: the encoder writes "RA at the header's fixed offset" as
    // a padding word when an FP pair follows.)
    g_.flex_functions += flex;
    if (interleave) plts_before(f_.start_pc, out);
    out(f_, &fn);
  }

 private:
  Version version_;
  std::uint64_t section_address_;
  bool x86_;
  std::span<const PltSection> plt_sections_;
  detail::PltRanges plt_;
  Generated& g_;
  std::vector<FunctionSpec> plts_;
  bool plts_made_ = false;
  std::size_t next_plt_ = 0;
  FunctionSpec f_;  // the shape of the function given; no rows
};

// A FunctionSpec sink fed from the translator's: the reader's rows copied
// into RowSpecs (the encoder's input), in a FunctionSpec reused between
// calls.
class WithRows {
 public:
  explicit WithRows(const std::function<void(const FunctionSpec&)>& out) : out_(out) {}
  void operator()(const FunctionSpec& shape, const Function* cfi) {
    if (!cfi) {
      out_(shape);
      return;
    }
    detail::fill_rows(shape, *cfi, full_);
    out_(full_);
  }

 private:
  const std::function<void(const FunctionSpec&)>& out_;
  FunctionSpec full_;  // reused: its rows keep their capacity
};

}  // namespace

Expected<Generated> for_each_translated(std::span<const CfiSource> srcs, Abi abi, Version version,
                                        std::uint64_t section_address, std::span<const PltSection> plt_sections,
                                        const TranslatedSink& out) {
  Generated g;
  Translator t(abi, version, section_address, plt_sections, g);
  auto walked = read_cfi(srcs, abi, [&](const Function& fn) { t.function(fn, out, true); });
  if (!walked) return Unexpected{walked.error()};
  t.plts_before(UINT64_MAX, out);
  return g;
}

Expected<Generated> for_each_generated(std::span<const CfiSource> srcs, Abi abi, Version version,
                                       std::uint64_t section_address, std::span<const PltSection> plt_sections,
                                       const std::function<void(const FunctionSpec&)>& out) {
  WithRows full(out);
  return for_each_translated(srcs, abi, version, section_address, plt_sections,
                             [&](const FunctionSpec& shape, const Function* cfi) { full(shape, cfi); });
}

Generated generate_function(const Function& fn, Abi abi, Version version, std::uint64_t section_address,
                            std::span<const PltSection> plts, const std::function<void(const FunctionSpec&)>& out) {
  Generated g;
  Translator t(abi, version, section_address, plts, g);
  WithRows full(out);
  t.function(fn, [&](const FunctionSpec& shape, const Function* cfi) { full(shape, cfi); }, false);
  return g;
}

std::vector<FunctionSpec> plt_functions_at(std::span<const PltSection> plts, std::uint64_t pc) {
  for (const PltSection& p : plts)
    if (pc >= p.address && pc - p.address < p.size) return plt_functions(std::span<const PltSection>(&p, 1));
  return {};
}

Expected<Generated> generate(std::span<const CfiSource> srcs, Abi abi, Version version,
                             std::uint64_t section_address, std::span<const PltSection> plts) {
  std::vector<FunctionSpec> functions;
  auto g = for_each_generated(srcs, abi, version, section_address, plts,
                              [&](const FunctionSpec& f) { functions.push_back(f); });
  if (!g) return g;
  g->spec.functions = std::move(functions);
  return g;
}

}  // namespace sframe::cfi
