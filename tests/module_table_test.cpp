// SPDX-License-Identifier: MIT
// sframe::ModuleTable, the one mechanism that turns modules' unwind
// information into the unwinder's primary and extra maps, against libdw:
// every FDE generated on demand answers, through the map the placement rule
// names, libdw's row at the first and last byte of each of its rows; its
// range is libdw's function cut to the placement's range.
#include <gtest/gtest.h>

#include <elf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/process/process.hpp"

namespace {

using namespace sframe;

// An arbitrary load bias (runtime = link-time + bias), page-aligned.
constexpr std::uint64_t kBias = 0x5500'0000'0000;

// The row the unwinder would read for runtime `pc` in `m`, by whichever
// accelerator it has (RowIndex, else FdeIndex, else binary search).
std::optional<FrameRow> row_at(const Module& m, std::uint64_t pc) {
  const std::uint64_t l = pc - m.bias;
  if (m.rows) {
    Expected<RowMatch> r = m.rows->find(l);
    return r ? std::optional<FrameRow>(r->row) : std::nullopt;
  }
  Expected<Match> x = m.index ? m.index->find(l) : find(m.section, l);
  return x ? std::optional<FrameRow>(x->row) : std::nullopt;
}

// The runtime range of the first executable PT_LOAD of `f` at kBias.
AddressRange exec_range(const elf::ElfFile& f) {
  for (const elf::ProgramHeader& ph : f.program_headers())
    if (ph.type == PT_LOAD && (ph.flags & PF_X)) return {ph.vaddr + kBias, ph.vaddr + ph.memsz + kBias};
  return {};
}

// libdw's functions of `f` whose every row SFrame can hold.
std::vector<cfi::Function> libdw_truth(const elf::ElfFile& f) {
  std::vector<cfi::Function> out;
  auto ok = cfi::libdw_functions(f, [&](const cfi::Function& fn) {
    if (fn.rows.empty()) return;
    for (const cfi::Row& r : fn.rows)
      if (r.reason != cfi::Reason::kNone) return;
    out.push_back(fn);
  });
  EXPECT_TRUE(ok);
  return out;
}

// A module with its own SFrame section that lacks functions (crt1's _start,
// gas's realigning functions), built as `sframe stack` builds it
// (LoadedModules: default options), its lacking functions generated one
// FDE at a time. Placement rule: they join the extra map, the own section
// stays the primary map's entry. Regression: such an FDE's section has a
// RowIndex and no FdeIndex (an own section is beside it, so generation
// builds the rows and leaves the FdeIndex out), which the map entry of
// LoadedModules took the address of without a check.
TEST(ModuleTable, OnDemandBesideOwnSectionGoesToExtraAndAnswersAsLibdw) {
  for (const char* name : {"x86_64-v3-linked/cxx", "x86_64-v3-linked/realign"}) {
    const std::string file = std::string(SFRAMEPP_SHARED_DIR) + "/corpus/" + name;
    auto f = elf::ElfFile::open(file);
    ASSERT_TRUE(f) << file;
    const auto own = f->sframe_section();
    ASSERT_TRUE(own) << file;
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(process::module_image(*f, own));
    ASSERT_EQ(u.source(), ModuleSource::kNative) << file << ": " << u.reason();
    ASSERT_TRUE(cfi::enable_on_demand(u, *f)) << file;
    const AddressRange range = exec_range(*f);
    ASSERT_LT(range.begin, range.end) << file;

    ModuleTable table;
    ModuleTable::Entries e;
    e.add(u, range, kBias);
    table.assign(e);
    ASSERT_EQ(table.primary().modules().size(), 1u) << file;
    EXPECT_EQ(table.extra().modules().size(), 0u) << file;

    std::size_t generated = 0, checked = 0, bad = 0;
    std::string first;
    for (const cfi::Function& fn : libdw_truth(*f)) {
      const std::uint64_t pc = fn.start + kBias;
      if (!range.contains(pc)) continue;
      if (u.primary().covers(fn.start)) {
        // The own section's: nothing generated for it.
        EXPECT_EQ(table.generate_for_pc(u, range, kBias, pc), ModuleTable::Generated::kNothing) << file;
        continue;
      }
      ASSERT_EQ(table.generate_for_pc(u, range, kBias, pc), ModuleTable::Generated::kAdded)
          << file << " 0x" << std::hex << fn.start;
      // Asked again: in the map already.
      EXPECT_EQ(table.generate_for_pc(u, range, kBias, pc), ModuleTable::Generated::kNothing) << file;
      ++generated;
      const Module* m = table.extra().find(pc);
      ASSERT_NE(m, nullptr) << file;
      EXPECT_EQ(m->range, (AddressRange{fn.start + kBias, fn.end + kBias})) << file;
      EXPECT_EQ(m->index, nullptr) << file << ": an FdeIndex pointer where the section has none";
      EXPECT_NE(m->rows, nullptr) << file;
      for (const cfi::Row& want : fn.rows)
        for (const std::uint64_t at : {want.start, want.end - 1}) {
          ++checked;
          const std::optional<FrameRow> got = row_at(*m, at + kBias);
          if ((!got || *got != want.row) && bad++ == 0) first = std::to_string(at);
        }
    }
    EXPECT_GE(generated, 1u) << file << ": no function the own section lacks";
    EXPECT_EQ(bad, 0u) << file << ": first at link-time " << first;

    // A table built afresh from the same unwind information holds the same
    // entries (Entries::add takes the generated FDEs too).
    ModuleTable::Entries again;
    again.add(u, range, kBias);
    EXPECT_EQ(again.primary.size(), 1u) << file;
    EXPECT_EQ(again.extra.size(), generated) << file;
    std::printf("%s: %zu FDEs generated on demand, %zu row ends as libdw's\n", name, generated, checked);
  }
}

// A module without an own section (ignored): its generated FDEs go to the
// primary map. Many more than the initial room of 64: the storage grows and
// every FDE stays found, with libdw's rows.
TEST(ModuleTable, OnDemandWithoutOwnSectionGoesToPrimaryAndGrows) {
  const char* lib = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  auto f = elf::ElfFile::open(lib);
  ASSERT_TRUE(f) << lib;
  const auto own = f->sframe_section();
  cfi::ModuleUnwindOptions opt;
  opt.ignore_own = true;
  cfi::ModuleUnwind u = cfi::ModuleUnwind::build(process::module_image(*f, own), opt);
  ASSERT_TRUE(cfi::enable_on_demand(u, *f)) << lib;
  const AddressRange range = exec_range(*f);
  ModuleTable table;
  table.assign({});
  ASSERT_EQ(table.primary().capacity(), 64u);
  const std::vector<cfi::Function> fns = libdw_truth(*f);
  std::vector<const cfi::Function*> added;
  for (const cfi::Function& fn : fns) {
    if (added.size() == 300) break;
    if (!range.contains(fn.start + kBias) || fn.end + kBias > range.end) continue;
    if (table.generate_for_pc(u, range, kBias, fn.start + kBias) == ModuleTable::Generated::kAdded)
      added.push_back(&fn);
  }
  ASSERT_EQ(added.size(), 300u);
  EXPECT_EQ(table.primary().modules().size(), 300u);
  EXPECT_EQ(table.extra().modules().size(), 0u);
  EXPECT_GE(table.primary().capacity(), 300u);
  std::size_t bad = 0;
  for (const cfi::Function* fn : added) {
    const Module* m = table.primary().find(fn->start + kBias);
    ASSERT_NE(m, nullptr) << std::hex << fn->start;
    EXPECT_EQ(m->range, (AddressRange{fn->start + kBias, fn->end + kBias}));
    for (const cfi::Row& want : fn->rows)
      for (const std::uint64_t at : {want.start, want.end - 1}) {
        const std::optional<FrameRow> got = row_at(*m, at + kBias);
        bad += !got || *got != want.row;
      }
  }
  EXPECT_EQ(bad, 0u);
}

// A placement that ends inside a function (a file mapped in part) cuts its
// generated FDE's entry there: the PCs past the mapping's end are not the
// module's; a PC outside the placement generates nothing.
TEST(ModuleTable, GeneratedFdeIsCutAtTheMappingEdge) {
  const std::string file = std::string(SFRAMEPP_SHARED_DIR) + "/corpus/x86_64-v3-linked/cxx";
  auto f = elf::ElfFile::open(file);
  ASSERT_TRUE(f) << file;
  const auto own = f->sframe_section();
  cfi::ModuleUnwindOptions opt;
  opt.ignore_own = true;
  cfi::ModuleUnwind u = cfi::ModuleUnwind::build(process::module_image(*f, own), opt);
  ASSERT_TRUE(cfi::enable_on_demand(u, *f)) << file;
  const AddressRange whole = exec_range(*f);
  std::optional<cfi::Function> fn;
  for (const cfi::Function& g : libdw_truth(*f))
    if (g.end - g.start >= 16 && whole.contains(g.start + kBias) && g.end + kBias <= whole.end) fn = g;
  ASSERT_TRUE(fn) << file;
  const std::uint64_t cut = fn->start + kBias + (fn->end - fn->start) / 2;
  const AddressRange part{whole.begin, cut};
  ModuleTable table;
  table.assign({});
  EXPECT_EQ(table.generate_for_pc(u, part, kBias, cut), ModuleTable::Generated::kNothing) << "outside the placement";
  ASSERT_EQ(table.generate_for_pc(u, part, kBias, fn->start + kBias), ModuleTable::Generated::kAdded);
  const Module* m = table.primary().find(fn->start + kBias);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->range, (AddressRange{fn->start + kBias, cut}));
  EXPECT_EQ(table.primary().find(cut), nullptr);
  EXPECT_NE(table.primary().find(cut - 1), nullptr);
  // The same through Entries::add: cut there too; a placement that holds
  // nothing of the function gets no entry for it.
  ModuleTable::Entries e;
  e.add(u, part, kBias);
  ASSERT_EQ(e.primary.size(), 1u);
  EXPECT_EQ(e.primary[0].range, m->range);
  ModuleTable::Entries none;
  none.add(u, {fn->end + kBias, fn->end + kBias + 1}, kBias);
  EXPECT_TRUE(none.empty());
  ModuleTable::Entries after;
  after.add(u, {cut, whole.end}, kBias);
  ASSERT_EQ(after.primary.size(), 1u);
  EXPECT_EQ(after.primary[0].range, (AddressRange{cut, fn->end + kBias}));
}

