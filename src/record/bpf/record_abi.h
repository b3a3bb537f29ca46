/* SPDX-License-Identifier: MIT */
/* sframepp: what the recorder's BPF program (record.bpf.c) and its user
 * space (recorder.cpp) exchange: the sample record of the ring buffer, the
 * per-CPU counters and the stop reasons. C, compiled for the BPF target and
 * for the host; every field has a fixed width and natural alignment, so
 * both sides see one layout. */
#ifndef SFRAMEPP_RECORD_ABI_H
#define SFRAMEPP_RECORD_ABI_H

#include <linux/types.h>

/* Frames per sample: the kernel's callchain (bpf_get_stack) and the user
 * walk, each at most perf's default sysctl kernel.perf_event_max_stack. */
#define SFRAME_RECORD_MAX_KERNEL 127
#define SFRAME_RECORD_MAX_USER 127
#define SFRAME_RECORD_MAX_FRAMES (SFRAME_RECORD_MAX_KERNEL + SFRAME_RECORD_MAX_USER)

/* --- module tables: the rules of one module file, shared by every process
 * that maps it, in a BPF array map of its own (an inner map of the
 * `modules` array of maps, at the module's ID) of 4 KiB blocks. The
 * module's PCs, as offsets from its table base (a process's mapping bias
 * includes the base: struct sframe_record_mapping), are cut into pages of
 * 2^SFRAME_RECORD_PAGE_SHIFT bytes (1 KiB). A page's rows are the rules
 * that start in it, after a row at offset 0 holding the rule in effect at
 * the page's start, sorted by start.
 *
 * The blocks:
 *  - first the directory: page p's entry, a __u32 at block
 *    p / SFRAME_RECORD_DIR_PAGES, slot p % SFRAME_RECORD_DIR_PAGES, is the
 *    row slot of the page's first row. A block's last slot repeats the next
 *    block's first, so that one block gives a page's rows
 *    [dir[p], dir[p + 1]). A page with no rule has none
 *    (dir[p] == dir[p + 1]); the slots past the last page hold the end.
 *  - then the rows, SFRAME_RECORD_BLOCK_ROWS per block: row slot r is row
 *    r % SFRAME_RECORD_BLOCK_ROWS of block r / SFRAME_RECORD_BLOCK_ROWS
 *    (the directory's blocks count as slots too). A page's rows never
 *    straddle two blocks: where the next page's do not fit, the block ends
 *    with padding rows of start SFRAME_RECORD_ROW_PAD, which belong to the
 *    page before and which no page offset reaches.
 * A page with more rows than a block holds is left out (frame pointers
 * there, counted). A row takes 8 bytes and a page no fixed size: pages
 * hold some 20 rows on average. */
#define SFRAME_RECORD_PAGE_SHIFT 10
#define SFRAME_RECORD_BLOCK_BYTES 4096
#define SFRAME_RECORD_BLOCK_ROWS 512
/* Pages per directory block (its 1024th slot repeats the next block's
 * first). */
#define SFRAME_RECORD_DIR_PAGES 1023
/* The start of a padding row: above every page offset. */
#define SFRAME_RECORD_ROW_PAD 0xffff
/* Module IDs the `modules` array of maps holds: 1 to this - 1. */
#define SFRAME_RECORD_MAX_MODULES 16384

/* Row flags. */
enum sframe_record_row_flags {
  /* CFA = FP + cfa_off (else SP + cfa_off). */
  SFRAME_RECORD_ROW_CFA_FP = 1,
  /* The caller's FP is saved at CFA + 8 * fp_off8 (else unchanged). */
  SFRAME_RECORD_ROW_FP_SAVED = 2,
  /* RA undefined: the outermost frame (SFrame errata 2). */
  SFRAME_RECORD_ROW_OUTERMOST = 4,
  /* No SFrame rule here (between functions, or a rule this table cannot
   * hold): the walk falls back to frame pointers. */
  SFRAME_RECORD_ROW_NONE = 8,
  /* The rule is SFrame generated from .eh_frame (else the module's own). */
  SFRAME_RECORD_ROW_GENERATED = 16,
  /* An x86-64 rt_sigreturn trampoline: the interrupted context is in the
   * ucontext at SP. */
  SFRAME_RECORD_ROW_SIGNAL = 32,
  /* A PC-mask function (spec §2.3: PLT entries) of 16-byte blocks at
   * 16-byte aligned addresses: CFA = SP + (cfa_off & 0xffff) for block
   * offsets below fp_off8, else SP + (cfa_off >> 16); FP unchanged. */
  SFRAME_RECORD_ROW_PCMASK = 64,
  /* CFA = RBX + cfa_off (a FLEX rule, spec v3 §3.2: DWARF register 3; the
   * dynamic linker's lazy-binding trampolines realign the stack and keep
   * their CFA in RBX). The walk knows RBX in frame 0 (the sample's
   * registers) and after a signal frame, as the library's does; elsewhere
   * such a row ends the walk (bad rule). */
  SFRAME_RECORD_ROW_CFA_RBX = 128,
};

