// SPDX-License-Identifier: MIT
// sframepp: the single-pass DWARF CFI reader (see sframe/cfi_reader.hpp).
//
// Records: DWARF 5 §6.4.1 (.debug_frame: CIE id 0xffffffff, or all ones in
// 64-bit DWARF; the CIE pointer is an offset from the section start) and the
// LSB 5.0 .eh_frame form (CIE id 0; the CIE pointer counts back from its own
// field; pointers encoded with DW_EH_PE_*; a zero length ends the section).
// Instructions: DWARF 5 §6.4.2. Rows: DWARF 5 §6.4.3 - a row holds from its
// location to the next location an instruction moves to; the state at a PC
// is the one left by all instructions before the first advance past it.
#include "sframe/byte_order.hpp"
#include "sframe/cfi_reader.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "translate.hpp"

namespace sframe::cfi {

std::string_view describe(Reason r) {
  switch (r) {
    case Reason::kNone: return "representable";
    case Reason::kCfaExpression: return "CFA is a DWARF expression SFrame cannot express";
    case Reason::kCfaRegister: return "CFA based on a register other than SP/FP (needs a v3 FLEX FDE)";
    case Reason::kCfaDeref: return "CFA found by dereference, e.g. DRAP (needs a v3 FLEX FDE)";
    case Reason::kRaNotAtFixedOffset: return "RA not at the ABI's fixed CFA offset (needs a v3 FLEX FDE)";
    case Reason::kRegisterRule: return "RA or FP kept in a register or by expression (needs a v3 FLEX FDE)";
    case Reason::kUnsupportedRule: return "register rule SFrame cannot express";
    case Reason::kUnsupportedMachine: return "machine has no SFrame ABI";
    case Reason::kNoRow: return "part of the function has no CFI row";
    case Reason::kCfiTooLong: return "CFI program too long to interpret within the work bound (rows x bytes)";
    case Reason::kTooFarForV2: return "function too far from the SFrame section for v2's 32-bit start field (use v3)";
  }
  return "unknown";
}

namespace {

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

// Reads the header at `c` and bounds `c` to the record. False when the length cannot be read (`h.length` is then 0) or runs
// past the section (`h.length` holds it).
bool record_header(Cursor& c, RecordHeader& h) {
  h = RecordHeader{};
  if (!c.word(4, h.length)) return false;
  if (h.length == 0xffffffff) {
    h.id_size = 8;
    if (!c.word(8, h.length)) {
      h.length = 0;
      return false;
    }
  }
  if (h.length > c.left()) return false;
  c.end = c.p + h.length;
  return true;
}

// The id that marks a CIE: 0 in .eh_frame (LSB 5.0 §10.6.1.1), all ones in
// .debug_frame (DWARF 5 §6.4.1).
constexpr std::uint64_t cie_id_of(bool eh, unsigned id_size) {
  return eh ? 0 : (id_size == 4 ? 0xffffffffu : ~std::uint64_t{0});
}

// Reads a DW_EH_PE_* encoded pointer at `c` (LSB 5.0 §10.5.1). `range`:
// the value format only (FDE address ranges). nullopt: omitted, unknown
// or past the end.
bool read_encoded(Cursor& c, std::uint8_t enc, const Ctx& x, bool range, std::uint64_t& out) {
  if (enc == 0xff) return false;  // DW_EH_PE_omit
  const unsigned asize = x.src->address_size;
  const std::uint64_t field = x.src->address + static_cast<std::uint64_t>(c.p - x.base);
  if (!range && (enc & 0x70) == 0x50) {
    // DW_EH_PE_aligned: an absolute pointer at the next aligned address.
    // GCC knows it as a whole encoding (libgcc's unwind-pe.h tests for it
    // by equality). With a value format or DW_EH_PE_indirect beside it,
    // readers part ways: libgcc reads that format unaligned (base 0), libdw
    // aligns to the format's size (elfutils libdw/encoded-value.h), LSB 5.0
    // §10.5.1 says an address-unit boundary. No defined meaning: unreadable.
    if (enc != 0x50) return false;
    const std::uint64_t mis = field % asize;
    if (mis != 0) {
      if (c.left() < asize - mis) return false;
      c.p += asize - mis;
    }
    return c.word(asize, out);
  }
  std::uint64_t v = 0;
  switch (enc & 0x0f) {
    case 0x00: if (!c.word(asize, v)) return false; break;  // absptr
    case 0x01: if (!c.uleb(v)) return false; break;
    case 0x02: if (!c.word(2, v)) return false; break;
    case 0x03: if (!c.word(4, v)) return false; break;
    case 0x04: if (!c.word(8, v)) return false; break;
    case 0x08:  // DW_EH_PE_signed: an address-sized signed value
      if (!c.word(asize, v)) return false;
      if (asize == 4) v = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(v)});
      break;
    case 0x09: {
      std::int64_t s = 0;
      if (!c.sleb(s)) return false;
      v = static_cast<std::uint64_t>(s);
      break;
    }
    case 0x0a:
      if (!c.word(2, v)) return false;
      v = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int16_t>(v)});
      break;
    case 0x0b:
      if (!c.word(4, v)) return false;
      v = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(v)});
      break;
    case 0x0c: if (!c.word(8, v)) return false; break;
    default: return false;
  }
  if (!range) {
    switch (enc & 0x70) {
      case 0x00: break;
      case 0x10: v += field; break;             // pcrel
      case 0x20: v += x.src->text_base; break;  // textrel
      case 0x30: v += x.src->data_base; break;  // datarel
      default: return false;                    // funcrel: no function here
    }
  }
  if (asize == 4) v &= 0xffffffffu;
  if (!range && (enc & 0x80)) {
    // DW_EH_PE_indirect: the value is the address of an address-sized
    // pointer holding the real one (LSB 5.0 §10.5.1; libgcc's unwinder
    // loads it at run time). Only a pointer inside this CFI section can be
    // read here, as libdw reads it (elfutils libdw/encoded-value.h); any
    // other is unreadable. FDE ranges are never indirect.
    const std::uint64_t size = x.src->bytes.size();
    if (v < x.src->address || size < asize || v - x.src->address > size - asize) return false;
    Cursor at{x.base + (v - x.src->address), x.base + size, x.src->big_endian};
    return at.word(asize, out);
  }
  out = v;
  return true;
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

