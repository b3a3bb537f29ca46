// SPDX-License-Identifier: MIT
// sframepp: encoding SFrame sections (versions 2 and 3) from a model.
#pragma once
// Library: libsframepp-format (sframepp::format). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "sframe/format/consumers.hpp"
#include "sframe/format/detail/row_shape.hpp"
#include "sframe/format/detail/scratch.hpp"
#include "sframe/format/section.hpp"

namespace sframe {

/// From `start_offset` on (bytes from the function start; for PC-mask FDEs,
/// from the start of each repeated block), `row` applies.
struct RowSpec {
  std::uint32_t start_offset = 0;
  FrameRow row;
  friend bool operator==(const RowSpec&, const RowSpec&) = default;
};

/// One function of the model (what an FDE and its FREs describe).
struct FunctionSpec {
  /// Absolute start PC and size in bytes.
  std::uint64_t start_pc = 0;
  std::uint32_t size = 0;
  PcType pc_type = PcType::kInc;
  /// kFlex is v3 only.
  FdeType fde_type = FdeType::kDefault;
  /// Repetition block size for PcType::kMask (e.g. 16 for x86-64 PLT entries).
  std::uint8_t rep_size = 0;
  /// v3 signal-frame bit.
  bool signal = false;
  PauthKey pauth_key = PauthKey::kA;
  /// Rows by increasing start_offset.
  std::vector<RowSpec> rows;

  /// Layout kept from a decoded section (used by Layout::kPreserve only): the
  /// FRE type, each FRE's data-word size and count (the raw view: a count
  /// above what the rules need keeps an RA/FP the header gives as explicit
  /// words, or a padding word, spec §3.1, v3 §3.2), and where the FREs sat in
  /// the FRE sub-section.
  FreType fre_type = FreType::kAddr1;
  std::vector<std::uint8_t> dataword_sizes;
  std::vector<std::uint8_t> dataword_counts;
  std::uint32_t fre_offset = 0;

  friend bool operator==(const FunctionSpec&, const FunctionSpec&) = default;
};

/// The shape every function must have to become an FDE with its FREs, as
/// validate(kStrict) requires of them (spec v2 §2.3, v3 §2.3-2.4): a PC-mask
/// function has a repetition block size other than 0; its range
/// [start_pc, start_pc + size) does not wrap around the address space; row
/// start offsets strictly increase and lie inside the function (inside the
/// block, for PC-mask), except one row at offset 0 of a zero-size function.
/// `index` is the function's position, named in the error. SectionEncoder
/// and RowIndex::Builder both check with it. Errors:
/// EncodeErrc::kNotRepresentable with the value at fault (block size, start
/// PC or row start offset), the function index and, for a row, its index.
Expected<void> check_function_shape(const FunctionSpec& f, std::uint32_t index) noexcept;

/// check_function_shape() without the rows (f.rows is not read), for rows
/// held apart from the FunctionSpec (RowIndex::Builder's in-place rows),
/// each then checked by check_row_start().
Expected<void> check_function_outline(const FunctionSpec& f, std::uint32_t index) noexcept;

/// check_function_shape()'s rule for one row: row `k` of function `index`,
/// whose rows must lie below `limit` (detail::row_limit()), starts at offset
/// `start`, after a row at `prev` when k > 0. Errors as
/// check_function_shape()'s for a row.
Expected<void> check_row_start(std::uint64_t limit, std::uint32_t index, std::uint32_t k, std::uint32_t start,
                               std::uint32_t prev) noexcept;

/// A whole section to encode.
struct SectionSpec {
  Version version = Version::kV3;
  Abi abi = Abi::kAmd64Little;
  bool big_endian = false;
  /// Header fixed offsets (AMD64: RA at CFA - 8). 0 = not fixed.
  std::int8_t cfa_fixed_fp_offset = 0;
  std::int8_t cfa_fixed_ra_offset = 0;
  /// Address the section will be loaded at (start fields are PC-relative).
  std::uint64_t section_address = 0;
  std::vector<FunctionSpec> functions;
  /// Layout::kPreserve only: the header flags to write.
  std::uint8_t flags = 0;

