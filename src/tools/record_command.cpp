// SPDX-License-Identifier: MIT
// `sframe record`: cpu-clock samples whose user stacks are unwound in the
// kernel at sample time (src/record), written as perf.data with callchains
// and no stack copies; --folded, --pprof and --flamegraph are `sframe perf
// script`'s outputs of that recording. The program's decisions live here:
// SIGINT and SIGTERM stop the recording (the recorder polls a flag).
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>

#include "cli.hpp"
#include "commands.hpp"
#include "perf_script.hpp"
#include "recorder.hpp"
#include "render.hpp"
#include "sframe/elf/output_file.hpp"

namespace sframe::tools {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

class RecordCommand final : public Command {
 public:
  std::string_view name() const override { return "record"; }
  bool json() const override { return false; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand(
        "record", "Sample cpu-clock and unwind user stacks in the kernel at sample time (eBPF), into perf.data "
                  "without stack copies");
    app_->add_option("-F,--freq", opt_.frequency, "Samples per second per CPU")->capture_default_str();
    app_->add_flag("-a,--all-cpus", opt_.all, "Record every process");
    app_->add_option("-p,--pid", pids_, "Record these processes (PID[,PID...]) and their children")
        ->delimiter(',');
    app_->add_option("--duration", opt_.duration, "Stop after SECONDS");
    app_->add_option("-o,--output", output_,
                     "Write here (default: sframe.data; with --folded: standard output, '-')");
    app_->add_flag("--folded", folded_, "Write collapsed stacks (comm;outer;...;inner COUNT) instead of perf.data");
    app_->add_option("--pprof", pprof_, "Also write a gzipped pprof profile (profile.proto) to this file");
    app_->add_option("--flamegraph", flamegraph_, "Also write a self-contained SVG flame graph to this file");
    app_->add_option("--check", opt_.check,
                     "For one sample in N, also copy what perf record --call-graph=dwarf copies (user registers, "
                     "8 KB of stack) into a second perf.data, for perf to unwind by itself and compare");
    app_->add_option("--check-output", check_output_, "Where --check writes (default: the output's name + .check)");
    app_->add_option("--cache", cache_,
                     "Keep module tables here by build-id, built once for later recordings (default: "
                     "$XDG_CACHE_HOME/sframepp/record, else ~/.cache/sframepp/record)");
    app_->add_flag("--no-cache", no_cache_, "Build every module's table, and keep none");
    app_->add_option("command", opt_.command,
                     "The command to start and record (after --); sframe then exits with its status (128 + the "
                     "signal that killed it), as perf record does");
    // The benchmark's baseline: the same program walking the same stacks
    // by frame pointers alone.
    app_->add_option("--walk", walk_, "How the kernel walks user stacks: sframe, or fp (frame pointers only)")
        ->check(CLI::IsMember({"sframe", "fp"}))
        ->capture_default_str();
  }

