// SPDX-License-Identifier: MIT
// libFuzzer target: the unwinder (include/sframe/unwind/unwind.hpp) over a fuzzed
// SFrame section, register set and stack image.
//
// Input, front to back (little-endian integers; missing bytes read as 0):
//   u64 section link-time address, u64 load bias, u64 stack image base,
//   u8 options (bit 0 FP fallback, 1 sigreturn-code detection, 2 PAuth TBI,
//   3 module range from the input, 4 FdeIndex and RowIndex), u8 PAuth VA bits,
//   u16 section length L, L section bytes,
//   u8 PC/SP mode (bit 0: PC = start of FDE u16 + u16 offset, + bias, else
//   u64; bit 1: SP = stack base + u16, else u64), the PC and SP fields,
//   u64 FP, u32 mask of further DWARF registers set, one u64 per bit set,
//   [u64 module begin, u64 module length when options bit 3],
//   then the rest: the stack image.
// Checks: the walk ends with a defined reason, writes 1..N frames, frame 0 is
// the exact PC; kUnreadableMemory names an address the memory cannot read;
// kDepthLimit only with a full buffer; the result is the same with and
// without the FdeIndex accelerator (sections that pass kStrict, sorted) and
// the RowIndex (sections that pass kStrict, FDEs not overlapping), with
// a cold and a warm RuleCache, and through the type-erased Memory reader.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_check.hpp"
#include "reader.hpp"
#include "sframe/unwind/unwind.hpp"

#include "../src/unwind/module_hint.hpp"

