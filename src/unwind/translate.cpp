// SPDX-License-Identifier: MIT
// sframepp: CFI rules -> SFrame row (see translate.hpp).
#include "translate.hpp"

namespace sframe::cfi::detail {

std::uint16_t ra_column(Abi abi) {
  switch (abi) {
    case Abi::kAmd64Little: return 16;
    case Abi::kAarch64Big:
    case Abi::kAarch64Little: return 30;
    case Abi::kS390xBig: return 14;
  }
  return 0;
}

Row translate(const std::optional<Rule>& cfa, const Loc& ra, const Loc& fp, bool signal, bool ra_mangled, Abi abi,
              std::int8_t fixed_ra) {
  Row row;
  row.signal = signal;
  const AbiRegs regs = abi_regs(abi);
  FrameRow& r = row.row;
  // A row SFrame cannot hold in any version.
  const auto fail = [&](Reason why) {
    row.reason = why;
    row.flex = false;
    return row;
  };
  if (ra.kind == Loc::Kind::kUndefined) {
    // Outermost frame (errata 2): nothing else matters.
    r.cfa.kind = r.ra.kind = Rule::Kind::kUndefined;
    return row;
  }
  // The RA's signing state (AArch64 PAuth, DW_CFA_AARCH64_negate_ra_state)
  // goes with the row as GNU as writes it (spec v3 §2.4.1 mangled-RA bit).
  r.ra_mangled = ra_mangled;
  if (!cfa) return fail(Reason::kCfaExpression);
  if (abi == Abi::kS390xBig && (cfa->offset - 160) % 8 != 0) return fail(Reason::kCfaExpression);
  r.cfa = *cfa;
  if (cfa->deref || (cfa->regnum != regs.sp && cfa->regnum != regs.fp)) {
    row.flex = true;
    row.reason = cfa->deref ? Reason::kCfaDeref : Reason::kCfaRegister;
  }
  const auto note_flex = [&](Reason why) {
    if (!row.flex) row.reason = why;
    row.flex = true;
  };
  // RA.
  if (ra.kind == Loc::Kind::kSame) {
    if (fixed_ra != 0) return fail(Reason::kUnsupportedRule);
    r.ra.kind = Rule::Kind::kUnchanged;
  } else if (ra.kind == Loc::Kind::kRule) {
    // val_offset: RA = CFA + N. A FLEX control word for it would be 0, the
    // padding word (spec v3 §2.4.2), so no SFrame version can say it.
    if (ra.rule.base == Rule::Base::kCfa && !ra.rule.deref) return fail(Reason::kUnsupportedRule);
    r.ra = ra.rule;
    const bool at_cfa = ra.rule.base == Rule::Base::kCfa && ra.rule.deref;
    // At the header's fixed offset the encoder stores no RA word.
    const bool at_fixed = fixed_ra != 0 && at_cfa && ra.rule.offset == fixed_ra;
    if (!at_fixed && (!at_cfa || fixed_ra != 0 || ra.rule.offset == 0))
      note_flex(at_cfa ? Reason::kRaNotAtFixedOffset : Reason::kRegisterRule);
  } else {
    return fail(Reason::kUnsupportedRule);
  }
  // FP: an undefined (clobbered) FP leaves nothing to recover; keep it.
  if (fp.kind == Loc::Kind::kSame || fp.kind == Loc::Kind::kUndefined) {
    r.fp.kind = Rule::Kind::kUnchanged;
  } else if (fp.kind == Loc::Kind::kRule) {
    if (fp.rule.base == Rule::Base::kCfa && !fp.rule.deref) return fail(Reason::kUnsupportedRule);  // as for RA
    r.fp = fp.rule;
    if (!(fp.rule.base == Rule::Base::kCfa && fp.rule.deref)) note_flex(Reason::kRegisterRule);
  } else {
    return fail(Reason::kUnsupportedRule);
  }
  // (A saved FP with an unchanged, tracked RA: the encoder writes a padding
  // RA word before it, SFRAME_FRE_RA_OFFSET_INVALID.)
  return row;
}

}  // namespace sframe::cfi::detail
