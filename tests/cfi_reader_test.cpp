// SPDX-License-Identifier: MIT
// The single-pass CFI reader (sframe/cfi_reader.hpp) against independent
// truths: elfutils libdw's rows, row for row (corpus files, programs compiled
// here, system libraries), GNU as's SFrame (AArch64 PAuth signing state), nm
// (function starts of static and .debug_frame-only programs), and CFI bytes
// written by hand from DWARF 5 §6.4 with their rows worked out by hand.
#include <gtest/gtest.h>

#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <set>
#include <string>

#include "sframe/cfi.hpp"
#include "sframe/cfi_reader.hpp"
#include "sframe/encode.hpp"
#include "sframe/lookup.hpp"
#include "sframe/module_unwind.hpp"
#include "support/corpus.hpp"

namespace {

using namespace sframe;

std::string describe_first(const cfi::ReaderComparison& d) {
  if (d.examples.empty()) return "";
  const auto& x = d.examples[0];
  return fmt::format("first at 0x{:x} (FDE 0x{:x}): {}; ours {}, libdw {}", x.pc, x.function_start, x.what,
                     cfi::describe(x.ours.reason), cfi::describe(x.libdw.reason));
}

// Opens `path` as gen reads it: relocatable objects relocated first.
Expected<elf::ElfFile> open_for_cfi(const std::string& path) {
  auto f = elf::ElfFile::open(path);
  if (!f) return f;
  if (f->info().type == 1 /* ET_REL */) return f->relocated_copy();
  return f;
}

// Every corpus file (x86-64, AArch64 with and without PAuth, s390x, both
// byte orders): our rows are libdw's.
TEST(CfiReader, CorpusAgreesWithLibdw) {
  std::uint64_t compared = 0;
  std::set<std::string> dirs;
  for (const auto& c : sframe_test::golden_cases()) {
    auto f = open_for_cfi((c.dir / c.file).string());
    ASSERT_TRUE(f) << c.name();
    if (!cfi::abi_of(f->info())) continue;
    auto d = cfi::compare_readers(*f);
    if (!d && d.error().code() == ElfErrc::kElfError) continue;  // no CFI in this file
    ASSERT_TRUE(d) << c.name() << ": " << describe(d.error().code());
    EXPECT_EQ(d->differing_rows, 0u) << c.name() << ": " << describe_first(*d);
    EXPECT_EQ(d->libdw_unreadable, 0u) << c.name();
    compared += d->rows_compared;
    if (d->rows_compared > 0) dirs.insert(c.dir.filename().string());
  }
  EXPECT_GT(compared, 1000u);
  for (const char* want : {"aarch64-v3-O2", "aarch64-v3-pauth", "s390x-v3-O2", "x86_64-v3-O2", "x86_64-v3-linked"})
    EXPECT_TRUE(dirs.count(want)) << want << " compared nothing";
}

// DW_CFA_AARCH64_negate_ra_state: the RA signing state of each row is what
// GNU as wrote in its own SFrame section for the same code ("[s]").
TEST(CfiReader, PauthSigningStateMatchesGas) {
  std::uint64_t signed_rows = 0, rows = 0;
  for (const auto& c : sframe_test::golden_cases()) {
    const std::string dir = c.dir.filename().string();
    if (dir != "aarch64-v3-pauth" && dir != "aarch64-v3-O2") continue;
    auto f = open_for_cfi((c.dir / c.file).string());
    ASSERT_TRUE(f);
    auto gas = f->sframe_section();
    ASSERT_TRUE(gas) << c.name();
    auto s = Section::parse(gas->bytes, gas->address);
    ASSERT_TRUE(s);
    auto index = FdeIndex::build(*s);
    ASSERT_TRUE(index);
    auto fns = cfi::read_functions(*f);
    ASSERT_TRUE(fns) << c.name();
    for (const auto& fn : *fns) {
      for (const auto& r : fn.rows) {
        if (r.reason != cfi::Reason::kNone && !r.flex) continue;
        auto m = index->find(r.start);
        if (!m) continue;
        ++rows;
        signed_rows += r.row.ra_mangled;
        EXPECT_EQ(r.row.ra_mangled, m->row.ra_mangled) << c.name() << " at 0x" << std::hex << r.start;
        if (dir == "aarch64-v3-O2") {
          EXPECT_FALSE(r.row.ra_mangled);
        }
      }
    }
  }
  EXPECT_GT(rows, 50u);
  EXPECT_GT(signed_rows, 10u);
}

// A scratch folder removed at the end of the test.
struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    dir = std::filesystem::temp_directory_path() / fmt::format("sframepp-cfi-reader-{}", getpid());
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
};

constexpr const char* kCProgram = R"(#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int big(int n) {
  char *buf = alloca(n + 16);
  memset(buf, n, n + 16);
  int s = 0;
  for (int i = 0; i < n; ++i) s += leaf(buf[i]);
  return s;
}
__attribute__((noinline)) int spill(int a, int b, int c, int d, int e, int f, int g, int h) {
  volatile long x[64];
  for (int i = 0; i < 64; ++i) x[i] = a + b * i + c - d + e * f - g + h;
  return (int)x[a & 63];
}
int main(int argc, char **argv) {
  printf("%d %d\n", big(argc + 5), spill(argc, 2, 3, 4, 5, 6, 7, 8));
  return argv[0] == 0;
}
)";

