// SPDX-License-Identifier: MIT
// sframepp: in-process, async-signal-safe stack traces from SFrame.
//
// sframe::backtrace() walks the calling thread's stack with the SFrame
// sections of the loaded modules: PT_GNU_SFRAME where a module has one, else
// a section generated from the module's .eh_frame (sframe::cfi::generate) at
// initialisation. After backtrace_init(), a walk allocates nothing, takes no
// lock and calls no libc function other than bare system calls
// (sigaltstack(2) on the alternate signal stack, process_vm_readv(2) and
// getpid(2) for the reads below): it is async-signal-safe, on every thread.
// Memory is read directly only inside ranges known to be mapped (a
// registered thread's stack, the alternate signal stack the walk runs on);
// any other read (a thread that never registered, the main thread's stack
// grown below its registered part, as after a stack overflow) is first
// checked by the kernel with process_vm_readv on this process, page by
// page, so a walk never faults, even in a SIGSEGV handler. Never the
// modules' own mappings (sections are copied at init).
// backtrace_register_thread() is an optimisation: it gives the thread a
// rule cache (compact rules of the unwind core, 4096 entries) and a memo of
// its last walk, and its stack bounds; a walk that interrupts another walk
// on the same thread goes without them.
//
// Addresses returned: frame 0 is the return address into the caller of
// backtrace() (or, for the ucontext_t variant, the exact interrupted PC);
// every further frame is a return address (RA, not RA-1), except the frame
// right after a signal trampoline, which is the exact PC the signal
// interrupted. This is what glibc's backtrace() and libunwind's
// unw_backtrace() report, so the lists compare entry by entry. Symbolizers
// wanting the call instruction should look up RA-1 for return addresses.
//
// x86-64 Linux only (the SFrame ABI the machine runs); elsewhere every walk
// returns 0 frames with StopReason::kUnsupported.
#pragma once
// Library: libsframepp-backtrace (sframepp::backtrace). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/format/error.hpp"
#include "sframe/format/format.hpp"
#include "sframe/unwind/modules.hpp"
#include "sframe/unwind/stop_reason.hpp"

struct ucontext_t;

