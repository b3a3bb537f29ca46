// sframe::backtrace against two independent unwinders working from DWARF CFI:
// libunwind's unw_backtrace and glibc's backtrace() (libgcc's unwinder).
// This file, libbt_callee.so and libbt_dl.so are built with -O2
// -fomit-frame-pointer (and -Wa,--gsframe under gcc, so the native sections
// are SFrame v1 from gas 2.40); every scenario runs three times: with those
// native sections, and with v2 and v3 sections generated from .eh_frame for
// every module.
//
// Convention compared: return addresses (RA, not RA-1) for every frame except
// the one a signal interrupted, which is its exact PC - what both references
// report.
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sframe/backtrace.hpp"
#include "sframe/cfi.hpp"
#include "sframe/encode.hpp"
#include "sframe/lookup.hpp"
#include "glibc_backtrace.hpp"
// White-box (one test): the thread's registered stack bounds.
#include "../../src/unwind/backtrace_internal.hpp"

extern "C" {
typedef void (*bt_callback)(void*);
int callee_recurse(int depth, bt_callback fn, void* arg);
unsigned callee_mix(unsigned x);
// Calls sframepp_backtrace_here (the entry behind sframe::backtrace) from a
// frame whose CFI says CFA = RBP + 16, with RBP set to `fp` for the call (0:
// the frame's own), and returns what it returns.
std::size_t sfpp_test_walk_with_fp(void** out, std::size_t size, sframe::BacktraceResult* result, std::uint64_t fp);
// Stores the registers sframepp_backtrace_here takes of its caller: the
// return address, the SP after the return, RBP.
void sfpp_test_caller_regs(std::uint64_t regs[3]);
}

asm(R"(
  .text
  .p2align 4
  .globl sfpp_test_walk_with_fp
  .type sfpp_test_walk_with_fp,@function
sfpp_test_walk_with_fp:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  testq %rcx, %rcx
  jz 1f
  movq %rcx, %rbp
1:
  call sframepp_backtrace_here
  movq %rsp, %rbp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size sfpp_test_walk_with_fp, .-sfpp_test_walk_with_fp

  .p2align 4
  .globl sfpp_test_caller_regs
  .type sfpp_test_caller_regs,@function
sfpp_test_caller_regs:
  .cfi_startproc
  movq (%rsp), %rax
  movq %rax, (%rdi)
  leaq 8(%rsp), %rax
  movq %rax, 8(%rdi)
  movq %rbp, 16(%rdi)
  ret
  .cfi_endproc
  .size sfpp_test_caller_regs, .-sfpp_test_caller_regs
)");

