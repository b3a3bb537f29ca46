// SPDX-License-Identifier: MIT
// A sampled profile, aggregated once for every writer of it (pprof's
// profile.proto, the SVG flame graph): samples come in as neutral records
// (pid, tid, comm, event, period, frames with runtime PCs and the mapping
// each lies in), so any source of stacks (`sframe perf script`, a live
// recorder) feeds the same writers.
//
// Stacks are kept as a call tree keyed by frame (one node per distinct
// prefix of a distinct stack, per pid/tid/comm/event), so memory grows with
// the distinct frames and stack prefixes seen, not with the sample count.
#pragma once

#include <bit>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sframe::tools::profile {

/// A process's mapping of a file.
struct Mapping {
  /// Runtime range [start, end); both zero when unknown (the writers then
  /// span the PCs seen in it).
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  /// File offset mapped at `start`.
  std::uint64_t pgoff = 0;
  /// The file's path ("[kernel.kallsyms]", "[vdso]" for those); empty: none.
  std::string_view file;
  /// Build-id, lowercase hex; empty: unknown.
  std::string_view build_id;
};

/// One frame of a sample.
struct Frame {
  /// Runtime address: the sampled PC, or return address - 1 for callers.
  std::uint64_t pc = 0;
  /// Demangled function name; empty: unknown to pprof and the SVG
  /// ("[unknown]" in folded stacks only when data() is null: an empty name
  /// given stays empty there).
  std::string_view function;
  /// Source file of the function; empty: unknown.
  std::string_view source;
  Mapping mapping;
};

/// One sample.
struct Sample {
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::string_view comm;
  /// The event's name (e.g. "cpu-clock").
  std::string_view event;
  /// The event count this sample stands for (nanoseconds for the clock
  /// events).
  std::uint64_t period = 0;
  /// Innermost first.
  std::span<const Frame> frames;
};

/// An index of call tree nodes by their 64-bit key (parent << 32 | name or
/// frame): open addressing with linear probing in one array of node ids,
/// where a node-based map's allocation per entry costs more than the rest
/// of the aggregation. Slots hold only the ids (4 bytes, not a 16-byte key
/// and value): a node's key is read back from the node through `key_of`,
/// which keeps a million-stack profile's index a quarter of the size.
class FlatIndex {
 public:
  /// The id whose key_of() is `key`, inserting `id` (not yet known to
  /// key_of) if there is none; true when inserted.
  template <class KeyOf>
  std::pair<std::uint32_t, bool> try_emplace(std::uint64_t key, std::uint32_t id, KeyOf key_of) {
    // At most half full: probes stay short.
    if (2 * (size_ + 1) > slots_.size()) grow(key_of);
    std::uint32_t& slot = find(key, key_of);
    if (slot != kEmpty) return {slot, false};
    slot = id;
    ++size_;
    return {id, true};
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint32_t kEmpty = 0xffffffffu;
  template <class KeyOf>
  std::uint32_t& find(std::uint64_t key, KeyOf& key_of) {
    const std::size_t mask = slots_.size() - 1;
    // Fibonacci hashing: the product's top bits depend on every bit of the
    // key (parent and child alike).
    for (std::size_t i = (key * 0x9e3779b97f4a7c15ull) >> shift_;; i = (i + 1) & mask)
      if (slots_[i] == kEmpty || key_of(slots_[i]) == key) return slots_[i];
  }
  template <class KeyOf>
  void grow(KeyOf& key_of) {
    std::vector<std::uint32_t> old(slots_.empty() ? 64 : 2 * slots_.size(), kEmpty);
    old.swap(slots_);
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(slots_.size()));
    for (std::uint32_t id : old)
      if (id != kEmpty) find(key_of(id), key_of) = id;
  }
  std::vector<std::uint32_t> slots_;
  std::size_t size_ = 0;
  unsigned shift_ = 64;  // 64 - log2(slots_.size())
};

/// `s` with every byte that does not begin a well-formed UTF-8 sequence
/// (overlong forms, surrogates and code points past U+10FFFF included)
/// replaced by U+FFFD: pprof's strings are protobuf `string`s, which its
/// readers require to be UTF-8, and an SVG document must be UTF-8.
std::string valid_utf8(std::string_view s);

