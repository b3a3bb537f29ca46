// SPDX-License-Identifier: MIT
// sframepp: the in-process backtrace's setup: the module table (from
// dl_iterate_phdr; each module's data from module_data.cpp), its background
// generation, and per-thread stack bounds. Nothing here is async-signal-safe; the walk
// only reads what this file publishes.
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unwind.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <string_view>

#include "backtrace_internal.hpp"
#include "module_data.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/module_unwind.hpp"

namespace sframe::bt {

std::atomic<const Table*> g_table{nullptr};
std::atomic<std::uint64_t> g_generation{0};
std::atomic<int> g_walkers{0};
std::atomic<bool> g_asymmetric{false};
std::atomic<std::uint64_t> g_unknown_pc{0};

namespace {

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



// Never destroyed, as the other globals the background generator touches:
// it may still run while exit() destroys static objects.
std::mutex& g_refresh_mutex = *new std::mutex();
// Tables retired while some walk ran; freed by a later rebuild that finds
// none running. Never destroyed, so that tables still listed at exit stay
// reachable (not reported as leaked).
std::vector<const Table*>& g_retired = *new std::vector<const Table*>();

// Every ThreadState, for rebuild() to see which threads are walking.
std::mutex& g_threads_mutex = *new std::mutex();
std::vector<const ThreadState*>& g_threads = *new std::vector<const ThreadState*>();

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

// The report on `t`'s modules; returns the first failure's error, if any.
std::optional<Error> report_on(const Table& t, BacktraceInitReport* report) {
  std::optional<Error> first;
  if (report) report->modules.clear();
  for (const auto& d : t.data) {
    if (d->failed() && !first) first = d->error;
    if (!report) continue;
    BacktraceModuleReport r;
    r.name = d->name.empty() ? main_program_path() : d->name;
    r.bias = d->bias;
    r.source = d->unwind.source();
    r.extra_functions = d->unwind.extra_functions();
    r.reason = d->unwind.reason();
    if (d->deferred) {
      // A deferred module was left unread (no reason of its own yet) but a
      // stack library built per FDE.
      if (!r.reason.empty()) r.reason += "; ";
      r.reason += "SFrame set-up pending (background; frame-pointer fallback until ready)";
    } else if (d->failed()) {
      r.error = d->error;
      if (!d->failure.empty()) r.reason += "; " + d->failure;
    } else if (is_vdso(RawModule{d->name, d->bias, {}}) && r.source == ModuleSource::kNone) {
      r.reason = "vDSO: no usable CFI (frame-pointer fallback)";
    }
    report->modules.push_back(std::move(r));
  }
  return first;
}

Expected<void> result_of(const Table& t, BacktraceInitReport* report) {
  if (const std::optional<Error> e = report_on(t, report)) return Unexpected{*e};
  return {};
}

// Whether a range of `tramps` meets the module range of `s`, closed at its
// end (a return address may lie one past a lookup PC at the module's end):
// ModuleHint::Slot::tramps, which the cold walk reads on a module switch.
bool tramps_meet(const detail::ModuleHint::Slot& s, std::span<const AddressRange> tramps) noexcept {
  // User-space addresses: no end wraps.
  for (const AddressRange& r : tramps)
    if (r.begin <= s.begin + s.size && s.begin < r.end) return true;
  return false;
}

// The prebuilt lookup slots of `map` (in its order), each with the memo's
// step codes of its compiled rows, kept in `codes`, whether a range of
// `tramps` meets it, and whether its rows lie inside its range.
// `brules` null: no bucket rules (see assemble()).
void build_slots(const ModuleMap& map, Table::Slots& out, std::vector<std::vector<std::int64_t>>& codes,
                 std::vector<std::vector<detail::BucketRule>>* brules, std::span<const AddressRange> tramps) {
  out.begins.clear();
  out.slots.clear();
  for (const Module& m : map.modules()) {
    detail::ModuleHint::Slot slot = detail::slot_of(m, Arch::kAmd64);
    if (slot.compact) {
      std::vector<std::int64_t> c(m.rows->num_rows());
      for (std::size_t i = 0; i < c.size(); ++i) c[i] = straight_code(slot.compact[i]);
      // Moving the vector into `codes` keeps its buffer.
      slot.codes = c.data();
      codes.push_back(std::move(c));
      if (brules) {
        std::vector<detail::BucketRule> b(slot.rows.bucket_count());
        for (std::size_t i = 0; i < b.size(); ++i) {
          const std::uint32_t row = slot.rows.bucket_row(i);
          if (row < m.rows->num_rows()) b[i] = detail::bucket_rule_of(slot.compact[row]);
        }
        slot.brules = b.data();
        brules->push_back(std::move(b));
      }
    }
    slot.tramps = tramps_meet(slot, tramps);
    // User-space addresses: no end wraps.
    slot.rows_inside = slot.rows.span() == 0 || (slot.rows.base() >= slot.begin &&
                                                 slot.rows.base() + slot.rows.span() <= slot.begin + slot.size);
    out.begins.push_back(m.range.begin);
    out.slots.push_back(slot);
  }
  out.view = {out.begins.data(), out.slots.data(), out.slots.size()};
}

// Fills the table's module maps, trampolines and code ranges from its
// `data`. The map's Modules view the shared data, which outlives the table.
// A table whose every module is built (none deferred) also gets its slots'
// bucket rules (2 bytes per RowIndex bucket), which init leaves to the
// background generator's last table: nothing at init waits for them, and a
// walk without them takes the rows.
void assemble(Table& t) {
  t.trampolines.clear();
  t.code.clear();
  t.generated = 0;
  t.deferred = 0;
  for (const auto& d : t.data) {
    t.deferred += d->deferred ? 1 : 0;
    t.trampolines.insert(t.trampolines.end(), d->trampolines.begin(), d->trampolines.end());
    t.code.push_back(d->range);
  }
  // The shared placement (ModuleTable): each module's sections at its
  // range, and its per-FDE sections (a deferred module's functions on the
  // initialising thread's stack, generated only for modules without their
  // own section) cut to it. Storage of the exact size: a table is never
  // added to once published.
  ModuleTable::Entries e;
  for (const auto& d : t.data) {
    e.add(d->unwind, d->range, d->bias);
    t.generated += d->unwind.primary().usable() && d->unwind.source() == ModuleSource::kGenerated ? 1 : 0;
  }
  ModuleTable::fill(e.primary, t.storage, t.map, e.primary.size());
  ModuleTable::fill(e.extra, t.extra_storage, t.extra_map, e.extra.size());
  t.row_codes.clear();
  t.bucket_rules.clear();
  auto* brules = t.deferred == 0 ? &t.bucket_rules : nullptr;
  build_slots(t.map, t.map_slots, t.row_codes, brules, t.trampolines);
  build_slots(t.extra_map, t.extra_slots, t.row_codes, brules, t.trampolines);
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const AddressRange& r : t.trampolines) {
    lo = std::min(lo, r.begin);
    hi = std::max(hi, r.end);
  }
  t.tramp_lo = hi > lo ? lo : 0;
  t.tramp_span = hi > lo ? hi - lo : 0;
}

// Publishes `t` (g_refresh_mutex held) and frees retired tables no walk can
// still hold.
const Table* publish(std::unique_ptr<Table> t) {
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
  return published;
}

bool any_deferred(const Table* t) { return t && t->deferred != 0; }

// ----- background generation ----------------------------------------------

// With g_refresh_mutex: a deferred module got built.
std::condition_variable& g_ready_cv = *new std::condition_variable();
bool g_worker_running = false;       // guarded by g_refresh_mutex
// Whether a worker may start (BacktraceOptions::defer_background_start
// clears it until backtrace_start_background()); guarded by g_refresh_mutex.
bool g_worker_allowed = true;
std::once_flag g_atfork_once;
// Held by the worker for each whole step (taken before g_refresh_mutex),
// and by fork() around the copy: a child never copies the worker halfway
// through a build, holding locks no thread of the child will release (an
// allocator without fork handlers of its own, such as GCC 12's ASan, kept
// a size class's lock; the child's worker then waited on it for ever).
// fork() waits at most for one module's build. Never destroyed, as the
// mutex above.
std::mutex& g_worker_step_mutex = *new std::mutex();
// Set by a new worker once it runs worker_main(): fork() waits for it, so
// that the thread's start-up in the C runtime (its stack and TLS set up,
// with allocations: under ASan, its allocator's locks) is over before the
// copy (a fork() right after backtrace_init()). backtrace_init() itself
// does not wait. Reset under g_refresh_mutex.
std::atomic<bool> g_worker_started{false};

void start_worker_locked();

// Builds the deferred modules one by one, outside the lock, and publishes a
// table with each as it is ready; ends when none is left.
void worker_main() {
  pthread_setname_np(pthread_self(), "sframepp-gen");
  g_worker_started.store(true);
  g_worker_started.notify_all();
  for (;;) {
    // Declared first: released last, after every destructor of the step.
    std::lock_guard step(g_worker_step_mutex);
    std::shared_ptr<const ModuleData> todo;
    BacktraceOptions opt;
    {
      std::lock_guard lock(g_refresh_mutex);
      const Table* t = g_table.load();
      // A worker still finishing when a new backtrace_init() defers its
      // start (defer_background_start) leaves the new table's modules to
      // backtrace_start_background().
      if (t && g_worker_allowed)
        for (const auto& d : t->data)
          if (d->deferred) {
            todo = d;
            opt = t->options;
            break;
          }
      if (!todo) {
        g_worker_running = false;
        g_ready_cv.notify_all();
        return;
      }
    }
    std::shared_ptr<const ModuleData> built = build_module(*todo->deferred, todo->range, opt, false);
    std::lock_guard lock(g_refresh_mutex);
    const Table* cur = g_table.load();
    // A rebuild in between may have dropped or rebuilt the module: then
    // this result is not needed (the loop looks at the table again).
    const auto it = std::find(cur->data.begin(), cur->data.end(), todo);
    if (it == cur->data.end()) continue;
    auto t = std::make_unique<Table>();
    t->data = cur->data;
    t->data[static_cast<std::size_t>(it - cur->data.begin())] = std::move(built);
    t->loaded = cur->loaded;
    t->adds = cur->adds;
    t->subs = cur->subs;
    t->options = cur->options;
    assemble(*t);
    publish(std::move(t));
    g_ready_cv.notify_all();
  }
}

// Starts the worker (g_refresh_mutex held) with every signal blocked, so
// that no handler of the program ever runs on it.
void start_worker_locked() {
  if (g_worker_running) return;
  std::call_once(g_atfork_once, [] {
    // The worker does not survive fork(): the child starts its own when it
    // still has deferred modules. The lock keeps fork() from copying a
    // table half published.
    pthread_atfork(
        [] {
          g_worker_step_mutex.lock();
          g_refresh_mutex.lock();
          // A worker just created may still be starting up (see
          // g_worker_started); it sets the flag before taking any lock.
          if (g_worker_running) g_worker_started.wait(false);
        },
        [] {
          g_refresh_mutex.unlock();
          g_worker_step_mutex.unlock();
        },
        [] {
          g_worker_running = false;
          if (g_worker_allowed && any_deferred(g_table.load())) start_worker_locked();
          g_refresh_mutex.unlock();
          g_worker_step_mutex.unlock();
        });
  });
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    g_worker_started.store(false);
    std::thread(worker_main).detach();
    g_worker_running = true;
  } catch (const std::system_error&) {
    // No thread: the modules stay deferred until backtrace_wait_ready()
    // builds them on the caller's thread.
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// The PCs of the calling thread's frames, from the C++ runtime's unwinder
// (libgcc's _Unwind_Backtrace over .eh_frame): exact, unlike a scan of
// stack words, which finds stale return addresses in uninitialised locals.
// A walk it cannot finish gives the frames up to there.
_Unwind_Reason_Code note_pc(_Unwind_Context* ctx, void* arg) {
  auto* pcs = static_cast<std::vector<std::uint64_t>*>(arg);
  pcs->push_back(_Unwind_GetIP(ctx));
  return pcs->size() < 1024 ? _URC_NO_REASON : _URC_END_OF_STACK;
}

// The PCs of the calling thread's frames in each of `ranges` (sorted by
// begin); empty for a range without one.
std::vector<std::vector<std::uint64_t>> on_stack(const std::vector<AddressRange>& ranges) {
  std::vector<std::vector<std::uint64_t>> hit(ranges.size());
  std::vector<std::uint64_t> pcs;
  pcs.reserve(64);
  _Unwind_Backtrace(note_pc, &pcs);
  for (const std::uint64_t pc : pcs) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), pc,
                               [](std::uint64_t v, const AddressRange& r) { return v < r.begin; });
    if (it != ranges.begin() && (--it)->contains(pc)) hit[static_cast<std::size_t>(it - ranges.begin())].push_back(pc);
  }
  return hit;
}