constexpr const char* kCxxProgram = R"(#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>
struct Widget { std::string name; std::vector<int> v; ~Widget() { std::puts(name.c_str()); } };
__attribute__((noinline)) int thrower(int x) {
  Widget w{"w", {x, x}};
  if (x > 2) throw std::runtime_error("too big");
  return x + static_cast<int>(w.v.size());
}
int main(int argc, char**) {
  std::map<std::string, int> m;
  try {
    for (int i = 0; i < argc + 4; ++i) m[std::to_string(i)] = thrower(i);
  } catch (const std::exception& e) {
    std::puts(e.what());
  }
  return static_cast<int>(m.size());
}
)";

// Builds `src` (C or C++ by `lang`) with `flags` into `exe`; true on success.
bool build(const Scratch& s, const std::string& lang, const std::string& src, const std::string& flags,
           const std::string& exe) {
  const auto path = s.dir / (exe + (lang == "c" ? ".c" : ".cpp"));
  FILE* out = std::fopen(path.c_str(), "w");
  if (!out) return false;
  std::fputs(src.c_str(), out);
  std::fclose(out);
  const std::string cc = lang == "c" ? "gcc" : "g++";
  const std::string cmd = fmt::format("{} {} -o {} {} 2>&1", cc, flags, (s.dir / exe).string(), path.string());
  return std::system(cmd.c_str()) == 0;
}

// Start addresses of the defined function symbols `names` (nm, the truth).
std::set<std::uint64_t> nm_starts(const std::string& exe, const std::set<std::string>& names) {
  std::set<std::uint64_t> out;
  FILE* p = popen(("nm --defined-only " + exe).c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    unsigned long long addr = 0;
    char type = 0;
    char name[400];
    if (std::sscanf(line, "%llx %c %399s", &addr, &type, name) == 3 && (type == 'T' || type == 't') &&
        names.count(name))
      out.insert(addr);
  }
  pclose(p);
  return out;
}

// Programs compiled here, in the shapes gen meets: our rows are libdw's, and
// gen converts each (static non-PIE without .eh_frame_hdr, .debug_frame-only
// code included: their functions, as nm lists them, get FDEs).
TEST(CfiReader, CompiledProgramsAgreeWithLibdw) {
  Scratch s;
  struct Case {
    const char* lang;
    const char* flags;
    const char* exe;
    bool debug_frame;
  };
  const Case cases[] = {
      {"c", "-O0", "c-O0", false},
      {"c", "-O2", "c-O2", false},
      {"c", "-O2 -fno-omit-frame-pointer", "c-O2-fp", false},
      {"c", "-O2 -static -no-pie", "c-static", false},
      {"c", "-O2 -fno-asynchronous-unwind-tables -g", "c-debug-frame", true},
      {"c", "-O0 -fno-asynchronous-unwind-tables -fno-exceptions -g -static -no-pie", "c-debug-frame-static", true},
      {"c++", "-O2", "cxx-O2", false},
      {"c++", "-O0 -fno-omit-frame-pointer", "cxx-O0-fp", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.exe);
    ASSERT_TRUE(build(s, c.lang, c.lang[1] ? kCxxProgram : kCProgram, c.flags, c.exe)) << "gcc/g++ failed";
    const std::string exe = (s.dir / c.exe).string();
    auto f = elf::ElfFile::open(exe);
    ASSERT_TRUE(f);
    if (c.debug_frame) {
      ASSERT_TRUE(f->section_bytes(".debug_frame")) << "no .debug_frame";
    }
    auto d = cfi::compare_readers(*f);
    ASSERT_TRUE(d) << describe(d.error().code());
    EXPECT_TRUE(d->libdw_run);
    EXPECT_EQ(d->differing_rows, 0u) << describe_first(*d);
    EXPECT_EQ(d->libdw_unreadable, 0u);
    EXPECT_GT(d->rows_compared, 10u);
    auto g = cfi::generate(*f, Version::kV3, 0);
    ASSERT_TRUE(g) << describe(g.error().code());
    std::set<std::uint64_t> starts;
    for (const auto& fn : g->spec.functions) starts.insert(fn.start_pc);
    for (std::uint64_t want : nm_starts(exe, {"main", "big", "spill"})) EXPECT_TRUE(starts.count(want)) << std::hex << want;
    EXPECT_TRUE(encode(g->spec).has_value());
  }
}

// System libraries, the largest CFI at hand: libc, libstdc++ and libLLVM-14
// (scripts/install-deps installs libllvm14; missing, the test fails).
TEST(CfiReader, SystemLibrariesAgreeWithLibdw) {
  const char* libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                        "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"};
  for (const char* lib : libs) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    auto d = cfi::compare_readers(*f);
    ASSERT_TRUE(d) << lib;
    EXPECT_TRUE(d->libdw_run) << lib;
    EXPECT_EQ(d->differing_rows, 0u) << lib << ": " << describe_first(*d);
    EXPECT_GT(d->rows_compared, 10000u) << lib;
  }
}

// The loaded libc of this process, as the in-process backtrace finds it:
// PT_GNU_EH_FRAME's table and eh_frame_ptr, and the PT_LOAD holding
// .eh_frame (whose end is all that bounds it in memory).
struct LoadedCfi {
  std::span<const std::byte> hdr;
  std::uint64_t hdr_address = 0;  // link-time
  std::span<const std::byte> eh_frame;  // to the end of its PT_LOAD
  std::uint64_t eh_frame_address = 0;   // link-time
};

