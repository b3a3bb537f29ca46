// SPDX-License-Identifier: MIT
// Text rendering of a decoded SFrame section, byte-identical to
// `objdump --sframe`: GNU binutils 2.47 for v2/v3, 2.40 for v1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sframe/elf/elf.hpp"
#include "sframe/format/section.hpp"

namespace sframe::tools {

/// objdump's BFD target name for an ELF file, e.g. "elf64-x86-64".
std::string_view bfd_target_name(const elf::ElfInfo& info);

/// Appends "\nFILE:     file format TARGET\n\n".
void append_banner(std::string& out, std::string_view file, std::string_view target);

/// Appends the dump of `s`, starting with "Contents of the SFrame section
/// NAME:". The section must have passed validate(kLenient); an FDE or FRE that
/// still fails to decode returns that error, with the text so far appended.
Expected<void> append_section(std::string& out, const Section& s, std::string_view name);

}  // namespace sframe::tools
