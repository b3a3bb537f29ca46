// SPDX-License-Identifier: MIT
// The perf.data reader: header, attributes, feature sections, records
// (tools/perf/Documentation/perf.data-file-format.txt; record and sample
// layouts from include/uapi/linux/perf_event.h).
#include "perf_data.hpp"

#include "file_bytes.hpp"
#include "perf_layout.hpp"
#include "record_decode.hpp"

#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <unordered_map>

namespace sframe::perf {
namespace {

using namespace layout;
using detail::Cursor;
using detail::cstr;
constexpr std::uint64_t kAttrSizeVer0 = attr::kSizeVer0;

Unexpected bad(ErrorCode c, std::uint64_t off, std::uint64_t value = 0) { return make_error(c, off, value); }

// Decodes a perf_event_attr of `size` bytes at `p` (sizes below 64 refused
// by the caller; fields past `size` stay 0, as the kernel zero-extends).
EventAttr decode_attr(const std::byte* p, std::uint64_t size) {
  EventAttr a;
  std::memcpy(a.raw.data(), p, std::min<std::uint64_t>(size, a.raw.size()));
  const std::byte* r = a.raw.data();
  a.type = load_le<std::uint32_t>(r + attr::kType);
  a.config = load_le<std::uint64_t>(r + attr::kConfig);
  a.sample_period = load_le<std::uint64_t>(r + attr::kSamplePeriod);
  a.sample_type = load_le<std::uint64_t>(r + attr::kSampleType);
  a.read_format = load_le<std::uint64_t>(r + attr::kReadFormat);
  a.flags = load_le<std::uint64_t>(r + attr::kFlags);
  a.branch_sample_type = load_le<std::uint64_t>(r + attr::kBranchSampleType);
  a.sample_regs_user = load_le<std::uint64_t>(r + attr::kSampleRegsUser);
  a.sample_stack_user = load_le<std::uint32_t>(r + attr::kSampleStackUser);
  a.sample_regs_intr = load_le<std::uint64_t>(r + attr::kSampleRegsIntr);
  return a;
}

}  // namespace

struct PerfData::Impl {
  ReadLimits limits;
  // The file: mapped, or read whole (stdin), or copied (from_bytes).
  detail::FileBytes contents;
  std::span<const std::byte> file;

  FileInfo info;
  ReadStats stats;
  // The records' decoder, over info.attrs.
  detail::Decoder decoder{info.attrs};
  // Decompressed data of COMPRESSED records (stable addresses).
  std::deque<std::vector<std::byte>> decompressed;

  // --- header ------------------------------------------------------------

