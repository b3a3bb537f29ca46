// SPDX-License-Identifier: MIT
// `sframe stack PID`: the process layer stops the threads and loads the
// modules, the unwind layer walks each stack, and this file only turns the
// frames into eu-stack-like text or JSON (after the process runs again).
#include "stack_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <limits>
#include <string>
#include <vector>

#include "cli.hpp"
#include "json_stream.hpp"
#include "render.hpp"
#include "sframe/process/process.hpp"
#include "sframe/unwind/unwind.hpp"

namespace sframe::tools {
namespace {

using process::LoadedModule;

// The printable model of one frame: everything the two printers need.
struct FrameLine {
  std::uint64_t pc = 0;
  bool return_address = false;
  // Where its name is looked up: pc - 1 for return addresses.
  std::uint64_t name_pc = 0;
  const LoadedModule* module = nullptr;
  std::string symbol;  // demangled, "" if none
  std::uint64_t offset = 0;
  // Where the rule covering this frame's own PC came from, i.e. the rule
  // that found the next frame ("sframe", "generated", "frame-pointer",
  // "signal frame"), or, for the last frame, the source whose rule failed
  // there ("none": no source covers it).
  std::string rule;
  // -s: the source position of name_pc (line table); -i: the functions
  // active there, innermost first (empty: no DWARF describes it).
  process::SourceFrame source;
  std::vector<process::SourceFrame> inlines;
};

// One printed frame: a physical frame, or (with -i) a function inlined at
// its PC (a frame of its own, with the same PC, as eu-stack -i prints it).
struct ShownFrame {
  const FrameLine* frame = nullptr;
  std::string name;
  // The source position to print (-s), and whether this is the caller of an
  // inlined function rather than the function at the PC itself.
  const process::SourceFrame* source = nullptr;
  bool inline_caller = false;
};

struct ThreadTrace {
  pid_t tid = 0;
  std::string name;
  std::string error;  // the thread could not be stopped or read
  std::vector<FrameLine> frames;
  StopReason reason = StopReason::kOutermost;
  std::uint64_t stop_address = 0;
  // Why the frame-pointer fallback was refused at the last frame ("" if not).
  std::string fp_rejected;
  // Frames to print (with their inline frames under -i), and whether the
  // trace was cut at StackOptions::max_frames.
  std::vector<ShownFrame> shown;
  bool truncated = false;
};

std::string errno_text(const Error& e) {
  // attach()'s ETIMEDOUT: the thread never stopped (uninterruptible sleep).
  if (e.code() == IoErrc::kIoError && e.value == ETIMEDOUT) return "did not stop within 10 s (uninterruptible sleep?)";
  return e.code() == IoErrc::kIoError ? std::string(std::strerror(static_cast<int>(e.value))) : error_text(e);
}

ThreadTrace trace_thread(const process::Thread& t, process::LoadedModules& mods,
                         const process::RemoteMemory& mem, const StackOptions& opt) {
  ThreadTrace tt;
  tt.tid = t.tid;
  tt.name = t.name;
  if (!t.stopped) {
    tt.error = t.error ? errno_text(*t.error) : "not stopped";
    return tt;
  }
  // -n 0: unlimited. The walk stops with kDepthLimit only when a frame
  // beyond the buffer exists (the thread stays stopped: walk again with a
  // larger one, up to the limit; a huge -n allocates only what is walked).
  const std::size_t limit = opt.max_frames == 0 ? std::numeric_limits<std::size_t>::max() : opt.max_frames;
  std::size_t cap = std::min<std::size_t>(limit, 256);
  std::vector<Frame> frames;
  std::vector<process::RuleSource> sources;
  process::WalkOptions wo;
  wo.fp_fallback = opt.fp_fallback;
  process::WalkResult r;
  for (;;) {
    frames.assign(cap, Frame{});
    sources.assign(cap, process::RuleSource::kNone);
    r = mods.walk(mem, t.regs, frames, sources, wo);
    if (cap == limit || r.reason != StopReason::kDepthLimit) break;
    cap = cap > limit / 2 ? limit : cap * 2;
  }
  tt.truncated = cap == limit && r.reason == StopReason::kDepthLimit;
  tt.reason = r.reason;
  tt.stop_address = r.address;
  if (r.fp_rejected_cfa) {
    tt.fp_rejected = "frame pointer refused: its CFA is not above the SP";
  } else if (r.fp_rejected) {
    tt.fp_rejected = fmt::format("frame pointer refused: return address 0x{:x} is in no executable mapping",
                                 r.fp_rejected_ra);
  }
  for (std::size_t i = 0; i < r.count; ++i) {
    const Frame& f = frames[i];
    FrameLine line;
    line.pc = f.pc.value();
    line.return_address = f.pc.is_return_address();
    // A signal trampoline's "return address" is its first instruction (the
    // handler returns to it), not a call's successor: name it as it is.
    line.name_pc = (f.flags & kFrameSignal) ? f.pc.value() : f.pc.lookup_pc();
    line.rule = std::string(process::to_string(sources[i]));
    tt.frames.push_back(std::move(line));
  }
  return tt;
}

// Why the module's source is what it is, in words.
std::string module_why(const LoadedModule& m) {
  std::string why = m.why;
  if (m.generation_pending)
    why += m.source == ModuleSource::kNative
               ? std::string(why.empty() ? "" : "; ") + ".eh_frame not read: no frame lacked SFrame"
               : "; not generated: no frame needed it";
  if (!m.how_opened.empty()) why = why.empty() ? m.how_opened : m.how_opened + "; " + why;
  return why;
}

std::string module_words(const LoadedModule& m) {
  std::string s = fmt::format("0x{:x}-0x{:x} {}{}: {}", m.start, m.end, m.path, m.deleted ? " (deleted)" : "",
                              process::to_string(m.source));
  if (const std::string why = module_why(m); !why.empty()) s += fmt::format(" ({})", why);
  const std::string_view from = elf::source_name(m.symbols.source());
  s += from.empty() ? ", no symbols" : fmt::format(", symbols from {}", from);
  return s;
}

// "FILE", "FILE:LINE" or "FILE:LINE:COLUMN", as eu-stack -s prints them.
std::string source_words(const process::SourceFrame& s) {
  std::string w = s.file;
  if (s.line > 0) {
    w += fmt::format(":{}", s.line);
    if (s.column > 0) w += fmt::format(":{}", s.column);
  }
  return w;
}

template <class Out>
void write_source(Out& out, const process::SourceFrame& s) {
  if (s.file.empty()) return;
  out.member("file", s.file);
  if (s.line > 0) out.member("line", s.line);
  if (s.column > 0) out.member("column", s.column);
}

// The frames to print, eu-stack's way: with -i, a frame that DWARF
// describes is named as DWARF names the innermost function at its PC, and
// each function that one was inlined into follows as a frame of its own
// (same PC, the call site as its source); at most max_frames in all.
void choose_shown(ThreadTrace& t, const StackOptions& opt) {
  const std::size_t limit = opt.max_frames == 0 ? std::numeric_limits<std::size_t>::max() : opt.max_frames;
  for (const FrameLine& f : t.frames) {
    if (t.shown.size() >= limit) {
      t.truncated = true;
      break;
    }
    if (!opt.inlines || f.inlines.empty()) {
      t.shown.push_back({&f, f.symbol, &f.source, false});
      continue;
    }
    for (std::size_t k = 0; k < f.inlines.size(); ++k) {
      if (t.shown.size() >= limit) {
        t.truncated = true;
        break;
      }
      t.shown.push_back({&f, f.inlines[k].function, &f.inlines[k], k > 0});
    }
  }
}

// eu-stack's layout: "PID N - process", then per thread "TID T:" and
// "#N  0x%016x name" lines (the frame number left-aligned in 2 columns).
void print_text(pid_t pid, const process::LoadedModules& mods, const std::vector<ThreadTrace>& traces,
                const StackOptions& opt) {
  std::string out = fmt::format("PID {} - process\n", pid);
  if (opt.verbose) {
    for (const auto& m : mods.modules()) out += fmt::format("module {}\n", module_words(m));
  }
  for (const auto& t : traces) {
    out += fmt::format("TID {}:\n", t.tid);
    if (!t.error.empty()) {
      out += fmt::format("  cannot read thread: {}\n", t.error);
      continue;
    }
    for (std::size_t i = 0; i < t.shown.size(); ++i) {
      const ShownFrame& s = t.shown[i];
      const FrameLine& f = *s.frame;
      std::string line = fmt::format("#{:<2} 0x{:016x}", i, f.pc);
      if (!s.name.empty()) line += " " + s.name;
      if (opt.modules && f.module) line += fmt::format(" - {}", f.module->path);
      if (opt.verbose) line += fmt::format("  [{}]", f.rule);
      out += line + "\n";
      // eu-stack -s: "    FILE:LINE:COLUMN" under the frame.
      if (opt.source && s.source && !s.source->file.empty()) out += "    " + source_words(*s.source) + "\n";
    }
    if (opt.verbose)
      out += fmt::format("stopped: {} ({}{}{})\n", stop_reason_name(t.reason), describe(t.reason),
                         t.stop_address ? fmt::format(" at 0x{:x}", t.stop_address) : std::string(),
                         t.fp_rejected.empty() ? std::string() : "; " + t.fp_rejected);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// The document is written as it is produced: one module, one frame at a
// time. Returns the exit status (1: the document was cut by a failure).
int print_json(pid_t pid, const std::string& pname, const process::LoadedModules& mods,
               const std::vector<ThreadTrace>& traces, const StackOptions& opt) {
  return stream_document("stack", "stack", [&](JsonStream& js) {
    js.member("pid", pid);
    js.member("process", pname);
    js.key("modules");
    js.begin_array();
    for (const auto& m : mods.modules()) {
      js.begin_object();
      js.member("path", m.path);
      js.member("deleted", m.deleted);
      js.member("start", hex(m.start));
      js.member("end", hex(m.end));
      js.member("bias", hex(m.bias));
      js.member("source", process::to_string(m.source));
      if (const std::string why = module_why(m); !why.empty()) js.member("why", why);
      js.member("symbols_from", elf::source_name(m.symbols.source()));
      js.end();
    }
    js.end();
    js.key("threads");
    js.begin_array();
    for (const auto& t : traces) {
      js.begin_object();
      js.member("tid", t.tid);
      js.member("name", t.name);
      if (!t.error.empty()) {
        js.member("error", t.error);
        js.end();
        continue;
      }
      js.key("frames");
      js.begin_array();
      // Physical frames, each with the inline frames shown at its PC.
      for (std::size_t i = 0; i < t.shown.size(); ++i) {
        const ShownFrame& s = t.shown[i];
        const FrameLine& f = *s.frame;
        if (s.inline_caller) continue;
        js.begin_object();
        js.member("pc", hex(f.pc));
        js.member("return_address", f.return_address);
        if (f.module) js.member("module", f.module->path);
        if (!f.symbol.empty()) {
          js.member("symbol", f.symbol);
          js.member("offset", f.offset);
        }
        js.member("rule", f.rule);
        if (opt.inlines && !f.inlines.empty()) js.member("function", s.name);
        if (opt.source && s.source) write_source(js, *s.source);
        if (opt.inlines && !f.inlines.empty()) {
          js.key("inlined_into");
          js.begin_array();
          for (std::size_t k = i + 1; k < t.shown.size() && t.shown[k].inline_caller; ++k) {
            js.begin_object();
            js.member("function", t.shown[k].name);
            if (opt.source) write_source(js, *t.shown[k].source);
            js.end();
          }
          js.end();
        }
        js.end();
      }
      js.end();
      js.member("truncated", t.truncated);
      Json stop = {{"reason", std::string(stop_reason_name(t.reason))},
                   {"description", std::string(describe(t.reason))},
                   {"address", hex(t.stop_address)}};
      if (!t.fp_rejected.empty()) stop["fp_rejected"] = t.fp_rejected;
      js.member("stop", stop);
      js.end();
    }
    js.end();
    return 0;
  });
}

// The tool's own termination handlers (the library installs none): they set
// a flag that attach() polls and the trace loop checks, so Ctrl-C detaches
// and leaves the process running.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_terminate(int) { g_interrupted = 1; }

constexpr int kCaught[] = {SIGINT, SIGTERM, SIGHUP};

struct TerminationHandlers {
  struct sigaction old[std::size(kCaught)] = {};
  TerminationHandlers() {
    g_interrupted = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_terminate;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a sleep between polls ends at once
    for (std::size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &sa, &old[i]);
  }
  ~TerminationHandlers() {
    for (std::size_t i = 0; i < std::size(kCaught); ++i) sigaction(kCaught[i], &old[i], nullptr);
  }
  TerminationHandlers(const TerminationHandlers&) = delete;
  TerminationHandlers& operator=(const TerminationHandlers&) = delete;
};

}  // namespace

namespace {

// A failure of the whole command: one line on stderr and, with --json, a
// JSON document on stdout saying the same (docs/json.md).
int fail(pid_t pid, const StackOptions& opt, int status, const std::string& why) {
  fmt::print(stderr, "sframe: stack: {}\n", why);
  if (opt.json) {
    Json j = envelope("stack");
    j["pid"] = pid;
    j["error"] = why;
    print(json_text(j) + "\n");
  }
  return status;
}

// A kernel thread (kthreadd and its children) has no user-space stack, and
// ptrace refuses it with EPERM even for root, which would read as missing
// privileges. proc(5): /proc/PID/stat field 9, flags, with PF_KTHREAD
// (0x00200000, include/linux/sched.h); fields counted after the ')' that
// ends comm, which may itself hold spaces and parentheses.
bool is_kernel_thread(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  unsigned long long flags = 0;
  for (int i = 3; i <= 9 && fields >> field; ++i)
    if (i == 9) flags = std::strtoull(field.c_str(), nullptr, 10);
  constexpr unsigned long long kPfKthread = 0x00200000;
  return (flags & kPfKthread) != 0;
}

}  // namespace

int run_stack(pid_t pid, const StackOptions& opt) {
  const std::string pname = process::process_name(pid);
  if (is_kernel_thread(pid))
    return fail(pid, opt, 1,
                fmt::format("process {}{} is a kernel thread: it has no user-space stack to unwind", pid,
                            pname.empty() ? "" : fmt::format(" ({})", pname)));
  std::vector<ThreadTrace> traces;
  std::optional<process::LoadedModules> mods;
  const TerminationHandlers handlers;
  {
    process::AttachOptions ao;
    ao.cancel = &g_interrupted;
    auto att = process::Attachment::attach(pid, ao);
    if (!att) {
      if (g_interrupted) return fail(pid, opt, 130, fmt::format("interrupted; process {} detached", pid));
      return fail(pid, opt, 1, fmt::format("cannot attach to process {}: {}", pid, errno_text(att.error())));
    }
    auto maps = process::read_maps(pid);
    if (!maps)  // `att` detaches
      return fail(pid, opt, 1, fmt::format("cannot read /proc/{}/maps: {}", pid, errno_text(maps.error())));
    process::RemoteMemory mem(pid);
    process::ModuleOptions mo;
    mo.generate = opt.generate;
    mo.ignore_sframe_sections = opt.ignore_sframe;
    mods.emplace(process::LoadedModules::load(pid, *maps, mem, mo));
    for (const auto& t : att->threads()) {
      if (g_interrupted) break;
      traces.push_back(trace_thread(t, *mods, mem, opt));
    }
    // Leave the destructor to detach: the process runs again before printing.
  }
  if (g_interrupted) return fail(pid, opt, 130, fmt::format("interrupted; process {} detached", pid));
  // Symbols and source lines are looked up once the process runs again.
  std::optional<process::SourceLines> lines;
  if (opt.source || opt.inlines) lines.emplace(*mods);
  for (auto& t : traces) {
    for (auto& line : t.frames) {
      const auto sym = process::symbolize(*mods, line.name_pc);
      line.module = sym.module;
      if (sym.symbol) {
        line.symbol = sym.module->symbols.display_name(*sym.symbol);
        line.offset = line.pc - (line.name_pc - sym.offset);
      }
      if (opt.source) line.source = lines->line(line.name_pc);
      if (opt.inlines) line.inlines = lines->inline_frames(line.name_pc);
    }
    choose_shown(t, opt);
  }
  int status = 0;
  if (opt.json) {
    status = print_json(pid, pname, *mods, traces, opt);
  } else {
    print_text(pid, *mods, traces, opt);
  }
  // As eu-stack: the cut is said on stderr, and the exit status is 1.
  for (const auto& t : traces) {
    if (!t.truncated) continue;
    std::fflush(stdout);
    fmt::print(stderr, "sframe: stack: tid {}: shown max number of frames ({}, use -n 0 for unlimited)\n", t.tid,
               opt.max_frames);
    status = 1;
  }
  return status;
}

void register_stack_options(CLI::App& stack_cmd, StackOptions& opt) {
  stack_cmd.add_flag("--json", opt.json, "Print JSON (schema: docs/json.md)");
  stack_cmd.add_flag("-v,--verbose", opt.verbose, "Show each module's and frame's unwind source and why traces stop");
  stack_cmd.add_flag("-m,--module", opt.modules, "Show each frame's module");
  stack_cmd.add_option("-n,--max-frames", opt.max_frames,
                       "Frames per thread at most (0: unlimited); more are announced on stderr, exit status 1")
      ->capture_default_str();
  stack_cmd.add_flag("-s,--source", opt.source, "Show each frame's source file:line:column (DWARF line tables)");
  stack_cmd.add_flag("-i,--inlines", opt.inlines,
                     "Show inlined functions as frames of their own and name frames from DWARF (as eu-stack -i)");
  stack_cmd.add_flag("!--no-generate", opt.generate, "Do not generate SFrame from .eh_frame for modules without it");
  stack_cmd.add_flag("--ignore-sframe", opt.ignore_sframe, "Ignore the modules' own SFrame sections");
  stack_cmd.add_flag("!--no-fp-fallback", opt.fp_fallback, "Do not step by frame pointers where SFrame is missing");
}

}  // namespace sframe::tools
