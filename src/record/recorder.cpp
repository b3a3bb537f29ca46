// SPDX-License-Identifier: MIT
// sframepp: the recorder's user space (see recorder.hpp).
#include "recorder.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "bpf/record_abi.h"
#include "perf_data.hpp"
#include "perf_events.hpp"
#include "perf_layout.hpp"
#include "perf_unwind.hpp"
#include "perf_writer.hpp"
#include "record.skel.h"
#include "synthesize.hpp"
#include "table_maps.hpp"
#include "tables.hpp"
#include "time_order.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/format/detail/scratch.hpp"
#include "sframe/process/process.hpp"

namespace sframe::record {
namespace {

static_assert(offsetof(sframe_record_sample, ips) == SFRAME_RECORD_SAMPLE_HEAD);
static_assert(offsetof(sframe_record_copy, stack) == SFRAME_RECORD_COPY_HEAD);

// TimeOrder::Tag::type of a `--check` sample and of a sample to unwind from its
// stack copy (side-band types are PERF_RECORD_*, 0 is a sample of the
// output).
constexpr std::uint32_t kCheckSample = ~std::uint32_t{0};
constexpr std::uint32_t kDeferredSample = kCheckSample - 1;

// The longest wait between two polls of the ring buffers, ms. Each poll
// wakes the recorder on a CPU whose caches the profiled program has taken:
// at ten a second that cost more than the samples it drained.
constexpr long kPollMaxMs = 500;
// The longest wait from a process's exec or dlopen to its tables in the
// maps (a side-band wake-up, a burst's gathering, the push), ms.
constexpr long kPushMaxMs = 100;
// After a side-band wake-up, the wait for the rest of its burst (ns).
constexpr long kGatherNs = 1'000'000;
// The consumer's records are handed over in batches: when this many bytes
// are held, when the oldest has waited this long, and at the end. A
// conversion at every poll (every 500 ms) found its tables (symbols, the
// profile's nodes) gone from the caches the profiled program had taken
// since the last, and cost a tenth more than the same conversion in one
// pass after the recording; held longer, a file a process mapped and
// deleted meanwhile could no longer be read for its symbols (as for a
// perf.data read after the recording), so the wait is bounded.
constexpr std::size_t kHoldBytes = std::size_t{8} << 20;
constexpr std::uint64_t kHoldNs = 10'000'000'000;

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::string errno_text(int e) { return std::strerror(e); }

// libbpf's messages, kept for the error line of a failed load.
std::string g_libbpf_log;
int keep_libbpf_log(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  if (n > 0 && g_libbpf_log.size() < (64u << 10)) g_libbpf_log.append(buf, std::min<std::size_t>(n, sizeof buf - 1));
  return 0;
}

// The last line of libbpf's log that says something.
std::string libbpf_last_line() {
  std::string_view s = g_libbpf_log;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  const auto nl = s.rfind('\n');
  if (nl != std::string_view::npos) s.remove_prefix(nl + 1);
  return std::string(s);
}

class Recording {
 public:
  Recording(const RecordOptions& opt, RecordSummary& sum) : opt_(opt), sum_(sum) {}
  ~Recording() {
    if (rb_) ring_buffer__free(rb_);
    for (bpf_link* l : links_) bpf_link__destroy(l);
    for (int fd : sample_fds_) close(fd);
    if (skel_) record_bpf::destroy(skel_);
    if (stats_fd_ >= 0) close(stats_fd_);
    if (child_ > 0 && !reaped_) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    if (go_fd_ >= 0) close(go_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  std::string run() {
    attr_ = output_attr(false);
    if (!opt_.output.empty())
      if (std::string e = create(writer_, opt_.output, attr_); !e.empty()) return e;
    copy_attr_ = output_attr(true);
    if (opt_.check)
      if (std::string e = create(check_writer_, opt_.check_output, copy_attr_); !e.empty()) return e;
    perf::FileInfo info;
    info.attrs = {attr_};
    perf::SessionOptions so;
    so.symbols = false;
    so.max_stack = SFRAME_RECORD_MAX_FRAMES;
    so.files = opt_.files;
    session_ = std::make_unique<perf::Session>(info, so);
    tables_ = std::make_unique<Tables>(*session_, opt_.table_cache);
    decoder_ = std::make_unique<perf::RecordDecoder>(info.attrs);
    copy_decoder_ = std::make_unique<perf::RecordDecoder>(std::vector{copy_attr_});
    if (opt_.consumer) {
      // The header add_features() writes at the end, as far as a reader
      // looks at it before the records: a kernel frame is named from the
      // copy of kallsyms kept under the kernel's build-id.
      perf::FileInfo head = info;
      head.arch = "x86_64";
      if (std::string id = kernel_build_id(); !id.empty()) {
        perf::BuildIdEntry& b = head.build_ids.emplace_back();
        b.cpumode = perf::kMiscKernel;
        b.build_id = std::move(id);
        b.filename = std::string(perf::kKernelDso);
      }
      opt_.consumer->begin(head);
    }
    if (!opt_.command.empty())
      if (std::string e = start_command(); !e.empty()) return e;
    const std::uint64_t l0 = monotonic_ns();
    if (std::string e = load_bpf(); !e.empty()) return e;
    sum_.load_ns = monotonic_ns() - l0;
    if (std::string e = open_sideband(); !e.empty()) return e;
    const std::uint64_t s0 = monotonic_ns();
    // A command's files (and the vDSO) get their tables before it starts:
    // else its first samples come before them (sent as stack copies until
    // the next poll's push, which waits for an RCU grace period).
    if (!opt_.command.empty() && !opt_.frame_pointers_only) {
      for (const std::string& f : command_files(opt_.command[0])) tables_->preload(f);
      tables_->preload_vdso();
    }
    synthesize();
    push_tables();
    sum_.setup_ns = monotonic_ns() - s0;
    if (std::string e = open_samplers(); !e.empty()) return e;
    const std::uint64_t t0 = monotonic_ns();
    if (child_ > 0)
      if (std::string e = release_command(); !e.empty()) return e;
    // Wait for what needs an answer soon: a side-band record (a process
    // that starts, execs or maps a library has its samples sent as stack
    // copies until its tables are pushed), the command's or a -p process's
    // exit, a signal. The samples' ring is filled without wake-ups
    // (BPF_RB_NO_WAKEUP) and drained at least every kPollMaxMs. A timer at a fixed rate instead
    // cost the recorder more CPU than the rest of a short recording.
    std::vector<pollfd> waits;
    for (const auto& ring : sideband_) waits.push_back({ring->fd(), POLLIN, 0});
    const std::size_t n_sideband = waits.size();
    const int pidfd = child_ > 0 ? static_cast<int>(syscall(SYS_pidfd_open, child_, 0)) : -1;
    if (pidfd >= 0) waits.push_back({pidfd, POLLIN, 0});
    // -p: each process's exit wakes the loop too (its pidfd, then left out
    // of the waits: it stays readable).
    const std::size_t first_pid_wait = waits.size();
    std::vector<int> pid_fds;
    if (!opt_.pids.empty() && opt_.command.empty() && !opt_.all)
      for (pid_t p : opt_.pids)
        if (const int fd = static_cast<int>(syscall(SYS_pidfd_open, p, 0)); fd >= 0) {
          waits.push_back({fd, POLLIN, 0});
          pid_fds.push_back(fd);
        }
    for (;;) {
      int timeout = static_cast<int>(kPollMaxMs);
      if (opt_.duration > 0) {
        const double left = opt_.duration - double(monotonic_ns() - t0) / 1e9;
        timeout = std::clamp(static_cast<int>(left * 1000) + 1, 0, timeout);
      }
      // Without a pidfd (a kernel before 5.3), the command's exit is seen
      // at the next timeout.
      if (poll(waits.data(), waits.size(), timeout) > 0 &&
          std::any_of(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(n_sideband),
                      [](const pollfd& w) { return w.revents & POLLIN; })) {
        // A process start or dlopen writes its records in a burst: take
        // them in one pass.
        timespec gather{0, kGatherNs};
        nanosleep(&gather, nullptr);
      }
      for (std::size_t i = first_pid_wait; i < waits.size(); ++i)
        if (waits[i].revents & POLLIN) waits[i].fd = -1;  // poll() skips it
      drain(false);
      if (!werr_.empty()) break;
      if (opt_.stop && opt_.stop->load()) break;
      if (opt_.duration > 0 && double(monotonic_ns() - t0) / 1e9 >= opt_.duration) break;
      if (child_ > 0 && !reaped_) {
        int status = 0;
        if (waitpid(child_, &status, WNOHANG) == child_) {
          reaped_ = true;
          sum_.command_status = status;
          break;
        }
      }
      if (!opt_.pids.empty() && opt_.command.empty() && !opt_.all) {
        bool any = false;
        for (pid_t p : opt_.pids) any = any || kill(p, 0) == 0 || errno != ESRCH;
        if (!any) break;
      }
    }
    if (pidfd >= 0) close(pidfd);
    for (int fd : pid_fds) close(fd);
    if (!werr_.empty()) return werr_;
    sum_.seconds = double(monotonic_ns() - t0) / 1e9;
    // Stop sampling, then take what is left.
    for (bpf_link* l : links_) bpf_link__destroy(l);
    links_.clear();
    for (int fd : sample_fds_) close(fd);
    sample_fds_.clear();
    drain(true);
    if (!werr_.empty()) return werr_;
    read_counters();
    // Kernel frames are named from kallsyms: a copy in perf's build-id
    // cache, as perf record leaves one, spares each reader (the --folded
    // conversion next) the kernel's formatting of /proc/kallsyms.
    if (sum_.kernel_frames > 0)
      if (auto id = build_ids_.find(std::string(perf::kKernelDso)); id != build_ids_.end())
        cache_kallsyms(perf::default_buildid_dir(), id->second);
    // After the copy: a first recording's conversion reads it too.
    hand_over(true);
    return finish();
  }

 private:
  // The side-band records a dummy event writes (MMAP2 with build-ids,
  // COMM with exec, FORK, EXIT; sample_id on every record; CLOCK_MONOTONIC
  // times), and what the output's event says its records are: one setting
  // for both, so the copied records match the attribute that describes them.
  static void set_sideband(perf_event_attr& a) {
    a.mmap = 1;
    a.mmap2 = 1;
    a.comm = 1;
    a.comm_exec = 1;
    a.task = 1;
    a.sample_id_all = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.build_id = 1;
    a.exclude_guest = 1;
  }

  static std::string create(std::unique_ptr<perf::PerfWriter>& out, const std::string& path,
                            const perf::EventAttr& attr) {
    auto w = perf::PerfWriter::create(path, false);
    if (!w) return path + ": cannot write: " + errno_text(static_cast<int>(w.error().value));
    out = std::make_unique<perf::PerfWriter>(std::move(*w));
    if (auto r = out->set_attrs(std::span(&attr, 1)); !r) return path + ": cannot write the attributes";
    return {};
  }

  // The one event of the output: cpu-clock with callchains; the side-band
  // records share its sample_id layout (TID, TIME, CPU), so they are
  // copied as the kernel wrote them. The `--check` output's event is perf
  // record --call-graph=dwarf's: the kernel's callchain, user registers and
  // stack (the same sample_id layout, so the same side-band records).
  perf::EventAttr output_attr(bool check) const {
    namespace L = perf::layout::attr;
    perf::EventAttr a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = opt_.frequency;
    a.sample_type = perf::kSampleIp | perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu |
                    perf::kSamplePeriod | perf::kSampleCallchain;
    perf_event_attr k{};
    set_sideband(k);
    k.freq = 1;
    if (check) {
      a.sample_type |= perf::kSampleRegsUser | perf::kSampleStackUser;
      a.sample_regs_user = SFRAME_RECORD_COPY_REGS_MASK;
      a.sample_stack_user = SFRAME_RECORD_COPY_STACK;
      k.exclude_callchain_user = 1;
    }
    std::uint64_t flags = 0;
    std::memcpy(&flags, reinterpret_cast<const std::byte*>(&k) + L::kFlags, 8);
    a.flags = flags;
    const std::int32_t clockid = CLOCK_MONOTONIC;
    std::memcpy(a.raw.data() + L::kClockid, &clockid, 4);
    const std::uint16_t max_stack = SFRAME_RECORD_MAX_FRAMES;
    std::memcpy(a.raw.data() + L::kSampleMaxStack, &max_stack, 2);
    a.name = "cpu-clock";
    return a;
  }

  // --- the command ----------------------------------------------------

  // Forks the command, held before exec until release_command().
  std::string start_command() {
    int go[2], err[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return "pipe: " + errno_text(errno);
    std::vector<char*> argv;
    for (const std::string& s : opt_.command) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return "fork: " + errno_text(errno);
    if (pid == 0) {
      close(go[1]);
      close(err[0]);
      char c;
      if (read(go[0], &c, 1) != 1) _exit(127);
      execvp(argv[0], argv.data());
      const int e = errno;
      (void)!write(err[1], &e, sizeof e);
      _exit(127);
    }
    close(go[0]);
    close(err[1]);
    go_fd_ = go[1];
    err_fd_ = err[0];
    child_ = pid;
    return {};
  }

  std::string release_command() {
    const char c = 1;
    if (write(go_fd_, &c, 1) != 1) return "cannot start the command: " + errno_text(errno);
    close(go_fd_);
    go_fd_ = -1;
    int e = 0;
    const ssize_t n = read(err_fd_, &e, sizeof e);
    close(err_fd_);
    err_fd_ = -1;
    if (n == sizeof e) {
      waitpid(child_, nullptr, 0);
      reaped_ = true;
      return opt_.command[0] + ": cannot run: " + errno_text(e);
    }
    return {};
  }

  // --- BPF --------------------------------------------------------------

  std::string load_bpf() {
    libbpf_set_print(keep_libbpf_log);
    skel_ = record_bpf::open();
    if (!skel_) return "cannot open the BPF program: " + errno_text(errno);
    skel_->rodata->frame_pointers_only = opt_.frame_pointers_only ? 1 : 0;
    skel_->rodata->check_every = opt_.check;
    // The ring buffers hold what arrives while user space does not drain
    // them (the wait between polls, and the build of a big module's table):
    // kPollMaxMs and a quarter of a second of every CPU's samples. A stack
    // copy (8 KB and the registers) is wanted for one sample in N with
    // `--check N`, and for the samples of a process between its exec or
    // dlopen and the push of its tables: that ring holds as many of the
    // first as the samples' ring holds samples, and kPushMaxMs of samples
    // as copies of the second kind. Allocating (zeroing) and
    // mapping the buffers costs start-up CPU in proportion to their size,
    // so they are not made larger than that (lost samples and copies are
    // counted in the summary).
    const double rate = double(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))) * opt_.frequency;
    const auto ring_size = [](double bytes) {
      return std::bit_ceil(static_cast<std::uint32_t>(std::clamp(bytes, double(1 << 20), double(256 << 20))));
    };
    constexpr double kCopyBytes = SFRAME_RECORD_COPY_HEAD + SFRAME_RECORD_COPY_STACK;
    const double undrained_s = kPollMaxMs / 1000.0 + 0.25;
    bpf_map__set_max_entries(skel_->maps.samples, ring_size(rate * undrained_s * 512));
    bpf_map__set_max_entries(skel_->maps.copies,
                             ring_size(rate * kPushMaxMs / 1000 * kCopyBytes +
                                       (opt_.check ? rate * undrained_s / opt_.check * kCopyBytes : 0)));
    if (record_bpf::load(skel_) != 0) {
      const int e = errno;
      return "cannot load the BPF program: " + errno_text(e) + " (" + libbpf_last_line() + ")";
    }
    if (!opt_.frame_pointers_only)
      maps_ = std::make_unique<TableMaps>(bpf_map__fd(skel_->maps.processes), bpf_map__fd(skel_->maps.modules));
    // The kernel's per-program run time and count, while recording.
    stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
    // The side-band records kept: those of the recorded processes and of
    // the processes they fork (keep()).
    if (!opt_.all) {
      for (pid_t p : opt_.pids) tracked_.insert(static_cast<std::uint32_t>(p));
      if (child_ > 0) tracked_.insert(static_cast<std::uint32_t>(child_));
    }
    rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.samples), &Recording::on_sample, this, nullptr);
    if (!rb_) return "cannot map the BPF ring buffer: " + errno_text(errno);
    if (ring_buffer__add(rb_, bpf_map__fd(skel_->maps.copies), &Recording::on_copy, this) != 0)
      return "cannot map the BPF ring buffer of stack copies: " + errno_text(errno);
    return {};
  }

