// SPDX-License-Identifier: MIT
// sframepp: the in-process backtrace's setup: the module table (from
// dl_iterate_phdr; PT_GNU_SFRAME copied, or SFrame generated from .eh_frame)
// and per-thread stack bounds. Nothing here is async-signal-safe; the walk
// only reads what this file publishes.
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>

#include "backtrace_internal.hpp"
#include "sframe/elf.hpp"
#include "sframe/module_unwind.hpp"

namespace sframe::bt {

std::atomic<const Table*> g_table{nullptr};
std::atomic<std::uint64_t> g_generation{0};
std::atomic<int> g_walkers{0};
std::atomic<bool> g_asymmetric{false};
std::atomic<std::uint64_t> g_unknown_pc{0};

namespace {

constexpr std::uint32_t kPtGnuSframe = 0x6474e554;

// What dl_iterate_phdr reports about one module, copied out so that the
// slow work (reading files, generating SFrame) runs without the loader lock.
struct RawModule {
  std::string name;
  std::uint64_t bias = 0;
  std::vector<ElfW(Phdr)> phdrs;
};

struct Snapshot {
  std::vector<RawModule> modules;
  unsigned long long adds = 0;
  unsigned long long subs = 0;
};

int collect(dl_phdr_info* info, std::size_t size, void* arg) {
  auto* snap = static_cast<Snapshot*>(arg);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    snap->adds = info->dlpi_adds;
    snap->subs = info->dlpi_subs;
  }
  RawModule m;
  m.name = info->dlpi_name ? info->dlpi_name : "";
  m.bias = info->dlpi_addr;
  m.phdrs.assign(info->dlpi_phdr, info->dlpi_phdr + info->dlpi_phnum);
  snap->modules.push_back(std::move(m));
  return 0;
}

// The executable PT_LOAD segments' span, in runtime addresses.
std::optional<AddressRange> exec_range(const RawModule& m) {
  std::optional<AddressRange> r;
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type != PT_LOAD || !(p.p_flags & PF_X) || p.p_memsz == 0) continue;
    const std::uint64_t b = m.bias + p.p_vaddr;
    const std::uint64_t e = b + p.p_memsz;
    if (!r) r = AddressRange{b, e};
    r->begin = std::min(r->begin, b);
    r->end = std::max(r->end, e);
  }
  return r;
}

// The bytes of a loaded segment, read in place.
std::span<const std::byte> segment(const RawModule& m, const ElfW(Phdr)& p, std::uint64_t size) {
  return {reinterpret_cast<const std::byte*>(m.bias + p.p_vaddr), static_cast<std::size_t>(size)};
}

// The builder's input, read from the loaded image (no file): PT_GNU_SFRAME,
// PT_GNU_EH_FRAME (.eh_frame_hdr) and the readable executable segments.
cfi::ModuleImage image_of(const RawModule& m) {
  cfi::ModuleImage img;
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type == kPtGnuSframe && p.p_memsz != 0 && img.sframe.empty()) {
      img.sframe = segment(m, p, p.p_memsz);
      img.sframe_address = p.p_vaddr;
    } else if (p.p_type == PT_GNU_EH_FRAME && p.p_memsz != 0 && img.eh_frame_hdr.empty()) {
      img.eh_frame_hdr = segment(m, p, p.p_memsz);
      img.eh_frame_hdr_address = p.p_vaddr;
    } else if (p.p_type == PT_LOAD && (p.p_flags & PF_X) && (p.p_flags & PF_R) && p.p_filesz != 0) {
      img.code.push_back({p.p_vaddr, segment(m, p, p.p_filesz)});
    }
  }
  return img;
}

// The vDSO: an image with no file behind it (the kernel's name for it).
bool is_vdso(const RawModule& m) { return m.name.rfind("linux-vdso", 0) == 0 || m.name.rfind("linux-gate", 0) == 0; }