// An unusable section gives no entry; a usable one gives its accelerators
// as it has them (null where it has none), never the address of an empty
// optional.
TEST(ModuleTable, EntryTakesTheAcceleratorsThereAre) {
  cfi::UnwindSection none;
  EXPECT_FALSE(ModuleTable::entry(none, {0x1000, 0x2000}, 0));
  const std::string file = std::string(SFRAMEPP_SHARED_DIR) + "/corpus/x86_64-v3-linked/cxx";
  auto f = elf::ElfFile::open(file);
  ASSERT_TRUE(f) << file;
  const auto own = f->sframe_section();
  ASSERT_TRUE(own);
  const std::vector<std::byte> bytes(own->bytes.begin(), own->bytes.end());
  cfi::UnwindSection rows_only;
  ASSERT_TRUE(rows_only.assign(bytes, own->address, /*fde_index_with_rows=*/false));
  ASSERT_TRUE(rows_only.rows && !rows_only.index);
  auto a = ModuleTable::entry(rows_only, {0x1000, 0x2000}, 7);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->index, nullptr);
  EXPECT_EQ(a->rows, &*rows_only.rows);
  EXPECT_EQ(a->bias, 7u);
  cfi::UnwindSection index_only;
  ASSERT_TRUE(index_only.assign(bytes, own->address, true, /*row_index=*/false));
  ASSERT_TRUE(!index_only.rows && index_only.index);
  auto b = ModuleTable::entry(index_only, {0x1000, 0x2000}, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->index, &*index_only.index);
  EXPECT_EQ(b->rows, nullptr);
  EXPECT_EQ(b->compact_rows, nullptr);
}

