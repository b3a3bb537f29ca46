// SPDX-License-Identifier: MIT
// The unwinder's building blocks: memory readers, the module map, the rule
// cache, code addresses; and robustness: random garbage stacks and registers
// over every corpus section never crash and always end with a reason (run
// under ASan+UBSan with -DSFRAMEPP_SANITIZE=ON).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/unwind/unwind.hpp"
#include "support/corpus.hpp"
#include "support/stack_image.hpp"

namespace {

using namespace sframe;
using namespace sframe_test;

TEST(UnwindMemory, BufferBoundsAreExact) {
  std::vector<std::byte> b(32);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::byte(i);
  const BufferMemory le(b, 0x1000, ByteOrder::kLittle);
  const BufferMemory be(b, 0x1000, ByteOrder::kBig);
  EXPECT_EQ(le.read_word(0x1000), 0x0706050403020100ull);
  EXPECT_EQ(be.read_word(0x1000), 0x0001020304050607ull);
  EXPECT_EQ(le.read_word(0x1018), 0x1f1e1d1c1b1a1918ull);  // last whole word
  EXPECT_EQ(le.read_word(0x1003), 0x0a09080706050403ull);  // unaligned
  EXPECT_FALSE(le.read_word(0x1019));                      // one byte past the end
  EXPECT_FALSE(le.read_word(0xfff));                        // one byte before
  EXPECT_FALSE(le.read_word(0));
  EXPECT_FALSE(le.read_word(~std::uint64_t{0}));
  EXPECT_FALSE(le.read_word(~std::uint64_t{0} - 6));  // addr + 8 wraps
  // At the top of the address space.
  const BufferMemory top(b, ~std::uint64_t{0} - 31);
  EXPECT_TRUE(top.read_word(~std::uint64_t{0} - 7));
  EXPECT_FALSE(top.read_word(~std::uint64_t{0} - 6));
  // Smaller than a word: nothing readable.
  const BufferMemory tiny(std::span<const std::byte>(b).first(7), 0x1000);
  EXPECT_FALSE(tiny.read_word(0x1000));
  std::array<std::byte, 4> four{};
  EXPECT_TRUE(le.read(0x101c, four));
  EXPECT_EQ(four[3], std::byte{0x1f});
  EXPECT_FALSE(le.read(0x101d, four));
  EXPECT_FALSE(le.read(0x0fff, four));
}

TEST(UnwindMemory, MultiBufferAndTypeErasedAdapter) {
  std::vector<std::byte> a(16, std::byte{1}), c(16, std::byte{2});
  const std::array<BufferMemory, 2> regions{BufferMemory(a, 0x1000), BufferMemory(c, 0x5000)};
  const MultiBufferMemory multi(regions);
  EXPECT_EQ(multi.read_word(0x1008), 0x0101010101010101ull);
  EXPECT_EQ(multi.read_word(0x5000), 0x0202020202020202ull);
  EXPECT_FALSE(multi.read_word(0x100c));  // straddles the end of a region
  const MemoryAdapter<MultiBufferMemory> adapter(multi);
  const Memory& m = adapter;
  EXPECT_EQ(m.read_word(0x5008), 0x0202020202020202ull);
  EXPECT_FALSE(m.read_word(0x3000));
}

TEST(UnwindCodeAddress, ReturnAddressesLookUpTheCall) {
  constexpr CodeAddress ra = CodeAddress::return_address(0x1000);
  constexpr CodeAddress pc = CodeAddress::exact(0x1000);
  static_assert(ra.lookup_pc() == 0xfff && pc.lookup_pc() == 0x1000);
  static_assert(ra.is_return_address() && !pc.is_return_address());
  static_assert(!(ra == pc));
}

Module mod(std::uint64_t b, std::uint64_t e) {
  Module m;
  m.range = {b, e};
  return m;
}

TEST(UnwindModuleMap, SortedAllocationFreeAndChecked) {
  std::array<Module, 3> storage;
  ModuleMap map(storage);
  const std::uint64_t g0 = map.generation();
  EXPECT_NE(g0, 0u);
  EXPECT_TRUE(map.add(mod(0x5000, 0x6000)));
  EXPECT_TRUE(map.add(mod(0x1000, 0x2000)));
  EXPECT_TRUE(map.add(mod(0x3000, 0x4000)));
  EXPECT_NE(map.generation(), g0);
  ASSERT_EQ(map.modules().size(), 3u);
  EXPECT_EQ(map.modules()[0].range.begin, 0x1000u);
  EXPECT_EQ(map.modules()[2].range.begin, 0x5000u);
  auto full = map.add(mod(0x7000, 0x8000));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), IoErrc::kModuleMapFull);
  EXPECT_EQ(map.find(0x0fff), nullptr);
  EXPECT_EQ(map.find(0x1000), &map.modules()[0]);
  EXPECT_EQ(map.find(0x1fff), &map.modules()[0]);
  EXPECT_EQ(map.find(0x2000), nullptr);
  EXPECT_EQ(map.find(0x3800), &map.modules()[1]);
  EXPECT_EQ(map.find(0x5fff), &map.modules()[2]);
  EXPECT_EQ(map.find(0x6000), nullptr);
  EXPECT_EQ(map.find(~std::uint64_t{0}), nullptr);
  const std::uint64_t g1 = map.generation();
  EXPECT_TRUE(map.remove(0x3000));
  EXPECT_FALSE(map.remove(0x3000));
  EXPECT_NE(map.generation(), g1);
  EXPECT_EQ(map.find(0x3800), nullptr);
  for (auto [b, e] : {std::pair{0x1800ull, 0x2800ull}, {0x0800ull, 0x1001ull}, {0x4000ull, 0x6000ull}, {0x0ull, 0x10000ull}}) {
    auto r = map.add(mod(b, e));
    ASSERT_FALSE(r) << std::hex << b;
    EXPECT_EQ(r.error().code(), IoErrc::kModulesOverlap);
  }
  EXPECT_TRUE(map.add(mod(0x2000, 0x5000)));  // touching both neighbours
  auto empty = map.add(mod(0x9000, 0x9000));
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code(), IoErrc::kBadModuleRange);
  // Generations are unique across maps.
  std::array<Module, 1> other_storage;
  ModuleMap other(other_storage);
  EXPECT_NE(other.generation(), map.generation());
  map.clear();
  EXPECT_TRUE(map.modules().empty());
  EXPECT_EQ(map.find(0x1000), nullptr);
}

