// SPDX-License-Identifier: MIT
// elf::SymbolTable against binutils: for real files of this machine (libc,
// this test program, a C++ program compiled now), every function symbol
// address `nm` lists with a size resolves to a name nm lists at that address,
// and the demangled names equal `nm -C`'s. The alias choice is checked
// against readelf's binding/size/table order and against what eu-stack
// printed for glibc's aliases (openat64 over openat, qsort_r over
// __qsort_r/__GI___qsort_r: found by running eu-stack on a program blocked in
// them).
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"

namespace sframe::elf {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0; }

// One function symbol as binutils prints it.
struct NmSym {
  std::string name;
  std::uint64_t size = 0;
};

// `nm [-D] -S --defined-only [-C]`: address -> function symbols there
// (types T t W w i: text, weak, indirect function). Versions nm appends to
// .dynsym names ("qsort_r@@GLIBC_2.2.5") are removed.
std::map<std::uint64_t, std::vector<NmSym>> nm_functions(const std::string& path, bool dynamic, bool demangle) {
  std::map<std::uint64_t, std::vector<NmSym>> out;
  const std::string cmd = std::string("nm ") + (dynamic ? "-D " : "") + (demangle ? "-C " : "") +
                          "-S --defined-only '" + path + "' 2>/dev/null";
  std::istringstream in(run(cmd));
  std::string line;
  while (std::getline(in, line)) {
    // "ADDR SIZE T NAME" (sized) or "ADDR T NAME".
    std::istringstream ls(line);
    std::string addr, second, third;
    if (!(ls >> addr >> second)) continue;
    std::string type, size = "0";
    if (second.size() == 1) {
      type = second;
    } else {
      size = second;
      if (!(ls >> type)) continue;
    }
    if (type != "T" && type != "t" && type != "W" && type != "w" && type != "i") continue;
    std::string name;
    std::getline(ls >> std::ws, name);
    if (dynamic) name = name.substr(0, name.find('@'));
    out[std::stoull(addr, nullptr, 16)].push_back({name, std::stoull(size, nullptr, 16)});
  }
  return out;
}

std::string strip_version(const std::string& s) { return s.substr(0, s.find('@')); }

// Every sized function address nm lists resolves, at offset 0, to one of the
// names nm lists there; the table holds no function address nm lacks.
// Returns the number of addresses checked.
std::size_t expect_matches_nm(const SymbolTable& t, const std::map<std::uint64_t, std::vector<NmSym>>& nm,
                              bool versioned_names_in_table) {
  std::size_t checked = 0;
  for (const auto& [addr, syms] : nm) {
    bool sized = false;
    for (const auto& s : syms) sized |= s.size > 0;
    if (!sized) continue;
    const auto hit = t.find(addr);
    if (!hit) {
      ADD_FAILURE() << "no symbol at 0x" << std::hex << addr << " (nm: " << syms.front().name << ")";
      continue;
    }
    EXPECT_EQ(hit->offset, 0u) << std::hex << addr;
    const std::string got = versioned_names_in_table ? hit->symbol->name : strip_version(hit->symbol->name);
    bool listed = false;
    for (const auto& s : syms) listed |= s.name == got;
    EXPECT_TRUE(listed) << "0x" << std::hex << addr << ": " << got << " is not among nm's names there";
    ++checked;
  }
  // kPerf adds what perf adds and nm does not list as functions: NAME@plt
  // entries and asm labels (checked against perf script by tests/perf).
  for (const auto& s : t.symbols()) {
    const bool perf_extra = t.policy() == NamingPolicy::kPerf &&
                            (s.type == STT_NOTYPE || s.name.ends_with("@plt"));
    EXPECT_TRUE(perf_extra || nm.count(s.address)) << s.name << " at 0x" << std::hex << s.address << " unknown to nm";
  }
  return checked;
}

std::string libc_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&::getpid), &info) || !info.dli_fname) return {};
  char real[PATH_MAX];
  return realpath(info.dli_fname, real) ? real : "";
}

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

