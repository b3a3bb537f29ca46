/* SPDX-License-Identifier: MIT */
/* sframepp: the user-stack walk of `sframe record`, in C that compiles for
 * the BPF target (record.bpf.c, a few steps per bpf_loop iteration) and for the
 * host (the differential test holds it to the library's walk,
 * process::walk_chain, on the same stacks and tables).
 *
 * It is a second implementation of the library's frame step and loop for
 * x86-64, over the table layout of record_abi.h:
 *  - the rule for a PC: the PC's mapping in the process (one the walks of
 *    this CPU found before in the same process table, else a binary
 *    search of the table), then the row cached for its module and offset
 *    (record_abi.h), else its page's rows from the module's directory (a
 *    block lookup), the page's last row at or before the PC (a second
 *    block lookup, a binary search), kept in the cache;
 *    callers are looked up at return address - 1 (SFrame spec v3 §1.2: the
 *    PC inside the call);
 *  - an SFrame row: CFA = SP, FP or RBX + offset (RBX where known: frame 0
 *    and after a signal frame), RA at CFA - 8, the caller's FP
 *    at CFA + offset or unchanged (spec §3.1); in a PC-mask (PLT) function,
 *    the row of the PC's offset in its 16-byte block; an unreadable FP slot leaves
 *    the caller's FP unknown; a row with RA undefined ends the walk;
 *  - no row: checked frame pointers (the caller's FP at FP, RA at FP + 8,
 *    CFA = FP + 16), taken only when the RA lies in an executable mapping
 *    and the CFA above SP;
 *  - a signal trampoline: the interrupted registers from the ucontext_t at
 *    SP (x86-64 rt_sigframe);
 *  - between frames: the CFA must lie strictly above the previous one,
 *    except across a signal frame; a return address of 0 ends the walk.
 *
 * The including file defines, before including it:
 *   SFRAME_RECORD_READ(dst, addr)  reads the u64 at user address addr into
 *                                  *dst; 0 on success
 *   SFRAME_RECORD_BLOCK(module, i) const union sframe_record_block *: block
 *                                  i (__u32) of module ID `module` (__u32),
 *                                  or 0 (no such module or block)
 *   SFRAME_RECORD_PROCESS(tgid)    const struct sframe_record_process * for
 *                                  const __u32 *tgid, or 0
 *   SFRAME_RECORD_ROW_CACHE()      struct sframe_record_row_cache *: this
 *                                  CPU's (the walk's) row cache, or 0
 *   SFRAME_RECORD_INLINE           the inline attribute of the target
 *   SFRAME_RECORD_OPAQUE(v)        (BPF) hides v's value from the compiler,
 *                                  so that a mask applied after it stays
 *   SFRAME_RECORD_STEP_LINKAGE     how sframe_record_step, the two binary
 *   SFRAME_RECORD_SEARCH_LINKAGE   searches and sframe_record_rule are
 *                                  declared: for BPF global (noinline)
 *                                  functions, which the verifier checks
 *                                  once each, on their own, instead of
 *                                  along every path of their callers */
#ifndef SFRAMEPP_RECORD_WALK_H
#define SFRAMEPP_RECORD_WALK_H

#include "record_abi.h"

/* x86-64 rt_sigframe: the ucontext_t's gregs[] start 40 bytes above the
 * trampoline's SP; REG_RBP, REG_RSP, REG_RIP are 10, 15, 16. */
#define SFRAME_RECORD_SIGFRAME_GREGS 40

/* How many of the mappings a walk found it keeps for the next walks on
 * the same CPU (struct sframe_record_walk_memory); a power of two. */
#define SFRAME_RECORD_WALK_MAPS 8

/* A mapping a walk found (struct sframe_record_mapping's fields). */
struct sframe_record_walk_mapping {
  __u64 start, end, bias;
  __u32 module;
  __u32 reserved;
};

/* The mappings the last walks on a CPU found, in the table of process
 * `tgid` pushed as `generation` (struct sframe_record_process): the next
 * walk of that table takes a mapping from here before it searches the
 * table. A profiled program's stacks go back and forth between a few
 * modules (an interpreter's, its extensions', libc), and each search reads
 * the process's table, whose lines the program has evicted since the last
 * sample. Entries are zero (empty) when the tag changes. */