int find_libc(dl_phdr_info* info, std::size_t, void* data) {
  if (!info->dlpi_name || !std::string(info->dlpi_name).ends_with("/libc.so.6")) return 0;
  auto* out = static_cast<LoadedCfi*>(data);
  const ElfW(Addr) bias = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_GNU_EH_FRAME) continue;
    const auto* hdr = reinterpret_cast<const std::byte*>(bias + p.p_vaddr);
    out->hdr = {hdr, p.p_memsz};
    out->hdr_address = p.p_vaddr;
    // eh_frame_ptr: DW_EH_PE_pcrel | sdata4, what ld writes.
    if (std::to_integer<unsigned>(hdr[1]) != 0x1b) return 1;
    std::int32_t rel;
    std::memcpy(&rel, hdr + 4, 4);
    const std::uint64_t eh = bias + p.p_vaddr + 4 + static_cast<std::uint64_t>(std::int64_t{rel});
    for (int j = 0; j < info->dlpi_phnum; ++j) {
      const ElfW(Phdr)& l = info->dlpi_phdr[j];
      const std::uint64_t lo = bias + l.p_vaddr, hi = lo + l.p_memsz;
      if (l.p_type == PT_LOAD && eh >= lo && eh < hi) {
        out->eh_frame = {reinterpret_cast<const std::byte*>(eh), hi - eh};
        out->eh_frame_address = eh - bias;
      }
    }
  }
  return 1;
}

// ModuleUnwind::generate from the loaded image, no file: libc's .eh_frame
// found through PT_GNU_EH_FRAME, read to its zero terminator inside the rest
// of its PT_LOAD. Every FDE start ld's .eh_frame_hdr table lists gets a
// function, but for the PLT's (an expression CFA, left out without the PLT
// section headers a loaded image lacks).
TEST(CfiReader, ModuleUnwindGeneratesFromTheLoadedImage) {
  LoadedCfi c;
  dl_iterate_phdr(find_libc, &c);
  ASSERT_FALSE(c.hdr.empty()) << "libc.so.6 has no PT_GNU_EH_FRAME";
  ASSERT_FALSE(c.eh_frame.empty());
  cfi::ModuleImage img;
  img.eh_frame_hdr = c.hdr;
  img.eh_frame_hdr_address = c.hdr_address;
  cfi::ModuleUnwind m = cfi::ModuleUnwind::build(img);
  ASSERT_TRUE(m.needs_generation());
  cfi::CfiSource src;
  src.bytes = c.eh_frame;
  src.address = c.eh_frame_address;
  ASSERT_TRUE(m.generate(src, Abi::kAmd64Little, 0)) << m.reason();
  EXPECT_EQ(m.source(), cfi::ModuleSource::kGenerated);
  ASSERT_TRUE(m.primary().usable());
  auto starts = cfi::eh_frame_hdr_starts(c.hdr, c.hdr_address);
  ASSERT_TRUE(starts);
  ASSERT_GT(starts->size(), 1000u);
  std::size_t missing = 0;
  for (std::uint64_t pc : *starts) missing += !m.primary().index->find(pc).has_value();
  EXPECT_LE(missing, 2u);
}

TEST(CfiReader, LoadedImagePltBecomesPcMaskFdes) {
  // Without section headers (a loaded module), ld's .plt is recognized by
  // its FDE and gets the PC-mask FDEs the file's headers would give it.
  // Truth: binutils' section table for the .plt range.
  LoadedCfi c;
  dl_iterate_phdr(find_libc, &c);
  ASSERT_FALSE(c.eh_frame.empty());
  FILE* p = popen("readelf -SW /lib/x86_64-linux-gnu/libc.so.6 | awk '{ for (i = 1; i < NF; i++) if ($i == \".plt\") print $(i + 2), $(i + 4) }'", "r");
  ASSERT_NE(p, nullptr);
  unsigned long long plt = 0, size = 0;
  const int got = std::fscanf(p, "%llx %llx", &plt, &size);
  pclose(p);
  ASSERT_EQ(got, 2) << "libc.so.6 has no .plt";
  cfi::CfiSource src;
  src.bytes = c.eh_frame;
  src.address = c.eh_frame_address;
  auto g = cfi::generate(std::span<const cfi::CfiSource>(&src, 1), Abi::kAmd64Little, Version::kV3, 0);
  ASSERT_TRUE(g);
  bool plt0 = false, entries = false;
  for (const FunctionSpec& f : g->spec.functions) {
    if (f.start_pc == plt && f.size == 16 && f.pc_type == PcType::kInc) plt0 = true;
    if (f.start_pc == plt + 16 && f.size == size - 16 && f.pc_type == PcType::kMask && f.rep_size == 16) {
      entries = true;
      ASSERT_EQ(f.rows.size(), 2u);
      EXPECT_EQ(f.rows[0].start_offset, 0u);
      EXPECT_EQ(f.rows[0].row.cfa.offset, 8);
      EXPECT_EQ(f.rows[1].start_offset, 11u);
      EXPECT_EQ(f.rows[1].row.cfa.offset, 16);
    }
  }
  EXPECT_TRUE(plt0);
  EXPECT_TRUE(entries);
  EXPECT_EQ(g->plt_functions, 2u);
}

// --- CFI bytes written by hand (DWARF 5 §6.4, LSB 5.0 .eh_frame) ---------

