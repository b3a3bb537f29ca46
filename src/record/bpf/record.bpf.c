// SPDX-License-Identifier: MIT
// sframepp's recorder, in-kernel part: a perf_event program run at every
// cpu-clock sample of the recorded tasks (per-task events that their new
// threads and processes inherit; per-CPU events with -a). It takes the
// kernel callchain with bpf_get_stack(), walks the user stack from the
// interrupted task's user registers, and hands the frames to user space
// through a BPF ring buffer (layout: record_abi.h).
//
// User registers: the sample's own when it interrupted user mode; else the
// ones saved at kernel entry (bpf_task_pt_regs). User memory is read with
// bpf_probe_read_user, ahead in chunks (stack_window.h), which fails, and
// ends the walk with a reason, on a page that is not resident: a BPF
// program cannot fault it in.
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/types.h>

// The task of a sample (bpf_get_current_task_btf): only passed to helpers.
struct task_struct;

// The two runs of saved registers read (UAPI struct pt_regs, x86-64).
_Static_assert(__builtin_offsetof(bpf_user_pt_regs_t, rbx) == __builtin_offsetof(bpf_user_pt_regs_t, rbp) + 8,
               "rbp, rbx");
_Static_assert(__builtin_offsetof(bpf_user_pt_regs_t, cs) == __builtin_offsetof(bpf_user_pt_regs_t, rip) + 8 &&
                   __builtin_offsetof(bpf_user_pt_regs_t, rsp) == __builtin_offsetof(bpf_user_pt_regs_t, rip) + 24,
               "rip, cs, eflags, rsp");

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "record_abi.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20);
} samples SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_sample);
} scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_counters);
} counters SEC(".maps");

// Module tables, one array map of blocks per module file, at its ID, and
// processes (their executable mappings), filled by user space
// (record_abi.h). The inner maps differ in size only (BPF_F_INNER_MAP); user
// space fills them through mmap (BPF_F_MMAPABLE), not an update per block.
struct module_table {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, union sframe_record_block);
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(max_entries, SFRAME_RECORD_MAX_MODULES);
  __type(key, __u32);
  __array(values, struct module_table);
} modules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u32);
  __type(value, struct sframe_record_process);
} processes SEC(".maps");

// `--check N`: copies for one sample in N (record_abi.h).
const volatile __u32 check_every = 0;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20);
} copies SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_copy);
} copy_scratch SEC(".maps");

// Set before loading: walk by frame pointers only (the benchmark's
// baseline: the same program, the same stacks).
const volatile __u8 frame_pointers_only = 0;

#define SFRAME_RECORD_INLINE __always_inline
#define SFRAME_RECORD_OPAQUE(v) asm volatile("" : "+r"(v))
#define SFRAME_RECORD_STEP_LINKAGE __attribute__((noinline))
#define SFRAME_RECORD_SEARCH_LINKAGE __attribute__((noinline))
#define SFRAME_RECORD_READ_USER(dst, len, addr) bpf_probe_read_user((dst), (len), (const void *)(addr))
#include "stack_window.h"

// The walk's stack window, per CPU (stack_window.h).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_window);
} windows SEC(".maps");

// A global function: the verifier checks the window's paths once, not at
// each of the step's reads.
__attribute__((noinline)) int read_stack(__u64 *dst, __u64 addr) {
  if (!dst) return -1;
  __u32 zero = 0;
  struct sframe_record_window *win = bpf_map_lookup_elem(&windows, &zero);
  if (!win) return bpf_probe_read_user(dst, 8, (const void *)addr);
  return sframe_record_window_read(win, dst, addr);
}
// A read the window holds already (most of a walk's) is taken inline, the
// rest go to read_stack: where the kernel guards returns against
// speculation (AMD's SRSO "safe RET" sends each one through a thunk that
// mispredicts), a call's return costs more than such a read.
static __always_inline int read_word(__u64 *dst, __u64 addr) {
  __u32 zero = 0;
  const struct sframe_record_window *win = bpf_map_lookup_elem(&windows, &zero);
  if (win && !sframe_record_window_hit(win, dst, addr)) return 0;
  return read_stack(dst, addr);
}
#define SFRAME_RECORD_READ(dst, addr) read_word((dst), (addr))
static __always_inline const union sframe_record_block *table_block(__u32 module, __u32 index) {
  void *table = bpf_map_lookup_elem(&modules, &module);
  if (!table) return 0;
  return bpf_map_lookup_elem(table, &index);
}
#define SFRAME_RECORD_BLOCK(module, index) table_block((module), (index))
#define SFRAME_RECORD_PROCESS(tgid) ((const struct sframe_record_process *)bpf_map_lookup_elem(&processes, (tgid)))
// The walk's row cache, per CPU (record_abi.h).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_row_cache);
} row_cache SEC(".maps");
static __always_inline struct sframe_record_row_cache *this_row_cache(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&row_cache, &zero);
}
#define SFRAME_RECORD_ROW_CACHE() this_row_cache()
#include "walk.h"