/// The aggregated samples. The string views of the Frames given to add()
/// (function, source, mapping file and build-id) must stay valid and
/// unchanged while the Profile lives: frames are recognized by the identity
/// of those strings (comm and event are copied).
class Profile {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  struct MappingEntry {
    std::uint64_t start, end, pgoff;
    std::uint32_t file, build_id;  // string ids
  };
  struct FrameEntry {
    std::uint64_t pc;
    std::uint32_t function, source;  // string ids (0: unknown)
    std::uint32_t mapping;           // index into mappings(), kNone: none
    /// The function name as given (Frame::function), bytes not made UTF-8.
    std::string_view raw_function;
  };
  /// The pid, tid, comm and event a tree of stacks belongs to.
  struct Root {
    std::uint32_t pid, tid;
    std::uint32_t comm, event;  // string ids
    /// Index of the comm as given (bytes not made UTF-8) in raw_comms().
    std::uint32_t raw_comm;
  };
  /// A call tree node: a frame called from `parent` (kNone: `frame` is the
  /// index of a Root), with the samples and period whose stack ends here.
  struct Node {
    std::uint32_t parent;
    std::uint32_t frame;
    std::uint64_t count = 0;
    std::uint64_t period = 0;
  };

  Profile();
  /// Declares an event, so that a profile without samples of it still has
  /// its sample types (events also come in with the samples).
  void add_event(std::string_view event);
  /// Adds one sample: its stack's path from the root of (pid, tid, comm,
  /// event), one count and its period at the innermost frame's node.
  /// Returns that node's id (an index into nodes()). Throws
  /// std::length_error past 2^32 distinct frames or stack prefixes.
  std::uint32_t add(const Sample& s);
  /// The id of frame `f` in this profile, added if new: what add() files
  /// a frame under, for add_frames().
  std::uint32_t frame(const Frame& f) { return frame_id(f, frame_key(f)); }
  /// As add(), with the sample's `n` frames given by their frame() ids
  /// (s.frames is not read): `frame_id(i)` returns frame i's, i = 0 the
  /// innermost, and is asked outermost first, once per frame, after the
  /// sample's comm and event are taken (so that ids and strings are made in
  /// add()'s order). For a caller that keeps the ids of the frames it sees
  /// again. Same errors.
  template <class FrameId>
  std::uint32_t add_frames(const Sample& s, std::size_t n, FrameId&& frame_id) {
    std::uint32_t node = begin_sample(s, n);
    bool shared = true;  // the frames so far are the last sample's
    for (std::size_t depth = 0; depth < n; ++depth) {
      const std::uint32_t fid = frame_id(n - 1 - depth);
      if (shared && depth < last_depth_ && last_frames_[depth] == fid) {
        node = last_nodes_[depth];
        continue;
      }
      shared = false;
      node = child(node, fid, depth);
    }
    nodes_[node].count += 1;
    nodes_[node].period += s.period;
    return node;
  }
  /// Adds a sample equal to an earlier one but for its period (pid, tid,
  /// comm, event and frames alike): one count and `period` at `node`, the
  /// id add() returned for it.
  void add_again(std::uint32_t node, std::uint64_t period);

  /// Strings by id (valid_utf8() of those given); id 0 is "".
  const std::deque<std::string>& strings() const { return strings_; }
  const std::vector<MappingEntry>& mappings() const { return mappings_; }
  const std::vector<FrameEntry>& frames() const { return frames_; }
  const std::vector<Root>& roots() const { return roots_; }
  /// Parents come before their children.
  const std::vector<Node>& nodes() const { return nodes_; }
  /// Event names (string ids) in order of first appearance.
  const std::vector<std::uint32_t>& events() const { return events_; }
  /// Index of `event` (a string id) in events().
  std::size_t event_index(std::uint32_t event) const;
  /// The comms as given, by Root::raw_comm.
  const std::deque<std::string>& raw_comms() const { return raw_comms_; }
  std::uint64_t samples() const { return samples_; }

  /// The id of `s`, added if new.
  std::uint32_t intern(std::string_view s);

