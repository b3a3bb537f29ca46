// SPDX-License-Identifier: MIT
// sframepp: unwinding the samples of a `perf record --call-graph=dwarf`
// recording with SFrame (layer `perf`, over the perf.data reader, the
// shared per-module builder and the unwind source chain of `sframe stack`).
//
// A Session follows the recorded processes in time order: address spaces
// per pid from MMAP/MMAP2 (executable mappings; a mapping replaces what it
// overlaps, and an exec keeps the old ones until replaced, as perf does) and
// FORK (a new process copies its parent's mappings; a new thread shares
// them). For each sample it gives the frames perf script would print (with
// --no-inline):
//  - kernel frames: the sample's callchain up to the first non-kernel
//    context marker, symbolized from kallsyms (perf's cached copy of the
//    recorded kernel's, else /proc/kallsyms);
//  - user frames: sframe::process::walk_chain() from the sample's user
//    registers over its copied stack (memory outside the copy is
//    unreadable); a sample without user registers and stack copy gives the
//    user part of its callchain as recorded (after PERF_CONTEXT_USER: the
//    PC, then callers at return address - 1). Each module's unwind information built once per file
//    (own .sframe, else generated from .eh_frame on first need, else
//    checked frame pointers); symbols from the shared ELF symbol reader with
//    NamingPolicy::kPerf.
// Files are opened by the mapped path when their build-id matches the
// recorded one (or none is recorded), else from perf's build-id cache
// (~/.debug/.build-id/xx/yyyy/elf), which holds deleted or replaced files.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "file_table.hpp"
#include "perf_data.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe::elf {
class ElfFile;
}

