// SPDX-License-Identifier: MIT
// libFuzzer target: a perf.data file or pipe stream (header, attributes,
// feature sections, records, zstd COMPRESSED records, sample fields) through
// the reader; every view a record hands out is read in full, so
// AddressSanitizer sees any that reaches past the input. The same bytes
// also go through the kallsyms parser (`sframe perf script` names kernel
// frames from /proc/kallsyms or perf's cached copy, text it does not
// control): every symbol it gives lies inside the text, is a function, is
// not 0, and they come sorted. What the reader decodes then goes through
// the perf.data writer (perf_writer.hpp), in file and pipe mode: MMAP2,
// COMM, FORK, EXIT and SAMPLE records re-encoded from their decoded
// fields, other records copied, attributes and the cmdline, event
// description and build-id features written anew; reading the output back
// must give the same records and the same header information. And the
// samples go through the rewrite `sframe perf inject` makes of them.
// Finally the records go through the session `sframe perf script` and
// `sframe record`'s conversion run (perf_unwind.hpp): the process model
// from the side-band records, every sample unwound and named (its stack
// copy walked from its registers, else its callchain, repeats from the
// repeat cache), with no file of perf's build-id cache and no kallsyms:
// every frame it gives is within the depth asked for.
#include <cstddef>
#include <cstdint>
#include <span>

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "../src/perf/kallsyms.hpp"
#include "../src/perf/perf_layout.hpp"
#include "../src/perf/perf_writer.hpp"
#include "perf_data.hpp"
#include "perf_unwind.hpp"

