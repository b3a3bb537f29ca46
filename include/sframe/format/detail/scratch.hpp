// SPDX-License-Identifier: MIT
// sframepp (private): an allocator for large buffers that live only while
// something is built (RowIndex::Builder's staging, the CFI reader's FDE
// list): pages of their own from mmap, given back to the system by munmap
// when freed. Namespace detail: no API promise.
//
// Why not malloc: glibc serves a block of 128 KiB or more with mmap, but
// once such a block is freed it raises its mmap threshold to that block's
// size (dynamic threshold, up to 32 MiB; mallopt(3) M_MMAP_THRESHOLD), so
// the next transient buffers of a generation come from the heap, or from
// the fresh arena glibc gives a new thread (the background generator), and
// the holes they leave there stay resident after init: hundreds of KiB of
// RSS held for nothing. mallopt() and malloc_trim() would change the whole
// program's allocator, which a library must not do.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace sframe::detail {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kScratchMmap = false;  // ASan checks the bounds of operator new's blocks only
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kScratchMmap = false;
#else
inline constexpr bool kScratchMmap = true;
#endif
#else
inline constexpr bool kScratchMmap = true;
#endif

/// Bytes of a 2 MiB transparent huge page.
inline constexpr std::size_t kHugePage = 2 * 1024 * 1024;

/// Asks for transparent huge pages over the 2 MiB-aligned part of
/// [p, p + bytes), a block not yet written (THP "madvise" mode): each 4 KiB
/// page of a fresh mapping costs a fault when first written, a 2 MiB page
/// one fault for all 512. A hint only; nothing for a block of less
/// than 4 MiB, which may hold no aligned 2 MiB.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
  if (!kScratchMmap || bytes < 2 * kHugePage) return;
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (b + kHugePage - 1) & ~(kHugePage - 1), hi = (b + bytes) & ~(kHugePage - 1);
  if (lo < hi) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

/// std::allocator for transient buffers: blocks of kScratchMmapMin bytes
/// or more are mapped and unmapped whole (untouched pages of a generous
/// reserve() cost address space only); smaller ones use operator new.
template <class T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr std::size_t kScratchMmapMin = 64 * 1024;
  ScratchAllocator() noexcept = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (!kScratchMmap || bytes < kScratchMmapMin) return static_cast<T*>(::operator new(bytes));
    void* p = mmap(nullptr, mapped(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Transparent huge pages where the system gives them on request (THP
    // "madvise" mode): for libLLVM-14 (its Builder staging, FDE list and
    // sort buffer) 2,600 of 11,500 faults go. The block is unmapped whole
    // once built, so the 2 MiB rounding holds no RSS after.
    advise_huge_pages(p, mapped(bytes));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (!kScratchMmap || bytes < kScratchMmapMin)
      ::operator delete(p);
    else
      munmap(p, mapped(bytes));
  }
  template <class U>
  friend bool operator==(const ScratchAllocator&, const ScratchAllocator<U>&) noexcept {
    return true;
  }

 private:
  /// The length mapped for a block of `bytes`: from 2 MiB on, a multiple of
  /// 2 MiB, which Linux (6.7 on) places at a 2 MiB boundary, so that the
  /// whole block can take huge pages (a 3 MiB FDE list had none inside it).
  static std::size_t mapped(std::size_t bytes) noexcept {
    return bytes < kHugePage ? bytes : (bytes + kHugePage - 1) & ~(kHugePage - 1);
  }
};

}  // namespace sframe::detail
