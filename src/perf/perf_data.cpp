// SPDX-License-Identifier: MIT
// The perf.data reader: header, attributes, feature sections, records
// (tools/perf/Documentation/perf.data-file-format.txt; record and sample
// layouts from include/uapi/linux/perf_event.h).
#include "perf_data.hpp"

#include "file_bytes.hpp"
#include "perf_layout.hpp"

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
constexpr std::uint64_t kAttrSizeVer0 = attr::kSizeVer0;

Unexpected bad(ErrorCode c, std::uint64_t off, std::uint64_t value = 0) { return make_error(c, off, value); }

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
    if (outer) return bad(c, *outer, base + pos);
    return bad(c, base + pos);
  }
  bool can(std::uint64_t n) const noexcept { return n <= left(); }
  template <class T>
  T get() {
    T v = load_le<T>(bytes.data() + pos);
    pos += sizeof(T);
    return v;
  }
};

std::string hex(std::span<const std::byte> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (std::byte x : b) {
    s += d[std::to_integer<unsigned>(x) >> 4];
    s += d[std::to_integer<unsigned>(x) & 15];
  }
  return s;
}

// A NUL-terminated string inside `b` (the whole span when no NUL).
std::string_view cstr(std::span<const std::byte> b) {
  const char* p = reinterpret_cast<const char*>(b.data());
  return std::string_view(p, strnlen(p, b.size()));
}

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

// Bytes of a PERF_SAMPLE_READ block for `read_format`
// (PERF_FORMAT_TOTAL_TIME_ENABLED 1, _RUNNING 2, _ID 4, _GROUP 8, _LOST 16).
struct ReadShape {
  std::uint64_t fixed = 0;     // words before the per-member values
  std::uint64_t per_value = 0; // words per value
  bool group = false;
};
ReadShape read_shape(std::uint64_t rf) {
  ReadShape s;
  s.group = rf & 8;
  const std::uint64_t times = ((rf & 1) ? 1 : 0) + ((rf & 2) ? 1 : 0);
  s.per_value = 1 + ((rf & 4) ? 1 : 0) + ((rf & 16) ? 1 : 0);
  s.fixed = s.group ? 1 + times : times;  // group: nr, times; single: times after value
  return s;
}

}  // namespace

namespace {

// std::popcount is a call into libgcc without -mpopcnt (not in the x86-64
// baseline); a register's place is asked for some 17 times per sample.
constexpr unsigned popcount64(std::uint64_t v) noexcept {
  v = v - ((v >> 1) & 0x5555555555555555ULL);
  v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
  v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<unsigned>((v * 0x0101010101010101ULL) >> 56);
}
static_assert(popcount64(0) == 0 && popcount64(~std::uint64_t{0}) == 64 && popcount64(0x8000000000000101ULL) == 3);

}  // namespace

std::uint64_t Sample::user_regs(std::span<std::uint64_t> out) const noexcept {
  if (!attr || !regs_data || regs_abi == RegsAbi::kNone) return 0;
  std::uint64_t present = 0;
  std::size_t idx = 0;
  for (std::uint64_t m = attr->sample_regs_user; m != 0; m &= m - 1, ++idx) {
    const auto r = static_cast<unsigned>(std::countr_zero(m));
    if (r >= out.size()) break;  // ascending: the rest lie above too
    out[r] = load_le<std::uint64_t>(regs_data + 8 * idx);
    present |= std::uint64_t{1} << r;
  }
  return present;
}

std::optional<std::uint64_t> Sample::user_reg(unsigned r) const noexcept {
  if (!attr || !regs_data || regs_abi == RegsAbi::kNone || r >= 64) return std::nullopt;
  const std::uint64_t mask = attr->sample_regs_user;
  if (!((mask >> r) & 1)) return std::nullopt;
  const unsigned idx = popcount64(mask & ((std::uint64_t{1} << r) - 1));
  return load_le<std::uint64_t>(regs_data + 8 * idx);
}

struct PerfData::Impl {
  ReadLimits limits;
  // The file: mapped, or read whole (stdin), or copied (from_bytes).
  detail::FileBytes contents;
  std::span<const std::byte> file;