struct Bytes {
  std::vector<std::byte> b;
  bool big = false;
  void u8(unsigned v) { b.push_back(static_cast<std::byte>(v)); }
  void word(std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) u8(static_cast<unsigned>(v >> (8 * (big ? n - 1 - i : i))) & 0xff);
  }
  void uleb(std::uint64_t v) {
    do {
      unsigned byte = v & 0x7f;
      v >>= 7;
      u8(byte | (v ? 0x80 : 0));
    } while (v);
  }
  void sleb(std::int64_t v) {
    for (;;) {
      unsigned byte = static_cast<unsigned>(v & 0x7f);
      v >>= 7;
      const bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
      u8(byte | (done ? 0 : 0x80));
      if (done) return;
    }
  }
  void bytes(std::initializer_list<unsigned> v) {
    for (unsigned x : v) u8(x);
  }
  // Patches the 4-byte length at `at` to cover up to the end.
  void close(std::size_t at) {
    const std::uint64_t len = b.size() - at - 4;
    for (unsigned i = 0; i < 4; ++i)
      b[at + i] = static_cast<std::byte>((len >> (8 * (big ? 3 - i : i))) & 0xff);
  }
};

// An x86-64 .eh_frame CIE (augmentation "zR", pcrel|sdata4, the usual
// initial rules: CFA = rsp + 8, RA at CFA - 8) at the start of `e`.
void x86_cie(Bytes& e) {
  e.word(0, 4);
  e.word(0, 4);  // CIE id
  e.u8(1);
  e.bytes({'z', 'R', 0});
  e.uleb(1);
  e.sleb(-8);
  e.u8(16);
  e.uleb(1);
  e.u8(0x1b);                  // DW_EH_PE_pcrel | sdata4
  e.bytes({0x0c, 7, 8});       // def_cfa rsp, 8
  e.bytes({0x80 | 16, 1});     // offset r16, 1 x -8
  e.close(0);
}

// An FDE for [start, start + size) with `program`, its CIE at offset 0.
void x86_fde(Bytes& e, std::uint64_t section_address, std::uint64_t start, std::uint32_t size,
             std::initializer_list<unsigned> program) {
  const std::size_t at = e.b.size();
  e.word(0, 4);
  e.word(at + 4, 4);  // CIE pointer: back to offset 0
  const std::uint64_t field = section_address + e.b.size();
  e.word(static_cast<std::uint32_t>(start - field), 4);
  e.word(size, 4);
  e.uleb(0);  // augmentation data
  e.bytes(program);
  while ((e.b.size() - at) % 8 != 0) e.u8(0);  // DW_CFA_nop padding
  e.close(at);
}

std::vector<cfi::Function> read_all(const cfi::CfiSource& src, Abi abi, cfi::CfiStats* st = nullptr) {
  std::vector<cfi::Function> out;
  auto ok = cfi::read_cfi(src, abi, [&](const cfi::Function& f) { out.push_back(f); }, st);
  EXPECT_TRUE(ok);
  return out;
}

// push %rbp; mov %rsp,%rbp; ...; pop %rbp; ret with remember/restore around
// the epilogue: the rows of DWARF 5 Appendix D.6 in x86-64 terms, no
// .eh_frame_hdr needed, read up to the zero terminator with more bytes after
// it (as a loaded image would have).
TEST(CfiReader, HandWrittenEhFrameRows) {
  Bytes e;
  const std::uint64_t addr = 0x2000;
  x86_cie(e);
  x86_fde(e, addr, 0x1000, 0x20,
          {0x41, 0x0e, 16, 0x80 | 6, 2,   // +1: CFA rsp+16, rbp at CFA-16
           0x43, 0x0d, 6,                 // +3: CFA rbp+16
           0x0a,                          // remember_state
           0x4a, 0x0c, 7, 8, 0xc0 | 6,    // +10: CFA rsp+8, rbp restored (same value)
           0x41, 0x0b});                  // +1: restore_state
  e.word(0, 4);                           // zero terminator
  e.bytes({0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff});  // what follows in memory
  cfi::CfiSource src{e.b, addr};
  const auto fns = read_all(src, Abi::kAmd64Little);
  ASSERT_EQ(fns.size(), 1u);
  const auto& r = fns[0].rows;
  EXPECT_EQ(fns[0].start, 0x1000u);
  EXPECT_EQ(fns[0].end, 0x1020u);
  ASSERT_EQ(r.size(), 5u);
  const std::uint64_t starts[] = {0x1000, 0x1001, 0x1004, 0x100e, 0x100f};
  const std::uint16_t regs[] = {7, 7, 6, 7, 6};
  const std::int32_t offs[] = {8, 16, 16, 8, 16};
  const bool fp_saved[] = {false, true, true, false, true};
  for (std::size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r[i].start, starts[i]);
    EXPECT_EQ(r[i].end, i + 1 < 5 ? starts[i + 1] : 0x1020u);
    EXPECT_EQ(r[i].reason, cfi::Reason::kNone);
    EXPECT_EQ(r[i].row.cfa.regnum, regs[i]);
    EXPECT_EQ(r[i].row.cfa.offset, offs[i]);
    EXPECT_EQ(r[i].row.ra.kind, Rule::Kind::kExpr);
    EXPECT_EQ(r[i].row.ra.base, Rule::Base::kCfa);
    EXPECT_TRUE(r[i].row.ra.deref);
    EXPECT_EQ(r[i].row.ra.offset, -8);
    EXPECT_EQ(r[i].row.fp.kind, fp_saved[i] ? Rule::Kind::kExpr : Rule::Kind::kUnchanged);
    if (fp_saved[i]) {
      EXPECT_EQ(r[i].row.fp.offset, -16);
    }
  }
}

