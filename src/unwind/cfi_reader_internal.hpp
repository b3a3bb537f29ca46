// SPDX-License-Identifier: MIT
// sframepp (private): what the three parts of the single-pass DWARF CFI
// reader share: the DW_CFA/DW_OP codes, the bounded cursor, the parsed CIE
// and FDE records, the register-rule state and the Reader itself.
//   cfi_reader_records.cpp  CIE and FDE records (DWARF 5 §6.4.1, LSB 5.0)
//   cfi_reader_execute.cpp  the DW_CFA interpreter (DWARF 5 §6.4.2) and the
//                           translation of its rows (§6.4.3) to SFrame rows
//   cfi_reader.cpp          the drivers: the section scan (read_cfi) and
//                           the one-FDE reader (FdeReader)
// Hidden visibility like the rest of the library; no API promise.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sframe/format/byte_order.hpp"
#include "sframe/format/detail/scratch.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "translate.hpp"

namespace sframe::cfi::reader_impl {

using detail::Loc;

// DW_CFA_* (DWARF 5 §7.24, plus the GNU and AArch64 extensions).
enum : std::uint8_t {
  kNop = 0x00,
  kSetLoc = 0x01,
  kAdvanceLoc1 = 0x02,
  kAdvanceLoc2 = 0x03,
  kAdvanceLoc4 = 0x04,
  kOffsetExtended = 0x05,
  kRestoreExtended = 0x06,
  kUndefined = 0x07,
  kSameValue = 0x08,
  kRegister = 0x09,
  kRememberState = 0x0a,
  kRestoreState = 0x0b,
  kDefCfa = 0x0c,
  kDefCfaRegister = 0x0d,
  kDefCfaOffset = 0x0e,
  kDefCfaExpression = 0x0f,
  kExpression = 0x10,
  kOffsetExtendedSf = 0x11,
  kDefCfaSf = 0x12,
  kDefCfaOffsetSf = 0x13,
  kValOffset = 0x14,
  kValOffsetSf = 0x15,
  kValExpression = 0x16,
  kMipsAdvanceLoc8 = 0x1d,
  kGnuWindowSave = 0x2d,  // DW_CFA_AARCH64_negate_ra_state on AArch64
  kGnuArgsSize = 0x2e,
  kGnuNegativeOffsetExtended = 0x2f,
  kAdvanceLoc = 0x40,
  kOffset = 0x80,
  kRestore = 0xc0,
};

// DW_OP_* the recognized rule forms use (DWARF 5 §7.7.1).
enum : std::uint8_t {
  kOpDeref = 0x06,
  kOpPlusUconst = 0x23,
  kOpReg0 = 0x50,
  kOpReg31 = 0x6f,
  kOpBreg0 = 0x70,
  kOpBreg31 = 0x8f,
  kOpRegx = 0x90,
  kOpBregx = 0x92,
  kOpCallFrameCfa = 0x9c,
  kOpStackValue = 0x9f,
};

// Register numbers past this are rejected as libdw rejects them (its
// register table is indexed by them); real ABIs use fewer than 200.
constexpr std::uint64_t kMaxRegno = 0x0ffffffe;
// Register numbers from here on name no register of any ABI's DWARF
// numbering (x86-64 psABI and AADWARF64 stay under 200); counted in
// CfiStats::large_regno.
constexpr std::uint64_t kLargeRegno = 0x10000;

// A bounded little/big-endian reader over [p, end).
struct Cursor {
  const std::uint8_t* p;
  const std::uint8_t* end;
  bool big;
  // A LEB128 (or a DW_CFA_set_loc or advance_loc1/2/4 operand) ran into the
  // end: libdw keeps what it read of a LEB128 and reads the others past it.
  bool short_leb = false;
  // A LEB128 of more than 10 bytes (libdw decodes at most 10 and reads the
  // rest as what follows) or past 64 bits (CfiStats::long_leb).
  bool long_leb = false;

