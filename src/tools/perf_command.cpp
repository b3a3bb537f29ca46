// SPDX-License-Identifier: MIT
// `sframe perf script`: the samples of a `perf record --call-graph=dwarf`
// recording unwound with SFrame, printed as `perf script --no-inline`
// prints them (perf 7.2's builtin-script.c layout, or perf 6.1's with
// --perf-compat 6.1), as collapsed stacks (`perf script report
// stackcollapse`), or as JSON; a summary on stderr. --pprof and
// --flamegraph write the same samples as a pprof profile and an SVG flame
// graph besides.
#include <fmt/compile.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <cstdio>
#include <optional>
#include <iterator>
#include <span>
#include <sstream>
#include <unordered_map>

#include "cli.hpp"
#include "flamegraph_svg.hpp"
#include "json_stream.hpp"
#include "profile.hpp"
#include "profile_pprof.hpp"
#include "sframe/elf/output_file.hpp"
#include "commands.hpp"
#include "perf_inject.hpp"
#include "perf_script.hpp"
#include "perf_summary.hpp"
#include "perf_data.hpp"
#include "perf_unwind.hpp"

namespace sframe::tools {
namespace {

// perf script's -F fields this command prints.
enum Field : unsigned {
  kComm = 1u << 0,
  kTid = 1u << 1,
  kPid = 1u << 2,
  kTime = 1u << 3,
  kEvent = 1u << 4,
  kPeriod = 1u << 5,
  kIp = 1u << 6,
  kSym = 1u << 7,
  kSymoff = 1u << 8,
  kDso = 1u << 9,
  kCpu = 1u << 10,
};

unsigned parse_fields(const std::string& text) {
  static const std::pair<const char*, unsigned> kNames[] = {
      {"comm", kComm}, {"tid", kTid},       {"pid", kPid},     {"time", kTime}, {"event", kEvent}, {"period", kPeriod},
      {"ip", kIp},     {"sym", kSym},       {"symoff", kSymoff}, {"dso", kDso}, {"cpu", kCpu}};
  unsigned f = 0;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool known = false;
    for (auto [n, bit] : kNames)
      if (item == n) f |= bit, known = true;
    if (!known)
      throw UsageError(fmt::format("-F {}: unknown field '{}' (known: comm, tid, pid, cpu, time, event, period, ip, "
                                   "sym, symoff, dso)",
                                   text, item));
  }
  if (f == 0) throw UsageError("-F: no field given");
  return f;
}

// What the perf releases print differently in the text layout (the rest,
// names and the end of a walk, is the Session's: SessionOptions).
struct Layout {
  // perf_sample__fprintf_start: pid and tid as "%5d" (6.1), "%7d" (7.2).
  int pid_width = 7;
  // The frame address: ResolvedFrame::runtime_ip (7.2, absolute) or ::ip
  // (6.1, map-relative).
  bool runtime_ip = true;
};

// --perf-compat VERSION: the layout and the session options of that perf.
struct Compat {
  Layout layout;
  perf::SessionOptions session;
};

Compat compat_for(const std::string& version) {
  Compat c;
  if (version == "7.2") {
    c.session.names = perf::PerfVersion::k7_2;
    c.session.forget_exited = true;
  } else if (version == "6.1") {
    c.layout = {5, false};
    c.session.names = perf::PerfVersion::k6_1;
    c.session.libunwind_stack_end = true;
  } else {
    throw UsageError(fmt::format("--perf-compat {}: unknown perf version (known: 7.2, 6.1)", version));
  }
  return c;
}


// Buffered stdout: one fwrite per 256 KiB.
class Out {
 public:
  fmt::memory_buffer buf;
  void flush_if_full() {
    if (buf.size() >= (256u << 10)) flush();
  }
  void flush() {
    std::fwrite(buf.data(), 1, buf.size(), stdout);
    buf.clear();
  }
};

class PerfScript {
 public:
  explicit PerfScript(const PerfScriptOptions& opt) : opt_(opt) {}