// `complete`: rebuild even when no module came or went, to build the
// deferred ones.
Expected<void> rebuild(const BacktraceOptions* new_options, BacktraceInitReport* report, bool complete = false) {
  std::unique_lock lock(g_refresh_mutex);
  Snapshot snap;
  dl_iterate_phdr(collect, &snap);
  const Table* old = g_table.load();
  if (old && !new_options && !complete && old->adds == snap.adds && old->subs == snap.subs)
    return result_of(*old, report);
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
                            old->options.always_generate == t->options.always_generate &&
                            old->options.stack_libraries_per_fde == t->options.stack_libraries_per_fde &&
                            old->options.release_cfi_pages == t->options.release_cfi_pages;
  for (const RawModule& m : snap.modules) t->loaded.push_back({m.bias, m.name});
  std::sort(t->loaded.begin(), t->loaded.end());
  // Only backtrace_init() defers: a refresh is a safe point its caller chose
  // for the work.
  const bool lazy = new_options && t->options.background_generation;
  std::vector<AddressRange> ranges;
  for (const RawModule& m : snap.modules)
    if (const auto r = exec_range(m)) ranges.push_back(*r);
  std::sort(ranges.begin(), ranges.end(), [](const AddressRange& a, const AddressRange& b) { return a.begin < b.begin; });
  const std::vector<std::vector<std::uint64_t>> needed =
      lazy ? on_stack(ranges) : std::vector<std::vector<std::uint64_t>>();
  for (const RawModule& m : snap.modules) {
    const std::optional<AddressRange> range = exec_range(m);
    if (!range) continue;
    std::shared_ptr<const ModuleData> d;
    if (same_options)
      for (const auto& od : old->data)
        if (od->name == m.name && od->bias == m.bias && od->range == *range && (lazy || !od->deferred)) d = od;
    if (!d) {
      bool defer = false;
      std::span<const std::uint64_t> pcs;
      if (lazy) {
        const auto at = std::lower_bound(ranges.begin(), ranges.end(), range->begin,
                                         [](const AddressRange& r, std::uint64_t v) { return r.begin < v; });
        if (at != ranges.end()) pcs = needed[static_cast<std::size_t>(at - ranges.begin())];
        defer = pcs.empty();
      }
      d = build_module(m, *range, t->options, defer, pcs);
    }
    t->data.push_back(std::move(d));
  }
  assemble(*t);
  if (new_options) g_worker_allowed = !(lazy && new_options->defer_background_start);
  const Table* published = publish(std::move(t));
  if (g_worker_allowed && any_deferred(published)) start_worker_locked();
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

// A ThreadState and its rule cache's kCacheEntries entries in one
// anonymous mapping: its pages are zero, which an empty entry is, so the
// cache's 64 KiB become resident only as inserts reach them, rather than
// all of it for every registered thread (zero-filled by `new`), walking or
// not. The entries' bytes are used as they are (Entry is an implicit-
// lifetime aggregate, and the mapping is fresh storage, as malloc's is).
constexpr std::size_t kStateHead =
    (sizeof(ThreadState) + alignof(RuleCache::Entry) - 1) / alignof(RuleCache::Entry) * alignof(RuleCache::Entry);
constexpr std::size_t kStateBytes = kStateHead + kCacheEntries * sizeof(RuleCache::Entry);

ThreadState* new_state() noexcept {
  void* p = mmap(nullptr, kStateBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* entries = reinterpret_cast<RuleCache::Entry*>(static_cast<std::byte*>(p) + kStateHead);
  return new (p) ThreadState(std::span<RuleCache::Entry>(entries, kCacheEntries));
}

void free_state(void* p) {
  t_state = nullptr;
  auto* st = static_cast<ThreadState*>(p);
  {
    std::lock_guard lock(g_threads_mutex);
    std::erase(g_threads, st);
  }
  st->~ThreadState();
  munmap(st, kStateBytes);
}

// The main thread's stack as the kernel maps it: the mapping holding `addr`
// and the end of the mapping below it, from /proc/self/maps.
struct StackMapping {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t below = 0;  // end of the mapping below (0: none)
  bool found = false;
};

// A hex number at `p` (at least one digit), `p` moved past it.
bool parse_hex(const char*& p, std::uint64_t& v) {
  v = 0;
  const char* start = p;
  for (;; ++p) {
    const char c = *p;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0 || p - start >= 16) break;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  return p != start;
}

// Parsed by hand, not with sscanf (nor through pthread_getattr_np(), which
// uses it for the main thread): scanf's code and tables are 88 KiB of libc
// a program may never touch otherwise, mapped in at init by fault-around.
StackMapping stack_mapping(std::uint64_t addr) {
  StackMapping out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return out;
  char line[512];
  bool at_line_start = true;  // a longer line comes in several pieces
  while (std::fgets(line, sizeof line, f)) {
    const bool starts = at_line_start;
    at_line_start = std::strchr(line, '\n') != nullptr;
    if (!starts) continue;
    const char* p = line;
    std::uint64_t b = 0, e = 0;
    if (!parse_hex(p, b) || *p++ != '-' || !parse_hex(p, e) || b >= e) continue;
    if (addr >= b && addr < e) {
      out.begin = b;
      out.end = e;
      out.found = true;
      break;
    }
    if (e <= addr) out.below = e;  // the file lists mappings by address
  }
  std::fclose(f);
  return out;
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

void backtrace_start_background() {
  std::lock_guard lock(bt::g_refresh_mutex);
  bt::g_worker_allowed = true;
  if (bt::any_deferred(bt::g_table.load())) bt::start_worker_locked();
}

bool backtrace_wait_ready(int timeout_ms) {
  std::unique_lock lock(bt::g_refresh_mutex);
  const auto ready = [] { return !bt::any_deferred(bt::g_table.load()); };
  if (ready()) return true;
  if (!bt::g_worker_running) {
    // No worker (it could not be started): build here, as a refresh would.
    lock.unlock();
    return static_cast<bool>(bt::rebuild(nullptr, nullptr, true)) || ready();
  }
  if (timeout_ms < 0) {
    bt::g_ready_cv.wait(lock, ready);
    return true;
  }
  return bt::g_ready_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
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
  bool ready = t != nullptr && t->deferred == 0 && _r_debug.r_state == r_debug::RT_CONSISTENT;
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

std::size_t BacktraceInitReport::failures() const noexcept {
  return static_cast<std::size_t>(std::count_if(modules.begin(), modules.end(), [](const auto& m) { return m.failed(); }));
}

std::string BacktraceInitReport::message() const {
  std::string out;
  for (const BacktraceModuleReport& m : modules) {
    if (!m.failed()) continue;
    if (!out.empty()) out += '\n';
    out += m.name + ": " + m.reason;
  }
  return out;
}

void backtrace_register_thread() {
  if (bt::t_state) return;
  std::call_once(bt::g_key_once, [] { pthread_key_create(&bt::g_key, bt::free_state); });
  bt::ThreadState* st = bt::new_state();
  // No memory for it: the thread walks without a cache or memo, as one
  // that never registered.
  if (!st) return;
  const auto here = reinterpret_cast<std::uint64_t>(&st);
  pthread_attr_t attr;
  if (getpid() == gettid()) {
    // The main thread: only the part of its stack already mapped may be
    // read; the kernel grows it on demand down to RLIMIT_STACK below the
    // mapping's end, and never into the mapping below.
    if (const bt::StackMapping m = bt::stack_mapping(here); m.found) {
      st->lo = m.begin;
      st->hi = m.end;
      rlimit rl{};
      const std::uint64_t cap = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                                    ? static_cast<std::uint64_t>(rl.rlim_cur)
                                    : ~std::uint64_t{0};
      st->limit = std::min(m.begin, std::max(m.below, m.end > cap ? m.end - cap : 0));
      st->grows = true;
    }
  } else if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      st->lo = reinterpret_cast<std::uint64_t>(addr);
      st->hi = st->lo + size;
    }
    pthread_attr_destroy(&attr);
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
    st->cache_empty = true;
    // Emptied here rather than by the next walk (a walk resets the memo
    // itself only when the module map changed).
    st->memo.clear();
  }
}

}  // namespace sframe
