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
// Exported from libsframepp.so, which builds with hidden visibility.
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

#include "sframe/error.hpp"
#include "sframe/format.hpp"
#include "sframe/lookup.hpp"
#include "sframe/section.hpp"

namespace sframe {

// ---------------------------------------------------------------------------
// Memory readers
// ---------------------------------------------------------------------------

/// What the unwinder needs from memory: one 64-bit word at a byte address,
/// in the TARGET's byte order (x86-64 and little-endian AArch64: little;
/// s390x and big-endian AArch64: big), or nullopt if any byte of
/// [addr, addr + 8) is not readable. The address may be unaligned, and may be
/// anything (read from a corrupted stack): implementations check it.
///
/// std::optional rather than Expected: the only failure is "not readable",
/// the unwinder already knows the address (it reports it in UnwindResult), and
/// a 16-byte trivially copyable result travels in two registers on the hot
/// path. Implementations used from signal handlers must be async-signal-safe.
template <class M>
concept MemoryReader = requires(const M& m, std::uint64_t addr) {
  { m.read_word(addr) } noexcept -> std::same_as<std::optional<std::uint64_t>>;
};

/// Byte order of the unwound target's memory.
enum class ByteOrder : std::uint8_t { kLittle, kBig };

/// The host's byte order (in-process unwinding).
inline constexpr ByteOrder kHostByteOrder =
    std::endian::native == std::endian::big ? ByteOrder::kBig : ByteOrder::kLittle;

/// Reads a 64-bit word of byte order `order` from 8 bytes at `p` (no
/// alignment needed).
inline std::uint64_t load_word(const std::byte* p, ByteOrder order) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return order == kHostByteOrder ? v : __builtin_bswap64(v);
}

/// A stack image (or any memory snapshot) of `bytes` starting at runtime
/// address `base`: reads inside [base, base + size) succeed, all others fail
/// (overflow-safe). Does not own the bytes. Async-signal-safe.
class BufferMemory {
 public:
  BufferMemory() = default;
  BufferMemory(std::span<const std::byte> bytes, std::uint64_t base,
               ByteOrder order = kHostByteOrder) noexcept
      : bytes_(bytes), base_(base), order_(order) {}

  /// The word at [addr, addr + 8) in the image's byte order, or nullopt if
  /// any of those bytes lies outside the image.
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    // addr - base wraps for addresses below base: one unsigned compare covers
    // both ends without overflow.
    const std::uint64_t off = addr - base_;
    if (bytes_.size() < 8 || off > bytes_.size() - 8) return std::nullopt;
    return load_word(bytes_.data() + off, order_);
  }
  /// Copies `out.size()` bytes at `addr`; false (and nothing copied) if any
  /// of them lies outside the image.
  bool read(std::uint64_t addr, std::span<std::byte> out) const noexcept {
    const std::uint64_t off = addr - base_;
    if (off > bytes_.size() || out.size() > bytes_.size() - off) return false;
    if (!out.empty()) std::memcpy(out.data(), bytes_.data() + off, out.size());
    return true;
  }
  /// Runtime address of the first byte, and the size in bytes.
  std::uint64_t base() const noexcept { return base_; }
  std::uint64_t size() const noexcept { return bytes_.size(); }
  ByteOrder byte_order() const noexcept { return order_; }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t base_ = 0;
  ByteOrder order_ = kHostByteOrder;
};
static_assert(MemoryReader<BufferMemory>);

/// Several disjoint BufferMemory regions (e.g. a thread stack, a signal
/// altstack and a code page), tried in order. Does not own the span.
/// Async-signal-safe.
class MultiBufferMemory {
 public:
  explicit MultiBufferMemory(std::span<const BufferMemory> regions) noexcept : regions_(regions) {}
  /// The word from the first region holding all 8 bytes of it.
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    for (const BufferMemory& r : regions_)
      if (auto w = r.read_word(addr)) return w;
    return std::nullopt;
  }

 private:
  std::span<const BufferMemory> regions_;
};
static_assert(MemoryReader<MultiBufferMemory>);

/// Type-erased reader for tools (ptrace, /proc/PID/mem, core files) where a
/// virtual call per word does not matter. Memory itself satisfies
/// MemoryReader, so unwind<Memory>() is instantiated once for all of them.
class Memory {
 public:
  virtual ~Memory() = default;
  /// Same contract as MemoryReader::read_word.
  virtual std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept = 0;
};
static_assert(MemoryReader<Memory>);

/// Adapts any MemoryReader to the Memory interface. Holds a reference: the
/// reader must outlive the adapter.
template <MemoryReader M>
class MemoryAdapter final : public Memory {
 public:
  explicit MemoryAdapter(const M& m) noexcept : m_(&m) {}
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept override { return m_->read_word(addr); }

 private:
  const M* m_;
};

// ---------------------------------------------------------------------------
// Architectures and registers
// ---------------------------------------------------------------------------

/// Target architecture of an unwind (the section's byte order is separate:
/// both AArch64 ABIs map to kAarch64).
enum class Arch : std::uint8_t { kAmd64, kAarch64, kS390x };

