// SPDX-License-Identifier: MIT
// The unwinder on real sections made by GNU as/ld (the corpus). Stack images
// are built from the rows GNU objdump printed for each file (its golden text,
// never our decoder): for every frame of a random call chain, the return
// address and the saved FP are stored where objdump's row says they are
// (CFA from "sp+N"/"fp+N"/"(fp-40)"/"r10+0", slots from "c-N", fixed offsets
// from the header lines), and the walk must give back the planted return
// addresses and stack pointers. Plus random garbage stacks over every
// section, which must end with a reason and never crash (run under
// ASan+UBSan with -DSFRAMEPP_SANITIZE=ON).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/unwind/unwind.hpp"
#include "support/corpus.hpp"
#include "support/golden_rows.hpp"
#include "support/stack_image.hpp"
#include "../src/unwind/module_hint.hpp"

namespace {

using namespace sframe;
using namespace sframe_test;
using Kind = GoldenLoc::Kind;

constexpr std::uint64_t kStackBase = 0x7ff000000000;
constexpr std::size_t kStackSize = 0x80000;
// A return address into code without SFrame (libc's __libc_start_call_main):
// the walk ends there with kNoSFrameForPc.
constexpr std::uint64_t kOuterRet = 0x7fff00001234;

struct Loaded {
  std::vector<std::byte> bytes;
  Section section;
  GoldenSection golden;
  Arch arch = Arch::kAmd64;
  ByteOrder order = ByteOrder::kLittle;
  std::optional<FdeIndex> index;
  /// Built when the section passes validate(kStrict), as the in-process
  /// backtrace does.
  std::optional<RowIndex> rows;
  /// Functions whose range overlaps no other FDE's (relocatable objects put
  /// each text section at 0, so lookups there are ambiguous).
  std::vector<const GoldenFunc*> funcs;
  AddressRange range;  // link-time
};

std::unique_ptr<Loaded> load(const std::string& rel) {
  const auto path = shared_dir() / "corpus" / rel;
  auto f = elf::ElfFile::open(path.string());
  if (!f) return nullptr;
  auto d = f->sframe_section();
  if (!d) return nullptr;
  auto l = std::make_unique<Loaded>();
  l->bytes.assign(d->bytes.begin(), d->bytes.end());
  auto s = Section::parse(l->bytes, d->address);
  if (!s) return nullptr;
  l->section = *s;
  l->arch = arch_of(s->abi());
  l->order = abi_big_endian(s->abi()) ? ByteOrder::kBig : ByteOrder::kLittle;
  l->golden = parse_golden_section(read_file(path.string() + ".objdump.txt"));
  auto ix = FdeIndex::build(l->section);
  if (ix) l->index = std::move(*ix);
  if (validate(l->section, Strictness::kStrict)) {
    auto rows = RowIndex::build(l->section);
    if (rows) l->rows.emplace(std::move(*rows));
  }
  l->range = {~std::uint64_t{0}, 0};
  for (const GoldenFunc& g : l->golden.funcs) {
    l->range.begin = std::min(l->range.begin, g.pc);
    l->range.end = std::max(l->range.end, g.pc + g.size);
    bool alone = !g.mask && !g.rows.empty();
    for (const GoldenFunc& o : l->golden.funcs)
      if (&o != &g && o.pc < g.pc + g.size && g.pc < o.pc + o.size) alone = false;
    if (alone) l->funcs.push_back(&g);
  }
  return l;
}

struct Want {
  std::uint64_t pc;
  std::uint64_t sp;
};

// A stack image under construction: every slot written once, or the pick is
// refused (two frames' slots must never collide).
struct Builder {
  Builder(const Loaded& loaded, std::uint64_t load_bias, std::mt19937_64& random)
      : l(loaded), bias(load_bias), rng(random), stack(kStackBase, kStackSize, loaded.order) {}
  const Loaded& l;
  std::uint64_t bias;
  std::mt19937_64& rng;
  StackImage stack;
  std::map<std::uint64_t, std::uint64_t> written;
  Regs top_regs;
  std::vector<Want> frames;  // outermost first
  int flex_top = 0;    // topmost frames laid from a FLEX-only row (DRAP register, FP in a register)
  int flex_below = 0;  // non-topmost frames laid from a FLEX-only row (CFA or FP by dereference)