struct sframe_record_walk_memory {
  __u32 tgid;
  __u32 generation;
  __u32 next; /* where the next mapping found goes, modulo the size */
  __u32 reserved;
  struct sframe_record_walk_mapping maps[SFRAME_RECORD_WALK_MAPS];
};

/* The state of a walk. It holds no pointer: in BPF it lives in a map
 * value, so that the verifier sees each bpf_loop iteration's fields as
 * unknown and the callback's states converge. */
struct sframe_record_walk {
  __u64 pc, sp, fp;
  __u64 rbx; /* valid when rbx_known */
  __u64 prev_cfa;
  /* The address a stop concerns (the unreadable one, the CFA). */
  __u64 stop_address;
  /* The mapping of the last lookup (most frames are in the mapping of the
   * frame before). */
  __u64 map_start, map_end, map_bias;
  __u32 map_module;
  __u32 tgid;
  __u8 have_process; /* walk with the process's tables (else frame pointers only) */
  /* A PC of the walk lay in no mapping of the process's table: code mapped
   * since the table was last pushed (a dlopen), or no code at all. */
  __u8 unmapped_pc;
  __u8 reserved1[2];
  __u32 n; /* frames so far (frame 0 included) */
  __u32 max; /* frames wanted */
  __u8 fp_known;
  __u8 have_prev;
  __u8 unchecked; /* the last step crossed a signal frame */
  __u8 exact; /* pc is exact (frame 0, after a signal frame), else an RA */
  __u8 stop;
  __u8 last_source; /* enum sframe_record_source of the last step */
  __u8 rbx_known;
  __u8 reserved;
  struct sframe_record_row row; /* the last sframe_record_rule() found */
  /* Rows looked up in a module's table, and those the row cache held. */
  __u32 row_lookups;
  __u32 row_cache_hits;
  /* Last: what sframe_record_walk_reset() keeps from walk to walk. */
  struct sframe_record_walk_memory memory;
};

/* Clears the walk for a new sample: every field zero but its memory. */
static SFRAME_RECORD_INLINE void sframe_record_walk_reset(struct sframe_record_walk *w) {
  __builtin_memset(w, 0, __builtin_offsetof(struct sframe_record_walk, memory));
}

/* The walk (of process w->tgid) uses process table `p`: the mappings
 * remembered are kept when they came from it (the same process and
 * generation), else forgotten. */
static SFRAME_RECORD_INLINE void sframe_record_walk_use(struct sframe_record_walk *w,
                                                        const struct sframe_record_process *p) {
  struct sframe_record_walk_memory *m = &w->memory;
  if (m->tgid != w->tgid || m->generation != p->generation) {
    __builtin_memset(m, 0, sizeof *m);
    m->tgid = w->tgid;
    m->generation = p->generation;
  }
  w->have_process = 1;
}

/* The two searches below halve a range [base, base + len) a fixed number of
 * times, with no branch in the loop: `base` moves by `half` times a 0/1
 * flag. A branch per halving (an early exit, or a select the compiler makes
 * of the flag) gives the verifier two paths per halving, each with
 * different bounds on `base`, so none prune: 2^9 paths, 20,000 of the
 * program's 30,000 processed instructions. The barrier on the flag keeps
 * the compiler from turning the product back into a select. A halving of a
 * range of one element moves nothing, so the extra ones are harmless, and
 * every read is of an element of the range (base + half < base + len). */

/* The element a halving probes, base + half, masked to the array's bound
 * (`mask`: its power-of-two size - 1) behind a barrier, so that the mask
 * survives the compiler's rewriting of the index and the verifier sees it
 * in bounds. */
static SFRAME_RECORD_INLINE __u32 sframe_record_probe(__u32 base, __u32 half, __u32 mask) {
  __u32 k = base + half;
  SFRAME_RECORD_OPAQUE(k);
  return k & mask;
}

/* `k` bounded below `limit` behind a barrier, for an array whose size is
 * not a power of two (a directory block's slots, record_abi.h), so that
 * the verifier sees the bound: an index at or past it becomes limit - 1.
 * Its indexes are below the bound already, so it changes none. */
static SFRAME_RECORD_INLINE __u32 sframe_record_below(__u32 k, __u32 limit) {
  SFRAME_RECORD_OPAQUE(k);
  if (k >= limit) k = limit - 1;
  return k;
}

/* The halving's new base: base + half when the probed `start` <= `key`
 * (by the sign of key - start: both below 2^63, as user addresses and page
 * offsets are), else base. */
