// SPDX-License-Identifier: MIT
// sframepp: records for what runs before `sframe record` starts
// (synthesize.hpp).
#include "synthesize.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <optional>
#include <string_view>

#include "bpf/record_abi.h"
#include "file_bytes.hpp"
#include "kallsyms.hpp"
#include "perf_unwind.hpp"
#include "perf_layout.hpp"
#include "perf_writer.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/elf/output_file.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/process/process.hpp"

namespace sframe::record {
namespace {

// The numeric entries of directory `dir` (/proc, /proc/PID/task).
std::vector<std::uint32_t> numbers_in(const std::string& dir) {
  std::vector<std::uint32_t> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long v = std::strtol(e->d_name, &end, 10);
      if (end && *end == '\0' && v > 0) out.push_back(static_cast<std::uint32_t>(v));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The length of the running kernel's text from /proc/iomem: on x86-64 its
// "Kernel code" resource spans [__pa(_text), __pa(_etext) - 1]
// (arch/x86/kernel/setup.c). 0 when iomem hides addresses (it prints zeros
// to all but root) or lacks the line.
std::uint64_t iomem_kernel_code_size() {
  std::ifstream in("/proc/iomem");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.ends_with(" : Kernel code")) continue;
    char* end = nullptr;
    const std::uint64_t lo = std::strtoull(line.c_str(), &end, 16);
    if (!end || *end != '-') return 0;
    const std::uint64_t hi = std::strtoull(end + 1, nullptr, 16);
    return hi > lo ? hi - lo + 1 : 0;
  }
  return 0;
}

// [_text, _etext) of the running kernel. /proc/kallsyms lists symbols by
// address, _text among its first lines (after the per-CPU ones), _etext
// some 100,000 lines on: having the kernel format those costs about as
// much CPU as the rest of the recorder's set-up, so the length comes from
// /proc/iomem where it can, and kallsyms is read on to _etext only where
// not.
std::optional<std::pair<std::uint64_t, std::uint64_t>> kernel_text() {
  std::ifstream in("/proc/kallsyms");
  std::string line;
  std::uint64_t text = 0, etext = 0;
  while (std::getline(in, line) && !(text && etext)) {
    const auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const std::string_view name = std::string_view(line).substr(sp + 1);
    if (name == "_text" || name == "_etext") {
      const std::uint64_t a = std::strtoull(line.c_str(), nullptr, 16);
      (name == "_text" ? text : etext) = a;
      if (name == "_text" && a != 0)
        if (const std::uint64_t size = iomem_kernel_code_size()) etext = a + size;
    }
  }
  if (!text || etext <= text) return std::nullopt;
  return std::make_pair(text, etext);
}

}  // namespace

std::string cache_kallsyms(const std::string& buildid_dir, const std::string& build_id) {
  if (build_id.empty()) return {};
  const std::string path = perf::kallsyms_cache_path(buildid_dir, build_id);
  const std::string index_path = perf::kallsyms_index_path(buildid_dir, build_id);
  const bool have_copy = ::access(path.c_str(), F_OK) == 0;
  if (have_copy && ::access(index_path.c_str(), F_OK) == 0) return {};
  const auto errno_text = [](std::uint64_t e) { return std::string(std::strerror(static_cast<int>(e))); };
  // `bytes` as the file `to`, through a temporary file renamed; what failed.
  const auto write_file = [&](const std::string& to, std::span<const std::byte> bytes,
                              OutputFile::Durability d) -> std::string {
    auto out = OutputFile::create(to);
    if (!out) return to + ": " + errno_text(out.error().value);
    if (auto w = out->write(bytes); !w) return to + ": " + errno_text(w.error().value);
    if (auto c = out->commit(d); !c) return to + ": " + errno_text(c.error().value);
    return {};
  };
  // Read as the readers read it (file_bytes.hpp); a real kallsyms is some
  // 5-10 MB, and 64 MiB bounds the copy. A copy perf made has no index
  // yet: it is indexed as it is.
  perf::detail::FileBytes kallsyms;
  const std::string source = have_copy ? path : "/proc/kallsyms";
  if (const int e = kallsyms.open(source, std::size_t{64} << 20); e != 0)
    return source + ": " + errno_text(static_cast<std::uint64_t>(e));
  if (kallsyms.truncated()) return source + ": larger than 64 MiB";
  const std::string_view text = kallsyms.text();
  // Addresses hidden (kptr_restrict): the copy would name nothing.
  if (perf::detail::kallsyms_address(text, "_text") == 0) return {};
  if (!have_copy) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) return path + ": " + ec.message();
    if (std::string e = write_file(path, kallsyms.bytes(), OutputFile::Durability::kSynced); !e.empty()) return e;
  }
  // The index the conversions would otherwise build from the copy at every
  // reading (a scan of all its lines). Not synced: a file a crash cuts
  // short fails its checks when read, and the readers scan instead.
  return write_file(index_path, perf::detail::KallsymsIndex(text).save(), OutputFile::Durability::kUnsynced);
}

