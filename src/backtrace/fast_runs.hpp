// SPDX-License-Identifier: MIT
// sframepp (private): the in-process walk's two fast loops, for
// backtrace.cpp alone: memo_run() (warm: the frames the thread's memo of its
// last walk holds) and cold_run() with its cold_lookup() (after a flush: each
// rule from the modules' prebuilt lookup slots), with what they carry from
// frame to frame (WalkState) and how they read the stack (RangeReader).
// Both step rules through the one executor, detail::apply_rule(), and leave
// every frame they do not take, and every stop but the outermost frame, to
// the general loop (walk_general() in backtrace.cpp). Async-signal-safe.
// Internal linkage on purpose (one includer): GCC then specialises their
// calls (IPA-SRA), as it did when they were in backtrace.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "backtrace_internal.hpp"
#include "sframe/unwind/detail/unwind_step.hpp"

namespace sframe::bt {
namespace {

/// Reads words inside [lo, lo + span + 8) only: the memo's run, which
/// leaves anything else to the general loop.
struct RangeReader {
  std::uint64_t lo;
  std::uint64_t span;  // a word at a is inside iff a - lo <= span
  [[gnu::no_sanitize_address]] bool try_read_word(std::uint64_t a, std::uint64_t& v) const noexcept {
    if (a - lo > span) return false;
    std::memcpy(&v, reinterpret_cast<const void*>(a), sizeof v);
    return true;
  }
  std::optional<std::uint64_t> read_word(std::uint64_t a) const noexcept {
    std::uint64_t v;
    if (!try_read_word(a, v)) return std::nullopt;
    return v;
  }
};

/// The registers a walk carries from frame to frame on its fast paths.
struct WalkState {
  CodeAddress pc;
  std::uint64_t sp = 0;
  std::uint64_t fp = 0;
  bool fp_ok = true;
  bool have_prev = false;
  bool unchecked = false;
  std::uint64_t prev_cfa = 0;