  // The perf.data named by the options, read and converted.
  int run() {
    check_usage();
    auto data = perf::PerfData::open(opt_.input);
    if (!data) return fail(write_error_text(data.error()), &data.error());
    if (int rc = begin(data->info()); rc != 0) return rc;
    auto r = data->for_each([&](const perf::Record& rec) { take(rec); });
    if (!r) {
      out_.flush();
      if (js_) {
        // Past the first byte there is no second document: this one ends
        // with the error, as its last member (docs/json.md).
        complain(opt_.input, error_text(r.error()));
        while (js_->depth() > 1) js_->end();
        js_->member("error_detail", error_json(r.error()));
        js_->close_with_error(error_text(r.error()));
        return 1;
      }
      return fail(error_text(r.error()), &r.error());
    }
    return end(data->stats());
  }

  // The conversion fed record by record (PerfScriptStream): begin() with
  // the file's header, take() each record in the file's order, end() to
  // write the outputs. Each returns an exit status (0: go on).
  int begin(const perf::FileInfo& info) {
    check_usage();
    // --folded and --json are no perf layout: their frames and names stay
    // those of the default session options, whatever --perf-compat says.
    compat_ = compat_for(opt_.perf_compat);
    text_ = !opt_.folded && !opt_.json;
    if (!info.arch.empty() && info.arch != "x86_64")
      return fail(fmt::format("recorded on {}: only x86_64 samples are unwound", info.arch), nullptr);
    if (!opt_.fields.empty()) {
      fields_ = parse_fields(opt_.fields);
    } else {
      // perf script's default for software and hardware events.
      fields_ = kComm | kTid | kTime | kPeriod | kEvent | kIp | kSym | kSymoff | kDso;
      if (!info.attrs.empty() && (info.attrs[0].sample_type & perf::kSampleCpu)) fields_ |= kCpu;
    }
    for (const auto& a : info.attrs) name_width_ = std::max(name_width_, a.name.size());

    // Never destroyed: freeing the session's tables (every module's symbols
    // and unwind rows, many small blocks on a large profile) is work for
    // memory the exit returns anyway. Held by a static pointer, it stays
    // reachable, so LeakSanitizer does not report it ([[gnu::used]]: else
    // the optimizer drops the never-read pointer and LSan sees a leak).
    [[gnu::used]] static perf::Session* kept = nullptr;
    perf::SessionOptions so = text_ ? compat_.session : perf::SessionOptions{};
    so.files = opt_.files;
    kept = new perf::Session(info, so);
    session_ = kept;
    // --folded, --pprof, --flamegraph: every sample goes into one Profile,
    // the one aggregation they are all written from.
    profiling_ = !opt_.pprof.empty() || !opt_.flamegraph.empty();
    aggregating_ = opt_.folded || profiling_;
    for (const perf::BuildIdEntry& b : info.build_ids)
      if (b.filename == perf::kKernelDso) kernel_build_id_ = b.build_id;
    if (profiling_)
      for (const auto& a : info.attrs) prof_.add_event(a.name);
    // --json: written as the samples come (a recording's samples are not
    // kept): the envelope, the file, then one sample at a time.
    if (opt_.json) {
      js_.emplace();
      js_->begin_object();
      const Json head = envelope("perf script");
      for (const auto& [k, v] : head.items()) js_->member(k, v);
      js_->member("file", opt_.input);
      js_->key("samples");
      js_->begin_array();
    }
    return 0;
  }

