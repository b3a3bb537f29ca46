// SPDX-License-Identifier: MIT
// sframepp: the session's repeat cache (see repeat_cache.hpp).
#include "repeat_cache.hpp"

#include <cstring>

namespace sframe::perf::detail {

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
      return {std::span<const ResolvedFrame>(frames_).subspan(e.frames_at, e.frames), e.id};
  }
  return {};
}

std::uint64_t RepeatCache::remember(std::uint64_t key, std::uint32_t pid, const Sample& smp,
                                    std::span<const ResolvedFrame> frames) {
  if (frames_.size() + frames.size() > kFrames || words_.size() + 8 * smp.callchain_nr > 8 * kFrames ||
      newest_.size() >= kFrames)
    clear();
  auto [it, fresh] = newest_.try_emplace(key, kNone);
  if (fresh) return 0;
  if (frames_.capacity() == 0) {
    // Address space for the bounds at once, touched only as filled:
    // growing by doubling copied the frames and faulted in each new
    // buffer, the cache's main cost in a recording's conversion.
    frames_.reserve(kFrames);
    words_.reserve(8 * kFrames);
  }
  const Entry e{key,
                next_id_++,
                words_.size(),
                frames_.size(),
                static_cast<std::uint32_t>(smp.callchain_nr),
                static_cast<std::uint32_t>(frames.size()),
                pid,
                it->second};
  it->second = static_cast<std::uint32_t>(entries_.size());
  words_.insert(words_.end(), smp.callchain_data, smp.callchain_data + 8 * smp.callchain_nr);
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  entries_.push_back(e);
  return e.id;
}

void RepeatCache::clear() {
  words_.clear();
  frames_.clear();
  entries_.clear();
  newest_.clear();
}

}  // namespace sframe::perf::detail
