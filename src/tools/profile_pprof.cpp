// SPDX-License-Identifier: MIT
#include "profile_pprof.hpp"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <google/protobuf/arena.h>

#include "profile.pb.h"

namespace sframe::tools::profile {
namespace {

namespace pb = perftools::profiles;

// gzip (RFC 1952) with zlib, fed piece by piece: windowBits 15 + 16
// selects the gzip wrapper, which `go tool pprof` and the back ends expect.
// Level 1, as Go's runtime/pprof writes its profiles: the default level took
// more than the rest of the writer, for files about 8% smaller.
class Gzip {
 public:
  Gzip() {
    if (deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: deflateInit2 failed");
  }
  ~Gzip() { deflateEnd(&z_); }
  Gzip(const Gzip&) = delete;
  Gzip& operator=(const Gzip&) = delete;

  void write(std::string_view in) {
    // zlib counts input in 32 bits.
    for (constexpr std::size_t kMax = std::size_t{1} << 30; in.size() > kMax; in.remove_prefix(kMax))
      run(in.substr(0, kMax), Z_NO_FLUSH);
    run(in, Z_NO_FLUSH);
  }
  /// The compressed stream, complete.
  std::string finish() {
    run({}, Z_FINISH);
    return std::move(out_);
  }

 private:
  void run(std::string_view in, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    for (;;) {
      if (out_.size() - used_ < 4096) out_.resize(std::max<std::size_t>(2 * out_.size(), 64 << 10));
      z_.next_out = reinterpret_cast<Bytef*>(out_.data() + used_);
      z_.avail_out = static_cast<uInt>(out_.size() - used_);
      const int rc = deflate(&z_, flush);
      used_ = out_.size() - z_.avail_out;
      if (rc == Z_STREAM_END) {
        out_.resize(used_);
        return;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) throw std::runtime_error("zlib: deflate failed");
      if (flush == Z_NO_FLUSH && z_.avail_in == 0 && z_.avail_out != 0) return;
    }
  }
  z_stream z_{};
  std::string out_;
  std::size_t used_ = 0;
};

bool clock_event(const std::string& e) { return e == "cpu-clock" || e == "task-clock"; }

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

}  // namespace

std::string pprof_bytes(const Profile& p, const PprofOptions& opt) {
  if (p.strings().size() > std::numeric_limits<std::uint32_t>::max() / 2)
    throw std::runtime_error("profile: too many strings for one pprof file");
  // Serialized in three parts that concatenate to the one message (a
  // message's fields are written in field-number order): the sample types
  // (field 1), the samples (2) one at a time, as they are made, then the
  // rest (3 to 14); the samples, the bulk of a large profile, are never
  // all held as messages.
  // Messages on an arena: allocated in blocks and freed at once (the
  // destructors of a few thousand Locations and strings cost as much as
  // their serialization).
  google::protobuf::Arena arena;
  pb::Profile& types = *google::protobuf::Arena::CreateMessage<pb::Profile>(&arena);
  pb::Profile& out = *google::protobuf::Arena::CreateMessage<pb::Profile>(&arena);
  // The Profile's strings first, keeping their ids (0 is ""); ours after.
  for (const std::string& s : p.strings()) out.add_string_table(s);
  std::map<std::string, std::int64_t> extra;
  const auto str = [&](const std::string& s) -> std::int64_t {
    auto [it, fresh] = extra.try_emplace(s, out.string_table_size());
    if (fresh) out.add_string_table(s);
    return it->second;
  };

  const auto& events = p.events();
  const bool several = events.size() > 1;
  for (std::uint32_t e : events) {
    const std::string& name = p.strings()[e];
    const std::string prefix = several ? name + "/" : "";
    auto* count = types.add_sample_type();
    count->set_type(str(prefix + "samples"));
    count->set_unit(str("count"));
    auto* period = types.add_sample_type();
    period->set_type(str(clock_event(name) ? prefix + "cpu" : prefix + name));
    period->set_unit(str(clock_event(name) ? "nanoseconds" : "count"));
  }
  if (!events.empty()) {
    const std::string& name = p.strings()[events.front()];
    out.mutable_period_type()->set_type(str(clock_event(name) ? "cpu" : name));
    out.mutable_period_type()->set_unit(str(clock_event(name) ? "nanoseconds" : "count"));
    out.set_default_sample_type(types.sample_type(1).type());
  }
  if (!opt.comment.empty()) out.add_comment(str(opt.comment));

  // pprof takes the first mapping for the main binary: the one holding the
  // outermost frame (_start) of the most samples goes first.
  const auto& nodes = p.nodes();
  const auto& maps = p.mappings();
  std::vector<std::uint64_t> outermost(maps.size(), 0);
  for (const Profile::Node& n : nodes) {
    if (n.count == 0 || n.parent == Profile::kNone) continue;
    const Profile::Node* at = &n;
    while (nodes[at->parent].parent != Profile::kNone) at = &nodes[at->parent];
    const std::uint32_t m = p.frames()[at->frame].mapping;
    if (m != Profile::kNone) outermost[m] += n.count;
  }
  std::vector<std::uint32_t> order(maps.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!order.empty()) {
    const auto main_map = std::max_element(outermost.begin(), outermost.end()) - outermost.begin();
    std::rotate(order.begin(), order.begin() + main_map, order.begin() + main_map + 1);
  }
  std::vector<std::uint64_t> map_id(maps.size());
  for (std::size_t k = 0; k < order.size(); ++k) map_id[order[k]] = k + 1;

  // Mappings: ids from 1; an unknown extent spans its frames' PCs.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> span(maps.size(),
                                                             {std::numeric_limits<std::uint64_t>::max(), 0});
  std::vector<bool> named(maps.size(), false);
  for (const Profile::FrameEntry& f : p.frames()) {
    if (f.mapping == Profile::kNone) continue;
    span[f.mapping].first = std::min(span[f.mapping].first, f.pc);
    span[f.mapping].second = std::max(span[f.mapping].second, f.pc + 1);
    if (f.function != 0) named[f.mapping] = true;
  }
  for (std::uint32_t i : order) {
    const Profile::MappingEntry& m = maps[i];
    auto* pm = out.add_mapping();
    pm->set_id(map_id[i]);
    const bool known = m.end > m.start;
    pm->set_memory_start(known ? m.start : span[i].first);
    pm->set_memory_limit(known ? m.end : span[i].second);
    pm->set_file_offset(m.pgoff);
    pm->set_filename(m.file);
    pm->set_build_id(m.build_id);
    pm->set_has_functions(named[i]);
  }