namespace sframe::perf {

/// How a frame was found.
enum class FrameOrigin : std::uint8_t {
  /// From the sample's kernel callchain.
  kKernel,
  /// Frame 0 of the user stack: the sampled user registers.
  kRegisters,
  /// Stepped to with the module's own SFrame section.
  kSFrame,
  /// Stepped to with SFrame generated from the module's .eh_frame.
  kGenerated,
  /// Stepped to with the frame-pointer convention (checked).
  kFramePointer,
  /// Restored from a signal frame.
  kSignalFrame,
  /// The user part of the sample's recorded callchain (a recording without
  /// stack copies: `sframe record`, `sframe perf inject`, perf's
  /// --call-graph=fp), taken as recorded.
  kCallchain,
};
inline constexpr std::size_t kFrameOrigins = 7;
/// "kernel", "registers", "sframe", "generated", "frame-pointer",
/// "signal-frame", "callchain".
std::string_view to_string(FrameOrigin o) noexcept;

/// The perf release whose output a Session (and `sframe perf script`)
/// follows where releases differ.
enum class PerfVersion : std::uint8_t {
  /// Debian 12's perf 6.1 (user stacks unwound by libunwind).
  k6_1,
  /// perf 7.2 (user stacks unwound by libdw).
  k7_2,
};

/// One printed frame.
struct ResolvedFrame {
  /// Runtime address: the kernel callchain entry; the user PC (frame 0,
  /// after a signal frame) or the return address (callers).
  std::uint64_t address = 0;
  /// The address perf 6.1's script prints: kernel frames as recorded; user
  /// frames map-relative (address - map start + map offset, ET_EXEC files
  /// included; absolute without a map), callers at return address - 1 as
  /// perf's unwinders record them (not after a signal frame); all ones for
  /// the frame SessionOptions::libunwind_stack_end adds.
  std::uint64_t ip = 0;
  /// The address perf 7.2's script prints: `ip` before it is made
  /// map-relative (the runtime address; return address - 1 for callers, as
  /// `perf inject --convert-callchain` and `sframe perf inject` write them).
  std::uint64_t runtime_ip = 0;
  /// The symbol (demangled), or null for perf's "[unknown]".
  const std::string* symbol = nullptr;
  std::uint64_t symoff = 0;
  /// The file name perf prints (the mapped path, "[kernel.kallsyms]",
  /// "[vdso]"), or null for "[unknown]".
  const std::string* dso = nullptr;
  FrameOrigin origin = FrameOrigin::kKernel;
  /// The process mapping holding a user frame's address in a file: its
  /// runtime range [map_start, map_end) and the file offset of map_start
  /// (all zero for kernel frames and addresses outside any mapped file).
  std::uint64_t map_start = 0;
  std::uint64_t map_end = 0;
  std::uint64_t map_pgoff = 0;
  /// The mapped file's build-id (lowercase hex, as recorded in the
  /// perf.data BUILD_ID feature or its MMAP2 record, else read from the
  /// file opened), or null when unknown.
  const std::string* build_id = nullptr;
};

/// The frames of one sample and why its user walk ended.
struct UnwoundSample {
  std::vector<ResolvedFrame> frames;
  /// The sample had user registers and a stack copy to walk.
  bool walked = false;
  StopReason stop = StopReason::kOutermost;
  /// Why the walk ended, in words, e.g. "outermost frame", "no module at
  /// 0x7f.. (JIT or anonymous code)", "stack copy ends (8192 bytes)".
  std::string_view why;
  /// The address involved in the stop (as sframe::UnwindResult::address).
  std::uint64_t stop_address = 0;
  /// The copied user stack: its first address (the sampled SP) and size.
  std::uint64_t stack_base = 0;
  std::uint64_t stack_size = 0;
  /// Nonzero when this result repeats an earlier one: a sample without a
  /// stack copy whose pid and recorded callchain equal an earlier sample's,
  /// with no state change between them (a record given to process(), an
  /// exec settled), resolves to the same frames. Equal ids, equal frames;
  /// an id is never used again for other frames. 0: not remembered.
  std::uint64_t repeat_id = 0;
  /// For a sample without a stack copy, once its process's image is
  /// settled: one index per frame among the frames the session keeps by
  /// callchain word, the same index for the same frame while
  /// frame_generation stays (a record given to process() changes it), so
  /// that a caller can keep what it derives from a frame by index. Empty
  /// otherwise. Valid until the next unwind().
  std::span<const std::uint32_t> frame_ids;
  std::uint64_t frame_generation = 0;
};

/// Options of a Session.
struct SessionOptions {
  /// /proc/kallsyms, read when readable and perf's build-id cache holds no
  /// copy for the recorded kernel (~/.debug/[kernel.kallsyms]/ID/kallsyms;
  /// else kernel frames are "[unknown]").
  std::string kallsyms = "/proc/kallsyms";
  /// perf's build-id cache; empty: $HOME/.debug.
  std::string buildid_dir;
  /// Frames per sample, kernel and user together (perf's default 127).
  std::size_t max_stack = 127;
  /// Step by checked frame pointers where no SFrame covers a PC.
  bool fp_fallback = true;
  /// Symbol names as this perf prints them: k6_1 demangles C++ names short
  /// (no parameters, return type or clone suffix) and names libc's
  /// R_X86_64_IRELATIVE PLT slots "@plt"; k7_2 demangles them whole and
  /// names such a slot after the IFUNC its addend points to ("strlen@plt").
  PerfVersion names = PerfVersion::k6_1;
  /// As perf 6.1's libunwind unwinder (util/unwind-libunwind-local.c,
  /// access_mem): the last 8 bytes of the stack copy read as outside it,
  /// and a walk that ends reading above the copy gets one more frame,
  /// at address all ones, unnamed (libunwind reads the return address as
  /// 0, which perf records as 0 - 1).
  bool libunwind_stack_end = false;
  /// As perf 7.2: a thread is forgotten at its EXIT record, so a sample
  /// of it after that has perf's ":TID" name and, after its process's
  /// leader exited, no mappings (perf 6.1 keeps both).
  bool forget_exited = false;
  /// Name the frames. false: frames carry addresses and files only (every
  /// `symbol` null) and no symbol table or kallsyms is read, for a caller
  /// that writes addresses (sframe perf inject).
  bool symbols = true;
  /// Where the Session opens mapped files (FileTable): shared with other
  /// Sessions of the same recording on the same thread; null: its own.
  std::shared_ptr<FileTable> files;
};

/// Totals over the processed samples.
struct SessionStats {
  std::uint64_t samples = 0;
  std::uint64_t frames = 0;
  std::array<std::uint64_t, kFrameOrigins> by_origin{};
  /// Why user walks ended, by reason text.
  std::vector<std::pair<std::string, std::uint64_t>> stops;
  /// Files opened, and those SFrame was generated for.
  std::uint64_t dsos = 0;
  std::uint64_t generated_dsos = 0;
  /// FDEs SFrame was generated for one at a time (files with
  /// .eh_frame_hdr), as walks needed them.
  std::uint64_t generated_fdes = 0;
};

/// One executable mapping of a process as a Session follows it.
struct ProcessMapping {
  /// Runtime [start, end).
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// Runtime - link-time address (from the PT_LOAD holding the mapping's
  /// file offset).
  std::uint64_t bias = 0;
  /// The mapped file, opened (null: anonymous memory, or a file that could
  /// not be opened, or whose build-id differs from the recorded one).
  std::shared_ptr<const elf::ElfFile> file;
  /// Its path as recorded, and its build-id (lowercase hex: the recorded
  /// one, else the file's; empty when unknown).
  std::string path;
  std::string build_id;
};

/// A recording being replayed.
class Session {
 public:
  Session(const FileInfo& info, const SessionOptions& opt = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Feeds one record (in the reader's time order): MMAP/MMAP2, COMM,
  /// FORK and EXIT update the processes; SAMPLE records are unwound by
  /// unwind(), not here.
  void process(const Record& r);
  /// The frames of SAMPLE record `r` (callee first). The result is reused
  /// by the next call.
  const UnwoundSample& unwind(const Record& r);
  /// The command name of thread `tid` at this point of the recording (perf:
  /// ":TID" when unknown).
  std::string_view comm(std::uint32_t tid) const;
  const SessionStats& stats() const;
  /// The executable mappings of process `pid` at this point of the
  /// recording, sorted by start, disjoint (empty for an unknown pid).
  std::vector<ProcessMapping> mappings(std::uint32_t pid) const;
  /// Where it opens mapped files (SessionOptions::files, or its own), for
  /// others to open theirs through.
  FileTable& files() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// perf's build-id cache when none is given: $HOME/.debug (/root/.debug
/// without $HOME), as perf's default buildid_dir.
std::string default_buildid_dir();

/// Where perf's build-id cache `buildid_dir` keeps its copy of the
/// kallsyms of the kernel with GNU build ID `build_id` (lowercase hex), as
/// perf record writes it and perf report reads it:
/// BUILDID_DIR/[kernel.kallsyms]/BUILD_ID/kallsyms.
std::string kallsyms_cache_path(const std::string& buildid_dir, std::string_view build_id);

/// Where `sframe record` keeps its index of that copy (KallsymsIndex::save),
/// beside it: BUILDID_DIR/[kernel.kallsyms]/BUILD_ID/kallsyms.sframe-index.
/// perf has no file of that name and reads none it does not know.
std::string kallsyms_index_path(const std::string& buildid_dir, std::string_view build_id);

/// The callchain of SAMPLE `r` once unwound (`u`), as perf inject
/// --convert-callchain writes it: the recorded kernel part (up to a
/// PERF_CONTEXT_USER marker), then PERF_CONTEXT_USER and the user frames
/// (runtime_ip: callers at return address - 1; a return address after a
/// call that ends a function names the next one). Replaces `chain`.
void unwound_callchain(const Record& r, const UnwoundSample& u, std::vector<std::uint64_t>& chain);

}  // namespace sframe::perf