static SFRAME_RECORD_INLINE __u32 sframe_record_advance(__u32 base, __u32 half, __u64 key, __u64 start) {
  __u64 at_or_below = ((key - start) >> 63) ^ 1;
  SFRAME_RECORD_OPAQUE(at_or_below);
  return base + (__u32)at_or_below * half;
}

/* The index of the mapping holding `pc`, or -1. */
SFRAME_RECORD_SEARCH_LINKAGE int sframe_record_mapping_index(const struct sframe_record_process *p, __u64 pc) {
  if (!p) return -1;
  __u32 n = p->n;
  if (n > SFRAME_RECORD_MAX_MAPPINGS) n = SFRAME_RECORD_MAX_MAPPINGS;
  if (n == 0) return -1;
  /* The last mapping that starts at or below pc is in [base, base + len)
   * (when maps[0] does not, base stays 0 and the test below fails): the
   * mappings are sorted and disjoint, so only it can hold pc. */
  __u32 base = 0, len = n;
  for (int i = 0; i < 8; i++) { /* 2^8 = SFRAME_RECORD_MAX_MAPPINGS */
    const __u32 half = len / 2;
    const __u32 k = sframe_record_probe(base, half, SFRAME_RECORD_MAX_MAPPINGS - 1);
    base = sframe_record_advance(base, half, pc, p->maps[k].start);
    len -= half;
  }
  base &= SFRAME_RECORD_MAX_MAPPINGS - 1;
  const struct sframe_record_mapping *m = &p->maps[base];
  return m->start <= pc && pc < m->end ? (int)base : -1;
}

static SFRAME_RECORD_INLINE const struct sframe_record_mapping *
sframe_record_find_mapping(const struct sframe_record_process *p, __u64 pc) {
  int i = sframe_record_mapping_index(p, pc);
  if (i < 0 || i >= SFRAME_RECORD_MAX_MAPPINGS) return 0;
  __u32 k = (__u32)i;
  SFRAME_RECORD_OPAQUE(k);
  return &p->maps[k & (SFRAME_RECORD_MAX_MAPPINGS - 1)];
}

/* The index in block `b` of the row covering page offset `off` among the
 * page's rows b->rows[first, first + n): the last whose start is <= off
 * (a page's first row starts at 0; padding rows, at the end, start above
 * every offset); -1 when there is none (no rows, rows past the block, or
 * only padding: the range of a page with no rule before a padded one). */
SFRAME_RECORD_SEARCH_LINKAGE int sframe_record_row_index(const union sframe_record_block *b, __u32 first, __u32 n,
                                                         __u32 off) {
  if (!b) return -1;
  if (n == 0 || first >= SFRAME_RECORD_BLOCK_ROWS || n > SFRAME_RECORD_BLOCK_ROWS - first) return -1;
  /* rows[base].start <= off, and the row wanted is in [base, base + len). */
  __u32 base = first, len = n;
  for (int i = 0; i < 9; i++) { /* 2^9 = SFRAME_RECORD_BLOCK_ROWS */
    const __u32 half = len / 2;
    const __u32 k = sframe_record_probe(base, half, SFRAME_RECORD_BLOCK_ROWS - 1);
    base = sframe_record_advance(base, half, off, b->rows[k].start);
    len -= half;
  }
  base &= SFRAME_RECORD_BLOCK_ROWS - 1;
  return b->rows[base].start <= off ? (int)base : -1;
}

/* Whether `pc` lies in an executable mapping of the process. */
static SFRAME_RECORD_INLINE int sframe_record_executable(struct sframe_record_walk *w, __u64 pc) {
  if (pc >= w->map_start && pc < w->map_end) return 1;
  const struct sframe_record_process *p = SFRAME_RECORD_PROCESS(&w->tgid);
  return p && sframe_record_find_mapping(p, pc) != 0;
}

/* Makes the walk's mapping the remembered one holding `pc`, if any: 1
 * when there is one. */
static SFRAME_RECORD_INLINE int sframe_record_recall_mapping(struct sframe_record_walk *w, __u64 pc) {
  for (int i = 0; i < SFRAME_RECORD_WALK_MAPS; i++) {
    const struct sframe_record_walk_mapping *r = &w->memory.maps[i];
    if (pc >= r->start && pc < r->end) {
      w->map_start = r->start;
      w->map_end = r->end;
      w->map_bias = r->bias;
      w->map_module = r->module;
      return 1;
    }
  }
  return 0;
}

