// SPDX-License-Identifier: MIT
// sframepp: what each SFrame consumer accepts.
//
// The specification says what a section may hold; the programs that read
// SFrame accept less, and each a different subset. check_consumer() applies
// one consumer's acceptance rules to a parsed section and names every rule
// the section breaks. The rules and their sources (the kernel's v14 series,
// glibc's sframe-read.c, GNU libsframe 2.47's sframe.c, as collected in
// shared/reference/sframe-consumers.md) are listed in docs/consumers.md.
// No I/O: facts about the ELF file the section came from (its PT_LOAD
// segments) are passed in by the caller.
#pragma once
// Library: libsframepp-format (sframepp::format). Exported from it, which builds with hidden
// visibility.
#pragma GCC visibility push(default)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sframe/format/section.hpp"

namespace sframe {

/// A program that reads SFrame sections.
enum class Consumer : std::uint8_t {
  /// Linux kernel user unwinder (unwind_user/sframe, v14 series, not merged).
  kKernel,
  /// glibc 2.42/2.43 backtrace() (sysdeps/generic/sframe-read.c).
  kGlibc,
  /// GNU libsframe 2.47 (sframe_decode, used by objdump, gdb, ld).
  kLibsframe,
};

/// Every consumer, in the order they are reported.
inline constexpr Consumer kAllConsumers[] = {Consumer::kKernel, Consumer::kGlibc, Consumer::kLibsframe};

/// "kernel", "glibc", "libsframe".
std::string_view consumer_name(Consumer c) noexcept;
/// The consumer called `name` (as consumer_name() spells it), if any.
std::optional<Consumer> consumer_from_name(std::string_view name) noexcept;
/// True if `c` reads sections of version `v` at all: the kernel reads v3
/// only, glibc v2 only, libsframe v2 and v3.
bool reads_version(Consumer c, Version v) noexcept;

// X-macro: (enumerator, consumer, rule id, words, needs the file).
// The words finish "CONSUMER: ..."; docs/consumers.md gives each rule's
// source. Rules that need the file are skipped for a raw section.
#define SFRAME_CONSUMER_RULES(X)                                                                                   \
  X(kKernelNativeOrder, kKernel, "kernel.native-byte-order", "section is not in the machine's byte order", false)  \
  X(kKernelVersion, kKernel, "kernel.version", "version is not 3", false)                                           \
  X(kKernelFlagSorted, kKernel, "kernel.flag-fde-sorted", "flags lack SFRAME_F_FDE_SORTED", false)                 \
  X(kKernelFlagPcrel, kKernel, "kernel.flag-pcrel", "flags lack SFRAME_F_FDE_FUNC_START_PCREL", false)             \
  X(kKernelAuxHeader, kKernel, "kernel.auxhdr-len", "auxhdr_len is not 0", false)                                   \
  X(kKernelNoFdes, kKernel, "kernel.num-fdes", "the section has no FDE (num_fdes is 0)", false)                     \
  X(kKernelNoFres, kKernel, "kernel.num-fres", "the section has no FRE (num_fres is 0)", false)                     \
  X(kKernelLayout, kKernel, "kernel.subsections",                                                                   \
    "sub-sections not in order inside the section (header end < section end, FDE end <= FRE start)", false)        \
  X(kKernelFdeOrder, kKernel, "kernel.fde-order", "FDE start addresses are not strictly increasing", false)        \
  X(kKernelFdeAttr, kKernel, "kernel.fde-attr", "FDE attribute not inside the FRE sub-section", false)             \
  X(kKernelFreType, kKernel, "kernel.fre-type", "FRE type code is greater than 2", false)                           \
  X(kKernelFreBounds, kKernel, "kernel.fre-bounds", "FRE runs past the end of the FRE sub-section", false)         \
  X(kKernelDatawordSize, kKernel, "kernel.dataword-size", "FRE data-word size code is greater than 2", false)      \
  X(kKernelFreOrder, kKernel, "kernel.fre-order", "FRE start offsets are not strictly increasing", false)           \
  X(kKernelFreRange, kKernel, "kernel.fre-range", "FRE start offset is greater than the function size", false)     \
  X(kKernelDatawords, kKernel, "kernel.datawords",                                                                  \
    "data words not CFA, then RA (only when the fixed RA offset is 0), then FP: a word is left over", false)        \
  X(kKernelRepSize, kKernel, "kernel.rep-size", "PC-mask FDE with rep_size 0", false)                               \
  X(kKernelFlex, kKernel, "kernel.flex", "FDE type or FLEX data words not in the supported form", false)           \
  X(kKernelFdeOutsideText, kKernel, "kernel.fde-in-exec-load", "FDE start is not inside an executable PT_LOAD",    \
    true)                                                                                                           \
  X(kKernelFdesSpanSegments, kKernel, "kernel.fdes-one-exec-load",                                                  \
    "FDEs lie in more than one executable PT_LOAD (registration is per PF_X segment)", true)                         \
  X(kKernelSectionSegment, kKernel, "kernel.section-in-one-load", "the .sframe range is not inside one PT_LOAD",   \
    true)                                                                                                           \
  X(kGlibcNativeOrder, kGlibc, "glibc.native-byte-order", "section is not in the machine's byte order", false)     \
  X(kGlibcVersion, kGlibc, "glibc.version", "version is not 2", false)                                              \
  X(kGlibcFlags, kGlibc, "glibc.flags",                                                                             \
    "flags other than SFRAME_F_FDE_SORTED, SFRAME_F_FRAME_POINTER, SFRAME_F_FDE_FUNC_START_PCREL", false)           \
  X(kGlibcFlagSorted, kGlibc, "glibc.flag-fde-sorted", "flags lack SFRAME_F_FDE_SORTED (its lookup refuses)",      \
    false)                                                                                                          \
  X(kGlibcFdeOffset, kGlibc, "glibc.fdes-after-header",                                                             \
    "sfh_fdeoff is not 0 (glibc reads the FDEs right after the header)", false)                                     \
  X(kGlibcFreOffset, kGlibc, "glibc.fres-after-fdes",                                                               \
    "sfh_freoff is not num_fdes * 20 (glibc reads the FREs right after the FDEs)", false)                          \
  X(kGlibcFreType, kGlibc, "glibc.fre-type", "FRE type code is greater than 2", false)                             \
  X(kGlibcDatawords, kGlibc, "glibc.datawords", "FRE data-word size code 3, or more than 3 data words", false)     \
  X(kGlibcRepSize, kGlibc, "glibc.rep-size", "PC-mask FDE with rep_size 0 (glibc divides by it)", false)           \
  X(kGlibcBounds, kGlibc, "glibc.bounds",                                                                           \
    "FDE data or FRE outside the FRE sub-section (glibc reads by offset, unchecked)", false)                       \
  X(kLibsframeVersion, kLibsframe, "libsframe.version", "version 1 (libsframe reads 2 and 3)", false)             \
  X(kLibsframeFlags, kLibsframe, "libsframe.flags", "flags not defined for the version", false)                    \
  X(kLibsframeOffsets, kLibsframe, "libsframe.offsets", "sfh_fdeoff is greater than sfh_freoff", false)             \
  X(kLibsframeFreType, kLibsframe, "libsframe.fre-type", "FRE type code is greater than 2 (libsframe asserts)",   \
    false)                                                                                                          \
  X(kLibsframeBounds, kLibsframe, "libsframe.bounds", "FDE attribute or FRE outside the FRE sub-section", false)  \
  X(kLibsframeForeignAux, kLibsframe, "libsframe.foreign-auxhdr",                                                   \
    "foreign byte order with an auxiliary header (libsframe cannot flip it)", false)                               \
  X(kLibsframeForeignCount, kLibsframe, "libsframe.foreign-fre-count",                                              \
    "foreign byte order: the FDEs' FRE counts do not add up to sfh_num_fres", false)                               \
  X(kLibsframeForeignLength, kLibsframe, "libsframe.foreign-lengths",                                               \
    "foreign byte order: the FDEs' FREs (shared blocks counted again) exceed sfh_fre_len", false)                 \
  X(kLibsframeForeignPadding, kLibsframe, "libsframe.foreign-padding",                                              \
    "foreign byte order: non-zero bytes after the FREs walked", false)

/// One acceptance rule of one consumer.
enum class ConsumerRule : std::uint8_t {
#define SFRAME_X(name, consumer, id, words, file) name,
  SFRAME_CONSUMER_RULES(SFRAME_X)
#undef SFRAME_X
};

/// What a rule is: its consumer, stable id ("kernel.flag-pcrel"), words,
/// and whether checking it needs the ELF file's program headers.
struct ConsumerRuleInfo {
  ConsumerRule rule;
  Consumer consumer;
  std::string_view id;
  std::string_view words;
  bool needs_file;
};

/// Every rule, in declaration order (grouped by consumer).
std::span<const ConsumerRuleInfo> consumer_rules() noexcept;
/// The description of `r`.
const ConsumerRuleInfo& rule_info(ConsumerRule r) noexcept;

/// A loadable segment of the ELF file (PT_LOAD), in link-time addresses.
struct LoadSegment {
  std::uint64_t vaddr = 0;
  /// p_memsz, bytes.
  std::uint64_t memsz = 0;
  /// PF_X is set.
  bool executable = false;
};

/// Facts about the file that the section alone does not tell.
struct FileFacts {
  std::vector<LoadSegment> loads;
  /// Address and size in bytes of the SFrame section as mapped (sh_addr and
  /// sh_size, or PT_GNU_SFRAME's p_vaddr and p_memsz).
  std::uint64_t section_address = 0;
  std::uint64_t section_size = 0;
};

/// One broken rule: which, where (byte offset in the section; FDE and FRE
/// index when it belongs to one, else kNoIndex) and the offending value.
struct ConsumerViolation {
  ConsumerRule rule{};
  std::uint64_t offset = 0;
  std::uint64_t value = 0;
  std::uint32_t fde = kNoIndex;
  std::uint32_t fre = kNoIndex;
  friend bool operator==(const ConsumerViolation&, const ConsumerViolation&) = default;
};

/// The verdict of one consumer on one section.
struct ConsumerReport {
  Consumer consumer{};
  /// Broken rules, in section order per rule group; at most `max_violations`.
  std::vector<ConsumerViolation> violations;
  /// Violations found beyond `max_violations` (counted, not kept).
  std::uint64_t omitted = 0;
  /// The rules needing the file were checked (false when no FileFacts).
  bool file_rules_checked = false;
  /// False if the walk stopped at its work bound (FRE blocks shared by
  /// very many FDEs): later FDEs were not checked.
  bool complete = true;

  /// No rule broken (and the whole section checked).
  bool accepted() const noexcept { return violations.empty() && omitted == 0 && complete; }
};

/// Applies consumer `c`'s acceptance rules to `s` (docs/consumers.md).
/// `s` only needs to have parsed: every read is bounds-checked, so the
/// section need not have passed validate(). `file` (optional) enables the
/// rules that need the ELF file's segments; without it they are skipped and
/// the report says so. All rules are checked, also when the consumer would
/// stop at the first (the version rule does not hide the others).
/// Time: linear in the section size; FRE decodes are bounded by twice the
/// section size in bytes plus the FDE count (complete = false beyond).
/// Memory: the violations kept (at most `max_violations`).
ConsumerReport check_consumer(const Section& s, Consumer c, const FileFacts* file = nullptr,
                              std::size_t max_violations = 64);

}  // namespace sframe
#pragma GCC visibility pop
