// SPDX-License-Identifier: MIT
// sframepp: a perf.data writer (the tool's `perf` layer, beside the reader
// of perf_data.hpp; both take the wire layout from perf_layout.hpp).
//
// It writes what `sframe perf inject` and `sframe record` produce: the
// header, 128-byte attributes (PERF_ATTR_SIZE_VER7, which Debian 12's perf
// 6.1 reads; the current perf writes larger ones that 6.1 refuses), feature
// sections (build-ids, cmdline, event description, or any as given), and
// records: MMAP2, COMM, FORK, EXIT, SAMPLE with CALLCHAIN, FINISHED_ROUND,
// or any record as given. File mode (tools/perf/Documentation/
// perf.data-file-format.txt: header, data, feature index and sections,
// attribute IDs, attributes) and pipe mode (a 16-byte header, then
// HEADER_ATTR and HEADER_FEATURE records, then the data).
//
// A file is written to a temporary file beside the destination and renamed
// by finish(); a writer destroyed before finish() leaves the destination
// as it was.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/elf/output_file.hpp"
#include "sframe/format/error.hpp"
#include "perf_data.hpp"

namespace sframe::perf {

/// The attribute as written: its recorded bytes (EventAttr::raw) with the
/// modelled fields of `a` over them and `size` = 128 (PERF_ATTR_SIZE_VER7).
std::array<std::byte, 128> encode_attr(const EventAttr& a);

// Record encoders: each appends one whole record (header included) to
// `out`, with the sample_id trailer of `attr` when it has sample_id_all.
// Errors: kPerfBadRecord when the record would pass 65,535 bytes (the
// 16-bit perf_event_header.size), out unchanged.

/// PERF_RECORD_MMAP2: device and inode, or the build-id when
/// `m.build_id` is not empty (PERF_RECORD_MISC_MMAP_BUILD_ID). `misc`: the
/// CPU mode (kMiscUser, ...).
Expected<void> encode_mmap2(std::vector<std::byte>& out, std::uint16_t misc, const Mmap& m, const SampleId& id,
                            const EventAttr& attr);
/// PERF_RECORD_COMM (misc kMiscCommExec when `c.exec`).
Expected<void> encode_comm(std::vector<std::byte>& out, const Comm& c, const SampleId& id, const EventAttr& attr);
/// PERF_RECORD_FORK (`type` kRecordFork) or PERF_RECORD_EXIT (kRecordExit).
Expected<void> encode_task(std::vector<std::byte>& out, std::uint32_t type, const Task& t, const SampleId& id,
                           const EventAttr& attr);
/// A sample's user registers and stack copy, as perf record
/// --call-graph=dwarf has the kernel write them (perf_event_open(2):
/// PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER).
struct UserRegsStack {
  /// kNone: no user registers (a kernel thread); `regs` is then ignored.
  RegsAbi abi = RegsAbi::kNone;
  /// One value per set bit of attr.sample_regs_user, lowest bit first.
  std::span<const std::uint64_t> regs;
  /// The bytes copied from the user SP up (the record's dyn_size; at most
  /// attr.sample_stack_user).
  std::span<const std::byte> stack;
};

/// PERF_RECORD_SAMPLE with the fields of attr.sample_type: those of
/// SampleId, IP, ADDR, PERIOD, CALLCHAIN (`callchain`, context markers
/// included), and REGS_USER and STACK_USER from `user` (none given: no
/// registers, an empty stack). Errors: kPerfUnsupported for any other
/// sample_type bit; kPerfBadRecord for registers that do not match
/// attr.sample_regs_user, a stack larger than attr.sample_stack_user, or a
/// record over 65,535 bytes.
Expected<void> encode_sample(std::vector<std::byte>& out, std::uint16_t misc, const EventAttr& attr,
                             const SampleId& id, std::uint64_t ip, std::uint64_t addr, std::uint64_t period,
                             std::span<const std::uint64_t> callchain, const UserRegsStack& user = {});
/// A recorded SAMPLE (`r.bytes`, decoded by the reader) rewritten for
/// `attr`, whose sample_type is the recorded one without REGS_USER and
/// STACK_USER: CALLCHAIN replaced by `callchain`, REGS_USER and
/// STACK_USER left out, every other field copied as recorded.
Expected<void> rewrite_sample(std::vector<std::byte>& out, const Record& r, std::span<const std::uint64_t> callchain);
/// PERF_RECORD_FINISHED_ROUND.
void encode_finished_round(std::vector<std::byte>& out);

// Feature sections (perf's util/header.c write_* functions).

/// HEADER_BUILD_ID: one build_id_event per entry (`record_type` 0 in a
/// feature section, kRecordHeaderBuildId as pipe-mode records).
/// Errors: kPerfBadRecord for a build-id that is not 1-20 bytes of hex.
Expected<std::vector<std::byte>> feature_build_ids(std::span<const BuildIdEntry> ids,
                                                   std::uint32_t record_type = 0);
/// HEADER_CMDLINE: perf's argv.
std::vector<std::byte> feature_cmdline(std::span<const std::string> argv);
/// HEADER_EVENT_DESC: every attribute (as encode_attr()), its name and IDs.
std::vector<std::byte> feature_event_desc(std::span<const EventAttr> attrs);
/// A feature holding one perf string (HEADER_HOSTNAME, OSRELEASE, VERSION, ARCH).
std::vector<std::byte> feature_string(std::string_view s);

/// A perf.data being written.
class PerfWriter {
 public:
  /// Starts writing `path` ("-": standard output, pipe mode whatever
  /// `pipe` says). File mode writes a temporary file beside `path`.
  /// Errors: kIoError (value: errno).
  static Expected<PerfWriter> create(const std::string& path, bool pipe);
  /// Writes into `out` instead of a file (tests, fuzzing).
  static PerfWriter to_memory(std::vector<std::byte>& out, bool pipe);

  PerfWriter(PerfWriter&&) noexcept;
  PerfWriter& operator=(PerfWriter&&) noexcept;
  /// Unfinished: the temporary file is removed, the destination untouched.
  ~PerfWriter();

  /// The events, with their sample IDs, before the first record (pipe
  /// mode writes HEADER_ATTR records now). Errors: kPerfBadRecord (an
  /// attribute with too many IDs for one record in pipe mode), kIoError.
  Expected<void> set_attrs(std::span<const EventAttr> attrs);
  /// A feature section (`bit`: perf's HEADER_* number, below 256; a bit
  /// given twice keeps the last). File mode writes it at finish(), pipe
  /// mode now as a HEADER_FEATURE record (BUILD_ID as HEADER_BUILD_ID
  /// records). Errors: kPerfBadRecord, kIoError.
  Expected<void> add_feature(unsigned bit, std::vector<std::byte> data);
  /// One record, header included, as it is (its size is checked against
  /// the header's). Errors: kPerfBadRecord, kIoError.
  Expected<void> write(std::span<const std::byte> record);
  /// Bytes of records written so far (the data section).
  std::uint64_t data_size() const noexcept;
  /// File mode: writes the feature sections, attribute IDs, attributes and
  /// the header, then syncs the file and renames it over the destination.
  /// Pipe mode: flushes. Errors: kIoError.
  Expected<void> finish();

 private:
  struct Impl;
  explicit PerfWriter(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sframe::perf