// Decodes up to `max` ops of an expression block; false if an op is not one
// the rule forms use, the block holds more, or an operand is truncated
// (then `*cut` is set, if given).
bool decode_ops(const std::uint8_t* p, std::uint64_t len, bool big, Op* ops, std::size_t max, std::size_t& n,
                bool* cut = nullptr, bool* long_leb = nullptr) {
  Cursor c{p, p + len, big};
  n = 0;
  // `cut`: an operand ran into the block's end; `long_leb`: an operand's
  // LEB128 is longer than 10 bytes (CfiStats::long_leb).
  const auto done = [&](bool ok) {
    if (cut && !ok) *cut = c.short_leb;
    if (long_leb) *long_leb = c.long_leb;
    return ok;
  };
  while (c.p < c.end) {
    if (n == max) return done(false);
    Op& op = ops[n++];
    if (!c.u8(op.atom)) return done(false);
    std::int64_t s = 0;
    if (op.atom >= kOpBreg0 && op.atom <= kOpBreg31) {
      if (!c.sleb(s)) return done(false);
      op.a = static_cast<std::uint64_t>(s);
    } else if (op.atom == kOpBregx) {
      if (!c.uleb(op.a) || !c.sleb(s)) return done(false);
      op.b = static_cast<std::uint64_t>(s);
    } else if (op.atom == kOpRegx || op.atom == kOpPlusUconst) {
      if (!c.uleb(op.a)) return done(false);
    } else if (!((op.atom >= kOpReg0 && op.atom <= kOpReg31) || op.atom == kOpDeref || op.atom == kOpCallFrameCfa ||
                 op.atom == kOpStackValue)) {
      return done(false);
    }
  }
  return done(true);
}

bool is_breg(const Op& op) { return op.atom == kOpBregx || (op.atom >= kOpBreg0 && op.atom <= kOpBreg31); }
std::uint64_t breg_reg(const Op& op) { return op.atom == kOpBregx ? op.a : op.atom - kOpBreg0; }
std::int64_t breg_off(const Op& op) { return static_cast<std::int64_t>(op.atom == kOpBregx ? op.b : op.a); }

// Register rules as location descriptions (DWARF 5 §6.4.1): offset(N) is
// [call_frame_cfa, plus_uconst N] (the CFA alone for 0), val_offset adds
// stack_value, register(R) is [regx R], expression(E) is E evaluated with
// the CFA pushed, val_expression the same as a value. Recognized: CFA+N and
// reg+N, as addresses or values, and registers.
Loc recognize(const Op* ops, std::size_t n, bool value) {
  Loc out;
  if (n > 0 && ops[n - 1].atom == kOpStackValue) {
    value = true;
    --n;
  }
  const auto reg16 = [](std::uint64_t r) { return r <= 0xffff; };
  if (n == 0) {
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kCfa, 0, 0, !value);
  } else if (n == 1 && ops[0].atom == kOpPlusUconst && detail::fits32(static_cast<std::int64_t>(ops[0].a))) {
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kCfa, 0, static_cast<std::int32_t>(ops[0].a), !value);
  } else if (n == 1 && is_breg(ops[0]) && reg16(breg_reg(ops[0])) && detail::fits32(breg_off(ops[0]))) {
    out.kind = Loc::Kind::kRule;
    out.rule = make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(breg_reg(ops[0])),
                         static_cast<std::int32_t>(breg_off(ops[0])), !value);
  }
  return out;
}

// A register's rule as translate() takes it. `same_default`: what an
// unspecified rule means (the ABI's callee-saved registers keep their value,
// others are undefined, as libdw's ABI initial state says).
Loc loc_of(const RegRule& r, bool big, bool same_default) {
  Loc out;
  switch (r.kind) {
    case RegRule::kUnspecified: out.kind = same_default ? Loc::Kind::kSame : Loc::Kind::kUndefined; return out;
    case RegRule::kUndef: out.kind = Loc::Kind::kUndefined; return out;
    case RegRule::kSame: out.kind = Loc::Kind::kSame; return out;
    case RegRule::kOff:
    case RegRule::kValOff: {
      const auto off = static_cast<std::int64_t>(r.value);
      if (!detail::fits32(off)) return out;
      out.kind = Loc::Kind::kRule;
      out.rule = make_rule(Rule::Base::kCfa, 0, static_cast<std::int32_t>(off), r.kind == RegRule::kOff);
      return out;
    }
    case RegRule::kReg:
      if (r.value > 0xffff) return out;
      out.kind = Loc::Kind::kRule;
      out.rule = make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(r.value), 0, false);
      return out;
    case RegRule::kExpr:
    case RegRule::kValExpr: {
      Op ops[3];
      std::size_t n = 0;
      if (!decode_ops(r.expr, r.expr_len, big, ops, 3, n)) return out;
      // A val_expression whose own last op is stack_value is a value of a
      // value: not a form we recognize.
      if (r.kind == RegRule::kValExpr && n > 0 && ops[n - 1].atom == kOpStackValue) return out;
      return recognize(ops, n, r.kind == RegRule::kValExpr);
    }
  }
  return out;
}