// Builds one module's data with the shared builder; a module that has
// unwind information but ends without SFrame records why in `error` (the
// walk then uses the frame-pointer fallback there).
std::shared_ptr<ModuleData> build_module(const RawModule& m, const AddressRange& range, const BacktraceOptions& opt) {
  auto d = std::make_shared<ModuleData>();
  d->name = m.name;
  d->bias = m.bias;
  d->range = range;
  cfi::ModuleUnwindOptions uo;
  uo.version = opt.generated_version;
  uo.ignore_own = opt.always_generate;
  d->unwind = cfi::ModuleUnwind::build(image_of(m), uo);
  for (const AddressRange& t : d->unwind.trampolines()) d->trampolines.push_back({t.begin + m.bias, t.end + m.bias});
  if (!d->unwind.needs_generation()) return d;
  // SFrame generated from the .eh_frame of the module's file, for a section
  // at address 0 (start PCs are then link-time addresses). The main program
  // has an empty name; the vDSO a name that is no file.
  const std::string path = m.name.empty() ? std::string("/proc/self/exe") : m.name;
  const bool native = d->unwind.source() == cfi::ModuleSource::kNative;
  if (is_vdso(m)) return d;
  const auto words = [](const Error& e) {
    return e.code == Errc::kIoError && e.value != 0 ? std::string(std::strerror(static_cast<int>(e.value)))
                                                    : std::string(describe(e.code));
  };
  Expected<elf::ElfFile> file = path.front() != '/' && access(path.c_str(), R_OK) != 0
                                    ? Expected<elf::ElfFile>(make_error(Errc::kIoError, 0, ENOENT))
                                    : elf::ElfFile::open(path);
  if (!file) {
    // With its own section the module is walked whatever became of the
    // functions that section lacks; without, by frame pointers only.
    if (!native) {
      d->error = file.error();
      d->failure = "cannot open its file to read .eh_frame (" + words(file.error()) + ")";
    }
    return d;
  }
  Expected<void> gen = d->unwind.generate(*file, 0);
  if (!gen && !native) d->error = gen.error();
  return d;
}

std::mutex g_refresh_mutex;
// Tables retired while some walk ran; freed by a later rebuild that finds
// none running. Never destroyed, so that tables still listed at exit stay
// reachable (not reported as leaked).
std::vector<const Table*>& g_retired = *new std::vector<const Table*>();

// Every ThreadState, for rebuild() to see which threads are walking.
std::mutex g_threads_mutex;
std::vector<const ThreadState*> g_threads;

long membarrier_call(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

// Whether no walk can hold a table retired before this call.
bool no_walkers() {
  if (g_asymmetric.load()) {
    // Orders this thread's g_table exchange before its reads below, against
    // every other thread's (compiler-ordered) walking store and g_table
    // load: a walk this misses loads the new table.
    if (membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) return false;
    std::lock_guard lock(g_threads_mutex);
    for (const ThreadState* t : g_threads)
      if (t->walking.load(std::memory_order_acquire) != 0) return false;
  }
  return g_walkers.load() == 0;
}

// The path of the main program (dl_iterate_phdr names it "").
std::string main_program_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

BacktraceModuleSource source_of(cfi::ModuleSource s) {
  switch (s) {
    case cfi::ModuleSource::kNative:
      return BacktraceModuleSource::kNative;
    case cfi::ModuleSource::kGenerated:
      return BacktraceModuleSource::kGenerated;
    case cfi::ModuleSource::kNone:
      break;
  }
  return BacktraceModuleSource::kNone;
}

// The report on `t`'s modules; returns the first failure's error.
Error report_on(const Table& t, BacktraceInitReport* report) {
  Error first{Errc::kPcNotCovered};
  if (report) report->modules.clear();
  for (const auto& d : t.data) {
    if (d->failed() && first.code == Errc::kPcNotCovered) first = d->error;
    if (!report) continue;
    BacktraceModuleReport r;
    r.name = d->name.empty() ? main_program_path() : d->name;
    r.bias = d->bias;
    r.source = source_of(d->unwind.source());
    r.extra_functions = d->unwind.extra_functions();
    r.reason = d->unwind.reason();
    if (d->failed()) {
      r.failed = true;
      r.error = d->error;
      if (!d->failure.empty()) r.reason += "; " + d->failure;
    } else if (is_vdso(RawModule{d->name, d->bias, {}}) && r.source == BacktraceModuleSource::kNone) {
      r.reason = "vDSO: no file to generate SFrame from (frame-pointer fallback)";
    }
    report->modules.push_back(std::move(r));
  }
  return first;
}

Expected<void> result_of(const Table& t, BacktraceInitReport* report) {
  const Error e = report_on(t, report);
  if (e.code != Errc::kPcNotCovered) return Unexpected(e);
  return {};
}

Expected<void> rebuild(const BacktraceOptions* new_options, BacktraceInitReport* report) {
  std::lock_guard lock(g_refresh_mutex);
  Snapshot snap;
  dl_iterate_phdr(collect, &snap);
  const Table* old = g_table.load();
  if (old && !new_options && old->adds == snap.adds && old->subs == snap.subs) return result_of(*old, report);
  if (!old && !g_asymmetric.load()) {
    const long cmds = membarrier_call(MEMBARRIER_CMD_QUERY);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
      g_asymmetric.store(true);
  }

  auto t = std::make_unique<Table>();
  t->adds = snap.adds;
  t->subs = snap.subs;
  t->options = new_options ? *new_options : old ? old->options : BacktraceOptions{};
  const bool same_options = old && old->options.generated_version == t->options.generated_version &&
                            old->options.always_generate == t->options.always_generate;
  for (const RawModule& m : snap.modules) t->loaded.push_back({m.bias, m.name});
  std::sort(t->loaded.begin(), t->loaded.end());
  for (const RawModule& m : snap.modules) {
    const std::optional<AddressRange> range = exec_range(m);
    if (!range) continue;
    std::shared_ptr<const ModuleData> d;
    if (same_options)
      for (const auto& od : old->data)
        if (od->name == m.name && od->bias == m.bias && od->range == *range) d = od;
    if (!d) d = build_module(m, *range, t->options);
    t->trampolines.insert(t->trampolines.end(), d->trampolines.begin(), d->trampolines.end());
    t->code.push_back(d->range);
    t->data.push_back(std::move(d));
  }
  // The map's Modules view the shared data, which outlives the table.
  t->storage.resize(t->data.size());
  t->extra_storage.resize(t->data.size());
  t->map = ModuleMap(t->storage);
  t->extra_map = ModuleMap(t->extra_storage);
  const auto add = [](ModuleMap& map, const ModuleData& d, const OwnedSection& o) {
    if (!o.usable()) return false;
    Module mod;
    mod.range = d.range;
    mod.bias = d.bias;
    mod.section = *o.section;
    mod.index = o.index ? &*o.index : nullptr;
    mod.rows = o.rows ? &*o.rows : nullptr;
    mod.compact_rows = o.rows && !o.compact_rows.empty() ? o.compact_rows.data() : nullptr;
    return static_cast<bool>(map.add(mod));
  };
  for (const auto& d : t->data) {
    if (add(t->map, *d, d->unwind.primary()))
      t->generated += d->unwind.source() == cfi::ModuleSource::kGenerated ? 1 : 0;
    add(t->extra_map, *d, d->unwind.extra());
  }

  const std::uint64_t generation = t->map.generation();
  const Table* published = t.get();
  const Table* prev = g_table.exchange(t.release());
  g_generation.store(generation, std::memory_order_release);
  if (prev) g_retired.push_back(prev);
  // A walk announces itself before it loads g_table, so with none
  // running no one can still hold a retired table.
  if (no_walkers()) {
    for (const Table* r : g_retired) delete r;
    g_retired.clear();
  }
  return result_of(*published, report);
}

// dl_iterate_phdr's counters only (stops at the first module).
int counters(dl_phdr_info* info, std::size_t size, void* arg) {
  auto* snap = static_cast<Snapshot*>(arg);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    snap->adds = info->dlpi_adds;
    snap->subs = info->dlpi_subs;
  }
  return 1;
}