  friend bool operator==(const SectionSpec&, const SectionSpec&) = default;
};

enum class Layout : std::uint8_t {
  /// Smallest encoding: the smallest FRE type per function and data-word size
  /// per FRE, rows identical to the previous one dropped, FDEs sorted by start
  /// PC (SFRAME_F_FDE_SORTED), start fields PC-relative
  /// (SFRAME_F_FDE_FUNC_START_PCREL, errata 1 for v2).
  kOptimize,
  /// Keeps what the model records of a decoded section: FDE order, FRE type
  /// per function, data-word size per FRE, FRE sub-section order, every row,
  /// and the header flags. encode(to_spec(s), kPreserve) reproduces sections
  /// made by GNU as/ld byte for byte (up to trailing padding).
  kPreserve,
};

/// Size optimizations beyond what Layout::kOptimize always does (the
/// narrowest encodings: the smallest FRE type per function (spec §2.3
/// fre_type) and data-word size per FRE (§2.4.1 fre_dataword_size), rows
/// identical to the previous one dropped). Each changes only how the rows
/// are stored, never which row a lookup of any PC finds; kPreserve ignores
/// them. size_options_for() gives what a set of consumers accepts.
struct SizeOptions {
  /// A function whose rows are all one row equal to the last row of the
  /// function added just before it, and which starts exactly where that one
  /// ends (no gap a lookup would then wrongly cover), with the same PC type
  /// (PC-increment), FDE type, PAuth key and signal bit, extends that
  /// function's FDE instead of getting its own (runs of leaf functions).
  bool merge_adjacent = false;
  /// A PC-increment function whose rows repeat with a fixed period P <= 255
  /// bytes (stubs, PLT-like runs) becomes one PC-mask FDE with rep_size P
  /// and the rows of one period (spec §2.3.1, SFRAME_FDE_PCTYPE_MASK).
  bool pc_mask = false;
  /// Functions whose FRE bytes (v3: with the 5-byte FDE attribute; v2: and
  /// the same FRE type) are identical share one copy: their FDEs hold the
  /// same sfdi_func_start_fre_off (spec v3 §2.3 calls it an offset to the
  /// function's data; it neither requires nor forbids sharing).
  /// sfh_num_fres and sfh_fre_len then count each stored block once, as
  /// validate(kStrict) checks. Not for libsframe reading the section in the
  /// foreign byte order (docs/consumers.md, libsframe.foreign-lengths).
  bool share_fre_blocks = false;
  /// A PC-increment function that starts exactly where the FDE before it
  /// ends (no gap), with the same FDE type, PAuth key and signal bit, and
  /// rows from offset 0, joins that FDE even when its rows differ: its rows
  /// become FREs at their offsets from the FDE's start (the first dropped
  /// when equal to the FDE's last row), saving an FDE entry (v3: 16 bytes
  /// and the 5-byte attribute; v2: 20 bytes). Done only when the joined FDE
  /// is smaller than the two apart (a wider FRE start-address type, spec
  /// §2.3 fre_type, costs a byte or two per FRE of the joined FDE), and only
  /// up to `coalesce_max_fres` FREs per FDE (0: no limit but the format's,
  /// 65535 in v3): the consumers find a PC's FRE by a linear walk of its
  /// FDE's FREs, so a longer FDE costs lookup time (docs/consumers.md,
  /// "Smaller sections"). A lookup of any PC finds the row it found before,
  /// but FDEs no longer match functions one to one (merge_adjacent does the
  /// same for functions that add no row).
  /// PC-mask functions (spec §2.3.1, SFRAME_FDE_PCTYPE_MASK) take part too:
  /// one that starts where a PC-increment FDE ends joins it as the rows its
  /// period gives over its whole size (same cost test and cap; GNU ld's
  /// x86-64 PLT0, PLTn and .plt.got become one FDE for a short PLT), and a
  /// function that starts where a PC-mask FDE ends, each of whose PCs reads
  /// the row that FDE's period gives there, extends it (its size grows).
  bool coalesce_adjacent = false;
  std::uint16_t coalesce_max_fres = 0;