// The CFA rule as an SFrame rule: reg + offset, or *(reg + offset) (DRAP).
std::optional<Rule> cfa_of(const CfaRule& c, bool big) {
  if (c.kind == CfaRule::kRegOff) {
    const auto off = static_cast<std::int64_t>(c.offset);
    if (c.reg > 0xffff || !detail::fits32(off)) return std::nullopt;
    return make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(c.reg), static_cast<std::int32_t>(off), false);
  }
  if (c.kind != CfaRule::kExpr) return std::nullopt;
  Op ops[2];
  std::size_t n = 0;
  if (!decode_ops(c.expr, c.expr_len, big, ops, 2, n) || n == 0) return std::nullopt;
  const bool deref = n == 2;
  if (deref && ops[1].atom != kOpDeref) return std::nullopt;
  if (!is_breg(ops[0]) || breg_reg(ops[0]) > 0xffff || !detail::fits32(breg_off(ops[0]))) return std::nullopt;
  return make_rule(Rule::Base::kRegister, static_cast<std::uint16_t>(breg_reg(ops[0])),
                   static_cast<std::int32_t>(breg_off(ops[0])), deref);
}

// Whether a register the CFI gives no rule keeps its value ("same value")
// rather than being undefined, among the RA and FP columns: the ABIs' call
// preserved registers (x86-64 psABI: %rbp, and the return address column
// as the caller left it; AAPCS64: x29, and x30, which holds the return
// address at entry; s390x ELF ABI: %r11 and %r14).
// libdw's ABI initial states say the same.
bool same_by_default(Abi abi, std::uint64_t reg) {
  switch (abi) {
    case Abi::kAmd64Little: return reg == 6 || reg == 16;
    case Abi::kAarch64Big:
    case Abi::kAarch64Little: return reg == 29 || reg == 30;
    case Abi::kS390xBig: return reg == 11 || reg == 14;
  }
  return false;
}

// The state before a CIE's initial instructions: AArch64's CFA starts as
// SP + 0 (the AArch64 DWARF ABI, AADWARF64, defines the CFA as the SP at
// the call site); elsewhere every CIE defines it (unset: no CFA).
State abi_initial_state(Abi abi) {
  State s;
  if (abi == Abi::kAarch64Little || abi == Abi::kAarch64Big) {
    s.cfa.kind = CfaRule::kRegOff;
    s.cfa.reg = 31;
    s.cfa.offset = 0;
  }
  return s;
}

// A translated row and the state it came from.
struct MemoEntry {
  State state;
  bool signal = false;
  bool used = false;
  Row row;
};

// The instructions define the CFA (DW_CFA_def_cfa, _sf, _expression) in
// their first bytes, as every compiler's CIE does: a quick look, for
// CfiStats::abi_default_cfa only.
bool cfa_defined_in(const std::uint8_t* p, const std::uint8_t* end) {
  for (; p < end && *p == kNop; ++p) {
  }
  return p < end && (*p == kDefCfa || *p == kDefCfaSf || *p == kDefCfaExpression);
}

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

  Expected<void> scan(const CfiSource& src, std::uint32_t source_index);
  void run(const std::function<void(const Function&)>& fn);
  // The FDE record at byte `off` of `src` alone (FdeReader), its rows cut
  // at `stop`. Errors: kBadCfi at `off`.
  Expected<const Function*> one(const CfiSource& src, std::uint64_t off, std::uint64_t stop, Function& f);

 private:
  // Parses the CIE at `off` of the current source; its index in cies_.
  std::uint32_t cie_at(const Ctx& x, std::uint64_t off);
  // The fields of the FDE record whose CIE pointer `id` is at `id_at`
  // (`c` just past it, bounded by `rec_end`); false when they or its CIE
  // cannot be read.
  bool fde_fields(const Ctx& x, Cursor& c, std::uint64_t id, std::uint64_t id_at, const std::uint8_t* rec_end, Fde& f);
  // Runs `fde`'s program into `f`, rows cut at `stop`; false when it gives
  // no row (counted unreadable).
  bool rows_of(const Fde& fde, std::uint64_t stop, Function& f);
  // Runs instructions [p, end) on `s`; `rows` (FDE programs) emits rows.
  // False when an instruction cannot be read (the rest is unreadable).
  bool execute(const Cie& cie, const Ctx* x, const std::uint8_t* p, const std::uint8_t* end, State& s, bool in_cie,
               std::uint64_t& loc, std::uint64_t& emitted, std::uint64_t stop, Function* f);
  void emit(const Cie& cie, const State& s, std::uint64_t from, std::uint64_t to, Function& f, bool& dirty);

  Abi abi_;
  CfiStats* stats_;
  std::uint16_t ra_col_ = 0, fp_col_ = 0;
  std::int8_t fixed_ra_ = 0;
  bool aarch64_ = false, ra_same_ = false, fp_same_ = false;
  std::vector<Cie> cies_;
  std::vector<const CfiSource*> cie_src_;
  std::vector<Fde> fdes_;
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
  // The program execute() runs (its state tells why it stopped).
  Cursor cur_{nullptr, nullptr, false};
  bool dirty_ = true;
};

