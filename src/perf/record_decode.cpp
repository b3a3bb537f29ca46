// SPDX-License-Identifier: MIT
// sframepp: perf records decoded (see record_decode.hpp).
#include "record_decode.hpp"

#include "perf_layout.hpp"

#include <bit>

namespace sframe::perf {
namespace {

using namespace layout;

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

namespace detail {

void Decoder::reindex() {
  by_id_.clear();
  for (std::size_t i = 0; i < attrs_.size(); ++i)
    for (std::uint64_t id : attrs_[i].ids) by_id_.emplace(id, i);
}

std::optional<std::size_t> Decoder::index_of(std::uint64_t id) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

// The attribute of a record: the only one, else found by its sample ID.
// `id_of` decodes the ID the way the first attribute's sample_type puts it.
const EventAttr* Decoder::attr_of(std::uint64_t id, bool have_id) const {
  if (attrs_.size() == 1) return &attrs_[0];
  if (!have_id) return attrs_.empty() ? nullptr : &attrs_[0];
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &attrs_[it->second];
}

// The sample ID of a SAMPLE record body `c` (after the header), per the
// first attribute's layout (perf requires every event to put it at the
// same place).
std::pair<std::uint64_t, bool> Decoder::sample_id_of(std::span<const std::byte> body) const {
  if (attrs_.empty()) return {0, false};
  const std::uint64_t st = attrs_[0].sample_type;
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
Expected<SampleId> Decoder::trailer(const Cursor& rec, std::span<const std::byte> body, const EventAttr* attr,
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
const EventAttr* Decoder::trailer_attr(std::span<const std::byte> body) const {
  if (attrs_.size() <= 1) return attrs_.empty() ? nullptr : &attrs_[0];
  const std::uint64_t st = attrs_[0].sample_type;
  if (!attrs_[0].sample_id_all()) return &attrs_[0];
  if (st & kSampleIdentifier) {
    if (body.size() < 8) return nullptr;
    return attr_of(load_le<std::uint64_t>(body.data() + body.size() - 8), true);
  }
  if (!(st & kSampleId)) return &attrs_[0];
  std::uint64_t after = 1;  // the ID itself
  for (std::uint64_t b : {kSampleStreamId, kSampleCpu})
    if (st & b) ++after;
  if (body.size() < after * 8) return nullptr;
  return attr_of(load_le<std::uint64_t>(body.data() + body.size() - after * 8), true);
}

// Decodes a SAMPLE body per sample_type, in the kernel's output order
// (perf_output_sample()).
Expected<void> Decoder::decode_sample(Cursor c, Record& r) const {
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
Expected<void> Decoder::decode(const Cursor& rec, Record& r) const {
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

// The time of a kernel record, for ordering (0 when it has none).
std::uint64_t Decoder::time_of(const Cursor& rec) const {
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


}  // namespace detail
}  // namespace sframe::perf
