/* SPDX-License-Identifier: MIT */
/* sframepp: the target attributes walk.h and stack_window.h take, for the
 * host, where the in-kernel walk is compiled to be held to the library's
 * (tests/record/) and timed (bench/record/): plain inline functions and no
 * barriers (the barriers and global functions record.bpf.c asks for are
 * for the BPF verifier). Included before walk.h or stack_window.h, after
 * the file's own SFRAME_RECORD_READ etc. */
#ifndef SFRAMEPP_RECORD_WALK_HOST_H
#define SFRAMEPP_RECORD_WALK_HOST_H

#define SFRAME_RECORD_INLINE inline
#define SFRAME_RECORD_OPAQUE(v) (void)0
#define SFRAME_RECORD_STEP_LINKAGE static inline
#define SFRAME_RECORD_SEARCH_LINKAGE static inline

#endif