  bool free_slot(std::uint64_t a) const {
    if (a < kStackBase + 64 || a + 8 > kStackBase + kStackSize) return false;
    for (std::uint64_t b = a - 7; b != a + 8; ++b)
      if (written.count(b)) return false;
    return true;
  }
  std::uint16_t dwarf(int golden_reg) const {
    const ArchRegs ar = arch_regs(l.arch);
    return golden_reg == kGoldenSp ? ar.sp : golden_reg == kGoldenFp ? ar.fp : static_cast<std::uint16_t>(golden_reg);
  }
  std::uint64_t sign(std::uint64_t ra) { return ra | (rng() & 0xff7f000000000000ull) | (1ull << 49); }

  // Lays out one frame executing `row` whose CFA is `cfa`; `ret` is its
  // return address (into the caller), `caller_fp` the caller's FP value.
  // Returns {SP, FP} of the frame, or nullopt if the row cannot be laid out
  // here (or needs registers a non-topmost frame does not have).
  struct Laid {
    std::uint64_t sp, fp;
  };
  std::optional<Laid> lay(const GoldenRow& row, std::uint64_t cfa, std::uint64_t ret, std::uint64_t caller_fp,
                          bool top, Regs& regs) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> puts;
    const ArchRegs ar = arch_regs(l.arch);
    const auto slot = [&](std::uint64_t a, std::uint64_t v) {
      for (auto& p : puts)
        if (p.first + 8 > a && a + 8 > p.first) return false;
      if (!free_slot(a)) return false;
      puts.emplace_back(a, v);
      return true;
    };
    std::optional<std::uint64_t> sp, fp;
    // CFA.
    const GoldenLoc& c = row.cfa;
    const std::uint64_t off = static_cast<std::uint64_t>(c.offset);
    if (c.kind == Kind::kRegValue && c.reg == kGoldenSp) {
      sp = cfa - off;
    } else if (c.kind == Kind::kRegValue && c.reg == kGoldenFp) {
      fp = cfa - off;
      sp = *fp - 16 * (rng() % 4);
    } else if (c.kind == Kind::kRegValue && top) {
      regs.set(dwarf(c.reg), cfa - off);  // DRAP: r10 = CFA
      sp = ((cfa - 8 - 256) & ~std::uint64_t{63});
    } else if (c.kind == Kind::kRegDeref && c.reg == kGoldenFp) {
      fp = cfa - 64 - 16 * (rng() % 4);
      sp = *fp - 192;
      if (!slot(*fp + off, cfa)) return std::nullopt;
    } else {
      return std::nullopt;
    }
    if (l.arch == Arch::kS390x && !top && cfa - *sp <= 160) return std::nullopt;  // cannot have called
    if (!top && *sp >= cfa) return std::nullopt;
    // RA.
    const GoldenLoc& r = row.ra;
    const std::uint64_t ra_val = r.mangled ? sign(ret) : ret;
    const int fixed_ra = l.golden.fixed_ra;
    if (r.kind == Kind::kFixed || (r.kind == Kind::kPadWord && fixed_ra != 0)) {
      if (!slot(cfa + static_cast<std::uint64_t>(std::int64_t{fixed_ra}), ret)) return std::nullopt;
    } else if (r.kind == Kind::kCfaSlot) {
      if (!slot(cfa + static_cast<std::uint64_t>(r.offset), ra_val)) return std::nullopt;
    } else if ((r.kind == Kind::kUnchanged || r.kind == Kind::kPadWord) && top && ar.ra != kNoRegister) {
      regs.set(ar.ra, ra_val);
    } else {
      return std::nullopt;
    }
    // FP.
    const GoldenLoc& f = row.fp;
    const std::uint64_t junk = 0x5a5a0000 + (rng() & 0xfff0);
    if (f.kind == Kind::kUnchanged || (f.kind == Kind::kPadWord && l.golden.fixed_fp == 0)) {
      if (fp && *fp != caller_fp) return std::nullopt;  // FP-based CFA needs FP saved
      fp = caller_fp;
    } else if (f.kind == Kind::kCfaSlot) {
      if (!slot(cfa + static_cast<std::uint64_t>(f.offset), caller_fp)) return std::nullopt;
      if (!fp) fp = junk;
    } else if (f.kind == Kind::kRegDeref && f.reg == kGoldenFp) {
      if (!fp) fp = top ? *sp - 512 : *sp;
      if (!slot(*fp + static_cast<std::uint64_t>(f.offset), caller_fp)) return std::nullopt;
    } else if (f.kind == Kind::kRegValue && top) {
      regs.set(dwarf(f.reg), caller_fp);  // s390x: FP kept in an FPR
      if (!fp) fp = junk;
    } else {
      return std::nullopt;
    }
    if (!top) {
      // A callee writes below this frame's SP: our slots must be above it.
      for (auto& p : puts)
        if (p.first < *sp && l.arch != Arch::kS390x) return std::nullopt;
    }
    const bool flex = (c.kind != Kind::kRegValue || (c.reg != kGoldenSp && c.reg != kGoldenFp)) ||
                      f.kind == Kind::kRegDeref || f.kind == Kind::kRegValue || r.kind == Kind::kPadWord;
    if (flex) ++(top ? flex_top : flex_below);
    for (auto& p : puts) {
      stack.put(p.first, p.second);
      for (std::uint64_t b = p.first; b < p.first + 8; ++b) written[b] = 1;
    }
    return Laid{*sp, *fp};
  }