/// The architecture of an SFrame ABI identifier (spec §2.2.1).
constexpr Arch arch_of(Abi abi) noexcept {
  switch (abi) {
    case Abi::kAmd64Little: return Arch::kAmd64;
    case Abi::kS390xBig: return Arch::kS390x;
    case Abi::kAarch64Big:
    case Abi::kAarch64Little: break;
  }
  return Arch::kAarch64;
}

/// DWARF numbers of the registers the SFrame rules name implicitly.
struct ArchRegs {
  std::uint16_t sp;
  std::uint16_t fp;
  /// Register holding the return address on entry (AArch64 x30/LR, s390x
  /// r14); kNoRegister on AMD64, where the RA is always on the stack.
  std::uint16_t ra;
};
inline constexpr std::uint16_t kNoRegister = 0xffff;

/// AMD64: rsp 7, rbp 6. AArch64: sp 31, x29 29, x30 30. s390x: r15, r11, r14.
constexpr ArchRegs arch_regs(Arch a) noexcept {
  switch (a) {
    case Arch::kAmd64: return {7, 6, kNoRegister};
    case Arch::kAarch64: return {31, 29, 30};
    case Arch::kS390x: return {15, 11, 14};
  }
  return {kNoRegister, kNoRegister, kNoRegister};
}

/// Register state of one frame: the PC plus DWARF registers 0..31 with a
/// validity mask (AMD64 uses 0-16, AArch64 x0-x30 and sp, s390x r0-r15 and
/// f0-f15 as DWARF 16-31, which FLEX rules may name). Fixed size, no
/// allocation. Registers not marked valid are unknown: a rule that needs one
/// stops the unwind with StopReason::kBadRule.
struct Regs {
  static constexpr unsigned kNumDwarf = 32;

  Arch arch = Arch::kAmd64;
  /// Runtime address of the next instruction to execute (frame 0: the
  /// interrupted/current instruction).
  std::uint64_t pc = 0;
  std::array<std::uint64_t, kNumDwarf> dwarf{};
  /// Bit r set: dwarf[r] is known.
  std::uint32_t valid = 0;

  /// True if DWARF register `r` is known (false for r >= kNumDwarf).
  bool has(unsigned r) const noexcept { return r < kNumDwarf && ((valid >> r) & 1u); }
  /// DWARF register `r`, or nullopt if unknown.
  std::optional<std::uint64_t> get(unsigned r) const noexcept {
    if (!has(r)) return std::nullopt;
    return dwarf[r];
  }
  /// Sets DWARF register `r` (ignored if r >= kNumDwarf).
  void set(unsigned r, std::uint64_t v) noexcept {
    if (r >= kNumDwarf) return;
    dwarf[r] = v;
    valid |= 1u << r;
  }
  /// Marks DWARF register `r` unknown.
  void forget(unsigned r) noexcept {
    if (r < kNumDwarf) valid &= ~(1u << r);
  }
  /// The stack and frame pointer of `arch`, if known.
  std::optional<std::uint64_t> sp() const noexcept { return get(arch_regs(arch).sp); }
  std::optional<std::uint64_t> fp() const noexcept { return get(arch_regs(arch).fp); }

  /// Frame-0 state from the three registers every architecture has.
  static Regs make(Arch a, std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept {
    Regs r;
    r.arch = a;
    r.pc = pc;
    r.set(arch_regs(a).sp, sp);
    r.set(arch_regs(a).fp, fp);
    return r;
  }
  static Regs amd64(std::uint64_t pc, std::uint64_t rsp, std::uint64_t rbp) noexcept {
    return make(Arch::kAmd64, pc, rsp, rbp);
  }
  /// `lr`: x30, where the RA is while the function has not saved it.
  static Regs aarch64(std::uint64_t pc, std::uint64_t sp, std::uint64_t x29, std::uint64_t lr) noexcept {
    Regs r = make(Arch::kAarch64, pc, sp, x29);
    r.set(30, lr);
    return r;
  }
  /// `r14`: the RA register; `r11`: the preferred FP (spec §3.1.3).
  static Regs s390x(std::uint64_t pc, std::uint64_t r15, std::uint64_t r11, std::uint64_t r14) noexcept {
    Regs r = make(Arch::kS390x, pc, r15, r11);
    r.set(14, r14);
    return r;
  }
};

// ---------------------------------------------------------------------------
// Code addresses
// ---------------------------------------------------------------------------

/// A runtime code address and how it was obtained. A return address points
/// after the call, possibly past the caller's last instruction or into the
/// next function, so rules are looked up at RA - 1. An exact PC (frame 0, or
/// the interrupted PC restored from a signal frame) is looked up as is.
class CodeAddress {
 public:
  constexpr CodeAddress() = default;
  /// An instruction that was executing (or is next to execute) in this frame.
  static constexpr CodeAddress exact(std::uint64_t pc) noexcept { return CodeAddress(pc, false); }
  /// A return address read from a callee's frame.
  static constexpr CodeAddress return_address(std::uint64_t ra) noexcept { return CodeAddress(ra, true); }