  int run() override {
    const int modes = (opt_.all ? 1 : 0) + (pids_.empty() ? 0 : 1) + (opt_.command.empty() ? 0 : 1);
    if (modes != 1) throw UsageError("give one of -a, -p PID or -- COMMAND");
    for (int p : pids_) {
      if (p <= 0) throw UsageError(fmt::format("-p {}: not a process ID", p));
      if (kill(p, 0) != 0 && errno == ESRCH) {
        std::fprintf(stderr, "sframe record: -p %d: no such process\n", p);
        return 1;
      }
    }
    if (opt_.frequency == 0 || opt_.frequency > 100000) throw UsageError("-F: between 1 and 100000 samples per second");
    if (opt_.duration < 0) throw UsageError("--duration: not a number of seconds");
    for (int p : pids_) opt_.pids.push_back(p);

    // What is written after the recording (the folded stacks, a profile)
    // is checked now, so that a recording is not made only to be lost to a
    // path that cannot be written.
    for (const std::string& out : {folded_ ? output_ : std::string(), pprof_, flamegraph_}) {
      if (out.empty() || out == "-") continue;
      if (auto f = OutputFile::create(out); !f)
        return complain_and_fail(out, fmt::format("cannot write: {}", write_error_text(f.error())));
    }
    // --folded writes no perf.data; --pprof and --flamegraph write one
    // beside their profiles. Either is converted as it is recorded.
    if (folded_)
      opt_.output.clear();
    else if (!output_.empty())
      opt_.output = output_;
    std::unique_ptr<Conversion> conversion;
    if (folded_ || !pprof_.empty() || !flamegraph_.empty()) {
      PerfScriptOptions so;
      so.input = folded_ ? "the recording" : opt_.output;
      so.folded = folded_;
      so.folded_output = output_.empty() ? "-" : output_;
      so.pprof = pprof_;
      so.flamegraph = flamegraph_;
      so.summary = false;
      so.text = false;
      so.command_line = command_line();
      // The recorder's opened files: the conversion's session opens none
      // again.
      so.files = opt_.files = std::make_shared<perf::FileTable>();
      conversion = std::make_unique<Conversion>(so);
      opt_.consumer = conversion.get();
    }
    if (opt_.check)
      opt_.check_output = !check_output_.empty() ? check_output_ : (folded_ ? std::string("sframe.data") : opt_.output) + ".check";
    else if (!check_output_.empty())
      throw UsageError("--check-output needs --check N");
    opt_.frame_pointers_only = walk_ == "fp";
    if (!no_cache_) opt_.table_cache = !cache_.empty() ? cache_ : default_cache();
    opt_.argv = {"sframe", "record"};
    opt_.stop = &g_stop;

    // -p opens a sampling event and a BPF link per thread of each process:
    // the open-files limit goes up to its hard limit, as perf record's
    // does. A command keeps the limit it would have had.
    if (!opt_.pids.empty()) {
      rlimit r{};
      if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
      }
    }
    struct sigaction sa{};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_int{}, old_term{};
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    record::RecordSummary sum;
    const std::string err = record::record(opt_, sum);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (!err.empty()) {
      std::fprintf(stderr, "sframe record: %s\n", err.c_str());
      return 1;
    }
    print_summary(sum, opt_);
    if (conversion)
      if (const int rc = conversion->end(); rc != 0) return rc;
    return command_exit_code(sum.command_status);
  }

 private:
  // `sframe perf script`'s conversion of the records as the recorder writes
  // them: decoded per the recording's attributes, then taken as a perf.data
  // reader would give them.
  class Conversion final : public record::RecordConsumer {
   public:
    explicit Conversion(const PerfScriptOptions& opt) : script_(opt) {}
    void begin(const perf::FileInfo& info) override {
      rc_ = script_.begin(info);
      decoder_.emplace(info.attrs);
    }
    void record(std::span<const std::byte> rec) override {
      if (rc_ != 0) return;
      // The recorder's own records: one that does not decode is a defect
      // of ours, said once at the end rather than dropped unseen.
      if (auto ok = decoder_->decode(rec, r_); ok) script_.take(r_);
      else ++undecoded_;
    }
    int end() {
      if (undecoded_)
        std::fprintf(stderr, "sframe record: %llu records of the recording could not be decoded (a defect)\n",
                     static_cast<unsigned long long>(undecoded_));
      if (rc_ != 0) return rc_;
      return script_.end() != 0 || undecoded_ ? 1 : 0;
    }

   private:
    PerfScriptStream script_;
    std::optional<perf::RecordDecoder> decoder_;
    perf::Record r_;
    int rc_ = 0;
    std::uint64_t undecoded_ = 0;
  };

  // The command's fate as sframe's exit status, as perf record and
  // time(1) report it: its own status, or 128 + the signal that killed it;
  // 0 with no command, or one still running when the recording stopped
  // (at --duration or a signal: the recorder then ends it, which is not
  // the command's failure).
  static int command_exit_code(int wait_status) {
    if (wait_status < 0) return 0;
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 0;
  }

  static int complain_and_fail(const std::string& where, const std::string& why) {
    complain(where, why);
    return 1;
  }

  std::string command_line() const {
    std::string c = "sframe record";
    if (opt_.all) c += " -a";
    for (std::size_t i = 0; i < opt_.pids.size(); ++i) c += (i ? "," : " -p ") + std::to_string(opt_.pids[i]);
    if (!opt_.command.empty()) {
      c += " --";
      for (const auto& a : opt_.command) c += " " + a;
    }
    return c;
  }

