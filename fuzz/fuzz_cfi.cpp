// SPDX-License-Identifier: MIT
// libFuzzer target: DWARF CFI -> SFrame (sframe::cfi) on an ELF file image.
// Reading the CFI fails only with its documented errors; every row lies in
// its FDE, in order; and what generate() emits (v3 and v2) is a model the encoder accepts and whose encoding passes
// validate(kStrict) and decodes back to the model (check_encode.hpp).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "check_encode.hpp"
#include "memfd.hpp"
#include "sframe/cfi/cfi.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sframe;
  const std::string& path = fuzz::memfd_path(data, size);
  auto file = elf::ElfFile::open(path);
  if (!file) {
    SFRAME_FUZZ_CHECK(file.error().code() == ElfErrc::kElfError);
    return 0;
  }
  std::uint64_t functions = 0;
  const Expected<void> walked = cfi::for_each_function(*file, [&](const cfi::Function& f) {
    ++functions;
    std::uint64_t at = f.start;
    for (const cfi::Row& r : f.rows) {
      SFRAME_FUZZ_CHECK(r.start >= at && r.start < r.end && r.end <= f.end);
      at = r.end;
      fuzz::g_sink = static_cast<std::uint64_t>(r.reason) + r.flex;
    }
  });
  if (!walked) {
    const ErrorCode c = walked.error().code();
    SFRAME_FUZZ_CHECK(c == ElfErrc::kElfError || c == EncodeErrc::kNotRepresentable || c == CfiErrc::kBadCfi);
  }

  // The section address as `sframe gen` picks it: the existing SFrame
  // section's, else 0.
  std::uint64_t address = 0;
  if (auto existing = file->sframe_section(); existing) address = existing->address;
  // Both versions: our reader is linear in the CFI bytes.
  for (const Version v : {Version::kV3, Version::kV2}) {
    const Expected<cfi::Generated> g = cfi::generate(*file, v, address);
    if (!g) {
      const ErrorCode c = g.error().code();
      SFRAME_FUZZ_CHECK(c == ElfErrc::kElfError || c == EncodeErrc::kNotRepresentable || c == CfiErrc::kBadCfi);
      continue;
    }
    SFRAME_FUZZ_CHECK(g->spec.version == v && g->spec.section_address == address);
    SFRAME_FUZZ_CHECK(g->spec.functions.size() + g->skipped.size() >= g->functions_in);
    if (v == Version::kV2)
      for (const FunctionSpec& f : g->spec.functions) SFRAME_FUZZ_CHECK(f.fde_type == FdeType::kDefault);
    if (!fuzz::check_encode(g->spec, Layout::kOptimize)) {
      const Error e = encode(g->spec).error();
      std::fprintf(stderr, "sframe fuzz: generate()'s v%d model is rejected: %s value 0x%llx fde %u fre %u\n",
                   static_cast<int>(v), std::string(code_name(e.code())).c_str(),
                   static_cast<unsigned long long>(e.value), e.fde, e.fre);
      SFRAME_FUZZ_CHECK(false && "generate() emits models the encoder accepts");
    }
  }
  return 0;
}