// The same CFI as big-endian 32-bit .debug_frame in 64-bit DWARF form (CIE
// id all ones, absolute addresses, CIE pointer an offset): one function,
// found without any .eh_frame.
TEST(CfiReader, HandWrittenDebugFrame64BigEndian) {
  Bytes e;
  e.big = true;
  // CIE, 64-bit DWARF: 0xffffffff, 8-byte length, 8-byte id of all ones.
  e.word(0xffffffff, 4);
  const std::size_t len_at = e.b.size();
  e.word(0, 8);
  e.word(~std::uint64_t{0}, 8);
  e.u8(4);          // version 4: address and segment selector sizes follow
  e.u8(0);          // augmentation ""
  e.u8(4);          // address size
  e.u8(0);          // segment selector size
  e.uleb(4);        // code alignment
  e.sleb(-4);       // data alignment
  e.uleb(30);       // RA column (x30 as AArch64)
  e.bytes({0x0c, 31, 0});  // def_cfa sp, 0
  const auto patch8 = [&](std::size_t at) {
    const std::uint64_t len = e.b.size() - at - 8;
    for (unsigned i = 0; i < 8; ++i) e.b[at + i] = static_cast<std::byte>((len >> (8 * (7 - i))) & 0xff);
  };
  patch8(len_at);
  // FDE: CIE pointer 0 (the section offset of the CIE), 4-byte addresses.
  e.word(0xffffffff, 4);
  const std::size_t fde_len_at = e.b.size();
  e.word(0, 8);
  e.word(0, 8);
  e.word(0x400, 4);
  e.word(0x40, 4);
  e.bytes({0x41, 0x0e, 16, 0x80 | 29, 4, 0x80 | 30, 3});  // +4: CFA sp+16, x29 at CFA-16, x30 at CFA-12
  patch8(fde_len_at);
  cfi::CfiSource src;
  src.bytes = e.b;
  src.kind = cfi::CfiKind::kDebugFrame;
  src.big_endian = true;
  src.address_size = 4;
  const auto fns = read_all(src, Abi::kAarch64Big);
  ASSERT_EQ(fns.size(), 1u);
  ASSERT_EQ(fns[0].rows.size(), 2u);
  EXPECT_EQ(fns[0].start, 0x400u);
  EXPECT_EQ(fns[0].end, 0x440u);
  EXPECT_EQ(fns[0].rows[1].start, 0x404u);
  EXPECT_EQ(fns[0].rows[1].row.cfa.offset, 16);
  EXPECT_EQ(fns[0].rows[1].row.fp.offset, -16);
  EXPECT_EQ(fns[0].rows[1].row.ra.offset, -12);
  EXPECT_EQ(fns[0].rows[1].reason, cfi::Reason::kNone);
}

// Hostile input: a record longer than the section is an error at its
// offset; remember_state nested past kMaxRememberDepth ends the function at
// its last complete row; an unknown opcode likewise; duplicates keep the
// first FDE.
TEST(CfiReader, HostileInputIsBounded) {
  {
    Bytes e;
    x86_cie(e);
    const std::size_t at = e.b.size();
    e.word(0x7ffffff0, 4);
    e.word(at + 4, 4);
    cfi::CfiSource src{e.b, 0};
    auto ok = cfi::read_cfi(src, Abi::kAmd64Little, [](const cfi::Function&) {});
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().code(), CfiErrc::kBadCfi);
    EXPECT_EQ(ok.error().offset, at);
  }
  {
    Bytes e;
    x86_cie(e);
    std::vector<unsigned> deep;
    deep.push_back(0x41);  // one row, then too much nesting
    for (unsigned i = 0; i <= cfi::kMaxRememberDepth; ++i) deep.push_back(0x0a);
    deep.push_back(0x41);
    const std::size_t at = e.b.size();
    e.word(0, 4);
    e.word(at + 4, 4);
    e.word(static_cast<std::uint32_t>(0x100 - (e.b.size())), 4);
    e.word(0x10, 4);
    e.uleb(0);
    for (unsigned v : deep) e.u8(v);
    e.close(at);
    x86_fde(e, 0, 0x200, 0x10, {0x41, 0x3f, 0x41});  // opcode 0x3f (undefined) after one row
    x86_fde(e, 0, 0x200, 0x10, {0x48});              // a duplicate start: dropped
    cfi::CfiStats st;
    cfi::CfiSource src{e.b, 0};
    const auto fns = read_all(src, Abi::kAmd64Little, &st);
    ASSERT_EQ(fns.size(), 2u);
    EXPECT_EQ(fns[0].start, 0x100u);
    EXPECT_EQ(fns[0].end, 0x101u);
    EXPECT_EQ(fns[1].start, 0x200u);
    EXPECT_EQ(fns[1].end, 0x201u);
    EXPECT_EQ(st.fdes, 3u);
    EXPECT_EQ(st.duplicates, 1u);
  }
}

}  // namespace

namespace {

// One function as a one-function section, by the translation generation
// uses (generate_function); empty when the translation leaves it out.
std::vector<std::byte> section_of(const cfi::Function& fn, std::uint64_t address, cfi::Reason& why) {
  SectionEncoder enc(cfi::section_header(Abi::kAmd64Little, Version::kV3, address));
  const cfi::Generated g = cfi::generate_function(fn, Abi::kAmd64Little, Version::kV3, address, {},
                                                  [&](const FunctionSpec& f) { (void)enc.add(f); });
  why = g.skipped.empty() ? cfi::Reason::kNone : g.skipped.front().reason;
  if (why != cfi::Reason::kNone) return {};
  auto bytes = enc.finish();
  return bytes ? std::move(*bytes) : std::vector<std::byte>{};
}

}  // namespace