  // Functions by (name, source); Locations one per frame (id = index + 1).
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> functions;
  for (std::size_t i = 0; i < p.frames().size(); ++i) {
    const Profile::FrameEntry& f = p.frames()[i];
    auto* loc = out.add_location();
    loc->set_id(i + 1);
    loc->set_address(f.pc);
    if (f.mapping != Profile::kNone) loc->set_mapping_id(map_id[f.mapping]);
    if (f.function == 0) continue;  // unsymbolized: pprof shows the address
    auto [it, fresh] = functions.try_emplace({f.function, f.source}, functions.size() + 1);
    if (fresh) {
      auto* fn = out.add_function();
      fn->set_id(it->second);
      fn->set_name(f.function);
      fn->set_system_name(f.function);
      fn->set_filename(f.source);
    }
    loc->add_line()->set_function_id(it->second);
  }

  // Samples: one per call tree node where stacks end, its frames walked up;
  // each as field 2 (tag 0x12, its length, its bytes) of the Profile.
  const std::int64_t pid_key = str("pid"), tid_key = str("tid"), comm_key = str("comm");
  Gzip gz;
  std::string part;
  if (!types.AppendToString(&part)) throw std::runtime_error("protobuf: the profile could not be serialized");
  pb::Sample& s = *google::protobuf::Arena::CreateMessage<pb::Sample>(&arena);  // reused: cleared, keeps its storage
  for (const Profile::Node& n : nodes) {
    if (n.count == 0) continue;
    s.Clear();
    const Profile::Node* at = &n;
    for (; at->parent != Profile::kNone; at = &nodes[at->parent]) s.add_location_id(std::uint64_t{at->frame} + 1);
    const Profile::Root& r = p.roots()[at->frame];
    const std::size_t e = p.event_index(r.event);
    for (std::size_t i = 0; i < events.size(); ++i) {
      s.add_value(i == e ? i64(n.count) : 0);
      s.add_value(i == e ? i64(n.period) : 0);
    }
    auto* l = s.add_label();
    l->set_key(pid_key);
    l->set_num(r.pid);
    l = s.add_label();
    l->set_key(tid_key);
    l->set_num(r.tid);
    l = s.add_label();
    l->set_key(comm_key);
    l->set_str(r.comm);
    const std::size_t size = s.ByteSizeLong();
    if (size > std::numeric_limits<int>::max()) throw std::runtime_error("protobuf: a sample too large to serialize");
    part += '\x12';
    for (std::uint64_t v = size; ; v >>= 7) {
      if (v < 0x80) {
        part += static_cast<char>(v);
        break;
      }
      part += static_cast<char>((v & 0x7f) | 0x80);
    }
    const std::size_t at_end = part.size();
    part.resize(at_end + size);
    s.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(part.data() + at_end));
    if (part.size() >= (256u << 10)) {
      gz.write(part);
      part.clear();
    }
  }
  if (!out.AppendToString(&part)) throw std::runtime_error("protobuf: the profile could not be serialized");
  gz.write(part);
  return gz.finish();
}

}  // namespace sframe::tools::profile