namespace {

using sframe_test::BacktraceFn;
using sframe_test::glibc_backtrace_fn;

constexpr int kMax = 1024;

// The three traces, taken at one call site. Frame 0 of each is a different
// return address inside capture() (three calls); frames 1.. must agree.
struct Traces {
  std::vector<void*> ours;
  std::vector<void*> glibc;
  std::vector<void*> libunwind;
  sframe::BacktraceResult result;
  /// Called at the bottom of mixed_recurse in place of capture().
  void (*bottom)(Traces&) = nullptr;
};

// Async-signal-safe storage for traces taken in handlers.
struct RawTraces {
  void* ours[kMax];
  void* glibc[kMax];
  void* libunwind[kMax];
  void* from_uc[kMax];
  int n_ours, n_glibc, n_libunwind, n_uc;
  sframe::BacktraceStop reason, uc_reason;
  std::uint64_t uc_pc;
};

[[gnu::noinline]] void capture_raw(RawTraces& t) {
  const sframe::BacktraceResult r = sframe::backtrace_ex(std::span<void*>(t.ours, kMax));
  t.n_ours = static_cast<int>(r.size);
  t.reason = r.reason;
  t.n_glibc = glibc_backtrace_fn()(t.glibc, kMax);
  t.n_libunwind = unw_backtrace(t.libunwind, kMax);
  asm volatile("" ::: "memory");
}

Traces to_traces(const RawTraces& r) {
  Traces t;
  t.ours.assign(r.ours, r.ours + r.n_ours);
  t.glibc.assign(r.glibc, r.glibc + r.n_glibc);
  t.libunwind.assign(r.libunwind, r.libunwind + r.n_libunwind);
  t.result.size = static_cast<std::size_t>(r.n_ours);
  t.result.reason = r.reason;
  return t;
}

[[gnu::noinline]] Traces capture() {
  auto raw = std::make_unique<RawTraces>();
  capture_raw(*raw);
  Traces t = to_traces(*raw);
  asm volatile("" ::: "memory");
  return t;
}

std::string name_of(void* pc) {
  Dl_info info{};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p", pc);
  std::string s = buf;
  if (dladdr(static_cast<char*>(pc) - 1, &info) && info.dli_fname) {
    s += " ";
    s += std::strrchr(info.dli_fname, '/') ? std::strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    if (info.dli_sname) s += std::string("(") + info.dli_sname + ")";
  }
  return s;
}

std::string dump(const std::vector<void*>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += "  #" + std::to_string(i) + " " + name_of(v[i]) + "\n";
  return s;
}

// ours[from..] must equal truth[from..], entry by entry, to the end of truth.
void expect_same(const std::vector<void*>& ours, const std::vector<void*>& truth, std::size_t from, const char* what) {
  ASSERT_GT(truth.size(), from) << what;
  bool same = ours.size() == truth.size();
  for (std::size_t i = from; same && i < truth.size(); ++i) same = ours[i] == truth[i];
  EXPECT_TRUE(same) << "ours vs " << what << "\nours:\n" << dump(ours) << what << ":\n" << dump(truth);
}

void expect_all_agree(const Traces& t, std::size_t min_frames) {
  EXPECT_GE(t.glibc.size(), min_frames);
  // The two references must agree with each other too, or the scenario
  // proves nothing.
  expect_same(t.libunwind, t.glibc, 1, "glibc (libunwind vs glibc)");
  expect_same(t.ours, t.glibc, 1, "glibc backtrace()");
  expect_same(t.ours, t.libunwind, 1, "unw_backtrace");
  EXPECT_EQ(t.result.reason, sframe::BacktraceStop::kOutermost) << sframe::describe(t.result.reason);
}

// ----- scenarios -----------------------------------------------------------

std::atomic<int> g_sink{0};

[[gnu::noinline]] int recurse(int depth, Traces& out) {
  if (depth == 0) {
    out = capture();
    return 1;
  }
  int r = recurse(depth - 1, out) + depth;
  asm volatile("" : "+r"(r));
  return r;
}

void store_capture(void* arg) { *static_cast<Traces*>(arg) = capture(); }

// Frames of both CFA kinds: alloca makes the compiler keep RBP as
// the frame pointer (CFA = RBP + 16), the others are SP-based. `pad` moves
// the whole chain down the stack by that many bytes.
[[gnu::noinline]] int mixed_recurse(int depth, Traces& out);
[[gnu::noinline]] int vla_level(int depth, Traces& out) {
  volatile char* a = static_cast<volatile char*>(__builtin_alloca(16 + static_cast<unsigned>(depth & 7)));
  a[0] = static_cast<char>(depth);
  int r = mixed_recurse(depth - 1, out) + a[0];
  asm volatile("" : "+r"(r));
  return r;
}
[[gnu::noinline]] int mixed_recurse(int depth, Traces& out) {
  if (depth == 0) {
    if (out.bottom)
      out.bottom(out);
    else
      out = capture();
    return 1;
  }
  if (depth % 3 == 0) return vla_level(depth, out) + 1;
  int r = mixed_recurse(depth - 1, out) + depth;
  asm volatile("" : "+r"(r));
  return r;
}
[[gnu::noinline]] int mixed_at(std::size_t pad, int depth, Traces& out) {
  volatile char* p = static_cast<volatile char*>(__builtin_alloca(pad + 1));
  p[0] = 1;
  int r = mixed_recurse(depth, out) + p[0];
  asm volatile("" : "+r"(r));
  return r;
}

Traces* g_qsort_out = nullptr;
int compare_ints(const void* a, const void* b) {
  if (g_qsort_out && g_qsort_out->ours.empty()) *g_qsort_out = capture();
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

struct Param {
  const char* name;
  sframe::BacktraceOptions options;
};

class BacktraceTest : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() {
    void* warm[4];
    (void)glibc_backtrace_fn()(warm, 4);  // glibc loads libgcc_s on first use: not in a handler
    Dl_info info{};
    ASSERT_TRUE(dladdr(reinterpret_cast<void*>(glibc_backtrace_fn()), &info));
    ASSERT_NE(std::strstr(info.dli_fname, "libc.so"), nullptr) << info.dli_fname;
  }
  void SetUp() override {
    const auto r = sframe::backtrace_init(GetParam().options);
    ASSERT_TRUE(r) << sframe::code_name(r.error().code);
    const sframe::BacktraceCacheStats s = sframe::backtrace_stats();
    ASSERT_GE(s.modules, 4u);
  }
};

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
  EXPECT_EQ(raw.uc_reason, sframe::BacktraceStop::kOutermost) << sframe::describe(raw.uc_reason);
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
  EXPECT_TRUE(stale.result.reason != sframe::BacktraceStop::kOutermost || stale.ours.size() != stale.glibc.size())
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
  bool same = r.reason == sframe::BacktraceStop::kOutermost && n > ref->n;
  for (int i = 0; same && i < ref->n; ++i) same = ours[n - ref->n + i] == ref->frames[i];
  if (!same && g_prof_v2.load() && r.reason == sframe::BacktraceStop::kNoSFrameForPc) {
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
      bool same = r.reason == sframe::BacktraceStop::kOutermost && n > ref->n;
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
    ASSERT_TRUE(sframe::backtrace_init(GetParam().options));
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
                                  << sframe::describe(static_cast<sframe::BacktraceStop>(g_prof_bad_reason.load()))
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

// The register entry (backtrace_from, exact PC), walked repeatedly from the
// same registers: the first walk fills the memo, the next ones take its
// straight run, compiled from C++ (the in-process entry's is assembly),
// over SP- and FP-based frames. Frame 0 is given as the call's return
// address - 1, an exact PC inside the call with the return address's rule.
[[gnu::noinline]] void walks_from_registers(Traces& t) {
  std::uint64_t regs[3];
  sfpp_test_caller_regs(regs);
  static void* outs[3][kMax];
  sframe::BacktraceResult results[3] = {};
  int walks = 3;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i)
    results[i] = sframe::backtrace_from(std::span<void*>(outs[i], kMax), regs[0] - 1, regs[1], regs[2]);
  t.ours.assign(outs[2], outs[2] + results[2].size);
  t.result = results[2];
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(std::equal(outs[i], outs[i] + results[i].size, t.ours.begin(), t.ours.end())) << i;
  void* ref[kMax];
  t.glibc.assign(ref, ref + glibc_backtrace_fn()(ref, kMax));
  t.libunwind.assign(ref, ref + unw_backtrace(ref, kMax));
  asm volatile("" ::: "memory");
}

TEST_P(BacktraceTest, RegisterEntryRepeatedOverBothCfaKinds) {
  for (const std::size_t pad : {std::size_t{0}, std::size_t{4096}}) {
    Traces t;
    t.bottom = walks_from_registers;
    mixed_at(pad, 24, t);
    expect_all_agree(t, 24);
  }
}

TEST_P(BacktraceTest, UnregisteredThreadInHandlerPathStopsCleanly) {
  // A thread that never registered: the ucontext/register entry points do
  // not register it (that is not async-signal-safe) and say so.
  sframe::BacktraceResult r{};
  std::thread([&] {
    void* out[8];
    r = sframe::backtrace_from(out, reinterpret_cast<std::uint64_t>(&capture),
                               reinterpret_cast<std::uint64_t>(__builtin_frame_address(0)), 0);
  }).join();
  EXPECT_EQ(r.reason, sframe::BacktraceStop::kNoStackBounds);
  EXPECT_EQ(r.size, 1u);
}

// --- hostile stacks ---

// Random words on a fake stack (some pointing back into it, some at real
// code addresses, some at nothing): every walk must end, with a reason.
TEST_P(BacktraceTest, CorruptedStackNeverCrashes) {
  Traces real;
  recurse(10, real);
  ASSERT_GT(real.ours.size(), 5u);
  std::mt19937_64 rng(12345);
  std::vector<std::uint64_t> fake(4096);
  const auto base = reinterpret_cast<std::uint64_t>(fake.data());
  (void)base;
  std::uint64_t stack_words[512];
  const auto sbase = reinterpret_cast<std::uint64_t>(stack_words);
  int reasons[16] = {};
  for (int iter = 0; iter < 20000; ++iter) {
    for (auto& w : stack_words) {
      switch (rng() % 5) {
        case 0: w = rng(); break;
        case 1: w = sbase + (rng() % sizeof stack_words); break;
        case 2: w = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]); break;
        case 3: w = 0; break;
        default: w = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]) + rng() % 64 - 32; break;
      }
    }
    asm volatile("" ::: "memory");
    const std::uint64_t pc = reinterpret_cast<std::uint64_t>(real.ours[rng() % real.ours.size()]) + rng() % 16;
    std::uint64_t sp;
    switch (rng() % 4) {
      case 0: sp = rng(); break;
      case 1: sp = base + (rng() % (fake.size() * 8)); break;  // heap: not a stack
      default: sp = sbase + (rng() % sizeof stack_words); break;
    }
    const std::uint64_t fp = rng() % 2 ? sbase + (rng() % sizeof stack_words) : rng();
    void* out[64];
    const sframe::BacktraceResult r = sframe::backtrace_from(out, pc, sp, fp);
    ASSERT_LE(r.size, 64u);
    ++reasons[static_cast<int>(r.reason)];
  }
  // Bad reads, not-increasing CFAs and unknown PCs must all have happened.
  EXPECT_GT(reasons[static_cast<int>(sframe::BacktraceStop::kUnreadableMemory)], 0);
  EXPECT_GT(reasons[static_cast<int>(sframe::BacktraceStop::kNoSFrameForPc)], 0);
}

