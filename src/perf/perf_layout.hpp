// SPDX-License-Identifier: MIT
// The wire layout of perf.data, described once for the reader
// (perf_data.cpp) and the writer (perf_writer.cpp): the file and pipe
// headers and feature numbers (tools/perf/Documentation/perf.data-file-format.txt,
// perf's util/header.h), the perf_event_attr field offsets and the order of
// a sample's fields and of the sample_id trailer
// (include/uapi/linux/perf_event.h, the kernel's perf_output_sample() and
// perf_event__output_id_sample()).
#pragma once

#include <cstddef>
#include <cstdint>

#include "perf_data.hpp"

namespace sframe::perf::layout {

/// "PERFILE2" read as a little-endian u64; the byte-swapped value marks a
/// file written on a big-endian host.
inline constexpr std::uint64_t kMagic = 0x32454c4946524550ull;
inline constexpr std::uint64_t kMagicSwapped = 0x50455246494c4532ull;

/// perf_file_header: magic, size, attr_size, then three perf_file_sections
/// (u64 offset, u64 size: attrs, data, event_types) and adds_features (256
/// bits).
inline constexpr std::uint64_t kFileHeaderSize = 104;
inline constexpr std::size_t kHeaderMagic = 0, kHeaderSizeField = 8, kHeaderAttrSize = 16, kHeaderAttrs = 24,
                             kHeaderData = 40, kHeaderEventTypes = 56, kHeaderFeatures = 72;
/// The pipe-mode header: magic, size (16).
inline constexpr std::uint64_t kPipeHeaderSize = 16;
inline constexpr unsigned kFeatureBits = 256;

/// Feature numbers (perf's HEADER_* of util/header.h).
inline constexpr unsigned kFeatBuildId = 2;
inline constexpr unsigned kFeatHostname = 3;
inline constexpr unsigned kFeatOsRelease = 4;
inline constexpr unsigned kFeatArch = 6;
/// u32 CPUs available, u32 CPUs online.
inline constexpr unsigned kFeatNrCpus = 7;
inline constexpr unsigned kFeatCmdline = 11;
inline constexpr unsigned kFeatEventDesc = 12;
inline constexpr unsigned kFeatAuxtrace = 18;
inline constexpr unsigned kFeatDirFormat = 24;
inline constexpr unsigned kFeatCompressed = 27;

/// perf_event_header: u32 type, u16 misc, u16 size.
inline constexpr std::uint64_t kHeaderSize = 8;
/// The largest record (perf_event_header.size is 16 bits).
inline constexpr std::uint64_t kMaxRecordSize = 0xffff;
/// EVENT_UPDATE record subtype carrying the event's name.
inline constexpr std::uint64_t kEventUpdateName = 2;
/// Build-id records: misc bit saying the size byte after the 20 id bytes is valid.
inline constexpr std::uint16_t kMiscBuildIdSize = 1u << 15;
/// MMAP (not MMAP2): the mapping is not executable.
inline constexpr std::uint16_t kMiscMmapData = 1u << 13;
/// A build_id_event: header, i32 pid, u8 build_id[24] (20 id bytes, then
/// the size byte when kMiscBuildIdSize), the file name (NUL-padded).
inline constexpr std::size_t kBuildIdPid = 8, kBuildIdBytes = 12, kBuildIdFilename = 12 + 24;
/// perf strings (perf_header's do_write_string): u32 length, then the
/// NUL-terminated text padded with NULs to a multiple of this.
inline constexpr std::size_t kNameAlign = 64;

/// perf_event_attr: field offsets (bytes). PERF_ATTR_SIZE_VER0 is 64 bytes,
/// VER7 (up to sig_data) 128, which Debian 12's perf 6.1 reads; larger
/// attributes (VER8: config3) make it refuse the file.
namespace attr {
inline constexpr std::size_t kType = 0, kSize = 4, kConfig = 8, kSamplePeriod = 16, kSampleType = 24,
                             kReadFormat = 32, kFlags = 40, kWakeupEvents = 48, kBpType = 52, kConfig1 = 56,
                             kConfig2 = 64, kBranchSampleType = 72, kSampleRegsUser = 80, kSampleStackUser = 88,
                             kClockid = 92, kSampleRegsIntr = 96, kAuxWatermark = 104, kSampleMaxStack = 108;
inline constexpr std::uint64_t kSizeVer0 = 64;
inline constexpr std::uint64_t kSizeVer7 = 128;
/// Bits of the flags word.
inline constexpr std::uint64_t kFlagFreq = 1ull << 10;
inline constexpr std::uint64_t kFlagSampleIdAll = 1ull << 18;
inline constexpr std::uint64_t kFlagExcludeCallchainUser = 1ull << 22;
}  // namespace attr

/// The sample fields before PERF_SAMPLE_READ, one u64 word each, in the
/// kernel's output order (perf_output_sample()). TID is u32 pid, u32 tid;
/// CPU is u32 cpu, u32 reserved.
inline constexpr std::uint64_t kSampleHead[] = {kSampleIdentifier, kSampleIp,       kSampleTid,
                                                kSampleTime,       kSampleAddr,     kSampleId,
                                                kSampleStreamId,   kSampleCpu,      kSamplePeriod};
/// The sample_id trailer of non-sample records (sample_id_all), one u64
/// word each, in the kernel's order (perf_event__output_id_sample()).
inline constexpr std::uint64_t kSampleIdTrailer[] = {kSampleTid,      kSampleTime, kSampleId,
                                                     kSampleStreamId, kSampleCpu,  kSampleIdentifier};
/// The sample_type bits a SampleId holds.
inline constexpr std::uint64_t kSampleIdBits =
    kSampleTid | kSampleTime | kSampleId | kSampleStreamId | kSampleCpu | kSampleIdentifier;

/// Words of the sample_id trailer for `sample_type`.
constexpr unsigned trailer_words(std::uint64_t sample_type) noexcept {
  unsigned n = 0;
  for (std::uint64_t b : kSampleIdTrailer) n += (sample_type & b) ? 1 : 0;
  return n;
}

/// The word of `id` for `bit` (one of kSampleIdBits), as the kernel writes
/// it: TID is pid then tid, CPU is cpu then a reserved u32 (little-endian).
constexpr std::uint64_t id_word(const SampleId& id, std::uint64_t bit) noexcept {
  switch (bit) {
    case kSampleTid: return id.pid | std::uint64_t{id.tid} << 32;
    case kSampleTime: return id.time;
    case kSampleId:
    case kSampleIdentifier: return id.id;
    case kSampleStreamId: return id.stream_id;
    case kSampleCpu: return id.cpu;
    default: return 0;
  }
}
/// The inverse of id_word(): sets the field of `id` for `bit` from `word`.
constexpr void set_id_word(SampleId& id, std::uint64_t bit, std::uint64_t word) noexcept {
  switch (bit) {
    case kSampleTid: id.pid = static_cast<std::uint32_t>(word), id.tid = static_cast<std::uint32_t>(word >> 32); break;
    case kSampleTime: id.time = word; break;
    case kSampleId:
    case kSampleIdentifier: id.id = word; break;
    case kSampleStreamId: id.stream_id = word; break;
    case kSampleCpu: id.cpu = static_cast<std::uint32_t>(word); break;
    default: break;
  }
}

/// Fixed parts of record bodies (after the header, before the file name or
/// comm and the trailer).
inline constexpr std::size_t kMmapFixed = 8 + 24;         // pid, tid, start, len, pgoff
inline constexpr std::size_t kMmap2Fixed = 8 + 24 + 24 + 8;  // + maj, min, ino, ino_generation | build-id; prot, flags
inline constexpr std::size_t kCommFixed = 8;              // pid, tid
inline constexpr std::size_t kTaskFixed = 24;             // pid, ppid, tid, ptid, time
inline constexpr std::size_t kLostFixed = 16;             // id, lost

}  // namespace sframe::perf::layout