  Expected<void> read_header() {
    if (file.size() < kPipeHeaderSize) return bad(PerfErrc::kPerfBadHeader, 0, file.size());
    const auto magic = load_le<std::uint64_t>(file.data());
    if (magic == kMagicSwapped)
      return bad(PerfErrc::kPerfUnsupported, 0, magic);  // written on a big-endian host
    if (magic != kMagic) return bad(PerfErrc::kPerfBadHeader, 0, magic);
    const auto hsize = load_le<std::uint64_t>(file.data() + kHeaderSizeField);
    if (hsize == kPipeHeaderSize) {
      info.pipe = true;
      info.data_offset = kPipeHeaderSize;
      info.data_size = file.size() - kPipeHeaderSize;
      return {};
    }
    if (hsize < kFileHeaderSize) return bad(PerfErrc::kPerfBadHeader, 8, hsize);
    if (file.size() < kFileHeaderSize) return bad(PerfErrc::kPerfTruncated, 0, file.size());
    const auto u64 = [&](std::uint64_t off) { return load_le<std::uint64_t>(file.data() + off); };
    std::uint64_t attr_size = u64(kHeaderAttrSize);
    const std::uint64_t attrs_off = u64(kHeaderAttrs), attrs_size = u64(kHeaderAttrs + 8);
    info.data_offset = u64(kHeaderData);
    info.data_size = u64(kHeaderData + 8);
    if (!fits(attrs_off, attrs_size)) return bad(PerfErrc::kPerfTruncated, kHeaderAttrs, attrs_off);
    if (!fits(info.data_offset, info.data_size)) return bad(PerfErrc::kPerfTruncated, kHeaderData, info.data_offset);
    // Each entry (perf_file_attr, `attr_size` bytes in all): the
    // attribute, then a perf_file_section locating its IDs.
    if (attr_size < kAttrSizeVer0 + 16 || attr_size > 4096) return bad(PerfErrc::kPerfBadHeader, 16, attr_size);
    const std::uint64_t entry = attr_size;
    attr_size -= 16;
    if (attrs_size % entry != 0) return bad(PerfErrc::kPerfBadHeader, 32, attrs_size);
    if (attrs_size / entry > limits.max_attrs) return bad(PerfErrc::kPerfBadHeader, 32, attrs_size / entry);
    // Each attribute's IDs are its own bytes of the file (perf writes one
    // array per event), so all of them together fit in the file. Arrays
    // that alias one region would multiply it by the attribute count:
    // 4096 attributes naming the whole file ask for 4096 times its size.
    std::uint64_t all_ids_size = 0;
    for (std::uint64_t off = attrs_off; off < attrs_off + attrs_size; off += entry) {
      EventAttr a = decode_attr(file.data() + off, attr_size);
      const std::uint64_t ids_off = u64(off + attr_size), ids_size = u64(off + attr_size + 8);
      if (!fits(ids_off, ids_size) || ids_size % 8 != 0) return bad(PerfErrc::kPerfTruncated, off + attr_size, ids_off);
      all_ids_size += ids_size;
      if (all_ids_size > file.size()) return bad(PerfErrc::kPerfBadHeader, off + attr_size + 8, ids_size);
      for (std::uint64_t i = 0; i < ids_size; i += 8) a.ids.push_back(u64(ids_off + i));
      info.attrs.push_back(std::move(a));
    }
    if (info.attrs.empty()) return bad(PerfErrc::kPerfBadHeader, 32, 0);
    // Feature sections: one perf_file_section per set bit of adds_features,
    // in bit order, right after the data section.
    std::uint64_t at = info.data_offset + info.data_size;
    for (unsigned bit = 0; bit < kFeatureBits; ++bit) {
      const std::uint64_t word = u64(kHeaderFeatures + 8 * (bit / 64));
      if (!((word >> (bit % 64)) & 1)) continue;
      if (!fits(at, 16)) return bad(PerfErrc::kPerfTruncated, at, bit);
      const std::uint64_t off = u64(at), size = u64(at + 8);
      if (!fits(off, size)) return bad(PerfErrc::kPerfTruncated, at, off);
      info.features.push_back({bit, file.subspan(off, size)});
      if (auto r = feature(bit, file.subspan(off, size), off); !r) return r;
      at += 16;
    }
    return finish_attrs();
  }

  bool fits(std::uint64_t off, std::uint64_t size) const noexcept {
    return off <= file.size() && size <= file.size() - off;
  }

  // A perf string: u32 len, then len bytes (NUL-padded).
  static Expected<std::string> perf_string(Cursor& c) {
    if (!c.can(4)) return c.fail(PerfErrc::kPerfTruncated);
    const auto len = c.get<std::uint32_t>();
    if (!c.can(len)) return c.fail(PerfErrc::kPerfTruncated);
    std::string s(cstr(c.bytes.subspan(c.pos, len)));
    c.pos += len;
    return s;
  }

