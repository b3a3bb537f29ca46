// SPDX-License-Identifier: MIT
// sframepp: the SFrame unwinder (layer `unwind`, depends only on `format`).
//
// Walks a stack from the registers of its topmost frame using the rules of
// SFrame sections (spec v3 §3 and Appendix A "Generating Stack Traces using
// SFrame"), reading stack memory through a caller-chosen reader.
//
// Safety contract:
//  - unwind() and everything it calls allocate nothing, take no locks, throw
//    nothing and call no interposable libc function: with an
//    async-signal-safe MemoryReader it is async-signal-safe.
//  - Setup (building the ModuleMap, FdeIndex accelerators, the RuleCache
//    storage) happens before, outside any signal handler; the ModuleMap must
//    not be modified while an unwind reads it.
//  - Every memory read goes through the reader and is bounds-checked there;
//    no address read from the stack is ever dereferenced directly.
//
// Address vocabulary: "runtime" addresses are where code and stack are in the
// unwound process; SFrame sections hold "link-time" addresses (a Section is
// parsed with the section's link-time sh_addr). runtime = link-time + bias.
#pragma once
// Library: libsframepp-unwind (sframepp::unwind). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "sframe/format/byte_order.hpp"
#include "sframe/format/error.hpp"
#include "sframe/format/format.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"
#include "sframe/unwind/stop_reason.hpp"  // IWYU pragma: export

// The pieces, by concept (this header stays the one to include).
#include "sframe/unwind/memory.hpp"     // IWYU pragma: export
#include "sframe/unwind/modules.hpp"    // IWYU pragma: export
#include "sframe/unwind/registers.hpp"  // IWYU pragma: export

namespace sframe {

// ---------------------------------------------------------------------------
// Compact rules and the rule cache
// ---------------------------------------------------------------------------

/// A DEFAULT-type frame row compiled to 8 bytes, with header fixed offsets
/// and s390x/padding semantics already applied. Rows that do not fit (FLEX
/// rules, register-saved FP/RA, offsets out of range) are not compacted and
/// are evaluated from their full FrameRow.
struct CompactRule {
  /// Bits of `flags`.
  enum : std::uint16_t {
    kCfaBaseFp = 1u << 0,       // CFA = FP + cfa_offset (else SP + cfa_offset)
    kRaOnStack = 1u << 1,       // RA = *(CFA + ra_offset_by_8 * 8)
    kRaInRegister = 1u << 2,    // RA unchanged: still in LR/r14 (topmost only)
    kRaUndefined = 1u << 3,     // outermost frame (errata 2)
    kFpOnStack = 1u << 4,       // FP = *(CFA + fp_offset_by_8 * 8); else unchanged
    kRaMangled = 1u << 5,       // strip PAuth bits from the RA
    kSignal = 1u << 6,          // v3 signal-frame FDE
    kValid = 1u << 7,           // entry holds a rule
    kNoSFrame = 1u << 8,        // no SFrame covers the PC: the fallbacks decide (no other field is set)
  };
  std::int32_t cfa_offset = 0;    // bytes
  std::int8_t ra_offset_by_8 = 0;  // bytes / 8
  std::int8_t fp_offset_by_8 = 0;  // bytes / 8
  std::uint16_t flags = 0;
  friend bool operator==(const CompactRule&, const CompactRule&) = default;
  /// This rule with kValid set, made as one 8-byte value (a 2-byte store
  /// into a rule stalls the 8-byte loads of it that follow).
  CompactRule with_valid() const noexcept {
    constexpr std::uint64_t kValidBits = std::bit_cast<std::uint64_t>(CompactRule{0, 0, 0, kValid});
    return std::bit_cast<CompactRule>(std::bit_cast<std::uint64_t>(*this) | kValidBits);
  }
};
static_assert(sizeof(CompactRule) == 8 && std::is_trivially_copyable_v<CompactRule>);

/// Two-way set-associative cache (a direct-mapped table of two-entry sets,
/// so two hot PCs that hash alike do not evict each other on every walk):
/// lookup PC -> CompactRule. Owned by the caller (one
/// per thread or per unwinder: it is not thread-safe and needs no locks) over
/// caller-provided storage of a power-of-two number of entries. Keyed by the
/// runtime lookup PC; the whole cache is dropped when it is used with a
/// ModuleMap generation other than the one it was filled under.
/// All members are async-signal-safe (no allocation).
class RuleCache {
 public:
  struct Entry {
    std::uint64_t pc = 0;  // runtime lookup PC (RA - 1 or exact PC)
    CompactRule rule;      // rule.flags & kValid == 0: empty
  };
  static_assert(sizeof(Entry) <= 16, "cache entries must stay within 16 bytes");