std::string kernel_build_id() {
  std::ifstream in("/sys/kernel/notes", std::ios::binary);
  std::vector<char> bytes(64 << 10);  // a kernel's notes take a few hundred bytes
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  return elf::gnu_build_id(std::as_bytes(std::span(bytes))).value_or("");
}

namespace {

perf::SampleId id_of(std::uint32_t pid, std::uint32_t tid) {
  perf::SampleId id;
  id.has = perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu;
  id.pid = pid;
  id.tid = tid;
  return id;
}

}  // namespace

std::vector<pid_t> all_processes() {
  std::vector<pid_t> out;
  for (std::uint32_t p : numbers_in("/proc")) out.push_back(static_cast<pid_t>(p));
  return out;
}

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> out;
  for (std::uint32_t t : numbers_in("/proc/" + std::to_string(pid) + "/task")) out.push_back(static_cast<pid_t>(t));
  return out;
}

std::vector<std::string> command_files(const std::string& argv0) {
  std::string exe = argv0;
  if (exe.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    exe.clear();
    for (std::size_t at = 0; at <= dirs.size();) {
      const std::size_t end = std::min(dirs.find(':', at), dirs.size());
      const std::string cand = (end > at ? dirs.substr(at, end - at) : ".") + "/" + argv0;
      if (access(cand.c_str(), X_OK) == 0) {
        exe = cand;
        break;
      }
      at = end + 1;
    }
  }
  std::vector<std::string> out;
  const auto add = [&out](const std::string& p) {
    char real[PATH_MAX];
    if (realpath(p.c_str(), real)) out.emplace_back(real);
  };
  if (exe.empty()) return out;
  auto f = elf::ElfFile::open(exe);
  if (!f) return out;
  add(exe);
  std::string interp;
  Elf* e = static_cast<Elf*>(f->native_handle());
  std::size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) == 0) {
    for (std::size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_type != PT_INTERP || ph.p_filesz > PATH_MAX) continue;
      std::size_t size = 0;
      const char* raw = elf_rawfile(e, &size);
      if (raw && ph.p_offset + ph.p_filesz <= size) interp.assign(raw + ph.p_offset, strnlen(raw + ph.p_offset, ph.p_filesz));
    }
  }
  if (interp.empty()) return out;
  add(interp);
  // The interpreter's list mode prints "NAME => PATH (ADDRESS)" per library.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return out;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    execl(interp.c_str(), interp.c_str(), "--list", exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while (pid > 0 && (n = read(pipefd[0], buf, sizeof buf)) > 0 && text.size() < (1u << 20)) text.append(buf, static_cast<std::size_t>(n));
  close(pipefd[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const std::size_t arrow = line.find("=> /");
    const std::size_t from = arrow != std::string::npos ? arrow + 3 : line.find_first_not_of(" \t");
    if (from == std::string::npos || line[from] != '/') continue;
    add(line.substr(from, line.find(" (", from) - from));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Synthesizer::Synthesizer(const perf::EventAttr& attr, std::function<void(std::vector<std::byte>&)> put,
                         std::map<std::string, std::string>& build_ids)
    : attr_(attr), put_(std::move(put)), build_ids_(build_ids) {}

std::string Synthesizer::file_build_id(const std::string& path) {
  auto [it, fresh] = file_ids_.try_emplace(path);
  if (fresh)
    if (auto f = elf::ElfFile::open(path))
      if (auto id = elf::build_id(*f)) it->second = *id;
  return it->second;
}

void Synthesizer::kernel() {
  auto text = kernel_text();
  if (!text) return;
  perf::Mmap m;
  m.pid = ~std::uint32_t{0};
  m.start = text->first;
  m.len = text->second - text->first;
  m.pgoff = text->first;
  m.prot = PROT_READ | PROT_EXEC;
  m.filename = perf::kKernelTextMmap;
  m.exec = true;
  // Readers find perf's copy of this kernel's symbols by it (perf's
  // build-id cache), which is cheaper to read than /proc/kallsyms.
  if (std::string id = kernel_build_id(); !id.empty()) build_ids_.emplace(std::string(perf::kKernelDso), std::move(id));
  rec_.clear();
  if (perf::encode_mmap2(rec_, perf::kMiscKernel, m, id_of(m.pid, 0), attr_)) put_(rec_);
}

void Synthesizer::process(pid_t pid) {
  const auto p = static_cast<std::uint32_t>(pid);
  const std::vector<std::uint32_t> tids = numbers_in("/proc/" + std::to_string(pid) + "/task");
  if (tids.empty()) return;  // gone
  const std::string comm = process::process_name(pid);
  for (std::uint32_t t : tids) {
    perf::Comm c;
    c.pid = p;
    c.tid = t;
    c.comm = comm;
    rec_.clear();
    if (perf::encode_comm(rec_, c, id_of(p, t), attr_)) put_(rec_);
  }
  auto maps = process::read_maps(pid);
  if (!maps) return;
  for (const process::Mapping& m : *maps) {
    if (!m.exec || (!m.file_backed() && m.path != "[vdso]")) continue;
    perf::Mmap r;
    r.pid = r.tid = p;
    r.start = m.start;
    r.len = m.end - m.start;
    r.pgoff = m.offset;
    r.ino = m.inode;
    r.prot = (m.read ? PROT_READ : 0) | (m.write ? PROT_WRITE : 0) | PROT_EXEC;
    r.flags = m.shared ? MAP_SHARED : MAP_PRIVATE;
    r.filename = m.path;
    r.mmap2 = r.exec = true;
    std::vector<std::byte> bin;
    if (m.file_backed() && !m.deleted) {
      const std::string hex = file_build_id(m.path);
      for (std::size_t i = 0; i + 1 < hex.size() && bin.size() < 20; i += 2)
        bin.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      if (!hex.empty()) build_ids_.emplace(m.path, hex);
    }
    r.build_id = bin;
    rec_.clear();
    if (perf::encode_mmap2(rec_, perf::kMiscUser, r, id_of(p, p), attr_)) put_(rec_);
  }
}

bool add_features(perf::PerfWriter& w, std::span<const std::string> argv, const perf::EventAttr& attr,
                  const std::map<std::string, std::string>& build_ids) {
  namespace L = perf::layout;
  if (!w.add_feature(L::kFeatCmdline, perf::feature_cmdline(argv))) return false;
  if (!w.add_feature(L::kFeatEventDesc, perf::feature_event_desc(std::span(&attr, 1)))) return false;
  if (!w.add_feature(L::kFeatArch, perf::feature_string("x86_64"))) return false;
  utsname u{};
  if (uname(&u) == 0) {
    if (!w.add_feature(L::kFeatHostname, perf::feature_string(u.nodename))) return false;
    if (!w.add_feature(L::kFeatOsRelease, perf::feature_string(u.release))) return false;
  }
  std::vector<std::byte> nr(8);
  const auto avail = static_cast<std::uint32_t>(std::max(1L, sysconf(_SC_NPROCESSORS_CONF)));
  const auto online = static_cast<std::uint32_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::memcpy(nr.data(), &avail, 4);
  std::memcpy(nr.data() + 4, &online, 4);
  if (!w.add_feature(L::kFeatNrCpus, std::move(nr))) return false;
  std::vector<perf::BuildIdEntry> ids;
  for (const auto& [path, id] : build_ids) {
    perf::BuildIdEntry b;
    b.pid = -1;
    b.cpumode = path == perf::kKernelDso ? perf::kMiscKernel : perf::kMiscUser;
    b.build_id = id;
    b.filename = path;
    ids.push_back(std::move(b));
  }
  if (!ids.empty()) {
    auto f = perf::feature_build_ids(ids);
    if (!f || !w.add_feature(L::kFeatBuildId, std::move(*f))) return false;
  }
  return true;
}

namespace {
perf::SampleId sample_id(std::uint32_t pid, std::uint32_t tid, std::uint64_t time, std::uint32_t cpu) {
  perf::SampleId id;
  id.has = perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu;
  id.pid = pid;
  id.tid = tid;
  id.time = time;
  id.cpu = cpu;
  return id;
}
// Appends a callchain part: its context marker, then `n` addresses.
void append_part(std::vector<std::uint64_t>& chain, std::uint64_t marker, const __u64* ips, std::size_t n) {
  if (!n) return;
  chain.push_back(marker);
  chain.insert(chain.end(), ips, ips + n);
}
}  // namespace

bool encode_walked(std::vector<std::byte>& out, const perf::EventAttr& attr, const void* data, std::size_t size,
                   std::vector<std::uint64_t>& chain) {
  if (size < SFRAME_RECORD_SAMPLE_HEAD) return false;
  sframe_record_sample s;
  std::memcpy(&s, data, std::min(size, sizeof s));
  const std::size_t words = std::min<std::size_t>((size - SFRAME_RECORD_SAMPLE_HEAD) / 8, SFRAME_RECORD_MAX_FRAMES);
  const std::size_t kn = std::min<std::size_t>(s.kernel_nr, words);
  const std::size_t un = std::min<std::size_t>(s.user_nr, words - kn);
  chain.clear();
  append_part(chain, perf::kContextKernel, s.ips, kn);
  append_part(chain, perf::kContextUser, s.ips + kn, un);
  const std::uint64_t ip = kn ? s.ips[0] : un ? s.ips[kn] : 0;
  const std::uint16_t misc = s.user_mode ? perf::kMiscUser : perf::kMiscKernel;
  return static_cast<bool>(
      perf::encode_sample(out, misc, attr, sample_id(s.pid, s.tid, s.time, s.cpu), ip, 0, s.period, chain));
}

bool encode_copy(std::vector<std::byte>& out, const perf::EventAttr& attr, const void* data, std::size_t size,
                 std::vector<std::uint64_t>& chain) {
  if (size < SFRAME_RECORD_COPY_HEAD) return false;
  sframe_record_copy head;
  std::memcpy(&head, data, SFRAME_RECORD_COPY_HEAD);
  const std::size_t stack =
      std::min<std::size_t>({head.stack_size, size - SFRAME_RECORD_COPY_HEAD, SFRAME_RECORD_COPY_STACK});
  const std::size_t kn = std::min<std::size_t>(head.kernel_nr, SFRAME_RECORD_MAX_KERNEL);
  chain.clear();
  append_part(chain, perf::kContextKernel, head.ips, kn);
  const perf::SampleId id = sample_id(head.pid, head.tid, head.time, head.cpu);
  std::uint64_t regs[SFRAME_RECORD_COPY_REGS];
  std::memcpy(regs, head.regs, sizeof regs);
  perf::UserRegsStack user;
  if (head.has_user) {
    user.abi = perf::RegsAbi::k64;
    user.regs = regs;
    user.stack = std::span(static_cast<const std::byte*>(data) + SFRAME_RECORD_COPY_HEAD, stack);
  }
  // The sampled PC: regs[8] is IP in perf's register order (record_abi.h).
  const std::uint64_t ip = head.user_mode ? regs[8] : kn ? head.ips[0] : 0;
  const std::uint16_t misc = head.user_mode ? perf::kMiscUser : perf::kMiscKernel;
  return static_cast<bool>(perf::encode_sample(out, misc, attr, id, ip, 0, head.period, chain, user));
}

}  // namespace sframe::record
