// SPDX-License-Identifier: MIT
// The C API of libsframepp-cfi (include/sframe/cfi/sframe_cfi.h): SFrame generated
// from an ELF file's DWARF CFI, as `sframe gen` does (cfi::for_each_generated
// streamed into a SectionEncoder).
#include <cstdlib>
#include <cstring>
#include <optional>

#include "../capi/capi_internal.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"

using namespace sframe;
using sframe::capi::fail;
using sframe::capi::guarded;

extern "C" sframe_status sframe_cfi_generate(const char* path, uint32_t version, uint64_t section_address,
                                             void** bytes, size_t* size, sframe_generate_stats* stats,
                                             sframe_error* err) {
  return guarded(err, [&] {
    if (!path || !bytes || !size || (version != 2 && version != 3)) return fail(SFRAME_E_INVALID_ARGUMENT, err);
    *bytes = nullptr;
    *size = 0;
    auto file = elf::ElfFile::open(path);
    if (!file) return fail(file.error(), err);
    const Version v = static_cast<Version>(version);
    auto header = cfi::section_header(*file, v, section_address);
    if (!header) return fail(header.error(), err);
    // Streamed: one function's rows in memory at a time.
    SectionEncoder enc(*header);
    std::optional<Error> enc_error;
    auto g = cfi::for_each_generated(*file, v, section_address, [&](const FunctionSpec& f) {
      if (enc_error) return;
      if (auto ok = enc.add(f); !ok) enc_error = ok.error();
    });
    if (!g) return fail(g.error(), err);
    if (enc_error) return fail(*enc_error, err);
    const std::size_t functions_out = enc.size();
    auto out = enc.finish();
    if (!out) return fail(out.error(), err);
    void* p = std::malloc(out->empty() ? 1 : out->size());
    if (!p) return fail(SFRAME_E_NO_MEMORY, err);
    if (!out->empty()) std::memcpy(p, out->data(), out->size());
    *bytes = p;
    *size = out->size();
    if (stats) {
      *stats = sframe_generate_stats{};
      stats->functions_in = g->functions_in;
      stats->functions_out = static_cast<std::uint32_t>(functions_out);
      stats->flex_functions = static_cast<std::uint32_t>(g->flex_functions);
      stats->plt_functions = static_cast<std::uint32_t>(g->plt_functions);
      stats->skipped = static_cast<std::uint32_t>(g->skipped.size());
    }
    return SFRAME_OK;
  });
}