SymbolOptions no_debug_file(NamingPolicy p = NamingPolicy::kEuStack) {
  SymbolOptions o;
  o.policy = p;
  o.use_debug_file = false;
  return o;
}

TEST(Symbols, LibcDynsymMatchesNm) {
  ASSERT_TRUE(have("nm")) << "nm (binutils) not installed: the oracle is missing";
  const std::string path = libc_path();
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f) << path;
  for (const auto policy : {NamingPolicy::kEuStack, NamingPolicy::kPerf}) {
    const auto t = SymbolTable::read(*f, no_debug_file(policy));
    const auto nm = nm_functions(path, /*dynamic=*/true, false);
    ASSERT_GT(nm.size(), 1000u);
    // Does not apply to a libc built with its .symtab (read first, rightly):
    // Debian's libc6 is stripped, so on the CI machine this never skips.
    if (t.source() == SymbolSource::kSymtab) GTEST_SKIP() << "this libc is not stripped";
    EXPECT_EQ(t.source(), SymbolSource::kDynsym);
    EXPECT_GT(expect_matches_nm(t, nm, false), 1000u);
  }
}

// readelf -SW's address and size of section `name` of `path` ({0, 0}:
// none). "  [14] .plt  PROGBITS  0000000000026000 026000 000360 10  AX ..."
std::pair<std::uint64_t, std::uint64_t> readelf_section(const std::string& path, const std::string& name) {
  std::istringstream in(run("readelf -SW '" + path + "'"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line.substr(line.find(']') == std::string::npos ? 0 : line.find(']') + 1));
    std::string n, type, addr, off, size;
    if (ls >> n >> type >> addr >> off >> size && n == name)
      return {std::stoull(addr, nullptr, 16), std::stoull(size, nullptr, 16)};
  }
  return {0, 0};
}

// perf 6.1's PLT naming (util/symbol-elf.c, dso__synthesize_plt_symbols):
// the I-th .rela.plt entry names the I-th 16-byte slot after .plt's 16-byte
// header "SYMBOL@plt"; an entry without a symbol (libc's R_X86_64_IRELATIVE
// IFUNC calls) gives "@plt", what `perf script` prints for a sample there
// (tests/perf/run.sh plt checks that against perf itself). readelf gives
// the entries in table order and the addresses.
TEST(Symbols, LibcIrelativePltSlotsNamedAsPerf) {
  ASSERT_TRUE(have("readelf")) << "readelf (binutils) not installed";
  const std::string path = libc_path();
  const std::uint64_t plt = readelf_section(path, ".plt").first;
  ASSERT_NE(plt, 0u) << "readelf -SW: no .plt in " << path;
  // .rela.plt entries in order: "OFFSET INFO TYPE [VALUE NAME + ADDEND]".
  std::vector<std::pair<std::string, std::string>> entries;  // type, name
  {
    std::istringstream in(run("readelf -rW '" + path + "'"));
    std::string line;
    bool in_plt = false;
    while (std::getline(in, line)) {
      if (line.starts_with("Relocation section")) {
        in_plt = line.find("'.rela.plt'") != std::string::npos;
        continue;
      }
      std::istringstream ls(line);
      std::string off, info, type, value, name;
      if (!in_plt || !(ls >> off >> info >> type) || !type.starts_with("R_X86_64_")) continue;
      if (type != "R_X86_64_IRELATIVE" && ls >> value >> name) name = strip_version(name);
      entries.emplace_back(type, type == "R_X86_64_IRELATIVE" ? "" : name);
    }
  }
  ASSERT_FALSE(entries.empty()) << "readelf -rW: no .rela.plt entries in " << path;
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f) << path;
  for (const bool debug : {false, true}) {
    SymbolOptions o = no_debug_file(NamingPolicy::kPerf);
    o.use_debug_file = debug;
    const auto t = SymbolTable::read(*f, o);
    std::size_t irelative = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::uint64_t slot = plt + 16 + 16 * i;
      for (const std::uint64_t pc : {slot, slot + 6, slot + 15}) {
        const auto hit = t.find(pc);
        ASSERT_TRUE(hit) << std::hex << "0x" << pc << " (.rela.plt entry " << std::dec << i << ", " << entries[i].first
                         << ") has no symbol";
        EXPECT_EQ(hit->symbol->name, entries[i].second + "@plt") << std::hex << "0x" << pc << " (.rela.plt entry "
                                                                   << std::dec << i << ", " << entries[i].first << ")";
        EXPECT_EQ(hit->offset, pc - slot);
      }
      irelative += entries[i].first == "R_X86_64_IRELATIVE";
    }
    EXPECT_GT(irelative, 0u) << "this libc has no IRELATIVE .rela.plt entry: the case is not exercised";
  }
}

