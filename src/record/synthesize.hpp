// SPDX-License-Identifier: MIT
// sframepp: the records `sframe record` writes for what runs before it
// starts, as perf record synthesizes them (tools/perf/util/synthetic-
// events.c): the kernel's text mapping ("[kernel.kallsyms]_text", MMAP2 of
// pid -1 from _text to _etext, as perf reads them from kallsyms), and per
// process a COMM per thread and an MMAP2 per executable mapping of
// /proc/PID/maps, carrying the file's build-id; and the perf records of
// what its BPF program sends (walked samples, stack copies).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "perf_data.hpp"
#include "perf_writer.hpp"

namespace sframe::record {

/// Every process ID under /proc now.
std::vector<pid_t> all_processes();

/// The thread IDs of process `pid` now (/proc/PID/task); empty when it is
/// gone.
std::vector<pid_t> threads_of(pid_t pid);

/// The files a command will map at start: the executable `argv0` (looked
/// up in PATH), its ELF interpreter, and the libraries the interpreter
/// resolves for it (`INTERP --list EXE`, which loads nothing into a
/// process), each by its real path as the kernel reports mappings. Empty
/// for a command that is not a dynamic ELF executable.
std::vector<std::string> command_files(const std::string& argv0);

/// The running kernel's GNU build ID (/sys/kernel/notes, the notes of its
/// image) in lowercase hex, as perf record names [kernel.kallsyms] in its
/// BUILD_ID feature; empty when the file cannot be read.
std::string kernel_build_id();

/// The feature sections perf record writes that a reader of `sframe
/// record`'s output uses: CMDLINE (`argv`), EVENT_DESC (`attr`), ARCH,
/// HOSTNAME, OSRELEASE, NR_CPUS and BUILD_ID (`build_ids`: path -> hex).
/// Returns false when the writer refused one.
bool add_features(perf::PerfWriter& w, std::span<const std::string> argv, const perf::EventAttr& attr,
                  const std::map<std::string, std::string>& build_ids);

/// A walked sample from the BPF program (record_abi.h's
/// sframe_record_sample, `size` bytes as its ring buffer holds them) as a
/// sample of `attr` with its callchain (kernel frames after
/// PERF_CONTEXT_KERNEL, user frames after PERF_CONTEXT_USER), appended to
/// `out`. False, `out` unchanged, for a record shorter than its fixed part.
/// `chain`: scratch for the callchain (reused across calls: no allocation
/// per sample).
bool encode_walked(std::vector<std::byte>& out, const perf::EventAttr& attr, const void* data, std::size_t size,
                   std::vector<std::uint64_t>& chain);

/// A stack copy from the BPF program (record_abi.h's sframe_record_copy,
/// `size` bytes as its ring buffer holds them) as an ordinary
/// --call-graph=dwarf sample of `attr` (kernel callchain, REGS_USER,
/// STACK_USER), appended to `out`. False, `out` unchanged, for a copy
/// shorter than its fixed part. `chain`: scratch, as for encode_walked().
bool encode_copy(std::vector<std::byte>& out, const perf::EventAttr& attr, const void* data, std::size_t size,
                 std::vector<std::uint64_t>& chain);

/// Copies /proc/kallsyms into perf's build-id cache `buildid_dir` as the
/// kallsyms of the running kernel, GNU build ID `build_id`, when the cache
/// holds no copy for it yet, as perf record does: readers (perf report,
/// `sframe perf script` and `record --folded`) map the copy, a plain file,
/// instead of having the kernel format /proc/kallsyms again (some 45 ms of
/// CPU here, more than the rest of a short recording's conversion). Beside
/// the copy (its own, or one perf made), the copy's index
/// (perf::kallsyms_index_path, KallsymsIndex::save), which spares those
/// readers a scan of every line. Nothing is copied when kallsyms hides
/// addresses. Returns what failed (empty: done, or nothing to do); a
/// recording does not depend on it.
std::string cache_kallsyms(const std::string& buildid_dir, const std::string& build_id);

class Synthesizer {
 public:
  /// Records are encoded for `attr` (its sample_id layout) with time 0 and
  /// handed to `put`; each mapped file's build-id goes into `build_ids`
  /// (path -> lowercase hex).
  Synthesizer(const perf::EventAttr& attr, std::function<void(std::vector<std::byte>&)> put,
              std::map<std::string, std::string>& build_ids);
  /// The kernel's text mapping (nothing when kallsyms hides addresses).
  void kernel();
  /// Process `pid` (nothing when it is gone).
  void process(pid_t pid);

 private:
  std::string file_build_id(const std::string& path);
  const perf::EventAttr& attr_;
  std::function<void(std::vector<std::byte>&)> put_;
  std::map<std::string, std::string>& build_ids_;
  std::unordered_map<std::string, std::string> file_ids_;
  std::vector<std::byte> rec_;
};

}  // namespace sframe::record
