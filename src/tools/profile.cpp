// SPDX-License-Identifier: MIT
#include "profile.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <stdexcept>

namespace sframe::tools::profile {
namespace {

std::size_t mix(std::size_t h, std::uint64_t v) {
  // boost::hash_combine's step, over 64 bits.
  return h ^ (std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

}  // namespace

std::pair<std::uint32_t, bool> FlatIndex::try_emplace(std::uint64_t key, std::uint32_t value) {
  // At most half full: probes stay short.
  if (2 * (size_ + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  // Fibonacci hashing: the product's top bits depend on every bit of the
  // key (parent and child alike).
  for (std::size_t i = (key * 0x9e3779b97f4a7c15ull) >> shift_;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.key == key) return {s.value, false};
    if (s.key == ~std::uint64_t{0}) {
      s = {key, value};
      ++size_;
      return {value, true};
    }
  }
}

void FlatIndex::grow() {
  std::vector<Slot> old(slots_.empty() ? 64 : 2 * slots_.size());
  old.swap(slots_);
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(slots_.size()));
  size_ = 0;
  for (const Slot& s : old)
    if (s.key != ~std::uint64_t{0}) try_emplace(s.key, s.value);
}

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
  return mix(mix(mix(std::hash<std::uint64_t>{}(r.pid), r.tid), r.comm), r.event);
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

std::uint32_t Profile::frame_id(const Frame& f) {
  const Mapping& m = f.mapping;
  const FrameKey key{f.pc,
                     m.start,
                     m.end,
                     m.pgoff,
                     {f.function.data(), f.source.data(), m.file.data(), m.build_id.data()},
                     {f.function.size(), f.source.size(), m.file.size(), m.build_id.size()}};
  Cached& c = frame_cache_[(f.pc * 0x9e3779b97f4a7c15ull) >> 52];
  if (c.id != kNone && c.key == key) return c.id;
  auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<std::uint32_t>(frames_.size()));
  c = {key, it->second};
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
  if (node != last_root_) {
    last_root_ = node;
    last_frames_.clear();
    last_nodes_.clear();
  }
  std::size_t depth = 0;
  for (auto f = s.frames.rbegin(); f != s.frames.rend(); ++f, ++depth) {
    const std::uint32_t fid = frame_id(*f);
    if (depth < last_frames_.size() && last_frames_[depth] == fid) {
      node = last_nodes_[depth];
      continue;
    }
    auto [child, fresh] = children_.try_emplace(std::uint64_t{node} << 32 | fid, static_cast<std::uint32_t>(nodes_.size()));
    if (fresh) nodes_.push_back({node, fid});
    node = child;
    // From the first difference on, this sample's path replaces the last
    // (a longer last path stays valid: each entry is a path from the root).
    last_frames_.resize(depth);
    last_nodes_.resize(depth);
    last_frames_.push_back(fid);
    last_nodes_.push_back(node);
  }
  nodes_[node].count += 1;
  nodes_[node].period += s.period;
}

}  // namespace sframe::tools::profile