std::uint32_t Reader::cie_at(const Ctx& x, std::uint64_t off) {
  // Most FDEs use the CIE of the FDE before them.
  if (last_cie_ != UINT32_MAX && cies_[last_cie_].offset == off && cie_src_[last_cie_] == x.src) return last_cie_;
  if (auto it = by_offset_.find(off); it != by_offset_.end()) return last_cie_ = it->second;
  const auto index = static_cast<std::uint32_t>(cies_.size());
  last_cie_ = index;
  by_offset_.emplace(off, index);
  cies_.emplace_back();
  cie_src_.push_back(x.src);
  Cie& cie = cies_.back();
  cie.offset = off;
  const CfiSource& src = *x.src;
  const std::uint8_t* end = x.base + src.bytes.size();
  Cursor c{x.base + off, end, src.big_endian};
  RecordHeader h;
  std::uint64_t id = 0;
  if (!record_header(c, h) || h.length < h.id_size || !c.word(h.id_size, id)) return index;
  if (id != cie_id_of(src.kind == CfiKind::kEhFrame, h.id_size)) return index;
  std::uint8_t version = 0;
  if (!c.u8(version) || !(version == 1 || version == 3 || version == 4)) return index;
  const auto* aug = c.p;
  while (c.p < c.end && *c.p != 0) ++c.p;
  if (c.p >= c.end) return index;
  const std::string_view augmentation(reinterpret_cast<const char*>(aug), static_cast<std::size_t>(c.p - aug));
  ++c.p;
  if (version == 4) {
    std::uint8_t asize = 0, seg = 0;
    // The ELF class fixes the size of an address: a CIE claiming another
    // (DWARF 5 §6.4.1 lets it differ only for targets ELF cannot describe)
    // is refused, as libgcc refuses it (its CIE reader wants the target's
    // pointer size), rather than read with widths its FDEs' writer and every
    // other reader disagree on (libdw reads .eh_frame pointers at the ELF
    // class's width whatever the CIE says).
    if (!c.u8(asize) || !c.u8(seg) || seg != 0 || asize != src.address_size) return index;
  }
  if (!c.uleb(cie.code_align) || !c.sleb(cie.data_align)) return index;
  std::uint64_t ra = 0;
  if (version == 1) {
    std::uint8_t r = 0;
    if (!c.u8(r)) return index;
  } else if (!c.uleb(ra)) {
    return index;
  }
  if (!augmentation.empty()) {
    if (augmentation[0] != 'z') return index;  // "eh" and others: their data cannot be skipped
    cie.has_z = true;
    std::uint64_t alen = 0;
    if (!c.uleb(alen) || alen > c.left()) return index;
    Cursor a{c.p, c.p + alen, src.big_endian};
    c.p += alen;
    for (std::size_t i = 1; i < augmentation.size(); ++i) {
      std::uint8_t enc = 0;
      std::uint64_t ignored = 0;
      bool known = true;
      switch (augmentation[i]) {
        case 'R':
          if (!a.u8(enc)) return index;
          cie.fde_enc = enc;
          break;
        case 'L':
          if (!a.u8(enc)) return index;
          break;
        case 'P':
          // The personality routine's pointer: read only to skip it.
          if (!a.u8(enc) || !read_encoded(a, static_cast<std::uint8_t>(enc & 0x7f), x, false, ignored)) return index;
          break;
        case 'S': cie.signal = true; break;
        case 'B': break;  // AArch64 BTI-protected frames: nothing for unwinding
        default: known = false; break;  // 'z' says how long the rest is
      }
      if (!known) break;
    }
  }
  cie.insns = c.p;
  // Its header fields too (alignment factors, RA column, augmentation
  // length): libdw parses the rest of the CIE from other bytes.
  if (c.long_leb && stats_) ++stats_->long_leb;
  cie.insns_end = c.end;
  // The CIE's initial instructions, once, from the ABI's initial state.
  State s = abi_initial_state(abi_);
  std::uint64_t loc = 0, emitted = 0;
  const bool read = execute(cie, &x, cie.insns, cie.insns_end, s, true, loc, emitted, 0, nullptr);
  if (cur_.long_leb && stats_) ++stats_->long_leb;
  if (!read) return index;
  cie.initial = s;
  cie.ok = true;
  // An AArch64 CIE that leaves the CFA register to the ABI: libdw's ABI
  // state says x30 + 0 there (elfutils backends/aarch64_cfi.c, against its
  // own comment and AADWARF64, which say SP); ours says SP + 0. Also when the
  // CIE then changes only the offset (DW_CFA_def_cfa_offset).
  if (aarch64_ && stats_ && s.cfa.kind == CfaRule::kRegOff && s.cfa.reg == 31 &&
      !cfa_defined_in(cie.insns, cie.insns_end))
    ++stats_->abi_default_cfa;
  return index;
}