  // The sampling events, each with the BPF program: with -a, one per CPU;
  // else one per recorded thread (the command's, before it starts; every
  // thread of each -p process), with `inherit`, so that the threads and
  // processes they create get events of their own, program included, from
  // the kernel at fork. No sample of another task then runs the program.
  std::string open_samplers() {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = opt_.frequency;
    const auto open = [&](pid_t pid, int cpu) -> std::string {
      const int fd = perf_event_open(&a, pid, cpu);
      if (fd < 0) {
        if (pid > 0 && errno == ESRCH) return {};  // a thread that has just ended
        return "perf_event_open(cpu-clock, " + (pid > 0 ? "thread " + std::to_string(pid) : "cpu " + std::to_string(cpu)) +
               "): " + errno_text(errno);
      }
      sample_fds_.push_back(fd);
      bpf_link* l = bpf_program__attach_perf_event(skel_->progs.on_sample, fd);
      if (!l) return "cannot attach the BPF program to cpu-clock: " + errno_text(errno);
      links_.push_back(l);
      return {};
    };
    if (opt_.all) {
      for (int cpu : online_cpus())
        if (std::string e = open(-1, cpu); !e.empty()) return e;
      if (sample_fds_.empty()) return "no online CPU (/sys/devices/system/cpu/online)";
      return {};
    }
    a.inherit = 1;
    if (child_ > 0)
      if (std::string e = open(child_, -1); !e.empty()) return e;
    // A thread created before its creator's event was opened inherits
    // none: the threads are listed again until no new one shows (a bounded
    // number of times: a process may create threads without end).
    std::unordered_set<pid_t> opened;
    for (pid_t p : opt_.pids) {
      bool more = true;
      for (int pass = 0; more && pass < 16; ++pass) {
        more = false;
        for (pid_t t : threads_of(p)) {
          if (!opened.insert(t).second) continue;
          more = true;
          if (std::string e = open(t, -1); !e.empty()) return e;
        }
      }
    }
    return {};
  }