  void take(const perf::Record& rec) {
    perf::Session& session = *session_;
    if (rec.type != perf::kRecordSample) {
      session.process(rec);
      return;
    }
    const perf::UnwoundSample& u = session.unwind(rec);
    const std::string_view comm = session.comm(rec.id.tid);
    if (aggregating_) {
      // A repeat of an earlier sample (same frames, no state change in
      // between, so the same comm too) of the same thread and event ends
      // at the same node.
      if (u.repeat_id != 0) {
        const RepeatKey key{u.repeat_id, rec.id.tid, rec.attr};
        if (auto it = repeat_nodes_.find(key); it != repeat_nodes_.end()) {
          prof_.add_again(it->second, rec.sample.period);
        } else {
          if (repeat_nodes_.size() >= (std::size_t{1} << 17)) repeat_nodes_.clear();
          repeat_nodes_.emplace(key, add_to_profile(rec, u, comm));
        }
      } else {
        add_to_profile(rec, u, comm);
      }
    }
    if (opt_.folded) return;
    if (opt_.json) {
      Json s;
      s["comm"] = std::string(comm);
      s["pid"] = rec.id.pid;
      s["tid"] = rec.id.tid;
      s["time"] = rec.id.time;
      s["period"] = rec.sample.period;
      s["event"] = rec.attr ? rec.attr->name : "";
      Json fr = Json::array();
      for (const perf::ResolvedFrame& f : u.frames) {
        Json j;
        j["ip"] = fmt::format("{:#x}", f.ip);
        j["address"] = fmt::format("{:#x}", f.address);
        j["symbol"] = f.symbol ? Json(*f.symbol) : Json(nullptr);
        j["symoff"] = f.symoff;
        j["dso"] = f.dso ? Json(*f.dso) : Json(nullptr);
        j["source"] = std::string(perf::to_string(f.origin));
        fr.push_back(std::move(j));
      }
      s["frames"] = std::move(fr);
      s["stop"] = u.walked ? Json(std::string(u.why)) : Json(nullptr);
      s["stop_address"] = fmt::format("{:#x}", u.stop_address);
      s["stack"] = {{"base", fmt::format("{:#x}", u.stack_base)}, {"size", u.stack_size}};
      js_->value(s);
      return;
    }
    if (!opt_.text) return;
    print_sample(out_.buf, compat_.layout, rec, u, comm, fields_, name_width_);
    out_.flush_if_full();
  }

  int end(const perf::ReadStats& rs) {
    if (opt_.folded && opt_.folded_output != "-") {
      const std::string lines = profile::folded_stacks(prof_);
      auto f = OutputFile::create(opt_.folded_output);
      if (!f) return fail_output(opt_.folded_output, f.error());
      if (auto ok = f->write(std::as_bytes(std::span(lines.data(), lines.size()))); !ok)
        return fail_output(opt_.folded_output, ok.error());
      if (auto ok = f->commit(); !ok) return fail_output(opt_.folded_output, ok.error());
    } else if (opt_.folded) {
      const std::string lines = profile::folded_stacks(prof_);
      out_.flush();
      std::fwrite(lines.data(), 1, lines.size(), stdout);
    }
    out_.flush();
    if (profiling_)
      if (int rc = write_profiles(prof_); rc != 0) {
        if (js_) js_->close_with_error("cannot write a profile (--pprof, --flamegraph)");
        return rc;
      }
    const perf::SessionStats& st = session_->stats();
    if (js_) {
      js_->end();
      js_->member("summary", summary_json(st, rs));
      js_->finish();
    }
    if (opt_.summary) print_summary(st, rs);
    return 0;
  }

 private:
  void check_usage() const {
    if (opt_.folded && opt_.json) throw UsageError("--folded and --json exclude each other");
  }

  // A sample's resolution (perf::UnwoundSample::repeat_id), thread and event.
  struct RepeatKey {
    std::uint64_t repeat_id;
    std::uint32_t tid;
    const perf::EventAttr* attr;
    bool operator==(const RepeatKey&) const = default;
  };
  struct RepeatKeyHash {
    std::size_t operator()(const RepeatKey& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.repeat_id * 0x9e3779b97f4a7c15u ^ k.tid) ^
             std::hash<const void*>{}(k.attr);
    }
  };

  // The session's frame `f` as a profile::Frame (the kernel's mapping of
  // unknown extent named by its recorded build-id).
  profile::Frame profile_frame(const perf::ResolvedFrame& f) const {
    profile::Frame p;
    p.pc = f.runtime_ip;
    if (f.symbol) p.function = *f.symbol;
    if (f.dso) p.mapping.file = *f.dso;
    p.mapping.start = f.map_start;
    p.mapping.end = f.map_end;
    p.mapping.pgoff = f.map_pgoff;
    if (f.build_id)
      p.mapping.build_id = *f.build_id;
    else if (f.origin == perf::FrameOrigin::kKernel)
      p.mapping.build_id = kernel_build_id_;
    return p;
  }

