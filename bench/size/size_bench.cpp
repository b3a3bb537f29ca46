// SPDX-License-Identifier: MIT
// Section sizes under each --optimize-size technique (SizeOptions), one file
// per line of input, for bench/size_bench.sh. For each linked ELF file read
// from standard input (one path a line) it prints tab-separated lines:
//   FILE  SOURCE  VERSION  TECHNIQUE  BYTES  REJECTED  FDES  READS  COVERED  MAXFRES
// SOURCE "gen": the model `sframe gen` makes from the file's CFI (for every
// file with CFI); "gnu": the model of the file's own .sframe (GNU ld's, as
// `sframe convert` reads it; when the file has one). TECHNIQUE is one of
// none, merge, mask, share, coalesce (each alone), coalesce16 (coalesce up to
// 16 FREs per FDE), nocoalesce (merge, mask and share: --optimize-size
// before coalescing), all (what --optimize-size does for every consumer of
// the version in the native byte order) and nonshare (all but sharing:
// libsframe in the foreign byte order). REJECTED counts what rejects the
// section: validate(kStrict) and each consumer of the version
// (check_consumer; nonshare written and checked in the foreign byte order
// by libsframe only). FDES is the FDE count; READS / COVERED the mean FREs
// a lookup reads (walk_cost), MAXFRES the most FREs of one FDE. Files with
// a GNU section also get a line "FILE gnusec VERSION own BYTES 0 0 0 0 0"
// giving its version and the bytes it uses. SOURCE "gensame" (files with a
// GNU section): gen's model keeping only the functions that overlap a PC
// range of one of GNU's FDEs, so that both sides count the same code (gen
// also covers what GNU's section lacks, e.g. crt1.o's _start, assembled
// without --gsframe); like for like with "gnu" of the same version. For gen's
// "all" section of each version a line
//   FILE  parts  VERSION  all  FPWORDS  WIDESTARTS  FDES  FRES  WIDEWORDS  0
// gives the bytes of FP data words, the bytes start addresses take beyond
// one per FRE (addr2/addr4 FRE types), the FDE and FRE counts, and the bytes
// data words take beyond one each (bench/size_bench.sh's classification of
// the files at or above .eh_frame + .eh_frame_hdr). Files without CFI print
// nothing; errors go to stderr.
#include <elf.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "sframe/cfi/cfi.hpp"
#include "sframe/format/consumers.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"

namespace {

using namespace sframe;

constexpr bool kNativeBig = std::endian::native == std::endian::big;

struct Technique {
  const char* name;
  SizeOptions options;
  bool foreign;  // written in the foreign byte order (libsframe's flip)
};

constexpr SizeOptions kCoalesce{false, false, false, true, 0};
constexpr SizeOptions kCoalesce16{false, false, false, true, 16};
constexpr SizeOptions kAllButCoalesce{true, true, true, false, 0};
constexpr SizeOptions kNonshare{true, true, false, true, SizeOptions::kDefaultCoalesceMaxFres};

constexpr Technique kTechniques[] = {
    {"none", {}, false},
    {"merge", {true, false, false}, false},
    {"mask", {false, true, false}, false},
    {"share", {false, false, true}, false},
    {"coalesce", kCoalesce, false},
    {"coalesce16", kCoalesce16, false},
    {"nocoalesce", kAllButCoalesce, false},
    {"allnocap", SizeOptions{true, true, true, true, 0}, false},
    {"all", SizeOptions::all(), false},
    {"nonshare", kNonshare, true},
};

// What a lookup costs in FREs read: the consumers walk an FDE's FREs from
// the first until one starts past the PC (kernel __find_fre, glibc and
// libsframe sframe_find_fre), so a PC covered by FRE i of n reads
// min(i + 2, n) FREs. Summed over every byte each FRE covers (PC-mask FDEs:
// over one block, times the blocks), with the bytes covered and the
// largest FRE count of an FDE.
struct WalkCost {
  double reads = 0;
  double covered = 0;
  std::uint32_t max_fres = 0;
};

WalkCost walk_cost(const Section& s) {
  WalkCost c;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    const auto f = s.fde(i);
    if (!f) continue;
    std::vector<std::uint32_t> starts;
    for (const auto& fre : s.fres(*f))
      if (fre) starts.push_back(fre->start_offset);
    const std::uint32_t n = static_cast<std::uint32_t>(starts.size());
    c.max_fres = std::max(c.max_fres, n);
    const bool mask = f->pc_type == PcType::kMask && f->rep_size != 0;
    const double span = mask ? f->rep_size : f->size;
    const double scale = mask ? double(f->size) / f->rep_size : 1.0;
    for (std::uint32_t k = 0; k < n; ++k) {
      const double end = k + 1 < n ? starts[k + 1] : span;
      const double bytes = std::max(0.0, end - starts[k]) * scale;
      c.reads += bytes * std::min(k + 2, n);
      c.covered += bytes;
    }
  }
  return c;
}

// Where an encoded section's FRE bytes go beyond the least an FRE takes (a
// 1-byte start address, the info byte, 1-byte data words): FP data words
// (spec v3 §2.4, §3.1.1: an FRE restates the FP rule in full; DWARF's
// DW_CFA_offset states it once for the rows after it), start addresses wider
// than a byte (spec v3 §2.3.3.3) and data words wider than a byte.
struct Parts {
  std::uint64_t fp_words = 0;
  std::uint64_t wide_starts = 0;
  std::uint64_t wide_words = 0;
  std::uint64_t fres = 0;
};

