// SPDX-License-Identifier: MIT
// sframepp: the session's repeat cache (see repeat_cache.hpp).
#include "repeat_cache.hpp"

#include <cstring>

namespace sframe::perf::detail {
namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h = (h ^ v) * 0xff51afd7ed558ccdu;
  return h ^ (h >> 29);
}

std::uint64_t frame_hash(const ResolvedFrame& f) {
  std::uint64_t h = mix(0x9e3779b97f4a7c15u, f.address);
  h = mix(h, f.ip);
  h = mix(h, f.runtime_ip);
  h = mix(h, reinterpret_cast<std::uintptr_t>(f.symbol));
  h = mix(h, f.symoff);
  h = mix(h, reinterpret_cast<std::uintptr_t>(f.dso));
  h = mix(h, static_cast<std::uint64_t>(f.origin));
  h = mix(h, f.map_start);
  h = mix(h, f.map_end);
  h = mix(h, f.map_pgoff);
  return mix(h, reinterpret_cast<std::uintptr_t>(f.build_id));
}

bool same_frame(const ResolvedFrame& a, const ResolvedFrame& b) {
  return a.address == b.address && a.ip == b.ip && a.runtime_ip == b.runtime_ip && a.symbol == b.symbol &&
         a.symoff == b.symoff && a.dso == b.dso && a.origin == b.origin && a.map_start == b.map_start &&
         a.map_end == b.map_end && a.map_pgoff == b.map_pgoff && a.build_id == b.build_id;
}

}  // namespace

std::uint64_t RepeatCache::key(std::uint32_t pid, const Sample& smp) noexcept {
  if (smp.callchain_nr == 0 || smp.callchain_nr > kMaxWords) return 0;
  std::uint64_t h = (pid + 1) * 0x9e3779b97f4a7c15u;
  for (std::uint64_t i = 0; i < smp.callchain_nr; ++i) {
    std::uint64_t w;
    std::memcpy(&w, smp.callchain_data + 8 * i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return h | 1;  // 0: no key
}

RepeatCache::Hit RepeatCache::find(std::uint64_t key, std::uint32_t pid, const Sample& smp) const {
  auto it = newest_.find(key);
  if (it == newest_.end()) return {};
  for (std::uint32_t i = it->second; i != kNone; i = entries_[i].older) {
    const Entry& e = entries_[i];
    if (e.pid == pid && e.words == smp.callchain_nr &&
        std::memcmp(words_.data() + e.words_at, smp.callchain_data, 8 * e.words) == 0)
      return {std::span<const std::uint32_t>(refs_).subspan(e.refs_at, e.frames), e.id};
  }
  return {};
}

void RepeatCache::copy_frames(const Hit& hit, std::vector<ResolvedFrame>& out) const {
  out.resize(hit.frames.size());
  for (std::size_t i = 0; i < hit.frames.size(); ++i) out[i] = frames_[hit.frames[i]];
}

std::uint32_t RepeatCache::intern(const ResolvedFrame& f) {
  if (2 * (frames_.size() + 1) > slots_.size()) {
    // At most half full: probes stay short.
    slots_.assign(slots_.empty() ? 1024 : 2 * slots_.size(), kNone);
    const std::size_t mask = slots_.size() - 1;
    for (std::uint32_t id = 0; id < frames_.size(); ++id) {
      std::size_t s = frame_hash(frames_[id]) & mask;
      while (slots_[s] != kNone) s = (s + 1) & mask;
      slots_[s] = id;
    }
  }
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t s = frame_hash(f) & mask;; s = (s + 1) & mask) {
    const std::uint32_t id = slots_[s];
    if (id == kNone) {
      slots_[s] = static_cast<std::uint32_t>(frames_.size());
      frames_.push_back(f);
      return slots_[s];
    }
    if (same_frame(frames_[id], f)) return id;
  }
}

std::uint64_t RepeatCache::remember(std::uint64_t key, std::uint32_t pid, const Sample& smp,
                                    std::span<const ResolvedFrame> frames) {
  if (refs_.size() + frames.size() > kFrames || words_.size() + 8 * smp.callchain_nr > 8 * kFrames ||
      newest_.size() >= kFrames)
    clear();
  auto [it, fresh] = newest_.try_emplace(key, kNone);
  if (fresh) return 0;
  if (refs_.capacity() == 0) {
    // Address space for the bounds at once, touched only as filled:
    // growing by doubling copied the callchains and faulted in each new
    // buffer.
    refs_.reserve(kFrames);
    words_.reserve(8 * kFrames);
  }
  const Entry e{key,
                next_id_++,
                words_.size(),
                refs_.size(),
                static_cast<std::uint32_t>(smp.callchain_nr),
                static_cast<std::uint32_t>(frames.size()),
                pid,
                it->second};
  it->second = static_cast<std::uint32_t>(entries_.size());
  words_.insert(words_.end(), smp.callchain_data, smp.callchain_data + 8 * smp.callchain_nr);
  for (const ResolvedFrame& f : frames) refs_.push_back(intern(f));
  entries_.push_back(e);
  return e.id;
}

void RepeatCache::clear() {
  words_.clear();
  refs_.clear();
  frames_.clear();
  slots_.clear();
  entries_.clear();
  newest_.clear();
}

}  // namespace sframe::perf::detail