  // The sample into the profile (frames innermost first): returns its node
  // there. Frames the session numbered (UnwoundSample::frame_ids) are
  // looked up in the profile once per number, not once per sample.
  std::uint32_t add_to_profile(const perf::Record& rec, const perf::UnwoundSample& u, std::string_view comm) {
    profile::Sample s;
    s.pid = rec.id.pid;
    s.tid = rec.id.tid;
    s.comm = comm;
    s.event = rec.attr ? std::string_view(rec.attr->name) : std::string_view();
    s.period = rec.sample.period;
    if (!u.frame_ids.empty() && u.frame_ids.size() == u.frames.size()) {
      if (u.frame_generation != fid_generation_) {
        fid_of_.clear();
        fid_generation_ = u.frame_generation;
      }
      return prof_.add_frames(s, u.frames.size(), [&](std::size_t i) {
        const std::uint32_t id = u.frame_ids[i];
        if (id >= fid_of_.size()) fid_of_.resize(std::max<std::size_t>(id + 1, 2 * fid_of_.size()), kNoFrame);
        if (fid_of_[id] == kNoFrame) fid_of_[id] = prof_.frame(profile_frame(u.frames[i]));
        return fid_of_[id];
      });
    }
    pframes_.clear();
    for (const perf::ResolvedFrame& f : u.frames) pframes_.push_back(profile_frame(f));
    s.frames = pframes_;
    return prof_.add(s);
  }

  // Writes --pprof and --flamegraph: both complete before either replaces
  // its destination.
  int write_profiles(const profile::Profile& prof) {
    std::vector<std::pair<std::string, std::string>> outputs;  // path, bytes
    if (!opt_.pprof.empty()) {
      profile::PprofOptions po;
      po.comment = command_line();
      outputs.emplace_back(opt_.pprof, profile::pprof_bytes(prof, po));
    }
    if (!opt_.flamegraph.empty()) {
      profile::FlameGraphOptions fo;
      fo.title = command_line();
      outputs.emplace_back(opt_.flamegraph, profile::flamegraph_svg(prof, fo));
    }
    std::vector<OutputFile> files;
    for (const auto& [path, bytes] : outputs) {
      if (path == "-") std::fflush(stdout);
      auto f = OutputFile::create(path);
      if (!f) return fail_output(path, f.error());
      if (auto ok = f->write(std::as_bytes(std::span(bytes.data(), bytes.size()))); !ok)
        return fail_output(path, ok.error());
      files.push_back(std::move(*f));
    }
    for (std::size_t i = 0; i < files.size(); ++i)
      if (auto ok = files[i].commit(); !ok) return fail_output(outputs[i].first, ok.error());
    return 0;
  }

  static int fail_output(const std::string& path, const Error& e) {
    complain(path, fmt::format("cannot write: {}", write_error_text(e)));
    return 1;
  }

  // What the profile was made by.
  std::string command_line() const {
    if (!opt_.command_line.empty()) return opt_.command_line;
    std::string c = "sframe perf script -i " + opt_.input;
    if (opt_.perf_compat != "7.2") c += " --perf-compat " + opt_.perf_compat;
    return c;
  }

  int fail(const std::string& why, const Error* e) {
    complain(opt_.input, why);
    if (opt_.json) {
      Json doc = envelope("perf script");
      doc["file"] = opt_.input;
      doc["error"] = why;
      if (e) doc["error_detail"] = error_json(*e);
      print(json_text(doc) + "\n");
    }
    return 1;
  }