Expected<void> Reader::scan(const CfiSource& src, std::uint32_t source_index) {
  if (src.address_size != 4 && src.address_size != 8) return make_error(CfiErrc::kBadCfi, 0, src.address_size);
  srcs_.push_back(&src);
  by_offset_.clear();
  const auto* base = reinterpret_cast<const std::uint8_t*>(src.bytes.data());
  const Ctx x{&src, base};
  const std::uint64_t size = src.bytes.size();
  const bool eh = src.kind == CfiKind::kEhFrame;
  std::uint32_t order = 0;
  bool zeros_before = false;  // .debug_frame: zero length words before this record
  for (std::uint64_t off = 0; off < size;) {
    Cursor c{base + off, base + size, src.big_endian};
    RecordHeader h;
    if (!record_header(c, h)) return make_error(CfiErrc::kBadCfi, off, h.length != 0 ? h.length : size - off);
    const std::uint64_t len = h.length;
    if (len == 0 && h.id_size == 4) {
      if (eh) break;  // the zero terminator (LSB 5.0)
      // DWARF 5 §6.4.1 gives a zero length no meaning in .debug_frame:
      // skipped as binutils' readelf skips it, and the records after it read.
      off += 4;
      zeros_before = true;
      continue;
    }
    if (zeros_before && stats_) ++stats_->debug_frame_zero_length;
    zeros_before = false;
    const unsigned id_size = h.id_size;
    const std::uint8_t* rec_end = c.end;
    const std::uint64_t next = static_cast<std::uint64_t>(rec_end - base);
    const std::uint64_t id_at = static_cast<std::uint64_t>(c.p - base);
    std::uint64_t id = 0;
    if (len < id_size + 1 || !c.word(id_size, id)) {
      // Too short to hold its CIE id or pointer and one byte more (a CIE's
      // version, an FDE's initial location): neither CIE nor FDE (DWARF 5
      // §6.4.1), a record we cannot read, even when nothing refers to it.
      // libdw's linear FDE search stops at it (libdw/dwarf_next_cfi.c
      // rejects it before it knows where the next record starts).
      if (stats_) ++stats_->unreadable;
      off = next;
      continue;
    }
    if (id == cie_id_of(eh, id_size)) {
      off = next;
      continue;
    }
    if (stats_) ++stats_->fdes;
    Fde f;
    const bool ok = fde_fields(x, c, id, id_at, rec_end, f);
    if (!ok) {
      if (stats_) ++stats_->unreadable;
    } else if (f.end > f.start) {
      f.order = order++;
      (void)source_index;
      fdes_.push_back(f);
    }
    off = next;
  }
  return {};
}

bool Reader::fde_fields(const Ctx& x, Cursor& c, std::uint64_t id, std::uint64_t id_at, const std::uint8_t* rec_end,
                        Fde& f) {
  const CfiSource& src = *x.src;
  const auto* base = x.base;
  const std::uint64_t size = src.bytes.size();
  const bool eh = src.kind == CfiKind::kEhFrame;
  // An FDE: find its CIE.
  const std::uint64_t cie_off = eh ? id_at - id : id;
  const bool cie_in_range = eh ? id <= id_at : id < size;
  const std::uint32_t ci = cie_in_range ? cie_at(x, cie_off) : UINT32_MAX;
  bool ok = ci != UINT32_MAX && cies_[ci].ok;
  if (ok) {
    const Cie& cie = cies_[ci];
    std::uint64_t range = 0;
    const std::uint8_t enc = eh || cie.has_z ? cie.fde_enc : 0;
    // `where`: the initial location and range read; `fits`: all fields.
    const auto fields = [&](Cursor& k, bool& fits, bool& where) {
      std::uint64_t alen = 0;
      where = read_encoded(k, enc, x, false, f.start) && read_encoded(k, enc, x, true, range);
      f.end = where ? f.start + (src.address_size == 4 ? range & 0xffffffffu : range) : f.start;
      fits = where && (!cie.has_z || (k.uleb(alen) && alen <= k.left()));
      if (fits && cie.has_z) k.p += alen;
    };
    Cursor whole{c.p, base + size, src.big_endian};
    bool where = false;
    fields(c, ok, where);
    if (c.long_leb && stats_) ++stats_->long_leb;  // the augmentation length
    // Its range is known though the rest is not: kept to tell overlaps.
    if (!ok && f.end > f.start && stats_) bad_ranges_.push_back({f.start, f.end});
    if (!ok && !where && stats_) {
      // Would its location and range read with the bytes after the
      // record? (libdw reads them there.)
      bool all = false, beyond = false;
      fields(whole, all, beyond);
      stats_->truncated += beyond;
    }
    if (ok && src.address_size == 4) range &= 0xffffffffu;
    f.end = f.start + range;
    if (ok && f.end < f.start) ok = false;  // wraps the address space
    f.insns = c.p;
    f.insns_end = rec_end;
    f.cie = ci;
  }
  return ok;
}