  std::size_t left() const { return static_cast<std::size_t>(end - p); }
  bool u8(std::uint8_t& v) {
    if (p >= end) return false;
    v = *p++;
    return true;
  }
  // n: 1, 2, 4 or 8.
  bool word(unsigned n, std::uint64_t& v) {
    if (left() < n) return false;
    v = endian::load(reinterpret_cast<const std::byte*>(p), n, endian::order(big));
    p += n;
    return true;
  }
  bool uleb(std::uint64_t& v) {
    v = 0;
    bool overflow = false;
    for (unsigned shift = 0; p < end;) {
      const std::uint8_t b = *p++;
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      // Bits past 64: a value no field here can hold (DWARF 5 §7.6 sets no
      // length, so zero padding is fine); refused rather than cut.
      if ((shift >= 64 && (b & 0x7f)) || (shift == 63 && (b & 0x7e))) overflow = true;
      if (shift < 77) shift += 7;  // bounded: a LEB128 may run for the whole section
      if (shift > 70) long_leb = true;
      if (!(b & 0x80)) {
        if (overflow) long_leb = true;  // libdw keeps the low 64 bits
        return !overflow;
      }
    }
    short_leb = true;
    return false;
  }
  bool sleb(std::int64_t& out) {
    std::uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
      if (p >= end) {
        short_leb = true;
        return false;
      }
      const std::uint8_t b = *p++;
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      if (shift < 77) shift += 7;  // bounded: a LEB128 may run for the whole section
      if (shift > 70) long_leb = true;
      if (!(b & 0x80)) {
        if (shift < 64 && (b & 0x40)) v |= ~std::uint64_t{0} << shift;
        break;
      }
    }
    out = static_cast<std::int64_t>(v);
    return true;
  }
};

// What a source-independent reader needs of the source.
struct Ctx {
  const CfiSource* src;
  const std::uint8_t* base;  // bytes[0]
};

// A CFI record's header (DWARF 5 §6.4.1, §7.4; LSB 5.0 §10.6.1): the
// initial length, 32-bit or 0xffffffff and a 64-bit length; the CIE id or
// pointer after it is `id_size` bytes wide.
struct RecordHeader {
  std::uint64_t length = 0;  // bytes after the length field
  unsigned id_size = 4;      // 4, or 8 in the 64-bit DWARF format
};

// The id that marks a CIE: 0 in .eh_frame (LSB 5.0 §10.6.1.1), all ones in
// .debug_frame (DWARF 5 §6.4.1).
constexpr std::uint64_t cie_id_of(bool eh, unsigned id_size) {
  return eh ? 0 : (id_size == 4 ? 0xffffffffu : ~std::uint64_t{0});
}

// A register's rule while the program runs (DWARF 5 §6.4.1).
struct RegRule {
  enum Kind : std::uint8_t { kUnspecified, kUndef, kSame, kOff, kValOff, kReg, kExpr, kValExpr };
  Kind kind = kUnspecified;
  std::uint64_t value = 0;           // offset (data-aligned) or register
  const std::uint8_t* expr = nullptr;  // kExpr/kValExpr: the block
  std::uint64_t expr_len = 0;
};

// The CFA rule (DWARF 5 §6.4.1: register + offset, or an expression).
struct CfaRule {
  enum Kind : std::uint8_t { kUnset, kRegOff, kExpr, kInvalid };
  Kind kind = kUnset;
  std::uint64_t reg = 0;
  std::uint64_t offset = 0;
  const std::uint8_t* expr = nullptr;
  std::uint64_t expr_len = 0;
};

// The columns SFrame needs: CFA, RA, FP, and the AArch64 RA signing state.
struct State {
  CfaRule cfa;
  RegRule ra;
  RegRule fp;
  bool mangled = false;
};

struct Cie {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;  // of the record, length field included (0: no readable length)
  bool ok = false;
  bool signal = false;
  std::uint8_t fde_enc = 0;  // 'R'; absptr without it
  bool has_z = false;
  std::uint64_t code_align = 1;
  std::int64_t data_align = 1;
  const std::uint8_t* insns = nullptr;
  const std::uint8_t* insns_end = nullptr;
  State initial;
};