  // perf builtin-script.c: perf_sample__fprintf_start (comm "%s " when
  // a callchain follows, "%5d/%-5d " pid/tid (7.2: "%7d/%-7d "), "[%03d] "
  // cpu, "%5lu.%06lu: " time, "%10lu " period), the event name ("%*s: "),
  // then per callchain node "\t%16lx" ip, " sym+0xoff", " (dso)"
  // (sample__fprintf_callchain), and a blank line after the sample.
  static void print_sample(fmt::memory_buffer& b, const Layout& layout, const perf::Record& rec,
                           const perf::UnwoundSample& u, std::string_view comm, unsigned f, std::size_t name_width) {
    // Compiled format strings and plain appends: this runs for every frame
    // of every sample, where fmt's runtime parsing of the format string
    // would be repeated each time.
    auto o = fmt::appender(b);
    const auto put = [&b](std::string_view v) { b.append(v.data(), v.data() + v.size()); };
    if (f & kComm) {
      if (f & kIp) {
        put(comm);
        b.push_back(' ');
      } else {
        fmt::format_to(o, FMT_COMPILE("{:>16} "), comm);
      }
    }
    const int w = layout.pid_width;
    if ((f & kPid) && (f & kTid))
      fmt::format_to(o, FMT_COMPILE("{:{}}/{:<{}} "), rec.id.pid, w, rec.id.tid, w);
    else if (f & kPid)
      fmt::format_to(o, FMT_COMPILE("{:{}} "), rec.id.pid, w);
    else if (f & kTid)
      fmt::format_to(o, FMT_COMPILE("{:{}} "), rec.id.tid, w);
    if (f & kCpu) fmt::format_to(o, FMT_COMPILE("[{:03}] "), rec.id.cpu);
    if (f & kTime)
      fmt::format_to(o, FMT_COMPILE("{:5}.{:06}: "), rec.id.time / 1000000000, rec.id.time % 1000000000 / 1000);
    if (f & kPeriod) fmt::format_to(o, FMT_COMPILE("{:10} "), rec.sample.period);
    if (f & kEvent) fmt::format_to(o, "{:>{}}: ", rec.attr ? rec.attr->name : "", name_width);
    b.push_back('\n');
    if (!(f & kIp)) return;
    // Each frame line written straight into the buffer, its room reserved
    // once (a push_back per character checked the capacity each time).
    const auto copy = [](char* p, std::string_view v) {
      std::memcpy(p, v.data(), v.size());
      return p + v.size();
    };
    // Lowercase hex of v right-aligned in `width` columns (printf "%*lx"):
    // its digit count from its bit length, then two digits per table load
    // from the last (a loop per digit costs a branch per digit, on every
    // frame printed).
    static constexpr auto kHexPairs = [] {
      std::array<char, 512> t{};
      for (unsigned i = 0; i < 256; ++i) {
        t[2 * i] = "0123456789abcdef"[i >> 4];
        t[2 * i + 1] = "0123456789abcdef"[i & 15];
      }
      return t;
    }();
    const auto hex_at = [](char* p, std::uint64_t v, std::size_t width) {
      const std::size_t n = v == 0 ? 1 : static_cast<std::size_t>(67 - std::countl_zero(v)) / 4;
      if (width > n) {
        std::memset(p, ' ', width - n);
        p += width - n;
      }
      char* q = p + n;
      for (; q - p >= 2; v >>= 8) {
        q -= 2;
        std::memcpy(q, &kHexPairs[2 * (v & 0xff)], 2);
      }
      if (q != p) *p = "0123456789abcdef"[v & 15];
      return p + n;
    };
    for (const perf::ResolvedFrame& fr : u.frames) {
      const std::string_view sym = fr.symbol ? std::string_view(*fr.symbol) : std::string_view("[unknown]");
      const std::string_view dso = fr.dso ? std::string_view(*fr.dso) : std::string_view("[unknown]");
      // Tab, ip, space, name, "+0x" offset, " (", dso, ")", newline.
      const std::size_t most = 1 + 16 + 1 + sym.size() + 3 + 16 + 2 + dso.size() + 2;
      const std::size_t at = b.size();
      b.resize(at + most);
      char* p = b.data() + at;
      *p++ = '\t';
      p = hex_at(p, layout.runtime_ip ? fr.runtime_ip : fr.ip, 16);
      if (f & (kSym | kSymoff)) {
        *p++ = ' ';
        p = copy(p, sym);
        if (fr.symbol && (f & kSymoff)) {
          p = copy(p, "+0x");
          p = hex_at(p, fr.symoff, 0);
        }
      }
      if (f & kDso) {
        p = copy(p, " (");
        p = copy(p, dso);
        *p++ = ')';
      }
      *p++ = '\n';
      b.resize(static_cast<std::size_t>(p - b.data()));
    }
    b.push_back('\n');
  }

  static Json summary_json(const perf::SessionStats& st, const perf::ReadStats& rs) {
    Json j;
    j["samples"] = st.samples;
    j["frames"] = st.frames;
    Json o;
    for (std::size_t i = 0; i < perf::kFrameOrigins; ++i)
      o[std::string(perf::to_string(static_cast<perf::FrameOrigin>(i)))] = st.by_origin[i];
    j["frame_sources"] = std::move(o);
    Json s;
    for (const auto& [why, n] : st.stops) s[why] = n;
    j["stops"] = std::move(s);
    j["lost_samples"] = rs.lost_samples;
    j["lost_records"] = rs.lost_records;
    j["files"] = st.dsos;
    j["generated_files"] = st.generated_dsos;
    j["generated_fdes"] = st.generated_fdes;
    return j;
  }

