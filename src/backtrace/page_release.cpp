// SPDX-License-Identifier: MIT
// sframepp: giving back the .eh_frame pages generation made resident.
//
// Generating SFrame from a module's in-memory .eh_frame reads all of it
// once (5 MB for libLLVM-14), and every page read stays mapped: RSS the
// process keeps for a section only a C++ exception or a libgcc unwind
// reads again. Those pages are file pages of a private mapping, so
// madvise(MADV_DONTNEED) unmaps them and a later read maps them again
// from the page cache (a minor fault; the file's contents). That is only
// right for a page nothing ever wrote: in a MAP_PRIVATE mapping a written
// page is a private anonymous copy, and MADV_DONTNEED throws the copy away
// (the page reverts to the file's bytes). The dynamic linker writes
// relocations into pages of a module's writable PT_LOAD segments (RELRO,
// .data.rel.ro, .got: written, then made read-only), and, for a module with
// text relocations (DT_TEXTREL / DF_TEXTREL), into segments without PF_W,
// which it makes writable for the while. Hence the rule: a page is given
// back only when
//  - it lies wholly inside the CFI bytes: .eh_frame up to the end of its
//    segment's file part (after it come only read-only sections such as
//    .gcc_except_table, which the kernel's fault-around mapped along with
//    the reads), from the .eh_frame_hdr right before it where there is one
//    (only libgcc's unwinder reads it, for an exception or a backtrace);
//    the partial pages at either end stay,
//  - it lies wholly inside the file-backed part (p_filesz) of one PT_LOAD
//    without PF_W (past p_filesz the page is zero-filled memory, not file),
//  - no PT_LOAD with PF_W and no PT_GNU_RELRO overlaps any of the range's
//    pages (a hand-made module could map a writable segment over the same
//    pages: the range is then refused whole),
//  - the module has no text relocations.
// Modules come from dl_iterate_phdr, which glibc's dynamic linker (and the
// kernel, for the program and the interpreter) mapped from their files: the
// pages are file-backed. A concurrent reader (an exception thrown on another
// thread) only takes a minor fault. A library file rewritten in place
// while mapped already breaks a process on any page not yet resident; this
// adds .eh_frame's pages to those.
#include "page_release.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace sframe::bt {

bool has_text_relocations(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias) noexcept {
  for (const ElfW(Phdr)& p : phdrs) {
    if (p.p_type != PT_DYNAMIC || p.p_memsz < sizeof(ElfW(Dyn))) continue;
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(bias + p.p_vaddr);
    const std::size_t n = p.p_memsz / sizeof(ElfW(Dyn));
    for (std::size_t i = 0; i < n && dyn[i].d_tag != DT_NULL; ++i) {
      if (dyn[i].d_tag == DT_TEXTREL) return true;
      if (dyn[i].d_tag == DT_FLAGS && (dyn[i].d_un.d_val & DF_TEXTREL)) return true;
    }
  }
  return false;
}

PageRange releasable_pages(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias, std::uint64_t begin,
                           std::uint64_t end, std::size_t page, bool text_relocations) noexcept {
  if (text_relocations || end <= begin) return {};
  const std::uint64_t mask = page - 1;
  const auto down = [&](std::uint64_t a) { return a & ~mask; };
  const auto up = [&](std::uint64_t a) { return a > UINT64_MAX - mask ? UINT64_MAX & ~mask : (a + mask) & ~mask; };
  // The read-only PT_LOAD holding `begin`: its file-backed part bounds the range.
  std::uint64_t lo = 0, hi = 0;
  bool found = false;
  for (const ElfW(Phdr)& p : phdrs) {
    if (p.p_type != PT_LOAD || (p.p_flags & PF_W) || p.p_filesz == 0) continue;
    const std::uint64_t s = bias + p.p_vaddr, e = s + p.p_filesz;
    if (e < s || begin < s || begin >= e) continue;
    lo = std::max(up(begin), up(s));
    hi = std::min(down(end), down(e));
    found = true;
    break;
  }
  if (!found || hi <= lo) return {};
  for (const ElfW(Phdr)& p : phdrs) {
    const bool written = (p.p_type == PT_LOAD && (p.p_flags & PF_W)) || p.p_type == PT_GNU_RELRO;
    if (!written || p.p_memsz == 0) continue;
    const std::uint64_t s = down(bias + p.p_vaddr), e = up(bias + p.p_vaddr + p.p_memsz);
    if (s < hi && lo < e) return {};
  }
  return {lo, hi};
}

std::size_t release_pages(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias, std::uint64_t begin,
                          std::uint64_t end) noexcept {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || (page & (page - 1)) != 0) return 0;
  const PageRange r =
      releasable_pages(phdrs, bias, begin, end, static_cast<std::size_t>(page), has_text_relocations(phdrs, bias));
  if (r.end <= r.begin) return 0;
  if (madvise(reinterpret_cast<void*>(r.begin), r.end - r.begin, MADV_DONTNEED) != 0) return 0;
  return static_cast<std::size_t>(r.end - r.begin);
}

}  // namespace sframe::bt
