// SPDX-License-Identifier: MIT
// sframepp (private): the text of /proc/kallsyms (or perf's cached copy of
// it) as function symbols, for naming the kernel frames of `sframe perf
// script`. Separate from the session so that the fuzz_perf target feeds it
// hostile text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace sframe::perf::detail {

/// One function symbol of kallsyms: its address and where its name lies in
/// the text.
struct KSym {
  std::uint64_t address;
  std::uint32_t name_at;
  std::uint16_t name_len;  // kallsyms names are at most KSYM_NAME_LEN (512)
  char type;
};

/// Appends the function symbols ('t', 'T', 'w', 'W') of kallsyms `text`
/// ("ADDRESS TYPE NAME[\tMODULE]\n" lines, the kernel's
/// kernel/kallsyms.c s_show()) to `out`, sorted by address (stable: aliases
/// keep their order). Lines that do not parse, and addresses of 0 (hidden by
/// kptr_restrict), are skipped. Every KSym's name lies inside `text`, which
/// must be at most 4 GiB. Linear in the text (one sort when it is not in
/// address order).
void parse_kallsyms(std::string_view text, std::vector<KSym>& out);

/// The address of the first function symbol of kallsyms `text` named
/// exactly `name` (not a module's), as parse_kallsyms() reads its line; 0
/// when there is none, or its address is hidden (kptr_restrict). Finds the
/// line by its name (perf's reference symbol "_text" is among the first
/// thousand lines).
std::uint64_t kallsyms_address(std::string_view text, std::string_view name);

/// kallsyms text looked up by address, as parse_kallsyms() would list it.
/// Its longest run of leading lines that have the 64-bit layout ("%016lx
/// %c %s") and come in address order (the kernel's s_show() lists the core
/// kernel so) is indexed by every 16th line start (one pass, no per-symbol
/// memory), and a lookup parses the lines near its address; the lines after
/// it (loaded modules' symbols, listed module by module, and BPF programs')
/// are parsed and sorted. `text` must outlive the index.
class KallsymsIndex {
 public:
  explicit KallsymsIndex(std::string_view text);
  /// The function symbols at the greatest address at or below `addr`
  /// (aliases, in file order) into `group`, and in `next` the address of
  /// the first function symbol above `addr` (0: none). False when no
  /// function symbol lies at or below `addr`.
  bool lookup(std::uint64_t addr, std::vector<KSym>& group, std::uint64_t& next) const;

  /// The index as bytes, to keep beside the text it indexes (a cache in
  /// the host's byte order: offsets into the text, no copy of it).
  std::vector<std::byte> save() const;
  /// The index saved by save() from `text`, read back over `text` instead
  /// of scanning it: nullopt when `bytes` are not such an index, or are of
  /// a text of another size, or any of their line starts, offsets, name
  /// ranges or orders does not hold in `text` (a stale or damaged cache:
  /// the caller builds the index). What is checked keeps every lookup
  /// inside `text`; a file saved from another text of the same size whose
  /// sampled lines happen to check out gives that text's answers.
  static std::optional<KallsymsIndex> load(std::string_view text, std::span<const std::byte> bytes);

 private:
  KallsymsIndex() = default;
  bool lookup_sorted(std::uint64_t addr, std::vector<KSym>& group, std::uint64_t& next) const;

  std::string_view text_;
  std::size_t sorted_end_ = 0;  // the sorted run is text_[0, sorted_end_)
  std::vector<std::uint32_t> sparse_;
  std::vector<KSym> rest_;  // function symbols after the run, by address
};

}  // namespace sframe::perf::detail
