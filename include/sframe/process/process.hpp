// SPDX-License-Identifier: MIT
// sframepp: a live process seen from outside - its threads (stopped with
// ptrace), its memory (process_vm_readv, /proc/PID/mem), its mappings
// (/proc/PID/maps) and the ELF modules mapped in it, each with the unwind
// information sframepp can use for it (its own SFrame section, SFrame
// generated from its .eh_frame, or none: frame pointers only).
//
// Linux only. Nothing here prints: the tools layer formats what it returns.
// None of it is async-signal-safe (it allocates and opens files); it is the
// setup around an unwind, not the unwind.
#pragma once
// Library: libsframepp-process (sframepp::process). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/format/error.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/format/section.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe::process {

// ---------------------------------------------------------------------------
// /proc/PID/maps

/// One line of /proc/PID/maps.
struct Mapping {
  /// [start, end): absolute addresses, end exclusive.
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// Byte offset in the mapped file.
  std::uint64_t offset = 0;
  bool read = false;
  bool write = false;
  bool exec = false;
  bool shared = false;
  std::uint64_t inode = 0;
  /// The file, a pseudo name such as "[stack]" or "[vdso]", or "" (anonymous),
  /// without the kernel's " (deleted)" suffix.
  std::string path;
  /// The file was deleted (or replaced) after it was mapped.
  bool deleted = false;

  /// A regular file (not anonymous, not "[...]").
  bool file_backed() const noexcept { return !path.empty() && path.front() == '/'; }
};

/// Parses the text of /proc/PID/maps. Malformed lines are skipped (the file is
/// read while the process runs; a line may be cut short).
std::vector<Mapping> parse_maps(std::string_view text);

/// Reads and parses /proc/`pid`/maps. Errors: kIoError (value: errno).
Expected<std::vector<Mapping>> read_maps(pid_t pid);

// ---------------------------------------------------------------------------
// Memory

/// Reads another process's memory: process_vm_readv split at page boundaries
/// (so a readable prefix is returned even when a later page is not mapped),
/// falling back to pread on /proc/PID/mem when process_vm_readv is refused
/// (e.g. ENOSYS, or EPERM under some seccomp profiles). Reading needs ptrace
/// access to the process. Move-only; owns the /proc/PID/mem descriptor.
/// Satisfies sframe::MemoryReader (not async-signal-safe: it may open
/// /proc/PID/mem on first use).
class RemoteMemory {
 public:
  /// How to read: process_vm_readv first (falling back as above), or only
  /// /proc/PID/mem (e.g. where process_vm_readv is known to be filtered).
  enum class Method : std::uint8_t { kAuto, kProcMem };

  explicit RemoteMemory(pid_t pid, Method method = Method::kAuto) noexcept
      : pid_(pid), use_vm_readv_(method == Method::kAuto) {}
  RemoteMemory(RemoteMemory&& o) noexcept;
  RemoteMemory& operator=(RemoteMemory&& o) noexcept;
  RemoteMemory(const RemoteMemory&) = delete;
  RemoteMemory& operator=(const RemoteMemory&) = delete;
  ~RemoteMemory();

  /// Copies up to out.size() bytes from absolute address `addr`. Returns the
  /// number of bytes read: the length of the readable prefix (0 when `addr`
  /// is unmapped or the process is gone). Never throws.
  std::size_t read(std::uint64_t addr, std::span<std::byte> out) const noexcept;

  /// The host-endian 8-byte word at `addr`, or nullopt when any of its bytes
  /// is unreadable.
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept;

  pid_t pid() const noexcept { return pid_; }

 private:
  std::size_t read_proc_mem(std::uint64_t addr, std::span<std::byte> out) const noexcept;
  pid_t pid_;
  // Lazily opened / learnt on first use (reads are logically const).
  mutable int mem_fd_ = -1;
  mutable bool use_vm_readv_ = true;
};

// ---------------------------------------------------------------------------
// Threads

/// The registers an unwind starts from (the running architecture's).
struct ThreadRegisters {
  /// Program counter, stack pointer, frame pointer (x86-64: rip, rsp, rbp;
  /// AArch64: pc, sp, x29) and, on AArch64, the link register x30 (0 elsewhere).
  std::uint64_t pc = 0;
  std::uint64_t sp = 0;
  std::uint64_t fp = 0;
  std::uint64_t lr = 0;
};