// extend(): modules added to the built maps keep the rule cache in step
// (RuleCache::adopt: only the new range's rules go), as `sframe perf
// script` takes a process's newly mapped libraries; an entry that overlaps
// one present, or more than the room left, refuses (the caller assigns
// afresh). assign() leaves out an entry overlapping an earlier one.
TEST(ModuleTable, ExtendAdoptsIntoTheRuleCacheAndRefusesOverlaps) {
  const std::string file = std::string(SFRAMEPP_SHARED_DIR) + "/corpus/x86_64-v3-linked/cxx";
  auto f = elf::ElfFile::open(file);
  ASSERT_TRUE(f) << file;
  const auto own = f->sframe_section();
  ASSERT_TRUE(own);
  cfi::UnwindSection sec;
  ASSERT_TRUE(sec.assign(std::vector<std::byte>(own->bytes.begin(), own->bytes.end()), own->address));
  const auto at = [&](std::uint64_t lo, std::uint64_t hi) { return *ModuleTable::entry(sec, {lo, hi}, lo); };

  ModuleTable table;
  ModuleTable::Entries e;
  e.primary = {at(0x3000, 0x4000), at(0x1000, 0x2000), at(0x1800, 0x2800)};  // the last overlaps
  e.extra = {at(0x9000, 0xa000)};
  table.assign(e);
  ASSERT_EQ(table.primary().modules().size(), 2u);
  EXPECT_EQ(table.primary().modules()[0].range, (AddressRange{0x1000, 0x2000}));
  EXPECT_EQ(table.primary().modules()[1].range, (AddressRange{0x3000, 0x4000}));
  EXPECT_EQ(table.extra().modules().size(), 1u);

  StaticRuleCache<64> cache;
  cache.sync(table.primary().generation());
  const CompactRule rule{16, 0, 0, CompactRule::kValid};
  cache.insert(0x1010, rule);
  cache.insert(0x5010, rule);  // a PC the next module will cover: its rule must go
  ModuleTable::Entries more;
  more.primary = {at(0x5000, 0x6000)};
  more.extra = {at(0xb000, 0xc000)};
  ASSERT_TRUE(table.extend(more, &cache));
  EXPECT_EQ(cache.generation(), table.primary().generation());
  EXPECT_NE(cache.lookup(0x1010), nullptr);
  EXPECT_EQ(cache.lookup(0x5010), nullptr);
  EXPECT_NE(table.primary().find(0x5800), nullptr);
  EXPECT_NE(table.extra().find(0xb800), nullptr);

  ModuleTable::Entries overlapping;
  overlapping.primary = {at(0x3800, 0x4800)};
  EXPECT_FALSE(table.extend(overlapping, &cache));
  ModuleTable::Entries too_many;
  for (std::uint64_t i = 0; i < table.primary().capacity(); ++i)
    too_many.primary.push_back(at(0x100000 + i * 0x1000, 0x100800 + i * 0x1000));
  EXPECT_FALSE(table.extend(too_many, &cache));
  EXPECT_EQ(table.primary().modules().size(), 3u) << "refused for want of room before any addition";
}

}  // namespace

