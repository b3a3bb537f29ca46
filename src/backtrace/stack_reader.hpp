// SPDX-License-Identifier: MIT
// sframepp: the in-process walk's memory reader. Words inside the ranges
// known to be mapped (the thread's registered stack, the alternate signal
// stack the walk runs on) are loaded directly; any other address is first
// checked by the kernel, which answers EFAULT where a load would fault:
// a crash handler runs with SIGSEGV blocked, so a second fault would kill
// the process. Async-signal-safe: system calls only, no allocation.
#pragma once

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>

#include "sframe/unwind/unwind.hpp"

namespace sframe::bt {

/// Reads words of the calling process's memory without ever faulting.
///  - `ranges` (see add()): known-mapped ranges, read with a plain load (the
///    hot path);
///  - anything else goes through checked_read(): pages are checked with
///    process_vm_readv(2) on this process (one call checks up to
///    kPagesPerCall pages) and the run of pages found readable, `checked`,
///    grows page by page from where the walk has been, up to kMaxGap bytes
///    at a time; a word farther away is read by one process_vm_readv call
///    of its own and nothing is remembered.
/// Pages once found readable are read directly for the rest of the walk: a
/// walk reads stacks, whose pages are not unmapped under a running thread.
/// When the kernel refuses the call itself (a seccomp filter: EPERM,
/// ENOSYS), `refused` is set and the read fails.
/// The no_sanitize: a walk reads other frames' slots, which
/// AddressSanitizer may hold poisoned (redzones of live locals); the bounds
/// are checked here instead.
struct StackReader {
  static constexpr std::uint64_t kPage = 4096;
  static constexpr unsigned kPagesPerCall = 64;
  /// Most bytes one extension of `checked` may check (16 MiB: four times
  /// the default 8 MiB RLIMIT_STACK of the main thread, whose overflow
  /// leaves SP that far below the part a registered walk knows).
  static constexpr std::uint64_t kMaxGap = std::uint64_t{16} << 20;

  /// A known-mapped range as the hot path tests it: a word at `a` lies
  /// inside iff a - lo <= span (one subtraction, one comparison; the
  /// wrap-around of a below lo makes the difference huge).
  struct Span {
    std::uint64_t lo = 0;
    std::uint64_t span = 0;  // end - lo - 8
  };
  Span ranges[2];
  unsigned count = 0;

  /// Adds known-mapped range `r` (at most two; one shorter than a word is
  /// left out, as no word fits in it).
  void add(const AddressRange& r) noexcept {
    if (count < 2 && r.begin <= r.end && r.end - r.begin >= 8) ranges[count++] = {r.begin, r.end - r.begin - 8};
  }
  /// Where checked reads may go at all: everywhere for a thread that never
  /// registered its stack; for the main thread, its stack down to the
  /// RLIMIT_STACK floor (it grows on demand); nowhere for other threads,
  /// whose stack is known whole.
  AddressRange window;
  /// Pages found readable (or known mapped: a registered thread's stack
  /// starts it); empty when begin == end.
  mutable AddressRange checked;
  /// This process, looked up on the first checked read (a fork's child
  /// must not read its parent).
  mutable pid_t pid = 0;
  /// The kernel refused process_vm_readv (seccomp): nothing outside
  /// `ranges` and `checked` can be read.
  mutable bool refused = false;

  [[gnu::no_sanitize_address]] std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    std::uint64_t v;
    if (!try_read_word(addr, v)) return std::nullopt;
    return v;
  }

  /// read_word() without std::optional (which GCC passes through memory:
  /// a store-forwarding stall per read); the rule executor uses it.
  [[gnu::no_sanitize_address]] bool try_read_word(std::uint64_t addr, std::uint64_t& v) const noexcept {
    for (unsigned i = 0; i < count; ++i) {
      if (addr - ranges[i].lo <= ranges[i].span) {
        v = load(addr);
        return true;
      }
    }
    const std::optional<std::uint64_t> c = checked_read(addr);
    if (!c) return false;
    v = *c;
    return true;
  }

