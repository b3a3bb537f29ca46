// SPDX-License-Identifier: MIT
// sframepp (private): giving back the pages of a loaded module's .eh_frame
// that generating SFrame from it made resident (see page_release.cpp for
// the rule and why it is safe).
#pragma once

#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace sframe::bt {

/// Whole pages of runtime addresses [begin, end); empty when begin == end.
struct PageRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  friend bool operator==(const PageRange&, const PageRange&) = default;
};

/// The module's dynamic section (PT_DYNAMIC, read where it is loaded) has
/// DT_TEXTREL, or DF_TEXTREL in DT_FLAGS: the dynamic linker wrote
/// relocations into segments without PF_W. False without PT_DYNAMIC.
bool has_text_relocations(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias) noexcept;

/// The pages of runtime [begin, end) (CFI bytes of a module loaded at
/// `bias` with program headers `phdrs`) that release_pages() may drop:
/// whole `page`-sized pages inside the file-backed part of one PT_LOAD
/// without PF_W, none of them overlapping (at page granularity) a PT_LOAD
/// with PF_W or PT_GNU_RELRO; empty for a module with `text_relocations`,
/// or when [begin, end) lies in no such PT_LOAD. `page` is a power of two.
PageRange releasable_pages(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias, std::uint64_t begin,
                           std::uint64_t end, std::size_t page, bool text_relocations) noexcept;

/// madvise(MADV_DONTNEED) over releasable_pages() of [begin, end), for the
/// module's own phdrs and dynamic section. Returns the bytes given back (0
/// when nothing may be, or madvise failed).
std::size_t release_pages(std::span<const ElfW(Phdr)> phdrs, std::uint64_t bias, std::uint64_t begin,
                          std::uint64_t end) noexcept;

}  // namespace sframe::bt