// The walk's state, per CPU (see struct sframe_record_walk).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sframe_record_walk);
} walks SEC(".maps");

// What every step of a walk updates: this CPU's sample, counters and walk,
// looked up once by on_sample and handed to each bpf_loop iteration on its
// stack.
struct walk_ctx {
  struct sframe_record_sample *s;
  struct sframe_record_counters *c;
  struct sframe_record_walk *w;
};

// Frames per bpf_loop iteration: each call of walk_steps ends in a return
// the kernel may guard against speculation (read_word above). Four to a
// call walked python3's stacks (some 20 frames) measurably faster than one;
// eight gained no more, for twice the instructions to verify
// (docs/benchmarks.md, stop 59).
#define WALK_FRAMES_PER_CALL 4

static long walk_steps(__u32 i, void *ctx) {
  const struct walk_ctx *x = ctx;
  struct sframe_record_sample *s = x->s;
  struct sframe_record_counters *c = x->c;
  struct sframe_record_walk *w = x->w;
#pragma unroll
  for (int k = 0; k < WALK_FRAMES_PER_CALL; k++) {
    if (!sframe_record_step(w)) return 1;
    if (!sframe_record_emit(s->ips, s->kernel_nr, SFRAME_RECORD_MAX_FRAMES, w)) {
      w->stop = SFRAME_RECORD_STOP_DEPTH;
      return 1;
    }
    const __u8 src = w->last_source;
    if (src < SFRAME_RECORD_SOURCES) c->by_source[src]++;
  }
  return 0;
}

// floor(log2(v)) for v < 2^63, without branches: a branch per bit would
// hand the verifier one path per histogram slot, each checked through the
// rest of the program.
static __always_inline __u32 log2_u64(__u64 v) {
  __u64 r = 0;
#pragma unroll
  for (__u32 bits = 32; bits > 0; bits >>= 1) {
    // `bits` when v >= 2^bits (2^bits - 1 - v then wraps: its top bit is
    // set), else 0.
    const __u64 k = ((((1ULL << bits) - 1) - v) >> 63) * bits;
    v >>= k;
    r |= k;
  }
  return (__u32)r;
}