  /// Every optimization on.
  static constexpr SizeOptions all() { return {true, true, true, true, kDefaultCoalesceMaxFres}; }
  /// The FRE limit of coalesce_adjacent that --optimize-size uses: without
  /// one, the FDEs of a file with many touching functions (python3.11) join
  /// into long runs that a consumer's linear FRE search reads through on
  /// every lookup; this limit keeps most of the bytes the unlimited joining
  /// saves at a lookup cost near the plain section's (figures:
  /// docs/benchmarks.md, bench/size_bench.sh; docs/consumers.md).
  static constexpr std::uint16_t kDefaultCoalesceMaxFres = 16;
  friend bool operator==(const SizeOptions&, const SizeOptions&) = default;
};

/// The size optimizations that every consumer in `consumers` accepts for a
/// section of version `v` in byte order `big_endian` (docs/consumers.md,
/// "Smaller sections"): merging adjacent FDEs (identical rows), coalescing
/// adjacent FDEs (different rows, at most kDefaultCoalesceMaxFres FREs per
/// joined FDE), PC-mask FDEs and the narrowest encodings for all; FRE-block sharing unless libsframe is listed and reads
/// the section in the foreign byte order (its flip walks each FDE's FREs and
/// requires them to fit in sfh_fre_len; sframepp judges "foreign" against
/// this machine, as check_consumer() does). The kernel and glibc read FREs by
/// offset, and libsframe in native order copies sfh_fre_len bytes and reads
/// each FDE's FREs at its offset, so sharing is invisible to them.
SizeOptions size_options_for(std::span<const Consumer> consumers, Version v, bool big_endian);

/// Encodes a section one function at a time: each function's FREs are
/// written as it is added and only a 32-byte record is kept per function, so
/// memory is the output's size, not the model's (a whole SectionSpec of a
/// large library holds ~45 bytes per row). encode() is this over a model.
///
/// FDEs come out sorted by start PC (kOptimize; kPreserve: in the order
/// added); FREs in the order the functions were added (kPreserve: by each
/// function's recorded fre_offset). Adding functions by increasing start PC
/// therefore gives FREs in FDE order, as GNU ld writes them.
class SectionEncoder {
 public:
  /// `header`: version, ABI, byte order, fixed offsets, section address and
  /// (kPreserve) flags; its `functions` are not used.
  explicit SectionEncoder(const SectionSpec& header, Layout layout = Layout::kOptimize);
  /// Also applies `size` (kOptimize only; kPreserve ignores it). With
  /// merge_adjacent or coalesce_adjacent, a function may extend the FDE of
  /// the one added just before it, so size() counts FDEs, not functions
  /// added. Joining is greedy (each function joins when that is smaller at
  /// that point), which can take a block that later functions would have
  /// shared: with share_fre_blocks too, the section is also encoded without
  /// joining (twice the output's memory) and finish() returns the smaller.
  SectionEncoder(const SectionSpec& header, Layout layout, SizeOptions size);

  /// Capacity for `functions` functions and `fre_bytes` bytes of FREs: a
  /// generous guess costs address space only, never touched memory.
  void reserve(std::size_t functions, std::size_t fre_bytes);

  /// Encodes `f`'s FREs. Errors as encode(), with `fde` the number of
  /// functions added before `f` and `fre` the row index in `f`. The
  /// accessor add() below over `f.rows`.
  Expected<void> add(const FunctionSpec& f) {
    return add(
        f, f.rows.size(), [&](std::size_t k) { return f.rows[k].start_offset; },
        [&](std::size_t k) -> const FrameRow& { return f.rows[k].row; });
  }
  /// add() of `shape` with its rows held elsewhere (shape.rows is not
  /// read): `count` rows, row k starting `start_of(k)` bytes into the
  /// function (std::uint32_t) with the rules `row_of(k)` (const FrameRow&,
  /// which must stay valid until add() returns). Same checks, errors and
  /// result as add() of a copy with those rows: the CFI translator's rows
  /// go in without being copied into RowSpecs (as RowIndex::Builder's
  /// accessor add(), lookup.hpp). Only merge_adjacent, pc_mask and
  /// coalesce_adjacent, which look at a function's rows as a whole, copy
  /// them (into a buffer reused between calls).
  template <class StartOf, class RowOf>
  Expected<void> add(const FunctionSpec& shape, std::size_t count, StartOf start_of, RowOf row_of) {
    return add(shape, count, start_of, row_of, [](std::size_t) { return std::uint32_t{0}; });
  }
  /// The same with `tag_of(k)` (std::uint32_t) for row k: rows with the
  /// same nonzero tag, in any add() to this encoder, must be equal (as
  /// cfi::Row::translation promises within one read, so one read may feed
  /// an encoder, not two). The encoder then reuses a tagged row's FRE
  /// (kOptimize) and knows two rows in a row with one tag equal without
  /// comparing their rules; 0: no tag. Same result as without tags.
  template <class StartOf, class RowOf, class TagOf>
  Expected<void> add(const FunctionSpec& shape, std::size_t count, StartOf start_of, RowOf row_of, TagOf tag_of) {
    if (auto ok = open_function(shape, count); !ok) return ok;
    if (whole_rows()) {
      whole_.rows.clear();
      for (std::size_t k = 0; k < count; ++k) whole_.rows.push_back(RowSpec{start_of(k), row_of(k)});
      return add_whole(shape);
    }
    const std::uint64_t limit = detail::row_limit(shape.pc_type, shape.size, shape.rep_size);
    std::uint32_t prev = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const std::uint32_t start = start_of(k);
      if (!detail::row_start_fits(limit, k, start, prev)) return row_error(k, start);
      prev = start;
    }
    begin_rows(rows_);
    for (std::size_t k = 0; k < count; ++k) {
      const FrameRow& row = row_of(k);
      const std::uint32_t tag = tag_of(k);
      // Most rows end here (a row equal to the one before, or a tagged
      // row's FRE kept), inline; put_row() encodes the others.
      if (put_known_row(shape, start_of(k), row, tag)) continue;
      if (auto ok = put_row(shape, static_cast<std::uint32_t>(k), start_of(k), row, tag, true); !ok) return ok;
    }
    if (auto ok = end_rows(shape); !ok) return ok;
    return add_encoded(shape);
  }

