// SPDX-License-Identifier: MIT
// sframepp (private): one perf record's bytes -> Record, per the events'
// attributes (record and sample layouts: include/uapi/linux/perf_event.h;
// the sample_id trailer: perf_event_attr.sample_id_all). The file reader
// (perf_data.cpp) and RecordDecoder both decode through it.
#pragma once

#include "perf_data.hpp"

#include <cstring>
#include <optional>
#include <unordered_map>

namespace sframe::perf::detail {

// A bounds-checked cursor over a byte range whose position is reported as a
// file offset (`base` = offset of bytes[0]).
struct Cursor {
  std::span<const std::byte> bytes;
  std::uint64_t base = 0;
  std::size_t pos = 0;
  // For records decompressed out of a COMPRESSED record: every error points
  // at that record (`base` is then the stream offset, reported as value).
  std::optional<std::uint64_t> outer;

  std::size_t left() const noexcept { return bytes.size() - pos; }
  Unexpected fail(ErrorCode c) const {
    if (outer) return make_error(c, *outer, base + pos);
    return make_error(c, base + pos);
  }
  bool can(std::uint64_t n) const noexcept { return n <= left(); }
  template <class T>
  T get() {
    T v = load_le<T>(bytes.data() + pos);
    pos += sizeof(T);
    return v;
  }
};

// A NUL-terminated string inside `b` (the whole span when no NUL).
inline std::string_view cstr(std::span<const std::byte> b) {
  const char* p = reinterpret_cast<const char*>(b.data());
  return std::string_view(p, strnlen(p, b.size()));
}

/// Decodes records per the events' attributes `attrs`, which it reads and
/// does not own (a pipe-mode file's grow as its records are read: reindex()
/// after each change).
class Decoder {
 public:
  explicit Decoder(const std::vector<EventAttr>& attrs) : attrs_(attrs) { reindex(); }
  /// Indexes the attributes by their sample IDs (EventAttr::ids).
  void reindex();
  /// The index in `attrs` of the event with sample ID `id`, if any.
  std::optional<std::size_t> index_of(std::uint64_t id) const;
  /// Decodes one record at `rec` (its header included) into `r`. Errors:
  /// kPerfBadRecord, kPerfUnsupported, at the offset the cursor reports.
  Expected<void> decode(const Cursor& rec, Record& r) const;
  /// The time of a kernel record at `rec`, for ordering (0 when it has none).
  std::uint64_t time_of(const Cursor& rec) const;

 private:
  const EventAttr* attr_of(std::uint64_t id, bool have_id) const;
  std::pair<std::uint64_t, bool> sample_id_of(std::span<const std::byte> body) const;
  Expected<SampleId> trailer(const Cursor& rec, std::span<const std::byte> body, const EventAttr* attr,
                             std::size_t fixed) const;
  const EventAttr* trailer_attr(std::span<const std::byte> body) const;
  Expected<void> decode_sample(Cursor c, Record& r) const;

  const std::vector<EventAttr>& attrs_;
  // Sample ID -> index in attrs_.
  std::unordered_map<std::uint64_t, std::size_t> by_id_;
};

}  // namespace sframe::perf::detail