  Expected<void> feature(unsigned bit, std::span<const std::byte> b, std::uint64_t off) {
    Cursor c{b, off, 0, std::nullopt};
    switch (bit) {
      case kFeatArch: {
        auto s = perf_string(c);
        if (!s) return Unexpected{s.error()};
        info.arch = *s;
        // 32-bit recordings are refused (the samples' registers and
        // addresses are 32-bit; the unwinder reads x86-64 frames).
        if (info.arch == "i386" || info.arch == "i686" || info.arch == "x86" || info.arch == "arm" ||
            info.arch == "powerpc" || info.arch == "s390")
          return bad(PerfErrc::kPerfUnsupported, off, 32);
        return {};
      }
      case kFeatCmdline: {
        if (!c.can(4)) return c.fail(PerfErrc::kPerfTruncated);
        const auto n = c.get<std::uint32_t>();
        for (std::uint32_t i = 0; i < n; ++i) {
          auto s = perf_string(c);
          if (!s) return Unexpected{s.error()};
          info.cmdline.push_back(std::move(*s));
        }
        return {};
      }
      case kFeatEventDesc: {
        if (!c.can(8)) return c.fail(PerfErrc::kPerfTruncated);
        const auto n = c.get<std::uint32_t>();
        const auto asz = c.get<std::uint32_t>();
        if (asz < kAttrSizeVer0) return c.fail(PerfErrc::kPerfBadRecord);
        for (std::uint32_t i = 0; i < n; ++i) {
          if (!c.can(asz + 4ull)) return c.fail(PerfErrc::kPerfTruncated);
          c.pos += asz;
          const auto nr_ids = c.get<std::uint32_t>();
          auto name = perf_string(c);
          if (!name) return Unexpected{name.error()};
          if (!c.can(8ull * nr_ids)) return c.fail(PerfErrc::kPerfTruncated);
          // The i-th description belongs to the i-th attribute.
          if (i < info.attrs.size()) info.attrs[i].name = *name;
          c.pos += 8ull * nr_ids;
        }
        return {};
      }
      case kFeatBuildId: {
        while (c.left() > 0) {
          const std::size_t start = c.pos;
          if (!c.can(kHeaderSize)) return c.fail(PerfErrc::kPerfTruncated);
          c.pos += 6;
          const auto size = c.get<std::uint16_t>();
          c.pos = start;
          if (size < kHeaderSize + 4 + 24 || !c.can(size)) return c.fail(PerfErrc::kPerfBadRecord);
          if (auto r = build_id_record(b.subspan(start, size)); !r) return bad(r.error().code(), off + start);
          c.pos = start + size;
        }
        return {};
      }
      default:
        return {};
    }
  }

  // A build_id_event: header, i32 pid, u8 build_id[24] (20 bytes, size byte
  // when kMiscBuildIdSize), filename.
  Expected<void> build_id_record(std::span<const std::byte> r) {
    if (r.size() < kHeaderSize + 4 + 24) return bad(PerfErrc::kPerfBadRecord, 0);
    const auto misc = load_le<std::uint16_t>(r.data() + 4);
    BuildIdEntry e;
    e.pid = load_le<std::int32_t>(r.data() + kBuildIdPid);
    e.cpumode = misc & kMiscCpumodeMask;
    std::size_t n = 20;
    if (misc & kMiscBuildIdSize) n = std::min<std::size_t>(20, std::to_integer<std::size_t>(r[kBuildIdBytes + 20]));
    e.build_id = lowercase_hex(r.subspan(kBuildIdBytes, n));
    e.filename = std::string(cstr(r.subspan(kBuildIdFilename)));
    info.build_ids.push_back(std::move(e));
    return {};
  }

  Expected<void> finish_attrs() {
    for (EventAttr& a : info.attrs)
      if (a.name.empty()) a.name = default_event_name(a.type, a.config);
    decoder.reindex();
    return {};
  }

  // --- the data section ------------------------------------------------

  // One record located: its bytes, where it is, its time for ordering.
  struct Located {
    std::uint64_t time;
    std::uint64_t seq;
    const std::byte* data;
    std::uint32_t size;
    std::uint64_t base;
    std::optional<std::uint64_t> outer;
  };

