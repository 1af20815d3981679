/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A flight-recorder window lowered into the timeline model: per target
 * process with an event in the window a process track (the breach's
 * first), under it per target thread a thread track and a kernel track
 * (syscalls, off-CPU and run-queue slices, wakeups with flows), per CPU the
 * targets used a track of what ran there, and the breach on the "hybtrace"
 * track. Names: dump_schema.h.
 */
#ifndef HT_KERNEL_TIMELINE_H
#define HT_KERNEL_TIMELINE_H

#include <stdint.h>
#include "hybtrace/records.h"
#include "kernel/recorder.h"
#include "kernel/sched_index.h"
#include "kernel/wait_chain.h"

struct timeline;
struct ht_comm_cache;
struct ht_ksyms;

struct ht_kernel_window {
	int tgid;			  /* the one target named; 0: none (--cgroup, --all) */
	const char *target_comm;	  /* its name */
	uint64_t t0, t1;		  /* the window asked for */
	const struct ht_fr_window *w;	  /* what the recorder gave for it */
	const struct ht_sched_index *idx; /* its switches per CPU */
	struct ht_comm_cache *comms;
	const struct ht_ksyms *ksyms;	/* NULL: stacks stay addresses */
	const struct ht_breach *breach; /* NULL for manual and exit dumps */
	uint64_t threshold_ns;
	/* The breach's wait chain (NULL: none), as deep as asked (--chain-depth). */
	const struct ht_wait_chain *chain;
	unsigned int chain_depth;
};

/* Add the window's tracks and events to TL. Returns 0, or -1 with ht_last_error(). */
int ht_kernel_timeline_build(struct timeline *tl, const struct ht_kernel_window *kw);

/*
 * The track of process TGID in TL: the one there, else a new one named by
 * its comm (COMMS; NULL: "pid TGID"). An index, or -errno.
 */
int ht_timeline_process_track(struct timeline *tl, struct ht_comm_cache *comms, int tgid);

/*
 * A kernel track for thread track THREAD (an index) of TL: "comm syscalls",
 * bound to that thread (Perfetto shows it under the thread's own). An
 * index, or -errno.
 */
int ht_timeline_kernel_track(struct timeline *tl, size_t thread);

/* Kernel stack addresses (leaf first, as BPF gives them) as frames, root first. */
int ht_kernel_stack_attach(struct timeline *tl, long ev, const uint64_t *addrs, int depth,
			   const struct ht_ksyms *ksyms);

#endif /* HT_KERNEL_TIMELINE_H */
