/* SPDX-License-Identifier: MIT */
/* sframepp: the user stack as `sframe record`'s walk reads it. C for the
 * BPF target (record.bpf.c) and the host (the differential test reads its
 * stack copies through it).
 *
 * A read of user memory from BPF is a helper call whose fixed cost is many
 * times that of copying a few hundred bytes, and a walk reads two words per
 * frame, mostly from the few hundred bytes above the sample's SP. So the
 * stack is read ahead: the window covers SFRAME_RECORD_WINDOW_CHUNKS aligned
 * chunks from the sample's SP rounded down, each read whole the first time a
 * word in it is wanted; a read past its end moves it up (a deep stack, of
 * many or large frames, is read a chunk at a time all the way up). A chunk
 * never crosses a page (its size divides the page size), so it reads whole
 * exactly when the page holding it is readable, as an 8-byte read in it
 * would be. A read below the window, one that straddles two chunks, and one
 * in a chunk that did not read whole go to SFRAME_RECORD_READ_USER on their
 * own: every read returns what a direct read of the same 8 bytes returns,
 * whatever the memory model.
 *
 * Chunks of 2 KB: a read's fixed cost still outweighs its copy there. On
 * Python's stacks (21 frames over some kilobytes) 2 KB chunks made the
 * program's run time per sample 17% lower than 512-byte ones, and 1 KB or
 * 4 KB ones (4 of them) came between; on a shallow C program's stacks, none
 * differed beyond the noise (docs/benchmarks.md, stop 53). The window, 16
 * KB per CPU, stays under the 32 KB a per-CPU map value may hold.
 *
 * The including file defines, before including it:
 *   SFRAME_RECORD_READ_USER(dst, len, addr)  reads len bytes at user
 *                                  address addr into dst; 0 on success, and
 *                                  on failure nothing is usable
 *   SFRAME_RECORD_INLINE, SFRAME_RECORD_OPAQUE(v)  as for walk.h */
#ifndef SFRAMEPP_RECORD_STACK_WINDOW_H
#define SFRAMEPP_RECORD_STACK_WINDOW_H

#include <linux/types.h>

#define SFRAME_RECORD_WINDOW_CHUNK_SHIFT 11
#define SFRAME_RECORD_WINDOW_CHUNK (1u << SFRAME_RECORD_WINDOW_CHUNK_SHIFT)
#define SFRAME_RECORD_WINDOW_CHUNKS 8
#define SFRAME_RECORD_WINDOW_BYTES (SFRAME_RECORD_WINDOW_CHUNK * SFRAME_RECORD_WINDOW_CHUNKS)

struct sframe_record_window {
  __u64 base; /* chunk 0's address: the sample's SP rounded down to a chunk */
  __u32 loaded; /* bit k: chunk k has been read (whole or not) */
  __u32 failed; /* bit k: chunk k did not read whole */
  /* 8 bytes of slack past the chunks, for the verifier's bound on an
   * 8-byte read at a masked offset. */
  __u8 bytes[SFRAME_RECORD_WINDOW_BYTES + 8];
};

/* Starts a walk's window at stack pointer `sp` (nothing read yet). */
static SFRAME_RECORD_INLINE void sframe_record_window_reset(struct sframe_record_window *win, __u64 sp) {
  win->base = sp & ~(__u64)(SFRAME_RECORD_WINDOW_CHUNK - 1);
  win->loaded = 0;
  win->failed = 0;
}

/* Reads the u64 at user address `addr` into *dst when the window holds it
 * already (in a chunk read whole): 0 then, else non-zero with nothing
 * changed. The common case of sframe_record_window_read(), for a caller to
 * take inline before a call of the whole read. */
static SFRAME_RECORD_INLINE int sframe_record_window_hit(const struct sframe_record_window *win, __u64 *dst,
                                                         __u64 addr) {
  const __u64 off = addr - win->base; /* huge below the base */
  if (off >= SFRAME_RECORD_WINDOW_BYTES || (off & (SFRAME_RECORD_WINDOW_CHUNK - 1)) > SFRAME_RECORD_WINDOW_CHUNK - 8)
    return -1;
  const __u32 bit = 1u << (__u32)(off >> SFRAME_RECORD_WINDOW_CHUNK_SHIFT);
  if (!(win->loaded & ~win->failed & bit)) return -1;
  __u32 o = (__u32)off;
  SFRAME_RECORD_OPAQUE(o);
  o &= SFRAME_RECORD_WINDOW_BYTES - 1;
  __builtin_memcpy(dst, &win->bytes[o], 8);
  return 0;
}

/* Reads the u64 at user address `addr` into *dst: 0 on success, else
 * non-zero with *dst unusable, as SFRAME_RECORD_READ_USER(dst, 8, addr). */
static SFRAME_RECORD_INLINE int sframe_record_window_read(struct sframe_record_window *win, __u64 *dst, __u64 addr) {
  if (!sframe_record_window_hit(win, dst, addr)) return 0;
  __u64 off = addr - win->base;
  if (off >= SFRAME_RECORD_WINDOW_BYTES && addr > win->base) {
    /* Past the window's end: a walk reads upward, frame after frame, so the
     * window moves up to start at the chunk holding addr (the chunks below
     * it are dropped; a read there later goes on its own). */
    win->base = addr & ~(__u64)(SFRAME_RECORD_WINDOW_CHUNK - 1);
    win->loaded = 0;
    win->failed = 0;
    off = addr - win->base;
  }
  if (off >= SFRAME_RECORD_WINDOW_BYTES || (off & (SFRAME_RECORD_WINDOW_CHUNK - 1)) > SFRAME_RECORD_WINDOW_CHUNK - 8)
    return SFRAME_RECORD_READ_USER(dst, 8, addr);
  const __u32 k = (__u32)(off >> SFRAME_RECORD_WINDOW_CHUNK_SHIFT);
  const __u32 bit = 1u << k;
  if (!(win->loaded & bit)) {
    win->loaded |= bit;
    __u32 at = k << SFRAME_RECORD_WINDOW_CHUNK_SHIFT;
    SFRAME_RECORD_OPAQUE(at);
    at &= (SFRAME_RECORD_WINDOW_CHUNKS - 1) << SFRAME_RECORD_WINDOW_CHUNK_SHIFT;
    if (SFRAME_RECORD_READ_USER(&win->bytes[at], SFRAME_RECORD_WINDOW_CHUNK,
                                win->base + ((__u64)k << SFRAME_RECORD_WINDOW_CHUNK_SHIFT)))
      win->failed |= bit;
  }
  /* From the chunk when it read whole, else on its own. */
  if (!sframe_record_window_hit(win, dst, addr)) return 0;
  return SFRAME_RECORD_READ_USER(dst, 8, addr);
}

#endif