/// One thread of an attached process.
struct Thread {
  pid_t tid = 0;
  /// /proc/PID/task/TID/comm.
  std::string name;
  /// Stopped and its registers read. When false, `error` says why
  /// (IoErrc::kIoError, value: errno) - typically the thread exited
  /// meanwhile (ESRCH), or did not stop by the deadline (ETIMEDOUT).
  bool stopped = false;
  ThreadRegisters regs;
  /// Set when the thread is not stopped.
  std::optional<Error> error;
  /// A signal that arrived while stopping the thread; it is passed back to
  /// the thread when detaching so the process does not lose it.
  int pending_signal = 0;
};

/// How long Attachment::attach() and detach() may wait, and how the caller
/// cancels them. The library installs no signal handler: a caller that wants
/// Ctrl-C to cancel sets `cancel` from its own handler.
struct AttachOptions {
  /// Threads not stopped by this time (std::chrono::steady_clock) are given
  /// up on with ETIMEDOUT; a thread in an uninterruptible sleep (D state,
  /// vfork parent) stops only when it leaves it. Unset: 10 s from the call.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// Caller-owned flag, read (never written) while waiting; non-zero cancels
  /// attach() with EINTR. May be set from a signal handler. Null: none.
  const volatile std::sig_atomic_t* cancel = nullptr;
};

/// Every thread of a process, stopped with PTRACE_SEIZE + PTRACE_INTERRUPT,
/// for as long as this object lives: the destructor (or detach()) lets them
/// run again with PTRACE_DETACH, so an early return or an exception never
/// leaves the process stopped.
///
/// Waiting polls waitpid(WNOHANG) with sleeps of about 1 ms, so neither
/// attach() nor detach() depends on signals: no handler is installed, no
/// alarm is set, and the caller's own handlers stay in place.
///
/// ptrace ties a tracee to the tracing thread: create, use and destroy the
/// Attachment on one thread.
class Attachment {
 public:
  /// Attaches to every thread listed in /proc/`pid`/task, re-listing until no
  /// new thread appears (threads created meanwhile are caught too). Threads
  /// that exit while being attached are dropped; threads that do not stop by
  /// `opt.deadline` are kept with error ETIMEDOUT (see release_pending()).
  /// Errors: kIoError with value = errno: ESRCH (no such process), EPERM
  /// (ptrace not permitted: Yama ptrace_scope, no CAP_SYS_PTRACE, another
  /// tracer), EINTR (`*opt.cancel` became non-zero; every thread already
  /// stopped is released before returning), ETIMEDOUT (the deadline had
  /// passed at the call, in which case nothing was attached, or no thread
  /// stopped before it).
  static Expected<Attachment> attach(pid_t pid, const AttachOptions& opt = {});

  Attachment(Attachment&&) noexcept;
  Attachment& operator=(Attachment&&) noexcept;
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  ~Attachment();

  pid_t pid() const noexcept { return pid_; }
  /// The threads, in TID order (the main thread, TID == PID, first).
  std::span<const Thread> threads() const noexcept { return threads_; }
  /// Detaches from every thread now (idempotent). A thread asked to stop but
  /// not stopped yet is waited for up to 2 s (PTRACE_DETACH needs a stopped
  /// tracee); one still running after that is left to release_pending().
  void detach() noexcept;

  /// Threads that attach() gave up on (ETIMEDOUT) or detach() could not
  /// wait for stay traced by the thread that seized them: when they leave
  /// their uninterruptible wait they stop, and must be detached. This
  /// detaches those that have stopped (or forgets those that exited) and
  /// returns how many are still pending. attach() and detach() call it too;
  /// call it from the thread that attached (ptrace's rule), e.g.
  /// periodically in a long-running profiler. Thread-safe.
  static std::size_t release_pending() noexcept;

 private:
  Attachment() = default;
  pid_t pid_ = 0;
  std::vector<Thread> threads_;
  // Threads sent PTRACE_INTERRUPT whose stop was not waited for yet.
  std::vector<pid_t> unwaited_;
  bool attached_ = false;
};

/// This process's vDSO image (the running kernel's, the same in every
/// process) as an ELF file, for naming the [vdso] frames of a recording
/// made on this kernel, as perf does when the recording holds no copy. Found
/// through the auxiliary vector (AT_SYSINFO_EHDR), its extent that of its
/// ELF headers, segments and section headers.
/// Errors: kIoError (value: errno; ENOENT: no vDSO mapped, EINVAL: not a
/// 64-bit ELF image).
Expected<elf::ElfFile> own_vdso();