  // A PC (step = instruction granule) in [begin, end), and the return address
  // just after it.
  std::uint64_t pick_pc(std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t step = l.arch == Arch::kAarch64 ? 4 : l.arch == Arch::kS390x ? 2 : 1;
    const std::uint64_t n = (end - begin) / step;
    return begin + step * (n ? rng() % n : 0);
  }

  // Forces the topmost frame: PC `pc` (runtime) executing golden `row`.
  const GoldenRow* top_row = nullptr;
  std::uint64_t top_pc = 0;

  // Builds a chain of `depth` frames; false if some frame could not be laid
  // out.
  bool build(int depth) {
    std::uint64_t caller_sp = kStackBase + kStackSize - 4096;
    std::uint64_t caller_fp = 0x7777;
    std::uint64_t ret = kOuterRet;
    frames.push_back({ret, caller_sp});
    const std::uint64_t insn = l.arch == Arch::kAarch64 ? 4 : l.arch == Arch::kS390x ? 2 : 1;
    for (int j = 0; j < depth; ++j) {
      const bool top = j + 1 == depth;
      bool done = false;
      for (int attempt = 0; attempt < 200 && !done; ++attempt) {
        const GoldenFunc& g = *l.funcs[rng() % l.funcs.size()];
        const std::size_t ri = rng() % g.rows.size();
        const bool forced = top && top_row;
        const GoldenRow& row = forced ? *top_row : g.rows[ri];
        const std::uint64_t end = forced ? row.start + 1 : g.row_end(ri);
        if (end <= row.start) continue;
        Regs regs;
        regs.arch = l.arch;
        const std::uint64_t cfa = caller_sp + (l.arch == Arch::kS390x ? 160 : 0);
        const auto laid = lay(row, cfa, ret, caller_fp, top, regs);
        if (!laid) continue;
        const std::uint64_t pc = forced ? top_pc : pick_pc(row.start, end) + bias;
        if (top) {
          regs.pc = pc;
          regs.set(arch_regs(l.arch).sp, laid->sp);
          regs.set(arch_regs(l.arch).fp, laid->fp);
          top_regs = regs;
          frames.push_back({pc, laid->sp});
        } else {
          ret = pc + insn;
          frames.push_back({ret, laid->sp});
        }
        caller_sp = laid->sp;
        caller_fp = laid->fp;
        done = true;
      }
      if (!done) return false;
    }
    return true;
  }
};

struct CorpusCase {
  const char* file;
  std::uint64_t bias;
};

class UnwindCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(UnwindCorpus, GoldenChains) {
  const CorpusCase& cc = GetParam();
  auto l = load(cc.file);
  ASSERT_TRUE(l) << cc.file;
  ASSERT_FALSE(l->funcs.empty());
  std::array<Module, 2> storage;
  ModuleMap map(storage);
  // Lookups by sframe::find(), by the FdeIndex, by the RowIndex, by the
  // RowIndex's rows compiled to cacheable rules.
  enum Lookup { kFind, kFdeIndex, kRowIndex, kCompiledRows };
  std::vector<CompactRule> compiled;
  for (Lookup lookup : {kFind, kFdeIndex, kRowIndex, kCompiledRows}) {
    if ((lookup == kRowIndex || lookup == kCompiledRows) && !l->rows) continue;
    map.clear();
    Module mod{{l->range.begin + cc.bias, l->range.end + cc.bias}, cc.bias, l->section, nullptr};
    if (lookup == kFdeIndex && l->index) mod.index = &*l->index;
    if (lookup == kRowIndex || lookup == kCompiledRows) mod.rows = &*l->rows;
    if (lookup == kCompiledRows) {
      compiled = detail::compile_rows(*l->rows, l->section, l->arch);
      mod.compact_rows = compiled.data();
    }
    ASSERT_TRUE(map.add(mod));
    std::mt19937_64 rng(std::hash<std::string>()(cc.file));
    StaticRuleCache<256> cache;
    int built = 0, flex_top = 0, flex_below = 0;
    for (int round = 0; round < 150; ++round) {
      Builder b(*l, cc.bias, rng);
      const int depth = 1 + static_cast<int>(rng() % 24);
      if (!b.build(depth)) continue;
      ++built;
      flex_top += b.flex_top;
      flex_below += b.flex_below;
      std::array<Frame, 32> out;
      const UnwindResult r =
          unwind(map, b.stack.memory(), b.top_regs, std::span<Frame>(out), {}, round % 2 ? &cache : nullptr);
      ASSERT_EQ(r.reason, StopReason::kNoSFrameForPc)
          << stop_reason_name(r.reason) << " at 0x" << std::hex << r.address << " round " << std::dec << round;
      EXPECT_EQ(r.address, kOuterRet - 1);
      ASSERT_EQ(r.count, b.frames.size());
      for (std::size_t i = 0; i < r.count; ++i) {
        const Want& w = b.frames[b.frames.size() - 1 - i];
        EXPECT_EQ(out[i].pc.value(), w.pc) << "frame " << i << " round " << round;
        EXPECT_EQ(out[i].sp, w.sp) << "frame " << i << " round " << round;
      }
    }
    EXPECT_GT(built, 50);
    if (std::string(cc.file).find("realign") != std::string::npos) {
      EXPECT_GT(flex_top, 0);    // CFA = r10 (DRAP), topmost only
      EXPECT_GT(flex_below, 0);  // CFA = *(rbp - 40), FP = *rbp: any frame
    }
    if (std::string(cc.file) == "s390x-v3-O2/basic.o") {
      EXPECT_GT(flex_top, 0);  // FP in f2
    }
  }
}

// ld's PLT FDE in usesolib: one PC-mask FDE for all 16-byte entries; objdump
// prints its rows as offsets within an entry (STARTPC[m]).
TEST(UnwindCorpusPlt, EveryOffsetOfEveryEntry) {
  auto l = load("x86_64-v3-linked/usesolib");
  ASSERT_TRUE(l);
  const GoldenFunc* plt = nullptr;
  for (const GoldenFunc& g : l->golden.funcs)
    if (g.mask && g.size > 16) plt = &g;
  ASSERT_NE(plt, nullptr);
  ASSERT_EQ(plt->rows.size(), 2u);
  const std::uint64_t bias = 0x555555554000;
  std::array<Module, 1> storage;
  ModuleMap map(storage);
  ASSERT_TRUE(map.add({{l->range.begin + bias, l->range.end + bias}, bias, l->section, nullptr}));
  std::mt19937_64 rng(31);
  int walked = 0;
  for (std::uint64_t entry = 0; entry < plt->size / 16; ++entry) {
    for (std::uint64_t off = 0; off < 16; ++off) {
      Builder b(*l, bias, rng);
      b.top_row = off >= plt->rows[1].start ? &plt->rows[1] : &plt->rows[0];
      b.top_pc = plt->pc + 16 * entry + off + bias;
      if (!b.build(4)) continue;
      ++walked;
      std::array<Frame, 8> out;
      const UnwindResult r = unwind(map, b.stack.memory(), b.top_regs, std::span<Frame>(out));
      EXPECT_EQ(r.reason, StopReason::kNoSFrameForPc) << entry << "/" << off;
      ASSERT_EQ(r.count, b.frames.size());
      for (std::size_t i = 0; i < r.count; ++i) EXPECT_EQ(out[i].pc.value(), b.frames[b.frames.size() - 1 - i].pc);
    }
  }
  EXPECT_GT(walked, 32);
}