  FileInfo info;
  ReadStats stats;
  // Sample ID -> attribute index.
  std::unordered_map<std::uint64_t, std::size_t> by_id;
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
    e.build_id = hex(r.subspan(kBuildIdBytes, n));
    e.filename = std::string(cstr(r.subspan(kBuildIdFilename)));
    info.build_ids.push_back(std::move(e));
    return {};
  }

  Expected<void> finish_attrs() {
    by_id.clear();
    for (std::size_t i = 0; i < info.attrs.size(); ++i) {
      EventAttr& a = info.attrs[i];
      if (a.name.empty()) a.name = default_event_name(a.type, a.config);
      for (std::uint64_t id : a.ids) by_id.emplace(id, i);
    }
    return {};
  }

  // --- records ------------------------------------------------------------

  // The attribute of a record: the only one, else found by its sample ID.
  // `id_of` decodes the ID the way the first attribute's sample_type puts it.
  const EventAttr* attr_of(std::uint64_t id, bool have_id) const {
    if (info.attrs.size() == 1) return &info.attrs[0];
    if (!have_id) return info.attrs.empty() ? nullptr : &info.attrs[0];
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : &info.attrs[it->second];
  }

  // The sample ID of a SAMPLE record body `c` (after the header), per the
  // first attribute's layout (perf requires every event to put it at the
  // same place).
  std::pair<std::uint64_t, bool> sample_id_of(std::span<const std::byte> body) const {
    if (info.attrs.empty()) return {0, false};
    const std::uint64_t st = info.attrs[0].sample_type;
    std::uint64_t off = 0;
    if (st & kSampleIdentifier) {
      if (body.size() < 8) return {0, false};
      return {load_le<std::uint64_t>(body.data()), true};
    }
    if (!(st & kSampleId)) return {0, false};
    for (std::uint64_t b : kSampleHead) {
      if (b == kSampleId) break;
      if (st & b) off += 8;
    }
    if (off + 8 > body.size()) return {0, false};
    return {load_le<std::uint64_t>(body.data() + off), true};
  }

  // The sample_id trailer of a non-sample record body (its last words).
  Expected<SampleId> trailer(const Cursor& rec, std::span<const std::byte> body, const EventAttr* attr,
                             std::size_t fixed) const {
    SampleId s;
    if (!attr || !attr->sample_id_all()) return s;
    const std::uint64_t st = attr->sample_type;
    const std::uint64_t words = trailer_words(st);
    if (words * 8 > body.size() - std::min(body.size(), fixed)) return rec.fail(PerfErrc::kPerfBadRecord);
    const std::byte* p = body.data() + body.size() - words * 8;
    for (std::uint64_t b : kSampleIdTrailer)
      if (st & b) set_id_word(s, b, load_le<std::uint64_t>(p)), p += 8;
    s.has = st & kSampleIdBits;
    return s;
  }

  // The attribute of a non-sample record with a sample_id trailer.
  const EventAttr* trailer_attr(std::span<const std::byte> body) const {
    if (info.attrs.size() <= 1) return info.attrs.empty() ? nullptr : &info.attrs[0];
    const std::uint64_t st = info.attrs[0].sample_type;
    if (!info.attrs[0].sample_id_all()) return &info.attrs[0];
    if (st & kSampleIdentifier) {
      if (body.size() < 8) return nullptr;
      return attr_of(load_le<std::uint64_t>(body.data() + body.size() - 8), true);
    }
    if (!(st & kSampleId)) return &info.attrs[0];
    std::uint64_t after = 1;  // the ID itself
    for (std::uint64_t b : {kSampleStreamId, kSampleCpu})
      if (st & b) ++after;
    if (body.size() < after * 8) return nullptr;
    return attr_of(load_le<std::uint64_t>(body.data() + body.size() - after * 8), true);
  }

  // Decodes a SAMPLE body per sample_type, in the kernel's output order
  // (perf_output_sample()).
  Expected<void> decode_sample(Cursor c, Record& r) const {
    auto [id, have] = sample_id_of(c.bytes.subspan(c.pos));
    const EventAttr* a = attr_of(id, have);
    if (!a) return c.fail(PerfErrc::kPerfBadRecord);
    r.attr = a;
    Sample& s = r.sample;
    s.attr = a;
    const std::uint64_t st = a->sample_type;
    const auto need = [&](std::uint64_t n) { return c.can(n); };
    const auto u64 = [&]() { return c.get<std::uint64_t>(); };
#define SFRAME_NEED(n) \
  if (!need(n)) return c.fail(PerfErrc::kPerfBadRecord)
    SampleId& sid = r.id;
    for (std::uint64_t b : kSampleHead) {
      if (!(st & b)) continue;
      SFRAME_NEED(8);
      const std::uint64_t w = u64();
      if (b == kSampleIp) s.ip = w;
      else if (b == kSampleAddr) s.addr = w;
      else if (b == kSamplePeriod) s.period = w;
      else set_id_word(sid, b, w);
    }
    sid.has = st & kSampleIdBits;
    if (st & kSampleRead) {
      const ReadShape rs = read_shape(a->read_format);
      if (rs.group) {
        SFRAME_NEED(8);
        const std::uint64_t nr = load_le<std::uint64_t>(c.bytes.data() + c.pos);
        if (nr > c.left() / 8) return c.fail(PerfErrc::kPerfBadRecord);
        SFRAME_NEED(8 * (rs.fixed + nr * rs.per_value));
        c.pos += 8 * (rs.fixed + nr * rs.per_value);
      } else {
        SFRAME_NEED(8 * (rs.fixed + rs.per_value));
        c.pos += 8 * (rs.fixed + rs.per_value);
      }
    }
    if (st & kSampleCallchain) {
      SFRAME_NEED(8);
      s.callchain_at = static_cast<std::uint32_t>(c.pos);
      const std::uint64_t nr = u64();
      if (nr > c.left() / 8) return c.fail(PerfErrc::kPerfBadRecord);
      s.callchain_nr = nr;
      s.callchain_data = c.bytes.data() + c.pos;
      c.pos += 8 * nr;
    }
    if (st & kSampleRaw) {
      SFRAME_NEED(4);
      const auto size = c.get<std::uint32_t>();
      SFRAME_NEED(size);
      c.pos += size;
    }
    if (st & kSampleBranchStack) {
      SFRAME_NEED(8);
      const std::uint64_t nr = u64();
      // PERF_SAMPLE_BRANCH_HW_INDEX (1 << 17): a hw_idx word before the entries.
      if (a->branch_sample_type & (1u << 17)) { SFRAME_NEED(8); c.pos += 8; }
      if (nr > c.left() / 24) return c.fail(PerfErrc::kPerfBadRecord);
      c.pos += 24 * nr;
    }
    if (st & kSampleRegsUser) {
      SFRAME_NEED(8);
      s.regs_user_at = static_cast<std::uint32_t>(c.pos);
      const std::uint64_t abi = u64();
      if (abi == 1) return c.fail(PerfErrc::kPerfUnsupported);  // PERF_SAMPLE_REGS_ABI_32
      if (abi > 2) return c.fail(PerfErrc::kPerfBadRecord);
      s.regs_abi = static_cast<RegsAbi>(abi);
      if (abi != 0) {
        const std::uint64_t n = static_cast<std::uint64_t>(std::popcount(a->sample_regs_user));
        SFRAME_NEED(8 * n);
        s.regs_data = c.bytes.data() + c.pos;
        c.pos += 8 * n;
      }
    }
    if (st & kSampleStackUser) {
      SFRAME_NEED(8);
      s.stack_user_at = static_cast<std::uint32_t>(c.pos);
      const std::uint64_t size = u64();
      if (size > c.left()) return c.fail(PerfErrc::kPerfBadRecord);
      const std::byte* data = c.bytes.data() + c.pos;
      c.pos += size;
      s.stack_size = size;
      if (size != 0) {
        SFRAME_NEED(8);
        const std::uint64_t dyn = u64();
        if (dyn > size) return c.fail(PerfErrc::kPerfBadRecord);
        s.stack = {data, static_cast<std::size_t>(dyn)};
      }
      s.stack_user_end = static_cast<std::uint32_t>(c.pos);
    }
    // The fields after these (weight, data_src, ...) are not used.
#undef SFRAME_NEED
    return {};
  }

  // Decodes one record at `rec` (its header included) into `r`.
  Expected<void> decode(const Cursor& rec, Record& r) const {
    const std::span<const std::byte> b = rec.bytes;
    r.bytes = b;
    r.type = load_le<std::uint32_t>(b.data());
    r.misc = load_le<std::uint16_t>(b.data() + 4);
    Cursor c{b, rec.base, kHeaderSize, rec.outer};
    const std::span<const std::byte> body = b.subspan(kHeaderSize);
    const auto with_trailer = [&](std::size_t fixed) -> Expected<void> {
      r.attr = trailer_attr(body);
      auto t = trailer(c, body, r.attr, fixed);
      if (!t) return Unexpected{t.error()};
      r.id = *t;
      return {};
    };
    switch (r.type) {
      case kRecordSample:
        return decode_sample(c, r);
      case kRecordMmap:
      case kRecordMmap2: {
        const bool two = r.type == kRecordMmap2;
        const std::size_t fixed = two ? kMmap2Fixed : kMmapFixed;
        if (body.size() < fixed + 1) return c.fail(PerfErrc::kPerfBadRecord);
        Mmap& m = r.mmap;
        m.mmap2 = two;
        m.pid = c.get<std::uint32_t>();
        m.tid = c.get<std::uint32_t>();
        m.start = c.get<std::uint64_t>();
        m.len = c.get<std::uint64_t>();
        m.pgoff = c.get<std::uint64_t>();
        if (two) {
          if (r.misc & kMiscMmapBuildId) {
            const std::size_t n = std::min<std::size_t>(20, std::to_integer<std::size_t>(b[c.pos]));
            m.build_id = b.subspan(c.pos + 4, n);
          } else {
            m.maj = load_le<std::uint32_t>(b.data() + c.pos);
            m.min = load_le<std::uint32_t>(b.data() + c.pos + 4);
            m.ino = load_le<std::uint64_t>(b.data() + c.pos + 8);
          }
          c.pos += 24;
          m.prot = c.get<std::uint32_t>();
          m.flags = c.get<std::uint32_t>();
          m.exec = m.prot & 4;  // PROT_EXEC
        } else {
          m.exec = !(r.misc & kMiscMmapData);
        }
        m.filename = cstr(b.subspan(c.pos));
        return with_trailer(fixed + m.filename.size() + 1);
      }
      case kRecordComm: {
        if (body.size() < 9) return c.fail(PerfErrc::kPerfBadRecord);
        r.comm.pid = c.get<std::uint32_t>();
        r.comm.tid = c.get<std::uint32_t>();
        r.comm.comm = cstr(b.subspan(c.pos));
        r.comm.exec = r.misc & kMiscCommExec;
        return with_trailer(kCommFixed + r.comm.comm.size() + 1);
      }
      case kRecordFork:
      case kRecordExit: {
        if (body.size() < kTaskFixed) return c.fail(PerfErrc::kPerfBadRecord);
        r.task.pid = c.get<std::uint32_t>();
        r.task.ppid = c.get<std::uint32_t>();
        r.task.tid = c.get<std::uint32_t>();
        r.task.ptid = c.get<std::uint32_t>();
        r.task.time = c.get<std::uint64_t>();
        return with_trailer(kTaskFixed);
      }
      case kRecordLost: {
        if (body.size() < kLostFixed) return c.fail(PerfErrc::kPerfBadRecord);
        r.lost.id = c.get<std::uint64_t>();
        r.lost.lost = c.get<std::uint64_t>();
        return with_trailer(kLostFixed);
      }
      default:
        if (r.type < kRecordHeaderAttr) return with_trailer(0);
        return {};
    }
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

  // The time of a kernel record, for ordering (0 when it has none).
  std::uint64_t time_of(const Cursor& rec) const {
    const std::span<const std::byte> body = rec.bytes.subspan(kHeaderSize);
    const auto type = load_le<std::uint32_t>(rec.bytes.data());
    if (type == kRecordSample) {
      auto [id, have] = sample_id_of(body);
      const EventAttr* a = attr_of(id, have);
      if (!a || !(a->sample_type & kSampleTime)) return 0;
      std::uint64_t off = 0;
      for (std::uint64_t b : {kSampleIdentifier, kSampleIp, kSampleTid})
        if (a->sample_type & b) off += 8;
      return off + 8 <= body.size() ? load_le<std::uint64_t>(body.data() + off) : 0;
    }
    const EventAttr* a = trailer_attr(body);
    auto t = trailer(rec, body, a, 0);
    return t && (t->has & kSampleTime) ? t->time : 0;
  }

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
        out.push_back({time_of(rc), out.size(), rec.data(), size, base + pos, outer});
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
          auto it = by_id.find(id);
          // An empty name names nothing: the event keeps the one it has.
          const std::string_view name = cstr(body.subspan(16));
          if (it != by_id.end() && !name.empty()) info.attrs[it->second].name = std::string(name);
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
    std::stable_sort(located.begin(), located.end(),
                     [](const Located& a, const Located& b) { return a.time < b.time; });
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
      if (auto r = decode(c, rec); !r) return r;
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

RecordDecoder::RecordDecoder(std::vector<EventAttr> attrs) : impl_(std::make_unique<PerfData::Impl>()) {
  impl_->info.attrs = std::move(attrs);
  for (std::size_t i = 0; i < impl_->info.attrs.size(); ++i)
    for (std::uint64_t id : impl_->info.attrs[i].ids) impl_->by_id.emplace(id, i);
}
RecordDecoder::~RecordDecoder() = default;

Expected<void> RecordDecoder::decode(std::span<const std::byte> bytes, Record& out) const {
  if (bytes.size() < kHeaderSize || load_le<std::uint16_t>(bytes.data() + 6) != bytes.size())
    return bad(PerfErrc::kPerfBadRecord, 0, bytes.size());
  out = Record{};
  return impl_->decode(Cursor{bytes, 0, 0, std::nullopt}, out);
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

}  // namespace sframe::perf