TEST(UnwindModuleMap, AddSortedMergesAllOrNothing) {
  std::array<Module, 6> storage;
  ModuleMap map(storage);
  ASSERT_TRUE(map.add(mod(0x3000, 0x4000)));
  ASSERT_TRUE(map.add(mod(0x7000, 0x8000)));
  const std::uint64_t g0 = map.generation();
  EXPECT_TRUE(map.add_sorted({}));
  EXPECT_EQ(map.generation(), g0);  // nothing added: same generation
  // Before, between and after the present ones, touching them.
  const std::array<Module, 3> in{mod(0x1000, 0x3000), mod(0x4000, 0x5000), mod(0x8000, 0x9000)};
  ASSERT_TRUE(map.add_sorted(in));
  EXPECT_NE(map.generation(), g0);
  const std::uint64_t want[][2] = {{0x1000, 0x3000}, {0x3000, 0x4000}, {0x4000, 0x5000}, {0x7000, 0x8000}, {0x8000, 0x9000}};
  ASSERT_EQ(map.modules().size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(map.modules()[i].range.begin, want[i][0]) << i;
    EXPECT_EQ(map.modules()[i].range.end, want[i][1]) << i;
  }
  EXPECT_EQ(map.find(0x4800), &map.modules()[2]);
  // Errors leave the map as it was.
  const std::uint64_t g1 = map.generation();
  const auto unchanged = [&] {
    EXPECT_EQ(map.generation(), g1);
    ASSERT_EQ(map.modules().size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(map.modules()[i].range.begin, want[i][0]);
  };
  const std::array<Module, 2> too_many{mod(0x9000, 0xa000), mod(0xa000, 0xb000)};
  auto r = map.add_sorted(too_many);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), IoErrc::kModuleMapFull);
  unchanged();
  const std::array<Module, 1> overlapping{mod(0x6000, 0x7001)};
  r = map.add_sorted(overlapping);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), IoErrc::kModulesOverlap);
  EXPECT_EQ(r.error().value, 0x6000u);
  unchanged();
  const std::array<Module, 1> empty{mod(0x9000, 0x9000)};
  r = map.add_sorted(empty);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), IoErrc::kBadModuleRange);
  unchanged();
  std::array<Module, 4> big_storage;
  ModuleMap fresh(big_storage);
  const std::array<Module, 2> self_overlap{mod(0x1000, 0x2000), mod(0x1800, 0x2800)};
  r = fresh.add_sorted(self_overlap);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), IoErrc::kModulesOverlap);
  EXPECT_TRUE(fresh.modules().empty());
}