// realigned() in x86_64-v3-linked/realign: while the CFA is "r10+0" (DRAP,
// FLEX FDE), it can only be found in the topmost frame: as a caller (r10 is
// lost), the step must fail with kBadRule rather than guess.
TEST(UnwindCorpusDrap, DrapRegisterBelowTopmostIsBadRule) {
  auto l = load("x86_64-v3-linked/realign");
  ASSERT_TRUE(l);
  const GoldenFunc* realigned = nullptr;
  const GoldenFunc* consume = nullptr;
  for (const GoldenFunc& g : l->golden.funcs) {
    if (g.flex) realigned = &g;
    if (g.pc == 0x1180) consume = &g;  // nm: consume
  }
  ASSERT_NE(realigned, nullptr);
  ASSERT_NE(consume, nullptr);
  std::array<Module, 1> storage;
  ModuleMap map(storage);
  ASSERT_TRUE(map.add({l->range, 0, l->section, nullptr}));
  int checked = 0;
  for (std::size_t i = 0; i < realigned->rows.size(); ++i) {
    const GoldenRow& row = realigned->rows[i];
    if (!(row.cfa.kind == Kind::kRegValue && row.cfa.reg == 10)) continue;
    // consume (CFA = sp + 8) was called from inside that row.
    const std::uint64_t ret = row.start + 2;
    ASSERT_LT(ret - 1, realigned->row_end(i));
    StackImage stack(kStackBase, 0x1000);
    const std::uint64_t sp = kStackBase + 0x800;
    stack.put(sp, ret);
    Regs regs = Regs::amd64(consume->pc + 1, sp, 0x1234);
    regs.set(10, sp + 0x100);  // consume does not touch r10, but it is not callee-saved either
    std::array<Frame, 8> out;
    const UnwindResult r = unwind(map, stack.memory(), regs, std::span<Frame>(out));
    EXPECT_EQ(r.reason, StopReason::kBadRule);
    EXPECT_EQ(r.address, ret - 1);
    ASSERT_EQ(r.count, 2u);
    EXPECT_EQ(out[1].pc.value(), ret);
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

// ---------------------------------------------------------------------------
// The cold step's lean lookup (detail::lookup_compact) against the full one
// (detail::lookup_rules), and against objdump's rows.

// Every PC where a section's rule may change: each FRE start, each function
// start and end, one byte either side (link-time).
std::vector<std::uint64_t> boundary_pcs(const Section& s) {
  std::vector<std::uint64_t> pcs;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f) continue;
    const std::uint64_t end = f->start_pc + f->size;
    for (const std::uint64_t at : {f->start_pc, end - 1, end})
      for (const std::uint64_t d : {~std::uint64_t{0}, std::uint64_t{0}, std::uint64_t{1}}) pcs.push_back(at + d);
    for (const Expected<Fre>& fre : s.fres(*f)) {
      if (!fre) break;
      for (const std::uint64_t d : {~std::uint64_t{0}, std::uint64_t{0}, std::uint64_t{1}})
        pcs.push_back(f->start_pc + fre->start_offset + d);
    }
  }
  return pcs;
}

// A section with the accelerators the in-process backtrace builds for it.
struct Compiled {
  Section section;
  std::optional<RowIndex> rows;
  std::vector<CompactRule> compact;
  AddressRange range;  // link-time: lowest start to highest end
  Module module(std::uint64_t bias) const {
    Module m{{range.begin + bias, range.end + bias}, bias, section, nullptr};
    m.rows = rows ? &*rows : nullptr;
    m.compact_rows = rows ? compact.data() : nullptr;
    return m;
  }
};