/// The name of process `pid` (/proc/PID/comm), or "" when unreadable.
std::string process_name(pid_t pid);

// ---------------------------------------------------------------------------
// Modules

/// Where a module's unwind information comes from: deprecated name of
/// sframe::ModuleSource (sframe/unwind/modules.hpp), the one enum (its deprecated
/// enumerators kSFrameSection and kFramePointer are kNative and kNone).
using UnwindSource = sframe::ModuleSource;
/// sframe::to_string(ModuleSource): "native", "generated", "none" (before
/// the one enum, `sframe stack` printed this one's "sframe" and
/// "frame-pointer").
using sframe::to_string;

/// An ELF file mapped in the process.
struct LoadedModule {
  /// As in /proc/PID/maps (a pseudo name such as "[vdso]" for unnamed images).
  std::string path;
  bool deleted = false;
  /// Lowest and highest address of its mappings (all of them, not only the
  /// executable ones).
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// Absolute address = link-time address + bias.
  std::uint64_t bias = 0;
  /// The executable mappings' ranges [first, second).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> exec_ranges;

  ModuleSource source = ModuleSource::kNone;
  /// Why the source is not the module's own SFrame section (or "").
  std::string why;
  /// How the file was reached when not by its path ("" normally), e.g.
  /// "file deleted; read through /proc/PID/map_files".
  std::string how_opened;
  /// SFrame may still be generated for it (ModuleOptions::on_demand) by
  /// LoadedModules::generate_for(): one FDE at a time when its
  /// .eh_frame_hdr table leads to them (`unwind->on_demand()`; cleared once
  /// the first is generated), else its whole section when `source` is
  /// kNone, the `extra` section when it is kNative and its
  /// .eh_frame_hdr lists FDEs its own section lacks (never for a module
  /// whose own section covers every FDE).
  bool generation_pending = false;
  /// The SFrame section, parsed at its link-time address, and an index over
  /// it; set for kNative and kGenerated.
  std::optional<Section> sframe;
  std::optional<FdeIndex> index;
  /// For a module with its own SFrame section: SFrame generated from the
  /// .eh_frame FDEs that its section lacks (e.g. objects assembled without
  /// --gsframe, libc.a members of a static program), consulted for PCs the
  /// own section does not cover. Empty until generated, and when .eh_frame
  /// has no such FDE (`extra_functions` = 0).
  std::optional<Section> extra;
  std::optional<FdeIndex> extra_index;
  std::size_t extra_functions = 0;

  /// Function symbols (link-time addresses), from .symtab, from the
  /// separate debug file found by build ID under /usr/lib/debug, or from
  /// .dynsym (elf::SymbolTable, NamingPolicy::kEuStack); `symbols.source()`
  /// says which.
  elf::SymbolTable symbols;

  /// The shared per-module builder (sframe/unwind/module_unwind.hpp), as the
  /// in-process backtrace uses it: owns the bytes the views above point
  /// into (a copy of the own section, the generated sections) and their
  /// accelerators (the unwind map uses its RowIndex where the section
  /// passes validate(kStrict)). Null when the file could not be opened.
  std::shared_ptr<cfi::ModuleUnwind> unwind;
  /// The module's file (or a copy of the vDSO image).
  std::shared_ptr<const elf::ElfFile> file;

  /// Runtime `pc` lies in one of its executable mappings.
  bool contains_exec(std::uint64_t pc) const noexcept;
};

/// Where the rule that stepped from one frame to its caller came from
/// (LoadedModules::walk()).
enum class RuleSource : std::uint8_t {
  /// No rule: the walk stopped at this frame for want of one.
  kNone,
  /// The module's own SFrame section.
  kSFrameSection,
  /// SFrame generated from the module's .eh_frame.
  kGenerated,
  /// The frame-pointer convention (checked, see walk()).
  kFramePointer,
  /// A signal trampoline: the caller's registers come from the signal frame.
  kSignalFrame,
};

/// "none", "sframe", "generated", "frame-pointer", "signal frame".
std::string_view to_string(RuleSource s) noexcept;

/// How LoadedModules::walk() steps.
struct WalkOptions {
  /// Step by frame pointers where no SFrame (own or generated) covers a PC.
  bool fp_fallback = true;
};

