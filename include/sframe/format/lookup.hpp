// SPDX-License-Identifier: MIT
// sframepp: finding the FDE, FRE and rules that cover a PC.
#pragma once
// Library: libsframepp-format (sframepp::format). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sframe/format/detail/row_shape.hpp"
#include "sframe/format/detail/scratch.hpp"
#include "sframe/format/section.hpp"

namespace sframe {

struct FunctionSpec;

/// What covers a PC: its function, its frame row entry, and the rules there.
struct Match {
  Fde fde;
  Fre fre;
  FrameRow row;
};

/// Finds the FDE covering absolute `pc` (start_pc <= pc < start_pc + size)
/// and, within it, the last FRE whose start is <= the PC's offset. For PC-mask
/// FDEs (PLT stubs) the offset is taken modulo the repetition block size
/// (rep_size; v1 has none and uses 16, the x86-64 PLT entry size).
/// Binary search over the FDE table when SFRAME_F_FDE_SORTED is set, a linear
/// scan otherwise. Allocates nothing; async-signal-safe.
/// Errors: LookupErrc::kPcNotCovered, LookupErrc::kPcBeforeFirstFre, or a
/// decoding error of the FDE/FRE (FormatErrc).
Expected<Match> find(const Section& s, std::uint64_t pc) noexcept;

/// Looks up `pc` inside one FDE known to cover it (see find()).
Expected<Match> find_in_fde(const Section& s, const Fde& fde, std::uint64_t pc) noexcept;

/// An accelerator for find() on one section: a table of FDE start PCs sorted
/// by address, plus a bucket table mapping a PC to the first candidate FDE in
/// O(1). Built once (allocating about 12 bytes per FDE, never more, whatever
/// the address span); lookups allocate nothing and are async-signal-safe.
/// The Section's bytes must outlive the index.
class FdeIndex {
 public:
  /// Builds the index. FDEs that fail to decode are reported as an error.
  static Expected<FdeIndex> build(const Section& s);

  /// Same contract as sframe::find().
  Expected<Match> find(std::uint64_t pc) const noexcept;

  const Section& section() const noexcept { return s_; }

 private:
  struct Entry {
    std::uint64_t start;  // absolute start PC
    std::uint32_t size;   // function size
    std::uint32_t fde;    // FDE index in the section
  };
  Section s_;
  std::uint64_t lo_ = 0;          // lowest start PC
  unsigned shift_ = 0;            // bucket = (pc - lo_) >> shift_
  std::vector<Entry> entries_;    // sorted by start
  std::vector<std::uint32_t> bucket_;  // last entry starting at or before the bucket
};

/// What covers a PC, as RowIndex answers it: the rules and where they come
/// from, without the FDE and FRE themselves (decode them with
/// Section::fde(fde_index) and Section::fres() when needed).
struct RowMatch {
  std::uint32_t fde_index = 0;
  /// Index of the FRE within its FDE.
  std::uint32_t fre_index = 0;
  FrameRow row;
  /// v3 signal-frame bit of the FDE.
  bool signal = false;
  /// The FDE's type (v3 §2.4.1; always DEFAULT before v3): an unwinder
  /// needs it to read the row, and a lookup then reads no FDE.
  FdeType fde_type = FdeType::kDefault;
  friend bool operator==(const RowMatch&, const RowMatch&) = default;
};

/// A section compiled for lookups: every FRE start and function end of the
/// section in one sorted table of 8-byte boundaries (start, row), an O(1)
/// bucket table over it, and the section's distinct rows decoded once
/// (compiled code has a few hundred distinct rows for tens of thousands of
/// FREs). A lookup reads one bucket, usually one cache line of boundaries,
/// and one row from a small table: no FDE or FRE decoding, no allocation;
/// async-signal-safe.
///
/// Memory: 8 bytes per FRE and per function end (the boundary), 8 bytes
/// per FDE (its start, for find() to say where a row comes from), 4 bytes
/// per bucket (half to one bucket per boundary), about 44 bytes per
/// distinct row. The Section's bytes must outlive the index (PC-mask FDEs
/// and find()'s FRE index are read from them).
class RowIndex {
 public:
  /// Decodes every FDE, FRE and row of `s` once. Needs FDEs that do not
  /// overlap and FRE starts that do not decrease, as the spec requires
  /// (every section validate(kStrict) accepts qualifies) and PCs spanning
  /// less than 4 GiB. FREs starting at or past their function's end are
  /// ignored. Errors: any decoding error of an FDE, FRE or row;
  /// kFdesOverlap; kFreStartNotIncreasing; kNotRepresentable (span >= 4 GiB).
  static Expected<RowIndex> build(const Section& s);

