// SPDX-License-Identifier: MIT
#include "profile.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

namespace sframe::tools::profile {
namespace {

std::size_t mix(std::size_t h, std::uint64_t v) {
  // boost::hash_combine's step, over 64 bits.
  return h ^ (std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The sequence's length from its lead byte, then its continuation bytes.
    const std::size_t n = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    bool ok = n != 0 && i + n <= s.size();
    std::uint32_t cp = n == 4 ? c & 7u : n == 3 ? c & 15u : c & 31u;
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xc0) == 0x80;
      cp = cp << 6 | (b & 0x3fu);
    }
    ok = ok && (n == 2 || (n == 3 && cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) ||
                (n == 4 && cp >= 0x10000 && cp <= 0x10ffff));
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

std::size_t Profile::FrameKeyHash::operator()(const FrameKey& k) const noexcept {
  std::size_t h = mix(mix(mix(std::hash<std::uint64_t>{}(k.pc), k.start), k.end), k.pgoff);
  for (int i = 0; i < 4; ++i) h = mix(mix(h, reinterpret_cast<std::uintptr_t>(k.p[i])), k.n[i]);
  return h;
}

std::size_t Profile::RootHash::operator()(const Root& r) const noexcept {
  return mix(mix(mix(std::hash<std::uint64_t>{}(r.pid), r.tid), r.raw_comm), r.event);
}

Profile::Profile() { intern(""); }

std::uint32_t Profile::intern(std::string_view s) {
  auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  std::string v = valid_utf8(s);
  if (v.size() != s.size() || v != s) {
    it = string_ids_.find(v);
    if (it != string_ids_.end()) return it->second;
  }
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.push_back(std::move(v));
  string_ids_.emplace(strings_.back(), id);  // a deque keeps its elements in place
  return id;
}

std::size_t Profile::event_index(std::uint32_t event) const {
  return static_cast<std::size_t>(std::find(events_.begin(), events_.end(), event) - events_.begin());
}

Profile::FrameKey Profile::frame_key(const Frame& f) {
  const Mapping& m = f.mapping;
  return {f.pc,
          m.start,
          m.end,
          m.pgoff,
          {f.function.data(), f.source.data(), m.file.data(), m.build_id.data()},
          {f.function.size(), f.source.size(), m.file.size(), m.build_id.size()}};
}

bool Profile::same_key(const FrameKey& a, const FrameKey& b) {
  // Bytewise, as 64-bit words (the key has no padding: a static_assert says
  // so), without a branch: inlined into the per-frame comparisons, where
  // std::memcmp was a library call for every frame of every sample.
  using Words = std::array<std::uint64_t, sizeof(FrameKey) / sizeof(std::uint64_t)>;
  static_assert(sizeof(FrameKey) % sizeof(std::uint64_t) == 0);
  const auto wa = std::bit_cast<Words>(a), wb = std::bit_cast<Words>(b);
  std::uint64_t diff = 0;
  for (std::size_t i = 0; i < wa.size(); ++i) diff |= wa[i] ^ wb[i];
  return diff == 0;
}

std::uint32_t Profile::frame_id(const Frame& f, const FrameKey& key) {
  const Mapping& m = f.mapping;
  if (2 * (frames_.size() + 1) > frame_slots_.size()) {
    // At most half full: probes stay short.
    frame_slots_.assign(frame_slots_.empty() ? 1024 : 2 * frame_slots_.size(), kNone);
    frame_shift_ = 64 - static_cast<unsigned>(std::countr_zero(frame_slots_.size()));
    for (std::size_t id = 0; id < frame_keys_.size(); ++id)
      frame_slots_[frame_slot(frame_keys_[id])] = static_cast<std::uint32_t>(id);
  }
  const std::size_t slot = frame_slot(key);
  if (frame_slots_[slot] != kNone) return frame_slots_[slot];
  const auto id = static_cast<std::uint32_t>(frames_.size());
  frame_slots_[slot] = id;
  frame_keys_.push_back(key);
  FrameEntry e{f.pc, intern(f.function), intern(f.source), kNone, f.function};
  if (!m.file.empty() || m.end != 0) {
    const FrameKey mkey{0, m.start, m.end, m.pgoff, {nullptr, nullptr, m.file.data(), m.build_id.data()},
                        {0, 0, m.file.size(), m.build_id.size()}};
    auto [mit, mfresh] = mapping_ids_.try_emplace(mkey, static_cast<std::uint32_t>(mappings_.size()));
    if (mfresh) mappings_.push_back({m.start, m.end, m.pgoff, intern(m.file), intern(m.build_id)});
    e.mapping = mit->second;
  }
  frames_.push_back(e);
  return id;
}

std::size_t Profile::frame_slot(const FrameKey& k) const {
  // Fibonacci hashing of a cheap mix: the top bits depend on every bit of
  // the PC, the name's address and the mapping's start.
  const std::uint64_t h = k.pc ^ std::rotl(reinterpret_cast<std::uintptr_t>(k.p[0]), 21) ^ std::rotl(k.start, 42);
  const std::size_t mask = frame_slots_.size() - 1;
  for (std::size_t i = (h * 0x9e3779b97f4a7c15ull) >> frame_shift_;; i = (i + 1) & mask) {
    const std::uint32_t id = frame_slots_[i];
    if (id == kNone || same_key(frame_keys_[id], k)) return i;
  }
}

void Profile::add_event(std::string_view event) {
  const std::uint32_t id = intern(event);
  if (std::find(events_.begin(), events_.end(), id) == events_.end()) events_.push_back(id);
}

std::uint32_t Profile::begin_sample(const Sample& s, std::size_t frames) {
  // Ids are 32 bits: a profile too large for them is refused, not wrapped.
  if (nodes_.size() + frames + 1 >= kNone || frames_.size() + frames >= kNone)
    throw std::length_error("profile: more than 2^32 distinct frames or stack prefixes");
  ++samples_;
  if (last_comm_.id == kNone || last_comm_.name != s.comm) {
    auto it = raw_comm_ids_.find(s.comm);
    if (it == raw_comm_ids_.end()) {
      raw_comms_.emplace_back(s.comm);  // a deque keeps it in place for the key's view
      it = raw_comm_ids_.emplace(raw_comms_.back(), static_cast<std::uint32_t>(raw_comms_.size() - 1)).first;
    }
    last_comm_ = {std::string(s.comm), intern(s.comm), it->second};
  }
  if (last_event_.id == kNone || last_event_.name != s.event) {
    last_event_ = {std::string(s.event), intern(s.event)};
    if (std::find(events_.begin(), events_.end(), last_event_.id) == events_.end()) events_.push_back(last_event_.id);
  }
  const Root root{s.pid, s.tid, last_comm_.id, last_event_.id, last_comm_.raw};
  if (last_root_ == kNone || !RootEq{}(root, roots_[nodes_[last_root_].frame])) {
    auto [rit, rfresh] = root_nodes_.try_emplace(root, static_cast<std::uint32_t>(nodes_.size()));
    if (rfresh) {
      nodes_.push_back({kNone, static_cast<std::uint32_t>(roots_.size())});
      roots_.push_back(root);
    }
    last_root_ = rit->second;
    last_depth_ = 0;
  }
  if (last_frames_.size() < frames) {
    last_frames_.resize(frames);
    last_nodes_.resize(frames);
  }
  return last_root_;
}

std::uint32_t Profile::child(std::uint32_t node, std::uint32_t fid, std::size_t depth) {
  auto [c, fresh] = children_.try_emplace(std::uint64_t{node} << 32 | fid, static_cast<std::uint32_t>(nodes_.size()),
                                          [this](std::uint32_t id) { return key_of(nodes_[id]); });
  if (fresh) nodes_.push_back({node, fid});
  // From the first difference on, this sample's path replaces the last (a
  // longer last path stays valid while no frame differed: each entry is a
  // path from the root).
  last_frames_[depth] = fid;
  last_nodes_[depth] = c;
  last_depth_ = depth + 1;
  return c;
}

std::uint32_t Profile::add(const Sample& s) {
  std::uint32_t node = begin_sample(s, s.frames.size());
  bool shared = true;  // the frames so far are the last sample's
  std::size_t depth = 0;
  for (auto f = s.frames.rbegin(); f != s.frames.rend(); ++f, ++depth) {
    // A frame the last sample has at this depth is taken from there, with
    // its node, without looking it up.
    const FrameKey key = frame_key(*f);
    if (shared && depth < last_depth_ && same_key(frame_keys_[last_frames_[depth]], key)) {
      node = last_nodes_[depth];
      continue;
    }
    shared = false;
    node = child(node, frame_id(*f, key), depth);
  }
  nodes_[node].count += 1;
  nodes_[node].period += s.period;
  return node;
}

void Profile::add_again(std::uint32_t node, std::uint64_t period) {
  ++samples_;
  nodes_.at(node).count += 1;
  nodes_[node].period += period;
}

std::vector<NameNode> name_tree(const Profile& p, std::span<const std::uint32_t> root_name,
                                std::span<const std::uint32_t> frame_name) {
  std::vector<NameNode> tree{{Profile::kNone, Profile::kNone}};
  FlatIndex child;
  const auto& nodes = p.nodes();
  std::vector<std::uint32_t> at(nodes.size());  // Profile node -> name node
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Profile::Node& n = nodes[i];
    const std::uint32_t parent = n.parent == Profile::kNone ? 0 : at[n.parent];
    const std::uint32_t name = n.parent == Profile::kNone ? root_name[n.frame] : frame_name[n.frame];
    auto [id, fresh] = child.try_emplace(std::uint64_t{parent} << 32 | name, static_cast<std::uint32_t>(tree.size()),
                                         [&tree](std::uint32_t k) { return std::uint64_t{tree[k].parent} << 32 | tree[k].name; });
    if (fresh) {
      tree.push_back({parent, name, Profile::kNone, tree[parent].first_child});
      tree[parent].first_child = id;
    }
    tree[id].count += n.count;
    at[i] = id;
  }
  return tree;
}

std::string folded_stacks(const Profile& p) {
  // The call tree by folded names. Names get ids once per frame and per
  // root, so the tree is built with one index lookup per Profile node.
  std::unordered_map<std::string, std::uint32_t> name_ids;
  std::vector<std::string_view> names;
  const auto name_id = [&](std::string s) {
    auto [it, fresh] = name_ids.try_emplace(std::move(s), static_cast<std::uint32_t>(names.size()));
    if (fresh) names.push_back(it->first);  // node keys stay in place
    return it->second;
  };
  std::vector<std::uint32_t> frame_name(p.frames().size());
  for (std::size_t i = 0; i < frame_name.size(); ++i) {
    const std::string_view raw = p.frames()[i].raw_function;
    std::string n = raw.data() ? std::string(raw) : std::string("[unknown]");
    std::replace(n.begin(), n.end(), ';', ':');
    frame_name[i] = name_id(std::move(n));
  }
  std::vector<std::uint32_t> root_name(p.roots().size());
  for (std::size_t i = 0; i < root_name.size(); ++i) {
    std::string n = p.raw_comms()[p.roots()[i].raw_comm];
    std::replace(n.begin(), n.end(), ' ', '_');
    root_name[i] = name_id(std::move(n));
  }
  std::vector<NameNode> tree = name_tree(p, root_name, frame_name);
  // A line per node where stacks end, all in one buffer (a string each
  // was an allocation per line); lines equal as text (a comm holding ';'
  // reads as frames) are one.
  struct Line {
    std::size_t at, size;
    std::uint64_t count;
  };
  std::vector<Line> lines;
  std::string text;
  std::vector<std::uint32_t> path;
  for (std::uint32_t i = 1; i < tree.size(); ++i) {
    if (tree[i].count == 0) continue;
    path.clear();
    for (std::uint32_t k = i; k != 0; k = tree[k].parent) path.push_back(tree[k].name);
    const std::size_t at = text.size();
    for (auto n = path.rbegin(); n != path.rend(); ++n) {
      if (n != path.rbegin()) text += ';';
      text += names[*n];
    }
    lines.push_back({at, text.size() - at, tree[i].count});
  }
  const auto line_text = [&text](const Line& l) { return std::string_view(text).substr(l.at, l.size); };
  std::sort(lines.begin(), lines.end(), [&](const Line& a, const Line& b) { return line_text(a) < line_text(b); });
  std::string out;
  out.reserve(text.size() + lines.size() * 8);
  for (std::size_t i = 0; i < lines.size();) {
    std::uint64_t count = 0;
    std::size_t k = i;
    for (; k < lines.size() && line_text(lines[k]) == line_text(lines[i]); ++k) count += lines[k].count;
    out += line_text(lines[i]);
    out += ' ';
    out += std::to_string(count);
    out += '\n';
    i = k;
  }
  return out;
}

}  // namespace sframe::tools::profile