// What perf record --call-graph=dwarf copies into a sample: the user
// registers (perf's order, record_abi.h) and the stack from SP up, a page at
// a time, to 8 KB or the first page that cannot be read (the stack's top).
// Returns whether the copy was sent. A global function: the verifier
// checks it once, on its own, instead of along each path of on_sample that
// reaches it (its page loop was a fifth of the program's verification).
// The sample is this CPU's scratch one, which on_sample has just filled.
__attribute__((noinline)) int send_copy(struct bpf_perf_event_data *ctx, __u32 user_task, __u32 flags) {
  __u32 zero = 0;
  struct sframe_record_copy *c = bpf_map_lookup_elem(&copy_scratch, &zero);
  const struct sframe_record_sample *s = bpf_map_lookup_elem(&scratch, &zero);
  if (!c || !s || !ctx) return 0;
  struct task_struct *task = bpf_get_current_task_btf();
  c->time = s->time;
  c->period = s->period;
  c->pid = s->pid;
  c->tid = s->tid;
  c->cpu = s->cpu;
  c->user_mode = s->user_mode;
  c->has_user = user_task ? 1 : 0;
  c->kernel_nr = 0;
  c->stack_size = 0;
  c->flags = flags;
  // The kernel callchain the sample already holds (its first kernel_nr
  // entries), not a second bpf_get_stack().
  if (s->kernel_nr && !bpf_probe_read_kernel(c->ips, sizeof c->ips, s->ips)) c->kernel_nr = s->kernel_nr;
  bpf_user_pt_regs_t r;
  __builtin_memset(&r, 0, sizeof r);
  if (user_task) {
    if (s->user_mode) r = ctx->regs;
    else bpf_probe_read_kernel(&r, sizeof r, (const void *)bpf_task_pt_regs(task));
  }
  c->regs[0] = r.rax;
  c->regs[1] = r.rbx;
  c->regs[2] = r.rcx;
  c->regs[3] = r.rdx;
  c->regs[4] = r.rsi;
  c->regs[5] = r.rdi;
  c->regs[6] = r.rbp;
  c->regs[7] = r.rsp;
  c->regs[8] = r.rip;
  c->regs[9] = r.eflags;
  c->regs[10] = r.cs;
  c->regs[11] = r.ss;
  c->regs[12] = r.r8;
  c->regs[13] = r.r9;
  c->regs[14] = r.r10;
  c->regs[15] = r.r11;
  c->regs[16] = r.r12;
  c->regs[17] = r.r13;
  c->regs[18] = r.r14;
  c->regs[19] = r.r15;
  __u32 done = 0;
  if (user_task) {
    const __u64 sp = r.rsp;
    for (int k = 0; k < 3; k++) {
      const __u32 off = done;
      if (off >= SFRAME_RECORD_COPY_STACK) break;
      __u32 len = 4096 - ((sp + off) & 4095);
      if (len > SFRAME_RECORD_COPY_STACK - off) len = SFRAME_RECORD_COPY_STACK - off;
      if (len == 0 || len > SFRAME_RECORD_COPY_SLACK) break;
      if (bpf_probe_read_user(&c->stack[off], len, (const void *)(sp + off))) break;
      done = off + len;
    }
  }
  if (done > SFRAME_RECORD_COPY_STACK) done = SFRAME_RECORD_COPY_STACK;
  c->stack_size = done;
  return bpf_ringbuf_output(&copies, c, SFRAME_RECORD_COPY_HEAD + done, BPF_RB_NO_WAKEUP) == 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx) {
  const __u64 start = bpf_ktime_get_ns();
  __u32 zero = 0;
  struct sframe_record_counters *c = bpf_map_lookup_elem(&counters, &zero);
  if (!c) return 0;
  c->runs++;
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 tgid = id >> 32, tid = (__u32)id;
  c->samples++;
  struct sframe_record_sample *s = bpf_map_lookup_elem(&scratch, &zero);
  if (!s) return 0;
  s->time = start;
  s->period = ctx->sample_period;
  s->stop_address = 0;
  s->pid = tgid;
  s->tid = tid;
  s->cpu = bpf_get_smp_processor_id();
  s->kernel_nr = 0;
  s->user_nr = 0;
  s->stop = SFRAME_RECORD_STOP_NO_USER;
  s->user_mode = (ctx->regs.cs & 3) == 3;

  struct sframe_record_walk *w = bpf_map_lookup_elem(&walks, &zero);
  if (!w) return 0;
  sframe_record_walk_reset(w);
  if (!s->user_mode) {
    long got = bpf_get_stack(ctx, s->ips, SFRAME_RECORD_MAX_KERNEL * 8, 0);
    if (got > 0) s->kernel_nr = (__u16)(got / 8);
  }
  // The user registers: the sample's own, else those saved at kernel
  // entry. The kernel's struct pt_regs has the layout of the UAPI one
  // (x86-64 entry code and ptrace's user_regs_struct), so its fields are
  // read at fixed offsets, with no relocation against the kernel's BTF. A
  // task with user registers has a user CS there; a kernel thread's are
  // zero (copy_thread clears them).
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 pc, sp, fp, rbx, cs;
  if (s->user_mode) {
    pc = ctx->regs.rip;
    sp = ctx->regs.rsp;
    fp = ctx->regs.rbp;
    rbx = ctx->regs.rbx;
    cs = ctx->regs.cs;
  } else {
    const char *saved = (const char *)bpf_task_pt_regs(task);
    __u64 lo[2] = {0, 0}, hi[4] = {0, 0, 0, 0};
    bpf_probe_read_kernel(lo, sizeof lo, saved + __builtin_offsetof(bpf_user_pt_regs_t, rbp));
    bpf_probe_read_kernel(hi, sizeof hi, saved + __builtin_offsetof(bpf_user_pt_regs_t, rip));
    fp = lo[0];
    rbx = lo[1];
    pc = hi[0];
    cs = hi[1];
    sp = hi[3];
  }
  const int user_task = tgid != 0 && (cs & 3) == 3;
  if (user_task) {
    w->pc = pc;
    w->sp = sp;
    w->fp = fp;
    w->rbx = rbx;
    struct sframe_record_window *win = bpf_map_lookup_elem(&windows, &zero);
    if (win) sframe_record_window_reset(win, w->sp);
    w->fp_known = 1;
    w->rbx_known = 1;
    w->exact = 1;
    w->max = SFRAME_RECORD_MAX_USER;
    w->tgid = tgid;
    if (!frame_pointers_only) {
      const struct sframe_record_process *p = SFRAME_RECORD_PROCESS(&tgid);
      if (p) sframe_record_walk_use(w, p);
      else c->no_process++;
    }
    const __u32 at = s->kernel_nr;
    if (at < SFRAME_RECORD_MAX_FRAMES) {
      s->ips[at] = w->pc;
      w->n = 1;
      if (w->pc == 0) {
        w->stop = SFRAME_RECORD_STOP_ZERO_PC;
      } else {
        w->stop = SFRAME_RECORD_STOP_DEPTH;
        struct walk_ctx x = {s, c, w};
        // Calls enough for SFRAME_RECORD_MAX_USER steps: the step ends
        // the walk at that depth.
        bpf_loop((SFRAME_RECORD_MAX_USER + WALK_FRAMES_PER_CALL - 1) / WALK_FRAMES_PER_CALL, walk_steps, &x, 0);
      }
      s->stop = w->stop;
      s->stop_address = w->stop_address;
      if (w->unmapped_pc) c->unmapped_pc++;
    }
  }
  s->user_nr = (__u16)w->n;
  if (s->stop < SFRAME_RECORD_STOPS) c->stops[s->stop]++;
  c->kernel_frames += s->kernel_nr;
  c->user_frames += w->n;
  c->row_lookups += w->row_lookups;
  c->row_cache_hits += w->row_cache_hits;

  __u64 n = (__u64)s->kernel_nr + w->n;
  if (n > SFRAME_RECORD_MAX_FRAMES) n = SFRAME_RECORD_MAX_FRAMES;
  const __u64 took = bpf_ktime_get_ns() - start;
  c->walk_ns += took;
  c->walk_ns_log2[log2_u64(took) & 31]++;
  // A walk that met a process or PC without a table yet: its stack goes to
  // user space, to be unwound there once the tables are known (the walk's
  // frames past that point came from frame pointers alone).
  const int defer = user_task && !frame_pointers_only && (!w->have_process || w->unmapped_pc);
  const int check = check_every && c->samples % check_every == 0;
  __u32 flags = (defer ? SFRAME_RECORD_COPY_DEFERRED : 0) | (check ? SFRAME_RECORD_COPY_CHECK : 0);
  int sent = 0;
  if (flags) {
    sent = send_copy(ctx, user_task ? 1 : 0, flags);
    if (!sent) c->copies_lost++;
    else if (defer) c->deferred++;
    if (check) c->checks++;
  }
  if (!(defer && sent))
    if (bpf_ringbuf_output(&samples, s, SFRAME_RECORD_SAMPLE_HEAD + n * 8, BPF_RB_NO_WAKEUP)) c->lost++;
  return 0;
}