  // A walked sample (record_abi.h), into the output in time order.
  static int on_sample(void* ctx, void* data, std::size_t size) {
    auto* self = static_cast<Recording*>(ctx);
    if (size < SFRAME_RECORD_SAMPLE_HEAD) return 0;
    const auto* s = static_cast<const sframe_record_sample*>(data);
    std::vector<std::byte>& b = self->merge_.buffer();
    const std::size_t at = b.size();
    if (encode_walked(b, self->attr_, data, size, self->chain_)) self->merge_.add(s->time, at);
    return 0;
  }

  // A stack copy (record_abi.h): an ordinary --call-graph=dwarf sample, for
  // the `--check` output and, deferred, to be unwound in time order.
  static int on_copy(void* ctx, void* data, std::size_t size) {
    auto* self = static_cast<Recording*>(ctx);
    if (size < SFRAME_RECORD_COPY_HEAD) return 0;
    const auto* c = static_cast<const sframe_record_copy*>(data);
    std::vector<std::byte>& b = self->merge_.buffer();
    const std::size_t at = b.size();
    if (!encode_copy(b, self->copy_attr_, data, size, self->chain_)) return 0;
    // One encoding serves both uses.
    if (c->flags & SFRAME_RECORD_COPY_CHECK) self->merge_.add(c->time, at, {kCheckSample});
    if (c->flags & SFRAME_RECORD_COPY_DEFERRED) self->merge_.add(c->time, at, {kDeferredSample});
    return 0;
  }