  /// FDEs so far (functions added, less those merge_adjacent or
  /// coalesce_adjacent joined to the FDE before them).
  std::size_t size() const { return fdes_.size() + (pending_ ? 1 : 0); }

  /// FDEs in the section the last finish() returned (with coalesce_adjacent
  /// and share_fre_blocks, finish() may keep the section without joining).
  std::size_t finished_fdes() const { return finished_fdes_; }

  /// The section: header, FDE sub-section, FRE sub-section. Leaves the
  /// encoder empty. Errors as encode() (sizes beyond the 32-bit fields, v2
  /// start PCs out of range).
  Expected<std::vector<std::byte>> finish();

 private:
  // One FRE before it is written: start offset, the info byte's base-register
  // and mangled-RA bits, the data-word size in bytes (1, 2, 4) and the words.
  struct Row {
    std::uint32_t start;
    std::uint8_t info_base_mangled;
    std::uint8_t word_size;
    std::uint8_t num_words;
    std::int64_t words[6];
  };
  // What the FDE entry needs once the FREs are written.
  struct FdeRecord {
    std::uint64_t start_pc;
    std::uint32_t size;
    std::uint32_t fre_begin;  // in fres_
    std::uint32_t num_fres;
    std::uint32_t recorded_fre_offset;  // kPreserve: FunctionSpec::fre_offset
    std::uint8_t info;                  // FRE type, PC type, PAuth key (v2 layout)
    FdeType fde_type;
    std::uint8_t rep_size;
    bool signal;
    std::uint32_t fre_bytes;  // length of the FRE block (v3: with the attribute)
  };
  // add()'s checks of `shape`, all but its rows' start offsets, in the
  // order add() has always made them (header, function count, FLEX in v2,
  // enum fields, outline); `count`: its rows.
  Expected<void> open_function(const FunctionSpec& shape, std::size_t count);
  // check_row_start()'s error for row `k` of the function being added.
  Expected<void> row_error(std::size_t k, std::uint32_t start) const;
  // A size technique that looks at a function's rows as a whole is on.
  bool whole_rows() const { return size_.merge_adjacent || size_.pc_mask || size_.coalesce_adjacent; }
  // add() of `shape` with the rows in whole_.rows (start offsets not yet
  // checked), for the size techniques.
  Expected<void> add_whole(const FunctionSpec& shape);
  // Row encoding, one row at a time: begin_rows(out), put_row() for each
  // row k of `f` in order, end_rows(f) leaves `out` holding the FREs (the
  // smallest data-word size per FRE or the recorded one, kPreserve; a row
  // equal to the one before dropped, kOptimize). Errors as add()'s for a
  // row, in the order add() gives them (a rule before a size). `tag`: as
  // add()'s tag_of, 0 for none; `checked`: put_known_row() ran for this
  // row and returned false.
  void begin_rows(std::vector<Row>& out);
  Expected<void> put_row(const FunctionSpec& f, std::uint32_t k, std::uint32_t start, const FrameRow& row,
                         std::uint32_t tag = 0, bool checked = false);
  Expected<void> end_rows(const FunctionSpec& f);
  // put_row()'s first steps: true when `row` needs no encoding, being
  // equal to the row before (dropped) or tagged with a kept FRE (appended
  // at `start`); else (always for kPreserve) put_row() must encode it,
  // told by its `checked` that this ran. Either way `row` becomes the row
  // before.
  bool put_known_row(const FunctionSpec& f, std::uint32_t start, const FrameRow& row, std::uint32_t tag) {
    const FrameRow* prev = prev_row_;
    const std::uint32_t prev_tag = prev_tag_;
    prev_row_ = &row;
    prev_tag_ = tag;
    if (layout_ == Layout::kPreserve) return false;
    if (prev && ((tag != 0 && tag == prev_tag) || row == *prev)) return true;
    if (tag == 0 || tag_slots_.empty()) return false;
    const TagSlot& slot = tag_slots_[tag & (kTagSlots - 1)];
    if (slot.tag != tag || slot.fde_type != f.fde_type) return false;
    // Rows past out_count_ stay from earlier functions and are overwritten.
    std::vector<Row>& out = *out_rows_;
    if (out_count_ == out.size()) out.emplace_back();
    Row& r = out[out_count_++];
    r = slot.fre;
    r.start = start;
    return true;
  }
  // begin_rows() .. end_rows() over `spec` into `out`.
  Expected<void> encode_rows(const FunctionSpec& f, const std::vector<RowSpec>& spec, std::vector<Row>& out);
  // The end of add() without a size technique: the pending FDE flushed,
  // `f` (its FREs in rows_) pending in its place.
  Expected<void> add_encoded(const FunctionSpec& f);
  // merge_adjacent: true if `f` (whose rows passed add()'s checks) only
  // extends the pending FDE.
  bool extends_last(const FunctionSpec& f) const;
  // coalesce_adjacent: true if `f`, with `rows` encoded as PC-increment rows
  // from its start, may join the pending FDE and the result is smaller than
  // the pending FDE and `f`'s own FDE (`own_rows` under `own_pc_type` and
  // `own_rep_size`: a PC-mask FDE's period) apart.
  bool coalesces(const FunctionSpec& f, const std::vector<Row>& rows, bool first_repeats,
                 std::span<const Row> own_rows, PcType own_pc_type, std::uint8_t own_rep_size) const;
  // coalesce_adjacent: true if each PC of a function of `size` bytes that
  // starts where the pending PC-mask FDE ends, with PC-increment `f_rows`,
  // reads the row that FDE's period gives there (it then extends the FDE).
  bool continues_period(std::uint32_t size, std::span<const Row> f_rows) const;
  // coalesce_adjacent: the most FREs a joined FDE may have.
  std::uint64_t coalesce_limit() const;
  // Writes the pending FDE's FREs (or points at an identical stored block)
  // and records its FDE.
  Expected<void> flush();
  // share_fre_blocks: the offset of an identical earlier block, if any.
  std::optional<std::uint32_t> find_block(const std::byte* at, std::uint32_t len, std::uint8_t info) const;
  // The FRE block of `rows` with start addresses of the FRE type in `info`
  // (v3: after the attribute, from `rec`'s fields), written at `out`, which
  // has room for it; returns its length.
  std::size_t write_block(std::span<const Row> rows, const FdeRecord& rec, std::uint8_t info, std::byte* out) const;