bool Reader::execute(const Cie& cie, const Ctx* x, const std::uint8_t* p, const std::uint8_t* end, State& s,
                     bool in_cie, std::uint64_t& loc, std::uint64_t& emitted, std::uint64_t stop, Function* f) {
  const CfiSource& src = *x->src;
  Cursor& c = cur_;
  c = Cursor{p, end, src.big_endian};
  unsigned depth = 0;
  bool& dirty = dirty_;
  // A register rule for column `reg`, if SFrame needs that column.
  const auto column = [&](std::uint64_t reg) -> RegRule* {
    if (reg == ra_col_) return &s.ra;
    if (reg == fp_col_) return &s.fp;
    return nullptr;
  };
  const auto set = [&](std::uint64_t reg, RegRule::Kind k, std::uint64_t v) {
    // libdw keeps a rule's offset in a 61-bit signed bitfield: CfiStats::wide_offset.
    constexpr std::int64_t kLimit = std::int64_t{1} << 60;
    if ((k == RegRule::kOff || k == RegRule::kValOff) && stats_ &&
        (static_cast<std::int64_t>(v) < -kLimit || static_cast<std::int64_t>(v) >= kLimit))
      ++stats_->wide_offset;
    // Counted before the refusal: libdw accepts 0x0ffffffe itself.
    if (reg >= kLargeRegno && stats_) ++stats_->large_regno;
    if (reg >= kMaxRegno) return false;
    if (RegRule* r = column(reg)) {
      r->kind = k;
      r->value = v;
      dirty = true;
    }
    return true;
  };
  // An expression block that ends inside an operand of its ops (DWARF 5
  // §2.5 gives it no meaning): ours leaves the rule out, libdw applies the
  // part of the LEB128 it read (CfiStats::truncated).
  const auto cut_operand = [&](const std::uint8_t* e, std::uint64_t len) {
    Op ops[3];
    std::size_t n = 0;
    bool cut = false, long_leb = false;
    decode_ops(e, len, src.big_endian, ops, 3, n, &cut, &long_leb);
    if (cut && stats_) ++stats_->truncated;
    // libdw decodes 10 bytes of it and the rest as further operations.
    if (long_leb && stats_) ++stats_->long_leb;
  };
  // Moves to `to`: the state so far holds for [emitted, to).
  const auto advance = [&](std::uint64_t to) {
    if (in_cie) return false;  // a CIE has no location to move
    loc = to;
    if (loc > emitted) {
      const std::uint64_t row_end = std::min(loc, stop);
      emit(cie, s, emitted, row_end, *f, dirty);
      emitted = row_end;
    }
    return true;
  };
  while (c.p < c.end) {
    if (!in_cie && emitted >= stop) return true;
    std::uint8_t op = *c.p++;
    std::uint64_t reg = 0, u = 0;
    std::int64_t sv = 0;
    switch (op & 0xc0) {
      case kAdvanceLoc:
        if (!advance(loc + (op & 0x3f) * cie.code_align)) return false;
        continue;
      case kOffset:
        if (!c.uleb(u)) return false;
        if (!set(op & 0x3f, RegRule::kOff, u * static_cast<std::uint64_t>(cie.data_align))) return false;
        continue;
      case kRestore:
        reg = op & 0x3f;
        goto restore;
      default: break;
    }
    switch (op) {
      case kNop: continue;
      case kSetLoc: {
        std::uint64_t to = 0;
        const std::uint8_t enc = src.kind == CfiKind::kEhFrame || cie.has_z ? cie.fde_enc : 0;
        if (!read_encoded(c, enc, *x, false, to)) {
          c.short_leb = true;  // libdw reads a set_loc operand past the program's end
          return false;
        }
        if (!advance(to)) return false;
        continue;
      }
      case kAdvanceLoc1:
      case kAdvanceLoc2:
      case kAdvanceLoc4:
      case kMipsAdvanceLoc8: {
        const unsigned n = op == kAdvanceLoc1 ? 1 : op == kAdvanceLoc2 ? 2 : op == kAdvanceLoc4 ? 4 : 8;
        if (!c.word(n, u)) {
          c.short_leb = true;  // libdw reads the delta past the program's end
          return false;
        }
        if (!advance(loc + u * cie.code_align)) return false;
        continue;
      }
      case kOffsetExtended:
        if (!c.uleb(reg) || !c.uleb(u) || !set(reg, RegRule::kOff, u * static_cast<std::uint64_t>(cie.data_align)))
          return false;
        continue;
      case kOffsetExtendedSf:
        if (!c.uleb(reg) || !c.sleb(sv) ||
            !set(reg, RegRule::kOff, static_cast<std::uint64_t>(sv) * static_cast<std::uint64_t>(cie.data_align)))
          return false;
        continue;
      case kGnuNegativeOffsetExtended:
        if (!c.uleb(reg) || !c.uleb(u) ||
            !set(reg, RegRule::kOff, (0 - u) * static_cast<std::uint64_t>(cie.data_align)))
          return false;
        continue;
      case kValOffset:
        if (!c.uleb(reg) || !c.uleb(u) ||
            !set(reg, RegRule::kValOff, u * static_cast<std::uint64_t>(cie.data_align)))
          return false;
        continue;
      case kValOffsetSf:
        if (!c.uleb(reg) || !c.sleb(sv) ||
            !set(reg, RegRule::kValOff, static_cast<std::uint64_t>(sv) * static_cast<std::uint64_t>(cie.data_align)))
          return false;
        continue;
      case kRestoreExtended:
        if (!c.uleb(reg)) return false;
        goto restore;
      case kUndefined:
        if (!c.uleb(reg) || !set(reg, RegRule::kUndef, 0)) return false;
        continue;
      case kSameValue:
        if (!c.uleb(reg) || !set(reg, RegRule::kSame, 0)) return false;
        continue;
      case kRegister:
        if (!c.uleb(reg) || !c.uleb(u) || !set(reg, RegRule::kReg, u)) return false;
        continue;
      case kRememberState:
        if (depth == kMaxRememberDepth) {
          if (stats_) ++stats_->deep_remember;  // a bound of ours: libdw reads on
          return false;
        }
        stack_[depth++] = s;
        continue;
      case kRestoreState:
        if (depth == 0) return false;
        s = stack_[--depth];
        dirty = true;
        continue;
      case kDefCfa:
        if (!c.uleb(reg) || !c.uleb(u)) return false;
        s.cfa.kind = CfaRule::kRegOff;
        s.cfa.reg = reg;
        s.cfa.offset = u;
        dirty = true;
        continue;
      case kDefCfaSf:
        if (!c.uleb(reg) || !c.sleb(sv)) return false;
        s.cfa.kind = CfaRule::kRegOff;
        s.cfa.reg = reg;
        s.cfa.offset = static_cast<std::uint64_t>(sv) * static_cast<std::uint64_t>(cie.data_align);
        dirty = true;
        continue;
      case kDefCfaRegister:
        if (!c.uleb(reg)) return false;
        // Only a register + offset CFA has a register to change.
        if (s.cfa.kind != CfaRule::kRegOff) s.cfa.kind = CfaRule::kInvalid;
        s.cfa.reg = reg;
        dirty = true;
        continue;
      case kDefCfaOffset:
        if (!c.uleb(u)) return false;
        if (s.cfa.kind != CfaRule::kRegOff) s.cfa.kind = CfaRule::kInvalid;
        s.cfa.offset = u;
        dirty = true;
        continue;
      case kDefCfaOffsetSf:
        if (!c.sleb(sv)) return false;
        if (s.cfa.kind != CfaRule::kRegOff) s.cfa.kind = CfaRule::kInvalid;
        s.cfa.offset = static_cast<std::uint64_t>(sv) * static_cast<std::uint64_t>(cie.data_align);
        dirty = true;
        continue;
      case kDefCfaExpression:
        if (!c.uleb(u) || u > c.left()) return false;
        cut_operand(c.p, u);
        s.cfa.kind = CfaRule::kExpr;
        s.cfa.expr = c.p;
        s.cfa.expr_len = u;
        c.p += u;
        dirty = true;
        continue;
      case kExpression:
      case kValExpression: {
        if (!c.uleb(reg) || !c.uleb(u) || u > c.left()) return false;
        // An empty block leaves the pushed CFA as its result (DWARF 5
        // §6.4.2; libgcc's execute_stack_op returns that initial entry);
        // libdw reports it as undefined (CfiStats::empty_expression).
        if (u == 0 && column(reg) && stats_) ++stats_->empty_expression;
        if (column(reg)) cut_operand(c.p, u);
        const std::uint8_t* e = c.p;
        c.p += u;
        if (!set(reg, op == kExpression ? RegRule::kExpr : RegRule::kValExpr, 0)) return false;
        if (RegRule* r = column(reg)) {
          r->expr = e;
          r->expr_len = u;
        }
        continue;
      }
      case kGnuWindowSave:
        // AArch64: DW_CFA_AARCH64_negate_ra_state toggles whether the RA is
        // signed (AADWARF64). Elsewhere the opcode is SPARC's register window
        // save as GCC defines it: registers 8-15 are found in 24-31, and
        // 16-31 are saved at the CFA, one address-sized slot each; x86-64
        // and s390x code never has it, but it means that there too.
        if (aarch64_) {
          s.mangled = !s.mangled;
        } else {
          for (RegRule* r : {&s.ra, &s.fp}) {
            const std::uint64_t col = r == &s.ra ? ra_col_ : fp_col_;
            if (col >= 8 && col < 16) {
              r->kind = RegRule::kReg;
              r->value = col + 16;
            } else if (col >= 16 && col < 32) {
              r->kind = RegRule::kOff;
              r->value = (col - 16) * src.address_size;
            }
          }
        }
        dirty = true;
        continue;
      case kGnuArgsSize:
        if (!c.uleb(u)) return false;  // the bytes of outgoing arguments: no rule changes
        continue;
      default:
        return false;  // an opcode DWARF 5 does not define
    }
  restore:
    // DW_CFA_restore: back to the CIE's initial rule (not in a CIE).
    if (reg >= kLargeRegno && stats_) ++stats_->large_regno;
    if (in_cie || reg >= kMaxRegno) return false;
    if (reg == ra_col_) {
      s.ra = cie.initial.ra;
      dirty = true;
    } else if (reg == fp_col_) {
      s.fp = cie.initial.fp;
      dirty = true;
    }
  }
  return true;
}