// Per-FDE (on-demand) generation: for every FDE of libc and libstdc++,
// at its start, its last byte, its middle and each row's start, the row
// generate_for_pc() gives (found through .eh_frame_hdr's table, read alone
// by FdeReader) equals the row of the same function as libdw reads it (the
// independent truth, cfi::libdw_functions), both put through the one
// translation and encoder; a function libdw's rows say SFrame cannot hold
// is refused with that reason. PLT sections are left to the PC-mask tests.
// Both ways of holding a generated FDE: an encoded section (looked up with
// find()), and with ModuleUnwindOptions::per_fde_rows a RowIndex built
// straight from the translator's rows (looked up with RowIndex::find(),
// the function's range from the GeneratedFde).
TEST(CfiReader, OnDemandRowsEqualLibdwRows) {
  const char* libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
  for (const bool per_fde_rows : {false, true})
  for (const char* lib : libs) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    cfi::ModuleUnwindOptions mo;
    mo.per_fde_rows = per_fde_rows;
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{}, mo);
    ASSERT_TRUE(u.enable_on_demand(*f)) << lib;
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    const auto in_plt = [&](const cfi::Function& fn) {
      for (const auto& p : plts)
        if (fn.start < p.address + p.size && p.address < fn.end) return true;
      return false;
    };
    std::size_t functions = 0, pcs = 0, refused = 0;
    std::vector<std::string> diffs;
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (in_plt(fn) || fn.rows.empty()) return;
      for (const auto& r : fn.rows)
        if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
      ++functions;
      cfi::Reason why = cfi::Reason::kNone;
      const std::vector<std::byte> bytes = section_of(fn, 0, why);
      auto ref = bytes.empty() ? Expected<Section>(make_error(FormatErrc::kTruncatedHeader, 0)) : Section::parse(bytes, 0);
      std::vector<std::uint64_t> at = {fn.start, fn.end - 1, fn.start + (fn.end - fn.start) / 2};
      for (std::size_t i = 0; i < fn.rows.size() && i < 16; ++i) at.push_back(fn.rows[i].start);
      for (const std::uint64_t pc : at) {
        ++pcs;
        Expected<const cfi::GeneratedFde*> g = u.generate_for_pc(pc);
        if (why != cfi::Reason::kNone) {
          ++refused;
          if (g || g.error().code() != EncodeErrc::kNotRepresentable || g.error().value != static_cast<std::uint64_t>(why))
            diffs.push_back(fmt::format("{:#x}: libdw's rows give reason {}, on-demand {}", pc, describe(why),
                                        g ? "generated" : describe(g.error().code())));
          continue;
        }
        ASSERT_TRUE(ref) << lib;
        if (!g) {
          diffs.push_back(fmt::format("{:#x}: on-demand error {}", pc, describe(g.error().code())));
          continue;
        }
        auto want = find(*ref, pc);
        if (per_fde_rows) {
          ASSERT_TRUE((*g)->section.rows.has_value()) << lib;
          EXPECT_FALSE((*g)->section.index.has_value()) << lib;
          auto got = (*g)->section.rows->find(pc);
          if (!want || !got) {
            diffs.push_back(fmt::format("{:#x}: lookup {} / rows {}", pc, want ? "ok" : describe(want.error().code()),
                                        got ? "ok" : describe(got.error().code())));
            continue;
          }
          if (!(want->row == got->row) || want->fde.start_pc != (*g)->start ||
              want->fde.start_pc + want->fde.size != (*g)->end || want->fde.signal != got->signal)
            diffs.push_back(fmt::format("{:#x}: rows differ (function {:#x}-{:#x})", pc, fn.start, fn.end));
          continue;
        }
        auto got = find(*(*g)->section.section, pc);
        if (!want || !got) {
          diffs.push_back(fmt::format("{:#x}: lookup {} / {}", pc, want ? "ok" : describe(want.error().code()),
                                      got ? "ok" : describe(got.error().code())));
          continue;
        }
        if (!(want->row == got->row) || want->fde.start_pc != got->fde.start_pc || want->fde.size != got->fde.size ||
            want->fde.signal != got->fde.signal)
          diffs.push_back(fmt::format("{:#x}: rows differ (function {:#x}-{:#x})", pc, fn.start, fn.end));
      }
    });
    ASSERT_TRUE(ok) << lib;
    EXPECT_GT(functions, 1000u) << lib;
    EXPECT_TRUE(diffs.empty()) << lib << (per_fde_rows ? " (per_fde_rows)" : "") << ": " << diffs.size() << " of "
                               << pcs << " PCs differ, first " << (diffs.empty() ? "" : diffs.front());
    std::printf("%s%s: %zu functions, %zu PCs (%zu refused with libdw's reason), %zu FDEs generated\n", lib,
                per_fde_rows ? " (per_fde_rows)" : "", functions, pcs, refused, u.generated_fdes().size());
  }
}