/// What LoadedModules::walk() did.
struct WalkResult {
  /// Frames written.
  std::size_t count = 0;
  /// Why the walk stopped, and the address involved (as UnwindResult).
  StopReason reason = StopReason::kOutermost;
  std::uint64_t address = 0;
  /// The frame-pointer step was refused at the last frame: the return
  /// address it read (not in an executable mapping) or, when that was
  /// plausible, 0 with `fp_rejected_cfa` set (its CFA was not above the SP).
  bool fp_rejected = false;
  std::uint64_t fp_rejected_ra = 0;
  bool fp_rejected_cfa = false;
};

/// What to do for modules without an SFrame section.
struct ModuleOptions {
  /// Generate SFrame from .eh_frame (else: frame pointers).
  bool generate = true;
  /// Generate only when an unwind needs it (generate_for()), not for every
  /// module at load: most mapped modules have no frame on any stack.
  bool on_demand = true;
  /// Ignore SFrame sections present in the files (forces generation or frame
  /// pointers; for tests).
  bool ignore_sframe_sections = false;
};

/// The shared builder's input (sframe/unwind/module_unwind.hpp) read from an ELF
/// file (a module's file, or a copy of the vDSO image): `own` (its SFrame
/// section, from ElfFile::sframe_section(); an error means none), its
/// .eh_frame_hdr (the section, else the PT_GNU_EH_FRAME segment of a
/// stripped file) and its executable PT_LOAD segments. The spans point into
/// `f` and `own`.
cfi::ModuleImage module_image(const elf::ElfFile& f, const Expected<elf::SFrameSectionData>& own);

/// The modules of a process, and the sframe::ModuleMap the unwinder uses
/// over them (one unwind module per executable mapping with SFrame).
/// Move-only; the unwind map stays valid across moves.
class LoadedModules {
 public:
  /// Opens every ELF file with an executable mapping in `maps` of process
  /// `pid`: through its path when the inode still matches, else through
  /// /proc/PID/map_files/ (deleted or replaced files), else through
  /// /proc/PID/root/. The vDSO is read from the process's memory. Modules
  /// whose file cannot be opened are kept (frame pointers, no symbols) with
  /// `why` saying so. Never fails as a whole.
  static LoadedModules load(pid_t pid, const std::vector<Mapping>& maps, const RemoteMemory& mem,
                            const ModuleOptions& opt = {});

  LoadedModules(LoadedModules&&) noexcept = default;
  LoadedModules& operator=(LoadedModules&&) noexcept = default;

  /// The module with an executable mapping containing absolute `pc`.
  const LoadedModule* find(std::uint64_t pc) const noexcept;

  std::span<const LoadedModule> modules() const noexcept { return modules_; }

  /// The unwinder's view: modules with SFrame (own or generated). Replaced
  /// (with a new generation) by generate_for(): fetch it again after.
  const sframe::ModuleMap& unwind_map() const noexcept { return table_.primary(); }

  /// The second map consulted by walk(): the `extra` sections of modules
  /// that have their own SFrame section (see LoadedModule::extra).
  const sframe::ModuleMap& extra_map() const noexcept { return table_.extra(); }

  /// Generates SFrame for the module whose code contains runtime `pc` if
  /// its generation is pending: for the FDE covering `pc` alone where the
  /// module's .eh_frame_hdr leads to it (cfi::ModuleUnwind::generate_for_pc;
  /// into the unwind map for a module without its own section, else the
  /// extra map), else its whole section (or the `extra` one for a module
  /// with its own section); true when that added unwind information (the
  /// caller should unwind again). Not async-signal-safe.
  bool generate_for(std::uint64_t pc);

  /// Runtime `addr` lies in an executable mapping of the process (any, not
  /// only the modules': JIT code counts), as listed by the maps given to
  /// load().
  bool executable(std::uint64_t addr) const noexcept;

  /// Walks the stack of a stopped thread from `regs`, writing frames to
  /// `frames` and, for each frame written, to `sources[i]` where the rule
  /// that stepped from frame i to frame i + 1 came from (for the last frame:
  /// the source whose rule failed, or RuleSource::kNone). Frame 0 is the
  /// exact PC, later frames are return addresses except after a signal frame
  /// (as sframe::unwind()). For each PC, in order: the module's own SFrame
  /// section; else SFrame generated from the module's .eh_frame (generated
  /// now, once per module, if pending); else, with `opt.fp_fallback`, the
  /// frame-pointer convention, accepted only when the return address it
  /// gives lies in an executable mapping (or is 0, the end of the chain) and
  /// its CFA lies above the frame's SP. The CFA must move strictly up the
  /// stack, as in sframe::unwind(). `sources` must be at least as long as
  /// `frames`. Reads memory through `mem`; not async-signal-safe (it may
  /// generate SFrame). Never fails: the result says why the walk stopped.
  WalkResult walk(const RemoteMemory& mem, const ThreadRegisters& regs, std::span<Frame> frames,
                  std::span<RuleSource> sources, const WalkOptions& opt = {});