/* The row cache's tag of lookup PC `lpc` in the walk's mapping (whose
 * module the caller has checked is non-zero): its module and its offset
 * from the module's table base; 0 for a PC below that base, or 2^42 bytes
 * past it, which has no page. */
static SFRAME_RECORD_INLINE __u64 sframe_record_row_tag(const struct sframe_record_walk *w, __u64 lpc) {
  const __u64 off = lpc - w->map_bias;
  if (off >> (SFRAME_RECORD_PAGE_SHIFT + 32)) return 0;
  return ((__u64)w->map_module << (SFRAME_RECORD_PAGE_SHIFT + 32)) | off;
}

/* The row cache's slot for `tag`. */
static SFRAME_RECORD_INLINE struct sframe_record_row_slot *sframe_record_row_slot_of(struct sframe_record_row_cache *cache,
                                                                                     __u64 tag) {
  /* Fibonacci hashing: the top bits of tag times 2^64 / golden ratio. */
  __u32 k = (__u32)((tag * 0x9e3779b97f4a7c15ULL) >> (64 - SFRAME_RECORD_ROW_CACHE_SHIFT));
  SFRAME_RECORD_OPAQUE(k);
  return &cache->slots[k & (SFRAME_RECORD_ROW_CACHE_SLOTS - 1)];
}

/* The row for lookup PC `lpc`, or 0 (no mapping, no table, no page). */
static SFRAME_RECORD_INLINE const struct sframe_record_row *sframe_record_find_rule(struct sframe_record_walk *w,
                                                                                   __u64 lpc) {
  if (!w->have_process) return 0;
  if (!(lpc >= w->map_start && lpc < w->map_end) && !sframe_record_recall_mapping(w, lpc)) {
    const struct sframe_record_process *p = SFRAME_RECORD_PROCESS(&w->tgid);
    if (!p) return 0;
    const struct sframe_record_mapping *m = sframe_record_find_mapping(p, lpc);
    if (!m) {
      w->unmapped_pc = 1;
      return 0;
    }
    w->map_start = m->start;
    w->map_end = m->end;
    w->map_bias = m->bias;
    w->map_module = m->module;
    /* Remembered only from the table the memory is tagged with: the
     * process's table may have been pushed again since the walk began. */
    if (p->generation == w->memory.generation) {
      __u32 k = w->memory.next++;
      SFRAME_RECORD_OPAQUE(k);
      struct sframe_record_walk_mapping *r = &w->memory.maps[k & (SFRAME_RECORD_WALK_MAPS - 1)];
      r->start = m->start;
      r->end = m->end;
      r->bias = m->bias;
      r->module = m->module;
    }
  }
  if (!w->map_module) return 0;
  const __u64 off = lpc - w->map_bias;
  const __u64 tag = sframe_record_row_tag(w, lpc);
  if (!tag) return 0;
  struct sframe_record_row_cache *cache = SFRAME_RECORD_ROW_CACHE();
  struct sframe_record_row_slot *cached = 0;
  if (cache) {
    cached = sframe_record_row_slot_of(cache, tag);
    w->row_lookups++;
    if (cached->tag == tag) {
      w->row_cache_hits++;
      return &cached->row;
    }
  }
  const __u32 page = (__u32)(off >> SFRAME_RECORD_PAGE_SHIFT);
  const union sframe_record_block *d = SFRAME_RECORD_BLOCK(w->map_module, page / SFRAME_RECORD_DIR_PAGES);
  if (!d) return 0;
  const __u32 slot = sframe_record_below(page % SFRAME_RECORD_DIR_PAGES, SFRAME_RECORD_DIR_PAGES);
  const __u32 lo = d->dir[slot], hi = d->dir[slot + 1];
  if (hi <= lo) return 0;
  const __u32 first = lo % SFRAME_RECORD_BLOCK_ROWS;
  const union sframe_record_block *b = SFRAME_RECORD_BLOCK(w->map_module, lo / SFRAME_RECORD_BLOCK_ROWS);
  const int i = sframe_record_row_index(b, first, hi - lo, (__u32)(off & ((1u << SFRAME_RECORD_PAGE_SHIFT) - 1)));
  if (!b || i < 0 || i >= SFRAME_RECORD_BLOCK_ROWS) return 0;
  const struct sframe_record_row *row = &b->rows[(__u32)i & (SFRAME_RECORD_BLOCK_ROWS - 1)];
  if (cached) {
    cached->tag = tag;
    cached->row = *row;
  }
  return row;
}

