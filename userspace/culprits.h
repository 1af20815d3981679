/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What ran instead: for a thread that waited in a run queue, the tasks that
 * held the CPUs it was queued on, following its migrations, from the flight
 * recorder's context switches.
 */
#ifndef HT_CULPRITS_H
#define HT_CULPRITS_H

#include <stdint.h>
#include "recorder.h"
#include "sched_index.h"

#define HT_MAX_CULPRITS 8

struct ht_culprit {
	uint32_t pid;
	uint32_t cpu; /* where it held the CPU the longest */
	uint64_t ns;
};

struct ht_culprits {
	struct ht_culprit top[HT_MAX_CULPRITS]; /* longest first */
	unsigned int count;
	uint64_t other_ns;   /* tasks beyond the top ones */
	uint64_t unknown_ns; /* time the recorder cannot account for */
};

/* Part of a wait spent queued on one CPU. */
struct ht_queue_segment {
	unsigned int cpu;
	uint64_t start_ns, end_ns;
};

/* Charge the wait of TID, queued on SEGS in turn, to whoever held those CPUs. */
void ht_culprits_for_segments(const struct ht_sched_index *idx, uint32_t tid,
			      const struct ht_queue_segment *segs, size_t nsegs,
			      struct ht_culprits *out);

/*
 * TID waited from START to END, queued first on START_CPU; its migrations
 * come from W, which must cover [start, end].
 */
void ht_culprits_compute(const struct ht_fr_window *w, const struct ht_sched_index *idx,
			 uint32_t tid, uint64_t start, uint64_t end, unsigned int start_cpu,
			 struct ht_culprits *out);

#endif /* HT_CULPRITS_H */