namespace {

using namespace sframe;

bool same(const UnwindResult& a, std::span<const Frame> fa, const UnwindResult& b, std::span<const Frame> fb) {
  if (a.count != b.count || a.reason != b.reason || a.address != b.address || a.error != b.error) return false;
  for (std::size_t i = 0; i < a.count; ++i) {
    const Frame& x = fa[i];
    const Frame& y = fb[i];
    if (!(x.pc == y.pc) || x.sp != y.sp || x.fp != y.fp || x.cfa != y.cfa || x.flags != y.flags) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  const std::uint64_t section_address = in.u64();
  const std::uint64_t bias = in.u64();
  const std::uint64_t stack_base = in.u64();
  const std::uint8_t opts = in.u8();
  const std::uint8_t va_bits = in.u8();
  const std::size_t want_len = in.u16();
  const std::size_t header = 8 * 3 + 2 + 2;
  if (size < header) return 0;
  const std::size_t len = std::min(want_len, size - header);
  // The section in a heap block of exactly its size (ASan sees any overread).
  const auto sec_bytes = std::make_unique<std::byte[]>(len);
  if (len != 0) std::memcpy(sec_bytes.get(), data + header, len);
  for (std::size_t i = 0; i < len; ++i) in.u8();
  const Expected<Section> parsed = Section::parse(std::span<const std::byte>(sec_bytes.get(), len), section_address);
  if (!parsed) return 0;
  const Section& s = *parsed;

  const Arch arch = arch_of(s.abi());
  const ArchRegs ar = arch_regs(arch);
  const std::uint8_t mode = in.u8();
  std::uint64_t pc = 0;
  if (mode & 1) {
    const std::uint16_t fde = in.u16();
    const std::uint16_t off = in.u16();
    pc = (s.num_fdes() ? s.fde_start_pc(fde % s.num_fdes()) : 0) + off + bias;
  } else {
    pc = in.u64();
  }
  const std::uint64_t sp = (mode & 2) ? stack_base + in.u16() : in.u64();
  Regs regs = Regs::make(arch, pc, sp, in.u64());
  const std::uint32_t more = in.u32();
  for (unsigned r = 0; r < Regs::kNumDwarf; ++r)
    if ((more >> r) & 1u) regs.set(r, in.u64());
  fuzz::g_sink = ar.ra;

  Module m;
  m.bias = bias;
  m.section = s;
  if (opts & 8) {
    m.range.begin = in.u64();
    m.range.end = m.range.begin + in.u64();
  } else {
    m.range = {0, ~std::uint64_t{0}};
  }
  // find() and FdeIndex::find() agree on sections that pass kStrict with
  // sorted FDEs (check_section.hpp); elsewhere (overlapping FDEs) they may
  // pick different FDEs.
  std::optional<Expected<FdeIndex>> index;
  std::optional<Expected<RowIndex>> rows;  // RowIndex: kStrict, FDEs apart
  if ((opts & 16) && validate(s, Strictness::kStrict)) {
    if (s.header().flags & flags::kFdeSorted) {
      index.emplace(FdeIndex::build(s));
      if (!*index) index.reset();
    }
    rows.emplace(RowIndex::build(s));
    if (!*rows) rows.reset();
  }
  std::array<Module, 1> storage;
  ModuleMap modules(storage);
  if (!modules.add(m)) return 0;

  // The stack image: the rest of the input, in its own exact-size block.
  std::vector<std::uint8_t> rest;
  while (!in.empty()) rest.push_back(in.u8());
  const auto stack = std::make_unique<std::byte[]>(rest.size());
  if (!rest.empty()) std::memcpy(stack.get(), rest.data(), rest.size());
  const ByteOrder order = s.big_endian() ? ByteOrder::kBig : ByteOrder::kLittle;
  const BufferMemory memory(std::span<const std::byte>(stack.get(), rest.size()), stack_base, order);

  UnwindOptions o;
  o.fp_fallback = opts & 1;
  o.detect_sigreturn_code = opts & 2;
  o.pauth_tbi = opts & 4;
  o.pauth_va_bits = static_cast<std::uint8_t>(32 + va_bits % 25);

  constexpr std::size_t kDepth = 48;
  std::array<Frame, kDepth> a{}, b{};
  const UnwindResult r = unwind(modules, memory, regs, std::span<Frame>(a), o);
  SFRAME_FUZZ_CHECK(r.count >= 1 && r.count <= kDepth);
  SFRAME_FUZZ_CHECK(stop_reason_name(r.reason) != "unknown");
  SFRAME_FUZZ_CHECK(a[0].pc == CodeAddress::exact(pc));
  if (r.reason == StopReason::kDepthLimit) SFRAME_FUZZ_CHECK(r.count == kDepth);
  if (r.reason == StopReason::kUnreadableMemory) SFRAME_FUZZ_CHECK(!memory.read_word(r.address).has_value());

  // The accelerators and the cache change nothing but speed.
  const auto same_through = [&](const Module& with) {
    std::array<Module, 1> storage2;
    ModuleMap map2(storage2);
    SFRAME_FUZZ_CHECK(map2.add(with).has_value());
    b = {};
    const UnwindResult r2 = unwind(map2, memory, regs, std::span<Frame>(b), o);
    SFRAME_FUZZ_CHECK(same(r, a, r2, b));
  };
  if (index) {
    Module mi = m;
    mi.index = &**index;
    same_through(mi);
  }
  if (rows) {
    Module mr = m;
    mr.rows = &**rows;
    same_through(mr);
    // And through the rows compiled to cacheable rules (the in-process
    // backtrace's and sframe stack's lookups).
    const std::vector<CompactRule> compiled = detail::compile_rows(**rows, s, arch_of(s.abi()));
    mr.compact_rows = compiled.data();
    same_through(mr);
    // The cold step's lean lookup (the in-process walk's) gives the full
    // lookup's cacheable rule, or hands the PC back to it, at every PC the
    // walk met; the module hint carried from PC to PC as a walk does.
    std::array<Module, 1> lean_storage;
    ModuleMap lean_map(lean_storage);
    SFRAME_FUZZ_CHECK(lean_map.add(mr).has_value());
    detail::ModuleHint hint;
    for (std::size_t i = 0; i < r.count; ++i) {
      const std::uint64_t lpc = a[i].pc.lookup_pc();
      const detail::LookedUpRules full = detail::lookup_rules(lean_map, arch, lpc);
      CompactRule lean;
      switch (detail::lookup_compact(lean_map, nullptr, arch, lpc, hint, lean)) {
        case detail::CompactLookup::kRule:
          SFRAME_FUZZ_CHECK(full.status == detail::LookupStatus::kFound && full.compactable);
          SFRAME_FUZZ_CHECK(lean == full.compact.with_valid());
          SFRAME_FUZZ_CHECK(((lean.flags & CompactRule::kSignal) != 0) == full.signal);
          break;
        case detail::CompactLookup::kNoSFrame:
          SFRAME_FUZZ_CHECK(full.status == detail::LookupStatus::kNoSFrame);
          break;
        case detail::CompactLookup::kFull: break;
      }
    }
  }
  StaticRuleCache<64> cache;
  for (int pass = 0; pass < 2; ++pass) {
    b = {};
    const UnwindResult rc = unwind(modules, memory, regs, std::span<Frame>(b), o, &cache);
    SFRAME_FUZZ_CHECK(same(r, a, rc, b));
  }
  const MemoryAdapter<BufferMemory> erased(memory);
  b = {};
  const UnwindResult re = unwind(modules, static_cast<const Memory&>(erased), regs, std::span<Frame>(b), o);
  SFRAME_FUZZ_CHECK(same(r, a, re, b));
  return 0;
}