// objdump -d's labels in the PLT sections, "ADDR <NAME@plt>:": binutils
// names each .plt/.plt.sec slot and each .plt.got entry by the relocation
// of the GOT entry it jumps through (.rela.plt's, or .rela.dyn's
// R_X86_64_GLOB_DAT for .plt.got), "*ABS*+0xADDEND@plt" for an
// R_X86_64_IRELATIVE one. Address -> label.
std::map<std::uint64_t, std::string> objdump_plt_labels(const std::string& path) {
  std::map<std::uint64_t, std::string> out;
  std::istringstream in(run("objdump -d -j .plt -j .plt.sec -j .plt.got '" + path + "' 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    const auto open = line.find(" <");
    if (open == std::string::npos || !line.ends_with("@plt>:") || line.find_first_not_of("0123456789abcdef") != open)
      continue;
    out[std::stoull(line.substr(0, open), nullptr, 16)] = line.substr(open + 2, line.size() - open - 4);
  }
  return out;
}

// `nm -D --defined-only`: address -> names, and the addresses of IFUNCs (i).
struct DynNames {
  std::map<std::uint64_t, std::set<std::string>> names;
  std::set<std::uint64_t> ifuncs;
};
DynNames nm_dynamic(const std::string& path) {
  DynNames out;
  std::istringstream in(run("nm -D --defined-only '" + path + "' 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type, name;
    if (!(ls >> addr >> type >> name)) continue;
    const std::uint64_t a = std::stoull(addr, nullptr, 16);
    out.names[a].insert(strip_version(name));
    if (type == "i") out.ifuncs.insert(a);
  }
  return out;
}

// PerfPlt::k7_2 against objdump: every PLT label objdump prints names the
// symbol at that address ("__tunable_get_val@plt" for libc's slot whose
// .rela.plt entry is not the slot's index, "free@plt" in .plt.got); an
// IRELATIVE slot whose addend nm -D lists an IFUNC at is named after a name
// nm lists there (perf 7.2's get_ifunc_name). Counts what was checked.
struct PltChecked {
  std::size_t slots = 0, plt_got = 0, irelative = 0;
};
PltChecked expect_perf72_plt_as_objdump(const std::string& path) {
  PltChecked c;
  const auto labels = objdump_plt_labels(path);
  EXPECT_FALSE(labels.empty()) << "objdump -d: no PLT labels in " << path;
  const auto dyn = nm_dynamic(path);
  const auto [plt_got, plt_got_size] = readelf_section(path, ".plt.got");
  const std::uint64_t plt_got_end = plt_got + plt_got_size;
  auto f = ElfFile::open(path);
  EXPECT_TRUE(f) << path;
  if (!f) return c;
  SymbolOptions o = no_debug_file(NamingPolicy::kPerf);
  o.perf_plt = PerfPlt::k7_2;
  const auto t = SymbolTable::read(*f, o);
  const auto t61 = SymbolTable::read(*f, no_debug_file(NamingPolicy::kPerf));
  for (const auto& [addr, label] : labels) {
    const auto hit = t.find(addr);
    if (!hit) {
      ADD_FAILURE() << path << ": no symbol at 0x" << std::hex << addr << " (" << label << ")";
      continue;
    }
    EXPECT_EQ(hit->offset, 0u) << path << " 0x" << std::hex << addr << " " << label;
    ++c.slots;
    if (label.starts_with("*ABS*+0x")) {
      const std::uint64_t addend = std::stoull(label.substr(6), nullptr, 16);
      if (!dyn.ifuncs.count(addend)) continue;
      const auto& names = dyn.names.at(addend);
      const std::string n = hit->symbol->name.substr(0, hit->symbol->name.size() - 4);
      EXPECT_TRUE(hit->symbol->name.ends_with("@plt") && names.count(n))
          << path << " 0x" << std::hex << addr << " " << label << ": " << hit->symbol->name
          << " is not NAME@plt for a name nm -D lists at the IFUNC 0x" << addend;
      ++c.irelative;
      continue;
    }
    EXPECT_EQ(hit->symbol->name, label) << path << " 0x" << std::hex << addr;
    if (addr >= plt_got && addr < plt_got_end) {
      ++c.plt_got;
      // perf 6.1 synthesizes no .plt.got symbols (a sample there: [unknown]).
      const auto old = t61.find(addr);
      EXPECT_FALSE(old && old->symbol->name.ends_with("@plt")) << path << " 0x" << std::hex << addr;
    }
  }
  return c;
}

TEST(Symbols, Perf72PltNamesMatchObjdump) {
  ASSERT_TRUE(have("objdump") && have("nm") && have("readelf")) << "binutils not installed";
  Dl_info info{};
  ASSERT_TRUE(dladdr(reinterpret_cast<const void*>(&std::terminate), &info) && info.dli_fname);
  char real[PATH_MAX];
  ASSERT_TRUE(realpath(info.dli_fname, real)) << info.dli_fname;
  const std::string libstdcxx = real;
  PltChecked all;
  for (const std::string& path : {libc_path(), libstdcxx}) {
    const PltChecked c = expect_perf72_plt_as_objdump(path);
    all.slots += c.slots;
    all.plt_got += c.plt_got;
    all.irelative += c.irelative;
  }
  EXPECT_GT(all.slots, 100u);
  EXPECT_GT(all.plt_got, 2u) << "no .plt.got entry checked (libc's free@plt, malloc@plt; libstdc++'s)";
  EXPECT_GT(all.irelative, 0u) << "libc has no IRELATIVE slot with an IFUNC: the case is not exercised";
  // libc's slot of __tunable_get_val (an R_X86_64_JUMP_SLOT listed before
  // the IRELATIVE entries whose slots come first): readelf -rW's entry.
  const std::string libc = libc_path();
  std::uint64_t got = 0;
  {
    std::istringstream in(run("readelf -rW '" + libc + "'"));
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string off, info_field, type, value, name;
      if (ls >> off >> info_field >> type >> value >> name && type == "R_X86_64_JUMP_SLOT" &&
          name.starts_with("__tunable_get_val@"))
        got = std::stoull(off, nullptr, 16);
    }
  }
  if (got == 0) GTEST_SKIP() << "this libc calls no __tunable_get_val through its PLT";
  const auto labels = objdump_plt_labels(libc);
  std::uint64_t slot = 0;
  for (const auto& [a, l] : labels)
    if (l == "__tunable_get_val@plt") slot = a;
  ASSERT_NE(slot, 0u) << "objdump -d names no __tunable_get_val@plt slot in " << libc;
  auto f = ElfFile::open(libc);
  ASSERT_TRUE(f);
  SymbolOptions o = no_debug_file(NamingPolicy::kPerf);
  o.perf_plt = PerfPlt::k7_2;
  for (const bool debug : {false, true}) {
    o.use_debug_file = debug;
    const auto t = SymbolTable::read(*f, o);
    const auto hit = t.find(slot + 6);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->symbol->name, "__tunable_get_val@plt");
  }
}

