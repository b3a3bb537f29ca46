// SPDX-License-Identifier: MIT
// Helpers shared by the unwinder tests: rules written by hand for the
// encoder, and a one-module map over an encoded section.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <vector>

#include "sframe/format/encode.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe_test {

namespace rule {
inline sframe::Rule reg(std::uint16_t r, std::int32_t off, bool deref = false) {
  return sframe::make_rule(sframe::Rule::Base::kRegister, r, off, deref);
}
/// Saved at CFA + off.
inline sframe::Rule slot(std::int32_t off) { return sframe::make_rule(sframe::Rule::Base::kCfa, 0, off, true); }
/// The header's fixed offset (AMD64 RA at CFA - 8): a CFA slot like any
/// other in the resolved model; the encoder stores it as no word.
inline sframe::Rule fixed(std::int32_t off) { return slot(off); }
inline sframe::Rule kind(sframe::Rule::Kind k) {
  sframe::Rule x;
  x.kind = k;
  return x;
}
inline sframe::Rule unchanged() { return kind(sframe::Rule::Kind::kUnchanged); }
}  // namespace rule

/// A row: CFA, RA, FP (and the PAuth mark).
inline sframe::FrameRow row(sframe::Rule cfa, sframe::Rule ra, sframe::Rule fp, bool mangled = false) {
  sframe::FrameRow r;
  r.cfa = cfa;
  r.ra = ra;
  r.fp = fp;
  r.ra_mangled = mangled;
  return r;
}
/// The outermost row (errata 2: no data words).
inline sframe::FrameRow outermost() {
  sframe::FrameRow r;
  r.cfa = rule::kind(sframe::Rule::Kind::kUndefined);
  r.ra = rule::kind(sframe::Rule::Kind::kUndefined);
  return r;
}

/// An encoded section registered as the only module of a map.
struct OneModule {
  std::vector<std::byte> bytes;
  sframe::Section section;
  std::array<sframe::Module, 4> storage{};
  sframe::ModuleMap map{storage};
};

/// Encodes `spec` (asserting success) and maps it at runtime range `range`
/// with load bias `bias`.
inline std::unique_ptr<OneModule> map_encoded(const sframe::SectionSpec& spec, sframe::AddressRange range,
                                              std::uint64_t bias = 0) {
  auto m = std::make_unique<OneModule>();
  auto enc = sframe::encode(spec);
  EXPECT_TRUE(enc) << (enc ? "" : sframe::describe(enc.error().code()));
  if (!enc) return m;
  m->bytes = std::move(*enc);
  auto s = sframe::Section::parse(m->bytes, spec.section_address);
  EXPECT_TRUE(s);
  if (!s) return m;
  m->section = *s;
  EXPECT_TRUE(sframe::validate(m->section));
  EXPECT_TRUE(m->map.add({range, bias, m->section, nullptr}));
  return m;
}

}  // namespace sframe_test
