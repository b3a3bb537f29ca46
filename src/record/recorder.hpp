// SPDX-License-Identifier: MIT
// sframepp: `sframe record`'s recorder (layer `record`, over the perf.data
// writer): cpu-clock samples of chosen processes, their user stacks walked
// in the kernel at sample time by a BPF program (bpf/record.bpf.c), written
// as a perf.data whose samples carry PERF_SAMPLE_CALLCHAIN (kernel and user
// frames behind PERF_CONTEXT_KERNEL / PERF_CONTEXT_USER markers) and no
// stack copies, with the MMAP2, COMM, FORK and EXIT records perf needs.
//
// Processes: those running at the start are described from /proc (COMM per
// thread, MMAP2 per executable mapping, with build-ids), as perf record
// synthesizes them; what happens later (exec, mmap, fork, exit) comes from
// one dummy perf event per CPU (MMAP2 with build-ids, COMM, FORK, EXIT),
// whose records are copied into the output. All times are CLOCK_MONOTONIC
// (the BPF program's bpf_ktime_get_ns(), the dummy events' use_clockid), so
// the two streams merge in time order.
//
// The recorder takes no process-wide decision: the caller installs signal
// handlers and says when to stop through RecordOptions::stop.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "perf_data.hpp"
#include "perf_unwind.hpp"
#include "tables.hpp"

