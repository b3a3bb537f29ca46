// SPDX-License-Identifier: MIT
#include "support/golden_rows.hpp"

#include <regex>
#include <sstream>
#include <stdexcept>

namespace sframe_test {

GoldenLoc parse_golden_loc(const std::string& token) {
  GoldenLoc l;
  std::string t = token;
  if (t.size() > 3 && t.substr(t.size() - 3) == "[s]") {
    l.mangled = true;
    t.resize(t.size() - 3);
  }
  if (t == "u") return l;
  if (t == "f") { l.kind = GoldenLoc::Kind::kFixed; return l; }
  if (t == "U") { l.kind = GoldenLoc::Kind::kPadWord; return l; }
  static const std::regex re(R"(^(\()?(c|sp|fp|r\d+)([+-]\d+)\)?$)");
  std::smatch m;
  if (!std::regex_match(t, m, re)) throw std::runtime_error("unknown objdump column: " + token);
  const std::string base = m[2];
  l.offset = std::stoll(m[3]);
  if (base == "c") {
    l.kind = GoldenLoc::Kind::kCfaSlot;
    return l;
  }
  l.kind = m[1].matched ? GoldenLoc::Kind::kRegDeref : GoldenLoc::Kind::kRegValue;
  l.reg = base == "sp" ? kGoldenSp : base == "fp" ? kGoldenFp : std::stoi(base.substr(1));
  return l;
}

GoldenSection parse_golden_section(const std::string& text) {
  GoldenSection s;
  std::istringstream in(text);
  std::string line;
  static const std::regex func(R"re(^    func idx \[\d+\]: pc = 0x([0-9a-f]+), size = (\d+) bytes(, attr = "([A-Z]*)")?)re");
  static const std::regex row(R"(^    ([0-9a-f]{16})  +(\S+) +(\S+) +(\S+))");
  static const std::regex fixed(R"(^    CFA fixed (RA|FP) offset: (-?\d+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, fixed)) {
      (m[1] == "RA" ? s.fixed_ra : s.fixed_fp) = std::stoi(m[2]);
    } else if (std::regex_search(line, m, func)) {
      GoldenFunc f;
      f.pc = std::stoull(m[1], nullptr, 16);
      f.size = std::stoull(m[2]);
      f.flex = m[4].matched && std::string(m[4]).find('F') != std::string::npos;
      s.funcs.push_back(f);
    } else if (!s.funcs.empty() && line.rfind("    STARTPC[m]", 0) == 0) {
      s.funcs.back().mask = true;
    } else if (!s.funcs.empty() && std::regex_search(line, m, row)) {
      GoldenRow r;
      r.start = std::stoull(m[1], nullptr, 16);
      r.cfa = parse_golden_loc(m[2]);
      r.fp = parse_golden_loc(m[3]);
      r.ra = parse_golden_loc(m[4]);
      s.funcs.back().rows.push_back(r);
    }
  }
  return s;
}

}  // namespace sframe_test
