// SPDX-License-Identifier: MIT
// gen and verify against the truth of the files' own DWARF CFI and of the
// SFrame sections GNU as/ld made from the same code.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <set>
#include <string>

#include "sframe/cfi/cfi.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "support/corpus.hpp"

namespace {

using namespace sframe;

struct Linked {
  std::string name;
  elf::ElfFile file;
  std::vector<std::byte> bytes;  // gas/ld's section
  std::uint64_t address;
};

std::vector<Linked> linked_files() {
  std::vector<Linked> out;
  for (const auto& c : sframe_test::golden_cases()) {
    const std::string dir = c.dir.filename().string();
    if (dir != "x86_64-v3-linked" && dir != "x86_64-v2-linked") continue;
    auto f = elf::ElfFile::open((c.dir / c.file).string());
    EXPECT_TRUE(f);
    auto d = f->sframe_section();
    EXPECT_TRUE(d);
    std::vector<std::byte> b(d->bytes.begin(), d->bytes.end());
    const std::uint64_t addr = d->address;
    out.push_back({c.name(), std::move(*f), std::move(b), addr});
  }
  return out;
}

TEST(Cfi, GnuSectionsAgreeWithDwarf) {
  auto files = linked_files();
  ASSERT_EQ(files.size(), 14u);
  for (auto& l : files) {
    auto s = Section::parse(l.bytes, l.address);
    ASSERT_TRUE(s);
    auto cmp = cfi::compare(l.file, *s);
    ASSERT_TRUE(cmp) << l.name;
    EXPECT_TRUE(cmp->mismatches.empty()) << l.name << ": " << cmp->mismatches.size() << " mismatches, first at 0x"
                                         << std::hex << (cmp->mismatches.empty() ? 0 : cmp->mismatches[0].pc);
    EXPECT_GT(cmp->pcs_checked, 0u);
  }
}

// v2 start fields are signed 32-bit PC-relative offsets: a section placed
// 4 GiB above the code cannot describe it, so gen v2 leaves every function
// out with that reason (and v3, whose field is 64-bit, keeps them), instead of
// emitting a model the encoder rejects as a whole.
TEST(Cfi, V2SkipsFunctionsTooFarFromTheSection) {
  for (auto& l : linked_files()) {
    const std::uint64_t far = l.address + (std::uint64_t{1} << 32);
    auto v3 = cfi::generate(l.file, Version::kV3, far);
    ASSERT_TRUE(v3) << l.name;
    EXPECT_FALSE(v3->spec.functions.empty()) << l.name;
    EXPECT_TRUE(encode(v3->spec).has_value()) << l.name;
    auto v2 = cfi::generate(l.file, Version::kV2, far);
    ASSERT_TRUE(v2) << l.name;
    EXPECT_TRUE(v2->spec.functions.empty()) << l.name;
    std::size_t too_far = 0;
    for (const auto& sk : v2->skipped) too_far += sk.reason == cfi::Reason::kTooFarForV2;
    // All of v3's DEFAULT functions (v2 leaves FLEX ones out for their rules).
    std::size_t v3_default = 0;
    for (const auto& f : v3->spec.functions) v3_default += f.fde_type == FdeType::kDefault;
    EXPECT_EQ(too_far, v3_default) << l.name;
    EXPECT_GT(too_far, 0u) << l.name;
    EXPECT_TRUE(encode(v2->spec).has_value()) << l.name;
  }
}

TEST(Cfi, GeneratedSectionsAgreeCoverAndAreNoLarger) {
  for (auto& l : linked_files()) {
    auto gas = Section::parse(l.bytes, l.address);
    ASSERT_TRUE(gas);
    auto gas_spec = to_spec(*gas);
    ASSERT_TRUE(gas_spec);
    for (Version v : {Version::kV3, Version::kV2}) {
      auto g = cfi::generate(l.file, v, l.address);
      ASSERT_TRUE(g) << l.name;
      auto bytes = encode(g->spec);
      ASSERT_TRUE(bytes) << l.name;
      auto s = Section::parse(*bytes, l.address);
      ASSERT_TRUE(s);
      ASSERT_TRUE(validate(*s, Strictness::kStrict)) << l.name;
      auto cmp = cfi::compare(l.file, *s);
      ASSERT_TRUE(cmp);
      EXPECT_TRUE(cmp->mismatches.empty()) << l.name << " v" << int(v);
      // Every function gas/ld covered (in a version that can hold it) is covered.
      std::set<std::pair<std::uint64_t, std::uint32_t>> ours;
      for (const auto& f : g->spec.functions) ours.insert({f.start_pc, f.size});
      for (const auto& f : gas_spec->functions) {
        if (v == Version::kV2 && f.fde_type == FdeType::kFlex) continue;
        EXPECT_TRUE(ours.count({f.start_pc, f.size})) << l.name << " misses 0x" << std::hex << f.start_pc;
      }
      // On the functions gas/ld covered, ours is no larger.
      if (v == gas->version()) {
        std::set<std::uint64_t> theirs;
        for (const auto& f : gas_spec->functions) theirs.insert(f.start_pc);
        SectionSpec same = g->spec;
        std::erase_if(same.functions, [&](const FunctionSpec& f) { return !theirs.count(f.start_pc); });
        auto same_bytes = encode(same);
        ASSERT_TRUE(same_bytes);
        EXPECT_LE(same_bytes->size(), gas->used_size()) << l.name;
      }
    }
  }
}

// One FRE changed: verify reports exactly that one.
TEST(Cfi, MutatedFreIsReported) {
  for (auto& l : linked_files()) {
    if (l.name != "x86_64-v3-linked/cxx") continue;
    auto s = Section::parse(l.bytes, l.address);
    ASSERT_TRUE(s);
    std::uint64_t text_lo = 0, text_hi = 0;
    for (const auto& sh : l.file.sections())
      if (sh.name == ".text") text_lo = sh.address, text_hi = sh.address + sh.size;
    // The first FRE of a .text FDE with more than one FRE.
    for (std::uint32_t i = 0; i < s->num_fdes(); ++i) {
      auto f = s->fde(i);
      ASSERT_TRUE(f);
      if (f->start_pc < text_lo || f->start_pc >= text_hi || f->num_fres < 2) continue;
      auto fre = s->fre_at(f->fres_begin, f->fre_type, i, 0);
      ASSERT_TRUE(fre);
      std::vector<std::byte> bad = l.bytes;
      const std::uint32_t at = fre->dataword_offset(0);
      bad[at] = static_cast<std::byte>(static_cast<std::uint8_t>(bad[at]) + 8);
      auto sb = Section::parse(bad, l.address);
      ASSERT_TRUE(sb);
      auto cmp = cfi::compare(l.file, *sb);
      ASSERT_TRUE(cmp);
      ASSERT_EQ(cmp->mismatches.size(), 1u);
      EXPECT_EQ(cmp->mismatches[0].pc, f->start_pc + fre->start_offset);
      EXPECT_EQ(cmp->mismatches[0].what, "CFA");
      return;
    }
    FAIL() << "no suitable FDE";
  }
  FAIL() << "corpus file missing";
}

}  // namespace