// The file named by the build ID, as gdb and eu-stack find it.
std::string debug_file_of(const ElfFile& f) {
  const auto id = build_id(f);
  if (!id) return {};
  const std::string p = "/usr/lib/debug/.build-id/" + id->substr(0, 2) + "/" + id->substr(2) + ".debug";
  return access(p.c_str(), R_OK) == 0 ? p : "";
}

TEST(Symbols, BuildIdMatchesReadelf) {
  ASSERT_TRUE(have("readelf")) << "readelf (binutils) not installed: the oracle is missing";
  const std::string path = libc_path();
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f);
  const auto id = build_id(*f);
  ASSERT_TRUE(id);
  EXPECT_NE(run("readelf -n '" + path + "'").find("Build ID: " + *id), std::string::npos) << *id;
}

// A sequence of notes as the running kernel's /sys/kernel/notes holds them
// (Xen's and Linux's before GNU's), written out by hand.
TEST(Symbols, GnuBuildIdAfterOtherNotesAndCutNotes) {
  std::vector<std::byte> notes;
  const auto word = [&notes](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) notes.push_back(std::byte(v >> (8 * i)));
  };
  const auto text = [&notes](const char* s, std::size_t padded) {
    for (std::size_t i = 0; i < padded; ++i) notes.push_back(std::byte(i < std::strlen(s) ? s[i] : 0));
  };
  word(4), word(4), word(3), text("Xen", 4), word(0x11223344);       // Xen's type 3: not a build ID
  word(6), word(1), word(1), text("Linux", 8), notes.push_back(std::byte{7}), text("", 3);
  word(4), word(5), word(3), text("GNU", 4), text("\x01\x02\x03\xfe\xff", 8);
  EXPECT_EQ(gnu_build_id(notes), "010203feff");
  // Cut inside the GNU note's descriptor, then inside the first note.
  EXPECT_EQ(gnu_build_id(std::span(notes).first(notes.size() - 5)), std::nullopt);
  EXPECT_EQ(gnu_build_id(std::span(notes).first(10)), std::nullopt);
  // Only the last note's padding cut off: still whole.
  EXPECT_EQ(gnu_build_id(std::span(notes).first(notes.size() - 3)), "010203feff");
  // A name size past the end.
  std::vector<std::byte> bad(12);
  bad[0] = std::byte{0xff};
  bad[1] = std::byte{0xff};
  EXPECT_EQ(gnu_build_id(bad), std::nullopt);
}

