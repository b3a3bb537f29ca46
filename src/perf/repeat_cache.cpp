// SPDX-License-Identifier: MIT
// sframepp: the session's repeat cache (see repeat_cache.hpp).
#include "repeat_cache.hpp"

#include <bit>
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

void RepeatCache::make_room(std::uint64_t words) {
  if (frames_.size() + words > kFrames || refs_.size() + words > kFrames || words_.size() + 8 * words > 8 * kFrames ||
      newest_.size() >= kFrames)
    clear();
}

std::size_t RepeatCache::word_slot(const WordKey& k) const {
  // Fibonacci hashing of the word, its space and position: the top bits
  // depend on every bit of each.
  const std::uint64_t h = k.word ^ std::rotl(std::uint64_t{k.space} << 1 | k.caller, 40);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = (h * 0x9e3779b97f4a7c15ull) >> shift_;; i = (i + 1) & mask) {
    const std::uint32_t id = slots_[i];
    if (id == kNone) return i;
    const WordKey& o = frame_keys_[id];
    if (o.word == k.word && o.space == k.space && o.caller == k.caller) return i;
  }
}

std::uint32_t RepeatCache::word_frame(std::uint32_t space, std::uint64_t word, bool caller) const {
  if (slots_.empty()) return kNone;
  return slots_[word_slot({word, space, caller ? 1u : 0u})];
}

std::uint32_t RepeatCache::keep_word_frame(std::uint32_t space, std::uint64_t word, bool caller,
                                           const ResolvedFrame& f) {
  if (2 * (frames_.size() + 1) > slots_.size()) {
    // At most half full: probes stay short.
    slots_.assign(slots_.empty() ? 1024 : 2 * slots_.size(), kNone);
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(slots_.size()));
    for (std::uint32_t id = 0; id < frame_keys_.size(); ++id) slots_[word_slot(frame_keys_[id])] = id;
  }
  const WordKey k{word, space, caller ? 1u : 0u};
  std::uint32_t& slot = slots_[word_slot(k)];
  if (slot == kNone) {
    slot = static_cast<std::uint32_t>(frames_.size());
    frames_.push_back(f);
    frame_keys_.push_back(k);
  }
  return slot;
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

void RepeatCache::copy_frames(std::span<const std::uint32_t> indexes, std::vector<ResolvedFrame>& out) const {
  out.resize(indexes.size());
  for (std::size_t i = 0; i < indexes.size(); ++i) out[i] = frames_[indexes[i]];
}

std::uint64_t RepeatCache::remember(std::uint64_t key, std::uint32_t pid, const Sample& smp,
                                    std::span<const std::uint32_t> indexes) {
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
                static_cast<std::uint32_t>(indexes.size()),
                pid,
                it->second};
  it->second = static_cast<std::uint32_t>(entries_.size());
  words_.insert(words_.end(), smp.callchain_data, smp.callchain_data + 8 * smp.callchain_nr);
  refs_.insert(refs_.end(), indexes.begin(), indexes.end());
  entries_.push_back(e);
  return e.id;
}

void RepeatCache::clear() {
  words_.clear();
  refs_.clear();
  frames_.clear();
  frame_keys_.clear();
  slots_.clear();
  entries_.clear();
  newest_.clear();
  ++generation_;
}

}  // namespace sframe::perf::detail