namespace {

// FDE start PCs whose CFA readelf shows as an expression ("exp") in some row.
std::set<std::uint64_t> readelf_expression_cfas(const std::string& path) {
  std::set<std::uint64_t> out;
  const std::string cmd = "readelf --debug-dump=frames-interp '" + path + "' 2>/dev/null";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[4096];
  std::uint64_t fde = 0;
  bool in_fde = false;
  while (std::fgets(line, sizeof line, p)) {
    const std::string l = line;
    if (const auto at = l.find(" FDE cie="); at != std::string::npos) {
      const auto pc = l.find("pc=", at);
      in_fde = pc != std::string::npos;
      if (in_fde) fde = std::stoull(l.substr(pc + 3), nullptr, 16);
      continue;
    }
    // Rows: "LOC CFA reg...", LOC in hex.
    char loc[64], cfa[64];
    if (in_fde && std::sscanf(line, "%63s %63s", loc, cfa) == 2 && std::isxdigit(static_cast<unsigned char>(loc[0])) &&
        std::string(cfa) == "exp")
      out.insert(fde);
  }
  pclose(p);
  return out;
}

// A library whose hand-written assembly describes some CFAs by DWARF
// expression (OpenSSL's libcrypto): exactly the functions readelf shows an
// expression CFA for are left out of v3 and reported missing with that reason;
// FLEX covers the rest.
TEST(Cfi, ExpressionCfasAreLeftOutWithTheirReason) {
  const std::string path = "/usr/lib/x86_64-linux-gnu/libcrypto.so.3";
  auto file = elf::ElfFile::open(path);
  ASSERT_TRUE(file) << path << " not installed (scripts/install-deps installs libssl3)";
  std::set<std::uint64_t> want;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> plt;
  for (const auto& sh : file->sections())
    if (sh.name.rfind(".plt", 0) == 0) plt.push_back({sh.address, sh.address + sh.size});
  for (std::uint64_t pc : readelf_expression_cfas(path)) {
    bool in_plt = false;
    for (auto [lo, hi] : plt) in_plt |= pc >= lo && pc < hi;
    if (!in_plt) want.insert(pc);
  }
  ASSERT_FALSE(want.empty()) << "readelf shows no expression CFA";
  auto g = cfi::generate(*file, Version::kV3, 0);
  ASSERT_TRUE(g);
  std::set<std::uint64_t> skipped;
  for (const auto& s : g->skipped) {
    EXPECT_EQ(s.reason, cfi::Reason::kCfaExpression);
    skipped.insert(s.start);
  }
  EXPECT_EQ(skipped, want);
  EXPECT_GT(g->flex_functions, 0u);
  auto bytes = encode(g->spec);
  ASSERT_TRUE(bytes);
  auto s = Section::parse(*bytes, 0);
  ASSERT_TRUE(s);
  auto cmp = cfi::compare(*file, *s);
  ASSERT_TRUE(cmp);
  EXPECT_TRUE(cmp->mismatches.empty());
  EXPECT_FALSE(cmp->missing.empty());
  for (const auto& m : cmp->missing) EXPECT_EQ(m.reason, cfi::Reason::kCfaExpression) << std::hex << m.start;
}

}  // namespace

