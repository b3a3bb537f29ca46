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

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/elf.hpp"
#include "sframe/error.hpp"
#include "sframe/lookup.hpp"
#include "sframe/section.hpp"
#include "sframe/unwind.hpp"

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
  /// (kIoError, value: errno) - typically the thread exited meanwhile.
  bool stopped = false;
  ThreadRegisters regs;
  Error error{};
  /// A signal that arrived while stopping the thread; it is passed back to
  /// the thread when detaching so the process does not lose it.
  int pending_signal = 0;
};

/// Every thread of a process, stopped with PTRACE_SEIZE + PTRACE_INTERRUPT,
/// for as long as this object lives: the destructor (or detach()) lets them
/// run again with PTRACE_DETACH, so an early return, an exception or an
/// interrupt (see interrupted()) never leaves the process stopped.
class Attachment {
 public:
  /// Attaches to every thread listed in /proc/`pid`/task, re-listing until no
  /// new thread appears (threads created meanwhile are caught too). Threads
  /// that exit while being attached are dropped. While attached, SIGINT,
  /// SIGTERM and SIGHUP are caught: they set interrupted() and make waiting
  /// calls return, so the caller can return and detach, then the tool exits.
  /// SIGALRM is used (and caught) while attaching, to give up on threads
  /// that do not stop within 10 s (uninterruptible sleep): they get ETIMEDOUT.
  /// Errors: kIoError with value = errno: ESRCH (no such process), EPERM
  /// (ptrace not permitted: Yama ptrace_scope, no CAP_SYS_PTRACE, another
  /// tracer), EINTR (interrupted by a signal).
  static Expected<Attachment> attach(pid_t pid);

  Attachment(Attachment&&) noexcept;
  Attachment& operator=(Attachment&&) noexcept;
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  ~Attachment();

  pid_t pid() const noexcept { return pid_; }
  /// The threads, in TID order (the main thread, TID == PID, first).
  std::span<const Thread> threads() const noexcept { return threads_; }
  /// Detaches from every thread now (idempotent).
  void detach() noexcept;

  /// A termination signal arrived since the last attach().
  static bool interrupted() noexcept;

 private:
  Attachment() = default;
  pid_t pid_ = 0;
  std::vector<Thread> threads_;
  // Threads sent PTRACE_INTERRUPT whose stop was not waited for yet.
  std::vector<pid_t> unwaited_;
  bool attached_ = false;
};

/// The name of process `pid` (/proc/PID/comm), or "" when unreadable.
std::string process_name(pid_t pid);

// ---------------------------------------------------------------------------
// Modules

/// Where a module's unwind information comes from.
enum class UnwindSource : std::uint8_t {
  /// The module's own SFrame section (.sframe / PT_GNU_SFRAME).
  kSFrameSection,
  /// SFrame generated now from the module's .eh_frame (sframe::cfi::generate).
  kGenerated,
  /// None usable: only the frame-pointer fallback.
  kFramePointer,
};

/// "sframe", "generated", "frame-pointer".
std::string_view to_string(UnwindSource s) noexcept;

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

  UnwindSource source = UnwindSource::kFramePointer;
  /// Why the source is not the module's own SFrame section (or "").
  std::string why;
  /// How the file was reached when not by its path ("" normally), e.g.
  /// "file deleted; read through /proc/PID/map_files".
  std::string how_opened;
  /// SFrame may still be generated for it (ModuleOptions::on_demand) by
  /// LoadedModules::generate_for().
  bool generation_pending = false;
  /// The SFrame section, parsed at its link-time address, and an index over
  /// it; set for kSFrameSection and kGenerated.
  std::optional<Section> sframe;
  std::optional<FdeIndex> index;

  /// Function symbols (link-time addresses, sorted), from .symtab, from the
  /// separate debug file found by build ID under /usr/lib/debug, or from
  /// .dynsym; `symbols_from` says which (".symtab", "debug file", ".dynsym",
  /// "" when none).
  std::vector<elf::Symbol> symbols;
  std::string symbols_from;

  /// Owned bytes and files the views above point into.
  std::shared_ptr<const elf::ElfFile> file;
  std::shared_ptr<const elf::SFrameSectionData> section_data;
  std::shared_ptr<const std::vector<std::byte>> generated;

  /// Runtime `pc` lies in one of its executable mappings.
  bool contains_exec(std::uint64_t pc) const noexcept;
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
  const sframe::ModuleMap& unwind_map() const noexcept { return *unwind_map_; }

  /// Generates SFrame for the module whose code contains runtime `pc` if
  /// its generation is pending; true when that added unwind information (the
  /// caller should unwind again). Not async-signal-safe.
  bool generate_for(std::uint64_t pc);

  /// Runtime ranges of the signal trampolines found by symbol
  /// (__restore_rt, __kernel_rt_sigreturn), for UnwindOptions.
  std::span<const AddressRange> signal_trampolines() const noexcept { return trampolines_; }

 private:
  LoadedModules() = default;
  void rebuild_unwind_map();
  std::vector<LoadedModule> modules_;  // sorted by start
  std::vector<sframe::Module> unwind_storage_;
  std::unique_ptr<sframe::ModuleMap> unwind_map_;
  std::vector<AddressRange> trampolines_;
};

/// A symbolized address.
struct SymbolizedPc {
  const LoadedModule* module = nullptr;
  /// Mangled name ("" when no symbol covers it) and offset from its start.
  std::string_view name;
  std::uint64_t offset = 0;
};

/// The module and symbol covering absolute `pc` (look up a return address
/// minus 1 to name the call site's function).
SymbolizedPc symbolize(const LoadedModules& modules, std::uint64_t pc) noexcept;

}  // namespace sframe::process