  // Walks the records of `bytes` (file offset `base`), consuming user
  // records and locating kernel ones. Returns how many bytes were whole
  // records (the rest is an incomplete record carried over, only allowed
  // inside decompressed data: `partial_ok`).
  Expected<std::size_t> scan(std::span<const std::byte> bytes, std::uint64_t base, std::optional<std::uint64_t> outer,
                             bool partial_ok, std::vector<Located>& out, ZSTD_DCtx* dctx,
                             std::vector<std::byte>& carry) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      Cursor here{bytes, base, pos, outer};
      if (bytes.size() - pos < kHeaderSize) {
        if (partial_ok) return pos;
        return here.fail(PerfErrc::kPerfTruncated);
      }
      const auto type = load_le<std::uint32_t>(bytes.data() + pos);
      const auto size = load_le<std::uint16_t>(bytes.data() + pos + 6);
      if (size < kHeaderSize) return here.fail(PerfErrc::kPerfBadRecord);
      if (size > bytes.size() - pos) {
        if (partial_ok) return pos;
        return here.fail(PerfErrc::kPerfTruncated);
      }
      const std::span<const std::byte> rec = bytes.subspan(pos, size);
      ++stats.records;
      if (type < kRecordHeaderAttr) {
        Cursor rc{rec, base + pos, 0, outer};
        out.push_back({decoder.time_of(rc), out.size(), rec.data(), size, base + pos, outer});
      } else if (auto r = user_record(type, rec, base + pos, outer, out, dctx, carry); !r) {
        return Unexpected{r.error()};
      }
      pos += size;
    }
    return pos;
  }

  Expected<void> user_record(std::uint32_t type, std::span<const std::byte> rec, std::uint64_t off,
                             std::optional<std::uint64_t> outer, std::vector<Located>& out, ZSTD_DCtx* dctx,
                             std::vector<std::byte>& carry) {
    const auto fail = [&](ErrorCode c) { return outer ? bad(c, *outer, off) : bad(c, off); };
    const std::span<const std::byte> body = rec.subspan(kHeaderSize);
    switch (type) {
      case kRecordFinishedRound:
        ++stats.finished_rounds;
        return {};
      case kRecordHeaderAttr: {
        // The attribute (its own `size` field, offset 4), then its IDs.
        if (body.size() < kAttrSizeVer0) return fail(PerfErrc::kPerfBadRecord);
        std::uint64_t asz = load_le<std::uint32_t>(body.data() + 4);
        if (asz == 0) asz = kAttrSizeVer0;
        if (asz < kAttrSizeVer0 || asz > body.size() || (body.size() - asz) % 8 != 0) return fail(PerfErrc::kPerfBadRecord);
        if (info.attrs.size() >= limits.max_attrs) return fail(PerfErrc::kPerfBadRecord);
        EventAttr a = decode_attr(body.data(), asz);
        for (std::uint64_t i = asz; i < body.size(); i += 8) a.ids.push_back(load_le<std::uint64_t>(body.data() + i));
        info.attrs.push_back(std::move(a));
        return finish_attrs();
      }
      case kRecordHeaderBuildId:
        if (auto r = build_id_record(rec); !r) return fail(PerfErrc::kPerfBadRecord);
        return {};
      case kRecordEventUpdate: {
        if (body.size() < 16) return fail(PerfErrc::kPerfBadRecord);
        const auto kind = load_le<std::uint64_t>(body.data());
        const auto id = load_le<std::uint64_t>(body.data() + 8);
        if (kind == kEventUpdateName) {
          const std::optional<std::size_t> at = decoder.index_of(id);
          // An empty name names nothing: the event keeps the one it has.
          const std::string_view name = cstr(body.subspan(16));
          if (at && !name.empty()) info.attrs[*at].name = std::string(name);
        }
        return {};
      }
      case kRecordHeaderFeature: {
        if (body.size() < 8) return fail(PerfErrc::kPerfBadRecord);
        const auto feat = load_le<std::uint64_t>(body.data());
        if (feat >= kFeatureBits) return {};
        info.features.push_back({static_cast<unsigned>(feat), body.subspan(8)});
        auto r = feature(static_cast<unsigned>(feat), body.subspan(8), off + kHeaderSize + 8);
        if (!r) return fail(r.error().code());
        // Names may come after the attributes they name.
        return finish_attrs();
      }
      case kRecordCompressed: {
        ++stats.compressed_records;
        const std::uint64_t outer_off = outer ? *outer : off;
        if (outer) return fail(PerfErrc::kPerfBadRecord);  // nested compression
        std::vector<std::byte> buf = std::move(carry);
        carry.clear();
        const std::size_t kept = buf.size();
        ZSTD_inBuffer in{body.data(), body.size(), 0};
        for (;;) {
          const std::size_t chunk = ZSTD_DStreamOutSize();
          if (buf.size() - kept + chunk > limits.max_decompressed_record ||
              stats.decompressed_bytes + buf.size() - kept + chunk > limits.max_decompressed_total)
            return bad(PerfErrc::kPerfDecompress, outer_off, buf.size() - kept);
          const std::size_t at = buf.size();
          buf.resize(at + chunk);
          ZSTD_outBuffer o{buf.data() + at, chunk, 0};
          const std::size_t in_before = in.pos;
          const std::size_t rc = ZSTD_decompressStream(dctx, &o, &in);
          buf.resize(at + o.pos);
          if (ZSTD_isError(rc)) return bad(PerfErrc::kPerfDecompress, outer_off, in.pos);
          const bool full = o.pos == chunk;
          if (in.pos == in.size && !full) break;
          // Output room left, input left, nothing produced: no progress.
          if (!full && o.pos == 0 && in_before == in.pos) return bad(PerfErrc::kPerfDecompress, outer_off, in.pos);
        }
        stats.decompressed_bytes += buf.size() - kept;
        decompressed.push_back(std::move(buf));
        const std::vector<std::byte>& d = decompressed.back();
        // Records inside are located in `d`; an incomplete last one is
        // carried over to the next COMPRESSED record (perf splits freely).
        std::vector<std::byte> unused;
        auto whole = scan(d, 0, outer_off, true, out, dctx, unused);
        if (!whole) return Unexpected{whole.error()};
        carry.assign(d.begin() + static_cast<std::ptrdiff_t>(*whole), d.end());
        return {};
      }
      default:
        ++stats.other_records;
        out.push_back({0, out.size(), rec.data(), static_cast<std::uint32_t>(rec.size()), off, outer});
        return {};
    }
  }

  std::vector<Located> located;
  bool scanned = false;
  static constexpr std::size_t kPrefetchAhead = 2;
  static constexpr std::uint32_t kPrefetchBytes = 1024;

  Expected<void> scan_all() {
    if (scanned) return {};
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (!dctx) return bad(PerfErrc::kPerfDecompress, 0);
    std::vector<std::byte> carry;
    auto r = scan(file.subspan(info.data_offset, info.data_size), info.data_offset, std::nullopt, false, located,
                  dctx, carry);
    ZSTD_freeDCtx(dctx);
    if (!r) return Unexpected{r.error()};
    if (!carry.empty()) return bad(PerfErrc::kPerfTruncated, info.data_offset + info.data_size, carry.size());
    if (info.attrs.empty()) return bad(PerfErrc::kPerfBadHeader, 0);
    // A file written in time order (sframe record's, perf's in each round)
    // is walked as it is: a merge sort of sorted records still moves each
    // of them log n times.
    const auto by_time = [](const Located& a, const Located& b) { return a.time < b.time; };
    if (!std::is_sorted(located.begin(), located.end(), by_time))
      std::stable_sort(located.begin(), located.end(), by_time);
    scanned = true;
    return {};
  }

  Expected<void> for_each(const std::function<void(const Record&)>& fn) {
    if (auto r = scan_all(); !r) return r;
    // Each record decoded once, as it is delivered: a malformed one stops
    // the walk with its error, after the records before it.
    const bool first = stats.samples == 0 && stats.lost_records == 0;
    Record rec;
    for (std::size_t i = 0; i < located.size(); ++i) {
      const Located& l = located[i];
      // A record is read by a load that misses: its header, registers
      // and the top of a stack copy lie one 8 KB record (a new page) from
      // the last. Asking for the first lines of the record two ahead lets
      // those misses overlap this record's decoding and walk.
      if (i + kPrefetchAhead < located.size()) {
        const Located& ahead = located[i + kPrefetchAhead];
        const std::uint32_t n = std::min(ahead.size, kPrefetchBytes);
        for (std::uint32_t o = 0; o < n; o += 64) __builtin_prefetch(ahead.data + o);
      }
      rec = Record{};
      Cursor c{{l.data, l.size}, l.base, 0, l.outer};
      if (auto r = decoder.decode(c, rec); !r) return r;
      rec.offset = l.outer ? *l.outer : l.base;
      if (first) {
        if (rec.type == kRecordSample) ++stats.samples;
        if (rec.type == kRecordLost) {
          ++stats.lost_records;
          stats.lost_samples += rec.lost.lost;
        }
      }
      fn(rec);
    }
    return {};
  }
};