  // --- side band --------------------------------------------------------

  std::string open_sideband() {
    for (int cpu : online_cpus()) {
      perf_event_attr a{};
      a.size = sizeof a;
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_DUMMY;
      a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
      set_sideband(a);
      // A wake-up at every record: a new process or library needs its
      // tables pushed (the recording loop waits for these).
      a.watermark = 1;
      a.wakeup_watermark = 1;
      auto ring = std::make_unique<PerfRing>();
      if (std::string e = ring->open(a, cpu, 64); !e.empty()) return "side band (dummy event): " + e;
      sideband_.push_back(std::move(ring));
    }
    return {};
  }

  void take_sideband(const perf_event_header& h, std::span<const std::byte> rec) {
    // Trailer (sample_id_all, TID|TIME|CPU): pid, tid; time; cpu, reserved.
    if (rec.size() < sizeof h + 24) return;
    const std::byte* end = rec.data() + rec.size();
    const std::uint64_t time = perf::load_le<std::uint64_t>(end - 16);
    const std::uint32_t pid = perf::load_le<std::uint32_t>(end - 24);
    if (h.type == PERF_RECORD_LOST) {
      if (rec.size() >= sizeof h + 16) sum_.sideband_lost += perf::load_le<std::uint64_t>(rec.data() + 16);
      return;
    }
    if (h.type != PERF_RECORD_MMAP2 && h.type != PERF_RECORD_COMM && h.type != PERF_RECORD_FORK &&
        h.type != PERF_RECORD_EXIT)
      return;
    TimeOrder::Tag tag{h.type, pid, 0};
    if (h.type == PERF_RECORD_FORK) {
      tag.pid = perf::load_le<std::uint32_t>(rec.data() + sizeof h);
      tag.ppid = perf::load_le<std::uint32_t>(rec.data() + sizeof h + 4);
    }
    std::vector<std::byte>& b = merge_.buffer();
    const std::size_t at = b.size();
    b.insert(b.end(), rec.begin(), rec.end());
    merge_.add(time, at, tag);
  }

