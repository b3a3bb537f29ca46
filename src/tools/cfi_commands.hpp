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
  std::string address;         // section address; empty: the file's .sframe address, else 0
  bool json = false;
};

/// `sframe gen FILE`: SFrame from the file's .eh_frame. Returns the exit status.
int run_gen(const std::string& path, const GenOptions& opt);

/// Compares `s` with the DWARF CFI of `file`; prints (or fills `j` with) the
/// mismatches and the missing ranges. Returns false when rules disagree.
/// Sets `has_cfi` false when the file has no usable .eh_frame_hdr.
bool verify_against_dwarf(const elf::ElfFile& file, const Section& s, bool json, Json& j, bool& has_cfi);

}  // namespace sframe::tools