  SectionSpec header_;
  Layout layout_;
  SizeOptions size_;
  // FDE records, transient: ScratchAllocator (own mappings, huge pages
  // when large). The FRE bytes become the section itself: finish() moves
  // them up to make room for the header and FDEs in front, in place.
  std::vector<FdeRecord, detail::ScratchAllocator<FdeRecord>> fdes_;
  std::vector<std::byte> fres_;
  // FREs stored (a shared block once): sfh_num_fres.
  std::uint64_t stored_fres_ = 0;
  // The last FDE, kept apart until the next function shows whether it
  // extends it (merge_adjacent, coalesce_adjacent): its record (fre_begin,
  // num_fres and fre_bytes are set by flush()), its FRE type in kPreserve,
  // and its rows.
  bool pending_ = false;
  FdeRecord pending_rec_{};
  PcType pending_pc_type_ = PcType::kInc;
  FreType pending_fre_type_ = FreType::kAddr1;
  std::vector<Row> pending_rows_;
  // Functions added (errors name them by this index).
  std::uint32_t added_ = 0;
  std::size_t finished_fdes_ = 0;
  // coalesce_adjacent with share_fre_blocks: the same functions encoded
  // without joining; finish() returns the smaller section.
  std::unique_ptr<SectionEncoder> alt_;
  // merge_adjacent, coalesce_adjacent: the last row of the pending FDE, and
  // whether it is a PC-increment FDE with rows another function may extend.
  FrameRow last_row_;
  bool last_mergeable_ = false;
  // share_fre_blocks: hash of each stored block -> index in fdes_ of its first user.
  std::unordered_multimap<std::size_t, std::uint32_t> blocks_;
  // Scratch reused by every add() (no allocation per function once warm):
  // the function's FREs, those of a PC-mask function unrolled, and its
  // rows as a whole for the size techniques.
  std::vector<Row> rows_, inc_rows_;
  FunctionSpec whole_;
  std::vector<RowSpec> distinct_, period_rows_, unrolled_;
  // The row encoding begin_rows() started: its output, FREs so far, the
  // last row put, and the first data-word size error (reported by
  // end_rows(), after the errors of later rows' rules).
  std::vector<Row>* out_rows_ = nullptr;
  std::size_t out_count_ = 0;
  const FrameRow* prev_row_ = nullptr;
  std::uint32_t prev_tag_ = 0;
  // Tagged rows' FREs (start aside) by tag, direct-mapped: the CFI
  // reader's tags count up, and a function's rows are mostly recent ones.
  // Keyed by the FDE type too (a FLEX FDE's FRE says the same rules in
  // other words). Allocated at the first tagged row, once.
  struct TagSlot {
    std::uint32_t tag = 0;
    FdeType fde_type = FdeType::kDefault;
    Row fre{};
  };
  static constexpr std::size_t kTagSlots = 1024;
  std::vector<TagSlot> tag_slots_;
  bool size_error_ = false;
  std::uint32_t size_error_fre_ = 0;
  std::uint64_t size_error_value_ = 0;
};