/* One rule, from page offset `start` to the next row's start. On x86-64 the
 * RA is always at CFA - 8 (SFrame's fixed RA offset). */
struct sframe_record_row {
  __u16 start;
  __u8 flags;
  __s8 fp_off8;
  __s32 cfa_off;
};

/* A block of a module's table: rows, or directory slots. */
union sframe_record_block {
  struct sframe_record_row rows[SFRAME_RECORD_BLOCK_ROWS];
  __u32 dir[SFRAME_RECORD_DIR_PAGES + 1];
};

/* --- the rows the walk found, per CPU (walk.h): a cache keyed by module ID
 * and offset from the module's table base, so that a PC met again (a
 * return address of a hot path) costs one slot instead of the directory
 * and block lookups and the row search, whose memory the profiled program
 * has pushed out of the CPU's caches since the last sample. A module's
 * table does not change once loaded and its ID is not given to another
 * file in a recording (tables.cpp), so a slot never goes stale; a new
 * recording has new maps. */
#define SFRAME_RECORD_ROW_CACHE_SHIFT 10
#define SFRAME_RECORD_ROW_CACHE_SLOTS (1u << SFRAME_RECORD_ROW_CACHE_SHIFT)

struct sframe_record_row_slot {
  /* module ID << (SFRAME_RECORD_PAGE_SHIFT + 32) | offset; 0: empty (no
   * module has ID 0) */
  __u64 tag;
  struct sframe_record_row row;
};

struct sframe_record_row_cache {
  struct sframe_record_row_slot slots[SFRAME_RECORD_ROW_CACHE_SLOTS];
};

/* --- processes: the executable mappings of one process (tgid), sorted by
 * start, not overlapping. */
#define SFRAME_RECORD_MAX_MAPPINGS 256

struct sframe_record_mapping {
  __u64 start; /* runtime [start, end) */
  __u64 end;
  /* runtime PC - bias = the PC's offset from its module's table base
   * (link-time PC - the base) */
  __u64 bias;
  __u32 module; /* 0: no table (unknown file, or not loaded yet) */
  __u32 reserved;
};

struct sframe_record_process {
  __u32 n;
  /* Differs from every earlier push of a table for this pid (walk.h's
   * memory of the mappings found is valid for one generation). */
  __u32 generation;
  struct sframe_record_mapping maps[SFRAME_RECORD_MAX_MAPPINGS];
};

/* Why a user walk ended. */
enum sframe_record_stop {
  /* A row with the RA undefined (SFrame errata 2): _start, a thread's
   * start routine. */
  SFRAME_RECORD_STOP_OUTERMOST = 0,
  /* A read of the user stack failed: not mapped, or not resident (a BPF
   * program cannot fault a page in). */
  SFRAME_RECORD_STOP_UNREADABLE = 1,
  /* The next frame's CFA is not above this one's: a broken chain. */
  SFRAME_RECORD_STOP_CFA_NOT_INCREASING = 2,
  /* SFRAME_RECORD_MAX_USER frames walked. */
  SFRAME_RECORD_STOP_DEPTH = 3,
  /* No user stack: a kernel thread (or the idle task). */
  SFRAME_RECORD_STOP_NO_USER = 4,
  /* No rule for the PC and no plausible frame-pointer caller (FP 0, a
   * return address outside the process's executable mappings, or a CFA
   * not above SP). */
  SFRAME_RECORD_STOP_NO_RULE = 5,
  /* A return address of 0. */
  SFRAME_RECORD_STOP_ZERO_PC = 6,
  /* A rule naming a register the walk does not know (the caller's FP
   * after an unreadable save slot). */
  SFRAME_RECORD_STOP_BAD_RULE = 7,
  SFRAME_RECORD_STOPS = 8
};

/* Where the rule that found a caller came from. */
enum sframe_record_source {
  SFRAME_RECORD_SOURCE_FRAME_POINTER = 0,
  SFRAME_RECORD_SOURCE_SFRAME = 1,
  SFRAME_RECORD_SOURCE_GENERATED = 2,
  SFRAME_RECORD_SOURCE_SIGNAL = 3,
  SFRAME_RECORD_SOURCES = 4
};

/* One sample, as bpf_ringbuf_output() writes it: the fixed part, then
 * kernel_nr kernel addresses (the interrupted kernel PC first, as
 * bpf_get_stack() gives them) and user_nr user addresses (the user PC, then
 * each caller's return address - 1, as perf's callchains hold them). */