bool same_rule(const RegRule& a, const RegRule& b) {
  return a.kind == b.kind && a.value == b.value && a.expr == b.expr && a.expr_len == b.expr_len;
}

bool same_state(const State& a, bool a_signal, const MemoEntry& m) {
  const State& b = m.state;
  return m.used && a_signal == m.signal && a.mangled == b.mangled && a.cfa.kind == b.cfa.kind &&
         a.cfa.reg == b.cfa.reg && a.cfa.offset == b.cfa.offset && a.cfa.expr == b.cfa.expr &&
         a.cfa.expr_len == b.cfa.expr_len && same_rule(a.ra, b.ra) && same_rule(a.fp, b.fp);
}

void Reader::emit(const Cie& cie, const State& s, std::uint64_t from, std::uint64_t to, Function& f, bool& dirty) {
  if (dirty || f.rows.empty()) {
    // Functions repeat a few states (CFA = SP + 8, 16, ...; FP saved or
    // not): their translations are kept in a small direct-mapped table.
    std::uint64_t h = s.cfa.offset * 0x9e3779b97f4a7c15ull;
    h ^= (s.cfa.reg + 31 * s.ra.value + 977 * s.fp.value) * 0xc2b2ae3d27d4eb4full;
    h ^= (std::uint64_t{s.cfa.kind} << 1) ^ (std::uint64_t{s.ra.kind} << 5) ^ (std::uint64_t{s.fp.kind} << 9) ^
         (std::uint64_t{s.mangled} << 13) ^ (std::uint64_t{cie.signal} << 14) ^
         reinterpret_cast<std::uintptr_t>(s.cfa.expr) ^ reinterpret_cast<std::uintptr_t>(s.ra.expr) ^
         reinterpret_cast<std::uintptr_t>(s.fp.expr);
    MemoEntry& m = memo_[(h ^ (h >> 29)) % kMemoSize];
    if (!same_state(s, cie.signal, m)) {
      const CfiSource& src = *srcs_.back();
      const bool big = src.big_endian;
      m.row = detail::translate(cfa_of(s.cfa, big), loc_of(s.ra, big, ra_same_), loc_of(s.fp, big, fp_same_),
                                cie.signal, s.mangled, abi_, fixed_ra_);
      m.state = s;
      m.signal = cie.signal;
      m.used = true;
    }
    // Stays valid until the next translation: only this writes the table.
    last_row_ = &m.row;
    dirty = false;
  }
  Row& r = f.rows.emplace_back(*last_row_);
  r.start = from;
  r.end = to;
}