std::optional<Compiled> compile(const Section& s) {
  Compiled c{s, std::nullopt, {}, {~std::uint64_t{0}, 0}};
  if (!validate(s, Strictness::kStrict)) return std::nullopt;
  auto rows = RowIndex::build(s);
  if (!rows) return std::nullopt;
  c.rows.emplace(std::move(*rows));
  c.compact = detail::compile_rows(*c.rows, s, arch_of(s.abi()));
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    Expected<Fde> f = s.fde(i);
    if (!f || f->size == 0) continue;
    c.range.begin = std::min(c.range.begin, f->start_pc);
    c.range.end = std::max(c.range.end, f->start_pc + f->size);
  }
  if (c.range.begin >= c.range.end) return std::nullopt;
  return c;
}

struct LeanCount {
  int rule = 0, none = 0, full = 0;
};

// lookup_compact at `pc` (runtime) against lookup_rules: kRule only where
// the full lookup found a cacheable rule, and then the same 8 bytes (kValid
// set) with the row's signal flag in kSignal; kNoSFrame only where it found
// no FDE. `strict_rows`: a single map, whose RowIndex tells where kFull is
// allowed (a PC-mask FDE, a PC before its FDE's first FRE); any other PC
// with a cacheable rule must take the lean path.
void expect_lean_equals_full(const ModuleMap& map, const ModuleMap* fallback, Arch arch, std::uint64_t pc,
                             detail::ModuleHint& hint, const RowIndex* strict_rows, std::uint64_t bias,
                             LeanCount& n, const std::string& what) {
  const detail::LookedUpRules full = detail::lookup_rules(map, fallback, arch, pc);
  CompactRule lean;
  const detail::CompactLookup k = detail::lookup_compact(map, fallback, arch, pc, hint, lean);
  const bool cacheable = full.status == detail::LookupStatus::kFound && full.compactable;
  switch (k) {
    case detail::CompactLookup::kRule:
      ++n.rule;
      ASSERT_TRUE(cacheable) << what << " 0x" << std::hex << pc;
      EXPECT_EQ(lean, full.compact.with_valid()) << what << " 0x" << std::hex << pc;
      EXPECT_EQ((lean.flags & CompactRule::kSignal) != 0, full.signal) << what << " 0x" << std::hex << pc;
      break;
    case detail::CompactLookup::kNoSFrame:
      ++n.none;
      EXPECT_EQ(full.status, detail::LookupStatus::kNoSFrame) << what << " 0x" << std::hex << pc;
      break;
    case detail::CompactLookup::kFull:
      ++n.full;
      if (strict_rows && cacheable) {
        const Expected<std::uint32_t> id = strict_rows->find_row(pc - bias);
        EXPECT_TRUE(!id || *id == RowIndex::kUseFind) << what << ": lean lookup gave up at 0x" << std::hex << pc;
      }
      break;
  }
}

// Every boundary PC of every corpus section the backtrace would index, with
// the module hint kept from PC to PC (as a walk keeps it) and without.
TEST_P(UnwindCorpus, LeanLookupEqualsFullLookup) {
  const CorpusCase& cc = GetParam();
  auto l = load(cc.file);
  ASSERT_TRUE(l) << cc.file;
  auto c = compile(l->section);
  if (!l->rows) {
    EXPECT_FALSE(c) << cc.file;  // kept by the full lookup's other paths
    return;
  }
  ASSERT_TRUE(c) << cc.file;
  std::array<Module, 1> storage;
  ModuleMap map(storage);
  ASSERT_TRUE(map.add(c->module(cc.bias)));
  LeanCount n;
  detail::ModuleHint kept;
  for (const std::uint64_t pc : boundary_pcs(c->section)) {
    detail::ModuleHint fresh;
    expect_lean_equals_full(map, nullptr, arch_of(c->section.abi()), pc + cc.bias, kept, &*c->rows, cc.bias, n,
                            cc.file);
    expect_lean_equals_full(map, nullptr, arch_of(c->section.abi()), pc + cc.bias, fresh, &*c->rows, cc.bias, n,
                            cc.file);
  }
  // Another arch's map: never a rule (the full lookup reports kBadAbi).
  const Arch other = arch_of(c->section.abi()) == Arch::kAmd64 ? Arch::kAarch64 : Arch::kAmd64;
  CompactRule lean;
  detail::ModuleHint hint;
  EXPECT_EQ(detail::lookup_compact(map, nullptr, other, c->range.begin + cc.bias, hint, lean),
            detail::CompactLookup::kFull);
  EXPECT_GT(n.rule, 0) << cc.file;
  EXPECT_GT(n.none, 0) << cc.file;
}

