// SPDX-License-Identifier: MIT
// The single-pass CFI reader (sframe/unwind/cfi_reader.hpp) against independent
// truths: elfutils libdw's rows, row for row (corpus files, programs compiled
// here, system libraries), GNU as's SFrame (AArch64 PAuth signing state), nm
// (function starts of static and .debug_frame-only programs), and CFI bytes
// written by hand from DWARF 5 §6.4 with their rows worked out by hand.
#include <gtest/gtest.h>

#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <map>
#include <set>
#include <string>

#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_unwind.hpp"
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

// The CIE and FDE records of a file's .eh_frame as binutils' readelf lists
// them (readelf --debug-dump=frames): offset -> (record bytes, CIE offset,
// pc range) for FDEs, offset -> record bytes for CIEs.
struct ReadelfFrames {
  struct Fde {
    std::uint64_t size = 0, cie = 0, start = 0, end = 0;
  };
  std::map<std::uint64_t, Fde> fdes;
  std::map<std::uint64_t, std::uint64_t> cies;
  std::uint64_t eh_frame_address = 0;
};

ReadelfFrames readelf_frames(const std::string& path) {
  ReadelfFrames out;
  FILE* p = popen(("readelf -wf '" + path + "' 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char line[512];
  bool in_eh = false;
  while (std::fgets(line, sizeof line, p)) {
    const std::string_view l(line);
    if (l.starts_with("Contents of")) in_eh = l.find(" .eh_frame section") != std::string_view::npos;
    if (!in_eh) continue;
    unsigned long long off = 0, len = 0, id = 0, cie = 0, lo = 0, hi = 0;
    char kind = 0;
    if (std::sscanf(line, "%llx %llx %llx FDE cie=%llx pc=%llx..%llx", &off, &len, &id, &cie, &lo, &hi) == 6)
      out.fdes[off] = {len + 4, cie, lo, hi};
    else if (std::sscanf(line, "%llx %llx %llx CI%c", &off, &len, &id, &kind) == 4)
      out.cies[off] = len + 4;
  }
  pclose(p);
  FILE* q = popen(("readelf -SW '" + path + "' | awk '{ for (i = 1; i < NF; i++) if ($i == \".eh_frame\") print $(i + 2) }'").c_str(), "r");
  if (q) {
    unsigned long long a = 0;
    if (std::fscanf(q, "%llx", &a) == 1) out.eh_frame_address = a;
    pclose(q);
  }
  return out;
}

// The reader's record listing (for_each_fde_record(), which libdw_functions
// lists FDEs with) and .eh_frame_hdr decoding (read_eh_frame_hdr(), which
// the in-process backtrace finds functions and .eh_frame with) against
// binutils: every FDE record readelf lists, at the same offset with the
// same size, CIE and PC range, and nothing else; eh_frame_ptr is the
// .eh_frame section's address; every table entry names an FDE record
// readelf lists with that start, and the table lists every FDE with a range.
TEST(CfiReader, RecordsAndEhFrameHdrAgreeWithReadelf) {
  std::vector<std::string> files = {"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"};
  for (const auto& c : sframe_test::golden_cases())
    if (c.dir.filename() == "x86_64-v2-linked") files.push_back((c.dir / c.file).string());
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const ReadelfFrames want = readelf_frames(path);
    ASSERT_GT(want.fdes.size(), 0u) << "readelf (binutils) listed no FDE: the oracle is missing or failed";
    ASSERT_NE(want.eh_frame_address, 0u);
    auto f = elf::ElfFile::open(path);
    ASSERT_TRUE(f);
    auto srcs = cfi::cfi_sources(*f);
    ASSERT_TRUE(srcs);
    const cfi::CfiSource& eh = srcs->front();
    ASSERT_EQ(eh.kind, cfi::CfiKind::kEhFrame);
    std::size_t seen = 0;
    auto listed = cfi::for_each_fde_record(eh, *cfi::abi_of(f->info()), [&](const cfi::FdeRecord& r) {
      ++seen;
      const auto it = want.fdes.find(r.offset);
      ASSERT_NE(it, want.fdes.end()) << std::hex << r.offset;
      EXPECT_TRUE(r.readable) << std::hex << r.offset;
      EXPECT_EQ(r.size, it->second.size) << std::hex << r.offset;
      EXPECT_EQ(r.cie_offset, it->second.cie) << std::hex << r.offset;
      const auto cie = want.cies.find(r.cie_offset);
      ASSERT_NE(cie, want.cies.end()) << std::hex << r.offset;
      EXPECT_EQ(r.cie_size, cie->second) << std::hex << r.offset;
      EXPECT_EQ(r.start, it->second.start) << std::hex << r.offset;
      EXPECT_EQ(r.end, it->second.end) << std::hex << r.offset;
    });
    ASSERT_TRUE(listed);
    EXPECT_EQ(seen, want.fdes.size());

    auto hdr_bytes = f->section_bytes(".eh_frame_hdr");
    ASSERT_TRUE(hdr_bytes);
    auto hdr = cfi::read_eh_frame_hdr(hdr_bytes->bytes, hdr_bytes->header.address, f->info().big_endian);
    ASSERT_TRUE(hdr) << describe(hdr.error().code()) << " at " << hdr.error().offset;
    EXPECT_EQ(hdr->eh_frame, want.eh_frame_address);
    ASSERT_TRUE(hdr->has_table);
    std::set<std::uint64_t> in_table;
    for (std::uint32_t i = 0; i < hdr->count; ++i) {
      const std::uint64_t off = hdr->fde(i) - want.eh_frame_address;
      const auto it = want.fdes.find(off);
      ASSERT_NE(it, want.fdes.end()) << "entry " << i << std::hex << " FDE at 0x" << off;
      EXPECT_EQ(hdr->start(i), it->second.start) << "entry " << i;
      in_table.insert(off);
      // The lookup by PC finds this entry's FDE (starts are distinct).
      auto e = cfi::eh_frame_hdr_lookup(hdr_bytes->bytes, hdr_bytes->header.address, hdr->start(i));
      ASSERT_TRUE(e);
      EXPECT_EQ(e->fde, hdr->fde(i)) << "entry " << i;
    }
    for (const auto& [off, fde] : want.fdes) {
      if (fde.end > fde.start) {
        EXPECT_TRUE(in_table.count(off)) << std::hex << "FDE at 0x" << off << " not in the table";
      }
    }
    // The same section in the other byte order (every 4-byte field of the
    // header and the table reversed, as a big-endian linker writes them)
    // reads the same, against the same truth.
    ASSERT_EQ(hdr->bytes[1], std::byte{0x1b});  // eh_frame_ptr pcrel|sdata4, as ld writes it
    std::vector<std::byte> swapped(hdr_bytes->bytes.begin(), hdr_bytes->bytes.end());
    for (std::size_t at = 4; at + 4 <= hdr->table + std::size_t{8} * hdr->count; at += 4)
      std::reverse(swapped.begin() + static_cast<std::ptrdiff_t>(at), swapped.begin() + static_cast<std::ptrdiff_t>(at + 4));
    auto other = cfi::read_eh_frame_hdr(swapped, hdr_bytes->header.address, !f->info().big_endian);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->eh_frame, want.eh_frame_address);
    ASSERT_EQ(other->count, hdr->count);
    for (std::uint32_t i = 0; i < other->count; ++i) {
      const auto it = want.fdes.find(other->fde(i) - want.eh_frame_address);
      ASSERT_NE(it, want.fdes.end()) << "entry " << i;
      EXPECT_EQ(other->start(i), it->second.start) << "entry " << i;
    }
    // The loaded-module form (host byte order) finds the same .eh_frame.
    auto at = cfi::eh_frame_hdr_eh_frame(hdr_bytes->bytes, hdr_bytes->header.address);
    ASSERT_TRUE(at);
    EXPECT_EQ(*at, want.eh_frame_address);
  }
}

}  // namespace
