// SPDX-License-Identifier: MIT
// sframepp: a reader of perf.data files (layer `perf`, no libelf needed),
// for unwinding `perf record --call-graph=dwarf` samples with SFrame.
//
// The format is the kernel's tools/perf/Documentation/perf.data-file-format.txt
// (file and pipe mode, feature sections, user records such as COMPRESSED)
// and the perf_event_open(2) ABI (include/uapi/linux/perf_event.h: struct
// perf_event_attr, the PERF_RECORD_* layouts, the order of the sample_type
// fields, the sample_id trailer of sample_id_all).
//
// The file is mapped (mmap), not copied; records are handed out as views
// into the mapping (or into the decompressed buffers of COMPRESSED records)
// that stay valid while the PerfData lives. Every length read from the file
// is checked against what holds it before it is used: a malformed file gives
// an Error whose `offset` is the byte offset in the file (for records inside
// a COMPRESSED record: the offset of that COMPRESSED record, `value` the
// offset in its decompressed stream), never a crash or an unbounded
// allocation.
//
// Only 64-bit little-endian recordings are read: a file of the other byte
// order, a recording of a 32-bit architecture or a sample with a 32-bit
// register ABI gives kPerfUnsupported.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/format/error.hpp"

namespace sframe::perf {

/// PERF_RECORD_* types (kernel records 1-63, perf's user records from 64).
enum RecordType : std::uint32_t {
  kRecordMmap = 1,
  kRecordLost = 2,
  kRecordComm = 3,
  kRecordExit = 4,
  kRecordFork = 7,
  kRecordSample = 9,
  kRecordMmap2 = 10,
  kRecordHeaderAttr = 64,
  kRecordHeaderBuildId = 67,
  kRecordFinishedRound = 68,
  kRecordEventUpdate = 78,
  kRecordHeaderFeature = 80,
  kRecordCompressed = 81,
};

/// PERF_SAMPLE_* bits of perf_event_attr.sample_type.
enum SampleBit : std::uint64_t {
  kSampleIp = 1u << 0,
  kSampleTid = 1u << 1,
  kSampleTime = 1u << 2,
  kSampleAddr = 1u << 3,
  kSampleRead = 1u << 4,
  kSampleCallchain = 1u << 5,
  kSampleId = 1u << 6,
  kSampleCpu = 1u << 7,
  kSamplePeriod = 1u << 8,
  kSampleStreamId = 1u << 9,
  kSampleRaw = 1u << 10,
  kSampleBranchStack = 1u << 11,
  kSampleRegsUser = 1u << 12,
  kSampleStackUser = 1u << 13,
  kSampleWeight = 1u << 14,
  kSampleDataSrc = 1u << 15,
  kSampleIdentifier = 1u << 16,
  kSampleTransaction = 1u << 17,
  kSampleRegsIntr = 1u << 18,
  kSamplePhysAddr = 1u << 19,
  kSampleAux = 1u << 20,
  kSampleCgroup = 1u << 21,
  kSampleDataPageSize = 1u << 22,
  kSampleCodePageSize = 1u << 23,
  kSampleWeightStruct = 1u << 24,
};

/// perf_event_header.misc: the CPU mode (low 3 bits) and record flags.
enum Misc : std::uint16_t {
  kMiscCpumodeMask = 7,
  kMiscKernel = 1,
  kMiscUser = 2,
  kMiscHypervisor = 3,
  kMiscGuestKernel = 4,
  kMiscGuestUser = 5,
  /// COMM: the comm changed because of an exec.
  kMiscCommExec = 1u << 13,
  /// MMAP2: the record carries a build-id instead of device and inode.
  kMiscMmapBuildId = 1u << 14,
};

/// Callchain entries at or above this value are context markers
/// (PERF_CONTEXT_KERNEL = -128, PERF_CONTEXT_USER = -512, ...; PERF_CONTEXT_MAX = -4095).
inline constexpr std::uint64_t kContextMax = static_cast<std::uint64_t>(-4095);
inline constexpr std::uint64_t kContextKernel = static_cast<std::uint64_t>(-128);
inline constexpr std::uint64_t kContextUser = static_cast<std::uint64_t>(-512);

/// PERF_SAMPLE_REGS_ABI_* (the first word of a REGS_USER block).
enum class RegsAbi : std::uint64_t { kNone = 0, k32 = 1, k64 = 2 };

/// x86-64 perf register indices (arch/x86/include/uapi/asm/perf_regs.h):
/// the bit of sample_regs_user and the position among the set bits.
enum X86Reg : unsigned {
  kX86Ax = 0, kX86Bx = 1, kX86Cx = 2, kX86Dx = 3, kX86Si = 4, kX86Di = 5, kX86Bp = 6, kX86Sp = 7, kX86Ip = 8,
  kX86R8 = 16, kX86R15 = 23,
};

/// Reads a little-endian integer of type T at `p` (no alignment needed).
template <class T>
inline T load_le(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;  // the reader accepts only little-endian files on little-endian hosts
}

/// One event of the recording: its perf_event_attr (the fields the reader
/// uses), its sample IDs and its name.
struct EventAttr {
  std::uint32_t type = 0;
  std::uint64_t config = 0;
  /// sample_period, or sample_freq when `freq`.
  std::uint64_t sample_period = 0;
  std::uint64_t sample_type = 0;
  std::uint64_t read_format = 0;
  /// The flag bits word (disabled, inherit, ..., bit 18 sample_id_all).
  std::uint64_t flags = 0;
  std::uint64_t branch_sample_type = 0;
  /// Which user registers a sample carries (x86-64: X86Reg bits).
  std::uint64_t sample_regs_user = 0;
  /// Bytes of user stack requested per sample.
  std::uint32_t sample_stack_user = 0;
  std::uint64_t sample_regs_intr = 0;
  bool freq() const noexcept { return (flags >> 10) & 1; }
  bool sample_id_all() const noexcept { return (flags >> 18) & 1; }
  /// The sample IDs the kernel gave this event (one per CPU or thread).
  std::vector<std::uint64_t> ids;
  /// From the EVENT_DESC feature (or an EVENT_UPDATE record), else a name
  /// made from type and config ("cpu-clock", "cycles", "raw 0x...").
  std::string name;
  /// The attribute's bytes as recorded, zero-extended to PERF_ATTR_SIZE_VER7
  /// (128 bytes; larger attributes cut there): the fields above not
  /// modelled (clockid, sample_max_stack, ...) as written, for a writer
  /// that writes the attribute back.
  std::array<std::byte, 128> raw{};
};

/// The kernel's name as perf writes it: in BUILD_ID entries and in perf
/// script's frames; also the folder of its kallsyms copy in perf's
/// build-id cache.
inline constexpr std::string_view kKernelDso = "[kernel.kallsyms]";
/// The file name of the kernel text's MMAP record, as perf record writes it.
inline constexpr std::string_view kKernelTextMmap = "[kernel.kallsyms]_text";

/// One entry of the BUILD_ID feature (or a HEADER_BUILD_ID record).
struct BuildIdEntry {
  std::int32_t pid = 0;
  /// cpumode of the DSO (kMiscKernel, kMiscUser, ...).
  std::uint16_t cpumode = 0;
  /// Lower-case hex.
  std::string build_id;
  std::string filename;
};

/// What the header and feature sections say about the recording.
struct FileInfo {
  /// Pipe mode (`perf record -o -`): no header sections, attributes and
  /// features come as records.
  bool pipe = false;
  std::vector<EventAttr> attrs;
  std::vector<BuildIdEntry> build_ids;
  /// The CMDLINE feature: perf's argv.
  std::vector<std::string> cmdline;
  /// The ARCH feature ("x86_64"); empty when absent.
  std::string arch;
  /// The data section (file mode; pipe mode: everything after the header).
  std::uint64_t data_offset = 0;
  std::uint64_t data_size = 0;
  /// A feature section as recorded (file mode), or the data of a
  /// HEADER_FEATURE record (pipe mode): `bit` is perf's HEADER_* number.
  struct Feature {
    unsigned bit = 0;
    std::span<const std::byte> bytes;
  };
  /// Every feature section, in bit order (file mode) or record order.
  std::vector<Feature> features;
};

/// The sample_id fields of a record (the trailer of non-sample records when
/// sample_id_all, or a sample's own fields). `has` is a SampleBit mask of the
/// fields present.
struct SampleId {
  std::uint64_t has = 0;
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::uint64_t time = 0;
  std::uint64_t id = 0;
  std::uint64_t stream_id = 0;
  std::uint32_t cpu = 0;
  bool operator==(const SampleId&) const = default;
};

/// A decoded PERF_RECORD_SAMPLE. Views point into the PerfData.
struct Sample {
  const EventAttr* attr = nullptr;
  std::uint64_t ip = 0;
  std::uint64_t addr = 0;
  std::uint64_t period = 0;
  /// PERF_SAMPLE_CALLCHAIN: `callchain_nr` words at `callchain_data`,
  /// context markers included (kContextKernel, ...).
  const std::byte* callchain_data = nullptr;
  std::uint64_t callchain_nr = 0;
  std::uint64_t callchain(std::size_t i) const noexcept { return load_le<std::uint64_t>(callchain_data + 8 * i); }
  /// PERF_SAMPLE_REGS_USER: the ABI word and one word per set bit of
  /// attr->sample_regs_user (kNone: the sample hit a kernel thread).
  RegsAbi regs_abi = RegsAbi::kNone;
  const std::byte* regs_data = nullptr;
  /// The user register with perf index `r` (X86Reg), if it was sampled.
  std::optional<std::uint64_t> user_reg(unsigned r) const noexcept;
  /// user_reg() for registers 0 .. out.size() - 1 at once, in one pass over
  /// sample_regs_user: out[r] is set and bit r of the result is set for
  /// each of them the sample holds (out.size() at most 64).
  std::uint64_t user_regs(std::span<std::uint64_t> out) const noexcept;
  /// PERF_SAMPLE_STACK_USER: the first dyn_size bytes of the copy (the
  /// valid part, starting at the user SP).
  std::span<const std::byte> stack;
  /// The size the kernel reserved (sample_stack_user, rounded).
  std::uint64_t stack_size = 0;
  /// Where fields start in the record (bytes from its first byte, the
  /// header's; 0: absent), for a writer that rewrites a sample: the
  /// CALLCHAIN's nr word, the REGS_USER ABI word, the STACK_USER size word,
  /// and the end of the STACK_USER block (after its dyn_size word).
  std::uint32_t callchain_at = 0;
  std::uint32_t regs_user_at = 0;
  std::uint32_t stack_user_at = 0;
  std::uint32_t stack_user_end = 0;
};

/// A decoded PERF_RECORD_MMAP or MMAP2.
struct Mmap {
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::uint64_t start = 0;
  std::uint64_t len = 0;
  std::uint64_t pgoff = 0;
  bool mmap2 = false;
  std::uint32_t maj = 0, min = 0;
  std::uint64_t ino = 0;
  /// MMAP2 with kMiscMmapBuildId: the build-id bytes (at most 20).
  std::span<const std::byte> build_id;
  std::uint32_t prot = 0;
  std::uint32_t flags = 0;
  std::string_view filename;
  /// PROT_EXEC (MMAP2), or !PERF_RECORD_MISC_MMAP_DATA (MMAP).
  bool exec = false;
};

/// A decoded PERF_RECORD_COMM.
struct Comm {
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::string_view comm;
  bool exec = false;
};

/// A decoded PERF_RECORD_FORK or EXIT.
struct Task {
  std::uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  std::uint64_t time = 0;
};

/// A decoded PERF_RECORD_LOST.
struct Lost {
  std::uint64_t id = 0;
  std::uint64_t lost = 0;
};

/// One record handed to the callback of PerfData::for_each. Only the member
/// matching `type` is filled.
struct Record {
  std::uint32_t type = 0;
  std::uint16_t misc = 0;
  /// Byte offset of the record in the file (for a record from a COMPRESSED
  /// record: the offset of that COMPRESSED record).
  std::uint64_t offset = 0;
  /// The record's event (null for records without one).
  const EventAttr* attr = nullptr;
  /// The whole record as recorded, its header included.
  std::span<const std::byte> bytes;
  SampleId id;
  Sample sample;
  Mmap mmap;
  Comm comm;
  Task task;
  Lost lost;
};

/// Counts of what the reader went through.
struct ReadStats {
  std::uint64_t records = 0;
  std::uint64_t samples = 0;
  std::uint64_t lost_records = 0;
  /// Sum of PERF_RECORD_LOST.lost: samples the kernel dropped.
  std::uint64_t lost_samples = 0;
  std::uint64_t compressed_records = 0;
  std::uint64_t decompressed_bytes = 0;
  std::uint64_t finished_rounds = 0;
  /// User records (type 64 and above) the reader does not consume: passed
  /// on undecoded, with the records without a time (at the front).
  std::uint64_t other_records = 0;
};

/// Bounds on hostile input.
struct ReadLimits {
  /// Output of one COMPRESSED record (perf writes at most its ring-buffer size).
  std::uint64_t max_decompressed_record = 64u << 20;
  /// All decompressed data together.
  std::uint64_t max_decompressed_total = 4ull << 30;
  /// Attributes (events) in one recording.
  std::size_t max_attrs = 4096;
};

/// An opened perf.data file or stream.
class PerfData {
 public:
  /// Maps the file at `path` ("-": reads standard input whole, for pipe
  /// mode) and reads its header, attributes and feature sections (file
  /// mode) or its leading user records (pipe mode: up to the first kernel
  /// record). Errors: kIoError (open/map failure, `value` = errno),
  /// kPerfBadHeader, kPerfTruncated, kPerfBadRecord, kPerfUnsupported.
  static Expected<PerfData> open(const std::string& path, const ReadLimits& limits = {});
  /// As open(), over bytes held in memory (copied).
  static Expected<PerfData> from_bytes(std::span<const std::byte> bytes, const ReadLimits& limits = {});