void Reader::run(const std::function<void(const Function&)>& fn) {
  // Linkers mostly write FDEs in address order: check before sorting.
  const auto by_start = [](const Fde& a, const Fde& b) { return a.start < b.start; };
  if (!std::is_sorted(fdes_.begin(), fdes_.end(), by_start)) std::stable_sort(fdes_.begin(), fdes_.end(), by_start);
  Function f;
  for (std::size_t i = 0; i < fdes_.size(); ++i) {
    const Fde& fde = fdes_[i];
    if (i > 0 && fdes_[i - 1].start == fde.start) {
      if (stats_) ++stats_->duplicates;
      continue;
    }
    std::size_t j = i + 1;
    while (j < fdes_.size() && fdes_[j].start == fde.start) ++j;
    const std::uint64_t next = j < fdes_.size() ? fdes_[j].start : UINT64_MAX;
    const std::uint64_t stop = std::min(fde.end, next);
    if (stats_ && fde.end > next) ++stats_->overlapping;
    // Overlapping an FDE left out (it read as far as its range).
    if (stats_ && !bad_ranges_.empty())
      for (const auto& [lo, hi] : bad_ranges_)
        if (lo < fde.end && fde.start < hi) {
          ++stats_->overlapping;
          break;
        }
    if (!rows_of(fde, stop, f)) continue;
    fn(f);
  }
}

bool Reader::rows_of(const Fde& fde, std::uint64_t stop, Function& f) {
  const Cie& cie = cies_[fde.cie];
  f.start = fde.start;
  f.rows.clear();
  State s = cie.initial;
  std::uint64_t loc = fde.start, emitted = fde.start;
  dirty_ = true;
  // The source the FDE came from decodes its expressions' byte order.
  const CfiSource* src = cie_src_[fde.cie];
  srcs_.push_back(src);
  const Ctx x{src, reinterpret_cast<const std::uint8_t*>(src->bytes.data())};
  const bool read = execute(cie, &x, fde.insns, fde.insns_end, s, false, loc, emitted, stop, &f);
  srcs_.pop_back();
  // An operand cut by the program's end: libdw applies what it read.
  if (!read && cur_.short_leb && stats_) ++stats_->truncated;
  if (cur_.long_leb && stats_) ++stats_->long_leb;
  // The end of the program is a move to the FDE's end (DWARF 5 §6.4.3).
  if (read && emitted < stop) {
    emit(cie, s, emitted, stop, f, dirty_);
    emitted = stop;
  }
  if (f.rows.empty()) {
    if (stats_) ++stats_->unreadable;
    return false;
  }
  f.end = emitted;
  return true;
}

Expected<const Function*> Reader::one(const CfiSource& src, std::uint64_t off, std::uint64_t stop, Function& f) {
  // The record as scan() reads it (length, CIE pointer, fields), alone.
  if (src.address_size != 4 && src.address_size != 8) return make_error(CfiErrc::kBadCfi, 0, src.address_size);
  if (srcs_.empty()) srcs_.push_back(&src);
  const auto* base = reinterpret_cast<const std::uint8_t*>(src.bytes.data());
  const Ctx x{&src, base};
  const std::uint64_t size = src.bytes.size();
  if (off >= size) return make_error(CfiErrc::kBadCfi, off, size);
  Cursor c{base + off, base + size, src.big_endian};
  RecordHeader h;
  if (!record_header(c, h) || h.length == 0) return make_error(CfiErrc::kBadCfi, off, h.length);
  const std::uint8_t* rec_end = c.end;
  const std::uint64_t id_at = static_cast<std::uint64_t>(c.p - base);
  std::uint64_t id = 0;
  // Too short for its CIE pointer, or a CIE: not an FDE.
  if (!c.word(h.id_size, id) || id == cie_id_of(src.kind == CfiKind::kEhFrame, h.id_size))
    return make_error(CfiErrc::kBadCfi, off, id);
  Fde fde;
  if (!fde_fields(x, c, id, id_at, rec_end, fde) || fde.end <= fde.start) return make_error(CfiErrc::kBadCfi, off);
  if (!rows_of(fde, stop > fde.start ? std::min(fde.end, stop) : fde.end, f)) return make_error(CfiErrc::kBadCfi, off);
  return &f;
}

}  // namespace

Expected<void> read_cfi(std::span<const CfiSource> srcs, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats) {
  Reader r(abi, stats);
  for (std::size_t i = 0; i < srcs.size(); ++i)
    if (auto ok = r.scan(srcs[i], static_cast<std::uint32_t>(i)); !ok) return ok;
  r.run(fn);
  return {};
}

struct FdeReader::Impl {
  Impl(const CfiSource& s, Abi abi) : src(s), reader(abi, nullptr) {}
  CfiSource src;
  Reader reader;
  Function f;
};

FdeReader::FdeReader(const CfiSource& src, Abi abi) : impl_(std::make_unique<Impl>(src, abi)) {}
FdeReader::FdeReader(FdeReader&&) noexcept = default;
FdeReader& FdeReader::operator=(FdeReader&&) noexcept = default;
FdeReader::~FdeReader() = default;

Expected<const Function*> FdeReader::read(std::uint64_t offset, std::uint64_t stop) {
  return impl_->reader.one(impl_->src, offset, stop, impl_->f);
}

const CfiSource& FdeReader::source() const noexcept { return impl_->src; }

Expected<void> read_cfi(const CfiSource& src, Abi abi, const std::function<void(const Function&)>& fn,
                        CfiStats* stats) {
  return read_cfi(std::span<const CfiSource>(&src, 1), abi, fn, stats);
}

}  // namespace sframe::cfi