Parts parts(const Section& s) {
  Parts p;
  for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
    const auto f = s.fde(i);
    if (!f) continue;
    for (const auto& fre : s.fres(*f)) {
      if (!fre) continue;
      ++p.fres;
      const unsigned words = fre->dataword_count * fre->dataword_size;
      p.wide_starts += fre->encoded_size - 1 - words - 1;
      p.wide_words += fre->dataword_count * (fre->dataword_size - 1u);
      const auto w = s.wire_row(*f, *fre);
      if (w && w->fp == WireRow::Slot::kWord) p.fp_words += fre->dataword_size * (f->fde_type == FdeType::kFlex ? 2u : 1u);
    }
  }
  return p;
}

void measure(const std::string& path, const char* source, SectionSpec spec) {
  std::vector<Consumer> readers;
  for (Consumer c : kAllConsumers)
    if (reads_version(c, spec.version)) readers.push_back(c);
  const bool native = spec.big_endian == kNativeBig;
  for (const Technique& t : kTechniques) {
    SectionSpec s = spec;
    if (t.foreign) s.big_endian = !native ? spec.big_endian : !kNativeBig;
    // What --optimize-size picks for this consumer set must be this row.
    if (t.options == SizeOptions::all() && native) {
      if (!(size_options_for(readers, s.version, s.big_endian) == t.options))
        std::fprintf(stderr, "%s: size_options_for disagrees for 'all'\n", path.c_str());
    }
    const auto bytes = encode(s, Layout::kOptimize, t.options);
    if (!bytes) {
      std::fprintf(stderr, "%s: %s v%d %s: %s\n", path.c_str(), source, static_cast<int>(s.version), t.name,
                   std::string(describe(bytes.error().code())).c_str());
      continue;
    }
    int rejected = 0;
    const auto section = Section::parse(*bytes, s.section_address);
    const WalkCost walk = section ? walk_cost(*section) : WalkCost{};
    if (!section || !validate(*section, Strictness::kStrict)) {
      ++rejected;
    } else if (t.foreign) {
      // Only libsframe reads the foreign order.
      if (!check_consumer(*section, Consumer::kLibsframe).accepted()) ++rejected;
    } else if (native) {
      for (Consumer c : readers)
        if (!check_consumer(*section, c).accepted()) ++rejected;
    }
    std::printf("%s\t%s\t%d\t%s\t%zu\t%d\t%u\t%.0f\t%.0f\t%u\n", path.c_str(), source, static_cast<int>(s.version),
                t.name, bytes->size(), rejected, section ? section->num_fdes() : 0u, walk.reads, walk.covered,
                walk.max_fres);
    if (section && std::string_view(source) == "gen" && t.options == SizeOptions::all() && !t.foreign) {
      const Parts p = parts(*section);
      std::printf("%s\tparts\t%d\tall\t%llu\t%llu\t%u\t%llu\t%llu\t0\n", path.c_str(), static_cast<int>(s.version),
                  static_cast<unsigned long long>(p.fp_words), static_cast<unsigned long long>(p.wide_starts),
                  section->num_fdes(), static_cast<unsigned long long>(p.fres),
                  static_cast<unsigned long long>(p.wide_words));
    }
  }
}

}  // namespace

int main() {
  std::string path;
  while (std::getline(std::cin, path)) {
    auto file = elf::ElfFile::open(path);
    if (!file) continue;
    if (file->info().machine == EM_386) continue;
    const auto existing = file->sframe_section();
    const std::uint64_t address = existing ? existing->address : 0;
    std::vector<SectionSpec> gen;
    for (Version v : {Version::kV3, Version::kV2}) {
      const auto g = cfi::generate(*file, v, address);
      if (!g) break;  // no CFI (or not a linked file)
      measure(path, "gen", g->spec);
      gen.push_back(g->spec);
    }
    if (existing && !existing->from_segment) {
      const auto gnu = Section::parse(existing->bytes, existing->address);
      if (!gnu) continue;
      auto spec = to_spec(*gnu);
      if (!spec) continue;
      // gen's functions that overlap one of GNU's [start, start + size).
      const auto covered_by_gnu = [&](const FunctionSpec& f) {
        return std::any_of(spec->functions.begin(), spec->functions.end(), [&](const FunctionSpec& g) {
          return f.start_pc < g.start_pc + g.size && g.start_pc < f.start_pc + f.size;
        });
      };
      for (SectionSpec s : gen) {
        std::erase_if(s.functions, [&](const FunctionSpec& f) { return !covered_by_gnu(f); });
        if (!s.functions.empty()) measure(path, "gensame", s);
      }
      // GNU's own section: its version (its bytes the script takes from readelf).
      std::printf("%s\tgnusec\t%d\town\t%llu\t0\t0\t0\t0\t0\n", path.c_str(), static_cast<int>(gnu->version()),
                  static_cast<unsigned long long>(gnu->used_size()));
      for (Version v : {Version::kV3, Version::kV2}) {
        SectionSpec s = *spec;
        s.version = v;
        if (v == Version::kV2)
          std::erase_if(s.functions, [](const FunctionSpec& f) { return f.fde_type == FdeType::kFlex; });
        measure(path, "gnu", s);
      }
    }
    std::fflush(stdout);
  }
  return 0;
}