namespace {

using sframe::perf::Record;

// A decoded record's fields, owned (a Record's views die with its PerfData).
struct Kept {
  std::uint32_t type = 0;
  std::uint16_t misc = 0;
  std::uint64_t id_has = 0;
  sframe::perf::SampleId id;
  std::uint64_t ip = 0, addr = 0, period = 0;
  std::vector<std::uint64_t> chain;
  std::uint64_t start = 0, len = 0, pgoff = 0, ino = 0;
  std::uint32_t pid = 0, tid = 0, ppid = 0, ptid = 0, maj = 0, min = 0, prot = 0, flags = 0;
  std::uint64_t time = 0;
  std::string text;
  std::vector<std::byte> build_id, bytes;
  bool operator==(const Kept&) const = default;
};

Kept keep(const Record& r, bool raw) {
  Kept k;
  k.type = r.type;
  k.misc = r.misc;
  if (raw) {
    k.bytes.assign(r.bytes.begin(), r.bytes.end());
    return k;
  }
  // The encoders set misc themselves (the COMM exec flag, MMAP2's build-id
  // flag); a sample's is passed through.
  if (r.type != sframe::perf::kRecordSample) k.misc = r.type == sframe::perf::kRecordComm && r.comm.exec;
  k.id_has = r.id.has;
  for (std::uint64_t b : sframe::perf::layout::kSampleIdTrailer)
    if (r.id.has & b) sframe::perf::layout::set_id_word(k.id, b, sframe::perf::layout::id_word(r.id, b));
  switch (r.type) {
    case sframe::perf::kRecordSample:
      k.ip = r.sample.ip, k.addr = r.sample.addr, k.period = r.sample.period;
      for (std::uint64_t i = 0; i < r.sample.callchain_nr; ++i) k.chain.push_back(r.sample.callchain(i));
      break;
    case sframe::perf::kRecordMmap2: {
      const auto& m = r.mmap;
      k.pid = m.pid, k.tid = m.tid, k.start = m.start, k.len = m.len, k.pgoff = m.pgoff;
      k.maj = m.maj, k.min = m.min, k.ino = m.ino, k.prot = m.prot, k.flags = m.flags;
      k.text = std::string(m.filename);
      k.build_id.assign(m.build_id.begin(), m.build_id.end());
      break;
    }
    case sframe::perf::kRecordComm:
      k.pid = r.comm.pid, k.tid = r.comm.tid, k.text = std::string(r.comm.comm);
      break;
    default:  // FORK, EXIT
      k.pid = r.task.pid, k.ppid = r.task.ppid, k.tid = r.task.tid, k.ptid = r.task.ptid, k.time = r.task.time;
      break;
  }
  return k;
}

// Re-encodes what `d` decoded with the writer and reads it back.
void round_trip(sframe::perf::PerfData& d, bool pipe, const sframe::perf::ReadLimits& limits) {
  using namespace sframe::perf;
  const FileInfo& info = d.info();
  std::vector<std::byte> out;
  PerfWriter w = PerfWriter::to_memory(out, pipe);
  if (!w.set_attrs(info.attrs)) return;  // too many IDs for one pipe-mode record
  if (!w.add_feature(layout::kFeatCmdline, feature_cmdline(info.cmdline))) return;
  if (!w.add_feature(layout::kFeatEventDesc, feature_event_desc(info.attrs))) return;
  auto ids = feature_build_ids(info.build_ids);
  const bool with_ids = ids.has_value();
  std::vector<Kept> want;
  std::vector<std::byte> rec;
  bool ok = true;
  std::uint64_t encodable = kSampleCallchain;
  for (std::uint64_t b : layout::kSampleHead) encodable |= b;
  auto r = d.for_each([&](const Record& in) {
    if (!ok) return;
    rec.clear();
    bool typed = in.attr != nullptr;
    sframe::Expected<void> e;
    if (typed && in.type == kRecordSample && !(in.attr->sample_type & ~encodable)) {
      std::vector<std::uint64_t> chain;
      for (std::uint64_t i = 0; i < in.sample.callchain_nr; ++i) chain.push_back(in.sample.callchain(i));
      e = encode_sample(rec, in.misc, *in.attr, in.id, in.sample.ip, in.sample.addr, in.sample.period, chain);
    } else if (typed && in.type == kRecordMmap2) {
      e = encode_mmap2(rec, in.misc, in.mmap, in.id, *in.attr);
    } else if (typed && in.type == kRecordComm) {
      e = encode_comm(rec, in.comm, in.id, *in.attr);
    } else if (typed && (in.type == kRecordFork || in.type == kRecordExit)) {
      e = encode_task(rec, in.type, in.task, in.id, *in.attr);
    } else {
      typed = false;
    }
    if (!e) typed = false;  // too long as encoded: copied instead
    if (!typed) rec.assign(in.bytes.begin(), in.bytes.end());
    if (!w.write(rec)) {
      ok = false;
      return;
    }
    want.push_back(keep(in, !typed));
  });
  if (!r || !ok) return;
  if (with_ids && !w.add_feature(layout::kFeatBuildId, std::move(*ids))) return;
  SFRAME_FUZZ_CHECK(w.finish().has_value());
  auto back = PerfData::from_bytes(out, limits);
  SFRAME_FUZZ_CHECK(back.has_value());
  const FileInfo& bi = back->info();
  SFRAME_FUZZ_CHECK(bi.pipe == pipe && bi.attrs.size() == info.attrs.size());
  for (std::size_t i = 0; i < info.attrs.size(); ++i) {
    const EventAttr &a = info.attrs[i], &b = bi.attrs[i];
    SFRAME_FUZZ_CHECK(a.type == b.type && a.config == b.config && a.sample_period == b.sample_period &&
                      a.sample_type == b.sample_type && a.read_format == b.read_format && a.flags == b.flags &&
                      a.branch_sample_type == b.branch_sample_type && a.sample_regs_user == b.sample_regs_user &&
                      a.sample_stack_user == b.sample_stack_user && a.sample_regs_intr == b.sample_regs_intr);
    SFRAME_FUZZ_CHECK(a.ids == b.ids && a.name == b.name);
  }
  SFRAME_FUZZ_CHECK(bi.cmdline == info.cmdline);
  if (with_ids) {
    SFRAME_FUZZ_CHECK(bi.build_ids.size() == info.build_ids.size());
    for (std::size_t i = 0; i < bi.build_ids.size(); ++i)
      SFRAME_FUZZ_CHECK(bi.build_ids[i].build_id == info.build_ids[i].build_id &&
                        bi.build_ids[i].pid == info.build_ids[i].pid &&
                        bi.build_ids[i].cpumode == info.build_ids[i].cpumode);
  }
  std::size_t at = 0;
  auto again = back->for_each([&](const Record& in) {
    SFRAME_FUZZ_CHECK(at < want.size());
    const Kept got = keep(in, !want[at].bytes.empty());
    SFRAME_FUZZ_CHECK(got == want[at]);
    ++at;
  });
  SFRAME_FUZZ_CHECK(again.has_value() && at == want.size());
}

void check_kallsyms(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<sframe::perf::detail::KSym> syms;
  sframe::perf::detail::parse_kallsyms(text, syms);
  std::uint64_t sink = 0;
  for (std::size_t i = 0; i < syms.size(); ++i) {
    const auto& k = syms[i];
    SFRAME_FUZZ_CHECK(k.address != 0);
    SFRAME_FUZZ_CHECK(k.type == 't' || k.type == 'T' || k.type == 'w' || k.type == 'W');
    SFRAME_FUZZ_CHECK(k.name_len > 0 && k.name_at <= size && k.name_len <= size - k.name_at);
    SFRAME_FUZZ_CHECK(i == 0 || syms[i - 1].address <= k.address);
    for (char c : text.substr(k.name_at, k.name_len)) {
      SFRAME_FUZZ_CHECK(c != '\n' && c != '\t');
      sink += static_cast<unsigned char>(c);
    }
  }
  // perf's reference symbol, found by name, is one the full parse lists.
  if (const std::uint64_t t = sframe::perf::detail::kallsyms_address(text, "_text")) {
    bool listed = false;
    for (const auto& k : syms) listed = listed || (k.address == t && text.substr(k.name_at, k.name_len) == "_text");
    SFRAME_FUZZ_CHECK(listed);
  }
  // The index (lines parsed on demand when sorted) answers as the full
  // parse does, at and around every symbol and at the extremes.
  // So does the index saved and read back over the same text; one with a
  // byte of its saved form changed is refused or, read back, stays in the
  // text.
  using sframe::perf::detail::KallsymsIndex;
  const KallsymsIndex built(text);
  const std::vector<std::byte> saved = built.save();
  const std::optional<KallsymsIndex> loaded = KallsymsIndex::load(text, saved);
  SFRAME_FUZZ_CHECK(loaded.has_value());
  std::vector<std::uint64_t> probes = {0, 1, UINT64_MAX};
  for (std::size_t i = 0; i < syms.size() && i < 64; ++i)
    probes.insert(probes.end(), {syms[i].address - 1, syms[i].address, syms[i].address + 1});
  std::vector<sframe::perf::detail::KSym> group;
  std::vector<std::byte> damaged = saved;
  damaged[size % damaged.size()] ^= std::byte{static_cast<unsigned char>(size > 0 ? data[0] | 1 : 1)};
  if (const auto bad = KallsymsIndex::load(text, damaged))
    for (const std::uint64_t a : probes) {
      std::uint64_t next = 0;
      if (bad->lookup(a, group, next))
        for (const auto& k : group) SFRAME_FUZZ_CHECK(k.name_at <= size && k.name_len <= size - k.name_at);
    }
  for (const KallsymsIndex* index : {&built, &*loaded}) {
    for (const std::uint64_t a : probes) {
      std::uint64_t next = 0;
      const bool hit = index->lookup(a, group, next);
      auto up = std::upper_bound(syms.begin(), syms.end(), a, [](std::uint64_t v, const auto& k) { return v < k.address; });
      SFRAME_FUZZ_CHECK(hit == (up != syms.begin()));
      if (!hit) continue;
      auto lo = up - 1;
      while (lo != syms.begin() && (lo - 1)->address == (up - 1)->address) --lo;
      SFRAME_FUZZ_CHECK(group.size() == static_cast<std::size_t>(up - lo));
      for (std::size_t k = 0; k < group.size(); ++k) {
        SFRAME_FUZZ_CHECK(group[k].address == lo[k].address && group[k].name_at == lo[k].name_at);
        SFRAME_FUZZ_CHECK(group[k].name_len == lo[k].name_len && group[k].type == lo[k].type);
      }
      SFRAME_FUZZ_CHECK(next == (up != syms.end() ? up->address : 0));
    }
  }
  sframe::fuzz::g_sink = sink;
}

// What `sframe perf inject` does to the samples: each SAMPLE rewritten by
// rewrite_sample() with its callchain reversed, for attributes without
// REGS_USER and STACK_USER; read back, every sample keeps its other fields
// and carries the new callchain, and no register or stack copy.
void rewrite_round_trip(sframe::perf::PerfData& d, const sframe::perf::ReadLimits& limits) {
  using namespace sframe::perf;
  std::vector<EventAttr> attrs = d.info().attrs;
  for (EventAttr& a : attrs) {
    if (!(a.sample_type & kSampleCallchain)) return;  // inject refuses these
    a.sample_type &= ~(kSampleRegsUser | kSampleStackUser);
    a.sample_regs_user = 0;
    a.sample_stack_user = 0;
  }
  std::vector<std::byte> out;
  PerfWriter w = PerfWriter::to_memory(out, false);
  if (!w.set_attrs(attrs)) return;
  struct Want {
    std::uint64_t ip, period;
    sframe::perf::SampleId id;
    std::vector<std::uint64_t> chain;
  };
  std::vector<Want> want;
  std::vector<std::byte> rec;
  bool ok = true;
  auto r = d.for_each([&](const Record& in) {
    if (!ok || in.type != kRecordSample) return;
    std::vector<std::uint64_t> chain;
    for (std::uint64_t i = in.sample.callchain_nr; i-- > 0;) chain.push_back(in.sample.callchain(i));
    rec.clear();
    if (!rewrite_sample(rec, in, chain)) return;  // too long as rewritten: inject says so
    SFRAME_FUZZ_CHECK(rec.size() <= in.bytes.size());
    ok = w.write(rec).has_value();
    want.push_back({in.sample.ip, in.sample.period, in.id, std::move(chain)});
  });
  if (!r || !ok) return;
  SFRAME_FUZZ_CHECK(w.finish().has_value());
  auto back = PerfData::from_bytes(out, limits);
  SFRAME_FUZZ_CHECK(back.has_value());
  std::size_t at = 0;
  auto again = back->for_each([&](const Record& in) {
    SFRAME_FUZZ_CHECK(in.type == kRecordSample && at < want.size());
    const Want& x = want[at++];
    SFRAME_FUZZ_CHECK(in.sample.ip == x.ip && in.sample.period == x.period && in.id == x.id);
    SFRAME_FUZZ_CHECK(in.sample.callchain_nr == x.chain.size() && in.sample.regs_abi == RegsAbi::kNone &&
                      in.sample.stack.empty() && in.sample.regs_user_at == 0 && in.sample.stack_user_at == 0);
    for (std::size_t i = 0; i < x.chain.size(); ++i) SFRAME_FUZZ_CHECK(in.sample.callchain(i) == x.chain[i]);
  });
  SFRAME_FUZZ_CHECK(again.has_value() && at == want.size());
}

// Every record through a session, as `sframe perf script` reads them.
void unwind_all(sframe::perf::PerfData& d) {
  using namespace sframe::perf;
  SessionOptions so;
  so.kallsyms = "/nonexistent/kallsyms";
  so.buildid_dir = "/nonexistent";
  so.max_stack = 64;
  Session session(d.info(), so);
  std::uint64_t sink = 0;
  auto r = d.for_each([&](const Record& rec) {
    if (rec.type != kRecordSample) {
      session.process(rec);
      return;
    }
    const UnwoundSample& u = session.unwind(rec);
    SFRAME_FUZZ_CHECK(u.frames.size() <= so.max_stack);
    for (const ResolvedFrame& f : u.frames) {
      sink += f.ip + f.address + f.symoff;
      if (f.symbol) sink += f.symbol->size();
      if (f.dso) sink += f.dso->size();
    }
  });
  (void)r;
  sframe::fuzz::g_sink = sink + session.stats().frames;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sframe::perf;
  check_kallsyms(data, size);
  // Small bounds: the fuzzer's inputs are small, and its RSS limit is 2 GiB.
  ReadLimits limits;
  limits.max_decompressed_record = 1u << 20;
  limits.max_decompressed_total = 16u << 20;
  auto d = PerfData::from_bytes(std::span(reinterpret_cast<const std::byte*>(data), size), limits);
  if (!d) {
    SFRAME_FUZZ_CHECK(d.error().offset <= size);
    return 0;
  }
  std::uint64_t sink = 0;
  auto r = d->for_each([&](const Record& rec) {
    SFRAME_FUZZ_CHECK(rec.offset < size);
    if (rec.type == kRecordSample) {
      const Sample& s = rec.sample;
      for (std::uint64_t i = 0; i < s.callchain_nr; ++i) sink += s.callchain(i);
      for (unsigned reg = 0; reg < 64; ++reg)
        if (auto v = s.user_reg(reg)) sink += *v;
      for (std::byte b : s.stack) sink += std::to_integer<unsigned>(b);
      SFRAME_FUZZ_CHECK(s.stack.size() <= s.stack_size);
    }
    if (rec.type == kRecordMmap || rec.type == kRecordMmap2) {
      for (char c : rec.mmap.filename) sink += static_cast<unsigned char>(c);
      for (std::byte b : rec.mmap.build_id) sink += std::to_integer<unsigned>(b);
      SFRAME_FUZZ_CHECK(rec.mmap.build_id.size() <= 20);
    }
    if (rec.type == kRecordComm)
      for (char c : rec.comm.comm) sink += static_cast<unsigned char>(c);
  });
  if (!r) SFRAME_FUZZ_CHECK(r.error().offset <= size);
  for (const auto& a : d->info().attrs) sink += a.name.size() + a.ids.size();
  sframe::fuzz::g_sink = sink;
  if (r) {
    round_trip(*d, false, limits);
    round_trip(*d, true, limits);
    rewrite_round_trip(*d, limits);
    unwind_all(*d);
  }
  return 0;
}