TEST(UnwindRuleCache, DirectMappedAndGenerationKeyed) {
  std::array<RuleCache::Entry, 100> storage;  // not a power of two: 64 used
  RuleCache cache(storage);
  CompactRule r;
  r.cfa_offset = 16;
  cache.sync(7);
  EXPECT_EQ(cache.lookup(0x1234), nullptr);
  cache.insert(0x1234, r);
  ASSERT_NE(cache.lookup(0x1234), nullptr);
  EXPECT_EQ(cache.lookup(0x1234)->cfa_offset, 16);
  EXPECT_EQ(cache.lookup(0x1235), nullptr);
  cache.sync(7);
  EXPECT_NE(cache.lookup(0x1234), nullptr);
  cache.sync(8);  // the module map changed
  EXPECT_EQ(cache.lookup(0x1234), nullptr);
  // PC 0 is a valid key, distinct from empty slots.
  EXPECT_EQ(cache.lookup(0), nullptr);
  cache.insert(0, r);
  EXPECT_NE(cache.lookup(0), nullptr);
  // No storage: a cache that never hits and never writes.
  RuleCache none{std::span<RuleCache::Entry>()};
  none.insert(1, r);
  EXPECT_EQ(none.lookup(1), nullptr);
  static_assert(sizeof(RuleCache::Entry) == 16);
}

TEST(UnwindRuleCache, ClearEmptiesEveryEntry) {
  // clear() rewrites only the sets written since the last clear while
  // there were at most kLogged inserts, else everything: either way no
  // entry survives, which the caller's storage shows.
  std::array<RuleCache::Entry, 1024> storage;
  CompactRule r;
  r.cfa_offset = 8;
  // The caller's storage may hold anything: the constructor clears it all.
  for (RuleCache::Entry& e : storage) e = RuleCache::Entry{0x4000, r.with_valid()};
  RuleCache cache(storage);
  EXPECT_EQ(cache.lookup(0x4000), nullptr);
  for (const unsigned n : {1u, 7u, RuleCache::kLogged - 1, RuleCache::kLogged, RuleCache::kLogged + 1,
                           3 * RuleCache::kLogged}) {
    // Distinct pseudo-random PCs, many sharing sets (1024 entries: 512
    // sets), so that both entries of a set get written.
    const auto pc = [](unsigned i) { return 0x10000 + (std::uint64_t{i} * 0x9e3779b97f4a7c15ULL >> 40); };
    for (unsigned i = 0; i < n; ++i) cache.insert(pc(i), r);
    ASSERT_NE(cache.lookup(pc(n - 1)), nullptr) << n;
    cache.clear();
    for (unsigned i = 0; i < n; ++i) EXPECT_EQ(cache.lookup(pc(i)), nullptr) << n << " " << i;
    for (const RuleCache::Entry& e : storage) {
      EXPECT_EQ(e.pc, 0u) << n;
      EXPECT_EQ(e.rule, CompactRule{}) << n;
    }
  }
  // Storage the cache does not use (past the power of two) stays untouched.
  std::array<RuleCache::Entry, 6> odd;
  for (RuleCache::Entry& e : odd) e = RuleCache::Entry{0x77, r};
  RuleCache small(odd);  // 4 entries used
  small.insert(0x10, r);
  small.clear();
  EXPECT_EQ(small.lookup(0x10), nullptr);
  EXPECT_EQ(odd[4].pc, 0x77u);
  EXPECT_EQ(odd[5].pc, 0x77u);
}