/// Encodes `spec` as an SFrame v2 or v3 section in its byte order, applying
/// `size` (kOptimize only).
/// Everything written passes validate(kStrict) (kPreserve: but for what the
/// recorded header flags claim), also with shared FRE blocks.
/// Errors: kBadVersion (v1 is not written), kNotRepresentable (a rule the
/// version, ABI or FDE type cannot express, an offset out of range, a start
/// PC too far for v2's 32-bit field (PC-relative to the field, so kOptimize's
/// sorting can move a function that fit where a decoded v2 section had it to
/// a slot where it does not; `offset` is then the field's), unsorted rows, a row starting outside
/// its function (or PC-mask block), a PC-mask function with a zero block
/// size, a function whose end overflows the address space, an enum field or
/// recorded data-word size out of range), with `fde`/`fre` naming the
/// function and row.
Expected<std::vector<std::byte>> encode(const SectionSpec& spec, Layout layout = Layout::kOptimize);
Expected<std::vector<std::byte>> encode(const SectionSpec& spec, Layout layout, SizeOptions size);

/// Combines sections as a linker does: every function of every input (start
/// PCs are absolute, so each input's own section address is already applied)
/// into one model for a section at `output_address`, in `version`. Inputs
/// must share the ABI and the header's fixed offsets. Functions are sorted by
/// start PC; two that overlap are an error (kFdesOverlap, with `fde` the
/// index of the later one in the sorted output and `value` its start PC).
/// Errors also: kBadAbi (inputs disagree), kNotRepresentable (fixed offsets
/// disagree, or FLEX functions for a v2 output).
Expected<SectionSpec> merge(const std::vector<SectionSpec>& inputs, std::uint64_t output_address,
                            Version version = Version::kV3);

/// The model of a decoded section (which must pass validate(kLenient)):
/// every FDE with every row, and the layout details kPreserve needs.
Expected<SectionSpec> to_spec(const Section& s);

/// to_spec()'s model of one FDE `f` of `s` (every row, and the layout
/// details kPreserve needs) into `out`, whose vectors are reused (cleared
/// first). Errors: the decoding error of an FRE or its row (FormatErrc).
Expected<void> to_function_spec(const Section& s, const Fde& f, FunctionSpec& out);

}  // namespace sframe

#pragma GCC visibility pop
