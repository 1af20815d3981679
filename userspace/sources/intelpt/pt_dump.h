/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Intel PT half of a dump: every AUX stream of a raw capture (rawcap.h)
 * decoded (intelpt_decode.h), cut into per-thread runs at the context
 * switches the sideband recorded, and drawn as call stacks (callstack.h) on
 * the thread tracks of the timeline. The live dump and `hybtrace decode`
 * both come through here, so they draw the same slices.
 *
 * Routing: with user-only tracing a thread's trace on a CPU runs from a
 * TIP.PGE to a TIP.PGD, and a context switch always happens between the
 * two (in the kernel). Each run from a sync point or a PGE on goes to the
 * thread the sideband shows on that CPU at the run's first timestamp (the
 * last switch-in at or before it; before the first one, the thread of the
 * first switch-out; without sideband, the stream's owner), and is decoded
 * against that thread's own process's mappings (processes differ in code at
 * the same addresses); runs of processes the capture holds no mappings of
 * are dropped and counted. Each thread is drawn under its own process. A thread's runs from
 * every CPU are then fed to its call stack in time order, so a thread that
 * migrates keeps its stack across CPUs.
 */
#ifndef HT_PT_DUMP_H
#define HT_PT_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sources/intelpt/callstack.h"
#include "sources/intelpt/rawcap.h"

struct timeline;

struct ht_pt_dump_input {
	const struct ht_rawcap *cap;
	int tgid; /* the process named first; 0: the capture's pid */
	/* NULL: an ELF resolver over each process's mappings (files read from FILE_ROOT). */
	ht_pt_resolve_fn resolve;
	void *resolve_ctx;
	/* Prefix for the mapped files' paths; NULL: as saved. */
	const char *file_root;
	/* Live: each process's files through its own /proc/PID/root (FILE_ROOT unused). */
	bool live_roots;
	/* Trace before this (CLOCK_MONOTONIC ns) is not drawn; 0: all of it. */
	uint64_t t0;
	/*
	 * Items kept for the time ordering across CPUs; 0: HT_PT_DUMP_MAX_ITEMS.
	 * Each stream has an equal share and keeps its newest items.
	 */
	size_t max_items;
};

/* About 56 MB of decoded blocks: several 4 MiB rings' worth. */
#define HT_PT_DUMP_MAX_ITEMS (1u << 20)

struct ht_pt_dump_stats {
	uint64_t streams, bytes;
	uint64_t insns, blocks, syncs, errors, overflows;
	uint64_t processes;	/* processes the capture holds code of */
	uint64_t threads;	/* threads whose call stacks were drawn */
	uint64_t runs;		/* per-thread runs routed */
	uint64_t foreign_runs;	/* runs of threads outside the target, dropped */
	uint64_t items_before;	/* before t0, not drawn */
	uint64_t items_dropped; /* beyond a stream's share of max_items, its oldest: not drawn */
	uint64_t image_skipped; /* mappings whose code could not be read */
	uint64_t slices, gaps;
	uint64_t first_ns, last_ns; /* the span of the runs drawn (0 when none was) */
};

/*
 * Decode IN->cap into TL (per thread, on its thread track, made when
 * missing). STATS may be NULL. Returns 0 (a stream that does not decode
 * is counted and drawn as gaps), or -1 with ht_last_error() set when
 * nothing could be done (no memory, a capture without clock pairs).
 */
int ht_pt_dump_build(struct timeline *tl, const struct ht_pt_dump_input *in,
		     struct ht_pt_dump_stats *stats);

#endif /* HT_PT_DUMP_H */