// Over zeroed storage (fresh anonymous pages) the cache answers as one over
// storage it cleared itself, and the constructor writes none of it: the
// kernel's mincore() shows every page still not resident until inserts
// reach them, and then only those pages.
TEST(UnwindRuleCache, ZeroedStorageStaysUntouchedUntilInserted) {
  constexpr std::size_t kEntries = 4096;  // 64 KiB: 16 pages
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = kEntries * sizeof(RuleCache::Entry);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto resident = [&] {
    std::vector<unsigned char> v((bytes + page - 1) / page);
    EXPECT_EQ(mincore(p, bytes, v.data()), 0);
    std::size_t n = 0;
    for (const unsigned char c : v) n += c & 1;
    return n;
  };
  auto* entries = static_cast<RuleCache::Entry*>(p);
  RuleCache cache(std::span<RuleCache::Entry>(entries, kEntries), RuleCache::ZeroedStorage{});
  EXPECT_EQ(resident(), 0u);
  std::array<RuleCache::Entry, kEntries> own;
  RuleCache reference(own);
  CompactRule r;
  r.cfa_offset = 24;
  reference.sync(3);
  cache.sync(3);
  const auto pc = [](unsigned i) { return 0x7f0000001000 + (std::uint64_t{i} * 0x9e3779b97f4a7c15ULL >> 44); };
  for (unsigned i = 0; i < 3; ++i) {
    cache.insert(pc(i), r);
    reference.insert(pc(i), r);
  }
  EXPECT_GE(resident(), 1u);
  EXPECT_LE(resident(), 3u);
  for (unsigned i = 0; i < 64; ++i) {
    const CompactRule* a = cache.lookup(pc(i));
    const CompactRule* b = reference.lookup(pc(i));
    ASSERT_EQ(a == nullptr, b == nullptr) << i;
    if (a) {
      EXPECT_EQ(*a, *b) << i;
    }
  }
  EXPECT_EQ(cache.lookup(0), nullptr);  // an all-zero entry is empty, not PC 0's
  cache.clear();
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(cache.lookup(pc(i)), nullptr);
  munmap(p, bytes);
}

// A map that only gained a module over [lo, hi): adopt() keeps the rules of
// PCs outside it (their lookups cannot change), drops those inside (a
// cached "no SFrame" there is now wrong), and sync() with the new
// generation then keeps what is left. Entries from the set layout: PCs 64
// apart share no set in a 64-entry cache.
TEST(UnwindRuleCache, AdoptDropsOnlyTheAddedRange) {
  StaticRuleCache<64> cache;
  cache.sync(3);
  CompactRule r;
  r.cfa_offset = 8;
  CompactRule none;
  none.flags = CompactRule::kNoSFrame;
  cache.insert(0x1000, r);      // below the range
  cache.insert(0x2000, none);   // inside: no module was there
  cache.insert(0x2fff, none);   // inside, last byte
  cache.insert(0x3000, r);      // at its end: outside
  cache.adopt(4, 0x2000, 0x3000);
  EXPECT_EQ(cache.generation(), 4u);
  cache.sync(4);
  ASSERT_NE(cache.lookup(0x1000), nullptr);
  EXPECT_EQ(cache.lookup(0x1000)->cfa_offset, 8);
  EXPECT_EQ(cache.lookup(0x2000), nullptr);
  EXPECT_EQ(cache.lookup(0x2fff), nullptr);
  EXPECT_NE(cache.lookup(0x3000), nullptr);
  cache.sync(5);  // any other change: everything goes
  EXPECT_EQ(cache.lookup(0x1000), nullptr);
  EXPECT_EQ(cache.lookup(0x3000), nullptr);
}

// adopt() past the insert log (more than kLogged inserts since the last
// clear): for a short range (it visits the sets of the range's PCs) and a
// long one (every entry), every cached PC inside goes and every cached PC
// outside stays.
TEST(UnwindRuleCache, AdoptPastTheInsertLog) {
  for (const std::uint64_t len : {0x40u, 0x100u, 0x1000u, 0x10000u}) {
    StaticRuleCache<1024> cache;
    cache.sync(1);
    CompactRule r;
    r.cfa_offset = 16;
    CompactRule none;
    none.flags = CompactRule::kNoSFrame;
    const std::uint64_t lo = 0x400000, hi = lo + len;
    std::vector<std::uint64_t> pcs;
    for (std::uint64_t i = 0; i < 3 * RuleCache::kLogged; ++i) pcs.push_back(0x100000 + 0x1234 * i);
    for (std::uint64_t pc = lo - 8; pc < hi + 8; pc += 3) pcs.push_back(pc);
    for (const std::uint64_t pc : pcs) cache.insert(pc, pc >= lo && pc < hi ? none : r);
    std::vector<std::uint64_t> present;
    std::size_t inside = 0;
    for (const std::uint64_t pc : pcs)
      if (cache.lookup(pc)) {
        present.push_back(pc);
        inside += pc >= lo && pc < hi;
      }
    ASSERT_GT(inside, 0u) << len;
    cache.adopt(2, lo, hi);
    EXPECT_EQ(cache.generation(), 2u);
    for (const std::uint64_t pc : present) {
      if (pc >= lo && pc < hi)
        EXPECT_EQ(cache.lookup(pc), nullptr) << std::hex << pc << " in [" << lo << ", " << hi << ")";
      else
        EXPECT_NE(cache.lookup(pc), nullptr) << std::hex << pc << " outside [" << lo << ", " << hi << ")";
    }
  }
}

