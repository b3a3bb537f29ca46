// `sframe gen` and the DWARF half of `sframe verify`.
#pragma once

#include <cstdint>
#include <string>

#include "render.hpp"
#include "sframe/elf.hpp"
#include "sframe/section.hpp"

namespace sframe::tools {

struct GenOptions {
  int version = 3;
  std::string output;          // raw section file; empty: none
  std::string elf_output;      // copy of the input with .sframe added; empty: none
  bool in_place = false;        // the --elf copy replaces FILE (atomically)
  std::string address;         // section address; empty: the file's .sframe address, else 0
  bool json = false;
};

/// `sframe gen FILE`: SFrame from the file's .eh_frame. Returns the exit status.
int run_gen(const std::string& path, const GenOptions& opt);

/// The DWARF half of `sframe verify` for one file.
struct DwarfVerdict {
  /// The comparison failed: rules disagree, the CFI could not be read on a
  /// file that has it, or no PC was compared where both sides have some.
  bool failed = false;
  /// "DWARF: N functions, M PCs, K mismatches" or "DWARF: not compared: REASON".
  std::string summary;
  /// Text lines for after the verdict line: mismatches, missing ranges.
  std::string details;
  /// Why it failed, in words (empty unless `failed`).
  std::string error;
};

/// Compares `s` with the DWARF CFI of `file` (for a relocatable object: its
/// ElfFile::relocated_copy()) and fills j["dwarf"].
DwarfVerdict verify_against_dwarf(const elf::ElfFile& file, const Section& s, Json& j);

}  // namespace sframe::tools