  // Whether side-band record `p` belongs to a recorded process, decided in
  // time order: a FORK of a recorded process adds the child before its
  // COMM and MMAP2 records, which another CPU's ring may have held.
  bool keep(const TimeOrder::Tag& p) {
    if (p.type == 0 || p.type == kCheckSample || p.type == kDeferredSample || opt_.all) return true;
    if (p.type == PERF_RECORD_FORK) {
      if (!tracked_.count(p.ppid) && !tracked_.count(p.pid)) return false;
      tracked_.insert(p.pid);
      return true;
    }
    return tracked_.count(p.pid) != 0;
  }

  // A build-id MMAP2 (PERF_RECORD_MISC_MMAP_BUILD_ID): u8 size, 3 pad,
  // 20 bytes of id, where maj/min/ino/ino_generation are otherwise.
  void note_build_id(std::span<const std::byte> rec) {
    if (rec.size() < sizeof(perf_event_header) ||
        !(perf::load_le<std::uint16_t>(rec.data() + 4) & perf::kMiscMmapBuildId))
      return;
    constexpr std::size_t kIdAt = 8 + 4 + 4 + 8 + 8 + 8;
    constexpr std::size_t kNameAt = kIdAt + 24 + 4 + 4;
    if (rec.size() < kNameAt + 1 + 24) return;
    const std::size_t n = std::min<std::size_t>(static_cast<std::uint8_t>(rec[kIdAt]), 20);
    const std::size_t name_end = rec.size() - 24;
    std::string name;
    for (std::size_t i = kNameAt; i < name_end && rec[i] != std::byte{0}; ++i) name += static_cast<char>(rec[i]);
    if (name.empty() || name.front() != '/') return;
    if (n) build_ids_.emplace(name, perf::lowercase_hex(rec.subspan(kIdAt + 4, n)));
  }