// Frame 0 with CFA = RBP + 16 and a hostile RBP, once walks with the real
// one have filled the per-depth memo (so the entry's straight run holds the
// FP-based rule for that frame): a CFA below SP + 16 (or wrapping) or above
// the stack's end must be refused before anything is read there - these
// addresses are unmapped, so a read would crash - and the general walk then
// reports the read it refuses.
TEST_P(BacktraceTest, HostileFramePointerAtFrameZero) {
  void* out[64];
  sframe::BacktraceResult r{};
  std::size_t good = 0;
  for (int i = 0; i < 3; ++i) {
    good = sfpp_test_walk_with_fp(out, 64, &r, 0);
    EXPECT_EQ(r.size, good);
    EXPECT_EQ(r.reason, sframe::BacktraceStop::kOutermost) << sframe::describe(r.reason);
  }
  ASSERT_GT(good, 3u);
  int probe = 0;
  const auto sp = reinterpret_cast<std::uint64_t>(&probe);
  for (const std::uint64_t fp : {std::uint64_t{0x10}, ~std::uint64_t{0} - 8, sp + (std::uint64_t{1} << 40),
                                 std::uint64_t{1} << 46}) {
    r = {};
    const std::size_t n = sfpp_test_walk_with_fp(out, 64, &r, fp);
    EXPECT_EQ(n, 1u) << std::hex << fp;
    EXPECT_EQ(r.size, 1u);
    EXPECT_EQ(r.reason, sframe::BacktraceStop::kUnreadableMemory) << sframe::describe(r.reason);
  }
  // And the memo still serves the real frame pointer.
  EXPECT_EQ(sfpp_test_walk_with_fp(out, 64, &r, 0), good);
}