namespace sframe {

/// Why a backtrace ended: the one stop vocabulary of every walk
/// (sframe/unwind/stop_reason.hpp). The backtrace reports kDepthLimit when `out`
/// is full, and beside the unwinder's reasons kNotInitialized,
/// kUnsupported and kReadCheckRefused.
using BacktraceStop = StopReason;

/// Former name of stop_reason_name(), kept for source compatibility.
inline std::string_view backtrace_stop_name(StopReason r) noexcept { return stop_reason_name(r); }

/// Outcome of a walk.
struct BacktraceResult {
  /// Addresses written to the output span.
  std::size_t size = 0;
  StopReason reason = StopReason::kOutermost;
  /// kUnreadableMemory: the address; kNoSFrameForPc/kBadRule: the lookup PC;
  /// kCfaNotIncreasing: the CFA; else 0.
  std::uint64_t address = 0;
};

/// How backtrace_init() obtains SFrame for the modules.
struct BacktraceOptions {
  /// Version of the sections generated from .eh_frame: kV2 or kV3 (FLEX
  /// FDEs, so more functions are covered).
  Version generated_version = Version::kV3;
  /// Generate from .eh_frame even for modules that have PT_GNU_SFRAME (to
  /// test the generator against the assembler's sections).
  bool always_generate = false;
  /// backtrace_init() generates SFrame at once only for the modules with a
  /// return address on the calling thread's stack (the program and libc,
  /// typically) and leaves the others to a background thread, those with
  /// their own SFrame section too (copied and indexed there), unread until
  /// then: init then costs about what those modules need. Until a module
  /// is ready its frames are walked by the checked frame-pointer fallback
  /// (a return address must land in code, the CFA must move up the stack).
  /// backtrace_wait_ready() waits for the rest. The thread blocks every
  /// signal, starts again in a forked child that still has work, and ends
  /// when no module is left. False: generate everything in
  /// backtrace_init(). backtrace_refresh() always generates at once.
  bool background_generation = true;
  /// With background_generation: backtrace_init() starts no thread; the
  /// modules it leaves wait (walked by the frame-pointer fallback, as while
  /// the thread works) until the program calls backtrace_start_background(),
  /// e.g. once its own start-up is done, so that init costs only itself.
  /// backtrace_wait_ready() before that builds them on the calling thread.
  /// A forked child starts a thread only if its parent had.
  bool defer_background_start = false;
  /// With background_generation: of a shared library on the calling
  /// thread's stack (libc under main, this library), generate at once only
  /// the functions of those frames, each from its FDE (.eh_frame_hdr's
  /// table finds it), and leave the rest of it to the background thread
  /// too; the main program is still generated whole. Init then costs a few
  /// FDEs instead of all of libc (about a fifth of the time and half of the
  /// RSS for a C++ program), but until libc is ready a walk through any
  /// other libc function (raise, abort, a signal trampoline) takes the
  /// frame-pointer fallback, so a crash right after init may get a shorter
  /// trace. False (the default): such libraries are generated whole in init.
  bool stack_libraries_per_fde = false;
  /// Once a module's SFrame is generated from its loaded .eh_frame, give
  /// back the .eh_frame pages the reading made resident
  /// (madvise(MADV_DONTNEED), only on pages no relocation can have written:
  /// read-only segments of modules without text relocations). They are
  /// mapped again from the page cache when the program reads them (a C++
  /// exception, a libgcc unwind: a minor fault per page). False: keep them.
  bool release_cfi_pages = true;
};

/// Where a module's SFrame comes from in the backtrace's module table:
/// deprecated name of sframe::ModuleSource (sframe/unwind/modules.hpp), the one
/// enum (kNative: its PT_GNU_SFRAME section, copied, with SFrame generated
/// from .eh_frame only for the functions that section lacks; kGenerated;
/// kNone: the vDSO, data-only libraries without code to unwind, and modules
/// that failed). sframe::to_string(ModuleSource) names it.
using BacktraceModuleSource = ModuleSource;

/// One module of the table, as backtrace_init()/backtrace_refresh() built it.
struct BacktraceModuleReport {
  /// The module's path as the dynamic linker gives it (the main program's
  /// resolved from /proc/self/exe; the vDSO's "linux-vdso.so.1").
  std::string name;
  /// Load bias (runtime address = link-time address + bias).
  std::uint64_t bias = 0;
  ModuleSource source = ModuleSource::kNone;
  /// kNative: functions generated from .eh_frame because PT_GNU_SFRAME
  /// lacks them (0: it covers every FDE .eh_frame_hdr lists, nothing was
  /// generated).
  std::size_t extra_functions = 0;
  /// The outcome in words, e.g. "own SFrame section covers every .eh_frame
  /// FDE", "no SFrame section; generated from .eh_frame", "no SFrame
  /// section; no .eh_frame FDEs (no code to unwind)".
  std::string reason;
  /// Set when the module has unwind information (.eh_frame FDEs) but no
  /// SFrame could be made from it (file unreadable, CFI unusable): why, and
  /// `reason` ends with it in words. A module without any unwind
  /// information (a data-only library) is not a failure.
  std::optional<Error> error;
  /// True when `error` is set.
  bool failed() const noexcept { return error.has_value(); }
};

/// Every module of the table built by backtrace_init()/backtrace_refresh().
struct BacktraceInitReport {
  std::vector<BacktraceModuleReport> modules;
  /// Modules with `failed` set.
  std::size_t failures() const noexcept;
  /// One line "PATH: reason" per failed module ("" when none failed).
  std::string message() const;
};

/// One-time initialisation: builds the module table (every module of
/// dl_iterate_phdr with executable code; for each, the shared per-module
/// builder of sframe/unwind/module_unwind.hpp: its PT_GNU_SFRAME section copied,
/// or an SFrame section generated from its .eh_frame; for a module with
/// PT_GNU_SFRAME, SFrame is generated only for the FDEs of .eh_frame_hdr
/// that section lacks, so one covering every function generates nothing;
/// the vDSO has no file and is walked through by the frame-pointer
/// fallback), compiles each section that passes validate(kStrict) into a
/// RowIndex for the lookups of cold frames (about 8 bytes per FRE), else
/// an FdeIndex, finds glibc's signal trampoline (rt_sigreturn code), and
/// registers the calling thread. Not async-signal-safe: call it before
/// installing signal handlers that take backtraces. Idempotent (a second
/// call is a backtrace_refresh()). Errors: when a module with unwind
/// information ends without SFrame (kIoError with the errno as value when
/// its file cannot be read, kElfError or a generation error when its CFI is
/// unusable), the first such module's error; that module is walked by the
/// frame-pointer fallback and the table is still published. The Error does
/// not name the module: pass a `report` (or call backtrace_report()) for
/// the path and reason of each. Calling it again with other options
/// rebuilds every module's section.
Expected<void> backtrace_init(const BacktraceOptions& options = {});
/// Same, filling `*report` (when not null) with every module of the table.
Expected<void> backtrace_init(const BacktraceOptions& options, BacktraceInitReport* report);

/// Rebuilds the module table if modules were loaded or unloaded since the
/// last build (dl_iterate_phdr's dlpi_adds/dlpi_subs), reusing the sections
/// of modules still loaded. Call it after dlopen/dlclose; until then, frames
/// in newly loaded modules end the walk (kNoSFrameForPc) or are walked by
/// the frame-pointer fallback. The new table is published atomically; an old
/// one is freed once no walk uses it. Not async-signal-safe. Errors as
/// backtrace_init(), for the modules of the table (rebuilt or not).
Expected<void> backtrace_refresh();
/// Same, filling `*report` (when not null).
Expected<void> backtrace_refresh(BacktraceInitReport* report);

/// For safe points (an event loop, after a plugin load): clears the
/// unknown-PC mark (backtrace_unknown_pc()), then rebuilds the table only
/// if modules were loaded or unloaded since it was built (a
/// dl_iterate_phdr call that stops at the first module, and a mutex: about
/// a microsecond when nothing changed). Returns whether it rebuilt. Not
/// async-signal-safe; does nothing (false) before backtrace_init(). Errors
/// as backtrace_refresh().
Expected<bool> backtrace_refresh_if_needed(BacktraceInitReport* report = nullptr);

/// Starts the background generator left unstarted by
/// BacktraceOptions::defer_background_start, when modules wait for it and
/// it is not running; no effect otherwise (and before backtrace_init()).
/// Not async-signal-safe.
void backtrace_start_background();

/// Waits until no module of the table waits for background generation
/// (BacktraceOptions::background_generation), at most `timeout_ms`
/// milliseconds (negative: no limit). Returns whether every module is ready
/// (true at once when nothing is pending, or before backtrace_init()). Not
/// async-signal-safe.
bool backtrace_wait_ready(int timeout_ms = -1);

/// The report of the current table (empty before backtrace_init()). Not
/// async-signal-safe (allocates).
BacktraceInitReport backtrace_report();

/// Whether every module in the dynamic linker's list (_r_debug.r_map: the
/// modules dl_iterate_phdr reports for the default namespace) is in the
/// published table, with the same load bias and name, that list is
/// consistent (no dlopen/dlclose in progress), and no module waits for
/// background generation. False before backtrace_init(). Allocation-free and lock-free, for crash reporters:
/// async-signal-safe except that a dlclose running on another thread at
/// the same moment may free list entries it reads (the answer is then
/// meaningless; glibc gives no safe way). Modules of other link-map
/// namespaces (dlmopen) are not checked.
bool backtrace_modules_ready() noexcept;

/// The lookup PC at which a walk last stopped for want of SFrame
/// (kNoSFrameForPc) at an address in no module of the table (a module
/// loaded after the table was built, or JIT code), or 0 when none did
/// since backtrace_refresh_if_needed() last cleared it (1 stands for PC
/// 0). Async-signal-safe.
std::uint64_t backtrace_unknown_pc() noexcept;

/// Optional, for speed: records the calling thread's stack bounds
/// (pthread_getattr_np; for the main thread the mapping in /proc/self/maps,
/// which may grow down to the RLIMIT_STACK floor) and gives it its own rule
/// cache and walk memo (about 72 KiB of address space; resident: about
/// 8 KiB, plus a 4 KiB page of the cache for each page its walks' PCs
/// reach, up to 64 KiB). Threads that never call it walk
/// whole too, without a cache and with every page checked by the kernel
/// (a few system calls a walk). Not async-signal-safe. backtrace_init()
/// does it for its thread. Freed at thread exit. Idempotent.
void backtrace_register_thread();

/// Writes the calling thread's call stack to `out`: the return address into
/// the caller of backtrace() first, outermost frame last. Returns the number
/// of addresses written (at most out.size()). Async-signal-safe once
/// backtrace_init() has run, on any thread; before, it runs
/// backtrace_init() first (not async-signal-safe). Inline so that the walk
/// starts in the caller's frame (the registers are taken by a small assembly
/// entry, sframepp_backtrace_here); called through a pointer, its own frame
/// comes first.
[[gnu::always_inline]] inline std::size_t backtrace(std::span<void*> out) noexcept;

/// Same as backtrace(out), with the reason the walk ended.
[[gnu::always_inline]] inline BacktraceResult backtrace_ex(std::span<void*> out) noexcept;

/// Walks from the registers of `uc` (as given to an SA_SIGINFO handler):
/// frame 0 is the interrupted PC (exact), followed by its callers. The
/// frames of the handler itself and of the signal trampoline are not
/// included. Async-signal-safe on any thread, registered or not, also
/// after a stack overflow (install the handler with SA_ONSTACK on a
/// sigaltstack); never initialises (kNotInitialized instead: call
/// backtrace_init() beforehand). A null `uc` walks from the calling frame,
/// like backtrace(out).
std::size_t backtrace(std::span<void*> out, const ucontext_t* uc) noexcept;
BacktraceResult backtrace_ex(std::span<void*> out, const ucontext_t* uc) noexcept;

/// Walks from explicit x86-64 registers: `pc` exact, `sp` (RSP) and `fp`
/// (RBP), reading memory as the ucontext_t variant does. For tests and
/// for callers that captured registers themselves. Async-signal-safe under
/// the same conditions as the ucontext_t variant.
BacktraceResult backtrace_from(std::span<void*> out, std::uint64_t pc, std::uint64_t sp, std::uint64_t fp) noexcept;

/// Counters of the calling thread's rule cache (for benchmarks and tests).
struct BacktraceCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::size_t modules = 0;
  /// Modules whose SFrame was generated from .eh_frame at init.
  std::size_t generated = 0;
};
BacktraceCacheStats backtrace_stats() noexcept;

