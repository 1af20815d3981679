/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The context switches of a flight-recorder window, per CPU, in time order:
 * who ran on a CPU at any moment in O(log n).
 */
#ifndef HT_SCHED_INDEX_H
#define HT_SCHED_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kernel/recorder.h"

struct ht_cpu_switches {
	uint64_t *ts;	    /* switch times */
	uint32_t *next;	    /* who ran from each switch on */
	uint32_t *prev;	    /* who left at each switch */
	uint32_t *prev_state;
	size_t count;
	bool entry_valid;   /* what ran at the window's start is known */
	uint32_t entry_next;
};

struct ht_sched_index {
	unsigned int ncpus;
	uint64_t complete_from_ns; /* every switch from then on is in (a wrapped ring: later) */
	struct ht_cpu_switches *cpu;
};

/* Index the switches of W. Returns 0, or -1 with ht_last_error(). */
int ht_sched_index_build(const struct ht_fr_window *w, struct ht_sched_index *idx);
void ht_sched_index_free(struct ht_sched_index *idx);

/*
 * Who ran on CPU at time T: the last switch at or before T, else the task
 * the first switch after T took off. False if unknown (no switch at all).
 */
bool ht_sched_running_at(const struct ht_sched_index *idx, unsigned int cpu, uint64_t t,
			 uint32_t *pid);

/* Index of the first switch on CPU strictly after T. */
size_t ht_sched_first_after(const struct ht_sched_index *idx, unsigned int cpu, uint64_t t);

#endif /* HT_SCHED_INDEX_H */