TEST(Symbols, LibcDebugFileMatchesNmAndEuStack) {
  ASSERT_TRUE(have("nm")) << "nm (binutils) not installed: the oracle is missing";
  const std::string path = libc_path();
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f);
  const std::string dbg = debug_file_of(*f);
  ASSERT_FALSE(dbg.empty()) << "no debug file for " << path << " (scripts/install-deps installs libc6-dbg)";
  const auto t = SymbolTable::read(*f);
  ASSERT_EQ(t.source(), SymbolSource::kDebugFile);
  // The debug file's .symtab, plus .dynsym where it has nothing.
  auto nm = nm_functions(dbg, false, false);
  for (auto& [a, v] : nm_functions(path, true, false))
    if (!nm.count(a)) nm[a] = v;
  EXPECT_GT(expect_matches_nm(t, nm, true), 2000u);

  // What eu-stack printed for frames in these functions (see the top), and
  // what perf script printed for samples in __memmove_avx512_unaligned_erms
  // (perf 6.1 here); perf's qsort_r name follows from its rule (a LOCAL name
  // over a WEAK one, as many leading underscores, the longer name).
  auto address_of = [&](const std::string& name) -> std::uint64_t {
    for (const auto& [a, v] : nm)
      for (const auto& s : v)
        if (s.name == name) return a;
    return 0;
  };
  struct Case {
    const char* any_alias;
    const char* eu_stack;  // "" when not observed
    const char* perf;      // "" when not observed
  };
  SymbolOptions perf;
  perf.policy = NamingPolicy::kPerf;
  const auto tp = SymbolTable::read(*f, perf);
  for (const Case& c : {Case{"qsort_r", "qsort_r", "__GI___qsort_r"}, Case{"openat", "openat64", ""},
                        Case{"__memcpy_avx512_unaligned_erms", "", "__memmove_avx512_unaligned_erms"}}) {
    const std::uint64_t a = address_of(c.any_alias);
    ASSERT_NE(a, 0u) << c.any_alias;
    const auto hit = t.find(a + 1);
    ASSERT_TRUE(hit) << c.any_alias;
    EXPECT_EQ(hit->offset, 1u);
    if (*c.eu_stack) {
      EXPECT_EQ(hit->symbol->name, c.eu_stack);
    }
    const auto hp = tp.find(a + 1);
    ASSERT_TRUE(hp);
    bool listed = false;
    for (const auto& s : nm[a]) listed |= s.name == hp->symbol->name;
    EXPECT_TRUE(listed) << hp->symbol->name;
    if (*c.perf) {
      EXPECT_EQ(hp->symbol->name, c.perf);
    }
  }
}