// The stack's end bounds the entry's straight run as it bounds every read:
// with the registered end lowered into a call chain, a walk must stop at
// the first frame whose CFA lies above it, where libunwind says (the SP it
// gives frame k + 1 is frame k's CFA), even though the memo predicts the
// frames beyond and their memory is readable. The end is put after frame 0
// (whose rule saves RBP here: a straight rule other than the plain one),
// after frame 3 and after frame 6.
struct BoundedRun {
  static constexpr int kBounded = 3;
  static constexpr int kFrames[kBounded] = {0, 3, 6};
  bool walked = false;
  std::size_t full = 0;
  std::size_t sizes[kBounded] = {};
  sframe::BacktraceStop reasons[kBounded] = {};
  bool prefix[kBounded] = {};
};

[[gnu::noinline]] void bounded_walks(void* arg) {
  auto& b = *static_cast<BoundedRun*>(arg);
  std::vector<std::uint64_t> sps;
  unw_context_t ctx;
  unw_cursor_t cur;
  unw_getcontext(&ctx);
  unw_init_local(&cur, &ctx);
  do {
    unw_word_t v = 0;
    unw_get_reg(&cur, UNW_REG_SP, &v);
    sps.push_back(v);
  } while (unw_step(&cur) > 0 && sps.size() < 64);
  if (sps.size() < 12) return;
  sframe::bt::ThreadState* st = sframe::bt::t_state;
  const std::uint64_t saved = st->hi;
  // Three walks fill the memo, then one per end: frame k's CFA (sps[k + 1])
  // lies above sps[k] + 8, the CFAs before it do not.
  constexpr int kWalks = 3 + BoundedRun::kBounded;
  std::uint64_t ends[kWalks] = {saved, saved, saved};
  for (int j = 0; j < BoundedRun::kBounded; ++j) ends[3 + j] = sps[BoundedRun::kFrames[j]] + 8;
  static void* outs[kWalks][kMax];
  sframe::BacktraceResult results[kWalks] = {};
  // The walks differ only in data (no branch the compiler could split into
  // two call sites, whose frame 0 would differ), and the count is opaque
  // (no peeled copy of the loop).
  int walks = kWalks;
  asm volatile("" : "+r"(walks));
  for (int i = 0; i < walks; ++i) {
    st->hi = ends[i];
    results[i] = sframe::backtrace_ex(std::span<void*>(outs[i], kMax));
    st->hi = saved;
  }
  b.walked = true;
  b.full = results[2].size;
  for (int j = 0; j < BoundedRun::kBounded; ++j) {
    const sframe::BacktraceResult& r = results[3 + j];
    b.sizes[j] = r.size;
    b.reasons[j] = r.reason;
    b.prefix[j] = r.size <= b.full && std::equal(outs[3 + j], outs[3 + j] + r.size, outs[2]);
  }
}

