// SPDX-License-Identifier: MIT
// sframe::backtrace against two independent unwinders working from DWARF CFI:
// libunwind's unw_backtrace and glibc's backtrace() (libgcc's unwinder):
// call chains, threads, signals, dlopen and module tables swapped under
// signals. This file, libbt_callee.so and libbt_dl.so are built with -O2
// -fomit-frame-pointer (and -Wa,--gsframe under gcc, so the native sections
// are SFrame v1 from gas 2.40); every scenario runs three times: with those
// native sections, and with v2 and v3 sections generated from .eh_frame for
// every module. The entry's own cases (registers, hostile stacks, bounds)
// are in backtrace_entry_test.cpp.
#include "backtrace_support.hpp"

namespace {

std::atomic<int> g_sink{0};

Traces* g_qsort_out = nullptr;
int compare_ints(const void* a, const void* b) {
  if (g_qsort_out && g_qsort_out->ours.empty()) *g_qsort_out = capture();
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}


TEST_P(BacktraceTest, Simple) {
  const Traces t = capture();
  expect_all_agree(t, 3);
}

TEST_P(BacktraceTest, DeepRecursion) {
  Traces t;
  recurse(300, t);
  expect_all_agree(t, 300);
}

TEST_P(BacktraceTest, IntoSharedLibraryThroughPlt) {
  Traces t;
  callee_recurse(40, store_capture, &t);
  expect_all_agree(t, 40);
}

TEST_P(BacktraceTest, CallbackFromLibcQsort) {
  Traces t;
  g_qsort_out = &t;
  std::vector<int> v(64);
  for (int i = 0; i < 64; ++i) v[i] = (i * 37) % 64;
  std::qsort(v.data(), v.size(), sizeof(int), compare_ints);
  g_qsort_out = nullptr;
  expect_all_agree(t, 4);
}

TEST_P(BacktraceTest, Threads) {
  constexpr int kThreads = 4;
  std::vector<Traces> got(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i)
    ts.emplace_back([i, &got] {
      sframe::backtrace_register_thread();
      for (int rep = 0; rep < 50; ++rep) recurse(10 + 7 * i, got[i]);
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kThreads; ++i) expect_all_agree(got[i], 10 + 7 * i);
}

TEST_P(BacktraceTest, WarmCacheHits) {
  // The same stack twice from the same call site: the second walk finds
  // every rule in the cache.
  sframe::BacktraceCacheStats before{}, after{};
  for (int i = 0; i < 2; ++i) {
    Traces t;
    before = sframe::backtrace_stats();
    recurse(20, t);
    after = sframe::backtrace_stats();
    ASSERT_GT(t.ours.size(), 20u);
  }
  EXPECT_GT(after.hits - before.hits, 20u);
  // Only the outermost frame (_start: an FDE without FREs, which the unwind
  // core does not cache) is looked up again, once per section map consulted.
  EXPECT_LE(after.misses - before.misses, 2u);
}

TEST_P(BacktraceTest, FlushMakesTheNextWalkCold) {
  // backtrace_flush_cache() empties the rule cache and the memo (the flush
  // writes only what walks filled since the last one; every rule looked up
  // before it must be looked up again after it): the walk after a flush
  // misses as often as the first one, and the one after that not at all.
  for (const int depth : {20, 300}) {
    std::uint64_t misses[3] = {};
    std::size_t frames[3] = {};
    sframe::backtrace_flush_cache();
    for (int i = 0; i < 3; ++i) {
      Traces t;
      const sframe::BacktraceCacheStats before = sframe::backtrace_stats();
      recurse(depth, t);
      misses[i] = sframe::backtrace_stats().misses - before.misses;
      frames[i] = t.ours.size();
      if (i == 1) sframe::backtrace_flush_cache();
    }
    ASSERT_GT(frames[0], static_cast<std::size_t>(std::min(depth, 200))) << depth;
    EXPECT_EQ(frames[1], frames[0]) << depth;
    EXPECT_EQ(frames[2], frames[0]) << depth;
    // The first walk: each distinct return address once (recurse() calls
    // itself from one site, so that is far fewer than the frames).
    EXPECT_GT(misses[0], 2u) << depth;
    EXPECT_LE(misses[1], 2u) << depth;
    EXPECT_EQ(misses[2], misses[0]) << depth;
  }
}

TEST_P(BacktraceTest, RepeatedWalksOverBothCfaKinds) {
  // The first walk fills the per-depth memo, the next ones take it (the
  // straight run): SP- and FP-based CFAs mixed, the same chain at other
  // stack addresses (the memo holds rules, not addresses), and depths
  // that end the prediction early or late.
  for (int round = 0; round < 4; ++round)
    for (const std::size_t pad : {std::size_t{0}, std::size_t{48}, std::size_t{4096}}) {
      Traces t;
      mixed_at(pad, 24 + (round == 3 ? 5 : 0), t);
      expect_all_agree(t, 24);
    }
}

TEST_P(BacktraceTest, AlternatingStacksAtSameDepths) {
  // Walks whose frames at a given depth are the same as the last walk's at
  // some depths and differ at others (the walk predicts each depth's rule
  // from the last walk's): every walk must still agree with the references.
  for (int round = 0; round < 6; ++round) {
    Traces a, b, c;
    recurse(20 + round % 3, a);
    callee_recurse(20 + round % 2, store_capture, &b);
    recurse(20, c);
    expect_all_agree(a, 20);
    expect_all_agree(b, 20);
    expect_all_agree(c, 20);
  }
}

// --- signals ---

RawTraces* g_sig = nullptr;
std::atomic<bool> g_got_signal{false};

void on_signal(int, siginfo_t*, void* ctx) {
  auto* uc = static_cast<ucontext_t*>(ctx);
  if (!g_got_signal.load()) {
    capture_raw(*g_sig);
    const sframe::BacktraceResult r = sframe::backtrace_ex(std::span<void*>(g_sig->from_uc, kMax), uc);
    g_sig->n_uc = static_cast<int>(r.size);
    g_sig->uc_reason = r.reason;
    g_sig->uc_pc = static_cast<std::uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
    g_got_signal.store(true);
  }
}

[[gnu::noinline]] unsigned spin_leaf(unsigned x) {
  for (int i = 0; i < 50; ++i) x = x * 1103515245u + 12345u + static_cast<unsigned>(g_sink.load(std::memory_order_relaxed));
  return x;
}

[[gnu::noinline]] unsigned spin(int depth) {
  if (depth > 0) return spin(depth - 1) + 1;
  unsigned x = 1;
  while (!g_got_signal.load(std::memory_order_relaxed)) x = callee_mix(spin_leaf(x));
  return x;
}

// Compares the handler's traces: the full ones (handler, trampoline,
// interrupted frames) and the ucontext one against the part of the full
// trace from the interrupted PC on.
void check_signal_traces(const RawTraces& raw, std::size_t min_frames) {
  const Traces t = to_traces(raw);
  expect_all_agree(t, min_frames);
  std::vector<void*> uc(raw.from_uc, raw.from_uc + raw.n_uc);
  const auto at = std::find(t.glibc.begin(), t.glibc.end(), reinterpret_cast<void*>(raw.uc_pc));
  ASSERT_NE(at, t.glibc.end()) << "interrupted PC not in glibc's trace\n" << dump(t.glibc);
  const std::vector<void*> suffix(at, t.glibc.end());
  expect_same(uc, suffix, 0, "glibc's trace from the interrupted PC");
  EXPECT_EQ(raw.uc_reason, sframe::StopReason::kOutermost) << sframe::describe(raw.uc_reason);
}

void install(int sig, void (*fn)(int, siginfo_t*, void*), bool altstack) {
  struct sigaction sa{};
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | (altstack ? SA_ONSTACK : 0);
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(sig, &sa, nullptr), 0);
}

struct AltStack {
  std::vector<char> mem = std::vector<char>(1 << 16);
  AltStack() {
    stack_t ss{};
    ss.ss_sp = mem.data();
    ss.ss_size = mem.size();
    sigaltstack(&ss, nullptr);
  }
  ~AltStack() {
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
  }
};

void run_alarm(bool altstack, int rounds) {
  std::unique_ptr<AltStack> alt;
  if (altstack) alt = std::make_unique<AltStack>();
  install(SIGALRM, on_signal, altstack);
  for (int round = 0; round < rounds; ++round) {
    RawTraces raw{};
    g_sig = &raw;
    g_got_signal = false;
    itimerval it{};
    it.it_value.tv_usec = 200 + 37 * round;
    setitimer(ITIMER_REAL, &it, nullptr);
    spin(5 + round % 4);
    check_signal_traces(raw, 8);
    if (::testing::Test::HasFailure()) break;
  }
  signal(SIGALRM, SIG_DFL);
}

TEST_P(BacktraceTest, SigalrmWhileSpinning) { run_alarm(false, 40); }
TEST_P(BacktraceTest, SigalrmOnSigaltstack) { run_alarm(true, 40); }

sigjmp_buf g_jump;
// Hidden from the optimizer, which would otherwise warn about the store.
volatile int* volatile g_bad_address = reinterpret_cast<volatile int*>(16);
void on_segv(int sig, siginfo_t* info, void* ctx) {
  on_signal(sig, info, ctx);
  siglongjmp(g_jump, 1);
}

[[gnu::noinline]] void bad_store(int depth, volatile int* p) {
  if (depth > 0) {
    bad_store(depth - 1, p);
    asm volatile("" ::: "memory");
    return;
  }
  *p = 1;
}

void run_segv(bool altstack) {
  std::unique_ptr<AltStack> alt;
  if (altstack) alt = std::make_unique<AltStack>();
  install(SIGSEGV, on_segv, altstack);
  RawTraces raw{};
  g_sig = &raw;
  g_got_signal = false;
  if (sigsetjmp(g_jump, 1) == 0) bad_store(12, g_bad_address);
  signal(SIGSEGV, SIG_DFL);
  ASSERT_TRUE(g_got_signal.load());
  check_signal_traces(raw, 14);
}

TEST_P(BacktraceTest, SigsegvFromBadStore) { run_segv(false); }
TEST_P(BacktraceTest, SigsegvOnSigaltstack) { run_segv(true); }

// --- dlopen / dlclose ---

TEST_P(BacktraceTest, DlopenNeedsRefresh) {
  void* h = dlopen(SFRAMEPP_BT_DL_PATH, RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* fn = reinterpret_cast<int (*)(int, bt_callback, void*)>(dlsym(h, "dl_recurse"));
  ASSERT_NE(fn, nullptr);
  const std::size_t modules = sframe::backtrace_stats().modules;
  Traces stale;
  fn(5, store_capture, &stale);
  // Before the refresh the library is unknown: the walk must end there (or
  // be carried on, wrongly, by the frame-pointer fallback), never crash.
  EXPECT_TRUE(stale.result.reason != sframe::StopReason::kOutermost || stale.ours.size() != stale.glibc.size())
      << dump(stale.ours);
  ASSERT_TRUE(sframe::backtrace_refresh());
  EXPECT_EQ(sframe::backtrace_stats().modules, modules + 1);
  Traces t;
  fn(5, store_capture, &t);
  expect_all_agree(t, 8);
  dlclose(h);
  ASSERT_TRUE(sframe::backtrace_refresh());
  EXPECT_EQ(sframe::backtrace_stats().modules, modules);
}

// --- module table swapped under signals ---

// SIGPROF hits whichever thread runs, the rebuilding one included, while
// the main thread rebuilds and republishes the module table over and over:
// every walk must see a whole table. libunwind cannot serve as the reference
// in this handler (it deadlocks on the loader lock when the signal lands in
// dl_iterate_phdr), so each thread's callers are traced beforehand and
// checked against glibc and libunwind, and each walk in the handler must end
// in exactly those frames, at the outermost one.
std::atomic<int> g_prof_ok{0}, g_prof_bad{0};
// The last bad walk in a handler: its stop reason and address, its frames.
std::atomic<int> g_prof_bad_reason{0};
std::atomic<std::uint64_t> g_prof_bad_address{0};
void* g_prof_bad_frames[64];
std::atomic<int> g_prof_bad_n{0};
std::atomic<bool> g_prof_on{false};
std::atomic<int> g_walk_bad{0};
// v2 cannot describe some functions (CFA from another register, DRAP; e.g.
// ld.so's _dl_runtime_resolve): a signal landing there ends the walk with
// kNoSFrameForPc, rightly. Such stops are kept apart with their lookup PCs,
// each checked afterwards to lie in a function gen v2 leaves out.
std::atomic<bool> g_prof_v2{false};
std::atomic<int> g_prof_gaps{0};
std::uint64_t g_prof_gap_pcs[16];
struct ProfRef {
  void* frames[kMax];
  int n = 0;  // the thread's callers (a trace without its frame 0)
};
thread_local ProfRef* t_prof_ref = nullptr;

void on_prof(int, siginfo_t*, void*) {
  const ProfRef* ref = t_prof_ref;
  if (!g_prof_on.load() || !ref) return;
  void* ours[kMax];
  const sframe::BacktraceResult r = sframe::backtrace_ex(std::span<void*>(ours, kMax));
  const int n = static_cast<int>(r.size);
  bool same = r.reason == sframe::StopReason::kOutermost && n > ref->n;
  for (int i = 0; same && i < ref->n; ++i) same = ours[n - ref->n + i] == ref->frames[i];
  if (!same && g_prof_v2.load() && r.reason == sframe::StopReason::kNoSFrameForPc) {
    const int k = g_prof_gaps.fetch_add(1);
    if (k < 16) g_prof_gap_pcs[k] = r.address;
    return;
  }
  if (!same && g_prof_bad_n.load() == 0) {
    g_prof_bad_reason.store(static_cast<int>(r.reason));
    g_prof_bad_address.store(r.address);
    const int k = n < 64 ? n : 64;
    for (int i = 0; i < k; ++i) g_prof_bad_frames[i] = ours[i];
    g_prof_bad_n.store(k > 0 ? k : -1);
  }
  (same ? g_prof_ok : g_prof_bad).fetch_add(1);
}

// This thread's callers, checked against both references.
[[gnu::noinline]] void make_ref(ProfRef& ref) {
  const Traces t = capture();
  // Frames: capture_raw, capture, make_ref, its caller (at another call
  // site than when the signal lands), then the callers of that.
  ASSERT_GT(t.glibc.size(), 5u);
  expect_all_agree(t, 5);
  ref.n = static_cast<int>(t.ours.size()) - 4;
  std::copy(t.ours.begin() + 4, t.ours.end(), ref.frames);
}

TEST_P(BacktraceTest, SignalsDuringRefresh) {
  install(SIGPROF, on_prof, false);
  g_prof_ok = g_prof_bad = g_walk_bad = g_prof_bad_n = g_prof_gaps = 0;
  g_prof_v2 = GetParam().options.generated_version == sframe::Version::kV2 && GetParam().options.always_generate;
  auto main_ref = std::make_unique<ProfRef>();
  make_ref(*main_ref);
  std::atomic<bool> stop{false}, ready{false};
  std::thread spinner([&] {
    sframe::backtrace_register_thread();
    auto ref = std::make_unique<ProfRef>();
    make_ref(*ref);
    t_prof_ref = ref.get();
    ready = true;
    // Walks all the time, so that signals also land inside a walk (the
    // nested walk must then leave the thread's rule cache alone).
    while (!stop.load(std::memory_order_relaxed)) {
      void* out[kMax];
      const sframe::BacktraceResult r = sframe::backtrace_ex(std::span<void*>(out, kMax));
      const int n = static_cast<int>(r.size);
      bool same = r.reason == sframe::StopReason::kOutermost && n > ref->n;
      for (int i = 0; same && i < ref->n; ++i) same = out[n - ref->n + i] == ref->frames[i];
      if (!same) g_walk_bad.fetch_add(1);
    }
    t_prof_ref = nullptr;
  });
  while (!ready.load()) std::this_thread::yield();
  t_prof_ref = main_ref.get();
  g_prof_on = true;
  itimerval it{};
  it.it_interval.tv_usec = 500;
  it.it_value.tv_usec = 500;
  setitimer(ITIMER_PROF, &it, nullptr);
  // Until enough signals have landed (the timer ticks at the kernel's rate
  // of process CPU time), or 10 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int rebuilds = 0;
  while (g_prof_ok.load() + g_prof_bad.load() < 100 && std::chrono::steady_clock::now() < deadline) {
    // Every module built in the rebuild itself: the walks check the
    // tables a rebuild publishes, not the frame-pointer fallback.
    sframe::BacktraceOptions o = GetParam().options;
    o.background_generation = false;
    ASSERT_TRUE(sframe::backtrace_init(o));
    ++rebuilds;
  }
  it = {};
  setitimer(ITIMER_PROF, &it, nullptr);
  g_prof_on = false;
  t_prof_ref = nullptr;
  stop = true;
  spinner.join();
  signal(SIGPROF, SIG_DFL);
  EXPECT_GT(g_prof_ok.load(), 10) << rebuilds << " rebuilds";
  EXPECT_EQ(g_prof_bad.load(), 0) << "of " << g_prof_ok.load() + g_prof_bad.load() << "; a bad walk stopped with "
                                  << sframe::describe(static_cast<sframe::StopReason>(g_prof_bad_reason.load()))
                                  << " at 0x" << std::hex << g_prof_bad_address.load() << std::dec << " after:\n"
                                  << dump(std::vector<void*>(g_prof_bad_frames, g_prof_bad_frames + std::max(0, g_prof_bad_n.load())));
  EXPECT_EQ(g_walk_bad.load(), 0);
  for (int i = 0; i < std::min(g_prof_gaps.load(), 16); ++i) {
    const std::uint64_t pc = g_prof_gap_pcs[i];
    Dl_info info{};
    ASSERT_TRUE(dladdr(reinterpret_cast<void*>(pc), &info) && info.dli_fname) << std::hex << pc;
    auto file = sframe::elf::ElfFile::open(info.dli_fname);
    ASSERT_TRUE(file) << info.dli_fname;
    auto g = sframe::cfi::generate(*file, sframe::Version::kV2, 0);
    ASSERT_TRUE(g) << info.dli_fname;
    const std::uint64_t link_pc = pc - reinterpret_cast<std::uint64_t>(info.dli_fbase);
    const bool left_out = std::any_of(g->skipped.begin(), g->skipped.end(), [&](const sframe::cfi::Skipped& k) {
      return link_pc - k.start < k.size;
    });
    EXPECT_TRUE(left_out) << "a v2 walk found no SFrame at " << info.dli_fname << "+0x" << std::hex << link_pc
                          << ", which gen v2 does not leave out";
  }
}

// The generated PC-mask rule for .plt.got stubs (jmp *GOT; nothing pushed)
// against the DWARF FDE ld wrote for them, read by libdw. A SIGALRM landing
// in libasan's .plt.got exposed sp+16 here (what ld 2.40's own SFrame says).
TEST(BacktraceGen, PltGotRuleMatchesDwarf) {
  auto file = sframe::elf::ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(file);
  std::optional<sframe::elf::SectionHeader> pltgot;
  for (const auto& sh : file->sections())
    if (sh.name == ".plt.got") pltgot = sh;
  // Does not apply to a link that made no .plt.got (whether ld makes one
  // depends on the build: sanitizers, static or shared libraries): no stub
  // to compare.
  if (!pltgot) GTEST_SKIP() << "no .plt.got in this build";
  auto fns = sframe::cfi::read_functions(*file);
  ASSERT_TRUE(fns);
  const sframe::cfi::Function* dwarf = nullptr;
  for (const auto& f : *fns)
    if (f.start == pltgot->address) dwarf = &f;
  ASSERT_NE(dwarf, nullptr) << "ld wrote no FDE for .plt.got";
  ASSERT_FALSE(dwarf->rows.empty());
  const sframe::Rule want = dwarf->rows.front().row.cfa;
  auto gen = sframe::cfi::generate(*file, sframe::Version::kV3, 0);
  ASSERT_TRUE(gen);
  auto bytes = sframe::encode(gen->spec);
  ASSERT_TRUE(bytes);
  auto s = sframe::Section::parse(*bytes, 0);
  ASSERT_TRUE(s);
  for (std::uint64_t pc = pltgot->address; pc < pltgot->address + pltgot->size; ++pc) {
    auto m = sframe::find(*s, pc);
    ASSERT_TRUE(m) << std::hex << pc;
    EXPECT_EQ(m->row.cfa.regnum, want.regnum) << std::hex << pc;
    EXPECT_EQ(m->row.cfa.offset, want.offset) << std::hex << pc;
  }
}


// --- threads being created and destroyed -----------------------------------

// SIGPROF samples (ucontext_t entry) land on threads at every point of their
// life, just out of clone3 (RBP still the parent's or garbage) and exiting;
// none of the threads registered. Every address a sample returns must lie
// in an executable mapping of /proc/self/maps: no invented frame.
struct ChurnSamples {
  static constexpr int kSamples = 4096;
  static constexpr int kFrames = 64;
  std::atomic<int> next{0};
  std::atomic<int> stale_poison{0};  // ASan builds: granules a walk left poisoned
  void* frames[kSamples][kFrames];
  int count[kSamples];
};
ChurnSamples* g_churn = nullptr;

extern "C" void on_churn_prof(int, siginfo_t*, void* uc) {
  ChurnSamples* c = g_churn;
  if (!c) return;
  const int i = c->next.fetch_add(1, std::memory_order_relaxed);
  if (i >= ChurnSamples::kSamples) return;
  c->count[i] = static_cast<int>(
      sframe::backtrace(std::span<void*>(c->frames[i], ChurnSamples::kFrames), static_cast<const ucontext_t*>(uc)));
#if defined(__SANITIZE_ADDRESS__)
  // ASan's shadow is the truth here: the walk, once returned, leaves no
  // poisoned granule below this frame, where a later frame (the next
  // handler's) would be reported as stack-use-after-scope. The memo's run,
  // compiled no_sanitize_address with apply_rule's scope marks inlined
  // into it, left one in about 1 sample of 15.
  char probe = 0;
  asm volatile("" : : "r"(&probe) : "memory");
  const auto below = (reinterpret_cast<std::uintptr_t>(&probe) & ~std::uintptr_t{7}) - 256;
  for (std::uintptr_t a = below - 16384; a < below; a += 8)
    if (__asan_address_is_poisoned(reinterpret_cast<void*>(a))) c->stale_poison.fetch_add(1);
#endif
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> executable_mappings() {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  FILE* f = std::fopen("/proc/self/maps", "r");
  char line[512];
  while (f && std::fgets(line, sizeof line, f)) {
    unsigned long long b = 0, e = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%llx-%llx %7s", &b, &e, perms) == 3 && perms[2] == 'x') out.emplace_back(b, e);
  }
  if (f) std::fclose(f);
  return out;
}

TEST_P(BacktraceTest, SamplesWhileThreadsAreCreatedHaveNoInventedFrames) {
  auto samples = std::make_unique<ChurnSamples>();
  g_churn = samples.get();
  install(SIGPROF, on_churn_prof, false);
  itimerval it{};
  it.it_interval.tv_usec = 200;
  it.it_value.tv_usec = 200;
  setitimer(ITIMER_PROF, &it, nullptr);
  // Until 300 samples (the timer ticks with the process's CPU time, which
  // a loaded machine gives out slowly), or 8 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  int created = 0;
  while (samples->next.load() < 300 && std::chrono::steady_clock::now() < deadline) {
    std::thread ts[4];
    for (auto& t : ts)
      t = std::thread([] {
        volatile unsigned x = 0;
        for (unsigned k = 0; k < 2000; ++k) x = x + callee_mix(k);
      });
    for (auto& t : ts) t.join();
    created += 4;
  }
  it = {};
  setitimer(ITIMER_PROF, &it, nullptr);
  signal(SIGPROF, SIG_DFL);
  g_churn = nullptr;
  const auto exec = executable_mappings();
  const int n = std::min(samples->next.load(), ChurnSamples::kSamples);
  int frames = 0, invented = 0;
  std::string first;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < samples->count[i]; ++k) {
      ++frames;
      const auto pc = reinterpret_cast<std::uint64_t>(samples->frames[i][k]);
      const bool in = std::any_of(exec.begin(), exec.end(), [&](const auto& m) { return pc >= m.first && pc < m.second; });
      if (!in && ++invented == 1) {
        first = "sample " + std::to_string(i) + " frame " + std::to_string(k) + ":\n" +
                dump(std::vector<void*>(samples->frames[i], samples->frames[i] + samples->count[i]));
      }
    }
  std::printf("%d threads created, %d samples, %d frames, %d invented\n", created, n, frames, invented);
  EXPECT_GT(n, 50);
  EXPECT_EQ(invented, 0) << first;
  EXPECT_EQ(samples->stale_poison.load(), 0) << "granules left poisoned below a sampling handler by the walk";
}

INSTANTIATE_TEST_SUITE_P(Sections, BacktraceTest, section_params(), param_name);

}  // namespace