  /// Runtime ranges of the signal trampolines, found in the modules' code
  /// bytes by the shared builder (x86-64 rt_sigreturn) and by symbol
  /// (__restore_rt, __kernel_rt_sigreturn), for UnwindOptions.
  std::span<const AddressRange> signal_trampolines() const noexcept { return trampolines_; }

 private:
  LoadedModules() = default;
  void rebuild_unwind_map();
  std::vector<LoadedModule> modules_;  // sorted by start
  // The unwinder's maps (sframe/unwind/module_table.hpp).
  sframe::ModuleTable table_;
  // Every executable mapping's [start, end), sorted.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> exec_ranges_;
  std::vector<AddressRange> trampolines_;
};

// ---------------------------------------------------------------------------
// Source lines and inline frames (DWARF, through elfutils libdwfl)

/// One function activation at a PC as DWARF describes it: the function whose
/// code holds the PC (possibly a function inlined there), or a function it
/// was inlined into.
struct SourceFrame {
  /// The function's DWARF name (DW_AT_linkage_name demangled, else DW_AT_name,
  /// following DW_AT_abstract_origin); "" when DWARF names none.
  std::string function;
  /// The source position in that function: for the innermost function, the
  /// line-table row of the PC; for a function something was inlined into,
  /// the inlined call's site (DW_AT_call_file, DW_AT_call_line,
  /// DW_AT_call_column). "" / 0 when unknown.
  std::string file;
  int line = 0;
  int column = 0;
};

/// DWARF line tables and inline scopes of a process's modules, read with
/// libdwfl from each module's file or from its separate debug file, found
/// (as eu-stack and gdb find it) by build ID under /usr/lib/debug or by
/// .gnu_debuglink. Modules are reported offline at the load biases that
/// LoadedModules::load() found, so the process need not be stopped (nor
/// alive) any more. Modules without a readable file by their path (deleted
/// files, the vDSO) have no source information. Move-only.
class SourceLines {
 public:
  /// Reports every module of `modules` to libdwfl (DWARF itself is read
  /// lazily, on the first lookup in a module).
  explicit SourceLines(const LoadedModules& modules);
  SourceLines(SourceLines&& o) noexcept;
  SourceLines& operator=(SourceLines&& o) noexcept;
  SourceLines(const SourceLines&) = delete;
  SourceLines& operator=(const SourceLines&) = delete;
  ~SourceLines();

  /// The source position of absolute `pc` (pass the lookup PC: a return
  /// address minus 1, the exact PC for frame 0 and after a signal frame):
  /// one frame whose `function` is empty and whose file/line/column come
  /// from the line table (dwfl_module_getsrc), as `eu-stack -s` shows it.
  /// Empty file when no line table covers `pc`.
  SourceFrame line(std::uint64_t pc) const;

  /// The functions active at absolute `pc` (the lookup PC), innermost first,
  /// as `eu-stack -i` shows them: the innermost function-like DIE with a
  /// name among the scopes of `pc` (dwarf_getscopes on its CU DIE), with
  /// the line-table position of `pc`, then each inlined subroutine's
  /// caller with the call site, up to and including the out-of-line
  /// function (DW_TAG_subprogram). Empty when no DWARF describes `pc`.
  std::vector<SourceFrame> inline_frames(std::uint64_t pc) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A symbolized address.
struct SymbolizedPc {
  const LoadedModule* module = nullptr;
  /// The symbol covering the address (nullptr when none does; see
  /// elf::SymbolTable::find), its raw name ("" when none) and the offset of
  /// the address from its start in bytes. Print the name with
  /// `module->symbols.display_name(*symbol)`.
  const elf::FunctionSymbol* symbol = nullptr;
  std::string_view name;
  std::uint64_t offset = 0;
};

/// The module and symbol covering absolute `pc` (look up a return address
/// minus 1 to name the call site's function).
SymbolizedPc symbolize(const LoadedModules& modules, std::uint64_t pc) noexcept;

}  // namespace sframe::process

#pragma GCC visibility pop