  // --- writing and feeding ---------------------------------------------

  // One record into the output (`to_check`: the `--check` output too).
  void emit(std::span<const std::byte> rec, bool to_main, bool to_check) {
    if (!werr_.empty()) return;
    if (to_main) {
      if (writer_ && !writer_->write(rec)) werr_ = opt_.output + ": cannot write";
      if (opt_.consumer) hold(rec);
      ++sum_.records;
      sum_.bytes += rec.size();
    }
    if (to_check && check_writer_ && !check_writer_->write(rec)) werr_ = opt_.check_output + ": cannot write";
  }

  // Keeps `rec` for the consumer, to be handed over by hand_over().
  void hold(std::span<const std::byte> rec) {
    // Reserved whole, once: the pages are touched only as records fill
    // them, and a vector that grew by doubling touched (faulted in) twice
    // the bytes it held, in fresh blocks at each growth. Scratch pages, on
    // transparent huge pages where the system gives them on request: a
    // long recording's records faulted in a 4 KiB page at a time cost
    // more than copying them here.
    if (held_.capacity() == 0) held_.reserve(kHoldBytes);
    if (held_.empty()) held_since_ = monotonic_ns();
    held_.insert(held_.end(), rec.begin(), rec.end());
  }

  // The records held for the consumer, in their order, if there are enough
  // of them or the oldest has waited long enough (`all`: in any case).
  void hand_over(bool all) {
    if (!opt_.consumer || held_.empty()) return;
    if (!all && held_.size() < kHoldBytes && monotonic_ns() - held_since_ < kHoldNs) return;
    // Each record is whole and starts with its perf_event_header (hold()).
    for (std::size_t at = 0; at + sizeof(perf_event_header) <= held_.size();) {
      perf_event_header h;
      std::memcpy(&h, held_.data() + at, sizeof h);
      if (h.size < sizeof h || h.size > held_.size() - at) break;
      opt_.consumer->record(std::span(held_.data() + at, h.size));
      at += h.size;
    }
    held_.clear();
  }