struct sframe_record_sample {
  /* bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. */
  __u64 time;
  /* The event's period at this sample (cpu-clock: ns). */
  __u64 period;
  /* The address a walk stopped at (the unreadable one), else 0. */
  __u64 stop_address;
  __u32 pid; /* process (tgid) */
  __u32 tid; /* thread */
  __u32 cpu;
  __u16 kernel_nr;
  __u16 user_nr;
  /* enum sframe_record_stop. */
  __u8 stop;
  /* 1: the sample interrupted user mode (kernel_nr is then 0). */
  __u8 user_mode;
  __u16 reserved0;
  __u32 reserved1;
  __u64 ips[SFRAME_RECORD_MAX_FRAMES];
};

/* Bytes before ips[]. */
#define SFRAME_RECORD_SAMPLE_HEAD 48

/* --- stack copies: what perf record --call-graph=dwarf copies into a
 * sample (perf_event_open(2): PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER),
 * sent through a ring buffer of their own, for two uses (flags):
 *  - `--check N`: one sample in N, written to a second perf.data for perf
 *    to unwind by itself;
 *  - deferred unwinding: a sample whose process or module has no table in
 *    the maps yet (it started, exec'd or dlopen'd since the last push) is
 *    sent as a copy instead of a walked sample; user space unwinds it with
 *    the library's unwinder once the records that map its modules are read
 *    (sframe::perf::Session, as `sframe perf inject`). */
enum sframe_record_copy_flags {
  SFRAME_RECORD_COPY_CHECK = 1,
  SFRAME_RECORD_COPY_DEFERRED = 2,
};

/* perf's x86-64 user registers, in PERF_REG_X86_* order without DS, ES, FS
 * and GS (what perf record asks for: sample_regs_user 0xff0fff): ax bx cx
 * dx si di bp sp ip flags cs ss r8-r15. */
#define SFRAME_RECORD_COPY_REGS 20
#define SFRAME_RECORD_COPY_REGS_MASK 0xff0fffULL
/* Bytes of stack copied: perf record's default (--call-graph=dwarf,8192). */
#define SFRAME_RECORD_COPY_STACK 8192
/* The copy is read a page at a time, so that it ends where the stack's
 * readable pages end (one read of 8 KB fails whole near the stack's top);
 * a page's read may start anywhere below SFRAME_RECORD_COPY_STACK, and the
 * buffer is that much larger for the verifier. */
#define SFRAME_RECORD_COPY_SLACK 4096

struct sframe_record_copy {
  __u64 time; /* the sample's (struct sframe_record_sample) */
  __u64 period;
  __u32 pid;
  __u32 tid;
  __u32 cpu;
  __u16 kernel_nr;
  /* 1: the sample interrupted user mode. */
  __u8 user_mode;
  /* 1: regs[] and the stack are the user task's; 0: a kernel thread. */
  __u8 has_user;
  /* Bytes of stack[] read from regs[sp] up: 0..SFRAME_RECORD_COPY_STACK. */
  __u32 stack_size;
  /* enum sframe_record_copy_flags. */
  __u32 flags;
  __u64 regs[SFRAME_RECORD_COPY_REGS];
  __u64 ips[SFRAME_RECORD_MAX_KERNEL];
  __u8 stack[SFRAME_RECORD_COPY_STACK + SFRAME_RECORD_COPY_SLACK];
};

/* Bytes before stack[]. */
#define SFRAME_RECORD_COPY_HEAD (40 + 8 * SFRAME_RECORD_COPY_REGS + 8 * SFRAME_RECORD_MAX_KERNEL)

/* Per-CPU counters, summed by user space. */
struct sframe_record_counters {
  /* Samples the program ran for, and those of a process it records. */
  __u64 runs;
  __u64 samples;
  /* Samples the ring buffer had no room for. */
  __u64 lost;
  /* Samples of a process whose mappings were not in the table yet: walked
   * by frame pointers alone. */
  __u64 no_process;
  /* Walks that met a PC in no mapping of their process's table (a library
   * mapped since the table was last pushed, or not code): the step there
   * fell back to frame pointers. */
  __u64 unmapped_pc;
  __u64 kernel_frames;
  __u64 user_frames;
  /* Callers found, by enum sframe_record_source. */
  __u64 by_source[SFRAME_RECORD_SOURCES];
  /* Walks, by enum sframe_record_stop. */
  __u64 stops[SFRAME_RECORD_STOPS];
  /* bpf_ktime_get_ns() from entry to submission, summed, ns; and a
   * histogram of it by power of two (bucket k: [2^k, 2^(k+1)) ns). */
  __u64 walk_ns;
  __u64 walk_ns_log2[32];
  /* Copies sent for `--check`; samples sent as copies for deferred
   * unwinding; copies the ring buffer had no room for (a deferred sample
   * is then sent as walked). */
  __u64 checks;
  __u64 deferred;
  __u64 copies_lost;
  /* Rows looked up in a module's table, and those the row cache held. */
  __u64 row_lookups;
  __u64 row_cache_hits;
};

#endif
