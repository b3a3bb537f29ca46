// SPDX-License-Identifier: MIT
// libFuzzer target: DWARF CFI -> SFrame (sframe::cfi) on an ELF file image.
// Reading the CFI fails only with its documented errors; every row lies in
// its FDE, in order; and what generate() emits (v3 and v2) is a model the encoder accepts and whose encoding passes
// validate(kStrict) and decodes back to the model (check_encode.hpp). With
// the recorder built: `sframe record`'s table of the file (its rows taken
// from the translator) has the layout of record_abi.h: a directory whose
// entries do not decrease and stay in the table, each page's rows starting
// at 0 in increasing order inside the page, never across a block, then
// only padding to the block's end.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "check_encode.hpp"
#include "memfd.hpp"
#include "sframe/cfi/cfi.hpp"
#ifdef SFRAMEPP_FUZZ_RECORD_TABLES
#include "tables.hpp"
#endif

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

#ifdef SFRAMEPP_FUZZ_RECORD_TABLES
  {
    record::TableStats st;
    const record::ModuleTable t = record::build_module_table(*file, st);
    const auto blocks = t.blocks();
    if (!blocks.empty()) {
      constexpr std::uint32_t kRows = SFRAME_RECORD_BLOCK_ROWS, kDir = SFRAME_RECORD_DIR_PAGES;
      const std::uint64_t slots = std::uint64_t{blocks.size()} * kRows;
      const std::uint32_t dir_blocks = blocks[0].dir[0] / kRows;
      SFRAME_FUZZ_CHECK(dir_blocks > 0 && dir_blocks < blocks.size() && blocks[0].dir[0] % kRows == 0);
      std::uint32_t prev = blocks[0].dir[0];
      for (std::uint64_t e = 0; e < std::uint64_t{dir_blocks} * kDir; ++e) {
        const std::uint32_t lo = blocks[e / kDir].dir[e % kDir], hi = blocks[e / kDir].dir[e % kDir + 1];
        SFRAME_FUZZ_CHECK(lo >= prev && hi >= lo && hi <= slots);
        prev = lo;
        if (hi == lo) continue;
        SFRAME_FUZZ_CHECK(lo / kRows == (hi - 1) / kRows);  // one block
        // Then padding rows to the block's end, if the next page's rows
        // did not fit in it (all of the range for a page without rules
        // before such a page: record_abi.h, walk.h).
        std::uint32_t last = 0;
        bool padding = false;
        for (std::uint32_t r = lo; r < hi; ++r) {
          const std::uint16_t start = blocks[r / kRows].rows[r % kRows].start;
          if (start == SFRAME_RECORD_ROW_PAD) {
            padding = true;
            continue;
          }
          SFRAME_FUZZ_CHECK(!padding && (r == lo ? start == 0 : start > last));
          SFRAME_FUZZ_CHECK(start < (1u << SFRAME_RECORD_PAGE_SHIFT));
          last = start;
        }
        SFRAME_FUZZ_CHECK(!padding || hi % kRows == 0);
      }
      SFRAME_FUZZ_CHECK(st.modules == 1 && st.pages > 0 && st.table_bytes == blocks.size_bytes());
    }
  }
#endif

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