namespace {

// Assembles and links (GNU as/ld) a program whose functions `kept0`..`kept9`
// have a few CFI rows each and whose last function `huge` has `rows` rows:
// libdw reads each row by running the FDE's program from its start, so
// `huge` alone costs rows x FDE bytes. Returns the executable's path, or ""
// when the tools are missing.
std::string build_many_rows(const std::string& name, int rows) {
  const auto dir = std::filesystem::temp_directory_path() / ("sframepp-cfi-" + name + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string s = ".text\n";
  for (int k = 0; k < 10; ++k)
    s += fmt::format(".globl kept{0}\n.type kept{0},@function\nkept{0}:\n.cfi_startproc\npush %rbp\n"
                     ".cfi_adjust_cfa_offset 8\npop %rbp\n.cfi_adjust_cfa_offset -8\nret\n.cfi_endproc\n",
                     k);
  s += ".globl huge\n.type huge,@function\nhuge:\n.cfi_startproc\n";
  for (int i = 0; i < rows; ++i) s += i % 2 == 0 ? "push %rax\n.cfi_adjust_cfa_offset 8\n" : "pop %rax\n.cfi_adjust_cfa_offset -8\n";
  s += "ret\n.cfi_endproc\n.globl _start\n_start: call huge\nhlt\n";
  const auto src = dir / "many.s";
  FILE* out = std::fopen(src.c_str(), "w");
  if (!out) return "";
  std::fputs(s.c_str(), out);
  std::fclose(out);
  const std::string exe = (dir / "many").string();
  const std::string cmd = fmt::format("as {0} -o {1}.o && ld --eh-frame-hdr -o {1} {1}.o", src.string(), exe);
  return std::system(cmd.c_str()) == 0 ? exe : "";
}

}  // namespace

// An FDE of 20,000 rows (60 KB of CFI), which libdw would read in ~10^9
// steps (one program run per row), is read in one pass: gen keeps all 11
// functions and the huge one has the 20,001 rows GNU as emitted (one per
// push/pop plus the entry row), as readelf lists them.
TEST(Cfi, LongCfiIsReadInOnePass) {
  const std::string exe = build_many_rows("huge", 20000);
  ASSERT_FALSE(exe.empty()) << "GNU as/ld (binutils) failed or not installed";
  auto file = elf::ElfFile::open(exe);
  ASSERT_TRUE(file);
  for (const Version v : {Version::kV2, Version::kV3}) {
    auto g = cfi::generate(*file, v, 0);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->functions_in, 11u);
    ASSERT_EQ(g->spec.functions.size(), 11u);
    EXPECT_TRUE(g->skipped.empty());
    EXPECT_EQ(g->spec.functions.back().rows.size(), 20001u);
    EXPECT_TRUE(encode(g->spec).has_value());
  }
  // libdw, within its work bound, gives up on `huge` (kCfiTooLong), keeping
  // the functions before it.
  std::vector<cfi::Function> ref;
  ASSERT_TRUE(cfi::libdw_functions(*file, [&](const cfi::Function& f) { ref.push_back(f); }));
  ASSERT_EQ(ref.size(), 11u);
  EXPECT_EQ(ref.back().rows.size(), 1u);
  EXPECT_EQ(ref.back().rows[0].reason, cfi::Reason::kCfiTooLong);
  std::filesystem::remove_all(std::filesystem::path(exe).parent_path());
}

// Below libdw's bound the same shape is read in full by both readers:
// 2,000 rows in `huge`, the count GNU as emitted (one row per push/pop, plus
// the entry row), and the two agree row for row.
TEST(Cfi, LongButRealisticCfiIsReadInFull) {
  const std::string exe = build_many_rows("long", 2000);
  ASSERT_FALSE(exe.empty()) << "GNU as/ld (binutils) failed or not installed";
  auto file = elf::ElfFile::open(exe);
  ASSERT_TRUE(file);
  auto fns = cfi::read_functions(*file);
  ASSERT_TRUE(fns);
  ASSERT_EQ(fns->size(), 11u);
  EXPECT_EQ(fns->back().rows.size(), 2001u);
  for (const auto& f : *fns)
    for (const auto& r : f.rows) EXPECT_NE(r.reason, cfi::Reason::kCfiTooLong);
  auto diff = cfi::compare_readers(*file);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->differing_rows, 0u);
  EXPECT_EQ(diff->rows_compared, 2001u + 10 * 3);
  std::filesystem::remove_all(std::filesystem::path(exe).parent_path());
}