struct Fde {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  const std::uint8_t* insns = nullptr;
  const std::uint8_t* insns_end = nullptr;
  std::uint32_t cie = 0;       // index into the CIE table
  std::uint32_t order = 0;     // source, then section order
};

// Decoded DW_OP for the rule forms (one op: atom and up to two operands).
struct Op {
  std::uint8_t atom = 0;
  std::uint64_t a = 0;
  std::uint64_t b = 0;
};

// Defined in cfi_reader_records.cpp.
bool record_header(Cursor& c, RecordHeader& h);
bool read_encoded(Cursor& c, std::uint8_t enc, const Ctx& x, bool range, std::uint64_t& out);

// Defined in cfi_reader_execute.cpp.
bool same_by_default(Abi abi, std::uint64_t reg);
State abi_initial_state(Abi abi);
bool cfa_defined_in(const std::uint8_t* p, const std::uint8_t* end);

// A translated row and the state it came from.
struct MemoEntry {
  State state;
  bool signal = false;
  bool used = false;
  Row row;
};

// Runs the reader over all sources; see read_cfi().
class Reader {
 public:
  Reader(Abi abi, CfiStats* stats) : abi_(abi), stats_(stats) {
    ra_col_ = detail::ra_column(abi);
    fp_col_ = abi_regs(abi).fp;
    fixed_ra_ = abi == Abi::kAmd64Little ? -8 : 0;
    aarch64_ = abi == Abi::kAarch64Little || abi == Abi::kAarch64Big;
    ra_same_ = same_by_default(abi, ra_col_);
    fp_same_ = same_by_default(abi, fp_col_);
  }

  // Room for the FDEs of `srcs` before scan() reads them, so that the list
  // is not grown by doubling (each step a copy; those under 64 KiB come
  // from the heap and stay there as resident holes). Compiled code's FDEs
  // average about 40 bytes (libc 41, libLLVM-14 53): one per 32 bytes errs
  // on the large side, which costs address space only (scratch.hpp).
  void reserve(std::span<const CfiSource> srcs) {
    std::size_t bytes = 0;
    for (const CfiSource& s : srcs) bytes += s.bytes.size();
    fdes_.reserve(bytes / 32);
  }
  Expected<void> scan(const CfiSource& src, std::uint32_t source_index);
  // Makes scan() pass every FDE record to `fn` (for_each_fde_record()).
  void list_records(const std::function<void(const FdeRecord&)>* fn) { listing_ = fn; }
  void run(const std::function<void(const Function&)>& fn);
  // The FDE record at byte `off` of `src` alone (FdeReader), its rows cut
  // at `stop`. Errors: kBadCfi at `off`.
  Expected<const Function*> one(const CfiSource& src, std::uint64_t off, std::uint64_t stop, Function& f);