// ---------------------------------------------------------------------------
// Robustness on every corpus section
// ---------------------------------------------------------------------------

class UnwindGarbage : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(UnwindGarbage, RandomStacksAndRegistersEndWithAReason) {
  const GoldenCase& c = GetParam();
  auto f = elf::ElfFile::open((c.dir / c.file).string());
  ASSERT_TRUE(f);
  auto d = f->sframe_section();
  ASSERT_TRUE(d);
  const std::vector<std::byte> bytes(d->bytes.begin(), d->bytes.end());
  auto s = Section::parse(bytes, d->address);
  ASSERT_TRUE(s);
  const Arch arch = arch_of(s->abi());
  const ByteOrder order = abi_big_endian(s->abi()) ? ByteOrder::kBig : ByteOrder::kLittle;
  // Code range: every FDE's, loaded 0x10000 higher (relocatable objects sit at 0).
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (std::uint32_t i = 0; i < s->num_fdes(); ++i) {
    auto fde = s->fde(i);
    if (!fde) continue;
    lo = std::min(lo, fde->start_pc);
    hi = std::max(hi, fde->start_pc + fde->size);
  }
  ASSERT_LT(lo, hi) << "no functions, where every corpus golden lists FDEs";
  const std::uint64_t bias = 0x10000;
  std::array<Module, 1> storage;
  ModuleMap map(storage);
  auto ix = FdeIndex::build(*s);
  ASSERT_TRUE(map.add({{lo + bias, hi + bias}, bias, *s, ix ? &*ix : nullptr}));

  std::mt19937_64 rng(std::hash<std::string>()(c.name()));
  constexpr std::uint64_t kBase = 0x7ffc00000000;
  StackImage stack(kBase, 0x4000, order);
  StaticRuleCache<64> cache;
  const std::array<AddressRange, 1> tramps{{{lo + bias + 16, lo + bias + 32}}};
  for (int round = 0; round < 200; ++round) {
    // Words that look like stack addresses or PCs, or are anything at all.
    const auto plausible = [&]() -> std::uint64_t {
      switch (rng() % 4) {
        case 0: return kBase + (rng() % 0x4000);
        case 1: return lo + bias + rng() % (hi - lo + 1);
        case 2: return rng() % 64;
        default: return rng();
      }
    };
    for (std::uint64_t a = kBase; a < kBase + 0x4000; a += 8) stack.put(a, plausible());
    Regs regs;
    regs.arch = arch;
    regs.pc = rng() % 8 ? lo + bias + rng() % (hi - lo) : plausible();
    for (unsigned r = 0; r < Regs::kNumDwarf; ++r)
      if (rng() % 4) regs.set(r, plausible());
    regs.set(arch_regs(arch).sp, kBase + (rng() % 0x4000));
    UnwindOptions o;
    o.fp_fallback = rng() % 2;
    o.detect_sigreturn_code = rng() % 2;
    o.pauth_tbi = rng() % 2;
    o.pauth_va_bits = static_cast<std::uint8_t>(rng() % 70);
    if (rng() % 4 == 0) o.signal_trampolines = tramps;
    std::array<Frame, 48> out;
    const UnwindResult r = unwind(map, stack.memory(), regs, std::span<Frame>(out), o, rng() % 2 ? &cache : nullptr);
    ASSERT_GE(r.count, 1u);
    ASSERT_LE(r.count, out.size());
    if (r.reason == StopReason::kDepthLimit) {
      EXPECT_EQ(r.count, out.size());
    }
    // The walk only moves up the stack, except right after a signal frame.
    for (std::size_t i = 1; i + 1 < r.count; ++i) {
      if (out[i - 1].flags & kFrameSignal || out[i].flags & kFrameSignal) continue;
      EXPECT_GT(out[i].cfa, out[i - 1].cfa) << "frame " << i;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& p) {
  std::string n = p.param.name();
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, UnwindGarbage, ::testing::ValuesIn(golden_cases()), case_name);

}  // namespace