namespace {

// x86-64 rt_sigreturn: mov $15,%rax; syscall (as glibc's __restore_rt).
constexpr unsigned char kSigreturnCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

void put_sigreturn(std::vector<std::byte>& code, std::size_t at) {
  for (std::size_t i = 0; i < sizeof kSigreturnCode; ++i) code[at + i] = std::byte{kSigreturnCode[i]};
}

}  // namespace

// The sequences are found wherever they lie in a segment (its first and
// last bytes included), never across segments or past a segment's end,
// among look-alikes (0xc7 opcodes, other syscall numbers), and at most
// `limit` of them.
TEST(ModuleUnwind, SigreturnCodeIsFoundWhereverItLies) {
  std::vector<std::byte> a(4096, std::byte{0x90});
  // Look-alikes: 0xc7 bytes everywhere, a `mov $60,%rax; syscall` (exit).
  for (std::size_t i = 3; i < a.size(); i += 37) a[i] = std::byte{0xc7};
  const unsigned char exit_call[] = {0x48, 0xc7, 0xc0, 0x3c, 0x00, 0x00, 0x00, 0x0f, 0x05};
  for (std::size_t i = 0; i < sizeof exit_call; ++i) a[1000 + i] = std::byte{exit_call[i]};
  put_sigreturn(a, 0);
  put_sigreturn(a, 2047);
  put_sigreturn(a, a.size() - sizeof kSigreturnCode);
  // The second segment ends one byte short of a whole sequence.
  std::vector<std::byte> b(64, std::byte{0x90});
  put_sigreturn(b, 10);
  b.resize(b.size() + 8);
  for (std::size_t i = 0; i < 8; ++i) b[b.size() - 8 + i] = std::byte{kSigreturnCode[i]};
  // A sequence split across the two segments' bytes is no sequence.
  std::vector<std::byte> c(std::begin(reinterpret_cast<const std::byte(&)[9]>(kSigreturnCode)),
                           std::begin(reinterpret_cast<const std::byte(&)[9]>(kSigreturnCode)) + 4);
  std::vector<std::byte> d(std::begin(reinterpret_cast<const std::byte(&)[9]>(kSigreturnCode)) + 4,
                           std::end(reinterpret_cast<const std::byte(&)[9]>(kSigreturnCode)));
  const std::vector<cfi::CodeBytes> code = {
      {0x10000, a}, {0x20000, b}, {0x30000, c}, {0x30004, d}, {0x40000, {}}};
  const std::vector<AddressRange> all = cfi::find_sigreturn_code(code);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].begin, 0x10000u);
  EXPECT_EQ(all[1].begin, 0x10000u + 2047);
  EXPECT_EQ(all[2].begin, 0x10000u + 4096 - 9);
  EXPECT_EQ(all[3].begin, 0x20000u + 10);
  for (const AddressRange& r : all) EXPECT_EQ(r.end, r.begin + 1);
  const std::vector<AddressRange> two = cfi::find_sigreturn_code(code, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].begin, 0x10000u + 2047);
}