 private:
  // Parses the CIE at `off` of the current source; its index in cies_.
  std::uint32_t cie_at(const Ctx& x, std::uint64_t off);
  // The fields of the FDE record whose CIE pointer `id` is at `id_at`
  // (`c` just past it, bounded by `rec_end`); false when they or its CIE
  // cannot be read. `f.cie` is its CIE's index (UINT32_MAX: the pointer
  // leads outside the section) either way.
  bool fde_fields(const Ctx& x, Cursor& c, std::uint64_t id, std::uint64_t id_at, const std::uint8_t* rec_end, Fde& f);
  // Runs `fde`'s program into `f`, rows cut at `stop`; false when it gives
  // no row (counted unreadable).
  bool rows_of(const Fde& fde, std::uint64_t stop, Function& f);
  // Runs instructions [p, end) on `s`; `rows` (FDE programs) emits rows.
  // False when an instruction cannot be read (the rest is unreadable).
  bool execute(const Cie& cie, const Ctx* x, const std::uint8_t* p, const std::uint8_t* end, State& s, bool in_cie,
               std::uint64_t& loc, std::uint64_t& emitted, std::uint64_t stop, Function* f);
  // The row for [from, to) with state `s` appended to `f`. Inline: it runs
  // for every row, and the memo hit is a few loads and compares.
  void emit(const Cie& cie, const State& s, std::uint64_t from, std::uint64_t to, Function& f, bool& dirty) {
    if (dirty || f.rows.empty()) {
      // Functions repeat a few states (CFA = SP + 8, 16, ...; FP saved or
      // not): their translations are kept in a small direct-mapped table (a
      // collision costs a translation, never a wrong row: same_state()
      // decides).
      std::uint64_t h = s.cfa.offset * 0x9e3779b97f4a7c15ull;
      h ^= (s.cfa.reg + 31 * s.ra.value + 977 * s.fp.value) * 0xc2b2ae3d27d4eb4full;
      h ^= (std::uint64_t{s.cfa.kind} << 1) ^ (std::uint64_t{s.ra.kind} << 5) ^ (std::uint64_t{s.fp.kind} << 9) ^
           (std::uint64_t{s.mangled} << 13) ^ (std::uint64_t{cie.signal} << 14) ^
           reinterpret_cast<std::uintptr_t>(s.cfa.expr) ^ reinterpret_cast<std::uintptr_t>(s.ra.expr) ^
           reinterpret_cast<std::uintptr_t>(s.fp.expr);
      MemoEntry& m = memo_[(h ^ (h >> 29)) % kMemoSize];
      // Stays valid until the next translation: only translate_into() writes
      // the table.
      last_row_ = same_state(s, cie.signal, m) ? &m.row : &translate_into(m, cie, s);
      dirty = false;
    }
    Row& r = f.rows.emplace_back(*last_row_);
    r.start = from;
    r.end = to;
  }
  // The memo entry `m` set to state `s` and its translation.
  const Row& translate_into(MemoEntry& m, const Cie& cie, const State& s);
  static bool same_rule(const RegRule& a, const RegRule& b) {
    return a.kind == b.kind && a.value == b.value && a.expr == b.expr && a.expr_len == b.expr_len;
  }
  static bool same_state(const State& a, bool a_signal, const MemoEntry& m) {
    const State& b = m.state;
    return m.used && a_signal == m.signal && a.mangled == b.mangled && a.cfa.kind == b.cfa.kind &&
           a.cfa.reg == b.cfa.reg && a.cfa.offset == b.cfa.offset && a.cfa.expr == b.cfa.expr &&
           a.cfa.expr_len == b.cfa.expr_len && same_rule(a.ra, b.ra) && same_rule(a.fp, b.fp);
  }

  Abi abi_;
  CfiStats* stats_;
  std::uint16_t ra_col_ = 0, fp_col_ = 0;
  std::int8_t fixed_ra_ = 0;
  bool aarch64_ = false, ra_same_ = false, fp_same_ = false;
  std::vector<Cie> cies_;
  std::vector<const CfiSource*> cie_src_;
  // Transient (one read): its own pages, unmapped after (scratch.hpp).
  std::vector<Fde, sframe::detail::ScratchAllocator<Fde>> fdes_;
  std::vector<const CfiSource*> srcs_;
  // Ranges of FDEs whose start and range read but whose rest did not.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> bad_ranges_;
  // The CIE table of the source being scanned, by offset.
  std::unordered_map<std::uint64_t, std::uint32_t> by_offset_;
  std::uint32_t last_cie_ = UINT32_MAX;
  State stack_[kMaxRememberDepth];
  static constexpr std::size_t kMemoSize = 64;
  MemoEntry memo_[kMemoSize];
  const Row* last_row_ = nullptr;
  const std::function<void(const FdeRecord&)>* listing_ = nullptr;
  std::uint32_t translations_ = 0;  // emit()'s translations so far (Row::translation)
  // The program execute() runs (its state tells why it stopped).
  Cursor cur_{nullptr, nullptr, false};
  bool dirty_ = true;
};

}  // namespace sframe::cfi::reader_impl