  void put(std::vector<std::byte>& rec) {
    emit(rec, true, true);
    feed(rec);
    rec.clear();
  }

  // A side-band or synthesized record, in time order, into the process
  // model; the processes it changes get their tables pushed.
  void feed(std::span<const std::byte> bytes) {
    perf::Record r;
    if (!decoder_->decode(bytes, r) || r.type == perf::kRecordSample) return;
    if (opt_.frame_pointers_only) return;
    session_->process(r);
    switch (r.type) {
      case perf::kRecordMmap2:
        if (r.mmap.exec && r.mmap.pid != ~std::uint32_t{0}) touched_.insert(r.mmap.pid);
        break;
      case perf::kRecordFork:
        if (r.task.pid != r.task.ppid) touched_.insert(r.task.pid);
        break;
      case perf::kRecordExit:
        if (r.task.pid == r.task.tid) {
          touched_.erase(r.task.pid);
          gone_.push_back(r.task.pid);
        }
        break;
      default:
        break;
    }
  }

  // The process tables changed and the module tables built since the last
  // push, into the BPF maps.
  void push_tables() {
    if (!maps_) return;
    const std::uint64_t t0 = monotonic_ns();
    const std::vector<std::uint32_t> touched(touched_.begin(), touched_.end());
    maps_->push(*tables_, touched, gone_);
    touched_.clear();
    gone_.clear();
    sum_.table_ns += monotonic_ns() - t0;
  }

  // As perf record's synthesized events (synthesize.hpp), written and fed
  // to the process model as they come.
  void synthesize() {
    Synthesizer syn(attr_, [this](std::vector<std::byte>& rec) { put(rec); }, build_ids_);
    syn.kernel();
    std::vector<pid_t> pids = opt_.all ? all_processes() : opt_.pids;
    for (pid_t p : pids) syn.process(p);
  }

  // --- merging and writing ---------------------------------------------

  // Writes the records older than the rings' read point (all at the end),
  // in time order; later ones wait for the next pass, since a ring read
  // later may still hold older records.
  void drain(bool all) {
    const std::uint64_t now = monotonic_ns();
    ring_buffer__consume(rb_);
    for (auto& ring : sideband_)
      ring->read([this](const perf_event_header& h, std::span<const std::byte> rec) { take_sideband(h, rec); });
    // A record stamped just before `now` may not be committed to its ring
    // yet (its writer was interrupted between the two): 1 ms of margin.
    const std::uint64_t cutoff = all ? ~std::uint64_t{0} : now - std::min<std::uint64_t>(now, 1'000'000);
    const std::size_t n = merge_.take(cutoff, [this](const TimeOrder::Tag& t, std::span<const std::byte> rec) {
      if (!werr_.empty() || !keep(t)) return;
      if (t.type == PERF_RECORD_MMAP2) note_build_id(rec);
      if (t.type == kDeferredSample) {
        unwind_deferred(rec);
        return;
      }
      const bool side_band = t.type != 0 && t.type != kCheckSample;
      if (side_band) feed(rec);
      emit(rec, t.type != kCheckSample, t.type != 0);
    });
    push_tables();
    if (n) {
      std::vector<std::byte> round;
      perf::encode_finished_round(round);
      emit(round, true, true);
    }
    if (!all) hand_over(false);
  }