  static void print_summary(const perf::SessionStats& st, const perf::ReadStats& rs) {
    fmt::print(stderr,
               "sframe perf script: {} samples, {} frames ({:.1f} per sample); frames from: {}; user walks ended: "
               "{}; lost: {} samples in {} LOST records; {} files opened, SFrame generated for {} "
               "({} FDEs one at a time)\n",
               st.samples, st.frames, st.samples ? double(st.frames) / double(st.samples) : 0.0,
               frame_origins_text(st), walk_stops_text(st), rs.lost_samples, rs.lost_records, st.dsos, st.generated_dsos,
               st.generated_fdes);
  }

  const PerfScriptOptions& opt_;
  Compat compat_;
  bool text_ = true;
  unsigned fields_ = 0;
  std::size_t name_width_ = 0;
  perf::Session* session_ = nullptr;
  bool profiling_ = false;
  bool aggregating_ = false;
  profile::Profile prof_;
  std::vector<profile::Frame> pframes_;
  // Profile frame ids by the session's frame numbers of generation
  // fid_generation_ (add_to_profile()).
  static constexpr std::uint32_t kNoFrame = ~std::uint32_t{0};
  std::vector<std::uint32_t> fid_of_;
  std::uint64_t fid_generation_ = ~std::uint64_t{0};
  std::unordered_map<RepeatKey, std::uint32_t, RepeatKeyHash> repeat_nodes_;  // -> profile node
  std::string kernel_build_id_;
  Out out_;
  std::optional<JsonStream> js_;
};

class PerfCommand final : public Command {
 public:
  std::string_view name() const override { return "perf"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("perf", "Unwind perf.data samples with SFrame (perf script, perf inject)");
    app_->require_subcommand(1);
    script_ = app_->add_subcommand(
        "script", "Print the samples of a perf record --call-graph=dwarf recording, unwound with SFrame");
    script_->add_option("-i,--input", opt_.input, "perf.data file ('-': standard input)")->capture_default_str();
    script_->add_option("-F,--fields", opt_.fields,
                        "Fields, as perf script -F: comm,tid,pid,cpu,time,event,period,ip,sym,symoff,dso "
                        "(default: perf's)");
    script_->add_option("--perf-compat", opt_.perf_compat,
                        "The perf release whose text layout to print: 7.2 (absolute addresses, full C++ names) or "
                        "6.1 (Debian 12's: map-relative addresses, short C++ names)")
        ->capture_default_str();
    script_->add_flag("--folded", opt_.folded, "Print collapsed stacks (comm;outer;...;inner COUNT)");
    script_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
    script_->add_option("--pprof", opt_.pprof,
                        "Also write the samples as a gzipped pprof profile (profile.proto) to this file");
    script_->add_option("--flamegraph", opt_.flamegraph,
                        "Also write the samples as a self-contained SVG flame graph to this file");
    inject_ = register_perf_inject(*app_, inject_opt_);
  }

  int run() override {
    if (inject_->parsed()) return run_perf_inject(inject_opt_);
    return run_perf_script(opt_);
  }

 private:
  PerfScriptOptions opt_;
  CLI::App* script_ = nullptr;
  PerfInjectOptions inject_opt_;
  CLI::App* inject_ = nullptr;
};

}  // namespace

int run_perf_script(const PerfScriptOptions& opt) { return PerfScript(opt).run(); }

struct PerfScriptStream::Impl {
  PerfScriptOptions opt;
  PerfScript script;
  explicit Impl(const PerfScriptOptions& o) : opt(o), script(opt) {}
};

PerfScriptStream::PerfScriptStream(const PerfScriptOptions& opt) : impl_(std::make_unique<Impl>(opt)) {}
PerfScriptStream::~PerfScriptStream() = default;
int PerfScriptStream::begin(const perf::FileInfo& info) { return impl_->script.begin(info); }
void PerfScriptStream::take(const perf::Record& rec) { impl_->script.take(rec); }
int PerfScriptStream::end() { return impl_->script.end(perf::ReadStats{}); }

std::unique_ptr<Command> make_perf_command() { return std::make_unique<PerfCommand>(); }

}  // namespace sframe::tools