  class Builder;

  /// The rules covering absolute `pc`; same coverage as sframe::find()
  /// (PC-mask FDEs included). Errors: LookupErrc::kPcNotCovered,
  /// LookupErrc::kPcBeforeFirstFre, or a decoding error of a PC-mask FDE's
  /// FREs (FormatErrc).
  Expected<RowMatch> find(std::uint64_t pc) const noexcept;

  /// find_row() for a PC in a PC-mask FDE: its row depends on the PC, so
  /// only find() answers.
  static constexpr std::uint32_t kUseFind = 0xffffffff;
  /// The distinct row covering absolute `pc`, as an index below
  /// num_rows() (row_at(), row_signal(), row_fde_type()), or kUseFind: the
  /// lookup of find() without where the row came from (one bucket, one
  /// cache line of boundaries). Same errors as find() (kPcNotCovered,
  /// kPcBeforeFirstFre with the FDE index).
  Expected<std::uint32_t> find_row(std::uint64_t pc) const noexcept;
  /// row_id(): no FDE covers the PC (find() says LookupErrc::kPcNotCovered).
  static constexpr std::uint32_t kNotCovered = 0xfffffffe;
  /// find_row() without building an Expected, for the cold step of a walk:
  /// the distinct row covering absolute `pc` (< num_rows()), kNotCovered,
  /// or kUseFind for anything else (a PC-mask FDE; a PC before its FDE's
  /// first FRE), which find_row()/find() then tell apart. Never fails.
  std::uint32_t row_id(std::uint64_t pc) const noexcept { return view().row_id(pc); }

 private:
  struct Entry;

 public:
  /// What row_id() reads, copied out of the index: a walk keeps the view of
  /// the module its last cold frame was in, so that the next frame's
  /// lookup starts from values in registers (no load of the index's
  /// vectors, no division for the number of rows). Valid while the index
  /// lives; async-signal-safe.
  class View {
   public:
    View() = default;
    /// RowIndex::row_id() of the index viewed (kNotCovered for an empty view).
    std::uint32_t row_id(std::uint64_t pc) const noexcept { return row_id_at(pc - lo_); }
    /// The lowest PC the view covers (row_id_at()'s offsets start there).
    std::uint64_t base() const noexcept { return lo_; }
    /// Bytes from base() that the view covers (0: none).
    std::uint64_t span() const noexcept { return span_; }
    /// row_id() of the PC at offset `off` from base() (modulo 2^64): for a
    /// walk that computes the offset its own way (see the in-process cold
    /// walk, which takes it from a return address in one step).
    std::uint32_t row_id_at(std::uint64_t off) const noexcept {
      // A PC below lo_ wraps to an offset above span_ (< 2^32).
      if (off >= span_) return kNotCovered;
      const std::uint32_t row = row_at_offset(static_cast<std::uint32_t>(off));
      if (row < num_rows_) {
        // num_rows_ <= kMaskFde (view()), so the row lies below the
        // markers: said here so that a caller's test of the answer for
        // kNotCovered and kUseFind folds away (a compare a walk's frame).
        if (row >= kMaskFde) __builtin_unreachable();
        return row;
      }
      return row == kGap ? kNotCovered : kUseFind;
    }

    /// The bucket holding offset `off` (< span()): for a walk that keeps
    /// data of its own per bucket beside the view (bucket_count() of them).
    std::size_t bucket_of(std::uint64_t off) const noexcept { return static_cast<std::size_t>(off >> shift_); }
    /// Number of buckets (0 for an empty view).
    std::size_t bucket_count() const noexcept { return span_ == 0 ? 0 : static_cast<std::size_t>(span_ >> shift_) + 1; }
    /// The row (or a marker: >= RowIndex::kUseFind - 2) of every offset in
    /// bucket `b` before bucket_second(b).
    std::uint32_t bucket_row(std::size_t b) const noexcept { return entries_[bucket_[b] & emask_].row; }
    /// Where the second boundary of bucket `b` starts (an offset; it may lie
    /// past the bucket).
    std::uint32_t bucket_second(std::size_t b) const noexcept { return entries_[(bucket_[b] & emask_) + 1].start; }