  /// `storage.size()` should be a power of two, at least 2 (otherwise only
  /// the largest power of two not above it is used, and at most 2^31
  /// entries; fewer than 2 entries make a cache that never hits); it must
  /// outlive the cache.
  explicit RuleCache(std::span<Entry> storage) noexcept;
  /// Tag for storage whose bytes are all zero (every entry empty), such as
  /// fresh anonymous mmap() pages.
  struct ZeroedStorage {};
  /// RuleCache(storage) for such storage, which this constructor does not
  /// write: its pages stay untouched, and so not resident, until inserts
  /// reach them (a per-thread cache of a thread that seldom walks costs a
  /// few pages, not all of them).
  RuleCache(std::span<Entry> storage, ZeroedStorage) noexcept;

  /// Empties the cache if `generation` differs from the one it holds.
  void sync(std::uint64_t generation) noexcept {
    if (generation != generation_) reset(generation);
  }
  /// The rule cached for runtime lookup PC `pc`, or null. The pointer is
  /// valid until the next insert(), clear() or sync().
  const CompactRule* lookup(std::uint64_t pc) const noexcept { return lookup_in(set(pc), pc); }
  /// Inserts as the most recent entry of its set, evicting the older one.
  void insert(std::uint64_t pc, const CompactRule& r) noexcept { insert_in(set(pc), pc, r); }
  /// The set of runtime lookup PC `pc`, for lookup_in() and insert_in(): a
  /// miss then hashes the PC once for both.
  std::size_t set(std::uint64_t pc) const noexcept {
    // Two folds of the PC: one cycle each, where a multiplicative hash would
    // add its latency to every frame's dependency chain (the rule of frame
    // N + 1 depends on the RA read in frame N).
    return (static_cast<std::size_t>(pc ^ (pc >> shift_) ^ (pc >> (2 * shift_))) & mask_) * 2;
  }
  /// lookup() of `pc` in set `s` (= set(pc)).
  const CompactRule* lookup_in(std::size_t s, std::uint64_t pc) const noexcept {
    if (entries_.empty()) return nullptr;
    const Entry& e0 = entries_[s];
    if (e0.pc == pc && (e0.rule.flags & CompactRule::kValid)) return &e0.rule;
    const Entry& e1 = entries_[s + 1];
    if (e1.pc == pc && (e1.rule.flags & CompactRule::kValid)) return &e1.rule;
    return nullptr;
  }
  /// insert() of `pc` into set `s` (= set(pc)).
  void insert_in(std::size_t s, std::uint64_t pc, const CompactRule& r) noexcept {
    if (entries_.empty()) return;
    // Logged for clear(); a count past kLogged means "clear everything".
    if (written_ < kLogged) written_sets_[written_] = static_cast<std::uint32_t>(s);
    written_ += written_ <= kLogged;
    entries_[s + 1] = entries_[s];
    Entry& e = entries_[s];
    e.pc = pc;
    e.rule = r.with_valid();
  }
  /// Drops every entry (keeps the generation and the counters). Entries
  /// become valid only through insert(), so when at most kLogged inserts
  /// came since the last clear only their sets are emptied (a flush then
  /// writes a few cache lines rather than the whole storage, which would
  /// evict the walker's tables from the CPU's caches); else every entry.
  void clear() noexcept;
  /// Inserts clear() remembers by set.
  static constexpr unsigned kLogged = 256;
  /// The map generation the entries hold for.
  std::uint64_t generation() const noexcept { return generation_; }
  /// For a map whose only change since generation() is modules added over
  /// runtime [lo, hi): drops the entries for PCs in that range (the only
  /// lookups the change can alter) and takes `generation`, keeping the
  /// others, where sync() would drop them all. A walk that generates SFrame
  /// one function at a time adds a module per function. O(entries).
  void adopt(std::uint64_t generation, std::uint64_t lo, std::uint64_t hi) noexcept;

