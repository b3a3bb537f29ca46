// SPDX-License-Identifier: MIT
#include "profile.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace sframe::tools::profile {
namespace {

std::size_t mix(std::size_t h, std::uint64_t v) {
  // boost::hash_combine's step, over 64 bits.
  return h ^ (std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

}  // namespace

std::size_t Profile::FrameKeyHash::operator()(const FrameKey& k) const noexcept {
  std::size_t h = mix(mix(mix(std::hash<std::uint64_t>{}(k.pc), k.start), k.end), k.pgoff);
  for (int i = 0; i < 4; ++i) h = mix(mix(h, reinterpret_cast<std::uintptr_t>(k.p[i])), k.n[i]);
  return h;
}

std::size_t Profile::RootHash::operator()(const Root& r) const noexcept {
  return mix(mix(mix(std::hash<std::uint64_t>{}(r.pid), r.tid), r.comm), r.event);
}

Profile::Profile() { intern(""); }

std::uint32_t Profile::intern(std::string_view s) {
  auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.emplace_back(s);
  string_ids_.emplace(strings_.back(), id);  // a deque keeps its elements in place
  return id;
}

std::size_t Profile::event_index(std::uint32_t event) const {
  return static_cast<std::size_t>(std::find(events_.begin(), events_.end(), event) - events_.begin());
}

std::uint32_t Profile::frame_id(const Frame& f) {
  const Mapping& m = f.mapping;
  const FrameKey key{f.pc,
                     m.start,
                     m.end,
                     m.pgoff,
                     {f.function.data(), f.source.data(), m.file.data(), m.build_id.data()},
                     {f.function.size(), f.source.size(), m.file.size(), m.build_id.size()}};
  auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<std::uint32_t>(frames_.size()));
  if (!fresh) return it->second;
  FrameEntry e{f.pc, intern(f.function), intern(f.source), kNone};
  if (!m.file.empty() || m.end != 0) {
    const FrameKey mkey{0, m.start, m.end, m.pgoff, {nullptr, nullptr, m.file.data(), m.build_id.data()},
                        {0, 0, m.file.size(), m.build_id.size()}};
    auto [mit, mfresh] = mapping_ids_.try_emplace(mkey, static_cast<std::uint32_t>(mappings_.size()));
    if (mfresh) mappings_.push_back({m.start, m.end, m.pgoff, intern(m.file), intern(m.build_id)});
    e.mapping = mit->second;
  }
  frames_.push_back(e);
  return it->second;
}

void Profile::add_event(std::string_view event) {
  const std::uint32_t id = intern(event);
  if (std::find(events_.begin(), events_.end(), id) == events_.end()) events_.push_back(id);
}

void Profile::add(const Sample& s) {
  // Ids are 32 bits: a profile too large for them is refused, not wrapped.
  if (nodes_.size() + s.frames.size() + 1 >= kNone || frames_.size() + s.frames.size() >= kNone)
    throw std::length_error("profile: more than 2^32 distinct frames or stack prefixes");
  ++samples_;
  const Root root{s.pid, s.tid, intern(s.comm), intern(s.event)};
  if (std::find(events_.begin(), events_.end(), root.event) == events_.end()) events_.push_back(root.event);
  auto [rit, rfresh] = root_nodes_.try_emplace(root, static_cast<std::uint32_t>(nodes_.size()));
  if (rfresh) {
    nodes_.push_back({kNone, static_cast<std::uint32_t>(roots_.size())});
    roots_.push_back(root);
  }
  std::uint32_t node = rit->second;
  for (auto f = s.frames.rbegin(); f != s.frames.rend(); ++f) {
    const std::uint32_t fid = frame_id(*f);
    auto [cit, cfresh] =
        children_.try_emplace(std::uint64_t{node} << 32 | fid, static_cast<std::uint32_t>(nodes_.size()));
    if (cfresh) nodes_.push_back({node, fid});
    node = cit->second;
  }
  nodes_[node].count += 1;
  nodes_[node].period += s.period;
}

}  // namespace sframe::tools::profile