// Equal C strings, without libc (async-signal-safe by construction).
bool same_name(const char* a, const std::string& b) noexcept {
  if (!a) a = "";
  std::size_t i = 0;
  for (; a[i] != '\0' && i < b.size(); ++i)
    if (a[i] != b[i]) return false;
  return a[i] == '\0' && i == b.size();
}

// ----- threads -------------------------------------------------------------

pthread_key_t g_key;
std::once_flag g_key_once;

void free_state(void* p) {
  t_state = nullptr;
  auto* st = static_cast<ThreadState*>(p);
  {
    std::lock_guard lock(g_threads_mutex);
    std::erase(g_threads, st);
  }
  delete st;
}

// The start of the mapping holding `addr`, from /proc/self/maps (the main
// thread's stack grows on demand; everything from here up is mapped).
std::uint64_t mapping_start(std::uint64_t addr) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return addr & ~std::uint64_t{4095};
  std::uint64_t found = addr & ~std::uint64_t{4095};
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long b = 0, e = 0;
    if (std::sscanf(line, "%llx-%llx", &b, &e) == 2 && addr >= b && addr < e) {
      found = b;
      break;
    }
  }
  std::fclose(f);
  return found;
}

}  // namespace

[[gnu::tls_model("initial-exec")]] thread_local constinit ThreadState* t_state = nullptr;

}  // namespace sframe::bt