    /// This view for addresses `by` above the index's (a module's runtime
    /// PCs, `by` its load bias): row_id(pc + by) of the copy is row_id(pc)
    /// of this one (modulo 2^64, as the offset computation is).
    View rebased(std::uint64_t by) const noexcept {
      View v = *this;
      v.lo_ += by;
      return v;
    }

   private:
    friend class RowIndex;
    /// The boundary entry covering offset `o` from lo_ (< span_). Inline: a
    /// walk's cold step runs it for every frame.
    std::size_t boundary(std::uint32_t o) const noexcept {
      const std::size_t b = o >> shift_;
      const std::size_t e = bucket_[b] & emask_;
      const std::size_t last = bucket_[b + 1] & emask_;
      // The answer is e .. e+3; entry last+1 starts past this bucket, so
      // every comparison is safe (and the sentinels keep them in bounds).
      if (last - e <= kDirect) [[likely]]
        return e + std::size_t{entries_[e + 1].start <= o} + std::size_t{entries_[e + 2].start <= o} +
               std::size_t{entries_[e + 3].start <= o};
      return index_->clustered(o, e, last);
    }
    /// entries_[boundary(o)].row, the common case without a load that
    /// waits for the comparisons: the three candidate entries are read at
    /// once and the row picked from them (the entries are sorted, so the
    /// third starting at or before `o` implies the second does). A bucket
    /// with three boundaries after its first takes four candidates here
    /// too rather than the search out of line (a call into the library
    /// and a branchy upper_bound): the small functions of a dense code
    /// region (a push, a sub, a pop: three rows each) put them there on
    /// most cold walks. Four candidates for every bucket cost the common
    /// case (one or two boundaries) more instructions than they saved.
    /// Where `o` lies before the bucket's second boundary, the row comes
    /// from the bucket word itself (see bucket_): the CPU, predicting that
    /// branch, reads the rule without waiting for the entries.
    std::uint32_t row_at_offset(std::uint32_t o) const noexcept {
      const std::size_t b = o >> shift_;
      const std::uint32_t w = bucket_[b];
      const std::size_t e = w & emask_;
      const std::size_t last = bucket_[b + 1] & emask_;
      // Through one pointer: indexing entries_[e + 1] made GCC compute the
      // address in two dependent steps on every frame's chain.
      const Entry* const p = entries_ + e;
      if (last - e <= 2) [[likely]] {
        const auto r0 = static_cast<std::uint32_t>(std::uint64_t{w} >> ebits_);
        if (r0 != rnone_ && o < p[1].start) return r0;
        const Entry e0 = p[0], e1 = p[1], e2 = p[2];
        std::uint32_t row = e1.start <= o ? e1.row : e0.row;
        row = e2.start <= o ? e2.row : row;
        return row;
      }
      if (last - e == kDirect) {
        const Entry e1 = p[1], e2 = p[2], e3 = p[3];
        std::uint32_t row = e2.start <= o ? e2.row : e1.start <= o ? e1.row : p[0].row;
        return e3.start <= o ? e3.row : row;
      }
      if (last - e <= kCounted) {
        // kDirect + 1 .. kCounted boundaries after the first (a function
        // whose prologue and epilogue rows crowd one bucket; the bench's
        // `main`, taken on every cold walk that reaches it): counted here
        // without a branch rather than searched out of line, which cost a
        // call into the library and a branchy upper_bound. Every entry read
        // exists (e + kCounted <= last + kSentinels), and those past `last`
        // start after this bucket, so they add nothing to the count.
        std::size_t k = 0;
        for (std::size_t i = 1; i <= kCounted; ++i) k += std::size_t{p[i].start <= o};
        return p[k].row;
      }
      return entries_[index_->clustered(o, e, last)].row;
    }
    /// Boundaries past a bucket's first that boundary() and
    /// row_at_offset() take without a search (the index keeps as many
    /// sentinels after its last boundary: kSentinels).
    static constexpr std::size_t kDirect = 3;
    /// Boundaries past a bucket's first that row_at_offset() still counts
    /// inline (reading kCounted entries past the first, at most
    /// kCounted - kDirect - 1 of them among the sentinels).
    static constexpr std::size_t kCounted = 7;
    std::uint64_t lo_ = 0;
    std::uint64_t span_ = 0;  // 0: covers nothing
    const Entry* entries_ = nullptr;
    const std::uint32_t* bucket_ = nullptr;
    const RowIndex* index_ = nullptr;
    std::uint32_t num_rows_ = 0;
    unsigned shift_ = 0;
    std::uint32_t emask_ = 0xffffffff;
    unsigned ebits_ = 32;
    std::uint32_t rnone_ = 0;
  };
  View view() const noexcept {
    View v;
    v.lo_ = lo_;
    v.span_ = span_;
    v.entries_ = entries_.data();
    v.bucket_ = bucket_.data();
    v.index_ = this;
    // At most kMaskFde (row_id_at() relies on it): no index has that many
    // rows, and a row id past it would be answered kUseFind.
    v.num_rows_ = static_cast<std::uint32_t>(std::min<std::size_t>(rows_.size(), kMaskFde));
    v.shift_ = shift_;
    v.emask_ = emask_;
    v.ebits_ = ebits_;
    v.rnone_ = rnone_;
    return v;
  }
  /// Distinct row `id` (< num_rows()) as the section's decoder gives it.
  const FrameRow& row_at(std::uint32_t id) const noexcept { return rows_[id].row; }
  /// The v3 signal-frame bit and the FDE type of the FDEs row `id` comes
  /// from (rows are distinct in both).
  bool row_signal(std::uint32_t id) const noexcept { return rows_[id].signal; }
  FdeType row_fde_type(std::uint32_t id) const noexcept { return rows_[id].fde_type; }

