// SPDX-License-Identifier: MIT
// sframepp: the DWARF CFI reader's interpreter (see cfi_reader_internal.hpp):
// the DW_CFA instructions (DWARF 5 §6.4.2), the register-rule forms SFrame
// can hold, and each row's translation (§6.4.3).
#include "cfi_reader_internal.hpp"

namespace sframe::cfi::reader_impl {

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

// The instructions define the CFA (DW_CFA_def_cfa, _sf, _expression) in
// their first bytes, as every compiler's CIE does: a quick look, for
// CfiStats::abi_default_cfa only.
bool cfa_defined_in(const std::uint8_t* p, const std::uint8_t* end) {
  for (; p < end && *p == kNop; ++p) {
  }
  return p < end && (*p == kDefCfa || *p == kDefCfaSf || *p == kDefCfaExpression);
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
  // part of the LEB128 it read (CfiStats::truncated_fdes).
  const auto cut_operand = [&](const std::uint8_t* e, std::uint64_t len) {
    Op ops[3];
    std::size_t n = 0;
    bool cut = false, long_leb = false;
    decode_ops(e, len, src.big_endian, ops, 3, n, &cut, &long_leb);
    if (cut && stats_) ++stats_->truncated_fdes;
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
  // Done once the rows reach `stop`: checked here and after each advance,
  // the only step that moves `emitted` (not before every instruction).
  if (!in_cie && emitted >= stop) return true;
  while (c.p < c.end) {
    std::uint8_t op = *c.p++;
    std::uint64_t reg = 0, u = 0;
    std::int64_t sv = 0;
    switch (op & 0xc0) {
      case kAdvanceLoc:
        if (!advance(loc + (op & 0x3f) * cie.code_align)) return false;
        if (emitted >= stop) return true;
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
        if (emitted >= stop) return true;
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
        if (emitted >= stop) return true;
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
    // DW_CFA_restore: back to "the rule assigned it by the initial_instructions
    // in the CIE" (DWARF 5 §6.4.2.3). Inside those instructions that is the
    // rule they have assigned so far: no change. GNU as 2.47 writes one there
    // when a function's CFI starts with .cfi_restore (libdw refuses it:
    // CfiStats::cie_restore).
    if (reg >= kLargeRegno && stats_) ++stats_->large_regno;
    if (reg >= kMaxRegno) return false;
    if (in_cie) {
      if (stats_) ++stats_->cie_restore;
      continue;
    }
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

const Row& Reader::translate_into(MemoEntry& m, const Cie& cie, const State& s) {
  const CfiSource& src = *srcs_.back();
  const bool big = src.big_endian;
  m.row = detail::translate(cfa_of(s.cfa, big), loc_of(s.ra, big, ra_same_), loc_of(s.fp, big, fp_same_), cie.signal,
                            s.mangled, abi_, fixed_ra_);
  // Numbered for Row::translation; past 2^32 - 1 translations, 0.
  m.row.translation = translations_ < UINT32_MAX ? ++translations_ : 0;
  m.state = s;
  m.signal = cie.signal;
  m.used = true;
  return m.row;
}

}  // namespace sframe::cfi::reader_impl
