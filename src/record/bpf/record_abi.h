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

/* Why a user walk ended. */
enum sframe_record_stop {
  /* A frame pointer or return address of 0: the outermost frame. */
  SFRAME_RECORD_STOP_OUTERMOST = 0,
  /* A read of the user stack failed: not mapped, or not resident (a BPF
   * program cannot fault a page in). */
  SFRAME_RECORD_STOP_UNREADABLE = 1,
  /* The next frame's CFA is not above this one's: a broken chain. */
  SFRAME_RECORD_STOP_CFA_NOT_INCREASING = 2,
  /* A frame pointer that is not 8-byte aligned. */
  SFRAME_RECORD_STOP_MISALIGNED = 3,
  /* SFRAME_RECORD_MAX_USER frames walked. */
  SFRAME_RECORD_STOP_DEPTH = 4,
  /* No user stack: a kernel thread (or the idle task). */
  SFRAME_RECORD_STOP_NO_USER = 5,
  SFRAME_RECORD_STOPS = 6
};

/* Where the rule that found a caller came from. */
enum sframe_record_source {
  SFRAME_RECORD_SOURCE_FRAME_POINTER = 0,
  SFRAME_RECORD_SOURCES = 1
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

/* Per-CPU counters, summed by user space. */
struct sframe_record_counters {
  /* Samples the program ran for, and those of a process it records. */
  __u64 runs;
  __u64 samples;
  /* Samples the ring buffer had no room for. */
  __u64 lost;
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
};

#endif