// Per-FDE generation over hostile .eh_frame_hdr tables and .eh_frame
// records stays bounded: each PC gets the error for its own entry (the
// offsets are the record's, in .eh_frame), the good FDE is still generated,
// and an unsorted table gives some entry or none, never a read outside the
// bytes. Hand-made, with the values the LSB's .eh_frame_hdr layout gives.
TEST(CfiReader, OnDemandHostileTableIsBounded) {
  const std::uint64_t eh_addr = 0x2000, hdr_addr = 0x1800;
  Bytes e;
  x86_cie(e);
  const std::size_t good = e.b.size();
  x86_fde(e, eh_addr, 0x1000, 0x20, {0x41, 0x0e, 16});  // +1: CFA rsp+16
  const std::size_t bad = e.b.size();
  x86_fde(e, eh_addr, 0x1100, 0x20, {0x41, 0x0e, 16});
  e.b[bad + 4] = std::byte{0x7f};  // its CIE pointer now points before the section
  e.word(0, 4);                     // zero terminator
  // The table: (start, FDE address) pairs, datarel sdata4 from hdr_addr.
  const auto hdr = [&](std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> entries) {
    Bytes h;
    h.bytes({1, 0x1b, 0x03, 0x3b});
    h.word(static_cast<std::uint32_t>(eh_addr - (hdr_addr + 4)), 4);
    h.word(entries.size(), 4);
    for (auto [start, fde] : entries) {
      h.word(static_cast<std::uint32_t>(start - hdr_addr), 4);
      h.word(static_cast<std::uint32_t>(fde - hdr_addr), 4);
    }
    return h.b;
  };
  const auto make = [&](const std::vector<std::byte>& table) {
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{});
    cfi::OnDemandSource src;
    src.eh_frame_hdr = table;
    src.eh_frame_hdr_address = hdr_addr;
    src.eh_frame = cfi::CfiSource{e.b, eh_addr};
    EXPECT_TRUE(u.enable_on_demand(src));
    return u;
  };
  {
    // Sorted; entries for the good FDE, the bad one, one past .eh_frame's
    // end, one before its start, and one pointing at the CIE.
    const std::vector<std::byte> t = hdr({{0x1000, eh_addr + good},
                                          {0x1100, eh_addr + bad},
                                          {0x1200, eh_addr + 0x100000},
                                          {0x1300, eh_addr - 64},
                                          {0x1400, eh_addr}});
    cfi::ModuleUnwind u = make(t);
    auto g = u.generate_for_pc(0x1005);
    ASSERT_TRUE(g);
    EXPECT_EQ((*g)->start, 0x1000u);
    EXPECT_EQ((*g)->end, 0x1020u);
    auto m = find(*(*g)->section.section, 0x1005);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->row.cfa.offset, 16);
    auto miss = u.generate_for_pc(0x1050);  // after the function, before the next entry
    ASSERT_FALSE(miss);
    EXPECT_EQ(miss.error().code(), LookupErrc::kPcNotCovered);
    auto below = u.generate_for_pc(0x0fff);
    ASSERT_FALSE(below);
    EXPECT_EQ(below.error().code(), LookupErrc::kPcNotCovered);
    for (std::uint64_t pc : {0x1105u, 0x1205u, 0x1305u, 0x1405u}) {
      SCOPED_TRACE(pc);
      auto r = u.generate_for_pc(pc);
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().code(), CfiErrc::kBadCfi);
      auto again = u.generate_for_pc(pc);  // kept: the same reason
      ASSERT_FALSE(again);
      EXPECT_EQ(again.error().code(), CfiErrc::kBadCfi);
    }
    EXPECT_EQ(u.generate_for_pc(0x1105).error().offset, bad);
    EXPECT_EQ(u.generated_fdes().size(), 1u);
  }
  {
    // Unsorted: the search lands on some entry; the PC it returns for is
    // inside what was generated, else the error says not covered.
    const std::vector<std::byte> t = hdr({{0x1400, eh_addr + good}, {0x1000, eh_addr + good}, {0x1200, eh_addr + good}});
    cfi::ModuleUnwind u = make(t);
    for (std::uint64_t pc = 0x0ff0; pc < 0x1500; pc += 8) {
      auto r = u.generate_for_pc(pc);
      if (r) {
        EXPECT_GE(pc, (*r)->start);
        EXPECT_LT(pc, (*r)->end);
      } else {
        EXPECT_EQ(r.error().code(), LookupErrc::kPcNotCovered);
      }
    }
  }
  {
    // A count larger than the table: refused when turning it on.
    std::vector<std::byte> t = hdr({{0x1000, eh_addr + good}});
    t[8] = std::byte{0xff};
    cfi::ModuleUnwind u = cfi::ModuleUnwind::build(cfi::ModuleImage{});
    cfi::OnDemandSource src;
    src.eh_frame_hdr = t;
    src.eh_frame_hdr_address = hdr_addr;
    src.eh_frame = cfi::CfiSource{e.b, eh_addr};
    auto ok = u.enable_on_demand(src);
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().code(), ElfErrc::kElfError);
    EXPECT_FALSE(u.on_demand());
  }
}

