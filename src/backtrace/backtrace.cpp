// SPDX-License-Identifier: MIT
// sframepp: the in-process walk behind sframe::backtrace(). Async-signal-safe:
// no allocation, no locks, no exceptions; reads only the thread's stack and
// its alternate signal stack.
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

#include "backtrace_internal.hpp"
#include "fast_runs.hpp"
#include "stack_reader.hpp"

#if defined(__x86_64__) && defined(__linux__)

namespace sframe::bt {
namespace {

// Announces a walk while a table is in use (see rebuild()): in the
// thread's own counter when rebuild() uses membarrier(), else in the shared
// one.
class TableGuard {
 public:
  explicit TableGuard(ThreadState* st) noexcept {
    if (st && g_asymmetric.load(std::memory_order_relaxed)) {
      st_ = st;
      st->walking.store(st->walking.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      table_ = g_table.load(std::memory_order_acquire);
    } else {
      g_walkers.fetch_add(1);
      table_ = g_table.load();
    }
  }
  ~TableGuard() {
    if (st_)
      st_->walking.store(st_->walking.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    else
      g_walkers.fetch_sub(1);
  }
  TableGuard(const TableGuard&) = delete;
  TableGuard& operator=(const TableGuard&) = delete;
  const Table* get() const noexcept { return table_; }

 private:
  ThreadState* st_ = nullptr;
  const Table* table_;
};

/// The general walk: continues from frame `res.size` in state `from` (frame
/// 0: `res.size` 0, no previous CFA), writing every frame's address from
/// there on. `here` is an address in the current frame: the stack from it
/// up is mapped. `cache` and `memo` are the thread's (null when this walk
/// interrupted another on the thread); the caller holds `table` and the
/// thread's busy flag. `from` by reference: read field by field (a copy by
/// value loads it 16 bytes at a time, stalling on the caller's narrower
/// stores).
[[gnu::noinline]] BacktraceResult walk_general(std::span<void*> out, BacktraceResult res, const WalkState& from,
                                               std::uint64_t here, ThreadState* st, const Table* table,
                                               RuleCache* cache, Memo* memo) noexcept {
  CodeAddress pc = from.pc;
  // Whether the cache may hold anything: a walk after a flush (or a map
  // change, which empties it) skips every probe, which could only miss. A
  // PC met twice in such a walk is looked up twice, with the same answer.
  bool probe = false;
  if (cache) {
    if (cache->generation() != table->map.generation()) st->cache_empty = true;
    cache->sync(table->map.generation());
    probe = !st->cache_empty;
  }
  StackReader mem;
  // An unregistered thread (st null) knows no range: every page it reads is
  // checked by the kernel first (StackReader::checked).
  AddressRange thread = st ? AddressRange{st->lo, st->hi} : AddressRange{};
  if (!thread.contains(here)) {
    // Either a handler running on the alternate signal stack (the one case
    // that pays for a system call), or the main thread's stack grew below
    // its registered bottom (everything above the current frame is mapped).
    stack_t ss;
    if (sigaltstack(nullptr, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) &&
        here - reinterpret_cast<std::uint64_t>(ss.ss_sp) < ss.ss_size) {
      mem.add({here, reinterpret_cast<std::uint64_t>(ss.ss_sp) + ss.ss_size});
    } else if (st && st->grows && here < thread.begin && here >= st->limit) {
      // Stack mappings never shrink: later walks (from the alternate
      // stack, say) may read this deep too.
      thread.begin = here;
      st->lo = here;
    }
  }
  if (thread.begin != thread.end) mem.add(thread);
  mem.checked = thread;
  if (!st) mem.window = {0, ~std::uint64_t{0}};
  else if (st->grows) mem.window = {st->limit, st->hi};

  // The native sections first; where they have no FDE, the sections
  // generated for the same modules, then the frame-pointer convention.
  UnwindOptions opt;
  opt.fp_fallback = true;
  opt.detect_sigreturn_code = false;
  opt.signal_trampolines = table->trampolines;
  opt.code_ranges = table->code;

  constexpr unsigned kSp = 7, kFp = 6;  // DWARF RSP, RBP
  constexpr std::uint16_t kSlow = kSlowRule;
  // SP/FP live in locals on the fast path (no store-to-load forwarding on
  // the per-frame dependency chain); `regs` is refreshed from them only
  // when the core's Stepper takes a frame.
  std::uint64_t cur_sp = from.sp, cur_fp = from.fp;
  bool fp_ok = from.fp_ok, regs_stale = res.size != 0;
  // Built when the Stepper first takes a frame: zeroing its registers is
  // a large part of a short walk that the fast path takes whole.
  const std::uint64_t pc0 = pc.value(), sp0 = from.sp, fp0 = from.fp;
  // Raw storage, not std::optional: GCC 12 zeroes an empty optional's
  // payload (a rep stos of its 280 bytes, a third of a short full walk).
  static_assert(std::is_trivially_destructible_v<Regs>);
  alignas(Regs) unsigned char regs_bytes[sizeof(Regs)];
  Regs* regs_storage = nullptr;
  detail::Stepper<StackReader> stepper(table->map, mem, opt, cache, &table->extra_map);
  const std::span<const AddressRange> tramps = table->trampolines;
  std::uint64_t prev_cfa = from.prev_cfa;
  bool have_prev = from.have_prev;
  bool unchecked = from.unchecked;
  // Counted here, added to the cache's counter once: a memory counter
  // bumped every frame would chain the frames through store forwarding.
  std::uint64_t hits = 0;
  const AddressRange own = thread;  // the memo's run reads only the thread's stack
  const std::size_t memo_cap = std::min(out.size(), kMemoDepth);
  // The modules of the last cache miss: the next miss looks there first,
  // and a miss in another module switches through the table's prebuilt
  // slots.
  detail::ModuleHint hint;
  hint.primary_slots = &table->map_slots.view;
  hint.fallback_slots = &table->extra_slots.view;
  // The trampolines' hull: a cold frame outside it (nearly all) skips the
  // scan of every trampoline range.
  const std::uint64_t tramp_lo = table->tramp_lo, tramp_span = table->tramp_span;
  for (;;) {
    // Whether the memo holds this depth's PC, tested once per frame: by the
    // memo's run here and by the rule choice below. Checked here first: a
    // cold walk, whose PCs the memo mostly does not hold, then pays no call
    // per frame.
    bool held = memo && res.size < kMemoDepth && memo->holds(res.size, pc.lookup_pc());
    if (held && res.size < memo_cap) {
      WalkState ws{pc, cur_sp, cur_fp, fp_ok, have_prev, unchecked, prev_cfa};
      const std::size_t n = memo_run(*memo, out.data(), res.size, memo_cap, ws, own.begin, own.end);
      if (n != res.size) {
        hits += n - res.size;
        res.size = n;
        pc = ws.pc;
        cur_sp = ws.sp;
        cur_fp = ws.fp;
        fp_ok = ws.fp_ok;
        have_prev = ws.have_prev;
        unchecked = ws.unchecked;
        prev_cfa = ws.prev_cfa;
        regs_stale = true;
        held = res.size < kMemoDepth && memo->holds(res.size, pc.lookup_pc());
      }
    }
    if (res.size == out.size()) {
      res.reason = StopReason::kDepthLimit;
      break;
    }
    const std::size_t depth = res.size;
    out[res.size++] = reinterpret_cast<void*>(pc.value());

    // Fast path: a DEFAULT rule with the RA on the stack, evaluated here on
    // SP/FP alone (what the core's Stepper does, without expanding the rule
    // to a FrameRow over the full register set). The rule comes from the
    // memo when this depth had the same PC in the last walk, else from the
    // cache (and then goes into the memo).
    // By value, not through a pointer into the memo or the cache: a rule
    // just looked up is applied from registers rather than stored and
    // loaded back (a store-to-load forwarding on every cold frame's chain).
    CompactRule rule;
    // The memo's step code of `rule` where its module's compiled rows have
    // it precomputed (else derived when the memo is filled).
    const std::int64_t* code = nullptr;
    bool have_rule = false;
    bool fill_memo = false;  // memo[depth] gets this frame's rule
    const std::uint64_t lpc = pc.lookup_pc();
    if (memo && depth < kMemoDepth) {
      if (held && (memo->rule[depth].flags & CompactRule::kValid)) [[likely]] {
        rule = memo->rule[depth];
        have_rule = true;
      } else {
        fill_memo = true;
      }
    }
    if (!have_rule && cache && (pc.value() - tramp_lo >= tramp_span || !detail::in_ranges(tramps, pc.value()))) {
      // Hashed only for a cache the walk uses (13 instructions a frame).
      const std::size_t set = probe ? cache->set(lpc) : 0;
      if (const CompactRule* hit = probe ? cache->lookup_in(set, lpc) : nullptr) {
        rule = *hit;
        have_rule = true;
      } else {
        // A miss: look the rule up here (native sections, then generated
        // ones) and keep it, so that a cold frame with a cacheable rule
        // takes this path too rather than the Stepper's full evaluation
        // (which counts its own miss for what it takes).
        // Outermost frames and PCs without SFrame are cached too, so that
        // a walk to the outermost frame costs no lookup once warm.
        // The compiled rule straight from the module's rows when it has
        // one; the full lookup for everything else.
        CompactRule fresh;
        detail::CompactLookup k = detail::lookup_compact(table->map, &table->extra_map, Arch::kAmd64, lpc, hint, fresh, &code);
        if (k == detail::CompactLookup::kFull) [[unlikely]] {
          const detail::LookedUpRules r = detail::lookup_rules(table->map, &table->extra_map, Arch::kAmd64, lpc);
          if (r.status == detail::LookupStatus::kFound && r.compactable) {
            fresh = r.compact.with_valid();
            k = detail::CompactLookup::kRule;
          } else if (r.status == detail::LookupStatus::kOutermost) {
            fresh = detail::outermost_rule().with_valid();
            k = detail::CompactLookup::kRule;
          } else if (r.status == detail::LookupStatus::kNoSFrame) {
            k = detail::CompactLookup::kNoSFrame;
          }
        }
        if (k == detail::CompactLookup::kNoSFrame) {
          // A PC in no module's code: a module loaded since the table was
          // built (backtrace_refresh_if_needed() rebuilds at a safe point).
          note_unknown_pc(*table, lpc);
          fresh = detail::no_sframe_rule().with_valid();
        }
        if (k != detail::CompactLookup::kFull) {
          ++cache->misses;
          // kValid is set already (lookup_compact's kRule has it; the
          // rarer kinds above set it on the whole 8-byte value, as a 2-byte
          // store into it would stall the 8-byte loads of it that follow):
          // setting it again here made GCC repack the rule's fields into
          // one word and unpack them again on every cold frame.
          rule = fresh;
          have_rule = true;
          // Not into a cache the walk found empty, at depths the memo
          // covers: the memo (filled below) makes the same stack warm next
          // time, and a walk of another stack fills the cache. An insert
          // here costs a cache line written per frame.
          if (probe || !fill_memo) cache->insert_in(probe ? set : cache->set(lpc), lpc, rule);
        }
      }
      if (have_rule && (rule.flags & kSlow)) have_rule = false;
    }
    if (have_rule) {
      const bool fp_based = (rule.flags & CompactRule::kCfaBaseFp) != 0;
      if (!fp_based || fp_ok) [[likely]] {
        ++hits;
        if (fill_memo) memo->set(depth, lpc, rule, code ? *code : straight_code(rule));
        const detail::CompactFrame f = detail::CompactFrame::of(cur_sp, cur_fp, fp_ok, have_prev && !unchecked, prev_cfa);
        detail::CompactStep step;
        const detail::CompactStatus status = detail::apply_rule(rule, f, mem, Arch::kAmd64, nullptr, step);
        if (status != detail::CompactStatus::kStepped) [[unlikely]] {
          res.reason = detail::stop_reason(status);
          res.address = status == detail::CompactStatus::kOutermost ? 0 : step.address;
          break;
        }
        cur_fp = step.fp;
        fp_ok = step.fp_known;
        prev_cfa = step.cfa;
        have_prev = true;
        unchecked = false;
        cur_sp = step.cfa;
        regs_stale = true;
        pc = CodeAddress::return_address(step.ra);
        if (step.ra == 0) {
          res.reason = StopReason::kZeroPc;
          break;
        }
        continue;
      }
    }

    if (!regs_storage) regs_storage = new (regs_bytes) Regs(Regs::amd64(pc0, sp0, fp0));
    Regs& regs = *regs_storage;
    if (regs_stale) {
      regs.valid = 0;
      regs.set(kSp, cur_sp);
      if (fp_ok) regs.set(kFp, cur_fp);
      regs.pc = pc.value();
      regs_stale = false;
    }
    detail::StepOutcome s = stepper.step(regs, pc);
    if (!s.stepped) {
      res.reason = s.reason;
      res.address = s.address;
      break;
    }
    detail::CfaChain chain{prev_cfa, have_prev, unchecked};
    if (const std::optional<StopReason> why = chain.accept(s)) {
      res.reason = *why;
      res.address = s.cfa;
      break;
    }
    prev_cfa = chain.prev_cfa;
    have_prev = chain.have_prev;
    unchecked = chain.unchecked;
    cur_sp = regs.dwarf[kSp];
    cur_fp = regs.dwarf[kFp];
    fp_ok = regs.has(kFp);
    if (!regs.has(kSp)) {
      res.reason = StopReason::kBadRule;
      res.address = pc.value();
      break;
    }
    if (pc.value() == 0) {
      res.reason = StopReason::kZeroPc;
      break;
    }
  }
  if (res.reason == StopReason::kNoSFrameForPc) note_unknown_pc(*table, res.address);
  if (cache) {
    cache->hits += hits;
    // Whatever this walk inserted (here or through the Stepper) is there
    // for the next one.
    st->cache_empty = false;
  }
  if (res.reason == StopReason::kUnreadableMemory && mem.refused) res.reason = StopReason::kReadCheckRefused;
  // The main thread's stack, found mapped below its registered bottom by the
  // kernel (after an overflow, say): later walks read it directly. Only
  // pages joined to the registered range, and above the RLIMIT_STACK floor.
  if (st && st->grows && mem.checked.begin < st->lo && mem.checked.end >= st->lo &&
      mem.checked.begin >= st->limit)
    st->lo = mem.checked.begin;
  return res;
}

inline void set_result(BacktraceResult& r, std::size_t size, StopReason reason, std::uint64_t address = 0) noexcept {
  // Field by field: a whole-struct copy put together from separate stores
  // stalls store forwarding, which cost a fifth of a short walk.
  r.size = size;
  r.reason = reason;
  r.address = address;
}

/// The general walk's state at frame `n` (PC `pc`, SP, FP) after a straight
/// prelude took frames 0 to n - 1: the last CFA taken is this frame's SP.
inline WalkState resume_state(std::size_t n, CodeAddress pc, std::uint64_t sp, std::uint64_t fp) noexcept {
  return n == 0 ? WalkState{pc, sp, fp} : WalkState{pc, sp, fp, true, true, false, sp};
}

/// Walks from frame `n` (frame 0 when no straight prelude took frames
/// before it) in resume_state(n, pc, sp, fp); writes every frame's address
/// and the outcome to `r`. Runs on the stack being walked: its own frame's
/// address tells which stack that is (the thread's, or the alternate
/// signal stack).
/// The registers as scalars, not a WalkState by value: the caller built
/// that with 8-, 2- and 1-byte stores and copied it into the argument area
/// with 16-byte loads, which cannot take their data from the stores in
/// flight (a store-forwarding stall on every walk through the C++ entry:
/// most of sframepp_backtrace_walk_on's samples in a cold-walk profile).
[[gnu::noinline]] std::size_t walk(BacktraceResult& r, std::span<void*> out, std::size_t n, CodeAddress pc, std::uint64_t sp,
                            std::uint64_t fp) noexcept {
  WalkState ws = resume_state(n, pc, sp, fp);
  int probe = 0;
  const auto here = reinterpret_cast<std::uint64_t>(&probe);
  asm volatile("" : : "r"(&probe) : "memory");
  const auto set_general = [&r](const BacktraceResult& g) {
    set_result(r, g.size, g.reason, g.address);
    return g.size;
  };
  ThreadState* st = thread_state();
  TableGuard guard(st);
  const Table* table = guard.get();
  if (!table) {
    set_result(r, 0, StopReason::kNotInitialized);
    return 0;
  }
  BacktraceResult from;
  from.size = n;
  // A walk that interrupted another on this thread leaves the cache and
  // the memo alone; a thread that never registered has neither.
  if (!st || st->busy) {
    return set_general(walk_general(out, from, ws, here, st, table, nullptr, nullptr));
  }
  st->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const std::uint64_t gen = table->map.generation();
  if (st->memo_generation != gen) [[unlikely]] {
    st->memo.clear();
    st->memo_generation = gen;
    // The cold run's module hint points into the old table's slots.
    st->cold_hint = ColdHint{};
  }
  // A cache of another generation is emptied (and then holds nothing).
  if (st->cache.generation() != gen) [[unlikely]] {
    st->cache_empty = true;
    st->cache.sync(gen);
  }
  // The fast runs first, with nothing of the general loop built: the
  // memo's run where it holds the PC, the cold run where the cache is
  // empty (a walk after a flush), each until the other or the general
  // loop must take a frame. A walk they take to its outermost frame ends
  // here.
  const std::size_t cap = std::min(out.size(), kMemoDepth);
  if (n < cap) {
    Memo& memo = st->memo;
    const bool cold = st->cache_empty;
    ColdHint& hint = st->cold_hint;
    bool outermost = false;
    std::size_t k = n, taken = 0, looked_up = 0;
    for (;;) {
      std::size_t m;
      if (memo.holds(k, ws.pc.lookup_pc())) {
        m = memo_run(memo, out.data(), k, cap, ws, st->lo, st->hi);
      } else if (cold) {
        m = cold_run(memo, out.data(), k, cap, ws, st->lo, st->hi, *table, hint, outermost);
        looked_up += m - k;
      } else {
        break;
      }
      if (m == k) break;
      taken += m - k;
      k = m;
      if (outermost || k == cap) break;
    }
    // As the general loop counts them: a hit per frame stepped from a
    // rule, a miss per rule looked up.
    st->cache.hits += taken;
    st->cache.misses += looked_up;
    if (outermost || k == out.size()) {
      set_result(r, k, outermost ? StopReason::kOutermost : StopReason::kDepthLimit);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      st->busy = 0;
      return k;
    }
    from.size = k;
  }
  const std::size_t size = set_general(walk_general(out, from, ws, here, st, table, &st->cache, &st->memo));
  std::atomic_signal_fence(std::memory_order_seq_cst);
  st->busy = 0;
  return size;
}

/// A whole walk from frame `pc` (exact or return address) with SP/FP (the
/// ucontext_t and register entries). Warm frames go through the memo's run
/// (memo_run, the one rule executor), not the assembly's straight run.
inline void walk(BacktraceResult& r, std::span<void*> out, CodeAddress pc, std::uint64_t sp, std::uint64_t fp) noexcept {
  (void)walk(r, out, 0, pc, sp, fp);
}

// Lazy setup for the plain entry points before backtrace_init (documented
// as not AS-safe). Threads are not registered here: an unregistered thread
// walks without a cache, with every read checked, and that is
// async-signal-safe, as a crash handler on any thread needs.
void ensure_ready() noexcept {
  if (!g_table.load()) {
    try {
      (void)backtrace_init();
    } catch (...) {
    }
  }
}

}  // namespace
}  // namespace sframe::bt

namespace sframe {

BacktraceResult backtrace_ex(std::span<void*> out, const ucontext_t* uc) noexcept {
  if (!uc) return backtrace_ex(out);  // inline: starts in this frame
  const greg_t* g = uc->uc_mcontext.gregs;
  BacktraceResult r;
  bt::walk(r, out, CodeAddress::exact(static_cast<std::uint64_t>(g[REG_RIP])), static_cast<std::uint64_t>(g[REG_RSP]),
           static_cast<std::uint64_t>(g[REG_RBP]));
  return r;
}

std::size_t backtrace(std::span<void*> out, const ucontext_t* uc) noexcept { return backtrace_ex(out, uc).size; }

BacktraceResult backtrace_from(std::span<void*> out, std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept {
  BacktraceResult r;
  bt::walk(r, out, CodeAddress::exact(pc), sp, fp);
  return r;
}

}  // namespace sframe

namespace sframe::bt {
namespace {

// The in-process entry's first-call path, out of its way.
[[gnu::noinline, gnu::cold]] void setup_and_walk(void** out, std::size_t size, BacktraceResult* result, std::uint64_t pc,
                                                 std::uint64_t sp, std::uint64_t fp) noexcept {
  ensure_ready();
  walk(*result, std::span<void*>(out, size), CodeAddress::return_address(pc), sp, fp);
}

}  // namespace
}  // namespace sframe::bt

extern "C" std::size_t sframepp_backtrace_walk_on(void** out, std::size_t size, sframe::BacktraceResult* result,
                                                  std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept {
  using namespace sframe::bt;
  const std::size_t n = result->size;
  // Setup missing (no table yet; a table is never taken away): set up,
  // then walk. Tested before the walk rather than from its result, so
  // that the walk is a tail call: after it, this frame kept every
  // argument for the second walk in saved registers (12 pushes and pops
  // on every walk).
  if (n == 0 && !g_table.load(std::memory_order_relaxed)) [[unlikely]] {
    setup_and_walk(out, size, result, pc, sp, fp);
    return result->size;
  }
  return walk(*result, std::span<void*>(out, size), n, sframe::CodeAddress::return_address(pc), sp, fp);
}

#else  // not x86-64 Linux

namespace sframe {
BacktraceResult backtrace_ex(std::span<void*>, const ucontext_t*) noexcept { return {0, StopReason::kUnsupported, 0}; }
std::size_t backtrace(std::span<void*>, const ucontext_t*) noexcept { return 0; }
BacktraceResult backtrace_from(std::span<void*>, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {
  return {0, StopReason::kUnsupported, 0};
}
}  // namespace sframe

#endif