/* Copies the row for lookup PC `lpc` to w->row and returns 1, or returns 0
 * when there is none. A global function in BPF: checked once, on its own,
 * so that its paths (a cached row, each lookup that finds none) do not each
 * run on through the rest of the step. */
SFRAME_RECORD_SEARCH_LINKAGE int sframe_record_rule(struct sframe_record_walk *w, __u64 lpc) {
  if (!w) return 0;
  const struct sframe_record_row *r = sframe_record_find_rule(w, lpc);
  if (!r) return 0;
  w->row = *r;
  return 1;
}

/* sframe_record_rule()'s common case, for the step to take inline (a call
 * of the global function costs a return, as record.bpf.c's read_word says):
 * the PC in the walk's mapping and its row in the row cache. Copies the row to
 * w->row and returns 1, else returns 0 having changed nothing (the PC may
 * still have a row: sframe_record_rule() says). */
static SFRAME_RECORD_INLINE int sframe_record_cached_rule(struct sframe_record_walk *w, __u64 lpc) {
  if (!w->have_process || !w->map_module || !(lpc >= w->map_start && lpc < w->map_end)) return 0;
  const __u64 tag = sframe_record_row_tag(w, lpc);
  struct sframe_record_row_cache *cache = SFRAME_RECORD_ROW_CACHE();
  if (!tag || !cache) return 0;
  const struct sframe_record_row_slot *cached = sframe_record_row_slot_of(cache, tag);
  if (cached->tag != tag) return 0;
  w->row_lookups++;
  w->row_cache_hits++;
  w->row = cached->row;
  return 1;
}

/* Ends the walk: why (enum sframe_record_stop) and the address concerned
 * (0 where none). Returns 0, sframe_record_step()'s "the walk ends". */
static SFRAME_RECORD_INLINE int sframe_record_end(struct sframe_record_walk *w, __u8 why, __u64 address) {
  w->stop = why;
  w->stop_address = address;
  return 0;
}

/* One step from the current frame to its caller. Returns 1 when the walk
 * goes on (w->pc etc. are the caller's), 0 when it ends (w->stop says why).
 * `source` gets the enum sframe_record_source of the step taken. */