 private:
  struct FrameKey {
    std::uint64_t pc, start, end, pgoff;
    const char* p[4];
    std::size_t n[4];
    bool operator==(const FrameKey&) const = default;
  };
  static_assert(std::has_unique_object_representations_v<FrameKey>, "FrameKey is compared bytewise");
  struct FrameKeyHash {
    std::size_t operator()(const FrameKey& k) const noexcept;
  };
  struct RootHash {
    std::size_t operator()(const Root& r) const noexcept;
  };
  struct RootEq {
    bool operator()(const Root& a, const Root& b) const noexcept {
      return a.pid == b.pid && a.tid == b.tid && a.raw_comm == b.raw_comm && a.event == b.event;
    }
  };
  static FrameKey frame_key(const Frame& f);
  static bool same_key(const FrameKey& a, const FrameKey& b);
  // add()'s steps: the sample's root node (counted), made the last sample's
  // root; the node of frame `fid` under `node`, made the last sample's at
  // `depth`.
  std::uint32_t begin_sample(const Sample& s, std::size_t frames);
  std::uint32_t child(std::uint32_t node, std::uint32_t fid, std::size_t depth);
  /// The id of frame `f` (whose key is `key`), added if new.
  std::uint32_t frame_id(const Frame& f, const FrameKey& key);
  // The comm's or the event's ids: samples come in runs of one thread and
  // one event, so the last one given is compared before any hashing.
  struct LastName {
    std::string name;
    std::uint32_t id = kNone, raw = kNone;
  };
  LastName last_comm_, last_event_;
  std::deque<std::string> raw_comms_;
  std::unordered_map<std::string_view, std::uint32_t> raw_comm_ids_;

  std::deque<std::string> strings_;
  std::unordered_map<std::string_view, std::uint32_t> string_ids_;
  std::vector<MappingEntry> mappings_;
  std::unordered_map<FrameKey, std::uint32_t, FrameKeyHash> mapping_ids_;
  std::vector<FrameEntry> frames_;
  // The frames' keys (by frame id) and an open-addressed index of them:
  // slots hold frame ids (kNone: empty), hashed on the PC, the name and the
  // mapping's start, compared on the whole key. A profile repeats a few
  // thousand frames; a node-based map's hashing of the whole key cost more
  // than the rest of the aggregation.
  std::vector<FrameKey> frame_keys_;
  std::vector<std::uint32_t> frame_slots_;
  unsigned frame_shift_ = 64;  // 64 - log2(frame_slots_.size())
  std::size_t frame_slot(const FrameKey& k) const;
  std::vector<Root> roots_;
  std::unordered_map<Root, std::uint32_t, RootHash, RootEq> root_nodes_;
  std::vector<Node> nodes_;
  FlatIndex children_;  // parent << 32 | frame -> node
  static std::uint64_t key_of(const Node& n) { return std::uint64_t{n.parent} << 32 | n.frame; }
  std::vector<std::uint32_t> events_;
  std::uint64_t samples_ = 0;
  // The previous sample's root node, frame ids and nodes (outermost
  // first): consecutive samples of a thread mostly share their outer
  // frames, whose nodes are then taken from here, not looked up again.
  std::uint32_t last_root_ = kNone;
  std::size_t last_depth_ = 0;  // the valid entries of the two below
  std::vector<std::uint32_t> last_frames_;
  std::vector<std::uint32_t> last_nodes_;
};

/// A node of a Profile's call trees re-keyed by name (name_tree()).
struct NameNode {
  std::uint32_t parent;  // Profile::kNone: node 0, above the roots
  std::uint32_t name;    // the caller's name id
  /// The callees: the first, and each one's next (Profile::kNone: no
  /// more), the last made first.
  std::uint32_t first_child = Profile::kNone;
  std::uint32_t next_sibling = Profile::kNone;
  /// The samples whose stack ends here.
  std::uint64_t count = 0;
};

/// `p`'s call trees merged by name, as the flame graph and folded stacks
/// show them: a node per distinct path of names (a root's name, then its
/// frames' names outermost first), node 0 above the roots, parents before
/// children. Names are ids the caller gives: `root_name[i]` for
/// p.roots()[i], `frame_name[i]` for p.frames()[i]; equal ids merge.
std::vector<NameNode> name_tree(const Profile& p, std::span<const std::uint32_t> root_name,
                                std::span<const std::uint32_t> frame_name);

/// The profile's stacks collapsed as stackcollapse-perf.pl writes them
/// (`sframe perf script --folded`): "COMM;OUTER;...;INNER COUNT" per line,
/// the comm's spaces as '_', ';' in function names as ':', "[unknown]" for
/// a frame without name, names and comm as given (not made UTF-8); pid,
/// tid, event and PCs merged; lines in byte order.
std::string folded_stacks(const Profile& p);

}  // namespace sframe::tools::profile