  static void print_summary(const record::RecordSummary& s, const record::RecordOptions& o) {
    std::string stops;
    for (std::size_t i = 0; i < s.stops.size(); ++i)
      if (s.stops[i]) stops += fmt::format("{}{} {}", stops.empty() ? "" : ", ", record::stop_name(i), s.stops[i]);
    std::string status;
    if (s.command_status >= 0 && s.command_status != 0) {
      status = WIFEXITED(s.command_status) ? fmt::format("; the command exited with {}", WEXITSTATUS(s.command_status))
                                           : fmt::format("; the command was killed by signal {}",
                                                         WTERMSIG(s.command_status));
    }
    if (o.check)
      status += fmt::format("; --check: {} samples copied to {}", s.checks, o.check_output);
    if (s.copies_lost) status += fmt::format("; {} stack copies lost", s.copies_lost);
    if (s.modules_refused || s.processes_refused)
      status += fmt::format("; {} module tables and {} process tables the kernel refused (frame pointers there)",
                            s.modules_refused, s.processes_refused);
    const record::TableStats& t = s.tables;
    // Per-sample figures are 0 when there was no sample.
    const auto per = [&](double v) { return s.samples ? v / double(s.samples) : 0.0; };
    // One line of what was recorded (and how the command ended), then one
    // per part: the frames, the walks, the BPF program, the tables, the
    // recorder.
    fmt::print(stderr, "sframe record: {} samples in {:.2f} s, {} lost; {:.0f} bytes per sample ({} records, {} bytes){}\n",
               s.samples, s.seconds, s.lost + s.sideband_lost, per(double(s.bytes)), s.records, s.bytes, status);
    fmt::print(stderr,
               "  {:.1f} frames per sample (kernel {:.1f}, user {:.1f}); user callers from: sframe {}, generated {}, "
               "frame-pointer {}, signal-frame {}\n",
               per(double(s.kernel_frames + s.user_frames)), per(double(s.kernel_frames)), per(double(s.user_frames)),
               s.by_source[1], s.by_source[2], s.by_source[0], s.by_source[3]);
    fmt::print(stderr,
               "  user walks ended: {}; {} samples before their process's tables, {} with a PC in no mapped module's "
               "({} of them unwound in user space from a stack copy)\n",
               stops.empty() ? "none" : stops, s.no_process, s.unmapped_pc, s.deferred);
    fmt::print(stderr,
               "  BPF program: {:.0f} ns per sample ({:.1f} ms of kernel run_time_ns over the samples; {:.0f} ns mean over "
               "its {} runs, other tasks' and CPUs' included), walk mean {:.0f} ns, median {} ns, rows from the row "
               "cache {:.0f}% of {}\n",
               per(double(s.bpf_run_ns)), double(s.bpf_run_ns) / 1e6,
               s.bpf_run_cnt ? double(s.bpf_run_ns) / double(s.bpf_run_cnt) : 0.0, s.bpf_run_cnt, per(double(s.walk_ns)),
               s.walk_ns_median, s.row_lookups ? 100.0 * double(s.row_cache_hits) / double(s.row_lookups) : 0.0,
               s.row_lookups);
    fmt::print(stderr,
               "  tables: {} modules ({} with generated SFrame, {} from the cache), {} pages of {} rows (at most {} in a "
               "page), {:.1f} MB (from {:.1f} MB of .sframe and {:.1f} MB of .eh_frame), {} rules and {} pages left to "
               "frame pointers\n",
               t.modules, t.generated_modules, t.cached_modules, t.pages, t.rows, t.max_page_rows,
               double(t.table_bytes) / 1e6, double(t.sframe_bytes) / 1e6, double(t.eh_frame_bytes) / 1e6,
               t.unsupported_rules, t.overflow_pages);
    fmt::print(stderr, "  set-up {:.0f} ms (BPF load {:.0f} ms), tables {:.0f} ms; recorder CPU {:.0f} ms\n",
               double(s.setup_ns + s.load_ns) / 1e6, double(s.load_ns) / 1e6, double(s.table_ns) / 1e6,
               double(s.recorder_cpu_ns) / 1e6);
  }

  record::RecordOptions opt_;
  std::vector<int> pids_;
  std::string output_, check_output_;
  bool folded_ = false;
  std::string pprof_, flamegraph_;
  std::string walk_ = "sframe";
  std::string cache_;
  bool no_cache_ = false;

  // The XDG base directory specification's cache home.
  static std::string default_cache() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && *xdg == '/') return std::string(xdg) + "/sframepp/record";
    const char* home = std::getenv("HOME");
    if (home && *home == '/') return std::string(home) + "/.cache/sframepp/record";
    return {};
  }
};

}  // namespace

std::unique_ptr<Command> make_record_command() { return std::make_unique<RecordCommand>(); }

}  // namespace sframe::tools