  /// Where a run of frames that each passed the CFA check (memo_run(),
  /// cold_run()) left the walk: at PC `at` with stack pointer `sp_at` and
  /// frame pointer `frame` (known when `frame_ok`), the last frame's CFA
  /// `last_cfa` the next one must lie above.
  void resume_after_run(CodeAddress at, std::uint64_t sp_at, std::uint64_t frame, bool frame_ok,
                        std::uint64_t last_cfa) noexcept {
    pc = at;
    sp = sp_at;
    fp = frame;
    fp_ok = frame_ok;
    prev_cfa = last_cfa;
    have_prev = true;
    unchecked = false;
  }
};

/// Takes frames `n`, `n + 1`, ... while each has the PC the memo holds for
/// its depth, writing their PCs to out[n...] (up to `cap`); returns the new
/// count. Stops short, changing nothing for that frame, at anything the
/// general loop must see (an outermost or FP-based rule without a known FP,
/// a slot outside [lo, hi), a CFA not above the last, a zero RA): that
/// frame is then taken again by the general loop, which also reports stops.
/// A separate function so that its few live values stay in registers; the
/// frame-to-frame chain is CFA = SP + offset, the offset being read from
/// the memo at an address that depends only on the depth.
/// Instrumented under ASan on purpose: its stack reads go through
/// RangeReader::try_read_word, which is not. GCC 12 keeps the scope
/// poisoning (ASAN_MARK) of apply_rule's locals when it inlines them into a
/// no_sanitize_address function, but no epilogue clears it: each run left
/// one poisoned granule below the walk, reported later as
/// stack-use-after-scope in whatever frame was placed there.
[[gnu::noinline]] std::size_t memo_run(const Memo& memo, void** out, std::size_t n, std::size_t cap,
                                                 WalkState& ws, std::uint64_t lo, std::uint64_t hi) noexcept {
  if (hi - lo < 8) return n;
  const std::uint64_t span = hi - lo - 8;  // a word at a is readable iff a - lo <= span
  std::uint64_t pcv = ws.pc.value();
  // The memo's key for the frame: its lookup PC + 1 (then the RA itself).
  std::uint64_t key = Memo::key_of(ws.pc.lookup_pc());
  std::uint64_t sp = ws.sp, fp = ws.fp;
  // No CFA below the first frame's to check against: 0, which no CFA the
  // range check lets through is at or below.
  std::uint64_t prev_cfa = ws.have_prev && !ws.unchecked ? ws.prev_cfa : 0;
  bool fp_ok = ws.fp_ok;
  const std::size_t start = n;
  // The memo's run reads only [lo, hi): anything else (and any stop) is
  // the general loop's to take again and report.
  const RangeReader stack{lo, span};
  while (n < cap) {
    const CompactRule& rule = memo.rule[n];
    if (memo.key[n] != key || !(rule.flags & CompactRule::kValid) || (rule.flags & CompactRule::kNoSFrame)) break;
    const detail::CompactFrame f = detail::CompactFrame::of(sp, fp, fp_ok, true, prev_cfa);
    detail::CompactStep st;
    if (detail::apply_rule(rule, f, stack, Arch::kAmd64, nullptr, st) != detail::CompactStatus::kStepped || st.ra == 0)
      break;
    out[n++] = reinterpret_cast<void*>(pcv);
    fp_ok = st.fp_known;
    fp = st.fp;
    sp = st.cfa;
    prev_cfa = st.cfa;
    pcv = st.ra;
    key = st.ra;
  }
  if (n != start) {
    ws.resume_after_run(CodeAddress::return_address(pcv), sp, fp, fp_ok, prev_cfa);
  }
  return n;
}

/// Rules the fast paths leave to the Stepper (signal frames, an RA in a
/// register or mangled, no SFrame: the fallbacks).
constexpr std::uint16_t kSlowRule =
    CompactRule::kSignal | CompactRule::kRaInRegister | CompactRule::kRaMangled | CompactRule::kNoSFrame;

/// The flags of the commonest rule of compiled code without a frame
/// pointer: CFA = SP + offset, the RA on the stack, the FP unchanged.
constexpr std::uint16_t kSpRaRule = CompactRule::kValid | CompactRule::kRaOnStack;
/// ... and of code with one: CFA = FP + offset, the RA and the caller's FP
/// on the stack.
constexpr std::uint16_t kFpRaRule =
    CompactRule::kValid | CompactRule::kCfaBaseFp | CompactRule::kRaOnStack | CompactRule::kFpOnStack;

/// cold_run()'s lookup where the PC is not in the hint's current module's
/// rows: lookup_compact()'s order (the native map's module, else the
/// generated map's), through the prebuilt slots, with the two last native
/// modules remembered. Returns the slot whose compiled row `id` (set)
/// covers the PC, or null where lookup_compact() would not answer kRule
/// with a row of that slot (no module, no FDE, kFull), and for a PC
/// `pcv` in a signal trampoline: the caller's walk then leaves the frame
/// to the general loop. Taken on a module switch, a PC in the generated
/// map, or a PC within the trampolines' hull in a module with a trampoline
/// only. Inline, not out of line: a call in cold_run()'s loop made GCC keep
/// the values live across it (the SP, the CFA, the RA) in memory for every
/// frame, on top of the call itself on every module switch.
/// For a PC in hint.cur's range, `id` holds that slot's
/// RowIndex::View::row_id() of it, which the caller looked up already (a
/// PC in the generated map of a module with its own SFrame then costs one
/// lookup in each map, not two in the native one). The range is tested
/// again here rather than passed: a flag live through the caller's frame
/// loop cost its frames more than the test costs here. Where the returned
/// slot's bucket rule answers (bucket_rule_at()), `bits` is set to it and
/// `id` to its row: the caller steps the rule from the bits.
[[gnu::always_inline]] inline const detail::ModuleHint::Slot* cold_lookup(const Table& table, ColdHint& hint,
                                                                          std::uint64_t pcv, std::uint64_t lpc,
                                                                          std::uint32_t& id,
                                                                          detail::BucketRule& bits) noexcept {
  const detail::ModuleHint::Slot* s = hint.cur;
  const bool in_cur = lpc - s->begin < s->size;
  if (!in_cur) {
    s = lpc - hint.prev->begin < hint.prev->size ? hint.prev : detail::find_slot(table.map_slots.view, lpc);
    // The hint's current module is one whose rows lie inside its range
    // (cold_run() asks its rows without testing the range): a module
    // without that (an FDE past its range) is the general loop's.
    if (s && !s->rows_inside) [[unlikely]]
      return nullptr;
    if (s) {
      hint.prev = hint.cur;
      hint.cur = s;
    }
  }
  // A PC in a trampoline is the general loop's (the same test as its).
  if (pcv - table.tramp_lo < table.tramp_span && detail::in_ranges(table.trampolines, pcv)) return nullptr;
  if (!in_cur && s) {
    // The new slot's bucket rule, as in cold_run().
    if (const detail::BucketHit h = detail::bucket_rule_at(*s, lpc - s->rows.base()); h.rule != 0) {
      id = h.row;
      bits = h.rule;
      return s;
    }
  }
  if (!in_cur)
    id = s ? detail::compact_row(*s, lpc) : RowIndex::kNotCovered;
  else if (!s->compact)
    id = RowIndex::kUseFind;  // compact_row()'s answer for a slot without compiled rows
  if (id != RowIndex::kNotCovered) return id == RowIndex::kUseFind ? nullptr : s;
  // No FDE in the native map: the generated one (lookup_compact's fallback).
  s = hint.fallback;
  if (lpc - s->begin >= s->size) {
    s = detail::find_slot(table.extra_slots.view, lpc);
    if (!s) return nullptr;
    hint.fallback = s;
  }
  if (const detail::BucketHit h = detail::bucket_rule_at(*s, lpc - s->rows.base()); h.rule != 0) {
    id = h.row;
    bits = h.rule;
    return s;
  }
  id = detail::compact_row(*s, lpc);
  return id < RowIndex::kNotCovered ? s : nullptr;
}

/// The cold counterpart of memo_run(): takes frames `n`, `n + 1`, ... whose
/// PCs the memo does not hold, looking each rule up in the table's prebuilt
/// slots (lookup_compact()'s answer where it is kRule: the bucket rule or
/// compact_row() in the hint's module, else cold_lookup()) and stepping it
/// through the one rule executor, apply_rule(), over the thread's stack
/// [lo, hi) only; each frame's PC goes to out[n...] (up to `cap`) and its
/// rule and step code to the memo, so that the same stack is warm next time. Returns the new
/// count. Stops short, changing nothing for that frame, at anything else:
/// a PC the memo holds (memo_run()'s), a PC in a signal trampoline, a
/// lookup that is not kRule, a rule of kSlowRule, an FP-based rule without
/// a known FP, a read outside [lo, hi), a CFA not above the SP (which is
/// the last CFA: `ws` must have no other previous CFA), a zero RA. The
/// general loop takes that frame again and reports any stop. The one stop
/// taken here is the outermost frame (`outermost` set, its PC written):
/// the general loop would end there with no other effect.
/// For a walk whose cache is empty (after a flush): it neither probes nor
/// fills the cache, as the general loop does not at depths the memo
/// covers. Instrumented under ASan, as memo_run() (see there).
/// Inline in walk(), unlike memo_run(): a cold walk's first frame waited
/// for the call (ten arguments, four on the stack, `ws` through memory),
/// a cost a short walk feels; the frame loop kept its registers.
[[gnu::always_inline]] inline std::size_t cold_run(Memo& memo, void** out, std::size_t n, std::size_t cap,
                                                   WalkState& ws, std::uint64_t lo, std::uint64_t hi,
                                                   const Table& table, ColdHint& hint, bool& outermost) noexcept {
  // The CFA check below compares with the SP, the last CFA of every frame
  // this run takes; a state with another previous CFA is not this run's.
  if (hi - lo < 8 || (ws.have_prev && !ws.unchecked && ws.prev_cfa != ws.sp)) return n;
  const RangeReader stack{lo, hi - lo - 8};
  // One value carried from frame to frame, the frame's memo key (its
  // lookup PC + 1, which is the return address itself), rather than the PC
  // and the lookup PC: a register fewer in the loop, and the lookup takes
  // the 1 off the view's base rather than off the key. `exact` is 1 while
  // the frame is an exact first PC (whose value is then key - 1), else 0.
  std::uint64_t key = Memo::key_of(ws.pc.lookup_pc());
  std::uint64_t exact = key - ws.pc.value();
  std::uint64_t sp = ws.sp, fp = ws.fp;
  bool fp_ok = ws.fp_ok;
  const detail::ModuleHint::Slot* cur = hint.cur;
  const std::size_t start = n;
  while (n < cap) {
    if (memo.key[n] == key) break;
    const detail::ModuleHint::Slot* s = cur;
    // compact_row() without its test for a slot without compiled rows:
    // such a slot's view is empty (slot_of()), so its kNotCovered takes
    // this PC to cold_lookup(), which tells kUseFind. Nor a test of the
    // slot's range: its rows lie inside it (cold_lookup() makes no other
    // slot the current one, and kNoSlot's view is empty), so a PC outside
    // it is outside them too.
    // The offset into the view as key - (base + 1): one step from the RA on
    // the chain of dependent steps from one frame's RA to the next. The asm
    // keeps base + 1 one value, which GCC otherwise turns back into
    // (key - 1) - base.
    std::uint64_t base1 = s->rows.base() + 1;
    asm("" : "+r"(base1));
    const std::uint64_t off = key - base1;
    // The bucket's own rule where it has one of the commonest shapes
    // (build_slots()): read beside the bucket word rather than through the
    // row id the word holds, which took a load (the rule table's) onto the
    // chain (figures: docs/benchmarks.md, "The cold walk"). A PC in the
    // trampolines' hull takes the rows.
    std::uint32_t id;
    CompactRule rule;
    const detail::BucketHit hit = detail::bucket_rule_at(*s, off);
    if (hit.rule != 0 && !(s->tramps && key - exact - table.tramp_lo < table.tramp_span)) {
      id = hit.row;
      rule = detail::rule_of_bucket(hit.rule);
    } else {
      id = s->rows.row_id_at(off);
      // The slot's own trampoline flag (build_slots()): read where needed
      // rather than held in a register through the loop.
      if (id >= RowIndex::kNotCovered || (s->tramps && key - exact - table.tramp_lo < table.tramp_span)) [[unlikely]] {
        // A module switch, the generated map, or a PC in the trampolines'
        // hull (checked only in a module the hull meets): cold_lookup().
        detail::BucketRule bits = 0;
        s = cold_lookup(table, hint, key - exact, key - 1, id, bits);
        cur = hint.cur;
        if (!s) break;
        rule = bits != 0 ? detail::rule_of_bucket(bits) : s->compact[id];
      } else {
        rule = s->compact[id];
      }
    }
    const std::uint16_t flags = rule.flags;
    const detail::CompactFrame f = detail::CompactFrame::of(sp, fp, fp_ok, true, sp);
    detail::CompactStep st;
    detail::CompactStatus status;
    if (flags == kSpRaRule) [[likely]] {
      // The commonest rule (CFA = SP + offset, the RA on the stack, the FP
      // unchanged) with its flags known here: the executor's tests of them
      // fold away.
      status = detail::apply_rule(rule, f, stack, Arch::kAmd64, nullptr, st);
    } else if (flags == kFpRaRule) {
      // The commonest with a frame pointer (CFA = FP + offset, the RA and
      // the caller's FP on the stack): the same, with the test of the FP.
      status = detail::apply_rule(rule, f, stack, Arch::kAmd64, nullptr, st);
    } else {
      if ((flags & (CompactRule::kValid | kSlowRule)) != CompactRule::kValid) break;
      // An FP-based rule without a known FP: the executor's kBadRule, which
      // leaves the frame to the general loop below.
      status = detail::apply_rule(rule, f, stack, Arch::kAmd64, nullptr, st);
    }
    if (status != detail::CompactStatus::kStepped) [[unlikely]] {
      if (status != detail::CompactStatus::kOutermost) break;
      out[n] = reinterpret_cast<void*>(key - exact);
      memo.put(n, key - 1, s->compact[id], s->codes[id]);
      ++n;
      outermost = true;
      break;
    }
    if (st.ra == 0) break;
    out[n] = reinterpret_cast<void*>(key - exact);
    memo.put(n, key - 1, s->compact[id], s->codes[id]);
    ++n;
    fp_ok = st.fp_known;
    fp = st.fp;
    sp = st.cfa;
    key = st.ra;  // the caller's lookup PC is its RA - 1
    exact = 0;
  }
  hint.cur = cur;
  if (n != start) {
    memo.cover(n);
    if (!outermost) {
      ws.resume_after_run(CodeAddress::return_address(key), sp, fp, fp_ok, sp);
    }
  }
  return n;
}

}  // namespace
}  // namespace sframe::bt