/// Empties the calling thread's software caches (benchmarks: cold walks):
/// its rule cache and its memo of the last walk's rules, so that the next
/// walk looks every frame's rule up again in the modules' RowIndex. What
/// survives is the unwind data itself, built by backtrace_init() and
/// refreshes: the module table and each module's section, RowIndex and
/// compiled rows. (libunwind's unw_flush_cache, by contrast, keeps its
/// per-thread trace cache of return addresses.) Writes only the entries
/// walks filled since the last flush (every entry after more than 256 new
/// rules).
void backtrace_flush_cache() noexcept;

}  // namespace sframe

/// The entry behind sframe::backtrace(): walks from its caller's frame
/// (frame 0 = the return address into the caller), writes every field of
/// `*result` and returns result->size. Not for direct use.
extern "C" std::size_t sframepp_backtrace_here(void** out, std::size_t size, sframe::BacktraceResult* result) noexcept;

namespace sframe {

inline BacktraceResult backtrace_ex(std::span<void*> out) noexcept {
  BacktraceResult r;
  sframepp_backtrace_here(out.data(), out.size(), &r);
  return r;
}

inline std::size_t backtrace(std::span<void*> out) noexcept {
  // Storage the entry fills whole: no stores here to initialise it (a short
  // walk is a few dozen instructions). BacktraceResult is an aggregate,
  // hence an implicit-lifetime type, so the bytes may hold one.
  alignas(BacktraceResult) unsigned char storage[sizeof(BacktraceResult)];
  return sframepp_backtrace_here(out.data(), out.size(), reinterpret_cast<BacktraceResult*>(storage));
}

}  // namespace sframe

#pragma GCC visibility pop
