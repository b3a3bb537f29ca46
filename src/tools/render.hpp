// SPDX-License-Identifier: MIT
// Renderings of the decoded model shared by the text and JSON printers:
// rules in words, names of codes, and the `stat` and `lookup` models.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sframe/elf/elf.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"

namespace sframe::tools {

using Json = nlohmann::ordered_json;

/// "AMD64 little-endian", ...
std::string_view abi_name(Abi abi);
/// Flag names set in `flags` for `v` ("SFRAME_F_FDE_SORTED", ...); unknown
/// bits as "0x.." entries.
std::vector<std::string> flag_names(std::uint8_t flags, Version v);
/// "SP", "FP" for the ABI's stack/frame pointer, else "r<N>" (DWARF number).
std::string register_name(Abi abi, std::uint16_t regnum);

/// One FRE's rules in words: "CFA = SP + 16; RA at CFA - 8; FP unchanged".
std::string rules_in_words(const Section& s, const FrameRow& row);

/// Statistics of one SFrame section in its ELF file (`sframe stat`).
struct Stats {
  std::uint64_t sframe_bytes = 0;   // the section's size in the file
  std::uint64_t used_bytes = 0;     // bytes its header accounts for
  std::uint64_t eh_frame_bytes = 0;
  std::uint64_t eh_frame_hdr_bytes = 0;
  std::uint64_t text_bytes = 0;
  std::uint64_t text_covered = 0;   // bytes of .text inside some FDE
  std::uint64_t fres = 0;
  std::array<std::uint64_t, 3> fre_types{};       // FDEs per FRE type
  std::array<std::uint64_t, 2> pc_types{};        // FDEs per PC type
  std::array<std::uint64_t, 2> fde_types{};       // FDEs per FDE type
  std::uint64_t signal_fdes = 0;
  std::array<std::uint64_t, 3> dataword_sizes{};  // FREs per data-word size (1, 2, 4)
  std::array<std::uint64_t, 16> dataword_counts{};  // FREs per data-word count
  std::uint64_t mangled_ra_fres = 0;
};

/// Computes Stats; `sections` are the file's section headers.
Expected<Stats> compute_stats(const Section& s, const std::vector<elf::SectionHeader>& sections,
                              std::uint64_t sframe_file_size);

class JsonStream;

/// Writes the decoded section as `dump --json`'s `section` object (schema
/// in docs/json.md) to `out`, one FRE at a time. An FDE, FRE or row that
/// does not decode ends the arrays there and is returned (the object is
/// closed all the same); callers that validated the section get none.
Expected<void> write_section_json(JsonStream& out, const Section& s, std::string_view name);
/// JSON of a header / FDE / one FRE with its rules.
Json header_json(const Header& h);
Json fde_json(const Fde& f);
Json fre_json(const Section& s, const Fde& f, const Fre& fre, const FrameRow& row);
Json stats_json(const Section& s, const Stats& st);
/// JSON of an Error.
Json error_json(const Error& e);
/// One-line text of an Error.
std::string error_text(const Error& e);

/// An error from writing an output file: the system's words for errno
/// (e.g. "No space left on device") when the error carries one.
std::string write_error_text(const Error& e);
/// A JSON document as every command prints it: dump(indent), with bytes
/// that are not UTF-8 (a file or symbol name) written as U+FFFD rather than
/// thrown on. `indent`: spaces per level (2, but `gen` with several files 1).
std::string json_text(const Json& j, int indent = 2);
/// "0x..." for addresses (64-bit values exceed JSON's exact integer range).
std::string hex(std::uint64_t v);


}  // namespace sframe::tools
