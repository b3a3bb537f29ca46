// SPDX-License-Identifier: MIT
// The perf.data writer (perf_writer.hpp): records and feature sections
// encoded from the layout the reader decodes (perf_layout.hpp).
#include "perf_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "perf_layout.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::perf {
namespace {

using namespace layout;

template <class T>
void store(std::byte* p, T v) noexcept {
  std::memcpy(p, &v, sizeof v);  // little-endian host, as the reader
}

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  store(out.data() + at, v);
}

// resize() and memcpy(), not insert(): g++ 12 at -O3 warns of a bound
// (-Warray-bounds) that insert()'s inlined copy does not cross.
void put_bytes(std::vector<std::byte>& out, const void* p, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

// `s` NUL-terminated and NUL-padded to a multiple of `align`.
void put_padded(std::vector<std::byte>& out, std::string_view s, std::size_t align) {
  const std::size_t n = (s.size() + 1 + align - 1) / align * align;
  put_bytes(out, s.data(), s.size());
  out.resize(out.size() + (n - s.size()), std::byte{0});
}

// A perf string (do_write_string): u32 length (padded), then the text.
void put_perf_string(std::vector<std::byte>& out, std::string_view s) {
  put(out, static_cast<std::uint32_t>((s.size() + 1 + kNameAlign - 1) / kNameAlign * kNameAlign));
  put_padded(out, s, kNameAlign);
}

// Starts a record at out.size(); finish_record() fills in its size.
std::size_t begin_record(std::vector<std::byte>& out, std::uint32_t type, std::uint16_t misc) {
  const std::size_t at = out.size();
  put(out, type);
  put(out, misc);
  put(out, std::uint16_t{0});
  return at;
}

Expected<void> finish_record(std::vector<std::byte>& out, std::size_t at) {
  const std::size_t size = out.size() - at;
  if (size > kMaxRecordSize) {
    out.resize(at);
    return make_error(PerfErrc::kPerfBadRecord, 0, size);
  }
  store(out.data() + at + 6, static_cast<std::uint16_t>(size));
  return {};
}

void put_trailer(std::vector<std::byte>& out, const SampleId& id, const EventAttr& attr) {
  if (!attr.sample_id_all()) return;
  for (std::uint64_t b : kSampleIdTrailer)
    if (attr.sample_type & b) put(out, id_word(id, b));
}

bool parse_hex(std::string_view s, std::vector<std::byte>& out) {
  if (s.empty() || s.size() % 2 != 0 || s.size() > 40) return false;
  const auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < s.size(); i += 2) {
    const int hi = nib(s[i]), lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<std::byte>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

std::array<std::byte, 128> encode_attr(const EventAttr& a) {
  std::array<std::byte, 128> r = a.raw;
  std::byte* p = r.data();
  store(p + attr::kType, a.type);
  store(p + attr::kSize, static_cast<std::uint32_t>(attr::kSizeVer7));
  store(p + attr::kConfig, a.config);
  store(p + attr::kSamplePeriod, a.sample_period);
  store(p + attr::kSampleType, a.sample_type);
  store(p + attr::kReadFormat, a.read_format);
  store(p + attr::kFlags, a.flags);
  store(p + attr::kBranchSampleType, a.branch_sample_type);
  store(p + attr::kSampleRegsUser, a.sample_regs_user);
  store(p + attr::kSampleStackUser, a.sample_stack_user);
  store(p + attr::kSampleRegsIntr, a.sample_regs_intr);
  return r;
}

Expected<void> encode_mmap2(std::vector<std::byte>& out, std::uint16_t misc, const Mmap& m, const SampleId& id,
                            const EventAttr& attr) {
  const bool with_build_id = !m.build_id.empty();
  if (m.build_id.size() > 20) return make_error(PerfErrc::kPerfBadRecord, 0, m.build_id.size());
  misc = static_cast<std::uint16_t>((misc & ~kMiscMmapBuildId) | (with_build_id ? kMiscMmapBuildId : 0));
  const std::size_t at = begin_record(out, kRecordMmap2, misc);
  put(out, m.pid);
  put(out, m.tid);
  put(out, m.start);
  put(out, m.len);
  put(out, m.pgoff);
  if (with_build_id) {
    // u8 build_id_size, u8 reserved[3], u8 build_id[20].
    put(out, static_cast<std::uint8_t>(m.build_id.size()));
    out.resize(out.size() + 3, std::byte{0});
    put_bytes(out, m.build_id.data(), m.build_id.size());
    out.resize(out.size() + (20 - m.build_id.size()), std::byte{0});
  } else {
    put(out, m.maj);
    put(out, m.min);
    put(out, m.ino);
    put(out, std::uint64_t{0});  // ino_generation
  }
  put(out, m.prot);
  put(out, m.flags);
  put_padded(out, m.filename, 8);
  put_trailer(out, id, attr);
  return finish_record(out, at);
}

Expected<void> encode_comm(std::vector<std::byte>& out, const Comm& c, const SampleId& id, const EventAttr& attr) {
  const std::size_t at = begin_record(out, kRecordComm, c.exec ? kMiscCommExec : 0);
  put(out, c.pid);
  put(out, c.tid);
  put_padded(out, c.comm, 8);
  put_trailer(out, id, attr);
  return finish_record(out, at);
}

Expected<void> encode_task(std::vector<std::byte>& out, std::uint32_t type, const Task& t, const SampleId& id,
                           const EventAttr& attr) {
  if (type != kRecordFork && type != kRecordExit) return make_error(PerfErrc::kPerfBadRecord, 0, type);
  const std::size_t at = begin_record(out, type, 0);
  put(out, t.pid);
  put(out, t.ppid);
  put(out, t.tid);
  put(out, t.ptid);
  put(out, t.time);
  put_trailer(out, id, attr);
  return finish_record(out, at);
}

Expected<void> encode_sample(std::vector<std::byte>& out, std::uint16_t misc, const EventAttr& attr,
                             const SampleId& id, std::uint64_t ip, std::uint64_t addr, std::uint64_t period,
                             std::span<const std::uint64_t> callchain, const UserRegsStack& user) {
  std::uint64_t known = kSampleCallchain | kSampleRegsUser | kSampleStackUser;
  for (std::uint64_t b : kSampleHead) known |= b;
  if (attr.sample_type & ~known) return make_error(PerfErrc::kPerfUnsupported, 0, attr.sample_type & ~known);
  const bool regs = (attr.sample_type & kSampleRegsUser) && user.abi != RegsAbi::kNone;
  if (regs && user.regs.size() != static_cast<std::size_t>(std::popcount(attr.sample_regs_user)))
    return make_error(PerfErrc::kPerfBadRecord, 0, user.regs.size());
  if ((attr.sample_type & kSampleStackUser) && user.stack.size() > attr.sample_stack_user)
    return make_error(PerfErrc::kPerfBadRecord, 0, user.stack.size());
  const std::size_t at = begin_record(out, kRecordSample, misc);
  for (std::uint64_t b : kSampleHead) {
    if (!(attr.sample_type & b)) continue;
    put(out, b == kSampleIp ? ip : b == kSampleAddr ? addr : b == kSamplePeriod ? period : id_word(id, b));
  }
  if (attr.sample_type & kSampleCallchain) {
    put(out, static_cast<std::uint64_t>(callchain.size()));
    put_bytes(out, callchain.data(), callchain.size_bytes());
  }
  if (attr.sample_type & kSampleRegsUser) {
    put(out, static_cast<std::uint64_t>(regs ? user.abi : RegsAbi::kNone));
    if (regs) put_bytes(out, user.regs.data(), user.regs.size_bytes());
  }
  if (attr.sample_type & kSampleStackUser) {
    // size (8-byte multiple), the bytes, then dyn_size: the bytes valid;
    // an empty copy is the size word 0 alone (kernel/events/core.c,
    // perf_output_sample_ustack).
    const std::uint64_t size = (user.stack.size() + 7) / 8 * 8;
    put(out, size);
    if (size) {
      put_bytes(out, user.stack.data(), user.stack.size());
      out.resize(out.size() + (size - user.stack.size()));
      put(out, static_cast<std::uint64_t>(user.stack.size()));
    }
  }
  return finish_record(out, at);
}

namespace {
// The end of a sample's REGS_USER block (the ABI word, then a word per
// sampled register unless the ABI is PERF_SAMPLE_REGS_ABI_NONE).
std::size_t regs_end(const Record& r) {
  const Sample& s = r.sample;
  const auto n = s.regs_abi == RegsAbi::kNone ? 0 : static_cast<std::size_t>(std::popcount(r.attr->sample_regs_user));
  return s.regs_user_at + 8 + 8 * n;
}
}  // namespace

Expected<void> rewrite_sample(std::vector<std::byte>& out, const Record& r, std::span<const std::uint64_t> callchain) {
  const Sample& s = r.sample;
  const std::span<const std::byte> b = r.bytes;
  if (r.type != kRecordSample || !r.attr || b.size() < kHeaderSize || !s.callchain_at)
    return make_error(PerfErrc::kPerfBadRecord, r.offset);
  const std::size_t chain_end = s.callchain_at + 8 + 8 * s.callchain_nr;
  // REGS_USER and STACK_USER are adjacent in the kernel's order; a sample
  // without them keeps its tail whole.
  const std::size_t cut = s.regs_user_at ? s.regs_user_at : s.stack_user_at ? s.stack_user_at : b.size();
  const std::size_t resume = s.stack_user_end ? s.stack_user_end : s.regs_user_at ? regs_end(r) : cut;
  if (chain_end > cut || resume > b.size() || cut > resume) return make_error(PerfErrc::kPerfBadRecord, r.offset);
  const std::size_t at = out.size();
  put_bytes(out, b.data(), s.callchain_at);
  put(out, static_cast<std::uint64_t>(callchain.size()));
  put_bytes(out, callchain.data(), callchain.size_bytes());
  put_bytes(out, b.data() + chain_end, cut - chain_end);
  put_bytes(out, b.data() + resume, b.size() - resume);
  return finish_record(out, at);
}

void encode_finished_round(std::vector<std::byte>& out) {
  const std::size_t at = begin_record(out, kRecordFinishedRound, 0);
  (void)finish_record(out, at);
}

Expected<std::vector<std::byte>> feature_build_ids(std::span<const BuildIdEntry> ids, std::uint32_t record_type) {
  std::vector<std::byte> out, id;
  for (const BuildIdEntry& e : ids) {
    id.clear();
    if (!parse_hex(e.build_id, id)) return make_error(PerfErrc::kPerfBadRecord, 0, e.build_id.size());
    const std::size_t at =
        begin_record(out, record_type, static_cast<std::uint16_t>((e.cpumode & kMiscCpumodeMask) | kMiscBuildIdSize));
    put(out, e.pid);
    put_bytes(out, id.data(), id.size());
    out.resize(out.size() + (20 - id.size()), std::byte{0});
    put(out, static_cast<std::uint8_t>(id.size()));
    out.resize(out.size() + 3, std::byte{0});
    put_padded(out, e.filename, kNameAlign);
    if (auto r = finish_record(out, at); !r) return Unexpected{r.error()};
  }
  return out;
}

std::vector<std::byte> feature_cmdline(std::span<const std::string> argv) {
  std::vector<std::byte> out;
  put(out, static_cast<std::uint32_t>(argv.size()));
  for (const std::string& a : argv) put_perf_string(out, a);
  return out;
}

std::vector<std::byte> feature_event_desc(std::span<const EventAttr> attrs) {
  std::vector<std::byte> out;
  put(out, static_cast<std::uint32_t>(attrs.size()));
  put(out, static_cast<std::uint32_t>(attr::kSizeVer7));
  for (const EventAttr& a : attrs) {
    const auto raw = encode_attr(a);
    put_bytes(out, raw.data(), raw.size());
    put(out, static_cast<std::uint32_t>(a.ids.size()));
    put_perf_string(out, a.name);
    put_bytes(out, a.ids.data(), a.ids.size() * 8);
  }
  return out;
}

std::vector<std::byte> feature_string(std::string_view s) {
  std::vector<std::byte> out;
  put_perf_string(out, s);
  return out;
}

struct PerfWriter::Impl {
  bool pipe = false;
  std::optional<OutputFile> file;
  std::vector<std::byte>* memory = nullptr;
  std::vector<std::byte> buf;  // not yet written
  std::uint64_t written = 0;   // bytes written (or buffered) from offset 0
  std::uint64_t data_start = 0;
  std::uint64_t data_bytes = 0;
  std::vector<EventAttr> attrs;
  std::map<unsigned, std::vector<std::byte>> features;  // file mode
  bool records_started = false;
  bool finished = false;

  Expected<void> flush() {
    if (buf.empty()) return {};
    if (memory) {
      memory->insert(memory->end(), buf.begin(), buf.end());
    } else if (auto r = file->write(buf); !r) {
      return r;
    }
    buf.clear();
    return {};
  }
  // Records gather in one buffer of kBufferBytes, reserved once and
  // reused after each write: a buffer grown by doubling touched twice the
  // memory, fresh each time, and copied it at every step.
  static constexpr std::size_t kBufferBytes = std::size_t{64} << 10;
  Expected<void> append(std::span<const std::byte> b) {
    if (buf.size() + b.size() > kBufferBytes)
      if (auto r = flush(); !r) return r;
    if (buf.capacity() < kBufferBytes) buf.reserve(kBufferBytes);
    buf.insert(buf.end(), b.begin(), b.end());
    written += b.size();
    return {};
  }
  // Overwrites bytes already flushed (the file header at offset 0).
  Expected<void> overwrite(std::uint64_t off, std::span<const std::byte> b) {
    if (memory) {
      std::memcpy(memory->data() + off, b.data(), b.size());
      return {};
    }
    std::size_t done = 0;
    while (done < b.size()) {
      const ssize_t n = ::pwrite(file->fd(), b.data() + done, b.size() - done, static_cast<off_t>(off + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(IoErrc::kIoError, off, static_cast<std::uint64_t>(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    return {};
  }

  Expected<void> start() {
    std::vector<std::byte> h;
    if (pipe) {
      put(h, kMagic);
      put(h, kPipeHeaderSize);
    } else {
      h.resize(kFileHeaderSize, std::byte{0});  // written by finish()
    }
    data_start = h.size();
    return append(h);
  }

  Expected<void> finish_file() {
    // Feature index right after the data, then the sections, then the IDs
    // and the attributes.
    const std::uint64_t data_end = written;
    std::vector<std::byte> tail;
    std::uint64_t at = data_end + 16 * features.size();
    for (const auto& [bit, bytes] : features) {
      put(tail, at);
      put(tail, static_cast<std::uint64_t>(bytes.size()));
      at += bytes.size();
    }
    for (const auto& [bit, bytes] : features) tail.insert(tail.end(), bytes.begin(), bytes.end());
    std::vector<std::uint64_t> id_offsets;
    for (const EventAttr& a : attrs) {
      id_offsets.push_back(data_end + tail.size());
      put_bytes(tail, a.ids.data(), a.ids.size() * 8);
    }
    const std::uint64_t attrs_off = data_end + tail.size();
    for (std::size_t i = 0; i < attrs.size(); ++i) {
      const auto raw = encode_attr(attrs[i]);
      put_bytes(tail, raw.data(), raw.size());
      put(tail, id_offsets[i]);
      put(tail, static_cast<std::uint64_t>(attrs[i].ids.size() * 8));
    }
    if (auto r = append(tail); !r) return r;
    if (auto r = flush(); !r) return r;
    std::vector<std::byte> h;
    h.reserve(kFileHeaderSize);
    put(h, kMagic);
    put(h, kFileHeaderSize);
    put(h, static_cast<std::uint64_t>(attr::kSizeVer7 + 16));
    put(h, attrs_off);
    put(h, static_cast<std::uint64_t>(attrs.size() * (attr::kSizeVer7 + 16)));
    put(h, data_start);
    put(h, data_bytes);
    put(h, std::uint64_t{0});  // event_types (unused since perf 2.6.x)
    put(h, std::uint64_t{0});
    std::array<std::uint64_t, kFeatureBits / 64> bits{};
    for (const auto& [bit, bytes] : features) bits[bit / 64] |= std::uint64_t{1} << (bit % 64);
    for (std::uint64_t w : bits) put(h, w);
    return overwrite(0, h);
  }
};

PerfWriter::PerfWriter(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
PerfWriter::PerfWriter(PerfWriter&&) noexcept = default;
PerfWriter& PerfWriter::operator=(PerfWriter&&) noexcept = default;
PerfWriter::~PerfWriter() = default;

Expected<PerfWriter> PerfWriter::create(const std::string& path, bool pipe) {
  auto f = OutputFile::create(path);
  if (!f) return Unexpected{f.error()};
  auto im = std::make_unique<Impl>();
  im->pipe = pipe || path == "-";
  im->file.emplace(std::move(*f));
  if (auto r = im->start(); !r) return Unexpected{r.error()};
  return PerfWriter(std::move(im));
}

PerfWriter PerfWriter::to_memory(std::vector<std::byte>& out, bool pipe) {
  auto im = std::make_unique<Impl>();
  im->pipe = pipe;
  im->memory = &out;
  (void)im->start();
  return PerfWriter(std::move(im));
}

Expected<void> PerfWriter::set_attrs(std::span<const EventAttr> attrs) {
  Impl& w = *impl_;
  w.attrs.assign(attrs.begin(), attrs.end());
  if (!w.pipe) return {};
  std::vector<std::byte> rec;
  for (const EventAttr& a : attrs) {
    const std::size_t at = begin_record(rec, kRecordHeaderAttr, 0);
    const auto raw = encode_attr(a);
    put_bytes(rec, raw.data(), raw.size());
    put_bytes(rec, a.ids.data(), a.ids.size() * 8);
    if (auto r = finish_record(rec, at); !r) return r;
  }
  return w.append(rec);
}

Expected<void> PerfWriter::add_feature(unsigned bit, std::vector<std::byte> data) {
  Impl& w = *impl_;
  if (bit >= kFeatureBits) return make_error(PerfErrc::kPerfBadRecord, 0, bit);
  if (!w.pipe) {
    w.features[bit] = std::move(data);
    return {};
  }
  if (bit == kFeatBuildId) {
    // Pipe mode carries build-ids as HEADER_BUILD_ID records: the entries
    // are those records once their type is set.
    for (std::size_t at = 0; at + kHeaderSize <= data.size();) {
      std::uint16_t size = 0;
      std::memcpy(&size, data.data() + at + 6, 2);
      if (size < kHeaderSize || size > data.size() - at) return make_error(PerfErrc::kPerfBadRecord, at, size);
      store(data.data() + at, static_cast<std::uint32_t>(kRecordHeaderBuildId));
      at += size;
    }
    return w.append(data);
  }
  std::vector<std::byte> rec;
  const std::size_t at = begin_record(rec, kRecordHeaderFeature, 0);
  put(rec, static_cast<std::uint64_t>(bit));
  put_bytes(rec, data.data(), data.size());
  // perf pads feature records to 8 bytes (its feat_writer buffers).
  rec.resize(at + (rec.size() - at + 7) / 8 * 8, std::byte{0});
  if (auto r = finish_record(rec, at); !r) return r;
  return w.append(rec);
}

Expected<void> PerfWriter::write(std::span<const std::byte> record) {
  Impl& w = *impl_;
  if (record.size() < kHeaderSize) return make_error(PerfErrc::kPerfBadRecord, 0, record.size());
  std::uint16_t size = 0;
  std::memcpy(&size, record.data() + 6, 2);
  if (size != record.size()) return make_error(PerfErrc::kPerfBadRecord, 0, record.size());
  w.data_bytes += record.size();
  return w.append(record);
}

std::uint64_t PerfWriter::data_size() const noexcept { return impl_->data_bytes; }

Expected<void> PerfWriter::finish() {
  Impl& w = *impl_;
  if (w.finished) return {};
  w.finished = true;
  if (!w.pipe) {
    if (auto r = w.finish_file(); !r) return r;
  } else if (auto r = w.flush(); !r) {
    return r;
  }
  if (w.file) return w.file->commit();
  return {};
}

}  // namespace sframe::perf