// perf's last zero-sized symbol (util/symbol.c, symbols__fixup_end) reaches
// the end of the page after the one it starts in: libm's _fini, the last
// function nm lists in its debug file, without a size; perf 6.1 and 7.2
// both print a sample at _fini+4 as "_fini".
TEST(Symbols, PerfLastZeroSizedSymbolReachesNextPage) {
  ASSERT_TRUE(have("nm")) << "nm (binutils) not installed";
  Dl_info info{};
  ASSERT_TRUE(dladdr(reinterpret_cast<const void*>(&::nextafter), &info) && info.dli_fname);
  char real[PATH_MAX];
  ASSERT_TRUE(realpath(info.dli_fname, real)) << info.dli_fname;
  auto f = ElfFile::open(real);
  ASSERT_TRUE(f) << real;
  const std::string dbg = debug_file_of(*f);
  if (dbg.empty()) GTEST_SKIP() << "no debug file for " << real << " (Debian: libc6-dbg)";
  const auto nm = nm_functions(dbg, /*dynamic=*/false, false);
  ASSERT_FALSE(nm.empty()) << dbg;
  const auto& [last, names] = *nm.rbegin();
  if (names.front().size != 0) GTEST_SKIP() << "the last function of " << dbg << " has a size";
  SymbolOptions o;
  o.policy = NamingPolicy::kPerf;
  const auto t = SymbolTable::read(*f, o);
  ASSERT_EQ(t.source(), SymbolSource::kDebugFile);
  const std::uint64_t page_end = (last / 4096 + 1) * 4096 + 4096 - (last % 4096 == 0 ? 4096 : 0);
  for (const std::uint64_t pc : {last + 4, page_end - 1}) {
    const auto hit = t.find(pc);
    ASSERT_TRUE(hit) << std::hex << "0x" << pc;
    EXPECT_EQ(hit->symbol->address, last) << std::hex << "0x" << pc;
    EXPECT_EQ(hit->offset, pc - last);
  }
  EXPECT_FALSE(t.find(page_end)) << std::hex << "0x" << page_end;
}

TEST(Symbols, OwnProgramMatchesNm) {
  ASSERT_TRUE(have("nm")) << "nm (binutils) not installed: the oracle is missing";
  const std::string path = self_path();
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f);
  const auto t = SymbolTable::read(*f);
  ASSERT_EQ(t.source(), SymbolSource::kSymtab);
  auto nm = nm_functions(path, false, false);
  for (auto& [a, v] : nm_functions(path, true, false))
    if (!nm.count(a)) nm[a] = v;
  EXPECT_GT(expect_matches_nm(t, nm, true), 500u);
}

