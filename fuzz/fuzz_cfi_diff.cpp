// SPDX-License-Identifier: MIT
// libFuzzer target: our single-pass CFI reader (sframe/unwind/cfi_reader.hpp)
// against elfutils libdw, row for row, on hostile CFI. The input's first
// byte picks the machine (bit 0: x86-64 or AArch64), the section (bit 1:
// .eh_frame or .debug_frame) and whether .text exists (bit 2); the rest is
// the section's bytes, put into a minimal ELF shared object at 0x10000. The
// readers must agree at every row start either gives (compare_readers()),
// and neither may crash, hang or allocate without bound. The same bytes
// then go through the in-process backtrace's generation (a RowIndex built
// from the translator's rows), which must answer as libdw's rows. Not compared: the
// input classes where libdw is wrong or the CFI has no defined meaning
// (CfiClassCounts; each has a kept input in
// tests/fuzz_regressions/fuzz_cfi_diff/, tests/fuzz_regressions/README.md).
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>
#include <string>
#include <vector>

#include "check_encode.hpp"
#include "memfd.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/module_unwind.hpp"

namespace {

template <typename T>
void put(std::vector<std::uint8_t>& out, std::size_t at, const T& v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

// ELF64 little-endian ET_DYN: header, the CFI section, .text (optional),
// .shstrtab, section headers.
std::vector<std::uint8_t> make_elf(const std::uint8_t* cfi, std::size_t n, bool aarch64, bool debug, bool text) {
  const char names[] = "\0.eh_frame\0.debug_frame\0.text\0.shstrtab";
  const std::uint32_t name_eh = 1, name_debug = 11, name_text = 24, name_shstr = 30;
  const std::size_t cfi_off = sizeof(Elf64_Ehdr);
  const std::size_t str_off = cfi_off + n;
  const std::size_t sh_off = (str_off + sizeof names + 7) & ~std::size_t{7};
  const unsigned shnum = text ? 4 : 3;
  std::vector<std::uint8_t> out(sh_off + shnum * sizeof(Elf64_Shdr));
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = aarch64 ? EM_AARCH64 : EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shoff = sh_off;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<Elf64_Half>(shnum);
  eh.e_shstrndx = static_cast<Elf64_Half>(shnum - 1);
  put(out, 0, eh);
  if (n) std::memcpy(out.data() + cfi_off, cfi, n);
  std::memcpy(out.data() + str_off, names, sizeof names);
  Elf64_Shdr sh{};
  std::size_t at = sh_off + sizeof sh;  // [0] is the null section
  sh.sh_name = debug ? name_debug : name_eh;
  sh.sh_type = SHT_PROGBITS;
  sh.sh_flags = debug ? 0 : SHF_ALLOC;
  sh.sh_addr = debug ? 0 : 0x10000;
  sh.sh_offset = cfi_off;
  sh.sh_size = n;
  sh.sh_addralign = 8;
  put(out, at, sh);
  at += sizeof sh;
  if (text) {
    Elf64_Shdr t{};
    t.sh_name = name_text;
    t.sh_type = SHT_NOBITS;
    t.sh_flags = SHF_ALLOC | SHF_EXECINSTR;
    t.sh_addr = 0x20000;
    t.sh_size = 0x10000;
    put(out, at, t);
    at += sizeof t;
  }
  Elf64_Shdr s{};
  s.sh_name = name_shstr;
  s.sh_type = SHT_STRTAB;
  s.sh_offset = str_off;
  s.sh_size = sizeof names;
  put(out, at, s);
  return out;
}

// The in-process backtrace's path over the same bytes, as a loaded
// module's CFI: ModuleUnwind::generate() without an FdeIndex, whose
// RowIndex::Builder takes the translator's rows in place (no encoded
// section). It must refuse cleanly or build; when `libdw_is_truth` (the
// readers agreed row for row, with none of the classes where libdw is not
// the truth), its index must answer as libdw's rows at the first and last
// byte of every row of every function SFrame can hold.
void check_rows_built_index(const sframe::elf::ElfFile& file, const std::uint8_t* cfi, std::size_t n, bool aarch64,
                            bool debug, bool libdw_is_truth) {
  using namespace sframe;
  const Abi abi = aarch64 ? Abi::kAarch64Little : Abi::kAmd64Little;
  // At the address cfi_sources() gives each (make_elf()'s sh_addr).
  const cfi::CfiSource src{std::span<const std::byte>(reinterpret_cast<const std::byte*>(cfi), n), debug ? 0u : 0x10000u,
                           debug ? cfi::CfiKind::kDebugFrame : cfi::CfiKind::kEhFrame, false, 8, 0, 0};
  cfi::ModuleUnwindOptions opt;
  opt.fde_index_with_rows = false;
  cfi::ModuleUnwind m = cfi::ModuleUnwind::build(cfi::ModuleImage{}, opt);
  if (!m.generate(std::span<const cfi::CfiSource>(&src, 1), abi, 0) || !libdw_is_truth) return;
  const cfi::UnwindSection& s = m.primary();
  if (!s.rows) return;  // an encoded section instead (e.g. FDEs a RowIndex cannot hold)
  // FDEs with the start of an earlier one (CfiStats::duplicates; linkers
  // never make them): ours keeps the first, libdw answers from whichever
  // its search finds, as for overlapping FDEs.
  // Which FDEs exist is the reader's answer, compared with libdw's above
  // (where libdw reads records past .eh_frame's zero terminator, ours ends
  // there, LSB 5.0): compared here are the PCs both readers cover.
  cfi::CfiStats stats;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ours;  // by start (read_cfi()'s order)
  if (!cfi::read_cfi(src, abi, [&](const cfi::Function& f) { ours.emplace_back(f.start, f.end); }, &stats) ||
      stats.duplicates != 0)
    return;
  const auto covered = [&](std::uint64_t pc) {
    auto it = std::upper_bound(ours.begin(), ours.end(), pc, [](std::uint64_t v, const auto& r) { return v < r.first; });
    return it != ours.begin() && pc < std::prev(it)->second;
  };
  (void)cfi::libdw_functions(file, [&](const cfi::Function& fn) {
    bool blocked = fn.end - fn.start > UINT32_MAX;
    for (const cfi::Row& r : fn.rows) {
      if (r.reason == cfi::Reason::kCfiTooLong) return;  // past libdw's work bound: no truth
      blocked |= r.reason != cfi::Reason::kNone && !r.flex;
    }
    if (blocked) return;  // left out of SFrame (or, x86-64, ld's .plt recognized)
    for (const cfi::Row& want : fn.rows)
      for (const std::uint64_t pc : {want.start, want.end > want.start ? want.end - 1 : want.start}) {
        if (!covered(pc)) continue;
        const Expected<RowMatch> got = s.rows->find(pc);
        // libdw does not report AArch64's RA signing state
        // (DW_CFA_AARCH64_negate_ra_state): not compared, as
        // compare_readers() leaves it out.
        FrameRow mine = got ? got->row : FrameRow{};
        mine.ra_mangled = want.row.ra_mangled;
        if (!got || !(mine == want.row) || got->signal != want.signal) {
          const auto rule = [](const Rule& r) {
            return std::to_string(static_cast<int>(r.kind)) + "/" + std::to_string(static_cast<int>(r.base)) + "/" +
                   std::to_string(r.regnum) + "/" + std::to_string(r.offset) + (r.deref ? "*" : "");
          };
          const auto row = [&](const FrameRow& r) {
            return "cfa " + rule(r.cfa) + " ra " + rule(r.ra) + " fp " + rule(r.fp) + (r.ra_mangled ? " mangled" : "");
          };
          std::fprintf(stderr, "sframe fuzz: rows-built index at 0x%llx (function 0x%llx-0x%llx): %s (libdw: %s)\n",
                       static_cast<unsigned long long>(pc), static_cast<unsigned long long>(fn.start),
                       static_cast<unsigned long long>(fn.end),
                       got ? ("row differs: " + row(got->row)).c_str() : "not covered", row(want.row).c_str());
          SFRAME_FUZZ_CHECK(got && mine == want.row && got->signal == want.signal);
        }
      }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sframe;
  if (size < 1) return 0;
  const bool aarch64 = data[0] & 1, debug = data[0] & 2, text = data[0] & 4;
  const std::vector<std::uint8_t> image = make_elf(data + 1, size - 1, aarch64, debug, text);
  const std::string& path = fuzz::memfd_path(image.data(), image.size());
  auto file = elf::ElfFile::open(path);
  SFRAME_FUZZ_CHECK(file.has_value());
  // Our rows keep their invariants on their own.
  const Expected<void> walked = cfi::for_each_function(*file, [&](const cfi::Function& f) {
    std::uint64_t at = f.start;
    for (const cfi::Row& r : f.rows) {
      SFRAME_FUZZ_CHECK(r.start == at && r.start < r.end && r.end <= f.end);
      at = r.end;
    }
    SFRAME_FUZZ_CHECK(at == f.end);
  });
  if (!walked) {
    const ErrorCode c = walked.error().code();
    SFRAME_FUZZ_CHECK(c == ElfErrc::kElfError || c == CfiErrc::kBadCfi);
    return 0;
  }
  const Expected<cfi::ReaderComparison> d = cfi::compare_readers(*file, 1, true);
  if (!d) {
    const ErrorCode c = d.error().code();
    SFRAME_FUZZ_CHECK(c == ElfErrc::kElfError || c == CfiErrc::kBadCfi);
    return 0;
  }
  // Not compared: inputs of a class where libdw is not the truth (libdw
  // bugs and limits, bounds of ours, bytes the two read otherwise; each
  // class and its evidence: CfiClassCounts, sframe/unwind/cfi_reader.hpp).
  // Crashes and our row invariants are checked on every input.
  const bool comparable = !d->any();
  if (d->differing_rows != 0 && comparable) {
    const auto& x = d->examples[0];
    std::fprintf(stderr, "sframe fuzz: %llu rows differ from libdw; first at 0x%llx (FDE 0x%llx): %s\n",
                 static_cast<unsigned long long>(d->differing_rows), static_cast<unsigned long long>(x.pc),
                 static_cast<unsigned long long>(x.function_start), std::string(x.what).c_str());
    SFRAME_FUZZ_CHECK(d->differing_rows == 0);
  }
  check_rows_built_index(*file, data + 1, size - 1, aarch64, debug, comparable && d->differing_rows == 0);
  return 0;
}