namespace sframe::record {

/// What to record.
/// Takes a recording's records as the recorder writes them, for a program
/// that converts them during the recording (`sframe record --folded`)
/// instead of reading back a perf.data. Called on the recording's thread,
/// in batches: when 8 MB of records are held, when the oldest has waited
/// 10 s, and at the end (after the kernel's kallsyms is copied to perf's
/// build-id cache). A consumer that is slow delays the draining of the
/// ring buffers, whose samples are then lost (counted in
/// RecordSummary::lost).
class RecordConsumer {
 public:
  virtual ~RecordConsumer() = default;
  /// Once, before any record: what a reader of the perf.data would find in
  /// its header (the event's attributes, the ARCH feature, and the running
  /// kernel's build-id as its BUILD_ID feature names it).
  virtual void begin(const perf::FileInfo& info) = 0;
  /// One record of the output's data section, as written there: whole
  /// (perf_event_header included), in the file's order (by time, with
  /// FINISHED_ROUND records between passes), laid out per begin()'s
  /// attributes. The bytes live for the call only.
  virtual void record(std::span<const std::byte> rec) = 0;
};

struct RecordOptions {
  /// Samples per second per CPU (cpu-clock, perf's -F).
  unsigned frequency = 99;
  /// Every process (perf's -a).
  bool all = false;
  /// These processes, their threads and the processes they fork.
  std::vector<pid_t> pids;
  /// A command to start and record (with its children); argv[0] is looked
  /// up in PATH.
  std::vector<std::string> command;
  /// Stop after this many seconds (0: at the command's exit, when every
  /// process of `pids` has exited, or at `stop`).
  double duration = 0;
  /// The perf.data to write (renamed into place when complete); empty:
  /// none (the records go to `consumer` only).
  std::string output = "sframe.data";
  /// Also takes every record of the output as it is written (null: none).
  RecordConsumer* consumer = nullptr;
  /// Where the recorder opens the mapped files (null: a table of its own);
  /// the consumer's Session, sharing it, opens none again.
  std::shared_ptr<perf::FileTable> files;
  /// The recorder's own command line (the CMDLINE feature).
  std::vector<std::string> argv;
  /// Walk by frame pointers only, with no tables (the benchmark's
  /// baseline).
  bool frame_pointers_only = false;
  /// `--check N`: for one sample in N (0: none), also what perf record
  /// --call-graph=dwarf copies (user registers, up to 8 KB of stack from
  /// SP), written as such a sample to `check_output`, beside the same
  /// side-band records: a recording that perf unwinds by itself, sample
  /// for sample against ours (same TID and time).
  unsigned check = 0;
  std::string check_output;
  /// Where module tables are kept by build-id between recordings
  /// (table_cache.hpp); empty: none (every module's built).
  std::string table_cache;
  /// Set by the caller (e.g. from a SIGINT handler) to stop; polled at
  /// least every 100 ms.
  const std::atomic<bool>* stop = nullptr;
};

/// What a recording did.
struct RecordSummary {
  /// Samples the BPF program ran for, samples of recorded processes, and
  /// those the ring buffer had no room for (lost).
  std::uint64_t runs = 0;
  std::uint64_t samples = 0;
  std::uint64_t lost = 0;
  std::uint64_t kernel_frames = 0;
  std::uint64_t user_frames = 0;
  /// User callers by how they were found: frame pointer, the module's
  /// own SFrame, SFrame generated from .eh_frame, signal frame.
  std::array<std::uint64_t, 4> by_source{};
  /// Samples of processes not in the tables yet (walked by frame pointers).
  std::uint64_t no_process = 0;
  /// Samples whose walk met a PC in no mapping of its process's table (a
  /// library mapped since the last push; or not code): stepped there by
  /// frame pointers.
  std::uint64_t unmapped_pc = 0;
  /// Rows the walks looked up in module tables, and those the in-kernel
  /// row cache (record_abi.h) held.
  std::uint64_t row_lookups = 0;
  std::uint64_t row_cache_hits = 0;
  /// Why user walks ended (stop_name()).
  std::array<std::uint64_t, SFRAME_RECORD_STOPS> stops{};
  /// The tables: what was built, time to set up before the first sample
  /// (ns: /proc, tables), time spent building and loading tables (ns).
  TableStats tables;
  std::uint64_t setup_ns = 0;
  std::uint64_t table_ns = 0;
  /// Loading and verifying the BPF program (ns).
  std::uint64_t load_ns = 0;
  /// The recorder's own CPU time, user + system (ns; the BPF program's runs
  /// are charged to the sampled tasks: bpf_run_ns).
  std::uint64_t recorder_cpu_ns = 0;
  /// Module tables and process tables the kernel refused (memory, more
  /// modules than SFRAME_RECORD_MAX_MODULES, a full process map): frame
  /// pointers there.
  std::uint64_t modules_refused = 0;
  std::uint64_t processes_refused = 0;
  /// In-program time per sample (bpf_ktime_get_ns at entry and before
  /// submission), summed (ns), and its median (ns, from a power-of-two
  /// histogram: the bucket's lower bound).
  std::uint64_t walk_ns = 0;
  std::uint64_t walk_ns_median = 0;
  /// The kernel's own accounting of the sample program (BPF_ENABLE_STATS):
  /// total run time (ns) and runs.
  std::uint64_t bpf_run_ns = 0;
  std::uint64_t bpf_run_cnt = 0;
  /// `--check`: samples copied. Deferred: samples whose process or module
  /// had no table yet, unwound in user space from their stack copy. Copies
  /// the ring buffer had no room for (a deferred sample is then written as
  /// walked).
  std::uint64_t checks = 0;
  std::uint64_t deferred = 0;
  std::uint64_t copies_lost = 0;
  /// Side-band records lost by the dummy events' ring buffers.
  std::uint64_t sideband_lost = 0;
  /// Records and bytes of records written.
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  /// The command's wait status (-1: no command, or not reaped).
  int command_status = -1;
};

/// Why `sframe record` cannot run here, in one line ("" when it can): not
/// root (CAP_BPF and CAP_PERFMON are needed), no BTF for the running kernel
/// (/sys/kernel/btf/vmlinux), no BPF (the bpf() system call refused).
std::string unavailable_reason();

/// Records until a stop condition. Returns "" on success, else one line
/// saying what failed (the output is then left as it was).
std::string record(const RecordOptions& opt, RecordSummary& summary);

/// The stop reasons of RecordSummary::stops, in words.
const char* stop_name(std::size_t i) noexcept;

/// Adds the BPF program's counters, one sframe_record_counters per possible
/// CPU (the per-CPU map's lookup; record_abi.h), to `summary`: each count
/// summed into its field, and walk_ns_median set from the CPUs' histograms
/// together (the lower bound, ns, of the power-of-two bucket that holds the
/// middle walk; 0 when no walk was counted).
void add_counters(std::span<const sframe_record_counters> per_cpu, RecordSummary& summary);

}  // namespace sframe::record