  /// The section build() read; for an index a Builder made, the header-only
  /// section given to Builder::finish() (its ABI and fixed offsets).
  const Section& section() const noexcept { return s_; }
  /// Number of boundaries and of distinct rows (for memory accounting).
  std::size_t num_boundaries() const noexcept { return entries_.size(); }
  std::size_t num_rows() const noexcept { return rows_.size(); }

 private:
  /// One boundary: from `start` (bytes from lo_) up to the next boundary,
  /// `row` applies (or one of the k* markers below). 8 bytes, so a cache
  /// line holds eight. Where the row comes from is not kept per boundary
  /// (it was half the index): find() finds the FDE in fdes_ and the FRE
  /// by decoding that FDE's FREs.
  struct Entry {
    std::uint32_t start;
    std::uint32_t row;
  };
  /// An FDE with a range: its start (bytes from lo_) and index.
  struct FdeStart {
    std::uint32_t start;
    std::uint32_t fde;
  };
  static constexpr std::uint32_t kGap = 0xffffffff;
  static constexpr std::uint32_t kBeforeFirstFre = 0xfffffffe;
  static constexpr std::uint32_t kMaskFde = 0xfffffffd;
  struct RowInfo {
    FrameRow row;
    bool signal;
    FdeType fde_type;
  };
  /// The boundary entry covering offset `o` from lo_ (< span_).
  std::size_t boundary(std::uint32_t o) const noexcept { return view().boundary(o); }
  /// Entries after the last boundary (start UINT32_MAX, kGap), so that
  /// View's direct reads of e + 1 .. e + kDirect stay in bounds.
  static constexpr int kSentinels = static_cast<int>(View::kDirect);
  static_assert(View::kCounted - (View::kDirect + 1) <= View::kDirect, "row_at_offset() reads past the sentinels");
  /// boundary() where more than View::kDirect boundaries follow a
  /// bucket's first: a binary search of entries (e, last].
  std::size_t clustered(std::uint32_t o, std::size_t e, std::size_t last) const noexcept;
  void add(std::uint32_t start, std::uint32_t row) { entries_.push_back({start, row}); }
  /// The FDE whose range holds offset `o` from lo_, for an `o` inside one.
  std::uint32_t fde_at(std::uint32_t o) const noexcept;
  /// The bucket table over entries_ (sorted, every FDE added) and the
  /// sentinels: the step build() and Builder::finish() share.
  void finalize();
  /// find() of an index a Builder made, for a boundary entry `e` covering
  /// offset `o` (there is no encoded section to read FREs from).
  Expected<RowMatch> find_built(std::uint64_t pc, std::uint32_t o, std::size_t e) const noexcept;
  Section s_;
  std::uint64_t lo_ = 0;    // lowest function start
  std::uint64_t span_ = 0;  // bytes from lo_ to the highest function end
  unsigned shift_ = 0;      // bucket = (pc - lo_) >> shift_
  std::vector<Entry> entries_;
  std::vector<FdeStart> fdes_;   // by start
  /// Per bucket, one word: the low ebits_ bits (emask_) the last entry
  /// starting at or before the bucket, the bits above that entry's row
  /// where it is a row that fits them, else rnone_ (all ones). No word of
  /// its own for the row: the index stays its size, and a lookup reads the
  /// row of a PC before the bucket's second boundary from the word it
  /// reads anyway. Entries needing all 32 bits leave no bits (rnone_ 0,
  /// which the shift by 32 of a 64-bit word also gives).
  std::vector<std::uint32_t> bucket_;
  std::uint32_t emask_ = 0xffffffff;
  unsigned ebits_ = 32;
  std::uint32_t rnone_ = 0;
  std::vector<RowInfo> rows_;
  /// Builder-made indexes only: their PC-mask FDEs (kMaskFde boundaries),
  /// by start, and the rows of one period of each, which find() reads in
  /// place of the section's FREs.
  struct MaskFde {
    std::uint32_t start;  // bytes from lo_
    std::uint32_t fde;
    std::uint32_t first;  // first of its rows in mask_rows_
    std::uint32_t count;
    std::uint32_t rep_size;
  };
  struct MaskRow {
    std::uint32_t offset;  // within the period
    std::uint32_t row;     // rows_ index
  };
  bool from_rows_ = false;
  std::vector<MaskFde> masks_;
  std::vector<MaskRow> mask_rows_;
};

/// Builds a RowIndex from functions as the CFI translator gives them
/// (cfi::for_each_generated), with no encoded section: the rows are taken
/// as they are, not encoded and decoded again, and the index answers
/// find_row()/row_id()/row_at() exactly as RowIndex::build() does over the
/// section SectionEncoder (Layout::kOptimize, default SizeOptions) makes of
/// the same functions, and find() with the same FDE and FRE indexes (FDEs
/// by start PC; a row equal to the one before it is no new FRE, as the
/// encoder drops it). PC-mask FDEs (spec §2.3.1) keep one period of rows in
/// a side table. Functions may come in any order.
///
/// Memory while building: 8 bytes per row and 24 per function staged, then
/// the index's own (see RowIndex); the staging is freed by finish().
class RowIndex::Builder {
 public:
  Builder() = default;
  /// Adds one function. Errors: check_function_shape()'s (encode.hpp), as
  /// SectionEncoder::add() gives them; kNotRepresentable past 2^32
  /// functions or rows. Rules are not
  /// checked for SFrame encodability: the translator gives only rows an
  /// SFrame FRE can hold (the differential tests against libdw check it).
  Expected<void> add(const FunctionSpec& f);
  /// add() of `shape` with its rows held elsewhere (shape.rows is not
  /// read): `count` rows, row k starting `start_of(k)` bytes into the
  /// function (std::uint32_t) with the rules `row_of(k)` (const FrameRow&).
  /// Same checks, errors and result as add() of a copy with those rows: the
  /// CFI translator's rows go in without being copied into RowSpecs.
  template <class StartOf, class RowOf>
  Expected<void> add(const FunctionSpec& shape, std::size_t count, StartOf start_of, RowOf row_of) {
    return add(shape, count, start_of, row_of, [](std::size_t) { return std::uint32_t{0}; });
  }
  /// The same with `tag_of(k)` (std::uint32_t) for row k: rows with the same
  /// nonzero tag, in any add() to this builder, must be equal (as
  /// cfi::Row::translation promises within one read). The builder then
  /// finds a tagged row's id without hashing or comparing its rules; 0: no
  /// tag. Same result as without tags.
  template <class StartOf, class RowOf, class TagOf>
  Expected<void> add(const FunctionSpec& shape, std::size_t count, StartOf start_of, RowOf row_of, TagOf tag_of) {
    if (auto ok = open_function(shape, count); !ok) return ok;
    // Every row checked before any is staged: a function refused leaves
    // nothing behind (no distinct row of its own), as in the encoder.
    std::uint32_t prev_start = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const std::uint32_t start = start_of(k);
      if (!detail::row_start_fits(open_limit_, k, start, prev_start)) return row_error(k, start, prev_start);
      prev_start = start;
    }
    // A row equal to the one before (the same id: the function's signal bit
    // and type are the same for all its rows) is no FRE: the encoder drops
    // it. An untagged row equal to the one before is not looked up.
    const FrameRow* prev = nullptr;
    std::uint32_t prev_id = kNoId;
    for (std::size_t k = 0; k < count; ++k) {
      const FrameRow& row = row_of(k);
      const std::uint32_t tag = tag_of(k);
      const std::uint32_t id = tag != 0                  ? tagged_id(row, tag)
                               : prev && *prev == row ? prev_id
                                                      : id_of(row, open_signal_, open_type_);
      if (id != prev_id) stage(start_of(k), id);
      prev = &row;
      prev_id = id;
    }
    fns_.push_back(open_);
    return {};
  }
  /// Capacity for `functions` functions and `rows` rows (a guess; growth
  /// costs copies).
  void reserve(std::size_t functions, std::size_t rows);
  /// The index, with `header` (a section holding no FDE, e.g. an empty
  /// SectionEncoder's output) as its section(): it must outlive the index.
  /// Errors as build(): kFdesOverlap, kFuncRangeOverflow, kNotRepresentable
  /// (span >= 4 GiB). Leaves the builder empty.
  Expected<RowIndex> finish(const Section& header);