SFRAME_RECORD_STEP_LINKAGE int sframe_record_step(struct sframe_record_walk *w) {
  if (!w) return 0;
  const __u64 lpc = w->exact ? w->pc : w->pc - 1;
  const int have = sframe_record_cached_rule(w, lpc) || sframe_record_rule(w, lpc);
  const struct sframe_record_row row = w->row;
  __u64 cfa = 0, ra = 0, fp = w->fp, sp = 0, rbx = 0;
  __u8 fp_known = w->fp_known, signal = 0, rbx_known = 0, source;
  if (have && (row.flags & SFRAME_RECORD_ROW_SIGNAL)) {
    const __u64 g = w->sp + SFRAME_RECORD_SIGFRAME_GREGS;
    if (SFRAME_RECORD_READ(&fp, g + 10 * 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, g + 10 * 8);
    if (SFRAME_RECORD_READ(&sp, g + 15 * 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, g + 15 * 8);
    if (SFRAME_RECORD_READ(&ra, g + 16 * 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, g + 16 * 8);
    /* REG_RBX is 11. */
    if (SFRAME_RECORD_READ(&rbx, g + 11 * 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, g + 11 * 8);
    rbx_known = 1;
    cfa = w->sp;
    fp_known = 1;
    signal = 1;
    source = SFRAME_RECORD_SOURCE_SIGNAL;
  } else if (have && !(row.flags & SFRAME_RECORD_ROW_NONE)) {
    if (row.flags & SFRAME_RECORD_ROW_OUTERMOST)
      return sframe_record_end(w, SFRAME_RECORD_STOP_OUTERMOST, 0);
    if (row.flags & SFRAME_RECORD_ROW_PCMASK) {
      const __u32 both = (__u32)row.cfa_off;
      const __u32 off = (__u32)(lpc & 15) >= (__u32)(__u8)row.fp_off8 ? both >> 16 : both & 0xffff;
      cfa = w->sp + off;
    } else if (row.flags & SFRAME_RECORD_ROW_CFA_FP) {
      if (!w->fp_known)
        return sframe_record_end(w, SFRAME_RECORD_STOP_BAD_RULE, lpc);
      cfa = w->fp + (__u64)(__s64)row.cfa_off;
    } else if (row.flags & SFRAME_RECORD_ROW_CFA_RBX) {
      if (!w->rbx_known)
        return sframe_record_end(w, SFRAME_RECORD_STOP_BAD_RULE, lpc);
      cfa = w->rbx + (__u64)(__s64)row.cfa_off;
    } else {
      cfa = w->sp + (__u64)(__s64)row.cfa_off;
    }
    if (SFRAME_RECORD_READ(&ra, cfa - 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, cfa - 8);
    if ((row.flags & SFRAME_RECORD_ROW_FP_SAVED) && !(row.flags & SFRAME_RECORD_ROW_PCMASK)) {
      const __u64 at = cfa + (__u64)((__s64)row.fp_off8 * 8);
      __u64 v = 0;
      if (SFRAME_RECORD_READ(&v, at)) {
        fp_known = 0;
        fp = 0;
      } else {
        fp = v;
        fp_known = 1;
      }
    }
    sp = cfa;
    source = (row.flags & SFRAME_RECORD_ROW_GENERATED) ? SFRAME_RECORD_SOURCE_GENERATED : SFRAME_RECORD_SOURCE_SFRAME;
  } else {
    /* Frame pointers, only where they give a plausible caller. */
    if (!w->fp_known || w->fp == 0)
      return sframe_record_end(w, SFRAME_RECORD_STOP_NO_RULE, lpc);
    if (SFRAME_RECORD_READ(&fp, w->fp))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, w->fp);
    if (SFRAME_RECORD_READ(&ra, w->fp + 8))
      return sframe_record_end(w, SFRAME_RECORD_STOP_UNREADABLE, w->fp + 8);
    cfa = w->fp + 16;
    if ((ra != 0 && w->have_process && !sframe_record_executable(w, ra)) || cfa <= w->sp)
      return sframe_record_end(w, SFRAME_RECORD_STOP_NO_RULE, lpc);
    fp_known = 1;
    sp = cfa;
    source = SFRAME_RECORD_SOURCE_FRAME_POINTER;
  }
  /* Between frames. */
  const int signal_equal = signal && cfa == w->prev_cfa;
  if (w->have_prev && !w->unchecked && cfa <= w->prev_cfa && !signal_equal)
    return sframe_record_end(w, SFRAME_RECORD_STOP_CFA_NOT_INCREASING, cfa);
  w->prev_cfa = cfa;
  w->have_prev = 1;
  w->unchecked = signal;
  w->last_source = source;
  w->pc = ra;
  w->sp = sp;
  w->fp = fp;
  w->fp_known = fp_known;
  w->rbx = rbx;
  w->rbx_known = rbx_known;
  w->exact = signal;
  if (ra == 0)
    return sframe_record_end(w, SFRAME_RECORD_STOP_ZERO_PC, 0);
  if (w->n >= w->max)
    return sframe_record_end(w, SFRAME_RECORD_STOP_DEPTH, 0);
  return 1;
}

/* Records the caller the last step found as frame w->n of `ips` (at
 * ips[base + w->n], below `cap` entries): at its return address - 1, as
 * perf's callchains hold callers. After a signal step, as perf's unwinders
 * record it (and the library's perf session prints it), the trampoline's
 * frame (a caller, but not after a call) goes back to its exact address and
 * the interrupted one is at its PC - 1. Returns 0 when there is no room. */
static SFRAME_RECORD_INLINE int sframe_record_emit(__u64 *ips, __u32 base, __u32 cap, struct sframe_record_walk *w) {
  const __u32 at = base + w->n;
  if (at >= cap || at >= SFRAME_RECORD_MAX_FRAMES) return 0;
  ips[at] = w->pc - 1;
  if (w->last_source == SFRAME_RECORD_SOURCE_SIGNAL && w->n > 1) {
    const __u32 prev = at - 1;
    if (prev < SFRAME_RECORD_MAX_FRAMES && prev < cap) ips[prev] += 1;
  }
  w->n++;
  return 1;
}

#endif