// The lean lookup's rules against objdump's rows (GNU's text, not our
// decoder): CFA base and offset, RA and FP slots, for every row of every
// DEFAULT function of the x86-64 sections.
TEST_P(UnwindCorpus, LeanLookupMatchesObjdumpRows) {
  const CorpusCase& cc = GetParam();
  auto l = load(cc.file);
  ASSERT_TRUE(l) << cc.file;
  if (l->arch != Arch::kAmd64 || !l->rows) return;
  auto c = compile(l->section);
  ASSERT_TRUE(c);
  std::array<Module, 1> storage;
  ModuleMap map(storage);
  ASSERT_TRUE(map.add(c->module(cc.bias)));
  int checked = 0;
  detail::ModuleHint hint;
  for (const GoldenFunc* g : l->funcs) {
    if (g->flex) continue;
    for (const GoldenRow& row : g->rows) {
      const GoldenLoc& cfa = row.cfa;
      if (cfa.kind != Kind::kRegValue || (cfa.reg != kGoldenSp && cfa.reg != kGoldenFp)) continue;
      CompactRule r;
      const std::uint64_t pc = row.start + cc.bias;
      ASSERT_EQ(detail::lookup_compact(map, nullptr, Arch::kAmd64, pc, hint, r), detail::CompactLookup::kRule)
          << cc.file << " 0x" << std::hex << row.start;
      EXPECT_EQ((r.flags & CompactRule::kCfaBaseFp) != 0, cfa.reg == kGoldenFp) << cc.file << " 0x" << std::hex << row.start;
      EXPECT_EQ(r.cfa_offset, cfa.offset) << cc.file << " 0x" << std::hex << row.start;
      // x86-64: the RA at the header's fixed offset ("f"), or a CFA slot.
      const std::int64_t ra_at = row.ra.kind == Kind::kCfaSlot ? row.ra.offset : l->golden.fixed_ra;
      ASSERT_TRUE(row.ra.kind == Kind::kFixed || row.ra.kind == Kind::kCfaSlot) << cc.file;
      EXPECT_TRUE(r.flags & CompactRule::kRaOnStack) << cc.file << " 0x" << std::hex << row.start;
      EXPECT_EQ(std::int64_t{r.ra_offset_by_8} * 8, ra_at) << cc.file << " 0x" << std::hex << row.start;
      if (row.fp.kind == Kind::kCfaSlot || (row.fp.kind == Kind::kFixed && l->golden.fixed_fp != 0)) {
        const std::int64_t fp_at = row.fp.kind == Kind::kCfaSlot ? row.fp.offset : l->golden.fixed_fp;
        EXPECT_TRUE(r.flags & CompactRule::kFpOnStack) << cc.file << " 0x" << std::hex << row.start;
        EXPECT_EQ(std::int64_t{r.fp_offset_by_8} * 8, fp_at) << cc.file << " 0x" << std::hex << row.start;
      } else {
        ASSERT_EQ(row.fp.kind, Kind::kUnchanged) << cc.file;
        EXPECT_FALSE(r.flags & CompactRule::kFpOnStack) << cc.file << " 0x" << std::hex << row.start;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << cc.file;
}

// Sections generated from .eh_frame (cfi::generate, as the backtrace does
// for modules without their own), alone and as the fallback map behind the
// linker's own section (the backtrace's native + extra pair).
TEST(UnwindLeanLookup, GeneratedSectionsAndTheFallbackMap) {
  int files = 0;
  for (const char* rel : {"x86_64-v3-linked/basic", "x86_64-v3-linked/cxx", "x86_64-v3-linked/realign",
                          "x86_64-v3-linked/longfn", "x86_64-v3-linked/libdemo.so", "x86_64-v3-linked/usesolib",
                          "x86_64-v3-linked/signals"}) {
    const auto path = shared_dir() / "corpus" / rel;
    auto f = elf::ElfFile::open(path.string());
    ASSERT_TRUE(f) << rel;
    auto own = f->sframe_section();
    ASSERT_TRUE(own) << rel;
    std::vector<std::byte> own_bytes(own->bytes.begin(), own->bytes.end());
    auto own_section = Section::parse(own_bytes, own->address);
    ASSERT_TRUE(own_section) << rel;
    auto g = cfi::generate(*f, Version::kV3, own->address);
    ASSERT_TRUE(g) << rel;
    auto bytes = encode(g->spec);
    ASSERT_TRUE(bytes) << rel;
    auto gen_section = Section::parse(*bytes, own->address);
    ASSERT_TRUE(gen_section) << rel;
    auto gen = compile(*gen_section);
    ASSERT_TRUE(gen) << rel;
    auto native = compile(*own_section);
    ASSERT_TRUE(native) << rel;
    const std::uint64_t bias = 0x7f0000000000;
    std::array<Module, 1> gen_storage, native_storage;
    ModuleMap gen_map(gen_storage), native_map(native_storage);
    ASSERT_TRUE(gen_map.add(gen->module(bias)));
    ASSERT_TRUE(native_map.add(native->module(bias)));
    LeanCount alone, chain;
    detail::ModuleHint h1, h2;
    for (const std::uint64_t pc : boundary_pcs(gen->section))
      expect_lean_equals_full(gen_map, nullptr, Arch::kAmd64, pc + bias, h1, &*gen->rows, bias, alone, rel);
    // Generated functions the own section lacks (_start, PLT, crt code) are
    // found through the fallback map.
    std::vector<std::uint64_t> pcs = boundary_pcs(gen->section);
    const std::vector<std::uint64_t> more = boundary_pcs(native->section);
    pcs.insert(pcs.end(), more.begin(), more.end());
    for (const std::uint64_t pc : pcs)
      expect_lean_equals_full(native_map, &gen_map, Arch::kAmd64, pc + bias, h2, nullptr, bias, chain, rel);
    EXPECT_GT(alone.rule, 0) << rel;
    EXPECT_GT(chain.rule, alone.rule / 2) << rel;
    ++files;
  }
  EXPECT_EQ(files, 7);
}

INSTANTIATE_TEST_SUITE_P(
    Gnu, UnwindCorpus,
    ::testing::Values(CorpusCase{"x86_64-v3-linked/basic", 0}, CorpusCase{"x86_64-v3-linked/cxx", 0},
                      CorpusCase{"x86_64-v3-linked/realign", 0}, CorpusCase{"x86_64-v3-linked/longfn", 0},
                      CorpusCase{"x86_64-v3-linked/libdemo.so", 0x7f1234560000},
                      CorpusCase{"x86_64-v3-linked/usesolib", 0x555555554000},
                      CorpusCase{"x86_64-v2-linked/cxx", 0},
                      // Relocatable objects have code at 0: load them higher.
                      CorpusCase{"x86_64-v3-O0-fp/basic.o", 0x10000}, CorpusCase{"x86_64-v3-O2/basic.o", 0x10000},
                      CorpusCase{"x86_64-v3-O2/lib.o", 0x10000}, CorpusCase{"aarch64-v3-O2/basic.o", 0x10000},
                      CorpusCase{"aarch64-v3-O2/longfn.o", 0x10000}, CorpusCase{"aarch64-v3-pauth/basic.o", 0x10000},
                      CorpusCase{"aarch64-v3-pauth/longfn.o", 0x10000}, CorpusCase{"s390x-v3-O2/basic.o", 0x10000},
                      CorpusCase{"s390x-v3-O2/longfn.o", 0x10000}),
    [](const auto& p) {
      std::string n = p.param.file;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