 private:
  struct Fn {
    std::uint64_t start;
    std::uint32_t size;
    std::uint32_t first;  // first of its rows in staged_
    std::uint32_t count;
    std::uint32_t rep_size;  // 0: PC-increment
  };
  std::uint32_t id_of(const FrameRow& row, bool signal, FdeType type);
  /// No row id (ids are below 2^32 - 1, the slots' empty mark).
  static constexpr std::uint32_t kNoId = 0xffffffff;
  /// id_of() of the open function's row tagged `tag` (nonzero), through the
  /// tag cache.
  std::uint32_t tagged_id(const FrameRow& row, std::uint32_t tag) {
    TagSlot& t = tag_slot(tag);
    if (t.tag != tag || t.signal != open_signal_ || t.type != open_type_)
      t = TagSlot{tag, id_of(row, open_signal_, open_type_), open_signal_, open_type_};
    return t.id;
  }
  /// add()'s checks of everything but the rows, and open_ set for them.
  Expected<void> open_function(const FunctionSpec& shape, std::size_t count);
  /// check_row_start()'s error (encode.hpp) for row k of the open function.
  Expected<void> row_error(std::size_t k, std::uint32_t start, std::uint32_t prev) const;
  /// Row `start` of the open function, with row id `id`, staged.
  void stage(std::uint32_t start, std::uint32_t id) {
    staged_.push_back({start, id});
    ++open_.count;
  }
  Fn open_{};  // the function add() is staging
  std::uint64_t open_limit_ = 0;  // detail::row_limit() of the open function
  bool open_signal_ = false;
  FdeType open_type_ = FdeType::kDefault;
  RowIndex ix_;
  // The staging lives only until finish(): its own pages (scratch.hpp).
  template <class T>
  using Scratch = std::vector<T, detail::ScratchAllocator<T>>;
  Scratch<Fn> fns_;
  Scratch<Entry> staged_;  // start: offset in the function or period
  struct Packed {
    std::uint64_t cfa, ra, fp, flags;
    friend bool operator==(const Packed&, const Packed&) = default;
  };
  Scratch<std::uint32_t> slots_;  // open addressing over ix_.rows_ (ids)
  Scratch<Packed> keys_;          // each row of ix_.rows_ packed
  std::uint32_t last_id_ = 0xffffffff;
  // Row ids by tag (add() with tag_of), direct-mapped: the translator's
  // tags count up, so the recent ones do not collide. The key includes the
  // function's signal bit and type, which the id does too.
  struct TagSlot {
    std::uint32_t tag = 0;
    std::uint32_t id = 0;
    bool signal = false;
    FdeType type = FdeType::kDefault;
  };
  static constexpr std::size_t kTagSlots = 1024;
  TagSlot& tag_slot(std::uint32_t tag) {
    if (tags_.empty()) tags_.resize(kTagSlots);
    return tags_[tag & (kTagSlots - 1)];
  }
  Scratch<TagSlot> tags_;
};

}  // namespace sframe

#pragma GCC visibility pop