  PerfData(PerfData&&) noexcept;
  PerfData& operator=(PerfData&&) noexcept;
  ~PerfData();

  const FileInfo& info() const noexcept;

  /// Decodes every record of the data section (COMPRESSED records expanded
  /// in place) and calls `fn` for each in time order: sorted by the record's
  /// time (sample TIME, or the sample_id trailer), records without a time
  /// and records of equal time in file order, as perf's ordered events
  /// deliver them after each FINISHED_ROUND. The user records the reader
  /// understands (attributes, features, build-ids, event updates,
  /// FINISHED_ROUND, COMPRESSED) are consumed, not passed on; other user
  /// records are passed on undecoded.
  /// Stops at the first malformed record with its error, after delivering
  /// the records before it (each record is decoded once, as it is
  /// delivered). Can be called more than once.
  Expected<void> for_each(const std::function<void(const Record&)>& fn);

  const ReadStats& stats() const noexcept;

 private:
  struct Impl;
  explicit PerfData(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

/// Decodes records that come one by one rather than from a file (a perf
/// ring buffer's, a recorder's own), as PerfData::for_each decodes them, for
/// a stream whose events are `attrs`. Views in the decoded Record point into
/// the bytes given.
class RecordDecoder {
 public:
  explicit RecordDecoder(std::vector<EventAttr> attrs);
  ~RecordDecoder();
  RecordDecoder(const RecordDecoder&) = delete;
  RecordDecoder& operator=(const RecordDecoder&) = delete;
  /// Decodes the whole record `bytes` (its header included; its size field
  /// must equal bytes.size()). Errors: kPerfBadRecord, kPerfUnsupported
  /// (offsets within `bytes`).
  Expected<void> decode(std::span<const std::byte> bytes, Record& out) const;

 private:
  struct State;
  std::unique_ptr<State> impl_;
};

/// The perf name of an event of `type` and `config` without an EVENT_DESC
/// name: "cpu-clock", "task-clock", "cycles", ..., else "TYPE:0xCONFIG".
std::string default_event_name(std::uint32_t type, std::uint64_t config);

/// `bytes` in lower-case hex, two digits a byte in order (how perf and the
/// build-id cache spell a build-id).
std::string lowercase_hex(std::span<const std::byte> bytes);

}  // namespace sframe::perf