// The in-process backtrace's RowIndex, built straight from the translator's
// rows (RowIndex::Builder, no encoded section), at every PC of libc and
// libstdc++: the row libdw's CFI gives there (the independent truth: the
// same translation of libdw's rules), and, for what libdw says nothing of
// (PLT PC-mask FDEs) and for where each answer comes from (FDE and FRE
// indexes), exactly what RowIndex::build() answers over the section the
// encoder makes of the same functions.
TEST(CfiReader, RowsBuiltIndexEqualsLibdwAndEncodedIndex) {
  const char* libs[] = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
  for (const char* lib : libs) {
    auto f = elf::ElfFile::open(lib);
    ASSERT_TRUE(f) << lib;
    RowIndex::Builder built;
    auto header = cfi::section_header(*f, Version::kV3, 0);
    ASSERT_TRUE(header) << lib;
    SectionEncoder enc(*header);
    std::optional<Error> add_error;
    auto gen = cfi::for_each_generated(*f, Version::kV3, 0, [&](const FunctionSpec& fn) {
      if (auto ok = built.add(fn); !ok && !add_error) add_error = ok.error();
      if (auto ok = enc.add(fn); !ok && !add_error) add_error = ok.error();
    });
    ASSERT_TRUE(gen) << lib;
    ASSERT_FALSE(add_error) << lib << ": " << describe(add_error->code());
    auto bytes = enc.finish();
    ASSERT_TRUE(bytes) << lib;
    auto s = Section::parse(*bytes, 0);
    ASSERT_TRUE(s) << lib;
    ASSERT_TRUE(validate(*s, Strictness::kStrict)) << lib;
    auto encoded = RowIndex::build(*s);
    ASSERT_TRUE(encoded) << lib;
    auto empty = SectionEncoder(*header).finish();
    ASSERT_TRUE(empty);
    auto hs = Section::parse(*empty, 0);
    ASSERT_TRUE(hs);
    auto rows = built.finish(*hs);
    ASSERT_TRUE(rows) << lib << ": " << describe(rows.error().code());
    EXPECT_EQ(rows->num_rows(), encoded->num_rows()) << lib;
    EXPECT_EQ(rows->num_boundaries(), encoded->num_boundaries()) << lib;

    std::size_t pcs = 0, libdw_pcs = 0, mask_pcs = 0;
    std::vector<std::string> diffs;
    const auto note = [&](std::string d) {
      if (diffs.size() < 8) diffs.push_back(std::move(d));
      else diffs.back() = "... " + d;
    };
    // Both indexes alike at `pc`; returns the rows-built index's answer.
    const auto same_answers = [&](std::uint64_t pc) -> Expected<RowMatch> {
      ++pcs;
      Expected<RowMatch> a = rows->find(pc);
      Expected<RowMatch> b = encoded->find(pc);
      if (a.has_value() != b.has_value() || (a && !(*a == *b)) ||
          (!a && a.error().code() != b.error().code()))
        note(fmt::format("{:#x}: find() differs from the encoded index's ({} / {})", pc,
                         a ? fmt::format("FDE {} FRE {}", a->fde_index, a->fre_index) : std::string(describe(a.error().code())),
                         b ? fmt::format("FDE {} FRE {}", b->fde_index, b->fre_index) : std::string(describe(b.error().code()))));
      Expected<std::uint32_t> x = rows->find_row(pc), y = encoded->find_row(pc);
      const bool row_same = x.has_value() == y.has_value() &&
                            (x ? (*x == RowIndex::kUseFind) == (*y == RowIndex::kUseFind) &&
                                     (*x == RowIndex::kUseFind || rows->row_at(*x) == encoded->row_at(*y))
                               : x.error().code() == y.error().code());
      if (!row_same) note(fmt::format("{:#x}: find_row() differs from the encoded index's", pc));
      if (rows->row_id(pc) < rows->num_rows() && !(rows->row_at(rows->row_id(pc)) == rows->row_at(*x)))
        note(fmt::format("{:#x}: row_id() and find_row() differ", pc));
      return a;
    };
    const std::vector<cfi::PltSection> plts = cfi::plt_sections(*f);
    for (const auto& p : plts)
      for (std::uint64_t pc = p.address; pc < p.address + p.size; ++pc, ++mask_pcs) (void)same_answers(pc);
    const auto in_plt = [&](const cfi::Function& fn) {
      for (const auto& p : plts)
        if (fn.start < p.address + p.size && p.address < fn.end) return true;
      return false;
    };
    auto ok = cfi::libdw_functions(*f, [&](const cfi::Function& fn) {
      if (in_plt(fn) || fn.rows.empty()) return;
      bool blocked = false;
      for (const auto& r : fn.rows) {
        if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
        blocked |= r.reason != cfi::Reason::kNone && !r.flex;
      }
      std::size_t k = 0;
      for (std::uint64_t pc = fn.start; pc < fn.end; ++pc) {
        while (k + 1 < fn.rows.size() && fn.rows[k + 1].start <= pc) ++k;
        const cfi::Row& want = fn.rows[k];
        Expected<RowMatch> got = same_answers(pc);
        ++libdw_pcs;
        if (blocked) {
          // A function SFrame cannot hold is left out.
          if (got || got.error().code() != LookupErrc::kPcNotCovered)
            note(fmt::format("{:#x}: libdw's rows cannot be said, yet covered", pc));
          continue;
        }
        if (!got) {
          note(fmt::format("{:#x}: {} (function {:#x}-{:#x})", pc, describe(got.error().code()), fn.start, fn.end));
          continue;
        }
        if (!(got->row == want.row) || got->signal != want.signal)
          note(fmt::format("{:#x}: row differs from libdw's (function {:#x}-{:#x})", pc, fn.start, fn.end));
      }
    });
    ASSERT_TRUE(ok) << lib;
    EXPECT_GT(libdw_pcs, 500000u) << lib;
    EXPECT_TRUE(diffs.empty()) << lib << ": " << diffs.size() << " differences, first " << (diffs.empty() ? "" : diffs.front())
                               << (diffs.size() > 1 ? "; last " + diffs.back() : "");
    std::printf("%s: %zu PCs compared (%zu against libdw, %zu in PLTs)\n", lib, pcs, libdw_pcs, mask_pcs);
  }
}