struct RecordDecoder::State {
  explicit State(std::vector<EventAttr> a) : attrs(std::move(a)) {}
  std::vector<EventAttr> attrs;
  detail::Decoder decoder{attrs};
};

RecordDecoder::RecordDecoder(std::vector<EventAttr> attrs) : impl_(std::make_unique<State>(std::move(attrs))) {}
RecordDecoder::~RecordDecoder() = default;

Expected<void> RecordDecoder::decode(std::span<const std::byte> bytes, Record& out) const {
  if (bytes.size() < kHeaderSize || load_le<std::uint16_t>(bytes.data() + 6) != bytes.size())
    return bad(PerfErrc::kPerfBadRecord, 0, bytes.size());
  out = Record{};
  return impl_->decoder.decode(Cursor{bytes, 0, 0, std::nullopt}, out);
}

PerfData::PerfData(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
PerfData::PerfData(PerfData&&) noexcept = default;
PerfData& PerfData::operator=(PerfData&&) noexcept = default;
PerfData::~PerfData() = default;

const FileInfo& PerfData::info() const noexcept { return impl_->info; }
const ReadStats& PerfData::stats() const noexcept { return impl_->stats; }
Expected<void> PerfData::for_each(const std::function<void(const Record&)>& fn) { return impl_->for_each(fn); }

Expected<PerfData> PerfData::from_bytes(std::span<const std::byte> bytes, const ReadLimits& limits) {
  auto im = std::make_unique<Impl>();
  im->limits = limits;
  im->contents.assign(bytes);
  im->file = im->contents.bytes();
  if (auto r = im->read_header(); !r) return Unexpected{r.error()};
  // Pipe mode: the attributes come as records; scan now so info() is
  // complete after open().
  if (im->info.pipe)
    if (auto r = im->scan_all(); !r) return Unexpected{r.error()};
  return PerfData(std::move(im));
}

Expected<PerfData> PerfData::open(const std::string& path, const ReadLimits& limits) {
  auto im = std::make_unique<Impl>();
  im->limits = limits;
  if (const int e = im->contents.open(path); e != 0) return bad(IoErrc::kIoError, 0, static_cast<std::uint64_t>(e));
  im->file = im->contents.bytes();
  if (auto r = im->read_header(); !r) return Unexpected{r.error()};
  // Pipe mode: the attributes come as records; scan now so info() is
  // complete after open().
  if (im->info.pipe)
    if (auto r = im->scan_all(); !r) return Unexpected{r.error()};
  return PerfData(std::move(im));
}

std::string lowercase_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (std::byte x : bytes) {
    s += kDigits[std::to_integer<unsigned>(x) >> 4];
    s += kDigits[std::to_integer<unsigned>(x) & 15];
  }
  return s;
}

}  // namespace sframe::perf