 private:
  // A native load of this process's own memory, not a byte-order
  // conversion; and it must happen inside this no_sanitize_address function
  // (a call to an instrumented helper such as endian::load would be checked
  // by ASan, which flags other frames' dead slots the walk reads).
  [[gnu::no_sanitize_address]] static std::uint64_t load(std::uint64_t addr) noexcept {
    std::uint64_t v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return v;
  }

  static std::uint64_t page_of(std::uint64_t a) noexcept { return a & ~(kPage - 1); }

  bool inside_checked(std::uint64_t addr) const noexcept {
    const AddressRange& r = checked;
    return addr >= r.begin && r.end - r.begin >= 8 && addr - r.begin <= r.end - r.begin - 8;
  }

  // process_vm_readv on this process: `n` remote iovecs, one local buffer.
  // Returns the bytes read, or -1 with errno set.
  long vm_read(const iovec* remote, unsigned n, void* buf, std::size_t len) const noexcept {
    if (pid == 0) pid = static_cast<pid_t>(syscall(SYS_getpid));
    iovec local{buf, len};
    const long got = syscall(SYS_process_vm_readv, pid, &local, 1ul, remote, static_cast<unsigned long>(n), 0ul);
    if (got < 0 && (errno == EPERM || errno == ENOSYS)) refused = true;
    return got;
  }

  // How many of the pages [from, to) are readable, counted from the end
  // nearest `checked`: `down` counts from `to - kPage` downwards, else
  // from `from` upwards. Stops at the first page that is not.
  std::uint64_t readable_pages(std::uint64_t from, std::uint64_t to, bool down) const noexcept {
    const std::uint64_t pages = (to - from) / kPage;
    std::uint64_t done = 0;
    char sink[kPagesPerCall];
    iovec remote[kPagesPerCall];
    while (done < pages) {
      const unsigned n = static_cast<unsigned>(pages - done < kPagesPerCall ? pages - done : kPagesPerCall);
      for (unsigned i = 0; i < n; ++i) {
        const std::uint64_t k = done + i;
        const std::uint64_t at = down ? to - (k + 1) * kPage : from + k * kPage;
        remote[i] = iovec{reinterpret_cast<void*>(at), 1};
      }
      const long got = vm_read(remote, n, sink, n);
      if (got <= 0) return done;
      done += static_cast<std::uint64_t>(got);
      if (static_cast<unsigned long>(got) < n) return done;
    }
    return done;
  }

  // Grows `checked` to cover [page_of(addr), page_of(addr + 7) + kPage)
  // when that is at most kMaxGap away; whether the word is then inside.
  bool extend_to(std::uint64_t addr) const noexcept {
    if (addr > UINT64_MAX - kPage - 8) return false;
    const std::uint64_t first = page_of(addr);
    const std::uint64_t last = page_of(addr + 7) + kPage;  // end of the word's last page
    if (checked.begin == checked.end) {
      if (readable_pages(first, last, false) != (last - first) / kPage) return false;
      checked = {first, last};
      return true;
    }
    if (last > checked.end && first >= checked.begin) {
      if (last - checked.end > kMaxGap) return false;
      const std::uint64_t got = readable_pages(checked.end, last, false);
      checked.end += got * kPage;
    } else if (first < checked.begin && last <= checked.end) {
      if (checked.begin - first > kMaxGap) return false;
      const std::uint64_t got = readable_pages(first, checked.begin, true);
      checked.begin -= got * kPage;
    } else {
      return false;
    }
    return inside_checked(addr);
  }

  [[gnu::noinline, gnu::cold, gnu::no_sanitize_address]] std::optional<std::uint64_t> checked_read(
      std::uint64_t addr) const noexcept {
    if (inside_checked(addr)) return load(addr);
    if (refused || addr < window.begin || addr > window.end || window.end - addr < 8) return std::nullopt;
    if (extend_to(addr)) return load(addr);
    if (refused) return std::nullopt;
    // Far from where the walk has been (or across an unreadable page): the
    // kernel copies the word, or says it cannot.
    std::uint64_t v = 0;
    if (addr > UINT64_MAX - 8) return std::nullopt;
    iovec remote{reinterpret_cast<void*>(addr), 8};
    if (vm_read(&remote, 1, &v, sizeof v) != 8) return std::nullopt;
    return v;
  }
};
static_assert(MemoryReader<StackReader>);

}  // namespace sframe::bt
