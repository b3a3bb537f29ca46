// SPDX-License-Identifier: MIT
// libFuzzer target: a perf.data file or pipe stream (header, attributes,
// feature sections, records, zstd COMPRESSED records, sample fields) through
// the reader; every view a record hands out is read in full, so
// AddressSanitizer sees any that reaches past the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_check.hpp"
#include "sframe/perf_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sframe::perf;
  // Small bounds: the fuzzer's inputs are small, and its RSS limit is 2 GiB.
  ReadLimits limits;
  limits.max_decompressed_record = 1u << 20;
  limits.max_decompressed_total = 16u << 20;
  auto d = PerfData::from_bytes(std::span(reinterpret_cast<const std::byte*>(data), size), limits);
  if (!d) {
    SFRAME_FUZZ_CHECK(d.error().offset <= size);
    return 0;
  }
  std::uint64_t sink = 0;
  auto r = d->for_each([&](const Record& rec) {
    SFRAME_FUZZ_CHECK(rec.offset < size);
    if (rec.type == kRecordSample) {
      const Sample& s = rec.sample;
      for (std::uint64_t i = 0; i < s.callchain_nr; ++i) sink += s.callchain(i);
      for (unsigned reg = 0; reg < 64; ++reg)
        if (auto v = s.user_reg(reg)) sink += *v;
      for (std::byte b : s.stack) sink += std::to_integer<unsigned>(b);
      SFRAME_FUZZ_CHECK(s.stack.size() <= s.stack_size);
    }
    if (rec.type == kRecordMmap || rec.type == kRecordMmap2) {
      for (char c : rec.mmap.filename) sink += static_cast<unsigned char>(c);
      for (std::byte b : rec.mmap.build_id) sink += std::to_integer<unsigned>(b);
      SFRAME_FUZZ_CHECK(rec.mmap.build_id.size() <= 20);
    }
    if (rec.type == kRecordComm)
      for (char c : rec.comm.comm) sink += static_cast<unsigned char>(c);
  });
  if (!r) SFRAME_FUZZ_CHECK(r.error().offset <= size);
  for (const auto& a : d->info().attrs) sink += a.name.size() + a.ids.size();
  sframe::fuzz::g_sink = sink;
  return 0;
}