// readelf -Ws, for the ranking: per address the function symbols of one
// table in table order, with binding and size.
struct ReadelfSym {
  std::string name, bind;
  std::uint64_t size = 0;
};
std::map<std::uint64_t, std::vector<ReadelfSym>> readelf_symtab(const std::string& path) {
  std::map<std::uint64_t, std::vector<ReadelfSym>> out;
  std::istringstream in(run("readelf -Ws '" + path + "' 2>/dev/null"));
  std::string line;
  bool in_symtab = false;
  while (std::getline(in, line)) {
    if (line.rfind("Symbol table", 0) == 0) {
      in_symtab = line.find("'.symtab'") != std::string::npos;
      continue;
    }
    if (!in_symtab) continue;
    std::istringstream ls(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(ls >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if ((type != "FUNC" && type != "IFUNC") || ndx == "UND") continue;
    out[std::stoull(value, nullptr, 16)].push_back(
        {name, bind, size.rfind("0x", 0) == 0 ? std::stoull(size, nullptr, 16) : std::stoull(size)});
  }
  return out;
}

TEST(Symbols, AliasRankMatchesEuStackRule) {
  ASSERT_TRUE(have("readelf")) << "readelf (binutils) not installed: the oracle is missing";
  std::vector<std::string> files = {self_path()};
  if (auto f = ElfFile::open(libc_path()); f)
    if (std::string d = debug_file_of(*f); !d.empty()) files.push_back(d);
  std::size_t groups = 0;
  for (const auto& path : files) {
    auto f = ElfFile::open(path);
    ASSERT_TRUE(f) << path;
    const auto t = SymbolTable::read(*f, no_debug_file());
    const auto rows = readelf_symtab(path);
    ASSERT_FALSE(rows.empty()) << path;
    for (const auto& [addr, syms] : rows) {
      // libdwfl: globals (GLOBAL, WEAK) searched first; among candidates at
      // one address a stronger binding, then the smaller size, then the
      // first in table order.
      auto strength = [](const std::string& b) { return b == "GLOBAL" ? 3 : b == "WEAK" ? 2 : b == "LOCAL" ? 1 : 0; };
      const ReadelfSym* best = nullptr;
      for (const auto& s : syms) {
        if (s.size == 0) continue;
        if (!best || strength(s.bind) > strength(best->bind) ||
            (strength(s.bind) == strength(best->bind) && s.size < best->size))
          best = &s;
      }
      if (!best || syms.size() < 2) continue;
      const auto hit = t.find(addr);
      ASSERT_TRUE(hit) << std::hex << addr;
      // A LOCAL symbol inside a GLOBAL one's range loses to it (globals
      // searched first).
      if (hit->symbol->address != addr && best->bind == "LOCAL") continue;
      EXPECT_EQ(hit->symbol->name, best->name) << path << " 0x" << std::hex << addr;
      ++groups;
    }
  }
  EXPECT_GT(groups, 10u);
}

// A C++ program compiled now: names demangled as `nm -C` prints them, and a
// C function called `f` stays "f" (a bare "f" is also the mangling of the
// type float).
TEST(Symbols, CompiledCxxProgramDemangledAsNm) {
  ASSERT_TRUE(have("nm")) << "nm (binutils) not installed: the oracle is missing";
  ASSERT_TRUE(have("c++")) << "c++ (build-essential) not installed: the input is missing";
  char dir[] = "/tmp/sframepp-symbols-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string src = std::string(dir) + "/prog.cpp", exe = std::string(dir) + "/prog";
  {
    FILE* out = fopen(src.c_str(), "w");
    ASSERT_NE(out, nullptr);
    fputs(
        "#include <vector>\n"
        "namespace demo { template <class T> struct Widget {\n"
        "  __attribute__((noinline)) T frob(const std::vector<T>& v, int k) { return v.empty() ? T() : v[k]; } }; }\n"
        "extern \"C\" __attribute__((noinline)) int f(int x) { return x * 3; }\n"
        "extern \"C\" __attribute__((noinline)) int i(int x) { return x + 1; }\n"
        "int main(int argc, char**) { demo::Widget<double> w; std::vector<double> v(3, 1.0);\n"
        "  return static_cast<int>(w.frob(v, argc - 1)) + f(argc) + i(argc); }\n",
        out);
    fclose(out);
  }
  ASSERT_EQ(std::system(("c++ -O1 -o " + exe + " " + src).c_str()), 0);
  auto file = ElfFile::open(exe);
  ASSERT_TRUE(file);
  // kPerf prints perf's short form (no parameters, no return type): the
  // perf_script_cxx test compares it with perf script itself; here both
  // policies must pick a symbol nm lists, and kPerf's name must be the
  // start of nm -C's up to the parameter list.
  for (const auto policy : {NamingPolicy::kEuStack, NamingPolicy::kPerf}) {
    const auto t = SymbolTable::read(*file, no_debug_file(policy));
    const auto raw = nm_functions(exe, false, false);
    const auto demangled = nm_functions(exe, false, true);
    std::size_t checked = 0;
    bool saw_widget = false, saw_f = false, saw_i = false;
    for (const auto& [addr, syms] : demangled) {
      if (syms.front().size == 0) continue;
      const auto hit = t.find(addr);
      ASSERT_TRUE(hit);
      const std::string shown = t.display_name(*hit->symbol);
      bool listed = false;
      for (const auto& s : syms) {
        if (policy == NamingPolicy::kEuStack) {
          listed |= s.name == shown;
        } else {
          // "T demo::Widget<T>::frob(args)" -> "demo::Widget<T>::frob"
          const auto paren = s.name.find('(');
          listed |= s.name.substr(0, paren).ends_with(shown);
        }
      }
      EXPECT_TRUE(listed) << shown << " (" << hit->symbol->name << ") not among nm -C's names at 0x" << std::hex
                          << addr;
      saw_widget |= shown == "demo::Widget<double>::frob(std::vector<double, std::allocator<double> > const&, int)" ||
                    (policy == NamingPolicy::kPerf && shown == "demo::Widget<double>::frob");
      saw_f |= shown == "f";
      saw_i |= shown == "i";
      ++checked;
    }
    EXPECT_EQ(raw.size(), demangled.size());
    EXPECT_GT(checked, 3u);
    EXPECT_TRUE(saw_widget);
    EXPECT_TRUE(saw_f);
    EXPECT_TRUE(saw_i);
  }
  EXPECT_EQ(display_name("f", NamingPolicy::kEuStack), "f");
  EXPECT_EQ(demangle("_ZN4demo1gEv"), "demo::g()");
  EXPECT_EQ(display_name("_ZN4demo1gEv@@V_1", NamingPolicy::kEuStack), "_ZN4demo1gEv@@V_1");
  // perf's short form (DMGL_NO_OPTS: no parameter list), version kept.
  EXPECT_EQ(display_name("_ZN4demo1gEv@@V_1", NamingPolicy::kPerf), "demo::g@@V_1");
  EXPECT_EQ(display_name("_ZNSt6vectorIiSaIiEE9push_backERKi", NamingPolicy::kPerf), "std::vector<int, std::allocator<int> >::push_back");
  EXPECT_EQ(display_name("_ZnwmPv", NamingPolicy::kPerf), "operator new");
  // As perf 6.1 printed them in a clang-16 recording (libLLVM-16,
  // libclang-cpp.so.16): an operator template keeps its name, a thunk its
  // target's parameters.
  EXPECT_EQ(display_name("_ZN4llvmlsIRNS_18raw_string_ostreamEEERT_OS3_RKNS_10InlineCostE@@LLVM_16", NamingPolicy::kPerf),
            "llvm::operator<< <llvm::raw_string_ostream&>@@LLVM_16");
  EXPECT_EQ(display_name("_ZNK4llvm8TypeSizecvmEv", NamingPolicy::kPerf), "llvm::TypeSize::operator unsigned long");
  EXPECT_EQ(display_name("_ZThn24_N5clang9ASTReader22hasExternalDefinitionsEPKNS_4DeclE", NamingPolicy::kPerf),
            "non-virtual thunk to clang::ASTReader::hasExternalDefinitions(clang::Decl const*)");
  std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST(Symbols, NotCoveredAndEmpty) {
  const std::string path = self_path();
  auto f = ElfFile::open(path);
  ASSERT_TRUE(f);
  const auto t = SymbolTable::read(*f);
  ASSERT_FALSE(t.empty());
  EXPECT_FALSE(t.find(0));
  const auto& last = t.symbols().back();
  EXPECT_FALSE(t.find(last.address + std::max<std::uint64_t>(last.size, 1) + 0x100000));
  const SymbolTable none;
  EXPECT_FALSE(none.find(0x1000));
  EXPECT_EQ(none.source(), SymbolSource::kNone);
  EXPECT_EQ(source_name(SymbolSource::kDebugFile), "debug file");
}

}  // namespace
}  // namespace sframe::elf
