// SPDX-License-Identifier: MIT
// libFuzzer target: a perf.data file or pipe stream (header, attributes,
// feature sections, records, zstd COMPRESSED records, sample fields) through
// the reader; every view a record hands out is read in full, so
// AddressSanitizer sees any that reaches past the input. The same bytes
// also go through the kallsyms parser (`sframe perf script` names kernel
// frames from /proc/kallsyms or perf's cached copy, text it does not
// control): every symbol it gives lies inside the text, is a function, is
// not 0, and they come sorted.
#include <cstddef>
#include <cstdint>
#include <span>

#include <algorithm>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "../src/perf/kallsyms.hpp"
#include "sframe/perf_data.hpp"

namespace {

void check_kallsyms(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<sframe::perf::detail::KSym> syms;
  sframe::perf::detail::parse_kallsyms(text, syms);
  std::uint64_t sink = 0;
  for (std::size_t i = 0; i < syms.size(); ++i) {
    const auto& k = syms[i];
    SFRAME_FUZZ_CHECK(k.address != 0);
    SFRAME_FUZZ_CHECK(k.type == 't' || k.type == 'T' || k.type == 'w' || k.type == 'W');
    SFRAME_FUZZ_CHECK(k.name_len > 0 && k.name_at <= size && k.name_len <= size - k.name_at);
    SFRAME_FUZZ_CHECK(i == 0 || syms[i - 1].address <= k.address);
    for (char c : text.substr(k.name_at, k.name_len)) {
      SFRAME_FUZZ_CHECK(c != '\n' && c != '\t');
      sink += static_cast<unsigned char>(c);
    }
  }
  // The index (lines parsed on demand when sorted) answers as the full
  // parse does, at and around every symbol and at the extremes.
  const sframe::perf::detail::KallsymsIndex index(text);
  std::vector<std::uint64_t> probes = {0, 1, UINT64_MAX};
  for (std::size_t i = 0; i < syms.size() && i < 64; ++i)
    probes.insert(probes.end(), {syms[i].address - 1, syms[i].address, syms[i].address + 1});
  std::vector<sframe::perf::detail::KSym> group;
  for (const std::uint64_t a : probes) {
    std::uint64_t next = 0;
    const bool hit = index.lookup(a, group, next);
    auto up = std::upper_bound(syms.begin(), syms.end(), a, [](std::uint64_t v, const auto& k) { return v < k.address; });
    SFRAME_FUZZ_CHECK(hit == (up != syms.begin()));
    if (!hit) continue;
    auto lo = up - 1;
    while (lo != syms.begin() && (lo - 1)->address == (up - 1)->address) --lo;
    SFRAME_FUZZ_CHECK(group.size() == static_cast<std::size_t>(up - lo));
    for (std::size_t k = 0; k < group.size(); ++k) {
      SFRAME_FUZZ_CHECK(group[k].address == lo[k].address && group[k].name_at == lo[k].name_at);
      SFRAME_FUZZ_CHECK(group[k].name_len == lo[k].name_len && group[k].type == lo[k].type);
    }
    SFRAME_FUZZ_CHECK(next == (up != syms.end() ? up->address : 0));
  }
  sframe::fuzz::g_sink = sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sframe::perf;
  check_kallsyms(data, size);
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