namespace sframe {

Expected<void> backtrace_init(const BacktraceOptions& options) { return backtrace_init(options, nullptr); }

Expected<void> backtrace_init(const BacktraceOptions& options, BacktraceInitReport* report) {
  backtrace_register_thread();
  return bt::rebuild(&options, report);
}

Expected<void> backtrace_refresh() { return bt::rebuild(nullptr, nullptr); }

Expected<void> backtrace_refresh(BacktraceInitReport* report) { return bt::rebuild(nullptr, report); }

Expected<bool> backtrace_refresh_if_needed(BacktraceInitReport* report) {
  bt::g_unknown_pc.store(0, std::memory_order_relaxed);
  bt::Snapshot now;
  dl_iterate_phdr(bt::counters, &now);
  {
    std::lock_guard lock(bt::g_refresh_mutex);
    const bt::Table* t = bt::g_table.load();
    if (!t) return false;  // never initialised: nothing to refresh
    if (t->adds == now.adds && t->subs == now.subs) {
      if (report) (void)bt::report_on(*t, report);
      return false;
    }
  }
  Expected<void> r = bt::rebuild(nullptr, report);
  if (!r) return Unexpected{r.error()};
  return true;
}

BacktraceInitReport backtrace_report() {
  BacktraceInitReport report;
  std::lock_guard lock(bt::g_refresh_mutex);
  if (const bt::Table* t = bt::g_table.load()) (void)bt::report_on(*t, &report);
  return report;
}

bool backtrace_modules_ready() noexcept {
  bt::g_walkers.fetch_add(1);
  const bt::Table* t = bt::g_table.load();
  bool ready = t != nullptr && _r_debug.r_state == r_debug::RT_CONSISTENT;
  for (const link_map* l = ready ? _r_debug.r_map : nullptr; l && ready; l = l->l_next) {
    // Binary search by bias (no allocation, no libc).
    std::size_t lo = 0, hi = t->loaded.size();
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (t->loaded[mid].bias < l->l_addr) lo = mid + 1;
      else hi = mid;
    }
    bool found = false;
    for (std::size_t i = lo; i < t->loaded.size() && t->loaded[i].bias == l->l_addr && !found; ++i)
      found = bt::same_name(l->l_name, t->loaded[i].name);
    ready = found;
  }
  bt::g_walkers.fetch_sub(1);
  return ready;
}

std::uint64_t backtrace_unknown_pc() noexcept { return bt::g_unknown_pc.load(std::memory_order_relaxed); }

std::string_view to_string(BacktraceModuleSource s) noexcept {
  switch (s) {
    case BacktraceModuleSource::kNative:
      return "native";
    case BacktraceModuleSource::kGenerated:
      return "generated";
    case BacktraceModuleSource::kNone:
      return "none";
  }
  return "?";
}

std::size_t BacktraceInitReport::failures() const noexcept {
  return static_cast<std::size_t>(std::count_if(modules.begin(), modules.end(), [](const auto& m) { return m.failed; }));
}

std::string BacktraceInitReport::message() const {
  std::string out;
  for (const BacktraceModuleReport& m : modules) {
    if (!m.failed) continue;
    if (!out.empty()) out += '\n';
    out += m.name + ": " + m.reason;
  }
  return out;
}

void backtrace_register_thread() {
  if (bt::t_state) return;
  std::call_once(bt::g_key_once, [] { pthread_key_create(&bt::g_key, bt::free_state); });
  auto* st = new bt::ThreadState();
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      st->lo = reinterpret_cast<std::uint64_t>(addr);
      st->hi = st->lo + size;
    }
    pthread_attr_destroy(&attr);
  }
  const auto here = reinterpret_cast<std::uint64_t>(&st);
  if (getpid() == gettid()) {
    // glibc reports the main thread's stack as rlimit-sized; only the part
    // already mapped may be read.
    st->limit = st->lo;
    st->lo = std::max(st->lo, bt::mapping_start(here));
    st->grows = true;
  }
  if (here < st->lo || here >= st->hi) {
    // Not a stack we understand (e.g. a user-allocated coroutine stack):
    // trust only what lies above the current frame, one page at least.
    st->lo = here & ~std::uint64_t{4095};
    st->hi = std::max(st->hi, st->lo + 4096);
  }
  {
    std::lock_guard lock(bt::g_threads_mutex);
    bt::g_threads.push_back(st);
  }
  pthread_setspecific(bt::g_key, st);
  bt::t_state = st;
}

BacktraceCacheStats backtrace_stats() noexcept {
  BacktraceCacheStats s;
  if (bt::ThreadState* st = bt::thread_state()) {
    s.hits = st->cache.hits;
    s.misses = st->cache.misses;
  }
  bt::g_walkers.fetch_add(1);
  if (const bt::Table* t = bt::g_table.load()) {
    s.modules = t->map.modules().size();
    s.generated = t->generated;
  }
  bt::g_walkers.fetch_sub(1);
  return s;
}

void backtrace_flush_cache() noexcept {
  if (bt::ThreadState* st = bt::thread_state()) {
    st->cache.clear();
    // Emptied here rather than by the next walk (a walk resets the memo
    // itself only when the module map changed).
    st->memo.clear();
  }
}

}  // namespace sframe