TEST_P(BacktraceTest, StackEndBoundsTheStraightRun) {
  BoundedRun b;
  callee_recurse(20, bounded_walks, &b);
  ASSERT_TRUE(b.walked) << "libunwind walked too few frames";
  ASSERT_GT(b.full, 20u);
  for (int j = 0; j < BoundedRun::kBounded; ++j) {
    SCOPED_TRACE(BoundedRun::kFrames[j]);
    EXPECT_EQ(b.sizes[j], static_cast<std::size_t>(BoundedRun::kFrames[j] + 1));
    EXPECT_EQ(b.reasons[j], sframe::BacktraceStop::kUnreadableMemory) << sframe::describe(b.reasons[j]);
    EXPECT_TRUE(b.prefix[j]);
  }
}

TEST_P(BacktraceTest, ReasonsAreReported) {
  void* one[1];
  const sframe::BacktraceResult full = sframe::backtrace_ex(one);
  EXPECT_EQ(full.size, 1u);
  EXPECT_EQ(full.reason, sframe::BacktraceStop::kBufferFull);
  // A heap "stack" is never read.
  std::vector<std::uint64_t> heap(16, 0);
  void* out[8];
  const auto r = sframe::backtrace_from(out, reinterpret_cast<std::uint64_t>(&capture) + 8,
                                        reinterpret_cast<std::uint64_t>(heap.data()), 0);
  EXPECT_EQ(r.size, 1u);
  EXPECT_EQ(r.reason, sframe::BacktraceStop::kUnreadableMemory);
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

INSTANTIATE_TEST_SUITE_P(Sections, BacktraceTest,
                         ::testing::Values(Param{"native", {sframe::Version::kV3, false}},
                                           Param{"generated_v2", {sframe::Version::kV2, true}},
                                           Param{"generated_v3", {sframe::Version::kV3, true}}),
                         [](const ::testing::TestParamInfo<Param>& p) { return std::string(p.param.name); });

}  // namespace