  /// Counters maintained by unwind() (not by lookup() itself).
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;

 private:
  std::span<Entry> entries_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  void reset(std::uint64_t generation) noexcept;
  /// The entries and set geometry over `storage` (both constructors).
  void set_storage(std::span<Entry> storage) noexcept;
  std::uint64_t generation_ = 0;
  /// Inserts since the last clear() (counting stops at kLogged + 1) and
  /// the sets of the first kLogged of them.
  unsigned written_ = 0;
  std::uint32_t written_sets_[kLogged];
};

/// A RuleCache with its own storage of N entries (N a power of two, >= 2).
template <std::size_t N>
class StaticRuleCache : public RuleCache {
  static_assert(N >= 2 && (N & (N - 1)) == 0);

 public:
  StaticRuleCache() noexcept : RuleCache(std::span<Entry>(storage_)) {}
  StaticRuleCache(const StaticRuleCache&) = delete;
  StaticRuleCache& operator=(const StaticRuleCache&) = delete;

 private:
  std::array<Entry, N> storage_{};
};

// ---------------------------------------------------------------------------
// Frames and results
// ---------------------------------------------------------------------------

/// Bits of Frame::flags.
enum FrameFlag : std::uint8_t {
  /// This frame's PC is in a signal trampoline: the next frame's registers
  /// were restored from the signal frame (rt_sigframe) and its PC is exact.
  /// x86-64 Linux only; on AArch64 and s390x a signal FDE's own rules apply.
  kFrameSignal = 1u << 0,
  /// This frame was reached by the frame-pointer fallback (its callee had no
  /// SFrame): its PC and FP come from the frame record, its SP is estimated.
  kFrameFpFallback = 1u << 1,
  /// The PC was stripped of PAuth signature bits (AArch64).
  kFramePauthStripped = 1u << 2,
  /// Frame::fp is known.
  kFrameFpValid = 1u << 3,
};

/// One frame of a stack trace.
struct Frame {
  /// Where this frame executes: exact for frame 0 and after a signal frame,
  /// else a return address (look rules up with pc.lookup_pc()).
  CodeAddress pc;
  /// This frame's SP (caller frames: the callee's CFA; s390x: CFA - 160).
  std::uint64_t sp = 0;
  /// This frame's FP if kFrameFpValid.
  std::uint64_t fp = 0;
  /// This frame's CFA, computed when stepping to its caller; 0 if the walk
  /// stopped before (the last frame).
  std::uint64_t cfa = 0;
  std::uint8_t flags = 0;
};

/// Outcome of unwind().
struct UnwindResult {
  /// Frames written to the output span (frame 0 is always written if the
  /// span is not empty).
  std::size_t count = 0;
  StopReason reason = StopReason::kOutermost;
  /// Detail: kUnreadableMemory the address read; kNoSFrameForPc/kBadRule the
  /// lookup PC; kCfaNotIncreasing the offending CFA; else 0.
  std::uint64_t address = 0;
  /// kBadRule from a decoding failure: the decoder's error code (its layer
  /// and code); empty for every other outcome.
  std::optional<ErrorCode> error;
};

/// Knobs of an unwind. Trivially copyable; nothing here allocates.
struct UnwindOptions {
  /// When no SFrame covers a PC, step with the frame-pointer convention
  /// (x86-64: CFA = FP + 16, RA = *(FP + 8), FP' = *FP; AArch64: frame
  /// record {FP', RA} at FP, CFA = FP + 16) and mark the caller
  /// kFrameFpFallback. s390x has no such convention: kNoSFrameForPc.
  bool fp_fallback = false;
  /// AArch64 PAuth stripping: the virtual-address width in bits (PAC bits sit
  /// above it). Range 32..56.
  std::uint8_t pauth_va_bits = 48;
  /// AArch64 top-byte-ignore for instruction addresses: keep bits 56-63
  /// instead of clearing them with the PAC. Linux user space: false.
  bool pauth_tbi = false;
  /// x86-64: treat a PC at the bytes of `mov $15, %rax; syscall`
  /// (48 c7 c0 0f 00 00 00 0f 05, rt_sigreturn) as a signal trampoline. Reads
  /// 9 code bytes at the PC through the memory reader.
  bool detect_sigreturn_code = true;
  /// Runtime ranges of signal trampolines (glibc __restore_rt, the vDSO's
  /// __kernel_rt_sigreturn), in addition to FDEs with the v3 signal bit.
  std::span<const AddressRange> signal_trampolines{};
  /// Runtime ranges of executable code (a process's executable mappings).
  /// When not empty, a frame-pointer step is taken only if the return
  /// address it reads lies in one of them (else kNoSFrameForPc): a frame
  /// pointer that holds no frame record (code built without one, a thread
  /// fresh from clone) then ends the walk instead of inventing frames.
  std::span<const AddressRange> code_ranges{};
};

// Offsets used to restore registers from a Linux x86-64 signal frame. At the
// trampoline the SP points at the ucontext_t of `struct rt_sigframe {char*
// pretcode; ucontext_t uc; siginfo_t info;}` (pretcode was popped by the
// handler's `ret`). uc_mcontext.gregs[] starts 40 bytes into ucontext_t
// (uc_flags 8, uc_link 8, uc_stack 24); each greg is 8 bytes, indexed by
// glibc's REG_* (<sys/ucontext.h>; checked with offsetof in
// src/unwind/signal.cpp when built on x86-64 Linux).
namespace x86_64_sigframe {
inline constexpr std::uint64_t kGregsOffset = 40;
/// gregs[] index (REG_R8..REG_RIP) -> DWARF register number; 16 = RIP.
inline constexpr std::array<std::uint8_t, 17> kGregToDwarf = {
    8, 9, 10, 11, 12, 13, 14, 15,  // REG_R8..REG_R15
    5, 4, 6, 3, 1, 0, 2, 7,        // REG_RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP
    16};                           // REG_RIP
inline constexpr unsigned kRegRip = 16;
inline constexpr unsigned kRegRsp = 15;
inline constexpr unsigned kRegRbp = 10;
}  // namespace x86_64_sigframe

/// Walks the stack from `regs` (frame 0), writing frames to `out` until a
/// stop condition; returns how many were written and why it stopped (the
/// last frame written is the one that could not be stepped over; with an
/// empty `out`, nothing is written and the reason is kDepthLimit).
///
/// Frame 0 is regs.pc (exact); every later frame's PC is the return address
/// read from its callee's frame, except right after a signal frame, where it
/// is the interrupted PC (exact). Each step looks up the rules of the
/// frame's lookup PC (RA - 1 or exact PC) in `modules` (through `cache` when
/// given), computes the CFA and the caller's PC/SP/FP (spec Appendix A;
/// DEFAULT rules §3.1 incl. the s390x SP = CFA - 160 and errata 1; FLEX rules
/// §3.2), and checks that the CFA moves strictly up the stack (equality
/// allowed between a handler and its trampoline; the frame after a signal
/// frame is not checked, as a handler on sigaltstack interrupted another
/// stack). Registers other than SP and FP are known only in frame 0 and
/// right after a signal frame: a rule needing one elsewhere stops the walk
/// with kBadRule (spec Appendix A, "ERR_SFRAME_UNSAFE_UNWIND").
///
/// Cost: with a warm `cache`, a DEFAULT-rule frame is one cache probe and
/// one or two word reads (see bench/unwind_bench.cpp); misses search the
/// module map (binary search) and the section (FdeIndex if the module has
/// one, else sframe::find()).
/// Async-signal-safe when M::read_word is: no allocation, no locks, no
/// exceptions, no virtual calls unless M has them. `cache` must not be used
/// by two walks at once.
template <MemoryReader M>
UnwindResult unwind(const ModuleMap& modules, const M& memory, const Regs& regs, std::span<Frame> out,
                    const UnwindOptions& options = {}, RuleCache* cache = nullptr) noexcept;

}  // namespace sframe

#include "sframe/unwind/detail/unwind_step.hpp"  // IWYU pragma: export

#pragma GCC visibility pop