  constexpr std::uint64_t value() const noexcept { return value_; }
  constexpr bool is_return_address() const noexcept { return ra_; }
  /// The address whose rules describe this frame: value - 1 for return
  /// addresses, value otherwise.
  constexpr std::uint64_t lookup_pc() const noexcept { return ra_ ? value_ - 1 : value_; }
  friend constexpr bool operator==(const CodeAddress&, const CodeAddress&) = default;

 private:
  constexpr CodeAddress(std::uint64_t v, bool ra) noexcept : value_(v), ra_(ra) {}
  std::uint64_t value_ = 0;
  bool ra_ = false;
};

// ---------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------

/// A half-open runtime address range [begin, end).
struct AddressRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  constexpr bool contains(std::uint64_t a) const noexcept { return a >= begin && a < end; }
  friend constexpr bool operator==(const AddressRange&, const AddressRange&) = default;
};

/// One loaded object: its code range, its SFrame section and its load bias.
/// The Section (and its FdeIndex or RowIndex, if any) must outlive every
/// unwind that uses the module.
struct Module {
  /// Runtime addresses covered (typically the executable PT_LOAD segment).
  AddressRange range;
  /// runtime address - link-time address (0 for non-PIE executables; the
  /// load base of shared objects and PIEs).
  std::uint64_t bias = 0;
  /// The module's SFrame section, parsed with its link-time sh_addr.
  Section section;
  /// Optional accelerator over `section` (FdeIndex::build); null = binary
  /// search with sframe::find().
  const FdeIndex* index = nullptr;
  /// Optional faster accelerator (RowIndex::build over `section`, which
  /// must pass validate(kStrict): RowIndex::find answers as find() does
  /// only there); used instead of `index` when set. Must outlive every
  /// unwind that uses the module.
  const RowIndex* rows = nullptr;
  /// Optional, with `rows`: rows->num_rows() cacheable forms of its
  /// distinct rows (detail::compile_rows; an entry without
  /// CompactRule::kValid has none), so that a cold frame's lookup reads
  /// one bucket, one line of boundaries and one 8-byte rule. Must outlive
  /// every unwind that uses the module.
  const struct CompactRule* compact_rows = nullptr;
};

/// PC -> module map over caller-provided storage: sorted by address,
/// binary-searched, allocation-free. add()/remove()/clear() are not
/// async-signal-safe with respect to a concurrent unwind (update outside any
/// unwind, e.g. under the caller's lock or before installing handlers);
/// find() is async-signal-safe. Each change takes a new generation number,
/// unique across all maps of the process, which invalidates RuleCaches.
class ModuleMap {
 public:
  /// `storage` bounds the number of modules; it must outlive the map.
  explicit ModuleMap(std::span<Module> storage) noexcept;

  /// Inserts `m`, keeping the map sorted. Errors: kModuleMapFull (no
  /// storage left), kBadModuleRange (empty range), kModulesOverlap (its
  /// range overlaps a module already present; `value` = m.range.begin).
  Expected<void> add(const Module& m) noexcept;
  /// Removes the module whose range starts at `begin`; false if none.
  bool remove(std::uint64_t begin) noexcept;
  /// Removes every module.
  void clear() noexcept;

  /// The module whose range contains runtime `pc`, or null. O(log n).
  /// Async-signal-safe.
  const Module* find(std::uint64_t pc) const noexcept;

  std::span<const Module> modules() const noexcept { return {storage_.data(), size_}; }
  std::size_t capacity() const noexcept { return storage_.size(); }
  /// Changes whenever the set of modules changes; never 0.
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::span<Module> storage_;
  std::size_t size_ = 0;
  std::uint64_t generation_ = 0;
};

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

/// Why a walk ended. The frame that could not be stepped over is the last
/// frame written.
#define SFRAME_STOP_REASONS(X)                                                                   \
  X(kOutermost, "reached the outermost frame (RA undefined, errata 2)")                          \
  X(kNoSFrameForPc, "no module or no SFrame FDE covers the PC")                                   \
  X(kCfaNotIncreasing, "the CFA did not move up the stack")                                       \
  X(kUnreadableMemory, "a stack read failed")                                                     \
  X(kDepthLimit, "the frame buffer is full")                                                      \
  X(kBadRule, "a rule needs an unknown register, or the SFrame data failed to decode")           \
  X(kZeroPc, "the PC of frame 0 or a recovered return address is 0")
enum class StopReason : std::uint8_t {
#define SFRAME_X(name, msg) name,
  SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
};

/// Identifier of a stop reason, e.g. "kOutermost"; never null.
constexpr std::string_view stop_reason_name(StopReason r) noexcept {
  switch (r) {
#define SFRAME_X(name, msg) \
  case StopReason::name:    \
    return #name;
    SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}
/// Short English description of a stop reason.
constexpr std::string_view describe(StopReason r) noexcept {
  switch (r) {
#define SFRAME_X(name, msg) \
  case StopReason::name:    \
    return msg;
    SFRAME_STOP_REASONS(SFRAME_X)
#undef SFRAME_X
  }
  return "unknown";
}

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

#include "sframe/detail/unwind_step.hpp"  // IWYU pragma: export

#pragma GCC visibility pop
