// SPDX-License-Identifier: MIT
// `sframe perf inject`: a `perf record --call-graph=dwarf` recording
// rewritten without its stack copies. Every sample is unwound as
// `sframe perf script` unwinds it (perf::Session) and written back with its
// user frames in PERF_SAMPLE_CALLCHAIN, without PERF_SAMPLE_REGS_USER and
// PERF_SAMPLE_STACK_USER, as the current perf's `perf inject
// --convert-callchain` writes it; every other record is kept. The output is
// written by the perf.data writer (128-byte attributes, which perf 6.1 also
// reads).
#include "perf_inject.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.hpp"
#include "perf_layout.hpp"
#include "perf_summary.hpp"
#include "render.hpp"
#include "perf_writer.hpp"
#include "perf_data.hpp"
#include "perf_unwind.hpp"

namespace sframe::tools {
namespace {

constexpr std::uint64_t kDwarfBits = perf::kSampleRegsUser | perf::kSampleStackUser;

// Features whose content the rewrite changes or drops: the event
// description (rewritten from the new attributes), build-ids (written from
// the reader's list, file and pipe input alike), compression (the output
// is not compressed), and the AUX and directory layouts (refused or not
// carried over).
bool carried_over(unsigned bit) {
  using namespace perf::layout;
  return bit != kFeatEventDesc && bit != kFeatBuildId && bit != kFeatCompressed && bit != kFeatAuxtrace &&
         bit != kFeatDirFormat;
}

}  // namespace

CLI::App* register_perf_inject(CLI::App& perf, PerfInjectOptions& opt) {
  CLI::App* app = perf.add_subcommand(
      "inject", "Rewrite a perf record --call-graph=dwarf recording with SFrame-unwound callchains and no stack copies");
  app->add_option("-i,--input", opt.input, "perf.data to read ('-': standard input)")->capture_default_str();
  app->add_option("-o,--output", opt.output, "perf.data to write ('-': standard output, pipe mode)")
      ->capture_default_str();
  return app;
}

int run_perf_inject(const PerfInjectOptions& opt) {
  // One line: the file, then what is wrong with it.
  const auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "sframe perf inject: %s\n", what.c_str());
    return 1;
  };
  const auto out_error = [&](const Error& e) { return fail(fmt::format("{}: {}", opt.output, write_error_text(e))); };
  auto data = perf::PerfData::open(opt.input);
  if (!data) return fail(fmt::format("{}: {}", opt.input, write_error_text(data.error())));
  const perf::FileInfo& info = data->info();
  if (!info.arch.empty() && info.arch != "x86_64")
    return fail(fmt::format("{}: recorded on {}: only x86_64 samples are unwound", opt.input, info.arch));
  for (const auto& f : info.features)
    if (f.bit == perf::layout::kFeatAuxtrace)
      return fail(fmt::format("{}: holds AUX area data (e.g. Intel PT), which cannot be carried over", opt.input));

  // The attributes as written: the stack copies' bits and sizes gone, user
  // callchains no longer excluded.
  std::vector<perf::EventAttr> attrs = info.attrs;
  bool any = false;
  for (perf::EventAttr& a : attrs) {
    if (!(a.sample_type & kDwarfBits)) continue;
    if (!(a.sample_type & perf::kSampleCallchain))
      return fail(fmt::format("{}: event {} samples user registers and stack without a callchain; record with "
                              "--call-graph=dwarf",
                              opt.input, a.name));
    any = true;
    a.sample_type &= ~kDwarfBits;
    a.sample_regs_user = 0;
    a.sample_stack_user = 0;
    a.flags &= ~perf::layout::attr::kFlagExcludeCallchainUser;
  }
  if (!any)
    return fail(fmt::format("{}: no sample carries a stack copy to unwind (record with --call-graph=dwarf)",
                            opt.input));

  auto writer = perf::PerfWriter::create(opt.output, info.pipe && opt.output == "-");
  if (!writer) return out_error(writer.error());
  if (auto r = writer->set_attrs(attrs); !r) return out_error(r.error());
  for (const auto& f : info.features) {
    // Empty: pipe mode's end-of-features marker (a HEADER_FEATURE record
    // numbered HEADER_LAST_FEATURE, which a later perf gives a meaning).
    if (!carried_over(f.bit) || f.bytes.empty()) continue;
    if (auto r = writer->add_feature(f.bit, std::vector<std::byte>(f.bytes.begin(), f.bytes.end())); !r)
      return out_error(r.error());
  }
  if (auto r = writer->add_feature(perf::layout::kFeatEventDesc, perf::feature_event_desc(attrs)); !r)
    return out_error(r.error());

  // As `sframe perf script`: kept for the process's life (see there).
  [[gnu::used]] static perf::Session* kept = nullptr;
  perf::SessionOptions so;
  so.symbols = false;  // addresses are written, names are the reader's business
  kept = new perf::Session(info, so);
  perf::Session& session = *kept;
  std::vector<std::uint64_t> chain;
  std::vector<std::byte> rec;
  std::uint64_t converted = 0, kept_chain = 0, records = 0;
  Expected<void> werr;
  // The records come in time order: a FINISHED_ROUND every so often lets
  // perf's ordered-events queue flush as it reads instead of holding the
  // whole file (perf record writes one per ring-buffer pass).
  std::vector<std::byte> round;
  perf::encode_finished_round(round);
  auto r = data->for_each([&](const perf::Record& in) {
    if (!werr) return;
    if (++records % 4096 == 0) werr = writer->write(round);
    if (!werr) return;
    if (in.type != perf::kRecordSample) {
      if (in.type < perf::kRecordHeaderAttr) session.process(in);
      werr = writer->write(in.bytes);
      return;
    }
    if (!in.attr || !(in.attr->sample_type & kDwarfBits)) {
      werr = writer->write(in.bytes);
      return;
    }
    const perf::UnwoundSample& u = session.unwind(in);
    if (u.walked) {
      perf::unwound_callchain(in, u, chain);
      ++converted;
    } else {
      // No user registers (a kernel thread): the recorded callchain.
      chain.assign(in.sample.callchain_nr, 0);
      for (std::uint64_t i = 0; i < in.sample.callchain_nr; ++i) chain[i] = in.sample.callchain(i);
      ++kept_chain;
    }
    rec.clear();
    werr = perf::rewrite_sample(rec, in, chain);
    if (werr) werr = writer->write(rec);
  });
  if (!r) return fail(fmt::format("{}: {}", opt.input, error_text(r.error())));
  if (!werr) return out_error(werr.error());
  if (!info.build_ids.empty()) {
    auto ids = perf::feature_build_ids(info.build_ids);
    if (!ids) return fail(fmt::format("{}: {}", opt.input, error_text(ids.error())));
    if (auto w = writer->add_feature(perf::layout::kFeatBuildId, std::move(*ids)); !w)
      return out_error(w.error());
  }
  if (auto w = writer->finish(); !w) return out_error(w.error());

  const perf::SessionStats& st = session.stats();
  std::uint64_t user_frames = 0;
  for (std::size_t i = 1; i < perf::kFrameOrigins; ++i) user_frames += st.by_origin[i];
  std::fprintf(stderr,
               "sframe perf inject: %llu samples unwound (%.1f user frames each; from: %s); user walks ended: %s; "
               "%llu samples without user registers kept their recorded callchain; %llu records, %llu bytes of "
               "records written\n",
               static_cast<unsigned long long>(converted),
               converted ? double(user_frames) / double(converted) : 0.0,
               frame_origins_text(st, static_cast<std::size_t>(perf::FrameOrigin::kRegisters)).c_str(),
               walk_stops_text(st).c_str(), static_cast<unsigned long long>(kept_chain),
               static_cast<unsigned long long>(records), static_cast<unsigned long long>(writer->data_size()));
  return 0;
}

}  // namespace sframe::tools