  // A deferred sample, unwound now that the records before it are in the
  // process model, written as the walked ones are (sframe perf inject's
  // conversion).
  void unwind_deferred(std::span<const std::byte> rec) {
    perf::Record r;
    if (!copy_decoder_->decode(rec, r) || r.type != perf::kRecordSample) return;
    perf::unwound_callchain(r, session_->unwind(r), chain_);
    rewritten_.clear();
    if (perf::rewrite_sample(rewritten_, r, chain_)) emit(rewritten_, true, false);
  }

  void read_counters() {
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu > 0) {
      std::vector<sframe_record_counters> per(static_cast<std::size_t>(ncpu));
      const std::uint32_t zero = 0;
      if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &zero, per.data()) == 0) add_counters(per, sum_);
    }
    bpf_prog_info info{};
    std::uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(bpf_program__fd(skel_->progs.on_sample), &info, &len) == 0) {
      sum_.bpf_run_ns = info.run_time_ns;
      sum_.bpf_run_cnt = info.run_cnt;
    }
  }

  std::string finish() {
    if (writer_ && !add_features(*writer_, opt_.argv, attr_, build_ids_)) return opt_.output + ": cannot write";
    if (check_writer_ && (!add_features(*check_writer_, opt_.argv, copy_attr_, build_ids_) || !check_writer_->finish()))
      return opt_.check_output + ": cannot write";
    if (writer_ && !writer_->finish()) return opt_.output + ": cannot write";
    if (tables_) sum_.tables = tables_->stats();
    if (maps_) {
      sum_.modules_refused = maps_->modules_refused();
      sum_.processes_refused = maps_->processes_refused();
    }
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      sum_.recorder_cpu_ns = static_cast<std::uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
                             static_cast<std::uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
    return {};
  }

  const RecordOptions& opt_;
  RecordSummary& sum_;
  perf::EventAttr attr_, copy_attr_;
  std::unique_ptr<perf::PerfWriter> writer_, check_writer_;
  std::unique_ptr<perf::Session> session_;
  std::unique_ptr<Tables> tables_;
  std::unique_ptr<TableMaps> maps_;  // null: frame pointers only
  std::unique_ptr<perf::RecordDecoder> decoder_, copy_decoder_;
  std::unordered_set<std::uint32_t> touched_;
  std::vector<std::uint32_t> gone_;
  record_bpf* skel_ = nullptr;
  ring_buffer* rb_ = nullptr;
  int stats_fd_ = -1;
  std::vector<bpf_link*> links_;
  std::vector<int> sample_fds_;
  std::vector<std::unique_ptr<PerfRing>> sideband_;  // one per CPU
  std::unordered_set<std::uint32_t> tracked_;
  std::map<std::string, std::string> build_ids_;
  TimeOrder merge_;
  std::vector<std::byte, sframe::detail::ScratchAllocator<std::byte>> held_;  // for the consumer (hold())
  std::uint64_t held_since_ = 0;
  std::vector<std::uint64_t> chain_;
  std::vector<std::byte> rewritten_;
  std::string werr_;
  pid_t child_ = -1;
  bool reaped_ = false;
  int go_fd_ = -1, err_fd_ = -1;
};

}  // namespace

std::string unavailable_reason() {
  if (geteuid() != 0)
    return "needs root (CAP_BPF and CAP_PERFMON) to load its BPF program and open system-wide cpu-clock events";
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return "the running kernel has no BTF (/sys/kernel/btf/vmlinux: " + errno_text(errno) +
           "): its BPF program reads the sampled task's saved user registers through it (bpf_task_pt_regs)";
  // bpf(BPF_PROG_LOAD) of the smallest program: BPF refused (e.g.
  // kernel.unprivileged_bpf_disabled does not apply to root; a kernel
  // without CONFIG_BPF_SYSCALL or a seccomp filter does).
  if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, nullptr) != 1)
    return "BPF is not available: the kernel refused a perf_event BPF program (bpf(): " + errno_text(errno) + ")";
  return {};
}

std::string record(const RecordOptions& opt, RecordSummary& summary) {
  if (std::string why = unavailable_reason(); !why.empty()) return why;
  if (opt.frequency == 0) return "-F 0: the frequency must be at least 1";
  Recording r(opt, summary);
  return r.run();
}

}  // namespace sframe::record
