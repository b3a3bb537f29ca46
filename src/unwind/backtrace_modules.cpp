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
#include "sframe/cfi.hpp"
#include "sframe/elf.hpp"
#include "sframe/encode.hpp"

namespace sframe::bt {

std::atomic<const Table*> g_table{nullptr};
std::atomic<std::uint64_t> g_generation{0};
std::atomic<int> g_walkers{0};
std::atomic<bool> g_asymmetric{false};

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

// rt_sigreturn on x86-64 Linux (mov $15,%rax; syscall): glibc's
// __restore_rt. Its CFI is a DWARF expression SFrame cannot hold, so the
// walk recognises it by address instead.
void find_trampolines(const RawModule& m, std::vector<AddressRange>& out) {
  static constexpr unsigned char kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type != PT_LOAD || !(p.p_flags & PF_X) || !(p.p_flags & PF_R)) continue;
    const auto* begin = reinterpret_cast<const unsigned char*>(m.bias + p.p_vaddr);
    const unsigned char* end = begin + p.p_filesz;
    for (const unsigned char* at = begin; out.size() < 16;) {
      at = std::search(at, end, std::begin(kSigreturn), std::end(kSigreturn));
      if (at == end) break;
      const auto a = reinterpret_cast<std::uint64_t>(at);
      out.push_back({a, a + 1});
      at += sizeof kSigreturn;
    }
  }
}

// Parses `o.bytes` as a section at `address` and indexes it; empties it when
// it does not pass the lenient validation (the walk never sees bad data).
void finish(OwnedSection& o, std::uint64_t address) {
  Expected<Section> s = Section::parse(o.bytes, address);
  if (!s || !validate(*s, Strictness::kLenient)) {
    o.bytes.clear();
    return;
  }
  o.section = *s;
  Expected<FdeIndex> idx = FdeIndex::build(*o.section);
  if (idx) o.index.emplace(std::move(*idx));
  if (validate(*o.section, Strictness::kStrict)) {
    Expected<RowIndex> rows = RowIndex::build(*o.section);
    if (rows) o.rows.emplace(std::move(*rows));
  }
}

// SFrame generated from the .eh_frame of the module's file, for a section at
// address 0 (start PCs are then link-time addresses).
Expected<std::vector<std::byte>> generate_for(const RawModule& m, Version version) {
  // The main program has an empty name; the vDSO a name that is no file.
  const std::string path = m.name.empty() ? std::string("/proc/self/exe") : m.name;
  if (path.front() != '/' && access(path.c_str(), R_OK) != 0) return Unexpected(Error{Errc::kIoError});
  Expected<elf::ElfFile> file = elf::ElfFile::open(path);
  if (!file) return Unexpected(file.error());
  Expected<cfi::Generated> gen = cfi::generate(*file, version, 0);
  if (!gen) return Unexpected(gen.error());
  return encode(gen->spec);
}

// Builds one module's data; errors leave it without a section (the walk
// then uses the frame-pointer fallback there).
std::shared_ptr<ModuleData> build_module(const RawModule& m, const AddressRange& range, const BacktraceOptions& opt,
                                         Error* first_error) {
  auto d = std::make_shared<ModuleData>();
  d->name = m.name;
  d->bias = m.bias;
  d->range = range;
  find_trampolines(m, d->trampolines);
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type != kPtGnuSframe || p.p_memsz == 0 || opt.always_generate) continue;
    const auto* at = reinterpret_cast<const std::byte*>(m.bias + p.p_vaddr);
    d->primary.bytes.assign(at, at + p.p_memsz);
    finish(d->primary, p.p_vaddr);
    Expected<std::vector<std::byte>> extra = generate_for(m, opt.generated_version);
    if (extra) {
      d->extra.bytes = std::move(*extra);
      finish(d->extra, 0);
    }
    return d;
  }
  Expected<std::vector<std::byte>> gen = generate_for(m, opt.generated_version);
  if (!gen) {
    if (gen.error().code != Errc::kIoError || !m.name.empty())
      if (first_error->code == Errc::kPcNotCovered && m.name.rfind("linux-vdso", 0) != 0) *first_error = gen.error();
    return d;
  }
  d->primary.bytes = std::move(*gen);
  d->generated = true;
  finish(d->primary, 0);
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

Expected<void> rebuild(const BacktraceOptions* new_options) {
  std::lock_guard lock(g_refresh_mutex);
  Snapshot snap;
  dl_iterate_phdr(collect, &snap);
  const Table* old = g_table.load();
  if (old && !new_options && old->adds == snap.adds && old->subs == snap.subs) return {};
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
  Error first_error{Errc::kPcNotCovered};
  for (const RawModule& m : snap.modules) {
    const std::optional<AddressRange> range = exec_range(m);
    if (!range) continue;
    std::shared_ptr<const ModuleData> d;
    if (same_options)
      for (const auto& od : old->data)
        if (od->name == m.name && od->bias == m.bias && od->range == *range) d = od;
    if (!d) d = build_module(m, *range, t->options, &first_error);
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
    if (!o.section) return false;
    Module mod;
    mod.range = d.range;
    mod.bias = d.bias;
    mod.section = *o.section;
    mod.index = o.index ? &*o.index : nullptr;
    mod.rows = o.rows ? &*o.rows : nullptr;
    return static_cast<bool>(map.add(mod));
  };
  for (const auto& d : t->data) {
    if (add(t->map, *d, d->primary)) t->generated += d->generated ? 1 : 0;
    add(t->extra_map, *d, d->extra);
  }

  const std::uint64_t generation = t->map.generation();
  const Table* prev = g_table.exchange(t.release());
  g_generation.store(generation, std::memory_order_release);
  if (prev) g_retired.push_back(prev);
  // A walk announces itself before it loads g_table, so with none
  // running no one can still hold a retired table.
  if (no_walkers()) {
    for (const Table* r : g_retired) delete r;
    g_retired.clear();
  }
  if (first_error.code != Errc::kPcNotCovered) return Unexpected(first_error);
  return {};
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

Expected<void> backtrace_init(const BacktraceOptions& options) {
  backtrace_register_thread();
  return bt::rebuild(&options);
}

Expected<void> backtrace_refresh() { return bt::rebuild(nullptr); }

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
